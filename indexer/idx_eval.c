/* Running a search: the candidates of the plan walked block by block.
 *
 * A block is 1,024 consecutive document ids, the unit of the column store:
 * for each block with candidates the search takes their bits as a 16-word
 * mask, narrows it with the plan's per-candidate checks (idx_plan.c), then
 * counts the survivors, takes hits after the cursor and hands the mask to
 * the aggregations. Masks are read straight out of the roaring bitmap's
 * containers (a bitset container is 64 such masks already), so walking a
 * set costs per block, not per id.
 *
 * Early termination: with no aggregation, the walk stops once the page is
 * full and the total has reached the query's track_total_hits; the total is
 * then a lower bound ("total_relation": "gte"). When nothing is left to
 * check the total is the candidates' cardinality, exact at no cost, and
 * the walk starts at the cursor.
 *
 * A page (no sort, no aggregation) of a union of postings (an "in" or a
 * prefix over many values) is not materialized: the walk ORs each chunk of
 * 65,536 ids from the postings when it reaches it (unionit_t), so a page
 * that fills early reads a few chunks.
 *
 * Sparse candidates (a selective lead and a check on a wide clause, like
 * brand = X AND a 50% price range: 500 candidates over 1,000 blocks) are
 * not walked block by block: a block holding one candidate cost a lookup
 * of its doc values block and a cache miss on the slot, one after the
 * other (ixia_idx_check_block was 27% of the shard under brand-wide). The
 * candidates are read as ids a chunk at a time and checked together
 * (ixia_idx_check_ids prefetches the slots of a chunk's column checks
 * first), with the block walk's counting, cursor and early stop decided at
 * the same block boundaries, so totals and their relation are the same.
 *
 * Hits are resolved to key and version with one multi-get of their id
 * records. */
#include <stdatomic.h>
#include <string.h>

#include "idx.h"
#include "json.h"
#include "testhook.h"

/* ------------------------------------------------ roaring, block by block */

/* CRoaring 0.2.66's container layouts (roaring/containers/), mirrored
 * here rather than included: those headers define inline functions that do
 * not build cleanly with -Werror. */
G_STATIC_ASSERT(ROARING_VERSION_MAJOR == 0 && ROARING_VERSION_MINOR == 2);
#define RB_BITSET 1
#define RB_ARRAY 2
#define RB_RUN 3
#define RB_SHARED 4
typedef struct {
  gint32 cardinality;
  guint64 *words;
} rb_bitset_t;
typedef struct {
  gint32 cardinality, capacity;
  guint16 *values;
} rb_array_t;
typedef struct {
  guint16 value, length; /* [value, value + length] */
} rb_rle_t;
typedef struct {
  gint32 n_runs, capacity;
  rb_rle_t *runs;
} rb_run_t;
typedef struct {
  void *container;
  guint8 typecode;
  guint32 counter;
} rb_shared_t;

static const void *container_at(const roaring_bitmap_t *bm, gint32 i, guint8 *type) {
  const roaring_array_t *ra = &bm->high_low_container;
  const void *c = ra->containers[i];
  *type = ra->typecodes[i];
  if (*type == RB_SHARED) {
    const rb_shared_t *sh = c;
    *type = sh->typecode;
    c = sh->container;
  }
  return c;
}

