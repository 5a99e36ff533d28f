/* ixia-local (local.h): the whole stack on one machine, in one directory.
 *
 * Each daemon is started detached with its log in DIR/logs and recorded in
 * DIR/pids with its start time (cli/proc.c), so `down`, `status` and
 * `restart NAME` act on exactly the processes this tool started, even after
 * pids were reused. Ports are chosen free and written to DIR/local.env for
 * the CLI and scripts. memcached is started here with the item size the
 * product needs for its largest documents. */
#include "local.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "cache.h"
#include "client.h"
#include "config.h"
#include "error.h"
#include "proc.h"

#define LOCAL_POLL_US (50 * 1000)
#define LOCAL_RUN_POLL_US (200 * 1000)
#define LOCAL_STOP_GRACE_MS 10000
#define LOCAL_PROBE_TIMEOUT_MS 1000
#define LOCAL_LOG_TAIL_LINES 15

/* Set by SIGINT/SIGTERM/SIGHUP; start-up and `run` poll it. */
static volatile sig_atomic_t local_interrupted = 0;

typedef struct {
  char *name;
  pid_t pid;
  guint64 start_time;
} local_proc_t;

typedef struct local local_t;

/* One daemon of the stack. Entries of local_services[] start in order, and
 * stop in reverse order. */
typedef struct {
  const char *name; /* pid file entry and logs/NAME.log */
  const char *env_key; /* its address in local.env */
  int attempts;     /* > 1 where a free port chosen by us may be taken meanwhile */
  /* Appends the command line (argv[0] an absolute path) for one attempt. */
  gboolean (*command)(local_t *l, GPtrArray *argv, ixia_error_t **err);
  /* TRUE once the daemon answers; otherwise sets l->probe_msg to why not. */
  gboolean (*probe)(local_t *l);
  /* Records the address of a daemon that answered (l->addrs, l->env). */
  void (*ready)(local_t *l);
} local_service_t;

struct local {
  const ixia_local_opts_t *o;
  char *dir; /* absolute */
  char *logs;
  char *pids_path;
  char *env_path;
  char *lock_path;
  int lock_fd;
  GArray *procs;      /* local_proc_t in start order */
  GHashTable *addrs;  /* service name → "127.0.0.1:PORT", for the services after it */
  GString *env;       /* contents of local.env */
  int port;           /* port of the service being started */
  int want_port;      /* restart: the port it had (0: any) */
  char *probe_msg;    /* why the last probe failed, for the time-out message */
};

/* ---- the services ------------------------------------------------------ */

static void local_set_probe_msg(local_t *l, char *msg) {
  g_free(l->probe_msg);
  l->probe_msg = msg;
}

static char *local_find_memcached(void) {
  char *path = g_find_program_in_path("memcached");
  if (path) return path;
  static const char *const fallback[] = {"/usr/bin/memcached", "/usr/sbin/memcached",
                                         "/usr/local/bin/memcached"};
  for (guint i = 0; i < G_N_ELEMENTS(fallback); i++)
    if (g_file_test(fallback[i], G_FILE_TEST_IS_EXECUTABLE)) return g_strdup(fallback[i]);
  return NULL;
}

static gboolean local_memcached_command(local_t *l, GPtrArray *argv, ixia_error_t **err) {
  char *bin = local_find_memcached();
  if (!bin)
    return ixia_error_set(err, IXIA_ENOTFOUND,
                          "memcached not found in PATH or /usr/bin; install it "
                          "(scripts/install-deps.sh)");
  l->port = l->want_port ? l->want_port : ixia_proc_free_port(err);
  if (l->port < 0) {
    g_free(bin);
    return FALSE;
  }
  g_ptr_array_add(argv, bin);
  for (const char *const *f = ixia_cache_memcached_flags(); *f; f++) g_ptr_array_add(argv, g_strdup(*f));
  g_ptr_array_add(argv, g_strdup("-p"));
  g_ptr_array_add(argv, g_strdup_printf("%d", l->port));
  g_ptr_array_add(argv, g_strdup("-m"));
  g_ptr_array_add(argv, g_strdup("256"));
  if (geteuid() == 0) {
    /* memcached refuses to run as root without -u; drop to nobody where
     * that user exists. */
    g_ptr_array_add(argv, g_strdup("-u"));
    g_ptr_array_add(argv, g_strdup(getpwnam("nobody") ? "nobody" : "root"));
  }
  return TRUE;
}

static gboolean local_memcached_probe(local_t *l) {
  ixia_error_t *err = NULL;
  char *reply =
      ixia_proc_tcp_request("127.0.0.1", l->port, "version\r\n", LOCAL_PROBE_TIMEOUT_MS, &err);
  if (!reply) {
    local_set_probe_msg(l, g_strdup(err->message));
    ixia_error_destroy(err);
    return FALSE;
  }
  gboolean ok = g_str_has_prefix(reply, "VERSION ");
  if (!ok) local_set_probe_msg(l, g_strdup_printf("unexpected reply to 'version': %s", reply));
  g_free(reply);
  return ok;
}

static void local_memcached_ready(local_t *l) {
  char *addr = g_strdup_printf("127.0.0.1:%d", l->port);
  g_string_append_printf(l->env, "IXIA_MEMCACHED=%s\n", addr);
  g_hash_table_insert(l->addrs, g_strdup("memcached"), addr);
}

/* Files the daemons write in DIR once they serve. */
#define LOCAL_API_PORT_FILE "api.port"
#define LOCAL_SINK_PORT_FILE "sink.port"
#define LOCAL_INDEXER_PORT_FILE "indexer.port"
#define LOCAL_KAFKA_BOOTSTRAP_FILE "kafka.bootstrap"
#define LOCAL_KAFKA_CONTROL_FILE "kafka.control"

static char *local_state_path(local_t *l, const char *file) {
  return g_build_filename(l->dir, file, NULL);
}

/* A file left by an earlier run would send the probe to a dead address; the
 * daemon writes a fresh one once it serves. */
static char *local_fresh_state_path(local_t *l, const char *file) {
  char *path = local_state_path(l, file);
  unlink(path);
  return path;
}

/* The absolute path of an ixia daemon in bin_dir; a clear error when it has
 * not been built (never skip a service silently: the stack would be
 * missing a part). */
static char *local_ixia_bin(local_t *l, const char *name, ixia_error_t **err) {
  char *bin = g_build_filename(l->o->bin_dir, name, NULL);
  if (g_file_test(bin, G_FILE_TEST_IS_EXECUTABLE)) return bin;
  ixia_error_set(err, IXIA_ENOTFOUND, "%s not found; build it first (make build)", bin);
  g_free(bin);
  return NULL;
}

/* The options every ixia daemon gets: the user's config file and --set
 * overrides first, then ours, so that the ones ixia-local relies on (ports,
 * paths) win. */
