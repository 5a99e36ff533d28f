/* The index's planner on a shard of 200,000 documents: for each filter shape
 * of the benchmark (and the edges of numeric ranges), the plan `explain`
 * reports (which clause led, which were checked on columns, whether the
 * live set was walked and the walk stopped early) and the answer, every id
 * read page by page and the exact total, against a brute force over a
 * compact model of the same documents.
 *
 * Documents: cat (50 keywords), brand (2,000), country (15), price (a
 * double in [1, 500) with 2 decimals), score (a double: negative numbers,
 * -0 and +0, huge and tiny values), ts (a timestamp), discount (in ~20% of
 * documents). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "json.h"
#include "support.h"

#define NS "shop"
#define TABLE "p"
#define N_DOCS 200000

static const char *schema_json =
    "{\"namespace\": \"shop\", \"table\": \"p\", \"indexes\": ["
    "{\"field\": \"cat\", \"type\": \"keyword\"}, {\"field\": \"brand\", \"type\": \"keyword\"},"
    "{\"field\": \"country\", \"type\": \"keyword\"}, {\"field\": \"price\", \"type\": \"double\"},"
    "{\"field\": \"score\", \"type\": \"double\"}, {\"field\": \"ts\", \"type\": \"timestamp\"},"
    "{\"field\": \"discount\", \"type\": \"long\"}]}";

static const char *const COUNTRIES[] = {"US", "CA", "MX", "GB", "DE", "FR", "ES", "IT",
                                        "NL", "SE", "PL", "JP", "KR", "AU", "BR"};
static const double SPECIAL[] = {-0.0, 0.0, -1e308, 1e308, 5e-324, -5e-324, -2.5, 2.5,
                                 9007199254740992.0, -9007199254740992.0};

typedef struct {
  guint8 cat, country;
  guint16 brand;
  double price, score;
  gint64 ts;
  gint discount; /* -1: absent */
} model_t;

static model_t *model;
static ixia_idx_t *idx;
static ixia_query_limits_t lim;
static char *dir;
/* How a leaf checked per candidate says it was answered: doc values, or
 * with index.docvalues_mb = 0 the column blocks. */
static const char *check_how = "doc values check";

/* (Re)opens the index with index.docvalues_mb = docvalues_mb. */
static void open_idx(const char *docvalues_mb) {
  ixia_idx_destroy(idx);
  ixia_config_t *cfg = ixia_config_new();
  ixia_config_set(cfg, "index.write_buffer_mb", "64", NULL);
  ixia_config_set(cfg, "index.docvalues_mb", docvalues_mb, NULL);
  char *path = g_build_filename(dir, "planner", NULL);
  ixia_error_t *e = NULL;
  idx = ixia_idx_open(path, cfg, &e);
  g_free(path);
  ixia_query_limits_from_config(cfg, &lim);
  lim.track_total_hits = 10000;
  ixia_config_destroy(cfg);
  g_assert(idx);
}

static void build(void) {
  open_idx("1024");
  ixia_error_t *e = NULL;
  ixia_idx_event_t schema = {IXIA_IDX_SCHEMA, NS, TABLE, "", 0, 1, schema_json, strlen(schema_json), 0};
  g_assert(ixia_idx_apply(idx, &schema, 1, NULL, 0, NULL, NULL, NULL, &e));
  model = g_new(model_t, N_DOCS);
  GRand *r = g_rand_new_with_seed(11);
  const guint batch = 2000;
  ixia_idx_event_t *evs = g_new0(ixia_idx_event_t, batch);
  char **texts = g_new0(char *, batch * 2);
  for (guint done = 0; done < N_DOCS; done += batch) {
    for (guint i = 0; i < batch; i++) {
      guint id = done + i;
      model_t *m = &model[id];
      m->cat = (guint8)g_rand_int_range(r, 0, 50);
      m->brand = (guint16)g_rand_int_range(r, 0, 2000);
      m->country = (guint8)g_rand_int_range(r, 0, 15);
      m->price = floor(g_rand_double_range(r, 1, 500) * 100) / 100;
      m->score = id % 997 == 0 ? SPECIAL[(id / 997) % G_N_ELEMENTS(SPECIAL)]
                               : g_rand_int_range(r, -100000, 100000) / 100.0;
      m->ts = 1700000000 + g_rand_int_range(r, 0, 1000000);
      m->discount = g_rand_int_range(r, 0, 5) == 0 ? g_rand_int_range(r, 5, 45) : -1;
      GString *d = g_string_new(NULL);
      g_string_append_printf(d, "{\"cat\":\"c%02u\",\"brand\":\"b%04u\",\"country\":\"%s\",\"price\":%.2f,"
                                "\"score\":%.17g,\"ts\":%" G_GINT64_FORMAT,
                             m->cat, m->brand, COUNTRIES[m->country], m->price, m->score, m->ts);
      if (m->discount >= 0) g_string_append_printf(d, ",\"discount\":%d", m->discount);
      g_string_append_c(d, '}');
      texts[2 * i] = g_strdup_printf("d%06u", id);
      texts[2 * i + 1] = g_string_free(d, FALSE);
      evs[i] = (ixia_idx_event_t){IXIA_IDX_PUT, NS, TABLE, texts[2 * i], strlen(texts[2 * i]), id + 2,
                                  texts[2 * i + 1], strlen(texts[2 * i + 1]), 0};
    }
    g_assert(ixia_idx_apply(idx, evs, batch, NULL, 0, NULL, NULL, NULL, &e));
    for (guint i = 0; i < 2 * batch; i++) g_free(texts[i]);
  }
  g_free(texts);
  g_free(evs);
  g_rand_free(r);
}

/* ------------------------------------------------------------ queries */

typedef gboolean (*pred_fn)(const model_t *m, const void *arg);

typedef struct {
  double lo, hi;
  gboolean lo_open, hi_open;
} range_t;

static gboolean in_range(double v, const range_t *r) {
  return (r->lo_open ? v > r->lo : v >= r->lo) && (r->hi_open ? v < r->hi : v <= r->hi);
}

/* Every document id matching, by brute force. */
static GArray *brute(pred_fn fn, const void *arg) {
  GArray *ids = g_array_new(FALSE, FALSE, sizeof(guint32));
  for (guint32 i = 0; i < N_DOCS; i++)
    if (fn(&model[i], arg)) g_array_append_val(ids, i);
  return ids;
}

static ixia_query_t *parse(const char *filter, const char *extra) {
  char *json = g_strdup_printf("{\"namespace\": \"shop\", \"table\": \"p\"%s%s%s}",
                               filter ? ", \"filter\": " : "", filter ? filter : "", extra ? extra : "");
  ixia_error_t *e = NULL;
  ixia_query_t *q = ixia_query_parse(json, strlen(json), ixia_idx_schema, idx, &lim, &e);
  if (!q) fprintf(stderr, "parse %s: %s\n", json, e->message);
  ixia_error_destroy(e);
  g_free(json);
  return q;
}

