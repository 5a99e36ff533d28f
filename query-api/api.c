/* The API logic of ixia-query-api (api.h): validation, schemas, the write
 * path, the get paths and stats.
 *
 * Writes are validated on the calling thread and handed to the store's
 * group commit; their answer and the cache invalidations of their group
 * come back through a callback, so no thread waits on an fdatasync. Gets
 * try the store's memory first, then memcached or the store's disk,
 * whichever the measured costs favour, and backfill the cache under a
 * lease. */
#include "api.h"

#include <stdatomic.h>
#include <errno.h>
#include <string.h>

#include "cache.h"
#include "json.h"
#include "log.h"
#include "server.h"
#include "testhook.h"
#include "replication.h"
#include "fanout.h"
#include "schema.h"
#include "thrift_util.h"
#include "timeutil.h"

typedef enum { GET_PATH_AUTO, GET_PATH_MEMCACHED, GET_PATH_STORE } get_path_t;

struct ixia_api {
  ixia_store_t *store;
  ixia_replication_t *replication;
  ixia_fanout_t *search;
  ixia_cache_t *cache;
  ixia_server_t *server;
  GRWLock schemas_lock;
  GHashTable *schemas; /* "ns\ttable" -> ixia_schema_t* */
  GMutex apply_lock;   /* one applySchema at a time: check, write, publish */
  gsize max_doc_bytes;
  gint max_depth;
  gsize max_key_bytes;
  guint max_batch_ops;
  guint max_get_keys;
  gsize scan_max_bytes; /* half of server.max_frame_bytes: a scan page fits an answer */
  gint64 started_at;
  gint64 cache_default_ttl;
  _Atomic guint64 cache_hits, cache_misses, cache_partial_misses;
  _Atomic guint64 memory_gets; /* answered from the store's memory, memcached not asked */
  gboolean memcached_first; /* test hook: skip the store's memory */
  /* Gets the store's memory cannot answer (cache.get_path): through
   * memcached, or straight from the store's disk, whichever costs less as
   * measured: moving averages (microseconds x 16) of a memcached multi-get
   * and of a store read per key. */
  get_path_t get_path;
  _Atomic gint64 mc_us16, disk_us16;
  _Atomic guint64 gets_from_disk, path_samples;
};

/* Every PATH_SAMPLE-th get takes the other path too, so its cost stays known. */
#define PATH_SAMPLE 64

static void ewma(_Atomic gint64 *avg16, gint64 us) {
  gint64 a = atomic_load_explicit(avg16, memory_order_relaxed);
  atomic_store_explicit(avg16, a ? a + (us * 16 - a) / 8 : us * 16, memory_order_relaxed);
}

/* Whether this get asks memcached before reading the store's disk. */
static gboolean via_memcached(ixia_api_t *api) {
  if (api->get_path == GET_PATH_MEMCACHED) return TRUE;
  if (api->get_path == GET_PATH_STORE) return FALSE;
  gint64 mc = atomic_load_explicit(&api->mc_us16, memory_order_relaxed);
  gint64 disk = atomic_load_explicit(&api->disk_us16, memory_order_relaxed);
  gboolean cheaper = mc > 0 && (disk == 0 || mc < disk);
  /* Unmeasured paths are tried; a sample keeps the other one measured. */
  if ((atomic_fetch_add_explicit(&api->path_samples, 1, memory_order_relaxed) + (1)) % PATH_SAMPLE == 0)
    return !cheaper;
  return mc == 0 || cheaper;
}

static char *table_id(const char *ns, const char *table) {
  return g_strdup_printf("%s\t%s", ns, table);
}

static void publish_schema(ixia_api_t *api, ixia_schema_t *s) {
  g_rw_lock_writer_lock(&api->schemas_lock);
  g_hash_table_replace(api->schemas, table_id(s->ns, s->table), s);
  g_rw_lock_writer_unlock(&api->schemas_lock);
}

static void load_schema_cb(const char *ns, const char *table, const char *json, size_t len,
                           gint64 version, gpointer user) {
  ixia_api_t *api = user;
  ixia_error_t *e = NULL;
  ixia_schema_t *s = ixia_schema_parse(json, len, &e);
  if (!s) {
    IXIA_ERROR("stored schema %s/%s is invalid: %s", ns, table, e->message);
    ixia_error_destroy(e);
    return;
  }
  s->version = version;
  publish_schema(api, s);
}

/* A new reference, or NULL with an error naming the table. */
static ixia_schema_t *lookup_schema(ixia_api_t *api, const char *ns, const char *table,
                                    ixia_error_t **err) {
  if (!ixia_name_valid(ns, "namespace", err) || !ixia_name_valid(table, "table", err)) return NULL;
  /* table_id's text on the stack (names are at most 64 bytes): every get
   * comes here, and a printf was 2.5% of a cached get's CPU. */
  char id[64 + 1 + 64 + 1];
  size_t nl = strlen(ns), tl = strlen(table);
  memcpy(id, ns, nl);
  id[nl] = '\t';
  memcpy(id + nl + 1, table, tl + 1);
  g_rw_lock_reader_lock(&api->schemas_lock);
  ixia_schema_t *s = g_hash_table_lookup(api->schemas, id);
  if (s) ixia_schema_ref(s);
  g_rw_lock_reader_unlock(&api->schemas_lock);
  if (!s)
    ixia_error_set(err, IXIA_ENOTFOUND,
                   "unknown table %s/%s: apply a schema for it first (ixia schema apply)", ns, table);
  return s;
}

