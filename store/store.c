/* The truth store (store.h): RocksDB, one writer thread, versions equal to
 * WAL sequence numbers.
 *
 * Requests queue for the writer, which takes all that wait, checks their
 * conditions against an overlay of the group's own edits, numbers every
 * edit with the sequence RocksDB will give it, and commits the group as one
 * synced write. Reads look in the document cache (doc_cache.c: the writer
 * brackets each RocksDB write with it and caches what it wrote,
 * store.doc_cache_writes), then go to RocksDB from any thread;
 * an expired document reads as absent and a compaction filter removes it
 * later. */
#include "store.h"

#include <stdatomic.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "doc_cache.h"
#include "json.h"
#include "log.h"
#include "record.h"
#include "rocksdb_cache.h"
#include "timeutil.h"

typedef struct {
  const ixia_write_op_t *ops;
  guint n;
  gint64 *versions;
  ixia_error_t *error;
  ixia_store_done_cb cb; /* ixia_store_write_async: called, then the request freed */
  gpointer user;
  gboolean done;
  GMutex lock;
  GCond cond;
} write_req_t;

struct ixia_store {
  rocksdb_t *db;
  rocksdb_options_t *opts;
  rocksdb_options_t *local_opts;
  rocksdb_column_family_handle_t *cf_default;
  rocksdb_column_family_handle_t *cf_local;
  rocksdb_writeoptions_t *wopts;
  rocksdb_readoptions_t *ropts;
  rocksdb_readoptions_t *ropts_memory; /* memtables and the block cache only */
  rocksdb_block_based_table_options_t *table_opts;
  rocksdb_cache_t *block_cache;
  rocksdb_cache_t *row_cache; /* NULL when store.row_cache_mb = 0 */
  ixia_doccache_t *docs;      /* store.doc_cache_mb (doc_cache.c) */
  gboolean doc_writes;        /* store.doc_cache_writes: the writer caches what it wrote */
  rocksdb_compactionfilter_t *ttl_filter;
  GAsyncQueue *queue;
  GThread *writer;
  write_req_t stop_req; /* sentinel pushed by destroy */
  ixia_store_commit_cb commit_cb;
  gpointer commit_cb_user;
  GMutex commit_lock; /* with commit_cond: wakes ixia_store_wait_newer */
  /* Under commit_lock: the newest version the commit callback has been
   * given. RocksDB's own sequence moves when the write returns, before the
   * callback runs, so a follower woken by it could find the callback's
   * tail without the group and fall back to reading the WAL. */
  gint64 announced;
  GMutex write_lock;  /* held by the writer around each group; a checkpoint takes it to pause writes */
  GCond commit_cond;
  guint max_group_ops;
  gsize max_group_bytes;
  gsize max_doc_bytes;
  ixia_disk_reserve_t *disk; /* store.disk_reserve_mb on store.path */
  ixia_store_stats_t stats;  /* updated with atomics */
};


/* The clock is read only for a document with a TTL (a page of 100 hits
 * read it 100 times: 3% of the API's CPU). */
static gboolean is_expired(gint64 expire_at) {
  return expire_at > 0 && ixia_record_expired(expire_at, ixia_time_now());
}

/* A document's RocksDB key (record.h: 'd' ...), not a schema's. */
static gboolean is_doc_key(const char *key, size_t len) { return len > 0 && key[0] == 'd'; }

/* Worth a place in the document cache: a value that parses and has not
 * expired (a corrupt one would keep failing from there, an expired one
 * would sit there until evicted). */
static gboolean cacheable(const char *raw, size_t len) {
  gint64 v, expire_at;
  const char *j;
  size_t jl;
  return ixia_record_parse_value(raw, len, &v, &expire_at, &j, &jl) && !is_expired(expire_at);
}

static gboolean cacheable_bytes(GBytes *b) {
  gsize len;
  const char *raw = g_bytes_get_data(b, &len);
  return cacheable(raw, len);
}

/* Expired documents are invisible to reads already; compaction reclaims
 * their space. */
static unsigned char ttl_filter(void *state, int level, const char *key, size_t key_len,
                                const char *value, size_t value_len, char **new_value,
                                size_t *new_value_len, unsigned char *value_changed) {
  (void)state, (void)level, (void)new_value, (void)new_value_len;
  *value_changed = 0;
  gint64 expire_at = 0;
  if (is_doc_key(key, key_len) &&
      ixia_record_parse_value(value, value_len, NULL, &expire_at, NULL, NULL))
    return is_expired(expire_at);
  return 0;
}
static void ttl_filter_destroy(void *state) { (void)state; }
static const char *ttl_filter_name(void *state) {
  (void)state;
  return "ixia.ttl";
}

/* ---------- the writer ---------- */

/* What the writer knows of a key during one group: the latest value (NULL =
 * deleted) with its version. */
typedef struct {
  GBytes *value; /* encoded; NULL when absent */
} overlay_entry_t;

static void overlay_entry_free(gpointer p) {
  overlay_entry_t *e = p;
  if (e->value) g_bytes_unref(e->value);
  g_free(e);
}

/* Current encoded value of key: group overlay first, then RocksDB. Returns a
 * new reference or NULL when absent/expired. */
static GBytes *current_value(ixia_store_t *s, GHashTable *overlay, GBytes *key,
                             ixia_error_t **err) {
  overlay_entry_t *e = g_hash_table_lookup(overlay, key);
  GBytes *v = NULL;
  if (e) {
    v = e->value ? g_bytes_ref(e->value) : NULL;
  } else {
    char *rerr = NULL;
    size_t klen, vlen = 0;
    const char *k = g_bytes_get_data(key, &klen);
    char *raw = rocksdb_get_cf(s->db, s->ropts, s->cf_default, k, klen, &vlen, &rerr);
    if (!ixia_error_from_rocksdb(err, rerr, "read before write")) return NULL;
    if (raw) {
      v = g_bytes_new(raw, vlen);
      rocksdb_free(raw);
    }
  }
  if (v) {
    gint64 expire_at = 0;
    size_t vlen;
    const char *data = g_bytes_get_data(v, &vlen);
    if (!ixia_record_parse_value(data, vlen, NULL, &expire_at, NULL, NULL) || is_expired(expire_at)) {
      g_bytes_unref(v);
      v = NULL;
    }
  }
  return v;
}

