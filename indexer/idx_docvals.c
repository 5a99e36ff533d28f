/* Doc values: the value of every document of a keyword, bool or numeric
 * field in one fixed-width slot per document id, in memory (Lucene's doc
 * values, held as plain arrays).
 *
 * Why: checking a candidate against the column store looked up its decoded
 * column block in the striped cache (a hash, a mutex, a reference count)
 * and then read the block's presence mask and value: four cache misses per
 * candidate when the candidates are sparse. A term beside a wide range (511
 * candidates in 406 blocks) spent half of the shard's CPU there, and a term
 * beside a narrower range read 40,000 points to filter 20,000 candidates
 * because checking them cost more. Here a check is one load from an array
 * indexed by id: ~4 ns a candidate when the candidates are dense, ~30 ns
 * when each is a cache miss.
 *
 * Layout: chunks of 65,536 ids (64 column blocks), each an array of raw
 * values (double bits for numeric fields, value ids for the others) and a
 * count of multi-valued slots per block. A slot holds the document's only
 * value, DV_MISSING when it has none, or DV_MULTI when it has several: those
 * are read from the column blocks (a block holding any multi-valued slot is
 * read there whole). The sentinels fail every comparison a check makes (the
 * doubles are NaNs, which documents never hold; the value ids are beyond any
 * dictionary), so a check needs no presence mask.
 *
 * Memory: width x 65,536 bytes a chunk, charged to one budget shared by
 * every field (index.docvalues_mb). A chunk is allocated when a value is
 * first set in it, at open (from the column blocks) or by the apply thread;
 * when the budget refuses, the chunk is marked denied and its ids are read
 * from the column blocks for as long as the index stays open. A chunk never
 * set is all DV_MISSING, so "absent" means "no values" only for chunks that
 * were never denied.
 *
 * Thread safety: one writer (the apply thread, or the opener before any
 * search) and any number of readers without locks. A slot is one aligned
 * word, written whole; a reader sees the old value or the new one. The
 * directory of chunks grows by replacing it (readers holding the old one
 * see fewer chunks and fall back to the columns); old directories are freed
 * with the field. */
#include <stdatomic.h>
#include <string.h>

#include "idx.h"

#define DV_DENIED ((dvchunk_t *)(guintptr)1)

typedef struct {
  guint n;
  dvchunk_t *c[];
} dvdir_t;

struct ixia_docvals {
  guint8 width;
  _Atomic(dvdir_t *) dir;
  GPtrArray *old_dirs;
  ixia_docvals_budget_t *budget;
  _Atomic gsize bytes; /* this field's chunks */
  _Atomic gint64 multi;    /* multi-valued slots of every chunk */
  _Atomic gboolean denied; /* a chunk was denied: its slots were never recorded */
};

static dvdir_t *dir_new(guint n) {
  dvdir_t *d = g_malloc0(sizeof *d + n * sizeof(dvchunk_t *));
  d->n = n;
  return d;
}

ixia_docvals_t *ixia_docvals_new(guint8 width, ixia_docvals_budget_t *budget) {
  ixia_docvals_t *dv = g_new0(ixia_docvals_t, 1);
  dv->width = width;
  dv->budget = budget;
  dv->old_dirs = g_ptr_array_new_with_free_func(g_free);
  atomic_store(&dv->dir, dir_new(16));
  return dv;
}

void ixia_docvals_destroy(ixia_docvals_t *dv) {
  if (!dv) return;
  dvdir_t *d = atomic_load(&dv->dir);
  for (guint i = 0; i < d->n; i++)
    if (d->c[i] != DV_DENIED) g_free(d->c[i]);
  g_free(d);
  g_ptr_array_free(dv->old_dirs, TRUE);
  atomic_fetch_sub(&dv->budget->used, atomic_load(&dv->bytes));
  g_free(dv);
}

static gsize chunk_bytes(guint8 width) { return sizeof(dvchunk_t) + (gsize)width * DV_CHUNK_IDS; }

