/* JSON helpers on cJSON with ixia's input limits (json.h).
 *
 * Outside JSON is checked for size and nesting depth on its text before
 * cJSON parses it (cJSON recurses), then walked once for what cJSON
 * accepts but ixia refuses (numbers beyond double range, repeated keys).
 * A parse error names the byte offset and the path of the value around it,
 * so a user can find it in a large document. */
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* " (option)" after a limit, or nothing for a fixed one. */
static const char *option_note(const char *option, char *buf, size_t size) {
  if (!option) return "";
  snprintf(buf, size, " (%s)", option);
  return buf;
}

gboolean ixia_json_check_depth(const char *text, size_t len, int max_depth,
                               const char *depth_option, ixia_error_t **err) {
  int depth = 0;
  gboolean in_string = FALSE;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = FALSE;
    } else if (c == '"') {
      in_string = TRUE;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        char note[96];
        return ixia_error_set(err, IXIA_ETOOLARGE,
                              "JSON nesting deeper than the limit of %d levels%s at byte %zu",
                              max_depth, option_note(depth_option, note, sizeof note), i);
      }
    } else if (c == '}' || c == ']') {
      depth--;
    }
  }
  return TRUE;
}

char *ixia_memdup0(const char *text, size_t len) {
  char *copy = g_malloc(len + 1);
  if (len) memcpy(copy, text, len); /* text may be NULL when len is 0 (an empty value) */
  copy[len] = 0;
  return copy;
}

/* ---- strict input ----
 *
 * cJSON accepts what JSON allows but a store should not keep: a number too
 * large for a double becomes infinity (and is printed back as null), and an
 * object may repeat a key (cJSON keeps both; lookups see the first, printing
 * writes both, so a type check could pass on one and the index read the
 * other). Every input is checked after parsing, and a failure names the
 * place by its path ("variants[2].price"), as the query parser does. */

/* One step of a path being walked, on the C stack. */
typedef struct pstep {
  const struct pstep *up;
  const char *key; /* member name, or NULL for an array element */
  int index;
} pstep_t;

static void path_render(const pstep_t *s, GString *out) {
  if (!s) return;
  path_render(s->up, out);
  if (s->key) {
    if (out->len) g_string_append_c(out, '.');
    g_string_append(out, s->key);
  } else {
    g_string_append_printf(out, "[%d]", s->index);
  }
}

static gboolean strict_fail(const pstep_t *at, const char *what, ixia_error_t **err,
                            const char *msg) {
  GString *p = g_string_new(NULL);
  path_render(at, p);
  ixia_error_set(err, IXIA_EINVAL, "%s: %s%s%s", what, p->str, p->len ? ": " : "", msg);
  g_string_free(p, TRUE);
  return FALSE;
}

static gboolean strict_walk(const cJSON *v, const pstep_t *at, const char *what,
                            ixia_error_t **err) {
  if (cJSON_IsNumber(v) && !isfinite(v->valuedouble))
    return strict_fail(at, what, err,
                       "the number is outside the range of a double (about +-1.8e308); NaN and "
                       "Infinity are not numbers either");
  if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return TRUE;
  GHashTable *seen = NULL;
  int i = 0, n = 0;
  for (const cJSON *c = v->child; c; c = c->next) n++;
  for (const cJSON *c = v->child; c; c = c->next, i++) {
    pstep_t step = {at, cJSON_IsObject(v) ? c->string : NULL, i};
    if (cJSON_IsObject(v) && n > 1) {
      /* Small objects compare names pairwise; larger ones hash them. */
      gboolean dup = FALSE;
      if (n <= 16) {
        for (const cJSON *d = v->child; d != c && !dup; d = d->next) dup = strcmp(d->string, c->string) == 0;
      } else {
        if (!seen) seen = g_hash_table_new(g_str_hash, g_str_equal);
        dup = !g_hash_table_add(seen, c->string);
      }
      if (dup) {
        char *msg = g_strdup_printf("key \"%s\" given twice", c->string);
        strict_fail(at, what, err, msg);
        g_free(msg);
        if (seen) g_hash_table_destroy(seen);
        return FALSE;
      }
    }
    if (!strict_walk(c, &step, what, err)) {
      if (seen) g_hash_table_destroy(seen);
      return FALSE;
    }
  }
  if (seen) g_hash_table_destroy(seen);
  return TRUE;
}

