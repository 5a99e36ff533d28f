/* The Thrift server of every ixia daemon: event-driven connections, a
 * worker pool for requests.
 *
 * Connections belong to a few I/O threads (server.io_threads), each with
 * its own epoll set. An I/O thread accepts, reads bytes until it holds one
 * whole frame (framed transport, size checked from the header before the
 * body is read), and runs it itself when the service calls it cheap
 * (ixia_server_set_inline), or hands the connection to the worker pool
 * (server.workers). The frame goes through the hooks (a gate may answer it
 * from its bytes) or the bounded protocols of wire.h and the processor;
 * the answer is written straight to
 * the socket (non-blocking) and gives the connection back to its I/O
 * thread through a queue and an eventfd; whatever did not fit in the
 * socket is sent by the I/O thread when the socket drains. A call run on an
 * I/O thread that waits on another server (the API's queries to its
 * shards) takes its call over, hands the other socket to the thread as a
 * watch (readable, deadline, server stopping) and is finished by the
 * watch's callback on the same thread, which gives the connection back
 * without the eventfd.
 *
 * Ownership is simple on purpose: a connection is touched by exactly one
 * thread at a time, its I/O thread while reading or writing, one worker
 * while a request runs (the I/O thread then only records events for it).
 * An I/O thread answers at most INLINE_TURN calls of one connection before
 * it serves its other ready connections; the connection waits in the
 * thread's ready queue for its next turn (epoll is edge-triggered, so the
 * queue, not a new event, brings it back).
 * Idle connections cost memory, not threads, so thousands of idle or slow
 * clients cannot lock others out. Limits: server.max_connections (beyond it
 * a connection gets an answer naming the option and is closed),
 * server.request_timeout_ms (a frame must arrive whole, and an answer be
 * taken, within it: slowloris), server.idle_timeout_ms, and the frame,
 * depth and item limits of wire.h. A frame that cannot be decoded, or whose
 * answer would be over the frame limit, gets an IxiaError naming the
 * problem (INVALID_ARGUMENT, TOO_LARGE); the connection stays usable because
 * frames delimit messages. */
#include "server.h"

#include <stdatomic.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>


#include "log.h"
#include "thrift_util.h"
#include "wire.h"

/* Bytes asked of one recv while no frame larger than this is under way. */
#define RECV_CHUNK 65536u
/* How often an I/O thread looks for timed-out connections. */
#define TICK_MS 250
/* Connections accepted per wake-up of one I/O thread (fairness). */
#define ACCEPT_BATCH 64
/* Frames one connection may have answered on its I/O thread in one turn
 * before the thread serves its other ready connections (fairness: a client
 * that sends its next request as soon as it has an answer would otherwise
 * keep the thread to itself while the others wait). */
#define INLINE_TURN 4
/* Connections over server.max_connections still accepted to be told why;
 * beyond these they are closed at once. */
#define REFUSED_MAX 256
/* File descriptors kept for everything else (RocksDB files, Kafka, cache)
 * when the open-file limit caps connections. */
#define FD_RESERVE 512
/* One warning per this long for refusals; the rest are counted. */
#define WARN_EVERY_US (5 * G_USEC_PER_SEC)

typedef enum { CONN_READING, CONN_RUNNING, CONN_WRITING } conn_state_t;

typedef struct io_thread io_t;

/* What an epoll event names: the first member of conn_t and of a watch. */
enum { EV_CONN = 0, EV_WATCH = 1 };

typedef struct {
  guint8 kind;         /* EV_CONN */
  int fd;
  io_t *io;
  conn_state_t state;
  GByteArray *in;      /* received bytes, NULL while none are held */
  guint in_pos;        /* start of the first frame not yet run */
  GByteArray *out;     /* answer bytes not yet sent, NULL when none */
  guint out_pos;
  gint64 frame_start;  /* µs: first byte of the incomplete frame, 0 = none */
  gint64 since;        /* µs: accepted, last answer sent, or writing began */
  gboolean readable;   /* input may be waiting in the socket */
  gboolean rdhup;      /* the peer shut down its side: read on to the end */
  gboolean gone;       /* the peer hung up or the socket failed (I/O thread) */
  gboolean send_failed; /* the worker could not send the answer (worker) */
  gboolean close_after; /* close once the answer is out */
  gboolean refused;    /* over server.max_connections: answer with an error */
  gboolean closed;     /* closed; freed once the current epoll batch is done */
  gpointer hook_state; /* hooks' per-connection state (ixia_server_conn_state) */
  GList link;          /* in io->conns */
  GList ready_link;    /* in io->ready while `queued` */
  gboolean queued;     /* waits in io->ready for its next turn */
  gboolean out_armed;  /* registered for EPOLLOUT (while an answer waits for room) */
  GByteArray *cork;    /* answers of pipelined frames, held to leave with the next one's */
  /* What the deferring handler left for the worker that runs the frame
   * again (ixia_server_defer_with), and how to free it if none takes it. */
  gpointer defer_data;
  GDestroyNotify defer_free;
} conn_t;

typedef struct {
  void (*fn)(gpointer);
  gpointer data;
} pass_end_t;

struct io_thread {
  ixia_server_t *srv;
  int epfd;
  int evfd;           /* wakes the thread: finished requests, stop */
  _Atomic gint wake_pending;  /* evfd written and not yet read: further writes are not needed */
  GThread *thread;
  GAsyncQueue *done;  /* conn_t * whose request finished */
  GAsyncQueue *incoming; /* accepted sockets handed over by another I/O thread
                            (fd + 1, refused connections negated) */
  GQueue conns;       /* every connection of this thread */
  GQueue ready;       /* connections that used up their turn with input left */
  GPtrArray *closed;  /* conn_t * closed during this epoll batch: events of
                         the same batch may still name them */
  GQueue watches;     /* ixia_server_watch_t * of this thread */
  GPtrArray *ended;   /* watches ended during this pass, freed after it */
  GArray *pass_end;   /* pass_end_t to run once this pass's events are handled */
  GHashTable *parked; /* fd + 1 of sockets a watch of this thread left
                         registered in epfd, disarmed (ixia_server_watch) */
  guint8 rbuf[RECV_CHUNK]; /* receives of up to RECV_CHUNK bytes land here first */
};

struct ixia_server {
  ThriftProcessor *processor;
  ixia_wire_limits_t lim;
  int listen_fd;
  int unix_fd;     /* ixia_server_listen_unix's socket, or -1 */
  char *unix_path; /* its path, removed at destroy */
  dev_t unix_dev;  /* and the file bound, so that destroy removes only ours */
  ino_t unix_ino;
  int spare_fd; /* kept open, given up to accept-and-close on EMFILE */
  int port;
  io_t *io;
  guint n_io;
  gboolean io_auto; /* server.io_threads was 0 */
  GThreadPool *pool;
  gint workers;
  char *method;              /* calls with a pool of their own (ixia_server_set_method_threads) */
  gint method_threads;
  GThreadPool *method_pool;
  gint max_conns;
  gint64 request_timeout_us;
  gint64 idle_timeout_us;
  _Atomic gint stopping;
  _Atomic gint open;  /* connections open, refused ones included */
  _Atomic gint64 warned_at;   /* µs, guarded by atomics: last refusal warning */
  _Atomic guint next_io;      /* round robin of accepted connections over the I/O threads */
  _Atomic guint64 connections_total;
  _Atomic guint64 connections_refused;
  _Atomic guint64 timeouts;
  _Atomic guint64 rejected_frames;
  _Atomic guint64 requests;
  _Atomic guint64 inline_requests; /* answered on an I/O thread */
  _Atomic guint64 deferred;        /* tried inline, handed to a worker */
  _Atomic guint64 answered_later;  /* calls answered through ixia_server_call_answer */
  gint pending_calls;      /* taken over by ixia_server_call_later, not yet answered */
  GMutex calls_lock;
  GCond calls_cond;        /* pending_calls reached 0 */
  ixia_server_inline_fn inline_fn;
  ixia_server_hooks_t hooks;
};

/* A call answered later (ixia_server_call_later). Two references: the
 * thread serving the frame drops its own once it is done with the frame's
 * bytes, the answer drops the other; the last one gives the connection back
 * to its I/O thread, so the answer may come before the handler returns. */
