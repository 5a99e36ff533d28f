/* Aggregation state: what a shard accumulates over its matching documents
 * and what the query API merges the shards' partials into.
 *
 * One state (a cell) per aggregation node; a terms node holds a hash of
 * buckets keyed by the encoded value, each with a cell per sub-aggregation.
 * Sums are exact (Shewchuk partials), so the order in which documents,
 * blocks or shards are added never changes a result; percentiles keep
 * every value up to query.max_exact_values, then a log histogram with 1%
 * relative error. Memory is accounted as it grows and a query that passes
 * query.max_memory_mb stops with an error naming it.
 *
 * Two ways in: ixia_aggs_add (one document's values, as brute force and
 * simple engines produce them) and ixia_aggs_cell_merge (a summary per node
 * and bucket, from an engine that aggregates whole column blocks). */
#include <stdarg.h>
#include <stdlib.h>
#include <xxhash.h>

#include "internal.h"

/* Cardinality keeps 64-bit hashes directly in GHashTable's pointer keys. */
G_STATIC_ASSERT(sizeof(gpointer) >= sizeof(guint64));

gboolean ixia_aggs_fail(ixia_aggs_t *a, ixia_error_t **err, ixia_code_t code, const char *fmt,
                        ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (a->fail_code == IXIA_OK) {
    a->fail_code = code;
    a->fail_msg = g_strdup(msg);
  }
  ixia_error_set(err, code, "%s", msg);
  g_free(msg);
  return FALSE;
}

gboolean ixia_aggs_mem_grow(ixia_aggs_t *a, guint64 bytes, ixia_error_t **err) {
  a->mem += bytes;
  if (a->mem <= a->lim.max_memory_bytes) return TRUE;
  return ixia_aggs_fail(a, err, IXIA_ETOOLARGE,
                        "aggregations need more than %" G_GUINT64_FORMAT
                        " MiB of memory (query.max_memory_mb)",
                        a->lim.max_memory_bytes >> 20);
}

guint64 ixia_val_hash(const guint8 *p, guint32 len) { return XXH3_64bits(p, len); }

/* ---- exact sums ---- */

enum { SUM_POS_INF = 1, SUM_NEG_INF = 2, SUM_NAN = 4, SUM_OVERFLOW = 8 };

gsize ixia_fsum_add(ixia_fsum_t *s, double x) {
  if (!isfinite(x)) {
    s->special |= isnan(x) ? SUM_NAN : x > 0 ? SUM_POS_INF : SUM_NEG_INF;
    return 0;
  }
  if (s->special & SUM_OVERFLOW) return 0;
  double *p = s->parts;
  guint i = 0;
  for (guint j = 0; j < s->n; j++) {
    double y = p[j];
    if (fabs(x) < fabs(y)) {
      double t = x;
      x = y;
      y = t;
    }
    double hi = x + y;
    double lo = y - (hi - x);
    if (lo != 0.0) p[i++] = lo;
    x = hi;
  }
  if (!isfinite(x)) {
    /* Only values near DBL_MAX get here; such a sum has no finite answer. */
    s->special |= SUM_OVERFLOW;
    return 0;
  }
  if (i < s->cap) {
    p[i] = x;
    s->n = (guint16)(i + 1);
    return 0;
  }
  guint16 cap = s->cap ? (guint16)(s->cap * 2) : 4;
  s->parts = g_renew(double, s->parts, cap);
  s->parts[i] = x;
  s->n = (guint16)(i + 1);
  gsize more = (gsize)(cap - s->cap) * sizeof(double);
  s->cap = cap;
  return more;
}

gsize ixia_fsum_merge(ixia_fsum_t *s, const ixia_fsum_t *b) {
  gsize more = 0;
  s->special |= b->special;
  for (guint i = 0; i < b->n; i++) more += ixia_fsum_add(s, b->parts[i]);
  return more;
}

