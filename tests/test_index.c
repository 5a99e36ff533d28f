/* Unit tests of the index library (indexer/index.h) on a real RocksDB in a
 * temp dir: posting maintenance through the merge operator, apply + search
 * against a brute force evaluation of the same documents (filters, totals,
 * paging, aggregations), idempotent and out-of-order replays, deletes,
 * positions, failed events and query limits; and the numeric points
 * (idx_points.c, through the library's private header) against a
 * brute-force list of their pairs.
 *
 * IXIA_INDEX_BENCH=N runs a micro-benchmark instead: N generated ~1 KB
 * product documents applied in batches of 1,000, then one aggregation over
 * about 30% of them. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "idx.h" /* the points of numeric fields, tested directly below */
#include "index.h"
#include "json.h"
#include "support.h"
#include "timeutil.h"

static ixia_config_t *cfg;
static ixia_query_limits_t lim;
static char *dir;

#define NS "shop"
#define TABLE "p"

static const char *schema_json =
    "{\"namespace\": \"shop\", \"table\": \"p\", \"indexes\": ["
    "{\"field\": \"cat\", \"type\": \"keyword\"}, {\"field\": \"tags\", \"type\": \"keyword\"},"
    "{\"field\": \"price\", \"type\": \"double\"}, {\"field\": \"qty\", \"type\": \"long\"},"
    "{\"field\": \"ok\", \"type\": \"bool\"}, {\"field\": \"title\", \"type\": \"text\"},"
    "{\"field\": \"ts\", \"type\": \"timestamp\"}, {\"field\": \"s.country\", \"type\": \"keyword\"},"
    "{\"field\": \"v.color\", \"type\": \"keyword\"}, {\"field\": \"v.n\", \"type\": \"long\"},"
    "{\"field\": \"body\", \"type\": \"text\", \"analyzer\": \"english\", \"positions\": true}]}";

/* ------------------------------------------------------------ helpers */

typedef struct {
  ixia_idx_op_t op;
  char *key;
  gint64 version;
  char *doc;
} tev_t;

static void tev_free(gpointer p) {
  tev_t *e = p;
  g_free(e->key);
  g_free(e->doc);
  g_free(e);
}

static tev_t *tev_new(ixia_idx_op_t op, const char *key, gint64 version, const char *doc) {
  tev_t *e = g_new0(tev_t, 1);
  e->op = op;
  e->key = g_strdup(key);
  e->version = version;
  e->doc = g_strdup(doc);
  return e;
}

static ixia_idx_event_t to_event(const tev_t *t) {
  ixia_idx_event_t ev = {.op = t->op, .ns = NS, .table = TABLE, .key = t->key,
                         .key_len = t->key ? strlen(t->key) : 0, .version = t->version,
                         .doc = t->doc, .doc_len = t->doc ? strlen(t->doc) : 0};
  if (t->op == IXIA_IDX_SCHEMA) ev.key = "", ev.key_len = 0;
  return ev;
}

typedef struct {
  guint n;
  GPtrArray *codes; /* GINT_TO_POINTER(code) */
  GPtrArray *keys;
} failures_t;

static void on_failed(const ixia_idx_event_t *ev, const ixia_error_t *why, void *ud) {
  failures_t *f = ud;
  if (!f) return;
  f->n++;
  if (f->codes) g_ptr_array_add(f->codes, GINT_TO_POINTER(why->code));
  if (f->keys) g_ptr_array_add(f->keys, g_strndup(ev->key, ev->key_len));
}

/* Applies events [from, to) of evs in one batch. */
static gboolean apply_range(ixia_idx_t *idx, GPtrArray *evs, guint from, guint to, guint *applied) {
  ixia_idx_event_t *arr = g_new0(ixia_idx_event_t, to - from + 1);
  for (guint i = from; i < to; i++) arr[i - from] = to_event(evs->pdata[i]);
  ixia_error_t *e = NULL;
  gboolean ok = ixia_idx_apply(idx, arr, to - from, NULL, 0, on_failed, NULL, applied, &e);
  if (!ok) fprintf(stderr, "apply: %s\n", e->message);
  ixia_error_destroy(e);
  g_free(arr);
  return ok;
}

/* Applies every event in random-sized batches. */
static gboolean apply_all(ixia_idx_t *idx, GPtrArray *evs, GRand *rng) {
  for (guint i = 0; i < evs->len;) {
    guint n = (guint)g_rand_int_range(rng, 1, 200);
    guint to = MIN(evs->len, i + n);
    if (!apply_range(idx, evs, i, to, NULL)) return FALSE;
    i = to;
  }
  return TRUE;
}

static gboolean apply_one(ixia_idx_t *idx, ixia_idx_op_t op, const char *key, gint64 version,
                          const char *doc, failures_t *fails) {
  tev_t t = {op, (char *)key, version, (char *)doc};
  ixia_idx_event_t ev = to_event(&t);
  ixia_error_t *e = NULL;
  gboolean ok = ixia_idx_apply(idx, &ev, 1, NULL, 0, on_failed, fails, NULL, &e);
  ixia_error_destroy(e);
  return ok;
}

static ixia_idx_t *open_index(const char *name) {
  char *path = g_build_filename(dir, name, NULL);
  ixia_error_t *e = NULL;
  ixia_idx_t *idx = ixia_idx_open(path, cfg, &e);
  if (!idx) fprintf(stderr, "open %s: %s\n", path, e->message);
  ixia_error_destroy(e);
  g_free(path);
  return idx;
}

/* Closes idx and opens it again (what a restart does). */
static ixia_idx_t *reopen_index(ixia_idx_t *idx, const char *name) {
  ixia_idx_destroy(idx);
  return open_index(name);
}

/* ixia_idx_search with the options as arguments. */
static gboolean isearch(ixia_idx_t *idx, const ixia_query_t *q, gint64 after, guint limit,
                        gint64 deadline_us, const ixia_query_limits_t *l, GArray *hits,
                        guint64 *total, ixia_aggs_t *aggs, ixia_error_t **err) {
  ixia_idx_search_opts_t o = {.after_id = after, .limit = limit, .deadline_us = deadline_us};
  ixia_idx_result_t r;
  gboolean ok = ixia_idx_search(idx, q, &o, l, hits, aggs, &r, err);
  if (ok && total) *total = r.total;
  return ok;
}

static ixia_query_t *parse(ixia_idx_t *idx, const char *json) {
  ixia_error_t *e = NULL;
  ixia_query_t *q = ixia_query_parse(json, strlen(json), ixia_idx_schema, idx, &lim, &e);
  if (!q) fprintf(stderr, "parse %s: %s\n", json, e->message);
  ixia_error_destroy(e);
  return q;
}

static gint cmp_str(gconstpointer a, gconstpointer b) {
  return g_ascii_strcasecmp(*(char *const *)a, *(char *const *)b);
}

/* Every matching key, read page by page (ids strictly ascending), joined
 * sorted with "\n"; *total from the first page. NULL on error. */
static char *search_keys(ixia_idx_t *idx, const ixia_query_t *q, guint page, guint64 *total,
                         gboolean *ids_ok) {
  GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  gint64 after = -1;
  gboolean ok = TRUE;
  *ids_ok = TRUE;
  for (guint round = 0; ok; round++) {
    guint64 t = 0;
    ixia_error_t *e = NULL;
    ixia_idx_hits_clear(hits);
    ok = isearch(idx, q, after, page, 0, &lim, hits, &t, NULL, &e);
    if (!ok) {
      fprintf(stderr, "search: %s\n", e->message);
      ixia_error_destroy(e);
      break;
    }
    if (round == 0) *total = t;
    for (guint i = 0; i < hits->len; i++) {
      ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
      if ((gint64)h->id <= after) *ids_ok = FALSE;
      after = h->id;
      g_ptr_array_add(keys, g_strdup(h->key));
    }
    if (hits->len < page) break;
  }
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  char *out = NULL;
  if (ok) {
    g_ptr_array_sort(keys, cmp_str);
    g_ptr_array_add(keys, NULL);
    out = g_strjoinv("\n", (char **)keys->pdata);
  }
  g_ptr_array_free(keys, TRUE);
  return out;
}

static ixia_bm25_stats_t *model_stats(GHashTable *model, const ixia_query_t *q);

/* Brute force over the model (key -> cJSON doc of live documents). */
static char *brute_keys(GHashTable *model, const ixia_query_t *q, guint64 *total, ixia_aggs_t *aggs) {
  GPtrArray *keys = g_ptr_array_new();
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, model);
  while (g_hash_table_iter_next(&it, &k, &v))
    if (ixia_query_match_doc(q, v)) g_ptr_array_add(keys, k);
  g_ptr_array_sort(keys, cmp_str);
  /* Feed aggregations in key order; float sums may still differ in the
   * last bits from the index's id order. */
  ixia_bm25_stats_t *st = aggs ? model_stats(model, q) : NULL;
  for (guint i = 0; aggs && i < keys->len; i++) {
    ixia_error_t *e = NULL;
    cJSON *doc = g_hash_table_lookup(model, keys->pdata[i]);
    CU_ASSERT_TRUE(ixia_aggs_add_hit(aggs, doc, keys->pdata[i], 0, ixia_query_score_doc(q, st, doc), &e));
    ixia_error_destroy(e);
  }
  ixia_bm25_stats_free(st);
  *total = keys->len;
  g_ptr_array_add(keys, NULL);
  char *out = g_strjoinv("\n", (char **)keys->pdata);
  g_ptr_array_free(keys, TRUE);
  return out;
}

/* Structural equality with a small relative tolerance for numbers. */
static gboolean json_close(const cJSON *a, const cJSON *b) {
  if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
    double x = a->valuedouble, y = b->valuedouble;
    return fabs(x - y) <= 1e-9 * MAX(1.0, MAX(fabs(x), fabs(y)));
  }
  if ((a->type & 0xff) != (b->type & 0xff)) return FALSE;
  if (cJSON_IsString(a)) return strcmp(a->valuestring, b->valuestring) == 0;
  if (cJSON_IsArray(a) || cJSON_IsObject(a)) {
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return FALSE;
    for (const cJSON *x = a->child, *y = b->child; x && y; x = x->next, y = y->next) {
      if (cJSON_IsObject(a) && strcmp(x->string, y->string) != 0) return FALSE;
      if (!json_close(x, y)) return FALSE;
    }
    return TRUE;
  }
  return cJSON_Compare(a, b, TRUE);
}

/* Documents of the table as "key version deleted" lines. */
static gboolean collect_doc(const char *key, size_t key_len, gint64 version, gboolean deleted,
                            void *ud) {
  g_string_append_printf(ud, "%.*s %" G_GINT64_FORMAT " %d\n", (int)key_len, key, version, deleted);
  return TRUE;
}

static char *dump_docs(ixia_idx_t *idx) {
  GString *s = g_string_new(NULL);
  CU_ASSERT_TRUE(ixia_idx_foreach_doc(idx, NS, TABLE, NULL, 0, collect_doc, s, NULL));
  return g_string_free(s, FALSE);
}

static guint64 count(ixia_idx_t *idx, const char *query) {
  ixia_query_t *q = parse(idx, query);
  guint64 total = G_MAXUINT64;
  if (!q) return total;
  ixia_error_t *e = NULL;
  if (!isearch(idx, q, -1, 0, 0, &lim, NULL, &total, NULL, &e)) {
    fprintf(stderr, "search %s: %s\n", query, e->message);
    total = G_MAXUINT64;
  }
  ixia_error_destroy(e);
  ixia_query_destroy(q);
  return total;
}

/* ---------------------------------------------------- random documents */

static const char *words[] = {"Red", "shoe", "blue", "hat", "w1", "w12", "w123", "lamp",
                              "Desk", "chair", "x9", "café", "CAFÉ", "Straße", "STRASSE",
                              "\xef\xac\x81le", "FILE"};
/* The body field is analyzed in English: stems meet across forms. */
static const char *body_words[] = {"running", "runs", "RUN", "Mugs", "mug", "Caf\xc3\xa9s", "CAFÉ",
                                   "generously", "generous", "shop"};

/* A timestamp within a day and a half of the start of a month of 2020 to
 * 2023: calendar buckets meet their edges, in every time zone. */
static gint64 random_ts(GRand *r) {
  gint64 days = ixia_days_from_civil(g_rand_int_range(r, 2020, 2024), (guint)g_rand_int_range(r, 1, 13), 1);
  return days * 86400 + g_rand_int_range(r, -36 * 3600, 36 * 3600);
}

static void add_random_field(GString *s, GRand *r, const char *name, gboolean *first) {
  if (g_rand_int_range(r, 0, 100) < 20) return; /* missing */
  g_string_append_printf(s, "%s\"%s\": ", *first ? "" : ", ", name);
  *first = FALSE;
  if (g_rand_int_range(r, 0, 100) < 4) {
    g_string_append(s, "null");
    return;
  }
  if (!strcmp(name, "cat")) {
    g_string_append_printf(s, "\"c%d\"", g_rand_int_range(r, 0, 12));
  } else if (!strcmp(name, "tags")) {
    int n = g_rand_int_range(r, 0, 4);
    g_string_append_c(s, '[');
    for (int i = 0; i < n; i++)
      g_string_append_printf(s, "%s\"t%d\"", i ? ", " : "", g_rand_int_range(r, 0, 15));
    g_string_append_c(s, ']');
  } else if (!strcmp(name, "price")) {
    if (g_rand_int_range(r, 0, 10) == 0)
      g_string_append_printf(s, "[%g, %g]", g_rand_int_range(r, -20, 200) * 0.5,
                             g_rand_int_range(r, -20, 200) * 0.5);
    else
      g_string_append_printf(s, "%g", g_rand_int_range(r, -20, 200) * 0.5);
  } else if (!strcmp(name, "qty")) {
    g_string_append_printf(s, "%d", g_rand_int_range(r, -50, 50));
  } else if (!strcmp(name, "ok")) {
    g_string_append(s, g_rand_boolean(r) ? "true" : "false");
  } else if (!strcmp(name, "title")) {
    g_string_append_c(s, '"');
    int n = g_rand_int_range(r, 0, 5);
    for (int i = 0; i < n; i++)
      g_string_append_printf(s, "%s%s", i ? (g_rand_boolean(r) ? " " : "-") : "",
                             words[g_rand_int_range(r, 0, G_N_ELEMENTS(words))]);
    g_string_append_c(s, '"');
  } else if (!strcmp(name, "body")) {
    g_string_append_c(s, '"');
    int n = g_rand_int_range(r, 1, 6);
    for (int i = 0; i < n; i++)
      g_string_append_printf(s, "%s%s", i ? " " : "", body_words[g_rand_int_range(r, 0, G_N_ELEMENTS(body_words))]);
    g_string_append_c(s, '"');
  } else if (!strcmp(name, "ts")) {
    gint64 t = random_ts(r);
    if (g_rand_boolean(r)) {
      /* RFC 3339 at a random offset: indexed as the same epoch seconds. */
      gint32 off = g_rand_int_range(r, -12, 13) * 1800;
      char *iso = ixia_time_format(t, off);
      g_string_append_printf(s, "\"%s\"", iso);
      g_free(iso);
    } else {
      g_string_append_printf(s, "%" G_GINT64_FORMAT, t);
    }
  } else if (!strcmp(name, "v")) {
    /* An array of objects, sometimes nested one level deeper. */
    static const char *colors[] = {"red", "green", "blue", "black"};
    int n = g_rand_int_range(r, 0, 4);
    g_string_append_c(s, '[');
    for (int i = 0; i < n; i++) {
      gboolean deep = g_rand_int_range(r, 0, 5) == 0;
      g_string_append_printf(s, "%s%s{\"color\": \"%s\", \"n\": %d}%s", i ? ", " : "", deep ? "[" : "",
                             colors[g_rand_int_range(r, 0, 4)], g_rand_int_range(r, 0, 6), deep ? "]" : "");
    }
    g_string_append_c(s, ']');
  } else if (!strcmp(name, "s")) {
    static const char *c[] = {"US", "CA", "FR", "DE"};
    g_string_append_printf(s, "{\"country\": \"%s\"}", c[g_rand_int_range(r, 0, 4)]);
  }
}

static char *random_doc(GRand *r) {
  static const char *fields[] = {"cat", "tags", "price", "qty", "ok", "title", "ts", "s", "v", "body"};
  GString *s = g_string_new("{");
  gboolean first = TRUE;
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++) add_random_field(s, r, fields[i], &first);
  g_string_append_printf(s, "%s\"other\": %d}", first ? "" : ", ", g_rand_int(r) % 100);
  return g_string_free(s, FALSE);
}

