/* Sorted pages: one shard's first `limit` matches in the order of the
 * request's sort, after a cursor, read from the column blocks.
 *
 * Two walks feed the page. When the first sort key is a numeric field with
 * points and the filter matches many documents, the points are walked in
 * sort order from the cursor and the filter is checked on them a chunk at
 * a time (points_walk): the page is certain after a few hundred points
 * instead of every match; the documents already offered are kept in a
 * small open-addressing id set. Otherwise (or when that walk grows too
 * long) the search walks its matches block by block as for any query. For
 * each match this room computes the sort values from the columns (a
 * number's order-preserving key, a keyword's bytes through the dictionary,
 * the score) and keeps the candidates that can still be on the page: a
 * top-k that keeps the best k + SLACK by value, pruned against the current
 * threshold, so most matches cost one comparison of their first sort
 * value. Candidates are sorted through pointers (each holds every sort
 * value), and the page is ordered by key only within runs of equal values.
 * The query API merges the shards' pages.
 *
 * Ties by key. After every sort key, ties are broken by the document key,
 * which is not in the columns. Candidates tied on every value are grouped:
 * the group at the page's boundary, and the group tied with the cursor
 * (whose members must have keys after the cursor's), are resolved by key:
 * a multi-get of their id records when small, otherwise a walk of the
 * table's records in key order (K keys) picking the group's members, which
 * stops once the page is full (a bool or a low-cardinality keyword sort
 * makes groups of half the table).
 *
 * Stable positions. A later page positions documents by their values as
 * of the first page (idx_history.c): documents changed since are sorted by
 * their old values from the history, everything else by the columns. A
 * batch published while the walk runs is found at the end (entries after
 * as_of that were not in the overlay at the start): those documents are
 * taken out and offered again with their old values; the SLACK candidates
 * kept beyond k are what makes that exact, and a walk that loses more than
 * SLACK candidates this way is run again. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"
#include "json.h"

/* Candidates kept beyond the page, for documents taken out at the end:
 * SLACK for a walk of every match, POINTS_SLACK for a walk of the points,
 * which stops as soon as it holds that many (each one costs the points
 * walked to find it; a walk that loses more is run again all the same). */
#define SLACK 64
#define POINTS_SLACK 8
/* Tie groups up to this size are resolved with a multi-get of their id
 * records; larger ones walk the table's records in key order. */
#define MULTIGET_MAX 4096
/* A bounded search (on an I/O thread) gives up past these: points walked,
 * changes since as_of (twice that once a walk has run), members of a tie
 * group resolved by key. */
#define BOUNDED_POINTS 4096
#define BOUNDED_OVERLAY 1024
#define BOUNDED_GROUP 256

typedef struct {
  guint8 has;
  guint64 num;     /* numbers and scores: order-preserving key */
  const guint8 *p; /* keyword and bool values: dictionary bytes (never freed while open) */
  guint32 len;
} sval_t;

typedef struct {
  guint32 id;
  sval_t v[IXIA_MAX_SORT_KEYS];
} cand_t;

typedef struct {
  const ixia_sort_key_t *k;
  field_t *f;        /* NULL: _score, or a field nothing was indexed under */
  gboolean score;
  gboolean bytes;    /* keyword and bool: compared as dictionary bytes */
  blk_t *col;        /* the current block's column */
} skey_t;

struct ixia_idx_sort {
  ixia_idx_search_t *s;
  ixia_idx_exec_t *ex;
  skey_t keys[IXIA_MAX_SORT_KEYS];
  guint nk;
  guint k;
  guint slack; /* SLACK or POINTS_SLACK: candidates kept beyond k */
  gboolean has_after;
  cand_t after;
  char *after_key;
  gsize after_key_len;
  roaring_bitmap_t *tied_after; /* matches whose values equal the cursor's */
  GArray *cand;                 /* cand_t */
  gboolean have_thr;
  cand_t thr;
  guint cap;
  guint64 epoch, as_of;
  GHashTable *overlay; /* id -> hstate_t*: documents changed after as_of */
  roaring_bitmap_t *overlay_ids;
  guint32 block;
  gboolean need_dict;
  gboolean no_history;       /* top_hits: ranks what it is offered, as of now */
  guint64 accepted;          /* documents offered that are after the cursor */
  ixia_idx_scorer_t *scorer; /* when the query scores: _score keys and hits' scores */
  gboolean ok;               /* FALSE once scoring failed (err set) */
  gboolean bounded;          /* o->bounded: give up rather than read much */
  gboolean gave_up;          /* it did: the page is not there */
};

/* ------------------------------------------------------------ values */

static int sval_cmp(const skey_t *k, const sval_t *a, const sval_t *b) {
  if (!a->has || !b->has) {
    if (a->has == b->has) return 0;
    int later = k->k->missing_first ? -1 : 1;
    return a->has ? -later : later;
  }
  int c;
  if (k->bytes) c = ixia_val_cmp(a->p, a->len, b->p, b->len);
  else c = a->num < b->num ? -1 : a->num > b->num;
  return k->k->desc ? -c : c;
}

static int cand_cmp(const ixia_idx_sort_t *S, const cand_t *a, const cand_t *b) {
  for (guint i = 0; i < S->nk; i++) {
    int c = sval_cmp(&S->keys[i], &a->v[i], &b->v[i]);
    if (c) return c;
  }
  return 0;
}

static gint cand_pcmp(gconstpointer a, gconstpointer b, gpointer S) {
  return cand_cmp(S, *(const cand_t *const *)a, *(const cand_t *const *)b);
}

/* Sorts the candidates by value. A candidate holds every sort key's value
 * (IXIA_MAX_SORT_KEYS of them, 264 bytes), and GLib's sort moved them
 * whole: 6% of the shard's CPU on a sorted page of 100 in memmove. So
 * pointers are sorted and the candidates moved once; and a walk of the
 * points offers them in the first key's order, so one pass finds them
 * sorted already most of the time. */
