/* ixia-recovery: operations that repair or rebuild the index, as a library
 * the daemon-free tool (main.c) and the tests call.
 *
 * Every operation finds a running stack through the API address
 * (--api / $IXIA_API / api.host:api.port) and the index shards through the
 * API's stats ("query_indexers"), so a shell with ixia-local's local.env
 * sourced needs no other flag.
 *
 * Thread safety: each call is self-contained. */
#ifndef IXIA_RECOVERY_H
#define IXIA_RECOVERY_H

#include <cjson/cJSON.h>
#include <glib.h>

#include "client.h"
#include "error.h"


typedef struct {
  guint batch;    /* documents per scan page and reindex call */
  gboolean quiet; /* no progress line */
} ixia_backfill_opts_t;

/* Indexes the existing documents of a table on every shard after an index
 * was added, without stopping traffic: waits until every shard has applied
 * the store's current version (so each has the new schema), then pages
 * through the table (Ixia.scan) and sends each page to every shard
 * (Search.reindex; a shard ignores keys of partitions it does not own).
 * Safe under concurrent writes: an event applies only when its version is
 * at least the one the index holds, so a page read before a newer write
 * cannot undo it. Returns the JSON summary {"namespace", "table",
 * "documents", "applied", "seconds"} or NULL with *err set. */
cJSON *ixia_recovery_backfill(const char *api_addr, const char *ns, const char *table,
                              const ixia_backfill_opts_t *opts, ixia_error_t **err);

/* ---------- point-in-time recovery of the truth store (backup.c) ----------
 *
 * A backup directory holds a base snapshot and an archive of every WAL write
 * batch after it:
 *   DIR/BACKUP.json  {"format": 1, "base_version": S, "created_at": ...}
 *   DIR/base/        RocksDB checkpoint of the store at version S, written by
 *                    the API (Ixia.snapshot), so DIR must be a path the API's
 *                    host can write at the same name (run the tool there, or
 *                    on a shared mount)
 *   DIR/wal/FIRST-LAST.wal  (20-digit versions) one segment per run or per
 *                    64 MiB: "IXIAWAL1", then records
 *                    [u64 LE sequence][u32 LE length][RocksDB WriteBatch]
 *                    holding versions FIRST..LAST exactly, in order. A
 *                    segment is written as .tmp, fsync'd, then renamed: a
 *                    named segment is always complete.
 *   DIR/LOCK         flock'd by a running backup (one at a time per DIR).
 * The segments continue each other without a hole from S+1: that is checked
 * when a backup appends and when a restore reads.
 *
 * Retention: the archive is filled from the API's WAL (Ixia.walSince), which
 * the store keeps for store.wal_ttl_seconds / store.wal_size_limit_mb only.
 * Backups must run more often than that (say every few minutes from cron);
 * once the WAL was purged past the archive's end, the archive cannot be
 * continued and a new backup directory (a new base) is needed.
 *
 * Restore relies on RocksDB numbering edits consecutively: the base reopened
 * has latest sequence S, so re-applying the archived batches S+1.. in order
 * gives every edit its original sequence number, equal to the version stored
 * in its value. That is verified after every batch. */

typedef struct {
  gint32 page_bytes; /* walSince max_bytes per call (backup); 0 = 4 MiB */
  gboolean quiet;    /* no progress line */
} ixia_backup_opts_t;

/* backup --to DIR: takes the base snapshot through the API when DIR holds
 * none yet (DIR is created; it must be empty or absent then), then appends to
 * DIR/wal every WAL batch after the archive's end up to the store's latest
 * version when the run started. IXIA_ENOTFOUND when the API's WAL no longer
 * holds the next version (purged: start a new backup directory) or the
 * archive has a hole; IXIA_EINVAL when DIR holds something else. Returns
 * {"dir", "base_version", "archived_through", "batches", "bytes",
 * "seconds"} (batches and bytes: appended by this run) or NULL with *err. */
cJSON *ixia_recovery_backup(const char *api_addr, const char *dir, const ixia_backup_opts_t *opts,
                            ixia_error_t **err);