/* First index in a sorted u16 array not below x. */
static gint32 lower16(const guint16 *a, gint32 n, guint32 x) {
  gint32 lo = 0, hi = n;
  while (lo < hi) {
    gint32 mid = (lo + hi) / 2;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Sets bits [from, to) of a block's words, a word at a time: a live set
 * after a load is one run per container, and setting its 1,024 bits one
 * by one cost 40% of a sorted query's CPU. */
static void set_range(guint64 *out, guint32 from, guint32 to) {
  while (from < to) {
    guint32 w = from >> 6, bit = from & 63, n = MIN(to - from, 64 - bit);
    out[w] |= (n == 64 ? ~G_GUINT64_CONSTANT(0) : ((G_GUINT64_CONSTANT(1) << n) - 1)) << bit;
    from += n;
  }
}

/* The bits of container c for its sub-block sb (0..63) into out; TRUE when
 * any is set. */
static gboolean container_block(const void *c, guint8 type, guint32 sb, guint64 *out) {
  memset(out, 0, BLOCK_WORDS * sizeof *out);
  guint32 lo = sb << BLOCK_BITS, hi = lo + BLOCK_SLOTS; /* [lo, hi) within the container */
  gboolean any = FALSE;
  if (type == RB_BITSET) {
    const guint64 *w = ((const rb_bitset_t *)c)->words + (lo >> 6);
    for (guint i = 0; i < BLOCK_WORDS; i++) {
      out[i] = w[i];
      any = any || w[i];
    }
  } else if (type == RB_ARRAY) {
    const rb_array_t *a = c;
    for (gint32 i = lower16(a->values, a->cardinality, lo); i < a->cardinality && a->values[i] < hi;
         i++) {
      guint32 r = a->values[i] - lo;
      out[r >> 6] |= G_GUINT64_CONSTANT(1) << (r & 63);
      any = TRUE;
    }
  } else if (type == RB_RUN) {
    const rb_run_t *r = c;
    for (gint32 i = 0; i < r->n_runs; i++) {
      guint32 s = r->runs[i].value, e = s + r->runs[i].length + 1; /* [s, e) */
      if (e <= lo) continue;
      if (s >= hi) break;
      set_range(out, MAX(s, lo) - lo, MIN(e, hi) - lo);
      any = TRUE;
    }
  }
  return any;
}

void ixia_idx_bm_block(const roaring_bitmap_t *bm, guint32 block, guint64 *out) {
  const roaring_array_t *ra = &bm->high_low_container;
  guint32 key = block >> 6;
  gint32 lo = 0, hi = ra->size;
  while (lo < hi) {
    gint32 mid = (lo + hi) / 2;
    if (ra->keys[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  if (lo >= ra->size || ra->keys[lo] != key) {
    memset(out, 0, BLOCK_WORDS * sizeof *out);
    return;
  }
  guint8 type;
  const void *c = container_at(bm, lo, &type);
  container_block(c, type, block & 63, out);
}

/* Below this many bits in the mask, asking the bitmap per bit (a binary
 * search in one container) is cheaper than expanding the whole block. */
#define FEW_BITS 8

void ixia_idx_bm_and_block(const roaring_bitmap_t *bm, guint32 block, guint64 *mask) {
  guint n = 0;
  for (guint w = 0; w < BLOCK_WORDS && n < FEW_BITS; w++) n += (guint)__builtin_popcountll(mask[w]);
  if (n < FEW_BITS) {
    for (guint w = 0; w < BLOCK_WORDS; w++)
      for (guint64 m = mask[w]; m; m &= m - 1) {
        guint bit = (guint)__builtin_ctzll(m);
        if (!roaring_bitmap_contains(bm, block << BLOCK_BITS | w << 6 | bit))
          mask[w] &= ~(G_GUINT64_CONSTANT(1) << bit);
      }
    return;
  }
  guint64 bits[BLOCK_WORDS];
  ixia_idx_bm_block(bm, block, bits);
  for (guint w = 0; w < BLOCK_WORDS; w++) mask[w] &= bits[w];
}

/* Walks the non-empty blocks of a bitmap in order. */
typedef struct {
  const roaring_bitmap_t *bm;
  gint32 ci;    /* container */
  guint32 next; /* lowest block still to return */
} blkit_t;

/* The next non-empty block at or after it->next. */
static gboolean blkit_next(blkit_t *it, guint32 *block, guint64 *mask) {
  const roaring_array_t *ra = &it->bm->high_low_container;
  for (; it->ci < ra->size; it->ci++) {
    guint32 first = (guint32)ra->keys[it->ci] << 6; /* first block of the container */
    if (it->next > first + 63) continue;
    guint32 sb = it->next > first ? it->next - first : 0;
    guint8 type;
    const void *c = container_at(it->bm, it->ci, &type);
    if (type == RB_ARRAY) {
      /* Jump straight to the block of the next value. */
      const rb_array_t *a = c;
      gint32 i = lower16(a->values, a->cardinality, sb << BLOCK_BITS);
      if (i >= a->cardinality) continue;
      sb = a->values[i] >> BLOCK_BITS;
    }
    for (; sb < 64; sb++) {
      if (container_block(c, type, sb, mask)) {
        *block = first + sb;
        it->next = *block + 1;
        return TRUE;
      }
    }
  }
  return FALSE;
}

static guint64 popcount_mask(const guint64 *m) {
  guint64 n = 0;
  for (guint w = 0; w < BLOCK_WORDS; w++) n += (guint64)__builtin_popcountll(m[w]);
  return n;
}

/* The live documents of a union of postings, block by block, built one
 * chunk (65,536 ids, one roaring container per posting) at a time: each
 * posting's container of the chunk is ORed into a 1,024-word bitset, and
 * each block handed out is ANDed with the live set. A page that fills in
 * the first chunks never reads the rest. */
typedef struct {
  const GPtrArray *postings; /* blk_t* */
  const roaring_bitmap_t *live;
  gint32 *ci;      /* per posting: its next container */
  const void **cs; /* per posting: its container of the chunk being built */
  guint8 *ts;      /* and that container's type */
  gint32 live_ci;  /* live's container of the chunk, -1: none */
  guint32 key;     /* the chunk: the high 16 bits of its ids */
  gboolean have;
  guint32 next;    /* lowest block still to return */
  guint64 seen;    /* candidates handed out */
  guint64 words[1024];
} unionit_t;

/* Containers whose values are prefetched ahead of the one being ORed. */
#define PREFETCH_AHEAD 8

/* ORs container c into a chunk's bitset. */
static void chunk_or(const void *c, guint8 type, guint64 *words) {
  if (type == RB_BITSET) {
    const guint64 *w = ((const rb_bitset_t *)c)->words;
    for (guint i = 0; i < 1024; i++) words[i] |= w[i];
  } else if (type == RB_ARRAY) {
    const rb_array_t *a = c;
    for (gint32 i = 0; i < a->cardinality; i++)
      words[a->values[i] >> 6] |= G_GUINT64_CONSTANT(1) << (a->values[i] & 63);
  } else if (type == RB_RUN) {
    const rb_run_t *r = c;
    for (gint32 i = 0; i < r->n_runs; i++)
      set_range(words, r->runs[i].value, (guint32)r->runs[i].value + r->runs[i].length + 1);
  }
}

/* A thread's buffer for ixia_idx_bm_add_sorted, kept between calls (a
 * wide range's buffer is over malloc's mmap threshold: allocating it per
 * call cost page faults); what a very wide one grew is given back. */
#define BUILD_KEEP_BYTES (1u << 22)

static void build_buf_free(gpointer b) {
  if (b) g_byte_array_unref(b);
}

static GPrivate build_buf_key = G_PRIVATE_INIT(build_buf_free);

static GByteArray *build_buf(void) {
  GByteArray *b = g_private_get(&build_buf_key);
  if (!b) {
    b = g_byte_array_new();
    g_private_set(&build_buf_key, b);
  }
  return b;
}

/* The portable format's parts (CRoaring's format spec, without runs). */
#define PORTABLE_COOKIE 12346u
#define ARRAY_MAX 4096u

static void put_le16(guint8 *p, guint16 v) {
  p[0] = (guint8)v;
  p[1] = (guint8)(v >> 8);
}

static void put_le32(guint8 *p, guint32 v) {
  for (int i = 0; i < 4; i++) p[i] = (guint8)(v >> (8 * i));
}

void ixia_idx_bm_add_sorted(roaring_bitmap_t *bm, const guint32 *ids, gsize n) {
  if (n == 0) return;
  /* Pass 1: each container's key and distinct values, in the descriptive
   * header (4 bytes a container) grown as containers appear. */
  GByteArray *buf = build_buf();
  g_byte_array_set_size(buf, 8);
  guint32 nc = 0;
  gsize body = 0;
  for (gsize i = 0; i < n;) {
    guint32 key = ids[i] >> 16, card = 0;
    gsize j = i;
    for (guint32 prev = 0; j < n && ids[j] >> 16 == key; j++) {
      card += j == i || ids[j] != prev;
      prev = ids[j];
    }
    g_byte_array_set_size(buf, buf->len + 4);
    put_le16(buf->data + buf->len - 4, (guint16)key);
    put_le16(buf->data + buf->len - 2, (guint16)(card - 1));
    body += card <= ARRAY_MAX ? 2 * (gsize)card : 8192;
    nc++;
    i = j;
  }
  gsize offsets = buf->len, start = offsets + 4 * (gsize)nc;
  g_byte_array_set_size(buf, (guint)(start + body));
  guint8 *d = buf->data;
  put_le32(d, PORTABLE_COOKIE);
  put_le32(d + 4, nc);
  /* Pass 2: the offsets and the containers (a sorted u16 array, or a
   * bitset of 1,024 little-endian words past 4,096 values). */
  gsize at = start, i = 0;
  for (guint32 c = 0; c < nc; c++) {
    guint32 card = (guint32)(d[8 + 4 * c + 2] | d[8 + 4 * c + 3] << 8) + 1;
    put_le32(d + offsets + 4 * c, (guint32)at);
    guint32 key = ids[i] >> 16;
    if (card <= ARRAY_MAX) {
      guint8 *p = d + at;
      for (guint32 prev = 0, k = 0; i < n && ids[i] >> 16 == key; i++) {
        if (k && ids[i] == prev) continue;
        put_le16(p + 2 * k++, (guint16)ids[i]);
        prev = ids[i];
      }
      at += 2 * (gsize)card;
    } else {
      guint64 w[1024] = {0};
      for (; i < n && ids[i] >> 16 == key; i++) w[(ids[i] >> 6) & 1023] |= G_GUINT64_CONSTANT(1) << (ids[i] & 63);
      for (guint k = 0; k < 1024; k++) w[k] = GUINT64_TO_LE(w[k]);
      memcpy(d + at, w, sizeof w);
      at += 8192;
    }
  }
  roaring_bitmap_t *b = roaring_bitmap_portable_deserialize_safe((const char *)d, at);
  if (buf->len > BUILD_KEEP_BYTES) g_private_replace(&build_buf_key, g_byte_array_new());
  if (!b) {
    /* (Cannot happen: the buffer is well formed.) The slow way, still right. */
    roaring_bitmap_add_many(bm, n, ids);
    return;
  }
  if (roaring_bitmap_is_empty(bm)) {
    /* The built containers move into bm, whose empty ones b takes away. */
    roaring_bitmap_set_copy_on_write(b, roaring_bitmap_get_copy_on_write(bm));
    roaring_bitmap_t t = *bm;
    *bm = *b;
    *b = t;
  } else {
    roaring_bitmap_or_inplace(bm, b);
  }
  roaring_bitmap_free(b);
}

void ixia_idx_bm_mark(const roaring_bitmap_t *bm, guint64 *bits, gboolean set) {
  const roaring_array_t *ra = &bm->high_low_container;
  for (gint32 i = 0; i < ra->size; i++) {
    guint64 *out = bits + ((gsize)ra->keys[i] << 10); /* 65,536 bits a container */
    if (!set) {
      memset(out, 0, 1024 * sizeof *out);
      continue;
    }
    guint8 type;
    const void *c = container_at(bm, i, &type);
    chunk_or(c, type, out);
  }
}

/* Builds the first chunk at or after block it->next holding a posting's
 * container; FALSE when none is left. */
static gboolean unionit_chunk(unionit_t *it) {
  guint32 from = it->next >> 6; /* chunks below it are done */
  guint32 key = G_MAXUINT32;
  for (guint i = 0; i < it->postings->len; i++) {
    const roaring_array_t *ra = &((const blk_t *)it->postings->pdata[i])->bm->high_low_container;
    while (it->ci[i] < ra->size && ra->keys[it->ci[i]] < from) it->ci[i]++;
    if (it->ci[i] < ra->size) key = MIN(key, ra->keys[it->ci[i]]);
  }
  if (key == G_MAXUINT32) return FALSE;
  memset(it->words, 0, sizeof it->words);
  /* The containers first, each prefetched, then their values, prefetched
   * a few ahead of the OR: a posting's container and values are each a
   * cache miss, and a hundred of them one after another were half of
   * this walk's time. */
  guint n = 0;
  for (guint i = 0; i < it->postings->len; i++) {
    const roaring_bitmap_t *bm = ((const blk_t *)it->postings->pdata[i])->bm;
    if (it->ci[i] >= bm->high_low_container.size || bm->high_low_container.keys[it->ci[i]] != key)
      continue;
    it->cs[n] = container_at(bm, it->ci[i]++, &it->ts[n]);
    __builtin_prefetch(it->cs[n]);
    n++;
  }
  for (guint j = 0; j < n; j++) {
    if (j + PREFETCH_AHEAD < n && it->ts[j + PREFETCH_AHEAD] == RB_ARRAY)
      __builtin_prefetch(((const rb_array_t *)it->cs[j + PREFETCH_AHEAD])->values);
    chunk_or(it->cs[j], it->ts[j], it->words);
  }
  const roaring_array_t *lra = &it->live->high_low_container;
  gint32 lo = 0, hi = lra->size;
  while (lo < hi) {
    gint32 mid = (lo + hi) / 2;
    if (lra->keys[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  it->live_ci = lo < lra->size && lra->keys[lo] == key ? lo : -1;
  it->key = key;
  it->have = TRUE;
  if (it->next < key << 6) it->next = key << 6;
  return TRUE;
}

static gboolean unionit_next(unionit_t *it, guint32 *block, guint64 *mask) {
  for (;;) {
    if (!it->have || it->next >= (it->key + 1) << 6) {
      it->have = FALSE;
      if (!unionit_chunk(it)) return FALSE;
    }
    if (it->live_ci < 0) { /* no live document in the chunk */
      it->next = (it->key + 1) << 6;
      continue;
    }
    guint8 type;
    const void *lc = container_at(it->live, it->live_ci, &type);
    for (guint32 sb = it->next & 63; sb < 64; sb++) {
      const guint64 *w = it->words + sb * BLOCK_WORDS;
      guint64 any = 0;
      for (guint i = 0; i < BLOCK_WORDS; i++) any |= w[i];
      if (!any) continue;
      guint64 live[BLOCK_WORDS];
      container_block(lc, type, sb, live);
      any = 0;
      for (guint i = 0; i < BLOCK_WORDS; i++) any |= mask[i] = w[i] & live[i];
      if (!any) continue;
      *block = it->key << 6 | sb;
      it->next = *block + 1;
      it->seen += popcount_mask(mask);
      return TRUE;
    }
    it->next = (it->key + 1) << 6;
  }
}

/* The candidates' next block: from the union when there is one, else
 * from the lead (or live) set. */
static gboolean cands_next(blkit_t *b, unionit_t *u, guint32 *block, guint64 *mask) {
  return u ? unionit_next(u, block, mask) : blkit_next(b, block, mask);
}

static void cands_skip_to(blkit_t *b, unionit_t *u, guint32 block) {
  if (u) u->next = MAX(u->next, block);
  else b->next = MAX(b->next, block);
}

/* -------------------------------------------------------------- hits */

/* One id record into *h; FALSE with err when it is missing or short. */
static gboolean hit_of(guint32 id, const char *v, size_t vl, ixia_idx_hit_t *h, ixia_error_t **err) {
  if (!v || vl < 12) return ixia_error_set(err, IXIA_EINTERNAL, "document id %u has no id record", id);
  *h = (ixia_idx_hit_t){.key = ixia_memdup0(v + 12, vl - 12),
                        .version = (gint64)ixia_bytes_get64((const guint8 *)v + 4), .id = id};
  return TRUE;
}

/* The ids at positions at[0..n) of ids, read with one batched multi-get
 * (values pinned, not copied), into out[at[i]]. */
static gboolean multi_get_hits(ixia_idx_t *idx, const guint32 *ids, const guint *at, guint n,
                               ixia_idx_hit_t *out, ixia_error_t **err) {
  if (n == 0) return TRUE;
  guint8 *keys = g_new(guint8, (gsize)n * 5);
  const char **kp = g_new(const char *, n);
  size_t *kl = g_new(size_t, n);
  rocksdb_pinnableslice_t **vals = g_new0(rocksdb_pinnableslice_t *, n);
  char **errs = g_new0(char *, n);
  for (guint i = 0; i < n; i++) {
    keys[5 * i] = K_ID;
    ixia_bytes_put32(keys + 5 * i + 1, ids[at[i]]);
    kp[i] = (const char *)keys + 5 * i;
    kl[i] = 5;
  }
  rocksdb_batched_multi_get_cf(idx->db, idx->ropts, idx->cf, n, kp, kl, vals, errs, false);
  gboolean ok = TRUE;
  for (guint i = 0; i < n; i++) {
    size_t vl = 0;
    const char *v = vals[i] ? rocksdb_pinnableslice_value(vals[i], &vl) : NULL;
    if (errs[i]) {
      if (ok) ok = ixia_error_from_rocksdb(err, errs[i], "index read");
      else rocksdb_free(errs[i]);
      errs[i] = NULL;
    } else if (ok) {
      ok = hit_of(ids[at[i]], v, vl, &out[at[i]], err);
    }
    rocksdb_pinnableslice_destroy(vals[i]);
  }
  g_free(keys);
  g_free(kp);
  g_free(kl);
  g_free(vals);
  g_free(errs);
  return ok;
}

/* Resolves ids to keys and versions, in order: from the cached id records
 * of their blocks (idx_cache.c), the rest with one batched multi-get.
 *
 * Passes, so that the cache misses of different hits overlap rather than
 * queue: the blocks are prefetched (ixia_idx_records_prefetch), then
 * looked up and each hit's slot in its block's offsets prefetched, then
 * each block's arena header, then each record is located and prefetched,
 * then the records are read. The hits of a page are mostly each in a
 * block of their own, and reading a record where it was located took two
 * misses in a row (its offset, then its bytes). */
gboolean ixia_idx_resolve_hits(ixia_idx_t *idx, const guint32 *ids, guint n, GArray *hits,
                               ixia_error_t **err) {
  if (n == 0) return TRUE;
  /* Straight into hits (no array of their own to copy from). */
  guint base = hits->len;
  g_array_set_size(hits, base + n);
  ixia_idx_hit_t *out = &g_array_index(hits, ixia_idx_hit_t, base);
  memset(out, 0, n * sizeof *out);
  guint *rest = g_new(guint, n), n_rest = 0;
  const recs_t **rs = g_new0(const recs_t *, n); /* hit i's records, NULL: not cached */
  GPtrArray *held = g_ptr_array_new();           /* blk_t*, one reference each */
  guint32 block = G_MAXUINT32;
  const recs_t *r = NULL;
  gboolean ok = TRUE;
  for (guint i = 0; i < n; i++)
    if (ids[i] >> BLOCK_BITS != block) ixia_idx_records_prefetch(idx, block = ids[i] >> BLOCK_BITS);
  block = G_MAXUINT32;
  for (guint i = 0; ok && i < n; i++) {
    if (ids[i] >> BLOCK_BITS != block) {
      block = ids[i] >> BLOCK_BITS;
      ixia_error_t *e = NULL;
      blk_t *b = ixia_idx_records(idx, block, &e);
      if (e) ok = ixia_error_propagate(err, e);
      if (b) g_ptr_array_add(held, b);
      r = b ? b->recs : NULL;
      if (r) __builtin_prefetch(&r->arena);
    }
    rs[i] = r;
    if (r) {
      guint slot = ids[i] & (BLOCK_SLOTS - 1);
      __builtin_prefetch(&r->off[slot]);
      __builtin_prefetch(&r->len[slot]);
    }
  }
  for (guint i = 0; ok && i < n; i++)
    if (rs[i] && (i == 0 || rs[i] != rs[i - 1])) __builtin_prefetch(rs[i]->arena);
  for (guint i = 0; ok && i < n; i++) {
    guint slot = ids[i] & (BLOCK_SLOTS - 1);
    if (rs[i] && rs[i]->len[slot]) __builtin_prefetch(rs[i]->arena->data + rs[i]->off[slot]);
  }
  for (guint i = 0; ok && i < n; i++) {
    if (!rs[i]) {
      rest[n_rest++] = i;
      continue;
    }
    guint slot = ids[i] & (BLOCK_SLOTS - 1);
    guint32 len = rs[i]->len[slot];
    ok = hit_of(ids[i], len ? (const char *)rs[i]->arena->data + rs[i]->off[slot] : NULL, len, &out[i], err);
  }
  for (guint i = 0; i < held->len; i++) ixia_idx_blk_unref(held->pdata[i]);
  g_ptr_array_free(held, TRUE);
  g_free(rs);
  if (ok) ok = multi_get_hits(idx, ids, rest, n_rest, out, err);
  if (!ok) {
    for (guint i = 0; i < n; i++) g_free(out[i].key);
    g_array_set_size(hits, base);
  }
  g_free(rest);
  return ok;
}

void ixia_idx_hits_clear(GArray *hits) {
  if (!hits) return;
  for (guint i = 0; i < hits->len; i++) {
    ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
    g_free(h->key);
    g_free(h->sort);
  }
  g_array_set_size(hits, 0);
}

/* ------------------------------------------------------------ search */

/* Candidates per block, on average over the blocks the lead spans, below
 * which it is walked as ids (see the top of the file); the most ids checked
 * together, and the first chunk's size when few are wanted. */
#define SPARSE_PER_BLOCK 4
#define SPARSE_CHUNK 512
#define SPARSE_FIRST 32
/* A chunk is completed to the end of its last block: up to a block more. */
#define SPARSE_BUF (SPARSE_CHUNK + BLOCK_SLOTS)

static gboolean lead_is_sparse(const roaring_bitmap_t *lead) {
  guint64 n = roaring_bitmap_get_cardinality(lead);
  if (n == 0) return FALSE;
  guint64 span = ((guint64)roaring_bitmap_maximum(lead) >> BLOCK_BITS) -
                 ((guint64)roaring_bitmap_minimum(lead) >> BLOCK_BITS) + 1;
  return n < span * SPARSE_PER_BLOCK;
}

/* The two decisions a walk takes at the end of each block; the sparse walk
 * and the block walk take them at the same points, so their totals and the
 * totals' relation agree. Stop: the page is full and the total good enough
 * (counted: exact from the start). */
static gboolean walk_done(guint hits, guint limit, gboolean counted, guint64 total, guint64 track) {
  return hits >= limit && (counted || total >= track);
}

/* Skip: past the total to track with no hit taken yet, the blocks before
 * the cursor's are not read. The block to go on from, or 0: no skip. */
static guint32 walk_skip_to(guint64 total, guint64 track, guint hits, gint64 after, guint32 next_block) {
  guint32 cursor_block = (guint32)((after + 1) >> BLOCK_BITS);
  return total >= track && after >= 0 && hits == 0 && next_block < cursor_block ? cursor_block : 0;
}

typedef struct {
  guint64 total, blocks;
  gboolean exact;
} sparse_out_t;

/* The block walk's loop for sparse candidates, with its results: chunks of
 * ids end at block boundaries, and the block walk's decisions (stop once the
 * page is full and the total has reached track_total_hits, the total then a
 * lower bound when any candidate is left; skip to the cursor's block once
 * the total is reached and no hit is taken yet) are made at the end of each
 * block, as it makes them. Chunks grow from what the page and the total
 * need, so an early stop checks (and charges query.max_postings for) few
 * more candidates than the block walk would. */
static gboolean sparse_walk(ixia_idx_search_t *s, const ixia_idx_exec_t *ex, guint limit, gint64 after,
                            guint64 track, GArray *ids, sparse_out_t *out) {
  roaring_uint32_iterator_t it;
  roaring_init_iterator(ex->lead, &it);
  guint32 buf[SPARSE_BUF];
  gboolean pass[SPARSE_BUF];
  guint64 need = MAX((guint64)limit, track);
  guint want = (guint)CLAMP(need, SPARSE_FIRST, SPARSE_CHUNK);
  *out = (sparse_out_t){0, 0, TRUE};
  for (;;) {
    guint n = roaring_read_uint32_iterator(&it, buf, want);
    if (n == 0) return TRUE;
    while (n < SPARSE_BUF && it.has_value && it.current_value >> BLOCK_BITS == buf[n - 1] >> BLOCK_BITS) {
      buf[n++] = it.current_value;
      roaring_advance_uint32_iterator(&it);
    }
    want = MIN(want * 2, SPARSE_CHUNK);
    if (!ixia_idx_deadline(s)) return FALSE;
    if (!ixia_idx_check_ids(s, ex->checks, buf, n, pass)) return FALSE;
    for (guint i = 0; i < n;) {
      guint32 block = buf[i] >> BLOCK_BITS;
      guint j = i;
      for (; j < n && buf[j] >> BLOCK_BITS == block; j++) {
        if (!pass[j]) continue;
        out->total++;
        if (ids->len < limit && (gint64)buf[j] > after) g_array_append_val(ids, buf[j]);
      }
      out->blocks++;
      if (walk_done(ids->len, limit, FALSE, out->total, track)) {
        /* Stop, unless that was the end. */
        if (j < n || it.has_value) out->exact = FALSE;
        return TRUE;
      }
      i = j;
      guint32 skip = walk_skip_to(out->total, track, ids->len, after, block + 1);
      if (skip) {
        out->exact = FALSE;
        while (i < n && buf[i] >> BLOCK_BITS < skip) i++;
        if (i == n && it.has_value && it.current_value >> BLOCK_BITS < skip) {
          /* A cursor at the last id leaves no block at or after its own. */
          if (skip > G_MAXUINT32 >> BLOCK_BITS) return TRUE;
          roaring_move_uint32_iterator_equalorlarger(&it, skip << BLOCK_BITS);
        }
      }
    }
  }
}

/* Whether no batch was published since publish_gen read gen0 (even: none
 * under way then): every read of the index before this call saw one state
 * of it (a seqlock; the fence orders those reads before the re-read). */
static gboolean unpublished_since(ixia_idx_t *idx, guint64 gen0) {
  atomic_thread_fence(memory_order_acquire);
  return gen0 % 2 == 0 && atomic_load(&idx->publish_gen) == gen0;
}

/* One search (ixia_idx_search). page_walk: a page whose total is known may
 * walk the live documents (ixia_idx_plan_lead's page_need); when that walk
 * passes its budget without filling the page, *given_up is set to the
 * blocks it visited and nothing is answered: the caller searches again
 * without the walk, passing them as prior_walk (for explain). */
static gboolean search_run(ixia_idx_t *idx, const ixia_query_t *q, const ixia_idx_search_opts_t *o,
                           const ixia_query_limits_t *lim, GArray *hits, ixia_aggs_t *aggs,
                           ixia_idx_result_t *res, gboolean page_walk, guint64 prior_walk,
                           guint64 *given_up, ixia_error_t **err) {
  memset(res, 0, sizeof *res);
  g_rw_lock_reader_lock(&idx->dict_lock);
  table_t *t = ixia_idx_table_find(idx, q->ns, q->table);
  gboolean has_schema = t && t->schema;
  g_rw_lock_reader_unlock(&idx->dict_lock);
  if (!has_schema)
    return ixia_error_set(err, IXIA_ENOTFOUND, "no schema for table %s.%s in the index", q->ns,
                          q->table);
  gint64 t0 = g_get_monotonic_time();
  guint64 gen0 = atomic_load(&idx->publish_gen);
  ixia_idx_search_t s = {.idx = idx, .table = t, .q = q, .lim = lim,
                         .max_postings = lim ? lim->max_postings : 0,
                         .deadline_us = o->deadline_us, .err = err};
  s.live = ixia_idx_posting(idx, K_LIVE, t->id, LIVE_ALL, err);
  if (!s.live) return FALSE;
  s.n_live = s.live->card;
  /* A negation is exact here only when no document waits for a backfill
   * (idx.h, LIVE_STALE); the query's fields are all declared (parsing
   * against this shard's schema refuses any other). */
  gboolean current = FALSE;
  if (!ixia_query_filter_monotone(q)) {
    blk_t *stale = ixia_idx_posting(idx, K_LIVE, t->id, LIVE_STALE, err);
    if (!stale) {
      ixia_idx_blk_unref(s.live);
      return FALSE;
    }
    current = roaring_bitmap_is_empty(stale->bm);
    ixia_idx_blk_unref(stale);
  }

  pnode_t *plan = ixia_idx_deadline(&s) ? ixia_idx_plan(&s, q->filter) : NULL;
  ixia_idx_exec_t ex = {0};
  gboolean page_only = hits && o->limit > 0 && !aggs && !q->n_sort;
  /* Matches the index's own counts already show to reach the total to
   * track need not be counted: the walk stops once the page is full, the
   * total then the tracked number as a lower bound. The counts are read
   * from one state of the index: the live set taken at the start, postings
   * and points later; a batch published in between (the publish counter
   * moved, or is odd) could make them disagree, and they are then not
   * used. A page's are read before its lead is chosen: with the total
   * known, the lead need only fill the page. */
  guint64 track = q->track_total_hits;
  double known = 0;
  gboolean ok = plan != NULL, lower_read = FALSE;
  if (ok && page_only && track > 0) {
    ok = ixia_idx_plan_lower(&s, plan, (double)track, &known);
    lower_read = TRUE;
  }
  ok = ok && ixia_idx_plan_lead(&s, plan, page_only,
                                page_walk && page_only && known >= (double)track ? o->limit : 0, &ex);
  ixia_idx_agg_t *agg = NULL;
  if (ok && aggs) ok = (agg = ixia_idx_agg_new(&s, aggs)) != NULL;
  const roaring_bitmap_t *set = ex.lead ? ex.lead : s.live->bm;
  /* A sorted page needs every match (idx_sort.c keeps the best). */
  ixia_idx_sort_t *sorter = NULL;
  if (ok && q->n_sort && hits && o->limit > 0) ok = (sorter = ixia_idx_sort_new(&s, o, &ex)) != NULL;
  /* Sorted by a number, without aggregations: the walk only counts, and the
   * page comes from the sort field's points afterwards. */
  gboolean by_points = sorter && !agg && ixia_idx_sort_points_ok(sorter);
  ixia_idx_sort_t *walk_sorter = by_points ? NULL : sorter;
  /* A bounded search that cannot read its page from the points stops here. */
  gboolean gave_up = ixia_idx_sort_gave_up(sorter) || (o->bounded && agg);
  guint limit = hits && !sorter ? o->limit : 0;
  if (ok && !lower_read && !gave_up && !agg && !walk_sorter && track > 0 &&
      !ixia_idx_plan_lower(&s, plan, (double)track, &known))
    ok = FALSE;
  gboolean reached = known >= (double)track && unpublished_since(idx, gen0);
  if (reached) track = 0;
  gint64 after = MAX(o->after_id, -1);
  GArray *ids = g_array_new(FALSE, FALSE, sizeof(guint32));
  /* A union's candidates are counted as the walk reads them. */
  guint64 total = 0, blocks = 0,
          candidates = ex.postings || !set ? 0 : roaring_bitmap_get_cardinality(set);
  gboolean exact = TRUE, counted = FALSE;
  unionit_t *uit = NULL;
  if (ok && ex.postings) {
    uit = g_new0(unionit_t, 1);
    uit->postings = ex.postings;
    uit->live = s.live->bm;
    uit->ci = g_new0(gint32, MAX(ex.postings->len, 1));
    uit->cs = g_new0(const void *, MAX(ex.postings->len, 1));
    uit->ts = g_new0(guint8, MAX(ex.postings->len, 1));
  }
  /* Nothing to check: the candidates are the answer, counted at once
   * (one posting's live documents too; a union's only as it is read). */
  if (ok && ex.checks && ex.checks->len == 0 && (!uit || ex.postings->len == 1)) {
    total = uit ? roaring_bitmap_and_cardinality(((blk_t *)ex.postings->pdata[0])->bm, s.live->bm)
                : candidates;
    counted = TRUE;
  }
  gboolean walked = FALSE;
  /* (The block walk only, for the tests that compare the two.) */
  if (ok && !gave_up && ex.lead && !uit && !agg && !walk_sorter && !counted && ex.checks && ex.checks->len &&
      lead_is_sparse(ex.lead) && !ixia_test_hook("BLOCK_WALK_ONLY", 0)) {
    sparse_out_t so;
    ok = sparse_walk(&s, &ex, limit, after, track, ids, &so);
    total = so.total;
    blocks = so.blocks;
    exact = so.exact;
    walked = TRUE;
  }
  blkit_t it = {set, 0, 0};
  if (ok && counted && !agg && after >= 0)
    cands_skip_to(&it, uit, (guint32)MIN(after + 1, (gint64)G_MAXUINT32) >> BLOCK_BITS);
  guint32 block;
  guint64 mask[BLOCK_WORDS];
  while (ok && !gave_up && set && !walked && cands_next(&it, uit, &block, mask)) {
    if (++blocks % 64 == 0 && !ixia_idx_deadline(&s)) {
      ok = FALSE;
      break;
    }
    for (guint i = 0; ok && i < ex.checks->len; i++)
      ok = ixia_idx_check_block(&s, ex.checks->pdata[i], block, mask);
    if (!ok) break;
    if (!counted) total += popcount_mask(mask);
    for (guint w = 0; ids->len < limit && w < BLOCK_WORDS; w++)
      for (guint64 m = mask[w]; m && ids->len < limit; m &= m - 1) {
        guint32 id = block << BLOCK_BITS | w << 6 | (guint)__builtin_ctzll(m);
        if ((gint64)id > after) g_array_append_val(ids, id);
      }
    if (agg) ok = ixia_idx_agg_block(agg, block, mask);
    if (walk_sorter && ok) ok = ixia_idx_sort_block(walk_sorter, block, mask);
    if (ex.walk_blocks && blocks >= ex.walk_blocks && ids->len < limit) {
      /* The page walk found its matches sparser than estimated: read the
       * index instead (search_run's caller runs it again). */
      *given_up = blocks;
      break;
    }
    if (!agg && !walk_sorter && walk_done(ids->len, limit, counted, total, track)) {
      /* Stop, unless that was the end. */
      guint32 b2;
      guint64 m2[BLOCK_WORDS];
      if (!counted && cands_next(&it, uit, &b2, m2)) exact = FALSE;
      break;
    }
    guint32 skip = agg || counted ? 0
                                  : walk_skip_to(total, track, ids->len, after,
                                                 uit ? uit->next : it.next);
    if (skip) {
      cands_skip_to(&it, uit, skip);
      exact = FALSE;
    }
  }
  if (*given_up) goto done;
  if (uit) {
    candidates = counted ? total : uit->seen;
    ixia_idx_pnode_note(plan, candidates);
  }
  if (ok && agg) ok = ixia_idx_agg_finish(agg);
  gboolean points_used = FALSE;
  if (ok && by_points && !gave_up) ok = ixia_idx_sort_points(sorter, set, &points_used);
  if (ok && sorter && !gave_up) ok = ixia_idx_sort_finish(sorter, set, hits, &res->as_of_epoch, &res->as_of);
  else if (ok && hits && !sorter) ok = ixia_idx_resolve_hits(idx, (const guint32 *)(void *)ids->data, ids->len, hits, err);
  gave_up = gave_up || ixia_idx_sort_gave_up(sorter);
  if (ok && !gave_up && hits && !sorter && q->scoring && hits->len) {
    /* Unsorted hits of a query with match clauses still show their score. */
    ixia_idx_scorer_t *sc = ixia_idx_scorer_new(&s, &ok);
    for (guint i = 0; ok && i < hits->len; i++) {
      ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
      h->score = ixia_idx_score(sc, h->id, &ok);
    }
    ixia_idx_scorer_free(sc);
  }
  if (ok && gave_up) {
    memset(res, 0, sizeof *res);
    res->gave_up = TRUE;
  } else if (ok) {
    res->total = reached && !exact ? MAX(total, q->track_total_hits) : total;
    res->total_exact = exact;
    res->settled = unpublished_since(idx, gen0);
    res->schema_current = current;
    if (o->explain) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddNumberToObject(e, "live", (double)s.n_live);
      cJSON_AddStringToObject(e, "driver", walked        ? "candidates from the index, checked as ids"
                                           : ex.lead       ? "candidates from the index"
                                           : ex.postings ? "union of postings, a chunk at a time"
                                                         : "live documents");
      cJSON_AddNumberToObject(e, "candidates", (double)candidates);
      cJSON_AddNumberToObject(e, "checks", ex.checks ? ex.checks->len : 0);
      cJSON_AddNumberToObject(e, "blocks", (double)blocks);
      cJSON_AddNumberToObject(e, "ids_read", (double)s.postings);
      cJSON_AddBoolToObject(e, "early_stop", !exact);
      if (reached) cJSON_AddNumberToObject(e, "matches_at_least", known);
      if (prior_walk) cJSON_AddNumberToObject(e, "page_walk_given_up_after_blocks", (double)prior_walk);
      if (sorter)
        cJSON_AddStringToObject(e, "sort", points_used ? "points of the first key, in order"
                                                       : "every match, top-k from the columns");
      cJSON_AddNumberToObject(e, "took_ms", (double)(g_get_monotonic_time() - t0) / 1000.0);
      cJSON_AddItemToObject(e, "plan", ixia_idx_plan_explain(plan));
      res->explain = e;
    }
  }
done:
  ixia_idx_agg_free(agg);
  ixia_idx_sort_free(sorter);
  g_array_free(ids, TRUE);
  if (ex.lead) roaring_bitmap_free(ex.lead);
  if (ex.postings) g_ptr_array_free(ex.postings, TRUE);
  if (uit) {
    g_free(uit->ci);
    g_free(uit->cs);
    g_free(uit->ts);
  }
  g_free(uit);
  if (ex.checks) g_ptr_array_free(ex.checks, TRUE);
  ixia_idx_plan_free(plan);
  ixia_idx_search_release(&s);
  ixia_idx_blk_unref(s.live);
  return ok;
}

gboolean ixia_idx_search(ixia_idx_t *idx, const ixia_query_t *q, const ixia_idx_search_opts_t *o,
                         const ixia_query_limits_t *lim, GArray *hits, ixia_aggs_t *aggs,
                         ixia_idx_result_t *res, ixia_error_t **err) {
  guint64 given_up = 0, never = 0;
  gboolean ok = search_run(idx, q, o, lim, hits, aggs, res, TRUE, 0, &given_up, err);
  /* (A walk given up answered nothing: hits untouched, res cleared.) */
  if (ok && given_up) ok = search_run(idx, q, o, lim, hits, aggs, res, FALSE, given_up, &never, err);
  return ok;
}
