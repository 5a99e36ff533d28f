/* The HTTP/JSON routes of ixia-query-api (http_api.h, docs/HTTP.md).
 *
 * Each route: authorize (access.h), convert the request into the api.c
 * call the Thrift handler makes, convert the answer into JSON. Gets,
 * multi-gets, stats, schemas and key listings run on the event loop (a get
 * defers itself when it needs the disk or memcached, as on the Thrift
 * port); everything else defers to a worker at once. */
#include "http_api.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "access.h"
#include "client.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "server.h"

extern const char ixia_console_html[];
extern const gsize ixia_console_html_len;

struct ixia_api_http {
  ixia_api_t *api;
  ixia_auth_t *auth;
  ixia_http_t *http;
  gsize max_body, max_bulk;
};

/* ---------- helpers ---------- */

static void reply_err(ixia_http_req_t *r, ixia_error_t *err) { ixia_http_reply_error(r, err); }

static void reply_bad(ixia_http_req_t *r, guint status, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void reply_bad(ixia_http_req_t *r, guint status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "code", "INVALID_ARGUMENT");
  cJSON_AddStringToObject(o, "message", msg);
  ixia_metrics_call_error("http", "other", "INVALID_ARGUMENT");
  ixia_http_reply_json(r, status, ixia_json_print(o));
  cJSON_Delete(o);
  g_free(msg);
}

static void method_not_allowed(ixia_http_req_t *r, const char *allow) {
  ixia_http_add_header(r, "Allow", allow);
  reply_bad(r, 405, "%s is not allowed on %s (allowed: %s)", ixia_http_method(r),
            ixia_http_path(r), allow);
}

static gboolean is(const ixia_http_req_t *r, const char *m) {
  return strcmp(ixia_http_method(r), m) == 0;
}

/* TRUE when the call must leave the event loop (it was deferred). */
static gboolean defer(void) {
  if (!ixia_server_on_io_thread()) return FALSE;
  ixia_server_defer();
  return TRUE;
}

/* The request's principal; NULL (no key) is left for the checks to refuse.
 * A key that is there but wrong is refused here. */
static gboolean principal(ixia_api_http_t *h, ixia_http_req_t *r, ixia_principal_t **p) {
  *p = NULL;
  if (!ixia_auth_enabled(h->auth)) return TRUE;
  const char *hdr = ixia_http_header(r, "Authorization");
  if (!hdr) return TRUE;
  if (g_ascii_strncasecmp(hdr, "Bearer ", 7) != 0) {
    reply_err(r, ixia_error_new(IXIA_EUNAUTHENTICATED,
                                "the Authorization header must be \"Bearer KEY\""));
    return FALSE;
  }
  const char *key = hdr + 7;
  while (*key == ' ') key++;
  ixia_error_t *err = NULL;
  *p = ixia_auth_verify(h->auth, key, strlen(key), &err);
  if (!*p) reply_err(r, err);
  return *p != NULL;
}

static gboolean allow(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p,
                      ixia_action_t act, const char *ns) {
  ixia_error_t *err = NULL;
  if (ixia_access_allow(h->auth, p, act, ns, &err)) return TRUE;
  reply_err(r, err);
  return FALSE;
}

/* A JSON object body; replies 400 and returns NULL otherwise. */
static cJSON *body_object(ixia_api_http_t *h, ixia_http_req_t *r, const char *what) {
  gsize len;
  const char *body = ixia_http_body(r, &len);
  const ixia_json_limits_t jl = {h->max_body, "http.max_body_bytes", 64, NULL};
  ixia_error_t *err = NULL;
  cJSON *o = ixia_json_parse_object(body, len, &jl, what, &err);
  if (!o) reply_err(r, err);
  return o;
}

/* "5", "\"5\"" or W/"5" → 5; -2 when not a version. */
static gint64 etag_version(const char *v) {
  if (!v) return -2;
  while (*v == ' ') v++;
  if (g_str_has_prefix(v, "W/")) v += 2;
  char *s = g_strdup(v);
  g_strstrip(s);
  size_t n = strlen(s);
  if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
    memmove(s, s + 1, n - 2);
    s[n - 2] = 0;
  }
  guint64 out = 0;
  gboolean ok = g_ascii_string_to_unsigned(s, 10, 0, G_MAXINT64, &out, NULL);
  g_free(s);
  return ok ? (gint64)out : -2;
}

static void set_etag(ixia_http_req_t *r, gint64 version) {
  /* Formatted by hand: through g_snprintf the tag cost 2% of a cached
   * get's CPU. */
  char tag[32];
  gsize n = 1;
  tag[0] = '"';
  n += ixia_json_format_int(version, tag + n);
  tag[n++] = '"';
  tag[n] = 0;
  ixia_http_add_header(r, "ETag", tag);
}

static void append_json_string(GString *s, const char *text) {
  ixia_json_append_string(s, text, strlen(text));
}

/* ---------- documents ---------- */

static void doc_json(GString *s, const char *key, gboolean found, gint64 version, const char *json) {
  g_string_append(s, "{\"key\": ");
  append_json_string(s, key);
  g_string_append(s, found ? ", \"found\": true" : ", \"found\": false");
  if (found) {
    /* The document is appended, not formatted: through printf's %s a
     * kilobyte of JSON cost a few % of a get's CPU. */
    g_string_append(s, ", \"version\": ");
    ixia_json_append_int(s, version);
    g_string_append(s, ", \"doc\": ");
    g_string_append(s, json);
  }
  g_string_append_c(s, '}');
}

