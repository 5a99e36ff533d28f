/* Unit tests of common/antientropy.c: the walk between two in-memory
 * (key, version) sets. Random sets with random differences: every
 * differing key, and only those, must be reported, by the digest walk and
 * by the plain key comparison; equal sets must cost one digest per page;
 * the index side may be split into several shards whose digests add up. */
#include <string.h>

#include "antientropy.h"
#include "support.h"

typedef struct {
  GTree *truth;  /* char * -> gint64 version (GINT_TO_POINTER won't hold 64 bits: boxed) */
  GTree *index;
  GHashTable *reported; /* key -> 1 */
  guint truth_calls, index_calls;
  gboolean bad; /* a callback saw something impossible */
} sides_t;

static gint cmp_keys(gconstpointer a, gconstpointer b, gpointer ud) {
  (void)ud;
  return strcmp(a, b);
}

static GTree *set_new(void) { return g_tree_new_full(cmp_keys, NULL, g_free, g_free); }

static void set_put(GTree *t, const char *key, gint64 version) {
  gint64 *v = g_new(gint64, 1);
  *v = version;
  g_tree_replace(t, g_strdup(key), v);
}

static gint64 set_get(GTree *t, const char *key) {
  gint64 *v = g_tree_lookup(t, key);
  return v ? *v : 0;
}

/* Keys of t in (after, end] ("" = no end), in order, at most limit. */
typedef struct {
  const char *after, *end;
  guint limit;
  GArray *out;
} range_t;

static gboolean collect(gpointer k, gpointer v, gpointer ud) {
  range_t *r = ud;
  if (*r->after && strcmp(k, r->after) <= 0) return FALSE;
  if (*r->end && strcmp(k, r->end) > 0) return TRUE;
  if (r->out->len >= r->limit) return TRUE;
  ixia_ae_kv_t kv = {g_strdup(k), *(gint64 *)v};
  g_array_append_val(r->out, kv);
  return FALSE;
}

static void list(GTree *t, const char *after, const char *end, guint limit, GArray *out) {
  range_t r = {after, end, limit, out};
  g_tree_foreach(t, collect, &r);
}

static gboolean truth_ranges(void *ud, const char *after, const char *end, guint max_keys,
                             guint bucket_keys, GArray *out, gint64 *sv, ixia_error_t **err) {
  (void)err;
  sides_t *s = ud;
  s->truth_calls++;
  *sv = 1000;
  GArray *kvs = ixia_ae_kvs_new();
  list(s->truth, after, end, max_keys + 1, kvs);
  ixia_ae_bucketer_t b;
  ixia_ae_bucketer_init(&b, end, max_keys, bucket_keys, out);
  guint i = 0;
  for (; i < kvs->len; i++) {
    ixia_ae_kv_t *kv = &g_array_index(kvs, ixia_ae_kv_t, i);
    if (!ixia_ae_bucketer_add(&b, kv->key, strlen(kv->key), kv->version)) break;
  }
  /* Stopped full: more follow when the listing had another key. */
  ixia_ae_bucketer_finish(&b, i + 1 < kvs->len);
  g_array_unref(kvs);
  return TRUE;
}

static gboolean index_ranges(void *ud, const char *after, const char *const *bounds, guint n,
                             GArray *out, ixia_error_t **err) {
  (void)err;
  sides_t *s = ud;
  s->index_calls++;
  GArray *kvs = ixia_ae_kvs_new();
  list(s->index, after, "", G_MAXUINT, kvs);
  ixia_ae_cutter_t c;
  ixia_ae_cutter_init(&c, bounds, n, out);
  for (guint i = 0; i < kvs->len; i++) {
    ixia_ae_kv_t *kv = &g_array_index(kvs, ixia_ae_kv_t, i);
    if (!ixia_ae_cutter_add(&c, kv->key, strlen(kv->key), kv->version)) break;
  }
  ixia_ae_cutter_finish(&c);
  g_array_unref(kvs);
  return TRUE;
}

static gboolean truth_keys(void *ud, const char *after, const char *end, guint limit, GArray *out,
                           gint64 *sv, ixia_error_t **err) {
  (void)err;
  sides_t *s = ud;
  *sv = 1000;
  list(s->truth, after, end, limit, out);
  return TRUE;
}

static gboolean index_keys(void *ud, const char *after, const char *end, GArray *out,
                           ixia_error_t **err) {
  (void)err;
  list(((sides_t *)ud)->index, after, end, G_MAXUINT, out);
  return TRUE;
}

static gboolean differs(void *ud, const char *key, gint64 tv, gint64 iv, gint64 sv,
                        const char *leaf_after, ixia_error_t **err) {
  (void)err;
  sides_t *s = ud;
  if (tv != set_get(s->truth, key) || iv != set_get(s->index, key) || tv == iv || sv != 1000 ||
      (*leaf_after && strcmp(leaf_after, key) >= 0))
    s->bad = TRUE;
  if (!g_hash_table_add(s->reported, g_strdup(key))) s->bad = TRUE; /* twice */
  return TRUE;
}

