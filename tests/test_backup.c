/* Point-in-time recovery, end to end: real memcached and ixia-query-api
 * processes; backups through the API (ixia-recovery backup, library and
 * CLI), restores checked document by document against the state a client
 * observed at each version. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

#include "client.h"
#include "config.h"
#include "recovery.h"
#include "store.h"
#include "support.h"

static ixt_memcached_t mc;
static ixt_api_t api;
static ixia_client_t *client;
static char *dir;
static char *backup_dir;

static const char *PRODUCTS = "{\"namespace\":\"shop\",\"table\":\"products\","
                              "\"indexes\":[{\"field\":\"price\",\"type\":\"double\"}]}";
static const char *ORDERS = "{\"namespace\":\"shop\",\"table\":\"orders\",\"indexes\":[]}";

/* What a client observed after one write: every live document
 * ("table\tkey" -> "version\tjson") and the number of schemas. */
typedef struct {
  gint64 version;
  GHashTable *docs;
  guint schemas;
} state_t;

static GPtrArray *states;   /* state_t*, by version */
static GHashTable *current; /* the live model */
static GHashTable *all_keys; /* every "table\tkey" ever written */
static guint n_schemas;

static void state_free(gpointer p) {
  state_t *s = p;
  g_hash_table_unref(s->docs);
  g_free(s);
}

static void record_state(gint64 version) {
  state_t *s = g_new0(state_t, 1);
  s->version = version;
  s->schemas = n_schemas;
  s->docs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, current);
  while (g_hash_table_iter_next(&it, &k, &v)) g_hash_table_insert(s->docs, g_strdup(k), g_strdup(v));
  g_ptr_array_add(states, s);
}

/* The state at version v: the last write at or before it. */
static const state_t *state_at(gint64 v) {
  const state_t *best = NULL;
  for (guint i = 0; i < states->len; i++) {
    const state_t *s = g_ptr_array_index(states, i);
    if (s->version <= v) best = s;
  }
  return best;
}

/* Reads key back through the API into the model (a write's result as the
 * user sees it). */
static void observe(const char *table, const char *key) {
  gboolean found = FALSE;
  gint64 version = 0;
  char *json = NULL;
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE_FATAL(ixia_client_get(client, "shop", table, key, NULL, &found, &version, &json, &e));
  char *id = g_strdup_printf("%s\t%s", table, key);
  g_hash_table_add(all_keys, g_strdup(id));
  if (found)
    g_hash_table_insert(current, id, g_strdup_printf("%" G_GINT64_FORMAT "\t%s", version, json));
  else {
    g_hash_table_remove(current, id);
    g_free(id);
  }
  g_free(json);
}

static gint64 put(const char *table, const char *key, const char *json) {
  gint64 v = 0;
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE_FATAL(ixia_client_put(client, "shop", table, key, json, -1, &v, &e));
  observe(table, key);
  record_state(v);
  return v;
}

static gint64 upsert(const char *key, const char *json) {
  gint64 v = 0;
  CU_ASSERT_TRUE_FATAL(ixia_client_upsert(client, "shop", "products", key, json, -1, &v, NULL));
  observe("products", key);
  record_state(v);
  return v;
}

static gint64 del(const char *key) {
  gint64 v = 0;
  CU_ASSERT_TRUE_FATAL(ixia_client_delete(client, "shop", "products", key, -1, &v, NULL));
  observe("products", key);
  record_state(v);
  return v;
}

static gint64 apply_schema(const char *json) {
  gint64 v = 0;
  CU_ASSERT_TRUE_FATAL(ixia_client_apply_schema(client, json, &v, NULL));
  n_schemas++;
  record_state(v);
  return v;
}

/* One atomic batch on products: ops "p:key:json", "u:key:json", "d:key".
 * Returns the first op's version; records one state (batches are atomic). */