static gboolean check_expected(const ixia_write_op_t *op, GBytes *cur, ixia_error_t **err) {
  if (op->expected_version < 0) return TRUE;
  gint64 cur_version = 0;
  if (cur) {
    size_t len;
    const char *data = g_bytes_get_data(cur, &len); /* sets len: keep it a separate statement */
    ixia_record_parse_value(data, len, &cur_version, NULL, NULL, NULL);
  }
  if (op->expected_version == 0 && cur)
    return ixia_error_set(err, IXIA_ECONFLICT,
                          "version conflict on key '%.*s': expected it absent, it has version %" G_GINT64_FORMAT,
                          (int)MIN(op->key_len, 200), op->key, cur_version);
  if (op->expected_version > 0 && !cur)
    return ixia_error_set(err, IXIA_ECONFLICT,
                          "version conflict on key '%.*s': expected version %" G_GINT64_FORMAT
                          ", the key does not exist",
                          (int)MIN(op->key_len, 200), op->key, op->expected_version);
  if (op->expected_version > 0 && cur_version != op->expected_version)
    return ixia_error_set(err, IXIA_ECONFLICT,
                          "version conflict on key '%.*s': expected version %" G_GINT64_FORMAT
                          ", current is %" G_GINT64_FORMAT,
                          (int)MIN(op->key_len, 200), op->key, op->expected_version, cur_version);
  return TRUE;
}

/* The JSON to store for an upsert: the current document with the patch's
 * top-level fields replacing its own. g_malloc'd. */
static char *merge_upsert(ixia_store_t *s, const ixia_write_op_t *op, GBytes *cur,
                          ixia_error_t **err) {
  cJSON *base = NULL;
  if (cur) {
    size_t vlen, jlen = 0;
    const char *json = NULL;
    const char *data = g_bytes_get_data(cur, &vlen);
    if (ixia_record_parse_value(data, vlen, NULL, NULL, &json, &jlen))
      base = ixia_json_parse_stored(json, jlen);
  }
  if (!base) base = cJSON_CreateObject();
  for (const cJSON *f = op->doc ? op->doc->child : NULL; f; f = f->next) {
    cJSON *copy = cJSON_Duplicate(f, TRUE);
    if (cJSON_GetObjectItemCaseSensitive(base, f->string))
      cJSON_ReplaceItemInObjectCaseSensitive(base, f->string, copy);
    else
      cJSON_AddItemToObject(base, f->string, copy);
  }
  char *out = ixia_json_print(base);
  cJSON_Delete(base);
  if (strlen(out) > s->max_doc_bytes) {
    ixia_error_set(err, IXIA_ETOOLARGE,
                   "upsert of key '%.*s' would make the document %zu bytes, over the limit of %zu "
                   "bytes (limits.max_doc_bytes)",
                   (int)MIN(op->key_len, 200), op->key, strlen(out), s->max_doc_bytes);
    g_free(out);
    return NULL;
  }
  return out;
}

typedef struct {
  GBytes *key;
  GBytes *value; /* NULL = delete */
  gint64 expire_at;
  char *json;    /* owned JSON when merged, else NULL */
} staged_t;

/* Decides every op of one request against the current state. On success
 * fills staged[] (caller applies); on failure sets req->error. */
static gboolean stage_request(ixia_store_t *s, GHashTable *overlay, write_req_t *req,
                              staged_t *staged) {
  /* Later ops of the same request see earlier ones. */
  GHashTable *local = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, NULL, NULL);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < req->n; i++) {
    const ixia_write_op_t *op = &req->ops[i];
    staged_t *st = &staged[i];
    st->key = op->kind == IXIA_WRITE_SCHEMA ? ixia_record_schema_key(op->ns, op->table)
                                            : ixia_record_doc_key(op->ns, op->table, op->key, op->key_len);
    GBytes *cur = NULL;
    gpointer prev_idx;
    if (g_hash_table_lookup_extended(local, st->key, NULL, &prev_idx)) {
      staged_t *prev = &staged[GPOINTER_TO_UINT(prev_idx)];
      /* Staged values carry a placeholder version until applied. */
      cur = prev->value ? g_bytes_ref(prev->value) : NULL;
    } else if (op->expected_version != -1 || op->kind == IXIA_WRITE_UPSERT ||
               op->kind == IXIA_WRITE_SCHEMA) {
      /* Only a condition or a merge needs the current value: a plain put
       * or delete costs the single writer no read. */
      cur = current_value(s, overlay, st->key, &req->error);
      if (req->error) {
        ok = FALSE;
        break;
      }
    }
    ok = check_expected(op, cur, &req->error);
    if (ok) {
      const char *json = op->json;
      size_t json_len = op->json_len;
      if (op->kind == IXIA_WRITE_UPSERT) {
        st->json = merge_upsert(s, op, cur, &req->error);
        ok = st->json != NULL;
        json = st->json;
        json_len = st->json ? strlen(st->json) : 0;
      }
      if (ok && op->kind != IXIA_WRITE_DELETE) {
        st->expire_at = op->ttl_seconds > 0 ? ixia_time_now() + op->ttl_seconds : 0;
        st->value = ixia_record_encode_value(0, st->expire_at, json, json_len);
      }
    }
    if (cur) g_bytes_unref(cur);
    g_hash_table_insert(local, st->key, GUINT_TO_POINTER(i));
  }
  g_hash_table_destroy(local);
  return ok;
}

static void staged_clear(staged_t *staged, guint n) {
  for (guint i = 0; i < n; i++) {
    if (staged[i].key) g_bytes_unref(staged[i].key);
    if (staged[i].value) g_bytes_unref(staged[i].value);
    g_free(staged[i].json);
  }
}

static void finish(write_req_t *req) {
  if (req->cb) {
    req->cb(req->user, req->error);
    g_free(req);
    return;
  }
  g_mutex_lock(&req->lock);
  req->done = TRUE;
  g_cond_signal(&req->cond);
  g_mutex_unlock(&req->lock);
}

/* Under store.disk_reserve_mb: refuses every request of the group and
 * returns FALSE; nothing reaches RocksDB. One statvfs per group. */
static gboolean group_fits_disk(ixia_store_t *s, GPtrArray *group) {
  ixia_error_t *full = NULL;
  if (ixia_disk_reserve_check(s->disk, &full)) return TRUE;
  for (guint r = 0; r < group->len; r++) {
    write_req_t *req = g_ptr_array_index(group, r);
    ixia_error_set(&req->error, full->code, "%s", full->message);
    finish(req);
  }
  atomic_fetch_add_explicit(&s->stats.writes_refused_disk_full, group->len, memory_order_relaxed);
  ixia_error_destroy(full);
  return FALSE;
}

