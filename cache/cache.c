/* The look-aside cache on memcached (cache.h has the protocol): keys, the
 * pool of libmemcached handles and the per-server health every thread
 * shares, gets, leases and backfills (on a small thread pool, so a get never
 * waits for its backfill). Writers' deletes are grouped in invalidate.c.
 *
 * Every libmemcached outcome is interpreted in one place (mc_check), which
 * is also where a server is marked down: one failure spares every thread the
 * next timeouts for cache.retry_timeout_s. */
#include "cache_int.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "log.h"
#include "testhook.h"
#include "schema.h"

#define TAG_VALUE 'V'
#define TAG_LEASE 'L'
#define TOKEN_BYTES 16
#define LEASE_BYTES (1 + TOKEN_BYTES)
#define VALUE_HEADER_BYTES (1 + 8)
/* Plain keys stay short enough to leave memcached's 250-byte limit some room. */
#define PLAIN_KEY_MAX 200
/* memcached reads an expiration above 30 days as a Unix time. */
#define MAX_TTL_SECONDS (30 * 24 * 3600)

struct ixia_cache_lease {
  ixia_cache_t *cache;
  char *mkey;
  guint8 token[TOKEN_BYTES];
};

typedef enum { JOB_BACKFILL, JOB_RELEASE } job_kind_t;

typedef struct {
  job_kind_t kind;
  ixia_cache_lease_t *lease;
  char *value; /* encoded, for JOB_BACKFILL */
  size_t value_len;
  time_t ttl;
} job_t;


/* ---- keys ---------------------------------------------------------------- */

static gboolean key_is_plain_safe(const char *key, size_t len) {
  if (len == 0) return FALSE;
  for (size_t i = 0; i < len; i++) {
    /* Printable ASCII only: the text protocol forbids spaces and control
     * characters, and libmemcached's key check (isgraph) also rejects bytes
     * >= 0x80, so UTF-8 keys are hashed too. */
    guchar b = (guchar)key[i];
    if (b <= 0x20 || b >= 0x7f) return FALSE;
  }
  return TRUE;
}

static void hex128(const void *data, size_t len, char out[33]) {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits(data, len));
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = digits[canon.digest[i] >> 4];
    out[2 * i + 1] = digits[canon.digest[i] & 0xf];
  }
  out[32] = '\0';
}

char *ixia_cache_key(const char *ns, const char *table, const char *key, size_t key_len) {
  g_return_val_if_fail(ns && table && (key || key_len == 0), NULL);
  char hex[33];
  if (!ixia_name_valid(ns, "namespace", NULL) || !ixia_name_valid(table, "table", NULL)) {
    /* Names could then hold ':' or spaces; length-prefixing each part keeps
     * distinct triples distinct before hashing. */
    GString *all = g_string_new(NULL);
    g_string_append_printf(all, "%zu:%s%zu:%s%zu:", strlen(ns), ns, strlen(table), table,
                           key_len);
    g_string_append_len(all, key, (gssize)key_len);
    hex128(all->str, all->len, hex);
    g_string_free(all, TRUE);
    return g_strconcat("ixia:#:", hex, NULL);
  }
  size_t plain_len = strlen("ixia:") + strlen(ns) + 1 + strlen(table) + 1 + key_len;
  if (plain_len <= PLAIN_KEY_MAX && key_is_plain_safe(key, key_len)) {
    GString *s = g_string_sized_new(plain_len + 1);
    g_string_append_printf(s, "ixia:%s:%s:", ns, table);
    g_string_append_len(s, key, (gssize)key_len);
    return g_string_free(s, FALSE);
  }
  hex128(key, key_len, hex);
  return g_strdup_printf("ixia:#:%s:%s:%s", ns, table, hex);
}

/* ---- the one place memcached_return_t is interpreted ---------------------- */

/* Failures that say the server (or the path to it) is unhealthy, as opposed
 * to a refusal of this one request (value too big, server out of memory). */
static gboolean rc_is_connection_failure(memcached_return_t rc) {
  switch (rc) {
  case MEMCACHED_TIMEOUT:
  case MEMCACHED_CONNECTION_FAILURE:
  case MEMCACHED_CONNECTION_SOCKET_CREATE_FAILURE:
  case MEMCACHED_HOST_LOOKUP_FAILURE:
  case MEMCACHED_WRITE_FAILURE:
  case MEMCACHED_READ_FAILURE:
  case MEMCACHED_UNKNOWN_READ_FAILURE:
  case MEMCACHED_PROTOCOL_ERROR:
  case MEMCACHED_ERRNO:
  case MEMCACHED_PARTIAL_READ:
  case MEMCACHED_SERVER_TEMPORARILY_DISABLED:
  case MEMCACHED_SERVER_MARKED_DEAD:
    return TRUE;
  default:
    return FALSE;
  }
}