/* The ids the index returns for filter, page by page, with the exact
 * total; and the explain of the first page. */
static GArray *index_ids(const char *filter, guint64 *total, cJSON **explain) {
  ixia_query_t *q = parse(filter, ", \"track_total_hits\": true");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  GArray *ids = g_array_new(FALSE, FALSE, sizeof(guint32));
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  gint64 after = -1;
  *explain = NULL;
  for (int page = 0;; page++) {
    ixia_idx_search_opts_t o = {.after_id = after, .limit = 5000, .explain = page == 0};
    ixia_idx_result_t res;
    ixia_error_t *e = NULL;
    ixia_idx_hits_clear(hits);
    gboolean ok = ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, &e);
    if (!ok) fprintf(stderr, "search %s: %s\n", filter, e->message);
    ixia_error_destroy(e);
    CU_ASSERT_TRUE_FATAL(ok);
    if (page == 0) {
      *total = res.total;
      CU_ASSERT_TRUE(res.total_exact);
      *explain = res.explain;
    }
    for (guint i = 0; i < hits->len; i++) {
      ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
      guint32 doc = (guint32)atoi(h->key + 1);
      g_array_append_val(ids, doc);
      after = h->id;
    }
    if (hits->len < 5000) break;
  }
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  ixia_query_destroy(q);
  return ids;
}

static int u32_cmp(gconstpointer a, gconstpointer b) {
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return x < y ? -1 : x > y;
}

/* The node of the plan for a field (first found, depth first). */
static const cJSON *plan_node(const cJSON *n, const char *field) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(n, "field");
  if (cJSON_IsString(f) && strcmp(f->valuestring, field) == 0) return n;
  const cJSON *kids = cJSON_GetObjectItemCaseSensitive(n, "children");
  for (const cJSON *k = kids ? kids->child : NULL; k; k = k->next) {
    const cJSON *hit = plan_node(k, field);
    if (hit) return hit;
  }
  return NULL;
}

static const char *how_of(const cJSON *explain, const char *field) {
  const cJSON *n = plan_node(cJSON_GetObjectItemCaseSensitive(explain, "plan"), field);
  const cJSON *how = n ? cJSON_GetObjectItemCaseSensitive(n, "how") : NULL;
  return cJSON_IsString(how) ? how->valuestring : "?";
}

static gboolean led_by(const cJSON *explain, const char *field) {
  const cJSON *n = plan_node(cJSON_GetObjectItemCaseSensitive(explain, "plan"), field);
  return n && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "lead"));
}

static const char *driver(const cJSON *explain) {
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(explain, "driver");
  return cJSON_IsString(d) ? d->valuestring : "?";
}

/* Index and brute force agree on filter; returns the explain (caller
 * deletes). */
static cJSON *check(const char *filter, pred_fn fn, const void *arg) {
  guint64 total = 0;
  cJSON *explain = NULL;
  GArray *got = index_ids(filter, &total, &explain);
  GArray *want = brute(fn, arg);
  g_array_sort(got, u32_cmp);
  gboolean same = got->len == want->len && total == want->len &&
                  (got->len == 0 || memcmp(got->data, want->data, got->len * sizeof(guint32)) == 0);
  if (!same) {
    char *ex = ixia_json_print(explain);
    fprintf(stderr, "\nfilter %s: index %u ids (total %" G_GUINT64_FORMAT "), brute force %u\n  %s\n",
            filter, got->len, total, want->len, ex);
    g_free(ex);
  }
  CU_ASSERT_TRUE(same);
  g_array_free(got, TRUE);
  g_array_free(want, TRUE);
  return explain;
}

/* ------------------------------------------------------------- shapes */

typedef struct {
  int cat, brand, country;
  range_t price;
} shape_arg_t;

static gboolean p_cat_price(const model_t *m, const void *a) {
  const shape_arg_t *s = a;
  return m->cat == s->cat && in_range(m->price, &s->price);
}
static gboolean p_price(const model_t *m, const void *a) {
  return in_range(m->price, &((const shape_arg_t *)a)->price);
}
static gboolean p_brand_price(const model_t *m, const void *a) {
  const shape_arg_t *s = a;
  return m->brand == s->brand && in_range(m->price, &s->price);
}
static gboolean p_country_price(const model_t *m, const void *a) {
  const shape_arg_t *s = a;
  return m->country == s->country && in_range(m->price, &s->price);
}
static gboolean p_brand_in(const model_t *m, const void *a) {
  const shape_arg_t *s = a;
  return m->brand >= s->brand && m->brand < s->brand + 100;
}
static gboolean p_brand_span(const model_t *m, const void *a) {
  const shape_arg_t *s = a;
  return m->brand >= s->brand && m->brand < s->brand + 1500;
}
static gboolean p_brand_span_or_cat(const model_t *m, const void *a) {
  return p_brand_span(m, a) || m->cat == ((const shape_arg_t *)a)->cat;
}
static gboolean p_country_price_cat(const model_t *m, const void *a) {
  return p_country_price(m, a) && m->cat == ((const shape_arg_t *)a)->cat;
}
static gboolean p_not_country(const model_t *m, const void *a) {
  return m->country != ((const shape_arg_t *)a)->country;
}
static gboolean p_brand_prefix(const model_t *m, const void *a) {
  return m->brand / 100 == ((const shape_arg_t *)a)->brand;
}
static gboolean p_discount(const model_t *m, const void *a) {
  (void)a;
  return m->discount >= 0;
}
static gboolean p_none(const model_t *m, const void *a) {
  (void)m, (void)a;
  return FALSE;
}
static gboolean p_all(const model_t *m, const void *a) {
  (void)m, (void)a;
  return TRUE;
}
static gboolean p_one(const model_t *m, const void *a) {
  return m == &model[*(const guint32 *)a];
}

