/* The range index of a numeric field: every (value, document id) point of
 * the field, sorted, in leaves of at most LEAF_CAP points (Lucene's BKD
 * tree in one dimension, in memory).
 *
 * Why this and not multi-precision terms or a bit-sliced index: a range
 * costs two binary searches plus the points it selects, whatever the
 * distribution of the values (prices, timestamps a few days apart, ids),
 * and counting a range (the planner's estimate) reads only leaf sizes. The
 * alternatives were measured on the same data (docs/INDEX-FORMAT.md): 4-bit
 * multi-precision postings add ~16 posting updates per numeric value to
 * every apply, and a bit-sliced index needs 64 bitmap operations per range
 * over the whole shard. Points live only in memory (12 bytes each) and are
 * rebuilt at open from the column blocks, which hold the same values; they
 * add no write to an apply.
 *
 * Thread safety: one writer (the apply thread) and many readers, through a
 * writer-preferring rwlock so a stream of searches cannot starve apply. */
#include <stdlib.h>
#include <string.h>

#include "idx.h"

#define LEAF_CAP 512

typedef struct {
  guint n;
  guint64 key[LEAF_CAP];
  guint32 id[LEAF_CAP];
} leaf_t;

/* Each leaf's first point and size, side by side in one array: finding a
 * leaf and counting a range read these instead of a cache line of every
 * leaf (summing the sizes of a half-the-shard range leaf by leaf was a
 * fifth of the shard's CPU under the 50% price filter). */
typedef struct {
  guint64 key;
  guint32 id, n;
} head_t;

struct ixia_points {
  pthread_rwlock_t lock;
  GPtrArray *leaves; /* leaf_t*, in order; never empty leaves */
  GArray *heads;     /* head_t of each leaf, same order */
  guint64 size;
};

static inline int pt_cmp(guint64 ka, guint32 ia, guint64 kb, guint32 ib) {
  if (ka != kb) return ka < kb ? -1 : 1;
  return ia < ib ? -1 : ia > ib;
}

ixia_points_t *ixia_points_new(void) {
  ixia_points_t *p = g_new0(ixia_points_t, 1);
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&p->lock, &attr);
  pthread_rwlockattr_destroy(&attr);
  p->leaves = g_ptr_array_new_with_free_func(g_free);
  p->heads = g_array_new(FALSE, FALSE, sizeof(head_t));
  return p;
}

void ixia_points_destroy(ixia_points_t *p) {
  if (!p) return;
  g_ptr_array_free(p->leaves, TRUE);
  g_array_free(p->heads, TRUE);
  pthread_rwlock_destroy(&p->lock);
  g_free(p);
}

/* Leaf li's head again after its points changed. */
static void head_sync(ixia_points_t *p, guint li) {
  const leaf_t *l = p->leaves->pdata[li];
  head_t *h = &g_array_index(p->heads, head_t, li);
  h->n = l->n;
  h->key = l->n ? l->key[0] : 0;
  h->id = l->n ? l->id[0] : 0;
}

/* A head for leaf li, just inserted into the leaves. */
static void head_insert(ixia_points_t *p, guint li) {
  head_t h = {0, 0, 0};
  g_array_insert_val(p->heads, li, h);
  head_sync(p, li);
}

void ixia_points_load(ixia_points_t *p, const guint64 *keys, const guint32 *ids, gsize n) {
  pthread_rwlock_wrlock(&p->lock);
  g_ptr_array_set_size(p->leaves, 0);
  g_array_set_size(p->heads, 0);
  /* Leaves three quarters full leave room for inserts without splits. */
  const guint fill = LEAF_CAP * 3 / 4;
  for (gsize i = 0; i < n;) {
    leaf_t *l = g_new(leaf_t, 1);
    l->n = (guint)MIN((gsize)fill, n - i);
    memcpy(l->key, keys + i, l->n * sizeof(guint64));
    memcpy(l->id, ids + i, l->n * sizeof(guint32));
    g_ptr_array_add(p->leaves, l);
    head_insert(p, p->leaves->len - 1);
    i += l->n;
  }
  p->size = n;
  pthread_rwlock_unlock(&p->lock);
}

