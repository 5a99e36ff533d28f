/* Aggregations over column blocks: the shard side of every aggregation.
 *
 * A search hands each block's matching documents as a mask; each
 * aggregation node reads its field's column block (doubles, or dictionary
 * ids) and accumulates into dense arrays indexed by bucket, the way column
 * engines group by small integer keys (ClickHouse): a terms node over a
 * keyword field maps a value id straight to its bucket through an array,
 * other keys (numbers, nested buckets) through a small open-addressing
 * table. Metrics keep per bucket a count, an exact sum (ixia_xsum_t, so
 * the order of blocks changes nothing), extremes, the values of
 * percentiles, and the distinct values of cardinality (value ids in a
 * bitmap, numbers in a set). The common shape, a terms node with count,
 * sum, avg, min and max under it, takes one fused pass per block (below),
 * which keeps what it adds to a bucket in one cache line (fcell_t: the
 * count, an integer window in front of the exact sum, the extremes),
 * folded into the nodes' arrays when the search finishes.
 *
 * Only at the end does the state meet the query library: one summary per
 * node and bucket is merged into the ixia_aggs_t (ixia_aggs_cell_merge),
 * whose partial the shard sends; values are turned back into their bytes
 * there, once per bucket rather than once per document.
 *
 * Limits: query.max_terms_buckets per terms node and parent bucket, and
 * query.max_memory_mb for what the dense state holds. */
#include <math.h>
#include <string.h>

#include "idx.h"
#include "testhook.h"

typedef struct {
  guint16 slot;
  guint32 pb; /* the parent's bucket */
} apair_t;

/* Open-addressing map (parent bucket, key) -> bucket of one terms node. */
typedef struct {
  guint32 *slots; /* bucket + 1; 0 = empty */
  guint32 cap;
} bmap_t;

/* What the fused pass (below) adds for one bucket of a SUM/AVG lane, with
 * its fused MIN and MAX, in one cache line instead of six arrays of the
 * nodes (count, sum, the MIN's and the MAX's counts and extremes, and with
 * one lane the terms bucket's document count): folded into those by
 * cells_fold before anything reads them. */
typedef struct {
  ixia_xwin_t win; /* in front of the node's ixia_xsum_t for the bucket */
  guint64 n;
  double min, max; /* set when n > 0 */
  guint64 docs;    /* the parent terms bucket's documents (the one-lane pass) */
} __attribute__((aligned(64))) fcell_t;
G_STATIC_ASSERT(sizeof(fcell_t) == 64);

typedef struct anode {
  const ixia_agg_t *g;
  field_t *field; /* NULL: COUNT, or a field nothing was indexed under */
  struct anode **subs;
  guint n_subs;
  struct anode *share; /* a sibling SUM/AVG of the same field that accumulates for both */
  /* A SUM/AVG that accumulates for nobody else also feeds a sibling MIN and
   * MAX of its field (marked fused), in the same pass over the values. */
  struct anode *fmin, *fmax;
  gboolean fused;
  /* metrics, by parent bucket */
  GArray *n;      /* guint64 */
  GArray *sum;    /* ixia_xsum_t */
  fcell_t *cells;  /* SUM/AVG: the fused pass's, folded at the finish (64-byte aligned) */
  guint32 n_cells, cap_cells;
  gboolean celled; /* SUM/AVG: has cells */
  /* SUM/AVG alone under a terms node: the one-lane fused pass's cells by the
   * terms field's value id (below KEYED_MAX), their buckets found at the
   * fold; every window based at wbase (0: not yet set). */
  fcell_t *kcells;
  guint32 n_kcells, wbase;
  /* ... and the values on their way to the keyed cells of ids below
   * n_stage (<= STAGE_KEYS): stage_n[k] of them at stage[k * STAGE_CAP],
   * added to cell k a run at a time (stage_add). */
  double *stage;
  guint16 *stage_n;
  guint32 n_stage;
  GArray *ext;    /* double (STATS: the minimum) */
  GArray *ext2;   /* double: STATS' maximum */
  GPtrArray *vals; /* GArray* of double (percentiles) */
  GPtrArray *card; /* roaring_bitmap_t* (value ids) or GHashTable* (number keys) */
  /* terms */
  bmap_t map;
  GArray *direct;   /* guint32 bucket + 1 by value id (top-level dictionary terms) */
  GArray *b_parent; /* guint32 */
  GArray *b_key;    /* guint64: value id, or num_key of a number */
  GArray *b_count;  /* guint64 */
  GArray *per_parent; /* guint32 buckets per parent bucket */
  GArray *pairs;    /* apair_t scratch handed to the subs */
  /* FILTER, FILTERS: each filter's plan and its mask over the current block */
  pnode_t **fplans;
  guint64 (*fmask)[BLOCK_WORDS];
  guint32 fblock;
  /* TOP_HITS: a top-k per parent bucket */
  GPtrArray *topk; /* ixia_idx_sort_t* or NULL */
  gboolean fusable; /* a top-level node of the shape the fused terms pass takes */
} anode_t;

struct ixia_idx_agg {
  ixia_idx_search_t *s;
  ixia_aggs_t *aggs;
  anode_t **top;
  guint n_top;
  blk_t **cols; /* per q->agg_fields slot: the current block's column */
  field_t **fields; /* per slot: its field, looked up once (NULL: nothing indexed under it) */
  guint32 block;
  guint64 mask[BLOCK_WORDS]; /* the current block's matches */
  guint64 mem, max_mem, max_buckets;
  GArray *top_pairs;
  gboolean failed; /* a filter's plan failed at setup (err set) */
};

/* ------------------------------------------------------------- setup */

/* sum and avg of one field among siblings read the same values into the same
 * exact sum: the first accumulates, the others read its state. */
static void share_sums(struct anode **nodes, guint n);

static anode_t *anode_new(ixia_idx_agg_t *A, const ixia_agg_t *g, gboolean top) {
  anode_t *n = g_new0(anode_t, 1);
  n->g = g;
  if (g->field) n->field = ixia_idx_field_lookup(A->s->idx, A->s->table, g->field);
  n->n = g_array_new(FALSE, TRUE, sizeof(guint64));
  switch (g->kind) {
    case IXIA_AGG_SUM:
    case IXIA_AGG_AVG:
      n->sum = g_array_new(FALSE, TRUE, sizeof(ixia_xsum_t));
      n->celled = TRUE;
      break;
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX:
      n->ext = g_array_new(FALSE, TRUE, sizeof(double));
      break;
    case IXIA_AGG_PERCENTILES:
      n->vals = g_ptr_array_new();
      break;
    case IXIA_AGG_CARDINALITY:
      n->card = g_ptr_array_new();
      break;
    case IXIA_AGG_STATS:
      n->sum = g_array_new(FALSE, TRUE, sizeof(ixia_xsum_t));
      n->ext = g_array_new(FALSE, TRUE, sizeof(double));
      n->ext2 = g_array_new(FALSE, TRUE, sizeof(double));
      break;
    case IXIA_AGG_TOP_HITS:
      n->topk = g_ptr_array_new();
      break;
    case IXIA_AGG_FILTER:
    case IXIA_AGG_FILTERS:
      n->fplans = g_new0(pnode_t *, g->n_filters);
      n->fmask = g_malloc0(sizeof *n->fmask * g->n_filters);
      n->fblock = G_MAXUINT32;
      for (guint i = 0; i < g->n_filters; i++) {
        n->fplans[i] = ixia_idx_plan(A->s, g->filters[i]);
        if (!n->fplans[i]) A->failed = TRUE;
      }
      G_GNUC_FALLTHROUGH;
    case IXIA_AGG_TERMS:
    case IXIA_AGG_HISTOGRAM:
    case IXIA_AGG_DATE_HISTOGRAM:
    case IXIA_AGG_RANGE:
      n->b_parent = g_array_new(FALSE, FALSE, sizeof(guint32));
      n->b_key = g_array_new(FALSE, FALSE, sizeof(guint64));
      n->b_count = g_array_new(FALSE, FALSE, sizeof(guint64));
      n->per_parent = g_array_new(FALSE, TRUE, sizeof(guint32));
      n->pairs = g_array_new(FALSE, FALSE, sizeof(apair_t));
      if (g->kind == IXIA_AGG_TERMS && top && n->field && !n->field->numeric)
        n->direct = g_array_new(FALSE, TRUE, sizeof(guint32));
      n->subs = g_new0(anode_t *, MAX(g->n_subs, 1));
      for (guint i = 0; i < g->n_subs; i++) n->subs[n->n_subs++] = anode_new(A, g->subs[i], FALSE);
      share_sums(n->subs, n->n_subs);
      break;
    default:
      break;
  }
  return n;
}