double ixia_fsum_result(const ixia_fsum_t *s) {
  if (s->special & (SUM_NAN | SUM_OVERFLOW)) return NAN;
  if ((s->special & SUM_POS_INF) && (s->special & SUM_NEG_INF)) return NAN;
  if (s->special & SUM_POS_INF) return INFINITY;
  if (s->special & SUM_NEG_INF) return -INFINITY;
  if (s->n == 0) return 0.0;
  const double *p = s->parts;
  guint n = s->n;
  double hi = p[--n], lo = 0.0;
  while (n > 0) {
    double x = hi, y = p[--n];
    hi = x + y;
    double yr = hi - x;
    lo = y - yr;
    if (lo != 0.0) break;
  }
  /* Round half to even across the remaining partials. */
  if (n > 0 && ((lo < 0 && p[n - 1] < 0) || (lo > 0 && p[n - 1] > 0))) {
    double y = lo * 2, x = hi + y, yr = x - hi;
    if (y == yr) hi = x;
  }
  return hi;
}

void ixia_xsum_carry(ixia_xsum_t *s) {
  /* Balanced digits: a negative sum does not become a huge top chunk minus
   * a remainder. The top chunk only grows by carries: 2^32 of them before
   * it could overflow would need a sum far beyond any double. */
  gint64 *c = s->c;
  for (guint i = 0; i + 1 < IXIA_XSUM_CHUNKS; i++) {
    gint64 carry = (c[i] + ((gint64)1 << 31)) >> 32; /* arithmetic: floor division */
    c[i] -= carry * ((gint64)1 << 32);
    c[i + 1] += carry;
  }
  s->run = 0;
}

gsize ixia_xsum_into(const ixia_xsum_t *x, ixia_fsum_t *s) {
  s->special |= x->special;
  /* Every chunk in [-2^31, 2^31): each chunk times its weight is then
   * exactly a double, and no term is larger than the sum needs. */
  ixia_xsum_t y = *x;
  ixia_xsum_carry(&y);
  gsize more = 0;
  for (guint i = 0; i < IXIA_XSUM_CHUNKS; i++)
    if (y.c[i]) more += ixia_fsum_add(s, ldexp((double)y.c[i], (int)(32 * i) - 1074));
  return more;
}

void ixia_xwin_flush(ixia_xwin_t *w, ixia_xsum_t *s) {
  if (!w->acc) return;
  /* The magnitude in pieces of 53 bits, each exactly a double: its lowest
   * bit weighs 2^(base - 1075) >= 2^-1074, its highest stays under 2^1024
   * (IXIA_XWIN_MAX_BASE), so ldexp rounds nothing. */
  gboolean neg = w->acc < 0;
  unsigned __int128 mag = neg ? -(unsigned __int128)w->acc : (unsigned __int128)w->acc;
  for (int k = 0; mag; k++, mag >>= 53) {
    guint64 piece = (guint64)mag & ((G_GUINT64_CONSTANT(1) << 53) - 1);
    if (!piece) continue;
    double d = ldexp((double)piece, (int)w->base - 1075 + 53 * k);
    ixia_xsum_add(s, neg ? -d : d);
  }
  w->acc = 0;
}

void ixia_fsum_clear(ixia_fsum_t *s) {
  g_free(s->parts);
  memset(s, 0, sizeof *s);
}

gboolean ixia_aggs_fsum_add(ixia_aggs_t *a, ixia_fsum_t *s, double x, ixia_error_t **err) {
  gsize more = ixia_fsum_add(s, x);
  return more == 0 || ixia_aggs_mem_grow(a, more, err);
}

/* ---- percentiles ---- */

static gint32 hist_index(const ixia_aggs_t *a, double ax) {
  double i = ceil(log(ax) / a->log_gamma);
  if (!(i < PCT_MAX_INDEX)) return PCT_MAX_INDEX;
  if (i < -PCT_MAX_INDEX) return -PCT_MAX_INDEX;
  return (gint32)i;
}

gboolean ixia_pct_dense_add(ixia_aggs_t *a, dense_t *d, gint32 idx, guint64 by, ixia_error_t **err) {
  guint64 before = d->counts ? d->counts->len : 0;
  if (!d->counts) {
    d->counts = g_array_new(FALSE, TRUE, sizeof(guint64));
    g_array_set_size(d->counts, 1);
    d->off = idx;
  } else if (idx < d->off) {
    /* Extend downwards with slack, so that a descending stream of values
     * does not move the array once per bucket. */
    guint len = d->counts->len;
    gint32 new_off = MAX(idx - (gint32)(len / 2), -PCT_MAX_INDEX);
    guint extra = (guint)(d->off - new_off);
    g_array_set_size(d->counts, len + extra);
    guint64 *c = (guint64 *)d->counts->data;
    memmove(c + extra, c, len * sizeof *c);
    memset(c, 0, extra * sizeof *c);
    d->off -= (gint32)extra;
  } else if ((guint)(idx - d->off) >= d->counts->len) {
    g_array_set_size(d->counts, (guint)(idx - d->off) + 1);
  }
  g_array_index(d->counts, guint64, idx - d->off) += by;
  guint64 after = d->counts->len;
  return after == before || ixia_aggs_mem_grow(a, (after - before) * sizeof(guint64), err);
}

