/* The query request parser and the query limits.
 *
 * A request is parsed once, against the table's schema, into an immutable
 * ixia_query_t: filter leaves hold their values already encoded (values.c),
 * so the index and the brute-force evaluator never see JSON. Every error
 * names the bad part by its JSON path ("filter.and[2].range.price: ...")
 * and every limit by its config option, because a user reading the error
 * has only the request in front of them. */
#include <stdlib.h>

#include "internal.h"
#include "json.h"
#include "timeutil.h"

#define QUERY_MAX_DEPTH 64
#define MAX_FIELDS 64
#define MAX_TERMS_SIZE 10000
#define MAX_PERCENTS 100
#define MAX_AGG_NAME 64
#define MAX_BUCKET_FILTERS 100 /* ranges of a range, filters of a filters */
#define MAX_TOP_HITS 100

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
  out->track_total_hits = (guint64)ixia_config_int(cfg, "query.track_total_hits");
  out->max_in_values = (guint)ixia_config_int(cfg, "query.max_in_values");
}


typedef struct {
  const ixia_schema_t *schema;
  const ixia_query_limits_t *lim;
  guint clauses;
  GPtrArray *agg_fields; /* const ixia_schema_field_t*, each once */
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
                        "%s: the query has more than %u clauses (filter nodes and aggregations; "
                        "query.max_clauses)",
                        path, c->lim->max_clauses);
}

static const ixia_schema_field_t *find_field(const pctx_t *c, const char *name, const char *path,
                                      ixia_error_t **err) {
  for (guint i = 0; i < c->schema->n_indexes; i++)
    if (strcmp(c->schema->indexes[i].field, name) == 0) return &c->schema->indexes[i];
  perr(err, path, "field '%s' is not indexed in %s.%s", name, c->schema->ns, c->schema->table);
  return NULL;
}

