/* Thrift glue: converts generated types to api.c calls and ixia_error_t to
 * the IxiaError exception, and refuses calls that leave out an argument
 * (generated handlers get NULL for it). No logic lives here. */
#include <string.h>

#include "access.h"
#include "api.h"
#include "ixia_ixia.h"
#include "json.h"
#include "thrift_gate.h"
#include "thrift_util.h"
#include "truthscan.h"
#include "wire.h"

typedef struct {
  IxiaIxiaHandler parent;
  ixia_api_t *api;
  ixia_auth_t *auth; /* NULL: every call allowed */
} IxiaApiHandler;

typedef struct {
  IxiaIxiaHandlerClass parent;
} IxiaApiHandlerClass;

GType ixia_api_handler_get_type(void);
G_DEFINE_TYPE(IxiaApiHandler, ixia_api_handler, IXIA_TYPE_IXIA_HANDLER)

static ixia_api_t *api_of(IxiaIxiaIf *iface) { return ((IxiaApiHandler *)iface)->api; }
static ixia_auth_t *auth_of(IxiaIxiaIf *iface) { return ((IxiaApiHandler *)iface)->auth; }

/* Refuses the call unless the connection's key grants act on ns (access.h). */
#define ALLOW(iface, xe, act, ns)                                                         \
  do {                                                                                    \
    ixia_error_t *denied_ = NULL;                                                         \
    if (!ixia_access_allow(auth_of(iface), ixia_thrift_gate_principal(), act, ns, &denied_)) \
      return ixia_error_to_thrift(xe, denied_);                                           \
  } while (0)

/* A write served by ixia-query-api's server is answered once it is durable
 * (ixia_server_call_later): the thread that decoded it goes on serving, and
 * writes wait for their group commit without holding threads. */
typedef struct {
  ixia_server_call_t *call;
  GType result; /* the call's generated result struct */
  guint n;
} later_write_t;

static void answer_write(gpointer user, const gint64 *versions, ixia_error_t *err) {
  later_write_t *l = user;
  ThriftStruct *r = g_object_new(l->result, NULL);
  IxiaIxiaError *xe = NULL;
  if (err) ixia_error_to_thrift(&xe, err);
  if (l->result == IXIA_TYPE_IXIA_BATCH_RESULT) {
    IxiaIxiaBatchResult *b = IXIA_IXIA_BATCH_RESULT(r);
    if (xe) b->err = xe, b->__isset_err = TRUE;
    else g_array_append_vals(b->success, versions, l->n), b->__isset_success = TRUE;
  } else {
    /* put, upsert and deleteDoc results: the same two fields */
    G_STATIC_ASSERT(sizeof(IxiaIxiaPutResult) == sizeof(IxiaIxiaUpsertResult) &&
                    sizeof(IxiaIxiaPutResult) == sizeof(IxiaIxiaDeleteDocResult));
    IxiaIxiaPutResult *p = (IxiaIxiaPutResult *)r;
    if (xe) p->err = xe, p->__isset_err = TRUE;
    else p->success = versions[0], p->__isset_success = TRUE;
  }
  ixia_server_call_answer(l->call, r);
  g_object_unref(r);
  g_free(l);
}

/* Writes ops: answered later when the server lets the call wait, else at
 * once. FALSE with *xe set for an error to answer now. */
static gboolean write_ops(IxiaIxiaIf *iface, const ixia_api_op_t *ops, guint n, gint64 *versions,
                          GType result, IxiaIxiaError **xe) {
  ixia_error_t *err = NULL;
  ixia_server_call_t *call = ixia_server_call_later();
  if (!call) {
    if (!ixia_api_write(api_of(iface), ops, n, versions, &err)) return ixia_error_to_thrift(xe, err);
    return TRUE;
  }
  later_write_t *l = g_new(later_write_t, 1);
  *l = (later_write_t){call, result, n};
  /* A bad op is answered through the call as well: the processor's own
   * answer is dropped once the call was taken over. */
  if (!ixia_api_write_async(api_of(iface), ops, n, answer_write, l, &err)) answer_write(l, NULL, err);
  return TRUE;
}

