/* Clients of the ixia services (client.h): the API client, the shard
 * client and the framed connection both use.
 *
 * A connection is opened with a bounded non-blocking connect, given send
 * and receive timeouts, and authenticated with a raw frame before any
 * Thrift call when auth.key is set. Responses are read through the bounded
 * protocols of wire.h with the process's frame limit. Every Thrift
 * exception and transport error becomes an ixia_error_t here, once, so
 * callers never see GError or IxiaError. Timeouts come from the client.*
 * options, set once per process at start-up. */
#include "client.h"

#include "antientropy.h"
#include "auth.h"
#include "json.h"
#include "thrift_util.h"
#include "wire.h"

#include <cjson/cJSON.h>

#include <string.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <thrift/c_glib/thrift_application_exception.h>

struct ixia_client {
  char *address;
  ixia_thrift_conn_t conn;
  IxiaIxiaIf *iface;
  GByteArray *call; /* the get call, coded by hand (wire.h) */
  gint32 get_seq;   /* sequence id of the last get (the generated calls send 0) */
};

static ixia_client_timeouts_t timeouts = {
    .connect_ms = 5000, .auth_ms = 10000, .status_ms = 2000, .shard_ms = 120000};

void ixia_client_set_timeouts(const ixia_client_timeouts_t *t) { timeouts = *t; }

const ixia_client_timeouts_t *ixia_client_timeouts(void) { return &timeouts; }

static gboolean read_full(int fd, guint8 *buf, gsize len, gint64 deadline) {
  gsize got = 0;
  while (got < len) {
    gint64 left = (deadline - g_get_monotonic_time()) / 1000;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) return FALSE;
    ssize_t r = recv(fd, buf + got, len - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return FALSE;
    got += (gsize)r;
  }
  return TRUE;
}

/* The per-connection authenticate call (common/thrift_gate.h), encoded by
 * hand: every ixia service answers it, whatever its generated client. */
static gboolean authenticate(int fd, const char *hostport, const char *key, ixia_error_t **err) {
  GByteArray *f = g_byte_array_new();
  guint32 klen = (guint32)strlen(key);
  guint8 hdr[4] = {0};
  g_byte_array_append(f, hdr, 4);
  guint32 be = GUINT32_TO_BE(0x80010001u); /* version 1, T_CALL */
  g_byte_array_append(f, (const guint8 *)&be, 4);
  be = GUINT32_TO_BE(12);
  g_byte_array_append(f, (const guint8 *)&be, 4);
  g_byte_array_append(f, (const guint8 *)"authenticate", 12);
  be = 0;
  g_byte_array_append(f, (const guint8 *)&be, 4); /* seqid */
  const guint8 field[3] = {11 /* T_STRING */, 0, 1}, stop = 0;
  g_byte_array_append(f, field, 3);
  be = GUINT32_TO_BE(klen);
  g_byte_array_append(f, (const guint8 *)&be, 4);
  g_byte_array_append(f, (const guint8 *)key, klen);
  g_byte_array_append(f, &stop, 1);
  be = GUINT32_TO_BE(f->len - 4);
  memcpy(f->data, &be, 4);
  gboolean ok = send(fd, f->data, f->len, MSG_NOSIGNAL) == (ssize_t)f->len;
  g_byte_array_free(f, TRUE);
  gint64 deadline = g_get_monotonic_time() + timeouts.auth_ms * 1000;
  guint8 size_be[4];
  guint32 size = 0;
  ok = ok && read_full(fd, size_be, 4, deadline);
  if (ok) {
    memcpy(&size, size_be, 4);
    size = GUINT32_FROM_BE(size);
    ok = size >= 12 && size <= 1u << 20;
  }
  guint8 *ans = ok ? g_malloc(size) : NULL;
  ok = ok && read_full(fd, ans, size, deadline);
  if (!ok) {
    g_free(ans);
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: no answer to authenticate", hostport);
  }
  gint32 code = ixia_wire_answer_error_code(ans, size);
  if (code) {
    /* The message follows the code: T_STRING, id 2, length, bytes. */
    guint32 n;
    memcpy(&n, ans + 4, 4);
    gsize p = 12 + GUINT32_FROM_BE(n) + 10;
    char *msg = NULL;
    if (p + 7 <= size && ans[p] == 11) {
      guint32 ml;
      memcpy(&ml, ans + p + 3, 4);
      ml = GUINT32_FROM_BE(ml);
      if (ml <= size - p - 7) msg = g_strndup((const char *)ans + p + 7, ml);
    }
    ixia_error_set(err, (ixia_code_t)code, "%s: %s", hostport, msg ? msg : "authenticate failed");
    g_free(msg);
  }
  g_free(ans);
  return code == 0;
}