static void commit_group(ixia_store_t *s, GPtrArray *group) {
  if (!group_fits_disk(s, group)) return;
  g_mutex_lock(&s->write_lock);
  GHashTable *overlay =
      g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, overlay_entry_free);
  rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
  guint64 base = rocksdb_get_latest_sequence_number(s->db);
  guint64 seq = base;
  GPtrArray *applied = g_ptr_array_new();
  for (guint r = 0; r < group->len; r++) {
    write_req_t *req = g_ptr_array_index(group, r);
    staged_t *staged = g_new0(staged_t, req->n);
    if (stage_request(s, overlay, req, staged)) {
      for (guint i = 0; i < req->n; i++) {
        staged_t *st = &staged[i];
        size_t klen;
        const char *k = g_bytes_get_data(st->key, &klen);
        overlay_entry_t *e = g_new0(overlay_entry_t, 1);
        req->versions[i] = (gint64)++seq;
        if (st->value) {
          size_t vlen;
          unsigned char *v = g_bytes_unref_to_data(st->value, &vlen);
          st->value = NULL;
          ixia_record_set_version(v, (gint64)seq);
          rocksdb_writebatch_put_cf(wb, s->cf_default, k, klen, (const char *)v, vlen);
          e->value = g_bytes_new_take(v, vlen);
        } else {
          rocksdb_writebatch_delete_cf(wb, s->cf_default, k, klen);
        }
        g_hash_table_replace(overlay, g_bytes_ref(st->key), e);
      }
      g_ptr_array_add(applied, req);
    } else if (req->error && req->error->code == IXIA_ECONFLICT) {
      atomic_fetch_add_explicit(&s->stats.conflicts, 1, memory_order_relaxed);
    }
    staged_clear(staged, req->n);
    g_free(staged);
  }
  if (applied->len > 0) {
    char *rerr = NULL;
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, overlay);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
      gsize klen;
      const void *k = g_bytes_get_data(key, &klen);
      ixia_doccache_write_begin(s->docs, k, klen);
    }
    rocksdb_write(s->db, s->wopts, wb, &rerr);
    gpointer ov;
    g_hash_table_iter_init(&it, overlay);
    while (g_hash_table_iter_next(&it, &key, &ov)) {
      gsize klen;
      const void *k = g_bytes_get_data(key, &klen);
      GBytes *v = ((overlay_entry_t *)ov)->value;
      /* Documents only: the cache is looked up by document keys alone. */
      gboolean through = !rerr && s->doc_writes && v && is_doc_key(k, klen) && cacheable_bytes(v);
      ixia_doccache_write_end(s->docs, k, klen, through ? v : NULL);
    }
    if (rerr) {
      ixia_error_t *e = NULL;
      ixia_error_from_rocksdb(&e, rerr, "store write");
      IXIA_ERROR("%s", e->message);
      for (guint r = 0; r < applied->len; r++) {
        write_req_t *req = g_ptr_array_index(applied, r);
        ixia_error_set(&req->error, IXIA_EUNAVAILABLE, "%s", e->message);
      }
      ixia_error_destroy(e);
    } else {
      guint64 latest = rocksdb_get_latest_sequence_number(s->db);
      if (latest != seq)
        IXIA_ERROR("store: sequence %" G_GUINT64_FORMAT " after write, expected %" G_GUINT64_FORMAT
                   ": something else writes to the store",
                   latest, seq);
      atomic_fetch_add_explicit(&s->stats.write_groups, 1, memory_order_relaxed);
      g_mutex_lock(&s->commit_lock);
      /* Under commit_lock: once set_commit_cb(NULL) returns, no call runs. */
      if (s->commit_cb) {
        size_t len = 0;
        const char *data = rocksdb_writebatch_data(wb, &len);
        s->commit_cb((gint64)base + 1, data, len, s->commit_cb_user);
      }
      s->announced = (gint64)seq;
      g_cond_broadcast(&s->commit_cond);
      g_mutex_unlock(&s->commit_lock);
      atomic_fetch_add_explicit(&s->stats.write_ops, seq - base, memory_order_relaxed);
    }
  }
  g_mutex_unlock(&s->write_lock);
  for (guint r = 0; r < group->len; r++) finish(g_ptr_array_index(group, r));
  g_ptr_array_free(applied, TRUE);
  rocksdb_writebatch_destroy(wb);
  g_hash_table_destroy(overlay);
}

static gsize request_bytes(const write_req_t *req) {
  gsize n = 0;
  for (guint i = 0; i < req->n; i++) n += req->ops[i].json_len + req->ops[i].key_len;
  return n;
}

static gpointer writer_main(gpointer data) {
  ixia_store_t *s = data;
  GPtrArray *group = g_ptr_array_new();
  gboolean stop = FALSE;
  while (!stop) {
    write_req_t *req = g_async_queue_pop(s->queue);
    if (req == &s->stop_req) break;
    g_ptr_array_set_size(group, 0);
    g_ptr_array_add(group, req);
    guint ops = req->n;
    gsize bytes = request_bytes(req);
    write_req_t *held = NULL; /* popped but over the byte budget: next group */
    while (ops < s->max_group_ops && bytes < s->max_group_bytes) {
      write_req_t *more = g_async_queue_try_pop(s->queue);
      if (!more) break;
      if (more == &s->stop_req) {
        stop = TRUE;
        break;
      }
      if (bytes + request_bytes(more) > s->max_group_bytes) {
        held = more;
        break;
      }
      g_ptr_array_add(group, more);
      ops += more->n;
      bytes += request_bytes(more);
    }
    commit_group(s, group);
    if (held) {
      g_ptr_array_set_size(group, 0);
      g_ptr_array_add(group, held);
    } else {
      continue;
    }
    commit_group(s, group);
  }
  g_ptr_array_free(group, TRUE);
  return NULL;
}

void ixia_store_write_async(ixia_store_t *s, const ixia_write_op_t *ops, guint n, gint64 *versions,
                            ixia_store_done_cb cb, gpointer user) {
  if (n == 0) {
    cb(user, NULL);
    return;
  }
  write_req_t *req = g_new0(write_req_t, 1);
  *req = (write_req_t){.ops = ops, .n = n, .versions = versions, .cb = cb, .user = user};
  atomic_fetch_add_explicit(&s->stats.write_requests, 1, memory_order_relaxed);
  g_async_queue_push(s->queue, req);
}

gboolean ixia_store_write(ixia_store_t *s, const ixia_write_op_t *ops, guint n, gint64 *versions,
                          ixia_error_t **err) {
  if (n == 0) return TRUE;
  write_req_t req = {.ops = ops, .n = n, .versions = versions};
  g_mutex_init(&req.lock);
  g_cond_init(&req.cond);
  atomic_fetch_add_explicit(&s->stats.write_requests, 1, memory_order_relaxed);
  g_async_queue_push(s->queue, &req);
  g_mutex_lock(&req.lock);
  while (!req.done) g_cond_wait(&req.cond, &req.lock);
  g_mutex_unlock(&req.lock);
  g_mutex_clear(&req.lock);
  g_cond_clear(&req.cond);
  if (req.error) return ixia_error_propagate(err, req.error);
  return TRUE;
}

/* ---------- reads ---------- */

/* Whether a read limited to memory (kBlockCacheTier) answered "read the
 * disk"; then its error and slice are freed (and cleared). Two answers say
 * so: RocksDB's Status::Incomplete, and "found" with an empty value, which
 * is RocksDB's "may exist": the key may be in a table that is not open
 * (TableCache::Get answers so with an OK status) or, for 7.8's MultiGet,
 * in a data block past the key's first one that is not cached (that case
 * failed pages with "corrupt value" instead of sending them to the disk).
 * A stored value is never empty (it starts with its header). */
