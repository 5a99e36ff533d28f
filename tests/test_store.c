/* Unit tests of store/: versions, conditions, upsert, atomic batches, TTL,
 * group commit, persistence, the document cache. Runs on a real RocksDB in a temp dir. */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "doc_cache.h"
#include "store.h"
#include "support.h"
#include "timeutil.h"

static ixia_config_t *cfg;
static ixia_store_t *store;
static char *dir;

static ixia_store_t *open_store(void) {
  ixia_error_t *e = NULL;
  ixia_store_t *s = ixia_store_open(cfg, &e);
  if (!s) fprintf(stderr, "open: %s\n", e->message);
  return s;
}

static int setup(void) {
  dir = ixt_tmpdir();
  cfg = ixia_config_new();
  char *path = g_build_filename(dir, "store", NULL);
  ixia_config_set(cfg, "store.path", path, NULL);
  ixia_config_set(cfg, "limits.max_doc_bytes", "1000", NULL);
  g_free(path);
  store = open_store();
  return store ? 0 : 1;
}

static int teardown(void) {
  ixia_store_destroy(store);
  ixia_config_destroy(cfg);
  g_free(dir);
  return 0;
}

/* A put of ns/t/key into st; its version, or -1. */
static gint64 put_to(ixia_store_t *st, const char *key, const char *json, gint64 expected,
                     ixia_error_t **err) {
  ixia_write_op_t op = {.kind = IXIA_WRITE_PUT, .ns = "ns", .table = "t", .key = key,
                        .key_len = strlen(key), .json = json, .json_len = strlen(json),
                        .expected_version = expected};
  gint64 v = 0;
  return ixia_store_write(st, &op, 1, &v, err) ? v : -1;
}

static gint64 put(const char *key, const char *json, gint64 expected, ixia_error_t **err) {
  return put_to(store, key, json, expected, err);
}

/* The stored JSON of key, or NULL. */
static char *get(const char *key, gint64 *version) {
  gboolean found = FALSE;
  char *json = NULL;
  CU_ASSERT_TRUE(ixia_store_get(store, "ns", "t", key, strlen(key), &found, version, NULL, &json, NULL, NULL));
  return found ? json : NULL;
}

static void test_put_get_versions(void) {
  gint64 before = ixia_store_latest_version(store);
  gint64 v1 = put("a", "{\"x\":1}", -1, NULL);
  gint64 v2 = put("a", "{\"x\":2}", -1, NULL);
  CU_ASSERT_TRUE(v1 > before);
  CU_ASSERT_TRUE(v2 > v1);
  /* The version is the RocksDB sequence number of the edit. */
  CU_ASSERT_EQUAL(v2, ixia_store_latest_version(store));
  gint64 v = 0;
  char *json = get("a", &v);
  CU_ASSERT_STRING_EQUAL(json, "{\"x\":2}");
  CU_ASSERT_EQUAL(v, v2);
  g_free(json);
  CU_ASSERT_PTR_NULL(get("missing", NULL));
}

static void test_conditions(void) {
  ixia_error_t *e = NULL;
  gint64 v1 = put("c", "{\"n\":1}", 0, &e); /* must be absent: it is */
  CU_ASSERT_TRUE(v1 > 0);
  CU_ASSERT_EQUAL(put("c", "{\"n\":2}", 0, &e), -1);
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ECONFLICT);
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_EQUAL(put("c", "{\"n\":2}", v1 + 1000, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "current is"));
  ixia_error_destroy(e), e = NULL;
  gint64 v2 = put("c", "{\"n\":2}", v1, &e);
  CU_ASSERT_TRUE(v2 > v1);
  CU_ASSERT_EQUAL(put("never", "{}", 5, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "does not exist"));
  ixia_error_destroy(e);
}

static void test_upsert_and_delete(void) {
  put("u", "{\"a\":1,\"b\":{\"c\":2}}", -1, NULL);
  cJSON *patch = cJSON_Parse("{\"b\":3,\"d\":\"x\"}");
  ixia_write_op_t op = {.kind = IXIA_WRITE_UPSERT, .ns = "ns", .table = "t", .key = "u",
                        .key_len = 1, .doc = patch, .expected_version = -1};
  gint64 v = 0;
  CU_ASSERT_TRUE(ixia_store_write(store, &op, 1, &v, NULL));
  cJSON_Delete(patch);
  char *json = get("u", NULL);
  CU_ASSERT_STRING_EQUAL(json, "{\"a\":1,\"b\":3,\"d\":\"x\"}");
  g_free(json);
  ixia_write_op_t del = {.kind = IXIA_WRITE_DELETE, .ns = "ns", .table = "t", .key = "u",
                         .key_len = 1, .expected_version = v};
  gint64 dv = 0;
  CU_ASSERT_TRUE(ixia_store_write(store, &del, 1, &dv, NULL));
  CU_ASSERT_TRUE(dv > v);
  CU_ASSERT_PTR_NULL(get("u", NULL));
}

