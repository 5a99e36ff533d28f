/* Decoded blocks kept in memory for searches: whole postings (every chunk of
 * one value's posting, or of a table's live set, as one roaring bitmap) and
 * column blocks, bounded by index.cache_mb, evicted roughly least recently
 * used first (CLOCK: a hit marks the block used, and eviction gives a used
 * block at the tail a second chance instead of moving it on every hit).
 *
 * Why a cache of decoded blocks and not only RocksDB's block cache: a
 * search reads the same few postings and column blocks over and over, and
 * decoding them (deserialising a bitmap, folding merge operands, converting
 * a column block to arrays) costs more than the filter or the aggregation
 * that reads them.
 *
 * Why stripes: a sorted page or a filter reads hundreds of blocks, and with
 * 16 searches at once a single cache mutex made 20% of the indexer's CPU
 * futex waits and wake-ups. The cache is split into CACHE_STRIPES
 * independent maps, each with its own lock and list; a block's stripe
 * comes from its key's hash. The byte budget is shared (an atomic count),
 * so a block of any size up to the budget can stay cached; a stripe that
 * inserts evicts from its own list until the whole cache is within budget
 * (or only the new block is left in it: the cache can exceed its budget by
 * at most one block per stripe, until those stripes insert again).
 * A hit takes one stripe lock and changes nothing but a flag, so readers of
 * different blocks never wait on each other.
 *
 * Blocks are immutable and reference-counted: a search holds the ones it
 * reads; the apply thread publishes a batch by replacing the cached blocks
 * it changed with updated copies (copy-on-write), and drops touched keys it
 * has no copy for. A search that misses loads from RocksDB's latest state
 * and caches the result only if no batch was published meanwhile (a
 * generation counter, bumped while every stripe is locked), so a block
 * loaded before a batch's write can never outlive the batch in the cache.
 * Applying a batch's changes twice gives the same block (set semantics),
 * which makes the window between the RocksDB write and the publish
 * harmless.
 *
 * Id records too: a page of 100 hits resolved its ids to keys and versions
 * with a RocksDB multi-get, a third of the shard's CPU at limit 100. The
 * records of a block of 1,024 ids are cached as one block (BLK_RECORDS),
 * loaded by one scan and kept current by the publish like the others. A
 * block is loaded only on its RECORDS_LOAD_AFTER-th miss (counted in a small
 * hashed table): until then its hits are read one by one, so a table far
 * larger than the cache does not pay a scan of 1,024 records per hit.
 *
 * A page of 100 hits looks up about 100 record blocks, each in a block of
 * its own, and a lookup in a stripe's map ended on a cache miss (the
 * block, to compare its key) before the next lookup could start: 15% of
 * the shard's CPU on a sorted page of 100. Cached record blocks are also
 * listed in a directory by block number (two levels, so that it grows
 * without moving: a page of the directory is allocated once and kept
 * until the cache is destroyed). A slot is written only under the lock of
 * its block's stripe, like the map; a lookup reads it under that lock, and
 * ixia_idx_records_prefetch reads it without the lock, only to ask the CPU
 * for the block's memory, so that a page's lookups miss together instead
 * of one after another.
 *
 * Column blocks too, a directory per field (below COLDIR_FIELDS): an
 * aggregation over 30% of a million documents looks up two columns' 977
 * blocks each, and the map's lookups (the key hashed twice, the bucket,
 * the block's key compared) were 9% of the shard's CPU. The map still
 * holds every block: inserts, removals and the publish find them there. */
#include <stdatomic.h>
#include <string.h>

#include "idx.h"

#define CACHE_STRIPES 32
/* Misses of a record block before it is loaded, and the slots counting them. */
#define RECORDS_LOAD_AFTER 3
#define RECORDS_MISS_SLOTS 4096
/* A block directory: DIR_PAGES pages of DIR_PAGE_SLOTS blocks cover every
 * 32-bit document id. */
#define DIR_PAGE_BITS 12
#define DIR_PAGE_SLOTS (1u << DIR_PAGE_BITS)
#define DIR_PAGES (1u << (32 - BLOCK_BITS - DIR_PAGE_BITS))
/* Column fields with a directory: ids below this (a field id is never
 * reused; the ones above are found through the map). */
#define COLDIR_FIELDS 1024u

/* Cached blocks of one kind by block number (record blocks; one field's
 * column blocks). */
