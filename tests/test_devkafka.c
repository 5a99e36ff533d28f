/* Integration test of ixia-devkafka: a real daemon (3 brokers, 4
 * partitions), change events produced and consumed by this separate
 * process through it, and every fault-injection command of its control
 * port. Each test uses its own namespace, so it only looks at its own
 * events in the shared topic. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "kafka_support.h"
#include "support.h"

#define TOPIC "ixia.changes"
#define BROKERS 3
#define PARTITIONS 4
#define CONSUME_IDLE_MS 300
#define CONSUME_MAX_MS 15000

static ixt_devkafka_t K;

static int suite_init(void) {
  char *dir = ixt_tmpdir();
  gboolean ok = ixt_devkafka_start(&K, dir, BROKERS, PARTITIONS);
  g_free(dir);
  return ok ? 0 : -1;
}

static int suite_clean(void) { return ixt_devkafka_stop(&K) ? 0 : -1; }

/* Sends a control command that must succeed; returns the reply. */
static char *control_ok(const char *command) {
  char *reply = NULL;
  gboolean ok = ixt_devkafka_control(&K, command, &reply);
  if (!ok) fprintf(stderr, "control '%s' -> %s\n", command, reply);
  CU_ASSERT(ok);
  return reply;
}

static void control_ok_free(const char *command) { g_free(control_ok(command)); }

static IxiaChangeEvent *make_event(const char *ns, const char *key, gint64 version,
                                   const char *doc) {
  IxiaChangeEvent *ev = g_object_new(IXIA_TYPE_CHANGE_EVENT, NULL);
  ev->__isset_format = TRUE;
  ev->op = doc ? IXIA_CHANGE_OP_PUT : IXIA_CHANGE_OP_DELETE;
  ev->__isset_op = TRUE;
  ev->ns = g_strdup(ns);
  ev->__isset_ns = TRUE;
  ev->table = g_strdup("t");
  ev->__isset_table = TRUE;
  ev->key = g_byte_array_new();
  g_byte_array_append(ev->key, (const guint8 *)key, (guint)strlen(key));
  ev->__isset_key = TRUE;
  ev->version = version;
  ev->__isset_version = TRUE;
  if (doc) {
    ev->doc = g_strdup(doc);
    ev->__isset_doc = TRUE;
  }
  ev->timestamp_ms = g_get_real_time() / 1000;
  ev->__isset_timestamp_ms = TRUE;
  return ev;
}

/* Produces a PUT of key at version (message key = key). */
static gboolean send_put(ixt_producer_t *p, const char *ns, const char *key, gint64 version) {
  char *doc = g_strdup_printf("{\"k\":\"%s\",\"v\":%" G_GINT64_FORMAT "}", key, version);
  IxiaChangeEvent *ev = make_event(ns, key, version, doc);
  gboolean ok = ixt_producer_send_event(p, TOPIC, ev, key, strlen(key));
  g_object_unref(ev);
  g_free(doc);
  return ok;
}

static ixt_producer_t *producer(const char *const *conf) {
  ixt_producer_t *p = ixt_producer_new(K.bootstrap, conf);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  return p;
}

/* The events of namespace ns in the topic (all partitions, from the
 * start, sorted by partition and offset), or NULL if the topic could not be
 * read completely. */
static GPtrArray *consume_ns(const char *ns) {
  GPtrArray *all = ixt_kafka_consume_all(K.bootstrap, TOPIC, CONSUME_IDLE_MS, CONSUME_MAX_MS);
  CU_ASSERT_PTR_NOT_NULL(all);
  if (!all) return NULL;
  for (guint i = all->len; i-- > 0;) {
    IxiaChangeEvent *ev = g_ptr_array_index(all, i);
    if (g_strcmp0(ev->ns, ns) != 0) g_ptr_array_remove_index(all, i);
  }
  return all;
}

/* TRUE when ev's Kafka message key is key. */
static gboolean has_key(IxiaChangeEvent *ev, const char *key) {
  const ixt_kafka_meta_t *m = ixt_kafka_meta(ev);
  return m && m->key && g_bytes_get_size(m->key) == strlen(key) &&
         memcmp(g_bytes_get_data(m->key, NULL), key, strlen(key)) == 0;
}

