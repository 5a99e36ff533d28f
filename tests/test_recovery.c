/* Recovery end to end, on the whole pipeline as real processes (memcached,
 * ixia-devkafka with 4 partitions, ixia-replication-sink, two ixia-indexer
 * shards on partitions 0-1 and 2-3, ixia-query-api):
 *   - the partitioner used by rebuild-index is librdkafka's;
 *   - DR drill: snapshot, more writes, kill -9 a shard and wipe its index,
 *     rebuild it from the snapshot, restart it: verify passes and recorded
 *     query results (hit keys, totals, aggregations) are unchanged;
 *   - determinism: rebuilds of one snapshot have one checksum, a later
 *     snapshot another;
 *   - poison: documents written before an index was declared fail at the
 *     indexer during a backfill and land in the failed-updates logs while
 *     the rest is indexed; replay-failed re-logs them while they are still
 *     bad, and empties the logs once they are fixed;
 *   - the CLI with only IXIA_API set (snapshot, verify);
 *   - replay-failed keeps the TTL of what it re-sends (run last: it moves
 *     the daemons' clock);
 *   - verify detects a missing and an extra document (exit 1). */
#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>
#include <string.h>
#include <sys/wait.h>

#include "client.h"
#include "config.h"
#include "kafka_support.h"
#include "recovery.h"
#include "store.h"
#include "support.h"
#include "thrift_util.h"

#define NS "shop"
#define TABLE "products"

static const char *SCHEMA =
    "{\"namespace\":\"shop\",\"table\":\"products\",\"indexes\":["
    "{\"field\":\"category\",\"type\":\"keyword\"},{\"field\":\"price\",\"type\":\"double\"},"
    "{\"field\":\"title\",\"type\":\"text\"}]}";
static const char *REVIEWS =
    "{\"namespace\":\"shop\",\"table\":\"reviews\",\"indexes\":[{\"field\":\"product\",\"type\":\"keyword\"}]}";
static const char *REVIEWS_RATED =
    "{\"namespace\":\"shop\",\"table\":\"reviews\",\"indexes\":[{\"field\":\"product\",\"type\":\"keyword\"},"
    "{\"field\":\"rating\",\"type\":\"long\"}]}";

typedef struct {
  ixt_stack_t st; /* two shards: partitions 0-1 and 2-3 */
  ixia_client_t *client;
} rstack_t;

static rstack_t S; /* one stack for the suite: startup is the slow part */

static int suite_init(void) {
  S.client = NULL;
  ixt_clock_start(); /* the daemons' expiry clock: test_replay_keeps_ttl moves it */
  if (!ixt_stack_start(&S.st, 2, NULL)) return 1;
  ixia_error_t *e = NULL;
  S.client = ixia_client_new(S.st.api.addr, &e);
  gboolean ok = S.client && ixia_client_apply_schema(S.client, SCHEMA, NULL, &e) &&
                ixia_client_apply_schema(S.client, REVIEWS, NULL, &e);
  if (e) fprintf(stderr, "\n  stack: %s\n", e->message);
  ixia_error_destroy(e);
  return ok ? 0 : 1;
}

static int suite_clean(void) {
  ixia_client_destroy(S.client);
  return ixt_stack_stop(&S.st) ? 0 : 1;
}

/* ---------- helpers ---------- */

static gint64 put(const char *table, const char *key, const char *json) {
  gint64 v = -1;
  ixia_error_t *e = NULL;
  if (!ixia_client_put(S.client, NS, table, key, json, -1, &v, &e)) {
    fprintf(stderr, "\n  put %s: %s\n", key, e->message);
    ixia_error_destroy(e);
  }
  return v;
}

static gint64 latest_version(void) {
  char *json = NULL;
  if (!ixia_client_stats(S.client, &json, NULL)) return -1;
  cJSON *o = cJSON_Parse(json);
  gint64 v = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "store_latest_version"));
  cJSON_Delete(o);
  g_free(json);
  return v;
}

