/* The wire form of aggregation state and the response.
 *
 * A shard sends its state as the "aggs" member of its search answer
 * (ixia_aggs_partial_json); the query API merges every shard's into one
 * state (ixia_aggs_merge_partial) and renders the response
 * (ixia_aggs_result_json). Partials carry JSON numbers only for counts
 * (exact below 2^53); doubles, hashes and keys travel as base64 of
 * big-endian bytes, since cJSON may print a double with 15 significant
 * digits when that is "close enough". A partial is outside input to the
 * API: every member is checked, and a malformed one leaves the state
 * unusable rather than half merged. */
#include <stdlib.h>
#include <xxhash.h>

#include "internal.h"
#include "json.h"

cJSON *ixia_b64_json(const guint8 *p, gsize len) {
  static const guint8 none = 0;
  char *s = g_base64_encode(len ? p : &none, len);
  cJSON *j = cJSON_CreateString(s);
  g_free(s);
  return j;
}

/* 64-bit words (doubles as their bits) packed as base64. */
static cJSON *b64_words(const guint64 *w, gsize n) {
  guint8 *buf = g_malloc(MAX(n, 1) * 8);
  for (gsize i = 0; i < n; i++) ixia_bytes_put64(buf + 8 * i, w[i]);
  cJSON *j = ixia_b64_json(buf, n * 8);
  g_free(buf);
  return j;
}

static guint64 dbits(double d) {
  guint64 b;
  memcpy(&b, &d, 8);
  return b;
}

double ixia_bitsd(guint64 b) {
  double d;
  memcpy(&d, &b, 8);
  return d;
}

cJSON *ixia_b64_doubles(const double *v, gsize n) {
  guint64 *w = g_new(guint64, MAX(n, 1));
  for (gsize i = 0; i < n; i++) w[i] = dbits(v[i]);
  cJSON *j = b64_words(w, n);
  g_free(w);
  return j;
}

static cJSON *dense_json(const dense_t *d) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "off", d->counts ? d->off : 0);
  cJSON_AddItemToObject(o, "c", d->counts ? b64_words((const guint64 *)d->counts->data,
                                                       d->counts->len)
                                          : b64_words(NULL, 0));
  return o;
}

static cJSON *state_partial(const ixia_agg_t *g, const agg_state_t *st) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "n", (double)st->n);
  switch (g->kind) {
    case IXIA_AGG_SUM:
    case IXIA_AGG_AVG: {
      cJSON_AddItemToObject(o, "s", ixia_b64_doubles(st->u.sum.parts, st->u.sum.n));
      cJSON_AddNumberToObject(o, "x", st->u.sum.special);
      break;
    }
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX:
      if (st->n) cJSON_AddItemToObject(o, "v", ixia_b64_doubles(&st->u.ext, 1));
      break;
    case IXIA_AGG_PERCENTILES: {
      const pct_t *p = st->u.pct;
      double mm[2] = {p->min, p->max};
      cJSON_AddItemToObject(o, "mm", ixia_b64_doubles(mm, 2));
      if (p->exact) {
        cJSON_AddItemToObject(o, "e", ixia_b64_doubles((const double *)p->exact->data, p->exact->len));
      } else {
        cJSON_AddNumberToObject(o, "z", (double)p->zero);
        cJSON_AddItemToObject(o, "pos", dense_json(&p->pos));
        cJSON_AddItemToObject(o, "neg", dense_json(&p->neg));
      }
      break;
    }
    case IXIA_AGG_CARDINALITY: {
      guint64 *w = g_new(guint64, MAX(g_hash_table_size(st->u.hashes), 1));
      gsize n = 0;
      GHashTableIter it;
      gpointer k;
      g_hash_table_iter_init(&it, st->u.hashes);
      while (g_hash_table_iter_next(&it, &k, NULL)) w[n++] = (guint64)GPOINTER_TO_SIZE(k);
      cJSON_AddItemToObject(o, "h", b64_words(w, n));
      g_free(w);
      break;
    }
    case IXIA_AGG_STATS:
    case IXIA_AGG_TOP_HITS:
      ixia_more_partial(g, st, o);
      break;
    default: {
      if (!ixia_agg_is_bucket(g->kind)) break;
      cJSON *arr = cJSON_AddArrayToObject(o, "b");
      GHashTableIter it;
      gpointer k;
      g_hash_table_iter_init(&it, st->u.buckets);
      while (g_hash_table_iter_next(&it, &k, NULL)) {
        const bucket_t *b = k;
        cJSON *bj = cJSON_CreateObject();
        cJSON_AddItemToObject(bj, "k", ixia_b64_json(b->key.p, b->key.len));
        cJSON_AddNumberToObject(bj, "n", (double)b->count);
        cJSON *subs = cJSON_AddObjectToObject(bj, "s");
        for (guint i = 0; i < g->n_subs; i++)
          cJSON_AddItemToObject(subs, g->subs[i]->name, state_partial(g->subs[i], &b->subs[i]));
        cJSON_AddItemToArray(arr, bj);
      }
      break;
    }
  }
  return o;
}

