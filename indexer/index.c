/* One shard's secondary index on RocksDB. Layout and rationale: index.h and
 * docs/INDEX-FORMAT.md.
 *
 * In memory: the table and field dictionaries (small) and, per field, the
 * value dictionary in both directions. The value -> id hash is used only by
 * the apply thread; the id -> value array is read by searches (to hand
 * aggregations borrowed encoded values) under `lock`. Entries are never
 * freed while the index is open, except the ones of a batch whose RocksDB
 * write failed: those were never visible in any snapshot, so no search can
 * hold them. */
#include "index.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <rocksdb/c.h>
#include <roaring/roaring.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "json.h"
#include "log.h"

/* Key prefixes (first byte of every key). */
#define K_META 'M'    /* "Mv" max version; "Mp" + partition: next offset */
#define K_TABLE 'T'   /* ns \0 table -> table id */
#define K_SCHEMA 'S'  /* table id -> version + schema JSON */
#define K_FIELD 'F'   /* table id, type, path -> field id */
#define K_VALUE 'V'   /* field id, encoded value -> value id */
#define K_DOC 'K'     /* table id, key -> document record */
#define K_ID 'D'      /* doc id -> table id, key */
#define K_POST 'P'    /* field id, value id, chunk -> roaring bitmap */
#define K_LIVE 'L'    /* table id, 0, chunk -> roaring bitmap of existing documents */
#define K_COL 'C'     /* field id, column chunk -> packed value ids by slot */

#define COL_BITS 10
#define COL_SLOTS (1u << COL_BITS)
/* Ranges over more distinct values than this read columns, not postings. */
#define RANGE_POSTINGS_MAX 64
#define POST_BITS 16

#define OP_IDS 'I'     /* merge operand: ids to add, ids to remove */
#define COL_MAGIC 'c'  /* column value and column operand */

#define REC_DELETED 1u

/* ---------------------------------------------------------------- bytes */

static inline void be32(guint8 *p, guint32 v) {
  p[0] = (guint8)(v >> 24), p[1] = (guint8)(v >> 16), p[2] = (guint8)(v >> 8), p[3] = (guint8)v;
}
static inline guint32 rd32(const void *vp) {
  const guint8 *p = vp;
  return (guint32)p[0] << 24 | (guint32)p[1] << 16 | (guint32)p[2] << 8 | p[3];
}
static inline void be64(guint8 *p, guint64 v) {
  be32(p, (guint32)(v >> 32));
  be32(p + 4, (guint32)v);
}
static inline guint64 rd64(const void *p) {
  return (guint64)rd32(p) << 32 | rd32((const guint8 *)p + 4);
}
static inline void append32(GByteArray *b, guint32 v) {
  guint8 t[4];
  be32(t, v);
  g_byte_array_append(b, t, 4);
}
static inline void append64(GByteArray *b, guint64 v) {
  guint8 t[8];
  be64(t, v);
  g_byte_array_append(b, t, 8);
}

/* prefix + id (+ id) (+ chunk): the fixed-size keys. */
static size_t key_post(guint8 *k, char prefix, guint32 a, guint32 b, guint16 chunk) {
  k[0] = (guint8)prefix;
  be32(k + 1, a);
  be32(k + 5, b);
  k[9] = (guint8)(chunk >> 8), k[10] = (guint8)chunk;
  return 11;
}
static size_t key_col(guint8 *k, guint32 field, guint32 chunk) {
  k[0] = K_COL;
  be32(k + 1, field);
  be32(k + 5, chunk);
  return 9;
}

/* ------------------------------------------------------- in-memory model */

typedef struct {
  guint32 id, table_id;
  ixia_field_type_t type;
  char *path;
  GHashTable *ids; /* GBytes* -> value id + 1; apply thread only */
  GPtrArray *vals; /* GBytes* by value id; guarded by idx->lock */
  GArray *vv;      /* ixia_val_t by value id, views of vals; guarded by idx->lock */
} field_t;

typedef struct {
  guint32 id;
  char *ns, *name;
  ixia_schema_t *schema;   /* NULL until a SCHEMA event; guarded by idx->lock */
  GHashTable *fields;      /* "type:path" -> field_t* (borrowed); guarded by idx->lock */
} table_t;

struct ixia_idx {
  char *path;
  rocksdb_t *db;
  rocksdb_options_t *opts;
  rocksdb_block_based_table_options_t *table_opts;
  rocksdb_cache_t *cache;
  rocksdb_filterpolicy_t *bloom;
  rocksdb_mergeoperator_t *merge;
  rocksdb_compactionfilter_t *cfilter;
  rocksdb_writeoptions_t *wopts;
  rocksdb_readoptions_t *ropts;
  guint max_values;

  GRWLock lock;
  GHashTable *tables;       /* "ns\ntable" -> table_t* */
  GPtrArray *tables_by_id;  /* table_t* by id (0 unused) */
  GPtrArray *fields;        /* field_t* by id (0 unused) */
  GPtrArray *pending_dict;  /* GBytes* key/value pairs to re-put after a failed write */

  /* apply thread */
  guint32 next_doc_id;
  gint64 max_version; /* atomic reads from other threads */

  guint64 events_applied, events_skipped, events_failed; /* atomic */
};

static char *field_name(ixia_field_type_t type, const char *path) {
  return g_strdup_printf("%d:%s", (int)type, path);
}

static void field_free(gpointer p) {
  field_t *f = p;
  if (!f) return;
  g_free(f->path);
  g_hash_table_destroy(f->ids);
  g_ptr_array_free(f->vals, TRUE);
  g_array_free(f->vv, TRUE);
  g_free(f);
}

static void table_free(gpointer p) {
  table_t *t = p;
  if (!t) return;
  g_free(t->ns);
  g_free(t->name);
  if (t->schema) ixia_schema_unref(t->schema);
  g_hash_table_destroy(t->fields);
  g_free(t);
}

static field_t *field_new(guint32 id, guint32 table_id, ixia_field_type_t type, const char *path) {
  field_t *f = g_new0(field_t, 1);
  f->id = id;
  f->table_id = table_id;
  f->type = type;
  f->path = g_strdup(path);
  f->ids = g_hash_table_new(g_bytes_hash, g_bytes_equal);
  f->vals = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  f->vv = g_array_new(FALSE, TRUE, sizeof(ixia_val_t));
  return f;
}

static table_t *table_new(guint32 id, const char *ns, const char *name) {
  table_t *t = g_new0(table_t, 1);
  t->id = id;
  t->ns = g_strdup(ns);
  t->name = g_strdup(name);
  t->fields = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  return t;
}

static char *table_name(const char *ns, const char *table) {
  return g_strdup_printf("%s\n%s", ns, table);
}

/* Caller holds the lock (or is the apply thread). */
static table_t *table_find(ixia_idx_t *idx, const char *ns, const char *table) {
  char *name = table_name(ns, table);
  table_t *t = g_hash_table_lookup(idx->tables, name);
  g_free(name);
  return t;
}

static field_t *field_find(table_t *t, ixia_field_type_t type, const char *path) {
  char *name = field_name(type, path);
  field_t *f = g_hash_table_lookup(t->fields, name);
  g_free(name);
  return f;
}

/* Registers (under the write lock) a loaded or created table/field. */
static void table_register(ixia_idx_t *idx, table_t *t) {
  g_hash_table_insert(idx->tables, table_name(t->ns, t->name), t);
  if (idx->tables_by_id->len <= t->id) g_ptr_array_set_size(idx->tables_by_id, (gint)t->id + 1);
  idx->tables_by_id->pdata[t->id] = t;
}

static gboolean field_register(ixia_idx_t *idx, field_t *f) {
  table_t *t = f->table_id < idx->tables_by_id->len ? idx->tables_by_id->pdata[f->table_id] : NULL;
  if (!t) return FALSE;
  g_hash_table_insert(t->fields, field_name(f->type, f->path), f);
  if (idx->fields->len <= f->id) g_ptr_array_set_size(idx->fields, (gint)f->id + 1);
  idx->fields->pdata[f->id] = f;
  return TRUE;
}

/* ---------------------------------------------------------- merge operator */

/* roaring_bitmap_free of this CRoaring version does not accept NULL. */
static void bm_free(roaring_bitmap_t *b) {
  if (b) roaring_bitmap_free(b);
}

static roaring_bitmap_t *bitmap_load(const char *p, size_t n) {
  if (n == 0) return roaring_bitmap_create();
  return roaring_bitmap_portable_deserialize_safe(p, n);
}

static char *bitmap_dump(const roaring_bitmap_t *b, size_t *len) {
  size_t n = roaring_bitmap_portable_size_in_bytes(b);
  char *out = malloc(n ? n : 1);
  if (!out) return NULL;
  *len = roaring_bitmap_portable_serialize(b, out);
  return out;
}

/* An operand: OP_IDS, u32 n_add, u32 n_rem, n_add ids, n_rem ids (sorted
 * u32). Plain id lists rather than serialized bitmaps: a read folds up to
 * max_successive_merges operands, and lists apply with add_many/remove_many
 * into one scratch buffer instead of allocating two bitmaps per operand. */
static gboolean op_header(const char *p, size_t n, guint32 *n_add, guint32 *n_rem) {
  if (n < 9 || p[0] != OP_IDS) return FALSE;
  *n_add = rd32(p + 1);
  *n_rem = rd32(p + 5);
  return (guint64)*n_add + *n_rem == (n - 9) / 4 && (n - 9) % 4 == 0;
}

static void op_ids(const char *p, guint32 n, guint32 *out) {
  for (guint32 i = 0; i < n; i++) out[i] = rd32(p + 4 * (size_t)i);
}

/* malloc'd because RocksDB hands merge results back to delete_value. */
static char *op_encode(const roaring_bitmap_t *add, const roaring_bitmap_t *rem, size_t *len) {
  guint64 na = roaring_bitmap_get_cardinality(add), nr = roaring_bitmap_get_cardinality(rem);
  size_t n = 9 + (size_t)(na + nr) * 4;
  char *out = malloc(n);
  guint32 *ids = malloc((size_t)(MAX(na, nr) + 1) * 4);
  if (!out || !ids) {
    free(out);
    free(ids);
    return NULL;
  }
  out[0] = OP_IDS;
  be32((guint8 *)out + 1, (guint32)na);
  be32((guint8 *)out + 5, (guint32)nr);
  guint8 *w = (guint8 *)out + 9;
  roaring_bitmap_to_uint32_array(add, ids);
  for (guint64 i = 0; i < na; i++, w += 4) be32(w, ids[i]);
  roaring_bitmap_to_uint32_array(rem, ids);
  for (guint64 i = 0; i < nr; i++, w += 4) be32(w, ids[i]);
  free(ids);
  *len = n;
  return out;
}

