/* A concurrent Thrift server (framed transport, binary protocol).
 *
 * Thrift c_glib ships only a one-connection-at-a-time server. This one owns
 * its connections on a few epoll I/O threads (server.io_threads) and runs
 * each whole request frame on a worker pool (server.workers); an idle
 * connection holds no thread. Every frame is decoded through the bounded
 * protocols of wire.h. Limits (server.* in the config): frame size checked
 * from the frame header, nesting depth and container items inside
 * messages, open connections (server.max_connections: beyond it a client is
 * told so), a deadline for a frame to arrive and an answer to be taken
 * (server.request_timeout_ms), and an idle timeout.
 *
 * The processor must be safe to call from several threads at once.
 * Thread safety: new/start/stop/destroy from one controlling thread;
 * ixia_server_add_stats from any thread. */
#ifndef IXIA_SERVER_H
#define IXIA_SERVER_H

#include <cjson/cJSON.h>
#include <thrift/c_glib/processor/thrift_processor.h>
#include <thrift/c_glib/thrift_struct.h>

#include "config.h"
#include "error.h"
#include "wire.h"

typedef struct ixia_server ixia_server_t;

/* A listening socket (non-blocking, close-on-exec, SO_REUSEADDR) on
 * host:port (0 picks a free port, *bound gets the one bound); -1 with an
 * error naming `what` (e.g. "HTTP"). */
int ixia_listen(const char *host, int port, const char *what, int *bound, ixia_error_t **err);

/* A daemon's scheduling policy (server.sched_batch), set by its main
 * thread on every thread it has so far, before it starts the others: they
 * inherit it. Under Linux's SCHED_BATCH a woken thread does not preempt
 * the running one (the thread that sent it a message finishes its turn
 * first). A policy the system refuses is logged and the thread keeps its
 * own. */
void ixia_server_sched_apply(const ixia_config_t *cfg);

/* Binds and listens on host:port (port 0 picks a free one). Takes a
 * reference on processor. */
ixia_server_t *ixia_server_new(const ixia_config_t *cfg, const char *host, int port,
                               ThriftProcessor *processor, ixia_error_t **err);
/* The port actually bound. */
int ixia_server_port(const ixia_server_t *srv);
/* Before ixia_server_start: also serves on a Unix-domain socket at path,
 * for clients on this machine (address "unix:PATH"), which skip the TCP/IP
 * stack on both sides of every call. A socket file left by a dead process
 * is replaced; one a live process answers on, or any other file, is an
 * error naming `setting`. The file is removed at destroy (unless another
 * has replaced it); its permissions follow the process's umask. */
gboolean ixia_server_listen_unix(ixia_server_t *srv, const char *path, const char *setting,
                                 ixia_error_t **err);
/* Replaces server.workers before ixia_server_start: a daemon whose calls
 * only compute (no waiting on other servers) runs best with about as many
 * workers as cores, where each extra thread costs wake-ups. */
void ixia_server_set_workers(ixia_server_t *srv, int workers);
/* Before ixia_server_start: the I/O threads when server.io_threads is 0
 * (automatic) instead of half the cores; a daemon whose cheap calls
 * compute (an index shard's small searches) wants one per core. */
void ixia_server_set_io_auto(ixia_server_t *srv, guint threads);
/* Before ixia_server_start: calls of `method` run on a pool of their own
 * `threads` threads instead of server.workers. A small pool kept busy takes
 * its next call without sleeping, where a call handed to one of many idle
 * workers costs a wake-up and a context switch on each side. */
void ixia_server_set_method_threads(ixia_server_t *srv, const char *method, int threads);

/* Cheap calls answered on the I/O threads. Before handing a frame to a
 * worker, an I/O thread asks fn about the call's method name; when fn says
 * yes it runs the call itself (no thread hand-off, no wake-up), and frames
 * pipelined on the connection are answered in a row (their answers leave in one
 * send when they came in one read). A handler running on
 * an I/O thread (ixia_server_on_io_thread) must not block: when it finds it
 * would (a disk read, a call to another server), it calls ixia_server_defer
 * and returns; its answer is dropped and the call runs again on a worker.
 * Set before ixia_server_start. */
