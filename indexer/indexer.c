/* The index shard's consumer (indexer.h): Kafka partitions in, batches
 * applied to the index, positions stored with them.
 *
 * One apply thread owns the consumer: it gathers a batch, checks offset
 * continuity, fills in missing schemas, applies the batch with its
 * positions in one index write, and hands the keys to the invalidator.
 * Calls from the Search service (reindex, wait for a version) become jobs
 * the apply thread runs between batches, so the index has one writer.
 * Failed events go to the failed-updates log (failed_log.c) before their
 * position is stored. */
#include "indexer.h"

#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "disk.h"
#include "expiry.h"
#include "heal.h"
#include "invalidator.h"
#include "json.h"
#include "kafka_util.h"
#include "log.h"
#include "monitor.h"
#include "record.h"
#include "server.h"
#include "thrift_util.h"

/* An idle poll returns after this long so queued reindex calls are served. */
#define IDLE_POLL_MS 100
/* First back-off after the index failed to write a batch. */
#define RETRY_MIN_MS 50
/* One Kafka (or memcached) warning per this long; the rest are counted. */
#define LOG_EVERY_US (5 * G_USEC_PER_SEC)
/* While paused for disk space, free space is measured this often. */
#define DISK_RECHECK_US G_USEC_PER_SEC
/* An idle apply thread compares positions with the partitions' ends this
 * often. */
#define END_CHECK_US G_USEC_PER_SEC
/* How long a seek may wait for the fetchers to take a partition's new
 * position (rd_kafka_seek_partitions); past it, the partitions are
 * re-assigned instead. */
#define SEEK_TIMEOUT_MS 5000
/* A table whose schema the API did not have either is not asked for again
 * before this long. */
#define SCHEMA_MISS_RETRY_US (10 * G_USEC_PER_SEC)

/* ---------- state ---------- */

/* A reindex() call handed to the apply thread. Reference-counted
 * (g_atomic_rc_box): the caller and the queue each hold one. */
typedef struct {
  GMutex lock;
  GCond cond;
  gboolean done;
  gboolean ok;
  guint applied;
  ixia_error_t *err;
  const ixia_idx_event_t *events;
  guint n;
} job_t;

/* Where an event of a batch came from, for the failed-updates log. */
typedef ixia_event_origin_t origin_t;

typedef struct {
  GPtrArray *objs;  /* IxiaChangeEvent *: own what events point into */
  GArray *events;   /* ixia_idx_event_t */
  GArray *origins;  /* origin_t, parallel to events */
  gint64 *next;     /* per partition: offset after the last message, -1 none */
  gint64 *eof;      /* per partition: end offset reported, -1 none */
  gboolean *rewound; /* per partition: offsets went back (topic re-created) */
  GString *pending; /* failed-log lines of undecodable messages */
  guint messages;
} batch_t;

struct ixia_indexer {
  ixia_idx_t *idx;
  char *topic;
  char *brokers;
  gint64 metadata_wait_us; /* kafka.metadata_timeout_ms */
  char *failed_log;
  gint32 n_partitions;
  GArray *owned;       /* gint32, sorted */
  gboolean *owns;      /* by partition */
  guint max_events;
  gint64 wait_ms;
  gint64 retry_max_ms;

  rd_kafka_t *rk;
  rd_kafka_queue_t *consumer_q; /* for waking the poll */
  rd_kafka_topic_t *rkt;        /* for the partitioner */
  char *group;                  /* indexer.consumer_group */
  ixia_indexer_monitor_t *monitor; /* metrics, group commits (monitor.h) */
  const ixia_server_t *server;     /* its Search server, for status; may be NULL */
  GThread *thread;
  _Atomic gint stop;
  gboolean stopped;

  GMutex job_lock; /* guards jobs_closed against pushes after stop */
  gboolean jobs_closed;
  GAsyncQueue *jobs; /* job_t *, or &wake_marker */

  GMutex pos_lock;
  GCond pos_cond;    /* broadcast after every applied batch */
  gint64 *applied;   /* per partition: next offset to apply, -1 none yet */
  gint64 *high_seen; /* per partition: last high watermark queried, -1 */

  gboolean log_dir_synced;

  /* index.disk_reserve_mb on index.path and the failed-updates log's
   * directory. disk_paused (atomic) is set while the apply thread waits for
   * space. */
  ixia_disk_reserve_t *disk;
  _Atomic gint disk_paused;
  _Atomic gint reaping; /* atomic: the apply thread is dropping expired documents */

  ixia_cache_t *cache;
  ixia_invalidator_t *invalidator; /* NULL: no cache to invalidate */

  ixia_log_limit_t kafka_rl, failed_rl;

  /* Self-healing and anti-entropy (heal.h), the expiry schedule (expiry.h;
   * apply thread), and tables the API had no schema for either (apply
   * thread: "ns\ttable" -> monotonic time of the miss). */
  ixia_heal_t *heal;
  ixia_expiry_t *expiry;
  GHashTable *schema_misses;
  gint64 last_end_check;
  _Atomic gint64 last_schema_fetch; /* atomic: a search's fetch of schemas (learn_schema) */
  char fetch_wait[24]; /* indexer.fetch_wait_ms, as librdkafka wants it */

  /* Counters, atomics. */
  _Atomic guint64 batches;
  _Atomic guint64 messages;
  _Atomic guint64 undecodable;
  _Atomic guint64 offsets_lost; /* events Kafka deleted before this shard read them */
  _Atomic guint64 apply_failures;
  _Atomic guint64 kafka_errors;
  _Atomic guint64 failed_log_lines;
  _Atomic guint64 failed_log_errors;
  _Atomic guint64 reindex_calls;
  _Atomic guint64 reindex_ignored;
  _Atomic guint64 disk_pauses;   /* times the apply thread paused for disk space */
  _Atomic guint64 reindex_refused_disk_full;
  _Atomic guint64 offsets_rewound; /* partitions whose offsets went back */
  _Atomic guint64 expired_removed; /* documents dropped at their expiry */
  _Atomic guint64 schemas_fetched; /* SCHEMA events fetched for tables the index lacked */
  _Atomic gint64 apply_us; /* time inside ixia_idx_apply */
  _Atomic gint apply_tid;   /* the apply thread's id, for its schedstat; 0 before it runs */
};

static char wake_marker;

/* ---------- failed-updates log ---------- */

static gboolean failed_log_write(ixia_indexer_t *ix, const char *text, size_t len,
                                 ixia_error_t **err) {
  return ixia_failed_log_append(ix->failed_log, text, len, &ix->log_dir_synced, err);
}

typedef struct {
  ixia_indexer_t *ix;
  const ixia_idx_event_t *events;
  guint n;
  const origin_t *origins; /* NULL for reindex */
} fail_ctx_t;

/* Called by ixia_idx_apply before it commits the batch, so the line is on
 * disk before the event's position is. */
static void on_failed(const ixia_idx_event_t *ev, const ixia_error_t *why, void *ud) {
  fail_ctx_t *fc = ud;
  ixia_indexer_t *ix = fc->ix;
  gint32 partition = -1;
  gint64 offset = -1;
  if (fc->origins && ev >= fc->events && ev < fc->events + fc->n) {
    const origin_t *o = &fc->origins[ev - fc->events];
    partition = o->partition;
    offset = o->offset;
  }
  const char *ns = ev->ns ? ev->ns : "", *table = ev->table ? ev->table : "";
  char *line = ixia_failed_log_line(ns, strlen(ns), table, strlen(table),
                           ev->op == IXIA_IDX_SCHEMA ? NULL : ev->key, ev->key_len, ev->version,
                           ev->op, why ? why->code : IXIA_EINTERNAL,
                           why ? why->message : "unknown", partition, offset);
  ixia_error_t *err = NULL;
  if (failed_log_write(ix, line, strlen(line), &err)) {
    atomic_fetch_add_explicit(&ix->failed_log_lines, 1, memory_order_relaxed);
    ixia_log_warn_limited(&ix->failed_rl, "failed update (in the failed-updates log)", g_strchomp(line));
  } else {
    /* The batch commits anyway (the index API cannot be stopped from
     * here): keep the line in the daemon's log so it is not lost. */
    atomic_fetch_add_explicit(&ix->failed_log_errors, 1, memory_order_relaxed);
    IXIA_ERROR("%s; the failed update was: %s", err->message, g_strchomp(line));
    ixia_error_destroy(err);
  }
  g_free(line);
}

/* ---------- partitions ---------- */

