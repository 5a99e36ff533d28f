/* Thrift helpers (thrift_util.h): in-memory (de)serialisation through the
 * bounded protocols of wire.h, the messages ixia builds, and the one
 * conversion of ixia_error_t into IxiaError.
 *
 * ixia_thrift_init registers every generated type before threads start
 * (their lazy registration is not thread-safe in c_glib) and replaces
 * c_glib's answer to an unknown method, which leaked the method name. */
#include "thrift_util.h"

#include <stdarg.h>
#include <string.h>

#include <thrift/c_glib/processor/thrift_dispatch_processor.h>
#include <thrift/c_glib/thrift_application_exception.h>

#include "json.h"


GByteArray *ixia_thrift_serialize(ThriftStruct *s, gboolean compact, ixia_error_t **err) {
  ThriftMemoryBuffer *buf = ixia_frame_buffer_new(G_MAXINT32);
  ixia_wire_limits_t lim = ixia_wire_limits();
  ThriftProtocol *p = ixia_wire_protocol_new(THRIFT_TRANSPORT(buf), compact, &lim);
  GError *gerr = NULL;
  GByteArray *out = NULL;
  if (thrift_struct_write(s, p, &gerr) >= 0)
    out = g_byte_array_ref(buf->buf);
  else
    ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "thrift serialize");
  g_object_unref(p);
  g_object_unref(buf);
  return out;
}

gboolean ixia_thrift_deserialize(ThriftStruct *s, const guint8 *data, gsize len, gboolean compact,
                                 ixia_error_t **err) {
  ThriftMemoryBuffer *buf = ixia_frame_buffer_new((guint32)MIN(len, G_MAXINT32));
  ixia_frame_buffer_load(buf, data, len);
  ixia_wire_limits_t lim = ixia_wire_limits();
  ThriftProtocol *p = ixia_wire_protocol_new(THRIFT_TRANSPORT(buf), compact, &lim);
  GError *gerr = NULL;
  gboolean ok = thrift_struct_read(s, p, &gerr) >= 0;
  if (!ok) {
    if (gerr)
      ixia_error_from_gerror(err, gerr, IXIA_EINVAL, "thrift deserialize");
    else
      ixia_error_set(err, IXIA_EINVAL, "thrift deserialize: malformed data");
  }
  g_object_unref(p);
  g_object_unref(buf);
  return ok;
}

gboolean ixia_error_to_thrift(IxiaIxiaError **xe, ixia_error_t *err) {
  *xe = g_object_new(IXIA_TYPE_IXIA_ERROR, "code", (gint32)err->code, "message", err->message, NULL);
  ixia_error_destroy(err);
  return FALSE;
}

ixia_error_t *ixia_thrift_missing(const char *method, ...) {
  va_list ap;
  va_start(ap, method);
  ixia_error_t *err = NULL;
  const char *name;
  while (!err && (name = va_arg(ap, const char *))) {
    const void *value = va_arg(ap, const void *);
    if (!value) err = ixia_error_new(IXIA_EINVAL, "%s: missing argument %s", method, name);
  }
  va_end(ap);
  return err;
}

IxiaChangeEvent *ixia_change_event_new(IxiaChangeOp op, const char *ns, size_t ns_len,
                                       const char *table, size_t table_len, const char *key,
                                       size_t key_len, gint64 version, const char *doc,
                                       size_t doc_len, gint64 expire_at, gint64 timestamp_ms) {
  ixia_thrift_init();
  IxiaChangeEvent *e = g_object_new(IXIA_TYPE_CHANGE_EVENT, NULL);
  e->format = 1;
  e->op = op;
  e->ns = ixia_memdup0(ns, ns_len);
  e->table = ixia_memdup0(table, table_len);
  e->key = g_byte_array_sized_new((guint)key_len);
  g_byte_array_append(e->key, (const guint8 *)key, (guint)key_len);
  e->version = version;
  if (doc) {
    e->doc = ixia_memdup0(doc, doc_len);
    e->__isset_doc = TRUE;
  }
  e->expire_at = expire_at;
  e->timestamp_ms = timestamp_ms;
  e->__isset_format = e->__isset_op = e->__isset_ns = e->__isset_table = e->__isset_key =
      e->__isset_version = e->__isset_expire_at = e->__isset_timestamp_ms = TRUE;
  return e;
}

