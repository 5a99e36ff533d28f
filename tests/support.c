/* Test support (support.h): real processes on loopback ephemeral ports.
 *
 * Every process a test starts is tracked and killed at exit, and dies with
 * the test even if it crashes (PR_SET_PDEATHSIG); daemons write their port
 * to a file so a test never guesses one. Stopping a daemon scans its log
 * for sanitizer reports, so a leak or an overflow in a daemon fails the
 * test that caused it. */
#include "support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "client.h"

static GArray *children;
static GPtrArray *dirs;

static void cleanup(void) {
  for (guint i = 0; children && i < children->len; i++) {
    GPid pid = g_array_index(children, GPid, i);
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
    }
  }
  for (guint i = 0; dirs && i < dirs->len; i++) {
    if (g_getenv("IXIA_TEST_KEEP")) {
      fprintf(stderr, "IXIA_TEST_KEEP: left %s\n", (char *)g_ptr_array_index(dirs, i));
      continue;
    }
    char *cmd = g_strdup_printf("rm -rf '%s'", (char *)g_ptr_array_index(dirs, i));
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed: %s\n", cmd);
    g_free(cmd);
  }
}

static void init_once(void) {
  if (children) return;
  children = g_array_new(FALSE, FALSE, sizeof(GPid));
  dirs = g_ptr_array_new_with_free_func(g_free);
  atexit(cleanup);
  signal(SIGPIPE, SIG_IGN);
}

char *ixt_tmpdir(void) {
  init_once();
  char *d = g_dir_make_tmp("ixia-test-XXXXXX", NULL);
  g_assert(d);
  g_ptr_array_add(dirs, g_strdup(d));
  return d;
}

static char *clock_file;

void ixt_clock_start(void) {
  if (!clock_file) {
    char *d = ixt_tmpdir();
    clock_file = g_build_filename(d, "clock-shift", NULL);
    g_free(d);
  }
  ixt_clock_set(0);
  g_setenv("IXIA_TEST_CLOCK_FILE", clock_file, TRUE);
}

void ixt_clock_set(gint64 shift_seconds) {
  g_assert(clock_file);
  char *text = g_strdup_printf("%" G_GINT64_FORMAT "\n", shift_seconds);
  /* Written aside and renamed: a reader never sees half of it. */
  g_assert(g_file_set_contents(clock_file, text, -1, NULL));
  g_free(text);
}

void ixt_clock_stop(void) { g_unsetenv("IXIA_TEST_CLOCK_FILE"); }

int ixt_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  g_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  getsockname(fd, (struct sockaddr *)&a, &l);
  close(fd);
  return ntohs(a.sin_port);
}

gboolean ixt_wait_tcp(int port, int timeout_ms) {
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  while (g_get_monotonic_time() < deadline) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    close(fd);
    if (rc == 0) return TRUE;
    g_usleep(20000);
  }
  return FALSE;
}

static pid_t spawner;

/* Runs in the child between fork and exec (async-signal-safe calls only):
 * output to the log, and die with the test process so that a crashed or
 * killed test leaves no daemons behind. */
static void redirect_output(gpointer log_path) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* The parent may have died before prctl: then nobody would kill us. */
  if (getppid() != spawner) _exit(127);
  int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
}

GPid ixt_spawn(char **argv, const char *log_path) { return ixt_spawn_env(argv, NULL, log_path); }

GPid ixt_spawn_env(char **argv, char **envp, const char *log_path) {
  init_once();
  GPid pid = 0;
  GError *e = NULL;
  spawner = getpid();
  if (!g_spawn_async(NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH, redirect_output,
                     (gpointer)log_path, &pid, &e)) {
    fprintf(stderr, "spawn %s: %s\n", argv[0], e->message);
    g_error_free(e);
    return 0;
  }
  g_array_append_val(children, pid);
  return pid;
}

static void untrack(GPid pid) {
  for (guint i = 0; children && i < children->len; i++)
    if (g_array_index(children, GPid, i) == pid) g_array_index(children, GPid, i) = 0;
}

/* Whether every thread of pid is stopped (/proc/PID/task/TID/stat). */
static gboolean all_threads_stopped(GPid pid) {
  char *task_dir = g_strdup_printf("/proc/%d/task", (int)pid);
  GDir *d = g_dir_open(task_dir, 0, NULL);
  gboolean stopped = d != NULL;
  for (const char *tid; stopped && d && (tid = g_dir_read_name(d));) {
    char *path = g_strdup_printf("%s/%s/stat", task_dir, tid);
    char *stat = NULL;
    if (g_file_get_contents(path, &stat, NULL, NULL)) {
      const char *close = strrchr(stat, ')');
      stopped = close && (close[2] == 'T' || close[2] == 't');
    }
    g_free(stat);
    g_free(path);
  }
  if (d) g_dir_close(d);
  g_free(task_dir);
  return stopped;
}

