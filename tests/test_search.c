/* Search end to end, differential: the whole pipeline runs as real processes
 * (memcached, ixia-devkafka, ixia-replication-sink, one or two ixia-indexer
 * shards, ixia-query-api). Random puts, upserts and deletes go through the
 * API while the test keeps its own model of every document; then hundreds of
 * random queries built from every filter and aggregation kind run through
 * the API, page by page, and must equal a brute-force evaluation over the
 * model (which is first checked to equal the truth store):
 *   - the union of all pages is exactly the matching keys, without repeats;
 *   - every hit carries the document's current version and content;
 *   - total and every aggregation equal the brute-force figures. */
#include <stdatomic.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "client.h"
#include "json.h"
#include "kafka_support.h"
#include "query.h"
#include "recovery.h"
#include "schema.h"
#include "support.h"
#include "timeutil.h"

#define NS "shop"
#define TABLE "products"

static const char *SCHEMA =
    "{\"namespace\":\"shop\",\"table\":\"products\",\"indexes\":["
    "{\"field\":\"category\",\"type\":\"keyword\"},{\"field\":\"brand\",\"type\":\"keyword\"},"
    "{\"field\":\"tags\",\"type\":\"keyword\"},{\"field\":\"seller.country\",\"type\":\"keyword\"},"
    "{\"field\":\"price\",\"type\":\"double\"},{\"field\":\"stock\",\"type\":\"long\"},"
    "{\"field\":\"title\",\"type\":\"text\",\"analyzer\":\"english\",\"positions\":true},"
    "{\"field\":\"active\",\"type\":\"bool\"},"
    "{\"field\":\"updated_at\",\"type\":\"timestamp\"},"
    "{\"field\":\"variants.color\",\"type\":\"keyword\"},{\"field\":\"variants.qty\",\"type\":\"long\"}]}";

static const char *WORDS[] = {"red", "blue", "green", "large", "small", "smart",
                              "eco", "pro", "mini", "classic", "soft", "heavy"};
static const char *COUNTRIES[] = {"US", "CA", "DE", "FR", "JP"};

typedef struct {
  ixt_stack_t st;
  ixia_client_t *client;
} search_stack_t;

static gboolean stack_start(search_stack_t *s, guint shards) {
  s->client = NULL;
  if (!ixt_stack_start(&s->st, shards, NULL)) return FALSE;
  ixia_error_t *e = NULL;
  s->client = ixia_client_new(s->st.api.addr, &e);
  gboolean ok = s->client && ixia_client_apply_schema(s->client, SCHEMA, NULL, &e);
  if (e) fprintf(stderr, "\n  stack: %s\n", e->message);
  ixia_error_destroy(e);
  return ok;
}

static void stack_stop(search_stack_t *s) {
  ixia_client_destroy(s->client);
  CU_ASSERT_TRUE(ixt_stack_stop(&s->st));
}

/* ---------- the model: what the truth store must hold ---------- */

typedef struct {
  GHashTable *docs;     /* key -> cJSON* (current document) */
  GHashTable *versions; /* key -> gint64* */
  gint64 last_version;
} model_t;

static void model_init(model_t *m) {
  m->docs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)cJSON_Delete);
  m->versions = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  m->last_version = 0;
}

static void model_clear(model_t *m) {
  g_hash_table_destroy(m->docs);
  g_hash_table_destroy(m->versions);
}

static void model_set_version(model_t *m, const char *key, gint64 v) {
  g_hash_table_replace(m->versions, g_strdup(key), g_memdup2(&v, sizeof v));
  m->last_version = MAX(m->last_version, v);
}

static cJSON *random_doc(GRand *r, gboolean partial) {
  cJSON *d = cJSON_CreateObject();
  /* Each field is left out now and then: "missing" must work everywhere. */
#define MAYBE(p) (g_rand_int_range(r, 0, 100) < (partial ? 35 : (p)))
  char buf[64];
  if (MAYBE(90)) {
    snprintf(buf, sizeof buf, "cat%02d", g_rand_int_range(r, 0, 8));
    cJSON_AddStringToObject(d, "category", buf);
  }
  if (MAYBE(85)) {
    /* Now and then the empty keyword, a value like any other. */
    int b = g_rand_int_range(r, 0, 31);
    if (b < 30) snprintf(buf, sizeof buf, "b%02d", b);
    else buf[0] = '\0';
    cJSON_AddStringToObject(d, "brand", buf);
  }
  if (MAYBE(80)) {
    cJSON *tags = cJSON_AddArrayToObject(d, "tags");
    int n = g_rand_int_range(r, 0, 5);
    for (int i = 0; i < n; i++) {
      snprintf(buf, sizeof buf, "t%d", g_rand_int_range(r, 0, 20));
      cJSON_AddItemToArray(tags, cJSON_CreateString(buf));
    }
  }
  if (MAYBE(85)) {
    cJSON *seller = cJSON_AddObjectToObject(d, "seller");
    cJSON_AddStringToObject(seller, "country", COUNTRIES[g_rand_int_range(r, 0, 5)]);
  }
  if (MAYBE(90)) cJSON_AddNumberToObject(d, "price", g_rand_int_range(r, 0, 10000) / 100.0);
  if (MAYBE(80)) cJSON_AddNumberToObject(d, "stock", g_rand_int_range(r, -5, 50));
  if (MAYBE(85)) {
    GString *t = g_string_new(NULL);
    int n = g_rand_int_range(r, 1, 5);
    for (int i = 0; i < n; i++) {
      const char *w = WORDS[g_rand_int_range(r, 0, G_N_ELEMENTS(WORDS))];
      /* Mixed case and punctuation: the tokenizer must fold them. */
      if (g_rand_boolean(r)) g_string_append_printf(t, "%s%c", w, ' ');
      else g_string_append_printf(t, "%c%s, ", g_ascii_toupper(w[0]), w + 1);
    }
    cJSON_AddStringToObject(d, "title", t->str);
    g_string_free(t, TRUE);
  }
  if (MAYBE(70)) cJSON_AddBoolToObject(d, "active", g_rand_boolean(r));
  if (MAYBE(80)) {
    gint64 t = 1700000000 + g_rand_int_range(r, 0, 1000);
    if (g_rand_boolean(r)) {
      /* RFC 3339 at some offset: the same instant as epoch seconds. */
      char *iso = ixia_time_format(t, g_rand_int_range(r, -4, 5) * 3600);
      cJSON_AddStringToObject(d, "updated_at", iso);
      g_free(iso);
    } else {
      cJSON_AddNumberToObject(d, "updated_at", (double)t);
    }
  }
  if (MAYBE(60)) {
    /* An array of objects: each element's color and qty are values of
     * variants.color and variants.qty. */
    cJSON *vs = cJSON_AddArrayToObject(d, "variants");
    int n = g_rand_int_range(r, 0, 4);
    for (int i = 0; i < n; i++) {
      cJSON *v = cJSON_CreateObject();
      cJSON_AddStringToObject(v, "color", WORDS[g_rand_int_range(r, 0, 4)]);
      if (g_rand_boolean(r)) cJSON_AddNumberToObject(v, "qty", g_rand_int_range(r, 0, 10));
      cJSON_AddItemToArray(vs, v);
    }
  }
  if (MAYBE(50)) cJSON_AddStringToObject(d, "note", "not indexed");
#undef MAYBE
  return d;
}

