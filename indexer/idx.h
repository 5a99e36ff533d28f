/* What the files of the index library share (not part of index.h).
 *
 *   idx_open.c    opening the RocksDB, loading the dictionaries, small reads,
 *                 stats, the document walk and the canonical checksum
 *   idx_dict.c    tables, fields and value dictionaries in memory
 *   idx_merge.c   the merge operator (postings and column blocks), the
 *                 compaction filter, the column block codec
 *   idx_apply.c   document records and batch apply; publishing a batch to
 *                 the in-memory structures once RocksDB holds it
 *   idx_cache.c   decoded postings and column blocks, bounded by
 *                 index.cache_mb
 *   idx_points.c  the range index of numeric fields (sorted points)
 *   idx_plan.c    cardinality estimates, the plan, explain
 *   idx_eval.c    running a plan block by block: totals, hits, early stop
 *   idx_sort.c    sorted pages: per-shard top-k from the columns, ties by key
 *   idx_score.c   BM25 relevance from the text fields' columns
 *   idx_history.c documents' values before recent batches (stable cursors)
 *   idx_aggs.c    aggregations over column blocks
 *   idx_docs.c    walks over document records (verify, repair, expiry)
 *
 * Layout of the RocksDB (docs/INDEX-FORMAT.md) and the in-memory model are
 * defined here because every room reads them.
 *
 * Concurrency. One apply thread writes; any number of searches read. The
 * apply thread stages a whole batch (records, posting and column changes,
 * new dictionary values, count changes, point changes) without touching
 * anything a search reads, writes it to RocksDB in one write batch, then
 * publishes it: dictionary additions and counts under dict_lock, points
 * under each field's points lock, cached blocks by copy-on-write under the
 * cache's stripe locks. Nothing is undone after a failed write because nothing was
 * published. Searches take no snapshot: a search running while a batch is
 * published may see part of it (hits are verified against the truth store
 * by the query API; totals and aggregations are as of "about now"). */
#ifndef IXIA_IDX_H
#define IXIA_IDX_H

#include <pthread.h>
#include <rocksdb/c.h>
#include <roaring/roaring.h>

#include "bytes.h"
#include "index.h"
#include "log.h"

/* Loops with an AVX2 variant: the build targets plain x86-64, so such a
 * variant is compiled with target("avx2") and chosen at run time with
 * __builtin_cpu_supports (a flag libgcc sets at start-up). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
/* A function also compiled for x86-64-v3 (AVX2, BMI2), chosen at load
 * time by an ifunc; nothing elsewhere. */
#define IXIA_CLONES_V3 __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define IXIA_CLONES_V3
#endif

/* ---------------------------------------------------------------- layout */

#define K_META 'M'   /* "Mv" max version; "Mf" format; "Mp" + partition: next offset */
#define K_TABLE 'T'  /* ns \0 table -> table id */
#define K_SCHEMA 'S' /* table id -> version + schema JSON */
#define K_FIELD 'F'  /* table id, type, path [\0 analyzer] -> field id */
#define K_VALUE 'V'  /* field id, encoded value -> value id, document count */
#define K_DOC 'K'    /* table id, key -> document record */
#define K_ID 'D'     /* doc id -> table id, version, key */
#define K_POST 'P'   /* field id, value id, chunk -> roaring bitmap */
#define K_LIVE 'L'   /* table id, LIVE_ALL | LIVE_STALE, chunk -> roaring bitmap */
#define K_COL 'C'    /* field id, block -> column block (text fields: lengths and term counts) */
#define K_POS 'Q'    /* field id, block -> token positions of a text field (a column block) */

/* The two sets of a table under K_LIVE: its existing documents, and those
 * of them last indexed under an older schema of the table, one that lacked
 * an index the table declares now (a field added later, positions switched
 * on later). The second empties as the documents are written again or
 * backfilled; while it is empty the shard vouches for negations
 * (ixia_idx_result_t.schema_current). */
#define LIVE_ALL 0
#define LIVE_STALE 1

/* 4: the stale set (LIVE_STALE). A format-3 index is upgraded at open with
 * every live document counted stale (idx_open.c). */
#define IDX_FORMAT 4
/* Batches between two writes of the changed dictionary counts. */
#define COUNTS_EVERY 32