static void sort_cands(ixia_idx_sort_t *S) {
  guint n = S->cand->len;
  cand_t *a = (cand_t *)(void *)S->cand->data;
  guint i = 1;
  while (i < n && cand_cmp(S, &a[i - 1], &a[i]) <= 0) i++;
  if (i >= n) return;
  const cand_t **p = g_new(const cand_t *, n);
  for (i = 0; i < n; i++) p[i] = &a[i];
  qsort_r(p, n, sizeof *p, cand_pcmp, S);
  cand_t *out = g_new(cand_t, n);
  for (i = 0; i < n; i++) out[i] = *p[i];
  memcpy(a, out, n * sizeof *out);
  g_free(out);
  g_free(p);
}

/* The dictionary bytes of value id vid (caller holds dict_lock). */
static void dict_bytes(const field_t *f, guint32 vid, sval_t *out) {
  if (vid < f->vv->len) {
    const ixia_val_t *v = &g_array_index(f->vv, ixia_val_t, vid);
    out->p = v->p ? v->p : (const guint8 *)"";
    out->len = v->len;
    out->has = 1;
  }
}

/* Key i's value from a list of values of its field: the smallest ascending,
 * the largest descending. Numbers come as doubles, others as value ids. */
static void pick(const ixia_idx_sort_t *S, guint i, const void *vals, guint32 n, gboolean numeric,
                 sval_t *out) {
  const skey_t *k = &S->keys[i];
  memset(out, 0, sizeof *out);
  for (guint32 j = 0; j < n; j++) {
    sval_t c = {0};
    if (numeric) {
      c.has = 1;
      c.num = num_key(((const double *)vals)[j]);
    } else {
      dict_bytes(k->f, ((const guint32 *)vals)[j], &c);
    }
    if (c.has && (!out->has || (sval_cmp(k, &c, out) < 0))) *out = c;
  }
}

/* Key i from a document's record pairs (the history's old values). */
static void pick_pairs(const ixia_idx_sort_t *S, guint i, const hstate_t *h, sval_t *out) {
  const skey_t *k = &S->keys[i];
  memset(out, 0, sizeof *out);
  if (!k->f) return;
  for (guint j = 0; j < h->n; j++) {
    if (h->pairs[j].field != k->f->id) continue;
    sval_t c = {0};
    if (k->f->numeric) {
      c.has = 1;
      c.num = h->pairs[j].val;
    } else {
      dict_bytes(k->f, (guint32)h->pairs[j].val, &c);
    }
    if (c.has && (!out->has || sval_cmp(k, &c, out) < 0)) *out = c;
  }
}

/* Key i of the document in slot `slot` of the current block. */
static void key_of_slot(const ixia_idx_sort_t *S, guint i, guint slot, double score, sval_t *out) {
  const skey_t *k = &S->keys[i];
  if (k->score) {
    *out = (sval_t){1, num_key(score), NULL, 0};
    return;
  }
  if (!k->col) {
    memset(out, 0, sizeof *out);
    return;
  }
  const col_t *c = k->col->col;
  if (k->f->numeric && !c->mstart) {
    /* Single-valued block: straight from the array. */
    gboolean has = c->has[slot >> 6] >> (slot & 63) & 1;
    *out = (sval_t){has, has ? num_key(c->v1.d[slot]) : 0, NULL, 0};
    return;
  }
  guint32 n;
  const void *v = col_slot(c, slot, &n);
  pick(S, i, v, n, k->f->numeric, out);
}

/* ------------------------------------------------------------- setup */

static void load_columns(ixia_idx_sort_t *S, guint32 block, gboolean *ok);
static void fill(ixia_idx_sort_t *S, cand_t *c, guint slot, const hstate_t *h, guint from);
static void offer(ixia_idx_sort_t *S, const cand_t *c);
static gboolean doc_matches(ixia_idx_sort_t *S, guint32 id, gboolean *ok);
static gboolean rewalk(ixia_idx_sort_t *S, const roaring_bitmap_t *set);

/* A sorter of k documents by keys, without cursor or history, with room
 * for `room` candidates from the start. */
static ixia_idx_sort_t *sorter_new(ixia_idx_search_t *s, const ixia_sort_key_t *keys, guint nk,
                                   guint k, guint room) {
  ixia_idx_sort_t *S = g_new0(ixia_idx_sort_t, 1);
  S->s = s;
  S->nk = nk;
  S->k = k;
  S->slack = SLACK;
  S->cap = MAX(2 * (S->k + SLACK), 256);
  S->cand = g_array_sized_new(FALSE, FALSE, sizeof(cand_t), room ? MAX(room, S->cap) : 0);
  S->tied_after = roaring_bitmap_create();
  S->block = G_MAXUINT32;
  S->ok = TRUE;
  for (guint i = 0; i < S->nk; i++) {
    skey_t *sk = &S->keys[i];
    sk->k = &keys[i];
    sk->score = keys[i].field == NULL;
    if (!sk->score) {
      sk->f = ixia_idx_field_lookup(s->idx, s->table, keys[i].field);
      sk->bytes = !ixia_field_type_numeric(keys[i].field->type);
      S->need_dict = S->need_dict || sk->bytes;
    }
  }
  if (s->q->scoring) {
    S->scorer = ixia_idx_scorer_new(s, &S->ok);
    if (!S->ok) {
      ixia_idx_sort_free(S);
      return NULL;
    }
  }
  return S;
}

ixia_idx_sort_t *ixia_idx_topk_new(ixia_idx_search_t *s, const ixia_sort_key_t *keys, guint nk,
                                   guint k) {
  ixia_idx_sort_t *S = sorter_new(s, keys, nk, k, 0);
  if (S) S->no_history = TRUE;
  return S;
}

gboolean ixia_idx_topk_offer(ixia_idx_sort_t *S, guint32 id) {
  gboolean ok = TRUE;
  load_columns(S, id >> BLOCK_BITS, &ok);
  if (!ok) return FALSE;
  cand_t c;
  c.id = id;
  if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
  fill(S, &c, id & (BLOCK_SLOTS - 1), NULL, 0);
  if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
  offer(S, &c);
  return S->ok;
}

