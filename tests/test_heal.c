/* Self-healing, anti-entropy and expiry on the whole pipeline (real
 * memcached, ixia-devkafka, sink, indexer and API processes):
 *
 *   - the stall of issue 15: the indexer stopped (SIGSTOP) from before the
 *     schema is applied while 60,000 documents are written, the devkafka
 *     backlog too small to hold them; after the resume the shard repairs
 *     itself and equals the truth within 30 s, without failed updates;
 *   - a topic re-created under a running shard (devkafka's reset-topic),
 *     with nothing lost and with events lost while the shard was stalled,
 *     and a shard restarted onto a re-created topic (stale stored
 *     positions): positions follow the new topic, the index equals the
 *     truth, min_version queries wait for real;
 *   - anti-entropy: documents removed from and added to an index behind the
 *     pipeline's back are found by the background digest walk, counted and
 *     repaired, while writes going on are not counted;
 *   - TTL: expired documents leave totals and aggregations at once, also
 *     after a backfill re-indexed them.
 *
 * Every wait is bounded and polls a condition. */
#include <cjson/cJSON.h>
#include <signal.h>
#include <string.h>

#include "client.h"
#include "kafka_support.h"
#include "recovery.h"
#include "support.h"
#include "thrift_util.h"

/* The 30 s goal is the release build's; sanitized builds (make test
 * SANITIZE=1, some 10-20x slower here) get more room. */
#if defined(__SANITIZE_ADDRESS__)
#define HEAL_S 120
#else
#define HEAL_S 30
#endif

#define NS "peer"
#define TABLE "docs"
static const char *SCHEMA =
    "{\"namespace\":\"peer\",\"table\":\"docs\",\"indexes\":[{\"field\":\"category\",\"type\":"
    "\"keyword\"},{\"field\":\"price\",\"type\":\"double\"}]}";

/* ---------- helpers ---------- */

static ixia_client_t *api_client(ixt_stack_t *s) {
  ixia_error_t *e = NULL;
  ixia_client_t *c = ixia_client_new(s->api.addr, &e);
  if (!c) fprintf(stderr, "api: %s\n", e->message);
  ixia_error_destroy(e);
  return c;
}

/* Puts keys [from, to) of `prefix` in batches of 500; returns the last
 * version. pad: bytes of filler per document. */
static gint64 put_range(ixia_client_t *c, const char *prefix, int from, int to, int pad) {
  char *filler = g_strnfill((gsize)pad, 'x');
  gint64 last = 0;
  for (int i = from; i < to;) {
    GPtrArray *ops = g_ptr_array_new_with_free_func(g_object_unref);
    GPtrArray *keep = g_ptr_array_new_with_free_func(g_free);
    for (int n = 0; n < 500 && i < to; n++, i++) {
      char *key = g_strdup_printf("%s%06d", prefix, i);
      char *doc = g_strdup_printf("{\"category\":\"c%d\",\"price\":%d.5,\"pad\":\"%s\"}", i % 10, i % 1000, filler);
      g_ptr_array_add(keep, key);
      g_ptr_array_add(keep, doc);
      g_ptr_array_add(ops, g_object_new(IXIA_TYPE_WRITE_OP, "kind", IXIA_OP_KIND_PUT, "ns", NS, "table", TABLE,
                                        "key", key, "json", doc, "expected_version", (gint64)-1, NULL));
    }
    GArray *versions = g_array_new(FALSE, TRUE, sizeof(gint64));
    IxiaIxiaError *xe = NULL;
    GError *ge = NULL;
    ixia_error_t *e = NULL;
    gboolean ok = ixia_ixia_if_batch(ixia_client_iface(c), &versions, ops, &xe, &ge);
    ok = ixia_client_check(c, ok, xe, ge, &e);
    if (!ok) fprintf(stderr, "batch: %s\n", e->message);
    CU_ASSERT_TRUE_FATAL(ok);
    last = g_array_index(versions, gint64, versions->len - 1);
    g_array_unref(versions);
    g_ptr_array_unref(ops);
    g_ptr_array_unref(keep);
  }
  g_free(filler);
  return last;
}

static cJSON *api_stats(ixia_client_t *c) {
  char *json = NULL;
  cJSON *o = ixia_client_stats(c, &json, NULL) ? cJSON_Parse(json) : NULL;
  g_free(json);
  return o;
}

