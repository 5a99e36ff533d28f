/* The store's document cache (doc_cache.c), private to store/: stored
 * values by RocksDB key, in front of RocksDB's own lookups.
 *
 * Thread safety: every function may be called from any thread. Consistency
 * with the store rests on the writer calling ixia_doccache_write_begin for
 * every key of a group before its RocksDB write and ixia_doccache_write_end
 * after it (whatever its outcome), and on readers inserting only with the
 * ticket their lookup gave them: see doc_cache.c. */
#pragma once

#include <glib.h>

typedef struct ixia_doccache ixia_doccache_t;

typedef struct {
  guint64 hits, misses, inserts, evictions, entries, bytes, max_bytes;
} ixia_doccache_stats_t;

/* A cache of at most max_bytes (values, keys and bookkeeping); NULL when
 * max_bytes is 0. */
ixia_doccache_t *ixia_doccache_new(guint64 max_bytes);
void ixia_doccache_destroy(ixia_doccache_t *c);

/* A miss's permission to insert what RocksDB answers next; NO_TICKET: a
 * write of the key's stripe was under way, insert nothing. */
#define IXIA_DOCCACHE_NO_TICKET G_MAXUINT64

/* A reference to one cached value: it stays readable after an eviction or
 * a write of its key, until released. A plain pointer to the entry rather
 * than a GBytes view, which a page of 100 hits allocated and freed per hit
 * (four alternated rounds of `not` at limit 100: 57-72 us of the API's CPU
 * a query with GBytes views, 53-65 with these). */
typedef struct ixia_doccache_ref ixia_doccache_ref_t;
/* The value's bytes and length; valid until r is released. */
const void *ixia_doccache_value(const ixia_doccache_ref_t *r, gsize *len);
/* The member table of the stored document in r's value (a record value:
 * common/record.h), built when the entry was: *n members
 * (ixia_json_member_table's layout), offsets from the document's text,
 * which starts *json_off bytes into the value. NULL (*n 0) when there is
 * none. Valid until r is released. */
const guint16 *ixia_doccache_members(const ixia_doccache_ref_t *r, gsize *json_off, guint *n);
/* Drops the reference; NULL is ignored. */
void ixia_doccache_release(ixia_doccache_ref_t *r);

/* The stored value of key (a reference: release it), or NULL with *ticket
 * set for ixia_doccache_insert. NULL cache: always a miss. */
ixia_doccache_ref_t *ixia_doccache_lookup(ixia_doccache_t *c, const void *key, gsize klen,
                                          guint64 *ticket);
/* ixia_doccache_lookup of n keys at once, out[i] and tickets[i] for
 * keys[i]: the same answers, with the cache misses of different keys
 * overlapped (a page of query hits). */
void ixia_doccache_lookup_many(ixia_doccache_t *c, guint n, const char *const *keys,
                               const size_t *klens, ixia_doccache_ref_t **out, guint64 *tickets);
/* Caches value (copied) for key when no write of its stripe began since
 * the lookup that gave ticket; returns the cached value (a reference) or
 * NULL when it was not cached. */
ixia_doccache_ref_t *ixia_doccache_insert(ixia_doccache_t *c, const void *key, gsize klen,
                                          const void *value, gsize vlen, guint64 ticket);

/* Around the RocksDB write of a group, for each of its keys. written: the
 * value the write stored (copied), to cache as the key's
 * newest; NULL for a delete, a failed write or no write-through. */
void ixia_doccache_write_begin(ixia_doccache_t *c, const void *key, gsize klen);
void ixia_doccache_write_end(ixia_doccache_t *c, const void *key, gsize klen, GBytes *written);

void ixia_doccache_get_stats(ixia_doccache_t *c, ixia_doccache_stats_t *out);
