/* Bounded decoding of Thrift bytes from outside the process (see wire.h).
 *
 * Three GObject subclasses of c_glib types live here:
 *
 *  - IxiaFrameBuffer (a ThriftMemoryBuffer) holds one message and reads it
 *    through a cursor, so the protocols can ask how many bytes are left;
 *  - IxiaWireSocket (an IxiaFrameBuffer) is a client's framed connection:
 *    it receives a whole response frame, size-checked, into itself;
 *  - IxiaWireBinaryProtocol / IxiaWireCompactProtocol override the read
 *    methods through which untrusted lengths and nesting enter: strings and
 *    binaries are read here entirely (length checked against the bytes
 *    left, out-parameters always initialised), container headers are
 *    checked after the parent parsed them, and a depth and item count per
 *    message bound what thrift_protocol_skip and the generated readers do.
 *
 * Everything else (field headers, scalars, the compact protocol's bool and
 * delta state) is c_glib's own code, which cannot read out of bounds once
 * its transport refuses reads past the message. */
#include "wire.h"

#include "bytes.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/protocol/thrift_compact_protocol.h>

/* ---------- limits ---------- */

ixia_wire_limits_t ixia_wire_limits_from_config(const ixia_config_t *cfg) {
  return (ixia_wire_limits_t){
      .max_frame = (guint32)ixia_config_int(cfg, "server.max_frame_bytes"),
      .max_depth = (guint32)ixia_config_int(cfg, "server.max_depth"),
      .max_items = (guint32)ixia_config_int(cfg, "server.max_items"),
  };
}

static ixia_wire_limits_t process_limits;
static gsize process_limits_set;

ixia_wire_limits_t ixia_wire_limits(void) {
  if (g_once_init_enter(&process_limits_set)) {
    ixia_config_t *defaults = ixia_config_new();
    process_limits = ixia_wire_limits_from_config(defaults);
    ixia_config_destroy(defaults);
    g_once_init_leave(&process_limits_set, 1);
  }
  return process_limits;
}

void ixia_wire_set_limits(const ixia_wire_limits_t *lim) {
  (void)ixia_wire_limits();
  process_limits = *lim;
}

static gint32 fail(GError **error, gint code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gint32 fail(GError **error, gint code, const char *fmt, ...) {
  if (error && !*error) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, THRIFT_PROTOCOL_ERROR, code, msg);
    g_free(msg);
  }
  return -1;
}

/* ---------- IxiaFrameBuffer ---------- */

typedef struct {
  ThriftMemoryBuffer parent;
  guint pos; /* read cursor into parent.buf */
} IxiaFrameBuffer;
typedef struct {
  ThriftMemoryBufferClass parent;
} IxiaFrameBufferClass;
GType ixia_frame_buffer_get_type(void);
G_DEFINE_TYPE(IxiaFrameBuffer, ixia_frame_buffer, THRIFT_TYPE_MEMORY_BUFFER)
#define IXIA_IS_FRAME_BUFFER(o) G_TYPE_CHECK_INSTANCE_TYPE((o), ixia_frame_buffer_get_type())

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

void ixia_frame_buffer_reset(ThriftMemoryBuffer *mb) {
  /* Let a one-off large message's memory go rather than keep it. */
  if (mb->buf->len > (1u << 20)) {
    g_byte_array_unref(mb->buf);
    mb->buf = g_byte_array_new();
  }
  g_byte_array_set_size(mb->buf, 0);
  ((IxiaFrameBuffer *)mb)->pos = 0;
}

void ixia_frame_buffer_load(ThriftMemoryBuffer *mb, const guint8 *data, gsize len) {
  ixia_frame_buffer_reset(mb);
  g_byte_array_append(mb->buf, data, (guint)len);
}

guint32 ixia_frame_buffer_remaining(ThriftMemoryBuffer *mb) {
  IxiaFrameBuffer *f = (IxiaFrameBuffer *)mb;
  return mb->buf->len - f->pos;
}

/* ---------- IxiaWireSocket ---------- */

typedef struct {
  IxiaFrameBuffer parent;
  int fd;
  guint32 max_frame;
  gboolean in_message; /* a frame was received and its message not ended */
  GByteArray *out;     /* 4 bytes of room for the frame header, then the message */
} IxiaWireSocket;
typedef struct {
  IxiaFrameBufferClass parent;
} IxiaWireSocketClass;
GType ixia_wire_socket_get_type(void);
G_DEFINE_TYPE(IxiaWireSocket, ixia_wire_socket, ixia_frame_buffer_get_type())

static gboolean recv_all(IxiaWireSocket *s, guint8 *p, gsize n, GError **error) {
  while (n > 0) {
    ssize_t r = recv(s->fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      g_set_error(error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_RECEIVE, "%s",
                  r == 0 ? "connection closed by the server"
                  : errno == EAGAIN || errno == EWOULDBLOCK ? "no answer within the I/O timeout"
                                                            : g_strerror(errno));
      return FALSE;
    }
    p += r;
    n -= (gsize)r;
  }
  return TRUE;
}

/* Receives the next whole frame into the buffer. */
static gboolean socket_fill(IxiaWireSocket *s, GError **error) {
  ThriftMemoryBuffer *mb = (ThriftMemoryBuffer *)s;
  guint8 hdr[4];
  if (!recv_all(s, hdr, 4, error)) return FALSE;
  guint32 size = GUINT32_FROM_BE(*(guint32 *)(void *)hdr);
  if (size > s->max_frame) {
    g_set_error(error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_RECEIVE,
                "the answer is a frame of %u bytes, over server.max_frame_bytes=%u on this "
                "client (set the same limit on both sides)",
                size, s->max_frame);
    return FALSE;
  }
  ixia_frame_buffer_reset(mb);
  g_byte_array_set_size(mb->buf, size);
  return recv_all(s, mb->buf->data, size, error);
}