/* Applies n random writes through the API, keeping the model in step. */
static void random_writes(search_stack_t *s, model_t *m, GRand *r, int n, int keys) {
  int failures = 0;
  for (int i = 0; i < n; i++) {
    char key[32];
    snprintf(key, sizeof key, "p%04d", g_rand_int_range(r, 0, keys));
    int kind = g_rand_int_range(r, 0, 100);
    gint64 v = 0;
    ixia_error_t *e = NULL;
    gboolean ok;
    if (kind < 12) {
      ok = ixia_client_delete(s->client, NS, TABLE, key, -1, &v, &e);
      if (ok) g_hash_table_remove(m->docs, key);
    } else {
      gboolean upsert = kind < 35;
      cJSON *doc = random_doc(r, upsert);
      char *json = ixia_json_print(doc);
      ok = upsert ? ixia_client_upsert(s->client, NS, TABLE, key, json, -1, &v, &e)
                  : ixia_client_put(s->client, NS, TABLE, key, json, -1, &v, &e);
      g_free(json);
      if (ok && upsert && g_hash_table_contains(m->docs, key)) {
        cJSON *cur = g_hash_table_lookup(m->docs, key);
        for (cJSON *f = doc->child; f; f = f->next) {
          cJSON_DeleteItemFromObjectCaseSensitive(cur, f->string);
          cJSON_AddItemToObject(cur, f->string, cJSON_Duplicate(f, TRUE));
        }
        cJSON_Delete(doc);
      } else if (ok) {
        g_hash_table_replace(m->docs, g_strdup(key), doc);
      } else {
        cJSON_Delete(doc);
      }
    }
    if (ok) model_set_version(m, key, v);
    else failures++;
    if (e && failures < 3) fprintf(stderr, "\n  write %s: %s\n", key, e->message);
    ixia_error_destroy(e);
  }
  CU_ASSERT_EQUAL(failures, 0);
}

/* The model must equal the truth store, or the differential proves nothing. */
static void check_model_against_store(search_stack_t *s, model_t *m, int keys) {
  int mismatches = 0;
  for (int k = 0; k < keys; k++) {
    char key[32];
    snprintf(key, sizeof key, "p%04d", k);
    gboolean found = FALSE;
    gint64 v = 0;
    char *json = NULL;
    CU_ASSERT_TRUE(ixia_client_get(s->client, NS, TABLE, key, NULL, &found, &v, &json, NULL));
    cJSON *want = g_hash_table_lookup(m->docs, key);
    cJSON *got = json ? cJSON_Parse(json) : NULL;
    if (found != (want != NULL) || (want && !cJSON_Compare(want, got, TRUE))) mismatches++;
    cJSON_Delete(got);
    g_free(json);
  }
  CU_ASSERT_EQUAL(mismatches, 0);
}

/* ---------- random queries ---------- */

static cJSON *random_value(GRand *r, const char *field) {
  char buf[32];
  if (!strcmp(field, "category")) snprintf(buf, sizeof buf, "cat%02d", g_rand_int_range(r, 0, 9));
  else if (!strcmp(field, "brand")) snprintf(buf, sizeof buf, "b%02d", g_rand_int_range(r, 0, 31));
  else if (!strcmp(field, "tags")) snprintf(buf, sizeof buf, "t%d", g_rand_int_range(r, 0, 21));
  else if (!strcmp(field, "seller.country")) return cJSON_CreateString(COUNTRIES[g_rand_int_range(r, 0, 5)]);
  else if (!strcmp(field, "title")) return cJSON_CreateString(WORDS[g_rand_int_range(r, 0, G_N_ELEMENTS(WORDS))]);
  else if (!strcmp(field, "price")) return cJSON_CreateNumber(g_rand_int_range(r, 0, 10000) / 100.0);
  else if (!strcmp(field, "stock")) return cJSON_CreateNumber(g_rand_int_range(r, -6, 52));
  else if (!strcmp(field, "active")) return cJSON_CreateBool(g_rand_boolean(r));
  else if (!strcmp(field, "variants.color")) return cJSON_CreateString(WORDS[g_rand_int_range(r, 0, 5)]);
  else if (!strcmp(field, "variants.qty")) return cJSON_CreateNumber(g_rand_int_range(r, -1, 11));
  else {
    gint64 t = 1700000000 + g_rand_int_range(r, -10, 1010);
    if (g_rand_boolean(r)) return cJSON_CreateNumber((double)t);
    char *iso = ixia_time_format(t, 3600);
    cJSON *j = cJSON_CreateString(iso);
    g_free(iso);
    return j;
  }
  return cJSON_CreateString(buf);
}

static const char *KEYWORDS[] = {"category", "brand", "tags", "seller.country", "variants.color"};
static const char *NUMERIC[] = {"price", "stock", "updated_at", "variants.qty"};
static const char *ALL[] = {"category", "brand", "tags", "seller.country", "price",
                            "stock", "title", "active", "updated_at", "variants.color",
                            "variants.qty"};

#define PICK(r, a) (a)[g_rand_int_range((r), 0, G_N_ELEMENTS(a))]

static cJSON *leaf(const char *kind, const char *field, cJSON *arg) {
  cJSON *inner = cJSON_CreateObject();
  cJSON_AddItemToObject(inner, field, arg);
  cJSON *f = cJSON_CreateObject();
  cJSON_AddItemToObject(f, kind, inner);
  return f;
}

