/* Table schemas: parsing, validation and document type checks.
 *
 * A schema is JSON as in docs/SCHEMA.md:
 *   {"namespace": "shop", "table": "products", "ttl_seconds": 0,
 *    "cache_ttl_seconds": 300,
 *    "indexes": [{"field": "price", "type": "double"}, ...]}
 * An ixia_schema_t is immutable once parsed, so it may be shared between
 * threads by reference (ixia_schema_ref/unref). */
#ifndef IXIA_SCHEMA_H
#define IXIA_SCHEMA_H

#include <cjson/cJSON.h>
#include <glib.h>

#include "error.h"

typedef enum {
  IXIA_FIELD_KEYWORD,
  IXIA_FIELD_TEXT,
  IXIA_FIELD_LONG,
  IXIA_FIELD_DOUBLE,
  IXIA_FIELD_BOOL,
  IXIA_FIELD_TIMESTAMP,
} ixia_field_type_t;

/* The default analyzer of text fields (docs/SCHEMA.md). */
#define IXIA_ANALYZER_STANDARD "standard"

typedef struct {
  char *field; /* dotted path */
  ixia_field_type_t type;
  char *analyzer;     /* text fields: "standard" or a Snowball language; NULL otherwise */
  gboolean positions; /* text fields: token positions are stored (match_phrase) */
} ixia_schema_field_t;

typedef struct ixia_schema {
  _Atomic gint refcount;
  char *ns;
  char *table;
  gint64 ttl_seconds;       /* 0 = documents never expire */
  gint64 cache_ttl_seconds; /* 0 = use cache.default_ttl_seconds */
  ixia_schema_field_t *indexes;
  guint n_indexes;
  char *json;               /* canonical JSON text */
  gint64 version;           /* store version of the schema record; 0 if unsaved */
} ixia_schema_t;

/* Namespace and table names: 1-64 of [A-Za-z0-9_-]. */
gboolean ixia_name_valid(const char *name, const char *what, ixia_error_t **err);

/* A dotted field path: non-empty segments, at most 256 bytes. */
gboolean ixia_field_path_valid(const char *path, ixia_error_t **err);

/* Parses and validates schema JSON. */
ixia_schema_t *ixia_schema_parse(const char *json, size_t len, ixia_error_t **err);
ixia_schema_t *ixia_schema_ref(ixia_schema_t *s);
void ixia_schema_unref(ixia_schema_t *s);

/* A new schema may add or drop indexes, but not change a field's type or a
 * text field's analyzer: the index already holds values of the old kind.
 * Switching "positions" is allowed (documents written before it are
 * re-indexed by a backfill). */
gboolean ixia_schema_check_evolution(const ixia_schema_t *old_schema,
                                     const ixia_schema_t *new_schema, ixia_error_t **err);

/* Checks every declared field present in doc against its type (arrays are
 * multi-valued: each element must match; null counts as absent; a path
 * reaches into arrays of objects, as ixia_json_path_foreach reads it). */
gboolean ixia_schema_check_doc(const ixia_schema_t *s, const cJSON *doc, ixia_error_t **err);

/* Whether one scalar JSON value has a field type (long: an integer with
 * |v| <= 2^53; double: a finite number; timestamp: see ixia_timestamp_of). */
gboolean ixia_schema_value_matches(const cJSON *v, ixia_field_type_t t);

/* A timestamp value as epoch seconds: an integer from 0 to 10^12, or an
 * RFC 3339 string (docs/SCHEMA.md). FALSE for anything else. */
gboolean ixia_timestamp_of(const cJSON *v, double *out);

/* Where a value found by ixia_json_path_foreach sits, for type errors:
 * "has", "element 2 is", "variants[1].color is" (g_free). */
struct ixia_json_loc;
char *ixia_schema_where(const char *field, const struct ixia_json_loc *loc);

const char *ixia_field_type_name(ixia_field_type_t t);

/* Whether name is an analyzer: "standard" or a Snowball language. */
gboolean ixia_analyzer_valid(const char *name);
/* "standard, arabic, ..." (static). */
const char *ixia_analyzer_names(void);

/* long, double and timestamp: values compared and aggregated as numbers. */
static inline gboolean ixia_field_type_numeric(ixia_field_type_t t) {
  return t == IXIA_FIELD_LONG || t == IXIA_FIELD_DOUBLE || t == IXIA_FIELD_TIMESTAMP;
}
gboolean ixia_field_type_parse(const char *name, ixia_field_type_t *out);

#endif
