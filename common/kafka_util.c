#include "kafka_util.h"

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
