/* Anti-entropy between a truth side and an index side (antientropy.h): the
 * range digests both sides compute, and the walk that descends where they
 * differ. The walk never holds more than one page of digests per level and
 * one leaf listing per side in memory. */
#include "antientropy.h"

#include <string.h>
#include <xxhash.h>

guint64 ixia_ae_pair_hash(const char *key, size_t len, gint64 version) {
  return (guint64)XXH3_64bits_withSeed(key, len, (XXH64_hash_t)version);
}

static void range_clear(gpointer p) { g_free(((ixia_ae_range_t *)p)->last_key); }
static void kv_clear(gpointer p) { g_free(((ixia_ae_kv_t *)p)->key); }

GArray *ixia_ae_ranges_new(void) {
  GArray *a = g_array_new(FALSE, TRUE, sizeof(ixia_ae_range_t));
  g_array_set_clear_func(a, range_clear);
  return a;
}

GArray *ixia_ae_kvs_new(void) {
  GArray *a = g_array_new(FALSE, TRUE, sizeof(ixia_ae_kv_t));
  g_array_set_clear_func(a, kv_clear);
  return a;
}

/* "" is beyond every key (the end of the table). */
static int bound_cmp(const char *key, const char *bound) {
  return *bound ? strcmp(key, bound) : -1;
}

static void emit(GArray *out, const char *last_key, gint64 count, guint64 hash) {
  ixia_ae_range_t r = {g_strdup(last_key), count, hash};
  g_array_append_val(out, r);
}

/* ---------- the index side: digests over given bounds ---------- */

void ixia_ae_cutter_init(ixia_ae_cutter_t *c, const char *const *bounds, guint n, GArray *out) {
  memset(c, 0, sizeof *c);
  c->out = out;
  c->bounds = bounds;
  c->n = n;
}

gboolean ixia_ae_cutter_add(ixia_ae_cutter_t *c, const char *key, size_t len, gint64 version) {
  while (c->cur < c->n && bound_cmp(key, c->bounds[c->cur]) > 0) {
    emit(c->out, c->bounds[c->cur], c->count, c->hash);
    c->count = 0;
    c->hash = 0;
    c->cur++;
  }
  if (c->cur >= c->n) return FALSE;
  c->count++;
  c->hash += ixia_ae_pair_hash(key, len, version);
  return TRUE;
}

void ixia_ae_cutter_finish(ixia_ae_cutter_t *c) {
  for (; c->cur < c->n; c->cur++) {
    emit(c->out, c->bounds[c->cur], c->count, c->hash);
    c->count = 0;
    c->hash = 0;
  }
}

/* ---------- the truth side: ranges of bucket_keys keys ---------- */

void ixia_ae_bucketer_init(ixia_ae_bucketer_t *b, const char *end, guint max_keys,
                           guint bucket_keys, GArray *out) {
  memset(b, 0, sizeof *b);
  b->out = out;
  b->end = end ? end : "";
  b->max_keys = MAX(max_keys, 1);
  b->bucket_keys = MAX(bucket_keys, 1);
}

gboolean ixia_ae_bucketer_add(ixia_ae_bucketer_t *b, const char *key, size_t len, gint64 version) {
  if (b->full) return FALSE;
  b->count++;
  b->hash += ixia_ae_pair_hash(key, len, version);
  g_free(b->last);
  b->last = g_strndup(key, len);
  b->taken++;
  if (b->taken >= b->max_keys) {
    b->full = TRUE;
    return FALSE;
  }
  if ((guint)b->count >= b->bucket_keys) {
    emit(b->out, b->last, b->count, b->hash);
    b->count = 0;
    b->hash = 0;
  }
  return TRUE;
}

