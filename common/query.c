#include "query.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "json.h"

/* Cardinality keeps 64-bit hashes directly in GHashTable's pointer keys. */
G_STATIC_ASSERT(sizeof(gpointer) >= sizeof(guint64));

#define QUERY_MAX_DEPTH 64
#define MAX_FIELDS 64
#define MAX_TERMS_SIZE 10000
#define MAX_PERCENTS 100
#define MAX_AGG_NAME 64
#define MAX_SAFE_INT 9007199254740992.0 /* 2^53 */

/* ======================================================================
 * Values
 * ====================================================================== */

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

static inline gboolean token_byte(guint8 c) { return c >= 0x80 || g_ascii_isalnum(c); }

static GBytes *num_bytes(double d) {
  guint8 b[IXIA_NUM_BYTES];
  ixia_num_encode(d, b);
  return g_bytes_new(b, sizeof b);
}

static gint bytes_cmp_pp(gconstpointer a, gconstpointer b) {
  return g_bytes_compare(*(GBytes *const *)a, *(GBytes *const *)b);
}

/* Moves the values of tmp (owned refs) to out, sorted and without
 * duplicates; tmp is left empty. */
static void move_sorted_unique(GPtrArray *tmp, GPtrArray *out) {
  if (tmp->len > 1) qsort(tmp->pdata, tmp->len, sizeof(gpointer), bytes_cmp_pp);
  GBytes *prev = NULL;
  for (guint i = 0; i < tmp->len; i++) {
    GBytes *b = tmp->pdata[i];
    if (prev && g_bytes_equal(prev, b)) {
      g_bytes_unref(b);
      continue;
    }
    g_ptr_array_add(out, b);
    prev = b;
  }
  g_free(g_ptr_array_steal(tmp, NULL)); /* the values moved: no free func */
}

void ixia_text_tokens(const char *text, size_t len, GPtrArray *out) {
  GHashTable *seen = NULL;
  char small[64];
  size_t i = 0;
  while (i < len) {
    while (i < len && !token_byte((guint8)text[i])) i++;
    size_t start = i;
    while (i < len && token_byte((guint8)text[i])) i++;
    size_t n = i - start;
    if (n == 0) break;
    char *buf = n <= sizeof small ? small : g_malloc(n);
    for (size_t k = 0; k < n; k++) buf[k] = g_ascii_tolower(text[start + k]);
    GBytes *tok = g_bytes_new(buf, n);
    if (buf != small) g_free(buf);
    if (!seen) seen = g_hash_table_new(g_bytes_hash, g_bytes_equal);
    if (g_hash_table_add(seen, tok)) {
      g_ptr_array_add(out, tok);
    } else {
      g_bytes_unref(tok);
    }
  }
  if (seen) g_hash_table_destroy(seen);
}