cJSON *ixia_aggs_partial_json(const ixia_aggs_t *a) {
  cJSON *o = cJSON_CreateObject();
  for (guint i = 0; i < a->q->n_aggs; i++)
    cJSON_AddItemToObject(o, a->q->aggs[i]->name, state_partial(a->q->aggs[i], &a->top[i]));
  return o;
}

/* ---- merging ---- */

gboolean ixia_bad_partial(ixia_error_t **err, const char *path, const char *what) {
  return ixia_error_set(err, IXIA_EINVAL, "aggregation partial: %s: %s", path, what);
}

gboolean ixia_get_count(const cJSON *o, const char *key, guint64 *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!ixia_json_is_integer(v) || v->valuedouble < 0 || v->valuedouble > IXIA_SAFE_INT_MAX) return FALSE;
  *out = (guint64)v->valuedouble;
  return TRUE;
}

/* Decodes a base64 member into 64-bit words (g_free). */
guint64 *ixia_get_words(const cJSON *o, const char *key, gsize *n) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsString(v)) return NULL;
  gsize len = 0;
  guint8 *raw = g_base64_decode(v->valuestring, &len);
  if (len % 8) {
    g_free(raw);
    return NULL;
  }
  *n = len / 8;
  guint64 *w = g_new(guint64, MAX(*n, 1));
  for (gsize i = 0; i < *n; i++) w[i] = ixia_bytes_get64(raw + 8 * i);
  g_free(raw);
  return w;
}

static gboolean merge_dense(ixia_aggs_t *a, dense_t *d, const cJSON *j, const char *path,
                            ixia_error_t **err) {
  gsize n = 0;
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(j, "off");
  guint64 *w = ixia_json_is_integer(off) && fabs(off->valuedouble) <= PCT_MAX_INDEX
                   ? ixia_get_words(j, "c", &n)
                   : NULL;
  if (!w) return ixia_bad_partial(err, path, "malformed histogram");
  gboolean ok = TRUE;
  for (gsize i = 0; ok && i < n; i++) {
    gint64 idx = (gint64)off->valuedouble + (gint64)i;
    if (idx > PCT_MAX_INDEX) ok = ixia_bad_partial(err, path, "histogram index out of range");
    else if (w[i]) ok = ixia_pct_dense_add(a, d, (gint32)idx, w[i], err);
  }
  g_free(w);
  return ok;
}

static gboolean merge_pct(ixia_aggs_t *a, agg_state_t *st, const cJSON *j, guint64 n,
                          const char *path, ixia_error_t **err) {
  pct_t *p = st->u.pct;
  gsize nmm = 0, ne = 0;
  guint64 *mm = ixia_get_words(j, "mm", &nmm);
  gboolean ok = mm && nmm == 2;
  if (ok && n > 0) {
    double lo = ixia_bitsd(mm[0]), hi = ixia_bitsd(mm[1]);
    if (st->n == 0 || lo < p->min) p->min = lo;
    if (st->n == 0 || hi > p->max) p->max = hi;
  }
  g_free(mm);
  if (!ok) return ixia_bad_partial(err, path, "malformed percentiles");
  guint64 total = st->n + n;
  st->n = total;
  if (cJSON_GetObjectItemCaseSensitive(j, "e")) {
    guint64 *w = ixia_get_words(j, "e", &ne);
    if (!w || ne != n) {
      g_free(w);
      return ixia_bad_partial(err, path, "malformed exact values");
    }
    double *v = g_new(double, MAX(ne, 1));
    for (gsize i = 0; i < ne; i++) v[i] = ixia_bitsd(w[i]);
    g_free(w);
    if (p->exact && total <= a->lim.max_exact_values) {
      ok = ixia_pct_add_exact(a, p, v, (guint)ne, err);
    } else {
      ok = ixia_pct_to_hist(a, p, err);
      for (gsize i = 0; ok && i < ne; i++) ok = ixia_pct_hist_add(a, p, v[i], 1, err);
    }
    g_free(v);
    return ok;
  }
  guint64 zero;
  const cJSON *pos = cJSON_GetObjectItemCaseSensitive(j, "pos");
  const cJSON *neg = cJSON_GetObjectItemCaseSensitive(j, "neg");
  if (!ixia_get_count(j, "z", &zero) || !cJSON_IsObject(pos) || !cJSON_IsObject(neg))
    return ixia_bad_partial(err, path, "malformed histogram");
  if (!ixia_pct_to_hist(a, p, err)) return FALSE;
  p->zero += zero;
  return merge_dense(a, &p->pos, pos, path, err) && merge_dense(a, &p->neg, neg, path, err);
}

