/* The HTTP port of a daemon (http.h): an acceptor that looks at each new
 * connection's first bytes, libmicrohttpd event loops that parse requests,
 * and a worker pool for the requests that may block.
 *
 * Acceptor. libmicrohttpd cannot tell a Thrift frame from a slow request
 * line (it would wait for a CRLF until its timeout), so the acceptor holds
 * each new connection in its own epoll set until bytes arrive, peeks at
 * them, and then either answers (Thrift: an IxiaError naming this port; a
 * plain request on a TLS port: a plain 400) or hands the socket to one of
 * the event loops with MHD_add_connection, round-robin. (libmicrohttpd's
 * own thread pool needs its own listening socket, so there is one daemon
 * object per event loop, each without a listening socket.) Connections
 * that never speak are closed after http.request_timeout_ms and cost no
 * event loop meanwhile.
 *
 * Requests. The access handler gathers the body (bounded: 413 as soon as
 * Content-Length or the bytes received pass the limit), then runs the
 * daemon's handler inline on the event loop. A handler that would block
 * defers (ixia_server_defer): the connection is suspended, the request runs
 * on a worker, and the worker resumes the connection, whose access handler
 * then queues the prepared response. Built-in routes: /healthz, /readyz,
 * /metrics. */
#include "http.h"

#include <stdatomic.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bytes.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "server.h"
#include "wire.h"

/* How often the acceptor looks for silent new connections. */
#define ACCEPT_TICK_MS 250
/* Bytes of a Thrift call the acceptor reads to answer it. */
#define THRIFT_PEEK 512

typedef struct {
  int fd;
  gint64 since;
  struct sockaddr_storage addr;
  socklen_t addr_len;
  gboolean edge; /* watched edge-triggered: bytes are here, more are awaited */
} pending_t;

struct ixia_http {
  char *name;
  ixia_http_opts_t o;
  int listen_fd;
  int port;
  gboolean tls;
  char *tls_cert, *tls_key;
  struct MHD_Daemon **loops;
  guint n_loops, next_loop;
  GThread *acceptor;
  int epfd, wakefd;
  _Atomic gint stopping;
  GHashTable *pending; /* fd -> pending_t */
  GThreadPool *pool;
  _Atomic gint queued;
  gint max_queued;
  _Atomic gint open;           /* connections handed to the event loops */
  gint max_connections;
  gsize max_body;
  gint64 first_bytes_us;
  ixia_metric_family_t *connections;
};

typedef struct {
  char *name, *value;
} header_t;

struct ixia_http_req {
  ixia_http_t *h;
  struct MHD_Connection *conn;
  char *method, *path;
  GByteArray *body;
  gsize body_limit;
  gboolean too_large;
  gboolean replied;
  gboolean running; /* on a worker; the connection is suspended */
  guint status;
  char *content_type;
  char *out;
  gsize out_len;
  gboolean out_static;
  GArray *headers; /* header_t */
  const char *call;
  gint64 start_us;
};

/* ---------- requests ---------- */

const char *ixia_http_method(const ixia_http_req_t *r) { return r->method; }
const char *ixia_http_path(const ixia_http_req_t *r) { return r->path; }

