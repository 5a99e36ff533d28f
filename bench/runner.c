/* The driver shared by the request/response workloads, and the helpers
 * every workload uses (results, schema, stats, queries, bulk puts). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "data.h"
#include "json.h"
#include "machine.h"

const char *const IXIA_BENCH_SCHEMA =
    "{\"namespace\":\"" IXIA_BENCH_NS "\",\"table\":\"" IXIA_BENCH_TABLE "\","
    "\"cache_ttl_seconds\":3600,\"indexes\":["
    "{\"field\":\"key\",\"type\":\"keyword\"},{\"field\":\"category\",\"type\":\"keyword\"},"
    "{\"field\":\"brand\",\"type\":\"keyword\"},{\"field\":\"country\",\"type\":\"keyword\"},"
    "{\"field\":\"price\",\"type\":\"double\"},{\"field\":\"tags\",\"type\":\"keyword\"},"
    "{\"field\":\"updated_at\",\"type\":\"timestamp\"},{\"field\":\"discount\",\"type\":\"double\"}]}";

/* ---- results ------------------------------------------------------------ */

cJSON *ixia_bench_result_new(const char *workload) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "workload", workload);
  return o;
}

/* Milliseconds with three decimals: enough for microsecond samples, and
 * short lines. */
static void add_ms(cJSON *out, const char *name, double us) {
  cJSON_AddNumberToObject(out, name, (double)(gint64)(us + 0.5) / 1000.0);
}

void ixia_bench_add_latency(cJSON *out, const char *prefix, const ixia_hdr_t *h) {
  static const struct {
    const char *suffix;
    double p;
  } pcts[] = {{"p50_ms", 50}, {"p99_ms", 99}, {"p999_ms", 99.9}};
  for (guint i = 0; i < G_N_ELEMENTS(pcts); i++) {
    char name[64];
    snprintf(name, sizeof name, "%s%s", prefix, pcts[i].suffix);
    add_ms(out, name, (double)ixia_hdr_value_at(h, pcts[i].p));
  }
  char name[64];
  snprintf(name, sizeof name, "%smax_ms", prefix);
  add_ms(out, name, (double)ixia_hdr_max(h));
  snprintf(name, sizeof name, "%smean_ms", prefix);
  add_ms(out, name, ixia_hdr_mean(h));
}

void ixia_bench_print(cJSON *out) {
  char *s = cJSON_PrintUnformatted(out);
  printf("%s\n", s ? s : "{}");
  fflush(stdout);
  cJSON_free(s);
  cJSON_Delete(out);
}

void ixia_bench_print_skip(const char *workload, const char *reason) {
  cJSON *o = ixia_bench_result_new(workload);
  cJSON_AddStringToObject(o, "skipped", reason);
  ixia_bench_print(o);
}

/* ---- API helpers -------------------------------------------------------- */

gboolean ixia_bench_apply_schema(const ixia_bench_opts_t *o, ixia_error_t **err) {
  ixia_client_t *c = ixia_client_new(o->api, err);
  gboolean ok = c && ixia_client_apply_schema(c, IXIA_BENCH_SCHEMA, NULL, err);
  ixia_client_destroy(c);
  return ok;
}

static cJSON *stats_json(ixia_client_t *c, ixia_error_t **err) {
  char *json = NULL;
  if (!ixia_client_stats(c, &json, err)) return NULL;
  cJSON *o = cJSON_Parse(json);
  g_free(json);
  if (!o) ixia_error_set(err, IXIA_EINTERNAL, "stats: not JSON");
  return o;
}

gboolean ixia_bench_stat(ixia_client_t *c, const char *field, double *value, ixia_error_t **err) {
  cJSON *o = stats_json(c, err);
  if (!o) return FALSE;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
  gboolean ok = cJSON_IsNumber(v);
  if (ok)
    *value = v->valuedouble;
  else
    ixia_error_set(err, IXIA_ENOTFOUND, "stats has no number %s", field);
  cJSON_Delete(o);
  return ok;
}

char *ixia_bench_stat_str(ixia_client_t *c, const char *field, ixia_error_t **err) {
  cJSON *o = stats_json(c, err);
  if (!o) return NULL;
  const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, field));
  char *out = s ? g_strdup(s) : NULL;
  if (!out) ixia_error_set(err, IXIA_ENOTFOUND, "stats has no string %s", field);
  cJSON_Delete(o);
  return out;
}