static void test_shapes(void) {
  shape_arg_t s = {.cat = 7, .brand = 1234, .country = 3, .price = {100, 120, FALSE, FALSE}};
  char f[4096];

  /* A selective term and a narrow range: the term leads, the range's
   * points mark a bitset the candidates probe (cheaper than a check per
   * candidate, and than a sorted bitmap of the range). */
  snprintf(f, sizeof f, "{\"and\": [{\"term\": {\"cat\": \"c07\"}}, {\"range\": {\"price\": {\"gte\": 100, \"lte\": 120}}}]}");
  cJSON *ex = check(f, p_cat_price, &s);
  CU_ASSERT_TRUE(led_by(ex, "cat"));
  CU_ASSERT_STRING_EQUAL(how_of(ex, "price"), "points, probed by the candidates");
  cJSON_Delete(ex);

  /* A narrow range alone: the points. */
  s.price = (range_t){250, 250.5, FALSE, FALSE};
  ex = check("{\"range\": {\"price\": {\"gte\": 250, \"lte\": 250.5}}}", p_price, &s);
  CU_ASSERT_TRUE(led_by(ex, "price"));
  CU_ASSERT_STRING_EQUAL(how_of(ex, "price"), "points");
  cJSON_Delete(ex);

  /* A wide range alone: the live set walked, the range checked per block. */
  s.price = (range_t){100, 350, TRUE, TRUE};
  ex = check("{\"range\": {\"price\": {\"gt\": 100, \"lt\": 350}}}", p_price, &s);
  CU_ASSERT_STRING_EQUAL(driver(ex), "live documents");
  CU_ASSERT_STRING_EQUAL(how_of(ex, "price"), check_how);
  cJSON_Delete(ex);

  /* A selective term with a wide range: the term leads, the range is
   * checked on the candidates. */
  s.price = (range_t){100, 350, FALSE, FALSE};
  ex = check("{\"and\": [{\"range\": {\"price\": {\"gte\": 100, \"lte\": 350}}}, {\"term\": {\"brand\": \"b1234\"}}]}",
             p_brand_price, &s);
  CU_ASSERT_TRUE(led_by(ex, "brand"));
  CU_ASSERT_STRING_EQUAL(how_of(ex, "price"), check_how);
  cJSON_Delete(ex);

  /* A wide term with a narrow range: the range leads, and the term's
   * posting is intersected with its candidates in place (a gallop each,
   * where a doc values check was a cache miss each). */
  s.price = (range_t){300, 302, FALSE, FALSE};
  ex = check("{\"and\": [{\"term\": {\"country\": \"GB\"}}, {\"range\": {\"price\": {\"gte\": 300, \"lte\": 302}}}]}",
             p_country_price, &s);
  CU_ASSERT_TRUE(led_by(ex, "price"));
  CU_ASSERT_STRING_EQUAL(how_of(ex, "country"), "posting, intersected with the candidates");
  cJSON_Delete(ex);
  /* The same with an in of one value, beside a second term. */
  s.cat = 7;
  ex = check("{\"and\": [{\"in\": {\"country\": [\"GB\"]}}, {\"range\": {\"price\": {\"gte\": 300, \"lte\": 302}}},"
             " {\"term\": {\"cat\": \"c07\"}}]}",
             p_country_price_cat, &s);
  CU_ASSERT_STRING_EQUAL(how_of(ex, "country"), "posting, intersected with the candidates");
  cJSON_Delete(ex);

  /* A keyword range over 1,500 of the 2,000 brands (past the 1,024 values
   * a walk lists, and walked in stretches of 256 under the dictionary's
   * lock): compared as bytes on the candidates, alone and inside an OR. */
  s.brand = 100;
  ex = check("{\"range\": {\"brand\": {\"gte\": \"b0100\", \"lt\": \"b1600\"}}}", p_brand_span, &s);
  CU_ASSERT_STRING_EQUAL(driver(ex), "live documents");
  cJSON_Delete(ex);
  cJSON_Delete(check("{\"or\": [{\"range\": {\"brand\": {\"gte\": \"b0100\", \"lt\": \"b1600\"}}},"
                     " {\"term\": {\"cat\": \"c07\"}}]}",
                     p_brand_span_or_cat, &s));

  /* in of 100 values: one union of postings, read a chunk at a time for
   * a page. */
  s.brand = 700;
  GString *in = g_string_new("{\"in\": {\"brand\": [");
  for (int i = 0; i < 100; i++) g_string_append_printf(in, "%s\"b%04d\"", i ? "," : "", 700 + i);
  g_string_append(in, "]}}");
  lim.max_clauses = 1000;
  ex = check(in->str, p_brand_in, &s);
  CU_ASSERT_TRUE(led_by(ex, "brand"));
  CU_ASSERT_STRING_EQUAL(how_of(ex, "brand"), "postings, a chunk at a time");
  g_string_free(in, TRUE);
  cJSON_Delete(ex);

  /* not: the live set walked, the term checked. */
  ex = check("{\"not\": {\"term\": {\"country\": \"GB\"}}}", p_not_country, &s);
  CU_ASSERT_STRING_EQUAL(driver(ex), "live documents");
  cJSON_Delete(ex);

  /* prefix over 100 values: the dictionary walked, postings read. */
  s.brand = 12;
  ex = check("{\"prefix\": {\"brand\": \"b12\"}}", p_brand_prefix, &s);
  CU_ASSERT_STRING_EQUAL(how_of(ex, "brand"), "postings, a chunk at a time");
  cJSON_Delete(ex);

  /* exists over ~20%: walked and checked on the column. */
  ex = check("{\"exists\": \"discount\"}", p_discount, &s);
  CU_ASSERT_STRING_EQUAL(driver(ex), "live documents");
  cJSON_Delete(ex);

  /* No candidates, one candidate, every document. */
  cJSON_Delete(check("{\"and\": [{\"term\": {\"cat\": \"nope\"}}, {\"range\": {\"price\": {\"gte\": 1}}}]}",
                     p_none, &s));
  guint32 one = 4321;
  cJSON_Delete(check("{\"and\": [{\"term\": {\"brand\": \"b9999\"}}]}", p_none, &s));
  snprintf(f, sizeof f, "{\"and\": [{\"range\": {\"price\": {\"gte\": %.2f, \"lte\": %.2f}}}, {\"term\": {\"brand\": \"b%04u\"}}, {\"term\": {\"cat\": \"c%02u\"}}]}",
           model[one].price, model[one].price, model[one].brand, model[one].cat);
  /* Only one document can hold that exact price, brand and category in
   * practice; the brute force decides. */
  ex = check(f, p_one, &one);
  cJSON_Delete(ex);
  cJSON_Delete(check(NULL, p_all, &s));
}

/* The page's hits are the brute force's matches from want[from] on, in
 * order. */
static void assert_docs(GArray *hits, GArray *want, guint from) {
  for (guint i = 0; i < hits->len; i++) {
    guint32 doc = (guint32)atoi(g_array_index(hits, ixia_idx_hit_t, i).key + 1);
    CU_ASSERT_EQUAL(doc, from + i < want->len ? g_array_index(want, guint32, from + i) : G_MAXUINT32);
  }
}

/* Early termination: a page of 10 over a wide range stops counting at
 * track_total_hits and says so; an exact total is available on request. */
