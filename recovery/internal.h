/* Helpers shared by the recovery subcommands (not part of the library's
 * public API). */
#ifndef IXIA_RECOVERY_INTERNAL_H
#define IXIA_RECOVERY_INTERNAL_H

#include <rocksdb/c.h>

#include "error.h"
#include "client.h"
#include "index.h"

/* Opens a snapshot's truth store read-only (default column family, which
 * holds every document and schema). *version: the snapshot's version. */
rocksdb_t *ixia_recovery_open_snapshot(const char *snapshot_dir, gint64 *version,
                                       ixia_error_t **err);

/* The API's latest store version (from its stats), or -1 with *err set. */
gint64 ixia_recovery_latest_version(ixia_client_t *api, ixia_error_t **err);

/* Blocks until every index shard has applied `version`: a query on ns.table
 * with min_version, through the API. */
gboolean ixia_recovery_wait_shards(ixia_client_t *api, const char *ns, const char *table,
                                   gint64 version, ixia_error_t **err);

/* Every index shard the API fans out to, each with a client whose calls
 * wait at most client.shard_timeout_ms. */
typedef struct {
  ixia_shard_client_t **shards;
  guint n;
} ixia_recovery_shards_t;
/* Asks the API for its shards and connects to each; on failure nothing is
 * left open. */
gboolean ixia_recovery_shards_open(ixia_client_t *api, ixia_recovery_shards_t *out,
                                   ixia_error_t **err);
/* Closes what is open; safe on a zeroed or closed set. */
void ixia_recovery_shards_close(ixia_recovery_shards_t *s);
/* Sends one page of events (IxiaChangeEvent) to every shard's reindex (a
 * shard ignores keys it does not own); *applied (may be NULL) adds what
 * they applied. */
gboolean ixia_recovery_reindex(const ixia_recovery_shards_t *s, GPtrArray *events,
                               guint64 *applied, ixia_error_t **err);

#endif
