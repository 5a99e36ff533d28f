/* The aggregations beyond the first eight: stats, histogram,
 * date_histogram, range, filter, filters and top_hits; their state, brute-
 * force accumulation, wire form and response (docs/QUERY.md).
 *
 * The bucket kinds reuse the terms machinery of aggs.c and aggs_wire.c: a
 * hash of buckets keyed by bytes, each with a cell per nested aggregation,
 * merged across shards by key. Only the key differs: the encoded number of
 * a histogram bucket's start (ixia_agg_bucket_key, which the index calls
 * too, so both sides put a value in the same bucket), a range's or a
 * filter's index (4 bytes), nothing for a filter's single bucket. A
 * document counts once per bucket, whatever number of its values fall in
 * it. Histograms show the empty buckets between the first and the last
 * non-empty one (min_doc_count 0, as Elasticsearch) up to
 * query.max_terms_buckets.
 *
 * top_hits keeps, per bucket, its best `size` hits by (sort values, key):
 * keys and versions travel in the partial, and the query API reads the
 * documents from the truth store when it builds the response. */
#include <stdlib.h>
#include <xxhash.h>

#include "internal.h"
#include "timeutil.h"

/* ---------------------------------------------------------------- keys */

static gint64 floor_div(gint64 a, gint64 b) {
  gint64 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

double ixia_agg_bucket_key(const ixia_agg_t *g, double v) {
  if (g->kind == IXIA_AGG_HISTOGRAM) return floor((v - g->offset) / g->interval) * g->interval + g->offset;
  gint64 t = (gint64)floor(v), off = (gint64)g->offset;
  if (g->interval > 0) {
    gint64 iv = (gint64)g->interval;
    return (double)(floor_div(t + g->tz - off, iv) * iv - g->tz + off);
  }
  return (double)(ixia_cal_floor(t - off, (ixia_cal_unit_t)g->cal_unit, g->tz) + off);
}

static void be32w(guint8 *p, guint32 v) {
  p[0] = (guint8)(v >> 24), p[1] = (guint8)(v >> 16), p[2] = (guint8)(v >> 8), p[3] = (guint8)v;
}

static bucket_t *bucket(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st, const guint8 *k,
                        guint32 len, ixia_error_t **err) {
  return ixia_aggs_bucket_get(a, g, st, k, len, (guint)XXH3_64bits(k, len), err);
}

static const bucket_t *bucket_find(const agg_state_t *st, const guint8 *k, guint32 len) {
  term_key_t probe = {(guint)XXH3_64bits(k, len), len, k};
  return g_hash_table_lookup(st->u.buckets, &probe);
}

/* Counts the document in bucket b once, with its nested aggregations. */
static gboolean count_in(ixia_aggs_t *a, const ixia_agg_t *g, bucket_t *b,
                         const ixia_val_t *const *vals, const guint *nvals, const ixia_hitctx_t *d,
                         ixia_error_t **err) {
  if (b->last_doc == a->doc_seq) return TRUE;
  b->last_doc = a->doc_seq;
  b->count++;
  for (guint j = 0; j < g->n_subs; j++)
    if (!ixia_aggs_state_add(a, g->subs[j], &b->subs[j], vals, nvals, d, err)) return FALSE;
  return TRUE;
}

/* ------------------------------------------------------------- top_hits */

static void th_free(gpointer p) {
  th_hit_t *h = p;
  g_free(h->key);
  if (h->sort) g_ptr_array_unref(h->sort);
  g_free(h);
}

static gint th_cmp(gconstpointer a, gconstpointer b, gpointer g) {
  const th_hit_t *x = *(th_hit_t *const *)a, *y = *(th_hit_t *const *)b;
  const ixia_agg_t *ag = g;
  int c = ixia_sort_cmp_keys(ag->sort, ag->n_sort, (GBytes *const *)x->sort->pdata,
                             (GBytes *const *)y->sort->pdata);
  return c ? c : strcmp(x->key, y->key);
}

static gsize th_bytes(const th_hit_t *h) {
  gsize n = sizeof *h + 64 + strlen(h->key);
  for (guint i = 0; i < h->sort->len; i++)
    n += 32 + (h->sort->pdata[i] ? g_bytes_get_size(h->sort->pdata[i]) : 0);
  return n;
}

/* Keeps the best g->size hits. */
static void th_prune(const ixia_agg_t *g, tophits_t *t) {
  g_ptr_array_sort_with_data(t->hits, th_cmp, (gpointer)g);
  if (t->hits->len > g->size) g_ptr_array_set_size(t->hits, (gint)g->size);
}

static void bytes_unref0(gpointer b) {
  if (b) g_bytes_unref(b);
}

/* Takes h. */
static gboolean th_add(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st, th_hit_t *h,
                       ixia_error_t **err) {
  tophits_t *t = st->u.top;
  g_ptr_array_add(t->hits, h);
  gsize more = th_bytes(h);
  t->acct += more;
  if (t->hits->len >= 2 * g->size + 8) {
    th_prune(g, t);
    guint64 now = 0;
    for (guint i = 0; i < t->hits->len; i++) now += th_bytes(t->hits->pdata[i]);
    a->mem -= MIN(a->mem, t->acct);
    t->acct = now;
    return ixia_aggs_mem_grow(a, now, err);
  }
  return ixia_aggs_mem_grow(a, more, err);
}

static th_hit_t *th_new(const char *key, gint64 version, guint n) {
  th_hit_t *h = g_new0(th_hit_t, 1);
  h->key = g_strdup(key);
  h->version = version;
  h->sort = g_ptr_array_new_full(n, bytes_unref0);
  return h;
}

/* The hits in order, in a view that does not own them. */
static GPtrArray *sorted_hits(const ixia_agg_t *g, const agg_state_t *st) {
  GPtrArray *hs = g_ptr_array_sized_new(st->u.top->hits->len);
  for (guint i = 0; i < st->u.top->hits->len; i++) g_ptr_array_add(hs, st->u.top->hits->pdata[i]);
  g_ptr_array_sort_with_data(hs, th_cmp, (gpointer)g);
  return hs;
}

/* --------------------------------------------------------------- state */

void ixia_more_init(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st) {
  if (g->kind == IXIA_AGG_STATS) {
    st->u.stats = g_new0(stats_t, 1);
    a->mem += sizeof(stats_t);
  } else if (g->kind == IXIA_AGG_TOP_HITS) {
    st->u.top = g_new0(tophits_t, 1);
    st->u.top->hits = g_ptr_array_new_with_free_func(th_free);
    a->mem += sizeof(tophits_t) + 64;
  }
}

void ixia_more_clear(const ixia_agg_t *g, agg_state_t *st) {
  if (g->kind == IXIA_AGG_STATS) {
    ixia_fsum_clear(&st->u.stats->sum);
    g_free(st->u.stats);
  } else if (g->kind == IXIA_AGG_TOP_HITS) {
    g_ptr_array_free(st->u.top->hits, TRUE);
    g_free(st->u.top);
  }
}

static gboolean stats_add(ixia_aggs_t *a, agg_state_t *st, double x, ixia_error_t **err) {
  stats_t *s = st->u.stats;
  if (st->n == 0 || x < s->min) s->min = x;
  if (st->n == 0 || x > s->max) s->max = x;
  st->n++;
  return ixia_aggs_fsum_add(a, &s->sum, x, err);
}

gboolean ixia_more_add(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                       const ixia_val_t *const *vals, const guint *nvals, const ixia_hitctx_t *d,
                       ixia_error_t **err) {
  const ixia_val_t *v = g->field ? vals[g->field_slot] : NULL;
  guint nv = g->field ? nvals[g->field_slot] : 0;
  switch (g->kind) {
    case IXIA_AGG_STATS:
      for (guint i = 0; i < nv; i++)
        if (v[i].len == IXIA_NUM_BYTES && !stats_add(a, st, ixia_num_decode(v[i].p), err)) return FALSE;
      return TRUE;
    case IXIA_AGG_HISTOGRAM:
    case IXIA_AGG_DATE_HISTOGRAM:
      for (guint i = 0; i < nv; i++) {
        if (v[i].len != IXIA_NUM_BYTES) continue;
        guint8 k[IXIA_NUM_BYTES];
        ixia_num_encode(ixia_agg_bucket_key(g, ixia_num_decode(v[i].p)), k);
        bucket_t *b = bucket(a, g, st, k, sizeof k, err);
        if (!b || !count_in(a, g, b, vals, nvals, d, err)) return FALSE;
      }
      return TRUE;
    case IXIA_AGG_RANGE:
      for (guint r = 0; r < g->n_ranges; r++) {
        const ixia_agg_range_t *x = &g->ranges[r];
        for (guint i = 0; i < nv; i++) {
          if (v[i].len != IXIA_NUM_BYTES) continue;
          double y = ixia_num_decode(v[i].p);
          if ((x->has_from && y < x->from) || (x->has_to && y >= x->to)) continue;
          guint8 k[4];
          be32w(k, r);
          bucket_t *b = bucket(a, g, st, k, 4, err);
          if (!b || !count_in(a, g, b, vals, nvals, d, err)) return FALSE;
          break;
        }
      }
      return TRUE;
    case IXIA_AGG_FILTER:
    case IXIA_AGG_FILTERS:
      for (guint f = 0; d && d->doc && f < g->n_filters; f++) {
        if (!ixia_filter_match_doc(g->filters[f], d->doc)) continue;
        guint8 k[4];
        be32w(k, f);
        bucket_t *b = bucket(a, g, st, k, g->kind == IXIA_AGG_FILTER ? 0 : 4, err);
        if (!b || !count_in(a, g, b, vals, nvals, d, err)) return FALSE;
      }
      return TRUE;
    case IXIA_AGG_TOP_HITS: {
      if (!d || !d->doc || !d->key) return TRUE;
      th_hit_t *h = th_new(d->key, d->version, g->n_sort);
      GPtrArray *sv = ixia_sort_values_of(g->sort, g->n_sort, d->doc, d->score);
      for (guint i = 0; i < sv->len; i++) g_ptr_array_add(h->sort, sv->pdata[i] ? g_bytes_ref(sv->pdata[i]) : NULL);
      g_ptr_array_unref(sv);
      return th_add(a, g, st, h, err);
    }
    default:
      return TRUE;
  }
}

gboolean ixia_more_cell_merge(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *c,
                              const ixia_agg_summary_t *s, ixia_error_t **err) {
  if (g->kind == IXIA_AGG_STATS) {
    if (s->n == 0) return TRUE;
    stats_t *st = c->u.stats;
    if (c->n == 0 || s->ext < st->min) st->min = s->ext;
    if (c->n == 0 || s->max > st->max) st->max = s->max;
    c->n += s->n;
    gsize more = ixia_fsum_merge(&st->sum, &s->sum);
    return more == 0 || ixia_aggs_mem_grow(a, more, err);
  }
  for (guint i = 0; i < s->n_hits; i++) {
    th_hit_t *h = th_new(s->hits[i].key, s->hits[i].version, g->n_sort);
    for (guint k = 0; k < g->n_sort; k++)
      g_ptr_array_add(h->sort, s->hits[i].sort[k] ? g_bytes_ref(s->hits[i].sort[k]) : NULL);
    if (!th_add(a, g, c, h, err)) return FALSE;
  }
  return TRUE;
}

/* ---------------------------------------------------------------- wire */

void ixia_more_partial(const ixia_agg_t *g, const agg_state_t *st, cJSON *o) {
  if (g->kind == IXIA_AGG_STATS) {
    const stats_t *s = st->u.stats;
    cJSON_AddItemToObject(o, "s", ixia_b64_doubles(s->sum.parts, s->sum.n));
    cJSON_AddNumberToObject(o, "x", s->sum.special);
    double mm[2] = {s->min, s->max};
    if (st->n) cJSON_AddItemToObject(o, "mm", ixia_b64_doubles(mm, 2));
    return;
  }
  /* top_hits: the best size hits */
  GPtrArray *hs = sorted_hits(g, st);
  cJSON *arr = cJSON_AddArrayToObject(o, "h");
  for (guint i = 0; i < hs->len && i < g->size; i++) {
    const th_hit_t *h = hs->pdata[i];
    cJSON *hj = cJSON_CreateObject();
    cJSON_AddStringToObject(hj, "k", h->key);
    cJSON_AddNumberToObject(hj, "v", (double)h->version);
    cJSON *sv = cJSON_AddArrayToObject(hj, "s");
    for (guint k = 0; k < h->sort->len; k++) {
      GBytes *b = h->sort->pdata[k];
      gsize n = 0;
      const guint8 *p = b ? g_bytes_get_data(b, &n) : NULL;
      cJSON_AddItemToArray(sv, b ? ixia_b64_json(p, n) : cJSON_CreateNull());
    }
    cJSON_AddItemToArray(arr, hj);
  }
  g_ptr_array_free(hs, TRUE);
}

gboolean ixia_more_merge(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st, const cJSON *j,
                         guint64 n, const char *path, ixia_error_t **err) {
  if (g->kind == IXIA_AGG_STATS) {
    stats_t *s = st->u.stats;
    guint64 special;
    gsize nw = 0, nm = 0;
    guint64 *w = ixia_get_words(j, "s", &nw);
    guint64 *mm = n ? ixia_get_words(j, "mm", &nm) : NULL;
    gboolean ok = w && ixia_get_count(j, "x", &special) && (n == 0 || (mm && nm == 2));
    if (!ok) {
      g_free(w);
      g_free(mm);
      return ixia_bad_partial(err, path, "malformed stats");
    }
    if (n) {
      double lo = ixia_bitsd(mm[0]), hi = ixia_bitsd(mm[1]);
      if (st->n == 0 || lo < s->min) s->min = lo;
      if (st->n == 0 || hi > s->max) s->max = hi;
    }
    st->n += n;
    s->sum.special |= (guint)special;
    for (gsize i = 0; ok && i < nw; i++) ok = ixia_aggs_fsum_add(a, &s->sum, ixia_bitsd(w[i]), err);
    g_free(w);
    g_free(mm);
    return ok;
  }
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "h");
  if (!cJSON_IsArray(arr)) return ixia_bad_partial(err, path, "top_hits without hits");
  for (const cJSON *hj = arr->child; hj; hj = hj->next) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(hj, "k");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(hj, "v");
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(hj, "s");
    if (!cJSON_IsString(k) || !cJSON_IsNumber(v) || !cJSON_IsArray(sv) ||
        cJSON_GetArraySize(sv) != (int)g->n_sort)
      return ixia_bad_partial(err, path, "malformed hit");
    /* A version is an integer within 2^53 (a double holds it exactly). */
    if (!(v->valuedouble >= 0 && v->valuedouble <= IXIA_SAFE_INT_MAX))
      return ixia_bad_partial(err, path, "hit version out of range");
    th_hit_t *h = th_new(k->valuestring, (gint64)v->valuedouble, g->n_sort);
    for (const cJSON *e = sv->child; e; e = e->next) {
      gsize len = 0;
      guchar *raw = cJSON_IsString(e) ? g_base64_decode(e->valuestring, &len) : NULL;
      g_ptr_array_add(h->sort, raw ? g_bytes_new_take(raw, len) : NULL);
    }
    if (!th_add(a, g, st, h, err)) return FALSE;
  }
  return TRUE;
}