static gboolean state_merge(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                            const cJSON *j, const char *path, ixia_error_t **err);

static gboolean merge_terms(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st, const cJSON *j,
                            const char *path, ixia_error_t **err) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "b");
  if (!cJSON_IsArray(arr)) return ixia_bad_partial(err, path, "terms without buckets");
  for (const cJSON *bj = arr->child; bj; bj = bj->next) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(bj, "k");
    const cJSON *subs = cJSON_GetObjectItemCaseSensitive(bj, "s");
    guint64 count;
    if (!cJSON_IsString(k) || !ixia_get_count(bj, "n", &count) || !cJSON_IsObject(subs))
      return ixia_bad_partial(err, path, "malformed bucket");
    gsize len = 0;
    guint8 *key = g_base64_decode(k->valuestring, &len);
    guint hash = (guint)XXH3_64bits(key, len);
    bucket_t *b = ixia_aggs_bucket_get(a, g, st, key, (guint32)len, hash, err);
    g_free(key);
    if (!b) return FALSE;
    b->count += count;
    for (guint i = 0; i < g->n_subs; i++) {
      const cJSON *sj = cJSON_GetObjectItemCaseSensitive(subs, g->subs[i]->name);
      char *sp = ixia_path_member(path, g->subs[i]->name);
      gboolean ok = state_merge(a, g->subs[i], &b->subs[i], sj, sp, err);
      g_free(sp);
      if (!ok) return FALSE;
    }
  }
  return TRUE;
}

static gboolean state_merge(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                            const cJSON *j, const char *path, ixia_error_t **err) {
  guint64 n;
  if (!cJSON_IsObject(j) || !ixia_get_count(j, "n", &n))
    return ixia_bad_partial(err, path, "missing or malformed");
  gsize nw = 0;
  guint64 *w = NULL;
  gboolean ok = TRUE;
  switch (g->kind) {
    case IXIA_AGG_COUNT:
      st->n += n;
      break;
    case IXIA_AGG_SUM:
    case IXIA_AGG_AVG: {
      guint64 special;
      w = ixia_get_words(j, "s", &nw);
      if (!w || !ixia_get_count(j, "x", &special)) {
        ok = ixia_bad_partial(err, path, "malformed sum");
        break;
      }
      st->n += n;
      st->u.sum.special |= (guint)special;
      for (gsize i = 0; ok && i < nw; i++) ok = ixia_aggs_fsum_add(a, &st->u.sum, ixia_bitsd(w[i]), err);
      break;
    }
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX: {
      if (n == 0) break;
      w = ixia_get_words(j, "v", &nw);
      if (!w || nw != 1) {
        ok = ixia_bad_partial(err, path, "malformed value");
        break;
      }
      double x = ixia_bitsd(w[0]);
      gboolean better = g->kind == IXIA_AGG_MIN ? x < st->u.ext : x > st->u.ext;
      if (st->n == 0 || better) st->u.ext = x;
      st->n += n;
      break;
    }
    case IXIA_AGG_PERCENTILES:
      ok = merge_pct(a, st, j, n, path, err);
      break;
    case IXIA_AGG_CARDINALITY:
      w = ixia_get_words(j, "h", &nw);
      if (!w) ok = ixia_bad_partial(err, path, "malformed hashes");
      for (gsize i = 0; ok && i < nw; i++)
        if (g_hash_table_add(st->u.hashes, GSIZE_TO_POINTER(w[i])))
          ok = ixia_aggs_mem_grow(a, CARD_ENTRY_BYTES, err);
      break;
    case IXIA_AGG_STATS:
    case IXIA_AGG_TOP_HITS:
      ok = ixia_more_merge(a, g, st, j, n, path, err);
      break;
    default: /* the bucket kinds */
      ok = merge_terms(a, g, st, j, path, err);
      break;
  }
  g_free(w);
  return ok;
}

