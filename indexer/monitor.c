/* The shard's monitoring (monitor.h): batch observations, lag in time,
 * consumer-group commits and the Kafka reachability check. */
#include "monitor.h"

#include <string.h>

#include "ixia_ixia_types.h"
#include "log.h"
#include "metrics.h"

/* Apply rate window: per-second slots. */
#define RATE_SLOTS 10

struct ixia_indexer_monitor {
  rd_kafka_t *rk;
  char *topic;
  gboolean commit;
  gint32 n;
  GMutex lock;
  gint64 *last_event_ms; /* per partition: timestamp of the last applied event, 0 none */
  gint64 started_ms;
  ixia_metric_series_t *searchable;
  ixia_metric_series_t *commits_failed;
  guint64 slots[RATE_SLOTS];
  gint64 slot_sec[RATE_SLOTS];
};

static const double searchable_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                            1,     2.5,  5,     10,   30,  60,  300};

ixia_indexer_monitor_t *ixia_indexer_monitor_new(rd_kafka_t *rk, const char *topic,
                                                 const char *group, gint32 n_partitions) {
  ixia_indexer_monitor_t *m = g_new0(ixia_indexer_monitor_t, 1);
  m->rk = rk;
  m->topic = g_strdup(topic);
  m->commit = group && *group;
  m->n = n_partitions;
  g_mutex_init(&m->lock);
  m->last_event_ms = g_new0(gint64, MAX(n_partitions, 1));
  m->started_ms = g_get_real_time() / 1000;
  ixia_metrics_t *reg = ixia_metrics_default();
  m->searchable = ixia_metrics_series(
      ixia_metrics_histogram(reg, "ixia_indexer_commit_to_searchable_seconds",
                             "From the sink reading an edit of the truth store's WAL to the edit "
                             "being searchable on this shard.",
                             NULL, searchable_buckets, G_N_ELEMENTS(searchable_buckets)),
      NULL);
  m->commits_failed = ixia_metrics_series(
      ixia_metrics_counter(reg, "ixia_indexer_group_commits_failed_total",
                           "Position commits to the Kafka consumer group that failed "
                           "(monitoring only; the index keeps its own positions).",
                           NULL),
      NULL);
  return m;
}

void ixia_indexer_monitor_destroy(ixia_indexer_monitor_t *m) {
  if (!m) return;
  g_mutex_clear(&m->lock);
  g_free(m->last_event_ms);
  g_free(m->topic);
  g_free(m);
}

static void count_applied(ixia_indexer_monitor_t *m, guint n, gint64 now_ms) {
  gint64 sec = now_ms / 1000;
  guint i = (guint)(sec % RATE_SLOTS);
  if (m->slot_sec[i] != sec) {
    m->slot_sec[i] = sec;
    m->slots[i] = 0;
  }
  m->slots[i] += n;
}

void ixia_indexer_monitor_batch(ixia_indexer_monitor_t *m, const GPtrArray *events,
                                const ixia_event_origin_t *origins, const gint64 *next) {
  if (!m) return;
  gint64 now_ms = g_get_real_time() / 1000;
  g_mutex_lock(&m->lock);
  for (guint i = 0; i < events->len; i++) {
    const IxiaChangeEvent *e = g_ptr_array_index(events, i);
    if (e->timestamp_ms > 0) ixia_metric_observe(m->searchable, (double)MAX(now_ms - e->timestamp_ms, 0) / 1000.0);
    gint32 p = origins[i].partition;
    if (p >= 0 && p < m->n && e->timestamp_ms > m->last_event_ms[p]) m->last_event_ms[p] = e->timestamp_ms;
  }
  count_applied(m, events->len, now_ms);
  g_mutex_unlock(&m->lock);
  if (!m->commit) return;
  rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(4);
  for (gint32 p = 0; p < m->n; p++)
    if (next[p] >= 0) rd_kafka_topic_partition_list_add(list, m->topic, p)->offset = next[p];
  if (list->cnt > 0) {
    /* Asynchronous: a slow or absent coordinator never delays indexing. */
    rd_kafka_resp_err_t kerr = rd_kafka_commit(m->rk, list, 1);
    if (kerr) ixia_metric_add(m->commits_failed, 1);
  }
  rd_kafka_topic_partition_list_destroy(list);
}

double ixia_indexer_monitor_lag_seconds(ixia_indexer_monitor_t *m, gint32 p, gint64 lag) {
  if (!m || lag <= 0 || p < 0 || p >= m->n) return 0;
  g_mutex_lock(&m->lock);
  gint64 last = m->last_event_ms[p] ? m->last_event_ms[p] : m->started_ms;
  g_mutex_unlock(&m->lock);
  return (double)MAX(g_get_real_time() / 1000 - last, 0) / 1000.0;
}

/* Events applied per second over the last full seconds of the window. */
static double apply_rate(ixia_indexer_monitor_t *m) {
  gint64 sec = g_get_real_time() / G_USEC_PER_SEC;
  guint64 sum = 0;
  g_mutex_lock(&m->lock);
  for (guint i = 0; i < RATE_SLOTS; i++)
    if (m->slot_sec[i] < sec && m->slot_sec[i] >= sec - (RATE_SLOTS - 1)) sum += m->slots[i];
  g_mutex_unlock(&m->lock);
  return (double)sum / (RATE_SLOTS - 1);
}

double ixia_indexer_monitor_apply_rate(ixia_indexer_monitor_t *m) { return m ? apply_rate(m) : 0; }

gboolean ixia_indexer_monitor_kafka_check(ixia_indexer_monitor_t *m, int timeout_ms,
                                          ixia_error_t **err) {
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(m->rk, m->topic, NULL);
  rd_kafka_resp_err_t kerr = rd_kafka_metadata(m->rk, 0, rkt, &md, timeout_ms);
  if (md) rd_kafka_metadata_destroy(md);
  if (rkt) rd_kafka_topic_destroy(rkt);
  if (kerr)
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "Kafka unreachable: %s", rd_kafka_err2str(kerr));
  return TRUE;
}