const char *ixia_http_header(const ixia_http_req_t *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *ixia_http_arg(const ixia_http_req_t *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *ixia_http_body(const ixia_http_req_t *r, gsize *len) {
  if (len) *len = r->body ? r->body->len : 0;
  return r->body && r->body->len ? (const char *)r->body->data : "";
}

void ixia_http_set_call(ixia_http_req_t *r, const char *call) { r->call = call; }

void ixia_http_add_header(ixia_http_req_t *r, const char *name, const char *value) {
  header_t hd = {g_strdup(name), g_strdup(value)};
  g_array_append_val(r->headers, hd);
}

void ixia_http_reply(ixia_http_req_t *r, guint status, const char *content_type, char *body,
                     gsize len) {
  if (r->replied) {
    g_free(body);
    return;
  }
  r->replied = TRUE;
  r->status = status;
  r->content_type = g_strdup(content_type);
  r->out = body;
  r->out_len = body ? len : 0;
}

void ixia_http_reply_static(ixia_http_req_t *r, guint status, const char *content_type,
                            const char *body, gsize len) {
  ixia_http_reply(r, status, content_type, NULL, 0);
  r->out = (char *)body;
  r->out_len = len;
  r->out_static = TRUE;
}

void ixia_http_reply_json(ixia_http_req_t *r, guint status, char *json) {
  /* A trailing newline: curl output and NDJSON tools read better. */
  gsize len = strlen(json);
  char *text = g_realloc(json, len + 2);
  text[len] = '\n';
  text[len + 1] = 0;
  ixia_http_reply(r, status, "application/json", text, len + 1);
}

guint ixia_http_status_of(ixia_code_t code) {
  switch (code) {
    case IXIA_OK: return MHD_HTTP_OK;
    case IXIA_EINVAL:
    case IXIA_ETYPE:
      return MHD_HTTP_BAD_REQUEST;
    case IXIA_ENOTFOUND: return MHD_HTTP_NOT_FOUND;
    case IXIA_ECONFLICT: return MHD_HTTP_CONFLICT;
    case IXIA_ETOOLARGE: return MHD_HTTP_CONTENT_TOO_LARGE;
    case IXIA_EUNAVAILABLE: return MHD_HTTP_SERVICE_UNAVAILABLE;
    case IXIA_EUNSUPPORTED: return MHD_HTTP_NOT_IMPLEMENTED;
    case IXIA_EEXHAUSTED: return MHD_HTTP_TOO_MANY_REQUESTS;
    case IXIA_EUNAUTHENTICATED: return MHD_HTTP_UNAUTHORIZED;
    case IXIA_EDENIED: return MHD_HTTP_FORBIDDEN;
    case IXIA_EDEADLINE: return MHD_HTTP_GATEWAY_TIMEOUT;
    case IXIA_ENOTCAUGHTUP: return MHD_HTTP_SERVICE_UNAVAILABLE;
    case IXIA_ESHARD: return MHD_HTTP_SERVICE_UNAVAILABLE;
    case IXIA_EINTERNAL: break;
  }
  return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

void ixia_http_reply_error(ixia_http_req_t *r, ixia_error_t *err) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "code", ixia_code_name(err->code));
  cJSON_AddStringToObject(o, "message", err->message);
  guint status = ixia_http_status_of(err->code);
  if (err->code == IXIA_EUNAUTHENTICATED)
    ixia_http_add_header(r, "WWW-Authenticate", "Bearer realm=\"ixia\"");
  if (!r->replied) ixia_metrics_call_error("http", r->call, ixia_code_name(err->code));
  ixia_error_destroy(err);
  ixia_http_reply_json(r, status, ixia_json_print(o));
  cJSON_Delete(o);
}

static void req_free(ixia_http_req_t *r) {
  if (!r) return;
  g_free(r->method);
  g_free(r->path);
  if (r->body) g_byte_array_unref(r->body);
  g_free(r->content_type);
  if (!r->out_static) g_free(r->out);
  for (guint i = 0; i < r->headers->len; i++) {
    header_t *hd = &g_array_index(r->headers, header_t, i);
    g_free(hd->name);
    g_free(hd->value);
  }
  g_array_free(r->headers, TRUE);
  g_free(r);
}

/* ---------- built-in routes ---------- */

static void healthz(ixia_http_req_t *r) {
  static const char ok[] = "{\"status\": \"ok\"}\n";
  ixia_http_set_call(r, "healthz");
  ixia_http_reply_static(r, MHD_HTTP_OK, "application/json", ok, sizeof ok - 1);
}

static void readyz(ixia_http_req_t *r) {
  ixia_http_set_call(r, "readyz");
  if (ixia_server_on_io_thread() && r->h->o.ready) {
    ixia_server_defer(); /* readiness may ask other daemons */
    return;
  }
  GPtrArray *reasons = g_ptr_array_new_with_free_func(g_free);
  gboolean ready = !r->h->o.ready || r->h->o.ready(r->h->o.user, reasons);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddBoolToObject(o, "ready", ready && reasons->len == 0);
  cJSON *arr = cJSON_AddArrayToObject(o, "reasons");
  for (guint i = 0; i < reasons->len; i++)
    cJSON_AddItemToArray(arr, cJSON_CreateString(g_ptr_array_index(reasons, i)));
  ixia_http_reply_json(r, ready && reasons->len == 0 ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                       ixia_json_print(o));
  cJSON_Delete(o);
  g_ptr_array_unref(reasons);
}

static void metrics(ixia_http_req_t *r) {
  ixia_http_set_call(r, "metrics");
  char *text = ixia_metrics_render(ixia_metrics_default());
  ixia_http_reply(r, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
}

static void run_handler(gpointer data) {
  ixia_http_req_t *r = data;
  ixia_http_t *h = r->h;
  gboolean get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
  if (get && strcmp(r->path, "/healthz") == 0) healthz(r);
  else if (get && strcmp(r->path, "/readyz") == 0) readyz(r);
  else if (get && strcmp(r->path, "/metrics") == 0) metrics(r);
  else if (h->o.handler) h->o.handler(r, h->o.user);
  else
    ixia_http_reply_error(r, ixia_error_new(IXIA_ENOTFOUND,
                                            "no such path on %s: it serves /metrics, /healthz and "
                                            "/readyz",
                                            h->name));
}

/* ---------- libmicrohttpd callbacks ---------- */

/* The latency series of a call, remembered per thread by the name's
 * address (call names are static strings: ixia_http_set_call): building
 * the label text and hashing it per request cost 2% of a cached get's
 * CPU. */
static ixia_metric_series_t *call_latency(const char *call) {
  static __thread struct {
    const char *call;
    ixia_metric_series_t *s;
  } memo[8];
  static __thread guint next;
  if (!call) call = "other";
  for (guint i = 0; i < G_N_ELEMENTS(memo); i++)
    if (memo[i].call == call) return memo[i].s;
  ixia_metric_series_t *s = ixia_metrics_call_latency("http", call);
  memo[next].call = call, memo[next].s = s;
  next = (next + 1) % G_N_ELEMENTS(memo);
  return s;
}

static enum MHD_Result queue(ixia_http_req_t *r) {
  struct MHD_Response *resp;
  if (!r->replied) {
    ixia_http_reply_error(r, ixia_error_new(IXIA_EINTERNAL, "the handler gave no answer"));
  }
  if (r->out_static)
    resp = MHD_create_response_from_buffer(r->out_len, r->out, MHD_RESPMEM_PERSISTENT);
  else {
    resp = r->out ? MHD_create_response_from_buffer_with_free_callback(r->out_len, r->out, g_free)
                  : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    r->out = NULL; /* the response owns it now */
  }
  if (!resp) return MHD_NO;
  if (r->content_type) MHD_add_response_header(resp, "Content-Type", r->content_type);
  for (guint i = 0; i < r->headers->len; i++) {
    header_t *hd = &g_array_index(r->headers, header_t, i);
    MHD_add_response_header(resp, hd->name, hd->value);
  }
  enum MHD_Result ret = MHD_queue_response(r->conn, r->status, resp);
  MHD_destroy_response(resp);
  ixia_metric_observe(call_latency(r->call),
                      (double)(g_get_monotonic_time() - r->start_us) / 1e6);
  return ret;
}

static void run_on_worker(gpointer data, gpointer user) {
  ixia_http_req_t *r = data;
  ixia_http_t *h = user;
  atomic_fetch_add(&h->queued, -1);
  run_handler(r);
  if (!r->replied)
    ixia_http_reply_error(r, ixia_error_new(IXIA_EINTERNAL, "the handler gave no answer"));
  r->running = FALSE;
  MHD_resume_connection(r->conn);
}

static const char *first_segment_call(const char *path) {
  /* Metric label for requests no handler named: bounded on purpose. */
  (void)path;
  return "other";
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
  (void)version;
  ixia_http_t *h = cls;
  ixia_http_req_t *r = *con_cls;
  if (!r) {
    r = g_new0(ixia_http_req_t, 1);
    r->h = h;
    r->conn = conn;
    r->method = g_strdup(method);
    r->path = g_strdup(url);
    r->headers = g_array_new(FALSE, FALSE, sizeof(header_t));
    r->call = first_segment_call(url);
    r->start_us = g_get_monotonic_time();
    r->body_limit = h->o.body_limit ? h->o.body_limit(method, url, h->o.user) : h->max_body;
    *con_cls = r;
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && g_ascii_strtoull(cl, NULL, 10) > r->body_limit) {
      /* Answered before the body is read; the connection closes after. */
      ixia_http_reply_error(r, ixia_error_new(IXIA_ETOOLARGE,
                                              "request body of %s bytes is over the limit of %zu "
                                              "bytes (%s)",
                                              cl, r->body_limit,
                                              r->body_limit == h->max_body ? "http.max_body_bytes"
                                                                           : "http.max_bulk_bytes"));
      return queue(r);
    }
    return MHD_YES;
  }
  if (*upload_data_size) {
    if (!r->too_large) {
      if (!r->body) r->body = g_byte_array_new();
      if (r->body->len + *upload_data_size > r->body_limit) r->too_large = TRUE;
      else g_byte_array_append(r->body, (const guint8 *)upload_data, (guint)*upload_data_size);
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (r->running) return MHD_YES;
  if (r->replied) return queue(r);
  if (r->too_large) {
    ixia_http_reply_error(r, ixia_error_new(IXIA_ETOOLARGE,
                                            "request body is over the limit of %zu bytes (%s)",
                                            r->body_limit,
                                            r->body_limit == h->max_body ? "http.max_body_bytes"
                                                                         : "http.max_bulk_bytes"));
    return queue(r);
  }
  if (r->body) {
    /* NUL-terminated for the handlers, the terminator not counted. */
    g_byte_array_append(r->body, (const guint8 *)"", 1);
    g_byte_array_set_size(r->body, r->body->len - 1);
  }
  if (ixia_server_run_inline(run_handler, r)) return queue(r);
  /* Deferred: run on a worker while the connection waits suspended. */
  if (atomic_fetch_add(&h->queued, 1) >= h->max_queued) {
    atomic_fetch_add(&h->queued, -1);
    ixia_http_reply_error(r, ixia_error_new(IXIA_EEXHAUSTED,
                                            "too many requests waiting (http.max_queued=%d); "
                                            "retry later",
                                            h->max_queued));
    return queue(r);
  }
  r->running = TRUE;
  MHD_suspend_connection(conn);
  g_thread_pool_push(h->pool, r, NULL);
  return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls, (void)conn, (void)toe;
  req_free(*con_cls);
  *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  (void)conn, (void)socket_context;
  ixia_http_t *h = cls;
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) atomic_fetch_add(&h->open, -1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  ixia_http_t *h = cls;
  char *msg = g_strdup_vprintf(fmt, ap);
  g_strchomp(msg);
  IXIA_DEBUG("%s http: %s", h->name, msg);
  g_free(msg);
}

/* ---------- the acceptor ---------- */

static void send_all_and_close(int fd, const char *data, gsize len) {
  gsize off = 0;
  while (off < len) {
    ssize_t w = send(fd, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w <= 0) break;
    off += (gsize)w;
  }
  close(fd);
}

/* Answers a connection the event loops never see with a JSON error. */
static void refuse_and_close(int fd, const char *status, const char *code, const char *message) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "code", code);
  cJSON_AddStringToObject(o, "message", message);
  char *body = ixia_json_print(o);
  cJSON_Delete(o);
  char *resp = g_strdup_printf("HTTP/1.1 %s\r\nContent-Type: application/json\r\nConnection: "
                               "close\r\nContent-Length: %zu\r\n\r\n%s\n",
                               status, strlen(body) + 1, body);
  send_all_and_close(fd, resp, strlen(resp));
  g_free(resp);
  g_free(body);
}

static void drop_pending(ixia_http_t *h, int fd, gboolean close_it) {
  epoll_ctl(h->epfd, EPOLL_CTL_DEL, fd, NULL);
  g_hash_table_remove(h->pending, GINT_TO_POINTER(fd));
  if (close_it) close(fd);
}

/* TRUE when bytes can start "METHOD SP": a token of letters, then a
 * space (or not enough bytes yet to tell). */
static gboolean request_line_start_ok(const guint8 *b, gsize n) {
  gsize i = 0;
  while (i < n && i < 32 && g_ascii_isupper(b[i])) i++;
  if (i == n) return TRUE; /* all letters so far */
  return i > 0 && b[i] == ' ';
}

/* Watches a connection whose bytes so far cannot be decided on for new
 * bytes or its close only: watched level-triggered, the bytes already
 * waiting would wake the acceptor again at once, and it would spin (a
 * whole core until http.request_timeout_ms, for one connection that sent
 * the start of a Thrift call and no more). */
static void await_more(ixia_http_t *h, pending_t *p) {
  if (p->edge) return;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = p->fd};
  if (epoll_ctl(h->epfd, EPOLL_CTL_MOD, p->fd, &ev) != 0) {
    drop_pending(h, p->fd, TRUE);
    return;
  }
  p->edge = TRUE;
}

