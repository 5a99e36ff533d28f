/* The request/response workloads run by the shared driver (runner.c):
 * get-hot, mixed, put, memcached (the raw limit beside get-hot), filter and
 * agg. */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "data.h"

/* ---- cache hit ratio over a run (from the API's counters) ---------------- */

typedef struct {
  double hits, misses;
} cache_counts_t;

static gboolean cache_counts(const ixia_bench_opts_t *o, cache_counts_t *cc, ixia_error_t **err) {
  ixia_client_t *c = ixia_client_new(o->api, err);
  gboolean ok = c && ixia_bench_stat(c, "cache_hits", &cc->hits, err) &&
                ixia_bench_stat(c, "cache_misses", &cc->misses, err);
  ixia_client_destroy(c);
  return ok;
}

static void add_hit_ratio(const ixia_bench_opts_t *o, const cache_counts_t *before, cJSON *out) {
  cache_counts_t after;
  ixia_error_t *e = NULL;
  if (!cache_counts(o, &after, &e)) {
    ixia_error_destroy(e);
    return;
  }
  double hits = after.hits - before->hits, misses = after.misses - before->misses;
  if (hits + misses > 0)
    cJSON_AddNumberToObject(out, "cache_hit_ratio",
                            (double)(gint64)(hits / (hits + misses) * 10000 + 0.5) / 10000);
}

static void key_of(gint64 i, char *buf, size_t size) { ixia_bench_key((guint64)i, buf, size); }

static gboolean get_one(ixia_client_t *c, const char *key, ixia_error_t **err) {
  gboolean found = FALSE;
  char *json = NULL;
  gboolean ok = ixia_client_get(c, IXIA_BENCH_NS, IXIA_BENCH_TABLE, key, NULL, &found, NULL, &json, err);
  g_free(json);
  if (ok && !found) return ixia_error_set(err, IXIA_ENOTFOUND, "get %s: not found", key);
  return ok;
}

static gboolean put_one(ixia_bench_worker_t *w, ixia_client_t *c, gint64 i, ixia_error_t **err) {
  char key[32];
  key_of(i, key, sizeof key);
  char *doc = ixia_bench_doc((guint64)i, w->run->o->seed, 1 + g_rand_int_range(w->rnd, 0, 1000), NULL);
  gboolean ok = ixia_client_put(c, IXIA_BENCH_NS, IXIA_BENCH_TABLE, key, doc, -1, NULL, err);
  g_free(doc);
  return ok;
}

/* ---- get-hot: cached gets of a few hot keys -------------------------------- */

static gboolean get_hot_prepare(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err) {
  (void)skip;
  const ixia_bench_opts_t *o = r->o;
  if (!ixia_bench_apply_schema(o, err) || !ixia_bench_ensure_docs(o, o->hot_keys, err)) return FALSE;
  /* The first get of each key misses and backfills; the timed gets hit. */
  ixia_client_t *c = ixia_client_new(o->api, err);
  gboolean ok = c != NULL;
  for (gint64 i = 0; ok && i < o->hot_keys; i++) {
    char key[32];
    key_of(i, key, sizeof key);
    ok = get_one(c, key, err);
  }
  ixia_client_destroy(c);
  g_usleep(200000); /* backfills are asynchronous */
  cache_counts_t *cc = g_new0(cache_counts_t, 1);
  *state = cc;
  return ok && cache_counts(o, cc, err);
}

static gboolean get_hot_op(ixia_bench_worker_t *w, gpointer conn, ixia_error_t **err) {
  char key[32];
  key_of(g_rand_int_range(w->rnd, 0, (gint32)w->run->o->hot_keys), key, sizeof key);
  return get_one(conn, key, err);
}

static void hit_ratio_report(ixia_bench_run_t *r, const ixia_bench_worker_t *tot, cJSON *out) {
  (void)tot;
  cJSON_AddNumberToObject(out, "keys", (double)(r->wl == &ixia_bench_mixed ? r->o->keys : r->o->hot_keys));
  add_hit_ratio(r->o, r->state, out);
}

const ixia_bench_workload_t ixia_bench_get_hot = {
    .name = "get-hot", .prepare = get_hot_prepare, .op = get_hot_op,
    .report = hit_ratio_report, .cleanup = g_free};

/* ---- mixed: gets and puts at read_ratio:1 over Zipf keys ------------------- */

typedef struct {
  cache_counts_t cc; /* first: hit_ratio_report reads the state as this */
  ixia_zipf_t *zipf;
} mixed_t;

static gboolean mixed_prepare(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err) {
  (void)skip;
  const ixia_bench_opts_t *o = r->o;
  if (!ixia_bench_apply_schema(o, err) || !ixia_bench_ensure_docs(o, o->keys, err)) return FALSE;
  mixed_t *m = g_new0(mixed_t, 1);
  *state = m;
  m->zipf = ixia_zipf_new((guint64)o->keys, o->theta);
  return cache_counts(o, &m->cc, err);
}