struct ixia_server_call {
  conn_t *c;
  ixia_server_t *srv;
  char *name;
  gint32 seqid;
  _Atomic gint refs;
  const guint8 *frame; /* the request, for the observe hook (the connection's
                          input stays put until the call is released) */
  guint32 size;
  gint64 t0;           /* µs: when the frame began to be served (observe hook) */
};

/* The frame a thread is serving, for ixia_server_call_later. */
typedef struct {
  conn_t *c;
  ixia_server_t *srv;
  const guint8 *frame;
  guint32 size;
  ixia_server_call_t *later;
  gint64 t0; /* µs: when the frame began to be served (observe hook) */
} serving_t;
static __thread serving_t *tl_serving;

/* Set while an I/O thread runs a call itself (see ixia_server_set_inline). */
static __thread gboolean tl_on_io, tl_deferred;
/* ixia_server_defer_with's data: on the I/O thread, from the handler to
 * dispatch; on the worker, from its connection to ixia_server_deferred_data. */
static __thread gpointer tl_defer_data;
static __thread GDestroyNotify tl_defer_free;

/* Frees what a handler left and nobody took. */
static void defer_data_drop(gpointer *data, GDestroyNotify *free_fn) {
  if (*data && *free_fn) (*free_fn)(*data);
  *data = NULL;
  *free_fn = NULL;
}
/* The I/O thread this thread is (NULL on every other thread). */
static __thread io_t *tl_io;
/* The state slot of the connection whose call runs on this thread. */
static __thread gpointer *tl_state;

gboolean ixia_server_on_io_thread(void) { return tl_on_io; }

gboolean ixia_server_run_inline(void (*fn)(gpointer), gpointer data) {
  gboolean was = tl_on_io;
  tl_on_io = TRUE;
  tl_deferred = FALSE;
  fn(data);
  gboolean ran = !tl_deferred;
  tl_on_io = was;
  tl_deferred = FALSE;
  /* (This loop's worker runs its call again from the start.) */
  defer_data_drop(&tl_defer_data, &tl_defer_free);
  return ran;
}

gpointer *ixia_server_conn_state(void) { return tl_state; }

void ixia_server_set_hooks(ixia_server_t *srv, const ixia_server_hooks_t *hooks) {
  srv->hooks = *hooks;
}

void ixia_server_defer(void) {
  if (tl_on_io) tl_deferred = TRUE;
}

void ixia_server_defer_with(gpointer data, GDestroyNotify free_fn) {
  if (!tl_on_io) {
    if (data && free_fn) free_fn(data);
    return;
  }
  tl_deferred = TRUE;
  defer_data_drop(&tl_defer_data, &tl_defer_free);
  tl_defer_data = data;
  tl_defer_free = free_fn;
}

gpointer ixia_server_deferred_data(void) {
  gpointer d = tl_defer_data;
  tl_defer_data = NULL;
  tl_defer_free = NULL;
  return d;
}

/* Markers told apart from connections in epoll data. */
static char listen_marker, unix_marker, wake_marker;

/* ---------- workers ---------- */

/* A worker thread's decoding state, reused across requests (and across
 * servers: GThreadPool threads may serve several pools). */
typedef struct {
  ixia_wire_limits_t lim;
  ThriftMemoryBuffer *in, *out;
  ThriftProtocol *pin, *pout;
} worker_t;

static void worker_free(gpointer data) {
  worker_t *w = data;
  if (!w) return;
  g_object_unref(w->pin);
  g_object_unref(w->pout);
  g_object_unref(w->in);
  g_object_unref(w->out);
  g_free(w);
}

static GPrivate worker_key = G_PRIVATE_INIT(worker_free);

static worker_t *worker_get(const ixia_wire_limits_t *lim) {
  worker_t *w = g_private_get(&worker_key);
  if (w && memcmp(&w->lim, lim, sizeof *lim) == 0) return w;
  w = g_new0(worker_t, 1);
  w->lim = *lim;
  w->in = ixia_frame_buffer_new(lim->max_frame);
  w->out = ixia_frame_buffer_new(lim->max_frame + 4); /* + the frame header */
  w->pin = ixia_wire_protocol_new(THRIFT_TRANSPORT(w->in), FALSE, lim);
  w->pout = ixia_wire_protocol_new(THRIFT_TRANSPORT(w->out), FALSE, lim);
  g_private_replace(&worker_key, w);
  return w;
}

static guint32 frame_size(const guint8 *p) {
  guint32 be;
  memcpy(&be, p, 4);
  return GUINT32_FROM_BE(be);
}

static void set_frame_size(guint8 *p, guint32 size) {
  guint32 be = GUINT32_TO_BE(size);
  memcpy(p, &be, 4);
}

