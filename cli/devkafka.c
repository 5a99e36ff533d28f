/* ixia-devkafka (devkafka.h): librdkafka's mock cluster hosted as a daemon,
 * with a line-based control port for fault injection.
 *
 * The cluster runs inside a librdkafka instance of this process; the control
 * thread accepts one command per line (broker down/up, errors to inject,
 * backlog and its batch budget, reset-topic) and answers "ok ..." or
 * "error ...". The mock gives no hook on its sockets, so a sweeper thread
 * sets TCP_NODELAY on every connected TCP socket the process holds: without
 * it each produce or fetch round trip waits for Nagle's algorithm and
 * dominates measured lag. */
#include "devkafka.h"

#include <stdatomic.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/socket.h>
#include <unistd.h>

/* rdkafka_mock.h must come after rdkafka.h. */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "devkafka_log.h"
#include "kafka_util.h"
#include "log.h"
#include "server.h"

/* Kafka protocol ApiKey of ProduceRequest; librdkafka's own constant
 * (RD_KAFKAP_Produce) lives in a private header. */
#define DEVKAFKA_APIKEY_PRODUCE 0
/* Replicas per partition: what production uses (docker-compose.yml), capped
 * by the broker count. */
#define DEVKAFKA_MAX_REPLICATION 3
/* Control protocol limits. The port is loopback-only, but a stuck or
 * misbehaving client must still not grow memory or starve others. */
#define DEVKAFKA_MAX_LINE 1024
#define DEVKAFKA_MAX_CLIENTS 64
#define DEVKAFKA_MAX_ERROR_COUNT 100000
#define DEVKAFKA_MAX_RTT_MS 600000

typedef struct {
  int fd;
  GString *in;       /* bytes received, not yet a complete line */
  GString *out;      /* replies not yet sent */
  gboolean closing;  /* close once `out` is sent: peer finished, or protocol error */
} devkafka_client_t;

struct ixia_devkafka {
  rd_kafka_t *rk; /* hosts the mock cluster (the mock needs a client instance to live in) */
  rd_kafka_mock_cluster_t *mcluster;
  char *bootstraps;
  char *topic;
  int brokers;
  int partitions;
  int replication;
  GMutex lock; /* serializes commands */
  /* control server */
  int listen_fd;
  int port;
  int wake[2]; /* a byte on wake[1] stops the control thread */
  GThread *thread;
  GThread *nodelay_thread;
  _Atomic gint stopping;
  /* The partition logs (devkafka_log.h): found = the budget applies. */
  ixia_devkafka_parts_t parts;
  gboolean parts_found;
  char *parts_why; /* why not */
  gsize budget;    /* bytes per partition */
  gsize batches;   /* record batches per partition */
};

/* ---- TCP_NODELAY on the mock brokers' connections ------------------------ */

/* librdkafka's mock brokers leave Nagle on for the connections they accept.
 * When a producer has two requests in flight to one broker, the second
 * response then waits for the client's delayed ACK: about 40 ms added to
 * every such round trip, which would dominate ixia's measured put-to-Kafka
 * lag (real Kafka brokers set TCP_NODELAY). The mock gives no hook for its
 * sockets, but they are this process's file descriptors, so a sweeper sets
 * TCP_NODELAY on every connected TCP socket we hold. */
static void devkafka_set_nodelay_all(void) {
  GDir *d = g_dir_open("/proc/self/fd", 0, NULL);
  if (!d) return;
  const char *name;
  while ((name = g_dir_read_name(d))) {
    int fd = atoi(name);
    int type = 0, proto = 0, listening = 0, one = 1;
    socklen_t l = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0 || type != SOCK_STREAM) continue;
    l = sizeof proto;
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) != 0 || proto != IPPROTO_TCP) continue;
    l = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l) != 0 || listening) continue;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  g_dir_close(d);
}

static gpointer devkafka_nodelay_loop(gpointer data) {
  ixia_devkafka_t *dk = data;
  while (!atomic_load(&dk->stopping)) {
    devkafka_set_nodelay_all();
    g_usleep(20000);
  }
  return NULL;
}

/* ---- cluster ------------------------------------------------------------ */

/* librdkafka logs from its own threads; ixia_log is thread-safe. */
static void devkafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
  /* The hosting instance has no bootstrap.servers on purpose (it never
   * connects anywhere); librdkafka's warning about it would only mislead. */
  if (strcmp(fac, "CONFWARN") == 0 && strstr(buf, "bootstrap.servers")) level = LOG_DEBUG;
  ixia_kafka_log(rk, level, fac, buf);
}


