/* The replication sink (sink.h): WAL batches in, change events out to
 * Kafka, an answer only when Kafka has all of them.
 *
 * Decoding is a pure pass over the RocksDB WriteBatch (record.h says what
 * keys and values hold); publishing uses one idempotent producer and counts
 * the delivery reports of each call, so a call that returns success has
 * every event acknowledged by the brokers, and one that fails may be
 * repeated without reordering any key. */
#include "sink.h"

#include <stdatomic.h>
#include <librdkafka/rdkafka.h>
#include <rocksdb/c.h>
#include <string.h>

#include "json.h"
#include "kafka_util.h"
#include "log.h"
#include "metrics.h"
#include "record.h"
#include "thrift_util.h"

/* ---------- the decoder ---------- */

/* A WriteBatch starts with its sequence (fixed64) and edit count (fixed32),
 * both little-endian (RocksDB's write_batch.cc). */
enum { WB_HEADER = 12 };

void ixia_sink_event_free(ixia_sink_event_t *ev) {
  if (!ev) return;
  if (ev->event) g_object_unref(ev->event);
  if (ev->kafka_key) g_bytes_unref(ev->kafka_key);
  g_free(ev);
}

static guint64 get_le64(const unsigned char *p) {
  guint64 v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

typedef struct {
  gint64 sequence; /* of the batch's first edit */
  guint index;     /* edits seen so far, skipped ones included */
  gint64 now_ms;
  GPtrArray *out;
  ixia_sink_decode_info_t *info;
  ixia_error_t *error; /* first error; later edits are only counted */
} decode_state_t;

static void add_event(decode_state_t *st, IxiaChangeOp op, const char *raw_key, size_t raw_len,
                      const char *ns, size_t ns_len, const char *table, size_t table_len,
                      const char *key, size_t key_len, gint64 version, const char *doc,
                      size_t doc_len, gint64 expire_at) {
  IxiaChangeEvent *e = ixia_change_event_new(op, ns, ns_len, table, table_len, key, key_len,
                                             version, doc, doc_len, expire_at, st->now_ms);
  ixia_sink_event_t *ev = g_new0(ixia_sink_event_t, 1);
  ev->event = e;
  ev->kafka_key = g_bytes_new(raw_key, raw_len);
  g_ptr_array_add(st->out, ev);
}

static void skip_edit(decode_state_t *st, gint64 seq, const char *why, const char *key, size_t klen) {
  st->info->skipped++;
  IXIA_WARN("replication: skipping WAL edit at sequence %" G_GINT64_FORMAT " (%s, key kind 0x%02x)",
            seq, why, klen ? (unsigned char)key[0] : 0);
}

static void on_put(void *state, const char *k, size_t klen, const char *v, size_t vlen) {
  decode_state_t *st = state;
  gint64 seq = st->sequence + st->index++;
  st->info->edits++;
  if (st->error) return;
  char kind = klen ? k[0] : 0;
  if (kind != 'd' && kind != 's') {
    skip_edit(st, seq, "unknown record", k, klen);
    return;
  }
  const char *ns, *table, *key, *json;
  size_t nl, tl, kl, jl;
  gint64 version, expire_at;
  /* The store writes only well-formed records: anything else is corruption
   * or a foreign writer, and skipping it would lose an edit for good. */
  if (!ixia_record_parse_key(k, klen, NULL, &ns, &nl, &table, &tl, &key, &kl) ||
      (kind == 's' && kl != 0) ||
      !ixia_record_parse_value(v, vlen, &version, &expire_at, &json, &jl)) {
    ixia_error_set(&st->error, IXIA_EINTERNAL,
                   "malformed %s record at sequence %" G_GINT64_FORMAT " (key %zu bytes, value %zu bytes)",
                   kind == 'd' ? "document" : "schema", seq, klen, vlen);
    return;
  }
  if (version != seq) {
    /* Readers of the store see the header's version, so the event carries
     * it too; a difference means something wrote around the store's writer. */
    st->info->version_mismatches++;
    IXIA_ERROR("replication: record at WAL sequence %" G_GINT64_FORMAT " carries version %" G_GINT64_FORMAT
               "; the store should write them equal",
               seq, version);
  }
  if (kind == 'd')
    add_event(st, IXIA_CHANGE_OP_PUT, k, klen, ns, nl, table, tl, key, kl, version, json, jl, expire_at);
  else
    add_event(st, IXIA_CHANGE_OP_SCHEMA, k, klen, ns, nl, table, tl, "", 0, version, json, jl, 0);
}

static void on_delete(void *state, const char *k, size_t klen) {
  decode_state_t *st = state;
  gint64 seq = st->sequence + st->index++;
  st->info->edits++;
  if (st->error) return;
  if (klen == 0 || k[0] != 'd') {
    /* Schemas are never deleted through the store; nothing to tell. */
    skip_edit(st, seq, klen && k[0] == 's' ? "schema delete" : "unknown record", k, klen);
    return;
  }
  const char *ns, *table, *key;
  size_t nl, tl, kl;
  if (!ixia_record_parse_key(k, klen, NULL, &ns, &nl, &table, &tl, &key, &kl)) {
    ixia_error_set(&st->error, IXIA_EINTERNAL,
                   "malformed document key deleted at sequence %" G_GINT64_FORMAT " (%zu bytes)", seq, klen);
    return;
  }
  add_event(st, IXIA_CHANGE_OP_DELETE, k, klen, ns, nl, table, tl, key, kl, seq, NULL, 0, 0);
}

/* A varint32 at *p (RocksDB's encoding), within end. */
static gboolean get_varint32(const unsigned char **p, const unsigned char *end, guint32 *out) {
  guint32 v = 0;
  for (int shift = 0; shift <= 28 && *p < end; shift += 7) {
    unsigned char b = *(*p)++;
    v |= (guint32)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return TRUE;
    }
  }
  return FALSE;
}

