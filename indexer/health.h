/* The HTTP port of ixia-indexer (indexer.http_port): /metrics (the shard's
 * status as Prometheus families, per-partition lag in offsets and seconds,
 * apply rate, failed updates, commit-to-searchable histogram), /healthz,
 * and /readyz (Kafka reachable, indexing not paused for disk).
 * new/destroy from the controlling thread; ix borrowed. */
#ifndef IXIA_INDEXER_HEALTH_H
#define IXIA_INDEXER_HEALTH_H

#include "http.h"
#include "indexer.h"

typedef struct ixia_indexer_http ixia_indexer_http_t;

/* NULL without error when indexer.http_port is -1. */
ixia_indexer_http_t *ixia_indexer_http_new(const ixia_config_t *cfg, ixia_indexer_t *ix,
                                           ixia_error_t **err);
void ixia_indexer_http_destroy(ixia_indexer_http_t *h);

#endif