static gboolean write_one(IxiaIxiaIf *iface, gint64 *ret, ixia_write_kind_t kind, const gchar *ns,
                          const gchar *table, const gchar *key, const gchar *json, gint64 expected,
                          IxiaIxiaError **xe) {
  ALLOW(iface, xe, IXIA_ACT_WRITE, ns);
  ixia_api_op_t op = {kind, ns, table, key, json, expected};
  GType result = kind == IXIA_WRITE_PUT      ? IXIA_TYPE_IXIA_PUT_RESULT
                 : kind == IXIA_WRITE_UPSERT ? IXIA_TYPE_IXIA_UPSERT_RESULT
                                             : IXIA_TYPE_IXIA_DELETE_DOC_RESULT;
  return write_ops(iface, &op, 1, ret, result, xe);
}

static gboolean h_put(IxiaIxiaIf *iface, gint64 *ret, const gchar *ns, const gchar *table,
                      const gchar *key, const gchar *json, const gint64 expected,
                      IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "put", "ns", ns, "table", table, "key", key, "json", json);
  return write_one(iface, ret, IXIA_WRITE_PUT, ns, table, key, json, expected, xe);
}

static gboolean h_upsert(IxiaIxiaIf *iface, gint64 *ret, const gchar *ns, const gchar *table,
                         const gchar *key, const gchar *json, const gint64 expected,
                         IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "upsert", "ns", ns, "table", table, "key", key, "json", json);
  return write_one(iface, ret, IXIA_WRITE_UPSERT, ns, table, key, json, expected, xe);
}

static gboolean h_delete(IxiaIxiaIf *iface, gint64 *ret, const gchar *ns, const gchar *table,
                         const gchar *key, const gint64 expected, IxiaIxiaError **xe,
                         GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "deleteDoc", "ns", ns, "table", table, "key", key);
  return write_one(iface, ret, IXIA_WRITE_DELETE, ns, table, key, NULL, expected, xe);
}

static gboolean h_batch(IxiaIxiaIf *iface, GArray **ret, const GPtrArray *ops, IxiaIxiaError **xe,
                        GError **error) {
  (void)error;
  ixia_api_t *api = api_of(iface);
  guint n = ops ? ops->len : 0;
  if (n > ixia_api_max_batch_ops(api))
    return ixia_error_to_thrift(xe, ixia_error_new(IXIA_ETOOLARGE,
                                   "batch has %u operations, over the limit of %u (limits.max_batch_ops)",
                                   n, ixia_api_max_batch_ops(api)));
  ixia_api_op_t *aops = g_new0(ixia_api_op_t, n ? n : 1);
  for (guint i = 0; i < n; i++) {
    IxiaWriteOp *w = g_ptr_array_index(ops, i);
    ixia_write_kind_t kind = w->kind == IXIA_OP_KIND_PUT      ? IXIA_WRITE_PUT
                             : w->kind == IXIA_OP_KIND_UPSERT ? IXIA_WRITE_UPSERT
                             : w->kind == IXIA_OP_KIND_DELETE_DOC ? IXIA_WRITE_DELETE
                                                                  : 0;
    aops[i] = (ixia_api_op_t){kind, w->ns, w->table, w->key, w->json, w->expected_version};
  }
  gint64 *versions = g_new0(gint64, n ? n : 1);
  ixia_error_t *err = NULL;
  gboolean ok = ixia_access_allow_ops(auth_of(iface), ixia_thrift_gate_principal(), aops, n, &err);
  if (!ok) ixia_error_to_thrift(xe, err);
  else ok = write_ops(iface, aops, n, versions, IXIA_TYPE_IXIA_BATCH_RESULT, xe);
  if (ok) g_array_append_vals(*ret, versions, n);
  g_free(versions);
  g_free(aops);
  return ok;
}

