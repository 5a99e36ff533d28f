/* Unit tests of common/query.c: value encoding, tokens, document values,
 * query parsing and its errors, brute-force matching, aggregations and the
 * shard partial/merge round trip. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "json.h"
#include "query.h"
#include "support.h"
#include "timeutil.h"

static const char *SCHEMA =
    "{\"namespace\": \"shop\", \"table\": \"products\", \"indexes\": ["
    "{\"field\": \"category\", \"type\": \"keyword\"}, {\"field\": \"title\", \"type\": \"text\"},"
    "{\"field\": \"price\", \"type\": \"double\"}, {\"field\": \"qty\", \"type\": \"long\"},"
    "{\"field\": \"ts\", \"type\": \"timestamp\"}, {\"field\": \"active\", \"type\": \"bool\"},"
    "{\"field\": \"tags\", \"type\": \"keyword\"}, {\"field\": \"country\", \"type\": \"keyword\"},"
    "{\"field\": \"brand\", \"type\": \"keyword\"},"
    "{\"field\": \"seller.country\", \"type\": \"keyword\"},"
    "{\"field\": \"body\", \"type\": \"text\", \"analyzer\": \"english\", \"positions\": true}]}";

static ixia_schema_t *schema;

static ixia_schema_t *lookup(const char *ns, const char *table, void *ud, ixia_error_t **err) {
  (void)ud;
  if (strcmp(ns, "shop") == 0 && strcmp(table, "products") == 0) return ixia_schema_ref(schema);
  ixia_error_set(err, IXIA_ENOTFOUND, "table %s.%s does not exist", ns, table);
  return NULL;
}

static ixia_query_limits_t default_limits(void) {
  ixia_query_limits_t l = {.max_clauses = 128,
                           .max_in_values = 10000,
                           .max_limit = 1000,
                           .max_postings = 1000000,
                           .max_memory_bytes = 256u << 20,
                           .max_terms_buckets = 100000,
                           .max_exact_values = 1000000,
                           .deadline_ms = 5000,
                           .max_wait_ms = 10000,
                           .max_request_bytes = 1 << 20};
  return l;
}

/* Test JSON is written with single quotes; this swaps them for double. */
static char *dq(const char *s) {
  char *out = g_strdup(s);
  for (char *p = out; *p; p++)
    if (*p == '\'') *p = '"';
  return out;
}

/* Parses {"namespace": "shop", "table": "products", <rest>} (rest in
 * single-quote style). */
static ixia_query_t *parse_rest(const char *rest, const ixia_query_limits_t *lim,
                                ixia_error_t **err) {
  char *body = g_strdup_printf("{'namespace': 'shop', 'table': 'products'%s%s}",
                               *rest ? ", " : "", rest);
  char *json = dq(body);
  ixia_query_t *q = ixia_query_parse(json, strlen(json), lookup, NULL, lim, err);
  g_free(body);
  g_free(json);
  return q;
}

static ixia_query_t *parse_ok(const char *rest) {
  ixia_query_limits_t lim = default_limits();
  ixia_error_t *e = NULL;
  ixia_query_t *q = parse_rest(rest, &lim, &e);
  if (!q) fprintf(stderr, "unexpected parse error for %s: %s\n", rest, e->message);
  ixia_error_destroy(e);
  return q;
}

static cJSON *doc_of(const char *sq) {
  char *j = dq(sq);
  cJSON *d = cJSON_Parse(j);
  g_free(j);
  return d;
}

static const ixia_schema_field_t *field(const char *name) {
  for (guint i = 0; i < schema->n_indexes; i++)
    if (strcmp(schema->indexes[i].field, name) == 0) return &schema->indexes[i];
  return NULL;
}

/* ---- encoding ---- */

static double random_double(GRand *r) {
  switch (g_rand_int_range(r, 0, 6)) {
    case 0: /* integers, up to the 2^53 long limit */
      return (double)(g_rand_int_range(r, -1000, 1000)) *
             (g_rand_boolean(r) ? 1.0 : 9007199254740.0);
    case 1:
      return g_rand_boolean(r) ? 0.0 : -0.0;
    case 2: /* subnormals */
      return (g_rand_boolean(r) ? 1 : -1) * g_rand_double(r) * 4.9e-320;
    case 3:
      return (g_rand_boolean(r) ? 1 : -1) * ldexp(g_rand_double(r), g_rand_int_range(r, -1000, 1000));
    case 4:
      return g_rand_int_range(r, 0, 3) == 0 ? INFINITY : g_rand_boolean(r) ? -INFINITY : 9007199254740992.0;
    default:
      return g_rand_double_range(r, -100, 100);
  }
}

static void test_encoding_order(void) {
  GRand *r = g_rand_new_with_seed(7);
  int bad = 0;
  for (int i = 0; i < 50000; i++) {
    double a = random_double(r), b = random_double(r);
    guint8 ea[IXIA_NUM_BYTES], eb[IXIA_NUM_BYTES];
    ixia_num_encode(a, ea);
    ixia_num_encode(b, eb);
    int c = memcmp(ea, eb, IXIA_NUM_BYTES);
    int want = a < b ? -1 : a > b ? 1 : 0;
    if ((c > 0) - (c < 0) != want) bad++;
    if (ixia_num_decode(ea) != a) bad++;
  }
  CU_ASSERT_EQUAL(bad, 0);
  guint8 pz[8], nz[8];
  ixia_num_encode(0.0, pz);
  ixia_num_encode(-0.0, nz);
  CU_ASSERT_EQUAL(memcmp(pz, nz, 8), 0);
  CU_ASSERT_FALSE(signbit(ixia_num_decode(nz)));
  g_rand_free(r);
}

/* ---- tokens and document values ---- */

static gboolean bytes_is(GBytes *b, const char *s) {
  gsize n;
  const char *p = g_bytes_get_data(b, &n);
  return n == strlen(s) && memcmp(p, s, n) == 0;
}

/* The tokens of text, joined by spaces in their order (duplicates kept). */
static gboolean join_token(const char *tok, gsize n, guint32 pos, void *ud) {
  GString *s = ud;
  g_string_append_printf(s, "%s%.*s@%u", s->len ? " " : "", (int)n, tok, pos);
  return TRUE;
}

static char *analyzed(const char *analyzer, const char *text) {
  GString *s = g_string_new(NULL);
  guint32 pos = 0;
  ixia_analyze(analyzer, text, strlen(text), &pos, join_token, s);
  return g_string_free(s, FALSE);
}

