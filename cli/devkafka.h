/* ixia-devkafka: an IN-MEMORY Kafka cluster for local runs and tests.
 *
 * NOT A PRODUCTION BROKER. It hosts librdkafka's mock cluster
 * (rdkafka_mock.h), which speaks the real Kafka protocol on 127.0.0.1 only
 * and keeps every record in this process's memory: everything is lost when
 * it exits. The partitions together keep at most devkafka.memory_mb of
 * record batches (devkafka_log.h raises librdkafka's built-in 5 MiB per
 * partition to that budget); older batches are dropped, so a consumer
 * further behind sees its offset go out of range. Production runs real
 * Kafka (docker-compose.yml).
 *
 * On start it creates kafka.topic with devkafka.partitions partitions and
 * replication factor min(3, devkafka.brokers), then writes its bootstrap
 * list to devkafka.bootstrap_file. If devkafka.control_port_file is set it
 * also serves a line-based fault-injection protocol on an ephemeral
 * loopback port written to that file (before the bootstrap file, so that a
 * reader who sees the bootstrap file can use both). One command per line,
 * each answered with exactly one line, "ok ..." or "error MESSAGE":
 *
 *   ping                          ok pong
 *   help                          ok <command summary>
 *   bootstrap                     ok HOST:PORT,HOST:PORT,...
 *   broker-down ID|all            disconnect the broker(s), refuse new connections
 *   broker-up ID|all              accept connections again
 *   produce-errors COUNT ERR      the next COUNT Produce requests (ApiKey 0),
 *                                 cluster-wide, fail with ERR: a name such as
 *                                 NOT_LEADER_FOR_PARTITION or REQUEST_TIMED_OUT
 *                                 (any rd_kafka_err2name name, case-insensitive,
 *                                 optional RD_KAFKA_RESP_ERR_ prefix) or a code
 *   rtt ID|all MS                 delay every response of the broker(s) by MS
 *   backlog                       ok budget BYTES [built-in] partitions N batches K:
 *                                 I:FIRST-NEXT:BYTES:BATCHES ... (per partition: the
 *                                 budgets, and the offsets, bytes and record batches held)
 *   reset-topic                   delete every event and start each partition's offsets at 0
 *                                 again: what consumers see when the topic is re-created
 *
 * Broker IDs are 1..devkafka.brokers. Neither down nor up moves partition
 * leadership (librdkafka's mock does not), so with a leader down its
 * partitions are unavailable until it is up again.
 *
 * Thread safety: new/control_start/destroy from one thread. The control
 * server runs on its own thread; ixia_devkafka_command may be called from
 * any thread (commands are serialized). */
#ifndef IXIA_DEVKAFKA_H
#define IXIA_DEVKAFKA_H

#include <glib.h>

#include "config.h"
#include "error.h"

typedef struct ixia_devkafka ixia_devkafka_t;

/* Starts the mock cluster (devkafka.brokers brokers, listening on
 * 127.0.0.1) and creates kafka.topic. The config is only read here. */
ixia_devkafka_t *ixia_devkafka_new(const ixia_config_t *cfg, ixia_error_t **err);
/* Stops the control server (if started) and destroys the cluster and all
 * its data. NULL is ignored. */
void ixia_devkafka_destroy(ixia_devkafka_t *dk);

/* "127.0.0.1:P1,127.0.0.1:P2,...": borrowed, valid as long as dk. */
const char *ixia_devkafka_bootstraps(const ixia_devkafka_t *dk);

/* Binds an ephemeral port on 127.0.0.1 and serves the control protocol on a
 * thread of its own until destroy. */
gboolean ixia_devkafka_control_start(ixia_devkafka_t *dk, ixia_error_t **err);
/* The control port, or 0 when the control server is not running. */
int ixia_devkafka_control_port(const ixia_devkafka_t *dk);

/* Executes one command line (without its newline) and returns the reply
 * line without newline: "ok ..." or "error ...". Caller frees. */
char *ixia_devkafka_command(ixia_devkafka_t *dk, const char *line);

/* Command-line entry point of ixia-devkafka (--config/--set). Returns the
 * process exit code. */
int ixia_devkafka_main(int argc, char **argv);

#endif
