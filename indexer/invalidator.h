/* The shard's cache invalidator: with indexer.invalidate_cache and a
 * non-empty cache.servers, every PUT/DELETE key of an applied batch is
 * deleted from memcached once more (the query API already deletes on
 * write; this closes the window of a backfill racing the write).
 *
 * A thread of its own sends the deletes, one pipelined round per batch, so
 * memcached round trips never delay the next batch. Failures are only
 * logged (rate-limited) and counted; when more than a few batches wait,
 * further invalidations are dropped and counted: the cache TTL bounds
 * staleness.
 *
 * Thread safety: ixia_invalidator_queue from one thread (the apply thread);
 * ixia_invalidator_status from any; new/stop/destroy from the controlling
 * one. */
#ifndef IXIA_INVALIDATOR_H
#define IXIA_INVALIDATOR_H

#include <cjson/cJSON.h>

#include "cache.h"
#include "index.h"

typedef struct ixia_invalidator ixia_invalidator_t;

/* Takes ownership of cache and starts the thread. */
ixia_invalidator_t *ixia_invalidator_new(ixia_cache_t *cache);
/* Sends what is queued, then stops the thread; queue nothing after it.
 * Idempotent; NULL is fine. */
void ixia_invalidator_stop(ixia_invalidator_t *inv);
/* Stops it if needed and frees everything (the cache too). NULL is fine. */
void ixia_invalidator_destroy(ixia_invalidator_t *inv);
/* Queues the PUT/DELETE keys of an applied batch, once each. */
void ixia_invalidator_queue(ixia_invalidator_t *inv, const ixia_idx_event_t *events, guint n);
/* Adds "invalidations", "invalidation_failures" and "invalidations_dropped"
 * to o (zeros when inv is NULL: no cache). */
void ixia_invalidator_status(ixia_invalidator_t *inv, cJSON *o);

#endif
