/* Listings of the truth store for self-healing shards and anti-entropy
 * (truthscan.h). Every listing is one ixia_store_scan (one RocksDB snapshot)
 * that stops at the interval's end or its limit; the partition filter
 * hashes each key's truth-store key as the sink's partitioner does. */
#include "truthscan.h"

#include <string.h>

#include "antientropy.h"
#include "kafka_util.h"
#include "store.h"
#include "thrift_util.h"
#include "wire.h"

typedef struct {
  GByteArray *key;  /* the table's truth-store key prefix, then the document key */
  guint prefix_len;
  gboolean *owned;  /* by partition; NULL: every key */
  gint32 n;
} filter_t;

static gboolean filter_init(filter_t *f, const char *ns, const char *table,
                            const ixia_truthscan_filter_t *in, ixia_error_t **err) {
  memset(f, 0, sizeof *f);
  if (!in || in->partition_count <= 0 || in->n_partitions == 0) return TRUE;
  if (in->partition_count > IXIA_TRUTHSCAN_MAX_PARTITIONS)
    return ixia_error_set(err, IXIA_EINVAL, "partition_count %d is over %d", (int)in->partition_count,
                          IXIA_TRUTHSCAN_MAX_PARTITIONS);
  f->n = in->partition_count;
  f->owned = g_new0(gboolean, f->n);
  for (guint i = 0; i < in->n_partitions; i++) {
    gint32 p = in->partitions[i];
    if (p < 0 || p >= f->n) {
      g_clear_pointer(&f->owned, g_free);
      return ixia_error_set(err, IXIA_EINVAL, "partition %d is not one of the %d partitions", (int)p,
                            (int)f->n);
    }
    f->owned[p] = TRUE;
  }
  GBytes *prefix = ixia_record_doc_key(ns, table, "", 0);
  gsize len;
  const guint8 *data = g_bytes_get_data(prefix, &len);
  f->key = g_byte_array_new();
  g_byte_array_append(f->key, data, (guint)len);
  f->prefix_len = (guint)len;
  g_bytes_unref(prefix);
  return TRUE;
}

static gboolean filter_pass(filter_t *f, const char *key, size_t len) {
  if (!f->owned) return TRUE;
  g_byte_array_set_size(f->key, f->prefix_len);
  g_byte_array_append(f->key, (const guint8 *)key, (guint)len);
  return f->owned[ixia_kafka_partition(f->key->data, f->key->len, f->n)];
}

static void filter_clear(filter_t *f) {
  g_free(f->owned);
  if (f->key) g_byte_array_unref(f->key);
}

/* The table must exist (NOT_FOUND naming it otherwise). */
static gboolean check_table(ixia_api_t *api, const char *ns, const char *table, ixia_error_t **err) {
  char *schema = ixia_api_get_schema(api, ns, table, err);
  g_free(schema);
  return schema != NULL;
}

/* A key beyond the interval's end ("" = none). */
static gboolean past_end(const char *key, size_t len, const char *end) {
  if (!*end) return FALSE;
  size_t el = strlen(end);
  int c = memcmp(key, end, MIN(len, el));
  return c > 0 || (c == 0 && len > el);
}

/* ---------- keyVersions ---------- */

typedef struct {
  filter_t f;
  const char *end;
  GPtrArray *out;
  gint left;
  gsize bytes_left;
} kv_scan_t;

static gboolean kv_one(const char *key, size_t key_len, gint64 version, gint64 expire_at,
                       const char *json, size_t json_len, gpointer user) {
  (void)expire_at, (void)json, (void)json_len;
  kv_scan_t *s = user;
  if (past_end(key, key_len, s->end)) return FALSE;
  if (!filter_pass(&s->f, key, key_len)) return TRUE;
  IxiaKeyVersion *kv = g_object_new(IXIA_TYPE_KEY_VERSION, NULL);
  g_free(kv->key);
  kv->key = g_strndup(key, key_len);
  kv->version = version;
  kv->__isset_key = kv->__isset_version = TRUE;
  g_ptr_array_add(s->out, kv);
  gsize size = key_len + 24;
  s->bytes_left = size < s->bytes_left ? s->bytes_left - size : 0;
  return --s->left > 0 && s->bytes_left > 0;
}

gboolean ixia_truthscan_key_versions(ixia_api_t *api, const char *ns, const char *table,
                                     const char *after, const char *end, gint limit,
                                     const ixia_truthscan_filter_t *f, GPtrArray *out,
                                     gint64 *store_version, ixia_error_t **err) {
  if (!check_table(api, ns, table, err)) return FALSE;
  if (limit < 1 || limit > IXIA_TRUTHSCAN_MAX_KEYS)
    return ixia_error_set(err, IXIA_EINVAL, "keyVersions: limit %d is outside 1..%d", limit,
                          IXIA_TRUTHSCAN_MAX_KEYS);
  kv_scan_t s = {.end = end ? end : "", .out = out, .left = limit,
                 .bytes_left = ixia_wire_limits().max_frame / 2};
  if (!filter_init(&s.f, ns, table, f, err)) return FALSE;
  ixia_thrift_init();
  *store_version = ixia_store_latest_version(ixia_api_store(api));
  gboolean ok = ixia_store_scan(ixia_api_store(api), ns, table, after, after ? strlen(after) : 0,
                                kv_one, &s, err);
  filter_clear(&s.f);
  return ok;
}

/* ---------- digest ---------- */

