/* The partition logs of ixia-devkafka's mock cluster: their memory budget
 * and a reset that makes a topic look re-created (private to devkafka.c).
 *
 * librdkafka's mock cluster keeps each partition's record batches in memory
 * and deletes the oldest beyond 5 MiB or 100,000 batches per partition,
 * limits fixed in its private partition struct with no API to change them.
 * A burst of a few tens of thousands of documents then outruns a busy
 * indexer. Batches are one linked list per partition that the mock walks
 * from the oldest to find each fetch's position, so the batch count, not
 * the bytes, sets what a fetch costs: 300,000 batches of one event each
 * took a core and put-to-Kafka p99 from 13 to 230 ms. ixia-devkafka sets
 * both limits, to its memory budget and its batch budget, by writing
 * those two fields, found by walking the cluster's private structures with
 * the layout of librdkafka 2.0.x (Debian 12 ships 2.0.2). Every step is
 * checked against what the layout must hold (the cluster's own rd_kafka_t,
 * the broker count, the topic's name and partition count, each partition's
 * id, its back-pointer and the built-in limits): on any other librdkafka,
 * or any mismatch, nothing is written and the caller reports that the
 * built-in limits apply.
 *
 * Thread safety: called with devkafka's command lock held. The mock thread
 * reads the fields written here; each is one aligned machine word. */
#ifndef IXIA_DEVKAFKA_LOG_H
#define IXIA_DEVKAFKA_LOG_H

#include <glib.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

typedef struct {
  guint8 *base; /* the topic's array of mock partitions */
  gsize stride;
  int n;
} ixia_devkafka_parts_t;

/* librdkafka's built-in limits per partition. */
#define IXIA_DEVKAFKA_MOCK_MAX_BYTES (5 * 1024 * 1024)
#define IXIA_DEVKAFKA_MOCK_MAX_BATCHES 100000

/* Finds the partitions of `topic`; FALSE with *why (g_malloc'd) when the
 * layout cannot be trusted. */
gboolean ixia_devkafka_parts_find(rd_kafka_mock_cluster_t *mc, rd_kafka_t *rk, const char *topic,
                                  int brokers, int partitions, ixia_devkafka_parts_t *out,
                                  char **why);
/* Keeps up to `bytes` and up to `batches` record batches per partition. */
void ixia_devkafka_parts_set_budget(const ixia_devkafka_parts_t *p, gsize bytes, gsize batches);
/* One partition's log: first and next offset, bytes and record batches held. */
void ixia_devkafka_parts_usage(const ixia_devkafka_parts_t *p, int partition, gint64 *start,
                               gint64 *end, gsize *bytes, gsize *batches);
/* Deletes every record batch and starts each partition's offsets at 0
 * again: to consumers, the topic was deleted and created anew. Only while
 * every broker is down (the mock thread then touches no partition). */
void ixia_devkafka_parts_reset(const ixia_devkafka_parts_t *p);

#endif