void ixia_cache_server_mark_down(ixia_cache_t *c, server_t *s, const char *why) {
  gint64 prev = atomic_exchange(&s->down_until, g_get_monotonic_time() + c->retry_us);
  if (prev == 0)
    IXIA_WARN("cache: memcached %s failed (%s); skipping it for %" G_GINT64_FORMAT " s", s->name,
              why, c->retry_us / G_USEC_PER_SEC);
}

void ixia_cache_server_mark_up(server_t *s) {
  if (atomic_load_explicit(&s->down_until, memory_order_relaxed) == 0) return;
  if (atomic_exchange(&s->down_until, 0) != 0)
    IXIA_INFO("cache: memcached %s answers again", s->name);
}

/* TRUE when a call may go to s now. Past the retry timeout exactly one caller
 * wins the right to probe (by pushing the deadline out again); the others
 * keep skipping until that probe marks the server up. */
gboolean ixia_cache_server_usable(ixia_cache_t *c, server_t *s) {
  gint64 until = atomic_load_explicit(&s->down_until, memory_order_relaxed);
  if (until == 0) return TRUE;
  gint64 now = g_get_monotonic_time();
  if (now < until) return FALSE;
  return atomic_compare_exchange_strong(&s->down_until, &until, now + c->retry_us);
}

/* Classifies rc. Returns TRUE for the outcomes callers branch on (success,
 * not found, not stored, CAS mismatch). Otherwise logs (rate-limited), marks
 * the server down on a connection-level failure, and drops mc's connections
 * so that a late reply is never read as the answer to a later request;
 * returns FALSE. Callers only count: the API's answer to a failure is always
 * "use the store", so no error object travels further. */
static gboolean mc_check(ixia_cache_t *c, memcached_st *mc, server_t *s, memcached_return_t rc,
                         const char *op) {
  switch (rc) {
  case MEMCACHED_SUCCESS:
  case MEMCACHED_STORED:
  case MEMCACHED_DELETED:
  case MEMCACHED_END:
  case MEMCACHED_NOTFOUND:
  case MEMCACHED_NOTSTORED:
  case MEMCACHED_DATA_EXISTS:
    if (s) ixia_cache_server_mark_up(s);
    return TRUE;
  default:
    break;
  }
  /* The handle's message names host and cause, when it is about this rc. */
  const char *detail = mc && memcached_last_error(mc) == rc ? memcached_last_error_message(mc)
                                                            : memcached_strerror(mc, rc);
  char *why = g_strdup_printf("%s: %s", op, detail);
  if (rc_is_connection_failure(rc) && s) {
    ixia_cache_server_mark_down(c, s, why);
  } else {
    gint64 now = g_get_monotonic_time();
    gint64 last = atomic_load_explicit(&c->last_warn_us, memory_order_relaxed);
    if (now - last >= G_USEC_PER_SEC &&
        atomic_compare_exchange_strong(&c->last_warn_us, &last, now))
      IXIA_WARN("cache: memcached %s: %s", s ? s->name : "(pool)", why);
    else
      IXIA_DEBUG("cache: memcached %s: %s", s ? s->name : "(pool)", why);
  }
  g_free(why);
  if (mc) memcached_quit(mc);
  return FALSE;
}

/* ---- connections ------------------------------------------------------------ */

typedef struct {
  memcached_st *mc;
  server_t *server;
} conn_t;

static void slot_put(ixia_cache_t *c) {
  g_mutex_lock(&c->pool_lock);
  c->pool_free++;
  g_cond_signal(&c->pool_cond);
  g_mutex_unlock(&c->pool_lock);
}

/* Takes a pooled connection for mkey, or fails at once when the key's server
 * is marked down, or after cache.timeout_ms when the pool stays empty. */
