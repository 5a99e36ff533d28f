/* One shard's secondary index, kept in its own RocksDB (docs/INDEX-FORMAT.md).
 *
 *   - dictionaries: tables, declared fields, and per keyword, text or bool
 *     field its values -> small ids, each with a live document count (the
 *     planner's estimates), loaded in memory at open;
 *   - dense 32-bit internal document ids per shard, never reused, kept
 *     after a delete so a re-created key gets its old id;
 *   - postings: (field, value id, chunk of 65,536 ids) -> roaring bitmap,
 *     maintained by a merge operator, one operand per chunk per batch; per
 *     field an "exists" posting and per table a "live" posting;
 *   - columns of every declared non-text field in blocks of 1,024 ids:
 *     doubles for numeric fields, value ids for the others; read by
 *     per-candidate checks and aggregations without decoding documents;
 *   - points of every numeric field (sorted (value, id), in memory, rebuilt
 *     from the columns at open): equality and ranges in O(log n + matches);
 *   - per document its version, expiry and the values it was indexed under,
 *     so an update removes its old entries without reading the truth store;
 *   - schemas from SCHEMA events; consumer positions, written in the same
 *     RocksDB write batch as the changes they cover.
 *
 * Searches are planned by cost (the most selective clause leads; wide
 * clauses are checked per candidate on the columns) and stop early once
 * the page and the tracked total are complete.
 *
 * Version rule: an event is applied only when its version is >= the version
 * recorded for the key (equal versions re-index the same document: that is
 * how a backfill after adding an index and replay-failed work); older events
 * are skipped. Deleted keys keep a tombstone record with the delete's
 * version, so a late, older put cannot resurrect them.
 *
 * Thread safety: one thread applies (ixia_idx_apply); any number of threads
 * may search and read concurrently. A search running while a batch is
 * applied may see part of that batch. */
#ifndef IXIA_INDEX_H
#define IXIA_INDEX_H

#include <glib.h>
#include <rocksdb/c.h>

#include "config.h"
#include "error.h"
#include "query.h"
#include "schema.h"

typedef struct ixia_idx ixia_idx_t;

typedef enum {
  IXIA_IDX_PUT = 1,    /* doc: the whole document after the write */
  IXIA_IDX_DELETE = 2,
  IXIA_IDX_SCHEMA = 3, /* doc: the table schema JSON */
} ixia_idx_op_t;

/* One change event; every pointer is borrowed for the duration of a call. */
typedef struct {
  ixia_idx_op_t op;
  const char *ns;
  const char *table;
  const char *key; /* document key bytes; empty for SCHEMA */
  size_t key_len;
  gint64 version;
  const char *doc; /* JSON text, NOT NUL-terminated necessarily */
  size_t doc_len;
  gint64 expire_at;
} ixia_idx_event_t;

/* A consumer position to store with a batch. */
typedef struct {
  gint32 partition;
  gint64 next_offset;
} ixia_idx_position_t;

/* Called for an event that cannot be indexed (undecodable document, wrong
 * type for a declared field, unknown table, over a limit). The event is
 * skipped; the rest of the batch is applied. */
typedef void (*ixia_idx_failed_fn)(const ixia_idx_event_t *ev, const ixia_error_t *why, void *ud);

/* Opens or creates the index at path (index.* options). */
ixia_idx_t *ixia_idx_open(const char *path, const ixia_config_t *cfg, ixia_error_t **err);
void ixia_idx_destroy(ixia_idx_t *idx);

/* Applies events in order, with positions, in one synced RocksDB write
 * batch. *applied counts events that changed the index (may be NULL).
 * FALSE only when the index itself failed (disk); then nothing of the batch
 * is stored and the caller must retry or stop. */
gboolean ixia_idx_apply(ixia_idx_t *idx, const ixia_idx_event_t *events, guint n,
                        const ixia_idx_position_t *positions, guint n_positions,
                        ixia_idx_failed_fn failed, void *failed_ud, guint *applied,
                        ixia_error_t **err);

/* Stored next offset of a partition, or -1 when none is stored. */
gint64 ixia_idx_position(ixia_idx_t *idx, gint32 partition);

/* Highest version applied so far (0 when empty). */
gint64 ixia_idx_max_version(ixia_idx_t *idx);