static cJSON *random_filter(GRand *r, int depth) {
  int kind = g_rand_int_range(r, 0, depth > 0 ? 11 : 8);
  switch (kind) {
    case 0:
    case 1: {
      const char *f = PICK(r, ALL);
      return leaf("term", f, random_value(r, f));
    }
    case 2: {
      const char *f = PICK(r, ALL);
      cJSON *vals = cJSON_CreateArray();
      int n = g_rand_int_range(r, 1, 5);
      for (int i = 0; i < n; i++) cJSON_AddItemToArray(vals, random_value(r, f));
      return leaf("in", f, vals);
    }
    case 3: {
      gboolean kw = g_rand_int_range(r, 0, 4) == 0;
      const char *f = kw ? PICK(r, KEYWORDS) : PICK(r, NUMERIC);
      cJSON *b = cJSON_CreateObject();
      cJSON *lo = random_value(r, f), *hi = random_value(r, f);
      if (g_rand_int_range(r, 0, 4)) cJSON_AddItemToObject(b, g_rand_boolean(r) ? "gt" : "gte", lo);
      else cJSON_Delete(lo);
      if (g_rand_int_range(r, 0, 4) || !b->child)
        cJSON_AddItemToObject(b, g_rand_boolean(r) ? "lt" : "lte", hi);
      else cJSON_Delete(hi);
      return leaf("range", f, b);
    }
    case 4: {
      const char *f = g_rand_boolean(r) ? PICK(r, KEYWORDS) : "title";
      cJSON *v = random_value(r, f);
      char *p = g_strndup(v->valuestring, (gsize)g_rand_int_range(r, 1, (int)strlen(v->valuestring) + 1));
      cJSON_Delete(v);
      cJSON *out = leaf("prefix", f, cJSON_CreateString(p));
      g_free(p);
      return out;
    }
    case 5: {
      cJSON *f = cJSON_CreateObject();
      cJSON_AddStringToObject(f, "exists", PICK(r, ALL));
      return f;
    }
    case 6: {
      char text[64];
      snprintf(text, sizeof text, "%s %s", PICK(r, WORDS), g_rand_boolean(r) ? PICK(r, WORDS) : "");
      if (g_rand_boolean(r)) text[0] = g_ascii_toupper(text[0]); /* queries fold case too */
      int how = g_rand_int_range(r, 0, 4);
      if (how == 2) return leaf("match_phrase", "title", cJSON_CreateString(text));
      if (how == 3) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "query", text);
        cJSON_AddStringToObject(o, "operator", "or");
        return leaf("match", "title", o);
      }
      return leaf("match", "title", cJSON_CreateString(text));
    }
    case 7: {
      const char *f = PICK(r, NUMERIC);
      return leaf("term", f, random_value(r, f));
    }
    case 8:
    case 9: {
      cJSON *arr = cJSON_CreateArray();
      int n = g_rand_int_range(r, 1, 4);
      for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, random_filter(r, depth - 1));
      cJSON *f = cJSON_CreateObject();
      cJSON_AddItemToObject(f, kind == 8 ? "and" : "or", arr);
      return f;
    }
    default: {
      cJSON *f = cJSON_CreateObject();
      cJSON_AddItemToObject(f, "not", random_filter(r, depth - 1));
      return f;
    }
  }
}

static cJSON *random_aggs(GRand *r) {
  cJSON *aggs = cJSON_CreateObject();
  cJSON_AddItemToObject(aggs, "n", cJSON_CreateObject());
  cJSON_AddItemToObject(cJSON_GetObjectItem(aggs, "n"), "count", cJSON_CreateObject());
  const char *metrics[] = {"sum", "avg", "min", "max"};
  for (int i = 0; i < 4; i++) {
    if (!g_rand_boolean(r)) continue;
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, metrics[i], PICK(r, NUMERIC));
    cJSON_AddItemToObject(aggs, metrics[i], a);
  }
  if (g_rand_boolean(r)) {
    const char *fields[] = {"category", "brand", "tags", "active", "stock", "seller.country", "variants.color"};
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "field", PICK(r, fields));
    cJSON_AddNumberToObject(t, "size", g_rand_int_range(r, 1, 12));
    cJSON *sub = cJSON_AddObjectToObject(t, "aggs");
    cJSON *mx = cJSON_AddObjectToObject(sub, "top");
    cJSON_AddStringToObject(mx, "max", "price");
    cJSON *av = cJSON_AddObjectToObject(sub, "mean");
    cJSON_AddStringToObject(av, "avg", PICK(r, NUMERIC));
    cJSON *a = cJSON_CreateObject();
    cJSON_AddItemToObject(a, "terms", t);
    cJSON_AddItemToObject(aggs, "groups", a);
  }
  if (g_rand_boolean(r)) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "field", PICK(r, NUMERIC));
    cJSON *pc = cJSON_AddArrayToObject(p, "percents");
    cJSON_AddItemToArray(pc, cJSON_CreateNumber(50));
    cJSON_AddItemToArray(pc, cJSON_CreateNumber(g_rand_int_range(r, 51, 101)));
    cJSON *a = cJSON_CreateObject();
    cJSON_AddItemToObject(a, "percentiles", p);
    cJSON_AddItemToObject(aggs, "pct", a);
  }
  if (g_rand_boolean(r)) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "cardinality", PICK(r, KEYWORDS));
    cJSON_AddItemToObject(aggs, "distinct", a);
  }
  /* The later kinds, written as JSON text. */
  static const char *const more[] = {
      "{\"stats\": \"price\"}",
      "{\"stats\": {\"field\": \"variants.qty\"}}",
      "{\"histogram\": {\"field\": \"price\", \"interval\": 7.5, \"offset\": 2, \"aggs\": {\"n\": {\"cardinality\": \"brand\"}}}}",
      "{\"histogram\": {\"field\": \"stock\", \"interval\": 5, \"min_doc_count\": 3}}",
      "{\"date_histogram\": {\"field\": \"updated_at\", \"calendar_interval\": \"minute\", \"time_zone\": \"+05:30\","
      " \"aggs\": {\"p\": {\"stats\": \"price\"}}}}",
      "{\"date_histogram\": {\"field\": \"updated_at\", \"fixed_interval\": \"90s\", \"offset\": \"7s\"}}",
      "{\"range\": {\"field\": \"price\", \"ranges\": [{\"to\": 10}, {\"key\": \"mid\", \"from\": 10, \"to\": 60},"
      " {\"from\": 40}], \"aggs\": {\"b\": {\"terms\": {\"field\": \"brand\", \"size\": 3}}}}}",
      "{\"filter\": {\"filter\": {\"term\": {\"active\": true}}, \"aggs\": {\"c\": {\"terms\": {\"field\": \"category\"}}}}}",
      "{\"filters\": {\"filters\": {\"cheap\": {\"range\": {\"price\": {\"lt\": 20}}}, \"red\": {\"match\": {\"title\": \"red\"}}},"
      " \"aggs\": {\"top\": {\"top_hits\": {\"size\": 2, \"sort\": [{\"stock\": \"desc\"}], \"fields\": [\"stock\"]}}}}}",
      "{\"top_hits\": {\"size\": 3, \"sort\": [{\"price\": {\"order\": \"desc\", \"missing\": \"last\"}}]}}",
      "{\"terms\": {\"field\": \"category\", \"size\": 3, \"aggs\": {\"cheapest\": {\"top_hits\": {\"size\": 1, \"sort\": [\"price\"]}}}}}",
  };
  for (guint i = 0; i < G_N_ELEMENTS(more); i++) {
    if (g_rand_int_range(r, 0, 3)) continue;
    char name[16];
    g_snprintf(name, sizeof name, "more%u", i);
    cJSON_AddItemToObject(aggs, name, cJSON_Parse(more[i]));
  }
  return aggs;
}

