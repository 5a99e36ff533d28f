/* Anti-entropy: comparing the (key, version) set of one table on two sides
 * (the truth store and an index) without shipping every key.
 *
 * A range digest is the count of a range's keys and the sum, modulo 2^64,
 * of a 64-bit hash of each (key, version) pair (ixia_ae_pair_hash). Sums do
 * not depend on the order the pairs are read in, and digests of adjacent
 * ranges add up, so several index shards holding disjoint partitions add
 * their digests into the digest of their union.
 *
 * The walk (ixia_ae_walk) asks the truth side for the digests of the next
 * page of keys cut into `fanout` ranges, asks the index side for its
 * digests over exactly the same ranges (the truth side chose the bounds),
 * and descends only into ranges that differ: a differing range is cut again
 * into `fanout` ranges, down to ranges of at most `leaf_keys` keys, whose
 * keys and versions are listed by both sides and compared one by one. Each
 * key whose versions differ is reported to the caller, which decides what
 * a difference means (verify re-checks and reports it; a shard repairs it).
 * Equal tables cost one digest per page on each side; k differing keys cost
 * about k x log_fanout(page) extra digests and k leaf listings.
 *
 * ixia_ae_compare_keys is the plain form: every key and version of the
 * truth side is streamed page by page and merged with the index side's
 * keys of the same range (the self-healing repair uses it: after lost
 * events, most ranges differ anyway).
 *
 * Sides are callbacks, so the same walk serves the indexer's background
 * anti-entropy (truth: the API; index: its own RocksDB), `ixia-recovery
 * verify` (truth: the API; index: every shard over the Search service) and
 * the unit tests (two in-memory sets). Keys are NUL-terminated UTF-8 (the
 * store's document keys). Thread safety: a walk is self-contained. */
#ifndef IXIA_ANTIENTROPY_H
#define IXIA_ANTIENTROPY_H

#include <glib.h>

#include "error.h"

/* The hash of one (key, version) pair: XXH3-64 of the key's bytes seeded
 * with the version. */
guint64 ixia_ae_pair_hash(const char *key, size_t len, gint64 version);

/* One range's digest. last_key is g_malloc'd; "" is the end of the table. */
typedef struct {
  char *last_key;
  gint64 count;
  guint64 hash;
} ixia_ae_range_t;

/* One key of a listing; key g_malloc'd. */
typedef struct {
  char *key;
  gint64 version;
} ixia_ae_kv_t;

/* A GArray of ixia_ae_range_t / ixia_ae_kv_t that frees its elements' keys. */
GArray *ixia_ae_ranges_new(void);
GArray *ixia_ae_kvs_new(void);

/* Accumulates sorted (key, version) pairs into the digests of consecutive
 * ranges ending at given bounds (the index side of a digest call). */
typedef struct {
  GArray *out;            /* ixia_ae_range_t, one per bound */
  const char *const *bounds;
  guint n, cur;
  gint64 count;
  guint64 hash;
} ixia_ae_cutter_t;
void ixia_ae_cutter_init(ixia_ae_cutter_t *c, const char *const *bounds, guint n, GArray *out);
/* Adds a pair (keys in increasing order, after the call's after_key).
 * Returns FALSE once the key lies beyond the last bound (stop reading). */
gboolean ixia_ae_cutter_add(ixia_ae_cutter_t *c, const char *key, size_t len, gint64 version);
/* Emits the ranges not yet emitted (empty ones included). */
void ixia_ae_cutter_finish(ixia_ae_cutter_t *c);

/* Accumulates sorted pairs into ranges of bucket_keys keys, over at most
 * max_keys keys of the interval (after, end] (the truth side of a digest
 * call; the RangeDigest rules of schemas/ixia.thrift). */
typedef struct {
  GArray *out;
  const char *end; /* "" = to the end of the table */
  guint max_keys, bucket_keys, taken;
  gint64 count;
  guint64 hash;
  char *last; /* last key added */
  gboolean full; /* max_keys reached */
} ixia_ae_bucketer_t;
void ixia_ae_bucketer_init(ixia_ae_bucketer_t *b, const char *end, guint max_keys,
                           guint bucket_keys, GArray *out);
/* Adds a pair; FALSE when max_keys were taken (the caller stops, and
 * finishes with more = TRUE if it saw or may have another key). */
gboolean ixia_ae_bucketer_add(ixia_ae_bucketer_t *b, const char *key, size_t len, gint64 version);
/* Closes the last range: at the last key taken when `more` keys follow in
 * the interval, else stretched to `end`. */
void ixia_ae_bucketer_finish(ixia_ae_bucketer_t *b, gboolean more);

typedef struct {
  /* Truth side: digests of (after, end] ("" = to the end), cut every
   * bucket_keys keys over at most max_keys keys, tiling (after, last
   * range's last_key] (stretched to `end` when the interval is done).
   * *store_version: the store's version just before the keys were read. */
  gboolean (*truth_ranges)(void *ud, const char *after, const char *end, guint max_keys,
                           guint bucket_keys, GArray *out, gint64 *store_version,
                           ixia_error_t **err);
  /* Index side: one digest per bound over (after, bounds[0]], (bounds[0],
   * bounds[1]], ... ("" = to the end). */
  gboolean (*index_ranges)(void *ud, const char *after, const char *const *bounds, guint n,
                           GArray *out, ixia_error_t **err);
  /* Truth side: up to limit keys with versions in (after, end], in order. */
  gboolean (*truth_keys)(void *ud, const char *after, const char *end, guint limit, GArray *out,
                         gint64 *store_version, ixia_error_t **err);
  /* Index side: every live key with its version in (after, end]. */
  gboolean (*index_keys)(void *ud, const char *after, const char *end, GArray *out,
                         ixia_error_t **err);
  /* A key whose versions differ (0 = absent on that side). store_version:
   * of the truth listing that showed it; leaf_after: the listed range's
   * lower bound (exclusive; "" = the table's start), for re-reading it. */
  gboolean (*differs)(void *ud, const char *key, gint64 truth_version, gint64 index_version,
                      gint64 store_version, const char *leaf_after, ixia_error_t **err);
} ixia_ae_source_t;

typedef struct {
  guint page_keys; /* truth keys per top-level digest call (and per listing) */
  guint fanout;    /* ranges per level */
  guint leaf_keys; /* ranges of at most this many keys are listed and compared */
} ixia_ae_opts_t;

typedef struct {
  guint64 truth_keys, index_keys; /* keys of the table on each side */
  guint64 ranges;                 /* digests compared */
  guint64 ranges_differing;
  guint64 leaves;                 /* ranges listed key by key */
  guint64 keys_listed;            /* keys read by leaf listings (both sides) */
  guint64 differing;              /* keys reported to differs() */
} ixia_ae_stats_t;

/* Walks one table (the sides' ud knows which); st is added to. */
gboolean ixia_ae_walk(const ixia_ae_source_t *src, void *ud, const ixia_ae_opts_t *o,
                      ixia_ae_stats_t *st, ixia_error_t **err);

/* Streams every truth key page by page (o->page_keys) and compares each
 * page's range with the index side's keys; no digests. */
gboolean ixia_ae_compare_keys(const ixia_ae_source_t *src, void *ud, const ixia_ae_opts_t *o,
                              ixia_ae_stats_t *st, ixia_error_t **err);

#endif