typedef struct {
  _Atomic(blk_t *) *_Atomic pages[DIR_PAGES];
} blkdir_t;

typedef struct {
  GMutex lock;
  GHashTable *map; /* blk_t* (hashed by key) -> itself */
  GQueue lru;      /* head: most recently inserted */
  guint64 hits, misses, evictions;
} stripe_t;

struct ixia_idx_cache {
  stripe_t stripes[CACHE_STRIPES];
  _Atomic gsize bytes; /* every stripe's blocks */
  gsize budget;
  _Atomic guint64 gen; /* written with every stripe locked */
  _Atomic guint8 rec_misses[RECORDS_MISS_SLOTS]; /* by record block, hashed */
  blkdir_t recs_dir;                               /* cached record blocks by number */
  _Atomic(blkdir_t *) col_dirs[COLDIR_FIELDS];     /* cached K_COL blocks, by field */
};

static guint blk_hash(gconstpointer p) {
  const blk_t *b = p;
  guint h = 2166136261u;
  for (guint i = 0; i < b->klen; i++) h = (h ^ b->key[i]) * 16777619u;
  return h;
}

static gboolean blk_equal(gconstpointer a, gconstpointer b) {
  const blk_t *x = a, *y = b;
  return x->klen == y->klen && memcmp(x->key, y->key, x->klen) == 0;
}

/* The stripe of a key: the hash's high bits mixed down, so that the
 * stripe does not follow the map's bucket choice. */
static stripe_t *stripe_of(ixia_idx_cache_t *c, const blk_t *b) {
  guint h = blk_hash(b);
  h ^= h >> 16;
  h *= 0x45d9f3bu;
  h ^= h >> 16;
  return &c->stripes[h % CACHE_STRIPES];
}

/* The slot of block `block` in directory d; NULL when its page was never
 * allocated and create is FALSE. */
static _Atomic(blk_t *) *dir_slot(blkdir_t *d, guint32 block, gboolean create) {
  _Atomic(blk_t *) *_Atomic *at = &d->pages[block >> DIR_PAGE_BITS];
  _Atomic(blk_t *) *page = atomic_load(at);
  if (!page && create) {
    _Atomic(blk_t *) *fresh = g_new0(_Atomic(blk_t *), DIR_PAGE_SLOTS);
    if (atomic_compare_exchange_strong(at, &page, fresh)) page = fresh;
    else g_free((gpointer)fresh); /* another stripe's insert made it: page holds it */
  }
  return page ? &page[block & (DIR_PAGE_SLOTS - 1)] : NULL;
}

/* The directory slot of the block with b's key (b may be a key-only
 * probe): record blocks (K_ID, then the number) and column blocks (K_COL,
 * the field, the number) of fields below COLDIR_FIELDS. *listed (unless
 * NULL) is set when the key belongs in a directory; NULL when it does not,
 * or when its directory or page was never made and create is FALSE. */
static _Atomic(blk_t *) *dir_slot_of(ixia_idx_cache_t *c, const blk_t *b, gboolean create,
                                     gboolean *listed) {
  gboolean col = b->klen == 9 && b->key[0] == K_COL && ixia_bytes_get32(b->key + 1) < COLDIR_FIELDS;
  gboolean recs = b->klen == 5 && b->key[0] == K_ID;
  if (listed) *listed = col || recs;
  if (recs) return dir_slot(&c->recs_dir, ixia_bytes_get32(b->key + 1), create);
  if (!col) return NULL;
  guint32 field = ixia_bytes_get32(b->key + 1);
  blkdir_t *d = atomic_load(&c->col_dirs[field]);
  if (!d && create) {
    blkdir_t *fresh = g_new0(blkdir_t, 1);
    if (atomic_compare_exchange_strong(&c->col_dirs[field], &d, fresh)) d = fresh;
    else g_free(fresh);
  }
  return d ? dir_slot(d, ixia_bytes_get32(b->key + 5), create) : NULL;
}

static void dir_free(blkdir_t *d) {
  for (guint i = 0; d && i < DIR_PAGES; i++) g_free((gpointer)atomic_load(&d->pages[i]));
}

ixia_idx_cache_t *ixia_idx_cache_new(gsize budget) {
  ixia_idx_cache_t *c = g_new0(ixia_idx_cache_t, 1);
  for (int i = 0; i < CACHE_STRIPES; i++) {
    stripe_t *s = &c->stripes[i];
    g_mutex_init(&s->lock);
    s->map = g_hash_table_new(blk_hash, blk_equal);
    g_queue_init(&s->lru);
  }
  c->budget = budget;
  return c;
}

