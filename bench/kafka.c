/* kafka-produce: the physical limit of the replication path's last hop, raw
 * librdkafka produce of ~1 KB messages to the same brokers, with the sink's
 * delivery guarantees (acks=all, idempotence, linger 1 ms), into a topic of
 * its own (ixia-bench.raw) so the indexer never sees these messages.
 *
 * One producer instance (librdkafka batches and sends on its own threads;
 * --threads and --conns do not apply). At most --window messages are in
 * flight, so the latency (produce call to delivery report) measures Kafka
 * rather than a deep client queue. */
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "data.h"

#define RAW_TOPIC "ixia-bench.raw"
#define WINDOW 1000

typedef struct {
  ixia_hdr_t *lat;
  guint64 delivered, failed;
  char first_error[256];
} produce_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  (void)rk;
  produce_t *p = opaque;
  if (m->err) {
    if (!p->failed++) snprintf(p->first_error, sizeof p->first_error, "%s", rd_kafka_err2str(m->err));
    return;
  }
  p->delivered++;
  ixia_hdr_record(p->lat, g_get_monotonic_time() - (gint64)(intptr_t)m->_private);
}

static rd_kafka_t *producer_new(const char *brokers, produce_t *p, char *errstr, size_t n) {
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  static const char *const settings[][2] = {
      {"acks", "all"},           {"enable.idempotence", "true"}, {"linger.ms", "1"},
      {"socket.nagle.disable", "true"}, {"message.timeout.ms", "20000"}};
  if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, n) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    return NULL;
  }
  for (guint i = 0; i < G_N_ELEMENTS(settings); i++)
    if (rd_kafka_conf_set(conf, settings[i][0], settings[i][1], errstr, n) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return NULL;
    }
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_opaque(conf, p);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, n);
  if (!rk) rd_kafka_conf_destroy(conf); /* rd_kafka_new owns conf only on success */
  return rk;
}

gboolean ixia_bench_kafka_produce(ixia_bench_opts_t *o) {
  if (!o->kafka) {
    ixia_bench_print_skip("kafka-produce", "no --kafka or IXIA_KAFKA");
    return TRUE;
  }
  produce_t p = {.lat = ixia_hdr_new()};
  char errstr[512];
  rd_kafka_t *rk = producer_new(o->kafka, &p, errstr, sizeof errstr);
  if (!rk) {
    fprintf(stderr, "ixia-bench: kafka-produce: %s\n", errstr);
    ixia_hdr_destroy(p.lat);
    return FALSE;
  }
  char *doc = ixia_bench_doc(0, o->seed, 0, NULL);
  size_t len = strlen(doc);
  guint64 produced = 0, refused = 0;
  gint64 start = g_get_monotonic_time(), end = start + (gint64)(o->seconds * 1e6);
  while (g_get_monotonic_time() < end) {
    if (produced - p.delivered - p.failed >= WINDOW) {
      rd_kafka_poll(rk, 1);
      continue;
    }
    char key[32];
    snprintf(key, sizeof key, "raw-%" G_GUINT64_FORMAT, produced);
    gint64 now = g_get_monotonic_time();
    rd_kafka_resp_err_t e = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(RAW_TOPIC), RD_KAFKA_V_KEY(key, strlen(key)),
        RD_KAFKA_V_VALUE(doc, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_OPAQUE((void *)(intptr_t)now), RD_KAFKA_V_END);
    if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(rk, 1);
      continue;
    }
    if (e) {
      if (!refused++) snprintf(p.first_error, sizeof p.first_error, "%s", rd_kafka_err2str(e));
      rd_kafka_poll(rk, 1);
      continue;
    }
    produced++;
    rd_kafka_poll(rk, 0);
  }
  rd_kafka_flush(rk, 30000);
  double secs = (double)(g_get_monotonic_time() - start) / 1e6;
  cJSON *out = ixia_bench_result_new("kafka-produce");
  cJSON_AddStringToObject(out, "topic", RAW_TOPIC);
  cJSON_AddNumberToObject(out, "window", WINDOW);
  cJSON_AddNumberToObject(out, "seconds", (double)(gint64)(secs * 10 + 0.5) / 10);
  cJSON_AddNumberToObject(out, "ops", (double)p.delivered);
  cJSON_AddNumberToObject(out, "errors", (double)(p.failed + refused));
  cJSON_AddNumberToObject(out, "ops_per_s", (double)(gint64)((double)p.delivered / secs + 0.5));
  cJSON_AddNumberToObject(out, "message_bytes", (double)len);
  ixia_bench_add_latency(out, "", p.lat);
  if (p.first_error[0]) cJSON_AddStringToObject(out, "first_error", p.first_error);
  ixia_bench_print(out);
  gboolean ok = p.failed + refused == 0 && p.delivered > 0;
  rd_kafka_destroy(rk);
  g_free(doc);
  ixia_hdr_destroy(p.lat);
  return ok;
}
