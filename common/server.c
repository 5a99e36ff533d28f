#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/transport/thrift_memory_buffer.h>

#include "log.h"
#include "thrift_util.h"

struct ixia_server {
  ThriftProcessor *processor;
  int listen_fd;
  int wake[2]; /* pipe: wakes the accept loop on stop */
  int port;
  GThread *accept_thread;
  GThreadPool *pool;
  gint workers;
  GMutex lock;
  GHashTable *active; /* fd -> fd, connections being served */
  gint stopping;
  guint32 max_frame;
  gint64 recv_timeout_ms;
  guint64 connections_total;
  guint64 rejected_frames;
};

ixia_server_t *ixia_server_new(const ixia_config_t *cfg, const char *host, int port,
                               ThriftProcessor *processor, ixia_error_t **err) {
  /* Workers build request objects concurrently from the first request on. */
  ixia_thrift_init();
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  int rc = getaddrinfo(host, portstr, &hints, &res);
  if (rc != 0) {
    ixia_error_set(err, IXIA_EINVAL, "cannot resolve listen address %s: %s", host, gai_strerror(rc));
    return NULL;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot listen on %s:%d: %s", host, port,
                   g_strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return NULL;
  }
  freeaddrinfo(res);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  ixia_server_t *srv = g_new0(ixia_server_t, 1);
  srv->listen_fd = fd;
  srv->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  srv->processor = g_object_ref(processor);
  srv->wake[0] = srv->wake[1] = -1;
  g_mutex_init(&srv->lock);
  srv->active = g_hash_table_new(g_direct_hash, g_direct_equal);
  srv->max_frame = (guint32)ixia_config_int(cfg, "server.max_frame_bytes");
  srv->recv_timeout_ms = ixia_config_int(cfg, "server.recv_timeout_ms");
  srv->workers = (gint)ixia_config_int(cfg, "server.workers");
  return srv;
}

int ixia_server_port(const ixia_server_t *srv) { return srv->port; }

/* Makes at least `need` unconsumed bytes available in b (from *pos on),
 * reading as much as the socket has so that a frame's header and body (and
 * often the next frame) arrive with one recv. FALSE when the peer closed,
 * stalled past the timeout, or failed. */
static gboolean fill(int fd, GByteArray *b, gsize *pos, gsize need) {
  if (b->len - *pos >= need) return TRUE;
  if (*pos > 0) {
    memmove(b->data, b->data + *pos, b->len - *pos);
    g_byte_array_set_size(b, b->len - (guint)*pos);
    *pos = 0;
  }
  while (b->len < need) {
    guint have = b->len;
    /* Grow with the bytes that actually arrive, not with what the header
     * announces: a client announcing huge frames pins little memory. */
    gsize want = MIN(MAX(need, 65536), MAX((gsize)have * 2, 65536));
    g_byte_array_set_size(b, (guint)want);
    ssize_t r = recv(fd, b->data + have, want - have, 0);
    g_byte_array_set_size(b, have + (guint)MAX(r, 0));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return FALSE;
  }
  return TRUE;
}

static gboolean write_full(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return FALSE;
    p += w;
    n -= (size_t)w;
  }
  return TRUE;
}

/* The server reads each frame itself and hands the processor a memory
 * buffer holding exactly one complete, size-checked message. c_glib's
 * processor dereferences a NULL error on some failed reads (truncated or
 * unversioned input), so it must never see a partial or foreign frame. */
