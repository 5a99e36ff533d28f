/* JSON helpers on cJSON with ixia's input limits.
 * Stateless and thread-safe. Returned cJSON trees belong to the caller
 * (cJSON_Delete); returned strings are g_malloc'd (g_free). */
#ifndef IXIA_JSON_H
#define IXIA_JSON_H

#include <cjson/cJSON.h>
#include <glib.h>
#include <string.h>

#include "error.h"

/* The size and nesting limits of one kind of JSON input, with the config
 * options that set them, named in errors (NULL for a fixed limit). */
typedef struct {
  size_t max_bytes;
  const char *bytes_option;
  int max_depth;
  const char *depth_option;
} ixia_json_limits_t;

/* Checks nesting depth without building a tree, so that hostile input
 * cannot make the parser recurse deeply. */
gboolean ixia_json_check_depth(const char *text, size_t len, int max_depth,
                               const char *depth_option, ixia_error_t **err);

/* Parses a document: must be a JSON object within lim, and strict (see
 * ixia_json_check_strict). `what` names the input in error messages; a
 * syntax error names the path where it happened, and says so for NaN and
 * Infinity (which JSON does not have). */
cJSON *ixia_json_parse_object(const char *text, size_t len, const ixia_json_limits_t *lim,
                              const char *what, ixia_error_t **err);

/* IXIA_EINVAL naming the path ("what: variants[2].price: ...") of the first
 * number outside the range of a double (cJSON reads 1e400 as infinity) or
 * the first object that repeats a key. */
gboolean ixia_json_check_strict(const cJSON *root, const char *what, ixia_error_t **err);

/* A NUL-terminated g_malloc'd copy of len bytes. Unlike g_strndup it never
 * reads past len, so it is safe on buffers that are not NUL-terminated
 * (RocksDB and memcached values). */
char *ixia_memdup0(const char *text, size_t len);

/* Parses JSON the server stored itself (no limits). cJSON's length-bounded
 * parser reads past the given length when the text is not NUL-terminated,
 * so this copies first. NULL when the text is not JSON. */
cJSON *ixia_json_parse_stored(const char *text, size_t len);

/* Unformatted text of a tree, g_malloc'd, as cJSON prints it but for
 * numbers, which are written exactly (ixia_json_format_number): cJSON's
 * printer rounds to 15 digits whenever that reads back within its
 * tolerance, not exactly. NULL at an invalid item or a raw one without
 * text, which cJSON refuses too (a member without a name prints as "",
 * as cJSON prints it). */
char *ixia_json_print(const cJSON *item);

/* Item at a dotted path ("seller.country"), or NULL. Borrowed. */
cJSON *ixia_json_path(const cJSON *obj, const char *path);

/* Where a value was found by ixia_json_path_foreach: a chain of steps on
 * the caller's stack (member names and array indexes), innermost first. */
typedef struct ixia_json_loc {
  const struct ixia_json_loc *up;
  const char *key; /* member step: key[0..klen); NULL for an array element */
  size_t klen;
  int index;
} ixia_json_loc_t;

/* Called for each value; FALSE stops the walk. */
typedef gboolean (*ixia_json_value_fn)(const cJSON *v, const ixia_json_loc_t *loc, void *ud);

/* Every value at a dotted path, the way a field's values are read: an array
 * met on the way is an array of objects, the rest of the path applying to
 * each element (at any depth); an array at the end gives each element
 * (nested arrays flattened). Nulls are passed on (callers treat them as
 * absent). Returns FALSE when fn stopped the walk. */
gboolean ixia_json_path_foreach(const cJSON *doc, const char *path, ixia_json_value_fn fn, void *ud);

/* "variants[2].color" (g_free). */
char *ixia_json_loc_string(const ixia_json_loc_t *loc);

/* A new object holding only the given dotted paths of doc, nested as in doc
 * (a path through an array of objects keeps an array of the elements'
 * projections). *all_present is set FALSE when any path is absent from doc. */
cJSON *ixia_json_project(const cJSON *doc, const char *const *paths, guint npaths,
                         gboolean *all_present);

/* ---- text without a tree (json_text.c) ---- */

/* Appends n bytes at p to out (p must not point into out). GLib 2.74's
 * g_string_append_len is a call that checks whether the bytes overlap the
 * string before it copies: a page of 100 hits writes ~600 pieces, and those
 * calls were a fifth of the shard's search CPU on such pages. */
static inline void ixia_json_put(GString *out, const char *p, size_t n) {
  if (G_LIKELY(out->len + n < out->allocated_len)) {
    memcpy(out->str + out->len, p, n);
    out->len += n;
    out->str[out->len] = '\0';
  } else {
    g_string_append_len(out, p, (gssize)n);
  }
}
/* ixia_json_put of a string literal. */
#define ixia_json_put_lit(out, lit) ixia_json_put((out), "" lit, sizeof(lit) - 1)