/* Applying (A1,R1) then (A2,R2) to e gives ((e - R1) | A1 - R2) | A2
 * = (e - (R1|R2)) | ((A1 - R2) | A2): operands compose into one, which is
 * applied as "remove R, then add A". */
static char *bitmap_merge(const char *existing, size_t elen, gboolean full,
                          const char *const *ops, const size_t *op_lens, int n, size_t *out_len) {
  guint32 most = 0;
  for (int i = 0; i < n; i++) {
    guint32 na, nr;
    if (!op_header(ops[i], op_lens[i], &na, &nr)) return NULL;
    most = MAX(most, MAX(na, nr));
  }
  roaring_bitmap_t *base = NULL, *add = NULL, *rem = NULL;
  if (full) {
    base = existing ? bitmap_load(existing, elen) : roaring_bitmap_create();
    if (!base) return NULL;
  } else {
    add = roaring_bitmap_create();
    rem = roaring_bitmap_create();
  }
  guint32 *ids = malloc(((size_t)most + 1) * 4);
  char *out = NULL;
  if (ids) {
    for (int i = 0; i < n; i++) {
      guint32 na, nr;
      op_header(ops[i], op_lens[i], &na, &nr);
      op_ids(ops[i] + 9 + 4 * (size_t)na, nr, ids);
      if (full) {
        roaring_bitmap_remove_many(base, nr, ids);
      } else {
        roaring_bitmap_remove_many(add, nr, ids);
        roaring_bitmap_add_many(rem, nr, ids);
      }
      op_ids(ops[i] + 9, na, ids);
      roaring_bitmap_add_many(full ? base : add, na, ids);
    }
    if (full) {
      roaring_bitmap_run_optimize(base);
      out = bitmap_dump(base, out_len);
    } else {
      out = op_encode(add, rem, out_len);
    }
    free(ids);
  }
  bm_free(base);
  bm_free(add);
  bm_free(rem);
  return out;
}

/* Column chunks: COL_MAGIC, then entries (u16 slot, u32 count, count x u32
 * value id), big-endian. An operand has the same format; a later entry for
 * a slot replaces an earlier one and count 0 clears it. A full merge keeps
 * one sorted entry per non-empty slot; a partial merge keeps the clears. */
typedef struct {
  const guint8 *vals;
  guint32 n;
  gboolean set;
} col_slot_t;

static gboolean col_scan(const guint8 *p, size_t n, col_slot_t *slots) {
  if (n < 1 || p[0] != COL_MAGIC) return FALSE;
  size_t off = 1;
  while (off < n) {
    if (n - off < 6) return FALSE;
    guint32 slot = (guint32)p[off] << 8 | p[off + 1];
    guint32 cnt = rd32(p + off + 2);
    off += 6;
    if (slot >= COL_SLOTS || cnt > (n - off) / 4) return FALSE;
    slots[slot].vals = p + off;
    slots[slot].n = cnt;
    slots[slot].set = TRUE;
    off += (size_t)cnt * 4;
  }
  return TRUE;
}

static char *col_merge(const char *existing, size_t elen, gboolean full, const char *const *ops,
                       const size_t *op_lens, int n, size_t *out_len) {
  col_slot_t *slots = g_new0(col_slot_t, COL_SLOTS);
  char *out = NULL;
  gboolean ok = !existing || col_scan((const guint8 *)existing, elen, slots);
  for (int i = 0; ok && i < n; i++) ok = col_scan((const guint8 *)ops[i], op_lens[i], slots);
  if (ok) {
    size_t size = 1;
    for (guint s = 0; s < COL_SLOTS; s++)
      if (slots[s].set && (slots[s].n || !full)) size += 6 + (size_t)slots[s].n * 4;
    out = malloc(size);
    if (out) {
      guint8 *w = (guint8 *)out;
      *w++ = COL_MAGIC;
      for (guint s = 0; s < COL_SLOTS; s++) {
        if (!slots[s].set || (!slots[s].n && full)) continue;
        w[0] = (guint8)(s >> 8), w[1] = (guint8)s;
        be32(w + 2, slots[s].n);
        memcpy(w + 6, slots[s].vals, (size_t)slots[s].n * 4);
        w += 6 + (size_t)slots[s].n * 4;
      }
      *out_len = size;
    }
  }
  g_free(slots);
  return out;
}

static char *merge_full(void *state, const char *key, size_t klen, const char *existing,
                        size_t elen, const char *const *ops, const size_t *op_lens, int n,
                        unsigned char *success, size_t *out_len) {
  (void)state;
  char *out = NULL;
  if (klen > 0 && key[0] == K_COL)
    out = col_merge(existing, elen, TRUE, ops, op_lens, n, out_len);
  else
    out = bitmap_merge(existing, elen, TRUE, ops, op_lens, n, out_len);
  *success = out != NULL;
  return out;
}

static char *merge_partial(void *state, const char *key, size_t klen, const char *const *ops,
                           const size_t *op_lens, int n, unsigned char *success,
                           size_t *out_len) {
  (void)state;
  char *out = NULL;
  if (klen > 0 && key[0] == K_COL)
    out = col_merge(NULL, 0, FALSE, ops, op_lens, n, out_len);
  else
    out = bitmap_merge(NULL, 0, FALSE, ops, op_lens, n, out_len);
  *success = out != NULL;
  return out;
}

static void merge_delete_value(void *state, const char *value, size_t len) {
  (void)state, (void)len;
  free((void *)value);
}

static const char *merge_name(void *state) {
  (void)state;
  return "ixia.index.v1";
}

static void noop_destroy(void *state) { (void)state; }

/* Drops posting chunks that became empty and column chunks without entries. */
static unsigned char compaction_filter(void *state, int level, const char *key, size_t klen,
                                       const char *val, size_t vlen, char **new_val,
                                       size_t *new_len, unsigned char *changed) {
  (void)state, (void)level, (void)new_val, (void)new_len;
  *changed = 0;
  if (klen == 0) return 0;
  if (key[0] == K_COL) return vlen <= 1;
  if ((key[0] == K_POST || key[0] == K_LIVE) && vlen <= 8) {
    roaring_bitmap_t *b = bitmap_load(val, vlen);
    gboolean empty = b && roaring_bitmap_is_empty(b);
    bm_free(b);
    return empty;
  }
  return 0;
}

static const char *compaction_filter_name(void *state) {
  (void)state;
  return "ixia.index.empty";
}

/* --------------------------------------------------------------- open */

static gboolean db_get(ixia_idx_t *idx, const rocksdb_readoptions_t *ro, const void *k, size_t klen,
                       char **val, size_t *vlen, ixia_error_t **err) {
  char *rerr = NULL;
  *val = rocksdb_get(idx->db, ro ? ro : idx->ropts, k, klen, vlen, &rerr);
  return ixia_error_from_rocksdb(err, rerr, "index read");
}

/* Calls fn for every key with the given one-byte prefix. */
static gboolean scan_prefix(ixia_idx_t *idx, char prefix,
                            gboolean (*fn)(ixia_idx_t *, const char *, size_t, const char *, size_t),
                            ixia_error_t **err) {
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  gboolean ok = TRUE;
  for (rocksdb_iter_seek(it, &prefix, 1); ok && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl < 1 || k[0] != prefix) break;
    const char *v = rocksdb_iter_value(it, &vl);
    ok = fn(idx, k, kl, v, vl);
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  if (!ok) return ixia_error_set(err, IXIA_EINTERNAL, "corrupt index entry (prefix %c)", prefix);
  return ixia_error_from_rocksdb(err, rerr, "index load");
}

static gboolean load_table(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl) {
  const char *sep = memchr(k + 1, 0, kl - 1);
  if (!sep || vl != 4) return FALSE;
  char *ns = g_strndup(k + 1, (gsize)(sep - k - 1));
  char *name = g_strndup(sep + 1, kl - (size_t)(sep + 1 - k));
  table_register(idx, table_new(rd32(v), ns, name));
  g_free(ns);
  g_free(name);
  return TRUE;
}

static gboolean load_schema(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl) {
  if (kl != 5 || vl < 8) return FALSE;
  guint32 tid = rd32(k + 1);
  table_t *t = tid < idx->tables_by_id->len ? idx->tables_by_id->pdata[tid] : NULL;
  ixia_schema_t *s = ixia_schema_parse(v + 8, vl - 8, NULL);
  if (!t || !s) {
    ixia_schema_unref(s);
    return FALSE;
  }
  s->version = (gint64)rd64(v);
  t->schema = s;
  return TRUE;
}

static gboolean load_field(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl) {
  if (kl < 6 || vl != 4) return FALSE;
  char *path = g_strndup(k + 6, kl - 6);
  field_t *f = field_new(rd32(v), rd32(k + 1), (ixia_field_type_t)(guint8)k[5], path);
  g_free(path);
  if (!field_register(idx, f)) {
    field_free(f);
    return FALSE;
  }
  return TRUE;
}

static gboolean load_value(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl) {
  if (kl < 5 || vl != 4) return FALSE;
  guint32 fid = rd32(k + 1), vid = rd32(v);
  field_t *f = fid < idx->fields->len ? idx->fields->pdata[fid] : NULL;
  if (!f || vid > G_MAXINT32) return FALSE;
  GBytes *b = g_bytes_new(k + 5, kl - 5);
  if (f->vals->len <= vid) {
    g_ptr_array_set_size(f->vals, (gint)vid + 1);
    g_array_set_size(f->vv, vid + 1);
  }
  if (f->vals->pdata[vid]) g_bytes_unref(f->vals->pdata[vid]);
  f->vals->pdata[vid] = b;
  gsize blen;
  const guint8 *bp = g_bytes_get_data(b, &blen);
  g_array_index(f->vv, ixia_val_t, vid) = (ixia_val_t){bp, (guint32)blen};
  g_hash_table_insert(f->ids, b, GUINT_TO_POINTER(vid + 1));
  return TRUE;
}

