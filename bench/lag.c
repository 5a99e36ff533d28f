/* The cdc-lag workload: open-loop puts at a fixed rate, and a Kafka consumer
 * that reads their change events; reports put-to-Kafka lag p50/p99 (from the
 * put's acknowledgement to the event being readable from the topic). */
#include <stdatomic.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "hdr.h"
#include "ixia_ixia_types.h"
#include "lag.h"
#include "thrift_util.h"

typedef struct {
  GMutex lock;
  GHashTable *acked;   /* version -> ack time (us) */
  GHashTable *arrived; /* version -> arrival time (us) */
  GHashTable *decoded; /* version -> wall ms when the sink decoded it */
  GHashTable *acked_wall; /* version -> wall ms of the ack */
  _Atomic gint stop;
  rd_kafka_t *consumer;
} lag_state_t;

static gint64 *boxed(gint64 v) {
  gint64 *p = g_new(gint64, 1);
  *p = v;
  return p;
}

static gpointer consume_main(gpointer data) {
  lag_state_t *st = data;
  while (!atomic_load(&st->stop)) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(st->consumer, 100);
    if (!m) continue;
    gint64 now = g_get_monotonic_time();
    if (!m->err) {
      IxiaChangeEvent *ev = g_object_new(IXIA_TYPE_CHANGE_EVENT, NULL);
      if (ixia_thrift_deserialize(THRIFT_STRUCT(ev), m->payload, m->len, TRUE, NULL)) {
        g_mutex_lock(&st->lock);
        g_hash_table_insert(st->arrived, boxed(ev->version), boxed(now));
        g_hash_table_insert(st->decoded, boxed(ev->version), boxed(ev->timestamp_ms));
        g_mutex_unlock(&st->lock);
      }
      g_object_unref(ev);
    }
    rd_kafka_message_destroy(m);
  }
  return NULL;
}

/* Assigns every partition of topic at its end, so only new events count.
 * Its fetches wait at most 1 ms on an empty partition: a Kafka broker
 * answers a waiting fetch as soon as data comes, but the mock cluster
 * (ixia-devkafka) only at the wait's end, so the wait is added to the lag
 * measured (5 ms measured p50 7.4-7.7 / p99 14.7-16.8 ms where 1 ms measured
 * 5.4-6.0 / 11.1-13.4 ms, at 3,711 puts/s). */