static recs_t *recs_new(gsize arena) {
  recs_t *r = g_new0(recs_t, 1);
  r->arena = g_byte_array_sized_new((guint)arena);
  return r;
}

static void recs_free(recs_t *r) {
  if (!r) return;
  g_byte_array_free(r->arena, TRUE);
  g_free(r);
}

static void recs_set(recs_t *r, guint slot, const void *val, gsize len) {
  r->live -= r->len[slot];
  r->off[slot] = r->arena->len;
  r->len[slot] = (guint32)len;
  g_byte_array_append(r->arena, val, (guint)len);
  r->live += len;
}

/* A copy: the arena as it is while records use most of it, else packed.
 * (Packing a block record by record on every publish that touched it was
 * 43% of a small batch's publish under single puts: a batch of a few
 * updates copied whole blocks.) */
static recs_t *recs_copy(const recs_t *r) {
  recs_t *c = g_new(recs_t, 1);
  *c = *r; /* offsets, lengths, live bytes */
  guint len = r->arena->len;
  if (len <= 2 * r->live + 4096) {
    c->arena = g_byte_array_sized_new(len + 1024);
    g_byte_array_append(c->arena, r->arena->data, len);
    return c;
  }
  c->arena = g_byte_array_sized_new((guint)r->live + 1024);
  g_byte_array_set_size(c->arena, (guint)r->live);
  guint32 at = 0;
  for (guint i = 0; i < BLOCK_SLOTS; i++) {
    c->off[i] = at;
    if (!r->len[i]) continue;
    memcpy(c->arena->data + at, r->arena->data + r->off[i], r->len[i]);
    at += r->len[i];
  }
  return c;
}

static void blk_free(blk_t *b) {
  if (b->bm) roaring_bitmap_free(b->bm);
  ixia_idx_col_free(b->col);
  recs_free(b->recs);
  g_free(b);
}

void ixia_idx_blk_unref(blk_t *b) {
  if (b && (atomic_fetch_sub(&b->ref, 1) == 1)) blk_free(b);
}

void ixia_idx_cache_destroy(ixia_idx_cache_t *c) {
  if (!c) return;
  for (int i = 0; i < CACHE_STRIPES; i++) {
    stripe_t *s = &c->stripes[i];
    for (GList *l = s->lru.head; l;) {
      GList *next = l->next;
      ixia_idx_blk_unref(l->data);
      l = next;
    }
    g_hash_table_destroy(s->map);
    g_mutex_clear(&s->lock);
  }
  dir_free(&c->recs_dir);
  for (guint f = 0; f < COLDIR_FIELDS; f++) {
    blkdir_t *d = atomic_load(&c->col_dirs[f]);
    dir_free(d);
    g_free(d);
  }
  g_free(c);
}

static blk_t *blk_new(blk_kind_t kind, const guint8 *key, guint klen) {
  blk_t *b = g_new0(blk_t, 1);
  b->ref = 1;
  b->kind = kind;
  memcpy(b->key, key, klen);
  b->klen = (guint8)klen;
  b->link.data = b;
  return b;
}

static gsize blk_bytes(const blk_t *b) {
  gsize n = sizeof *b + 64;
  if (b->bm) n += roaring_bitmap_size_in_bytes(b->bm);
  if (b->col) n += b->col->bytes;
  if (b->recs) n += sizeof *b->recs + b->recs->arena->len;
  return n;
}

/* Caller holds the stripe's lock. */
static void cache_remove(ixia_idx_cache_t *c, stripe_t *s, blk_t *b) {
  _Atomic(blk_t *) *slot = dir_slot_of(c, b, FALSE, NULL);
  if (slot && atomic_load(slot) == b) atomic_store(slot, NULL);
  g_queue_unlink(&s->lru, &b->link);
  g_hash_table_remove(s->map, b);
  atomic_fetch_sub(&c->bytes, b->bytes);
  ixia_idx_blk_unref(b);
}

/* Caller holds the stripe's lock. Takes the caller's reference to b.
 * While the cache is over budget, evicts this stripe's tail block, except
 * that a block used since it last passed the tail goes back to the head
 * with its flag cleared (second chance), and b itself, reaching the tail
 * once every other block has passed, goes back to the head once: on the
 * next pass no flag is set (the stripe is locked), so the loop ends, at
 * the latest with b alone in its stripe. */
