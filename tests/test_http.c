/* The HTTP/JSON interface, API keys, metrics and health checks against a
 * live pipeline (memcached, ixia-devkafka, sink, one index shard, API) with
 * API keys on:
 *
 *  - documents, multi-get, bulk, batch, query, schema, scan, stats,
 *    snapshot, walSince over HTTP give what the Thrift calls give;
 *  - every route refuses no key, a wrong key, an expired and a revoked key
 *    (401), a key of namespace A on B for every action and a non-admin key
 *    on every admin call (403), on HTTP and on Thrift; the CLI and
 *    ixia-recovery take their key from IXIA_KEY;
 *  - bad HTTP (malformed, a 1 MB header, a body over the limit, a slowloris
 *    client, 10,000 idle connections, Thrift on the HTTP port, HTTP on the
 *    Thrift port) gets a 4xx or a clear answer while others are served;
 *  - /metrics of every daemon passes `promtool check metrics` and holds the
 *    families operators need; /readyz names what is wrong (shard down, Kafka
 *    down); indexers commit their positions to the consumer group; keys
 *    never reach logs or metrics; log.format=json writes JSON lines. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "client.h"
#include "kafka_support.h"
#include "support.h"

static ixt_stack_t stack;
static char *service_key;
static char *auth_dir; /* the service key file and the key store */
static int http_port;

/* ---------- a small HTTP client ---------- */

typedef struct {
  int status;
  char *headers; /* raw header block */
  char *body;
} resp_t;

static void resp_clear(resp_t *r) {
  g_free(r->headers);
  g_free(r->body);
  memset(r, 0, sizeof *r);
}

static int connect_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static gboolean send_all(int fd, const char *data, gsize len) {
  while (len) {
    ssize_t w = send(fd, data, len, MSG_NOSIGNAL);
    if (w <= 0) return FALSE;
    data += w;
    len -= (gsize)w;
  }
  return TRUE;
}

/* Reads until the peer closes (or timeout_ms passes). */
static GString *read_all(int fd, int timeout_ms) {
  GString *s = g_string_new(NULL);
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
  char buf[65536];
  for (;;) {
    gint64 left = (deadline - g_get_monotonic_time()) / 1000;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    g_string_append_len(s, buf, r);
  }
  return s;
}

static void parse_response(GString *raw, resp_t *out) {
  memset(out, 0, sizeof *out);
  char *end = strstr(raw->str, "\r\n\r\n");
  if (!end || sscanf(raw->str, "HTTP/1.%*d %d", &out->status) != 1) {
    out->status = -1;
    out->body = g_strdup(raw->str);
    return;
  }
  out->headers = g_strndup(raw->str, (gsize)(end - raw->str));
  out->body = g_strdup(end + 4);
}

/* One request on a fresh connection ("Connection: close"). key: Bearer key
 * or NULL; extra: more header lines ("If-Match: \"3\"\r\n") or NULL. */
static int http(const char *method, const char *path, const char *key, const char *body,
                const char *extra, resp_t *out) {
  int fd = connect_port(http_port);
  if (fd < 0) {
    memset(out, 0, sizeof *out);
    return out->status = -1;
  }
  GString *req = g_string_new(NULL);
  g_string_append_printf(req, "%s %s HTTP/1.1\r\nHost: test\r\nConnection: close\r\n", method, path);
  if (key) g_string_append_printf(req, "Authorization: Bearer %s\r\n", key);
  if (extra) g_string_append(req, extra);
  g_string_append_printf(req, "Content-Length: %zu\r\n\r\n%s", body ? strlen(body) : 0, body ? body : "");
  send_all(fd, req->str, req->len);
  g_string_free(req, TRUE);
  GString *raw = read_all(fd, 20000);
  close(fd);
  parse_response(raw, out);
  g_string_free(raw, TRUE);
  return out->status;
}

static int http_status(const char *method, const char *path, const char *key, const char *body) {
  resp_t r;
  int st = http(method, path, key, body, NULL, &r);
  if (st >= 500 || st < 0) fprintf(stderr, "  %s %s -> %d %s", method, path, st, r.body ? r.body : "");
  resp_clear(&r);
  return st;
}

static cJSON *http_json(const char *method, const char *path, const char *key, const char *body,
                        int *status) {
  resp_t r;
  *status = http(method, path, key, body, NULL, &r);
  cJSON *o = cJSON_Parse(r.body ? r.body : "");
  if (!o) fprintf(stderr, "not JSON (%d): %s\n", *status, r.body ? r.body : "");
  resp_clear(&r);
  return o;
}

static char *create_key(const char *spec) {
  int st;
  cJSON *o = http_json("POST", "/v1/_keys", service_key, spec, &st);
  CU_ASSERT_EQUAL(st, 201);
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "key");
  char *key = cJSON_IsString(k) ? g_strdup(k->valuestring) : NULL;
  cJSON_Delete(o);
  CU_ASSERT_PTR_NOT_NULL(key);
  return key;
}

static char *key_id(const char *key) {
  const char *id = key + 4;
  return g_strndup(id, (gsize)(strchr(id, '_') - id));
}

/* ---------- documents and the other calls ---------- */

static const char *SCHEMA =
    "{\"indexes\": [{\"field\": \"category\", \"type\": \"keyword\"}, "
    "{\"field\": \"price\", \"type\": \"double\"}]}";