static gint32 socket_read(ThriftTransport *t, gpointer buf, guint32 len, GError **error) {
  IxiaWireSocket *s = (IxiaWireSocket *)t;
  /* A message's first read brings its frame; it never spans two frames. */
  if (!s->in_message && len > 0) {
    if (!socket_fill(s, error)) return -1;
    s->in_message = TRUE;
  }
  return frame_buffer_read(t, buf, len, error);
}

static gboolean socket_read_end(ThriftTransport *t, GError **error) {
  (void)error;
  IxiaFrameBuffer *f = (IxiaFrameBuffer *)t;
  f->pos = f->parent.buf->len; /* the rest of this frame is not ours */
  ((IxiaWireSocket *)t)->in_message = FALSE;
  return TRUE;
}

static gboolean socket_write(ThriftTransport *t, const gpointer buf, const guint32 len,
                             GError **error) {
  IxiaWireSocket *s = (IxiaWireSocket *)t;
  if ((guint64)s->out->len - 4 + len > s->max_frame) {
    g_set_error(error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_SEND,
                "the request is over server.max_frame_bytes=%u", s->max_frame);
    return FALSE;
  }
  g_byte_array_append(s->out, buf, len);
  return TRUE;
}

static gboolean socket_flush(ThriftTransport *t, GError **error) {
  IxiaWireSocket *s = (IxiaWireSocket *)t;
  /* A new call: whatever is left of the last answer (one that failed to
   * decode never reached read_end) is not read as this call's. */
  socket_read_end(t, NULL);
  guint32 be = GUINT32_TO_BE(s->out->len - 4);
  memcpy(s->out->data, &be, 4);
  const guint8 *p = s->out->data;
  gsize n = s->out->len;
  gboolean ok = TRUE;
  while (n > 0) {
    ssize_t w = send(s->fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      g_set_error(error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_SEND, "send: %s",
                  w == 0 ? "nothing sent" : g_strerror(errno));
      ok = FALSE;
      break;
    }
    p += w;
    n -= (gsize)w;
  }
  g_byte_array_set_size(s->out, 4);
  return ok;
}

static gboolean socket_write_end(ThriftTransport *t, GError **error) {
  (void)t, (void)error;
  return TRUE;
}

static gboolean socket_is_open(ThriftTransport *t) { return ((IxiaWireSocket *)t)->fd >= 0; }
static gboolean socket_open_close(ThriftTransport *t, GError **error) {
  (void)t, (void)error;
  return TRUE;
}

static void ixia_wire_socket_init(IxiaWireSocket *s) {
  s->fd = -1;
  s->out = g_byte_array_new();
  g_byte_array_set_size(s->out, 4);
}

static void socket_finalize(GObject *o) {
  g_byte_array_unref(((IxiaWireSocket *)o)->out);
  G_OBJECT_CLASS(ixia_wire_socket_parent_class)->finalize(o);
}

static void ixia_wire_socket_class_init(IxiaWireSocketClass *klass) {
  ThriftTransportClass *t = THRIFT_TRANSPORT_CLASS(klass);
  t->read = socket_read;
  t->read_end = socket_read_end;
  t->write = socket_write;
  t->write_end = socket_write_end;
  t->flush = socket_flush;
  t->is_open = socket_is_open;
  t->open = socket_open_close;
  t->close = socket_open_close;
  G_OBJECT_CLASS(klass)->finalize = socket_finalize;
}

gboolean ixia_wire_socket_next(ThriftTransport *t, const guint8 **answer, gsize *answer_len,
                               GError **error) {
  IxiaWireSocket *s = (IxiaWireSocket *)t;
  socket_read_end(t, NULL);
  if (!socket_fill(s, error)) return FALSE;
  s->in_message = TRUE; /* received, not yet read: a recv_* may read it */
  *answer = s->parent.parent.buf->data;
  *answer_len = s->parent.parent.buf->len;
  return TRUE;
}

gboolean ixia_wire_socket_call(ThriftTransport *t, const guint8 *msg, gsize len,
                               const guint8 **answer, gsize *answer_len, GError **error) {
  IxiaWireSocket *s = (IxiaWireSocket *)t;
  g_byte_array_set_size(s->out, 4); /* nothing of a call that failed half-written */
  if (len > G_MAXUINT32 || !socket_write(t, (const gpointer)msg, (guint32)len, error) ||
      !socket_flush(t, error))
    return FALSE;
  return ixia_wire_socket_next(t, answer, answer_len, error);
}

ThriftTransport *ixia_wire_socket_new(int fd, const ixia_wire_limits_t *lim) {
  IxiaWireSocket *s = g_object_new(ixia_wire_socket_get_type(), "buf_size", lim->max_frame, NULL);
  s->fd = fd;
  s->max_frame = lim->max_frame;
  return THRIFT_TRANSPORT(s);
}

/* ---------- the guard shared by both protocols ---------- */

typedef struct {
  ixia_wire_limits_t lim;
  guint32 depth;
  guint64 items;
} guard_t;

static guint32 bytes_left(ThriftProtocol *p) {
  return IXIA_IS_FRAME_BUFFER(p->transport)
             ? ixia_frame_buffer_remaining((ThriftMemoryBuffer *)p->transport)
             : G_MAXUINT32;
}

static void guard_reset(guard_t *g) {
  g->depth = 0;
  g->items = 0;
}

static gint32 guard_enter(guard_t *g, GError **error) {
  if (++g->depth > g->lim.max_depth)
    return fail(error, THRIFT_PROTOCOL_ERROR_DEPTH_LIMIT,
                "message nests structs and containers deeper than server.max_depth=%u",
                g->lim.max_depth);
  return 0;
}

static void guard_leave(guard_t *g) {
  if (g->depth > 0) g->depth--;
}