ixia_idx_sort_t *ixia_idx_sort_new(ixia_idx_search_t *s, const ixia_idx_search_opts_t *o,
                                   ixia_idx_exec_t *ex) {
  const ixia_query_t *q = s->q;
  /* Room for the candidates up to their first prune from the start:
   * growing by doubling moved them (264 bytes each) four or five times a
   * page. (Not for a top_hits sorter: an aggregation makes one per
   * bucket.) */
  ixia_idx_sort_t *S = sorter_new(s, q->sort, q->n_sort, o->limit, o->limit + SLACK + 16);
  if (!S) return NULL;
  S->ex = ex;
  /* Positions: as of the cursor's sequence, or as of now. */
  ixia_idx_t *idx = s->idx;
  S->epoch = ixia_idx_history_epoch(idx->history);
  S->as_of = (guint64)atomic_load(&idx->publish_seq);
  if (o->as_of_epoch) {
    S->epoch = o->as_of_epoch;
    S->as_of = o->as_of;
  }
  /* Bounded: more changes since as_of than it would read gives up at once,
   * before they are all gathered (the history may hold hundreds of
   * thousands, walked under its lock). */
  gboolean over = FALSE;
  S->overlay = ixia_idx_history_since(idx->history, S->epoch, S->as_of, o->bounded ? BOUNDED_OVERLAY : 0,
                                      &over, s->err);
  if (!S->overlay) {
    ixia_idx_sort_free(S);
    return NULL;
  }
  S->overlay_ids = roaring_bitmap_create();
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, S->overlay);
  while (g_hash_table_iter_next(&it, &key, NULL)) roaring_bitmap_add(S->overlay_ids, GPOINTER_TO_UINT(key));
  if (o->after) {
    /* The cursor's values as this shard compares them: keyword bytes are
     * the cursor's own (compared, never looked up). */
    S->has_after = TRUE;
    for (guint i = 0; i < S->nk; i++) {
      GBytes *b = o->after->values[i];
      sval_t *v = &S->after.v[i];
      if (!b) continue;
      gsize n;
      const guint8 *p = g_bytes_get_data(b, &n);
      if (!S->keys[i].bytes && n != IXIA_NUM_BYTES) {
        ixia_error_set(s->err, IXIA_EINVAL, "after: sort value %u is not a number", i);
        ixia_idx_sort_free(S);
        return NULL;
      }
      v->has = 1;
      v->p = p;
      v->len = (guint32)n;
      if (!S->keys[i].bytes) v->num = ixia_bytes_get64(p);
    }
    S->after_key = g_strndup(o->after->key, o->after->key_len);
    S->after_key_len = o->after->key_len;
  }
  /* Bounded: only a walk of the first key's points near the page. */
  S->bounded = o->bounded;
  if (S->bounded && (over || !ixia_idx_sort_points_ok(S))) S->gave_up = TRUE;
  return S;
}

gboolean ixia_idx_sort_gave_up(const ixia_idx_sort_t *S) { return S && S->gave_up; }

void ixia_idx_sort_free(ixia_idx_sort_t *S) {
  if (!S) return;
  for (guint i = 0; i < S->nk; i++) ixia_idx_blk_unref(S->keys[i].col);
  g_array_free(S->cand, TRUE);
  roaring_bitmap_free(S->tied_after);
  if (S->overlay_ids) roaring_bitmap_free(S->overlay_ids);
  if (S->overlay) g_hash_table_destroy(S->overlay);
  g_free(S->after_key);
  ixia_idx_scorer_free(S->scorer);
  g_free(S);
}

/* ---------------------------------------------------------- offering */

/* Keeps the best k + slack candidates (and everything tied with the last
 * of them); the rest is dropped and the threshold tightened. */
static void prune(ixia_idx_sort_t *S) {
  sort_cands(S);
  guint keep = S->k + S->slack;
  if (S->cand->len > keep) {
    S->thr = g_array_index(S->cand, cand_t, keep - 1);
    S->have_thr = TRUE;
    guint end = keep;
    while (end < S->cand->len && cand_cmp(S, &g_array_index(S->cand, cand_t, end), &S->thr) == 0) end++;
    g_array_set_size(S->cand, end);
  }
  if (S->cand->len * 4 >= S->cap * 3) S->cap *= 2; /* a large tie group */
}

/* Offers one document whose values are all in c. */
static void offer(ixia_idx_sort_t *S, const cand_t *c) {
  if (S->has_after) {
    int r = cand_cmp(S, c, &S->after);
    if (r < 0) return; /* before the cursor */
    if (r > 0) S->accepted++;
    if (r == 0) {
      roaring_bitmap_add(S->tied_after, c->id);
      return;
    }
  } else {
    S->accepted++;
  }
  if (S->have_thr && cand_cmp(S, c, &S->thr) > 0) return;
  g_array_append_val(S->cand, *c);
  if (S->cand->len >= S->cap) prune(S);
}

static void load_columns(ixia_idx_sort_t *S, guint32 block, gboolean *ok) {
  if (block == S->block) return;
  for (guint i = 0; i < S->nk; i++) {
    skey_t *k = &S->keys[i];
    ixia_idx_blk_unref(k->col);
    k->col = NULL;
    if (!k->f || !*ok) continue;
    k->col = ixia_idx_column(S->s->idx, k->f->id, k->f->numeric ? 8 : 4, block, S->s->err);
    if (!k->col) *ok = FALSE;
  }
  S->block = block;
}

static double score_of(ixia_idx_sort_t *S, guint32 id) {
  return S->scorer && S->ok ? ixia_idx_score(S->scorer, id, &S->ok) : 0.0;
}

/* All values of one document into c: from its old state when it changed
 * after as_of, else from the current block's columns. The score is always
 * today's (statistics move with every write anyway). */