/* The chunk of id for a write: allocated on first use within the budget,
 * NULL when denied (now or earlier). */
static dvchunk_t *chunk_for_write(ixia_docvals_t *dv, guint32 ci) {
  dvdir_t *d = atomic_load(&dv->dir);
  if (ci >= d->n) {
    guint n = d->n;
    while (n <= ci) n *= 2;
    dvdir_t *nd = dir_new(n);
    memcpy(nd->c, d->c, d->n * sizeof(dvchunk_t *));
    atomic_store(&dv->dir, nd);
    g_ptr_array_add(dv->old_dirs, d);
    d = nd;
  }
  dvchunk_t *c = d->c[ci];
  if (c == DV_DENIED) return NULL;
  if (c) return c;
  gsize need = chunk_bytes(dv->width);
  if (atomic_fetch_add(&dv->budget->used, need) + need > dv->budget->limit) {
    atomic_fetch_sub(&dv->budget->used, need);
    atomic_store(&dv->denied, TRUE);
    atomic_store_explicit((_Atomic(dvchunk_t *) *)&d->c[ci], DV_DENIED, memory_order_release);
    return NULL;
  }
  c = g_malloc(need);
  memset(c->multi, 0, sizeof c->multi);
  memset(c->flips, 0, sizeof c->flips);
  if (dv->width == 8) {
    guint64 *v = (guint64 *)(void *)c->v;
    for (guint i = 0; i < DV_CHUNK_IDS; i++) v[i] = DV_MISSING8;
  } else {
    memset(c->v, 0xff, (gsize)DV_CHUNK_IDS * 4); /* DV_MISSING4 */
  }
  atomic_fetch_add(&dv->bytes, need);
  atomic_store_explicit((_Atomic(dvchunk_t *) *)&d->c[ci], c, memory_order_release);
  return c;
}

void ixia_docvals_set(ixia_docvals_t *dv, guint32 id, const void *first, guint n) {
  if (!dv) return;
  guint32 ci = id >> DV_CHUNK_BITS, slot = id & (DV_CHUNK_IDS - 1);
  dvchunk_t *c;
  if (n == 0) {
    /* No value: nothing to do in a chunk never allocated. */
    dvdir_t *d = atomic_load(&dv->dir);
    c = ci < d->n ? d->c[ci] : NULL;
    if (!c || c == DV_DENIED) return;
  } else {
    c = chunk_for_write(dv, ci);
    if (!c) return;
  }
  guint b = slot >> BLOCK_BITS;
  gboolean wide = dv->width == 8;
  guint64 nv = wide ? DV_MISSING8 : DV_MISSING4, multi = wide ? DV_MULTI8 : DV_MULTI4;
  if (n > 1) nv = multi;
  else if (n == 1 && wide) memcpy(&nv, first, 8);
  else if (n == 1) {
    guint32 u;
    memcpy(&u, first, 4);
    nv = u;
  }
  guint64 *v8 = (guint64 *)(void *)c->v;
  guint32 *v4 = (guint32 *)(void *)c->v;
  guint64 old = wide ? v8[slot] : v4[slot];
  gboolean was = old == multi, now = nv == multi;
  /* A reader of the block must not act on a multi slot it was not told
   * of: count and flip before the slot turns multi, uncount and flip after
   * it stops; a reader that saw no count re-reads flips after its check. */
  if (now && !was) {
    atomic_fetch_add(&dv->multi, 1);
    atomic_fetch_add(&c->multi[b], 1);
    atomic_fetch_add(&c->flips[b], 1);
  }
  if (wide) __atomic_store_n(&v8[slot], nv, __ATOMIC_RELEASE);
  else __atomic_store_n(&v4[slot], (guint32)nv, __ATOMIC_RELEASE);
  if (was && !now) {
    atomic_fetch_sub(&c->multi[b], 1);
    atomic_fetch_add(&c->flips[b], 1);
    atomic_fetch_sub(&dv->multi, 1);
  }
}