static gboolean is_sum(const anode_t *a) {
  return a->g->kind == IXIA_AGG_SUM || a->g->kind == IXIA_AGG_AVG;
}

static void share_sums(anode_t **nodes, guint n) {
  for (guint i = 0; i < n; i++) {
    anode_t *a = nodes[i];
    if (!is_sum(a) || !a->field) continue;
    for (guint j = 0; j < i && !a->share; j++) {
      anode_t *b = nodes[j];
      if (is_sum(b) && b->field == a->field && !b->share) a->share = b;
    }
  }
  /* The terms-with-metrics shape reads one field four times per document:
   * sum (with avg), min and max go in one pass. */
  for (guint i = 0; i < n; i++) {
    anode_t *a = nodes[i];
    if (!is_sum(a) || !a->field || a->share) continue;
    for (guint j = 0; j < n; j++) {
      anode_t *b = nodes[j];
      if (b->field != a->field || b->fused) continue;
      if (b->g->kind == IXIA_AGG_MIN && !a->fmin) a->fmin = b, b->fused = TRUE;
      else if (b->g->kind == IXIA_AGG_MAX && !a->fmax) a->fmax = b, b->fused = TRUE;
    }
  }
}

static void anode_free(anode_t *n) {
  if (!n) return;
  for (guint i = 0; i < n->n_subs; i++) anode_free(n->subs[i]);
  g_free(n->subs);
  g_array_free(n->n, TRUE);
  if (n->sum) g_array_free(n->sum, TRUE);
  g_aligned_free(n->cells);
  g_aligned_free(n->kcells);
  g_free(n->stage);
  g_free(n->stage_n);
  if (n->ext) g_array_free(n->ext, TRUE);
  if (n->ext2) g_array_free(n->ext2, TRUE);
  for (guint i = 0; n->fplans && i < n->g->n_filters; i++) ixia_idx_plan_free(n->fplans[i]);
  g_free(n->fplans);
  g_free(n->fmask);
  for (guint i = 0; n->topk && i < n->topk->len; i++) ixia_idx_sort_free(n->topk->pdata[i]);
  if (n->topk) g_ptr_array_free(n->topk, TRUE);
  for (guint i = 0; n->vals && i < n->vals->len; i++)
    if (n->vals->pdata[i]) g_array_free(n->vals->pdata[i], TRUE);
  if (n->vals) g_ptr_array_free(n->vals, TRUE);
  for (guint i = 0; n->card && i < n->card->len; i++) {
    if (!n->card->pdata[i]) continue;
    if (n->field && n->field->numeric) g_hash_table_destroy(n->card->pdata[i]);
    else roaring_bitmap_free(n->card->pdata[i]);
  }
  if (n->card) g_ptr_array_free(n->card, TRUE);
  g_free(n->map.slots);
  if (n->direct) g_array_free(n->direct, TRUE);
  if (n->b_parent) g_array_free(n->b_parent, TRUE);
  if (n->b_key) g_array_free(n->b_key, TRUE);
  if (n->b_count) g_array_free(n->b_count, TRUE);
  if (n->per_parent) g_array_free(n->per_parent, TRUE);
  if (n->pairs) g_array_free(n->pairs, TRUE);
  g_free(n);
}

static gboolean fused_shape(const anode_t *t);

ixia_idx_agg_t *ixia_idx_agg_new(ixia_idx_search_t *s, ixia_aggs_t *aggs) {
  ixia_idx_agg_t *A = g_new0(ixia_idx_agg_t, 1);
  const ixia_query_t *q = s->q;
  A->s = s;
  A->aggs = aggs;
  A->n_top = q->n_aggs;
  A->top = g_new0(anode_t *, MAX(q->n_aggs, 1));
  for (guint i = 0; i < q->n_aggs; i++) A->top[i] = anode_new(A, q->aggs[i], TRUE);
  share_sums(A->top, A->n_top);
  A->cols = g_new0(blk_t *, MAX(q->n_agg_fields, 1));
  A->fields = g_new0(field_t *, MAX(q->n_agg_fields, 1));
  for (guint i = 0; i < q->n_agg_fields; i++)
    A->fields[i] = ixia_idx_field_lookup(s->idx, s->table, q->agg_fields[i]);
  A->block = G_MAXUINT32;
  A->max_mem = s->lim ? s->lim->max_memory_bytes : G_MAXUINT64;
  A->max_buckets = s->lim ? s->lim->max_terms_buckets : G_MAXUINT32;
  A->top_pairs = g_array_new(FALSE, FALSE, sizeof(apair_t));
  gboolean unfused = ixia_test_hook("AGG_UNFUSED", 0) != 0; /* (the tests compare both paths) */
  for (guint i = 0; i < A->n_top; i++) A->top[i]->fusable = !unfused && fused_shape(A->top[i]);
  if (A->failed) {
    ixia_idx_agg_free(A);
    return NULL;
  }
  return A;
}

void ixia_idx_agg_free(ixia_idx_agg_t *A) {
  if (!A) return;
  for (guint i = 0; i < A->n_top; i++) anode_free(A->top[i]);
  g_free(A->top);
  for (guint i = 0; i < A->s->q->n_agg_fields; i++) ixia_idx_blk_unref(A->cols[i]);
  g_free(A->cols);
  g_free(A->fields);
  g_array_free(A->top_pairs, TRUE);
  g_free(A);
}

static gboolean mem_grow(ixia_idx_agg_t *A, guint64 bytes) {
  A->mem += bytes;
  if (A->mem <= A->max_mem) return TRUE;
  return ixia_error_set(A->s->err, IXIA_ETOOLARGE,
                        "aggregations need more than %" G_GUINT64_FORMAT
                        " MiB of memory (query.max_memory_mb)",
                        A->max_mem >> 20);
}

/* --------------------------------------------------------- accumulating */

/* Grows the per-bucket arrays of a metric node to hold bucket b; FALSE at
 * query.max_memory_mb (sums take a superaccumulator per bucket). */
static gboolean metric_reserve(ixia_idx_agg_t *A, anode_t *n, guint32 b) {
  if (n->n->len <= b) g_array_set_size(n->n, b + 1);
  if (n->sum && n->sum->len <= b) {
    guint64 more = (guint64)(b + 1 - n->sum->len) * sizeof(ixia_xsum_t);
    g_array_set_size(n->sum, b + 1);
    if (!mem_grow(A, more)) return FALSE;
  }
  if (n->celled && n->n_cells <= b) {
    if (b >= n->cap_cells) {
      /* GArray's blocks are only 16-byte aligned: a cell would straddle two lines. */
      guint32 cap = MAX(b + 1, MAX(n->cap_cells * 2, 16u));
      fcell_t *cells = g_aligned_alloc0(cap, sizeof(fcell_t), 64);
      if (n->n_cells) memcpy(cells, n->cells, (gsize)n->n_cells * sizeof(fcell_t));
      g_aligned_free(n->cells);
      n->cells = cells;
      n->cap_cells = cap;
    }
    guint64 more = (guint64)(b + 1 - n->n_cells) * sizeof(fcell_t);
    n->n_cells = b + 1;
    if (!mem_grow(A, more)) return FALSE;
  }
  if (n->ext && n->ext->len <= b) g_array_set_size(n->ext, b + 1);
  if (n->ext2 && n->ext2->len <= b) g_array_set_size(n->ext2, b + 1);
  if (n->vals && n->vals->len <= b) g_ptr_array_set_size(n->vals, (gint)b + 1);
  if (n->card && n->card->len <= b) g_ptr_array_set_size(n->card, (gint)b + 1);
  return TRUE;
}