/* The schema applied for a table: a new reference, or NULL with
 * IXIA_ENOTFOUND. Matches ixia_schema_lookup_fn with ud = idx. */
ixia_schema_t *ixia_idx_schema(const char *ns, const char *table, void *idx,
                               ixia_error_t **err);

typedef struct {
  char *key; /* g_malloc'd, NUL-terminated (keys are UTF-8) */
  gint64 version;
  guint32 id;
  /* Sorted searches: the q->n_sort encoded values, packed (read them with
   * ixia_idx_hit_sort_value): in sort_small when they fit (a number or
   * two, a short keyword: no allocation a hit), else in sort, g_malloc'd;
   * sort is NULL otherwise. */
  guint8 *sort;
  guint n_sort;
  double score; /* relevance (0 when the query scores nothing) */
  guint8 sort_small[32];
} ixia_idx_hit_t;

/* Clears a GArray of ixia_idx_hit_t (frees the keys and sort values). */
void ixia_idx_hits_clear(GArray *hits);
/* Sort value k (< h->n_sort) of a hit: TRUE with its bytes (borrowed from
 * the hit), FALSE when the document has none. */
gboolean ixia_idx_hit_sort_value(const ixia_idx_hit_t *h, guint k, const guint8 **p, gsize *len);
/* The hit's sort values as GBytes (NULL = missing), as a cursor takes them
 * (ixia_idx_after_t.values): a new array that frees its values. */
GPtrArray *ixia_idx_hit_sort_bytes(const ixia_idx_hit_t *h);

/* Where a sorted page starts: after this document's sort values and key
 * (search_after). */
typedef struct {
  GBytes **values; /* q->n_sort encoded values, NULL = missing */
  const char *key;
  gsize key_len;
} ixia_idx_after_t;

typedef struct {
  gint64 after_id;     /* unsorted: hits with a larger internal id; -1: from the start */
  guint limit;         /* hits wanted */
  gint64 deadline_us;  /* g_get_monotonic_time() deadline; 0: none */
  gboolean explain;    /* return the plan */
  /* Sorted queries (q->n_sort > 0): the page after this position (NULL:
   * the first page), with documents positioned by their values as of
   * (as_of_epoch, as_of) when as_of_epoch != 0 (later pages of one paging
   * session), else as of now. */
  const ixia_idx_after_t *after;
  guint64 as_of_epoch, as_of;
  /* On an I/O thread: a sorted search that would read more than a page's
   * worth stops early with res->gave_up instead: a first key that is not a
   * number with missing values last (or a cursor among the documents
   * without a value), a points walk past 4,096 points, more than 1,024
   * changes since as_of, a tie group of more than 256 to order by key, a
   * walk over every match. */
  gboolean bounded;
} ixia_idx_search_opts_t;

typedef struct {
  guint64 total;       /* matching documents */
  gboolean total_exact; /* FALSE: total is a lower bound (the search stopped
                           early, past q->track_total_hits) */
  cJSON *explain;      /* when asked: the plan with estimates and actual
                          counts, and which clause led (caller deletes) */
  guint64 as_of_epoch, as_of; /* sorted queries: the positions used (pass them
                                 back for the next page) */
  gboolean settled;    /* no batch was published while the search ran, so a
                          hit's version is the one whose values matched. FALSE:
                          a hit may pair the values before a change with the
                          version after it (re-check hits against the store) */
  gboolean schema_current; /* a filter with a negation only: every live
                          document of the table was last indexed under the
                          indexes its schema declares now (none is waiting
                          for a backfill of a field added later), so a hit
                          at its indexed version matches the negation too */
  gboolean gave_up;    /* o->bounded and the search needed more: nothing else
                          is set and no hit appended; run it again unbounded */
} ixia_idx_result_t;

/* Evaluates q on this shard: res->total matching documents (exact up to
 * q->track_total_hits, or always when aggs is given), up to o->limit hits
 * (GArray of ixia_idx_hit_t, appended; hits may be NULL): with internal id
 * > o->after_id in id order, or for a sorted query the first o->limit
 * after o->after in q->sort's order, ties by key; and every matching
 * document added to aggs when not NULL. Fails with IXIA_ETOOLARGE naming query.max_postings, or
 * query.max_memory_mb / query.max_terms_buckets (aggregations; lim may be
 * NULL for none), and with IXIA_EUNAVAILABLE naming the deadline. */