static gboolean check_key(ixia_api_t *api, const char *key, ixia_error_t **err) {
  size_t n = key ? strlen(key) : 0;
  if (n == 0) return ixia_error_set(err, IXIA_EINVAL, "key is empty");
  if (n > api->max_key_bytes)
    return ixia_error_set(err, IXIA_ETOOLARGE,
                          "key is %zu bytes, over the limit of %zu bytes (limits.max_key_bytes)", n,
                          api->max_key_bytes);
  if (!g_utf8_validate(key, (gssize)n, NULL))
    return ixia_error_set(err, IXIA_EINVAL, "key is not valid UTF-8");
  return TRUE;
}

static gint64 acked_version(void *replication) { return ixia_replication_acked(replication); }

ixia_api_t *ixia_api_new(const ixia_config_t *cfg, ixia_error_t **err) {
  /* Before any thread: the generated types register lazily and unsafely. */
  ixia_thrift_init();
  ixia_api_t *api = g_new0(ixia_api_t, 1);
  g_rw_lock_init(&api->schemas_lock);
  g_mutex_init(&api->apply_lock);
  api->schemas = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify)ixia_schema_unref);
  api->max_doc_bytes = (gsize)ixia_config_int(cfg, "limits.max_doc_bytes");
  api->max_depth = (gint)ixia_config_int(cfg, "limits.max_json_depth");
  api->max_key_bytes = (gsize)ixia_config_int(cfg, "limits.max_key_bytes");
  api->max_batch_ops = (guint)ixia_config_int(cfg, "limits.max_batch_ops");
  api->max_get_keys = (guint)ixia_config_int(cfg, "limits.max_get_keys");
  api->scan_max_bytes = (gsize)ixia_config_int(cfg, "server.max_frame_bytes") / 2;
  api->started_at = g_get_monotonic_time();
  api->cache_default_ttl = ixia_config_int(cfg, "cache.default_ttl_seconds");
  /* The cache tests need memcached asked on every get. */
  api->memcached_first = ixia_test_hook("MEMCACHED_FIRST", 0) != 0;
  const char *path = ixia_config_str(cfg, "cache.get_path");
  if (g_strcmp0(path, "auto") == 0) api->get_path = GET_PATH_AUTO;
  else if (g_strcmp0(path, "memcached") == 0) api->get_path = GET_PATH_MEMCACHED;
  else if (g_strcmp0(path, "store") == 0) api->get_path = GET_PATH_STORE;
  else {
    ixia_error_set(err, IXIA_EINVAL, "cache.get_path: '%s' is none of auto, memcached, store", path);
    goto fail;
  }
  api->store = ixia_store_open(cfg, err);
  if (!api->store) goto fail;
  if (!ixia_store_foreach_schema(api->store, load_schema_cb, api, err)) goto fail;
  api->cache = ixia_cache_new(cfg, err);
  if (!api->cache) goto fail;
  api->replication = ixia_replication_new(cfg, api->store, err);
  if (!api->replication) goto fail;
  api->search = ixia_fanout_new(cfg, api->store, acked_version, api->replication, err);
  if (!api->search) goto fail;
  IXIA_INFO("loaded %u table schemas", g_hash_table_size(api->schemas));
  return api;
fail:
  ixia_api_destroy(api);
  return NULL;
}

void ixia_api_destroy(ixia_api_t *api) {
  if (!api) return;
  ixia_fanout_destroy(api->search);
  ixia_replication_destroy(api->replication);
  ixia_cache_destroy(api->cache);
  ixia_store_destroy(api->store);
  g_hash_table_destroy(api->schemas);
  g_rw_lock_clear(&api->schemas_lock);
  g_mutex_clear(&api->apply_lock);
  g_free(api);
}

void ixia_api_set_server(ixia_api_t *api, ixia_server_t *srv) { api->server = srv; }
guint ixia_api_max_batch_ops(const ixia_api_t *api) { return api->max_batch_ops; }
ixia_store_t *ixia_api_store(ixia_api_t *api) { return api->store; }

guint ixia_api_max_get_keys(const ixia_api_t *api) { return api->max_get_keys; }

typedef struct {
  ixia_schema_t *schema;
  cJSON *doc;
  char *json; /* compact text for PUT */
} prepared_t;