static gboolean load_state(ixia_idx_t *idx, ixia_error_t **err) {
  if (!scan_prefix(idx, K_TABLE, load_table, err) || !scan_prefix(idx, K_SCHEMA, load_schema, err) ||
      !scan_prefix(idx, K_FIELD, load_field, err) || !scan_prefix(idx, K_VALUE, load_value, err))
    return FALSE;
  /* Next document id: one past the highest id ever assigned. */
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  guint8 last[5] = {K_ID, 0xff, 0xff, 0xff, 0xff};
  rocksdb_iter_seek_for_prev(it, (const char *)last, sizeof last);
  idx->next_doc_id = 0;
  if (rocksdb_iter_valid(it)) {
    size_t kl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl == 5 && k[0] == K_ID) idx->next_doc_id = rd32(k + 1) + 1;
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  if (!ixia_error_from_rocksdb(err, rerr, "index load")) return FALSE;
  char *v;
  size_t vl;
  if (!db_get(idx, NULL, "Mv", 2, &v, &vl, err)) return FALSE;
  idx->max_version = v && vl == 8 ? (gint64)rd64(v) : 0;
  rocksdb_free(v);
  return TRUE;
}

ixia_idx_t *ixia_idx_open(const char *path, const ixia_config_t *cfg, ixia_error_t **err) {
  if (g_mkdir_with_parents(path, 0755) != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot create index directory %s: %s", path,
                   g_strerror(errno));
    return NULL;
  }
  ixia_idx_t *idx = g_new0(ixia_idx_t, 1);
  g_rw_lock_init(&idx->lock);
  idx->path = g_strdup(path);
  idx->max_values = (guint)ixia_config_int(cfg, "index.max_values_per_field");
  idx->tables = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  idx->tables_by_id = g_ptr_array_new_with_free_func(table_free);
  g_ptr_array_add(idx->tables_by_id, NULL);
  idx->fields = g_ptr_array_new_with_free_func(field_free);
  g_ptr_array_add(idx->fields, NULL);
  idx->pending_dict = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);

  idx->opts = rocksdb_options_create();
  rocksdb_options_set_create_if_missing(idx->opts, 1);
  rocksdb_options_increase_parallelism(idx->opts, 2);
  rocksdb_options_set_compression(idx->opts, rocksdb_lz4_compression);
  rocksdb_options_set_write_buffer_size(idx->opts,
                                        (size_t)ixia_config_int(cfg, "index.write_buffer_mb") << 20);
  idx->cache = rocksdb_cache_create_lru((size_t)ixia_config_int(cfg, "index.block_cache_mb") << 20);
  idx->table_opts = rocksdb_block_based_options_create();
  rocksdb_block_based_options_set_block_cache(idx->table_opts, idx->cache);
  /* Whole-key bloom filters: most point reads (document records, new
   * dictionary values) miss while loading. */
  idx->bloom = rocksdb_filterpolicy_create_bloom_full(10);
  rocksdb_block_based_options_set_filter_policy(idx->table_opts, idx->bloom);
  rocksdb_block_based_options_set_cache_index_and_filter_blocks(idx->table_opts, 1);
  rocksdb_options_set_block_based_table_factory(idx->opts, idx->table_opts);
  idx->merge = rocksdb_mergeoperator_create(NULL, noop_destroy, merge_full, merge_partial,
                                            merge_delete_value, merge_name);
  rocksdb_options_set_merge_operator(idx->opts, idx->merge);
  /* Bounds the operand chain a read has to fold. */
  rocksdb_options_set_max_successive_merges(idx->opts, 64);
  idx->cfilter = rocksdb_compactionfilter_create(NULL, noop_destroy, compaction_filter,
                                                 compaction_filter_name);
  rocksdb_options_set_compaction_filter(idx->opts, idx->cfilter);

  char *rerr = NULL;
  idx->db = rocksdb_open(idx->opts, path, &rerr);
  if (!ixia_error_from_rocksdb(err, rerr, "open index")) {
    if (err && *err) ixia_error_prefix(*err, "%s", path);
    ixia_idx_destroy(idx);
    return NULL;
  }
  idx->wopts = rocksdb_writeoptions_create();
  rocksdb_writeoptions_set_sync(idx->wopts, ixia_config_bool(cfg, "index.sync"));
  idx->ropts = rocksdb_readoptions_create();
  if (!load_state(idx, err)) {
    ixia_idx_destroy(idx);
    return NULL;
  }
  IXIA_INFO("index open at %s: %u tables, %u fields, next id %u, max version %" G_GINT64_FORMAT,
            path, idx->tables_by_id->len - 1, idx->fields->len - 1, idx->next_doc_id,
            idx->max_version);
  return idx;
}

void ixia_idx_destroy(ixia_idx_t *idx) {
  if (!idx) return;
  if (idx->db) rocksdb_close(idx->db);
  if (idx->wopts) rocksdb_writeoptions_destroy(idx->wopts);
  if (idx->ropts) rocksdb_readoptions_destroy(idx->ropts);
  if (idx->opts) rocksdb_options_destroy(idx->opts);
  /* The options and table options own the merge operator and the bloom
   * policy (shared pointers); the compaction filter is only borrowed. */
  if (idx->cfilter) rocksdb_compactionfilter_destroy(idx->cfilter);
  if (idx->table_opts) rocksdb_block_based_options_destroy(idx->table_opts);
  if (idx->cache) rocksdb_cache_destroy(idx->cache);
  g_hash_table_destroy(idx->tables);
  g_ptr_array_free(idx->tables_by_id, TRUE);
  g_ptr_array_free(idx->fields, TRUE);
  g_ptr_array_free(idx->pending_dict, TRUE);
  g_rw_lock_clear(&idx->lock);
  g_free(idx->path);
  g_free(idx);
}

/* ------------------------------------------------------------- records */

/* A document's indexed state. Stored under K_DOC as: u32 id, i64 version,
 * i64 expire_at, u8 flags, u32 n, n x (u32 field id, u32 value id) sorted. */
typedef struct {
  guint32 id;
  gboolean exists; /* has an id (stored or assigned in this batch) */
  gboolean dirty;
  gint64 version, expire_at;
  gboolean deleted;
  GArray *pairs; /* guint64: field id << 32 | value id, sorted */
} rec_t;

static void rec_free(gpointer p) {
  rec_t *r = p;
  g_array_free(r->pairs, TRUE);
  g_free(r);
}

static gboolean rec_decode(const char *v, size_t vl, rec_t *r) {
  if (vl < 25) return FALSE;
  r->id = rd32(v);
  r->version = (gint64)rd64(v + 4);
  r->expire_at = (gint64)rd64(v + 12);
  r->deleted = (v[20] & REC_DELETED) != 0;
  guint32 n = rd32(v + 21);
  if (n > (vl - 25) / 8) return FALSE;
  g_array_set_size(r->pairs, n);
  for (guint32 i = 0; i < n; i++) {
    const char *p = v + 25 + (size_t)i * 8;
    g_array_index(r->pairs, guint64, i) = (guint64)rd32(p) << 32 | rd32(p + 4);
  }
  r->exists = TRUE;
  return TRUE;
}

static GByteArray *rec_encode(const rec_t *r) {
  GByteArray *b = g_byte_array_sized_new(25 + r->pairs->len * 8);
  append32(b, r->id);
  append64(b, (guint64)r->version);
  append64(b, (guint64)r->expire_at);
  guint8 flags = r->deleted ? REC_DELETED : 0;
  g_byte_array_append(b, &flags, 1);
  append32(b, r->pairs->len);
  for (guint i = 0; i < r->pairs->len; i++) {
    guint64 p = g_array_index(r->pairs, guint64, i);
    append32(b, (guint32)(p >> 32));
    append32(b, (guint32)p);
  }
  return b;
}

static GBytes *doc_key(guint32 table_id, const char *key, size_t key_len) {
  guint8 *k = g_malloc(5 + key_len);
  k[0] = K_DOC;
  be32(k + 1, table_id);
  if (key_len) memcpy(k + 5, key, key_len);
  return g_bytes_new_take(k, 5 + key_len);
}

/* -------------------------------------------------------------- batches */

/* Pending changes of one posting or column key in a batch; the key is
 * inline (hashed by content) so a change allocates nothing once its key is
 * known. */
typedef struct {
  guint8 key[11];
  guint8 klen;
  roaring_bitmap_t *add, *rem; /* postings */
  GByteArray *col;             /* column operand */
} pend_t;

static guint pend_hash(gconstpointer p) {
  const pend_t *o = p;
  guint h = 2166136261u;
  for (guint i = 0; i < o->klen; i++) h = (h ^ o->key[i]) * 16777619u;
  return h;
}

static gboolean pend_equal(gconstpointer a, gconstpointer b) {
  const pend_t *x = a, *y = b;
  return x->klen == y->klen && memcmp(x->key, y->key, x->klen) == 0;
}

static void pend_free(gpointer p) {
  pend_t *o = p;
  bm_free(o->add);
  bm_free(o->rem);
  if (o->col) g_byte_array_free(o->col, TRUE);
  g_free(o);
}

/* The entry of probe's key in h, created when missing. */
static pend_t *pend_get(GHashTable *h, const pend_t *probe) {
  pend_t *o = g_hash_table_lookup(h, probe);
  if (!o) {
    o = g_new0(pend_t, 1);
    memcpy(o->key, probe->key, probe->klen);
    o->klen = probe->klen;
    g_hash_table_add(h, o);
  }
  return o;
}

typedef struct {
  field_t *field;
  guint old_len;
} undo_vals_t;

typedef struct {
  table_t *table;
  ixia_schema_t *old; /* reference */
} undo_schema_t;

typedef struct {
  ixia_idx_t *idx;
  rocksdb_writebatch_t *wb;
  GHashTable *recs;     /* GBytes doc key -> rec_t* (overlay of this batch) */
  GHashTable *posts;    /* pend_t* of posting keys */
  GHashTable *cols;     /* pend_t* of column keys */
  GArray *undo_vals;    /* undo_vals_t: fields that got new values */
  GArray *undo_schemas; /* undo_schema_t */
  GPtrArray *new_dict;  /* GBytes key/value pairs of new tables and fields */
  GHashTable *field_of; /* const ixia_index_t* (of a live schema) -> field_t* */
  guint32 next_doc_id;
  gint64 max_version;
} batch_t;

static void wb_put(batch_t *b, const void *k, size_t kl, const void *v, size_t vl) {
  rocksdb_writebatch_put(b->wb, k, kl, v, vl);
}

