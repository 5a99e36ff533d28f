/* The shard's cache invalidator (invalidator.h).
 *
 * The apply thread hands over each applied batch's keys, deduplicated, as
 * one GPtrArray of truth-store keys (common/record.h); the invalidator
 * thread turns them back into (ns, table, key) and sends one pipelined
 * round of deletes per batch. The queue is bounded by batches rather than
 * keys: a batch is one round trip whatever its size, and a memcached that
 * is down or slow should cost the apply thread nothing. */
#include "invalidator.h"

#include <stdatomic.h>

#include "json.h"
#include "log.h"
#include "record.h"

/* Batches of keys waiting beyond which more are dropped. */
#define QUEUE_MAX 16
/* One memcached warning per this long; the rest are counted. */
#define WARN_EVERY_US (5 * G_USEC_PER_SEC)

struct ixia_invalidator {
  ixia_cache_t *cache;
  GThread *thread;
  GAsyncQueue *queue; /* GPtrArray of GBytes (truth-store keys), or &stop_marker */
  ixia_log_limit_t warn;
  _Atomic guint64 invalidations;
  _Atomic guint64 failures;
  _Atomic guint64 dropped;
};

static char stop_marker;

static void invalidate(ixia_invalidator_t *inv, GPtrArray *keys) {
  ixia_cache_keyref_t *refs = g_new(ixia_cache_keyref_t, keys->len + 1);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  guint n = 0;
  for (guint i = 0; i < keys->len; i++) {
    size_t len;
    const char *k = g_bytes_get_data(g_ptr_array_index(keys, i), &len);
    const char *ns, *table, *key;
    size_t nl, tl, kl;
    if (!ixia_record_parse_key(k, len, NULL, &ns, &nl, &table, &tl, &key, &kl)) continue;
    char *ns0 = ixia_memdup0(ns, nl), *table0 = ixia_memdup0(table, tl);
    g_ptr_array_add(names, ns0);
    g_ptr_array_add(names, table0);
    refs[n++] = (ixia_cache_keyref_t){ns0, table0, key, kl};
  }
  guint failed = ixia_cache_invalidate_many(inv->cache, refs, n);
  atomic_fetch_add_explicit(&inv->invalidations, n - failed, memory_order_relaxed);
  if (failed) {
    atomic_fetch_add_explicit(&inv->failures, failed, memory_order_relaxed);
    ixia_log_warn_limited(&inv->warn, "cache", "invalidating indexed keys failed");
  }
  g_free(refs);
  g_ptr_array_free(names, TRUE);
}

static gpointer invalidator_main(gpointer data) {
  ixia_invalidator_t *inv = data;
  for (;;) {
    gpointer item = g_async_queue_pop(inv->queue);
    if (item == &stop_marker) break;
    invalidate(inv, item);
    g_ptr_array_unref(item);
  }
  return NULL;
}

ixia_invalidator_t *ixia_invalidator_new(ixia_cache_t *cache) {
  ixia_invalidator_t *inv = g_new0(ixia_invalidator_t, 1);
  inv->cache = cache;
  inv->queue = g_async_queue_new();
  ixia_log_limit_init(&inv->warn, WARN_EVERY_US);
  inv->thread = g_thread_new("ixia-invalidate", invalidator_main, inv);
  return inv;
}

void ixia_invalidator_stop(ixia_invalidator_t *inv) {
  if (!inv || !inv->thread) return;
  g_async_queue_push(inv->queue, &stop_marker);
  g_thread_join(inv->thread);
  inv->thread = NULL;
}

void ixia_invalidator_destroy(ixia_invalidator_t *inv) {
  if (!inv) return;
  ixia_invalidator_stop(inv);
  gpointer item;
  while ((item = g_async_queue_try_pop(inv->queue)))
    if (item != &stop_marker) g_ptr_array_unref(item);
  g_async_queue_unref(inv->queue);
  ixia_cache_destroy(inv->cache);
  ixia_log_limit_clear(&inv->warn);
  g_free(inv);
}

void ixia_invalidator_queue(ixia_invalidator_t *inv, const ixia_idx_event_t *events, guint n) {
  if (!inv || n == 0) return;
  GHashTable *seen = g_hash_table_new(g_bytes_hash, g_bytes_equal);
  GPtrArray *keys = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  for (guint i = 0; i < n; i++) {
    const ixia_idx_event_t *ev = &events[i];
    if (ev->op == IXIA_IDX_SCHEMA) continue;
    GBytes *k = ixia_record_doc_key(ev->ns, ev->table, ev->key, ev->key_len);
    if (g_hash_table_add(seen, k))
      g_ptr_array_add(keys, k);
    else
      g_bytes_unref(k);
  }
  g_hash_table_destroy(seen);
  if (keys->len == 0 || g_async_queue_length(inv->queue) >= QUEUE_MAX) {
    atomic_fetch_add_explicit(&inv->dropped, keys->len, memory_order_relaxed);
    g_ptr_array_unref(keys);
    return;
  }
  g_async_queue_push(inv->queue, keys);
}

void ixia_invalidator_status(ixia_invalidator_t *inv, cJSON *o) {
  guint64 done = 0, failures = 0, dropped = 0;
  if (inv) {
    done = atomic_load_explicit(&inv->invalidations, memory_order_relaxed);
    failures = atomic_load_explicit(&inv->failures, memory_order_relaxed);
    dropped = atomic_load_explicit(&inv->dropped, memory_order_relaxed);
  }
  cJSON_AddNumberToObject(o, "invalidations", (double)done);
  cJSON_AddNumberToObject(o, "invalidation_failures", (double)failures);
  cJSON_AddNumberToObject(o, "invalidations_dropped", (double)dropped);
}