/* Sends what the socket takes now; FALSE on a broken connection. */
static gboolean send_some(int fd, const guint8 *data, guint len, guint *pos) {
  while (*pos < len) {
    ssize_t w = send(fd, data + *pos, len - *pos, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      *pos += (guint)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return TRUE;
}

/* Replaces whatever the processor wrote with an error answer (an
 * IxiaError reply: wire.h). */
static void answer_error(GByteArray *out, const guint8 *frame, guint32 size, ixia_code_t code,
                         const char *message) {
  const char *name = "";
  guint32 name_len = 0;
  gint32 seqid = 0;
  ixia_wire_peek_call(frame, size, &name, &name_len, &seqid);
  g_byte_array_set_size(out, 4);
  ixia_wire_append_error(out, name, name_len, seqid, code, message);
}

/* Wakes an I/O thread unless a wake-up is already on its way: the thread
 * clears wake_pending before it drains its queues. */
static void wake(io_t *io) {
  if (atomic_exchange_explicit(&io->wake_pending, 1, memory_order_seq_cst)) return;
  guint64 one = 1;
  ssize_t w = write(io->evfd, &one, sizeof one);
  (void)w; /* a full counter still wakes the thread */
}

/* On the connection's own I/O thread (a call answered from a watch) the
 * thread drains its queue before it next waits: no wake-up is needed.
 * Once pushed, the connection is its I/O thread's, which may close and
 * free it at once: nothing here reads it after the push. */
static void hand_back(conn_t *c) {
  io_t *io = c->io;
  g_async_queue_push(io->done, c);
  if (tl_io != io) wake(io);
}

const GByteArray *ixia_server_serve_frame(ThriftProcessor *processor,
                                          const ixia_wire_limits_t *lim, const guint8 *frame,
                                          guint32 size) {
  if (size < 8 || frame[0] != 0x80 || frame[1] != 0x01) return NULL;
  ixia_thrift_init(); /* once: also mends c_glib's unknown-method answer */
  worker_t *w = worker_get(lim);
  ixia_frame_buffer_reset(w->out);
  g_byte_array_set_size(w->out->buf, 4); /* room for the answer's frame header */
  /* Only well-formed calls reach the processor: c_glib's dispatch leaks or
   * worse on some malformed ones. */
  ixia_error_t *bad = NULL;
  if (frame[2] != 0 || (frame[3] != T_CALL && frame[3] != T_ONEWAY))
    bad = ixia_error_new(IXIA_EINVAL, "message type %u is not a call", frame[3]);
  else
    ixia_wire_check_message(frame, size, lim, &bad);
  GError *gerr = NULL;
  if (!bad) {
    ixia_frame_buffer_load(w->in, frame, size);
    if (!thrift_processor_process(processor, w->pin, w->pout, &gerr)) {
      /* Reads come from memory: a failed send is the answer outgrowing its
       * frame. */
      gboolean too_big = gerr && gerr->domain == THRIFT_TRANSPORT_ERROR &&
                         gerr->code == THRIFT_TRANSPORT_ERROR_SEND;
      bad = too_big ? ixia_error_new(IXIA_ETOOLARGE,
                                     "the answer is over server.max_frame_bytes=%u; ask for less "
                                     "(fewer keys, a smaller limit or fields)",
                                     lim->max_frame)
                    : ixia_error_new(IXIA_EINVAL, "%s",
                                     gerr ? gerr->message : "not a call of this service");
      if (gerr) g_error_free(gerr);
    }
  }
  if (bad) {
    if (bad->code == IXIA_EINVAL) ixia_error_prefix(bad, "cannot serve this call");
    IXIA_DEBUG("%s", bad->message);
    answer_error(w->out->buf, frame, size, bad->code, bad->message);
    ixia_error_destroy(bad);
  }
  GByteArray *out = w->out->buf;
  set_frame_size(out->data, out->len - 4);
  return out;
}

static void call_release(ixia_server_call_t *call);

GByteArray *ixia_server_thread_bytes(GPrivate *key) {
  GByteArray *b = g_private_get(key);
  if (b && b->len > (1u << 20)) {
    g_byte_array_unref(b);
    b = NULL;
  }
  if (!b) g_private_set(key, b = g_byte_array_new());
  g_byte_array_set_size(b, 0);
  return b;
}

/* One frame of connection c through the hooks and the processor, with
 * tl_serving set; NULL answer and *later set when the handler took the call
 * over (the observe hook then runs when it is answered). */
static const GByteArray *serve(ixia_server_t *srv, conn_t *c, const guint8 *frame, guint32 size,
                               ixia_server_call_t **later) {
  /* The gate's answers (whole get answers among them). */
  static GPrivate gated_key = G_PRIVATE_INIT((GDestroyNotify)g_byte_array_unref);
  gint64 t0 = srv->hooks.observe ? g_get_monotonic_time() : 0;
  serving_t sv = {c, srv, frame, size, NULL, t0};
  tl_state = &c->hook_state;
  const GByteArray *out = NULL;
  /* (A fast call of the gate may take its call over too.) */
  tl_serving = &sv;
  if (srv->hooks.gate) {
    GByteArray *gated = ixia_server_thread_bytes(&gated_key);
    if (srv->hooks.gate(srv->hooks.user, frame, size, gated)) out = gated;
  }
  if (!out && !sv.later) out = ixia_server_serve_frame(srv->processor, &srv->lim, frame, size);
  tl_serving = NULL;
  if (sv.later) {
    out = NULL; /* (the call's t0 was set when it was taken over: it may be answered already) */
  } else if (out && srv->hooks.observe && !tl_deferred) {
    srv->hooks.observe(srv->hooks.user, frame, size, out->data + 4, out->len - 4,
                       g_get_monotonic_time() - t0);
  }
  tl_state = NULL;
  *later = sv.later;
  return out;
}

/* Sends answer bytes on c, from whichever thread owns the connection (its
 * I/O thread, a worker, or whoever answers a call later): after the bytes
 * left unsent before (c->out: answers of pipelined frames that the socket
 * did not take), else straight to the socket, what it does not take kept
 * in c->out for the I/O thread. FALSE when the send failed. */
static gboolean conn_send(conn_t *c, const guint8 *data, guint len) {
  if (c->out) {
    g_byte_array_append(c->out, data, len);
    return TRUE;
  }
  guint sent = 0;
  if (!send_some(c->fd, data, len, &sent)) return FALSE;
  if (sent < len) {
    c->out = g_byte_array_sized_new(len - sent);
    g_byte_array_append(c->out, data + sent, len - sent);
    c->out_pos = 0;
  }
  return TRUE;
}

/* Runs the frame at c->in[in_pos] and answers (worker thread). */
static void run_request(gpointer data, gpointer user_data) {
  conn_t *c = data;
  ixia_server_t *srv = user_data;
  guint32 size = frame_size(c->in->data + c->in_pos);
  ixia_server_call_t *later;
  tl_defer_data = c->defer_data, tl_defer_free = c->defer_free;
  c->defer_data = NULL, c->defer_free = NULL;
  const GByteArray *out = serve(srv, c, c->in->data + c->in_pos + 4, size, &later);
  defer_data_drop(&tl_defer_data, &tl_defer_free); /* the handler did not take it */
  c->in_pos += 4 + size;
  atomic_fetch_add_explicit(&srv->requests, 1, memory_order_relaxed);
  if (later) {
    call_release(later); /* the answer gives the connection back */
    return;
  }
  if (!out || !conn_send(c, out->data, out->len)) c->send_failed = TRUE;
  hand_back(c);
}

/* ---------- connections (on their I/O thread) ---------- */

static void conn_free(gpointer data) {
  conn_t *c = data;
  if (c->hook_state && c->io->srv->hooks.state_free) c->io->srv->hooks.state_free(c->hook_state);
  defer_data_drop(&c->defer_data, &c->defer_free);
  if (c->in) g_byte_array_unref(c->in);
  if (c->out) g_byte_array_unref(c->out);
  if (c->cork) g_byte_array_unref(c->cork);
  g_free(c);
}

static void conn_close(conn_t *c) {
  io_t *io = c->io;
  g_queue_unlink(&io->conns, &c->link);
  if (c->queued) g_queue_unlink(&io->ready, &c->ready_link);
  c->queued = FALSE;
  epoll_ctl(io->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->closed = TRUE;
  g_ptr_array_add(io->closed, c);
  atomic_fetch_add(&io->srv->open, -1);
}

/* Refusals and timeouts come in floods when they come: one warning per
 * WARN_EVERY_US, the rest only counted. */
static void warn_limited(ixia_server_t *srv, const char *why) {
  gint64 now = g_get_monotonic_time();
  gint64 last = atomic_load_explicit(&srv->warned_at, memory_order_relaxed);
  if (last && now - last < WARN_EVERY_US) return;
  if (!atomic_compare_exchange_strong_explicit(&srv->warned_at, &last, now, memory_order_relaxed, memory_order_relaxed))
    return;
  IXIA_WARN("%s (for 5 s, further ones are only counted in stats)", why);
}

static gboolean flush_out(conn_t *c, gint64 now);

/* A connection is registered for EPOLLOUT only while an answer waits for
 * room in its socket. Registered always, every answer its peer read
 * reported room again: on a Unix socket each read of an answer called
 * the connection's epoll callback and queued an event (woke the I/O
 * thread when asleep) that found nothing to do, one a query between the
 * API and a shard. Adding EPOLLOUT re-checks the socket (epoll_ctl polls
 * it), so room made before the call is still reported. */
static gboolean watch_out(conn_t *c, gboolean on) {
  if (c->out_armed == on) return TRUE;
  guint32 evs = EPOLLIN | EPOLLRDHUP | EPOLLET | (on ? EPOLLOUT : 0);
  struct epoll_event ev = {.events = evs, .data.ptr = c};
  if (epoll_ctl(c->io->epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
    IXIA_WARN("epoll_ctl: %s", g_strerror(errno));
    return FALSE;
  }
  c->out_armed = on;
  return TRUE;
}

/* A whole frame is held at in_pos. */
static gboolean frame_held(const conn_t *c) {
  guint have = c->in ? c->in->len - c->in_pos : 0;
  return have >= 4 && have - 4 >= frame_size(c->in->data + c->in_pos);
}

/* Sends the held answers (c->cork) before a call that is not answered
 * here: what the socket does not take waits in c->out, which the call's
 * answer joins (conn_send) and the I/O thread sends once the call gives
 * the connection back. FALSE when the send failed. */
static gboolean cork_flush(conn_t *c) {
  if (!c->cork || !c->cork->len) return TRUE;
  gboolean ok = conn_send(c, c->cork->data, c->cork->len);
  g_byte_array_set_size(c->cork, 0);
  return ok;
}

/* What dispatch did with a frame. */
enum { DISPATCH_CLOSE = 0, DISPATCH_KEEP = 1, DISPATCH_ANSWERED = 2 };

/* A whole frame is held at in_pos: run it (or, for a refused connection,
 * answer why and close): on a worker, or here when it is a cheap call
 * (DISPATCH_ANSWERED: the connection reads on). DISPATCH_CLOSE when the
 * connection must be closed. */
static int dispatch(conn_t *c, guint32 size, gint64 now, gboolean may_cork) {
  ixia_server_t *srv = c->io->srv;
  c->frame_start = c->in->len > c->in_pos + 4 + size ? now : 0;
  if (c->refused) {
    char *msg = g_strdup_printf("server busy: %d connections are open, the limit is "
                                "server.max_connections=%d; try again later",
                                atomic_load(&srv->open), srv->max_conns);
    c->out = g_byte_array_new();
    answer_error(c->out, c->in->data + c->in_pos + 4, size, IXIA_EUNAVAILABLE, msg);
    g_free(msg);
    set_frame_size(c->out->data, c->out->len - 4);
    c->out_pos = 0;
    c->close_after = TRUE;
    c->since = now;
    return flush_out(c, now) ? DISPATCH_KEEP : DISPATCH_CLOSE;
  }
  const guint8 *frame = c->in->data + c->in_pos + 4;
  const char *name = NULL;
  guint32 name_len = 0;
  gint32 seqid;
  gboolean named = (srv->inline_fn || srv->method_pool) &&
                   ixia_wire_peek_call(frame, size, &name, &name_len, &seqid);
  if (named && srv->inline_fn && srv->inline_fn(name, name_len)) {
    /* A cheap call: answered here, without waking a worker. */
    tl_on_io = TRUE;
    tl_deferred = FALSE;
    ixia_server_call_t *later;
    const GByteArray *out = serve(srv, c, frame, size, &later);
    tl_on_io = FALSE;
    if (tl_deferred && !later) {
      c->defer_data = tl_defer_data, c->defer_free = tl_defer_free;
      tl_defer_data = NULL, tl_defer_free = NULL;
    } else {
      defer_data_drop(&tl_defer_data, &tl_defer_free);
    }
    if (later) {
      /* Taken over (a write waiting for its group commit): the connection
       * reads on once the answer is out. */
      if (!cork_flush(c)) c->send_failed = TRUE; /* closed when the call gives it back */
      c->in_pos += 4 + size;
      atomic_fetch_add_explicit(&srv->requests, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&srv->inline_requests, 1, memory_order_relaxed);
      c->state = CONN_RUNNING;
      call_release(later);
      return DISPATCH_KEEP;
    }
    if (!tl_deferred) {
      c->in_pos += 4 + size;
      atomic_fetch_add_explicit(&srv->requests, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&srv->inline_requests, 1, memory_order_relaxed);
      if (!out) return DISPATCH_CLOSE;
      /* The next frame is here already (pipelined) and has its turn: this
       * answer leaves with the next one's, one send for the frames that
       * came together. */
      if (may_cork && frame_held(c)) {
        if (!c->cork) c->cork = g_byte_array_new();
        g_byte_array_append(c->cork, out->data, out->len);
        return DISPATCH_ANSWERED;
      }
      const GByteArray *all = out;
      if (c->cork && c->cork->len) {
        g_byte_array_append(c->cork, out->data, out->len);
        all = c->cork;
      }
      gboolean ok = conn_send(c, all->data, all->len);
      if (c->cork) g_byte_array_set_size(c->cork, 0);
      if (!ok) return DISPATCH_CLOSE;
      if (c->out) {
        c->state = CONN_WRITING;
        c->since = now;
        return watch_out(c, TRUE) ? DISPATCH_KEEP : DISPATCH_CLOSE;
      }
      return DISPATCH_ANSWERED;
    }
    atomic_fetch_add_explicit(&srv->deferred, 1, memory_order_relaxed);
  }
  /* To a worker, which sends its answer after the held ones. */
  if (!cork_flush(c)) return DISPATCH_CLOSE;
  c->state = CONN_RUNNING;
  gboolean own = named && srv->method_pool && name_len == strlen(srv->method) &&
                 memcmp(name, srv->method, name_len) == 0;
  g_thread_pool_push(own ? srv->method_pool : srv->pool, c, NULL);
  return DISPATCH_KEEP;
}

/* Reads until the socket is drained or one whole frame is held, and runs
 * that frame. Epoll is edge-triggered: stopping earlier with input left
 * would wait for an edge that never comes, so a connection whose frame is
 * run keeps `readable` and is read on once its answer is out; a recv that
 * returns fewer bytes than asked drained the socket (the next bytes bring a
 * new edge), so it clears `readable` without the recv that would say
 * EAGAIN. FALSE when the connection must be closed. */
static gboolean advance(conn_t *c, gint64 now) {
  ixia_server_t *srv = c->io->srv;
  guint answered = 0;
  for (;;) {
    guint have = c->in ? c->in->len - c->in_pos : 0;
    guint32 size = 0;
    if (have >= 4) {
      size = frame_size(c->in->data + c->in_pos);
      if (size > srv->lim.max_frame) {
        const char *http = ixia_wire_http_refusal(c->in->data + c->in_pos, have);
        if (http) {
          /* HTTP sent to the Thrift port: say so in HTTP, then close. */
          IXIA_WARN("closing a connection: it speaks HTTP to the Thrift port (the HTTP/JSON "
                    "interface is on http.port)");
          guint pos = 0;
          send_some(c->fd, (const guint8 *)http, (guint)strlen(http), &pos);
        } else {
          IXIA_WARN("closing a connection: frame of %u bytes is over server.max_frame_bytes=%u",
                    size, srv->lim.max_frame);
        }
        atomic_fetch_add_explicit(&srv->rejected_frames, 1, memory_order_relaxed);
        return FALSE;
      }
      if (have >= 4 + size) {
        const guint8 *f = c->in->data + c->in_pos + 4;
        if (size < 8 || f[0] != 0x80 || f[1] != 0x01) {
          IXIA_WARN("closing a connection: its frame is not a binary-protocol Thrift message "
                    "(ixia serves framed binary Thrift on this port)");
          atomic_fetch_add_explicit(&srv->rejected_frames, 1, memory_order_relaxed);
          return FALSE;
        }
        int d = dispatch(c, size, now, answered + 1 < INLINE_TURN);
        if (d != DISPATCH_ANSWERED) return d == DISPATCH_KEEP;
        c->since = now;
        if (++answered >= INLINE_TURN) {
          /* Its turn is over: the others first, then this one reads on. */
          if (!c->queued) g_queue_push_tail_link(&c->io->ready, &c->ready_link);
          c->queued = TRUE;
          return TRUE;
        }
        continue; /* pipelined frames: the next one, or read on */
      }
    }
    if (!c->readable) {
      if (c->in && c->in_pos == c->in->len) { /* idle: hold nothing */
        g_clear_pointer(&c->in, g_byte_array_unref);
        c->in_pos = 0;
      }
      return TRUE;
    }
    /* Compact the buffer, then read towards the frame's end. */
    if (!c->in) c->in = g_byte_array_new();
    if (c->in_pos > 0) {
      memmove(c->in->data, c->in->data + c->in_pos, c->in->len - c->in_pos);
      g_byte_array_set_size(c->in, c->in->len - c->in_pos);
      c->in_pos = 0;
    }
    /* Grow with the bytes that arrive, not with what a header announces:
     * a client announcing huge frames pins little memory. Small reads land
     * in the thread's buffer and only what came is kept (a request is a
     * few dozen bytes: no 64 KiB buffer a connection). */
    guint want = have >= 4 ? MIN(4 + size - have, MAX(RECV_CHUNK, c->in->len)) : RECV_CHUNK;
    guint len = c->in->len;
    ssize_t r;
    if (want <= RECV_CHUNK) {
      r = recv(c->fd, c->io->rbuf, want, 0);
      if (r > 0) g_byte_array_append(c->in, c->io->rbuf, (guint)r);
    } else {
      g_byte_array_set_size(c->in, len + want);
      r = recv(c->fd, c->in->data + len, want, 0);
      g_byte_array_set_size(c->in, len + (guint)MAX(r, 0));
    }
    if (r > 0) {
      if (!c->frame_start) c->frame_start = now;
      /* Fewer bytes than asked: the socket is drained, and edge-triggered
       * epoll reports the next bytes that come, so the recv that would
       * only say EAGAIN is saved (one syscall a request). Not once the
       * peer has shut down: its end is read to the 0. */
      if ((guint)r < want && !c->rdhup) c->readable = FALSE;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c->readable = FALSE; /* drained: the check above lets an idle buffer go */
      continue;
    }
    return FALSE; /* closed by the peer (any whole frame was run before) or failed */
  }
}

/* Sends the pending answer; then reads on. FALSE when the connection must
 * be closed. */
static gboolean flush_out(conn_t *c, gint64 now) {
  if (!send_some(c->fd, c->out->data, c->out->len, &c->out_pos)) return FALSE;
  if (c->out_pos < c->out->len) {
    c->state = CONN_WRITING;
    return watch_out(c, TRUE);
  }
  g_clear_pointer(&c->out, g_byte_array_unref);
  if (c->close_after || !watch_out(c, FALSE)) return FALSE;
  c->state = CONN_READING;
  c->since = now;
  return advance(c, now);
}

static void finish_request(conn_t *c, gint64 now) {
  gboolean keep = !c->gone && !c->send_failed;
  if (keep && c->out) {
    c->since = now;
    keep = flush_out(c, now);
  } else if (keep) {
    c->state = CONN_READING;
    c->since = now;
    if (c->in && c->in_pos == c->in->len) {
      if (c->in->len > (1u << 20)) g_clear_pointer(&c->in, g_byte_array_unref);
      else g_byte_array_set_size(c->in, 0);
      c->in_pos = 0;
    }
    keep = advance(c, now);
  }
  if (!keep) conn_close(c);
}

static void on_conn_event(conn_t *c, guint32 events, gint64 now) {
  if (c->closed) return;
  if (events & (EPOLLERR | EPOLLHUP)) c->gone = TRUE;
  if (events & (EPOLLIN | EPOLLRDHUP)) c->readable = TRUE;
  if (events & EPOLLRDHUP) c->rdhup = TRUE;
  if (c->state == CONN_RUNNING) return; /* a worker owns it: recorded only */
  gboolean keep = !c->gone;
  if (keep && c->state == CONN_WRITING && (events & EPOLLOUT)) keep = flush_out(c, now);
  else if (keep && c->state == CONN_READING) keep = advance(c, now);
  if (!keep) conn_close(c);
}

static void add_conn(io_t *io, int fd, gboolean refused, gint64 now) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* (refused on a Unix socket: harmless) */
  conn_t *c = g_new0(conn_t, 1);
  c->fd = fd;
  c->io = io;
  c->state = CONN_READING;
  c->since = now;
  c->refused = refused;
  c->link.data = c;
  c->ready_link.data = c;
  g_queue_push_tail_link(&io->conns, &c->link);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
  if (epoll_ctl(io->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    IXIA_WARN("epoll_ctl: %s", g_strerror(errno));
    conn_close(c);
  }
}

static void accept_some(io_t *io, int lfd, gint64 now) {
  ixia_server_t *srv = io->srv;
  for (int i = 0; i < ACCEPT_BATCH; i++) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        /* Out of descriptors: take one back, accept and close, so the
         * listen queue does not wake us forever. */
        warn_limited(srv, "closing new connections: out of file descriptors");
        atomic_fetch_add_explicit(&srv->connections_refused, 1, memory_order_relaxed);
        if (srv->spare_fd >= 0) close(srv->spare_fd);
        int x = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (x >= 0) close(x);
        srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      return; /* EAGAIN: another thread took it, or the queue is empty */
    }
    atomic_fetch_add_explicit(&srv->connections_total, 1, memory_order_relaxed);
    gint open = atomic_fetch_add(&srv->open, 1) + 1;
    gboolean refused = open > srv->max_conns;
    if (refused) {
      atomic_fetch_add_explicit(&srv->connections_refused, 1, memory_order_relaxed);
      char *why = g_strdup_printf("refusing a connection: %d are open, server.max_connections=%d",
                                  open - 1, srv->max_conns);
      warn_limited(srv, why);
      g_free(why);
      if (open > srv->max_conns + REFUSED_MAX) {
        close(fd);
        atomic_fetch_add(&srv->open, -1);
        continue;
      }
    }
    /* Whichever thread the listening socket woke accepts; the connections
     * go round the I/O threads, so that each thread's share of the clients
     * is served on its own core. */
    io_t *to = &srv->io[atomic_fetch_add_explicit(&srv->next_io, 1, memory_order_relaxed) % srv->n_io];
    if (to == io) {
      add_conn(io, fd, refused, now);
    } else {
      g_async_queue_push(to->incoming, GINT_TO_POINTER(refused ? -(fd + 1) : fd + 1));
      guint64 one = 1;
      ssize_t w = write(to->evfd, &one, sizeof one);
      (void)w;
    }
  }
}

/* Closes connections past their deadlines. */
static void expire(io_t *io, gint64 now) {
  ixia_server_t *srv = io->srv;
  for (GList *l = io->conns.head; l;) {
    conn_t *c = l->data;
    l = l->next;
    if (c->state == CONN_RUNNING) continue;
    const char *why = NULL;
    if (c->state == CONN_WRITING && now - c->since > srv->request_timeout_us)
      why = "the client did not take its answer within server.request_timeout_ms";
    else if (c->state == CONN_READING && c->frame_start &&
             now - c->frame_start > srv->request_timeout_us)
      why = "a frame did not arrive whole within server.request_timeout_ms";
    else if (c->refused && now - c->since > srv->request_timeout_us)
      why = "a connection over server.max_connections sent no call to refuse";
    if (why) {
      char *msg = g_strdup_printf("closing a connection: %s", why);
      warn_limited(srv, msg);
      g_free(msg);
      atomic_fetch_add_explicit(&srv->timeouts, 1, memory_order_relaxed);
      conn_close(c);
    } else if (c->state == CONN_READING && !c->frame_start &&
               now - c->since > srv->idle_timeout_us) {
      conn_close(c); /* idle past server.idle_timeout_ms: clients reconnect */
    }
  }
}

/* ---------- watches (other sockets on an I/O thread) ---------- */

struct ixia_server_watch {
  guint8 kind; /* EV_WATCH */
  io_t *io;
  int fd;
  gint64 deadline; /* µs, monotonic */
  ixia_server_watch_fn fn;
  gpointer ud;
  gboolean ended;
  gboolean armed; /* its one-shot registration can still fire */
  GList link; /* in io->watches */
};

gboolean ixia_server_can_watch(void) { return tl_io != NULL && tl_on_io; }

ixia_server_watch_t *ixia_server_watch(int fd, gint64 deadline_us, ixia_server_watch_fn fn,
                                       gpointer ud) {
  io_t *io = tl_io;
  if (!io) return NULL;
  ixia_server_watch_t *w = g_new0(ixia_server_watch_t, 1);
  *w = (ixia_server_watch_t){EV_WATCH, io, fd, deadline_us, fn, ud, FALSE, TRUE, {w, NULL, NULL}};
  /* One-shot, re-armed after each firing that leaves the watch on
   * (watch_readable), so that an answer that came in pieces is reported until
   * it has been read whole. A socket this thread watched before is still
   * registered, disarmed (io->parked): re-arming it is one epoll_ctl where
   * adding and deleting it were two, a third of the API's syscalls under
   * pages of 10 hits. A parked number whose socket was closed since is
   * registered no more (MOD says ENOENT): it is added; one registered
   * here but not remembered (ADD says EEXIST) is re-armed. */
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = w};
  int op = g_hash_table_remove(io->parked, GINT_TO_POINTER(fd + 1)) ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  int rc = epoll_ctl(io->epfd, op, fd, &ev);
  if (rc != 0 && op == EPOLL_CTL_MOD && errno == ENOENT) rc = epoll_ctl(io->epfd, EPOLL_CTL_ADD, fd, &ev);
  else if (rc != 0 && op == EPOLL_CTL_ADD && errno == EEXIST) rc = epoll_ctl(io->epfd, EPOLL_CTL_MOD, fd, &ev);
  if (rc != 0) {
    g_free(w);
    return NULL;
  }
  g_queue_push_tail_link(&io->watches, &w->link);
  return w;
}

void ixia_server_watch_end(ixia_server_watch_t *w) {
  if (!w || w->ended) return;
  w->ended = TRUE;
  /* Still armed, it could fire for a freed watch: deleted. Disarmed (it
   * fired), it stays registered for the socket's next watch here; closing
   * the socket removes it. */
  if (w->armed) epoll_ctl(w->io->epfd, EPOLL_CTL_DEL, w->fd, NULL);
  else g_hash_table_add(w->io->parked, GINT_TO_POINTER(w->fd + 1));
  g_queue_unlink(&w->io->watches, &w->link);
  /* Freed after the pass: an event of the same batch may still name it. */
  g_ptr_array_add(w->io->ended, w);
}

void ixia_server_watch_set_deadline(ixia_server_watch_t *w, gint64 deadline_us) {
  w->deadline = deadline_us;
}

gboolean ixia_server_at_pass_end(void (*fn)(gpointer data), gpointer data) {
  if (!tl_io) return FALSE;
  pass_end_t pe = {fn, data};
  g_array_append_val(tl_io->pass_end, pe);
  return TRUE;
}

/* Runs what the pass asked for at its end (ixia_server_at_pass_end), those
 * asked for meanwhile included. */
static void run_pass_end(io_t *io) {
  gboolean was = tl_on_io;
  tl_on_io = TRUE;
  for (guint i = 0; i < io->pass_end->len; i++) {
    pass_end_t pe = g_array_index(io->pass_end, pass_end_t, i);
    pe.fn(pe.data);
  }
  g_array_set_size(io->pass_end, 0);
  tl_on_io = was;
}

/* Fires ev on w; a watch that timed out or sees the server stop is over. */
static void watch_fire(ixia_server_watch_t *w, ixia_server_watch_event_t ev) {
  w->fn(w, ev, w->ud);
  if (ev != IXIA_SERVER_WATCH_READABLE) ixia_server_watch_end(w);
}

/* The one-shot registration fired: fn runs, and a watch it left on is
 * armed again (level-triggered, as the contract says). One that cannot be
 * re-armed times out at its deadline. */
static void watch_readable(ixia_server_watch_t *w) {
  w->armed = FALSE;
  watch_fire(w, IXIA_SERVER_WATCH_READABLE);
  if (w->ended) return;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = w};
  w->armed = epoll_ctl(w->io->epfd, EPOLL_CTL_MOD, w->fd, &ev) == 0;
}