static gboolean prepare_op(ixia_api_t *api, const ixia_api_op_t *op, guint i, guint n,
                           prepared_t *p, ixia_write_op_t *w, ixia_error_t **err) {
  ixia_error_t *e = NULL;
  gboolean ok = TRUE;
  if (op->kind != IXIA_WRITE_PUT && op->kind != IXIA_WRITE_UPSERT && op->kind != IXIA_WRITE_DELETE)
    ok = ixia_error_set(&e, IXIA_EINVAL, "unknown operation kind %d", op->kind);
  ok = ok && (p->schema = lookup_schema(api, op->ns, op->table, &e)) != NULL;
  ok = ok && check_key(api, op->key, &e);
  if (ok && op->expected_version < -1)
    ok = ixia_error_set(&e, IXIA_EINVAL, "expected_version must be -1, 0 or a version");
  if (ok && op->kind != IXIA_WRITE_DELETE) {
    const char *json = op->json ? op->json : "";
    const ixia_json_limits_t jl = {api->max_doc_bytes, "limits.max_doc_bytes", api->max_depth,
                                   "limits.max_json_depth"};
    p->doc = ixia_json_parse_object(json, strlen(json), &jl, "document", &e);
    ok = p->doc && ixia_schema_check_doc(p->schema, p->doc, &e);
    if (ok && op->kind == IXIA_WRITE_PUT) p->json = ixia_json_print(p->doc);
  }
  if (!ok) {
    if (n > 1) ixia_error_prefix(e, "batch op %u", i);
    return ixia_error_propagate(err, e);
  }
  *w = (ixia_write_op_t){
      .kind = op->kind,
      .ns = op->ns,
      .table = op->table,
      .key = op->key,
      .key_len = strlen(op->key),
      .json = p->json,
      .json_len = p->json ? strlen(p->json) : 0,
      .doc = p->doc,
      .expected_version = op->expected_version,
      .ttl_seconds = p->schema->ttl_seconds,
  };
  return TRUE;
}

/* A write on its way: validated ops, then the store's group commit, then
 * the cache round, then the caller's callback. Every string the ops point
 * to is owned here. */
typedef struct {
  ixia_api_t *api;
  guint n;
  prepared_t *prep;
  ixia_write_op_t *w;
  char **strs; /* ns, table, key of each op */
  gint64 *versions;
  ixia_api_write_cb cb;
  gpointer user;
} write_ctx_t;

static void write_ctx_free(write_ctx_t *x) {
  for (guint i = 0; i < x->n; i++) {
    ixia_schema_unref(x->prep[i].schema);
    cJSON_Delete(x->prep[i].doc);
    g_free(x->prep[i].json);
  }
  /* Not g_strfreev: an operation without a table or key leaves a NULL
   * in the middle. */
  for (guint i = 0; i < 3 * x->n; i++) g_free(x->strs[i]);
  g_free(x->strs);
  g_free(x->prep);
  g_free(x->w);
  g_free(x->versions);
  g_free(x);
}

static void write_finish(write_ctx_t *x, ixia_error_t *err) {
  x->cb(x->user, err ? NULL : x->versions, err);
  write_ctx_free(x);
}

static void write_invalidated(gpointer user, guint failed) {
  (void)failed; /* counted by the cache; the keys are retried (cache/cache.h) */
  write_finish(user, NULL);
}

/* After the store write and before the acknowledgement: every cached copy
 * of the written keys goes, in the cache's group round (pipelined with the
 * other writes waiting). Deleting before the write as well is not needed:
 * a get that reads memcached between the write and this delete began before
 * the write was acknowledged, and a backfill racing the write loses its
 * lease to this delete. */
static void write_committed(gpointer user, ixia_error_t *err) {
  write_ctx_t *x = user;
  if (err) {
    write_finish(x, err);
    return;
  }
  ixia_cache_keyref_t *refs = g_new(ixia_cache_keyref_t, x->n);
  for (guint i = 0; i < x->n; i++)
    refs[i] = (ixia_cache_keyref_t){x->w[i].ns, x->w[i].table, x->w[i].key, x->w[i].key_len};
  guint n = x->n;
  ixia_cache_invalidate_many_async(x->api->cache, refs, n, write_invalidated, x);
  g_free(refs);
}

gboolean ixia_api_write_async(ixia_api_t *api, const ixia_api_op_t *ops, guint n,
                              ixia_api_write_cb cb, gpointer user, ixia_error_t **err) {
  if (n == 0) return ixia_error_set(err, IXIA_EINVAL, "batch is empty");
  if (n > api->max_batch_ops)
    return ixia_error_set(err, IXIA_ETOOLARGE,
                          "batch has %u operations, over the limit of %u (limits.max_batch_ops)", n,
                          api->max_batch_ops);
  write_ctx_t *x = g_new0(write_ctx_t, 1);
  x->api = api;
  x->n = n;
  x->prep = g_new0(prepared_t, n);
  x->w = g_new0(ixia_write_op_t, n);
  x->versions = g_new0(gint64, n);
  x->strs = g_new0(char *, 3 * n + 1);
  x->cb = cb;
  x->user = user;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < n; i++) {
    ixia_api_op_t op = ops[i];
    op.ns = x->strs[3 * i] = g_strdup(op.ns);
    op.table = x->strs[3 * i + 1] = g_strdup(op.table);
    op.key = x->strs[3 * i + 2] = g_strdup(op.key);
    ok = prepare_op(api, &op, i, n, &x->prep[i], &x->w[i], err);
  }
  if (!ok) {
    write_ctx_free(x);
    return FALSE;
  }
  ixia_store_write_async(api->store, x->w, n, x->versions, write_committed, x);
  return TRUE;
}

/* The synchronous form waits for the asynchronous one. */
typedef struct {
  GMutex lock;
  GCond cond;
  gboolean done;
  gint64 *versions;
  guint n;
  ixia_error_t *err;
} write_wait_t;

static void write_waited(gpointer user, const gint64 *versions, ixia_error_t *err) {
  write_wait_t *w = user;
  g_mutex_lock(&w->lock);
  if (versions) memcpy(w->versions, versions, w->n * sizeof *versions);
  w->err = err;
  w->done = TRUE;
  g_cond_signal(&w->cond);
  g_mutex_unlock(&w->lock);
}

