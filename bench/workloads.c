/* The request/response workloads run by the shared driver (runner.c):
 * get-hot, mixed, put, memcached (the raw limit beside get-hot), filter and
 * agg. */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "bytes.h"
#include "data.h"
#include "wire.h"

/* ---- cache hit ratio over a run (from the API's counters) ---------------- */

typedef struct {
  double hits, misses, memory;
} cache_counts_t;

static gboolean cache_counts(const ixia_bench_opts_t *o, cache_counts_t *cc, ixia_error_t **err) {
  ixia_client_t *c = ixia_client_new(o->api, err);
  gboolean ok = c && ixia_bench_stat(c, "cache_hits", &cc->hits, err) &&
                ixia_bench_stat(c, "cache_misses", &cc->misses, err) &&
                ixia_bench_stat(c, "gets_from_memory", &cc->memory, err);
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
  double memory = after.memory - before->memory, all = hits + misses + memory;
  /* Gets answered from the store's memory never ask memcached; the others
   * hit or miss it (and then read the disk). */
  if (all > 0) {
    cJSON_AddNumberToObject(out, "from_memory_ratio", (double)(gint64)(memory / all * 10000 + 0.5) / 10000);
    cJSON_AddNumberToObject(out, "cache_hit_ratio", (double)(gint64)((hits + memory) / all * 10000 + 0.5) / 10000);
  }
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

/* ---- event-driven forms (events.c): calls written and answers read by hand --- */

/* Sequence ids of this thread's calls (the API echoes them). */
static gint32 next_seqid(void) {
  static __thread gint32 seq;
  seq = seq >= G_MAXINT32 - 1 ? 1 : seq + 1;
  return seq;
}

/* Where the result struct of a reply to (method, seqid) starts, or 0 when
 * the answer is not that reply. */
static gsize reply_body(const guint8 *a, gsize len, const char *method, gint32 seqid) {
  const char *name;
  guint32 name_len;
  gint32 seq;
  if (!ixia_wire_peek_call(a, len, &name, &name_len, &seq) || seq != seqid ||
      name_len != strlen(method) || memcmp(name, method, name_len) != 0 || (a[3] & 0x7) != 2 /* T_REPLY */)
    return 0;
  return 12 + (gsize)name_len;
}

/* err from an answer that is not a success: the IxiaError it carries, or
 * a word on its shape. */
static gboolean answer_error(const guint8 *a, gsize len, const char *method, const char *key,
                             ixia_error_t **err) {
  const char *v, *msg = NULL;
  gsize vl, ml = 0;
  gint32 code = 0;
  int kind = ixia_wire_read_string_reply(a, len, method, &v, &vl, &code, &msg, &ml);
  if (kind == IXIA_WIRE_REPLY_ERROR || kind == IXIA_WIRE_REPLY_EXCEPTION)
    return ixia_error_set(err, kind == IXIA_WIRE_REPLY_ERROR ? (ixia_code_t)code : IXIA_EINTERNAL,
                          "%s%s%s: %.*s", method, key ? " " : "", key ? key : "", (int)ml, msg);
  return ixia_error_set(err, IXIA_EINTERNAL, "%s%s%s: an answer of another shape (%zu bytes)", method,
                        key ? " " : "", key ? key : "", len);
}

static void get_request(ixia_bench_call_t *call, const char *key, GByteArray *out) {
  if (key != call->key) g_strlcpy(call->key, key, sizeof call->key);
  call->seqid = next_seqid();
  ixia_wire_append_get_call(out, call->seqid, IXIA_BENCH_NS, IXIA_BENCH_TABLE, key, NULL);
}

static gboolean get_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                           gsize len, ixia_error_t **err) {
  (void)w;
  gboolean found;
  gint64 version;
  const char *json;
  gsize json_len;
  if (!reply_body(a, len, "get", call->seqid) ||
      !ixia_wire_read_get_reply(a, len, &found, &version, &json, &json_len))
    return answer_error(a, len, "get", call->key, err);
  if (!found) return ixia_error_set(err, IXIA_ENOTFOUND, "get %s: not found", call->key);
  return TRUE;
}

static void put_string(GByteArray *out, guint16 id, const char *s) {
  const guint8 h[3] = {11 /* T_STRING */, (guint8)(id >> 8), (guint8)id};
  g_byte_array_append(out, h, 3);
  ixia_bytes_append32(out, (guint32)strlen(s));
  g_byte_array_append(out, (const guint8 *)s, (guint)strlen(s));
}

