/* ixia-recovery rebuild-index and dump-index: an index shard built offline
 * from a snapshot of the truth store, and its canonical checksum. Why the
 * rebuilt index then catches up from Kafka without losing edits: recovery.h. */
#include <string.h>

#include "indexer.h"
#include "internal.h"
#include "json.h"
#include "kafka_util.h"
#include "progress.h"
#include "recovery.h"
#include "store.h"

gint32 ixia_recovery_partition(const char *ns, const char *table, const char *key, size_t key_len,
                               gint32 partition_count) {
  GBytes *k = ixia_record_doc_key(ns, table, key, key_len);
  gsize len;
  const void *data = g_bytes_get_data(k, &len);
  /* test_recovery checks this agrees with librdkafka's partitioner. */
  gint32 p = ixia_kafka_partition(data, len, partition_count);
  g_bytes_unref(k);
  return p;
}

rocksdb_t *ixia_recovery_open_snapshot(const char *snapshot_dir, gint64 *version,
                                       ixia_error_t **err) {
  char *store = NULL;
  if (!ixia_recovery_snapshot_info(snapshot_dir, version, &store, err)) return NULL;
  rocksdb_options_t *opts = rocksdb_options_create();
  char *rerr = NULL;
  /* Read-only may open a subset of the column families: documents and
   * schemas are all in the default one. */
  rocksdb_t *db = rocksdb_open_for_read_only(opts, store, 0, &rerr);
  rocksdb_options_destroy(opts);
  if (!ixia_error_from_rocksdb(err, rerr, "open snapshot store") && err && *err)
    ixia_error_prefix(*err, "%s", store);
  g_free(store);
  return db;
}

/* The owned partitions as a bitmap over partition_count. */
static gboolean *owned_partitions(const ixia_rebuild_opts_t *o, GString *desc, ixia_error_t **err) {
  gint32 n = o->partition_count;
  if (n < 1) {
    ixia_error_set(err, IXIA_EINVAL, "partition count must be >= 1");
    return NULL;
  }
  gboolean *owned = g_new0(gboolean, n);
  if (o->partitions && *o->partitions) {
    GArray *list = ixia_indexer_parse_partitions(o->partitions, n, err);
    if (!list) {
      g_free(owned);
      return NULL;
    }
    for (guint i = 0; i < list->len; i++) owned[g_array_index(list, gint32, i)] = TRUE;
    g_array_free(list, TRUE);
  } else if (o->shards > 0) {
    if (o->shard < 0 || o->shard >= o->shards || o->shards > n) {
      ixia_error_set(err, IXIA_EINVAL, "--shard must be 0..%d and --shards at most the %d partitions",
                     o->shards - 1, (int)n);
      g_free(owned);
      return NULL;
    }
    /* Contiguous ranges, as ixia-local and the tests assign them. */
    for (gint32 p = (gint32)((gint64)o->shard * n / o->shards);
         p < (gint32)((gint64)(o->shard + 1) * n / o->shards); p++)
      owned[p] = TRUE;
  } else {
    for (gint32 p = 0; p < n; p++) owned[p] = TRUE;
  }
  for (gint32 p = 0; p < n; p++)
    if (owned[p]) g_string_append_printf(desc, "%s%d", desc->len ? "," : "", (int)p);
  return owned;
}

typedef struct {
  ixia_idx_t *idx;
  guint batch;
  GArray *events;    /* ixia_idx_event_t pointing into `strings` */
  GPtrArray *strings; /* owned copies for the batch */
  const char *failed_log;
  GString *failed_lines;
  guint64 applied, failed;
  ixia_progress_t *progress;
} rebuild_t;

static void on_failed(const ixia_idx_event_t *ev, const ixia_error_t *why, void *ud) {
  rebuild_t *rb = ud;
  gboolean has_key = ev->op != IXIA_IDX_SCHEMA;
  char *line = ixia_failed_log_line(ev->ns, strlen(ev->ns), ev->table, strlen(ev->table),
                                    has_key ? ev->key : NULL, ev->key_len, ev->version, ev->op,
                                    why->code, why->message, -1, -1);
  g_string_append(rb->failed_lines, line);
  g_free(line);
  rb->failed++;
}

static gboolean flush_batch(rebuild_t *rb, ixia_error_t **err) {
  if (rb->events->len == 0) return TRUE;
  guint applied = 0;
  gboolean ok = ixia_idx_apply(rb->idx, (const ixia_idx_event_t *)(void *)rb->events->data,
                               rb->events->len, NULL, 0, on_failed, rb, &applied, err);
  if (ok && rb->failed_lines->len) {
    ok = ixia_failed_log_append(rb->failed_log, rb->failed_lines->str, rb->failed_lines->len, NULL, err);
    g_string_truncate(rb->failed_lines, 0);
  }
  rb->applied += applied;
  ixia_progress_add(rb->progress, rb->events->len);
  g_array_set_size(rb->events, 0);
  g_ptr_array_set_size(rb->strings, 0);
  return ok;
}

