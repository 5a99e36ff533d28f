/* Table schemas (schema.h): parsing, validation, evolution checks and
 * per-document type checks.
 *
 * A schema is parsed once into an immutable, reference-counted
 * ixia_schema_t that threads share; every check that can refuse a schema or
 * a document names the field and the rule it broke. */
#include "schema.h"

#include <stdatomic.h>
#include <libstemmer.h>
#include <math.h>
#include <string.h>

#include "bytes.h"
#include "json.h"
#include "timeutil.h"

static const char *const type_names[] = {"keyword", "text", "long", "double", "bool", "timestamp"};

const char *ixia_field_type_name(ixia_field_type_t t) { return type_names[t]; }

gboolean ixia_field_type_parse(const char *name, ixia_field_type_t *out) {
  for (guint i = 0; i < G_N_ELEMENTS(type_names); i++) {
    if (strcmp(name, type_names[i]) == 0) {
      *out = (ixia_field_type_t)i;
      return TRUE;
    }
  }
  return FALSE;
}

gboolean ixia_analyzer_valid(const char *name) {
  if (!name) return FALSE;
  if (strcmp(name, IXIA_ANALYZER_STANDARD) == 0) return TRUE;
  for (const char **l = sb_stemmer_list(); *l; l++)
    if (strcmp(*l, name) == 0) return TRUE;
  return FALSE;
}

const char *ixia_analyzer_names(void) {
  static gsize once;
  static char *names;
  if (g_once_init_enter(&once)) {
    GString *s = g_string_new(IXIA_ANALYZER_STANDARD);
    for (const char **l = sb_stemmer_list(); *l; l++) g_string_append_printf(s, ", %s", *l);
    names = g_string_free(s, FALSE);
    g_once_init_leave(&once, 1);
  }
  return names;
}

gboolean ixia_name_valid(const char *name, const char *what, ixia_error_t **err) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > 64)
    return ixia_error_set(err, IXIA_EINVAL, "%s must be 1 to 64 characters, got %zu", what, n);
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!g_ascii_isalnum(c) && c != '_' && c != '-')
      return ixia_error_set(err, IXIA_EINVAL,
                            "%s '%s' has character '%c' at %zu; use only A-Z a-z 0-9 _ -", what,
                            name, g_ascii_isprint(c) ? c : '?', i);
  }
  return TRUE;
}

static gboolean get_nonneg_int(const cJSON *root, const char *name, gint64 *out,
                               ixia_error_t **err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
  *out = 0;
  if (!v || cJSON_IsNull(v)) return TRUE;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
      v->valuedouble > 1e12)
    return ixia_error_set(err, IXIA_EINVAL, "schema: %s must be a non-negative integer", name);
  *out = (gint64)v->valuedouble;
  return TRUE;
}

static gboolean field_path_valid(const char *f) {
  if (!*f || f[0] == '.' || f[strlen(f) - 1] == '.' || strstr(f, "..")) return FALSE;
  return strlen(f) <= 256;
}

gboolean ixia_field_path_valid(const char *path, ixia_error_t **err) {
  if (!path || !field_path_valid(path))
    return ixia_error_set(err, IXIA_EINVAL,
                          "bad field path '%s': use dotted names like price or seller.country",
                          path ? path : "(null)");
  return TRUE;
}

