/* http_request: what a client sends to ixia-query-api's HTTP port.
 *
 * The input is the raw byte stream of one connection: request lines,
 * headers, bodies, several requests pipelined, or anything else. It goes
 * over a real loopback TCP connection to the API's real HTTP server in this
 * process (the acceptor that sniffs the first bytes, libmicrohttpd's parser,
 * the event loops and workers, every route of query-api/http_api.c) over a
 * real truth store (RocksDB in a temporary directory, unsynced) holding the
 * fuzz table and FUZZ_DOCS documents, and one real index shard holding the
 * same documents, served on a loopback port (as search_frame builds it), so
 * a query goes all the way: fan-out, the shard's search, the merge of its
 * answer, the re-check of its hits against the store, projection, cursors
 * and aggregations. API keys are on, with a fixed service key, which the
 * seeds send, so the fuzzer reaches the handlers behind the key check as
 * well as the check itself. After the input the harness sends one more request,
 * `GET /healthz` with `Connection: close` (absorbed into whatever the input
 * left unfinished), closes its sending side shortly after (FIN_DELAY_US)
 * and reads the answers until the server closes the connection.
 *
 * Left out: the cache and replication (off: documents the fuzzer writes
 * reach the store, not the shard, and their hits are dropped or re-checked
 * as a stale shard's would be), and `_snapshot`, which writes a checkpoint to
 * whatever absolute path it names: an input that names it, percent-encoded
 * or not, is skipped, as the fuzzer must not write outside its sandbox.
 *
 * Slower than the in-process targets (a connection per input: 300 to 600
 * inputs a second here), and the server's threads run the handlers, so
 * a crash there is reported by the sanitizer for the whole process, with
 * libFuzzer writing the input it was running. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "auth.h"
#include "common_schema.h"
#include "devkafka.h"
#include "fuzz.h"
#include "http_api.h"
#include "index.h"
#include "indexer.h"
#include "server.h"
#include "thrift_gate.h"

/* The service key the seeds send (tests/fuzz/corpus/http_request). */
#define FUZZ_SERVICE_KEY "ixk_service_fuzz0fuzz1fuzz2fuzz3fuzz4fuzz5fuzz6fuzz7"
/* How long one input may take before the harness gives up on the answer. */
#define ANSWER_TIMEOUT_MS 3000
/* The client's FIN goes this long after its last byte. libmicrohttpd
 * (0.9.75, edge-triggered) that reads a request and the FIN behind it in
 * one short read does not look at the socket again until it times out:
 * sent later, the FIN wakes it and it closes at once. */
#define FIN_DELAY_US 3000
/* The last request of every connection. */
static const char CLOSER[] = "\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/* Documents indexed at start, so that queries have hits: every fourth has
 * no tags, prices spread over [1, 500), categories over eight values. */
#define FUZZ_DOCS 256

/* Process-lifetime state, kept reachable. */
static ixia_config_t *kcfg, *scfg, *cfg;
static ixia_devkafka_t *dk;
static ixia_auth_t *shard_auth, *auth;
static ixia_idx_t *idx;
static ixia_indexer_t *ix;
static ThriftProcessor *proc;
static ixia_server_t *shard;
static ixia_thrift_gate_t *gate;
static ixia_api_t *api;
static ixia_api_http_t *http;
static int port;
/* FUZZ_HTTP_SHOW=1 in the environment: the answers go to stderr (to check
 * what the seeds reach). */
static gboolean show;

static void fail(const char *what, ixia_error_t *err) {
  fprintf(stderr, "http_request: %s: %s\n", what, err ? err->message : "?");
  abort();
}

/* The index shard the API's queries go to: ixia-indexer's parts (index,
 * consumer of an in-process mock Kafka cluster, Search server on a
 * loopback port behind the service-key gate), as its main.c puts them
 * together. Returns the Search port. */
