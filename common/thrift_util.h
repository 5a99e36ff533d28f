/* Thrift helpers: in-memory (de)serialization of structs through the
 * bounded protocols of wire.h, the messages ixia builds (change events, WAL
 * batches) and the one conversion of ixia_error_t into IxiaError.
 * Thread-safe: no shared state. */
#ifndef IXIA_THRIFT_UTIL_H
#define IXIA_THRIFT_UTIL_H

#include <thrift/c_glib/thrift_struct.h>
#include <thrift/c_glib/transport/thrift_memory_buffer.h>

#include "error.h"
#include "ixia_ixia_types.h"
#include "wire.h"

/* Converts err into the IxiaError exception a handler returns (the one
 * place ixia_error_t becomes Thrift); frees err. Always returns FALSE. */
/* Registers every generated Thrift type once (thread-safe, idempotent). The
 * generated *_get_type() functions race when two threads make the first
 * object of a type at once (the second gets no type, then none ever
 * again: every event undecodable); every entry point that may run Thrift
 * code on several threads calls this first: servers, clients, and
 * ixia_indexer_new, ixia_sink_new and ixia_api_new before their threads. */
void ixia_thrift_init(void);

/* A change event with every field set (format 1). Strings are copied; doc
 * may be NULL (deletes). */
IxiaChangeEvent *ixia_change_event_new(IxiaChangeOp op, const char *ns, size_t ns_len,
                                       const char *table, size_t table_len, const char *key,
                                       size_t key_len, gint64 version, const char *doc,
                                       size_t doc_len, gint64 expire_at, gint64 timestamp_ms);

/* A range digest message (antientropy.h): the digests of a key range. */
IxiaRangeDigest *ixia_range_digest_new(const char *last_key, gint64 count, guint64 hash);

/* A WAL batch message: the batch's first sequence and a copy of its bytes. */
IxiaWalBatch *ixia_wal_batch_new(gint64 sequence, const char *data, size_t len);

gboolean ixia_error_to_thrift(IxiaIxiaError **xe, ixia_error_t *err);

/* Generated handlers receive NULL for an argument the caller left out. The
 * first NULL among the named arguments of a call, as an INVALID_ARGUMENT
 * error naming it ("put: missing argument key"); NULL when all are there.
 * After method: pairs of (const char *name, const void *value), then NULL.
 * IXIA_THRIFT_REQUIRE returns that error from a handler. */
ixia_error_t *ixia_thrift_missing(const char *method, ...) G_GNUC_NULL_TERMINATED;
#define IXIA_THRIFT_REQUIRE(xe, ...)                                \
  do {                                                              \
    ixia_error_t *missing_ = ixia_thrift_missing(__VA_ARGS__, NULL); \
    if (missing_) return ixia_error_to_thrift((xe), missing_);      \
  } while (0)

/* Serializes s (binary or compact protocol). Returns a new GByteArray. */
GByteArray *ixia_thrift_serialize(ThriftStruct *s, gboolean compact, ixia_error_t **err);
/* Reads data into s (a new, empty struct of the expected type), bounded by
 * the process's wire limits (ixia_wire_limits). */
gboolean ixia_thrift_deserialize(ThriftStruct *s, const guint8 *data, gsize len, gboolean compact,
                                 ixia_error_t **err);

#endif