static void post_change(batch_t *b, char prefix, guint32 a, guint32 v, guint32 id, gboolean add) {
  pend_t probe;
  probe.klen = (guint8)key_post(probe.key, prefix, a, v, (guint16)(id >> POST_BITS));
  pend_t *o = pend_get(b->posts, &probe);
  if (!o->add) {
    o->add = roaring_bitmap_create();
    o->rem = roaring_bitmap_create();
  }
  /* Later changes of the batch win, as operands compose (see bitmap_merge). */
  roaring_bitmap_add(add ? o->add : o->rem, id);
  roaring_bitmap_remove(add ? o->rem : o->add, id);
}

static void col_set(batch_t *b, guint32 field, guint32 id, const guint32 *vids, guint n) {
  pend_t probe;
  probe.klen = (guint8)key_col(probe.key, field, id >> COL_BITS);
  pend_t *o = pend_get(b->cols, &probe);
  GByteArray *op = o->col;
  if (!op) {
    op = o->col = g_byte_array_new();
    guint8 magic = COL_MAGIC;
    g_byte_array_append(op, &magic, 1);
  }
  guint32 slot = id & (COL_SLOTS - 1);
  guint8 h[2] = {(guint8)(slot >> 8), (guint8)slot};
  g_byte_array_append(op, h, 2);
  append32(op, n);
  for (guint i = 0; i < n; i++) append32(op, vids[i]);
}

/* Queues a new dictionary entry (key -> 32-bit id) for the batch's write. */
static void dict_add(batch_t *b, GByteArray *key, guint32 id) {
  guint8 v[4];
  be32(v, id);
  g_ptr_array_add(b->new_dict, g_byte_array_free_to_bytes(key));
  g_ptr_array_add(b->new_dict, g_bytes_new(v, 4));
}

static table_t *table_get_or_create(batch_t *b, const char *ns, const char *name) {
  ixia_idx_t *idx = b->idx;
  table_t *t = table_find(idx, ns, name);
  if (t) return t;
  t = table_new(idx->tables_by_id->len, ns, name);
  GByteArray *k = g_byte_array_new();
  guint8 p = K_TABLE, zero = 0;
  g_byte_array_append(k, &p, 1);
  g_byte_array_append(k, (const guint8 *)ns, (guint)strlen(ns));
  g_byte_array_append(k, &zero, 1);
  g_byte_array_append(k, (const guint8 *)name, (guint)strlen(name));
  dict_add(b, k, t->id);
  g_rw_lock_writer_lock(&idx->lock);
  table_register(idx, t);
  g_rw_lock_writer_unlock(&idx->lock);
  return t;
}

static field_t *field_get_or_create(batch_t *b, table_t *t, const ixia_index_t *ix) {
  ixia_idx_t *idx = b->idx;
  field_t *f = g_hash_table_lookup(b->field_of, ix);
  if (f) return f;
  f = field_find(t, ix->type, ix->field);
  if (f) {
    g_hash_table_insert(b->field_of, (gpointer)ix, f);
    return f;
  }
  f = field_new(idx->fields->len, t->id, ix->type, ix->field);
  GByteArray *k = g_byte_array_new();
  guint8 p = K_FIELD, type = (guint8)ix->type;
  g_byte_array_append(k, &p, 1);
  append32(k, t->id);
  g_byte_array_append(k, &type, 1);
  g_byte_array_append(k, (const guint8 *)ix->field, (guint)strlen(ix->field));
  dict_add(b, k, f->id);
  g_rw_lock_writer_lock(&idx->lock);
  field_register(idx, f);
  g_rw_lock_writer_unlock(&idx->lock);
  g_hash_table_insert(b->field_of, (gpointer)ix, f);
  return f;
}

static guint32 value_get_or_create(batch_t *b, field_t *f, GBytes *val) {
  gpointer id = g_hash_table_lookup(f->ids, val);
  if (id) return GPOINTER_TO_UINT(id) - 1;
  guint32 vid = f->vals->len;
  gboolean seen = FALSE;
  for (guint i = 0; i < b->undo_vals->len && !seen; i++)
    seen = g_array_index(b->undo_vals, undo_vals_t, i).field == f;
  if (!seen) {
    undo_vals_t u = {f, f->vals->len};
    g_array_append_val(b->undo_vals, u);
  }
  gsize len;
  const guint8 *p = g_bytes_get_data(val, &len);
  guint8 *k = g_malloc(5 + len);
  k[0] = K_VALUE;
  be32(k + 1, f->id);
  if (len) memcpy(k + 5, p, len);
  guint8 v[4];
  be32(v, vid);
  wb_put(b, k, 5 + len, v, 4);
  g_free(k);
  ixia_val_t view = {p, (guint32)len};
  g_rw_lock_writer_lock(&b->idx->lock);
  g_ptr_array_add(f->vals, g_bytes_ref(val));
  g_array_append_val(f->vv, view);
  g_rw_lock_writer_unlock(&b->idx->lock);
  g_hash_table_insert(f->ids, val, GUINT_TO_POINTER(vid + 1));
  return vid;
}

/* The overlay record of a key (loaded on first use). */
static rec_t *rec_get(batch_t *b, guint32 table_id, const char *key, size_t key_len,
                      ixia_error_t **err) {
  GBytes *k = doc_key(table_id, key, key_len);
  rec_t *r = g_hash_table_lookup(b->recs, k);
  if (r) {
    g_bytes_unref(k);
    return r;
  }
  gsize kl;
  const char *kp = g_bytes_get_data(k, &kl);
  char *v;
  size_t vl;
  if (!db_get(b->idx, NULL, kp, kl, &v, &vl, err)) {
    g_bytes_unref(k);
    return NULL;
  }
  r = g_new0(rec_t, 1);
  r->pairs = g_array_new(FALSE, FALSE, sizeof(guint64));
  gboolean ok = !v || rec_decode(v, vl, r);
  rocksdb_free(v);
  if (!ok) {
    ixia_error_set(err, IXIA_EINTERNAL, "corrupt document record in index");
    rec_free(r);
    g_bytes_unref(k);
    return NULL;
  }
  g_hash_table_insert(b->recs, k, r);
  return r;
}

static void rec_assign_id(batch_t *b, rec_t *r, guint32 table_id, const char *key, size_t key_len) {
  r->id = b->next_doc_id++;
  r->exists = TRUE;
  guint8 k[5];
  k[0] = K_ID;
  be32(k + 1, r->id);
  guint8 *v = g_malloc(4 + key_len);
  be32(v, table_id);
  if (key_len) memcpy(v + 4, key, key_len);
  wb_put(b, k, 5, v, 4 + key_len);
  g_free(v);
}

static gboolean field_has_column(ixia_idx_t *idx, guint32 fid) {
  field_t *f = fid < idx->fields->len ? idx->fields->pdata[fid] : NULL;
  return f && f->type != IXIA_FIELD_TEXT;
}

/* Updates postings, live set and columns from old to new pairs of doc id. */
static void rec_diff(batch_t *b, guint32 table_id, guint32 id, const GArray *oldp, gboolean was_live,
                     const GArray *newp, gboolean now_live) {
  guint i = 0, j = 0;
  guint on = oldp ? oldp->len : 0, nn = newp ? newp->len : 0;
  GHashTable *changed = g_hash_table_new(g_direct_hash, g_direct_equal); /* field ids */
  while (i < on || j < nn) {
    guint64 o = i < on ? g_array_index(oldp, guint64, i) : G_MAXUINT64;
    guint64 n = j < nn ? g_array_index(newp, guint64, j) : G_MAXUINT64;
    if (o == n) {
      i++, j++;
      continue;
    }
    guint64 p = o < n ? o : n;
    post_change(b, K_POST, (guint32)(p >> 32), (guint32)p, id, o > n);
    g_hash_table_add(changed, GUINT_TO_POINTER((guint32)(p >> 32)));
    if (o < n) i++;
    else j++;
  }
  if (was_live != now_live) post_change(b, K_LIVE, table_id, 0, id, now_live);
  GHashTableIter it;
  gpointer fk;
  g_hash_table_iter_init(&it, changed);
  GArray *vids = g_array_new(FALSE, FALSE, sizeof(guint32));
  while (g_hash_table_iter_next(&it, &fk, NULL)) {
    guint32 fid = GPOINTER_TO_UINT(fk);
    if (!field_has_column(b->idx, fid)) continue;
    g_array_set_size(vids, 0);
    for (guint k = 0; k < nn; k++) {
      guint64 p = g_array_index(newp, guint64, k);
      if ((guint32)(p >> 32) == fid) {
        guint32 v = (guint32)p;
        g_array_append_val(vids, v);
      }
    }
    col_set(b, fid, id, (const guint32 *)vids->data, vids->len);
  }
  g_array_free(vids, TRUE);
  g_hash_table_destroy(changed);
}

static void fail_event(ixia_idx_t *idx, const ixia_idx_event_t *ev, ixia_error_t *why,
                       ixia_idx_failed_fn failed, void *ud) {
  g_atomic_pointer_add(&idx->events_failed, 1);
  if (failed) failed(ev, why, ud);
  ixia_error_destroy(why);
}

static int cmp_u64(gconstpointer a, gconstpointer b) {
  guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
  return x < y ? -1 : x > y;
}

/* Extracts and validates every declared field's values of a document. */
static GPtrArray **doc_extract(ixia_idx_t *idx, const ixia_schema_t *s, const cJSON *doc,
                               ixia_error_t **err) {
  GPtrArray **vals = g_new0(GPtrArray *, s->n_indexes + 1);
  for (guint i = 0; i < s->n_indexes; i++) {
    vals[i] = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    if (!ixia_doc_values(doc, &s->indexes[i], vals[i], err)) goto fail;
    if (vals[i]->len > idx->max_values) {
      ixia_error_set(err, IXIA_ETOOLARGE,
                     "field %s has %u values, more than index.max_values_per_field (%u)",
                     s->indexes[i].field, vals[i]->len, idx->max_values);
      goto fail;
    }
  }
  return vals;
fail:
  for (guint i = 0; i < s->n_indexes; i++)
    if (vals[i]) g_ptr_array_free(vals[i], TRUE);
  g_free(vals);
  return NULL;
}

typedef enum { EV_APPLIED, EV_SKIPPED, EV_FAILED, EV_ERROR } ev_result_t;