typedef gboolean (*ixia_server_inline_fn)(const char *method, guint32 len);
void ixia_server_set_inline(ixia_server_t *srv, ixia_server_inline_fn fn);
gboolean ixia_server_on_io_thread(void);
void ixia_server_defer(void);
/* ixia_server_defer, leaving data to the worker that runs the call again:
 * there ixia_server_deferred_data returns it (once; the caller owns it
 * then), so what the I/O thread already did (a parsed request) is not done
 * twice. free_fn frees it if the call never runs again or its handler does
 * not take it; off an I/O thread it frees it at once. */
void ixia_server_defer_with(gpointer data, GDestroyNotify free_fn);
/* On a worker, while it runs a deferred call: what the I/O thread's run of
 * it left (ixia_server_defer_with), or NULL. */
gpointer ixia_server_deferred_data(void);
/* Runs fn(data) the way an I/O thread runs a cheap call (another event
 * loop, the HTTP port's, uses it): ixia_server_on_io_thread() is TRUE
 * inside. FALSE when fn called ixia_server_defer (run it again where it
 * may block). */
gboolean ixia_server_run_inline(void (*fn)(gpointer), gpointer data);

/* Hooks of the layers above the server (common/thrift_gate.c: API keys and
 * call metrics). gate runs before a frame reaches the processor: it may
 * answer the frame itself (TRUE, the whole answer frame, header included,
 * in out). observe runs after each answered frame. Both get the
 * connection's state slot (see ixia_server_conn_state); state_free frees
 * what a hook stored there when the connection closes. Set before
 * ixia_server_start. */
typedef struct {
  gboolean (*gate)(gpointer user, const guint8 *frame, guint32 size, GByteArray *out);
  void (*observe)(gpointer user, const guint8 *frame, guint32 size, const guint8 *answer,
                  guint32 answer_len, gint64 elapsed_us);
  GDestroyNotify state_free;
  gpointer user;
} ixia_server_hooks_t;
void ixia_server_set_hooks(ixia_server_t *srv, const ixia_server_hooks_t *hooks);
/* While a hook or the processor runs a call: the slot of the call's
 * connection (NULL outside a connection, e.g. ixia_server_serve_frame). */
gpointer *ixia_server_conn_state(void);

/* Calls answered later. A handler the server runs (on a worker or an I/O
 * thread) may take its call over: ixia_server_call_later returns a handle,
 * and the answer the processor writes when the handler returns is dropped.
 * The connection reads no further frame until ixia_server_call_answer,
 * which any thread may call once (before or after the handler returns) with
 * the call's generated result struct (success or exception set); it sends
 * the answer and frees the handle. So a write waits for its group commit
 * without holding a thread. A fast call of the gate (thrift_gate.h) may
 * take its call over the same way. NULL outside a server
 * (ixia_server_serve_frame called directly): the handler then answers as
 * usual. Stopping the server waits for every call taken over to be
 * answered. */
typedef struct ixia_server_call ixia_server_call_t;
ixia_server_call_t *ixia_server_call_later(void);
void ixia_server_call_answer(ixia_server_call_t *call, ThriftStruct *result);
/* The same for a call taken over by a fast call of the gate (thrift_gate.h),
 * which has no generated result struct: a method whose result is a string
 * answered with value (len bytes), or its IxiaError (code, message). */
void ixia_server_call_answer_string(ixia_server_call_t *call, const char *value, gsize len);
void ixia_server_call_answer_error(ixia_server_call_t *call, gint32 code, const char *message);