static gint64 batch(const char *const *ops, guint n) {
  GPtrArray *wops = g_ptr_array_new_with_free_func(g_object_unref);
  for (guint i = 0; i < n; i++) {
    char **parts = g_strsplit(ops[i], ":", 3);
    IxiaWriteOp *w = g_object_new(IXIA_TYPE_WRITE_OP, "kind",
                                  parts[0][0] == 'p'   ? IXIA_OP_KIND_PUT
                                  : parts[0][0] == 'u' ? IXIA_OP_KIND_UPSERT
                                                       : IXIA_OP_KIND_DELETE_DOC,
                                  "ns", "shop", "table", "products", "key", parts[1], "json",
                                  parts[2] ? parts[2] : "", "expected_version", (gint64)-1, NULL);
    g_ptr_array_add(wops, w);
    g_strfreev(parts);
  }
  GArray *versions = g_array_new(FALSE, FALSE, sizeof(gint64));
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_batch(ixia_client_iface(client), &versions, wops, &xe, &gerr);
  CU_ASSERT_TRUE_FATAL(ixia_client_check(client, ok, xe, gerr, NULL));
  gint64 first = g_array_index(versions, gint64, 0);
  CU_ASSERT_EQUAL(g_array_index(versions, gint64, n - 1), first + n - 1);
  for (guint i = 0; i < n; i++) {
    char **parts = g_strsplit(ops[i], ":", 3);
    observe("products", parts[1]);
    g_strfreev(parts);
  }
  record_state(first + n - 1);
  g_array_unref(versions);
  g_ptr_array_unref(wops);
  return first;
}

static gint64 latest(void) { return ((state_t *)g_ptr_array_index(states, states->len - 1))->version; }

static int setup(void) {
  dir = ixt_tmpdir();
  backup_dir = g_build_filename(dir, "backup", NULL);
  states = g_ptr_array_new_with_free_func(state_free);
  current = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  all_keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  if (!ixt_memcached_start(&mc, 0)) return 1;
  char *d = g_build_filename(dir, "main", NULL);
  g_mkdir_with_parents(d, 0755);
  gboolean ok = ixt_api_start(&api, d, mc.addr, NULL);
  g_free(d);
  if (ok) client = ixia_client_new(api.addr, NULL);
  return ok && client ? 0 : 1;
}

static int teardown(void) {
  ixia_client_destroy(client);
  gboolean clean = ixt_api_stop(&api);
  ixt_memcached_stop(&mc);
  g_ptr_array_unref(states);
  g_hash_table_unref(current);
  g_hash_table_unref(all_keys);
  g_free(backup_dir);
  g_free(dir);
  return clean ? 0 : 1;
}