/* A random filter as JSON text, nested up to depth. */
static void random_filter(GString *s, GRand *r, int depth) {
  int kind = g_rand_int_range(r, 0, depth > 0 ? 10 : 7);
  static const char *countries[] = {"US", "CA", "FR", "DE", "XX"};
  switch (kind) {
    case 0: {
      int f = g_rand_int_range(r, 0, 6);
      if (f == 0) g_string_append_printf(s, "{\"term\": {\"cat\": \"c%d\"}}", g_rand_int_range(r, 0, 13));
      else if (f == 1) g_string_append_printf(s, "{\"term\": {\"tags\": \"t%d\"}}", g_rand_int_range(r, 0, 16));
      else if (f == 2) g_string_append_printf(s, "{\"term\": {\"ok\": %s}}", g_rand_boolean(r) ? "true" : "false");
      else if (f == 3) g_string_append_printf(s, "{\"term\": {\"qty\": %d}}", g_rand_int_range(r, -50, 50));
      else if (f == 4) g_string_append_printf(s, "{\"term\": {\"price\": %g}}", g_rand_int_range(r, -20, 200) * 0.5);
      else g_string_append_printf(s, "{\"term\": {\"s.country\": \"%s\"}}", countries[g_rand_int_range(r, 0, 5)]);
      break;
    }
    case 1: {
      gboolean tags = g_rand_boolean(r);
      g_string_append_printf(s, "{\"in\": {\"%s\": [", tags ? "tags" : "qty");
      int n = g_rand_int_range(r, 1, 4);
      for (int i = 0; i < n; i++)
        if (tags) g_string_append_printf(s, "%s\"t%d\"", i ? "," : "", g_rand_int_range(r, 0, 16));
        else g_string_append_printf(s, "%s%d", i ? "," : "", g_rand_int_range(r, -50, 50));
      g_string_append(s, "]}}");
      break;
    }
    case 2: {
      static const char *f[] = {"price", "qty", "ts", "cat"};
      int which = g_rand_int_range(r, 0, 4);
      g_string_append_printf(s, "{\"range\": {\"%s\": {", f[which]);
      int bounds = g_rand_int_range(r, 1, 4); /* 1 lower, 2 upper, 3 both */
      for (int b = 0; b < 2; b++) {
        if (!(bounds & (1 << b))) continue;
        const char *op = b == 0 ? (g_rand_boolean(r) ? "gt" : "gte") : (g_rand_boolean(r) ? "lt" : "lte");
        if (bounds == 3 && b == 1) g_string_append(s, ", ");
        if (which == 0) g_string_append_printf(s, "\"%s\": %g", op, g_rand_int_range(r, -20, 200) * 0.5);
        else if (which == 1) g_string_append_printf(s, "\"%s\": %d", op, g_rand_int_range(r, -50, 50));
        else if (which == 2) g_string_append_printf(s, "\"%s\": %" G_GINT64_FORMAT, op, random_ts(r));
        else g_string_append_printf(s, "\"%s\": \"c%d\"", op, g_rand_int_range(r, 0, 12));
      }
      g_string_append(s, "}}}");
      break;
    }
    case 3: {
      static const char *pc[] = {"", "c", "c1", "c11", "d"};
      static const char *pt[] = {"w1", "w12", "c", "re", "caf", "STRA", "fi"};
      if (g_rand_boolean(r)) g_string_append_printf(s, "{\"prefix\": {\"cat\": \"%s\"}}", pc[g_rand_int_range(r, 0, 5)]);
      else g_string_append_printf(s, "{\"prefix\": {\"title\": \"%s\"}}", pt[g_rand_int_range(r, 0, G_N_ELEMENTS(pt))]);
      break;
    }
    case 4: {
      static const char *f[] = {"cat", "tags", "price", "qty", "ok", "title", "ts", "s.country", "v.color", "v.n"};
      g_string_append_printf(s, "{\"exists\": \"%s\"}", f[g_rand_int_range(r, 0, G_N_ELEMENTS(f))]);
      break;
    }
    case 5:
    case 6: {
      const char *a = words[g_rand_int_range(r, 0, G_N_ELEMENTS(words))];
      if (g_rand_int_range(r, 0, 3) == 0) {
        /* match (all words, or any), or a phrase */
        const char *w1 = body_words[g_rand_int_range(r, 0, G_N_ELEMENTS(body_words))];
        const char *w2 = g_rand_boolean(r) ? body_words[g_rand_int_range(r, 0, G_N_ELEMENTS(body_words))] : "";
        int how = g_rand_int_range(r, 0, 3);
        if (how == 0) g_string_append_printf(s, "{\"match\": {\"body\": \"%s %s\"}}", w1, w2);
        else if (how == 1) g_string_append_printf(s, "{\"match\": {\"body\": {\"query\": \"%s %s\", \"operator\": \"or\"}}}", w1, w2);
        else g_string_append_printf(s, "{\"match_phrase\": {\"body\": \"%s %s\"}}", w1, w2);
        break;
      }
      if (g_rand_boolean(r)) g_string_append_printf(s, "{\"match\": {\"title\": \"%s\"}}", a);
      else g_string_append_printf(s, "{\"match\": {\"title\": \"%s %s\"}}", a,
                                  words[g_rand_int_range(r, 0, G_N_ELEMENTS(words))]);
      break;
    }
    case 7:
      if (g_rand_boolean(r)) {
        /* Two fields of an array of objects: any element for each. */
        g_string_append_printf(s, "{\"and\": [{\"term\": {\"v.color\": \"%s\"}}, {\"range\": {\"v.n\": {\"gte\": %d}}}]}",
                               g_rand_boolean(r) ? "red" : "blue", g_rand_int_range(r, 0, 6));
        break;
      }
      g_string_append(s, "{\"not\": ");
      random_filter(s, r, depth - 1);
      g_string_append_c(s, '}');
      break;
    default: {
      g_string_append_printf(s, "{\"%s\": [", kind == 8 ? "and" : "or");
      int n = g_rand_int_range(r, 1, 4);
      for (int i = 0; i < n; i++) {
        if (i) g_string_append_c(s, ',');
        random_filter(s, r, depth - 1);
      }
      g_string_append(s, "]}");
    }
  }
}

static const char *aggs_json =
    "\"aggs\": {\"n\": {\"count\": {}}, \"s\": {\"sum\": \"price\"}, \"a\": {\"avg\": \"qty\"},"
    "\"mn\": {\"min\": \"price\"}, \"mx\": {\"max\": \"ts\"},"
    "\"by\": {\"terms\": {\"field\": \"cat\", \"size\": 5, \"aggs\": {\"m\": {\"max\": \"price\"},"
    " \"q\": {\"avg\": \"qty\"}, \"ps\": {\"sum\": \"price\"}, \"pm\": {\"min\": \"price\"}}}},"
    "\"tg\": {\"terms\": {\"field\": \"tags\", \"size\": 4}}, \"ok\": {\"terms\": {\"field\": \"ok\"}},"
    "\"c\": {\"cardinality\": \"tags\"}, \"co\": {\"cardinality\": \"s.country\"},"
    "\"vc\": {\"terms\": {\"field\": \"v.color\", \"aggs\": {\"vn\": {\"sum\": \"v.n\"},"
    " \"vmn\": {\"min\": \"v.n\"}, \"vmx\": {\"max\": \"v.n\"}}}},"
    "\"p\": {\"percentiles\": {\"field\": \"price\", \"percents\": [10, 50, 99]}},"
    "\"st\": {\"stats\": \"price\"}, \"sq\": {\"stats\": {\"field\": \"v.n\"}},"
    "\"h\": {\"histogram\": {\"field\": \"price\", \"interval\": 7.5, \"offset\": 1,"
    " \"aggs\": {\"c\": {\"cardinality\": \"cat\"}, \"s\": {\"stats\": \"qty\"}}}},"
    "\"h2\": {\"histogram\": {\"field\": \"qty\", \"interval\": 10, \"min_doc_count\": 2}},"
    "\"dm\": {\"date_histogram\": {\"field\": \"ts\", \"calendar_interval\": \"month\", \"time_zone\": \"-05:00\","
    " \"aggs\": {\"q\": {\"sum\": \"qty\"}}}},"
    "\"dq\": {\"date_histogram\": {\"field\": \"ts\", \"calendar_interval\": \"quarter\", \"time_zone\": \"+09:30\"}},"
    "\"dw\": {\"date_histogram\": {\"field\": \"ts\", \"calendar_interval\": \"1w\", \"min_doc_count\": 1}},"
    "\"dy\": {\"date_histogram\": {\"field\": \"ts\", \"calendar_interval\": \"year\", \"offset\": \"-6h\"}},"
    "\"dd\": {\"date_histogram\": {\"field\": \"ts\", \"fixed_interval\": \"36h\", \"time_zone\": \"+02:00\", \"min_doc_count\": 1}},"
    "\"rg\": {\"range\": {\"field\": \"price\", \"ranges\": [{\"to\": 0}, {\"key\": \"mid\", \"from\": 0, \"to\": 50},"
    " {\"from\": 25}], \"aggs\": {\"t\": {\"terms\": {\"field\": \"tags\", \"size\": 3}}}}},"
    "\"rt\": {\"range\": {\"field\": \"ts\", \"ranges\": [{\"to\": \"2021-06-01T00:00:00Z\"}, {\"from\": \"2021-06-01T00:00:00Z\"}]}},"
    "\"f1\": {\"filter\": {\"filter\": {\"term\": {\"ok\": true}}, \"aggs\": {\"m\": {\"max\": \"price\"},"
    " \"by\": {\"terms\": {\"field\": \"cat\", \"size\": 2}}}}},"
    "\"f2\": {\"filter\": {\"range\": {\"qty\": {\"gte\": 0}}}},"
    "\"fs\": {\"filters\": {\"filters\": {\"red\": {\"match\": {\"title\": \"red\"}},"
    " \"cheap\": {\"range\": {\"price\": {\"lt\": 10}}}, \"us\": {\"term\": {\"s.country\": \"US\"}}},"
    " \"aggs\": {\"a\": {\"avg\": \"qty\"}, \"top\": {\"top_hits\": {\"size\": 2, \"sort\": [{\"qty\": \"desc\"}]}}}}},"
    "\"th\": {\"top_hits\": {\"size\": 4, \"sort\": [{\"price\": {\"order\": \"desc\", \"missing\": \"first\"}}, \"cat\"]}},"
    "\"tk\": {\"top_hits\": {}},"
    "\"tt\": {\"terms\": {\"field\": \"ok\", \"aggs\": {\"t\": {\"top_hits\": {\"size\": 3, \"sort\": [\"ts\", \"_score\"]}}}}}}";

/* Random stream: puts and deletes over a few hundred keys, versions 2.. */
static GPtrArray *random_stream(GRand *r, guint n, guint nkeys) {
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  g_ptr_array_add(evs, tev_new(IXIA_IDX_SCHEMA, "", 1, schema_json));
  for (guint i = 0; i < n; i++) {
    char *key = g_strdup_printf("k%03d", g_rand_int_range(r, 0, (gint32)nkeys));
    gint64 v = (gint64)i + 2;
    if (g_rand_int_range(r, 0, 100) < 15) {
      g_ptr_array_add(evs, tev_new(IXIA_IDX_DELETE, key, v, NULL));
    } else {
      char *doc = random_doc(r);
      g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, v, doc));
      g_free(doc);
    }
    g_free(key);
  }
  return evs;
}

/* key -> cJSON of every live document after the stream. */
static GHashTable *model_of(GPtrArray *evs) {
  GHashTable *m = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)cJSON_Delete);
  for (guint i = 0; i < evs->len; i++) {
    tev_t *e = evs->pdata[i];
    if (e->op == IXIA_IDX_PUT) g_hash_table_insert(m, g_strdup(e->key), cJSON_Parse(e->doc));
    else if (e->op == IXIA_IDX_DELETE) g_hash_table_remove(m, e->key);
  }
  return m;
}

static void drop_versions(const ixia_agg_t *g, cJSON *hits, void *ud) {
  (void)g, (void)ud;
  for (cJSON *h = hits->child; h; h = h->next) cJSON_DeleteItemFromObjectCaseSensitive(h, "version");
}

/* A random "sort" of 1 to 3 keys over every sortable type, multi-valued
 * and missing values included. */
static void random_sort(GString *s, GRand *r) {
  static const char *f[] = {"cat", "price", "qty", "ok", "ts", "v.color", "v.n", "tags", "s.country", "_score"};
  gboolean used[G_N_ELEMENTS(f)] = {0};
  int n = g_rand_int_range(r, 1, 4);
  g_string_append(s, ", \"sort\": [");
  for (int i = 0; i < n; i++) {
    guint k = (guint)g_rand_int_range(r, 0, G_N_ELEMENTS(f));
    if (used[k]) continue;
    used[k] = TRUE;
    const char *dir = g_rand_boolean(r) ? "desc" : "asc";
    if (s->str[s->len - 1] != '[') g_string_append(s, ", ");
    switch (g_rand_int_range(r, 0, 3)) {
      case 0: g_string_append_printf(s, "{\"%s\": \"%s\"}", f[k], dir); break;
      case 1: g_string_append_printf(s, "{\"%s\": {\"order\": \"%s\", \"missing\": \"%s\"}}", f[k], dir,
                                     g_rand_boolean(r) ? "first" : "last"); break;
      default: g_string_append_printf(s, "\"%s\"", f[k]);
    }
  }
  g_string_append_c(s, ']');
}

/* Every match of a sorted query in its order, page by page with "after"
 * (the last hit's sort values and key), joined with "\n". */
static char *search_sorted(ixia_idx_t *idx, const ixia_query_t *q, guint page) {
  GString *out = g_string_new(NULL);
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  GPtrArray *last = NULL;
  char *last_key = NULL;
  guint64 epoch = 0, as_of = 0;
  gboolean ok = TRUE;
  for (guint round = 0; ok && round < 100000; round++) {
    ixia_idx_after_t after = {last ? (GBytes **)last->pdata : NULL, last_key, last_key ? strlen(last_key) : 0};
    ixia_idx_search_opts_t o = {.after_id = -1, .limit = page, .after = last ? &after : NULL,
                                .as_of_epoch = epoch, .as_of = as_of};
    ixia_idx_result_t res;
    ixia_error_t *e = NULL;
    ixia_idx_hits_clear(hits);
    ok = ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, &e);
    if (!ok) {
      fprintf(stderr, "sorted search: %s\n", e->message);
      ixia_error_destroy(e);
      break;
    }
    epoch = res.as_of_epoch, as_of = res.as_of;
    for (guint i = 0; i < hits->len; i++) {
      ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
      g_string_append_printf(out, "%s%s", out->len ? "\n" : "", h->key);
      if (i + 1 == hits->len) {
        if (last) g_ptr_array_unref(last);
        g_free(last_key);
        last = ixia_idx_hit_sort_bytes(h);
        last_key = g_strdup(h->key);
      }
    }
    if (hits->len < page) break;
  }
  if (last) g_ptr_array_unref(last);
  g_free(last_key);
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  if (!ok) {
    g_string_free(out, TRUE);
    return NULL;
  }
  return g_string_free(out, FALSE);
}

typedef struct {
  const char *key;
  GPtrArray *vals;
} sorted_doc_t;

static gint sorted_doc_cmp(gconstpointer a, gconstpointer b, gpointer q) {
  const sorted_doc_t *x = a, *y = b;
  int c = ixia_sort_cmp_values(q, (GBytes *const *)x->vals->pdata, (GBytes *const *)y->vals->pdata);
  return c ? c : strcmp(x->key, y->key);
}

/* Brute force: the matching keys of the model in the query's sort order. */
/* Brute-force BM25 statistics over every document of the model (what a
 * single shard holds). */
static ixia_bm25_stats_t *model_stats(GHashTable *model, const ixia_query_t *q) {
  ixia_bm25_stats_t *st = ixia_bm25_stats_new(q);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init(&it, model);
  while (g_hash_table_iter_next(&it, NULL, &v)) ixia_bm25_stats_add(st, v);
  return st;
}

static char *brute_sorted(GHashTable *model, const ixia_query_t *q) {
  GArray *docs = g_array_new(FALSE, FALSE, sizeof(sorted_doc_t));
  ixia_bm25_stats_t *st = model_stats(model, q);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, model);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    if (!ixia_query_match_doc(q, v)) continue;
    sorted_doc_t d = {k, ixia_sort_values_of_doc(q, v, ixia_query_score_doc(q, st, v))};
    g_array_append_val(docs, d);
  }
  ixia_bm25_stats_free(st);
  g_array_sort_with_data(docs, sorted_doc_cmp, (gpointer)q);
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < docs->len; i++) {
    sorted_doc_t *d = &g_array_index(docs, sorted_doc_t, i);
    g_string_append_printf(out, "%s%s", out->len ? "\n" : "", d->key);
    g_ptr_array_unref(d->vals);
  }
  g_array_free(docs, TRUE);
  return g_string_free(out, FALSE);
}

/* Compares index and brute force for nq random queries; returns the
 * concatenated results (to compare two indexes). */