/* NULL-terminated view of a list<string>; free the array only. */
static const char **fields_of(const GPtrArray *fields) {
  if (!fields || fields->len == 0) return NULL;
  const char **f = g_new0(const char *, fields->len + 1);
  for (guint i = 0; i < fields->len; i++) f[i] = g_ptr_array_index(fields, i);
  return f;
}

static gboolean fill_doc(ixia_api_t *api, IxiaDocument *doc, const gchar *ns, const gchar *table,
                         const gchar *key, const char *const *fields, ixia_error_t **err) {
  gboolean found = FALSE;
  gint64 version = 0;
  char *json = NULL;
  if (!ixia_api_get(api, ns, table, key, fields, &found, &version, &json, err)) return FALSE;
  g_free(doc->key);
  g_free(doc->json);
  doc->found = found;
  doc->key = g_strdup(key);
  doc->version = version;
  doc->json = json ? json : g_strdup("");
  doc->__isset_found = doc->__isset_key = doc->__isset_version = doc->__isset_json = TRUE;
  return TRUE;
}

static gboolean h_get(IxiaIxiaIf *iface, IxiaDocument **ret, const gchar *ns, const gchar *table,
                      const gchar *key, const GPtrArray *fields, IxiaIxiaError **xe,
                      GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "get", "ns", ns, "table", table, "key", key);
  ALLOW(iface, xe, IXIA_ACT_READ, ns);
  const char **f = fields_of(fields);
  ixia_error_t *err = NULL;
  gboolean ok = fill_doc(api_of(iface), *ret, ns, table, key, f, &err);
  g_free(f);
  return ok ? TRUE : ixia_error_to_thrift(xe, err);
}

/* get answered from its frame (wire.h: the generated coding cost more than
 * the get): the same checks and answer as h_get. */
gboolean ixia_api_answer_get(gpointer processor, const guint8 *frame, guint32 size,
                             GByteArray *out) {
  /* Per thread, freed when the thread ends (worker threads come and go). */
  static GPrivate scratch_key = G_PRIVATE_INIT((GDestroyNotify)g_byte_array_unref);
  GByteArray *scratch = g_private_get(&scratch_key);
  if (!scratch) g_private_set(&scratch_key, scratch = g_byte_array_new());
  ixia_wire_get_t call;
  if (!ixia_wire_read_get(frame, size, scratch, &call)) return FALSE;
  IxiaApiHandler *h = (IxiaApiHandler *)((IxiaIxiaProcessor *)processor)->handler;
  ixia_error_t *err = NULL;
  gboolean found = FALSE;
  gint64 version = 0;
  char *json = NULL;
  if (ixia_access_allow(h->auth, ixia_thrift_gate_principal(), IXIA_ACT_READ, call.ns, &err) &&
      ixia_api_get(h->api, call.ns, call.table, call.key, call.fields[0] ? call.fields : NULL,
                   &found, &version, &json, &err))
    ixia_wire_append_get_reply(out, call.seqid, found, call.key, call.key_len, version,
                               json ? json : "", json ? strlen(json) : 0);
  else
    ixia_wire_append_error(out, "get", 3, call.seqid, (gint32)err->code, err->message);
  ixia_error_destroy(err);
  g_free(json);
  return TRUE;
}