GArray *ixia_indexer_parse_partitions(const char *spec, gint32 n_partitions, ixia_error_t **err) {
  gboolean *seen = g_new0(gboolean, n_partitions > 0 ? n_partitions : 1);
  gboolean ok = TRUE;
  gboolean any = FALSE;
  gchar **parts = g_strsplit(spec ? spec : "", ",", -1);
  gboolean blank = TRUE;
  for (gchar **p = parts; *p; p++)
    if (*g_strstrip(*p)) blank = FALSE;
  for (gchar **p = parts; ok && !blank && *p; p++) {
    const char *tok = *p;
    const char *dash = strchr(tok, '-');
    char *lo_s = dash ? g_strndup(tok, (gsize)(dash - tok)) : g_strdup(tok);
    char *hi_s = dash ? g_strdup(dash + 1) : g_strdup(tok);
    g_strstrip(lo_s);
    g_strstrip(hi_s);
    guint64 lo = 0, hi = 0;
    if (!g_ascii_string_to_unsigned(lo_s, 10, 0, G_MAXINT32, &lo, NULL) ||
        !g_ascii_string_to_unsigned(hi_s, 10, 0, G_MAXINT32, &hi, NULL) || lo > hi) {
      ok = ixia_error_set(err, IXIA_EINVAL,
                          "indexer.partitions: '%s' is not a partition or range (expected e.g. "
                          "\"0,1\" or \"0-3\")",
                          tok);
    } else if (hi >= (guint64)n_partitions) {
      ok = ixia_error_set(err, IXIA_EINVAL,
                          "indexer.partitions: partition %" G_GUINT64_FORMAT
                          " does not exist: the topic has %d partitions (0-%d)",
                          hi, n_partitions, n_partitions - 1);
    } else {
      for (guint64 i = lo; i <= hi; i++) seen[i] = TRUE;
      any = TRUE;
    }
    g_free(lo_s);
    g_free(hi_s);
  }
  g_strfreev(parts);
  if (ok && !blank && !any) ok = ixia_error_set(err, IXIA_EINVAL, "indexer.partitions: empty");
  GArray *out = NULL;
  if (ok) {
    out = g_array_new(FALSE, FALSE, sizeof(gint32));
    for (gint32 i = 0; i < n_partitions; i++)
      if (blank || seen[i]) g_array_append_val(out, i);
  }
  g_free(seen);
  return out;
}

/* The topic's partition count (an indexer cannot choose its partitions
 * without it). */
static gint32 topic_partitions(ixia_indexer_t *ix, ixia_error_t **err) {
  return ixia_kafka_topic_partitions(ix->rk, ix->topic, ix->brokers, ix->metadata_wait_us, err);
}

/* (Re)assigns every owned partition at its stored position: at start, and
 * after a failed batch so that its messages are read again. */
static gboolean assign_stored(ixia_indexer_t *ix, ixia_error_t **err) {
  rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)ix->owned->len);
  for (guint i = 0; i < ix->owned->len; i++) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    gint64 pos = ixia_idx_position(ix->idx, p);
    rd_kafka_topic_partition_list_add(list, ix->topic, p)->offset =
        pos >= 0 ? pos : RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_resp_err_t kerr = rd_kafka_assign(ix->rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (kerr)
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "kafka assign: %s", rd_kafka_err2str(kerr));
  return TRUE;
}

gboolean ixia_indexer_owns_key(ixia_indexer_t *ix, const char *ns, const char *table,
                               const char *key, size_t key_len) {
  GBytes *k = ixia_record_doc_key(ns, table, key, key_len);
  size_t len;
  const void *data = g_bytes_get_data(k, &len);
  gint32 p = rd_kafka_msg_partitioner_consistent_random(ix->rkt, data, len, ix->n_partitions,
                                                        NULL, NULL);
  g_bytes_unref(k);
  return p >= 0 && p < ix->n_partitions && ix->owns[p];
}

/* ---------- decoding ---------- */

gboolean ixia_indexer_event_from_thrift(const IxiaChangeEvent *e, ixia_idx_event_t *out,
                                        ixia_error_t **err) {
  if (e->__isset_format && e->format != 1)
    return ixia_error_set(err, IXIA_EUNSUPPORTED,
                          "change event format %d is not supported (this indexer reads format 1)",
                          e->format);
  if (!e->__isset_op || !e->__isset_version || !e->ns || !e->table)
    return ixia_error_set(err, IXIA_EINVAL, "change event without op, version, ns or table");
  if (e->op != IXIA_CHANGE_OP_PUT && e->op != IXIA_CHANGE_OP_DELETE &&
      e->op != IXIA_CHANGE_OP_SCHEMA)
    return ixia_error_set(err, IXIA_EINVAL, "change event with unknown op %d", (int)e->op);
  if (e->op != IXIA_CHANGE_OP_DELETE && !e->doc)
    return ixia_error_set(err, IXIA_EINVAL, "change event %s without doc",
                          e->op == IXIA_CHANGE_OP_PUT ? "PUT" : "SCHEMA");
  memset(out, 0, sizeof *out);
  out->op = (ixia_idx_op_t)e->op; /* the IDL's values match ixia_idx_op_t */
  out->ns = e->ns;
  out->table = e->table;
  out->key = e->key ? (const char *)e->key->data : "";
  out->key_len = e->key ? e->key->len : 0;
  out->version = e->version;
  out->doc = e->doc;
  out->doc_len = e->doc ? strlen(e->doc) : 0;
  out->expire_at = e->expire_at;
  return TRUE;
}

/* Decodes a message into e and ev; FALSE with why when it is not an event
 * this indexer can read. */
static gboolean decode(const rd_kafka_message_t *m, IxiaChangeEvent *e, ixia_idx_event_t *ev,
                       ixia_error_t **why) {
  if (!m->payload || m->len == 0) return ixia_error_set(why, IXIA_EINVAL, "empty message");
  if (!ixia_thrift_deserialize(THRIFT_STRUCT(e), m->payload, m->len, TRUE, why)) {
    ixia_error_prefix(*why, "undecodable change event (%zu bytes)", m->len);
    return FALSE;
  }
  return ixia_indexer_event_from_thrift(e, ev, why);
}

/* ---------- batches ---------- */

static void batch_init(batch_t *b, gint32 n_partitions) {
  b->objs = g_ptr_array_new_with_free_func(g_object_unref);
  b->events = g_array_new(FALSE, FALSE, sizeof(ixia_idx_event_t));
  b->origins = g_array_new(FALSE, FALSE, sizeof(origin_t));
  b->next = g_new(gint64, n_partitions);
  b->eof = g_new(gint64, n_partitions);
  b->rewound = g_new0(gboolean, n_partitions);
  b->pending = g_string_new(NULL);
  b->messages = 0;
  for (gint32 i = 0; i < n_partitions; i++) b->next[i] = b->eof[i] = -1;
}

static void batch_reset(batch_t *b, gint32 n_partitions) {
  g_ptr_array_set_size(b->objs, 0);
  g_array_set_size(b->events, 0);
  g_array_set_size(b->origins, 0);
  g_string_truncate(b->pending, 0);
  for (gint32 i = 0; i < n_partitions; i++) b->next[i] = b->eof[i] = -1;
  memset(b->rewound, 0, sizeof(gboolean) * (gsize)n_partitions);
  b->messages = 0;
}

static void batch_clear(batch_t *b) {
  g_ptr_array_unref(b->objs);
  g_array_free(b->events, TRUE);
  g_array_free(b->origins, TRUE);
  g_free(b->next);
  g_free(b->eof);
  g_free(b->rewound);
  g_string_free(b->pending, TRUE);
}

/* Checks that `offset`, the next offset partition p delivers (a message's,
 * or the end a partition-EOF reports), continues what the shard applied.
 * Offsets of a partition are contiguous (no transactions, no compaction on
 * the change topic), so a jump forward means Kafka deleted events
 * (retention, or ixia-devkafka's memory budget) before this shard read
 * them, and the consumer's reset to the earliest offset skipped them; an
 * offset below the expected one means the partition started over (the
 * topic was re-created, or Kafka lost its data). Either way the index
 * misses edits it can never read from Kafka: the shard repairs itself from
 * the truth store (heal.h). A partition the shard never read starts at
 * offset 0: when Kafka starts it later, its first events are gone (a new
 * or rebuilt shard on a topic whose retention dropped them). */
static void check_continuity(ixia_indexer_t *ix, batch_t *b, gint32 p, gint64 offset) {
  gint64 expect = b->next[p] >= 0 ? b->next[p] : b->eof[p] >= 0 ? b->eof[p] : MAX(ix->applied[p], 0);
  if (offset == expect) return;
  if (offset > expect) {
    atomic_fetch_add_explicit(&ix->offsets_lost, (guint64)(offset - expect), memory_order_relaxed);
    char *what = g_strdup_printf("partition %d: offsets %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
                                 " were deleted from Kafka before this shard read them",
                                 (int)p, expect, offset - 1);
    IXIA_ERROR("%s; the index misses those edits: repairing it from the truth store", what);
    ixia_heal_request(ix->heal, IXIA_HEAL_OFFSETS_LOST, what);
    g_free(what);
    return;
  }
  atomic_fetch_add_explicit(&ix->offsets_rewound, 1, memory_order_relaxed);
  b->rewound[p] = TRUE;
  char *what = g_strdup_printf("partition %d: offsets went back from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT
                               " (the topic was re-created, or Kafka lost its data)",
                               (int)p, expect, offset);
  IXIA_ERROR("%s; following the partition from there and repairing the index from the truth store", what);
  ixia_heal_request(ix->heal, IXIA_HEAL_REWOUND, what);
  g_free(what);
}

