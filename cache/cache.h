/* Look-aside document cache on memcached (libmemcached).
 *
 * Protocol, as the query API uses it:
 *
 *   get:    r = ixia_cache_get(...)
 *           HIT   -> serve it.
 *           MISS  -> lease = ixia_cache_lease(...)   (may be NULL: just don't backfill)
 *                    read the truth store
 *                    found     -> ixia_cache_backfill(c, lease, version, json, ...)
 *                    not found -> ixia_cache_lease_release(lease)
 *           ERROR -> read the truth store; do not lease or backfill.
 *   write:  commit to the truth store, then ixia_cache_invalidate(...); on FALSE
 *           count the failure (the cache TTL bounds how stale a get can be).
 *
 * Why the lease: the classic stale-set race (reader misses and reads v1,
 * writer commits v2 and deletes, reader then caches v1). The reader adds a
 * placeholder holding a random token BEFORE it reads the store; the backfill
 * stores the value with a CAS only if the key still holds that token. A
 * writer's delete (or anyone else's lease) in between makes the backfill a
 * no-op, so the cache never holds a value older than a write whose delete
 * succeeded.
 *
 * Failure model: every memcached call is bounded by cache.timeout_ms. A server
 * that fails (refused, reset, timed out) is skipped by every thread for
 * cache.retry_timeout_s; calls whose key maps to it return ERROR / FALSE / NULL
 * at once without touching the network. After that one call probes it; on
 * success the server is used again. Keys are never remapped to another
 * server while one is down: the down server would keep copies that
 * invalidations sent elsewhere never reached.
 *
 * Memory layout in memcached (text protocol, CAS on, ketama consistent
 * hashing over cache.servers): key from ixia_cache_key(); value is a 1-byte
 * tag then the body:
 *   'V' + 8-byte big-endian version + JSON bytes   a cached document
 *   'L' + 16 random bytes                          a lease placeholder
 * Anything else is treated as a miss.
 *
 * Thread safety: every function may be called from any thread at once,
 * except ixia_cache_destroy(), which must be the last call on a cache.
 * Connections come from a pool of cache.pool_size; a call that finds the pool
 * empty waits at most cache.timeout_ms and then returns ERROR. */
#ifndef IXIA_CACHE_H
#define IXIA_CACHE_H

#include <glib.h>

#include "config.h"
#include "error.h"

typedef struct ixia_cache ixia_cache_t;
typedef struct ixia_cache_lease ixia_cache_lease_t;

typedef enum { IXIA_CACHE_HIT, IXIA_CACHE_MISS, IXIA_CACHE_ERROR } ixia_cache_result_t;

/* Reads the cache.* options of cfg (copied; cfg may be freed afterwards).
 * An empty cache.servers gives a disabled cache: every get misses, no lease
 * is granted, invalidate succeeds. Does not connect: memcached being down at
 * start is not an error. Returns NULL with *err set (IXIA_EINVAL) when
 * cache.servers is malformed. */
ixia_cache_t *ixia_cache_new(const ixia_config_t *cfg, ixia_error_t **err);

/* The flags of a memcached this cache works with (NULL-terminated, to go
 * after the binary and before -p/-m): loopback, no UDP, and items up to
 * 2 MiB, since a document of limits.max_doc_bytes (1 MiB) plus the cache
 * header is over memcached's 1 MiB default. ixia-local and the tests start
 * memcached with these, so the tests run what the product runs. */
const char *const *ixia_cache_memcached_flags(void);

/* Abandons queued backfills (their leases simply expire), waits for the
 * running ones (a test pause is cut short), closes every connection and frees
 * the cache. Every lease must have been backfilled or released before. NULL
 * is accepted. */
void ixia_cache_destroy(ixia_cache_t *c);

/* Looks (ns, table, key) up. key is key_len bytes, any bytes.
 * HIT: *version, *json (g_malloc'd, NUL-terminated, *len bytes without the
 * NUL; caller g_free's) are set. MISS: nothing cached, or a lease placeholder.
 * ERROR: memcached failed, timed out or is marked down; the caller reads the
 * store and should not lease. Out parameters are only written on HIT. */
ixia_cache_result_t ixia_cache_get(ixia_cache_t *c, const char *ns, const char *table,
                                   const char *key, size_t key_len, gint64 *version, char **json,
                                   size_t *len);

/* Looks n keys up with one multi-key get (a request per server, answered
 * together). out[i] is for keys[i]: result as ixia_cache_get; on HIT its
 * version and json (g_malloc'd; caller frees). Keys whose server is marked
 * down are ERROR at once. (ixia_cache_keyref_t is declared below.) */
typedef struct ixia_cache_keyref ixia_cache_keyref_t;
typedef struct {
  ixia_cache_result_t result;
  gint64 version;
  char *json;
  size_t len;
} ixia_cache_doc_t;
void ixia_cache_get_many(ixia_cache_t *c, const ixia_cache_keyref_t *keys, guint n,
                         ixia_cache_doc_t *out);

/* Takes a lease on the key: adds a placeholder with a fresh random token and
 * a TTL of cache.lease_ttl_seconds, only if the key holds nothing. Call it
 * after a MISS and BEFORE reading the store. Returns NULL when the key holds
 * something (another reader's lease, or a value that just arrived), when
 * memcached failed, or when the cache is disabled; the caller then serves
 * from the store without backfilling. The caller owns the lease and must pass
 * it to ixia_cache_backfill() or ixia_cache_lease_release(). */