/* Watches past their deadlines time out (one firing may end others, so
 * the list is searched again after each). */
static void watch_expire(io_t *io, gint64 now) {
  for (gboolean fired = TRUE; fired;) {
    fired = FALSE;
    for (GList *l = io->watches.head; l && !fired; l = l->next) {
      ixia_server_watch_t *w = l->data;
      if (w->deadline <= now) {
        watch_fire(w, IXIA_SERVER_WATCH_TIMEOUT);
        fired = TRUE;
      }
    }
  }
}

/* How long epoll may wait: until the next tick or the nearest watch
 * deadline, and not at all while connections wait for their turn or were
 * given back on this thread without a wake-up (hand_back). */
static int wait_ms(io_t *io, gint64 now) {
  if (io->ready.length || g_async_queue_length(io->done) > 0) return 0;
  gint64 until = TICK_MS * 1000;
  for (GList *l = io->watches.head; l; l = l->next)
    until = MIN(until, ((ixia_server_watch_t *)l->data)->deadline - now);
  return until <= 0 ? 0 : (int)((until + 999) / 1000);
}

/* Finishes the requests whose connections were given back: only those
 * queued now. A connection whose next call is answered at once (on this
 * thread) comes back to the queue and waits for the next pass, where epoll
 * does not wait (wait_ms), like any other. */
