/* What the files of the cache library share (not part of cache.h).
 *
 *   cache.c       keys, connections, gets, leases, backfills, the per-server
 *                 health shared by all threads
 *   invalidate.c  writes' deletes: every waiting writer's keys in one
 *                 pipelined round per server, failures retried */
#ifndef IXIA_CACHE_INT_H
#define IXIA_CACHE_INT_H

#include <libmemcached/memcached.h>
#include <libmemcached/util.h>
#include <stdatomic.h>

#include "cache.h"

typedef struct {
  char *name; /* "host:port", for logs */
  char *host;
  guint16 port;
  /* Monotonic time (µs) until which the server is skipped; 0 while healthy.
   * Shared by every pooled connection, unlike libmemcached's own per-handle
   * failure state, so one timeout spares all threads the next ones. */
  _Atomic gint64 down_until;
} server_t;

struct ixia_cache {
  gboolean disabled;
  gint64 timeout_us, retry_us;
  time_t default_ttl, lease_ttl;
  gint64 backfill_pause_ms;
  gint64 backfill_queue_max;

  server_t *servers;
  guint n_servers;
  memcached_st *master; /* template the pool clones; never used for I/O */
  memcached_pool_st *pool;

  /* Counting semaphore over the pool: memcached_pool_fetch() can only wait
   * in whole seconds, too coarse for cache.timeout_ms. */
  GMutex pool_lock;
  GCond pool_cond;
  gint64 pool_free;

  GThreadPool *workers;
  GMutex jobs_lock; /* guards pending and closing */
  GCond jobs_cond;  /* pending reached 0, or closing was set */
  gint64 pending;
  gboolean closing;

  _Atomic gint64 last_warn_us; /* rate limit of per-operation warnings */

  _Atomic guint64 hits, misses, errors, leases, backfills, backfills_stale, backfills_dropped,
      invalidations, invalidation_failures;

  /* Group invalidation (invalidate.c). */
  GThread *inval_thread;
  GAsyncQueue *inval_queue; /* inval_req_t*; a NULL-keys request stops the thread */
  memcached_st *inval_mc;   /* a clone of master: key -> server */
  gint64 inval_retry_max;
  _Atomic guint64 inval_rounds, inval_retried, inval_retry_drops, inval_retry_pending;
};

#define COUNT(c, field) atomic_fetch_add_explicit(&(c)->field, 1, memory_order_relaxed)

/* Per-server health (cache.c). */
void ixia_cache_server_mark_down(ixia_cache_t *c, server_t *s, const char *why);
void ixia_cache_server_mark_up(server_t *s);
gboolean ixia_cache_server_usable(ixia_cache_t *c, server_t *s);

/* The group invalidator (invalidate.c): started with the cache, stopped
 * (pending requests answered) before it is freed. */
gboolean ixia_cache_invalidator_start(ixia_cache_t *c, ixia_error_t **err);
void ixia_cache_invalidator_stop(ixia_cache_t *c);

#endif