static char *compare_queries(ixia_idx_t *idx, GHashTable *model, guint seed, guint nq) {
  GRand *r = g_rand_new_with_seed(seed);
  GString *all = g_string_new(NULL);
  guint nonempty = 0;
  for (guint i = 0; i < nq; i++) {
    GString *qs = g_string_new("{\"namespace\": \"shop\", \"table\": \"p\"");
    if (i % 10 != 0) {
      g_string_append(qs, ", \"filter\": ");
      random_filter(qs, r, 3);
    }
    gboolean with_aggs = i % 4 == 0;
    if (with_aggs) g_string_append_printf(qs, ", %s", aggs_json);
    gboolean sorted = i % 3 == 1;
    if (sorted) random_sort(qs, r);
    g_string_append_c(qs, '}');
    ixia_query_t *q = parse(idx, qs->str);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    guint64 bt = 0, it = 0;
    ixia_aggs_t *ba = with_aggs ? ixia_aggs_new(q, &lim) : NULL;
    char *want = brute_keys(model, q, &bt, ba);
    gboolean ids_ok = TRUE;
    char *got = NULL;
    if (sorted) {
      /* The set of a sorted query's pages (their order is checked below). */
      char *ordered = search_sorted(idx, q, (guint)g_rand_int_range(r, 1, 100));
      if (ordered) {
        char **keys = g_strsplit(ordered, "\n", -1);
        guint n = g_strv_length(keys);
        if (n == 1 && !*keys[0]) n = 0, g_free(keys[0]), keys[0] = NULL;
        qsort(keys, n, sizeof(char *), (int (*)(const void *, const void *))cmp_str);
        got = g_strjoinv("\n", keys);
        g_strfreev(keys);
      }
      g_free(ordered);
      isearch(idx, q, -1, 0, 0, &lim, NULL, &it, NULL, NULL);
    } else {
      got = search_keys(idx, q, (guint)g_rand_int_range(r, 1, 100), &it, &ids_ok);
    }
    CU_ASSERT_PTR_NOT_NULL(got);
    CU_ASSERT_TRUE(ids_ok);
    CU_ASSERT_EQUAL(it, bt);
    if (got && strcmp(got, want) != 0) {
      fprintf(stderr, "\nquery %s\n  index: %.200s\n  brute: %.200s\n", qs->str, got, want);
      CU_FAIL("index and brute force disagree");
    }
    nonempty += bt > 0;
    g_string_append_printf(all, "%s\n%s\n", qs->str, got ? got : "ERROR");
    if (q->scoring) {
      /* Each hit's score is brute force's BM25 over the same documents. */
      ixia_bm25_stats_t *st = model_stats(model, q);
      GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
      ixia_idx_search_opts_t o = {.after_id = -1, .limit = 200};
      ixia_idx_result_t res;
      CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, NULL));
      int wrong = 0;
      for (guint h = 0; h < hits->len; h++) {
        ixia_idx_hit_t *hit = &g_array_index(hits, ixia_idx_hit_t, h);
        double want = ixia_query_score_doc(q, st, g_hash_table_lookup(model, hit->key));
        if (hit->score != want && wrong++ < 3)
          fprintf(stderr, "\nquery %s\n  %s: score %.17g, brute %.17g\n", qs->str, hit->key, hit->score, want);
      }
      CU_ASSERT_EQUAL(wrong, 0);
      ixia_idx_hits_clear(hits);
      g_array_free(hits, TRUE);
      ixia_bm25_stats_free(st);
    }
    if (sorted) {
      /* The order too, every page size from 1 up. */
      char *sw = brute_sorted(model, q);
      char *sg = search_sorted(idx, q, (guint)g_rand_int_range(r, 1, 40));
      if (!sg || strcmp(sg, sw) != 0) {
        fprintf(stderr, "\nsorted query %s\n  index: %.300s\n  brute: %.300s\n", qs->str, sg ? sg : "ERROR", sw);
        CU_FAIL("sorted index and brute force disagree");
      }
      g_string_append_printf(all, "%s\n", sg ? sg : "ERROR");
      g_free(sw);
      g_free(sg);
    }
    if (with_aggs) {
      ixia_aggs_t *ia = ixia_aggs_new(q, &lim);
      ixia_error_t *e = NULL;
      guint64 t2 = 0;
      CU_ASSERT_TRUE(isearch(idx, q, -1, 0, 0, &lim, NULL, &t2, ia, &e));
      if (e) fprintf(stderr, "aggs: %s\n", e->message);
      ixia_error_destroy(e);
      cJSON *gj = ixia_aggs_result_json(ia), *wj = ixia_aggs_result_json(ba);
      /* top_hits: the model keeps no versions; keys and sort values decide. */
      ixia_aggs_foreach_top_hits(q, gj, drop_versions, NULL);
      ixia_aggs_foreach_top_hits(q, wj, drop_versions, NULL);
      if (!json_close(gj, wj)) {
        char *a = ixia_json_print(gj), *b = ixia_json_print(wj);
        fprintf(stderr, "\nquery %s\n  index aggs: %s\n  brute aggs: %s\n", qs->str, a, b);
        g_free(a), g_free(b);
        CU_FAIL("aggregations disagree");
      }
      char *a = ixia_json_print(gj);
      g_string_append_printf(all, "%s\n", a);
      g_free(a);
      cJSON_Delete(gj), cJSON_Delete(wj);
      ixia_aggs_destroy(ia);
    }
    ixia_aggs_destroy(ba);
    g_free(got);
    g_free(want);
    ixia_query_destroy(q);
    g_string_free(qs, TRUE);
  }
  /* The generator must produce queries that select something. */
  CU_ASSERT_TRUE(nonempty > nq / 3);
  g_rand_free(r);
  return g_string_free(all, FALSE);
}

/* -------------------------------------------------------------- tests */

/* Many batches add and remove ids of the same posting chunk: every batch
 * is one merge operand; reopening flushes the memtable, which folds the
 * operands (partial merges without a base value, full merges with one). */
static void test_merge_operands(void) {
  ixia_idx_t *idx = open_index("merge");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 1, schema_json, NULL));
  GHashTable *present = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GRand *r = g_rand_new_with_seed(7);
  gint64 v = 2;
  for (int round = 0; round < 3; round++) {
    for (int batch = 0; batch < 150; batch++) {
      GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
      int n = g_rand_int_range(r, 1, 20);
      for (int i = 0; i < n; i++) {
        char *key = g_strdup_printf("m%03d", g_rand_int_range(r, 0, 300));
        gboolean add = g_rand_int_range(r, 0, 100) < 60;
        /* "cat": "x" while present, another value or deleted otherwise. */
        if (add) g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, v++, "{\"cat\": \"x\"}"));
        else if (g_rand_boolean(r)) g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, v++, "{\"cat\": \"y\"}"));
        else g_ptr_array_add(evs, tev_new(IXIA_IDX_DELETE, key, v++, NULL));
        if (add) g_hash_table_add(present, key);
        else g_hash_table_remove(present, key), g_free(key);
      }
      CU_ASSERT_TRUE(apply_range(idx, evs, 0, evs->len, NULL));
      g_ptr_array_free(evs, TRUE);
    }
    guint64 want = g_hash_table_size(present);
    CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"x\"}}}"), want);
    ixia_idx_destroy(idx);
    idx = open_index("merge");
    CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
    CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"x\"}}}"), want);
    CU_ASSERT_EQUAL(ixia_idx_max_version(idx), v - 1);
  }
  /* Add and remove of one id inside one batch: the later one wins. */
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, "z1", v++, "{\"cat\": \"z\"}"));
  g_ptr_array_add(evs, tev_new(IXIA_IDX_DELETE, "z1", v++, NULL));
  g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, "z2", v++, "{\"cat\": \"w\"}"));
  g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, "z2", v++, "{\"cat\": \"z\"}"));
  g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, "z3", v++, "{\"cat\": \"z\"}"));
  g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, "z3", v++, "{\"cat\": \"w\"}"));
  CU_ASSERT_TRUE(apply_range(idx, evs, 0, evs->len, NULL));
  g_ptr_array_free(evs, TRUE);
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"z\"}}}"), 1);
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"w\"}}}"), 1);
  g_rand_free(r);
  g_hash_table_destroy(present);
  ixia_idx_destroy(idx);
}

/* Column operands applied to decoded blocks (what a flush, a read of a
 * block with operands, and the apply thread's cached copy do) against a
 * model of every slot's values, for both widths: entries that set one
 * value or clear a slot (changed in place on a block without
 * multi-valued slots), now and then one with several values (the block
 * is rebuilt, and rebuilt again once no such slot is left), a slot named
 * twice in one operand (the later entry wins), and copies taken along the
 * way. A malformed operand is refused and leaves the block as it was. */
static void test_column_operands(void) {
  GRand *r = g_rand_new_with_seed(11);
  for (guint8 width = 4; width <= 8; width += 4) {
    col_t *c = ixia_idx_col_empty(width);
    GArray *model[BLOCK_SLOTS];
    for (guint s = 0; s < BLOCK_SLOTS; s++) model[s] = g_array_new(FALSE, FALSE, sizeof(guint64));
    gboolean saw_multi = FALSE, saw_single_after_multi = FALSE;
    for (int step = 0; step < 600; step++) {
      GByteArray *op = g_byte_array_new();
      guint8 head[2] = {COL_SPARSE, width};
      g_byte_array_append(op, head, 2);
      int n = g_rand_int_range(r, 1, 24);
      /* Several values in a slot in ~1 operand of 12 while step < 300. */
      gboolean multi_op = step < 300 && g_rand_int_range(r, 0, 12) == 0;
      /* At step 500, one value into every slot still holding several. */
      GArray *forced = g_array_new(FALSE, FALSE, sizeof(guint));
      for (guint s = 0; step == 500 && s < BLOCK_SLOTS; s++)
        if (model[s]->len > 1) g_array_append_val(forced, s);
      if (forced->len) n = (int)forced->len;
      guint last = 0;
      for (int i = 0; i < n; i++) {
        guint slot = i > 0 && g_rand_int_range(r, 0, 10) == 0 ? last : (guint)g_rand_int_range(r, 0, BLOCK_SLOTS);
        if (forced->len) slot = g_array_index(forced, guint, i);
        last = slot;
        guint32 cnt = forced->len ? 1 : g_rand_int_range(r, 0, 4) == 0 ? 0 : 1;
        if (multi_op && i == 0) cnt = (guint32)g_rand_int_range(r, 2, 5);
        guint8 e[6];
        e[0] = (guint8)(slot >> 8), e[1] = (guint8)slot;
        ixia_bytes_put32(e + 2, cnt);
        g_byte_array_append(op, e, 6);
        g_array_set_size(model[slot], 0);
        for (guint32 j = 0; j < cnt; j++) {
          guint64 v;
          if (width == 8) {
            double d = g_rand_double_range(r, -1e6, 1e6);
            memcpy(&v, &d, 8);
          } else {
            v = g_rand_int(r);
          }
          guint8 b[8];
          if (width == 8) ixia_bytes_put64(b, v);
          else ixia_bytes_put32(b, (guint32)v);
          g_byte_array_append(op, b, width);
          g_array_append_val(model[slot], v);
        }
      }
      g_array_free(forced, TRUE);
      gboolean had_multi = c->mstart != NULL;
      CU_ASSERT_TRUE_FATAL(ixia_idx_col_apply(c, (const char *)op->data, op->len));
      if (c->mstart) saw_multi = TRUE;
      if (had_multi && !c->mstart) saw_single_after_multi = TRUE;
      /* Cut short inside an entry: refused, the block unchanged. */
      col_t *before = ixia_idx_col_copy(c);
      CU_ASSERT_FALSE(ixia_idx_col_apply(c, (const char *)op->data, op->len - 1));
      CU_ASSERT_EQUAL(memcmp(before->has, c->has, sizeof c->has), 0);
      ixia_idx_col_free(before);
      g_byte_array_free(op, TRUE);
      if (step % 50 == 49) {
        col_t *copy = ixia_idx_col_copy(c);
        ixia_idx_col_free(c);
        c = copy;
      }
      gboolean ok = TRUE;
      for (guint s = 0; s < BLOCK_SLOTS; s++) {
        guint32 got;
        const void *vals = col_slot(c, s, &got);
        if (got != model[s]->len) {
          ok = FALSE;
          break;
        }
        for (guint32 j = 0; j < got; j++) {
          guint64 v = 0;
          if (width == 8) memcpy(&v, (const double *)vals + j, 8);
          else v = ((const guint32 *)vals)[j];
          if (v != g_array_index(model[s], guint64, j)) ok = FALSE;
        }
        /* An empty slot's first value reads 0 (doc values and the fused
         * pass read v1 without the mask). */
        if (got == 0 && (width == 8 ? c->v1.d[s] != 0 : c->v1.u[s] != 0)) ok = FALSE;
      }
      CU_ASSERT_TRUE(ok);
      if (!ok) break;
    }
    CU_ASSERT_TRUE(saw_multi);
    CU_ASSERT_TRUE(saw_single_after_multi);
    for (guint s = 0; s < BLOCK_SLOTS; s++) g_array_free(model[s], TRUE);
    ixia_idx_col_free(c);
  }
  g_rand_free(r);
}

/* q's aggregations over more than max terms buckets: refused, naming the
 * limit. */
static void assert_bucket_limit(ixia_idx_t *idx, ixia_query_t *q, guint max) {
  ixia_query_limits_t small = lim;
  small.max_terms_buckets = max;
  ixia_aggs_t *a = ixia_aggs_new(q, &small);
  ixia_error_t *e = NULL;
  CU_ASSERT_FALSE(isearch(idx, q, -1, 0, 0, &small, NULL, NULL, a, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ETOOLARGE);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "query.max_terms_buckets"));
  ixia_error_destroy(e);
  ixia_aggs_destroy(a);
}

/* Runs q's aggregations over idx through the fused pass and through the
 * general path: both must agree with brute force over model and with each
 * other to the last bit. Returns the fused path's result (cJSON_Delete it). */
static cJSON *check_agg_paths(ixia_idx_t *idx, GHashTable *model, ixia_query_t *q) {
  guint64 bt = 0;
  ixia_aggs_t *ba = ixia_aggs_new(q, &lim);
  g_free(brute_keys(model, q, &bt, ba));
  cJSON *want = ixia_aggs_result_json(ba), *fused = NULL;
  char *paths[2] = {NULL, NULL};
  for (int unfused = 0; unfused < 2; unfused++) {
    if (unfused) g_setenv("IXIA_TEST_AGG_UNFUSED", "1", TRUE);
    ixia_aggs_t *ia = ixia_aggs_new(q, &lim);
    ixia_error_t *e = NULL;
    guint64 total = 0;
    CU_ASSERT_TRUE(isearch(idx, q, -1, 0, 0, &lim, NULL, &total, ia, &e));
    g_unsetenv("IXIA_TEST_AGG_UNFUSED");
    if (e) fprintf(stderr, "aggs: %s\n", e->message);
    ixia_error_destroy(e);
    CU_ASSERT_EQUAL(total, bt);
    cJSON *got = ixia_aggs_result_json(ia);
    paths[unfused] = ixia_json_print(got);
    if (!json_close(got, want)) {
      char *w = ixia_json_print(want);
      fprintf(stderr, "\n%s\n  index: %s\n  brute: %s\n", unfused ? "general" : "fused", paths[unfused], w);
      g_free(w);
      CU_FAIL("aggregations disagree with brute force");
    }
    if (unfused) cJSON_Delete(got);
    else fused = got;
    ixia_aggs_destroy(ia);
  }
  CU_ASSERT_STRING_EQUAL(paths[0], paths[1]); /* the two paths, to the last bit */
  g_free(paths[0]);
  g_free(paths[1]);
  cJSON_Delete(want);
  ixia_aggs_destroy(ba);
  return fused;
}

/* The fused terms pass (idx_aggs.c) against brute force and against the
 * general path, over three blocks: one holds multi-valued categories (that
 * block takes the general path, the others the fused pass), a category
 * first seen in the last block (ids from 2,048; ids are given from 0 in
 * order) makes a bucket in the fused pass, prices are missing,
 * negative, zero of both signs, huge and tiny, and deleted documents leave
 * holes. The shapes: one sum lane (with avg, min and max) under the terms,
 * several lanes, and a terms beside other top-level aggregations; with a
 * range filter on the aggregated field (checked on its column block) and
 * without a filter. */