static void test_tokens(void) {
  GPtrArray *t = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  const char *text = "Hello, WORLD! hello caf\xc3\xa9 42x  -- x_y";
  ixia_text_tokens(NULL, text, strlen(text), t);
  CU_ASSERT_EQUAL_FATAL(t->len, 6);
  CU_ASSERT_TRUE(bytes_is(t->pdata[0], "hello"));
  CU_ASSERT_TRUE(bytes_is(t->pdata[1], "world"));
  CU_ASSERT_TRUE(bytes_is(t->pdata[2], "caf\xc3\xa9"));
  CU_ASSERT_TRUE(bytes_is(t->pdata[3], "42x"));
  CU_ASSERT_TRUE(bytes_is(t->pdata[4], "x"));
  CU_ASSERT_TRUE(bytes_is(t->pdata[5], "y"));
  g_ptr_array_set_size(t, 0);
  ixia_text_tokens("standard", "  ,;!", 5, t);
  ixia_text_tokens(NULL, "", 0, t);
  CU_ASSERT_EQUAL(t->len, 0);
  /* Only len bytes are read. */
  ixia_text_tokens(NULL, "abcdef", 3, t);
  CU_ASSERT_EQUAL_FATAL(t->len, 1);
  CU_ASSERT_TRUE(bytes_is(t->pdata[0], "abc"));
  g_ptr_array_free(t, TRUE);

  /* Unicode: case folding beyond ASCII, NFKC, and the composed and
   * decomposed forms of one letter giving one token. */
  struct { const char *analyzer, *text, *want; } cases[] = {
      {NULL, "CAF\xc3\x89 caf\xc3\xa9 cafe\xcc\x81", "caf\xc3\xa9@0 caf\xc3\xa9@1 caf\xc3\xa9@2"},
      {NULL, "Stra\xc3\x9f" "e STRASSE", "strasse@0 strasse@1"},
      {NULL, "\xef\xac\x81le \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3", "file@0 abc@1"}, /* ligature, full width */
      {NULL, "\xce\x9f\xce\x94\xce\xa5\xce\xa3\xce\xa3\xce\x95\xce\xa5\xce\xa3-\xd0\x9c\xd0\x98\xd0\xa0",
       "\xce\xbf\xce\xb4\xcf\x85\xcf\x83\xcf\x83\xce\xb5\xcf\x85\xcf\x83@0 \xd0\xbc\xd0\xb8\xd1\x80@1"},
      {NULL, "a\xe2\x80\x94" "b\xc2\xa0" "c d\xe3\x80\x80" "e", "a@0 b@1 c@2 d@3 e@4"}, /* dashes and spaces */
      {NULL, "bad \xff\xfe bytes", "bad@0 bytes@1"},
      {"english", "Red MUGS, running and Generously", "red@0 mug@1 run@2 and@3 generous@4"},
      {"french", "Les Chevaux couraient", "le@0 cheval@1 cour@2"},
      {"german", "H\xc3\xa4user", "haus@0"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *got = analyzed(cases[i].analyzer, cases[i].text);
    if (strcmp(got, cases[i].want) != 0) fprintf(stderr, "\n  %s: got '%s', want '%s'\n", cases[i].text, got, cases[i].want);
    CU_ASSERT_STRING_EQUAL(got, cases[i].want);
    g_free(got);
  }
  /* Positions go on from where the caller left them. */
  guint32 pos = 100;
  GString *s = g_string_new(NULL);
  ixia_analyze(NULL, "one two", 7, &pos, join_token, s);
  CU_ASSERT_STRING_EQUAL(s->str, "one@100 two@101");
  CU_ASSERT_EQUAL(pos, 102);
  g_string_free(s, TRUE);
  char *one = ixia_analyze_one("english", "Mugs!", TRUE);
  CU_ASSERT_STRING_EQUAL(one, "mug");
  g_free(one);
  one = ixia_analyze_one("english", "Mugs", FALSE);
  CU_ASSERT_STRING_EQUAL(one, "mugs");
  g_free(one);
  CU_ASSERT_PTR_NULL(ixia_analyze_one(NULL, "two words", TRUE));
  CU_ASSERT_PTR_NULL(ixia_analyze_one(NULL, "--", TRUE));
}

static GPtrArray *values_of(const char *doc_sq, const char *fname, ixia_error_t **err) {
  cJSON *doc = doc_of(doc_sq);
  GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  gboolean ok = ixia_doc_values(doc, field(fname), out, err);
  cJSON_Delete(doc);
  if (!ok) {
    g_ptr_array_free(out, TRUE);
    return NULL;
  }
  return out;
}

static gint bytes_cmp_p(gconstpointer a, gconstpointer b) {
  return g_bytes_compare(*(GBytes *const *)a, *(GBytes *const *)b);
}

/* An "in" list's values come out sorted in memcmp order (a proper prefix
 * first) and without repeats, whatever their order, against a plain sort:
 * lists sorted already, shuffled, with shared prefixes longer than 8 bytes
 * (the radix sort's key starts after them), values that are prefixes of
 * others, the empty string, bytes past ASCII, and numbers. */
static void test_in_values_sorted(void) {
  ixia_query_limits_t lim = default_limits();
  GRand *rnd = g_rand_new_with_seed(11);
  static const char *const alphabet[] = {"a", "b", "z", "0", "9", "\xc3\xa9", "\x01", "~"};
  for (int trial = 0; trial < 60; trial++) {
    guint n = trial < 10 ? (guint)trial + 1 : (guint)g_rand_int_range(rnd, 2, trial < 50 ? 400 : 10000);
    const char *prefix = trial % 3 == 0 ? "" : trial % 3 == 1 ? "sku-" : "product-line-0000-";
    gboolean numeric = trial % 7 == 6;
    GString *req = g_string_new("{\"namespace\":\"shop\",\"table\":\"products\",\"filter\":{\"in\":{");
    g_string_append(req, numeric ? "\"price\":[" : "\"brand\":[");
    GPtrArray *want = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    for (guint i = 0; i < n; i++) {
      if (i) g_string_append_c(req, ',');
      if (numeric) {
        double d = (g_rand_int_range(rnd, -500, 500)) / 4.0;
        if (i % 9 == 0) d = trial % 2 ? -0.0 : 0.0;
        g_string_append_printf(req, "%.17g", d);
        guint8 enc[IXIA_NUM_BYTES];
        ixia_num_encode(d, enc);
        g_ptr_array_add(want, g_bytes_new(enc, sizeof enc));
        continue;
      }
      GString *v = g_string_new(prefix);
      guint len = (guint)g_rand_int_range(rnd, 0, trial < 30 ? 4 : 12);
      for (guint k = 0; k < len; k++) g_string_append(v, alphabet[g_rand_int_range(rnd, 0, G_N_ELEMENTS(alphabet))]);
      ixia_json_append_string(req, v->str, v->len);
      g_ptr_array_add(want, g_bytes_new(v->str, v->len));
      g_string_free(v, TRUE);
    }
    g_string_append(req, "]}}}");
    g_ptr_array_sort(want, bytes_cmp_p);
    for (guint i = 1; i < want->len;)
      if (g_bytes_equal(want->pdata[i - 1], want->pdata[i])) g_ptr_array_remove_index(want, i);
      else i++;
    /* Every fourth list goes in sorted already (the check-only path). */
    if (trial % 4 == 0 && !numeric) {
      g_string_truncate(req, 0);
      g_string_append(req, "{\"namespace\":\"shop\",\"table\":\"products\",\"filter\":{\"in\":{\"brand\":[");
      for (guint i = 0; i < want->len; i++) {
        gsize bl;
        const char *bp = g_bytes_get_data(want->pdata[i], &bl);
        if (i) g_string_append_c(req, ',');
        ixia_json_append_string(req, bl ? bp : "", bl);
      }
      g_string_append(req, "]}}}");
    }
    ixia_error_t *e = NULL;
    ixia_query_t *q = ixia_query_parse(req->str, req->len, lookup, NULL, &lim, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    const GPtrArray *got = q->filter->values;
    CU_ASSERT_EQUAL(got->len, want->len);
    gboolean same = got->len == want->len;
    for (guint i = 0; same && i < got->len; i++) same = g_bytes_equal(got->pdata[i], want->pdata[i]);
    if (!same) fprintf(stderr, "trial %d (%u values, prefix '%s'): order differs\n", trial, n, prefix);
    CU_ASSERT_TRUE(same);
    ixia_query_destroy(q);
    g_ptr_array_free(want, TRUE);
    g_string_free(req, TRUE);
  }
  g_rand_free(rnd);
}

static void test_doc_values(void) {
  ixia_error_t *e = NULL;
  GPtrArray *v = values_of("{'tags': ['b', 'a', null, 'b']}", "tags", &e);
  CU_ASSERT_EQUAL_FATAL(v->len, 2);
  CU_ASSERT_TRUE(bytes_is(v->pdata[0], "a") && bytes_is(v->pdata[1], "b"));
  g_ptr_array_free(v, TRUE);

  v = values_of("{'seller': {'country': 'US'}}", "seller.country", &e);
  CU_ASSERT_TRUE(v->len == 1 && bytes_is(v->pdata[0], "US"));
  g_ptr_array_free(v, TRUE);

  v = values_of("{'tags': null, 'seller': 'flat'}", "tags", &e);
  CU_ASSERT_EQUAL(v->len, 0);
  g_ptr_array_free(v, TRUE);
  v = values_of("{'seller': 'flat'}", "seller.country", &e);
  CU_ASSERT_EQUAL(v->len, 0);
  g_ptr_array_free(v, TRUE);

  v = values_of("{'title': ['Red red Shoes', 'Blue shoes']}", "title", &e);
  CU_ASSERT_EQUAL_FATAL(v->len, 3);
  CU_ASSERT_TRUE(bytes_is(v->pdata[0], "blue") && bytes_is(v->pdata[1], "red") &&
                 bytes_is(v->pdata[2], "shoes"));
  g_ptr_array_free(v, TRUE);

  /* Numbers come out in value order, deduplicated. */
  v = values_of("{'qty': [3, -1, 2, 3, -1]}", "qty", &e);
  CU_ASSERT_EQUAL_FATAL(v->len, 3);
  double want[] = {-1, 2, 3};
  for (guint i = 0; i < 3; i++) {
    gsize n;
    const guint8 *p = g_bytes_get_data(v->pdata[i], &n);
    CU_ASSERT_TRUE(n == 8 && ixia_num_decode(p) == want[i]);
  }
  g_ptr_array_free(v, TRUE);

  v = values_of("{'active': [true, false, true]}", "active", &e);
  CU_ASSERT_EQUAL_FATAL(v->len, 2);
  CU_ASSERT_TRUE(bytes_is(v->pdata[0], "\0") || ((const guint8 *)g_bytes_get_data(v->pdata[0], NULL))[0] == 0);
  cJSON *b = ixia_val_to_json(IXIA_FIELD_BOOL, g_bytes_get_data(v->pdata[1], NULL), 1);
  CU_ASSERT_TRUE(cJSON_IsTrue(b));
  cJSON_Delete(b);
  g_ptr_array_free(v, TRUE);
  CU_ASSERT_PTR_NULL(e);

  /* Wrong types name the field and the value. */
  CU_ASSERT_PTR_NULL(values_of("{'price': 'abc'}", "price", &e));
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_EQUAL(e->code, IXIA_ETYPE);
  CU_ASSERT_PTR_NOT_NULL(strstr(e->message, "'price'"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e->message, "\"abc\""));
  ixia_error_destroy(e), e = NULL;
  /* Nested arrays are flattened; a wrong type inside one names its place. */
  v = values_of("{'tags': ['a', ['b', ['a']]]}", "tags", &e);
  CU_ASSERT_TRUE_FATAL(v && v->len == 2);
  CU_ASSERT_TRUE(bytes_is(v->pdata[0], "a") && bytes_is(v->pdata[1], "b"));
  g_ptr_array_free(v, TRUE);
  CU_ASSERT_PTR_NULL(values_of("{'tags': ['a', [1]]}", "tags", &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ETYPE && strstr(e->message, "tags[1][0] is 1") &&
                 strstr(e->message, "'tags'"));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_PTR_NULL(values_of("{'tags': ['a', 3]}", "tags", &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ETYPE && strstr(e->message, "element 1 is 3"));
  ixia_error_destroy(e), e = NULL;
  /* Timestamps: epoch seconds or RFC 3339, both as epoch seconds. */
  v = values_of("{'ts': ['2024-05-01T12:30:00Z', '2024-05-01T14:30:00.9+02:00', 1714566600]}", "ts", &e);
  CU_ASSERT_TRUE_FATAL(v && v->len == 1);
  CU_ASSERT_EQUAL(ixia_num_decode(g_bytes_get_data(v->pdata[0], NULL)), 1714566600.0);
  g_ptr_array_free(v, TRUE);
  CU_ASSERT_PTR_NULL(values_of("{'ts': '2024-02-30T00:00:00Z'}", "ts", &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ETYPE && strstr(e->message, "'ts'"));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_PTR_NULL(values_of("{'qty': 1.5}", "qty", &e));
  CU_ASSERT_TRUE(e && strstr(e->message, "1.5"));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_PTR_NULL(values_of("{'ts': -5}", "ts", &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ETYPE);
  ixia_error_destroy(e), e = NULL;

  guint8 enc[8];
  ixia_num_encode(-2.5, enc);
  cJSON *n = ixia_val_to_json(IXIA_FIELD_DOUBLE, enc, 8);
  CU_ASSERT_TRUE(cJSON_IsNumber(n) && n->valuedouble == -2.5);
  cJSON_Delete(n);
  cJSON *s = ixia_val_to_json(IXIA_FIELD_KEYWORD, (const guint8 *)"abcdef", 3);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(s), "abc");
  cJSON_Delete(s);
}

/* ---- parsing ---- */

static void test_limits_from_config(void) {
  ixia_config_t *cfg = ixia_config_new();
  CU_ASSERT_TRUE(ixia_config_set(cfg, "query.max_memory_mb", "3", NULL));
  CU_ASSERT_TRUE(ixia_config_set(cfg, "query.max_clauses", "77", NULL));
  ixia_query_limits_t l;
  ixia_query_limits_from_config(cfg, &l);
  CU_ASSERT_EQUAL(l.max_memory_bytes, 3u << 20);
  CU_ASSERT_EQUAL(l.max_clauses, 77);
  CU_ASSERT_EQUAL(l.max_limit, ixia_config_int(cfg, "query.max_limit"));
  CU_ASSERT_EQUAL(l.deadline_ms, ixia_config_int(cfg, "query.deadline_ms"));
  CU_ASSERT_EQUAL(l.max_exact_values, ixia_config_int(cfg, "query.max_exact_values"));
  CU_ASSERT_EQUAL(l.max_request_bytes, 1u << 20);
  ixia_config_destroy(cfg);
}

/* A shard reads the query out of its parsed search request: the tree
 * gives the same query as the text, and the same errors, nesting limit
 * included. */
static void test_parse_tree(void) {
  ixia_query_limits_t lim = default_limits();
  char *json = dq("{'namespace': 'shop', 'table': 'products', 'filter': {'and': ["
                  "{'term': {'category': 'cat01'}}, {'range': {'price': {'gte': 10}}}]}, 'limit': 7}");
  cJSON *tree = cJSON_Parse(json);
  ixia_error_t *e = NULL;
  ixia_query_t *a = ixia_query_parse(json, strlen(json), lookup, NULL, &lim, &e);
  ixia_query_t *b = ixia_query_parse_tree(tree, lookup, NULL, &lim, &e);
  CU_ASSERT_TRUE_FATAL(a && b && !e);
  CU_ASSERT_EQUAL(b->limit, 7);
  CU_ASSERT_EQUAL(b->filter->kind, a->filter->kind);
  CU_ASSERT_EQUAL(b->filter->n_children, 2);
  CU_ASSERT_EQUAL(b->filter->children[1]->kind, IXIA_F_RANGE);
  CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItemCaseSensitive(tree, "filter")); /* borrowed, intact */
  ixia_query_destroy(a);
  ixia_query_destroy(b);
  cJSON_Delete(tree);
  g_free(json);
  /* The same error, naming the same path. */
  json = dq("{'namespace': 'shop', 'table': 'products', 'filter': {'term': {'nope': 1}}}");
  tree = cJSON_Parse(json);
  ixia_error_t *e2 = NULL;
  a = ixia_query_parse(json, strlen(json), lookup, NULL, &lim, &e);
  b = ixia_query_parse_tree(tree, lookup, NULL, &lim, &e2);
  CU_ASSERT_TRUE(!a && !b && e && e2 && e->code == e2->code && strcmp(e->message, e2->message) == 0);
  ixia_error_destroy(e), e = NULL;
  ixia_error_destroy(e2), e2 = NULL;
  cJSON_Delete(tree);
  g_free(json);
  /* 64 levels pass the nesting check, 65 do not (the text's limit). */
  for (int levels = 64; levels <= 65; levels++) {
    GString *t = g_string_new("{\"namespace\":\"shop\",\"table\":\"products\",\"x\":");
    for (int i = 1; i < levels; i++) g_string_append_c(t, '[');
    for (int i = 1; i < levels; i++) g_string_append_c(t, ']');
    g_string_append_c(t, '}');
    tree = cJSON_Parse(t->str);
    b = ixia_query_parse_tree(tree, lookup, NULL, &lim, &e);
    a = ixia_query_parse(t->str, t->len, lookup, NULL, &lim, &e2);
    CU_ASSERT_TRUE(!b && e && !a && e2); /* "x" is unknown either way */
    gboolean deep = e && strstr(e->message, "nesting deeper") != NULL;
    gboolean deep2 = e2 && strstr(e2->message, "nesting deeper") != NULL;
    CU_ASSERT_EQUAL(deep, levels > 64);
    CU_ASSERT_EQUAL(deep, deep2);
    ixia_error_destroy(e), e = NULL;
    ixia_error_destroy(e2), e2 = NULL;
    cJSON_Delete(tree);
    g_string_free(t, TRUE);
  }
}

static void test_parse_spec_example(void) {
  ixia_query_t *q = parse_ok(
      "'filter': {'and': [{'term': {'category': 'cat01'}},"
      "                   {'range': {'price': {'gte': 10, 'lt': 20}}},"
      "                   {'in': {'country': ['US', 'CA', 'US']}},"
      "                   {'not': {'term': {'tags': 't001'}}}]},"
      " 'fields': ['title', 'price'], 'limit': 100, 'after': null,"
      " 'aggs': {'n': {'count': {}}, 'avg_price': {'avg': 'price'},"
      "          'by_cat': {'terms': {'field': 'category', 'size': 3, 'aggs': {'top': {'max': "
      "'price'}}}},"
      "          'p': {'percentiles': {'field': 'price', 'percents': [50, 99.9]}},"
      "          'brands': {'cardinality': 'brand'}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  CU_ASSERT_STRING_EQUAL(q->ns, "shop");
  CU_ASSERT_STRING_EQUAL(q->table, "products");
  CU_ASSERT_EQUAL(q->limit, 100);
  CU_ASSERT_PTR_NULL(q->after);
  CU_ASSERT_EQUAL(q->timeout_ms, 5000);
  CU_ASSERT_TRUE(q->fields && strcmp(q->fields[0], "title") == 0 && !q->fields[2]);
  const ixia_filter_t *f = q->filter;
  CU_ASSERT_EQUAL_FATAL(f->kind, IXIA_F_AND);
  CU_ASSERT_EQUAL_FATAL(f->n_children, 4);
  const ixia_filter_t *r = f->children[1];
  CU_ASSERT_EQUAL(r->kind, IXIA_F_RANGE);
  CU_ASSERT_STRING_EQUAL(r->field->field, "price");
  CU_ASSERT_TRUE(r->lo && r->hi && r->lo_incl && !r->hi_incl);
  CU_ASSERT_EQUAL(ixia_num_decode(g_bytes_get_data(r->lo, NULL)), 10);
  const ixia_filter_t *in = f->children[2];
  CU_ASSERT_EQUAL_FATAL(in->values->len, 2); /* sorted, deduplicated */
  CU_ASSERT_TRUE(bytes_is(in->values->pdata[0], "CA") && bytes_is(in->values->pdata[1], "US"));
  CU_ASSERT_EQUAL(f->children[3]->kind, IXIA_F_NOT);
  CU_ASSERT_EQUAL(f->children[3]->n_children, 1);

  CU_ASSERT_EQUAL_FATAL(q->n_aggs, 5);
  CU_ASSERT_EQUAL(q->aggs[0]->kind, IXIA_AGG_COUNT);
  CU_ASSERT_PTR_NULL(q->aggs[0]->field);
  const ixia_agg_t *terms = q->aggs[2];
  CU_ASSERT_EQUAL(terms->kind, IXIA_AGG_TERMS);
  CU_ASSERT_EQUAL(terms->size, 3);
  CU_ASSERT_EQUAL_FATAL(terms->n_subs, 1);
  CU_ASSERT_STRING_EQUAL(terms->subs[0]->name, "top");
  CU_ASSERT_EQUAL(q->aggs[3]->n_percents, 2);
  CU_ASSERT_EQUAL(q->aggs[3]->percents[1], 99.9);
  /* price (avg, max, percentiles), category, brand: each once. */
  CU_ASSERT_EQUAL_FATAL(q->n_agg_fields, 3);
  for (guint i = 1; i < q->n_aggs; i++)
    CU_ASSERT_PTR_EQUAL(q->agg_fields[q->aggs[i]->field_slot], q->aggs[i]->field);
  CU_ASSERT_PTR_EQUAL(q->agg_fields[terms->subs[0]->field_slot], field("price"));
  ixia_query_destroy(q);

  q = parse_ok("'timeout_ms': 250, 'min_version': 42, 'after': 'abc', 'limit': 0, 'fields': null,"
               " 'aggs': {'p': {'percentiles': 'price'}, 't': {'terms': {'field': 'active'}}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  CU_ASSERT_EQUAL(q->timeout_ms, 250);
  CU_ASSERT_EQUAL(q->min_version, 42);
  CU_ASSERT_TRUE(q->allow_repairing); /* the default */
  CU_ASSERT_STRING_EQUAL(q->after, "abc");
  CU_ASSERT_EQUAL(q->limit, 0);
  CU_ASSERT_PTR_NULL(q->fields);
  CU_ASSERT_PTR_NULL(q->filter);
  CU_ASSERT_EQUAL(q->aggs[0]->n_percents, 3); /* 50, 95, 99 */
  CU_ASSERT_EQUAL(q->aggs[1]->size, 10);
  ixia_query_destroy(q);

  q = parse_ok("'timeout_ms': 999999999999");
  CU_ASSERT_TRUE(q && q->timeout_ms == 5000 && q->limit == 10);
  ixia_query_destroy(q);

  /* Text terms are lower-cased single tokens; text prefixes too. */
  q = parse_ok("'filter': {'or': [{'term': {'title': 'Laptop'}}, {'prefix': {'title': 'LAP'}},"
               " {'match': {'title': 'Red  SHOES red'}}, {'exists': 'ts'},"
               " {'exists': {'field': 'seller.country'}}]}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  CU_ASSERT_TRUE(bytes_is(q->filter->children[0]->values->pdata[0], "laptop"));
  CU_ASSERT_TRUE(bytes_is(q->filter->children[1]->values->pdata[0], "lap"));
  CU_ASSERT_EQUAL(q->filter->children[2]->values->len, 2);
  CU_ASSERT_STRING_EQUAL(q->filter->children[4]->field->field, "seller.country");
  ixia_query_destroy(q);
}

/* BM25 by hand on three documents. */
static void test_bm25(void) {
  ixia_query_t *q = parse_ok("'filter': {'or': [{'match': {'body': 'mug'}}, {'not': {'match': {'title': 'x'}}}]}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  CU_ASSERT_TRUE(q->scoring);
  const char *docs[] = {"{'body': 'mug mug shop'}", "{'body': 'a mug'}", "{'body': 'tea'}"};
  ixia_bm25_stats_t *st = ixia_bm25_stats_new(q);
  cJSON *d[3];
  for (int i = 0; i < 3; i++) ixia_bm25_stats_add(st, d[i] = doc_of(docs[i]));
  /* N = 3, df(mug) = 2, avgdl = 6 / 3 = 2. */
  double idf = log(1 + (3 - 2 + 0.5) / (2 + 0.5));
  double want0 = idf * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2.0));
  double want1 = idf * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 2.0));
  CU_ASSERT_DOUBLE_EQUAL(ixia_query_score_doc(q, st, d[0]), want0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(ixia_query_score_doc(q, st, d[1]), want1, 1e-12);
  CU_ASSERT_EQUAL(ixia_query_score_doc(q, st, d[2]), 0.0);
  CU_ASSERT_TRUE(want0 > want1);
  for (int i = 0; i < 3; i++) cJSON_Delete(d[i]);
  ixia_bm25_stats_free(st);
  ixia_query_destroy(q);
  /* Only clauses outside a "not" score. */
  q = parse_ok("'filter': {'not': {'match': {'body': 'mug'}}}");
  CU_ASSERT_FALSE(q->scoring);
  ixia_query_destroy(q);
}

static void test_sort(void) {
  ixia_query_t *q = parse_ok("'sort': [{'price': 'desc'}, 'category', {'ts': {'order': 'asc', 'missing': 'first'}}, '_score']");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  CU_ASSERT_EQUAL(q->n_sort, 4);
  CU_ASSERT_TRUE(q->sort[0].desc && !q->sort[0].missing_first);
  CU_ASSERT_TRUE(!q->sort[1].desc && strcmp(q->sort[1].field->field, "category") == 0);
  CU_ASSERT_TRUE(!q->sort[2].desc && q->sort[2].missing_first);
  CU_ASSERT_TRUE(q->sort[3].field == NULL && q->sort[3].desc);
  ixia_query_t *q2 = parse_ok("'sort': [{'price': 'asc'}, 'category', {'ts': {'order': 'asc', 'missing': 'first'}}, '_score']");
  CU_ASSERT_NOT_EQUAL(q->sort_sig, q2->sort_sig);
  ixia_query_destroy(q2);
  /* Multi-valued: the largest value descending; missing sorts last. */
  cJSON *a = doc_of("{'price': [5, 30], 'category': 'b'}"), *b = doc_of("{'price': 20, 'category': 'a'}"),
        *c = doc_of("{'category': 'a'}"), *d = doc_of("{'price': 30, 'category': 'a', 'ts': '2024-01-01T00:00:00Z'}");
  GPtrArray *va = ixia_sort_values_of_doc(q, a, 0), *vb = ixia_sort_values_of_doc(q, b, 0),
            *vc = ixia_sort_values_of_doc(q, c, 0), *vd = ixia_sort_values_of_doc(q, d, 1.5);
  CU_ASSERT_TRUE(ixia_sort_cmp_values(q, (GBytes *const *)va->pdata, (GBytes *const *)vb->pdata) < 0);
  CU_ASSERT_TRUE(ixia_sort_cmp_values(q, (GBytes *const *)vb->pdata, (GBytes *const *)vc->pdata) < 0);
  CU_ASSERT_TRUE(ixia_sort_cmp_values(q, (GBytes *const *)vd->pdata, (GBytes *const *)va->pdata) < 0); /* 30 = 30, a < b */
  CU_ASSERT_PTR_NULL(vc->pdata[0]);
  cJSON *j = ixia_sort_value_json(&q->sort[2], vd->pdata[2]);
  CU_ASSERT_TRUE(cJSON_IsNumber(j) && j->valuedouble == 1704067200);
  cJSON_Delete(j);
  j = ixia_sort_value_json(&q->sort[3], vd->pdata[3]);
  CU_ASSERT_TRUE(cJSON_IsNumber(j) && j->valuedouble == 1.5);
  cJSON_Delete(j);
  g_ptr_array_unref(va), g_ptr_array_unref(vb), g_ptr_array_unref(vc), g_ptr_array_unref(vd);
  cJSON_Delete(a), cJSON_Delete(b), cJSON_Delete(c), cJSON_Delete(d);
  ixia_query_destroy(q);
}

typedef struct {
  const char *rest; /* after namespace/table; single-quote style */
  ixia_code_t code;
  const char *needle; /* must occur in the message */
} bad_query_t;

static const bad_query_t bad_queries[] = {
    {"'bogus': 1", IXIA_EINVAL, "\"bogus\""},
    {"'limit': 1, 'limit': 2", IXIA_EINVAL, "\"limit\" given twice"},
    {"'limit': -1", IXIA_EINVAL, "limit: "},
    {"'limit': 2.5", IXIA_EINVAL, "limit: "},
    {"'limit': 1001", IXIA_ETOOLARGE, "query.max_limit"},
    {"'after': 5", IXIA_EINVAL, "after: "},
    {"'min_version': -1", IXIA_EINVAL, "min_version: "},
    {"'min_version': 'x'", IXIA_EINVAL, "min_version: "},
    {"'allow_repairing': 'no'", IXIA_EINVAL, "allow_repairing: must be true or false"},
    {"'timeout_ms': 0", IXIA_EINVAL, "timeout_ms: "},
    {"'fields': 'title'", IXIA_EINVAL, "fields: "},
    {"'fields': []", IXIA_EINVAL, "fields: "},
    {"'fields': ['a..b']", IXIA_EINVAL, "fields[0]: bad field path 'a..b'"},
    {"'fields': ['ok', 3]", IXIA_EINVAL, "fields[1]: must be a string"},
    {"'filter': []", IXIA_EINVAL, "filter: a filter must be an object"},
    {"'filter': {}", IXIA_EINVAL, "filter: a filter must be an object with exactly one key"},
    {"'filter': {'term': {'category': 'a'}, 'exists': 'price'}", IXIA_EINVAL, "filter: "},
    {"'filter': {'near': {}}", IXIA_EINVAL, "filter: unknown filter \"near\""},
    {"'filter': {'term': {'nope': 1}}", IXIA_EINVAL,
     "filter.term.nope: field 'nope' is not indexed in shop.products"},
    {"'filter': {'term': {'category': 'a', 'brand': 'b'}}", IXIA_EINVAL,
     "filter.term: must be an object with exactly one field"},
    {"'filter': {'term': 'category'}", IXIA_EINVAL, "filter.term: "},
    {"'filter': {'term': {'price': 'abc'}}", IXIA_EINVAL,
     "filter.term.price: value must be a number for double field"},
    {"'filter': {'term': {'qty': 1.5}}", IXIA_EINVAL,
     "filter.term.qty: value must be an integer for long field"},
    {"'filter': {'term': {'ts': 'now'}}", IXIA_EINVAL, "filter.term.ts: value must be a timestamp: whole epoch seconds"},
    {"'filter': {'range': {'ts': {'gte': 'yesterday'}}}", IXIA_EINVAL, "filter.range.ts: bound \"gte\" must be a timestamp: whole epoch seconds from 0 to 10^12, or an RFC 3339"},
    {"'filter': {'range': {'price': {'lt': 1e400}}}", IXIA_EINVAL, "query: filter.range.price.lt: the number is outside the range of a double"},
    {"'filter': {'term': {'category': 'a', 'category': 'b'}}", IXIA_EINVAL, "query: filter.term: key \"category\" given twice"},
    {"'filter': {'term': {'active': 1}}", IXIA_EINVAL,
     "filter.term.active: value must be true or false"},
    {"'filter': {'term': {'category': 5}}", IXIA_EINVAL,
     "filter.term.category: value must be a string for keyword field"},
    {"'filter': {'term': {'title': 'two words'}}", IXIA_EINVAL, "filter.term.title: "},
    {"'filter': {'term': {'title': 'two words'}}", IXIA_EINVAL, "match"},
    {"'filter': {'in': {'category': []}}", IXIA_EINVAL, "filter.in.category: must be a non-empty"},
    {"'filter': {'in': {'category': 'US'}}", IXIA_EINVAL, "filter.in.category: "},
    {"'filter': {'in': {'qty': [1, 'x']}}", IXIA_EINVAL, "filter.in.qty[1]: value must be an integer"},
    {"'filter': {'and': [{'exists': 'price'}, {'exists': 'qty'}, {'range': {'price': {'gte': "
     "'a'}}}]}",
     IXIA_EINVAL, "filter.and[2].range.price: bound \"gte\" must be a number for double field"},
    {"'filter': {'range': {'price': {}}}", IXIA_EINVAL, "filter.range.price: must be an object"},
    {"'filter': {'range': {'price': 5}}", IXIA_EINVAL, "filter.range.price: "},
    {"'filter': {'range': {'price': {'gt': 1, 'gte': 2}}}", IXIA_EINVAL,
     "filter.range.price: bound \"gte\" conflicts"},
    {"'filter': {'range': {'qty': {'lte': 1, 'lt': 2}}}", IXIA_EINVAL,
     "filter.range.qty: bound \"lt\" conflicts"},
    {"'filter': {'range': {'price': {'from': 1}}}", IXIA_EINVAL,
     "filter.range.price: unknown bound \"from\""},
    {"'filter': {'range': {'title': {'gte': 'a'}}}", IXIA_EINVAL,
     "filter.range.title: range is not supported on text field"},
    {"'filter': {'range': {'active': {'gte': false}}}", IXIA_EINVAL,
     "filter.range.active: range is not supported on bool field"},
    {"'filter': {'range': {'category': {'gte': 1}}}", IXIA_EINVAL,
     "filter.range.category: bound \"gte\" must be a string"},
    {"'filter': {'prefix': {'qty': '1'}}", IXIA_EINVAL, "filter.prefix.qty: prefix needs a keyword"},
    {"'filter': {'prefix': {'title': 'ab cd'}}", IXIA_EINVAL, "filter.prefix.title: "},
    {"'filter': {'prefix': {'category': 3}}", IXIA_EINVAL, "filter.prefix.category: "},
    {"'filter': {'exists': 3}", IXIA_EINVAL, "filter.exists: must be a field name"},
    {"'filter': {'exists': {'field': 'nope'}}", IXIA_EINVAL, "filter.exists: field 'nope'"},
    {"'filter': {'exists': {'field': 'price', 'x': 1}}", IXIA_EINVAL, "filter.exists: "},
    {"'filter': {'match': {'category': 'x'}}", IXIA_EINVAL,
     "filter.match.category: match needs a text field"},
    {"'filter': {'match': {'title': '!!!'}}", IXIA_EINVAL, "filter.match.title: \"!!!\" has no words"},
    {"'filter': {'and': []}", IXIA_EINVAL, "filter.and: must be a non-empty array"},
    {"'filter': {'or': {'exists': 'price'}}", IXIA_EINVAL, "filter.or: must be a non-empty array"},
    {"'filter': {'or': [{'exists': 'price'}, {'term': {'nope': 1}}]}", IXIA_EINVAL,
     "filter.or[1].term.nope: field 'nope'"},
    {"'filter': {'not': []}", IXIA_EINVAL, "filter.not: a filter must be an object"},
    {"'filter': {'not': {'not': {'bad': 1}}}", IXIA_EINVAL, "filter.not.not: unknown filter \"bad\""},
    {"'aggs': []", IXIA_EINVAL, "aggs: must be an object"},
    {"'aggs': {'x': {}}", IXIA_EINVAL, "aggs.x: an aggregation must be an object with exactly one"},
    {"'aggs': {'x': {'sum': 'price', 'avg': 'price'}}", IXIA_EINVAL, "aggs.x: "},
    {"'aggs': {'x': {'median': 'price'}}", IXIA_EINVAL, "aggs.x: unknown aggregation \"median\""},
    {"'aggs': {'x': {'sum': 'category'}}", IXIA_EINVAL,
     "aggs.x.sum: sum needs a long, double or timestamp field; 'category' is keyword"},
    {"'aggs': {'x': {'sum': 'nope'}}", IXIA_EINVAL, "aggs.x.sum.field: field 'nope' is not indexed"},
    {"'aggs': {'x': {'avg': {'field': 'price', 'y': 1}}}", IXIA_EINVAL,
     "aggs.x.avg: unknown key \"y\""},
    {"'aggs': {'x': {'min': 5}}", IXIA_EINVAL, "aggs.x.min: needs a field"},
    {"'aggs': {'x': {'terms': {'field': 'title'}}}", IXIA_EINVAL,
     "aggs.x.terms: terms cannot read text field 'title'"},
    {"'aggs': {'x': {'terms': 'category'}}", IXIA_EINVAL, "aggs.x.terms: must be"},
    {"'aggs': {'x': {'terms': {'size': 5}}}", IXIA_EINVAL, "aggs.x.terms: needs a field"},
    {"'aggs': {'x': {'terms': {'field': 'category', 'size': 0}}}", IXIA_EINVAL,
     "aggs.x.terms: size must be an integer from 1 to 10000"},
    {"'aggs': {'x': {'terms': {'field': 'category', 'size': 10001}}}", IXIA_EINVAL,
     "aggs.x.terms: size"},
    {"'aggs': {'x': {'terms': {'field': 'category', 'aggs': {'m': {'max': 'nope'}}}}}", IXIA_EINVAL,
     "aggs.x.terms.aggs.m.max.field: field 'nope'"},
    {"'aggs': {'x': {'terms': {'field': 'category', 'aggs': {'count': {'count': {}}}}}}",
     IXIA_EINVAL, "aggs.x.terms.aggs.count: the name 'count' is reserved"},
    {"'aggs': {'x': {'percentiles': {'field': 'price', 'percents': [0]}}}", IXIA_EINVAL,
     "aggs.x.percentiles.percents: [0] must be a number in (0, 100]"},
    {"'aggs': {'x': {'percentiles': {'field': 'price', 'percents': [50, 101]}}}", IXIA_EINVAL,
     "aggs.x.percentiles.percents: [1]"},
    {"'aggs': {'x': {'percentiles': {'field': 'price', 'percents': []}}}", IXIA_EINVAL,
     "aggs.x.percentiles.percents: must be an array of 1 to 100"},
    {"'aggs': {'x': {'percentiles': {'field': 'price', 'percents': [50, 50]}}}", IXIA_EINVAL,
     "aggs.x.percentiles.percents: [1] repeats 50"},
    {"'aggs': {'x': {'percentiles': {'field': 'brand'}}}", IXIA_EINVAL,
     "aggs.x.percentiles: percentiles needs a long"},
    {"'aggs': {'x': {'cardinality': 'title'}}", IXIA_EINVAL,
     "aggs.x.cardinality: cardinality cannot read text field"},
    {"'aggs': {'x': {'count': {'field': 'price'}}}", IXIA_EINVAL, "aggs.x.count: count takes no"},
    {"'aggs': {'': {'count': {}}}", IXIA_EINVAL, "aggs: aggregation names must be 1 to 64 bytes"},
    {"'aggs': {'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa': {'count': {}}}",
     IXIA_EINVAL, "got 65"},
    {"'aggs': {'x': {'count': {}}, 'x': {'count': {}}}", IXIA_EINVAL, "query: aggs: key \"x\" given twice"},
    {"'sort': 'price'", IXIA_EINVAL, "sort: must be an array of 1 to 8 sort keys"},
    {"'aggs': {'h': {'histogram': {'field': 'price', 'interval': 0}}}", IXIA_EINVAL, "aggs.h.histogram: interval must be a number above 0"},
    {"'aggs': {'h': {'histogram': {'field': 'brand', 'interval': 1}}}", IXIA_EINVAL, "histogram needs a long, double or timestamp field"},
    {"'aggs': {'d': {'date_histogram': {'field': 'price', 'calendar_interval': 'day'}}}", IXIA_EINVAL, "date_histogram needs a timestamp field"},
    {"'aggs': {'d': {'date_histogram': {'field': 'ts'}}}", IXIA_EINVAL, "give either calendar_interval"},
    {"'aggs': {'d': {'date_histogram': {'field': 'ts', 'calendar_interval': 'fortnight'}}}", IXIA_EINVAL, "calendar_interval must be minute, hour"},
    {"'aggs': {'d': {'date_histogram': {'field': 'ts', 'fixed_interval': '1.5s'}}}", IXIA_EINVAL, "fixed_interval must be a whole number of seconds"},
    {"'aggs': {'d': {'date_histogram': {'field': 'ts', 'fixed_interval': '1d', 'time_zone': 'Europe/Paris'}}}", IXIA_EINVAL, "named zones are not supported"},
    {"'aggs': {'r': {'range': {'field': 'price', 'ranges': []}}}", IXIA_EINVAL, "aggs.r.range: ranges must be an array of 1 to 100"},
    {"'aggs': {'r': {'range': {'field': 'price', 'ranges': [{'from': 'a'}]}}}", IXIA_EINVAL, "aggs.r.range.ranges[0]: a range is"},
    {"'aggs': {'r': {'range': {'field': 'price', 'ranges': [{'to': 1}, {'key': '*-1', 'from': 5}]}}}", IXIA_EINVAL, "key \"*-1\" is already a range's"},
    {"'aggs': {'f': {'filters': {'filters': {}}}}", IXIA_EINVAL, "aggs.f.filters: must be {\"filters\""},
    {"'aggs': {'f': {'filters': {'filters': {'x': {'bogus': 1}}}}}", IXIA_EINVAL, "aggs.f.filters.filters.x: unknown filter \"bogus\""},
    {"'aggs': {'f': {'filter': {'filter': {'term': {'brand': 'a'}}, 'size': 3}}}", IXIA_EINVAL, "unknown key \"size\" (filter, aggs)"},
    {"'aggs': {'t': {'top_hits': {'size': 0}}}", IXIA_EINVAL, "aggs.t.top_hits: size must be an integer from 1 to 100"},
    {"'aggs': {'t': {'top_hits': {'sort': [{'title': 'asc'}]}}}", IXIA_EINVAL, "aggs.t.top_hits.sort[0].title: cannot sort by text field"},
    {"'aggs': {'t': {'top_hits': {'fields': ['a..b']}}}", IXIA_EINVAL, "fields must be an array"},
    {"'aggs': {'h': {'histogram': {'field': 'price', 'interval': 1, 'aggs': {'from': {'count': {}}}}}}", IXIA_EINVAL, "the name 'from' is reserved inside buckets"},
    {"'aggs': {'x': {'median': 'price'}}", IXIA_EINVAL, "unknown aggregation \"median\" (count, sum, avg, min, max, stats"},
    {"'filter': {'match_phrase': {'title': 'red hat'}}", IXIA_EINVAL,
     "filter.match_phrase.title: text field 'title' does not store positions; declare it with \"positions\": true"},
    {"'filter': {'match_phrase': {'price': 'red hat'}}", IXIA_EINVAL, "match_phrase needs a text field"},
    {"'filter': {'match_phrase': {'body': '!!'}}", IXIA_EINVAL, "has no words"},
    {"'filter': {'match': {'title': {'query': 'a', 'operator': 'xor'}}}", IXIA_EINVAL, "operator must be"},
    {"'filter': {'match': {'title': {'query': 'a', 'fuzzy': 1}}}", IXIA_EINVAL, "unknown key \"fuzzy\""},
    {"'filter': {'match': {'title': {'words': 'a'}}}", IXIA_EINVAL, "unknown key \"words\""},
    {"'filter': {'match': {'title': {'operator': 'or'}}}", IXIA_EINVAL, "takes a string of words"},
    {"'sort': []", IXIA_EINVAL, "sort: must be an array"},
    {"'sort': [{'title': 'asc'}]", IXIA_EINVAL, "sort[0].title: cannot sort by text field 'title'"},
    {"'sort': [{'price': 'up'}]", IXIA_EINVAL, "sort[0].price: order must be \"asc\" or \"desc\""},
    {"'sort': [{'price': {'missing': 'middle'}}]", IXIA_EINVAL, "sort[0].price: missing must be"},
    {"'sort': [{'price': {'order': 'asc', 'x': 1}}]", IXIA_EINVAL, "sort[0].price: unknown key \"x\""},
    {"'sort': ['price', {'price': 'desc'}]", IXIA_EINVAL, "sort[1]: price is already a sort key"},
    {"'sort': [{'nope': 'asc'}]", IXIA_EINVAL, "sort[0].nope: field 'nope' is not indexed"},
    {"'sort': [{'a': 1, 'b': 2}]", IXIA_EINVAL, "sort[0]: a sort key is"},
};

static void test_parse_errors(void) {
  ixia_query_limits_t lim = default_limits();
  CU_ASSERT_TRUE(G_N_ELEMENTS(bad_queries) >= 40);
  for (guint i = 0; i < G_N_ELEMENTS(bad_queries); i++) {
    ixia_error_t *e = NULL;
    ixia_query_t *q = parse_rest(bad_queries[i].rest, &lim, &e);
    gboolean good = !q && e && e->code == bad_queries[i].code &&
                    strstr(e->message, bad_queries[i].needle);
    if (!good)
      fprintf(stderr, "\nbad query %u (%s): got %s\n", i, bad_queries[i].rest,
              e ? e->message : "success");
    CU_ASSERT_TRUE(good);
    ixia_query_destroy(q);
    ixia_error_destroy(e);
  }

  /* Whole-request errors. */
  static const struct {
    const char *json;
    ixia_code_t code;
    const char *needle;
  } whole[] = {
      {"[1]", IXIA_EINVAL, "object"},
      {"{", IXIA_EINVAL, "malformed"},
      {"{'table': 'products'}", IXIA_EINVAL, "namespace: required"},
      {"{'namespace': 'shop'}", IXIA_EINVAL, "table: required"},
      {"{'namespace': 1, 'table': 'products'}", IXIA_EINVAL, "namespace: "},
      {"{'namespace': 'shop', 'table': 'nope'}", IXIA_ENOTFOUND, "shop.nope"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(whole); i++) {
    ixia_error_t *e = NULL;
    char *j = dq(whole[i].json);
    ixia_query_t *q = ixia_query_parse(j, strlen(j), lookup, NULL, &lim, &e);
    CU_ASSERT_PTR_NULL(q);
    CU_ASSERT_TRUE(e && e->code == whole[i].code && strstr(e->message, whole[i].needle));
    if (e && !strstr(e->message, whole[i].needle)) fprintf(stderr, "\n%s -> %s\n", j, e->message);
    ixia_query_destroy(q);
    ixia_error_destroy(e);
    g_free(j);
  }

  /* Oversized requests name the size. */
  GString *big = g_string_new("{\"namespace\": \"shop\", \"table\": \"products\", \"after\": \"");
  while (big->len < (2u << 20)) g_string_append(big, "xxxxxxxxxxxxxxxx");
  g_string_append(big, "\"}");
  ixia_error_t *be = NULL;
  CU_ASSERT_PTR_NULL(ixia_query_parse(big->str, big->len, lookup, NULL, &lim, &be));
  CU_ASSERT_TRUE(be && be->code == IXIA_ETOOLARGE && strstr(be->message, "1048576"));
  ixia_error_destroy(be);
  g_string_free(big, TRUE);

  /* Deep nesting is refused before any recursion. */
  GString *deep = g_string_new("{\"namespace\": \"shop\", \"table\": \"products\", \"filter\": ");
  for (int i = 0; i < 100; i++) g_string_append(deep, "{\"not\": ");
  g_string_append(deep, "{\"exists\": \"price\"}");
  for (int i = 0; i < 101; i++) g_string_append_c(deep, '}');
  ixia_error_t *e = NULL;
  CU_ASSERT_PTR_NULL(ixia_query_parse(deep->str, deep->len, lookup, NULL, &lim, &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ETOOLARGE);
  ixia_error_destroy(e);
  g_string_free(deep, TRUE);
}

static void test_parse_clause_limit(void) {
  ixia_query_limits_t lim = default_limits();
  lim.max_clauses = 5;
  ixia_error_t *e = NULL;
  /* and + 4 terms = 5 clauses. */
  ixia_query_t *q = parse_rest(
      "'filter': {'and': [{'exists': 'price'}, {'exists': 'qty'}, {'exists': 'ts'}, "
      "{'exists': 'tags'}]}",
      &lim, &e);
  CU_ASSERT_PTR_NOT_NULL(q);
  ixia_query_destroy(q);
  /* An "in" list is one clause, whatever its length, up to query.max_in_values. */
  GString *in = g_string_new("'filter': {'and': [{'exists': 'price'}, {'in': {'qty': [");
  for (int i = 0; i < 10000; i++) g_string_append_printf(in, "%s%d", i ? "," : "", i);
  g_string_append(in, "]}}]}, 'aggs': {'n': {'count': {}}, 'm': {'count': {}}}");
  q = parse_rest(in->str, &lim, &e);
  CU_ASSERT_PTR_NOT_NULL(q);
  if (q) CU_ASSERT_EQUAL(q->filter->children[1]->values->len, 10000);
  ixia_query_destroy(q);
  CU_ASSERT_PTR_NULL(e);
  lim.max_in_values = 9999;
  q = parse_rest(in->str, &lim, &e);
  CU_ASSERT_TRUE(!q && e && e->code == IXIA_ETOOLARGE && strstr(e->message, "filter.and[1].in.qty") &&
                 strstr(e->message, "query.max_in_values"));
  ixia_error_destroy(e), e = NULL;
  lim.max_in_values = 10000;
  g_string_free(in, TRUE);
  q = parse_rest("'filter': {'in': {'qty': [1, 2, 3, 4]}}, 'aggs': {'n': {'count': {}}, 'm': {'count': {}}, "
                 "'o': {'count': {}}, 'p': {'count': {}}, 'r': {'count': {}}}", &lim, &e);
  CU_ASSERT_TRUE(!q && e && e->code == IXIA_ETOOLARGE && strstr(e->message, "query.max_clauses"));
  ixia_error_destroy(e), e = NULL;
  /* The request's size limit names its option too. */
  lim.max_request_bytes = 40;
  q = parse_rest("'filter': {'exists': 'price'}, 'limit': 10", &lim, &e);
  CU_ASSERT_TRUE(!q && e && e->code == IXIA_ETOOLARGE &&
                 strstr(e->message, "(query.max_request_bytes)"));
  ixia_error_destroy(e), e = NULL;
  lim.max_request_bytes = 1 << 20;
  /* Nested aggregations count too. */
  q = parse_rest("'aggs': {'a': {'terms': {'field': 'category', 'aggs': {'b': {'terms': "
                 "{'field': 'brand', 'aggs': {'c': {'count': {}}, 'd': {'sum': 'price'}, "
                 "'e': {'max': 'price'}, 'f': {'min': 'price'}}}}}}}}",
                 &lim, &e);
  CU_ASSERT_TRUE(!q && e && e->code == IXIA_ETOOLARGE && strstr(e->message, "query.max_clauses"));
  ixia_error_destroy(e), e = NULL;
}

/* ---- matching ---- */

typedef struct {
  const char *filter;
  const char *doc;
  gboolean match;
} match_case_t;

static const match_case_t match_cases[] = {
    {"{'term': {'category': 'a'}}", "{'category': 'a'}", TRUE},
    {"{'term': {'category': 'a'}}", "{'category': 'b'}", FALSE},
    {"{'term': {'category': 'a'}}", "{}", FALSE},
    {"{'term': {'category': 'a'}}", "{'category': 5}", FALSE}, /* wrong type: absent */
    {"{'term': {'tags': 'y'}}", "{'tags': ['x', 'y']}", TRUE},
    {"{'term': {'tags': 'z'}}", "{'tags': ['x', 'y']}", FALSE},
    {"{'term': {'price': 10}}", "{'price': 10.0}", TRUE},
    {"{'term': {'price': 0}}", "{'price': -0.0}", TRUE},
    {"{'term': {'qty': 3}}", "{'qty': [1, 3]}", TRUE},
    {"{'term': {'active': false}}", "{'active': false}", TRUE},
    {"{'term': {'active': false}}", "{'active': true}", FALSE},
    {"{'term': {'title': 'Red'}}", "{'title': 'big red shoes'}", TRUE},
    /* Analyzers: Unicode folding everywhere, stems in English fields. */
    {"{'match': {'title': 'CAF\xc3\x89 stra\xc3\x9f" "e'}}", "{'title': 'caf\xc3\xa9 STRASSE'}", TRUE},
    {"{'match': {'body': 'Running Mugs'}}", "{'body': 'She runs a mug shop'}", TRUE},
    {"{'match': {'body': 'Running Mugs'}}", "{'body': 'She runs a shop'}", FALSE},
    {"{'match': {'title': 'Running'}}", "{'title': 'She runs'}", FALSE}, /* standard: no stems */
    {"{'term': {'body': 'MUGS'}}", "{'body': 'one mug'}", TRUE},
    {"{'prefix': {'body': 'gener'}}", "{'body': 'Generously'}", TRUE},
    {"{'prefix': {'title': 'STRA'}}", "{'title': 'Stra\xc3\x9f" "e'}", TRUE},
    {"{'term': {'seller.country': 'US'}}", "{'seller': [{'country': 'FR'}, {'country': ['DE', 'US']}]}", TRUE},
    /* match with "or"; match_phrase on a field with positions */
    {"{'match': {'title': {'query': 'red blue', 'operator': 'or'}}}", "{'title': 'a blue hat'}", TRUE},
    {"{'match': {'title': {'query': 'red blue', 'operator': 'or'}}}", "{'title': 'a green hat'}", FALSE},
    {"{'match': {'title': {'query': 'red blue'}}}", "{'title': 'a blue hat'}", FALSE},
    {"{'match_phrase': {'body': 'Running mugs'}}", "{'body': 'She is RUNNING, MUGS in hand'}", TRUE},
    {"{'match_phrase': {'body': 'Running mugs'}}", "{'body': 'mugs running'}", FALSE},
    {"{'match_phrase': {'body': 'Running mugs'}}", "{'body': ['she was running', 'mugs in hand']}", FALSE},
    {"{'match_phrase': {'body': 'run run'}}", "{'body': 'runs running'}", TRUE},
    {"{'match_phrase': {'body': 'run run'}}", "{'body': 'runs a running'}", FALSE},
    {"{'match_phrase': {'body': {'query': 'mug'}}}", "{'body': 'mugs'}", TRUE},
    {"{'and': [{'term': {'seller.country': 'US'}}, {'term': {'seller.country': 'FR'}}]}",
     "{'seller': [{'country': 'FR'}, {'country': 'US'}]}", TRUE},
    {"{'term': {'title': 'red'}}", "{'title': 'redder'}", FALSE},
    {"{'term': {'seller.country': 'US'}}", "{'seller': {'country': 'US'}}", TRUE},
    {"{'in': {'category': ['b', 'c']}}", "{'category': 'c'}", TRUE},
    {"{'in': {'category': ['b', 'c']}}", "{'category': 'a'}", FALSE},
    {"{'in': {'tags': ['q', 'y']}}", "{'tags': ['x', 'y']}", TRUE},
    {"{'range': {'price': {'gte': 10, 'lt': 20}}}", "{'price': 10}", TRUE},
    {"{'range': {'price': {'gte': 10, 'lt': 20}}}", "{'price': 20}", FALSE},
    {"{'range': {'price': {'gt': 10, 'lte': 20}}}", "{'price': 20}", TRUE},
    {"{'range': {'price': {'gt': 10, 'lte': 20}}}", "{'price': 10}", FALSE},
    {"{'range': {'price': {'gt': -5.5}}}", "{'price': -5}", TRUE},
    {"{'range': {'price': {'lt': -5.5}}}", "{'price': -5}", FALSE},
    {"{'range': {'price': {'lt': 0}}}", "{'price': [5, -1]}", TRUE},
    {"{'range': {'price': {'gte': 10, 'lt': 20}}}", "{'price': [5, 25]}", FALSE},
    {"{'range': {'qty': {'gt': 2.5}}}", "{'qty': 3}", TRUE},
    {"{'range': {'qty': {'gt': 2.5}}}", "{'qty': 2}", FALSE},
    {"{'range': {'ts': {'gte': 1000}}}", "{}", FALSE},
    {"{'range': {'category': {'gte': 'b', 'lt': 'c'}}}", "{'category': 'bz'}", TRUE},
    {"{'range': {'category': {'gte': 'b', 'lt': 'c'}}}", "{'category': 'c'}", FALSE},
    {"{'prefix': {'category': 'ab'}}", "{'category': 'abc'}", TRUE},
    {"{'prefix': {'category': 'ab'}}", "{'category': 'a'}", FALSE},
    {"{'prefix': {'category': 'Ab'}}", "{'category': 'abc'}", FALSE}, /* keywords are exact */
    {"{'prefix': {'tags': 'y'}}", "{'tags': ['x', 'yes']}", TRUE},
    {"{'prefix': {'title': 'SHO'}}", "{'title': 'Red Shoes'}", TRUE},
    {"{'prefix': {'title': 'hoe'}}", "{'title': 'Red Shoes'}", FALSE},
    {"{'exists': 'price'}", "{'price': 0}", TRUE},
    {"{'exists': 'price'}", "{'price': null}", FALSE},
    {"{'exists': 'price'}", "{'price': []}", FALSE},
    {"{'exists': 'price'}", "{'price': [null, 'x']}", FALSE},
    {"{'exists': {'field': 'seller.country'}}", "{'seller': {'country': 'FR'}}", TRUE},
    {"{'match': {'title': 'red SHOES'}}", "{'title': 'shoes, in red'}", TRUE},
    {"{'match': {'title': 'red shoes'}}", "{'title': 'red boots'}", FALSE},
    {"{'match': {'title': 'red shoes'}}", "{'title': ['red boots', 'blue shoes']}", TRUE},
    {"{'match': {'title': 'red'}}", "{}", FALSE},
    {"{'and': [{'term': {'category': 'a'}}, {'range': {'price': {'lt': 5}}}]}",
     "{'category': 'a', 'price': 4}", TRUE},
    {"{'and': [{'term': {'category': 'a'}}, {'range': {'price': {'lt': 5}}}]}",
     "{'category': 'a', 'price': 6}", FALSE},
    {"{'or': [{'term': {'category': 'a'}}, {'exists': 'qty'}]}", "{'qty': 1}", TRUE},
    {"{'or': [{'term': {'category': 'a'}}, {'exists': 'qty'}]}", "{'category': 'b'}", FALSE},
    {"{'not': {'term': {'tags': 'x'}}}", "{'tags': ['x', 'y']}", FALSE},
    {"{'not': {'term': {'tags': 'x'}}}", "{}", TRUE},
    {"{'not': {'not': {'exists': 'tags'}}}", "{'tags': 'q'}", TRUE},
};

static void test_match_doc(void) {
  for (guint i = 0; i < G_N_ELEMENTS(match_cases); i++) {
    char *rest = g_strdup_printf("'filter': %s", match_cases[i].filter);
    ixia_query_t *q = parse_ok(rest);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    cJSON *doc = doc_of(match_cases[i].doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    gboolean m = ixia_query_match_doc(q, doc);
    if (m != match_cases[i].match)
      fprintf(stderr, "\nmatch case %u: %s on %s gave %d\n", i, match_cases[i].filter,
              match_cases[i].doc, m);
    CU_ASSERT_EQUAL(m, match_cases[i].match);
    cJSON_Delete(doc);
    ixia_query_destroy(q);
    g_free(rest);
  }
  ixia_query_t *q = parse_ok("");
  cJSON *doc = doc_of("{}");
  CU_ASSERT_TRUE(ixia_query_match_doc(q, doc)); /* no filter: everything */
  cJSON_Delete(doc);
  ixia_query_destroy(q);
}

/* ---- aggregations ---- */

static const char *HAND_AGGS =
    "'aggs': {'n': {'count': {}}, 's': {'sum': 'price'}, 'av': {'avg': 'price'},"
    " 'mn': {'min': 'price'}, 'mx': {'max': {'field': 'price'}}, 'sq': {'sum': 'qty'},"
    " 't': {'terms': {'field': 'category', 'size': 2, 'aggs': {'m': {'max': 'price'},"
    "   'c': {'count': {}}, 'tg': {'terms': {'field': 'tags'}}}}},"
    " 'tg': {'terms': {'field': 'tags'}},"
    " 'p': {'percentiles': {'field': 'price', 'percents': [1, 25, 50, 100]}},"
    " 'card': {'cardinality': 'tags'}, 'cardp': {'cardinality': {'field': 'price'}}}";

static const char *HAND_DOCS[] = {
    "{'category': 'a', 'price': 10, 'qty': 1, 'tags': ['x', 'y']}",
    "{'category': 'b', 'price': 20, 'qty': 2, 'tags': ['x']}",
    "{'category': 'a', 'price': 30, 'tags': ['y', 'y']}",
    "{'category': 'c', 'price': [40, 5]}",
    "{'price': 'bad', 'category': 7}",
};

static gboolean json_equals_sq(const cJSON *got, const char *want_sq) {
  cJSON *want = doc_of(want_sq);
  gboolean eq = want && cJSON_Compare(got, want, TRUE);
  if (!eq) {
    char *g = ixia_json_print(got);
    fprintf(stderr, "\ngot:  %s\n", g);
    g_free(g);
    char *w = dq(want_sq);
    fprintf(stderr, "want: %s\n", w);
    g_free(w);
  }
  cJSON_Delete(want);
  return eq;
}

/* A histogram whose filled gaps would exceed query.max_terms_buckets is
 * refused at once, not after building the empty buckets (found by the
 * agg_partial fuzz target: a partial with far-apart keys took 0.6 s); and
 * keys too large for key + interval to move on in a double do not loop. */
static void test_histogram_gaps_bounded(void) {
  ixia_query_t *q = parse_ok("'aggs': {'h': {'histogram': {'field': 'price', 'interval': 1}}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  ixia_query_limits_t lim = default_limits();
  ixia_aggs_t *a = ixia_aggs_new(q, &lim);
  ixia_error_t *e = NULL;
  const char *far[] = {"{'price': 0}", "{'price': 1e12}"};
  for (guint i = 0; i < G_N_ELEMENTS(far); i++) {
    cJSON *d = doc_of(far[i]);
    CU_ASSERT_TRUE(ixia_aggs_add_doc(a, d, &e));
    cJSON_Delete(d);
  }
  cJSON *r = ixia_aggs_result(a, &e);
  CU_ASSERT_PTR_NULL(r);
  CU_ASSERT_TRUE(e && e->code == IXIA_ETOOLARGE && strstr(e->message, "query.max_terms_buckets"));
  ixia_error_destroy(e), e = NULL;
  cJSON_Delete(r);
  ixia_aggs_destroy(a);

  a = ixia_aggs_new(q, &lim);
  const char *huge[] = {"{'price': 1e17}", "{'price': 100000000000000016}"};
  for (guint i = 0; i < G_N_ELEMENTS(huge); i++) {
    cJSON *d = doc_of(huge[i]);
    CU_ASSERT_TRUE(ixia_aggs_add_doc(a, d, &e));
    cJSON_Delete(d);
  }
  r = ixia_aggs_result(a, &e);
  CU_ASSERT_PTR_NOT_NULL(r);
  if (!r) fprintf(stderr, "histogram of huge keys: %s\n", e->message);
  ixia_error_destroy(e);
  /* Two non-empty buckets and at most the 15 empty ones between them. */
  int nb = cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "h"), "buckets"));
  CU_ASSERT_TRUE(nb >= 2 && nb <= 17);
  cJSON_Delete(r);
  ixia_aggs_destroy(a);
  ixia_query_destroy(q);
}

static void test_aggs_hand(void) {
  ixia_query_t *q = parse_ok(HAND_AGGS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  ixia_query_limits_t lim = default_limits();
  ixia_aggs_t *a = ixia_aggs_new(q, &lim);
  ixia_error_t *e = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(HAND_DOCS); i++) {
    cJSON *d = doc_of(HAND_DOCS[i]);
    CU_ASSERT_TRUE(ixia_aggs_add_doc(a, d, &e));
    cJSON_Delete(d);
  }
  CU_ASSERT_PTR_NULL(e);
  cJSON *r = ixia_aggs_result_json(a);
  CU_ASSERT_TRUE(json_equals_sq(
      r,
      "{'n': {'value': 5}, 's': {'value': 105}, 'av': {'value': 21}, 'mn': {'value': 5},"
      " 'mx': {'value': 40}, 'sq': {'value': 3},"
      " 't': {'buckets': [{'key': 'a', 'count': 2, 'm': {'value': 30}, 'c': {'value': 2},"
      "                    'tg': {'buckets': [{'key': 'y', 'count': 2}, {'key': 'x', 'count': 1}],"
      "                           'other_count': 0}},"
      "                   {'key': 'b', 'count': 1, 'm': {'value': 20}, 'c': {'value': 1},"
      "                    'tg': {'buckets': [{'key': 'x', 'count': 1}], 'other_count': 0}}],"
      "       'other_count': 1},"
      " 'tg': {'buckets': [{'key': 'x', 'count': 2}, {'key': 'y', 'count': 2}], 'other_count': 0},"
      " 'p': {'values': {'1': 5, '25': 10, '50': 20, '100': 40}, 'exact': true},"
      " 'card': {'value': 2}, 'cardp': {'value': 5}}"));
  cJSON_Delete(r);
  CU_ASSERT_TRUE(ixia_aggs_memory(a) > 0);
  ixia_aggs_destroy(a);

  /* The index path: values handed over directly. */
  a = ixia_aggs_new(q, &lim);
  guint n = q->n_agg_fields;
  ixia_val_t *vals[8] = {0};
  guint nvals[8] = {0};
  CU_ASSERT_FATAL(n <= 8);
  guint8 enc[8];
  ixia_num_encode(7, enc);
  ixia_val_t price = {enc, 8}, cat = {(const guint8 *)"zz", 2};
  for (guint i = 0; i < n; i++) {
    if (q->agg_fields[i] == field("price")) vals[i] = &price, nvals[i] = 1;
    if (q->agg_fields[i] == field("category")) vals[i] = &cat, nvals[i] = 1;
  }
  CU_ASSERT_TRUE(ixia_aggs_add(a, (const ixia_val_t *const *)vals, nvals, &e));
  r = ixia_aggs_result_json(a);
  CU_ASSERT_TRUE(json_equals_sq(cJSON_GetObjectItem(r, "t"),
                                "{'buckets': [{'key': 'zz', 'count': 1, 'm': {'value': 7},"
                                " 'c': {'value': 1}, 'tg': {'buckets': [], 'other_count': 0}}],"
                                " 'other_count': 0}"));
  CU_ASSERT_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "av"), "value")->valuedouble, 7);
  cJSON_Delete(r);
  ixia_aggs_destroy(a);

  /* Nothing matched. */
  a = ixia_aggs_new(q, &lim);
  r = ixia_aggs_result_json(a);
  CU_ASSERT_TRUE(json_equals_sq(
      r,
      "{'n': {'value': 0}, 's': {'value': 0}, 'av': {'value': null}, 'mn': {'value': null},"
      " 'mx': {'value': null}, 'sq': {'value': 0}, 't': {'buckets': [], 'other_count': 0},"
      " 'tg': {'buckets': [], 'other_count': 0},"
      " 'p': {'values': {'1': null, '25': null, '50': null, '100': null}, 'exact': true},"
      " 'card': {'value': 0}, 'cardp': {'value': 0}}"));
  cJSON_Delete(r);
  ixia_aggs_destroy(a);
  ixia_query_destroy(q);

  /* Non-string keys, and percent keys that are not integers. */
  q = parse_ok("'aggs': {'q': {'terms': {'field': 'qty'}}, 'b': {'terms': {'field': 'active'}},"
               " 'p': {'percentiles': {'field': 'qty', 'percents': [99.9, 0.5]}}}");
  a = ixia_aggs_new(q, &lim);
  const char *docs[] = {"{'qty': 2, 'active': true}", "{'qty': -3, 'active': true}",
                        "{'qty': 2, 'active': false}"};
  for (guint i = 0; i < G_N_ELEMENTS(docs); i++) {
    cJSON *d = doc_of(docs[i]);
    ixia_aggs_add_doc(a, d, NULL);
    cJSON_Delete(d);
  }
  r = ixia_aggs_result_json(a);
  CU_ASSERT_TRUE(json_equals_sq(
      r, "{'q': {'buckets': [{'key': 2, 'count': 2}, {'key': -3, 'count': 1}], 'other_count': 0},"
         " 'b': {'buckets': [{'key': true, 'count': 2}, {'key': false, 'count': 1}],"
         "       'other_count': 0},"
         " 'p': {'values': {'99.9': 2, '0.5': -3}, 'exact': true}}"));
  cJSON_Delete(r);
  ixia_aggs_destroy(a);
  ixia_query_destroy(q);
}

/* Sums are exact whatever the order: 1e16 + 1 - 1e16 is 1, not 0. */
static void test_aggs_sum_exact(void) {
  ixia_query_t *q = parse_ok("'aggs': {'s': {'sum': 'price'}, 'a': {'avg': 'price'}}");
  ixia_query_limits_t lim = default_limits();
  ixia_aggs_t *a = ixia_aggs_new(q, &lim);
  const char *docs[] = {"{'price': 1e16}", "{'price': 1}", "{'price': -1e16}", "{'price': 0.1}",
                        "{'price': 0.2}"};
  for (guint i = 0; i < G_N_ELEMENTS(docs); i++) {
    cJSON *d = doc_of(docs[i]);
    ixia_aggs_add_doc(a, d, NULL);
    cJSON_Delete(d);
  }
  cJSON *r = ixia_aggs_result_json(a);
  double s = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "s"), "value")->valuedouble;
  CU_ASSERT_EQUAL(s, 1.3); /* the double nearest to the exact 1.3000000000000000166 */
  cJSON_Delete(r);
  ixia_aggs_destroy(a);
  ixia_query_destroy(q);

  /* Partials carry doubles bit for bit, also those cJSON would print with
   * 15 digits ("0.3" for 0.1 + 0.2). */
  q = parse_ok("'aggs': {'mn': {'min': 'price'}, 'p': {'percentiles': {'field': 'price', "
               "'percents': [100]}}, 's': {'sum': 'price'}}");
  a = ixia_aggs_new(q, &lim);
  const double x = 0.1 + 0.2;
  cJSON *d = cJSON_CreateObject();
  cJSON_AddNumberToObject(d, "price", x);
  ixia_aggs_add_doc(a, d, NULL);
  cJSON_Delete(d);
  cJSON *p = ixia_aggs_partial_json(a);
  char *wire = ixia_json_print(p);
  cJSON *back = cJSON_Parse(wire);
  ixia_aggs_t *m = ixia_aggs_new(q, &lim);
  CU_ASSERT_TRUE(ixia_aggs_merge_partial(m, back, NULL));
  r = ixia_aggs_result_json(m);
  CU_ASSERT_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "mn"), "value")->valuedouble, x);
  CU_ASSERT_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "s"), "value")->valuedouble, x);
  CU_ASSERT_EQUAL(
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "p"), "values"), "100")
          ->valuedouble,
      x);
  cJSON_Delete(r);
  cJSON_Delete(p);
  cJSON_Delete(back);
  g_free(wire);
  ixia_aggs_destroy(m);
  ixia_aggs_destroy(a);
  ixia_query_destroy(q);
}

