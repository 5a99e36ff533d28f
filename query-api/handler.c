/* Thrift glue: converts generated types to api.c calls and ixia_error_t to
 * the IxiaError exception, and refuses calls that leave out an argument
 * (generated handlers get NULL for it). No logic lives here. */
#include <string.h>

#include "api.h"
#include "ixia_ixia.h"
#include "json.h"
#include "thrift_util.h"
#include "truthscan.h"

typedef struct {
  IxiaIxiaHandler parent;
  ixia_api_t *api;
} IxiaApiHandler;

typedef struct {
  IxiaIxiaHandlerClass parent;
} IxiaApiHandlerClass;

GType ixia_api_handler_get_type(void);
G_DEFINE_TYPE(IxiaApiHandler, ixia_api_handler, IXIA_TYPE_IXIA_HANDLER)

static ixia_api_t *api_of(IxiaIxiaIf *iface) { return ((IxiaApiHandler *)iface)->api; }

static gboolean write_one(IxiaIxiaIf *iface, gint64 *ret, ixia_write_kind_t kind, const gchar *ns,
                          const gchar *table, const gchar *key, const gchar *json, gint64 expected,
                          IxiaIxiaError **xe) {
  ixia_api_op_t op = {kind, ns, table, key, json, expected};
  ixia_error_t *err = NULL;
  if (!ixia_api_write(api_of(iface), &op, 1, ret, &err)) return ixia_error_to_thrift(xe, err);
  return TRUE;
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
  ixia_error_t *err = NULL;
  for (guint i = 0; i < n; i++) {
    IxiaWriteOp *w = g_ptr_array_index(ops, i);
    ixia_write_kind_t kind = w->kind == IXIA_OP_KIND_PUT      ? IXIA_WRITE_PUT
                             : w->kind == IXIA_OP_KIND_UPSERT ? IXIA_WRITE_UPSERT
                             : w->kind == IXIA_OP_KIND_DELETE_DOC ? IXIA_WRITE_DELETE
                                                                  : 0;
    aops[i] = (ixia_api_op_t){kind, w->ns, w->table, w->key, w->json, w->expected_version};
  }
  gint64 *versions = g_new0(gint64, n ? n : 1);
  gboolean ok = ixia_api_write(api, aops, n, versions, &err);
  if (ok) g_array_append_vals(*ret, versions, n);
  g_free(versions);
  g_free(aops);
  return ok ? TRUE : ixia_error_to_thrift(xe, err);
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
  const char **f = fields_of(fields);
  ixia_error_t *err = NULL;
  gboolean ok = fill_doc(api_of(iface), *ret, ns, table, key, f, &err);
  g_free(f);
  return ok ? TRUE : ixia_error_to_thrift(xe, err);
}

static gboolean h_multi_get(IxiaIxiaIf *iface, GPtrArray **ret, const gchar *ns,
                            const gchar *table, const GPtrArray *keys, const GPtrArray *fields,
                            IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "multiGet", "ns", ns, "table", table, "keys", keys);
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

static gboolean add_scanned(const char *key, size_t key_len, gint64 version, const char *json,
                            size_t json_len, gpointer user) {
  IxiaDocument *doc = g_object_new(IXIA_TYPE_DOCUMENT, NULL);
  g_free(doc->key);
  g_free(doc->json);
  doc->found = TRUE;
  doc->key = ixia_memdup0(key, key_len);
  doc->version = version;
  doc->json = ixia_memdup0(json, json_len);
  doc->__isset_found = doc->__isset_key = doc->__isset_version = doc->__isset_json = TRUE;
  g_ptr_array_add(user, doc);
  return TRUE;
}

static gboolean h_scan(IxiaIxiaIf *iface, GPtrArray **ret, const gchar *ns, const gchar *table,
                       const gchar *after_key, const gint32 limit, IxiaIxiaError **xe,
                       GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "scan", "ns", ns, "table", table);
  ixia_error_t *err = NULL;
  if (!ixia_api_scan(api_of(iface), ns, table, after_key, limit, add_scanned, *ret, &err)) {
    g_ptr_array_set_size(*ret, 0);
    return ixia_error_to_thrift(xe, err);
  }
  return TRUE;
}

static gboolean h_query(IxiaIxiaIf *iface, gchar **ret, const gchar *request_json,
                        IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "query", "request_json", request_json);
  ixia_error_t *err = NULL;
  char *out = ixia_api_query(api_of(iface), request_json, &err);
  if (!out) return ixia_error_to_thrift(xe, err);
  *ret = out;
  return TRUE;
}

static gboolean h_apply_schema(IxiaIxiaIf *iface, gint64 *ret, const gchar *json,
                               IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "applySchema", "schema_json", json);
  ixia_error_t *err = NULL;
  return ixia_api_apply_schema(api_of(iface), json, ret, &err) ? TRUE : ixia_error_to_thrift(xe, err);
}

static gboolean h_get_schema(IxiaIxiaIf *iface, gchar **ret, const gchar *ns, const gchar *table,
                             IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "getSchema", "ns", ns, "table", table);
  ixia_error_t *err = NULL;
  char *out = ixia_api_get_schema(api_of(iface), ns, table, &err);
  if (!out) return ixia_error_to_thrift(xe, err);
  *ret = out;
  return TRUE;
}

static gboolean h_stats(IxiaIxiaIf *iface, gchar **ret, IxiaIxiaError **xe, GError **error) {
  (void)xe, (void)error;
  *ret = ixia_api_stats(api_of(iface));
  return TRUE;
}

static gboolean h_snapshot(IxiaIxiaIf *iface, gchar **ret, const gchar *dir, IxiaIxiaError **xe,
                           GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "snapshot", "dir", dir);
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
  ixia_error_t *err = NULL;
  if (!ixia_api_wal_since(api_of(iface), after, max_bytes, add_wal_batch, *ret, &err)) {
    g_ptr_array_set_size(*ret, 0);
    return ixia_error_to_thrift(xe, err);
  }
  return TRUE;
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
  h->key_versions = h_key_versions;
  h->digest = h_digest;
  h->current_events = h_current_events;
  h->schema_events = h_schema_events;
}

ThriftProcessor *ixia_api_processor_new(ixia_api_t *api) {
  IxiaApiHandler *handler = g_object_new(ixia_api_handler_get_type(), NULL);
  handler->api = api;
  ThriftProcessor *p = g_object_new(IXIA_TYPE_IXIA_PROCESSOR, "handler", handler, NULL);
  g_object_unref(handler); /* the processor holds its own reference */
  return p;
}
