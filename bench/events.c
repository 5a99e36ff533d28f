/* The event-driven driver of the request/response workloads (bench.h):
 * each client thread owns a share of the connections, non-blocking, in one
 * epoll set.
 *
 * Why: the load generator runs on the machine it measures. With a blocking
 * client, each request cost its thread two context switches (asleep in
 * recv, woken by the answer): under the mixed workload ixia-bench spent
 * ~16 us of CPU per request, 64% of its samples in schedule(), about a
 * third of the machine. The peer's client, pgbench -c 16 -j 2, drives its
 * 16 connections from 2 threads that way; here the same (IXIA_BENCH_EVENT_THREADS).
 *
 * Closed loop: one request in flight on every connection, the next sent as
 * soon as its answer is in. Open loop (--rate): the thread's share of the
 * rate on a fixed timeline; a request due is sent on an idle connection,
 * or waits for the first one to come free; its latency runs from the time
 * it was due, so a stall counts in every request scheduled behind it, as
 * in the blocking open loop (runner.c) this replaced for the freshness
 * workload: with 16 blocking threads (48 us of the client's CPU a put, two
 * context switches each) at 3,500 puts/s the client's own run-queue waits
 * made its p99 (42-118 ms) while the API's writes all finished within 43 ms
 * and 99.9% within 15.
 *
 * A connection's life: request() fills its out buffer (framed here for
 * Thrift), send() writes it (what the socket does not take waits for
 * EPOLLOUT), answers are cut from the received bytes by
 * ixia_bench_answer_len and checked by answer(); its latency runs from the
 * first byte sent (closed loop) or the time it was due (open loop) to the
 * last byte received. An answer that cannot be cut, bytes no request asked
 * for, or a closed connection count one error and retire the connection;
 * the others go on. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "bytes.h"

typedef struct {
  int fd;
  ixia_bench_wire_t wire;
  GByteArray *out, *in;
  gsize sent;
  gboolean busy, dead, want_out;
  gint64 sent_us; /* the latency's start: sent (closed loop) or due (open loop) */
  ixia_bench_call_t call;
} conn_t;

/* One thread's run: its connections, and in an open loop its timeline. */
typedef struct {
  ixia_bench_worker_t *w;
  int ep;
  guint busy, live;
  gint64 end_us;
  gboolean open;       /* open loop */
  double interval_us;  /* between this thread's requests */
  gint64 first_us;     /* its first request's due time */
  guint64 next_k;      /* the next request not yet due */
  GQueue due;          /* due times (gint64 in pointers) waiting for a connection */
  GPtrArray *idle;     /* conn_t* with nothing in flight */
} loop_t;

int ixia_bench_tcp_connect(const char *addr, const char *what, ixia_error_t **err) {
  const char *p = g_str_has_prefix(addr, "http://") ? addr + 7 : addr;
  const char *colon = strrchr(p, ':');
  if (!colon || colon == p) {
    ixia_error_set(err, IXIA_EINVAL, "bad %s address '%s' (expected HOST:PORT)", what, addr);
    return -1;
  }
  char *host = g_strndup(p, (gsize)(colon - p)), *port = g_strdup(colon + 1);
  char *slash = strchr(port, '/');
  if (slash) *slash = 0;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int fd = -1, error = 0;
  if (getaddrinfo(host, port, &hints, &res) == 0) {
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
      error = errno;
      close(fd);
      fd = -1;
    }
    freeaddrinfo(res);
  } else {
    error = ENOENT;
  }
  if (fd < 0)
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot connect to %s %s: %s", what, addr,
                   g_strerror(error ? error : errno));
  g_free(host);
  g_free(port);
  return fd;
}

gpointer ixia_bench_events_open(ixia_bench_run_t *r, ixia_error_t **err) {
  const ixia_bench_opts_t *o = r->o;
  int fd = -1;
  switch (r->wl->wire) {
    case IXIA_BENCH_WIRE_THRIFT: {
      /* Connected and authenticated (auth.key) by the client library; the
       * socket is then driven here. */
      ixia_thrift_conn_t c;
      if (!ixia_thrift_conn_open(&c, o->api, ixia_client_timeouts()->connect_ms, 0, err)) return NULL;
      fd = c.fd;
      c.fd = -1; /* kept: the transport does not own it */
      ixia_thrift_conn_close(&c);
      break;
    }
    case IXIA_BENCH_WIRE_HTTP: fd = ixia_bench_tcp_connect(o->http, "--http", err); break;
    case IXIA_BENCH_WIRE_MEMCACHED: fd = ixia_bench_tcp_connect(o->memcached, "--memcached", err); break;
  }
  if (fd < 0) return NULL;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  conn_t *c = g_new0(conn_t, 1);
  c->fd = fd;
  c->wire = r->wl->wire;
  c->out = g_byte_array_sized_new(2048);
  c->in = g_byte_array_sized_new(16384);
  return c;
}