static void test_documents(void) {
  char *key = create_key("{\"namespaces\": [\"shop\"], \"actions\": [\"read\", \"write\", \"query\", \"schema\"]}");
  CU_ASSERT_EQUAL(http_status("PUT", "/v1/shop/products/_schema", key, SCHEMA), 200);
  resp_t r;
  /* put: the version comes back as the body and the ETag */
  CU_ASSERT_EQUAL(http("PUT", "/v1/shop/products/docs/p1", key,
                       "{\"title\": \"red mug\", \"category\": \"cat01\", \"price\": 9.5}", NULL, &r), 200);
  cJSON *o = cJSON_Parse(r.body);
  gint64 v1 = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "version"));
  char *etag = g_strdup_printf("ETag: \"%" G_GINT64_FORMAT "\"", v1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.headers, etag));
  cJSON_Delete(o);
  resp_clear(&r);
  /* get */
  CU_ASSERT_EQUAL(http("GET", "/v1/shop/products/docs/p1?fields=title,price", key, NULL, NULL, &r), 200);
  o = cJSON_Parse(r.body);
  CU_ASSERT_EQUAL((gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "version")), v1);
  const cJSON *doc = cJSON_GetObjectItemCaseSensitive(o, "doc");
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "title")), "red mug");
  CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(doc, "category"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.headers, etag));
  cJSON_Delete(o);
  resp_clear(&r);
  /* If-None-Match: * on an existing key, If-Match with a stale version */
  CU_ASSERT_EQUAL(http("PUT", "/v1/shop/products/docs/p1", key, "{\"title\": \"x\"}",
                       "If-None-Match: *\r\n", &r), 409);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"CONFLICT\""));
  resp_clear(&r);
  CU_ASSERT_EQUAL(http("PATCH", "/v1/shop/products/docs/p1", key, "{\"price\": 7}",
                       "If-Match: \"1\"\r\n", &r), 409);
  resp_clear(&r);
  char *ifmatch = g_strdup_printf("If-Match: \"%" G_GINT64_FORMAT "\"\r\n", v1);
  CU_ASSERT_EQUAL(http("PATCH", "/v1/shop/products/docs/p1", key, "{\"price\": 7}", ifmatch, &r), 200);
  resp_clear(&r);
  CU_ASSERT_EQUAL(http("PUT", "/v1/shop/products/docs/p2", key, "{\"title\": \"blue cup\", \"price\": 3}",
                       "If-None-Match: *\r\n", &r), 200);
  resp_clear(&r);
  /* the upsert merged: the title stayed, the price changed */
  int st;
  o = http_json("GET", "/v1/shop/products/docs/p1", key, NULL, &st);
  doc = cJSON_GetObjectItemCaseSensitive(o, "doc");
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(doc, "price")), 7);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "title")), "red mug");
  cJSON_Delete(o);
  /* multi-get */
  o = http_json("GET", "/v1/shop/products/docs?keys=p1,p2,nope", key, NULL, &st);
  CU_ASSERT_EQUAL(st, 200);
  const cJSON *docs = cJSON_GetObjectItemCaseSensitive(o, "docs");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(docs), 3);
  CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 1), "found")));
  CU_ASSERT_TRUE(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 2), "found")));
  cJSON_Delete(o);
  /* bulk: per-line results, a bad line does not stop the others */
  const char *bulk =
      "{\"op\": \"put\", \"key\": \"b1\", \"doc\": {\"title\": \"one\", \"price\": 1}}\n"
      "{\"op\": \"put\", \"key\": \"b2\", \"doc\": {\"price\": \"not a number\"}}\n"
      "not json\n"
      "\n"
      "{\"op\": \"upsert\", \"key\": \"b3\", \"doc\": {\"title\": \"three\"}}\n"
      "{\"op\": \"delete\", \"key\": \"b1\"}\n";
  CU_ASSERT_EQUAL(http("POST", "/v1/shop/products/_bulk", key, bulk, NULL, &r), 200);
  char **lines = g_strsplit(g_strstrip(r.body), "\n", -1);
  CU_ASSERT_EQUAL(g_strv_length(lines), 5);
  const int want[] = {200, 400, 400, 200, 200};
  for (guint i = 0; lines[i] && i < 5; i++) {
    cJSON *l = cJSON_Parse(lines[i]);
    CU_ASSERT_EQUAL((int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(l, "status")), want[i]);
    cJSON_Delete(l);
  }
  CU_ASSERT_PTR_NOT_NULL(strstr(lines[1], "TYPE_MISMATCH"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.headers, "X-Ixia-Failed-Lines: 2"));
  g_strfreev(lines);
  resp_clear(&r);
  CU_ASSERT_EQUAL(http_status("GET", "/v1/shop/products/docs/b1", key, NULL), 404);
  CU_ASSERT_EQUAL(http_status("GET", "/v1/shop/products/docs/b3", key, NULL), 200);
  /* delete */
  CU_ASSERT_EQUAL(http_status("DELETE", "/v1/shop/products/docs/p2", key, NULL), 200);
  CU_ASSERT_EQUAL(http_status("GET", "/v1/shop/products/docs/p2", key, NULL), 404);
  /* query, read-your-writes through min_version */
  o = http_json("GET", "/v1/_stats", key, NULL, &st);
  gint64 latest = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "store_latest_version"));
  cJSON_Delete(o);
  char *q = g_strdup_printf("{\"filter\": {\"range\": {\"price\": {\"lt\": 100}}}, \"fields\": [\"title\"], "
                            "\"min_version\": %" G_GINT64_FORMAT ", \"aggs\": {\"n\": {\"terms\": {\"field\": \"category\"}}}}",
                            latest);
  o = http_json("POST", "/v1/shop/products/_query", key, q, &st);
  CU_ASSERT_EQUAL(st, 200);
  CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "total")), 1);
  cJSON_Delete(o);
  g_free(q);
  /* a body naming another table than the path */
  CU_ASSERT_EQUAL(http_status("POST", "/v1/shop/products/_query", key, "{\"table\": \"other\"}"), 400);
  /* schema read back */
  o = http_json("GET", "/v1/shop/products/_schema", key, NULL, &st);
  CU_ASSERT_EQUAL(st, 200);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "table")), "products");
  cJSON_Delete(o);
  /* batch: atomic; one bad op fails all */
  CU_ASSERT_EQUAL(http_status("POST", "/v1/_batch", key,
                              "{\"ops\": [{\"op\": \"put\", \"namespace\": \"shop\", \"table\": \"products\", "
                              "\"key\": \"t1\", \"doc\": {\"price\": 1}}, {\"op\": \"put\", \"namespace\": "
                              "\"shop\", \"table\": \"nosuch\", \"key\": \"t2\", \"doc\": {}}]}"),
                  404);
  CU_ASSERT_EQUAL(http_status("GET", "/v1/shop/products/docs/t1", key, NULL), 404);
  o = http_json("POST", "/v1/_batch", key,
                "{\"ops\": [{\"op\": \"put\", \"namespace\": \"shop\", \"table\": \"products\", \"key\": "
                "\"t1\", \"doc\": {\"price\": 1}}, {\"op\": \"delete\", \"namespace\": \"shop\", \"table\": "
                "\"products\", \"key\": \"b3\"}]}",
                &st);
  CU_ASSERT_EQUAL(st, 200);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "versions")), 2);
  cJSON_Delete(o);
  /* admin calls with the service key: scan, stats, walSince, snapshot */
  o = http_json("GET", "/v1/shop/products/docs?limit=1", service_key, NULL, &st);
  CU_ASSERT_EQUAL(st, 200);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "docs")), 1);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "next")), "p1");
  cJSON_Delete(o);
  o = http_json("GET", "/v1/_stats", key, NULL, &st);
  CU_ASSERT_EQUAL(st, 200);
  CU_ASSERT_TRUE(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "store_latest_version")) > (double)v1);
  cJSON_Delete(o);
  o = http_json("GET", "/v1/_wal?after=0&max_bytes=100000", service_key, NULL, &st);
  CU_ASSERT_EQUAL(st, 200);
  CU_ASSERT_TRUE(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "batches")) > 0);
  cJSON_Delete(o);
  char *snap = g_strdup_printf("{\"dir\": \"%s/snap1\"}", stack.dir);
  o = http_json("POST", "/v1/_snapshot", service_key, snap, &st);
  CU_ASSERT_EQUAL(st, 200);
  CU_ASSERT_TRUE(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "version")) > 0);
  cJSON_Delete(o);
  g_free(snap);
  /* unknown paths and methods */
  CU_ASSERT_EQUAL(http_status("GET", "/v2/x", key, NULL), 404);
  /* resource paths cut short, with an empty part or an unknown resource;
   * a key keeps the rest of the path, slashes included */
  CU_ASSERT_EQUAL(http_status("GET", "/v1/shop", key, NULL), 404);
  CU_ASSERT_EQUAL(http_status("GET", "/v1//products/docs/p1", key, NULL), 404);
  CU_ASSERT_EQUAL(http_status("GET", "/v1/shop/products/nope", key, NULL), 404);
  CU_ASSERT_EQUAL(http("GET", "/v1/shop/products/docs/a/b", key, NULL, NULL, &r), 404);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "'a/b'"));
  resp_clear(&r);
  CU_ASSERT_EQUAL(http_status("PUT", "/v1/shop/products/docs/a/b", key, "{\"title\": \"slash\"}"), 200);
  CU_ASSERT_EQUAL(http("GET", "/v1/shop/products/docs/a/b", key, NULL, NULL, &r), 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"key\": \"a/b\""));
  resp_clear(&r);
  CU_ASSERT_EQUAL(http_status("POST", "/v1/shop/products/docs/p1", key, "{}"), 405);
  /* the console */
  CU_ASSERT_EQUAL(http("GET", "/", NULL, NULL, NULL, &r), 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "ixia console"));
  resp_clear(&r);
  g_free(ifmatch);
  g_free(etag);
  g_free(key);
}

