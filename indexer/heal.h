/* Self-healing and anti-entropy of one index shard.
 *
 * Repair. A shard that finds edits it can never read from Kafka repairs
 * itself from the truth store, without an operator. The triggers (reported
 * by the apply thread, indexer.c): offsets deleted before the shard read
 * them (retention, or ixia-devkafka's memory budget), a partition whose
 * offsets went back (the topic was re-created, or Kafka lost its data),
 * stored positions past the partition's end, and events of a table whose
 * schema the index lacks (the schema event was lost). A repair, on the heal
 * thread, while the apply thread goes on consuming:
 *   1. fetches every schema from the API (Ixia.schemaEvents) and applies it;
 *   2. per table, streams the keys and versions of the shard's partitions
 *      from the API (Ixia.keyVersions: no documents) and merges them with
 *      the index's own live keys (ixia_ae_compare_keys);
 *   3. reindexes every key that differs from its current state in the
 *      store (Ixia.currentEvents: a PUT, or a DELETE at the store's version
 *      for a key the store no longer has), through the apply thread with the
 *      version rule, so it never undoes a newer edit from Kafka.
 * Edits made after the listing reach the shard through Kafka as usual (the
 * consumer resumed at the oldest retained offset, or at the re-created
 * topic's start). Until the repair has finished, the shard answers searches
 * with "repairing": true. A trigger during a repair runs another one after
 * it; a failed repair (API unreachable) is retried with back-off. Repairs
 * need the API's address (indexer.api, or indexer.api_port_file); with
 * indexer.self_heal off, triggers are only logged and counted.
 *
 * Anti-entropy. Continuously, at most indexer.anti_entropy_keys_per_s keys
 * a second and with indexer.anti_entropy_pause_s between passes, the heal
 * thread compares each table's (key, version) set with the store's by range
 * digests, descending where they differ (ixia_ae_walk). A key that differs
 * is re-checked once replication and the shard have caught up with the
 * version the store showed; if it still differs it is counted as
 * divergent and repaired like above. `ixia-recovery verify` runs the same
 * walk on demand over every shard (Search.digest).
 *
 * Thread safety: ixia_heal_request, _repairing and _status from any thread;
 * new/start/destroy from the indexer's controlling thread. */
#ifndef IXIA_HEAL_H
#define IXIA_HEAL_H

#include <cjson/cJSON.h>
#include <glib.h>

#include "config.h"
#include "error.h"
#include "index.h"

typedef struct ixia_indexer ixia_indexer_t;
typedef struct ixia_heal ixia_heal_t;

typedef enum {
  IXIA_HEAL_OFFSETS_LOST = 0, /* Kafka deleted events before the shard read them */
  IXIA_HEAL_REWOUND,          /* offsets went back: topic re-created or Kafka data lost */
  IXIA_HEAL_PAST_END,         /* stored position past the partition's end */
  IXIA_HEAL_MISSING_SCHEMA,   /* an event of a table the index has no schema for */
  IXIA_HEAL_REQUESTED,        /* asked for (tests, operators) */
  IXIA_HEAL_N_TRIGGERS
} ixia_heal_trigger_t;

/* Reads indexer.self_heal, indexer.api, indexer.api_port_file and the
 * anti-entropy options. ix is borrowed. */
ixia_heal_t *ixia_heal_new(const ixia_config_t *cfg, ixia_indexer_t *ix);
/* Starts the heal thread (once the indexer consumes). */
void ixia_heal_start(ixia_heal_t *h);
/* Stops the thread (a repair in progress is abandoned: it starts again
 * after a restart only if triggered again); requests after it are only
 * counted. Idempotent. */
void ixia_heal_stop(ixia_heal_t *h);
/* Stops and frees; NULL is accepted. */
void ixia_heal_destroy(ixia_heal_t *h);

/* Asks for a repair; `detail` (copied) is logged with the trigger. */
void ixia_heal_request(ixia_heal_t *h, ixia_heal_trigger_t why, const char *detail);
/* TRUE from a request until the repair it asks for has finished. */
gboolean ixia_heal_repairing(ixia_heal_t *h);
/* Adds the heal counters to a status object. */
void ixia_heal_status(ixia_heal_t *h, cJSON *o);

/* Every schema the API has, as SCHEMA events (a GPtrArray of
 * IxiaChangeEvent), fetched now with a short time-out; NULL with *err when
 * the API is not configured or not reachable. For the apply thread, which
 * applies them before a batch whose table it does not know. */
GPtrArray *ixia_heal_fetch_schemas(ixia_heal_t *h, ixia_error_t **err);

/* The index side of a digest (Search.digest and the walk): digests of the
 * live, unexpired documents of a table over (after, bounds[0]], (bounds[0],
 * bounds[1]], ... ("" = to the end); appends ixia_ae_range_t to out. */
gboolean ixia_heal_index_digest(ixia_idx_t *idx, const char *ns, const char *table,
                                const char *after, const char *const *bounds, guint n,
                                GArray *out, ixia_error_t **err);

#endif
