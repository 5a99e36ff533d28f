/* librdkafka conventions converted once (kafka_util.h): configuration
 * errors, log lines, the partitioner, topic metadata.
 *
 * The partitioner (CRC-32 of the key modulo the partition count, what the
 * sink's producer is configured with) is computed here too, so the
 * recovery tools and tests can tell which partition, and so which shard,
 * owns a key without a producer. */
#include "kafka_util.h"

#include <string.h>
#include <syslog.h>
#include <zlib.h>

#include "log.h"

gint32 ixia_kafka_partition(const void *key, size_t len, gint32 partition_count) {
  guint32 crc = (guint32)crc32(crc32(0L, Z_NULL, 0), key, (uInt)len);
  return partition_count > 0 ? (gint32)(crc % (guint32)partition_count) : 0;
}

gboolean ixia_kafka_conf_set(rd_kafka_conf_t *conf, const char *what, const char *name,
                             const char *value, ixia_error_t **err) {
  char errstr[512];
  if (rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr) == RD_KAFKA_CONF_OK) return TRUE;
  return ixia_error_set(err, IXIA_EINVAL, "%s %s=%s: %s", what, name, value, errstr);
}

void ixia_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
  (void)rk;
  ixia_log_level_t l = level <= LOG_ERR       ? IXIA_LOG_ERROR
                       : level == LOG_WARNING ? IXIA_LOG_WARN
                       : level <= LOG_INFO    ? IXIA_LOG_INFO
                                              : IXIA_LOG_DEBUG;
  if (ixia_log_enabled(l)) ixia_log(l, "librdkafka %s: %s", fac, buf);
}

gint32 ixia_kafka_topic_partitions(rd_kafka_t *rk, const char *topic, const char *brokers,
                                   gint64 wait_us, ixia_error_t **err) {
  gint64 deadline = g_get_monotonic_time() + wait_us;
  char *last = g_strdup("no answer");
  gint32 n = -1;
  for (;;) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t kerr = rd_kafka_metadata(rk, 1, NULL, &md, 2000);
    if (kerr) {
      g_free(last);
      last = g_strdup(rd_kafka_err2str(kerr));
    } else {
      g_free(last);
      last = g_strdup_printf("topic %s does not exist", topic);
      for (int i = 0; i < md->topic_cnt; i++) {
        if (strcmp(md->topics[i].topic, topic) != 0) continue;
        if (md->topics[i].err) {
          g_free(last);
          last = g_strdup(rd_kafka_err2str(md->topics[i].err));
        } else if (md->topics[i].partition_cnt > 0) {
          n = md->topics[i].partition_cnt;
        }
      }
    }
    if (md) rd_kafka_metadata_destroy(md);
    if (n > 0 || g_get_monotonic_time() >= deadline) break;
    IXIA_WARN("kafka: waiting for the partitions of topic %s at %s: %s", topic, brokers, last);
    g_usleep(500000);
  }
  if (n <= 0)
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot read the partitions of topic %s from kafka.brokers %s: %s",
                   topic, brokers, last);
  g_free(last);
  return n;
}

gint32 ixia_kafka_topic_partitions_at(const char *brokers, const char *topic, gint64 wait_us,
                                      ixia_error_t **err) {
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rd_kafka_conf_set_log_cb(conf, ixia_kafka_log);
  if (!ixia_kafka_conf_set(conf, "kafka setting", "bootstrap.servers", brokers, err)) {
    rd_kafka_conf_destroy(conf);
    return -1;
  }
  char errstr[512];
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    ixia_error_set(err, IXIA_EINTERNAL, "kafka client: %s", errstr);
    return -1;
  }
  gint32 n = ixia_kafka_topic_partitions(rk, topic, brokers, wait_us, err);
  rd_kafka_destroy(rk);
  return n;
}