ixia_devkafka_t *ixia_devkafka_new(const ixia_config_t *cfg, ixia_error_t **err) {
  const char *topic = ixia_config_str(cfg, "kafka.topic");
  if (!*topic) {
    ixia_error_set(err, IXIA_EINVAL,
                   "config kafka.topic is empty: devkafka needs a topic to create");
    return NULL;
  }
  ixia_devkafka_t *dk = g_new0(ixia_devkafka_t, 1);
  g_mutex_init(&dk->lock);
  dk->listen_fd = -1;
  dk->wake[0] = dk->wake[1] = -1;
  dk->brokers = (int)ixia_config_int(cfg, "devkafka.brokers");
  dk->partitions = (int)ixia_config_int(cfg, "devkafka.partitions");
  dk->replication = MIN(DEVKAFKA_MAX_REPLICATION, dk->brokers);
  dk->topic = g_strdup(topic);

  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rd_kafka_conf_set_log_cb(conf, devkafka_log_cb);
  gboolean ok = ixia_kafka_conf_set(conf, "librdkafka", "client.id", "ixia-devkafka", err);
  /* The mock's own request log, at log.level=debug only: it is one line
   * per request. */
  if (ok && ixia_log_enabled(IXIA_LOG_DEBUG)) ok = ixia_kafka_conf_set(conf, "librdkafka", "debug", "mock", err);
  char errstr[512];
  if (ok) {
    dk->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!dk->rk) ixia_error_set(err, IXIA_EINTERNAL, "librdkafka: %s", errstr);
  }
  if (!dk->rk) {
    rd_kafka_conf_destroy(conf); /* rd_kafka_new owns conf only on success */
    ixia_devkafka_destroy(dk);
    return NULL;
  }
  dk->mcluster = rd_kafka_mock_cluster_new(dk->rk, dk->brokers);
  if (!dk->mcluster) {
    ixia_error_set(err, IXIA_EINTERNAL,
                   "cannot start the mock cluster (%d brokers on 127.0.0.1); see the log",
                   dk->brokers);
    ixia_devkafka_destroy(dk);
    return NULL;
  }
  rd_kafka_resp_err_t kerr =
      rd_kafka_mock_topic_create(dk->mcluster, dk->topic, dk->partitions, dk->replication);
  if (kerr) {
    ixia_error_set(err, IXIA_EINTERNAL, "cannot create topic %s: %s", dk->topic,
                   rd_kafka_err2str(kerr));
    ixia_devkafka_destroy(dk);
    return NULL;
  }
  /* The backlog: devkafka.memory_mb over the partitions, instead of the
   * mock's built-in 5 MiB each. */
  dk->budget = (gsize)ixia_config_int(cfg, "devkafka.memory_mb") * 1024 * 1024 / (gsize)dk->partitions;
  /* And the batch count, which sets what each fetch costs (devkafka_log.h). */
  dk->batches = MAX((gsize)ixia_config_int(cfg, "devkafka.max_batches") / (gsize)dk->partitions, 1);
  dk->parts_found = ixia_devkafka_parts_find(dk->mcluster, dk->rk, dk->topic, dk->brokers, dk->partitions,
                                             &dk->parts, &dk->parts_why);
  if (dk->parts_found) {
    ixia_devkafka_parts_set_budget(&dk->parts, dk->budget, dk->batches);
  } else {
    IXIA_WARN("devkafka.memory_mb and devkafka.max_batches cannot be applied: %s; each partition "
              "keeps librdkafka's built-in %d MiB and %d record batches", dk->parts_why,
              IXIA_DEVKAFKA_MOCK_MAX_BYTES >> 20, IXIA_DEVKAFKA_MOCK_MAX_BATCHES);
    dk->budget = IXIA_DEVKAFKA_MOCK_MAX_BYTES;
    dk->batches = IXIA_DEVKAFKA_MOCK_MAX_BATCHES;
  }
  dk->bootstraps = g_strdup(rd_kafka_mock_cluster_bootstraps(dk->mcluster));
  dk->nodelay_thread = g_thread_new("dk-nodelay", devkafka_nodelay_loop, dk);
  return dk;
}