static gint cmp_strp(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs a query to the end (every page) after the index has applied
 * min_version; returns "total|sorted keys|aggs" for comparison. */
static char *query_fingerprint(const char *filter, const char *aggs, gint64 min_version) {
  GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
  char *after = NULL, *aggs_text = NULL;
  double total = -1;
  gboolean ok = TRUE;
  do {
    char *req = g_strdup_printf("{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":100,"
                                "\"min_version\":%" G_GINT64_FORMAT ",\"timeout_ms\":60000%s%s%s%s%s%s}",
                                min_version, filter ? ",\"filter\":" : "", filter ? filter : "",
                                aggs ? ",\"aggs\":" : "", aggs ? aggs : "", after ? ",\"after\":" : "",
                                after ? after : "");
    char *resp = NULL;
    ixia_error_t *e = NULL;
    /* A restarted shard: the API's old connection to it fails once. */
    for (int attempt = 0; attempt < 3; attempt++) {
      ixia_error_destroy(e);
      e = NULL;
      if ((ok = ixia_client_query(S.client, req, &resp, &e))) break;
      g_usleep(200000);
    }
    if (!ok) fprintf(stderr, "\n  query %s: %s\n", req, e->message);
    ixia_error_destroy(e);
    g_free(req);
    g_free(after);
    after = NULL;
    if (ok) {
      cJSON *o = cJSON_Parse(resp);
      const cJSON *h;
      cJSON_ArrayForEach(h, cJSON_GetObjectItem(o, "hits"))
          g_ptr_array_add(keys, g_strdup(cJSON_GetStringValue(cJSON_GetObjectItem(h, "key"))));
      if (!aggs_text) {
        total = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "total"));
        aggs_text = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "aggs"));
      }
      cJSON *next = cJSON_GetObjectItem(o, "next");
      if (cJSON_IsString(next)) after = cJSON_PrintUnformatted(next);
      cJSON_Delete(o);
    }
    g_free(resp);
  } while (ok && after);
  g_ptr_array_sort(keys, cmp_strp);
  GString *out = g_string_new(NULL);
  g_string_append_printf(out, "%.0f|", total);
  for (guint i = 0; i < keys->len; i++) g_string_append_printf(out, "%s,", (char *)g_ptr_array_index(keys, i));
  g_string_append_printf(out, "|%s", aggs_text ? aggs_text : "null");
  if (aggs_text) cJSON_free(aggs_text);
  g_ptr_array_unref(keys);
  return g_string_free(out, FALSE);
}

static const char *FILTERS[] = {NULL, "{\"term\":{\"category\":\"c1\"}}",
                                "{\"range\":{\"price\":{\"gte\":20,\"lt\":60}}}",
                                "{\"and\":[{\"match\":{\"title\":\"red\"}},{\"not\":{\"term\":{\"category\":\"c2\"}}}]}"};
static const char *AGGS =
    "{\"n\":{\"count\":{}},\"sum\":{\"sum\":\"price\"},\"lo\":{\"min\":\"price\"},"
    "\"by\":{\"terms\":{\"field\":\"category\",\"size\":10,\"aggs\":{\"top\":{\"max\":\"price\"}}}}}";

static GPtrArray *record_queries(gint64 min_version) {
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < G_N_ELEMENTS(FILTERS); i++) g_ptr_array_add(out, query_fingerprint(FILTERS[i], AGGS, min_version));
  return out;
}

static cJSON *verify_live(void) {
  ixia_verify_opts_t vo = {.page = 1000, .examples = 5, .recheck_ms = 200, .quiet = TRUE};
  ixia_error_t *e = NULL;
  cJSON *r = ixia_recovery_verify(S.st.api.addr, &vo, &e);
  if (!r) fprintf(stderr, "\n  verify: %s\n", e->message);
  ixia_error_destroy(e);
  return r;
}

#define num ixt_json_num

static gboolean verify_ok(void) {
  cJSON *r = verify_live();
  gboolean ok = r && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok"));
  if (r && !ok) {
    char *t = cJSON_Print(r);
    fprintf(stderr, "\n  verify found divergence: %s\n", t);
    cJSON_free(t);
  }
  cJSON_Delete(r);
  return ok;
}

static char *rebuild(const char *snapshot, const char *index_dir, const char *partitions) {
  ixia_config_t *cfg = ixia_config_new();
  ixia_rebuild_opts_t ro = {.partitions = partitions, .partition_count = 4, .batch = 128, .quiet = TRUE};
  ixia_error_t *e = NULL;
  cJSON *r = ixia_recovery_rebuild_index(snapshot, index_dir, cfg, &ro, &e);
  ixia_config_destroy(cfg);
  if (!r) {
    fprintf(stderr, "\n  rebuild-index: %s\n", e->message);
    ixia_error_destroy(e);
    return NULL;
  }
  char *sum = g_strdup(cJSON_GetStringValue(cJSON_GetObjectItem(r, "checksum")));
  cJSON_Delete(r);
  return sum;
}