static gboolean conn_acquire(ixia_cache_t *c, const char *mkey, conn_t *out) {
  gint64 deadline = g_get_monotonic_time() + c->timeout_us;
  g_mutex_lock(&c->pool_lock);
  while (c->pool_free == 0)
    if (!g_cond_wait_until(&c->pool_cond, &c->pool_lock, deadline)) break;
  gboolean got = c->pool_free > 0;
  if (got) c->pool_free--;
  g_mutex_unlock(&c->pool_lock);
  if (!got) {
    mc_check(c, NULL, NULL, MEMCACHED_TIMEOUT, "waiting for a pooled connection (cache.pool_size)");
    return FALSE;
  }

  memcached_return_t rc;
  /* Never blocks: holding a slot means a handle is free or may be cloned. */
  memcached_st *mc = memcached_pool_fetch(c->pool, NULL, &rc);
  if (!mc) {
    mc_check(c, NULL, NULL, rc == MEMCACHED_SUCCESS ? MEMCACHED_MEMORY_ALLOCATION_FAILURE : rc,
             "memcached_pool_fetch");
    goto fail;
  }
  uint32_t idx = memcached_generate_hash(mc, mkey, strlen(mkey));
  if (idx >= c->n_servers) {
    memcached_pool_release(c->pool, mc);
    mc_check(c, NULL, NULL, MEMCACHED_FAILURE, "server index out of range");
    goto fail;
  }
  server_t *s = &c->servers[idx];
  if (!ixia_cache_server_usable(c, s)) {
    memcached_pool_release(c->pool, mc);
    goto fail;
  }
  /* Our shared state decides when to retry; clear the handle's own backoff
   * so it does not refuse a server the others already found healthy. */
  memcached_instance_next_retry(memcached_server_instance_by_position(mc, idx), 0);
  out->mc = mc;
  out->server = s;
  return TRUE;

fail:
  slot_put(c);
  return FALSE;
}

static void conn_release(ixia_cache_t *c, conn_t *conn) {
  memcached_pool_release(c->pool, conn->mc);
  slot_put(c);
}

/* gets: a copy of the value (g_free) and its CAS. Returns
 * FALSE on failure; *value is NULL when the key is absent. */
static gboolean mc_gets(ixia_cache_t *c, conn_t *conn, const char *mkey, char **value,
                        size_t *len, uint64_t *cas) {
  *value = NULL;
  size_t klen = strlen(mkey);
  const char *keys[1] = {mkey};
  memcached_return_t rc = memcached_mget(conn->mc, keys, &klen, 1);
  if (!mc_check(c, conn->mc, conn->server, rc, "gets")) return FALSE;
  /* Caller-owned storage: memcached_fetch_result() frees a heap result
   * itself when the reply ends, which would make our own free a double one. */
  memcached_result_st res;
  if (!memcached_result_create(conn->mc, &res))
    return mc_check(c, conn->mc, conn->server, MEMCACHED_MEMORY_ALLOCATION_FAILURE, "gets");
  gboolean ok = TRUE;
  /* Read until END even after the hit, or the reply's tail would be left on
   * the connection for the next request. */
  while (memcached_fetch_result(conn->mc, &res, &rc)) {
    if (!*value) {
      *len = memcached_result_length(&res);
      *value = g_memdup2(memcached_result_value(&res), *len ? *len : 1);
      *cas = memcached_result_cas(&res);
    }
  }
  if (!mc_check(c, conn->mc, conn->server, rc, "gets")) {
    g_free(*value);
    *value = NULL;
    ok = FALSE;
  }
  memcached_result_free(&res);
  return ok;
}

static gboolean is_our_lease(const char *value, size_t len, const ixia_cache_lease_t *lease) {
  return value && len == LEASE_BYTES && value[0] == TAG_LEASE &&
         memcmp(value + 1, lease->token, TOKEN_BYTES) == 0;
}

/* ---- public API ------------------------------------------------------------- */