/* A PUT whose document has expired indexes as the delete the store's
 * expiry amounts to (at the same version, so a redelivery changes nothing). */
static void expire_event(ixia_idx_event_t *ev, gint64 now) {
  if (ev->op == IXIA_IDX_PUT && ixia_record_expired(ev->expire_at, now)) {
    ev->op = IXIA_IDX_DELETE;
    ev->doc = NULL;
    ev->doc_len = 0;
  }
}

/* Adds one message: decoded into the batch, or its failed-log line queued. */
static void batch_add(ixia_indexer_t *ix, batch_t *b, const rd_kafka_message_t *m) {
  gint32 p = m->partition;
  check_continuity(ix, b, p, m->offset);
  b->next[p] = m->offset + 1;
  b->messages++;
  IxiaChangeEvent *e = g_object_new(IXIA_TYPE_CHANGE_EVENT, NULL);
  ixia_error_t *why = NULL;
  ixia_idx_event_t ev;
  if (decode(m, e, &ev, &why)) {
    expire_event(&ev, ixia_expiry_now());
    origin_t o = {p, m->offset};
    g_ptr_array_add(b->objs, e);
    g_array_append_val(b->events, ev);
    g_array_append_val(b->origins, o);
    return;
  }
  g_object_unref(e);
  atomic_fetch_add_explicit(&ix->undecodable, 1, memory_order_relaxed);
  /* The message key is the truth-store key: it still tells replay which
   * document to re-read. */
  char kind = 0;
  const char *ns = NULL, *table = NULL, *key = NULL;
  size_t nl = 0, tl = 0, kl = 0;
  if (!m->key || !ixia_record_parse_key(m->key, m->key_len, &kind, &ns, &nl, &table, &tl, &key, &kl))
    ns = table = key = NULL;
  char *line = ixia_failed_log_line(ns, nl, table, tl, kind == 'd' ? key : NULL, kl, -1,
                           kind == 's' ? IXIA_IDX_SCHEMA : 0, why->code, why->message, p,
                           m->offset);
  IXIA_WARN("partition %d offset %" G_GINT64_FORMAT ": %s", (int)p, (gint64)m->offset,
            why->message);
  g_string_append(b->pending, line);
  g_free(line);
  ixia_error_destroy(why);
}

/* Polls until the batch is full, indexer.batch_wait_ms passed since its
 * first message, an idle poll timed out, or a stop. */
static void gather(ixia_indexer_t *ix, batch_t *b) {
  gint64 first = 0;
  while (b->messages < ix->max_events && !atomic_load(&ix->stop)) {
    int timeout_ms = IDLE_POLL_MS;
    if (b->messages > 0) {
      gint64 left_us = first + ix->wait_ms * 1000 - g_get_monotonic_time();
      /* Past the wait, still take what is already queued locally. */
      timeout_ms = left_us > 0 ? (int)((left_us + 999) / 1000) : 0;
    }
    rd_kafka_message_t *m = rd_kafka_consumer_poll(ix->rk, timeout_ms);
    if (!m) {
      if (b->messages == 0 || timeout_ms == 0) return;
      continue;
    }
    gboolean in_range = m->partition >= 0 && m->partition < ix->n_partitions;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (in_range && ix->owns[m->partition]) {
        check_continuity(ix, b, m->partition, m->offset);
        b->eof[m->partition] = m->offset;
      }
      rd_kafka_message_destroy(m);
      /* Nothing more is coming: publish the batch (and the end) now. */
      if (b->messages == 0) return;
      continue;
    }
    if (m->err) {
      atomic_fetch_add_explicit(&ix->kafka_errors, 1, memory_order_relaxed);
      char *msg = g_strdup_printf("%s (partition %d)", rd_kafka_message_errstr(m), (int)m->partition);
      ixia_log_warn_limited(&ix->kafka_rl, "kafka consumer", msg);
      g_free(msg);
      rd_kafka_message_destroy(m);
      continue;
    }
    if (in_range && ix->owns[m->partition]) {
      if (b->messages == 0) first = g_get_monotonic_time();
      batch_add(ix, b, m);
    }
    rd_kafka_message_destroy(m);
  }
}

/* Events of a table the index has no schema for cannot be indexed: their
 * schema event was lost (deleted offsets, a re-created topic). Before such
 * a batch is applied, the schemas are fetched from the API and put in
 * front of it, and a repair is requested (the shard missed at least that
 * event). A table the API does not know either (a foreign producer) is not
 * asked for again within SCHEMA_MISS_RETRY_US; its events fail as before. */
static void ensure_schemas(ixia_indexer_t *ix, batch_t *b) {
  GHashTable *known = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GPtrArray *missing = g_ptr_array_new_with_free_func(g_free);
  gint64 now = g_get_monotonic_time();
  for (guint i = 0; i < b->events->len; i++) {
    const ixia_idx_event_t *ev = &g_array_index(b->events, ixia_idx_event_t, i);
    char *id = g_strdup_printf("%s\t%s", ev->ns, ev->table);
    if (g_hash_table_contains(known, id)) {
      g_free(id);
      continue;
    }
    gboolean have = ev->op == IXIA_IDX_SCHEMA;
    if (!have) {
      ixia_schema_t *s = ixia_idx_schema(ev->ns, ev->table, ix->idx, NULL);
      have = s != NULL;
      ixia_schema_unref(s);
    }
    gpointer missed = g_hash_table_lookup(ix->schema_misses, id);
    if (!have && !(missed && now - GPOINTER_TO_SIZE(missed) < SCHEMA_MISS_RETRY_US))
      g_ptr_array_add(missing, g_strdup(id));
    g_hash_table_add(known, id);
  }
  g_hash_table_destroy(known);
  if (missing->len == 0) {
    g_ptr_array_unref(missing);
    return;
  }
  char *first = g_strdelimit(g_strdup(g_ptr_array_index(missing, 0)), "\t", '.');
  ixia_error_t *err = NULL;
  GPtrArray *schemas = ixia_heal_fetch_schemas(ix->heal, &err);
  GHashTable *fetched = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  guint added = 0;
  for (guint i = 0; schemas && i < schemas->len; i++) {
    IxiaChangeEvent *e = g_ptr_array_index(schemas, i);
    ixia_idx_event_t ev;
    if (!ixia_indexer_event_from_thrift(e, &ev, NULL)) continue;
    g_hash_table_add(fetched, g_strdup_printf("%s\t%s", e->ns, e->table));
    g_ptr_array_add(b->objs, g_object_ref(e));
    origin_t o = {-1, -1};
    g_array_insert_val(b->events, added, ev);
    g_array_insert_val(b->origins, added, o);
    added++;
  }
  gboolean lost = !schemas;
  for (guint i = 0; i < missing->len; i++) {
    char *id = g_ptr_array_index(missing, i);
    if (g_hash_table_contains(fetched, id))
      lost = TRUE;
    else
      g_hash_table_replace(ix->schema_misses, g_strdup(id), GSIZE_TO_POINTER((gsize)now));
  }
  atomic_fetch_add_explicit(&ix->schemas_fetched, added, memory_order_relaxed);
  if (schemas)
    IXIA_WARN("events of table %s arrived without its schema in the index (%u tables without one): "
              "applied the %u schemas the API has before them",
              first, missing->len, added);
  else
    IXIA_WARN("events of table %s arrived without its schema in the index, and the API could not "
              "give it: %s; those events go to the failed-updates log",
              first, err->message);
  if (lost) {
    char *what = g_strdup_printf("events of table %s arrived without its schema", first);
    ixia_heal_request(ix->heal, IXIA_HEAL_MISSING_SCHEMA, what);
    g_free(what);
  }
  ixia_error_destroy(err);
  g_free(first);
  g_hash_table_destroy(fetched);
  if (schemas) g_ptr_array_unref(schemas);
  g_ptr_array_unref(missing);
}

/* After events were applied: their documents with an expiry join the
 * schedule (the reaper re-reads each record, so skipped events are
 * harmless). */
static void schedule_expiries(ixia_indexer_t *ix, const ixia_idx_event_t *events, guint n) {
  gint64 now = ixia_expiry_now();
  for (guint i = 0; i < n; i++) {
    const ixia_idx_event_t *ev = &events[i];
    if (ev->op == IXIA_IDX_PUT && ev->expire_at > now)
      ixia_expiry_add(ix->expiry, ev->ns, ev->table, ev->key, ev->key_len, ev->expire_at);
  }
}

/* How far ahead an entry the reaper could not handle (its record could not
 * be read, or the delete not applied) is scheduled again: an entry left
 * due would hold every search, which waits for due entries, to its
 * deadline. */
#define EXPIRY_RETRY_S 1

/* Drops the documents whose expiry has come, on this shard's clock: for
 * each due entry, a delete at the document's own version when its record's
 * expiry has come; a record whose expiry lies ahead (the document was
 * written again since the entry's) is scheduled again at it, and one with
 * none or deleted leaves the schedule. Wakes searches waiting for it. */
