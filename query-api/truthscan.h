/* The truth store's side of self-healing and anti-entropy: what an index
 * shard (indexer/heal.c) or `ixia-recovery verify` asks the API when it
 * compares an index with the truth (common/antientropy.h).
 *
 *   keyVersions    keys and versions of a key interval, no documents
 *   digest         range digests of a key interval
 *   currentEvents  the current state of keys as change events (reindexing)
 *   schemaEvents   every schema as a SCHEMA change event
 *
 * Each listing reads one consistent view of the store and reports the
 * store's latest version just before it (store_version): a key absent from
 * the view had no live document at that version, which is what lets a
 * shard leave a tombstone at it. Optionally only the keys of some Kafka
 * partitions (the shard's): the partition of a key is
 * ixia_kafka_partition of its truth-store key, as the sink publishes it.
 *
 * Costs: one RocksDB iterator over the interval (values are read but never
 * parsed or sent), one CRC-32 per key with a partition filter. Limits:
 * keyVersions at most IXIA_TRUTHSCAN_MAX_KEYS keys and half of
 * server.max_frame_bytes per answer; digest at most
 * IXIA_TRUTHSCAN_MAX_DIGEST_KEYS keys and IXIA_TRUTHSCAN_MAX_RANGES ranges
 * per call.
 *
 * Thread safety: every call may run on any server worker. */
#ifndef IXIA_TRUTHSCAN_H
#define IXIA_TRUTHSCAN_H

#include <glib.h>

#include "api.h"
#include "error.h"

#define IXIA_TRUTHSCAN_MAX_KEYS 100000
#define IXIA_TRUTHSCAN_MAX_DIGEST_KEYS 1000000
#define IXIA_TRUTHSCAN_MAX_RANGES 10000
/* Kafka allows far fewer per topic; bounds the filter's memory. */
#define IXIA_TRUTHSCAN_MAX_PARTITIONS 100000

/* Which keys: every key when partition_count is 0 or partitions is empty. */
typedef struct {
  gint32 partition_count;
  const gint32 *partitions;
  guint n_partitions;
} ixia_truthscan_filter_t;

/* Appends IxiaKeyVersion objects to out (a GPtrArray owning them). */
gboolean ixia_truthscan_key_versions(ixia_api_t *api, const char *ns, const char *table,
                                     const char *after, const char *end, gint limit,
                                     const ixia_truthscan_filter_t *f, GPtrArray *out,
                                     gint64 *store_version, ixia_error_t **err);

/* Appends IxiaRangeDigest objects to out. */
gboolean ixia_truthscan_digest(ixia_api_t *api, const char *ns, const char *table,
                               const char *after, const char *end, gint max_keys,
                               gint bucket_keys, const ixia_truthscan_filter_t *f, GPtrArray *out,
                               gint64 *store_version, ixia_error_t **err);

/* Appends one IxiaChangeEvent per key to out (PUT, or DELETE at the
 * store's version when missing or expired). At most limits.max_get_keys. */
gboolean ixia_truthscan_current_events(ixia_api_t *api, const char *ns, const char *table,
                                       const char *const *keys, guint n, GPtrArray *out,
                                       ixia_error_t **err);

/* Appends one SCHEMA IxiaChangeEvent per table to out. */
gboolean ixia_truthscan_schema_events(ixia_api_t *api, GPtrArray *out, ixia_error_t **err);

#endif