static void test_fused_terms_pass(void) {
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  g_ptr_array_add(evs, tev_new(IXIA_IDX_SCHEMA, "", 1, schema_json));
  static const double odd[] = {0.0, -0.0, 1e300, -1e300, 1e-300, 0.1, -7.25};
  gint64 v = 2;
  for (guint i = 0; i < 2600; i++) {
    GString *d = g_string_new("{");
    if (i >= 1100 && i < 1400 && i % 5 == 0) g_string_append(d, "\"cat\": [\"c1\", \"c9\"]");
    else g_string_append_printf(d, "\"cat\": \"c%u\"", i >= 2100 && i % 4 == 0 ? 8 : i % 7);
    if (i % 11 != 0) {
      double price = i % 17 == 0 ? odd[(i / 17) % G_N_ELEMENTS(odd)] : (double)(i % 97) * 1.25 - 30.0;
      char num[G_ASCII_DTOSTR_BUF_SIZE];
      g_ascii_dtostr(num, sizeof num, price);
      g_string_append_printf(d, ", \"price\": %s", num);
    }
    if (i % 3) g_string_append_printf(d, ", \"qty\": %u", i % 50);
    g_string_append_c(d, '}');
    char key[16];
    g_snprintf(key, sizeof key, "f%04u", i);
    g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, v++, d->str));
    g_string_free(d, TRUE);
  }
  for (guint i = 0; i < 2600; i += 13) {
    char key[16];
    g_snprintf(key, sizeof key, "f%04u", i);
    g_ptr_array_add(evs, tev_new(IXIA_IDX_DELETE, key, v++, NULL));
  }
  GHashTable *model = model_of(evs);
  ixia_idx_t *idx = open_index("fused");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  GRand *r = g_rand_new_with_seed(7);
  CU_ASSERT_TRUE(apply_all(idx, evs, r));
  static const char *const queries[] = {
      "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"range\": {\"price\": {\"gte\": -10, \"lt\": 90}}},"
      " \"aggs\": {\"by\": {\"terms\": {\"field\": \"cat\", \"size\": 20, \"aggs\": {\"s\": {\"sum\": \"price\"},"
      " \"a\": {\"avg\": \"price\"}, \"lo\": {\"min\": \"price\"}, \"hi\": {\"max\": \"price\"}}}}}}",
      "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"range\": {\"price\": {\"gte\": -10, \"lt\": 90}}},"
      " \"aggs\": {\"by\": {\"terms\": {\"field\": \"cat\", \"size\": 20, \"aggs\": {\"n\": {\"count\": {}},"
      " \"s\": {\"sum\": \"price\"}, \"lo\": {\"min\": \"price\"}, \"q\": {\"max\": \"qty\"}, \"qs\": {\"sum\": \"qty\"}}}}}}",
      "{\"namespace\": \"shop\", \"table\": \"p\", \"aggs\": {\"tot\": {\"sum\": \"price\"},"
      " \"by\": {\"terms\": {\"field\": \"cat\", \"size\": 20, \"aggs\": {\"hi\": {\"max\": \"price\"}, \"n\": {\"count\": {}}}}},"
      " \"tg\": {\"terms\": {\"field\": \"cat\", \"size\": 3}}}}",
  };
  for (guint i = 0; i < G_N_ELEMENTS(queries); i++) {
    ixia_query_t *q = parse(idx, queries[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    cJSON_Delete(check_agg_paths(idx, model, q));
    ixia_query_destroy(q);
  }
  g_rand_free(r);
  g_hash_table_destroy(model);
  g_ptr_array_free(evs, TRUE);
  ixia_idx_destroy(idx);
}

/* The one-lane fused pass keys its cells by the terms field's value id
 * below 16,384 and finds their buckets when it folds them; a larger id goes
 * through its bucket as it comes. 16,500 categories of one document each,
 * then 1,000 documents over 40 categories whose ids lie past that bound
 * (and 20 below it), then 2,500 over three, whose staged runs of 128
 * values fill and are added many times (and the rest at the fold); prices
 * of two magnitudes 2^13 apart (beyond the window of one base), negative,
 * zero, missing. Against brute force, the general path to the last bit,
 * and the bucket limit, which the fold enforces. */
static void test_fused_keyed_cells(void) {
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  g_ptr_array_add(evs, tev_new(IXIA_IDX_SCHEMA, "", 1, schema_json));
  gint64 v = 2;
  for (guint i = 0; i < 20000; i++) {
    /* One document for each of the first 16,500 ids; then 40 ids past the
     * keyed cells and 20 below, and 2,500 documents over three ids, whose
     * staged runs fill and are added many times over. */
    guint cat = i < 16500 ? i : i < 17500 ? (i % 2 ? 16384 + i / 2 % 40 : i / 2 % 20) : i % 3;
    GString *d = g_string_new(NULL);
    g_string_append_printf(d, "{\"cat\": \"u%05u\"", cat);
    if (i % 9 != 0) {
      double price = i % 7 == 0 ? 1e6 * (double)(i % 3 + 1) : (double)(i % 97) * 1.25 - 20.0;
      char num[G_ASCII_DTOSTR_BUF_SIZE];
      g_ascii_dtostr(num, sizeof num, price);
      g_string_append_printf(d, ", \"price\": %s", num);
    }
    g_string_append_c(d, '}');
    char key[16];
    g_snprintf(key, sizeof key, "k%05u", i);
    g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, v++, d->str));
    g_string_free(d, TRUE);
  }
  GHashTable *model = model_of(evs);
  ixia_idx_t *idx = open_index("keyed");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  GRand *r = g_rand_new_with_seed(11);
  CU_ASSERT_TRUE(apply_all(idx, evs, r));
  ixia_query_t *q = parse(idx,
                          "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"range\": {\"price\": {\"lt\": 3e6}}},"
                          " \"aggs\": {\"by\": {\"terms\": {\"field\": \"cat\", \"size\": 70, \"aggs\": {\"s\": {\"sum\": \"price\"},"
                          " \"a\": {\"avg\": \"price\"}, \"lo\": {\"min\": \"price\"}, \"hi\": {\"max\": \"price\"}}}}}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  cJSON *got = check_agg_paths(idx, model, q);
  /* A bucket of an id past the keyed cells, with its documents. */
  cJSON *b, *past = NULL;
  cJSON_ArrayForEach(b, cJSON_GetObjectItem(cJSON_GetObjectItem(got, "by"), "buckets"))
    if (!g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItem(b, "key")), "u16384")) past = b;
  CU_ASSERT_TRUE(past && cJSON_GetNumberValue(cJSON_GetObjectItem(past, "count")) >= 10);
  cJSON_Delete(got);
  /* More buckets than allowed: refused when the cells are folded. */
  assert_bucket_limit(idx, q, 1000);
  ixia_query_destroy(q);
  g_rand_free(r);
  g_hash_table_destroy(model);
  g_ptr_array_free(evs, TRUE);
  ixia_idx_destroy(idx);
}

/* Exact sums carry their chunks often enough on every path. 4,124 values
 * in one bucket, of two prices whose mantissas land almost whole in the
 * upper of their two chunks (ixia_xsum_t): 2^52 a value, so without a
 * carry every few hundred values that chunk would overflow its 64 bits
 * after 2,048. The 3,100 documents hold the first price; those of the
 * second block also hold the second (the general path, value by value),
 * the others take the fused terms pass, or the general path's
 * single-valued loop when the fused pass is off. */
static void test_exact_sum_carries(void) {
  ixia_idx_t *idx = open_index("carries");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 1, schema_json, NULL));
  /* (A document's values are a set: its second price differs.) */
  double p = ldexp((double)((G_GUINT64_CONSTANT(1) << 53) - 1), -19);
  double p2 = ldexp((double)((G_GUINT64_CONSTANT(1) << 53) - 3), -19);
  char num[G_ASCII_DTOSTR_BUF_SIZE], num2[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_dtostr(num, sizeof num, p);
  g_ascii_dtostr(num2, sizeof num2, p2);
  ixia_fsum_t exact = {0};
  for (guint i = 0; i < 3100; i++) {
    gboolean twice = i >= 1024 && i < 2048;
    char *doc = twice ? g_strdup_printf("{\"cat\": \"c0\", \"price\": [%s, %s]}", num, num2)
                      : g_strdup_printf("{\"cat\": \"c0\", \"price\": %s}", num);
    char key[16];
    g_snprintf(key, sizeof key, "x%04u", i);
    CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, key, 2 + i, doc, NULL));
    g_free(doc);
    ixia_fsum_add(&exact, p);
    if (twice) ixia_fsum_add(&exact, p2);
  }
  double want = ixia_fsum_result(&exact);
  ixia_fsum_clear(&exact);
  ixia_query_t *q = parse(idx,
                          "{\"namespace\": \"shop\", \"table\": \"p\", \"aggs\": {\"tot\": {\"sum\": \"price\"},"
                          " \"by\": {\"terms\": {\"field\": \"cat\", \"aggs\": {\"s\": {\"sum\": \"price\"},"
                          " \"lo\": {\"min\": \"price\"}, \"hi\": {\"max\": \"price\"}}}}}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  for (int unfused = 0; unfused < 2; unfused++) {
    if (unfused) g_setenv("IXIA_TEST_AGG_UNFUSED", "1", TRUE);
    ixia_aggs_t *a = ixia_aggs_new(q, &lim);
    CU_ASSERT_TRUE(isearch(idx, q, -1, 0, 0, &lim, NULL, NULL, a, NULL));
    g_unsetenv("IXIA_TEST_AGG_UNFUSED");
    cJSON *got = ixia_aggs_result_json(a);
    cJSON *b0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "by"), "buckets"), 0);
    double tot = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "tot"), "value"));
    double sum = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(b0, "s"), "value"));
    CU_ASSERT_EQUAL(tot, want);
    CU_ASSERT_EQUAL(sum, want);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(b0, "lo"), "value")), p2);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(b0, "hi"), "value")), p);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(b0, "count")), 3100);
    if (sum != want) fprintf(stderr, "\n%s sum %.17g, exact %.17g\n", unfused ? "general" : "fused", sum, want);
    cJSON_Delete(got);
    ixia_aggs_destroy(a);
  }
  ixia_query_destroy(q);
  ixia_idx_destroy(idx);
}

static void test_random_vs_brute_force(void) {
  GRand *r = g_rand_new_with_seed(42);
  GPtrArray *evs = random_stream(r, 4000, 700);
  GHashTable *model = model_of(evs);
  ixia_idx_t *a = open_index("rand_a");
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_TRUE(apply_all(a, evs, r));
  char *res1 = compare_queries(a, model, 1, 150);
  char *docs1 = dump_docs(a);
  ixia_idx_stats_t st;
  ixia_idx_get_stats(a, &st);
  CU_ASSERT_EQUAL(st.documents, g_hash_table_size(model));
  CU_ASSERT_EQUAL(st.max_version, ((tev_t *)evs->pdata[evs->len - 1])->version);

  /* The whole stream again: equal versions re-index to the same state. */
  CU_ASSERT_TRUE(apply_all(a, evs, r));
  char *res2 = compare_queries(a, model, 1, 150);
  char *docs2 = dump_docs(a);
  CU_ASSERT_STRING_EQUAL(res1, res2);
  CU_ASSERT_STRING_EQUAL(docs1, docs2);

  /* Reopened: the same. */
  ixia_idx_destroy(a);
  a = open_index("rand_a");
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  char *res3 = compare_queries(a, model, 1, 150);
  CU_ASSERT_STRING_EQUAL(res1, res3);

  /* Another index fed the stream with older events shuffled back in. */
  GPtrArray *mixed = g_ptr_array_new();
  for (guint i = 0; i < evs->len; i++) {
    g_ptr_array_add(mixed, evs->pdata[i]);
    if (i > 1 && g_rand_int_range(r, 0, 100) < 30)
      g_ptr_array_add(mixed, evs->pdata[g_rand_int_range(r, 1, (gint32)i)]);
  }
  ixia_idx_t *b = open_index("rand_b");
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT_TRUE(apply_all(b, mixed, r));
  char *res4 = compare_queries(b, model, 1, 150);
  char *docs4 = dump_docs(b);
  CU_ASSERT_STRING_EQUAL(res1, res4);
  CU_ASSERT_STRING_EQUAL(docs1, docs4);
  ixia_idx_get_stats(b, &st);
  CU_ASSERT_TRUE(st.events_skipped > 0);

  /* Doc values off, and on a budget of one 8-byte chunk (the fields set
   * after it are checked on their column blocks): the same answers, fed
   * the stream, and reopened. */
  static const char *budgets[] = {"0", "1"};
  for (guint i = 0; i < G_N_ELEMENTS(budgets); i++) {
    ixia_config_set(cfg, "index.docvalues_mb", budgets[i], NULL);
    char *name = g_strdup_printf("rand_dv%s", budgets[i]);
    ixia_idx_t *c = open_index(name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(apply_all(c, evs, r));
    ixia_idx_get_stats(c, &st);
    CU_ASSERT_EQUAL(st.docvalues_bytes > 0, i == 1);
    CU_ASSERT_TRUE(st.docvalues_bytes <= (1u << 20));
    char *res5 = compare_queries(c, model, 1, 150);
    CU_ASSERT_STRING_EQUAL(res1, res5);
    ixia_idx_destroy(c);
    c = open_index(name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char *res6 = compare_queries(c, model, 1, 150);
    CU_ASSERT_STRING_EQUAL(res1, res6);
    ixia_idx_destroy(c);
    g_free(res5), g_free(res6), g_free(name);
  }
  ixia_config_set(cfg, "index.docvalues_mb", "1024", NULL);
  ixia_idx_get_stats(a, &st);
  CU_ASSERT_TRUE(st.docvalues_bytes > 0);

  /* foreach_doc resumes after a key, in key order. */
  GString *tail = g_string_new(NULL);
  CU_ASSERT_TRUE(ixia_idx_foreach_doc(b, NS, TABLE, "k350", 4, collect_doc, tail, NULL));
  const char *from = strstr(docs1, "\nk351 ");
  if (!from) from = strstr(docs1, "\nk35");
  CU_ASSERT_PTR_NOT_NULL(from);
  CU_ASSERT_TRUE(tail->len > 0 && g_str_has_prefix(tail->str, "k35") && !g_str_has_prefix(tail->str, "k350 "));
  CU_ASSERT_TRUE(g_str_has_suffix(docs1, tail->str));
  g_string_free(tail, TRUE);

  g_ptr_array_free(mixed, TRUE);
  g_free(res1), g_free(res2), g_free(res3), g_free(res4);
  g_free(docs1), g_free(docs2), g_free(docs4);
  ixia_idx_destroy(a);
  ixia_idx_destroy(b);
  g_hash_table_destroy(model);
  g_ptr_array_free(evs, TRUE);
  g_rand_free(r);
}

/* Every live document of table p as a hit, each with the version the model
 * holds for its key. */
static void check_hits(ixia_idx_t *idx, GHashTable *model) {
  ixia_query_t *q = parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\"}");
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  guint64 total = 0;
  CU_ASSERT_TRUE(isearch(idx, q, -1, 5000, 0, &lim, hits, &total, NULL, NULL));
  CU_ASSERT_EQUAL(hits->len, g_hash_table_size(model));
  CU_ASSERT_EQUAL(total, g_hash_table_size(model));
  /* A negation of nothing counts the live set without a page: the count
   * the cached live set keeps must follow the batches published since. */
  ixia_query_t *none = parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\","
                                  " \"filter\": {\"not\": {\"term\": {\"cat\": \"c9\"}}}}");
  total = 0;
  CU_ASSERT_TRUE(isearch(idx, none, -1, 0, 0, &lim, NULL, &total, NULL, NULL));
  CU_ASSERT_EQUAL(total, g_hash_table_size(model));
  ixia_query_destroy(none);
  guint wrong = 0;
  for (guint i = 0; i < hits->len; i++) {
    const ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
    gpointer v;
    if (!g_hash_table_lookup_extended(model, h->key, NULL, &v) || GPOINTER_TO_SIZE(v) != (gsize)h->version)
      wrong++;
  }
  if (wrong) fprintf(stderr, "%u of %u hits with a wrong key or version\n", wrong, hits->len);
  CU_ASSERT_EQUAL(wrong, 0);
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  ixia_query_destroy(q);
}

/* Hits take their keys and versions from the cached id records of their
 * blocks once those have been read a few times; batches applied after that
 * show at once: new versions, deletes, documents new to a cached block. */
static void test_hit_records_follow_writes(void) {
  ixia_idx_t *idx = open_index("records");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 1, schema_json, NULL));
  GHashTable *model = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  gint64 v = 10;
  for (int i = 0; i < 2500; i++) {
    char *k = g_strdup_printf("k%05d", i);
    g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, k, v, "{\"cat\": \"c1\"}"));
    g_hash_table_insert(model, k, GSIZE_TO_POINTER((gsize)v++));
  }
  for (guint i = 0; i < evs->len; i += 100) CU_ASSERT_TRUE(apply_range(idx, evs, i, MIN(evs->len, i + 100), NULL));
  for (int round = 0; round < 5; round++) check_hits(idx, model); /* the blocks are cached by now */
  g_ptr_array_set_size(evs, 0);
  for (int i = 0; i < 2530; i++) {
    char *k = g_strdup_printf("k%05d", i);
    if (i >= 2500 || i % 7 == 0) {
      g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, k, v, "{\"cat\": \"c2\"}"));
      g_hash_table_insert(model, g_strdup(k), GSIZE_TO_POINTER((gsize)v++));
    } else if (i % 11 == 0) {
      g_ptr_array_add(evs, tev_new(IXIA_IDX_DELETE, k, v++, NULL));
      g_hash_table_remove(model, k);
    }
    g_free(k);
  }
  CU_ASSERT_TRUE(apply_range(idx, evs, 0, evs->len, NULL));
  for (int round = 0; round < 3; round++) check_hits(idx, model);
  g_ptr_array_free(evs, TRUE);
  g_hash_table_destroy(model);
  ixia_idx_destroy(idx);
}

