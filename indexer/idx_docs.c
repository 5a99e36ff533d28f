/* Walks over document records (K keys: table id, document key -> record):
 * every record of a table in key order for verify and dump-index, the live
 * ones with their expiry for anti-entropy and repair, one record for a
 * re-check, and the expiring documents for the expiry schedule. They read
 * RocksDB directly (a fresh iterator: one consistent view), never the
 * in-memory structures searches use, so any thread may call them while the
 * apply thread works. */
#include <string.h>

#include "idx.h"

/* The id of a table, or 0 when the index has never seen it. */
static guint32 table_id_of(ixia_idx_t *idx, const char *ns, const char *table) {
  g_rw_lock_reader_lock(&idx->dict_lock);
  table_t *t = ixia_idx_table_find(idx, ns, table);
  guint32 tid = t ? t->id : 0;
  g_rw_lock_reader_unlock(&idx->dict_lock);
  return tid;
}

/* One record as a walk sees it. */
typedef struct {
  const char *key; /* document key (not NUL-terminated) */
  size_t key_len;
  gint64 version, expire_at;
  gboolean deleted;
} rec_view_t;

typedef gboolean (*rec_fn)(const rec_view_t *r, void *ud);

/* Calls fn for the records of table tid with key > after, in key order. */
static gboolean walk_records(ixia_idx_t *idx, guint32 tid, const char *after, size_t after_len,
                             rec_fn fn, void *ud, ixia_error_t **err) {
  GBytes *start = ixia_idx_doc_key(tid, after ? after : "", after ? after_len : 0);
  gsize sl;
  const char *sp = g_bytes_get_data(start, &sl);
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  gboolean ok = TRUE;
  for (rocksdb_iter_seek(it, sp, sl); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl < 5 || memcmp(k, sp, 5) != 0) break;
    if (after && kl == sl && memcmp(k, sp, sl) == 0) continue;
    const char *v = rocksdb_iter_value(it, &vl);
    guint32 id;
    rec_view_t r = {k + 5, kl - 5, 0, 0, FALSE};
    if (!ixia_idx_rec_decode(v, vl, &id, &r.version, &r.deleted, NULL)) {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "corrupt document record in index");
      break;
    }
    r.expire_at = ixia_idx_rec_expire_at(v, vl);
    if (!fn(&r, ud)) break;
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  g_bytes_unref(start);
  return ixia_error_from_rocksdb(err, rerr, "index scan") && ok;
}

typedef struct {
  ixia_idx_doc_fn fn;
  void *ud;
} doc_walk_t;

static gboolean each_doc(const rec_view_t *r, void *ud) {
  doc_walk_t *w = ud;
  return w->fn(r->key, r->key_len, r->version, r->deleted, w->ud);
}

gboolean ixia_idx_foreach_doc(ixia_idx_t *idx, const char *ns, const char *table,
                              const char *after, size_t after_len, ixia_idx_doc_fn fn, void *ud,
                              ixia_error_t **err) {
  guint32 tid = table_id_of(idx, ns, table);
  if (!tid) return TRUE; /* nothing indexed for it */
  doc_walk_t w = {fn, ud};
  return walk_records(idx, tid, after, after_len, each_doc, &w, err);
}

typedef struct {
  ixia_idx_live_fn fn;
  void *ud;
} live_walk_t;

static gboolean each_live(const rec_view_t *r, void *ud) {
  live_walk_t *w = ud;
  return r->deleted || w->fn(r->key, r->key_len, r->version, r->expire_at, w->ud);
}

gboolean ixia_idx_foreach_live(ixia_idx_t *idx, const char *ns, const char *table,
                               const char *after, size_t after_len, ixia_idx_live_fn fn, void *ud,
                               ixia_error_t **err) {
  guint32 tid = table_id_of(idx, ns, table);
  if (!tid) return TRUE;
  live_walk_t w = {fn, ud};
  return walk_records(idx, tid, after, after_len, each_live, &w, err);
}

gboolean ixia_idx_doc_record(ixia_idx_t *idx, const char *ns, const char *table, const char *key,
                             size_t key_len, gboolean *present, gboolean *deleted, gint64 *version,
                             gint64 *expire_at, ixia_error_t **err) {
  *present = *deleted = FALSE;
  *version = *expire_at = 0;
  guint32 tid = table_id_of(idx, ns, table);
  if (!tid) return TRUE;
  GBytes *k = ixia_idx_doc_key(tid, key, key_len);
  gsize kl;
  const char *kp = g_bytes_get_data(k, &kl);
  char *rerr = NULL;
  size_t vl = 0;
  char *v = rocksdb_get(idx->db, idx->ropts, kp, kl, &vl, &rerr);
  g_bytes_unref(k);
  if (!ixia_error_from_rocksdb(err, rerr, "index read")) return FALSE;
  gboolean ok = TRUE;
  if (v) {
    guint32 id;
    if (ixia_idx_rec_decode(v, vl, &id, version, deleted, NULL)) {
      *present = TRUE;
      *expire_at = ixia_idx_rec_expire_at(v, vl);
    } else {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "corrupt document record in index");
    }
    rocksdb_free(v);
  }
  return ok;
}

typedef struct {
  ixia_idx_expiring_fn fn;
  void *ud;
  const char *ns, *table;
} expiring_walk_t;

static gboolean each_expiring(const rec_view_t *r, void *ud) {
  expiring_walk_t *w = ud;
  if (!r->deleted && r->expire_at > 0) w->fn(w->ns, w->table, r->key, r->key_len, r->expire_at, w->ud);
  return TRUE;
}

gboolean ixia_idx_foreach_expiring(ixia_idx_t *idx, ixia_idx_expiring_fn fn, void *ud,
                                   ixia_error_t **err) {
  /* The tables to read, copied out of the dictionary lock. */
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  GArray *ids = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_rw_lock_reader_lock(&idx->dict_lock);
  for (guint i = 1; i < idx->tables_by_id->len; i++) {
    table_t *t = g_ptr_array_index(idx->tables_by_id, i);
    if (!t || !t->schema || t->schema->ttl_seconds <= 0) continue;
    g_ptr_array_add(names, g_strdup(t->ns));
    g_ptr_array_add(names, g_strdup(t->name));
    g_array_append_val(ids, t->id);
  }
  g_rw_lock_reader_unlock(&idx->dict_lock);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < ids->len; i++) {
    expiring_walk_t w = {fn, ud, g_ptr_array_index(names, 2 * i), g_ptr_array_index(names, 2 * i + 1)};
    ok = walk_records(idx, g_array_index(ids, guint32, i), NULL, 0, each_expiring, &w, err);
  }
  g_array_unref(ids);
  g_ptr_array_unref(names);
  return ok;
}