/* The event with message key key at version; NULL if none. */
static IxiaChangeEvent *find(GPtrArray *events, const char *key, gint64 version) {
  for (guint i = 0; events && i < events->len; i++) {
    IxiaChangeEvent *ev = g_ptr_array_index(events, i);
    if (has_key(ev, key) && ev->version == version) return ev;
  }
  return NULL;
}

static guint count_key(GPtrArray *events, const char *key) {
  guint n = 0;
  for (guint i = 0; events && i < events->len; i++) n += has_key(g_ptr_array_index(events, i), key);
  return n;
}

/* Sends raw bytes on a fresh control connection, closes the sending side
 * (EOF) and reads until the server closes it or n_lines lines arrived. */
static char *control_raw(const char *bytes, gsize len, guint n_lines) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)K.control_port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct timeval tv = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  GString *in = g_string_new(NULL);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      send(fd, bytes, len, MSG_NOSIGNAL) == (ssize_t)len && shutdown(fd, SHUT_WR) == 0) {
    guint lines = 0;
    while (lines < n_lines) {
      char buf[256];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; i++) lines += buf[i] == '\n';
      g_string_append_len(in, buf, n);
    }
  }
  close(fd);
  return g_string_free(in, FALSE);
}

static void test_control_basics(void) {
  char *reply = control_ok("ping");
  CU_ASSERT_STRING_EQUAL(reply, "ok pong");
  g_free(reply);

  reply = control_ok("bootstrap");
  char *expected = g_strdup_printf("ok %s", K.bootstrap);
  CU_ASSERT_STRING_EQUAL(reply, expected);
  g_free(expected);
  g_free(reply);

  /* Loopback only, one address per broker. */
  char **addrs = g_strsplit(K.bootstrap, ",", -1);
  CU_ASSERT_EQUAL(g_strv_length(addrs), BROKERS);
  for (char **a = addrs; *a; a++) CU_ASSERT(g_str_has_prefix(*a, "127.0.0.1:"));
  g_strfreev(addrs);

  reply = control_ok("help");
  CU_ASSERT_PTR_NOT_NULL(strstr(reply, "produce-errors"));
  g_free(reply);
}

/* Every reply is one line, "error ..." for anything malformed, and the
 * server keeps serving. */