static void fill(ixia_idx_sort_t *S, cand_t *c, guint slot, const hstate_t *h, guint from) {
  for (guint i = from; i < S->nk; i++) {
    if (h && !h->current && !S->keys[i].score) pick_pairs(S, i, h, &c->v[i]);
    else key_of_slot(S, i, slot, S->keys[i].score ? score_of(S, c->id) : 0.0, &c->v[i]);
  }
}

gboolean ixia_idx_sort_block(ixia_idx_sort_t *S, guint32 block, const guint64 *mask) {
  gboolean ok = TRUE;
  load_columns(S, block, &ok);
  if (!ok) return FALSE;
  guint64 changed[BLOCK_WORDS] = {0};
  if (S->overlay_ids) ixia_idx_bm_block(S->overlay_ids, block, changed);
  if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
  const skey_t *k0 = &S->keys[0];
  for (guint w = 0; w < BLOCK_WORDS; w++) {
    for (guint64 m = mask[w]; m; m &= m - 1) {
      guint slot = w << 6 | (guint)__builtin_ctzll(m);
      cand_t c;
      c.id = block << BLOCK_BITS | slot;
      const hstate_t *h = NULL;
      if (changed[w] >> (slot & 63) & 1) h = g_hash_table_lookup(S->overlay, GUINT_TO_POINTER(c.id));
      if (h) {
        fill(S, &c, slot, h, 0);
      } else {
        /* Most documents lose on their first value, against the threshold
         * or the cursor. */
        key_of_slot(S, 0, slot, k0->score ? score_of(S, c.id) : 0.0, &c.v[0]);
        if (S->have_thr && sval_cmp(k0, &c.v[0], &S->thr.v[0]) > 0) continue;
        if (S->has_after && sval_cmp(k0, &c.v[0], &S->after.v[0]) < 0) continue;
        fill(S, &c, slot, NULL, 1);
      }
      offer(S, &c);
    }
  }
  if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
  return S->ok;
}

/* ------------------------------------------------------- by points */

/* Points visited per chunk. */
#define POINTS_CHUNK 256

gboolean ixia_idx_sort_points_ok(const ixia_idx_sort_t *S) {
  const skey_t *k0 = &S->keys[0];
  /* The first key a numeric field with values last; a cursor inside the
   * documents without a value leaves nothing for the points to find. */
  return S->k > 0 && ixia_sort_key_walkable(k0->k) && k0->f && k0->f->numeric &&
         (!S->has_after || S->after.v[0].has);
}

/* Which of ids (POINTS_CHUNK at most, any order) match, into pass[i]: the
 * members of the candidate set, then their checks (ixia_idx_check_ids:
 * points come in value order, so their ids are scattered over the table,
 * and building a bitmap of the chunk to walk its blocks cost more than
 * the checks). */
static gboolean chunk_matches(ixia_idx_sort_t *S, const guint32 *ids, guint n, gboolean *pass) {
  const roaring_bitmap_t *set = S->ex->lead ? S->ex->lead : S->s->live->bm;
  guint32 in[POINTS_CHUNK];
  guint at[POINTS_CHUNK];
  gboolean ok_ids[POINTS_CHUNK];
  guint m = 0;
  for (guint i = 0; i < n; i++) {
    pass[i] = FALSE;
    if (roaring_bitmap_contains(set, ids[i])) in[m] = ids[i], at[m++] = i;
  }
  if (!ixia_idx_check_ids(S->s, S->ex->checks, in, m, ok_ids)) return FALSE;
  for (guint i = 0; i < m; i++) pass[at[i]] = ok_ids[i];
  return TRUE;
}

/* The documents a walk of the points has offered (a multi-valued document
 * meets the walk at each of its values and is offered at the first): a
 * few hundred ids scattered over the table, in an open-addressing set
 * (inserts into a roaring bitmap were 5% of the shard's CPU on a sorted
 * page of 100). */
typedef struct {
  guint32 *slot; /* IDSET_EMPTY: free */
  guint bits, n;
  gboolean has_empty; /* the id IDSET_EMPTY itself */
} idset_t;
#define IDSET_EMPTY G_MAXUINT32
/* Most points one walk visits (a full walk of the matches beyond). */
#define WALK_MAX (G_GUINT64_CONSTANT(1) << 28)

static void idset_init(idset_t *s, guint bits) {
  s->slot = g_new(guint32, 1u << bits);
  memset(s->slot, 0xff, sizeof(guint32) << bits);
  s->bits = bits;
  s->n = 0;
  s->has_empty = FALSE;
}

static gboolean idset_add(idset_t *s, guint32 id);

static void idset_grow(idset_t *s) {
  /* (A walk visits at most WALK_MAX points, so the set holds at most that
   * many ids and bits stays under 30: the shift in idset_add needs < 32.) */
  g_assert(s->bits < 30);
  idset_t big;
  idset_init(&big, s->bits + 1);
  for (guint i = 0; i < 1u << s->bits; i++)
    if (s->slot[i] != IDSET_EMPTY) idset_add(&big, s->slot[i]);
  big.has_empty = s->has_empty;
  g_free(s->slot);
  *s = big;
}

/* FALSE when id was in the set already. */
static gboolean idset_add(idset_t *s, guint32 id) {
  if (id == IDSET_EMPTY) {
    gboolean had = s->has_empty;
    s->has_empty = TRUE;
    return !had;
  }
  if (2 * (s->n + 1) > 1u << s->bits) idset_grow(s);
  guint32 mask = (1u << s->bits) - 1;
  for (guint32 j = (id * 2654435761u) >> (32 - s->bits);; j = (j + 1) & mask) {
    if (s->slot[j] == id) return FALSE;
    if (s->slot[j] == IDSET_EMPTY) {
      s->slot[j] = id;
      s->n++;
      return TRUE;
    }
  }
}