static void drain_done(io_t *io, gint64 now) {
  for (gint k = g_async_queue_length(io->done); k > 0; k--) {
    conn_t *c = g_async_queue_try_pop(io->done);
    if (!c) break;
    finish_request(c, now);
  }
}

static gpointer io_main(gpointer data) {
  io_t *io = data;
  ixia_server_t *srv = io->srv;
  tl_io = io;
  struct epoll_event evs[256];
  gint64 next_tick = g_get_monotonic_time() + TICK_MS * 1000;
  while (!atomic_load(&srv->stopping)) {
    int n = epoll_wait(io->epfd, evs, G_N_ELEMENTS(evs), wait_ms(io, g_get_monotonic_time()));
    guint waiting = io->ready.length; /* queued before this pass */
    if (n < 0 && errno != EINTR) {
      IXIA_ERROR("epoll_wait: %s", g_strerror(errno));
      break;
    }
    gint64 now = g_get_monotonic_time();
    for (int i = 0; i < n; i++) {
      void *p = evs[i].data.ptr;
      if (p == &listen_marker || p == &unix_marker) {
        accept_some(io, p == &listen_marker ? srv->listen_fd : srv->unix_fd, now);
      } else if (p == &wake_marker) {
        guint64 v;
        ssize_t r = read(io->evfd, &v, sizeof v);
        (void)r;
        atomic_store_explicit(&io->wake_pending, 0, memory_order_seq_cst);
        drain_done(io, now);
        gpointer in;
        while ((in = g_async_queue_try_pop(io->incoming))) {
          gint v = GPOINTER_TO_INT(in);
          add_conn(io, ABS(v) - 1, v < 0, now);
        }
      } else if (*(const guint8 *)p == EV_WATCH) {
        ixia_server_watch_t *w = p;
        if (!w->ended) watch_readable(w);
      } else {
        on_conn_event(p, evs[i].events, now);
      }
    }
    if (io->watches.length) watch_expire(io, now);
    /* Calls answered on this thread (from a watch) gave their connections
     * back without a wake-up. */
    drain_done(io, now);
    /* One more turn for each connection that had used up its last one
     * before this pass (those queued during it wait for the next). */
    for (guint k = waiting; k > 0 && io->ready.head; k--) {
      conn_t *c = io->ready.head->data;
      g_queue_unlink(&io->ready, &c->ready_link);
      c->queued = FALSE;
      if (c->state == CONN_READING && !advance(c, now)) conn_close(c);
    }
    run_pass_end(io);
    if (now >= next_tick) {
      expire(io, now);
      next_tick = now + TICK_MS * 1000;
    }
    g_ptr_array_set_size(io->closed, 0);
    g_ptr_array_set_size(io->ended, 0);
  }
  /* Stopping: every watch is told, so the calls waiting on them answer. */
  while (io->watches.head) watch_fire(io->watches.head->data, IXIA_SERVER_WATCH_STOPPING);
  g_ptr_array_set_size(io->ended, 0);
  tl_io = NULL;
  return NULL;
}