gboolean ixia_docvals_single(const ixia_docvals_t *dv) {
  return dv && !atomic_load(&((ixia_docvals_t *)dv)->denied) && atomic_load(&((ixia_docvals_t *)dv)->multi) == 0;
}

static const dvchunk_t *chunk_for_read(const ixia_docvals_t *dv, guint32 ci) {
  const dvdir_t *d = atomic_load_explicit(&((ixia_docvals_t *)dv)->dir, memory_order_acquire);
  if (ci >= d->n) return NULL;
  const dvchunk_t *c = atomic_load_explicit((_Atomic(dvchunk_t *) *)&d->c[ci], memory_order_acquire);
  return c == DV_DENIED ? NULL : c;
}

const void *ixia_docvals_block(const ixia_docvals_t *dv, guint32 block, gboolean *none,
                               guint32 *flips) {
  *none = FALSE;
  *flips = 0;
  if (!dv) return NULL;
  guint32 ci = block >> (DV_CHUNK_BITS - BLOCK_BITS);
  const dvdir_t *d = atomic_load_explicit(&((ixia_docvals_t *)dv)->dir, memory_order_acquire);
  if (ci >= d->n || !d->c[ci]) {
    /* Never allocated: no document of the chunk holds a value. */
    *none = TRUE;
    return NULL;
  }
  const dvchunk_t *c = chunk_for_read(dv, ci);
  if (!c) return NULL;
  guint b = block & (DV_BLOCKS - 1);
  *flips = atomic_load_explicit(&((dvchunk_t *)c)->flips[b], memory_order_acquire);
  if (atomic_load_explicit(&((dvchunk_t *)c)->multi[b], memory_order_acquire)) return NULL;
  return c->v + (gsize)b * BLOCK_SLOTS * dv->width;
}

gboolean ixia_docvals_block_same(const ixia_docvals_t *dv, guint32 block, guint32 flips) {
  const dvchunk_t *c = chunk_for_read(dv, block >> (DV_CHUNK_BITS - BLOCK_BITS));
  atomic_thread_fence(memory_order_acquire); /* the slots were read before this */
  return c && atomic_load_explicit(&((dvchunk_t *)c)->flips[block & (DV_BLOCKS - 1)],
                                   memory_order_acquire) == flips;
}

gboolean ixia_docvals_get(const ixia_docvals_t *dv, guint32 id, guint64 *v) {
  if (!dv) return FALSE;
  guint32 ci = id >> DV_CHUNK_BITS, slot = id & (DV_CHUNK_IDS - 1);
  const dvdir_t *d = atomic_load_explicit(&((ixia_docvals_t *)dv)->dir, memory_order_acquire);
  if (ci >= d->n || !d->c[ci]) {
    *v = dv->width == 8 ? DV_MISSING8 : DV_MISSING4;
    return TRUE;
  }
  const dvchunk_t *c = chunk_for_read(dv, ci);
  if (!c) return FALSE;
  if (dv->width == 8) {
    *v = __atomic_load_n(&((const guint64 *)(const void *)c->v)[slot], __ATOMIC_RELAXED);
    return *v != DV_MULTI8;
  }
  guint32 u = __atomic_load_n(&((const guint32 *)(const void *)c->v)[slot], __ATOMIC_RELAXED);
  *v = u;
  return u != DV_MULTI4;
}

const void *ixia_docvals_prefetch_addr(const ixia_docvals_t *dv, guint32 id) {
  if (!dv) return NULL;
  const dvchunk_t *c = chunk_for_read(dv, id >> DV_CHUNK_BITS);
  return c ? c->v + (gsize)(id & (DV_CHUNK_IDS - 1)) * dv->width : NULL;
}

gsize ixia_docvals_bytes(ixia_docvals_t *dv) { return dv ? atomic_load(&dv->bytes) : 0; }