/* A search that overlaps the publish of a batch can read a posting from
 * before it and a record from after it: a hit whose version is that of a
 * change that made it stop matching. Such an answer must say so (settled
 * FALSE) for the query API to re-check its hits; a settled answer pairs
 * every hit with a version at which it matched. Here one thread flips the
 * category of 3,000 documents in whole-table batches while searches ask
 * for one category. */
#define FLIP_DOCS 3000
#define FLIP_ROUNDS 40

typedef struct {
  ixia_idx_t *idx;
  const char *even, *odd; /* the documents of even and odd rounds */
  guint rounds;
  _Atomic gboolean done;
  gboolean ok;
} flipper_t;

static gpointer flip_main(gpointer data) {
  flipper_t *f = data;
  f->ok = TRUE;
  for (guint r = 1; r <= f->rounds && f->ok; r++) {
    GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
    for (guint i = 0; i < FLIP_DOCS; i++) {
      char key[16];
      g_snprintf(key, sizeof key, "f%05u", i);
      g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, 10 + (gint64)r * FLIP_DOCS + i,
                                   r % 2 ? f->odd : f->even));
    }
    f->ok = apply_range(f->idx, evs, 0, evs->len, NULL);
    g_ptr_array_free(evs, TRUE);
  }
  atomic_store(&f->done, TRUE);
  return NULL;
}

/* An index of FLIP_DOCS documents doc, as round 0 of flip_main wrote them. */
static ixia_idx_t *flip_index(const char *name, const char *doc) {
  ixia_idx_t *idx = open_index(name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 1, schema_json, NULL));
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  for (guint i = 0; i < FLIP_DOCS; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "f%05u", i);
    g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, 10 + i, doc));
  }
  CU_ASSERT_TRUE(apply_range(idx, evs, 0, evs->len, NULL));
  g_ptr_array_free(evs, TRUE);
  return idx;
}

static void test_hits_settled_across_publish(void) {
  ixia_idx_t *idx = flip_index("settled", "{\"cat\": \"c1\"}");
  ixia_query_t *q = parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"c1\"}}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  flipper_t f = {.idx = idx, .even = "{\"cat\": \"c1\"}", .odd = "{\"cat\": \"c2\"}", .rounds = FLIP_ROUNDS};
  GThread *t = g_thread_new("flipper", flip_main, &f);
  guint searches = 0, unsettled = 0, wrong_settled = 0, wrong_unsettled = 0;
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  while (!atomic_load(&f.done)) {
    ixia_idx_search_opts_t o = {.after_id = -1, .limit = FLIP_DOCS};
    ixia_idx_result_t res;
    ixia_error_t *e = NULL;
    ixia_idx_hits_clear(hits);
    CU_ASSERT_TRUE_FATAL(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, &e));
    searches++;
    unsettled += !res.settled;
    for (guint i = 0; i < hits->len; i++) {
      const ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
      /* The round that wrote this version: even rounds wrote c1. */
      gint64 round = (h->version - 10 - atoi(h->key + 1)) / FLIP_DOCS;
      if (round % 2 == 0) continue;
      if (res.settled) wrong_settled++;
      else wrong_unsettled++;
    }
  }
  g_thread_join(t);
  CU_ASSERT_TRUE(f.ok);
  if (wrong_settled || !unsettled)
    fprintf(stderr, "\n  %u searches, %u unsettled; hits of a non-matching version: %u settled, %u unsettled\n",
            searches, unsettled, wrong_settled, wrong_unsettled);
  CU_ASSERT_EQUAL(wrong_settled, 0);
  CU_ASSERT_TRUE(unsettled > 0);
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  ixia_query_destroy(q);
  ixia_idx_destroy(idx);
}

/* Documents that go from one value to two and back, both matching: a
 * block checked on doc values while one of its slots turns multi-valued
 * (a sentinel that fails every check) must be checked on its column
 * instead, or the document goes missing from the count. */
static void test_multi_values_across_publish(void) {
  ixia_idx_t *idx = flip_index("multiflip", "{\"tags\": [\"a\"]}");
  /* Every document holds "a": the filter does not lead, the live
   * documents are walked and checked on the tags' doc values. */
  ixia_query_t *q = parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"tags\": \"a\"}},"
                               " \"track_total_hits\": true}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  /* The window is a few instructions wide: many rounds (with the check
   * skipped, about one run in three failed at 40 rounds). */
  flipper_t f = {.idx = idx, .even = "{\"tags\": [\"a\"]}", .odd = "{\"tags\": [\"a\", \"b\"]}",
                 .rounds = 5 * FLIP_ROUNDS};
  GThread *t = g_thread_new("flipper", flip_main, &f);
  guint searches = 0, short_counts = 0;
  guint64 lowest = FLIP_DOCS;
  while (!atomic_load(&f.done)) {
    ixia_idx_search_opts_t o = {.after_id = -1, .limit = 0};
    ixia_idx_result_t res;
    ixia_error_t *e = NULL;
    CU_ASSERT_TRUE_FATAL(ixia_idx_search(idx, q, &o, &lim, NULL, NULL, &res, &e));
    searches++;
    if (res.total != FLIP_DOCS) short_counts++, lowest = MIN(lowest, res.total);
  }
  g_thread_join(t);
  CU_ASSERT_TRUE(f.ok);
  if (short_counts)
    fprintf(stderr, "\n  %u of %u searches counted fewer than %u (lowest %" G_GUINT64_FORMAT ")\n",
            short_counts, searches, FLIP_DOCS, lowest);
  CU_ASSERT_EQUAL(short_counts, 0);
  ixia_query_destroy(q);
  ixia_idx_destroy(idx);
}

static void test_delete_removes_everywhere(void) {
  ixia_idx_t *idx = open_index("del");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 1, schema_json, NULL));
  const char *doc = "{\"cat\": \"c1\", \"tags\": [\"a\", \"b\"], \"price\": 5, \"qty\": 3, \"ok\": true,"
                    " \"title\": \"Hello World\", \"ts\": 1700000000, \"s\": {\"country\": \"US\"}}";
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "d1", 10, doc, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "d2", 11, "{\"cat\": \"c2\"}", NULL));
  static const char *fields[] = {"cat", "tags", "price", "qty", "ok", "title", "ts", "s.country"};
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++) {
    char *q = g_strdup_printf("{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"exists\": \"%s\"}}", fields[i]);
    CU_ASSERT_EQUAL(count(idx, q), i == 0 ? 2 : 1);
    g_free(q);
  }
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_DELETE, "d1", 12, NULL, NULL));
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++) {
    char *q = g_strdup_printf("{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"exists\": \"%s\"}}", fields[i]);
    CU_ASSERT_EQUAL(count(idx, q), i == 0 ? 1 : 0);
    g_free(q);
  }
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"match\": {\"title\": \"hello\"}}}"), 0);
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"not\": {\"term\": {\"cat\": \"c9\"}}}}"), 1);
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\"}"), 1);
  /* The tombstone keeps an older put out; a newer one re-creates the key with its id. */
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "d1", 11, doc, NULL));
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\"}"), 1);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "d1", 13, doc, NULL));
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"tags\": \"b\"}}}"), 1);
  ixia_query_t *q = parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"c1\"}}}");
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  guint64 total = 0;
  CU_ASSERT_TRUE(isearch(idx, q, -1, 10, 0, &lim, hits, &total, NULL, NULL));
  CU_ASSERT_EQUAL(hits->len, 1);
  if (hits->len == 1) {
    CU_ASSERT_STRING_EQUAL(g_array_index(hits, ixia_idx_hit_t, 0).key, "d1");
    CU_ASSERT_EQUAL(g_array_index(hits, ixia_idx_hit_t, 0).version, 13);
    CU_ASSERT_EQUAL(g_array_index(hits, ixia_idx_hit_t, 0).id, 0); /* its old id */
  }
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  ixia_query_destroy(q);
  char *docs = dump_docs(idx);
  CU_ASSERT_STRING_EQUAL(docs, "d1 13 0\nd2 11 0\n");
  g_free(docs);
  /* Deleting a key never seen leaves a tombstone. */
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_DELETE, "d0", 14, NULL, NULL));
  docs = dump_docs(idx);
  CU_ASSERT_STRING_EQUAL(docs, "d0 14 1\nd1 13 0\nd2 11 0\n");
  g_free(docs);
  ixia_idx_destroy(idx);
}

/* The search of a filter on this index: whether it vouches for negations
 * (ixia_idx_result_t.schema_current), and its hits' keys in *keys. */
static gboolean vouches(ixia_idx_t *idx, const char *filter, char **keys) {
  char *json = g_strdup_printf("{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": %s}", filter);
  ixia_query_t *q = parse(idx, json);
  g_free(json);
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  ixia_idx_search_opts_t o = {.after_id = -1, .limit = 100};
  ixia_idx_result_t r;
  gboolean ok = ixia_idx_search(idx, q, &o, &lim, hits, NULL, &r, NULL);
  CU_ASSERT_TRUE(ok);
  if (keys) {
    GString *k = g_string_new(NULL);
    for (guint i = 0; i < hits->len; i++)
      g_string_append_printf(k, "%s%s", i ? "," : "", g_array_index(hits, ixia_idx_hit_t, i).key);
    *keys = g_string_free(k, FALSE);
  }
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  ixia_query_destroy(q);
  return ok && r.settled && r.schema_current;
}

/* A field declared after documents were indexed: those documents are not
 * in its postings, so "not" on it matches them in the index whatever they
 * hold. The shard vouches for negations only once every such document was
 * indexed again (written, backfilled or deleted), across batches, reopens
 * and the upgrade from format 3. */
static void test_stale_after_schema_change(void) {
  static const char *v1 = "{\"namespace\": \"shop\", \"table\": \"p\", \"indexes\": ["
                          "{\"field\": \"cat\", \"type\": \"keyword\"},"
                          "{\"field\": \"title\", \"type\": \"text\"}]}";
  static const char *v2 = "{\"namespace\": \"shop\", \"table\": \"p\", \"indexes\": ["
                          "{\"field\": \"cat\", \"type\": \"keyword\"},"
                          "{\"field\": \"title\", \"type\": \"text\"},"
                          "{\"field\": \"color\", \"type\": \"keyword\"}]}";
  static const char *v3 = "{\"namespace\": \"shop\", \"table\": \"p\", \"indexes\": ["
                          "{\"field\": \"cat\", \"type\": \"keyword\"},"
                          "{\"field\": \"title\", \"type\": \"text\", \"positions\": true},"
                          "{\"field\": \"color\", \"type\": \"keyword\"}]}";
  const char *red = "{\"cat\": \"c1\", \"color\": \"red\", \"title\": \"big red hat\"}";
  const char *blue = "{\"cat\": \"c1\", \"color\": \"blue\", \"title\": \"hat red big\"}";
  const char *not_red = "{\"not\": {\"term\": {\"color\": \"red\"}}}";
  const char *not_cat = "{\"not\": {\"term\": {\"cat\": \"c2\"}}}";
  ixia_idx_t *idx = open_index("stale");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 1, v1, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "a", 2, red, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "b", 3, blue, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "c", 4, red, NULL));
  CU_ASSERT_TRUE(vouches(idx, not_cat, NULL));
  /* color declared: a and c hold red but are not in its posting. */
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 5, v2, NULL));
  char *keys = NULL;
  CU_ASSERT_FALSE(vouches(idx, not_red, &keys));
  CU_ASSERT_STRING_EQUAL(keys, "a,b,c");
  g_clear_pointer(&keys, g_free);
  CU_ASSERT_FALSE(vouches(idx, not_cat, NULL));
  /* Kept across a reopen. */
  idx = reopen_index(idx, "stale");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_FALSE(vouches(idx, not_red, NULL));
  /* a backfilled (same version), b deleted: c still waits. */
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "a", 2, red, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_DELETE, "b", 6, NULL, NULL));
  CU_ASSERT_FALSE(vouches(idx, not_red, NULL));
  /* An event that fails (a number where color is a keyword) indexes nothing. */
  failures_t f = {0};
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "c", 4, "{\"color\": 7}", &f));
  CU_ASSERT_EQUAL(f.n, 1);
  CU_ASSERT_FALSE(vouches(idx, not_red, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "c", 7, red, NULL));
  CU_ASSERT_TRUE(vouches(idx, not_red, &keys));
  CU_ASSERT_STRING_EQUAL(keys, "");
  g_clear_pointer(&keys, g_free);
  /* One batch: puts under the old indexes (e new in it), positions
   * switched on, a put under the new ones. Only the first two wait. */
  tev_t t[4] = {{IXIA_IDX_PUT, "e", 8, (char *)red}, {IXIA_IDX_PUT, "a", 9, (char *)red},
                {IXIA_IDX_SCHEMA, "", 10, (char *)v3}, {IXIA_IDX_PUT, "d", 11, (char *)blue}};
  ixia_idx_event_t evs[4] = {to_event(&t[0]), to_event(&t[1]), to_event(&t[2]), to_event(&t[3])};
  CU_ASSERT_TRUE(ixia_idx_apply(idx, evs, 4, NULL, 0, on_failed, NULL, NULL, NULL));
  const char *no_phrase = "{\"not\": {\"match_phrase\": {\"title\": \"red hat\"}}}";
  CU_ASSERT_FALSE(vouches(idx, no_phrase, &keys));
  CU_ASSERT_STRING_EQUAL(keys, "a,c,e,d"); /* a, c and e have no positions yet */
  g_clear_pointer(&keys, g_free);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "c", 12, red, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "a", 13, red, NULL));
  CU_ASSERT_FALSE(vouches(idx, no_phrase, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "e", 14, red, NULL));
  CU_ASSERT_TRUE(vouches(idx, no_phrase, &keys));
  CU_ASSERT_STRING_EQUAL(keys, "d");
  g_free(keys);
  /* A schema that adds nothing (the same again) leaves it so. */
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 15, v3, NULL));
  CU_ASSERT_TRUE(vouches(idx, not_red, NULL));
  ixia_idx_stats_t st;
  ixia_idx_get_stats(idx, &st);
  CU_ASSERT_EQUAL(st.stale_documents, 0);
  /* color dropped, then declared again: what was written meanwhile lacks it. */
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 16, v1, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 17, v3, NULL));
  CU_ASSERT_FALSE(vouches(idx, not_red, NULL));
  ixia_idx_get_stats(idx, &st);
  CU_ASSERT_EQUAL(st.stale_documents, 4); /* a, c, d, e */
  const char *keys_now[] = {"a", "c", "d", "e"};
  for (guint i = 0; i < G_N_ELEMENTS(keys_now); i++)
    CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, keys_now[i], 18 + (gint64)i, i == 2 ? blue : red, NULL));
  CU_ASSERT_TRUE(vouches(idx, not_red, NULL));
  /* A format-3 index kept no stale set: at open every live document
   * counts as stale. */
  char *rerr = NULL;
  guint8 three[4] = {0, 0, 0, 3};
  rocksdb_put(ixia_idx_db(idx), idx->wopts, "Mf", 2, (const char *)three, 4, &rerr);
  CU_ASSERT_PTR_NULL(rerr);
  idx = reopen_index(idx, "stale");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_FALSE(vouches(idx, not_red, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "a", 26, red, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "c", 27, red, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_DELETE, "e", 28, NULL, NULL));
  CU_ASSERT_FALSE(vouches(idx, not_red, NULL));
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "d", 29, blue, NULL));
  CU_ASSERT_TRUE(vouches(idx, not_red, NULL));
  /* The upgrade happened once: opened again, the index is format 4. */
  idx = reopen_index(idx, "stale");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_TRUE(vouches(idx, not_red, NULL));
  ixia_idx_destroy(idx);
}