static void test_control_errors(void) {
  static const struct {
    const char *command;
    const char *reply_prefix;
  } cases[] = {
      {"frobnicate", "error unknown command 'frobnicate'"},
      {"", "error empty command"},
      {"   ", "error empty command"},
      {"ping extra", "error ping takes no arguments"},
      {"broker-down", "error usage: broker-down ID|all"},
      {"broker-down 0", "error broker ID must be 1..3"},
      {"broker-down 4", "error broker ID must be 1..3"},
      {"broker-up x", "error broker ID must be 1..3"},
      {"broker-up 1 2", "error usage: broker-up ID|all"},
      {"produce-errors 3", "error usage: produce-errors"},
      {"produce-errors 0 NOT_LEADER_FOR_PARTITION", "error COUNT must be"},
      {"produce-errors many NOT_LEADER_FOR_PARTITION", "error COUNT must be"},
      {"produce-errors 3 NO_SUCH_ERROR", "error unknown Kafka error 'NO_SUCH_ERROR'"},
      {"produce-errors 3 99999", "error unknown Kafka error '99999'"},
      {"produce-errors 3 NO_ERROR", "error NO_ERROR"},
      {"rtt 1", "error usage: rtt"},
      {"rtt 1 -5", "error MS must be"},
      {"rtt all 99999999", "error MS must be"},
      {"rtt 9 10", "error broker ID must be 1..3"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *reply = NULL;
    gboolean ok = ixt_devkafka_control(&K, cases[i].command, &reply);
    if (ok || !g_str_has_prefix(reply, cases[i].reply_prefix))
      fprintf(stderr, "control '%s' -> '%s', expected '%s...'\n", cases[i].command, reply,
              cases[i].reply_prefix);
    CU_ASSERT(!ok);
    CU_ASSERT(g_str_has_prefix(reply, cases[i].reply_prefix));
    g_free(reply);
  }

  /* A line over the limit is refused and the connection closed. */
  char *huge = g_strnfill(2000, 'x');
  char *reply = NULL;
  CU_ASSERT(!ixt_devkafka_control(&K, huge, &reply));
  CU_ASSERT(g_str_has_prefix(reply, "error line longer than"));
  g_free(reply);
  g_free(huge);

  /* Pipelined commands on one connection, CRLF tolerated, and a last line
   * without newline answered when the client closes its side. */
  const char pipelined[] = "ping\r\nbogus\nbootstrap";
  char *out = control_raw(pipelined, sizeof pipelined - 1, 3);
  char *expected = g_strdup_printf("ok pong\nerror unknown command 'bogus' (try help)\nok %s\n",
                                   K.bootstrap);
  CU_ASSERT_STRING_EQUAL(out, expected);
  g_free(expected);
  g_free(out);

  control_ok_free("ping");
}

/* Events produced by this process come back whole, once each, per key in
 * order, spread over the partitions. */
static void test_produce_consume(void) {
  const char *ns = "steady";
  ixt_producer_t *p = producer(NULL);
  enum { KEYS = 20, UPDATED = 5 };
  for (int i = 0; i < KEYS; i++) {
    char *key = g_strdup_printf("key-%02d", i);
    CU_ASSERT(send_put(p, ns, key, i + 1));
    g_free(key);
  }
  for (int i = 0; i < UPDATED; i++) {
    char *key = g_strdup_printf("key-%02d", i);
    CU_ASSERT(send_put(p, ns, key, 100 + i));
    g_free(key);
  }
  IxiaChangeEvent *del = make_event(ns, "key-19", 200, NULL);
  CU_ASSERT(ixt_producer_send_event(p, TOPIC, del, "key-19", 6));
  g_object_unref(del);
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 10000), 0);
  CU_ASSERT_EQUAL(ixt_producer_delivered(p), KEYS + UPDATED + 1);
  CU_ASSERT_EQUAL(ixt_producer_failed(p), 0);
  ixt_producer_destroy(p);

  GPtrArray *events = consume_ns(ns);
  if (!events) return;
  CU_ASSERT_EQUAL(events->len, KEYS + UPDATED + 1);

  IxiaChangeEvent *ev = find(events, "key-03", 4);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  CU_ASSERT_EQUAL(ev->op, IXIA_CHANGE_OP_PUT);
  CU_ASSERT_EQUAL(ev->format, 1);
  CU_ASSERT_STRING_EQUAL(ev->ns, ns);
  CU_ASSERT_STRING_EQUAL(ev->table, "t");
  CU_ASSERT_EQUAL(ev->key->len, 6);
  CU_ASSERT(memcmp(ev->key->data, "key-03", 6) == 0);
  CU_ASSERT_STRING_EQUAL(ev->doc, "{\"k\":\"key-03\",\"v\":4}");
  CU_ASSERT(ixt_kafka_meta(ev)->timestamp_ms > 0);
  ev = find(events, "key-19", 200);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  CU_ASSERT_EQUAL(ev->op, IXIA_CHANGE_OP_DELETE);
  CU_ASSERT(!ev->__isset_doc);

  /* Per key: one partition, versions increasing in offset order; overall
   * more than one partition in use. */
  GHashTable *partition_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GHashTable *last_version = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  GHashTable *partitions = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < events->len; i++) {
    ev = g_ptr_array_index(events, i);
    const ixt_kafka_meta_t *m = ixt_kafka_meta(ev);
    char *key = g_strndup((const char *)ev->key->data, ev->key->len);
    gpointer part = g_hash_table_lookup(partition_of, key);
    if (part) CU_ASSERT_EQUAL(GPOINTER_TO_INT(part) - 1, m->partition);
    if (i > 0 && ixt_kafka_meta(g_ptr_array_index(events, i - 1))->partition == m->partition)
      CU_ASSERT(ixt_kafka_meta(g_ptr_array_index(events, i - 1))->offset < m->offset);
    g_hash_table_replace(partition_of, g_strdup(key), GINT_TO_POINTER(m->partition + 1));
    gint64 *last = g_hash_table_lookup(last_version, key);
    if (last) CU_ASSERT(ev->version > *last);
    g_hash_table_replace(last_version, g_strdup(key), g_memdup2(&ev->version, sizeof(gint64)));
    g_hash_table_add(partitions, GINT_TO_POINTER(m->partition + 1));
    g_free(key);
  }
  CU_ASSERT_EQUAL(g_hash_table_size(last_version), KEYS);
  CU_ASSERT(g_hash_table_size(partitions) >= 2);
  for (int i = 0; i < KEYS; i++) {
    char *key = g_strdup_printf("key-%02d", i);
    gint64 *last = g_hash_table_lookup(last_version, key);
    CU_ASSERT_PTR_NOT_NULL(last);
    if (last) CU_ASSERT_EQUAL(*last, i == KEYS - 1 ? 200 : i < UPDATED ? 100 + i : i + 1);
    g_free(key);
  }
  g_hash_table_destroy(partition_of);
  g_hash_table_destroy(last_version);
  g_hash_table_destroy(partitions);
  g_ptr_array_unref(events);
}