/* --------------------------------------------------------------- results */

/* The nested results of a bucket (empty when b is NULL). */
static gboolean add_subs(const ixia_aggs_t *a, const ixia_agg_t *g, const bucket_t *b, cJSON *o,
                         ixia_error_t **err) {
  for (guint s = 0; s < g->n_subs; s++) {
    cJSON *r;
    if (b) {
      r = ixia_aggs_state_result(a, g->subs[s], &b->subs[s], err);
    } else {
      /* An empty bucket: the nested results of nothing. */
      agg_state_t empty;
      ixia_aggs_state_init((ixia_aggs_t *)a, g->subs[s], &empty);
      r = ixia_aggs_state_result(a, g->subs[s], &empty, err);
      ixia_aggs_state_clear(g->subs[s], &empty);
    }
    if (!r) return FALSE;
    cJSON_AddItemToObject(o, g->subs[s]->name, r);
  }
  return TRUE;
}

static cJSON *bucket_obj(const ixia_aggs_t *a, const ixia_agg_t *g, const bucket_t *b, cJSON *key,
                         ixia_error_t **err) {
  cJSON *o = cJSON_CreateObject();
  if (key) cJSON_AddItemToObject(o, "key", key);
  if (g->kind == IXIA_AGG_DATE_HISTOGRAM) {
    /* A key from a shard's partial may be any double: format only what an
     * epoch second can be (the bucket itself keeps its numeric key). */
    double ks = key->valuedouble;
    char *iso = ixia_time_format(isfinite(ks) && fabs(ks) <= IXIA_SAFE_INT_MAX ? (gint64)ks : 0, g->tz);
    cJSON_AddStringToObject(o, "key_as_string", iso);
    g_free(iso);
  }
  if (g->kind == IXIA_AGG_RANGE) {
    const ixia_agg_range_t *x = &g->ranges[(guint)cJSON_GetNumberValue(key)];
    cJSON_ReplaceItemInObject(o, "key", cJSON_CreateString(x->key));
    if (x->has_from) cJSON_AddNumberToObject(o, "from", x->from);
    if (x->has_to) cJSON_AddNumberToObject(o, "to", x->to);
  }
  cJSON_AddNumberToObject(o, "count", b ? (double)b->count : 0);
  if (!add_subs(a, g, b, o, err)) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

typedef struct {
  double key;
  const bucket_t *b;
} hb_t;

static int hb_cmp(const void *x, const void *y) {
  double a = ((const hb_t *)x)->key, b = ((const hb_t *)y)->key;
  return a < b ? -1 : a > b;
}

static cJSON *histogram_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st,
                               ixia_error_t **err) {
  guint n = g_hash_table_size(st->u.buckets);
  hb_t *bs = g_new(hb_t, MAX(n, 1));
  GHashTableIter it;
  gpointer k;
  guint i = 0;
  g_hash_table_iter_init(&it, st->u.buckets);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    const bucket_t *b = k;
    bs[i++] = (hb_t){b->key.len == IXIA_NUM_BYTES ? ixia_num_decode(b->key.p) : 0, b};
  }
  qsort(bs, n, sizeof *bs, hb_cmp);
  cJSON *o = cJSON_CreateObject();
  cJSON *arr = cJSON_AddArrayToObject(o, "buckets");
  /* min_doc_count 0: every bucket from the first to the last, the empty
   * ones included (Elasticsearch's default); above 0: the buckets with at
   * least that many documents. */
  gboolean fill = g->min_doc_count == 0;
  guint64 shown = 0, cap = a->lim.max_terms_buckets;
  gboolean ok = TRUE;
  /* Filling the gaps between far-apart buckets would build up to cap empty
   * buckets before refusing: refuse at once when even the longest interval
   * cannot cover the span within the cap. */
  if (fill && n > 1) {
    static const double longest[] = {60, 3600, 86400, 7 * 86400, 31 * 86400, 92 * 86400, 366 * 86400};
    double step = g->kind == IXIA_AGG_HISTOGRAM || g->interval > 0
                      ? g->interval
                      : longest[MIN((guint)g->cal_unit, G_N_ELEMENTS(longest) - 1)];
    double span = bs[n - 1].key - bs[0].key;
    if (step > 0 && span / step >= (double)cap) {
      ixia_error_set(err, IXIA_ETOOLARGE,
                     "%s '%s' would show more than %" G_GUINT64_FORMAT
                     " buckets (query.max_terms_buckets): widen the interval",
                     g->kind == IXIA_AGG_HISTOGRAM ? "histogram" : "date_histogram", g->name, cap);
      g_free(bs);
      cJSON_Delete(o);
      return NULL;
    }
  }
  double key = n ? bs[0].key : 0;
  for (guint j = 0; ok && j < n;) {
    const bucket_t *b = NULL;
    if (fill) {
      if (bs[j].key == key) b = bs[j++].b;
    } else {
      key = bs[j].key;
      b = bs[j++].b;
      if (b->count < g->min_doc_count) continue;
    }
    if (++shown > cap) {
      ok = ixia_error_set(err, IXIA_ETOOLARGE,
                          "%s '%s' would show more than %" G_GUINT64_FORMAT " buckets "
                          "(query.max_terms_buckets): widen the interval",
                          g->kind == IXIA_AGG_HISTOGRAM ? "histogram" : "date_histogram", g->name, cap);
      break;
    }
    cJSON *bj = bucket_obj(a, g, b, cJSON_CreateNumber(key), err);
    if (!bj) {
      ok = FALSE;
      break;
    }
    cJSON_AddItemToArray(arr, bj);
    if (!fill || j >= n) continue;
    /* The next bucket's start, by the same arithmetic the values went
     * through (never past the next non-empty one). */
    double prev = key;
    if (g->kind == IXIA_AGG_HISTOGRAM) {
      double m = round((key - g->offset) / g->interval) + 1;
      key = m * g->interval + g->offset;
    } else if (g->interval > 0) {
      key += g->interval;
    } else {
      key = (double)(ixia_cal_next((gint64)key - (gint64)g->offset, (ixia_cal_unit_t)g->cal_unit, g->tz) +
                     (gint64)g->offset);
    }
    /* Never past the next non-empty bucket, and never stuck where a
     * double cannot hold key + interval. */
    if (key > bs[j].key || key <= prev) key = bs[j].key;
  }
  g_free(bs);
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

