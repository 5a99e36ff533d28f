/* Opening an index shard, and the reads that do not plan anything: consumer
 * positions, the version mark, schemas, stats, the walk over a table's
 * document records (verify, dump) and the canonical checksum.
 *
 * Open configures RocksDB for this workload (LZ4, bloom filters for the
 * point reads of records and dictionary values, the merge operator and
 * compaction filter of idx_merge.c), then loads what searches and the apply
 * thread keep in memory: the dictionaries with their counts, and from the
 * column blocks of every field but text its doc values and, for a numeric
 * field, its points. */
#include <stdatomic.h>
#include <errno.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "idx.h"
#include "rocksdb_cache.h"

static gboolean db_get(ixia_idx_t *idx, const void *k, size_t klen, char **val, size_t *vlen,
                       ixia_error_t **err) {
  char *rerr = NULL;
  *val = rocksdb_get(idx->db, idx->ropts, k, klen, vlen, &rerr);
  return ixia_error_from_rocksdb(err, rerr, "index read");
}

/* Calls fn for every key with the given prefix. */
static gboolean scan_prefix(ixia_idx_t *idx, const char *prefix, size_t plen,
                            gboolean (*fn)(ixia_idx_t *, const char *, size_t, const char *, size_t,
                                           void *),
                            void *ud, ixia_error_t **err) {
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  gboolean ok = TRUE;
  for (rocksdb_iter_seek(it, prefix, plen); ok && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl < plen || memcmp(k, prefix, plen) != 0) break;
    const char *v = rocksdb_iter_value(it, &vl);
    ok = fn(idx, k, kl, v, vl, ud);
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  if (!ok) return ixia_error_set(err, IXIA_EINTERNAL, "corrupt index entry (prefix %c)", prefix[0]);
  return ixia_error_from_rocksdb(err, rerr, "index load");
}

static gboolean load_table(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl,
                           void *ud) {
  (void)ud;
  const char *sep = memchr(k + 1, 0, kl - 1);
  if (!sep || vl != 4) return FALSE;
  char *ns = g_strndup(k + 1, (gsize)(sep - k - 1));
  char *name = g_strndup(sep + 1, kl - (size_t)(sep + 1 - k));
  ixia_idx_table_register(idx, ixia_idx_table_new(ixia_bytes_get32(v), ns, name));
  g_free(ns);
  g_free(name);
  return TRUE;
}

static gboolean load_schema(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl,
                            void *ud) {
  (void)ud;
  if (kl != 5 || vl < 8) return FALSE;
  guint32 tid = ixia_bytes_get32(k + 1);
  table_t *t = tid < idx->tables_by_id->len ? idx->tables_by_id->pdata[tid] : NULL;
  ixia_schema_t *s = ixia_schema_parse(v + 8, vl - 8, NULL);
  if (!t || !s) {
    ixia_schema_unref(s);
    return FALSE;
  }
  s->version = (gint64)ixia_bytes_get64(v);
  t->schema = s;
  return TRUE;
}

static gboolean load_field(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl,
                           void *ud) {
  (void)ud;
  if (kl < 6 || vl != 4 || (guint8)k[5] > IXIA_FIELD_TIMESTAMP) return FALSE;
  /* path, then for text fields \0 and the analyzer */
  const char *nul = memchr(k + 6, 0, kl - 6);
  char *path = g_strndup(k + 6, nul ? (gsize)(nul - k - 6) : kl - 6);
  char *analyzer = nul ? g_strndup(nul + 1, kl - (gsize)(nul + 1 - k)) : NULL;
  field_t *f = ixia_idx_field_new(ixia_bytes_get32(v), ixia_bytes_get32(k + 1), (ixia_field_type_t)(guint8)k[5], path, analyzer, &idx->docvals);
  g_free(path);
  g_free(analyzer);
  if (!ixia_idx_field_register(idx, f)) {
    ixia_idx_field_free(f);
    return FALSE;
  }
  return TRUE;
}