static void test_positions_persist(void) {
  ixia_idx_t *idx = open_index("pos");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_EQUAL(ixia_idx_position(idx, 0), -1);
  CU_ASSERT_EQUAL(ixia_idx_max_version(idx), 0);
  tev_t t[2] = {{IXIA_IDX_SCHEMA, "", 5, (char *)schema_json}, {IXIA_IDX_PUT, "a", 6, "{\"cat\": \"c1\"}"}};
  ixia_idx_event_t evs[2] = {to_event(&t[0]), to_event(&t[1])};
  ixia_idx_position_t pos[2] = {{0, 100}, {3, 7}};
  guint applied = 0;
  CU_ASSERT_TRUE(ixia_idx_apply(idx, evs, 2, pos, 2, on_failed, NULL, &applied, NULL));
  CU_ASSERT_EQUAL(applied, 2);
  CU_ASSERT_EQUAL(ixia_idx_position(idx, 0), 100);
  CU_ASSERT_EQUAL(ixia_idx_position(idx, 3), 7);
  CU_ASSERT_EQUAL(ixia_idx_position(idx, 1), -1);
  /* A batch of positions only. */
  ixia_idx_position_t p2 = {3, 9};
  CU_ASSERT_TRUE(ixia_idx_apply(idx, NULL, 0, &p2, 1, NULL, NULL, NULL, NULL));
  ixia_idx_destroy(idx);
  idx = open_index("pos");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_EQUAL(ixia_idx_position(idx, 0), 100);
  CU_ASSERT_EQUAL(ixia_idx_position(idx, 3), 9);
  CU_ASSERT_EQUAL(ixia_idx_max_version(idx), 6);
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"c1\"}}}"), 1);
  ixia_error_t *e = NULL;
  ixia_schema_t *s = ixia_idx_schema(NS, TABLE, idx, &e);
  CU_ASSERT_PTR_NOT_NULL(s);
  if (s) CU_ASSERT_EQUAL(s->version, 5);
  ixia_schema_unref(s);
  CU_ASSERT_PTR_NULL(ixia_idx_schema(NS, "nope", idx, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ENOTFOUND);
  ixia_error_destroy(e);
  ixia_idx_destroy(idx);
}

static void test_failed_events(void) {
  ixia_idx_t *idx = open_index("fail");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  char many[2048];
  GString *g = g_string_new("{\"tags\": [");
  for (int i = 0; i < 60; i++) g_string_append_printf(g, "%s\"x%d\"", i ? "," : "", i);
  g_string_append(g, "]}");
  g_strlcpy(many, g->str, sizeof many);
  g_string_free(g, TRUE);
  tev_t t[] = {
      {IXIA_IDX_SCHEMA, "", 1, (char *)schema_json},
      {IXIA_IDX_PUT, "good1", 2, "{\"cat\": \"c1\", \"price\": 1}"},
      {IXIA_IDX_PUT, "keep", 3, "{\"cat\": \"old\"}"},
      {IXIA_IDX_PUT, "keep", 4, "{\"cat\": \"new\", \"price\": \"abc\"}"}, /* wrong type */
      {IXIA_IDX_PUT, "bad", 5, "{not json"},
      {IXIA_IDX_PUT, "many", 6, many},                                   /* > max values */
      {(ixia_idx_op_t)77, "op", 7, "{}"},
      {IXIA_IDX_PUT, "good2", 8, "{\"cat\": \"c1\"}"},
  };
  ixia_idx_event_t evs[G_N_ELEMENTS(t) + 1];
  for (guint i = 0; i < G_N_ELEMENTS(t); i++) evs[i] = to_event(&t[i]);
  evs[G_N_ELEMENTS(t)] = to_event(&t[1]);
  evs[G_N_ELEMENTS(t)].table = "unknown"; /* no schema */
  failures_t f = {0, g_ptr_array_new(), g_ptr_array_new_with_free_func(g_free)};
  guint applied = 0;
  CU_ASSERT_TRUE(ixia_idx_apply(idx, evs, G_N_ELEMENTS(evs), NULL, 0, on_failed, &f, &applied, NULL));
  CU_ASSERT_EQUAL(applied, 4);
  CU_ASSERT_EQUAL(f.n, 5);
  if (f.n == 5) {
    CU_ASSERT_STRING_EQUAL(f.keys->pdata[0], "keep");
    CU_ASSERT_EQUAL(GPOINTER_TO_INT(f.codes->pdata[0]), IXIA_ETYPE);
    CU_ASSERT_STRING_EQUAL(f.keys->pdata[1], "bad");
    CU_ASSERT_STRING_EQUAL(f.keys->pdata[2], "many");
    CU_ASSERT_EQUAL(GPOINTER_TO_INT(f.codes->pdata[2]), IXIA_ETOOLARGE);
    CU_ASSERT_STRING_EQUAL(f.keys->pdata[3], "op");
    CU_ASSERT_EQUAL(GPOINTER_TO_INT(f.codes->pdata[4]), IXIA_ENOTFOUND);
  }
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"c1\"}}}"), 2);
  /* The failed update left the earlier record alone. */
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"old\"}}}"), 1);
  CU_ASSERT_EQUAL(count(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"term\": {\"cat\": \"new\"}}}"), 0);
  char *docs = dump_docs(idx);
  CU_ASSERT_STRING_EQUAL(docs, "good1 2 0\ngood2 8 0\nkeep 3 0\n");
  g_free(docs);
  ixia_idx_stats_t st;
  ixia_idx_get_stats(idx, &st);
  CU_ASSERT_EQUAL(st.events_failed, 5);
  CU_ASSERT_EQUAL(st.documents, 3);
  CU_ASSERT_TRUE(st.disk_bytes > 0);
  g_ptr_array_free(f.codes, TRUE);
  g_ptr_array_free(f.keys, TRUE);
  ixia_idx_destroy(idx);
}

/* The decoded-block cache stays within index.cache_mb (give or take one
 * block per stripe) while searches keep hitting what it holds and loading
 * what it does not: hot blocks get a second chance, never unbounded room.
 * Every round answers as the first: blocks evicted and loaded again (their
 * directory slots emptied and refilled) read the same. */
static void test_cache_budget(void) {
  ixia_config_set(cfg, "index.cache_mb", "1", NULL);
  ixia_idx_t *idx = open_index("cachebudget");
  ixia_config_set(cfg, "index.cache_mb", "512", NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  g_ptr_array_add(evs, tev_new(IXIA_IDX_SCHEMA, "", 1, schema_json));
  for (int i = 0; i < 60000; i++) {
    char *key = g_strdup_printf("b%06d", i);
    char *doc = g_strdup_printf("{\"cat\": \"c%d\", \"qty\": %d, \"price\": %d.5, \"ts\": %d}",
                                i % 50, i, i % 997, 1700000000 + i);
    g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, i + 2, doc));
    g_free(key), g_free(doc);
  }
  CU_ASSERT_TRUE(apply_range(idx, evs, 0, evs->len, NULL));
  g_ptr_array_free(evs, TRUE);
  /* Four queries whose blocks together are about twice the budget, each
   * run three times in a row, so that what it reads is hit (marked used)
   * before the next one loads its own. */
  const char *queries[] = {
      "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"and\": [{\"term\": {\"cat\": \"c7\"}}, "
      "{\"range\": {\"qty\": {\"gte\": 100}}}]}}",
      "{\"namespace\": \"shop\", \"table\": \"p\", \"aggs\": {\"s\": {\"sum\": {\"field\": \"price\"}}}}",
      "{\"namespace\": \"shop\", \"table\": \"p\", \"aggs\": {\"s\": {\"max\": {\"field\": \"ts\"}}}}",
      "{\"namespace\": \"shop\", \"table\": \"p\", \"aggs\": {\"s\": {\"terms\": {\"field\": \"cat\"}}}}",
  };
  guint64 most = 0;
  char *first[G_N_ELEMENTS(queries)] = {NULL};
  for (int round = 0; round < 20; round++) {
    for (guint i = 0; i < G_N_ELEMENTS(queries); i++) {
      for (int again = 0; again < 3; again++) {
        const char *text = queries[i];
        ixia_query_t *q = parse(idx, text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(q);
        ixia_aggs_t *a = q->n_aggs ? ixia_aggs_new(q, &lim) : NULL;
        guint64 total = 0;
        ixia_error_t *e = NULL;
        CU_ASSERT_TRUE(isearch(idx, q, -1, 10, 0, &lim, NULL, &total, a, &e));
        cJSON *aj = a ? ixia_aggs_result_json(a) : NULL;
        char *at = aj ? ixia_json_print(aj) : g_strdup("");
        char *got = g_strdup_printf("%" G_GUINT64_FORMAT " %s", total, at);
        if (!first[i]) first[i] = g_strdup(got);
        CU_ASSERT_STRING_EQUAL(got, first[i]);
        g_free(got), g_free(at);
        cJSON_Delete(aj);
        ixia_error_destroy(e);
        ixia_aggs_destroy(a);
        ixia_query_destroy(q);
      }
      ixia_idx_stats_t st;
      ixia_idx_get_stats(idx, &st);
      most = MAX(most, st.cache_bytes);
    }
  }
  ixia_idx_stats_t st;
  ixia_idx_get_stats(idx, &st);
  CU_ASSERT_TRUE(st.cache_hits > 0);
  CU_ASSERT_TRUE(most > 512 * 1024); /* the budget was used */
  /* 1 MiB, plus at most one block (a column block of 1,024 slots, or a
   * posting of 60,000 ids: under 64 KiB) per stripe. */
  if (most > (1u << 20) + 32 * 65536u) fprintf(stderr, "\n  cache held %" G_GUINT64_FORMAT " bytes\n", most);
  CU_ASSERT_TRUE(most <= (1u << 20) + 32 * 65536u);
  for (guint i = 0; i < G_N_ELEMENTS(queries); i++) g_free(first[i]);
  ixia_idx_destroy(idx);
}

static void test_limits(void) {
  ixia_idx_t *idx = open_index("limits");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  g_ptr_array_add(evs, tev_new(IXIA_IDX_SCHEMA, "", 1, schema_json));
  for (int i = 0; i < 3000; i++) {
    char *key = g_strdup_printf("l%05d", i);
    char *doc = g_strdup_printf("{\"cat\": \"c%d\", \"qty\": %d}", i % 3, i);
    g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, i + 2, doc));
    g_free(key), g_free(doc);
  }
  CU_ASSERT_TRUE(apply_range(idx, evs, 0, evs->len, NULL));
  g_ptr_array_free(evs, TRUE);
  ixia_query_t *q = parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": {\"range\": {\"qty\": {\"gte\": 0}}}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  ixia_query_limits_t small = lim;
  small.max_postings = 1000;
  guint64 total = 0;
  ixia_error_t *e = NULL;
  CU_ASSERT_FALSE(isearch(idx, q, -1, 10, 0, &small, NULL, &total, NULL, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ETOOLARGE);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "query.max_postings"));
  ixia_error_destroy(e), e = NULL;
  small.max_postings = 6000; /* the range, then the live set */
  CU_ASSERT_TRUE(isearch(idx, q, -1, 10, 0, &small, NULL, &total, NULL, &e));
  CU_ASSERT_EQUAL(total, 3000);
  CU_ASSERT_FALSE(isearch(idx, q, -1, 10, g_get_monotonic_time() - 1, &lim, NULL, &total, NULL, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EDEADLINE);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "deadline"));
  ixia_error_destroy(e), e = NULL;
  /* A table without a schema in this index. */
  ixia_idx_t *other = open_index("limits_other");
  CU_ASSERT_FALSE(isearch(other, q, -1, 10, 0, &lim, NULL, &total, NULL, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ENOTFOUND);
  ixia_error_destroy(e), e = NULL;
  ixia_idx_destroy(other);
  ixia_query_destroy(q);
  /* An aggregation over too many buckets fails with the aggregation's limit. */
  q = parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"aggs\": {\"t\": {\"terms\": {\"field\": \"qty\"}}}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  assert_bucket_limit(idx, q, 100);
  ixia_query_destroy(q);
  ixia_idx_destroy(idx);
}

/* Sorted paging while the sorted field changes: positions stay those of
 * the first page, so no document is returned twice and none present at the
 * start (and still there) is skipped; an expired or pre-restart cursor is
 * refused. Each page is asked first bounded, as a shard's I/O thread asks
 * it: a page that does not give up must be the unbounded page, and one
 * that gives up must leave nothing behind. */
typedef struct {
  ixia_idx_t *idx;
  ixia_query_t *q;
  GPtrArray *last;
  char *last_key;
  guint64 epoch, as_of;
  guint bounded_pages, gave_up;
} pager_t;

/* The keys of hits, "\n"-joined. */
static char *hit_keys(const GArray *hits) {
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < hits->len; i++)
    g_string_append_printf(s, "%s%s", i ? "\n" : "", g_array_index(hits, ixia_idx_hit_t, i).key);
  return g_string_free(s, FALSE);
}

static gboolean next_page(pager_t *p, guint limit, GPtrArray *keys, ixia_error_t **err) {
  ixia_idx_after_t after = {p->last ? (GBytes **)p->last->pdata : NULL, p->last_key,
                            p->last_key ? strlen(p->last_key) : 0};
  ixia_idx_search_opts_t o = {.after_id = -1, .limit = limit, .after = p->last ? &after : NULL,
                              .as_of_epoch = p->epoch, .as_of = p->as_of, .bounded = TRUE};
  ixia_idx_result_t res;
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  gboolean ok = ixia_idx_search(p->idx, p->q, &o, &lim, hits, NULL, &res, err);
  char *bounded = NULL;
  if (ok && res.gave_up) {
    p->gave_up++;
    CU_ASSERT_EQUAL(hits->len, 0);
  } else if (ok) {
    p->bounded_pages++;
    bounded = hit_keys(hits);
    ixia_idx_hits_clear(hits);
  }
  o.bounded = FALSE;
  if (ok) ok = ixia_idx_search(p->idx, p->q, &o, &lim, hits, NULL, &res, err);
  CU_ASSERT_FALSE(ok && res.gave_up);
  if (ok && bounded) {
    char *full = hit_keys(hits);
    CU_ASSERT_STRING_EQUAL(bounded, full);
    g_free(full);
  }
  g_free(bounded);
  if (ok) {
    p->epoch = res.as_of_epoch, p->as_of = res.as_of;
    for (guint i = 0; i < hits->len; i++) {
      ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
      g_ptr_array_add(keys, g_strdup(h->key));
      if (i + 1 == hits->len) {
        if (p->last) g_ptr_array_unref(p->last);
        g_free(p->last_key);
        p->last = ixia_idx_hit_sort_bytes(h);
        p->last_key = g_strdup(h->key);
      }
    }
  }
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  return ok;
}

static void pager_clear(pager_t *p) {
  if (p->last) g_ptr_array_unref(p->last);
  g_free(p->last_key);
  ixia_query_destroy(p->q);
}