static void cache_insert(ixia_idx_cache_t *c, stripe_t *s, blk_t *b) {
  b->bytes = blk_bytes(b);
  b->used = FALSE;
  g_hash_table_add(s->map, b);
  _Atomic(blk_t *) *slot = dir_slot_of(c, b, TRUE, NULL);
  if (slot) atomic_store(slot, b);
  g_queue_push_head_link(&s->lru, &b->link);
  atomic_fetch_add(&c->bytes, b->bytes);
  gboolean b_passed = FALSE;
  while (atomic_load(&c->bytes) > c->budget && s->lru.length > 1) {
    blk_t *old = s->lru.tail->data;
    if (old == b && b_passed) break; /* cannot happen (see above); never loop */
    if (old == b || old->used) {
      b_passed |= old == b;
      g_queue_unlink(&s->lru, &old->link);
      old->used = FALSE;
      g_queue_push_head_link(&s->lru, &old->link);
      continue;
    }
    s->evictions++;
    cache_remove(c, s, old);
  }
}

/* A referenced cached block, or NULL; *gen is the generation to insert a
 * loaded block under. A block listed in a directory (record and column
 * blocks) is read from its slot instead of the map: no hash table probe,
 * no key compare on the block's line. */
static blk_t *cache_lookup(ixia_idx_cache_t *c, const guint8 *key, guint klen, guint64 *gen) {
  blk_t probe;
  memcpy(probe.key, key, klen);
  probe.klen = (guint8)klen;
  stripe_t *s = stripe_of(c, &probe);
  gboolean listed;
  _Atomic(blk_t *) *slot = dir_slot_of(c, &probe, FALSE, &listed);
  g_mutex_lock(&s->lock);
  blk_t *b = !listed ? g_hash_table_lookup(s->map, &probe) : slot ? atomic_load(slot) : NULL;
  if (b) {
    atomic_fetch_add(&b->ref, 1);
    b->used = TRUE;
    s->hits++;
  } else {
    s->misses++;
  }
  *gen = atomic_load(&c->gen);
  g_mutex_unlock(&s->lock);
  return b;
}

/* Keeps a freshly loaded block (ref 1, the caller's) when no batch was
 * published since gen; returns the block the caller should use. */
static blk_t *cache_offer(ixia_idx_cache_t *c, blk_t *b, guint64 gen) {
  stripe_t *s = stripe_of(c, b);
  g_mutex_lock(&s->lock);
  blk_t *have = g_hash_table_lookup(s->map, b);
  if (have) {
    /* Another search loaded it first: use that one. */
    atomic_fetch_add(&have->ref, 1);
    g_mutex_unlock(&s->lock);
    ixia_idx_blk_unref(b);
    return have;
  }
  /* gen only changes with every stripe locked, so this read is stable. */
  if (gen == atomic_load(&c->gen)) {
    atomic_fetch_add(&b->ref, 1); /* the cache's */
    cache_insert(c, s, b);
  }
  g_mutex_unlock(&s->lock);
  return b;
}

blk_t *ixia_idx_posting(ixia_idx_t *idx, char prefix, guint32 a, guint32 b, ixia_error_t **err) {
  guint8 key[11];
  key_post(key, prefix, a, b, 0);
  guint64 gen;
  blk_t *hit = cache_lookup(idx->cache, key, 9, &gen);
  if (hit) return hit;
  roaring_bitmap_t *bm = roaring_bitmap_create();
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  gboolean ok = TRUE;
  for (rocksdb_iter_seek(it, (const char *)key, 9); ok && rocksdb_iter_valid(it);
       rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl != 11 || memcmp(k, key, 9) != 0) break;
    const char *v = rocksdb_iter_value(it, &vl);
    roaring_bitmap_t *chunk = ixia_idx_bitmap_load(v, vl);
    if (!chunk) {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "corrupt posting in the index (field %u, value %u)",
                          a, b);
      break;
    }
    roaring_bitmap_or_inplace(bm, chunk);
    roaring_bitmap_free(chunk);
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  ok = ixia_error_from_rocksdb(err, rerr, "index posting read") && ok;
  if (!ok) {
    roaring_bitmap_free(bm);
    return NULL;
  }
  roaring_bitmap_run_optimize(bm);
  blk_t *blk = blk_new(BLK_BITMAP, key, 9);
  blk->bm = bm;
  blk->card = roaring_bitmap_get_cardinality(bm);
  return cache_offer(idx->cache, blk, gen);
}