/* top_hits in an API response carry the document; brute force has none:
 * each must be the model's (projected when asked), then it is taken out. */
typedef struct {
  model_t *m;
  int bad;
} th_check_t;

static void check_top_hits_docs(const ixia_agg_t *g, cJSON *hits, void *ud) {
  th_check_t *c = ud;
  for (cJSON *h = hits->child; h; h = h->next) {
    cJSON *doc = cJSON_DetachItemFromObjectCaseSensitive(h, "doc");
    cJSON *want = g_hash_table_lookup(c->m->docs, cJSON_GetStringValue(cJSON_GetObjectItem(h, "key")));
    cJSON *proj = want && g->fields ? ixia_json_project(want, (const char *const *)g->fields, g_strv_length(g->fields), NULL) : NULL;
    if (!doc || !want || !cJSON_Compare(doc, proj ? proj : want, TRUE)) c->bad++;
    cJSON_Delete(proj);
    cJSON_Delete(doc);
  }
}

/* JSON equality with a relative tolerance on numbers (float sums may be
 * added in another order). */
static gboolean json_close(const cJSON *a, const cJSON *b) {
  if (!a || !b) return a == b;
  if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
    return fabs(a->valuedouble - b->valuedouble) <= 1e-9 * MAX(1.0, fabs(a->valuedouble));
  if ((a->type & 0xff) != (b->type & 0xff)) return FALSE;
  if (cJSON_IsObject(a) || cJSON_IsArray(a)) {
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return FALSE;
    for (const cJSON *x = a->child, *y = b->child; x && y; x = x->next, y = y->next) {
      const cJSON *other = cJSON_IsObject(a) ? cJSON_GetObjectItemCaseSensitive(b, x->string) : y;
      if (!json_close(x, other)) return FALSE;
    }
    return TRUE;
  }
  return cJSON_Compare(a, b, TRUE);
}

/* A random sort over the sortable fields (1 to 3 keys, random directions
 * and missing placement). */
