/* The truth store: documents and table schemas in RocksDB.
 *
 * Every write goes through one writer thread that commits the requests
 * waiting at that moment as one synced RocksDB write (group commit): N
 * concurrent writers share one fdatasync. Being the only writer, it also
 * knows each edit's RocksDB sequence number before writing, and stores that
 * number in the value as the document's version. Versions therefore grow
 * with every write to the store and equal the WAL sequence of the edit,
 * which the CDC feed (rocksdb_get_updates_since) relies on.
 *
 * Replicated records (documents, schemas) live in the default column family
 * (rocksdb_writebatch_iterate, which the sink decodes with, stops at edits of
 * other column families). The "local" column family is reserved for
 * bookkeeping that must not be replicated; it is unused so far (the
 * replication checkpoint is a file beside the store, see
 * query-api/replication.h). All writes must go through this module so that
 * the writer's sequence numbering stays exact.
 *
 * Keys and values (default column family) are laid out by common/record.h.
 *
 * Disk reserve (common/disk.h). Before committing a group, the writer
 * measures the free space of store.path's file system (one statvfs per
 * group). Under store.disk_reserve_mb every request of the group fails with
 * IXIA_EEXHAUSTED naming the path, the free space and the option, and
 * nothing reaches RocksDB: Debian's librocksdb (assertions on) aborts the
 * process once one of its writes has failed for lack of space. Reads never check. The
 * next group measures again, so writes resume by themselves once space is
 * freed; ixia_store_get_stats reports the free space and the refusals.
 *
 * Thread safety: every function may be called from any thread once the store
 * is open. */
#ifndef IXIA_STORE_H
#define IXIA_STORE_H

#include <cjson/cJSON.h>
#include <glib.h>
#include <rocksdb/c.h>

#include "config.h"
#include "error.h"
#include "record.h"

typedef struct ixia_store ixia_store_t;

typedef enum {
  IXIA_WRITE_PUT = 1,
  IXIA_WRITE_UPSERT = 2, /* merge top-level fields into the current document */
  IXIA_WRITE_DELETE = 3,
  IXIA_WRITE_SCHEMA = 4, /* json is the schema; key is unused */
} ixia_write_kind_t;

/* One edit. All pointers are borrowed for the duration of the call. */
typedef struct {
  ixia_write_kind_t kind;
  const char *ns;
  const char *table;
  const char *key;
  size_t key_len;
  const char *json;       /* PUT, SCHEMA: compact JSON text to store */
  size_t json_len;
  const cJSON *doc;       /* UPSERT: the parsed patch object */
  gint64 expected_version; /* -1: none; 0: key must be absent; N: must be N */
  gint64 ttl_seconds;     /* PUT/UPSERT: 0 = never expires */
} ixia_write_op_t;

typedef struct {
  _Atomic guint64 write_requests;
  _Atomic guint64 write_ops;
  _Atomic guint64 write_groups; /* synced RocksDB writes: fsyncs when store.sync */
  _Atomic guint64 conflicts;
  _Atomic guint64 gets;
  _Atomic guint64 memory_gets;        /* reads that may only use memory (ixia_store_get_in_memory) */
  _Atomic guint64 memory_gets_missed; /* of those, the ones that needed the disk */
  _Atomic guint64 writes_refused_disk_full; /* requests refused under store.disk_reserve_mb */
  /* The document cache (store.doc_cache_mb), filled in by get_stats */
  guint64 doc_cache_hits, doc_cache_misses, doc_cache_bytes, doc_cache_max_bytes;
  gint64 disk_free_bytes;   /* free on store.path's file system, measured by get_stats; -1 unknown */
  gint64 disk_reserve_bytes; /* store.disk_reserve_mb in bytes; 0 = off */
  gboolean disk_full;       /* disk_free_bytes is under the reserve: writes are refused */
} ixia_store_stats_t;

ixia_store_t *ixia_store_open(const ixia_config_t *cfg, ixia_error_t **err);
/* Stops the writer (pending writes complete first) and closes RocksDB. */
void ixia_store_destroy(ixia_store_t *store);

/* Applies ops atomically: all of them or, if any condition fails, none.
 * On success versions[i] holds the version of ops[i]. Blocks until the edit
 * is durable (synced WAL when store.sync). Fails with IXIA_EEXHAUSTED when
 * store.path's file system has less than store.disk_reserve_mb free (see
 * the disk reserve above). */