blk_t *ixia_idx_column(ixia_idx_t *idx, guint32 field, guint8 width, guint32 block,
                       ixia_error_t **err) {
  return ixia_idx_column_at(idx, K_COL, field, width, block, err);
}

blk_t *ixia_idx_column_at(ixia_idx_t *idx, char prefix, guint32 field, guint8 width,
                          guint32 block, ixia_error_t **err) {
  guint8 key[9];
  key_colp(key, prefix, field, block);
  guint64 gen;
  blk_t *hit = cache_lookup(idx->cache, key, 9, &gen);
  if (hit) return hit;
  char *rerr = NULL;
  size_t vl = 0;
  char *v = rocksdb_get(idx->db, idx->ropts, (const char *)key, 9, &vl, &rerr);
  if (!ixia_error_from_rocksdb(err, rerr, "index column read")) return NULL;
  col_t *col = v ? ixia_idx_col_decode(v, vl) : ixia_idx_col_empty(width);
  rocksdb_free(v);
  if (!col || col->width != width) {
    ixia_idx_col_free(col);
    ixia_error_set(err, IXIA_EINTERNAL, "corrupt column block in the index (field %u, block %u)",
                   field, block);
    return NULL;
  }
  blk_t *blk = blk_new(BLK_COLUMN, key, 9);
  blk->col = col;
  return cache_offer(idx->cache, blk, gen);
}

void ixia_idx_records_prefetch(ixia_idx_t *idx, guint32 block) {
  _Atomic(blk_t *) *slot = dir_slot(&idx->cache->recs_dir, block, FALSE);
  /* (Unlocked: the block may be evicted meanwhile; a prefetch of freed
   * memory is harmless, and nothing is read from it.) */
  blk_t *b = slot ? atomic_load_explicit(slot, memory_order_relaxed) : NULL;
  /* (Both lines of the block: its flags and records pointer may be in
   * the second.) */
  if (b) __builtin_prefetch(b, 1), __builtin_prefetch((const char *)b + sizeof *b - 1, 1);
}

blk_t *ixia_idx_records(ixia_idx_t *idx, guint32 block, ixia_error_t **err) {
  guint8 key[5];
  key[0] = K_ID;
  ixia_bytes_put32(key + 1, block);
  guint64 gen;
  blk_t *hit = cache_lookup(idx->cache, key, 5, &gen);
  if (hit) return hit;
  _Atomic guint8 *misses = &idx->cache->rec_misses[block % RECORDS_MISS_SLOTS];
  if (atomic_fetch_add(misses, 1) + 1 < RECORDS_LOAD_AFTER) return NULL;
  atomic_store(misses, 0);
  recs_t *r = recs_new(32 * 1024);
  guint8 from[5];
  from[0] = K_ID;
  ixia_bytes_put32(from + 1, block << BLOCK_BITS);
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  for (rocksdb_iter_seek(it, (const char *)from, 5); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl != 5 || k[0] != K_ID) break;
    guint32 id = ixia_bytes_get32((const guint8 *)k + 1);
    if (id >> BLOCK_BITS != block) break;
    const char *v = rocksdb_iter_value(it, &vl);
    recs_set(r, id & (BLOCK_SLOTS - 1), v, vl);
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  if (!ixia_error_from_rocksdb(err, rerr, "index id records read")) {
    recs_free(r);
    return NULL;
  }
  blk_t *blk = blk_new(BLK_RECORDS, key, 5);
  blk->recs = r;
  return cache_offer(idx->cache, blk, gen);
}

/* ---------------------------------------------------------------- publish */

struct ixia_idx_publish {
  ixia_idx_t *idx;
  GHashTable *touched; /* blk_t* probe (key only) -> new blk_t* or the probe itself (no copy) */
};

ixia_idx_publish_t *ixia_idx_publish_begin(ixia_idx_t *idx) {
  ixia_idx_publish_t *p = g_new0(ixia_idx_publish_t, 1);
  p->idx = idx;
  p->touched = g_hash_table_new(blk_hash, blk_equal);
  return p;
}

/* The batch's copy of a touched block: a copy of the cached block, or NULL
 * when the block is not cached (the key is still recorded). */