static void local_ixia_common_args(local_t *l, GPtrArray *argv) {
  /* API keys are off locally unless the user's config or --set turns them
   * on (then the stack's service key is DIR/service.key). */
  gboolean user_auth = FALSE;
  for (char **s = l->o->sets; s && *s; s++) user_auth |= g_str_has_prefix(*s, "auth.enabled=");
  if (l->o->config_file) {
    GKeyFile *kf = g_key_file_new();
    user_auth |= g_key_file_load_from_file(kf, l->o->config_file, G_KEY_FILE_NONE, NULL) &&
                 g_key_file_has_key(kf, "auth", "enabled", NULL);
    g_key_file_free(kf);
  }
  if (!user_auth) {
    g_ptr_array_add(argv, g_strdup("--set"));
    g_ptr_array_add(argv, g_strdup("auth.enabled=false"));
  }
  if (l->o->config_file) {
    g_ptr_array_add(argv, g_strdup("--config"));
    g_ptr_array_add(argv, g_strdup(l->o->config_file));
  }
  for (char **s = l->o->sets; s && *s; s++) {
    g_ptr_array_add(argv, g_strdup("--set"));
    g_ptr_array_add(argv, g_strdup(*s));
  }
  char *svc = g_build_filename(l->dir, "service.key", NULL);
  ixia_auth_ensure_service_key(svc, NULL, NULL);
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup_printf("auth.service_key_file=%s", svc));
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup_printf("auth.keys_file=%s/keys.json", l->dir));
  if (user_auth) {
    /* Our own probes (the API's stats) authenticate with it too. */
    char *key = NULL;
    if (g_file_get_contents(svc, &key, NULL, NULL)) ixia_auth_set_client_key(g_strstrip(key));
    g_free(key);
  }
  g_free(svc);
}

/* Every daemon's HTTP port (/metrics, /healthz, /readyz): a free one,
 * written to DIR/FILE. */
static void local_http_args(local_t *l, GPtrArray *argv, const char *option, const char *file) {
  char *path = local_fresh_state_path(l, file);
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup("http.host=127.0.0.1"));
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup_printf("%s=0", option));
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, g_strdup_printf("%s_file=%s", option, path));
  g_free(path);
}

/* VAR=http://127.0.0.1:PORT in local.env, from DIR/FILE. */
static void local_http_env(local_t *l, const char *var, const char *file) {
  char *path = local_state_path(l, file);
  char *text = NULL;
  if (g_file_get_contents(path, &text, NULL, NULL) && *g_strstrip(text))
    g_string_append_printf(l->env, "%s=http://127.0.0.1:%s\n", var, text);
  g_free(text);
  g_free(path);
}

static void local_add_set(GPtrArray *argv, char *assignment) {
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, assignment);
}

/* Reads the trimmed, non-empty contents of DIR/file; NULL (with
 * l->probe_msg set) while it is not written. */
static char *local_read_state(local_t *l, const char *file) {
  char *path = local_state_path(l, file);
  char *text = NULL;
  gboolean have = g_file_get_contents(path, &text, NULL, NULL);
  g_free(path);
  if (have && *g_strstrip(text)) return text;
  g_free(text);
  local_set_probe_msg(l, g_strdup_printf("%s not written yet", file));
  return NULL;
}

/* The port in DIR/file, or 0 (with l->probe_msg set). */
static int local_read_port(local_t *l, const char *file) {
  char *text = local_read_state(l, file);
  if (!text) return 0;
  guint64 port = 0;
  if (!g_ascii_string_to_unsigned(text, 10, 1, 65535, &port, NULL)) {
    local_set_probe_msg(l, g_strdup_printf("%s holds '%s', not a port", file, text));
    port = 0;
  }
  g_free(text);
  return (int)port;
}

/* TRUE when something accepts TCP connections on 127.0.0.1:port. A
 * loopback connect completes or is refused at once, so it need not be
 * bounded by a time-out. */
static gboolean local_tcp_connects(local_t *l, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  gboolean ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (!ok)
    local_set_probe_msg(l, g_strdup_printf("connect to 127.0.0.1:%d: %s", port, g_strerror(errno)));
  if (fd >= 0) close(fd);
  return ok;
}

/* ixia-devkafka: the in-memory Kafka of local runs. */

static gboolean local_devkafka_command(local_t *l, GPtrArray *argv, ixia_error_t **err) {
  char *bin = local_ixia_bin(l, "ixia-devkafka", err);
  if (!bin) return FALSE;
  char *bootstrap = local_fresh_state_path(l, LOCAL_KAFKA_BOOTSTRAP_FILE);
  char *control = local_fresh_state_path(l, LOCAL_KAFKA_CONTROL_FILE);
  g_ptr_array_add(argv, bin);
  local_ixia_common_args(l, argv);
  local_add_set(argv, g_strdup_printf("devkafka.bootstrap_file=%s", bootstrap));
  local_add_set(argv, g_strdup_printf("devkafka.control_port_file=%s", control));
  g_free(bootstrap);
  g_free(control);
  return TRUE;
}

/* Ready when the bootstrap file exists (written after the control port
 * file) and the control port answers ping. */
static gboolean local_devkafka_probe(local_t *l) {
  char *bootstrap = local_read_state(l, LOCAL_KAFKA_BOOTSTRAP_FILE);
  if (!bootstrap) return FALSE;
  g_free(bootstrap);
  l->port = local_read_port(l, LOCAL_KAFKA_CONTROL_FILE);
  if (!l->port) return FALSE;
  ixia_error_t *err = NULL;
  char *reply =
      ixia_proc_tcp_request("127.0.0.1", l->port, "ping\n", LOCAL_PROBE_TIMEOUT_MS, &err);
  if (!reply) {
    local_set_probe_msg(l, g_strdup_printf("control port: %s", err->message));
    ixia_error_destroy(err);
    return FALSE;
  }
  gboolean ok = strcmp(reply, "ok pong") == 0;
  if (!ok) local_set_probe_msg(l, g_strdup_printf("unexpected reply to 'ping': %s", reply));
  g_free(reply);
  return ok;
}

/* Says how much ixia-devkafka keeps: a shard further behind than that
 * loses events (and repairs itself from the truth store). Measured: an
 * event of a ~950-byte document takes about 1,040 bytes of the budget. */
#define LOCAL_BYTES_PER_EVENT 1040
static void local_devkafka_backlog(local_t *l) {
  ixia_error_t *err = NULL;
  char *reply = ixia_proc_tcp_request("127.0.0.1", l->port, "backlog\n", LOCAL_PROBE_TIMEOUT_MS, &err);
  guint64 per = 0, batches = 0;
  int parts = 0;
  char builtin[16] = "";
  if (reply && (sscanf(reply, "ok budget %" G_GUINT64_FORMAT " partitions %d batches %" G_GUINT64_FORMAT,
                       &per, &parts, &batches) == 3 ||
                sscanf(reply, "ok budget %" G_GUINT64_FORMAT " %15s partitions %d batches %" G_GUINT64_FORMAT,
                       &per, builtin, &parts, &batches) == 4))
    fprintf(stderr,
            "ixia-local: ixia-devkafka keeps up to %" G_GUINT64_FORMAT " MiB of events in memory "
            "in up to %" G_GUINT64_FORMAT " record batches (%d partitions x %" G_GUINT64_FORMAT
            " MiB and %" G_GUINT64_FORMAT " batches%s): a bulk load of about %" G_GUINT64_FORMAT
            " writes of 1 KiB documents, or that many batches of sparse writes; an indexer further "
            "behind loses events and repairs itself from the truth store\n",
            per * (guint64)parts >> 20, batches * (guint64)parts, parts, per >> 20, batches,
            *builtin ? ", librdkafka's built-in limits" : ", devkafka.memory_mb and devkafka.max_batches",
            per * (guint64)parts / LOCAL_BYTES_PER_EVENT);
  else
    fprintf(stderr, "ixia-local: cannot read ixia-devkafka's backlog: %s\n", reply ? reply : err->message);
  g_free(reply);
  ixia_error_destroy(err);
}

