/* ixia-indexer: one index shard kept up to date from Kafka, and the Search
 * service over it.
 *
 * Consumer. A librdkafka consumer on kafka.brokers / kafka.topic assign()s
 * the partitions of indexer.partitions ("0,2", "0-3", "0-1,5"; empty = every
 * partition of the topic) and starts each at the position stored in the
 * index (ixia_idx_position), or at the beginning when none is stored.
 * Nothing is committed to Kafka: the index is the only record of progress,
 * and it stores positions in the same write batch as the changes they cover,
 * so a crash at any moment resumes exactly after the last applied batch.
 *
 * One apply thread gathers up to indexer.batch_max_events messages (or what
 * arrived within indexer.batch_wait_ms of the first), decodes them (Thrift
 * compact ChangeEvent) and calls ixia_idx_apply with the batch's next
 * offsets. When the index cannot write (disk), nothing advances: the thread
 * backs off (doubling up to indexer.retry_max_ms), re-seeks every partition
 * to its stored position and tries again. Kafka errors are logged
 * (rate-limited) and librdkafka retries them.
 *
 * Continuity. Offsets of a partition are contiguous, so the apply thread
 * checks that each message (and each partition end) continues what it
 * applied: a jump forward means Kafka deleted events before the shard read
 * them, a step back that the partition started over (a re-created topic);
 * an idle thread also compares positions with the partitions' ends every
 * second (stale positions after a re-created Kafka). Each asks the heal
 * thread (heal.h) for a repair from the truth store; the positions follow
 * the partition where it now is. Events of a table the index has no schema
 * for get the schemas fetched from the API put in front of them.
 *
 * Expiry (expiry.h). PUTs whose document carries an expiry join a
 * schedule; the apply thread deletes each document when its expiry comes
 * (at its own version) and a search first waits for any deletion that is
 * due (ixia_indexer_settle_expired). A PUT arriving after its expiry
 * applies as a delete.
 *
 * Disk reserve (common/disk.h). Before consuming and again before applying
 * each batch, the apply thread measures the free space of the file systems
 * of index.path and of the failed-updates log's directory (one statvfs
 * each). Under index.disk_reserve_mb it pauses rather than let RocksDB
 * meet a full disk (Debian's librocksdb aborts the process then): a batch
 * already gathered is dropped unapplied, every partition is unassigned (no
 * fetching, no position moves), queued reindex calls are refused with
 * IXIA_EEXHAUSTED, and free space is measured again every second. Once it
 * is back the partitions are assigned again at their stored positions, so
 * the dropped events are read again and nothing is skipped. Searches never
 * wait for the apply thread and keep answering from what is indexed; a sync
 * search times out with its usual error (which then says why). Pausing and
 * resuming are each logged once; status shows them.
 *
 * Failed-updates log (failed_log.h). Events that cannot be indexed are
 * skipped and appended to it before their position is committed.
 *
 * Cache (invalidator.h). With indexer.invalidate_cache and a non-empty
 * cache.servers, every PUT/DELETE key of an applied batch is deleted from
 * memcached once more, off the apply thread.
 *
 * Thread safety: ixia_indexer_new/stop/destroy from one controlling thread;
 * every other function may be called from any thread (server workers) while
 * the indexer runs. */
#ifndef IXIA_INDEXER_H
#define IXIA_INDEXER_H

#include <thrift/c_glib/processor/thrift_processor.h>

#include "config.h"
#include "error.h"
#include "failed_log.h"
#include "index.h"
#include "ixia_ixia_types.h"

typedef struct ixia_indexer ixia_indexer_t;

/* Parses an indexer.partitions value for a topic of n_partitions
 * partitions. Returns a sorted, deduplicated GArray of gint32 (every
 * partition when spec is empty or blank), or NULL with IXIA_EINVAL naming
 * indexer.partitions on bad syntax or a partition >= n_partitions. */
GArray *ixia_indexer_parse_partitions(const char *spec, gint32 n_partitions, ixia_error_t **err);

/* Reads the topic's partition count from Kafka (retrying for up to 30 s:
 * an indexer cannot choose its partitions without it), assigns them and
 * starts the apply thread. idx is borrowed and must outlive the indexer;
 * cfg is borrowed too. Fails with IXIA_EINVAL for a bad option and
 * IXIA_EUNAVAILABLE when Kafka cannot tell the partitions. */
ixia_indexer_t *ixia_indexer_new(const ixia_config_t *cfg, ixia_idx_t *idx, ixia_error_t **err);

/* Lets the current batch finish, stops the apply thread and the cache
 * invalidator, fails queued reindex calls with IXIA_EUNAVAILABLE and closes
 * the consumer. Idempotent. Stop the server first: its workers may be
 * waiting for a reindex to complete. */
void ixia_indexer_stop(ixia_indexer_t *ix);
/* Stops (if needed) and frees; NULL is accepted. Does not close the index. */
void ixia_indexer_destroy(ixia_indexer_t *ix);

/* The index (borrowed). */
ixia_idx_t *ixia_indexer_index(ixia_indexer_t *ix);

/* The partitions this shard consumes (sorted; borrowed) and, in
 * *partition_count (may be NULL), the topic's partition count. */
const GArray *ixia_indexer_partitions(ixia_indexer_t *ix, gint32 *partition_count);

/* TRUE while the shard repairs itself from the truth store (heal.h):
 * searches say "repairing": true. */