static void reap_expired(ixia_indexer_t *ix) {
  if (!ixia_expiry_next(ix->expiry) || ixia_expiry_next(ix->expiry) > ixia_expiry_now()) return;
  atomic_store(&ix->reaping, 1);
  gint64 now = ixia_expiry_now();
  GPtrArray *due = ixia_expiry_due(ix->expiry, now);
  GArray *evs = g_array_new(FALSE, TRUE, sizeof(ixia_idx_event_t));
  GPtrArray *kept = g_ptr_array_new(); /* the entries the events point into */
  for (guint i = 0; due && i < due->len; i++) {
    ixia_expiry_entry_t *en = g_ptr_array_index(due, i);
    gboolean present, deleted;
    gint64 version, expire_at;
    ixia_error_t *rerr = NULL;
    if (!ixia_idx_doc_record(ix->idx, en->ns, en->table, en->key, en->key_len, &present, &deleted,
                             &version, &expire_at, &rerr)) {
      ixia_expiry_add(ix->expiry, en->ns, en->table, en->key, en->key_len, now + EXPIRY_RETRY_S);
      ixia_log_warn_limited(&ix->kafka_rl, "expiry", rerr ? rerr->message : "document record unreadable");
      ixia_error_destroy(rerr);
      continue;
    }
    if (!present || deleted || expire_at <= 0) continue;
    if (expire_at > now) {
      ixia_expiry_add(ix->expiry, en->ns, en->table, en->key, en->key_len, expire_at);
      continue;
    }
    ixia_idx_event_t ev = {.op = IXIA_IDX_DELETE, .ns = en->ns, .table = en->table, .key = en->key,
                           .key_len = en->key_len, .version = version};
    g_array_append_val(evs, ev);
    g_ptr_array_add(kept, en);
  }
  if (evs->len) {
    fail_ctx_t fc = {ix, (const ixia_idx_event_t *)(void *)evs->data, evs->len, NULL};
    guint applied = 0;
    ixia_error_t *err = NULL;
    if (ixia_idx_apply(ix->idx, fc.events, fc.n, NULL, 0, on_failed, &fc, &applied, &err)) {
      atomic_fetch_add_explicit(&ix->expired_removed, applied, memory_order_relaxed);
    } else {
      for (guint i = 0; i < kept->len; i++) {
        ixia_expiry_entry_t *en = g_ptr_array_index(kept, i);
        ixia_expiry_add(ix->expiry, en->ns, en->table, en->key, en->key_len, now + EXPIRY_RETRY_S);
      }
      ixia_log_warn_limited(&ix->kafka_rl, "expiry", err->message);
      ixia_error_destroy(err);
    }
  }
  g_ptr_array_free(kept, TRUE);
  g_array_free(evs, TRUE);
  if (due) g_ptr_array_unref(due);
  g_mutex_lock(&ix->pos_lock);
  atomic_store(&ix->reaping, 0);
  g_cond_broadcast(&ix->pos_cond);
  g_mutex_unlock(&ix->pos_lock);
}

/* Writes the batch's failed lines, then applies it with its positions.
 * FALSE when either could not be written: nothing of the batch is stored. */
static gboolean apply_batch(ixia_indexer_t *ix, batch_t *b, ixia_error_t **err) {
  if (b->pending->len && !failed_log_write(ix, b->pending->str, b->pending->len, err))
    return FALSE;
  ensure_schemas(ix, b);
  GArray *pos = g_array_new(FALSE, FALSE, sizeof(ixia_idx_position_t));
  for (guint i = 0; i < ix->owned->len; i++) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    /* A partition that started over is stored at its new end even without
     * a message, so a restart does not come back to the old position. */
    gint64 next = b->next[p] >= 0 ? b->next[p] : b->rewound[p] ? b->eof[p] : -1;
    if (next < 0) continue;
    ixia_idx_position_t ip = {p, next};
    g_array_append_val(pos, ip);
  }
  fail_ctx_t fc = {ix, (const ixia_idx_event_t *)(void *)b->events->data, b->events->len,
                   (const origin_t *)(void *)b->origins->data};
  gint64 t0 = g_get_monotonic_time();
  gboolean ok = ixia_idx_apply(ix->idx, fc.events, fc.n, (const ixia_idx_position_t *)(void *)pos->data,
                               pos->len, on_failed, &fc, NULL, err);
  atomic_fetch_add_explicit(&ix->apply_us, g_get_monotonic_time() - t0, memory_order_relaxed);
  g_array_free(pos, TRUE);
  if (ok) schedule_expiries(ix, fc.events, fc.n);
  if (ok && b->pending->len) {
    /* Count the undecodable lines only once they are certain to stay. */
    guint lines = 0;
    for (const char *c = b->pending->str; *c; c++) lines += *c == '\n';
    atomic_fetch_add_explicit(&ix->failed_log_lines, lines, memory_order_relaxed);
  }
  return ok;
}

/* Makes the batch's positions visible to sync searches and status. A
 * partition that started over goes back with it. */
static void publish_positions(ixia_indexer_t *ix, const batch_t *b) {
  g_mutex_lock(&ix->pos_lock);
  for (guint i = 0; i < ix->owned->len; i++) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    gint64 v = MAX(b->next[p], b->eof[p]);
    if (v > ix->applied[p] || (b->rewound[p] && v >= 0)) ix->applied[p] = v;
    if (b->rewound[p]) ix->high_seen[p] = -1;
  }
  g_cond_broadcast(&ix->pos_cond);
  g_mutex_unlock(&ix->pos_lock);
}

static void job_finish(job_t *job, gboolean ok, guint applied, ixia_error_t *err) {
  g_mutex_lock(&job->lock);
  job->ok = ok;
  job->applied = applied;
  job->err = err;
  job->done = TRUE;
  g_cond_broadcast(&job->cond);
  g_mutex_unlock(&job->lock);
}

static void job_clear(gpointer data) {
  job_t *job = data;
  g_mutex_clear(&job->lock);
  g_cond_clear(&job->cond);
  ixia_error_destroy(job->err);
}

static void job_release(job_t *job) { g_atomic_rc_box_release_full(job, job_clear); }

static void run_job(ixia_indexer_t *ix, job_t *job) {
  fail_ctx_t fc = {ix, job->events, job->n, NULL};
  guint applied = 0;
  ixia_error_t *err = NULL;
  if (!ixia_disk_reserve_check(ix->disk, &err)) {
    atomic_fetch_add_explicit(&ix->reindex_refused_disk_full, 1, memory_order_relaxed);
    ixia_error_prefix(err, "reindex refused");
    job_finish(job, FALSE, 0, err);
    job_release(job);
    return;
  }
  gboolean ok = ixia_idx_apply(ix->idx, job->events, job->n, NULL, 0, on_failed, &fc, &applied, &err);
  if (ok) schedule_expiries(ix, job->events, job->n);
  job_finish(job, ok, applied, err);
  job_release(job);
}

/* Serves queued reindex calls; waits up to timeout_us for one (0: only
 * those queued now). Returns early on a stop. */
static void serve_jobs(ixia_indexer_t *ix, gint64 timeout_us) {
  gint64 deadline = g_get_monotonic_time() + timeout_us;
  for (;;) {
    gint64 left = deadline - g_get_monotonic_time();
    gpointer item = left > 0 ? g_async_queue_timeout_pop(ix->jobs, (guint64)left)
                             : g_async_queue_try_pop(ix->jobs);
    if (!item) return;
    if (item == &wake_marker) {
      if (atomic_load(&ix->stop)) return;
      continue;
    }
    run_job(ix, item);
  }
}

/* Called when the free space of a watched file system is under
 * index.disk_reserve_mb (the disk module has logged it): stops consuming
 * (unassigns every partition, so nothing is fetched and no position moves),
 * serves queued reindex calls (run_job refuses them) and measures again
 * every DISK_RECHECK_US until the space is back or a stop, asking Kafka for
 * the partitions' ends each time (status shows the lag). Then assigns the
 * partitions again at their stored positions, so a batch dropped before
 * this is read again. Searches never wait for this thread. */
/* While paused nothing is fetched, so librdkafka's cached high watermarks
 * stand still: asks the brokers for the partitions' ends (one request) so
 * that status shows the lag growing. */
static void refresh_high_watermarks(ixia_indexer_t *ix) {
  rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)ix->owned->len);
  for (guint i = 0; i < ix->owned->len; i++)
    rd_kafka_topic_partition_list_add(list, ix->topic, g_array_index(ix->owned, gint32, i))->offset =
        RD_KAFKA_OFFSET_END; /* as a timestamp: the latest offset */
  if (rd_kafka_offsets_for_times(ix->rk, list, 1000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    g_mutex_lock(&ix->pos_lock);
    for (int i = 0; i < list->cnt; i++) {
      const rd_kafka_topic_partition_t *tp = &list->elems[i];
      if (!tp->err && tp->offset >= 0 && tp->partition >= 0 && tp->partition < ix->n_partitions)
        ix->high_seen[tp->partition] = MAX(ix->high_seen[tp->partition], tp->offset);
    }
    g_mutex_unlock(&ix->pos_lock);
  }
  rd_kafka_topic_partition_list_destroy(list);
}