gboolean ixia_address_check(const char *addr, const char *what, ixia_error_t **err) {
  if (g_str_has_prefix(addr, IXIA_UNIX_PREFIX)) {
    const char *path = addr + strlen(IXIA_UNIX_PREFIX);
    if (*path && strlen(path) < sizeof ((struct sockaddr_un *)NULL)->sun_path) return TRUE;
    return ixia_error_set(err, IXIA_EINVAL, "%s: '%s' has %s socket path (at most %zu bytes)", what,
                          addr, *path ? "too long a" : "no",
                          sizeof ((struct sockaddr_un *)NULL)->sun_path - 1);
  }
  const char *colon = strrchr(addr, ':');
  char *end = NULL;
  guint64 port = colon ? g_ascii_strtoull(colon + 1, &end, 10) : 0;
  if (!colon || colon == addr || !end || *end || port == 0 || port > 65535)
    return ixia_error_set(err, IXIA_EINVAL, "%s: '%s' is not HOST:PORT or unix:PATH", what, addr);
  return TRUE;
}

gboolean ixia_thrift_conn_open(ixia_thrift_conn_t *c, const char *hostport, gint64 connect_timeout_ms,
                               gint64 io_timeout_ms, ixia_error_t **err) {
  ixia_thrift_init();
  memset(c, 0, sizeof *c);
  c->fd = -1;
  if (!ixia_address_check(hostport, "bad address", err)) return FALSE;
  /* A Unix-domain socket (a shard on this machine): no TCP/IP stack on
   * either side of each call. */
  gboolean local = g_str_has_prefix(hostport, IXIA_UNIX_PREFIX);
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  struct addrinfo *res = NULL;
  if (local) {
    g_strlcpy(sun.sun_path, hostport + strlen(IXIA_UNIX_PREFIX), sizeof sun.sun_path);
  } else {
    const char *colon = strrchr(hostport, ':');
    char *host = g_strndup(hostport, (gsize)(colon - hostport));
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    g_free(host);
    if (rc != 0)
      return ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot resolve %s: %s", hostport, gai_strerror(rc));
  }
  /* A Unix-domain connect does not go in progress: it waits while the
   * listener's backlog is full (EAGAIN when non-blocking), so it blocks,
   * bounded by a send timeout. */
  int fd = socket(local ? AF_UNIX : res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | (local ? 0 : SOCK_NONBLOCK), 0);
  int error = fd < 0 ? errno : 0;
  struct timeval ctv = {.tv_sec = connect_timeout_ms / 1000, .tv_usec = (connect_timeout_ms % 1000) * 1000};
  if (fd >= 0 && local) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &ctv, sizeof ctv);
  if (fd >= 0 && connect(fd, local ? (struct sockaddr *)&sun : res->ai_addr,
                         local ? (socklen_t)sizeof sun : res->ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      /* Bounded connect: a black-holed address must not hang the caller. */
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      int n;
      do {
        n = poll(&p, 1, (int)connect_timeout_ms);
      } while (n < 0 && errno == EINTR);
      socklen_t l = sizeof error;
      if (n == 0)
        error = ETIMEDOUT;
      else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &l) != 0)
        error = errno;
    }
  }
  if (res) freeaddrinfo(res);
  /* A Unix connect past its send timeout says EAGAIN: the listener's
   * backlog stayed full. */
  if (local && (error == EAGAIN || error == EWOULDBLOCK)) error = ETIMEDOUT;
  if (error) {
    if (fd >= 0) close(fd);
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot connect to %s: %s", hostport, g_strerror(error));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  if (!local) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (io_timeout_ms > 0 || local) { /* (local: the connect's timeout replaced) */
    gint64 t = MAX(io_timeout_ms, 0);
    struct timeval tv = {.tv_sec = t / 1000, .tv_usec = (t % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  const char *key = ixia_auth_client_key();
  if (key && !authenticate(fd, hostport, key, err)) {
    close(fd);
    return FALSE;
  }
  c->fd = fd;
  ixia_wire_limits_t lim = ixia_wire_limits();
  c->transport = ixia_wire_socket_new(fd, &lim);
  c->protocol = ixia_wire_protocol_new(c->transport, FALSE, &lim);
  return TRUE;
}

void ixia_thrift_conn_interrupt(ixia_thrift_conn_t *c) {
  if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
}

void ixia_thrift_conn_close(ixia_thrift_conn_t *c) {
  if (c->protocol) g_object_unref(c->protocol);
  if (c->transport) g_object_unref(c->transport);
  if (c->fd >= 0) close(c->fd);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

char *ixia_client_address(const char *explicit_addr, const ixia_config_t *cfg) {
  if (explicit_addr && *explicit_addr) return g_strdup(explicit_addr);
  const char *env = g_getenv("IXIA_API");
  if (env && *env) return g_strdup(env);
  if (cfg)
    return g_strdup_printf("%s:%" G_GINT64_FORMAT, ixia_config_str(cfg, "api.host"),
                           ixia_config_int(cfg, "api.port"));
  return g_strdup("127.0.0.1:9090");
}

ixia_client_t *ixia_client_new(const char *hostport, ixia_error_t **err) {
  return ixia_client_new_timeout(hostport, 0, err);
}

void ixia_client_interrupt(ixia_client_t *c) { ixia_thrift_conn_interrupt(&c->conn); }

ixia_client_t *ixia_client_new_timeout(const char *hostport, gint64 io_timeout_ms, ixia_error_t **err) {
  ixia_client_t *c = g_new0(ixia_client_t, 1);
  c->address = g_strdup(hostport);
  ixia_error_t *e = NULL;
  if (!ixia_thrift_conn_open(&c->conn, hostport, timeouts.connect_ms, io_timeout_ms, &e)) {
    ixia_error_prefix(e, "ixia API");
    ixia_error_propagate(err, e);
    g_free(c->address);
    g_free(c);
    return NULL;
  }
  c->iface = g_object_new(IXIA_TYPE_IXIA_CLIENT, "input_protocol", c->conn.protocol,
                          "output_protocol", c->conn.protocol, NULL);
  c->call = g_byte_array_new();
  return c;
}

void ixia_client_destroy(ixia_client_t *c) {
  if (!c) return;
  if (c->iface) g_object_unref(c->iface);
  if (c->call) g_byte_array_unref(c->call);
  ixia_thrift_conn_close(&c->conn);
  g_free(c->address);
  g_free(c);
}

IxiaIxiaIf *ixia_client_iface(ixia_client_t *c) { return c->iface; }

/* A server-side IxiaError keeps its code (the server also answers calls it
 * cannot decode or serve with one); a TApplicationException (an unknown
 * method: client and server of different versions) is INVALID_ARGUMENT;
 * anything else is the transport. */
static gboolean check_call(const char *what, const char *address, gboolean ok, IxiaIxiaError *xe,
                           GError *gerr, ixia_error_t **err) {
  if (xe) {
    ok = FALSE;
    ixia_error_set(err, (ixia_code_t)xe->code, "%s", xe->message ? xe->message : "(no message)");
    g_object_unref(xe);
  } else if (!ok && gerr && gerr->domain == THRIFT_APPLICATION_EXCEPTION_ERROR) {
    ixia_error_set(err, IXIA_EINVAL, "%s at %s: %s", what, address, gerr->message);
  } else if (!ok) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "%s at %s: %s", what, address,
                   gerr ? gerr->message : "call failed");
  }
  if (gerr) g_error_free(gerr);
  return ok;
}

struct ixia_shard_client {
  char *address;
  ixia_thrift_conn_t conn;
  IxiaSearchIf *iface;
};

ixia_shard_client_t *ixia_shard_client_new(const char *hostport, gint64 io_timeout_ms,
                                           ixia_error_t **err) {
  ixia_shard_client_t *c = g_new0(ixia_shard_client_t, 1);
  c->address = g_strdup(hostport);
  ixia_error_t *e = NULL;
  if (!ixia_thrift_conn_open(&c->conn, hostport, timeouts.connect_ms, io_timeout_ms, &e)) {
    ixia_error_prefix(e, "index shard");
    ixia_error_propagate(err, e);
    g_free(c->address);
    g_free(c);
    return NULL;
  }
  c->iface = g_object_new(IXIA_TYPE_SEARCH_CLIENT, "input_protocol", c->conn.protocol,
                          "output_protocol", c->conn.protocol, NULL);
  return c;
}

void ixia_shard_client_destroy(ixia_shard_client_t *c) {
  if (!c) return;
  if (c->iface) g_object_unref(c->iface);
  ixia_thrift_conn_close(&c->conn);
  g_free(c->address);
  g_free(c);
}

IxiaSearchIf *ixia_shard_client_iface(ixia_shard_client_t *c) { return c->iface; }
const char *ixia_shard_client_address(const ixia_shard_client_t *c) { return c->address; }
int ixia_shard_client_fd(const ixia_shard_client_t *c) { return c->conn.fd; }

gboolean ixia_shard_client_check(ixia_shard_client_t *c, gboolean ok, IxiaIxiaError *xe,
                                 GError *gerr, ixia_error_t **err) {
  return check_call("index shard", c->address, ok, xe, gerr, err);
}

gboolean ixia_shard_client_search(ixia_shard_client_t *c, const char *request_json, char **json,
                                  ixia_error_t **err) {
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  *json = NULL;
  gboolean ok = ixia_search_if_search(c->iface, json, request_json, &xe, &gerr);
  return ixia_shard_client_check(c, ok, xe, gerr, err);
}

gboolean ixia_shard_client_status(ixia_shard_client_t *c, char **json, ixia_error_t **err) {
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  *json = NULL;
  gboolean ok = ixia_search_if_status(c->iface, json, &xe, &gerr);
  return ixia_shard_client_check(c, ok, xe, gerr, err);
}

gboolean ixia_client_check(ixia_client_t *c, gboolean ok, IxiaIxiaError *xe, GError *gerr,
                           ixia_error_t **err) {
  return check_call("ixia API", c->address, ok, xe, gerr, err);
}


gboolean ixia_client_put(ixia_client_t *c, const char *ns, const char *table, const char *key,
                         const char *json, gint64 expected_version, gint64 *version,
                         ixia_error_t **err) {
  gint64 v = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_put(c->iface, &v, ns, table, key, json, expected_version, &xe, &gerr);
  if (version) *version = v;
  return ixia_client_check(c, ok, xe, gerr, err);
}

gboolean ixia_client_upsert(ixia_client_t *c, const char *ns, const char *table, const char *key,
                            const char *json, gint64 expected_version, gint64 *version,
                            ixia_error_t **err) {
  gint64 v = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok =
      ixia_ixia_if_upsert(c->iface, &v, ns, table, key, json, expected_version, &xe, &gerr);
  if (version) *version = v;
  return ixia_client_check(c, ok, xe, gerr, err);
}

gboolean ixia_client_delete(ixia_client_t *c, const char *ns, const char *table, const char *key,
                            gint64 expected_version, gint64 *version, ixia_error_t **err) {
  gint64 v = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok =
      ixia_ixia_if_delete_doc(c->iface, &v, ns, table, key, expected_version, &xe, &gerr);
  if (version) *version = v;
  return ixia_client_check(c, ok, xe, gerr, err);
}

/* get is coded by hand (wire.h: the generated code cost more than the
 * call); an answer of another shape, an error among them, is read by the
 * generated recv_get from the same bytes. */
gboolean ixia_client_get(ixia_client_t *c, const char *ns, const char *table, const char *key,
                         const char *const *fields, gboolean *found, gint64 *version, char **json,
                         ixia_error_t **err) {
  if (!ns || !table || !key)
    return ixia_error_set(err, IXIA_EINVAL, "get: ns, table and key are required");
  c->get_seq = c->get_seq >= G_MAXINT32 - 1 ? 1 : c->get_seq + 1;
  g_byte_array_set_size(c->call, 0);
  ixia_wire_append_get_call(c->call, c->get_seq, ns, table, key, fields);
  const guint8 *answer;
  gsize answer_len;
  GError *gerr = NULL;
  if (!ixia_wire_socket_call(c->conn.transport, c->call->data, c->call->len, &answer, &answer_len,
                             &gerr))
    return ixia_client_check(c, FALSE, NULL, gerr, err);
  /* The answer of an earlier get this client gave up on (its I/O timeout)
   * may come first: skipped, it would read as this key's document. */
  for (guint skipped = 0;; skipped++) {
    const char *name;
    guint32 name_len;
    gint32 seq;
    if (!ixia_wire_peek_call(answer, answer_len, &name, &name_len, &seq) || seq == 0 ||
        seq == c->get_seq)
      break;
    if (skipped == 64)
      return ixia_error_set(err, IXIA_EUNAVAILABLE,
                            "ixia API at %s: no answer to this get among the next 64", c->address);
    if (!ixia_wire_socket_next(c->conn.transport, &answer, &answer_len, &gerr))
      return ixia_client_check(c, FALSE, NULL, gerr, err);
  }
  gboolean f;
  gint64 v;
  const char *j;
  gsize jl;
  if (ixia_wire_read_get_reply(answer, answer_len, &f, &v, &j, &jl)) {
    thrift_transport_read_end(c->conn.transport, NULL); /* the answer is read */
    if (found) *found = f;
    if (version) *version = v;
    if (json) *json = f ? ixia_memdup0(j, jl) : NULL;
    return TRUE;
  }
  IxiaDocument *doc = g_object_new(IXIA_TYPE_DOCUMENT, NULL);
  IxiaIxiaError *xe = NULL;
  gboolean ok = ixia_ixia_client_recv_get(c->iface, &doc, &xe, &gerr);
  ok = ixia_client_check(c, ok, xe, gerr, err);
  if (ok) {
    if (found) *found = doc->found;
    if (version) *version = doc->version;
    if (json) *json = doc->found ? g_strdup(doc->json) : NULL;
  }
  g_object_unref(doc);
  return ok;
}

gboolean ixia_client_apply_schema(ixia_client_t *c, const char *schema_json, gint64 *version,
                                  ixia_error_t **err) {
  gint64 v = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_apply_schema(c->iface, &v, schema_json, &xe, &gerr);
  if (version) *version = v;
  return ixia_client_check(c, ok, xe, gerr, err);
}

/* Calls returning a string share one shape. */
#define STRING_CALL(c, out, err, call_expr)             \
  do {                                                  \
    gchar *s = NULL;                                    \
    IxiaIxiaError *xe = NULL;                           \
    GError *gerr = NULL;                                \
    gboolean ok = (call_expr);                          \
    ok = ixia_client_check((c), ok, xe, gerr, (err));   \
    if (ok && (out))                                    \
      *(out) = s;                                       \
    else                                                \
      g_free(s);                                        \
    return ok;                                          \
  } while (0)

gboolean ixia_client_get_schema(ixia_client_t *c, const char *ns, const char *table, char **json,
                                ixia_error_t **err) {
  STRING_CALL(c, json, err, ixia_ixia_if_get_schema(c->iface, &s, ns, table, &xe, &gerr));
}

gboolean ixia_client_stats(ixia_client_t *c, char **json, ixia_error_t **err) {
  STRING_CALL(c, json, err, ixia_ixia_if_stats(c->iface, &s, &xe, &gerr));
}

gboolean ixia_client_create_key(ixia_client_t *c, const char *spec_json, char **json,
                                ixia_error_t **err) {
  STRING_CALL(c, json, err, ixia_ixia_if_create_key(c->iface, &s, spec_json, &xe, &gerr));
}

gboolean ixia_client_list_keys(ixia_client_t *c, char **json, ixia_error_t **err) {
  STRING_CALL(c, json, err, ixia_ixia_if_list_keys(c->iface, &s, &xe, &gerr));
}

gboolean ixia_client_revoke_key(ixia_client_t *c, const char *id, ixia_error_t **err) {
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_revoke_key(c->iface, id, &xe, &gerr);
  return ixia_client_check(c, ok, xe, gerr, err);
}

gboolean ixia_client_snapshot(ixia_client_t *c, const char *dir, char **json, ixia_error_t **err) {
  STRING_CALL(c, json, err, ixia_ixia_if_snapshot(c->iface, &s, dir, &xe, &gerr));
}

gboolean ixia_client_scan(ixia_client_t *c, const char *ns, const char *table, const char *after,
                          gint limit, GPtrArray **docs, ixia_error_t **err) {
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  *docs = g_ptr_array_new_with_free_func(g_object_unref);
  gboolean ok = ixia_ixia_if_scan(c->iface, docs, ns, table, after ? after : "", limit, &xe, &gerr);
  if (!ixia_client_check(c, ok, xe, gerr, err)) {
    g_clear_pointer(docs, g_ptr_array_unref);
    return FALSE;
  }
  return TRUE;
}

gboolean ixia_client_query(ixia_client_t *c, const char *request_json, char **response_json,
                           ixia_error_t **err) {
  STRING_CALL(c, response_json, err, ixia_ixia_if_query(c->iface, &s, request_json, &xe, &gerr));
}

gboolean ixia_client_wal_since(ixia_client_t *c, gint64 after, gint32 max_bytes,
                               GPtrArray **batches, ixia_error_t **err) {
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  *batches = g_ptr_array_new_with_free_func(g_object_unref);
  gboolean ok = ixia_ixia_if_wal_since(c->iface, batches, after, max_bytes, &xe, &gerr);
  if (!ixia_client_check(c, ok, xe, gerr, err)) {
    g_clear_pointer(batches, g_ptr_array_unref);
    return FALSE;
  }
  return TRUE;
}

char **ixia_client_shards(ixia_client_t *api, ixia_error_t **err) {
  char *json = NULL;
  if (!ixia_client_stats(api, &json, err)) return NULL;
  cJSON *stats = cJSON_Parse(json);
  g_free(json);
  const char *list = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(stats, "query_indexers"));
  char **out = NULL;
  if (!list || !*list)
    ixia_error_set(err, IXIA_EUNAVAILABLE,
                   "the API reports no index shards (query.indexers is empty on the API)");
  else
    out = g_strsplit(list, ",", -1);
  cJSON_Delete(stats);
  return out;
}