static const ixia_ae_source_t SRC = {truth_ranges, index_ranges, truth_keys, index_keys, differs};

static void sides_init(sides_t *s) {
  memset(s, 0, sizeof *s);
  s->truth = set_new();
  s->index = set_new();
  s->reported = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

static void sides_clear(sides_t *s) {
  g_tree_destroy(s->truth);
  g_tree_destroy(s->index);
  g_hash_table_destroy(s->reported);
}

/* The keys whose versions differ, by brute force. */
static guint expected_diffs(sides_t *s, GHashTable *want) {
  GArray *a = ixia_ae_kvs_new(), *b = ixia_ae_kvs_new();
  list(s->truth, "", "", G_MAXUINT, a);
  list(s->index, "", "", G_MAXUINT, b);
  for (guint i = 0; i < a->len; i++) {
    ixia_ae_kv_t *kv = &g_array_index(a, ixia_ae_kv_t, i);
    if (set_get(s->index, kv->key) != kv->version) g_hash_table_add(want, g_strdup(kv->key));
  }
  for (guint i = 0; i < b->len; i++) {
    ixia_ae_kv_t *kv = &g_array_index(b, ixia_ae_kv_t, i);
    if (set_get(s->truth, kv->key) != kv->version) g_hash_table_add(want, g_strdup(kv->key));
  }
  g_array_unref(a);
  g_array_unref(b);
  return g_hash_table_size(want);
}

static void check_reported(sides_t *s) {
  GHashTable *want = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  expected_diffs(s, want);
  CU_ASSERT_EQUAL(g_hash_table_size(s->reported), g_hash_table_size(want));
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, want);
  while (g_hash_table_iter_next(&it, &k, NULL)) CU_ASSERT_TRUE(g_hash_table_contains(s->reported, k));
  CU_ASSERT_FALSE(s->bad);
  g_hash_table_destroy(want);
}

/* n keys on both sides with the same versions, then `changes` random
 * differences of every kind. */
static void fill(sides_t *s, GRand *r, guint n, guint changes) {
  char key[32];
  for (guint i = 0; i < n; i++) {
    g_snprintf(key, sizeof key, "k%07u", g_rand_int_range(r, 0, (gint32)(4 * n)));
    gint64 v = g_rand_int_range(r, 1, 900);
    set_put(s->truth, key, v);
    set_put(s->index, key, v);
  }
  for (guint i = 0; i < changes; i++) {
    /* (With no keys, the changes all fall on one key.) */
    g_snprintf(key, sizeof key, "k%07u", g_rand_int_range(r, 0, (gint32)MAX(4 * n, 1)));
    switch (g_rand_int_range(r, 0, 4)) {
      case 0: g_tree_remove(s->index, key); set_put(s->truth, key, 5); break;   /* missing */
      case 1: g_tree_remove(s->truth, key); set_put(s->index, key, 6); break;   /* extra */
      case 2: set_put(s->truth, key, 901); set_put(s->index, key, 7); break;    /* stale */
      default: g_tree_remove(s->truth, key); g_tree_remove(s->index, key); break; /* gone on both */
    }
  }
}

static void test_walk_random(void) {
  GRand *r = g_rand_new_with_seed(42);
  static const struct {
    guint n, changes, page, fanout, leaf;
  } cases[] = {
      {0, 0, 100, 16, 8},     {0, 5, 100, 16, 8},     {1, 1, 100, 16, 8},
      {500, 0, 100, 4, 8},    {500, 3, 100, 4, 8},    {3000, 40, 1000, 16, 16},
      {3000, 400, 64, 2, 2},  {3000, 3000, 500, 8, 32}, {20000, 7, 5000, 16, 64},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    for (int mode = 0; mode < 2; mode++) {
      sides_t s;
      sides_init(&s);
      fill(&s, r, cases[c].n, cases[c].changes);
      ixia_ae_opts_t o = {cases[c].page, cases[c].fanout, cases[c].leaf};
      ixia_ae_stats_t st = {0};
      ixia_error_t *e = NULL;
      gboolean ok = mode == 0 ? ixia_ae_walk(&SRC, &s, &o, &st, &e) : ixia_ae_compare_keys(&SRC, &s, &o, &st, &e);
      CU_ASSERT_TRUE(ok);
      CU_ASSERT_PTR_NULL(e);
      check_reported(&s);
      CU_ASSERT_EQUAL(st.differing, g_hash_table_size(s.reported));
      CU_ASSERT_EQUAL(st.truth_keys, (guint64)g_tree_nnodes(s.truth));
      CU_ASSERT_EQUAL(st.index_keys, (guint64)g_tree_nnodes(s.index));
      if (mode == 0 && g_hash_table_size(s.reported) == 0)
        /* Equal sets: one digest per page on each side, nothing listed. */
        CU_ASSERT_EQUAL(st.keys_listed, 0);
      sides_clear(&s);
    }
  }
  g_rand_free(r);
}

/* A few differences in a large set are found by descending, not by listing
 * everything. */