/* Posting chunks: 65,536 ids per RocksDB value. */
#define CHUNK_BITS 16
/* Column blocks (and the unit of evaluation): 1,024 ids. */
#define BLOCK_BITS 10
#define BLOCK_SLOTS (1u << BLOCK_BITS)
#define BLOCK_WORDS (BLOCK_SLOTS / 64)
/* The "exists" posting of a field: documents with at least one value. */
#define VID_EXISTS 0xFFFFFFFFu

#define OP_IDS 'I'       /* posting merge operand: ids to add, ids to remove */
#define COL_SPARSE 'c'   /* column operand (and partial merge): slot entries */
#define COL_DENSE 'C'    /* column block after a full merge */

#define REC_DELETED 1u


/* prefix, a, b, chunk: posting and live keys (11 bytes). */
static inline size_t key_post(guint8 *k, char prefix, guint32 a, guint32 b, guint16 chunk) {
  k[0] = (guint8)prefix;
  ixia_bytes_put32(k + 1, a);
  ixia_bytes_put32(k + 5, b);
  k[9] = (guint8)(chunk >> 8), k[10] = (guint8)chunk;
  return 11;
}
static inline size_t key_colp(guint8 *k, char prefix, guint32 field, guint32 block) {
  k[0] = (guint8)prefix;
  ixia_bytes_put32(k + 1, field);
  ixia_bytes_put32(k + 5, block);
  return 9;
}
static inline size_t key_col(guint8 *k, guint32 field, guint32 block) {
  return key_colp(k, K_COL, field, block);
}
/* Keys whose values are column blocks (merge operator, compaction, checksum). */
static inline gboolean is_col_key(const char *k, size_t kl) {
  return kl > 0 && (k[0] == K_COL || k[0] == K_POS);
}

/* Text columns hold 64-bit entries: a slot's first is the field's token
 * count in the document (term 0), then one per distinct token (value id +
 * 1 in the high half) with its count; a position column one per token
 * occurrence with its position, in position order. */
static inline guint64 term_entry(guint32 vid, guint32 n) { return (guint64)(vid + 1) << 32 | n; }

/* Numbers in records, points and range bounds: the order-preserving 64-bit
 * form of ixia_num_encode (unsigned comparison = numeric order). */
static inline guint64 num_key(double d) {
  guint8 b[IXIA_NUM_BYTES];
  ixia_num_encode(d, b);
  return ixia_bytes_get64(b);
}
static inline double num_of_key(guint64 k) {
  guint8 b[IXIA_NUM_BYTES];
  ixia_bytes_put64(b, k);
  return ixia_num_decode(b);
}

/* One (field, value) a document is indexed under (its record's pairs): the
 * value id for keyword, text and bool fields, the num_key of a number. */
typedef struct {
  guint32 field;
  guint64 val;
} pair_t;

/* ------------------------------------------------------------ the model */

typedef struct ixia_idx_history ixia_idx_history_t;

typedef struct ixia_points ixia_points_t;
typedef struct ixia_docvals ixia_docvals_t;
/* Memory of every field's doc values (index.docvalues_mb). */
typedef struct {
  _Atomic gsize used;
  gsize limit;
} ixia_docvals_budget_t;
typedef struct ixia_idx_cache ixia_idx_cache_t;

typedef struct {
  guint32 id, table_id;
  ixia_field_type_t type;
  gboolean numeric; /* long, double, timestamp: column + points, no dictionary */
  char *path;
  char *analyzer; /* text fields: part of the identity (the F key); NULL otherwise */
  /* Value dictionary of keyword, text and bool fields. The apply thread
   * reads `ids` without a lock (it is the only writer); everything grows
   * under dict_lock (write), and searches read under dict_lock (read). */
  GHashTable *ids; /* GBytes* -> value id + 1 */
  GTree *order;    /* GBytes* -> value id + 1, in byte order: ranges and prefixes */
  GPtrArray *vals; /* GBytes* by value id */
  GArray *vv;      /* ixia_val_t by value id: views of vals */
  GArray *counts;  /* guint32 by value id: live documents holding the value */
  ixia_points_t *points; /* numeric fields; NULL for the others */
  ixia_docvals_t *dv;    /* every field but text; NULL for text */
  _Atomic gint64 total_len;      /* text fields: tokens of every live document (BM25's avgdl);
                            written by the apply thread, read atomically */
} field_t;