static void pause_for_disk(ixia_indexer_t *ix) {
  atomic_store(&ix->disk_paused, 1);
  atomic_fetch_add_explicit(&ix->disk_pauses, 1, memory_order_relaxed);
  rd_kafka_resp_err_t kerr = rd_kafka_assign(ix->rk, NULL);
  if (kerr) ixia_log_warn_limited(&ix->kafka_rl, "kafka unassign", rd_kafka_err2str(kerr));
  while (!atomic_load(&ix->stop)) {
    serve_jobs(ix, DISK_RECHECK_US);
    /* Serves librdkafka's callbacks; no partition is assigned, so any
     * message left over from before is dropped (it is read again). */
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consumer_poll(ix->rk, 0))) rd_kafka_message_destroy(m);
    if (ixia_disk_reserve_check(ix->disk, NULL)) break;
    refresh_high_watermarks(ix);
  }
  ixia_error_t *aerr = NULL;
  if (!assign_stored(ix, &aerr)) {
    ixia_log_warn_limited(&ix->kafka_rl, "kafka", aerr->message);
    ixia_error_destroy(aerr);
  }
  atomic_store(&ix->disk_paused, 0);
}

/* Stored positions past a partition's end: the partition started over
 * (a re-created topic) without the consumer noticing. Checked against the
 * ends librdkafka last saw, at most every END_CHECK_US while idle, and
 * confirmed with the brokers; the partition then restarts at its first
 * offset and the shard repairs itself.
 *
 * Every such partition restarts through one seek, not an assign per
 * partition: back-to-back rd_kafka_assign calls can remove a partition
 * whose previous stop is still in flight, and librdkafka 2.0 then aborts on
 * an assertion (rktp_started in rd_kafka_assignment_partition_stopped,
 * upstream issue 5573; seen here when a restarted shard found three
 * partitions past their ends). A seek changes no assignment. */
static void check_ends(ixia_indexer_t *ix) {
  gint64 now = g_get_monotonic_time();
  if (now - ix->last_end_check < END_CHECK_US) return;
  ix->last_end_check = now;
  rd_kafka_topic_partition_list_t *restart = NULL;
  for (guint i = 0; i < ix->owned->len; i++) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    int64_t lo = -1, hi = -1;
    if (rd_kafka_get_watermark_offsets(ix->rk, ix->topic, p, &lo, &hi) || hi < 0) continue;
    g_mutex_lock(&ix->pos_lock);
    gint64 applied = ix->applied[p];
    g_mutex_unlock(&ix->pos_lock);
    if (applied <= hi) continue;
    if (rd_kafka_query_watermark_offsets(ix->rk, ix->topic, p, &lo, &hi, 2000) || applied <= hi) continue;
    char *what = g_strdup_printf("partition %d: the stored position %" G_GINT64_FORMAT
                                 " is past the partition's end %" G_GINT64_FORMAT
                                 " (the topic was re-created, or Kafka lost its data)",
                                 (int)p, applied, (gint64)hi);
    IXIA_ERROR("%s; restarting the partition at offset %" G_GINT64_FORMAT " and repairing the index from the truth store",
               what, (gint64)lo);
    atomic_fetch_add_explicit(&ix->offsets_rewound, 1, memory_order_relaxed);
    ixia_heal_request(ix->heal, IXIA_HEAL_PAST_END, what);
    g_free(what);
    ixia_idx_position_t pos = {p, MAX(lo, 0)};
    ixia_error_t *err = NULL;
    if (!ixia_idx_apply(ix->idx, NULL, 0, &pos, 1, NULL, NULL, NULL, &err)) {
      ixia_log_warn_limited(&ix->kafka_rl, "storing a position", err->message);
      ixia_error_destroy(err);
      continue;
    }
    g_mutex_lock(&ix->pos_lock);
    ix->applied[p] = pos.next_offset;
    ix->high_seen[p] = hi;
    g_cond_broadcast(&ix->pos_cond);
    g_mutex_unlock(&ix->pos_lock);
    if (!restart) restart = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(restart, ix->topic, p)->offset = pos.next_offset;
  }
  if (!restart) return;
  rd_kafka_error_t *kerr = rd_kafka_seek_partitions(ix->rk, restart, SEEK_TIMEOUT_MS);
  gboolean failed = kerr != NULL;
  if (kerr) {
    ixia_log_warn_limited(&ix->kafka_rl, "kafka seek", rd_kafka_error_string(kerr));
    rd_kafka_error_destroy(kerr);
  }
  for (int i = 0; !failed && i < restart->cnt; i++)
    if (restart->elems[i].err) {
      ixia_log_warn_limited(&ix->kafka_rl, "kafka seek", rd_kafka_err2str(restart->elems[i].err));
      failed = TRUE;
    }
  rd_kafka_topic_partition_list_destroy(restart);
  if (failed) {
    /* Once, for all of them: the stored positions are already moved. */
    ixia_error_t *err = NULL;
    if (!assign_stored(ix, &err)) {
      ixia_log_warn_limited(&ix->kafka_rl, "kafka", err->message);
      ixia_error_destroy(err);
    }
  }
}

static gboolean any_rewound(const ixia_indexer_t *ix, const batch_t *b) {
  for (gint32 p = 0; p < ix->n_partitions; p++)
    if (b->rewound[p]) return TRUE;
  return FALSE;
}

static gpointer apply_main(gpointer data) {
  ixia_indexer_t *ix = data;
  atomic_store(&ix->apply_tid, (gint)syscall(SYS_gettid));
  batch_t b;
  batch_init(&b, ix->n_partitions);
  gint64 backoff_ms = 0;
  while (!atomic_load(&ix->stop)) {
    serve_jobs(ix, 0);
    /* Measured before consuming and again before writing (one statvfs per
     * watched file system each time): under the reserve nothing is
     * applied, and a gathered batch is dropped and read again later. */
    if (!ixia_disk_reserve_check(ix->disk, NULL)) {
      pause_for_disk(ix);
      continue;
    }
    reap_expired(ix);
    gather(ix, &b);
    if (b.messages == 0) {
      /* Ends of partitions only: nothing to store, unless a partition
       * started over (its new position is stored). */
      if (any_rewound(ix, &b)) {
        ixia_error_t *err = NULL;
        if (!apply_batch(ix, &b, &err)) {
          ixia_log_warn_limited(&ix->kafka_rl, "storing a position", err->message);
          ixia_error_destroy(err);
          batch_reset(&b, ix->n_partitions);
          continue;
        }
      }
      publish_positions(ix, &b);
      batch_reset(&b, ix->n_partitions);
      check_ends(ix);
      continue;
    }
    if (!ixia_disk_reserve_check(ix->disk, NULL)) {
      batch_reset(&b, ix->n_partitions);
      pause_for_disk(ix);
      continue;
    }
    ixia_error_t *err = NULL;
    if (apply_batch(ix, &b, &err)) {
      atomic_fetch_add_explicit(&ix->batches, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&ix->messages, b.messages, memory_order_relaxed);
      publish_positions(ix, &b);
      ixia_invalidator_queue(ix->invalidator, (const ixia_idx_event_t *)(void *)b.events->data,
                             b.events->len);
      ixia_indexer_monitor_batch(ix->monitor, b.objs, (const origin_t *)(void *)b.origins->data, b.next);
      batch_reset(&b, ix->n_partitions);
      backoff_ms = 0;
      continue;
    }
    atomic_fetch_add_explicit(&ix->apply_failures, 1, memory_order_relaxed);
    batch_reset(&b, ix->n_partitions);
    backoff_ms = backoff_ms ? MIN(backoff_ms * 2, ix->retry_max_ms) : MIN(RETRY_MIN_MS, ix->retry_max_ms);
    IXIA_ERROR("applying a batch failed: %s; retrying from the stored positions in %" G_GINT64_FORMAT
               " ms",
               err->message, backoff_ms);
    ixia_error_destroy(err);
    if (atomic_load(&ix->stop)) break;
    serve_jobs(ix, backoff_ms * 1000);
    ixia_error_t *aerr = NULL;
    if (!assign_stored(ix, &aerr)) {
      ixia_log_warn_limited(&ix->kafka_rl, "kafka", aerr->message);
      ixia_error_destroy(aerr);
    }
  }
  batch_clear(&b);
  return NULL;
}

/* ---------- librdkafka callbacks ---------- */