static gboolean needs_disk(char **rerr, rocksdb_pinnableslice_t **ps) {
  size_t len = 0;
  if (*ps) rocksdb_pinnableslice_value(*ps, &len);
  if (!(*rerr && g_str_has_prefix(*rerr, "Result incomplete")) && !(*ps && len == 0)) return FALSE;
  rocksdb_free(*rerr);
  *rerr = NULL;
  rocksdb_pinnableslice_destroy(*ps);
  *ps = NULL;
  return TRUE;
}

/* One document through ro; *in_memory is FALSE when ro reads only memory
 * and the answer needs the disk. */
static gboolean store_get(ixia_store_t *s, const rocksdb_readoptions_t *ro, const char *ns,
                          const char *table, const char *key, size_t key_len, gboolean *in_memory,
                          gboolean *found, gint64 *version, gint64 *expire_out, char **json,
                          size_t *json_len, ixia_error_t **err) {
  atomic_fetch_add_explicit(&s->stats.gets, 1, memory_order_relaxed);
  GBytes *k = ixia_record_doc_key(ns, table, key, key_len);
  size_t klen, vlen = 0;
  const char *kd = g_bytes_get_data(k, &klen);
  char *rerr = NULL;
  const char *raw = NULL;
  /* Pinned: found or not is the slice's presence (an empty value is
   * "found"), and the value is not copied. */
  rocksdb_pinnableslice_t *ps = NULL;
  guint64 ticket;
  ixia_doccache_ref_t *cached = ixia_doccache_lookup(s->docs, kd, klen, &ticket);
  if (cached) {
    raw = ixia_doccache_value(cached, &vlen);
  } else {
    ps = rocksdb_get_pinned_cf(s->db, ro, s->cf_default, kd, klen, &rerr);
    if (ps) raw = rocksdb_pinnableslice_value(ps, &vlen);
  }
  *found = FALSE;
  if (in_memory) *in_memory = TRUE;
  if (in_memory && needs_disk(&rerr, &ps)) {
    g_bytes_unref(k);
    *in_memory = FALSE;
    return TRUE;
  }
  if (!ixia_error_from_rocksdb(err, rerr, "get")) {
    g_bytes_unref(k);
    return FALSE;
  }
  if (ps && cacheable(raw, vlen)) {
    /* Cached as stored: expiry is checked on every read either way. */
    ixia_doccache_ref_t *b = ixia_doccache_insert(s->docs, kd, klen, raw, vlen, ticket);
    if (b) {
      rocksdb_pinnableslice_destroy(ps);
      ps = NULL;
      cached = b;
      raw = ixia_doccache_value(cached, &vlen);
    }
  }
  g_bytes_unref(k);
  if (!cached && !ps) return TRUE; /* not found */
  gint64 v = 0, expire_at = 0;
  const char *j;
  size_t jl;
  gboolean ok = ixia_record_parse_value(raw, vlen, &v, &expire_at, &j, &jl);
  if (ok && !is_expired(expire_at)) {
    *found = TRUE;
    if (version) *version = v;
    if (expire_out) *expire_out = expire_at;
    if (json) *json = ixia_memdup0(j, jl);
    if (json_len) *json_len = jl;
  }
  ixia_doccache_release(cached);
  rocksdb_pinnableslice_destroy(ps);
  if (!ok) return ixia_error_set(err, IXIA_EINTERNAL, "corrupt value for key '%.*s'", (int)MIN(key_len, 200), key);
  return TRUE;
}

gboolean ixia_store_get(ixia_store_t *s, const char *ns, const char *table, const char *key,
                        size_t key_len, gboolean *found, gint64 *version, gint64 *expire_out,
                        char **json, size_t *json_len, ixia_error_t **err) {
  return store_get(s, s->ropts, ns, table, key, key_len, NULL, found, version, expire_out, json,
                   json_len, err);
}

gboolean ixia_store_get_in_memory(ixia_store_t *s, const char *ns, const char *table,
                                  const char *key, size_t key_len, gboolean *in_memory,
                                  gboolean *found, gint64 *version, gint64 *expire_at, char **json,
                                  size_t *json_len, ixia_error_t **err) {
  atomic_fetch_add_explicit(&s->stats.memory_gets, 1, memory_order_relaxed);
  gboolean ok = store_get(s, s->ropts_memory, ns, table, key, key_len, in_memory, found, version,
                          expire_at, json, json_len, err);
  if (ok && !*in_memory) atomic_fetch_add_explicit(&s->stats.memory_gets_missed, 1, memory_order_relaxed);
  return ok;
}

struct ixia_store_pins {
  guint n;
  rocksdb_pinnableslice_t **vals; /* what RocksDB answered, or NULL */
  ixia_doccache_ref_t **held;     /* what the document cache answered, or NULL */
};

void ixia_store_pins_free(ixia_store_pins_t *pins) {
  if (!pins) return;
  for (guint i = 0; i < pins->n; i++) {
    rocksdb_pinnableslice_destroy(pins->vals[i]);
    ixia_doccache_release(pins->held[i]);
  }
  g_free(pins->vals);
  g_free(pins->held);
  g_free(pins);
}

/* The multi-gets: the document cache first, then RocksDB for the rest (one
 * batched multi-get, or from memory only one get per key). With pins, the
 * values stay where they are (the cache's references, RocksDB's pinned
 * slices) and out borrows them; without, each found document is copied. */
/* in_memory NULL: any read; else memory only, *in_memory FALSE (and
 * nothing in out) when a key needs the disk. */