/* Appends s[0..len) as a JSON string literal. */
void ixia_json_append_string(GString *out, const char *s, size_t len);

/* A number as JSON text that reads back to the same double: an integral
 * value below 2^53 in magnitude as an integer (-0 as "0"), otherwise the
 * fewest of 15, 16 and 17 significant digits that read back exactly, in
 * "%g"'s notation (from 1e-4 to 1e15 fixed and written without printf:
 * 15 digits exactly as "%.15g" writes them, 16 or 17 possibly another
 * last digit than printf's that reads back as well); NaN and infinities
 * (which JSON does not have) as "null".
 * Locale-independent. Unlike cJSON's printer, whose
 * round-trip check is approximate (0.1 + 0.2 prints as 0.3, and integers
 * past INT_MAX in %g), it is exact. */
void ixia_json_format_number(double d, char buf[32]);
/* v in decimal into buf (NUL-terminated); returns its length. A page
 * writes one per hit, where printf's machinery costs more than the digits. */
gsize ixia_json_format_int(gint64 v, char buf[24]);
/* Appends v in decimal (ixia_json_format_int). */
void ixia_json_append_int(GString *out, gint64 v);

/* A walk over the members of an object, or the elements of an array, in
 * JSON text, without a tree: values come as spans of the text (strings
 * with their quotes). For text the server or another ixia daemon wrote;
 * it never reads past the given length, and malformed structure shows as
 * -1, but a scalar's token is not checked (read it with a strict parser).
 * The walk borrows the text. */
typedef struct {
  const char *p, *e;
  gboolean started;
} ixia_json_walk_t;
/* FALSE when the text (after white space) is not an object / an array. */
gboolean ixia_json_members_open(ixia_json_walk_t *w, const char *text, size_t len);
gboolean ixia_json_elements_open(ixia_json_walk_t *w, const char *text, size_t len);
/* 1: the next member, its key token [*k, *kend) and value [*v, *vend);
 * 0: the end; -1: text that cannot be followed. */
int ixia_json_members_next(ixia_json_walk_t *w, const char **k, const char **kend, const char **v,
                           const char **vend);
int ixia_json_elements_next(ixia_json_walk_t *w, const char **v, const char **vend);
/* The same, but the value is left to the caller, who reads it where it
 * stands (*v, its first byte) and goes on with ixia_json_walk_resume from
 * its end: a value read whole that way (a query answer's array of hits)
 * is not scanned by the walk first. ixia_json_value_end finds the end the walk
 * would have (NULL: text that cannot be followed). A walk that returned 0
 * stands past its closing bracket, where an outer walk resumes; it is not
 * called again. */
int ixia_json_members_peek(ixia_json_walk_t *w, const char **k, const char **kend, const char **v);
int ixia_json_elements_peek(ixia_json_walk_t *w, const char **v);
const char *ixia_json_value_end(const ixia_json_walk_t *w, const char *v);
void ixia_json_walk_resume(ixia_json_walk_t *w, const char *vend);
/* Whether the key token [k, kend) (quotes included, escapes allowed)
 * spells name. */
gboolean ixia_json_key_is(const char *k, const char *kend, const char *name);

/* Appends to out the same object as ixia_json_project would build, read
 * straight from the text of a JSON object the server wrote itself (member
 * values are copied as they are), and says in *all_present (may be NULL)
 * whether every path was there. FALSE, with nothing appended, when the
 * text cannot be followed. */
gboolean ixia_json_project_text(const char *json, size_t len, const char *const *paths,
                                guint npaths, GString *out, gboolean *all_present);

/* A member table of the object at json (text the server wrote, at most
 * 65,535 bytes): IXIA_JSON_MEMBER_WORDS offsets per top-level member (its
 * name token's start and end, its value's start and end), so that a
 * projection finds a member without scanning the text. Fills up to max
 * members of table; returns how many, or 0 for no table (not an object,
 * too long, more than max members, a name with an escape, text it cannot
 * follow). */
#define IXIA_JSON_MEMBER_WORDS 4
guint ixia_json_member_table(const char *json, size_t len, guint16 *table, guint max);
/* ixia_json_project_text through the document's member table (NULL or
 * n_members 0: none), the same answer: one-member-deep paths are read from
 * the table, any other projection from the text. */
gboolean ixia_json_project_table(const char *json, size_t len, const guint16 *table, guint n_members,
                                 const char *const *paths, guint npaths, GString *out,
                                 gboolean *all_present);

#endif
