/* Test hooks (testhook.h). The hooks in use:
 *
 *   IXIA_TEST_BACKFILL_PAUSE_MS   cache: a backfill sleeps this long before it
 *                                 stores its value (opens the stale-set race
 *                                 window on purpose)
 *   IXIA_TEST_MEMCACHED_FIRST     query API: gets skip the store's memory and
 *                                 ask memcached first (the cache tests)
 *   IXIA_TEST_PAGES_FROM_DISK     query API: a query finished on an I/O thread
 *                                 takes its page as not in memory, so a
 *                                 worker reads it (the fallback path)
 *   IXIA_TEST_SEARCH_DELAY_MS     indexer: every search call sleeps this long
 *                                 first (a slow shard, for allow_partial)
 *   IXIA_TEST_BLOCK_WALK_ONLY     indexer: sparse candidates are walked block
 *                                 by block too (tests compare the two walks)
 *   IXIA_TEST_AGG_UNFUSED         indexer: terms aggregations take the general
 *                                 path, never the fused pass (tests compare
 *                                 the two)
 *   IXIA_TEST_CLOCK_FILE          every process: the path of a file holding a
 *                                 shift in whole seconds that the test rewrites;
 *                                 the process's expiry clock (ixia_time_now)
 *                                 follows it within ~10 ms, so integration
 *                                 tests of TTLs need not wait on the wall clock
 *
 * The clock hook is a polling thread rather than a signal or a call on the
 * wire: it adds nothing to the product's interfaces, and a process without
 * the variable starts no thread. */
#include "testhook.h"

#include <stdlib.h>

#include "log.h"
#include "timeutil.h"

/* The value of IXIA_TEST_<name> (owned by the environment), logged once as
 * a warning when set; NULL when unset. */
static const char *hook_value(const char *name) {
  char *var = g_strconcat("IXIA_TEST_", name, NULL);
  const char *v = g_getenv(var);
  if (v) {
    static GHashTable *warned;
    static GMutex lock;
    g_mutex_lock(&lock);
    if (!warned) warned = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    if (g_hash_table_add(warned, g_strdup(var)))
      IXIA_WARN("test hook %s=%s is set: behaviour changed for a test", var, v);
    g_mutex_unlock(&lock);
  }
  g_free(var);
  return v;
}

gint64 ixia_test_hook(const char *name, gint64 def) {
  const char *v = hook_value(name);
  gint64 out = def;
  if (v) {
    char *end = NULL;
    gint64 x = g_ascii_strtoll(v, &end, 10);
    if (end && end != v && !*end) out = x;
  }
  return out;
}

/* Applies the file's shift as it changes: ixia_time_test_shift is
 * cumulative, so the thread moves the clock by the difference. A missing
 * or unreadable file means no shift yet. */
static gpointer clock_follow(gpointer data) {
  const char *path = data;
  gint64 applied = 0;
  for (;;) {
    char *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL)) {
      char *end = NULL;
      gint64 shift = g_ascii_strtoll(g_strstrip(text), &end, 10);
      if (end && end != text && !*end && shift != applied) {
        ixia_time_test_shift(shift - applied);
        applied = shift;
      }
      g_free(text);
    }
    g_usleep(10 * G_TIME_SPAN_MILLISECOND);
  }
  return NULL;
}

void ixia_test_hook_start_clock(void) {
  static gsize once;
  if (!g_once_init_enter(&once)) return;
  const char *path = hook_value("CLOCK_FILE");
  if (path) g_thread_unref(g_thread_new("ixia-test-clock", clock_follow, g_strdup(path)));
  g_once_init_leave(&once, 1);
}
