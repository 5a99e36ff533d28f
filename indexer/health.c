/* The index shard's HTTP port (health.h): /metrics from the shard's status,
 * /readyz from Kafka and the disk reserve. */
#include "health.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "metrics.h"
#include "monitor.h"

struct ixia_indexer_http {
  ixia_indexer_t *ix;
  ixia_http_t *http;
};

static double num(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? 1 : 0) : cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const ixia_prom_stat_t SHARD_METRICS[] = {
    {"documents", "ixia_indexer_documents", "gauge", "Live documents in this shard's index.", 0},
    {"stale_documents", "ixia_indexer_stale_documents", "gauge", "Live documents indexed before an index their table declares now (a field added later): while above 0, hits of a filter with not are matched again by the query API; a backfill of the table brings it to 0.", 0},
    {"max_version", "ixia_indexer_max_version", "gauge", "Highest version applied.", 0},
    {"events_applied", "ixia_indexer_events_applied_total", "counter", "Change events that changed the index.", 0},
    {"events_skipped", "ixia_indexer_events_skipped_total", "counter", "Change events older than what the index holds (re-sends).", 0},
    {"events_failed", "ixia_indexer_events_failed_total", "counter", "Change events that could not be indexed (failed-updates log).", 0},
    {"failed_log_entries", "ixia_indexer_failed_log_entries", "gauge", "Lines in the failed-updates log now (replay them with ixia-recovery replay-failed).", 0},
    {"apply_rate", "ixia_indexer_apply_rate", "gauge", "Change events applied per second, over the last 9 seconds.", 0},
    {"batches", "ixia_indexer_batches_total", "counter", "Batches applied.", 0},
    {"apply_cpu_ms", "ixia_indexer_apply_cpu_seconds_total", "counter", "CPU time of the thread that applies every batch.", 0.001},
    {"apply_wait_ms", "ixia_indexer_apply_wait_seconds_total", "counter", "Time the apply thread was runnable but waited for a CPU (the kernel's schedstat). Growing faster than its CPU time: the machine has no core to spare for it.", 0.001},
    {"kafka_errors", "ixia_indexer_kafka_errors_total", "counter", "Kafka consumer errors.", 0},
    {"offsets_lost", "ixia_indexer_offsets_lost_total", "counter", "Events Kafka deleted before this shard read them (rebuild needed).", 0},
    {"disk_paused", "ixia_indexer_disk_paused", "gauge", "1 while indexing waits for disk space (index.disk_reserve_mb).", 0},
    {"disk_free_bytes", "ixia_indexer_disk_free_bytes", "gauge", "Least free bytes over the shard's file systems.", 0},
};

static void collect(GString *out, gpointer user) {
  ixia_indexer_http_t *h = user;
  char *text = ixia_indexer_status(h->ix);
  cJSON *st = cJSON_Parse(text);
  g_free(text);
  ixia_prom_stats(out, st, SHARD_METRICS, G_N_ELEMENTS(SHARD_METRICS), "ixia-indexer");
  const cJSON *parts = cJSON_GetObjectItemCaseSensitive(st, "partitions");
  const char *fams[][3] = {
      {"ixia_indexer_partition_lag", "lag", "Events of the partition not yet applied (high watermark - next offset)."},
      {"ixia_indexer_partition_lag_seconds", "lag_seconds", "How far behind the partition is in time: 0 caught up, else the age of its last applied event."},
      {"ixia_indexer_partition_next_offset", "next_offset", "Next offset of the partition to apply."},
  };
  for (guint f = 0; f < G_N_ELEMENTS(fams); f++) {
    ixia_prom_family(out, fams[f][0], "gauge", fams[f][2]);
    const cJSON *p;
    cJSON_ArrayForEach(p, parts) {
      GString *l = g_string_new(NULL);
      char part[16];
      g_snprintf(part, sizeof part, "%.0f", num(p, "partition"));
      ixia_prom_label(l, "topic", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "kafka_topic")));
      ixia_prom_label(l, "partition", part);
      ixia_prom_sample(out, fams[f][0], l->str, num(p, fams[f][1]));
      g_string_free(l, TRUE);
    }
  }
  cJSON_Delete(st);
}

static gboolean ready(gpointer user, GPtrArray *reasons) {
  ixia_indexer_http_t *h = user;
  ixia_error_t *err = NULL;
  if (!ixia_indexer_monitor_kafka_check(ixia_indexer_monitor_of(h->ix), 2000, &err)) {
    g_ptr_array_add(reasons, g_strdup(err->message));
    ixia_error_destroy(err);
  }
  char *text = ixia_indexer_status(h->ix);
  cJSON *st = cJSON_Parse(text);
  g_free(text);
  if (num(st, "disk_paused"))
    g_ptr_array_add(reasons, g_strdup("indexing paused: free disk space is under index.disk_reserve_mb"));
  cJSON_Delete(st);
  return reasons->len == 0;
}

ixia_indexer_http_t *ixia_indexer_http_new(const ixia_config_t *cfg, ixia_indexer_t *ix,
                                           ixia_error_t **err) {
  if (ixia_config_int(cfg, "indexer.http_port") < 0) return NULL;
  ixia_indexer_http_t *h = g_new0(ixia_indexer_http_t, 1);
  h->ix = ix;
  ixia_http_opts_t o = {.name = "ixia-indexer",
                        .host = ixia_config_str(cfg, "http.host"),
                        .port = (int)ixia_config_int(cfg, "indexer.http_port"),
                        .port_file = ixia_config_str(cfg, "indexer.http_port_file"),
                        .ready = ready,
                        .collect = collect,
                        .user = h};
  h->http = ixia_http_new(cfg, &o, err);
  if (!h->http) {
    ixia_indexer_http_destroy(h);
    return NULL;
  }
  return h;
}

void ixia_indexer_http_destroy(ixia_indexer_http_t *h) {
  if (!h) return;
  ixia_http_destroy(h->http);
  g_free(h);
}