gboolean ixia_aggs_merge_partial(ixia_aggs_t *a, const cJSON *partial, ixia_error_t **err) {
  if (!ixia_aggs_check_usable(a, err)) return FALSE;
  if (!cJSON_IsObject(partial)) return ixia_bad_partial(err, "aggs", "must be an object");
  for (guint i = 0; i < a->q->n_aggs; i++) {
    const ixia_agg_t *g = a->q->aggs[i];
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(partial, g->name);
    if (!state_merge(a, g, &a->top[i], j, g->name, err)) {
      /* A half-merged state would silently give wrong answers. */
      if (a->fail_code == IXIA_OK) {
        a->fail_code = IXIA_EINVAL;
        a->fail_msg = g_strdup("aggregation state is unusable after a failed merge");
      }
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- results ---- */

static cJSON *value_obj(cJSON *v) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "value", v);
  return o;
}

/* Shortest text that reads back as p ("50", "99.9"). */
static gint bucket_order(gconstpointer x, gconstpointer y) {
  const bucket_t *a = *(const bucket_t *const *)x, *b = *(const bucket_t *const *)y;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return ixia_val_cmp(a->key.p, a->key.len, b->key.p, b->key.len);
}


static cJSON *pct_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st) {
  const pct_t *p = st->u.pct;
  double *sorted = NULL;
  if (p->exact && st->n > 0) {
    sorted = g_memdup2(p->exact->data, p->exact->len * sizeof(double));
    qsort(sorted, p->exact->len, sizeof(double), ixia_double_cmp);
  }
  cJSON *o = cJSON_CreateObject();
  cJSON *vals = cJSON_AddObjectToObject(o, "values");
  for (guint i = 0; i < g->n_percents; i++) {
    char key[32];
    ixia_json_format_number(g->percents[i], key);
    if (st->n == 0) {
      cJSON_AddNullToObject(vals, key);
      continue;
    }
    /* p * n / 100 rather than p / 100 * n: exact for integer percents. */
    guint64 rank = (guint64)ceil(g->percents[i] * (double)st->n / 100.0);
    rank = CLAMP(rank, 1, st->n);
    double v = sorted ? sorted[rank - 1] : ixia_pct_hist_rank(a, p, rank);
    cJSON_AddNumberToObject(vals, key, v);
  }
  cJSON_AddBoolToObject(o, "exact", p->exact != NULL);
  g_free(sorted);
  return o;
}

static cJSON *terms_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st,
                           ixia_error_t **err) {
  GPtrArray *bs = g_ptr_array_sized_new(g_hash_table_size(st->u.buckets));
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, st->u.buckets);
  while (g_hash_table_iter_next(&it, &k, NULL)) g_ptr_array_add(bs, k);
  g_ptr_array_sort(bs, bucket_order);
  cJSON *o = cJSON_CreateObject();
  cJSON *arr = cJSON_AddArrayToObject(o, "buckets");
  guint64 other = 0;
  for (guint i = 0; i < bs->len; i++) {
    const bucket_t *b = bs->pdata[i];
    if (i >= g->size) {
      other += b->count;
      continue;
    }
    cJSON *bj = cJSON_CreateObject();
    cJSON_AddItemToObject(bj, "key", ixia_val_to_json(g->field->type, b->key.p, b->key.len));
    cJSON_AddNumberToObject(bj, "count", (double)b->count);
    for (guint s = 0; s < g->n_subs; s++) {
      cJSON *sub = ixia_aggs_state_result(a, g->subs[s], &b->subs[s], err);
      if (!sub) {
        cJSON_Delete(bj);
        cJSON_Delete(o);
        g_ptr_array_free(bs, TRUE);
        return NULL;
      }
      cJSON_AddItemToObject(bj, g->subs[s]->name, sub);
    }
    cJSON_AddItemToArray(arr, bj);
  }
  cJSON_AddNumberToObject(o, "other_count", (double)other);
  g_ptr_array_free(bs, TRUE);
  return o;
}

cJSON *ixia_aggs_state_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st,
                              ixia_error_t **err) {
  switch (g->kind) {
    case IXIA_AGG_COUNT:
      return value_obj(cJSON_CreateNumber((double)st->n));
    case IXIA_AGG_SUM:
      return value_obj(cJSON_CreateNumber(ixia_fsum_result(&st->u.sum)));
    case IXIA_AGG_AVG:
      return value_obj(st->n ? cJSON_CreateNumber(ixia_fsum_result(&st->u.sum) / (double)st->n)
                             : cJSON_CreateNull());
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX:
      return value_obj(st->n ? cJSON_CreateNumber(st->u.ext) : cJSON_CreateNull());
    case IXIA_AGG_PERCENTILES:
      return pct_result(a, g, st);
    case IXIA_AGG_CARDINALITY:
      return value_obj(cJSON_CreateNumber(g_hash_table_size(st->u.hashes)));
    case IXIA_AGG_TERMS:
      return terms_result(a, g, st, err);
    default:
      return ixia_more_result(a, g, st, err);
  }
}

cJSON *ixia_aggs_result(const ixia_aggs_t *a, ixia_error_t **err) {
  cJSON *o = cJSON_CreateObject();
  for (guint i = 0; i < a->q->n_aggs; i++) {
    cJSON *r = ixia_aggs_state_result(a, a->q->aggs[i], &a->top[i], err);
    if (!r) {
      cJSON_Delete(o);
      return NULL;
    }
    cJSON_AddItemToObject(o, a->q->aggs[i]->name, r);
  }
  return o;
}

cJSON *ixia_aggs_result_json(const ixia_aggs_t *a) { return ixia_aggs_result(a, NULL); }