/* Random documents for the split/merge property. */
static cJSON *random_doc(GRand *r) {
  cJSON *d = cJSON_CreateObject();
  if (g_rand_int_range(r, 0, 10))
    cJSON_AddItemToObject(d, "category",
                          cJSON_CreateString((char[]){'c', (char)('a' + g_rand_int_range(r, 0, 15)), 0}));
  int ntags = g_rand_int_range(r, 0, 4);
  if (ntags) {
    cJSON *t = cJSON_AddArrayToObject(d, "tags");
    for (int i = 0; i < ntags; i++) {
      char tag[8];
      g_snprintf(tag, sizeof tag, "t%d", g_rand_int_range(r, 0, 12));
      cJSON_AddItemToArray(t, cJSON_CreateString(tag));
    }
  }
  int np = g_rand_int_range(r, 0, 4);
  if (np == 1) {
    cJSON_AddNumberToObject(d, "price", g_rand_double_range(r, -50, 1000) * pow(10, g_rand_int_range(r, -3, 4)));
  } else if (np > 1) {
    cJSON *p = cJSON_AddArrayToObject(d, "price");
    for (int i = 0; i < np; i++)
      cJSON_AddItemToArray(p, cJSON_CreateNumber(g_rand_boolean(r) ? 0 : g_rand_double_range(r, -1e6, 1e6)));
  }
  if (g_rand_boolean(r)) cJSON_AddNumberToObject(d, "qty", g_rand_int_range(r, -100000, 100000));
  if (g_rand_boolean(r)) cJSON_AddBoolToObject(d, "active", g_rand_boolean(r));
  if (g_rand_int_range(r, 0, 20) == 0) cJSON_AddStringToObject(d, "qty", "wrong type");
  return d;
}