/* ---------- keys ---------- */

typedef struct {
  const char *method, *path, *body;
} route_t;

/* One call per action on namespace ns (the body names ns where it must). */
static void routes_for(const char *ns, route_t out[5]) {
  static char bufs[5][256];
  g_snprintf(bufs[0], 256, "/v1/%s/products/docs/p1", ns);
  out[0] = (route_t){"GET", g_strdup(bufs[0]), NULL};                         /* read */
  out[1] = (route_t){"PUT", g_strdup(bufs[0]), "{\"price\": 1}"};             /* write */
  g_snprintf(bufs[2], 256, "/v1/%s/products/_query", ns);
  out[2] = (route_t){"POST", g_strdup(bufs[2]), "{\"limit\": 1}"};            /* query */
  g_snprintf(bufs[3], 256, "/v1/%s/products/_schema", ns);
  out[3] = (route_t){"PUT", g_strdup(bufs[3]), SCHEMA};                       /* schema */
  g_snprintf(bufs[4], 256, "/v1/%s/products/docs?limit=5", ns);
  out[4] = (route_t){"GET", g_strdup(bufs[4]), NULL};                         /* admin: scan */
}

static void routes_free(route_t r[5]) {
  for (int i = 0; i < 5; i++) g_free((char *)r[i].path);
}

static const route_t ADMIN_ROUTES[] = {
    {"GET", "/v1/_keys", NULL},
    {"POST", "/v1/_keys", "{\"namespaces\": [\"*\"], \"actions\": [\"admin\"]}"},
    {"DELETE", "/v1/_keys/0123456789ab", NULL},
    {"POST", "/v1/_snapshot", "{\"dir\": \"/tmp/ixia-never\"}"},
    {"GET", "/v1/_wal?after=0", NULL},
    {"GET", "/v1/shop/products/docs?limit=5", NULL},
};

static int expect_code(const char *method, const char *path, const char *key, const char *body,
                       int status, const char *code) {
  resp_t r;
  int st = http(method, path, key, body, NULL, &r);
  if (st != status || !r.body || !strstr(r.body, code))
    fprintf(stderr, "  %s %s: want %d %s, got %d %s", method, path, status, code, st,
            r.body ? r.body : "");
  resp_clear(&r);
  return st == status;
}

static void test_auth_http(void) {
  /* blog exists too, so "not allowed" is about the key, not the table */
  CU_ASSERT_EQUAL(http_status("PUT", "/v1/blog/products/_schema", service_key, SCHEMA), 200);
  char *shop = create_key("{\"namespaces\": [\"shop\"], \"actions\": [\"read\", \"write\", \"query\", \"schema\", \"admin\"]}");
  char *reader = create_key("{\"namespaces\": [\"*\"], \"actions\": [\"read\", \"write\", \"query\", \"schema\"]}");
  gint64 soon = g_get_real_time() / G_USEC_PER_SEC + 1;
  char *spec = g_strdup_printf("{\"namespaces\": [\"shop\"], \"actions\": [\"read\"], \"expires_at\": %" G_GINT64_FORMAT "}", soon);
  char *expiring = create_key(spec);
  g_free(spec);
  route_t on_shop[5], on_blog[5];
  routes_for("shop", on_shop);
  routes_for("blog", on_blog);
  /* the expiring key works at once (it has at least a second: checked
   * further down, after the other calls, it could have run out on a busy
   * machine), then expires */
  CU_ASSERT_EQUAL(http_status("GET", on_shop[0].path, expiring, NULL), 200);
  char *revoked = create_key("{\"namespaces\": [\"shop\"], \"actions\": [\"read\"]}");
  char *rid = key_id(revoked);
  char *path = g_strdup_printf("/v1/_keys/%s", rid);
  CU_ASSERT_EQUAL(http_status("DELETE", path, service_key, NULL), 200);
  g_free(path);
  /* the shop key works on shop for every action */
  for (int i = 0; i < 5; i++)
    CU_ASSERT_TRUE(http_status(on_shop[i].method, on_shop[i].path, shop, on_shop[i].body) < 300);
  /* ... and on blog for none */
  for (int i = 0; i < 5; i++)
    CU_ASSERT_TRUE(expect_code(on_blog[i].method, on_blog[i].path, shop, on_blog[i].body, 403,
                               "PERMISSION_DENIED"));
  /* no key, a wrong key, a malformed header, a revoked key: 401 everywhere */
  char *wrong = g_strdup_printf("%sX", shop);
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_TRUE(expect_code(on_shop[i].method, on_shop[i].path, NULL, on_shop[i].body, 401, "UNAUTHENTICATED"));
    CU_ASSERT_TRUE(expect_code(on_shop[i].method, on_shop[i].path, wrong, on_shop[i].body, 401, "UNAUTHENTICATED"));
    CU_ASSERT_TRUE(expect_code(on_shop[i].method, on_shop[i].path, revoked, on_shop[i].body, 401, "revoked"));
  }
  CU_ASSERT_TRUE(expect_code("GET", "/v1/_stats", NULL, NULL, 401, "UNAUTHENTICATED"));
  resp_t r;
  CU_ASSERT_EQUAL(http("GET", "/v1/_stats", NULL, NULL, "Authorization: Basic eDp5\r\n", &r), 401);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.headers, "WWW-Authenticate: Bearer"));
  resp_clear(&r);
  /* a non-admin key on every admin call */
  for (guint i = 0; i < G_N_ELEMENTS(ADMIN_ROUTES); i++)
    CU_ASSERT_TRUE(expect_code(ADMIN_ROUTES[i].method, ADMIN_ROUTES[i].path, reader,
                               ADMIN_ROUTES[i].body, 403, "PERMISSION_DENIED"));
  /* the shop admin key is not an admin of everything */
  CU_ASSERT_TRUE(expect_code("GET", "/v1/_keys", NULL, NULL, 401, "UNAUTHENTICATED"));
  CU_ASSERT_TRUE(expect_code("POST", "/v1/_snapshot", shop, "{\"dir\": \"/tmp/x\"}", 403, "may not admin every namespace"));
  /* ... and the expiring key has expired */
  while (g_get_real_time() / G_USEC_PER_SEC <= soon) g_usleep(50000);
  CU_ASSERT_TRUE(expect_code("GET", on_shop[0].path, expiring, NULL, 401, "expired at"));
  /* listing shows ids and scopes, never secrets */
  int st;
  cJSON *o = http_json("GET", "/v1/_keys", service_key, NULL, &st);
  char *text = cJSON_PrintUnformatted(o);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"expired\":true"));
  CU_ASSERT_PTR_NULL(strstr(text, shop + 18));
  CU_ASSERT_PTR_NULL(strstr(text, rid)); /* revoked keys are gone */
  cJSON_free(text);
  cJSON_Delete(o);
  /* the key store holds hashes only */
  char *store_path = g_strdup_printf("%s/keys.json", auth_dir), *store = NULL;
  CU_ASSERT_TRUE(g_file_get_contents(store_path, &store, NULL, NULL));
  CU_ASSERT_PTR_NULL(strstr(store, shop + 18));
  CU_ASSERT_PTR_NOT_NULL(strstr(store, "sha256"));
  g_free(store);
  g_free(store_path);
  routes_free(on_shop);
  routes_free(on_blog);
  g_free(wrong);
  g_free(rid);
  g_free(revoked);
  g_free(expiring);
  g_free(reader);
  g_free(shop);
}