gboolean ixt_signal(GPid pid, int sig) {
  if (pid <= 0) return FALSE;
  if (kill(pid, sig) != 0) return FALSE;
  if (sig == SIGSTOP) {
    /* kill() returns before every thread has stopped: a request sent right
     * after could still be served by a thread still running. */
    gint64 until = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    gboolean stopped;
    while (!(stopped = all_threads_stopped(pid)) && g_get_monotonic_time() < until) g_usleep(1000);
    return stopped;
  }
  if (sig == SIGKILL || sig == SIGTERM) {
    waitpid(pid, NULL, 0);
    untrack(pid);
  }
  return TRUE;
}

/* The /proc/PID/task/TID directories of pid's threads named `name`. */
static GPtrArray *threads_named(GPid pid, const char *name) {
  GPtrArray *dirs = g_ptr_array_new_with_free_func(g_free);
  char *dir = g_strdup_printf("/proc/%d/task", (int)pid);
  GDir *d = g_dir_open(dir, 0, NULL);
  for (const char *tid; d && (tid = g_dir_read_name(d));) {
    char *path = g_strdup_printf("%s/%s/comm", dir, tid), *comm = NULL;
    if (g_file_get_contents(path, &comm, NULL, NULL) && !strcmp(g_strchomp(comm), name))
      g_ptr_array_add(dirs, g_strdup_printf("%s/%s", dir, tid));
    g_free(comm);
    g_free(path);
  }
  if (d) g_dir_close(d);
  g_free(dir);
  return dirs;
}

guint ixt_threads_named(GPid pid, const char *name) {
  GPtrArray *dirs = threads_named(pid, name);
  guint n = dirs->len;
  g_ptr_array_unref(dirs);
  return n;
}

int ixt_thread_nice(GPid pid, const char *name) {
  GPtrArray *dirs = threads_named(pid, name);
  int nice = G_MININT;
  for (guint i = 0; i < dirs->len; i++) {
    char *path = g_strdup_printf("%s/stat", (const char *)dirs->pdata[i]), *stat = NULL;
    if (g_file_get_contents(path, &stat, NULL, NULL) && strrchr(stat, ')')) {
      /* After "pid (comm) ": state is field 3, nice field 19. */
      char **f = g_strsplit(strrchr(stat, ')') + 2, " ", 0);
      if (g_strv_length(f) > 16) nice = MAX(nice, atoi(f[16]));
      g_strfreev(f);
    }
    g_free(stat);
    g_free(path);
  }
  g_ptr_array_unref(dirs);
  return nice;
}

gboolean ixt_exited(GPid pid) {
  if (pid <= 0 || waitpid(pid, NULL, WNOHANG) != pid) return FALSE;
  untrack(pid);
  return TRUE;
}

void ixt_terminate(GPid pid, int grace_ms) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  gint64 deadline = g_get_monotonic_time() + (gint64)grace_ms * 1000;
  while (waitpid(pid, NULL, WNOHANG) != pid) {
    if (g_get_monotonic_time() >= deadline) {
      fprintf(stderr, "pid %d ignored SIGTERM for %d ms; killing it\n", (int)pid, grace_ms);
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      break;
    }
    g_usleep(10000);
  }
  untrack(pid);
}

gboolean ixt_log_is_clean(const char *log_path) {
  char *text = NULL;
  gboolean clean = TRUE;
  if (log_path && g_file_get_contents(log_path, &text, NULL, NULL)) {
    static const char *const markers[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                          "runtime error:"};
    for (guint i = 0; i < G_N_ELEMENTS(markers) && clean; i++)
      if (strstr(text, markers[i])) {
        fprintf(stderr, "sanitizer report in %s:\n%s\n", log_path, text);
        clean = FALSE;
      }
  }
  g_free(text);
  return clean;
}

/* The pid a memcached on 127.0.0.1:port reports (its "stats"), 0 when it
 * does not answer: whether the server on a port is the one we started (a
 * free port can be taken by another process between the probe and the
 * bind; the memcached we spawned then exits and the port answers for the
 * other one). */