static const char *MERGE_AGGS =
    "'aggs': {'n': {'count': {}}, 's': {'sum': 'price'}, 'av': {'avg': 'price'},"
    " 'mn': {'min': 'price'}, 'mx': {'max': 'price'}, 'sq': {'sum': 'qty'},"
    " 'p': {'percentiles': {'field': 'price', 'percents': [1, 10, 50, 90, 99, 100]}},"
    " 'pq': {'percentiles': 'qty'}, 'card': {'cardinality': 'tags'}, 'cq': {'cardinality': 'qty'},"
    " 'b': {'terms': {'field': 'active'}},"
    " 't': {'terms': {'field': 'category', 'size': 5, 'aggs': {"
    "    'av': {'avg': 'price'}, 'p': {'percentiles': 'price'}, 'card': {'cardinality': 'tags'},"
    "    'tg': {'terms': {'field': 'tags', 'size': 3, 'aggs': {'s': {'sum': 'qty'}}}}}}}}";

/* Same shape and bit-identical numbers (printed text could hide an ulp). */
static gboolean json_identical(const cJSON *a, const cJSON *b) {
  if (!a || !b || (a->type & 0xff) != (b->type & 0xff)) return FALSE;
  if ((a->string || b->string) && (!a->string || !b->string || strcmp(a->string, b->string)))
    return FALSE;
  if (cJSON_IsNumber(a))
    return a->valuedouble == b->valuedouble || (isnan(a->valuedouble) && isnan(b->valuedouble));
  if (cJSON_IsString(a)) return strcmp(a->valuestring, b->valuestring) == 0;
  const cJSON *x = a->child, *y = b->child;
  for (; x && y; x = x->next, y = y->next)
    if (!json_identical(x, y)) return FALSE;
  return !x && !y;
}