static void route_get_doc(ixia_api_http_t *h, ixia_http_req_t *r, const char *ns,
                          const char *table, const char *key) {
  ixia_http_set_call(r, "get");
  char **fields = ixia_http_arg(r, "fields") ? ixia_split_list(ixia_http_arg(r, "fields")) : NULL;
  gboolean found = FALSE;
  gint64 version = 0;
  char *json = NULL;
  ixia_error_t *err = NULL;
  gboolean ok = ixia_api_get(h->api, ns, table, key, (const char *const *)fields, &found, &version,
                             &json, &err);
  g_strfreev(fields);
  if (!ok) {
    if (ixia_server_on_io_thread()) {
      /* The get deferred itself (disk or memcached ahead), or failed on
       * the event loop: a worker runs it again and gives the answer. */
      ixia_error_destroy(err);
      ixia_server_defer();
      return;
    }
    reply_err(r, err);
    return;
  }
  if (!found) {
    reply_err(r, ixia_error_new(IXIA_ENOTFOUND, "no document '%s' in %s/%s", key, ns, table));
    return;
  }
  const char *inm = ixia_http_header(r, "If-None-Match");
  set_etag(r, version);
  if (inm && etag_version(inm) == version) {
    g_free(json);
    ixia_http_reply(r, 304, NULL, NULL, 0);
    return;
  }
  GString *s = g_string_sized_new(strlen(json) + 64);
  doc_json(s, key, TRUE, version, json);
  g_free(json);
  ixia_http_reply_json(r, 200, g_string_free(s, FALSE));
}

static void route_write_doc(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p,
                            ixia_write_kind_t kind, const char *ns, const char *table,
                            const char *key) {
  ixia_http_set_call(r, kind == IXIA_WRITE_PUT ? "put" : kind == IXIA_WRITE_UPSERT ? "upsert" : "deleteDoc");
  if (!allow(h, r, p, IXIA_ACT_WRITE, ns) || defer()) return;
  gint64 expected = -1;
  const char *im = ixia_http_header(r, "If-Match"), *inm = ixia_http_header(r, "If-None-Match");
  if (im && inm) {
    reply_bad(r, 400, "give If-Match (the current version) or If-None-Match: * (must be absent), not both");
    return;
  }
  if (inm) {
    while (*inm == ' ') inm++;
    if (strncmp(inm, "*", 1) != 0 || inm[1 + strspn(inm + 1, " ")] != 0) {
      reply_bad(r, 400, "If-None-Match on a write must be * (the document must not exist)");
      return;
    }
    expected = 0;
  }
  if (im) {
    expected = etag_version(im);
    if (expected < 1) {
      reply_bad(r, 400, "If-Match must be a document version (its ETag), got '%s'", im);
      return;
    }
  }
  const char *body = kind == IXIA_WRITE_DELETE ? NULL : ixia_http_body(r, NULL);
  ixia_api_op_t op = {kind, ns, table, key, body, expected};
  gint64 version = 0;
  ixia_error_t *err = NULL;
  if (!ixia_api_write(h->api, &op, 1, &version, &err)) {
    reply_err(r, err);
    return;
  }
  set_etag(r, version);
  ixia_http_reply_json(r, 200, g_strdup_printf("{\"version\": %" G_GINT64_FORMAT "}", version));
}

static void route_multi_get(ixia_api_http_t *h, ixia_http_req_t *r, const char *ns,
                            const char *table) {
  ixia_http_set_call(r, "multiGet");
  char **keys = ixia_split_list(ixia_http_arg(r, "keys"));
  guint n = g_strv_length(keys);
  if (n == 0) {
    g_strfreev(keys);
    reply_bad(r, 400, "keys= lists the keys to get, comma-separated (or use after= and limit= to scan)");
    return;
  }
  if (n > ixia_api_max_get_keys(h->api)) {
    reply_err(r, ixia_error_new(IXIA_ETOOLARGE, "%u keys, over the limit of %u (limits.max_get_keys)",
                                n, ixia_api_max_get_keys(h->api)));
    g_strfreev(keys);
    return;
  }
  char **fields = ixia_http_arg(r, "fields") ? ixia_split_list(ixia_http_arg(r, "fields")) : NULL;
  ixia_api_doc_t *docs = g_new0(ixia_api_doc_t, n);
  ixia_error_t *err = NULL;
  gboolean ok = ixia_api_multi_get(h->api, ns, table, (const char *const *)keys, n,
                                   (const char *const *)fields, docs, &err);
  if (!ok) {
    if (ixia_server_on_io_thread()) {
      ixia_error_destroy(err); /* as for a get: again on a worker */
      ixia_server_defer();
    } else {
      reply_err(r, err);
    }
  } else {
    GString *s = g_string_new("{\"docs\": [");
    for (guint i = 0; i < n; i++) {
      if (i) g_string_append(s, ", ");
      doc_json(s, keys[i], docs[i].found, docs[i].version, docs[i].json);
      g_free(docs[i].json);
    }
    g_string_append(s, "]}");
    ixia_http_reply_json(r, 200, g_string_free(s, FALSE));
  }
  g_free(docs);
  g_strfreev(fields);
  g_strfreev(keys);
}