static cJSON *random_sort(GRand *r, gboolean with_score) {
  static const char *F[] = {"category", "brand", "tags", "seller.country", "price", "stock",
                            "active", "updated_at", "variants.color", "variants.qty", "_score"};
  cJSON *arr = cJSON_CreateArray();
  int n = g_rand_int_range(r, 1, 4);
  gboolean used[G_N_ELEMENTS(F)] = {0};
  for (int i = 0; i < n; i++) {
    guint k = (guint)g_rand_int_range(r, 0, G_N_ELEMENTS(F) - (with_score ? 0 : 1));
    if (used[k]) continue;
    used[k] = TRUE;
    cJSON *o = cJSON_CreateObject();
    if (g_rand_boolean(r)) {
      cJSON_AddStringToObject(o, F[k], g_rand_boolean(r) ? "asc" : "desc");
    } else {
      cJSON *spec = cJSON_AddObjectToObject(o, F[k]);
      cJSON_AddStringToObject(spec, "order", g_rand_boolean(r) ? "asc" : "desc");
      cJSON_AddStringToObject(spec, "missing", g_rand_boolean(r) ? "first" : "last");
    }
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

typedef struct {
  const char *key;
  GPtrArray *vals;
} sdoc_t;

static gint sdoc_cmp(gconstpointer a, gconstpointer b, gpointer q) {
  const sdoc_t *x = a, *y = b;
  int c = ixia_sort_cmp_values(q, (GBytes *const *)x->vals->pdata, (GBytes *const *)y->vals->pdata);
  return c ? c : strcmp(x->key, y->key);
}

static ixia_schema_t *schema_lookup(const char *ns, const char *table, void *ud, ixia_error_t **err) {
  (void)ns;
  (void)table;
  (void)err;
  return ixia_schema_ref(ud);
}

static cJSON *run_query(search_stack_t *s, const cJSON *req, ixia_error_t **err) {
  char *text = ixia_json_print(req);
  char *resp = NULL;
  gboolean ok = ixia_client_query(s->client, text, &resp, err);
  g_free(text);
  cJSON *out = ok ? cJSON_Parse(resp) : NULL;
  g_free(resp);
  return out;
}

/* One random query, all of its pages, against brute force. Returns FALSE
 * (after printing the query) on any difference. */
/* One random query, all of its pages, against brute force. With one shard
 * the shard's BM25 statistics are the model's, so scores and _score sorts
 * are compared exactly; with more, each shard scores with its own. */
static gboolean check_query(search_stack_t *s, model_t *m, ixia_schema_t *schema, GRand *r,
                            ixia_query_limits_t *lim, guint shards) {
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "namespace", NS);
  cJSON_AddStringToObject(req, "table", TABLE);
  if (g_rand_int_range(r, 0, 10)) cJSON_AddItemToObject(req, "filter", random_filter(r, 3));
  cJSON_AddItemToObject(req, "aggs", random_aggs(r));
  int limit = g_rand_int_range(r, 1, 60);
  cJSON_AddNumberToObject(req, "limit", limit);
  gboolean sorted = g_rand_int_range(r, 0, 3) == 0;
  if (sorted) cJSON_AddItemToObject(req, "sort", random_sort(r, shards == 1));
  gboolean projected = g_rand_int_range(r, 0, 3) == 0;
  if (projected) {
    cJSON *f = cJSON_AddArrayToObject(req, "fields");
    cJSON_AddItemToArray(f, cJSON_CreateString("price"));
    cJSON_AddItemToArray(f, cJSON_CreateString("seller.country"));
  }
  char *req_text = ixia_json_print(req);

  /* Brute force over the model. */
  ixia_error_t *e = NULL;
  ixia_query_t *q = ixia_query_parse(req_text, strlen(req_text), schema_lookup, schema, lim, &e);
  if (!q) {
    fprintf(stderr, "\n  test built a bad query %s: %s\n", req_text, e->message);
    ixia_error_destroy(e);
    g_free(req_text);
    cJSON_Delete(req);
    return FALSE;
  }
  GHashTable *want = g_hash_table_new(g_str_hash, g_str_equal);
  ixia_aggs_t *aggs = ixia_aggs_new(q, lim);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, m->docs);
  while (g_hash_table_iter_next(&it, &k, &v))
    if (ixia_query_match_doc(q, v)) {
      g_hash_table_add(want, k);
      ixia_aggs_add_hit(aggs, v, k, *(gint64 *)g_hash_table_lookup(m->versions, k), 0.0, NULL);
    }
  cJSON *want_aggs = ixia_aggs_result_json(aggs);
  ixia_aggs_destroy(aggs);
  /* A sorted query's order: values, then key. */
  GArray *order = g_array_new(FALSE, FALSE, sizeof(sdoc_t));
  ixia_bm25_stats_t *st = ixia_bm25_stats_new(q);
  g_hash_table_iter_init(&it, m->docs);
  while (g_hash_table_iter_next(&it, NULL, &v)) ixia_bm25_stats_add(st, v);
  if (sorted) {
    g_hash_table_iter_init(&it, want);
    while (g_hash_table_iter_next(&it, &k, NULL)) {
      cJSON *doc = g_hash_table_lookup(m->docs, k);
      sdoc_t d = {k, ixia_sort_values_of_doc(q, doc, ixia_query_score_doc(q, st, doc))};
      g_array_append_val(order, d);
    }
    g_array_sort_with_data(order, sdoc_cmp, q);
  }
  guint at = 0;

  gboolean good = TRUE;
  GHashTable *got = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  const char *why = NULL;
  for (int page = 0; good && page < 10000; page++) {
    cJSON *resp = run_query(s, req, &e);
    if (!resp) {
      fprintf(stderr, "\n  query failed: %s\n", e ? e->message : "?");
      ixia_error_destroy(e);
      e = NULL;
      good = FALSE;
      break;
    }
    const cJSON *total = cJSON_GetObjectItem(resp, "total");
    if (!cJSON_IsNumber(total) || (guint)total->valuedouble != g_hash_table_size(want))
      why = "total", good = FALSE;
    th_check_t thc = {m, 0};
    ixia_aggs_foreach_top_hits(q, cJSON_GetObjectItem(resp, "aggs"), check_top_hits_docs, &thc);
    if (thc.bad) why = "top_hits documents", good = FALSE;
    if (good && !json_close(want_aggs, cJSON_GetObjectItem(resp, "aggs"))) {
      char *a = ixia_json_print(want_aggs), *b = ixia_json_print(cJSON_GetObjectItem(resp, "aggs"));
      fprintf(stderr, "\n  aggs differ:\n  want %s\n  got  %s\n", a, b);
      g_free(a);
      g_free(b);
      why = "aggs", good = FALSE;
    }
    const cJSON *hits = cJSON_GetObjectItem(resp, "hits");
    if (cJSON_GetArraySize(hits) > limit) why = "page over limit", good = FALSE;
    for (const cJSON *h = hits ? hits->child : NULL; good && h; h = h->next) {
      const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(h, "key"));
      const cJSON *doc = cJSON_GetObjectItem(h, "doc");
      if (!key || g_hash_table_contains(got, key)) {
        why = "hit repeated across pages", good = FALSE;
        break;
      }
      g_hash_table_add(got, g_strdup(key));
      if (q->scoring) {
        /* Hits of a query with match clauses carry their BM25 score. */
        const cJSON *sc = cJSON_GetObjectItem(h, "score");
        double want_score = ixia_query_score_doc(q, st, g_hash_table_lookup(m->docs, key));
        if (!cJSON_IsNumber(sc) ||
            (shards == 1 && fabs(sc->valuedouble - want_score) > 1e-9 * MAX(1.0, want_score))) {
          fprintf(stderr, "\n  %s: score %g, brute %g\n", key, cJSON_GetNumberValue(sc), want_score);
          why = "score", good = FALSE;
        }
      }
      if (sorted) {
        /* In the brute-force order, showing the brute-force sort values. */
        const sdoc_t *d = at < order->len ? &g_array_index(order, sdoc_t, at) : NULL;
        at++;
        if (!d || strcmp(d->key, key) != 0) {
          fprintf(stderr, "\n  hit %u is %s, expected %s\n", at - 1, key, d ? d->key : "(none)");
          why = "sort order", good = FALSE;
          break;
        }
        cJSON *sv = cJSON_CreateArray();
        for (guint i = 0; i < q->n_sort; i++) cJSON_AddItemToArray(sv, ixia_sort_value_json(&q->sort[i], d->vals->pdata[i]));
        if (!json_close(sv, cJSON_GetObjectItem(h, "sort"))) why = "sort values", good = FALSE;
        cJSON_Delete(sv);
      }
      gint64 *mv = g_hash_table_lookup(m->versions, key);
      cJSON *mdoc = g_hash_table_lookup(m->docs, key);
      if (!mv || !mdoc || (gint64)cJSON_GetNumberValue(cJSON_GetObjectItem(h, "version")) != *mv)
        why = "hit version", good = FALSE;
      else if (!projected && !cJSON_Compare(doc, mdoc, TRUE))
        why = "hit document", good = FALSE;
      else if (projected && !json_close(cJSON_GetObjectItem(doc, "price"),
                                        cJSON_GetObjectItem(mdoc, "price")))
        why = "projected hit", good = FALSE;
    }
    const cJSON *next = cJSON_GetObjectItem(resp, "next");
    gboolean more = cJSON_IsString(next);
    if (more) {
      cJSON_DeleteItemFromObjectCaseSensitive(req, "after");
      cJSON_AddStringToObject(req, "after", next->valuestring);
    }
    cJSON_Delete(resp);
    if (!more) break;
  }
  if (good && g_hash_table_size(got) != g_hash_table_size(want)) why = "hit set", good = FALSE;
  g_hash_table_iter_init(&it, want);
  while (good && g_hash_table_iter_next(&it, &k, NULL))
    if (!g_hash_table_contains(got, k)) why = "missing hit", good = FALSE;
  if (!good)
    fprintf(stderr, "\n  differs (%s): %s\n  want %u hits, got %u\n", why ? why : "error", req_text,
            g_hash_table_size(want), g_hash_table_size(got));
  g_hash_table_destroy(got);
  g_hash_table_destroy(want);
  for (guint i = 0; i < order->len; i++) g_ptr_array_unref(g_array_index(order, sdoc_t, i).vals);
  g_array_free(order, TRUE);
  ixia_bm25_stats_free(st);
  cJSON_Delete(want_aggs);
  ixia_query_destroy(q);
  g_free(req_text);
  cJSON_Delete(req);
  return good;
}