/* Decides what a connection that sent bytes is; events: epoll's. */
static void on_first_bytes(ixia_http_t *h, pending_t *p, guint32 events) {
  guint8 buf[THRIFT_PEEK];
  int fd = p->fd;
  ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    drop_pending(h, fd, TRUE);
    return;
  }
  if (buf[0] == 0 && n >= 6 && buf[4] == 0x80 && buf[5] == 0x01) {
    /* A framed binary Thrift call: answer in Thrift. */
    const char *name = "";
    guint32 name_len = 0;
    gint32 seqid = 0;
    if (!ixia_wire_peek_call(buf + 4, (gsize)n - 4, &name, &name_len, &seqid)) {
      /* More bytes may name the call while the frame is not all here and
       * the client has not closed; otherwise the call is malformed or cut
       * short, and is answered without its name. */
      if ((gsize)n < sizeof buf && (gsize)n - 4 < ixia_bytes_get32(buf) &&
          !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        await_more(h, p);
        return;
      }
      name = "";
      name_len = 0;
      seqid = 0;
    }
    char *msg = g_strdup_printf("this is the HTTP port of %s (HTTP/1.1%s, docs/HTTP.md); Thrift "
                                "clients connect to its Thrift port",
                                h->name, h->tls ? " over TLS" : "");
    GByteArray *out = g_byte_array_new();
    g_byte_array_set_size(out, 4);
    ixia_wire_append_error(out, name, name_len, seqid, IXIA_EINVAL, msg);
    guint32 be = GUINT32_TO_BE(out->len - 4);
    memcpy(out->data, &be, 4);
    IXIA_WARN("%s http: closing a connection that sent a Thrift frame to the HTTP port", h->name);
    drop_pending(h, fd, FALSE);
    send_all_and_close(fd, (const char *)out->data, out->len);
    g_byte_array_free(out, TRUE);
    g_free(msg);
    return;
  }
  if (!h->tls && !request_line_start_ok(buf, (gsize)n)) {
    /* Not the start of an HTTP request line (METHOD SP ...): answered here,
     * since libmicrohttpd would close such a connection without a word. */
    drop_pending(h, fd, FALSE);
    refuse_and_close(fd, "400 Bad Request", "INVALID_ARGUMENT",
                     "malformed HTTP request line (expected METHOD /path HTTP/1.1)");
    return;
  }
  if (h->tls && n >= 4 && ixia_wire_http_refusal(buf, (gsize)n)) {
    drop_pending(h, fd, FALSE);
    refuse_and_close(fd, "400 Bad Request", "INVALID_ARGUMENT",
                     "this port speaks HTTPS only (http.tls_cert_file)");
    return;
  }
  struct sockaddr_storage addr = p->addr;
  socklen_t addr_len = p->addr_len;
  drop_pending(h, fd, FALSE);
  struct MHD_Daemon *loop = h->loops[h->next_loop++ % h->n_loops];
  atomic_fetch_add(&h->open, 1);
  if (MHD_add_connection(loop, fd, (const struct sockaddr *)&addr, addr_len) != MHD_YES) {
    atomic_fetch_add(&h->open, -1); /* libmicrohttpd closed the socket */
    IXIA_WARN("%s http: cannot take a connection: %s", h->name, g_strerror(errno));
  }
}