const char *ixia_devkafka_bootstraps(const ixia_devkafka_t *dk) { return dk->bootstraps; }

int ixia_devkafka_control_port(const ixia_devkafka_t *dk) { return dk->thread ? dk->port : 0; }

/* ---- commands ----------------------------------------------------------- */

static const char devkafka_help[] =
    "commands: ping | bootstrap | broker-down ID|all | broker-up ID|all | "
    "produce-errors COUNT ERRNAME|CODE | rtt ID|all MS | backlog | max-batches N | reset-topic | help";

/* Names newer Kafka uses for codes librdkafka 2.0 still calls otherwise. */
static const struct {
  const char *name;
  rd_kafka_resp_err_t code;
} devkafka_error_aliases[] = {
    {"NOT_LEADER_OR_FOLLOWER", RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION},
};

/* ID is 1..brokers or "all" (-1 for the mock API). */
static gboolean devkafka_parse_broker(const ixia_devkafka_t *dk, const char *s, int32_t *id,
                                      char **reply) {
  guint64 v = 0;
  if (g_ascii_strcasecmp(s, "all") == 0) {
    *id = -1;
    return TRUE;
  }
  if (g_ascii_string_to_unsigned(s, 10, 1, (guint64)dk->brokers, &v, NULL)) {
    *id = (int32_t)v;
    return TRUE;
  }
  *reply = g_strdup_printf("error broker ID must be 1..%d or all, not '%s'", dk->brokers, s);
  return FALSE;
}

static char *devkafka_broker_name(int32_t id, int brokers) {
  return id < 0 ? g_strdup_printf("all %d brokers", brokers) : g_strdup_printf("broker %d", id);
}

/* A Kafka error by rd_kafka_err2name name (case-insensitive, optional
 * RD_KAFKA_RESP_ERR_ prefix) or by number. NO_ERROR is refused: it would
 * not make a request fail. */
static gboolean devkafka_parse_kafka_error(const char *s, rd_kafka_resp_err_t *code, char **reply) {
  const struct rd_kafka_err_desc *descs = NULL;
  size_t n = 0;
  rd_kafka_get_err_descs(&descs, &n);
  gint64 num = 0;
  gboolean numeric = g_ascii_string_to_signed(s, 10, G_MININT32, G_MAXINT32, &num, NULL);
  const char *name = s;
  if (g_ascii_strncasecmp(name, "RD_KAFKA_RESP_ERR_", 18) == 0) name += 18;
  gboolean found = FALSE;
  for (size_t i = 0; i < n && !found; i++) {
    if (!descs[i].name) continue; /* gaps in the table */
    if (numeric ? descs[i].code == (rd_kafka_resp_err_t)num
                : g_ascii_strcasecmp(descs[i].name, name) == 0) {
      *code = descs[i].code;
      found = TRUE;
    }
  }
  for (guint i = 0; i < G_N_ELEMENTS(devkafka_error_aliases) && !found && !numeric; i++) {
    if (g_ascii_strcasecmp(devkafka_error_aliases[i].name, name) == 0) {
      *code = devkafka_error_aliases[i].code;
      found = TRUE;
    }
  }
  if (!found) {
    *reply = g_strdup_printf("error unknown Kafka error '%s' (use a name such as "
                             "NOT_LEADER_FOR_PARTITION or REQUEST_TIMED_OUT, or a code)",
                             s);
    return FALSE;
  }
  if (*code == RD_KAFKA_RESP_ERR_NO_ERROR) {
    *reply = g_strdup("error NO_ERROR would not make a request fail");
    return FALSE;
  }
  return TRUE;
}

static char *devkafka_cmd_broker_state(ixia_devkafka_t *dk, gboolean up, char **args, int nargs) {
  const char *cmd = up ? "broker-up" : "broker-down";
  if (nargs != 1) return g_strdup_printf("error usage: %s ID|all", cmd);
  int32_t id = 0;
  char *reply = NULL;
  if (!devkafka_parse_broker(dk, args[0], &id, &reply)) return reply;
  rd_kafka_resp_err_t kerr = up ? rd_kafka_mock_broker_set_up(dk->mcluster, id)
                                : rd_kafka_mock_broker_set_down(dk->mcluster, id);
  if (kerr) return g_strdup_printf("error %s %s: %s", cmd, args[0], rd_kafka_err2str(kerr));
  char *what = devkafka_broker_name(id, dk->brokers);
  reply = g_strdup_printf("ok %s %s", what, up ? "up" : "down");
  g_free(what);
  return reply;
}

