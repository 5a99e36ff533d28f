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
#include <thrift/c_glib/thrift_configuration.h>
#include <thrift/c_glib/transport/thrift_fd_transport.h>
#include <thrift/c_glib/transport/thrift_framed_transport.h>

#include "log.h"

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

/* Reads the 4-byte frame header without consuming it. Returns the frame size,
 * or -1 when the peer closed, stalled past the timeout or failed. */
static gint64 peek_frame_size(int fd) {
  unsigned char hdr[4];
  ssize_t n;
  do {
    n = recv(fd, hdr, sizeof hdr, MSG_PEEK | MSG_WAITALL);
  } while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof hdr) return -1;
  return ((gint64)hdr[0] << 24) | ((gint64)hdr[1] << 16) | ((gint64)hdr[2] << 8) | hdr[3];
}

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

  ThriftConfiguration *conf = g_object_new(
      THRIFT_TYPE_CONFIGURATION, "max_message_size", (gint)MIN(srv->max_frame, G_MAXINT),
      "max_frame_size", (gint)MIN(srv->max_frame, G_MAXINT), NULL);
  ThriftTransport *sock = g_object_new(THRIFT_TYPE_FD_TRANSPORT, "fd", fd, NULL);
  ThriftTransport *framed = g_object_new(THRIFT_TYPE_FRAMED_TRANSPORT, "transport", sock,
                                         "configuration", conf, NULL);
  /* The binary protocol bounds strings and lists by the configuration's
   * message size, so one frame limit covers them. */
  ThriftProtocol *proto = g_object_new(THRIFT_TYPE_BINARY_PROTOCOL, "transport", framed, NULL);
  for (;;) {
    gint64 size = peek_frame_size(fd);
    if (size < 0) break; /* closed, stalled or truncated */
    if (size == 0 || size > srv->max_frame) {
      IXIA_WARN("closing connection: frame of %" G_GINT64_FORMAT
                " bytes is over server.max_frame_bytes=%u",
                size, srv->max_frame);
      __atomic_add_fetch(&srv->rejected_frames, 1, __ATOMIC_RELAXED);
      break;
    }
    GError *gerr = NULL;
    if (!thrift_processor_process(srv->processor, proto, proto, &gerr)) {
      if (gerr) {
        IXIA_DEBUG("connection closed: %s", gerr->message);
        g_error_free(gerr);
      }
      break;
    }
  }
  g_mutex_lock(&srv->lock);
  g_hash_table_remove(srv->active, GINT_TO_POINTER(fd + 1));
  g_mutex_unlock(&srv->lock);
  g_object_unref(proto);
  g_object_unref(framed);
  /* ThriftFDTransport does not close the fd on unref. */
  g_object_unref(sock);
  g_object_unref(conf);
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
  return G_SOURCE_REMOVE;
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

gboolean ixia_write_file_atomic(const char *path, const char *text, ixia_error_t **err) {
  GError *gerr = NULL;
  if (!g_file_set_contents(path, text, -1, &gerr))
    return ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "write file");
  return TRUE;
}