static const char *keep(rebuild_t *rb, const char *s, size_t len) {
  char *copy = ixia_memdup0(s, len);
  g_ptr_array_add(rb->strings, copy);
  return copy;
}

static gboolean add_event(rebuild_t *rb, ixia_idx_op_t op, const char *ns, size_t nl,
                          const char *table, size_t tl, const char *key, size_t kl, gint64 version,
                          const char *doc, size_t dl, gint64 expire_at, ixia_error_t **err) {
  ixia_idx_event_t ev = {.op = op,
                         .ns = keep(rb, ns, nl),
                         .table = keep(rb, table, tl),
                         .key = keep(rb, key, kl),
                         .key_len = kl,
                         .version = version,
                         .doc = keep(rb, doc, dl),
                         .doc_len = dl,
                         .expire_at = expire_at};
  g_array_append_val(rb->events, ev);
  return rb->events->len < rb->batch || flush_batch(rb, err);
}

/* Feeds every record of one key kind ('s' schemas, 'd' documents) of the
 * snapshot in key order. */
static gboolean feed(rebuild_t *rb, rocksdb_t *db, char kind, const gboolean *owned, gint32 n_parts,
                     guint64 *read, guint64 *taken, ixia_error_t **err) {
  rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
  rocksdb_readoptions_set_fill_cache(ro, 0);
  rocksdb_iterator_t *it = rocksdb_create_iterator(db, ro);
  gboolean ok = TRUE;
  for (rocksdb_iter_seek(it, &kind, 1); ok && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, vl, nl, tl, dkl, jl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl == 0 || k[0] != kind) break;
    const char *v = rocksdb_iter_value(it, &vl);
    const char *ns, *table, *dkey, *json;
    gint64 version, expire_at;
    if (!ixia_record_parse_key(k, kl, NULL, &ns, &nl, &table, &tl, &dkey, &dkl) ||
        !ixia_record_parse_value(v, vl, &version, &expire_at, &json, &jl)) {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "malformed record in the snapshot store");
      break;
    }
    (*read)++;
    if (kind == 'd') {
      /* k is the truth-store key itself: as ixia_recovery_partition. */
      if (!owned[ixia_kafka_partition(k, kl, n_parts)]) continue;
    }
    (*taken)++;
    /* Expired documents are passed with their expire_at, as Kafka delivered
     * them: the index hides them, and the result does not depend on the
     * clock. */
    ok = add_event(rb, kind == 's' ? IXIA_IDX_SCHEMA : IXIA_IDX_PUT, ns, nl, table, tl,
                   kind == 's' ? "" : dkey, kind == 's' ? 0 : dkl, version, json, jl, expire_at, err);
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  rocksdb_readoptions_destroy(ro);
  return ixia_error_from_rocksdb(err, rerr, "snapshot scan") && ok && flush_batch(rb, err);
}

static gboolean dir_usable(const char *dir, ixia_error_t **err) {
  GDir *d = g_dir_open(dir, 0, NULL);
  if (!d) return TRUE;
  gboolean empty = g_dir_read_name(d) == NULL;
  g_dir_close(d);
  if (!empty)
    return ixia_error_set(err, IXIA_EINVAL,
                          "index directory %s exists and is not empty: stop the indexer and move or "
                          "delete it first",
                          dir);
  return TRUE;
}

/* The failed-updates log an indexer on index_dir would use. */
static char *failed_log_for(const char *index_dir, const ixia_config_t *cfg) {
  ixia_config_t *c = ixia_config_new();
  ixia_config_set(c, "index.path", index_dir, NULL);
  ixia_config_set(c, "indexer.failed_log", ixia_config_str(cfg, "indexer.failed_log"), NULL);
  char *path = ixia_failed_log_path(c);
  ixia_config_destroy(c);
  return path;
}

static void add_checksum(cJSON *o, ixia_idx_t *idx, const ixia_idx_checksum_t *c) {
  cJSON_AddStringToObject(o, "checksum", c->hex);
  cJSON_AddNumberToObject(o, "records", (double)c->records);
  cJSON_AddNumberToObject(o, "documents", (double)c->documents);
  cJSON_AddNumberToObject(o, "tombstones", (double)c->tombstones);
  cJSON_AddNumberToObject(o, "tables", (double)c->tables);
  cJSON_AddNumberToObject(o, "postings", (double)c->postings);
  cJSON_AddNumberToObject(o, "max_version", (double)ixia_idx_max_version(idx));
}

