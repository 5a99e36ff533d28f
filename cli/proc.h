/* Process and socket helpers for ixia-local: detached start, identity
 * checks through /proc, graceful stop, free ports and TCP probes.
 *
 * A pid alone does not name a process: once it exits, the kernel may give
 * the number to another one. ixia-local therefore records the pid with the
 * process start time (field 22 of /proc/PID/stat) and only signals a pid
 * whose start time still matches. */
#ifndef IXIA_PROC_H
#define IXIA_PROC_H

#include <glib.h>
#include <sys/types.h>

#include "error.h"

/* Start time of a live process in clock ticks since boot, or 0 when there
 * is no such process or it has exited (a zombie waiting to be reaped). A
 * process whose leader thread is a zombie while other threads still exit
 * (kill -9 of a threaded daemon) counts as live: it still holds its files. */
guint64 ixia_proc_start_time(pid_t pid);

/* TRUE when pid is alive and is still the process that started at
 * start_time. */
gboolean ixia_proc_matches(pid_t pid, guint64 start_time);

/* Starts argv[0] (an absolute path) in a new session (so that the
 * terminal's Ctrl-C does not reach it) with stdin from /dev/null and
 * stdout/stderr appended to log_path, in working directory cwd. The child
 * is not reaped automatically: see ixia_proc_reap. */
gboolean ixia_proc_spawn_detached(char **argv, const char *cwd, const char *log_path, pid_t *pid,
                                  ixia_error_t **err);

/* For a child of this process: TRUE when it has exited (it is reaped and
 * *status set to its wait status). FALSE while it runs, or when pid is not
 * our child. */
gboolean ixia_proc_reap(pid_t pid, int *status);

/* "exited with status 1", "was killed by signal 9 (Killed)". Caller frees. */
char *ixia_proc_describe_status(int status);

typedef enum {
  IXIA_STOP_NOT_RUNNING, /* already gone */
  IXIA_STOP_PID_REUSED,  /* gone, and its pid now names another process: left alone */
  IXIA_STOP_TERMINATED,  /* exited after SIGTERM */
  IXIA_STOP_KILLED,      /* needed SIGKILL after grace_ms */
  IXIA_STOP_FAILED,      /* could not be signalled or would not die; *err set */
} ixia_stop_result_t;

/* Stops the process recorded as (pid, start_time): SIGTERM, up to grace_ms
 * for it to exit, then SIGKILL. Reaps it if it is our child. */
ixia_stop_result_t ixia_proc_stop(pid_t pid, guint64 start_time, int grace_ms,
                                  ixia_error_t **err);

/* A TCP port free on 127.0.0.1 right now (bind port 0, read it, close).
 * Another process may take it before we use it: callers retry. */
int ixia_proc_free_port(ixia_error_t **err);

/* Connects to host:port, sends request and reads one reply line (up to
 * "\n") within timeout_ms. Returns the line (caller frees) or NULL with
 * *err set. */
char *ixia_proc_tcp_request(const char *host, int port, const char *request, int timeout_ms,
                            ixia_error_t **err);

#endif