/* put(ns, table, call->key, doc, expected_version -1), as the generated
 * client writes it. */
void ixia_bench_put_message(ixia_bench_call_t *call, const char *doc, GByteArray *out) {
  call->seqid = next_seqid();
  ixia_bytes_append32(out, 0x80010001u); /* version 1, T_CALL */
  ixia_bytes_append32(out, 3);
  g_byte_array_append(out, (const guint8 *)"put", 3);
  ixia_bytes_append32(out, (guint32)call->seqid);
  put_string(out, 1, IXIA_BENCH_NS);
  put_string(out, 2, IXIA_BENCH_TABLE);
  put_string(out, 3, call->key);
  put_string(out, 4, doc);
  const guint8 h[3] = {10 /* T_I64 */, 0, 5}, stop = 0;
  g_byte_array_append(out, h, 3);
  ixia_bytes_append64(out, (guint64)(gint64)-1);
  g_byte_array_append(out, &stop, 1);
}

static void put_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, gint64 i, GByteArray *out) {
  key_of(i, call->key, sizeof call->key);
  char *doc = ixia_bench_doc((guint64)i, w->run->o->seed, 1 + g_rand_int_range(w->rnd, 0, 1000), NULL);
  ixia_bench_put_message(call, doc, out);
  g_free(doc);
}

/* A success: the result struct's field 0, an i64 (the new version). */
gboolean ixia_bench_put_answer(const ixia_bench_call_t *call, const guint8 *a, gsize len,
                               gint64 *version, ixia_error_t **err) {
  gsize p = reply_body(a, len, "put", call->seqid);
  if (p && len >= p + 3 + 8 && a[p] == 10 && a[p + 1] == 0 && a[p + 2] == 0) {
    if (version) *version = (gint64)ixia_bytes_get64(a + p + 3);
    return TRUE;
  }
  return answer_error(a, len, "put", call->key, err);
}

static gboolean put_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                           gsize len, ixia_error_t **err) {
  (void)w;
  return ixia_bench_put_answer(call, a, len, NULL, err);
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

static void hit_ratio_report(ixia_bench_run_t *r, const ixia_bench_worker_t *tot, cJSON *out) {
  (void)tot;
  gboolean hot = r->wl == &ixia_bench_get_hot || r->wl == &ixia_bench_http_get_hot;
  cJSON_AddNumberToObject(out, "keys", (double)(hot ? r->o->hot_keys : r->o->keys));
  add_hit_ratio(r->o, r->state, out);
}

/* A get of a uniformly random key among the first n. */
static void random_get(ixia_bench_worker_t *w, ixia_bench_call_t *call, gint64 n, GByteArray *out) {
  key_of(g_rand_int_range(w->rnd, 0, (gint32)n), call->key, sizeof call->key);
  get_request(call, call->key, out);
}

static gboolean get_hot_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                                ixia_error_t **err) {
  (void)err;
  random_get(w, call, w->run->o->hot_keys, out);
  return TRUE;
}

const ixia_bench_workload_t ixia_bench_get_hot = {
    .name = "get-hot", .prepare = get_hot_prepare,
    .wire = IXIA_BENCH_WIRE_THRIFT, .request = get_hot_request, .answer = get_answer,
    .report = hit_ratio_report, .cleanup = g_free};

/* ---- get-random: gets of uniformly random keys of the loaded table --------- */

static gboolean get_random_prepare(ixia_bench_run_t *r, gpointer *state, char **skip,
                                   ixia_error_t **err) {
  (void)skip;
  const ixia_bench_opts_t *o = r->o;
  if (!ixia_bench_apply_schema(o, err) || !ixia_bench_ensure_docs(o, o->keys, err)) return FALSE;
  cache_counts_t *cc = g_new0(cache_counts_t, 1);
  *state = cc;
  return cache_counts(o, cc, err);
}

static gboolean get_random_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                                   ixia_error_t **err) {
  (void)err;
  random_get(w, call, w->run->o->keys, out);
  return TRUE;
}

