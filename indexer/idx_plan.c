/* Search plans: how each filter node is answered, chosen by cost.
 *
 * Every leaf can be answered two ways:
 *   - materialized: its whole set of documents as a bitmap, from postings
 *     (keyword, text, bool values; "exists"), or from the points of a
 *     numeric field (equality and ranges);
 *   - checked: per candidate document, against the column block holding
 *     the document's values (every field but text has a column).
 * Estimates are exact for most leaves and cheap: the dictionary keeps a
 * document count per value, points count a range from leaf sizes, and the
 * exists posting and the live set know their cardinality. An AND estimates
 * with independence (live x product of selectivities), an OR with the sum.
 *
 * The choice follows Lucene's IndexOrDocValuesQuery: an AND leads with its
 * most selective child and materializes another child only when it costs no
 * more than 8 times the candidates so far; the rest are checked per
 * candidate block. A filter (or the lead of an AND) that would select more
 * than an eighth of the live documents is not materialized at all: the
 * search walks the live documents block by block and checks it on the
 * columns, which can stop early when the page and the total are complete.
 * Text leaves are always materialized (their column holds term counts for
 * scoring); a phrase is the AND of its words' postings, then a check of
 * the candidates' positions (the field's K_POS column).
 *
 * A page of a union leaf (keyword term, in, prefix, range) with no sort
 * or aggregation leads with its postings unread as a set: the walk ORs
 * them a chunk at a time (idx_eval.c) and can stop at a full page. When
 * the index's counts already show the total reached, a page of a leaf
 * dense enough is checked on the first live documents instead (the page
 * is then all the walk needs).
 *
 * Keyword prefixes and ranges walk the sorted value dictionary; past
 * WALK_CAP values they stop walking and compare the value bytes of each
 * candidate instead of reading one posting per value. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include "idx.h"

/* Dictionary values a prefix or keyword range lists before it switches to
 * comparing bytes per candidate. */
#define WALK_CAP 1024
/* A filter that selects more than 1/LEAD_FACTOR of the live documents does
 * not lead: the search walks the live set and checks it on the columns. */
#define LEAD_FACTOR 8
/* Relative costs of this engine, from profiles of the bench shapes: an id
 * read from a cached posting (roaring AND/OR), a posting looked up, an id
 * collected from points (gather, radix sort, append), a candidate checked
 * on a column once its value is in the CPU cache, a cache line of column
 * values fetched from memory (the profile's dominant cost for sparse
 * candidates: a check reads one value per line), a column block looked up. */
#define COST_POSTING_ID 1.0
#define COST_POSTING 200.0
#define COST_POINT_ID 12.0
#define COST_CHECK 5.0
#define COST_LINE 80.0
/* A numeric range beside candidates: each point of the range marks a bit
 * and each candidate probes one, or (fewer candidates than points) the
 * other way round; no bitmap of the range is built. */
#define COST_POINT_MARK 2.0
/* A candidate intersected with a term's cached posting in place: a step
 * of a merge or a gallop through an array container, or a bit probed in a
 * bitset container. */
#define COST_GALLOP 3.0
#define COST_BLOCK 150.0
/* A candidate checked on doc values (idx_docvals.c), and a line of them
 * fetched from memory: dense candidates share lines, sparse ones cost a
 * miss each (~40 ns here under load, against ~5 ns per point marked). */
#define COST_DV_CHECK 1.0
#define COST_DV_LINE 16.0
#define LINES_PER_BLOCK 128.0

typedef enum { N_ALL, N_NONE, N_AND, N_OR, N_NOT, N_LEAF } nkind_t;

struct pnode {
  nkind_t kind;
  const ixia_filter_t *f;
  pnode_t **kids;
  guint n_kids;
  field_t *field;
  double est;
  gboolean checkable; /* the whole subtree can be answered from columns */
  /* A leaf checked on its column block rather than its doc values: an
   * aggregation reads that block right after (0: not decided yet, 1 yes,
   * 2 no). The block is then read once, where the two would stream the
   * field's values from memory twice (the 30% aggregation: 21% of the
   * shard in the doc values check, bound by its loads). */
  guint8 on_column;
  /* dictionary leaves */
  GArray *vids;       /* guint32, sorted: accepted values (MATCH: required tokens) */
  gboolean by_bytes;  /* prefix/range over more than WALK_CAP values */
  guint64 *vbits;     /* bitset of accepted value ids from vbits_lo */
  guint32 vbits_lo, vbits_n;
  /* numeric leaves */
  guint64 *nums;      /* TERM/IN: sorted keys */
  guint n_nums;
  guint64 lo, hi;     /* RANGE: inclusive keys */
  double dlo, dhi;    /* the same bounds as numbers, for column checks */
  gboolean lo_open, hi_open; /* exclusive bounds */
  double *dnums;      /* TERM/IN values as numbers */
  guint32 *phrase;    /* MATCH_PHRASE: the value id of each word, in order */
  /* execution */
  roaring_bitmap_t *bm; /* materialized set, when read from the index */
  const char *how;
  gboolean lead;
  gboolean probed; /* read against the candidates: a range's points, or a term's posting */
  guint64 checked, passed;
};

/* ------------------------------------------------------------ helpers */

gboolean ixia_idx_deadline(ixia_idx_search_t *s) {
  if (s->deadline_us > 0 && g_get_monotonic_time() > s->deadline_us)
    return ixia_error_set(s->err, IXIA_EDEADLINE,
                          "query deadline exceeded (query.deadline_ms or the request timeout)");
  return TRUE;
}

gboolean ixia_idx_charge(ixia_idx_search_t *s, guint64 ids) {
  s->postings += ids;
  if (s->max_postings && s->postings > s->max_postings)
    return ixia_error_set(s->err, IXIA_ETOOLARGE,
                          "query reads more than query.max_postings (%" G_GUINT64_FORMAT
                          ") postings on this shard",
                          s->max_postings);
  return TRUE;
}

blk_t *ixia_idx_search_column(ixia_idx_search_t *s, const field_t *f, guint32 block) {
  for (guint i = 0; i < SEARCH_COLS; i++)
    if (s->cols[i].b && s->cols[i].field == f->id && s->cols[i].block == block) {
      atomic_fetch_add(&s->cols[i].b->ref, 1);
      return s->cols[i].b;
    }
  blk_t *b = ixia_idx_column(s->idx, f->id, f->numeric ? 8 : 4, block, s->err);
  if (!b) return NULL;
  guint i = s->next_col++ % SEARCH_COLS;
  ixia_idx_blk_unref(s->cols[i].b);
  atomic_fetch_add(&b->ref, 1);
  s->cols[i].b = b;
  s->cols[i].field = f->id;
  s->cols[i].block = block;
  return b;
}

void ixia_idx_search_release(ixia_idx_search_t *s) {
  for (guint i = 0; i < SEARCH_COLS; i++) {
    ixia_idx_blk_unref(s->cols[i].b);
    s->cols[i].b = NULL;
  }
}

static pnode_t *node_new(nkind_t kind, const ixia_filter_t *f) {
  pnode_t *p = g_new0(pnode_t, 1);
  p->kind = kind;
  p->f = f;
  return p;
}

void ixia_idx_plan_free(pnode_t *p) {
  if (!p) return;
  for (guint i = 0; i < p->n_kids; i++) ixia_idx_plan_free(p->kids[i]);
  g_free(p->kids);
  if (p->vids) g_array_free(p->vids, TRUE);
  g_free(p->vbits);
  g_free(p->nums);
  g_free(p->dnums);
  g_free(p->phrase);
  if (p->bm) roaring_bitmap_free(p->bm);
  g_free(p);
}

static int u32_cmp(gconstpointer a, gconstpointer b) {
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return x < y ? -1 : x > y;
}

static int u64_cmp(const void *a, const void *b) {
  guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
  return x < y ? -1 : x > y;
}

static guint64 bytes_key(GBytes *b) { return ixia_bytes_get64(g_bytes_get_data(b, NULL)); }

/* ---------------------------------------------------------- estimates */

static double count_of(field_t *f, guint32 vid) {
  return vid < f->counts->len ? g_array_index(f->counts, guint32, vid) : 0;
}

/* A leaf that needs every one of its values: match (unless "or") and
 * match_phrase. */
static gboolean needs_all(const ixia_filter_t *f) {
  return (f->kind == IXIA_F_MATCH && !f->match_any) || f->kind == IXIA_F_MATCH_PHRASE;
}