/* produce-errors: a permanent error reaches the producer as the delivery
 * error; retriable ones (what a leader change looks like) are ridden over
 * by the idempotent acks=all producer (the sink's settings), which still
 * writes each message exactly once. */
static void test_produce_errors(void) {
  const char *ns = "errors";
  const char *const plain[] = {"enable.idempotence=false", NULL};
  ixt_producer_t *q = producer(plain);
  CU_ASSERT(send_put(q, ns, "warm-up", 1));
  CU_ASSERT_EQUAL(ixt_producer_wait(q, 10000), 0);
  CU_ASSERT_EQUAL(ixt_producer_delivered(q), 1);

  /* By code... */
  char *reply = control_ok("produce-errors 1 10");
  CU_ASSERT_STRING_EQUAL(reply, "ok queued 1 x MSG_SIZE_TOO_LARGE (10) for Produce requests");
  g_free(reply);
  CU_ASSERT(send_put(q, ns, "rejected-1", 1));
  CU_ASSERT_EQUAL(ixt_producer_wait(q, 10000), 0);
  CU_ASSERT_EQUAL(ixt_producer_failed(q), 1);
  CU_ASSERT_EQUAL(ixt_producer_last_error(q), RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);

  /* ...and by name, in any case, with or without librdkafka's prefix. */
  reply = control_ok("produce-errors 1 rd_kafka_resp_err_invalid_required_acks");
  CU_ASSERT_STRING_EQUAL(reply, "ok queued 1 x INVALID_REQUIRED_ACKS (21) for Produce requests");
  g_free(reply);
  CU_ASSERT(send_put(q, ns, "rejected-2", 1));
  CU_ASSERT_EQUAL(ixt_producer_wait(q, 10000), 0);
  CU_ASSERT_EQUAL(ixt_producer_failed(q), 2);
  CU_ASSERT_EQUAL(ixt_producer_last_error(q), RD_KAFKA_RESP_ERR_INVALID_REQUIRED_ACKS);
  CU_ASSERT_EQUAL(ixt_producer_delivered(q), 1);
  ixt_producer_destroy(q);

  /* Three leader errors. Messages go one at a time, so without errors each
   * takes exactly one Produce request: the count shows the errors hit. */
  reply = control_ok("produce-errors 3 NOT_LEADER_FOR_PARTITION");
  CU_ASSERT_STRING_EQUAL(reply,
                         "ok queued 3 x NOT_LEADER_FOR_PARTITION (6) for Produce requests");
  g_free(reply);
  ixt_producer_t *p = producer(NULL);
  enum { N = 5 };
  for (int i = 0; i < N; i++) {
    char *key = g_strdup_printf("retried-%d", i);
    CU_ASSERT(send_put(p, ns, key, 1));
    CU_ASSERT_EQUAL(ixt_producer_wait(p, 20000), 0);
    g_free(key);
  }
  CU_ASSERT_EQUAL(ixt_producer_delivered(p), N);
  CU_ASSERT_EQUAL(ixt_producer_failed(p), 0);
  gint64 requests = ixt_producer_requests(p, "Produce", 5000);
  if (requests < N + 3) fprintf(stderr, "Produce requests: %" G_GINT64_FORMAT "\n", requests);
  CU_ASSERT(requests >= N + 3);

  /* All three were used up: the next message needs a single request. */
  CU_ASSERT(send_put(p, ns, "after", 1));
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 10000), 0);
  CU_ASSERT_EQUAL(ixt_producer_requests(p, "Produce", 5000), requests + 1);
  ixt_producer_destroy(p);

  GPtrArray *events = consume_ns(ns);
  if (!events) return;
  CU_ASSERT_EQUAL(events->len, N + 2);
  CU_ASSERT_EQUAL(count_key(events, "warm-up"), 1);
  CU_ASSERT_EQUAL(count_key(events, "after"), 1);
  CU_ASSERT_EQUAL(count_key(events, "rejected-1"), 0);
  CU_ASSERT_EQUAL(count_key(events, "rejected-2"), 0);
  for (int i = 0; i < N; i++) {
    char *key = g_strdup_printf("retried-%d", i);
    CU_ASSERT_EQUAL(count_key(events, key), 1);
    g_free(key);
  }
  g_ptr_array_unref(events);
}