static int shard_start(const char *dir, const char *svc) {
  const char *ksets[] = {"devkafka.brokers=1", "devkafka.partitions=2", NULL};
  kcfg = ixia_fuzz_config(ksets);
  ixia_error_t *err = NULL;
  if (!(dk = ixia_devkafka_new(kcfg, &err))) fail("devkafka", err);
  char *brokers = g_strdup_printf("kafka.brokers=%s", ixia_devkafka_bootstraps(dk));
  char *index = g_strdup_printf("index.path=%s/index", dir);
  const char *sets[] = {brokers, index, svc, "auth.enabled=true", "cache.servers=",
                        "index.disk_reserve_mb=0", "indexer.host=127.0.0.1", "indexer.port=0",
                        "query.deadline_ms=1000", "query.max_wait_ms=200", NULL};
  scfg = ixia_fuzz_config(sets);
  if (!(shard_auth = ixia_auth_new(scfg, FALSE, &err))) fail("shard keys", err);
  if (!(idx = ixia_idx_open(ixia_config_str(scfg, "index.path"), scfg, &err))) fail("index", err);
  if (!(ix = ixia_indexer_new(scfg, idx, &err))) fail("indexer", err);
  proc = ixia_search_processor_new(ix, scfg);
  shard = ixia_server_new(scfg, "127.0.0.1", 0, proc, &err);
  if (!shard) fail("shard server", err);
  ixia_server_set_inline(shard, ixia_search_inline_call);
  ixia_indexer_set_server(ix, shard);
  gate = ixia_thrift_gate_new(shard_auth, ixia_search_methods);
  ixia_thrift_gate_install(gate, shard);
  if (!ixia_server_start(shard, &err)) fail("shard server", err);
  g_free(brokers);
  g_free(index);
  return ixia_server_port(shard);
}

/* FUZZ_DOCS documents written through the API and indexed in the shard at
 * the versions the store gave them (no replication runs here: writes the
 * fuzzer makes reach the store only, and their hits are re-checked). */
static void load_docs(gint64 schema_version) {
  static const char *const cats[] = {"mugs", "cups", "bowls", "jugs", "plates", "pans", "pots", "lids"};
  ixia_api_op_t ops[FUZZ_DOCS];
  char *keys[FUZZ_DOCS], *docs[FUZZ_DOCS];
  for (guint i = 0; i < FUZZ_DOCS; i++) {
    keys[i] = g_strdup_printf("d%03u", i);
    docs[i] = g_strdup_printf(
        "{\"category\":\"%s\",\"price\":%.2f,\"stock\":%u,\"title\":\"%s blue mug %u\","
        "%s\"active\":%s,\"updated_at\":%u,\"seller\":{\"country\":\"%s\"}}",
        cats[i % 8], 1 + (i * 1.953), i % 17, i % 3 ? "big" : "small", i,
        i % 4 ? "\"tags\":[\"a\",\"b\"]," : "", i % 2 ? "true" : "false", 1700000000 + i * 3600,
        i % 5 ? "FR" : "US");
    ops[i] = (ixia_api_op_t){IXIA_WRITE_PUT, "shop", "products", keys[i], docs[i], -1};
  }
  gint64 versions[FUZZ_DOCS];
  ixia_error_t *err = NULL;
  if (!ixia_api_write(api, ops, FUZZ_DOCS, versions, &err)) fail("load", err);
  ixia_idx_event_t ev[FUZZ_DOCS + 1];
  ev[0] = (ixia_idx_event_t){IXIA_IDX_SCHEMA, "shop", "products", "", 0, schema_version,
                             FUZZ_SCHEMA, strlen(FUZZ_SCHEMA), 0};
  for (guint i = 0; i < FUZZ_DOCS; i++)
    ev[i + 1] = (ixia_idx_event_t){IXIA_IDX_PUT, "shop", "products", keys[i], strlen(keys[i]),
                                   versions[i], docs[i], strlen(docs[i]), 0};
  if (!ixia_indexer_reindex(ix, ev, FUZZ_DOCS + 1, NULL, &err)) fail("index load", err);
  for (guint i = 0; i < FUZZ_DOCS; i++) {
    g_free(keys[i]);
    g_free(docs[i]);
  }
}

/* libFuzzer's leak check after an input is left off (-detect_leaks=0, read
 * after this function): the daemons' threads allocate while an input runs,
 * so the check ran LeakSanitizer after most inputs, stopping every thread
 * (a connect interrupted by it failed with EINTR) and finding nothing. The
 * check at exit stays. */
