/* Test hooks (testhook.h). The hooks in use:
 *
 *   IXIA_TEST_BACKFILL_PAUSE_MS   cache: a backfill sleeps this long before it
 *                                 stores its value (opens the stale-set race
 *                                 window on purpose)
 *   IXIA_TEST_MEMCACHED_FIRST     query API: gets skip the store's memory and
 *                                 ask memcached first (the cache tests)
 *   IXIA_TEST_SEARCH_DELAY_MS     indexer: every search call sleeps this long
 *                                 first (a slow shard, for allow_partial) */
#include "testhook.h"

#include <stdlib.h>

#include "log.h"

gint64 ixia_test_hook(const char *name, gint64 def) {
  char *var = g_strconcat("IXIA_TEST_", name, NULL);
  const char *v = g_getenv(var);
  gint64 out = def;
  if (v) {
    char *end = NULL;
    gint64 x = g_ascii_strtoll(v, &end, 10);
    if (end && end != v && !*end) out = x;
    static GHashTable *warned;
    static GMutex lock;
    g_mutex_lock(&lock);
    if (!warned) warned = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    if (g_hash_table_add(warned, g_strdup(var)))
      IXIA_WARN("test hook %s=%s is set: behaviour changed for a test", var, v);
    g_mutex_unlock(&lock);
  }
  g_free(var);
  return out;
}