gboolean ixia_bench_query(ixia_client_t *c, const char *request, cJSON **resp, ixia_error_t **err) {
  char *json = NULL;
  if (!ixia_client_query(c, request, &json, err)) return FALSE;
  *resp = cJSON_Parse(json);
  g_free(json);
  if (!*resp) return ixia_error_set(err, IXIA_EINTERNAL, "query response is not JSON");
  return TRUE;
}

gint64 ixia_bench_count(ixia_client_t *c, const char *filter_json, ixia_error_t **err) {
  char *req = g_strdup_printf("{\"namespace\":\"" IXIA_BENCH_NS "\",\"table\":\"" IXIA_BENCH_TABLE
                              "\"%s%s,\"limit\":0}",
                              filter_json ? ",\"filter\":" : "", filter_json ? filter_json : "");
  cJSON *resp = NULL;
  gboolean ok = ixia_bench_query(c, req, &resp, err);
  g_free(req);
  if (!ok) return -1;
  const cJSON *total = cJSON_GetObjectItemCaseSensitive(resp, "total");
  gint64 n = cJSON_IsNumber(total) ? (gint64)total->valuedouble : -1;
  if (n < 0) ixia_error_set(err, IXIA_EINTERNAL, "query response has no total");
  cJSON_Delete(resp);
  return n;
}

gboolean ixia_bench_is_missing_feature(const ixia_error_t *err) {
  return err && (err->code == IXIA_EUNAVAILABLE || err->code == IXIA_EUNSUPPORTED);
}

/* ---- bulk puts ------------------------------------------------------------ */

typedef struct {
  const ixia_bench_opts_t *o;
  gint64 first, end;
  _Atomic gint64 next; /* atomic: first document of the next batch */
  gint64 last_version, bytes;
  GMutex lock; /* last_version, bytes, lat, error */
  ixia_hdr_t *lat;
  ixia_error_t *error;
} put_docs_t;

static gpointer put_docs_main(gpointer data) {
  put_docs_t *p = data;
  ixia_error_t *e = NULL;
  ixia_client_t *c = ixia_client_new(p->o->api, &e);
  ixia_hdr_t *lat = ixia_hdr_new();
  gint64 last = 0, bytes = 0;
  while (c && !e) {
    gint64 from = atomic_fetch_add_explicit(&p->next, (gint64)p->o->batch, memory_order_relaxed);
    if (from >= p->end) break;
    gint64 to = MIN(from + p->o->batch, p->end);
    GPtrArray *ops = g_ptr_array_new_with_free_func(g_object_unref);
    for (gint64 i = from; i < to; i++) {
      char key[32];
      ixia_bench_key((guint64)i, key, sizeof key);
      char *doc = ixia_bench_doc((guint64)i, p->o->seed, 0, NULL);
      bytes += (gint64)strlen(doc);
      g_ptr_array_add(ops, g_object_new(IXIA_TYPE_WRITE_OP, "kind", IXIA_OP_KIND_PUT, "ns",
                                        IXIA_BENCH_NS, "table", IXIA_BENCH_TABLE, "key", key,
                                        "json", doc, "expected_version", (gint64)-1, NULL));
      g_free(doc);
    }
    GArray *versions = g_array_new(FALSE, FALSE, sizeof(gint64));
    IxiaIxiaError *xe = NULL;
    GError *gerr = NULL;
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = ixia_ixia_if_batch(ixia_client_iface(c), &versions, ops, &xe, &gerr);
    if (ixia_client_check(c, ok, xe, gerr, &e)) {
      ixia_hdr_record(lat, g_get_monotonic_time() - t0);
      for (guint i = 0; i < versions->len; i++) last = MAX(last, g_array_index(versions, gint64, i));
    }
    g_array_unref(versions);
    g_ptr_array_unref(ops);
  }
  g_mutex_lock(&p->lock);
  p->last_version = MAX(p->last_version, last);
  p->bytes += bytes;
  if (p->lat) ixia_hdr_merge(p->lat, lat);
  if (e) ixia_error_propagate(&p->error, e);
  g_mutex_unlock(&p->lock);
  ixia_hdr_destroy(lat);
  ixia_client_destroy(c);
  return NULL;
}