cJSON *ixia_shard_statuses(char **addrs, gint64 io_timeout_ms, gboolean *all_up) {
  cJSON *out = cJSON_CreateArray();
  if (all_up) *all_up = TRUE;
  for (char **a = addrs; a && *a; a++) {
    char *addr = g_strstrip(g_strdup(*a));
    if (!*addr) {
      g_free(addr);
      continue;
    }
    cJSON *item = cJSON_CreateObject();
    cJSON_AddStringToObject(item, "address", addr);
    ixia_error_t *err = NULL;
    ixia_shard_client_t *sc = ixia_shard_client_new(addr, io_timeout_ms, &err);
    char *json = NULL;
    if (sc && ixia_shard_client_status(sc, &json, &err))
      cJSON_AddItemToObject(item, "status", cJSON_Parse(json));
    if (err) {
      if (all_up) *all_up = FALSE;
      cJSON_AddStringToObject(item, "error", err->message);
      ixia_error_destroy(err);
    }
    g_free(json);
    g_free(addr);
    ixia_shard_client_destroy(sc);
    cJSON_AddItemToArray(out, item);
  }
  return out;
}

/* ---------- repair listings ---------- */

static GArray *partition_list(const gint32 *partitions, guint n) {
  GArray *a = g_array_sized_new(FALSE, FALSE, sizeof(gint32), n);
  if (n) g_array_append_vals(a, partitions, n);
  return a;
}