/* A container of n elements, each at least min_bytes on the wire. */
static gint32 guard_container(guard_t *g, ThriftProtocol *p, guint32 n, guint32 min_bytes,
                              GError **error) {
  g->items += n;
  if (g->items > g->lim.max_items)
    return fail(error, THRIFT_PROTOCOL_ERROR_SIZE_LIMIT,
                "message holds more than server.max_items=%u container elements",
                g->lim.max_items);
  guint32 left = bytes_left(p);
  if ((guint64)n * min_bytes > left)
    return fail(error, THRIFT_PROTOCOL_ERROR_INVALID_DATA,
                "a container announces %u elements but only %u bytes of the message are left",
                n, left);
  return guard_enter(g, error);
}

/* Checks a string length read off the wire, then reads the bytes into a
 * new buffer (terminated when nul is set). */
static gint32 guard_bytes(ThriftProtocol *p, gint64 len, gboolean nul, gpointer *out,
                          guint32 *out_len, GError **error) {
  guint32 left = bytes_left(p);
  if (len < 0)
    return fail(error, THRIFT_PROTOCOL_ERROR_NEGATIVE_SIZE, "string with negative length %" G_GINT64_FORMAT, len);
  if (len > left)
    return fail(error, THRIFT_PROTOCOL_ERROR_INVALID_DATA,
                "string of %" G_GINT64_FORMAT " bytes runs past the end of the message (%u bytes left)",
                len, left);
  if (len == 0 && !nul) return 0;
  guint8 *buf = g_malloc((gsize)len + (nul ? 1 : 0));
  if (len > 0 && thrift_transport_read_all(p->transport, buf, (guint32)len, error) < 0) {
    g_free(buf);
    return -1;
  }
  if (nul) buf[len] = 0;
  *out = buf;
  if (out_len) *out_len = (guint32)len;
  return (gint32)len;
}

static guint32 min_bytes(ThriftType t, gboolean compact) {
  switch (t) {
    case T_DOUBLE: return 8;
    case T_I64: return compact ? 1 : 8;
    case T_I32: return compact ? 1 : 4;
    case T_I16: return compact ? 1 : 2;
    case T_STRING: return compact ? 1 : 4;
    case T_LIST:
    case T_SET: return compact ? 1 : 5;
    case T_MAP: return compact ? 1 : 6;
    default: return 1;
  }
}

/* The overrides, written once for both protocols: P is the protocol's
 * prefix, PARENT its c_glib class. */
#define GUARD_METHODS(P, Type, PARENT_CLASS, COMPACT)                                              \
  static gint32 P##_read_message_begin(ThriftProtocol *p, gchar **name, ThriftMessageType *mt,    \
                                       gint32 *seqid, GError **error) {                           \
    guard_reset(&((Type *)p)->g);                                                                  \
    *name = NULL;                                                                                  \
    gint32 r = THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_message_begin(p, name, mt, seqid, error); \
    if (r < 0) g_clear_pointer(name, g_free); /* c_glib's callers leak it on failure */           \
    return r;                                                                                      \
  }                                                                                                \
  static gint32 P##_read_struct_begin(ThriftProtocol *p, gchar **name, GError **error) {          \
    *name = NULL;                                                                                  \
    if (guard_enter(&((Type *)p)->g, error) < 0) return -1;                                        \
    return THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_struct_begin(p, name, error);                \
  }                                                                                                \
  static gint32 P##_read_struct_end(ThriftProtocol *p, GError **error) {                          \
    guard_leave(&((Type *)p)->g);                                                                  \
    return THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_struct_end(p, error);                        \
  }                                                                                                \
  static gint32 P##_read_list_begin(ThriftProtocol *p, ThriftType *et, guint32 *size,             \
                                    GError **error) {                                             \
    *size = 0;                                                                                     \
    *et = T_STOP;                                                                                  \
    gint32 r = THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_list_begin(p, et, size, error);          \
    if (r < 0) return fail(error, THRIFT_PROTOCOL_ERROR_INVALID_DATA, "bad list header");         \
    if (guard_container(&((Type *)p)->g, p, *size, min_bytes(*et, COMPACT), error) < 0) {          \
      *size = 0;                                                                                   \
      return -1;                                                                                   \
    }                                                                                              \
    return r;                                                                                      \
  }                                                                                                \
  static gint32 P##_read_list_end(ThriftProtocol *p, GError **error) {                            \
    guard_leave(&((Type *)p)->g);                                                                  \
    return THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_list_end(p, error);                          \
  }                                                                                                \
  static gint32 P##_read_set_begin(ThriftProtocol *p, ThriftType *et, guint32 *size,              \
                                   GError **error) {                                              \
    *size = 0;                                                                                     \
    *et = T_STOP;                                                                                  \
    gint32 r = THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_set_begin(p, et, size, error);           \
    if (r < 0) return fail(error, THRIFT_PROTOCOL_ERROR_INVALID_DATA, "bad set header");          \
    if (guard_container(&((Type *)p)->g, p, *size, min_bytes(*et, COMPACT), error) < 0) {          \
      *size = 0;                                                                                   \
      return -1;                                                                                   \
    }                                                                                              \
    return r;                                                                                      \
  }                                                                                                \
  static gint32 P##_read_set_end(ThriftProtocol *p, GError **error) {                             \
    guard_leave(&((Type *)p)->g);                                                                  \
    return THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_set_end(p, error);                           \
  }                                                                                                \
  static gint32 P##_read_map_begin(ThriftProtocol *p, ThriftType *kt, ThriftType *vt,             \
                                   guint32 *size, GError **error) {                               \
    *size = 0;                                                                                     \
    *kt = *vt = T_STOP;                                                                            \
    gint32 r = THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_map_begin(p, kt, vt, size, error);       \
    if (r < 0) return fail(error, THRIFT_PROTOCOL_ERROR_INVALID_DATA, "bad map header");          \
    if (guard_container(&((Type *)p)->g, p, *size,                                                 \
                        min_bytes(*kt, COMPACT) + min_bytes(*vt, COMPACT), error) < 0) {           \
      *size = 0;                                                                                   \
      return -1;                                                                                   \
    }                                                                                              \
    return r;                                                                                      \
  }                                                                                                \
  static gint32 P##_read_map_end(ThriftProtocol *p, GError **error) {                             \
    guard_leave(&((Type *)p)->g);                                                                  \
    return THRIFT_PROTOCOL_CLASS(PARENT_CLASS)->read_map_end(p, error);                           \
  }                                                                                                \
  static gint32 P##_read_string(ThriftProtocol *p, gchar **str, GError **error) {                 \
    *str = NULL;                                                                                   \
    gint64 len;                                                                                    \
    gint32 h = P##_read_length(p, &len, error);                                                    \
    if (h < 0) return -1;                                                                          \
    gint32 r = guard_bytes(p, len, TRUE, (gpointer *)str, NULL, error);                            \
    return r < 0 ? -1 : h + r;                                                                     \
  }                                                                                                \
  static gint32 P##_read_binary(ThriftProtocol *p, gpointer *buf, guint32 *len, GError **error) { \
    *buf = NULL;                                                                                   \
    *len = 0;                                                                                      \
    gint64 n;                                                                                      \
    gint32 h = P##_read_length(p, &n, error);                                                      \
    if (h < 0) return -1;                                                                          \
    gint32 r = guard_bytes(p, n, FALSE, buf, len, error);                                          \
    return r < 0 ? -1 : h + r;                                                                     \
  }                                                                                                \
  static void P##_install(ThriftProtocolClass *c) {                                                \
    c->read_message_begin = P##_read_message_begin;                                                \
    c->read_struct_begin = P##_read_struct_begin;                                                  \
    c->read_struct_end = P##_read_struct_end;                                                      \
    c->read_list_begin = P##_read_list_begin;                                                      \
    c->read_list_end = P##_read_list_end;                                                          \
    c->read_set_begin = P##_read_set_begin;                                                        \
    c->read_set_end = P##_read_set_end;                                                            \
    c->read_map_begin = P##_read_map_begin;                                                        \
    c->read_map_end = P##_read_map_end;                                                            \
    c->read_string = P##_read_string;                                                              \
    c->read_binary = P##_read_binary;                                                              \
  }