static gint64 take_snapshot(const char *dir) {
  ixia_error_t *e = NULL;
  cJSON *r = ixia_recovery_snapshot(S.st.api.addr, dir, &e);
  if (!r) {
    fprintf(stderr, "\n  snapshot: %s\n", e->message);
    ixia_error_destroy(e);
    return -1;
  }
  gint64 v = (gint64)num(r, "version");
  cJSON_Delete(r);
  return v;
}

/* Runs ixia-recovery with only IXIA_API in its environment (plus PATH and
 * the sanitizer options). Returns the exit code; *out gets stdout. */
static int run_cli(char **argv_tail, char **out) {
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, IXIA_BIN_DIR "/ixia-recovery");
  for (char **a = argv_tail; *a; a++) g_ptr_array_add(argv, *a);
  g_ptr_array_add(argv, NULL);
  char *api_env = g_strdup_printf("IXIA_API=%s", S.st.api.addr);
  GPtrArray *env = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(env, g_strdup(api_env));
  const char *keep[] = {"PATH", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "TMPDIR"};
  for (guint i = 0; i < G_N_ELEMENTS(keep); i++)
    if (g_getenv(keep[i])) g_ptr_array_add(env, g_strdup_printf("%s=%s", keep[i], g_getenv(keep[i])));
  g_ptr_array_add(env, NULL);
  int status = -1;
  char *err_text = NULL;
  GError *gerr = NULL;
  if (!g_spawn_sync(NULL, (char **)argv->pdata, (char **)env->pdata, G_SPAWN_DEFAULT, NULL, NULL, out,
                    &err_text, &status, &gerr)) {
    fprintf(stderr, "\n  spawn: %s\n", gerr->message);
    g_error_free(gerr);
  }
  if (err_text && *err_text && (strstr(err_text, "Sanitizer") || !WIFEXITED(status) || WEXITSTATUS(status) != 0))
    fprintf(stderr, "\n  cli stderr: %s\n  cli stdout: %s\n", err_text, out && *out ? *out : "");
  g_free(err_text);
  g_free(api_env);
  g_ptr_array_unref(env);
  g_ptr_array_free(argv, TRUE);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---------- tests ---------- */

static void test_partitioner_matches_librdkafka(void) {
  char key[64];
  for (gint32 count = 1; count <= 16; count++) {
    for (int i = 0; i < 300; i++) {
      snprintf(key, sizeof key, "key-%d-\xc3\xa9-%d", i, i * 7919);
      GBytes *k = ixia_record_doc_key(NS, TABLE, key, strlen(key));
      gsize len;
      const void *data = g_bytes_get_data(k, &len);
      gint32 want = rd_kafka_msg_partitioner_consistent_random(NULL, data, len, count, NULL, NULL);
      g_bytes_unref(k);
      CU_ASSERT_EQUAL(ixia_recovery_partition(NS, TABLE, key, strlen(key), count), want);
    }
  }
}

static gint64 g_snapshot_version;
static char *g_snapshot_dir;