static double num(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static cJSON *backup(void) {
  ixia_backup_opts_t o = {.quiet = TRUE, .page_bytes = 200}; /* several pages */
  ixia_error_t *e = NULL;
  cJSON *s = ixia_recovery_backup(api.addr, backup_dir, &o, &e);
  if (!s) fprintf(stderr, "backup: %s\n", e->message);
  ixia_error_destroy(e);
  return s;
}

static cJSON *restore(gint64 v, const char *to, ixia_error_t **err) {
  ixia_backup_opts_t o = {.quiet = TRUE};
  return ixia_recovery_restore(backup_dir, v, to, &o, err);
}

static guint count_segments(void) {
  char *wal = g_build_filename(backup_dir, "wal", NULL);
  GDir *d = g_dir_open(wal, 0, NULL);
  guint n = 0;
  for (const char *name; d && (name = g_dir_read_name(d));) n += g_str_has_suffix(name, ".wal");
  if (d) g_dir_close(d);
  g_free(wal);
  return n;
}

static gboolean count_doc(const char *key, size_t key_len, gint64 version, gint64 expire_at,
                          const char *json, size_t json_len, gpointer user) {
  (void)key, (void)key_len, (void)version, (void)expire_at, (void)json, (void)json_len;
  (*(guint *)user)++;
  return TRUE;
}

static void count_schema(const char *ns, const char *table, const char *json, size_t len,
                         gint64 version, gpointer user) {
  (void)ns, (void)table, (void)json, (void)len, (void)version;
  (*(guint *)user)++;
}

/* Opens the restored store and compares it with the state at `version`:
 * every document with its version, deleted ones absent, nothing extra. */
static void check_store(const char *store_dir, gint64 version) {
  const state_t *st = state_at(version);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);
  ixia_config_t *cfg = ixia_config_new();
  CU_ASSERT_TRUE_FATAL(ixia_config_set(cfg, "store.path", store_dir, NULL));
  ixia_error_t *e = NULL;
  ixia_store_t *store = ixia_store_open(cfg, &e);
  if (!store) fprintf(stderr, "open restored store: %s\n", e->message);
  CU_ASSERT_PTR_NOT_NULL_FATAL(store);
  CU_ASSERT_EQUAL(ixia_store_latest_version(store), version);
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, all_keys);
  guint mismatches = 0;
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    char **id = g_strsplit(k, "\t", 2);
    gboolean found = FALSE;
    gint64 v = 0;
    char *json = NULL;
    CU_ASSERT_TRUE(ixia_store_get(store, "shop", id[0], id[1], strlen(id[1]), &found, &v, NULL, &json,
                                  NULL, NULL));
    char *got = found ? g_strdup_printf("%" G_GINT64_FORMAT "\t%s", v, json) : NULL;
    const char *want = g_hash_table_lookup(st->docs, k);
    if (g_strcmp0(got, want) != 0) {
      fprintf(stderr, "at version %" G_GINT64_FORMAT ", %s: restored '%s', expected '%s'\n", version,
              (char *)k, got ? got : "(absent)", want ? want : "(absent)");
      mismatches++;
    }
    g_free(got);
    g_free(json);
    g_strfreev(id);
  }
  CU_ASSERT_EQUAL(mismatches, 0);
  guint docs = 0, schemas = 0;
  CU_ASSERT_TRUE(ixia_store_scan(store, "shop", "products", NULL, 0, count_doc, &docs, NULL));
  CU_ASSERT_TRUE(ixia_store_scan(store, "shop", "orders", NULL, 0, count_doc, &docs, NULL));
  CU_ASSERT_EQUAL(docs, g_hash_table_size(st->docs));
  CU_ASSERT_TRUE(ixia_store_foreach_schema(store, count_schema, &schemas, NULL));
  CU_ASSERT_EQUAL(schemas, st->schemas);
  ixia_store_destroy(store);
  ixia_config_destroy(cfg);
}

/* A restore into a new directory; returns its path (g_free) or NULL. */
static char *restore_checked(gint64 v, gint64 expect_restored) {
  static int n;
  char *to = g_strdup_printf("%s/restored-%d/store", dir, n++);
  ixia_error_t *e = NULL;
  cJSON *s = restore(v, to, &e);
  if (!s) fprintf(stderr, "restore to %" G_GINT64_FORMAT ": %s\n", v, e->message);
  ixia_error_destroy(e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(num(s, "requested_version"), v);
  CU_ASSERT_EQUAL(num(s, "restored_version"), expect_restored);
  cJSON_Delete(s);
  check_store(to, expect_restored);
  return to;
}

/* Runs ixia-recovery; returns its exit status, stdout in *out (g_free). */
static int run_tool(const char *const *args, char **out, char **errout) {
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, IXIA_BIN_DIR "/ixia-recovery");
  for (const char *const *a = args; *a; a++) g_ptr_array_add(argv, (gpointer)*a);
  g_ptr_array_add(argv, NULL);
  int status = -1;
  GError *gerr = NULL;
  if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out, errout,
                    &status, &gerr)) {
    fprintf(stderr, "spawn: %s\n", gerr->message);
    g_error_free(gerr);
  }
  g_ptr_array_free(argv, TRUE);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static gint64 base_version, mid_version, batch_first, second_end;