/* Waits for the index through min_version: read-your-writes search. */
static gboolean catch_up(search_stack_t *s, gint64 version) {
  char req[256];
  snprintf(req, sizeof req,
           "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":0,\"min_version\":%" G_GINT64_FORMAT
           ",\"timeout_ms\":60000}",
           version);
  char *resp = NULL;
  ixia_error_t *e = NULL;
  gboolean ok = ixia_client_query(s->client, req, &resp, &e);
  if (!ok) fprintf(stderr, "\n  catch up to %" G_GINT64_FORMAT ": %s\n", version, e->message);
  ixia_error_destroy(e);
  g_free(resp);
  return ok;
}

static void differential(guint shards) {
  search_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, shards));
  ixia_schema_t *schema = ixia_schema_parse(SCHEMA, strlen(SCHEMA), NULL);
  ixia_query_limits_t lim;
  ixia_config_t *cfg = ixia_config_new();
  ixia_query_limits_from_config(cfg, &lim);
  ixia_config_destroy(cfg);
  model_t m;
  model_init(&m);
  GRand *r = g_rand_new_with_seed(20261122u + shards);
  const int keys = 700;
  /* Two rounds: the second rewrites and deletes documents the index holds. */
  for (int round = 0; round < 2; round++) {
    random_writes(&s, &m, r, 1800, keys);
    check_model_against_store(&s, &m, keys);
    CU_ASSERT_TRUE_FATAL(catch_up(&s, m.last_version));
    int bad = 0;
    for (int i = 0; i < 150 && bad < 3; i++)
      if (!check_query(&s, &m, schema, r, &lim, shards)) bad++;
    CU_ASSERT_EQUAL(bad, 0);
  }
  g_rand_free(r);
  model_clear(&m);
  ixia_schema_unref(schema);
  stack_stop(&s);
}

static void test_differential_one_shard(void) { differential(1); }
static void test_differential_two_shards(void) { differential(2); }

static gboolean query_total_is(search_stack_t *s, const char *filter, gint64 min_version, guint64 expect) {
  char *req = g_strdup_printf("{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":0,"
                              "\"min_version\":%" G_GINT64_FORMAT ",\"filter\":%s}",
                              min_version, filter);
  char *resp = NULL;
  ixia_error_t *e = NULL;
  guint64 total = G_MAXUINT64;
  if (ixia_client_query(s->client, req, &resp, &e)) {
    cJSON *o = cJSON_Parse(resp);
    total = (guint64)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "total"));
    cJSON_Delete(o);
  } else {
    fprintf(stderr, "\n  query %s: %s\n", req, e->message);
  }
  ixia_error_destroy(e);
  g_free(resp);
  g_free(req);
  if (total != expect)
    fprintf(stderr, "\n  %s: total %" G_GUINT64_FORMAT ", expected %" G_GUINT64_FORMAT "\n", filter,
            total, expect);
  return total == expect;
}

/* The API's count of hits it matched again on the stored document. */
static double hits_rechecked(ixia_client_t *c) {
  char *json = NULL;
  CU_ASSERT_TRUE_FATAL(ixia_client_stats(c, &json, NULL));
  cJSON *o = cJSON_Parse(json);
  double d = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "query_hits_rechecked"));
  cJSON_Delete(o);
  g_free(json);
  return d;
}

/* The keys of a query's hits (up to 100), comma-separated, in its order. */
static char *hit_keys_of(search_stack_t *s, const char *filter, gint64 min_version) {
  char *req = g_strdup_printf("{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":100,"
                              "\"fields\":[\"rating\"],\"min_version\":%" G_GINT64_FORMAT ",\"filter\":%s}",
                              min_version, filter);
  char *resp = NULL;
  CU_ASSERT_TRUE(ixia_client_query(s->client, req, &resp, NULL));
  g_free(req);
  cJSON *o = resp ? cJSON_Parse(resp) : NULL;
  g_free(resp);
  GString *keys = g_string_new(NULL);
  const cJSON *h;
  cJSON_ArrayForEach(h, cJSON_GetObjectItem(o, "hits"))
      g_string_append_printf(keys, "%s%s", keys->len ? "," : "", cJSON_GetStringValue(cJSON_GetObjectItem(h, "key")));
  cJSON_Delete(o);
  return g_string_free(keys, FALSE);
}

/* An index added to a live table covers new writes at once; the backfill
 * covers the documents written before, while writes go on. */
