/* What an index shard tells monitors: Prometheus metrics (per-partition lag
 * in offsets and seconds, apply rate, failed updates, commit-to-searchable
 * time), readiness (Kafka reachable, not paused for disk), and its
 * positions committed to a Kafka consumer group (indexer.consumer_group)
 * after each applied batch, so kafka-consumer-groups and Burrow see the
 * shards' lag. Those commits are for monitoring only: the positions stored
 * in the index stay the truth the indexer resumes from.
 *
 * The apply thread reports each applied batch (ixia_indexer_monitor_batch);
 * everything else may run on any thread. */
#ifndef IXIA_INDEXER_MONITOR_H
#define IXIA_INDEXER_MONITOR_H

#include <librdkafka/rdkafka.h>

#include "config.h"
#include "error.h"

/* Where an event of a batch came from (the indexer's batches carry one per
 * event). */
typedef struct {
  gint32 partition;
  gint64 offset;
} ixia_event_origin_t;

typedef struct ixia_indexer_monitor ixia_indexer_monitor_t;

/* rk (borrowed) is the indexer's consumer; group "" = no commits. */
ixia_indexer_monitor_t *ixia_indexer_monitor_new(rd_kafka_t *rk, const char *topic,
                                                 const char *group, gint32 n_partitions);
void ixia_indexer_monitor_destroy(ixia_indexer_monitor_t *m);

/* An applied batch: events (IxiaChangeEvent *) with their origins, and
 * next[p] the next offset of each partition it read (-1 none). */
void ixia_indexer_monitor_batch(ixia_indexer_monitor_t *m, const GPtrArray *events,
                                const ixia_event_origin_t *origins, const gint64 *next);

/* Seconds partition p is behind, given its lag in offsets: 0 when caught
 * up; otherwise the age of the last event applied from it (an upper bound
 * of the oldest unapplied event's age after an idle period). */
double ixia_indexer_monitor_lag_seconds(ixia_indexer_monitor_t *m, gint32 p, gint64 lag);

/* Events applied per second over the last 9 whole seconds. */
double ixia_indexer_monitor_apply_rate(ixia_indexer_monitor_t *m);

/* Kafka answers a metadata request within timeout_ms. */
gboolean ixia_indexer_monitor_kafka_check(ixia_indexer_monitor_t *m, int timeout_ms,
                                          ixia_error_t **err);

#endif