static void test_dr_drill(void) {
  char key[32], json[160];
  const char *words[] = {"red", "blue", "green", "smart"};
  for (int i = 0; i < 400; i++) {
    snprintf(key, sizeof key, "p%04d", i);
    snprintf(json, sizeof json, "{\"category\":\"c%d\",\"price\":%d,\"title\":\"%s %s thing\"}", i % 5,
             (i * 37) % 100, words[i % 4], words[(i / 4) % 4]);
    CU_ASSERT_TRUE(put(TABLE, key, json) > 0);
  }
  g_snapshot_dir = g_strdup_printf("%s/snap1", S.st.dir);
  gint64 before = latest_version();
  g_snapshot_version = take_snapshot(g_snapshot_dir);
  CU_ASSERT_EQUAL(g_snapshot_version, before); /* no write in between */
  /* After the snapshot: new documents, updates, deletes. */
  for (int i = 400; i < 500; i++) {
    snprintf(key, sizeof key, "p%04d", i);
    snprintf(json, sizeof json, "{\"category\":\"c%d\",\"price\":%d,\"title\":\"red new\"}", i % 7, i % 90);
    CU_ASSERT_TRUE(put(TABLE, key, json) > 0);
  }
  for (int i = 0; i < 400; i += 7) {
    snprintf(key, sizeof key, "p%04d", i);
    CU_ASSERT_TRUE(ixia_client_upsert(S.client, NS, TABLE, key, "{\"price\":55,\"category\":\"c2\"}", -1, NULL, NULL));
  }
  gint64 v = 0;
  for (int i = 3; i < 400; i += 11) {
    snprintf(key, sizeof key, "p%04d", i);
    CU_ASSERT_TRUE(ixia_client_delete(S.client, NS, TABLE, key, -1, &v, NULL));
  }
  v = latest_version();
  GPtrArray *before_q = record_queries(v);
  CU_ASSERT_TRUE(verify_ok());

  /* Lose shard 1 entirely, rebuild it from the snapshot, restart it. */
  ixt_daemon_kill(&S.st.indexer[1]);
  char *index1 = g_strdup_printf("%s/index", S.st.indexer_dir[1]);
  char *cmd = g_strdup_printf("rm -rf '%s'", index1);
  CU_ASSERT_EQUAL(system(cmd), 0);
  g_free(cmd);
  char *sum = rebuild(g_snapshot_dir, index1, "2-3");
  CU_ASSERT_PTR_NOT_NULL(sum);
  g_free(sum);
  CU_ASSERT_TRUE_FATAL(ixt_daemon_restart(&S.st.indexer[1]));
  GPtrArray *after_q = record_queries(v);
  CU_ASSERT_EQUAL_FATAL(after_q->len, before_q->len);
  for (guint i = 0; i < before_q->len; i++) {
    CU_ASSERT_STRING_EQUAL(g_ptr_array_index(after_q, i), g_ptr_array_index(before_q, i));
    if (strcmp(g_ptr_array_index(after_q, i), g_ptr_array_index(before_q, i)))
      fprintf(stderr, "\n  query %u before: %.300s\n  after: %.300s\n", i,
              (char *)g_ptr_array_index(before_q, i), (char *)g_ptr_array_index(after_q, i));
  }
  CU_ASSERT_TRUE(verify_ok());
  g_ptr_array_unref(before_q);
  g_ptr_array_unref(after_q);
  g_free(index1);
}

static void test_rebuild_is_deterministic(void) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(g_snapshot_dir);
  char *a_dir = g_strdup_printf("%s/det-a", S.st.dir), *b_dir = g_strdup_printf("%s/det-b", S.st.dir);
  char *a = rebuild(g_snapshot_dir, a_dir, NULL);
  char *b = rebuild(g_snapshot_dir, b_dir, NULL);
  CU_ASSERT_PTR_NOT_NULL(a);
  CU_ASSERT_STRING_EQUAL(a ? a : "", b ? b : "-");
  /* dump-index reads the same checksum back from the directory. */
  ixia_config_t *cfg = ixia_config_new();
  cJSON *dump = ixia_recovery_dump_index(b_dir, cfg, NULL);
  CU_ASSERT_STRING_EQUAL(dump ? cJSON_GetStringValue(cJSON_GetObjectItem(dump, "checksum")) : "", a ? a : "-");
  CU_ASSERT_EQUAL(num(dump, "documents"), 400);
  cJSON_Delete(dump);
  /* The same snapshot on two shards splits its documents. */
  char *s0 = g_strdup_printf("%s/det-s0", S.st.dir), *s1 = g_strdup_printf("%s/det-s1", S.st.dir);
  g_free(rebuild(g_snapshot_dir, s0, "0-1"));
  g_free(rebuild(g_snapshot_dir, s1, "2-3"));
  cJSON *d0 = ixia_recovery_dump_index(s0, cfg, NULL), *d1 = ixia_recovery_dump_index(s1, cfg, NULL);
  CU_ASSERT_EQUAL(num(d0, "documents") + num(d1, "documents"), 400);
  CU_ASSERT_TRUE(num(d0, "documents") > 0 && num(d1, "documents") > 0);
  cJSON_Delete(d0);
  cJSON_Delete(d1);
  /* Offline verify: the rebuild matches its snapshot exactly. */
  ixia_verify_opts_t vo = {.page = 100, .examples = 3, .quiet = TRUE};
  cJSON *off = ixia_recovery_verify_offline(a_dir, g_snapshot_dir, cfg, &vo, NULL);
  CU_ASSERT_TRUE(off && cJSON_IsTrue(cJSON_GetObjectItem(off, "ok")));
  CU_ASSERT_EQUAL(num(off, "documents"), 400);
  cJSON_Delete(off);
  /* One more write, a new snapshot: another checksum. */
  CU_ASSERT_TRUE(put(TABLE, "p9999", "{\"category\":\"c9\",\"price\":1}") > 0);
  char *snap2 = g_strdup_printf("%s/snap2", S.st.dir), *c_dir = g_strdup_printf("%s/det-c", S.st.dir);
  CU_ASSERT_TRUE(take_snapshot(snap2) > g_snapshot_version);
  char *c = rebuild(snap2, c_dir, NULL);
  CU_ASSERT_PTR_NOT_NULL(c);
  CU_ASSERT_TRUE(a && c && strcmp(a, c) != 0);
  /* The old rebuild lacks what the new snapshot has: offline verify says so. */
  off = ixia_recovery_verify_offline(a_dir, snap2, cfg, &vo, NULL);
  CU_ASSERT_TRUE(off && cJSON_IsFalse(cJSON_GetObjectItem(off, "ok")));
  CU_ASSERT_TRUE(num(off, "missing.count") >= 1);
  cJSON_Delete(off);
  ixia_config_destroy(cfg);
  g_free(a), g_free(b), g_free(c), g_free(a_dir), g_free(b_dir), g_free(c_dir), g_free(snap2);
  g_free(s0), g_free(s1);
}