/* With every broker down nothing is acknowledged: a patient producer waits,
 * an impatient one times out; once they are up the patient one delivers. */
static void test_broker_down_up(void) {
  const char *ns = "outage";
  const char *const patient[] = {"message.timeout.ms=60000", NULL};
  const char *const impatient[] = {"message.timeout.ms=1000", NULL};
  ixt_producer_t *p = producer(patient);
  CU_ASSERT(send_put(p, ns, "before", 1));
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 10000), 0);
  CU_ASSERT_EQUAL(ixt_producer_delivered(p), 1);

  fprintf(stderr, "(librdkafka reports of refused connections follow; they are expected)\n");
  char *reply = control_ok("broker-down all");
  CU_ASSERT_STRING_EQUAL(reply, "ok all 3 brokers down");
  g_free(reply);
  CU_ASSERT(send_put(p, ns, "during", 2));
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 1500), 1);
  CU_ASSERT_EQUAL(ixt_producer_delivered(p), 1);
  CU_ASSERT_EQUAL(ixt_producer_failed(p), 0);

  ixt_producer_t *q = producer(impatient);
  CU_ASSERT(send_put(q, ns, "lost", 1));
  CU_ASSERT_EQUAL(ixt_producer_wait(q, 10000), 0);
  CU_ASSERT_EQUAL(ixt_producer_failed(q), 1);
  CU_ASSERT_EQUAL(ixt_producer_last_error(q), RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
  ixt_producer_destroy(q);

  /* One broker at a time works too. */
  reply = control_ok("broker-up 2");
  CU_ASSERT_STRING_EQUAL(reply, "ok broker 2 up");
  g_free(reply);
  reply = control_ok("broker-up all");
  CU_ASSERT_STRING_EQUAL(reply, "ok all 3 brokers up");
  g_free(reply);
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 20000), 0);
  CU_ASSERT_EQUAL(ixt_producer_delivered(p), 2);
  CU_ASSERT_EQUAL(ixt_producer_failed(p), 0);
  ixt_producer_destroy(p);

  GPtrArray *events = consume_ns(ns);
  if (!events) return;
  CU_ASSERT_EQUAL(events->len, 2);
  CU_ASSERT_PTR_NOT_NULL(find(events, "before", 1));
  CU_ASSERT_PTR_NOT_NULL(find(events, "during", 2));
  CU_ASSERT_EQUAL(count_key(events, "lost"), 0);
  g_ptr_array_unref(events);
}

static gint64 timed_send(ixt_producer_t *p, const char *ns, const char *key) {
  gint64 t0 = g_get_monotonic_time();
  CU_ASSERT(send_put(p, ns, key, 1));
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 20000), 0);
  return (g_get_monotonic_time() - t0) / 1000;
}

