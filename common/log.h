/* Levelled logging to stderr, one line per call, safe from any thread.
 * The level and format are process-wide (set once at start from log.level
 * and log.format). Messages never carry secrets: API keys are named by id. */
#ifndef IXIA_LOG_H
#define IXIA_LOG_H

#include <glib.h>

typedef enum { IXIA_LOG_ERROR = 0, IXIA_LOG_WARN, IXIA_LOG_INFO, IXIA_LOG_DEBUG } ixia_log_level_t;

/* Returns FALSE for an unknown level name (error, warn, info, debug). */
gboolean ixia_log_set_level_name(const char *name);
void ixia_log_set_level(ixia_log_level_t level);
/* "text" (the default) or "json" (log.format): one JSON object per line,
 * {"time", "level", "daemon", "pid", "msg"}. FALSE for another name. */
gboolean ixia_log_set_format_name(const char *name);
gboolean ixia_log_enabled(ixia_log_level_t level);
void ixia_log(ixia_log_level_t level, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Warnings from a source that can repeat fast (a Kafka outage, a cache
 * down): at most one per `every_us`, the rest counted and the count said
 * with the next one. Init before use, clear after; thread-safe. */
typedef struct {
  GMutex lock;
  gint64 every_us;
  gint64 last;
  guint suppressed;
} ixia_log_limit_t;
void ixia_log_limit_init(ixia_log_limit_t *l, gint64 every_us);
void ixia_log_limit_clear(ixia_log_limit_t *l);
/* Logs "WHAT: MSG" at warn level, or counts it. */
void ixia_log_warn_limited(ixia_log_limit_t *l, const char *what, const char *msg);

#define IXIA_ERROR(...) ixia_log(IXIA_LOG_ERROR, __VA_ARGS__)
#define IXIA_WARN(...) ixia_log(IXIA_LOG_WARN, __VA_ARGS__)
#define IXIA_INFO(...) ixia_log(IXIA_LOG_INFO, __VA_ARGS__)
#define IXIA_DEBUG(...) \
  do { if (ixia_log_enabled(IXIA_LOG_DEBUG)) ixia_log(IXIA_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