static gboolean multi_get(ixia_store_t *s, const char *ns, const char *table, guint n,
                          const char *const *keys, const size_t *key_lens, ixia_store_doc_t *out,
                          ixia_store_pins_t **pins, gboolean *in_memory, ixia_error_t **err) {
  memset(out, 0, sizeof *out * n);
  if (in_memory) *in_memory = TRUE;
  if (pins) *pins = NULL;
  if (n == 0) return TRUE;
  atomic_fetch_add_explicit(&s->stats.gets, n, memory_order_relaxed);
  /* Every record key is the table's prefix and the document key: written
   * one after another into one buffer. */
  GBytes *prefix = ixia_record_doc_key(ns, table, "", 0);
  gsize plen;
  const guint8 *pdata = g_bytes_get_data(prefix, &plen);
  gsize total = 0;
  for (guint i = 0; i < n; i++) total += plen + key_lens[i];
  char *kbuf = g_malloc(total ? total : 1);
  const char **kp = g_new(const char *, n);
  size_t *kl = g_new(size_t, n);
  gsize off = 0;
  for (guint i = 0; i < n; i++) {
    memcpy(kbuf + off, pdata, plen);
    memcpy(kbuf + off + plen, keys[i], key_lens[i]);
    kp[i] = kbuf + off;
    kl[i] = plen + key_lens[i];
    off += kl[i];
  }
  g_bytes_unref(prefix);
  rocksdb_pinnableslice_t **vals = g_new0(rocksdb_pinnableslice_t *, n);
  ixia_doccache_ref_t **held = g_new0(ixia_doccache_ref_t *, n);
  guint64 *tickets = g_new(guint64, n);
  /* The misses, compacted: their keys and where they go. */
  const char **mkp = g_new(const char *, n);
  size_t *mkl = g_new(size_t, n);
  guint *mi = g_new(guint, n), nm = 0;
  ixia_doccache_lookup_many(s->docs, n, kp, kl, held, tickets);
  for (guint i = 0; i < n; i++) {
    if (!held[i]) {
      mkp[nm] = kp[i];
      mkl[nm] = kl[i];
      mi[nm++] = i;
    }
  }
  char **errs = g_new0(char *, MAX(nm, 1));
  rocksdb_pinnableslice_t **mvals = g_new0(rocksdb_pinnableslice_t *, MAX(nm, 1));
  /* From memory only, one get per key, stopping at the first that needs
   * the disk (the page then goes to a worker, which reads them all): RocksDB
   * 7.8's batched read does not keep to the block-cache tier (it reads each
   * key's first data block from the disk, on the caller's thread), where a
   * single get does. Otherwise batched: one pass through the memtables and
   * each SST file's blocks for all keys, values pinned in the block cache
   * rather than copied. */
  if (nm && in_memory) {
    for (guint m = 0; m < nm; m++) {
      mvals[m] = rocksdb_get_pinned_cf(s->db, s->ropts_memory, s->cf_default, mkp[m], mkl[m], &errs[m]);
      if (needs_disk(&errs[m], &mvals[m])) {
        *in_memory = FALSE;
        break;
      }
      if (errs[m]) break;
    }
  } else if (nm) {
    rocksdb_batched_multi_get_cf(s->db, s->ropts, s->cf_default, nm, mkp, mkl, mvals, errs, false);
  }
  gboolean ok = TRUE;
  for (guint m = 0; m < nm; m++) {
    guint i = mi[m];
    if (errs[m]) {
      if (ok) ok = ixia_error_from_rocksdb(err, errs[m], "multi-get");
      else rocksdb_free(errs[m]);
      continue;
    }
    if (!mvals[m]) continue;
    size_t vl;
    const char *val = rocksdb_pinnableslice_value(mvals[m], &vl);
    held[i] = cacheable(val, vl) ? ixia_doccache_insert(s->docs, kp[i], kl[i], val, vl, tickets[i]) : NULL;
    if (held[i]) rocksdb_pinnableslice_destroy(mvals[m]);
    else vals[i] = mvals[m];
  }
  for (guint i = 0; ok && i < n; i++) {
    size_t vl = 0;
    const char *val = held[i] ? ixia_doccache_value(held[i], &vl)
                      : vals[i] ? rocksdb_pinnableslice_value(vals[i], &vl)
                                : NULL;
    if (!val) continue;
    gint64 v = 0, expire_at = 0;
    const char *j;
    size_t jl;
    if (!ixia_record_parse_value(val, vl, &v, &expire_at, &j, &jl)) {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "corrupt value for key '%.*s'",
                          (int)MIN(key_lens[i], 200), keys[i]);
    } else if (!is_expired(expire_at)) {
      out[i] = (ixia_store_doc_t){TRUE, v, expire_at, pins ? (char *)j : ixia_memdup0(j, jl), jl, NULL, 0};
      gsize json_off;
      guint n_members;
      const guint16 *members = pins && held[i] ? ixia_doccache_members(held[i], &json_off, &n_members) : NULL;
      /* (The table's offsets are from the text it was built on.) */
      if (members && j == val + json_off) out[i].members = members, out[i].n_members = n_members;
    }
  }
  if (!ok || (in_memory && !*in_memory))
    for (guint i = 0; i < n; i++) {
      if (!pins) g_free(out[i].json);
      out[i] = (ixia_store_doc_t){0};
    }
  if (pins) {
    *pins = g_new(ixia_store_pins_t, 1);
    **pins = (ixia_store_pins_t){n, vals, held};
  } else {
    for (guint i = 0; i < n; i++) {
      rocksdb_pinnableslice_destroy(vals[i]);
      ixia_doccache_release(held[i]);
    }
    g_free(vals);
    g_free(held);
  }
  g_free(kbuf);
  g_free(kp);
  g_free(kl);
  g_free(errs);
  g_free(mvals);
  g_free(mkp);
  g_free(mkl);
  g_free(mi);
  g_free(tickets);
  return ok;
}

gboolean ixia_store_multi_get(ixia_store_t *s, const char *ns, const char *table, guint n,
                              const char *const *keys, const size_t *key_lens,
                              ixia_store_doc_t *out, ixia_error_t **err) {
  return multi_get(s, ns, table, n, keys, key_lens, out, NULL, NULL, err);
}

gboolean ixia_store_multi_get_pinned(ixia_store_t *s, const char *ns, const char *table, guint n,
                                     const char *const *keys, const size_t *key_lens,
                                     ixia_store_doc_t *out, ixia_store_pins_t **pins,
                                     ixia_error_t **err) {
  return multi_get(s, ns, table, n, keys, key_lens, out, pins, NULL, err);
}

gboolean ixia_store_multi_get_pinned_in_memory(ixia_store_t *s, const char *ns, const char *table,
                                               guint n, const char *const *keys,
                                               const size_t *key_lens, ixia_store_doc_t *out,
                                               ixia_store_pins_t **pins, gboolean *in_memory,
                                               ixia_error_t **err) {
  atomic_fetch_add_explicit(&s->stats.memory_gets, 1, memory_order_relaxed);
  gboolean ok = multi_get(s, ns, table, n, keys, key_lens, out, pins, in_memory, err);
  if (ok && !*in_memory) atomic_fetch_add_explicit(&s->stats.memory_gets_missed, 1, memory_order_relaxed);
  return ok;
}

gboolean ixia_store_foreach_schema(ixia_store_t *s, ixia_store_schema_cb cb, gpointer user,
                                   ixia_error_t **err) {
  rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, s->ropts, s->cf_default);
  for (rocksdb_iter_seek(it, "s", 1); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(it, &klen);
    if (klen == 0 || k[0] != 's') break;
    const char *v = rocksdb_iter_value(it, &vlen);
    const char *ns, *table, *json;
    size_t nl, tl, jl;
    gint64 version;
    if (!ixia_record_parse_key(k, klen, NULL, &ns, &nl, &table, &tl, NULL, NULL) ||
        !ixia_record_parse_value(v, vlen, &version, NULL, &json, &jl)) {
      IXIA_WARN("skipping malformed schema record");
      continue;
    }
    char *n = ixia_memdup0(ns, nl), *t = ixia_memdup0(table, tl), *js = ixia_memdup0(json, jl);
    cb(n, t, js, jl, version, user);
    g_free(n);
    g_free(t);
    g_free(js);
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  return ixia_error_from_rocksdb(err, rerr, "schema scan");
}