/* Walks the first key's points in sort order from the cursor, checking
 * the filter a chunk at a time, until the best k + POINTS_SLACK are
 * certain: a 30% filter sorted by price finds a page of 100 in a few
 * hundred points instead of reading every match. Each point checked costs
 * a few cache misses (its blocks are scattered), so the chunks are sized
 * from the share of points that passed so far: the first holds twice the
 * candidates wanted, the next what the pass rate says is still missing
 * plus a quarter. Documents changed since as_of are offered by their old
 * values, apart. Gives up (a full walk then) when the walk grows past a
 * quarter of the points (or WALK_MAX), or for a bounded search past
 * BOUNDED_POINTS (the search then gives up instead). */
static gboolean points_walk(ixia_idx_sort_t *S, gboolean *done) {
  *done = FALSE;
  const skey_t *k0 = &S->keys[0];
  ixia_points_t *pts = k0->f->points;
  gboolean desc = k0->k->desc;
  guint64 key = desc ? G_MAXUINT64 : 0, visited = 0;
  /* (At most WALK_MAX points: the id set of those offered stays small.) */
  guint64 budget = MIN(ixia_points_size(pts) / 4 + 4096, WALK_MAX);
  if (S->bounded) budget = BOUNDED_POINTS;
  guint32 id = desc ? G_MAXUINT32 : 0;
  if (S->has_after) key = S->after.v[0].num, id = desc ? G_MAXUINT32 : 0;
  gboolean inclusive = TRUE, ok = TRUE, have_key = FALSE, stop = FALSE;
  guint64 cur = 0, passed = 0;
  guint64 keys[POINTS_CHUNK];
  guint32 ids[POINTS_CHUNK];
  S->slack = POINTS_SLACK;
  guint64 want = (guint64)S->k + S->slack;
  guint chunk = (guint)MIN(2 * want, POINTS_CHUNK);
  idset_t seen;
  idset_init(&seen, 9);
  gboolean pass[POINTS_CHUNK];
  while (ok && !stop) {
    guint n = ixia_points_next(pts, desc, key, id, inclusive, keys, ids, chunk);
    if (n == 0) break; /* every point seen: the documents without a value may be needed */
    inclusive = FALSE;
    key = keys[n - 1], id = ids[n - 1];
    if ((visited += n) > budget) break;
    ok = chunk_matches(S, ids, n, pass) && ixia_idx_deadline(S->s);
    for (guint i = 0; i < n; i++) passed += pass[i];
    if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
    for (guint i = 0; ok && i < n; i++) {
      if (have_key && keys[i] != cur && S->accepted >= want) {
        stop = TRUE; /* every later point sorts after the whole page */
        break;
      }
      cur = keys[i], have_key = TRUE;
      /* A multi-valued document first meets the walk at its sort value. */
      if (!pass[i] || roaring_bitmap_contains(S->overlay_ids, ids[i]) || !idset_add(&seen, ids[i]))
        continue;
      cand_t c;
      c.id = ids[i];
      /* The first key's value is the point's, and the column blocks are
       * read only for the other keys (a document changed since the walk
       * began is offered again by fix_late). A walk from the end meets a
       * document first at its sort value (its smallest ascending, largest
       * descending); one from a cursor may meet a document with several
       * values at a later one, so that one's value comes from its column. */
      guint64 raw;
      guint from = !S->has_after || (ixia_docvals_get(k0->f->dv, ids[i], &raw) && raw != DV_MISSING8);
      if (from) c.v[0] = (sval_t){1, keys[i], NULL, 0};
      if (S->nk > from) {
        if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
        load_columns(S, ids[i] >> BLOCK_BITS, &ok);
        if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
        if (!ok) break;
        fill(S, &c, ids[i] & (BLOCK_SLOTS - 1), NULL, from);
      }
      offer(S, &c);
    }
    if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
    /* The points still wanted at the pass rate so far, plus a quarter (a
     * few more to close a run of equal values once the page is held). */
    guint64 missing = want > S->accepted ? want - S->accepted : 1;
    double rate = (double)(passed + 1) / (double)(visited + 1);
    chunk = (guint)CLAMP((double)missing / rate * 1.25 + 8, 16, POINTS_CHUNK);
  }
  g_free(seen.slot);
  if (!ok || !stop) return ok && S->ok;
  /* The documents changed since as_of, by their old values. */
  roaring_uint32_iterator_t *it = roaring_create_iterator(S->overlay_ids);
  if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
  for (; ok && it->has_value; roaring_advance_uint32_iterator(it)) {
    guint32 d = it->current_value;
    if (!doc_matches(S, d, &ok) || !ok) continue;
    if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
    load_columns(S, d >> BLOCK_BITS, &ok);
    if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
    cand_t c;
    c.id = d;
    if (ok) fill(S, &c, d & (BLOCK_SLOTS - 1), g_hash_table_lookup(S->overlay, GUINT_TO_POINTER(d)), 0);
    if (ok) offer(S, &c);
  }
  if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
  roaring_free_uint32_iterator(it);
  *done = ok;
  return ok && S->ok;
}

gboolean ixia_idx_sort_points(ixia_idx_sort_t *S, const roaring_bitmap_t *set, gboolean *used) {
  gboolean done = FALSE;
  gboolean ok = points_walk(S, &done);
  *used = ok && done;
  if (!ok || done) return ok;
  if (S->bounded) {
    S->gave_up = TRUE;
    return TRUE;
  }
  /* The points did not settle the page: every match, block by block. */
  S->accepted = 0;
  S->slack = SLACK;
  return rewalk(S, set);
}

/* ---------------------------------------------------- ties by key */

typedef struct {
  guint32 id;
  char *key;
  gint64 version;
} keyed_t;

static gint keyed_cmp(gconstpointer a, gconstpointer b) {
  return strcmp(((const keyed_t *)a)->key, ((const keyed_t *)b)->key);
}

/* Up to m members of a group with keys after `from` (NULL: from the
 * first), smallest keys first, into out (keyed_t). */