/* A Thrift client acting with key (NULL: none). */
static ixia_client_t *thrift_client(const char *key, ixia_error_t **err) {
  ixia_auth_set_client_key(key);
  ixia_client_t *c = ixia_client_new(stack.api.addr, err);
  ixia_auth_set_client_key(NULL);
  return c;
}

static void test_auth_thrift(void) {
  char *shop = create_key("{\"namespaces\": [\"shop\"], \"actions\": [\"read\", \"write\", \"query\", \"schema\"]}");
  ixia_error_t *err = NULL;
  /* no key: every call refused until authenticate */
  ixia_client_t *anon = thrift_client(NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(anon);
  gboolean found = FALSE;
  char *json = NULL;
  CU_ASSERT_FALSE(ixia_client_get(anon, "shop", "products", "p1", NULL, &found, NULL, &json, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EUNAUTHENTICATED);
  g_clear_pointer(&err, ixia_error_destroy);
  ixia_client_destroy(anon);
  /* a wrong key: refused at connect */
  char *wrong = g_strdup_printf("%sX", shop);
  CU_ASSERT_PTR_NULL(thrift_client(wrong, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EUNAUTHENTICATED);
  g_clear_pointer(&err, ixia_error_destroy);
  /* the shop key: shop yes, blog no, admin calls no */
  ixia_client_t *c = thrift_client(shop, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_TRUE(ixia_client_get(c, "shop", "products", "p1", NULL, &found, NULL, &json, &err));
  CU_ASSERT_TRUE(found);
  g_clear_pointer(&json, g_free);
  gint64 v = 0;
  CU_ASSERT_FALSE(ixia_client_put(c, "blog", "products", "p1", "{}", -1, &v, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EDENIED);
  g_clear_pointer(&err, ixia_error_destroy);
  CU_ASSERT_FALSE(ixia_client_get(c, "blog", "products", "p1", NULL, &found, NULL, &json, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EDENIED);
  g_clear_pointer(&err, ixia_error_destroy);
  char *resp = NULL;
  CU_ASSERT_FALSE(ixia_client_query(c, "{\"namespace\": \"blog\", \"table\": \"products\"}", &resp, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EDENIED);
  g_clear_pointer(&err, ixia_error_destroy);
  CU_ASSERT_FALSE(ixia_client_snapshot(c, "/tmp/ixia-never", &resp, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EDENIED);
  g_clear_pointer(&err, ixia_error_destroy);
  GPtrArray *docs = NULL;
  CU_ASSERT_FALSE(ixia_client_scan(c, "shop", "products", NULL, 5, &docs, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EDENIED);
  g_clear_pointer(&err, ixia_error_destroy);
  if (docs) g_ptr_array_unref(docs);
  GPtrArray *batches = NULL;
  CU_ASSERT_FALSE(ixia_client_wal_since(c, 0, 1000, &batches, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EDENIED);
  g_clear_pointer(&err, ixia_error_destroy);
  if (batches) g_ptr_array_unref(batches);
  CU_ASSERT_FALSE(ixia_client_list_keys(c, &resp, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EDENIED);
  g_clear_pointer(&err, ixia_error_destroy);
  /* revoking the key cuts the open connection off at its next call */
  char *id = key_id(shop);
  char *path = g_strdup_printf("/v1/_keys/%s", id);
  CU_ASSERT_EQUAL(http_status("DELETE", path, service_key, NULL), 200);
  CU_ASSERT_FALSE(ixia_client_get(c, "shop", "products", "p1", NULL, &found, NULL, &json, &err));
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EUNAUTHENTICATED);
  g_clear_pointer(&err, ixia_error_destroy);
  ixia_client_destroy(c);
  /* index shards and sinks take only the service key */
  ixia_auth_set_client_key(shop);
  ixia_shard_client_t *sc = ixia_shard_client_new(stack.indexer[0].addr, 5000, &err);
  CU_ASSERT_PTR_NULL(sc);
  CU_ASSERT_EQUAL(err ? err->code : 0, IXIA_EUNAUTHENTICATED);
  g_clear_pointer(&err, ixia_error_destroy);
  ixia_shard_client_destroy(sc);
  ixia_auth_set_client_key(service_key);
  sc = ixia_shard_client_new(stack.indexer[0].addr, 5000, &err);
  CU_ASSERT_PTR_NOT_NULL(sc);
  CU_ASSERT_TRUE(sc && ixia_shard_client_status(sc, &resp, &err));
  g_clear_pointer(&resp, g_free);
  ixia_shard_client_destroy(sc);
  ixia_auth_set_client_key(NULL);
  g_free(path);
  g_free(id);
  g_free(wrong);
  g_free(shop);
}

/* Runs a tool with IXIA_KEY=key (unset when NULL); returns its exit code. */
static int run_tool(const char *const *argv, const char *key, char **out) {
  char **env = g_get_environ();
  env = key ? g_environ_setenv(env, "IXIA_KEY", key, TRUE) : g_environ_unsetenv(env, "IXIA_KEY");
  env = g_environ_setenv(env, "IXIA_API", stack.api.addr, TRUE);
  int status = -1;
  char *err_text = NULL;
  gboolean ran = g_spawn_sync(stack.dir, (char **)argv, env, G_SPAWN_DEFAULT, NULL, NULL, out,
                              &err_text, &status, NULL);
  g_strfreev(env);
  if (err_text && *err_text) fprintf(stderr, "  %s: %s", argv[0], err_text);
  g_free(err_text);
  return ran && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_tools_with_env_key(void) {
  char *cli = g_strdup_printf("%s/ixia", IXIA_BIN_DIR);
  char *rec = g_strdup_printf("%s/ixia-recovery", IXIA_BIN_DIR);
  /* keys through the CLI, with the service key */
  char *out = NULL;
  const char *create[] = {cli, "keys", "create", "--namespaces", "shop", "--actions", "read,admin",
                          "--expires-in", "1h", "--description", "cli test", NULL};
  CU_ASSERT_EQUAL(run_tool(create, service_key, &out), 0);
  cJSON *o = cJSON_Parse(out);
  char *key = g_strdup(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "key")));
  cJSON_Delete(o);
  g_clear_pointer(&out, g_free);
  CU_ASSERT_PTR_NOT_NULL_FATAL(key);
  const char *list[] = {cli, "keys", "list", NULL};
  CU_ASSERT_EQUAL(run_tool(list, service_key, &out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "cli test"));
  g_clear_pointer(&out, g_free);
  CU_ASSERT_EQUAL(run_tool(list, key, &out), IXIA_EXIT_DENIED); /* admin of shop, not of every namespace */
  g_clear_pointer(&out, g_free);
  /* the CLI acts with IXIA_KEY */
  const char *get[] = {cli, "get", "shop", "products", "p1", NULL};
  CU_ASSERT_EQUAL(run_tool(get, key, &out), 0);
  g_clear_pointer(&out, g_free);
  CU_ASSERT_EQUAL(run_tool(get, NULL, &out), IXIA_EXIT_DENIED);
  g_clear_pointer(&out, g_free);
  const char *put[] = {cli, "put", "shop", "products", "p9", "{}", NULL};
  CU_ASSERT_EQUAL(run_tool(put, key, &out), IXIA_EXIT_DENIED); /* read and admin only */
  g_clear_pointer(&out, g_free);
  /* ixia-recovery too: a snapshot needs admin on every namespace */
  char *dir = g_strdup_printf("%s/snap-cli", stack.dir);
  const char *snap[] = {rec, "snapshot", "--to", dir, "-q", NULL};
  CU_ASSERT_EQUAL(run_tool(snap, key, &out), IXIA_EXIT_DENIED);
  g_clear_pointer(&out, g_free);
  CU_ASSERT_EQUAL(run_tool(snap, NULL, &out), IXIA_EXIT_DENIED);
  g_clear_pointer(&out, g_free);
  CU_ASSERT_EQUAL(run_tool(snap, service_key, &out), 0);
  CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"version\""));
  g_clear_pointer(&out, g_free);
  /* backfill talks to the shards: the service key */
  const char *backfill[] = {rec, "backfill", "shop", "products", "-q", NULL};
  CU_ASSERT_EQUAL(run_tool(backfill, service_key, &out), 0);
  g_clear_pointer(&out, g_free);
  const char *revoke[] = {cli, "keys", "revoke", "000000000000", NULL};
  CU_ASSERT_EQUAL(run_tool(revoke, service_key, &out), 3);
  g_clear_pointer(&out, g_free);
  g_free(dir);
  g_free(key);
  g_free(cli);
  g_free(rec);
}

/* ---------- bad input ---------- */

static gboolean healthy(void) {
  resp_t r;
  int st = http("GET", "/v1/shop/products/docs/p1", service_key, NULL, NULL, &r);
  resp_clear(&r);
  return st == 200;
}

/* CPU seconds (user + system) pid has used. */
static double process_cpu_s(GPid pid) {
  char *path = g_strdup_printf("/proc/%d/stat", (int)pid), *text = NULL;
  double s = -1;
  if (g_file_get_contents(path, &text, NULL, NULL)) {
    const char *p = strrchr(text, ')'); /* past the command name */
    unsigned long long ut = 0, st = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
      s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
  }
  g_free(text);
  g_free(path);
  return s;
}

static int raw_status(const char *bytes, gsize len, int timeout_ms) {
  int fd = connect_port(http_port);
  send_all(fd, bytes, len);
  GString *raw = read_all(fd, timeout_ms);
  close(fd);
  resp_t r;
  parse_response(raw, &r);
  int st = r.status;
  resp_clear(&r);
  g_string_free(raw, TRUE);
  return st;
}

static void test_hostile_http(void) {
  /* malformed request lines and headers */
  const char *bad[] = {"BLAH\r\n\r\n", "GET /v1/_stats HTTP/9.9\r\n\r\n", "GET /x HTTP/1.1\r\nBad Header\r\n\r\n",
                       "POST /v1/_batch HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n"};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    int st = raw_status(bad[i], strlen(bad[i]), 5000);
    /* an unknown protocol version is 505 (RFC 9110), the rest 4xx */
    gboolean good = i == 1 ? st == 505 : st >= 400 && st < 500;
    CU_ASSERT_TRUE(good);
    if (!good) fprintf(stderr, "  malformed #%u got %d\n", i, st);
  }
  CU_ASSERT_TRUE(healthy());
  /* a header of 1 MB */
  GString *big = g_string_new("GET /v1/_stats HTTP/1.1\r\nHost: x\r\nX-Big: ");
  for (int i = 0; i < (1 << 20); i++) g_string_append_c(big, 'a');
  g_string_append(big, "\r\n\r\n");
  int st = raw_status(big->str, big->len, 10000);
  CU_ASSERT_TRUE(st >= 400 && st < 500);
  g_string_free(big, TRUE);
  CU_ASSERT_TRUE(healthy());
  /* headers near http.max_header_bytes (16 KiB by default): 12,000 bytes
   * are served, 20,000 refused with 431 */
  for (int n = 12000; n <= 20000; n += 8000) {
    GString *h = g_string_new("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
    for (int i = 0; i < n; i++) g_string_append_c(h, 'a');
    g_string_append(h, "\r\n\r\n");
    CU_ASSERT_EQUAL(raw_status(h->str, h->len, 10000), n == 12000 ? 200 : 431);
    g_string_free(h, TRUE);
  }
  CU_ASSERT_TRUE(healthy());
  /* a body over http.max_body_bytes (set to 64 KiB for this stack) */
  GString *body = g_string_new("{\"a\": \"");
  for (int i = 0; i < 100000; i++) g_string_append_c(body, 'x');
  g_string_append(body, "\"}");
  resp_t r;
  CU_ASSERT_EQUAL(http("PUT", "/v1/shop/products/docs/big", service_key, body->str, NULL, &r), 413);
  CU_ASSERT_PTR_NOT_NULL(r.body && strstr(r.body, "http.max_body_bytes"));
  resp_clear(&r);
  g_string_free(body, TRUE);
  CU_ASSERT_TRUE(healthy());
  /* Thrift on the HTTP port: a Thrift answer naming the port */
  ixia_error_t *err = NULL;
  int saved = stack.api.port;
  char *addr = g_strdup_printf("127.0.0.1:%d", http_port);
  ixia_client_t *c = ixia_client_new(addr, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char *stats = NULL;
  CU_ASSERT_FALSE(ixia_client_stats(c, &stats, &err));
  CU_ASSERT_PTR_NOT_NULL(err && strstr(err->message, "HTTP port"));
  g_clear_pointer(&err, ixia_error_destroy);
  ixia_client_destroy(c);
  g_free(addr);
  (void)saved;
  /* The start of a Thrift call whose method name cannot be read (its length
   * is 2^31 - 1): answered in Thrift at once when the frame is all there;
   * when it is not, the API waits for the rest without spinning over the
   * bytes it has (it used to burn a core until http.request_timeout_ms,
   * then close without a word), and answers when the client closes. */
  static const char whole[] = "\0\0\0\x09\x80\x01\0\x01\x7f\xff\xff\xff\x05";
  int fd = connect_port(http_port);
  send_all(fd, whole, sizeof whole - 1);
  GString *ans = read_all(fd, 5000);
  close(fd);
  CU_ASSERT_PTR_NOT_NULL(memmem(ans->str, ans->len, "HTTP port", 9));
  g_string_free(ans, TRUE);
  static const char cut[] = "\0\0\0\x15\x80\x01\0\x01\x7f\xff\xff\xff\x05";
  fd = connect_port(http_port);
  send_all(fd, cut, sizeof cut - 1);
  double cpu0 = process_cpu_s(stack.api.pid);
  CU_ASSERT_TRUE(cpu0 >= 0);
  g_usleep(1500 * 1000);
  double spent = process_cpu_s(stack.api.pid) - cpu0;
  CU_ASSERT_TRUE(spent < 0.5);
  if (spent >= 0.5) fprintf(stderr, "  API CPU over 1.5 s with a cut Thrift call open: %.2f s\n", spent);
  shutdown(fd, SHUT_WR);
  ans = read_all(fd, 5000);
  close(fd);
  CU_ASSERT_PTR_NOT_NULL(memmem(ans->str, ans->len, "HTTP port", 9));
  g_string_free(ans, TRUE);
  CU_ASSERT_TRUE(healthy());
  /* HTTP on the Thrift port: an HTTP 400 naming the port */
  http_port = stack.api.port;
  CU_ASSERT_EQUAL(http("GET", "/v1/_stats", NULL, NULL, NULL, &r), 400);
  CU_ASSERT_PTR_NOT_NULL(r.body && strstr(r.body, "Thrift port"));
  resp_clear(&r);
  http_port = stack.api.http_port;
  /* slowloris: a header a byte at a time, while others are served fast */
  int slow = connect_port(http_port);
  const char *partial = "GET /v1/_stats HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  send_all(slow, partial, strlen(partial));
  for (int i = 0; i < 5; i++) {
    send_all(slow, "a", 1);
    gint64 t0 = g_get_monotonic_time();
    CU_ASSERT_TRUE(healthy());
    CU_ASSERT_TRUE(g_get_monotonic_time() - t0 < 2 * G_USEC_PER_SEC);
  }
  close(slow);
  /* 10,000 idle connections (silent ones, and keep-alive ones after a
   * request), then a get on a new connection is answered at once */
  GArray *idle = g_array_new(FALSE, FALSE, sizeof(int));
  for (int i = 0; i < 10000; i++) {
    int fd = connect_port(http_port);
    if (fd < 0) break;
    if (i % 10 == 0) {
      const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
      send_all(fd, req, strlen(req));
    }
    g_array_append_val(idle, fd);
  }
  CU_ASSERT_EQUAL(idle->len, 10000);
  gint64 t0 = g_get_monotonic_time();
  CU_ASSERT_TRUE(healthy());
  gint64 took = g_get_monotonic_time() - t0;
  CU_ASSERT_TRUE(took < 2 * G_USEC_PER_SEC);
  printf("\n  get beside 10,000 idle HTTP connections: %.1f ms\n", (double)took / 1000);
  for (guint i = 0; i < idle->len; i++) close(g_array_index(idle, int, i));
  g_array_free(idle, TRUE);
  CU_ASSERT_TRUE(healthy());
}

/* ---------- metrics, health, consumer group, logs ---------- */

static char *get_metrics(int port) {
  int saved = http_port;
  http_port = port;
  resp_t r;
  int st = http("GET", "/metrics", NULL, NULL, NULL, &r);
  http_port = saved;
  CU_ASSERT_EQUAL(st, 200);
  CU_ASSERT_PTR_NOT_NULL(r.headers && strstr(r.headers, "text/plain; version=0.0.4"));
  char *body = r.body;
  r.body = NULL;
  resp_clear(&r);
  return body;
}

static void promtool_check(const char *text, const char *what) {
  char *path = g_strdup_printf("%s/metrics-%s.txt", stack.dir, what);
  g_file_set_contents(path, text, -1, NULL);
  char *cmd = g_strdup_printf("promtool check metrics < %s", path);
  char *out = NULL, *errout = NULL;
  int status = -1;
  const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  CU_ASSERT_TRUE(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout,
                              &status, NULL));
  CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fprintf(stderr, "promtool on %s: %s%s\n", what, out ? out : "", errout ? errout : "");
  g_free(out);
  g_free(errout);
  g_free(cmd);
  g_free(path);
}

static void test_metrics(void) {
  char *api = get_metrics(stack.api.http_port);
  char *sink = get_metrics(stack.sink.http_port);
  char *shard = get_metrics(stack.indexer[0].http_port);
  promtool_check(api, "api");
  promtool_check(sink, "sink");
  promtool_check(shard, "indexer");
  const char *api_want[] = {
      "ixia_request_duration_seconds_bucket{call=\"get\",transport=\"http\",le=\"0.001\"}",
      "ixia_request_duration_seconds_count{call=\"get\",transport=\"thrift\"}",
      "ixia_request_errors_total{call=\"put\",transport=\"http\",code=\"CONFLICT\"}",
      "ixia_request_errors_total{call=\"get\",transport=\"thrift\",code=\"PERMISSION_DENIED\"}",
      "ixia_cache_hits_total ", "ixia_cache_misses_total ", "ixia_cache_backfills_total ",
      "ixia_cache_backfills_dropped_total ", "ixia_store_group_commit_edits_bucket{le=\"1\"}",
      "ixia_replication_lag_versions ", "ixia_replication_lag_seconds ", "ixia_up{daemon=\"ixia-query-api\"} 1"};
  for (guint i = 0; i < G_N_ELEMENTS(api_want); i++) {
    CU_ASSERT_PTR_NOT_NULL(strstr(api, api_want[i]));
    if (!strstr(api, api_want[i])) fprintf(stderr, "  API metrics lack %s\n", api_want[i]);
  }
  const char *sink_want[] = {"ixia_sink_events_produced_total ", "ixia_sink_delivery_seconds_count ",
                             "ixia_request_duration_seconds_count{call=\"replicate\",transport=\"thrift\"}"};
  for (guint i = 0; i < G_N_ELEMENTS(sink_want); i++) {
    CU_ASSERT_PTR_NOT_NULL(strstr(sink, sink_want[i]));
    if (!strstr(sink, sink_want[i])) fprintf(stderr, "  sink metrics lack %s\n", sink_want[i]);
  }
  const char *shard_want[] = {"ixia_indexer_partition_lag{topic=\"ixia.changes\",partition=\"0\"}",
                              "ixia_indexer_partition_lag_seconds{topic=\"ixia.changes\",partition=\"3\"}",
                              "ixia_indexer_apply_rate ", "ixia_indexer_events_failed_total ",
                              "ixia_indexer_apply_cpu_seconds_total ", "ixia_indexer_apply_wait_seconds_total ",
                              "ixia_indexer_failed_log_entries ",
                              "ixia_indexer_commit_to_searchable_seconds_bucket{le=\"0.1\"}"};
  for (guint i = 0; i < G_N_ELEMENTS(shard_want); i++) {
    CU_ASSERT_PTR_NOT_NULL(strstr(shard, shard_want[i]));
    if (!strstr(shard, shard_want[i])) fprintf(stderr, "  indexer metrics lack %s\n", shard_want[i]);
  }
  /* events were produced and became searchable: the counts are not zero */
  CU_ASSERT_PTR_NULL(strstr(sink, "ixia_sink_events_produced_total 0\n"));
  CU_ASSERT_PTR_NULL(strstr(shard, "ixia_indexer_commit_to_searchable_seconds_count 0\n"));
  /* the apply thread has worked: its CPU time is not zero */
  CU_ASSERT_PTR_NULL(strstr(shard, "ixia_indexer_apply_cpu_seconds_total 0\n"));
  /* no key in any metric */
  CU_ASSERT_PTR_NULL(strstr(api, "ixk_"));
  g_free(api);
  g_free(sink);
  g_free(shard);
}

static int ready_status(int port, char **body) {
  int saved = http_port;
  http_port = port;
  resp_t r;
  int st = http("GET", "/readyz", NULL, NULL, NULL, &r);
  http_port = saved;
  if (body) *body = g_strdup(r.body);
  resp_clear(&r);
  return st;
}

static void test_health(void) {
  int saved = http_port;
  http_port = stack.indexer[0].http_port;
  CU_ASSERT_EQUAL(http_status("GET", "/healthz", NULL, NULL), 200);
  http_port = saved;
  CU_ASSERT_EQUAL(ready_status(stack.api.http_port, NULL), 200);
  CU_ASSERT_EQUAL(ready_status(stack.sink.http_port, NULL), 200);
  CU_ASSERT_EQUAL(ready_status(stack.indexer[0].http_port, NULL), 200);
  /* Kafka down: the sink and the shard say so */
  CU_ASSERT_TRUE(ixt_devkafka_control(&stack.kafka, "broker-down all", NULL));
  char *body = NULL;
  CU_ASSERT_EQUAL(ready_status(stack.sink.http_port, &body), 503);
  CU_ASSERT_PTR_NOT_NULL(body && strstr(body, "Kafka unreachable"));
  g_clear_pointer(&body, g_free);
  CU_ASSERT_EQUAL(ready_status(stack.indexer[0].http_port, &body), 503);
  CU_ASSERT_PTR_NOT_NULL(body && strstr(body, "Kafka unreachable"));
  g_clear_pointer(&body, g_free);
  CU_ASSERT_TRUE(ixt_devkafka_control(&stack.kafka, "broker-up all", NULL));
  gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  while (ready_status(stack.sink.http_port, NULL) != 200 && g_get_monotonic_time() < deadline) g_usleep(200000);
  CU_ASSERT_EQUAL(ready_status(stack.sink.http_port, NULL), 200);
  /* a shard down: the API names it */
  ixt_daemon_kill(&stack.indexer[0]);
  CU_ASSERT_EQUAL(ready_status(stack.api.http_port, &body), 503);
  CU_ASSERT_PTR_NOT_NULL(body && strstr(body, "index shard"));
  CU_ASSERT_PTR_NOT_NULL(body && strstr(body, "unreachable"));
  g_clear_pointer(&body, g_free);
  CU_ASSERT_TRUE_FATAL(ixt_daemon_restart(&stack.indexer[0]));
  CU_ASSERT_EQUAL(ready_status(stack.api.http_port, NULL), 200);
}

static void test_consumer_group(void) {
  /* The shard's positions, as it reports them... */
  ixia_error_t *err = NULL;
  ixia_auth_set_client_key(service_key);
  ixia_shard_client_t *sc = ixia_shard_client_new(stack.indexer[0].addr, 5000, &err);
  ixia_auth_set_client_key(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sc);
  char *status = NULL;
  /* wait for the writes so far to be applied and committed */
  gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  gboolean match = FALSE;
  while (!match && g_get_monotonic_time() < deadline) {
    CU_ASSERT_TRUE_FATAL(ixia_shard_client_status(sc, &status, &err));
    cJSON *st = cJSON_Parse(status);
    g_clear_pointer(&status, g_free);
    /* ...and as the consumer group holds them */
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", stack.kafka.bootstrap, errstr, sizeof errstr);
    rd_kafka_conf_set(conf, "group.id", "ixia-indexer", errstr, sizeof errstr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(4);
    for (int p = 0; p < 4; p++) rd_kafka_topic_partition_list_add(list, "ixia.changes", p);
    rd_kafka_resp_err_t kerr = rd_kafka_committed(rk, list, 5000);
    match = kerr == RD_KAFKA_RESP_ERR_NO_ERROR;
    gint64 total = 0;
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(st, "partitions"), *p;
    cJSON_ArrayForEach(p, parts) {
      int part = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(p, "partition"));
      gint64 next = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(p, "next_offset"));
      gint64 committed = list->elems[part].offset;
      if (next > 0 && committed != next) match = FALSE;
      total += MAX(committed, 0);
    }
    if (total == 0) match = FALSE;
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy(rk);
    cJSON_Delete(st);
    if (!match) g_usleep(300000);
  }
  CU_ASSERT_TRUE(match);
  ixia_shard_client_destroy(sc);
}

static void test_logs(void) {
  /* keys never reach a log */
  const char *logs[] = {"ixia-query-api.log", "ixia-replication-sink.log", NULL};
  for (int i = 0; logs[i]; i++) {
    char *path = g_strdup_printf("%s/%s", stack.dir, logs[i]), *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL)) CU_ASSERT_PTR_NULL(strstr(text, "ixk_"));
    g_free(text);
    g_free(path);
  }
  /* log.format=json: every line one JSON object */
  char *dir = g_strdup_printf("%s/jsonlog", stack.dir);
  g_mkdir_with_parents(dir, 0700);
  const char *sets[] = {"log.format=json", "log.level=info", NULL};
  ixt_api_t a;
  CU_ASSERT_TRUE_FATAL(ixt_api_start(&a, dir, "", sets));
  CU_ASSERT_TRUE(ixt_api_stop(&a));
  char *path = g_strdup_printf("%s/ixia-query-api.log", dir), *text = NULL;
  CU_ASSERT_TRUE(g_file_get_contents(path, &text, NULL, NULL));
  char **lines = g_strsplit(text ? text : "", "\n", -1);
  guint json_lines = 0;
  for (char **l = lines; *l; l++) {
    if (!**l || g_str_has_prefix(*l, "----")) continue;
    cJSON *o = cJSON_Parse(*l);
    CU_ASSERT_PTR_NOT_NULL(o);
    if (!o) fprintf(stderr, "  not a JSON log line: %s\n", *l);
    CU_ASSERT_TRUE(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "msg")));
    CU_ASSERT_TRUE(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "level")));
    json_lines += o != NULL;
    cJSON_Delete(o);
  }
  CU_ASSERT_TRUE(json_lines >= 3);
  g_strfreev(lines);
  g_free(text);
  g_free(path);
  g_free(dir);
}