gboolean ixia_store_scan(ixia_store_t *s, const char *ns, const char *table, const char *after,
                         size_t after_len, ixia_store_doc_cb cb, gpointer user, ixia_error_t **err) {
  /* A document key with an empty key is the table's prefix. */
  GBytes *prefix_bytes = ixia_record_doc_key(ns, table, "", 0);
  gsize prefix_len;
  const guint8 *prefix_data = g_bytes_get_data(prefix_bytes, &prefix_len);
  GByteArray *start = g_byte_array_new();
  g_byte_array_append(start, prefix_data, (guint)prefix_len);
  if (after && after_len) {
    g_byte_array_append(start, (const guint8 *)after, (guint)after_len);
    /* The smallest key after `after`. */
    guint8 zero = 0;
    g_byte_array_append(start, &zero, 1);
  }
  rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
  const rocksdb_snapshot_t *snap = rocksdb_create_snapshot(s->db);
  rocksdb_readoptions_set_snapshot(ro, snap);
  rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_default);
  gboolean more = TRUE;
  for (rocksdb_iter_seek(it, (const char *)start->data, start->len); more && rocksdb_iter_valid(it);
       rocksdb_iter_next(it)) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(it, &klen);
    if (klen < prefix_len || memcmp(k, prefix_data, prefix_len) != 0) break;
    const char *v = rocksdb_iter_value(it, &vlen);
    const char *json;
    size_t jl;
    gint64 version, expire_at;
    if (!ixia_record_parse_value(v, vlen, &version, &expire_at, &json, &jl)) {
      IXIA_WARN("scan: skipping a malformed document record");
      continue;
    }
    if (is_expired(expire_at)) continue;
    more = cb(k + prefix_len, klen - prefix_len, version, expire_at, json, jl, user);
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  rocksdb_release_snapshot(s->db, snap);
  rocksdb_readoptions_destroy(ro);
  g_byte_array_unref(start);
  g_bytes_unref(prefix_bytes);
  return ixia_error_from_rocksdb(err, rerr, "document scan");
}

gint64 ixia_store_latest_version(ixia_store_t *s) {
  return (gint64)rocksdb_get_latest_sequence_number(s->db);
}

gint64 ixia_store_wait_newer(ixia_store_t *s, gint64 after, gint64 timeout_ms) {
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
  g_mutex_lock(&s->commit_lock);
  while (s->announced <= after && g_cond_wait_until(&s->commit_cond, &s->commit_lock, deadline)) {
  }
  gint64 announced = s->announced;
  g_mutex_unlock(&s->commit_lock);
  if (announced > after) return announced;
  /* Nothing announced in timeout_ms. A group may sit between its write and
   * its announcement: let it finish (the writer holds write_lock across
   * both), then report what RocksDB holds, so that only a version the
   * callback never saw (written around the writer) is left to the WAL. */
  g_mutex_lock(&s->write_lock);
  gint64 latest = ixia_store_latest_version(s);
  g_mutex_unlock(&s->write_lock);
  return latest;
}

void ixia_store_set_commit_cb(ixia_store_t *s, ixia_store_commit_cb cb, gpointer user) {
  g_mutex_lock(&s->commit_lock);
  s->commit_cb_user = user;
  s->commit_cb = cb;
  g_mutex_unlock(&s->commit_lock);
}

gboolean ixia_store_read_wal(ixia_store_t *s, gint64 after, gint64 max_bytes,
                             ixia_store_wal_cb cb, gpointer user, gint64 *gap_available_from,
                             ixia_error_t **err) {
  if (gap_available_from) *gap_available_from = 0;
  /* RocksDB refuses to start past its latest sequence (NotFound). */
  if (after >= ixia_store_latest_version(s)) return TRUE;
  char *rerr = NULL;
  rocksdb_wal_iterator_t *it = rocksdb_get_updates_since(s->db, (uint64_t)after + 1, NULL, &rerr);
  if (!ixia_error_from_rocksdb(err, rerr, "read WAL")) return FALSE;
  gint64 bytes = 0;
  gboolean passed_any = FALSE, more = TRUE;
  for (; more && rocksdb_wal_iter_valid(it) && bytes < max_bytes; rocksdb_wal_iter_next(it)) {
    uint64_t seq = 0;
    rocksdb_writebatch_t *wb = rocksdb_wal_iter_get_batch(it, &seq);
    size_t size = 0;
    const char *data = rocksdb_writebatch_data(wb, &size);
    gint64 last = (gint64)seq + rocksdb_writebatch_count(wb) - 1;
    if (!passed_any && (gint64)seq > after + 1) {
      /* RocksDB starts at the oldest batch it still has: the ones asked for
       * were purged. */
      if (gap_available_from) *gap_available_from = (gint64)seq;
      rocksdb_writebatch_destroy(wb);
      break;
    }
    if (last > after) {
      more = cb((gint64)seq, last, data, size, user);
      passed_any = TRUE;
      bytes += (gint64)size;
    }
    rocksdb_writebatch_destroy(wb);
  }
  rocksdb_wal_iter_status(it, &rerr);
  rocksdb_wal_iter_destroy(it);
  return ixia_error_from_rocksdb(err, rerr, "read WAL");
}

gboolean ixia_store_flush(ixia_store_t *s, ixia_error_t **err) {
  rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
  rocksdb_flushoptions_set_wait(fo, 1);
  char *rerr = NULL;
  rocksdb_flush(s->db, fo, &rerr);
  rocksdb_flushoptions_destroy(fo);
  return ixia_error_from_rocksdb(err, rerr, "flush");
}

void ixia_store_get_stats(ixia_store_t *s, ixia_store_stats_t *out) {
  out->write_requests = atomic_load_explicit(&s->stats.write_requests, memory_order_relaxed);
  out->write_ops = atomic_load_explicit(&s->stats.write_ops, memory_order_relaxed);
  out->write_groups = atomic_load_explicit(&s->stats.write_groups, memory_order_relaxed);
  out->conflicts = atomic_load_explicit(&s->stats.conflicts, memory_order_relaxed);
  out->gets = atomic_load_explicit(&s->stats.gets, memory_order_relaxed);
  out->memory_gets = atomic_load_explicit(&s->stats.memory_gets, memory_order_relaxed);
  out->memory_gets_missed = atomic_load_explicit(&s->stats.memory_gets_missed, memory_order_relaxed);
  out->writes_refused_disk_full = atomic_load_explicit(&s->stats.writes_refused_disk_full, memory_order_relaxed);
  ixia_doccache_stats_t d;
  ixia_doccache_get_stats(s->docs, &d);
  out->doc_cache_hits = d.hits;
  out->doc_cache_misses = d.misses;
  out->doc_cache_bytes = d.bytes;
  out->doc_cache_max_bytes = d.max_bytes;
  /* Measured now, so an idle store shows space freed since its last write. */
  ixia_disk_reserve_check(s->disk, NULL);
  out->disk_free_bytes = ixia_disk_reserve_free(s->disk);
  out->disk_reserve_bytes = ixia_disk_reserve_bytes(s->disk);
  out->disk_full = ixia_disk_reserve_exhausted(s->disk);
}