/* Whether a JSON value has a field type, as ixia_schema_check_doc decides. */
/* Appends the encoded value(s) of one scalar; FALSE when v has another type. */
static gboolean append_value(const cJSON *v, ixia_field_type_t t, GPtrArray *out) {
  if (!ixia_schema_value_matches(v, t)) return FALSE;
  switch (t) {
    case IXIA_FIELD_KEYWORD:
      g_ptr_array_add(out, g_bytes_new(v->valuestring, strlen(v->valuestring)));
      break;
    case IXIA_FIELD_TEXT:
      ixia_text_tokens(v->valuestring, strlen(v->valuestring), out);
      break;
    case IXIA_FIELD_LONG:
    case IXIA_FIELD_DOUBLE:
    case IXIA_FIELD_TIMESTAMP:
      g_ptr_array_add(out, num_bytes(v->valuedouble));
      break;
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

/* The values of ix in doc. strict: a wrong-typed value is an error;
 * lenient: it counts as absent (documents stored before the index was
 * declared may hold anything). */
static gboolean collect_values(const cJSON *doc, const ixia_index_t *ix, GPtrArray *out,
                               gboolean strict, ixia_error_t **err) {
  const cJSON *v = ixia_json_path(doc, ix->field);
  if (!v || cJSON_IsNull(v)) return TRUE;
  GPtrArray *tmp = g_ptr_array_new();
  gboolean ok = TRUE;
  if (cJSON_IsArray(v)) {
    int k = 0;
    for (const cJSON *e = v->child; e && ok; e = e->next, k++) {
      if (cJSON_IsNull(e) || append_value(e, ix->type, tmp) || !strict) continue;
      char *ex = value_excerpt(e);
      ok = ixia_error_set(err, IXIA_ETYPE, "field '%s' is declared %s but element %d is %s",
                          ix->field, ixia_field_type_name(ix->type), k, ex);
      g_free(ex);
    }
  } else if (!append_value(v, ix->type, tmp) && strict) {
    char *ex = value_excerpt(v);
    ok = ixia_error_set(err, IXIA_ETYPE, "field '%s' is declared %s but has %s", ix->field,
                        ixia_field_type_name(ix->type), ex);
    g_free(ex);
  }
  move_sorted_unique(tmp, out);
  g_ptr_array_free(tmp, TRUE);
  return ok;
}

gboolean ixia_doc_values(const cJSON *doc, const ixia_index_t *ix, GPtrArray *out,
                         ixia_error_t **err) {
  return collect_values(doc, ix, out, TRUE, err);
}

static GPtrArray *lenient_values(const cJSON *doc, const ixia_index_t *ix) {
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

/* memcmp order; a proper prefix sorts first. */
static int val_cmp(const guint8 *a, gsize alen, const guint8 *b, gsize blen) {
  int c = memcmp(a, b, MIN(alen, blen));
  if (c) return c;
  return alen < blen ? -1 : alen > blen;
}

/* ======================================================================
 * Limits
 * ====================================================================== */

void ixia_query_limits_from_config(const ixia_config_t *cfg, ixia_query_limits_t *out) {
  out->max_clauses = (guint)ixia_config_int(cfg, "query.max_clauses");
  out->max_limit = (guint)ixia_config_int(cfg, "query.max_limit");
  out->max_postings = (guint64)ixia_config_int(cfg, "query.max_postings");
  out->max_memory_bytes = (guint64)ixia_config_int(cfg, "query.max_memory_mb") << 20;
  out->max_terms_buckets = (guint)ixia_config_int(cfg, "query.max_terms_buckets");
  out->max_exact_values = (guint)ixia_config_int(cfg, "query.max_exact_values");
  out->deadline_ms = (guint)ixia_config_int(cfg, "query.deadline_ms");
  out->max_wait_ms = (guint)ixia_config_int(cfg, "query.max_wait_ms");
  out->max_request_bytes = (gsize)ixia_config_int(cfg, "query.max_request_bytes");
}

/* ======================================================================
 * Parsing
 * ====================================================================== */

typedef struct {
  const ixia_schema_t *schema;
  const ixia_query_limits_t *lim;
  guint clauses;
  GPtrArray *agg_fields; /* const ixia_index_t*, each once */
} pctx_t;

/* IXIA_EINVAL "path: message". */
static gboolean perr(ixia_error_t **err, const char *path, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
static gboolean perr(ixia_error_t **err, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  ixia_error_set(err, IXIA_EINVAL, "%s: %s", path, msg);
  g_free(msg);
  return FALSE;
}

static gboolean count_clause(pctx_t *c, const char *path, ixia_error_t **err) {
  if (++c->clauses <= c->lim->max_clauses) return TRUE;
  return ixia_error_set(err, IXIA_ETOOLARGE,
                        "%s: the query has more than %u clauses (filter nodes, \"in\" values and "
                        "aggregations; query.max_clauses)",
                        path, c->lim->max_clauses);
}

static const ixia_index_t *find_field(const pctx_t *c, const char *name, const char *path,
                                      ixia_error_t **err) {
  for (guint i = 0; i < c->schema->n_indexes; i++)
    if (strcmp(c->schema->indexes[i].field, name) == 0) return &c->schema->indexes[i];
  perr(err, path, "field '%s' is not indexed in %s.%s", name, c->schema->ns, c->schema->table);
  return NULL;
}

static gboolean is_numeric(ixia_field_type_t t) {
  return t == IXIA_FIELD_LONG || t == IXIA_FIELD_DOUBLE || t == IXIA_FIELD_TIMESTAMP;
}

static gboolean is_integer(const cJSON *v) {
  return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble);
}

/* Lower-cases s; TRUE when the result is one whole token. */
static char *lower_token(const char *s, gboolean *one_token) {
  char *low = g_ascii_strdown(s, -1);
  gboolean ok = *low != 0;
  for (const char *p = low; ok && *p; p++) ok = token_byte((guint8)*p);
  *one_token = ok;
  return low;
}

/* A term/in value of field ix. `what` names the value in messages. */
static GBytes *encode_term(const ixia_index_t *ix, const cJSON *v, const char *path,
                           ixia_error_t **err) {
  const char *tn = ixia_field_type_name(ix->type);
  switch (ix->type) {
    case IXIA_FIELD_KEYWORD:
      if (!cJSON_IsString(v)) break;
      return g_bytes_new(v->valuestring, strlen(v->valuestring));
    case IXIA_FIELD_TEXT: {
      if (!cJSON_IsString(v)) break;
      gboolean one;
      char *low = lower_token(v->valuestring, &one);
      if (!one) {
        perr(err, path,
             "\"%.64s\" is not a single word of text field '%s'; use {\"match\": {\"%s\": ...}} "
             "to find words",
             v->valuestring, ix->field, ix->field);
        g_free(low);
        return NULL;
      }
      size_t n = strlen(low);
      return g_bytes_new_take(low, n);
    }
    case IXIA_FIELD_LONG:
    case IXIA_FIELD_TIMESTAMP:
      if (!is_integer(v)) {
        perr(err, path, "value must be an integer for %s field", tn);
        return NULL;
      }
      return num_bytes(v->valuedouble);
    case IXIA_FIELD_DOUBLE:
      if (!cJSON_IsNumber(v)) {
        perr(err, path, "value must be a number for double field");
        return NULL;
      }
      return num_bytes(v->valuedouble);
    case IXIA_FIELD_BOOL:
      if (!cJSON_IsBool(v)) {
        perr(err, path, "value must be true or false for bool field");
        return NULL;
      }
      return g_bytes_new(cJSON_IsTrue(v) ? "\1" : "\0", 1);
  }
  perr(err, path, "value must be a string for %s field", tn);
  return NULL;
}

static void filter_free(ixia_filter_t *f) {
  if (!f) return;
  if (f->values) g_ptr_array_free(f->values, TRUE);
  if (f->lo) g_bytes_unref(f->lo);
  if (f->hi) g_bytes_unref(f->hi);
  for (guint i = 0; i < f->n_children; i++) filter_free(f->children[i]);
  g_free(f->children);
  g_free(f);
}

static GPtrArray *new_values(void) {
  return g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
}

static ixia_filter_t *parse_filter(pctx_t *c, const cJSON *j, const char *path,
                                   ixia_error_t **err);

/* term/in/range/prefix/match bodies: {"<field>": arg}. Sets the field and
 * *fpath ("path.<field>", g_free). */
static const cJSON *leaf_body(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                              const char *example, char **fpath, ixia_error_t **err) {
  if (!cJSON_IsObject(body) || cJSON_GetArraySize(body) != 1) {
    perr(err, path, "must be an object with exactly one field, like %s", example);
    return NULL;
  }
  *fpath = g_strdup_printf("%s.%s", path, body->child->string);
  f->field = find_field(c, body->child->string, *fpath, err);
  return f->field ? body->child : NULL;
}

static gboolean parse_term(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                           ixia_error_t **err) {
  char *fp = NULL;
  const cJSON *v = leaf_body(c, f, body, path, "{\"category\": \"books\"}", &fp, err);
  GBytes *b = v ? encode_term(f->field, v, fp, err) : NULL;
  g_free(fp);
  if (!b) return FALSE;
  f->values = new_values();
  g_ptr_array_add(f->values, b);
  return TRUE;
}

static gboolean parse_in(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                         ixia_error_t **err) {
  char *fp = NULL;
  const cJSON *v = leaf_body(c, f, body, path, "{\"country\": [\"US\", \"CA\"]}", &fp, err);
  gboolean ok = v != NULL;
  if (ok && (!cJSON_IsArray(v) || !v->child))
    ok = perr(err, fp, "must be a non-empty array of values");
  GPtrArray *tmp = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  int i = 0;
  for (const cJSON *e = ok ? v->child : NULL; e && ok; e = e->next, i++) {
    char *ep = g_strdup_printf("%s[%d]", fp, i);
    GBytes *b = NULL;
    ok = count_clause(c, ep, err) && (b = encode_term(f->field, e, ep, err)) != NULL;
    if (b) g_ptr_array_add(tmp, b);
    g_free(ep);
  }
  if (ok) {
    f->values = new_values();
    move_sorted_unique(tmp, f->values);
  }
  g_ptr_array_free(tmp, TRUE);
  g_free(fp);
  return ok;
}

static gboolean parse_range(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                            ixia_error_t **err) {
  char *fp = NULL;
  const cJSON *v = leaf_body(c, f, body, path, "{\"price\": {\"gte\": 10, \"lt\": 20}}", &fp, err);
  gboolean ok = v != NULL;
  ixia_field_type_t t = ok ? f->field->type : IXIA_FIELD_KEYWORD;
  if (ok && (t == IXIA_FIELD_TEXT || t == IXIA_FIELD_BOOL))
    ok = perr(err, fp, "range is not supported on %s field '%s'", ixia_field_type_name(t),
              f->field->field);
  if (ok && (!cJSON_IsObject(v) || !v->child))
    ok = perr(err, fp, "must be an object with at least one bound of gt, gte, lt, lte");
  for (const cJSON *b = ok ? v->child : NULL; b && ok; b = b->next) {
    const char *n = b->string;
    gboolean lower = strcmp(n, "gt") == 0 || strcmp(n, "gte") == 0;
    gboolean upper = strcmp(n, "lt") == 0 || strcmp(n, "lte") == 0;
    if (!lower && !upper) {
      ok = perr(err, fp, "unknown bound \"%s\" (use gt, gte, lt, lte)", n);
      break;
    }
    if (lower ? f->lo != NULL : f->hi != NULL) {
      ok = perr(err, fp, "bound \"%s\" conflicts with another %s bound", n,
                lower ? "lower" : "upper");
      break;
    }
    GBytes *enc = NULL;
    if (is_numeric(t)) {
      if (cJSON_IsNumber(b)) enc = num_bytes(b->valuedouble);
      else ok = perr(err, fp, "bound \"%s\" must be a number for %s field", n,
                     ixia_field_type_name(t));
    } else if (cJSON_IsString(b)) {
      enc = g_bytes_new(b->valuestring, strlen(b->valuestring));
    } else {
      ok = perr(err, fp, "bound \"%s\" must be a string for keyword field", n);
    }
    gboolean incl = n[2] == 'e';
    if (lower) {
      f->lo = enc;
      f->lo_incl = incl;
    } else {
      f->hi = enc;
      f->hi_incl = incl;
    }
  }
  g_free(fp);
  return ok;
}

static gboolean parse_prefix(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                             ixia_error_t **err) {
  char *fp = NULL;
  const cJSON *v = leaf_body(c, f, body, path, "{\"title\": \"lap\"}", &fp, err);
  gboolean ok = v != NULL;
  ixia_field_type_t t = ok ? f->field->type : IXIA_FIELD_KEYWORD;
  if (ok && t != IXIA_FIELD_KEYWORD && t != IXIA_FIELD_TEXT)
    ok = perr(err, fp, "prefix needs a keyword or text field; '%s' is %s", f->field->field,
              ixia_field_type_name(t));
  if (ok && !cJSON_IsString(v)) ok = perr(err, fp, "prefix must be a string");
  if (ok) {
    f->values = new_values();
    if (t == IXIA_FIELD_TEXT) {
      gboolean one;
      char *low = lower_token(v->valuestring, &one);
      if (!one)
        ok = perr(err, fp,
                  "prefix \"%.64s\" of a text field must be the start of one word (letters and "
                  "digits only)",
                  v->valuestring);
      size_t n = strlen(low);
      g_ptr_array_add(f->values, g_bytes_new_take(low, n));
    } else {
      g_ptr_array_add(f->values, g_bytes_new(v->valuestring, strlen(v->valuestring)));
    }
  }
  g_free(fp);
  return ok;
}

static gboolean parse_exists(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                             ixia_error_t **err) {
  const cJSON *name = body;
  if (cJSON_IsObject(body)) {
    name = cJSON_GetObjectItemCaseSensitive(body, "field");
    if (cJSON_GetArraySize(body) != 1) name = NULL;
  }
  if (!cJSON_IsString(name))
    return perr(err, path, "must be a field name or {\"field\": \"<name>\"}");
  f->field = find_field(c, name->valuestring, path, err);
  return f->field != NULL;
}

static gboolean parse_match(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                            ixia_error_t **err) {
  char *fp = NULL;
  const cJSON *v = leaf_body(c, f, body, path, "{\"title\": \"red shoes\"}", &fp, err);
  gboolean ok = v != NULL;
  if (ok && f->field->type != IXIA_FIELD_TEXT)
    ok = perr(err, fp, "match needs a text field; '%s' is %s (use term)", f->field->field,
              ixia_field_type_name(f->field->type));
  if (ok && !cJSON_IsString(v)) ok = perr(err, fp, "match takes a string of words");
  if (ok) {
    f->values = new_values();
    ixia_text_tokens(v->valuestring, strlen(v->valuestring), f->values);
    if (f->values->len == 0) ok = perr(err, fp, "\"%.64s\" has no words to match", v->valuestring);
  }
  g_free(fp);
  return ok;
}

static gboolean parse_bool_op(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                              ixia_error_t **err) {
  if (!cJSON_IsArray(body) || !body->child)
    return perr(err, path, "must be a non-empty array of filters");
  f->children = g_new0(ixia_filter_t *, cJSON_GetArraySize(body));
  for (const cJSON *e = body->child; e; e = e->next) {
    char *ep = g_strdup_printf("%s[%u]", path, f->n_children);
    ixia_filter_t *child = parse_filter(c, e, ep, err);
    g_free(ep);
    if (!child) return FALSE;
    f->children[f->n_children++] = child;
  }
  return TRUE;
}

static gboolean parse_not(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                          ixia_error_t **err) {
  f->children = g_new0(ixia_filter_t *, 1);
  f->children[0] = parse_filter(c, body, path, err);
  if (!f->children[0]) return FALSE;
  f->n_children = 1;
  return TRUE;
}

typedef gboolean (*filter_parser_fn)(pctx_t *, ixia_filter_t *, const cJSON *, const char *,
                                     ixia_error_t **);

static const struct {
  const char *name;
  ixia_filter_kind_t kind;
  filter_parser_fn parse;
} filter_kinds[] = {
    {"term", IXIA_F_TERM, parse_term},       {"in", IXIA_F_IN, parse_in},
    {"range", IXIA_F_RANGE, parse_range},    {"prefix", IXIA_F_PREFIX, parse_prefix},
    {"exists", IXIA_F_EXISTS, parse_exists}, {"match", IXIA_F_MATCH, parse_match},
    {"and", IXIA_F_AND, parse_bool_op},      {"or", IXIA_F_OR, parse_bool_op},
    {"not", IXIA_F_NOT, parse_not},
};

static ixia_filter_t *parse_filter(pctx_t *c, const cJSON *j, const char *path,
                                   ixia_error_t **err) {
  if (!cJSON_IsObject(j) || cJSON_GetArraySize(j) != 1) {
    perr(err, path,
         "a filter must be an object with exactly one key (term, in, range, prefix, exists, "
         "match, and, or, not)");
    return NULL;
  }
  if (!count_clause(c, path, err)) return NULL;
  const cJSON *body = j->child;
  for (guint i = 0; i < G_N_ELEMENTS(filter_kinds); i++) {
    if (strcmp(body->string, filter_kinds[i].name) != 0) continue;
    ixia_filter_t *f = g_new0(ixia_filter_t, 1);
    f->kind = filter_kinds[i].kind;
    char *kp = g_strdup_printf("%s.%s", path, body->string);
    gboolean ok = filter_kinds[i].parse(c, f, body, kp, err);
    g_free(kp);
    if (!ok) {
      filter_free(f);
      return NULL;
    }
    return f;
  }
  perr(err, path,
       "unknown filter \"%s\" (term, in, range, prefix, exists, match, and, or, not)",
       body->string);
  return NULL;
}

/* ---- aggregations ---- */

static void agg_free(ixia_agg_t *g) {
  if (!g) return;
  for (guint i = 0; i < g->n_subs; i++) agg_free(g->subs[i]);
  g_free(g->subs);
  g_free(g->percents);
  g_free(g->name);
  g_free(g);
}

static guint field_slot(pctx_t *c, const ixia_index_t *ix) {
  for (guint i = 0; i < c->agg_fields->len; i++)
    if (c->agg_fields->pdata[i] == ix) return i;
  g_ptr_array_add(c->agg_fields, (gpointer)ix);
  return c->agg_fields->len - 1;
}

static const char *const agg_kind_names[] = {"count", "sum", "avg", "min", "max",
                                             "terms", "percentiles", "cardinality"};

/* The field argument of an aggregation: "f" or {"field": "f", <extra keys>}.
 * Keys of body other than "field" must be in `extra` (NULL-terminated). */
static gboolean agg_field(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                          const char *const *extra, ixia_error_t **err) {
  const cJSON *name = body;
  if (cJSON_IsObject(body)) {
    for (const cJSON *k = body->child; k; k = k->next) {
      gboolean known = strcmp(k->string, "field") == 0;
      for (guint i = 0; extra && extra[i]; i++) known = known || strcmp(k->string, extra[i]) == 0;
      if (!known) return perr(err, path, "unknown key \"%s\"", k->string);
    }
    name = cJSON_GetObjectItemCaseSensitive(body, "field");
  }
  if (!cJSON_IsString(name))
    return perr(err, path, "needs a field: \"<field>\" or {\"field\": \"<field>\"}");
  char *fp = g_strdup_printf("%s.field", path);
  g->field = find_field(c, name->valuestring, fp, err);
  g_free(fp);
  if (!g->field) return FALSE;
  ixia_field_type_t t = g->field->type;
  gboolean numeric_only = g->kind != IXIA_AGG_TERMS && g->kind != IXIA_AGG_CARDINALITY;
  if (numeric_only && !is_numeric(t))
    return perr(err, path, "%s needs a long, double or timestamp field; '%s' is %s",
                agg_kind_names[g->kind], g->field->field, ixia_field_type_name(t));
  if (t == IXIA_FIELD_TEXT)
    return perr(err, path, "%s cannot read text field '%s' (index it as keyword)",
                agg_kind_names[g->kind], g->field->field);
  g->field_slot = field_slot(c, g->field);
  return TRUE;
}

static gboolean parse_aggs(pctx_t *c, const cJSON *j, const char *path, gboolean nested,
                           ixia_agg_t ***out, guint *n_out, ixia_error_t **err);

static gboolean parse_percents(ixia_agg_t *g, const cJSON *body, const char *path,
                               ixia_error_t **err) {
  const cJSON *p = cJSON_IsObject(body) ? cJSON_GetObjectItemCaseSensitive(body, "percents") : NULL;
  if (!p) {
    static const double def[] = {50, 95, 99};
    g->n_percents = G_N_ELEMENTS(def);
    g->percents = g_memdup2(def, sizeof def);
    return TRUE;
  }
  char *pp = g_strdup_printf("%s.percents", path);
  int n = cJSON_GetArraySize(p);
  gboolean ok = cJSON_IsArray(p) && n >= 1 && n <= MAX_PERCENTS;
  if (!ok) perr(err, pp, "must be an array of 1 to %d numbers in (0, 100]", MAX_PERCENTS);
  g->percents = g_new0(double, MAX(n, 1));
  for (const cJSON *e = ok ? p->child : NULL; e && ok; e = e->next) {
    if (!cJSON_IsNumber(e) || !(e->valuedouble > 0 && e->valuedouble <= 100)) {
      ok = perr(err, pp, "[%u] must be a number in (0, 100]", g->n_percents);
      break;
    }
    for (guint i = 0; i < g->n_percents; i++)
      if (g->percents[i] == e->valuedouble)
        ok = perr(err, pp, "[%u] repeats %g", g->n_percents, e->valuedouble);
    g->percents[g->n_percents++] = e->valuedouble;
  }
  g_free(pp);
  return ok;
}

static gboolean parse_terms(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                            ixia_error_t **err) {
  static const char *const extra[] = {"size", "aggs", NULL};
  if (!cJSON_IsObject(body))
    return perr(err, path, "must be {\"field\": \"<field>\", \"size\": N, \"aggs\": {...}}");
  if (!agg_field(c, g, body, path, extra, err)) return FALSE;
  const cJSON *size = cJSON_GetObjectItemCaseSensitive(body, "size");
  g->size = 10;
  if (size) {
    if (!is_integer(size) || size->valuedouble < 1 || size->valuedouble > MAX_TERMS_SIZE)
      return perr(err, path, "size must be an integer from 1 to %d", MAX_TERMS_SIZE);
    g->size = (guint)size->valuedouble;
  }
  const cJSON *subs = cJSON_GetObjectItemCaseSensitive(body, "aggs");
  if (!subs || cJSON_IsNull(subs)) return TRUE;
  char *sp = g_strdup_printf("%s.aggs", path);
  gboolean ok = parse_aggs(c, subs, sp, TRUE, &g->subs, &g->n_subs, err);
  g_free(sp);
  return ok;
}

static ixia_agg_t *parse_agg(pctx_t *c, const char *name, const cJSON *j, const char *path,
                             ixia_error_t **err) {
  if (!cJSON_IsObject(j) || cJSON_GetArraySize(j) != 1) {
    perr(err, path,
         "an aggregation must be an object with exactly one kind (count, sum, avg, min, max, "
         "terms, percentiles, cardinality)");
    return NULL;
  }
  if (!count_clause(c, path, err)) return NULL;
  const cJSON *body = j->child;
  ixia_agg_t *g = g_new0(ixia_agg_t, 1);
  g->name = g_strdup(name);
  gboolean known = FALSE;
  for (guint i = 0; i < G_N_ELEMENTS(agg_kind_names); i++) {
    if (strcmp(body->string, agg_kind_names[i]) == 0) {
      g->kind = (ixia_agg_kind_t)i;
      known = TRUE;
    }
  }
  char *kp = g_strdup_printf("%s.%s", path, body->string);
  static const char *const pct_extra[] = {"percents", NULL};
  gboolean ok;
  if (!known) {
    ok = perr(err, path,
              "unknown aggregation \"%s\" (count, sum, avg, min, max, terms, percentiles, "
              "cardinality)",
              body->string);
  } else if (g->kind == IXIA_AGG_COUNT) {
    ok = (cJSON_IsObject(body) && !body->child) || perr(err, kp, "count takes no arguments: {}");
  } else if (g->kind == IXIA_AGG_TERMS) {
    ok = parse_terms(c, g, body, kp, err);
  } else if (g->kind == IXIA_AGG_PERCENTILES) {
    ok = agg_field(c, g, body, kp, pct_extra, err) && parse_percents(g, body, kp, err);
  } else {
    ok = agg_field(c, g, body, kp, NULL, err);
  }
  g_free(kp);
  if (!ok) {
    agg_free(g);
    return NULL;
  }
  return g;
}

static gboolean parse_aggs(pctx_t *c, const cJSON *j, const char *path, gboolean nested,
                           ixia_agg_t ***out, guint *n_out, ixia_error_t **err) {
  if (!cJSON_IsObject(j))
    return perr(err, path, "must be an object of name -> aggregation");
  *out = g_new0(ixia_agg_t *, cJSON_GetArraySize(j) + 1);
  *n_out = 0;
  for (const cJSON *e = j->child; e; e = e->next) {
    size_t n = strlen(e->string);
    if (n == 0 || n > MAX_AGG_NAME)
      return perr(err, path, "aggregation names must be 1 to %d bytes, got %zu", MAX_AGG_NAME, n);
    char *ep = g_strdup_printf("%s.%s", path, e->string);
    gboolean ok = TRUE;
    /* Bucket objects hold "key" and "count" next to the nested results. */
    if (nested && (strcmp(e->string, "key") == 0 || strcmp(e->string, "count") == 0))
      ok = perr(err, ep, "the name '%s' is reserved inside terms buckets", e->string);
    for (guint i = 0; ok && i < *n_out; i++)
      if (strcmp((*out)[i]->name, e->string) == 0) ok = perr(err, ep, "name given twice");
    ixia_agg_t *g = ok ? parse_agg(c, e->string, e, ep, err) : NULL;
    g_free(ep);
    if (!g) return FALSE;
    (*out)[(*n_out)++] = g;
  }
  return TRUE;
}

/* ---- request ---- */

void ixia_query_destroy(ixia_query_t *q) {
  if (!q) return;
  g_free(q->ns);
  g_free(q->table);
  filter_free(q->filter);
  g_strfreev(q->fields);
  g_free(q->after);
  for (guint i = 0; i < q->n_aggs; i++) agg_free(q->aggs[i]);
  g_free(q->aggs);
  g_free(q->agg_fields);
  ixia_schema_unref(q->schema);
  g_free(q);
}

static gboolean parse_fields(ixia_query_t *q, const cJSON *j, ixia_error_t **err) {
  if (!j || cJSON_IsNull(j)) return TRUE;
  int n = cJSON_GetArraySize(j);
  if (!cJSON_IsArray(j) || n < 1 || n > MAX_FIELDS)
    return perr(err, "fields", "must be an array of 1 to %d field paths, or null", MAX_FIELDS);
  q->fields = g_new0(char *, n + 1);
  int i = 0;
  for (const cJSON *e = j->child; e; e = e->next, i++) {
    char *ep = g_strdup_printf("fields[%d]", i);
    ixia_error_t *e2 = NULL;
    gboolean ok = cJSON_IsString(e) ? ixia_field_path_valid(e->valuestring, &e2)
                                    : perr(&e2, ep, "must be a string");
    if (!ok && e2 && cJSON_IsString(e)) ixia_error_prefix(e2, "%s", ep);
    g_free(ep);
    if (!ok) return ixia_error_propagate(err, e2);
    q->fields[i] = g_strdup(e->valuestring);
  }
  return TRUE;
}

static gboolean parse_scalars(ixia_query_t *q, const cJSON *root, const ixia_query_limits_t *lim,
                              ixia_error_t **err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "limit");
  if (v && !cJSON_IsNull(v)) {
    if (!is_integer(v) || v->valuedouble < 0)
      return perr(err, "limit", "must be an integer from 0 to %u", lim->max_limit);
    if (v->valuedouble > lim->max_limit)
      return ixia_error_set(err, IXIA_ETOOLARGE,
                            "limit: %.0f is over the largest page of %u (query.max_limit)",
                            v->valuedouble, lim->max_limit);
    q->limit = (guint)v->valuedouble;
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "after");
  if (v && !cJSON_IsNull(v)) {
    if (!cJSON_IsString(v)) return perr(err, "after", "must be a cursor string or null");
    q->after = g_strdup(v->valuestring);
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "min_version");
  if (v && !cJSON_IsNull(v)) {
    if (!is_integer(v) || v->valuedouble < 0 || v->valuedouble >= 9223372036854775807.0)
      return perr(err, "min_version", "must be a non-negative integer");
    q->min_version = (gint64)v->valuedouble;
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "timeout_ms");
  if (v && !cJSON_IsNull(v)) {
    if (!is_integer(v) || v->valuedouble < 1)
      return perr(err, "timeout_ms", "must be a positive integer (milliseconds)");
    if (v->valuedouble < lim->deadline_ms) q->timeout_ms = (guint)v->valuedouble;
  }
  return parse_fields(q, cJSON_GetObjectItemCaseSensitive(root, "fields"), err);
}

static gboolean check_top_keys(const cJSON *root, ixia_error_t **err) {
  static const char *const known[] = {"namespace", "table", "filter",      "fields",    "limit",
                                      "after",     "aggs",  "min_version", "timeout_ms"};
  for (const cJSON *c = root->child; c; c = c->next) {
    gboolean k = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(known); i++) k = k || strcmp(c->string, known[i]) == 0;
    if (!k)
      return ixia_error_set(err, IXIA_EINVAL,
                            "query: unknown key \"%s\" (namespace, table, filter, fields, limit, "
                            "after, aggs, min_version, timeout_ms)",
                            c->string);
    for (const cJSON *d = root->child; d != c; d = d->next)
      if (strcmp(d->string, c->string) == 0)
        return ixia_error_set(err, IXIA_EINVAL, "query: key \"%s\" given twice", c->string);
  }
  return TRUE;
}

ixia_query_t *ixia_query_parse(const char *json, size_t len, ixia_schema_lookup_fn lookup,
                               void *lookup_ud, const ixia_query_limits_t *lim,
                               ixia_error_t **err) {
  const ixia_json_limits_t jl = {lim->max_request_bytes, "query.max_request_bytes",
                                 QUERY_MAX_DEPTH, NULL};
  cJSON *root = ixia_json_parse_object(json, len, &jl, "query", err);
  if (!root) return NULL;
  ixia_query_t *q = g_new0(ixia_query_t, 1);
  q->limit = 10;
  q->timeout_ms = lim->deadline_ms;
  const cJSON *ns = cJSON_GetObjectItemCaseSensitive(root, "namespace");
  const cJSON *table = cJSON_GetObjectItemCaseSensitive(root, "table");
  gboolean ok = check_top_keys(root, err);
  if (ok && !cJSON_IsString(ns)) ok = perr(err, "namespace", "required, must be a string");
  if (ok && !cJSON_IsString(table)) ok = perr(err, "table", "required, must be a string");
  ok = ok && parse_scalars(q, root, lim, err);
  if (ok) {
    q->ns = g_strdup(ns->valuestring);
    q->table = g_strdup(table->valuestring);
    q->schema = lookup(q->ns, q->table, lookup_ud, err);
    if (!q->schema)
      ok = ixia_error_set(err, IXIA_ENOTFOUND, "table %s.%s not found", q->ns, q->table);
  }
  pctx_t c = {q->schema, lim, 0, g_ptr_array_new()};
  const cJSON *filter = cJSON_GetObjectItemCaseSensitive(root, "filter");
  if (ok && filter && !cJSON_IsNull(filter))
    ok = (q->filter = parse_filter(&c, filter, "filter", err)) != NULL;
  const cJSON *aggs = cJSON_GetObjectItemCaseSensitive(root, "aggs");
  if (ok && aggs && !cJSON_IsNull(aggs))
    ok = parse_aggs(&c, aggs, "aggs", FALSE, &q->aggs, &q->n_aggs, err);
  q->n_agg_fields = c.agg_fields->len;
  q->agg_fields = (const ixia_index_t **)g_ptr_array_free(c.agg_fields, FALSE);
  cJSON_Delete(root);
  if (!ok) {
    ixia_query_destroy(q);
    return NULL;
  }
  return q;
}

/* ======================================================================
 * Brute-force evaluation
 * ====================================================================== */

/* Whether b is among the sorted, deduplicated values. */
static gboolean values_contain(const GPtrArray *sorted, GBytes *b) {
  guint lo = 0, hi = sorted->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    int c = g_bytes_compare(sorted->pdata[mid], b);
    if (c == 0) return TRUE;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return FALSE;
}

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
      if (!values_contain(vals, f->values->pdata[i])) return FALSE;
    return TRUE;
  }
  for (guint i = 0; i < vals->len; i++) {
    GBytes *v = vals->pdata[i];
    gsize vlen;
    const guint8 *vp = g_bytes_get_data(v, &vlen);
    switch (f->kind) {
      case IXIA_F_TERM:
      case IXIA_F_IN:
        if (values_contain(f->values, v)) return TRUE;
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

static gboolean filter_matches(const ixia_filter_t *f, const cJSON *doc) {
  switch (f->kind) {
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
      GPtrArray *vals = lenient_values(doc, f->field);
      gboolean m = leaf_matches(f, vals);
      g_ptr_array_free(vals, TRUE);
      return m;
    }
  }
}

gboolean ixia_query_match_doc(const ixia_query_t *q, const cJSON *doc) {
  return !q->filter || filter_matches(q->filter, doc);
}

/* ======================================================================
 * Aggregation state
 * ====================================================================== */

/* Exact sums: Shewchuk's non-overlapping partials (as Python's math.fsum),
 * so the result is the correctly rounded sum whatever the order of the
 * values, and shards' partials merge without any loss. */
enum { SUM_POS_INF = 1, SUM_NEG_INF = 2, SUM_NAN = 4, SUM_OVERFLOW = 8 };

typedef struct {
  double *parts; /* increasing magnitude; NULL until the first value */
  guint16 n, cap; /* a partial uses at least one bit of the 2098 a double spans */
  guint special;
} fsum_t;

/* Percentile histogram: the bucket of |x| is ceil(log_gamma |x|), whose
 * midpoint (in relative terms) is within PCT_ALPHA of every value in it. */
#define PCT_ALPHA 0.009
#define PCT_MAX_INDEX 50000 /* beyond log_gamma(DBL_MAX); clamps infinities */

typedef struct {
  gint32 off;     /* bucket index of counts[0] */
  GArray *counts; /* guint64 */
} dense_t;

typedef struct {
  GArray *exact;      /* double; NULL once converted to the histogram */
  guint64 exact_acct; /* bytes accounted for `exact` */
  guint64 zero;       /* histogram: values == 0 */
  dense_t pos, neg;   /* histogram: positive values, negative values by |x| */
  double min, max;    /* of every value, to clamp histogram estimates */
} pct_t;

typedef struct agg_state {
  guint64 n; /* COUNT: documents; metrics: values read */
  union {
    fsum_t sum;          /* SUM, AVG */
    double ext;          /* MIN, MAX */
    pct_t *pct;          /* PERCENTILES */
    GHashTable *hashes;  /* CARDINALITY: set of 64-bit hashes stored as pointers */
    GHashTable *buckets; /* TERMS: set of bucket_t, keyed through their term_key_t */
  } u;
} agg_state_t;

typedef struct {
  guint hash;
  guint32 len;
  const guint8 *p;
} term_key_t;

typedef struct {
  term_key_t key;    /* first, so the table hashes buckets and lookup keys alike */
  guint64 count;
  guint64 last_doc;  /* the document that last counted here: once per document */
  agg_state_t *subs; /* n_subs, in the same allocation, followed by the key bytes */
} bucket_t;

#define CARD_ENTRY_BYTES 24
#define BUCKET_OVERHEAD 32 /* the hash table's slot */

struct ixia_aggs {
  const ixia_query_t *q;
  ixia_query_limits_t lim;
  agg_state_t *top; /* one per q->aggs[i] */
  guint64 mem;
  guint64 doc_seq;
  ixia_code_t fail_code; /* IXIA_OK until a limit was hit */
  char *fail_msg;
  double log_gamma;
};

static gboolean fail(ixia_aggs_t *a, ixia_error_t **err, ixia_code_t code, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
static gboolean fail(ixia_aggs_t *a, ixia_error_t **err, ixia_code_t code, const char *fmt, ...) {
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

static gboolean mem_grow(ixia_aggs_t *a, guint64 bytes, ixia_error_t **err) {
  a->mem += bytes;
  if (a->mem <= a->lim.max_memory_bytes) return TRUE;
  return fail(a, err, IXIA_ETOOLARGE,
              "aggregations need more than %" G_GUINT64_FORMAT
              " MiB of memory (query.max_memory_mb)",
              a->lim.max_memory_bytes >> 20);
}

/* ---- exact sums ---- */

static gboolean fsum_add(ixia_aggs_t *a, fsum_t *s, double x, ixia_error_t **err) {
  if (!isfinite(x)) {
    s->special |= isnan(x) ? SUM_NAN : x > 0 ? SUM_POS_INF : SUM_NEG_INF;
    return TRUE;
  }
  if (s->special & SUM_OVERFLOW) return TRUE;
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
    return TRUE;
  }
  if (i < s->cap) {
    p[i] = x;
    s->n = (guint16)(i + 1);
    return TRUE;
  }
  guint16 cap = s->cap ? (guint16)(s->cap * 2) : 4;
  s->parts = g_renew(double, s->parts, cap);
  s->parts[i] = x;
  s->n = (guint16)(i + 1);
  guint64 more = (guint64)(cap - s->cap) * sizeof(double);
  s->cap = cap;
  return mem_grow(a, more, err);
}

static double fsum_result(const fsum_t *s) {
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

/* ---- percentiles ---- */

static gint32 hist_index(const ixia_aggs_t *a, double ax) {
  double i = ceil(log(ax) / a->log_gamma);
  if (!(i < PCT_MAX_INDEX)) return PCT_MAX_INDEX;
  if (i < -PCT_MAX_INDEX) return -PCT_MAX_INDEX;
  return (gint32)i;
}

static gboolean dense_add(ixia_aggs_t *a, dense_t *d, gint32 idx, guint64 by, ixia_error_t **err) {
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
  return after == before || mem_grow(a, (after - before) * sizeof(guint64), err);
}

static gboolean hist_add(ixia_aggs_t *a, pct_t *p, double x, guint64 by, ixia_error_t **err) {
  if (x == 0) {
    p->zero += by;
    return TRUE;
  }
  return dense_add(a, x > 0 ? &p->pos : &p->neg, hist_index(a, fabs(x)), by, err);
}

static gboolean pct_to_hist(ixia_aggs_t *a, pct_t *p, ixia_error_t **err) {
  if (!p->exact) return TRUE;
  GArray *ex = p->exact;
  p->exact = NULL;
  a->mem -= MIN(a->mem, p->exact_acct);
  p->exact_acct = 0;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < ex->len; i++) ok = hist_add(a, p, g_array_index(ex, double, i), 1, err);
  g_array_free(ex, TRUE);
  return ok;
}

static gboolean pct_add_exact(ixia_aggs_t *a, pct_t *p, const double *v, guint n,
                              ixia_error_t **err) {
  g_array_append_vals(p->exact, v, n);
  /* GArray grows to powers of two: account for what it really holds. */
  guint64 need = (guint64)p->exact->len * sizeof(double);
  if (need <= p->exact_acct) return TRUE;
  guint64 cap = MAX(p->exact_acct, 16);
  while (cap < need) cap <<= 1;
  guint64 more = cap - p->exact_acct;
  p->exact_acct = cap;
  return mem_grow(a, more, err);
}

static gboolean pct_add(ixia_aggs_t *a, agg_state_t *st, double x, ixia_error_t **err) {
  pct_t *p = st->u.pct;
  if (st->n == 0 || x < p->min) p->min = x;
  if (st->n == 0 || x > p->max) p->max = x;
  st->n++;
  if (p->exact && st->n <= a->lim.max_exact_values) return pct_add_exact(a, p, &x, 1, err);
  return pct_to_hist(a, p, err) && hist_add(a, p, x, 1, err);
}

static int double_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The rank-th smallest value (1-based) of the histogram. */
static double hist_rank(const ixia_aggs_t *a, const pct_t *p, guint64 rank) {
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

static void state_init(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st);
static void state_clear(const ixia_agg_t *g, agg_state_t *st);

static guint key_hash(gconstpointer k) { return ((const term_key_t *)k)->hash; }

static gboolean key_equal(gconstpointer x, gconstpointer y) {
  const term_key_t *a = x, *b = y;
  return a->len == b->len && memcmp(a->p, b->p, a->len) == 0;
}

static void state_init(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st) {
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
    case IXIA_AGG_TERMS:
      st->u.buckets = g_hash_table_new(key_hash, key_equal);
      a->mem += 64;
      break;
    default:
      break;
  }
}

static void state_clear(const ixia_agg_t *g, agg_state_t *st) {
  switch (g->kind) {
    case IXIA_AGG_SUM:
    case IXIA_AGG_AVG:
      g_free(st->u.sum.parts);
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
    case IXIA_AGG_TERMS: {
      GHashTableIter it;
      gpointer k;
      g_hash_table_iter_init(&it, st->u.buckets);
      while (g_hash_table_iter_next(&it, &k, NULL)) {
        bucket_t *b = k;
        for (guint i = 0; i < g->n_subs; i++) state_clear(g->subs[i], &b->subs[i]);
        g_free(b);
      }
      g_hash_table_destroy(st->u.buckets);
      break;
    }
    default:
      break;
  }
}

static bucket_t *bucket_get(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                            const guint8 *p, guint32 len, guint hash, ixia_error_t **err) {
  term_key_t k = {hash, len, p};
  bucket_t *b = g_hash_table_lookup(st->u.buckets, &k);
  if (b) return b;
  if (g_hash_table_size(st->u.buckets) >= a->lim.max_terms_buckets) {
    fail(a, err, IXIA_ETOOLARGE,
         "terms aggregation '%s' has more than %u buckets (query.max_terms_buckets)", g->name,
         a->lim.max_terms_buckets);
    return NULL;
  }
  gsize subs_bytes = g->n_subs * sizeof(agg_state_t);
  gsize size = sizeof(bucket_t) + subs_bytes + len;
  b = g_malloc0(size);
  b->subs = (agg_state_t *)(b + 1);
  guint8 *kb = (guint8 *)b->subs + subs_bytes;
  memcpy(kb, p, len);
  b->key = (term_key_t){hash, len, kb};
  for (guint i = 0; i < g->n_subs; i++) state_init(a, g->subs[i], &b->subs[i]);
  g_hash_table_add(st->u.buckets, b);
  return mem_grow(a, size + BUCKET_OVERHEAD, err) ? b : NULL;
}

static gboolean state_add(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                          const ixia_val_t *const *vals, const guint *nvals, ixia_error_t **err) {
  if (g->kind == IXIA_AGG_COUNT) {
    st->n++;
    return TRUE;
  }
  const ixia_val_t *v = vals[g->field_slot];
  guint nv = nvals[g->field_slot];
  for (guint i = 0; i < nv; i++) {
    if (g->kind == IXIA_AGG_CARDINALITY) {
      guint64 h = XXH3_64bits(v[i].p, v[i].len);
      if (g_hash_table_add(st->u.hashes, GSIZE_TO_POINTER(h)) &&
          !mem_grow(a, CARD_ENTRY_BYTES, err))
        return FALSE;
      continue;
    }
    if (g->kind == IXIA_AGG_TERMS) {
      guint hash = (guint)XXH3_64bits(v[i].p, v[i].len);
      bucket_t *b = bucket_get(a, g, st, v[i].p, v[i].len, hash, err);
      if (!b) return FALSE;
      if (b->last_doc == a->doc_seq) continue;
      b->last_doc = a->doc_seq;
      b->count++;
      for (guint j = 0; j < g->n_subs; j++)
        if (!state_add(a, g->subs[j], &b->subs[j], vals, nvals, err)) return FALSE;
      continue;
    }
    if (v[i].len != IXIA_NUM_BYTES) continue; /* not a number: absent */
    double x = ixia_num_decode(v[i].p);
    switch (g->kind) {
      case IXIA_AGG_SUM:
      case IXIA_AGG_AVG:
        st->n++;
        if (!fsum_add(a, &st->u.sum, x, err)) return FALSE;
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
  for (guint i = 0; i < q->n_aggs; i++) state_init(a, q->aggs[i], &a->top[i]);
  return a;
}

void ixia_aggs_destroy(ixia_aggs_t *a) {
  if (!a) return;
  for (guint i = 0; i < a->q->n_aggs; i++) state_clear(a->q->aggs[i], &a->top[i]);
  g_free(a->top);
  g_free(a->fail_msg);
  g_free(a);
}

guint64 ixia_aggs_memory(const ixia_aggs_t *a) { return a->mem; }

static gboolean check_usable(const ixia_aggs_t *a, ixia_error_t **err) {
  if (a->fail_code == IXIA_OK) return TRUE;
  return ixia_error_set(err, a->fail_code, "%s", a->fail_msg);
}

gboolean ixia_aggs_add(ixia_aggs_t *a, const ixia_val_t *const *vals, const guint *nvals,
                       ixia_error_t **err) {
  if (!check_usable(a, err)) return FALSE;
  a->doc_seq++;
  for (guint i = 0; i < a->q->n_aggs; i++)
    if (!state_add(a, a->q->aggs[i], &a->top[i], vals, nvals, err)) return FALSE;
  return TRUE;
}

gboolean ixia_aggs_add_doc(ixia_aggs_t *a, const cJSON *doc, ixia_error_t **err) {
  guint n = a->q->n_agg_fields;
  GPtrArray **per = g_new0(GPtrArray *, MAX(n, 1));
  ixia_val_t **vals = g_new0(ixia_val_t *, MAX(n, 1));
  guint *nvals = g_new0(guint, MAX(n, 1));
  for (guint i = 0; i < n; i++) {
    per[i] = lenient_values(doc, a->q->agg_fields[i]);
    nvals[i] = per[i]->len;
    vals[i] = g_new0(ixia_val_t, MAX(nvals[i], 1));
    for (guint j = 0; j < nvals[i]; j++) {
      gsize len;
      vals[i][j].p = g_bytes_get_data(per[i]->pdata[j], &len);
      vals[i][j].len = (guint32)len;
    }
  }
  gboolean ok = ixia_aggs_add(a, (const ixia_val_t *const *)vals, nvals, err);
  for (guint i = 0; i < n; i++) {
    g_ptr_array_free(per[i], TRUE);
    g_free(vals[i]);
  }
  g_free(per);
  g_free(vals);
  g_free(nvals);
  return ok;
}

/* ======================================================================
 * Partials: JSON numbers only for counts (exact below 10^15); doubles, hashes
 * and keys as base64 of big-endian bytes, since cJSON may print a double
 * with 15 significant digits when that is "close enough".
 * ====================================================================== */

static void put_be64(guint8 *out, guint64 v) {
  for (int i = 7; i >= 0; i--, v >>= 8) out[i] = (guint8)v;
}

static guint64 get_be64(const guint8 *p) {
  guint64 v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | p[i];
  return v;
}

static cJSON *b64_json(const guint8 *p, gsize len) {
  static const guint8 none = 0;
  char *s = g_base64_encode(len ? p : &none, len);
  cJSON *j = cJSON_CreateString(s);
  g_free(s);
  return j;
}

/* 64-bit words (doubles as their bits) packed as base64. */
static cJSON *b64_words(const guint64 *w, gsize n) {
  guint8 *buf = g_malloc(MAX(n, 1) * 8);
  for (gsize i = 0; i < n; i++) put_be64(buf + 8 * i, w[i]);
  cJSON *j = b64_json(buf, n * 8);
  g_free(buf);
  return j;
}

static guint64 dbits(double d) {
  guint64 b;
  memcpy(&b, &d, 8);
  return b;
}

static double bitsd(guint64 b) {
  double d;
  memcpy(&d, &b, 8);
  return d;
}

static cJSON *b64_doubles(const double *v, gsize n) {
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
      cJSON_AddItemToObject(o, "s", b64_doubles(st->u.sum.parts, st->u.sum.n));
      cJSON_AddNumberToObject(o, "x", st->u.sum.special);
      break;
    }
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX:
      if (st->n) cJSON_AddItemToObject(o, "v", b64_doubles(&st->u.ext, 1));
      break;
    case IXIA_AGG_PERCENTILES: {
      const pct_t *p = st->u.pct;
      double mm[2] = {p->min, p->max};
      cJSON_AddItemToObject(o, "mm", b64_doubles(mm, 2));
      if (p->exact) {
        cJSON_AddItemToObject(o, "e", b64_doubles((const double *)p->exact->data, p->exact->len));
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
    case IXIA_AGG_TERMS: {
      cJSON *arr = cJSON_AddArrayToObject(o, "b");
      GHashTableIter it;
      gpointer k;
      g_hash_table_iter_init(&it, st->u.buckets);
      while (g_hash_table_iter_next(&it, &k, NULL)) {
        const bucket_t *b = k;
        cJSON *bj = cJSON_CreateObject();
        cJSON_AddItemToObject(bj, "k", b64_json(b->key.p, b->key.len));
        cJSON_AddNumberToObject(bj, "n", (double)b->count);
        cJSON *subs = cJSON_AddObjectToObject(bj, "s");
        for (guint i = 0; i < g->n_subs; i++)
          cJSON_AddItemToObject(subs, g->subs[i]->name, state_partial(g->subs[i], &b->subs[i]));
        cJSON_AddItemToArray(arr, bj);
      }
      break;
    }
    default:
      break;
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

static gboolean bad_partial(ixia_error_t **err, const char *path, const char *what) {
  return ixia_error_set(err, IXIA_EINVAL, "aggregation partial: %s: %s", path, what);
}

static gboolean get_count(const cJSON *o, const char *key, guint64 *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!is_integer(v) || v->valuedouble < 0 || v->valuedouble > MAX_SAFE_INT) return FALSE;
  *out = (guint64)v->valuedouble;
  return TRUE;
}

/* Decodes a base64 member into 64-bit words (g_free). */
static guint64 *get_words(const cJSON *o, const char *key, gsize *n) {
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
  for (gsize i = 0; i < *n; i++) w[i] = get_be64(raw + 8 * i);
  g_free(raw);
  return w;
}

static gboolean merge_dense(ixia_aggs_t *a, dense_t *d, const cJSON *j, const char *path,
                            ixia_error_t **err) {
  gsize n = 0;
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(j, "off");
  guint64 *w = is_integer(off) && fabs(off->valuedouble) <= PCT_MAX_INDEX
                   ? get_words(j, "c", &n)
                   : NULL;
  if (!w) return bad_partial(err, path, "malformed histogram");
  gboolean ok = TRUE;
  for (gsize i = 0; ok && i < n; i++) {
    gint64 idx = (gint64)off->valuedouble + (gint64)i;
    if (idx > PCT_MAX_INDEX) ok = bad_partial(err, path, "histogram index out of range");
    else if (w[i]) ok = dense_add(a, d, (gint32)idx, w[i], err);
  }
  g_free(w);
  return ok;
}

static gboolean merge_pct(ixia_aggs_t *a, agg_state_t *st, const cJSON *j, guint64 n,
                          const char *path, ixia_error_t **err) {
  pct_t *p = st->u.pct;
  gsize nmm = 0, ne = 0;
  guint64 *mm = get_words(j, "mm", &nmm);
  gboolean ok = mm && nmm == 2;
  if (ok && n > 0) {
    double lo = bitsd(mm[0]), hi = bitsd(mm[1]);
    if (st->n == 0 || lo < p->min) p->min = lo;
    if (st->n == 0 || hi > p->max) p->max = hi;
  }
  g_free(mm);
  if (!ok) return bad_partial(err, path, "malformed percentiles");
  guint64 total = st->n + n;
  st->n = total;
  if (cJSON_GetObjectItemCaseSensitive(j, "e")) {
    guint64 *w = get_words(j, "e", &ne);
    if (!w || ne != n) {
      g_free(w);
      return bad_partial(err, path, "malformed exact values");
    }
    double *v = g_new(double, MAX(ne, 1));
    for (gsize i = 0; i < ne; i++) v[i] = bitsd(w[i]);
    g_free(w);
    if (p->exact && total <= a->lim.max_exact_values) {
      ok = pct_add_exact(a, p, v, (guint)ne, err);
    } else {
      ok = pct_to_hist(a, p, err);
      for (gsize i = 0; ok && i < ne; i++) ok = hist_add(a, p, v[i], 1, err);
    }
    g_free(v);
    return ok;
  }
  guint64 zero;
  const cJSON *pos = cJSON_GetObjectItemCaseSensitive(j, "pos");
  const cJSON *neg = cJSON_GetObjectItemCaseSensitive(j, "neg");
  if (!get_count(j, "z", &zero) || !cJSON_IsObject(pos) || !cJSON_IsObject(neg))
    return bad_partial(err, path, "malformed histogram");
  if (!pct_to_hist(a, p, err)) return FALSE;
  p->zero += zero;
  return merge_dense(a, &p->pos, pos, path, err) && merge_dense(a, &p->neg, neg, path, err);
}

static gboolean state_merge(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                            const cJSON *j, const char *path, ixia_error_t **err);

static gboolean merge_terms(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st, const cJSON *j,
                            const char *path, ixia_error_t **err) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "b");
  if (!cJSON_IsArray(arr)) return bad_partial(err, path, "terms without buckets");
  for (const cJSON *bj = arr->child; bj; bj = bj->next) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(bj, "k");
    const cJSON *subs = cJSON_GetObjectItemCaseSensitive(bj, "s");
    guint64 count;
    if (!cJSON_IsString(k) || !get_count(bj, "n", &count) || !cJSON_IsObject(subs))
      return bad_partial(err, path, "malformed bucket");
    gsize len = 0;
    guint8 *key = g_base64_decode(k->valuestring, &len);
    guint hash = (guint)XXH3_64bits(key, len);
    bucket_t *b = bucket_get(a, g, st, key, (guint32)len, hash, err);
    g_free(key);
    if (!b) return FALSE;
    b->count += count;
    for (guint i = 0; i < g->n_subs; i++) {
      const cJSON *sj = cJSON_GetObjectItemCaseSensitive(subs, g->subs[i]->name);
      char *sp = g_strdup_printf("%s.%s", path, g->subs[i]->name);
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
  if (!cJSON_IsObject(j) || !get_count(j, "n", &n))
    return bad_partial(err, path, "missing or malformed");
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
      w = get_words(j, "s", &nw);
      if (!w || !get_count(j, "x", &special)) {
        ok = bad_partial(err, path, "malformed sum");
        break;
      }
      st->n += n;
      st->u.sum.special |= (guint)special;
      for (gsize i = 0; ok && i < nw; i++) ok = fsum_add(a, &st->u.sum, bitsd(w[i]), err);
      break;
    }
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX: {
      if (n == 0) break;
      w = get_words(j, "v", &nw);
      if (!w || nw != 1) {
        ok = bad_partial(err, path, "malformed value");
        break;
      }
      double x = bitsd(w[0]);
      gboolean better = g->kind == IXIA_AGG_MIN ? x < st->u.ext : x > st->u.ext;
      if (st->n == 0 || better) st->u.ext = x;
      st->n += n;
      break;
    }
    case IXIA_AGG_PERCENTILES:
      ok = merge_pct(a, st, j, n, path, err);
      break;
    case IXIA_AGG_CARDINALITY:
      w = get_words(j, "h", &nw);
      if (!w) ok = bad_partial(err, path, "malformed hashes");
      for (gsize i = 0; ok && i < nw; i++)
        if (g_hash_table_add(st->u.hashes, GSIZE_TO_POINTER(w[i])))
          ok = mem_grow(a, CARD_ENTRY_BYTES, err);
      break;
    case IXIA_AGG_TERMS:
      ok = merge_terms(a, g, st, j, path, err);
      break;
  }
  g_free(w);
  return ok;
}

gboolean ixia_aggs_merge_partial(ixia_aggs_t *a, const cJSON *partial, ixia_error_t **err) {
  if (!check_usable(a, err)) return FALSE;
  if (!cJSON_IsObject(partial)) return bad_partial(err, "aggs", "must be an object");
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
static void percent_key(double p, char buf[32]) {
  g_ascii_formatd(buf, 32, "%.15g", p);
  if (g_ascii_strtod(buf, NULL) != p) g_ascii_formatd(buf, 32, "%.17g", p);
}

static gint bucket_order(gconstpointer x, gconstpointer y) {
  const bucket_t *a = *(const bucket_t *const *)x, *b = *(const bucket_t *const *)y;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return val_cmp(a->key.p, a->key.len, b->key.p, b->key.len);
}

static cJSON *state_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st);

static cJSON *pct_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st) {
  const pct_t *p = st->u.pct;
  double *sorted = NULL;
  if (p->exact && st->n > 0) {
    sorted = g_memdup2(p->exact->data, p->exact->len * sizeof(double));
    qsort(sorted, p->exact->len, sizeof(double), double_cmp);
  }
  cJSON *o = cJSON_CreateObject();
  cJSON *vals = cJSON_AddObjectToObject(o, "values");
  for (guint i = 0; i < g->n_percents; i++) {
    char key[32];
    percent_key(g->percents[i], key);
    if (st->n == 0) {
      cJSON_AddNullToObject(vals, key);
      continue;
    }
    /* p * n / 100 rather than p / 100 * n: exact for integer percents. */
    guint64 rank = (guint64)ceil(g->percents[i] * (double)st->n / 100.0);
    rank = CLAMP(rank, 1, st->n);
    double v = sorted ? sorted[rank - 1] : hist_rank(a, p, rank);
    cJSON_AddNumberToObject(vals, key, v);
  }
  cJSON_AddBoolToObject(o, "exact", p->exact != NULL);
  g_free(sorted);
  return o;
}

static cJSON *terms_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st) {
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
    for (guint s = 0; s < g->n_subs; s++)
      cJSON_AddItemToObject(bj, g->subs[s]->name, state_result(a, g->subs[s], &b->subs[s]));
    cJSON_AddItemToArray(arr, bj);
  }
  cJSON_AddNumberToObject(o, "other_count", (double)other);
  g_ptr_array_free(bs, TRUE);
  return o;
}