const ixia_bench_workload_t ixia_bench_get_random = {
    .name = "get-random", .prepare = get_random_prepare,
    .wire = IXIA_BENCH_WIRE_THRIFT, .request = get_random_request, .answer = get_answer,
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

static gboolean mixed_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                              ixia_error_t **err) {
  (void)err;
  const ixia_bench_opts_t *o = w->run->o;
  mixed_t *m = w->run->state;
  gint64 i = (gint64)ixia_zipf_key(m->zipf, ixia_zipf_rank(m->zipf, w->rnd));
  if (g_rand_int_range(w->rnd, 0, o->read_ratio + 1) == o->read_ratio) {
    call->op_class = 1;
    put_request(w, call, i, out);
    return TRUE;
  }
  char key[32];
  key_of(i, key, sizeof key);
  get_request(call, key, out);
  return TRUE;
}

static gboolean mixed_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                             gsize len, ixia_error_t **err) {
  return call->op_class ? put_answer(w, call, a, len, err) : get_answer(w, call, a, len, err);
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
    .name = "mixed", .class_names = {"get", "put"}, .prepare = mixed_prepare,
    .wire = IXIA_BENCH_WIRE_THRIFT, .request = mixed_request, .answer = mixed_answer,
    .report = mixed_report, .cleanup = mixed_cleanup};

/* ---- put: durable puts, one document per call -------------------------------- */

static gboolean put_prepare(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err) {
  (void)state, (void)skip;
  return ixia_bench_apply_schema(r->o, err);
}

static gboolean put_only_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                                 ixia_error_t **err) {
  (void)err;
  put_request(w, call, g_rand_int_range(w->rnd, 0, (gint32)w->run->o->keys), out);
  return TRUE;
}

const ixia_bench_workload_t ixia_bench_put = {
    .name = "put", .prepare = put_prepare,
    .wire = IXIA_BENCH_WIRE_THRIFT, .request = put_only_request, .answer = put_answer};

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

/* A get in memcached's text protocol. */
static gboolean mc_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                           ixia_error_t **err) {
  (void)err;
  snprintf(call->key, sizeof call->key, "raw:%d", g_rand_int_range(w->rnd, 0, (gint32)w->run->o->hot_keys));
  g_byte_array_append(out, (const guint8 *)"get ", 4);
  g_byte_array_append(out, (const guint8 *)call->key, (guint)strlen(call->key));
  g_byte_array_append(out, (const guint8 *)"\r\n", 2);
  return TRUE;
}

static gboolean mc_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                          gsize len, ixia_error_t **err) {
  (void)w;
  if (len > 6 && memcmp(a, "VALUE ", 6) == 0) return TRUE;
  return ixia_error_set(err, IXIA_EUNAVAILABLE, "memcached get %s: %.*s", call->key,
                        (int)MIN(len, 80), (const char *)a);
}

const ixia_bench_workload_t ixia_bench_memcached = {
    .name = "memcached", .prepare = mc_prepare,
    .wire = IXIA_BENCH_WIRE_MEMCACHED, .request = mc_request, .answer = mc_answer};

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

static void query_request(ixia_bench_call_t *call, const char *request, GByteArray *out) {
  call->seqid = next_seqid();
  ixia_wire_append_string_call(out, "query", call->seqid, request, strlen(request));
}

static gboolean query_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                             gsize len, ixia_error_t **err) {
  const char *v;
  gsize vl;
  if (!reply_body(a, len, "query", call->seqid) ||
      ixia_wire_read_string_reply(a, len, "query", &v, &vl, &(gint32){0}, &(const char *){NULL},
                                  &(gsize){0}) != IXIA_WIRE_REPLY_OK)
    return answer_error(a, len, "query", NULL, err);
  char *json = g_strndup(v, vl);
  ixia_bench_answer_t ans;
  gboolean ok = ixia_bench_answer_read(json, &ans);
  if (ok) {
    w->extra[0] += ans.hits;
    w->extra[1] += (guint64)ans.total;
    w->extra[2] += (guint64)(ans.took_ms * 1000);
  } else {
    ixia_error_set(err, IXIA_EINTERNAL, "query response without hits or total, or not JSON: %.200s", json);
  }
  g_free(json);
  return ok;
}