gboolean ixia_pct_hist_add(ixia_aggs_t *a, pct_t *p, double x, guint64 by, ixia_error_t **err) {
  if (x == 0) {
    p->zero += by;
    return TRUE;
  }
  return ixia_pct_dense_add(a, x > 0 ? &p->pos : &p->neg, hist_index(a, fabs(x)), by, err);
}

gboolean ixia_pct_to_hist(ixia_aggs_t *a, pct_t *p, ixia_error_t **err) {
  if (!p->exact) return TRUE;
  GArray *ex = p->exact;
  p->exact = NULL;
  a->mem -= MIN(a->mem, p->exact_acct);
  p->exact_acct = 0;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < ex->len; i++) ok = ixia_pct_hist_add(a, p, g_array_index(ex, double, i), 1, err);
  g_array_free(ex, TRUE);
  return ok;
}

gboolean ixia_pct_add_exact(ixia_aggs_t *a, pct_t *p, const double *v, guint n,
                              ixia_error_t **err) {
  g_array_append_vals(p->exact, v, n);
  /* GArray grows to powers of two: account for what it really holds. */
  guint64 need = (guint64)p->exact->len * sizeof(double);
  if (need <= p->exact_acct) return TRUE;
  guint64 cap = MAX(p->exact_acct, 16);
  while (cap < need) cap <<= 1;
  guint64 more = cap - p->exact_acct;
  p->exact_acct = cap;
  return ixia_aggs_mem_grow(a, more, err);
}

static gboolean pct_add(ixia_aggs_t *a, agg_state_t *st, double x, ixia_error_t **err) {
  pct_t *p = st->u.pct;
  if (st->n == 0 || x < p->min) p->min = x;
  if (st->n == 0 || x > p->max) p->max = x;
  st->n++;
  if (p->exact && st->n <= a->lim.max_exact_values) return ixia_pct_add_exact(a, p, &x, 1, err);
  return ixia_pct_to_hist(a, p, err) && ixia_pct_hist_add(a, p, x, 1, err);
}

int ixia_double_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double ixia_pct_hist_rank(const ixia_aggs_t *a, const pct_t *p, guint64 rank) {
  double gamma = exp(a->log_gamma);
  guint64 seen = 0;
  double est = p->max;
  gboolean found = FALSE;
  /* Negative values: largest magnitude first. */
  for (guint i = p->neg.counts ? p->neg.counts->len : 0; !found && i-- > 0;) {
    seen += g_array_index(p->neg.counts, guint64, i);
    if (seen >= rank) {
      est = -2 * exp((p->neg.off + (gint32)i) * a->log_gamma) / (gamma + 1);
      found = TRUE;
    }
  }
  seen += p->zero;
  if (!found && seen >= rank) {
    est = 0;
    found = TRUE;
  }
  for (guint i = 0; !found && p->pos.counts && i < p->pos.counts->len; i++) {
    seen += g_array_index(p->pos.counts, guint64, i);
    if (seen >= rank) {
      est = 2 * exp((p->pos.off + (gint32)i) * a->log_gamma) / (gamma + 1);
      found = TRUE;
    }
  }
  return CLAMP(est, p->min, p->max);
}

/* ---- states ---- */


static guint key_hash(gconstpointer k) { return ((const term_key_t *)k)->hash; }