static void on_error(rd_kafka_t *rk, int kerr, const char *reason, void *opaque) {
  (void)rk;
  ixia_indexer_t *ix = opaque;
  atomic_fetch_add_explicit(&ix->kafka_errors, 1, memory_order_relaxed);
  char *msg = g_strdup_printf("%s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)kerr), reason);
  ixia_log_warn_limited(&ix->kafka_rl, "kafka", msg);
  g_free(msg);
}



static gboolean consumer_new(ixia_indexer_t *ix, ixia_error_t **err) {
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  gboolean ok = ixia_kafka_conf_set(conf, "kafka consumer setting", "bootstrap.servers", ix->brokers, err) &&
                ixia_kafka_conf_set(conf, "kafka consumer setting", "client.id", "ixia-indexer", err) &&
                /* assign() needs no group membership; positions live in the
                 * index, and are committed to the group for monitoring only
                 * (monitor.h). */
                ixia_kafka_conf_set(conf, "kafka consumer setting", "group.id",
                                    *ix->group ? ix->group : "ixia-indexer", err) &&
                ixia_kafka_conf_set(conf, "kafka consumer setting", "enable.auto.commit", "false", err) &&
                ixia_kafka_conf_set(conf, "kafka consumer setting", "enable.auto.offset.store", "false", err) &&
                /* Ends of partitions tell sync searches that nothing is
                 * left, even when the last offsets hold no message. */
                ixia_kafka_conf_set(conf, "kafka consumer setting", "enable.partition.eof", "true", err) &&
                /* A stored position older than the topic's retention
                 * restarts at the oldest message still there. */
                ixia_kafka_conf_set(conf, "kafka consumer setting", "auto.offset.reset", "earliest", err) &&
                /* Index freshness: a fetch returns soon when idle. */
                ixia_kafka_conf_set(conf, "kafka consumer setting", "fetch.wait.max.ms", ix->fetch_wait, err) &&
                ixia_kafka_conf_set(conf, "kafka consumer setting", "reconnect.backoff.max.ms", "1000", err) &&
                ixia_kafka_conf_set(conf, "kafka consumer setting", "socket.nagle.disable", "true", err);
  if (!ok) {
    rd_kafka_conf_destroy(conf);
    return FALSE;
  }
  rd_kafka_conf_set_opaque(conf, ix);
  rd_kafka_conf_set_error_cb(conf, on_error);
  rd_kafka_conf_set_log_cb(conf, ixia_kafka_log);
  char errstr[512];
  ix->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  if (!ix->rk) {
    rd_kafka_conf_destroy(conf);
    return ixia_error_set(err, IXIA_EINTERNAL, "kafka consumer: %s", errstr);
  }
  /* Error and log callbacks are then served by the apply thread's polls. */
  rd_kafka_poll_set_consumer(ix->rk);
  ix->consumer_q = rd_kafka_queue_get_consumer(ix->rk);
  ix->rkt = rd_kafka_topic_new(ix->rk, ix->topic, NULL);
  if (!ix->rkt)
    return ixia_error_set(err, IXIA_EINTERNAL, "kafka: cannot make a handle for topic %s: %s",
                          ix->topic, rd_kafka_err2str(rd_kafka_last_error()));
  return TRUE;
}

/* ---------- life cycle ---------- */

ixia_indexer_t *ixia_indexer_new(const ixia_config_t *cfg, ixia_idx_t *idx, ixia_error_t **err) {
  /* Before any thread: the generated types register lazily and unsafely. */
  ixia_thrift_init();
  ixia_indexer_t *ix = g_new0(ixia_indexer_t, 1);
  ix->idx = idx;
  ix->topic = g_strdup(ixia_config_str(cfg, "kafka.topic"));
  ix->brokers = g_strdup(ixia_config_str(cfg, "kafka.brokers"));
  ix->metadata_wait_us = ixia_config_int(cfg, "kafka.metadata_timeout_ms") * 1000;
  ix->failed_log = ixia_failed_log_path(cfg);
  ix->max_events = (guint)ixia_config_int(cfg, "indexer.batch_max_events");
  ix->wait_ms = ixia_config_int(cfg, "indexer.batch_wait_ms");
  g_snprintf(ix->fetch_wait, sizeof ix->fetch_wait, "%" G_GINT64_FORMAT,
             ixia_config_int(cfg, "indexer.fetch_wait_ms"));
  ix->retry_max_ms = ixia_config_int(cfg, "indexer.retry_max_ms");
  ix->group = g_strdup(ixia_config_str(cfg, "indexer.consumer_group"));
  g_mutex_init(&ix->job_lock);
  g_mutex_init(&ix->pos_lock);
  g_cond_init(&ix->pos_cond);
  ixia_log_limit_init(&ix->kafka_rl, LOG_EVERY_US);
  ixia_log_limit_init(&ix->failed_rl, LOG_EVERY_US);
  ix->jobs = g_async_queue_new();
  ix->expiry = ixia_expiry_new();
  ix->schema_misses = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  ix->stopped = TRUE; /* nothing to stop until the threads run */

  gboolean ok = TRUE;
  if (!*ix->topic) ok = ixia_error_set(err, IXIA_EINVAL, "kafka.topic is empty");
  /* Fail at start, not at the first bad event, when the log is unusable. */
  char *dir = g_path_get_dirname(ix->failed_log);
  if (ok && g_mkdir_with_parents(dir, 0755) != 0)
    ok = ixia_error_set(err, IXIA_EINVAL, "indexer.failed_log: cannot create %s: %s", dir,
                        g_strerror(errno));
  if (ok) {
    gint64 reserve_mb = ixia_config_int(cfg, "index.disk_reserve_mb");
    gint64 buffer_mb = ixia_config_int(cfg, "index.write_buffer_mb");
    ix->disk = ixia_disk_reserve_new("indexer", "index.disk_reserve_mb", reserve_mb, "indexing resumes");
    ixia_disk_reserve_watch(ix->disk, ixia_config_str(cfg, "index.path"));
    ixia_disk_reserve_watch(ix->disk, dir);
    if (reserve_mb > 0 && reserve_mb < 3 * buffer_mb)
      IXIA_WARN("index.disk_reserve_mb=%" G_GINT64_FORMAT " is under 3 x index.write_buffer_mb (%" G_GINT64_FORMAT
                "): a memtable flush may not fit in the reserve",
                reserve_mb, buffer_mb);
  }
  g_free(dir);
  if (ok) {
    int fd = open(ix->failed_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      ok = ixia_error_set(err, IXIA_EINVAL, "indexer.failed_log: cannot open %s: %s",
                          ix->failed_log, g_strerror(errno));
    else
      close(fd);
  }
  if (ok && ixia_config_bool(cfg, "indexer.invalidate_cache") &&
      *ixia_config_str(cfg, "cache.servers")) {
    ixia_cache_t *cache = ixia_cache_new(cfg, err);
    ok = cache != NULL;
    if (ok) ix->invalidator = ixia_invalidator_new(cache);
  }
  ok = ok && consumer_new(ix, err);
  if (ok) {
    ix->n_partitions = topic_partitions(ix, err);
    ok = ix->n_partitions > 0;
  }
  if (ok) {
    ix->owned = ixia_indexer_parse_partitions(ixia_config_str(cfg, "indexer.partitions"),
                                              ix->n_partitions, err);
    ok = ix->owned != NULL;
  }
  if (!ok) {
    ixia_indexer_destroy(ix);
    return NULL;
  }
  ix->owns = g_new0(gboolean, ix->n_partitions);
  ix->applied = g_new(gint64, ix->n_partitions);
  ix->high_seen = g_new(gint64, ix->n_partitions);
  GString *list = g_string_new(NULL);
  for (gint32 p = 0; p < ix->n_partitions; p++) ix->applied[p] = ix->high_seen[p] = -1;
  for (guint i = 0; i < ix->owned->len; i++) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    ix->owns[p] = TRUE;
    ix->applied[p] = ixia_idx_position(idx, p);
    g_string_append_printf(list, "%s%d@%" G_GINT64_FORMAT, i ? "," : "", (int)p, ix->applied[p]);
  }
  ixia_error_t *xerr = NULL;
  if (!ixia_expiry_load(ix->expiry, idx, &xerr)) {
    /* Documents already expired then stay until a search or repair sees
     * them; not a reason to refuse to start. */
    IXIA_WARN("expiry schedule: %s", xerr->message);
    ixia_error_destroy(xerr);
  } else if (ixia_expiry_size(ix->expiry)) {
    IXIA_INFO("expiry schedule: %" G_GUINT64_FORMAT " expiring documents", ixia_expiry_size(ix->expiry));
  }
  ix->heal = ixia_heal_new(cfg, ix);
  if (!assign_stored(ix, err)) {
    g_string_free(list, TRUE);
    ixia_indexer_destroy(ix);
    return NULL;
  }
  IXIA_INFO("indexer: consuming %s partitions %s (partition@stored position, -1 = beginning) of %d "
            "at %s; failed updates to %s%s",
            ix->topic, list->str, (int)ix->n_partitions, ix->brokers, ix->failed_log,
            ix->invalidator ? "; invalidating the cache" : "");
  g_string_free(list, TRUE);
  ix->monitor = ixia_indexer_monitor_new(ix->rk, ix->topic, ix->group, ix->n_partitions);
  ix->stopped = FALSE;
  ix->thread = g_thread_new("ixia-apply", apply_main, ix);
  ixia_heal_start(ix->heal);
  return ix;
}

void ixia_indexer_stop(ixia_indexer_t *ix) {
  if (!ix || ix->stopped) return;
  ix->stopped = TRUE;
  /* First: the heal thread may wait for a reindex on the apply thread. */
  ixia_heal_stop(ix->heal);
  g_mutex_lock(&ix->job_lock);
  ix->jobs_closed = TRUE;
  g_mutex_unlock(&ix->job_lock);
  atomic_store(&ix->stop, 1);
  g_async_queue_push(ix->jobs, &wake_marker);
  rd_kafka_queue_yield(ix->consumer_q);
  g_thread_join(ix->thread);
  ix->thread = NULL;
  gpointer item;
  while ((item = g_async_queue_try_pop(ix->jobs)))
    if (item != &wake_marker) {
      job_finish(item, FALSE, 0, ixia_error_new(IXIA_EUNAVAILABLE, "the indexer is stopping"));
      job_release(item);
    }
  ixia_invalidator_stop(ix->invalidator);
  rd_kafka_resp_err_t kerr = rd_kafka_consumer_close(ix->rk);
  if (kerr) IXIA_WARN("kafka: closing the consumer: %s", rd_kafka_err2str(kerr));
  IXIA_INFO("indexer stopped after %" G_GUINT64_FORMAT " batches, %" G_GUINT64_FORMAT " messages",
            atomic_load_explicit(&ix->batches, memory_order_relaxed),
            atomic_load_explicit(&ix->messages, memory_order_relaxed));
}

void ixia_indexer_destroy(ixia_indexer_t *ix) {
  if (!ix) return;
  ixia_indexer_stop(ix);
  if (ix->rkt) rd_kafka_topic_destroy(ix->rkt);
  if (ix->consumer_q) rd_kafka_queue_destroy(ix->consumer_q);
  if (ix->rk) rd_kafka_destroy(ix->rk);
  g_async_queue_unref(ix->jobs);
  ixia_invalidator_destroy(ix->invalidator);
  ixia_disk_reserve_destroy(ix->disk);
  ixia_heal_destroy(ix->heal);
  ixia_expiry_destroy(ix->expiry);
  if (ix->schema_misses) g_hash_table_destroy(ix->schema_misses);
  if (ix->owned) g_array_free(ix->owned, TRUE);
  g_free(ix->owns);
  g_free(ix->applied);
  g_free(ix->high_seen);
  g_mutex_clear(&ix->job_lock);
  g_mutex_clear(&ix->pos_lock);
  g_cond_clear(&ix->pos_cond);
  ixia_log_limit_clear(&ix->kafka_rl);
  ixia_log_limit_clear(&ix->failed_rl);
  g_free(ix->topic);
  g_free(ix->brokers);
  g_free(ix->failed_log);
  g_free(ix->group);
  ixia_indexer_monitor_destroy(ix->monitor);
  g_free(ix);
}

ixia_idx_t *ixia_indexer_index(ixia_indexer_t *ix) { return ix->idx; }

const GArray *ixia_indexer_partitions(ixia_indexer_t *ix, gint32 *partition_count) {
  if (partition_count) *partition_count = ix->n_partitions;
  return ix->owned;
}

gboolean ixia_indexer_repairing(ixia_indexer_t *ix) { return ixia_heal_repairing(ix->heal); }

void ixia_indexer_request_repair(ixia_indexer_t *ix, const char *why) {
  ixia_heal_request(ix->heal, IXIA_HEAL_REQUESTED, why);
}

/* Searches may name any table (the Search port is not only the API's): at
 * most one schema fetch per this long. */
#define LEARN_SCHEMA_EVERY_US G_USEC_PER_SEC

gboolean ixia_indexer_learn_schema(ixia_indexer_t *ix, const char *ns, const char *table) {
  gint64 now = g_get_monotonic_time(), last = atomic_load_explicit(&ix->last_schema_fetch, memory_order_relaxed);
  if ((last && now - last < LEARN_SCHEMA_EVERY_US) ||
      !atomic_compare_exchange_strong_explicit(&ix->last_schema_fetch, &last, now, memory_order_relaxed, memory_order_relaxed))
    return FALSE;
  ixia_error_t *err = NULL;
  GPtrArray *schemas = ixia_heal_fetch_schemas(ix->heal, &err);
  if (!schemas) {
    ixia_log_warn_limited(&ix->kafka_rl, "fetching schemas", err->message);
    ixia_error_destroy(err);
    return FALSE;
  }
  gboolean found = FALSE;
  GArray *evs = g_array_new(FALSE, TRUE, sizeof(ixia_idx_event_t));
  for (guint i = 0; i < schemas->len; i++) {
    IxiaChangeEvent *e = g_ptr_array_index(schemas, i);
    ixia_idx_event_t ev;
    if (!ixia_indexer_event_from_thrift(e, &ev, NULL)) continue;
    found = found || (!strcmp(e->ns, ns) && !strcmp(e->table, table));
    g_array_append_val(evs, ev);
  }
  gboolean ok = found && ixia_indexer_reindex(ix, (const ixia_idx_event_t *)(void *)evs->data, evs->len, NULL, &err);
  if (found && !ok) {
    ixia_log_warn_limited(&ix->kafka_rl, "applying schemas", err->message);
    ixia_error_destroy(err);
  }
  if (ok) {
    atomic_fetch_add_explicit(&ix->schemas_fetched, evs->len, memory_order_relaxed);
    char *what = g_strdup_printf("a search named table %s.%s, which the API has and this shard had no schema for",
                                 ns, table);
    ixia_heal_request(ix->heal, IXIA_HEAL_MISSING_SCHEMA, what);
    g_free(what);
  }
  g_array_free(evs, TRUE);
  g_ptr_array_unref(schemas);
  return ok;
}

gboolean ixia_indexer_expiry_due(ixia_indexer_t *ix) {
  gint64 next = ixia_expiry_next(ix->expiry);
  return (next && next <= ixia_expiry_now()) || atomic_load(&ix->reaping);
}

void ixia_indexer_settle_expired(ixia_indexer_t *ix, gint64 deadline_us) {
  if (!ixia_indexer_expiry_due(ix)) return;
  rd_kafka_queue_yield(ix->consumer_q); /* wakes an idle poll of the apply thread */
  g_mutex_lock(&ix->pos_lock);
  for (;;) {
    gboolean due = ixia_indexer_expiry_due(ix);
    gint64 now = g_get_monotonic_time();
    if (!due || now >= deadline_us || atomic_load(&ix->stop)) break;
    g_cond_wait_until(&ix->pos_cond, &ix->pos_lock, MIN(deadline_us, now + 50 * G_TIME_SPAN_MILLISECOND));
  }
  g_mutex_unlock(&ix->pos_lock);
}

/* ---------- calls from the Search service ---------- */

gboolean ixia_indexer_wait_caught_up(ixia_indexer_t *ix, gint64 deadline_us, ixia_error_t **err) {
  guint n = ix->owned->len;
  gint64 *high = g_new(gint64, n);
  for (guint i = 0; i < n; i++) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    gint64 left_ms = (deadline_us - g_get_monotonic_time()) / 1000;
    if (left_ms <= 0) {
      g_free(high);
      return ixia_error_set(err, IXIA_ENOTCAUGHTUP, "shard not caught up within the deadline");
    }
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t kerr =
        rd_kafka_query_watermark_offsets(ix->rk, ix->topic, p, &lo, &hi, (int)MIN(left_ms, G_MAXINT));
    if (kerr) {
      g_free(high);
      return ixia_error_set(err, IXIA_EUNAVAILABLE,
                            "shard cannot tell whether it is caught up: kafka high watermark of "
                            "partition %d: %s",
                            (int)p, rd_kafka_err2str(kerr));
    }
    high[i] = hi;
  }
  gboolean ok = TRUE;
  g_mutex_lock(&ix->pos_lock);
  for (guint i = 0; i < n; i++) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    if (high[i] > ix->high_seen[p]) ix->high_seen[p] = high[i];
  }
  for (guint i = 0; ok && i < n;) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    if (MAX(ix->applied[p], 0) >= high[i]) {
      i++;
      continue;
    }
    if (!g_cond_wait_until(&ix->pos_cond, &ix->pos_lock, deadline_us) &&
        g_get_monotonic_time() >= deadline_us)
      ok = FALSE;
  }
  g_mutex_unlock(&ix->pos_lock);
  g_free(high);
  if (ok) return TRUE;
  ixia_error_t *full = NULL;
  if (atomic_load(&ix->disk_paused) && !ixia_disk_reserve_check(ix->disk, &full)) {
    ixia_error_set(err, IXIA_ENOTCAUGHTUP,
                   "shard not caught up within the deadline: indexing is paused: %s", full->message);
    ixia_error_destroy(full);
    return FALSE;
  }
  return ixia_error_set(err, IXIA_ENOTCAUGHTUP, "shard not caught up within the deadline");
}

