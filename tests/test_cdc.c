/* CDC integration tests: real ixia-devkafka, ixia-replication-sink,
 * ixia-query-api (and memcached) processes. Each scenario writes documents
 * from concurrent clients while something fails, then reads the whole topic
 * back and checks what a consumer relies on:
 *   - every acknowledged version appears at least once;
 *   - per key, versions only increase, apart from re-sends of versions
 *     already seen (delivery is at-least-once; consumers drop those by
 *     version);
 *   - the last event per key equals the store's current document. */
#include <cjson/cJSON.h>
#include <string.h>

#include "client.h"
#include "ixia_ixia_types.h"
#include "kafka_support.h"
#include "store.h"
#include "support.h"

#define NS "shop"
#define TABLE "products"
#define TOPIC "ixia.changes"

static const char *SCHEMA =
    "{\"namespace\":\"shop\",\"table\":\"products\","
    "\"indexes\":[{\"field\":\"price\",\"type\":\"double\"}]}";

/* The pipeline without index shards: memcached, three brokers, the sink and
 * the API, with the table's schema applied. */
static gboolean stack_start_sink(ixt_stack_t *s, const char *const *api_sets, const char *sink_extra) {
  const char *sink_sets[] = {"sink.delivery_timeout_ms=15000", "kafka.message_timeout_ms=10000", sink_extra, NULL};
  ixt_stack_opts_t o = {.api_sets = api_sets, .sink_sets = sink_sets, .brokers = 3};
  if (!ixt_stack_start_opts(s, 0, &o)) return FALSE;
  ixia_error_t *e = NULL;
  ixia_client_t *c = ixia_client_new(s->api.addr, &e);
  gboolean ok = c && ixia_client_apply_schema(c, SCHEMA, NULL, &e);
  if (e) fprintf(stderr, "\n  stack: %s\n", e->message);
  ixia_error_destroy(e);
  ixia_client_destroy(c);
  return ok;
}

static gboolean stack_start(ixt_stack_t *s, const char *const *api_sets) {
  return stack_start_sink(s, api_sets, NULL);
}

static void stack_stop(ixt_stack_t *s) { CU_ASSERT_TRUE(ixt_stack_stop(s)); }

/* ---------- concurrent writers ---------- */

typedef struct {
  int key;
  gint64 version;
} ack_t;

typedef struct {
  char *addr; /* own copy: a restart replaces the daemon's string (same port) */
  int id, ops, keys;
  GArray *acked; /* ack_t */
  int errors;
  gint64 pause_us; /* between ops, to stretch a run over a fault */
} writer_t;

static gpointer writer_main(gpointer p) {
  writer_t *w = p;
  GRand *rnd = g_rand_new_with_seed((guint32)w->id * 31u + 7u);
  ixia_client_t *c = NULL;
  for (int i = 0; i < w->ops; i++) {
    if (!c) c = ixia_client_new(w->addr, NULL);
    if (!c) {
      w->errors++;
      g_usleep(50000);
      continue;
    }
    int k = g_rand_int_range(rnd, 0, w->keys);
    char key[16], json[96];
    snprintf(key, sizeof key, "k%03d", k);
    int kind = g_rand_int_range(rnd, 0, 10);
    gint64 v = 0;
    ixia_error_t *e = NULL;
    gboolean ok;
    if (kind == 0) {
      ok = ixia_client_delete(c, NS, TABLE, key, -1, &v, &e);
    } else if (kind == 1) {
      snprintf(json, sizeof json, "{\"upserted_by\":%d,\"i\":%d}", w->id, i);
      ok = ixia_client_upsert(c, NS, TABLE, key, json, -1, &v, &e);
    } else {
      snprintf(json, sizeof json, "{\"writer\":%d,\"i\":%d,\"price\":%d.5}", w->id, i, i % 100);
      ok = ixia_client_put(c, NS, TABLE, key, json, -1, &v, &e);
    }
    if (ok) {
      ack_t a = {k, v};
      g_array_append_val(w->acked, a);
    } else {
      w->errors++;
      if (e->code == IXIA_EUNAVAILABLE) { /* connection lost: reconnect */
        ixia_client_destroy(c);
        c = NULL;
        g_usleep(50000);
      }
    }
    ixia_error_destroy(e);
    if (w->pause_us) g_usleep((gulong)w->pause_us);
  }
  ixia_client_destroy(c);
  g_rand_free(rnd);
  return NULL;
}