/* Watches: a call run on an I/O thread that waits on another socket (the
 * API's calls to its index shards) hands the socket to the thread and
 * returns, after taking its call over (ixia_server_call_later); the thread
 * serves its other connections meanwhile and runs fn on its own thread
 * when fd has bytes to read (READABLE, level-triggered: again on every
 * pass until they are read or the watch ends), when deadline_us
 * (monotonic) passes first (TIMEOUT), or when the server stops (STOPPING).
 * After TIMEOUT and STOPPING the watch is over (freed after fn returns);
 * otherwise fn ends it with ixia_server_watch_end, on the same thread, when
 * it has what it waited for. fn must not block: it runs where other
 * connections wait for their turn. The fd stays the caller's.
 * ixia_server_watch returns NULL off an I/O thread (ixia_server_can_watch
 * is FALSE: a worker, or the HTTP port's loop) or when epoll refuses fd. */
typedef struct ixia_server_watch ixia_server_watch_t;
typedef enum {
  IXIA_SERVER_WATCH_READABLE,
  IXIA_SERVER_WATCH_TIMEOUT,
  IXIA_SERVER_WATCH_STOPPING
} ixia_server_watch_event_t;
typedef void (*ixia_server_watch_fn)(ixia_server_watch_t *w, ixia_server_watch_event_t ev,
                                     gpointer ud);
gboolean ixia_server_can_watch(void);
ixia_server_watch_t *ixia_server_watch(int fd, gint64 deadline_us, ixia_server_watch_fn fn,
                                       gpointer ud);
void ixia_server_watch_end(ixia_server_watch_t *w);
/* Moves a watch's deadline (on its thread; no system call). */
void ixia_server_watch_set_deadline(ixia_server_watch_t *w, gint64 deadline_us);
/* On an I/O thread (in a call it runs, or a watch's fn): runs fn(data) once, on this
 * thread, after the events of the current pass are handled and before it
 * waits again, so that what several of them produced (requests to the
 * same peer) leaves in one system call. FALSE off an I/O thread. fn may
 * ask for another run of the same pass. */
gboolean ixia_server_at_pass_end(void (*fn)(gpointer data), gpointer data);

gboolean ixia_server_start(ixia_server_t *srv, ixia_error_t **err);
/* Stops accepting, closes open connections and waits for workers. */
void ixia_server_stop(ixia_server_t *srv);
void ixia_server_destroy(ixia_server_t *srv);

/* Adds the server's counters to a stats object: connections_total,
 * connections_open, connections_refused (over server.max_connections),
 * connections_timed_out (server.request_timeout_ms), rejected_frames
 * (oversized or not Thrift), requests, requests_inline (answered on an I/O
 * thread), requests_deferred (tried there, run by a worker),
 * requests_answered_later (ixia_server_call_answer). srv may be NULL
 * (adds nothing). */
void ixia_server_add_stats(const ixia_server_t *srv, cJSON *o);

/* An empty byte array of the calling thread, kept in key (a GPrivate made
 * with G_PRIVATE_INIT((GDestroyNotify)g_byte_array_unref), so the array goes
 * with its thread: pool workers come and go). One that grew past 1 MiB by
 * its last use is let go of first: one large answer does not stay held by
 * every thread. For answers built per call (the gate's, a shard's page). */
GByteArray *ixia_server_thread_bytes(GPrivate *key);

/* Serves one request frame (its body, without the 4-byte header) with
 * processor, as a worker does for every frame: decoded through the bounded
 * protocols of wire.h (limits lim), answered with the call's result or an
 * IxiaError. Returns the whole answer frame, header included, in a buffer
 * of the calling thread valid until its next call; NULL when the frame is
 * not a binary-protocol Thrift message (a server closes the connection).
 * Any thread; the fuzz targets call it directly. */
const GByteArray *ixia_server_serve_frame(ThriftProcessor *processor,
                                          const ixia_wire_limits_t *lim, const guint8 *frame,
                                          guint32 size);

/* Blocks until SIGINT or SIGTERM. */
void ixia_wait_for_signal(void);

/* Writes the bound port to path (atomically; nothing when path is empty),
 * so that scripts and tests starting a daemon on port 0 can find it. */
gboolean ixia_server_write_port_file(const ixia_server_t *srv, const char *path, ixia_error_t **err);

/* Writes text to path atomically (temp file + rename), so a reader polling
 * for it never sees a partial file. */
gboolean ixia_write_file_atomic(const char *path, const char *text, ixia_error_t **err);

#endif