gboolean ixia_api_write(ixia_api_t *api, const ixia_api_op_t *ops, guint n, gint64 *versions,
                        ixia_error_t **err) {
  write_wait_t w = {.versions = versions, .n = n};
  g_mutex_init(&w.lock);
  g_cond_init(&w.cond);
  gboolean ok = ixia_api_write_async(api, ops, n, write_waited, &w, err);
  if (ok) {
    g_mutex_lock(&w.lock);
    while (!w.done) g_cond_wait(&w.cond, &w.lock);
    g_mutex_unlock(&w.lock);
    if (w.err) ok = ixia_error_propagate(err, w.err);
  }
  g_mutex_clear(&w.lock);
  g_cond_clear(&w.cond);
  return ok;
}

/* The document text to return: all of it, or the requested fields. Sets
 * *complete FALSE when a requested field is absent. */
static char *shape_doc(const char *json, size_t len, const char *const *fields,
                       gboolean *complete, ixia_error_t **err) {
  *complete = TRUE;
  if (!fields || !fields[0]) return ixia_memdup0(json, len);
  guint nf = g_strv_length((gchar **)fields);
  /* Straight from the text when every field is there (the usual case). */
  GString *text = g_string_new(NULL);
  if (ixia_json_project_text(json, len, fields, nf, text, complete)) return g_string_free(text, FALSE);
  g_string_free(text, TRUE);
  cJSON *doc = ixia_json_parse_stored(json, len);
  if (!doc) {
    ixia_error_set(err, IXIA_EINTERNAL, "stored document is not valid JSON");
    return NULL;
  }
  cJSON *sub = ixia_json_project(doc, fields, g_strv_length((gchar **)fields), complete);
  char *out = ixia_json_print(sub);
  cJSON_Delete(sub);
  cJSON_Delete(doc);
  return out;
}

/* The cache TTL of a document: the table's, capped by the document's own
 * expiry (a cached copy must not outlive it). 0 = do not cache. */
static gint64 cache_ttl(ixia_api_t *api, const ixia_schema_t *schema, gint64 expire_at) {
  gint64 ttl = schema->cache_ttl_seconds > 0 ? schema->cache_ttl_seconds : api->cache_default_ttl;
  if (expire_at) ttl = MIN(ttl, expire_at - ixia_time_now());
  return ttl;
}

/* Sets out from a document's text, shaped to fields. */
static gboolean answer_doc(ixia_api_doc_t *out, gint64 version, const char *json, size_t len,
                           const char *const *fields, gboolean *complete, ixia_error_t **err) {
  out->json = shape_doc(json, len, fields, complete, err);
  out->found = out->json != NULL;
  out->version = version;
  return out->json != NULL;
}