#define num ixt_json_num

/* Waits until replication has acknowledged `version` (the events are in
 * Kafka, and the oldest beyond its budget deleted). */
static gboolean wait_replicated(ixia_client_t *c, gint64 version, int seconds) {
  gint64 deadline = g_get_monotonic_time() + seconds * G_TIME_SPAN_SECOND;
  while (g_get_monotonic_time() < deadline) {
    cJSON *st = api_stats(c);
    double acked = num(st, "replication_checkpoint");
    cJSON_Delete(st);
    if (acked >= (double)version) return TRUE;
    g_usleep(20000);
  }
  return FALSE;
}

static cJSON *shard_status(ixt_stack_t *s, guint i) {
  ixia_error_t *e = NULL;
  ixia_shard_client_t *c = ixia_shard_client_new(s->indexer[i].addr, 10000, &e);
  char *json = NULL;
  cJSON *o = c && ixia_shard_client_status(c, &json, &e) ? cJSON_Parse(json) : NULL;
  g_free(json);
  ixia_shard_client_destroy(c);
  ixia_error_destroy(e);
  return o;
}

/* verify through the library: TRUE when the index equals the truth. */
static gboolean verify_ok(ixt_stack_t *s, gboolean report) {
  ixia_verify_opts_t vo = {.page = 5000, .examples = 3, .recheck_ms = 200, .quiet = TRUE};
  ixia_error_t *e = NULL;
  cJSON *r = ixia_recovery_verify(s->api.addr, &vo, &e);
  gboolean ok = r && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
  if (report && !ok) {
    char *t = r ? cJSON_Print(r) : g_strdup(e->message);
    fprintf(stderr, "\n  verify: %s\n", t);
    g_free(t);
  }
  cJSON_Delete(r);
  ixia_error_destroy(e);
  return ok;
}

/* One number of shard i's status (-1 when it does not answer). */
static double shard_num(ixt_stack_t *s, guint i, const char *path) {
  cJSON *st = shard_status(s, i);
  double v = st ? num(st, path) : -1;
  cJSON_Delete(st);
  return v;
}

/* Polls until no shard is repairing and verify passes, at most `seconds`;
 * returns the seconds it took, or -1. */
static double wait_healed(ixt_stack_t *s, int seconds) {
  gint64 t0 = g_get_monotonic_time(), deadline = t0 + seconds * G_TIME_SPAN_SECOND;
  while (g_get_monotonic_time() < deadline) {
    gboolean repairing = FALSE;
    for (guint i = 0; i < s->shards; i++) {
      cJSON *st = shard_status(s, i);
      repairing = repairing || !st || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "repairing"));
      cJSON_Delete(st);
    }
    if (!repairing && verify_ok(s, FALSE)) return (double)(g_get_monotonic_time() - t0) / 1e6;
    g_usleep(200000);
  }
  verify_ok(s, TRUE);
  return -1;
}

/* A query's response (NULL with *err on failure). */
static cJSON *query(ixia_client_t *c, const char *json, ixia_error_t **err) {
  char *out = NULL;
  cJSON *o = ixia_client_query(c, json, &out, err) ? cJSON_Parse(out) : NULL;
  g_free(out);
  return o;
}

static double total_of(ixia_client_t *c, const char *extra) {
  char *q = g_strdup_printf("{\"namespace\":\"peer\",\"table\":\"docs\",\"limit\":0,"
                            "\"aggs\":{\"n\":{\"count\":{}}}%s}",
                            extra ? extra : "");
  ixia_error_t *e = NULL;
  cJSON *r = query(c, q, &e);
  if (!r) fprintf(stderr, "query: %s\n", e->message);
  ixia_error_destroy(e);
  double t = num(r, "total");
  CU_ASSERT_EQUAL(t, num(r, "aggs.n.value"));
  cJSON_Delete(r);
  g_free(q);
  return t;
}

static GPid pid_of(ixt_daemon_t *d) { return d->pid; }

/* A stack (extra indexer options idx, devkafka options kafka, may be NULL)
 * with the schema applied; returns an API client. */