static char *result_text(const ixia_aggs_t *a) {
  cJSON *r = ixia_aggs_result_json(a);
  char *s = ixia_json_print(r);
  cJSON_Delete(r);
  return s;
}

/* Accumulates docs in one state, and split in nshards states merged through
 * their partials as text; returns both result texts. */
static void single_and_merged(const ixia_query_t *q, const ixia_query_limits_t *lim, cJSON **docs,
                              guint ndocs, guint nshards, GRand *r, char **single,
                              char **merged, guint *exact_shards) {
  ixia_aggs_t *all = ixia_aggs_new(q, lim);
  ixia_aggs_t *shards[3];
  for (guint s = 0; s < nshards; s++) shards[s] = ixia_aggs_new(q, lim);
  ixia_error_t *e = NULL;
  for (guint i = 0; i < ndocs; i++) {
    CU_ASSERT_TRUE(ixia_aggs_add_doc(all, docs[i], &e));
    CU_ASSERT_TRUE(ixia_aggs_add_doc(shards[g_rand_int_range(r, 0, nshards)], docs[i], &e));
  }
  ixia_aggs_t *m = ixia_aggs_new(q, lim);
  for (guint s = 0; s < nshards; s++) {
    cJSON *p = ixia_aggs_partial_json(shards[s]);
    /* Shards whose price percentiles were still exact values. */
    if (cJSON_GetObjectItem(cJSON_GetObjectItem(p, "p"), "e")) (*exact_shards)++;
    char *wire = ixia_json_print(p);
    cJSON *back = cJSON_Parse(wire);
    CU_ASSERT_TRUE(ixia_aggs_merge_partial(m, back, &e));
    cJSON_Delete(p);
    cJSON_Delete(back);
    g_free(wire);
    ixia_aggs_destroy(shards[s]);
  }
  if (e) fprintf(stderr, "\nmerge error: %s\n", e->message);
  CU_ASSERT_PTR_NULL(e);
  ixia_error_destroy(e);
  cJSON *rs = ixia_aggs_result_json(all), *rm = ixia_aggs_result_json(m);
  CU_ASSERT_TRUE(json_identical(rs, rm));
  cJSON_Delete(rs);
  cJSON_Delete(rm);
  *single = result_text(all);
  *merged = result_text(m);
  ixia_aggs_destroy(all);
  ixia_aggs_destroy(m);
}