void ixia_bench_events_close(gpointer conn) {
  conn_t *c = conn;
  if (!c) return;
  close(c->fd);
  g_byte_array_free(c->out, TRUE);
  g_byte_array_free(c->in, TRUE);
  g_free(c);
}

static void count_error(ixia_bench_worker_t *w, ixia_error_t *e) {
  w->errors++;
  if (!w->first_error)
    w->first_error = e;
  else
    ixia_error_destroy(e);
}

/* Retires c after a transport failure (one error). */
static void retire(loop_t *l, conn_t *c, ixia_error_t *e) {
  count_error(l->w, e);
  epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
  l->live--;
  if (c->busy) l->busy--;
  c->busy = FALSE;
  c->dead = TRUE;
}

static void watch_out(conn_t *c, int ep, gboolean on) {
  if (c->want_out == on) return;
  struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
  c->want_out = on;
}

/* Writes what c->out still holds; FALSE when the connection broke. */
static gboolean flush_out(conn_t *c, int ep) {
  while (c->sent < c->out->len) {
    ssize_t n = send(c->fd, c->out->data + c->sent, c->out->len - c->sent, MSG_NOSIGNAL);
    if (n > 0) {
      c->sent += (gsize)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch_out(c, ep, TRUE);
      return TRUE;
    } else {
      return FALSE;
    }
  }
  watch_out(c, ep, FALSE);
  return TRUE;
}

/* The next request on c; its latency runs from start_us. */
static void issue(loop_t *l, conn_t *c, gint64 start_us) {
  ixia_bench_worker_t *w = l->w;
  const ixia_bench_workload_t *wl = w->run->wl;
  g_byte_array_set_size(c->out, 0);
  c->sent = 0;
  memset(&c->call, 0, sizeof c->call);
  if (c->wire == IXIA_BENCH_WIRE_THRIFT) g_byte_array_set_size(c->out, 4);
  ixia_error_t *e = NULL;
  w->sched_us = start_us;
  if (!wl->request(w, &c->call, c->out, &e)) {
    retire(l, c, e);
    return;
  }
  if (c->wire == IXIA_BENCH_WIRE_THRIFT) ixia_bytes_put32(c->out->data, c->out->len - 4);
  c->busy = TRUE;
  l->busy++;
  c->sent_us = start_us;
  if (!flush_out(c, l->ep)) retire(l, c, ixia_error_new(IXIA_EUNAVAILABLE, "send: %s", g_strerror(errno)));
}

/* c has nothing in flight: its next request (closed loop), the oldest one
 * due (open loop), or it waits idle. */
static void next_on(loop_t *l, conn_t *c, gint64 now) {
  if (!l->open) {
    if (now < l->end_us) issue(l, c, now);
  } else if (!g_queue_is_empty(&l->due)) {
    issue(l, c, (gint64)GPOINTER_TO_SIZE(g_queue_pop_head(&l->due)));
  } else {
    g_ptr_array_add(l->idle, c);
  }
}

/* Open loop: queues the requests due by now and sends them on the idle
 * connections; returns when the next one is due (G_MAXINT64: none left). */
static gint64 send_due(loop_t *l, gint64 now) {
  gint64 next = G_MAXINT64;
  for (;;) {
    gint64 due = l->first_us + (gint64)((double)l->next_k * l->interval_us);
    if (due >= l->end_us) break;
    if (due > now) {
      next = due;
      break;
    }
    g_queue_push_tail(&l->due, GSIZE_TO_POINTER((gsize)due));
    l->next_k++;
  }
  while (!g_queue_is_empty(&l->due) && l->idle->len > 0) {
    conn_t *c = g_ptr_array_steal_index_fast(l->idle, l->idle->len - 1);
    if (!c->dead) issue(l, c, (gint64)GPOINTER_TO_SIZE(g_queue_pop_head(&l->due)));
  }
  return next;
}

