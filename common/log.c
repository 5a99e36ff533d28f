/* Levelled logging (log.h): one line per call to stderr, text or JSON.
 *
 * The level and format are process-wide atomics, so any thread may log
 * without locking; each line is formatted in full and written with one
 * call so lines from different threads never interleave. The rate-limited
 * warning keeps floods (a broker down, a cache down) to one line per
 * interval with a count of what it held back. */
#include "log.h"

#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

static _Atomic gint current_level = IXIA_LOG_INFO;
static _Atomic gint json_format = 0;

gboolean ixia_log_set_format_name(const char *name) {
  if (g_ascii_strcasecmp(name, "text") == 0) atomic_store(&json_format, 0);
  else if (g_ascii_strcasecmp(name, "json") == 0) atomic_store(&json_format, 1);
  else return FALSE;
  return TRUE;
}
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

void ixia_log_set_level(ixia_log_level_t level) { atomic_store(&current_level, (gint)level); }

gboolean ixia_log_enabled(ixia_log_level_t level) {
  return (gint)level <= atomic_load(&current_level);
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
  if (atomic_load(&json_format)) {
    char when[48];
    snprintf(when, sizeof when, "%s.%03ldZ", stamp, ts.tv_nsec / 1000000);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "time", when);
    cJSON_AddStringToObject(o, "level", names[level]);
    cJSON_AddStringToObject(o, "daemon", g_get_prgname() ? g_get_prgname() : "ixia");
    cJSON_AddNumberToObject(o, "pid", (double)getpid());
    /* cJSON escapes the message; invalid UTF-8 is replaced first. */
    char *valid = g_utf8_make_valid(msg, -1);
    cJSON_AddStringToObject(o, "msg", valid);
    g_free(valid);
    char *line = cJSON_PrintUnformatted(o);
    fprintf(stderr, "%s\n", line);
    cJSON_free(line);
    cJSON_Delete(o);
  } else {
    fprintf(stderr, "%s.%03ldZ %-5s %s\n", stamp, ts.tv_nsec / 1000000, names[level], msg);
  }
  g_free(msg);
}

void ixia_log_limit_init(ixia_log_limit_t *l, gint64 every_us) {
  memset(l, 0, sizeof *l);
  g_mutex_init(&l->lock);
  l->every_us = every_us;
}

void ixia_log_limit_clear(ixia_log_limit_t *l) { g_mutex_clear(&l->lock); }

void ixia_log_warn_limited(ixia_log_limit_t *l, const char *what, const char *msg) {
  g_mutex_lock(&l->lock);
  gint64 now = g_get_monotonic_time();
  gboolean emit = l->last == 0 || now - l->last >= l->every_us;
  guint suppressed = l->suppressed;
  if (emit) {
    l->last = now;
    l->suppressed = 0;
  } else {
    l->suppressed++;
  }
  g_mutex_unlock(&l->lock);
  if (!emit) return;
  if (suppressed)
    IXIA_WARN("%s: %s (%u similar messages suppressed)", what, msg, suppressed);
  else
    IXIA_WARN("%s: %s", what, msg);
}
