/* The replication sink: turns truth-store WAL batches into change events and
 * publishes them to Kafka, answering only once Kafka has every one of them.
 *
 * Two layers, both usable on their own:
 *  - the decoder (ixia_sink_decode) turns RocksDB WriteBatch bytes into
 *    ChangeEvent structs; it is pure and stateless;
 *  - the sink (ixia_sink_new/_replicate) owns an idempotent librdkafka
 *    producer (acks=all) and publishes the decoded events of one call, then
 *    waits for their delivery reports.
 *
 * Kafka message: key = the raw truth-store key (so every edit of a document
 * lands on one partition, in order); value = ChangeEvent, Thrift compact
 * protocol (schemas/ixia.thrift documents the envelope).
 *
 * Delivery is at-least-once: a failed call may have published part of its
 * events and the source re-sends the whole call, so consumers deduplicate by
 * version. A call never reports success unless every event has a successful
 * delivery report.
 *
 * Thread safety: ixia_sink_replicate and ixia_sink_stats may run from any
 * number of threads at once (server workers). new/destroy/set_server from
 * one controlling thread, with no call in flight during destroy. */
#ifndef IXIA_SINK_H
#define IXIA_SINK_H

#include <thrift/c_glib/processor/thrift_processor.h>

#include "config.h"
#include "error.h"
#include "ixia_ixia_types.h"
#include "server.h"

/* One WAL write batch. Borrowed for the duration of a call. */
typedef struct {
  gint64 sequence;  /* sequence number (= version) of the batch's first edit */
  const void *data; /* RocksDB WriteBatch bytes (rocksdb_writebatch_data) */
  size_t len;
} ixia_sink_batch_t;

/* One decoded edit. Owns both members. */
typedef struct {
  IxiaChangeEvent *event; /* g_object_unref'd by ixia_sink_event_free */
  GBytes *kafka_key;      /* the raw truth-store key */
} ixia_sink_event_t;

void ixia_sink_event_free(ixia_sink_event_t *ev);

/* What the decoder noticed without failing. */
typedef struct {
  guint edits;              /* edits seen, including skipped ones */
  guint skipped;            /* unknown key kinds, schema deletes */
  guint version_mismatches; /* value header version != WAL sequence */
} ixia_sink_decode_info_t;

/* Decodes batches (ascending, non-overlapping sequences) into events, in WAL
 * order. The i-th edit of a batch has version batch.sequence + i; a put's
 * version is taken from its value header, which the store writes equal to
 * that sequence (a mismatch is logged and counted, not fatal).
 *
 * Fails with IXIA_EINVAL on bad input (truncated batch, out-of-order
 * sequences, a batch header that names another sequence) and IXIA_EINTERNAL
 * when the batch cannot be decoded faithfully: rocksdb_writebatch_iterate
 * reports only default-column-family puts and deletes (it passes over merges
 * and single/range deletes, and stops at an edit of another column family),
 * so a batch holding any such record would get wrong versions or lose
 * edits; a malformed document or schema record fails the same way. Nothing
 * is skipped silently except unknown key kinds (logged and counted).
 *
 * Returns a new array of ixia_sink_event_t * (it frees them), or NULL.
 * *last_sequence (may be NULL) receives the sequence of the last edit of
 * the last batch, or 0 when n == 0. info may be NULL. now_ms stamps
 * timestamp_ms. Thread-safe: no shared state. */
GPtrArray *ixia_sink_decode(const ixia_sink_batch_t *batches, guint n, gint64 now_ms,
                            gint64 *last_sequence, ixia_sink_decode_info_t *info,
                            ixia_error_t **err);

typedef struct ixia_sink ixia_sink_t;

/* Creates the producer from kafka.brokers, kafka.topic, kafka.linger_ms,
 * kafka.message_timeout_ms, limits.max_doc_bytes, and the call deadline from
 * sink.delivery_timeout_ms. Does not wait for Kafka: brokers are contacted
 * in the background, so a sink starts while Kafka is down. cfg is borrowed
 * and must outlive the sink. */
ixia_sink_t *ixia_sink_new(const ixia_config_t *cfg, ixia_error_t **err);
/* Waits a bounded time for messages still in flight (those of calls that
 * already failed: a successful call has nothing left), drops the rest and
 * frees everything. Accepts NULL. */
void ixia_sink_destroy(ixia_sink_t *sink);

/* Decodes and publishes every edit of batches, then waits until each has a
 * delivery report or sink.delivery_timeout_ms has passed since the call
 * began. On success *last_sequence is the sequence of the last edit (0 for
 * an empty call). Fails with IXIA_EUNAVAILABLE naming the Kafka error when
 * any event was not delivered in time, or with a decoder error (then nothing
 * was published). */
gboolean ixia_sink_replicate(ixia_sink_t *sink, const ixia_sink_batch_t *batches, guint n,
                             gint64 *last_sequence, ixia_error_t **err);

/* g_malloc'd JSON object of counters: events_published, calls,
 * call_failures, delivery_failures, last_sequence, kafka_brokers,
 * kafka_topic and more. */
char *ixia_sink_stats(ixia_sink_t *sink);

/* Kafka answers a metadata request within timeout_ms (readiness). */
gboolean ixia_sink_kafka_check(ixia_sink_t *sink, int timeout_ms, ixia_error_t **err);

/* Lets stats report server counters; the server is borrowed and must
 * outlive its use by stats (stop the server before destroying either). */
void ixia_sink_set_server(ixia_sink_t *sink, ixia_server_t *srv);

/* The ReplicationSink Thrift processor over sink (borrowed; it must outlive
 * the processor). g_object_unref the result. */
ThriftProcessor *ixia_sink_processor_new(ixia_sink_t *sink);

#endif
