/* Kafka test support (kafka_support.h): ixia-devkafka processes, a small
 * producer, a consumer that reads a whole topic back as change events, and
 * the whole stack started with N index shards.
 *
 * Processes are tracked by support.c like every other test process; the
 * stack helper starts devkafka, the API, the sink and the shards with their
 * ports read back from files, in the order the data flows. */
#include "kafka_support.h"

#include <stdatomic.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "thrift_util.h"

#define KS_START_TIMEOUT_MS 20000
#define KS_STOP_GRACE_MS 10000
#define KS_CONTROL_TIMEOUT_MS 10000
#define KS_MAX_REPLY 4096

/* ---- ixia-devkafka ------------------------------------------------------ */

static void ks_print_log(const char *log_path) {
  char *text = NULL;
  if (g_file_get_contents(log_path, &text, NULL, NULL))
    fprintf(stderr, "---- %s\n%s----\n", log_path, text);
  g_free(text);
}

static char *ks_read_trimmed(const char *path) {
  char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL)) return NULL;
  g_strstrip(text);
  if (!*text) {
    g_free(text);
    return NULL;
  }
  return text;
}

static void ks_add_set(GPtrArray *argv, char *assignment) {
  g_ptr_array_add(argv, g_strdup("--set"));
  g_ptr_array_add(argv, assignment);
}

gboolean ixt_devkafka_start(ixt_devkafka_t *k, const char *dir, int brokers, int partitions) {
  return ixt_devkafka_start_sets(k, dir, brokers, partitions, NULL);
}

gboolean ixt_devkafka_start_sets(ixt_devkafka_t *k, const char *dir, int brokers, int partitions,
                                 const char *const *sets) {
  g_return_val_if_fail(k->pid == 0, FALSE);
  k->dir = g_strdup(dir);
  k->log_path = g_build_filename(dir, "ixia-devkafka.log", NULL);
  char *bootstrap_file = g_build_filename(dir, "kafka.bootstrap", NULL);
  char *control_file = g_build_filename(dir, "kafka.control", NULL);
  unlink(bootstrap_file);
  unlink(control_file);

  GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
  /* IXIA_TEST_WRAPPER="valgrind -q" runs the daemon under a tool. */
  gchar **wrapper = g_strsplit(g_getenv("IXIA_TEST_WRAPPER") ? g_getenv("IXIA_TEST_WRAPPER") : "",
                               " ", -1);
  for (gchar **w = wrapper; *w; w++)
    if (**w) g_ptr_array_add(argv, g_strdup(*w));
  g_strfreev(wrapper);
  g_ptr_array_add(argv, g_strdup(IXIA_BIN_DIR "/ixia-devkafka"));
  ks_add_set(argv, g_strdup_printf("devkafka.brokers=%d", brokers));
  ks_add_set(argv, g_strdup_printf("devkafka.partitions=%d", partitions));
  ks_add_set(argv, g_strdup_printf("devkafka.bootstrap_file=%s", bootstrap_file));
  ks_add_set(argv, g_strdup_printf("devkafka.control_port_file=%s", control_file));
  for (const char *const *s = sets; s && *s; s++) ks_add_set(argv, g_strdup(*s));
  g_ptr_array_add(argv, NULL);

  GPid pid = ixt_spawn((char **)argv->pdata, k->log_path);
  g_ptr_array_unref(argv);
  gboolean ok = FALSE;
  if (!pid) goto out;
  k->pid = pid;
  gint64 deadline = g_get_monotonic_time() + KS_START_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
  while (!ok && g_get_monotonic_time() < deadline) {
    /* The daemon writes the control file first, both atomically. */
    char *bootstrap = ks_read_trimmed(bootstrap_file);
    if (bootstrap) {
      char *port = ks_read_trimmed(control_file);
      k->control_port = port ? atoi(port) : 0;
      g_free(port);
      k->bootstrap = bootstrap;
      ok = k->control_port > 0;
      if (!ok) fprintf(stderr, "ixt_devkafka_start: no control port in %s\n", control_file);
      break;
    }
    if (ixt_exited(k->pid)) {
      k->pid = 0;
      fprintf(stderr, "ixt_devkafka_start: ixia-devkafka exited during start-up\n");
      break;
    }
    g_usleep(20000);
  }
  if (!ok) {
    if (k->pid > 0) {
      /* Not usable: do not leave it running. */
      ixt_signal(k->pid, SIGKILL);
      k->pid = 0;
    }
    if (g_get_monotonic_time() >= deadline)
      fprintf(stderr, "ixt_devkafka_start: no bootstrap file within %d ms\n", KS_START_TIMEOUT_MS);
    ks_print_log(k->log_path);
  }
out:
  g_free(bootstrap_file);
  g_free(control_file);
  return ok;
}