/* ---------- IxiaWireBinaryProtocol ---------- */

typedef struct {
  ThriftBinaryProtocol parent;
  guard_t g;
} IxiaWireBinaryProtocol;
typedef struct {
  ThriftBinaryProtocolClass parent;
} IxiaWireBinaryProtocolClass;
GType ixia_wire_binary_protocol_get_type(void);
G_DEFINE_TYPE(IxiaWireBinaryProtocol, ixia_wire_binary_protocol, THRIFT_TYPE_BINARY_PROTOCOL)

/* Binary protocol lengths: a big-endian i32. */
static gint32 binary_read_length(ThriftProtocol *p, gint64 *len, GError **error) {
  gint32 n = 0;
  if (thrift_protocol_read_i32(p, &n, error) < 0) return -1;
  *len = n;
  return 4;
}

GUARD_METHODS(binary, IxiaWireBinaryProtocol, ixia_wire_binary_protocol_parent_class, FALSE)

static void ixia_wire_binary_protocol_init(IxiaWireBinaryProtocol *self) { (void)self; }
static void ixia_wire_binary_protocol_class_init(IxiaWireBinaryProtocolClass *klass) {
  binary_install(THRIFT_PROTOCOL_CLASS(klass));
}

/* ---------- IxiaWireCompactProtocol ---------- */

typedef struct {
  ThriftCompactProtocol parent;
  guard_t g;
} IxiaWireCompactProtocol;
typedef struct {
  ThriftCompactProtocolClass parent;
} IxiaWireCompactProtocolClass;
GType ixia_wire_compact_protocol_get_type(void);
G_DEFINE_TYPE(IxiaWireCompactProtocol, ixia_wire_compact_protocol, THRIFT_TYPE_COMPACT_PROTOCOL)

/* Compact protocol lengths: an unsigned varint (at most 5 bytes for 32
 * bits). */
static gint32 compact_read_length(ThriftProtocol *p, gint64 *len, GError **error) {
  guint64 v = 0;
  for (gint32 i = 0; i < 5; i++) {
    guint8 b;
    if (thrift_transport_read_all(p->transport, &b, 1, error) < 0) return -1;
    v |= (guint64)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      if (v > G_MAXINT32)
        return fail(error, THRIFT_PROTOCOL_ERROR_SIZE_LIMIT, "string length %" G_GUINT64_FORMAT " is over 2^31", v);
      *len = (gint64)v;
      return i + 1;
    }
  }
  return fail(error, THRIFT_PROTOCOL_ERROR_INVALID_DATA, "string length varint longer than 5 bytes");
}

GUARD_METHODS(compact, IxiaWireCompactProtocol, ixia_wire_compact_protocol_parent_class, TRUE)

static void ixia_wire_compact_protocol_init(IxiaWireCompactProtocol *self) { (void)self; }
static void ixia_wire_compact_protocol_class_init(IxiaWireCompactProtocolClass *klass) {
  compact_install(THRIFT_PROTOCOL_CLASS(klass));
}

ThriftProtocol *ixia_wire_protocol_new(ThriftTransport *transport, gboolean compact,
                                       const ixia_wire_limits_t *lim) {
  ThriftProtocol *p = g_object_new(compact ? ixia_wire_compact_protocol_get_type()
                                           : ixia_wire_binary_protocol_get_type(),
                                   "transport", transport, NULL);
  guard_t *g = compact ? &((IxiaWireCompactProtocol *)p)->g : &((IxiaWireBinaryProtocol *)p)->g;
  g->lim = *lim;
  guard_reset(g);
  return p;
}