/* Value ids of the listed encoded values that the dictionary holds. */
static void lookup_values(ixia_idx_t *idx, pnode_t *p, const GPtrArray *values) {
  p->vids = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_rw_lock_reader_lock(&idx->dict_lock);
  for (guint i = 0; values && i < values->len; i++) {
    gint64 vid = ixia_idx_value_id_of(p->field, values->pdata[i]);
    if (vid >= 0) {
      guint32 u = (guint32)vid;
      g_array_append_val(p->vids, u);
    } else if (needs_all(p->f)) {
      g_array_set_size(p->vids, 0); /* a missing token: nothing matches */
      p->est = 0;
      break;
    }
  }
  double est = needs_all(p->f) && p->vids->len ? G_MAXDOUBLE : 0;
  for (guint i = 0; i < p->vids->len; i++) {
    double c = count_of(p->field, g_array_index(p->vids, guint32, i));
    est = needs_all(p->f) ? MIN(est, c) : est + c;
  }
  if (p->f->kind == IXIA_F_MATCH_PHRASE && p->vids->len) {
    /* The phrase's words in order, for the position check. */
    p->phrase = g_new(guint32, values->len);
    for (guint i = 0; i < values->len; i++)
      p->phrase[i] = (guint32)ixia_idx_value_id_of(p->field, values->pdata[i]);
  }
  g_rw_lock_reader_unlock(&idx->dict_lock);
  g_array_sort(p->vids, u32_cmp);
  p->est = est;
}

/* Whether value bytes v pass the prefix or range of a leaf. */
static gboolean bytes_pass(const ixia_filter_t *f, const guint8 *v, gsize len) {
  if (f->kind == IXIA_F_PREFIX) {
    gsize pl;
    const guint8 *pre = g_bytes_get_data(f->values->pdata[0], &pl);
    return len >= pl && (pl == 0 || memcmp(v, pre, pl) == 0);
  }
  if (f->lo) {
    gsize ll;
    const guint8 *lo = g_bytes_get_data(f->lo, &ll);
    int c = ixia_val_cmp(v, len, lo, ll);
    if (c < 0 || (c == 0 && !f->lo_incl)) return FALSE;
  }
  if (f->hi) {
    gsize hl;
    const guint8 *hi = g_bytes_get_data(f->hi, &hl);
    int c = ixia_val_cmp(v, len, hi, hl);
    if (c > 0 || (c == 0 && !f->hi_incl)) return FALSE;
  }
  return TRUE;
}

/* Values walked under one hold of dict_lock: a walk over a text field's
 * whole vocabulary must not hold off the apply thread's publish. */
#define WALK_STRETCH 256

/* Walks the field's values in byte order over a prefix or keyword range,
 * listing up to cap value ids (cap 0: all) and adding their document
 * counts to *count; *more when it stopped at the cap. Reads the in-memory
 * dictionary under dict_lock, so it lists what term lookups see: the
 * published batches; a long walk lets go of the lock every WALK_STRETCH
 * values and goes on after the last value it listed. */
static void walk_values(ixia_idx_search_t *s, pnode_t *p, guint cap, gboolean *more, double *count) {
  const ixia_filter_t *f = p->f;
  GBytes *from = f->kind == IXIA_F_PREFIX ? f->values->pdata[0] : f->lo;
  gsize from_len = 0;
  const guint8 *from_p = from ? g_bytes_get_data(from, &from_len) : NULL;
  if (!p->vids) p->vids = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_array_set_size(p->vids, 0);
  *more = FALSE;
  GTree *order = p->field->order;
  GBytes *last = NULL; /* the last value listed, a reference held across a release */
  gboolean done = FALSE;
  while (!done) {
    g_rw_lock_reader_lock(&s->idx->dict_lock);
    GTreeNode *n = last   ? g_tree_upper_bound(order, last)
                   : from ? g_tree_lower_bound(order, from)
                          : g_tree_node_first(order);
    done = TRUE;
    for (guint stretch = 0; n; n = g_tree_node_next(n), stretch++) {
      gsize len;
      GBytes *key = g_tree_node_key(n);
      const guint8 *val = g_bytes_get_data(key, &len);
      if (!bytes_pass(f, val, len)) {
        /* Past the prefix or the upper bound: done; at an exclusive lower
         * bound: skip. */
        if (f->kind != IXIA_F_PREFIX && f->lo && ixia_val_cmp(val, len, from_p, from_len) == 0)
          continue;
        break;
      }
      if (cap && p->vids->len >= cap) {
        *more = TRUE;
        break;
      }
      if (stretch == WALK_STRETCH) {
        done = FALSE;
        break;
      }
      guint32 vid = GPOINTER_TO_UINT(g_tree_node_value(n)) - 1;
      g_array_append_val(p->vids, vid);
      if (count) *count += count_of(p->field, vid);
      if (last) g_bytes_unref(last);
      last = g_bytes_ref(key);
    }
    g_rw_lock_reader_unlock(&s->idx->dict_lock);
  }
  if (last) g_bytes_unref(last);
}

static gboolean plan_leaf(ixia_idx_search_t *s, pnode_t *p) {
  const ixia_filter_t *f = p->f;
  field_t *fld = p->field;
  p->checkable = fld->type != IXIA_FIELD_TEXT;
  switch (f->kind) {
    case IXIA_F_EXISTS: {
      blk_t *e = ixia_idx_posting(s->idx, K_POST, fld->id, VID_EXISTS, s->err);
      if (!e) return FALSE;
      p->est = (double)e->card;
      ixia_idx_blk_unref(e);
      return TRUE;
    }
    case IXIA_F_TERM:
    case IXIA_F_IN:
      if (fld->numeric) {
        p->n_nums = f->values->len;
        p->nums = g_new(guint64, MAX(p->n_nums, 1));
        for (guint i = 0; i < p->n_nums; i++) {
          p->nums[i] = bytes_key(f->values->pdata[i]);
          p->est += (double)ixia_points_count(fld->points, p->nums[i], p->nums[i]);
        }
        qsort(p->nums, p->n_nums, sizeof(guint64), u64_cmp);
        p->dnums = g_new(double, MAX(p->n_nums, 1));
        for (guint i = 0; i < p->n_nums; i++) p->dnums[i] = num_of_key(p->nums[i]);
        return TRUE;
      }
      lookup_values(s->idx, p, f->values);
      return TRUE;
    case IXIA_F_MATCH:
    case IXIA_F_MATCH_PHRASE:
      lookup_values(s->idx, p, f->values);
      return TRUE;
    case IXIA_F_RANGE:
      if (fld->numeric) {
        p->lo = 0;
        p->hi = G_MAXUINT64;
        if (f->lo) {
          guint64 k = bytes_key(f->lo);
          if (!f->lo_incl && k == G_MAXUINT64) p->lo = 1, p->hi = 0; /* empty */
          else p->lo = f->lo_incl ? k : k + 1;
        }
        if (f->hi && p->lo <= p->hi) {
          guint64 k = bytes_key(f->hi);
          if (!f->hi_incl && k == 0) p->lo = 1, p->hi = 0;
          else p->hi = f->hi_incl ? k : k - 1;
        }
        p->est = (double)ixia_points_count(fld->points, p->lo, p->hi);
        p->dlo = f->lo ? ixia_num_decode(g_bytes_get_data(f->lo, NULL)) : -INFINITY;
        p->dhi = f->hi ? ixia_num_decode(g_bytes_get_data(f->hi, NULL)) : INFINITY;
        p->lo_open = f->lo && !f->lo_incl;
        p->hi_open = f->hi && !f->hi_incl;
        return TRUE;
      }
      /* keyword ranges walk the dictionary like prefixes */
      G_GNUC_FALLTHROUGH;
    case IXIA_F_PREFIX: {
      gboolean more = FALSE;
      /* Text has no column to compare bytes on: list every value. */
      walk_values(s, p, p->checkable ? WALK_CAP : 0, &more, &p->est);
      p->by_bytes = more;
      g_array_sort(p->vids, u32_cmp);
      /* Unknown beyond the walk: assume half the live documents. */
      if (more) p->est = MAX(p->est, (double)s->n_live / 2);
      return TRUE;
    }
    default:
      return ixia_error_set(s->err, IXIA_EINVAL, "unknown filter kind %d", (int)f->kind);
  }
}

static pnode_t *build(ixia_idx_search_t *s, const ixia_filter_t *f) {
  double live = (double)s->n_live;
  pnode_t *p;
  switch (f->kind) {
    case IXIA_F_AND:
    case IXIA_F_OR: {
      p = node_new(f->kind == IXIA_F_AND ? N_AND : N_OR, f);
      p->kids = g_new0(pnode_t *, MAX(f->n_children, 1));
      p->checkable = TRUE;
      double sel = 1, sum = 0;
      for (guint i = 0; i < f->n_children; i++) {
        pnode_t *k = build(s, f->children[i]);
        if (!k) {
          ixia_idx_plan_free(p);
          return NULL;
        }
        p->kids[p->n_kids++] = k;
        p->checkable = p->checkable && k->checkable;
        sel *= live > 0 ? MIN(k->est / live, 1.0) : 0;
        sum += k->est;
      }
      p->est = p->kind == N_AND ? live * sel : MIN(live, sum);
      if (p->kind == N_AND && f->n_children == 0) p->est = live;
      return p;
    }
    case IXIA_F_NOT: {
      p = node_new(N_NOT, f);
      p->kids = g_new0(pnode_t *, 1);
      pnode_t *k = f->n_children == 1 ? build(s, f->children[0]) : NULL;
      if (!k) {
        if (f->n_children != 1) ixia_error_set(s->err, IXIA_EINVAL, "not needs one filter");
        ixia_idx_plan_free(p);
        return NULL;
      }
      p->kids[p->n_kids++] = k;
      p->checkable = k->checkable;
      p->est = MAX(0, live - k->est);
      return p;
    }
    default:
      break;
  }
  field_t *fld = f->field ? ixia_idx_field_lookup(s->idx, s->table, f->field) : NULL;
  if (!fld) {
    /* Nothing was ever indexed under this field: no document matches. */
    p = node_new(N_NONE, f);
    p->checkable = TRUE;
    return p;
  }
  p = node_new(N_LEAF, f);
  p->field = fld;
  if (!plan_leaf(s, p)) {
    ixia_idx_plan_free(p);
    return NULL;
  }
  /* Nothing can match: a value the dictionary never saw, an empty range of
   * points (exact), an empty exists posting (exact). Dictionary counts are
   * estimates (persisted every few batches) and decide nothing here. */
  gboolean none = p->field->numeric || p->f->kind == IXIA_F_EXISTS
                      ? p->est == 0
                      : !p->by_bytes && p->vids && p->vids->len == 0;
  if (none) p->kind = N_NONE, p->checkable = TRUE;
  return p;
}