typedef struct {
  filter_t f;
  const char *end;
  ixia_ae_bucketer_t b;
  gboolean more; /* a key of the interval was seen after the bucketer filled */
} dg_scan_t;

static gboolean dg_one(const char *key, size_t key_len, gint64 version, gint64 expire_at,
                       const char *json, size_t json_len, gpointer user) {
  (void)expire_at, (void)json, (void)json_len;
  dg_scan_t *s = user;
  if (past_end(key, key_len, s->end)) return FALSE;
  if (!filter_pass(&s->f, key, key_len)) return TRUE;
  if (s->b.full) {
    s->more = TRUE;
    return FALSE;
  }
  ixia_ae_bucketer_add(&s->b, key, key_len, version);
  return TRUE;
}

gboolean ixia_truthscan_digest(ixia_api_t *api, const char *ns, const char *table,
                               const char *after, const char *end, gint max_keys,
                               gint bucket_keys, const ixia_truthscan_filter_t *f, GPtrArray *out,
                               gint64 *store_version, ixia_error_t **err) {
  if (!check_table(api, ns, table, err)) return FALSE;
  if (max_keys < 1 || max_keys > IXIA_TRUTHSCAN_MAX_DIGEST_KEYS || bucket_keys < 1 ||
      (max_keys + bucket_keys - 1) / bucket_keys > IXIA_TRUTHSCAN_MAX_RANGES)
    return ixia_error_set(err, IXIA_EINVAL,
                          "digest: max_keys must be 1..%d and bucket_keys at least 1, with at most "
                          "%d ranges (max_keys %d, bucket_keys %d)",
                          IXIA_TRUTHSCAN_MAX_DIGEST_KEYS, IXIA_TRUTHSCAN_MAX_RANGES, max_keys,
                          bucket_keys);
  dg_scan_t s = {.end = end ? end : ""};
  if (!filter_init(&s.f, ns, table, f, err)) return FALSE;
  GArray *ranges = ixia_ae_ranges_new();
  ixia_ae_bucketer_init(&s.b, s.end, (guint)max_keys, (guint)bucket_keys, ranges);
  *store_version = ixia_store_latest_version(ixia_api_store(api));
  gboolean ok = ixia_store_scan(ixia_api_store(api), ns, table, after, after ? strlen(after) : 0,
                                dg_one, &s, err);
  filter_clear(&s.f);
  if (ok) {
    ixia_ae_bucketer_finish(&s.b, s.more);
    for (guint i = 0; i < ranges->len; i++) {
      const ixia_ae_range_t *r = &g_array_index(ranges, ixia_ae_range_t, i);
      g_ptr_array_add(out, ixia_range_digest_new(r->last_key, r->count, r->hash));
    }
  } else {
    ixia_ae_bucketer_finish(&s.b, FALSE); /* frees its state */
  }
  g_array_unref(ranges);
  return ok;
}

/* ---------- currentEvents, schemaEvents ---------- */

gboolean ixia_truthscan_current_events(ixia_api_t *api, const char *ns, const char *table,
                                       const char *const *keys, guint n, GPtrArray *out,
                                       ixia_error_t **err) {
  if (!check_table(api, ns, table, err)) return FALSE;
  if (n > ixia_api_max_get_keys(api))
    return ixia_error_set(err, IXIA_ETOOLARGE, "currentEvents: %u keys, over limits.max_get_keys=%u",
                          n, ixia_api_max_get_keys(api));
  if (n == 0) return TRUE;
  ixia_store_t *store = ixia_api_store(api);
  size_t *lens = g_new(size_t, n);
  for (guint i = 0; i < n; i++) lens[i] = strlen(keys[i]);
  ixia_store_doc_t *docs = g_new0(ixia_store_doc_t, n);
  /* Read before the documents: a key missing from them had no live
   * document at this version, so a tombstone at it never hides a later
   * edit. */
  gint64 version = ixia_store_latest_version(store);
  gint64 now_ms = g_get_real_time() / 1000;
  gboolean ok = ixia_store_multi_get(store, ns, table, n, keys, lens, docs, err);
  size_t nl = strlen(ns), tl = strlen(table);
  for (guint i = 0; ok && i < n; i++) {
    const ixia_store_doc_t *d = &docs[i];
    g_ptr_array_add(out, d->found ? ixia_change_event_new(IXIA_CHANGE_OP_PUT, ns, nl, table, tl, keys[i],
                                                          lens[i], d->version, d->json, d->json_len,
                                                          d->expire_at, now_ms)
                                  : ixia_change_event_new(IXIA_CHANGE_OP_DELETE, ns, nl, table, tl,
                                                          keys[i], lens[i], version, NULL, 0, 0, now_ms));
  }
  for (guint i = 0; i < n; i++) g_free(docs[i].json);
  g_free(docs);
  g_free(lens);
  return ok;
}

static void add_schema(const char *ns, const char *table, const char *json, size_t len,
                       gint64 version, gpointer user) {
  g_ptr_array_add(user, ixia_change_event_new(IXIA_CHANGE_OP_SCHEMA, ns, strlen(ns), table,
                                              strlen(table), "", 0, version, json, len, 0,
                                              g_get_real_time() / 1000));
}

gboolean ixia_truthscan_schema_events(ixia_api_t *api, GPtrArray *out, ixia_error_t **err) {
  return ixia_store_foreach_schema(ixia_api_store(api), add_schema, out, err);
}