typedef struct {
  guint32 id;
  char *ns, *name;
  ixia_schema_t *schema; /* NULL until a SCHEMA event; under dict_lock */
  GHashTable *fields;    /* "type:path" -> field_t* (borrowed); under dict_lock */
} table_t;

struct ixia_idx {
  char *path;
  rocksdb_t *db;
  rocksdb_column_family_handle_t *cf; /* the default column family */
  rocksdb_options_t *opts;
  rocksdb_block_based_table_options_t *table_opts;
  rocksdb_cache_t *block_cache;
  rocksdb_cache_t *row_cache; /* NULL when index.row_cache_mb = 0 */
  rocksdb_filterpolicy_t *bloom;
  rocksdb_mergeoperator_t *merge;
  rocksdb_compactionfilter_t *cfilter;
  rocksdb_writeoptions_t *wopts;
  rocksdb_readoptions_t *ropts;
  guint max_values;

  GRWLock dict_lock;
  GHashTable *tables;      /* "ns\ntable" -> table_t* */
  GPtrArray *tables_by_id; /* table_t* by id (0 unused) */
  GPtrArray *fields;       /* field_t* by id (0 unused) */
  GPtrArray *pending_dict; /* GBytes* key/value pairs to re-put after a failed write */
  /* Dictionary counts changed in memory but not yet written (apply thread):
   * field id << 32 | value id. Written every COUNTS_EVERY batches and at
   * close; after a crash counts may lag by that much (they are estimates). */
  GHashTable *dirty_counts;
  guint batches_since_counts;

  ixia_idx_cache_t *cache;
  ixia_docvals_budget_t docvals;

  /* Documents' values before recent batches, for stable sorted cursors
   * (idx_history.c); publish_seq counts published batches (atomic). */
  ixia_idx_history_t *history;
  _Atomic guint64 publish_seq;
  /* Odd from a batch's RocksDB write to the end of its publish: a search
   * that sees it unchanged and even saw no batch in part. */
  _Atomic guint64 publish_gen;

  /* apply thread */
  guint32 next_doc_id;
  _Atomic gint64 max_version; /* atomic reads from other threads */

  _Atomic guint64 events_applied, events_skipped, events_failed; /* atomic */
};

/* ---- idx_dict.c ---- */

table_t *ixia_idx_table_new(guint32 id, const char *ns, const char *name);
void ixia_idx_table_free(gpointer t);
/* dvb: the budget of the field's doc values (none for text fields). */
field_t *ixia_idx_field_new(guint32 id, guint32 table_id, ixia_field_type_t type, const char *path,
                            const char *analyzer, ixia_docvals_budget_t *dvb);
void ixia_idx_field_free(gpointer f);
/* Caller holds dict_lock or is the apply thread. */
table_t *ixia_idx_table_find(ixia_idx_t *idx, const char *ns, const char *table);
field_t *ixia_idx_field_find(table_t *t, const ixia_schema_field_t *ix);
/* Registers a loaded or created table/field; caller holds dict_lock (write). */
void ixia_idx_table_register(ixia_idx_t *idx, table_t *t);
gboolean ixia_idx_field_register(ixia_idx_t *idx, field_t *f);
/* Sets value id vid of f to val with its count; caller holds dict_lock
 * (write) or is loading. */
void ixia_idx_value_set(field_t *f, guint32 vid, GBytes *val, guint32 count);
/* The field of a table for a declared index, under dict_lock (read). */
field_t *ixia_idx_field_lookup(ixia_idx_t *idx, table_t *t, const ixia_schema_field_t *ix);
/* The value id of an encoded value, or -1; caller holds dict_lock (read). */
gint64 ixia_idx_value_id(field_t *f, const guint8 *p, gsize len);
/* The same for a value held as GBytes (no probe to build: a query's values). */
gint64 ixia_idx_value_id_of(field_t *f, GBytes *val);

/* ---- idx_apply.c ---- */

/* The K key of a document. */
GBytes *ixia_idx_doc_key(guint32 table_id, const char *key, size_t key_len);
/* Decodes a document record; pairs (GArray of {u32 field; u64 value}) may
 * be NULL. FALSE when corrupt. */
gboolean ixia_idx_rec_decode(const char *v, size_t vl, guint32 *id, gint64 *version,
                             gboolean *deleted, GArray *pairs);

/* The expiry (epoch seconds, 0 = never) of a record ixia_idx_rec_decode
 * accepts. */