static GPid memcached_pid(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct timeval tv = {.tv_sec = 2};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  GPid pid = 0;
  char buf[8192];
  size_t len = 0;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && send(fd, "stats\r\n", 7, MSG_NOSIGNAL) == 7) {
    while (len < sizeof buf - 1) {
      ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
      if (r <= 0) break;
      len += (size_t)r;
      buf[len] = 0;
      if (strstr(buf, "END\r\n")) break;
    }
    buf[len] = 0;
    const char *p = strstr(buf, "STAT pid ");
    if (p) pid = (GPid)atoi(p + 9);
  }
  close(fd);
  return pid;
}

/* The port memcached wrote to its MEMCACHED_PORT_FILENAME file ("TCP INET:
 * 12345"), 0 while none. */
static int read_port_file(const char *path) {
  char *text = NULL;
  int port = 0;
  if (g_file_get_contents(path, &text, NULL, NULL)) {
    const char *p = strstr(text, "TCP INET: ");
    if (p) port = atoi(p + strlen("TCP INET: "));
  }
  g_free(text);
  return port;
}

gboolean ixt_memcached_start(ixt_memcached_t *m, int port) {
  static int seq;
  char *dir = ixt_tmpdir();
  gboolean ok = FALSE;
  for (int attempt = 0; attempt < 5 && !ok; attempt++) {
    /* Port 0: the kernel picks one and memcached writes it to a file, so
     * no other process can take a port we probed. */
    char *port_file = g_strdup_printf("%s/memcached-%d.port", dir, ++seq);
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(argv, g_strdup(MEMCACHED_BIN));
    for (const char *const *f = ixia_cache_memcached_flags(); *f; f++) g_ptr_array_add(argv, g_strdup(*f));
    g_ptr_array_add(argv, g_strdup("-p"));
    g_ptr_array_add(argv, g_strdup_printf("%d", port ? port : -1));
    g_ptr_array_add(argv, g_strdup("-m"));
    g_ptr_array_add(argv, g_strdup("64"));
    if (geteuid() == 0) { /* memcached refuses to run as root without -u */
      g_ptr_array_add(argv, g_strdup("-u"));
      g_ptr_array_add(argv, g_strdup("root"));
    }
    g_ptr_array_add(argv, NULL);
    char **envp = g_environ_setenv(g_get_environ(), "MEMCACHED_PORT_FILENAME", port_file, TRUE);
    m->pid = ixt_spawn_env((char **)argv->pdata, envp, "/dev/null");
    g_strfreev(envp);
    g_ptr_array_unref(argv);
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    m->port = port;
    while (m->pid && !ok && g_get_monotonic_time() < deadline) {
      if (ixt_exited(m->pid)) { /* the port was taken: try again */
        m->pid = 0;
        break;
      }
      if (!m->port) m->port = read_port_file(port_file);
      ok = m->port && memcached_pid(m->port) == m->pid;
      if (!ok) g_usleep(10000);
    }
    unlink(port_file);
    g_free(port_file);
    if (!ok) {
      ixt_signal(m->pid, SIGKILL);
      m->pid = 0;
      if (port) g_usleep(200000);
    }
  }
  g_free(dir);
  if (ok) {
    g_free(m->addr);
    m->addr = g_strdup_printf("127.0.0.1:%d", m->port);
  }
  return ok;
}

void ixt_memcached_stop(ixt_memcached_t *m) {
  ixt_signal(m->pid, SIGKILL);
  m->pid = 0;
  g_free(m->addr);
  m->addr = NULL;
}

/* Assignments every daemon started from now on gets after the defaults
 * (ixt_daemon_defaults). */
static GPtrArray *extra_sets;

void ixt_daemon_defaults(const char *const *sets) {
  if (extra_sets) g_ptr_array_unref(extra_sets);
  extra_sets = g_ptr_array_new_with_free_func(g_free);
  for (const char *const *s = sets; s && *s; s++) g_ptr_array_add(extra_sets, g_strdup(*s));
}