/* restore --from DIR --to-version V --to STOREDIR: builds a truth store at
 * STOREDIR (absent or empty) holding exactly the edits up to version V: a
 * copy of the base, then the archived batches whose last version is <= V.
 * Batches are atomic, so a V inside a batch restores up to the batch before
 * it ("restored_version" says which). V < 0 means the archive's end.
 * IXIA_EINVAL when V is below the base version or beyond the archive, or
 * STOREDIR is not empty; IXIA_ENOTFOUND when DIR holds no backup or the
 * archive has a hole (a lost segment) before V.
 * STOREDIR/REPLICATION_CHECKPOINT is set to the restored version, so an API
 * started on it ships only new edits (the index must be rebuilt from the
 * restored store: it may hold later edits). No API is needed; nothing may
 * have STOREDIR open. Returns {"from", "to", "base_version",
 * "requested_version", "restored_version", "batches", "seconds"}. */
cJSON *ixia_recovery_restore(const char *dir, gint64 to_version, const char *store_dir,
                             const ixia_backup_opts_t *opts, ixia_error_t **err);

/* ---------- snapshot, rebuild-index, dump-index, verify, replay-failed ----------
 *
 * Disaster recovery of an index shard:
 *   1. ixia_recovery_snapshot: a consistent checkpoint of the truth store at
 *      version V (DIR/store, DIR/SNAPSHOT.json), taken without downtime.
 *   2. ixia_recovery_rebuild_index: an index built offline from the snapshot
 *      for the shard's partitions. It stores NO Kafka positions, so an
 *      ixia-indexer started on it reads each of its partitions from the
 *      earliest offset Kafka still retains.
 *   3. The indexer catches up. Why that loses nothing: every event carries
 *      its edit's version; the index applies an event only when its version
 *      is >= the one it holds for the key. Events with versions <= V
 *      re-apply what the snapshot already gave (equal version: same
 *      document) or are skipped (older); every edit newer than V is applied.
 *      All edits of one key are in one partition, in version order, so
 *      replaying any retained suffix of a partition ends at each key's last
 *      state (a key deleted before V and re-put by an old retained event is
 *      deleted again by the retained delete that follows it; meanwhile
 *      queries drop such hits, as they check the truth store). Schema events
 *      older than the schema the index holds are skipped.
 *      Kafka retention should still hold every event with a version > V (the
 *      snapshot younger than the topic's retention, minus the replication
 *      lag). If it does not, the partitions start above offset 0 and the
 *      indexer repairs itself from the truth store (indexer/heal.h); with
 *      indexer.self_heal off, take a new snapshot and rebuild from it.
 * verify compares a running index with the truth store; replay-failed
 * re-applies the failed-updates log. */

/* The Kafka partition of a document: librdkafka's consistent_random
 * partitioner (CRC-32 of the truth-store key, ixia_record_doc_key, modulo
 * the partition count), as the replication sink publishes it. */
gint32 ixia_recovery_partition(const char *ns, const char *table, const char *key, size_t key_len,
                               gint32 partition_count);

/* Takes a snapshot through the API at api_addr into dir (created; it must
 * not exist or be empty; an absolute path on the API's host, which for a
 * local stack is this host): the checkpoint in dir/store and
 * dir/SNAPSHOT.json {"version", "created_at", "api"}. Returns the summary
 * {"dir", "store", "version", "created_at", "api", "seconds"}. */
cJSON *ixia_recovery_snapshot(const char *api_addr, const char *dir, ixia_error_t **err);

/* Reads dir/SNAPSHOT.json: *version and the checkpoint path (g_free). */
gboolean ixia_recovery_snapshot_info(const char *dir, gint64 *version, char **store_path,
                                     ixia_error_t **err);

typedef struct {
  const char *partitions;  /* indexer.partitions syntax; NULL/"" = see shards */
  gint32 partition_count;  /* of the topic (> 0) */
  gint shards, shard;      /* shards > 0: shard `shard` of `shards` contiguous ranges */
  guint batch;             /* events per ixia_idx_apply (fixed: determinism) */
  gboolean quiet;
} ixia_rebuild_opts_t;