gboolean ixia_api_multi_get(ixia_api_t *api, const char *ns, const char *table,
                            const char *const *keys, guint n, const char *const *fields,
                            ixia_api_doc_t *out, ixia_error_t **err) {
  memset(out, 0, sizeof *out * n);
  ixia_schema_t *schema = lookup_schema(api, ns, table, err);
  if (!schema) return FALSE;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < n; i++) ok = check_key(api, keys[i], err);
  for (const char *const *f = fields; ok && f && *f; f++) ok = ixia_field_path_valid(*f, err);
  /* 1. The store's memory (memtables, block cache): microseconds, on the
   * calling thread, strongly consistent. memcached only stands in front of
   * the disk reads (docs/OPERATIONS.md, "How a get is served"). */
  GArray *disk = g_array_new(FALSE, FALSE, sizeof(guint)); /* keys the memory could not answer */
  for (guint i = 0; ok && i < n; i++) {
    gboolean in_memory = FALSE, found = FALSE;
    gint64 v = 0;
    char *mem = NULL;
    size_t mlen = 0;
    if (!api->memcached_first)
      ok = ixia_store_get_in_memory(api->store, ns, table, keys[i], strlen(keys[i]), &in_memory,
                                    &found, &v, NULL, &mem, &mlen, err);
    if (ok && in_memory) {
      atomic_fetch_add_explicit(&api->memory_gets, 1, memory_order_relaxed);
      gboolean complete;
      if (found) ok = answer_doc(&out[i], v, mem, mlen, fields, &complete, err);
    } else if (ok) {
      g_array_append_val(disk, i);
    }
    g_free(mem);
  }
  if (ok && disk->len && ixia_server_on_io_thread()) {
    /* A disk read (or memcached) ahead: not on an I/O thread. */
    ixia_server_defer();
    ok = ixia_error_set(err, IXIA_EUNAVAILABLE, "get deferred to a worker");
  }
  /* 2. memcached, one multi-key get for all of them, when it costs less
   * than the store's disk (cache.get_path). */
  guint m = ok ? disk->len : 0;
  ixia_cache_keyref_t *refs = g_new(ixia_cache_keyref_t, m + 1);
  ixia_cache_doc_t *cached = g_new0(ixia_cache_doc_t, m + 1);
  for (guint j = 0; j < m; j++) {
    const char *k = keys[g_array_index(disk, guint, j)];
    refs[j] = (ixia_cache_keyref_t){ns, table, k, strlen(k)};
  }
  gboolean mc = m > 0 && via_memcached(api);
  if (mc) {
    gint64 t0 = g_get_monotonic_time();
    ixia_cache_get_many(api->cache, refs, m, cached);
    ewma(&api->mc_us16, g_get_monotonic_time() - t0);
  } else {
    for (guint j = 0; j < m; j++) cached[j].result = IXIA_CACHE_ERROR; /* not asked: no lease */
  }
  /* 3. The store for the rest, each under a lease taken before the read so
   * that a write in between cancels its backfill. */
  GArray *rest = g_array_new(FALSE, FALSE, sizeof(guint)); /* indexes into disk */
  ixia_cache_lease_t **leases = g_new0(ixia_cache_lease_t *, m + 1);
  for (guint j = 0; j < m; j++) {
    ixia_api_doc_t *o = &out[g_array_index(disk, guint, j)];
    if (cached[j].result == IXIA_CACHE_HIT) {
      gboolean complete;
      char *shaped = shape_doc(cached[j].json, cached[j].len, fields, &complete, NULL);
      if (shaped && complete) {
        atomic_fetch_add_explicit(&api->cache_hits, 1, memory_order_relaxed);
        *o = (ixia_api_doc_t){TRUE, cached[j].version, shaped};
        continue;
      }
      /* A cached entry lacking a requested field is a miss (Ixia's rule). */
      g_free(shaped);
      atomic_fetch_add_explicit(&api->cache_partial_misses, 1, memory_order_relaxed);
    }
    if (mc) atomic_fetch_add_explicit(&api->cache_misses, 1, memory_order_relaxed);
    else atomic_fetch_add_explicit(&api->gets_from_disk, 1, memory_order_relaxed);
    if (cached[j].result != IXIA_CACHE_ERROR)
      leases[j] = ixia_cache_lease(api->cache, ns, table, refs[j].key, refs[j].key_len);
    g_array_append_val(rest, j);
  }
  if (rest->len) {
    const char **rk = g_new(const char *, rest->len);
    size_t *rl = g_new(size_t, rest->len);
    ixia_store_doc_t *docs = g_new0(ixia_store_doc_t, rest->len);
    for (guint r = 0; r < rest->len; r++) {
      guint j = g_array_index(rest, guint, r);
      rk[r] = refs[j].key;
      rl[r] = refs[j].key_len;
    }
    gint64 t0 = g_get_monotonic_time();
    ok = ixia_store_multi_get(api->store, ns, table, rest->len, rk, rl, docs, err);
    ewma(&api->disk_us16, (g_get_monotonic_time() - t0) / rest->len);
    for (guint r = 0; r < rest->len; r++) {
      guint j = g_array_index(rest, guint, r);
      const ixia_store_doc_t *d = &docs[r];
      gint64 ttl = ok && d->found ? cache_ttl(api, schema, d->expire_at) : 0;
      if (leases[j] && ttl > 0)
        ixia_cache_backfill(api->cache, leases[j], d->version, d->json, d->json_len, ttl);
      else
        ixia_cache_lease_release(leases[j]);
      leases[j] = NULL;
      gboolean complete;
      if (ok && d->found)
        ok = answer_doc(&out[g_array_index(disk, guint, j)], d->version, d->json, d->json_len,
                        fields, &complete, err);
      g_free(docs[r].json);
    }
    g_free(rk);
    g_free(rl);
    g_free(docs);
  }
  for (guint j = 0; j < m; j++) {
    ixia_cache_lease_release(leases[j]);
    g_free(cached[j].json);
  }
  g_free(leases);
  g_free(cached);
  g_free(refs);
  g_array_free(rest, TRUE);
  g_array_free(disk, TRUE);
  ixia_schema_unref(schema);
  if (!ok)
    for (guint i = 0; i < n; i++) g_clear_pointer(&out[i].json, g_free);
  return ok;
}

gboolean ixia_api_get(ixia_api_t *api, const char *ns, const char *table, const char *key,
                      const char *const *fields, gboolean *found, gint64 *version, char **json,
                      ixia_error_t **err) {
  ixia_api_doc_t d;
  gboolean ok = ixia_api_multi_get(api, ns, table, &key, 1, fields, &d, err);
  *found = ok && d.found;
  if (version) *version = d.version;
  if (json) *json = d.json;
  else g_free(d.json);
  return ok;
}

gboolean ixia_api_apply_schema(ixia_api_t *api, const char *json, gint64 *version,
                               ixia_error_t **err) {
  ixia_schema_t *s = ixia_schema_parse(json ? json : "", json ? strlen(json) : 0, err);
  if (!s) return FALSE;
  g_mutex_lock(&api->apply_lock);
  ixia_schema_t *old = lookup_schema(api, s->ns, s->table, NULL);
  gboolean ok = !old || ixia_schema_check_evolution(old, s, err);
  if (ok) {
    ixia_write_op_t w = {.kind = IXIA_WRITE_SCHEMA, .ns = s->ns, .table = s->table, .key = "",
                         .json = s->json, .json_len = strlen(s->json), .expected_version = -1};
    ok = ixia_store_write(api->store, &w, 1, &s->version, err);
  }
  if (ok) {
    if (version) *version = s->version;
    IXIA_INFO("schema %s/%s applied at version %" G_GINT64_FORMAT, s->ns, s->table, s->version);
    publish_schema(api, s);
  } else {
    ixia_schema_unref(s);
  }
  ixia_schema_unref(old);
  g_mutex_unlock(&api->apply_lock);
  return ok;
}

