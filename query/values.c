/* Values: the one byte encoding of field values that the index and the
 * brute-force evaluator both compare, and the extraction of a document's
 * values of one declared field.
 *
 * Numbers (long, double, timestamp) are 8 bytes that sort like the number
 * (ixia_num_encode), keywords their UTF-8 bytes, text fields one entry per
 * token of the field's analyzer (analyze.c), bools one byte. A field's values are deduplicated and sorted by
 * memcmp, so "one of the values equals / lies between / starts with" is a
 * binary search or a scan of a short sorted list, here and in the index
 * alike. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "internal.h"
#include "json.h"

void ixia_num_encode(double d, guint8 out[IXIA_NUM_BYTES]) {
  if (d == 0) d = 0.0; /* -0 and +0 are one value */
  guint64 bits;
  memcpy(&bits, &d, sizeof bits);
  bits = (bits >> 63) ? ~bits : bits | (G_GUINT64_CONSTANT(1) << 63);
  bits = GUINT64_TO_BE(bits);
  memcpy(out, &bits, sizeof bits);
}

double ixia_num_decode(const guint8 *p) {
  guint64 bits;
  memcpy(&bits, p, sizeof bits);
  bits = GUINT64_FROM_BE(bits);
  bits = (bits >> 63) ? bits & ~(G_GUINT64_CONSTANT(1) << 63) : ~bits;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

GBytes *ixia_num_bytes(double d) {
  guint8 b[IXIA_NUM_BYTES];
  ixia_num_encode(d, b);
  return g_bytes_new(b, sizeof b);
}

/* Sorting a list of values (an "in" of up to query.max_in_values): qsort
 * over GBytes spent ~19 ns a comparison in calls (a shuffled list of 10,000
 * values: a third of the API's CPU for the query, and again in the shard).
 * Here the values are ordered by 8 bytes each, taken after the prefix they
 * all share and zero-padded, with an LSD radix sort (a pass per byte that
 * differs somewhere), and only runs of equal keys are compared whole. The
 * padded key orders as memcmp with a proper prefix first: where one value
 * ends, its 0 is at most the other's byte, and equal keys go to the
 * comparison. Lists that come sorted are only checked; short ones (a
 * document's values) are sorted by insertion. */
typedef struct {
  const guint8 *p;
  gsize n;
  GBytes *b;
} vref_t;

typedef struct {
  guint64 key;
  guint32 i; /* into the vref_t array */
} vkey_t;

static inline int vref_cmp(const vref_t *x, const vref_t *y) {
  int c = memcmp(x->p, y->p, MIN(x->n, y->n));
  return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int vref_cmp_q(const void *a, const void *b) { return vref_cmp(a, b); }

/* Below this many values the radix sort's passes (a 256-entry count each)
 * cost more than comparing: a document's few tags take insertion. */
#define RADIX_MIN 64

static void vrefs_sort(vref_t *v, guint n) {
  if (n < RADIX_MIN) {
    for (guint i = 1; i < n; i++) {
      vref_t x = v[i];
      guint j = i;
      for (; j > 0 && vref_cmp(&v[j - 1], &x) > 0; j--) v[j] = v[j - 1];
      v[j] = x;
    }
    return;
  }
  gsize lcp = v[0].n;
  for (guint i = 1; i < n && lcp; i++) {
    gsize j = 0, m = MIN(lcp, v[i].n);
    while (j < m && v[i].p[j] == v[0].p[j]) j++;
    lcp = j;
  }
  vkey_t *a = g_new(vkey_t, n), *t = g_new(vkey_t, n);
  for (guint i = 0; i < n; i++) {
    guint64 k = 0;
    for (gsize j = 0; j < 8; j++) k = k << 8 | (lcp + j < v[i].n ? v[i].p[lcp + j] : 0);
    a[i] = (vkey_t){k, i};
  }
  for (guint shift = 0; shift < 64; shift += 8) {
    guint cnt[256] = {0};
    for (guint i = 0; i < n; i++) cnt[a[i].key >> shift & 0xFF]++;
    if (cnt[a[0].key >> shift & 0xFF] == n) continue; /* every key has this byte */
    guint pos = 0;
    for (guint b = 0; b < 256; b++) {
      guint c = cnt[b];
      cnt[b] = pos;
      pos += c;
    }
    for (guint i = 0; i < n; i++) t[cnt[a[i].key >> shift & 0xFF]++] = a[i];
    vkey_t *x = a;
    a = t, t = x;
  }
  vref_t *out = g_new(vref_t, n);
  for (guint i = 0; i < n; i++) out[i] = v[a[i].i];
  for (guint i = 0, j; i < n; i = j) {
    for (j = i + 1; j < n && a[j].key == a[i].key; j++) {
    }
    if (j - i > 1) qsort(out + i, j - i, sizeof *out, vref_cmp_q);
  }
  memcpy(v, out, sizeof *v * n);
  g_free(out);
  g_free(a);
  g_free(t);
}

void ixia_values_move_sorted_unique(GPtrArray *tmp, GPtrArray *out) {
  guint n = tmp->len;
  vref_t small[16]; /* a document's values: no allocation */
  vref_t *v = n <= G_N_ELEMENTS(small) ? small : g_new(vref_t, n);
  gboolean sorted = TRUE;
  for (guint i = 0; i < n; i++) {
    v[i].b = tmp->pdata[i];
    v[i].p = g_bytes_get_data(v[i].b, &v[i].n);
    if (!v[i].p) v[i].p = (const guint8 *)""; /* (an empty value: memcmp still wants a pointer) */
    if (i && sorted && vref_cmp(&v[i - 1], &v[i]) > 0) sorted = FALSE;
  }
  if (!sorted) vrefs_sort(v, n);
  const vref_t *kept = NULL; /* (a repeat is freed: compare with what was kept) */
  for (guint i = 0; i < n; i++) {
    if (kept && vref_cmp(kept, &v[i]) == 0) {
      g_bytes_unref(v[i].b);
      continue;
    }
    g_ptr_array_add(out, v[i].b);
    kept = &v[i];
  }
  if (v != small) g_free(v);
  g_free(g_ptr_array_steal(tmp, NULL)); /* the values moved: no free func */
}

gint ixia_values_find(const GPtrArray *sorted, GBytes *b) {
  guint lo = 0, hi = sorted->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    int c = g_bytes_compare(sorted->pdata[mid], b);
    if (c == 0) return (gint)mid;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/* Appends the encoded value(s) of one scalar; FALSE when v has another type. */
static gboolean append_value(const cJSON *v, const ixia_schema_field_t *ix, GPtrArray *out) {
  ixia_field_type_t t = ix->type;
  if (!ixia_schema_value_matches(v, t)) return FALSE;
  switch (t) {
    case IXIA_FIELD_KEYWORD:
      g_ptr_array_add(out, g_bytes_new(v->valuestring, strlen(v->valuestring)));
      break;
    case IXIA_FIELD_TEXT:
      ixia_text_tokens(ix->analyzer, v->valuestring, strlen(v->valuestring), out);
      break;
    case IXIA_FIELD_LONG:
    case IXIA_FIELD_DOUBLE:
      g_ptr_array_add(out, ixia_num_bytes(v->valuedouble));
      break;
    case IXIA_FIELD_TIMESTAMP: {
      double t = 0;
      ixia_timestamp_of(v, &t); /* epoch seconds, also of an RFC 3339 string */
      g_ptr_array_add(out, ixia_num_bytes(t));
      break;
    }
    case IXIA_FIELD_BOOL: {
      guint8 b = cJSON_IsTrue(v) ? 1 : 0;
      g_ptr_array_add(out, g_bytes_new(&b, 1));
      break;
    }
  }
  return TRUE;
}

/* A short rendering of a JSON value for error messages. */
static char *value_excerpt(const cJSON *v) {
  char *s = ixia_json_print(v);
  if (!s) return g_strdup("?");
  if (strlen(s) > 60) {
    s[57] = 0;
    char *t = g_strconcat(s, "...", NULL);
    g_free(s);
    return t;
  }
  return s;
}

typedef struct {
  const ixia_schema_field_t *ix;
  GPtrArray *tmp;
  gboolean strict, ok;
  ixia_error_t **err;
} collect_t;

static gboolean collect_one(const cJSON *v, const ixia_json_loc_t *loc, void *ud) {
  collect_t *c = ud;
  if (cJSON_IsNull(v) || append_value(v, c->ix, c->tmp) || !c->strict) return TRUE;
  char *ex = value_excerpt(v), *where = ixia_schema_where(c->ix->field, loc);
  c->ok = ixia_error_set(c->err, IXIA_ETYPE, "field '%s' is declared %s but %s %s", c->ix->field,
                         ixia_field_type_name(c->ix->type), where, ex);
  g_free(ex);
  g_free(where);
  return FALSE;
}

/* The values of ix in doc (through arrays of objects at any depth). strict:
 * a wrong-typed value is an error; lenient: it counts as absent (documents
 * stored before the index was declared may hold anything). */
static gboolean collect_values(const cJSON *doc, const ixia_schema_field_t *ix, GPtrArray *out,
                               gboolean strict, ixia_error_t **err) {
  collect_t c = {ix, g_ptr_array_new(), strict, TRUE, err};
  ixia_json_path_foreach(doc, ix->field, collect_one, &c);
  ixia_values_move_sorted_unique(c.tmp, out);
  g_ptr_array_free(c.tmp, TRUE);
  return c.ok;
}

/* ---- token occurrences of a text field ---- */

typedef struct {
  GArray *toks;
  guint32 pos;
  const char *analyzer;
} occ_t;

static gboolean add_occurrence(const char *tok, gsize n, guint32 pos, void *ud) {
  occ_t *o = ud;
  ixia_token_t t = {g_bytes_new(tok, n), pos};
  g_array_append_val(o->toks, t);
  return TRUE;
}

static gboolean occurrences_of(const cJSON *v, const ixia_json_loc_t *loc, void *ud) {
  (void)loc;
  occ_t *o = ud;
  if (!cJSON_IsString(v)) return TRUE;
  guint32 before = o->pos;
  ixia_analyze(o->analyzer, v->valuestring, strlen(v->valuestring), &o->pos, add_occurrence, o);
  if (o->pos != before) o->pos += IXIA_POSITION_GAP;
  return TRUE;
}

typedef struct {
  occ_t o;
  const ixia_schema_field_t *ix;
  ixia_error_t **err;
  gboolean ok;
} strict_occ_t;

static gboolean strict_occurrences(const cJSON *v, const ixia_json_loc_t *loc, void *ud) {
  strict_occ_t *c = ud;
  if (cJSON_IsNull(v) || cJSON_IsString(v)) return occurrences_of(v, loc, &c->o);
  char *ex = value_excerpt(v), *where = ixia_schema_where(c->ix->field, loc);
  c->ok = ixia_error_set(c->err, IXIA_ETYPE, "field '%s' is declared text but %s %s", c->ix->field,
                         where, ex);
  g_free(ex);
  g_free(where);
  return FALSE;
}

gboolean ixia_doc_text(const cJSON *doc, const ixia_schema_field_t *ix, GPtrArray *out, GArray **occ,
                       ixia_error_t **err) {
  strict_occ_t c = {{g_array_new(FALSE, FALSE, sizeof(ixia_token_t)), 0, ix->analyzer}, ix, err, TRUE};
  ixia_json_path_foreach(doc, ix->field, strict_occurrences, &c);
  GPtrArray *tmp = g_ptr_array_new();
  for (guint i = 0; i < c.o.toks->len; i++)
    g_ptr_array_add(tmp, g_bytes_ref(g_array_index(c.o.toks, ixia_token_t, i).tok));
  ixia_values_move_sorted_unique(tmp, out);
  g_ptr_array_free(tmp, TRUE);
  *occ = c.o.toks;
  return c.ok;
}

GArray *ixia_doc_tokens(const cJSON *doc, const ixia_schema_field_t *ix) {
  occ_t o = {g_array_new(FALSE, FALSE, sizeof(ixia_token_t)), 0, ix->analyzer};
  ixia_json_path_foreach(doc, ix->field, occurrences_of, &o);
  return o.toks;
}

void ixia_tokens_free(GArray *toks) {
  if (!toks) return;
  for (guint i = 0; i < toks->len; i++) g_bytes_unref(g_array_index(toks, ixia_token_t, i).tok);
  g_array_free(toks, TRUE);
}

gboolean ixia_doc_values(const cJSON *doc, const ixia_schema_field_t *ix, GPtrArray *out,
                         ixia_error_t **err) {
  return collect_values(doc, ix, out, TRUE, err);
}

GPtrArray *ixia_values_lenient(const cJSON *doc, const ixia_schema_field_t *ix) {
  GPtrArray *vals = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  collect_values(doc, ix, vals, FALSE, NULL);
  return vals;
}

cJSON *ixia_val_to_json(ixia_field_type_t type, const guint8 *p, guint32 len) {
  switch (type) {
    case IXIA_FIELD_KEYWORD:
    case IXIA_FIELD_TEXT: {
      char *s = ixia_memdup0((const char *)p, len);
      cJSON *j = cJSON_CreateString(s);
      g_free(s);
      return j;
    }
    case IXIA_FIELD_LONG:
    case IXIA_FIELD_DOUBLE:
    case IXIA_FIELD_TIMESTAMP:
      return len == IXIA_NUM_BYTES ? cJSON_CreateNumber(ixia_num_decode(p)) : cJSON_CreateNull();
    case IXIA_FIELD_BOOL:
      return len == 1 ? cJSON_CreateBool(p[0] != 0) : cJSON_CreateNull();
  }
  return cJSON_CreateNull();
}

void ixia_val_append_json(GString *out, ixia_field_type_t type, const guint8 *p, gsize len) {
  switch (type) {
    case IXIA_FIELD_KEYWORD:
    case IXIA_FIELD_TEXT:
      ixia_json_append_string(out, len ? (const char *)p : "", len);
      return;
    case IXIA_FIELD_LONG:
    case IXIA_FIELD_DOUBLE:
    case IXIA_FIELD_TIMESTAMP:
      if (len == IXIA_NUM_BYTES) {
        char num[32];
        ixia_json_format_number(ixia_num_decode(p), num);
        g_string_append(out, num);
        return;
      }
      break;
    case IXIA_FIELD_BOOL:
      if (len == 1) {
        g_string_append(out, p[0] ? "true" : "false");
        return;
      }
      break;
  }
  g_string_append(out, "null");
}

int ixia_val_cmp(const guint8 *a, gsize alen, const guint8 *b, gsize blen) {
  int c = MIN(alen, blen) ? memcmp(a, b, MIN(alen, blen)) : 0; /* an empty value may be NULL */
  if (c) return c;
  return alen < blen ? -1 : alen > blen;
}