static void accept_some(ixia_http_t *h, gint64 now) {
  for (int i = 0; i < 64; i++) {
    pending_t p = {.addr_len = sizeof p.addr};
    p.fd = accept4(h->listen_fd, (struct sockaddr *)&p.addr, &p.addr_len,
                   SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (p.fd < 0) return;
    gint total = atomic_load(&h->open) + (gint)g_hash_table_size(h->pending);
    if (total >= h->max_connections) {
      char *msg = g_strdup_printf("server busy: %d HTTP connections are open, the limit is "
                                  "http.max_connections=%d; try again later",
                                  total, h->max_connections);
      refuse_and_close(p.fd, "503 Service Unavailable", "UNAVAILABLE", msg);
      g_free(msg);
      continue;
    }
    p.since = now;
    pending_t *held = g_memdup2(&p, sizeof p);
    g_hash_table_insert(h->pending, GINT_TO_POINTER(p.fd), held);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = p.fd};
    if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, p.fd, &ev) != 0) drop_pending(h, p.fd, TRUE);
  }
}

static void expire_pending(ixia_http_t *h, gint64 now) {
  GHashTableIter it;
  gpointer v;
  GArray *old = g_array_new(FALSE, FALSE, sizeof(int));
  g_hash_table_iter_init(&it, h->pending);
  while (g_hash_table_iter_next(&it, NULL, &v)) {
    pending_t *p = v;
    if (now - p->since > h->first_bytes_us) g_array_append_val(old, p->fd);
  }
  for (guint i = 0; i < old->len; i++) drop_pending(h, g_array_index(old, int, i), TRUE);
  g_array_free(old, TRUE);
}