static inline guint32 mix(guint32 pb, guint64 key) {
  guint64 h = key * G_GUINT64_CONSTANT(0x9E3779B97F4A7C15) ^ ((guint64)pb + 1) * G_GUINT64_CONSTANT(0xC2B2AE3D27D4EB4F);
  h ^= h >> 29;
  return (guint32)h;
}

static void bmap_grow(anode_t *n) {
  guint32 cap = n->map.cap ? n->map.cap * 2 : 64;
  guint32 *slots = g_new0(guint32, cap);
  for (guint32 b = 0; b < n->b_key->len; b++) {
    guint32 h = mix(g_array_index(n->b_parent, guint32, b), g_array_index(n->b_key, guint64, b)) & (cap - 1);
    while (slots[h]) h = (h + 1) & (cap - 1);
    slots[h] = b + 1;
  }
  g_free(n->map.slots);
  n->map.slots = slots;
  n->map.cap = cap;
}

/* The bucket of (pb, key) in terms node n, created when missing; -1 at a
 * limit (error set). */
static gint64 bucket_of(ixia_idx_agg_t *A, anode_t *n, guint32 pb, guint64 key) {
  if (n->direct && pb == 0) {
    if (key < n->direct->len) {
      guint32 b = g_array_index(n->direct, guint32, key);
      if (b) return b - 1;
    }
  } else if (n->map.cap) {
    for (guint32 h = mix(pb, key) & (n->map.cap - 1); n->map.slots[h]; h = (h + 1) & (n->map.cap - 1)) {
      guint32 b = n->map.slots[h] - 1;
      if (g_array_index(n->b_key, guint64, b) == key && g_array_index(n->b_parent, guint32, b) == pb)
        return b;
    }
  }
  if (n->per_parent->len <= pb) g_array_set_size(n->per_parent, pb + 1);
  guint32 *pp = &g_array_index(n->per_parent, guint32, pb);
  if (*pp >= A->max_buckets) {
    ixia_error_set(A->s->err, IXIA_ETOOLARGE,
                   "terms aggregation '%s' has more than %" G_GUINT64_FORMAT
                   " buckets (query.max_terms_buckets)",
                   n->g->name, A->max_buckets);
    return -1;
  }
  (*pp)++;
  guint32 b = n->b_key->len;
  g_array_append_val(n->b_parent, pb);
  g_array_append_val(n->b_key, key);
  guint64 zero = 0;
  g_array_append_val(n->b_count, zero);
  if (!mem_grow(A, 32)) return -1;
  if (n->direct && pb == 0) {
    if (n->direct->len <= key) g_array_set_size(n->direct, (guint)key + 1);
    g_array_index(n->direct, guint32, key) = b + 1;
  } else {
    if ((guint64)(n->b_key->len) * 2 > n->map.cap) bmap_grow(n);
    else {
      guint32 h = mix(pb, key) & (n->map.cap - 1);
      while (n->map.slots[h]) h = (h + 1) & (n->map.cap - 1);
      n->map.slots[h] = b + 1;
    }
  }
  return b;
}

/* pr[i].pb < parents: the bucket count of n's parent (1 at the top). */
static gboolean add_pairs(ixia_idx_agg_t *A, anode_t *n, const apair_t *pr, guint np, guint32 parents);

/* The column block of a field for the current block. */
static const col_t *column(ixia_idx_agg_t *A, anode_t *n) {
  return A->cols[n->g->field_slot] ? A->cols[n->g->field_slot]->col : NULL;
}

/* Counts pair pr in the bucket of (its parent, key), queued for the subs. */
static gboolean into_bucket(ixia_idx_agg_t *A, anode_t *n, const apair_t *pr, guint64 key) {
  gint64 b = bucket_of(A, n, pr->pb, key);
  if (b < 0) return FALSE;
  g_array_index(n->b_count, guint64, b)++;
  if (n->n_subs) {
    apair_t p = {pr->slot, (guint32)b};
    g_array_append_val(n->pairs, p);
  }
  return TRUE;
}

/* The filters' masks over the current block (once per block). */
static gboolean filter_masks(ixia_idx_agg_t *A, anode_t *n) {
  if (n->fblock == A->block) return TRUE;
  for (guint f = 0; f < n->g->n_filters; f++) {
    memcpy(n->fmask[f], A->mask, sizeof A->mask);
    if (!ixia_idx_check_block(A->s, n->fplans[f], A->block, n->fmask[f])) return FALSE;
  }
  n->fblock = A->block;
  return TRUE;
}

/* Bucket kinds: a document counts once in each bucket its values (or
 * filters) put it in; the buckets then feed the nested aggregations. */
static gboolean add_terms(ixia_idx_agg_t *A, anode_t *n, const apair_t *pr, guint np) {
  const ixia_agg_t *g = n->g;
  g_array_set_size(n->pairs, 0);
  const col_t *c = g->field ? column(A, n) : NULL;
  if (c && n->direct && !c->mstart && c->width == 4) {
    /* Top-level terms over one dictionary id per slot, buckets found by
     * id: the common terms shape, without a call per document. */
    guint out = 0;
    g_array_set_size(n->pairs, np);
    apair_t *po = (apair_t *)(void *)n->pairs->data;
    for (guint i = 0; i < np; i++) {
      guint s = pr[i].slot;
      if (!(c->has[s >> 6] >> (s & 63) & 1)) continue;
      guint32 key = c->v1.u[s];
      guint32 b1 = key < n->direct->len ? g_array_index(n->direct, guint32, key) : 0;
      gint64 b = b1 ? (gint64)b1 - 1 : bucket_of(A, n, 0, key);
      if (b < 0) return FALSE;
      g_array_index(n->b_count, guint64, b)++;
      po[out++] = (apair_t){(guint16)s, (guint32)b};
    }
    g_array_set_size(n->pairs, out);
    c = NULL; /* done */
  }
  if (g->kind == IXIA_AGG_FILTER || g->kind == IXIA_AGG_FILTERS) {
    if (!filter_masks(A, n)) return FALSE;
    for (guint i = 0; i < np; i++)
      for (guint f = 0; f < g->n_filters; f++)
        if (n->fmask[f][pr[i].slot >> 6] >> (pr[i].slot & 63) & 1)
          if (!into_bucket(A, n, &pr[i], f)) return FALSE;
  }
  for (guint i = 0; c && i < np; i++) {
    guint32 cnt;
    const void *v = col_slot(c, pr[i].slot, &cnt);
    if (g->kind == IXIA_AGG_RANGE) {
      for (guint r = 0; r < g->n_ranges; r++) {
        const ixia_agg_range_t *x = &g->ranges[r];
        for (guint32 k = 0; k < cnt; k++) {
          double y = ((const double *)v)[k];
          if ((x->has_from && y < x->from) || (x->has_to && y >= x->to)) continue;
          if (!into_bucket(A, n, &pr[i], r)) return FALSE;
          break;
        }
      }
      continue;
    }
    gboolean hist = g->kind != IXIA_AGG_TERMS;
    guint64 prev = 0;
    for (guint32 k = 0; k < cnt; k++) {
      guint64 key;
      if (hist) {
        /* Values are in order, so a bucket's repeats are adjacent. */
        key = num_key(ixia_agg_bucket_key(g, ((const double *)v)[k]));
        if (k > 0 && key == prev) continue;
        prev = key;
      } else {
        key = c->width == 8 ? num_key(((const double *)v)[k]) : ((const guint32 *)v)[k];
      }
      if (!into_bucket(A, n, &pr[i], key)) return FALSE;
    }
  }
  if (!n->n_subs || n->pairs->len == 0) return TRUE;
  /* The subs may reuse n->pairs' storage only after this loop: copy. */
  GArray *pairs = n->pairs;
  n->pairs = g_array_new(FALSE, FALSE, sizeof(apair_t));
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < n->n_subs; i++)
    ok = add_pairs(A, n->subs[i], (const apair_t *)(void *)pairs->data, pairs->len, n->b_count->len);
  g_array_free(n->pairs, TRUE);
  n->pairs = pairs;
  return ok;
}