static cJSON *state_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st) {
  switch (g->kind) {
    case IXIA_AGG_COUNT:
      return value_obj(cJSON_CreateNumber((double)st->n));
    case IXIA_AGG_SUM:
      return value_obj(cJSON_CreateNumber(fsum_result(&st->u.sum)));
    case IXIA_AGG_AVG:
      return value_obj(st->n ? cJSON_CreateNumber(fsum_result(&st->u.sum) / (double)st->n)
                             : cJSON_CreateNull());
    case IXIA_AGG_MIN:
    case IXIA_AGG_MAX:
      return value_obj(st->n ? cJSON_CreateNumber(st->u.ext) : cJSON_CreateNull());
    case IXIA_AGG_PERCENTILES:
      return pct_result(a, g, st);
    case IXIA_AGG_CARDINALITY:
      return value_obj(cJSON_CreateNumber(g_hash_table_size(st->u.hashes)));
    case IXIA_AGG_TERMS:
      return terms_result(a, g, st);
  }
  return cJSON_CreateNull();
}

cJSON *ixia_aggs_result_json(const ixia_aggs_t *a) {
  cJSON *o = cJSON_CreateObject();
  for (guint i = 0; i < a->q->n_aggs; i++)
    cJSON_AddItemToObject(o, a->q->aggs[i]->name, state_result(a, a->q->aggs[i], &a->top[i]));
  return o;
}