/* The leaf that holds (or would hold) a point: the last leaf whose first
 * point is <= it, or leaf 0. */
static guint leaf_of(const ixia_points_t *p, guint64 key, guint32 id) {
  const head_t *h = (const head_t *)(const void *)p->heads->data;
  guint lo = 0, hi = p->heads->len;
  while (hi - lo > 1) {
    guint mid = lo + (hi - lo) / 2;
    if (pt_cmp(h[mid].key, h[mid].id, key, id) <= 0) lo = mid;
    else hi = mid;
  }
  return lo;
}

/* First position in l not below (key, id). */
static guint lower_in(const leaf_t *l, guint64 key, guint32 id) {
  guint lo = 0, hi = l->n;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (pt_cmp(l->key[mid], l->id[mid], key, id) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void insert(ixia_points_t *p, guint64 key, guint32 id) {
  if (p->leaves->len == 0) {
    g_ptr_array_add(p->leaves, g_new0(leaf_t, 1));
    head_insert(p, 0);
  }
  guint li = leaf_of(p, key, id);
  leaf_t *l = p->leaves->pdata[li];
  guint at = lower_in(l, key, id);
  if (at < l->n && l->key[at] == key && l->id[at] == id) return; /* present */
  if (l->n == LEAF_CAP) {
    leaf_t *r = g_new(leaf_t, 1);
    guint half = LEAF_CAP / 2;
    r->n = l->n - half;
    memcpy(r->key, l->key + half, r->n * sizeof(guint64));
    memcpy(r->id, l->id + half, r->n * sizeof(guint32));
    l->n = half;
    g_ptr_array_insert(p->leaves, (gint)li + 1, r);
    head_insert(p, li + 1);
    head_sync(p, li);
    if (at > half) {
      l = r;
      at -= half;
      li++;
    }
  }
  memmove(l->key + at + 1, l->key + at, (l->n - at) * sizeof(guint64));
  memmove(l->id + at + 1, l->id + at, (l->n - at) * sizeof(guint32));
  l->key[at] = key;
  l->id[at] = id;
  l->n++;
  p->size++;
  head_sync(p, li);
}

static void remove_point(ixia_points_t *p, guint64 key, guint32 id) {
  if (p->leaves->len == 0) return;
  guint li = leaf_of(p, key, id);
  leaf_t *l = p->leaves->pdata[li];
  guint at = lower_in(l, key, id);
  if (at >= l->n || l->key[at] != key || l->id[at] != id) return;
  memmove(l->key + at, l->key + at + 1, (l->n - at - 1) * sizeof(guint64));
  memmove(l->id + at, l->id + at + 1, (l->n - at - 1) * sizeof(guint32));
  l->n--;
  p->size--;
  if (l->n == 0) {
    g_ptr_array_remove_index(p->leaves, li);
    g_array_remove_index(p->heads, li);
  } else {
    head_sync(p, li);
  }
}

void ixia_points_update(ixia_points_t *p, const ixia_point_change_t *ch, guint n) {
  if (n == 0) return;
  pthread_rwlock_wrlock(&p->lock);
  /* In order: one batch may add and remove the same point. */
  for (guint i = 0; i < n; i++) {
    if (ch[i].add) insert(p, ch[i].key, ch[i].id);
    else remove_point(p, ch[i].key, ch[i].id);
  }
  pthread_rwlock_unlock(&p->lock);
}

/* Position (leaf, index) of the first point with key >= k. */
static void first_at_least(const ixia_points_t *p, guint64 k, guint *li, guint *at) {
  *li = leaf_of(p, k, 0);
  const leaf_t *l = p->leaves->pdata[*li];
  *at = lower_in(l, k, 0);
  if (*at == l->n) {
    (*li)++;
    *at = 0;
  }
}

/* ixia_points_count with the lock held by the caller. */
static guint64 count_points(const ixia_points_t *p, guint64 lo, guint64 hi) {
  guint64 n = 0;
  if (lo <= hi && p->leaves->len > 0) {
    guint la, ia, lb, ib;
    first_at_least(p, lo, &la, &ia);
    if (hi == G_MAXUINT64) {
      lb = p->leaves->len;
      ib = 0;
    } else {
      first_at_least(p, hi + 1, &lb, &ib);
    }
    /* Points in [a, b): whole leaves between, minus the edges. */
    const head_t *h = (const head_t *)(const void *)p->heads->data;
    for (guint l = la; l < lb && l < p->heads->len; l++) n += h[l].n;
    n -= ia;
    if (lb < p->leaves->len) n += ib;
  }
  return n;
}

guint64 ixia_points_count(ixia_points_t *p, guint64 lo, guint64 hi) {
  if (lo > hi) return 0;
  pthread_rwlock_rdlock(&p->lock);
  guint64 n = count_points(p, lo, hi);
  pthread_rwlock_unlock(&p->lock);
  return n;
}

/* Sorts ids (LSD radix, 11-bit passes with small count arrays): roaring
 * appends sorted ids in place, where unsorted ones cost a search and a
 * move each. Only the passes the largest id needs run: two below 2^22
 * documents (the third, over digits all zero, was a third of the sort of a
 * narrow range's 1,000 ids). */
static void sort_ids(guint32 *a, gsize n) {
  guint32 any = 0;
  for (gsize i = 0; i < n; i++) any |= a[i];
  guint32 *tmp = g_new(guint32, n), *src = a, *dst = tmp;
  for (int shift = 0; shift < 33 && (shift == 0 || any >> shift); shift += 11) {
    gsize count[2049] = {0};
    for (gsize i = 0; i < n; i++) count[((src[i] >> shift) & 2047) + 1]++;
    for (guint b = 0; b < 2048; b++) count[b + 1] += count[b];
    for (gsize i = 0; i < n; i++) dst[count[(src[i] >> shift) & 2047]++] = src[i];
    guint32 *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, n * sizeof *a);
  g_free(tmp);
}

static int u32_cmp(const void *x, const void *y) {
  guint32 a = *(const guint32 *)x, b = *(const guint32 *)y;
  return a < b ? -1 : a > b;
}

/* A search thread's scratch space, kept between searches: a range's ids
 * and a bitset as wide as the id space. Allocating them per search cost
 * page faults and madvise calls (a fifth of the shard's CPU under the
 * term-and-range benchmark). What a very wide range grew is given back. */
typedef struct {
  GArray *ids;
  guint64 *bits; /* all zero between uses */
  gsize words;
} scratch_t;

#define SCRATCH_KEEP_IDS (1u << 22)

static void scratch_free(gpointer data) {
  scratch_t *sc = data;
  if (!sc) return;
  g_array_free(sc->ids, TRUE);
  g_free(sc->bits);
  g_free(sc);
}

static GPrivate scratch_key = G_PRIVATE_INIT(scratch_free);

static scratch_t *scratch(void) {
  scratch_t *sc = g_private_get(&scratch_key);
  if (!sc) {
    sc = g_new0(scratch_t, 1);
    sc->ids = g_array_new(FALSE, FALSE, sizeof(guint32));
    g_private_set(&scratch_key, sc);
  }
  g_array_set_size(sc->ids, 0);
  return sc;
}

static void scratch_done(scratch_t *sc) {
  if (sc->ids->len > SCRATCH_KEEP_IDS) {
    g_array_free(sc->ids, TRUE);
    sc->ids = g_array_new(FALSE, FALSE, sizeof(guint32));
  }
}

/* Calls fn on each leaf's run of the ids of the points with
 * lo <= key <= hi, in key order, under the read lock; returns how many
 * points the range holds. */
typedef void (*run_fn)(const guint32 *ids, guint n, void *ud);

/* each_run with the lock held by the caller. */
static guint64 walk_runs(const ixia_points_t *p, guint64 lo, guint64 hi, run_fn fn, void *ud) {
  guint64 n = 0;
  if (p->leaves->len > 0) {
    guint li, at;
    first_at_least(p, lo, &li, &at);
    for (; li < p->leaves->len; li++, at = 0) {
      const leaf_t *l = p->leaves->pdata[li];
      guint end = l->n;
      gboolean last = l->key[l->n - 1] > hi;
      if (last) {
        end = at;
        while (end < l->n && l->key[end] <= hi) end++;
      }
      if (end > at) fn(l->id + at, end - at, ud);
      n += end - at;
      if (last) break;
    }
  }
  return n;
}

static guint64 each_run(ixia_points_t *p, guint64 lo, guint64 hi, run_fn fn, void *ud) {
  pthread_rwlock_rdlock(&p->lock);
  guint64 n = walk_runs(p, lo, hi, fn, ud);
  pthread_rwlock_unlock(&p->lock);
  return n;
}

static void append_run(const guint32 *ids, guint n, void *ud) { g_array_append_vals(ud, ids, n); }

/* Appends to ids the ids of the points with lo <= key <= hi, in key order. */
static GArray *gather(ixia_points_t *p, guint64 lo, guint64 hi, GArray *ids) {
  each_run(p, lo, hi, append_run, ids);
  return ids;
}

guint64 ixia_points_collect(ixia_points_t *p, guint64 lo, guint64 hi, roaring_bitmap_t *out) {
  if (lo > hi) return 0;
  scratch_t *sc = scratch();
  GArray *ids = gather(p, lo, hi, sc->ids);
  guint64 n = ids->len;
  guint32 *a = (guint32 *)(void *)ids->data;
  if (n > 256) sort_ids(a, n);
  else if (n > 1) qsort(a, n, sizeof *a, u32_cmp);
  ixia_idx_bm_add_sorted(out, a, n);
  scratch_done(sc);
  return n;
}

typedef struct {
  guint64 *bits;
  guint32 top;
} marks_t;

static void mark_run(const guint32 *ids, guint n, void *ud) {
  marks_t *m = ud;
  for (guint i = 0; i < n; i++)
    if (ids[i] <= m->top) m->bits[ids[i] >> 6] |= G_GUINT64_CONSTANT(1) << (ids[i] & 63);
}

typedef struct {
  const guint64 *bits;
  guint32 top;
  guint32 *hits; /* room for every point of the range */
  gsize n;
} probe_t;

#ifdef HAVE_AVX2_PATH
/* probe_run on a CPU with AVX2: eight probes a step, their words gathered
 * four at a time. The scalar loop spent ~1 ns a probe, a third of the
 * shard's CPU under category = X AND a 4% price range (20k candidates
 * probed by 40k points); the gathers take about half of that. Ids are
 * clamped to top + 1 as in the scalar loop, so top must be below
 * G_MAXUINT32 (the caller checks). Returns where it stopped. */
__attribute__((target("avx2"))) static guint probe_avx2(const guint32 *ids, guint n, probe_t *pr) {
  const long long *bits = (const long long *)(const void *)pr->bits;
  const __m128i top1 = _mm_set1_epi32((int)(pr->top + 1)), low6 = _mm_set1_epi32(63);
  guint i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i a = _mm_min_epu32(_mm_loadu_si128((const __m128i *)(const void *)(ids + i)), top1);
    __m128i b = _mm_min_epu32(_mm_loadu_si128((const __m128i *)(const void *)(ids + i + 4)), top1);
    __m256i wa = _mm256_i32gather_epi64(bits, _mm_srli_epi32(a, 6), 8);
    __m256i wb = _mm256_i32gather_epi64(bits, _mm_srli_epi32(b, 6), 8);
    /* Each id's bit moved to the sign bit, where movemask finds it. */
    wa = _mm256_sllv_epi64(wa, _mm256_cvtepu32_epi64(_mm_andnot_si128(a, low6)));
    wb = _mm256_sllv_epi64(wb, _mm256_cvtepu32_epi64(_mm_andnot_si128(b, low6)));
    guint hit = (guint)_mm256_movemask_pd(_mm256_castsi256_pd(wa)) |
                (guint)_mm256_movemask_pd(_mm256_castsi256_pd(wb)) << 4;
    for (; hit; hit &= hit - 1) pr->hits[pr->n++] = ids[i + (guint)__builtin_ctz(hit)];
  }
  return i;
}
#endif

/* 64 probes into one word of hit flags, then the hits: the loads do not
 * wait on each other (appending as each one landed made every probe wait
 * for the one before). An id past the candidates probes bit top + 1, which
 * no candidate sets. */
static void probe_run(const guint32 *ids, guint n, void *ud) {
  probe_t *pr = ud;
  const guint64 *bits = pr->bits;
  guint64 top1 = (guint64)pr->top + 1;
  guint i = 0;
#ifdef HAVE_AVX2_PATH
  if (n >= 8 && pr->top < G_MAXUINT32 && __builtin_cpu_supports("avx2")) i = probe_avx2(ids, n, pr);
#endif
  for (; i < n; i += 64) {
    guint m = MIN(64, n - i);
    guint64 hit = 0;
    for (guint j = 0; j < m; j++) {
      guint64 id = ids[i + j], b = id < top1 ? id : top1;
      hit |= ((bits[b >> 6] >> (b & 63)) & 1) << j;
    }
    for (; hit; hit &= hit - 1) pr->hits[pr->n++] = ids[i + (guint)__builtin_ctzll(hit)];
  }
}

/* Candidates fewer than the range's points: the candidates mark the
 * bitset (a container at a time) and each point of the range probes it,
 * a load where a mark is a read-modify-write. The points that hit come in
 * value order, so they are sorted (and a document with two values in the
 * range comes twice, which the bitmap absorbs). */
static guint64 filter_by_points(ixia_points_t *p, guint64 lo, guint64 hi, roaring_bitmap_t *cand,
                                guint64 *bits, guint32 top, scratch_t *sc) {
  ixia_idx_bm_mark(cand, bits, TRUE);
  /* Room for every point of the range, counted under the walk's lock. */
  pthread_rwlock_rdlock(&p->lock);
  g_array_set_size(sc->ids, (guint)count_points(p, lo, hi));
  probe_t pr = {bits, top, (guint32 *)(void *)sc->ids->data, 0};
  guint64 n = walk_runs(p, lo, hi, probe_run, &pr);
  pthread_rwlock_unlock(&p->lock);
  ixia_idx_bm_mark(cand, bits, FALSE);
  guint32 *h = pr.hits;
  if (pr.n > 256) sort_ids(h, pr.n);
  else if (pr.n > 1) qsort(h, pr.n, sizeof *h, u32_cmp);
  roaring_bitmap_clear(cand);
  ixia_idx_bm_add_sorted(cand, h, pr.n);
  scratch_done(sc);
  return n;
}

guint64 ixia_points_filter(ixia_points_t *p, guint64 lo, guint64 hi, roaring_bitmap_t *cand) {
  if (lo > hi || roaring_bitmap_is_empty(cand)) {
    roaring_bitmap_clear(cand);
    return 0;
  }
  scratch_t *sc = scratch();
  /* A bitset as wide as the candidates' id space: whole containers of
   * 65,536 ids (ixia_idx_bm_mark), and a word more for bit top + 1, which
   * probes past top read. */
  guint32 top = roaring_bitmap_maximum(cand);
  gsize words = (((gsize)(top >> 16) + 1) << 10) + 1;
  if (sc->words < words) {
    g_free(sc->bits);
    sc->words = MAX(words, 2 * sc->words);
    sc->bits = g_new0(guint64, sc->words);
  }
  guint64 *bits = sc->bits;
  guint64 in_range = ixia_points_count(p, lo, hi);
  if (roaring_bitmap_get_cardinality(cand) < in_range)
    return filter_by_points(p, lo, hi, cand, bits, top, sc);
  /* Otherwise the range's ids mark the bitset and each candidate probes
   * one bit. A range that marks a good part of the words is marked in place
   * and the bitset cleared whole afterwards; a smaller one is copied out so
   * that exactly its words are cleared (the points may change in between). */
  gboolean dense = in_range >= ((gsize)(top >> 6) + 1) / 4;
  guint64 n;
  const guint32 *a = NULL;
  marks_t m = {bits, top};
  if (dense) {
    n = each_run(p, lo, hi, mark_run, &m);
  } else {
    GArray *ids = gather(p, lo, hi, sc->ids);
    n = ids->len;
    a = (const guint32 *)(void *)ids->data;
    mark_run(a, (guint)n, &m);
  }
  guint64 nc = roaring_bitmap_get_cardinality(cand);
  guint32 *c = g_new(guint32, MAX(nc, 1));
  roaring_bitmap_to_uint32_array(cand, c);
  guint64 kept = 0;
  for (guint64 i = 0; i < nc; i++) {
    guint32 id = c[i];
    c[kept] = id;
    kept += bits[id >> 6] >> (id & 63) & 1;
  }
  roaring_bitmap_clear(cand);
  ixia_idx_bm_add_sorted(cand, c, kept);
  g_free(c);
  if (dense) {
    memset(bits, 0, words * sizeof *bits);
  } else {
    for (guint64 i = 0; i < n; i++)
      if (a[i] <= top) bits[a[i] >> 6] = 0;
  }
  scratch_done(sc);
  return n;
}

guint ixia_points_next(ixia_points_t *p, gboolean desc, guint64 key, guint32 id, gboolean inclusive,
                       guint64 *keys, guint32 *ids, guint max) {
  guint n = 0;
  pthread_rwlock_rdlock(&p->lock);
  if (p->leaves->len > 0) {
    guint li = leaf_of(p, key, id);
    const leaf_t *l = p->leaves->pdata[li];
    gint64 at = lower_in(l, key, id); /* first point >= (key, id) in leaf li */
    gboolean equal = at < l->n && l->key[at] == key && l->id[at] == id;
    if (!desc) {
      if (equal && !inclusive) at++;
      for (; li < p->leaves->len && n < max; li++, at = 0) {
        l = p->leaves->pdata[li];
        for (; at < l->n && n < max; at++, n++) keys[n] = l->key[at], ids[n] = l->id[at];
      }
    } else {
      if (!(equal && inclusive)) at--;
      for (;;) {
        for (; at >= 0 && n < max; at--, n++) keys[n] = l->key[at], ids[n] = l->id[at];
        if (n >= max || li == 0) break;
        l = p->leaves->pdata[--li];
        at = (gint64)l->n - 1;
      }
    }
  }
  pthread_rwlock_unlock(&p->lock);
  return n;
}

guint64 ixia_points_size(ixia_points_t *p) {
  pthread_rwlock_rdlock(&p->lock);
  guint64 n = p->size;
  pthread_rwlock_unlock(&p->lock);
  return n;
}

gsize ixia_points_bytes(ixia_points_t *p) {
  pthread_rwlock_rdlock(&p->lock);
  gsize n = p->leaves->len * (sizeof(leaf_t) + sizeof(head_t));
  pthread_rwlock_unlock(&p->lock);
  return n;
}