static ixia_client_t *start(ixt_stack_t *s, guint shards, const char *const *idx,
                            const char *const *kafka, gboolean schema) {
  ixt_stack_opts_t o = {.indexer_sets = idx, .devkafka_sets = kafka};
  CU_ASSERT_TRUE_FATAL(ixt_stack_start_opts(s, shards, &o));
  ixia_client_t *c = api_client(s);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  if (schema) CU_ASSERT_TRUE(ixia_client_apply_schema(c, SCHEMA, NULL, NULL));
  return c;
}

/* Puts n documents of `prefix` and waits (min_version) until they are
 * searchable: the total must then be `expect`. */
static void put_searchable(ixia_client_t *c, const char *prefix, int n, double expect) {
  gint64 last = put_range(c, prefix, 0, n, 20);
  char *mv = g_strdup_printf(",\"min_version\":%" G_GINT64_FORMAT, last);
  CU_ASSERT_EQUAL(total_of(c, mv), expect);
  g_free(mv);
}

/* ---------- the stall ---------- */

static void test_stall_repairs_itself(void) {
  ixt_stack_t s;
  const char *kafka[] = {"devkafka.memory_mb=8", NULL};
  const char *idx[] = {"indexer.anti_entropy_keys_per_s=0", NULL};
  ixia_client_t *c = start(&s, 1, idx, kafka, FALSE);
  /* Stopped before the schema: its event is among those Kafka deletes. */
  kill(pid_of(&s.indexer[0]), SIGSTOP);
  gint64 stopped = g_get_monotonic_time();
  CU_ASSERT_TRUE(ixia_client_apply_schema(c, SCHEMA, NULL, NULL));
  gint64 last = put_range(c, "k", 0, 60000, 300);
  CU_ASSERT_TRUE(wait_replicated(c, last, 60));
  while (g_get_monotonic_time() - stopped < 2500 * G_TIME_SPAN_MILLISECOND) g_usleep(50000);
  kill(pid_of(&s.indexer[0]), SIGCONT);
  gint64 resumed = g_get_monotonic_time();
  /* Queries answer meanwhile (repairing, or already whole). */
  ixia_error_t *e = NULL;
  cJSON *r = query(c, "{\"namespace\":\"peer\",\"table\":\"docs\",\"limit\":1}", &e);
  CU_ASSERT_PTR_NOT_NULL(r);
  if (!r) fprintf(stderr, "query during the repair: %s\n", e->message);
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_TRUE(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "shards"), "states")));
  cJSON_Delete(r);
  double took = wait_healed(&s, HEAL_S);
  double since_resume = (double)(g_get_monotonic_time() - resumed) / 1e6;
  fprintf(stderr, "\n  stall: index equal to the truth %.1f s after the resume\n", since_resume);
  CU_ASSERT_TRUE(took >= 0 && since_resume <= HEAL_S);
  CU_ASSERT_EQUAL(total_of(c, NULL), 60000);
  cJSON *st = shard_status(&s, 0);
  CU_ASSERT_TRUE(num(st, "repairs") >= 1);
  CU_ASSERT_TRUE(num(st, "repair_triggers.offsets_lost") >= 1);
  CU_ASSERT_TRUE(num(st, "repaired_documents") > 0);
  CU_ASSERT_EQUAL(num(st, "failed_log_entries"), 0);
  CU_ASSERT_FALSE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "repairing")));
  cJSON_Delete(st);
  /* And the stream goes on. */
  last = put_range(c, "after", 0, 100, 10);
  char *mv = g_strdup_printf(",\"min_version\":%" G_GINT64_FORMAT, last);
  CU_ASSERT_EQUAL(total_of(c, mv), 60100);
  g_free(mv);
  ixia_client_destroy(c);
  CU_ASSERT_TRUE(ixt_stack_stop(&s));
}

/* ---------- a re-created topic ---------- */

/* Every partition's position is within its partition (not stale). */
static gboolean positions_sane(ixt_stack_t *s) {
  cJSON *st = shard_status(s, 0);
  gboolean ok = st != NULL;
  const cJSON *p;
  cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(st, "partitions")) {
    double next = num(p, "next_offset"), high = num(p, "high_watermark");
    if (high >= 0 && next > high) ok = FALSE;
    if (cJSON_GetObjectItemCaseSensitive(p, "position_past_end")) ok = FALSE;
  }
  cJSON_Delete(st);
  return ok;
}