static ev_result_t apply_put(batch_t *b, const ixia_idx_event_t *ev, ixia_error_t **why,
                             ixia_error_t **err) {
  ixia_idx_t *idx = b->idx;
  table_t *t = table_find(idx, ev->ns, ev->table);
  ixia_schema_t *s = t ? t->schema : NULL;
  if (!s) {
    ixia_error_set(why, IXIA_ENOTFOUND, "no schema for table %s.%s in the index", ev->ns,
                   ev->table);
    return EV_FAILED;
  }
  rec_t *r = rec_get(b, t->id, ev->key, ev->key_len, err);
  if (!r) return EV_ERROR;
  if (r->exists && ev->version < r->version) return EV_SKIPPED;
  cJSON *doc = ixia_json_parse_stored(ev->doc, ev->doc_len);
  if (!doc || !cJSON_IsObject(doc)) {
    cJSON_Delete(doc);
    ixia_error_set(why, IXIA_EINVAL, "undecodable document (not a JSON object)");
    return EV_FAILED;
  }
  GPtrArray **vals = doc_extract(idx, s, doc, why);
  cJSON_Delete(doc);
  if (!vals) return EV_FAILED;

  GArray *pairs = g_array_new(FALSE, FALSE, sizeof(guint64));
  for (guint i = 0; i < s->n_indexes; i++) {
    field_t *f = field_get_or_create(b, t, &s->indexes[i]);
    for (guint j = 0; j < vals[i]->len; j++) {
      guint64 p = (guint64)f->id << 32 | value_get_or_create(b, f, vals[i]->pdata[j]);
      g_array_append_val(pairs, p);
    }
    g_ptr_array_free(vals[i], TRUE);
  }
  g_free(vals);
  g_array_sort(pairs, cmp_u64);
  guint w = 0; /* two declarations of one path and type share a field */
  for (guint i = 0; i < pairs->len; i++)
    if (w == 0 || g_array_index(pairs, guint64, i) != g_array_index(pairs, guint64, w - 1))
      g_array_index(pairs, guint64, w++) = g_array_index(pairs, guint64, i);
  g_array_set_size(pairs, w);

  gboolean was_live = r->exists && !r->deleted;
  if (!r->exists) rec_assign_id(b, r, t->id, ev->key, ev->key_len);
  rec_diff(b, t->id, r->id, was_live ? r->pairs : NULL, was_live, pairs, TRUE);
  g_array_free(r->pairs, TRUE);
  r->pairs = pairs;
  r->version = ev->version;
  r->expire_at = ev->expire_at;
  r->deleted = FALSE;
  r->dirty = TRUE;
  return EV_APPLIED;
}

static ev_result_t apply_delete(batch_t *b, const ixia_idx_event_t *ev, ixia_error_t **err) {
  /* A tombstone needs a table id even for a table the index has never seen,
   * so that a late, older put stays out. */
  table_t *t = table_get_or_create(b, ev->ns, ev->table);
  rec_t *r = rec_get(b, t->id, ev->key, ev->key_len, err);
  if (!r) return EV_ERROR;
  if (r->exists && ev->version < r->version) return EV_SKIPPED;
  gboolean was_live = r->exists && !r->deleted;
  if (!r->exists) rec_assign_id(b, r, t->id, ev->key, ev->key_len);
  if (was_live) rec_diff(b, t->id, r->id, r->pairs, TRUE, NULL, FALSE);
  g_array_set_size(r->pairs, 0);
  r->version = ev->version;
  r->expire_at = 0;
  r->deleted = TRUE;
  r->dirty = TRUE;
  return EV_APPLIED;
}

static ev_result_t apply_schema(batch_t *b, const ixia_idx_event_t *ev, ixia_error_t **why) {
  ixia_schema_t *s = ixia_schema_parse(ev->doc, ev->doc_len, why);
  if (!s) return EV_FAILED;
  s->version = ev->version;
  table_t *t = table_get_or_create(b, s->ns, s->table);
  if (t->schema && t->schema->version > ev->version) {
    ixia_schema_unref(s);
    return EV_SKIPPED;
  }
  guint8 k[5] = {K_SCHEMA};
  be32(k + 1, t->id);
  GByteArray *v = g_byte_array_new();
  append64(v, (guint64)ev->version);
  g_byte_array_append(v, (const guint8 *)s->json, (guint)strlen(s->json));
  wb_put(b, k, 5, v->data, v->len);
  g_byte_array_free(v, TRUE);
  for (guint i = 0; i < s->n_indexes; i++) field_get_or_create(b, t, &s->indexes[i]);
  undo_schema_t u = {t, t->schema};
  g_array_append_val(b->undo_schemas, u);
  g_rw_lock_writer_lock(&b->idx->lock);
  t->schema = s; /* the old reference moves to the undo log */
  g_rw_lock_writer_unlock(&b->idx->lock);
  return EV_APPLIED;
}

/* Puts the accumulated postings, columns and records into the write batch. */
static gint pend_cmp(gconstpointer a, gconstpointer b) {
  const pend_t *x = *(const pend_t *const *)a, *y = *(const pend_t *const *)b;
  int c = memcmp(x->key, y->key, MIN(x->klen, y->klen));
  return c ? c : (int)x->klen - (int)y->klen;
}

/* The entries of h in key order: the memtable skiplist inserts keys that
 * follow the previous one much faster than random ones. */
static GPtrArray *pend_sorted(GHashTable *h) {
  GPtrArray *a = g_ptr_array_sized_new(g_hash_table_size(h));
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, h);
  while (g_hash_table_iter_next(&it, &k, NULL)) g_ptr_array_add(a, k);
  g_ptr_array_sort(a, pend_cmp);
  return a;
}

static void batch_emit(batch_t *b) {
  GHashTableIter it;
  gpointer k, v;
  GPtrArray *posts = pend_sorted(b->posts);
  for (guint i = 0; i < posts->len; i++) {
    pend_t *o = posts->pdata[i];
    if (roaring_bitmap_is_empty(o->add) && roaring_bitmap_is_empty(o->rem)) continue;
    size_t len = 0;
    char *op = op_encode(o->add, o->rem, &len);
    if (!op) g_error("out of memory encoding a posting operand");
    rocksdb_writebatch_merge(b->wb, (const char *)o->key, o->klen, op, len);
    free(op);
  }
  g_ptr_array_free(posts, TRUE);
  GPtrArray *cols = pend_sorted(b->cols);
  for (guint i = 0; i < cols->len; i++) {
    pend_t *o = cols->pdata[i];
    rocksdb_writebatch_merge(b->wb, (const char *)o->key, o->klen, (const char *)o->col->data,
                             o->col->len);
  }
  g_ptr_array_free(cols, TRUE);
  g_hash_table_iter_init(&it, b->recs);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    rec_t *r = v;
    if (!r->dirty) continue;
    GByteArray *enc = rec_encode(r);
    gsize kl;
    const void *kp = g_bytes_get_data(k, &kl);
    wb_put(b, kp, kl, enc->data, enc->len);
    g_byte_array_free(enc, TRUE);
  }
  for (guint i = 0; i + 1 < b->new_dict->len; i += 2) {
    gsize kl, vl;
    const void *kp = g_bytes_get_data(b->new_dict->pdata[i], &kl);
    const void *vp = g_bytes_get_data(b->new_dict->pdata[i + 1], &vl);
    wb_put(b, kp, kl, vp, vl);
  }
}

/* The write failed: forget in-memory effects that never reached disk.
 * Tables and fields stay (a search may hold them); their dictionary entries
 * are written with the next batch. */
static void batch_undo(batch_t *b) {
  ixia_idx_t *idx = b->idx;
  g_rw_lock_writer_lock(&idx->lock);
  for (guint i = 0; i < b->undo_vals->len; i++) {
    undo_vals_t *u = &g_array_index(b->undo_vals, undo_vals_t, i);
    for (guint j = u->old_len; j < u->field->vals->len; j++)
      g_hash_table_remove(u->field->ids, u->field->vals->pdata[j]);
    g_ptr_array_set_size(u->field->vals, (gint)u->old_len);
    g_array_set_size(u->field->vv, u->old_len);
  }
  for (guint i = b->undo_schemas->len; i-- > 0;) {
    undo_schema_t *u = &g_array_index(b->undo_schemas, undo_schema_t, i);
    ixia_schema_unref(u->table->schema);
    u->table->schema = u->old;
    u->old = NULL;
  }
  g_array_set_size(b->undo_schemas, 0);
  g_rw_lock_writer_unlock(&idx->lock);
  for (guint i = 0; i < b->new_dict->len; i++)
    g_ptr_array_add(idx->pending_dict, g_bytes_ref(b->new_dict->pdata[i]));
}

static void batch_free(batch_t *b) {
  for (guint i = 0; i < b->undo_schemas->len; i++)
    ixia_schema_unref(g_array_index(b->undo_schemas, undo_schema_t, i).old);
  g_array_free(b->undo_schemas, TRUE);
  g_array_free(b->undo_vals, TRUE);
  g_ptr_array_free(b->new_dict, TRUE);
  g_hash_table_destroy(b->field_of);
  g_hash_table_destroy(b->recs);
  g_hash_table_destroy(b->posts);
  g_hash_table_destroy(b->cols);
  rocksdb_writebatch_destroy(b->wb);
}