/* A block with one value per slot: count, sum, min or max straight from
 * the array of first values. */
static gboolean add_single(ixia_idx_agg_t *A, anode_t *n, const col_t *c, const apair_t *pr,
                           guint np, guint32 parents) {
  const ixia_agg_t *g = n->g;
  const double *v1 = c->v1.d;
  guint32 top = parents - 1;
  if (!metric_reserve(A, n, top)) return FALSE;
  guint64 *cnt = (guint64 *)(void *)n->n->data;
  if (n->fmin || n->fmax) {
    /* Sum, min and max in one pass (the min and max nodes are fused). */
    if ((n->fmin && !metric_reserve(A, n->fmin, top)) || (n->fmax && !metric_reserve(A, n->fmax, top)))
      return FALSE;
    ixia_xsum_t *xs = (ixia_xsum_t *)(void *)n->sum->data;
    anode_t *mn = n->fmin, *mx = n->fmax;
    guint64 *cmin = mn ? (guint64 *)(void *)mn->n->data : NULL, *cmax = mx ? (guint64 *)(void *)mx->n->data : NULL;
    double *emin = mn ? (double *)(void *)mn->ext->data : NULL, *emax = mx ? (double *)(void *)mx->ext->data : NULL;
    for (guint i = 0; i < np; i++) {
      guint s = pr[i].slot, pb = pr[i].pb;
      if (!(c->has[s >> 6] >> (s & 63) & 1)) continue;
      double x = v1[s];
      cnt[pb]++;
      ixia_xsum_add(&xs[pb], x);
      if (cmin && (cmin[pb]++ == 0 || x < emin[pb])) emin[pb] = x;
      if (cmax && (cmax[pb]++ == 0 || x > emax[pb])) emax[pb] = x;
    }
    return TRUE;
  }
  if (g->kind == IXIA_AGG_SUM || g->kind == IXIA_AGG_AVG) {
    ixia_xsum_t *xs = (ixia_xsum_t *)(void *)n->sum->data;
    for (guint i = 0; i < np; i++) {
      guint s = pr[i].slot;
      if (!(c->has[s >> 6] >> (s & 63) & 1)) continue;
      cnt[pr[i].pb]++;
      ixia_xsum_add(&xs[pr[i].pb], v1[s]);
    }
    return TRUE;
  }
  double *ext = (double *)(void *)n->ext->data;
  gboolean min = g->kind == IXIA_AGG_MIN;
  for (guint i = 0; i < np; i++) {
    guint s = pr[i].slot, pb = pr[i].pb;
    if (!(c->has[s >> 6] >> (s & 63) & 1)) continue;
    double x = v1[s];
    if (cnt[pb]++ == 0 || (min ? x < ext[pb] : x > ext[pb])) ext[pb] = x;
  }
  return TRUE;
}

/* A metric over a block's values, slot by slot (multi-valued blocks, and
 * the kinds add_single does not take). */
static gboolean add_values(ixia_idx_agg_t *A, anode_t *n, const col_t *c, const apair_t *pr,
                           guint np) {
  const ixia_agg_t *g = n->g;
  for (guint i = 0; i < np; i++) {
    guint32 cnt, pb = pr[i].pb;
    const void *v = col_slot(c, pr[i].slot, &cnt);
    if (!cnt) continue;
    if (!metric_reserve(A, n, pb)) return FALSE;
    g_array_index(n->n, guint64, pb) += cnt;
    switch (g->kind) {
      case IXIA_AGG_SUM:
      case IXIA_AGG_AVG: {
        ixia_xsum_t *xs = &g_array_index(n->sum, ixia_xsum_t, pb);
        for (guint32 k = 0; k < cnt; k++) ixia_xsum_add(xs, ((const double *)v)[k]);
        break;
      }
      case IXIA_AGG_MIN:
      case IXIA_AGG_MAX: {
        double *e = &g_array_index(n->ext, double, pb);
        gboolean first = g_array_index(n->n, guint64, pb) == cnt;
        for (guint32 k = 0; k < cnt; k++) {
          double x = ((const double *)v)[k];
          if ((first && k == 0) || (g->kind == IXIA_AGG_MIN ? x < *e : x > *e)) *e = x;
        }
        break;
      }
      case IXIA_AGG_STATS: {
        double *lo = &g_array_index(n->ext, double, pb), *hi = &g_array_index(n->ext2, double, pb);
        ixia_xsum_t *xs = &g_array_index(n->sum, ixia_xsum_t, pb);
        gboolean first = g_array_index(n->n, guint64, pb) == cnt;
        for (guint32 k = 0; k < cnt; k++) {
          double x = ((const double *)v)[k];
          if ((first && k == 0) || x < *lo) *lo = x;
          if ((first && k == 0) || x > *hi) *hi = x;
          ixia_xsum_add(xs, x);
        }
        break;
      }
      case IXIA_AGG_PERCENTILES: {
        GArray *a = n->vals->pdata[pb];
        if (!a) a = n->vals->pdata[pb] = g_array_new(FALSE, FALSE, sizeof(double));
        g_array_append_vals(a, v, cnt);
        if (!mem_grow(A, (guint64)cnt * sizeof(double))) return FALSE;
        break;
      }
      case IXIA_AGG_CARDINALITY:
        if (c->width == 8) {
          GHashTable *h = n->card->pdata[pb];
          if (!h) h = n->card->pdata[pb] = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
          for (guint32 k = 0; k < cnt; k++) {
            guint64 key = num_key(((const double *)v)[k]);
            if (g_hash_table_contains(h, &key)) continue;
            g_hash_table_add(h, g_memdup2(&key, sizeof key));
            if (!mem_grow(A, 48)) return FALSE;
          }
        } else {
          roaring_bitmap_t *r = n->card->pdata[pb];
          if (!r) r = n->card->pdata[pb] = roaring_bitmap_create();
          roaring_bitmap_add_many(r, cnt, v);
        }
        break;
      default:
        break;
    }
  }
  return TRUE;
}

static gboolean add_pairs(ixia_idx_agg_t *A, anode_t *n, const apair_t *pr, guint np, guint32 parents) {
  const ixia_agg_t *g = n->g;
  if (ixia_agg_is_bucket(g->kind)) return add_terms(A, n, pr, np);
  if (g->kind == IXIA_AGG_TOP_HITS) {
    for (guint i = 0; i < np; i++) {
      guint32 pb = pr[i].pb;
      if (n->topk->len <= pb) g_ptr_array_set_size(n->topk, (gint)pb + 1);
      ixia_idx_sort_t *t = n->topk->pdata[pb];
      if (!t) t = n->topk->pdata[pb] = ixia_idx_topk_new(A->s, g->sort, g->n_sort, g->size);
      if (!t || !ixia_idx_topk_offer(t, A->block << BLOCK_BITS | pr[i].slot)) return FALSE;
    }
    return TRUE;
  }
  if (g->kind == IXIA_AGG_COUNT) {
    for (guint i = 0; i < np; i++) {
      if (!metric_reserve(A, n, pr[i].pb)) return FALSE;
      g_array_index(n->n, guint64, pr[i].pb)++;
    }
    return TRUE;
  }
  if (n->share || n->fused) return TRUE; /* a sibling accumulates these values */
  const col_t *c = column(A, n);
  if (!c) return TRUE;
  if (!c->mstart && c->width == 8 && g->kind != IXIA_AGG_PERCENTILES &&
      g->kind != IXIA_AGG_CARDINALITY && g->kind != IXIA_AGG_STATS)
    return add_single(A, n, c, pr, np, parents);
  return add_values(A, n, c, pr, np) && (!n->fmin || add_values(A, n->fmin, c, pr, np)) &&
         (!n->fmax || add_values(A, n->fmax, c, pr, np));
}

