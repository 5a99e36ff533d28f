#include "thrift_util.h"

#include <string.h>

#include "json.h"

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/protocol/thrift_compact_protocol.h>
#include <thrift/c_glib/transport/thrift_transport.h>

typedef struct {
  ThriftMemoryBuffer parent;
  guint pos; /* read cursor into parent.buf */
} IxiaFrameBuffer;
typedef struct {
  ThriftMemoryBufferClass parent;
} IxiaFrameBufferClass;
GType ixia_frame_buffer_get_type(void);
G_DEFINE_TYPE(IxiaFrameBuffer, ixia_frame_buffer, THRIFT_TYPE_MEMORY_BUFFER)

/* Reads advance a cursor instead of removing bytes from the front of the
 * array (the stock buffer's memmove per read is quadratic in message size). */
static gint32 frame_buffer_read(ThriftTransport *t, gpointer buf, guint32 len, GError **error) {
  IxiaFrameBuffer *f = (IxiaFrameBuffer *)t;
  GByteArray *b = f->parent.buf;
  if (len > b->len - f->pos) {
    g_set_error(error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_RECEIVE,
                "message needs %u more bytes than it holds", len - (b->len - f->pos));
    return -1;
  }
  memcpy(buf, b->data + f->pos, len);
  f->pos += len;
  return (gint32)len;
}

static void ixia_frame_buffer_init(IxiaFrameBuffer *self) { (void)self; }
static void ixia_frame_buffer_class_init(IxiaFrameBufferClass *klass) {
  THRIFT_TRANSPORT_CLASS(klass)->read = frame_buffer_read;
}

ThriftMemoryBuffer *ixia_frame_buffer_new(guint32 max_size) {
  return g_object_new(ixia_frame_buffer_get_type(), "buf_size", max_size, NULL);
}

void ixia_frame_buffer_load(ThriftMemoryBuffer *mb, const guint8 *data, gsize len) {
  IxiaFrameBuffer *f = (IxiaFrameBuffer *)mb;
  /* Let a one-off large message's memory go rather than keep it per connection. */
  if (mb->buf->len > (1u << 20) && len <= (1u << 20)) {
    g_byte_array_unref(mb->buf);
    mb->buf = g_byte_array_new();
  }
  g_byte_array_set_size(mb->buf, 0);
  g_byte_array_append(mb->buf, data, (guint)len);
  f->pos = 0;
}

static ThriftProtocol *protocol_on(ThriftMemoryBuffer *buf, gboolean compact) {
  return g_object_new(compact ? THRIFT_TYPE_COMPACT_PROTOCOL : THRIFT_TYPE_BINARY_PROTOCOL,
                      "transport", buf, NULL);
}

GByteArray *ixia_thrift_serialize(ThriftStruct *s, gboolean compact, ixia_error_t **err) {
  ThriftMemoryBuffer *buf = ixia_frame_buffer_new(G_MAXINT32);
  ThriftProtocol *p = protocol_on(buf, compact);
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
  ThriftProtocol *p = protocol_on(buf, compact);
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

void ixia_thrift_init(void) {
  static gsize done = 0;
  if (g_once_init_enter(&done)) {
    ixia_thrift_register_types();
    g_once_init_leave(&done, 1);
  }
}