static void local_devkafka_ready(local_t *l) {
  local_devkafka_backlog(l);
  /* The probe just read it; only a concurrent rm could take it away. */
  char *bootstrap = local_read_state(l, LOCAL_KAFKA_BOOTSTRAP_FILE);
  if (!bootstrap) bootstrap = g_strdup("");
  g_string_append_printf(l->env, "IXIA_KAFKA=%s\nIXIA_KAFKA_CONTROL=127.0.0.1:%d\n", bootstrap,
                         l->port);
  g_hash_table_insert(l->addrs, g_strdup("ixia-devkafka"), bootstrap);
}

/* ixia-replication-sink: publishes the query API's WAL edits to Kafka. */

static gboolean local_sink_command(local_t *l, GPtrArray *argv, ixia_error_t **err) {
  char *bin = local_ixia_bin(l, "ixia-replication-sink", err);
  if (!bin) return FALSE;
  char *port_file = local_fresh_state_path(l, LOCAL_SINK_PORT_FILE);
  g_ptr_array_add(argv, bin);
  local_ixia_common_args(l, argv);
  local_add_set(argv, g_strdup("sink.host=127.0.0.1"));
  local_add_set(argv, g_strdup_printf("sink.port=%d", l->want_port));
  local_add_set(argv, g_strdup_printf("sink.port_file=%s", port_file));
  local_http_args(l, argv, "sink.http_port", "sink.http_port");
  local_add_set(argv, g_strdup_printf("kafka.brokers=%s",
                                      (char *)g_hash_table_lookup(l->addrs, "ixia-devkafka")));
  g_free(port_file);
  return TRUE;
}

static gboolean local_sink_probe(local_t *l) {
  l->port = local_read_port(l, LOCAL_SINK_PORT_FILE);
  return l->port && local_tcp_connects(l, l->port);
}

static void local_sink_ready(local_t *l) {
  char *addr = g_strdup_printf("127.0.0.1:%d", l->port);
  g_string_append_printf(l->env, "IXIA_SINK=%s\n", addr);
  local_http_env(l, "IXIA_SINK_HTTP", "sink.http_port");
  g_hash_table_insert(l->addrs, g_strdup("ixia-replication-sink"), addr);
}

/* The indexer's Unix-domain socket (indexer.socket), DIR/indexer.sock, over
 * which the API calls it: each query skips the TCP/IP stack on both sides.
 * NULL (then TCP) when DIR is too long for a socket path, or holds what
 * query.indexers cannot carry (its list is split at commas and trimmed). */
static char *local_indexer_socket(local_t *l) {
  char *path = local_state_path(l, "indexer.sock");
  char *addr = g_strconcat(IXIA_UNIX_PREFIX, path, NULL);
  gboolean ok = ixia_address_check(addr, "indexer.socket", NULL) && !strchr(path, ',') &&
                !g_ascii_isspace(path[0]) && !g_ascii_isspace(path[strlen(path) - 1]);
  g_free(addr);
  if (ok) return path;
  g_free(path);
  return NULL;
}

/* ixia-indexer: one shard over every partition, its index in DIR/index
 * (failed updates beside it, in DIR/index.failed-updates.jsonl). */

static gboolean local_indexer_command(local_t *l, GPtrArray *argv, ixia_error_t **err) {
  char *bin = local_ixia_bin(l, "ixia-indexer", err);
  if (!bin) return FALSE;
  char *port_file = local_fresh_state_path(l, LOCAL_INDEXER_PORT_FILE);
  char *index = g_build_filename(l->dir, "index", NULL);
  g_ptr_array_add(argv, bin);
  local_ixia_common_args(l, argv);
  local_add_set(argv, g_strdup("indexer.host=127.0.0.1"));
  local_add_set(argv, g_strdup_printf("indexer.port=%d", l->want_port));
  local_add_set(argv, g_strdup_printf("indexer.port_file=%s", port_file));
  char *sock = local_indexer_socket(l);
  local_add_set(argv, g_strdup_printf("indexer.socket=%s", sock ? sock : ""));
  g_free(sock);
  local_http_args(l, argv, "indexer.http_port", "indexer.http_port");
  local_add_set(argv, g_strdup("indexer.partitions="));
  local_add_set(argv, g_strdup_printf("index.path=%s", index));
  /* Self-healing reads from the API, which starts after the indexer: the
   * indexer reads its port from the file the API writes. */
  char *api_port = local_state_path(l, LOCAL_API_PORT_FILE);
  local_add_set(argv, g_strdup_printf("indexer.api_port_file=%s", api_port));
  g_free(api_port);
  local_add_set(argv, g_strdup_printf("kafka.brokers=%s",
                                      (char *)g_hash_table_lookup(l->addrs, "ixia-devkafka")));
  local_add_set(argv, g_strdup_printf("cache.servers=%s",
                                      (char *)g_hash_table_lookup(l->addrs, "memcached")));
  g_free(index);
  g_free(port_file);
  return TRUE;
}

/* The port file is written once the indexer has its partitions and serves. */
static gboolean local_indexer_probe(local_t *l) {
  l->port = local_read_port(l, LOCAL_INDEXER_PORT_FILE);
  return l->port && local_tcp_connects(l, l->port);
}

static void local_indexer_ready(local_t *l) {
  char *addr = g_strdup_printf("127.0.0.1:%d", l->port);
  g_string_append_printf(l->env, "IXIA_INDEXER=%s\n", addr);
  local_http_env(l, "IXIA_INDEXER_HTTP", "indexer.http_port");
  g_hash_table_insert(l->addrs, g_strdup("ixia-indexer"), addr);
}

/* ixia-query-api: the API; ships its WAL to the sink, queries the indexer. */