/* ------------------------------------------------ the fused terms pass */

/* The common shape, a top-level terms node over a keyword field with only
 * count, sum, avg, min and max under it, takes one pass per block: each
 * match's bucket is found by its value id and its metrics accumulated at
 * once, straight from the block's mask, where the general path builds
 * (slot, bucket) pairs from the mask, counts the buckets over the pairs and
 * then hands the pairs to each metric (agg alone: add_pairs was 51% of the
 * shard's CPU, the pairs' build 7%). A block whose columns hold more than
 * one value in some slot takes the general path; both keep the same state,
 * so blocks may mix. */

#define FUSED_LANES 4

/* One metric accumulating in the pass (siblings that share its state or
 * are fused into it are not lanes). */
typedef struct {
  anode_t *n;
  const col_t *c;  /* NULL for COUNT */
  guint64 *cnt;    /* COUNT, MIN and MAX alone */
  double *ext;     /* MIN, MAX alone */
  ixia_xsum_t *xs; /* SUM, AVG ... */
  fcell_t *cells;  /* ... with their count, window and fused extremes */
} lane_t;

static gboolean fused_shape(const anode_t *t) {
  if (t->g->kind != IXIA_AGG_TERMS || !t->direct) return FALSE;
  guint lanes = 0;
  for (guint i = 0; i < t->n_subs; i++) {
    const anode_t *m = t->subs[i];
    switch (m->g->kind) {
      case IXIA_AGG_COUNT:
        break;
      case IXIA_AGG_SUM:
      case IXIA_AGG_AVG:
      case IXIA_AGG_MIN:
      case IXIA_AGG_MAX:
        if (m->field && !m->field->numeric) return FALSE;
        break;
      default:
        return FALSE;
    }
    if (!m->share && !m->fused) lanes++;
  }
  return lanes <= FUSED_LANES;
}

/* A lane's node and its fused MIN and MAX hold bucket b. */
static gboolean lane_reserve(ixia_idx_agg_t *A, anode_t *m, guint32 b) {
  return metric_reserve(A, m, b) && (!m->fmin || metric_reserve(A, m->fmin, b)) &&
         (!m->fmax || metric_reserve(A, m->fmax, b));
}

/* Every lane's arrays hold bucket b; their pointers (re)read. */
static gboolean lanes_reserve(ixia_idx_agg_t *A, lane_t *lanes, guint nl, guint32 b) {
  for (guint i = 0; i < nl; i++) {
    lane_t *l = &lanes[i];
    anode_t *m = l->n;
    if (!lane_reserve(A, m, b)) return FALSE;
    l->cnt = (guint64 *)(void *)m->n->data;
    l->ext = m->ext ? (double *)(void *)m->ext->data : NULL;
    l->xs = m->sum ? (ixia_xsum_t *)(void *)m->sum->data : NULL;
    l->cells = m->cells;
  }
  return TRUE;
}

/* A value of a SUM/AVG lane into its bucket's cell c, whose exact sum is
 * xs (extremes kept whether or not a MIN or MAX is fused: the same cache
 * line, no branch). */
static inline void cell_add(fcell_t *c, ixia_xsum_t *xs, double x) {
  ixia_xwin_add(&c->win, xs, x);
  gboolean first = c->n++ == 0;
  c->min = first || x < c->min ? x : c->min;
  c->max = first || x > c->max ? x : c->max;
}

/* The one-lane pass keys its cells by value id below this (a MiB of
 * cells); a bucket of a larger id goes through its bucket's cell. */
#define KEYED_MAX 16384u
/* Keyed cells of ids below STAGE_KEYS gather up to STAGE_CAP of their
 * in-window values before adding them as one run (256 KiB at most). */
#define STAGE_KEYS 256u
#define STAGE_CAP 128u

/* m's keyed cells hold value id key (< KEYED_MAX); FALSE at
 * query.max_memory_mb. New cells take the lane's window base. */
static gboolean kcells_grow(ixia_idx_agg_t *A, anode_t *m, guint32 key) {
  guint32 cap = MIN(KEYED_MAX, MAX(key + 1, MAX(m->n_kcells * 2, 64u)));
  fcell_t *kc = g_aligned_alloc0(cap, sizeof(fcell_t), 64);
  if (m->n_kcells) memcpy(kc, m->kcells, (gsize)m->n_kcells * sizeof(fcell_t));
  for (guint32 k = m->n_kcells; k < cap; k++) {
    kc[k].win.base = m->wbase;
    kc[k].min = INFINITY; /* (no test of a first value in the pass) */
    kc[k].max = -INFINITY;
  }
  g_aligned_free(m->kcells);
  guint64 more = (guint64)(cap - m->n_kcells) * sizeof(fcell_t);
  m->kcells = kc;
  m->n_kcells = cap;
  guint32 ns = MIN(cap, STAGE_KEYS);
  if (ns > m->n_stage) {
    m->stage = g_renew(double, m->stage, (gsize)ns * STAGE_CAP);
    m->stage_n = g_renew(guint16, m->stage_n, ns);
    memset(m->stage_n + m->n_stage, 0, (ns - m->n_stage) * sizeof *m->stage_n);
    more += (guint64)(ns - m->n_stage) * (STAGE_CAP * sizeof(double) + sizeof(guint16));
    m->n_stage = ns;
  }
  return mem_grow(A, more);
}

/* Adds to cell c n values whose exponents lie within its window (based
 * at base, set): their count (as documents too), exact sum and extremes.
 * All are normal and nonzero, so no two equal values differ in their bits
 * and the order of the extremes' compares changes nothing. */
static void stage_add_scalar(fcell_t *c, const double *v, guint32 n, guint32 base) {
  double lo = c->min, hi = c->max;
  for (guint32 i = 0; i < n; i++) {
    guint64 bits;
    memcpy(&bits, &v[i], sizeof bits);
    ixia_xwin_add_at(&c->win, bits, ((guint32)(bits >> 52) & 0x7FF) - base);
    lo = v[i] < lo ? v[i] : lo;
    hi = v[i] > hi ? v[i] : hi;
  }
  c->min = lo;
  c->max = hi;
  c->n += n;
  c->docs += n;
}

#ifdef HAVE_AVX2_PATH
/* stage_add four values a step: each mantissa shifted to its place in the
 * window, split at bit 32 into two lanes of 64-bit sums (under 2^31 and
 * 2^32 a value, so STAGE_CAP values cannot overflow them), negated for a
 * negative value; the extremes in two more registers. The per-match loop
 * that added each value into its cell's 128-bit integer and extremes in
 * memory (keyed_block before) was ~2.7 ns a match, staged ~2.1. */
__attribute__((target("avx2"))) static void stage_add_avx2(fcell_t *c, const double *v, guint32 n,
                                                           guint32 base) {
  const __m256i mant = _mm256_set1_epi64x((gint64)G_GUINT64_CONSTANT(0xFFFFFFFFFFFFF));
  const __m256i unit = _mm256_set1_epi64x((gint64)1 << 52), low = _mm256_set1_epi64x(0xFFFFFFFF);
  const __m256i emask = _mm256_set1_epi64x(0x7FF), vbase = _mm256_set1_epi64x(base);
  const __m256i zero = _mm256_setzero_si256();
  __m256i hs = zero, ls = zero;
  __m256d lo = _mm256_set1_pd(INFINITY), hi = _mm256_set1_pd(-INFINITY);
  guint32 i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d x = _mm256_loadu_pd(v + i);
    __m256i b = _mm256_castpd_si256(x);
    __m256i sh = _mm256_sub_epi64(_mm256_and_si256(_mm256_srli_epi64(b, 52), emask), vbase);
    __m256i m = _mm256_sllv_epi64(_mm256_or_si256(_mm256_and_si256(b, mant), unit), sh);
    __m256i neg = _mm256_cmpgt_epi64(zero, b);
    __m256i h = _mm256_srli_epi64(m, 32), l = _mm256_and_si256(m, low);
    hs = _mm256_add_epi64(hs, _mm256_sub_epi64(_mm256_xor_si256(h, neg), neg));
    ls = _mm256_add_epi64(ls, _mm256_sub_epi64(_mm256_xor_si256(l, neg), neg));
    lo = _mm256_min_pd(x, lo);
    hi = _mm256_max_pd(x, hi);
  }
  gint64 hv[4], lv[4];
  double lov[4], hiv[4];
  _mm256_storeu_si256((__m256i *)(void *)hv, hs);
  _mm256_storeu_si256((__m256i *)(void *)lv, ls);
  _mm256_storeu_pd(lov, lo);
  _mm256_storeu_pd(hiv, hi);
  for (guint k = 0; k < 4; k++) {
    c->win.acc += (ixia_i128)hv[k] * ((ixia_i128)1 << 32) + lv[k];
    c->min = lov[k] < c->min ? lov[k] : c->min;
    c->max = hiv[k] > c->max ? hiv[k] : c->max;
  }
  c->n += i;
  c->docs += i;
  stage_add_scalar(c, v + i, n - i, base);
}
#endif

