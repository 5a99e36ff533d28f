#include "json.h"

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
  memcpy(copy, text, len);
  copy[len] = 0;
  return copy;
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
    g_free(copy);
    ixia_error_set(err, IXIA_EINVAL, "%s is malformed JSON near byte %zu", what, off);
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
  return root;
}

cJSON *ixia_json_parse_stored(const char *text, size_t len) {
  char *copy = ixia_memdup0(text, len);
  cJSON *root = cJSON_Parse(copy);
  g_free(copy);
  return root;
}

char *ixia_json_print(const cJSON *item) {
  char *s = cJSON_PrintUnformatted(item);
  if (!s) return NULL;
  char *out = g_strdup(s);
  cJSON_free(s);
  return out;
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

cJSON *ixia_json_project(const cJSON *doc, const char *const *paths, guint npaths,
                         gboolean *all_present) {
  cJSON *out = cJSON_CreateObject();
  gboolean all = TRUE;
  for (guint i = 0; i < npaths; i++) {
    const cJSON *item = ixia_json_path(doc, paths[i]);
    if (!item) {
      all = FALSE;
      continue;
    }
    /* Rebuild the nesting of a dotted path in the output. */
    gchar **parts = g_strsplit(paths[i], ".", -1);
    cJSON *parent = out;
    guint n = g_strv_length(parts);
    if (n == 0) { /* "" names the whole document: not a field */
      g_strfreev(parts);
      all = FALSE;
      continue;
    }
    for (guint j = 0; j + 1 < n; j++) {
      cJSON *child = cJSON_GetObjectItemCaseSensitive(parent, parts[j]);
      if (!cJSON_IsObject(child)) {
        if (child) cJSON_DeleteItemFromObjectCaseSensitive(parent, parts[j]);
        child = cJSON_AddObjectToObject(parent, parts[j]);
      }
      parent = child;
    }
    if (!cJSON_GetObjectItemCaseSensitive(parent, parts[n - 1]))
      cJSON_AddItemToObject(parent, parts[n - 1], cJSON_Duplicate(item, TRUE));
    g_strfreev(parts);
  }
  if (all_present) *all_present = all;
  return out;
}