/* ---------- frames ---------- */

/* One open struct or container while checking a message. */
typedef struct {
  guint8 kind;          /* T_STRUCT, T_LIST (lists and sets) or T_MAP */
  guint8 types[2];      /* element type; a map's key and value types */
  guint64 left;         /* elements (map: keys and values) still to come */
} walk_t;

static gboolean take(const guint8 **p, const guint8 *end, gsize n) {
  if ((gsize)(end - *p) < n) return FALSE;
  *p += n;
  return TRUE;
}

gboolean ixia_wire_check_message(const guint8 *frame, gsize len, const ixia_wire_limits_t *lim,
                                 ixia_error_t **err) {
  const guint8 *p = frame, *end = frame + len;
  if (len < 12 || frame[0] != 0x80 || frame[1] != 0x01)
    return ixia_error_set(err, IXIA_EINVAL, "not a strict binary-protocol Thrift message");
  guint32 name_len = ixia_bytes_get32(frame + 4);
  p += 8;
  if (!take(&p, end, name_len) || !take(&p, end, 4)) /* name, seqid */
    return ixia_error_set(err, IXIA_EINVAL, "message header runs past the end of the frame");
  walk_t *stack = g_new(walk_t, MIN(lim->max_depth, 64u) + 1);
  guint cap = MIN(lim->max_depth, 64u) + 1, depth = 1;
  stack[0] = (walk_t){T_STRUCT, {0, 0}, 0};
  guint64 items = 0;
  const char *why = NULL;
  while (depth > 0 && !why) {
    walk_t *top = &stack[depth - 1];
    guint8 type;
    if (top->kind == T_STRUCT) {
      if (!take(&p, end, 1)) {
        why = "a struct runs past the end of the frame";
        break;
      }
      type = p[-1];
      if (type == T_STOP) {
        depth--;
        continue;
      }
      if (!take(&p, end, 2)) {
        why = "a field header runs past the end of the frame";
        break;
      }
    } else {
      if (top->left == 0) {
        depth--;
        continue;
      }
      type = top->kind == T_MAP ? top->types[top->left % 2 == 0 ? 0 : 1] : top->types[0];
      top->left--;
    }
    gsize fixed = 0;
    switch (type) {
      case T_BOOL:
      case T_BYTE: fixed = 1; break;
      case T_I16: fixed = 2; break;
      case T_I32: fixed = 4; break;
      case T_I64:
      case T_DOUBLE: fixed = 8; break;
      case T_STRING: {
        if (!take(&p, end, 4)) {
          why = "a string length runs past the end of the frame";
          break;
        }
        guint32 n = ixia_bytes_get32(p - 4);
        if (n > G_MAXINT32 || !take(&p, end, n)) why = "a string runs past the end of the frame";
        break;
      }
      case T_STRUCT:
      case T_LIST:
      case T_SET:
      case T_MAP: {
        if (depth >= lim->max_depth) {
          why = "message nests structs and containers deeper than server.max_depth";
          break;
        }
        walk_t w = {type == T_SET ? T_LIST : type, {0, 0}, 0};
        if (type != T_STRUCT) {
          gsize hdr = type == T_MAP ? 6 : 5;
          if (!take(&p, end, hdr)) {
            why = "a container header runs past the end of the frame";
            break;
          }
          w.types[0] = p[-(gssize)hdr];
          if (type == T_MAP) w.types[1] = p[-5];
          guint32 n = ixia_bytes_get32(p - 4);
          if (n > G_MAXINT32) {
            why = "a container with a negative size";
            break;
          }
          items += n;
          if (items > lim->max_items) {
            why = "message holds more than server.max_items container elements";
            break;
          }
          /* Each element takes a byte at least (a key and a value: two). */
          w.left = type == T_MAP ? 2 * (guint64)n : n;
          if (w.left > (guint64)(end - p)) {
            why = "a container announces more elements than the frame has bytes";
            break;
          }
          if (n == 0) break; /* nothing to walk into */
        }
        if (depth == cap) {
          cap *= 2;
          stack = g_renew(walk_t, stack, cap);
        }
        stack[depth++] = w;
        break;
      }
      default: why = "unknown field type"; break;
    }
    if (!why && fixed && !take(&p, end, fixed)) why = "a value runs past the end of the frame";
  }
  g_free(stack);
  if (why) {
    if (strstr(why, "server.max_depth"))
      return ixia_error_set(err, IXIA_EINVAL, "%s=%u", why, lim->max_depth);
    if (strstr(why, "server.max_items"))
      return ixia_error_set(err, IXIA_EINVAL, "message holds more than server.max_items=%u "
                                              "container elements", lim->max_items);
    return ixia_error_set(err, IXIA_EINVAL, "malformed message at byte %td: %s", p - frame, why);
  }
  return TRUE;
}

gboolean ixia_wire_peek_call(const guint8 *frame, gsize len, const char **name, guint32 *name_len,
                             gint32 *seqid) {
  if (len < 12 || frame[0] != 0x80 || frame[1] != 0x01) return FALSE;
  guint32 n;
  memcpy(&n, frame + 4, 4);
  n = GUINT32_FROM_BE(n);
  if (n > len - 12) return FALSE;
  guint32 s;
  memcpy(&s, frame + 8 + n, 4);
  *name = (const char *)frame + 8;
  *name_len = n;
  *seqid = (gint32)GUINT32_FROM_BE(s);
  return TRUE;
}