static gboolean local_query_api_command(local_t *l, GPtrArray *argv, ixia_error_t **err) {
  char *bin = local_ixia_bin(l, "ixia-query-api", err);
  if (!bin) return FALSE;
  char *port_file = local_fresh_state_path(l, LOCAL_API_PORT_FILE);
  char *store = g_build_filename(l->dir, "store", NULL);
  g_ptr_array_add(argv, bin);
  local_ixia_common_args(l, argv);
  local_add_set(argv, g_strdup("api.host=127.0.0.1"));
  local_add_set(argv, g_strdup_printf("api.port=%d", l->want_port));
  local_add_set(argv, g_strdup_printf("api.port_file=%s", port_file));
  local_http_args(l, argv, "http.port", "http.port");
  local_add_set(argv, g_strdup_printf("store.path=%s", store));
  local_add_set(argv, g_strdup_printf("cache.servers=%s",
                                      (char *)g_hash_table_lookup(l->addrs, "memcached")));
  local_add_set(argv, g_strdup_printf("replication.sinks=%s",
                                      (char *)g_hash_table_lookup(l->addrs,
                                                                  "ixia-replication-sink")));
  char *sock = local_indexer_socket(l);
  if (sock) local_add_set(argv, g_strdup_printf("query.indexers=" IXIA_UNIX_PREFIX "%s", sock));
  else local_add_set(argv, g_strdup_printf("query.indexers=%s",
                                           (char *)g_hash_table_lookup(l->addrs, "ixia-indexer")));
  g_free(sock);
  g_free(store);
  g_free(port_file);
  return TRUE;
}

static gboolean local_query_api_probe(local_t *l) {
  l->port = local_read_port(l, LOCAL_API_PORT_FILE);
  if (!l->port) return FALSE;
  char *addr = g_strdup_printf("127.0.0.1:%d", l->port);
  ixia_error_t *err = NULL;
  ixia_client_t *c = ixia_client_new(addr, &err);
  char *stats = NULL;
  gboolean ok = c && ixia_client_stats(c, &stats, &err);
  ixia_client_destroy(c);
  g_free(stats);
  g_free(addr);
  if (!ok) {
    local_set_probe_msg(l, g_strdup_printf("stats call failed: %s", err->message));
    ixia_error_destroy(err);
  }
  return ok;
}

static void local_query_api_ready(local_t *l) {
  char *addr = g_strdup_printf("127.0.0.1:%d", l->port);
  g_string_append_printf(l->env, "IXIA_API=%s\n", addr);
  local_http_env(l, "IXIA_HTTP", "http.port");
  g_hash_table_insert(l->addrs, g_strdup("ixia-query-api"), addr);
}

/* Start order: a service may use the addresses of those before it (the
 * sink and the indexer need Kafka, the API needs the cache, the sink and the
 * indexer). */
static const local_service_t local_services[] = {
    {"memcached", "IXIA_MEMCACHED", 3, local_memcached_command, local_memcached_probe, local_memcached_ready},
    {"ixia-devkafka", "IXIA_KAFKA", 1, local_devkafka_command, local_devkafka_probe, local_devkafka_ready},
    {"ixia-replication-sink", "IXIA_SINK", 1, local_sink_command, local_sink_probe, local_sink_ready},
    {"ixia-indexer", "IXIA_INDEXER", 1, local_indexer_command, local_indexer_probe, local_indexer_ready},
    {"ixia-query-api", "IXIA_API", 1, local_query_api_command, local_query_api_probe, local_query_api_ready},
};

/* ---- state, pid file, lock --------------------------------------------- */

static void local_proc_clear(gpointer p) { g_free(((local_proc_t *)p)->name); }

static local_t *local_new(const ixia_local_opts_t *o) {
  local_t *l = g_new0(local_t, 1);
  l->o = o;
  l->dir = g_canonicalize_filename(o->dir, NULL);
  l->logs = g_build_filename(l->dir, "logs", NULL);
  l->pids_path = g_build_filename(l->dir, "pids", NULL);
  l->env_path = g_build_filename(l->dir, "local.env", NULL);
  l->lock_path = g_build_filename(l->dir, ".ixia-local.lock", NULL);
  l->lock_fd = -1;
  l->procs = g_array_new(FALSE, TRUE, sizeof(local_proc_t));
  g_array_set_clear_func(l->procs, local_proc_clear);
  l->addrs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  l->env = g_string_new(NULL);
  return l;
}

static void local_free(local_t *l) {
  if (l->lock_fd >= 0) close(l->lock_fd);
  g_free(l->dir);
  g_free(l->logs);
  g_free(l->pids_path);
  g_free(l->env_path);
  g_free(l->lock_path);
  g_array_unref(l->procs);
  g_hash_table_unref(l->addrs);
  g_string_free(l->env, TRUE);
  g_free(l->probe_msg);
  g_free(l);
}

/* Serializes ixia-local invocations on one directory (two `up`s racing
 * would each start a stack). The kernel drops the lock if we die. */
static gboolean local_lock(local_t *l, gboolean wait, ixia_error_t **err) {
  if (g_mkdir_with_parents(l->logs, 0755) != 0)
    return ixia_error_set(err, IXIA_EINTERNAL, "cannot create %s: %s", l->logs,
                          g_strerror(errno));
  l->lock_fd = open(l->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (l->lock_fd < 0)
    return ixia_error_set(err, IXIA_EINTERNAL, "cannot open %s: %s", l->lock_path,
                          g_strerror(errno));
  int rc;
  do {
    rc = flock(l->lock_fd, LOCK_EX | (wait ? 0 : LOCK_NB));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0)
    return ixia_error_set(err, IXIA_ECONFLICT,
                          errno == EWOULDBLOCK ? "another ixia-local is working on %s right now"
                                               : "cannot lock %s",
                          l->dir);
  return TRUE;
}

static void local_unlock(local_t *l) {
  if (l->lock_fd >= 0) close(l->lock_fd);
  l->lock_fd = -1;
}

static gboolean local_write_pids(local_t *l, ixia_error_t **err) {
  GString *s =
      g_string_new("# written by ixia-local: NAME PID STARTTIME (field 22 of /proc/PID/stat)\n");
  for (guint i = 0; i < l->procs->len; i++) {
    local_proc_t *p = &g_array_index(l->procs, local_proc_t, i);
    g_string_append_printf(s, "%s %d %" G_GUINT64_FORMAT "\n", p->name, (int)p->pid,
                           p->start_time);
  }
  GError *gerr = NULL;
  gboolean ok = g_file_set_contents(l->pids_path, s->str, (gssize)s->len, &gerr);
  g_string_free(s, TRUE);
  return ok || ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, l->pids_path);
}

/* Reads DIR/pids into l->procs. *exists tells whether there was a file. */
static gboolean local_read_pids(local_t *l, gboolean *exists, ixia_error_t **err) {
  char *text = NULL;
  GError *gerr = NULL;
  *exists = FALSE;
  if (!g_file_get_contents(l->pids_path, &text, NULL, &gerr)) {
    if (g_error_matches(gerr, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
      g_error_free(gerr);
      return TRUE;
    }
    return ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, l->pids_path);
  }
  *exists = TRUE;
  char **lines = g_strsplit(text, "\n", -1);
  g_free(text);
  for (guint n = 0; lines[n]; n++) {
    char *line = g_strstrip(lines[n]);
    if (!*line || *line == '#') continue;
    char **f = g_strsplit_set(line, " \t", -1);
    guint64 pid = 0, start = 0;
    if (g_strv_length(f) == 3 && g_ascii_string_to_unsigned(f[1], 10, 1, G_MAXINT, &pid, NULL) &&
        g_ascii_string_to_unsigned(f[2], 10, 0, G_MAXUINT64, &start, NULL)) {
      local_proc_t p = {g_strdup(f[0]), (pid_t)pid, start};
      g_array_append_val(l->procs, p);
    } else {
      fprintf(stderr, "ixia-local: %s line %u is malformed, ignored: %s\n", l->pids_path, n + 1,
              line);
    }
    g_strfreev(f);
  }
  g_strfreev(lines);
  return TRUE;
}