/* rtt delays every response. */
static void test_rtt(void) {
  const char *ns = "rtt";
  ixt_producer_t *p = producer(NULL);
  timed_send(p, ns, "warm-up");
  char *reply = control_ok("rtt all 600");
  CU_ASSERT_STRING_EQUAL(reply, "ok all 3 brokers rtt 600 ms");
  g_free(reply);
  gint64 slow_ms = timed_send(p, ns, "slow");
  reply = control_ok("rtt 2 0");
  CU_ASSERT_STRING_EQUAL(reply, "ok broker 2 rtt 0 ms");
  g_free(reply);
  control_ok_free("rtt all 0");
  gint64 fast_ms = timed_send(p, ns, "fast");
  CU_ASSERT(slow_ms >= 550);
  CU_ASSERT(fast_ms < 450);
  if (slow_ms < 550 || fast_ms >= 450)
    fprintf(stderr, "rtt: delivery took %" G_GINT64_FORMAT " ms at rtt 600, %" G_GINT64_FORMAT
                    " ms at rtt 0\n", slow_ms, fast_ms);
  CU_ASSERT_EQUAL(ixt_producer_delivered(p), 3);
  ixt_producer_destroy(p);
}

/* consume_all refuses what it cannot vouch for: undecodable messages and a
 * topic it cannot read. */
static void test_consume_all_failures(void) {
  ixt_producer_t *p = producer(NULL);
  static const char garbage[] = "\xff\xfe not a change event";
  CU_ASSERT(ixt_producer_send(p, "garbage", "k", 1, garbage, sizeof garbage - 1));
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 10000), 0);
  CU_ASSERT_EQUAL(ixt_producer_delivered(p), 1);
  ixt_producer_destroy(p);
  fprintf(stderr, "(an 'undecodable message' report follows; it is expected)\n");
  CU_ASSERT_PTR_NULL(ixt_kafka_consume_all(K.bootstrap, "garbage", CONSUME_IDLE_MS, 10000));

  fprintf(stderr, "(a 'no metadata' report follows; it is expected)\n");
  CU_ASSERT_PTR_NULL(ixt_kafka_consume_all(K.bootstrap, "no-such-topic", CONSUME_IDLE_MS, 1500));
}

/* "backlog": the budget, then I:FIRST-NEXT:BYTES per partition. Returns
 * the budget; first/next of `partition` (may be NULL). */
static gint64 backlog(ixt_devkafka_t *k, int partition, gint64 *first, gint64 *next) {
  char *reply = NULL;
  CU_ASSERT_TRUE(ixt_devkafka_control(k, "backlog", &reply));
  gint64 budget = -1;
  if (reply && sscanf(reply, "ok budget %" G_GINT64_FORMAT, &budget) != 1) budget = -1;
  char *want = g_strdup_printf(" %d:", partition);
  const char *at = reply ? strstr(reply, want) : NULL;
  long long f = -1, n = -1;
  if (at) sscanf(at + strlen(want), "%lld-%lld", &f, &n);
  if (first) *first = f;
  if (next) *next = n;
  g_free(want);
  g_free(reply);
  return budget;
}

/* ~bytes of events with 1 KiB documents into `ns` of k's topic. */
static void fill(ixt_devkafka_t *k, const char *ns, gsize bytes) {
  ixt_producer_t *p = ixt_producer_new(k->bootstrap, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  char *doc = g_strdup_printf("{\"pad\":\"%01000d\"}", 0);
  for (gsize i = 0; i * 1100 < bytes; i++) {
    char key[32];
    g_snprintf(key, sizeof key, "k%" G_GSIZE_FORMAT, i);
    IxiaChangeEvent *ev = make_event(ns, key, (gint64)i + 1, doc);
    CU_ASSERT(ixt_producer_send_event(p, TOPIC, ev, key, strlen(key)));
    g_object_unref(ev);
  }
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 30000), 0);
  g_free(doc);
  ixt_producer_destroy(p);
}

/* devkafka.memory_mb bounds the backlog: split over the partitions, the
 * oldest events beyond it are deleted; the default (1 GiB) keeps a burst
 * that librdkafka's built-in 5 MiB per partition would have cut. */
