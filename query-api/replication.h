/* The replication source: ships the truth store's WAL to replication sinks.
 *
 * One thread follows the store: from the checkpoint (the last version a
 * sink acknowledged) it takes whole write batches, sends them to a sink
 * (ReplicationSink.replicate, which answers only once Kafka has every event),
 * and only then advances the checkpoint. Batches come from an in-memory tail
 * the store fills as it commits, or, when that tail does not continue the
 * checkpoint (after a restart, a failed shipment or an overflow), from the
 * WAL itself (rocksdb_get_updates_since). The checkpoint is persisted durably
 * (store.path/REPLICATION_CHECKPOINT) every 200 ms and at shutdown, so a
 * crash at any point re-sends at most that much and never skips: delivery is
 * at-least-once and consumers are idempotent by version. A save that fails
 * (a full disk: ENOSPC is reported as RESOURCE_EXHAUSTED) is logged once,
 * counted and retried every 200 ms; shipping goes on from memory meanwhile,
 * and a crash then re-sends from the older persisted version.
 *
 * A call that fails at once on a kept connection (the sink closed it while
 * it idled: server.idle_timeout_ms) is made again at once on a new one.
 *
 * Failures: an unreachable or failing sink is retried with exponential
 * back-off (replication.retry_min_ms .. retry_max_ms), rotating through
 * replication.sinks; writers never wait for replication. If the WAL no longer
 * holds checkpoint+1 (purged past its retention), that is a gap: it is
 * logged, reported in stats, and shipping stops for good. It is never
 * skipped; the operator rebuilds the index from a snapshot.
 *
 * Thread safety: stats may be read from any thread. */
#ifndef IXIA_REPLICATION_H
#define IXIA_REPLICATION_H

#include "config.h"
#include "error.h"
#include "store.h"

typedef struct ixia_replication ixia_replication_t;

typedef struct {
  gboolean enabled;
  gint64 checkpoint;      /* last version acknowledged by a sink */
  gint64 latest;          /* store's latest version */
  guint64 events_published; /* edits acknowledged by sinks since start */
  guint64 calls;
  guint64 failures;
  guint64 wal_reads;      /* reads of the WAL files, made when the in-memory tail does not continue the checkpoint */
  guint64 reconnects;     /* calls that succeeded when made again at once on a new connection (the kept one was closed: an idle timeout) */
  gboolean gap;
  gint64 gap_missing_from; /* first missing version */
  gint64 gap_available_from; /* first version the WAL still holds */
  char *last_error;       /* g_malloc'd copy, NULL if none */
  gint64 persisted;       /* the checkpoint in store.path/REPLICATION_CHECKPOINT */
  guint64 checkpoint_failures; /* failed saves of that file (e.g. a full disk) */
  char *checkpoint_error; /* g_malloc'd: why the last save failed; NULL once one succeeds */
  gint64 pending_age_ms;  /* how long the oldest edit not acknowledged by a sink has waited (0: none) */
  gint64 call_age_ms;     /* how long the shipment in flight has waited for its sink (0: none) */
} ixia_replication_stats_t;

/* Starts the source when replication.sinks is set; otherwise returns a
 * disabled source (stats only). The store is borrowed and must outlive it. */
ixia_replication_t *ixia_replication_new(const ixia_config_t *cfg, ixia_store_t *store,
                                         ixia_error_t **err);
void ixia_replication_destroy(ixia_replication_t *r);
/* The last version a sink acknowledged: every edit up to it is in Kafka. */
gint64 ixia_replication_acked(ixia_replication_t *r);
/* Fills out; free out->last_error and out->checkpoint_error with g_free. */
void ixia_replication_get_stats(ixia_replication_t *r, ixia_replication_stats_t *out);

#endif
