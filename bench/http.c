/* http-get-hot: the cached gets of get-hot over the HTTP/JSON interface,
 * on keep-alive connections driven as get-hot's are (event-driven by
 * default), so bench/run.sh can put the two transports side by side (goal:
 * HTTP >= 80% of Thrift).
 *
 * The blocking client (--rate) is a minimal HTTP/1.1 one: one request
 * written at once, the status line and headers read up to the blank line,
 * then exactly Content-Length bytes, so the connection stays usable for the
 * next request. Anything but 200 with a body is an error. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "bench.h"
#include "data.h"

typedef struct {
  int fd;
  GString *in;
} http_conn_t;

static gpointer http_open(ixia_bench_run_t *r, ixia_error_t **err) {
  int fd = ixia_bench_tcp_connect(r->o->http, "--http", err);
  if (fd < 0) return NULL;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  http_conn_t *c = g_new0(http_conn_t, 1);
  c->fd = fd;
  c->in = g_string_sized_new(8192);
  return c;
}

static void http_close(gpointer conn) {
  http_conn_t *c = conn;
  if (!c) return;
  close(c->fd);
  g_string_free(c->in, TRUE);
  g_free(c);
}

/* Reads until `in` holds at least `want` bytes. */
static gboolean fill(http_conn_t *c, gsize want) {
  char buf[16384];
  while (c->in->len < want) {
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return FALSE;
    g_string_append_len(c->in, buf, n);
  }
  return TRUE;
}

/* The get of a random hot key (its name in key): the request's length in
 * req, or -1 with err when it does not fit. */
static int http_get_text(ixia_bench_worker_t *w, char *key, gsize key_size, char *req, gsize size,
                         ixia_error_t **err) {
  ixia_bench_key((guint64)g_rand_int_range(w->rnd, 0, (gint32)w->run->o->hot_keys), key, key_size);
  const char *auth = ixia_auth_client_key();
  int len = snprintf(req, size, "GET /v1/" IXIA_BENCH_NS "/" IXIA_BENCH_TABLE "/docs/%s HTTP/1.1\r\n"
                     "Host: bench\r\n%s%s%s\r\n", key, auth ? "Authorization: Bearer " : "",
                     auth ? auth : "", auth ? "\r\n" : "");
  if (len < 0 || (gsize)len >= size) {
    ixia_error_set(err, IXIA_EINVAL, "http get: the request is over %zu bytes", size);
    return -1;
  }
  return len;
}

static gboolean http_get_op(ixia_bench_worker_t *w, gpointer conn, ixia_error_t **err) {
  http_conn_t *c = conn;
  char key[32], req[512];
  int len = http_get_text(w, key, sizeof key, req, sizeof req, err);
  if (len < 0) return FALSE;
  if (send(c->fd, req, (size_t)len, MSG_NOSIGNAL) != len)
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "http send: %s", g_strerror(errno));
  char *end = NULL;
  while (!(end = strstr(c->in->str, "\r\n\r\n")))
    if (!fill(c, c->in->len + 1)) return ixia_error_set(err, IXIA_EUNAVAILABLE, "http: connection closed");
  gsize head = (gsize)(end - c->in->str) + 4;
  const char *cl = strcasestr(c->in->str, "\r\nContent-Length:");
  gsize body = cl && cl < end ? (gsize)g_ascii_strtoull(cl + 17, NULL, 10) : 0;
  if (!fill(c, head + body)) return ixia_error_set(err, IXIA_EUNAVAILABLE, "http: connection closed");
  gboolean ok = g_str_has_prefix(c->in->str, "HTTP/1.1 200 ") && body > 0;
  if (!ok) {
    char *status = g_strndup(c->in->str, MIN(head + body, 200));
    ixia_error_set(err, IXIA_EINTERNAL, "http get %s: %s", key, status);
    g_free(status);
  }
  g_string_erase(c->in, 0, (gssize)(head + body));
  return ok;
}

static gboolean http_prepare(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err) {
  if (!r->o->http) {
    *skip = g_strdup("no --http or IXIA_HTTP");
    return TRUE;
  }
  /* The same table, keys and warm-up as get-hot. */
  return ixia_bench_get_hot.prepare(r, state, skip, err);
}

static void http_report(ixia_bench_run_t *r, const ixia_bench_worker_t *tot, cJSON *out) {
  cJSON_AddStringToObject(out, "transport", "http keep-alive");
  ixia_bench_get_hot.report(r, tot, out);
}

/* The event-driven form (events.c): the same request; the answer cut at
 * its Content-Length by the driver. */
static gboolean http_get_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                                 ixia_error_t **err) {
  char req[512];
  int len = http_get_text(w, call->key, sizeof call->key, req, sizeof req, err);
  if (len < 0) return FALSE;
  g_byte_array_append(out, (const guint8 *)req, (guint)len);
  return TRUE;
}

static gboolean http_get_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                                gsize len, ixia_error_t **err) {
  (void)w;
  const guint8 *end = memmem(a, len, "\r\n\r\n", 4);
  if (len > 13 && memcmp(a, "HTTP/1.1 200 ", 13) == 0 && end && end + 4 < a + len) return TRUE;
  return ixia_error_set(err, IXIA_EINTERNAL, "http get %s: %.*s", call->key, (int)MIN(len, 200),
                        (const char *)a);
}

const ixia_bench_workload_t ixia_bench_http_get_hot = {
    .name = "http-get-hot", .prepare = http_prepare, .open = http_open, .close = http_close,
    .op = http_get_op, .wire = IXIA_BENCH_WIRE_HTTP, .request = http_get_request,
    .answer = http_get_answer, .report = http_report, .cleanup = g_free};