typedef struct {
  writer_t w[4];
  GThread *t[4];
} writers_t;

static void writers_start(writers_t *ws, const char *addr, int ops, int keys, gint64 pause_us) {
  for (int i = 0; i < 4; i++) {
    ws->w[i] = (writer_t){.addr = g_strdup(addr), .id = i, .ops = ops, .keys = keys, .pause_us = pause_us,
                          .acked = g_array_new(FALSE, FALSE, sizeof(ack_t))};
    ws->t[i] = g_thread_new("writer", writer_main, &ws->w[i]);
  }
}

/* Joins the writers; returns all acknowledged writes and the error count. */
static GArray *writers_join(writers_t *ws, int *errors) {
  GArray *all = g_array_new(FALSE, FALSE, sizeof(ack_t));
  *errors = 0;
  for (int i = 0; i < 4; i++) {
    g_thread_join(ws->t[i]);
    g_array_append_vals(all, ws->w[i].acked->data, ws->w[i].acked->len);
    *errors += ws->w[i].errors;
    g_array_free(ws->w[i].acked, TRUE);
    g_free(ws->w[i].addr);
  }
  return all;
}

/* ---------- checks ---------- */

static cJSON *stats(const char *addr) {
  ixia_client_t *c = ixia_client_new(addr, NULL);
  char *json = NULL;
  if (c) ixia_client_stats(c, &json, NULL);
  ixia_client_destroy(c);
  cJSON *o = json ? cJSON_Parse(json) : NULL;
  g_free(json);
  return o;
}

