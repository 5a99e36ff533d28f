/* The HTTP port of every ixia daemon (libmicrohttpd): /healthz, /readyz and
 * /metrics everywhere, plus the routes a daemon adds (the query API's
 * HTTP/JSON interface and its status console).
 *
 * Why libmicrohttpd: Debian ships it (libmicrohttpd-dev), it is small, kept
 * by GNU, parses HTTP/1.1 with keep-alive and chunked bodies, bounds each
 * connection's header memory, and speaks TLS through GnuTLS; its
 * epoll-driven threads hold idle connections without a thread each.
 *
 * Shape. An acceptor thread owns the listening socket and every new
 * connection until its first bytes arrive: a Thrift frame sent here by
 * mistake gets a Thrift IxiaError answer saying this is the HTTP port (and
 * plain HTTP sent to a TLS port a plain 400 saying so), idle sockets that
 * never speak are closed after http.request_timeout_ms, and everything else
 * is handed to one of http.threads libmicrohttpd event loops. A request's
 * handler runs first on its event loop (ixia_server_run_inline): calls that
 * may block (a disk read, memcached, a write, a query fan-out) call
 * ixia_server_defer() and return, and the request is suspended and run
 * again on one of http.workers threads. So cached gets answer without a
 * thread hand-off, and slow calls never stall the other connections.
 *
 * Limits (config http.*): open connections, header bytes per connection,
 * body bytes (http.max_body_bytes; a daemon may allow more on some routes),
 * requests waiting for a worker (429 beyond), and timeouts.
 *
 * Thread safety: new/destroy from one controlling thread. A request object
 * belongs to the one thread running its handler. */
#ifndef IXIA_HTTP_H
#define IXIA_HTTP_H

#include <glib.h>

#include "config.h"
#include "error.h"

typedef struct ixia_http ixia_http_t;
typedef struct ixia_http_req ixia_http_req_t;

/* Runs a request (other than the built-in /healthz, /readyz, /metrics).
 * It must reply (ixia_http_reply*) or, on an event loop, may call
 * ixia_server_defer() and return without replying to run again on a
 * worker. */
typedef void (*ixia_http_handler_fn)(ixia_http_req_t *req, gpointer user);
/* Readiness: TRUE when ready; otherwise appends one reason per problem to
 * reasons (g_strdup'd strings). Runs on a worker: it may block briefly. */
typedef gboolean (*ixia_http_ready_fn)(gpointer user, GPtrArray *reasons);
/* The body limit of a request, from its method and path. */
typedef gsize (*ixia_http_body_limit_fn)(const char *method, const char *path, gpointer user);

typedef struct {
  const char *name;      /* daemon name, for logs */
  const char *host;
  int port;              /* 0 = a free port */
  const char *port_file; /* "" or NULL: none */
  ixia_http_handler_fn handler; /* NULL: every other path is 404 */
  ixia_http_ready_fn ready;     /* NULL: ready once serving */
  ixia_http_body_limit_fn body_limit; /* NULL: http.max_body_bytes */
  /* The daemon's own /metrics families (metrics.h), registered while the
   * port serves; NULL: none. */
  void (*collect)(GString *out, gpointer user);
  gpointer user;
} ixia_http_opts_t;

/* Binds, starts the threads and writes the port file. TLS when
 * http.tls_cert_file and http.tls_key_file are set. */
ixia_http_t *ixia_http_new(const ixia_config_t *cfg, const ixia_http_opts_t *o, ixia_error_t **err);
int ixia_http_port(const ixia_http_t *h);
gboolean ixia_http_tls(const ixia_http_t *h);
/* Stops accepting, finishes running requests and closes everything. */
void ixia_http_destroy(ixia_http_t *h);

/* ---- requests ---- */
const char *ixia_http_method(const ixia_http_req_t *r);
/* The path, percent-decoded by libmicrohttpd, without the query string. */
const char *ixia_http_path(const ixia_http_req_t *r);
/* A header or query argument (NULL when absent). */
const char *ixia_http_header(const ixia_http_req_t *r, const char *name);
const char *ixia_http_arg(const ixia_http_req_t *r, const char *name);
/* The whole body (NUL-terminated; "" when none). */
const char *ixia_http_body(const ixia_http_req_t *r, gsize *len);
/* The call name this request counts under in the latency and error
 * metrics (a static string; default: the path's first segment). */
void ixia_http_set_call(ixia_http_req_t *r, const char *call);

/* ---- replies (one per request) ---- */
/* Takes body (g_malloc'd, may be NULL for none). */
void ixia_http_reply(ixia_http_req_t *r, guint status, const char *content_type, char *body,
                     gsize len);
void ixia_http_reply_static(ixia_http_req_t *r, guint status, const char *content_type,
                            const char *body, gsize len);
/* Takes json (g_malloc'd). */
void ixia_http_reply_json(ixia_http_req_t *r, guint status, char *json);
/* {"code": NAME, "message": ...} with the status of the code; takes err. */
void ixia_http_reply_error(ixia_http_req_t *r, ixia_error_t *err);
/* An extra response header (call before replying). */
void ixia_http_add_header(ixia_http_req_t *r, const char *name, const char *value);

/* The HTTP status of an error code: 400 bad input, 401/403 keys, 404, 409,
 * 413 too large, 429 refused for now (RESOURCE_EXHAUSTED), 503
 * unavailable, 500 otherwise. */
guint ixia_http_status_of(ixia_code_t code);

#endif