gboolean ixia_json_check_strict(const cJSON *root, const char *what, ixia_error_t **err) {
  return strict_walk(root, NULL, what, err);
}

/* The path of the value being read at byte off of text (for errors), as
 * "a.b[2]"; a light scan that tracks containers, member names and element
 * indexes. */
static char *path_at(const char *text, size_t len, size_t off) {
  typedef struct {
    gboolean object;
    int index;
    char *key;
  } frame_t;
  GArray *st = g_array_new(FALSE, FALSE, sizeof(frame_t));
  gboolean want_key = FALSE;
  for (size_t i = 0; i < MIN(off, len); i++) {
    char c = text[i];
    frame_t *top = st->len ? &g_array_index(st, frame_t, st->len - 1) : NULL;
    if (c == '"') {
      size_t s = ++i;
      while (i < len && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      if (top && top->object && want_key) {
        g_free(top->key);
        top->key = g_strndup(text + s, MIN(i, len) - s);
        want_key = FALSE;
      }
    } else if (c == '{' || c == '[') {
      frame_t f = {c == '{', 0, NULL};
      g_array_append_val(st, f);
      want_key = c == '{';
    } else if ((c == '}' || c == ']') && st->len) {
      g_free(top->key);
      g_array_set_size(st, st->len - 1);
      want_key = FALSE;
    } else if (c == ',' && top) {
      if (top->object) want_key = TRUE;
      else top->index++;
    }
  }
  GString *p = g_string_new(NULL);
  for (guint i = 0; i < st->len; i++) {
    frame_t *f = &g_array_index(st, frame_t, i);
    if (f->object && f->key) g_string_append_printf(p, "%s%s", p->len ? "." : "", f->key);
    else if (!f->object) g_string_append_printf(p, "[%d]", f->index);
    g_free(f->key);
  }
  g_array_free(st, TRUE);
  return g_string_free(p, FALSE);
}

/* The error for text cJSON could not parse, stopped at byte off: naming
 * the place, and saying why for NaN and Infinity. */
static void malformed(const char *text, size_t len, size_t off, const char *what,
                      ixia_error_t **err) {
  char *path = path_at(text, len, off);
  const char *t = off < len ? text + off : "";
  if (*t == '-' || *t == '+') t++;
  gboolean special = g_ascii_strncasecmp(t, "nan", 3) == 0 || g_ascii_strncasecmp(t, "inf", 3) == 0;
  if (special)
    ixia_error_set(err, IXIA_EINVAL, "%s: %s%sNaN and Infinity are not JSON numbers (byte %zu)",
                   what, path, *path ? ": " : "", off);
  else if (*path)
    ixia_error_set(err, IXIA_EINVAL, "%s is malformed JSON near byte %zu (at %s)", what, off, path);
  else
    ixia_error_set(err, IXIA_EINVAL, "%s is malformed JSON near byte %zu", what, off);
  g_free(path);
}

cJSON *ixia_json_parse_object(const char *text, size_t len, const ixia_json_limits_t *lim,
                              const char *what, ixia_error_t **err) {
  if (len > lim->max_bytes) {
    char note[96];
    ixia_error_set(err, IXIA_ETOOLARGE, "%s is %zu bytes, over the limit of %zu bytes%s", what, len,
                   lim->max_bytes, option_note(lim->bytes_option, note, sizeof note));
    return NULL;
  }
  if (!ixia_json_check_depth(text, len, lim->max_depth, lim->depth_option, err)) {
    if (err && *err) ixia_error_prefix(*err, "%s", what);
    return NULL;
  }
  /* A NUL-terminated copy: see ixia_json_parse_stored. */
  const char *nul = memchr(text, 0, len);
  if (nul) {
    ixia_error_set(err, IXIA_EINVAL, "%s is malformed JSON: NUL byte at %zu", what,
                   (size_t)(nul - text));
    return NULL;
  }
  char *copy = ixia_memdup0(text, len);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(copy, &end, FALSE);
  size_t off = end && end >= copy ? (size_t)(end - copy) : 0;
  if (!root) {
    malformed(copy, len, off, what, err);
    g_free(copy);
    return NULL;
  }
  /* Only whitespace may follow the value. */
  for (size_t i = off; i < len; i++) {
    char c = copy[i];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
      cJSON_Delete(root);
      g_free(copy);
      ixia_error_set(err, IXIA_EINVAL, "%s is malformed JSON: trailing data at byte %zu", what, i);
      return NULL;
    }
  }
  g_free(copy);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    ixia_error_set(err, IXIA_EINVAL, "%s must be a JSON object", what);
    return NULL;
  }
  if (!ixia_json_check_strict(root, what, err)) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