gint64 ixia_idx_rec_expire_at(const char *v, size_t vl);

/* Writes every dictionary count changed since the last write (at close). */
gboolean ixia_idx_flush_counts(ixia_idx_t *idx, ixia_error_t **err);

/* ---- idx_merge.c ---- */

rocksdb_mergeoperator_t *ixia_idx_merge_operator_new(void);
rocksdb_compactionfilter_t *ixia_idx_compaction_filter_new(void);
roaring_bitmap_t *ixia_idx_bitmap_load(const char *p, size_t n);
/* A posting operand (malloc'd): remove rem, then add add. */
char *ixia_idx_op_encode(const roaring_bitmap_t *add, const roaring_bitmap_t *rem, size_t *len);

/* A decoded column block: the first value of every slot in a fixed-width
 * array (doubles for numeric fields, value ids for the others), a presence
 * mask, and the slots holding more than one value with all of theirs. */
typedef struct {
  guint8 width;              /* 8: double; 4: value id */
  guint64 has[BLOCK_WORDS];  /* slots with at least one value */
  guint64 multi[BLOCK_WORDS]; /* slots with more than one */
  union {
    double *d;
    guint32 *u;
  } v1;                      /* BLOCK_SLOTS first values (0 where !has) */
  guint32 *mstart;           /* NULL when no slot is multi; else BLOCK_SLOTS + 1 offsets */
  union {
    double *d;
    guint32 *u;
  } all;                     /* every value of the multi slots, by slot */
  gsize bytes;
} col_t;

/* Decodes a stored column value (dense or sparse); NULL when corrupt. An
 * absent block is ixia_idx_col_empty(). */
col_t *ixia_idx_col_decode(const char *p, size_t n);
col_t *ixia_idx_col_empty(guint8 width);
col_t *ixia_idx_col_copy(const col_t *c);
/* Applies a sparse operand to a decoded block in place (copy first when
 * shared); FALSE when the operand is corrupt. */
gboolean ixia_idx_col_apply(col_t *c, const char *op, size_t n);
void ixia_idx_col_free(col_t *c);

/* Values of one slot: *n values at *p (width of the block). */
static inline const void *col_slot(const col_t *c, guint s, guint32 *n) {
  if (!(c->has[s >> 6] >> (s & 63) & 1)) {
    *n = 0;
    return NULL;
  }
  if (c->mstart && (c->multi[s >> 6] >> (s & 63) & 1)) {
    *n = c->mstart[s + 1] - c->mstart[s];
    return c->width == 8 ? (const void *)(c->all.d + c->mstart[s])
                         : (const void *)(c->all.u + c->mstart[s]);
  }
  *n = 1;
  return c->width == 8 ? (const void *)(c->v1.d + s) : (const void *)(c->v1.u + s);
}

/* ---- idx_cache.c ---- */

typedef enum { BLK_BITMAP, BLK_COLUMN, BLK_RECORDS } blk_kind_t;

/* The id records (K_ID values: table id, version, key) of one block of
 * BLOCK_SLOTS document ids, as a hit resolves: value i at arena + off[i],
 * len[i] bytes (0: no record). An update appends to the arena; a copy
 * keeps it as it is, or packs it once most of it is dead. */
typedef struct {
  guint32 off[BLOCK_SLOTS], len[BLOCK_SLOTS];
  GByteArray *arena;
  gsize live; /* bytes of the arena that records use */
} recs_t;

/* A decoded, immutable block shared by searches; reference-counted. */
typedef struct blk {
  _Atomic gint ref;
  blk_kind_t kind;
  guint8 key[11];
  guint8 klen;
  gsize bytes;
  roaring_bitmap_t *bm; /* BLK_BITMAP: a whole posting or live set (every chunk) */
  guint64 card;         /* BLK_BITMAP: bm's cardinality, counted once when bm is final: a
                           run-optimized set is counted by walking its runs, and recounting
                           the live set (holes where updated documents left their old ids)
                           on every query took 13% of a shard's CPU on `not` pages */
  col_t *col;           /* BLK_COLUMN */
  recs_t *recs;         /* BLK_RECORDS */
  GList link;           /* position in its cache stripe's list */
  gboolean used;        /* hit since it last passed the list's tail */
} blk_t;