static char *local_log_path(local_t *l, const char *name) {
  char *file = g_strdup_printf("%s.log", name);
  char *path = g_build_filename(l->logs, file, NULL);
  g_free(file);
  return path;
}

/* The last lines this run wrote to a log (after our header), indented, to
 * put next to a start-up failure. */
static char *local_log_tail(const char *log_path) {
  char *text = NULL;
  if (!g_file_get_contents(log_path, &text, NULL, NULL)) return g_strdup("");
  const char *from = text;
  for (const char *p = text; (p = strstr(p, "---- ixia-local ")) != NULL; p++) from = p;
  char **lines = g_strsplit(from, "\n", -1);
  guint n = g_strv_length(lines);
  while (n > 0 && !*lines[n - 1]) n--;
  GString *s = g_string_new(NULL);
  for (guint i = n > LOCAL_LOG_TAIL_LINES ? n - LOCAL_LOG_TAIL_LINES : 0; i < n; i++)
    g_string_append_printf(s, "\n    %s", lines[i]);
  g_strfreev(lines);
  g_free(text);
  return g_string_free(s, FALSE);
}

/* ---- start and stop ----------------------------------------------------- */

static void local_forget(local_t *l, pid_t pid) {
  for (guint i = 0; i < l->procs->len; i++)
    if (g_array_index(l->procs, local_proc_t, i).pid == pid) {
      g_array_remove_index(l->procs, i);
      break;
    }
}

typedef enum { LOCAL_READY, LOCAL_EXITED, LOCAL_TIMEOUT, LOCAL_INTERRUPTED } local_wait_t;

static local_wait_t local_wait_ready(local_t *l, const local_service_t *svc, pid_t pid,
                                     int *status) {
  gint64 deadline = g_get_monotonic_time() + (gint64)l->o->timeout_s * G_TIME_SPAN_SECOND;
  for (;;) {
    if (ixia_proc_reap(pid, status)) return LOCAL_EXITED;
    if (svc->probe(l)) return LOCAL_READY;
    if (local_interrupted) return LOCAL_INTERRUPTED;
    if (g_get_monotonic_time() >= deadline) return LOCAL_TIMEOUT;
    g_usleep(LOCAL_POLL_US);
  }
}

static gboolean local_start(local_t *l, const local_service_t *svc, ixia_error_t **err) {
  char *log = local_log_path(l, svc->name);
  gboolean ok = FALSE;
  for (int attempt = 1; attempt <= svc->attempts; attempt++) {
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    if (!svc->command(l, argv, err)) {
      g_ptr_array_unref(argv);
      break;
    }
    g_ptr_array_add(argv, NULL);
    pid_t pid = 0;
    gboolean spawned =
        ixia_proc_spawn_detached((char **)argv->pdata, l->dir, log, &pid, err);
    g_ptr_array_unref(argv);
    if (!spawned) break;
    /* Recorded before waiting, so that `down` can clean up even if this
     * ixia-local dies during the wait. */
    local_proc_t p = {g_strdup(svc->name), pid, ixia_proc_start_time(pid)};
    g_array_append_val(l->procs, p);
    if (!local_write_pids(l, err)) break;

    int status = 0;
    local_wait_t w = local_wait_ready(l, svc, pid, &status);
    if (w == LOCAL_READY) {
      svc->ready(l);
      fprintf(stderr, "ixia-local: %s is up (pid %d, %s)\n", svc->name, (int)pid,
              (char *)g_hash_table_lookup(l->addrs, svc->name));
      ok = TRUE;
      break;
    }
    if (w == LOCAL_EXITED) {
      local_forget(l, pid);
      local_write_pids(l, NULL);
      char *how = ixia_proc_describe_status(status);
      if (attempt < svc->attempts) {
        /* Most likely the free port was taken between our probe and its
         * bind: try another one. */
        fprintf(stderr, "ixia-local: %s %s during start-up; retrying (%d of %d)\n", svc->name,
                how, attempt + 1, svc->attempts);
        g_free(how);
        continue;
      }
      char *tail = local_log_tail(log);
      ixia_error_set(err, IXIA_EUNAVAILABLE, "%s %s during start-up; see %s%s", svc->name, how,
                     log, tail);
      g_free(tail);
      g_free(how);
      break;
    }
    /* Timed out or interrupted: it is ours and not serving, so stop it. */
    ixia_proc_stop(pid, p.start_time, LOCAL_STOP_GRACE_MS, NULL);
    local_forget(l, pid);
    local_write_pids(l, NULL);
    if (w == LOCAL_INTERRUPTED) {
      ixia_error_set(err, IXIA_EUNAVAILABLE, "interrupted while starting %s", svc->name);
    } else {
      char *tail = local_log_tail(log);
      ixia_error_set(err, IXIA_EUNAVAILABLE, "%s did not answer within %d s (%s); see %s%s",
                     svc->name, l->o->timeout_s, l->probe_msg ? l->probe_msg : "no answer", log,
                     tail);
      g_free(tail);
    }
    break;
  }
  g_free(log);
  return ok;
}

/* Stops every recorded process, last started first. Processes that could
 * not be stopped stay in l->procs; returns FALSE if there are any. */
static gboolean local_stop_all(local_t *l) {
  gboolean all = TRUE;
  for (guint i = l->procs->len; i-- > 0;) {
    local_proc_t *p = &g_array_index(l->procs, local_proc_t, i);
    ixia_error_t *err = NULL;
    switch (ixia_proc_stop(p->pid, p->start_time, LOCAL_STOP_GRACE_MS, &err)) {
      case IXIA_STOP_NOT_RUNNING:
        fprintf(stderr, "ixia-local: %s (pid %d) was not running\n", p->name, (int)p->pid);
        break;
      case IXIA_STOP_PID_REUSED:
        fprintf(stderr, "ixia-local: %s (pid %d) is gone; the pid now belongs to another "
                        "process, left alone\n", p->name, (int)p->pid);
        break;
      case IXIA_STOP_TERMINATED:
        fprintf(stderr, "ixia-local: stopped %s (pid %d)\n", p->name, (int)p->pid);
        break;
      case IXIA_STOP_KILLED:
        fprintf(stderr, "ixia-local: %s (pid %d) ignored SIGTERM for %d s; killed it\n", p->name,
                (int)p->pid, LOCAL_STOP_GRACE_MS / 1000);
        break;
      case IXIA_STOP_FAILED:
        fprintf(stderr, "ixia-local: cannot stop %s: %s\n", p->name, err->message);
        ixia_error_destroy(err);
        all = FALSE;
        continue; /* keep it recorded */
    }
    g_array_remove_index(l->procs, i);
  }
  return all;
}