/* ---------- calls answered later ---------- */

ixia_server_call_t *ixia_server_call_later(void) {
  serving_t *sv = tl_serving;
  if (!sv || sv->later) return NULL;
  const char *name = "";
  guint32 name_len = 0;
  gint32 seqid = 0;
  ixia_wire_peek_call(sv->frame, sv->size, &name, &name_len, &seqid);
  ixia_server_call_t *call = g_new0(ixia_server_call_t, 1);
  call->c = sv->c;
  call->srv = sv->srv;
  call->name = g_strndup(name, name_len);
  call->seqid = seqid;
  call->refs = 2;
  call->frame = sv->frame;
  call->size = sv->size;
  call->t0 = sv->t0;
  sv->later = call;
  g_mutex_lock(&sv->srv->calls_lock);
  sv->srv->pending_calls++;
  g_mutex_unlock(&sv->srv->calls_lock);
  return call;
}

static void call_release(ixia_server_call_t *call) {
  if (!(atomic_fetch_sub(&call->refs, 1) == 1)) return;
  ixia_server_t *srv = call->srv;
  hand_back(call->c);
  g_free(call->name);
  g_free(call);
  g_mutex_lock(&srv->calls_lock);
  if (--srv->pending_calls == 0) g_cond_broadcast(&srv->calls_cond);
  g_mutex_unlock(&srv->calls_lock);
}

static void call_send(ixia_server_call_t *call, GByteArray *out);

void ixia_server_call_answer(ixia_server_call_t *call, ThriftStruct *result) {
  ixia_server_t *srv = call->srv;
  worker_t *w = worker_get(&srv->lim);
  ixia_frame_buffer_reset(w->out);
  g_byte_array_set_size(w->out->buf, 4);
  GError *gerr = NULL;
  gboolean ok =
      thrift_protocol_write_message_begin(w->pout, call->name, T_REPLY, call->seqid, &gerr) >= 0 &&
      thrift_struct_write(result, w->pout, &gerr) >= 0 &&
      thrift_protocol_write_message_end(w->pout, &gerr) >= 0;
  if (gerr) g_error_free(gerr);
  GByteArray *out = w->out->buf;
  if (!ok) g_byte_array_set_size(out, 4); /* over the frame: call_send answers TOO_LARGE */
  call_send(call, out);
}

void ixia_server_call_answer_string(ixia_server_call_t *call, const char *value, gsize len) {
  worker_t *w = worker_get(&call->srv->lim);
  GByteArray *out = w->out->buf;
  g_byte_array_set_size(out, 4);
  if (len <= call->srv->lim.max_frame)
    ixia_wire_append_string_reply(out, call->name, call->seqid, value, len);
  call_send(call, out);
}