ixia_idx_cache_t *ixia_idx_cache_new(gsize budget);
void ixia_idx_cache_destroy(ixia_idx_cache_t *c);
/* A whole posting (prefix 'P' field vid, or 'L' table 0): every chunk ORed.
 * Returns a reference (ixia_idx_blk_unref), or NULL with err. */
blk_t *ixia_idx_posting(ixia_idx_t *idx, char prefix, guint32 a, guint32 b, ixia_error_t **err);
/* The column block of a field (width 8 for numeric and text fields). */
blk_t *ixia_idx_column(ixia_idx_t *idx, guint32 field, guint8 width, guint32 block,
                       ixia_error_t **err);
/* The same for another column family (K_POS). */
blk_t *ixia_idx_column_at(ixia_idx_t *idx, char prefix, guint32 field, guint8 width,
                          guint32 block, ixia_error_t **err);
void ixia_idx_blk_unref(blk_t *b);
/* The cached id records of a block of document ids, or NULL (no error)
 * when they are not cached: ixia_idx_resolve_hits reads the others one by
 * one, and a block is loaded (one scan of its records) on its
 * RECORDS_LOAD_AFTER-th miss, so pages over a table much larger than the
 * cache do not read 1,024 records for each hit. NULL with err set on a
 * read error. */
blk_t *ixia_idx_records(ixia_idx_t *idx, guint32 block, ixia_error_t **err);
/* Asks the CPU for the cached record block's memory ahead of
 * ixia_idx_records (nothing when it is not cached). */
void ixia_idx_records_prefetch(ixia_idx_t *idx, guint32 block);

/* Publishing a batch (apply thread, after its RocksDB write): the changed
 * ids of postings and the operands of column blocks, applied copy-on-write
 * to the cached blocks. */
typedef struct ixia_idx_publish ixia_idx_publish_t;
ixia_idx_publish_t *ixia_idx_publish_begin(ixia_idx_t *idx);
void ixia_idx_publish_posting(ixia_idx_publish_t *p, const guint8 *chunk_key,
                              const roaring_bitmap_t *add, const roaring_bitmap_t *rem);
void ixia_idx_publish_column(ixia_idx_publish_t *p, const guint8 *key, const guint8 *op,
                             gsize len);
/* Document id's record is now val[0..len) (K_ID's value). */
void ixia_idx_publish_record(ixia_idx_publish_t *p, guint32 id, const guint8 *val, gsize len);
void ixia_idx_publish_end(ixia_idx_publish_t *p);

typedef struct {
  guint64 bytes, entries, hits, misses, evictions;
} ixia_idx_cache_stats_t;
void ixia_idx_cache_stats(ixia_idx_cache_t *c, ixia_idx_cache_stats_t *out);

/* ---- idx_points.c ---- */

typedef struct {
  guint64 key; /* num_key of the value */
  guint32 id;
  gboolean add; /* FALSE: remove */
} ixia_point_change_t;

ixia_points_t *ixia_points_new(void);
void ixia_points_destroy(ixia_points_t *p);
/* Replaces the contents with n points (key, id) sorted by (key, id). */
void ixia_points_load(ixia_points_t *p, const guint64 *keys, const guint32 *ids, gsize n);
/* Applies changes (apply thread): removals of absent points are ignored. */
void ixia_points_update(ixia_points_t *p, const ixia_point_change_t *ch, guint n);
/* Points with lo <= key <= hi. */
guint64 ixia_points_count(ixia_points_t *p, guint64 lo, guint64 hi);
/* Adds the ids of points with lo <= key <= hi to out; returns how many. */
guint64 ixia_points_collect(ixia_points_t *p, guint64 lo, guint64 hi, roaring_bitmap_t *out);
/* Keeps in cand only the ids of points with lo <= key <= hi; returns how
 * many points the range holds. For a range beside a candidate set (a term
 * AND a range): no bitmap of the range is built; the range's points and
 * the candidates meet in a bitset, the smaller side marking it. */
guint64 ixia_points_filter(ixia_points_t *p, guint64 lo, guint64 hi, roaring_bitmap_t *cand);
/* Up to max points in order, copied out: ascending from (key, id) on, or
 * with desc descending from it down; inclusive says whether the point
 * (key, id) itself comes first. Returns how many. */
guint ixia_points_next(ixia_points_t *p, gboolean desc, guint64 key, guint32 id, gboolean inclusive,
                       guint64 *keys, guint32 *ids, guint max);
guint64 ixia_points_size(ixia_points_t *p);
gsize ixia_points_bytes(ixia_points_t *p);