static void test_topic_recreated(void) {
  ixt_stack_t s;
  const char *idx[] = {"indexer.anti_entropy_keys_per_s=0", NULL};
  ixia_client_t *c = start(&s, 1, idx, NULL, TRUE);
  put_searchable(c, "a", 2000, 2000);
  gint64 last;
  char *mv;

  /* 1. Under a running, caught-up shard: nothing is lost, but the old
   * positions are past the new partitions' ends. */
  CU_ASSERT_TRUE(ixt_devkafka_control(&s.kafka, "reset-topic", NULL));
  last = put_range(c, "b", 0, 300, 50);
  CU_ASSERT_TRUE(wait_replicated(c, last, 30));
  CU_ASSERT_TRUE(wait_healed(&s, HEAL_S) >= 0);
  CU_ASSERT_TRUE(positions_sane(&s));
  /* min_version waits for the new topic's positions, not the old ones. */
  last = put_range(c, "c", 0, 100, 50);
  mv = g_strdup_printf(",\"min_version\":%" G_GINT64_FORMAT, last);
  CU_ASSERT_EQUAL(total_of(c, mv), 2400);
  g_free(mv);
  cJSON *st = shard_status(&s, 0);
  CU_ASSERT_TRUE(num(st, "offsets_rewound") >= 1 || num(st, "repair_triggers.position_past_end") >= 1);
  cJSON_Delete(st);
  /* The repair the reset asked for completes (the shard can have followed
   * the new partitions, and so pass verify, before the repair it queued
   * started: under ASan this check once ran ahead of it). */
  gint64 until = g_get_monotonic_time() + HEAL_S * G_TIME_SPAN_SECOND;
  double repairs = 0;
  while ((repairs = shard_num(&s, 0, "repairs")) < 1 && g_get_monotonic_time() < until) g_usleep(100000);
  CU_ASSERT_TRUE(repairs >= 1);

  /* 2. Re-created while the shard was stalled: what it had not read is
   * gone with the old topic. */
  kill(pid_of(&s.indexer[0]), SIGSTOP);
  last = put_range(c, "d", 0, 3000, 50);
  CU_ASSERT_TRUE(wait_replicated(c, last, 30));
  CU_ASSERT_TRUE(ixt_devkafka_control(&s.kafka, "reset-topic", NULL));
  last = put_range(c, "e", 0, 200, 50);
  CU_ASSERT_TRUE(wait_replicated(c, last, 30));
  kill(pid_of(&s.indexer[0]), SIGCONT);
  CU_ASSERT_TRUE(wait_healed(&s, HEAL_S) >= 0);
  CU_ASSERT_EQUAL(total_of(c, NULL), 5600);
  CU_ASSERT_TRUE(positions_sane(&s));

  /* 3. A shard restarted onto a re-created topic: its stored positions are
   * stale from the start. */
  ixt_daemon_kill(&s.indexer[0]);
  last = put_range(c, "f", 0, 500, 50);
  CU_ASSERT_TRUE(wait_replicated(c, last, 30));
  CU_ASSERT_TRUE(ixt_devkafka_control(&s.kafka, "reset-topic", NULL));
  last = put_range(c, "g", 0, 20, 50);
  CU_ASSERT_TRUE(wait_replicated(c, last, 30));
  CU_ASSERT_TRUE_FATAL(ixt_daemon_restart(&s.indexer[0]));
  CU_ASSERT_TRUE(wait_healed(&s, HEAL_S) >= 0);
  CU_ASSERT_EQUAL(total_of(c, NULL), 6120);
  CU_ASSERT_TRUE(positions_sane(&s));
  ixia_client_destroy(c);
  CU_ASSERT_TRUE(ixt_stack_stop(&s));
}

/* ---------- anti-entropy ---------- */

static gboolean reindex(ixt_stack_t *s, guint shard, IxiaChangeEvent *ev) {
  GPtrArray *events = g_ptr_array_new_with_free_func(g_object_unref);
  g_ptr_array_add(events, ev);
  ixia_error_t *e = NULL;
  ixia_shard_client_t *c = ixia_shard_client_new(s->indexer[shard].addr, 10000, &e);
  gint32 count = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = c && ixia_search_if_reindex(ixia_shard_client_iface(c), &count, events, &xe, &gerr);
  ok = c && ixia_shard_client_check(c, ok, xe, gerr, &e) && ok && count == 1;
  ixia_error_destroy(e);
  ixia_shard_client_destroy(c);
  g_ptr_array_unref(events);
  return ok;
}

