#include "kafka_util.h"

#include <syslog.h>

#include "log.h"

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