static gboolean skip_varstring(const unsigned char **p, const unsigned char *end) {
  guint32 n;
  if (!get_varint32(p, end, &n) || n > (gsize)(end - *p)) return FALSE;
  *p += n;
  return TRUE;
}

/* Checks, before RocksDB sees them, that the bytes after a WriteBatch header
 * are exactly `count` records of the two kinds the store writes: a put
 * (type 1, key, value) or a delete (type 0, key) of the default column
 * family, every length inside the batch. Debian's librocksdb asserts (the
 * process aborts) on some malformed batches in rocksdb_writebatch_iterate,
 * and a replicate call is bytes from the network. */
static gboolean check_records(const unsigned char *data, size_t len, guint32 count, guint b,
                              ixia_error_t **err) {
  const unsigned char *p = data + WB_HEADER, *end = data + len;
  for (guint32 i = 0; i < count; i++) {
    if (p >= end)
      return ixia_error_set(err, IXIA_EINVAL, "WAL batch %u: its header counts %u records, it "
                                              "holds %u", b, count, i);
    unsigned char type = *p++;
    if (type != 0 && type != 1)
      return ixia_error_set(err, IXIA_EINTERNAL,
                            "WAL batch %u: record %u is of type %u, not a default-column-family "
                            "put or delete: cannot assign versions",
                            b, i, type);
    if (!skip_varstring(&p, end) || (type == 1 && !skip_varstring(&p, end)))
      return ixia_error_set(err, IXIA_EINVAL, "WAL batch %u: record %u runs past the end of the "
                                              "batch", b, i);
  }
  if (p != end)
    return ixia_error_set(err, IXIA_EINVAL, "WAL batch %u: %td bytes after its %u records", b,
                          end - p, count);
  return TRUE;
}