gboolean ixia_idx_apply(ixia_idx_t *idx, const ixia_idx_event_t *events, guint n,
                        const ixia_idx_position_t *positions, guint n_positions,
                        ixia_idx_failed_fn failed, void *failed_ud, guint *applied,
                        ixia_error_t **err) {
  batch_t b = {
      .idx = idx,
      .wb = rocksdb_writebatch_create(),
      .recs = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, rec_free),
      .posts = g_hash_table_new_full(pend_hash, pend_equal, pend_free, NULL),
      .cols = g_hash_table_new_full(pend_hash, pend_equal, pend_free, NULL),
      .undo_vals = g_array_new(FALSE, FALSE, sizeof(undo_vals_t)),
      .undo_schemas = g_array_new(FALSE, FALSE, sizeof(undo_schema_t)),
      .new_dict = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref),
      .field_of = g_hash_table_new(g_direct_hash, g_direct_equal),
      .next_doc_id = idx->next_doc_id,
      .max_version = idx->max_version,
  };
  /* Dictionary entries of an earlier batch whose write failed. */
  for (guint i = 0; i < idx->pending_dict->len; i++)
    g_ptr_array_add(b.new_dict, g_bytes_ref(idx->pending_dict->pdata[i]));
  g_ptr_array_set_size(idx->pending_dict, 0);

  guint n_applied = 0, n_skipped = 0;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < n; i++) {
    const ixia_idx_event_t *ev = &events[i];
    ixia_error_t *why = NULL;
    ev_result_t res;
    switch (ev->op) {
      case IXIA_IDX_PUT: res = apply_put(&b, ev, &why, err); break;
      case IXIA_IDX_DELETE: res = apply_delete(&b, ev, err); break;
      case IXIA_IDX_SCHEMA: res = apply_schema(&b, ev, &why); break;
      default:
        ixia_error_set(&why, IXIA_EINVAL, "unknown event operation %d", (int)ev->op);
        res = EV_FAILED;
    }
    if (res == EV_ERROR) {
      ok = FALSE;
      break;
    }
    /* Every event read counts as processed, for min_version waits. */
    if (ev->version > b.max_version) b.max_version = ev->version;
    if (res == EV_APPLIED) n_applied++;
    else if (res == EV_SKIPPED) n_skipped++;
    else fail_event(idx, ev, why, failed, failed_ud);
  }
  if (ok) {
    batch_emit(&b);
    for (guint i = 0; i < n_positions; i++) {
      guint8 k[6] = {K_META, 'p'}, v[8];
      be32(k + 2, (guint32)positions[i].partition ^ 0x80000000u);
      be64(v, (guint64)positions[i].next_offset);
      wb_put(&b, k, 6, v, 8);
    }
    guint8 mv[8];
    be64(mv, (guint64)b.max_version);
    wb_put(&b, "Mv", 2, mv, 8);
    char *rerr = NULL;
    rocksdb_write(idx->db, idx->wopts, b.wb, &rerr);
    ok = ixia_error_from_rocksdb(err, rerr, "index write");
  }
  if (ok) {
    idx->next_doc_id = b.next_doc_id;
    g_atomic_pointer_set(&idx->max_version, b.max_version);
    g_atomic_pointer_add(&idx->events_applied, n_applied);
    g_atomic_pointer_add(&idx->events_skipped, n_skipped);
    if (applied) *applied = n_applied;
  } else {
    batch_undo(&b);
    if (applied) *applied = 0;
  }
  batch_free(&b);
  return ok;
}

/* ----------------------------------------------------------- small reads */

gint64 ixia_idx_position(ixia_idx_t *idx, gint32 partition) {
  guint8 k[6] = {K_META, 'p'};
  be32(k + 2, (guint32)partition ^ 0x80000000u);
  char *v = NULL;
  size_t vl = 0;
  if (!db_get(idx, NULL, k, 6, &v, &vl, NULL)) return -1;
  gint64 off = v && vl == 8 ? (gint64)rd64(v) : -1;
  rocksdb_free(v);
  return off;
}

gint64 ixia_idx_max_version(ixia_idx_t *idx) {
  return (gint64)g_atomic_pointer_get(&idx->max_version);
}

ixia_schema_t *ixia_idx_schema(const char *ns, const char *table, void *ud, ixia_error_t **err) {
  ixia_idx_t *idx = ud;
  g_rw_lock_reader_lock(&idx->lock);
  table_t *t = table_find(idx, ns, table);
  ixia_schema_t *s = t && t->schema ? ixia_schema_ref(t->schema) : NULL;
  g_rw_lock_reader_unlock(&idx->lock);
  if (!s) ixia_error_set(err, IXIA_ENOTFOUND, "no schema for table %s.%s in the index", ns, table);
  return s;
}

void ixia_idx_hits_clear(GArray *hits) {
  if (!hits) return;
  for (guint i = 0; i < hits->len; i++) g_free(g_array_index(hits, ixia_idx_hit_t, i).key);
  g_array_set_size(hits, 0);
}

gboolean ixia_idx_foreach_doc(ixia_idx_t *idx, const char *ns, const char *table,
                              const char *after, size_t after_len, ixia_idx_doc_fn fn, void *ud,
                              ixia_error_t **err) {
  g_rw_lock_reader_lock(&idx->lock);
  table_t *t = table_find(idx, ns, table);
  guint32 tid = t ? t->id : 0;
  g_rw_lock_reader_unlock(&idx->lock);
  if (!t) return TRUE; /* nothing indexed for it */
  GBytes *start = doc_key(tid, after ? after : "", after ? after_len : 0);
  gsize sl;
  const char *sp = g_bytes_get_data(start, &sl);
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  gboolean ok = TRUE;
  rec_t r = {.pairs = g_array_new(FALSE, FALSE, sizeof(guint64))};
  for (rocksdb_iter_seek(it, sp, sl); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl < 5 || memcmp(k, sp, 5) != 0) break;
    if (after && kl == sl && memcmp(k, sp, sl) == 0) continue;
    const char *v = rocksdb_iter_value(it, &vl);
    if (!rec_decode(v, vl, &r)) {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "corrupt document record in index");
      break;
    }
    if (!fn(k + 5, kl - 5, r.version, r.deleted, ud)) break;
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  g_array_free(r.pairs, TRUE);
  g_bytes_unref(start);
  return ixia_error_from_rocksdb(err, rerr, "index scan") && ok;
}

static guint64 dir_bytes(const char *path) {
  guint64 total = 0;
  GDir *d = g_dir_open(path, 0, NULL);
  if (!d) return 0;
  const char *name;
  while ((name = g_dir_read_name(d))) {
    if (!g_str_has_suffix(name, ".sst") && !g_str_has_suffix(name, ".log")) continue;
    char *full = g_build_filename(path, name, NULL);
    GStatBuf st;
    if (g_stat(full, &st) == 0) total += (guint64)st.st_size;
    g_free(full);
  }
  g_dir_close(d);
  return total;
}

void ixia_idx_get_stats(ixia_idx_t *idx, ixia_idx_stats_t *out) {
  memset(out, 0, sizeof *out);
  out->events_applied = (guint64)g_atomic_pointer_get(&idx->events_applied);
  out->events_skipped = (guint64)g_atomic_pointer_get(&idx->events_skipped);
  out->events_failed = (guint64)g_atomic_pointer_get(&idx->events_failed);
  out->max_version = ixia_idx_max_version(idx);
  out->disk_bytes = dir_bytes(idx->path);
  /* Live documents: the cardinalities of every table's live posting. */
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  char p = K_LIVE;
  for (rocksdb_iter_seek(it, &p, 1); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl < 1 || k[0] != K_LIVE) break;
    const char *v = rocksdb_iter_value(it, &vl);
    roaring_bitmap_t *bm = bitmap_load(v, vl);
    if (bm) out->documents += roaring_bitmap_get_cardinality(bm);
    bm_free(bm);
  }
  rocksdb_iter_destroy(it);
}

/* --------------------------------------------------------------- search */

typedef struct {
  ixia_idx_t *idx;
  table_t *table;
  rocksdb_readoptions_t *ro;
  rocksdb_iterator_t *pit; /* postings */
  rocksdb_iterator_t *vit; /* value dictionary */
  roaring_bitmap_t *live;  /* loaded on first use */
  guint64 postings, max_postings;
  gint64 deadline_us;
  ixia_error_t **err;
} eval_t;

static gboolean eval_deadline(eval_t *e) {
  if (e->deadline_us > 0 && g_get_monotonic_time() > e->deadline_us)
    return ixia_error_set(e->err, IXIA_EUNAVAILABLE,
                          "query deadline exceeded (query.deadline_ms or the request timeout)");
  return TRUE;
}

static gboolean iter_ok(rocksdb_iterator_t *it, ixia_error_t **err) {
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  return ixia_error_from_rocksdb(err, rerr, "index scan");
}

/* ORs every chunk of a posting (prefix: kind, a, b) into out. */
static gboolean eval_posting(eval_t *e, char kind, guint32 a, guint32 b, roaring_bitmap_t *out) {
  guint8 k[11];
  key_post(k, kind, a, b, 0);
  for (rocksdb_iter_seek(e->pit, (const char *)k, 9); rocksdb_iter_valid(e->pit);
       rocksdb_iter_next(e->pit)) {
    size_t kl, vl;
    const char *key = rocksdb_iter_key(e->pit, &kl);
    if (kl != 11 || memcmp(key, k, 9) != 0) break;
    const char *v = rocksdb_iter_value(e->pit, &vl);
    roaring_bitmap_t *bm = bitmap_load(v, vl);
    if (!bm) return ixia_error_set(e->err, IXIA_EINTERNAL, "corrupt posting in index");
    e->postings += roaring_bitmap_get_cardinality(bm);
    roaring_bitmap_or_inplace(out, bm);
    bm_free(bm);
    if (e->max_postings && e->postings > e->max_postings)
      return ixia_error_set(e->err, IXIA_ETOOLARGE,
                            "query reads more than query.max_postings (%" G_GUINT64_FORMAT
                            ") postings on this shard",
                            e->max_postings);
    if (!eval_deadline(e)) return FALSE;
  }
  return iter_ok(e->pit, e->err);
}

static field_t *eval_field(eval_t *e, const ixia_index_t *ix) {
  g_rw_lock_reader_lock(&e->idx->lock);
  field_t *f = field_find(e->table, ix->type, ix->field);
  g_rw_lock_reader_unlock(&e->idx->lock);
  return f;
}

/* ORs the postings of one value (if the dictionary has it) into out. */
static gboolean eval_value(eval_t *e, field_t *f, GBytes *val, roaring_bitmap_t *out) {
  gsize len;
  const guint8 *p = g_bytes_get_data(val, &len);
  guint8 *k = g_malloc(5 + len);
  k[0] = K_VALUE;
  be32(k + 1, f->id);
  if (len) memcpy(k + 5, p, len);
  char *v;
  size_t vl;
  gboolean ok = db_get(e->idx, e->ro, k, 5 + len, &v, &vl, e->err);
  g_free(k);
  if (ok && v && vl == 4) ok = eval_posting(e, K_POST, f->id, rd32(v), out);
  rocksdb_free(v);
  return ok;
}

/* ORs the postings of every value of f between lo and hi (encoded, NULL =
 * unbounded), or with the given prefix, into out: one dictionary scan. */
static roaring_bitmap_t *eval_live(eval_t *e);

/* Adds to out every live document of the table holding one of the value
 * ids `vids` in field f, reading f's column chunks. */