static gboolean group_by_key(ixia_idx_sort_t *S, const roaring_bitmap_t *group, const char *from,
                             gsize from_len, guint m, GArray *out) {
  ixia_idx_t *idx = S->s->idx;
  guint64 n = roaring_bitmap_get_cardinality(group);
  if (m == 0 || n == 0) return TRUE;
  if (n <= MULTIGET_MAX) {
    guint32 *ids = g_new(guint32, n);
    roaring_bitmap_to_uint32_array(group, ids);
    GArray *hits = g_array_new(FALSE, FALSE, sizeof(ixia_idx_hit_t));
    gboolean ok = ixia_idx_resolve_hits(idx, ids, (guint)n, hits, S->s->err);
    g_free(ids);
    GArray *all = g_array_new(FALSE, FALSE, sizeof(keyed_t));
    for (guint i = 0; ok && i < hits->len; i++) {
      ixia_idx_hit_t *h = &g_array_index(hits, ixia_idx_hit_t, i);
      if (from && strcmp(h->key, from) <= 0) continue;
      keyed_t kd = {h->id, h->key, h->version};
      h->key = NULL;
      g_array_append_val(all, kd);
    }
    ixia_idx_hits_clear(hits);
    g_array_free(hits, TRUE);
    g_array_sort(all, keyed_cmp);
    for (guint i = 0; i < all->len; i++) {
      keyed_t *kd = &g_array_index(all, keyed_t, i);
      if (i < m) g_array_append_val(out, *kd);
      else g_free(kd->key);
    }
    g_array_free(all, TRUE);
    return ok;
  }
  /* The table's records in key order, from the cursor's key. */
  GBytes *start = ixia_idx_doc_key(S->s->table->id, from ? from : "", from ? from_len : 0);
  gsize sl;
  const char *sp = g_bytes_get_data(start, &sl);
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  guint taken = 0;
  gboolean ok = TRUE;
  guint64 seen = 0;
  for (rocksdb_iter_seek(it, sp, sl); taken < m && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *key = rocksdb_iter_key(it, &kl);
    if (kl < 5 || memcmp(key, sp, 5) != 0) break;
    if (from && kl == sl && memcmp(key, sp, sl) == 0) continue;
    const char *v = rocksdb_iter_value(it, &vl);
    guint32 id;
    gint64 version;
    gboolean deleted;
    if (!ixia_idx_rec_decode(v, vl, &id, &version, &deleted, NULL)) {
      ok = ixia_error_set(S->s->err, IXIA_EINTERNAL, "corrupt document record in index");
      break;
    }
    if (deleted || !roaring_bitmap_contains(group, id)) continue;
    keyed_t kd = {id, ixia_memdup0(key + 5, kl - 5), version};
    g_array_append_val(out, kd);
    taken++;
    if (++seen % 4096 == 0 && !ixia_idx_deadline(S->s)) {
      ok = FALSE;
      break;
    }
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  g_bytes_unref(start);
  return ixia_error_from_rocksdb(S->s->err, rerr, "index scan") && ok;
}

/* ------------------------------------------------------ late changes */

/* Whether document id is a match of this search, checked alone. */
static gboolean doc_matches(ixia_idx_sort_t *S, guint32 id, gboolean *ok) {
  guint32 block = id >> BLOCK_BITS;
  guint64 mask[BLOCK_WORDS], bits[BLOCK_WORDS];
  ixia_idx_bm_block(S->ex->lead ? S->ex->lead : S->s->live->bm, block, bits);
  memset(mask, 0, sizeof mask);
  guint slot = id & (BLOCK_SLOTS - 1);
  mask[slot >> 6] = bits[slot >> 6] & (G_GUINT64_CONSTANT(1) << (slot & 63));
  for (guint i = 0; *ok && S->ex->checks && i < S->ex->checks->len; i++)
    *ok = ixia_idx_check_block(S->s, S->ex->checks->pdata[i], block, mask);
  return *ok && mask[slot >> 6] != 0;
}

/* Re-walks the whole set with the current overlay (a walk that lost too
 * many candidates to batches published meanwhile). */
static gboolean rewalk(ixia_idx_sort_t *S, const roaring_bitmap_t *set) {
  g_array_set_size(S->cand, 0);
  S->have_thr = FALSE;
  roaring_bitmap_clear(S->tied_after);
  roaring_uint32_iterator_t *it = roaring_create_iterator(set);
  guint64 mask[BLOCK_WORDS];
  gboolean ok = TRUE;
  while (ok && it->has_value) {
    guint32 block = it->current_value >> BLOCK_BITS;
    ixia_idx_bm_block(set, block, mask);
    for (guint i = 0; ok && S->ex->checks && i < S->ex->checks->len; i++)
      ok = ixia_idx_check_block(S->s, S->ex->checks->pdata[i], block, mask);
    if (ok) ok = ixia_idx_sort_block(S, block, mask);
    roaring_move_uint32_iterator_equalorlarger(it, (block + 1) << BLOCK_BITS);
  }
  roaring_free_uint32_iterator(it);
  return ok;
}

/* Documents changed by batches published during the walk: the walk may
 * have seen their new values; they are positioned by their old ones. */
static gboolean fix_late(ixia_idx_sort_t *S, const roaring_bitmap_t *set) {
  for (int attempt = 0;; attempt++) {
    gboolean over = FALSE;
    GHashTable *now = ixia_idx_history_since(S->s->idx->history, S->epoch, S->as_of,
                                             S->bounded ? 2 * BOUNDED_OVERLAY : 0, &over, S->s->err);
    if (!now) return FALSE;
    if (over) {
      /* Bounded, and many changes published during the walk. */
      g_hash_table_destroy(now);
      S->gave_up = TRUE;
      return TRUE;
    }
    roaring_bitmap_t *late = roaring_bitmap_create();
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, now);
    while (g_hash_table_iter_next(&it, &key, NULL))
      if (!roaring_bitmap_contains(S->overlay_ids, GPOINTER_TO_UINT(key))) roaring_bitmap_add(late, GPOINTER_TO_UINT(key));
    g_hash_table_destroy(S->overlay);
    S->overlay = now;
    roaring_bitmap_or_inplace(S->overlay_ids, late);
    if (roaring_bitmap_is_empty(late)) {
      roaring_bitmap_free(late);
      return TRUE;
    }
    /* Take them out; too many out of the kept candidates: walk again. */
    guint w = 0, removed = 0;
    for (guint i = 0; i < S->cand->len; i++) {
      cand_t *c = &g_array_index(S->cand, cand_t, i);
      if (roaring_bitmap_contains(late, c->id)) removed++;
      else g_array_index(S->cand, cand_t, w++) = *c;
    }
    g_array_set_size(S->cand, w);
    roaring_bitmap_andnot_inplace(S->tied_after, late);
    if (removed > S->slack && attempt < 3) {
      roaring_bitmap_free(late);
      if (S->bounded) {
        S->gave_up = TRUE;
        return TRUE;
      }
      S->slack = SLACK;
      if (!rewalk(S, set)) return FALSE;
      continue;
    }
    gboolean ok = TRUE;
    roaring_uint32_iterator_t *li = roaring_create_iterator(late);
    if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
    for (; ok && li->has_value; roaring_advance_uint32_iterator(li)) {
      guint32 id = li->current_value;
      if (!doc_matches(S, id, &ok) || !ok) continue;
      if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
      load_columns(S, id >> BLOCK_BITS, &ok);
      if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
      if (!ok) break;
      cand_t c;
      c.id = id;
      fill(S, &c, id & (BLOCK_SLOTS - 1), g_hash_table_lookup(S->overlay, GUINT_TO_POINTER(id)), 0);
      /* Offered past the threshold: the pruned ones are still worse. */
      gboolean had = S->have_thr;
      S->have_thr = FALSE;
      offer(S, &c);
      S->have_thr = had;
    }
    if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
    roaring_free_uint32_iterator(li);
    roaring_bitmap_free(late);
    return ok;
  }
}