/* ---- idx_docvals.c ---- */


#define DV_CHUNK_BITS 16
#define DV_CHUNK_IDS (1u << DV_CHUNK_BITS)
#define DV_BLOCKS (DV_CHUNK_IDS / BLOCK_SLOTS)
/* Slots without a value, and slots with several (read the column). NaNs
 * and ids beyond any dictionary: every check fails them. */
#define DV_MISSING8 G_GUINT64_CONSTANT(0x7ff8000000d0c000)
#define DV_MULTI8 G_GUINT64_CONSTANT(0x7ff8000000d0c001)
#define DV_MISSING4 0xFFFFFFFFu
#define DV_MULTI4 0xFFFFFFFEu

typedef struct {
  _Atomic guint16 multi[DV_BLOCKS]; /* multi-valued slots per block */
  _Atomic guint32 flips[DV_BLOCKS]; /* a slot of the block became or stopped being multi */
  guint8 v[];
} dvchunk_t;

/* width 8: doubles; 4: value ids. */
ixia_docvals_t *ixia_docvals_new(guint8 width, ixia_docvals_budget_t *budget);
void ixia_docvals_destroy(ixia_docvals_t *dv);
/* Writer: document id now holds n values, the first at *first (a double or
 * a value id by width). dv may be NULL (no doc values: nothing to do). */
void ixia_docvals_set(ixia_docvals_t *dv, guint32 id, const void *first, guint n);
/* The BLOCK_SLOTS raw slots of a block (double bits or value ids), or NULL
 * when they must be read from the column: the chunk was denied, or a slot
 * of the block holds several values. *none: no document of the block holds
 * a value. dv may be NULL (a text field). */
const void *ixia_docvals_block(const ixia_docvals_t *dv, guint32 block, gboolean *none,
                               guint32 *flips);
/* After reading a block's slots: FALSE when a slot of it became or stopped
 * being multi-valued meanwhile (flips from ixia_docvals_block); read the
 * column instead. */
gboolean ixia_docvals_block_same(const ixia_docvals_t *dv, guint32 block, guint32 flips);
/* One document's raw slot (DV_MISSING* when it has no value); FALSE when
 * it must be read from the column. */
gboolean ixia_docvals_get(const ixia_docvals_t *dv, guint32 id, guint64 *v);
/* Where id's slot is (for a prefetch), or NULL. */
const void *ixia_docvals_prefetch_addr(const ixia_docvals_t *dv, guint32 id);
gsize ixia_docvals_bytes(ixia_docvals_t *dv);
/* Whether no document holds several values of the field, as far as the doc
 * values can tell: FALSE without doc values or once a chunk was denied (its
 * slots were never recorded). Changes only when the writer publishes. */
gboolean ixia_docvals_single(const ixia_docvals_t *dv);

/* ---- idx_history.c ---- */

/* A document's indexed state as of a publish sequence: its pairs then, or
 * `current` when it did not exist then (it sorts by its values now). */
typedef struct {
  gboolean current;
  guint n;
  pair_t *pairs;
} hstate_t;

ixia_idx_history_t *ixia_idx_history_new(gsize max_bytes, gint64 max_age_us, guint64 epoch);
void ixia_idx_history_destroy(ixia_idx_history_t *h);
guint64 ixia_idx_history_epoch(ixia_idx_history_t *h);
/* Apply thread, before the batch of sequence seq is published: document id
 * had these pairs (text fields left out) and was live or not. */
void ixia_idx_history_add(ixia_idx_history_t *h, guint64 seq, guint32 id, const pair_t *old,
                          guint n, gboolean was_live);
/* Every document changed after as_of (of this epoch), id -> hstate_t*: its
 * state as of as_of. NULL with IXIA_EINVAL when entries after as_of were
 * dropped, or the epoch is another open's. With max_changes > 0, a walk
 * that meets more changes than that stops and sets *over (the table is
 * then incomplete): a bounded search gives up before reading them all. */
GHashTable *ixia_idx_history_since(ixia_idx_history_t *h, guint64 epoch, guint64 as_of,
                                   guint64 max_changes, gboolean *over, ixia_error_t **err);

/* ---- idx_plan.c / idx_eval.c / idx_aggs.c ---- */

/* One node of a search plan (a filter node, with how it is evaluated). */
typedef struct pnode pnode_t;

