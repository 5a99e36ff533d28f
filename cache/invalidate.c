/* Writes' deletes, grouped: one thread sends the deletes of every writer
 * waiting at that moment in one pipelined round per memcached server, and
 * answers each writer once memcached has answered its keys.
 *
 * Why a thread of its own and raw sockets: a write must not be acknowledged
 * before its cached copies are gone, so every write pays a memcached round
 * trip; under concurrent writes (and for batches of thousands of keys) the
 * round trips, not the bytes, are the cost. libmemcached offers no pipelined
 * delete that still reports each key's outcome (its buffered and noreply
 * modes report success without knowing), so the text protocol is spoken
 * here: "delete <key>\r\n" per key in one write, then one answer line per
 * key, in order. The key -> server mapping is libmemcached's (a clone of the
 * cache's handle), and a server's health is the one cache.c keeps for every
 * thread.
 *
 * A delete that fails (server down, timeout, an error answer) makes its
 * writer's call return FALSE (the API counts it) and is retried by the
 * following rounds, at least every RETRY_EVERY_MS, until it succeeds; at most
 * cache.invalidation_retry_max keys wait, beyond which the oldest are dropped
 * and counted. Until a retry succeeds, the cache TTL bounds how stale a get
 * that reaches memcached can be. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cache_int.h"
#include "log.h"

#define RETRY_EVERY_MS 100

typedef struct {
  char **mkeys;
  guint n;
  guint failed;
  ixia_cache_invalidated_cb cb; /* asynchronous: called, then the request freed */
  gpointer user;
  gboolean done;
  GMutex lock;
  GCond cond;
} inval_req_t;

/* One key of a round. */
typedef struct {
  const char *mkey;
  inval_req_t *req; /* NULL for a retry */
  guint retry;      /* index in the retry list, for a retry */
  gboolean ok;
} item_t;

typedef struct {
  ixia_cache_t *c;
  int *fd; /* per server; -1 when closed */
  GPtrArray *retry; /* char* mkeys waiting for another attempt, oldest first */
  GString *out;
  char in[65536];
  size_t in_len, in_pos;
} inval_t;

static void close_server(inval_t *v, guint i) {
  if (v->fd[i] >= 0) close(v->fd[i]);
  v->fd[i] = -1;
}

/* A connected socket to server i with the cache's timeouts, or -1. */
static int connect_server(inval_t *v, guint i, const char **why) {
  if (v->fd[i] >= 0) return v->fd[i];
  server_t *s = &v->c->servers[i];
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  char port[8];
  g_snprintf(port, sizeof port, "%u", s->port);
  if (getaddrinfo(s->host, port, &hints, &res) != 0 || !res) {
    *why = "host lookup failed";
    return -1;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int rc = fd < 0 ? -1 : connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && fd >= 0 && errno == EINPROGRESS) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t el = sizeof err;
    rc = poll(&p, 1, (int)(v->c->timeout_us / 1000)) == 1 &&
                 getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0
             ? 0
             : -1;
  }
  if (rc != 0) {
    if (fd >= 0) close(fd);
    *why = "cannot connect";
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  struct timeval tv = {.tv_sec = v->c->timeout_us / G_USEC_PER_SEC,
                       .tv_usec = v->c->timeout_us % G_USEC_PER_SEC};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  v->fd[i] = fd;
  v->in_len = v->in_pos = 0;
  return fd;
}

/* The next answer line of fd (without \r\n) into line; FALSE on a failure
 * or timeout. */
static gboolean read_line(inval_t *v, int fd, char *line, size_t size) {
  for (;;) {
    char *nl = memchr(v->in + v->in_pos, '\n', v->in_len - v->in_pos);
    if (nl) {
      size_t n = (size_t)(nl - (v->in + v->in_pos));
      size_t copy = MIN(n, size - 1);
      memcpy(line, v->in + v->in_pos, copy);
      line[copy] = 0;
      if (copy && line[copy - 1] == '\r') line[copy - 1] = 0;
      v->in_pos += n + 1;
      return TRUE;
    }
    if (v->in_pos > 0) {
      memmove(v->in, v->in + v->in_pos, v->in_len - v->in_pos);
      v->in_len -= v->in_pos;
      v->in_pos = 0;
    }
    if (v->in_len == sizeof v->in) return FALSE; /* no line that long from memcached */
    ssize_t r = recv(fd, v->in + v->in_len, sizeof v->in - v->in_len, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return FALSE;
    }
    v->in_len += (size_t)r;
  }
}

static gboolean send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return FALSE;
    p += w;
    n -= (size_t)w;
  }
  return TRUE;
}

