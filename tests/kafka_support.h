/* Kafka test support: a real ixia-devkafka process per test, its
 * fault-injection control port, a small producer, and a consumer that reads
 * a whole topic back as decoded change events.
 *
 * ixia-devkafka is the in-memory mock cluster of librdkafka (cli/devkafka.h):
 * its partitions together keep devkafka.memory_mb (1 GiB by default) of
 * batches; tests that need events deleted start it with a small budget.
 *
 * Processes started here are tracked by support.h like every test process:
 * they die with the test (PR_SET_PDEATHSIG, and a kill at exit). Start them
 * from the main thread (or one that outlives them): PDEATHSIG fires when
 * the spawning *thread* exits.
 *
 * Thread safety: ixt_devkafka_* from one thread. ixt_kafka_consume_all is
 * self-contained and may run on any thread. An ixt_producer_t is used by
 * one thread at a time. */
#ifndef IXIA_KAFKA_SUPPORT_H
#define IXIA_KAFKA_SUPPORT_H

#include <glib.h>
#include <librdkafka/rdkafka.h>

#include "ixia_ixia_types.h"
#include "support.h"

/* ---- ixia-devkafka ------------------------------------------------------ */

typedef struct {
  GPid pid;           /* 0 when not running */
  char *dir;          /* holds kafka.bootstrap, kafka.control, ixia-devkafka.log */
  char *log_path;
  char *bootstrap;    /* "127.0.0.1:P1,127.0.0.1:P2,...": use as bootstrap.servers */
  int control_port;   /* loopback port of the control protocol */
} ixt_devkafka_t;

/* Starts build/bin/ixia-devkafka with `brokers` brokers and the default
 * topic (kafka.topic, "ixia.changes") of `partitions` partitions, files and
 * log in dir. Waits (up to 20 s) until its bootstrap and control files
 * exist. k must be zeroed (or stopped) before. FALSE (with a message on
 * stderr) when it did not start. */
gboolean ixt_devkafka_start(ixt_devkafka_t *k, const char *dir, int brokers, int partitions);
/* The same with extra "--set" assignments (NULL-terminated, may be NULL),
 * e.g. "devkafka.memory_mb=4". */
gboolean ixt_devkafka_start_sets(ixt_devkafka_t *k, const char *dir, int brokers, int partitions,
                                 const char *const *sets);
/* SIGTERM, wait (SIGKILL after 10 s), free the fields. FALSE when its log
 * holds a sanitizer report (printed). k may be one that never started. */
gboolean ixt_devkafka_stop(ixt_devkafka_t *k);
/* Sends one control command ("broker-down all", "produce-errors 3
 * NOT_LEADER_FOR_PARTITION", ...) and reads the reply line. TRUE when the
 * reply starts with "ok". If reply is not NULL it receives the reply line
 * without newline (caller frees), or "transport error: ..." when no reply
 * could be read. */
gboolean ixt_devkafka_control(ixt_devkafka_t *k, const char *command, char **reply);

/* ---- consumer --------------------------------------------------------------- */

/* Where a consumed event came from, attached to each event that
 * ixt_kafka_consume_all returns (GObject data: freed with the event). */
typedef struct {
  GBytes *key;         /* message key (the truth-store key bytes); NULL if none */
  gint32 partition;
  gint64 offset;
  gint64 timestamp_ms; /* Kafka message timestamp (producer create time), or -1 */
} ixt_kafka_meta_t;

/* Reads every partition of topic from the beginning (assign at
 * OFFSET_BEGINNING; a throw-away group id, nothing committed) until every
 * partition has reached its end and no message arrived for idle_ms, or
 * max_wait_ms passed overall.
 *
 * Returns a GPtrArray of IxiaChangeEvent * (the decoded message values),
 * sorted by (partition, offset), so each key's events are in produce order.
 * The array owns them (free function g_object_unref); ixt_kafka_meta()
 * tells each one's key, partition and offset. Returns NULL, after printing
 * why on stderr, when any message is undecodable (not a compact
 * ChangeEvent, or without op or version), when the topic's metadata cannot
 * be read, or when some partition was not read to its end within
 * max_wait_ms: a caller checking "nothing lost" must not get a partial
 * answer. */