static void query_report(ixia_bench_run_t *r, const ixia_bench_worker_t *tot, cJSON *out) {
  const query_state_t *q = r->state;
  double ops = (double)MAX(1, tot->ops[0]);
  cJSON_AddNumberToObject(out, "docs", (double)q->docs);
  cJSON_AddNumberToObject(out, "avg_hits", (double)(gint64)((double)tot->extra[0] / ops * 10) / 10);
  cJSON_AddNumberToObject(out, "avg_total", (double)(gint64)((double)tot->extra[1] / ops * 10) / 10);
  cJSON_AddNumberToObject(out, "avg_took_ms", (double)(gint64)((double)tot->extra[2] / ops) / 1000);
  if (r->wl == &ixia_bench_agg) {
    cJSON_AddNumberToObject(out, "matched_fraction",
                            (double)(gint64)((double)tot->extra[1] / ops / (double)q->docs * 1000) / 1000);
    /* Values aggregated (category and price of each match) per second of
     * the server's time for one query: one shard, one core. */
    double took_s = (double)tot->extra[2] / ops / 1e6;
    if (took_s > 0)
      cJSON_AddNumberToObject(out, "agg_values_per_s",
                              (double)(gint64)((double)tot->extra[1] / ops * 2 / took_s));
  } else {
    cJSON_AddNumberToObject(out, "limit", r->o->limit);
  }
}

/* The filter shapes, each stressing one evaluation path; bench/peer-postgres.sh
 * runs the same shapes with the same parameter distributions. */
static const struct {
  const char *name, *what;
} SHAPES[] = {
    {"cat-price", "category = X AND price in [a, a+20] (~0.08%)"},
    {"narrow", "price in [a, a+0.5] (~0.1%)"},
    {"wide", "price in [a, a+250] (~50%)"},
    {"brand-wide", "brand = X (~0.05%) AND price in [a, a+250] (~50%)"},
    {"country-narrow", "country = C (~6.7%) AND price in [a, a+2] (~0.4%)"},
    {"in100", "brand in 100 brands (~5%)"},
    {"not", "NOT country = C (~93%)"},
    {"prefix", "brand starts with brandNN (~5%)"},
    {"exists", "exists discount (~20%)"},
    {"sorted", "category < cat15 (~30%), sorted by price descending"},
};

int ixia_bench_filter_shape(const char *name) {
  for (guint i = 0; i < G_N_ELEMENTS(SHAPES); i++)
    if (!strcmp(name, SHAPES[i].name)) return (int)i;
  return -1;
}

const char *ixia_bench_filter_shapes_help(void) {
  static char *help;
  if (!help) {
    GString *h = g_string_new(NULL);
    for (guint i = 0; i < G_N_ELEMENTS(SHAPES); i++)
      g_string_append_printf(h, "%s  filter:%-15s %s\n", i ? "" : "", SHAPES[i].name, SHAPES[i].what);
    help = g_string_free(h, FALSE);
  }
  return help;
}

static const char *const BENCH_COUNTRIES[] = {"US", "CA", "MX", "GB", "DE", "FR", "ES", "IT",
                                              "NL", "SE", "PL", "JP", "KR", "AU", "BR"};

