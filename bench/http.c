/* http-get-hot: the cached gets of get-hot over the HTTP/JSON interface,
 * on keep-alive connections driven as get-hot's are, so bench/run.sh can put the two transports side by side (goal:
 * HTTP >= 80% of Thrift). The driver cuts each answer at its
 * Content-Length (frames.c); anything but 200 with a body is an error. */
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "bench.h"
#include "data.h"

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
    .name = "http-get-hot", .prepare = http_prepare, .wire = IXIA_BENCH_WIRE_HTTP,
    .request = http_get_request,
    .answer = http_get_answer, .report = http_report, .cleanup = g_free};