static blk_t *touched_copy(ixia_idx_publish_t *p, blk_kind_t kind, const guint8 *key, guint klen) {
  blk_t probe;
  memcpy(probe.key, key, klen);
  probe.klen = (guint8)klen;
  gpointer have;
  if (g_hash_table_lookup_extended(p->touched, &probe, NULL, &have))
    return ((blk_t *)have)->bm || ((blk_t *)have)->col || ((blk_t *)have)->recs ? have : NULL;
  stripe_t *s = stripe_of(p->idx->cache, &probe);
  g_mutex_lock(&s->lock);
  blk_t *cached = g_hash_table_lookup(s->map, &probe);
  if (cached) atomic_fetch_add(&cached->ref, 1);
  g_mutex_unlock(&s->lock);
  blk_t *copy = blk_new(kind, key, klen);
  if (cached) {
    if (kind == BLK_BITMAP) copy->bm = roaring_bitmap_copy(cached->bm);
    else if (kind == BLK_RECORDS) copy->recs = recs_copy(cached->recs);
    else copy->col = ixia_idx_col_copy(cached->col);
    ixia_idx_blk_unref(cached);
  }
  g_hash_table_add(p->touched, copy);
  return cached ? copy : NULL;
}

void ixia_idx_publish_posting(ixia_idx_publish_t *p, const guint8 *chunk_key,
                              const roaring_bitmap_t *add, const roaring_bitmap_t *rem) {
  blk_t *b = touched_copy(p, BLK_BITMAP, chunk_key, 9);
  if (!b) return;
  roaring_bitmap_andnot_inplace(b->bm, rem);
  roaring_bitmap_or_inplace(b->bm, add);
}

void ixia_idx_publish_column(ixia_idx_publish_t *p, const guint8 *key, const guint8 *op,
                             gsize len) {
  blk_t *b = touched_copy(p, BLK_COLUMN, key, 9);
  if (b && !ixia_idx_col_apply(b->col, (const char *)op, len)) {
    /* Cannot happen for operands this process encoded; drop the copy so
     * the block is reloaded from RocksDB. */
    ixia_idx_col_free(b->col);
    b->col = NULL;
  }
}

void ixia_idx_publish_record(ixia_idx_publish_t *p, guint32 id, const guint8 *val, gsize len) {
  guint8 key[5];
  key[0] = K_ID;
  ixia_bytes_put32(key + 1, id >> BLOCK_BITS);
  blk_t *b = touched_copy(p, BLK_RECORDS, key, 5);
  if (b) recs_set(b->recs, id & (BLOCK_SLOTS - 1), val, len);
}

void ixia_idx_publish_end(ixia_idx_publish_t *p) {
  ixia_idx_cache_t *c = p->idx->cache;
  GHashTableIter it;
  gpointer k;
  /* The copies are private until swapped in: compress them before taking
   * any lock. */
  g_hash_table_iter_init(&it, p->touched);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    blk_t *b = k;
    if (b->bm) {
      roaring_bitmap_run_optimize(b->bm);
      b->card = roaring_bitmap_get_cardinality(b->bm);
    }
  }
  /* Every stripe, in order, so that a search sees the whole batch or none
   * of it per block and the generation moves atomically with the swap. */
  for (int i = 0; i < CACHE_STRIPES; i++) g_mutex_lock(&c->stripes[i].lock);
  g_hash_table_iter_init(&it, p->touched);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    blk_t *b = k;
    stripe_t *s = stripe_of(c, b);
    blk_t *cached = g_hash_table_lookup(s->map, b);
    if (cached) cache_remove(c, s, cached);
    if (b->bm || b->col || b->recs) cache_insert(c, s, b); /* takes b's reference */
    else blk_free(b);
  }
  atomic_fetch_add(&c->gen, 1);
  for (int i = CACHE_STRIPES - 1; i >= 0; i--) g_mutex_unlock(&c->stripes[i].lock);
  g_hash_table_destroy(p->touched);
  g_free(p);
}

void ixia_idx_cache_stats(ixia_idx_cache_t *c, ixia_idx_cache_stats_t *out) {
  memset(out, 0, sizeof *out);
  out->bytes = atomic_load(&c->bytes);
  for (int i = 0; i < CACHE_STRIPES; i++) {
    stripe_t *s = &c->stripes[i];
    g_mutex_lock(&s->lock);
    out->entries += g_hash_table_size(s->map);
    out->hits += s->hits;
    out->misses += s->misses;
    out->evictions += s->evictions;
    g_mutex_unlock(&s->lock);
  }
}