static rd_kafka_t *consumer_new(const char *brokers, const char *topic, char *errstr, size_t n) {
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, n) != RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "group.id", "ixia-bench-lag", errstr, n) != RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr, n) != RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "fetch.wait.max.ms", "1", errstr, n) != RD_KAFKA_CONF_OK ||
      rd_kafka_conf_set(conf, "socket.nagle.disable", "true", errstr, n) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    return NULL;
  }
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, n);
  if (!rk) return NULL;
  rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
  const struct rd_kafka_metadata *md = NULL;
  if (rd_kafka_metadata(rk, 0, t, &md, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR || md->topic_cnt != 1 ||
      md->topics[0].partition_cnt == 0) {
    snprintf(errstr, n, "no metadata for topic %s", topic);
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    rd_kafka_destroy(rk);
    return NULL;
  }
  rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
  for (int i = 0; i < md->topics[0].partition_cnt; i++)
    rd_kafka_topic_partition_list_add(parts, topic, md->topics[0].partitions[i].id)->offset =
        RD_KAFKA_OFFSET_END;
  rd_kafka_assign(rk, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  return rk;
}

typedef struct {
  lag_state_t *st;
  const char *api, *doc;
  int id;
  double rate, seconds;
  guint64 sent, errors;
  gboolean connected;
} put_worker_t;

/* Open loop: each connection sends at its share of the rate, whatever the
 * latency, so a slow pipeline shows up as lag rather than a lower rate. */
static gpointer put_main(gpointer data) {
  put_worker_t *w = data;
  ixia_client_t *c = ixia_client_new(w->api, NULL);
  w->connected = c != NULL;
  gint64 start = g_get_monotonic_time();
  gint64 interval = (gint64)(1e6 / w->rate);
  for (gint64 next = start; c && next < start + (gint64)(w->seconds * 1e6); next += interval) {
    gint64 now = g_get_monotonic_time();
    if (now < next) g_usleep((gulong)(next - now));
    char key[40];
    snprintf(key, sizeof key, "lag%02d-%08" G_GUINT64_FORMAT, w->id, w->sent++);
    gint64 v = 0;
    if (ixia_client_put(c, "bench", "products", key, w->doc, -1, &v, NULL)) {
      gint64 acked = g_get_monotonic_time();
      g_mutex_lock(&w->st->lock);
      g_hash_table_insert(w->st->acked, boxed(v), boxed(acked));
      g_hash_table_insert(w->st->acked_wall, boxed(v), boxed(g_get_real_time() / 1000));
      g_mutex_unlock(&w->st->lock);
    } else {
      w->errors++;
    }
  }
  ixia_client_destroy(c);
  return NULL;
}

int ixia_bench_cdc_lag(const char *api, const char *brokers, const char *topic, double rate,
                       double seconds, int conns, const char *doc_json) {
  char errstr[512];
  lag_state_t st = {0};
  g_mutex_init(&st.lock);
  st.acked = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  st.arrived = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  st.decoded = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  st.acked_wall = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  st.consumer = consumer_new(brokers, topic, errstr, sizeof errstr);
  if (!st.consumer) {
    printf("{\"workload\":\"cdc-lag\",\"skipped\":\"kafka consumer: %s\"}\n", errstr);
    return 0;
  }
  GThread *th = g_thread_new("lag-consumer", consume_main, &st);
  g_usleep(1000000); /* let the assignment settle before the first put */
  put_worker_t *w = g_new0(put_worker_t, conns);
  GThread **threads = g_new0(GThread *, conns);
  for (int i = 0; i < conns; i++) {
    w[i] = (put_worker_t){.st = &st, .api = api, .doc = doc_json, .id = i,
                          .rate = rate / conns, .seconds = seconds};
    threads[i] = g_thread_new("lag-put", put_main, &w[i]);
  }
  guint64 sent = 0, errors = 0;
  gboolean connected = TRUE;
  for (int i = 0; i < conns; i++) {
    g_thread_join(threads[i]);
    sent += w[i].sent;
    errors += w[i].errors;
    connected = connected && w[i].connected;
  }
  g_free(threads);
  g_free(w);
  g_usleep(3000000); /* stragglers */
  atomic_store(&st.stop, 1);
  g_thread_join(th);
  ixia_hdr_t *lags = ixia_hdr_new();
  /* Where the lag goes: ack -> sink decoded it (the source's share), and
   * sink decoded -> readable by a consumer (Kafka's share). Wall clock,
   * millisecond resolution. */
  ixia_hdr_t *to_sink = ixia_hdr_new();
  guint missing = 0;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, st.acked);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    gint64 *arr = g_hash_table_lookup(st.arrived, k);
    if (!arr) {
      missing++;
      continue;
    }
    ixia_hdr_record(lags, *arr - *(gint64 *)v);
    gint64 *dec = g_hash_table_lookup(st.decoded, k), *aw = g_hash_table_lookup(st.acked_wall, k);
    if (dec && aw) ixia_hdr_record(to_sink, (*dec - *aw) * 1000);
  }
  printf("{\"workload\":\"cdc-lag\",\"rate\":%.0f,\"seconds\":%.1f,\"puts\":%" G_GUINT64_FORMAT
         ",\"errors\":%" G_GUINT64_FORMAT ",\"events_seen\":%" G_GUINT64_FORMAT ",\"missing\":%u,"
         "\"lag_p50_ms\":%.2f,\"lag_p99_ms\":%.2f,\"lag_p999_ms\":%.2f,\"ack_to_sink_p50_ms\":%.0f,\"ack_to_sink_p99_ms\":%.0f}\n",
         rate, seconds, sent, errors, ixia_hdr_count(lags), missing,
         ixia_hdr_value_at(lags, 50) / 1000.0, ixia_hdr_value_at(lags, 99) / 1000.0,
         ixia_hdr_value_at(lags, 99.9) / 1000.0, ixia_hdr_value_at(to_sink, 50) / 1000.0, ixia_hdr_value_at(to_sink, 99) / 1000.0);
  fflush(stdout);
  int rc = !connected || errors || missing ? 1 : 0;
  ixia_hdr_destroy(lags);
  rd_kafka_consumer_close(st.consumer);
  rd_kafka_destroy(st.consumer);
  g_hash_table_destroy(st.acked);
  g_hash_table_destroy(st.arrived);
  g_hash_table_destroy(st.decoded);
  g_hash_table_destroy(st.acked_wall);
  ixia_hdr_destroy(to_sink);
  g_mutex_clear(&st.lock);
  return rc;
}