gboolean ixia_bench_put_docs(const ixia_bench_opts_t *o, gint64 first, gint64 n,
                             gint64 *last_version, gint64 *bytes, ixia_hdr_t *lat,
                             ixia_error_t **err) {
  put_docs_t p = {.o = o, .first = first, .end = first + n, .next = first, .lat = lat};
  g_mutex_init(&p.lock);
  int nthreads = MAX(1, o->conns);
  GThread **th = g_new0(GThread *, nthreads);
  for (int i = 0; i < nthreads; i++) th[i] = g_thread_new("bench-put", put_docs_main, &p);
  for (int i = 0; i < nthreads; i++) g_thread_join(th[i]);
  g_free(th);
  g_mutex_clear(&p.lock);
  if (last_version) *last_version = p.last_version;
  if (bytes) *bytes = p.bytes;
  if (p.error) return ixia_error_propagate(err, p.error);
  return TRUE;
}

gboolean ixia_bench_ensure_docs(const ixia_bench_opts_t *o, gint64 n, ixia_error_t **err) {
  ixia_client_t *c = ixia_client_new(o->api, err);
  if (!c) return FALSE;
  char key[32];
  ixia_bench_key((guint64)(n - 1), key, sizeof key);
  gboolean found = FALSE;
  gboolean ok = ixia_client_get(c, IXIA_BENCH_NS, IXIA_BENCH_TABLE, key, NULL, &found, NULL, NULL, err);
  ixia_client_destroy(c);
  if (!ok) return FALSE;
  if (found) return TRUE;
  fprintf(stderr, "ixia-bench: loading documents 0..%" G_GINT64_FORMAT " first\n", n - 1);
  return ixia_bench_put_docs(o, 0, n, NULL, NULL, NULL, err);
}

/* ---- the driver ------------------------------------------------------------ */

typedef struct {
  ixia_bench_worker_t w;
  GPtrArray *conns;
  gint64 start_us, end_us;
  int nthreads;
  gint64 wait_ns; /* this thread's run-queue wait over the run; -1 unknown */
} thread_t;

static gpointer thread_main(gpointer data) {
  thread_t *t = data;
  gint64 w0 = ixia_bench_thread_wait_ns();
  ixia_bench_events_run(&t->w, t->conns->pdata, t->conns->len, t->start_us, t->end_us,
                        t->w.run->o->rate, t->nthreads);
  gint64 w1 = ixia_bench_thread_wait_ns();
  t->wait_ns = w0 >= 0 && w1 >= w0 ? w1 - w0 : -1;
  return NULL;
}