static gboolean h_multi_get(IxiaIxiaIf *iface, GPtrArray **ret, const gchar *ns,
                            const gchar *table, const GPtrArray *keys, const GPtrArray *fields,
                            IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "multiGet", "ns", ns, "table", table, "keys", keys);
  ALLOW(iface, xe, IXIA_ACT_READ, ns);
  ixia_api_t *api = api_of(iface);
  guint n = keys ? keys->len : 0;
  if (n > ixia_api_max_get_keys(api))
    return ixia_error_to_thrift(xe, ixia_error_new(IXIA_ETOOLARGE,
                                   "multiGet has %u keys, over the limit of %u (limits.max_get_keys)",
                                   n, ixia_api_max_get_keys(api)));
  const char **f = fields_of(fields);
  const char **k = g_new(const char *, n + 1);
  for (guint i = 0; i < n; i++) k[i] = g_ptr_array_index(keys, i);
  ixia_api_doc_t *docs = g_new0(ixia_api_doc_t, n + 1);
  ixia_error_t *err = NULL;
  gboolean ok = ixia_api_multi_get(api, ns, table, k, n, f, docs, &err);
  for (guint i = 0; ok && i < n; i++) {
    IxiaDocument *doc = g_object_new(IXIA_TYPE_DOCUMENT, NULL);
    g_free(doc->key);
    g_free(doc->json);
    doc->found = docs[i].found;
    doc->key = g_strdup(k[i]);
    doc->version = docs[i].version;
    doc->json = docs[i].json ? docs[i].json : g_strdup("");
    doc->__isset_found = doc->__isset_key = doc->__isset_version = doc->__isset_json = TRUE;
    g_ptr_array_add(*ret, doc);
  }
  g_free(docs);
  g_free(k);
  g_free(f);
  return ok ? TRUE : ixia_error_to_thrift(xe, err);
}

static gboolean add_scanned(const char *key, size_t key_len, gint64 version, gint64 expire_at,
                            const char *json, size_t json_len, gpointer user) {
  IxiaDocument *doc = g_object_new(IXIA_TYPE_DOCUMENT, NULL);
  g_free(doc->key);
  g_free(doc->json);
  doc->found = TRUE;
  doc->key = ixia_memdup0(key, key_len);
  doc->version = version;
  doc->json = ixia_memdup0(json, json_len);
  doc->__isset_found = doc->__isset_key = doc->__isset_version = doc->__isset_json = TRUE;
  if (expire_at > 0) {
    doc->expire_at = expire_at;
    doc->__isset_expire_at = TRUE;
  }
  g_ptr_array_add(user, doc);
  return TRUE;
}

static gboolean h_scan(IxiaIxiaIf *iface, GPtrArray **ret, const gchar *ns, const gchar *table,
                       const gchar *after_key, const gint32 limit, IxiaIxiaError **xe,
                       GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "scan", "ns", ns, "table", table);
  ALLOW(iface, xe, IXIA_ACT_ADMIN, ns);
  ixia_error_t *err = NULL;
  if (!ixia_api_scan(api_of(iface), ns, table, after_key, limit, add_scanned, *ret, &err)) {
    g_ptr_array_set_size(*ret, 0);
    return ixia_error_to_thrift(xe, err);
  }
  return TRUE;
}

/* A query answered later (ixia_fanout_launch). */
static void answer_query(gpointer ud, char *json, ixia_error_t *err) {
  IxiaIxiaQueryResult *r = g_object_new(IXIA_TYPE_IXIA_QUERY_RESULT, NULL);
  if (err) {
    g_free(json);
    ixia_error_to_thrift(&r->err, err);
    r->__isset_err = TRUE;
  } else {
    g_free(r->success);
    r->success = json;
    r->__isset_success = TRUE;
  }
  ixia_server_call_answer(ud, THRIFT_STRUCT(r));
  g_object_unref(r);
}

/* What both readers of a query call do (h_query, ixia_api_answer_query):
 * the key's access check, then on an I/O thread the query is taken over
 * and answered later through done, from its shards' answers, without a
 * thread (fanout.h: TRUE); one that would wait goes to a worker, parsed
 * (*err says so; the answer is dropped). On a worker it runs here, with the
 * I/O thread's parse when it left one: *text, or *err. */
static gboolean query_run(IxiaApiHandler *h, const char *json, ixia_fanout_done_fn done,
                          char **text, ixia_error_t **err) {
  *text = NULL;
  if (!ixia_access_allow_json(h->auth, ixia_thrift_gate_principal(), IXIA_ACT_QUERY, json, err))
    return FALSE;
  if (ixia_server_can_watch()) {
    ixia_fanout_op_t *op = ixia_api_query_prepare(h->api, json);
    ixia_server_call_t *call =
        op && !ixia_fanout_op_on_worker(op) ? ixia_server_call_later() : NULL;
    if (call) {
      ixia_fanout_launch(op, done, call);
      return TRUE;
    }
    ixia_server_defer_with(op, (GDestroyNotify)ixia_fanout_op_free);
    *err = ixia_error_new(IXIA_EUNAVAILABLE, "query deferred to a worker");
    return FALSE;
  }
  ixia_fanout_op_t *op = ixia_server_deferred_data();
  *text = op ? ixia_fanout_op_run(op, err) : ixia_api_query(h->api, json, err);
  return FALSE;
}