static void test_add_index_then_backfill(void) {
  search_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, 2));
  gint64 v = 0;
  char key[32], json[96];
  for (int i = 0; i < 300; i++) {
    snprintf(key, sizeof key, "old%03d", i);
    snprintf(json, sizeof json, "{\"category\":\"cat01\",\"rating\":%d.5}", i % 5);
    CU_ASSERT_TRUE(ixia_client_put(s.client, NS, TABLE, key, json, -1, &v, NULL));
  }
  char *schema2 = g_strdup(SCHEMA);
  char *at = strstr(schema2, "]}");
  *at = 0;
  char *with_rating = g_strdup_printf("%s,{\"field\":\"rating\",\"type\":\"double\"}]}", schema2);
  CU_ASSERT_TRUE_FATAL(ixia_client_apply_schema(s.client, with_rating, NULL, NULL));
  for (int i = 0; i < 40; i++) {
    snprintf(key, sizeof key, "new%03d", i);
    snprintf(json, sizeof json, "{\"category\":\"cat02\",\"rating\":%d}", i % 5);
    CU_ASSERT_TRUE(ixia_client_put(s.client, NS, TABLE, key, json, -1, &v, NULL));
  }
  const char *rated = "{\"exists\":\"rating\"}";
  /* New writes are indexed under the new field at once. (Old documents may
   * be too, when a shard happens to read them after the schema change from
   * another partition; only the backfill guarantees them.) */
  CU_ASSERT_TRUE(query_total_is(
      &s, "{\"and\":[{\"term\":{\"category\":\"cat02\"}},{\"exists\":\"rating\"}]}", v, 40));
  /* Before the backfill a shard may hold old documents without the new
   * field, and "not exists" matches them there; the API re-checks such hits
   * against the stored documents (on the members the filter reads), so none
   * comes back. */
  const char *unrated = "{\"and\":[{\"term\":{\"category\":\"cat01\"}},{\"not\":{\"exists\":\"rating\"}}]}";
  double rechecked = hits_rechecked(s.client);
  char *keys = hit_keys_of(&s, unrated, v);
  CU_ASSERT_STRING_EQUAL(keys, "");
  g_free(keys);
  CU_ASSERT_TRUE(hits_rechecked(s.client) > rechecked);
  /* A write racing the backfill must survive it. */
  CU_ASSERT_TRUE(ixia_client_put(s.client, NS, TABLE, "old007", "{\"rating\":99}", -1, &v, NULL));
  ixia_backfill_opts_t bo = {.batch = 64, .quiet = TRUE};
  ixia_error_t *e = NULL;
  cJSON *summary = ixia_recovery_backfill(s.st.api.addr, NS, TABLE, &bo, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(summary);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(summary, "documents")), 340);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(summary, "applied")), 340);
  cJSON_Delete(summary);
  CU_ASSERT_TRUE(query_total_is(&s, rated, v, 340));
  CU_ASSERT_TRUE(query_total_is(&s, "{\"range\":{\"rating\":{\"gte\":99}}}", v, 1));
  CU_ASSERT_TRUE(query_total_is(&s, "{\"term\":{\"category\":\"cat01\"}}", v, 299));
  /* Every document indexed under the new field: the shards vouch for "not"
   * again, and the API trusts their hits without matching them again. */
  CU_ASSERT_TRUE(ixia_client_put(s.client, NS, TABLE, "plain", "{\"category\":\"cat01\"}", -1, &v, NULL));
  gboolean trusted = FALSE; /* a batch published during a search makes it re-check: tries */
  for (int i = 0; i < 3 && !trusted; i++) {
    rechecked = hits_rechecked(s.client);
    keys = hit_keys_of(&s, unrated, v);
    CU_ASSERT_STRING_EQUAL(keys, "plain");
    g_free(keys);
    trusted = hits_rechecked(s.client) == rechecked;
  }
  CU_ASSERT_TRUE(trusted);
  /* Unknown tables are named. */
  summary = ixia_recovery_backfill(s.st.api.addr, NS, "nope", &bo, &e);
  CU_ASSERT_PTR_NULL(summary);
  CU_ASSERT_TRUE(e && e->code == IXIA_ENOTFOUND);
  ixia_error_destroy(e);
  g_free(with_rating);
  g_free(schema2);
  stack_stop(&s);
}

/* ---------- sorted paging while writers change the sorted field ---------- */

typedef struct {
  const char *addr;
  _Atomic gint stop;
  _Atomic gint writes;
  int keys;
  GMutex lock;
  GHashTable *deleted; /* keys deleted while paging */
} writer_t;

static gpointer writer_main(gpointer ud) {
  writer_t *w = ud;
  ixia_client_t *c = ixia_client_new(w->addr, NULL);
  GRand *r = g_rand_new_with_seed(5);
  int created = 0;
  while (c && !atomic_load(&w->stop)) {
    char key[32], doc[96];
    int kind = g_rand_int_range(r, 0, 20);
    if (kind == 0) {
      g_snprintf(key, sizeof key, "s%04d", g_rand_int_range(r, 0, w->keys));
      g_mutex_lock(&w->lock);
      g_hash_table_add(w->deleted, g_strdup(key));
      g_mutex_unlock(&w->lock);
      ixia_client_delete(c, NS, TABLE, key, -1, NULL, NULL);
    } else {
      if (kind < 3) g_snprintf(key, sizeof key, "new%04d", created++);
      else g_snprintf(key, sizeof key, "s%04d", g_rand_int_range(r, 0, w->keys));
      g_snprintf(doc, sizeof doc, "{\"price\": %d}", g_rand_int_range(r, -100, 200));
      /* An upsert keeps the rest of the document; a put of a deleted key re-creates it. */
      ixia_client_upsert(c, NS, TABLE, key, doc, -1, NULL, NULL);
    }
    atomic_fetch_add(&w->writes, 1);
  }
  g_rand_free(r);
  ixia_client_destroy(c);
  return NULL;
}

static void test_sorted_paging_under_concurrent_writes(void) {
  search_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, 2));
  const int keys = 400;
  GRand *r = g_rand_new_with_seed(11);
  gint64 v = 0;
  for (int i = 0; i < keys; i++) {
    char key[32], doc[96];
    g_snprintf(key, sizeof key, "s%04d", i);
    g_snprintf(doc, sizeof doc, "{\"price\": %d, \"category\": \"cat%02d\"}", g_rand_int_range(r, 0, 100), i % 7);
    CU_ASSERT_TRUE(ixia_client_put(s.client, NS, TABLE, key, doc, -1, &v, NULL));
  }
  /* Read-your-writes for the first page: every key is in the index. */
  CU_ASSERT_TRUE_FATAL(catch_up(&s, v));
  writer_t w = {s.st.api.addr, 0, 0, keys, {0}, g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL)};
  g_mutex_init(&w.lock);
  GThread *t = g_thread_new("writer", writer_main, &w);
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  int repeats = 0, pages = 0, order_breaks = 0;
  double prev = G_MAXDOUBLE;
  char *after = NULL;
  for (; pages < 1000; pages++) {
    GString *req = g_string_new("{\"namespace\":\"shop\",\"table\":\"products\",\"sort\":[{\"price\":\"desc\"}],"
                                "\"limit\":9,\"fields\":[\"price\"]");
    if (after) g_string_append_printf(req, ",\"after\":\"%s\"", after);
    g_string_append_c(req, '}');
    cJSON *q = cJSON_Parse(req->str);
    ixia_error_t *e = NULL;
    cJSON *resp = run_query(&s, q, &e);
    cJSON_Delete(q);
    g_string_free(req, TRUE);
    if (!resp) fprintf(stderr, "\n  page %d: %s\n", pages, e ? e->message : "?");
    ixia_error_destroy(e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(resp);
    for (const cJSON *h = cJSON_GetObjectItem(resp, "hits")->child; h; h = h->next) {
      const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(h, "key"));
      if (!g_hash_table_add(seen, g_strdup(key))) repeats++;
      /* The order follows the positions the cursor started with. */
      const cJSON *sv = cJSON_GetArrayItem(cJSON_GetObjectItem(h, "sort"), 0);
      double p = cJSON_IsNumber(sv) ? sv->valuedouble : -G_MAXDOUBLE;
      if (p > prev) order_breaks++;
      prev = p;
    }
    const cJSON *next = cJSON_GetObjectItem(resp, "next");
    g_free(after);
    after = cJSON_IsString(next) ? g_strdup(next->valuestring) : NULL;
    cJSON_Delete(resp);
    if (!after) break;
    /* Let writes land between pages: wait for the writer's progress rather
     * than a fixed time, so a slow disk (each write is synced) still puts
     * several writes between every two pages. */
    gint64 until = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    while (atomic_load(&w.writes) < 3 * (pages + 1) && g_get_monotonic_time() < until) g_usleep(500);
  }
  atomic_store(&w.stop, 1);
  g_thread_join(t);
  CU_ASSERT_EQUAL(repeats, 0);
  CU_ASSERT_EQUAL(order_breaks, 0);
  CU_ASSERT_TRUE(atomic_load(&w.writes) > 100);
  /* Every key present when paging began and never deleted was returned. */
  int skipped = 0;
  for (int i = 0; i < keys; i++) {
    char key[32];
    g_snprintf(key, sizeof key, "s%04d", i);
    if (!g_hash_table_contains(seen, key) && !g_hash_table_contains(w.deleted, key)) {
      if (skipped++ < 5) fprintf(stderr, "\n  skipped %s\n", key);
    }
  }
  CU_ASSERT_EQUAL(skipped, 0);
  fprintf(stderr, "\n  %d pages, %u keys, %d concurrent writes\n", pages, g_hash_table_size(seen), atomic_load(&w.writes));
  g_free(after);
  g_hash_table_destroy(seen);
  g_hash_table_destroy(w.deleted);
  g_mutex_clear(&w.lock);
  g_rand_free(r);
  stack_stop(&s);
}