typedef struct {
  GString *s;
  guint n;
  char *last;
} scan_out_t;

static gboolean scan_one(const char *key, size_t key_len, gint64 version, gint64 expire_at,
                         const char *json, size_t json_len, gpointer user) {
  (void)expire_at;
  scan_out_t *o = user;
  char *k = ixia_memdup0(key, key_len), *j = ixia_memdup0(json, json_len);
  if (o->n++) g_string_append(o->s, ", ");
  doc_json(o->s, k, TRUE, version, j);
  g_free(o->last);
  o->last = k;
  g_free(j);
  return TRUE;
}

static void route_scan(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p,
                       const char *ns, const char *table) {
  ixia_http_set_call(r, "scan");
  if (!allow(h, r, p, IXIA_ACT_ADMIN, ns) || defer()) return;
  const char *lim = ixia_http_arg(r, "limit");
  gint64 limit = lim ? g_ascii_strtoll(lim, NULL, 10) : 100;
  scan_out_t o = {g_string_new("{\"docs\": ["), 0, NULL};
  ixia_error_t *err = NULL;
  if (!ixia_api_scan(h->api, ns, table, ixia_http_arg(r, "after"), (gint)CLAMP(limit, -1, G_MAXINT),
                     scan_one, &o, &err)) {
    g_string_free(o.s, TRUE);
    g_free(o.last);
    reply_err(r, err);
    return;
  }
  g_string_append(o.s, "], \"next\": ");
  if (o.last) append_json_string(o.s, o.last);
  else g_string_append(o.s, "null");
  g_string_append_c(o.s, '}');
  g_free(o.last);
  ixia_http_reply_json(r, 200, g_string_free(o.s, FALSE));
}

/* ---------- bulk and batch ---------- */

/* One op from a JSON object: {"op", "key", "doc", "expected_version"} (and
 * "namespace", "table" for _batch). Strings point into o or into *json
 * (g_free it). */
static gboolean op_from_json(const cJSON *o, const char *ns, const char *table, ixia_api_op_t *op,
                             char **json, ixia_error_t **err) {
  *json = NULL;
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "op");
  const cJSON *key = cJSON_GetObjectItemCaseSensitive(o, "key");
  const cJSON *doc = cJSON_GetObjectItemCaseSensitive(o, "doc");
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "expected_version");
  const cJSON *ons = cJSON_GetObjectItemCaseSensitive(o, "namespace");
  const cJSON *otab = cJSON_GetObjectItemCaseSensitive(o, "table");
  const char *k = kind && cJSON_IsString(kind) ? kind->valuestring : "put";
  memset(op, 0, sizeof *op);
  if (!strcmp(k, "put")) op->kind = IXIA_WRITE_PUT;
  else if (!strcmp(k, "upsert")) op->kind = IXIA_WRITE_UPSERT;
  else if (!strcmp(k, "delete")) op->kind = IXIA_WRITE_DELETE;
  else return ixia_error_set(err, IXIA_EINVAL, "\"op\" must be put, upsert or delete");
  if (!cJSON_IsString(key)) return ixia_error_set(err, IXIA_EINVAL, "\"key\" must be a string");
  if (op->kind != IXIA_WRITE_DELETE && !cJSON_IsObject(doc))
    return ixia_error_set(err, IXIA_EINVAL, "\"doc\" must be the document (a JSON object)");
  if (ev && (!cJSON_IsNumber(ev) || ev->valuedouble < -1 || ev->valuedouble != (double)(gint64)ev->valuedouble))
    return ixia_error_set(err, IXIA_EINVAL, "\"expected_version\" must be -1, 0 or a version");
  op->ns = ns ? ns : cJSON_IsString(ons) ? ons->valuestring : NULL;
  op->table = table ? table : cJSON_IsString(otab) ? otab->valuestring : NULL;
  if (!op->ns || !op->table)
    return ixia_error_set(err, IXIA_EINVAL, "each op needs \"namespace\" and \"table\"");
  op->key = key->valuestring;
  op->expected_version = ev ? (gint64)ev->valuedouble : -1;
  if (op->kind != IXIA_WRITE_DELETE) *json = ixia_json_print(doc);
  op->json = *json;
  return TRUE;
}

typedef struct {
  guint line;
  cJSON *obj;
  char *json;
  ixia_api_op_t op;
  ixia_error_t *err; /* the line could not be read */
} bulk_line_t;

static void bulk_result(GString *out, const bulk_line_t *l, gint64 version, const ixia_error_t *err) {
  g_string_append_printf(out, "{\"line\": %u", l->line);
  if (l->op.key) {
    g_string_append(out, ", \"key\": ");
    append_json_string(out, l->op.key);
  }
  if (err) {
    g_string_append_printf(out, ", \"status\": %u, \"error\": {\"code\": \"%s\", \"message\": ",
                           ixia_http_status_of(err->code), ixia_code_name(err->code));
    append_json_string(out, err->message);
    g_string_append(out, "}}\n");
  } else {
    g_string_append_printf(out, ", \"status\": 200, \"version\": %" G_GINT64_FORMAT "}\n", version);
  }
}