GPtrArray *ixia_sink_decode(const ixia_sink_batch_t *batches, guint n, gint64 now_ms,
                            gint64 *last_sequence, ixia_sink_decode_info_t *info,
                            ixia_error_t **err) {
  ixia_sink_decode_info_t scratch = {0};
  if (!info) info = &scratch;
  memset(info, 0, sizeof *info);
  GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)ixia_sink_event_free);
  decode_state_t st = {.now_ms = now_ms, .out = out, .info = info};
  gint64 next = 0; /* lowest sequence the next batch may start at */
  gint64 last = 0;
  for (guint b = 0; b < n && !st.error; b++) {
    const ixia_sink_batch_t *batch = &batches[b];
    if (!batch->data || batch->len < WB_HEADER) {
      ixia_error_set(&st.error, IXIA_EINVAL, "WAL batch %u (sequence %" G_GINT64_FORMAT "): %zu bytes, "
                     "too short for a RocksDB WriteBatch", b, batch->sequence, batch->data ? batch->len : 0);
      break;
    }
    const unsigned char *hdr = batch->data;
    guint64 hdr_seq = get_le64(hdr);
    guint32 count = (guint32)hdr[8] | (guint32)hdr[9] << 8 | (guint32)hdr[10] << 16 | (guint32)hdr[11] << 24;
    if (batch->sequence < 1 || batch->sequence > G_MAXINT64 - (gint64)count) {
      ixia_error_set(&st.error, IXIA_EINVAL, "WAL batch %u: bad sequence %" G_GINT64_FORMAT, b,
                     batch->sequence);
      break;
    }
    /* Batches read from the WAL carry their sequence in the header; batches
     * built in memory carry 0. Either way it must not contradict the caller. */
    if (hdr_seq != 0 && hdr_seq != (guint64)batch->sequence) {
      ixia_error_set(&st.error, IXIA_EINVAL, "WAL batch %u: sequence %" G_GINT64_FORMAT
                     " but its header says %" G_GUINT64_FORMAT, b, batch->sequence, hdr_seq);
      break;
    }
    /* Kafka keeps per-key order only if edits arrive in WAL order. */
    if (batch->sequence < next) {
      ixia_error_set(&st.error, IXIA_EINVAL, "WAL batch %u: sequence %" G_GINT64_FORMAT
                     " overlaps or precedes the previous batch (next free %" G_GINT64_FORMAT ")",
                     b, batch->sequence, next);
      break;
    }
    if (!check_records(batch->data, batch->len, count, b, &st.error)) break;
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create_from(batch->data, batch->len);
    int records = rocksdb_writebatch_count(wb);
    st.sequence = batch->sequence;
    st.index = 0;
    rocksdb_writebatch_iterate(wb, &st, on_put, on_delete);
    rocksdb_writebatch_destroy(wb);
    /* The C API's iterate reports only default-column-family puts and
     * deletes: merges, single and range deletes are passed over, and an edit
     * of another column family (or corruption) ends the iteration quietly.
     * Each of those still consumes a sequence number, so the versions of
     * later edits would be wrong, or edits lost. Refuse instead. */
    if (!st.error && (records < 0 || st.index != (guint)records))
      ixia_error_set(&st.error, IXIA_EINTERNAL,
                     "WAL batch at sequence %" G_GINT64_FORMAT " holds %d records but only %u are "
                     "default-column-family puts or deletes; cannot assign versions (is it corrupt, "
                     "or did something write another column family, a merge or a range delete?)",
                     batch->sequence, records, st.index);
    next = batch->sequence + (gint64)count;
    if (count > 0) last = next - 1;
  }
  if (st.error) {
    g_ptr_array_unref(out);
    ixia_error_propagate(err, st.error);
    return NULL;
  }
  if (last_sequence) *last_sequence = last;
  return out;
}

/* ---------- the producer ---------- */

/* The one place a librdkafka error code becomes an ixia_error_t. Every
 * Kafka failure is transient from the source's point of view (it re-sends
 * the call), hence UNAVAILABLE. detail may be NULL (then librdkafka's text
 * for the code). Always returns FALSE. */
static gboolean error_from_kafka(ixia_error_t **err, rd_kafka_resp_err_t kerr, const char *what,
                                 const char *detail) {
  return ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: kafka %s: %s", what, rd_kafka_err2name(kerr),
                        detail ? detail : rd_kafka_err2str(kerr));
}

typedef struct {
  ixia_sink_t *sink;
  rd_kafka_t *rk;
  GThread *poller;
  _Atomic gint stop;
  _Atomic gint refs;  /* the sink's reference + one per call using it */
  _Atomic gint fatal; /* set by the error callback: the instance is unusable */
  _Atomic gint partitions; /* of the topic, learnt on the first schema event; 0 = unknown */
} producer_t;

/* One replicate call's view of its deliveries. Reference-counted
 * (g_atomic_rc_box): the call holds one reference and every message in
 * librdkafka holds one through its opaque, because reports may arrive after
 * the call gave up waiting. */
typedef struct {
  GMutex lock;
  GCond cond;
  guint outstanding;          /* produced, no report yet */
  guint failures;
  rd_kafka_resp_err_t failed; /* first failed report */
} call_t;

