/* The record codec (record.h): keys and values of the truth store.
 *
 * Every reader of stored bytes (the store itself, the replication sink
 * decoding WAL batches, the indexer parsing change-event keys, the recovery
 * tools walking snapshots and backups) goes through these few functions, so
 * the layout is written down once. Parsing never trusts a length byte: a
 * key whose namespace or table length runs past its end is malformed, and a
 * value shorter than its header is refused. */
#include "record.h"

#include <string.h>

#include "bytes.h"

static GByteArray *key_prefix(char kind, const char *ns, const char *table) {
  GByteArray *k = g_byte_array_new();
  guint8 nl = (guint8)strlen(ns), tl = (guint8)strlen(table);
  g_byte_array_append(k, (const guint8 *)&kind, 1);
  g_byte_array_append(k, &nl, 1);
  g_byte_array_append(k, (const guint8 *)ns, nl);
  g_byte_array_append(k, &tl, 1);
  g_byte_array_append(k, (const guint8 *)table, tl);
  return k;
}

GBytes *ixia_record_doc_key(const char *ns, const char *table, const char *key, size_t key_len) {
  GByteArray *k = key_prefix('d', ns, table);
  g_byte_array_append(k, (const guint8 *)key, (guint)key_len);
  return g_byte_array_free_to_bytes(k);
}

GBytes *ixia_record_schema_key(const char *ns, const char *table) {
  return g_byte_array_free_to_bytes(key_prefix('s', ns, table));
}

gboolean ixia_record_parse_key(const char *key, size_t len, char *kind, const char **ns,
                               size_t *ns_len, const char **table, size_t *table_len,
                               const char **doc_key, size_t *doc_key_len) {
  const unsigned char *p = (const unsigned char *)key;
  if (len < 2) return FALSE;
  size_t nl = p[1];
  if (len < 3 + nl) return FALSE;
  size_t tl = p[2 + nl];
  if (len < 3 + nl + tl) return FALSE;
  if (kind) *kind = key[0];
  if (ns) *ns = key + 2;
  if (ns_len) *ns_len = nl;
  if (table) *table = key + 3 + nl;
  if (table_len) *table_len = tl;
  if (doc_key) *doc_key = key + 3 + nl + tl;
  if (doc_key_len) *doc_key_len = len - 3 - nl - tl;
  return TRUE;
}

GBytes *ixia_record_encode_value(gint64 version, gint64 expire_at, const char *json, size_t len) {
  guint8 *buf = g_malloc(IXIA_RECORD_VALUE_HEADER + len);
  buf[0] = 'D';
  ixia_bytes_put64(buf + 1, (guint64)version);
  ixia_bytes_put64(buf + 9, (guint64)expire_at);
  if (len) memcpy(buf + IXIA_RECORD_VALUE_HEADER, json, len);
  return g_bytes_new_take(buf, IXIA_RECORD_VALUE_HEADER + len);
}

void ixia_record_set_version(guint8 *value, gint64 version) {
  ixia_bytes_put64(value + 1, (guint64)version);
}

gboolean ixia_record_parse_value(const char *value, size_t len, gint64 *version,
                                 gint64 *expire_at, const char **json, size_t *json_len) {
  if (len < IXIA_RECORD_VALUE_HEADER || value[0] != 'D') return FALSE;
  if (version) *version = (gint64)ixia_bytes_get64(value + 1);
  if (expire_at) *expire_at = (gint64)ixia_bytes_get64(value + 9);
  if (json) *json = value + IXIA_RECORD_VALUE_HEADER;
  if (json_len) *json_len = len - IXIA_RECORD_VALUE_HEADER;
  return TRUE;
}

gint64 ixia_record_batch_last(gint64 sequence, const char *data, size_t len) {
  /* WriteBatch header: sequence (8 bytes) then the edit count (4 bytes),
   * both little-endian (RocksDB's own convention, not ours). */
  if (len < 12) return sequence - 1;
  const unsigned char *d = (const unsigned char *)data;
  guint32 count = (guint32)d[8] | (guint32)d[9] << 8 | (guint32)d[10] << 16 | (guint32)d[11] << 24;
  return sequence + (gint64)count - 1;
}