gboolean ixia_indexer_repairing(ixia_indexer_t *ix);
/* Asks for a repair (as if edits had been lost). */
void ixia_indexer_request_repair(ixia_indexer_t *ix, const char *why);

/* A search named a table this shard has no schema for (its schema event
 * was lost): fetches the schemas from the API, applies them and asks for a
 * repair. TRUE when the table's schema was applied. */
gboolean ixia_indexer_learn_schema(ixia_indexer_t *ix, const char *ns, const char *table);

/* Before a search counts: when documents are due to expire on this shard's
 * clock, waits (until deadline_us, monotonic) for the apply thread to drop
 * them, so totals and aggregations never count an expired document. Cheap
 * when nothing is due. */
void ixia_indexer_settle_expired(ixia_indexer_t *ix, gint64 deadline_us);
/* Whether settling would wait now (documents due to expire, or a reap in
 * progress): a search on an I/O thread then moves to a worker. */
gboolean ixia_indexer_expiry_due(ixia_indexer_t *ix);

/* Asks Kafka for the current high watermark of every owned partition and
 * waits until the apply thread has applied up to them. Fails with
 * IXIA_EUNAVAILABLE "shard not caught up within the deadline" (or naming the
 * Kafka error) when deadline_us (monotonic) passes first. */
gboolean ixia_indexer_wait_caught_up(ixia_indexer_t *ix, gint64 deadline_us, ixia_error_t **err);

/* TRUE when the truth-store key of (ns, table, key) maps to a partition
 * this shard consumes (librdkafka's default consistent_random partitioner,
 * as the replication sink uses). */
gboolean ixia_indexer_owns_key(ixia_indexer_t *ix, const char *ns, const char *table,
                               const char *key, size_t key_len);

/* Checks a change event (format 1, op, version, ns, table, doc where the op
 * needs one) and points out at its members (borrowed from e). FALSE with
 * IXIA_EINVAL or IXIA_EUNSUPPORTED (another format) otherwise. */
gboolean ixia_indexer_event_from_thrift(const IxiaChangeEvent *e, ixia_idx_event_t *out,
                                        ixia_error_t **err);

/* Applies events on the apply thread (the index allows one applying thread)
 * with the normal version rule and without moving any position, and waits
 * for it. SCHEMA events always apply; PUT/DELETE events whose key this
 * shard does not own are ignored. Events the index rejects go to the
 * failed-updates log (partition and offset null) and are not counted;
 * *applied (may be NULL) counts events that changed the index. Fails only
 * when the index could not write (nothing applied), with IXIA_EEXHAUSTED
 * under index.disk_reserve_mb (nothing applied), or when the indexer stops.
 * Events are borrowed for the duration of the call. */
gboolean ixia_indexer_reindex(ixia_indexer_t *ix, const ixia_idx_event_t *events, guint n,
                              guint *applied, ixia_error_t **err);

/* g_malloc'd JSON object: {"partitions": [{"partition", "next_offset",
 * "high_watermark", "lag"}], "partition_count", "max_version", "documents",
 * "events_applied", "events_skipped", "events_failed", "failed_log",
 * "failed_log_entries", "disk_bytes", "disk_paused" (the apply thread waits
 * for disk space), "disk_free_bytes" (least free space over the watched
 * file systems, measured now; -1 unknown), "disk_reserve_bytes", and the
 * indexer's own counters (among them "disk_pauses",
 * "reindex_refused_disk_full")}.
 * next_offset is the next offset the apply thread will apply (-1: nothing
 * read yet and none stored); high_watermark is the last one librdkafka saw
 * while fetching, or the last one a sync search asked for (null, and lag
 * null, when neither is known yet). failed_log_entries counts the lines of
 * the file now. */
char *ixia_indexer_status(ixia_indexer_t *ix);

/* The shard's monitoring (monitor.h; borrowed). */
typedef struct ixia_indexer_monitor ixia_indexer_monitor_t;
ixia_indexer_monitor_t *ixia_indexer_monitor_of(ixia_indexer_t *ix);

/* The Search server over ix, whose counters the status shows under
 * "server" (borrowed; set before serving, it must outlive ix's use). */
typedef struct ixia_server ixia_server_t;
void ixia_indexer_set_server(ixia_indexer_t *ix, const ixia_server_t *srv);

/* The Search Thrift processor over ix (borrowed; it must outlive the
 * processor). Query limits come from cfg's query.* options. g_object_unref
 * the result. */
ThriftProcessor *ixia_search_processor_new(ixia_indexer_t *ix, const ixia_config_t *cfg);
/* The Search calls the server's I/O threads answer themselves
 * (ixia_server_set_inline): "search" and "search_page", which move to a
 * worker themselves when the query may take long (see search.c). */
gboolean ixia_search_inline_call(const char *method, guint32 len);
/* search_page answered straight from its frame, before the processor
 * (ixia_thrift_gate_set_fast; user: the processor of
 * ixia_search_processor_new): TRUE with the whole answer appended to out,
 * FALSE (out untouched) for a frame of another shape, left to the
 * processor. Any server thread. */
gboolean ixia_search_answer_page(gpointer processor, const guint8 *frame, guint32 size,
                                 GByteArray *out);
/* The Search service's method names, NULL-terminated: the gate of a
 * shard's port is built with them (ixia_thrift_gate_new). */
extern const char *const ixia_search_methods[];

#endif