/* Runs d's daemon with its options; port 0 = a free one. */
static gboolean daemon_spawn(ixt_daemon_t *d, int port) {
  char *port_file = g_strdup_printf("%s/%s.port", d->dir, d->section);
  char *log = g_strdup_printf("%s/%s.log", d->dir, d->name);
  unlink(port_file);
  GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
  /* IXIA_TEST_WRAPPER="valgrind -q" runs the daemon under a tool. */
  gchar **wrapper = g_strsplit(g_getenv("IXIA_TEST_WRAPPER") ? g_getenv("IXIA_TEST_WRAPPER") : "", " ", -1);
  for (gchar **w = wrapper; *w; w++)
    if (**w) g_ptr_array_add(argv, g_strdup(*w));
  g_strfreev(wrapper);
  g_ptr_array_add(argv, g_strdup_printf("%s/%s", IXIA_BIN_DIR, d->name));
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup("log.level=warn"));
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup_printf("%s.port=%d", d->section, port));
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup_printf("%s.port_file=%s", d->section, port_file));
  /* Defaults a test's own sets may override: no API keys, the HTTP port on
   * a free port (written to DIR/SECTION.http_port). */
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup("auth.enabled=false"));
  const char *http = !strcmp(d->section, "api") ? "http.port"
                     : !strcmp(d->section, "sink") ? "sink.http_port"
                     : !strcmp(d->section, "indexer") ? "indexer.http_port"
                                                      : NULL;
  char *http_file = g_strdup_printf("%s/%s.http_port", d->dir, d->section);
  unlink(http_file);
  if (http) {
    g_ptr_array_add(argv, g_strdup("--set"));
    g_ptr_array_add(argv, g_strdup_printf("%s=0", http));
    g_ptr_array_add(argv, g_strdup("--set"));
    g_ptr_array_add(argv, g_strdup_printf("%s_file=%s", http, http_file));
  }
  for (guint i = 0; extra_sets && i < extra_sets->len; i++) {
    g_ptr_array_add(argv, g_strdup("--set"));
    g_ptr_array_add(argv, g_strdup(g_ptr_array_index(extra_sets, i)));
  }
  for (guint i = 0; i < d->sets->len; i++) {
    g_ptr_array_add(argv, g_strdup("--set"));
    g_ptr_array_add(argv, g_strdup(g_ptr_array_index(d->sets, i)));
  }
  g_ptr_array_add(argv, NULL);
  gboolean ok = FALSE;
  /* A restart on a fixed port may find it in TIME_WAIT for a moment. */
  for (int attempt = 0; attempt < 20 && !ok; attempt++) {
    d->pid = ixt_spawn((char **)argv->pdata, log);
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
    while (d->pid && g_get_monotonic_time() < deadline) {
      char *text = NULL;
      if (g_file_get_contents(port_file, &text, NULL, NULL)) {
        d->port = atoi(text);
        g_free(text);
        ok = d->port > 0;
        break;
      }
      if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
        d->pid = 0;
        break;
      }
      g_usleep(20000);
    }
    if (!ok && port == 0) break;
    if (!ok) g_usleep(250000);
  }
  g_ptr_array_free(argv, TRUE);
  if (ok) {
    g_free(d->addr);
    d->addr = g_strdup_printf("127.0.0.1:%d", d->port);
    char *text = NULL;
    d->http_port = http && g_file_get_contents(http_file, &text, NULL, NULL) ? atoi(text) : 0;
    g_free(text);
  } else {
    fprintf(stderr, "%s did not start; see %s\n", d->name, log);
  }
  g_free(port_file);
  g_free(http_file);
  g_free(log);
  return ok;
}

gboolean ixt_daemon_start(ixt_daemon_t *d, const char *name, const char *section, const char *dir,
                          const char *const *sets) {
  memset(d, 0, sizeof *d);
  d->name = g_strdup(name);
  d->section = g_strdup(section);
  d->dir = g_strdup(dir);
  d->sets = g_ptr_array_new_with_free_func(g_free);
  for (const char *const *s = sets; s && *s; s++) g_ptr_array_add(d->sets, g_strdup(*s));
  return daemon_spawn(d, 0);
}

void ixt_daemon_kill(ixt_daemon_t *d) {
  ixt_signal(d->pid, SIGKILL);
  d->pid = 0;
}

gboolean ixt_daemon_restart(ixt_daemon_t *d) {
  if (d->pid) ixt_daemon_kill(d);
  return daemon_spawn(d, d->port);
}

gboolean ixt_api_start(ixt_api_t *a, const char *dir, const char *cache_servers,
                       const char *const *sets) {
  GPtrArray *all = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(all, g_strdup_printf("store.path=%s/store", dir));
  g_ptr_array_add(all, g_strdup_printf("cache.servers=%s", cache_servers));
  for (const char *const *s = sets; s && *s; s++) g_ptr_array_add(all, g_strdup(*s));
  g_ptr_array_add(all, NULL);
  gboolean ok = ixt_daemon_start(a, "ixia-query-api", "api", dir, (const char *const *)all->pdata);
  g_ptr_array_free(all, TRUE);
  return ok;
}

