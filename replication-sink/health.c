/* The sink's HTTP port (health.h): its stats as Prometheus families and
 * Kafka reachability as readiness. */
#include "health.h"

#include <cjson/cJSON.h>

#include "metrics.h"

struct ixia_sink_http {
  ixia_sink_t *sink;
  ixia_http_t *http;
};

static const ixia_prom_stat_t SINK_METRICS[] = {
    {"events_published", "ixia_sink_events_produced_total", "counter", "Change events Kafka acknowledged.", 0},
    {"calls", "ixia_sink_calls_total", "counter", "replicate calls received.", 0},
    {"call_failures", "ixia_sink_call_failures_total", "counter", "replicate calls that failed (the source re-sends).", 0},
    {"delivery_failures", "ixia_sink_delivery_failures_total", "counter", "Change events Kafka did not acknowledge.", 0},
    {"events_skipped", "ixia_sink_events_skipped_total", "counter", "WAL edits skipped (unknown records).", 0},
    {"producer_restarts", "ixia_sink_producer_restarts_total", "counter", "Kafka producers replaced after a fatal error.", 0},
    {"last_sequence", "ixia_sink_last_sequence", "gauge", "Sequence (version) of the last edit published.", 0},
};

static void collect(GString *out, gpointer user) {
  ixia_sink_http_t *h = user;
  char *text = ixia_sink_stats(h->sink);
  cJSON *st = cJSON_Parse(text);
  g_free(text);
  ixia_prom_stats(out, st, SINK_METRICS, G_N_ELEMENTS(SINK_METRICS), "ixia-replication-sink");
  cJSON_Delete(st);
}

static gboolean ready(gpointer user, GPtrArray *reasons) {
  ixia_sink_http_t *h = user;
  ixia_error_t *err = NULL;
  if (ixia_sink_kafka_check(h->sink, 2000, &err)) return TRUE;
  g_ptr_array_add(reasons, g_strdup(err->message));
  ixia_error_destroy(err);
  return FALSE;
}

ixia_sink_http_t *ixia_sink_http_new(const ixia_config_t *cfg, ixia_sink_t *sink, ixia_error_t **err) {
  if (ixia_config_int(cfg, "sink.http_port") < 0) return NULL;
  ixia_sink_http_t *h = g_new0(ixia_sink_http_t, 1);
  h->sink = sink;
  ixia_http_opts_t o = {.name = "ixia-replication-sink",
                        .host = ixia_config_str(cfg, "http.host"),
                        .port = (int)ixia_config_int(cfg, "sink.http_port"),
                        .port_file = ixia_config_str(cfg, "sink.http_port_file"),
                        .ready = ready,
                        .collect = collect,
                        .user = h};
  h->http = ixia_http_new(cfg, &o, err);
  if (!h->http) {
    ixia_sink_http_destroy(h);
    return NULL;
  }
  return h;
}

void ixia_sink_http_destroy(ixia_sink_http_t *h) {
  if (!h) return;
  ixia_http_destroy(h->http);
  g_free(h);
}
