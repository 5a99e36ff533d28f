/* Sorting: the order of hits under a request's "sort", shared by the index
 * (which computes sort values from its columns), the query API (which
 * merges the shards' pages) and brute force (which computes them from the
 * documents).
 *
 * A sort value is the value encoding of values.c (memcmp order within one
 * field type), so every side compares bytes the same way and a cursor can
 * carry values exactly. _score is encoded as a number. Per key: a missing
 * value sorts last (or first), whatever the direction, as in Elasticsearch;
 * a multi-valued field sorts by its smallest value ascending and its
 * largest descending (Elasticsearch's default "mode"). The final tiebreak,
 * the document key, is the caller's: it is not a value of the index's
 * columns. */
#include "internal.h"

int ixia_sort_cmp_one(const ixia_sort_key_t *k, const guint8 *a, gsize alen, gboolean a_has,
                      const guint8 *b, gsize blen, gboolean b_has) {
  if (!a_has || !b_has) {
    if (a_has == b_has) return 0;
    int missing_later = k->missing_first ? -1 : 1;
    return a_has ? -missing_later : missing_later;
  }
  int c = ixia_val_cmp(a, alen, b, blen);
  return k->desc ? -c : c;
}

int ixia_sort_cmp_keys(const ixia_sort_key_t *keys, guint n, GBytes *const *a, GBytes *const *b) {
  for (guint i = 0; i < n; i++) {
    gsize al = 0, bl = 0;
    const guint8 *ap = a[i] ? g_bytes_get_data(a[i], &al) : NULL;
    const guint8 *bp = b[i] ? g_bytes_get_data(b[i], &bl) : NULL;
    int c = ixia_sort_cmp_one(&keys[i], ap, al, a[i] != NULL, bp, bl, b[i] != NULL);
    if (c) return c;
  }
  return 0;
}

int ixia_sort_cmp_values(const ixia_query_t *q, GBytes *const *a, GBytes *const *b) {
  return ixia_sort_cmp_keys(q->sort, q->n_sort, a, b);
}

static void bytes_unref0(gpointer b) {
  if (b) g_bytes_unref(b);
}

GPtrArray *ixia_sort_values_of_doc(const ixia_query_t *q, const cJSON *doc, double score) {
  return ixia_sort_values_of(q->sort, q->n_sort, doc, score);
}

GPtrArray *ixia_sort_values_of(const ixia_sort_key_t *keys, guint n, const cJSON *doc, double score) {
  GPtrArray *out = g_ptr_array_new_full(n, bytes_unref0);
  for (guint i = 0; i < n; i++) {
    const ixia_sort_key_t *k = &keys[i];
    if (!k->field) {
      g_ptr_array_add(out, ixia_num_bytes(score));
      continue;
    }
    GPtrArray *vals = ixia_values_lenient(doc, k->field);
    GBytes *v = NULL;
    if (vals->len) v = g_bytes_ref(vals->pdata[k->desc ? vals->len - 1 : 0]);
    g_ptr_array_add(out, v);
    g_ptr_array_free(vals, TRUE);
  }
  return out;
}

cJSON *ixia_sort_value_json(const ixia_sort_key_t *k, GBytes *v) {
  if (!v) return cJSON_CreateNull();
  gsize n;
  const guint8 *p = g_bytes_get_data(v, &n);
  return ixia_val_to_json(k->field ? k->field->type : IXIA_FIELD_DOUBLE, p, (guint32)n);
}

void ixia_sort_value_append(GString *out, const ixia_sort_key_t *k, const guint8 *p, gsize len) {
  ixia_val_append_json(out, k->field ? k->field->type : IXIA_FIELD_DOUBLE, p, len);
}
