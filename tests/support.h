/* Test support: real processes on loopback ephemeral ports.
 * Every process started here is killed by ixt_cleanup() (registered with
 * atexit), so a failing test leaves nothing running. Single-threaded use. */
#ifndef IXIA_TEST_SUPPORT_H
#define IXIA_TEST_SUPPORT_H

#include <CUnit/Basic.h>
#include <glib.h>

/* A fresh directory under $TMPDIR; removed by ixt_cleanup(). */
char *ixt_tmpdir(void);
/* A port that was free a moment ago. */
int ixt_free_port(void);
gboolean ixt_wait_tcp(int port, int timeout_ms);

/* Starts argv[0] with output to log_path; tracked for cleanup. */
GPid ixt_spawn(char **argv, const char *log_path);
/* Sends sig and, for SIGKILL/SIGTERM, waits for the process to exit. */
void ixt_signal(GPid pid, int sig);

typedef struct {
  GPid pid;
  int port;
  char *addr; /* "127.0.0.1:PORT" */
} ixt_memcached_t;
/* port 0 picks one. */
gboolean ixt_memcached_start(ixt_memcached_t *m, int port);
void ixt_memcached_stop(ixt_memcached_t *m);

typedef struct {
  GPid pid;
  int port;
  char *dir;
  char *addr; /* "127.0.0.1:PORT" */
} ixt_api_t;
/* Starts ixia-query-api with its store in dir, the cache on cache_servers
 * ("" = none) and extra "--set" assignments (NULL-terminated, may be NULL). */
gboolean ixt_api_start(ixt_api_t *a, const char *dir, const char *cache_servers,
                       const char *const *sets);
/* Stops the daemon; FALSE when its log holds a sanitizer report. */
gboolean ixt_api_stop(ixt_api_t *a);

/* Runs a CUnit registry with the basic interface; returns the exit code. */
int ixt_run(void);

#define IXT_ADD(suite, fn) CU_add_test(suite, #fn, fn)

#endif
