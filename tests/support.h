/* Test support: real processes on loopback ephemeral ports.
 * Every process started here is killed by ixt_cleanup() (registered with
 * atexit), so a failing test leaves nothing running. Single-threaded use. */
#ifndef IXIA_TEST_SUPPORT_H
#define IXIA_TEST_SUPPORT_H

#include <CUnit/Basic.h>
#include <cjson/cJSON.h>
#include <glib.h>

/* A fresh directory under $TMPDIR; removed by ixt_cleanup(). */
char *ixt_tmpdir(void);
/* A port that was free a moment ago. */
int ixt_free_port(void);
gboolean ixt_wait_tcp(int port, int timeout_ms);

/* Starts argv[0] with output to log_path; tracked for cleanup. */
GPid ixt_spawn(char **argv, const char *log_path);
/* The same with an environment (NULL: this process's). */
GPid ixt_spawn_env(char **argv, char **envp, const char *log_path);
/* How many of pid's threads carry `name` (/proc/PID/task/TID/comm). Linux
 * keeps 15 bytes of a thread's name and GLib leaves a longer one unset, so
 * a thread whose name did not fit carries the process's. */
guint ixt_threads_named(GPid pid, const char *name);
/* The highest nice value among pid's threads named `name`, G_MININT when
 * none is. */
int ixt_thread_nice(GPid pid, const char *name);
/* TRUE once pid has exited (it is then reaped and no longer tracked). */
gboolean ixt_exited(GPid pid);
/* SIGTERM, then SIGKILL after grace_ms; reaped and no longer tracked. */
void ixt_terminate(GPid pid, int grace_ms);
/* FALSE (and the log printed) when a sanitizer reported an error in it. */
gboolean ixt_log_is_clean(const char *log_path);
/* Sends sig and, for SIGKILL/SIGTERM, waits for the process to exit; for
 * SIGSTOP, until every thread of it is stopped (FALSE if not within 5 s).
 * FALSE when the signal could not be sent. */
gboolean ixt_signal(GPid pid, int sig);

/* A clock the test moves (the IXIA_TEST_CLOCK_FILE hook, common/testhook.c):
 * every process started after ixt_clock_start has its expiry clock run
 * the latest ixt_clock_set shift ahead of the wall clock, within ~10 ms of
 * the call (wait on an outcome, not a time). ixt_clock_stop: processes
 * started later use the wall clock. */
void ixt_clock_start(void);
void ixt_clock_set(gint64 shift_seconds);
void ixt_clock_stop(void);

typedef struct {
  GPid pid;
  int port;
  char *addr; /* "127.0.0.1:PORT" */
} ixt_memcached_t;
/* A memcached with the product's flags (ixia_cache_memcached_flags, as
 * ixia-local runs it). port 0: the kernel picks one, read back from the
 * server's port file; otherwise that port (a restart on the same port). */
gboolean ixt_memcached_start(ixt_memcached_t *m, int port);
void ixt_memcached_stop(ixt_memcached_t *m);

/* An ixia daemon (ixia-query-api, ixia-replication-sink, ...) started with
 * `--set SECTION.port=0 --set SECTION.port_file=DIR/SECTION.port`, its log in
 * DIR/NAME.log; API keys off and its HTTP port on a free port unless the
 * test's sets say otherwise. */
typedef struct {
  GPid pid;
  int port;
  char *addr; /* "127.0.0.1:PORT" */
  int http_port; /* its HTTP port (/metrics, /healthz, ...), 0 = none */
  char *dir;
  char *name;
  char *section;
  GPtrArray *sets;
} ixt_daemon_t;
typedef ixt_daemon_t ixt_api_t;

/* d need not be initialised. sets: NULL-terminated "--set" assignments,
 * may be NULL. */
gboolean ixt_daemon_start(ixt_daemon_t *d, const char *name, const char *section, const char *dir,
                          const char *const *sets);
/* "--set" assignments (NULL-terminated) every daemon started afterwards
 * gets after the defaults and before its own (e.g. API keys on for a whole
 * stack). NULL clears them. */
void ixt_daemon_defaults(const char *const *sets);
/* kill -9; the options are kept for ixt_daemon_restart. */
void ixt_daemon_kill(ixt_daemon_t *d);
/* Starts the daemon again with the same options on the same port. */
gboolean ixt_daemon_restart(ixt_daemon_t *d);
/* SIGTERM and wait; FALSE when its log holds a sanitizer report. */
gboolean ixt_daemon_stop(ixt_daemon_t *d);

/* ixia-query-api with its store in DIR/store and the cache on
 * cache_servers ("" = none). */
gboolean ixt_api_start(ixt_api_t *a, const char *dir, const char *cache_servers,
                       const char *const *sets);
#define ixt_api_stop ixt_daemon_stop

/* An ixia-indexer in dir (index at dir/index) consuming `partitions` ("" =
 * all) of the Kafka at bootstrap, invalidating memcached at cache. */
gboolean ixt_indexer_start(ixt_daemon_t *d, const char *dir, const char *bootstrap,
                           const char *partitions, const char *cache_servers);
/* The same with extra "--set" assignments (NULL-terminated, may be NULL). */
gboolean ixt_indexer_start_sets(ixt_daemon_t *d, const char *dir, const char *bootstrap,
                                const char *partitions, const char *cache_servers,
                                const char *const *extra);

/* The per-key order of a stream delivered at least once (the change-event
 * topic): versions only increase, except that a repeat may bring back a
 * version already seen for that key (a re-send after a failed call or a
 * crash). Feed the events in stream order. */
typedef struct ixt_order ixt_order_t;
ixt_order_t *ixt_order_new(void);
void ixt_order_destroy(ixt_order_t *o);
/* FALSE (and counted) when version steps back to one never seen for key. */
gboolean ixt_order_next(ixt_order_t *o, const void *key, gsize key_len, gint64 version);
guint ixt_order_violations(const ixt_order_t *o);
/* Whether the stream held version for key. */
gboolean ixt_order_seen(const ixt_order_t *o, const void *key, gsize key_len, gint64 version);

/* The number at a dotted path of a JSON object ("missing.count"), or -1. */
double ixt_json_num(const cJSON *o, const char *path);

/* Runs a CUnit registry with the basic interface; returns the exit code. */
int ixt_run(void);

#define IXT_ADD(suite, fn) CU_add_test(suite, #fn, fn)

#endif