cJSON *ixia_json_parse_stored(const char *text, size_t len) {
  char *copy = ixia_memdup0(text, len);
  cJSON *root = cJSON_Parse(copy);
  g_free(copy);
  return root;
}

cJSON *ixia_json_path(const cJSON *obj, const char *path) {
  const cJSON *cur = obj;
  const char *p = path;
  while (cur && *p) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    const cJSON *next = NULL;
    if (cJSON_IsObject(cur)) {
      for (const cJSON *c = cur->child; c; c = c->next) {
        if (c->string && strlen(c->string) == n && memcmp(c->string, p, n) == 0) {
          next = c;
          break;
        }
      }
    }
    cur = next;
    p = dot ? dot + 1 : p + n;
  }
  return (cJSON *)cur;
}

/* ---- paths through arrays of objects ---- */

static char *loc_string(const ixia_json_loc_t *loc) {
  GPtrArray *steps = g_ptr_array_new();
  for (const ixia_json_loc_t *l = loc; l; l = l->up) g_ptr_array_add(steps, (gpointer)l);
  GString *out = g_string_new(NULL);
  for (guint i = steps->len; i-- > 0;) {
    const ixia_json_loc_t *l = steps->pdata[i];
    if (l->key) g_string_append_printf(out, "%s%.*s", out->len ? "." : "", (int)l->klen, l->key);
    else g_string_append_printf(out, "[%d]", l->index);
  }
  g_ptr_array_free(steps, TRUE);
  return g_string_free(out, FALSE);
}

char *ixia_json_loc_string(const ixia_json_loc_t *loc) { return loc_string(loc); }

/* Every element of an array, arrays inside it flattened. */
static gboolean each_element(const cJSON *v, const ixia_json_loc_t *loc, ixia_json_value_fn fn,
                             void *ud) {
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    ixia_json_loc_t step = {loc, NULL, 0, i};
    gboolean go = cJSON_IsArray(e) ? each_element(e, &step, fn, ud) : fn(e, &step, ud);
    if (!go) return FALSE;
  }
  return TRUE;
}

static gboolean walk_path(const cJSON *cur, const char *p, const ixia_json_loc_t *loc,
                          ixia_json_value_fn fn, void *ud) {
  if (!*p) return cJSON_IsArray(cur) ? each_element(cur, loc, fn, ud) : fn(cur, loc, ud);
  if (cJSON_IsArray(cur)) {
    /* An array of objects: the rest of the path applies to each element. */
    int i = 0;
    for (const cJSON *e = cur->child; e; e = e->next, i++) {
      ixia_json_loc_t step = {loc, NULL, 0, i};
      if (!walk_path(e, p, &step, fn, ud)) return FALSE;
    }
    return TRUE;
  }
  if (!cJSON_IsObject(cur)) return TRUE;
  const char *dot = strchr(p, '.');
  size_t n = dot ? (size_t)(dot - p) : strlen(p);
  for (const cJSON *c = cur->child; c; c = c->next) {
    if (c->string && strlen(c->string) == n && memcmp(c->string, p, n) == 0) {
      ixia_json_loc_t step = {loc, c->string, n, 0};
      return walk_path(c, dot ? dot + 1 : p + n, &step, fn, ud);
    }
  }
  return TRUE;
}

gboolean ixia_json_path_foreach(const cJSON *doc, const char *path, ixia_json_value_fn fn,
                                void *ud) {
  if (!doc || !path || !*path) return TRUE;
  return walk_path(doc, path, NULL, fn, ud);
}

/* The projection of one path out of v: objects keep only the path's member,
 * arrays keep their object elements (each projected, {} when the path is
 * not in it), so that two paths into one array line up element by element.
 * NULL when the path is absent. */