GPtrArray *ixt_kafka_consume_all(const char *bootstrap, const char *topic, int idle_ms,
                                 int max_wait_ms);
/* The Kafka metadata of an event returned by ixt_kafka_consume_all
 * (borrowed, lives as long as ev); NULL for any other event. */
const ixt_kafka_meta_t *ixt_kafka_meta(IxiaChangeEvent *ev);

/* ---- producer ----------------------------------------------------------- */

/* A producer that counts delivery reports. By default idempotent with
 * acks=all (what the replication sink uses) and quick reconnects (so a
 * broker coming back is noticed within about half a second); `conf` is a
 * NULL-terminated list of "name=value" librdkafka properties applied after
 * the defaults (may be NULL). NULL, with a message on stderr, on a bad
 * property. Free with ixt_producer_destroy (NULL is ignored; it does not
 * wait for pending messages). */
typedef struct ixt_producer ixt_producer_t;
ixt_producer_t *ixt_producer_new(const char *bootstrap, const char *const *conf);
void ixt_producer_destroy(ixt_producer_t *p);
/* Queues one message (copied). FALSE (message on stderr) when librdkafka
 * refuses it right away. key may be NULL. */
gboolean ixt_producer_send(ixt_producer_t *p, const char *topic, const void *key, size_t key_len,
                           const void *value, size_t value_len);
/* Serializes ev (compact protocol) and queues it with key as message key. */
gboolean ixt_producer_send_event(ixt_producer_t *p, const char *topic, IxiaChangeEvent *ev,
                                 const void *key, size_t key_len);
/* Serves delivery reports until none is pending or timeout_ms passed.
 * Returns how many are still pending. */
int ixt_producer_wait(ixt_producer_t *p, int timeout_ms);
/* Delivery reports so far: successes and failures; the error of the latest
 * failure (RD_KAFKA_RESP_ERR_NO_ERROR if none). */
guint ixt_producer_delivered(const ixt_producer_t *p);
guint ixt_producer_failed(const ixt_producer_t *p);
rd_kafka_resp_err_t ixt_producer_last_error(const ixt_producer_t *p);
/* Requests of one Kafka API ("Produce", "Metadata", ...) this producer has
 * sent to all brokers, from librdkafka's statistics: waits (serving
 * callbacks) for statistics newer than the call, up to timeout_ms; -1 if
 * none came. Shows that injected errors reached this producer: each one
 * costs an extra request. */
gint64 ixt_producer_requests(ixt_producer_t *p, const char *api, int timeout_ms);

/* ---- the whole pipeline ------------------------------------------------- */

/* memcached, ixia-devkafka (1 broker, 4 partitions), ixia-replication-sink,
 * one index shard (all partitions) or two (0-1 and 2-3) and ixia-query-api
 * wired together, everything under one temporary directory (shard i's
 * files in DIR/shardI). api_sets: extra "--set" assignments for the API
 * (NULL-terminated, may be NULL). FALSE (with a message) when a process did
 * not start; call ixt_stack_stop anyway. */
typedef struct {
  ixt_memcached_t mc;
  ixt_devkafka_t kafka;
  ixt_daemon_t sink;
  ixt_daemon_t indexer[2];
  char *indexer_dir[2];
  guint shards;
  ixt_api_t api;
  char *dir;
} ixt_stack_t;

gboolean ixt_stack_start(ixt_stack_t *s, guint shards, const char *const *api_sets);
/* The same with extra "--set" assignments per daemon (each NULL-terminated,
 * may be NULL). The shards always get indexer.api_port_file=DIR/api.port
 * (they repair themselves from the API). */
typedef struct {
  const char *const *api_sets;
  const char *const *indexer_sets;
  const char *const *devkafka_sets;
  const char *const *sink_sets;
  int brokers; /* of ixia-devkafka; 0 = 1 */
} ixt_stack_opts_t;
gboolean ixt_stack_start_opts(ixt_stack_t *s, guint shards, const ixt_stack_opts_t *o);
/* Stops everything; FALSE when a daemon's log holds a sanitizer report. */
gboolean ixt_stack_stop(ixt_stack_t *s);

#endif