pnode_t *ixia_idx_plan(ixia_idx_search_t *s, const ixia_filter_t *f) {
  if (!f) {
    pnode_t *p = node_new(N_ALL, NULL);
    p->est = (double)s->n_live;
    p->checkable = TRUE;
    return p;
  }
  return build(s, f);
}

/* ------------------------------------------------------ known counts */

/* Cardinality of one posting (field, vid); -1 on a read error. */
static double posting_count(ixia_idx_search_t *s, guint32 field, guint32 vid) {
  blk_t *b = ixia_idx_posting(s->idx, K_POST, field, vid, s->err);
  if (!b) return -1;
  double n = (double)b->card;
  ixia_idx_blk_unref(b);
  return n;
}

/* Whether every document with a value of numeric field f has exactly one:
 * then a count of its points is a count of documents. -1 on a read error. */
static int single_valued(ixia_idx_search_t *s, field_t *f) {
  double docs = posting_count(s, f->id, VID_EXISTS);
  if (docs < 0) return -1;
  return (double)ixia_points_size(f->points) == docs;
}

/* The exact number of p's matches when the index keeps it, else -1 (also
 * on a read error, *ok then FALSE). */
static double exact_of(ixia_idx_search_t *s, const pnode_t *p, gboolean *ok) {
  switch (p->kind) {
    case N_ALL:
      return (double)s->n_live;
    case N_NONE:
      return 0;
    case N_NOT: {
      double k = exact_of(s, p->kids[0], ok);
      return k < 0 ? -1 : MAX(0, (double)s->n_live - k);
    }
    case N_LEAF:
      break;
    default:
      return -1;
  }
  if (p->f->kind == IXIA_F_EXISTS) return p->est;
  if (p->field->numeric && p->f->kind != IXIA_F_MATCH && p->f->kind != IXIA_F_MATCH_PHRASE) {
    /* (An `in` listing a value twice counts its points twice.) */
    for (guint i = 1; i < p->n_nums; i++)
      if (p->nums[i] == p->nums[i - 1]) return -1;
    int one = single_valued(s, p->field);
    if (one < 0) *ok = FALSE;
    return one > 0 ? p->est : -1;
  }
  if (p->f->kind == IXIA_F_TERM && p->checkable && !p->by_bytes && p->vids && p->vids->len == 1) {
    double n = posting_count(s, p->field->id, g_array_index(p->vids, guint32, 0));
    if (n < 0) *ok = FALSE;
    return n;
  }
  return -1;
}

static int vid_cmp(gconstpointer a, gconstpointer b) {
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return (x > y) - (x < y);
}

/* The matches of a leaf over several values of a field whose documents each
 * hold one value: its postings do not overlap, so their cardinalities add
 * up. Read until the sum reaches need (0 when the dictionary's counts say
 * it will not; -1 on a read error). */
static double disjoint_sum(ixia_idx_search_t *s, const pnode_t *p, double need) {
  /* The distinct values (one listed twice is counted once). */
  GArray *vids = g_array_sized_new(FALSE, FALSE, sizeof(guint32), p->vids->len);
  g_array_append_vals(vids, p->vids->data, p->vids->len);
  g_array_sort(vids, vid_cmp);
  guint32 *v = (guint32 *)(void *)vids->data;
  guint n_v = 0;
  for (guint i = 0; i < vids->len; i++)
    if (n_v == 0 || v[i] != v[n_v - 1]) v[n_v++] = v[i];
  double est = 0;
  g_rw_lock_reader_lock(&s->idx->dict_lock);
  for (guint i = 0; i < n_v; i++) est += count_of(p->field, v[i]);
  g_rw_lock_reader_unlock(&s->idx->dict_lock);
  double n = 0;
  for (guint i = 0; est >= need && n < need && i < n_v; i++) {
    double c = posting_count(s, p->field->id, v[i]);
    if (c < 0) {
      n = -1;
      break;
    }
    n += c;
  }
  g_array_free(vids, TRUE);
  return n;
}

/* A count p's matches reach (0: unknown); reads postings only where an
 * estimate reaches need. */
static double lower_of(ixia_idx_search_t *s, const pnode_t *p, double need, gboolean *ok) {
  if (p->est < need) return 0;
  if (p->kind == N_OR) {
    double best = 0;
    for (guint i = 0; *ok && i < p->n_kids && best < need; i++) best = MAX(best, lower_of(s, p->kids[i], need, ok));
    return best;
  }
  if (p->kind == N_LEAF && p->checkable && p->vids && p->vids->len > 1 && !needs_all(p->f)) {
    /* Several values (in, prefix, keyword range): the documents of the
     * most common one are matches; the sum may count a document twice,
     * unless no document holds two values of the field. */
    if (ixia_docvals_single(p->field->dv)) {
      double n = disjoint_sum(s, p, need);
      if (n < 0) *ok = FALSE;
      return MAX(n, 0);
    }
    guint32 best = 0;
    double best_n = -1;
    g_rw_lock_reader_lock(&s->idx->dict_lock);
    for (guint i = 0; i < p->vids->len; i++) {
      guint32 vid = g_array_index(p->vids, guint32, i);
      if (count_of(p->field, vid) > best_n) best = vid, best_n = count_of(p->field, vid);
    }
    g_rw_lock_reader_unlock(&s->idx->dict_lock);
    /* (The dictionary's count is an estimate: the posting says.) */
    if (best_n < need) return 0;
    double n = posting_count(s, p->field->id, best);
    if (n < 0) *ok = FALSE;
    return MAX(n, 0);
  }
  return MAX(exact_of(s, p, ok), 0);
}

gboolean ixia_idx_plan_lower(ixia_idx_search_t *s, pnode_t *root, double need, double *lower) {
  gboolean ok = TRUE;
  *lower = root ? lower_of(s, root, need, &ok) : 0;
  return ok;
}

/* -------------------------------------------------------- materializing */

static gboolean or_posting(ixia_idx_search_t *s, guint32 field, guint32 vid,
                           roaring_bitmap_t *out, gboolean and_first, gboolean *first) {
  blk_t *b = ixia_idx_posting(s->idx, K_POST, field, vid, s->err);
  if (!b) return FALSE;
  guint64 n = roaring_bitmap_get_cardinality(b->bm);
  if (and_first && !*first) roaring_bitmap_and_inplace(out, b->bm);
  else roaring_bitmap_or_inplace(out, b->bm);
  *first = FALSE;
  ixia_idx_blk_unref(b);
  return ixia_idx_charge(s, n) && ixia_idx_deadline(s);
}

static gboolean materialize(ixia_idx_search_t *s, pnode_t *p);

/* AND: the lead and every child cheap enough to read from the index are
 * intersected; the others are checked per candidate block. */
static gboolean materialize_and(ixia_idx_search_t *s, pnode_t *p, roaring_bitmap_t *out,
                                GPtrArray *checks);

static inline guint32 entry_pos(double d) {
  guint64 b;
  memcpy(&b, &d, 8);
  return (guint32)b;
}

static inline guint32 entry_vid1(double d) {
  guint64 b;
  memcpy(&b, &d, 8);
  return (guint32)(b >> 32);
}

/* Whether a document's positions (entries in position order) hold the
 * phrase: its words at their offsets from one start. */
static gboolean phrase_in(const pnode_t *p, const double *e, guint32 n) {
  const ixia_filter_t *f = p->f;
  guint m = f->values->len;
  for (guint32 i = 0; i < n; i++) {
    if (entry_vid1(e[i]) != p->phrase[0] + 1) continue;
    gint64 start = (gint64)entry_pos(e[i]) - f->offsets[0];
    gboolean all = TRUE;
    for (guint k = 1; all && k < m; k++) {
      gint64 want = start + f->offsets[k];
      /* Positions are unique and sorted: a binary search. */
      guint32 lo = 0, hi = n;
      while (lo < hi) {
        guint32 mid = (lo + hi) / 2;
        if ((gint64)entry_pos(e[mid]) < want) lo = mid + 1;
        else hi = mid;
      }
      all = lo < n && (gint64)entry_pos(e[lo]) == want && entry_vid1(e[lo]) == p->phrase[k] + 1;
    }
    if (all) return TRUE;
  }
  return FALSE;
}