static gboolean mixed_op(ixia_bench_worker_t *w, gpointer conn, ixia_error_t **err) {
  const ixia_bench_opts_t *o = w->run->o;
  mixed_t *m = w->run->state;
  gint64 i = (gint64)ixia_zipf_key(m->zipf, ixia_zipf_rank(m->zipf, w->rnd));
  if (g_rand_int_range(w->rnd, 0, o->read_ratio + 1) == o->read_ratio) {
    w->op_class = 1;
    return put_one(w, conn, i, err);
  }
  char key[32];
  key_of(i, key, sizeof key);
  return get_one(conn, key, err);
}

static void mixed_report(ixia_bench_run_t *r, const ixia_bench_worker_t *tot, cJSON *out) {
  hit_ratio_report(r, tot, out);
  cJSON_AddNumberToObject(out, "zipf_theta", r->o->theta);
  cJSON_AddNumberToObject(out, "read_ratio", r->o->read_ratio);
}

static void mixed_cleanup(gpointer state) {
  mixed_t *m = state;
  if (!m) return;
  ixia_zipf_destroy(m->zipf);
  g_free(m);
}

const ixia_bench_workload_t ixia_bench_mixed = {
    .name = "mixed", .class_names = {"get", "put"}, .prepare = mixed_prepare, .op = mixed_op,
    .report = mixed_report, .cleanup = mixed_cleanup};

/* ---- put: durable puts, one document per call -------------------------------- */

static gboolean put_prepare(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err) {
  (void)state, (void)skip;
  return ixia_bench_apply_schema(r->o, err);
}

static gboolean put_op(ixia_bench_worker_t *w, gpointer conn, ixia_error_t **err) {
  return put_one(w, conn, g_rand_int_range(w->rnd, 0, (gint32)w->run->o->keys), err);
}

const ixia_bench_workload_t ixia_bench_put = {.name = "put", .prepare = put_prepare, .op = put_op};

/* ---- memcached: raw libmemcached gets, the limit beside get-hot --------------- */