#define SEARCH_COLS 4

typedef struct {
  ixia_idx_t *idx;
  table_t *table;
  const ixia_query_t *q;
  const ixia_query_limits_t *lim; /* may be NULL: no limits */
  blk_t *live;                 /* the table's live set */
  guint64 n_live;
  guint64 postings, max_postings; /* ids read, for query.max_postings */
  gint64 deadline_us;
  ixia_error_t **err;
  /* Column blocks the search read last (ixia_idx_search_column), each a
   * reference, released by ixia_idx_search_release. */
  struct {
    blk_t *b;
    guint32 field, block;
  } cols[SEARCH_COLS];
  guint next_col;
} ixia_idx_search_t;

gboolean ixia_idx_deadline(ixia_idx_search_t *s);
/* ixia_idx_column for a search: the checks and the aggregation of one
 * block read the same columns (a 30% range aggregated over its own field
 * looked its column block up twice a block), so the last SEARCH_COLS
 * blocks read are kept and handed out again. Returns a reference. */
blk_t *ixia_idx_search_column(ixia_idx_search_t *s, const field_t *f, guint32 block);
/* Drops the blocks ixia_idx_search_column kept. */
void ixia_idx_search_release(ixia_idx_search_t *s);
/* Counts ids read; FALSE naming query.max_postings past the limit. */
gboolean ixia_idx_charge(ixia_idx_search_t *s, guint64 ids);

/* The plan of a filter (NULL filter: every live document). */
pnode_t *ixia_idx_plan(ixia_idx_search_t *s, const ixia_filter_t *f);
void ixia_idx_plan_free(pnode_t *p);
cJSON *ixia_idx_plan_explain(const pnode_t *p);

/* A count the plan's matches are known to reach without walking them, read
 * from exact counts the index keeps: the live set, an exists posting, one
 * value's posting, a numeric field's points when each of its documents has
 * one value (the field's points as many as its exists posting). 0 when
 * nothing is known. Postings are read (from the decoded-block cache) only
 * where an estimate already reaches need. FALSE on a read error. */
gboolean ixia_idx_plan_lower(ixia_idx_search_t *s, pnode_t *root, double need, double *lower);

/* Runs a plan: the candidate set (lead) and the checks left for each
 * candidate block. */
typedef struct {
  roaring_bitmap_t *lead; /* owned; candidates (a subset of live) */
  /* Or, instead of lead: the candidates are the live documents of the
   * union of these postings (blk_t*, owned references), read a chunk at a
   * time by the walk, which can stop once the page is full. */
  GPtrArray *postings;
  GPtrArray *checks;      /* pnode_t* checked per candidate block */
  /* A page walked on the live documents because its total was known
   * (page_need): the blocks the walk may visit without filling the page
   * before the search gives the walk up and reads the index instead (the
   * matches were not spread as the estimate assumed); 0: no such walk. */
  guint64 walk_blocks;
} ixia_idx_exec_t;
/* page_only: the search wants a page, with no sort and no aggregation, so
 * a union of postings need not be materialized (ex.postings). page_need,
 * when not 0: the total is known already (ixia_idx_plan_lower reached the
 * total to track), so the walk has only that many matches to find, and a
 * leaf dense enough is checked on the live documents from the first
 * instead of read from the index when that costs less (out->walk_blocks
 * bounds that walk). */
gboolean ixia_idx_plan_lead(ixia_idx_search_t *s, pnode_t *root, gboolean page_only,
                            guint page_need, ixia_idx_exec_t *out);
/* Narrows mask (BLOCK_WORDS words of block `block`) to the documents that
 * pass node p. */
gboolean ixia_idx_check_block(ixia_idx_search_t *s, pnode_t *p, guint32 block, guint64 *mask);
/* Whether each of n ids, scattered over blocks (a walk of points), passes
 * every check, into pass[i]. A check on one column is answered from the
 * ids' slots: all their column blocks are looked up and the slots
 * prefetched first, so the cache misses of scattered slots overlap instead
 * of following one another; other checks go one id at a time. */
gboolean ixia_idx_check_ids(ixia_idx_search_t *s, GPtrArray *checks, const guint32 *ids, guint n,
                            gboolean *pass);