static gboolean load_value(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl,
                           void *ud) {
  (void)ud;
  if (kl < 5 || vl != 8) return FALSE;
  guint32 fid = ixia_bytes_get32(k + 1), vid = ixia_bytes_get32(v);
  field_t *f = fid < idx->fields->len ? idx->fields->pdata[fid] : NULL;
  if (!f || f->numeric || vid > G_MAXINT32) return FALSE;
  GBytes *b = g_bytes_new(k + 5, kl - 5);
  ixia_idx_value_set(f, vid, b, ixia_bytes_get32(v + 4));
  g_bytes_unref(b);
  return TRUE;
}

/* A text field's token total ("Ml" field id). */
static gboolean load_total(ixia_idx_t *idx, const char *k, size_t kl, const char *v, size_t vl,
                           void *ud) {
  (void)ud;
  if (kl != 6 || vl != 8) return FALSE;
  guint32 fid = ixia_bytes_get32(k + 2);
  field_t *f = fid < idx->fields->len ? idx->fields->pdata[fid] : NULL;
  if (f) f->total_len = (gint64)ixia_bytes_get64(v);
  return TRUE;
}

/* What the column blocks of one field give at open: the field's doc
 * values, and the points of a numeric field. */
typedef struct {
  field_t *f;
  GArray *keys; /* guint64 */
  GArray *ids;  /* guint32 */
} col_load_t;

static gboolean load_column_block(ixia_idx_t *idx, const char *k, size_t kl, const char *v,
                                  size_t vl, void *ud) {
  (void)idx;
  col_load_t *cl = ud;
  guint8 width = cl->f->numeric ? 8 : 4;
  if (kl != 9) return FALSE;
  col_t *c = ixia_idx_col_decode(v, vl);
  if (!c || c->width != width) {
    ixia_idx_col_free(c);
    return FALSE;
  }
  guint32 base = ixia_bytes_get32(k + 5) << BLOCK_BITS;
  for (guint s = 0; s < BLOCK_SLOTS; s++) {
    guint32 n;
    const void *vals = col_slot(c, s, &n);
    guint32 id = base + s;
    if (n) ixia_docvals_set(cl->f->dv, id, vals, n); /* (no doc values: a no-op) */
    if (!cl->keys) continue;
    for (guint32 i = 0; i < n; i++) {
      guint64 key = num_key(((const double *)vals)[i]);
      g_array_append_val(cl->keys, key);
      g_array_append_val(cl->ids, id);
    }
  }
  ixia_idx_col_free(c);
  return TRUE;
}

typedef struct {
  guint64 key;
  guint32 id;
} kid_t;