static void sorted_paging_under_writes(const char *sort) {
  ixia_idx_t *idx = open_index("sortpage");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  GRand *r = g_rand_new_with_seed(99);
  gint64 v = 1;
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", v++, schema_json, NULL));
  GHashTable *model = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)cJSON_Delete);
  for (int i = 0; i < 600; i++) {
    char key[16], doc[96];
    g_snprintf(key, sizeof key, "p%03d", i);
    g_snprintf(doc, sizeof doc, "{\"price\": %d, \"cat\": \"c%d\"}", g_rand_int_range(r, 0, 100),
               g_rand_int_range(r, 0, 9));
    CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, key, v++, doc, NULL));
    g_hash_table_insert(model, g_strdup(key), cJSON_Parse(doc));
  }
  char *qj = g_strdup_printf("{\"namespace\": \"shop\", \"table\": \"p\", \"sort\": %s}", sort);
  pager_t p = {idx, parse(idx, qj), NULL, NULL, 0, 0, 0, 0};
  CU_ASSERT_PTR_NOT_NULL_FATAL(p.q);
  /* The order every page must follow: the values at the first page. */
  char *initial = brute_sorted(model, p.q);
  GHashTable *deleted = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GPtrArray *got = g_ptr_array_new_with_free_func(g_free);
  int created = 0;
  for (int page = 0; page < 1000; page++) {
    guint before = got->len;
    ixia_error_t *e = NULL;
    CU_ASSERT_TRUE_FATAL(next_page(&p, 17, got, &e));
    if (got->len - before < 17) break;
    /* Writers: move prices of documents before and after the cursor, add
     * documents, delete a few. */
    for (int w = 0; w < 25; w++) {
      char key[16], doc[96];
      int kind = g_rand_int_range(r, 0, 10);
      if (kind < 7) {
        g_snprintf(key, sizeof key, "p%03d", g_rand_int_range(r, 0, 600));
        if (g_hash_table_contains(deleted, key)) continue;
        g_snprintf(doc, sizeof doc, "{\"price\": %d, \"cat\": \"c%d\"}", g_rand_int_range(r, -50, 150),
                   g_rand_int_range(r, 0, 9));
        CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, key, v++, doc, NULL));
      } else if (kind < 9) {
        g_snprintf(key, sizeof key, "n%03d", created++);
        g_snprintf(doc, sizeof doc, "{\"price\": %d}", g_rand_int_range(r, 0, 100));
        CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, key, v++, doc, NULL));
      } else {
        g_snprintf(key, sizeof key, "p%03d", g_rand_int_range(r, 0, 600));
        CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_DELETE, key, v++, NULL, NULL));
        g_hash_table_add(deleted, g_strdup(key));
      }
    }
  }
  /* No repeats; every initial document not deleted, in the initial order. */
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  GString *order = g_string_new(NULL);
  int repeats = 0;
  char **init = g_strsplit(initial, "\n", -1);
  GHashTable *rank = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; init[i]; i++) g_hash_table_insert(rank, init[i], GUINT_TO_POINTER(i + 1));
  guint prev = 0;
  int out_of_order = 0;
  for (guint i = 0; i < got->len; i++) {
    const char *k = got->pdata[i];
    if (!g_hash_table_add(seen, (gpointer)k)) repeats++;
    guint at = GPOINTER_TO_UINT(g_hash_table_lookup(rank, k));
    if (k[0] != 'p') continue;
    /* Every initial document where it was at the start, deleted or not. */
    if (at <= prev) out_of_order++;
    prev = at;
    if (!g_hash_table_contains(deleted, k)) g_string_append_printf(order, "%s%s", order->len ? "\n" : "", k);
  }
  CU_ASSERT_EQUAL(repeats, 0);
  CU_ASSERT_EQUAL(out_of_order, 0);
  g_hash_table_destroy(rank);
  GString *want = g_string_new(NULL);
  for (guint i = 0; init[i]; i++)
    if (!g_hash_table_contains(deleted, init[i])) g_string_append_printf(want, "%s%s", want->len ? "\n" : "", init[i]);
  if (strcmp(order->str, want->str) != 0)
    fprintf(stderr, "\n  sort %s under writes:\n  got  %s\n  want %s\n", sort, order->str, want->str);
  CU_ASSERT_STRING_EQUAL(order->str, want->str);
  CU_ASSERT_TRUE(created > 20);
  /* A number first: the points settle most pages (those near the end,
   * where the documents without a price may be needed, give up); a
   * keyword first: never. */
  if (strstr(sort, "\"price\": \"desc\"")) CU_ASSERT_TRUE(p.bounded_pages > 20 && p.gave_up < p.bounded_pages / 4);
  if (strstr(sort, "\"cat\"")) CU_ASSERT_TRUE(p.bounded_pages == 0 && p.gave_up > 10);
  g_strfreev(init);
  g_string_free(want, TRUE);
  g_string_free(order, TRUE);
  g_hash_table_destroy(seen);

  /* After a restart the cursor's positions are gone: refused, clearly. */
  ixia_idx_destroy(idx);
  idx = p.idx = open_index("sortpage");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  ixia_error_t *e = NULL;
  CU_ASSERT_FALSE(next_page(&p, 17, got, &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_EINVAL && strstr(e->message, "restarted") &&
                 strstr(e->message, "start again from the first page"));
  ixia_error_destroy(e);
  g_ptr_array_free(got, TRUE);
  g_hash_table_destroy(deleted);
  g_hash_table_destroy(model);
  pager_clear(&p);
  g_free(initial);
  g_free(qj);
  g_rand_free(r);
  ixia_idx_destroy(idx);
  /* The next run starts from an empty index. */
  char *path = g_build_filename(dir, "sortpage", NULL);
  char *cmd = g_strdup_printf("rm -rf '%s'", path);
  CU_ASSERT_EQUAL(system(cmd), 0);
  g_free(cmd);
  g_free(path);
}

static void test_sorted_paging_under_writes(void) {
  sorted_paging_under_writes("[{\"price\": \"desc\"}]");
  sorted_paging_under_writes("[{\"cat\": {\"order\": \"asc\", \"missing\": \"first\"}}, {\"price\": \"asc\"}]");
}

static void test_sort_history_expires(void) {
  ixia_config_t *c = ixia_config_new();
  ixia_config_set(c, "index.sort_history_seconds", "1", NULL);
  char *path = g_build_filename(dir, "sortexp", NULL);
  ixia_idx_t *idx = ixia_idx_open(path, c, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_SCHEMA, "", 1, schema_json, NULL));
  for (int i = 0; i < 30; i++) {
    char key[16], doc[64];
    g_snprintf(key, sizeof key, "e%02d", i);
    g_snprintf(doc, sizeof doc, "{\"qty\": %d}", i);
    CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, key, i + 2, doc, NULL));
  }
  pager_t p = {idx, parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"sort\": [\"qty\"]}"), NULL, NULL, 0, 0, 0, 0};
  GPtrArray *got = g_ptr_array_new_with_free_func(g_free);
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(next_page(&p, 10, got, &e));
  /* A change now is remembered: the next page still works. */
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "e00", 100, "{\"qty\": 99}", NULL));
  CU_ASSERT_TRUE(next_page(&p, 10, got, &e));
  /* Past index.sort_history_seconds the next change drops it: refused. */
  g_usleep(1200000);
  CU_ASSERT_TRUE(apply_one(idx, IXIA_IDX_PUT, "e01", 101, "{\"qty\": 98}", NULL));
  CU_ASSERT_FALSE(next_page(&p, 10, got, &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_EINVAL && strstr(e->message, "index.sort_history_seconds"));
  ixia_error_destroy(e);
  CU_ASSERT_EQUAL(got->len, 20);
  g_ptr_array_free(got, TRUE);
  pager_clear(&p);
  ixia_idx_destroy(idx);
  ixia_config_destroy(c);
  g_free(path);
}

/* ----------------------------------------------------------- benchmark */

/* CPU time of the process (every thread): the box is shared, wall time is noisy. */
static gint64 cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (gint64)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static void bench(guint n) {
  ixia_idx_t *idx = open_index("bench");
  if (!idx) return;
  const char *schema =
      "{\"namespace\": \"shop\", \"table\": \"p\", \"indexes\": ["
      "{\"field\": \"category\", \"type\": \"keyword\"}, {\"field\": \"price\", \"type\": \"double\"},"
      "{\"field\": \"title\", \"type\": \"text\"}, {\"field\": \"tags\", \"type\": \"keyword\"},"
      "{\"field\": \"updated_at\", \"type\": \"timestamp\"}, {\"field\": \"brand\", \"type\": \"keyword\"}]}";
  apply_one(idx, IXIA_IDX_SCHEMA, "", 1, schema, NULL);
  GRand *r = g_rand_new_with_seed(1);
  guint batch = 1000;
  ixia_idx_event_t *evs = g_new0(ixia_idx_event_t, batch);
  char **keys = g_new0(char *, batch), **docs = g_new0(char *, batch);
  gint64 apply_us = 0, apply_cpu_us = 0;
  gsize bytes = 0;
  for (guint done = 0; done < n;) {
    guint m = MIN(batch, n - done);
    for (guint i = 0; i < m; i++) {
      guint id = done + i;
      keys[i] = g_strdup_printf("p%08u", id);
      GString *d = g_string_new(NULL);
      g_string_append_printf(d, "{\"category\": \"cat%02d\", \"price\": %.2f, \"title\": \"", g_rand_int_range(r, 0, 100),
                             g_rand_double_range(r, 1, 1000));
      for (int w = 0; w < 8; w++) g_string_append_printf(d, "%sword%d", w ? " " : "", g_rand_int_range(r, 0, 2000));
      g_string_append_printf(d, "\", \"tags\": [\"t%03d\", \"t%03d\"], \"updated_at\": %d, \"brand\": \"brand%03d\","
                                " \"description\": \"", g_rand_int_range(r, 0, 500), g_rand_int_range(r, 0, 500),
                             1700000000 + g_rand_int_range(r, 0, 1000000), g_rand_int_range(r, 0, 300));
      while (d->len < 1000) g_string_append_printf(d, "lorem ipsum %u ", g_rand_int(r));
      g_string_append(d, "\"}");
      bytes += d->len;
      docs[i] = g_string_free(d, FALSE);
      evs[i] = (ixia_idx_event_t){IXIA_IDX_PUT, NS, TABLE, keys[i], strlen(keys[i]), id + 2, docs[i], strlen(docs[i]), 0};
    }
    ixia_error_t *e = NULL;
    gint64 a0 = g_get_monotonic_time(), c0 = cpu_us();
    gboolean ok = ixia_idx_apply(idx, evs, m, NULL, 0, NULL, NULL, NULL, &e);
    apply_us += g_get_monotonic_time() - a0;
    apply_cpu_us += cpu_us() - c0;
    if (!ok) {
      fprintf(stderr, "bench apply: %s\n", e->message);
      ixia_error_destroy(e);
      break;
    }
    for (guint i = 0; i < m; i++) g_free(keys[i]), g_free(docs[i]);
    done += m;
  }
  double secs = (double)apply_us / 1e6, cpu = (double)apply_cpu_us / 1e6;
  printf("bench: applied %u docs (avg %.0f bytes) in %.2f s wall, %.2f s CPU (all threads): %.0f docs/s wall,"
         " %.0f docs/CPU-s\n", n, (double)bytes / n, secs, cpu, n / secs, n / cpu);
  const char *qj =
      "{\"namespace\": \"shop\", \"table\": \"p\", \"limit\": 10, \"filter\": {\"range\": {\"category\": {\"lt\": \"cat30\"}}},"
      " \"aggs\": {\"by\": {\"terms\": {\"field\": \"category\", \"size\": 10}}, \"s\": {\"sum\": \"price\"},"
      " \"a\": {\"avg\": \"price\"}, \"mn\": {\"min\": \"price\"}, \"mx\": {\"max\": \"price\"}}}";
  ixia_query_t *q = parse(idx, qj);
  for (int round = 0; q && round < (g_getenv("IXIA_INDEX_BENCH_ROUNDS") ? atoi(g_getenv("IXIA_INDEX_BENCH_ROUNDS")) : 3); round++) {
    ixia_aggs_t *a = ixia_aggs_new(q, &lim);
    GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
    guint64 total = 0;
    gint64 s0 = g_get_monotonic_time(), c0 = cpu_us();
    gboolean ok = isearch(idx, q, -1, 10, 0, &lim, hits, &total, a, NULL);
    double ms = (double)(g_get_monotonic_time() - s0) / 1e3, cpu_ms = (double)(cpu_us() - c0) / 1e3;
    guint64 t1 = 0;
    s0 = g_get_monotonic_time();
    isearch(idx, q, -1, 10, 0, &lim, NULL, &t1, NULL, NULL);
    double ms_filter = (double)(g_get_monotonic_time() - s0) / 1e3;
    printf("bench: search+aggs ok=%d total=%" G_GUINT64_FORMAT " in %.1f ms wall, %.1f ms CPU (filter+count alone %.1f ms)\n",
           ok, total, ms, cpu_ms, ms_filter);
    ixia_idx_hits_clear(hits);
    g_array_free(hits, TRUE);
    ixia_aggs_destroy(a);
  }
  ixia_idx_stats_t st;
  ixia_idx_get_stats(idx, &st);
  printf("bench: %" G_GUINT64_FORMAT " documents, %.1f MB on disk\n", st.documents, st.disk_bytes / 1048576.0);
  ixia_query_destroy(q);
  g_free(evs), g_free(keys), g_free(docs);
  g_rand_free(r);
  ixia_idx_destroy(idx);
}

/* One sorted search, bounded or not: its keys "\n"-joined (NULL when it
 * gave up) and its total. */
static char *sorted_keys(ixia_idx_t *idx, const char *json, gboolean bounded, guint64 *total) {
  ixia_query_t *q = parse(idx, json);
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  ixia_idx_search_opts_t o = {.after_id = -1, .limit = q->limit, .bounded = bounded};
  ixia_idx_result_t res;
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(ixia_idx_search(idx, q, &o, &lim, hits, NULL, &res, &e));
  ixia_error_destroy(e);
  char *keys = res.gave_up ? NULL : hit_keys(hits);
  if (res.gave_up) CU_ASSERT_EQUAL(hits->len, 0);
  *total = res.total;
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  ixia_query_destroy(q);
  return keys;
}

/* A bounded sorted search (a shard's I/O thread) answers exactly as an
 * unbounded one when the first key's points near the page settle it, and
 * gives up, leaving no hit, when they do not: a filter too selective for
 * the points walked, a keyword first key, a tie group too large to order
 * by key. The 30% filter is a keyword range of 15 values over dense
 * blocks (the vectorised doc values check), its total against a count. */
static void test_sorted_bounded(void) {
  ixia_idx_t *idx = open_index("bounded");
  CU_ASSERT_PTR_NOT_NULL_FATAL(idx);
  GPtrArray *evs = g_ptr_array_new_with_free_func(tev_free);
  g_ptr_array_add(evs, tev_new(IXIA_IDX_SCHEMA, "", 1, schema_json));
  guint n = 9000, in_range = 0;
  for (guint i = 0; i < n; i++) {
    char key[16], doc[96];
    g_snprintf(key, sizeof key, "k%05u", i);
    guint cat = (i * 7) % 50;
    in_range += cat < 15;
    g_snprintf(doc, sizeof doc, "{\"price\": %u, \"cat\": \"c%02u\", \"qty\": %u, \"v\": {\"n\": %u}}",
               (i * 37) % 1000, cat, i % 2, i % 10);
    g_ptr_array_add(evs, tev_new(IXIA_IDX_PUT, key, 2 + i, doc));
  }
  GRand *rng = g_rand_new_with_seed(5);
  CU_ASSERT_TRUE_FATAL(apply_all(idx, evs, rng));
  struct {
    const char *filter, *sort;
    gboolean gives_up;
  } cases[] = {
      {"{\"range\": {\"cat\": {\"lt\": \"c15\"}}}", "[{\"price\": \"desc\"}]", FALSE},
      {"{\"range\": {\"cat\": {\"lt\": \"c15\"}}}", "[{\"price\": \"asc\"}, {\"cat\": \"desc\"}]", FALSE},
      /* 1 in 50 passes: 100 hits need ~5,000 points, past the bound */
      {"{\"term\": {\"cat\": \"c07\"}}", "[{\"price\": \"desc\"}]", TRUE},
      {"{\"range\": {\"cat\": {\"lt\": \"c15\"}}}", "[{\"cat\": \"asc\"}]", TRUE},
      /* qty is 0 or 1: the ~4,500 points of qty 1 are past the points walked */
      {"{\"range\": {\"cat\": {\"lt\": \"c15\"}}}", "[{\"qty\": \"desc\"}]", TRUE},
      /* v.n is i % 10: 360 matches share the top value, so the page ends
       * inside a tie of more than 256 to order by key (900 points walked) */
      {"{\"range\": {\"cat\": {\"lt\": \"c15\"}}}", "[{\"v.n\": \"desc\"}]", TRUE},
      /* the same with price after it: no tie at the boundary */
      {"{\"range\": {\"cat\": {\"lt\": \"c15\"}}}", "[{\"v.n\": \"desc\"}, {\"price\": \"asc\"}]", FALSE},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    char *json = g_strdup_printf("{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": %s, "
                                 "\"sort\": %s, \"limit\": 100}", cases[c].filter, cases[c].sort);
    guint64 tb = 0, tf = 0;
    char *bounded = sorted_keys(idx, json, TRUE, &tb);
    char *full = sorted_keys(idx, json, FALSE, &tf);
    CU_ASSERT_PTR_NOT_NULL(full);
    if (cases[c].gives_up) {
      if (bounded) fprintf(stderr, "\n  bounded did not give up: %s\n", json);
      CU_ASSERT_PTR_NULL(bounded);
    } else {
      CU_ASSERT_PTR_NOT_NULL(bounded);
      if (bounded && full) CU_ASSERT_STRING_EQUAL(bounded, full);
      CU_ASSERT_EQUAL(tb, in_range);
      CU_ASSERT_EQUAL(tf, in_range);
    }
    g_free(bounded);
    g_free(full);
    g_free(json);
  }
  /* Paging through the tie of 360: cursors inside it are tied with more
   * than 256 matches, and every page is still the unbounded one
   * (next_page compares them). */
  pager_t p = {idx, parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": "
                               "{\"range\": {\"cat\": {\"lt\": \"c15\"}}}, \"sort\": [{\"v.n\": \"desc\"}]}"),
               NULL, NULL, 0, 0, 0, 0};
  CU_ASSERT_PTR_NOT_NULL_FATAL(p.q);
  GPtrArray *got = g_ptr_array_new_with_free_func(g_free);
  for (int page = 0; page < 5; page++) {
    ixia_error_t *e = NULL;
    CU_ASSERT_TRUE(next_page(&p, 100, got, &e));
    ixia_error_destroy(e);
  }
  /* The first four pages end in the tie or start from a cursor in it. */
  CU_ASSERT_TRUE(p.gave_up >= 4 && p.bounded_pages >= 1);
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < got->len; i++) CU_ASSERT_TRUE(g_hash_table_add(seen, got->pdata[i]));
  CU_ASSERT_EQUAL(got->len, 500);
  g_hash_table_destroy(seen);
  g_ptr_array_free(got, TRUE);
  pager_clear(&p);

  /* A cursor with more than 1,024 changes since its first page gives up
   * before gathering them; the page from a worker is still right. */
  pager_t q = {idx, parse(idx, "{\"namespace\": \"shop\", \"table\": \"p\", \"filter\": "
                               "{\"range\": {\"cat\": {\"lt\": \"c15\"}}}, \"sort\": [{\"price\": \"desc\"}]}"),
               NULL, NULL, 0, 0, 0, 0};
  CU_ASSERT_PTR_NOT_NULL_FATAL(q.q);
  got = g_ptr_array_new_with_free_func(g_free);
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(next_page(&q, 100, got, &e));
  CU_ASSERT_TRUE(q.bounded_pages == 1 && q.gave_up == 0);
  GPtrArray *upd = g_ptr_array_new_with_free_func(tev_free);
  for (guint i = 0; i < 1100; i++) {
    char key[16], doc[96];
    g_snprintf(key, sizeof key, "k%05u", (i * 13) % n);
    g_snprintf(doc, sizeof doc, "{\"price\": %u, \"cat\": \"c%02u\", \"qty\": 7}", (i * 37) % 1000, (i * 7) % 50);
    g_ptr_array_add(upd, tev_new(IXIA_IDX_PUT, key, 20000 + i, doc));
  }
  CU_ASSERT_TRUE_FATAL(apply_all(idx, upd, rng));
  CU_ASSERT_TRUE(next_page(&q, 100, got, &e));
  CU_ASSERT_TRUE(q.bounded_pages == 1 && q.gave_up == 1);
  CU_ASSERT_EQUAL(got->len, 200);
  ixia_error_destroy(e);
  g_ptr_array_free(upd, TRUE);
  g_ptr_array_free(got, TRUE);
  pager_clear(&q);
  g_rand_free(rng);
  g_ptr_array_free(evs, TRUE);
  ixia_idx_destroy(idx);
}