gboolean ixt_devkafka_stop(ixt_devkafka_t *k) {
  if (k->pid > 0) ixt_terminate(k->pid, KS_STOP_GRACE_MS);
  gboolean clean = ixt_log_is_clean(k->log_path);
  g_free(k->dir);
  g_free(k->log_path);
  g_free(k->bootstrap);
  memset(k, 0, sizeof *k);
  return clean;
}

gboolean ixt_devkafka_control(ixt_devkafka_t *k, const char *command, char **reply) {
  char *line = NULL;
  const char *failure = NULL; /* which step failed */
  int failure_errno = 0;
  struct timeval tv = {.tv_sec = KS_CONTROL_TIMEOUT_MS / 1000};
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)k->control_port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  char *request = g_strdup_printf("%s\n", command);
  GString *in = g_string_new(NULL);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    failure = "socket";
  } else if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
             setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
    failure = "setsockopt";
  } else if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    failure = "connect";
  } else if (send(fd, request, strlen(request), MSG_NOSIGNAL) != (ssize_t)strlen(request)) {
    failure = "send";
  }
  if (failure) failure_errno = errno;
  while (!failure && !memchr(in->str, '\n', in->len)) {
    if (in->len >= KS_MAX_REPLY) {
      failure = "reply line too long";
      break;
    }
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      failure = "recv";
      failure_errno = errno;
    } else if (n == 0) {
      failure = "connection closed before a reply line";
    } else {
      g_string_append_len(in, buf, n);
    }
  }
  if (failure)
    line = g_strdup_printf("transport error: %s%s%s", failure, failure_errno ? ": " : "",
                           failure_errno ? g_strerror(failure_errno) : "");
  else
    line = g_strndup(in->str, (gsize)((char *)memchr(in->str, '\n', in->len) - in->str));
  if (fd >= 0) close(fd);
  g_free(request);
  g_string_free(in, TRUE);
  gboolean ok = g_str_has_prefix(line, "ok");
  if (reply)
    *reply = line;
  else
    g_free(line);
  return ok;
}

/* ---- librdkafka helpers ----------------------------------------------- */

static gboolean ks_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value) {
  char errstr[512];
  if (rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr) == RD_KAFKA_CONF_OK) return TRUE;
  fprintf(stderr, "kafka_support: %s=%s: %s\n", name, value, errstr);
  return FALSE;
}

/* Settings every test client wants: fast reconnects, so that a broker back
 * from broker-down is used again within about half a second (librdkafka's
 * default backoff grows to 10 s); warnings and errors only in the test's
 * output (a broker-down test would otherwise print every refused
 * connection twice). */
static gboolean ks_conf_common(rd_kafka_conf_t *conf, const char *bootstrap) {
  return ks_conf_set(conf, "bootstrap.servers", bootstrap) &&
         ks_conf_set(conf, "reconnect.backoff.ms", "50") &&
         ks_conf_set(conf, "reconnect.backoff.max.ms", "500") &&
         ks_conf_set(conf, "log_level", "4");
}

/* ---- consumer ----------------------------------------------------------- */

#define KS_META_KEY "ixt-kafka-meta"

static void ks_meta_free(gpointer p) {
  ixt_kafka_meta_t *m = p;
  if (m->key) g_bytes_unref(m->key);
  g_free(m);
}

const ixt_kafka_meta_t *ixt_kafka_meta(IxiaChangeEvent *ev) {
  return g_object_get_data(G_OBJECT(ev), KS_META_KEY);
}