void ixia_ae_bucketer_finish(ixia_ae_bucketer_t *b, gboolean more) {
  if (more && b->last) {
    /* Stopped at max_keys with keys left: the page ends at its last key. */
    emit(b->out, b->last, b->count, b->hash);
  } else if (b->count > 0 || b->out->len == 0) {
    emit(b->out, b->end, b->count, b->hash);
  } else {
    /* The last full range ends the interval: stretch it to the end. */
    ixia_ae_range_t *r = &g_array_index(b->out, ixia_ae_range_t, b->out->len - 1);
    g_free(r->last_key);
    r->last_key = g_strdup(b->end);
  }
  g_clear_pointer(&b->last, g_free);
}

/* ---------- the walk ---------- */

typedef struct {
  const ixia_ae_source_t *src;
  void *ud;
  const ixia_ae_opts_t *o;
  ixia_ae_stats_t *st;
} walk_t;

/* Merges two sorted listings and reports each key whose versions differ. */
static gboolean compare_lists(walk_t *w, GArray *truth, GArray *index, gint64 store_version,
                              const char *leaf_after, ixia_error_t **err) {
  guint i = 0, j = 0;
  while (i < truth->len || j < index->len) {
    ixia_ae_kv_t *t = i < truth->len ? &g_array_index(truth, ixia_ae_kv_t, i) : NULL;
    ixia_ae_kv_t *x = j < index->len ? &g_array_index(index, ixia_ae_kv_t, j) : NULL;
    int c = !t ? 1 : !x ? -1 : strcmp(t->key, x->key);
    const char *key = c <= 0 ? t->key : x->key;
    gint64 tv = c <= 0 ? t->version : 0, xv = c >= 0 ? x->version : 0;
    if (c <= 0) i++;
    if (c >= 0) j++;
    if (tv == xv) continue;
    w->st->differing++;
    if (!w->src->differs(w->ud, key, tv, xv, store_version, leaf_after, err)) return FALSE;
  }
  return TRUE;
}

/* Lists and compares every key of (after, end]. */
static gboolean leaf(walk_t *w, const char *after, const char *end, ixia_error_t **err) {
  w->st->leaves++;
  GArray *truth = ixia_ae_kvs_new(), *index = ixia_ae_kvs_new();
  gint64 store_version = 0;
  gboolean ok = TRUE;
  /* The truth side pages; the interval is small (a leaf), or the caller
   * streams (compare_keys) and asked for one page. */
  char *from = g_strdup(after);
  for (;;) {
    guint before = truth->len;
    gint64 sv = 0;
    ok = w->src->truth_keys(w->ud, from, end, w->o->page_keys, truth, &sv, err);
    if (!ok) break;
    if (!store_version || sv < store_version) store_version = sv;
    if (truth->len - before < w->o->page_keys) break;
    g_free(from);
    from = g_strdup(g_array_index(truth, ixia_ae_kv_t, truth->len - 1).key);
  }
  g_free(from);
  ok = ok && w->src->index_keys(w->ud, after, end, index, err);
  if (ok) {
    w->st->keys_listed += truth->len + index->len;
    ok = compare_lists(w, truth, index, store_version, after, err);
  }
  g_array_unref(truth);
  g_array_unref(index);
  return ok;
}

static gboolean same(const ixia_ae_range_t *a, const ixia_ae_range_t *b) {
  return a->count == b->count && a->hash == b->hash;
}

/* Compares the digests of (after, end] (at most max_keys truth keys per
 * call, cut into ranges of bucket keys), descending into differing ranges,
 * until the interval is done. top: counts keys for the stats. */