/* After a complete stop, nothing in DIR should suggest a running stack. */
static void local_remove_state(local_t *l) {
  unlink(l->pids_path);
  unlink(l->env_path);
  static const char *const files[] = {LOCAL_API_PORT_FILE, LOCAL_SINK_PORT_FILE,
                                      LOCAL_INDEXER_PORT_FILE, LOCAL_KAFKA_BOOTSTRAP_FILE,
                                      LOCAL_KAFKA_CONTROL_FILE};
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    char *path = local_state_path(l, files[i]);
    unlink(path);
    g_free(path);
  }
}

/* ---- commands ------------------------------------------------------------ */

static int local_report(const char *fmt, ixia_error_t *err) {
  fprintf(stderr, fmt, err->message);
  ixia_error_destroy(err);
  return 1;
}

/* `up` with the lock held. */
static int local_up_locked(local_t *l) {
  ixia_error_t *err = NULL;
  gboolean exists = FALSE;
  if (!local_read_pids(l, &exists, &err)) return local_report("ixia-local: %s\n", err);
  GString *alive = g_string_new(NULL);
  for (guint i = 0; i < l->procs->len; i++) {
    local_proc_t *p = &g_array_index(l->procs, local_proc_t, i);
    if (ixia_proc_matches(p->pid, p->start_time))
      g_string_append_printf(alive, "%s%s (pid %d)", alive->len ? ", " : "", p->name, (int)p->pid);
  }
  if (alive->len) {
    fprintf(stderr,
            "ixia-local: %s already has a running stack: %s.\n"
            "Use it (set -a; . %s) or stop it first: ixia-local down --dir %s\n",
            l->dir, alive->str, l->env_path, l->o->dir);
    g_string_free(alive, TRUE);
    return 1;
  }
  g_string_free(alive, TRUE);
  if (exists) fprintf(stderr, "ixia-local: %s: none of its processes is running; replacing it\n",
                      l->pids_path);
  g_array_set_size(l->procs, 0);
  local_remove_state(l);

  for (guint i = 0; i < G_N_ELEMENTS(local_services); i++) {
    if (!local_start(l, &local_services[i], &err)) {
      fprintf(stderr, "ixia-local: %s\n", err->message);
      ixia_error_destroy(err);
      if (l->procs->len) fprintf(stderr, "ixia-local: stopping what was started\n");
      if (local_stop_all(l)) local_remove_state(l);
      return 1;
    }
  }
  GError *gerr = NULL;
  if (!g_file_set_contents(l->env_path, l->env->str, (gssize)l->env->len, &gerr)) {
    ixia_error_from_gerror(&err, gerr, IXIA_EINTERNAL, l->env_path);
    fprintf(stderr, "ixia-local: %s\n", err->message);
    ixia_error_destroy(err);
    if (local_stop_all(l)) local_remove_state(l);
    return 1;
  }
  printf("# ixia stack up in %s (logs in %s); load with: set -a; . %s; set +a\n%s", l->dir,
         l->logs, l->env_path, l->env->str);
  fflush(stdout);
  return 0;
}

int ixia_local_up(const ixia_local_opts_t *o) {
  local_t *l = local_new(o);
  ixia_error_t *err = NULL;
  int rc =
      local_lock(l, FALSE, &err) ? local_up_locked(l) : local_report("ixia-local: %s\n", err);
  local_free(l);
  return rc;
}

static int local_down_locked(local_t *l) {
  ixia_error_t *err = NULL;
  gboolean exists = FALSE;
  if (!local_read_pids(l, &exists, &err)) return local_report("ixia-local: %s\n", err);
  if (!exists) {
    fprintf(stderr, "ixia-local: nothing recorded in %s; nothing to stop\n", l->pids_path);
    return 0;
  }
  if (local_stop_all(l)) {
    local_remove_state(l);
    return 0;
  }
  /* Keep the ones still alive recorded, for another try. */
  if (!local_write_pids(l, &err)) local_report("ixia-local: %s\n", err);
  return 1;
}

int ixia_local_down(const ixia_local_opts_t *o) {
  local_t *l = local_new(o);
  ixia_error_t *err = NULL;
  /* Waits for a concurrent up (bounded by its time-outs) rather than fail. */
  int rc =
      local_lock(l, TRUE, &err) ? local_down_locked(l) : local_report("ixia-local: %s\n", err);
  local_free(l);
  return rc;
}

int ixia_local_status(const ixia_local_opts_t *o) {
  local_t *l = local_new(o);
  ixia_error_t *err = NULL;
  gboolean exists = FALSE;
  int rc = 0;
  if (!local_read_pids(l, &exists, &err)) {
    rc = local_report("ixia-local: %s\n", err);
  } else if (!exists || l->procs->len == 0) {
    printf("no stack recorded in %s\n", l->dir);
    rc = 1;
  } else {
    for (guint i = 0; i < l->procs->len; i++) {
      local_proc_t *p = &g_array_index(l->procs, local_proc_t, i);
      gboolean up = ixia_proc_matches(p->pid, p->start_time);
      printf("%-24s %-12s pid %d\n", p->name, up ? "running" : "not running", (int)p->pid);
      if (!up) rc = 1;
    }
    char *env = NULL;
    if (rc == 0 && g_file_get_contents(l->env_path, &env, NULL, NULL)) fputs(env, stdout);
    g_free(env);
  }
  local_free(l);
  return rc;
}

/* ---- restart --------------------------------------------------------- */

static const local_service_t *local_service_named(const char *name) {
  for (guint i = 0; i < G_N_ELEMENTS(local_services); i++) {
    const char *n = local_services[i].name;
    if (strcmp(n, name) == 0 || (g_str_has_prefix(n, "ixia-") && strcmp(n + 5, name) == 0))
      return &local_services[i];
  }
  return NULL;
}

/* local.env as KEY -> VALUE, plus the keys in order. */
static GHashTable *local_read_env(local_t *l, GPtrArray *order) {
  GHashTable *env = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  char *text = NULL;
  if (g_file_get_contents(l->env_path, &text, NULL, NULL)) {
    char **lines = g_strsplit(text, "\n", -1);
    for (char **line = lines; *line; line++) {
      char *eq = strchr(*line, '=');
      if (!eq) continue;
      char *key = g_strndup(*line, (gsize)(eq - *line));
      if (!g_hash_table_contains(env, key)) g_ptr_array_add(order, g_strdup(key));
      g_hash_table_replace(env, key, g_strdup(eq + 1));
    }
    g_strfreev(lines);
  }
  g_free(text);
  return env;
}

static int local_port_of(const char *addr) {
  const char *colon = addr ? strrchr(addr, ':') : NULL;
  return colon ? atoi(colon + 1) : 0;
}

/* Restarts one recorded daemon on the port it had, keeping it in DIR/pids
 * (so status and down see it); ixia-devkafka picks new ports (the mock
 * cluster chooses them), so the sink and the indexer, which hold its
 * address, restart after it on their own ports. */