struct ixia_sink {
  char *brokers;
  char *topic;
  gint64 delivery_timeout_ms;
  gint64 linger_ms;
  gint64 message_timeout_ms;
  gint64 message_max_bytes;
  gint64 started_at;
  GMutex lock; /* guards producer (replaced after a fatal error) */
  producer_t *producer;
  ixia_server_t *server;
  /* Counters, atomics. */
  _Atomic guint64 calls;
  _Atomic guint64 call_failures;
  _Atomic guint64 events_published;
  _Atomic guint64 delivery_failures;
  _Atomic guint64 events_skipped;
  _Atomic guint64 version_mismatches;
  _Atomic guint64 producer_restarts;
  _Atomic gint64 last_sequence;
  ixia_metric_series_t *delivery_latency; /* produce -> acknowledged, per event */
  /* Deliveries produced and not yet reported (calls that gave up included),
   * and the start times of the calls still waiting for theirs: a Kafka
   * outage shows in stats at once, before a call times out. */
  _Atomic gint64 pending_deliveries; /* atomic */
  GMutex waiting_lock;
  GQueue waiting; /* gint64 * start time (monotonic µs), oldest first */
};

static void call_clear(gpointer data) {
  call_t *c = data;
  g_mutex_clear(&c->lock);
  g_cond_clear(&c->cond);
}

static void call_release(call_t *c) { g_atomic_rc_box_release_full(c, call_clear); }

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque) {
  (void)rk;
  producer_t *p = opaque;
  call_t *c = msg->_private;
  atomic_fetch_sub_explicit(&p->sink->pending_deliveries, 1, memory_order_relaxed);
  if (msg->err) {
    atomic_fetch_add_explicit(&p->sink->delivery_failures, 1, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&p->sink->events_published, 1, memory_order_relaxed);
    gint64 us = rd_kafka_message_latency(msg);
    if (us >= 0) ixia_metric_observe(p->sink->delivery_latency, (double)us / 1e6);
  }
  g_mutex_lock(&c->lock);
  c->outstanding--;
  if (msg->err) {
    c->failures++;
    if (!c->failed) c->failed = msg->err;
  }
  /* Wake the waiter on the last report, or at once on a failure: the call
   * fails anyway, so the source may re-send sooner. */
  if (c->outstanding == 0 || msg->err) g_cond_broadcast(&c->cond);
  g_mutex_unlock(&c->lock);
  call_release(c);
}

static void on_error(rd_kafka_t *rk, int kerr, const char *reason, void *opaque) {
  producer_t *p = opaque;
  if (kerr == RD_KAFKA_RESP_ERR__FATAL) {
    char buf[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, buf, sizeof buf);
    IXIA_ERROR("kafka: fatal producer error %s: %s; a new producer replaces it on the next call",
               rd_kafka_err2name(orig), buf);
    atomic_store(&p->fatal, 1);
    return;
  }
  /* Most are transient (brokers down, timeouts) and librdkafka retries. */
  IXIA_WARN("kafka: %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)kerr), reason);
}


static gpointer poll_main(gpointer data) {
  producer_t *p = data;
  /* Serves delivery reports and error callbacks; the timeout bounds how
   * long a stop takes to be noticed. */
  while (!atomic_load(&p->stop)) rd_kafka_poll(p->rk, 100);
  return NULL;
}


static producer_t *producer_new(ixia_sink_t *s, ixia_error_t **err) {
  producer_t *p = g_new0(producer_t, 1);
  p->sink = s;
  p->refs = 1;
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  char linger[32], timeout[32], max_bytes[32];
  g_snprintf(linger, sizeof linger, "%" G_GINT64_FORMAT, s->linger_ms);
  g_snprintf(timeout, sizeof timeout, "%" G_GINT64_FORMAT, s->message_timeout_ms);
  g_snprintf(max_bytes, sizeof max_bytes, "%" G_GINT64_FORMAT, s->message_max_bytes);
  gboolean ok = ixia_kafka_conf_set(conf, "kafka producer setting", "bootstrap.servers", s->brokers, err) &&
                ixia_kafka_conf_set(conf, "kafka producer setting", "client.id", "ixia-replication-sink", err) &&
                /* No duplicates or reordering from retries within this
                 * producer; acks=all so an acknowledged event survives a
                 * broker loss. */
                ixia_kafka_conf_set(conf, "kafka producer setting", "enable.idempotence", "true", err) &&
                ixia_kafka_conf_set(conf, "kafka producer setting", "acks", "all", err) &&
                ixia_kafka_conf_set(conf, "kafka producer setting", "linger.ms", linger, err) &&
                ixia_kafka_conf_set(conf, "kafka producer setting", "message.timeout.ms", timeout, err) &&
                ixia_kafka_conf_set(conf, "kafka producer setting", "message.max.bytes", max_bytes, err) &&
                /* librdkafka backs off reconnects up to 10 s by default; a
                 * sink is useless while disconnected, so after a Kafka
                 * outage it should be back within a second. */
                ixia_kafka_conf_set(conf, "kafka producer setting", "reconnect.backoff.max.ms", "1000", err) &&
                /* Small produce requests on an idle socket otherwise wait
                 * out Nagle plus the broker's delayed ACK (~40 ms), which
                 * is most of the put-to-Kafka lag. */
                ixia_kafka_conf_set(conf, "kafka producer setting", "socket.nagle.disable", "true", err) &&
                /* The indexer's reindex() and the backfill tool find a key's
                 * partition with this same function (CRC-32 of the key). */
                ixia_kafka_conf_set(conf, "kafka producer setting", "partitioner", "consistent_random", err);
  if (!ok) {
    rd_kafka_conf_destroy(conf);
    g_free(p);
    return NULL;
  }
  rd_kafka_conf_set_opaque(conf, p);
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_error_cb(conf, on_error);
  rd_kafka_conf_set_log_cb(conf, ixia_kafka_log);
  char errstr[512];
  p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!p->rk) {
    rd_kafka_conf_destroy(conf); /* rd_kafka_new owns conf only on success */
    ixia_error_set(err, IXIA_EINTERNAL, "kafka producer: %s", errstr);
    g_free(p);
    return NULL;
  }
  p->poller = g_thread_new("ixia-sink-poll", poll_main, p);
  return p;
}

