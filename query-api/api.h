/* The ixia API logic behind ixia-query-api: validation, schemas, the truth
 * store and the look-aside cache. The Thrift handler (handler.c) only
 * converts between Thrift types and these calls, so tests can drive the
 * logic directly.
 *
 * Write path: validate -> delete cache key -> synced store write -> delete
 * cache key again -> acknowledge. The second delete removes any backfill
 * that raced with the write; backfills are also guarded by a lease (see
 * cache/cache.h). Under store.disk_reserve_mb the store refuses writes,
 * schema applies and snapshots with RESOURCE_EXHAUSTED (store/store.h);
 * stats report store_disk_free_bytes, store_disk_full and
 * store_writes_refused_disk_full.
 * Get path: cache -> on a miss, lease, store read, asynchronous backfill.
 *
 * Thread safety: all calls may run concurrently from server workers. */
#ifndef IXIA_API_H
#define IXIA_API_H

#include <thrift/c_glib/processor/thrift_processor.h>

#include "config.h"
#include "error.h"
#include "fanout.h"
#include "server.h"
#include "store.h"

typedef struct ixia_api ixia_api_t;

typedef struct {
  ixia_write_kind_t kind; /* PUT, UPSERT or DELETE */
  const char *ns;
  const char *table;
  const char *key;
  const char *json;        /* PUT/UPSERT */
  gint64 expected_version; /* -1 none, 0 absent, N current version */
} ixia_api_op_t;

/* Opens the store and the cache, and loads the schemas. */
ixia_api_t *ixia_api_new(const ixia_config_t *cfg, ixia_error_t **err);
void ixia_api_destroy(ixia_api_t *api);

/* Lets stats report server counters; the server is borrowed. */
void ixia_api_set_server(ixia_api_t *api, ixia_server_t *srv);

/* Atomic: all ops or none. versions[i] receives each op's version. */
gboolean ixia_api_write(ixia_api_t *api, const ixia_api_op_t *ops, guint n, gint64 *versions,
                        ixia_error_t **err);
/* The same without holding the calling thread: ops (and their strings) are
 * copied and validated at once; a bad op returns FALSE with err and cb is
 * never called. Otherwise cb(user, versions, error) runs later, on the
 * store's writer or the cache's invalidator thread, once the write is
 * durable and its cached copies are gone (versions valid during the call),
 * or with the error that stopped it (owned by cb). cb must be quick. */
typedef void (*ixia_api_write_cb)(gpointer user, const gint64 *versions, ixia_error_t *err);
gboolean ixia_api_write_async(ixia_api_t *api, const ixia_api_op_t *ops, guint n,
                              ixia_api_write_cb cb, gpointer user, ixia_error_t **err);

/* A get: first from the truth store's memory (memtables and block cache; on
 * an I/O thread the call defers itself when that is not enough), then from
 * memcached, then from the store's disk with a lease and a backfill.
 * fields: NULL-terminated dotted paths, or NULL for the whole document.
 * Missing key: TRUE with *found = FALSE. *json is g_malloc'd. */
gboolean ixia_api_get(ixia_api_t *api, const char *ns, const char *table, const char *key,
                      const char *const *fields, gboolean *found, gint64 *version, char **json,
                      ixia_error_t **err);

/* n gets of one table (memcached asked once for all the keys the store's
 * memory could not answer, the store read once for the rest). out[i] is for
 * keys[i]; free each json. */
typedef struct {
  gboolean found;
  gint64 version;
  char *json;
} ixia_api_doc_t;
gboolean ixia_api_multi_get(ixia_api_t *api, const char *ns, const char *table,
                            const char *const *keys, guint n, const char *const *fields,
                            ixia_api_doc_t *out, ixia_error_t **err);

/* Documents of a known table with key > after, in key order, at most limit
 * (1..limits.max_get_keys), and fewer once they reach half of
 * server.max_frame_bytes (so a page always fits one answer; callers page on
 * from the last key until a page is empty): cb as for ixia_store_scan. */
gboolean ixia_api_scan(ixia_api_t *api, const char *ns, const char *table, const char *after,
                       gint limit, ixia_store_doc_cb cb, gpointer user, ixia_error_t **err);

gboolean ixia_api_apply_schema(ixia_api_t *api, const char *json, gint64 *version,
                               ixia_error_t **err);
/* g_malloc'd schema JSON, or NULL with IXIA_ENOTFOUND. */
char *ixia_api_get_schema(ixia_api_t *api, const char *ns, const char *table, ixia_error_t **err);

/* g_malloc'd request/response JSON as described in docs/QUERY.md. */
char *ixia_api_query(ixia_api_t *api, const char *request_json, ixia_error_t **err);
/* The same query for an I/O thread (ixia_fanout_prepare): NULL when it must
 * run on a worker through ixia_api_query. */
ixia_fanout_op_t *ixia_api_query_prepare(ixia_api_t *api, const char *request_json);

/* Ixia.walSince: calls cb (as for ixia_store_read_wal) for the whole WAL
 * batches holding versions > after, in order, up to about max_bytes (at
 * least one when any exists). IXIA_ENOTFOUND when the WAL no longer holds
 * version after+1 (purged past store.wal_ttl_seconds /
 * store.wal_size_limit_mb); IXIA_EINVAL for after < 0, max_bytes < 1 or an
 * `after` beyond the store's latest version. */
gboolean ixia_api_wal_since(ixia_api_t *api, gint64 after, gint64 max_bytes, ixia_store_wal_cb cb,
                            gpointer user, ixia_error_t **err);

/* g_malloc'd JSON object of counters. */
char *ixia_api_stats(ixia_api_t *api);

/* A consistent checkpoint of the truth store in dir (an absolute path that
 * must not exist; missing parents are created). Returns g_malloc'd JSON
 * {"dir", "version"}: the checkpoint holds exactly the edits up to
 * version. */
char *ixia_api_snapshot(ixia_api_t *api, const char *dir, ixia_error_t **err);

/* The truth store (borrowed), for the repair listings (truthscan.h). */
ixia_store_t *ixia_api_store(ixia_api_t *api);

/* Limits the handler enforces on list sizes. */
guint ixia_api_max_batch_ops(const ixia_api_t *api);
guint ixia_api_max_get_keys(const ixia_api_t *api);

/* A Thrift processor serving api (borrowed; must outlive the processor). */
ThriftProcessor *ixia_api_processor_new(ixia_api_t *api);

/* get answered straight from its request frame, before the processor
 * (ixia_thrift_gate_set_fast; processor: one from ixia_api_processor_new*):
 * FALSE leaves the frame to the processor. Any thread. */
gboolean ixia_api_answer_get(gpointer processor, const guint8 *frame, guint32 size,
                             GByteArray *out);
/* query likewise: taken over on an I/O thread and answered from its shards'
 * answers (ixia_server_call_later), run in place on a worker. */
gboolean ixia_api_answer_query(gpointer processor, const guint8 *frame, guint32 size,
                               GByteArray *out);

/* The calls ixia-query-api tries on its I/O threads (ixia_server_set_inline):
 * gets and multi-gets (answered from the store's memory, deferred to a
 * worker when a disk read or memcached is needed), stats, getSchema, and
 * single-document writes (validated there, answered once durable). */
gboolean ixia_api_inline_call(const char *method, guint32 len);

#endif