gboolean ixia_client_key_versions(ixia_client_t *c, const char *ns, const char *table,
                                  const char *after, const char *end, gint limit,
                                  gint32 partition_count, const gint32 *partitions,
                                  guint n_partitions, GArray *out, gint64 *store_version,
                                  ixia_error_t **err) {
  IxiaKeyVersionPage *page = g_object_new(IXIA_TYPE_KEY_VERSION_PAGE, NULL);
  GArray *parts = partition_list(partitions, n_partitions);
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_key_versions(c->iface, &page, ns, table, after ? after : "", end ? end : "",
                                          limit, partition_count, parts, &xe, &gerr);
  g_array_unref(parts);
  ok = ixia_client_check(c, ok, xe, gerr, err);
  if (ok) {
    *store_version = page->store_version;
    for (guint i = 0; i < page->keys->len; i++) {
      IxiaKeyVersion *kv = g_ptr_array_index(page->keys, i);
      ixia_ae_kv_t e = {g_strdup(kv->key ? kv->key : ""), kv->version};
      g_array_append_val(out, e);
    }
  }
  g_object_unref(page);
  return ok;
}

static void append_ranges(const GPtrArray *ranges, GArray *out) {
  for (guint i = 0; i < ranges->len; i++) {
    IxiaRangeDigest *d = g_ptr_array_index(ranges, i);
    ixia_ae_range_t r = {g_strdup(d->last_key ? d->last_key : ""), d->count, (guint64)d->hash};
    g_array_append_val(out, r);
  }
}