cJSON *ixia_more_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st,
                        ixia_error_t **err) {
  cJSON *o = NULL;
  switch (g->kind) {
    case IXIA_AGG_STATS: {
      const stats_t *s = st->u.stats;
      o = cJSON_CreateObject();
      double sum = ixia_fsum_result(&s->sum);
      cJSON_AddNumberToObject(o, "count", (double)st->n);
      cJSON_AddItemToObject(o, "min", st->n ? cJSON_CreateNumber(s->min) : cJSON_CreateNull());
      cJSON_AddItemToObject(o, "max", st->n ? cJSON_CreateNumber(s->max) : cJSON_CreateNull());
      cJSON_AddItemToObject(o, "avg", st->n ? cJSON_CreateNumber(sum / (double)st->n) : cJSON_CreateNull());
      cJSON_AddNumberToObject(o, "sum", sum);
      return o;
    }
    case IXIA_AGG_HISTOGRAM:
    case IXIA_AGG_DATE_HISTOGRAM:
      return histogram_result(a, g, st, err);
    case IXIA_AGG_RANGE:
    case IXIA_AGG_FILTERS: {
      o = cJSON_CreateObject();
      cJSON *arr = cJSON_AddArrayToObject(o, "buckets");
      guint n = g->kind == IXIA_AGG_RANGE ? g->n_ranges : g->n_filters;
      for (guint i = 0; i < n; i++) {
        guint8 k[4];
        be32w(k, i);
        cJSON *key = g->kind == IXIA_AGG_RANGE ? cJSON_CreateNumber(i) : cJSON_CreateString(g->filter_names[i]);
        cJSON *bj = bucket_obj(a, g, bucket_find(st, k, 4), key, err);
        if (!bj) {
          cJSON_Delete(o);
          return NULL;
        }
        cJSON_AddItemToArray(arr, bj);
      }
      return o;
    }
    case IXIA_AGG_FILTER:
      return bucket_obj(a, g, bucket_find(st, (const guint8 *)"", 0), NULL, err);
    case IXIA_AGG_TOP_HITS: {
      GPtrArray *hs = sorted_hits(g, st);
      o = cJSON_CreateObject();
      cJSON *arr = cJSON_AddArrayToObject(o, "hits");
      for (guint i = 0; i < hs->len && i < g->size; i++) {
        const th_hit_t *h = hs->pdata[i];
        cJSON *hj = cJSON_CreateObject();
        cJSON_AddStringToObject(hj, "key", h->key);
        cJSON_AddNumberToObject(hj, "version", (double)h->version);
        if (g->n_sort) {
          cJSON *sv = cJSON_AddArrayToObject(hj, "sort");
          for (guint k = 0; k < g->n_sort; k++)
            cJSON_AddItemToArray(sv, ixia_sort_value_json(&g->sort[k], h->sort->pdata[k]));
        }
        cJSON_AddItemToArray(arr, hj);
      }
      g_ptr_array_free(hs, TRUE);
      return o;
    }
    default:
      return cJSON_CreateNull();
  }
}