static double stat_num(cJSON *o, const char *name) {
  cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Waits until the replication source has shipped everything. */
static gboolean wait_replicated(const char *addr, int timeout_s) {
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;
  while (g_get_monotonic_time() < deadline) {
    cJSON *o = stats(addr);
    gboolean done = o && stat_num(o, "replication_lag") == 0;
    cJSON_Delete(o);
    if (done) return TRUE;
    g_usleep(100000);
  }
  return FALSE;
}

/* The document key of an event ("" for schema events). */
static char *event_doc_key(IxiaChangeEvent *ev) {
  if (ev->op == IXIA_CHANGE_OP_SCHEMA || !ev->key) return g_strdup("");
  return g_strndup((const char *)ev->key->data, ev->key->len);
}

static void verify_topic(ixt_stack_t *s, GArray *acked, int keys) {
  CU_ASSERT_TRUE_FATAL(wait_replicated(s->api.addr, 90));
  GPtrArray *events = ixt_kafka_consume_all(s->kafka.bootstrap, TOPIC, 2000, 90000);
  CU_ASSERT_PTR_NOT_NULL_FATAL(events);
  /* Per key, in the order the topic holds them: versions only increase,
   * and only a re-send of a version already delivered may go back. */
  ixt_order_t *order = ixt_order_new();
  GHashTable *last = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  int puts = 0, deletes = 0;
  for (guint i = 0; i < events->len; i++) {
    IxiaChangeEvent *ev = g_ptr_array_index(events, i);
    if (ev->op == IXIA_CHANGE_OP_SCHEMA) continue;
    CU_ASSERT_STRING_EQUAL(ev->ns, NS);
    CU_ASSERT_STRING_EQUAL(ev->table, TABLE);
    ev->op == IXIA_CHANGE_OP_PUT ? puts++ : deletes++;
    char *key = event_doc_key(ev);
    IxiaChangeEvent *prev = g_hash_table_lookup(last, key);
    ixt_order_next(order, key, strlen(key), ev->version);
    if (!prev || ev->version >= prev->version) g_hash_table_replace(last, g_strdup(key), ev);
    g_free(key);
  }
  CU_ASSERT_EQUAL(ixt_order_violations(order), 0);
  int missing = 0;
  for (guint i = 0; i < acked->len; i++) {
    ack_t *a = &g_array_index(acked, ack_t, i);
    char key[16];
    snprintf(key, sizeof key, "k%03d", a->key);
    if (!ixt_order_seen(order, key, strlen(key), a->version)) {
      if (missing++ < 5) {
        fprintf(stderr, "\n  acknowledged %s@%" G_GINT64_FORMAT " is not in the topic; topic has:", key, a->version);
        for (guint j = 0; j < events->len; j++) {
          IxiaChangeEvent *ev = g_ptr_array_index(events, j);
          char *ek = event_doc_key(ev);
          if (!strcmp(ek, key)) fprintf(stderr, " %s@%" G_GINT64_FORMAT, ev->op == IXIA_CHANGE_OP_DELETE ? "del" : "put", ev->version);
          g_free(ek);
        }
      }
    }
  }
  CU_ASSERT_EQUAL(missing, 0);
  /* The last event per key is the store's current state. */
  ixia_client_t *c = ixia_client_new(s->api.addr, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  int mismatched = 0;
  for (int k = 0; k < keys; k++) {
    char key[16];
    snprintf(key, sizeof key, "k%03d", k);
    IxiaChangeEvent *ev = g_hash_table_lookup(last, key);
    gboolean found = FALSE;
    gint64 version = 0;
    char *json = NULL;
    CU_ASSERT_TRUE(ixia_client_get(c, NS, TABLE, key, NULL, &found, &version, &json, NULL));
    gboolean match = ev ? (found ? ev->op == IXIA_CHANGE_OP_PUT && ev->version == version &&
                                       ev->doc && strcmp(ev->doc, json) == 0
                                 : ev->op == IXIA_CHANGE_OP_DELETE)
                        : !found;
    if (!match) {
      if (mismatched++ < 5) fprintf(stderr, "\n  %s: last event does not match the store", key);
    }
    g_free(json);
  }
  CU_ASSERT_EQUAL(mismatched, 0);
  printf("\n  %u acknowledged writes, %u events (%d puts, %d deletes)\n", acked->len, events->len,
         puts, deletes);
  ixia_client_destroy(c);
  g_hash_table_destroy(last);
  ixt_order_destroy(order);
  g_ptr_array_free(events, TRUE);
}

static void control(ixt_stack_t *s, const char *cmd) {
  char *reply = NULL;
  CU_ASSERT_TRUE(ixt_devkafka_control(&s->kafka, cmd, &reply));
  if (!reply || strncmp(reply, "ok", 2) != 0) fprintf(stderr, "\n  control '%s': %s", cmd, reply ? reply : "(none)");
  g_free(reply);
}

/* ---------- scenarios ---------- */

static void test_steady_state(void) {
  ixt_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, NULL));
  CU_ASSERT_TRUE(wait_replicated(s.api.addr, 30));
  cJSON *before = stats(s.api.addr);
  writers_t ws;
  writers_start(&ws, s.api.addr, 250, 40, 0);
  int errors;
  GArray *acked = writers_join(&ws, &errors);
  CU_ASSERT_EQUAL(errors, 0);
  verify_topic(&s, acked, 40);
  cJSON *o = stats(s.api.addr);
  CU_ASSERT_TRUE(stat_num(o, "replication_events_published") >= acked->len);
  CU_ASSERT_EQUAL(stat_num(o, "replication_checkpoint"), stat_num(o, "store_latest_version"));
  /* A source that keeps up ships every group from memory; only a failed
   * shipment (the stack still settling) sends it to the WAL. */
  double wal_reads = stat_num(o, "replication_wal_reads") - stat_num(before, "replication_wal_reads");
  double failures = stat_num(o, "replication_failures") - stat_num(before, "replication_failures");
  CU_ASSERT_TRUE(wal_reads <= failures);
  if (wal_reads > failures) printf("\n  %.0f WAL reads, %.0f failed shipments\n", wal_reads, failures);
  /* The API's own threads carry their names in top -H and perf (a name
   * over 15 bytes would leave the process's). */
  CU_ASSERT_EQUAL(ixt_threads_named(s.api.pid, "ixia-writer"), 1);
  CU_ASSERT_EQUAL(ixt_threads_named(s.api.pid, "ixia-replicate"), 1);
  CU_ASSERT_EQUAL(ixt_threads_named(s.api.pid, "ixia-http-acc"), 1);
  cJSON_Delete(before);
  cJSON_Delete(o);
  g_array_free(acked, TRUE);
  stack_stop(&s);
}

static void test_sink_killed(void) {
  ixt_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, NULL));
  writers_t ws;
  writers_start(&ws, s.api.addr, 300, 40, 3000);
  g_usleep(400000);
  ixt_daemon_kill(&s.sink); /* kill -9 mid-stream */
  g_usleep(500000);
  CU_ASSERT_TRUE(ixt_daemon_restart(&s.sink));
  int errors;
  GArray *acked = writers_join(&ws, &errors);
  CU_ASSERT_EQUAL(errors, 0); /* writers never wait for replication */
  verify_topic(&s, acked, 40);
  g_array_free(acked, TRUE);
  stack_stop(&s);
}