gboolean ixia_client_digest(ixia_client_t *c, const char *ns, const char *table, const char *after,
                            const char *end, gint max_keys, gint bucket_keys,
                            gint32 partition_count, const gint32 *partitions, guint n_partitions,
                            GArray *out, gint64 *store_version, ixia_error_t **err) {
  IxiaDigestPage *page = g_object_new(IXIA_TYPE_DIGEST_PAGE, NULL);
  GArray *parts = partition_list(partitions, n_partitions);
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_digest(c->iface, &page, ns, table, after ? after : "", end ? end : "",
                                    max_keys, bucket_keys, partition_count, parts, &xe, &gerr);
  g_array_unref(parts);
  ok = ixia_client_check(c, ok, xe, gerr, err);
  if (ok) {
    *store_version = page->store_version;
    append_ranges(page->ranges, out);
  }
  g_object_unref(page);
  return ok;
}

gboolean ixia_client_current_events(ixia_client_t *c, const char *ns, const char *table,
                                    const char *const *keys, guint n, GPtrArray **events,
                                    ixia_error_t **err) {
  GPtrArray *k = g_ptr_array_sized_new(n);
  for (guint i = 0; i < n; i++) g_ptr_array_add(k, (gpointer)keys[i]);
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  *events = g_ptr_array_new_with_free_func(g_object_unref);
  gboolean ok = ixia_ixia_if_current_events(c->iface, events, ns, table, k, &xe, &gerr);
  g_ptr_array_free(k, TRUE);
  if (!ixia_client_check(c, ok, xe, gerr, err)) {
    g_clear_pointer(events, g_ptr_array_unref);
    return FALSE;
  }
  return TRUE;
}