static void test_backlog_budget(void) {
  /* The shared daemon runs the default budget. */
  CU_ASSERT_EQUAL(backlog(&K, 0, NULL, NULL), 1024LL * 1024 * 1024 / PARTITIONS);
  fill(&K, "budget", 24 * 1024 * 1024);
  for (int p = 0; p < PARTITIONS; p++) {
    gint64 first = -1, next = -1;
    backlog(&K, p, &first, &next);
    CU_ASSERT_EQUAL(first, 0);
    CU_ASSERT_TRUE(next > 5000);
  }
  /* 4 MiB over one partition: 12 MiB in, the oldest are gone. The mock
   * deletes whole record batches, and a producer under load builds them up
   * to batch.size (1 MB): with a budget of 1 MiB one such batch left the
   * backlog empty (first == next, seen once under a loaded machine), so the
   * budget is several batches. */
  ixt_devkafka_t small = {0};
  char *dir = ixt_tmpdir();
  const char *sets[] = {"devkafka.memory_mb=4", NULL};
  CU_ASSERT_TRUE_FATAL(ixt_devkafka_start_sets(&small, dir, 1, 1, sets));
  CU_ASSERT_EQUAL(backlog(&small, 0, NULL, NULL), 4 * 1024 * 1024);
  fill(&small, "budget", 12 * 1024 * 1024);
  gint64 first = -1, next = -1;
  backlog(&small, 0, &first, &next);
  CU_ASSERT_TRUE(first > 0);
  CU_ASSERT_TRUE(next > first);
  /* What remains is at most the budget, give or take a record batch
   * (~1,100 bytes an event). */
  CU_ASSERT_TRUE((next - first) * 1000 < 5 * 1024 * 1024);
  CU_ASSERT_TRUE(ixt_devkafka_stop(&small));
  g_free(dir);
}

/* devkafka.max_batches bounds the record batches kept (the mock walks them
 * all to find each fetch's position): events sent one at a time, each its
 * own batch, leave at most the cap, the newest, and "backlog" counts them;
 * a consumer reads what is left from the first kept offset on; the
 * "max-batches" command changes the cap of a running daemon. */
/* backlog's batch cap and partition 0's FIRST-NEXT:BYTES:BATCHES. */
static void backlog_batches(ixt_devkafka_t *k, long long *cap, long long *first, long long *next,
                            long long *batches) {
  char *reply = NULL;
  CU_ASSERT_TRUE(ixt_devkafka_control(k, "backlog", &reply));
  const char *at = reply ? strstr(reply, "batches ") : NULL;
  long long bytes = -1;
  *cap = *first = *next = *batches = -1;
  if (at) sscanf(at, "batches %lld: 0:%lld-%lld:%lld:%lld", cap, first, next, &bytes, batches);
  g_free(reply);
}