/* Called when the last reference goes: no call uses p any more. */
static void producer_free(producer_t *p, gint64 flush_ms) {
  atomic_store(&p->stop, 1);
  g_thread_join(p->poller);
  /* Whatever is still queued belongs to calls that already failed (a call
   * that succeeded has nothing left), so a short bounded flush is enough;
   * a fatal instance will deliver nothing more. */
  if (!atomic_load(&p->fatal) && flush_ms > 0) rd_kafka_flush(p->rk, (int)flush_ms);
  if (rd_kafka_outq_len(p->rk) > 0) {
    IXIA_WARN("kafka: dropping %d undelivered messages of failed calls", rd_kafka_outq_len(p->rk));
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    /* Serves the purge reports, which release their calls' state. */
    rd_kafka_flush(p->rk, 1000);
  }
  rd_kafka_destroy(p->rk);
  g_free(p);
}

static void producer_unref(producer_t *p, gint64 flush_ms) {
  if (p && (atomic_fetch_sub(&p->refs, 1) == 1)) producer_free(p, flush_ms);
}

/* The current producer with a reference for the caller; replaces one that
 * hit a fatal error (librdkafka instances cannot recover from those, and a
 * sink holds no state worth keeping). */
static producer_t *producer_acquire(ixia_sink_t *s, ixia_error_t **err) {
  producer_t *old = NULL;
  g_mutex_lock(&s->lock);
  if (atomic_load(&s->producer->fatal)) {
    producer_t *fresh = producer_new(s, err);
    if (!fresh) {
      g_mutex_unlock(&s->lock);
      return NULL;
    }
    old = s->producer;
    s->producer = fresh;
    atomic_fetch_add_explicit(&s->producer_restarts, 1, memory_order_relaxed);
    IXIA_WARN("kafka: replaced the producer after a fatal error");
  }
  producer_t *p = s->producer;
  atomic_fetch_add(&p->refs, 1);
  g_mutex_unlock(&s->lock);
  producer_unref(old, 0); /* outside the lock: it joins a thread */
  return p;
}