/* ---------- partial results ---------- */

static cJSON *query_text(search_stack_t *s, const char *req, ixia_error_t **err) {
  char *resp = NULL;
  cJSON *out = ixia_client_query(s->client, req, &resp, err) ? cJSON_Parse(resp) : NULL;
  g_free(resp);
  return out;
}

static void test_partial_results(void) {
  search_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, 2));
  gint64 v = 0;
  for (int i = 0; i < 200; i++) {
    char key[16], doc[64];
    g_snprintf(key, sizeof key, "q%03d", i);
    g_snprintf(doc, sizeof doc, "{\"price\": %d}", i);
    CU_ASSERT_TRUE(ixia_client_put(s.client, NS, TABLE, key, doc, -1, &v, NULL));
  }
  CU_ASSERT_TRUE_FATAL(catch_up(&s, v));
  const char *all = "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":1000,\"allow_partial\":true,"
                    "\"aggs\":{\"n\":{\"count\":{}}}}";
  ixia_error_t *e = NULL;
  cJSON *r = query_text(&s, all, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  cJSON *sh = cJSON_GetObjectItem(r, "shards");
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "total")), 2);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "ok")), 2);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItem(sh, "failed")), 0);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "total")), 200);
  cJSON_Delete(r);

  /* A shard down: an error naming it, or with allow_partial the other
   * shard's answer and the failed one listed. */
  ixt_daemon_kill(&s.st.indexer[1]);
  const char *strict = "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":0}";
  CU_ASSERT_PTR_NULL(query_text(&s, strict, &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ESHARD && strstr(e->message, "shard 1"));
  ixia_error_destroy(e), e = NULL;
  r = query_text(&s, all, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  sh = cJSON_GetObjectItem(r, "shards");
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "ok")), 1);
  cJSON *failed = cJSON_GetArrayItem(cJSON_GetObjectItem(sh, "failed"), 0);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(failed, "shard")), 1);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(failed, "code")), "SHARD_UNAVAILABLE");
  /* The answering shard says how current its part is. */
  cJSON *states = cJSON_GetObjectItem(sh, "states");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(states), 1);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(states, 0), "shard")), 0);
  double shard_as_of = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(states, 0), "as_of"));
  CU_ASSERT_TRUE(shard_as_of > 0);
  double total = cJSON_GetNumberValue(cJSON_GetObjectItem(r, "total"));
  CU_ASSERT_TRUE(total > 0 && total < 200);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItem(r, "hits")), (int)total);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "aggs"), "n"), "value")), total);
  cJSON_Delete(r);
  /* Sorted pages too. */
  r = query_text(&s, "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":5,\"allow_partial\":true,"
                     "\"sort\":[{\"price\":\"desc\"}]}", &e);
  CU_ASSERT_PTR_NOT_NULL(r);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItem(r, "hits")), 5);
  states = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "shards"), "states");
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(states, 0), "as_of")),
                  shard_as_of);
  cJSON_Delete(r);

  /* A shard too slow for the request's deadline: answered without it, in
   * about the deadline. */
  g_setenv("IXIA_TEST_SEARCH_DELAY_MS", "4000", TRUE);
  CU_ASSERT_TRUE_FATAL(ixt_daemon_restart(&s.st.indexer[1]));
  g_unsetenv("IXIA_TEST_SEARCH_DELAY_MS");
  gint64 t0 = g_get_monotonic_time();
  r = query_text(&s, "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":0,\"allow_partial\":true,"
                     "\"timeout_ms\":500}", &e);
  gint64 took_ms = (g_get_monotonic_time() - t0) / 1000;
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_TRUE(took_ms < 3000);
  failed = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "shards"), "failed"), 0);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(failed, "shard")), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(failed, "error")), "deadline"));
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(failed, "code")), "DEADLINE_EXCEEDED");
  cJSON_Delete(r);
  CU_ASSERT_PTR_NULL(query_text(&s, "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":0,\"timeout_ms\":500}", &e));
  CU_ASSERT_TRUE(e && strstr(e->message, "shard 1"));
  ixia_error_destroy(e), e = NULL;
  stack_stop(&s);
}

int main(void) {
  /* The daemons this test starts inherit it: a GLib critical warning in
   * any of them (a precondition a call broke) ends it, and the test fails. */
  g_setenv("G_DEBUG", "fatal-criticals", TRUE);
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite suite = CU_add_suite("search", NULL, NULL);
  IXT_ADD(suite, test_differential_one_shard);
  IXT_ADD(suite, test_differential_two_shards);
  IXT_ADD(suite, test_add_index_then_backfill);
  IXT_ADD(suite, test_sorted_paging_under_concurrent_writes);
  IXT_ADD(suite, test_partial_results);
  return ixt_run();
}