static void test_wal_since(void) {
  apply_schema(PRODUCTS);
  put("products", "k00", "{\"price\":1}");
  put("products", "k01", "{\"price\":2}");
  GPtrArray *b = NULL;
  ixia_error_t *e = NULL;
  /* From the start, in order, each batch continuing the previous one. */
  CU_ASSERT_TRUE_FATAL(ixia_client_wal_since(client, 0, 1 << 20, &b, NULL));
  CU_ASSERT_EQUAL(b->len, 3);
  for (guint i = 0; i < b->len; i++)
    CU_ASSERT_EQUAL(((IxiaWalBatch *)g_ptr_array_index(b, i))->sequence, (gint64)i + 1);
  g_ptr_array_unref(b);
  /* At least one batch however small max_bytes is. */
  CU_ASSERT_TRUE_FATAL(ixia_client_wal_since(client, 1, 1, &b, NULL));
  CU_ASSERT_EQUAL(b->len, 1);
  CU_ASSERT_EQUAL(((IxiaWalBatch *)g_ptr_array_index(b, 0))->sequence, 2);
  g_ptr_array_unref(b);
  /* Nothing newer: empty. Beyond the store: an error, not a silent empty. */
  CU_ASSERT_TRUE_FATAL(ixia_client_wal_since(client, latest(), 1 << 20, &b, NULL));
  CU_ASSERT_EQUAL(b->len, 0);
  g_ptr_array_unref(b);
  CU_ASSERT_FALSE(ixia_client_wal_since(client, latest() + 5, 1 << 20, &b, &e));
  CU_ASSERT_PTR_NULL(b);
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
  ixia_error_destroy(e);
}

static void test_backup_and_append(void) {
  char buf[64];
  for (int i = 2; i < 10; i++) {
    snprintf(buf, sizeof buf, "k%02d", i);
    put("products", buf, "{\"price\":10,\"name\":\"first\"}");
  }
  upsert("k01", "{\"name\":\"merged\"}");
  del("k02");
  const char *ops1[] = {"p:k10:{\"price\":5}", "u:k03:{\"stock\":1}", "d:k04"};
  batch(ops1, 3);

  cJSON *s = backup();
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  base_version = (gint64)num(s, "base_version");
  CU_ASSERT_EQUAL(base_version, latest());
  CU_ASSERT_EQUAL(num(s, "archived_through"), latest());
  CU_ASSERT_EQUAL(num(s, "batches"), 0);
  cJSON_Delete(s);

  /* After the base: puts, upserts, deletes, a batch, a new table. */
  for (int i = 11; i < 16; i++) {
    snprintf(buf, sizeof buf, "k%02d", i);
    put("products", buf, "{\"price\":20,\"name\":\"second\"}");
  }
  upsert("k05", "{\"price\":21}");
  mid_version = del("k06");
  put("products", "k07", "{\"price\":22,\"name\":\"replaced\"}");
  const char *ops2[] = {"p:k16:{\"price\":6}", "p:k17:{\"price\":7}", "d:k11"};
  batch_first = batch(ops2, 3);
  apply_schema(ORDERS);
  put("orders", "o1", "{\"total\":3}");
  del("k00");

  /* Second run through the CLI: appends exactly the new batches. */
  char *out = NULL, *errout = NULL;
  const char *args[] = {"backup", "--api", api.addr, "--to", backup_dir, "--quiet", NULL};
  CU_ASSERT_EQUAL(run_tool(args, &out, &errout), 0);
  s = cJSON_Parse(out);
  CU_ASSERT_EQUAL(num(s, "base_version"), base_version);
  CU_ASSERT_EQUAL(num(s, "archived_through"), latest());
  CU_ASSERT_EQUAL(num(s, "batches"), 12); /* 11 single writes and one 3-op batch */
  cJSON_Delete(s);
  g_free(out);
  g_free(errout);
  CU_ASSERT_EQUAL(count_segments(), 1);

  /* Third run: a new segment continuing the first. */
  put("products", "k02", "{\"price\":30,\"name\":\"back\"}");
  upsert("k03", "{\"stock\":2}");
  const char *ops3[] = {"d:k05", "p:k18:{\"price\":8}"};
  batch(ops3, 2);
  second_end = latest();
  s = backup();
  CU_ASSERT_EQUAL(num(s, "archived_through"), second_end);
  CU_ASSERT_EQUAL(num(s, "batches"), 3);
  cJSON_Delete(s);
  CU_ASSERT_EQUAL(count_segments(), 2);
  /* Nothing new: nothing appended, no empty segment. */
  s = backup();
  CU_ASSERT_EQUAL(num(s, "batches"), 0);
  cJSON_Delete(s);
  CU_ASSERT_EQUAL(count_segments(), 2);
}