/* Waits for call's reports until deadline (monotonic µs). */
static gboolean wait_deliveries(producer_t *p, call_t *c, guint total, gint64 deadline,
                                gint64 timeout_ms, ixia_error_t **err) {
  g_mutex_lock(&c->lock);
  while (c->outstanding > 0 && !c->failed && !atomic_load(&p->fatal)) {
    gint64 now = g_get_monotonic_time();
    if (now >= deadline) break;
    /* Bounded slices: a fatal error is flagged, not signalled to calls. */
    g_cond_wait_until(&c->cond, &c->lock, MIN(deadline, now + 100 * G_TIME_SPAN_MILLISECOND));
  }
  guint outstanding = c->outstanding, failures = c->failures;
  rd_kafka_resp_err_t failed = c->failed;
  g_mutex_unlock(&c->lock);
  if (outstanding == 0 && !failed) return TRUE;
  /* After a fatal error the queued messages fail as "purged", which would
   * hide the cause: name the fatal error instead. Asked directly, because
   * the error callback that raises the flag may not have run yet. */
  char buf[512];
  rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(p->rk, buf, sizeof buf);
  if (fatal) {
    atomic_store(&p->fatal, 1);
    char *what = g_strdup_printf("producer failed with %u of %u events unacknowledged",
                                 outstanding + failures, total);
    error_from_kafka(err, fatal, what, buf);
    g_free(what);
    return FALSE;
  }
  if (failed) {
    char *what = g_strdup_printf("%u of %u events failed delivery", failures, total);
    error_from_kafka(err, failed, what, NULL);
    g_free(what);
    return FALSE;
  }
  return ixia_error_set(err, IXIA_EUNAVAILABLE,
                        "%u of %u events not acknowledged by Kafka within %" G_GINT64_FORMAT
                        " ms (sink.delivery_timeout_ms)",
                        outstanding, total, timeout_ms);
}

/* The topic's partition count, asked once per producer (partitions can be
 * added to a topic, but a new producer is made after any fatal error and
 * ixia documents that adding partitions needs a sink restart). */
static gint topic_partitions(producer_t *p, const char *topic, gint64 deadline, ixia_error_t **err) {
  gint n = atomic_load(&p->partitions);
  if (n > 0) return n;
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(p->rk, topic, NULL);
  if (!rkt) return ixia_error_set(err, IXIA_EINTERNAL, "kafka: cannot make a handle for topic %s", topic);
  const struct rd_kafka_metadata *md = NULL;
  gint64 left_ms = MAX((deadline - g_get_monotonic_time()) / 1000, 100);
  rd_kafka_resp_err_t kerr = rd_kafka_metadata(p->rk, 0, rkt, &md, (int)MIN(left_ms, 10000));
  if (!kerr && (md->topic_cnt != 1 || md->topics[0].err)) kerr = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
  if (!kerr) n = md->topics[0].partition_cnt;
  if (md) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(rkt);
  if (kerr) {
    error_from_kafka(err, kerr, "reading the topic's partition count for a schema event", NULL);
    return 0;
  }
  atomic_store(&p->partitions, n);
  return n;
}

static gboolean publish(ixia_sink_t *s, GPtrArray *events, gint64 deadline, ixia_error_t **err) {
  producer_t *p = producer_acquire(s, err);
  if (!p) return FALSE;
  call_t *c = g_atomic_rc_box_new0(call_t);
  g_mutex_init(&c->lock);
  g_cond_init(&c->cond);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < events->len; i++) {
    ixia_sink_event_t *ev = g_ptr_array_index(events, i);
    GByteArray *value = ixia_thrift_serialize(THRIFT_STRUCT(ev->event), TRUE, err);
    if (!value) {
      ok = FALSE;
      break;
    }
    size_t klen;
    const void *key = g_bytes_get_data(ev->kafka_key, &klen);
    /* Every index shard needs every schema, and a shard must see a schema
     * change before the later edits of its own partitions: so a schema event
     * goes to every partition, in order with the data events there.
     * Data events use the default (consistent) partitioner on the key. */
    gint32 first = RD_KAFKA_PARTITION_UA, last = RD_KAFKA_PARTITION_UA;
    if (ev->event->op == IXIA_CHANGE_OP_SCHEMA) {
      gint n = topic_partitions(p, s->topic, deadline, err);
      if (n <= 0) {
        g_byte_array_unref(value);
        ok = FALSE;
        break;
      }
      first = 0;
      last = n - 1;
    }
    rd_kafka_resp_err_t kerr = RD_KAFKA_RESP_ERR_NO_ERROR;
    for (gint32 part = first; !kerr && part <= last; part++) {
      /* Count the message before producing it: its report may arrive first. */
      g_mutex_lock(&c->lock);
      c->outstanding++;
      g_mutex_unlock(&c->lock);
      g_atomic_rc_box_acquire(c);
      atomic_fetch_add_explicit(&s->pending_deliveries, 1, memory_order_relaxed);
      for (;;) {
        kerr = rd_kafka_producev(p->rk, RD_KAFKA_V_TOPIC(s->topic), RD_KAFKA_V_PARTITION(part),
                                 RD_KAFKA_V_KEY(key, klen),
                                 RD_KAFKA_V_VALUE(value->data, value->len),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(c),
                                 RD_KAFKA_V_END);
        if (kerr != RD_KAFKA_RESP_ERR__QUEUE_FULL || g_get_monotonic_time() >= deadline) break;
        /* The local queue drains as Kafka acknowledges; wait for room. */
        rd_kafka_poll(p->rk, 10);
      }
      if (kerr) {
        g_mutex_lock(&c->lock);
        c->outstanding--;
        g_mutex_unlock(&c->lock);
        atomic_fetch_sub_explicit(&s->pending_deliveries, 1, memory_order_relaxed);
        call_release(c);
      }
    }
    g_byte_array_unref(value);
    if (kerr) {
      char *what = g_strdup_printf("producing event %u of %u", i + 1, events->len);
      if (kerr == RD_KAFKA_RESP_ERR__FATAL) {
        char buf[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(p->rk, buf, sizeof buf);
        atomic_store(&p->fatal, 1);
        error_from_kafka(err, orig ? orig : kerr, what, orig ? buf : NULL);
      } else {
        error_from_kafka(err, kerr, what, NULL);
      }
      g_free(what);
      ok = FALSE;
    }
  }
  if (ok) {
    gint64 *since = g_new(gint64, 1);
    *since = g_get_monotonic_time();
    g_mutex_lock(&s->waiting_lock);
    GList *link = (g_queue_push_tail(&s->waiting, since), s->waiting.tail);
    g_mutex_unlock(&s->waiting_lock);
    ok = wait_deliveries(p, c, events->len, deadline, s->delivery_timeout_ms, err);
    g_mutex_lock(&s->waiting_lock);
    g_queue_delete_link(&s->waiting, link);
    g_mutex_unlock(&s->waiting_lock);
    g_free(since);
  }
  call_release(c);
  producer_unref(p, 0);
  return ok;
}