static gboolean parse_servers(ixia_cache_t *c, const char *spec, ixia_error_t **err) {
  gchar **parts = g_strsplit(spec, ",", -1);
  GArray *servers = g_array_new(FALSE, TRUE, sizeof(server_t));
  gboolean ok = TRUE;
  for (gchar **p = parts; *p && ok; p++) {
    char *entry = g_strstrip(*p);
    if (!*entry) continue;
    char *orig = g_strdup(entry); /* entry is cut up below */
    char *host = entry;
    const char *port_str = NULL;
    char *colon = strrchr(entry, ':');
    if (entry[0] == '[') { /* [v6addr]:port */
      char *close = strchr(entry, ']');
      if (!close || (close[1] != '\0' && close[1] != ':')) {
        ok = ixia_error_set(err, IXIA_EINVAL, "cache.servers: bad entry '%s'", orig);
        g_free(orig);
        break;
      }
      *close = '\0';
      host = entry + 1;
      port_str = close[1] == ':' ? close + 2 : NULL;
    } else if (colon) {
      *colon = '\0';
      port_str = colon + 1;
    }
    guint64 port = MEMCACHED_DEFAULT_PORT;
    if (!*host || (port_str && !g_ascii_string_to_unsigned(port_str, 10, 1, 65535, &port, NULL))) {
      ok = ixia_error_set(err, IXIA_EINVAL,
                          "cache.servers: bad entry '%s' (expected host:port or [v6addr]:port, "
                          "port 1-65535)",
                          orig);
      g_free(orig);
      break;
    }
    memcached_return_t rc = memcached_server_add_with_weight(c->master, host, (in_port_t)port, 1);
    if (rc != MEMCACHED_SUCCESS) {
      ok = ixia_error_set(err, IXIA_EINVAL, "cache.servers: cannot add '%s': %s", orig,
                          memcached_strerror(c->master, rc));
      g_free(orig);
      break;
    }
    g_free(orig);
    server_t s = {.name = g_strdup_printf("%s:%" G_GUINT64_FORMAT, host, port),
                  .host = g_strdup(host), .port = (guint16)port};
    g_array_append_val(servers, s);
  }
  g_strfreev(parts);
  c->n_servers = servers->len;
  c->servers = (server_t *)(void *)g_array_free(servers, FALSE);
  return ok;
}

static gboolean configure(ixia_cache_t *c, ixia_error_t **err) {
  gint64 timeout_ms = c->timeout_us / 1000;
  const struct {
    memcached_behavior_t flag;
    uint64_t value;
  } behaviors[] = {
      /* Text protocol: memcached deprecates the binary one; CAS (gets/cas)
       * is what guards backfills. */
      {MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 0},
      {MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1},
      {MEMCACHED_BEHAVIOR_VERIFY_KEY, 1},
      /* Deletes must wait for memcached's answer. */
      {MEMCACHED_BEHAVIOR_NOREPLY, 0},
      {MEMCACHED_BEHAVIOR_BUFFER_REQUESTS, 0},
      {MEMCACHED_BEHAVIOR_TCP_NODELAY, 1},
      /* libketama-compatible consistent hashing (MD5, weight 1 each): adding
       * a server moves only ~1/n of the keys. Sets the key hash too. */
      {MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1},
      /* Never remap a down server's keys elsewhere (see cache.h). */
      {MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 0},
      {MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, (uint64_t)timeout_ms},
      {MEMCACHED_BEHAVIOR_POLL_TIMEOUT, (uint64_t)timeout_ms},
      {MEMCACHED_BEHAVIOR_SND_TIMEOUT, (uint64_t)c->timeout_us}, /* µs */
      {MEMCACHED_BEHAVIOR_RCV_TIMEOUT, (uint64_t)c->timeout_us}, /* µs */
      /* libmemcached's own per-handle backoff, tripped by the first failure.
       * It only matters between our checks: conn_acquire() lets the shared
       * per-server state decide when a server is retried. */
      {MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, (uint64_t)(c->retry_us / G_USEC_PER_SEC)},
      {MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 1},
      {MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT, 1},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(behaviors); i++) {
    memcached_return_t rc = memcached_behavior_set(c->master, behaviors[i].flag, behaviors[i].value);
    if (rc != MEMCACHED_SUCCESS)
      return ixia_error_set(err, IXIA_EINTERNAL, "memcached_behavior_set(%d): %s",
                            (int)behaviors[i].flag, memcached_strerror(c->master, rc));
  }
  return TRUE;
}

static void job_run(gpointer data, gpointer user_data);