gboolean ixia_bench_run(ixia_bench_opts_t *o, const ixia_bench_workload_t *wl) {
  ixia_bench_run_t r = {.o = o, .wl = wl};
  char *skip = NULL;
  ixia_error_t *err = NULL;
  if (wl->prepare && !wl->prepare(&r, &r.state, &skip, &err)) {
    fprintf(stderr, "ixia-bench: %s: %s\n", wl->name, err->message);
    ixia_error_destroy(err);
    if (wl->cleanup) wl->cleanup(r.state);
    return FALSE;
  }
  if (skip) {
    ixia_bench_print_skip(wl->name, skip);
    g_free(skip);
    if (wl->cleanup) wl->cleanup(r.state);
    return TRUE;
  }
  int nconns = MAX(1, o->conns);
  int nthreads = CLAMP(o->threads > 0 ? o->threads : IXIA_BENCH_EVENT_THREADS, 1, nconns);
  thread_t *th = g_new0(thread_t, nthreads);
  gboolean ok = TRUE;
  for (int i = 0; i < nthreads; i++) {
    th[i].w = (ixia_bench_worker_t){.run = &r, .id = i,
                                    .rnd = g_rand_new_with_seed(o->seed * 7919u + (guint32)i),
                                    .lat = {ixia_hdr_new(), ixia_hdr_new()}};
    th[i].conns = g_ptr_array_new_with_free_func(ixia_bench_events_close);
    th[i].nthreads = nthreads;
  }
  for (int c = 0; ok && c < nconns; c++) {
    gpointer conn = ixia_bench_events_open(&r, &err);
    if (conn)
      g_ptr_array_add(th[c % nthreads].conns, conn);
    else
      ok = FALSE;
  }
  GThread **handles = g_new0(GThread *, nthreads);
  ixia_bench_machine_t machine;
  ixia_bench_machine_snap(&machine);
  /* This program's own CPU over the run (set-up excluded), per request:
   * bench/run.sh puts it beside pgbench's. */
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  gint64 start = g_get_monotonic_time() + 10000;
  gint64 end = start + (gint64)(o->seconds * 1e6);
  for (int i = 0; ok && i < nthreads; i++) {
    th[i].start_us = start;
    th[i].end_us = end;
    handles[i] = g_thread_new("bench", thread_main, &th[i]);
  }
  ixia_bench_worker_t tot = {.run = &r, .lat = {ixia_hdr_new(), ixia_hdr_new()}};
  gint64 client_wait_ns = 0;
  for (int i = 0; i < nthreads; i++) {
    if (handles[i]) g_thread_join(handles[i]);
    client_wait_ns = client_wait_ns < 0 || th[i].wait_ns < 0 ? -1 : client_wait_ns + th[i].wait_ns;
    for (int k = 0; k < 2; k++) {
      ixia_hdr_merge(tot.lat[k], th[i].w.lat[k]);
      tot.ops[k] += th[i].w.ops[k];
      ixia_hdr_destroy(th[i].w.lat[k]);
    }
    tot.errors += th[i].w.errors;
    for (int k = 0; k < IXIA_BENCH_EXTRA; k++) tot.extra[k] += th[i].w.extra[k];
    if (th[i].w.first_error) ixia_error_propagate(&tot.first_error, th[i].w.first_error);
    g_ptr_array_unref(th[i].conns);
    g_rand_free(th[i].w.rnd);
  }
  double secs = (double)(g_get_monotonic_time() - start) / 1e6;
  getrusage(RUSAGE_SELF, &ru1);
  if (!ok) {
    fprintf(stderr, "ixia-bench: %s: connect: %s\n", wl->name, err->message);
    ixia_error_destroy(err);
  } else {
    cJSON *out = ixia_bench_result_new(wl->name);
    cJSON_AddNumberToObject(out, "threads", nthreads);
    cJSON_AddNumberToObject(out, "conns", nconns);
    cJSON_AddStringToObject(out, "client", "event-driven");
    cJSON_AddNumberToObject(out, "seconds", (double)(gint64)(secs * 10 + 0.5) / 10);
    if (o->rate > 0) cJSON_AddNumberToObject(out, "target_rate", o->rate);
    guint64 ops = tot.ops[0] + tot.ops[1];
    cJSON_AddNumberToObject(out, "ops", (double)ops);
    cJSON_AddNumberToObject(out, "errors", (double)tot.errors);
    cJSON_AddNumberToObject(out, "ops_per_s", (double)(gint64)((double)ops / secs + 0.5));
    ixia_hdr_t *all = ixia_hdr_new();
    ixia_hdr_merge(all, tot.lat[0]);
    ixia_hdr_merge(all, tot.lat[1]);
    ixia_bench_add_latency(out, "", all);
    ixia_hdr_destroy(all);
    for (int k = 0; k < 2 && wl->class_names[1]; k++) {
      char prefix[32];
      snprintf(prefix, sizeof prefix, "%s_", wl->class_names[k]);
      char name[48];
      snprintf(name, sizeof name, "%sops_per_s", prefix);
      cJSON_AddNumberToObject(out, name, (double)(gint64)((double)tot.ops[k] / secs + 0.5));
      ixia_bench_add_latency(out, prefix, tot.lat[k]);
    }
    ixia_bench_machine_report(&machine, client_wait_ns, ops, out);
    double cpu_us = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6 +
                    (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
    if (ops) cJSON_AddNumberToObject(out, "client_cpu_us_per_op", (double)(gint64)(cpu_us / (double)ops * 10 + 0.5) / 10);
    if (wl->report) wl->report(&r, &tot, out);
    if (tot.first_error) cJSON_AddStringToObject(out, "first_error", tot.first_error->message);
    ixia_bench_print(out);
    ok = tot.errors == 0;
  }
  for (int k = 0; k < 2; k++) ixia_hdr_destroy(tot.lat[k]);
  ixia_error_destroy(tot.first_error);
  g_free(handles);
  g_free(th);
  if (wl->cleanup) wl->cleanup(r.state);
  return ok;
}