/* Applies a group of lines, results in line order: the readable ones in
 * one atomic write when every op succeeds, else each op on its own so each
 * line gets its own result. */
static void bulk_apply(ixia_api_http_t *h, GArray *group, GString *out, guint *failed) {
  guint n = group->len, m = 0;
  if (!n) return;
  ixia_api_op_t *ops = g_new(ixia_api_op_t, n);
  gint64 *versions = g_new0(gint64, n);
  for (guint i = 0; i < n; i++) {
    bulk_line_t *l = &g_array_index(group, bulk_line_t, i);
    if (!l->err) ops[m++] = l->op;
  }
  gboolean ok = m > 0 && ixia_api_write(h->api, ops, m, versions, NULL);
  for (guint i = 0, j = 0; i < n; i++) {
    bulk_line_t *l = &g_array_index(group, bulk_line_t, i);
    ixia_error_t *err = l->err;
    if (!err && !ok && !ixia_api_write(h->api, &ops[j], 1, &versions[j], &err)) (*failed)++;
    if (l->err) (*failed)++;
    bulk_result(out, l, l->err ? 0 : versions[j], err);
    if (!l->err) j++;
    ixia_error_destroy(err);
    cJSON_Delete(l->obj);
    g_free(l->json);
  }
  g_array_set_size(group, 0);
  g_free(ops);
  g_free(versions);
}

static void route_bulk(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p,
                       const char *ns, const char *table) {
  ixia_http_set_call(r, "bulk");
  if (!allow(h, r, p, IXIA_ACT_WRITE, ns) || defer()) return;
  gsize len;
  const char *body = ixia_http_body(r, &len);
  GString *out = g_string_new(NULL);
  GArray *group = g_array_new(FALSE, FALSE, sizeof(bulk_line_t));
  guint max = ixia_api_max_batch_ops(h->api), lines = 0, failed = 0;
  const ixia_json_limits_t jl = {(gsize)G_MAXINT, NULL, 64, NULL};
  for (const char *p0 = body, *end = body + len; p0 < end;) {
    const char *nl = memchr(p0, '\n', (gsize)(end - p0));
    const char *stop = nl ? nl : end;
    lines++;
    bulk_line_t l = {.line = lines};
    gsize n = (gsize)(stop - p0);
    while (n && (p0[n - 1] == '\r' || p0[n - 1] == ' ')) n--;
    if (n > 0) {
      l.obj = ixia_json_parse_object(p0, n, &jl, "bulk line", &l.err);
      if (l.obj && !op_from_json(l.obj, ns, table, &l.op, &l.json, &l.err)) {
        cJSON_Delete(l.obj);
        l.obj = NULL;
      }
      g_array_append_val(group, l);
      if (group->len >= max) bulk_apply(h, group, out, &failed);
    }
    p0 = stop + 1;
  }
  bulk_apply(h, group, out, &failed);
  g_array_free(group, TRUE);
  char hdr[32];
  g_snprintf(hdr, sizeof hdr, "%u", failed);
  ixia_http_add_header(r, "X-Ixia-Failed-Lines", hdr);
  ixia_http_reply(r, 200, "application/x-ndjson", out->str, out->len);
  g_string_free(out, FALSE);
}

static void route_batch(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p) {
  ixia_http_set_call(r, "batch");
  if (defer()) return;
  cJSON *o = body_object(h, r, "batch");
  if (!o) return;
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "ops");
  guint n = cJSON_IsArray(arr) ? (guint)cJSON_GetArraySize(arr) : 0;
  if (!cJSON_IsArray(arr)) {
    cJSON_Delete(o);
    reply_bad(r, 400, "a batch is {\"ops\": [{\"op\", \"namespace\", \"table\", \"key\", \"doc\", \"expected_version\"}]}");
    return;
  }
  ixia_api_op_t *ops = g_new0(ixia_api_op_t, n + 1);
  char **texts = g_new0(char *, n + 1);
  gint64 *versions = g_new0(gint64, n + 1);
  ixia_error_t *err = NULL;
  gboolean ok = TRUE;
  guint i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    if (!ok) break;
    ok = cJSON_IsObject(it) ? op_from_json(it, NULL, NULL, &ops[i], &texts[i], &err)
                            : ixia_error_set(&err, IXIA_EINVAL, "ops must be objects");
    if (!ok) ixia_error_prefix(err, "batch op %u", i);
    i++;
  }
  ok = ok && ixia_access_allow_ops(h->auth, p, ops, n, &err) &&
       ixia_api_write(h->api, ops, n, versions, &err);
  if (ok) {
    GString *s = g_string_new("{\"versions\": [");
    for (guint j = 0; j < n; j++)
      g_string_append_printf(s, "%s%" G_GINT64_FORMAT, j ? ", " : "", versions[j]);
    g_string_append(s, "]}");
    ixia_http_reply_json(r, 200, g_string_free(s, FALSE));
  } else {
    reply_err(r, err);
  }
  for (guint j = 0; j < n; j++) g_free(texts[j]);
  g_free(texts);
  g_free(ops);
  g_free(versions);
  cJSON_Delete(o);
}

/* ---------- queries and schemas ---------- */

