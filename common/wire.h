/* Thrift bytes from outside the process: bounded transports and protocols.
 *
 * Every Thrift message ixia reads (a request frame on any server port, a
 * response frame in a client, a change event from Kafka) is decoded through
 * this layer and never through c_glib's stock protocols alone. The stock
 * 0.17 protocols trust the lengths a message announces: a string length
 * past the end of the message, a negative length, a list of 2^31 elements
 * or an unknown struct nested 400,000 deep reach g_new/free on bad values
 * or overflow the stack in thrift_protocol_skip. Here:
 *
 *  - a message is read from one complete, size-checked frame held in
 *    memory (IxiaFrameBuffer), so "bytes left in this message" is known;
 *  - the protocols (binary and compact subclasses of c_glib's) check every
 *    string and container length against the bytes left before anything
 *    is allocated, always leave out-parameters initialised on failure,
 *    count nesting (structs, lists, sets, maps: thrift_protocol_skip recurses
 *    through these) and the container items of one message, and fail with
 *    an error naming the limit;
 *  - limits come from the one config table (server.max_frame_bytes,
 *    server.max_depth, server.max_items) and are the same on both sides of
 *    a connection.
 *
 * Why wrap c_glib rather than decode our messages by hand: the generated
 * (de)serializers stay the single definition of every message, and the
 * protocol methods are the only place where untrusted lengths enter. The
 * fuzz targets (tests/fuzz/) drive these protocols through the generated readers
 * and the real handlers. One exception, measured: the API's get call (below),
 * whose generated coding cost more than the get; its hand-coded readers (the
 * call on the server, the answer in the client) check every length against
 * the bytes left, are checked against the generated code, and are fuzzed
 * (tests/fuzz/api_frame.c feeds every frame to both).
 *
 * Ownership: every constructor returns a new GObject reference
 * (g_object_unref it). Thread safety: an object is used by one thread at a
 * time; ixia_wire_set_limits is called once at start-up, before threads. */
#ifndef IXIA_WIRE_H
#define IXIA_WIRE_H

#include <thrift/c_glib/protocol/thrift_protocol.h>
#include <thrift/c_glib/transport/thrift_memory_buffer.h>

#include "config.h"
#include "error.h"

typedef struct {
  guint32 max_frame; /* server.max_frame_bytes: largest frame, both directions */
  guint32 max_depth; /* server.max_depth: deepest nesting of structs and containers */
  guint32 max_items; /* server.max_items: container elements in one message */
} ixia_wire_limits_t;

/* The limits configured in cfg. */
ixia_wire_limits_t ixia_wire_limits_from_config(const ixia_config_t *cfg);
/* The process's limits for clients and in-memory decoding: the config
 * table's defaults until ixia_wire_set_limits (called by
 * ixia_config_from_args, so every daemon and tool uses its config). */
ixia_wire_limits_t ixia_wire_limits(void);
void ixia_wire_set_limits(const ixia_wire_limits_t *lim);

/* ---- transports ---- */

/* A memory transport holding one message, read through a cursor; writes
 * append. Reads past the end fail with an error (the stock buffer returns 0
 * bytes and c_glib's read_all then spins). max_size bounds writes. */
ThriftMemoryBuffer *ixia_frame_buffer_new(guint32 max_size);
/* Replaces the contents with a copy of data and rewinds the cursor. */
void ixia_frame_buffer_load(ThriftMemoryBuffer *buf, const guint8 *data, gsize len);
/* Empties the buffer (and lets a one-off large message's memory go). */
void ixia_frame_buffer_reset(ThriftMemoryBuffer *buf);
/* Bytes not yet read. */
guint32 ixia_frame_buffer_remaining(ThriftMemoryBuffer *buf);

/* The client side of a framed connection on a connected, blocking socket
 * (not owned: the caller closes fd after unref). A write collects the
 * message; flush sends it as one frame. The first read of a message
 * receives the whole response frame (at most lim->max_frame bytes, else an
 * error naming server.max_frame_bytes) and later reads come from memory. */