static void test_anti_entropy(void) {
  ixt_stack_t s;
  const char *idx[] = {"indexer.anti_entropy_keys_per_s=1000000", "indexer.anti_entropy_pause_s=1", NULL};
  ixia_client_t *c = start(&s, 2, idx, NULL, TRUE);
  put_searchable(c, "k", 3000, 3000);
  /* Behind the pipeline's back: one document removed at its own version
   * (the index loses it), one that the store never had. */
  gboolean found = FALSE;
  gint64 version = 0;
  char *json = NULL;
  CU_ASSERT_TRUE(ixia_client_get(c, NS, TABLE, "k000123", NULL, &found, &version, &json, NULL));
  g_free(json);
  for (guint i = 0; i < 2; i++) {
    reindex(&s, i, ixia_change_event_new(IXIA_CHANGE_OP_DELETE, NS, 4, TABLE, 4, "k000123", 7, version,
                                          NULL, 0, 0, 0));
    const char *doc = "{\"category\":\"c1\",\"price\":3}";
    reindex(&s, i, ixia_change_event_new(IXIA_CHANGE_OP_PUT, NS, 4, TABLE, 4, "ghost", 5, 3, doc,
                                          strlen(doc), 0, 0));
  }
  CU_ASSERT_EQUAL(total_of(c, NULL), 3000); /* -1 + 1 */
  /* Writes go on meanwhile: not divergences. */
  gint64 t0 = g_get_monotonic_time();
  double divergent = 0, passes = 0;
  int round = 0;
  while (g_get_monotonic_time() - t0 < 30 * G_TIME_SPAN_SECOND) {
    put_range(c, "w", round * 50, round * 50 + 50, 20);
    round++;
    divergent = passes = 0;
    for (guint i = 0; i < 2; i++) {
      cJSON *st = shard_status(&s, i);
      divergent += num(st, "anti_entropy_divergent");
      passes += num(st, "anti_entropy_passes");
      cJSON_Delete(st);
    }
    if (divergent >= 2 && verify_ok(&s, FALSE)) break;
    g_usleep(100000);
  }
  fprintf(stderr, "\n  anti-entropy: %.0f divergent documents repaired (%.0f passes)\n", divergent, passes);
  CU_ASSERT_EQUAL(divergent, 2);
  CU_ASSERT_TRUE(verify_ok(&s, TRUE));
  gboolean ghost = TRUE;
  CU_ASSERT_TRUE(ixia_client_get(c, NS, TABLE, "ghost", NULL, &ghost, NULL, NULL, NULL));
  CU_ASSERT_FALSE(ghost);
  ixia_client_destroy(c);
  CU_ASSERT_TRUE(ixt_stack_stop(&s));
}

/* ---------- TTL ---------- */