static void stage_add(fcell_t *c, const double *v, guint32 n, guint32 base) {
#ifdef HAVE_AVX2_PATH
  if (__builtin_cpu_supports("avx2")) {
    stage_add_avx2(c, v, n, base);
    return;
  }
#endif
  stage_add_scalar(c, v, n, base);
}

/* A window base for the values of column block c: the one whose window
 * (IXIA_XWIN_SPAN + 1 exponents from it) holds the most of its normal
 * values, so that a few outliers (or zeros, which no window holds) leave
 * the rest on the fast path; prices from 1 to 1,000 span exponents 0 to
 * 9: all of them. 0 when it has none. Once a query per lane: a histogram
 * of 2,048 exponents. */
static guint32 window_base(const col_t *c) {
  guint32 at[2049] = {0}; /* counts of exponent e at e + 1; then at[k]: values of exponent below k */
  gboolean any = FALSE;
  for (guint s = 0; s < BLOCK_SLOTS; s++) {
    guint64 bits;
    memcpy(&bits, &c->v1.d[s], sizeof bits);
    guint32 e = (guint32)(bits >> 52) & 0x7FF;
    if (!(c->has[s >> 6] >> (s & 63) & 1) || e == 0 || e == 0x7FF) continue;
    at[e + 1]++;
    any = TRUE;
  }
  if (!any) return 0;
  for (guint e = 1; e <= 2048; e++) at[e] += at[e - 1];
  guint32 best = 1, most = 0;
  for (guint32 b = 1; b <= IXIA_XWIN_MAX_BASE; b++) {
    guint32 n = at[MIN(b + IXIA_XWIN_SPAN + 1, 2048u)] - at[b];
    if (n > most) most = n, best = b;
  }
  return best;
}

/* A value of the one-lane pass outside its window (bits' exponent more
 * than IXIA_XWIN_SPAN above wbase, or below it, or no base yet): the first
 * value of a normal magnitude sets the base of the lane and of all its
 * keyed cells from the values of its block; the others go to the exact
 * sum of key's bucket (zeros among them: a cost of a bucket lookup). */
static gboolean keyed_outside(ixia_idx_agg_t *A, anode_t *t, lane_t *lanes, guint nl, guint32 key,
                              guint64 bits) {
  anode_t *m = lanes[0].n;
  guint32 e = (guint32)(bits >> 52) & 0x7FF;
  if (!m->wbase && e != 0 && e != 0x7FF) {
    m->wbase = window_base(lanes[0].c);
    for (guint32 k = 0; k < m->n_kcells; k++) m->kcells[k].win.base = m->wbase;
    if (e - m->wbase <= IXIA_XWIN_SPAN) {
      ixia_xwin_add_at(&m->kcells[key].win, bits, e - m->wbase);
      return TRUE;
    }
  }
  gint64 b = bucket_of(A, t, 0, key);
  if (b < 0 || !lanes_reserve(A, lanes, nl, (guint32)b)) return FALSE;
  double x;
  memcpy(&x, &bits, sizeof x);
  ixia_xsum_add(&g_array_index(m->sum, ixia_xsum_t, b), x);
  return TRUE;
}

/* A cell's extreme into a fused MIN or MAX node's arrays for bucket b. */
static void fold_ext(anode_t *m, guint32 b, guint64 n, double x) {
  if (!m) return;
  guint64 *cnt = &g_array_index(m->n, guint64, b);
  double *e = &g_array_index(m->ext, double, b);
  if (*cnt == 0 || (m->g->kind == IXIA_AGG_MIN ? x < *e : x > *e)) *e = x;
  *cnt += n;
}

/* A cell's count, window and extremes into lane m's arrays for bucket b
 * (the cell's docs are the caller's). */
static void cell_fold(anode_t *m, fcell_t *c, guint32 b) {
  if (!c->n) return;
  g_array_index(m->n, guint64, b) += c->n;
  ixia_xwin_flush(&c->win, &g_array_index(m->sum, ixia_xsum_t, b));
  fold_ext(m->fmin, b, c->n, c->min);
  fold_ext(m->fmax, b, c->n, c->max);
  c->n = 0;
}

/* Folds the keyed cells of t's lane m into buckets, each found or created
 * now, their staged values added first; FALSE at a limit (error set). */
static gboolean kcells_fold(ixia_idx_agg_t *A, anode_t *t, anode_t *m) {
  for (guint32 k = 0; k < m->n_kcells; k++) {
    fcell_t *c = &m->kcells[k];
    if (k < m->n_stage && m->stage_n[k]) {
      stage_add(c, &m->stage[(gsize)k * STAGE_CAP], m->stage_n[k], m->wbase);
      m->stage_n[k] = 0;
    }
    if (!c->docs) continue; /* (a value counts its document too) */
    gint64 b = bucket_of(A, t, 0, k);
    if (b < 0 || !lane_reserve(A, m, (guint32)b)) return FALSE;
    g_array_index(t->b_count, guint64, b) += c->docs;
    c->docs = 0;
    cell_fold(m, c, (guint32)b);
    c->min = INFINITY;
    c->max = -INFINITY;
  }
  return TRUE;
}

/* Folds the fused pass's cells of n and its sub-nodes into their arrays
 * (count, exact sum, fused MIN and MAX); the cells are emptied. FALSE at a
 * limit (error set). */
static gboolean cells_fold(ixia_idx_agg_t *A, anode_t *n) {
  for (guint i = 0; i < n->n_subs; i++) {
    anode_t *m = n->subs[i];
    if (!cells_fold(A, m) || (m->kcells && !kcells_fold(A, n, m))) return FALSE;
    for (guint32 b = 0; n->b_count && b < m->n_cells; b++) {
      g_array_index(n->b_count, guint64, b) += m->cells[b].docs;
      m->cells[b].docs = 0;
    }
  }
  for (guint32 b = 0; b < n->n_cells; b++) cell_fold(n, &n->cells[b], b);
  return TRUE;
}

/* The one-lane pass over a block (fused_block): cells by value id, so no
 * bucket lookup stands between a match and its cell, and the window's base
 * in a register (one base for the lane). Its own function so that its
 * loop's values stay in registers (inside fused_block, beside the lanes'
 * loop, they were spilled to the stack; and stores into the cells may
 * alias anything reached through a pointer, so the column's arrays and
 * presence word are read through locals, not reloaded at every value).
 * A value within the window for a cell of an id below STAGE_KEYS is only
 * staged, in the cell's run, which stage_add adds four values a step once
 * full (or at the fold): at a match two loads and two stores instead of
 * the cell's count, 128-bit integer and extremes read and written in
 * memory. FALSE at a limit (error set). */