static void test_early_stop(void) {
  ixia_query_t *q = parse("{\"range\": {\"price\": {\"gte\": 1}}}", ", \"track_total_hits\": 1000");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  ixia_idx_search_opts_t o = {.after_id = -1, .limit = 10, .explain = TRUE};
  ixia_idx_result_t res;
  CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, NULL));
  CU_ASSERT_EQUAL(hits->len, 10);
  CU_ASSERT_FALSE(res.total_exact);
  CU_ASSERT_TRUE(res.total >= 1000 && res.total < N_DOCS);
  CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res.explain, "early_stop")));
  cJSON_Delete(res.explain);
  ixia_idx_hits_clear(hits);
  ixia_query_destroy(q);
  /* Paging far past the tracked total still returns the right ids. */
  q = parse("{\"range\": {\"price\": {\"gte\": 1}}}", ", \"track_total_hits\": 100");
  o = (ixia_idx_search_opts_t){.after_id = 150000, .limit = 3};
  CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, NULL));
  CU_ASSERT_EQUAL_FATAL(hits->len, 3);
  CU_ASSERT_EQUAL(g_array_index(hits, ixia_idx_hit_t, 0).id, 150001);
  CU_ASSERT_FALSE(res.total_exact);
  ixia_idx_hits_clear(hits);
  ixia_query_destroy(q);
  /* An in of 100 brands (~5% of the documents) whose postings already
   * show more matches than the total to track: the page is found by
   * checking the first live documents on doc values (the first block holds
   * ten matches), no posting of the union is read, and the page is the
   * first ten matches by id. */
  shape_arg_t sa = {.brand = 700};
  GString *in = g_string_new("{\"in\": {\"brand\": [");
  for (int i = 0; i < 100; i++) g_string_append_printf(in, "%s\"b%04d\"", i ? "," : "", 700 + i);
  g_string_append(in, "]}}");
  GArray *want_in = brute(p_brand_in, &sa);
  CU_ASSERT_TRUE_FATAL(want_in->len > 1000);
  q = parse(in->str, ", \"track_total_hits\": 500");
  o = (ixia_idx_search_opts_t){.after_id = -1, .limit = 10, .explain = TRUE};
  CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, NULL));
  CU_ASSERT_EQUAL_FATAL(hits->len, 10);
  CU_ASSERT_FALSE(res.total_exact);
  CU_ASSERT_EQUAL(res.total, 500);
  CU_ASSERT_STRING_EQUAL(driver(res.explain), "live documents");
  CU_ASSERT_STRING_EQUAL(how_of(res.explain, "brand"), check_how);
  assert_docs(hits, want_in, 0);
  cJSON_Delete(res.explain);
  ixia_idx_hits_clear(hits);
  ixia_query_destroy(q);
  /* Past the tracked total, a page after a cursor deep in the documents
   * still walks only from the cursor's block on. */
  guint32 deep = g_array_index(want_in, guint32, want_in->len - 20);
  q = parse(in->str, ", \"track_total_hits\": 500");
  o = (ixia_idx_search_opts_t){.after_id = deep, .limit = 10};
  CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, NULL));
  CU_ASSERT_EQUAL_FATAL(hits->len, 10);
  assert_docs(hits, want_in, want_in->len - 19);
  ixia_idx_hits_clear(hits);
  ixia_query_destroy(q);
  /* With more to track than the postings show, the total must be counted:
   * the union of postings is read a chunk at a time, and counted whole. */
  q = parse(in->str, ", \"track_total_hits\": 100000");
  o = (ixia_idx_search_opts_t){.after_id = -1, .limit = 10, .explain = TRUE};
  CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, NULL));
  CU_ASSERT_EQUAL(hits->len, 10);
  CU_ASSERT_TRUE(res.total_exact);
  CU_ASSERT_EQUAL(res.total, want_in->len);
  CU_ASSERT_STRING_EQUAL(driver(res.explain), "union of postings, a chunk at a time");
  cJSON_Delete(res.explain);
  ixia_idx_hits_clear(hits);
  ixia_query_destroy(q);
  g_array_free(want_in, TRUE);
  g_string_free(in, TRUE);
  /* A range over ~10% of the documents, its total known from its points:
   * the page too comes from the first live documents, not from gathering
   * and sorting 20,000 points. */
  range_t r10 = {1, 50, FALSE, FALSE};
  GArray *want_r = brute(p_price, &(shape_arg_t){.price = r10});
  CU_ASSERT_TRUE_FATAL(want_r->len > 1000);
  q = parse("{\"range\": {\"price\": {\"gte\": 1, \"lte\": 50}}}", ", \"track_total_hits\": 1000");
  o = (ixia_idx_search_opts_t){.after_id = -1, .limit = 10, .explain = TRUE};
  CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, NULL));
  CU_ASSERT_EQUAL_FATAL(hits->len, 10);
  CU_ASSERT_EQUAL(res.total, 1000);
  CU_ASSERT_FALSE(res.total_exact);
  CU_ASSERT_STRING_EQUAL(driver(res.explain), "live documents");
  assert_docs(hits, want_r, 0);
  cJSON_Delete(res.explain);
  ixia_idx_hits_clear(hits);
  ixia_query_destroy(q);
  g_array_free(want_r, TRUE);
  /* A term needs no counting: its total is exact at once. */
  q = parse("{\"term\": {\"country\": \"GB\"}}", ", \"track_total_hits\": 10");
  o = (ixia_idx_search_opts_t){.after_id = -1, .limit = 10};
  CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, NULL));
  CU_ASSERT_TRUE(res.total_exact);
  guint64 want = 0;
  for (guint i = 0; i < N_DOCS; i++) want += model[i].country == 3;
  CU_ASSERT_EQUAL(res.total, want);
  ixia_idx_hits_clear(hits);
  ixia_query_destroy(q);
  g_array_free(hits, TRUE);
}

/* One page of 10 of filter over table (shop.TABLE or another) with
 * track_total_hits 1000: its total, whether exact, its first ids, the
 * explain's matches_at_least (-1: absent) and blocks. */
typedef struct {
  guint64 total, blocks;
  gboolean exact;
  double at_least;
  guint32 first[10];
  guint n;
} known_t;

static known_t known_page_with(const char *table, const char *filter, const char *track, gint64 after,
                              const char *extra) {
  char *json = g_strdup_printf("{\"namespace\": \"shop\", \"table\": \"%s\", \"filter\": %s, "
                               "\"track_total_hits\": %s%s}", table, filter, track, extra);
  ixia_error_t *e = NULL;
  ixia_query_t *q = ixia_query_parse(json, strlen(json), ixia_idx_schema, idx, &lim, &e);
  if (!q) fprintf(stderr, "parse %s: %s\n", json, e->message);
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  ixia_idx_search_opts_t o = {.after_id = after, .limit = 10, .explain = TRUE};
  ixia_idx_result_t res;
  CU_ASSERT_TRUE_FATAL(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, &e));
  known_t k = {res.total, 0, res.total_exact, -1, {0}, hits->len};
  for (guint i = 0; i < hits->len; i++) k.first[i] = g_array_index(hits, ixia_idx_hit_t, i).id;
  const cJSON *al = cJSON_GetObjectItemCaseSensitive(res.explain, "matches_at_least");
  if (cJSON_IsNumber(al)) k.at_least = al->valuedouble;
  k.blocks = (guint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(res.explain, "blocks"));
  cJSON_Delete(res.explain);
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  ixia_query_destroy(q);
  g_free(json);
  return k;
}

