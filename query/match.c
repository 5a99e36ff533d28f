/* Per-document evaluation of a filter: the brute-force definition of what
 * a query matches. ixia-query-api runs it on every hit it re-reads from the
 * truth store (unless the version proves the index saw the same document),
 * and the differential tests run it over a model of the store to check the
 * index. It reads the same encoded values as the index (values.c), so both
 * agree on equality, order and prefixes by construction. */
#include "internal.h"

static gboolean in_range(const ixia_filter_t *f, GBytes *v) {
  if (f->lo) {
    int c = g_bytes_compare(v, f->lo);
    if (c < 0 || (c == 0 && !f->lo_incl)) return FALSE;
  }
  if (f->hi) {
    int c = g_bytes_compare(v, f->hi);
    if (c > 0 || (c == 0 && !f->hi_incl)) return FALSE;
  }
  return TRUE;
}

static gboolean leaf_matches(const ixia_filter_t *f, const GPtrArray *vals) {
  gsize plen = 0;
  const guint8 *pre = NULL;
  if (f->kind == IXIA_F_PREFIX) pre = g_bytes_get_data(f->values->pdata[0], &plen);
  if (f->kind == IXIA_F_EXISTS) return vals->len > 0;
  if (f->kind == IXIA_F_MATCH) {
    for (guint i = 0; i < f->values->len; i++)
      if ((ixia_values_find(vals, f->values->pdata[i]) >= 0) == f->match_any) return f->match_any;
    return !f->match_any;
  }
  for (guint i = 0; i < vals->len; i++) {
    GBytes *v = vals->pdata[i];
    gsize vlen;
    const guint8 *vp = g_bytes_get_data(v, &vlen);
    switch (f->kind) {
      case IXIA_F_TERM:
      case IXIA_F_IN:
        if (ixia_values_find(f->values, v) >= 0) return TRUE;
        break;
      case IXIA_F_RANGE:
        if (in_range(f, v)) return TRUE;
        break;
      case IXIA_F_PREFIX:
        if (vlen >= plen && (plen == 0 || memcmp(vp, pre, plen) == 0)) return TRUE;
        break;
      default:
        break;
    }
  }
  return FALSE;
}

/* The phrase's tokens at consecutive offsets from some position. */
static gboolean phrase_matches(const ixia_filter_t *f, const cJSON *doc) {
  GArray *toks = ixia_doc_tokens(doc, f->field);
  GHashTable *at = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, NULL,
                                         (GDestroyNotify)g_hash_table_destroy);
  for (guint i = 0; i < toks->len; i++) {
    const ixia_token_t *t = &g_array_index(toks, ixia_token_t, i);
    GHashTable *pos = g_hash_table_lookup(at, t->tok);
    if (!pos) g_hash_table_insert(at, t->tok, pos = g_hash_table_new(g_direct_hash, g_direct_equal));
    g_hash_table_add(pos, GUINT_TO_POINTER(t->pos + 1));
  }
  gboolean found = FALSE;
  GHashTable *first = g_hash_table_lookup(at, f->values->pdata[0]);
  GHashTableIter it;
  gpointer p;
  if (first) g_hash_table_iter_init(&it, first);
  while (first && !found && g_hash_table_iter_next(&it, &p, NULL)) {
    gint64 start = (gint64)GPOINTER_TO_UINT(p) - 1 - f->offsets[0];
    found = TRUE;
    for (guint i = 1; found && i < f->values->len; i++) {
      GHashTable *pos = g_hash_table_lookup(at, f->values->pdata[i]);
      gint64 want = start + f->offsets[i];
      found = pos && want >= 0 && g_hash_table_contains(pos, GUINT_TO_POINTER((guint)want + 1));
    }
  }
  g_hash_table_destroy(at);
  ixia_tokens_free(toks);
  return found;
}

static gboolean filter_matches(const ixia_filter_t *f, const cJSON *doc) {
  switch (f->kind) {
    case IXIA_F_MATCH_PHRASE:
      return phrase_matches(f, doc);
    case IXIA_F_AND:
      for (guint i = 0; i < f->n_children; i++)
        if (!filter_matches(f->children[i], doc)) return FALSE;
      return TRUE;
    case IXIA_F_OR:
      for (guint i = 0; i < f->n_children; i++)
        if (filter_matches(f->children[i], doc)) return TRUE;
      return FALSE;
    case IXIA_F_NOT:
      return !filter_matches(f->children[0], doc);
    default: {
      GPtrArray *vals = ixia_values_lenient(doc, f->field);
      gboolean m = leaf_matches(f, vals);
      g_ptr_array_free(vals, TRUE);
      return m;
    }
  }
}

gboolean ixia_query_match_doc(const ixia_query_t *q, const cJSON *doc) {
  return !q->filter || filter_matches(q->filter, doc);
}


static gboolean monotone(const ixia_filter_t *f) {
  if (f->kind == IXIA_F_NOT) return FALSE;
  for (guint i = 0; i < f->n_children; i++)
    if (!monotone(f->children[i])) return FALSE;
  return TRUE;
}

gboolean ixia_query_filter_monotone(const ixia_query_t *q) { return !q->filter || monotone(q->filter); }

gboolean ixia_filter_match_doc(const ixia_filter_t *f, const cJSON *doc) { return filter_matches(f, doc); }