static gboolean h_query(IxiaIxiaIf *iface, gchar **ret, const gchar *request_json,
                        IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "query", "request_json", request_json);
  ixia_error_t *err = NULL;
  char *out = NULL;
  if (query_run((IxiaApiHandler *)iface, request_json, answer_query, &out, &err)) {
    *ret = g_strdup(""); /* dropped: the call was taken over */
    return TRUE;
  }
  if (!out) return ixia_error_to_thrift(xe, err);
  *ret = out;
  return TRUE;
}

/* A query taken over by ixia_api_answer_query, answered from its shards'
 * answers. */
static void answer_query_fast(gpointer ud, char *json, ixia_error_t *err) {
  if (err) {
    ixia_server_call_answer_error(ud, (gint32)err->code, err->message);
    ixia_error_destroy(err);
  } else {
    ixia_server_call_answer_string(ud, json, strlen(json));
  }
  g_free(json);
}

/* query answered from its frame (ixia_thrift_gate_set_fast): the same run
 * and answers as h_query without the generated coding (argument and result
 * objects, property reads, a copy of the request and one of the answer:
 * ~8% of the API's CPU on pages of 10). */
gboolean ixia_api_answer_query(gpointer processor, const guint8 *frame, guint32 size,
                               GByteArray *out) {
  gint32 seqid;
  const char *json;
  gsize len;
  if (!ixia_wire_read_string_call(frame, size, "query", &seqid, &json, &len)) return FALSE;
  IxiaApiHandler *h = (IxiaApiHandler *)((IxiaIxiaProcessor *)processor)->handler;
  ixia_error_t *err = NULL;
  char *text = NULL;
  if (query_run(h, json, answer_query_fast, &text, &err)) return TRUE;
  if (text) ixia_wire_append_string_reply(out, "query", seqid, text, strlen(text));
  else ixia_wire_append_error(out, "query", 5, seqid, (gint32)err->code, err->message);
  ixia_error_destroy(err);
  g_free(text);
  return TRUE;
}

static gboolean h_apply_schema(IxiaIxiaIf *iface, gint64 *ret, const gchar *json,
                               IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "applySchema", "schema_json", json);
  ixia_error_t *err = NULL;
  if (!ixia_access_allow_json(auth_of(iface), ixia_thrift_gate_principal(), IXIA_ACT_SCHEMA, json,
                              &err))
    return ixia_error_to_thrift(xe, err);
  return ixia_api_apply_schema(api_of(iface), json, ret, &err) ? TRUE : ixia_error_to_thrift(xe, err);
}

static gboolean h_get_schema(IxiaIxiaIf *iface, gchar **ret, const gchar *ns, const gchar *table,
                             IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "getSchema", "ns", ns, "table", table);
  ALLOW(iface, xe, IXIA_ACT_READ, ns);
  ixia_error_t *err = NULL;
  char *out = ixia_api_get_schema(api_of(iface), ns, table, &err);
  if (!out) return ixia_error_to_thrift(xe, err);
  *ret = out;
  return TRUE;
}

static gboolean h_stats(IxiaIxiaIf *iface, gchar **ret, IxiaIxiaError **xe, GError **error) {
  (void)error;
  ALLOW(iface, xe, 0, NULL);
  *ret = ixia_api_stats(api_of(iface));
  return TRUE;
}