/* Reads what c has received and settles every whole answer in it. */
static void on_readable(loop_t *l, conn_t *c) {
  ixia_bench_worker_t *w = l->w;
  guint have = c->in->len;
  g_byte_array_set_size(c->in, have + 65536);
  ssize_t n;
  do {
    n = recv(c->fd, c->in->data + have, 65536, 0);
  } while (n < 0 && errno == EINTR);
  g_byte_array_set_size(c->in, have + (guint)MAX(n, 0));
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    retire(l, c,
           ixia_error_new(IXIA_EUNAVAILABLE, "connection %s", n == 0 ? "closed by the server" : g_strerror(errno)));
    return;
  }
  while (c->in->len > 0 && !c->dead) {
    gboolean bad = FALSE;
    gsize len = ixia_bench_answer_len(c->wire, c->in->data, c->in->len, &bad);
    if (bad || (len && !c->busy)) {
      retire(l, c,
             ixia_error_new(IXIA_EINTERNAL, "%s: %.*s",
                            bad ? "an answer that cannot be read" : "bytes no request asked for",
                            (int)MIN(c->in->len, 60), (const char *)c->in->data));
      return;
    }
    if (!len) return;
    gint64 done = g_get_monotonic_time();
    const guint8 *ans = c->in->data;
    gsize alen = len;
    if (c->wire == IXIA_BENCH_WIRE_THRIFT) ans += 4, alen -= 4;
    ixia_error_t *e = NULL;
    w->sched_us = c->sent_us;
    if (w->run->wl->answer(w, &c->call, ans, alen, &e)) {
      ixia_hdr_record(w->lat[c->call.op_class], done - c->sent_us);
      w->ops[c->call.op_class]++;
    } else {
      count_error(w, e);
    }
    g_byte_array_remove_range(c->in, 0, (guint)len);
    c->busy = FALSE;
    l->busy--;
    next_on(l, c, done);
  }
}

void ixia_bench_events_run(ixia_bench_worker_t *w, gpointer const *conns, guint n, gint64 start_us,
                           gint64 end_us, double rate, int nthreads) {
  loop_t l = {.w = w, .live = n, .end_us = end_us, .open = rate > 0, .idle = g_ptr_array_new()};
  g_queue_init(&l.due);
  l.ep = epoll_create1(EPOLL_CLOEXEC);
  if (l.ep < 0) {
    count_error(w, ixia_error_new(IXIA_EINTERNAL, "epoll_create1: %s", g_strerror(errno)));
    g_ptr_array_free(l.idle, TRUE);
    return;
  }
  if (l.open) {
    /* This thread's share of the rate, its phase offset by its id so that
     * the threads' requests interleave. */
    l.interval_us = (double)nthreads * 1e6 / rate;
    l.first_us = start_us + (gint64)((double)w->id / nthreads * l.interval_us);
  }
  for (guint i = 0; i < n; i++) {
    conn_t *c = conns[i];
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(l.ep, EPOLL_CTL_ADD, c->fd, &ev);
    c->want_out = FALSE;
  }
  gint64 now = g_get_monotonic_time();
  if (now < start_us) g_usleep((gulong)(start_us - now));
  for (guint i = 0; i < n; i++) next_on(&l, conns[i], g_get_monotonic_time());
  /* After end_us no request starts; those in flight get 10 s to answer. */
  gint64 give_up = end_us + 10 * G_USEC_PER_SEC;
  struct epoll_event evs[64];
  for (;;) {
    now = g_get_monotonic_time();
    gint64 next_due = l.open ? send_due(&l, now) : G_MAXINT64;
    gboolean more = next_due != G_MAXINT64 || !g_queue_is_empty(&l.due);
    if ((l.busy == 0 && (!more || l.live == 0)) || now >= give_up) break;
    gint64 until = next_due != G_MAXINT64 ? next_due : now < end_us ? end_us : give_up;
    /* To the microsecond: a millisecond's rounding would send an open
     * loop's requests up to 1 ms late. */
    gint64 wait_us = CLAMP(until - now, 0, 100000);
    struct timespec ts = {wait_us / 1000000, (wait_us % 1000000) * 1000};
    int k = epoll_pwait2(l.ep, evs, G_N_ELEMENTS(evs), &ts, NULL);
    if (k < 0 && errno != EINTR) break;
    for (int i = 0; i < k; i++) {
      conn_t *c = evs[i].data.ptr;
      if (c->dead) continue;
      if ((evs[i].events & EPOLLOUT) && !flush_out(c, l.ep)) {
        retire(&l, c, ixia_error_new(IXIA_EUNAVAILABLE, "send: %s", g_strerror(errno)));
        continue;
      }
      if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(&l, c);
    }
  }
  if (l.busy)
    count_error(w, ixia_error_new(IXIA_EDEADLINE, "%u requests still unanswered 10 s after the run", l.busy));
  if (!g_queue_is_empty(&l.due))
    count_error(w, ixia_error_new(IXIA_EUNAVAILABLE, "%u requests due were never sent: every connection failed",
                                  g_queue_get_length(&l.due)));
  g_queue_clear(&l.due);
  g_ptr_array_free(l.idle, TRUE);
  close(l.ep);
}