static void test_restore_points(void) {
  g_free(restore_checked(base_version, base_version));
  g_free(restore_checked(mid_version, mid_version));
  /* Inside the 3-op batch: up to the batch before it. */
  g_free(restore_checked(batch_first + 1, batch_first - 1));
  g_free(restore_checked(batch_first + 2, batch_first + 2));
  char *to = restore_checked(second_end, second_end);

  /* An API on the restored store serves it and continues the versions. */
  char *api_dir = g_path_get_dirname(to);
  ixt_api_t a2 = {0};
  CU_ASSERT_TRUE_FATAL(ixt_api_start(&a2, api_dir, "", NULL));
  ixia_client_t *c2 = ixia_client_new(a2.addr, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c2);
  gboolean found = FALSE;
  gint64 v = 0;
  char *json = NULL;
  CU_ASSERT_TRUE(ixia_client_get(c2, "shop", "products", "k07", NULL, &found, &v, &json, NULL));
  char *got = g_strdup_printf("%" G_GINT64_FORMAT "\t%s", v, json);
  CU_ASSERT_STRING_EQUAL(got, g_hash_table_lookup(state_at(second_end)->docs, "products\tk07"));
  g_free(got);
  g_free(json);
  CU_ASSERT_TRUE(ixia_client_put(c2, "shop", "products", "k99", "{\"price\":1}", -1, &v, NULL));
  CU_ASSERT_EQUAL(v, second_end + 1);
  ixia_client_destroy(c2);
  CU_ASSERT_TRUE(ixt_api_stop(&a2));
  g_free(api_dir);
  g_free(to);
}

static void expect_restore_error(gint64 v, const char *backup, const char *to, ixia_code_t code,
                                 const char *needle) {
  ixia_backup_opts_t o = {.quiet = TRUE};
  ixia_error_t *e = NULL;
  cJSON *s = ixia_recovery_restore(backup, v, to, &o, &e);
  CU_ASSERT_PTR_NULL(s);
  cJSON_Delete(s);
  CU_ASSERT_EQUAL(e ? e->code : 0, code);
  if (e && !strstr(e->message, needle)) fprintf(stderr, "'%s' lacks '%s'\n", e->message, needle);
  CU_ASSERT_TRUE(e && strstr(e->message, needle));
  ixia_error_destroy(e);
}

static void test_restore_errors(void) {
  char *to = g_build_filename(dir, "bad-restore", NULL);
  char *base = g_strdup_printf("base snapshot of %s (version %" G_GINT64_FORMAT ")", backup_dir,
                               base_version);
  expect_restore_error(base_version - 1, backup_dir, to, IXIA_EINVAL, base);
  expect_restore_error(second_end + 1, backup_dir, to, IXIA_EINVAL, "beyond the archive");
  char *empty = g_build_filename(dir, "empty", NULL);
  g_mkdir_with_parents(empty, 0755);
  expect_restore_error(1, empty, to, IXIA_ENOTFOUND, "holds no backup");
  /* Never over an existing store. */
  char *existing = g_strdup_printf("%s/restored-0/store", dir);
  expect_restore_error(base_version, backup_dir, existing, IXIA_EINVAL, "is not empty");
  /* The CLI: exit 3 (NOT_FOUND, as `ixia`) and the message on stderr. */
  char *out = NULL, *errout = NULL;
  const char *args[] = {"restore", "--from", empty, "--to-version", "5", "--to", to, NULL};
  CU_ASSERT_EQUAL(run_tool(args, &out, &errout), 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(errout, "holds no backup"));
  g_free(out);
  g_free(errout);
  /* A backup into a directory holding something else is refused. */
  char *notes = g_build_filename(empty, "notes.txt", NULL);
  CU_ASSERT_TRUE(g_file_set_contents(notes, "x", -1, NULL));
  g_free(notes);
  ixia_backup_opts_t o = {.quiet = TRUE};
  ixia_error_t *e = NULL;
  CU_ASSERT_PTR_NULL(ixia_recovery_backup(api.addr, empty, &o, &e));
  CU_ASSERT_TRUE(e && strstr(e->message, "holds no backup"));
  ixia_error_destroy(e);
  g_free(existing);
  g_free(empty);
  g_free(base);
  g_free(to);
}