/* Builds a new index in index_dir (must not exist or be empty) from the
 * snapshot in snapshot_dir: every schema, then every document of the owned
 * partitions in truth-store key order, in fixed-size batches, so the same
 * snapshot and options give the same index (ixia_idx_checksum). Documents
 * the index rejects (e.g. wrong type for a declared field) are appended to
 * the index's failed-updates log (the indexer's rule: cfg's
 * indexer.failed_log, else "<index_dir>.failed-updates.jsonl") for
 * replay-failed. index.* options come from cfg. Returns {"snapshot",
 * "snapshot_version", "index", "partitions", "partition_count", "schemas",
 * "documents_read", "documents", "applied", "failed", "failed_log",
 * "kafka_positions": "none: the indexer starts at the earliest retained
 * offset", "checksum", "seconds"}. */
cJSON *ixia_recovery_rebuild_index(const char *snapshot_dir, const char *index_dir,
                                   const ixia_config_t *cfg, const ixia_rebuild_opts_t *opts,
                                   ixia_error_t **err);

/* Opens the index (the daemon must not run on it) and returns {"index",
 * "checksum", "records", "documents", "tombstones", "tables", "postings",
 * "max_version"} (ixia_idx_checksum). */
cJSON *ixia_recovery_dump_index(const char *index_dir, const ixia_config_t *cfg, ixia_error_t **err);

typedef struct {
  guint page;         /* documents per scan/docs page (1..10000) */
  guint examples;     /* example keys listed per kind */
  gint64 recheck_ms;  /* wait before re-checking mismatches */
  gboolean quiet;
} ixia_verify_opts_t;

/* Live verify: waits until the shards have applied the store's current
 * version, then walks every table (names from the API's stats
 * "table_names") in key order through Ixia.scan and every shard's
 * Search.docs, merged, and classifies each key: missing (in the store, not
 * live in the index), extra (live in the index, not in the store), stale
 * (versions differ). Mismatches may be writes racing the walk: each is
 * re-checked once after recheck_ms (store read, then the shards wait for
 * the store's version, then the index read; a key written again in between
 * counts as "changed", not divergent). Returns the report {"ok",
 * "store_version", "tables", "documents", "indexed", "missing", "extra",
 * "stale" (each {"count", "examples"}), "changed", "seconds",
 * "docs_per_second"}; "ok" is false on divergence. NULL only when the
 * comparison could not run. */
cJSON *ixia_recovery_verify(const char *api_addr, const ixia_verify_opts_t *opts, ixia_error_t **err);

/* Offline verify: an index directory against a snapshot (what the index
 * should hold at least up to the snapshot's version), same report. Versions
 * newer than the snapshot in the index count as "changed", not stale. */
cJSON *ixia_recovery_verify_offline(const char *index_dir, const char *snapshot_dir,
                                    const ixia_config_t *cfg, const ixia_verify_opts_t *opts,
                                    ixia_error_t **err);

/* replay-failed: under the log's flock, renames log to log.replaying (a
 * left-over .replaying of an interrupted run is replayed too), then for each
 * distinct key re-reads the document through the API (missing: a DELETE
 * event at the failed entry's version, which removes what the index may
 * still hold without outranking a later re-creation) and sends it to every
 * shard with Search.reindex (a shard ignores foreign keys). Events that
 * fail again are logged again by the indexer itself, with their new error,
 * in the shard's log. Entries that could not be attempted (API or shard
 * unreachable) and entries that cannot be replayed (no key: undecodable
 * message, SCHEMA) are appended back to log. Then log.replaying is
 * removed. Running it twice is safe. Returns {"ok", "log", "entries",
 * "keys", "replayed", "still_failing", "not_attempted", "not_replayable",
 * "seconds"}; "ok" is false when anything is left in the log. */
cJSON *ixia_recovery_replay_failed(const char *api_addr, const char *log_path, guint batch,
                                   ixia_error_t **err);

#endif