ThriftTransport *ixia_wire_socket_new(int fd, const ixia_wire_limits_t *lim);
/* One call on such a transport without a protocol: sends msg (a whole
 * message) as one frame and receives the answer's frame. *answer points
 * into the transport (valid until its next call) and is also left to be
 * read as the next message, so a generated recv_* can decode it instead. */
gboolean ixia_wire_socket_call(ThriftTransport *t, const guint8 *msg, gsize len,
                               const guint8 **answer, gsize *answer_len, GError **error);
/* The next frame on such a transport, the same way (an answer that came
 * after its caller gave up is skipped with it). */
gboolean ixia_wire_socket_next(ThriftTransport *t, const guint8 **answer, gsize *answer_len,
                               GError **error);

/* ---- protocols ---- */

/* A bounded binary (compact = FALSE) or compact protocol on transport,
 * which should be one of the transports above (on any other, lengths are
 * checked against the limits only). */
ThriftProtocol *ixia_wire_protocol_new(ThriftTransport *transport, gboolean compact,
                                       const ixia_wire_limits_t *lim);

/* ---- frames ---- */

/* Checks that frame (a request frame's body) is one well-formed
 * binary-protocol message within lim, walking it without recursion or
 * allocation: every length inside the bytes, known types only, nesting and
 * items within the limits. A server runs it before the processor, so c_glib
 * never meets a truncated or malformed request (its dispatch leaks or worse
 * on some). FALSE with an INVALID_ARGUMENT error naming the problem. */
gboolean ixia_wire_check_message(const guint8 *frame, gsize len, const ixia_wire_limits_t *lim,
                                 ixia_error_t **err);

/* The start of a binary-protocol call: method name (borrowed from frame,
 * not NUL-terminated), its length and the sequence id. FALSE when the frame
 * does not start with a strict binary-protocol message header. */
gboolean ixia_wire_peek_call(const guint8 *frame, gsize len, const char **name, guint32 *name_len,
                             gint32 *seqid);
/* A whole binary-protocol reply to the call (name, seqid) that carries an
 * IxiaError (code, message), without frame header, appended to out. Every
 * method of ixia's services declares `throws (1: IxiaError err)`, so any
 * generated client reads it as that method's error: the server uses it for
 * calls it cannot decode or serve (over a limit, busy). */
void ixia_wire_append_error(GByteArray *out, const char *name, guint32 name_len, gint32 seqid,
                            gint32 code, const char *message);

/* A successful reply to a void call (name, seqid), without frame header. */
void ixia_wire_append_void_reply(GByteArray *out, const char *name, guint32 name_len,
                                 gint32 seqid);
/* The string argument with field id `id` of a call frame whose arguments
 * are all strings (authenticate). Borrowed, not NUL-terminated; FALSE when
 * absent or malformed. */
gboolean ixia_wire_call_string(const guint8 *frame, gsize len, gint16 id, const char **value,
                               guint32 *value_len);
/* The get call, coded by hand on the API's hot path.
 *
 * The generated reader and writer of get cost more than the get itself
 * (GObject construction, property lookups and virtual calls per field:
 * ~8 us of the ~30 us of API CPU a cached get took, measured with perf),
 * so ixia-query-api reads get's arguments and writes its answer here. The
 * bytes are the generated code's (tests/test_common.c checks both ways);
 * any frame this reader does not take whole (another shape or type, an
 * unknown or repeated field, a NUL inside a string, more fields than it
 * holds, bytes after the arguments, a frame over IXIA_WIRE_GET_MAX_FRAME)
 * is left to the generated processor, which answers it as it always did.
 * Lengths are checked against the frame before use. */
#define IXIA_WIRE_GET_MAX_FIELDS 64
#define IXIA_WIRE_GET_MAX_FRAME 65536
typedef struct {
  gint32 seqid;
  const char *ns, *table, *key; /* NUL-terminated copies in the scratch array */
  gsize key_len;
  /* NULL-terminated; fields[0] NULL when the call names no fields. */
  const char *fields[IXIA_WIRE_GET_MAX_FIELDS + 1];
} ixia_wire_get_t;
/* TRUE and *call filled (its strings in scratch, overwritten) when frame
 * is a whole get call this reader takes; FALSE leaves it to the processor. */