static gint ks_event_cmp(gconstpointer a, gconstpointer b) {
  const ixt_kafka_meta_t *x = ixt_kafka_meta(*(IxiaChangeEvent *const *)a);
  const ixt_kafka_meta_t *y = ixt_kafka_meta(*(IxiaChangeEvent *const *)b);
  if (x->partition != y->partition) return x->partition < y->partition ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Decodes one message into an event carrying its metadata; NULL (message on
 * stderr) when it is not a change event. */
static IxiaChangeEvent *ks_decode(const rd_kafka_message_t *m) {
  IxiaChangeEvent *ev = g_object_new(IXIA_TYPE_CHANGE_EVENT, NULL);
  ixia_error_t *err = NULL;
  const char *why = NULL;
  if (!m->payload || m->len == 0)
    why = "empty value";
  else if (!ixia_thrift_deserialize(THRIFT_STRUCT(ev), m->payload, m->len, TRUE, &err))
    why = err->message;
  else if (!ev->__isset_op || !ev->__isset_version)
    why = "decoded, but op or version is missing";
  if (why) {
    fprintf(stderr, "ixt_kafka_consume_all: %s [%d] offset %" G_GINT64_FORMAT
                    ": undecodable message (%zu bytes): %s\n",
            rd_kafka_topic_name(m->rkt), (int)m->partition, (gint64)m->offset, m->len, why);
    ixia_error_destroy(err);
    g_object_unref(ev);
    return NULL;
  }
  ixt_kafka_meta_t *meta = g_new0(ixt_kafka_meta_t, 1);
  meta->key = m->key ? g_bytes_new(m->key, m->key_len) : NULL;
  meta->partition = m->partition;
  meta->offset = m->offset;
  meta->timestamp_ms = rd_kafka_message_timestamp(m, NULL);
  g_object_set_data_full(G_OBJECT(ev), KS_META_KEY, meta, ks_meta_free);
  return ev;
}

/* Partition count of topic, or -1 (message on stderr) after deadline.
 * Asks for all topics: a request naming the topic could create it (broker
 * auto-creation), and reading must not change what it reads. */
static int ks_partition_count(rd_kafka_t *rk, const char *topic, gint64 deadline) {
  int n = -1;
  const char *last = "no answer";
  while (n < 0) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, NULL, &md, 1000);
    if (err) {
      last = rd_kafka_err2str(err);
    } else {
      last = "no such topic";
      for (int i = 0; i < md->topic_cnt; i++) {
        if (strcmp(md->topics[i].topic, topic) != 0) continue;
        if (md->topics[i].err)
          last = rd_kafka_err2str(md->topics[i].err);
        else if (md->topics[i].partition_cnt > 0)
          n = md->topics[i].partition_cnt;
      }
    }
    if (md) rd_kafka_metadata_destroy(md);
    if (n < 0 && g_get_monotonic_time() >= deadline) break;
    if (n < 0) g_usleep(100000);
  }
  if (n < 0) fprintf(stderr, "ixt_kafka_consume_all: no metadata for topic %s: %s\n", topic, last);
  return n;
}