static int local_restart_locked(local_t *l, const char *name) {
  ixia_error_t *err = NULL;
  const local_service_t *svc = local_service_named(name);
  if (!svc) {
    fprintf(stderr, "ixia-local: unknown daemon '%s': expected memcached, ixia-devkafka, "
                    "ixia-replication-sink, ixia-indexer or ixia-query-api\n", name);
    return 2;
  }
  gboolean exists = FALSE;
  if (!local_read_pids(l, &exists, &err)) return local_report("ixia-local: %s\n", err);
  if (!exists) {
    fprintf(stderr, "ixia-local: nothing recorded in %s; start the stack with up or run\n", l->pids_path);
    return 1;
  }
  GPtrArray *order = g_ptr_array_new_with_free_func(g_free);
  GHashTable *env = local_read_env(l, order);
  for (guint i = 0; i < G_N_ELEMENTS(local_services); i++) {
    const char *addr = g_hash_table_lookup(env, local_services[i].env_key);
    if (addr) g_hash_table_insert(l->addrs, g_strdup(local_services[i].name), g_strdup(addr));
  }
  /* What restarts, in start order. */
  GPtrArray *todo = g_ptr_array_new();
  gboolean kafka = strcmp(svc->name, "ixia-devkafka") == 0;
  for (guint i = 0; i < G_N_ELEMENTS(local_services); i++) {
    const local_service_t *s = &local_services[i];
    if (s == svc || (kafka && (!strcmp(s->name, "ixia-replication-sink") || !strcmp(s->name, "ixia-indexer"))))
      g_ptr_array_add(todo, (gpointer)s);
  }
  int rc = 0;
  /* Stop them, last started first; remember where each was recorded. */
  for (guint i = todo->len; i-- > 0;) {
    const local_service_t *s = g_ptr_array_index(todo, i);
    for (guint k = 0; k < l->procs->len; k++) {
      local_proc_t *p = &g_array_index(l->procs, local_proc_t, k);
      if (strcmp(p->name, s->name) != 0) continue;
      if (ixia_proc_stop(p->pid, p->start_time, LOCAL_STOP_GRACE_MS, &err) == IXIA_STOP_FAILED) {
        rc = local_report("ixia-local: %s\n", err);
        break;
      }
      fprintf(stderr, "ixia-local: stopped %s (pid %d)\n", p->name, (int)p->pid);
      p->pid = 0; /* its slot, to be filled by the new process */
    }
  }
  for (guint i = 0; rc == 0 && i < todo->len; i++) {
    const local_service_t *s = g_ptr_array_index(todo, i);
    l->want_port = strcmp(s->name, "ixia-devkafka") == 0
                       ? 0
                       : local_port_of(g_hash_table_lookup(l->addrs, s->name));
    g_string_truncate(l->env, 0);
    guint before = l->procs->len;
    if (!local_start(l, s, &err)) {
      rc = local_report("ixia-local: %s\n", err);
      break;
    }
    /* The new record takes the old one's place. */
    local_proc_t fresh = g_array_index(l->procs, local_proc_t, before);
    fresh.name = g_strdup(fresh.name); /* removing the entry frees its copy */
    g_array_remove_index(l->procs, before);
    gboolean placed = FALSE;
    for (guint k = 0; k < l->procs->len && !placed; k++) {
      local_proc_t *p = &g_array_index(l->procs, local_proc_t, k);
      if (p->pid == 0 && strcmp(p->name, s->name) == 0) {
        g_free(p->name);
        *p = fresh;
        placed = TRUE;
      }
    }
    if (!placed) g_array_append_val(l->procs, fresh);
    /* Its address lines replace the old ones in local.env. */
    char **lines = g_strsplit(l->env->str, "\n", -1);
    for (char **line = lines; *line; line++) {
      char *eq = strchr(*line, '=');
      if (!eq) continue;
      char *key = g_strndup(*line, (gsize)(eq - *line));
      if (!g_hash_table_contains(env, key)) g_ptr_array_add(order, g_strdup(key));
      g_hash_table_replace(env, key, g_strdup(eq + 1));
    }
    g_strfreev(lines);
  }
  l->want_port = 0;
  /* Records of processes that could not be started again are dropped. */
  for (guint k = l->procs->len; k-- > 0;)
    if (g_array_index(l->procs, local_proc_t, k).pid == 0) g_array_remove_index(l->procs, k);
  if (!local_write_pids(l, &err)) rc = rc ? rc : local_report("ixia-local: %s\n", err);
  GString *text = g_string_new(NULL);
  for (guint i = 0; i < order->len; i++) {
    const char *key = g_ptr_array_index(order, i);
    g_string_append_printf(text, "%s=%s\n", key, (char *)g_hash_table_lookup(env, key));
  }
  GError *gerr = NULL;
  if (!g_file_set_contents(l->env_path, text->str, (gssize)text->len, &gerr))
    rc = rc ? rc : local_report("ixia-local: %s\n", (ixia_error_from_gerror(&err, gerr, IXIA_EINTERNAL, l->env_path), err));
  if (rc == 0 && kafka)
    fprintf(stderr, "ixia-local: ixia-devkafka has new addresses (reload %s); its events are gone: "
                    "the indexer repairs itself from the truth store\n", l->env_path);
  g_string_free(text, TRUE);
  g_ptr_array_unref(todo);
  g_hash_table_unref(env);
  g_ptr_array_unref(order);
  return rc;
}

int ixia_local_restart(const ixia_local_opts_t *o, const char *name) {
  local_t *l = local_new(o);
  ixia_error_t *err = NULL;
  int rc = local_lock(l, TRUE, &err) ? local_restart_locked(l, name) : local_report("ixia-local: %s\n", err);
  local_free(l);
  return rc;
}