cJSON *ixia_recovery_rebuild_index(const char *snapshot_dir, const char *index_dir_arg,
                                   const ixia_config_t *cfg, const ixia_rebuild_opts_t *opts,
                                   ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  char *index_dir = g_canonicalize_filename(index_dir_arg, NULL);
  GString *desc = g_string_new(NULL);
  gint64 version = 0;
  rocksdb_t *db = NULL;
  ixia_idx_t *idx = NULL;
  cJSON *summary = NULL;
  rebuild_t rb = {.batch = opts->batch ? opts->batch : 1000,
                  .events = g_array_new(FALSE, FALSE, sizeof(ixia_idx_event_t)),
                  .strings = g_ptr_array_new_with_free_func(g_free),
                  .failed_lines = g_string_new(NULL),
                  .failed_log = NULL};
  char *failed_log = failed_log_for(index_dir, cfg);
  rb.failed_log = failed_log;
  gboolean *owned = owned_partitions(opts, desc, err);
  gboolean ok = owned && dir_usable(index_dir, err);
  if (ok) ok = (db = ixia_recovery_open_snapshot(snapshot_dir, &version, err)) != NULL;
  if (ok) ok = (idx = rb.idx = ixia_idx_open(index_dir, cfg, err)) != NULL;
  guint64 schemas_read = 0, schemas = 0, docs_read = 0, docs = 0;
  if (ok) {
    char *label = g_strdup_printf("rebuild-index %s", index_dir);
    rb.progress = ixia_progress_new(label, 0, "docs", opts->quiet);
    g_free(label);
    /* Schemas first, so every table's declared fields exist before its
     * documents; then documents in truth-store key order. */
    ok = feed(&rb, db, 's', owned, opts->partition_count, &schemas_read, &schemas, err) &&
         feed(&rb, db, 'd', owned, opts->partition_count, &docs_read, &docs, err);
    ixia_progress_destroy(rb.progress);
  }
  ixia_idx_checksum_t sum;
  if (ok) ok = ixia_idx_checksum(idx, &sum, err);
  if (ok) {
    summary = cJSON_CreateObject();
    cJSON_AddStringToObject(summary, "snapshot", snapshot_dir);
    cJSON_AddNumberToObject(summary, "snapshot_version", (double)version);
    cJSON_AddStringToObject(summary, "index", index_dir);
    cJSON_AddStringToObject(summary, "partitions", desc->str);
    cJSON_AddNumberToObject(summary, "partition_count", opts->partition_count);
    cJSON_AddNumberToObject(summary, "schemas", (double)schemas);
    cJSON_AddNumberToObject(summary, "documents_read", (double)docs_read);
    cJSON_AddNumberToObject(summary, "documents_owned", (double)docs);
    cJSON_AddNumberToObject(summary, "applied", (double)rb.applied);
    cJSON_AddNumberToObject(summary, "failed", (double)rb.failed);
    cJSON_AddStringToObject(summary, "failed_log", failed_log);
    cJSON_AddStringToObject(summary, "kafka_positions",
                            "none: an indexer on this index starts at the earliest retained offset "
                            "(Kafka must still hold every event newer than snapshot_version)");
    add_checksum(summary, idx, &sum);
    cJSON_AddNumberToObject(summary, "seconds", (double)(g_get_monotonic_time() - start) / 1e6);
  }
  ixia_idx_destroy(idx);
  if (db) rocksdb_close(db);
  g_free(owned);
  g_free(failed_log);
  g_string_free(desc, TRUE);
  g_string_free(rb.failed_lines, TRUE);
  g_array_free(rb.events, TRUE);
  g_ptr_array_unref(rb.strings);
  g_free(index_dir);
  return summary;
}

cJSON *ixia_recovery_dump_index(const char *index_dir, const ixia_config_t *cfg, ixia_error_t **err) {
  if (!g_file_test(index_dir, G_FILE_TEST_IS_DIR)) {
    ixia_error_set(err, IXIA_ENOTFOUND, "no index directory %s", index_dir);
    return NULL;
  }
  ixia_idx_t *idx = ixia_idx_open(index_dir, cfg, err);
  if (!idx) return NULL;
  ixia_idx_checksum_t sum;
  cJSON *o = NULL;
  if (ixia_idx_checksum(idx, &sum, err)) {
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "index", index_dir);
    add_checksum(o, idx, &sum);
  }
  ixia_idx_destroy(idx);
  return o;
}