void ixia_wire_append_error(GByteArray *out, const char *name, guint32 name_len, gint32 seqid,
                            gint32 code, const char *message) {
  ixia_bytes_append32(out, 0x80010000u | T_REPLY);
  ixia_bytes_append32(out, name_len);
  g_byte_array_append(out, (const guint8 *)name, name_len);
  ixia_bytes_append32(out, (guint32)seqid);
  /* result { 1: IxiaError err { 1: i32 code, 2: string message } } */
  const guint8 err_field[3] = {T_STRUCT, 0, 1}, code_field[3] = {T_I32, 0, 1},
               msg_field[3] = {T_STRING, 0, 2}, stop = T_STOP;
  g_byte_array_append(out, err_field, 3);
  g_byte_array_append(out, code_field, 3);
  ixia_bytes_append32(out, (guint32)code);
  g_byte_array_append(out, msg_field, 3);
  guint32 mlen = (guint32)strlen(message);
  ixia_bytes_append32(out, mlen);
  g_byte_array_append(out, (const guint8 *)message, mlen);
  g_byte_array_append(out, &stop, 1);
  g_byte_array_append(out, &stop, 1);
}

void ixia_wire_append_void_reply(GByteArray *out, const char *name, guint32 name_len,
                                 gint32 seqid) {
  ixia_bytes_append32(out, 0x80010000u | T_REPLY);
  ixia_bytes_append32(out, name_len);
  g_byte_array_append(out, (const guint8 *)name, name_len);
  ixia_bytes_append32(out, (guint32)seqid);
  const guint8 stop = T_STOP; /* an empty result struct: success of a void call */
  g_byte_array_append(out, &stop, 1);
}

gboolean ixia_wire_call_string(const guint8 *frame, gsize len, gint16 id, const char **value,
                               guint32 *value_len) {
  const char *name;
  guint32 name_len;
  gint32 seqid;
  if (!ixia_wire_peek_call(frame, len, &name, &name_len, &seqid)) return FALSE;
  gsize p = 12 + name_len;
  /* Top-level fields of the argument struct; only strings are walked
   * over (the calls this reads take strings only). */
  while (p + 1 <= len && frame[p] != T_STOP) {
    if (p + 7 > len || frame[p] != T_STRING) return FALSE;
    gint16 fid = (gint16)((frame[p + 1] << 8) | frame[p + 2]);
    guint32 n;
    memcpy(&n, frame + p + 3, 4);
    n = GUINT32_FROM_BE(n);
    if (n > len - p - 7) return FALSE;
    if (fid == id) {
      *value = (const char *)frame + p + 7;
      *value_len = n;
      return TRUE;
    }
    p += 7 + n;
  }
  return FALSE;
}

/* Copies the string at *p (i32 length, bytes) to scratch with a NUL;
 * *at is its offset there. FALSE when it runs past the frame or holds a
 * NUL (c_glib's reader would cut it there: left to the processor). */
static gboolean get_string(const guint8 *frame, gsize len, gsize *p, GByteArray *scratch,
                           gsize *at) {
  if (len - *p < 4) return FALSE;
  guint32 n = ixia_bytes_get32(frame + *p);
  *p += 4;
  if (n > len - *p || memchr(frame + *p, 0, n)) return FALSE;
  const guint8 nul = 0;
  *at = scratch->len;
  g_byte_array_append(scratch, frame + *p, n);
  g_byte_array_append(scratch, &nul, 1);
  *p += n;
  return TRUE;
}

gboolean ixia_wire_read_get(const guint8 *frame, gsize len, GByteArray *scratch,
                            ixia_wire_get_t *call) {
  const char *name;
  guint32 name_len;
  /* A get is a few hundred bytes (names of 64, keys of limits.max_key_bytes):
   * a larger frame is left to the processor, so scratch stays small. */
  if (len > IXIA_WIRE_GET_MAX_FRAME ||
      !ixia_wire_peek_call(frame, len, &name, &name_len, &call->seqid) || frame[2] != 0 ||
      frame[3] != T_CALL || name_len != 3 || memcmp(name, "get", 3) != 0)
    return FALSE;
  g_byte_array_set_size(scratch, 0);
  gsize p = 12 + name_len;
  gsize at[3], fat[IXIA_WIRE_GET_MAX_FIELDS];
  gboolean have[4] = {FALSE, FALSE, FALSE, FALSE};
  guint32 nf = 0;
  guint32 max_fields = MIN(IXIA_WIRE_GET_MAX_FIELDS, ixia_wire_limits().max_items);
  for (;;) {
    if (p >= len) return FALSE;
    guint8 type = frame[p++];
    if (type == T_STOP) break;
    if (len - p < 2) return FALSE;
    gint16 id = (gint16)((frame[p] << 8) | frame[p + 1]);
    p += 2;
    if (id < 1 || id > 4 || have[id - 1]) return FALSE;
    have[id - 1] = TRUE;
    if (id <= 3) {
      if (type != T_STRING || !get_string(frame, len, &p, scratch, &at[id - 1])) return FALSE;
      if (id == 3) call->key_len = scratch->len - 1 - at[2];
      continue;
    }
    /* 4: list<string> fields */
    if (type != T_LIST || len - p < 5 || frame[p] != T_STRING) return FALSE;
    nf = ixia_bytes_get32(frame + p + 1);
    p += 5;
    if (nf > max_fields) return FALSE;
    for (guint32 i = 0; i < nf; i++)
      if (!get_string(frame, len, &p, scratch, &fat[i])) return FALSE;
  }
  if (p != len || !have[0] || !have[1] || !have[2]) return FALSE;
  /* Pointers last: the appends may have moved the array. */
  const char *base = (const char *)scratch->data;
  call->ns = base + at[0];
  call->table = base + at[1];
  call->key = base + at[2];
  for (guint32 i = 0; i < nf; i++) call->fields[i] = base + fat[i];
  call->fields[nf] = NULL;
  return TRUE;
}