char *ixia_api_get_schema(ixia_api_t *api, const char *ns, const char *table, ixia_error_t **err) {
  ixia_schema_t *s = lookup_schema(api, ns, table, err);
  if (!s) return NULL;
  char *out = g_strdup(s->json);
  ixia_schema_unref(s);
  return out;
}

typedef struct {
  ixia_store_doc_cb cb;
  gpointer user;
  gint left;
  gsize bytes_left;
} scan_state_t;

static gboolean scan_one(const char *key, size_t key_len, gint64 version, gint64 expire_at,
                         const char *json, size_t json_len, gpointer user) {
  scan_state_t *st = user;
  gsize size = key_len + json_len + 40; /* + the Document's framing */
  st->bytes_left = size < st->bytes_left ? st->bytes_left - size : 0;
  return st->cb(key, key_len, version, expire_at, json, json_len, st->user) && --st->left > 0 &&
         st->bytes_left > 0;
}

gboolean ixia_api_scan(ixia_api_t *api, const char *ns, const char *table, const char *after,
                       gint limit, ixia_store_doc_cb cb, gpointer user, ixia_error_t **err) {
  ixia_schema_t *schema = lookup_schema(api, ns, table, err);
  if (!schema) return FALSE;
  ixia_schema_unref(schema);
  if (limit < 1 || (guint)limit > api->max_get_keys)
    return ixia_error_set(err, IXIA_EINVAL, "scan limit %d is outside 1..%u (limits.max_get_keys)",
                          limit, api->max_get_keys);
  scan_state_t st = {cb, user, limit, api->scan_max_bytes};
  return ixia_store_scan(api->store, ns, table, after, after ? strlen(after) : 0, scan_one, &st, err);
}

static ixia_schema_t *query_schema_lookup(const char *ns, const char *table, void *ud,
                                          ixia_error_t **err) {
  return lookup_schema(ud, ns, table, err);
}

char *ixia_api_query(ixia_api_t *api, const char *request_json, ixia_error_t **err) {
  return ixia_fanout_run(api->search, request_json, strlen(request_json), query_schema_lookup, api,
                         err);
}

ixia_fanout_op_t *ixia_api_query_prepare(ixia_api_t *api, const char *request_json) {
  return ixia_fanout_prepare(api->search, request_json, strlen(request_json), query_schema_lookup,
                             api);
}

char *ixia_api_snapshot(ixia_api_t *api, const char *dir, ixia_error_t **err) {
  if (!dir || !g_path_is_absolute(dir)) {
    ixia_error_set(err, IXIA_EINVAL, "snapshot directory must be an absolute path on the API's host, got '%s'",
                   dir ? dir : "");
    return NULL;
  }
  if (g_file_test(dir, G_FILE_TEST_EXISTS)) {
    ixia_error_set(err, IXIA_EINVAL, "snapshot directory %s already exists", dir);
    return NULL;
  }
  char *parent = g_path_get_dirname(dir);
  int rc = g_mkdir_with_parents(parent, 0755);
  g_free(parent);
  if (rc != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot create the parent of %s: %s", dir, g_strerror(errno));
    return NULL;
  }
  gint64 version = 0;
  if (!ixia_store_checkpoint(api->store, dir, &version, err)) return NULL;
  IXIA_INFO("snapshot of the store at version %" G_GINT64_FORMAT " in %s", version, dir);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "dir", dir);
  cJSON_AddNumberToObject(o, "version", (double)version);
  char *out = ixia_json_print(o);
  cJSON_Delete(o);
  return out;
}

static gint cmp_strp(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "table_names" lists [namespace, table] pairs in order: verify walks
 * every table. */
static void add_table_names(ixia_api_t *api, cJSON *o) {
  GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);
  g_rw_lock_reader_lock(&api->schemas_lock);
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, api->schemas);
  while (g_hash_table_iter_next(&it, &k, NULL)) g_ptr_array_add(ids, g_strdup(k));
  g_rw_lock_reader_unlock(&api->schemas_lock);
  g_ptr_array_sort(ids, cmp_strp);
  cJSON *list = cJSON_AddArrayToObject(o, "table_names");
  for (guint i = 0; i < ids->len; i++) {
    char **parts = g_strsplit(g_ptr_array_index(ids, i), "\t", 2);
    cJSON *pair = cJSON_CreateArray();
    cJSON_AddItemToArray(pair, cJSON_CreateString(parts[0]));
    cJSON_AddItemToArray(pair, cJSON_CreateString(parts[1] ? parts[1] : ""));
    cJSON_AddItemToArray(list, pair);
    g_strfreev(parts);
  }
  g_ptr_array_unref(ids);
}

typedef struct {
  ixia_store_wal_cb cb;
  gpointer user;
  gboolean any;
} wal_since_t;

static gboolean wal_since_one(gint64 first, gint64 last, const char *data, size_t len,
                              gpointer user) {
  wal_since_t *w = user;
  w->any = TRUE;
  return w->cb(first, last, data, len, w->user);
}

/* Reads that find nothing although the store is newer, retried this long
 * before calling it a gap: an edit reaches the WAL before the sequence moves,
 * so only a purge makes this last (the replication source waits likewise). */
#define WAL_EMPTY_RETRY_MS 100