static gboolean h_snapshot(IxiaIxiaIf *iface, gchar **ret, const gchar *dir, IxiaIxiaError **xe,
                           GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "snapshot", "dir", dir);
  ALLOW(iface, xe, IXIA_ACT_ADMIN, NULL);
  ixia_error_t *err = NULL;
  char *out = ixia_api_snapshot(api_of(iface), dir, &err);
  if (!out) return ixia_error_to_thrift(xe, err);
  *ret = out;
  return TRUE;
}

static gboolean add_wal_batch(gint64 first, gint64 last, const char *data, size_t len,
                              gpointer user) {
  (void)last;
  g_ptr_array_add(user, ixia_wal_batch_new(first, data, len));
  return TRUE;
}

static gboolean h_wal_since(IxiaIxiaIf *iface, GPtrArray **ret, const gint64 after,
                            const gint32 max_bytes, IxiaIxiaError **xe, GError **error) {
  (void)error;
  ALLOW(iface, xe, IXIA_ACT_ADMIN, NULL);
  ixia_error_t *err = NULL;
  if (!ixia_api_wal_since(api_of(iface), after, max_bytes, add_wal_batch, *ret, &err)) {
    g_ptr_array_set_size(*ret, 0);
    return ixia_error_to_thrift(xe, err);
  }
  return TRUE;
}

/* Answered by the server's gate (thrift_gate.h) before the processor; this
 * runs only without one (the fuzz targets), where there are no keys. */
static gboolean h_authenticate(IxiaIxiaIf *iface, const gchar *key, IxiaIxiaError **xe,
                               GError **error) {
  (void)error, (void)key;
  ALLOW(iface, xe, 0, NULL);
  return TRUE;
}

static gboolean h_create_key(IxiaIxiaIf *iface, gchar **ret, const gchar *spec, IxiaIxiaError **xe,
                             GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "createKey", "spec_json", spec);
  ALLOW(iface, xe, IXIA_ACT_ADMIN, NULL);
  ixia_error_t *err = NULL;
  char *out = auth_of(iface) ? ixia_auth_create_key(auth_of(iface), spec, &err) : NULL;
  if (!out && !err) err = ixia_error_new(IXIA_EUNSUPPORTED, "this API has no key store");
  if (!out) return ixia_error_to_thrift(xe, err);
  *ret = out;
  return TRUE;
}

static gboolean h_list_keys(IxiaIxiaIf *iface, gchar **ret, IxiaIxiaError **xe, GError **error) {
  (void)error;
  ALLOW(iface, xe, IXIA_ACT_ADMIN, NULL);
  if (!auth_of(iface))
    return ixia_error_to_thrift(xe, ixia_error_new(IXIA_EUNSUPPORTED, "this API has no key store"));
  *ret = ixia_auth_list_keys(auth_of(iface));
  return TRUE;
}

static gboolean h_revoke_key(IxiaIxiaIf *iface, const gchar *id, IxiaIxiaError **xe,
                             GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "revokeKey", "id", id);
  ALLOW(iface, xe, IXIA_ACT_ADMIN, NULL);
  ixia_error_t *err = NULL;
  if (!auth_of(iface)) err = ixia_error_new(IXIA_EUNSUPPORTED, "this API has no key store");
  else if (ixia_auth_revoke_key(auth_of(iface), id, &err)) return TRUE;
  return ixia_error_to_thrift(xe, err);
}

/* The partition filter of keyVersions and digest. */
static ixia_truthscan_filter_t filter_of(gint32 partition_count, const GArray *partitions) {
  ixia_truthscan_filter_t f = {partition_count, partitions ? (const gint32 *)(void *)partitions->data : NULL,
                               partitions ? partitions->len : 0};
  return f;
}

static gboolean h_key_versions(IxiaIxiaIf *iface, IxiaKeyVersionPage **ret, const gchar *ns,
                               const gchar *table, const gchar *after_key, const gchar *end_key,
                               const gint32 limit, const gint32 partition_count,
                               const GArray *partitions, IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "keyVersions", "ns", ns, "table", table);
  ixia_error_t *err = NULL;
  ixia_truthscan_filter_t f = filter_of(partition_count, partitions);
  IxiaKeyVersionPage *page = *ret;
  if (!ixia_truthscan_key_versions(api_of(iface), ns, table, after_key, end_key, limit, &f, page->keys,
                                   &page->store_version, &err)) {
    g_ptr_array_set_size(page->keys, 0);
    return ixia_error_to_thrift(xe, err);
  }
  page->__isset_store_version = page->__isset_keys = TRUE;
  return TRUE;
}