static gint64 log_lines(const char *path) {
  char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL)) return 0;
  gint64 n = 0;
  for (char *p = text; *p; p++) n += *p == '\n';
  g_free(text);
  return n;
}

static cJSON *replay(const char *log) {
  ixia_error_t *e = NULL;
  cJSON *r = ixia_recovery_replay_failed(S.st.api.addr, log, 50, &e);
  if (!r) fprintf(stderr, "\n  replay-failed: %s\n", e->message);
  ixia_error_destroy(e);
  return r;
}

static void test_poison_then_replay(void) {
  char key[32], json[96];
  const int n = 60, bad = 12;
  /* Written while "rating" is not declared: the API accepts any type. */
  for (int i = 0; i < n; i++) {
    snprintf(key, sizeof key, "r%03d", i);
    if (i < bad) snprintf(json, sizeof json, "{\"product\":\"p%d\",\"rating\":\"great\"}", i % 4);
    else snprintf(json, sizeof json, "{\"product\":\"p%d\",\"rating\":%d}", i % 4, i % 5);
    CU_ASSERT_TRUE(put("reviews", key, json) > 0);
  }
  CU_ASSERT_TRUE_FATAL(ixia_client_apply_schema(S.client, REVIEWS_RATED, NULL, NULL));
  ixia_backfill_opts_t bo = {.batch = 25, .quiet = TRUE};
  cJSON *bf = ixia_recovery_backfill(S.st.api.addr, NS, "reviews", &bo, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(bf);
  CU_ASSERT_EQUAL(num(bf, "applied"), n - bad); /* the others were indexed */
  cJSON_Delete(bf);
  char *logs[2];
  for (int i = 0; i < 2; i++) logs[i] = g_strdup_printf("%s/index.failed-updates.jsonl", S.st.indexer_dir[i]);
  CU_ASSERT_EQUAL(log_lines(logs[0]) + log_lines(logs[1]), bad);
  /* Still bad: replay re-logs every entry (the indexer logs them again). */
  for (int i = 0; i < 2; i++) {
    cJSON *r = replay(logs[i]);
    CU_ASSERT_PTR_NOT_NULL(r);
    CU_ASSERT_EQUAL(num(r, "still_failing"), num(r, "entries"));
    CU_ASSERT_EQUAL(num(r, "replayed"), 0);
    CU_ASSERT_TRUE(cJSON_IsFalse(cJSON_GetObjectItem(r, "ok")));
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(log_lines(logs[0]) + log_lines(logs[1]), bad);
  /* Fix them through the API (now type-checked), one by deleting it. */
  gint64 v = 0;
  for (int i = 0; i < bad; i++) {
    snprintf(key, sizeof key, "r%03d", i);
    gboolean ok = i == 0 ? ixia_client_delete(S.client, NS, "reviews", key, -1, &v, NULL)
                         : ixia_client_upsert(S.client, NS, "reviews", key, "{\"rating\":4}", -1, &v, NULL);
    CU_ASSERT_TRUE(ok);
  }
  guint64 entries = 0;
  for (int i = 0; i < 2; i++) {
    cJSON *r = replay(logs[i]);
    CU_ASSERT_PTR_NOT_NULL(r);
    CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
    CU_ASSERT_EQUAL(num(r, "still_failing"), 0);
    CU_ASSERT_EQUAL(num(r, "not_attempted"), 0);
    CU_ASSERT_EQUAL(num(r, "replayed"), num(r, "entries"));
    entries += (guint64)num(r, "entries");
    cJSON_Delete(r);
    CU_ASSERT_EQUAL(log_lines(logs[i]), 0);
    char *aside = g_strconcat(logs[i], ".replaying", NULL);
    CU_ASSERT_FALSE(g_file_test(aside, G_FILE_TEST_EXISTS));
    g_free(aside);
  }
  CU_ASSERT_EQUAL(entries, bad);
  /* Twice is safe: nothing to do. */
  cJSON *r = replay(logs[0]);
  CU_ASSERT_EQUAL(num(r, "entries"), 0);
  CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
  cJSON_Delete(r);
  char *req = g_strdup_printf("{\"namespace\":\"shop\",\"table\":\"reviews\",\"limit\":0,\"min_version\":%" G_GINT64_FORMAT
                              ",\"filter\":{\"range\":{\"rating\":{\"gte\":4}}}}", v);
  char *resp = NULL;
  CU_ASSERT_TRUE(ixia_client_query(S.client, req, &resp, NULL));
  cJSON *o = cJSON_Parse(resp);
  int fours = 0;
  for (int i = bad; i < n; i++) fours += i % 5 == 4;
  CU_ASSERT_EQUAL(num(o, "total"), fours + bad - 1);
  cJSON_Delete(o);
  g_free(resp);
  g_free(req);
  CU_ASSERT_TRUE(verify_ok());
  g_free(logs[0]);
  g_free(logs[1]);
}

/* replay-failed re-sends each document with its expiry. Documents of a
 * table with a TTL fail at a backfill once a field they hold with the
 * wrong type is declared; the field's index is then dropped and the log
 * replayed: the documents index again, as they are in the truth store, and
 * still leave the index when their TTL ends. (A replay that sent no expiry
 * re-indexed them without one: they stayed in totals for good.) Last in
 * the suite: it moves the daemons' clock. */
static void test_replay_keeps_ttl(void) {
  const char *plain = "{\"namespace\":\"shop\",\"table\":\"passes\",\"ttl_seconds\":3600,"
                      "\"indexes\":[{\"field\":\"owner\",\"type\":\"keyword\"}]}";
  const char *levels = "{\"namespace\":\"shop\",\"table\":\"passes\",\"ttl_seconds\":3600,"
                       "\"indexes\":[{\"field\":\"owner\",\"type\":\"keyword\"},"
                       "{\"field\":\"level\",\"type\":\"long\"}]}";
  CU_ASSERT_TRUE_FATAL(ixia_client_apply_schema(S.client, plain, NULL, NULL));
  const int n = 20, bad = 5;
  char key[32], json[96];
  for (int i = 0; i < n; i++) {
    snprintf(key, sizeof key, "pass%02d", i);
    if (i < bad) snprintf(json, sizeof json, "{\"owner\":\"o%d\",\"level\":\"gold\"}", i);
    else snprintf(json, sizeof json, "{\"owner\":\"o%d\",\"level\":%d}", i, i);
    CU_ASSERT_TRUE(put("passes", key, json) > 0);
  }
  CU_ASSERT_TRUE_FATAL(ixia_client_apply_schema(S.client, levels, NULL, NULL));
  ixia_backfill_opts_t bo = {.batch = 25, .quiet = TRUE};
  cJSON *bf = ixia_recovery_backfill(S.st.api.addr, NS, "passes", &bo, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(bf);
  CU_ASSERT_EQUAL(num(bf, "applied"), n - bad);
  cJSON_Delete(bf);
  char *logs[2];
  for (int i = 0; i < 2; i++) logs[i] = g_strdup_printf("%s/index.failed-updates.jsonl", S.st.indexer_dir[i]);
  CU_ASSERT_EQUAL(log_lines(logs[0]) + log_lines(logs[1]), bad);
  /* The field's index dropped: the same stored documents index now. */
  gint64 v = 0;
  CU_ASSERT_TRUE_FATAL(ixia_client_apply_schema(S.client, plain, &v, NULL));
  char *count = g_strdup_printf("{\"namespace\":\"shop\",\"table\":\"passes\",\"limit\":0,"
                                "\"min_version\":%" G_GINT64_FORMAT "}", v);
  char *resp = NULL;
  CU_ASSERT_TRUE(ixia_client_query(S.client, count, &resp, NULL)); /* every shard has the schema */
  g_clear_pointer(&resp, g_free);
  guint64 replayed = 0;
  for (int i = 0; i < 2; i++) {
    cJSON *r = replay(logs[i]);
    CU_ASSERT_PTR_NOT_NULL(r);
    CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
    replayed += (guint64)num(r, "replayed");
    cJSON_Delete(r);
  }
  CU_ASSERT_EQUAL(replayed, bad);
  CU_ASSERT_TRUE(ixia_client_query(S.client, count, &resp, NULL));
  cJSON *o = resp ? cJSON_Parse(resp) : NULL;
  CU_ASSERT_EQUAL(num(o, "total"), n);
  cJSON_Delete(o);
  g_clear_pointer(&resp, g_free);
  /* An hour and a second on, on the daemons' clock: none is counted. */
  ixt_clock_set(3601);
  const char *now = "{\"namespace\":\"shop\",\"table\":\"passes\",\"limit\":0}";
  double total = -1;
  gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  while (total != 0 && g_get_monotonic_time() < deadline) {
    CU_ASSERT_TRUE(ixia_client_query(S.client, now, &resp, NULL));
    o = resp ? cJSON_Parse(resp) : NULL;
    total = o ? num(o, "total") : -1;
    cJSON_Delete(o);
    g_clear_pointer(&resp, g_free);
    if (total != 0) g_usleep(20000);
  }
  CU_ASSERT_EQUAL(total, 0);
  g_free(count);
  g_free(logs[0]);
  g_free(logs[1]);
}

static void test_cli_with_only_ixia_api(void) {
  char *snap = g_strdup_printf("%s/snap-cli", S.st.dir);
  char *out = NULL;
  char *a1[] = {"snapshot", "--to", snap, NULL};
  CU_ASSERT_EQUAL(run_cli(a1, &out), 0);
  cJSON *o = cJSON_Parse(out);
  CU_ASSERT_TRUE(num(o, "version") > 0);
  cJSON_Delete(o);
  g_free(out);
  char *meta = g_strdup_printf("%s/SNAPSHOT.json", snap);
  CU_ASSERT_TRUE(g_file_test(meta, G_FILE_TEST_EXISTS));
  /* An existing, non-empty directory is refused: bad input, exit 6. */
  CU_ASSERT_EQUAL(run_cli(a1, &out), 6);
  g_free(out);
  char *a2[] = {"verify", "-q", NULL};
  CU_ASSERT_EQUAL(run_cli(a2, &out), 0);
  o = cJSON_Parse(out);
  CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(o, "ok")));
  cJSON_Delete(o);
  g_free(out);
  char *a3[] = {"verify", "--page", "0", NULL};
  CU_ASSERT_EQUAL(run_cli(a3, &out), 2);
  g_free(out);
  /* rebuild-index takes the partition count from the topic (here one of 3
   * partitions, not the local default of 4); another subcommand's option is
   * refused. */
  ixt_devkafka_t k3 = {0};
  char *kdir = g_strdup_printf("%s/k3", S.st.dir);
  g_mkdir_with_parents(kdir, 0755);
  CU_ASSERT_TRUE_FATAL(ixt_devkafka_start(&k3, kdir, 1, 3));
  char *brokers = g_strdup_printf("kafka.brokers=%s", k3.bootstrap);
  char *rebuilt = g_strdup_printf("%s/rebuilt-cli", S.st.dir);
  char *a4[] = {"rebuild-index", "--from", snap, "--to", rebuilt, "--set", brokers, "-q", NULL};
  CU_ASSERT_EQUAL(run_cli(a4, &out), 0);
  o = cJSON_Parse(out);
  CU_ASSERT_EQUAL(num(o, "partition_count"), 3);
  cJSON_Delete(o);
  g_free(out);
  char *a5[] = {"rebuild-index", "--log", "x", NULL};
  CU_ASSERT_EQUAL(run_cli(a5, &out), 2);
  g_free(out);
  CU_ASSERT_TRUE(ixt_devkafka_stop(&k3));
  g_free(brokers);
  g_free(rebuilt);
  g_free(kdir);
  g_free(meta);
  g_free(snap);
}

static gboolean reindex_everywhere(IxiaChangeEvent *ev) {
  gboolean ok = TRUE;
  GPtrArray *events = g_ptr_array_new_with_free_func(g_object_unref);
  g_ptr_array_add(events, ev);
  for (int i = 0; i < 2; i++) {
    ixia_error_t *e = NULL;
    ixia_shard_client_t *c = ixia_shard_client_new(S.st.indexer[i].addr, 10000, &e);
    gint32 count = 0;
    IxiaIxiaError *xe = NULL;
    GError *gerr = NULL;
    gboolean done = c && ixia_search_if_reindex(ixia_shard_client_iface(c), &count, events, &xe, &gerr);
    ok = c && ixia_shard_client_check(c, done, xe, gerr, &e) && ok;
    ixia_error_destroy(e);
    ixia_shard_client_destroy(c);
  }
  g_ptr_array_unref(events);
  return ok;
}

/* Last: it leaves the index diverged on purpose. */
static void test_verify_detects_divergence(void) {
  gint64 fake = latest_version() + 1000000;
  /* A delete the store never saw, and a document it never had. */
  CU_ASSERT_TRUE(reindex_everywhere(ixia_change_event_new(IXIA_CHANGE_OP_DELETE, NS, strlen(NS), TABLE, strlen(TABLE), "p0010", 5,
                                                         fake, NULL, 0, 0, 0)));
  const char *doc = "{\"category\":\"c1\",\"price\":3}";
  CU_ASSERT_TRUE(reindex_everywhere(ixia_change_event_new(IXIA_CHANGE_OP_PUT, NS, strlen(NS), TABLE, strlen(TABLE), "ghost", 5, fake,
                                                         doc, strlen(doc), 0, 0)));
  cJSON *r = verify_live();
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_TRUE(cJSON_IsFalse(cJSON_GetObjectItem(r, "ok")));
  if (num(r, "missing.count") != 1 || num(r, "extra.count") != 1) {
    char *t = cJSON_Print(r);
    fprintf(stderr, "\n  report: %s\n", t);
    cJSON_free(t);
  }
  CU_ASSERT_EQUAL(num(r, "missing.count"), 1);
  CU_ASSERT_EQUAL(num(r, "extra.count"), 1);
  CU_ASSERT_EQUAL(num(r, "stale.count"), 0);
  cJSON *ex = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "missing"), "examples"), 0);
  CU_ASSERT_STRING_EQUAL(ex ? cJSON_GetStringValue(cJSON_GetObjectItem(ex, "key")) : "", "p0010");
  ex = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "extra"), "examples"), 0);
  CU_ASSERT_STRING_EQUAL(ex ? cJSON_GetStringValue(cJSON_GetObjectItem(ex, "key")) : "", "ghost");
  cJSON_Delete(r);
  char *out = NULL;
  char *a[] = {"verify", "-q", NULL};
  CU_ASSERT_EQUAL(run_cli(a, &out), 1);
  g_free(out);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite unit = CU_add_suite("partitioner", NULL, NULL);
  IXT_ADD(unit, test_partitioner_matches_librdkafka);
  CU_pSuite suite = CU_add_suite("recovery", suite_init, suite_clean);
  IXT_ADD(suite, test_dr_drill);
  IXT_ADD(suite, test_rebuild_is_deterministic);
  IXT_ADD(suite, test_poison_then_replay);
  IXT_ADD(suite, test_cli_with_only_ixia_api);
  IXT_ADD(suite, test_verify_detects_divergence);
  IXT_ADD(suite, test_replay_keeps_ttl);
  int rc = ixt_run();
  ixt_clock_stop();
  g_free(g_snapshot_dir);
  return rc;
}