static gboolean key_equal(gconstpointer x, gconstpointer y) {
  const term_key_t *a = x, *b = y;
  return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

void ixia_aggs_state_init(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st) {
  memset(st, 0, sizeof *st);
  switch (g->kind) {
    case IXIA_AGG_PERCENTILES:
      st->u.pct = g_new0(pct_t, 1);
      st->u.pct->exact = g_array_new(FALSE, FALSE, sizeof(double));
      a->mem += sizeof(pct_t) + sizeof(GArray);
      break;
    case IXIA_AGG_CARDINALITY:
      st->u.hashes = g_hash_table_new(g_direct_hash, NULL);
      a->mem += 64;
      break;
    case IXIA_AGG_STATS:
    case IXIA_AGG_TOP_HITS:
      ixia_more_init(a, g, st);
      break;
    default:
      if (ixia_agg_is_bucket(g->kind)) {
        st->u.buckets = g_hash_table_new(key_hash, key_equal);
        a->mem += 64;
      }
      break;
  }
}

void ixia_aggs_state_clear(const ixia_agg_t *g, agg_state_t *st) {
  switch (g->kind) {
    case IXIA_AGG_SUM:
    case IXIA_AGG_AVG:
      ixia_fsum_clear(&st->u.sum);
      break;
    case IXIA_AGG_PERCENTILES:
      if (st->u.pct->exact) g_array_free(st->u.pct->exact, TRUE);
      if (st->u.pct->pos.counts) g_array_free(st->u.pct->pos.counts, TRUE);
      if (st->u.pct->neg.counts) g_array_free(st->u.pct->neg.counts, TRUE);
      g_free(st->u.pct);
      break;
    case IXIA_AGG_CARDINALITY:
      g_hash_table_destroy(st->u.hashes);
      break;
    case IXIA_AGG_STATS:
    case IXIA_AGG_TOP_HITS:
      ixia_more_clear(g, st);
      break;
    default: {
      if (!ixia_agg_is_bucket(g->kind)) break;
      GHashTableIter it;
      gpointer k;
      g_hash_table_iter_init(&it, st->u.buckets);
      while (g_hash_table_iter_next(&it, &k, NULL)) {
        bucket_t *b = k;
        for (guint i = 0; i < g->n_subs; i++) ixia_aggs_state_clear(g->subs[i], &b->subs[i]);
        g_free(b);
      }
      g_hash_table_destroy(st->u.buckets);
      break;
    }
  }
}

bucket_t *ixia_aggs_bucket_get(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                            const guint8 *p, guint32 len, guint hash, ixia_error_t **err) {
  term_key_t k = {hash, len, p};
  bucket_t *b = g_hash_table_lookup(st->u.buckets, &k);
  if (b) return b;
  if (g_hash_table_size(st->u.buckets) >= a->lim.max_terms_buckets) {
    ixia_aggs_fail(a, err, IXIA_ETOOLARGE,
         "%s aggregation '%s' has more than %u buckets (query.max_terms_buckets)",
         g->kind == IXIA_AGG_TERMS ? "terms" : "bucket", g->name, a->lim.max_terms_buckets);
    return NULL;
  }
  gsize subs_bytes = g->n_subs * sizeof(agg_state_t);
  gsize size = sizeof(bucket_t) + subs_bytes + len;
  b = g_malloc0(size);
  b->subs = (agg_state_t *)(b + 1);
  guint8 *kb = (guint8 *)b->subs + subs_bytes;
  if (len) memcpy(kb, p, len); /* an empty keyword's value has no bytes (p may be NULL) */
  b->key = (term_key_t){hash, len, kb};
  for (guint i = 0; i < g->n_subs; i++) ixia_aggs_state_init(a, g->subs[i], &b->subs[i]);
  g_hash_table_add(st->u.buckets, b);
  return ixia_aggs_mem_grow(a, size + BUCKET_OVERHEAD, err) ? b : NULL;
}

gboolean ixia_aggs_state_add(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                             const ixia_val_t *const *vals, const guint *nvals, const ixia_hitctx_t *d,
                             ixia_error_t **err) {
  if (g->kind == IXIA_AGG_COUNT) {
    st->n++;
    return TRUE;
  }
  if (g->kind > IXIA_AGG_CARDINALITY) return ixia_more_add(a, g, st, vals, nvals, d, err);
  const ixia_val_t *v = vals[g->field_slot];
  guint nv = nvals[g->field_slot];
  for (guint i = 0; i < nv; i++) {
    if (g->kind == IXIA_AGG_CARDINALITY) {
      guint64 h = ixia_val_hash(v[i].p, v[i].len);
      if (g_hash_table_add(st->u.hashes, GSIZE_TO_POINTER(h)) &&
          !ixia_aggs_mem_grow(a, CARD_ENTRY_BYTES, err))
        return FALSE;
      continue;
    }
    if (g->kind == IXIA_AGG_TERMS) {
      guint hash = (guint)XXH3_64bits(v[i].p, v[i].len);
      bucket_t *b = ixia_aggs_bucket_get(a, g, st, v[i].p, v[i].len, hash, err);
      if (!b) return FALSE;
      if (b->last_doc == a->doc_seq) continue;
      b->last_doc = a->doc_seq;
      b->count++;
      for (guint j = 0; j < g->n_subs; j++)
        if (!ixia_aggs_state_add(a, g->subs[j], &b->subs[j], vals, nvals, d, err)) return FALSE;
      continue;
    }
    if (v[i].len != IXIA_NUM_BYTES) continue; /* not a number: absent */
    double x = ixia_num_decode(v[i].p);
    switch (g->kind) {
      case IXIA_AGG_SUM:
      case IXIA_AGG_AVG:
        st->n++;
        if (!ixia_aggs_fsum_add(a, &st->u.sum, x, err)) return FALSE;
        break;
      case IXIA_AGG_MIN:
        if (st->n++ == 0 || x < st->u.ext) st->u.ext = x;
        break;
      case IXIA_AGG_MAX:
        if (st->n++ == 0 || x > st->u.ext) st->u.ext = x;
        break;
      case IXIA_AGG_PERCENTILES:
        if (!pct_add(a, st, x, err)) return FALSE;
        break;
      default:
        break;
    }
  }
  return TRUE;
}

ixia_aggs_t *ixia_aggs_new(const ixia_query_t *q, const ixia_query_limits_t *lim) {
  ixia_aggs_t *a = g_new0(ixia_aggs_t, 1);
  a->q = q;
  a->lim = *lim;
  a->log_gamma = log((1 + PCT_ALPHA) / (1 - PCT_ALPHA));
  a->top = g_new0(agg_state_t, MAX(q->n_aggs, 1));
  a->mem = sizeof *a + q->n_aggs * sizeof(agg_state_t);
  for (guint i = 0; i < q->n_aggs; i++) ixia_aggs_state_init(a, q->aggs[i], &a->top[i]);
  return a;
}

void ixia_aggs_destroy(ixia_aggs_t *a) {
  if (!a) return;
  for (guint i = 0; i < a->q->n_aggs; i++) ixia_aggs_state_clear(a->q->aggs[i], &a->top[i]);
  g_free(a->top);
  g_free(a->fail_msg);
  g_free(a);
}

guint64 ixia_aggs_memory(const ixia_aggs_t *a) { return a->mem; }

gboolean ixia_aggs_check_usable(const ixia_aggs_t *a, ixia_error_t **err) {
  if (a->fail_code == IXIA_OK) return TRUE;
  return ixia_error_set(err, a->fail_code, "%s", a->fail_msg);
}

static gboolean add_with(ixia_aggs_t *a, const ixia_val_t *const *vals, const guint *nvals,
                         const ixia_hitctx_t *d, ixia_error_t **err) {
  if (!ixia_aggs_check_usable(a, err)) return FALSE;
  a->doc_seq++;
  for (guint i = 0; i < a->q->n_aggs; i++)
    if (!ixia_aggs_state_add(a, a->q->aggs[i], &a->top[i], vals, nvals, d, err)) return FALSE;
  return TRUE;
}

gboolean ixia_aggs_add(ixia_aggs_t *a, const ixia_val_t *const *vals, const guint *nvals,
                       ixia_error_t **err) {
  return add_with(a, vals, nvals, NULL, err);
}

gboolean ixia_aggs_add_doc(ixia_aggs_t *a, const cJSON *doc, ixia_error_t **err) {
  return ixia_aggs_add_hit(a, doc, NULL, 0, 0.0, err);
}

gboolean ixia_aggs_add_hit(ixia_aggs_t *a, const cJSON *doc, const char *key, gint64 version,
                           double score, ixia_error_t **err) {
  ixia_hitctx_t d = {doc, key, version, score};
  guint n = a->q->n_agg_fields;
  GPtrArray **per = g_new0(GPtrArray *, MAX(n, 1));
  ixia_val_t **vals = g_new0(ixia_val_t *, MAX(n, 1));
  guint *nvals = g_new0(guint, MAX(n, 1));
  for (guint i = 0; i < n; i++) {
    per[i] = ixia_values_lenient(doc, a->q->agg_fields[i]);
    nvals[i] = per[i]->len;
    vals[i] = g_new0(ixia_val_t, MAX(nvals[i], 1));
    for (guint j = 0; j < nvals[i]; j++) {
      gsize len;
      vals[i][j].p = g_bytes_get_data(per[i]->pdata[j], &len);
      vals[i][j].len = (guint32)len;
    }
  }
  gboolean ok = add_with(a, (const ixia_val_t *const *)vals, nvals, &d, err);
  for (guint i = 0; i < n; i++) {
    g_ptr_array_free(per[i], TRUE);
    g_free(vals[i]);
  }
  g_free(per);
  g_free(vals);
  g_free(nvals);
  return ok;
}


/* ---- accumulating outside documents ---- */

ixia_agg_cell_t *ixia_aggs_top_cell(ixia_aggs_t *a, guint i) { return &a->top[i]; }

ixia_agg_cell_t *ixia_aggs_cell_sub(ixia_agg_cell_t *subs, guint i) { return &subs[i]; }

ixia_agg_cell_t *ixia_aggs_cell_bucket(ixia_aggs_t *a, const ixia_agg_t *g, ixia_agg_cell_t *c,
                                       const guint8 *key, guint32 len, guint64 count,
                                       ixia_error_t **err) {
  if (!ixia_aggs_check_usable(a, err)) return NULL;
  guint hash = (guint)XXH3_64bits(key, len);
  bucket_t *b = ixia_aggs_bucket_get(a, g, c, key, len, hash, err);
  if (!b) return NULL;
  b->count += count;
  return b->subs;
}

gboolean ixia_aggs_cell_merge(ixia_aggs_t *a, const ixia_agg_t *g, ixia_agg_cell_t *c,
                              const ixia_agg_summary_t *s, ixia_error_t **err) {
  if (!ixia_aggs_check_usable(a, err)) return FALSE;
  switch (g->kind) {
    case IXIA_AGG_COUNT:
      c->n += s->n;
      return TRUE;
    case IXIA_AGG_SUM:
    case IXIA_AGG_AVG: {
      c->n += s->n;
      gsize more = ixia_fsum_merge(&c->u.sum, &s->sum);
      return more == 0 || ixia_aggs_mem_grow(a, more, err);
    }
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX:
      if (s->n == 0) return TRUE;
      if (c->n == 0 || (g->kind == IXIA_AGG_MIN ? s->ext < c->u.ext : s->ext > c->u.ext))
        c->u.ext = s->ext;
      c->n += s->n;
      return TRUE;
    case IXIA_AGG_PERCENTILES: {
      pct_t *p = c->u.pct;
      gboolean ok = TRUE;
      for (guint64 i = 0; i < s->n; i++) {
        double x = s->values[i];
        if (c->n == 0 || x < p->min) p->min = x;
        if (c->n == 0 || x > p->max) p->max = x;
        c->n++;
      }
      if (p->exact && c->n <= a->lim.max_exact_values)
        return ixia_pct_add_exact(a, p, s->values, (guint)s->n, err);
      ok = ixia_pct_to_hist(a, p, err);
      for (guint64 i = 0; ok && i < s->n; i++) ok = ixia_pct_hist_add(a, p, s->values[i], 1, err);
      return ok;
    }
    case IXIA_AGG_CARDINALITY:
      for (guint i = 0; i < s->n_hashes; i++)
        if (g_hash_table_add(c->u.hashes, GSIZE_TO_POINTER(s->hashes[i])) &&
            !ixia_aggs_mem_grow(a, CARD_ENTRY_BYTES, err))
          return FALSE;
      return TRUE;
    case IXIA_AGG_STATS:
    case IXIA_AGG_TOP_HITS:
      return ixia_more_cell_merge(a, g, c, s, err);
    default:
      break;
  }
  return ixia_aggs_fail(a, err, IXIA_EINTERNAL, "aggregation '%s': no summary for buckets", g->name);
}