void ixia_server_call_answer_error(ixia_server_call_t *call, gint32 code, const char *message) {
  worker_t *w = worker_get(&call->srv->lim);
  GByteArray *out = w->out->buf;
  g_byte_array_set_size(out, 4);
  ixia_wire_append_error(out, call->name, (guint32)strlen(call->name), call->seqid, code, message);
  call_send(call, out);
}

/* Sends the answer in out (its frame header left for here; none after the
 * header, or one over server.max_frame_bytes, becomes a TOO_LARGE error)
 * and releases the call. */
static void call_send(ixia_server_call_t *call, GByteArray *out) {
  ixia_server_t *srv = call->srv;
  conn_t *c = call->c;
  if (out->len <= 4 || out->len - 4 > srv->lim.max_frame) {
    char *msg = g_strdup_printf("the answer is over server.max_frame_bytes=%u", srv->lim.max_frame);
    g_byte_array_set_size(out, 4);
    ixia_wire_append_error(out, call->name, (guint32)strlen(call->name), call->seqid,
                           IXIA_ETOOLARGE, msg);
    g_free(msg);
  }
  set_frame_size(out->data, out->len - 4);
  if (srv->hooks.observe)
    srv->hooks.observe(srv->hooks.user, call->frame, call->size, out->data + 4, out->len - 4,
                       g_get_monotonic_time() - call->t0);
  /* The connection is this call's until released: send from here. */
  if (!conn_send(c, out->data, out->len)) c->send_failed = TRUE;
  atomic_fetch_add_explicit(&srv->answered_later, 1, memory_order_relaxed);
  call_release(call);
}

/* ---------- life cycle ---------- */

/* Raises the open-file limit to its hard maximum and returns how many
 * connections it leaves room for. */
static gint fd_room(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return G_MAXINT;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)G_MAXINT) return G_MAXINT;
  return (gint)MAX((gint64)rl.rlim_cur - FD_RESERVE - REFUSED_MAX, 16);
}

/* Why SCHED_BATCH: every request crosses processes on loopback (client,
 * API, shard), and each send wakes the receiver. Under the default policy
 * the woken thread preempts the sender on the spot, so a thread that
 * answers a call is switched out in the middle of its send and back in
 * later; 54% of the API's CPU on a page of 10 was send(), most of it the
 * wake-up and the switch. A woken SCHED_BATCH thread waits for the running one to
 * block or for its time slice to end, so each turn runs to its end: on 2
 * cores, 16 connections, category = X AND a price range at limit 10 went
 * from 14,177-14,767 to 17,516-18,115 queries/s (API CPU 43-44 to 28-29 us
 * a query), NOT country = C at limit 10 from 31,929-33,665 to 35,398-36,460.
 * Put-to-searchable at 5,500 puts/s right after a burst of puts (the
 * bench's order) did not move: p99 83-387 ms against 142-332 in three
 * alternated rounds; its tail is the stores' flushes and compactions.
 * Priorities and fair shares stay; what a daemon gives up is wake-up
 * latency behind whatever else runs on its core (its own threads or other
 * processes), bounded by a time slice. The threads already running (a test
 * hook's clock, started with the config) are switched too, by their ids;
 * later ones inherit the policy. */
void ixia_server_sched_apply(const ixia_config_t *cfg) {
  if (!ixia_config_bool(cfg, "server.sched_batch")) return;
  struct sched_param sp = {.sched_priority = 0};
  GDir *d = g_dir_open("/proc/self/task", 0, NULL);
  const char *tid;
  while (d && (tid = g_dir_read_name(d))) {
    pid_t t = (pid_t)atoi(tid);
    /* (A thread that ended meanwhile has nothing to switch.) */
    if (t > 0 && sched_setscheduler(t, SCHED_BATCH, &sp) != 0 && errno != ESRCH)
      IXIA_WARN("server.sched_batch: cannot switch thread %d to SCHED_BATCH (%s); it keeps its policy",
                (int)t, g_strerror(errno));
  }
  if (d) g_dir_close(d);
  if (!d && sched_setscheduler(0, SCHED_BATCH, &sp) != 0)
    IXIA_WARN("server.sched_batch: cannot switch to SCHED_BATCH (%s); threads keep their policy",
              g_strerror(errno));
}

int ixia_listen(const char *host, int port, const char *what, int *bound, ixia_error_t **err) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  int rc = getaddrinfo(host, portstr, &hints, &res);
  if (rc != 0) {
    ixia_error_set(err, IXIA_EINVAL, "cannot resolve %s listen address %s: %s", what, host,
                   gai_strerror(rc));
    return -1;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot listen for %s on %s:%d: %s", what, host, port,
                   g_strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return -1;
  }
  freeaddrinfo(res);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  *bound = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return fd;
}

ixia_server_t *ixia_server_new(const ixia_config_t *cfg, const char *host, int port,
                               ThriftProcessor *processor, ixia_error_t **err) {
  /* Workers build request objects concurrently from the first request on. */
  ixia_thrift_init();
  int bound = 0;
  int fd = ixia_listen(host, port, "Thrift", &bound, err);
  if (fd < 0) return NULL;
  ixia_server_t *srv = g_new0(ixia_server_t, 1);
  srv->listen_fd = fd;
  srv->unix_fd = -1;
  srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  srv->port = bound;
  srv->processor = g_object_ref(processor);
  g_mutex_init(&srv->calls_lock);
  g_cond_init(&srv->calls_cond);
  srv->lim = ixia_wire_limits_from_config(cfg);
  srv->workers = (gint)ixia_config_int(cfg, "server.workers");
  srv->n_io = (guint)ixia_config_int(cfg, "server.io_threads");
  srv->io_auto = srv->n_io == 0;
  if (srv->io_auto) srv->n_io = CLAMP(g_get_num_processors() / 2, 1, 64);
  srv->request_timeout_us = ixia_config_int(cfg, "server.request_timeout_ms") * 1000;
  srv->idle_timeout_us = ixia_config_int(cfg, "server.idle_timeout_ms") * 1000;
  gint want = (gint)ixia_config_int(cfg, "server.max_connections");
  gint room = fd_room();
  srv->max_conns = MIN(want, room);
  if (room < want)
    IXIA_INFO("server.max_connections=%d is over what the open-file limit leaves; serving at "
              "most %d connections",
              want, room);
  return srv;
}

int ixia_server_port(const ixia_server_t *srv) { return srv->port; }