/* ----------------------------------------------------------- top_hits docs */

static void foreach_top_hits(ixia_agg_t *const *aggs, guint n, cJSON *level, ixia_top_hits_fn fn,
                             void *ud) {
  for (guint i = 0; i < n; i++) {
    const ixia_agg_t *g = aggs[i];
    cJSON *node = cJSON_GetObjectItemCaseSensitive(level, g->name);
    if (!node) continue;
    if (g->kind == IXIA_AGG_TOP_HITS) {
      cJSON *hits = cJSON_GetObjectItemCaseSensitive(node, "hits");
      if (cJSON_IsArray(hits)) fn(g, hits, ud);
      continue;
    }
    if (!ixia_agg_is_bucket(g->kind) || !g->n_subs) continue;
    if (g->kind == IXIA_AGG_FILTER) {
      foreach_top_hits(g->subs, g->n_subs, node, fn, ud);
      continue;
    }
    cJSON *buckets = cJSON_GetObjectItemCaseSensitive(node, "buckets");
    for (cJSON *b = buckets ? buckets->child : NULL; b; b = b->next)
      foreach_top_hits(g->subs, g->n_subs, b, fn, ud);
  }
}

void ixia_aggs_foreach_top_hits(const ixia_query_t *q, cJSON *result, ixia_top_hits_fn fn, void *ud) {
  if (result) foreach_top_hits(q->aggs, q->n_aggs, result, fn, ud);
}