ixia_cache_lease_t *ixia_cache_lease(ixia_cache_t *c, const char *ns, const char *table,
                                     const char *key, size_t key_len);

/* Queues an asynchronous store of (version, json) under the lease and
 * returns at once. Takes ownership of lease (NULL is a no-op); copies json
 * (len bytes). A backfill thread (cache.backfill_threads) sleeps
 * IXIA_TEST_BACKFILL_PAUSE_MS if set (a test hook, testhook.h), reads the key with gets
 * and, only if it still holds this lease's token, replaces it with the value
 * by CAS, with a TTL of ttl_seconds (0 means cache.default_ttl_seconds;
 * clamped to 30 days, beyond which memcached reads it as a date). Anything
 * else found there (deleted by a writer, another lease, a value) means the
 * value may be stale: nothing is stored and backfills_stale is counted.
 * When cache.backfill_queue_max backfills are already pending (queued or
 * running) the backfill is dropped and counted. */
void ixia_cache_backfill(ixia_cache_t *c, ixia_cache_lease_t *lease, gint64 version,
                         const char *json, size_t len, gint64 ttl_seconds);

/* Gives a lease up without a value (e.g. the document does not exist) so the
 * next reader can take one at once. Asynchronous, like a backfill: the
 * placeholder is deleted only if it still holds this lease's token. Takes
 * ownership; NULL is a no-op. */
void ixia_cache_lease_release(ixia_cache_lease_t *lease);

/* Deletes keys, waiting for memcached's answers (never noreply or buffered:
 * those report success without knowing). The keys of every caller waiting at
 * that moment go out together: one pipelined write per server, one read of
 * the answers (a group round, like the store's group commit). Returns how
 * many deletes failed: 0 when every key is gone (deleted or absent) or the
 * cache is disabled. A delete fails (server down or marked down, timeout, an error answer): the
 * caller counts it; that key is retried by later rounds (at least every
 * 100 ms) until memcached confirms it, with at most
 * cache.invalidation_retry_max keys waiting (beyond, the oldest are dropped
 * and counted). Until then the cache TTL bounds how stale a get that reads
 * memcached can be. */
struct ixia_cache_keyref {
  const char *ns, *table, *key;
  size_t key_len;
};
guint ixia_cache_invalidate_many(ixia_cache_t *c, const ixia_cache_keyref_t *keys, guint n);
/* The same without waiting: cb(user, failed) runs once memcached answered
 * (on the invalidator's thread; at once on the caller's when the cache is
 * off or n is 0). keys are copied. cb must be quick: the next round waits. */
typedef void (*ixia_cache_invalidated_cb)(gpointer user, guint failed);
void ixia_cache_invalidate_many_async(ixia_cache_t *c, const ixia_cache_keyref_t *keys, guint n,
                                      ixia_cache_invalidated_cb cb, gpointer user);
/* One key: TRUE when it is gone. */
gboolean ixia_cache_invalidate(ixia_cache_t *c, const char *ns, const char *table,
                               const char *key, size_t key_len);

/* The memcached key of (ns, table, key): "ixia:<ns>:<table>:<key>" when that
 * is at most 200 bytes and the key is printable ASCII without spaces;
 * otherwise "ixia:#:<ns>:<table>:" + 32 hex digits of the XXH3 128-bit hash
 * of the key. '#' cannot start a namespace, so the two forms never collide.
 * If ns or table is not a valid name (ixia_name_valid), all three are hashed
 * together: "ixia:#:" + hex. The result is always a valid text-protocol key
 * of at most 250 bytes. Exposed so tests can inspect memcached directly.
 * Caller g_free's. */
char *ixia_cache_key(const char *ns, const char *table, const char *key, size_t key_len);

/* Counters since ixia_cache_new(), read atomically one by one. */
typedef struct {
  guint64 hits, misses, errors; /* get outcomes; errors also counts failed leases/backfills */
  guint64 leases;               /* leases granted */
  guint64 backfills;            /* values stored */
  guint64 backfills_stale;      /* backfills skipped because the lease was gone */
  guint64 backfills_dropped;    /* backfills dropped: queue full or cache closing */
  guint64 invalidations;        /* successful deletes (including of absent keys) */
  guint64 invalidation_failures; /* deletes that failed (then retried) */
  guint64 invalidation_rounds;  /* pipelined rounds (each serves every waiting writer) */
  guint64 invalidations_retried; /* failed deletes confirmed by a retry */
  guint64 invalidation_retries_pending; /* failed deletes waiting for a retry now */
  guint64 backfills_pending;    /* backfills queued or running now (0: the cache is idle) */
  guint64 invalidation_retries_dropped; /* over cache.invalidation_retry_max: given up */
} ixia_cache_stats_t;

void ixia_cache_get_stats(ixia_cache_t *c, ixia_cache_stats_t *out);

/* Waits until no backfill or lease release is queued or running, at most
 * timeout_ms. TRUE if idle. For tests and orderly shutdown. */
gboolean ixia_cache_wait_idle(ixia_cache_t *c, gint64 timeout_ms);

/* TRUE when cache.servers was empty. */
gboolean ixia_cache_disabled(const ixia_cache_t *c);

#endif