rocksdb_t *ixia_store_db(ixia_store_t *s) { return s->db; }

gboolean ixia_store_checkpoint(ixia_store_t *s, const char *dir, gint64 *version,
                               ixia_error_t **err) {
  /* The checkpoint flushes the memtables into store.path first. */
  if (!ixia_disk_reserve_check(s->disk, err)) return FALSE;
  char *rerr = NULL;
  rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(s->db, &rerr);
  if (!ixia_error_from_rocksdb(err, rerr, "checkpoint")) return FALSE;
  /* The writer is the only source of sequence numbers: with it paused, the
   * latest sequence is exactly the last edit the checkpoint holds. */
  g_mutex_lock(&s->write_lock);
  gint64 v = ixia_store_latest_version(s);
  /* 0: flush the memtables first, so the checkpoint is SST files (hard
   * links) and opens without replaying a WAL. */
  rocksdb_checkpoint_create(cp, dir, 0, &rerr);
  g_mutex_unlock(&s->write_lock);
  rocksdb_checkpoint_object_destroy(cp);
  if (!ixia_error_from_rocksdb(err, rerr, "checkpoint")) {
    if (err && *err) ixia_error_prefix(*err, "%s", dir);
    return FALSE;
  }
  if (version) *version = v;
  return TRUE;
}

/* ---------- open / close ---------- */

/* A cgroup memory limit file's value; 0 for none ("max", unreadable). */
static guint64 cgroup_file_limit(const char *path) {
  char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL)) return 0;
  guint64 lim = g_ascii_strtoull(text, NULL, 10); /* "max" reads as 0 */
  g_free(text);
  return lim;
}

/* The lowest memory limit of this process's cgroups and their ancestors
 * (systemd's MemoryMax, a container's or a pod's limit), v2 or v1; 0 for
 * none. Paths come from /proc/self/cgroup, relative to the mounts. */
static guint64 cgroup_limit(void) {
  char *self = NULL;
  if (!g_file_get_contents("/proc/self/cgroup", &self, NULL, NULL)) return 0;
  guint64 best = 0;
  gchar **lines = g_strsplit(self, "\n", -1);
  for (gchar **l = lines; *l; l++) {
    gchar **f = g_strsplit(*l, ":", 3); /* id, controllers, path */
    if (g_strv_length(f) == 3 && f[2][0] == '/') {
      gchar **ctl = g_strsplit(f[1], ",", -1);
      gboolean v1 = g_strv_contains((const gchar *const *)ctl, "memory");
      g_strfreev(ctl);
      const char *base = v1 ? "/sys/fs/cgroup/memory" : f[1][0] ? NULL : "/sys/fs/cgroup";
      const char *file = v1 ? "memory.limit_in_bytes" : "memory.max";
      for (gchar *dir = base ? g_strdup(f[2]) : NULL; dir;) {
        gchar *path = g_build_filename(base, dir, file, NULL);
        guint64 lim = cgroup_file_limit(path);
        g_free(path);
        if (lim > 0 && (best == 0 || lim < best)) best = lim;
        gchar *up = strcmp(dir, "/") ? g_path_get_dirname(dir) : NULL;
        g_free(dir);
        dir = up;
      }
    }
    g_strfreev(f);
  }
  g_strfreev(lines);
  g_free(self);
  return best;
}

/* The memory this process may use: physical memory, or the lowest cgroup
 * limit when lower (a container sees the host's memory through sysconf).
 * 0 when unknown. */
static guint64 memory_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  guint64 mem = pages > 0 && psize > 0 ? (guint64)pages * (guint64)psize : 0;
  guint64 lim = cgroup_limit();
  if (lim > 0 && (mem == 0 || lim < mem)) mem = lim;
  return mem;
}

/* store.block_cache_mb, or for 0 an eighth of the memory (at least
 * 256 MiB). Gets that the memtables and the row cache miss are answered
 * on the I/O thread only when their block is cached; anything else costs
 * a worker hand-off and a read and decompression of the block. */
static size_t block_cache_bytes(const ixia_config_t *cfg) {
  gint64 mb = ixia_config_int(cfg, "store.block_cache_mb");
  if (mb > 0) return (size_t)mb << 20;
  return (size_t)MAX(memory_limit() / 8, G_GUINT64_CONSTANT(256) << 20);
}