static gboolean eval_column(eval_t *e, field_t *f, const roaring_bitmap_t *vids,
                            roaring_bitmap_t *out) {
  roaring_bitmap_t *live = eval_live(e);
  if (!live) return FALSE;
  col_slot_t *slots = g_new(col_slot_t, COL_SLOTS);
  roaring_uint32_iterator_t *it = roaring_create_iterator(live);
  gboolean ok = TRUE;
  while (ok && it->has_value) {
    guint32 chunk = it->current_value >> COL_BITS;
    guint8 k[9];
    key_col(k, f->id, chunk);
    char *v = NULL;
    size_t vl = 0;
    ok = eval_deadline(e) && db_get(e->idx, e->ro, k, 9, &v, &vl, e->err);
    memset(slots, 0, sizeof(col_slot_t) * COL_SLOTS);
    if (ok && v && !col_scan((const guint8 *)v, vl, slots))
      ok = ixia_error_set(e->err, IXIA_EINTERNAL, "corrupt column chunk in index");
    guint32 base = chunk << COL_BITS, checked = 0;
    /* Only live ids of this chunk: deleted documents keep no column slot,
     * but a slot may outlive a delete until its chunk is rewritten. */
    for (; ok && it->has_value && it->current_value >> COL_BITS == chunk;
         roaring_advance_uint32_iterator(it)) {
      const col_slot_t *sl = &slots[it->current_value - base];
      checked++;
      for (guint32 i = 0; v && sl->set && i < sl->n; i++)
        if (roaring_bitmap_contains(vids, rd32(sl->vals + 4 * i))) {
          roaring_bitmap_add(out, it->current_value);
          break;
        }
    }
    rocksdb_free(v);
    e->postings += checked;
    if (ok && e->max_postings && e->postings > e->max_postings)
      ok = ixia_error_set(e->err, IXIA_ETOOLARGE,
                          "query reads more than query.max_postings (%" G_GUINT64_FORMAT
                          ") postings on this shard",
                          e->max_postings);
  }
  roaring_free_uint32_iterator(it);
  g_free(slots);
  return ok;
}

static gboolean eval_scan(eval_t *e, field_t *f, GBytes *lo, gboolean lo_incl, GBytes *hi,
                          gboolean hi_incl, GBytes *prefix, roaring_bitmap_t *out) {
  roaring_bitmap_t *vids = roaring_bitmap_create(); /* value ids in the range */
  GByteArray *start = g_byte_array_new();
  guint8 p = K_VALUE;
  g_byte_array_append(start, &p, 1);
  append32(start, f->id);
  GBytes *from = prefix ? prefix : lo;
  gsize from_len = 0, hi_len = 0, pre_len = 0;
  const guint8 *from_p = from ? g_bytes_get_data(from, &from_len) : NULL;
  const guint8 *hi_p = hi ? g_bytes_get_data(hi, &hi_len) : NULL;
  const guint8 *pre_p = prefix ? g_bytes_get_data(prefix, &pre_len) : NULL;
  if (from_p) g_byte_array_append(start, from_p, (guint)from_len);
  gboolean ok = TRUE;
  for (rocksdb_iter_seek(e->vit, (const char *)start->data, start->len);
       ok && rocksdb_iter_valid(e->vit); rocksdb_iter_next(e->vit)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(e->vit, &kl);
    if (kl < 5 || memcmp(k, start->data, 5) != 0) break;
    const guint8 *val = (const guint8 *)k + 5;
    size_t len = kl - 5;
    if (pre_p && (len < pre_len || memcmp(val, pre_p, pre_len) != 0)) break;
    if (lo && !lo_incl && len == from_len && memcmp(val, from_p, len) == 0) continue;
    if (hi_p) {
      int c = memcmp(val, hi_p, MIN(len, hi_len));
      if (c == 0) c = len < hi_len ? -1 : len > hi_len;
      if (c > 0 || (c == 0 && !hi_incl)) break;
    }
    const char *v = rocksdb_iter_value(e->vit, &vl);
    if (vl != 4) {
      ok = ixia_error_set(e->err, IXIA_EINTERNAL, "corrupt value dictionary in index");
      break;
    }
    roaring_bitmap_add(vids, rd32(v));
  }
  g_byte_array_free(start, TRUE);
  ok = ok && iter_ok(e->vit, e->err);
  /* A wide range over a high-cardinality field (prices, timestamps) would
   * read one posting per distinct value; reading the column chunks of the
   * live documents instead costs one read per 1,024 documents. */
  if (ok && !prefix && roaring_bitmap_get_cardinality(vids) > RANGE_POSTINGS_MAX &&
      field_has_column(e->idx, f->id))
    ok = eval_column(e, f, vids, out);
  else if (ok) {
    roaring_uint32_iterator_t *it = roaring_create_iterator(vids);
    for (; ok && it->has_value; roaring_advance_uint32_iterator(it))
      ok = eval_posting(e, K_POST, f->id, it->current_value, out);
    roaring_free_uint32_iterator(it);
  }
  roaring_bitmap_free(vids);
  return ok;
}

static roaring_bitmap_t *eval_live(eval_t *e) {
  if (!e->live) {
    e->live = roaring_bitmap_create();
    if (!eval_posting(e, K_LIVE, e->table->id, 0, e->live)) {
      bm_free(e->live);
      e->live = NULL;
    }
  }
  return e->live;
}

static roaring_bitmap_t *eval_filter(eval_t *e, const ixia_filter_t *f) {
  roaring_bitmap_t *out = NULL;
  gboolean ok = TRUE;
  switch (f->kind) {
    case IXIA_F_AND:
    case IXIA_F_OR:
      for (guint i = 0; ok && i < f->n_children; i++) {
        roaring_bitmap_t *c = eval_filter(e, f->children[i]);
        if (!c) {
          ok = FALSE;
        } else if (!out) {
          out = c;
        } else {
          if (f->kind == IXIA_F_AND) roaring_bitmap_and_inplace(out, c);
          else roaring_bitmap_or_inplace(out, c);
          bm_free(c);
        }
        /* An empty conjunction stays empty: skip the remaining children. */
        if (ok && f->kind == IXIA_F_AND && roaring_bitmap_is_empty(out)) break;
      }
      if (ok && !out) {
        /* No children: AND is vacuously true, OR false. */
        if (f->kind == IXIA_F_OR) out = roaring_bitmap_create();
        else if (eval_live(e)) out = roaring_bitmap_copy(e->live);
        else ok = FALSE;
      }
      break;
    case IXIA_F_NOT: {
      roaring_bitmap_t *live = eval_live(e);
      roaring_bitmap_t *c = live && f->n_children == 1 ? eval_filter(e, f->children[0]) : NULL;
      if (c) out = roaring_bitmap_andnot(live, c);
      else ok = FALSE;
      bm_free(c);
      break;
    }
    case IXIA_F_MATCH: /* every token: a conjunction of term lookups */
    case IXIA_F_TERM:
    case IXIA_F_IN: {
      field_t *fld = eval_field(e, f->field);
      out = roaring_bitmap_create();
      if (!fld || !f->values) break;
      for (guint i = 0; ok && i < f->values->len; i++) {
        if (f->kind != IXIA_F_MATCH) {
          ok = eval_value(e, fld, f->values->pdata[i], out);
          continue;
        }
        roaring_bitmap_t *tok = roaring_bitmap_create();
        ok = eval_value(e, fld, f->values->pdata[i], tok);
        if (i == 0) roaring_bitmap_or_inplace(out, tok);
        else roaring_bitmap_and_inplace(out, tok);
        bm_free(tok);
        if (roaring_bitmap_is_empty(out)) break;
      }
      break;
    }
    case IXIA_F_RANGE:
    case IXIA_F_PREFIX:
    case IXIA_F_EXISTS: {
      field_t *fld = eval_field(e, f->field);
      out = roaring_bitmap_create();
      if (!fld) break;
      if (f->kind == IXIA_F_RANGE)
        ok = eval_scan(e, fld, f->lo, f->lo_incl, f->hi, f->hi_incl, NULL, out);
      else if (f->kind == IXIA_F_PREFIX)
        ok = f->values && f->values->len == 1 &&
             eval_scan(e, fld, NULL, FALSE, NULL, FALSE, f->values->pdata[0], out);
      else
        ok = eval_scan(e, fld, NULL, FALSE, NULL, FALSE, NULL, out);
      break;
    }
    default:
      ok = ixia_error_set(e->err, IXIA_EINVAL, "unknown filter kind %d", (int)f->kind);
  }
  if (!ok) {
    bm_free(out);
    return NULL;
  }
  return out;
}

/* Reads the hits' keys and versions from their records. */
static gboolean search_hits(eval_t *e, const roaring_bitmap_t *res, gint64 after_id, guint limit,
                            GArray *hits) {
  if (limit == 0 || after_id >= (gint64)G_MAXUINT32) return TRUE;
  if (after_id < -1) after_id = -1;
  roaring_uint32_iterator_t *it = roaring_create_iterator(res);
  gboolean ok = TRUE;
  guint got = 0;
  if (it->has_value) roaring_move_uint32_iterator_equalorlarger(it, (guint32)(after_id + 1));
  rec_t r = {.pairs = g_array_new(FALSE, FALSE, sizeof(guint64))};
  for (; ok && it->has_value && got < limit; roaring_advance_uint32_iterator(it)) {
    guint32 id = it->current_value;
    guint8 k[5] = {K_ID};
    be32(k + 1, id);
    char *v = NULL, *rv = NULL;
    size_t vl, rl;
    ok = db_get(e->idx, e->ro, k, 5, &v, &vl, e->err);
    if (ok && (!v || vl < 4)) ok = ixia_error_set(e->err, IXIA_EINTERNAL, "document id %u has no key", id);
    GBytes *dk = ok ? doc_key(rd32(v), v + 4, vl - 4) : NULL;
    if (ok) {
      gsize dl;
      const char *dp = g_bytes_get_data(dk, &dl);
      ok = db_get(e->idx, e->ro, dp, dl, &rv, &rl, e->err);
      if (ok && (!rv || !rec_decode(rv, rl, &r)))
        ok = ixia_error_set(e->err, IXIA_EINTERNAL, "document id %u has no record", id);
    }
    if (ok) {
      ixia_idx_hit_t h = {ixia_memdup0(v + 4, vl - 4), r.version, id};
      g_array_append_val(hits, h);
      got++;
    }
    if (dk) g_bytes_unref(dk);
    rocksdb_free(v);
    rocksdb_free(rv);
  }
  g_array_free(r.pairs, TRUE);
  roaring_free_uint32_iterator(it);
  return ok;
}

/* One aggregation field's values for the ids of one column chunk. */
typedef struct {
  field_t *field;
  guint32 start[COL_SLOTS], count[COL_SLOTS];
  GArray *vals; /* ixia_val_t */
} agg_col_t;