static double pct_value(const char *result, const char *agg, const char *key) {
  cJSON *r = cJSON_Parse(result);
  const cJSON *v =
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, agg), "values"), key);
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  cJSON_Delete(r);
  return d;
}

static gboolean pct_exact_flag(const char *result, const char *agg) {
  cJSON *r = cJSON_Parse(result);
  gboolean ex = cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(r, agg), "exact"));
  cJSON_Delete(r);
  return ex;
}

/* The later aggregations split over shards and merged are what one state
 * over everything gives (top_hits included: documents added with keys). */
static void test_aggs_more_split_merge(void) {
  ixia_query_t *q = parse_ok(
      "'aggs': {'st': {'stats': 'price'}, 'h': {'histogram': {'field': 'qty', 'interval': 5000,"
      " 'aggs': {'c': {'count': {}}, 'top': {'top_hits': {'size': 2, 'sort': [{'price': 'desc'}]}}}}},"
      " 'dm': {'date_histogram': {'field': 'ts', 'calendar_interval': 'month', 'time_zone': '+05:45',"
      "  'aggs': {'s': {'stats': 'qty'}}}},"
      " 'dd': {'date_histogram': {'field': 'ts', 'fixed_interval': '7d', 'min_doc_count': 3}},"
      " 'rg': {'range': {'field': 'price', 'ranges': [{'to': 0}, {'key': 'mid', 'from': 0, 'to': 500}, {'from': 100}],"
      "  'aggs': {'t': {'terms': {'field': 'tags'}}}}},"
      " 'f': {'filter': {'filter': {'term': {'active': true}}, 'aggs': {'m': {'max': 'qty'}}}},"
      " 'fs': {'filters': {'filters': {'a': {'prefix': {'category': 'ca'}}, 'b': {'exists': 'price'}},"
      "  'aggs': {'top': {'top_hits': {'size': 3}}}}},"
      " 'th': {'top_hits': {'size': 5, 'sort': [{'qty': 'asc'}, {'ts': {'order': 'desc', 'missing': 'first'}}]}}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  GRand *r = g_rand_new_with_seed(9);
  ixia_query_limits_t lim = default_limits();
  ixia_aggs_t *all = ixia_aggs_new(q, &lim), *shards[3];
  for (int i = 0; i < 3; i++) shards[i] = ixia_aggs_new(q, &lim);
  ixia_error_t *e = NULL;
  for (int i = 0; i < 900; i++) {
    cJSON *d = random_doc(r);
    if (g_rand_int_range(r, 0, 5)) {
      gint64 t = ixia_days_from_civil(2024, (guint)g_rand_int_range(r, 1, 13), 1) * 86400 +
                 g_rand_int_range(r, -86400, 86400);
      cJSON_AddNumberToObject(d, "ts", (double)t);
    }
    char key[16];
    g_snprintf(key, sizeof key, "d%04d", i);
    CU_ASSERT_TRUE(ixia_aggs_add_hit(all, d, key, i, 0, &e));
    CU_ASSERT_TRUE(ixia_aggs_add_hit(shards[g_rand_int_range(r, 0, 3)], d, key, i, 0, &e));
    cJSON_Delete(d);
  }
  ixia_aggs_t *m = ixia_aggs_new(q, &lim);
  for (int i = 0; i < 3; i++) {
    cJSON *p = ixia_aggs_partial_json(shards[i]);
    char *wire = ixia_json_print(p);
    cJSON *back = cJSON_Parse(wire);
    CU_ASSERT_TRUE(ixia_aggs_merge_partial(m, back, &e));
    cJSON_Delete(p), cJSON_Delete(back);
    g_free(wire);
    ixia_aggs_destroy(shards[i]);
  }
  if (e) fprintf(stderr, "\n%s\n", e->message);
  CU_ASSERT_PTR_NULL(e);
  char *a = result_text(all), *b = result_text(m);
  CU_ASSERT_STRING_EQUAL(a, b);
  /* Spot checks: months at +05:45 start at local midnight; 12 of them. */
  cJSON *res = cJSON_Parse(a);
  cJSON *dm = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "dm"), "buckets");
  CU_ASSERT_TRUE(cJSON_GetArraySize(dm) >= 12);
  for (cJSON *bk = dm ? dm->child : NULL; bk; bk = bk->next)
    CU_ASSERT_PTR_NOT_NULL(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(bk, "key_as_string")), "-01T00:00:00+05:45"));
  cJSON *th = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "th"), "hits");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(th), 5);
  cJSON_Delete(res);
  g_free(a), g_free(b);
  ixia_aggs_destroy(all);
  ixia_aggs_destroy(m);
  g_rand_free(r);
  ixia_query_destroy(q);
}