static void test_query_api_killed(void) {
  ixt_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, NULL));
  writers_t ws;
  writers_start(&ws, s.api.addr, 300, 40, 3000);
  g_usleep(400000);
  ixt_daemon_kill(&s.api); /* acknowledged writes must survive, and be shipped */
  g_usleep(300000);
  CU_ASSERT_TRUE_FATAL(ixt_daemon_restart(&s.api));
  int errors;
  GArray *acked = writers_join(&ws, &errors);
  CU_ASSERT_TRUE(acked->len > 0);
  verify_topic(&s, acked, 40);
  g_array_free(acked, TRUE);
  stack_stop(&s);
}

static void test_broker_down(void) {
  ixt_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, NULL));
  writers_t ws;
  writers_start(&ws, s.api.addr, 400, 40, 30000); /* ~12 s of writes */
  g_usleep(500000);
  control(&s, "broker-down all");
  /* Visible within about a second, long before a delivery times out
   * (kafka.message_timeout_ms, 20 s): edits pending and their age. */
  gint64 down = g_get_monotonic_time();
  cJSON *o = NULL;
  while (g_get_monotonic_time() - down < 1500 * 1000) {
    cJSON_Delete(o);
    o = stats(s.api.addr);
    if (stat_num(o, "replication_pending_age_ms") >= 1000) break;
    g_usleep(50000);
  }
  CU_ASSERT_TRUE(stat_num(o, "replication_pending_edits") > 0);
  CU_ASSERT_TRUE(stat_num(o, "replication_pending_age_ms") >= 1000);
  CU_ASSERT_TRUE(stat_num(o, "replication_call_age_ms") > 0);
  cJSON_Delete(o);
  g_usleep(9 * G_USEC_PER_SEC);
  o = stats(s.api.addr);
  CU_ASSERT_TRUE(stat_num(o, "replication_lag") > 0); /* nothing can ship now */
  cJSON_Delete(o);
  control(&s, "broker-up all");
  int errors;
  GArray *acked = writers_join(&ws, &errors);
  CU_ASSERT_EQUAL(errors, 0); /* writes kept succeeding with Kafka down */
  verify_topic(&s, acked, 40);
  g_array_free(acked, TRUE);
  stack_stop(&s);
}

static void test_produce_errors(void) {
  ixt_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start(&s, NULL));
  writers_t ws;
  writers_start(&ws, s.api.addr, 200, 40, 2000);
  control(&s, "produce-errors 20 NOT_LEADER_FOR_PARTITION");
  g_usleep(300000);
  control(&s, "produce-errors 5 REQUEST_TIMED_OUT");
  int errors;
  GArray *acked = writers_join(&ws, &errors);
  CU_ASSERT_EQUAL(errors, 0);
  verify_topic(&s, acked, 40);
  g_array_free(acked, TRUE);
  stack_stop(&s);
}

/* The sink closes a connection that idled past server.idle_timeout_ms; the
 * next shipment finds it closed, and is made again at once on a new one,
 * not failed and retried after a back-off. */
