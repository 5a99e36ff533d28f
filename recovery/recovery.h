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

/* The shard addresses a running API fans out to (g_strfreev). */
char **ixia_recovery_shards(ixia_client_t *api, ixia_error_t **err);

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

#endif