/* FALSE when a sanitizer reported an error in the daemon's log. */
static gboolean log_is_clean(const ixt_daemon_t *d) {
  char *log = g_strdup_printf("%s/%s.log", d->dir, d->name);
  gboolean clean = ixt_log_is_clean(log);
  g_free(log);
  return clean;
}

gboolean ixt_daemon_stop(ixt_daemon_t *d) {
  if (!d->name) return TRUE;
  ixt_signal(d->pid, SIGTERM);
  gboolean clean = log_is_clean(d);
  d->pid = 0;
  g_clear_pointer(&d->addr, g_free);
  g_clear_pointer(&d->dir, g_free);
  g_clear_pointer(&d->name, g_free);
  g_clear_pointer(&d->section, g_free);
  g_ptr_array_free(d->sets, TRUE);
  d->sets = NULL;
  return clean;
}

int ixt_run(void) {
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed() +
                    CU_get_number_of_suites_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

gboolean ixt_indexer_start(ixt_daemon_t *d, const char *dir, const char *bootstrap,
                           const char *partitions, const char *cache_servers) {
  return ixt_indexer_start_sets(d, dir, bootstrap, partitions, cache_servers, NULL);
}

gboolean ixt_indexer_start_sets(ixt_daemon_t *d, const char *dir, const char *bootstrap,
                                const char *partitions, const char *cache_servers,
                                const char *const *extra) {
  g_mkdir_with_parents(dir, 0700);
  GPtrArray *sets = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(sets, g_strdup_printf("kafka.brokers=%s", bootstrap));
  g_ptr_array_add(sets, g_strdup_printf("index.path=%s/index", dir));
  g_ptr_array_add(sets, g_strdup_printf("indexer.partitions=%s", partitions));
  g_ptr_array_add(sets, g_strdup_printf("cache.servers=%s", cache_servers));
  for (const char *const *s = extra; s && *s; s++) g_ptr_array_add(sets, g_strdup(*s));
  g_ptr_array_add(sets, NULL);
  gboolean ok = ixt_daemon_start(d, "ixia-indexer", "indexer", dir, (const char *const *)sets->pdata);
  g_ptr_array_unref(sets);
  return ok;
}

double ixt_json_num(const cJSON *o, const char *path) {
  char **parts = g_strsplit(path, ".", -1);
  const cJSON *x = o;
  for (char **p = parts; *p && x; p++) x = cJSON_GetObjectItemCaseSensitive(x, *p);
  g_strfreev(parts);
  return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

/* ---------- per-key order of an at-least-once stream ---------- */

typedef struct {
  gint64 last;
  GHashTable *seen; /* gint64 * */
} order_key_t;

struct ixt_order {
  GHashTable *keys; /* GBytes -> order_key_t */
  guint violations;
};

static void order_key_free(gpointer p) {
  order_key_t *k = p;
  g_hash_table_destroy(k->seen);
  g_free(k);
}

ixt_order_t *ixt_order_new(void) {
  ixt_order_t *o = g_new0(ixt_order_t, 1);
  o->keys = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref,
                                  order_key_free);
  return o;
}

void ixt_order_destroy(ixt_order_t *o) {
  if (!o) return;
  g_hash_table_destroy(o->keys);
  g_free(o);
}

gboolean ixt_order_next(ixt_order_t *o, const void *key, gsize key_len, gint64 version) {
  GBytes *b = g_bytes_new(key, key_len);
  order_key_t *k = g_hash_table_lookup(o->keys, b);
  if (!k) {
    k = g_new0(order_key_t, 1);
    k->last = G_MININT64;
    k->seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    g_hash_table_insert(o->keys, g_bytes_ref(b), k);
  }
  g_bytes_unref(b);
  gboolean ok = version >= k->last || g_hash_table_contains(k->seen, &version);
  if (!ok) o->violations++;
  k->last = MAX(k->last, version);
  gint64 *v = g_new(gint64, 1);
  *v = version;
  g_hash_table_add(k->seen, v);
  return ok;
}

guint ixt_order_violations(const ixt_order_t *o) { return o->violations; }

gboolean ixt_order_seen(const ixt_order_t *o, const void *key, gsize key_len, gint64 version) {
  GBytes *b = g_bytes_new(key, key_len);
  order_key_t *k = g_hash_table_lookup(o->keys, b);
  g_bytes_unref(b);
  return k && g_hash_table_contains(k->seen, &version);
}
