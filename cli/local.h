/* ixia-local: runs the whole stack on one machine, in one directory.
 *
 *   DIR/pids       the processes this tool started: "NAME PID STARTTIME"
 *   DIR/local.env  IXIA_MEMCACHED=, IXIA_KAFKA= (bootstrap list),
 *                  IXIA_KAFKA_CONTROL= (devkafka's fault-injection port),
 *                  IXIA_SINK=, IXIA_INDEXER=, IXIA_API= (`set -a; . DIR/local.env`)
 *   DIR/logs/      NAME.log: stdout and stderr of each daemon
 *   DIR/store/     the truth store of ixia-query-api
 *   DIR/index/     the index of the one ixia-indexer shard (all partitions);
 *                  DIR/index.failed-updates.jsonl its failed-updates log
 *   DIR/api.port, sink.port, indexer.port, kafka.bootstrap, kafka.control
 *                  written by the daemons once they serve (readiness)
 *
 * Services, in start order: memcached, ixia-devkafka (in-memory Kafka:
 * its data is lost when the stack stops), ixia-replication-sink (publishes
 * to it), ixia-indexer (consumes it), ixia-query-api (ships its WAL to the
 * sink, fans queries out to the indexer). A missing ixia binary
 * is an error, never a silently smaller stack.
 *
 * The daemons form a table of services in start order (local.c); a later
 * daemon is one more entry with its command line, readiness probe and
 * environment line. Daemons run detached (own session), so they outlive
 * `up`; `down` stops exactly the recorded processes, checking each pid's
 * start time first so that a reused pid is never signalled. */
#ifndef IXIA_LOCAL_H
#define IXIA_LOCAL_H

#include <glib.h>

typedef struct {
  const char *dir;         /* required */
  const char *config_file; /* forwarded to every ixia daemon; may be NULL */
  char **sets;             /* "section.key=value", forwarded; may be NULL */
  const char *bin_dir;     /* where ixia-query-api etc. are */
  int timeout_s;           /* how long each daemon may take to answer */
} ixia_local_opts_t;

/* Each returns the process exit code (0 ok, 1 failure) and prints what it
 * did. */
int ixia_local_up(const ixia_local_opts_t *o);
int ixia_local_down(const ixia_local_opts_t *o);
int ixia_local_status(const ixia_local_opts_t *o);
/* up, then wait for SIGINT/SIGTERM/SIGHUP (or a daemon dying), then down.
 * A daemon replaced by `restart` meanwhile is followed, not mourned. */
int ixia_local_run(const ixia_local_opts_t *o);
/* Restarts one recorded daemon (its name, with or without "ixia-") on the
 * port it had and records the new process in its place; ixia-devkafka gets
 * new ports, so the sink and the indexer (which hold its address) restart
 * after it, and local.env is rewritten with the new addresses. */
int ixia_local_restart(const ixia_local_opts_t *o, const char *name);

/* Command-line entry point of ixia-local. */
int ixia_local_main(int argc, char **argv);

#endif