static known_t known_page(const char *table, const char *filter, const char *track, gint64 after) {
  return known_page_with(table, filter, track, after, "");
}

/* The page against the brute force's ids (of table p): the first ten after
 * `after`. */
static void check_first(const known_t *k, const GArray *want, gint64 after) {
  guint j = 0;
  while (j < want->len && (gint64)g_array_index(want, guint32, j) <= after) j++;
  CU_ASSERT_EQUAL(k->n, MIN(10, want->len - j));
  for (guint i = 0; i < k->n && j + i < want->len; i++)
    CU_ASSERT_EQUAL(k->first[i], g_array_index(want, guint32, j + i));
}

static gboolean p_cat_below(const model_t *m, const void *a) { return m->cat < ((const shape_arg_t *)a)->cat; }

static gboolean p_gb_or_discount(const model_t *m, const void *a) {
  return !p_not_country(m, a) || p_discount(m, a);
}
static gboolean p_not_price(const model_t *m, const void *a) { return !p_price(m, a); }

/* A page stops counting at once when the index's own exact counts show the
 * matches reach track_total_hits: `not` of a term (live minus its
 * posting), exists (its posting), a keyword range (its most common value's
 * posting), a range of a numeric field whose documents each have one value
 * (its points), `not` of that range, the best of an `or`'s branches. The
 * total is then what the page counted, at least track_total_hits, "gte";
 * explain shows the count it went by, which the brute force confirms.
 * Where nothing is known (an and, a numeric field with several values in a
 * document) or the count is short of the total to track, the walk counts
 * as before. A page sorted by price (read from the points, the walk only
 * counting) holds the same hits either way. */