/* Keeps the candidates whose positions hold the phrase, reading the
 * field's position column a block at a time. */
static gboolean phrase_filter(ixia_idx_search_t *s, pnode_t *p, roaring_bitmap_t *cands) {
  roaring_bitmap_t *kept = roaring_bitmap_create();
  roaring_uint32_iterator_t *it = roaring_create_iterator(cands);
  gboolean ok = TRUE;
  guint64 checked = 0;
  while (ok && it->has_value) {
    guint32 block = it->current_value >> BLOCK_BITS;
    blk_t *b = ixia_idx_column_at(s->idx, K_POS, p->field->id, 8, block, s->err);
    ok = b != NULL;
    for (; ok && it->has_value && it->current_value >> BLOCK_BITS == block;
         roaring_advance_uint32_iterator(it)) {
      guint32 n;
      const double *e = col_slot(b->col, it->current_value & (BLOCK_SLOTS - 1), &n);
      checked++;
      if (n && phrase_in(p, e, n)) roaring_bitmap_add(kept, it->current_value);
    }
    ixia_idx_blk_unref(b);
    if (ok) ok = ixia_idx_deadline(s);
  }
  roaring_free_uint32_iterator(it);
  if (ok) {
    roaring_bitmap_clear(cands);
    roaring_bitmap_or_inplace(cands, kept);
    p->checked += checked;
  }
  roaring_bitmap_free(kept);
  return ok && ixia_idx_charge(s, checked);
}

static gboolean materialize_leaf(ixia_idx_search_t *s, pnode_t *p, roaring_bitmap_t *out) {
  const ixia_filter_t *f = p->f;
  field_t *fld = p->field;
  gboolean first = TRUE;
  if (f->kind == IXIA_F_EXISTS) {
    p->how = "postings";
    return or_posting(s, fld->id, VID_EXISTS, out, FALSE, &first);
  }
  if (fld->numeric) {
    p->how = "points";
    guint64 n = 0;
    if (f->kind == IXIA_F_RANGE) n = ixia_points_collect(fld->points, p->lo, p->hi, out);
    for (guint i = 0; f->kind != IXIA_F_RANGE && i < p->n_nums; i++)
      n += ixia_points_collect(fld->points, p->nums[i], p->nums[i], out);
    return ixia_idx_charge(s, n);
  }
  p->how = "postings";
  if (p->by_bytes) {
    /* Materializing a wide prefix: list every value after all. */
    gboolean more;
    walk_values(s, p, 0, &more, NULL);
    p->by_bytes = FALSE;
  }
  if (needs_all(f)) {
    for (guint i = 0; i < p->vids->len; i++)
      if (!or_posting(s, fld->id, g_array_index(p->vids, guint32, i), out, TRUE, &first))
        return FALSE;
    if (f->kind == IXIA_F_MATCH_PHRASE) {
      p->how = "postings, then positions";
      return phrase_filter(s, p, out);
    }
    return TRUE;
  }
  /* Many values: one union of all their postings (CRoaring's lazy OR),
   * rather than growing the result one posting at a time. */
  guint n = p->vids->len;
  blk_t **blks = g_new0(blk_t *, MAX(n, 1));
  const roaring_bitmap_t **bms = g_new0(const roaring_bitmap_t *, MAX(n, 1));
  gboolean ok = TRUE;
  guint64 ids = 0;
  for (guint i = 0; ok && i < n; i++) {
    blks[i] = ixia_idx_posting(s->idx, K_POST, fld->id, g_array_index(p->vids, guint32, i), s->err);
    ok = blks[i] != NULL;
    if (ok) {
      bms[i] = blks[i]->bm;
      ids += roaring_bitmap_get_cardinality(bms[i]);
    }
  }
  if (ok) ok = ixia_idx_charge(s, ids) && ixia_idx_deadline(s);
  if (ok && n == 1) roaring_bitmap_or_inplace(out, bms[0]);
  if (ok && n > 1) {
    roaring_bitmap_t *u = roaring_bitmap_or_many(n, bms);
    roaring_bitmap_or_inplace(out, u);
    roaring_bitmap_free(u);
  }
  for (guint i = 0; i < n; i++) ixia_idx_blk_unref(blks[i]);
  g_free(blks);
  g_free(bms);
  return ok;
}

static gboolean materialize(ixia_idx_search_t *s, pnode_t *p) {
  if (p->bm) return TRUE;
  roaring_bitmap_t *out = roaring_bitmap_create();
  gboolean ok = TRUE;
  switch (p->kind) {
    case N_ALL:
      roaring_bitmap_or_inplace(out, s->live->bm);
      p->how = "live";
      break;
    case N_NONE:
      p->how = "nothing indexed";
      break;
    case N_LEAF:
      ok = materialize_leaf(s, p, out);
      break;
    case N_OR:
      p->how = "union";
      for (guint i = 0; ok && i < p->n_kids; i++) {
        ok = materialize(s, p->kids[i]);
        if (ok) roaring_bitmap_or_inplace(out, p->kids[i]->bm);
      }
      break;
    case N_NOT:
      p->how = "live minus";
      ok = materialize(s, p->kids[0]);
      if (ok) {
        roaring_bitmap_or_inplace(out, s->live->bm);
        roaring_bitmap_andnot_inplace(out, p->kids[0]->bm);
      }
      break;
    case N_AND: {
      GPtrArray *checks = g_ptr_array_new();
      p->how = "intersection";
      ok = materialize_and(s, p, out, checks);
      /* Apply the deferred checks to every candidate block. */
      if (ok && checks->len) {
        roaring_bitmap_t *kept = roaring_bitmap_create();
        roaring_uint32_iterator_t *it = roaring_create_iterator(out);
        guint64 mask[BLOCK_WORDS];
        while (ok && it->has_value) {
          guint32 block = it->current_value >> BLOCK_BITS;
          ixia_idx_bm_block(out, block, mask);
          for (guint i = 0; ok && i < checks->len; i++)
            ok = ixia_idx_check_block(s, checks->pdata[i], block, mask);
          for (guint w = 0; ok && w < BLOCK_WORDS; w++)
            for (guint64 m = mask[w]; m; m &= m - 1)
              roaring_bitmap_add(kept, block << BLOCK_BITS | w << 6 | (guint)__builtin_ctzll(m));
          roaring_move_uint32_iterator_equalorlarger(it, (block + 1) << BLOCK_BITS);
          if (ok) ok = ixia_idx_deadline(s);
        }
        roaring_free_uint32_iterator(it);
        roaring_bitmap_free(out);
        out = kept;
      }
      g_ptr_array_free(checks, TRUE);
      break;
    }
  }
  if (!ok) {
    roaring_bitmap_free(out);
    return FALSE;
  }
  p->bm = out;
  p->passed = roaring_bitmap_get_cardinality(out);
  return TRUE;
}

/* What reading a node's whole set from the index would cost. */
static double mat_cost(const ixia_idx_search_t *s, const pnode_t *p) {
  double c = 0;
  switch (p->kind) {
    case N_ALL:
    case N_NONE:
      return 0;
    case N_LEAF:
      if (p->f->kind == IXIA_F_EXISTS) return p->est * COST_POSTING_ID + COST_POSTING;
      if (p->field->numeric) return p->est * COST_POINT_ID + COST_POSTING;
      if (p->by_bytes) return (double)s->n_live * COST_POSTING_ID + WALK_CAP * COST_POSTING;
      return p->est * COST_POSTING_ID + (p->vids ? p->vids->len : 1) * COST_POSTING;
    default:
      for (guint i = 0; i < p->n_kids; i++) c += mat_cost(s, p->kids[i]);
      if (p->kind == N_NOT) c += (double)s->n_live * COST_POSTING_ID;
      return c;
  }
}

static guint leaf_count(const pnode_t *p) {
  if (p->kind != N_AND && p->kind != N_OR && p->kind != N_NOT) return 1;
  guint n = 0;
  for (guint i = 0; i < p->n_kids; i++) n += leaf_count(p->kids[i]);
  return n;
}

/* What checking a node on the columns of cand candidates would cost. */
static double check_cost(const ixia_idx_search_t *s, const pnode_t *p, double cand) {
  if (p->kind == N_LEAF && p->field && p->field->dv) {
    /* Doc values: a read per candidate, a line per 8 or 16 ids. */
    double lines = MIN(cand, (double)s->n_live * (p->field->numeric ? 8 : 4) / 64 + 1);
    return cand * COST_DV_CHECK + lines * COST_DV_LINE;
  }
  double blocks = MIN(cand, (double)s->n_live / BLOCK_SLOTS + 1);
  double lines = MIN(cand, blocks * LINES_PER_BLOCK);
  return leaf_count(p) * (cand * COST_CHECK + lines * COST_LINE + blocks * COST_BLOCK);
}