/* The body with "namespace" and "table" from the path (when given); a
 * body naming others is refused. */
static char *with_path_names(ixia_api_http_t *h, ixia_http_req_t *r, const char *ns,
                             const char *table, const char *what) {
  cJSON *o = body_object(h, r, what);
  if (!o) return NULL;
  const char *names[2][2] = {{"namespace", ns}, {"table", table}};
  for (guint i = 0; ns && i < 2; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, names[i][0]);
    if (v && (!cJSON_IsString(v) || strcmp(v->valuestring, names[i][1]) != 0)) {
      reply_bad(r, 400, "the body's \"%s\" differs from the path's '%s'", names[i][0], names[i][1]);
      cJSON_Delete(o);
      return NULL;
    }
    if (!v) cJSON_AddStringToObject(o, names[i][0], names[i][1]);
  }
  char *text = ixia_json_print(o);
  cJSON_Delete(o);
  return text;
}

static void route_query(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p,
                        const char *ns, const char *table) {
  ixia_http_set_call(r, "query");
  if (defer()) return;
  char *req = with_path_names(h, r, ns, table, "query");
  if (!req) return;
  ixia_error_t *err = NULL;
  char *out = ixia_access_allow_json(h->auth, p, IXIA_ACT_QUERY, req, &err)
                  ? ixia_api_query(h->api, req, &err)
                  : NULL;
  g_free(req);
  if (out) ixia_http_reply_json(r, 200, out);
  else reply_err(r, err);
}

static void route_schema(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p,
                         const char *ns, const char *table) {
  if (is(r, "GET")) {
    ixia_http_set_call(r, "getSchema");
    if (!allow(h, r, p, IXIA_ACT_READ, ns)) return;
    ixia_error_t *err = NULL;
    char *out = ixia_api_get_schema(h->api, ns, table, &err);
    if (out) ixia_http_reply_json(r, 200, out);
    else reply_err(r, err);
    return;
  }
  if (!is(r, "PUT") && !is(r, "POST")) {
    method_not_allowed(r, "GET, PUT");
    return;
  }
  ixia_http_set_call(r, "applySchema");
  if (defer()) return;
  char *schema = with_path_names(h, r, ns, table, "schema");
  if (!schema) return;
  ixia_error_t *err = NULL;
  gint64 version = 0;
  gboolean ok = ixia_access_allow_json(h->auth, p, IXIA_ACT_SCHEMA, schema, &err) &&
                ixia_api_apply_schema(h->api, schema, &version, &err);
  g_free(schema);
  if (ok) ixia_http_reply_json(r, 200, g_strdup_printf("{\"version\": %" G_GINT64_FORMAT "}", version));
  else reply_err(r, err);
}

/* ---------- admin ---------- */

static void route_snapshot(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p) {
  ixia_http_set_call(r, "snapshot");
  if (!allow(h, r, p, IXIA_ACT_ADMIN, NULL) || defer()) return;
  cJSON *o = body_object(h, r, "snapshot request");
  if (!o) return;
  const cJSON *dir = cJSON_GetObjectItemCaseSensitive(o, "dir");
  ixia_error_t *err = NULL;
  char *out = cJSON_IsString(dir) ? ixia_api_snapshot(h->api, dir->valuestring, &err) : NULL;
  if (!cJSON_IsString(dir)) err = ixia_error_new(IXIA_EINVAL, "a snapshot request is {\"dir\": \"/absolute/path\"}");
  cJSON_Delete(o);
  if (out) ixia_http_reply_json(r, 200, out);
  else reply_err(r, err);
}

static gboolean wal_one(gint64 first, gint64 last, const char *data, size_t len, gpointer user) {
  GString *s = user;
  (void)last;
  char *b64 = g_base64_encode((const guchar *)data, len);
  if (s->str[s->len - 1] != '[') g_string_append(s, ", ");
  g_string_append_printf(s, "{\"sequence\": %" G_GINT64_FORMAT ", \"data\": \"%s\"}", first, b64);
  g_free(b64);
  return TRUE;
}

static void route_wal(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p) {
  ixia_http_set_call(r, "walSince");
  if (!allow(h, r, p, IXIA_ACT_ADMIN, NULL) || defer()) return;
  const char *after = ixia_http_arg(r, "after"), *max = ixia_http_arg(r, "max_bytes");
  GString *s = g_string_new("{\"batches\": [");
  ixia_error_t *err = NULL;
  if (!ixia_api_wal_since(h->api, after ? g_ascii_strtoll(after, NULL, 10) : -1,
                          max ? g_ascii_strtoll(max, NULL, 10) : 1 << 20, wal_one, s, &err)) {
    g_string_free(s, TRUE);
    reply_err(r, err);
    return;
  }
  g_string_append(s, "]}");
  ixia_http_reply_json(r, 200, g_string_free(s, FALSE));
}