/* Last: it breaks the archive. */
static void test_hole(void) {
  char *wal = g_build_filename(backup_dir, "wal", NULL);
  GDir *d = g_dir_open(wal, 0, NULL);
  char *first = NULL;
  for (const char *name; (name = g_dir_read_name(d));)
    if (!first || strcmp(name, first) < 0) {
      g_free(first);
      first = g_strdup(name);
    }
  g_dir_close(d);
  char *path = g_build_filename(wal, first, NULL);
  CU_ASSERT_EQUAL(g_unlink(path), 0);
  char *to = g_build_filename(dir, "hole-restore", NULL);
  expect_restore_error(second_end, backup_dir, to, IXIA_ENOTFOUND, "has a hole");
  /* Before the hole the archive still serves. */
  g_free(restore_checked(base_version, base_version));
  ixia_backup_opts_t o = {.quiet = TRUE};
  ixia_error_t *e = NULL;
  CU_ASSERT_PTR_NULL(ixia_recovery_backup(api.addr, backup_dir, &o, &e));
  CU_ASSERT_TRUE(e && strstr(e->message, "has a hole"));
  ixia_error_destroy(e);
  g_free(to);
  g_free(path);
  g_free(first);
  g_free(wal);
}

/* An API keeping no WAL: a flush (each snapshot makes one) purges it. */
static void test_purged_wal(void) {
  char *d = g_build_filename(dir, "nowal", NULL);
  g_mkdir_with_parents(d, 0755);
  const char *sets[] = {"store.wal_ttl_seconds=0", "store.wal_size_limit_mb=0", NULL};
  ixt_api_t a = {0};
  CU_ASSERT_TRUE_FATAL(ixt_api_start(&a, d, "", sets));
  ixia_client_t *c = ixia_client_new(a.addr, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_TRUE(ixia_client_apply_schema(c, PRODUCTS, NULL, NULL));
  char *bdir = g_build_filename(d, "backup", NULL);
  ixia_backup_opts_t o = {.quiet = TRUE};
  ixia_error_t *e = NULL;
  cJSON *s = ixia_recovery_backup(a.addr, bdir, &o, &e); /* base at 1 */
  CU_ASSERT_PTR_NOT_NULL(s);
  cJSON_Delete(s);
  gint64 v = 0;
  CU_ASSERT_TRUE(ixia_client_put(c, "shop", "products", "a", "{\"price\":1}", -1, &v, NULL));
  /* Another snapshot flushes the memtable: the WAL holding "a" goes. */
  char *snap = g_build_filename(d, "snap", NULL);
  char *json = NULL;
  CU_ASSERT_TRUE(ixia_client_snapshot(c, snap, &json, NULL));
  g_free(json);
  CU_ASSERT_TRUE(ixia_client_put(c, "shop", "products", "b", "{\"price\":2}", -1, &v, NULL));
  GPtrArray *b = NULL;
  CU_ASSERT_FALSE(ixia_client_wal_since(c, 1, 1 << 20, &b, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ENOTFOUND);
  ixia_error_destroy(e);
  e = NULL;
  CU_ASSERT_PTR_NULL(ixia_recovery_backup(a.addr, bdir, &o, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ENOTFOUND);
  CU_ASSERT_TRUE(e && strstr(e->message, "Start a new one"));
  if (e) fprintf(stderr, "(expected) %s\n", e->message);
  ixia_error_destroy(e);
  ixia_client_destroy(c);
  CU_ASSERT_TRUE(ixt_api_stop(&a));
  g_free(snap);
  g_free(bdir);
  g_free(d);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("backup", setup, teardown);
  IXT_ADD(s, test_wal_since);
  IXT_ADD(s, test_backup_and_append);
  IXT_ADD(s, test_restore_points);
  IXT_ADD(s, test_restore_errors);
  IXT_ADD(s, test_hole);
  IXT_ADD(s, test_purged_wal);
  return ixt_run();
}