/* ---------- TLS ---------- */

static int sh(const char *cmd, char **out) {
  const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  int status = -1;
  if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, out, NULL,
                    &status, NULL))
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_tls(void) {
  char *dir = g_strdup_printf("%s/tls", stack.dir);
  g_mkdir_with_parents(dir, 0700);
  char *cmd = g_strdup_printf("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                              "-addext subjectAltName=IP:127.0.0.1 -keyout %s/key.pem -out %s/cert.pem",
                              dir, dir);
  CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
  g_free(cmd);
  char *cert = g_strdup_printf("http.tls_cert_file=%s/cert.pem", dir);
  char *key = g_strdup_printf("http.tls_key_file=%s/key.pem", dir);
  const char *sets[] = {cert, key, "auth.enabled=false", NULL};
  ixt_api_t a;
  CU_ASSERT_TRUE_FATAL(ixt_api_start(&a, dir, "", sets));
  /* HTTPS with the certificate verified */
  char *out = NULL;
  cmd = g_strdup_printf("curl -sS --cacert %s/cert.pem https://127.0.0.1:%d/healthz", dir, a.http_port);
  CU_ASSERT_EQUAL(sh(cmd, &out), 0);
  CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"ok\""));
  g_free(out);
  g_free(cmd);
  /* plain HTTP on the TLS port is told so */
  int saved = http_port;
  http_port = a.http_port;
  resp_t r;
  CU_ASSERT_EQUAL(http("GET", "/healthz", NULL, NULL, NULL, &r), 400);
  CU_ASSERT_PTR_NOT_NULL(r.body && strstr(r.body, "HTTPS only"));
  resp_clear(&r);
  http_port = saved;
  CU_ASSERT_TRUE(ixt_api_stop(&a));
  /* a missing key file stops the daemon at start, naming the option */
  const char *bad[] = {cert, "http.tls_key_file=/nonexistent/key.pem", "auth.enabled=false", NULL};
  char *bad_dir = g_strdup_printf("%s/bad", dir);
  g_mkdir_with_parents(bad_dir, 0700);
  CU_ASSERT_FALSE(ixt_api_start(&a, bad_dir, "", bad));
  ixt_daemon_stop(&a);
  char *log = g_strdup_printf("%s/ixia-query-api.log", bad_dir), *text = NULL;
  CU_ASSERT_TRUE(g_file_get_contents(log, &text, NULL, NULL));
  CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "http.tls_key_file"));
  g_free(text);
  g_free(log);
  g_free(bad_dir);
  g_free(cert);
  g_free(key);
  g_free(dir);
}