GPtrArray *ixt_kafka_consume_all(const char *bootstrap, const char *topic, int idle_ms,
                                 int max_wait_ms) {
  static _Atomic gint counter;
  gint64 start = g_get_monotonic_time();
  gint64 deadline = start + (gint64)max_wait_ms * G_TIME_SPAN_MILLISECOND;
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  /* A group id of its own, and nothing committed: the read leaves no trace
   * another consumer could see. */
  char *group = g_strdup_printf("ixt-consume-%d-%d", (int)getpid(), atomic_fetch_add(&counter, 1));
  gboolean ok = ks_conf_common(conf, bootstrap) && ks_conf_set(conf, "group.id", group) &&
                ks_conf_set(conf, "enable.auto.commit", "false") &&
                ks_conf_set(conf, "enable.auto.offset.store", "false") &&
                ks_conf_set(conf, "enable.partition.eof", "true") &&
                ks_conf_set(conf, "auto.offset.reset", "earliest") &&
                ks_conf_set(conf, "fetch.wait.max.ms", "50");
  g_free(group);
  char errstr[512];
  rd_kafka_t *rk = ok ? rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr) : NULL;
  if (!rk) {
    if (ok) fprintf(stderr, "ixt_kafka_consume_all: %s\n", errstr);
    rd_kafka_conf_destroy(conf);
    return NULL;
  }
  int n = ks_partition_count(rk, topic, deadline);
  if (n < 0) {
    rd_kafka_destroy(rk);
    return NULL;
  }
  rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(n);
  for (int i = 0; i < n; i++)
    rd_kafka_topic_partition_list_add(parts, topic, i)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_resp_err_t aerr = rd_kafka_assign(rk, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  GPtrArray *events = g_ptr_array_new_with_free_func(g_object_unref);
  gboolean *reached = g_new0(gboolean, n); /* sticky: this partition's end was seen */
  gboolean *at_end = g_new0(gboolean, n);  /* at the end now */
  gboolean bad = aerr != RD_KAFKA_RESP_ERR_NO_ERROR;
  if (bad) fprintf(stderr, "ixt_kafka_consume_all: assign: %s\n", rd_kafka_err2str(aerr));
  gint64 last_message = start;
  for (;;) {
    gint64 now = g_get_monotonic_time();
    gboolean all_at_end = TRUE, all_reached = TRUE;
    for (int i = 0; i < n; i++) {
      all_at_end = all_at_end && at_end[i];
      all_reached = all_reached && reached[i];
    }
    if (bad) break;
    if (all_at_end && now - last_message >= (gint64)idle_ms * G_TIME_SPAN_MILLISECOND) break;
    if (now >= deadline) {
      if (!all_reached) {
        GString *s = g_string_new(NULL);
        for (int i = 0; i < n; i++)
          if (!reached[i]) g_string_append_printf(s, " %d", i);
        fprintf(stderr,
                "ixt_kafka_consume_all: %s: partition(s)%s not read to the end within %d ms\n",
                topic, s->str, max_wait_ms);
        g_string_free(s, TRUE);
        bad = TRUE;
      }
      break;
    }
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
    if (!m) continue;
    int p = m->partition;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (p >= 0 && p < n) reached[p] = at_end[p] = TRUE;
    } else if (m->err) {
      /* Transient (a broker down, a leader moving): librdkafka retries. */
      fprintf(stderr, "ixt_kafka_consume_all: %s\n", rd_kafka_message_errstr(m));
    } else {
      IxiaChangeEvent *ev = ks_decode(m);
      if (ev)
        g_ptr_array_add(events, ev);
      else
        bad = TRUE;
      if (p >= 0 && p < n) at_end[p] = FALSE;
      last_message = g_get_monotonic_time();
    }
    rd_kafka_message_destroy(m);
  }
  g_free(reached);
  g_free(at_end);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  if (bad) {
    g_ptr_array_unref(events);
    return NULL;
  }
  g_ptr_array_sort(events, ks_event_cmp);
  return events;
}

/* ---- producer ----------------------------------------------------------- */

struct ixt_producer {
  rd_kafka_t *rk;
  guint delivered;
  guint failed;
  rd_kafka_resp_err_t last_error;
  char *stats;      /* latest librdkafka statistics JSON */
  gint64 stats_at;  /* when it arrived (monotonic us) */
};

/* Called from rd_kafka_poll on the caller's thread. */
static int ks_stats_cb(rd_kafka_t *rk, char *json, size_t json_len, void *opaque) {
  (void)rk;
  ixt_producer_t *p = opaque;
  g_free(p->stats);
  p->stats = g_strndup(json, json_len);
  p->stats_at = g_get_monotonic_time();
  return 0; /* librdkafka frees json */
}

/* Called from rd_kafka_poll/flush on the caller's thread. */
static void ks_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  (void)rk;
  ixt_producer_t *p = opaque;
  if (m->err) {
    p->last_error = m->err;
    p->failed++;
  } else {
    p->delivered++;
  }
}