gboolean ixia_indexer_reindex(ixia_indexer_t *ix, const ixia_idx_event_t *events, guint n,
                              guint *applied, ixia_error_t **err) {
  atomic_fetch_add_explicit(&ix->reindex_calls, 1, memory_order_relaxed);
  GArray *mine = g_array_sized_new(FALSE, FALSE, sizeof(ixia_idx_event_t), n);
  gint64 now = ixia_expiry_now();
  for (guint i = 0; i < n; i++) {
    ixia_idx_event_t ev = events[i];
    expire_event(&ev, now);
    if (ev.op == IXIA_IDX_SCHEMA || ixia_indexer_owns_key(ix, ev.ns, ev.table, ev.key, ev.key_len))
      g_array_append_val(mine, ev);
    else
      atomic_fetch_add_explicit(&ix->reindex_ignored, 1, memory_order_relaxed);
  }
  if (applied) *applied = 0;
  if (mine->len == 0) {
    g_array_free(mine, TRUE);
    return TRUE;
  }
  job_t *job = g_atomic_rc_box_new0(job_t);
  g_mutex_init(&job->lock);
  g_cond_init(&job->cond);
  job->events = (const ixia_idx_event_t *)(void *)mine->data;
  job->n = mine->len;
  g_mutex_lock(&ix->job_lock);
  gboolean closed = ix->jobs_closed;
  if (!closed) g_async_queue_push(ix->jobs, g_atomic_rc_box_acquire(job));
  g_mutex_unlock(&ix->job_lock);
  gboolean ok = FALSE;
  if (closed) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "the indexer is stopping");
  } else {
    /* Wake an idle poll so the call is served at once. */
    rd_kafka_queue_yield(ix->consumer_q);
    g_mutex_lock(&job->lock);
    while (!job->done) g_cond_wait(&job->cond, &job->lock);
    g_mutex_unlock(&job->lock);
    ok = job->ok;
    if (ok && applied) *applied = job->applied;
    if (!ok) {
      ixia_error_propagate(err, job->err);
      job->err = NULL;
    }
  }
  job_release(job);
  g_array_free(mine, TRUE);
  return ok;
}