/* The ids of set's points (key << 20 | id) with lo <= key <= hi into want;
 * returns how many points. */
static guint64 points_in(GHashTable *set, guint64 lo, guint64 hi, roaring_bitmap_t *want) {
  guint64 points = 0;
  GHashTableIter it;
  gpointer kk;
  g_hash_table_iter_init(&it, set);
  while (g_hash_table_iter_next(&it, &kk, NULL)) {
    guint64 key = GPOINTER_TO_SIZE(kk) >> 20;
    if (key >= lo && key <= hi) roaring_bitmap_add(want, (guint32)(GPOINTER_TO_SIZE(kk) & 0xfffff)), points++;
  }
  return points;
}

/* Counts and collections of random ranges of p against set (key << 20 | id). */
static void points_check_ranges(ixia_points_t *p, GHashTable *set, GRand *r, int n) {
  for (int q = 0; q < n; q++) {
    guint64 lo = (guint64)g_rand_int_range(r, 0, 1001), hi = lo + (guint64)g_rand_int_range(r, 0, 1001 - (gint32)lo);
    roaring_bitmap_t *want = roaring_bitmap_create(), *got = roaring_bitmap_create();
    guint64 points = points_in(set, lo, hi, want);
    CU_ASSERT_EQUAL(ixia_points_count(p, lo, hi), points);
    CU_ASSERT_EQUAL(ixia_points_collect(p, lo, hi, got), points);
    CU_ASSERT_TRUE(roaring_bitmap_equals(got, want));
    roaring_bitmap_free(want);
    roaring_bitmap_free(got);
  }
  CU_ASSERT_EQUAL(ixia_points_size(p), g_hash_table_size(set));
}

static gint point_key_cmp(gconstpointer a, gconstpointer b) {
  guint64 x = GPOINTER_TO_SIZE(*(gconstpointer const *)a), y = GPOINTER_TO_SIZE(*(gconstpointer const *)b);
  return x < y ? -1 : x > y;
}

/* Numeric points against a brute-force list of (key, id) pairs: random
 * adds and removes with many equal keys and documents with several values,
 * then ranges of every width collected, counted and used as a filter on
 * candidate sets both smaller than the range (the candidates mark, the
 * points probe) and larger (the points mark, the candidates probe), the
 * largest candidate always in play. */
static void test_points_vs_brute_force(void) {
  GRand *r = g_rand_new_with_seed(7);
  ixia_points_t *p = ixia_points_new();
  GHashTable *set = g_hash_table_new(NULL, NULL); /* key << 20 | id */
  guint small = 0, large = 0;
  for (int round = 0; round < 40; round++) {
    ixia_point_change_t ch[400];
    for (guint i = 0; i < G_N_ELEMENTS(ch); i++) {
      guint64 key = g_rand_int_range(r, 0, 8) == 0 ? 500 : (guint64)g_rand_int_range(r, 0, 1001);
      /* ids in two zones, the second at the end of the first container */
      guint32 id = (guint32)g_rand_int_range(r, 0, 10000) + (g_rand_boolean(r) ? 60000 : 0);
      gboolean add = round < 10 || g_rand_int_range(r, 0, 3) > 0;
      if (i > 0 && g_rand_int_range(r, 0, 4) == 0) key = ch[i - 1].key + 1, id = ch[i - 1].id; /* two values */
      ch[i] = (ixia_point_change_t){key, id, add};
      gpointer pk = GSIZE_TO_POINTER((gsize)(key << 20 | id));
      if (add) g_hash_table_add(set, pk);
      else g_hash_table_remove(set, pk);
    }
    ixia_points_update(p, ch, G_N_ELEMENTS(ch));
    for (int q = 0; q < 40; q++) {
      guint64 lo = (guint64)g_rand_int_range(r, 0, 1001), hi = lo + (guint64)g_rand_int_range(r, 0, 1001 - (gint32)lo);
      if (q == 0) lo = 0, hi = G_MAXUINT64;
      roaring_bitmap_t *want = roaring_bitmap_create(), *cand = roaring_bitmap_create();
      guint64 points = points_in(set, lo, hi, want);
      /* candidates: a sparse draw (array container), a dense one (bitset)
       * or runs, plus the range's largest id */
      int every = q % 2 ? 2 : 500;
      for (guint32 id = 0; id < 70000; id = id == 9999 ? 60000 : id + 1)
        if (g_rand_int_range(r, 0, every) == 0) roaring_bitmap_add(cand, id);
      if (q % 3 == 0) {
        guint32 from = (guint32)g_rand_int_range(r, 0, 9000) + (g_rand_boolean(r) ? 60000 : 0);
        roaring_bitmap_add_range(cand, from, from + (guint32)g_rand_int_range(r, 1, 1000));
        roaring_bitmap_run_optimize(cand);
      }
      if (q % 4 == 1) {
        /* candidates that stop at the end of the first container, below
         * points of the range in the next: those probe bit top + 1 */
        roaring_bitmap_remove_range(cand, 65536, 1u << 20);
        roaring_bitmap_add(cand, 65535);
      } else if (!roaring_bitmap_is_empty(want)) {
        roaring_bitmap_add(cand, roaring_bitmap_maximum(want));
      }
      if (roaring_bitmap_get_cardinality(cand) < points) small++;
      else large++;
      roaring_bitmap_t *got = roaring_bitmap_create();
      CU_ASSERT_EQUAL(ixia_points_collect(p, lo, hi, got), points);
      CU_ASSERT_TRUE(roaring_bitmap_equals(got, want));
      CU_ASSERT_EQUAL(ixia_points_count(p, lo, hi), points);
      roaring_bitmap_t *expect = roaring_bitmap_and(cand, want);
      CU_ASSERT_EQUAL(ixia_points_filter(p, lo, hi, cand), points);
      CU_ASSERT_TRUE(roaring_bitmap_equals(cand, expect));
      roaring_bitmap_free(want);
      roaring_bitmap_free(cand);
      roaring_bitmap_free(got);
      roaring_bitmap_free(expect);
    }
  }
  CU_ASSERT_TRUE(small > 200 && large > 200); /* both filter paths ran */
  /* Whole leaves emptied: every point with a key up to 300 removed. */
  GPtrArray *gone = g_ptr_array_new();
  GHashTableIter it;
  gpointer kk;
  g_hash_table_iter_init(&it, set);
  while (g_hash_table_iter_next(&it, &kk, NULL))
    if (GPOINTER_TO_SIZE(kk) >> 20 <= 300) g_ptr_array_add(gone, kk);
  CU_ASSERT_TRUE(gone->len > 2000);
  for (guint i = 0; i < gone->len; i++) {
    gsize pk = GPOINTER_TO_SIZE(gone->pdata[i]);
    ixia_point_change_t c = {pk >> 20, (guint32)(pk & 0xfffff), FALSE};
    ixia_points_update(p, &c, 1);
    g_hash_table_remove(set, gone->pdata[i]);
  }
  points_check_ranges(p, set, r, 40);
  /* Loaded whole (as at open), then changed. */
  GPtrArray *sorted = g_ptr_array_new();
  g_hash_table_iter_init(&it, set);
  while (g_hash_table_iter_next(&it, &kk, NULL)) g_ptr_array_add(sorted, kk);
  g_ptr_array_sort(sorted, point_key_cmp);
  guint64 *keys = g_new(guint64, sorted->len);
  guint32 *ids = g_new(guint32, sorted->len);
  for (guint i = 0; i < sorted->len; i++) {
    keys[i] = GPOINTER_TO_SIZE(sorted->pdata[i]) >> 20;
    ids[i] = (guint32)(GPOINTER_TO_SIZE(sorted->pdata[i]) & 0xfffff);
  }
  ixia_points_t *loaded = ixia_points_new();
  ixia_points_load(loaded, keys, ids, sorted->len);
  points_check_ranges(loaded, set, r, 20);
  for (int i = 0; i < 3000; i++) {
    guint64 key = (guint64)g_rand_int_range(r, 0, 1001);
    guint32 id = (guint32)g_rand_int_range(r, 0, 70000);
    gboolean add = g_rand_boolean(r);
    if (!add && i % 2) key = keys[i % sorted->len], id = ids[i % sorted->len]; /* a point that is there */
    ixia_point_change_t c = {key, id, add};
    ixia_points_update(loaded, &c, 1);
    gpointer pk = GSIZE_TO_POINTER((gsize)(key << 20 | id));
    if (add) g_hash_table_add(set, pk);
    else g_hash_table_remove(set, pk);
  }
  points_check_ranges(loaded, set, r, 40);
  g_free(keys);
  g_free(ids);
  g_ptr_array_free(sorted, TRUE);
  g_ptr_array_free(gone, TRUE);
  ixia_points_destroy(loaded);
  g_hash_table_destroy(set);
  ixia_points_destroy(p);

  /* Fewer candidates than points, the candidates in a bitset container
   * and in runs: 30,000 points over ids 0..29,999, every id in range. */
  p = ixia_points_new();
  ixia_point_change_t *all = g_new(ixia_point_change_t, 30000);
  for (guint32 id = 0; id < 30000; id++)
    all[id] = (ixia_point_change_t){(guint64)g_rand_int_range(r, 0, 100), id, TRUE};
  ixia_points_update(p, all, 30000);
  for (int kind = 0; kind < 2; kind++) {
    roaring_bitmap_t *cand = roaring_bitmap_create();
    if (kind == 0) {
      for (guint32 id = 0; id < 20000; id += 3) roaring_bitmap_add(cand, id); /* 6,667 in one container */
    } else {
      roaring_bitmap_add_range(cand, 1000, 9000);
      roaring_bitmap_add_range(cand, 25000, 26000);
      roaring_bitmap_run_optimize(cand);
    }
    roaring_bitmap_t *expect = roaring_bitmap_create();
    for (guint32 id = 0; id < 30000; id++)
      if (all[id].key <= 49 && roaring_bitmap_contains(cand, id)) roaring_bitmap_add(expect, id);
    CU_ASSERT_EQUAL(ixia_points_filter(p, 0, 49, cand), ixia_points_count(p, 0, 49));
    CU_ASSERT_TRUE(roaring_bitmap_equals(cand, expect));
    roaring_bitmap_free(cand);
    roaring_bitmap_free(expect);
  }
  g_free(all);
  ixia_points_destroy(p);
  g_rand_free(r);
}

/* Bitmaps built whole from sorted ids (ixia_idx_bm_add_sorted) against
 * roaring_bitmap_add_many: repeats, containers of one value, of exactly
 * 4,096 and 4,097 values (the array/bitset edge), ids up to 2^32 - 1, into
 * an empty bitmap and into one that already holds ids. */
static gint u32_order(gconstpointer x, gconstpointer y) {
  guint32 a = *(const guint32 *)x, b = *(const guint32 *)y;
  return a < b ? -1 : a > b;
}

static void test_bitmap_from_sorted_ids(void) {
  GRand *r = g_rand_new_with_seed(11);
  for (int round = 0; round < 60; round++) {
    GArray *a = g_array_new(FALSE, FALSE, sizeof(guint32));
    guint containers = (guint)g_rand_int_range(r, 1, 6);
    for (guint c = 0; c < containers; c++) {
      guint32 key = (guint32)g_rand_int_range(r, 0, 8) + (round % 7 == 0 ? 65528 : 0);
      guint n = round % 5 == 0 ? 4096 + (guint)(round % 2) : (guint)g_rand_int_range(r, 1, 9000);
      for (guint i = 0; i < n; i++) {
        guint32 low = round % 5 == 0 ? i : (guint32)g_rand_int_range(r, 0, 65536);
        guint32 id = key << 16 | low;
        g_array_append_val(a, id);
        if (g_rand_int_range(r, 0, 10) == 0) g_array_append_val(a, id); /* a repeat */
      }
    }
    g_array_sort(a, u32_order);
    const guint32 *ids = (const guint32 *)(void *)a->data;
    roaring_bitmap_t *want = roaring_bitmap_create(), *got = roaring_bitmap_create();
    if (round % 3 == 1) {
      /* Into a bitmap holding ids already. */
      for (guint32 i = 0; i < 3000; i++) roaring_bitmap_add(want, i * 97), roaring_bitmap_add(got, i * 97);
    }
    roaring_bitmap_add_many(want, a->len, ids);
    ixia_idx_bm_add_sorted(got, ids, a->len);
    CU_ASSERT_TRUE(roaring_bitmap_equals(want, got));
    CU_ASSERT_EQUAL(roaring_bitmap_get_cardinality(got), roaring_bitmap_get_cardinality(want));
    /* The built bitmap goes on working as any other. */
    roaring_bitmap_add(got, 5);
    roaring_bitmap_add(want, 5);
    CU_ASSERT_TRUE(roaring_bitmap_equals(want, got));
    roaring_bitmap_free(want);
    roaring_bitmap_free(got);
    g_array_free(a, TRUE);
  }
  roaring_bitmap_t *b = roaring_bitmap_create();
  ixia_idx_bm_add_sorted(b, NULL, 0);
  CU_ASSERT_TRUE(roaring_bitmap_is_empty(b));
  roaring_bitmap_free(b);
  g_rand_free(r);
}

int main(void) {
  dir = ixt_tmpdir();
  cfg = ixia_config_new();
  ixia_config_set(cfg, "index.max_values_per_field", "50", NULL);
  ixia_config_set(cfg, "index.block_cache_mb", "64", NULL);
  ixia_config_set(cfg, "index.write_buffer_mb", "16", NULL);
  ixia_query_limits_from_config(cfg, &lim);
  lim.track_total_hits = G_MAXUINT64; /* exact totals, to compare with brute force */
  const char *b = g_getenv("IXIA_INDEX_BENCH");
  if (b && atoi(b) > 0) {
    ixia_config_set(cfg, "index.write_buffer_mb", "64", NULL);
    bench((guint)atoi(b));
    ixia_config_destroy(cfg);
    return 0;
  }
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("index", NULL, NULL);
  IXT_ADD(s, test_merge_operands);
  IXT_ADD(s, test_column_operands);
  IXT_ADD(s, test_points_vs_brute_force);
  IXT_ADD(s, test_bitmap_from_sorted_ids);
  IXT_ADD(s, test_random_vs_brute_force);
  IXT_ADD(s, test_fused_terms_pass);
  IXT_ADD(s, test_fused_keyed_cells);
  IXT_ADD(s, test_exact_sum_carries);
  IXT_ADD(s, test_delete_removes_everywhere);
  IXT_ADD(s, test_stale_after_schema_change);
  IXT_ADD(s, test_hit_records_follow_writes);
  IXT_ADD(s, test_hits_settled_across_publish);
  IXT_ADD(s, test_multi_values_across_publish);
  IXT_ADD(s, test_positions_persist);
  IXT_ADD(s, test_failed_events);
  IXT_ADD(s, test_limits);
  IXT_ADD(s, test_cache_budget);
  IXT_ADD(s, test_sorted_paging_under_writes);
  IXT_ADD(s, test_sort_history_expires);
  IXT_ADD(s, test_sorted_bounded);
  int rc = ixt_run();
  ixia_config_destroy(cfg);
  g_free(dir);
  return rc;
}
