/* The cdc-lag workload: open-loop puts at a fixed rate, and a Kafka consumer
 * that reads their change events; reports put-to-Kafka lag p50/p99 (from the
 * put's acknowledgement to the event being readable from the topic). The
 * puts come from the event-driven driver (events.c), as every other request
 * row's: 2 threads over the connections, where a blocking thread per
 * connection cost the machine two context switches a put and noted each
 * acknowledgement only when its thread next got a CPU. */
#include <stdatomic.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
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
  const char *doc;
} lag_run_t;

/* A put of the next key of worker w. */
static gboolean lag_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                            ixia_error_t **err) {
  (void)err;
  const lag_run_t *lr = w->run->state;
  snprintf(call->key, sizeof call->key, "lag%02d-%08" G_GUINT64_FORMAT, w->id, w->extra[0]++);
  ixia_bench_put_message(call, lr->doc, out);
  return TRUE;
}

/* Its acknowledgement, by the version it names. */
static gboolean lag_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                           gsize len, ixia_error_t **err) {
  const lag_run_t *lr = w->run->state;
  gint64 v = 0;
  if (!ixia_bench_put_answer(call, a, len, &v, err)) return FALSE;
  gint64 acked = g_get_monotonic_time();
  g_mutex_lock(&lr->st->lock);
  g_hash_table_insert(lr->st->acked, boxed(v), boxed(acked));
  g_hash_table_insert(lr->st->acked_wall, boxed(v), boxed(g_get_real_time() / 1000));
  g_mutex_unlock(&lr->st->lock);
  return TRUE;
}

typedef struct {
  ixia_bench_worker_t w;
  GPtrArray *conns;
  gint64 start_us, end_us;
  double rate;
  int nthreads;
} lag_thread_t;

static gpointer lag_thread_main(gpointer data) {
  lag_thread_t *t = data;
  ixia_bench_events_run(&t->w, t->conns->pdata, t->conns->len, t->start_us, t->end_us, t->rate,
                        t->nthreads);
  return NULL;
}

/* Open loop: the puts due at the rate, whatever the latency, so a slow
 * pipeline shows up as lag rather than a lower rate. Returns the puts
 * sent; *errors counts the failed ones (connecting included). */
static guint64 send_puts(ixia_bench_opts_t *o, lag_run_t *lr, double rate, double seconds,
                         guint64 *errors) {
  static const ixia_bench_workload_t wl = {.name = "cdc-lag", .wire = IXIA_BENCH_WIRE_THRIFT,
                                           .request = lag_request, .answer = lag_answer};
  ixia_bench_run_t r = {.o = o, .wl = &wl, .state = lr};
  int nconns = MAX(1, o->conns);
  int nthreads = CLAMP(o->threads > 0 ? o->threads : IXIA_BENCH_EVENT_THREADS, 1, nconns);
  lag_thread_t *th = g_new0(lag_thread_t, nthreads);
  gint64 start = g_get_monotonic_time() + 10000;
  for (int i = 0; i < nthreads; i++)
    th[i] = (lag_thread_t){.w = {.run = &r, .id = i, .lat = {ixia_hdr_new(), ixia_hdr_new()}},
                           .conns = g_ptr_array_new_with_free_func(ixia_bench_events_close),
                           .start_us = start, .end_us = start + (gint64)(seconds * 1e6),
                           .rate = rate, .nthreads = nthreads};
  *errors = 0;
  for (int c = 0; c < nconns; c++) {
    ixia_error_t *e = NULL;
    gpointer conn = ixia_bench_events_open(&r, &e);
    if (conn) {
      g_ptr_array_add(th[c % nthreads].conns, conn);
    } else {
      fprintf(stderr, "ixia-bench: cdc-lag: %s\n", e->message);
      ixia_error_destroy(e);
      (*errors)++;
    }
  }
  GThread **handles = g_new0(GThread *, nthreads);
  for (int i = 0; i < nthreads && !*errors; i++) handles[i] = g_thread_new("lag-put", lag_thread_main, &th[i]);
  guint64 sent = 0;
  for (int i = 0; i < nthreads; i++) {
    if (handles[i]) g_thread_join(handles[i]);
    sent += th[i].w.ops[0] + th[i].w.errors;
    *errors += th[i].w.errors;
    if (th[i].w.first_error) {
      fprintf(stderr, "ixia-bench: cdc-lag: %s\n", th[i].w.first_error->message);
      ixia_error_destroy(th[i].w.first_error);
    }
    g_ptr_array_unref(th[i].conns);
    for (int k = 0; k < 2; k++) ixia_hdr_destroy(th[i].w.lat[k]);
  }
  g_free(handles);
  g_free(th);
  return sent;
}

int ixia_bench_cdc_lag(ixia_bench_opts_t *o, double rate, const char *doc_json) {
  char errstr[512];
  lag_state_t st = {0};
  g_mutex_init(&st.lock);
  st.acked = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  st.arrived = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  st.decoded = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  st.acked_wall = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  st.consumer = consumer_new(o->kafka, o->topic, errstr, sizeof errstr);
  if (!st.consumer) {
    printf("{\"workload\":\"cdc-lag\",\"skipped\":\"kafka consumer: %s\"}\n", errstr);
    return 0;
  }
  GThread *th = g_thread_new("lag-consumer", consume_main, &st);
  g_usleep(1000000); /* let the assignment settle before the first put */
  lag_run_t lr = {&st, doc_json};
  guint64 errors = 0, sent = send_puts(o, &lr, rate, o->seconds, &errors);
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
         rate, o->seconds, sent, errors, ixia_hdr_count(lags), missing,
         ixia_hdr_value_at(lags, 50) / 1000.0, ixia_hdr_value_at(lags, 99) / 1000.0,
         ixia_hdr_value_at(lags, 99.9) / 1000.0, ixia_hdr_value_at(to_sink, 50) / 1000.0, ixia_hdr_value_at(to_sink, 99) / 1000.0);
  fflush(stdout);
  int rc = errors || missing ? 1 : 0;
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