static gint64 flush_bound_ms(const ixia_sink_t *s) { return MIN(s->delivery_timeout_ms, 5000); }

ixia_sink_t *ixia_sink_new(const ixia_config_t *cfg, ixia_error_t **err) {
  /* Before any thread: the generated types register lazily and unsafely. */
  ixia_thrift_init();
  ixia_sink_t *s = g_new0(ixia_sink_t, 1);
  s->brokers = g_strdup(ixia_config_str(cfg, "kafka.brokers"));
  s->topic = g_strdup(ixia_config_str(cfg, "kafka.topic"));
  s->delivery_timeout_ms = ixia_config_int(cfg, "sink.delivery_timeout_ms");
  s->delivery_latency = ixia_metrics_series(
      ixia_metrics_histogram(ixia_metrics_default(), "ixia_sink_delivery_seconds",
                             "From producing a change event to Kafka acknowledging it (acks=all).",
                             NULL, ixia_metrics_latency_buckets, ixia_metrics_latency_n),
      NULL);
  s->linger_ms = ixia_config_int(cfg, "kafka.linger_ms");
  s->message_timeout_ms = ixia_config_int(cfg, "kafka.message_timeout_ms");
  /* An event carries a whole document plus its key and a small envelope;
   * librdkafka's default (1,000,000) would refuse the largest documents
   * the API accepts. Brokers must allow as much (message.max.bytes). */
  gint64 need = ixia_config_int(cfg, "limits.max_doc_bytes") +
                2 * ixia_config_int(cfg, "limits.max_key_bytes") + 64 * 1024;
  s->message_max_bytes = CLAMP(need, 1000000, 1000000000);
  s->started_at = g_get_monotonic_time();
  g_mutex_init(&s->lock);
  g_mutex_init(&s->waiting_lock);
  g_queue_init(&s->waiting);
  if (!*s->topic) {
    ixia_error_set(err, IXIA_EINVAL, "kafka.topic is empty");
    ixia_sink_destroy(s);
    return NULL;
  }
  s->producer = producer_new(s, err);
  if (!s->producer) {
    ixia_sink_destroy(s);
    return NULL;
  }
  IXIA_INFO("replication sink: producing to topic %s at %s", s->topic, s->brokers);
  return s;
}

void ixia_sink_destroy(ixia_sink_t *s) {
  if (!s) return;
  producer_unref(s->producer, flush_bound_ms(s));
  g_mutex_clear(&s->lock);
  g_mutex_clear(&s->waiting_lock);
  g_free(s->brokers);
  g_free(s->topic);
  g_free(s);
}