static gboolean level(walk_t *w, const char *after, const char *end, guint max_keys, guint bucket,
                      gboolean top, ixia_error_t **err) {
  char *lo = g_strdup(after);
  gboolean ok = TRUE, done = FALSE;
  while (ok && !done) {
    GArray *truth = ixia_ae_ranges_new(), *index = ixia_ae_ranges_new();
    gint64 sv = 0;
    ok = w->src->truth_ranges(w->ud, lo, end, max_keys, bucket, truth, &sv, err);
    const char **bounds = NULL;
    if (ok && truth->len == 0) ok = ixia_error_set(err, IXIA_EINTERNAL, "anti-entropy: the truth side sent no range");
    if (ok) {
      bounds = g_new(const char *, truth->len);
      for (guint i = 0; i < truth->len; i++) bounds[i] = g_array_index(truth, ixia_ae_range_t, i).last_key;
      ok = w->src->index_ranges(w->ud, lo, bounds, truth->len, index, err);
      if (ok && index->len != truth->len)
        ok = ixia_error_set(err, IXIA_EINTERNAL, "anti-entropy: the index side sent %u digests for %u ranges",
                            index->len, truth->len);
    }
    const char *prev = lo;
    for (guint i = 0; ok && i < truth->len; i++) {
      const ixia_ae_range_t *t = &g_array_index(truth, ixia_ae_range_t, i);
      const ixia_ae_range_t *x = &g_array_index(index, ixia_ae_range_t, i);
      w->st->ranges++;
      if (top) {
        w->st->truth_keys += (guint64)t->count;
        w->st->index_keys += (guint64)x->count;
      }
      if (!same(t, x)) {
        w->st->ranges_differing++;
        gint64 most = MAX(t->count, x->count);
        /* A side with nothing to cut at, or few keys: list them. */
        if (most <= (gint64)w->o->leaf_keys || t->count == 0 || x->count == 0 ||
            t->count <= (gint64)w->o->fanout)
          ok = leaf(w, prev, t->last_key, err);
        else
          ok = level(w, prev, t->last_key, (guint)MIN(t->count + 1, (gint64)G_MAXINT32),
                     (guint)((t->count + w->o->fanout - 1) / w->o->fanout), FALSE, err);
      }
      prev = t->last_key;
    }
    if (ok) {
      const char *last = g_array_index(truth, ixia_ae_range_t, truth->len - 1).last_key;
      done = strcmp(last, end) == 0;
      if (!done && *last == '\0')
        ok = ixia_error_set(err, IXIA_EINTERNAL, "anti-entropy: the truth side ran past the interval");
      g_free(lo);
      lo = g_strdup(last);
    }
    g_free(bounds);
    g_array_unref(truth);
    g_array_unref(index);
  }
  g_free(lo);
  return ok;
}

gboolean ixia_ae_walk(const ixia_ae_source_t *src, void *ud, const ixia_ae_opts_t *o,
                      ixia_ae_stats_t *st, ixia_error_t **err) {
  g_return_val_if_fail(o->page_keys > 0 && o->fanout > 1, FALSE);
  walk_t w = {src, ud, o, st};
  return level(&w, "", "", o->page_keys, (o->page_keys + o->fanout - 1) / o->fanout, TRUE, err);
}

gboolean ixia_ae_compare_keys(const ixia_ae_source_t *src, void *ud, const ixia_ae_opts_t *o,
                              ixia_ae_stats_t *st, ixia_error_t **err) {
  g_return_val_if_fail(o->page_keys > 0, FALSE);
  walk_t w = {src, ud, o, st};
  char *after = g_strdup("");
  gboolean ok = TRUE;
  for (;;) {
    GArray *truth = ixia_ae_kvs_new(), *index = ixia_ae_kvs_new();
    gint64 sv = 0;
    ok = src->truth_keys(ud, after, "", o->page_keys, truth, &sv, err);
    gboolean last = ok && truth->len < o->page_keys;
    /* The page covers (after, its last key], or the rest of the table. */
    const char *end = last ? "" : g_array_index(truth, ixia_ae_kv_t, truth->len - 1).key;
    ok = ok && src->index_keys(ud, after, end, index, err);
    if (ok) {
      st->truth_keys += truth->len;
      st->index_keys += index->len;
      st->keys_listed += truth->len + index->len;
      st->leaves++;
      ok = compare_lists(&w, truth, index, sv, after, err);
    }
    if (ok && !last) {
      g_free(after);
      after = g_strdup(end);
    }
    g_array_unref(truth);
    g_array_unref(index);
    if (!ok || last) break;
  }
  g_free(after);
  return ok;
}