ixia_cache_t *ixia_cache_new(const ixia_config_t *cfg, ixia_error_t **err) {
  g_return_val_if_fail(cfg, NULL);
  ixia_cache_t *c = g_new0(ixia_cache_t, 1);
  g_mutex_init(&c->pool_lock);
  g_cond_init(&c->pool_cond);
  g_mutex_init(&c->jobs_lock);
  g_cond_init(&c->jobs_cond);
  c->timeout_us = ixia_config_int(cfg, "cache.timeout_ms") * 1000;
  c->retry_us = ixia_config_int(cfg, "cache.retry_timeout_s") * G_USEC_PER_SEC;
  c->default_ttl = (time_t)ixia_config_int(cfg, "cache.default_ttl_seconds");
  c->lease_ttl = (time_t)ixia_config_int(cfg, "cache.lease_ttl_seconds");
  c->backfill_pause_ms = ixia_test_hook("BACKFILL_PAUSE_MS", 0);
  c->backfill_queue_max = ixia_config_int(cfg, "cache.backfill_queue_max");
  c->inval_retry_max = ixia_config_int(cfg, "cache.invalidation_retry_max");
  gint64 pool_size = ixia_config_int(cfg, "cache.pool_size");
  gint64 threads = ixia_config_int(cfg, "cache.backfill_threads");

  c->master = memcached_create(NULL);
  if (!c->master) {
    ixia_error_set(err, IXIA_EINTERNAL, "memcached_create failed");
    goto fail;
  }
  if (!configure(c, err)) goto fail;
  if (!parse_servers(c, ixia_config_str(cfg, "cache.servers"), err)) goto fail;
  if (c->n_servers == 0) {
    c->disabled = TRUE;
    IXIA_INFO("cache: disabled (cache.servers is empty)");
    return c;
  }

  c->pool = memcached_pool_create(c->master, 1, (uint32_t)pool_size);
  if (!c->pool) {
    ixia_error_set(err, IXIA_EINTERNAL, "memcached_pool_create failed");
    goto fail;
  }
  c->pool_free = pool_size;

  GError *gerr = NULL;
  c->workers = g_thread_pool_new(job_run, c, (gint)threads, TRUE, &gerr);
  if (!c->workers) {
    ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "cache backfill threads");
    goto fail;
  }
  if (!ixia_cache_invalidator_start(c, err)) goto fail;
  return c;

fail:
  ixia_cache_destroy(c);
  return NULL;
}

void ixia_cache_destroy(ixia_cache_t *c) {
  if (!c) return;
  ixia_cache_invalidator_stop(c);
  if (c->workers) {
    g_mutex_lock(&c->jobs_lock);
    c->closing = TRUE;
    g_cond_broadcast(&c->jobs_cond); /* cuts test pauses short */
    g_mutex_unlock(&c->jobs_lock);
    /* Queued jobs still run, see closing and only free themselves. */
    g_thread_pool_free(c->workers, FALSE, TRUE);
  }
  if (c->pool) memcached_pool_destroy(c->pool); /* returns master, freed below */
  if (c->master) memcached_free(c->master);
  for (guint i = 0; i < c->n_servers; i++) {
    g_free(c->servers[i].name);
    g_free(c->servers[i].host);
  }
  g_free(c->servers);
  g_mutex_clear(&c->pool_lock);
  g_cond_clear(&c->pool_cond);
  g_mutex_clear(&c->jobs_lock);
  g_cond_clear(&c->jobs_cond);
  g_free(c);
}

gboolean ixia_cache_disabled(const ixia_cache_t *c) {
  g_return_val_if_fail(c, TRUE);
  return c->disabled;
}

ixia_cache_result_t ixia_cache_get(ixia_cache_t *c, const char *ns, const char *table,
                                   const char *key, size_t key_len, gint64 *version, char **json,
                                   size_t *len) {
  g_return_val_if_fail(c && ns && table && (key || !key_len), IXIA_CACHE_ERROR);
  g_return_val_if_fail(version && json && len, IXIA_CACHE_ERROR);
  if (c->disabled) {
    COUNT(c, misses);
    return IXIA_CACHE_MISS;
  }
  char *mkey = ixia_cache_key(ns, table, key, key_len);
  conn_t conn;
  if (!conn_acquire(c, mkey, &conn)) {
    g_free(mkey);
    COUNT(c, errors);
    return IXIA_CACHE_ERROR;
  }
  size_t vlen = 0;
  uint32_t flags = 0;
  memcached_return_t rc;
  char *value = memcached_get(conn.mc, mkey, strlen(mkey), &vlen, &flags, &rc);
  gboolean ok = mc_check(c, conn.mc, conn.server, rc, "get");
  conn_release(c, &conn);

  ixia_cache_result_t result = IXIA_CACHE_MISS;
  if (!ok) {
    result = IXIA_CACHE_ERROR;
  } else if (value && vlen >= VALUE_HEADER_BYTES && value[0] == TAG_VALUE) {
    guint64 be;
    memcpy(&be, value + 1, 8);
    *version = (gint64)GUINT64_FROM_BE(be);
    *len = vlen - VALUE_HEADER_BYTES;
    *json = g_malloc(*len + 1);
    memcpy(*json, value + VALUE_HEADER_BYTES, *len);
    (*json)[*len] = '\0';
    result = IXIA_CACHE_HIT;
  } else if (value && !(vlen == LEASE_BYTES && value[0] == TAG_LEASE)) {
    IXIA_DEBUG("cache: ignoring undecodable value under %s (%zu bytes)", mkey, vlen);
  }
  free(value); /* libmemcached's default allocator is malloc */
  g_free(mkey);
  if (result == IXIA_CACHE_HIT)
    COUNT(c, hits);
  else if (result == IXIA_CACHE_MISS)
    COUNT(c, misses);
  else
    COUNT(c, errors);
  return result;
}