static int kid_cmp(const void *a, const void *b) {
  const kid_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static gboolean load_columns(ixia_idx_t *idx, field_t *f, ixia_error_t **err) {
  col_load_t cl = {f, NULL, NULL};
  if (f->numeric) {
    cl.keys = g_array_new(FALSE, FALSE, sizeof(guint64));
    cl.ids = g_array_new(FALSE, FALSE, sizeof(guint32));
  }
  guint8 prefix[5] = {K_COL};
  ixia_bytes_put32(prefix + 1, f->id);
  gboolean ok = scan_prefix(idx, (const char *)prefix, 5, load_column_block, &cl, err);
  if (ok && f->numeric) {
    gsize n = cl.keys->len;
    kid_t *kv = g_new(kid_t, MAX(n, 1));
    for (gsize i = 0; i < n; i++)
      kv[i] = (kid_t){g_array_index(cl.keys, guint64, i), g_array_index(cl.ids, guint32, i)};
    qsort(kv, n, sizeof *kv, kid_cmp);
    for (gsize i = 0; i < n; i++) {
      g_array_index(cl.keys, guint64, i) = kv[i].key;
      g_array_index(cl.ids, guint32, i) = kv[i].id;
    }
    g_free(kv);
    ixia_points_load(f->points, (const guint64 *)(void *)cl.keys->data,
                     (const guint32 *)(void *)cl.ids->data, n);
  }
  if (cl.keys) g_array_free(cl.keys, TRUE);
  if (cl.ids) g_array_free(cl.ids, TRUE);
  return ok;
}

static gboolean load_state(ixia_idx_t *idx, ixia_error_t **err) {
  static const char t[] = {K_TABLE}, s[] = {K_SCHEMA}, f[] = {K_FIELD}, v[] = {K_VALUE};
  if (!scan_prefix(idx, t, 1, load_table, NULL, err) ||
      !scan_prefix(idx, s, 1, load_schema, NULL, err) ||
      !scan_prefix(idx, f, 1, load_field, NULL, err) ||
      !scan_prefix(idx, v, 1, load_value, NULL, err) ||
      !scan_prefix(idx, "Ml", 2, load_total, NULL, err))
    return FALSE;
  for (guint i = 1; i < idx->fields->len; i++) {
    field_t *fld = idx->fields->pdata[i];
    /* Keyword and bool columns are read at open only to fill doc values. */
    gboolean wanted = fld && (fld->numeric || fld->dv);
    if (wanted && !load_columns(idx, fld, err)) return FALSE;
  }
  /* Next document id: one past the highest id ever assigned. */
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  guint8 last[5] = {K_ID, 0xff, 0xff, 0xff, 0xff};
  rocksdb_iter_seek_for_prev(it, (const char *)last, sizeof last);
  idx->next_doc_id = 0;
  if (rocksdb_iter_valid(it)) {
    size_t kl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl == 5 && k[0] == K_ID) idx->next_doc_id = ixia_bytes_get32(k + 1) + 1;
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  if (!ixia_error_from_rocksdb(err, rerr, "index load")) return FALSE;
  char *mv;
  size_t vl;
  if (!db_get(idx, "Mv", 2, &mv, &vl, err)) return FALSE;
  idx->max_version = mv && vl == 8 ? (gint64)ixia_bytes_get64(mv) : 0;
  rocksdb_free(mv);
  return TRUE;
}

/* Format 3 to 4: format 3 kept no stale set, so which documents were
 * indexed before a field was added is unknown; every live document counts
 * as stale (negations are re-checked by the query API) until it is written
 * again or backfilled. One write with the new format mark. */
static gboolean upgrade_from_3(ixia_idx_t *idx, ixia_error_t **err) {
  rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
  rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
  const char prefix = K_LIVE;
  guint n = 0;
  for (rocksdb_iter_seek(it, &prefix, 1); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl == 0 || k[0] != K_LIVE) break;
    if (kl != 11 || ixia_bytes_get32(k + 5) != LIVE_ALL) continue;
    guint8 sk[11];
    memcpy(sk, k, 11);
    ixia_bytes_put32(sk + 5, LIVE_STALE);
    const char *v = rocksdb_iter_value(it, &vl);
    rocksdb_writebatch_put(wb, (const char *)sk, 11, v, vl);
    n++;
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  if (!rerr) {
    guint8 f[4];
    ixia_bytes_put32(f, IDX_FORMAT);
    rocksdb_writebatch_put(wb, "Mf", 2, (const char *)f, 4);
    rocksdb_write(idx->db, idx->wopts, wb, &rerr);
  }
  rocksdb_writebatch_destroy(wb);
  if (!ixia_error_from_rocksdb(err, rerr, "index format upgrade 3 -> 4")) return FALSE;
  IXIA_INFO("index upgraded from format 3 to %d: %u live-set chunks counted stale until "
            "rewritten or backfilled", IDX_FORMAT, n);
  return TRUE;
}

/* An empty index gets the current format mark; format 3 is upgraded; an
 * index of another format is refused with what to do. */
static gboolean check_format(ixia_idx_t *idx, const char *path, ixia_error_t **err) {
  char *v;
  size_t vl;
  if (!db_get(idx, "Mf", 2, &v, &vl, err)) return FALSE;
  guint32 format = v && vl == 4 ? ixia_bytes_get32(v) : 0;
  rocksdb_free(v);
  if (format == IDX_FORMAT) return TRUE;
  if (format == 3) return upgrade_from_3(idx, err);
  if (format == 0) {
    rocksdb_iterator_t *it = rocksdb_create_iterator(idx->db, idx->ropts);
    rocksdb_iter_seek_to_first(it);
    gboolean empty = !rocksdb_iter_valid(it);
    rocksdb_iter_destroy(it);
    if (empty) {
      guint8 f[4];
      ixia_bytes_put32(f, IDX_FORMAT);
      char *rerr = NULL;
      rocksdb_put(idx->db, idx->wopts, "Mf", 2, (const char *)f, 4, &rerr);
      return ixia_error_from_rocksdb(err, rerr, "index format mark");
    }
    format = 1;
  }
  return ixia_error_set(err, IXIA_EINVAL,
                        "index at %s has format %u; this ixia reads format %d. Rebuild it "
                        "(ixia-recovery rebuild-index) or remove the directory: the indexer then "
                        "re-reads its partitions from Kafka",
                        path, format, IDX_FORMAT);
}

ixia_idx_t *ixia_idx_open(const char *path, const ixia_config_t *cfg, ixia_error_t **err) {
  if (g_mkdir_with_parents(path, 0755) != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot create index directory %s: %s", path,
                   g_strerror(errno));
    return NULL;
  }
  ixia_idx_t *idx = g_new0(ixia_idx_t, 1);
  g_rw_lock_init(&idx->dict_lock);
  idx->path = g_strdup(path);
  idx->max_values = (guint)ixia_config_int(cfg, "index.max_values_per_field");
  idx->tables = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  idx->tables_by_id = g_ptr_array_new_with_free_func(ixia_idx_table_free);
  g_ptr_array_add(idx->tables_by_id, NULL);
  idx->fields = g_ptr_array_new_with_free_func(ixia_idx_field_free);
  g_ptr_array_add(idx->fields, NULL);
  idx->pending_dict = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  idx->dirty_counts = g_hash_table_new(g_direct_hash, g_direct_equal);
  idx->cache = ixia_idx_cache_new((gsize)ixia_config_int(cfg, "index.cache_mb") << 20);
  idx->docvals.limit = (gsize)ixia_config_int(cfg, "index.docvalues_mb") << 20;
  /* A new epoch per open: cursors of an earlier open cannot be honoured
   * (the history is in memory). Below 2^53 so it travels as a JSON number. */
  guint64 epoch = (((guint64)g_random_int() << 21) ^ g_random_int()) & ((G_GUINT64_CONSTANT(1) << 52) - 1);
  idx->history = ixia_idx_history_new((gsize)ixia_config_int(cfg, "index.sort_history_mb") << 20,
                                      ixia_config_int(cfg, "index.sort_history_seconds") * G_USEC_PER_SEC,
                                      epoch | 1);

  idx->opts = rocksdb_options_create();
  rocksdb_options_set_create_if_missing(idx->opts, 1);
  rocksdb_options_increase_parallelism(idx->opts, 2);
  if (ixia_config_bool(cfg, "index.compaction_low_priority")) ixia_rocksdb_lower_compaction_priority();
  rocksdb_options_set_compression(idx->opts, rocksdb_lz4_compression);
  /* The bottommost level (most of the index once compacted) in zstd:
   * 0.59x of lz4's size there (docs/INDEX-FORMAT.md), and searches read
   * postings and columns through the decoded-block cache, so its slower
   * decompression is paid on cache misses only. */
  rocksdb_options_set_bottommost_compression(idx->opts, rocksdb_zstd_compression);
  rocksdb_options_set_write_buffer_size(idx->opts,
                                        (size_t)ixia_config_int(cfg, "index.write_buffer_mb") << 20);
  idx->block_cache =
      ixia_rocksdb_cache_new((size_t)ixia_config_int(cfg, "index.block_cache_mb") << 20);
  idx->table_opts = rocksdb_block_based_options_create();
  rocksdb_block_based_options_set_block_cache(idx->table_opts, idx->block_cache);
  /* Whole-key bloom filters: most point reads (document records, new
   * dictionary values) miss while loading. */
  idx->bloom = rocksdb_filterpolicy_create_bloom_full(10);
  rocksdb_block_based_options_set_filter_policy(idx->table_opts, idx->bloom);
  rocksdb_block_based_options_set_cache_index_and_filter_blocks(idx->table_opts, 1);
  /* The point reads of a search (a page's id records) find their key by a
   * hash inside the data block, skip the memtable by its bloom filter, and
   * repeat from the row cache. */
  rocksdb_block_based_options_set_data_block_index_type(
      idx->table_opts, rocksdb_block_based_table_data_block_index_type_binary_search_and_hash);
  rocksdb_block_based_options_set_data_block_hash_ratio(idx->table_opts, 0.75);
  rocksdb_options_set_block_based_table_factory(idx->opts, idx->table_opts);
  rocksdb_options_set_memtable_prefix_bloom_size_ratio(idx->opts, 0.05);
  rocksdb_options_set_memtable_whole_key_filtering(idx->opts, 1);
  gint64 row_mb = ixia_config_int(cfg, "index.row_cache_mb");
  if (row_mb > 0) {
    idx->row_cache = rocksdb_cache_create_lru((size_t)row_mb << 20);
    rocksdb_options_set_row_cache(idx->opts, idx->row_cache);
  }
  idx->merge = ixia_idx_merge_operator_new();
  rocksdb_options_set_merge_operator(idx->opts, idx->merge);
  /* Bounds the operand chain a read has to fold. */
  rocksdb_options_set_max_successive_merges(idx->opts, 0);
  idx->cfilter = ixia_idx_compaction_filter_new();
  rocksdb_options_set_compaction_filter(idx->opts, idx->cfilter);

  /* Opened by column family (the default one only) for the handle that
   * batched multi-get takes (ixia_idx_resolve_hits). */
  const char *names[] = {"default"};
  const rocksdb_options_t *cf_opts[] = {idx->opts};
  char *rerr = NULL;
  idx->db = rocksdb_open_column_families(idx->opts, path, 1, names, cf_opts, &idx->cf, &rerr);
  if (!ixia_error_from_rocksdb(err, rerr, "open index")) {
    if (err && *err) ixia_error_prefix(*err, "%s", path);
    ixia_idx_destroy(idx);
    return NULL;
  }
  idx->wopts = rocksdb_writeoptions_create();
  rocksdb_writeoptions_set_sync(idx->wopts, ixia_config_bool(cfg, "index.sync"));
  idx->ropts = rocksdb_readoptions_create();
  if (!check_format(idx, path, err) || !load_state(idx, err)) {
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
  ixia_error_t *err = NULL;
  if (idx->db && idx->wopts && !ixia_idx_flush_counts(idx, &err)) {
    IXIA_WARN("index %s: dictionary counts not saved at close: %s", idx->path, err->message);
    ixia_error_destroy(err);
  }
  if (idx->cf) rocksdb_column_family_handle_destroy(idx->cf);
  if (idx->db) rocksdb_close(idx->db);
  if (idx->wopts) rocksdb_writeoptions_destroy(idx->wopts);
  if (idx->ropts) rocksdb_readoptions_destroy(idx->ropts);
  if (idx->opts) rocksdb_options_destroy(idx->opts);
  /* The options and table options own the merge operator and the bloom
   * policy (shared pointers); the compaction filter is only borrowed. */
  if (idx->cfilter) rocksdb_compactionfilter_destroy(idx->cfilter);
  if (idx->table_opts) rocksdb_block_based_options_destroy(idx->table_opts);
  if (idx->block_cache) rocksdb_cache_destroy(idx->block_cache);
  if (idx->row_cache) rocksdb_cache_destroy(idx->row_cache);
  ixia_idx_cache_destroy(idx->cache);
  ixia_idx_history_destroy(idx->history);
  g_hash_table_destroy(idx->tables);
  g_ptr_array_free(idx->tables_by_id, TRUE);
  g_ptr_array_free(idx->fields, TRUE);
  g_ptr_array_free(idx->pending_dict, TRUE);
  if (idx->dirty_counts) g_hash_table_destroy(idx->dirty_counts);
  g_rw_lock_clear(&idx->dict_lock);
  g_free(idx->path);
  g_free(idx);
}

/* ----------------------------------------------------------- small reads */

gint64 ixia_idx_position(ixia_idx_t *idx, gint32 partition) {
  guint8 k[6] = {K_META, 'p'};
  ixia_bytes_put32(k + 2, (guint32)partition ^ 0x80000000u);
  char *v = NULL;
  size_t vl = 0;
  if (!db_get(idx, k, 6, &v, &vl, NULL)) return -1;
  gint64 off = v && vl == 8 ? (gint64)ixia_bytes_get64(v) : -1;
  rocksdb_free(v);
  return off;
}

gint64 ixia_idx_max_version(ixia_idx_t *idx) {
  return (gint64)atomic_load(&idx->max_version);
}

ixia_schema_t *ixia_idx_schema(const char *ns, const char *table, void *ud, ixia_error_t **err) {
  ixia_idx_t *idx = ud;
  g_rw_lock_reader_lock(&idx->dict_lock);
  table_t *t = ixia_idx_table_find(idx, ns, table);
  ixia_schema_t *s = t && t->schema ? ixia_schema_ref(t->schema) : NULL;
  g_rw_lock_reader_unlock(&idx->dict_lock);
  if (!s) ixia_error_set(err, IXIA_ENOTFOUND, "no schema for table %s.%s in the index", ns, table);
  return s;
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
  out->events_applied = (guint64)atomic_load(&idx->events_applied);
  out->events_skipped = (guint64)atomic_load(&idx->events_skipped);
  out->events_failed = (guint64)atomic_load(&idx->events_failed);
  out->max_version = ixia_idx_max_version(idx);
  out->disk_bytes = dir_bytes(idx->path);
  /* Live documents: every table's live set, and the points' memory. */
  GArray *tids = g_array_new(FALSE, FALSE, sizeof(guint32));
  GPtrArray *points = g_ptr_array_new();
  g_rw_lock_reader_lock(&idx->dict_lock);
  for (guint i = 1; i < idx->tables_by_id->len; i++) {
    table_t *t = idx->tables_by_id->pdata[i];
    if (t) g_array_append_val(tids, t->id);
  }
  for (guint i = 1; i < idx->fields->len; i++) {
    field_t *f = idx->fields->pdata[i];
    if (f && f->points) g_ptr_array_add(points, f->points);
  }
  g_rw_lock_reader_unlock(&idx->dict_lock);
  for (guint i = 0; i < tids->len; i++) {
    blk_t *live = ixia_idx_posting(idx, K_LIVE, g_array_index(tids, guint32, i), LIVE_ALL, NULL);
    if (live) out->documents += live->card;
    ixia_idx_blk_unref(live);
    blk_t *stale = ixia_idx_posting(idx, K_LIVE, g_array_index(tids, guint32, i), LIVE_STALE, NULL);
    if (stale) out->stale_documents += stale->card;
    ixia_idx_blk_unref(stale);
  }
  for (guint i = 0; i < points->len; i++) out->points_bytes += ixia_points_bytes(points->pdata[i]);
  out->docvalues_bytes = atomic_load(&idx->docvals.used);
  g_array_free(tids, TRUE);
  g_ptr_array_free(points, TRUE);
  ixia_idx_cache_stats_t cs;
  ixia_idx_cache_stats(idx->cache, &cs);
  out->cache_bytes = cs.bytes;
  out->cache_hits = cs.hits;
  out->cache_misses = cs.misses;
}

rocksdb_t *ixia_idx_db(ixia_idx_t *idx) { return idx->db; }

/* ------------------------------------------------------------ checksum */

static void hash_len_bytes(XXH3_state_t *h, const void *p, size_t n) {
  guint8 len[8];
  ixia_bytes_put64(len, n);
  XXH3_128bits_update(h, len, 8);
  XXH3_128bits_update(h, p, n);
}

/* Canonical form of a posting/live chunk: the ids big-endian. NULL for an
 * empty chunk (skipped) or an undecodable one (*bad). */
static GByteArray *canonical_bitmap(const char *v, size_t vl, gboolean *bad) {
  roaring_bitmap_t *b = ixia_idx_bitmap_load(v, vl);
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
    for (guint64 i = 0; i < n; i++) ixia_bytes_append32(c, ids[i]);
    g_free(ids);
  }
  roaring_bitmap_free(b);
  return c;
}