static gboolean h_digest(IxiaIxiaIf *iface, IxiaDigestPage **ret, const gchar *ns, const gchar *table,
                         const gchar *after_key, const gchar *end_key, const gint32 max_keys,
                         const gint32 bucket_keys, const gint32 partition_count,
                         const GArray *partitions, IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "digest", "ns", ns, "table", table);
  ixia_error_t *err = NULL;
  ixia_truthscan_filter_t f = filter_of(partition_count, partitions);
  IxiaDigestPage *page = *ret;
  if (!ixia_truthscan_digest(api_of(iface), ns, table, after_key, end_key, max_keys, bucket_keys, &f,
                             page->ranges, &page->store_version, &err)) {
    g_ptr_array_set_size(page->ranges, 0);
    return ixia_error_to_thrift(xe, err);
  }
  page->__isset_store_version = page->__isset_ranges = TRUE;
  return TRUE;
}

static gboolean h_current_events(IxiaIxiaIf *iface, GPtrArray **ret, const gchar *ns,
                                 const gchar *table, const GPtrArray *keys, IxiaIxiaError **xe,
                                 GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "currentEvents", "ns", ns, "table", table, "keys", keys);
  ixia_error_t *err = NULL;
  if (!ixia_truthscan_current_events(api_of(iface), ns, table, (const char *const *)keys->pdata,
                                     keys->len, *ret, &err)) {
    g_ptr_array_set_size(*ret, 0);
    return ixia_error_to_thrift(xe, err);
  }
  return TRUE;
}

static gboolean h_schema_events(IxiaIxiaIf *iface, GPtrArray **ret, IxiaIxiaError **xe,
                                GError **error) {
  (void)error;
  ixia_error_t *err = NULL;
  if (!ixia_truthscan_schema_events(api_of(iface), *ret, &err)) {
    g_ptr_array_set_size(*ret, 0);
    return ixia_error_to_thrift(xe, err);
  }
  return TRUE;
}

static void ixia_api_handler_init(IxiaApiHandler *self) { (void)self; }

static void ixia_api_handler_class_init(IxiaApiHandlerClass *klass) {
  IxiaIxiaHandlerClass *h = IXIA_IXIA_HANDLER_CLASS(klass);
  h->put = h_put;
  h->upsert = h_upsert;
  h->delete_doc = h_delete;
  h->batch = h_batch;
  h->get = h_get;
  h->multi_get = h_multi_get;
  h->scan = h_scan;
  h->query = h_query;
  h->apply_schema = h_apply_schema;
  h->get_schema = h_get_schema;
  h->stats = h_stats;
  h->wal_since = h_wal_since;
  h->snapshot = h_snapshot;
  h->authenticate = h_authenticate;
  h->create_key = h_create_key;
  h->list_keys = h_list_keys;
  h->revoke_key = h_revoke_key;
  h->key_versions = h_key_versions;
  h->digest = h_digest;
  h->current_events = h_current_events;
  h->schema_events = h_schema_events;
}

ThriftProcessor *ixia_api_processor_new(ixia_api_t *api) {
  return ixia_api_processor_new_with_auth(api, NULL);
}

ThriftProcessor *ixia_api_processor_new_with_auth(ixia_api_t *api, ixia_auth_t *auth) {
  IxiaApiHandler *handler = g_object_new(ixia_api_handler_get_type(), NULL);
  handler->api = api;
  handler->auth = auth;
  ThriftProcessor *p = g_object_new(IXIA_TYPE_IXIA_PROCESSOR, "handler", handler, NULL);
  g_object_unref(handler); /* the processor holds its own reference */
  return p;
}