/* Deletes the items of server i (indices `mine` into items), pipelined. */
static void round_server(inval_t *v, guint i, item_t *items, const GArray *mine) {
  server_t *s = &v->c->servers[i];
  if (!ixia_cache_server_usable(v->c, s)) return; /* all stay failed */
  const char *why = NULL;
  int fd = connect_server(v, i, &why);
  if (fd < 0) {
    ixia_cache_server_mark_down(v->c, s, why);
    return;
  }
  g_string_truncate(v->out, 0);
  for (guint k = 0; k < mine->len; k++)
    g_string_append_printf(v->out, "delete %s\r\n", items[g_array_index(mine, guint, k)].mkey);
  if (!send_all(fd, v->out->str, v->out->len)) {
    close_server(v, i);
    ixia_cache_server_mark_down(v->c, s, "pipelined delete: write failed or timed out");
    return;
  }
  char line[256];
  for (guint k = 0; k < mine->len; k++) {
    if (!read_line(v, fd, line, sizeof line)) {
      /* The rest of the answers are lost with the connection. */
      close_server(v, i);
      ixia_cache_server_mark_down(v->c, s, "pipelined delete: read failed or timed out");
      return;
    }
    item_t *it = &items[g_array_index(mine, guint, k)];
    it->ok = strcmp(line, "DELETED") == 0 || strcmp(line, "NOT_FOUND") == 0;
    if (!it->ok) IXIA_WARN("cache: memcached %s answered '%s' to a delete", s->name, line);
  }
  ixia_cache_server_mark_up(s);
}

static void free_mkeys(inval_req_t *r) {
  for (guint i = 0; i < r->n; i++) g_free(r->mkeys[i]);
  g_free(r->mkeys);
}

static void answer(inval_req_t *r) {
  if (r->cb) {
    r->cb(r->user, r->failed);
    free_mkeys(r);
    g_free(r);
    return;
  }
  g_mutex_lock(&r->lock);
  r->done = TRUE;
  g_cond_signal(&r->cond);
  g_mutex_unlock(&r->lock);
}

/* One round: the keys of reqs, and the retries. */
static void run_round(inval_t *v, GPtrArray *reqs) {
  ixia_cache_t *c = v->c;
  GArray *items = g_array_new(FALSE, TRUE, sizeof(item_t));
  for (guint r = 0; r < reqs->len; r++) {
    inval_req_t *req = reqs->pdata[r];
    for (guint k = 0; k < req->n; k++) {
      item_t it = {req->mkeys[k], req, 0, FALSE};
      g_array_append_val(items, it);
    }
  }
  for (guint k = 0; k < v->retry->len; k++) {
    item_t it = {v->retry->pdata[k], NULL, k, FALSE};
    g_array_append_val(items, it);
  }
  GArray **per = g_new0(GArray *, c->n_servers);
  item_t *all = (item_t *)(void *)items->data;
  for (guint k = 0; k < items->len; k++) {
    uint32_t idx = memcached_generate_hash(c->inval_mc, all[k].mkey, strlen(all[k].mkey));
    if (idx >= c->n_servers) continue;
    if (!per[idx]) per[idx] = g_array_new(FALSE, FALSE, sizeof(guint));
    g_array_append_val(per[idx], k);
  }
  for (guint i = 0; i < c->n_servers; i++)
    if (per[i]) {
      round_server(v, i, all, per[i]);
      g_array_free(per[i], TRUE);
    }
  g_free(per);
  atomic_fetch_add_explicit(&c->inval_rounds, 1, memory_order_relaxed);

  /* Outcomes: writers' keys are counted once; failed ones join the retries. */
  GPtrArray *still = g_ptr_array_new();
  for (guint k = 0; k < items->len; k++) {
    item_t *it = &all[k];
    if (it->req) {
      if (it->ok) {
        COUNT(c, invalidations);
      } else {
        COUNT(c, invalidation_failures);
        it->req->failed++;
        g_ptr_array_add(still, g_strdup(it->mkey));
      }
    } else if (it->ok) {
      atomic_fetch_add_explicit(&c->inval_retried, 1, memory_order_relaxed);
      g_free(v->retry->pdata[it->retry]);
      v->retry->pdata[it->retry] = NULL;
    }
  }
  GPtrArray *next = g_ptr_array_new();
  for (guint k = 0; k < v->retry->len; k++)
    if (v->retry->pdata[k]) g_ptr_array_add(next, v->retry->pdata[k]);
  for (guint k = 0; k < still->len; k++) g_ptr_array_add(next, still->pdata[k]);
  g_ptr_array_free(still, TRUE);
  g_ptr_array_free(v->retry, TRUE);
  v->retry = next;
  if (v->retry->len > (guint)c->inval_retry_max) {
    guint drop = v->retry->len - (guint)c->inval_retry_max;
    for (guint k = 0; k < drop; k++) g_free(v->retry->pdata[k]);
    g_ptr_array_remove_range(v->retry, 0, drop);
    atomic_fetch_add_explicit(&c->inval_retry_drops, drop, memory_order_relaxed);
  }
  atomic_store_explicit(&c->inval_retry_pending, v->retry->len, memory_order_relaxed);
  for (guint r = 0; r < reqs->len; r++) answer(reqs->pdata[r]);
  g_array_free(items, TRUE);
}