ixia_schema_t *ixia_schema_parse(const char *json, size_t len, ixia_error_t **err) {
  const ixia_json_limits_t jl = {1 << 20, NULL, 8, NULL};
  cJSON *root = ixia_json_parse_object(json, len, &jl, "schema", err);
  if (!root) return NULL;
  ixia_schema_t *s = g_new0(ixia_schema_t, 1);
  s->refcount = 1;
  const cJSON *ns = cJSON_GetObjectItemCaseSensitive(root, "namespace");
  const cJSON *table = cJSON_GetObjectItemCaseSensitive(root, "table");
  const cJSON *indexes = cJSON_GetObjectItemCaseSensitive(root, "indexes");
  gboolean ok = TRUE;
  static const char *const known[] = {"namespace", "table", "ttl_seconds", "cache_ttl_seconds",
                                      "indexes"};
  for (const cJSON *c = root->child; ok && c; c = c->next) {
    gboolean k = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(known); i++) k = k || strcmp(c->string, known[i]) == 0;
    if (!k) ok = ixia_error_set(err, IXIA_EINVAL, "schema: unknown member '%s'", c->string);
  }
  if (ok && !cJSON_IsString(ns))
    ok = ixia_error_set(err, IXIA_EINVAL, "schema: \"namespace\" must be a string");
  if (ok && !cJSON_IsString(table))
    ok = ixia_error_set(err, IXIA_EINVAL, "schema: \"table\" must be a string");
  ok = ok && ixia_name_valid(ns->valuestring, "namespace", err) &&
       ixia_name_valid(table->valuestring, "table", err);
  ok = ok && get_nonneg_int(root, "ttl_seconds", &s->ttl_seconds, err) &&
       get_nonneg_int(root, "cache_ttl_seconds", &s->cache_ttl_seconds, err);
  if (ok && indexes && !cJSON_IsArray(indexes))
    ok = ixia_error_set(err, IXIA_EINVAL, "schema: \"indexes\" must be an array");
  if (ok) {
    s->ns = g_strdup(ns->valuestring);
    s->table = g_strdup(table->valuestring);
    s->n_indexes = (guint)cJSON_GetArraySize(indexes);
    s->indexes = g_new0(ixia_schema_field_t, s->n_indexes + 1);
  }
  guint i = 0;
  for (const cJSON *ix = indexes ? indexes->child : NULL; ok && ix; ix = ix->next, i++) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(ix, "field");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(ix, "type");
    const cJSON *an = cJSON_GetObjectItemCaseSensitive(ix, "analyzer");
    const cJSON *pos = cJSON_GetObjectItemCaseSensitive(ix, "positions");
    if (!cJSON_IsObject(ix) || !cJSON_IsString(f) || !cJSON_IsString(t)) {
      ok = ixia_error_set(err, IXIA_EINVAL,
                          "schema: indexes[%u] must be {\"field\": \"...\", \"type\": \"...\"}", i);
      break;
    }
    for (const cJSON *m = ix->child; ok && m; m = m->next)
      if (strcmp(m->string, "field") && strcmp(m->string, "type") && strcmp(m->string, "analyzer") &&
          strcmp(m->string, "positions"))
        ok = ixia_error_set(err, IXIA_EINVAL,
                            "schema: indexes[%u]: unknown member '%s' (field, type, analyzer, positions)",
                            i, m->string);
    if (!ok) break;
    if (!field_path_valid(f->valuestring)) {
      ok = ixia_error_set(err, IXIA_EINVAL, "schema: indexes[%u]: bad field path '%s'", i,
                          f->valuestring);
      break;
    }
    if (!ixia_field_type_parse(t->valuestring, &s->indexes[i].type)) {
      ok = ixia_error_set(err, IXIA_EINVAL,
                          "schema: indexes[%u]: unknown type '%s' (keyword, text, long, double, "
                          "bool, timestamp)",
                          i, t->valuestring);
      break;
    }
    gboolean text = s->indexes[i].type == IXIA_FIELD_TEXT;
    if ((an || pos) && !text) {
      ok = ixia_error_set(err, IXIA_EINVAL,
                          "schema: indexes[%u]: \"%s\" applies to text fields only; '%s' is %s", i,
                          an ? "analyzer" : "positions", f->valuestring, t->valuestring);
      break;
    }
    if (an && (!cJSON_IsString(an) || !ixia_analyzer_valid(an->valuestring))) {
      ok = ixia_error_set(err, IXIA_EINVAL, "schema: indexes[%u]: unknown analyzer %s%s%s (%s)", i,
                          cJSON_IsString(an) ? "'" : "", cJSON_IsString(an) ? an->valuestring : "(not a string)",
                          cJSON_IsString(an) ? "'" : "", ixia_analyzer_names());
      break;
    }
    if (pos && !cJSON_IsBool(pos)) {
      ok = ixia_error_set(err, IXIA_EINVAL, "schema: indexes[%u]: \"positions\" must be true or false", i);
      break;
    }
    if (text) s->indexes[i].analyzer = g_strdup(an ? an->valuestring : IXIA_ANALYZER_STANDARD);
    s->indexes[i].positions = cJSON_IsTrue(pos);
    for (guint j = 0; j < i; j++) {
      if (strcmp(s->indexes[j].field, f->valuestring) == 0) {
        ok = ixia_error_set(err, IXIA_EINVAL, "schema: field '%s' is declared twice",
                            f->valuestring);
        break;
      }
    }
    s->indexes[i].field = g_strdup(f->valuestring);
  }
  if (ok) {
    /* Canonical text: members in a fixed order, nothing unknown. */
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "namespace", s->ns);
    cJSON_AddStringToObject(c, "table", s->table);
    cJSON_AddNumberToObject(c, "ttl_seconds", (double)s->ttl_seconds);
    cJSON_AddNumberToObject(c, "cache_ttl_seconds", (double)s->cache_ttl_seconds);
    cJSON *arr = cJSON_AddArrayToObject(c, "indexes");
    for (guint j = 0; j < s->n_indexes; j++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "field", s->indexes[j].field);
      cJSON_AddStringToObject(o, "type", type_names[s->indexes[j].type]);
      const char *an = s->indexes[j].analyzer;
      if (an && strcmp(an, IXIA_ANALYZER_STANDARD) != 0) cJSON_AddStringToObject(o, "analyzer", an);
      if (s->indexes[j].positions) cJSON_AddTrueToObject(o, "positions");
      cJSON_AddItemToArray(arr, o);
    }
    s->json = ixia_json_print(c);
    cJSON_Delete(c);
  }
  cJSON_Delete(root);
  if (!ok) {
    ixia_schema_unref(s);
    return NULL;
  }
  return s;
}