static void route_keys(ixia_api_http_t *h, ixia_http_req_t *r, const ixia_principal_t *p,
                       const char *id) {
  if (!allow(h, r, p, IXIA_ACT_ADMIN, NULL)) return;
  ixia_error_t *err = NULL;
  if (!h->auth) {
    reply_err(r, ixia_error_new(IXIA_EUNSUPPORTED, "this API has no key store"));
  } else if (!id && is(r, "GET")) {
    ixia_http_set_call(r, "listKeys");
    ixia_http_reply_json(r, 200, ixia_auth_list_keys(h->auth));
  } else if (!id && is(r, "POST")) {
    ixia_http_set_call(r, "createKey");
    if (defer()) return;
    char *out = ixia_auth_create_key(h->auth, ixia_http_body(r, NULL), &err);
    if (out) ixia_http_reply_json(r, 201, out);
    else reply_err(r, err);
  } else if (id && is(r, "DELETE")) {
    ixia_http_set_call(r, "revokeKey");
    if (defer()) return;
    if (!ixia_auth_revoke_key(h->auth, id, &err)) reply_err(r, err);
    else {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "revoked", id);
      ixia_http_reply_json(r, 200, ixia_json_print(o));
      cJSON_Delete(o);
    }
  } else {
    method_not_allowed(r, id ? "DELETE" : "GET, POST");
  }
}

static void route_shards(ixia_api_http_t *h, ixia_http_req_t *r) {
  char *text = ixia_api_stats(h->api);
  cJSON *st = cJSON_Parse(text);
  g_free(text);
  const cJSON *shards = cJSON_GetObjectItemCaseSensitive(st, "query_indexers");
  char **addrs = g_strsplit(cJSON_IsString(shards) ? shards->valuestring : "", ",", -1);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "shards", ixia_shard_statuses(addrs, ixia_client_timeouts()->status_ms, NULL));
  g_strfreev(addrs);
  cJSON_Delete(st);
  ixia_http_reply_json(r, 200, ixia_json_print(o));
  cJSON_Delete(o);
}

/* ---------- dispatch ---------- */

static void route_v1(ixia_api_http_t *h, ixia_http_req_t *r, const char *rest) {
  ixia_principal_t *p = NULL;
  if (!principal(h, r, &p)) return;
  if (!strcmp(rest, "_stats")) {
    ixia_http_set_call(r, "stats");
    if (!is(r, "GET")) method_not_allowed(r, "GET");
    else if (allow(h, r, p, 0, NULL)) ixia_http_reply_json(r, 200, ixia_api_stats(h->api));
  } else if (!strcmp(rest, "_shards")) {
    ixia_http_set_call(r, "shards");
    if (!is(r, "GET")) method_not_allowed(r, "GET");
    else if (allow(h, r, p, 0, NULL) && !defer()) route_shards(h, r);
  } else if (!strcmp(rest, "_keys") || g_str_has_prefix(rest, "_keys/")) {
    route_keys(h, r, p, rest[5] == '/' && rest[6] ? rest + 6 : NULL);
  } else if (!strcmp(rest, "_snapshot")) {
    if (is(r, "POST")) route_snapshot(h, r, p);
    else method_not_allowed(r, "POST");
  } else if (!strcmp(rest, "_wal")) {
    if (is(r, "GET")) route_wal(h, r, p);
    else method_not_allowed(r, "GET");
  } else if (!strcmp(rest, "_batch")) {
    if (is(r, "POST")) route_batch(h, r, p);
    else method_not_allowed(r, "POST");
  } else if (!strcmp(rest, "_query")) {
    if (is(r, "POST")) route_query(h, r, p, NULL, NULL);
    else method_not_allowed(r, "POST");
  } else if (!strcmp(rest, "_schema")) {
    if (is(r, "PUT") || is(r, "POST")) route_schema(h, r, p, NULL, NULL);
    else method_not_allowed(r, "PUT");
  } else {
    /* {ns}/{table}/{resource}[/{key}] */
    /* Split in one copy (g_strsplit allocated once per part). */
    char *copy = g_strdup(rest), *parts[4] = {NULL};
    guint n = 0;
    for (char *c = copy; n < 4;) {
      parts[n++] = c;
      char *slash = n < 4 ? strchr(c, '/') : NULL;
      if (!slash) break;
      *slash = 0;
      c = slash + 1;
    }
    const char *ns = n > 0 ? parts[0] : "", *table = n > 1 ? parts[1] : "";
    const char *res = n > 2 ? parts[2] : "";
    if (n < 3 || !*ns || !*table) {
      reply_err(r, ixia_error_new(IXIA_ENOTFOUND,
                                  "no such resource %s: see docs/HTTP.md (/v1/{namespace}/{table}/"
                                  "docs/{key}, .../_query, .../_bulk, .../_schema, /v1/_stats)",
                                  ixia_http_path(r)));
    } else if (!strcmp(res, "docs") && n == 4 && *parts[3]) {
      const char *key = parts[3];
      if (is(r, "GET") || is(r, "HEAD")) {
        if (allow(h, r, p, IXIA_ACT_READ, ns)) route_get_doc(h, r, ns, table, key);
      } else if (is(r, "PUT")) route_write_doc(h, r, p, IXIA_WRITE_PUT, ns, table, key);
      else if (is(r, "PATCH")) route_write_doc(h, r, p, IXIA_WRITE_UPSERT, ns, table, key);
      else if (is(r, "DELETE")) route_write_doc(h, r, p, IXIA_WRITE_DELETE, ns, table, key);
      else method_not_allowed(r, "GET, PUT, PATCH, DELETE");
    } else if (!strcmp(res, "docs") && (n == 3 || !*parts[3])) {
      if (!is(r, "GET")) method_not_allowed(r, "GET");
      else if (ixia_http_arg(r, "keys")) {
        if (allow(h, r, p, IXIA_ACT_READ, ns)) route_multi_get(h, r, ns, table);
      } else route_scan(h, r, p, ns, table);
    } else if (!strcmp(res, "_bulk") && n == 3) {
      if (is(r, "POST")) route_bulk(h, r, p, ns, table);
      else method_not_allowed(r, "POST");
    } else if (!strcmp(res, "_query") && n == 3) {
      if (is(r, "POST")) route_query(h, r, p, ns, table);
      else method_not_allowed(r, "POST");
    } else if (!strcmp(res, "_schema") && n == 3) {
      route_schema(h, r, p, ns, table);
    } else {
      reply_err(r, ixia_error_new(IXIA_ENOTFOUND, "no such resource %s (see docs/HTTP.md)",
                                  ixia_http_path(r)));
    }
    g_free(copy);
  }
  ixia_principal_unref(p);
}