static gpointer inval_main(gpointer data) {
  ixia_cache_t *c = data;
  inval_t v = {.c = c, .retry = g_ptr_array_new(), .out = g_string_new(NULL)};
  v.fd = g_new(int, c->n_servers);
  for (guint i = 0; i < c->n_servers; i++) v.fd[i] = -1;
  gboolean stop = FALSE;
  GPtrArray *reqs = g_ptr_array_new();
  while (!stop) {
    inval_req_t *r = g_async_queue_timeout_pop(c->inval_queue, RETRY_EVERY_MS * 1000);
    g_ptr_array_set_size(reqs, 0);
    for (; r; r = g_async_queue_try_pop(c->inval_queue)) {
      if (!r->mkeys) {
        stop = TRUE;
        answer(r);
        continue;
      }
      g_ptr_array_add(reqs, r);
    }
    if (reqs->len || v.retry->len) run_round(&v, reqs);
  }
  g_ptr_array_free(reqs, TRUE);
  for (guint i = 0; i < c->n_servers; i++) close_server(&v, i);
  g_free(v.fd);
  g_ptr_array_free(v.retry, TRUE);
  g_string_free(v.out, TRUE);
  return NULL;
}

gboolean ixia_cache_invalidator_start(ixia_cache_t *c, ixia_error_t **err) {
  c->inval_mc = memcached_clone(NULL, c->master);
  if (!c->inval_mc) return ixia_error_set(err, IXIA_EINTERNAL, "memcached_clone failed");
  c->inval_queue = g_async_queue_new();
  c->inval_thread = g_thread_new("ixia-mc-inval", inval_main, c);
  return TRUE;
}

/* Waits for req's answer. */
static guint submit(ixia_cache_t *c, inval_req_t *r) {
  g_mutex_init(&r->lock);
  g_cond_init(&r->cond);
  g_async_queue_push(c->inval_queue, r);
  g_mutex_lock(&r->lock);
  while (!r->done) g_cond_wait(&r->cond, &r->lock);
  g_mutex_unlock(&r->lock);
  g_mutex_clear(&r->lock);
  g_cond_clear(&r->cond);
  return r->failed;
}

void ixia_cache_invalidator_stop(ixia_cache_t *c) {
  if (!c->inval_thread) return;
  inval_req_t stop = {0};
  submit(c, &stop);
  g_thread_join(c->inval_thread);
  c->inval_thread = NULL;
  g_async_queue_unref(c->inval_queue);
  memcached_free(c->inval_mc);
}

static char **mkeys_of(const ixia_cache_keyref_t *keys, guint n) {
  char **m = g_new(char *, n);
  for (guint i = 0; i < n; i++) m[i] = ixia_cache_key(keys[i].ns, keys[i].table, keys[i].key, keys[i].key_len);
  return m;
}

guint ixia_cache_invalidate_many(ixia_cache_t *c, const ixia_cache_keyref_t *keys, guint n) {
  g_return_val_if_fail(c && (keys || n == 0), n);
  if (c->disabled || n == 0) return 0;
  inval_req_t r = {.n = n, .mkeys = mkeys_of(keys, n)};
  guint failed = submit(c, &r);
  free_mkeys(&r);
  return failed;
}

void ixia_cache_invalidate_many_async(ixia_cache_t *c, const ixia_cache_keyref_t *keys, guint n,
                                      ixia_cache_invalidated_cb cb, gpointer user) {
  if (!c || c->disabled || n == 0) {
    cb(user, 0);
    return;
  }
  inval_req_t *r = g_new0(inval_req_t, 1);
  *r = (inval_req_t){.n = n, .mkeys = mkeys_of(keys, n), .cb = cb, .user = user};
  g_async_queue_push(c->inval_queue, r);
}

gboolean ixia_cache_invalidate(ixia_cache_t *c, const char *ns, const char *table,
                               const char *key, size_t key_len) {
  g_return_val_if_fail(c && ns && table && (key || !key_len), FALSE);
  ixia_cache_keyref_t k = {ns, table, key, key_len};
  return ixia_cache_invalidate_many(c, &k, 1) == 0;
}