ixia_schema_t *ixia_schema_ref(ixia_schema_t *s) {
  atomic_fetch_add(&s->refcount, 1);
  return s;
}

void ixia_schema_unref(ixia_schema_t *s) {
  if (!s || !(atomic_fetch_sub(&s->refcount, 1) == 1)) return;
  for (guint i = 0; s->indexes && i < s->n_indexes; i++) {
    g_free(s->indexes[i].field);
    g_free(s->indexes[i].analyzer);
  }
  g_free(s->indexes);
  g_free(s->ns);
  g_free(s->table);
  g_free(s->json);
  g_free(s);
}

gboolean ixia_schema_check_evolution(const ixia_schema_t *old_schema,
                                     const ixia_schema_t *new_schema, ixia_error_t **err) {
  for (guint i = 0; i < new_schema->n_indexes; i++) {
    for (guint j = 0; j < old_schema->n_indexes; j++) {
      const ixia_schema_field_t *a = &new_schema->indexes[i], *b = &old_schema->indexes[j];
      if (strcmp(a->field, b->field) == 0 && a->type != b->type)
        return ixia_error_set(err, IXIA_EINVAL,
                              "schema: field '%s' is indexed as %s; changing it to %s is not "
                              "supported (add a new field instead)",
                              a->field, type_names[b->type], type_names[a->type]);
      if (strcmp(a->field, b->field) == 0 && a->analyzer && b->analyzer &&
          strcmp(a->analyzer, b->analyzer) != 0)
        return ixia_error_set(err, IXIA_EINVAL,
                              "schema: text field '%s' is analyzed with '%s'; changing it to '%s' "
                              "is not supported (add a new field instead)",
                              a->field, b->analyzer, a->analyzer);
    }
  }
  return TRUE;
}

gboolean ixia_schema_value_matches(const cJSON *v, ixia_field_type_t t) {
  switch (t) {
    case IXIA_FIELD_KEYWORD:
    case IXIA_FIELD_TEXT:
      return cJSON_IsString(v);
    case IXIA_FIELD_LONG:
      return cJSON_IsNumber(v) && ixia_bytes_is_safe_int(v->valuedouble);
    case IXIA_FIELD_TIMESTAMP: {
      double t;
      return ixia_timestamp_of(v, &t);
    }
    case IXIA_FIELD_DOUBLE:
      return cJSON_IsNumber(v) && isfinite(v->valuedouble);
    case IXIA_FIELD_BOOL:
      return cJSON_IsBool(v);
  }
  return FALSE;
}