/* Decodes a cached value into d; FALSE for anything but a document. */
static gboolean decode_value(const char *value, size_t vlen, ixia_cache_doc_t *d) {
  if (!value || vlen < VALUE_HEADER_BYTES || value[0] != TAG_VALUE) return FALSE;
  guint64 be;
  memcpy(&be, value + 1, 8);
  d->version = (gint64)GUINT64_FROM_BE(be);
  d->len = vlen - VALUE_HEADER_BYTES;
  d->json = g_malloc(d->len + 1);
  memcpy(d->json, value + VALUE_HEADER_BYTES, d->len);
  d->json[d->len] = '\0';
  return TRUE;
}

void ixia_cache_get_many(ixia_cache_t *c, const ixia_cache_keyref_t *keys, guint n,
                         ixia_cache_doc_t *out) {
  memset(out, 0, sizeof *out * n);
  if (n == 0) return;
  for (guint i = 0; i < n; i++) out[i].result = IXIA_CACHE_MISS;
  if (c->disabled) {
    atomic_fetch_add_explicit(&c->misses, n, memory_order_relaxed);
    return;
  }
  char **mkeys = g_new0(char *, n);
  for (guint i = 0; i < n; i++)
    mkeys[i] = ixia_cache_key(keys[i].ns, keys[i].table, keys[i].key, keys[i].key_len);
  conn_t conn;
  if (!conn_acquire(c, mkeys[0], &conn)) {
    for (guint i = 0; i < n; i++) out[i].result = IXIA_CACHE_ERROR;
  } else {
    /* Keys of servers marked down are errors at once; the rest go in one
     * multi-key get (one request per server, answered together). */
    GHashTable *at = g_hash_table_new(g_str_hash, g_str_equal);
    const char **ask = g_new(const char *, n);
    size_t *lens = g_new(size_t, n);
    guint m = 0;
    for (guint i = 0; i < n; i++) {
      uint32_t idx = memcached_generate_hash(conn.mc, mkeys[i], strlen(mkeys[i]));
      if (idx >= c->n_servers || !ixia_cache_server_usable(c, &c->servers[idx])) {
        out[i].result = IXIA_CACHE_ERROR;
        continue;
      }
      g_hash_table_insert(at, mkeys[i], GUINT_TO_POINTER(i + 1));
      ask[m] = mkeys[i];
      lens[m++] = strlen(mkeys[i]);
    }
    memcached_return_t rc = m ? memcached_mget(conn.mc, ask, lens, m) : MEMCACHED_SUCCESS;
    gboolean ok = mc_check(c, conn.mc, conn.server, rc, "mget");
    memcached_result_st *res = NULL;
    while (ok && m && (res = memcached_fetch_result(conn.mc, res, &rc))) {
      char *k = g_strndup(memcached_result_key_value(res), memcached_result_key_length(res));
      guint i = GPOINTER_TO_UINT(g_hash_table_lookup(at, k));
      g_free(k);
      if (i && decode_value(memcached_result_value(res), memcached_result_length(res), &out[i - 1]))
        out[i - 1].result = IXIA_CACHE_HIT;
    }
    if (res) memcached_result_free(res);
    if (ok && m && rc != MEMCACHED_END && rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND)
      ok = mc_check(c, conn.mc, conn.server, rc, "mget fetch");
    if (!ok)
      for (guint i = 0; i < n; i++)
        if (out[i].result != IXIA_CACHE_HIT) out[i].result = IXIA_CACHE_ERROR;
    conn_release(c, &conn);
    g_hash_table_destroy(at);
    g_free(ask);
    g_free(lens);
  }
  for (guint i = 0; i < n; i++) {
    if (out[i].result == IXIA_CACHE_HIT) COUNT(c, hits);
    else if (out[i].result == IXIA_CACHE_MISS) COUNT(c, misses);
    else COUNT(c, errors);
    g_free(mkeys[i]);
  }
  g_free(mkeys);
}