gboolean ixia_store_write(ixia_store_t *store, const ixia_write_op_t *ops, guint n,
                          gint64 *versions, ixia_error_t **err);

/* The same without waiting: cb(user, error) runs on the writer thread once
 * the group holding the request is durable (error NULL; versions filled)
 * or failed (error owned by cb). ops, their strings and versions must stay
 * valid until then. cb must be quick: the next group waits for it. */
typedef void (*ixia_store_done_cb)(gpointer user, ixia_error_t *error);
void ixia_store_write_async(ixia_store_t *store, const ixia_write_op_t *ops, guint n,
                            gint64 *versions, ixia_store_done_cb cb, gpointer user);

/* Reads a document. Missing or expired: TRUE with *found = FALSE.
 * *expire_at (may be NULL) is its expiry in epoch seconds, 0 = never.
 * *json is g_malloc'd, NUL-terminated. */
gboolean ixia_store_get(ixia_store_t *store, const char *ns, const char *table, const char *key,
                        size_t key_len, gboolean *found, gint64 *version, gint64 *expire_at,
                        char **json, size_t *json_len, ixia_error_t **err);

/* Reads a document only if memory (memtables and the block cache) can
 * answer: never waits for the disk, so it may run on a thread that must not
 * block. *in_memory FALSE: the answer needs a disk read (use ixia_store_get);
 * the other outputs are then unset. Otherwise as ixia_store_get. */
gboolean ixia_store_get_in_memory(ixia_store_t *store, const char *ns, const char *table,
                                  const char *key, size_t key_len, gboolean *in_memory,
                                  gboolean *found, gint64 *version, gint64 *expire_at, char **json,
                                  size_t *json_len, ixia_error_t **err);

/* One document of a multi-get. */
typedef struct {
  gboolean found;   /* FALSE: missing or expired */
  gint64 version;
  gint64 expire_at;
  char *json;       /* g_malloc'd, NUL-terminated; NULL when !found */
  size_t json_len;
  /* The document's member table (ixia_json_project_table), when it came
   * from the document cache through ixia_store_multi_get_pinned: valid as
   * long as json is. NULL otherwise. */
  const guint16 *members;
  guint n_members;
} ixia_store_doc_t;

/* Reads n documents of one table in one RocksDB multi-get (block cache
 * lookups batched). out[i] is for keys[i]; free the json of each. */
gboolean ixia_store_multi_get(ixia_store_t *store, const char *ns, const char *table, guint n,
                              const char *const *keys, const size_t *key_lens,
                              ixia_store_doc_t *out, ixia_error_t **err);

/* Values of a multi-get left where RocksDB holds them (pinned in the block
 * cache or memtable) instead of copied; freed by ixia_store_pins_free. */
typedef struct ixia_store_pins ixia_store_pins_t;
/* ixia_store_multi_get without copies: out[i].json borrows from *pins (not
 * NUL-terminated: use json_len) until ixia_store_pins_free(*pins), which
 * the caller calls whatever the result. A page of 100 hits copied 100 KB
 * it then only scanned. */
gboolean ixia_store_multi_get_pinned(ixia_store_t *store, const char *ns, const char *table,
                                     guint n, const char *const *keys, const size_t *key_lens,
                                     ixia_store_doc_t *out, ixia_store_pins_t **pins,
                                     ixia_error_t **err);
/* The same from memory only (memtables, the document cache, the block
 * cache), for a caller that must not wait on the disk (an I/O thread):
 * *in_memory FALSE, and nothing in out, when a key needs a disk read (read
 * them again with ixia_store_multi_get_pinned elsewhere). */
gboolean ixia_store_multi_get_pinned_in_memory(ixia_store_t *store, const char *ns,
                                               const char *table, guint n,
                                               const char *const *keys, const size_t *key_lens,
                                               ixia_store_doc_t *out, ixia_store_pins_t **pins,
                                               gboolean *in_memory, ixia_error_t **err);
void ixia_store_pins_free(ixia_store_pins_t *pins);

typedef void (*ixia_store_schema_cb)(const char *ns, const char *table, const char *json,
                                     size_t len, gint64 version, gpointer user);