gboolean ixia_api_wal_since(ixia_api_t *api, gint64 after, gint64 max_bytes, ixia_store_wal_cb cb,
                            gpointer user, ixia_error_t **err) {
  gint64 latest = ixia_store_latest_version(api->store);
  if (after < 0 || max_bytes < 1)
    return ixia_error_set(err, IXIA_EINVAL, "walSince: after must be >= 0 and max_bytes >= 1");
  if (after > latest)
    return ixia_error_set(err, IXIA_EINVAL,
                          "walSince: version %" G_GINT64_FORMAT " is beyond the store's latest (%" G_GINT64_FORMAT
                          "): is this the store the archive was taken from?",
                          after, latest);
  wal_since_t w = {cb, user, FALSE};
  gint64 available_from = 0;
  gint64 deadline = g_get_monotonic_time() + WAL_EMPTY_RETRY_MS * 1000;
  for (;;) {
    if (!ixia_store_read_wal(api->store, after, max_bytes, wal_since_one, &w, &available_from, err))
      return FALSE;
    if (w.any || available_from > 0 || after >= latest || g_get_monotonic_time() >= deadline) break;
    g_usleep(5000);
  }
  if (available_from > 0 || (!w.any && after < latest))
    return ixia_error_set(err, IXIA_ENOTFOUND,
                          "the API's WAL no longer holds version %" G_GINT64_FORMAT
                          " (oldest available: %" G_GINT64_FORMAT
                          ", 0 = none): it was purged (store.wal_ttl_seconds, store.wal_size_limit_mb)",
                          after + 1, available_from);
  return TRUE;
}

