/* The HTTP port of ixia-replication-sink (sink.http_port): /metrics (events
 * produced, delivery latency, failures), /healthz, and /readyz (Kafka
 * answers a metadata request). new/destroy from the controlling thread;
 * sink borrowed. */
#ifndef IXIA_SINK_HEALTH_H
#define IXIA_SINK_HEALTH_H

#include "http.h"
#include "sink.h"

typedef struct ixia_sink_http ixia_sink_http_t;

/* NULL without error when sink.http_port is -1. */
ixia_sink_http_t *ixia_sink_http_new(const ixia_config_t *cfg, ixia_sink_t *sink, ixia_error_t **err);
void ixia_sink_http_destroy(ixia_sink_http_t *h);

#endif