/* ---------- suite ---------- */

static int suite_init(void) {
  char *dir = auth_dir = ixt_tmpdir();
  char *svc = g_strdup_printf("%s/service.key", dir);
  if (!ixia_auth_ensure_service_key(svc, NULL, NULL)) return 1;
  g_file_get_contents(svc, &service_key, NULL, NULL);
  g_strstrip(service_key);
  char *svc_set = g_strdup_printf("auth.service_key_file=%s", svc);
  const char *defaults[] = {"auth.enabled=true", svc_set, NULL};
  ixt_daemon_defaults(defaults);
  char *keys = g_strdup_printf("auth.keys_file=%s/keys.json", dir);
  const char *api_sets[] = {keys, "http.max_body_bytes=65536", NULL};
  gboolean ok = ixt_stack_start(&stack, 1, api_sets);
  g_free(keys);
  g_free(svc_set);
  g_free(svc);
  http_port = stack.api.http_port;
  return ok && http_port > 0 ? 0 : 1;
}

static int suite_clean(void) {
  ixt_daemon_defaults(NULL);
  return ixt_stack_stop(&stack) ? 0 : 1;
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("http", suite_init, suite_clean);
  IXT_ADD(s, test_documents);
  IXT_ADD(s, test_auth_http);
  IXT_ADD(s, test_auth_thrift);
  IXT_ADD(s, test_tools_with_env_key);
  IXT_ADD(s, test_hostile_http);
  IXT_ADD(s, test_metrics);
  IXT_ADD(s, test_consumer_group);
  IXT_ADD(s, test_health);
  IXT_ADD(s, test_logs);
  IXT_ADD(s, test_tls);
  return ixt_run();
}