static int est_cmp(gconstpointer a, gconstpointer b) {
  const pnode_t *x = *(pnode_t *const *)a, *y = *(pnode_t *const *)b;
  return x->est < y->est ? -1 : x->est > y->est;
}

/* The children of an AND by increasing estimate (text leaves, which cannot
 * be checked, count as they are). */
static GPtrArray *kids_by_cost(pnode_t *p) {
  GPtrArray *a = g_ptr_array_sized_new(p->n_kids);
  for (guint i = 0; i < p->n_kids; i++) g_ptr_array_add(a, p->kids[i]);
  g_ptr_array_sort(a, est_cmp);
  return a;
}

static gboolean range_leaf(const pnode_t *k) {
  return k->kind == N_LEAF && k->field && k->field->numeric && k->f->kind == IXIA_F_RANGE;
}

/* A keyword or bool term: one posting. */
static gboolean term_leaf(const pnode_t *k) {
  return k->kind == N_LEAF && k->field && !k->field->numeric && k->checkable && !k->by_bytes &&
         (k->f->kind == IXIA_F_TERM || k->f->kind == IXIA_F_IN) && k->vids && k->vids->len == 1;
}

/* A term's posting ANDed into the candidates in place, without the copy
 * materializing it would make: a lookup in the posting cache, then per
 * container of candidates a merge with the posting's (a gallop when one
 * side is much the smaller, a bit probe when the posting's is a bitset).
 * What it touches, and is charged to query.max_postings, is the smaller
 * side. */
static gboolean and_posting(ixia_idx_search_t *s, pnode_t *k, roaring_bitmap_t *out, guint64 cand) {
  blk_t *b = ixia_idx_posting(s->idx, K_POST, k->field->id, g_array_index(k->vids, guint32, 0), s->err);
  if (!b) return FALSE;
  k->how = "posting, intersected with the candidates";
  k->probed = TRUE;
  k->passed = roaring_bitmap_get_cardinality(b->bm);
  roaring_bitmap_and_inplace(out, b->bm);
  ixia_idx_blk_unref(b);
  return ixia_idx_charge(s, MIN(k->passed, cand)) && ixia_idx_deadline(s);
}

static gboolean materialize_and(ixia_idx_search_t *s, pnode_t *p, roaring_bitmap_t *out,
                                GPtrArray *checks) {
  GPtrArray *kids = kids_by_cost(p);
  gboolean ok = TRUE, have = FALSE;
  for (guint i = 0; ok && i < kids->len; i++) {
    pnode_t *k = kids->pdata[i];
    double cand = have ? (double)roaring_bitmap_get_cardinality(out) : (double)s->n_live;
    gboolean probe = have && range_leaf(k), intersect = have && term_leaf(k);
    double cost = probe       ? k->est * COST_POINT_MARK + cand * COST_POSTING_ID + COST_POSTING
                  : intersect ? COST_POSTING + cand * COST_GALLOP
                              : mat_cost(s, k);
    if (have && k->checkable && cost > check_cost(s, k, cand)) {
      g_ptr_array_add(checks, k);
      continue;
    }
    if (probe) {
      k->how = "points, probed by the candidates";
      k->probed = TRUE;
      k->passed = ixia_points_filter(k->field->points, k->lo, k->hi, out);
      ok = ixia_idx_charge(s, k->passed);
      if (roaring_bitmap_is_empty(out)) break;
      continue;
    }
    if (intersect) {
      ok = and_posting(s, k, out, (guint64)cand);
      if (!ok || roaring_bitmap_is_empty(out)) break;
      continue;
    }
    ok = materialize(s, k);
    if (!ok) break;
    if (!have) {
      roaring_bitmap_or_inplace(out, k->bm);
      k->lead = TRUE;
      have = TRUE;
    } else {
      roaring_bitmap_and_inplace(out, k->bm);
    }
    if (roaring_bitmap_is_empty(out)) break;
  }
  if (ok && !have) roaring_bitmap_or_inplace(out, s->live->bm);
  g_ptr_array_free(kids, TRUE);
  return ok;
}

/* A leaf whose set is the union of the postings of its listed dictionary
 * values: a keyword term, in, prefix or range (not one that compares bytes,
 * which never leads: its estimate is at least half the live documents). */
static gboolean union_leaf(const pnode_t *p) {
  if (p->kind != N_LEAF || p->field->numeric || !p->checkable || p->by_bytes) return FALSE;
  ixia_filter_kind_t k = p->f->kind;
  return k == IXIA_F_TERM || k == IXIA_F_IN || k == IXIA_F_PREFIX || k == IXIA_F_RANGE;
}

/* The postings of a union leaf, for a walk that reads them a chunk at a
 * time. */
static gboolean union_postings(ixia_idx_search_t *s, pnode_t *p, GPtrArray *out) {
  /* Charged by the dictionary's counts: a posting's cardinality walks its
   * containers (6% of a 100-value page's CPU). */
  double ids = 0;
  g_rw_lock_reader_lock(&s->idx->dict_lock);
  for (guint i = 0; i < p->vids->len; i++) ids += count_of(p->field, g_array_index(p->vids, guint32, i));
  g_rw_lock_reader_unlock(&s->idx->dict_lock);
  for (guint i = 0; i < p->vids->len; i++) {
    blk_t *b = ixia_idx_posting(s->idx, K_POST, p->field->id, g_array_index(p->vids, guint32, i), s->err);
    if (!b) return FALSE;
    g_ptr_array_add(out, b);
  }
  return ixia_idx_charge(s, (guint64)ids) && ixia_idx_deadline(s);
}

/* What finding `need` matches of leaf p by walking the live documents from
 * the start costs, its matches spread evenly over them: every id of each
 * block walked checked on doc values, their lines read in order. */
static double walk_blocks(const ixia_idx_search_t *s, const pnode_t *p, guint need) {
  double live = (double)s->n_live;
  double docs = p->est > 0 ? MIN(live, ((double)need + 1) * live / p->est) : live;
  return ceil(docs / BLOCK_SLOTS);
}

static double walk_cost(const ixia_idx_search_t *s, const pnode_t *p, guint need) {
  double ids = walk_blocks(s, p, need) * BLOCK_SLOTS;
  return ids * COST_DV_CHECK + ids * (p->field->numeric ? 8 : 4) / 64 * COST_DV_LINE;
}

/* How many times the blocks it expects a page walk may visit before it is
 * given up: matches clustered away from the first documents (a range of
 * recent timestamps, values only the newest documents hold) would
 * otherwise turn a page into a walk of the whole table. */
#define WALK_GIVE_UP 4

/* A leaf a walk can check on doc values alone (not exists, which reads the
 * column's presence mask; not a keyword range or prefix compared as
 * bytes). */
static gboolean dv_walkable(const pnode_t *p) {
  return p->kind == N_LEAF && p->checkable && !p->by_bytes && p->field && p->field->dv &&
         p->f->kind != IXIA_F_EXISTS;
}

gboolean ixia_idx_plan_lead(ixia_idx_search_t *s, pnode_t *root, gboolean page_only,
                            guint page_need, ixia_idx_exec_t *out) {
  out->lead = NULL;
  out->postings = NULL;
  out->walk_blocks = 0;
  out->checks = g_ptr_array_new();
  double live = (double)s->n_live;
  gboolean ok = TRUE;
  if (root->kind == N_ALL) {
    root->how = "live";
  } else if (root->kind == N_AND) {
    /* Lead with the cheapest child unless even it selects more than an
     * eighth of the documents and can be checked: then walk the live set. */
    GPtrArray *kids = kids_by_cost(root);
    pnode_t *first = kids->pdata[0];
    root->how = "intersection";
    if (first->est * LEAD_FACTOR >= live && root->checkable) {
      for (guint i = 0; i < kids->len; i++) g_ptr_array_add(out->checks, kids->pdata[i]);
    } else {
      out->lead = roaring_bitmap_create();
      ok = materialize_and(s, root, out->lead, out->checks);
    }
    g_ptr_array_free(kids, TRUE);
  } else if (root->est * LEAD_FACTOR >= live && root->checkable) {
    g_ptr_array_add(out->checks, root);
  } else if (page_need && dv_walkable(root) &&
             walk_cost(s, root, page_need) <
                 (union_leaf(root) ? root->vids->len * COST_POSTING : mat_cost(s, root))) {
    /* The total is known already, and the matches are dense enough that
     * the first live documents hold the page: a 100-value "in" over 5% of
     * the documents finds 10 matches in the first block of 1,024, where
     * its union looked up 100 postings (a third of the shard's CPU at
     * limit 10), and a range over 5% would gather and sort its points.
     * If the page is not full after WALK_GIVE_UP times the blocks
     * expected (and a few), the search plans again without the walk. */
    g_ptr_array_add(out->checks, root);
    out->walk_blocks = (guint64)(WALK_GIVE_UP * walk_blocks(s, root, page_need)) + WALK_GIVE_UP;
  } else if (page_only && union_leaf(root)) {
    /* A page of a union: each chunk of 65,536 ids is ORed from the
     * postings when the walk reaches it (idx_eval.c), so a page that fills
     * early reads a few chunks instead of building, then repairing, the
     * whole union (the profile of a 100-value "in": 25% of its CPU in
     * CRoaring's lazy-OR repair and array conversion). */
    out->postings = g_ptr_array_new_with_free_func((GDestroyNotify)ixia_idx_blk_unref);
    ok = union_postings(s, root, out->postings);
    root->how = "postings, a chunk at a time";
    root->lead = TRUE;
  } else {
    ok = materialize(s, root);
    if (ok) {
      out->lead = root->bm;
      root->bm = NULL;
      root->lead = TRUE;
    }
  }
  if (ok && out->lead) roaring_bitmap_and_inplace(out->lead, s->live->bm);
  return ok;
}