static void test_upsert_size_limit(void) {
  char big[700];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  char *doc = g_strdup_printf("{\"a\":\"%s\"}", big);
  put("big", doc, -1, NULL);
  char *patch_text = g_strdup_printf("{\"b\":\"%s\"}", big);
  cJSON *patch = cJSON_Parse(patch_text);
  ixia_write_op_t op = {.kind = IXIA_WRITE_UPSERT, .ns = "ns", .table = "t", .key = "big",
                        .key_len = 3, .doc = patch, .expected_version = -1};
  ixia_error_t *e = NULL;
  gint64 v = 0;
  CU_ASSERT_FALSE(ixia_store_write(store, &op, 1, &v, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ETOOLARGE);
  ixia_error_destroy(e);
  cJSON_Delete(patch);
  char *json = get("big", NULL);
  CU_ASSERT_STRING_EQUAL(json, doc); /* untouched */
  g_free(json);
  g_free(doc);
  g_free(patch_text);
}

static void test_batch_is_atomic(void) {
  gint64 v = put("b1", "{\"v\":1}", -1, NULL);
  ixia_write_op_t ops[3] = {
      {.kind = IXIA_WRITE_PUT, .ns = "ns", .table = "t", .key = "b1", .key_len = 2,
       .json = "{\"v\":2}", .json_len = 7, .expected_version = v},
      {.kind = IXIA_WRITE_PUT, .ns = "ns", .table = "t", .key = "b2", .key_len = 2,
       .json = "{\"v\":2}", .json_len = 7, .expected_version = -1},
      {.kind = IXIA_WRITE_PUT, .ns = "ns", .table = "t", .key = "b3", .key_len = 2,
       .json = "{\"v\":2}", .json_len = 7, .expected_version = 12345678},
  };
  gint64 versions[3];
  ixia_error_t *e = NULL;
  CU_ASSERT_FALSE(ixia_store_write(store, ops, 3, versions, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ECONFLICT);
  ixia_error_destroy(e);
  char *json = get("b1", NULL);
  CU_ASSERT_STRING_EQUAL(json, "{\"v\":1}");
  g_free(json);
  CU_ASSERT_PTR_NULL(get("b2", NULL));
  ops[2].expected_version = -1;
  CU_ASSERT_TRUE(ixia_store_write(store, ops, 3, versions, NULL));
  CU_ASSERT_TRUE(versions[0] < versions[1] && versions[1] < versions[2]);
  gint64 got;
  g_free(get("b3", &got));
  CU_ASSERT_EQUAL(got, versions[2]);
}

static void test_ttl(void) {
  ixia_write_op_t op = {.kind = IXIA_WRITE_PUT, .ns = "ns", .table = "t", .key = "ttl",
                        .key_len = 3, .json = "{}", .json_len = 2, .expected_version = -1,
                        .ttl_seconds = 1};
  gint64 v;
  CU_ASSERT_TRUE(ixia_store_write(store, &op, 1, &v, NULL));
  char *json = get("ttl", NULL);
  CU_ASSERT_PTR_NOT_NULL(json);
  g_free(json);
  /* The store's clock moved past the expiry, not the wall clock. */
  ixia_time_test_shift(2);
  CU_ASSERT_PTR_NULL(get("ttl", NULL));
  /* An expired key counts as absent for conditions too. */
  CU_ASSERT_TRUE(put("ttl", "{}", 0, NULL) > 0);
}

typedef struct {
  int id;
  int n;
  gboolean ok;
} writer_arg_t;

static gpointer writer(gpointer p) {
  writer_arg_t *a = p;
  a->ok = TRUE;
  gint64 last = 0;
  for (int i = 0; i < a->n; i++) {
    char key[32], json[64];
    snprintf(key, sizeof key, "w%d-%d", a->id, i);
    snprintf(json, sizeof json, "{\"i\":%d}", i);
    gint64 v = put(key, json, -1, NULL);
    if (v <= last) a->ok = FALSE;
    last = v;
  }
  return NULL;
}

static void test_group_commit(void) {
  ixia_store_stats_t before, after;
  ixia_store_get_stats(store, &before);
  enum { T = 8, N = 100 };
  writer_arg_t args[T];
  GThread *th[T];
  for (int i = 0; i < T; i++) {
    args[i] = (writer_arg_t){.id = i, .n = N};
    th[i] = g_thread_new("w", writer, &args[i]);
  }
  for (int i = 0; i < T; i++) {
    g_thread_join(th[i]);
    CU_ASSERT_TRUE(args[i].ok);
  }
  ixia_store_get_stats(store, &after);
  guint64 requests = after.write_requests - before.write_requests;
  guint64 groups = after.write_groups - before.write_groups;
  CU_ASSERT_EQUAL(requests, T * N);
  /* Concurrent writers share synced writes. */
  CU_ASSERT_TRUE(groups < requests);
  printf("\n  group commit: %" G_GUINT64_FORMAT " requests in %" G_GUINT64_FORMAT " synced writes\n",
         requests, groups);
  char *json = get("w7-99", NULL);
  CU_ASSERT_STRING_EQUAL(json, "{\"i\":99}");
  g_free(json);
}

typedef struct {
  ixia_store_t *store;
  int id;
  const char *doc;
} big_writer_t;

static gpointer big_writer(gpointer p) {
  big_writer_t *a = p;
  for (int i = 0; i < 20; i++) {
    char key[32];
    snprintf(key, sizeof key, "big%d-%d", a->id, i);
    CU_ASSERT_TRUE(put_to(a->store, key, a->doc, -1, NULL) > 0);
  }
  return NULL;
}

/* A store of a test's own, in a new temp dir, with sets ("name", "value",
 * ..., NULL) over the defaults. */
typedef struct {
  char *dir, *path;
  ixia_config_t *cfg;
  ixia_store_t *st;
} own_store_t;

static ixia_store_t *own_open(own_store_t *o, const char *const *sets) {
  o->dir = ixt_tmpdir();
  o->path = g_build_filename(o->dir, "own", NULL);
  o->cfg = ixia_config_new();
  ixia_config_set(o->cfg, "store.path", o->path, NULL);
  for (guint i = 0; sets && sets[i] && sets[i + 1]; i += 2) ixia_config_set(o->cfg, sets[i], sets[i + 1], NULL);
  return o->st = ixia_store_open(o->cfg, NULL);
}

static void own_close(own_store_t *o) {
  ixia_store_destroy(o->st);
  ixia_config_destroy(o->cfg);
  g_free(o->path);
  g_free(o->dir);
}

/* A group is one WAL record shipped in one replication call: its size is
 * bounded by store.max_group_bytes, not only by the operation count. */
static void test_group_bytes_bounded(void) {
  own_store_t o;
  ixia_store_t *st = own_open(&o, (const char *const[]){"store.max_group_bytes", "65536", NULL});
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);
  GString *doc = g_string_new("{\"pad\":\"");
  while (doc->len < 30000) g_string_append(doc, "0123456789");
  g_string_append(doc, "\"}");
  big_writer_t args[8];
  GThread *th[8];
  for (int i = 0; i < 8; i++) {
    args[i] = (big_writer_t){st, i, doc->str};
    th[i] = g_thread_new("big", big_writer, &args[i]);
  }
  for (int i = 0; i < 8; i++) g_thread_join(th[i]);
  ixia_store_stats_t stats;
  ixia_store_get_stats(st, &stats);
  /* 160 writes of ~30 KB: at most two fit in 64 KiB. */
  CU_ASSERT_EQUAL(stats.write_requests, 160);
  CU_ASSERT_TRUE(stats.write_groups >= 80);
  own_close(&o);
  g_string_free(doc, TRUE);
}

/* The replication source sleeps in ixia_store_wait_newer and then takes the
 * groups the commit callback queued. A version it is woken for must already
 * have been given to the callback: RocksDB's sequence moves before the
 * callback runs (the writer updates the document cache in between), and a
 * follower that trusted it found the callback's queue without the group and
 * read the WAL instead (30-50 ms a time under load). Writers race a follower
 * that checks every wake; the old wait failed this in two runs of three. */
static void note_commit(gint64 first, const char *batch, size_t len, gpointer user) {
  (void)batch;
  (void)len;
  atomic_store((_Atomic gint64 *)user, first); /* a group's first version: enough to order */
}

typedef struct {
  ixia_store_t *st;
  int id;
} follow_writer_t;

static gpointer follow_writer(gpointer p) {
  follow_writer_t *w = p;
  for (int i = 0; i < 3000; i++) {
    char key[32];
    snprintf(key, sizeof key, "f%d-%d", w->id, i % 64);
    CU_ASSERT_TRUE(put_to(w->st, key, "{}", -1, NULL) > 0);
  }
  return NULL;
}

static void test_wait_newer_after_callback(void) {
  char *d = ixt_tmpdir();
  ixia_config_t *c = ixia_config_new();
  char *path = g_build_filename(d, "follow", NULL);
  ixia_config_set(c, "store.path", path, NULL);
  ixia_config_set(c, "store.sync", "false", NULL); /* short groups: more wakes */
  ixia_store_t *st = ixia_store_open(c, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);
  _Atomic gint64 announced = 0;
  ixia_store_set_commit_cb(st, note_commit, (gpointer)&announced);
  enum { W = 4 };
  follow_writer_t w[W];
  GThread *th[W];
  for (int i = 0; i < W; i++) {
    w[i] = (follow_writer_t){st, i};
    th[i] = g_thread_new("fw", follow_writer, &w[i]);
  }
  gint64 after = 0, wakes = 0, early = 0;
  while (after < W * 3000) {
    gint64 v = ixia_store_wait_newer(st, after, 5000);
    if (v <= after) break; /* timed out: the writers are stuck */
    wakes++;
    /* Groups end where a wake can end (`after` is one's last version), so
     * the callback has seen v's group only if its newest first version is
     * past `after`. */
    if (atomic_load(&announced) <= after) early++;
    after = v;
  }
  for (int i = 0; i < W; i++) g_thread_join(th[i]);
  CU_ASSERT_EQUAL(after, W * 3000);
  CU_ASSERT_EQUAL(early, 0);
  printf("\n  %" G_GINT64_FORMAT " wakes, %" G_GINT64_FORMAT " before the callback\n", wakes, early);
  /* With nothing new, it waits out its timeout and reports the latest. */
  gint64 t0 = g_get_monotonic_time();
  CU_ASSERT_EQUAL(ixia_store_wait_newer(st, after, 50), after);
  CU_ASSERT_TRUE(g_get_monotonic_time() - t0 >= 50000);
  ixia_store_set_commit_cb(st, NULL, NULL);
  ixia_store_destroy(st);
  ixia_config_destroy(c);
  g_free(path);
  g_free(d);
}

static void schema_cb(const char *ns, const char *table, const char *json, size_t len,
                      gint64 version, gpointer user) {
  (void)len;
  CU_ASSERT_STRING_EQUAL(ns, "ns");
  CU_ASSERT_STRING_EQUAL(table, "t");
  CU_ASSERT_STRING_EQUAL(json, "{\"s\":1}");
  *(gint64 *)user = version;
}

static void test_reopen_keeps_data_and_schemas(void) {
  ixia_write_op_t op = {.kind = IXIA_WRITE_SCHEMA, .ns = "ns", .table = "t", .key = "",
                        .json = "{\"s\":1}", .json_len = 7, .expected_version = -1};
  gint64 sv = 0, seen = 0;
  CU_ASSERT_TRUE(ixia_store_write(store, &op, 1, &sv, NULL));
  gint64 v = put("persist", "{\"p\":true}", -1, NULL);
  ixia_store_destroy(store);
  store = open_store();
  CU_ASSERT_PTR_NOT_NULL_FATAL(store);
  gint64 got = 0;
  char *json = get("persist", &got);
  CU_ASSERT_STRING_EQUAL(json, "{\"p\":true}");
  CU_ASSERT_EQUAL(got, v);
  g_free(json);
  CU_ASSERT_TRUE(ixia_store_foreach_schema(store, schema_cb, &seen, NULL));
  CU_ASSERT_EQUAL(seen, sv);
  /* Versions keep growing after a restart. */
  CU_ASSERT_TRUE(put("persist", "{}", -1, NULL) > v);
}

static void test_key_encoding(void) {
  const char binary_key[] = {'a', 0, (char)0xff, 'z'};
  GBytes *k = ixia_record_doc_key("shop", "products", binary_key, sizeof binary_key);
  size_t len;
  const char *data = g_bytes_get_data(k, &len);
  char kind;
  const char *ns, *table, *key;
  size_t nl, tl, kl;
  CU_ASSERT_TRUE(ixia_record_parse_key(data, len, &kind, &ns, &nl, &table, &tl, &key, &kl));
  CU_ASSERT_EQUAL(kind, 'd');
  CU_ASSERT_EQUAL(nl, 4);
  CU_ASSERT_EQUAL(memcmp(ns, "shop", 4), 0);
  CU_ASSERT_EQUAL(tl, 8);
  CU_ASSERT_EQUAL(kl, sizeof binary_key);
  CU_ASSERT_EQUAL(memcmp(key, binary_key, kl), 0);
  CU_ASSERT_FALSE(ixia_record_parse_key(data, 3, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
  g_bytes_unref(k);
}


/* ---- the document cache ---- */

static ixia_store_stats_t stats_now(ixia_store_t *st) {
  ixia_store_stats_t s;
  ixia_store_get_stats(st, &s);
  return s;
}

/* A write fills the cache (store.doc_cache_writes, on by default), so the
 * first read is already a hit, and every write or delete is seen by the
 * reads after it, single and multi-get alike. */
static void test_doc_cache_serves_and_forgets(void) {
  gint64 v1 = put("dc", "{\"n\":1}", -1, NULL);
  ixia_store_stats_t a = stats_now(store);
  gint64 v = 0;
  char *json = get("dc", &v);
  ixia_store_stats_t b = stats_now(store);
  CU_ASSERT_STRING_EQUAL(json, "{\"n\":1}");
  CU_ASSERT_EQUAL(v, v1);
  CU_ASSERT_EQUAL(b.doc_cache_hits, a.doc_cache_hits + 1);
  CU_ASSERT_EQUAL(b.doc_cache_misses, a.doc_cache_misses);
  CU_ASSERT_TRUE(b.doc_cache_bytes > 0 && b.doc_cache_bytes <= b.doc_cache_max_bytes);
  g_free(json);

  gint64 v2 = put("dc", "{\"n\":2}", -1, NULL);
  a = stats_now(store);
  json = get("dc", &v);
  b = stats_now(store);
  CU_ASSERT_STRING_EQUAL(json, "{\"n\":2}");
  CU_ASSERT_EQUAL(v, v2);
  CU_ASSERT_EQUAL(b.doc_cache_hits, a.doc_cache_hits + 1);
  g_free(json);
  const char *keys[] = {"dc", "nothing-here"};
  size_t lens[] = {2, 12};
  ixia_store_doc_t out[2];
  ixia_store_pins_t *pins = NULL;
  CU_ASSERT_TRUE(ixia_store_multi_get_pinned(store, "ns", "t", 2, keys, lens, out, &pins, NULL));
  CU_ASSERT_TRUE(out[0].found && out[0].version == v2 && out[0].json_len == 7 &&
                 memcmp(out[0].json, "{\"n\":2}", 7) == 0);
  CU_ASSERT_FALSE(out[1].found);
  /* From the cache (the writer's own entry: "dc" was last written, not read
   * from RocksDB), a document comes with its member table: "n" at 1-4, its
   * value at 5-6. */
  CU_ASSERT_EQUAL_FATAL(out[0].n_members, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out[0].members);
  CU_ASSERT_TRUE(out[0].members[0] == 1 && out[0].members[1] == 4 && out[0].members[2] == 5 &&
                 out[0].members[3] == 6);
  ixia_store_pins_free(pins);
  /* A copying multi-get hands out no table (it would outlive its entry). */
  CU_ASSERT_TRUE(ixia_store_multi_get(store, "ns", "t", 1, keys, lens, out, NULL));
  CU_ASSERT_TRUE(out[0].found && !out[0].members && out[0].n_members == 0);
  g_free(out[0].json);

  /* One request putting the key twice: the second value is what RocksDB
   * and the cache hold, with the second version. */
  ixia_write_op_t twice[2] = {
      {.kind = IXIA_WRITE_PUT, .ns = "ns", .table = "t", .key = "dc", .key_len = 2,
       .json = "{\"n\":3}", .json_len = 7, .expected_version = -1},
      {.kind = IXIA_WRITE_PUT, .ns = "ns", .table = "t", .key = "dc", .key_len = 2,
       .json = "{\"n\":4}", .json_len = 7, .expected_version = -1}};
  gint64 vs[2];
  CU_ASSERT_TRUE(ixia_store_write(store, twice, 2, vs, NULL));
  a = stats_now(store);
  json = get("dc", &v);
  b = stats_now(store);
  CU_ASSERT_STRING_EQUAL(json, "{\"n\":4}");
  CU_ASSERT_EQUAL(v, vs[1]);
  CU_ASSERT_TRUE(vs[1] > vs[0]);
  CU_ASSERT_EQUAL(b.doc_cache_hits, a.doc_cache_hits + 1);
  g_free(json);

  ixia_write_op_t del = {.kind = IXIA_WRITE_DELETE, .ns = "ns", .table = "t", .key = "dc",
                         .key_len = 2, .expected_version = -1};
  CU_ASSERT_TRUE(ixia_store_write(store, &del, 1, &v, NULL));
  CU_ASSERT_PTR_NULL(get("dc", NULL));
  CU_ASSERT_TRUE(ixia_store_multi_get(store, "ns", "t", 1, keys, lens, out, NULL));
  CU_ASSERT_FALSE(out[0].found);
}

/* Reads limited to memory (the I/O threads' gets and pages) over documents
 * that are only on disk, behind a newer table that does not hold them:
 * after a restart the document cache and RocksDB's block cache are empty.
 * Each page answers "needs the disk", never an error and never by reading
 * the disk itself, and the disk read then finds every document; read again
 * from memory, the page is served there. (RocksDB 7.8's MultiGet under
 * the block-cache tier reads a key's first data block from the disk, and
 * answers "found, empty value" with an OK status for a key whose seek
 * passes into a data block not in memory, as a bloom filter's false
 * positive in the newer table can: pages with such a document failed with
 * "corrupt value". The keys, values and table layouts are fixed, so
 * whether a bloom filter lets a key through is too.) */
static void test_memory_reads_never_fail(void) {
  char *mdir = ixt_tmpdir(), *path = g_build_filename(mdir, "store", NULL);
  ixia_config_t *mcfg = ixia_config_new();
  ixia_config_set(mcfg, "store.path", path, NULL);
  ixia_store_t *st = ixia_store_open(mcfg, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);
  /* An older table of every key, then a newer one of the even keys. */
  enum { N = 40000, BATCH = 1000, PAGE = 100 };
  GPtrArray *docs = g_ptr_array_new_with_free_func(g_free);
  char **keys = g_new(char *, N);
  for (guint i = 0; i < N; i++) keys[i] = g_strdup_printf("k%06u", i);
  for (guint pass = 0; pass < 2; pass++) {
    for (guint i = 0; i < N; i += BATCH) {
      ixia_write_op_t ops[BATCH];
      guint n = 0;
      for (guint j = i; j < i + BATCH; j++) {
        if (pass == 1 && j % 2) continue;
        char *doc = g_strdup_printf("{\"k\":%u,\"pass\":%u,\"pad\":\"%0900u\"}", j, pass, j);
        g_ptr_array_add(docs, doc);
        ops[n++] = (ixia_write_op_t){.kind = IXIA_WRITE_PUT, .ns = "ns", .table = "t", .key = keys[j],
                                     .key_len = strlen(keys[j]), .json = doc, .json_len = strlen(doc),
                                     .expected_version = -1};
      }
      gint64 versions[BATCH];
      CU_ASSERT_TRUE_FATAL(ixia_store_write(st, ops, n, versions, NULL));
    }
    CU_ASSERT_TRUE(ixia_store_flush(st, NULL));
  }
  ixia_store_destroy(st);
  st = ixia_store_open(mcfg, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);

  /* Pages of odd keys (only in the older table), memory first as the API's
   * I/O threads read them, then the disk when memory cannot answer. */
  guint to_disk = 0, failed = 0, wrong = 0;
  const char *page[PAGE];
  size_t lens[PAGE];
  ixia_store_doc_t out[PAGE];
  for (guint i = 1; i < N; i += 2 * PAGE) {
    guint n = 0;
    for (guint j = i; j < N && n < PAGE; j += 2, n++) page[n] = keys[j], lens[n] = strlen(keys[j]);
    ixia_store_pins_t *pins = NULL;
    ixia_error_t *e = NULL;
    gboolean in_memory = TRUE;
    if (!ixia_store_multi_get_pinned_in_memory(st, "ns", "t", n, page, lens, out, &pins, &in_memory, &e)) {
      if (!failed++) fprintf(stderr, "memory-only page: %s\n", e->message);
      ixia_error_destroy(e);
      continue;
    }
    if (!in_memory) {
      to_disk++;
      ixia_store_pins_free(pins);
      CU_ASSERT_TRUE_FATAL(ixia_store_multi_get_pinned(st, "ns", "t", n, page, lens, out, &pins, NULL));
    }
    for (guint j = 0; j < n; j++) {
      char *want = g_strdup_printf("{\"k\":%s,\"pass\":0,", page[j] + 1 + strspn(page[j] + 1, "0"));
      if (!out[j].found || out[j].json_len < strlen(want) || memcmp(out[j].json, want, strlen(want)) != 0)
        wrong++;
      g_free(want);
    }
    ixia_store_pins_free(pins);
  }
  fprintf(stderr, "(%u pages of %u went to the disk) ", to_disk, N / 2 / PAGE);
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(to_disk, N / 2 / PAGE);
  ixia_store_stats_t before = stats_now(st);

  /* Again: every page from memory now (the disk reads filled the caches). */
  guint in_mem = 0;
  for (guint i = 1; i < N; i += 2 * PAGE) {
    guint n = 0;
    for (guint j = i; j < N && n < PAGE; j += 2, n++) page[n] = keys[j], lens[n] = strlen(keys[j]);
    ixia_store_pins_t *pins = NULL;
    gboolean in_memory = FALSE;
    CU_ASSERT_TRUE(ixia_store_multi_get_pinned_in_memory(st, "ns", "t", n, page, lens, out, &pins, &in_memory, NULL));
    in_mem += in_memory;
    for (guint j = 0; in_memory && j < n; j++) CU_ASSERT_TRUE(out[j].found);
    ixia_store_pins_free(pins);
  }
  CU_ASSERT_EQUAL(in_mem, N / 2 / PAGE);
  CU_ASSERT_EQUAL(stats_now(st).doc_cache_hits - before.doc_cache_hits, N / 2);

  for (guint i = 0; i < N; i++) g_free(keys[i]);
  g_free(keys);
  g_ptr_array_free(docs, TRUE);
  ixia_store_destroy(st);
  ixia_config_destroy(mcfg);
  g_free(path);
  g_free(mdir);
}

enum { HOT_KEYS = 4 };
typedef struct {
  _Atomic gint64 acked[HOT_KEYS]; /* the version each key's last acknowledged write got */
  _Atomic gboolean done;
  _Atomic guint64 reads, stale;
} hot_t;

static gpointer hot_writer(gpointer p) {
  hot_t *h = p;
  for (int i = 0; i < 3000; i++) {
    char key[8], json[32];
    int k = i % HOT_KEYS;
    snprintf(key, sizeof key, "hot%d", k);
    snprintf(json, sizeof json, "{\"i\":%d}", i);
    gint64 v = put(key, json, -1, NULL);
    if (v > 0) atomic_store(&h->acked[k], v);
  }
  atomic_store(&h->done, TRUE);
  return NULL;
}

static gpointer hot_reader(gpointer p) {
  hot_t *h = p;
  GRand *r = g_rand_new();
  while (!atomic_load(&h->done)) {
    int k = g_rand_int_range(r, 0, HOT_KEYS);
    char key[8];
    snprintf(key, sizeof key, "hot%d", k);
    gint64 before = atomic_load(&h->acked[k]), v = 0;
    if (g_rand_boolean(r)) {
      gboolean found = FALSE;
      ixia_store_get(store, "ns", "t", key, strlen(key), &found, &v, NULL, NULL, NULL, NULL);
    } else {
      const char *keys[] = {key};
      size_t lens[] = {strlen(key)};
      ixia_store_doc_t out[1];
      ixia_store_pins_t *pins = NULL;
      if (ixia_store_multi_get_pinned(store, "ns", "t", 1, keys, lens, out, &pins, NULL) && out[0].found)
        v = out[0].version;
      ixia_store_pins_free(pins);
    }
    atomic_fetch_add(&h->reads, 1);
    if (v < before) atomic_fetch_add(&h->stale, 1);
  }
  g_rand_free(r);
  return NULL;
}

/* Writers and readers on a few hot keys: a read that starts after a write
 * was acknowledged never returns an older version, whether the cache or
 * RocksDB answers it. */
static void test_doc_cache_never_stale(void) {
  hot_t *h = g_new0(hot_t, 1);
  ixia_store_stats_t a = stats_now(store);
  GThread *w = g_thread_new("hot-w", hot_writer, h);
  GThread *rd[3];
  for (int i = 0; i < 3; i++) rd[i] = g_thread_new("hot-r", hot_reader, h);
  g_thread_join(w);
  for (int i = 0; i < 3; i++) g_thread_join(rd[i]);
  ixia_store_stats_t b = stats_now(store);
  printf("\n  hot keys: %" G_GUINT64_FORMAT " reads, %" G_GUINT64_FORMAT " cache hits, %" G_GUINT64_FORMAT " stale\n",
         (guint64)atomic_load(&h->reads), b.doc_cache_hits - a.doc_cache_hits, (guint64)atomic_load(&h->stale));
  CU_ASSERT_EQUAL(atomic_load(&h->stale), 0);
  CU_ASSERT_TRUE(b.doc_cache_hits > a.doc_cache_hits);
  g_free(h);
}

/* store.doc_cache_mb bounds the cache: reading far more documents than fit
 * leaves it under its budget, every read still answers right, and a key
 * read often stays cached through the churn. */
static void doc_cache_bounded(gboolean write_through) {
  char *d = ixt_tmpdir();
  char *path = g_build_filename(d, "store", NULL);
  ixia_config_t *c = ixia_config_new();
  ixia_config_set(c, "store.path", path, NULL);
  ixia_config_set(c, "store.doc_cache_mb", "1", NULL);
  ixia_config_set(c, "store.doc_cache_writes", write_through ? "true" : "false", NULL);
  ixia_error_t *e = NULL;
  ixia_store_t *st = ixia_store_open(c, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);
  /* An empty cache holds its tables' smallest arrays. */
  guint64 empty_bytes = stats_now(st).doc_cache_bytes;
  char doc[1000];
  memset(doc, 'x', sizeof doc);
  memcpy(doc, "{\"s\":\"", 6);
  memcpy(doc + sizeof doc - 3, "\"}", 3); /* ~1 KB each, 3 MB in all */
  enum { N = 3000 };
  for (int i = 0; i < N; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    CU_ASSERT_TRUE(put_to(st, key, doc, -1, NULL) > 0);
  }
  /* Written through: the last ~1 MB of writes is cached before any read;
   * otherwise nothing is. */
  ixia_store_stats_t w = stats_now(st);
  printf("\n  after %d writes: %" G_GUINT64_FORMAT " bytes cached\n", N, w.doc_cache_bytes);
  if (write_through) {
    CU_ASSERT_TRUE(w.doc_cache_bytes > (1 << 20) / 2 && w.doc_cache_bytes <= (1 << 20));
  } else {
    CU_ASSERT_EQUAL(w.doc_cache_bytes, empty_bytes);
  }
  for (int i = N - 10; i < N; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    gboolean found = FALSE;
    CU_ASSERT_TRUE(ixia_store_get(st, "ns", "t", key, strlen(key), &found, NULL, NULL, NULL, NULL, NULL));
    CU_ASSERT_TRUE(found);
  }
  ixia_store_stats_t r = stats_now(st);
  CU_ASSERT_EQUAL(r.doc_cache_hits - w.doc_cache_hits, write_through ? 10 : 0);
  CU_ASSERT_EQUAL(r.doc_cache_misses - w.doc_cache_misses, write_through ? 0 : 10);
  /* Two passes over three times what fits, with one hot key read every 20
   * reads: the passes churn the cache, the hot key stays (evicting by
   * admission order alone would drop it every ~800 reads). */
  int hot_misses = 0;
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < N; i++) {
      char key[16];
      snprintf(key, sizeof key, "k%d", i % 20 == 0 ? 7 : i);
      guint64 misses_before = i % 20 == 0 ? stats_now(st).doc_cache_misses : 0;
      gboolean found = FALSE;
      size_t len = 0;
      CU_ASSERT_TRUE(ixia_store_get(st, "ns", "t", key, strlen(key), &found, NULL, NULL, NULL, &len, NULL));
      CU_ASSERT_TRUE(found && len == strlen(doc));
      if (i % 20 == 0 && stats_now(st).doc_cache_misses > misses_before) hot_misses++;
    }
  CU_ASSERT_TRUE(hot_misses <= 1);
  ixia_store_stats_t s = stats_now(st);
  CU_ASSERT_EQUAL(s.doc_cache_max_bytes, 1 << 20);
  CU_ASSERT_TRUE(s.doc_cache_bytes > 0 && s.doc_cache_bytes <= s.doc_cache_max_bytes);
  ixia_store_destroy(st);
  ixia_config_destroy(c);
  g_free(path);
  g_free(d);
}

static void test_doc_cache_bounded(void) { doc_cache_bounded(TRUE); }

/* store.doc_cache_writes off: only reads fill the cache. */
static void test_doc_cache_read_fill_only(void) { doc_cache_bounded(FALSE); }

/* Whether a cached value reads as the model's value m. */
static gboolean same_value(const ixia_doccache_ref_t *got, const char *m) {
  gsize n;
  const char *d = ixia_doccache_value(got, &n);
  return m && n == strlen(m) && memcmp(d, m, n) == 0;
}

/* The cache alone against a model, through every path that changes it
 * (misses filled with tickets, writes through, deletes, evictions under a
 * small budget, page lookups): a hit always answers the key's newest value,
 * a key is never cached twice (a write drops the only copy: afterwards it
 * misses), a write under way refuses the ticket, and the byte and entry
 * counts add up. Many keys share a stripe, so probe chains form and
 * deletions move entries back along them. */
static void test_doc_cache_against_model(void) {
  enum { KEYS = 3000, OPS = 60000 };
  ixia_doccache_t *dc = ixia_doccache_new(128 << 10); /* 2 KiB a stripe: evictions */
  char *model[KEYS] = {0}; /* the newest value written, NULL: none */
  char keys[KEYS][16];
  size_t klens[KEYS];
  for (int i = 0; i < KEYS; i++) klens[i] = (size_t)g_snprintf(keys[i], sizeof keys[i], "doc/%d", i);
  GRand *r = g_rand_new_with_seed(7);
  guint64 hits = 0;
  for (int op = 0; op < OPS; op++) {
    int k = g_rand_int_range(r, 0, KEYS);
    int what = g_rand_int_range(r, 0, 10);
    if (what < 3) { /* a write, through or not, or a delete */
      char *v = g_rand_boolean(r) ? g_strdup_printf("v%d-%d", k, op) : NULL;
      GBytes *b = v ? g_bytes_new(v, strlen(v)) : NULL;
      ixia_doccache_write_begin(dc, keys[k], klens[k]);
      guint64 t;
      ixia_doccache_ref_t *during = ixia_doccache_lookup(dc, keys[k], klens[k], &t);
      CU_ASSERT_PTR_NULL(during);
      CU_ASSERT_EQUAL(t, IXIA_DOCCACHE_NO_TICKET);
      ixia_doccache_write_end(dc, keys[k], klens[k], g_rand_boolean(r) ? b : NULL);
      if (b) g_bytes_unref(b);
      g_free(model[k]);
      model[k] = v;
      if (!v) { /* a delete: the key is gone from the cache */
        ixia_doccache_ref_t *after = ixia_doccache_lookup(dc, keys[k], klens[k], &t);
        CU_ASSERT_PTR_NULL(after);
        ixia_doccache_release(after);
      }
    } else if (what < 8) { /* a read that fills a miss */
      guint64 t;
      ixia_doccache_ref_t *got = ixia_doccache_lookup(dc, keys[k], klens[k], &t);
      if (got) {
        hits++;
        CU_ASSERT_TRUE(same_value(got, model[k]));
        ixia_doccache_release(got);
      } else if (model[k]) {
        ixia_doccache_ref_t *in = ixia_doccache_insert(dc, keys[k], klens[k], model[k], strlen(model[k]), t);
        CU_ASSERT_PTR_NOT_NULL(in);
        ixia_doccache_release(in);
      }
    } else { /* a page of keys, as a query's hits read them */
      const char *pk[40];
      size_t pl[40];
      ixia_doccache_ref_t *out[40];
      guint64 tk[40];
      int idx[40];
      for (int i = 0; i < 40; i++) {
        idx[i] = g_rand_int_range(r, 0, KEYS);
        pk[i] = keys[idx[i]];
        pl[i] = klens[idx[i]];
      }
      ixia_doccache_lookup_many(dc, 40, pk, pl, out, tk);
      for (int i = 0; i < 40; i++) {
        char *m = model[idx[i]];
        if (out[i]) {
          hits++;
          CU_ASSERT_TRUE(same_value(out[i], m));
          CU_ASSERT_EQUAL(tk[i], IXIA_DOCCACHE_NO_TICKET);
          ixia_doccache_release(out[i]);
        } else {
          CU_ASSERT_NOT_EQUAL(tk[i], IXIA_DOCCACHE_NO_TICKET);
        }
      }
    }
  }
  ixia_doccache_stats_t st;
  ixia_doccache_get_stats(dc, &st);
  printf("\n  model: %" G_GUINT64_FORMAT " hits, %" G_GUINT64_FORMAT " entries, %" G_GUINT64_FORMAT
         " evictions\n", hits, st.entries, st.evictions);
  CU_ASSERT_TRUE(hits > OPS / 10 && st.evictions > 0);
  CU_ASSERT_TRUE(st.bytes <= st.max_bytes);
  /* Every key once more: cached keys answer their newest value; then a
   * write of each drops it, and nothing is left behind. */
  guint64 cached = 0;
  for (int k = 0; k < KEYS; k++) {
    guint64 t;
    ixia_doccache_ref_t *got = ixia_doccache_lookup(dc, keys[k], klens[k], &t);
    if (got) {
      cached++;
      CU_ASSERT_TRUE(same_value(got, model[k]));
    }
    ixia_doccache_write_begin(dc, keys[k], klens[k]);
    ixia_doccache_write_end(dc, keys[k], klens[k], NULL);
    /* A view taken before the write still reads its value. */
    if (got) {
      CU_ASSERT_TRUE(same_value(got, model[k]));
      ixia_doccache_release(got);
    }
    ixia_doccache_ref_t *after = ixia_doccache_lookup(dc, keys[k], klens[k], &t);
    CU_ASSERT_PTR_NULL(after);
    ixia_doccache_release(after);
  }
  CU_ASSERT_EQUAL(cached, st.entries);
  /* Emptied, it holds what a new cache holds: the tables shrank back. */
  ixia_doccache_get_stats(dc, &st);
  CU_ASSERT_EQUAL(st.entries, 0);
  ixia_doccache_t *fresh = ixia_doccache_new(128 << 10);
  ixia_doccache_stats_t st0;
  ixia_doccache_get_stats(fresh, &st0);
  CU_ASSERT_EQUAL(st.bytes, st0.bytes);
  ixia_doccache_destroy(fresh);
  for (int k = 0; k < KEYS; k++) g_free(model[k]);
  g_rand_free(r);
  ixia_doccache_destroy(dc);
  ixia_doccache_destroy(NULL);
}

/* store.compaction_low_priority (on by default): once a compaction ran,
 * RocksDB's compaction threads in this process run at nice 19. A 1 MiB
 * memtable and ~5 MB of writes make the flushes that start one. */
static void test_compactions_low_priority(void) {
  own_store_t o;
  ixia_store_t *st =
      own_open(&o, (const char *const[]){"store.write_buffer_mb", "1", "store.sync", "false", NULL});
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);
  GString *doc = g_string_new("{\"pad\":\"");
  while (doc->len < 2000) g_string_append(doc, "0123456789");
  g_string_append(doc, "\"}");
  int nice = G_MININT;
  for (int i = 0; i < 20000 && nice != 19; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "k%05d", i % 2500);
    CU_ASSERT_TRUE(put_to(st, key, doc->str, -1, NULL) > 0);
    if (i >= 2500 && i % 100 == 0) nice = ixt_thread_nice(getpid(), "rocksdb:low");
  }
  for (int wait = 0; wait < 200 && nice != 19; wait++) {
    g_usleep(50000);
    nice = ixt_thread_nice(getpid(), "rocksdb:low");
  }
  CU_ASSERT_EQUAL(nice, 19);
  own_close(&o);
  g_string_free(doc, TRUE);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("store", setup, teardown);
  IXT_ADD(s, test_put_get_versions);
  IXT_ADD(s, test_conditions);
  IXT_ADD(s, test_upsert_and_delete);
  IXT_ADD(s, test_upsert_size_limit);
  IXT_ADD(s, test_batch_is_atomic);
  IXT_ADD(s, test_ttl);
  IXT_ADD(s, test_group_commit);
  IXT_ADD(s, test_wait_newer_after_callback);
  IXT_ADD(s, test_group_bytes_bounded);
  IXT_ADD(s, test_compactions_low_priority);
  IXT_ADD(s, test_reopen_keeps_data_and_schemas);
  IXT_ADD(s, test_key_encoding);
  IXT_ADD(s, test_doc_cache_serves_and_forgets);
  IXT_ADD(s, test_doc_cache_never_stale);
  IXT_ADD(s, test_doc_cache_bounded);
  IXT_ADD(s, test_doc_cache_read_fill_only);
  IXT_ADD(s, test_doc_cache_against_model);
  IXT_ADD(s, test_memory_reads_never_fail);
  return ixt_run();
}