static void test_known_counts(void) {
  shape_arg_t sa = {.cat = 15, .country = 3, .brand = 700, .price = {100, 350, FALSE, FALSE}};
  GString *brands = g_string_new("{\"in\": {\"brand\": [");
  for (int i = 0; i < 100; i++) g_string_append_printf(brands, "%s\"b%04d\"", i ? "," : "", 700 + i);
  g_string_append(brands, "]}}");
  struct {
    const char *filter;
    pred_fn fn;
    const void *arg;
    gboolean exact_known; /* at_least is the exact count */
  } cases[] = {
      {"{\"not\": {\"term\": {\"country\": \"GB\"}}}", p_not_country, &sa, TRUE},
      {"{\"exists\": \"discount\"}", p_discount, &sa, TRUE},
      {"{\"range\": {\"cat\": {\"lt\": \"c15\"}}}", p_cat_below, &sa, FALSE},
      {brands->str, p_brand_in, &sa, FALSE},
      {"{\"range\": {\"price\": {\"gte\": 100, \"lte\": 350}}}", p_price, &sa, TRUE},
      {"{\"not\": {\"range\": {\"price\": {\"gte\": 100, \"lte\": 350}}}}", p_not_price, &sa, TRUE},
      {"{\"or\": [{\"term\": {\"country\": \"GB\"}}, {\"exists\": \"discount\"}]}", p_gb_or_discount, &sa, FALSE},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    GArray *want = brute(cases[c].fn, cases[c].arg);
    known_t k = known_page(TABLE, cases[c].filter, "1000", -1);
    CU_ASSERT_TRUE(k.at_least >= 1000);
    if (cases[c].exact_known) CU_ASSERT_EQUAL((guint64)k.at_least, want->len);
    CU_ASSERT_TRUE(k.at_least <= want->len);
    CU_ASSERT_TRUE(k.total >= 1000 && k.total <= want->len);
    CU_ASSERT_FALSE(k.exact);
    CU_ASSERT_TRUE(k.blocks <= 2);
    check_first(&k, want, -1);
    /* Deep in the pages: straight to the cursor's block. */
    k = known_page(TABLE, cases[c].filter, "1000", 150000);
    check_first(&k, want, 150000);
    CU_ASSERT_TRUE(k.total >= 1000 && k.total <= want->len);
    CU_ASSERT_TRUE(k.blocks <= 2);
    /* Short of the total to track: counted by the walk, to the end. */
    char t[32];
    g_snprintf(t, sizeof t, "%u", want->len + 1);
    k = known_page(TABLE, cases[c].filter, t, -1);
    CU_ASSERT_EQUAL(k.at_least, -1);
    CU_ASSERT_TRUE(k.total == want->len && k.exact);
    check_first(&k, want, -1);
    /* Sorted by price: the same page whether the walk counted or not. */
    const char *by_price = ", \"sort\": [{\"price\": \"desc\"}]";
    known_t fast = known_page_with(TABLE, cases[c].filter, "1000", -1, by_price);
    known_t full = known_page_with(TABLE, cases[c].filter, "true", -1, by_price);
    CU_ASSERT_TRUE(fast.at_least >= 1000 && full.at_least == -1);
    /* (A materialized lead with nothing to check is counted exactly at once.) */
    CU_ASSERT_TRUE(fast.total >= 1000 && (!fast.exact || fast.total == want->len) &&
                   full.total == want->len && full.exact);
    CU_ASSERT_TRUE(fast.n == 10 && full.n == 10 && memcmp(fast.first, full.first, sizeof fast.first) == 0);
    g_array_free(want, TRUE);
  }
  g_string_free(brands, TRUE);
  /* An and is not known: counted. */
  known_t k = known_page(TABLE, "{\"and\": [{\"not\": {\"term\": {\"country\": \"GB\"}}}, {\"exists\": \"discount\"}]}",
                         "1000", -1);
  CU_ASSERT_EQUAL(k.at_least, -1);
  CU_ASSERT_TRUE(k.total >= 1000);

  /* A table whose fields hold several values in some documents. */
  const char *ms = "{\"namespace\": \"shop\", \"table\": \"m\", \"indexes\": ["
                   "{\"field\": \"tags\", \"type\": \"keyword\"}, {\"field\": \"sizes\", \"type\": \"long\"},"
                   "{\"field\": \"color\", \"type\": \"keyword\"}]}";
  ixia_error_t *e = NULL;
  ixia_idx_event_t schema = {IXIA_IDX_SCHEMA, NS, "m", "", 0, 300000, ms, strlen(ms), 0};
  CU_ASSERT_TRUE_FATAL(ixia_idx_apply(idx, &schema, 1, NULL, 0, NULL, NULL, NULL, &e));
  enum { M = 6000 };
  ixia_idx_event_t *evs = g_new0(ixia_idx_event_t, M);
  char **texts = g_new0(char *, 2 * M);
  guint with_t1 = 0, t1_or_t2 = 0, without_t1 = 0, most = 0, sized = 0;
  for (guint i = 0; i < M; i++) {
    gboolean t1 = i % 3 == 0, t2 = i % 4 == 0;
    with_t1 += t1, t1_or_t2 += t1 || t2, without_t1 += !t1;
    texts[2 * i] = g_strdup_printf("m%05u", i);
    /* Every document has a size; every other one two. */
    texts[2 * i + 1] = g_strdup_printf("{\"tags\": [\"x\"%s%s], \"sizes\": %s, \"color\": \"c%u\"}",
                                       t1 ? ", \"t1\"" : "", t2 ? ", \"t2\"" : "", i % 2 ? "[3, 4]" : "[5]", i % 5);
    sized++;
    evs[i] = (ixia_idx_event_t){IXIA_IDX_PUT, NS, "m", texts[2 * i], strlen(texts[2 * i]), 300001 + i,
                                texts[2 * i + 1], strlen(texts[2 * i + 1]), 0};
  }
  most = MAX(with_t1, M / 4);
  CU_ASSERT_TRUE_FATAL(ixia_idx_apply(idx, evs, M, NULL, 0, NULL, NULL, NULL, &e));
  for (guint i = 0; i < 2 * M; i++) g_free(texts[i]);
  g_free(texts);
  g_free(evs);
  /* sizes has 9,000 points for 6,000 documents: not one value each. */
  k = known_page("m", "{\"range\": {\"sizes\": {\"gte\": 0}}}", "100", -1);
  CU_ASSERT_EQUAL(k.at_least, -1);
  CU_ASSERT_TRUE(k.total >= 100 && k.total <= sized);
  /* An in over two tags: at least the documents of the commoner one. */
  k = known_page("m", "{\"in\": {\"tags\": [\"t1\", \"t2\"]}}", "100", -1);
  CU_ASSERT_EQUAL(k.at_least, most);
  CU_ASSERT_TRUE(k.at_least <= t1_or_t2);
  CU_ASSERT_TRUE(k.total >= 100 && k.total <= t1_or_t2 && !k.exact);
  /* not of a tag: every document without it, exactly. */
  k = known_page("m", "{\"not\": {\"term\": {\"tags\": \"t1\"}}}", "100", -1);
  CU_ASSERT_EQUAL(k.at_least, without_t1);
  CU_ASSERT_TRUE(k.total >= 100 && k.total <= without_t1 && !k.exact);
  /* Past the commoner tag: the two postings' sum (3,500) would count the
   * 500 documents with both twice; the walk counts instead. */
  k = known_page("m", "{\"in\": {\"tags\": [\"t1\", \"t2\"]}}", "2500", -1);
  CU_ASSERT_EQUAL(k.at_least, -1);
  CU_ASSERT_TRUE(k.total >= 2500 && k.total <= t1_or_t2);
  /* color holds one value in every document: an in over three colors
   * (1,200 documents each) is known from their postings' sum, until one
   * document holds two colors, and again once it holds one. */
  const char *colors = "{\"in\": {\"color\": [\"c0\", \"c1\", \"c2\", \"c1\"]}}";
  k = known_page("m", colors, "3000", -1);
  CU_ASSERT_EQUAL(k.at_least, 3600);
  CU_ASSERT_TRUE(k.total >= 3000 && k.total <= 3600 && !k.exact && k.blocks <= 2);
  const char *docs[] = {"{\"tags\": [\"x\"], \"sizes\": 5, \"color\": [\"c0\", \"c4\"]}",
                        "{\"tags\": [\"x\"], \"sizes\": 5, \"color\": \"c4\"}"};
  for (guint i = 0; i < G_N_ELEMENTS(docs); i++) {
    ixia_idx_event_t ev = {IXIA_IDX_PUT, NS, "m", "m00000", 6, 300001 + M + i, docs[i], strlen(docs[i]), 0};
    CU_ASSERT_TRUE_FATAL(ixia_idx_apply(idx, &ev, 1, NULL, 0, NULL, NULL, NULL, &e));
    k = known_page("m", colors, "3000", -1);
    CU_ASSERT_EQUAL(k.at_least, i == 0 ? -1 : 3599);
    CU_ASSERT_TRUE(k.total >= 3000 && k.total <= 3600);
    if (i == 0) CU_ASSERT_TRUE(k.blocks > 2);
  }
  /* After a restart the doc values are rebuilt from the column blocks, and
   * so is their count of documents holding several values; without doc
   * values the sum is never taken. */
  for (guint i = 0; i < G_N_ELEMENTS(docs); i++) {
    ixia_idx_event_t ev = {IXIA_IDX_PUT, NS, "m", "m00000", 6, 300003 + M + i, docs[i], strlen(docs[i]), 0};
    CU_ASSERT_TRUE_FATAL(ixia_idx_apply(idx, &ev, 1, NULL, 0, NULL, NULL, NULL, &e));
    open_idx("1024");
    k = known_page("m", colors, "3000", -1);
    CU_ASSERT_EQUAL(k.at_least, i == 0 ? -1 : 3599);
    CU_ASSERT_TRUE(k.total >= 3000 && k.total <= 3600);
  }
  open_idx("0");
  k = known_page("m", colors, "3000", -1);
  CU_ASSERT_EQUAL(k.at_least, -1);
  CU_ASSERT_TRUE(k.total >= 3000 && k.total <= 3600);
  open_idx("1024");
}

/* One search of filter for the sparse-walk comparison: hits (ids), total,
 * whether it is exact, and the driver explain names. */
typedef struct {
  GArray *ids;
  guint64 total;
  gboolean exact;
  char *driver;
} page_t;

static page_t one_page(const char *filter, const char *track, guint limit, gint64 after) {
  char extra[64];
  snprintf(extra, sizeof extra, ", \"track_total_hits\": %s", track);
  ixia_query_t *q = parse(filter, extra);
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  ixia_idx_search_opts_t o = {.after_id = after, .limit = limit, .explain = TRUE};
  ixia_idx_result_t res;
  ixia_error_t *e = NULL;
  gboolean ok = ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, &e);
  if (!ok) fprintf(stderr, "search %s: %s\n", filter, e->message);
  ixia_error_destroy(e);
  CU_ASSERT_TRUE_FATAL(ok);
  page_t p = {g_array_new(FALSE, FALSE, sizeof(gint64)), res.total, res.total_exact,
              g_strdup(driver(res.explain))};
  for (guint i = 0; i < hits->len; i++) g_array_append_val(p.ids, g_array_index(hits, ixia_idx_hit_t, i).id);
  cJSON_Delete(res.explain);
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  ixia_query_destroy(q);
  return p;
}