gboolean ixia_client_schema_events(ixia_client_t *c, GPtrArray **events, ixia_error_t **err) {
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  *events = g_ptr_array_new_with_free_func(g_object_unref);
  gboolean ok = ixia_ixia_if_schema_events(c->iface, events, &xe, &gerr);
  if (!ixia_client_check(c, ok, xe, gerr, err)) {
    g_clear_pointer(events, g_ptr_array_unref);
    return FALSE;
  }
  return TRUE;
}

gboolean ixia_shard_client_digest(ixia_shard_client_t *c, const char *ns, const char *table,
                                  const char *after, const char *const *bounds, guint n,
                                  GArray *out, ixia_error_t **err) {
  GPtrArray *b = g_ptr_array_sized_new(n);
  for (guint i = 0; i < n; i++) g_ptr_array_add(b, (gpointer)bounds[i]);
  GPtrArray *ranges = g_ptr_array_new_with_free_func(g_object_unref);
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_search_if_digest(c->iface, &ranges, ns, table, after ? after : "", b, &xe, &gerr);
  g_ptr_array_free(b, TRUE);
  ok = ixia_shard_client_check(c, ok, xe, gerr, err);
  if (ok) append_ranges(ranges, out);
  g_ptr_array_unref(ranges);
  return ok;
}