IxiaRangeDigest *ixia_range_digest_new(const char *last_key, gint64 count, guint64 hash) {
  ixia_thrift_init();
  IxiaRangeDigest *d = g_object_new(IXIA_TYPE_RANGE_DIGEST, NULL);
  g_free(d->last_key);
  d->last_key = g_strdup(last_key);
  d->count = count;
  d->hash = (gint64)hash;
  d->__isset_last_key = d->__isset_count = d->__isset_hash = TRUE;
  return d;
}

IxiaWalBatch *ixia_wal_batch_new(gint64 sequence, const char *data, size_t len) {
  ixia_thrift_init();
  IxiaWalBatch *b = g_object_new(IXIA_TYPE_WAL_BATCH, NULL);
  b->sequence = sequence;
  if (!b->data) b->data = g_byte_array_new(); /* generated init leaves binary NULL */
  g_byte_array_append(b->data, (const guint8 *)data, (guint)len);
  b->__isset_sequence = b->__isset_data = TRUE;
  return b;
}

void ixia_thrift_register_types(void); /* generated: schemas/gen-types-init.cmake */

/* The answer to a call of a method the service does not have. c_glib's
 * own (ThriftDispatchProcessor's dispatch_call, which every generated
 * processor falls back to) leaks the method name when the call's arguments
 * cannot be skipped (found by the search_frame fuzz target); this one
 * frees it on every path and otherwise answers the same
 * TApplicationException. */
static gboolean unknown_method_call(ThriftDispatchProcessor *self, ThriftProtocol *in,
                                    ThriftProtocol *out, gchar *fname, gint32 seqid,
                                    GError **error) {
  (void)self;
  ThriftTransport *t = NULL;
  gboolean ok = thrift_protocol_skip(in, T_STRUCT, error) >= 0 &&
                thrift_protocol_read_message_end(in, error) >= 0;
  if (ok) {
    g_object_get(in, "transport", &t, NULL);
    ok = thrift_transport_read_end(t, error) >= 0;
    g_object_unref(t);
  }
  ok = ok && thrift_protocol_write_message_begin(out, fname, T_EXCEPTION, seqid, error) >= 0;
  if (ok) {
    char *message = g_strconcat("Invalid method name: '", fname, "'", NULL);
    ThriftApplicationException *x =
        g_object_new(THRIFT_TYPE_APPLICATION_EXCEPTION, "type",
                     THRIFT_APPLICATION_EXCEPTION_ERROR_UNKNOWN_METHOD, "message", message, NULL);
    g_free(message);
    ok = thrift_struct_write(THRIFT_STRUCT(x), out, error) >= 0 &&
         thrift_protocol_write_message_end(out, error) >= 0;
    g_object_unref(x);
  }
  if (ok) {
    g_object_get(out, "transport", &t, NULL);
    ok = thrift_transport_write_end(t, error) >= 0 && thrift_transport_flush(t, error) >= 0;
    g_object_unref(t);
  }
  g_free(fname);
  return ok;
}

void ixia_thrift_init(void) {
  static gsize done = 0;
  if (g_once_init_enter(&done)) {
    ixia_thrift_register_types();
    /* Kept for the life of the process. */
    ThriftDispatchProcessorClass *k = g_type_class_ref(THRIFT_TYPE_DISPATCH_PROCESSOR);
    k->dispatch_call = unknown_method_call;
    g_once_init_leave(&done, 1);
  }
}