static void test_aggs_split_merge(void) {
  ixia_query_t *q = parse_ok(MERGE_AGGS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  GRand *r = g_rand_new_with_seed(42);
  const guint ndocs = 1200; /* ~1800 prices, ~600 quantities */
  cJSON **docs = g_new(cJSON *, ndocs);
  for (guint i = 0; i < ndocs; i++) docs[i] = random_doc(r);

  ixia_query_limits_t exact = default_limits();
  ixia_query_limits_t hist = default_limits();
  hist.max_exact_values = 150; /* shards hold >= ~600 prices: every side a histogram */
  ixia_query_limits_t mixed = default_limits();
  mixed.max_exact_values = 1000; /* shards (<= ~950 prices) exact, the merged 1800 not */

  for (guint nshards = 2; nshards <= 3; nshards++) {
    char *s1, *m1, *s2, *m2, *s3, *m3;
    guint ex1 = 0, ex2 = 0, ex3 = 0;
    single_and_merged(q, &exact, docs, ndocs, nshards, r, &s1, &m1, &ex1);
    CU_ASSERT_STRING_EQUAL(s1, m1);
    CU_ASSERT_TRUE(pct_exact_flag(s1, "p"));
    CU_ASSERT_EQUAL(ex1, nshards);
    single_and_merged(q, &hist, docs, ndocs, nshards, r, &s2, &m2, &ex2);
    CU_ASSERT_STRING_EQUAL(s2, m2);
    CU_ASSERT_FALSE(pct_exact_flag(m2, "p"));
    CU_ASSERT_EQUAL(ex2, 0);
    single_and_merged(q, &mixed, docs, ndocs, nshards, r, &s3, &m3, &ex3);
    CU_ASSERT_STRING_EQUAL(s3, m3);
    CU_ASSERT_FALSE(pct_exact_flag(m3, "p"));
    CU_ASSERT_TRUE(pct_exact_flag(m3, "pq"));
    CU_ASSERT_EQUAL(ex3, nshards);
    if (strcmp(s2, m2) != 0) fprintf(stderr, "\nsingle %s\nmerged %s\n", s2, m2);
    /* Histogram percentiles stay within 1% of the exact ones. */
    static const char *keys[] = {"1", "10", "50", "90", "99", "100"};
    for (guint k = 0; k < G_N_ELEMENTS(keys); k++) {
      double want = pct_value(s1, "p", keys[k]), got = pct_value(m2, "p", keys[k]);
      CU_ASSERT_TRUE(fabs(got - want) <= 0.01 * fabs(want));
      if (!(fabs(got - want) <= 0.01 * fabs(want)))
        fprintf(stderr, "\np%s exact %.17g histogram %.17g\n", keys[k], want, got);
      double wq = pct_value(s1, "pq", "50"), gq = pct_value(m2, "pq", "50");
      CU_ASSERT_TRUE(fabs(gq - wq) <= 0.01 * fabs(wq));
    }
    /* Everything but percentiles is the same in both modes. */
    cJSON *a = cJSON_Parse(s1), *b = cJSON_Parse(s2);
    CU_ASSERT_TRUE(cJSON_Compare(cJSON_GetObjectItem(a, "s"), cJSON_GetObjectItem(b, "s"), TRUE));
    CU_ASSERT_TRUE(cJSON_Compare(cJSON_GetObjectItem(a, "card"), cJSON_GetObjectItem(b, "card"), TRUE));
    CU_ASSERT_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "n"), "value")->valuedouble, ndocs);
    cJSON_Delete(a);
    cJSON_Delete(b);
    g_free(s1), g_free(m1), g_free(s2), g_free(m2), g_free(s3), g_free(m3);
  }
  /* The brute-force count agrees with the document count; cardinality of
   * tags is every tag used (12 possible). */
  for (guint i = 0; i < ndocs; i++) cJSON_Delete(docs[i]);
  g_free(docs);
  g_rand_free(r);
  ixia_query_destroy(q);
}