static void no_leak_check_per_input(int *argc, char ***argv) {
  static char flag[] = "-detect_leaks=0";
  char **args = g_new0(char *, (gsize)*argc + 2); /* kept: libFuzzer reads it */
  args[0] = (*argv)[0];
  args[1] = flag;
  for (int i = 1; i < *argc; i++) args[i + 1] = (*argv)[i];
  *argv = args;
  (*argc)++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  no_leak_check_per_input(argc, argv);
  char *dir = ixia_fuzz_tmpdir();
  char *key_file = g_strdup_printf("%s/service.key", dir);
  if (!g_file_set_contents(key_file, FUZZ_SERVICE_KEY "\n", -1, NULL)) abort();
  char *svc = g_strdup_printf("auth.service_key_file=%s", key_file);
  char *indexers = g_strdup_printf("query.indexers=127.0.0.1:%d", shard_start(dir, svc));
  char *store = g_strdup_printf("store.path=%s/store", dir);
  char *keys = g_strdup_printf("auth.keys_file=%s/keys.json", dir);
  const char *sets[] = {store, keys, svc, indexers, "auth.enabled=true", "store.sync=false",
                        "cache.servers=", "replication.sinks=", "query.deadline_ms=1000",
                        "store.disk_reserve_mb=0", "store.wal_size_limit_mb=64",
                        "http.host=127.0.0.1", "http.port=0", "http.max_body_bytes=65536",
                        "http.max_bulk_bytes=65536", "http.workers=4", "http.request_timeout_ms=1000",
                        "http.idle_timeout_ms=1000", NULL};
  cfg = ixia_fuzz_config(sets);
  ixia_error_t *err = NULL;
  gint64 schema_version = 0;
  if (!(auth = ixia_auth_new(cfg, TRUE, &err))) fail("keys", err);
  if (!(api = ixia_api_new(cfg, &err))) fail("api", err);
  if (!ixia_api_apply_schema(api, FUZZ_SCHEMA, &schema_version, &err)) fail("schema", err);
  load_docs(schema_version);
  if (!(http = ixia_api_http_new(cfg, api, auth, &err))) fail("http", err);
  port = ixia_api_http_port(http);
  show = g_getenv("FUZZ_HTTP_SHOW") != NULL;
  g_free(store);
  g_free(keys);
  g_free(svc);
  g_free(indexers);
  g_free(key_file);
  g_free(dir);
  return 0;
}

static int hexval(uint8_t c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Whether the input names the snapshot route, percent-decoded any number
 * of times over (the harness's one refusal, see above). */
static gboolean names_snapshot(const uint8_t *data, size_t size) {
  if (!size) return FALSE;
  GByteArray *a = g_byte_array_sized_new((guint)size);
  g_byte_array_append(a, data, (guint)size);
  gboolean found = FALSE, changed = TRUE;
  while (!found && changed) {
    found = g_strstr_len((const char *)a->data, a->len, "snapshot") != NULL;
    changed = FALSE;
    guint o = 0;
    for (guint i = 0; i < a->len; i++) {
      int hi, lo;
      if (a->data[i] == '%' && i + 2 < a->len && (hi = hexval(a->data[i + 1])) >= 0 &&
          (lo = hexval(a->data[i + 2])) >= 0) {
        a->data[o++] = (uint8_t)(hi << 4 | lo);
        i += 2;
        changed = TRUE;
      } else {
        a->data[o++] = a->data[i];
      }
    }
    g_byte_array_set_size(a, o);
  }
  g_byte_array_unref(a);
  return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t in_size) {
  if (names_snapshot(in, in_size)) return 0;
  size_t size = in_size + sizeof CLOSER - 1;
  uint8_t *data = g_malloc(size);
  if (in_size) memcpy(data, in, in_size);
  memcpy(data + in_size, CLOSER, sizeof CLOSER - 1);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd;
  /* (A signal may interrupt the connect: then again on a new socket.) */
  for (;;) {
    if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) abort();
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
    int e = errno;
    close(fd);
    if (e == EINTR) continue;
    fprintf(stderr, "http_request: connect: %s\n", g_strerror(e));
    abort();
  }
  /* Reset on close: no TIME_WAIT left per input. */
  struct linger lg = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  /* Send and read at once (the server may answer, or close, before it has
   * read everything), until the server closes or the time is up. */
  size_t sent = 0;
  gboolean wr_open = TRUE;
  char buf[16384];
  gint64 deadline = g_get_monotonic_time() + ANSWER_TIMEOUT_MS * 1000;
  gint64 sent_at = 0; /* when the last byte went out */
  for (;;) {
    gint64 now = g_get_monotonic_time();
    if (wr_open && sent == size && !sent_at) sent_at = now;
    if (wr_open && sent_at && now - sent_at >= FIN_DELAY_US) {
      shutdown(fd, SHUT_WR);
      wr_open = FALSE;
    }
    struct pollfd p = {fd, (short)(POLLIN | (wr_open && !sent_at ? POLLOUT : 0)), 0};
    gint64 left = (wr_open && sent_at ? sent_at + FIN_DELAY_US : deadline) - now;
    if (now >= deadline) break;
    int ready = poll(&p, 1, (int)(MAX(left, 0) / 1000) + 1);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (p.revents & POLLIN) {
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r <= 0) break;
      if (show) fwrite(buf, 1, (size_t)r, stderr);
    }
    if (wr_open && !sent_at && (p.revents & POLLOUT)) {
      ssize_t w = send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) sent += (size_t)w;
      else if (errno != EAGAIN && errno != EINTR) wr_open = FALSE;
    }
    if ((p.revents & (POLLERR | POLLHUP)) && !(p.revents & POLLIN)) break;
  }
  close(fd);
  g_free(data);
  return 0;
}