static cJSON *project_one(const cJSON *v, const char *p, gboolean *found) {
  if (!*p) {
    *found = TRUE;
    return cJSON_Duplicate(v, TRUE);
  }
  if (cJSON_IsArray(v)) {
    cJSON *arr = cJSON_CreateArray();
    for (const cJSON *e = v->child; e; e = e->next) {
      if (!cJSON_IsObject(e) && !cJSON_IsArray(e)) continue;
      cJSON *pe = project_one(e, p, found);
      cJSON_AddItemToArray(arr, pe ? pe : (cJSON_IsObject(e) ? cJSON_CreateObject() : cJSON_CreateArray()));
    }
    return arr;
  }
  if (!cJSON_IsObject(v)) return NULL;
  const char *dot = strchr(p, '.');
  size_t n = dot ? (size_t)(dot - p) : strlen(p);
  for (const cJSON *c = v->child; c; c = c->next) {
    if (!c->string || strlen(c->string) != n || memcmp(c->string, p, n) != 0) continue;
    cJSON *sub = project_one(c, dot ? dot + 1 : p + n, found);
    if (!sub) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, c->string, sub);
    return o;
  }
  return NULL;
}

/* Merges projection b into a (same source, so arrays line up); takes b. */
static void project_merge(cJSON *a, cJSON *b) {
  if (cJSON_IsArray(a) && cJSON_IsArray(b)) {
    cJSON *x = a->child, *y = b->child;
    for (; x && y; x = x->next, y = y->next)
      if ((cJSON_IsObject(x) && cJSON_IsObject(y)) || (cJSON_IsArray(x) && cJSON_IsArray(y))) {
        cJSON *copy = cJSON_Duplicate(y, TRUE);
        project_merge(x, copy);
      }
    cJSON_Delete(b);
    return;
  }
  while (b->child) {
    cJSON *m = cJSON_DetachItemViaPointer(b, b->child);
    cJSON *have = cJSON_GetObjectItemCaseSensitive(a, m->string);
    if (!have) {
      cJSON_AddItemToObject(a, m->string, m);
    } else if ((cJSON_IsObject(have) && cJSON_IsObject(m)) || (cJSON_IsArray(have) && cJSON_IsArray(m))) {
      project_merge(have, m);
    } else {
      cJSON_Delete(m); /* an earlier path already holds the member whole */
    }
  }
  cJSON_Delete(b);
}

/* Whether the path crosses an array before its last member. */
static gboolean path_crosses_array(const cJSON *doc, const char *path) {
  const cJSON *cur = doc;
  const char *p = path;
  while (cur && *p) {
    if (cJSON_IsArray(cur)) return TRUE;
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    const cJSON *next = NULL;
    for (const cJSON *c = cJSON_IsObject(cur) ? cur->child : NULL; c && !next; c = c->next)
      if (c->string && strlen(c->string) == n && memcmp(c->string, p, n) == 0) next = c;
    cur = next;
    p = dot ? dot + 1 : p + n;
  }
  return FALSE;
}

cJSON *ixia_json_project(const cJSON *doc, const char *const *paths, guint npaths,
                         gboolean *all_present) {
  cJSON *out = cJSON_CreateObject();
  gboolean all = TRUE;
  for (guint i = 0; i < npaths; i++) {
    if (paths[i][0] && path_crosses_array(doc, paths[i])) {
      /* Through an array of objects: each element keeps the path's member. */
      gboolean found = FALSE;
      cJSON *one = project_one(doc, paths[i], &found);
      if (one && found) project_merge(out, one);
      else cJSON_Delete(one), all = FALSE;
      continue;
    }
    const cJSON *item = ixia_json_path(doc, paths[i]);
    if (!item) {
      all = FALSE;
      continue;
    }
    /* Rebuild the nesting of a dotted path in the output; an earlier path
     * that already holds the member (or a whole object above it) wins. */
    gchar **parts = g_strsplit(paths[i], ".", -1);
    cJSON *parent = out;
    guint n = g_strv_length(parts);
    if (n == 0) { /* "" names the whole document: not a field */
      g_strfreev(parts);
      all = FALSE;
      continue;
    }
    for (guint j = 0; parent && j + 1 < n; j++) {
      cJSON *child = cJSON_GetObjectItemCaseSensitive(parent, parts[j]);
      if (!child) child = cJSON_AddObjectToObject(parent, parts[j]);
      parent = cJSON_IsObject(child) ? child : NULL;
    }
    if (parent && !cJSON_GetObjectItemCaseSensitive(parent, parts[n - 1]))
      cJSON_AddItemToObject(parent, parts[n - 1], cJSON_Duplicate(item, TRUE));
    g_strfreev(parts);
  }
  if (all_present) *all_present = all;
  return out;
}