void ixia_api_http_handle(ixia_http_req_t *r, gpointer user) {
  ixia_api_http_t *h = user;
  const char *path = ixia_http_path(r);
  if (!strcmp(path, "/") || !strcmp(path, "/index.html")) {
    ixia_http_set_call(r, "console");
    if (is(r, "GET") || is(r, "HEAD"))
      ixia_http_reply_static(r, 200, "text/html; charset=utf-8", ixia_console_html,
                             ixia_console_html_len);
    else method_not_allowed(r, "GET");
  } else if (g_str_has_prefix(path, "/v1/")) {
    route_v1(h, r, path + 4);
  } else {
    reply_err(r, ixia_error_new(IXIA_ENOTFOUND,
                                "no such path %s: the API is under /v1/ (docs/HTTP.md); / is the "
                                "status console",
                                path));
  }
}

/* ---------- readiness and metrics ---------- */

gboolean ixia_api_http_ready(gpointer user, GPtrArray *reasons) {
  ixia_api_http_t *h = user;
  char *text = ixia_api_stats(h->api);
  cJSON *st = cJSON_Parse(text);
  g_free(text);
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "replication_gap")))
    g_ptr_array_add(reasons, g_strdup_printf(
                                 "replication gap: the WAL no longer holds version %.0f; rebuild "
                                 "the index from a snapshot (docs/OPERATIONS.md)",
                                 cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(
                                     st, "replication_gap_missing_from"))));
  else {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(st, "replication_last_error");
    if (cJSON_IsString(e) &&
        cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(st, "replication_lag")) > 0)
      g_ptr_array_add(reasons, g_strdup_printf("replication failing (sink or Kafka unreachable): %s",
                                               e->valuestring));
  }
  const cJSON *shards = cJSON_GetObjectItemCaseSensitive(st, "query_indexers");
  char **addrs = g_strsplit(cJSON_IsString(shards) ? shards->valuestring : "", ",", -1);
  cJSON *statuses = ixia_shard_statuses(addrs, ixia_client_timeouts()->status_ms, NULL);
  const cJSON *it;
  cJSON_ArrayForEach(it, statuses) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(it, "error");
    if (cJSON_IsString(e))
      g_ptr_array_add(reasons, g_strdup_printf("index shard %s unreachable: %s",
                                               cJSON_GetObjectItemCaseSensitive(it, "address")->valuestring,
                                               e->valuestring));
  }
  cJSON_Delete(statuses);
  g_strfreev(addrs);
  cJSON_Delete(st);
  return reasons->len == 0;
}

/* The API's stats as Prometheus families: one table, so the names stay
 * put. */