ixia_store_t *ixia_store_open(const ixia_config_t *cfg, ixia_error_t **err) {
  const char *path = ixia_config_str(cfg, "store.path");
  if (g_mkdir_with_parents(path, 0755) != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot create store directory %s: %s", path,
                   g_strerror(errno));
    return NULL;
  }
  ixia_store_t *s = g_new0(ixia_store_t, 1);
  g_mutex_init(&s->commit_lock);
  g_mutex_init(&s->write_lock);
  g_cond_init(&s->commit_cond);
  s->max_group_ops = (guint)ixia_config_int(cfg, "store.max_group_ops");
  s->max_group_bytes = (gsize)ixia_config_int(cfg, "store.max_group_bytes");
  s->max_doc_bytes = (gsize)ixia_config_int(cfg, "limits.max_doc_bytes");
  gint64 reserve_mb = ixia_config_int(cfg, "store.disk_reserve_mb");
  gint64 buffer_mb = ixia_config_int(cfg, "store.write_buffer_mb");
  s->disk = ixia_disk_reserve_new("store", "store.disk_reserve_mb", reserve_mb, "writes resume");
  ixia_disk_reserve_watch(s->disk, path);
  if (reserve_mb > 0 && reserve_mb < 3 * buffer_mb)
    IXIA_WARN("store.disk_reserve_mb=%" G_GINT64_FORMAT " is under 3 x store.write_buffer_mb (%" G_GINT64_FORMAT
              "): a memtable flush may not fit in the reserve",
              reserve_mb, buffer_mb);

  s->opts = rocksdb_options_create();
  rocksdb_options_set_create_if_missing(s->opts, 1);
  rocksdb_options_set_create_missing_column_families(s->opts, 1);
  rocksdb_options_increase_parallelism(s->opts, 2);
  if (ixia_config_bool(cfg, "store.compaction_low_priority")) ixia_rocksdb_lower_compaction_priority();
  /* Flushes and the first compaction write what was just written, under
   * load: LZ4 there was a tenth of the API's CPU during a bulk load. The
   * levels that hold most of the data stay compressed. */
  int levels[7] = {rocksdb_no_compression, rocksdb_no_compression, rocksdb_lz4_compression,
                   rocksdb_lz4_compression, rocksdb_lz4_compression, rocksdb_lz4_compression,
                   rocksdb_lz4_compression};
  rocksdb_options_set_compression_per_level(s->opts, levels, 7);
  rocksdb_options_set_write_buffer_size(s->opts,
                                        (size_t)ixia_config_int(cfg, "store.write_buffer_mb") << 20);
  /* The CDC feed reads the WAL: keep it around after memtable flushes. */
  rocksdb_options_set_WAL_ttl_seconds(s->opts, (uint64_t)ixia_config_int(cfg, "store.wal_ttl_seconds"));
  rocksdb_options_set_WAL_size_limit_MB(s->opts,
                                        (uint64_t)ixia_config_int(cfg, "store.wal_size_limit_mb"));
  size_t block_cache = block_cache_bytes(cfg);
  /* RocksDB's own sharding: the store's filter and index blocks live with
   * their table readers (cache_index_and_filter_blocks off), so the thrash
   * rocksdb_cache.c prevents in the index cannot happen here. */
  s->block_cache = rocksdb_cache_create_lru(block_cache);
  s->table_opts = rocksdb_block_based_options_create();
  rocksdb_block_based_options_set_block_cache(s->table_opts, s->block_cache);
  rocksdb_block_based_options_set_filter_policy(s->table_opts,
                                                rocksdb_filterpolicy_create_bloom(10));
  /* Point reads (gets, a page's hits) dominate: a hash index inside each
   * data block finds a key without a binary search, and a memtable bloom
   * filter skips the memtable skip-list for the (usual) key not in it. */
  rocksdb_block_based_options_set_data_block_index_type(
      s->table_opts, rocksdb_block_based_table_data_block_index_type_binary_search_and_hash);
  rocksdb_block_based_options_set_data_block_hash_ratio(s->table_opts, 0.75);
  rocksdb_options_set_block_based_table_factory(s->opts, s->table_opts);
  rocksdb_options_set_memtable_prefix_bloom_size_ratio(s->opts, 0.05);
  rocksdb_options_set_memtable_whole_key_filtering(s->opts, 1);
  gint64 doc_mb = ixia_config_int(cfg, "store.doc_cache_mb");
  s->docs = ixia_doccache_new(doc_mb > 0 ? (guint64)doc_mb << 20 : MAX(memory_limit() / 8, G_GUINT64_CONSTANT(256) << 20));
  s->doc_writes = ixia_config_bool(cfg, "store.doc_cache_writes");
  gint64 row_mb = ixia_config_int(cfg, "store.row_cache_mb");
  if (row_mb > 0) {
    s->row_cache = rocksdb_cache_create_lru((size_t)row_mb << 20);
    rocksdb_options_set_row_cache(s->opts, s->row_cache);
  }
  s->ttl_filter = rocksdb_compactionfilter_create(NULL, ttl_filter_destroy, ttl_filter, ttl_filter_name);
  rocksdb_options_set_compaction_filter(s->opts, s->ttl_filter);
  s->local_opts = rocksdb_options_create();
  /* RocksDB preallocates each WAL file at 1.1 x the largest memtable of any
   * column family: keep the unused one's as small as the documents' so that
   * store.write_buffer_mb bounds it (store.disk_reserve_mb counts on it). */
  rocksdb_options_set_write_buffer_size(s->local_opts,
                                        (size_t)ixia_config_int(cfg, "store.write_buffer_mb") << 20);

  const char *names[] = {"default", "local"};
  const rocksdb_options_t *cf_opts[] = {s->opts, s->local_opts};
  rocksdb_column_family_handle_t *handles[2] = {NULL, NULL};
  char *rerr = NULL;
  s->db = rocksdb_open_column_families(s->opts, path, 2, names, cf_opts, handles, &rerr);
  if (!ixia_error_from_rocksdb(err, rerr, "open store")) {
    if (err && *err) ixia_error_prefix(*err, "%s", path);
    ixia_store_destroy(s);
    return NULL;
  }
  s->cf_default = handles[0];
  s->cf_local = handles[1];
  s->wopts = rocksdb_writeoptions_create();
  rocksdb_writeoptions_set_sync(s->wopts, ixia_config_bool(cfg, "store.sync"));
  s->ropts = rocksdb_readoptions_create();
  s->ropts_memory = rocksdb_readoptions_create();
  rocksdb_readoptions_set_read_tier(s->ropts_memory, 1 /* kBlockCacheTier */);
  s->announced = ixia_store_latest_version(s); /* what the WAL holds from earlier runs */
  s->queue = g_async_queue_new();
  s->writer = g_thread_new("ixia-writer", writer_main, s);
  ixia_doccache_stats_t d;
  ixia_doccache_get_stats(s->docs, &d);
  IXIA_INFO("store open at %s, latest version %" G_GINT64_FORMAT ", block cache %zu MiB, document cache %" G_GUINT64_FORMAT " MiB",
            path, ixia_store_latest_version(s), block_cache >> 20, d.max_bytes >> 20);
  return s;
}

void ixia_store_destroy(ixia_store_t *s) {
  if (!s) return;
  if (s->writer) {
    g_async_queue_push(s->queue, &s->stop_req);
    g_thread_join(s->writer);
  }
  if (s->queue) g_async_queue_unref(s->queue);
  if (s->cf_default) rocksdb_column_family_handle_destroy(s->cf_default);
  if (s->cf_local) rocksdb_column_family_handle_destroy(s->cf_local);
  if (s->db) rocksdb_close(s->db);
  if (s->wopts) rocksdb_writeoptions_destroy(s->wopts);
  if (s->ropts) rocksdb_readoptions_destroy(s->ropts);
  if (s->ropts_memory) rocksdb_readoptions_destroy(s->ropts_memory);
  if (s->opts) rocksdb_options_destroy(s->opts);
  if (s->local_opts) rocksdb_options_destroy(s->local_opts);
  if (s->table_opts) rocksdb_block_based_options_destroy(s->table_opts);
  if (s->block_cache) rocksdb_cache_destroy(s->block_cache);
  if (s->row_cache) rocksdb_cache_destroy(s->row_cache);
  ixia_doccache_destroy(s->docs);
  if (s->ttl_filter) rocksdb_compactionfilter_destroy(s->ttl_filter);
  ixia_disk_reserve_destroy(s->disk);
  g_mutex_clear(&s->commit_lock);
  g_mutex_clear(&s->write_lock);
  g_cond_clear(&s->commit_cond);
  g_free(s);
}