static gpointer acceptor_main(gpointer data) {
  ixia_http_t *h = data;
  struct epoll_event evs[128];
  gint64 next_tick = 0;
  while (!atomic_load(&h->stopping)) {
    int n = epoll_wait(h->epfd, evs, G_N_ELEMENTS(evs), ACCEPT_TICK_MS);
    gint64 now = g_get_monotonic_time();
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == h->listen_fd) accept_some(h, now);
      else if (fd != h->wakefd) {
        pending_t *p = g_hash_table_lookup(h->pending, GINT_TO_POINTER(fd));
        if (p) on_first_bytes(h, p, evs[i].events);
      }
    }
    if (now >= next_tick) {
      expire_pending(h, now);
      next_tick = now + ACCEPT_TICK_MS * 1000;
    }
  }
  return NULL;
}

/* ---------- life cycle ---------- */

static gboolean read_pem(const char *path, const char *option, char **out, ixia_error_t **err) {
  GError *gerr = NULL;
  if (g_file_get_contents(path, out, NULL, &gerr)) return TRUE;
  ixia_error_set(err, IXIA_EINVAL, "%s: %s", option, gerr->message);
  g_error_free(gerr);
  return FALSE;
}

ixia_http_t *ixia_http_new(const ixia_config_t *cfg, const ixia_http_opts_t *o, ixia_error_t **err) {
  ixia_http_t *h = g_new0(ixia_http_t, 1);
  h->name = g_strdup(o->name);
  h->o = *o;
  h->listen_fd = h->epfd = h->wakefd = -1;
  h->pending = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  h->max_queued = (gint)ixia_config_int(cfg, "http.max_queued");
  h->max_connections = (gint)ixia_config_int(cfg, "http.max_connections");
  h->max_body = (gsize)ixia_config_int(cfg, "http.max_body_bytes");
  h->first_bytes_us = ixia_config_int(cfg, "http.request_timeout_ms") * 1000;
  const char *cert = ixia_config_str(cfg, "http.tls_cert_file");
  const char *key = ixia_config_str(cfg, "http.tls_key_file");
  gboolean ok = TRUE;
  if (*cert || *key) {
    ok = *cert && *key ? TRUE
                       : ixia_error_set(err, IXIA_EINVAL,
                                        "TLS needs both http.tls_cert_file and http.tls_key_file");
    ok = ok && read_pem(cert, "http.tls_cert_file", &h->tls_cert, err) &&
         read_pem(key, "http.tls_key_file", &h->tls_key, err);
    h->tls = ok;
  }
  if (ok) {
    h->listen_fd = ixia_listen(o->host, o->port, "HTTP", &h->port, err);
    ok = h->listen_fd >= 0;
  }
  h->n_loops = (guint)ixia_config_int(cfg, "http.threads");
  h->loops = g_new0(struct MHD_Daemon *, h->n_loops);
  unsigned int idle_s = (unsigned int)MAX(1, ixia_config_int(cfg, "http.idle_timeout_ms") / 1000);
  unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET |
                       MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (h->tls ? MHD_USE_TLS : 0);
  for (guint i = 0; ok && i < h->n_loops; i++) {
    struct MHD_OptionItem tls_opts[] = {
        {h->tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, h->tls_key},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert},
        {MHD_OPTION_END, 0, NULL},
    };
    h->loops[i] = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, h, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)ixia_config_int(cfg, "http.max_header_bytes"), MHD_OPTION_CONNECTION_TIMEOUT,
        idle_s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, MHD_OPTION_ARRAY, tls_opts,
        MHD_OPTION_END);
    if (!h->loops[i])
      ok = ixia_error_set(err, IXIA_EINTERNAL, "cannot start the HTTP event loop%s",
                          h->tls ? " (check the TLS certificate and key)" : "");
  }
  if (ok) {
    GError *gerr = NULL;
    h->pool = g_thread_pool_new(run_on_worker, h, (gint)ixia_config_int(cfg, "http.workers"),
                                FALSE, &gerr);
    if (!h->pool) ok = ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "HTTP workers");
  }
  if (ok) {
    h->epfd = epoll_create1(EPOLL_CLOEXEC);
    h->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = h->listen_fd};
    struct epoll_event wev = {.events = EPOLLIN, .data.fd = h->wakefd};
    ok = h->epfd >= 0 && h->wakefd >= 0 && epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->listen_fd, &lev) == 0 &&
         epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->wakefd, &wev) == 0;
    if (!ok) ixia_error_set(err, IXIA_EINTERNAL, "HTTP acceptor: %s", g_strerror(errno));
  }
  if (ok && o->collect) ixia_metrics_add_collector(ixia_metrics_default(), o->collect, o->user);
  if (ok) {
    h->acceptor = g_thread_new("ixia-http-acc", acceptor_main, h);
    if (o->port_file && *o->port_file) {
      char port[16];
      snprintf(port, sizeof port, "%d\n", h->port);
      ok = ixia_write_file_atomic(o->port_file, port, err);
    }
  }
  if (!ok) {
    ixia_http_destroy(h);
    return NULL;
  }
  IXIA_INFO("%s: HTTP%s on %s:%d (/metrics, /healthz, /readyz%s)", o->name, h->tls ? "S" : "",
            o->host, h->port, o->handler ? ", the HTTP/JSON API" : "");
  return h;
}