/* Canonical form of a column block: its non-empty slots in order, values
 * as stored (big-endian). */
static GByteArray *canonical_column(const char *v, size_t vl, gboolean *bad) {
  col_t *col = ixia_idx_col_decode(v, vl);
  if (!col) {
    *bad = TRUE;
    return NULL;
  }
  GByteArray *c = NULL;
  for (guint s = 0; s < BLOCK_SLOTS; s++) {
    guint32 n;
    const void *vals = col_slot(col, s, &n);
    if (!n) continue;
    if (!c) c = g_byte_array_new();
    ixia_bytes_append32(c, s);
    ixia_bytes_append32(c, n);
    for (guint32 i = 0; i < n; i++) {
      if (col->width == 8) {
        guint64 bits;
        memcpy(&bits, (const double *)vals + i, 8);
        ixia_bytes_append64(c, bits);
      } else {
        ixia_bytes_append32(c, ((const guint32 *)vals)[i]);
      }
    }
  }
  ixia_idx_col_free(col);
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
  gboolean bad = FALSE;
  for (rocksdb_iter_seek_to_first(it); !bad && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl == 0 || k[0] == K_META) continue;
    const char *v = rocksdb_iter_value(it, &vl);
    /* The stale set is bookkeeping: replicas that read the partitions in
     * another interleaving differ there with the same contents. */
    if (k[0] == K_LIVE && kl == 11 && ixia_bytes_get32(k + 5) == LIVE_STALE) continue;
    if (k[0] == K_POST || k[0] == K_LIVE || is_col_key(k, kl)) {
      GByteArray *c = is_col_key(k, kl) ? canonical_column(v, vl, &bad) : canonical_bitmap(v, vl, &bad);
      if (!c) continue;
      hash_len_bytes(h, k, kl);
      hash_len_bytes(h, c->data, c->len);
      g_byte_array_free(c, TRUE);
      if (k[0] == K_POST) out->postings++;
    } else {
      hash_len_bytes(h, k, kl);
      /* A value's count is an estimate written every few batches: its id
       * is the content. */
      hash_len_bytes(h, v, k[0] == K_VALUE ? MIN(vl, 4) : vl);
      if (k[0] == K_TABLE) out->tables++;
      if (k[0] == K_DOC) {
        guint32 id;
        gint64 version;
        gboolean deleted;
        if (!ixia_idx_rec_decode(v, vl, &id, &version, &deleted, NULL)) bad = TRUE;
        else if (deleted) out->tombstones++;
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
  XXH128_hash_t sum = XXH3_128bits_digest(h);
  XXH3_freeState(h);
  if (!ixia_error_from_rocksdb(err, rerr, "index checksum scan")) return FALSE;
  if (bad) return ixia_error_set(err, IXIA_EINTERNAL, "corrupt record in the index (checksum scan)");
  g_snprintf(out->hex, sizeof out->hex, "%016" G_GINT64_MODIFIER "x%016" G_GINT64_MODIFIER "x",
             (guint64)sum.high64, (guint64)sum.low64);
  return TRUE;
}