/* --------------------------------------------------------------- checks */

/* The accepted value ids of a dictionary leaf as a bitset (built once). */
static void build_vbits(pnode_t *p) {
  guint32 lo = g_array_index(p->vids, guint32, 0);
  guint32 hi = g_array_index(p->vids, guint32, p->vids->len - 1);
  p->vbits_lo = lo;
  p->vbits_n = hi - lo + 1;
  p->vbits = g_new0(guint64, p->vbits_n / 64 + 1);
  for (guint i = 0; i < p->vids->len; i++) {
    guint32 v = g_array_index(p->vids, guint32, i) - lo;
    p->vbits[v >> 6] |= G_GUINT64_CONSTANT(1) << (v & 63);
  }
}

static inline gboolean vid_ok(const pnode_t *p, guint32 v) {
  if (p->vbits) {
    guint32 r = v - p->vbits_lo;
    return v >= p->vbits_lo && r < p->vbits_n && (p->vbits[r >> 6] >> (r & 63) & 1);
  }
  const guint32 *a = (const guint32 *)(void *)p->vids->data;
  for (guint i = 0; i < p->vids->len; i++)
    if (a[i] == v) return TRUE;
  return FALSE;
}

/* A number passes a numeric leaf. Compared as doubles, which order like
 * their encoding (-0 equals 0 in both; documents hold no NaN). */
static inline gboolean num_ok(const pnode_t *p, double d) {
  if (p->f->kind == IXIA_F_RANGE)
    return (p->lo_open ? d > p->dlo : d >= p->dlo) && (p->hi_open ? d < p->dhi : d <= p->dhi);
  for (guint i = 0; i < p->n_nums; i++)
    if (p->dnums[i] == d) return TRUE;
  return FALSE;
}

/* One slot's values pass the leaf (any value, as multi-valued fields do). */
static gboolean slot_ok(ixia_idx_t *idx, const pnode_t *p, const col_t *c, guint slot) {
  guint32 n;
  const void *v = col_slot(c, slot, &n);
  for (guint32 i = 0; i < n; i++) {
    if (c->width == 8) {
      if (num_ok(p, ((const double *)v)[i])) return TRUE;
    } else {
      guint32 vid = ((const guint32 *)v)[i];
      if (!p->by_bytes) {
        if (vid_ok(p, vid)) return TRUE;
        continue;
      }
      /* dict_lock is held by the caller for by_bytes leaves. */
      const field_t *f = p->field;
      if (vid < f->vv->len) {
        const ixia_val_t *val = &g_array_index(f->vv, ixia_val_t, vid);
        if (val->p && bytes_pass(p->f, val->p, val->len)) return TRUE;
      }
    }
  }
  (void)idx;
  return FALSE;
}

#ifdef HAVE_AVX2_PATH
/* range_word on a CPU with AVX2: eight slots a step in two registers of
 * four (a 30% aggregation checks every live slot of its range: the SSE2
 * loop was 24% of the shard's CPU). */
__attribute__((target("avx2"))) static guint64 range_word_avx2(const double *v, double lo, double hi) {
  const __m256d l = _mm256_set1_pd(lo), h = _mm256_set1_pd(hi);
  guint64 keep = 0;
  for (guint b = 0; b < 64; b += 8) {
    __m256d x0 = _mm256_loadu_pd(v + b), x1 = _mm256_loadu_pd(v + b + 4);
    __m256d in0 = _mm256_and_pd(_mm256_cmp_pd(x0, l, _CMP_GE_OQ), _mm256_cmp_pd(x0, h, _CMP_LE_OQ));
    __m256d in1 = _mm256_and_pd(_mm256_cmp_pd(x1, l, _CMP_GE_OQ), _mm256_cmp_pd(x1, h, _CMP_LE_OQ));
    keep |= (guint64)(guint)(_mm256_movemask_pd(in0) | _mm256_movemask_pd(in1) << 4) << b;
  }
  return keep;
}
#endif

/* The slots of one 64-slot word of doubles within [lo, hi], without
 * branches. SSE2 (every x86-64) compares two slots an instruction and
 * moves their two result bits out at once; the compiler left the plain
 * loop scalar, eight instructions a slot, 18% of a 30% aggregation's shard
 * CPU. NaN is outside every range either way (ordered compares). */
static inline guint64 range_word(const double *v, double lo, double hi) {
#ifdef HAVE_AVX2_PATH
  if (__builtin_cpu_supports("avx2")) return range_word_avx2(v, lo, hi);
#endif
  guint64 keep = 0;
#ifdef __SSE2__
  __m128d l = _mm_set1_pd(lo), h = _mm_set1_pd(hi);
  for (guint b = 0; b < 64; b += 2) {
    __m128d x = _mm_loadu_pd(v + b);
    __m128d in = _mm_and_pd(_mm_cmpge_pd(x, l), _mm_cmple_pd(x, h));
    keep |= (guint64)_mm_movemask_pd(in) << b;
  }
#else
  for (guint b = 0; b < 64; b++) keep |= (guint64)((v[b] >= lo) & (v[b] <= hi)) << b;
#endif
  return keep;
}

/* A range leaf's bounds as closed ones (an open bound moves one double
 * inward), for range_word. */
static void range_closed(const pnode_t *p, double *lo, double *hi) {
  *lo = p->lo_open ? nextafter(p->dlo, INFINITY) : p->dlo;
  *hi = p->hi_open ? nextafter(p->dhi, -INFINITY) : p->dhi;
}

#ifdef HAVE_AVX2_PATH
/* vbits_word for a dense word on a CPU with AVX2 (the build targets
 * plain x86-64, so the CPU is asked): eight slots a step, their value
 * ids gathered into the leaf's bitset. A range of 15 keywords over 30% of
 * a table spent ~0.9 ns a slot in the loop below, 30% of the shard's CPU
 * on sorted pages that count to track_total_hits. Out-of-range ids (the
 * sentinels too) read word 0 and are masked off. */
__attribute__((target("avx2"))) static guint64 vbits_word_avx2(const pnode_t *p, const guint32 *v) {
  const __m256i lo = _mm256_set1_epi32((int)p->vbits_lo);
  const __m256i sign = _mm256_set1_epi32(G_MININT32);
  const __m256i n = _mm256_set1_epi32((int)(p->vbits_n ^ 0x80000000u));
  const __m256i low5 = _mm256_set1_epi32(31), one = _mm256_set1_epi32(1);
  const int *bits = (const int *)(const void *)p->vbits;
  guint64 keep = 0;
  for (guint b = 0; b < 64; b += 8) {
    __m256i r = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(v + b)), lo);
    /* r < vbits_n, unsigned, as a signed compare with the sign bits flipped */
    __m256i in = _mm256_cmpgt_epi32(n, _mm256_xor_si256(r, sign));
    r = _mm256_and_si256(r, in);
    __m256i w = _mm256_i32gather_epi32(bits, _mm256_srli_epi32(r, 5), 4);
    __m256i bit = _mm256_and_si256(_mm256_srlv_epi32(w, _mm256_and_si256(r, low5)), one);
    __m256i hit = _mm256_and_si256(_mm256_cmpeq_epi32(bit, one), in);
    keep |= (guint64)(guint32)_mm256_movemask_ps(_mm256_castsi256_ps(hit)) << b;
  }
  return keep;
}
#endif

/* The slots of m whose value id is in the leaf's bitset, without branches:
 * a match is as likely as not, so a branch mispredicts. */
static inline guint64 vbits_word(const pnode_t *p, const guint32 *v, guint64 m) {
  guint64 keep = 0;
#ifdef __SSE2__
  /* A few value ids over a dense word: four slots compared at once, where
   * the loop below spends ~8 instructions a slot (29% of the shard's CPU
   * under NOT country = C, which checks every live slot). The sentinels
   * equal no value id. */
  guint nv = p->vids->len;
  if (nv >= 1 && nv <= 4 && __builtin_popcountll(m) > 8) {
    const guint32 *ids = (const guint32 *)(void *)p->vids->data;
    __m128i t[4];
    for (guint i = 0; i < nv; i++) t[i] = _mm_set1_epi32((int)ids[i]);
    for (guint b = 0; b < 64; b += 4) {
      __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(v + b));
      __m128i eq = _mm_cmpeq_epi32(x, t[0]);
      for (guint i = 1; i < nv; i++) eq = _mm_or_si128(eq, _mm_cmpeq_epi32(x, t[i]));
      keep |= (guint64)_mm_movemask_ps(_mm_castsi128_ps(eq)) << b;
    }
    return keep & m;
  }