static void test_sink_closes_idle_connection(void) {
  ixt_stack_t s;
  CU_ASSERT_TRUE_FATAL(stack_start_sink(&s, NULL, "server.idle_timeout_ms=300"));
  ixia_client_t *c = ixia_client_new(s.api.addr, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_TRUE(wait_replicated(s.api.addr, 30));
  cJSON *before = stats(s.api.addr); /* after any failure of a stack still settling */
  for (int round = 0; round < 3; round++) {
    CU_ASSERT_TRUE(wait_replicated(s.api.addr, 30));
    g_usleep(1500000); /* idle: the sink closes the source's connection */
    char key[16];
    snprintf(key, sizeof key, "idle%d", round);
    CU_ASSERT_TRUE(ixia_client_put(c, NS, TABLE, key, "{\"n\":1}", -1, NULL, NULL));
  }
  CU_ASSERT_TRUE(wait_replicated(s.api.addr, 30));
  cJSON *o = stats(s.api.addr);
  CU_ASSERT_EQUAL(stat_num(o, "replication_failures") - stat_num(before, "replication_failures"), 0);
  CU_ASSERT_TRUE(stat_num(o, "replication_reconnects") - stat_num(before, "replication_reconnects") >= 3);
  cJSON_Delete(before);
  cJSON_Delete(o);
  ixia_client_destroy(c);
  stack_stop(&s);
}

static void test_wal_gap(void) {
  /* No WAL retention and tiny memtables: flushed WAL files are deleted at
   * once. The sink address is dead at first, so nothing ships before the
   * WAL is gone. */
  ixt_stack_t s;
  memset(&s, 0, sizeof s);
  s.dir = ixt_tmpdir();
  CU_ASSERT_TRUE_FATAL(ixt_memcached_start(&s.mc, 0));
  char *dead = g_strdup_printf("replication.sinks=127.0.0.1:%d", ixt_free_port());
  const char *sets[] = {dead, "store.wal_ttl_seconds=0", "store.wal_size_limit_mb=0",
                        "store.write_buffer_mb=1", "replication.retry_max_ms=200", NULL};
  CU_ASSERT_TRUE_FATAL(ixt_api_start(&s.api, s.dir, s.mc.addr, sets));
  ixia_client_t *c = ixia_client_new(s.api.addr, NULL);
  CU_ASSERT_TRUE_FATAL(c && ixia_client_apply_schema(c, SCHEMA, NULL, NULL));
  GString *doc = g_string_new("{\"pad\":\"");
  while (doc->len < 60000) g_string_append(doc, "0123456789");
  g_string_append(doc, "\"}");
  for (int i = 0; i < 100; i++) { /* ~6 MB: several memtable flushes */
    char key[16];
    snprintf(key, sizeof key, "g%03d", i);
    CU_ASSERT_TRUE(ixia_client_put(c, NS, TABLE, key, doc->str, -1, NULL, NULL));
  }
  g_string_free(doc, TRUE);
  ixia_client_destroy(c);
  gboolean gap = FALSE;
  for (int i = 0; i < 100 && !gap; i++) {
    cJSON *o = stats(s.api.addr);
    gap = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "replication_gap"));
    if (gap) {
      CU_ASSERT_EQUAL(stat_num(o, "replication_checkpoint"), 0);
      CU_ASSERT_EQUAL(stat_num(o, "replication_gap_missing_from"), 1);
      CU_ASSERT_TRUE(stat_num(o, "replication_gap_available_from") > 1);
    }
    cJSON_Delete(o);
    g_usleep(100000);
  }
  CU_ASSERT_TRUE_FATAL(gap);
  /* Now give it a working sink: it must still not skip the gap, even across
   * a restart. */
  CU_ASSERT_TRUE_FATAL(ixt_devkafka_start(&s.kafka, s.dir, 1, 2));
  char *brokers = g_strdup_printf("kafka.brokers=%s", s.kafka.bootstrap);
  const char *sink_sets[] = {brokers, NULL};
  CU_ASSERT_TRUE_FATAL(ixt_daemon_start(&s.sink, "ixia-replication-sink", "sink", s.dir, sink_sets));
  g_free(dead);
  dead = g_strdup_printf("replication.sinks=%s", s.sink.addr);
  g_free(g_ptr_array_index(s.api.sets, 2));
  g_ptr_array_index(s.api.sets, 2) = g_strdup(dead); /* sets[0..1] are store/cache */
  CU_ASSERT_TRUE_FATAL(ixt_daemon_restart(&s.api));
  g_usleep(2 * G_USEC_PER_SEC);
  cJSON *o = stats(s.api.addr);
  CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "replication_gap")));
  CU_ASSERT_EQUAL(stat_num(o, "replication_checkpoint"), 0);
  CU_ASSERT_EQUAL(stat_num(o, "replication_events_published"), 0);
  cJSON_Delete(o);
  GPtrArray *events = ixt_kafka_consume_all(s.kafka.bootstrap, TOPIC, 1000, 10000);
  CU_ASSERT_PTR_NOT_NULL(events);
  CU_ASSERT_EQUAL(events ? events->len : 1, 0);
  if (events) g_ptr_array_free(events, TRUE);
  g_free(brokers);
  g_free(dead);
  stack_stop(&s);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("cdc", NULL, NULL);
  IXT_ADD(s, test_steady_state);
  IXT_ADD(s, test_sink_closes_idle_connection);
  IXT_ADD(s, test_sink_killed);
  IXT_ADD(s, test_query_api_killed);
  IXT_ADD(s, test_broker_down);
  IXT_ADD(s, test_produce_errors);
  IXT_ADD(s, test_wal_gap);
  return ixt_run();
}
