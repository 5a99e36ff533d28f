/* Thrift helpers: in-memory (de)serialization of structs, and a memory
 * transport that is safe on untrusted bytes.
 *
 * Stock ThriftMemoryBuffer returns 0 bytes when a message's length fields
 * ask for more than it holds, and Thrift's read_all then spins forever; the
 * buffer here fails such reads with an error instead. Thread-safe: no shared
 * state. */
#ifndef IXIA_THRIFT_UTIL_H
#define IXIA_THRIFT_UTIL_H

#include <thrift/c_glib/thrift_struct.h>
#include <thrift/c_glib/transport/thrift_memory_buffer.h>

#include "error.h"
#include "ixia_ixia_types.h"

/* A memory transport holding at most max_size bytes; g_object_unref it. */
ThriftMemoryBuffer *ixia_frame_buffer_new(guint32 max_size);

/* Replaces the buffer's contents with data and rewinds its read cursor. */
void ixia_frame_buffer_load(ThriftMemoryBuffer *buf, const guint8 *data, gsize len);

/* Converts err into the IxiaError exception a handler returns (the one
 * place ixia_error_t becomes Thrift); frees err. Always returns FALSE. */
/* Registers every generated Thrift type once (thread-safe, idempotent). The
 * generated *_get_type() functions race when two threads make the first
 * object of a type at once; every entry point that may run Thrift code on
 * several threads (servers, clients) calls this first. */
void ixia_thrift_init(void);

/* A change event with every field set (format 1). Strings are copied; doc
 * may be NULL (deletes). */
IxiaChangeEvent *ixia_change_event_new(IxiaChangeOp op, const char *ns, size_t ns_len,
                                       const char *table, size_t table_len, const char *key,
                                       size_t key_len, gint64 version, const char *doc,
                                       size_t doc_len, gint64 expire_at, gint64 timestamp_ms);

/* A WAL batch message: the batch's first sequence and a copy of its bytes. */
IxiaWalBatch *ixia_wal_batch_new(gint64 sequence, const char *data, size_t len);

gboolean ixia_error_to_thrift(IxiaIxiaError **xe, ixia_error_t *err);

/* Serializes s (binary or compact protocol). Returns a new GByteArray. */
GByteArray *ixia_thrift_serialize(ThriftStruct *s, gboolean compact, ixia_error_t **err);
/* Reads data into s (a new, empty struct of the expected type). */
gboolean ixia_thrift_deserialize(ThriftStruct *s, const guint8 *data, gsize len, gboolean compact,
                                 ixia_error_t **err);

#endif