gboolean ixia_timestamp_of(const cJSON *v, double *out) {
  if (cJSON_IsNumber(v)) {
    *out = v->valuedouble;
    return v->valuedouble == floor(v->valuedouble) && v->valuedouble >= 0 &&
           v->valuedouble <= IXIA_TIMESTAMP_MAX;
  }
  gint64 t;
  if (!cJSON_IsString(v) || !ixia_time_parse_rfc3339(v->valuestring, &t)) return FALSE;
  *out = (double)t;
  return t >= 0 && (double)t <= IXIA_TIMESTAMP_MAX;
}

/* What v is, for a type mismatch: "a string", or for a number of the right
 * kind but outside the type's range, the number and the range. Caller
 * frees. */
static char *json_kind(const cJSON *v, ixia_field_type_t t) {
  if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble)) {
    if (t == IXIA_FIELD_TIMESTAMP)
      return g_strdup_printf("%.17g, outside the range of timestamps (whole epoch seconds from 0 "
                             "to 10^12; epoch milliseconds must be divided by 1000)",
                             v->valuedouble);
    if (t == IXIA_FIELD_LONG)
      return g_strdup_printf("%.17g, outside the range of longs (-2^53 to 2^53, the integers a "
                             "JSON number holds exactly)",
                             v->valuedouble);
    return g_strdup("an integer");
  }
  if (cJSON_IsNumber(v))
    return g_strdup(t == IXIA_FIELD_TIMESTAMP
                        ? "a fractional number (a timestamp is whole epoch seconds)"
                        : "a fractional number");
  if (cJSON_IsString(v) && t == IXIA_FIELD_TIMESTAMP) {
    gint64 e;
    if (ixia_time_parse_rfc3339(v->valuestring, &e))
      return g_strdup_printf("\"%.40s\", outside the range of timestamps (" IXIA_TIMESTAMP_FORMS ")",
                             v->valuestring);
    return g_strdup_printf("the string \"%.40s\", which is not a timestamp (" IXIA_TIMESTAMP_FORMS ")",
                           v->valuestring);
  }
  if (cJSON_IsString(v)) return g_strdup("a string");
  if (cJSON_IsBool(v)) return g_strdup("a boolean");
  if (cJSON_IsArray(v)) return g_strdup("an array");
  if (cJSON_IsObject(v)) return g_strdup("an object");
  return g_strdup("null");
}

typedef struct {
  const ixia_schema_field_t *ix;
  ixia_error_t **err;
  gboolean ok;
} check_ctx_t;

/* "has X", "element k is X", or "variants[1].color is X": where a bad value
 * sits, in the words a user reading the document would use. */
char *ixia_schema_where(const char *field, const ixia_json_loc_t *loc) {
  char *at = ixia_json_loc_string(loc);
  size_t n = strlen(field);
  char *out;
  const char *e = strlen(at) > n ? at + n + 1 : at;
  while (g_ascii_isdigit(*e)) e++;
  if (strcmp(at, field) == 0) {
    out = g_strdup("has");
  } else if (strncmp(at, field, n) == 0 && at[n] == '[' && e > at + n + 1 && e[0] == ']' && !e[1]) {
    out = g_strdup_printf("element %.*s is", (int)(e - at - n - 1), at + n + 1);
  } else {
    out = g_strdup_printf("%s is", at);
  }
  g_free(at);
  return out;
}

static gboolean check_value(const cJSON *v, const ixia_json_loc_t *loc, void *ud) {
  check_ctx_t *c = ud;
  if (cJSON_IsNull(v) || ixia_schema_value_matches(v, c->ix->type)) return TRUE;
  g_autofree char *kind = json_kind(v, c->ix->type);
  g_autofree char *where = ixia_schema_where(c->ix->field, loc);
  c->ok = ixia_error_set(c->err, IXIA_ETYPE, "field '%s' is declared %s but %s %s",
                         c->ix->field, type_names[c->ix->type], where, kind);
  return FALSE;
}

gboolean ixia_schema_check_doc(const ixia_schema_t *s, const cJSON *doc, ixia_error_t **err) {
  for (guint i = 0; i < s->n_indexes; i++) {
    check_ctx_t c = {&s->indexes[i], err, TRUE};
    ixia_json_path_foreach(doc, s->indexes[i].field, check_value, &c);
    if (!c.ok) return FALSE;
  }
  return TRUE;
}