int ixia_local_run(const ixia_local_opts_t *o) {
  local_t *l = local_new(o);
  ixia_error_t *err = NULL;
  int rc;
  if (!local_lock(l, FALSE, &err)) {
    rc = local_report("ixia-local: %s\n", err);
    local_free(l);
    return rc;
  }
  rc = local_up_locked(l);
  /* Let `ixia-local status` and `down` in other shells work meanwhile. */
  local_unlock(l);
  if (rc != 0) {
    local_free(l);
    return rc;
  }
  char *ixia = g_build_filename(o->bin_dir, "ixia", NULL);
  printf("\nIn another shell:\n  set -a; . %s; set +a\n  %s stats\n"
         "Press Ctrl-C to stop the stack.\n",
         l->env_path, ixia);
  g_free(ixia);
  fflush(stdout);

  gboolean died = FALSE;
  while (!local_interrupted && !died) {
    g_usleep(LOCAL_RUN_POLL_US);
    for (guint i = 0; i < l->procs->len && !died; i++) {
      local_proc_t *p = &g_array_index(l->procs, local_proc_t, i);
      int status = 0;
      /* Our children are reaped; a daemon `ixia-local restart` started
       * since is not our child, so its liveness is its pid record. */
      gboolean gone = ixia_proc_reap(p->pid, &status);
      if (!gone && ixia_proc_matches(p->pid, p->start_time)) continue;
      if (!gone) status = 0;
      /* Wait for an `ixia-local down` from another shell to finish: if it
       * stopped the stack, the death is expected and the pid file gone. */
      if (!local_lock(l, TRUE, &err)) {
        rc = local_report("ixia-local: %s\n", err);
        local_free(l);
        return rc;
      }
      if (!g_file_test(l->pids_path, G_FILE_TEST_EXISTS)) {
        fprintf(stderr, "ixia-local: the stack was stopped by ixia-local down\n");
        local_free(l);
        return 0;
      }
      /* Replaced by `ixia-local restart`: follow the new record. */
      pid_t dead = p->pid;
      GArray *mine = l->procs;
      l->procs = g_array_new(FALSE, TRUE, sizeof(local_proc_t));
      g_array_set_clear_func(l->procs, local_proc_clear);
      gboolean exists = FALSE, recorded = FALSE;
      if (local_read_pids(l, &exists, NULL))
        for (guint k = 0; k < l->procs->len; k++) recorded = recorded || g_array_index(l->procs, local_proc_t, k).pid == dead;
      if (exists && !recorded) {
        g_array_unref(mine);
        local_unlock(l);
        break; /* scan the new records from the start */
      }
      g_array_unref(l->procs);
      l->procs = mine;
      p = &g_array_index(l->procs, local_proc_t, i);
      char *how = ixia_proc_describe_status(status);
      char *log = local_log_path(l, p->name);
      fprintf(stderr, "ixia-local: %s (pid %d) %s; see %s. Stopping the stack.\n", p->name,
              (int)p->pid, how, log);
      g_free(log);
      g_free(how);
      g_array_remove_index(l->procs, i);
      died = TRUE;
    }
  }
  if (!died) {
    fprintf(stderr, "\nixia-local: stopping the stack\n");
    if (!local_lock(l, TRUE, &err)) {
      rc = local_report("ixia-local: %s\n", err);
      local_free(l);
      return rc;
    }
  }
  /* Our own record is authoritative for the processes we started. */
  rc = local_stop_all(l) ? (local_remove_state(l), 0) : (local_write_pids(l, NULL), 1);
  local_free(l);
  return died ? 1 : rc;
}

/* ---- command line ------------------------------------------------------- */

static void local_on_signal(int sig) {
  (void)sig;
  local_interrupted = 1;
}

static char *local_bin_dir(void) {
  char *exe = g_file_read_link("/proc/self/exe", NULL);
  char *dir = exe ? g_path_get_dirname(exe) : g_strdup(".");
  g_free(exe);
  return dir;
}

/* Checks the forwarded config and overrides here, so that a typo is one
 * clear error instead of a daemon failing to start. */
static gboolean local_check_config(const char *file, char **sets, ixia_error_t **err) {
  ixia_config_t *cfg = ixia_config_new();
  gboolean ok = !file || ixia_config_load_file(cfg, file, err);
  for (char **s = sets; ok && s && *s; s++) ok = ixia_config_set_assignment(cfg, *s, err);
  ixia_config_destroy(cfg);
  return ok;
}

static int local_dispatch(const char *cmd, const char *arg, const ixia_local_opts_t *o) {
  struct sigaction sa = {.sa_handler = local_on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  if (strcmp(cmd, "up") == 0) return ixia_local_up(o);
  if (strcmp(cmd, "down") == 0) return ixia_local_down(o);
  if (strcmp(cmd, "run") == 0) return ixia_local_run(o);
  if (strcmp(cmd, "status") == 0) return ixia_local_status(o);
  if (strcmp(cmd, "restart") == 0) return ixia_local_restart(o, arg);
  fprintf(stderr, "ixia-local: unknown command '%s': expected up, down, run, status or restart\n", cmd);
  return 2;
}

int ixia_local_main(int argc, char **argv) {
  char *dir = NULL, *config = NULL;
  char **sets = NULL;
  int timeout_s = 30;
  GOptionEntry entries[] = {
      {"dir", 'd', 0, G_OPTION_ARG_FILENAME, &dir, "Directory of the stack (required)", "DIR"},
      {"config", 0, 0, G_OPTION_ARG_FILENAME, &config,
       "Config file forwarded to every ixia daemon", "FILE"},
      {"set", 0, 0, G_OPTION_ARG_STRING_ARRAY, &sets,
       "Option forwarded to every ixia daemon (repeatable)", "SECTION.KEY=VALUE"},
      {"timeout", 't', 0, G_OPTION_ARG_INT, &timeout_s,
       "Seconds each daemon may take to answer (default 30)", "SECONDS"},
      {NULL, 0, 0, 0, NULL, NULL, NULL},
  };
  GOptionContext *ctx = g_option_context_new("up|down|run|status|restart NAME --dir DIR");
  g_option_context_set_summary(
      ctx,
      "Runs the ixia stack (memcached, ixia-devkafka, ixia-replication-sink, ixia-indexer,\n"
      "ixia-query-api) on this machine. ixia-devkafka is an in-memory Kafka for local use: its\n"
      "data is lost when the stack stops.\n\n"
      "Commands:\n"
      "  up       start the daemons on free loopback ports, write DIR/local.env, return\n"
      "  down     stop exactly the processes `up` started\n"
      "  run      up, wait for Ctrl-C, then down\n"
      "  status   show which recorded processes are running\n"
      "  restart NAME  restart one daemon (memcached, ixia-devkafka, ixia-replication-sink,\n"
      "           ixia-indexer, ixia-query-api) on the port it had, keeping it recorded for\n"
      "           status and down; ixia-devkafka gets new ports (and loses its events), so the\n"
      "           sink and the indexer restart after it");
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *gerr = NULL;
  ixia_error_t *err = NULL;
  int rc = 2;
  if (!g_option_context_parse(ctx, &argc, &argv, &gerr)) {
    fprintf(stderr, "ixia-local: %s\n", gerr->message);
    g_error_free(gerr);
  } else if (argc < 2 || argc > 3 || (argc == 3) != (strcmp(argv[1], "restart") == 0)) {
    fprintf(stderr, "ixia-local: expected one command: up, down, run, status or restart NAME (see --help)\n");
  } else if (!dir || !*dir) {
    fprintf(stderr, "ixia-local: --dir DIR is required\n");
  } else if (timeout_s < 1) {
    fprintf(stderr, "ixia-local: --timeout must be at least 1 second\n");
  } else if (!local_check_config(config, sets, &err)) {
    local_report("ixia-local: %s\n", err); /* a bad argument: rc stays 2 */
  } else {
    /* Daemons run in DIR: a relative config path must not change meaning. */
    char *config_abs = config ? g_canonicalize_filename(config, NULL) : NULL;
    char *bin_dir = local_bin_dir();
    ixia_local_opts_t o = {.dir = dir,
                           .config_file = config_abs,
                           .sets = sets,
                           .bin_dir = bin_dir,
                           .timeout_s = timeout_s};
    rc = local_dispatch(argv[1], argc == 3 ? argv[2] : NULL, &o);
    g_free(config_abs);
    g_free(bin_dir);
  }
  g_option_context_free(ctx);
  g_free(dir);
  g_free(config);
  g_strfreev(sets);
  return rc;
}