/* Calls cb for every stored schema. */
gboolean ixia_store_foreach_schema(ixia_store_t *store, ixia_store_schema_cb cb, gpointer user,
                                   ixia_error_t **err);

/* Called by ixia_store_scan for each live document (valid only during the
 * call); return FALSE to stop. */
typedef gboolean (*ixia_store_doc_cb)(const char *key, size_t key_len, gint64 version,
                                      gint64 expire_at, const char *json, size_t json_len,
                                      gpointer user);
/* Calls cb for the unexpired documents of a table whose key sorts after
 * `after` (NULL or empty: from the first), in key byte order, from one
 * consistent view. */
gboolean ixia_store_scan(ixia_store_t *store, const char *ns, const char *table, const char *after,
                         size_t after_len, ixia_store_doc_cb cb, gpointer user, ixia_error_t **err);

/* The newest version (RocksDB sequence number) in the store. */
gint64 ixia_store_latest_version(ixia_store_t *store);
/* Blocks until a version newer than `after` has been committed and given
 * to the commit callback (below), or timeout_ms passes; returns the newest
 * such version, or after a timeout the store's latest version. Lets the
 * replication source follow writes without polling, and find each group
 * in its callback's tail when woken. */
gint64 ixia_store_wait_newer(ixia_store_t *store, gint64 after, gint64 timeout_ms);
/* Called by the writer thread after each committed group with the WAL
 * record it wrote: the version of its first edit and the RocksDB WriteBatch
 * bytes (valid only during the call). Lets replication ship fresh edits
 * from memory instead of re-reading the WAL. Must be fast; set it before the
 * first write. */
typedef void (*ixia_store_commit_cb)(gint64 first_version, const char *batch, size_t len,
                                     gpointer user);
void ixia_store_set_commit_cb(ixia_store_t *store, ixia_store_commit_cb cb, gpointer user);

/* The versions a RocksDB WriteBatch holds: sequence (its first edit's
 * version) .. the returned value, from the edit count in the batch header.
 * Returns sequence - 1 for data too short to be a batch. */
gint64 ixia_record_batch_last(gint64 sequence, const char *data, size_t len);

/* Called by ixia_store_read_wal for each whole WAL batch: its versions
 * first..last and the RocksDB WriteBatch bytes (valid only during the call).
 * Return FALSE to stop reading. */
typedef gboolean (*ixia_store_wal_cb)(gint64 first, gint64 last, const char *data, size_t len,
                                      gpointer user);
/* Reads the WAL batches holding versions > after, in order, and calls cb for
 * each, until the batches passed reach max_bytes (at least one is passed when
 * any exists; batches are never split). The first batch may start at or
 * before `after` only if it also holds later versions. None: the WAL has
 * nothing past `after` yet, or (when the store's latest version is newer)
 * RocksDB found no file to start from.
 * Gap: when the WAL no longer holds version after+1 (purged past its
 * retention, store.wal_ttl_seconds / store.wal_size_limit_mb), cb is not
 * called, TRUE is returned and *gap_available_from (may be NULL) is set to
 * the oldest version it still holds; otherwise it is set to 0. FALSE with
 * *err on a RocksDB error. */
gboolean ixia_store_read_wal(ixia_store_t *store, gint64 after, gint64 max_bytes,
                             ixia_store_wal_cb cb, gpointer user, gint64 *gap_available_from,
                             ixia_error_t **err);

/* Flushes memtables to SST files (lets old WAL files be archived/purged). */
gboolean ixia_store_flush(ixia_store_t *store, ixia_error_t **err);
void ixia_store_get_stats(ixia_store_t *store, ixia_store_stats_t *out);

/* Writes a consistent RocksDB checkpoint (hard-linked SST files) of the
 * whole store to dir, which must not exist (its parent must). Writes wait
 * while it is taken (a memtable flush, typically milliseconds); reads go on.
 * Refused with IXIA_EEXHAUSTED under store.disk_reserve_mb (the flush
 * writes into store.path).
 * *version (may be NULL) receives V: the checkpoint holds exactly the edits
 * up to version V. */
gboolean ixia_store_checkpoint(ixia_store_t *store, const char *dir, gint64 *version,
                               ixia_error_t **err);

/* Raw handle for the CDC feed and checkpoints; owned by the store. */
rocksdb_t *ixia_store_db(ixia_store_t *store);

#endif