IXIA_CLONES_V3 static gboolean keyed_block(ixia_idx_agg_t *A, anode_t *t, lane_t *lanes, guint nl,
                                           const col_t *tc, const guint64 *mask) {
  const lane_t *one = &lanes[0];
  const guint32 *ids = tc->v1.u;
  anode_t *ln = one->n;
  const double *vals = one->c->v1.d;
  fcell_t *kc = ln->kcells;
  guint32 nk = ln->n_kcells;
  double *st = ln->stage;
  guint16 *sn = ln->stage_n;
  guint32 ns = ln->n_stage;
  /* (With no base yet every value takes keyed_outside, and none is staged.) */
  guint32 base = ln->wbase ? ln->wbase : G_MAXUINT32 / 2;
  for (guint w = 0; w < BLOCK_WORDS; w++) {
    const guint64 vhas = one->c->has[w];
    for (guint64 m = mask[w] & tc->has[w]; m; m &= m - 1) {
      guint s = w << 6 | (guint)__builtin_ctzll(m);
      guint32 key = ids[s];
      if (G_UNLIKELY(key >= nk)) {
        if (key >= KEYED_MAX) {
          gint64 nb = bucket_of(A, t, 0, key);
          if (nb < 0 || !lanes_reserve(A, lanes, nl, (guint32)nb)) return FALSE;
          one->cells[nb].docs++;
          if (vhas >> (s & 63) & 1) cell_add(&one->cells[nb], &one->xs[nb], vals[s]);
          continue;
        }
        if (!kcells_grow(A, ln, key)) return FALSE;
        kc = ln->kcells;
        nk = ln->n_kcells;
        st = ln->stage;
        sn = ln->stage_n;
        ns = ln->n_stage;
      }
      fcell_t *c = &kc[key];
      if (!(vhas >> (s & 63) & 1)) {
        c->docs++;
        continue;
      }
      double x = vals[s];
      guint64 bits;
      memcpy(&bits, &x, sizeof bits);
      guint32 sh = ((guint32)(bits >> 52) & 0x7FF) - base;
      if (G_LIKELY(sh <= IXIA_XWIN_SPAN)) {
        if (G_LIKELY(key < ns)) {
          /* Staged: two loads and two stores here, the cell's work at
           * the run's add. */
          guint32 k = sn[key];
          st[key * STAGE_CAP + k] = x;
          if (G_UNLIKELY(++k == STAGE_CAP)) {
            stage_add(c, &st[key * STAGE_CAP], STAGE_CAP, base);
            k = 0;
          }
          sn[key] = (guint16)k;
          continue;
        }
        ixia_xwin_add_at(&c->win, bits, sh);
      } else {
        if (!keyed_outside(A, t, lanes, nl, key, bits)) return FALSE;
        if (ln->wbase) base = ln->wbase;
      }
      c->docs++;
      c->n++;
      c->min = x < c->min ? x : c->min;
      c->max = x > c->max ? x : c->max;
    }
  }
  return TRUE;
}

/* The pass over one block; FALSE with *ok untouched when the block's
 * columns need the general path. Also compiled for x86-64-v3 and chosen
 * at load time: the exact sum's variable shifts become single BMI2
 * instructions (shl/shr by %cl are three micro-ops each); indexer CPU
 * per aggregation at 16 connections 2,248-2,330 -> 2,123-2,284 us. */
IXIA_CLONES_V3 static gboolean fused_block(ixia_idx_agg_t *A, anode_t *t, const guint64 *mask, gboolean *ok) {
  const col_t *tc = column(A, t);
  if (!tc || tc->mstart || tc->width != 4) return FALSE;
  lane_t lanes[FUSED_LANES];
  guint nl = 0;
  for (guint i = 0; i < t->n_subs; i++) {
    anode_t *m = t->subs[i];
    if (m->share || m->fused) continue;
    const col_t *c = NULL;
    if (m->g->kind != IXIA_AGG_COUNT) {
      c = column(A, m);
      if (!c) continue; /* nothing indexed under its field: nothing to add */
      if (c->mstart || c->width != 8) return FALSE;
    }
    lanes[nl++] = (lane_t){.n = m, .c = c};
  }
  /* One sum lane (with its avg, min and max: the common shape) takes
   * keyed_block, which reserves buckets only when it makes one. (By kind:
   * before the block's first bucket the lanes' arrays are unset.) */
  const lane_t *one = nl ? &lanes[0] : NULL;
  if (nl == 1 && one->c && (one->n->g->kind == IXIA_AGG_SUM || one->n->g->kind == IXIA_AGG_AVG)) {
    *ok = keyed_block(A, t, lanes, nl, tc, mask);
    return TRUE;
  }
  *ok = FALSE;
  if (t->b_count->len && !lanes_reserve(A, lanes, nl, t->b_count->len - 1)) return TRUE;
  guint64 *bcount = (guint64 *)(void *)t->b_count->data;
  const guint32 *direct = (const guint32 *)(void *)t->direct->data;
  guint32 ndirect = t->direct->len;
  const guint32 *ids = tc->v1.u;
  for (guint w = 0; w < BLOCK_WORDS; w++) {
    for (guint64 m = mask[w] & tc->has[w]; m; m &= m - 1) {
      guint s = w << 6 | (guint)__builtin_ctzll(m);
      guint32 key = ids[s];
      guint32 b1 = key < ndirect ? direct[key] : 0;
      if (G_UNLIKELY(!b1)) {
        gint64 nb = bucket_of(A, t, 0, key);
        if (nb < 0 || !lanes_reserve(A, lanes, nl, (guint32)nb)) return TRUE;
        bcount = (guint64 *)(void *)t->b_count->data;
        direct = (const guint32 *)(void *)t->direct->data;
        ndirect = t->direct->len;
        b1 = (guint32)nb + 1;
      }
      guint32 b = b1 - 1;
      bcount[b]++;
      for (guint i = 0; i < nl; i++) {
        lane_t *l = &lanes[i];
        if (!l->c) {
          l->cnt[b]++; /* COUNT */
          continue;
        }
        if (!(l->c->has[w] >> (s & 63) & 1)) continue;
        double x = l->c->v1.d[s];
        if (l->xs) {
          cell_add(&l->cells[b], &l->xs[b], x);
        } else if (l->cnt[b]++ == 0 || (l->n->g->kind == IXIA_AGG_MIN ? x < l->ext[b] : x > l->ext[b])) {
          l->ext[b] = x;
        }
      }
    }
  }
  *ok = TRUE;
  return TRUE;
}

gboolean ixia_idx_agg_block(ixia_idx_agg_t *A, guint32 block, const guint64 *mask) {
  const ixia_query_t *q = A->s->q;
  if (block != A->block) {
    for (guint i = 0; i < q->n_agg_fields; i++) {
      ixia_idx_blk_unref(A->cols[i]);
      A->cols[i] = NULL;
      field_t *f = A->fields[i];
      if (!f || f->type == IXIA_FIELD_TEXT) continue;
      A->cols[i] = ixia_idx_search_column(A->s, f, block);
      if (!A->cols[i]) return FALSE;
    }
    A->block = block;
  }
  /* (slot, bucket 0) pairs of the matches, for the nodes the fused pass
   * does not take, built once. */
  apair_t *tp = NULL;
  guint np = 0;
  for (guint i = 0; i < A->n_top; i++) {
    gboolean ok;
    if (A->top[i]->fusable && fused_block(A, A->top[i], mask, &ok)) {
      if (!ok) return FALSE;
      continue;
    }
    if (!tp) {
      g_array_set_size(A->top_pairs, BLOCK_SLOTS);
      tp = (apair_t *)(void *)A->top_pairs->data;
      for (guint w = 0; w < BLOCK_WORDS; w++)
        for (guint64 m = mask[w]; m; m &= m - 1)
          tp[np++] = (apair_t){(guint16)(w << 6 | (guint)__builtin_ctzll(m)), 0};
      g_array_set_size(A->top_pairs, np);
      memcpy(A->mask, mask, sizeof A->mask);
    }
    if (np && !add_pairs(A, A->top[i], tp, np, 1)) return FALSE;
  }
  return TRUE;
}