int ixia_http_port(const ixia_http_t *h) { return h->port; }
gboolean ixia_http_tls(const ixia_http_t *h) { return h->tls; }

void ixia_http_destroy(ixia_http_t *h) {
  if (!h) return;
  atomic_store(&h->stopping, 1);
  if (h->wakefd >= 0) {
    guint64 one = 1;
    ssize_t w = write(h->wakefd, &one, sizeof one);
    (void)w;
  }
  if (h->acceptor) g_thread_join(h->acceptor);
  /* Requests on workers finish and resume their connections first. */
  if (h->pool) g_thread_pool_free(h->pool, FALSE, TRUE);
  for (guint i = 0; h->loops && i < h->n_loops; i++)
    if (h->loops[i]) MHD_stop_daemon(h->loops[i]);
  if (h->o.collect) ixia_metrics_remove_collector(ixia_metrics_default(), h->o.collect, h->o.user);
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, h->pending);
  while (g_hash_table_iter_next(&it, &k, NULL)) close(GPOINTER_TO_INT(k));
  g_hash_table_destroy(h->pending);
  if (h->listen_fd >= 0) close(h->listen_fd);
  if (h->epfd >= 0) close(h->epfd);
  if (h->wakefd >= 0) close(h->wakefd);
  g_free(h->loops);
  g_free(h->tls_cert);
  g_free(h->tls_key);
  g_free(h->name);
  g_free(h);
}