static memcached_st *mc_new(const char *server, ixia_error_t **err) {
  char conf[256];
  snprintf(conf, sizeof conf, "--SERVER=%s", server);
  memcached_st *m = memcached(conf, strlen(conf));
  if (!m) {
    ixia_error_set(err, IXIA_EINVAL, "bad memcached address %s", server);
    return NULL;
  }
  memcached_behavior_set(m, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
  return m;
}

static gboolean mc_prepare(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err) {
  (void)state;
  const ixia_bench_opts_t *o = r->o;
  if (!o->memcached) {
    *skip = g_strdup("no --memcached or IXIA_MEMCACHED");
    return TRUE;
  }
  memcached_st *m = mc_new(o->memcached, err);
  if (!m) return FALSE;
  /* Same value size as the cached documents of get-hot. */
  char *doc = ixia_bench_doc(0, o->seed, 0, NULL);
  gboolean ok = TRUE;
  for (gint64 i = 0; ok && i < o->hot_keys; i++) {
    char key[32];
    snprintf(key, sizeof key, "raw:%" G_GINT64_FORMAT, i);
    memcached_return_t rc = memcached_set(m, key, strlen(key), doc, strlen(doc), 0, 0);
    if (!memcached_success(rc))
      ok = ixia_error_set(err, IXIA_EUNAVAILABLE, "memcached set: %s", memcached_strerror(m, rc));
  }
  g_free(doc);
  memcached_free(m);
  return ok;
}

static gpointer mc_open(ixia_bench_run_t *r, ixia_error_t **err) { return mc_new(r->o->memcached, err); }
static void mc_close(gpointer conn) { memcached_free(conn); }

static gboolean mc_op(ixia_bench_worker_t *w, gpointer conn, ixia_error_t **err) {
  char key[32];
  snprintf(key, sizeof key, "raw:%d", g_rand_int_range(w->rnd, 0, (gint32)w->run->o->hot_keys));
  size_t len;
  uint32_t flags;
  memcached_return_t rc;
  char *v = memcached_get(conn, key, strlen(key), &len, &flags, &rc);
  gboolean ok = v != NULL;
  if (!ok) ixia_error_set(err, IXIA_EUNAVAILABLE, "memcached get %s: %s", key, memcached_strerror(conn, rc));
  free(v);
  return ok;
}

const ixia_bench_workload_t ixia_bench_memcached = {
    .name = "memcached", .prepare = mc_prepare, .open = mc_open, .close = mc_close, .op = mc_op};

/* ---- filter and agg: queries over the loaded table ---------------------------- */

/* Price below which ~30% of documents fall (prices are uniform). */
#define AGG_PRICE_LT (IXIA_BENCH_PRICE_MIN + 0.3 * (IXIA_BENCH_PRICE_MAX - IXIA_BENCH_PRICE_MIN))

typedef struct {
  gint64 docs; /* in the table when the run started */
} query_state_t;

/* Skips when query is not available or the table is empty. */
static gboolean query_prepare(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err) {
  ixia_client_t *c = ixia_client_new(r->o->api, err);
  if (!c) return FALSE;
  ixia_error_t *e = NULL;
  gint64 n = ixia_bench_count(c, NULL, &e);
  ixia_client_destroy(c);
  if (n < 0 && ixia_bench_is_missing_feature(e)) {
    *skip = g_strdup_printf("query: %s: %s", ixia_code_name(e->code), e->message);
    ixia_error_destroy(e);
    return TRUE;
  }
  if (n < 0) return ixia_error_propagate(err, e);
  if (n == 0) {
    *skip = g_strdup("the bench table is empty: run the load workload first");
    return TRUE;
  }
  query_state_t *q = g_new0(query_state_t, 1);
  q->docs = n;
  *state = q;
  return TRUE;
}

/* Runs request; adds hits, total and the server's took_ms (in us) to the
 * worker's extra counters 0, 1 and 2. */
static gboolean query_op(ixia_bench_worker_t *w, ixia_client_t *c, const char *request,
                         ixia_error_t **err) {
  cJSON *resp = NULL;
  if (!ixia_bench_query(c, request, &resp, err)) return FALSE;
  const cJSON *hits = cJSON_GetObjectItemCaseSensitive(resp, "hits");
  const cJSON *total = cJSON_GetObjectItemCaseSensitive(resp, "total");
  const cJSON *took = cJSON_GetObjectItemCaseSensitive(resp, "took_ms");
  gboolean ok = cJSON_IsArray(hits) && cJSON_IsNumber(total);
  if (ok) {
    w->extra[0] += (guint64)cJSON_GetArraySize(hits);
    w->extra[1] += (guint64)total->valuedouble;
    if (cJSON_IsNumber(took)) w->extra[2] += (guint64)(took->valuedouble * 1000);
  } else {
    ixia_error_set(err, IXIA_EINTERNAL, "query response without hits or total");
  }
  cJSON_Delete(resp);
  return ok;
}

static void query_report(ixia_bench_run_t *r, const ixia_bench_worker_t *tot, cJSON *out) {
  const query_state_t *q = r->state;
  double ops = (double)MAX(1, tot->ops[0]);
  cJSON_AddNumberToObject(out, "docs", (double)q->docs);
  cJSON_AddNumberToObject(out, "avg_hits", (double)(gint64)((double)tot->extra[0] / ops * 10) / 10);
  cJSON_AddNumberToObject(out, "avg_total", (double)(gint64)((double)tot->extra[1] / ops * 10) / 10);
  cJSON_AddNumberToObject(out, "avg_took_ms", (double)(gint64)((double)tot->extra[2] / ops) / 1000);
  if (r->wl == &ixia_bench_agg)
    cJSON_AddNumberToObject(out, "matched_fraction",
                            (double)(gint64)((double)tot->extra[1] / ops / (double)q->docs * 1000) / 1000);
}

/* category = X AND price in [a, a + 20], 100 hits of 2 fields. */
static gboolean filter_op(ixia_bench_worker_t *w, gpointer conn, ixia_error_t **err) {
  int cat = g_rand_int_range(w->rnd, 0, IXIA_BENCH_CATEGORIES);
  double a = g_rand_double_range(w->rnd, IXIA_BENCH_PRICE_MIN, IXIA_BENCH_PRICE_MAX - 20);
  char req[512];
  snprintf(req, sizeof req,
           "{\"namespace\":\"" IXIA_BENCH_NS "\",\"table\":\"" IXIA_BENCH_TABLE "\","
           "\"filter\":{\"and\":[{\"term\":{\"category\":\"cat%02d\"}},"
           "{\"range\":{\"price\":{\"gte\":%.2f,\"lte\":%.2f}}}]},"
           "\"fields\":[\"title\",\"price\"],\"limit\":100}",
           cat, a, a + 20);
  return query_op(w, conn, req, err);
}

const ixia_bench_workload_t ixia_bench_filter = {
    .name = "filter", .prepare = query_prepare, .op = filter_op, .report = query_report,
    .cleanup = g_free};

/* Group by category over price < P (~30% of documents): count, sum, avg,
 * min, max of price. */
static gboolean agg_op(ixia_bench_worker_t *w, gpointer conn, ixia_error_t **err) {
  char req[768];
  snprintf(req, sizeof req,
           "{\"namespace\":\"" IXIA_BENCH_NS "\",\"table\":\"" IXIA_BENCH_TABLE "\","
           "\"filter\":{\"range\":{\"price\":{\"lt\":%.2f}}},\"limit\":0,"
           "\"aggs\":{\"by_cat\":{\"terms\":{\"field\":\"category\",\"size\":50,\"aggs\":{"
           "\"sum\":{\"sum\":\"price\"},\"avg\":{\"avg\":\"price\"},"
           "\"min\":{\"min\":\"price\"},\"max\":{\"max\":\"price\"}}}}}}",
           AGG_PRICE_LT);
  return query_op(w, conn, req, err);
}

const ixia_bench_workload_t ixia_bench_agg = {
    .name = "agg", .prepare = query_prepare, .op = agg_op, .report = query_report,
    .cleanup = g_free};