static void test_ttl_leaves_the_index(void) {
  ixt_stack_t s;
  ixt_clock_start(); /* the daemons' expiry clock is the test's to move */
  ixia_client_t *c = start(&s, 1, NULL, NULL, FALSE);
  CU_ASSERT_TRUE(ixia_client_apply_schema(c,
      "{\"namespace\":\"peer\",\"table\":\"docs\",\"ttl_seconds\":3600,\"indexes\":[{\"field\":"
      "\"category\",\"type\":\"keyword\"},{\"field\":\"price\",\"type\":\"double\"}]}", NULL, NULL));
  gint64 last = put_range(c, "t", 0, 50, 10);
  char *mv = g_strdup_printf(",\"min_version\":%" G_GINT64_FORMAT, last);
  CU_ASSERT_EQUAL(total_of(c, mv), 50); /* an hour to live */
  g_free(mv);
  /* A backfill re-sends every document at its version, with its expiry
   * (it used to send none, and the re-indexed documents then outlived
   * their TTL in the index: totals and aggregations kept counting them). */
  ixia_backfill_opts_t bo = {.batch = 20, .quiet = TRUE};
  cJSON *bf = ixia_recovery_backfill(s.api.addr, "peer", "docs", &bo, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(bf);
  CU_ASSERT_EQUAL(num(bf, "applied"), 50);
  cJSON_Delete(bf);
  /* One schedule entry per document, however often it was sent; and as
   * many after a crash (kill -9), rebuilt from the index at start. */
  cJSON *sched = shard_status(&s, 0);
  CU_ASSERT_EQUAL(num(sched, "expiry_scheduled"), 50);
  cJSON_Delete(sched);
  ixt_daemon_kill(&s.indexer[0]);
  CU_ASSERT_TRUE_FATAL(ixt_daemon_restart(&s.indexer[0]));
  CU_ASSERT_EQUAL(shard_num(&s, 0, "expiry_scheduled"), 50);
  /* The table's TTL raised to an hour and a half and t0 written again:
   * it outlives the others (its entry, due at 1:00, finds the later expiry
   * in the record and moves to it). */
  CU_ASSERT_TRUE(ixia_client_apply_schema(c,
      "{\"namespace\":\"peer\",\"table\":\"docs\",\"ttl_seconds\":5400,\"indexes\":[{\"field\":"
      "\"category\",\"type\":\"keyword\"},{\"field\":\"price\",\"type\":\"double\"}]}", NULL, NULL));
  gint64 v0 = put_range(c, "t", 0, 1, 10);
  char *mv0 = g_strdup_printf(",\"min_version\":%" G_GINT64_FORMAT, v0);
  CU_ASSERT_EQUAL(total_of(c, mv0), 50);
  g_free(mv0);
  /* An hour and a second later on the daemons' clock, every other document
   * has expired: no total counts them (the clock moves within ~10 ms). */
  ixt_clock_set(3601);
  gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  while (total_of(c, NULL) != 1 && g_get_monotonic_time() < deadline) g_usleep(10000);
  CU_ASSERT_EQUAL(total_of(c, NULL), 1);
  cJSON *left = query(c, "{\"namespace\":\"peer\",\"table\":\"docs\",\"limit\":5}", NULL);
  cJSON *hits = cJSON_GetObjectItemCaseSensitive(left, "hits");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(hits), 1);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(hits, 0), "key")) ?: "",
                         "t000000");
  cJSON_Delete(left);
  sched = shard_status(&s, 0);
  CU_ASSERT_EQUAL(num(sched, "expiry_scheduled"), 1);
  CU_ASSERT_EQUAL(num(sched, "expired_removed"), 49);
  cJSON_Delete(sched);
  ixt_clock_set(5401);
  deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  while (total_of(c, NULL) != 0 && g_get_monotonic_time() < deadline) g_usleep(10000);
  CU_ASSERT_EQUAL(total_of(c, NULL), 0);
  char *q = "{\"namespace\":\"peer\",\"table\":\"docs\",\"limit\":0,\"aggs\":{\"s\":{\"sum\":\"price\"},"
            "\"by\":{\"terms\":{\"field\":\"category\"}}}}";
  ixia_error_t *e = NULL;
  cJSON *r = query(c, q, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_EQUAL(num(r, "aggs.s.value"), 0);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
                      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "aggs"), "by"), "buckets")),
                  0);
  cJSON_Delete(r);
  cJSON *st = shard_status(&s, 0);
  /* Dropped on the shard's clock (events arriving after their expiry
   * index as deletes instead). */
  CU_ASSERT_EQUAL(num(st, "expired_removed"), 50);
  CU_ASSERT_EQUAL(num(st, "documents"), 0);
  cJSON_Delete(st);
  CU_ASSERT_TRUE(verify_ok(&s, TRUE));
  ixia_client_destroy(c);
  CU_ASSERT_TRUE(ixt_stack_stop(&s));
  ixt_clock_stop();
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    CU_TestFunc fn;
  } tests[] = {
      {"test_stall_repairs_itself", test_stall_repairs_itself},
      {"test_topic_recreated", test_topic_recreated},
      {"test_anti_entropy", test_anti_entropy},
      {"test_ttl_leaves_the_index", test_ttl_leaves_the_index},
  };
  CU_initialize_registry();
  CU_pSuite suite = CU_add_suite("heal", NULL, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(tests); i++) {
    gboolean chosen = argc < 2;
    for (int a = 1; a < argc; a++) chosen = chosen || strcmp(argv[a], tests[i].name) == 0;
    if (chosen) CU_add_test(suite, tests[i].name, tests[i].fn);
  }
  return ixt_run();
}