static void random_token(guint8 token[TOKEN_BYTES]) {
  static _Atomic guint64 counter;
  if (getrandom(token, TOKEN_BYTES, GRND_NONBLOCK) == TOKEN_BYTES) return;
  /* No kernel entropy yet: still unique within the process (counter) and
   * very likely across processes (pid, time, PRNG). */
  guint64 parts[2] = {atomic_fetch_add(&counter, 1) ^ ((guint64)getpid() << 40),
                      (guint64)g_get_real_time() ^ ((guint64)g_random_int() << 32)};
  memcpy(token, parts, TOKEN_BYTES);
}

ixia_cache_lease_t *ixia_cache_lease(ixia_cache_t *c, const char *ns, const char *table,
                                     const char *key, size_t key_len) {
  g_return_val_if_fail(c && ns && table && (key || !key_len), NULL);
  if (c->disabled) return NULL;
  ixia_cache_lease_t *lease = g_new0(ixia_cache_lease_t, 1);
  lease->cache = c;
  lease->mkey = ixia_cache_key(ns, table, key, key_len);
  random_token(lease->token);
  char value[LEASE_BYTES];
  value[0] = TAG_LEASE;
  memcpy(value + 1, lease->token, TOKEN_BYTES);

  conn_t conn;
  gboolean granted = FALSE;
  if (conn_acquire(c, lease->mkey, &conn)) {
    memcached_return_t rc = memcached_add(conn.mc, lease->mkey, strlen(lease->mkey), value,
                                          sizeof value, c->lease_ttl, 0);
    if (mc_check(c, conn.mc, conn.server, rc, "add lease"))
      granted = rc == MEMCACHED_SUCCESS;
    else
      COUNT(c, errors);
    conn_release(c, &conn);
  } else {
    COUNT(c, errors);
  }
  if (!granted) {
    g_free(lease->mkey);
    g_free(lease);
    return NULL;
  }
  COUNT(c, leases);
  return lease;
}

static void lease_free(ixia_cache_lease_t *lease) {
  if (!lease) return;
  g_free(lease->mkey);
  g_free(lease);
}

static void job_free(job_t *job) {
  lease_free(job->lease);
  g_free(job->value);
  g_free(job);
}

/* Queues job, or frees it when the queue is full or the cache closing. */
static void job_submit(ixia_cache_t *c, job_t *job) {
  g_mutex_lock(&c->jobs_lock);
  gboolean take = !c->closing && c->pending < c->backfill_queue_max;
  if (take) c->pending++;
  g_mutex_unlock(&c->jobs_lock);
  if (!take) {
    if (job->kind == JOB_BACKFILL) COUNT(c, backfills_dropped);
    job_free(job);
    return;
  }
  GError *gerr = NULL;
  if (!g_thread_pool_push(c->workers, job, &gerr)) {
    ixia_error_t *e = NULL;
    ixia_error_from_gerror(&e, gerr, IXIA_EINTERNAL, "cache: queueing a backfill");
    IXIA_WARN("%s", e->message);
    ixia_error_destroy(e);
    /* GLib may still run a pushed job when only spawning a thread failed;
     * it cannot be told apart here, so treat it as queued. */
  }
}

void ixia_cache_backfill(ixia_cache_t *c, ixia_cache_lease_t *lease, gint64 version,
                         const char *json, size_t len, gint64 ttl_seconds) {
  g_return_if_fail(c && (json || len == 0));
  if (!lease) return;
  g_return_if_fail(lease->cache == c);
  job_t *job = g_new0(job_t, 1);
  job->kind = JOB_BACKFILL;
  job->lease = lease;
  job->value_len = VALUE_HEADER_BYTES + len;
  job->value = g_malloc(job->value_len);
  job->value[0] = TAG_VALUE;
  guint64 be = GUINT64_TO_BE((guint64)version);
  memcpy(job->value + 1, &be, 8);
  if (len) memcpy(job->value + VALUE_HEADER_BYTES, json, len);
  if (ttl_seconds <= 0) ttl_seconds = c->default_ttl;
  job->ttl = (time_t)MIN(ttl_seconds, (gint64)MAX_TTL_SECONDS);
  job_submit(c, job);
}

void ixia_cache_lease_release(ixia_cache_lease_t *lease) {
  if (!lease) return;
  job_t *job = g_new0(job_t, 1);
  job->kind = JOB_RELEASE;
  job->lease = lease;
  job_submit(lease->cache, job);
}

static gboolean is_closing(ixia_cache_t *c) {
  g_mutex_lock(&c->jobs_lock);
  gboolean closing = c->closing;
  g_mutex_unlock(&c->jobs_lock);
  return closing;
}