static char *devkafka_cmd_produce_errors(ixia_devkafka_t *dk, char **args, int nargs) {
  if (nargs != 2) return g_strdup("error usage: produce-errors COUNT ERRNAME|CODE");
  guint64 count = 0;
  if (!g_ascii_string_to_unsigned(args[0], 10, 1, DEVKAFKA_MAX_ERROR_COUNT, &count, NULL))
    return g_strdup_printf("error COUNT must be 1..%d, not '%s'", DEVKAFKA_MAX_ERROR_COUNT,
                           args[0]);
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
  char *reply = NULL;
  if (!devkafka_parse_kafka_error(args[1], &code, &reply)) return reply;
  rd_kafka_resp_err_t *errors = g_new(rd_kafka_resp_err_t, count);
  for (guint64 i = 0; i < count; i++) errors[i] = code;
  /* Cluster-wide stack: whichever broker gets the next Produce requests
   * answers them with these errors, in order, after any queued earlier. */
  rd_kafka_mock_push_request_errors_array(dk->mcluster, DEVKAFKA_APIKEY_PRODUCE, (size_t)count,
                                          errors);
  g_free(errors);
  return g_strdup_printf("ok queued %" G_GUINT64_FORMAT " x %s (%d) for Produce requests", count,
                         rd_kafka_err2name(code), (int)code);
}

static char *devkafka_cmd_rtt(ixia_devkafka_t *dk, char **args, int nargs) {
  if (nargs != 2) return g_strdup("error usage: rtt ID|all MS");
  int32_t id = 0;
  char *reply = NULL;
  if (!devkafka_parse_broker(dk, args[0], &id, &reply)) return reply;
  guint64 ms = 0;
  if (!g_ascii_string_to_unsigned(args[1], 10, 0, DEVKAFKA_MAX_RTT_MS, &ms, NULL))
    return g_strdup_printf("error MS must be 0..%d, not '%s'", DEVKAFKA_MAX_RTT_MS, args[1]);
  rd_kafka_resp_err_t kerr = rd_kafka_mock_broker_set_rtt(dk->mcluster, id, (int)ms);
  if (kerr) return g_strdup_printf("error rtt %s: %s", args[0], rd_kafka_err2str(kerr));
  char *what = devkafka_broker_name(id, dk->brokers);
  reply = g_strdup_printf("ok %s rtt %" G_GUINT64_FORMAT " ms", what, ms);
  g_free(what);
  return reply;
}

/* "ok budget B [built-in] partitions P batches K: I:START-END:BYTES:BATCHES ..." */
static char *devkafka_cmd_backlog(ixia_devkafka_t *dk) {
  GString *s = g_string_new(NULL);
  g_string_printf(s, "ok budget %" G_GSIZE_FORMAT "%s partitions %d batches %" G_GSIZE_FORMAT ":",
                  dk->budget, dk->parts_found ? "" : " built-in", dk->partitions, dk->batches);
  for (int i = 0; dk->parts_found && i < dk->partitions; i++) {
    gint64 start, end;
    gsize bytes, batches;
    ixia_devkafka_parts_usage(&dk->parts, i, &start, &end, &bytes, &batches);
    g_string_append_printf(s, " %d:%" G_GINT64_FORMAT "-%" G_GINT64_FORMAT ":%" G_GSIZE_FORMAT
                           ":%" G_GSIZE_FORMAT, i, start, end, bytes, batches);
  }
  return g_string_free(s, FALSE);
}

/* Sets the record batches kept over all partitions, as devkafka.max_batches
 * does at start: a run that needs a deep backlog for a bulk load (a busy
 * indexer reads it tens of seconds late) can keep few batches afterwards,
 * when every fetch walking them is what a latency measurement would time.
 * The oldest beyond the new budget go as each partition's next batch
 * arrives. */