gboolean ixia_server_listen_unix(ixia_server_t *srv, const char *path, const char *setting,
                                 ixia_error_t **err) {
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  if (!*path || strlen(path) >= sizeof sun.sun_path)
    return ixia_error_set(err, IXIA_EINVAL, "%s: '%s' is %s socket path (at most %zu bytes)", setting,
                          path, *path ? "too long a" : "an empty", sizeof sun.sun_path - 1);
  g_strlcpy(sun.sun_path, path, sizeof sun.sun_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: cannot create a socket: %s", setting,
                          g_strerror(errno));
  /* A socket file left by a process that died is replaced; one that a
   * live process answers on, or a file that is not a socket, is not. */
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      close(fd);
      return ixia_error_set(err, IXIA_EINVAL, "%s: %s exists and is not a socket", setting, path);
    }
    /* Refused: nobody listens (a socket file only a dead process had).
     * Anything else (it answers, a full backlog, no permission) leaves the
     * file alone. The probe waits a second at most. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 1};
    if (probe >= 0) setsockopt(probe, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int why = probe < 0                                                        ? errno
              : connect(probe, (struct sockaddr *)&sun, sizeof sun) == 0 ? 0
                                                                             : errno;
    if (probe >= 0) close(probe);
    if (why != ECONNREFUSED && why != ENOENT) {
      close(fd);
      if (why == 0)
        return ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: another process serves on %s", setting, path);
      return ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: cannot tell whether a process serves on %s (%s)",
                            setting, path, g_strerror(why));
    }
    unlink(path);
  }
  if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0 || listen(fd, SOMAXCONN) != 0 ||
      lstat(path, &st) != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: cannot listen on %s: %s", setting, path,
                   g_strerror(errno));
    close(fd);
    return FALSE;
  }
  srv->unix_fd = fd;
  srv->unix_path = g_strdup(path);
  srv->unix_dev = st.st_dev;
  srv->unix_ino = st.st_ino;
  return TRUE;
}

void ixia_server_set_inline(ixia_server_t *srv, ixia_server_inline_fn fn) { srv->inline_fn = fn; }

void ixia_server_set_method_threads(ixia_server_t *srv, const char *method, int threads) {
  if (srv->pool || threads <= 0) return;
  g_free(srv->method);
  srv->method = g_strdup(method);
  srv->method_threads = threads;
}

void ixia_server_set_workers(ixia_server_t *srv, int workers) {
  if (!srv->pool && workers > 0) srv->workers = workers;
}

void ixia_server_set_io_auto(ixia_server_t *srv, guint threads) {
  if (!srv->pool && srv->io_auto && threads > 0) srv->n_io = MIN(threads, 64);
}

gboolean ixia_server_start(ixia_server_t *srv, ixia_error_t **err) {
  signal(SIGPIPE, SIG_IGN);
  GError *gerr = NULL;
  srv->pool = g_thread_pool_new(run_request, srv, srv->workers, FALSE, &gerr);
  if (!srv->pool) return ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "worker pool");
  if (srv->method) {
    srv->method_pool = g_thread_pool_new(run_request, srv, srv->method_threads, FALSE, &gerr);
    if (!srv->method_pool)
      return ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "worker pool of one method's calls");
  }
  srv->io = g_new0(io_t, srv->n_io);
  for (guint i = 0; i < srv->n_io; i++) srv->io[i].epfd = srv->io[i].evfd = -1;
  for (guint i = 0; i < srv->n_io; i++) {
    io_t *io = &srv->io[i];
    io->srv = srv;
    io->done = g_async_queue_new();
    io->incoming = g_async_queue_new();
    io->closed = g_ptr_array_new_with_free_func(conn_free);
    io->ended = g_ptr_array_new_with_free_func(g_free);
    io->parked = g_hash_table_new(NULL, NULL);
    io->pass_end = g_array_new(FALSE, FALSE, sizeof(pass_end_t));
    g_queue_init(&io->conns);
    g_queue_init(&io->watches);
    io->epfd = epoll_create1(EPOLL_CLOEXEC);
    io->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event wake = {.events = EPOLLIN, .data.ptr = &wake_marker};
    struct epoll_event lst = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_marker};
    struct epoll_event ulst = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &unix_marker};
    if (io->epfd < 0 || io->evfd < 0 || epoll_ctl(io->epfd, EPOLL_CTL_ADD, io->evfd, &wake) != 0 ||
        epoll_ctl(io->epfd, EPOLL_CTL_ADD, srv->listen_fd, &lst) != 0 ||
        (srv->unix_fd >= 0 && epoll_ctl(io->epfd, EPOLL_CTL_ADD, srv->unix_fd, &ulst) != 0))
      return ixia_error_set(err, IXIA_EINTERNAL, "server event loop: %s", g_strerror(errno));
  }
  for (guint i = 0; i < srv->n_io; i++) {
    char name[32];
    snprintf(name, sizeof name, "ixia-io-%u", i);
    srv->io[i].thread = g_thread_new(name, io_main, &srv->io[i]);
  }
  return TRUE;
}

void ixia_server_stop(ixia_server_t *srv) {
  if (!srv || atomic_load(&srv->stopping)) return;
  atomic_store(&srv->stopping, 1);
  for (guint i = 0; srv->io && i < srv->n_io; i++) {
    guint64 one = 1;
    ssize_t w = write(srv->io[i].evfd, &one, sizeof one);
    (void)w;
  }
  for (guint i = 0; srv->io && i < srv->n_io; i++)
    if (srv->io[i].thread) g_thread_join(srv->io[i].thread), srv->io[i].thread = NULL;
  /* Requests running finish (their answers are sent), and so do the calls
   * answered later; then every connection closes. */
  if (srv->pool) g_thread_pool_free(srv->pool, FALSE, TRUE);
  srv->pool = NULL;
  if (srv->method_pool) g_thread_pool_free(srv->method_pool, FALSE, TRUE);
  srv->method_pool = NULL;
  g_mutex_lock(&srv->calls_lock);
  while (srv->pending_calls > 0) g_cond_wait(&srv->calls_cond, &srv->calls_lock);
  g_mutex_unlock(&srv->calls_lock);
  for (guint i = 0; srv->io && i < srv->n_io; i++) {
    io_t *io = &srv->io[i];
    while (g_async_queue_try_pop(io->done)) {
    }
    gpointer in;
    while ((in = g_async_queue_try_pop(io->incoming))) {
      close(ABS(GPOINTER_TO_INT(in)) - 1);
      atomic_fetch_add(&srv->open, -1);
    }
    while (io->conns.head) conn_close(io->conns.head->data);
    g_ptr_array_set_size(io->closed, 0);
  }
}

void ixia_server_destroy(ixia_server_t *srv) {
  if (!srv) return;
  ixia_server_stop(srv);
  for (guint i = 0; srv->io && i < srv->n_io; i++) {
    io_t *io = &srv->io[i];
    if (io->epfd >= 0) close(io->epfd);
    if (io->evfd >= 0) close(io->evfd);
    if (io->done) g_async_queue_unref(io->done);
    if (io->incoming) g_async_queue_unref(io->incoming);
    if (io->closed) g_ptr_array_unref(io->closed);
    if (io->ended) g_ptr_array_unref(io->ended);
    if (io->parked) g_hash_table_unref(io->parked);
    if (io->pass_end) g_array_unref(io->pass_end);
  }
  g_free(srv->io);
  g_mutex_clear(&srv->calls_lock);
  g_cond_clear(&srv->calls_cond);
  if (srv->listen_fd >= 0) close(srv->listen_fd);
  if (srv->unix_fd >= 0) {
    close(srv->unix_fd);
    /* Only the file this server bound: a successor may have replaced it. */
    struct stat st;
    if (lstat(srv->unix_path, &st) == 0 && st.st_dev == srv->unix_dev && st.st_ino == srv->unix_ino)
      unlink(srv->unix_path);
  }
  g_free(srv->unix_path);
  if (srv->spare_fd >= 0) close(srv->spare_fd);
  g_object_unref(srv->processor);
  g_free(srv->method);
  g_free(srv);
}

void ixia_server_add_stats(const ixia_server_t *srv, cJSON *o) {
  if (!srv) return;
#define STAT(name, value) cJSON_AddNumberToObject(o, name, (double)(value))
  STAT("connections_total", atomic_load_explicit(&srv->connections_total, memory_order_relaxed));
  STAT("connections_open", atomic_load(&srv->open));
  STAT("connections_refused", atomic_load_explicit(&srv->connections_refused, memory_order_relaxed));
  STAT("connections_timed_out", atomic_load_explicit(&srv->timeouts, memory_order_relaxed));
  STAT("rejected_frames", atomic_load_explicit(&srv->rejected_frames, memory_order_relaxed));
  STAT("requests", atomic_load_explicit(&srv->requests, memory_order_relaxed));
  STAT("requests_inline", atomic_load_explicit(&srv->inline_requests, memory_order_relaxed));
  STAT("requests_deferred", atomic_load_explicit(&srv->deferred, memory_order_relaxed));
  STAT("requests_answered_later", atomic_load_explicit(&srv->answered_later, memory_order_relaxed));
#undef STAT
}

static gboolean on_signal(gpointer loop) {
  g_main_loop_quit(loop);
  return G_SOURCE_CONTINUE; /* removed by ixia_wait_for_signal */
}

void ixia_wait_for_signal(void) {
  GMainLoop *loop = g_main_loop_new(NULL, FALSE);
  guint a = g_unix_signal_add(SIGINT, on_signal, loop);
  guint b = g_unix_signal_add(SIGTERM, on_signal, loop);
  g_main_loop_run(loop);
  g_source_remove(a);
  g_source_remove(b);
  g_main_loop_unref(loop);
}

gboolean ixia_server_write_port_file(const ixia_server_t *srv, const char *path, ixia_error_t **err) {
  if (!path || !*path) return TRUE;
  char port[16];
  snprintf(port, sizeof port, "%d\n", srv->port);
  return ixia_write_file_atomic(path, port, err);
}

gboolean ixia_write_file_atomic(const char *path, const char *text, ixia_error_t **err) {
  GError *gerr = NULL;
  if (!g_file_set_contents(path, text, -1, &gerr))
    return ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "write file");
  return TRUE;
}
