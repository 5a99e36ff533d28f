/* librdkafka conventions converted once for every ixia component that talks
 * to Kafka (the sink, the indexer, ixia-devkafka). Stateless, thread-safe. */
#ifndef IXIA_KAFKA_UTIL_H
#define IXIA_KAFKA_UTIL_H

#include <librdkafka/rdkafka.h>

#include "error.h"

/* rd_kafka_conf_set with the failure as IXIA_EINVAL naming `what`
 * ("kafka producer setting"), the property and librdkafka's reason. */
gboolean ixia_kafka_conf_set(rd_kafka_conf_t *conf, const char *what, const char *name,
                             const char *value, ixia_error_t **err);

/* The partition librdkafka's consistent partitioners (the replication
 * sink's "consistent_random") give a non-empty message key: zlib's CRC-32
 * of the key modulo the partition count. The indexer, the API's repair
 * listings and the recovery tools find a document's shard with it. */
gint32 ixia_kafka_partition(const void *key, size_t len, gint32 partition_count);

/* The partition count of `topic` from the cluster's metadata, asking every
 * 500 ms (with a warning naming `brokers`) until wait_us passes. All topics
 * are asked for: a request naming the topic could create it (broker
 * auto-creation). -1 with IXIA_EUNAVAILABLE naming the cause otherwise. */
gint32 ixia_kafka_topic_partitions(rd_kafka_t *rk, const char *topic, const char *brokers,
                                   gint64 wait_us, ixia_error_t **err);

/* The same through a short-lived client of `brokers` (for tools). */
gint32 ixia_kafka_topic_partitions_at(const char *brokers, const char *topic, gint64 wait_us,
                                      ixia_error_t **err);

/* A log callback (rd_kafka_conf_set_log_cb) mapping syslog levels to ixia's. */
void ixia_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

#endif