static char *devkafka_cmd_max_batches(ixia_devkafka_t *dk, char **args, int nargs) {
  if (nargs != 1) return g_strdup("error usage: max-batches N (record batches over all partitions)");
  if (!dk->parts_found) return g_strdup_printf("error max-batches is not available: %s", dk->parts_why);
  guint64 n = 0;
  if (!g_ascii_string_to_unsigned(args[0], 10, (guint64)dk->partitions, 10000000, &n, NULL))
    return g_strdup_printf("error N must be %d..10000000 (at least one batch per partition), not '%s'",
                           dk->partitions, args[0]);
  dk->batches = (gsize)n / (gsize)dk->partitions;
  ixia_devkafka_parts_set_budget(&dk->parts, dk->budget, dk->batches);
  return g_strdup_printf("ok %" G_GSIZE_FORMAT " record batches per partition (%d partitions)",
                         dk->batches, dk->partitions);
}

/* Empties the topic with its offsets starting at 0 again: what consumers
 * see when a topic is deleted and re-created (or an in-memory Kafka is
 * restarted) under them. Brokers are down meanwhile, so the mock thread
 * reads no partition while it changes. */
static char *devkafka_cmd_reset_topic(ixia_devkafka_t *dk) {
  if (!dk->parts_found) return g_strdup_printf("error reset-topic is not available: %s", dk->parts_why);
  rd_kafka_resp_err_t kerr = rd_kafka_mock_broker_set_down(dk->mcluster, -1);
  if (kerr) return g_strdup_printf("error reset-topic: broker-down: %s", rd_kafka_err2str(kerr));
  ixia_devkafka_parts_reset(&dk->parts);
  kerr = rd_kafka_mock_broker_set_up(dk->mcluster, -1);
  if (kerr) return g_strdup_printf("error reset-topic: broker-up: %s", rd_kafka_err2str(kerr));
  return g_strdup_printf("ok topic %s re-created empty: %d partitions, offsets from 0", dk->topic,
                         dk->partitions);
}

static char *devkafka_dispatch(ixia_devkafka_t *dk, char **argv, int argc) {
  if (argc == 0) return g_strdup("error empty command (try help)");
  const char *cmd = argv[0];
  char **args = argv + 1;
  int nargs = argc - 1;
  if (strcmp(cmd, "ping") == 0 && nargs == 0) return g_strdup("ok pong");
  if (strcmp(cmd, "help") == 0 && nargs == 0) return g_strdup_printf("ok %s", devkafka_help);
  if (strcmp(cmd, "bootstrap") == 0 && nargs == 0) return g_strdup_printf("ok %s", dk->bootstraps);
  if (strcmp(cmd, "broker-down") == 0) return devkafka_cmd_broker_state(dk, FALSE, args, nargs);
  if (strcmp(cmd, "broker-up") == 0) return devkafka_cmd_broker_state(dk, TRUE, args, nargs);
  if (strcmp(cmd, "produce-errors") == 0) return devkafka_cmd_produce_errors(dk, args, nargs);
  if (strcmp(cmd, "rtt") == 0) return devkafka_cmd_rtt(dk, args, nargs);
  if (strcmp(cmd, "backlog") == 0 && nargs == 0) return devkafka_cmd_backlog(dk);
  if (strcmp(cmd, "reset-topic") == 0 && nargs == 0) return devkafka_cmd_reset_topic(dk);
  if (strcmp(cmd, "max-batches") == 0) return devkafka_cmd_max_batches(dk, args, nargs);
  if (strcmp(cmd, "ping") == 0 || strcmp(cmd, "help") == 0 || strcmp(cmd, "bootstrap") == 0 ||
      strcmp(cmd, "backlog") == 0 || strcmp(cmd, "reset-topic") == 0)
    return g_strdup_printf("error %s takes no arguments", cmd);
  char *shown = g_strescape(cmd, NULL);
  char *reply = g_strdup_printf("error unknown command '%s' (try help)", shown);
  g_free(shown);
  return reply;
}

char *ixia_devkafka_command(ixia_devkafka_t *dk, const char *line) {
  char **tokens = g_strsplit_set(line, " \t\r", -1);
  GPtrArray *argv = g_ptr_array_new();
  for (char **t = tokens; *t; t++)
    if (**t) g_ptr_array_add(argv, *t);
  g_mutex_lock(&dk->lock);
  char *reply = devkafka_dispatch(dk, (char **)argv->pdata, (int)argv->len);
  g_mutex_unlock(&dk->lock);
  /* Faults are logged so that a test's devkafka log explains its timeline;
   * probes (ping, bootstrap) would only add noise. */
  const char *cmd = argv->len ? g_ptr_array_index(argv, 0) : "";
  gboolean quiet = argv->len == 1 && (strcmp(cmd, "ping") == 0 || strcmp(cmd, "bootstrap") == 0 ||
                                      strcmp(cmd, "backlog") == 0);
  if (!quiet || g_str_has_prefix(reply, "error")) {
    char *shown = g_strescape(line, NULL);
    IXIA_INFO("control: %s -> %s", shown, reply);
    g_free(shown);
  }
  g_ptr_array_unref(argv);
  g_strfreev(tokens);
  return reply;
}