static void page_free(page_t *p) {
  g_array_free(p->ids, TRUE);
  g_free(p->driver);
}

/* Sparse candidates (a selective lead, checks on a wide clause) are checked
 * as ids a chunk at a time, not walked block by block; every answer must be
 * the block walk's: the same hits, the same total and the same relation,
 * for every tracked total, page size and cursor (the block walk forced by
 * the BLOCK_WALK_ONLY test hook). The leads: one brand (~100 candidates),
 * and six brands ANDed with two ranges (~600 candidates over 196 blocks,
 * more than one chunk); the checks: a column, an OR, a NOT, exists. */
static void test_sparse_walk_is_the_block_walk(void) {
  GString *six = g_string_new("{\"in\": {\"brand\": [");
  for (int i = 0; i < 6; i++) g_string_append_printf(six, "%s\"b%04d\"", i ? "," : "", 300 + 7 * i);
  g_string_append(six, "]}}");
  char f6[1024];
  snprintf(f6, sizeof f6,
           "{\"and\": [%s, {\"range\": {\"price\": {\"gte\": 5, \"lte\": 480}}},"
           " {\"range\": {\"ts\": {\"gt\": -9000000000000000000}}}]}",
           six->str);
  const char *filters[] = {
      "{\"and\": [{\"term\": {\"brand\": \"b1234\"}}, {\"range\": {\"price\": {\"gte\": 100, \"lte\": 350}}}]}",
      f6,
      "{\"and\": [{\"term\": {\"brand\": \"b0777\"}}, {\"or\": [{\"range\": {\"price\": {\"lt\": 120}}},"
      " {\"range\": {\"price\": {\"gt\": 380}}}]}]}",
      "{\"and\": [{\"term\": {\"brand\": \"b0042\"}}, {\"not\": {\"term\": {\"country\": \"GB\"}}}]}",
      "{\"and\": [{\"term\": {\"brand\": \"b1999\"}}, {\"exists\": \"discount\"}]}",
  };
  static const char *const tracks[] = {"1", "5", "13", "29", "40", "61", "97", "150", "300", "true"};
  static const guint limits[] = {0, 1, 3, 10, 100};
  guint compared = 0, sparse_seen = 0;
  for (guint f = 0; f < G_N_ELEMENTS(filters); f++) {
    /* The matches' ids, for cursors at several places. */
    g_setenv("IXIA_TEST_BLOCK_WALK_ONLY", "1", TRUE);
    page_t all = one_page(filters[f], "true", 1000, -1);
    g_unsetenv("IXIA_TEST_BLOCK_WALK_ONLY");
    CU_ASSERT_TRUE(all.ids->len >= 10);
    gint64 cursors[7] = {-1, 0, 0, 0, 0, 190000, G_MAXUINT32}; /* (the last: past every id) */
    for (guint c = 1; c < 5 && all.ids->len; c++)
      cursors[c] = g_array_index(all.ids, gint64, MIN(all.ids->len - 1, (c * c * all.ids->len) / 20));
    for (guint t = 0; t < G_N_ELEMENTS(tracks); t++)
      for (guint l = 0; l < G_N_ELEMENTS(limits); l++)
        for (guint c = 0; c < G_N_ELEMENTS(cursors); c++) {
          page_t sp = one_page(filters[f], tracks[t], limits[l], cursors[c]);
          g_setenv("IXIA_TEST_BLOCK_WALK_ONLY", "1", TRUE);
          page_t bw = one_page(filters[f], tracks[t], limits[l], cursors[c]);
          g_unsetenv("IXIA_TEST_BLOCK_WALK_ONLY");
          sparse_seen += strcmp(sp.driver, "candidates from the index, checked as ids") == 0;
          CU_ASSERT_STRING_NOT_EQUAL(bw.driver, "candidates from the index, checked as ids");
          gboolean same = sp.total == bw.total && sp.exact == bw.exact && sp.ids->len == bw.ids->len &&
                          (sp.ids->len == 0 ||
                           memcmp(sp.ids->data, bw.ids->data, sp.ids->len * sizeof(gint64)) == 0);
          if (!same)
            fprintf(stderr, "\nfilter %u track %s limit %u after %" G_GINT64_FORMAT ": sparse %" G_GUINT64_FORMAT
                    " %s %u hits, block %" G_GUINT64_FORMAT " %s %u hits\n",
                    f, tracks[t], limits[l], cursors[c], sp.total, sp.exact ? "eq" : "gte", sp.ids->len,
                    bw.total, bw.exact ? "eq" : "gte", bw.ids->len);
          CU_ASSERT_TRUE(same);
          compared++;
          page_free(&sp);
          page_free(&bw);
        }
    page_free(&all);
  }
  printf("\n  %u answers compared, %u of them walked as ids\n", compared, sparse_seen);
  /* Every filter's lead is sparse (the rule is the planner's business; the
   * comparison is only worth something when the ids walk runs). */
  CU_ASSERT_EQUAL(sparse_seen, compared);
  g_string_free(six, TRUE);
}

/* Numeric edges: exclusive and inclusive bounds on values that exist,
 * negative numbers, -0 and +0 (one value), huge and tiny doubles, and
 * timestamps. */
static gboolean p_score(const model_t *m, const void *a) { return in_range(m->score, a); }
static gboolean p_score_eq(const model_t *m, const void *a) { return m->score == *(const double *)a; }
static gboolean p_ts(const model_t *m, const void *a) {
  const gint64 *b = a;
  return m->ts > b[0] && m->ts <= b[1];
}

static void test_numeric_edges(void) {
  static const struct {
    const char *f;
    range_t r;
  } cases[] = {
      {"{\"range\": {\"score\": {\"gte\": 0, \"lte\": 0}}}", {0, 0, FALSE, FALSE}},
      {"{\"range\": {\"score\": {\"gt\": -0.0, \"lt\": 1}}}", {0, 1, TRUE, TRUE}},
      {"{\"range\": {\"score\": {\"gte\": -2.5, \"lt\": 2.5}}}", {-2.5, 2.5, FALSE, TRUE}},
      {"{\"range\": {\"score\": {\"gt\": -2.5, \"lte\": 2.5}}}", {-2.5, 2.5, TRUE, FALSE}},
      {"{\"range\": {\"score\": {\"lt\": -1000}}}", {-INFINITY, -1000, FALSE, TRUE}},
      {"{\"range\": {\"score\": {\"gt\": 1e300}}}", {1e300, INFINITY, TRUE, FALSE}},
      {"{\"range\": {\"score\": {\"gt\": 0, \"lt\": 1e-300}}}", {0, 1e-300, TRUE, TRUE}},
      {"{\"range\": {\"score\": {\"gte\": -1e308, \"lte\": 1e308}}}", {-1e308, 1e308, FALSE, FALSE}},
      {"{\"range\": {\"score\": {\"gte\": -500.5, \"lte\": 499.99}}}", {-500.5, 499.99, FALSE, FALSE}},
      {"{\"range\": {\"score\": {\"gte\": 10, \"lte\": 5}}}", {10, 5, FALSE, FALSE}},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) cJSON_Delete(check(cases[i].f, p_score, &cases[i].r));
  double zero = 0.0, neg = -2.5, huge = 1e308;
  cJSON_Delete(check("{\"term\": {\"score\": -0.0}}", p_score_eq, &zero));
  cJSON_Delete(check("{\"term\": {\"score\": -2.5}}", p_score_eq, &neg));
  cJSON_Delete(check("{\"in\": {\"score\": [1e308]}}", p_score_eq, &huge));
  /* The same ranges checked per candidate (led by a term). */
  const range_t wide = {-1e308, 0, FALSE, FALSE};
  cJSON *ex = check("{\"and\": [{\"range\": {\"score\": {\"gte\": -1e308, \"lte\": 0}}}, {\"exists\": \"score\"}]}",
                    p_score, &wide);
  cJSON_Delete(ex);
  gint64 ts[2] = {1700500000, 1700500100};
  cJSON_Delete(check("{\"range\": {\"ts\": {\"gt\": 1700500000, \"lte\": 1700500100}}}", p_ts, ts));
}

