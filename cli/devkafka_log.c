/* Budget and reset of the mock cluster's partition logs (devkafka_log.h).
 *
 * The offsets below are those of librdkafka 2.0.x's rdkafka_mock_int.h on
 * LP64 (x86-64, arm64): struct rd_kafka_mock_cluster_s, _topic_s,
 * _partition_s and _msgset_s. They are only used after the checks in
 * ixia_devkafka_parts_find passed. */
#include "devkafka_log.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* rd_kafka_mock_cluster_s */
#define CL_RK 32          /* rd_kafka_t *rk */
#define CL_BROKER_CNT 64  /* int broker_cnt */
#define CL_TOPICS 72      /* TAILQ_HEAD topics: first */
#define CL_TOPIC_CNT 88   /* int topic_cnt */
/* rd_kafka_mock_topic_s */
#define TP_NEXT 0         /* TAILQ_ENTRY link: next */
#define TP_NAME 16        /* char *name */
#define TP_PARTS 24       /* rd_kafka_mock_partition_t *partitions */
#define TP_PART_CNT 32    /* int partition_cnt */
#define TP_CLUSTER 40     /* rd_kafka_mock_cluster_t *cluster */
/* rd_kafka_mock_partition_s */
#define PT_SIZE 208       /* sizeof */
#define PT_ID 16          /* int32_t id */
#define PT_START 24       /* int64_t start_offset */
#define PT_END 32         /* int64_t end_offset */
#define PT_FSTART 40      /* int64_t follower_start_offset */
#define PT_FEND 48        /* int64_t follower_end_offset */
#define PT_MSGSETS 64     /* TAILQ_HEAD msgsets: first, last */
#define PT_BYTES 80       /* size_t size */
#define PT_CNT 88         /* size_t cnt */
#define PT_MAX_BYTES 96   /* size_t max_size */
#define PT_MAX_CNT 104    /* size_t max_cnt */
#define PT_FOLLOWER_ID 192 /* int32_t follower_id */
#define PT_TOPIC 200      /* rd_kafka_mock_topic_s *topic */

#define FIELD(base, off, type) (*(type *)(void *)((guint8 *)(base) + (off)))
/* The same field read or written atomically: the mock's threads use these
 * fields too. Same size and alignment as the plain type on LP64. */
#define AFIELD(base, off, type) (*(_Atomic type *)(void *)((guint8 *)(base) + (off)))

static gboolean fail(char **why, const char *what) {
  *why = g_strdup_printf("librdkafka %s's mock cluster does not have the layout of 2.0.x (%s)",
                         rd_kafka_version_str(), what);
  return FALSE;
}

gboolean ixia_devkafka_parts_find(rd_kafka_mock_cluster_t *mc, rd_kafka_t *rk, const char *topic,
                                  int brokers, int partitions, ixia_devkafka_parts_t *out,
                                  char **why) {
  memset(out, 0, sizeof *out);
  int v = rd_kafka_version();
  if (sizeof(void *) != 8 || (v >> 24) != 2 || ((v >> 16) & 0xff) != 0) return fail(why, "version");
  guint8 *cl = (guint8 *)mc;
  if (FIELD(cl, CL_RK, rd_kafka_t *) != rk) return fail(why, "cluster handle");
  if (FIELD(cl, CL_BROKER_CNT, int) != brokers) return fail(why, "broker count");
  int topics = FIELD(cl, CL_TOPIC_CNT, int);
  guint8 *t = FIELD(cl, CL_TOPICS, guint8 *);
  for (int i = 0; t && i < topics; i++) {
    const char *name = FIELD(t, TP_NAME, const char *);
    if (FIELD(t, TP_CLUSTER, guint8 *) != cl) return fail(why, "topic back-pointer");
    if (name && strcmp(name, topic) == 0) break;
    t = FIELD(t, TP_NEXT, guint8 *);
  }
  if (!t) return fail(why, "topic not found");
  if (FIELD(t, TP_PART_CNT, int) != partitions) return fail(why, "partition count");
  guint8 *parts = FIELD(t, TP_PARTS, guint8 *);
  for (int i = 0; i < partitions; i++) {
    guint8 *p = parts + (gsize)i * PT_SIZE;
    if (FIELD(p, PT_ID, int32_t) != i || FIELD(p, PT_TOPIC, guint8 *) != t ||
        FIELD(p, PT_FOLLOWER_ID, int32_t) != -1 ||
        FIELD(p, PT_MAX_BYTES, size_t) != IXIA_DEVKAFKA_MOCK_MAX_BYTES ||
        FIELD(p, PT_MAX_CNT, size_t) != IXIA_DEVKAFKA_MOCK_MAX_BATCHES)
      return fail(why, "partition");
  }
  out->base = parts;
  out->stride = PT_SIZE;
  out->n = partitions;
  return TRUE;
}

static guint8 *part(const ixia_devkafka_parts_t *p, int i) { return p->base + (gsize)i * p->stride; }

void ixia_devkafka_parts_set_budget(const ixia_devkafka_parts_t *p, gsize bytes, gsize batches) {
  for (int i = 0; i < p->n; i++) {
    atomic_store_explicit(&AFIELD(part(p, i), PT_MAX_BYTES, size_t), bytes, memory_order_relaxed);
    atomic_store_explicit(&AFIELD(part(p, i), PT_MAX_CNT, size_t), batches, memory_order_relaxed);
  }
}

void ixia_devkafka_parts_usage(const ixia_devkafka_parts_t *p, int partition, gint64 *start,
                               gint64 *end, gsize *bytes, gsize *batches) {
  guint8 *pt = part(p, partition);
  *start = atomic_load_explicit(&AFIELD(pt, PT_START, int64_t), memory_order_relaxed);
  *end = atomic_load_explicit(&AFIELD(pt, PT_END, int64_t), memory_order_relaxed);
  *bytes = atomic_load_explicit(&AFIELD(pt, PT_BYTES, size_t), memory_order_relaxed);
  *batches = atomic_load_explicit(&AFIELD(pt, PT_CNT, size_t), memory_order_relaxed);
}

void ixia_devkafka_parts_reset(const ixia_devkafka_parts_t *p) {
  for (int i = 0; i < p->n; i++) {
    guint8 *pt = part(p, i);
    /* Each record batch is one malloc'd block whose first word is its
     * TAILQ next pointer (rd_kafka_mock_msgset_s). */
    for (guint8 *m = FIELD(pt, PT_MSGSETS, guint8 *); m;) {
      guint8 *next = FIELD(m, 0, guint8 *);
      free(m);
      m = next;
    }
    FIELD(pt, PT_MSGSETS, guint8 *) = NULL;
    FIELD(pt, PT_MSGSETS + 8, guint8 **) = &FIELD(pt, PT_MSGSETS, guint8 *);
    FIELD(pt, PT_BYTES, size_t) = 0;
    FIELD(pt, PT_CNT, size_t) = 0;
    FIELD(pt, PT_START, int64_t) = FIELD(pt, PT_END, int64_t) = 0;
    FIELD(pt, PT_FSTART, int64_t) = FIELD(pt, PT_FEND, int64_t) = 0;
  }
}