/* A term/in value of field ix. `what` names the value in messages. */
static GBytes *encode_term(const ixia_schema_field_t *ix, const cJSON *v, const char *path,
                           ixia_error_t **err) {
  const char *tn = ixia_field_type_name(ix->type);
  switch (ix->type) {
    case IXIA_FIELD_KEYWORD:
      if (!cJSON_IsString(v)) break;
      return g_bytes_new(v->valuestring, strlen(v->valuestring));
    case IXIA_FIELD_TEXT: {
      if (!cJSON_IsString(v)) break;
      char *low = ixia_analyze_one(ix->analyzer, v->valuestring, TRUE);
      if (!low) {
        perr(err, path,
             "\"%.64s\" is not a single word of text field '%s'; use {\"match\": {\"%s\": ...}} "
             "to find words",
             v->valuestring, ix->field, ix->field);
        return NULL;
      }
      size_t n = strlen(low);
      return g_bytes_new_take(low, n);
    }
    case IXIA_FIELD_TIMESTAMP: {
      double t;
      if (!ixia_timestamp_of(v, &t)) {
        perr(err, path, "value must be a timestamp: " IXIA_TIMESTAMP_FORMS);
        return NULL;
      }
      return ixia_num_bytes(t);
    }
    case IXIA_FIELD_LONG:
      if (!ixia_json_is_integer(v)) {
        perr(err, path, "value must be an integer for %s field", tn);
        return NULL;
      }
      return ixia_num_bytes(v->valuedouble);
    case IXIA_FIELD_DOUBLE:
      if (!cJSON_IsNumber(v)) {
        perr(err, path, "value must be a number for double field");
        return NULL;
      }
      return ixia_num_bytes(v->valuedouble);
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
  g_free(f->offsets);
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
  *fpath = ixia_path_member(path, body->child->string);
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
  if (ok && (guint)cJSON_GetArraySize(v) > c->lim->max_in_values)
    ok = ixia_error_set(err, IXIA_ETOOLARGE,
                        "%s: %d values, over the limit of %u (query.max_in_values)", fp,
                        cJSON_GetArraySize(v), c->lim->max_in_values);
  for (const cJSON *e = ok ? v->child : NULL; e && ok; e = e->next, i++) {
    /* The value's own path ("...in.brand[3]") only for an error: written
     * for each of 100 values it was 4% of the API's CPU on such queries. */
    ixia_error_t *first = NULL;
    GBytes *b = encode_term(f->field, e, fp, &first);
    if (!b) {
      ixia_error_destroy(first);
      char *ep = g_strdup_printf("%s[%d]", fp, i);
      b = encode_term(f->field, e, ep, err);
      g_free(ep);
    }
    ok = b != NULL;
    if (b) g_ptr_array_add(tmp, b);
  }
  if (ok) {
    f->values = new_values();
    ixia_values_move_sorted_unique(tmp, f->values);
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
    if (t == IXIA_FIELD_TIMESTAMP && cJSON_IsString(b)) {
      /* A bound may be any instant; only an unparsable string is refused. */
      gint64 e;
      if (ixia_time_parse_rfc3339(b->valuestring, &e))
        enc = ixia_num_bytes((double)e);
      else
        ok = perr(err, fp, "bound \"%s\" must be a timestamp: " IXIA_TIMESTAMP_FORMS, n);
    } else if (ixia_field_type_numeric(t)) {
      if (cJSON_IsNumber(b)) enc = ixia_num_bytes(b->valuedouble);
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
      /* Folded like the tokens, not stemmed: a prefix is not a word. */
      char *low = ixia_analyze_one(f->field->analyzer, v->valuestring, FALSE);
      if (!low)
        ok = perr(err, fp,
                  "prefix \"%.64s\" of a text field must be the start of one word (letters and "
                  "digits only)",
                  v->valuestring);
      else
        g_ptr_array_add(f->values, g_bytes_new_take(low, strlen(low)));
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

/* The text and options of a match or match_phrase: "words", or
 * {"query": "words", <option>: ...} with options from `opts`. */
static const cJSON *match_text(const cJSON *v, const char *fp, const char *const *opts,
                               const cJSON **found, ixia_error_t **err) {
  if (cJSON_IsString(v)) return v;
  if (cJSON_IsObject(v)) {
    for (const cJSON *m = v->child; m; m = m->next) {
      gboolean known = strcmp(m->string, "query") == 0;
      for (guint i = 0; opts[i]; i++)
        if (strcmp(m->string, opts[i]) == 0) known = TRUE, found[i] = m;
      if (!known) {
        perr(err, fp, "unknown key \"%s\"", m->string);
        return NULL;
      }
    }
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(v, "query");
    if (cJSON_IsString(q)) return q;
  }
  perr(err, fp, "takes a string of words, or {\"query\": \"words\", ...}");
  return NULL;
}

static gboolean parse_match(pctx_t *c, ixia_filter_t *f, const cJSON *body, const char *path,
                            ixia_error_t **err) {
  char *fp = NULL;
  const cJSON *v = leaf_body(c, f, body, path, "{\"title\": \"red shoes\"}", &fp, err);
  gboolean ok = v != NULL;
  if (ok && f->field->type != IXIA_FIELD_TEXT)
    ok = perr(err, fp, "match needs a text field; '%s' is %s (use term)", f->field->field,
              ixia_field_type_name(f->field->type));
  static const char *const opts[] = {"operator", NULL};
  const cJSON *found[1] = {NULL};
  const cJSON *text = ok ? match_text(v, fp, opts, found, err) : NULL;
  ok = text != NULL;
  if (ok && found[0]) {
    if (cJSON_IsString(found[0]) && strcmp(found[0]->valuestring, "or") == 0) f->match_any = TRUE;
    else if (!cJSON_IsString(found[0]) || strcmp(found[0]->valuestring, "and") != 0)
      ok = perr(err, fp, "operator must be \"and\" (every word, the default) or \"or\" (any word)");
  }
  if (ok) {
    f->values = new_values();
    ixia_text_tokens(f->field->analyzer, text->valuestring, strlen(text->valuestring), f->values);
    if (f->values->len == 0) ok = perr(err, fp, "\"%.64s\" has no words to match", text->valuestring);
  }
  g_free(fp);
  return ok;
}

typedef struct {
  GPtrArray *values;
  GArray *offsets;
} phrase_t;

static gboolean phrase_token(const char *tok, gsize n, guint32 pos, void *ud) {
  phrase_t *p = ud;
  g_ptr_array_add(p->values, g_bytes_new(tok, n));
  g_array_append_val(p->offsets, pos);
  return TRUE;
}

static gboolean parse_match_phrase(pctx_t *c, ixia_filter_t *f, const cJSON *body,
                                   const char *path, ixia_error_t **err) {
  char *fp = NULL;
  const cJSON *v = leaf_body(c, f, body, path, "{\"title\": \"red leather shoes\"}", &fp, err);
  gboolean ok = v != NULL;
  if (ok && f->field->type != IXIA_FIELD_TEXT)
    ok = perr(err, fp, "match_phrase needs a text field; '%s' is %s", f->field->field,
              ixia_field_type_name(f->field->type));
  if (ok && !f->field->positions)
    ok = perr(err, fp,
              "text field '%s' does not store positions; declare it with \"positions\": true "
              "in the schema (then backfill) to use match_phrase",
              f->field->field);
  static const char *const opts[] = {NULL};
  const cJSON *text = ok ? match_text(v, fp, opts, NULL, err) : NULL;
  ok = text != NULL;
  if (ok) {
    phrase_t p = {new_values(), g_array_new(FALSE, FALSE, sizeof(guint32))};
    guint32 pos = 0;
    ixia_analyze(f->field->analyzer, text->valuestring, strlen(text->valuestring), &pos, phrase_token, &p);
    f->values = p.values;
    f->offsets = (guint32 *)(void *)g_array_free(p.offsets, FALSE);
    if (f->values->len == 0) ok = perr(err, fp, "\"%.64s\" has no words to match", text->valuestring);
    if (ok && f->values->len > 64) ok = perr(err, fp, "a phrase may have at most 64 words");
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
    char *ep = ixia_path_index(path, f->n_children);
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
    {"not", IXIA_F_NOT, parse_not},          {"match_phrase", IXIA_F_MATCH_PHRASE, parse_match_phrase},
};

static ixia_filter_t *parse_filter(pctx_t *c, const cJSON *j, const char *path,
                                   ixia_error_t **err) {
  if (!cJSON_IsObject(j) || cJSON_GetArraySize(j) != 1) {
    perr(err, path,
         "a filter must be an object with exactly one key (term, in, range, prefix, exists, "
         "match, match_phrase, and, or, not)");
    return NULL;
  }
  if (!count_clause(c, path, err)) return NULL;
  const cJSON *body = j->child;
  for (guint i = 0; i < G_N_ELEMENTS(filter_kinds); i++) {
    if (strcmp(body->string, filter_kinds[i].name) != 0) continue;
    ixia_filter_t *f = g_new0(ixia_filter_t, 1);
    f->kind = filter_kinds[i].kind;
    char *kp = ixia_path_member(path, body->string);
    gboolean ok = filter_kinds[i].parse(c, f, body, kp, err);
    g_free(kp);
    if (!ok) {
      filter_free(f);
      return NULL;
    }
    return f;
  }
  perr(err, path,
       "unknown filter \"%s\" (term, in, range, prefix, exists, match, match_phrase, and, or, "
       "not)",
       body->string);
  return NULL;
}

/* ---- sort ---- */

static gboolean parse_sort_key(pctx_t *c, ixia_sort_key_t *k, const cJSON *e, const char *path,
                               ixia_error_t **err) {
  const char *name = NULL;
  const cJSON *spec = NULL;
  if (cJSON_IsString(e)) {
    name = e->valuestring;
  } else if (cJSON_IsObject(e) && cJSON_GetArraySize(e) == 1) {
    name = e->child->string;
    spec = e->child;
  } else {
    return perr(err, path,
                "a sort key is a field name, \"_score\", or {\"<field>\": \"asc\" | \"desc\" | "
                "{\"order\": ..., \"missing\": \"first\" | \"last\"}}");
  }
  gboolean score = strcmp(name, "_score") == 0;
  k->desc = score; /* relevance: best first */
  char *fp = ixia_path_member(path, name);
  gboolean ok = TRUE;
  const cJSON *order = spec, *missing = NULL;
  if (cJSON_IsObject(spec)) {
    order = cJSON_GetObjectItemCaseSensitive(spec, "order");
    missing = cJSON_GetObjectItemCaseSensitive(spec, "missing");
    for (const cJSON *m = spec->child; ok && m; m = m->next)
      if (strcmp(m->string, "order") && strcmp(m->string, "missing"))
        ok = perr(err, fp, "unknown key \"%s\" (order, missing)", m->string);
  }
  if (ok && order && !cJSON_IsNull(order)) {
    if (cJSON_IsString(order) && strcmp(order->valuestring, "asc") == 0) k->desc = FALSE;
    else if (cJSON_IsString(order) && strcmp(order->valuestring, "desc") == 0) k->desc = TRUE;
    else ok = perr(err, fp, "order must be \"asc\" or \"desc\"");
  }
  if (ok && missing && !cJSON_IsNull(missing)) {
    if (cJSON_IsString(missing) && strcmp(missing->valuestring, "first") == 0) k->missing_first = TRUE;
    else if (cJSON_IsString(missing) && strcmp(missing->valuestring, "last") == 0) k->missing_first = FALSE;
    else ok = perr(err, fp, "missing must be \"first\" or \"last\"");
  }
  if (ok && !score) {
    k->field = find_field(c, name, fp, err);
    ok = k->field != NULL;
    if (ok && k->field->type == IXIA_FIELD_TEXT)
      ok = perr(err, fp, "cannot sort by text field '%s' (sort needs a keyword, long, double, "
                "timestamp or bool field)", name);
  }
  g_free(fp);
  return ok;
}

/* A list of sort keys at path (the request's "sort", or a top_hits'). */
static gboolean parse_sort_keys(pctx_t *c, const cJSON *j, const char *path, ixia_sort_key_t **out,
                                guint *n_out, guint32 *sig_out, ixia_error_t **err) {
  if (!j || cJSON_IsNull(j)) return TRUE;
  int n = cJSON_GetArraySize(j);
  if (!cJSON_IsArray(j) || n < 1 || n > IXIA_MAX_SORT_KEYS)
    return perr(err, path, "must be an array of 1 to %d sort keys, like [{\"price\": \"desc\"}, \"_score\"]",
                IXIA_MAX_SORT_KEYS);
  *out = g_new0(ixia_sort_key_t, n);
  GString *sig = g_string_new(NULL);
  for (const cJSON *e = j->child; e; e = e->next) {
    char *ep = ixia_path_index(path, *n_out);
    ixia_sort_key_t *k = &(*out)[*n_out];
    gboolean ok = parse_sort_key(c, k, e, ep, err);
    for (guint i = 0; ok && i < *n_out; i++)
      if ((*out)[i].field == k->field)
        ok = perr(err, ep, "%s is already a sort key", k->field ? k->field->field : "_score");
    g_free(ep);
    if (!ok) {
      g_string_free(sig, TRUE);
      return FALSE;
    }
    g_string_append_printf(sig, "%s/%d/%d;", k->field ? k->field->field : "_score", k->desc,
                           k->missing_first);
    (*n_out)++;
  }
  if (sig_out) *sig_out = (guint32)ixia_val_hash((const guint8 *)sig->str, (guint32)sig->len);
  g_string_free(sig, TRUE);
  return TRUE;
}

static gboolean parse_sort(pctx_t *c, ixia_query_t *q, const cJSON *j, ixia_error_t **err) {
  return parse_sort_keys(c, j, "sort", &q->sort, &q->n_sort, &q->sort_sig, err);
}

/* ---- aggregations ---- */

static void agg_free(ixia_agg_t *g) {
  if (!g) return;
  for (guint i = 0; i < g->n_subs; i++) agg_free(g->subs[i]);
  g_free(g->subs);
  g_free(g->percents);
  for (guint i = 0; i < g->n_ranges; i++) g_free(g->ranges[i].key);
  g_free(g->ranges);
  for (guint i = 0; i < g->n_filters; i++) filter_free(g->filters[i]);
  g_free(g->filters);
  g_strfreev(g->filter_names);
  g_free(g->sort);
  g_strfreev(g->fields);
  g_free(g->name);
  g_free(g);
}

static guint field_slot(pctx_t *c, const ixia_schema_field_t *ix) {
  for (guint i = 0; i < c->agg_fields->len; i++)
    if (c->agg_fields->pdata[i] == ix) return i;
  g_ptr_array_add(c->agg_fields, (gpointer)ix);
  return c->agg_fields->len - 1;
}

static const char *const agg_kind_names[] = {
    "count", "sum",       "avg",            "min",   "max",    "terms",   "percentiles",
    "cardinality", "stats", "histogram", "date_histogram", "range", "filter", "filters", "top_hits"};
#define AGG_KINDS_LIST                                                                      \
  "count, sum, avg, min, max, stats, terms, percentiles, cardinality, histogram, "          \
  "date_histogram, range, filter, filters, top_hits"

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
  char *fp = ixia_path_member(path, "field");
  g->field = find_field(c, name->valuestring, fp, err);
  g_free(fp);
  if (!g->field) return FALSE;
  ixia_field_type_t t = g->field->type;
  if (g->kind == IXIA_AGG_DATE_HISTOGRAM && t != IXIA_FIELD_TIMESTAMP)
    return perr(err, path, "date_histogram needs a timestamp field; '%s' is %s (use histogram)",
                g->field->field, ixia_field_type_name(t));
  gboolean numeric_only = g->kind != IXIA_AGG_TERMS && g->kind != IXIA_AGG_CARDINALITY;
  if (numeric_only && !ixia_field_type_numeric(t))
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
  char *pp = ixia_path_member(path, "percents");
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

/* The nested "aggs" of a bucket aggregation, if any. */
static gboolean parse_subs(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                           ixia_error_t **err) {
  const cJSON *subs = cJSON_GetObjectItemCaseSensitive(body, "aggs");
  if (!subs || cJSON_IsNull(subs)) return TRUE;
  char *sp = ixia_path_member(path, "aggs");
  gboolean ok = parse_aggs(c, subs, sp, TRUE, &g->subs, &g->n_subs, err);
  g_free(sp);
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
    if (!ixia_json_is_integer(size) || size->valuedouble < 1 || size->valuedouble > MAX_TERMS_SIZE)
      return perr(err, path, "size must be an integer from 1 to %d", MAX_TERMS_SIZE);
    g->size = (guint)size->valuedouble;
  }
  return parse_subs(c, g, body, path, err);
}

/* Seconds of a duration: a number, or "<n><unit>" with s, m, h, d. */
static gboolean duration(const cJSON *v, double *out) {
  if (cJSON_IsNumber(v)) {
    *out = v->valuedouble;
    return TRUE;
  }
  if (!cJSON_IsString(v)) return FALSE;
  char *end = NULL;
  double n = g_ascii_strtod(v->valuestring, &end);
  if (end == v->valuestring || !end[0] || end[1]) return FALSE;
  static const char units[] = "smhd";
  static const double secs[] = {1, 60, 3600, 86400};
  const char *u = strchr(units, end[0]);
  if (!u) return FALSE;
  *out = n * secs[u - units];
  return TRUE;
}

static gboolean parse_min_doc_count(ixia_agg_t *g, const cJSON *body, const char *path,
                                    ixia_error_t **err) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(body, "min_doc_count");
  if (!m || cJSON_IsNull(m)) return TRUE;
  if (!ixia_json_is_integer(m) || m->valuedouble < 0 || m->valuedouble > IXIA_SAFE_INT_MAX)
    return perr(err, path, "min_doc_count must be a non-negative integer");
  g->min_doc_count = (guint64)m->valuedouble;
  return TRUE;
}

static gboolean parse_histogram(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                                ixia_error_t **err) {
  static const char *const extra[] = {"interval", "offset", "min_doc_count", "aggs", NULL};
  if (!cJSON_IsObject(body))
    return perr(err, path, "must be {\"field\": \"<field>\", \"interval\": N, ...}");
  if (!agg_field(c, g, body, path, extra, err)) return FALSE;
  const cJSON *iv = cJSON_GetObjectItemCaseSensitive(body, "interval");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(body, "offset");
  if (!cJSON_IsNumber(iv) || !(iv->valuedouble > 0))
    return perr(err, path, "interval must be a number above 0");
  g->interval = iv->valuedouble;
  if (off && !cJSON_IsNull(off)) {
    if (!cJSON_IsNumber(off)) return perr(err, path, "offset must be a number");
    g->offset = fmod(off->valuedouble, g->interval);
  }
  return parse_min_doc_count(g, body, path, err) && parse_subs(c, g, body, path, err);
}

static gboolean parse_date_histogram(pctx_t *c, ixia_agg_t *g, const cJSON *body,
                                     const char *path, ixia_error_t **err) {
  static const char *const extra[] = {"calendar_interval", "fixed_interval", "time_zone", "offset",
                                      "min_doc_count", "aggs", NULL};
  if (!cJSON_IsObject(body))
    return perr(err, path, "must be {\"field\": \"<field>\", \"calendar_interval\": \"month\", ...}");
  if (!agg_field(c, g, body, path, extra, err)) return FALSE;
  const cJSON *cal = cJSON_GetObjectItemCaseSensitive(body, "calendar_interval");
  const cJSON *fix = cJSON_GetObjectItemCaseSensitive(body, "fixed_interval");
  const cJSON *tz = cJSON_GetObjectItemCaseSensitive(body, "time_zone");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(body, "offset");
  if (!cal == !fix)
    return perr(err, path, "give either calendar_interval (minute, hour, day, week, month, "
                "quarter, year) or fixed_interval (like \"90m\", \"12h\", \"7d\" or seconds)");
  if (cal) {
    ixia_cal_unit_t u;
    if (!cJSON_IsString(cal) || !ixia_cal_unit_parse(cal->valuestring, &u))
      return perr(err, path, "calendar_interval must be minute, hour, day, week, month, quarter or "
                  "year (or 1m, 1h, 1d, 1w, 1M, 1q, 1y)");
    g->cal_unit = (int)u;
  } else if (!duration(fix, &g->interval) || !(g->interval >= 1) ||
             g->interval != floor(g->interval)) {
    return perr(err, path, "fixed_interval must be a whole number of seconds, or like \"30s\", "
                "\"90m\", \"12h\", \"7d\"");
  }
  if (tz && !cJSON_IsNull(tz) && (!cJSON_IsString(tz) || !ixia_time_parse_offset(tz->valuestring, &g->tz)))
    return perr(err, path, "time_zone must be an offset like \"+02:00\", \"-05:30\" or \"Z\" "
                "(named zones are not supported)");
  if (off && !cJSON_IsNull(off)) {
    double o;
    if (!duration(off, &o) || o != floor(o))
      return perr(err, path, "offset must be a whole number of seconds, or like \"6h\", \"-30m\"");
    g->offset = o;
  }
  return parse_min_doc_count(g, body, path, err) && parse_subs(c, g, body, path, err);
}

/* A range bound: a number, or for a timestamp field an RFC 3339 time. */
static gboolean range_bound(const ixia_agg_t *g, const cJSON *v, double *out) {
  if (cJSON_IsNumber(v)) {
    *out = v->valuedouble;
    return TRUE;
  }
  gint64 t;
  if (g->field->type == IXIA_FIELD_TIMESTAMP && cJSON_IsString(v) &&
      ixia_time_parse_rfc3339(v->valuestring, &t)) {
    *out = (double)t;
    return TRUE;
  }
  return FALSE;
}

static gboolean parse_range_agg(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                                ixia_error_t **err) {
  static const char *const extra[] = {"ranges", "aggs", NULL};
  if (!cJSON_IsObject(body))
    return perr(err, path, "must be {\"field\": \"<field>\", \"ranges\": [{\"to\": 10}, ...]}");
  if (!agg_field(c, g, body, path, extra, err)) return FALSE;
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(body, "ranges");
  int n = cJSON_GetArraySize(rs);
  if (!cJSON_IsArray(rs) || n < 1 || n > MAX_BUCKET_FILTERS)
    return perr(err, path, "ranges must be an array of 1 to %d {\"key\"?, \"from\"?, \"to\"?}",
                MAX_BUCKET_FILTERS);
  g->ranges = g_new0(ixia_agg_range_t, n);
  for (const cJSON *r = rs->child; r; r = r->next) {
    ixia_agg_range_t *x = &g->ranges[g->n_ranges++];
    char *rp = g_strdup_printf("%s.ranges[%u]", path, g->n_ranges - 1);
    gboolean ok = cJSON_IsObject(r);
    for (const cJSON *m = ok ? r->child : NULL; ok && m; m = m->next)
      ok = !strcmp(m->string, "key") || !strcmp(m->string, "from") || !strcmp(m->string, "to");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(r, "key");
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(r, "from");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(r, "to");
    if (ok && from && !cJSON_IsNull(from)) ok = x->has_from = range_bound(g, from, &x->from);
    if (ok && to && !cJSON_IsNull(to)) ok = x->has_to = range_bound(g, to, &x->to);
    if (ok && k && !cJSON_IsNull(k)) {
      ok = cJSON_IsString(k);
      if (ok) x->key = g_strdup(k->valuestring);
    }
    if (!ok) {
      perr(err, rp, "a range is {\"key\": \"name\", \"from\": N, \"to\": N} (every member "
           "optional; from inclusive, to exclusive; numbers, or RFC 3339 times for a timestamp)");
      g_free(rp);
      return FALSE;
    }
    if (!x->key) {
      /* Elasticsearch's default names: "from-to", "*" for an open end. */
      char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE];
      if (x->has_from) g_ascii_formatd(a, sizeof a, "%.17g", x->from);
      if (x->has_to) g_ascii_formatd(b, sizeof b, "%.17g", x->to);
      x->key = g_strdup_printf("%s-%s", x->has_from ? a : "*", x->has_to ? b : "*");
    }
    for (guint i = 0; i + 1 < g->n_ranges; i++)
      if (!strcmp(g->ranges[i].key, x->key)) {
        perr(err, rp, "key \"%s\" is already a range's", x->key);
        g_free(rp);
        return FALSE;
      }
    g_free(rp);
  }
  return parse_subs(c, g, body, path, err);
}

static gboolean parse_filter_agg(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                                 ixia_error_t **err) {
  /* {"filter": <filter>} alone, or with "aggs" beside it (ES takes the
   * filter itself as the body: {"filter": {"term": ...}}). */
  const cJSON *f = body, *subs = NULL;
  if (cJSON_IsObject(body) && cJSON_GetObjectItemCaseSensitive(body, "filter")) {
    f = cJSON_GetObjectItemCaseSensitive(body, "filter");
    subs = body;
    for (const cJSON *m = body->child; m; m = m->next)
      if (strcmp(m->string, "filter") && strcmp(m->string, "aggs"))
        return perr(err, path, "unknown key \"%s\" (filter, aggs)", m->string);
  }
  g->filters = g_new0(ixia_filter_t *, 1);
  g->filters[0] = parse_filter(c, f, path, err);
  if (!g->filters[0]) return FALSE;
  g->n_filters = 1;
  return !subs || parse_subs(c, g, subs, path, err);
}

static gboolean parse_filters_agg(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                                  ixia_error_t **err) {
  const cJSON *fs = cJSON_IsObject(body) ? cJSON_GetObjectItemCaseSensitive(body, "filters") : NULL;
  int n = cJSON_GetArraySize(fs);
  if (!cJSON_IsObject(fs) || n < 1 || n > MAX_BUCKET_FILTERS)
    return perr(err, path, "must be {\"filters\": {\"<name>\": <filter>, ...}, \"aggs\": {...}} with 1 "
                "to %d filters", MAX_BUCKET_FILTERS);
  for (const cJSON *m = body->child; m; m = m->next)
    if (strcmp(m->string, "filters") && strcmp(m->string, "aggs"))
      return perr(err, path, "unknown key \"%s\" (filters, aggs)", m->string);
  g->filters = g_new0(ixia_filter_t *, n);
  g->filter_names = g_new0(char *, n + 1);
  for (const cJSON *e = fs->child; e; e = e->next) {
    char *ep = g_strdup_printf("%s.filters.%s", path, e->string);
    ixia_filter_t *f = parse_filter(c, e, ep, err);
    g_free(ep);
    if (!f) return FALSE;
    g->filter_names[g->n_filters] = g_strdup(e->string);
    g->filters[g->n_filters++] = f;
  }
  return parse_subs(c, g, body, path, err);
}

static gboolean parse_top_hits(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                               ixia_error_t **err) {
  if (!cJSON_IsObject(body))
    return perr(err, path, "must be {\"size\": N, \"sort\": [...], \"fields\": [...]}");
  for (const cJSON *m = body->child; m; m = m->next)
    if (strcmp(m->string, "size") && strcmp(m->string, "sort") && strcmp(m->string, "fields"))
      return perr(err, path, "unknown key \"%s\" (size, sort, fields)", m->string);
  const cJSON *size = cJSON_GetObjectItemCaseSensitive(body, "size");
  g->size = 3;
  if (size && !cJSON_IsNull(size)) {
    if (!ixia_json_is_integer(size) || size->valuedouble < 1 || size->valuedouble > MAX_TOP_HITS)
      return perr(err, path, "size must be an integer from 1 to %d", MAX_TOP_HITS);
    g->size = (guint)size->valuedouble;
  }
  char *sp = ixia_path_member(path, "sort");
  gboolean ok = parse_sort_keys(c, cJSON_GetObjectItemCaseSensitive(body, "sort"), sp, &g->sort,
                                &g->n_sort, NULL, err);
  g_free(sp);
  const cJSON *fields = cJSON_GetObjectItemCaseSensitive(body, "fields");
  if (ok && fields && !cJSON_IsNull(fields)) {
    int n = cJSON_GetArraySize(fields);
    ok = cJSON_IsArray(fields) && n >= 1 && n <= MAX_FIELDS;
    g->fields = g_new0(char *, n + 1);
    int i = 0;
    for (const cJSON *e = ok ? fields->child : NULL; ok && e; e = e->next) {
      ok = cJSON_IsString(e) && ixia_field_path_valid(e->valuestring, NULL);
      if (ok) g->fields[i++] = g_strdup(e->valuestring);
    }
    if (!ok) perr(err, path, "fields must be an array of 1 to %d field paths", MAX_FIELDS);
  }
  return ok;
}

static gboolean parse_stats(pctx_t *c, ixia_agg_t *g, const cJSON *body, const char *path,
                            ixia_error_t **err) {
  return agg_field(c, g, body, path, NULL, err);
}

static ixia_agg_t *parse_agg(pctx_t *c, const char *name, const cJSON *j, const char *path,
                             ixia_error_t **err) {
  if (!cJSON_IsObject(j) || cJSON_GetArraySize(j) != 1) {
    perr(err, path, "an aggregation must be an object with exactly one kind (" AGG_KINDS_LIST ")");
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
  char *kp = ixia_path_member(path, body->string);
  static const char *const pct_extra[] = {"percents", NULL};
  gboolean ok;
  if (!known) {
    ok = perr(err, path, "unknown aggregation \"%s\" (" AGG_KINDS_LIST ")", body->string);
  } else if (g->kind == IXIA_AGG_COUNT) {
    ok = (cJSON_IsObject(body) && !body->child) || perr(err, kp, "count takes no arguments: {}");
  } else if (g->kind == IXIA_AGG_TERMS) {
    ok = parse_terms(c, g, body, kp, err);
  } else if (g->kind == IXIA_AGG_PERCENTILES) {
    ok = agg_field(c, g, body, kp, pct_extra, err) && parse_percents(g, body, kp, err);
  } else if (g->kind == IXIA_AGG_HISTOGRAM) {
    ok = parse_histogram(c, g, body, kp, err);
  } else if (g->kind == IXIA_AGG_DATE_HISTOGRAM) {
    ok = parse_date_histogram(c, g, body, kp, err);
  } else if (g->kind == IXIA_AGG_RANGE) {
    ok = parse_range_agg(c, g, body, kp, err);
  } else if (g->kind == IXIA_AGG_FILTER) {
    ok = parse_filter_agg(c, g, body, kp, err);
  } else if (g->kind == IXIA_AGG_FILTERS) {
    ok = parse_filters_agg(c, g, body, kp, err);
  } else if (g->kind == IXIA_AGG_TOP_HITS) {
    ok = parse_top_hits(c, g, body, kp, err);
  } else if (g->kind == IXIA_AGG_STATS) {
    ok = parse_stats(c, g, body, kp, err);
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
    char *ep = ixia_path_member(path, e->string);
    gboolean ok = TRUE;
    /* Bucket objects hold "key", "count" (and key_as_string, from, to)
     * next to the nested results. */
    static const char *const reserved[] = {"key", "count", "key_as_string", "from", "to"};
    for (guint r = 0; nested && r < G_N_ELEMENTS(reserved); r++)
      if (strcmp(e->string, reserved[r]) == 0)
        ok = perr(err, ep, "the name '%s' is reserved inside buckets", e->string);
    for (guint i = 0; ok && i < *n_out; i++)
      if (strcmp((*out)[i]->name, e->string) == 0) ok = perr(err, ep, "name given twice");
    ixia_agg_t *g = ok ? parse_agg(c, e->string, e, ep, err) : NULL;
    g_free(ep);
    if (!g) return FALSE;
    (*out)[(*n_out)++] = g;
  }
  return TRUE;
}

/* Whether a match or match_phrase is reachable without passing a "not". */
static gboolean filter_scores(const ixia_filter_t *f) {
  if (f->kind == IXIA_F_MATCH || f->kind == IXIA_F_MATCH_PHRASE) return TRUE;
  if (f->kind == IXIA_F_NOT) return FALSE;
  for (guint i = 0; i < f->n_children; i++)
    if (filter_scores(f->children[i])) return TRUE;
  return FALSE;
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
  g_free(q->sort);
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
    ixia_error_t *e2 = NULL;
    gboolean ok = cJSON_IsString(e) && ixia_field_path_valid(e->valuestring, &e2);
    if (!ok) {
      /* (The element's path only for an error.) */
      char *ep = g_strdup_printf("fields[%d]", i);
      if (!cJSON_IsString(e)) perr(&e2, ep, "must be a string");
      else if (e2) ixia_error_prefix(e2, "%s", ep);
      g_free(ep);
      return ixia_error_propagate(err, e2);
    }
    q->fields[i] = g_strdup(e->valuestring);
  }
  return TRUE;
}

static gboolean parse_scalars(ixia_query_t *q, const cJSON *root, const ixia_query_limits_t *lim,
                              ixia_error_t **err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "limit");
  if (v && !cJSON_IsNull(v)) {
    if (!ixia_json_is_integer(v) || v->valuedouble < 0)
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
    if (!ixia_json_is_integer(v) || v->valuedouble < 0 || v->valuedouble >= 9223372036854775807.0)
      return perr(err, "min_version", "must be a non-negative integer");
    q->min_version = (gint64)v->valuedouble;
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "timeout_ms");
  if (v && !cJSON_IsNull(v)) {
    if (!ixia_json_is_integer(v) || v->valuedouble < 1)
      return perr(err, "timeout_ms", "must be a positive integer (milliseconds)");
    if (v->valuedouble < lim->deadline_ms) q->timeout_ms = (guint)v->valuedouble;
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "track_total_hits");
  if (v && !cJSON_IsNull(v)) {
    if (cJSON_IsBool(v))
      q->track_total_hits = cJSON_IsTrue(v) ? G_MAXUINT64 : 0;
    else if (ixia_json_is_integer(v) && v->valuedouble >= 0 && v->valuedouble <= IXIA_SAFE_INT_MAX)
      q->track_total_hits = (guint64)v->valuedouble;
    else
      return perr(err, "track_total_hits",
                  "must be true (an exact total), false, or the number of matches up to which "
                  "the total is exact");
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "explain");
  if (v && !cJSON_IsNull(v)) {
    if (!cJSON_IsBool(v)) return perr(err, "explain", "must be true or false");
    q->explain = cJSON_IsTrue(v);
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "allow_repairing");
  if (v && !cJSON_IsNull(v)) {
    if (!cJSON_IsBool(v)) return perr(err, "allow_repairing", "must be true or false");
    q->allow_repairing = cJSON_IsTrue(v);
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "allow_partial");
  if (v && !cJSON_IsNull(v)) {
    if (!cJSON_IsBool(v)) return perr(err, "allow_partial", "must be true or false");
    q->allow_partial = cJSON_IsTrue(v);
  }
  return parse_fields(q, cJSON_GetObjectItemCaseSensitive(root, "fields"), err);
}

static gboolean check_top_keys(const cJSON *root, ixia_error_t **err) {
  static const char *const known[] = {"namespace", "table",      "filter",           "fields",
                                      "limit",     "after",      "aggs",             "min_version",
                                      "timeout_ms", "explain",   "track_total_hits", "sort",
                                      "allow_repairing", "allow_partial"};
  for (const cJSON *c = root->child; c; c = c->next) {
    gboolean k = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(known); i++) k = k || strcmp(c->string, known[i]) == 0;
    if (!k)
      return ixia_error_set(err, IXIA_EINVAL,
                            "query: unknown key \"%s\" (namespace, table, filter, fields, limit, "
                            "after, sort, aggs, min_version, timeout_ms, explain, track_total_hits, "
                            "allow_repairing, allow_partial)",
                            c->string);
    for (const cJSON *d = root->child; d != c; d = d->next)
      if (strcmp(d->string, c->string) == 0)
        return ixia_error_set(err, IXIA_EINVAL, "query: key \"%s\" given twice", c->string);
  }
  return TRUE;
}