/* The filter JSON of a shape with random parameters. */
static void shape_filter(int shape, GRand *r, GString *f) {
  double lo = IXIA_BENCH_PRICE_MIN, hi = IXIA_BENCH_PRICE_MAX;
  switch (shape) {
    case 0: {
      double a = g_rand_double_range(r, lo, hi - 20);
      g_string_append_printf(f, "{\"and\":[{\"term\":{\"category\":\"cat%02d\"}},"
                                "{\"range\":{\"price\":{\"gte\":%.2f,\"lte\":%.2f}}}]}",
                             g_rand_int_range(r, 0, IXIA_BENCH_CATEGORIES), a, a + 20);
      break;
    }
    case 1: {
      double a = g_rand_double_range(r, lo, hi - 0.5);
      g_string_append_printf(f, "{\"range\":{\"price\":{\"gte\":%.2f,\"lte\":%.2f}}}", a, a + 0.5);
      break;
    }
    case 2: {
      double a = g_rand_double_range(r, lo, hi - 250);
      g_string_append_printf(f, "{\"range\":{\"price\":{\"gte\":%.2f,\"lte\":%.2f}}}", a, a + 250);
      break;
    }
    case 3: {
      double a = g_rand_double_range(r, lo, hi - 250);
      g_string_append_printf(f, "{\"and\":[{\"term\":{\"brand\":\"brand%04d\"}},"
                                "{\"range\":{\"price\":{\"gte\":%.2f,\"lte\":%.2f}}}]}",
                             g_rand_int_range(r, 0, IXIA_BENCH_BRANDS), a, a + 250);
      break;
    }
    case 4: {
      double a = g_rand_double_range(r, lo, hi - 2);
      g_string_append_printf(f, "{\"and\":[{\"term\":{\"country\":\"%s\"}},"
                                "{\"range\":{\"price\":{\"gte\":%.2f,\"lte\":%.2f}}}]}",
                             BENCH_COUNTRIES[g_rand_int_range(r, 0, G_N_ELEMENTS(BENCH_COUNTRIES))],
                             a, a + 2);
      break;
    }
    case 5: {
      int first = g_rand_int_range(r, 0, IXIA_BENCH_BRANDS - 100);
      g_string_append(f, "{\"in\":{\"brand\":[");
      for (int i = 0; i < 100; i++) g_string_append_printf(f, "%s\"brand%04d\"", i ? "," : "", first + i);
      g_string_append(f, "]}}");
      break;
    }
    case 6:
      g_string_append_printf(f, "{\"not\":{\"term\":{\"country\":\"%s\"}}}",
                             BENCH_COUNTRIES[g_rand_int_range(r, 0, G_N_ELEMENTS(BENCH_COUNTRIES))]);
      break;
    case 7:
      g_string_append_printf(f, "{\"prefix\":{\"brand\":\"brand%02d\"}}",
                             g_rand_int_range(r, 0, IXIA_BENCH_BRANDS / 100));
      break;
    case 8:
      g_string_append(f, "{\"exists\":\"discount\"}");
      break;
    default:
      /* 15 of 50 categories; the sort is added by filter_text. */
      g_string_append(f, "{\"range\":{\"category\":{\"lt\":\"cat15\"}}}");
  }
}

/* One query of --shape with --limit hits of 2 fields (g_free it). */
static char *filter_text(ixia_bench_worker_t *w) {
  const ixia_bench_opts_t *o = w->run->o;
  GString *req = g_string_new("{\"namespace\":\"" IXIA_BENCH_NS "\",\"table\":\"" IXIA_BENCH_TABLE "\","
                              "\"filter\":");
  shape_filter(o->filter_shape, w->rnd, req);
  if (!strcmp(SHAPES[o->filter_shape].name, "sorted")) g_string_append(req, ",\"sort\":[{\"price\":\"desc\"}]");
  g_string_append_printf(req, ",\"fields\":[\"title\",\"price\"],\"limit\":%d}", o->limit);
  return g_string_free(req, FALSE);
}

static gboolean filter_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                               ixia_error_t **err) {
  (void)err;
  char *req = filter_text(w);
  query_request(call, req, out);
  g_free(req);
  return TRUE;
}

const ixia_bench_workload_t ixia_bench_filter = {
    .name = "filter", .prepare = query_prepare,
    .wire = IXIA_BENCH_WIRE_THRIFT, .request = filter_request, .answer = query_answer,
    .report = query_report, .cleanup = g_free};

/* Group by category over price < P (~30% of documents): count, sum, avg,
 * min, max of price: always the same text. */
#define AGG_TEXT_FMT                                                                  \
  "{\"namespace\":\"" IXIA_BENCH_NS "\",\"table\":\"" IXIA_BENCH_TABLE "\","                 \
  "\"filter\":{\"range\":{\"price\":{\"lt\":%.2f}}},\"limit\":0,"                           \
  "\"aggs\":{\"by_cat\":{\"terms\":{\"field\":\"category\",\"size\":50,\"aggs\":{"          \
  "\"sum\":{\"sum\":\"price\"},\"avg\":{\"avg\":\"price\"},"                                \
  "\"min\":{\"min\":\"price\"},\"max\":{\"max\":\"price\"}}}}}}"

static gboolean agg_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                            ixia_error_t **err) {
  (void)w, (void)err;
  char req[768];
  snprintf(req, sizeof req, AGG_TEXT_FMT, AGG_PRICE_LT);
  query_request(call, req, out);
  return TRUE;
}

const ixia_bench_workload_t ixia_bench_agg = {
    .name = "agg", .prepare = query_prepare,
    .wire = IXIA_BENCH_WIRE_THRIFT, .request = agg_request, .answer = query_answer,
    .report = query_report, .cleanup = g_free};