gboolean ixia_sink_replicate(ixia_sink_t *s, const ixia_sink_batch_t *batches, guint n,
                             gint64 *last_sequence, ixia_error_t **err) {
  /* The deadline covers the whole call, waiting for queue room included. */
  gint64 deadline = g_get_monotonic_time() + s->delivery_timeout_ms * G_TIME_SPAN_MILLISECOND;
  atomic_fetch_add_explicit(&s->calls, 1, memory_order_relaxed);
  ixia_error_t *e = NULL;
  ixia_sink_decode_info_t info;
  gint64 last = 0;
  GPtrArray *events = ixia_sink_decode(batches, n, g_get_real_time() / 1000, &last, &info, &e);
  atomic_fetch_add_explicit(&s->events_skipped, info.skipped, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->version_mismatches, info.version_mismatches, memory_order_relaxed);
  gboolean ok = events != NULL;
  if (ok && events->len > 0) ok = publish(s, events, deadline, &e);
  guint published = events ? events->len : 0;
  if (events) g_ptr_array_unref(events);
  if (!ok) {
    atomic_fetch_add_explicit(&s->call_failures, 1, memory_order_relaxed);
    IXIA_WARN("replicate (%u batches) failed: %s", n, e->message);
    return ixia_error_propagate(err, e);
  }
  if (last > 0) {
    gint64 cur = atomic_load_explicit(&s->last_sequence, memory_order_relaxed);
    while (cur < last &&
           !atomic_compare_exchange_weak_explicit(&s->last_sequence, &cur, last, memory_order_relaxed, memory_order_relaxed)) {
    }
  }
  IXIA_DEBUG("replicated %u batches, %u events, through sequence %" G_GINT64_FORMAT, n, published, last);
  if (last_sequence) *last_sequence = last;
  return TRUE;
}

void ixia_sink_set_server(ixia_sink_t *s, ixia_server_t *srv) { s->server = srv; }

char *ixia_sink_stats(ixia_sink_t *s) {
  cJSON *o = cJSON_CreateObject();
#define COUNTER(name) \
  cJSON_AddNumberToObject(o, #name, (double)atomic_load_explicit(&s->name, memory_order_relaxed))
  cJSON_AddNumberToObject(o, "uptime_s", (double)(g_get_monotonic_time() - s->started_at) / 1e6);
  COUNTER(calls);
  COUNTER(call_failures);
  COUNTER(events_published);
  COUNTER(delivery_failures);
  COUNTER(events_skipped);
  COUNTER(version_mismatches);
  COUNTER(producer_restarts);
  COUNTER(last_sequence);
#undef COUNTER
  g_mutex_lock(&s->lock);
  cJSON_AddNumberToObject(o, "kafka_outq", rd_kafka_outq_len(s->producer->rk));
  g_mutex_unlock(&s->lock);
  cJSON_AddNumberToObject(o, "pending_deliveries",
                          (double)MAX(atomic_load_explicit(&s->pending_deliveries, memory_order_relaxed), 0));
  g_mutex_lock(&s->waiting_lock);
  gint64 *oldest = g_queue_peek_head(&s->waiting);
  gint64 age = oldest ? (g_get_monotonic_time() - *oldest) / 1000 : 0;
  cJSON_AddNumberToObject(o, "waiting_calls", g_queue_get_length(&s->waiting));
  g_mutex_unlock(&s->waiting_lock);
  cJSON_AddNumberToObject(o, "oldest_pending_ms", (double)age);
  cJSON_AddStringToObject(o, "kafka_brokers", s->brokers);
  cJSON_AddStringToObject(o, "kafka_topic", s->topic);
  ixia_server_add_stats(s->server, o);
  char *out = ixia_json_print(o);
  cJSON_Delete(o);
  return out;
}

gboolean ixia_sink_kafka_check(ixia_sink_t *s, int timeout_ms, ixia_error_t **err) {
  g_mutex_lock(&s->lock);
  producer_t *p = s->producer;
  if (p) atomic_fetch_add(&p->refs, 1);
  g_mutex_unlock(&s->lock);
  if (!p) return ixia_error_set(err, IXIA_EUNAVAILABLE, "no Kafka producer");
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t kerr = rd_kafka_metadata(p->rk, 0, NULL, &md, timeout_ms);
  if (md) rd_kafka_metadata_destroy(md);
  producer_unref(p, 0);
  if (kerr)
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "Kafka unreachable at %s: %s", s->brokers,
                          rd_kafka_err2str(kerr));
  return TRUE;
}