/* ---- control server ----------------------------------------------------- */

static void devkafka_client_free(gpointer p) {
  devkafka_client_t *c = p;
  close(c->fd);
  g_string_free(c->in, TRUE);
  g_string_free(c->out, TRUE);
  g_free(c);
}

/* Reads what is available and answers every complete line. FALSE when the
 * connection is broken. */
static gboolean devkafka_client_read(ixia_devkafka_t *dk, devkafka_client_t *c) {
  char buf[4096];
  ssize_t n = recv(c->fd, buf, sizeof buf, 0);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  if (n == 0) {
    /* The peer has sent everything; answer what it sent, then close. An
     * unterminated last line is answered too (`printf ping | nc`). */
    if (c->in->len && !c->closing) {
      char *reply = ixia_devkafka_command(dk, c->in->str);
      g_string_append_printf(c->out, "%s\n", reply);
      g_free(reply);
      g_string_truncate(c->in, 0);
    }
    c->closing = TRUE;
    return TRUE;
  }
  if (c->closing) return TRUE; /* after a protocol error: discard */
  g_string_append_len(c->in, buf, n);
  char *nl;
  while ((nl = memchr(c->in->str, '\n', c->in->len)) != NULL) {
    gsize len = (gsize)(nl - c->in->str);
    if (len > DEVKAFKA_MAX_LINE) break;
    char *line = g_strndup(c->in->str, len);
    g_string_erase(c->in, 0, (gssize)len + 1);
    char *reply = ixia_devkafka_command(dk, line);
    g_string_append_printf(c->out, "%s\n", reply);
    g_free(reply);
    g_free(line);
  }
  if (c->in->len > DEVKAFKA_MAX_LINE) {
    IXIA_WARN("control: a line longer than %d bytes; closing that connection", DEVKAFKA_MAX_LINE);
    g_string_append_printf(c->out, "error line longer than %d bytes; closing\n",
                           DEVKAFKA_MAX_LINE);
    g_string_truncate(c->in, 0);
    c->closing = TRUE;
  }
  return TRUE;
}

