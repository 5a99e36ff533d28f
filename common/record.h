/* The record codec: how documents and schemas are laid out as RocksDB keys
 * and values in the truth store, and so in the WAL that the replication
 * sink decodes, the snapshots the recovery tools read and the keys an index
 * shard parses out of change events.
 *
 * It lives apart from store/ so that the sink, the indexer and the tools can
 * read records without linking the store (its writer thread, RocksDB
 * options and disk reserve).
 *
 * Key layout, lengths as single bytes:
 *   'd' nslen ns tablelen table key   -> document
 *   's' nslen ns tablelen table       -> schema JSON
 * Value layout: 'D', version (8 bytes big-endian), expire_at (8 bytes
 * big-endian epoch seconds, 0 = never), then the JSON text.
 *
 * Thread safety: pure functions. Returned GBytes belong to the caller. */
#ifndef IXIA_RECORD_H
#define IXIA_RECORD_H

#include <glib.h>

enum { IXIA_RECORD_VALUE_HEADER = 17 };

GBytes *ixia_record_doc_key(const char *ns, const char *table, const char *key, size_t key_len);
GBytes *ixia_record_schema_key(const char *ns, const char *table);
/* Splits a stored key. Outputs (each may be NULL) point into `key` (ns and
 * table are not NUL-terminated: use the lengths). FALSE for a malformed key. */
gboolean ixia_record_parse_key(const char *key, size_t len, char *kind, const char **ns,
                               size_t *ns_len, const char **table, size_t *table_len,
                               const char **doc_key, size_t *doc_key_len);

/* A stored value: header then json[0..len). */
GBytes *ixia_record_encode_value(gint64 version, gint64 expire_at, const char *json, size_t len);
/* Rewrites the version of an encoded value in place (the store's writer
 * learns it only when it orders the group). */
void ixia_record_set_version(guint8 *value, gint64 version);
/* Reads a value header; *json points into value. FALSE if malformed. */
gboolean ixia_record_parse_value(const char *value, size_t len, gint64 *version,
                                 gint64 *expire_at, const char **json, size_t *json_len);

/* Whether a document with this expire_at (0 = never) has expired at `now`
 * (epoch seconds of ixia_time_now): the one rule of the store, the index,
 * its repair and the recovery tools. */
static inline gboolean ixia_record_expired(gint64 expire_at, gint64 now) {
  return expire_at > 0 && expire_at <= now;
}

/* The sequence of the last edit of a RocksDB WriteBatch (a WAL record)
 * whose first edit has `sequence`: its header holds the edit count. */
gint64 ixia_record_batch_last(gint64 sequence, const char *data, size_t len);

#endif