/* The bits of bm in block `block`. */
void ixia_idx_bm_block(const roaring_bitmap_t *bm, guint32 block, guint64 *out);
/* set: ORs bm's ids into bits, a bitset over the id space (65,536 bits a
 * container, a container at a time: a run is a word fill); !set: zeroes
 * the 1,024 words of each of bm's containers. */
void ixia_idx_bm_mark(const roaring_bitmap_t *bm, guint64 *bits, gboolean set);
/* Adds ids, sorted (repeats allowed), to bm: the containers are built
 * whole (through CRoaring's portable format) instead of grown a value at
 * a time as roaring_bitmap_add_many does, ~3x faster from 1,000 ids up. */
void ixia_idx_bm_add_sorted(roaring_bitmap_t *bm, const guint32 *ids, gsize n);
/* mask &= the bits of bm in block `block`; per bit when the mask has only a
 * few (a sorted page checks one candidate at a time). */
void ixia_idx_bm_and_block(const roaring_bitmap_t *bm, guint32 block, guint64 *mask);
void ixia_idx_pnode_note(pnode_t *p, guint64 matched);

/* Resolves ids to keys and versions (hits appended, in the ids' order). */
gboolean ixia_idx_resolve_hits(ixia_idx_t *idx, const guint32 *ids, guint n, GArray *hits,
                               ixia_error_t **err);

/* Relevance (idx_score.c): BM25 of documents for q's match and
 * match_phrase clauses, with this shard's statistics as of creation. */
typedef struct ixia_idx_scorer ixia_idx_scorer_t;
ixia_idx_scorer_t *ixia_idx_scorer_new(ixia_idx_search_t *s, gboolean *ok);
void ixia_idx_scorer_free(ixia_idx_scorer_t *sc);
/* Documents of one block at a time are cheapest (one column per clause). */
double ixia_idx_score(ixia_idx_scorer_t *sc, guint32 id, gboolean *ok);

/* Sorted searches (idx_sort.c): the page in the order of q->sort. */
typedef struct ixia_idx_sort ixia_idx_sort_t;
/* NULL with err set (a cursor of another sort, an expired history). */
ixia_idx_sort_t *ixia_idx_sort_new(ixia_idx_search_t *s, const ixia_idx_search_opts_t *o,
                                   ixia_idx_exec_t *ex);
/* Offers the documents of mask in block `block`. */
gboolean ixia_idx_sort_block(ixia_idx_sort_t *S, guint32 block, const guint64 *mask);
/* Whether the page can be read by walking the first key's points in order
 * (a numeric first key, values last). */
gboolean ixia_idx_sort_points_ok(const ixia_idx_sort_t *S);
/* Reads the page that way, or when the points do not settle it, by
 * offering every match of set (with the plan's checks); *used says which.
 * A bounded sort gives up instead of offering every match. */
gboolean ixia_idx_sort_points(ixia_idx_sort_t *S, const roaring_bitmap_t *set, gboolean *used);
/* The page: hits (key, version, id, sort values) in order; *as_of and
 * *epoch say which positions it used. */
gboolean ixia_idx_sort_finish(ixia_idx_sort_t *S, const roaring_bitmap_t *set, GArray *hits,
                              guint64 *epoch, guint64 *as_of);
void ixia_idx_sort_free(ixia_idx_sort_t *S);
/* A bounded sort (o->bounded) that gave up: its page is not there, and
 * the search is run again unbounded. FALSE for NULL. */
gboolean ixia_idx_sort_gave_up(const ixia_idx_sort_t *S);
/* top_hits: the best k of the documents offered, by keys (ties by key);
 * ixia_idx_sort_finish gives them (set unused). */
ixia_idx_sort_t *ixia_idx_topk_new(ixia_idx_search_t *s, const ixia_sort_key_t *keys, guint nk,
                                   guint k);
gboolean ixia_idx_topk_offer(ixia_idx_sort_t *S, guint32 id);

/* Column aggregations over one search. */
typedef struct ixia_idx_agg ixia_idx_agg_t;
ixia_idx_agg_t *ixia_idx_agg_new(ixia_idx_search_t *s, ixia_aggs_t *aggs);
/* Adds the documents of mask in block `block`. */
gboolean ixia_idx_agg_block(ixia_idx_agg_t *g, guint32 block, const guint64 *mask);
/* Merges what was accumulated into the aggs state. */
gboolean ixia_idx_agg_finish(ixia_idx_agg_t *g);
void ixia_idx_agg_free(ixia_idx_agg_t *g);

#endif