static void test_backlog_batches(void) {
  ixt_devkafka_t k = {0};
  char *dir = ixt_tmpdir();
  const char *sets[] = {"devkafka.max_batches=16", NULL};
  CU_ASSERT_TRUE_FATAL(ixt_devkafka_start_sets(&k, dir, 1, 1, sets));
  ixt_producer_t *p = ixt_producer_new(k.bootstrap, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  for (int i = 0; i < 40; i++) {
    char key[32];
    g_snprintf(key, sizeof key, "b%d", i);
    IxiaChangeEvent *ev = make_event("batches", key, i + 1, "{\"n\":1}");
    CU_ASSERT(ixt_producer_send_event(p, TOPIC, ev, key, strlen(key)));
    g_object_unref(ev);
    CU_ASSERT_EQUAL(ixt_producer_wait(p, 30000), 0); /* one batch per event */
  }
  ixt_producer_destroy(p);
  long long cap, first, next, batches;
  backlog_batches(&k, &cap, &first, &next, &batches);
  CU_ASSERT_EQUAL(cap, 16);
  CU_ASSERT_EQUAL(next, 40);
  CU_ASSERT_EQUAL(batches, 16);
  CU_ASSERT_EQUAL(first, 40 - 16);
  char *reply = NULL;
  GPtrArray *events = ixt_kafka_consume_all(k.bootstrap, TOPIC, CONSUME_IDLE_MS, CONSUME_MAX_MS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(events);
  CU_ASSERT_EQUAL(events->len, 16);
  gint64 oldest = G_MAXINT64; /* the oldest kept: event 25 of 40 */
  for (guint i = 0; i < events->len; i++)
    oldest = MIN(oldest, ((IxiaChangeEvent *)g_ptr_array_index(events, i))->version);
  CU_ASSERT_EQUAL(oldest, 40 - 16 + 1);
  g_ptr_array_unref(events);
  /* "max-batches" lowers the cap at run time: the next batch leaves the
   * newest 4; a cap below one batch per partition, or not a number, is
   * refused and changes nothing. */
  CU_ASSERT_FALSE(ixt_devkafka_control(&k, "max-batches 0", &reply));
  CU_ASSERT_PTR_NOT_NULL(reply && strstr(reply, "error N must be 1..10000000"));
  g_free(reply);
  CU_ASSERT_FALSE(ixt_devkafka_control(&k, "max-batches four", &reply));
  CU_ASSERT_PTR_NOT_NULL(reply && g_str_has_prefix(reply, "error"));
  g_free(reply);
  CU_ASSERT_TRUE(ixt_devkafka_control(&k, "max-batches 4", &reply));
  CU_ASSERT_STRING_EQUAL(reply ? reply : "", "ok 4 record batches per partition (1 partitions)");
  g_free(reply);
  p = ixt_producer_new(k.bootstrap, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  IxiaChangeEvent *ev = make_event("batches", "b40", 41, "{\"n\":1}");
  CU_ASSERT(ixt_producer_send_event(p, TOPIC, ev, "b40", 3));
  g_object_unref(ev);
  CU_ASSERT_EQUAL(ixt_producer_wait(p, 30000), 0);
  ixt_producer_destroy(p);
  backlog_batches(&k, &cap, &first, &next, &batches);
  CU_ASSERT_EQUAL(cap, 4);
  CU_ASSERT_EQUAL(next, 41);
  CU_ASSERT_EQUAL(batches, 4);
  CU_ASSERT_EQUAL(first, 41 - 4);
  CU_ASSERT_TRUE(ixt_devkafka_stop(&k));
  g_free(dir);
}

/* reset-topic: what consumers see when a topic is deleted and created again
 * under them: nothing left, offsets from 0, and new events readable. */
static void test_reset_topic(void) {
  ixt_devkafka_t k = {0};
  char *dir = ixt_tmpdir();
  CU_ASSERT_TRUE_FATAL(ixt_devkafka_start(&k, dir, 1, 2));
  fill(&k, "before", 20 * 1100);
  gint64 first = -1, next = -1;
  backlog(&k, 0, &first, &next);
  CU_ASSERT_TRUE(next > 0);
  char *reply = NULL;
  CU_ASSERT_TRUE(ixt_devkafka_control(&k, "reset-topic", &reply));
  CU_ASSERT_PTR_NOT_NULL(reply && strstr(reply, "re-created"));
  g_free(reply);
  for (int p = 0; p < 2; p++) {
    backlog(&k, p, &first, &next);
    CU_ASSERT_EQUAL(first, 0);
    CU_ASSERT_EQUAL(next, 0);
  }
  /* The producer of the events before goes on; offsets start at 0. */
  fill(&k, "after", 3 * 1100);
  GPtrArray *events = ixt_kafka_consume_all(k.bootstrap, TOPIC, CONSUME_IDLE_MS, CONSUME_MAX_MS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(events);
  CU_ASSERT_EQUAL(events->len, 3);
  gint64 lowest = G_MAXINT64;
  for (guint i = 0; i < events->len; i++) {
    IxiaChangeEvent *ev = g_ptr_array_index(events, i);
    CU_ASSERT_STRING_EQUAL(ev->ns, "after");
    lowest = MIN(lowest, ixt_kafka_meta(ev)->offset);
  }
  CU_ASSERT_EQUAL(lowest, 0);
  g_ptr_array_unref(events);
  CU_ASSERT_TRUE(ixt_devkafka_stop(&k));
  g_free(dir);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("devkafka", suite_init, suite_clean);
  IXT_ADD(s, test_control_basics);
  IXT_ADD(s, test_control_errors);
  IXT_ADD(s, test_produce_consume);
  IXT_ADD(s, test_produce_errors);
  IXT_ADD(s, test_broker_down_up);
  IXT_ADD(s, test_rtt);
  IXT_ADD(s, test_consume_all_failures);
  IXT_ADD(s, test_backlog_budget);
  IXT_ADD(s, test_backlog_batches);
  IXT_ADD(s, test_reset_topic);
  return ixt_run();
}