void ixia_wire_append_get_reply(GByteArray *out, gint32 seqid, gboolean found, const char *key,
                                gsize key_len, gint64 version, const char *json, gsize json_len) {
  /* header (12 + "get"), result field 0, Document { bool 1, string 2,
   * i64 3, string 4 }, two stops */
  gsize start = out->len;
  g_byte_array_set_size(out, (guint)(start + 15 + 3 + 4 + 7 + key_len + 11 + 7 + json_len + 2));
  guint8 *w = out->data + start;
  ixia_bytes_put32(w, 0x80010000u | T_REPLY);
  ixia_bytes_put32(w + 4, 3);
  memcpy(w + 8, "get", 3);
  ixia_bytes_put32(w + 11, (guint32)seqid);
  w += 15;
  *w++ = T_STRUCT, *w++ = 0, *w++ = 0;
  *w++ = T_BOOL, *w++ = 0, *w++ = 1, *w++ = found ? 1 : 0;
  *w++ = T_STRING, *w++ = 0, *w++ = 2;
  ixia_bytes_put32(w, (guint32)key_len);
  memcpy(w + 4, key, key_len);
  w += 4 + key_len;
  *w++ = T_I64, *w++ = 0, *w++ = 3;
  ixia_bytes_put64(w, (guint64)version);
  w += 8;
  *w++ = T_STRING, *w++ = 0, *w++ = 4;
  ixia_bytes_put32(w, (guint32)json_len);
  if (json_len) memcpy(w + 4, json, json_len);
  w += 4 + json_len;
  *w++ = T_STOP, *w++ = T_STOP;
  g_assert(w == out->data + out->len);
}

static void put_string(GByteArray *out, guint8 id, const char *v, gsize n) {
  const guint8 field[3] = {T_STRING, 0, id};
  g_byte_array_append(out, field, 3);
  ixia_bytes_append32(out, (guint32)n);
  g_byte_array_append(out, (const guint8 *)v, (guint)n);
}

void ixia_wire_append_get_call(GByteArray *out, gint32 seqid, const char *ns, const char *table,
                               const char *key, const char *const *fields) {
  ixia_bytes_append32(out, 0x80010000u | T_CALL);
  ixia_bytes_append32(out, 3);
  g_byte_array_append(out, (const guint8 *)"get", 3);
  ixia_bytes_append32(out, (guint32)seqid);
  put_string(out, 1, ns, strlen(ns));
  put_string(out, 2, table, strlen(table));
  put_string(out, 3, key, strlen(key));
  guint32 n = 0;
  while (fields && fields[n]) n++;
  const guint8 list[4] = {T_LIST, 0, 4, T_STRING}, stop = T_STOP;
  g_byte_array_append(out, list, 4);
  ixia_bytes_append32(out, n);
  for (guint32 i = 0; i < n; i++) {
    ixia_bytes_append32(out, (guint32)strlen(fields[i]));
    g_byte_array_append(out, (const guint8 *)fields[i], (guint)strlen(fields[i]));
  }
  g_byte_array_append(out, &stop, 1);
}

/* A field header of type `type` and id `id` at a[*p], with `need` more
 * bytes after it; *p moves past the header. */
static gboolean field_at(const guint8 *a, gsize len, gsize *p, guint8 type, guint8 id, gsize need) {
  if (len - *p < 3 + need || a[*p] != type || a[*p + 1] != 0 || a[*p + 2] != id) return FALSE;
  *p += 3;
  return TRUE;
}

gboolean ixia_wire_read_get_reply(const guint8 *a, gsize len, gboolean *found, gint64 *version,
                                  const char **json, gsize *json_len) {
  const char *name;
  guint32 name_len;
  gint32 seqid;
  if (!ixia_wire_peek_call(a, len, &name, &name_len, &seqid) || a[2] != 0 || a[3] != T_REPLY ||
      name_len != 3 || memcmp(name, "get", 3) != 0)
    return FALSE;
  gsize p = 15;
  if (!field_at(a, len, &p, T_STRUCT, 0, 0) || !field_at(a, len, &p, T_BOOL, 1, 1)) return FALSE;
  *found = a[p++] != 0;
  if (!field_at(a, len, &p, T_STRING, 2, 4)) return FALSE;
  guint32 n = ixia_bytes_get32(a + p);
  p += 4;
  if (n > len - p) return FALSE;
  p += n;
  if (!field_at(a, len, &p, T_I64, 3, 8)) return FALSE;
  *version = (gint64)ixia_bytes_get64(a + p);
  p += 8;
  if (!field_at(a, len, &p, T_STRING, 4, 4)) return FALSE;
  n = ixia_bytes_get32(a + p);
  p += 4;
  if (n > len - p) return FALSE;
  *json = (const char *)a + p;
  *json_len = n;
  p += n;
  return len - p == 2 && a[p] == T_STOP && a[p + 1] == T_STOP;
}

void ixia_wire_append_string_call(GByteArray *out, const char *method, gint32 seqid,
                                  const char *arg, gsize arg_len) {
  ixia_bytes_append32(out, 0x80010000u | T_CALL);
  ixia_bytes_append32(out, (guint32)strlen(method));
  g_byte_array_append(out, (const guint8 *)method, (guint)strlen(method));
  ixia_bytes_append32(out, (guint32)seqid);
  put_string(out, 1, arg, arg_len);
  const guint8 stop = T_STOP;
  g_byte_array_append(out, &stop, 1);
}

/* A string at a[*p] (length, bytes); *p moves past it. */
static gboolean string_at(const guint8 *a, gsize len, gsize *p, const char **v, gsize *n) {
  if (len - *p < 4) return FALSE;
  guint32 l = ixia_bytes_get32(a + *p);
  if (l > len - *p - 4) return FALSE;
  *v = (const char *)a + *p + 4;
  *n = l;
  *p += 4 + (gsize)l;
  return TRUE;
}

/* The fields of a struct holding only i32s and strings (an IxiaError, a
 * TApplicationException) at a[*p], up to its stop: field 1 and 2 as ids
 * i32_id and str_id say. */