/* Sends what it can without blocking. FALSE when the connection is broken. */
static gboolean devkafka_client_write(devkafka_client_t *c) {
  while (c->out->len) {
    ssize_t n = send(c->fd, c->out->str, c->out->len, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    g_string_erase(c->out, 0, n);
  }
  return TRUE;
}

static void devkafka_accept(ixia_devkafka_t *dk, GPtrArray *clients) {
  while (clients->len < DEVKAFKA_MAX_CLIENTS) {
    int fd = accept4(dk->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
        IXIA_WARN("control: accept: %s", g_strerror(errno));
      return;
    }
    devkafka_client_t *c = g_new0(devkafka_client_t, 1);
    c->fd = fd;
    c->in = g_string_new(NULL);
    c->out = g_string_new(NULL);
    g_ptr_array_add(clients, c);
  }
}

/* One thread serves every control connection with poll(): commands are
 * quick, and one thread is simple to stop. */
static gpointer devkafka_control_loop(gpointer data) {
  ixia_devkafka_t *dk = data;
  GPtrArray *clients = g_ptr_array_new_with_free_func(devkafka_client_free);
  GArray *pfds = g_array_new(FALSE, FALSE, sizeof(struct pollfd));
  for (;;) {
    g_array_set_size(pfds, 0);
    struct pollfd p = {.fd = dk->wake[0], .events = POLLIN};
    g_array_append_val(pfds, p);
    /* At the connection cap, new connections wait in the backlog. */
    p = (struct pollfd){.fd = dk->listen_fd,
                        .events = clients->len < DEVKAFKA_MAX_CLIENTS ? POLLIN : 0};
    g_array_append_val(pfds, p);
    guint nclients = clients->len;
    for (guint i = 0; i < nclients; i++) {
      devkafka_client_t *c = g_ptr_array_index(clients, i);
      /* A closing client is only written to: after its EOF, POLLIN would
       * report that EOF again and again. */
      p = (struct pollfd){.fd = c->fd,
                          .events = (c->closing ? 0 : POLLIN) | (c->out->len ? POLLOUT : 0)};
      g_array_append_val(pfds, p);
    }
    if (poll((struct pollfd *)pfds->data, pfds->len, -1) < 0) {
      if (errno == EINTR) continue;
      IXIA_ERROR("control: poll: %s; control server stopped", g_strerror(errno));
      break;
    }
    if (g_array_index(pfds, struct pollfd, 0).revents) break; /* destroy */
    /* Backwards, so that removing a client keeps the lower indices valid. */
    for (guint i = nclients; i-- > 0;) {
      devkafka_client_t *c = g_ptr_array_index(clients, i);
      short re = g_array_index(pfds, struct pollfd, i + 2).revents;
      gboolean alive = TRUE;
      if (re & (POLLIN | POLLHUP | POLLERR)) alive = devkafka_client_read(dk, c);
      if (alive) alive = devkafka_client_write(c);
      if (!alive || (c->closing && !c->out->len)) g_ptr_array_remove_index(clients, i);
    }
    if (g_array_index(pfds, struct pollfd, 1).revents & POLLIN) devkafka_accept(dk, clients);
  }
  g_array_unref(pfds);
  g_ptr_array_unref(clients);
  return NULL;
}

gboolean ixia_devkafka_control_start(ixia_devkafka_t *dk, ixia_error_t **err) {
  g_return_val_if_fail(dk->thread == NULL, FALSE);
  dk->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (dk->listen_fd < 0)
    return ixia_error_set(err, IXIA_EINTERNAL, "control socket: %s", g_strerror(errno));
  int one = 1;
  setsockopt(dk->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  /* Loopback only: the protocol has no authentication and breaks the
   * cluster on purpose. */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  if (bind(dk->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(dk->listen_fd, (struct sockaddr *)&a, &alen) != 0 ||
      listen(dk->listen_fd, 16) != 0)
    return ixia_error_set(err, IXIA_EINTERNAL, "control socket on 127.0.0.1: %s",
                          g_strerror(errno));
  dk->port = ntohs(a.sin_port);
  if (pipe2(dk->wake, O_CLOEXEC | O_NONBLOCK) != 0)
    return ixia_error_set(err, IXIA_EINTERNAL, "pipe: %s", g_strerror(errno));
  GError *gerr = NULL;
  dk->thread = g_thread_try_new("dk-control", devkafka_control_loop, dk, &gerr);
  return dk->thread != NULL || ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, "control thread");
}

void ixia_devkafka_destroy(ixia_devkafka_t *dk) {
  if (!dk) return;
  atomic_store(&dk->stopping, 1);
  if (dk->nodelay_thread) g_thread_join(dk->nodelay_thread);
  if (dk->thread) {
    ssize_t w;
    do {
      w = write(dk->wake[1], "x", 1);
    } while (w < 0 && errno == EINTR);
    g_thread_join(dk->thread);
  }
  if (dk->listen_fd >= 0) close(dk->listen_fd);
  for (int i = 0; i < 2; i++)
    if (dk->wake[i] >= 0) close(dk->wake[i]);
  if (dk->mcluster) rd_kafka_mock_cluster_destroy(dk->mcluster);
  if (dk->rk) rd_kafka_destroy(dk->rk);
  g_mutex_clear(&dk->lock);
  g_free(dk->bootstraps);
  g_free(dk->topic);
  g_free(dk->parts_why);
  g_free(dk);
}

/* ---- the daemon --------------------------------------------------------- */

static const char devkafka_summary[] =
    "Runs an IN-MEMORY Kafka cluster (librdkafka's mock cluster) on 127.0.0.1 for local runs\n"
    "and tests. It is NOT a production broker: every record lives in this process's memory\n"
    "and is lost when it exits; the partitions together keep at most devkafka.memory_mb of\n"
    "events (default 1 GiB) in at most devkafka.max_batches record batches (default 20,000;\n"
    "older ones are dropped, and an index shard that had not read them repairs itself from\n"
    "the truth store); it listens on loopback only. Production\n"
    "uses real Kafka (docker-compose.yml; point kafka.brokers at it).\n"
    "\n"
    "It creates kafka.topic with devkafka.partitions partitions (replication factor\n"
    "min(3, devkafka.brokers)) and writes the bootstrap list to devkafka.bootstrap_file.\n"
    "\n"
    "With devkafka.control_port_file set it serves a fault-injection protocol on a\n"
    "loopback port written to that file; one command per line, one reply line each\n"
    "(\"ok ...\" or \"error MESSAGE\"):\n"
    "  ping | bootstrap | help\n"
    "  broker-down ID|all, broker-up ID|all    (IDs 1..devkafka.brokers)\n"
    "  produce-errors COUNT ERRNAME|CODE       (e.g. 3 NOT_LEADER_FOR_PARTITION)\n"
    "  rtt ID|all MS\n"
    "  backlog                                 (budgets per partition, then I:FIRST-NEXT:BYTES:BATCHES)\n"
    "  max-batches N                           (record batches kept over all partitions from now on)\n"
    "  reset-topic                             (empty the topic, offsets from 0: as if re-created)\n"
    "\n"
    "Example: ixia-devkafka --set devkafka.bootstrap_file=kafka.bootstrap \\\n"
    "           --set devkafka.control_port_file=kafka.control\n"
    "         exec 3<>/dev/tcp/127.0.0.1/$(cat kafka.control)   # bash; or nc\n"
    "         echo 'broker-down all' >&3; head -n1 <&3";

static gboolean devkafka_write_port_file(const char *path, int port, ixia_error_t **err) {
  char text[16];
  snprintf(text, sizeof text, "%d\n", port);
  return ixia_write_file_atomic(path, text, err);
}

int ixia_devkafka_main(int argc, char **argv) {
  ixia_error_t *err = NULL;
  ixia_config_t *cfg = ixia_config_from_args(&argc, &argv, NULL, devkafka_summary, NULL, &err);
  if (!cfg) {
    fprintf(stderr, "ixia-devkafka: %s\n", err->message);
    ixia_error_destroy(err);
    return 2;
  }
  if (argc > 1) {
    fprintf(stderr, "ixia-devkafka: unexpected argument '%s' (see --help)\n", argv[1]);
    ixia_config_destroy(cfg);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  int rc = 1;
  const char *control_file = ixia_config_str(cfg, "devkafka.control_port_file");
  const char *bootstrap_file = ixia_config_str(cfg, "devkafka.bootstrap_file");
  gboolean wrote_control = FALSE, wrote_bootstrap = FALSE;
  ixia_devkafka_t *dk = ixia_devkafka_new(cfg, &err);
  if (!dk) goto out;
  /* The control port first: readers wait for the bootstrap file and then
   * expect both. */
  if (*control_file) {
    if (!ixia_devkafka_control_start(dk, &err)) goto out;
    if (!devkafka_write_port_file(control_file, ixia_devkafka_control_port(dk), &err)) goto out;
    wrote_control = TRUE;
  }
  if (*bootstrap_file) {
    char *text = g_strdup_printf("%s\n", ixia_devkafka_bootstraps(dk));
    wrote_bootstrap = ixia_write_file_atomic(bootstrap_file, text, &err);
    g_free(text);
    if (!wrote_bootstrap) goto out;
  }
  char *control = dk->thread ? g_strdup_printf("127.0.0.1:%d", dk->port) : g_strdup("off");
  IXIA_INFO("ixia-devkafka (IN-MEMORY, local runs and tests only; data is lost on exit) serving "
            "%s: topic %s, %d partitions, replication factor %d; backlog %" G_GSIZE_FORMAT
            " MiB and %" G_GSIZE_FORMAT " record batches per partition%s; control %s",
            ixia_devkafka_bootstraps(dk), dk->topic, dk->partitions, dk->replication,
            dk->budget >> 20, dk->batches,
            dk->parts_found ? " (devkafka.memory_mb, devkafka.max_batches)" : " (librdkafka's built-in limits)",
            control);
  g_free(control);
  ixia_wait_for_signal();
  IXIA_INFO("shutting down; the cluster's data is discarded");
  rc = 0;
out:
  if (err) {
    IXIA_ERROR("ixia-devkafka: %s", err->message);
    ixia_error_destroy(err);
  }
  /* The addresses die with the cluster: leave no file pointing at them. */
  if (wrote_bootstrap) unlink(bootstrap_file);
  if (wrote_control) unlink(control_file);
  ixia_devkafka_destroy(dk);
  ixia_config_destroy(cfg);
  return rc;
}