#endif
#ifdef HAVE_AVX2_PATH
  if (__builtin_popcountll(m) > 16 && __builtin_cpu_supports("avx2")) return vbits_word_avx2(p, v) & m;
#endif
  for (guint64 k = m; k; k &= k - 1) {
    guint b = (guint)__builtin_ctzll(k);
    guint32 r = v[b] - p->vbits_lo;
    guint64 in = r < p->vbits_n;
    guint32 rr = in ? r : 0;
    keep |= ((p->vbits[rr >> 6] >> (rr & 63)) & in) << b;
  }
  return keep;
}

/* Single-valued blocks: whole 64-slot words compared without branches,
 * which the compiler vectorises; sparse words go candidate by candidate. */
static void check_dense(const pnode_t *p, const col_t *c, guint64 *mask) {
  double lo = 0, hi = 0;
  if (c->width == 8 && p->f->kind == IXIA_F_RANGE) range_closed(p, &lo, &hi);
  for (guint w = 0; w < BLOCK_WORDS; w++) {
    guint64 m = mask[w] & c->has[w], keep = 0;
    if (!m) {
      mask[w] = 0;
      continue;
    }
    if (c->width == 8) {
      const double *v = c->v1.d + w * 64;
      if (p->f->kind == IXIA_F_RANGE && __builtin_popcountll(m) > 8) {
        keep = range_word(v, lo, hi);
      } else {
        for (guint64 k = m; k; k &= k - 1) {
          guint b = (guint)__builtin_ctzll(k);
          if (num_ok(p, v[b])) keep |= G_GUINT64_CONSTANT(1) << b;
        }
      }
    } else {
      keep = vbits_word(p, c->v1.u + w * 64, m);
    }
    mask[w] = m & keep;
  }
}

/* One raw doc value slot passes the leaf (DV_MISSING and DV_MULTI never
 * do; exists asks for DV_MISSING apart). */
static inline gboolean dv_ok(const pnode_t *p, gboolean numeric, guint64 raw) {
  if (p->f->kind == IXIA_F_EXISTS) return raw != (numeric ? DV_MISSING8 : DV_MISSING4);
  if (numeric) {
    double d;
    memcpy(&d, &raw, 8);
    return num_ok(p, d);
  }
  guint32 vid = (guint32)raw;
  if (!p->by_bytes) return vid_ok(p, vid);
  /* dict_lock is held by the caller for by_bytes leaves. */
  const field_t *f = p->field;
  if (vid >= f->vv->len) return FALSE;
  const ixia_val_t *val = &g_array_index(f->vv, ixia_val_t, vid);
  return val->p && bytes_pass(p->f, val->p, val->len);
}

/* A block's candidates checked on its doc values (no value is missing from
 * the block's slots but as DV_MISSING, and none is multi). Whole words of
 * a numeric range are compared without branches (the NaN sentinels fail
 * both comparisons), value ids against the leaf's bitset without branches
 * too (a match is as likely as not; the sentinels fall outside it). */
static void check_docvals(const pnode_t *p, const void *slots, guint64 *mask) {
  gboolean numeric = p->field->numeric;
  gboolean range = numeric && p->f->kind == IXIA_F_RANGE;
  gboolean bits = !numeric && p->vbits && p->f->kind != IXIA_F_EXISTS;
  double lo = 0, hi = 0;
  if (range) range_closed(p, &lo, &hi);
  /* Sparse candidates are a cache miss each: ask for all of their lines
   * before the first compare waits on one. */
  guint n = 0;
  for (guint w = 0; w < BLOCK_WORDS; w++) n += (guint)__builtin_popcountll(mask[w]);
  if (n <= BLOCK_SLOTS / 8) {
    guint width = numeric ? 8 : 4;
    for (guint w = 0; w < BLOCK_WORDS; w++)
      for (guint64 k = mask[w]; k; k &= k - 1)
        __builtin_prefetch((const guint8 *)slots + (w * 64 + (guint)__builtin_ctzll(k)) * width);
  }
  for (guint w = 0; w < BLOCK_WORDS; w++) {
    guint64 m = mask[w], keep = 0;
    if (!m) continue;
    if (range && __builtin_popcountll(m) > 8) {
      keep = range_word((const double *)slots + w * 64, lo, hi);
    } else if (bits) {
      keep = vbits_word(p, (const guint32 *)slots + w * 64, m);
    } else {
      for (guint64 k = m; k; k &= k - 1) {
        guint b = (guint)__builtin_ctzll(k);
        guint64 raw = numeric ? ((const guint64 *)slots)[w * 64 + b] : ((const guint32 *)slots)[w * 64 + b];
        if (dv_ok(p, numeric, raw)) keep |= G_GUINT64_CONSTANT(1) << b;
      }
    }
    mask[w] = m & keep;
  }
}

/* A leaf that doc values can answer: every checkable leaf of a field that
 * has them. */
static gboolean dv_checkable(const pnode_t *p) {
  return p->kind == N_LEAF && !p->bm && p->checkable && p->field && p->field->dv;
}

static gboolean check_leaf(ixia_idx_search_t *s, pnode_t *p, guint32 block, guint64 *mask) {
  if (p->bm || !p->checkable) {
    if (!materialize(s, p)) return FALSE;
    ixia_idx_bm_and_block(p->bm, block, mask);
    return TRUE;
  }
  field_t *fld = p->field;
  gboolean none = FALSE;
  guint32 flips = 0;
  /* exists reads the column's presence mask, 16 words a block, where doc
   * values compare 1,024 slots (exists:10 took twice the shard CPU). */
  if (!p->on_column) {
    p->on_column = 2;
    for (guint i = 0; i < s->q->n_agg_fields; i++)
      if (ixia_idx_field_lookup(s->idx, s->table, s->q->agg_fields[i]) == fld) p->on_column = 1;
  }
  const void *slots = dv_checkable(p) && p->f->kind != IXIA_F_EXISTS && p->on_column == 2
                          ? ixia_docvals_block(fld->dv, block, &none, &flips)
                          : NULL;
  guint64 orig[BLOCK_WORDS];
  if (slots) {
    memcpy(orig, mask, sizeof orig);
    if (!fld->numeric && !p->by_bytes && p->vids->len && !p->vbits) build_vbits(p);
    if (p->by_bytes) g_rw_lock_reader_lock(&s->idx->dict_lock);
    check_docvals(p, slots, mask);
    if (p->by_bytes) g_rw_lock_reader_unlock(&s->idx->dict_lock);
    if (!ixia_docvals_block_same(fld->dv, block, flips)) {
      /* A slot turned multi-valued (its sentinel failed the check) or back
       * while the block was read: the column block has it whole. */
      memcpy(mask, orig, sizeof orig);
      slots = NULL;
    }
  }
  if (slots || none) {
    guint64 n = 0;
    for (guint w = 0; w < BLOCK_WORDS; w++) n += (guint64)__builtin_popcountll(slots ? orig[w] : mask[w]);
    if (none) memset(mask, 0, BLOCK_WORDS * sizeof *mask);
    if (!p->how) p->how = "doc values check";
    p->checked += n;
    for (guint w = 0; w < BLOCK_WORDS; w++) p->passed += (guint64)__builtin_popcountll(mask[w]);
    return ixia_idx_charge(s, n);
  }
  blk_t *b = ixia_idx_search_column(s, fld, block);
  if (!b) return FALSE;
  const col_t *c = b->col;
  if (!p->how) p->how = "column check";
  guint64 n = 0;
  if (p->f->kind == IXIA_F_EXISTS) {
    for (guint w = 0; w < BLOCK_WORDS; w++) {
      n += (guint64)__builtin_popcountll(mask[w]);
      mask[w] &= c->has[w];
    }
  } else {
    if (!fld->numeric && !p->by_bytes && p->vids->len && !p->vbits) build_vbits(p);
    for (guint w = 0; w < BLOCK_WORDS; w++) n += (guint64)__builtin_popcountll(mask[w]);
    if (!c->mstart && !p->by_bytes && (fld->numeric || p->vbits)) {
      check_dense(p, c, mask);
    } else {
      if (p->by_bytes) g_rw_lock_reader_lock(&s->idx->dict_lock);
      for (guint w = 0; w < BLOCK_WORDS; w++) {
        guint64 m = mask[w] & c->has[w], keep = 0;
        for (; m; m &= m - 1) {
          guint bit = (guint)__builtin_ctzll(m);
          if (slot_ok(s->idx, p, c, w << 6 | bit)) keep |= G_GUINT64_CONSTANT(1) << bit;
        }
        mask[w] = keep;
      }
      if (p->by_bytes) g_rw_lock_reader_unlock(&s->idx->dict_lock);
    }
  }
  ixia_idx_blk_unref(b);
  p->checked += n;
  for (guint w = 0; w < BLOCK_WORDS; w++) p->passed += (guint64)__builtin_popcountll(mask[w]);
  return ixia_idx_charge(s, n);
}