gboolean ixia_idx_search(ixia_idx_t *idx, const ixia_query_t *q, const ixia_idx_search_opts_t *o,
                         const ixia_query_limits_t *lim, GArray *hits, ixia_aggs_t *aggs,
                         ixia_idx_result_t *res, ixia_error_t **err);

/* Calls fn for every document (deleted ones too, with deleted = TRUE) of a
 * table with key > after (NULL: from the first), in key order, until fn
 * returns FALSE. For verify and dump-index. */
typedef gboolean (*ixia_idx_doc_fn)(const char *key, size_t key_len, gint64 version,
                                    gboolean deleted, void *ud);
gboolean ixia_idx_foreach_doc(ixia_idx_t *idx, const char *ns, const char *table,
                              const char *after, size_t after_len, ixia_idx_doc_fn fn, void *ud,
                              ixia_error_t **err);

/* Calls fn for every live (not deleted) document of a table with key >
 * after (NULL: from the first), in key order, with its version and expiry
 * (epoch seconds, 0 = never; expired documents are included), until fn
 * returns FALSE. For anti-entropy and repair. */
typedef gboolean (*ixia_idx_live_fn)(const char *key, size_t key_len, gint64 version,
                                     gint64 expire_at, void *ud);
gboolean ixia_idx_foreach_live(ixia_idx_t *idx, const char *ns, const char *table,
                               const char *after, size_t after_len, ixia_idx_live_fn fn, void *ud,
                               ixia_error_t **err);

/* One document's record: *present FALSE when the index never saw the key;
 * else *deleted (a tombstone), *version and *expire_at. */
gboolean ixia_idx_doc_record(ixia_idx_t *idx, const char *ns, const char *table, const char *key,
                             size_t key_len, gboolean *present, gboolean *deleted, gint64 *version,
                             gint64 *expire_at, ixia_error_t **err);

/* Calls fn for every live document with an expiry, in the tables whose
 * schema sets ttl_seconds (only they hold expiring documents, so an index
 * without such tables reads nothing). */
typedef void (*ixia_idx_expiring_fn)(const char *ns, const char *table, const char *key,
                                     size_t key_len, gint64 expire_at, void *ud);
gboolean ixia_idx_foreach_expiring(ixia_idx_t *idx, ixia_idx_expiring_fn fn, void *ud,
                                   ixia_error_t **err);

typedef struct {
  guint64 documents;   /* live documents, all tables */
  guint64 stale_documents; /* of them, indexed before an index their table declares now (idx.h) */
  _Atomic guint64 events_applied;
  _Atomic guint64 events_skipped; /* older than the recorded version */
  _Atomic guint64 events_failed;
  gint64 max_version;
  guint64 disk_bytes;  /* SST + WAL files */
  guint64 cache_bytes; /* decoded blocks held (index.cache_mb) */
  guint64 cache_hits, cache_misses;
  guint64 points_bytes; /* range index of numeric fields */
  guint64 docvalues_bytes; /* doc values of every field but text */
} ixia_idx_stats_t;

void ixia_idx_get_stats(ixia_idx_t *idx, ixia_idx_stats_t *out);

/* The underlying RocksDB (borrowed), for offline tools that read the whole
 * index (dump-index checksums). Reads see merged postings. */
rocksdb_t *ixia_idx_db(ixia_idx_t *idx);

typedef struct {
  char hex[33];       /* XXH3-128 of the logical contents, 32 hex digits */
  guint64 records;    /* RocksDB records hashed */
  guint64 documents;  /* live document records */
  guint64 tombstones; /* deleted document records */
  guint64 tables;
  guint64 postings;   /* non-empty posting and live chunks */
} ixia_idx_checksum_t;

/* A canonical checksum of the index's logical contents over one snapshot
 * (a fresh iterator, so merged values): every record in key order except
 * the volatile ones (consumer positions, the max-version mark, and the
 * dictionary's counts, which are estimates), with postings hashed as their
 * sorted ids and column blocks as their non-empty slots, so compaction, merge-operand history and container encoding do not
 * change it; empty chunks (which compaction drops) are skipped. Two indexes
 * built from the same events in the same order give the same checksum.
 * Safe while another thread applies (it reads a snapshot). */
gboolean ixia_idx_checksum(ixia_idx_t *idx, ixia_idx_checksum_t *out, ixia_error_t **err);

#endif