gboolean ixia_wire_read_get(const guint8 *frame, gsize len, GByteArray *scratch,
                            ixia_wire_get_t *call);
/* get's successful answer (a Document with all four fields set), without
 * frame header, appended to out. */
void ixia_wire_append_get_reply(GByteArray *out, gint32 seqid, gboolean found, const char *key,
                                gsize key_len, gint64 version, const char *json, gsize json_len);
/* The client's side: the call, without frame header, appended to out;
 * fields may be NULL. The generated client sends sequence id 0; the server
 * echoes whatever it gets. */
void ixia_wire_append_get_call(GByteArray *out, gint32 seqid, const char *ns, const char *table,
                               const char *key, const char *const *fields);
/* A successful answer of the shape ixia_wire_append_get_reply writes: TRUE
 * with *json borrowed from answer (not NUL-terminated). FALSE for any other
 * answer (an IxiaError, another writer's field order): read it with the
 * generated recv_get. */
gboolean ixia_wire_read_get_reply(const guint8 *answer, gsize len, gboolean *found,
                                  gint64 *version, const char **json, gsize *json_len);

/* Calls whose one argument is a string (field 1), and their answers, coded
 * by hand for a caller that sends and receives on its own event loop
 * (query-api/fanout.c's shard calls from the API's I/O threads). The call,
 * without frame header, is appended to out. */
void ixia_wire_append_string_call(GByteArray *out, const char *method, gint32 seqid,
                                  const char *arg, gsize arg_len);
/* An answer (without frame header) to such a call of `method` whose result
 * is a string or binary (coded alike) or an IxiaError: IXIA_WIRE_REPLY_OK with *value borrowed from
 * a (not NUL-terminated); IXIA_WIRE_REPLY_ERROR with the IxiaError's *code
 * and *msg; IXIA_WIRE_REPLY_EXCEPTION for an application exception (the
 * server could not serve the call: *msg); IXIA_WIRE_REPLY_BAD for anything
 * else (another method, a truncated or unknown shape). Lengths are checked
 * against the answer before use. */
enum {
  IXIA_WIRE_REPLY_BAD = -1,
  IXIA_WIRE_REPLY_OK = 0,
  IXIA_WIRE_REPLY_ERROR = 1,
  IXIA_WIRE_REPLY_EXCEPTION = 2
};
int ixia_wire_read_string_reply(const guint8 *answer, gsize len, const char *method,
                                const char **value, gsize *value_len, gint32 *code,
                                const char **msg, gsize *msg_len);
/* The serving side, for a hot call answered from its frame (thrift_gate.h's
 * fast calls: a shard's search_page). TRUE when frame is exactly a call of
 * `method` with field 1 a string and nothing else: *arg is borrowed from
 * frame and NUL-terminated there (the argument struct's stop byte follows
 * it), *seqid the call's. FALSE for any other shape, or an argument holding
 * a NUL (left to the processor, which answers as it always did). */
gboolean ixia_wire_read_string_call(const guint8 *frame, gsize len, const char *method,
                                    gint32 *seqid, const char **arg, gsize *arg_len);
/* A successful answer to such a call whose result is a string or binary
 * (value, n bytes), without frame header, appended to out. */
void ixia_wire_append_string_reply(GByteArray *out, const char *method, gint32 seqid,
                                   const void *value, gsize n);

/* The IxiaError code an answer frame (without header) carries, 0 when it
 * is not an IxiaError answer. */
gint32 ixia_wire_answer_error_code(const guint8 *answer, gsize len);
/* When bytes (the first ones a connection sent) start an HTTP request: a
 * whole HTTP 400 answer saying this is a Thrift port; else NULL. */
const char *ixia_wire_http_refusal(const guint8 *bytes, gsize len);

#endif