/* The same shapes and edges with doc values off: every check reads the
 * column blocks, with the same results. */
static void test_without_doc_values(void) {
  open_idx("0");
  check_how = "column check";
  test_shapes();
  test_numeric_edges();
  check_how = "doc values check";
  open_idx("1024");
}

/* A page walk given up: an index of its own (60,000 documents), where the
 * brands z000-z099 are held only by the last 6,000. An `in` of those 100
 * brands has 10% of the documents and a total past track_total_hits, so
 * a page of 10 first walks the live documents; its matches are not spread
 * as the estimate assumes, and after a few blocks without a match the
 * search reads the union instead: the page is the first ten of the
 * cluster, and explain says after how many blocks the walk was given up.
 * The same `in` over brands spread evenly walks and fills its page. */
static void test_page_walk_given_up(void) {
  ixia_config_t *cfg = ixia_config_new();
  ixia_config_set(cfg, "index.write_buffer_mb", "16", NULL);
  char *path = g_build_filename(dir, "clustered", NULL);
  ixia_error_t *e = NULL;
  ixia_idx_t *cx = ixia_idx_open(path, cfg, &e);
  g_free(path);
  ixia_config_destroy(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cx);
  const char *sj = "{\"namespace\": \"shop\", \"table\": \"c\", \"indexes\": [{\"field\": \"brand\", \"type\": \"keyword\"}]}";
  ixia_idx_event_t schema = {IXIA_IDX_SCHEMA, NS, "c", "", 0, 1, sj, strlen(sj), 0};
  CU_ASSERT_TRUE_FATAL(ixia_idx_apply(cx, &schema, 1, NULL, 0, NULL, NULL, NULL, &e));
  const guint n = 60000, cluster = 54000, batch = 2000;
  ixia_idx_event_t *evs = g_new0(ixia_idx_event_t, batch);
  char **texts = g_new0(char *, 2 * batch);
  for (guint done = 0; done < n; done += batch) {
    for (guint i = 0; i < batch; i++) {
      guint id = done + i;
      texts[2 * i] = g_strdup_printf("d%06u", id);
      texts[2 * i + 1] = g_strdup_printf("{\"brand\":\"%c%03u\"}", id < cluster ? 'a' : 'z', id % 100);
      evs[i] = (ixia_idx_event_t){IXIA_IDX_PUT, NS, "c", texts[2 * i], strlen(texts[2 * i]), id + 2,
                                  texts[2 * i + 1], strlen(texts[2 * i + 1]), 0};
    }
    CU_ASSERT_TRUE_FATAL(ixia_idx_apply(cx, evs, batch, NULL, 0, NULL, NULL, NULL, &e));
    for (guint i = 0; i < 2 * batch; i++) g_free(texts[i]);
  }
  g_free(texts);
  g_free(evs);
  for (int z = 0; z < 2; z++) {
    GString *json = g_string_new("{\"namespace\": \"shop\", \"table\": \"c\", \"filter\": {\"in\": {\"brand\": [");
    for (int i = 0; i < 100; i++) g_string_append_printf(json, "%s\"%c%03d\"", i ? "," : "", z ? 'z' : 'a', i);
    g_string_append(json, "]}}, \"track_total_hits\": 1000}");
    ixia_query_t *q = ixia_query_parse(json->str, json->len, ixia_idx_schema, cx, &lim, &e);
    g_string_free(json, TRUE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
    ixia_idx_search_opts_t o = {.after_id = -1, .limit = 10, .explain = TRUE};
    ixia_idx_result_t res;
    CU_ASSERT_TRUE_FATAL(ixia_idx_search(cx, q, &o, &lim, hits, NULL, &res, &e));
    CU_ASSERT_EQUAL_FATAL(hits->len, 10);
    CU_ASSERT_TRUE(res.total >= 1000 && res.total < 6000);
    CU_ASSERT_FALSE(res.total_exact);
    const cJSON *given = cJSON_GetObjectItemCaseSensitive(res.explain, "page_walk_given_up_after_blocks");
    for (guint i = 0; i < hits->len; i++) {
      guint32 doc = (guint32)atoi(g_array_index(hits, ixia_idx_hit_t, i).key + 1);
      CU_ASSERT_EQUAL(doc, (z ? cluster : 0) + i);
    }
    if (z) {
      CU_ASSERT_STRING_EQUAL(driver(res.explain), "union of postings, a chunk at a time");
      CU_ASSERT_TRUE(cJSON_IsNumber(given) && given->valuedouble >= 4 && given->valuedouble < 50);
    } else {
      CU_ASSERT_STRING_EQUAL(driver(res.explain), "live documents");
      CU_ASSERT_PTR_NULL(given);
    }
    cJSON_Delete(res.explain);
    ixia_idx_hits_clear(hits);
    g_array_free(hits, TRUE);
    ixia_query_destroy(q);
  }
  ixia_idx_destroy(cx);
}

int main(void) {
  dir = ixt_tmpdir();
  build();
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("planner", NULL, NULL);
  IXT_ADD(s, test_shapes);
  IXT_ADD(s, test_early_stop);
  IXT_ADD(s, test_page_walk_given_up);
  IXT_ADD(s, test_known_counts);
  IXT_ADD(s, test_sparse_walk_is_the_block_walk);
  IXT_ADD(s, test_numeric_edges);
  IXT_ADD(s, test_without_doc_values);
  int rc = ixt_run();
  ixia_idx_destroy(idx);
  g_free(model);
  g_free(dir);
  return rc;
}