static gboolean agg_load_chunk(eval_t *e, agg_col_t *c, guint32 chunk) {
  memset(c->count, 0, sizeof c->count);
  g_array_set_size(c->vals, 0);
  if (!c->field) return TRUE;
  guint8 k[9];
  key_col(k, c->field->id, chunk);
  char *v;
  size_t vl;
  if (!db_get(e->idx, e->ro, k, 9, &v, &vl, e->err)) return FALSE;
  if (!v) return TRUE;
  col_slot_t *slots = g_new0(col_slot_t, COL_SLOTS);
  gboolean ok = col_scan((const guint8 *)v, vl, slots);
  if (ok) {
    /* The value strings are never freed once committed: the borrowed
     * pointers stay valid after the lock is dropped. */
    g_rw_lock_reader_lock(&e->idx->lock);
    const ixia_val_t *vv = (const ixia_val_t *)c->field->vv->data;
    guint32 nv = c->field->vv->len, used = 0;
    g_array_set_size(c->vals, (guint)(vl / 4)); /* an upper bound of the values held */
    ixia_val_t *out = (ixia_val_t *)c->vals->data;
    for (guint s = 0; s < COL_SLOTS; s++) {
      if (!slots[s].set) continue;
      c->start[s] = used;
      for (guint32 i = 0; i < slots[s].n; i++) {
        guint32 vid = rd32(slots[s].vals + 4 * i);
        if (vid < nv && vv[vid].p) out[used++] = vv[vid];
      }
      c->count[s] = used - c->start[s];
    }
    g_array_set_size(c->vals, used);
    g_rw_lock_reader_unlock(&e->idx->lock);
  }
  g_free(slots);
  rocksdb_free(v);
  if (!ok) return ixia_error_set(e->err, IXIA_EINTERNAL, "corrupt column chunk in index");
  return TRUE;
}

static const ixia_val_t no_val = {NULL, 0};

static gboolean search_aggs(eval_t *e, const ixia_query_t *q, const roaring_bitmap_t *res,
                            ixia_aggs_t *aggs) {
  guint nf = q->n_agg_fields;
  agg_col_t *cols = g_new0(agg_col_t, nf ? nf : 1);
  const ixia_val_t **vals = g_new0(const ixia_val_t *, nf ? nf : 1);
  guint *nvals = g_new0(guint, nf ? nf : 1);
  for (guint i = 0; i < nf; i++) {
    cols[i].field = eval_field(e, q->agg_fields[i]);
    /* Text fields have no column; the parser refuses aggregations on them. */
    if (cols[i].field && cols[i].field->type == IXIA_FIELD_TEXT) cols[i].field = NULL;
    cols[i].vals = g_array_new(FALSE, FALSE, sizeof(ixia_val_t));
  }
  roaring_uint32_iterator_t *it = roaring_create_iterator(res);
  guint32 buf[1024];
  guint32 cur = G_MAXUINT32;
  gboolean ok = TRUE;
  guint32 got;
  while (ok && (got = roaring_read_uint32_iterator(it, buf, G_N_ELEMENTS(buf))) > 0) {
    for (guint32 j = 0; ok && j < got; j++) {
      guint32 id = buf[j], chunk = id >> COL_BITS, slot = id & (COL_SLOTS - 1);
      if (chunk != cur) {
        cur = chunk;
        ok = eval_deadline(e);
        for (guint i = 0; ok && i < nf; i++)
          ok = agg_load_chunk(e, &cols[i], chunk);
      }
      for (guint i = 0; ok && i < nf; i++) {
        nvals[i] = cols[i].count[slot];
        vals[i] = nvals[i] ? (const ixia_val_t *)cols[i].vals->data + cols[i].start[slot] : &no_val;
      }
      if (ok) ok = ixia_aggs_add(aggs, vals, nvals, e->err);
    }
  }
  roaring_free_uint32_iterator(it);
  for (guint i = 0; i < nf; i++) g_array_free(cols[i].vals, TRUE);
  g_free(cols);
  g_free(vals);
  g_free(nvals);
  return ok;
}

gboolean ixia_idx_search(ixia_idx_t *idx, const ixia_query_t *q, gint64 after_id, guint limit,
                         gint64 deadline_us, const ixia_query_limits_t *lim, GArray *hits,
                         guint64 *total, ixia_aggs_t *aggs, ixia_error_t **err) {
  g_rw_lock_reader_lock(&idx->lock);
  table_t *t = table_find(idx, q->ns, q->table);
  gboolean has_schema = t && t->schema;
  g_rw_lock_reader_unlock(&idx->lock);
  if (total) *total = 0;
  if (!has_schema)
    return ixia_error_set(err, IXIA_ENOTFOUND, "no schema for table %s.%s in the index", q->ns,
                          q->table);
  eval_t e = {.idx = idx, .table = t, .max_postings = lim ? lim->max_postings : 0,
              .deadline_us = deadline_us, .err = err};
  const rocksdb_snapshot_t *snap = rocksdb_create_snapshot(idx->db);
  e.ro = rocksdb_readoptions_create();
  rocksdb_readoptions_set_snapshot(e.ro, snap);
  e.pit = rocksdb_create_iterator(idx->db, e.ro);
  e.vit = rocksdb_create_iterator(idx->db, e.ro);

  gboolean ok = FALSE;
  roaring_bitmap_t *res = q->filter ? eval_filter(&e, q->filter) : NULL;
  if (!q->filter && eval_live(&e)) res = roaring_bitmap_copy(e.live);
  if (res && eval_live(&e)) {
    /* Postings of deleted documents are removed with the delete; the AND
     * with live also covers dropped-and-readded fields. */
    roaring_bitmap_and_inplace(res, e.live);
    if (total) *total = roaring_bitmap_get_cardinality(res);
    ok = eval_deadline(&e) && (!hits || search_hits(&e, res, after_id, limit, hits)) &&
         (!aggs || search_aggs(&e, q, res, aggs));
  }
  bm_free(res);
  bm_free(e.live);
  rocksdb_iter_destroy(e.pit);
  rocksdb_iter_destroy(e.vit);
  rocksdb_readoptions_destroy(e.ro);
  rocksdb_release_snapshot(idx->db, snap);
  return ok;
}

rocksdb_t *ixia_idx_db(ixia_idx_t *idx) { return idx->db; }

static void hash_len_bytes(XXH3_state_t *h, const void *p, size_t n) {
  guint8 len[8];
  be64(len, n);
  XXH3_128bits_update(h, len, 8);
  XXH3_128bits_update(h, p, n);
}

/* Canonical form of a posting/live chunk: the ids big-endian. NULL for an
 * empty chunk (skipped) or an undecodable one (*bad). */
static GByteArray *canonical_bitmap(const char *v, size_t vl, gboolean *bad) {
  roaring_bitmap_t *b = bitmap_load(v, vl);
  if (!b) {
    *bad = TRUE;
    return NULL;
  }
  guint64 n = roaring_bitmap_get_cardinality(b);
  GByteArray *c = NULL;
  if (n > 0) {
    guint32 *ids = g_new(guint32, n);
    roaring_bitmap_to_uint32_array(b, ids);
    c = g_byte_array_sized_new((guint)(n * 4));
    for (guint64 i = 0; i < n; i++) append32(c, ids[i]);
    g_free(ids);
  }
  bm_free(b);
  return c;
}

/* Canonical form of a column chunk: its non-empty slots in order. */
static GByteArray *canonical_column(const char *v, size_t vl, gboolean *bad) {
  col_slot_t *slots = g_new0(col_slot_t, COL_SLOTS);
  GByteArray *c = NULL;
  if (!col_scan((const guint8 *)v, vl, slots)) {
    *bad = TRUE;
  } else {
    for (guint s = 0; s < COL_SLOTS; s++) {
      if (!slots[s].set || slots[s].n == 0) continue;
      if (!c) c = g_byte_array_new();
      append32(c, s);
      append32(c, slots[s].n);
      g_byte_array_append(c, slots[s].vals, slots[s].n * 4);
    }
  }
  g_free(slots);
  return c;
}

gboolean ixia_idx_checksum(ixia_idx_t *idx, ixia_idx_checksum_t *out, ixia_error_t **err) {
  memset(out, 0, sizeof *out);
  XXH3_state_t *h = XXH3_createState();
  if (!h) return ixia_error_set(err, IXIA_EINTERNAL, "out of memory (checksum state)");
  XXH3_128bits_reset(h);
  rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
  const rocksdb_snapshot_t *snap = rocksdb_create_snapshot(idx->db);
  rocksdb_readoptions_set_snapshot(ro, snap);
  rocksdb_readoptions_set_fill_cache(ro, 0);
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, ro);
  rec_t r = {.pairs = g_array_new(FALSE, FALSE, sizeof(guint64))};
  gboolean bad = FALSE;
  for (rocksdb_iter_seek_to_first(it); !bad && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl == 0 || k[0] == K_META) continue;
    const char *v = rocksdb_iter_value(it, &vl);
    if (k[0] == K_POST || k[0] == K_LIVE || k[0] == K_COL) {
      GByteArray *c = k[0] == K_COL ? canonical_column(v, vl, &bad) : canonical_bitmap(v, vl, &bad);
      if (!c) continue;
      hash_len_bytes(h, k, kl);
      hash_len_bytes(h, c->data, c->len);
      g_byte_array_free(c, TRUE);
      if (k[0] == K_POST) out->postings++;
    } else {
      hash_len_bytes(h, k, kl);
      hash_len_bytes(h, v, vl);
      if (k[0] == K_TABLE) out->tables++;
      if (k[0] == K_DOC) {
        if (!rec_decode(v, vl, &r)) bad = TRUE;
        else if (r.deleted) out->tombstones++;
        else out->documents++;
      }
    }
    out->records++;
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  rocksdb_release_snapshot(idx->db, snap);
  rocksdb_readoptions_destroy(ro);
  g_array_free(r.pairs, TRUE);
  XXH128_hash_t sum = XXH3_128bits_digest(h);
  XXH3_freeState(h);
  if (!ixia_error_from_rocksdb(err, rerr, "index checksum scan")) return FALSE;
  if (bad) return ixia_error_set(err, IXIA_EINTERNAL, "corrupt record in the index (checksum scan)");
  g_snprintf(out->hex, sizeof out->hex, "%016" G_GINT64_MODIFIER "x%016" G_GINT64_MODIFIER "x",
             (guint64)sum.high64, (guint64)sum.low64);
  return TRUE;
}