/* Lines of the failed-updates log; 0 when there is no file (none yet, or
 * replay-failed moved it aside), -1 when it cannot be read. */
static gint64 count_lines(const char *path) {
  FILE *f = fopen(path, "re");
  if (!f) return errno == ENOENT ? 0 : -1;
  char buf[65536];
  gint64 lines = 0;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
  fclose(f);
  return lines;
}

char *ixia_indexer_status(ixia_indexer_t *ix) {
  cJSON *o = cJSON_CreateObject();
  cJSON *parts = cJSON_AddArrayToObject(o, "partitions");
  g_mutex_lock(&ix->pos_lock);
  for (guint i = 0; i < ix->owned->len; i++) {
    gint32 p = g_array_index(ix->owned, gint32, i);
    int64_t lo = RD_KAFKA_OFFSET_INVALID, hi = RD_KAFKA_OFFSET_INVALID;
    if (rd_kafka_get_watermark_offsets(ix->rk, ix->topic, p, &lo, &hi) ||
        hi == RD_KAFKA_OFFSET_INVALID || hi < 0)
      hi = -1;
    hi = MAX(hi, ix->high_seen[p]);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "partition", p);
    cJSON_AddNumberToObject(e, "next_offset", (double)ix->applied[p]);
    if (hi >= 0) {
      cJSON_AddNumberToObject(e, "high_watermark", (double)hi);
      gint64 lag = MAX(hi - MAX(ix->applied[p], 0), 0);
      cJSON_AddNumberToObject(e, "lag", (double)lag);
      cJSON_AddNumberToObject(e, "lag_seconds", ixia_indexer_monitor_lag_seconds(ix->monitor, p, lag));
      /* Stale: Kafka started the partition over (the apply thread notices
       * within END_CHECK_US and repairs). */
      if (ix->applied[p] > hi) cJSON_AddBoolToObject(e, "position_past_end", TRUE);
    } else {
      cJSON_AddNullToObject(e, "high_watermark");
      cJSON_AddNullToObject(e, "lag");
    }
    cJSON_AddItemToArray(parts, e);
  }
  g_mutex_unlock(&ix->pos_lock);
  ixia_idx_stats_t st;
  ixia_idx_get_stats(ix->idx, &st);
  cJSON_AddNumberToObject(o, "partition_count", ix->n_partitions);
  cJSON_AddNumberToObject(o, "max_version", (double)st.max_version);
  cJSON_AddNumberToObject(o, "documents", (double)st.documents);
  cJSON_AddNumberToObject(o, "stale_documents", (double)st.stale_documents);
  cJSON_AddNumberToObject(o, "events_applied", (double)st.events_applied);
  cJSON_AddNumberToObject(o, "events_skipped", (double)st.events_skipped);
  cJSON_AddNumberToObject(o, "events_failed", (double)st.events_failed);
  cJSON_AddNumberToObject(o, "offsets_lost",
                          (double)atomic_load_explicit(&ix->offsets_lost, memory_order_relaxed));
  cJSON_AddStringToObject(o, "failed_log", ix->failed_log);
  cJSON_AddNumberToObject(o, "failed_log_entries", (double)count_lines(ix->failed_log));
  cJSON_AddNumberToObject(o, "disk_bytes", (double)st.disk_bytes);
  /* Memory searches read from: decoded blocks (index.cache_mb), points,
   * doc values (index.docvalues_mb). */
  cJSON_AddNumberToObject(o, "cache_bytes", (double)st.cache_bytes);
  cJSON_AddNumberToObject(o, "points_bytes", (double)st.points_bytes);
  cJSON_AddNumberToObject(o, "docvalues_bytes", (double)st.docvalues_bytes);
  /* Measured now, so the status shows space freed before the apply thread
   * has noticed. */
  ixia_disk_reserve_check(ix->disk, NULL);
  cJSON_AddBoolToObject(o, "disk_paused", atomic_load(&ix->disk_paused));
  cJSON_AddNumberToObject(o, "disk_free_bytes", (double)ixia_disk_reserve_free(ix->disk));
  cJSON_AddNumberToObject(o, "disk_reserve_bytes", (double)ixia_disk_reserve_bytes(ix->disk));
  cJSON_AddStringToObject(o, "kafka_topic", ix->topic);
  cJSON_AddStringToObject(o, "consumer_group", ix->group);
  cJSON_AddNumberToObject(o, "apply_rate", ixia_indexer_monitor_apply_rate(ix->monitor));
#define COUNTER(name) \
  cJSON_AddNumberToObject(o, #name, (double)atomic_load_explicit(&ix->name, memory_order_relaxed))
  COUNTER(batches);
  COUNTER(messages);
  COUNTER(undecodable);
  COUNTER(apply_failures);
  COUNTER(kafka_errors);
  COUNTER(failed_log_lines);
  COUNTER(failed_log_errors);
  COUNTER(reindex_calls);
  COUNTER(reindex_ignored);
  COUNTER(disk_pauses);
  COUNTER(reindex_refused_disk_full);
  COUNTER(offsets_rewound);
  COUNTER(expired_removed);
  COUNTER(schemas_fetched);
#undef COUNTER
  ixia_invalidator_status(ix->invalidator, o);
  /* Connections and requests of the Search server, among them the searches
   * answered on its I/O threads and those moved to its workers. */
  if (ix->server) ixia_server_add_stats(ix->server, cJSON_AddObjectToObject(o, "server"));
  cJSON_AddNumberToObject(o, "expiry_scheduled", (double)ixia_expiry_size(ix->expiry));
  ixia_heal_status(ix->heal, o);
  cJSON_AddNumberToObject(o, "apply_ms", (double)atomic_load_explicit(&ix->apply_us, memory_order_relaxed) / 1000.0);
  /* The apply thread's time on a CPU and runnable but waiting for one, from
   * the kernel's schedstat: a wait that grows faster than the CPU time means
   * the shard's machine has no core for it (docs/OPERATIONS.md). */
  gint tid = atomic_load(&ix->apply_tid);
  char *path = g_strdup_printf("/proc/self/task/%d/schedstat", tid), *sched = NULL;
  unsigned long long on_cpu_ns, waited_ns;
  if (tid > 0 && g_file_get_contents(path, &sched, NULL, NULL) &&
      sscanf(sched, "%llu %llu", &on_cpu_ns, &waited_ns) == 2) {
    cJSON_AddNumberToObject(o, "apply_cpu_ms", (double)on_cpu_ns / 1e6);
    cJSON_AddNumberToObject(o, "apply_wait_ms", (double)waited_ns / 1e6);
  }
  g_free(sched);
  g_free(path);
  char *out = ixia_json_print(o);
  cJSON_Delete(o);
  return out;
}

ixia_indexer_monitor_t *ixia_indexer_monitor_of(ixia_indexer_t *ix) { return ix->monitor; }

void ixia_indexer_set_server(ixia_indexer_t *ix, const ixia_server_t *srv) { ix->server = srv; }