/* ------------------------------------------------------------ the page */

/* A hit's sort values, packed: per value a byte (1: present, 0: missing),
 * then for a present one its length (4 bytes, host order) and its bytes;
 * into the hit's sort_small when they fit, else one allocation. A
 * GPtrArray and a GBytes per value (four allocations a hit, and as many
 * frees) were 11% of the shard's CPU on sorted pages of 100. */
static void svals_pack(const ixia_idx_sort_t *S, const cand_t *c, ixia_idx_hit_t *h) {
  gsize n = 0;
  for (guint i = 0; i < S->nk; i++)
    n += 1 + (c->v[i].has ? 4 + (S->keys[i].bytes ? c->v[i].len : IXIA_NUM_BYTES) : 0);
  guint8 *p = n <= sizeof h->sort_small ? h->sort_small : (h->sort = g_malloc(n));
  for (guint i = 0; i < S->nk; i++) {
    const sval_t *v = &c->v[i];
    *p++ = v->has ? 1 : 0;
    if (!v->has) continue;
    guint32 len = S->keys[i].bytes ? v->len : IXIA_NUM_BYTES;
    memcpy(p, &len, 4);
    p += 4;
    if (S->keys[i].bytes) {
      if (len) memcpy(p, v->p, len);
    } else {
      ixia_bytes_put64(p, v->num);
    }
    p += len;
  }
}

gboolean ixia_idx_hit_sort_value(const ixia_idx_hit_t *h, guint k, const guint8 **out, gsize *len) {
  const guint8 *p = h->sort ? h->sort : h->sort_small;
  for (guint i = 0; i < h->n_sort; i++) {
    gboolean has = *p++ != 0;
    guint32 n = 0;
    if (has) {
      memcpy(&n, p, 4);
      p += 4;
    }
    if (i == k) {
      *out = p;
      *len = n;
      return has;
    }
    p += n;
  }
  return FALSE;
}

static void bytes_unref0(gpointer b) {
  if (b) g_bytes_unref(b);
}

GPtrArray *ixia_idx_hit_sort_bytes(const ixia_idx_hit_t *h) {
  GPtrArray *a = g_ptr_array_new_full(h->n_sort, bytes_unref0);
  for (guint k = 0; k < h->n_sort; k++) {
    const guint8 *p;
    gsize n;
    g_ptr_array_add(a, ixia_idx_hit_sort_value(h, k, &p, &n) ? g_bytes_new(p, n) : NULL);
  }
  return a;
}

/* A selected candidate with its key. */
typedef struct {
  const cand_t *c;
  keyed_t kd;
} sel_t;

static gint sel_cmp(gconstpointer a, gconstpointer b, gpointer S) {
  const sel_t *x = a, *y = b;
  int c = cand_cmp(S, x->c, y->c);
  return c ? c : strcmp(x->kd.key, y->kd.key);
}

/* Appends the hit of candidate c with its key and version (taking the key). */
static void add_hit(ixia_idx_sort_t *S, const cand_t *c, keyed_t *kd, GArray *hits) {
  ixia_idx_hit_t h = {kd->key, kd->version, c->id, NULL, S->nk, 0.0, {0}};
  kd->key = NULL;
  if (S->need_dict) g_rw_lock_reader_lock(&S->s->idx->dict_lock);
  svals_pack(S, c, &h);
  if (S->need_dict) g_rw_lock_reader_unlock(&S->s->idx->dict_lock);
  h.score = score_of(S, c->id);
  g_array_append_val(hits, h);
}

/* Runs of equal values up to this long are sorted by insertion. */
#define SHORT_RUN 32

/* Sorts the selected candidates by (values, key). They come in value
 * order (the candidates sorted, then the group tied at the page's end,
 * whose values are the last's), so only each run of equal values is
 * sorted, by key: a sort of the whole page was 6% of the shard's CPU on a
 * sorted page of 100 whose prices had a few ties. Out of value order
 * (which the above rules out), the whole page is sorted. */