/* A partial that is not one of ours is refused, and the state then too. */
static void test_aggs_bad_partial(void) {
  ixia_query_t *q = parse_ok("'aggs': {'s': {'sum': 'price'}, 't': {'terms': {'field': 'tags'}}}");
  ixia_query_limits_t lim = default_limits();
  ixia_aggs_t *a = ixia_aggs_new(q, &lim);
  ixia_error_t *e = NULL;
  cJSON *p = doc_of("{'s': {'n': 1, 's': 'AAAA', 'x': 0}, 't': {'n': 0, 'b': []}}");
  CU_ASSERT_FALSE(ixia_aggs_merge_partial(a, p, &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_EINVAL && strstr(e->message, "s: malformed sum"));
  ixia_error_destroy(e), e = NULL;
  cJSON_Delete(p);
  cJSON *d = doc_of("{'price': 1}");
  CU_ASSERT_FALSE(ixia_aggs_add_doc(a, d, &e));
  ixia_error_destroy(e), e = NULL;
  cJSON_Delete(d);
  ixia_aggs_destroy(a);
  a = ixia_aggs_new(q, &lim);
  p = doc_of("{'s': {'n': 0, 's': '', 'x': 0}}");
  CU_ASSERT_FALSE(ixia_aggs_merge_partial(a, p, &e));
  CU_ASSERT_TRUE(e && strstr(e->message, "t: missing"));
  ixia_error_destroy(e);
  cJSON_Delete(p);
  ixia_aggs_destroy(a);
  ixia_query_destroy(q);
}

static void test_aggs_limits(void) {
  ixia_query_t *q = parse_ok("'aggs': {'t': {'terms': {'field': 'category'}}}");
  ixia_query_limits_t lim = default_limits();
  lim.max_terms_buckets = 5;
  ixia_aggs_t *a = ixia_aggs_new(q, &lim);
  ixia_error_t *e = NULL;
  gboolean ok = TRUE;
  for (int i = 0; i < 6 && ok; i++) {
    char *j = g_strdup_printf("{\"category\": \"c%d\"}", i);
    cJSON *d = cJSON_Parse(j);
    ok = ixia_aggs_add_doc(a, d, &e);
    CU_ASSERT_TRUE(ok == (i < 5));
    cJSON_Delete(d);
    g_free(j);
  }
  CU_ASSERT_TRUE(e && e->code == IXIA_ETOOLARGE && strstr(e->message, "query.max_terms_buckets") &&
                 strstr(e->message, "'t'"));
  ixia_error_destroy(e), e = NULL;
  /* Unusable afterwards, even for a known bucket. */
  cJSON *d = doc_of("{'category': 'c0'}");
  CU_ASSERT_FALSE(ixia_aggs_add_doc(a, d, &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ETOOLARGE);
  ixia_error_destroy(e), e = NULL;
  cJSON_Delete(d);
  ixia_aggs_destroy(a);

  /* Merging enforces the bucket limit too. */
  ixia_query_limits_t big = default_limits();
  ixia_aggs_t *shard = ixia_aggs_new(q, &big);
  for (int i = 0; i < 8; i++) {
    char *j = g_strdup_printf("{\"category\": \"c%d\"}", i);
    cJSON *d2 = cJSON_Parse(j);
    CU_ASSERT_TRUE(ixia_aggs_add_doc(shard, d2, NULL));
    cJSON_Delete(d2);
    g_free(j);
  }
  cJSON *p = ixia_aggs_partial_json(shard);
  a = ixia_aggs_new(q, &lim);
  CU_ASSERT_FALSE(ixia_aggs_merge_partial(a, p, &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ETOOLARGE && strstr(e->message, "query.max_terms_buckets"));
  ixia_error_destroy(e), e = NULL;
  ixia_aggs_destroy(a);
  cJSON_Delete(p);
  ixia_aggs_destroy(shard);
  ixia_query_destroy(q);

  /* Memory: cardinality and exact percentiles grow until the limit. */
  q = parse_ok("'aggs': {'c': {'cardinality': 'qty'}, 'p': {'percentiles': 'qty'}}");
  ixia_query_limits_t small = default_limits();
  small.max_memory_bytes = 64 << 10;
  a = ixia_aggs_new(q, &small);
  shard = ixia_aggs_new(q, &big);
  guint64 before = ixia_aggs_memory(a);
  guint added = 0;
  ok = TRUE;
  for (int i = 0; i < 100000 && ok; i++) {
    char *j = g_strdup_printf("{\"qty\": %d}", i);
    cJSON *d2 = cJSON_Parse(j);
    ok = ixia_aggs_add_doc(a, d2, &e);
    if (ok) added++;
    if (i < 5000) ixia_aggs_add_doc(shard, d2, NULL);
    cJSON_Delete(d2);
    g_free(j);
  }
  CU_ASSERT_FALSE(ok);
  CU_ASSERT_TRUE(added > 500 && added < 5000);
  CU_ASSERT_TRUE(e && e->code == IXIA_ETOOLARGE && strstr(e->message, "query.max_memory_mb"));
  CU_ASSERT_TRUE(ixia_aggs_memory(a) > before);
  ixia_error_destroy(e), e = NULL;
  ixia_aggs_destroy(a);
  a = ixia_aggs_new(q, &small);
  p = ixia_aggs_partial_json(shard);
  CU_ASSERT_FALSE(ixia_aggs_merge_partial(a, p, &e));
  CU_ASSERT_TRUE(e && e->code == IXIA_ETOOLARGE && strstr(e->message, "query.max_memory_mb"));
  ixia_error_destroy(e);
  cJSON_Delete(p);
  ixia_aggs_destroy(a);
  ixia_aggs_destroy(shard);
  ixia_query_destroy(q);
}

/* Two exact sums of the same values agree bit for bit (NaN with NaN);
 * says which round and what when they do not. */
static void assert_same_sum(ixia_fsum_t *f, ixia_fsum_t *g, int rnd, const char *what) {
  double a = ixia_fsum_result(f), b = ixia_fsum_result(g);
  gboolean same = (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
  if (!same) fprintf(stderr, "\n  round %d: fsum %.17g, %s %.17g\n", rnd, a, what, b);
  CU_ASSERT_TRUE(same);
  ixia_fsum_clear(f);
  ixia_fsum_clear(g);
}

/* The superaccumulator gives the fsum of the same values, bit for bit, for
 * values of every magnitude and sign (subnormals, near DBL_MAX, cancelling),
 * and the same infinities and NaN. */
static void test_xsum_equals_fsum(void) {
  GRand *r = g_rand_new_with_seed(7);
  for (int rnd = 0; rnd < 400; rnd++) {
    ixia_fsum_t f = {0}, g = {0};
    ixia_xsum_t x;
    memset(&x, 0, sizeof x);
    /* Past IXIA_XSUM_RUN values the chunks carry between additions. */
    int n = g_rand_int_range(r, 0, rnd % 4 == 3 ? 5000 : 300);
    for (int i = 0; i < n; i++) {
      double v;
      switch (g_rand_int_range(r, 0, 6)) {
        case 0: v = g_rand_double_range(r, -1000, 1000); break;
        case 1: v = ldexp(g_rand_double_range(r, -1, 1), g_rand_int_range(r, -1074, 1000)); break;
        case 2: v = (double)g_rand_int_range(r, -5, 5) * 1e300; break;
        case 3: v = ldexp((double)g_rand_int_range(r, -3, 3), -1074); break; /* subnormal */
        case 4: v = g_rand_int_range(r, 0, 2) ? 0.1 : -0.1; break;
        default: v = round(g_rand_double_range(r, 0, 50000)) / 100; break; /* prices */
      }
      if (rnd % 50 == 49 && i == n / 2) v = rnd % 100 == 99 ? -INFINITY : INFINITY;
      if (rnd == 398 && i == 0) v = NAN;
      ixia_fsum_add(&f, v);
      ixia_xsum_add(&x, v);
    }
    ixia_xsum_into(&x, &g);
    assert_same_sum(&f, &g, rnd, "xsum");
  }
  g_rand_free(r);
}

/* A window in front of the superaccumulator changes nothing either: the
 * same values, through windows flushed at random points (as a bucket's
 * window is flushed before its sum is read), give the fsum bit for bit,
 * including values outside the window's span, subnormals, values near
 * DBL_MAX, negatives that cancel, and infinities. */
static void test_xwin_equals_fsum(void) {
  GRand *r = g_rand_new_with_seed(11);
  for (int rnd = 0; rnd < 400; rnd++) {
    ixia_fsum_t f = {0}, g = {0};
    ixia_xsum_t x;
    ixia_xwin_t w;
    memset(&x, 0, sizeof x);
    memset(&w, 0, sizeof w);
    int n = g_rand_int_range(r, 0, rnd % 4 == 3 ? 20000 : 300);
    int kind = rnd % 7; /* some rounds of one magnitude: most values through the window */
    for (int i = 0; i < n; i++) {
      double v;
      switch (kind == 6 ? g_rand_int_range(r, 0, 6) : kind) {
        case 0: v = g_rand_double_range(r, -1000, 1000); break;
        case 1: v = ldexp(g_rand_double_range(r, -1, 1), g_rand_int_range(r, -1074, 1000)); break;
        case 2: /* beyond the window's top base, and about it */
          v = g_rand_int_range(r, 0, 2) ? (double)g_rand_int_range(r, -5, 5) * 1e300
                                        : ldexp(g_rand_double_range(r, -1, 1), g_rand_int_range(r, 860, 895));
          break;
        case 3: v = ldexp((double)g_rand_int_range(r, -3, 3), g_rand_int_range(r, -1074, -1020)); break;
        case 4: v = g_rand_int_range(r, 0, 2) ? 0.1 : -0.1; break;
        default: v = round(g_rand_double_range(r, 0, 100000)) / 100; break; /* prices */
      }
      if (rnd % 50 == 49 && i == n / 2) v = rnd % 100 == 99 ? -INFINITY : INFINITY;
      if (rnd == 398 && i == 0) v = NAN;
      ixia_fsum_add(&f, v);
      ixia_xwin_add(&w, &x, v);
      if (g_rand_int_range(r, 0, 1000) == 0) ixia_xwin_flush(&w, &x);
    }
    ixia_xwin_flush(&w, &x);
    ixia_xsum_into(&x, &g);
    assert_same_sum(&f, &g, rnd, "window");
  }
  /* Prices from 1 to 1,000 cover 10 binary exponents: after the first,
   * nearly all of them go through the window (none left in the chunks). */
  ixia_xsum_t x;
  ixia_xwin_t w;
  memset(&x, 0, sizeof x);
  memset(&w, 0, sizeof w);
  ixia_xwin_add(&w, &x, 600.25);
  for (int i = 0; i < 1000; i++) ixia_xwin_add(&w, &x, 16 + i * 0.75);
  gboolean chunks_empty = TRUE;
  for (guint i = 0; i < IXIA_XSUM_CHUNKS; i++) chunks_empty &= x.c[i] == 0;
  CU_ASSERT_TRUE(chunks_empty);
  CU_ASSERT_TRUE(w.acc != 0);
  g_rand_free(r);
}

/* The index calls ixia_aggs_add once per matching document; 300,000 calls
 * should take well under the 100 ms a whole query may spend. */
static void test_aggs_add_speed(void) {
  ixia_query_t *q = parse_ok(
      "'aggs': {'n': {'count': {}}, 'a': {'avg': 'price'}, 'mx': {'max': 'price'},"
      " 's': {'sum': 'qty'}, 't': {'terms': {'field': 'category', 'aggs': {'m': {'avg': 'price'}}}},"
      " 'p': {'percentiles': 'price'}}");
  ixia_query_limits_t lim = default_limits();
  ixia_aggs_t *a = ixia_aggs_new(q, &lim);
  const guint N = 300000;
  guint8 *nums = g_malloc((gsize)N * IXIA_NUM_BYTES);
  char cats[200][8];
  for (guint i = 0; i < 200; i++) g_snprintf(cats[i], 8, "cat%03u", i);
  for (guint i = 0; i < N; i++) ixia_num_encode((double)(i % 9973) * 0.37, nums + 8 * i);
  ixia_val_t v[3];
  ixia_val_t *vals[3];
  guint nvals[3];
  for (guint i = 0; i < q->n_agg_fields; i++) vals[i] = &v[i], nvals[i] = 1;
  /* CPU time: the machine may be shared with other builds. */
  clock_t t0 = clock();
  gboolean ok = TRUE;
  for (guint i = 0; i < N && ok; i++) {
    for (guint f = 0; f < q->n_agg_fields; f++) {
      if (q->agg_fields[f]->type == IXIA_FIELD_KEYWORD)
        v[f] = (ixia_val_t){(const guint8 *)cats[i % 200], 6};
      else
        v[f] = (ixia_val_t){nums + 8 * i, 8};
    }
    ok = ixia_aggs_add(a, (const ixia_val_t *const *)vals, nvals, NULL);
  }
  clock_t t1 = clock();
  cJSON *r = ixia_aggs_result_json(a);
  clock_t t2 = clock();
  CU_ASSERT_TRUE(ok);
  CU_ASSERT_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "n"), "value")->valuedouble, N);
  double add_ms = (double)(t1 - t0) * 1000 / CLOCKS_PER_SEC;
  fprintf(stderr, "\n  %u ixia_aggs_add calls: %.1f ms CPU, result: %.1f ms CPU\n", N, add_ms,
          (double)(t2 - t1) * 1000 / CLOCKS_PER_SEC);
  /* Generous: sanitizer builds are several times slower. */
  CU_ASSERT_TRUE(add_ms < 2000);
  cJSON_Delete(r);
  g_free(nums);
  ixia_aggs_destroy(a);
  ixia_query_destroy(q);
}

int main(void) {
  schema = ixia_schema_parse(SCHEMA, strlen(SCHEMA), NULL);
  if (!schema) return 1;
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("query", NULL, NULL);
  IXT_ADD(s, test_encoding_order);
  IXT_ADD(s, test_tokens);
  IXT_ADD(s, test_doc_values);
  IXT_ADD(s, test_in_values_sorted);
  IXT_ADD(s, test_limits_from_config);
  IXT_ADD(s, test_parse_spec_example);
  IXT_ADD(s, test_parse_tree);
  IXT_ADD(s, test_parse_errors);
  IXT_ADD(s, test_parse_clause_limit);
  IXT_ADD(s, test_match_doc);
  IXT_ADD(s, test_sort);
  IXT_ADD(s, test_bm25);
  IXT_ADD(s, test_aggs_more_split_merge);
  IXT_ADD(s, test_aggs_hand);
  IXT_ADD(s, test_histogram_gaps_bounded);
  IXT_ADD(s, test_aggs_sum_exact);
  IXT_ADD(s, test_aggs_split_merge);
  IXT_ADD(s, test_aggs_bad_partial);
  IXT_ADD(s, test_aggs_limits);
  IXT_ADD(s, test_xsum_equals_fsum);
  IXT_ADD(s, test_xwin_equals_fsum);
  IXT_ADD(s, test_aggs_add_speed);
  int rc = ixt_run();
  ixia_schema_unref(schema);
  return rc;
}
