/* The layer every ixia Thrift port puts in front of its processor (server
 * hooks, server.h): API keys per connection, and request metrics.
 *
 * Keys. With auth on, a connection's first call is authenticate(key)
 * (answered here, for every service); the key's principal is kept with the
 * connection, and a connection without one gets UNAUTHENTICATED for any
 * other call. Index shards and sinks know only the service key, so only it
 * passes there; the API also knows its stored keys, and its handlers check
 * each call's namespace and action against the connection's principal
 * (ixia_thrift_gate_principal). Why per connection rather than a key in
 * every request: the IDL's calls stay as they are (existing clients and
 * generated code keep working once they authenticate), a key is hashed
 * once per connection instead of once per call, and a key travels once.
 *
 * Fast calls. A service may answer a hot call straight from its frame
 * (ixia_thrift_gate_set_fast), after the key check. Such a function runs
 * outside the processor: it may take its call over (ixia_server_call_later,
 * answered with ixia_server_call_answer_string or _error), and on an I/O
 * thread it must not block (ixia_server_defer, then the frame runs again on
 * a worker).
 *
 * Metrics. Every answered frame is timed into
 * ixia_request_duration_seconds{call, transport="thrift"} and an IxiaError
 * answer counted into ixia_request_errors_total by code. Method names come
 * from the network: only the service's own are labels, others are "other".
 *
 * Thread safety: as the server's hooks (any worker or I/O thread). */
#ifndef IXIA_THRIFT_GATE_H
#define IXIA_THRIFT_GATE_H

#include "auth.h"
#include "server.h"

typedef struct ixia_thrift_gate ixia_thrift_gate_t;

/* auth may be NULL (no keys: authenticate is accepted and ignored).
 * methods: the service's method names, NULL-terminated (borrowed, static). */
ixia_thrift_gate_t *ixia_thrift_gate_new(ixia_auth_t *auth, const char *const *methods);
void ixia_thrift_gate_install(ixia_thrift_gate_t *g, ixia_server_t *srv);
/* After the server is stopped. */
void ixia_thrift_gate_destroy(ixia_thrift_gate_t *g);

/* A call the service answers straight from its frame, after the key check
 * and before the processor: a hot call whose generated decoding costs more
 * than its work (wire.h, the get call). fn appends a whole answer (without
 * frame header) to out and returns TRUE, or returns FALSE, out untouched,
 * to leave the frame to the processor. An answer over server.max_frame_bytes
 * is replaced by the processor's TOO_LARGE error. Set before the server
 * starts; at most IXIA_THRIFT_GATE_MAX_FAST calls. */
#define IXIA_THRIFT_GATE_MAX_FAST 4
typedef gboolean (*ixia_thrift_fast_fn)(gpointer user, const guint8 *frame, guint32 size,
                                        GByteArray *out);
void ixia_thrift_gate_set_fast(ixia_thrift_gate_t *g, const char *method, ixia_thrift_fast_fn fn,
                               gpointer user);

/* The principal of the connection whose call runs on this thread
 * (borrowed), NULL when it has not authenticated or outside a call. */
const ixia_principal_t *ixia_thrift_gate_principal(void);

#endif