char *ixia_api_stats(ixia_api_t *api) {
  ixia_store_stats_t ss;
  ixia_cache_stats_t cs;
  ixia_store_get_stats(api->store, &ss);
  ixia_cache_get_stats(api->cache, &cs);
  cJSON *o = cJSON_CreateObject();
  guint64 hits = atomic_load_explicit(&api->cache_hits, memory_order_relaxed);
  guint64 misses = atomic_load_explicit(&api->cache_misses, memory_order_relaxed);
  cJSON_AddNumberToObject(o, "uptime_s", (double)(g_get_monotonic_time() - api->started_at) / 1e6);
  cJSON_AddNumberToObject(o, "store_latest_version", (double)ixia_store_latest_version(api->store));
  cJSON_AddNumberToObject(o, "gets_from_memory",
                          (double)atomic_load_explicit(&api->memory_gets, memory_order_relaxed));
  cJSON_AddNumberToObject(o, "gets_from_disk",
                          (double)atomic_load_explicit(&api->gets_from_disk, memory_order_relaxed));
  cJSON_AddNumberToObject(o, "get_memcached_us",
                          (double)atomic_load_explicit(&api->mc_us16, memory_order_relaxed) / 16);
  cJSON_AddNumberToObject(o, "get_disk_read_us",
                          (double)atomic_load_explicit(&api->disk_us16, memory_order_relaxed) / 16);
  cJSON_AddNumberToObject(o, "cache_hits", (double)hits);
  cJSON_AddNumberToObject(o, "cache_misses", (double)misses);
  cJSON_AddNumberToObject(o, "cache_hit_ratio", hits + misses ? (double)hits / (double)(hits + misses) : 0);
  cJSON_AddNumberToObject(o, "cache_partial_misses",
                          (double)atomic_load_explicit(&api->cache_partial_misses, memory_order_relaxed));
  cJSON_AddNumberToObject(o, "cache_errors", (double)cs.errors);
  cJSON_AddNumberToObject(o, "cache_backfills", (double)cs.backfills);
  cJSON_AddNumberToObject(o, "cache_backfills_stale", (double)cs.backfills_stale);
  cJSON_AddNumberToObject(o, "cache_backfills_dropped", (double)cs.backfills_dropped);
  cJSON_AddNumberToObject(o, "cache_backfills_pending", (double)cs.backfills_pending);
  cJSON_AddNumberToObject(o, "cache_invalidation_failures", (double)cs.invalidation_failures);
  cJSON_AddNumberToObject(o, "cache_invalidation_rounds", (double)cs.invalidation_rounds);
  cJSON_AddNumberToObject(o, "cache_invalidations_retried", (double)cs.invalidations_retried);
  cJSON_AddNumberToObject(o, "cache_invalidation_retries_pending",
                          (double)cs.invalidation_retries_pending);
  cJSON_AddNumberToObject(o, "cache_invalidation_retries_dropped",
                          (double)cs.invalidation_retries_dropped);
  cJSON_AddNumberToObject(o, "store_gets_from_memory", (double)ss.memory_gets);
  cJSON_AddNumberToObject(o, "store_gets_needing_disk", (double)ss.memory_gets_missed);
  cJSON_AddNumberToObject(o, "store_doc_cache_hits", (double)ss.doc_cache_hits);
  cJSON_AddNumberToObject(o, "store_doc_cache_misses", (double)ss.doc_cache_misses);
  cJSON_AddNumberToObject(o, "store_doc_cache_bytes", (double)ss.doc_cache_bytes);
  cJSON_AddNumberToObject(o, "store_doc_cache_max_bytes", (double)ss.doc_cache_max_bytes);
  cJSON_AddNumberToObject(o, "store_write_requests", (double)ss.write_requests);
  cJSON_AddNumberToObject(o, "store_write_ops", (double)ss.write_ops);
  cJSON_AddNumberToObject(o, "store_write_groups", (double)ss.write_groups);
  cJSON_AddNumberToObject(o, "store_conflicts", (double)ss.conflicts);
  cJSON_AddNumberToObject(o, "store_gets", (double)ss.gets);
  cJSON_AddNumberToObject(o, "store_disk_free_bytes", (double)ss.disk_free_bytes);
  cJSON_AddNumberToObject(o, "store_disk_reserve_bytes", (double)ss.disk_reserve_bytes);
  cJSON_AddBoolToObject(o, "store_disk_full", ss.disk_full);
  cJSON_AddNumberToObject(o, "store_writes_refused_disk_full", (double)ss.writes_refused_disk_full);
  ixia_replication_stats_t rs;
  ixia_replication_get_stats(api->replication, &rs);
  cJSON_AddBoolToObject(o, "replication_enabled", rs.enabled);
  cJSON_AddNumberToObject(o, "replication_checkpoint", (double)rs.checkpoint);
  cJSON_AddNumberToObject(o, "replication_lag", (double)(rs.latest - rs.checkpoint));
  cJSON_AddNumberToObject(o, "replication_events_published", (double)rs.events_published);
  cJSON_AddNumberToObject(o, "replication_calls", (double)rs.calls);
  cJSON_AddNumberToObject(o, "replication_failures", (double)rs.failures);
  cJSON_AddNumberToObject(o, "replication_wal_reads", (double)rs.wal_reads);
  cJSON_AddNumberToObject(o, "replication_reconnects", (double)rs.reconnects);
  /* A Kafka outage shows here at once, long before a call times out. */
  cJSON_AddNumberToObject(o, "replication_pending_edits", (double)MAX(rs.latest - rs.checkpoint, 0));
  cJSON_AddNumberToObject(o, "replication_pending_age_ms", (double)rs.pending_age_ms);
  cJSON_AddNumberToObject(o, "replication_call_age_ms", (double)rs.call_age_ms);
  cJSON_AddBoolToObject(o, "replication_gap", rs.gap);
  if (rs.gap) {
    cJSON_AddNumberToObject(o, "replication_gap_missing_from", (double)rs.gap_missing_from);
    cJSON_AddNumberToObject(o, "replication_gap_available_from", (double)rs.gap_available_from);
  }
  if (rs.last_error) cJSON_AddStringToObject(o, "replication_last_error", rs.last_error);
  cJSON_AddNumberToObject(o, "replication_checkpoint_persisted", (double)rs.persisted);
  cJSON_AddNumberToObject(o, "replication_checkpoint_failures", (double)rs.checkpoint_failures);
  if (rs.checkpoint_error)
    cJSON_AddStringToObject(o, "replication_checkpoint_error", rs.checkpoint_error);
  g_free(rs.last_error);
  g_free(rs.checkpoint_error);
  ixia_fanout_stats_t qs;
  ixia_fanout_get_stats(api->search, &qs);
  cJSON_AddNumberToObject(o, "query_shards", qs.shards);
  char *shards = ixia_fanout_shard_list(api->search);
  cJSON_AddStringToObject(o, "query_indexers", shards);
  g_free(shards);
  cJSON_AddNumberToObject(o, "queries", (double)qs.queries);
  cJSON_AddNumberToObject(o, "query_errors", (double)qs.query_errors);
  cJSON_AddNumberToObject(o, "query_shard_calls", (double)qs.shard_calls);
  cJSON_AddNumberToObject(o, "query_shard_errors", (double)qs.shard_errors);
  cJSON_AddNumberToObject(o, "query_hits_returned", (double)qs.hits_returned);
  cJSON_AddNumberToObject(o, "query_stale_hits_dropped", (double)qs.stale_hits_dropped);
  cJSON_AddNumberToObject(o, "query_hits_rechecked", (double)qs.hits_rechecked);
  cJSON_AddNumberToObject(o, "query_pages_read_on_worker", (double)qs.pages_on_worker);
  cJSON_AddNumberToObject(o, "query_merges_on_worker", (double)qs.merges_on_worker);
  cJSON_AddNumberToObject(o, "query_shard_calls_pipelined", (double)qs.lane_calls);
  cJSON_AddNumberToObject(o, "query_shard_sends_pipelined", (double)qs.lane_sends);
  g_rw_lock_reader_lock(&api->schemas_lock);
  cJSON_AddNumberToObject(o, "tables", g_hash_table_size(api->schemas));
  g_rw_lock_reader_unlock(&api->schemas_lock);
  add_table_names(api, o);
  ixia_server_add_stats(api->server, o);
  char *out = ixia_json_print(o);
  cJSON_Delete(o);
  return out;
}

gboolean ixia_api_inline_call(const char *method, guint32 len) {
  /* Writes only validate here and wait for their group commit without a
   * thread (ixia_server_call_later); a query sends its shard calls and is
   * finished by their answers on the same thread (fanout.h), or defers. */
  static const char *const cheap[] = {"get", "multiGet", "stats", "getSchema", "put", "upsert",
                                      "deleteDoc", "query"};
  for (guint i = 0; i < G_N_ELEMENTS(cheap); i++)
    if (strlen(cheap[i]) == len && memcmp(cheap[i], method, len) == 0) return TRUE;
  return FALSE;
}
