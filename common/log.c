#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static volatile gint current_level = IXIA_LOG_INFO;
static const char *const names[] = {"error", "warn", "info", "debug"};

gboolean ixia_log_set_level_name(const char *name) {
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    if (g_ascii_strcasecmp(name, names[i]) == 0) {
      ixia_log_set_level((ixia_log_level_t)i);
      return TRUE;
    }
  }
  return FALSE;
}

void ixia_log_set_level(ixia_log_level_t level) { g_atomic_int_set(&current_level, (gint)level); }

gboolean ixia_log_enabled(ixia_log_level_t level) {
  return (gint)level <= g_atomic_int_get(&current_level);
}

void ixia_log(ixia_log_level_t level, const char *fmt, ...) {
  if (!ixia_log_enabled(level)) return;
  char stamp[32];
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  /* One fprintf per line keeps lines whole when threads log at once. */
  fprintf(stderr, "%s.%03ldZ %-5s %s\n", stamp, ts.tv_nsec / 1000000, names[level], msg);
  g_free(msg);
}