ixt_producer_t *ixt_producer_new(const char *bootstrap, const char *const *conf_pairs) {
  ixt_producer_t *p = g_new0(ixt_producer_t, 1);
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rd_kafka_conf_set_dr_msg_cb(conf, ks_dr_cb);
  rd_kafka_conf_set_stats_cb(conf, ks_stats_cb);
  rd_kafka_conf_set_opaque(conf, p);
  gboolean ok = ks_conf_common(conf, bootstrap) && ks_conf_set(conf, "acks", "all") &&
                ks_conf_set(conf, "enable.idempotence", "true") &&
                ks_conf_set(conf, "linger.ms", "1") &&
                ks_conf_set(conf, "retry.backoff.ms", "50") &&
                ks_conf_set(conf, "statistics.interval.ms", "100");
  for (const char *const *c = conf_pairs; ok && c && *c; c++) {
    const char *eq = strchr(*c, '=');
    if (!eq) {
      fprintf(stderr, "ixt_producer_new: '%s' is not name=value\n", *c);
      ok = FALSE;
      break;
    }
    char *name = g_strndup(*c, (gsize)(eq - *c));
    ok = ks_conf_set(conf, name, eq + 1);
    g_free(name);
  }
  char errstr[512];
  if (ok) {
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!p->rk) fprintf(stderr, "ixt_producer_new: %s\n", errstr);
  }
  if (!p->rk) {
    rd_kafka_conf_destroy(conf);
    g_free(p);
    return NULL;
  }
  return p;
}

void ixt_producer_destroy(ixt_producer_t *p) {
  if (!p) return;
  /* Pending messages are purged, not waited for: a test that cares waits
   * with ixt_producer_wait first. */
  rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_poll(p->rk, 0);
  rd_kafka_destroy(p->rk);
  g_free(p->stats);
  g_free(p);
}

gboolean ixt_producer_send(ixt_producer_t *p, const char *topic, const void *key, size_t key_len,
                           const void *value, size_t value_len) {
  rd_kafka_resp_err_t err = rd_kafka_producev(
      p->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, key ? key_len : 0),
      RD_KAFKA_V_VALUE((void *)value, value_len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_END);
  if (err) fprintf(stderr, "ixt_producer_send: %s\n", rd_kafka_err2str(err));
  rd_kafka_poll(p->rk, 0);
  return err == RD_KAFKA_RESP_ERR_NO_ERROR;
}

gboolean ixt_producer_send_event(ixt_producer_t *p, const char *topic, IxiaChangeEvent *ev,
                                 const void *key, size_t key_len) {
  ixia_error_t *err = NULL;
  GByteArray *bytes = ixia_thrift_serialize(THRIFT_STRUCT(ev), TRUE, &err);
  if (!bytes) {
    fprintf(stderr, "ixt_producer_send_event: %s\n", err->message);
    ixia_error_destroy(err);
    return FALSE;
  }
  gboolean ok = ixt_producer_send(p, topic, key, key_len, bytes->data, bytes->len);
  g_byte_array_unref(bytes);
  return ok;
}

int ixt_producer_wait(ixt_producer_t *p, int timeout_ms) {
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * G_TIME_SPAN_MILLISECOND;
  for (;;) {
    int pending = rd_kafka_outq_len(p->rk);
    gint64 left_ms = (deadline - g_get_monotonic_time()) / G_TIME_SPAN_MILLISECOND;
    if (pending == 0 || left_ms <= 0) return pending;
    rd_kafka_poll(p->rk, (int)MIN(left_ms, 50));
  }
}

guint ixt_producer_delivered(const ixt_producer_t *p) { return p->delivered; }
guint ixt_producer_failed(const ixt_producer_t *p) { return p->failed; }
rd_kafka_resp_err_t ixt_producer_last_error(const ixt_producer_t *p) { return p->last_error; }

gint64 ixt_producer_requests(ixt_producer_t *p, const char *api, int timeout_ms) {
  gint64 asked = g_get_monotonic_time();
  gint64 deadline = asked + (gint64)timeout_ms * G_TIME_SPAN_MILLISECOND;
  while (p->stats_at <= asked && g_get_monotonic_time() < deadline) rd_kafka_poll(p->rk, 20);
  if (p->stats_at <= asked) {
    fprintf(stderr, "ixt_producer_requests: no statistics within %d ms\n", timeout_ms);
    return -1;
  }
  cJSON *root = cJSON_Parse(p->stats);
  gint64 total = root ? 0 : -1;
  const cJSON *brokers = cJSON_GetObjectItemCaseSensitive(root, "brokers");
  const cJSON *b;
  cJSON_ArrayForEach(b, brokers) {
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(b, "req");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(req, api);
    if (cJSON_IsNumber(n)) total += (gint64)n->valuedouble;
  }
  cJSON_Delete(root);
  return total;
}