static void serve_connection(gpointer data, gpointer user_data) {
  int fd = GPOINTER_TO_INT(data) - 1;
  ixia_server_t *srv = user_data;
  if (g_atomic_int_get(&srv->stopping)) {
    close(fd);
    return;
  }
  struct timeval tv = {.tv_sec = srv->recv_timeout_ms / 1000,
                       .tv_usec = (srv->recv_timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  ThriftMemoryBuffer *in = ixia_frame_buffer_new(srv->max_frame);
  ThriftMemoryBuffer *out = ixia_frame_buffer_new(srv->max_frame);
  ThriftProtocol *pin = g_object_new(THRIFT_TYPE_BINARY_PROTOCOL, "transport", in, NULL);
  ThriftProtocol *pout = g_object_new(THRIFT_TYPE_BINARY_PROTOCOL, "transport", out, NULL);
  GByteArray *rbuf = g_byte_array_new();
  gsize rpos = 0;
  for (;;) {
    if (!fill(fd, rbuf, &rpos, 4)) break;
    const guint8 *hdr = rbuf->data + rpos;
    guint32 size = ((guint32)hdr[0] << 24) | ((guint32)hdr[1] << 16) | ((guint32)hdr[2] << 8) | hdr[3];
    if (size > srv->max_frame) {
      IXIA_WARN("closing connection: frame of %u bytes is over server.max_frame_bytes=%u", size,
                srv->max_frame);
      __atomic_add_fetch(&srv->rejected_frames, 1, __ATOMIC_RELAXED);
      break;
    }
    if (!fill(fd, rbuf, &rpos, 4 + (gsize)size)) {
      IXIA_DEBUG("closing connection: truncated frame (%u bytes announced)", size);
      break;
    }
    ixia_frame_buffer_load(in, rbuf->data + rpos + 4, size);
    rpos += 4 + (gsize)size;
    if (rpos == rbuf->len && rbuf->len > (1u << 20)) { /* drop a large frame's memory */
      g_byte_array_unref(rbuf);
      rbuf = g_byte_array_new();
      rpos = 0;
    }
    /* Strict binary protocol: version word 0x8001 first. */
    if (size < 8 || in->buf->data[0] != 0x80 || in->buf->data[1] != 0x01) {
      IXIA_WARN("closing connection: frame is not a binary-protocol Thrift message");
      __atomic_add_fetch(&srv->rejected_frames, 1, __ATOMIC_RELAXED);
      break;
    }
    g_byte_array_set_size(out->buf, 4); /* room for the response's frame header */
    GError *gerr = NULL;
    if (!thrift_processor_process(srv->processor, pin, pout, &gerr)) {
      IXIA_DEBUG("closing connection: %s", gerr ? gerr->message : "processor failed");
      if (gerr) g_error_free(gerr);
      break;
    }
    guint32 rsize = out->buf->len - 4;
    out->buf->data[0] = (guint8)(rsize >> 24);
    out->buf->data[1] = (guint8)(rsize >> 16);
    out->buf->data[2] = (guint8)(rsize >> 8);
    out->buf->data[3] = (guint8)rsize;
    if (!write_full(fd, out->buf->data, out->buf->len)) break;
  }
  g_mutex_lock(&srv->lock);
  g_hash_table_remove(srv->active, GINT_TO_POINTER(fd + 1));
  g_mutex_unlock(&srv->lock);
  g_byte_array_unref(rbuf);
  g_object_unref(pin);
  g_object_unref(pout);
  g_object_unref(in);
  g_object_unref(out);
  close(fd);
}

static gpointer accept_loop(gpointer data) {
  ixia_server_t *srv = data;
  struct pollfd pfd[2] = {{.fd = srv->listen_fd, .events = POLLIN}, {.fd = srv->wake[0], .events = POLLIN}};
  while (!g_atomic_int_get(&srv->stopping)) {
    if (poll(pfd, 2, -1) < 0) {
      if (errno == EINTR) continue;
      IXIA_ERROR("accept loop: poll: %s", g_strerror(errno));
      break;
    }
    if (pfd[1].revents) break;
    if (!(pfd[0].revents & POLLIN)) continue;
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        IXIA_WARN("accept: %s", g_strerror(errno));
        g_usleep(10000); /* e.g. EMFILE: back off instead of spinning */
      }
      continue;
    }
    __atomic_add_fetch(&srv->connections_total, 1, __ATOMIC_RELAXED);
    g_mutex_lock(&srv->lock);
    g_hash_table_add(srv->active, GINT_TO_POINTER(fd + 1));
    g_mutex_unlock(&srv->lock);
    g_thread_pool_push(srv->pool, GINT_TO_POINTER(fd + 1), NULL);
  }
  return NULL;
}

gboolean ixia_server_start(ixia_server_t *srv, ixia_error_t **err) {
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(srv->wake, O_CLOEXEC) != 0)
    return ixia_error_set(err, IXIA_EINTERNAL, "pipe: %s", g_strerror(errno));
  GError *gerr = NULL;
  srv->pool = g_thread_pool_new(serve_connection, srv, srv->workers, FALSE, &gerr);
  if (!srv->pool) return ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "worker pool");
  srv->accept_thread = g_thread_new("ixia-accept", accept_loop, srv);
  return TRUE;
}

void ixia_server_stop(ixia_server_t *srv) {
  if (!srv || g_atomic_int_get(&srv->stopping)) return;
  g_atomic_int_set(&srv->stopping, 1);
  if (srv->wake[1] >= 0) {
    ssize_t w = write(srv->wake[1], "x", 1);
    (void)w;
  }
  if (srv->accept_thread) g_thread_join(srv->accept_thread);
  srv->accept_thread = NULL;
  /* Wake workers blocked in recv; they close their own fds. */
  g_mutex_lock(&srv->lock);
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, srv->active);
  while (g_hash_table_iter_next(&it, &key, NULL)) shutdown(GPOINTER_TO_INT(key) - 1, SHUT_RDWR);
  g_mutex_unlock(&srv->lock);
  if (srv->pool) g_thread_pool_free(srv->pool, FALSE, TRUE);
  srv->pool = NULL;
}

void ixia_server_destroy(ixia_server_t *srv) {
  if (!srv) return;
  ixia_server_stop(srv);
  if (srv->pool) g_thread_pool_free(srv->pool, TRUE, TRUE);
  if (srv->listen_fd >= 0) close(srv->listen_fd);
  for (int i = 0; i < 2; i++)
    if (srv->wake[i] >= 0) close(srv->wake[i]);
  g_hash_table_destroy(srv->active);
  g_mutex_clear(&srv->lock);
  g_object_unref(srv->processor);
  g_free(srv);
}

guint64 ixia_server_connections_total(const ixia_server_t *srv) {
  return __atomic_load_n(&srv->connections_total, __ATOMIC_RELAXED);
}
guint64 ixia_server_rejected_frames(const ixia_server_t *srv) {
  return __atomic_load_n(&srv->rejected_frames, __ATOMIC_RELAXED);
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