static void test_walk_descends(void) {
  GRand *r = g_rand_new_with_seed(7);
  sides_t s;
  sides_init(&s);
  fill(&s, r, 50000, 0);
  set_put(s.truth, "k0001234x", 3);
  set_put(s.index, "k0100000y", 4);
  ixia_ae_opts_t o = {10000, 16, 64};
  ixia_ae_stats_t st = {0};
  CU_ASSERT_TRUE(ixia_ae_walk(&SRC, &s, &o, &st, NULL));
  check_reported(&s);
  CU_ASSERT_EQUAL(st.differing, 2);
  CU_ASSERT_TRUE(st.keys_listed < 500);
  CU_ASSERT_TRUE(st.leaves <= 2);
  sides_clear(&s);
  g_rand_free(r);
}

/* Digests of shards holding disjoint parts add up to the digest of the
 * whole, and the bucketer tiles its interval exactly. */
static void test_digests(void) {
  const char *keys[] = {"a", "b", "c", "d", "e", "f", "g"};
  GArray *whole = ixia_ae_ranges_new(), *p1 = ixia_ae_ranges_new(), *p2 = ixia_ae_ranges_new();
  const char *bounds[] = {"c", "f", ""};
  ixia_ae_cutter_t cw, c1, c2;
  ixia_ae_cutter_init(&cw, bounds, 3, whole);
  ixia_ae_cutter_init(&c1, bounds, 3, p1);
  ixia_ae_cutter_init(&c2, bounds, 3, p2);
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
    ixia_ae_cutter_add(&cw, keys[i], 1, (gint64)i + 1);
    ixia_ae_cutter_add(i % 2 ? &c1 : &c2, keys[i], 1, (gint64)i + 1);
  }
  ixia_ae_cutter_finish(&cw);
  ixia_ae_cutter_finish(&c1);
  ixia_ae_cutter_finish(&c2);
  CU_ASSERT_EQUAL_FATAL(whole->len, 3);
  for (guint i = 0; i < 3; i++) {
    ixia_ae_range_t *w = &g_array_index(whole, ixia_ae_range_t, i);
    ixia_ae_range_t *a = &g_array_index(p1, ixia_ae_range_t, i), *b = &g_array_index(p2, ixia_ae_range_t, i);
    CU_ASSERT_EQUAL(w->count, a->count + b->count);
    CU_ASSERT_EQUAL(w->hash, a->hash + b->hash);
    CU_ASSERT_STRING_EQUAL(w->last_key, bounds[i]);
  }
  CU_ASSERT_EQUAL(g_array_index(whole, ixia_ae_range_t, 0).count, 3);
  CU_ASSERT_EQUAL(g_array_index(whole, ixia_ae_range_t, 2).count, 1);
  /* A different version changes the digest. */
  CU_ASSERT_NOT_EQUAL(ixia_ae_pair_hash("a", 1, 1), ixia_ae_pair_hash("a", 1, 2));
  g_array_unref(whole);
  g_array_unref(p1);
  g_array_unref(p2);

  /* Bucketer: 7 keys in buckets of 3, max 5 keys, then the rest. */
  GArray *out = ixia_ae_ranges_new();
  ixia_ae_bucketer_t b;
  ixia_ae_bucketer_init(&b, "", 5, 3, out);
  guint i = 0;
  while (i < G_N_ELEMENTS(keys) && ixia_ae_bucketer_add(&b, keys[i], 1, 1)) i++;
  ixia_ae_bucketer_finish(&b, TRUE);
  CU_ASSERT_EQUAL_FATAL(out->len, 2);
  CU_ASSERT_STRING_EQUAL(g_array_index(out, ixia_ae_range_t, 0).last_key, "c");
  CU_ASSERT_STRING_EQUAL(g_array_index(out, ixia_ae_range_t, 1).last_key, "e");
  CU_ASSERT_EQUAL(g_array_index(out, ixia_ae_range_t, 1).count, 2);
  g_array_set_size(out, 0);
  /* The interval's end: the last bucket stretches to it; empty interval. */
  ixia_ae_bucketer_init(&b, "z", 100, 3, out);
  for (i = 0; i < 6; i++) ixia_ae_bucketer_add(&b, keys[i], 1, 1);
  ixia_ae_bucketer_finish(&b, FALSE);
  CU_ASSERT_EQUAL_FATAL(out->len, 2);
  CU_ASSERT_STRING_EQUAL(g_array_index(out, ixia_ae_range_t, 1).last_key, "z");
  g_array_set_size(out, 0);
  ixia_ae_bucketer_init(&b, "", 100, 3, out);
  ixia_ae_bucketer_finish(&b, FALSE);
  CU_ASSERT_EQUAL_FATAL(out->len, 1);
  CU_ASSERT_STRING_EQUAL(g_array_index(out, ixia_ae_range_t, 0).last_key, "");
  CU_ASSERT_EQUAL(g_array_index(out, ixia_ae_range_t, 0).count, 0);
  g_array_unref(out);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("antientropy", NULL, NULL);
  IXT_ADD(s, test_digests);
  IXT_ADD(s, test_walk_random);
  IXT_ADD(s, test_walk_descends);
  return ixt_run();
}