/* How many ids ahead of its read a doc values slot is prefetched: enough
 * misses in flight to cover memory's latency, fewer than the core can keep
 * outstanding. */
#define DV_PREFETCH_AHEAD 16

static inline void dv_prefetch(const ixia_docvals_t *dv, const guint32 *ids, const gboolean *pass,
                               guint i) {
  const void *a = pass[i] ? ixia_docvals_prefetch_addr(dv, ids[i]) : NULL;
  if (a) __builtin_prefetch(a);
}

/* A check answered from one column slot per id (ixia_idx_check_ids). */
static gboolean slot_checkable(const pnode_t *p) {
  return p->kind == N_LEAF && !p->bm && p->checkable && !p->by_bytes;
}

gboolean ixia_idx_check_ids(ixia_idx_search_t *s, GPtrArray *checks, const guint32 *ids, guint n,
                            gboolean *pass) {
  for (guint i = 0; i < n; i++) pass[i] = TRUE;
  blk_t **cols = g_new0(blk_t *, n);
  gboolean ok = TRUE;
  for (guint c = 0; ok && checks && c < checks->len; c++) {
    pnode_t *p = checks->pdata[c];
    if (!slot_checkable(p)) {
      for (guint i = 0; ok && i < n; i++) {
        if (!pass[i]) continue;
        guint slot = ids[i] & (BLOCK_SLOTS - 1);
        guint64 mask[BLOCK_WORDS] = {0};
        mask[slot >> 6] = G_GUINT64_CONSTANT(1) << (slot & 63);
        ok = ixia_idx_check_block(s, p, ids[i] >> BLOCK_BITS, mask);
        pass[i] = mask[slot >> 6] != 0;
      }
      continue;
    }
    field_t *fld = p->field;
    guint8 width = fld->numeric ? 8 : 4;
    gboolean exists = p->f->kind == IXIA_F_EXISTS;
    if (!exists && !fld->numeric && p->vids->len && !p->vbits) build_vbits(p);
    if (!p->how) p->how = "column check";
    guint64 checked = 0, passed = 0;
    /* Doc values first, then the columns of the ids they do not hold.
     * Each slot is prefetched DV_PREFETCH_AHEAD ids before it is read:
     * with all of a chunk's slots (up to 512) prefetched first, far more
     * than the core keeps in flight, the reads that followed still waited
     * on their misses (91% of the doc values read's samples on its load;
     * brand = X AND a 50% price range: shard CPU 36-39 -> 30-32 us a
     * query). */
    gboolean *col_todo = g_new(gboolean, n);
    for (guint i = 0; i < n; i++) col_todo[i] = pass[i];
    if (fld->dv) {
      for (guint i = 0; i < MIN(n, DV_PREFETCH_AHEAD); i++) dv_prefetch(fld->dv, ids, pass, i);
      for (guint i = 0; i < n; i++) {
        if (i + DV_PREFETCH_AHEAD < n) dv_prefetch(fld->dv, ids, pass, i + DV_PREFETCH_AHEAD);
        guint64 raw;
        if (!pass[i] || !ixia_docvals_get(fld->dv, ids[i], &raw)) continue;
        pass[i] = dv_ok(p, fld->numeric, raw);
        col_todo[i] = FALSE;
        checked++;
        passed += pass[i];
      }
      if (checked) p->how = "doc values check";
    }
    /* Every column first, its slot prefetched; then the checks. */
    for (guint i = 0; ok && i < n; i++) {
      if (!col_todo[i]) continue;
      cols[i] = ixia_idx_column(s->idx, fld->id, width, ids[i] >> BLOCK_BITS, s->err);
      if (!cols[i]) {
        ok = FALSE;
        break;
      }
      const col_t *col = cols[i]->col;
      guint slot = ids[i] & (BLOCK_SLOTS - 1);
      __builtin_prefetch(&col->has[slot >> 6]);
      if (!col->mstart) __builtin_prefetch(width == 8 ? (const void *)&col->v1.d[slot] : (const void *)&col->v1.u[slot]);
    }
    for (guint i = 0; i < n; i++) {
      if (!cols[i]) continue;
      if (ok) {
        const col_t *col = cols[i]->col;
        guint slot = ids[i] & (BLOCK_SLOTS - 1);
        gboolean has = col->has[slot >> 6] >> (slot & 63) & 1;
        pass[i] = has && (exists || slot_ok(s->idx, p, col, slot));
        checked++;
        passed += pass[i];
      }
      ixia_idx_blk_unref(cols[i]);
      cols[i] = NULL;
    }
    g_free(col_todo);
    p->checked += checked;
    p->passed += passed;
    ok = ok && ixia_idx_charge(s, checked);
  }
  g_free(cols);
  return ok;
}

static gboolean mask_empty(const guint64 *m) {
  for (guint w = 0; w < BLOCK_WORDS; w++)
    if (m[w]) return FALSE;
  return TRUE;
}

gboolean ixia_idx_check_block(ixia_idx_search_t *s, pnode_t *p, guint32 block, guint64 *mask) {
  if (mask_empty(mask)) return TRUE;
  switch (p->kind) {
    case N_ALL:
      return TRUE;
    case N_NONE:
      memset(mask, 0, BLOCK_WORDS * sizeof *mask);
      return TRUE;
    case N_LEAF:
      return check_leaf(s, p, block, mask);
    case N_AND:
      if (p->bm) break;
      if (!p->how) p->how = "per candidate";
      for (guint i = 0; i < p->n_kids && !mask_empty(mask); i++)
        if (!ixia_idx_check_block(s, p->kids[i], block, mask)) return FALSE;
      return TRUE;
    case N_OR: {
      if (p->bm) break;
      if (!p->how) p->how = "per candidate";
      guint64 acc[BLOCK_WORDS] = {0}, m[BLOCK_WORDS];
      for (guint i = 0; i < p->n_kids; i++) {
        for (guint w = 0; w < BLOCK_WORDS; w++) m[w] = mask[w] & ~acc[w];
        if (mask_empty(m)) break;
        if (!ixia_idx_check_block(s, p->kids[i], block, m)) return FALSE;
        for (guint w = 0; w < BLOCK_WORDS; w++) acc[w] |= m[w];
      }
      memcpy(mask, acc, sizeof acc);
      return TRUE;
    }
    case N_NOT: {
      if (p->bm) break;
      if (!p->how) p->how = "per candidate";
      guint64 m[BLOCK_WORDS];
      memcpy(m, mask, sizeof m);
      if (!ixia_idx_check_block(s, p->kids[0], block, m)) return FALSE;
      for (guint w = 0; w < BLOCK_WORDS; w++) mask[w] &= ~m[w];
      return TRUE;
    }
  }
  ixia_idx_bm_and_block(p->bm, block, mask);
  return TRUE;
}

void ixia_idx_pnode_note(pnode_t *p, guint64 matched) { p->passed = matched; }

/* -------------------------------------------------------------- explain */

static const char *kind_name(const pnode_t *p) {
  switch (p->kind) {
    case N_ALL: return "all";
    case N_NONE: return "none";
    case N_AND: return "and";
    case N_OR: return "or";
    case N_NOT: return "not";
    case N_LEAF: break;
  }
  switch (p->f->kind) {
    case IXIA_F_TERM: return "term";
    case IXIA_F_IN: return "in";
    case IXIA_F_RANGE: return "range";
    case IXIA_F_PREFIX: return "prefix";
    case IXIA_F_EXISTS: return "exists";
    case IXIA_F_MATCH: return "match";
    case IXIA_F_MATCH_PHRASE: return "match_phrase";
    default: return "?";
  }
}

cJSON *ixia_idx_plan_explain(const pnode_t *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "node", kind_name(p));
  if (p->f && p->f->field) cJSON_AddStringToObject(o, "field", p->f->field->field);
  cJSON_AddStringToObject(o, "how", p->how ? p->how : "not evaluated");
  cJSON_AddNumberToObject(o, "estimate", (double)(guint64)(p->est + 0.5));
  if (p->bm || p->lead || p->probed) cJSON_AddNumberToObject(o, "actual", (double)p->passed);
  if (p->checked) {
    cJSON_AddNumberToObject(o, "checked", (double)p->checked);
    cJSON_AddNumberToObject(o, "passed", (double)p->passed);
  }
  if (p->lead) cJSON_AddTrueToObject(o, "lead");
  if (p->by_bytes) cJSON_AddTrueToObject(o, "compares_bytes");
  if (p->n_kids) {
    cJSON *kids = cJSON_AddArrayToObject(o, "children");
    for (guint i = 0; i < p->n_kids; i++) cJSON_AddItemToArray(kids, ixia_idx_plan_explain(p->kids[i]));
  }
  return o;
}