static const ixia_prom_stat_t STAT_METRICS[] = {
    {"store_latest_version", "ixia_store_latest_version", "gauge", "Latest version (WAL sequence) of the truth store.", 0},
    {"store_write_requests", "ixia_store_write_requests_total", "counter", "Write calls the store committed or refused.", 0},
    {"store_write_ops", "ixia_store_write_ops_total", "counter", "Edits written to the truth store.", 0},
    {"store_write_groups", "ixia_store_write_groups_total", "counter", "Group commits (synced WAL writes); ops/groups is the mean group size.", 0},
    {"store_conflicts", "ixia_store_conflicts_total", "counter", "Conditional writes refused for a version mismatch.", 0},
    {"store_gets", "ixia_store_gets_total", "counter", "Reads of the truth store.", 0},
    {"store_disk_free_bytes", "ixia_store_disk_free_bytes", "gauge", "Free bytes on store.path's file system.", 0},
    {"store_disk_full", "ixia_store_disk_full", "gauge", "1 while writes are refused under store.disk_reserve_mb.", 0},
    {"gets_from_memory", "ixia_gets_from_memory_total", "counter", "Gets answered from the store's memory (memcached not asked).", 0},
    {"cache_hits", "ixia_cache_hits_total", "counter", "Gets answered by memcached.", 0},
    {"cache_misses", "ixia_cache_misses_total", "counter", "Gets memcached could not answer.", 0},
    {"cache_hit_ratio", "ixia_cache_hit_ratio", "gauge", "cache hits / (hits + misses) since start.", 0},
    {"cache_errors", "ixia_cache_errors_total", "counter", "memcached calls that failed.", 0},
    {"cache_backfills", "ixia_cache_backfills_total", "counter", "Documents stored in memcached after a miss.", 0},
    {"cache_backfills_stale", "ixia_cache_backfills_stale_total", "counter", "Backfills dropped because a write took their lease.", 0},
    {"cache_backfills_dropped", "ixia_cache_backfills_dropped_total", "counter", "Backfills dropped: queue full (cache.backfill_queue_max).", 0},
    {"cache_invalidation_failures", "ixia_cache_invalidation_failures_total", "counter", "Cache deletes after writes that failed (retried).", 0},
    {"replication_checkpoint", "ixia_replication_checkpoint", "gauge", "Last version a replication sink acknowledged.", 0},
    {"replication_lag", "ixia_replication_lag_versions", "gauge", "Versions committed but not yet in Kafka.", 0},
    {"replication_pending_age_ms", "ixia_replication_lag_seconds", "gauge", "Age of the oldest commit not yet in Kafka; 0 when caught up.", 0.001},
    {"replication_events_published", "ixia_replication_events_published_total", "counter", "Edits acknowledged by sinks since start.", 0},
    {"replication_failures", "ixia_replication_failures_total", "counter", "Failed shipments to sinks.", 0},
    {"replication_reconnects", "ixia_replication_reconnects_total", "counter", "Shipments that succeeded when made again at once on a new connection: the kept one was closed (a sink's idle timeout).", 0},
    {"replication_wal_reads", "ixia_replication_wal_reads_total", "counter", "Reads of the WAL files, made when the in-memory tail does not continue the last shipped version (after a restart, a failure or a backlog over 64 MiB).", 0},
    {"replication_gap", "ixia_replication_gap", "gauge", "1 when the WAL lost versions not yet shipped (rebuild needed).", 0},
    {"queries", "ixia_queries_total", "counter", "Queries run.", 0},
    {"query_errors", "ixia_query_errors_total", "counter", "Queries answered with an error.", 0},
    {"query_shard_errors", "ixia_query_shard_errors_total", "counter", "Failed calls to index shards.", 0},
    {"query_stale_hits_dropped", "ixia_query_stale_hits_dropped_total", "counter", "Hits dropped after re-reading the truth store.", 0},
    {"query_hits_rechecked", "ixia_query_hits_rechecked_total", "counter", "Hits matched again against the stored document: the store holds a newer version than the shard indexed, or the shard could not vouch for the match (a filter with not while documents wait for a backfill, or a batch published during the search).", 0},
    {"tables", "ixia_tables", "gauge", "Tables with a schema.", 0},
    {"connections_open", "ixia_thrift_connections_open", "gauge", "Open Thrift connections.", 0},
    {"connections_refused", "ixia_thrift_connections_refused_total", "counter", "Thrift connections refused (server.max_connections).", 0},
    {"connections_timed_out", "ixia_thrift_connections_timed_out_total", "counter", "Thrift connections closed by server.request_timeout_ms.", 0},
    {"rejected_frames", "ixia_thrift_rejected_frames_total", "counter", "Thrift frames refused (oversized, not Thrift, HTTP).", 0},
};

static void collect(GString *out, gpointer user) {
  ixia_api_http_t *h = user;
  char *text = ixia_api_stats(h->api);
  cJSON *st = cJSON_Parse(text);
  g_free(text);
  ixia_prom_stats(out, st, STAT_METRICS, G_N_ELEMENTS(STAT_METRICS), "ixia-query-api");
  cJSON_Delete(st);
}

static gsize body_limit(const char *method, const char *path, gpointer user) {
  ixia_api_http_t *h = user;
  (void)method;
  return g_str_has_suffix(path, "/_bulk") ? h->max_bulk : h->max_body;
}

ixia_api_http_t *ixia_api_http_new(const ixia_config_t *cfg, ixia_api_t *api, ixia_auth_t *auth,
                                   ixia_error_t **err) {
  if (ixia_config_int(cfg, "http.port") < 0) return NULL;
  ixia_api_http_t *h = g_new0(ixia_api_http_t, 1);
  h->api = api;
  h->auth = auth;
  h->max_body = (gsize)ixia_config_int(cfg, "http.max_body_bytes");
  h->max_bulk = (gsize)ixia_config_int(cfg, "http.max_bulk_bytes");
  ixia_http_opts_t o = {.name = "ixia-query-api",
                        .host = ixia_config_str(cfg, "http.host"),
                        .port = (int)ixia_config_int(cfg, "http.port"),
                        .port_file = ixia_config_str(cfg, "http.port_file"),
                        .handler = ixia_api_http_handle,
                        .ready = ixia_api_http_ready,
                        .body_limit = body_limit,
                        .collect = collect,
                        .user = h};
  h->http = ixia_http_new(cfg, &o, err);
  if (!h->http) {
    ixia_api_http_destroy(h);
    return NULL;
  }
  return h;
}

void ixia_api_http_destroy(ixia_api_http_t *h) {
  if (!h) return;
  ixia_http_destroy(h->http);
  g_free(h);
}

int ixia_api_http_port(const ixia_api_http_t *h) { return h ? ixia_http_port(h->http) : -1; }