static void sort_selected(ixia_idx_sort_t *S, GArray *sel) {
  sel_t *x = (sel_t *)(void *)sel->data;
  for (guint a = 0, b; a < sel->len; a = b) {
    int c = 0;
    for (b = a + 1; b < sel->len && (c = cand_cmp(S, x[b - 1].c, x[b].c)) == 0; b++) {}
    if (c > 0) {
      g_array_sort_with_data(sel, sel_cmp, S);
      return;
    }
    if (b - a > SHORT_RUN) {
      qsort_r(x + a, b - a, sizeof *x, sel_cmp, S);
      continue;
    }
    /* A short run (a few prices tied) by insertion, on the keys alone
     * (its values are equal): glibc's qsort_r, a merge sort through a
     * buffer it allocates, was 4% of the shard's CPU on sorted pages of
     * 100 over prices with ties. */
    for (guint i = a + 1; i < b; i++) {
      sel_t t = x[i];
      guint j = i;
      for (; j > a && strcmp(x[j - 1].kd.key, t.kd.key) > 0; j--) x[j] = x[j - 1];
      x[j] = t;
    }
  }
}

gboolean ixia_idx_sort_finish(ixia_idx_sort_t *S, const roaring_bitmap_t *set, GArray *hits,
                              guint64 *epoch, guint64 *as_of) {
  *epoch = S->epoch;
  *as_of = S->as_of;
  if (S->k == 0 || S->gave_up) return TRUE;
  if (!S->no_history && !fix_late(S, set)) return FALSE;
  if (S->gave_up || (S->bounded && roaring_bitmap_get_cardinality(S->tied_after) > BOUNDED_GROUP)) {
    S->gave_up = TRUE;
    return TRUE;
  }
  gboolean ok = TRUE;
  /* 1. Those tied with the cursor, keys after the cursor's. */
  GArray *first = g_array_new(FALSE, FALSE, sizeof(keyed_t));
  if (S->has_after) ok = group_by_key(S, S->tied_after, S->after_key, S->after_key_len, S->k, first);
  guint need = S->k > first->len ? S->k - first->len : 0;
  /* 2. The best of the others; the group tied at the page's end by key. */
  sort_cands(S);
  guint n = MIN(need, S->cand->len), lo = n, hi = n;
  GArray *boundary = g_array_new(FALSE, FALSE, sizeof(keyed_t));
  if (ok && n > 0 && n < S->cand->len) {
    const cand_t *last = &g_array_index(S->cand, cand_t, n - 1);
    while (lo > 0 && cand_cmp(S, &g_array_index(S->cand, cand_t, lo - 1), last) == 0) lo--;
    while (hi < S->cand->len && cand_cmp(S, &g_array_index(S->cand, cand_t, hi), last) == 0) hi++;
    if (hi > n && S->bounded && hi - lo > BOUNDED_GROUP) {
      S->gave_up = TRUE;
      ok = FALSE; /* (nothing appended; TRUE again below) */
    } else if (hi > n) {
      roaring_bitmap_t *g = roaring_bitmap_create();
      for (guint i = lo; i < hi; i++) roaring_bitmap_add(g, g_array_index(S->cand, cand_t, i).id);
      ok = group_by_key(S, g, NULL, 0, n - lo, boundary);
      roaring_bitmap_free(g);
    } else {
      lo = hi = n;
    }
  }
  /* 3. Keys and versions of the rest, then the order (values, key). */
  /* (Each array sized once: grown by doubling they were ~4% of the shard's
   * CPU on a sorted page of 100.) */
  GArray *ids = g_array_sized_new(FALSE, FALSE, sizeof(guint32), lo);
  for (guint i = 0; i < lo; i++) g_array_append_val(ids, g_array_index(S->cand, cand_t, i).id);
  GArray *res = g_array_sized_new(FALSE, FALSE, sizeof(ixia_idx_hit_t), lo);
  if (ok) ok = ixia_idx_resolve_hits(S->s->idx, (const guint32 *)(void *)ids->data, ids->len, res, S->s->err);
  if (ok) {
    /* Tied with the cursor: they all share the cursor's values. */
    for (guint i = 0; i < first->len; i++) {
      cand_t c = S->after;
      c.id = g_array_index(first, keyed_t, i).id;
      add_hit(S, &c, &g_array_index(first, keyed_t, i), hits);
    }
    GArray *sel = g_array_sized_new(FALSE, FALSE, sizeof(sel_t), MIN(res->len, lo) + boundary->len);
    for (guint i = 0; i < res->len && i < lo; i++) {
      ixia_idx_hit_t *h = &g_array_index(res, ixia_idx_hit_t, i);
      sel_t x = {&g_array_index(S->cand, cand_t, i), {h->id, h->key, h->version}};
      h->key = NULL;
      g_array_append_val(sel, x);
    }
    for (guint i = 0; i < boundary->len; i++) {
      keyed_t *kd = &g_array_index(boundary, keyed_t, i);
      for (guint j = lo; j < hi; j++) {
        const cand_t *c = &g_array_index(S->cand, cand_t, j);
        if (c->id != kd->id) continue;
        sel_t x = {c, *kd};
        kd->key = NULL;
        g_array_append_val(sel, x);
        break;
      }
    }
    sort_selected(S, sel);
    for (guint i = 0; i < sel->len; i++) add_hit(S, g_array_index(sel, sel_t, i).c, &g_array_index(sel, sel_t, i).kd, hits);
    g_array_free(sel, TRUE);
  }
  for (guint i = 0; i < first->len; i++) g_free(g_array_index(first, keyed_t, i).key);
  for (guint i = 0; i < boundary->len; i++) g_free(g_array_index(boundary, keyed_t, i).key);
  g_array_free(first, TRUE);
  g_array_free(boundary, TRUE);
  ixia_idx_hits_clear(res);
  g_array_free(res, TRUE);
  g_array_free(ids, TRUE);
  return (ok || S->gave_up) && S->ok;
}