static gboolean small_struct_at(const guint8 *a, gsize len, gsize *p, guint8 i32_id, guint8 str_id,
                                gint32 *i32, const char **str, gsize *str_len) {
  for (;;) {
    if (*p >= len) return FALSE;
    guint8 type = a[(*p)++];
    if (type == T_STOP) return TRUE;
    if (len - *p < 2 || a[*p] != 0) return FALSE;
    guint8 id = a[*p + 1];
    *p += 2;
    if (type == T_I32) {
      if (len - *p < 4) return FALSE;
      if (id == i32_id) *i32 = (gint32)ixia_bytes_get32(a + *p);
      *p += 4;
    } else if (type == T_STRING) {
      const char *v;
      gsize n;
      if (!string_at(a, len, p, &v, &n)) return FALSE;
      if (id == str_id) *str = v, *str_len = n;
    } else {
      return FALSE;
    }
  }
}

int ixia_wire_read_string_reply(const guint8 *a, gsize len, const char *method, const char **value,
                                gsize *value_len, gint32 *code, const char **msg, gsize *msg_len) {
  const char *name;
  guint32 name_len;
  gint32 seqid;
  *msg = NULL;
  *msg_len = 0;
  *code = 0;
  if (!ixia_wire_peek_call(a, len, &name, &name_len, &seqid) || a[2] != 0 ||
      (a[3] != T_REPLY && a[3] != T_EXCEPTION) || name_len != strlen(method) ||
      memcmp(name, method, name_len) != 0)
    return IXIA_WIRE_REPLY_BAD;
  gsize p = 12 + name_len;
  if (a[3] == T_EXCEPTION)
    return small_struct_at(a, len, &p, 2, 1, code, msg, msg_len) ? IXIA_WIRE_REPLY_EXCEPTION
                                                                : IXIA_WIRE_REPLY_BAD;
  int got = IXIA_WIRE_REPLY_BAD;
  for (;;) {
    if (p >= len) return IXIA_WIRE_REPLY_BAD;
    guint8 type = a[p++];
    if (type == T_STOP) return got;
    if (len - p < 2 || a[p] != 0) return IXIA_WIRE_REPLY_BAD;
    guint8 id = a[p + 1];
    p += 2;
    if (type == T_STRING && id == 0 && string_at(a, len, &p, value, value_len)) {
      got = IXIA_WIRE_REPLY_OK;
    } else if (type == T_STRUCT && id == 1 && small_struct_at(a, len, &p, 1, 2, code, msg, msg_len)) {
      got = IXIA_WIRE_REPLY_ERROR;
    } else {
      return IXIA_WIRE_REPLY_BAD;
    }
  }
}

gboolean ixia_wire_read_string_call(const guint8 *frame, gsize len, const char *method,
                                    gint32 *seqid, const char **arg, gsize *arg_len) {
  const char *name;
  guint32 name_len;
  gsize mlen = strlen(method);
  if (!ixia_wire_peek_call(frame, len, &name, &name_len, seqid) || frame[2] != 0 ||
      frame[3] != T_CALL || name_len != mlen || memcmp(name, method, mlen) != 0)
    return FALSE;
  /* field 1 (string) first, then the stop, which ends the frame and
   * terminates the string in place */
  const char *v;
  guint32 n;
  if (!ixia_wire_call_string(frame, len, 1, &v, &n) ||
      (const guint8 *)v != frame + 12 + name_len + 7 || (const guint8 *)v + n + 1 != frame + len ||
      frame[len - 1] != T_STOP)
    return FALSE;
  *arg = v;
  *arg_len = n;
  return memchr(v, 0, n) == NULL;
}

void ixia_wire_append_string_reply(GByteArray *out, const char *method, gint32 seqid,
                                   const void *value, gsize n) {
  guint32 mlen = (guint32)strlen(method);
  ixia_bytes_append32(out, 0x80010000u | T_REPLY);
  ixia_bytes_append32(out, mlen);
  g_byte_array_append(out, (const guint8 *)method, mlen);
  ixia_bytes_append32(out, (guint32)seqid);
  put_string(out, 0, value, n); /* result { 0: success } */
  const guint8 stop = T_STOP;
  g_byte_array_append(out, &stop, 1);
}

gint32 ixia_wire_answer_error_code(const guint8 *answer, gsize len) {
  if (len < 12 || answer[0] != 0x80 || answer[1] != 0x01) return 0;
  guint32 n;
  memcpy(&n, answer + 4, 4);
  n = GUINT32_FROM_BE(n);
  if (n > len - 12) return 0;
  gsize p = 12 + n;
  /* result struct: field 1 (a struct) is the IxiaError; its field 1 the code */
  if (p + 10 > len || answer[p] != T_STRUCT || answer[p + 1] != 0 || answer[p + 2] != 1) return 0;
  if (answer[p + 3] != T_I32 || answer[p + 4] != 0 || answer[p + 5] != 1) return 0;
  guint32 code;
  memcpy(&code, answer + p + 6, 4);
  return (gint32)GUINT32_FROM_BE(code);
}

const char *ixia_wire_http_refusal(const guint8 *bytes, gsize len) {
  static const char *const methods[] = {"GET ", "POST", "PUT ", "HEAD", "DELE", "PATC", "OPTI",
                                        "CONN", "TRAC"};
  if (len < 4) return NULL;
  for (guint i = 0; i < G_N_ELEMENTS(methods); i++)
    if (memcmp(bytes, methods[i], 4) == 0)
      return "HTTP/1.1 400 Bad Request\r\n"
             "Content-Type: application/json\r\n"
             "Connection: close\r\n"
             "Content-Length: 207\r\n"
             "\r\n"
             "{\"code\": \"INVALID_ARGUMENT\", \"message\": \"this is an ixia Thrift port (framed "
             "binary Thrift); the HTTP/JSON interface and /metrics, /healthz, /readyz are on the "
             "daemon's HTTP port (http.port, docs/HTTP.md)\"}\n";
  return NULL;
}