/* ------------------------------------------------------------ finishing */

/* The bytes a bucket key stands for: the dictionary value or the number. */
static gboolean key_bytes(ixia_idx_agg_t *A, anode_t *n, guint64 key, guint8 *num, const guint8 **p,
                          guint32 *len) {
  switch (n->g->kind) {
    case IXIA_AGG_RANGE:
    case IXIA_AGG_FILTERS:
      ixia_bytes_put32(num, (guint32)key); /* the range's or filter's index */
      *p = num;
      *len = 4;
      return TRUE;
    case IXIA_AGG_FILTER:
      *p = num;
      *len = 0;
      return TRUE;
    case IXIA_AGG_HISTOGRAM:
    case IXIA_AGG_DATE_HISTOGRAM:
      ixia_bytes_put64(num, key); /* the bucket start, encoded */
      *p = num;
      *len = IXIA_NUM_BYTES;
      return TRUE;
    default:
      break;
  }
  if (n->field->numeric) {
    ixia_bytes_put64(num, key);
    *p = num;
    *len = IXIA_NUM_BYTES;
    return TRUE;
  }
  /* Values are never freed while the index is open: the view outlives the
   * lock, which only guards the array holding it. */
  gboolean ok = FALSE;
  g_rw_lock_reader_lock(&A->s->idx->dict_lock);
  if (key < n->field->vv->len) {
    const ixia_val_t *v = &g_array_index(n->field->vv, ixia_val_t, key);
    *p = v->p ? v->p : (const guint8 *)"";
    *len = v->len;
    ok = TRUE;
  }
  g_rw_lock_reader_unlock(&A->s->idx->dict_lock);
  return ok;
}

static gboolean finish_node(ixia_idx_agg_t *A, anode_t *n, ixia_agg_cell_t *cell, guint32 pb);

static gboolean finish_terms(ixia_idx_agg_t *A, anode_t *n, ixia_agg_cell_t *cell, guint32 pb,
                             GArray *mine) {
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < mine->len; i++) {
    guint32 b = g_array_index(mine, guint32, i);
    guint8 num[8];
    const guint8 *kp;
    guint32 kl;
    if (!key_bytes(A, n, g_array_index(n->b_key, guint64, b), num, &kp, &kl)) continue;
    ixia_agg_cell_t *subs = ixia_aggs_cell_bucket(A->aggs, n->g, cell, kp, kl,
                                                 g_array_index(n->b_count, guint64, b), A->s->err);
    if (!subs) return FALSE;
    for (guint k = 0; ok && k < n->n_subs; k++)
      ok = finish_node(A, n->subs[k], ixia_aggs_cell_sub(subs, k), b);
  }
  (void)pb;
  return ok;
}

/* A top_hits node's best hits of parent bucket pb, with keys, versions
 * and sort values. */
static gboolean finish_top_hits(ixia_idx_agg_t *A, anode_t *n, ixia_agg_cell_t *cell, guint32 pb) {
  ixia_idx_sort_t *t = pb < n->topk->len ? n->topk->pdata[pb] : NULL;
  if (!t) return TRUE;
  GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
  guint64 e, as_of;
  gboolean ok = ixia_idx_sort_finish(t, NULL, hits, &e, &as_of);
  ixia_agg_hit_t *hs = g_new0(ixia_agg_hit_t, MAX(hits->len, 1));
  GPtrArray *vals = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
  for (guint i = 0; ok && i < hits->len; i++) {
    const ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
    GPtrArray *v = ixia_idx_hit_sort_bytes(h);
    g_ptr_array_add(vals, v);
    hs[i] = (ixia_agg_hit_t){h->key, h->version, (GBytes *const *)v->pdata};
  }
  ixia_agg_summary_t s = {0};
  s.hits = hs;
  s.n_hits = hits->len;
  if (ok) ok = ixia_aggs_cell_merge(A->aggs, n->g, cell, &s, A->s->err);
  g_free(hs);
  g_ptr_array_unref(vals);
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  return ok;
}

static gboolean finish_node(ixia_idx_agg_t *A, anode_t *n, ixia_agg_cell_t *cell, guint32 pb) {
  const ixia_agg_t *g = n->g;
  if (g->kind == IXIA_AGG_TOP_HITS) return finish_top_hits(A, n, cell, pb);
  if (ixia_agg_is_bucket(g->kind)) {
    if (!n->field && g->kind != IXIA_AGG_FILTER && g->kind != IXIA_AGG_FILTERS) return TRUE;
    /* The buckets of this parent bucket. */
    GArray *mine = g_array_new(FALSE, FALSE, sizeof(guint32));
    for (guint32 b = 0; b < n->b_parent->len; b++)
      if (g_array_index(n->b_parent, guint32, b) == pb) g_array_append_val(mine, b);
    gboolean ok = finish_terms(A, n, cell, pb, mine);
    g_array_free(mine, TRUE);
    return ok;
  }
  const anode_t *src = n->share ? n->share : n;
  if (pb >= src->n->len) return TRUE; /* nothing accumulated */
  ixia_agg_summary_t s = {0};
  s.n = g_array_index(src->n, guint64, pb);
  if (s.n == 0) return TRUE;
  guint64 *hashes = NULL;
  switch (g->kind) {
    case IXIA_AGG_SUM:
    case IXIA_AGG_AVG:
      ixia_xsum_into(&g_array_index(src->sum, ixia_xsum_t, pb), &s.sum);
      break;
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX:
      s.ext = g_array_index(n->ext, double, pb);
      break;
    case IXIA_AGG_STATS:
      ixia_xsum_into(&g_array_index(n->sum, ixia_xsum_t, pb), &s.sum);
      s.ext = g_array_index(n->ext, double, pb);
      s.max = g_array_index(n->ext2, double, pb);
      break;
    case IXIA_AGG_PERCENTILES: {
      GArray *a = n->vals->pdata[pb];
      s.values = a ? (const double *)(void *)a->data : NULL;
      s.n = a ? a->len : 0;
      break;
    }
    case IXIA_AGG_CARDINALITY: {
      gpointer set = n->card->pdata[pb];
      if (!set) break;
      if (n->field->numeric) {
        GHashTable *h = set;
        hashes = g_new(guint64, g_hash_table_size(h) + 1);
        GHashTableIter it;
        gpointer k;
        g_hash_table_iter_init(&it, h);
        while (g_hash_table_iter_next(&it, &k, NULL)) {
          guint8 num[8];
          ixia_bytes_put64(num, *(guint64 *)k);
          hashes[s.n_hashes++] = ixia_val_hash(num, 8);
        }
      } else {
        roaring_bitmap_t *r = set;
        guint64 nv = roaring_bitmap_get_cardinality(r);
        guint32 *vids = g_new(guint32, nv + 1);
        roaring_bitmap_to_uint32_array(r, vids);
        hashes = g_new(guint64, nv + 1);
        g_rw_lock_reader_lock(&A->s->idx->dict_lock);
        for (guint64 i = 0; i < nv; i++) {
          if (vids[i] >= n->field->vv->len) continue;
          const ixia_val_t *v = &g_array_index(n->field->vv, ixia_val_t, vids[i]);
          hashes[s.n_hashes++] = ixia_val_hash(v->p, v->len);
        }
        g_rw_lock_reader_unlock(&A->s->idx->dict_lock);
        g_free(vids);
      }
      s.hashes = hashes;
      break;
    }
    default:
      break;
  }
  gboolean ok = ixia_aggs_cell_merge(A->aggs, g, cell, &s, A->s->err);
  ixia_fsum_clear(&s.sum);
  g_free(hashes);
  return ok;
}

gboolean ixia_idx_agg_finish(ixia_idx_agg_t *A) {
  for (guint i = 0; i < A->n_top; i++)
    if (!cells_fold(A, A->top[i])) return FALSE;
  for (guint i = 0; i < A->n_top; i++)
    if (!finish_node(A, A->top[i], ixia_aggs_top_cell(A->aggs, i), 0)) return FALSE;
  return TRUE;
}