static ixia_query_t *parse_root(const cJSON *root, ixia_schema_lookup_fn lookup, void *lookup_ud,
                                const ixia_query_limits_t *lim, ixia_error_t **err);

ixia_query_t *ixia_query_parse(const char *json, size_t len, ixia_schema_lookup_fn lookup,
                               void *lookup_ud, const ixia_query_limits_t *lim,
                               ixia_error_t **err) {
  const ixia_json_limits_t jl = {lim->max_request_bytes, "query.max_request_bytes",
                                 QUERY_MAX_DEPTH, NULL};
  cJSON *root = ixia_json_parse_object(json, len, &jl, "query", err);
  if (!root) return NULL;
  ixia_query_t *q = parse_root(root, lookup, lookup_ud, lim, err);
  cJSON_Delete(root);
  return q;
}

/* Whether the tree under n nests deeper than max levels (n is level 1). */
static gboolean nests_deeper(const cJSON *n, int max) {
  if (max <= 0) return TRUE;
  for (const cJSON *k = n->child; k; k = k->next)
    if ((cJSON_IsObject(k) || cJSON_IsArray(k)) && nests_deeper(k, max - 1)) return TRUE;
  return FALSE;
}

ixia_query_t *ixia_query_parse_tree(const cJSON *root, ixia_schema_lookup_fn lookup,
                                    void *lookup_ud, const ixia_query_limits_t *lim,
                                    ixia_error_t **err) {
  if (!cJSON_IsObject(root)) {
    ixia_error_set(err, IXIA_EINVAL, "query: must be a JSON object");
    return NULL;
  }
  if (nests_deeper(root, QUERY_MAX_DEPTH)) {
    ixia_error_set(err, IXIA_EINVAL, "query: JSON nesting deeper than the limit of %d levels", QUERY_MAX_DEPTH);
    return NULL;
  }
  return parse_root(root, lookup, lookup_ud, lim, err);
}

static ixia_query_t *parse_root(const cJSON *root, ixia_schema_lookup_fn lookup, void *lookup_ud,
                                const ixia_query_limits_t *lim, ixia_error_t **err) {
  ixia_query_t *q = g_new0(ixia_query_t, 1);
  q->limit = 10;
  q->allow_repairing = TRUE;
  q->timeout_ms = lim->deadline_ms;
  q->track_total_hits = lim->track_total_hits;
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
  q->scoring = q->filter && filter_scores(q->filter);
  if (ok) ok = parse_sort(&c, q, cJSON_GetObjectItemCaseSensitive(root, "sort"), err);
  const cJSON *aggs = cJSON_GetObjectItemCaseSensitive(root, "aggs");
  if (ok && aggs && !cJSON_IsNull(aggs))
    ok = parse_aggs(&c, aggs, "aggs", FALSE, &q->aggs, &q->n_aggs, err);
  q->n_agg_fields = c.agg_fields->len;
  q->agg_fields = (const ixia_schema_field_t **)g_ptr_array_free(c.agg_fields, FALSE);
  if (!ok) {
    ixia_query_destroy(q);
    return NULL;
  }
  return q;
}