/* ---------- the whole pipeline ---------- */

gboolean ixt_stack_start(ixt_stack_t *s, guint shards, const char *const *api_sets) {
  ixt_stack_opts_t o = {.api_sets = api_sets};
  return ixt_stack_start_opts(s, shards, &o);
}

gboolean ixt_stack_start_opts(ixt_stack_t *s, guint shards, const ixt_stack_opts_t *o) {
  memset(s, 0, sizeof *s);
  s->dir = ixt_tmpdir();
  s->shards = shards;
  if (!ixt_memcached_start(&s->mc, 0)) return FALSE;
  if (!ixt_devkafka_start_sets(&s->kafka, s->dir, o->brokers > 0 ? o->brokers : 1, 4, o->devkafka_sets))
    return FALSE;
  GPtrArray *ssets = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(ssets, g_strdup_printf("kafka.brokers=%s", s->kafka.bootstrap));
  for (const char *const *a = o->sink_sets; a && *a; a++) g_ptr_array_add(ssets, g_strdup(*a));
  g_ptr_array_add(ssets, NULL);
  gboolean ok = ixt_daemon_start(&s->sink, "ixia-replication-sink", "sink", s->dir,
                                 (const char *const *)ssets->pdata);
  g_ptr_array_unref(ssets);
  const char *parts[2] = {shards == 1 ? "" : "0-1", "2-3"};
  /* The shards repair themselves from the API, which starts after them:
   * they read its port from the file it writes. */
  GPtrArray *isets = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(isets, g_strdup_printf("indexer.api_port_file=%s/api.port", s->dir));
  for (const char *const *a = o->indexer_sets; a && *a; a++) g_ptr_array_add(isets, g_strdup(*a));
  g_ptr_array_add(isets, NULL);
  /* The API calls shard 0 over a Unix-domain socket (indexer.socket), as
   * ixia-local does, and shard 1 over TCP: the pipeline's tests cover both
   * (tools and tests still reach every shard on its TCP port). */
  char *sock0 = g_strdup_printf("%s/shard0.sock", s->dir);
  g_ptr_array_insert(isets, (gint)isets->len - 1, g_strdup_printf("indexer.socket=%s", sock0));
  for (guint i = 0; ok && i < shards; i++) {
    s->indexer_dir[i] = g_strdup_printf("%s/shard%u", s->dir, i);
    ok = ixt_indexer_start_sets(&s->indexer[i], s->indexer_dir[i], s->kafka.bootstrap, parts[i],
                                s->mc.addr, (const char *const *)isets->pdata);
    if (i == 0) { /* the socket is shard 0's alone */
      g_ptr_array_remove_index(isets, isets->len - 2);
    }
  }
  g_ptr_array_unref(isets);
  if (!ok) {
    g_free(sock0);
    return FALSE;
  }
  GPtrArray *sets = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(sets, g_strdup_printf("replication.sinks=%s", s->sink.addr));
  if (shards == 1) g_ptr_array_add(sets, g_strdup_printf("query.indexers=unix:%s", sock0));
  if (shards == 2)
    g_ptr_array_add(sets, g_strdup_printf("query.indexers=unix:%s,%s", sock0, s->indexer[1].addr));
  g_free(sock0);
  g_ptr_array_add(sets, g_strdup("replication.retry_max_ms=500"));
  for (const char *const *a = o->api_sets; a && *a; a++) g_ptr_array_add(sets, g_strdup(*a));
  g_ptr_array_add(sets, NULL);
  ok = ixt_api_start(&s->api, s->dir, s->mc.addr, (const char *const *)sets->pdata);
  g_ptr_array_unref(sets);
  return ok;
}

gboolean ixt_stack_stop(ixt_stack_t *s) {
  gboolean clean = ixt_api_stop(&s->api);
  for (guint i = 0; i < s->shards; i++) {
    clean = ixt_daemon_stop(&s->indexer[i]) && clean;
    g_free(s->indexer_dir[i]);
  }
  clean = ixt_daemon_stop(&s->sink) && clean;
  clean = ixt_devkafka_stop(&s->kafka) && clean;
  ixt_memcached_stop(&s->mc);
  g_free(s->dir);
  return clean;
}