/* Sleeps the test pause; FALSE if the cache started closing meanwhile. */
static gboolean job_pause(ixia_cache_t *c) {
  g_mutex_lock(&c->jobs_lock);
  if (c->backfill_pause_ms > 0) {
    gint64 deadline = g_get_monotonic_time() + c->backfill_pause_ms * 1000;
    while (!c->closing && g_cond_wait_until(&c->jobs_cond, &c->jobs_lock, deadline)) {
    }
  }
  gboolean go = !c->closing;
  g_mutex_unlock(&c->jobs_lock);
  return go;
}

static void job_execute(ixia_cache_t *c, job_t *job) {
  ixia_cache_lease_t *lease = job->lease;
  conn_t conn;
  if (!conn_acquire(c, lease->mkey, &conn)) {
    COUNT(c, errors);
    return;
  }
  char *current = NULL;
  size_t cur_len = 0;
  uint64_t cas = 0;
  if (!mc_gets(c, &conn, lease->mkey, &current, &cur_len, &cas)) {
    COUNT(c, errors);
  } else if (!is_our_lease(current, cur_len, lease)) {
    /* A writer deleted the key (or its lease expired and someone else took
     * one) after we read the store: our value may predate that write. */
    if (job->kind == JOB_BACKFILL) COUNT(c, backfills_stale);
  } else if (job->kind == JOB_BACKFILL) {
    memcached_return_t rc = memcached_cas(conn.mc, lease->mkey, strlen(lease->mkey), job->value,
                                          job->value_len, job->ttl, 0, cas);
    if (!mc_check(c, conn.mc, conn.server, rc, "cas backfill"))
      COUNT(c, errors);
    else if (rc == MEMCACHED_SUCCESS || rc == MEMCACHED_STORED)
      COUNT(c, backfills);
    else /* DATA_EXISTS / NOTFOUND: touched between our gets and cas */
      COUNT(c, backfills_stale);
  } else {
    /* Release. A writer may delete and another reader lease between our
     * gets and this delete; removing that lease only costs it a backfill. */
    memcached_return_t rc = memcached_delete(conn.mc, lease->mkey, strlen(lease->mkey), 0);
    if (!mc_check(c, conn.mc, conn.server, rc, "delete lease")) COUNT(c, errors);
  }
  g_free(current);
  conn_release(c, &conn);
}

static void job_run(gpointer data, gpointer user_data) {
  ixia_cache_t *c = user_data;
  job_t *job = data;
  if (job->kind == JOB_BACKFILL ? job_pause(c) : !is_closing(c))
    job_execute(c, job);
  else if (job->kind == JOB_BACKFILL)
    COUNT(c, backfills_dropped);
  job_free(job);

  g_mutex_lock(&c->jobs_lock);
  if (--c->pending == 0) g_cond_broadcast(&c->jobs_cond);
  g_mutex_unlock(&c->jobs_lock);
}

gboolean ixia_cache_wait_idle(ixia_cache_t *c, gint64 timeout_ms) {
  g_return_val_if_fail(c, FALSE);
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
  g_mutex_lock(&c->jobs_lock);
  while (c->pending > 0)
    if (!g_cond_wait_until(&c->jobs_cond, &c->jobs_lock, deadline)) break;
  gboolean idle = c->pending == 0;
  g_mutex_unlock(&c->jobs_lock);
  return idle;
}

void ixia_cache_get_stats(ixia_cache_t *c, ixia_cache_stats_t *out) {
  g_return_if_fail(c && out);
#define LOAD(f) out->f = atomic_load_explicit(&c->f, memory_order_relaxed)
  LOAD(hits);
  LOAD(misses);
  LOAD(errors);
  LOAD(leases);
  LOAD(backfills);
  LOAD(backfills_stale);
  LOAD(backfills_dropped);
  LOAD(invalidations);
  LOAD(invalidation_failures);
  out->invalidation_rounds = atomic_load_explicit(&c->inval_rounds, memory_order_relaxed);
  out->invalidations_retried = atomic_load_explicit(&c->inval_retried, memory_order_relaxed);
  out->invalidation_retries_dropped = atomic_load_explicit(&c->inval_retry_drops, memory_order_relaxed);
  out->invalidation_retries_pending = atomic_load_explicit(&c->inval_retry_pending, memory_order_relaxed);
  g_mutex_lock(&c->jobs_lock);
  out->backfills_pending = (guint64)c->pending;
  g_mutex_unlock(&c->jobs_lock);
#undef LOAD
}

const char *const *ixia_cache_memcached_flags(void) {
  static const char *const flags[] = {"-l", "127.0.0.1", "-U", "0", "-I", "2m", NULL};
  return flags;
}
