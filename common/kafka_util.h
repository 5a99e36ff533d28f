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

/* A log callback (rd_kafka_conf_set_log_cb) mapping syslog levels to ixia's. */
void ixia_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

#endif
