/* Indexer integration tests: a real ixia-devkafka and real ixia-indexer
 * processes. Change events are produced the way the replication sink does
 * (compact ChangeEvent, message key = the truth-store key, default
 * partitioner; schema events to every partition), and the shard is checked
 * through its Search service the way the query API and the recovery tools
 * use it: search results, docs() listings, status(), reindex(), and the
 * failed-updates log on disk. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "expiry.h"
#include "ixia_search.h"
#include "json.h"
#include "kafka_support.h"
#include "store.h"
#include "support.h"
#include "thrift_util.h"

#define NS "shop"
#define TABLE "products"
#define TOPIC "ixia.changes"
#define PARTITIONS 4

static const char *SCHEMA_V1 =
    "{\"namespace\":\"shop\",\"table\":\"products\","
    "\"indexes\":[{\"field\":\"category\",\"type\":\"keyword\"},"
    "{\"field\":\"price\",\"type\":\"double\"}]}";
/* V1 plus an index on color: documents put before it need a backfill. */
static const char *SCHEMA_V2 =
    "{\"namespace\":\"shop\",\"table\":\"products\","
    "\"indexes\":[{\"field\":\"category\",\"type\":\"keyword\"},"
    "{\"field\":\"price\",\"type\":\"double\"},{\"field\":\"color\",\"type\":\"keyword\"}]}";

/* ---------- Kafka side ---------- */

typedef struct {
  ixt_devkafka_t kafka;
  ixt_producer_t *prod;
  rd_kafka_t *raw;          /* for schema events to explicit partitions */
  rd_kafka_topic_t *rkt;    /* for the partitioner */
  gint64 version;           /* last version handed out */
} feed_t;

/* devkafka_sets: extra options of ixia-devkafka (NULL-terminated, or NULL). */
static gboolean feed_start_sets(feed_t *f, const char *const *devkafka_sets) {
  memset(f, 0, sizeof *f);
  char *dir = ixt_tmpdir();
  gboolean ok = ixt_devkafka_start_sets(&f->kafka, dir, 1, PARTITIONS, devkafka_sets);
  g_free(dir);
  if (!ok) return FALSE;
  f->prod = ixt_producer_new(f->kafka.bootstrap, NULL);
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  char errstr[256];
  rd_kafka_conf_set(conf, "bootstrap.servers", f->kafka.bootstrap, errstr, sizeof errstr);
  f->raw = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!f->raw) rd_kafka_conf_destroy(conf);
  f->rkt = f->raw ? rd_kafka_topic_new(f->raw, TOPIC, NULL) : NULL;
  return f->prod && f->rkt;
}

static gboolean feed_start(feed_t *f) { return feed_start_sets(f, NULL); }

static void feed_stop(feed_t *f) {
  ixt_producer_destroy(f->prod);
  if (f->rkt) rd_kafka_topic_destroy(f->rkt);
  if (f->raw) rd_kafka_destroy(f->raw);
  CU_ASSERT_TRUE(ixt_devkafka_stop(&f->kafka));
}

static IxiaChangeEvent *mk_event(IxiaChangeOp op, const char *key, gint64 version, const char *doc) {
  return ixia_change_event_new(op, NS, strlen(NS), TABLE, strlen(TABLE), key, strlen(key), version,
                               doc, doc ? strlen(doc) : 0, 0, g_get_real_time() / 1000);
}

static gint32 partition_of(feed_t *f, const char *key) {
  GBytes *k = ixia_record_doc_key(NS, TABLE, key, strlen(key));
  size_t len;
  const void *d = g_bytes_get_data(k, &len);
  gint32 p = rd_kafka_msg_partitioner_consistent_random(f->rkt, d, len, PARTITIONS, NULL, NULL);
  g_bytes_unref(k);
  return p;
}

/* Produces a PUT (doc) or DELETE (doc NULL) of key with the next version,
 * keyed by the truth-store key; returns the version. */
static gint64 send_doc(feed_t *f, const char *key, const char *doc) {
  gint64 v = ++f->version;
  IxiaChangeEvent *e = mk_event(doc ? IXIA_CHANGE_OP_PUT : IXIA_CHANGE_OP_DELETE, key, v, doc);
  GBytes *k = ixia_record_doc_key(NS, TABLE, key, strlen(key));
  size_t len;
  const void *d = g_bytes_get_data(k, &len);
  CU_ASSERT_TRUE(ixt_producer_send_event(f->prod, TOPIC, e, d, len));
  g_bytes_unref(k);
  g_object_unref(e);
  return v;
}

static void feed_flush(feed_t *f) { CU_ASSERT_EQUAL(ixt_producer_wait(f->prod, 20000), 0); }

/* The schema event, to every partition (as the sink sends it). */
static void send_schema(feed_t *f, const char *schema) {
  feed_flush(f); /* keep it after the data events already sent */
  IxiaChangeEvent *e = mk_event(IXIA_CHANGE_OP_SCHEMA, "", ++f->version, schema);
  GByteArray *value = ixia_thrift_serialize(THRIFT_STRUCT(e), TRUE, NULL);
  GBytes *k = ixia_record_schema_key(NS, TABLE);
  size_t len;
  const void *d = g_bytes_get_data(k, &len);
  for (gint32 p = 0; p < PARTITIONS; p++)
    CU_ASSERT_EQUAL(rd_kafka_producev(f->raw, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_PARTITION(p),
                                      RD_KAFKA_V_KEY(d, len), RD_KAFKA_V_VALUE(value->data, value->len),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                    RD_KAFKA_RESP_ERR_NO_ERROR);
  CU_ASSERT_EQUAL(rd_kafka_flush(f->raw, 20000), RD_KAFKA_RESP_ERR_NO_ERROR);
  g_bytes_unref(k);
  g_byte_array_unref(value);
  g_object_unref(e);
}

/* ---------- the shard ---------- */

typedef struct {
  ixt_daemon_t d;
  char *dir;
  char *failed_log;
  ixia_thrift_conn_t conn;
  IxiaSearchIf *client;
} shard_t;

static void shard_disconnect(shard_t *s) {
  if (s->client) g_object_unref(s->client);
  s->client = NULL;
  if (s->conn.protocol) ixia_thrift_conn_close(&s->conn);
  memset(&s->conn, 0, sizeof s->conn);
}

static gboolean shard_connect(shard_t *s) {
  ixia_error_t *e = NULL;
  if (!ixia_thrift_conn_open(&s->conn, s->d.addr, 5000, 60000, &e)) {
    fprintf(stderr, "\n  connect %s: %s\n", s->d.addr, e->message);
    ixia_error_destroy(e);
    return FALSE;
  }
  s->client = g_object_new(IXIA_TYPE_SEARCH_CLIENT, "input_protocol", s->conn.protocol,
                           "output_protocol", s->conn.protocol, NULL);
  return TRUE;
}

static gboolean shard_start_cache(shard_t *s, feed_t *f, const char *partitions, const char *cache) {
  memset(s, 0, sizeof *s);
  s->dir = ixt_tmpdir();
  s->failed_log = g_strdup_printf("%s/index.failed-updates.jsonl", s->dir);
  char *sets[] = {g_strdup_printf("kafka.brokers=%s", f->kafka.bootstrap),
                  g_strdup_printf("index.path=%s/index", s->dir),
                  g_strdup_printf("indexer.partitions=%s", partitions),
                  g_strdup("indexer.batch_max_events=100"), g_strdup("indexer.batch_wait_ms=2"),
                  g_strdup_printf("cache.servers=%s", cache), NULL};
  gboolean ok = ixt_daemon_start(&s->d, "ixia-indexer", "indexer", s->dir, (const char *const *)sets);
  for (char **p = sets; *p; p++) g_free(*p);
  return ok && shard_connect(s);
}

static gboolean shard_start(shard_t *s, feed_t *f, const char *partitions) {
  return shard_start_cache(s, f, partitions, "");
}

static gboolean shard_restart(shard_t *s) {
  shard_disconnect(s);
  return ixt_daemon_restart(&s->d) && shard_connect(s);
}

static void shard_stop(shard_t *s) {
  shard_disconnect(s);
  CU_ASSERT_TRUE(ixt_daemon_stop(&s->d));
  g_free(s->dir);
  g_free(s->failed_log);
}

/* Converts a call's outcome; prints unexpected failures. */
static gboolean call_ok(gboolean ok, IxiaIxiaError *xe, GError *gerr, ixia_error_t **err) {
  if (ok) return TRUE;
  if (xe)
    ixia_error_set(err, (ixia_code_t)xe->code, "%s", xe->message);
  else
    ixia_error_set(err, IXIA_EUNAVAILABLE, "%s", gerr ? gerr->message : "call failed");
  if (xe) g_object_unref(xe);
  if (gerr) g_error_free(gerr);
  return FALSE;
}

/* search(request) as a JSON tree, or NULL with *err. */
static cJSON *search_raw(shard_t *s, const char *request, ixia_error_t **err) {
  gchar *out = NULL;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_search_if_search(s->client, &out, request, &xe, &gerr);
  cJSON *o = NULL;
  if (call_ok(ok, xe, gerr, err)) o = cJSON_Parse(out);
  g_free(out);
  return o;
}

/* A synchronous search for filter (JSON text, or NULL for all documents). */
static cJSON *search(shard_t *s, const char *filter, int limit, gint64 after_id) {
  char *req = g_strdup_printf(
      "{\"query\":{\"namespace\":\"shop\",\"table\":\"products\"%s%s},\"limit\":%d,"
      "\"after_id\":%" G_GINT64_FORMAT ",\"sync\":true,\"deadline_ms\":30000}",
      filter ? ",\"filter\":" : "", filter ? filter : "", limit, after_id);
  ixia_error_t *e = NULL;
  cJSON *o = search_raw(s, req, &e);
  if (!o) fprintf(stderr, "\n  search %s: %s\n", req, e->message);
  ixia_error_destroy(e);
  g_free(req);
  return o;
}

static double num(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Every hit of filter, paging by id: key -> version. */
static GHashTable *search_all(shard_t *s, const char *filter, double *total) {
  GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  gint64 after = -1;
  *total = -1;
  for (int page = 0; page < 1000; page++) {
    cJSON *o = search(s, filter, 7, after);
    if (!o) break;
    if (page == 0) *total = num(o, "total");
    const cJSON *hits = cJSON_GetObjectItemCaseSensitive(o, "hits");
    int n = cJSON_GetArraySize(hits);
    const cJSON *hit;
    cJSON_ArrayForEach(hit, hits) {
      const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hit, "key"));
      if (k) g_hash_table_insert(h, g_strdup(k), GINT_TO_POINTER((gint)num(hit, "version")));
      after = (gint64)num(hit, "id");
    }
    cJSON_Delete(o);
    if (n < 7) break;
  }
  return h;
}

typedef struct {
  gint64 version;
  gboolean deleted;
} docinfo_t;

/* Every document the shard records (docs(), paged): key -> docinfo_t. */
static GHashTable *docs_all(shard_t *s) {
  GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  GByteArray *after = g_byte_array_new();
  for (;;) {
    GPtrArray *out = g_ptr_array_new_with_free_func(g_object_unref);
    IxiaIxiaError *xe = NULL;
    GError *gerr = NULL;
    ixia_error_t *e = NULL;
    gboolean ok = call_ok(ixia_search_if_docs(s->client, &out, NS, TABLE, after, 3, &xe, &gerr),
                          xe, gerr, &e);
    if (!ok) {
      fprintf(stderr, "\n  docs: %s\n", e->message);
      ixia_error_destroy(e);
    }
    CU_ASSERT_TRUE(ok);
    guint n = ok ? out->len : 0;
    for (guint i = 0; i < n; i++) {
      IxiaIndexedDoc *d = g_ptr_array_index(out, i);
      docinfo_t *di = g_new(docinfo_t, 1);
      di->version = d->version;
      di->deleted = d->deleted;
      g_hash_table_insert(h, g_strndup((const char *)d->key->data, d->key->len), di);
      g_byte_array_set_size(after, 0);
      g_byte_array_append(after, d->key->data, d->key->len);
    }
    g_ptr_array_unref(out);
    if (n < 3) break;
  }
  g_byte_array_unref(after);
  return h;
}

static cJSON *status(shard_t *s) {
  gchar *out = NULL;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  cJSON *o = NULL;
  if (call_ok(ixia_search_if_status(s->client, &out, &xe, &gerr), xe, gerr, NULL))
    o = cJSON_Parse(out);
  g_free(out);
  return o;
}

/* ---------- the expected state ---------- */

typedef struct {
  gint64 version;
  gboolean deleted;
  char category[16];
  char color[16];
  char *doc; /* last PUT's document */
} expect_t;

static void expect_free(gpointer p) {
  expect_t *x = p;
  g_free(x->doc);
  g_free(x);
}

static GHashTable *expect_new(void) {
  return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, expect_free);
}

/* Sends a put of key and records it. */
static void put(feed_t *f, GHashTable *exp, const char *key, const char *category, const char *color,
                double price) {
  char *doc = g_strdup_printf("{\"category\":\"%s\",\"color\":\"%s\",\"price\":%g}", category,
                              color, price);
  expect_t *x = g_new0(expect_t, 1);
  x->version = send_doc(f, key, doc);
  g_strlcpy(x->category, category, sizeof x->category);
  g_strlcpy(x->color, color, sizeof x->color);
  x->doc = doc;
  g_hash_table_insert(exp, g_strdup(key), x);
}

static void del(feed_t *f, GHashTable *exp, const char *key) {
  expect_t *x = g_new0(expect_t, 1);
  x->version = send_doc(f, key, NULL);
  x->deleted = TRUE;
  g_hash_table_insert(exp, g_strdup(key), x);
}

/* The expected hits of {"term": {field: value}} (field category or color;
 * NULL field: every live document), restricted to partitions in mask. */
static GHashTable *expected_hits(feed_t *f, GHashTable *exp, const char *field, const char *value,
                                 const gboolean *mask) {
  GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, exp);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    expect_t *x = v;
    if (x->deleted) continue;
    if (mask && !mask[partition_of(f, k)]) continue;
    if (field && strcmp(strcmp(field, "color") == 0 ? x->color : x->category, value) != 0) continue;
    g_hash_table_insert(h, g_strdup(k), GINT_TO_POINTER((gint)x->version));
  }
  return h;
}

static gboolean same_hits(GHashTable *got, GHashTable *want, const char *what) {
  gboolean same = g_hash_table_size(got) == g_hash_table_size(want);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, want);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    gpointer gv;
    if (!g_hash_table_lookup_extended(got, k, NULL, &gv) || gv != v) {
      fprintf(stderr, "\n  %s: %s (version %d) missing or wrong", what, (char *)k, GPOINTER_TO_INT(v));
      same = FALSE;
    }
  }
  if (!same) fprintf(stderr, "\n  %s: got %u hits, want %u\n", what, g_hash_table_size(got),
                     g_hash_table_size(want));
  return same;
}

/* Searches term(field, value) and compares hits and total with exp. */
static void check_term(shard_t *s, feed_t *f, GHashTable *exp, const char *field, const char *value,
                       const gboolean *mask) {
  char *filter = field ? g_strdup_printf("{\"term\":{\"%s\":\"%s\"}}", field, value) : NULL;
  double total;
  GHashTable *got = search_all(s, filter, &total);
  GHashTable *want = expected_hits(f, exp, field, value, mask);
  CU_ASSERT_TRUE(same_hits(got, want, filter ? filter : "all"));
  CU_ASSERT_EQUAL(total, (double)g_hash_table_size(want));
  g_hash_table_destroy(got);
  g_hash_table_destroy(want);
  g_free(filter);
}

/* docs() equals the expected keys of the partitions in mask: versions and
 * tombstones. */
static void check_docs(shard_t *s, feed_t *f, GHashTable *exp, const gboolean *mask) {
  GHashTable *got = docs_all(s);
  guint want = 0;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, exp);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    if (mask && !mask[partition_of(f, k)]) continue;
    want++;
    expect_t *x = v;
    docinfo_t *d = g_hash_table_lookup(got, k);
    if (!d || d->version != x->version || d->deleted != x->deleted) {
      fprintf(stderr, "\n  docs: %s: want version %" G_GINT64_FORMAT "%s, got %s%" G_GINT64_FORMAT "\n",
              (char *)k, x->version, x->deleted ? " (deleted)" : "", d ? "" : "nothing ",
              d ? d->version : 0);
      CU_FAIL("docs() differs from what was sent");
    }
  }
  CU_ASSERT_EQUAL(g_hash_table_size(got), want);
  g_hash_table_destroy(got);
}

/* ---------- tests ---------- */

/* Puts, updates and deletes reach the index; searches page by id; a replay
 * of the same events changes nothing; bad requests get clear errors. */
static void test_apply_search_replay(void) {
  feed_t f;
  CU_ASSERT_TRUE_FATAL(feed_start(&f));
  shard_t s;
  CU_ASSERT_TRUE_FATAL(shard_start(&s, &f, ""));
  send_schema(&f, SCHEMA_V1);
  GHashTable *exp = expect_new();
  for (int i = 0; i < 60; i++) {
    char key[16], cat[16];
    g_snprintf(key, sizeof key, "k%03d", i);
    g_snprintf(cat, sizeof cat, "cat%d", i % 4);
    put(&f, exp, key, cat, i % 2 ? "red" : "blue", i);
  }
  for (int i = 0; i < 10; i++) { /* updates move documents between categories */
    char key[16];
    g_snprintf(key, sizeof key, "k%03d", i);
    put(&f, exp, key, "updated", "green", 1000 + i);
  }
  for (int i = 10; i < 16; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "k%03d", i);
    del(&f, exp, key);
  }
  feed_flush(&f);
  check_term(&s, &f, exp, "category", "cat1", NULL);
  check_term(&s, &f, exp, "category", "updated", NULL);
  check_term(&s, &f, exp, NULL, NULL, NULL);
  check_docs(&s, &f, exp, NULL);

  /* A sorted page: its positions and the newest applied version are two
   * members, not one name twice (the response is strict JSON), and the
   * hits come in price order. */
  ixia_error_t *se = NULL;
  cJSON *sp = search_raw(&s,
                         "{\"query\":{\"namespace\":\"shop\",\"table\":\"products\","
                         "\"sort\":[{\"price\":\"desc\"}]},\"limit\":3,\"sync\":true,"
                         "\"deadline_ms\":30000}",
                         &se);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
  CU_ASSERT_TRUE(ixia_json_check_strict(sp, "shard response", NULL));
  CU_ASSERT_TRUE(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(sp, "sort_as_of")));
  CU_ASSERT_EQUAL(num(sp, "as_of"), (double)f.version);
  const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sp, "hits"), 0);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(first, "key")), "k009");
  cJSON_Delete(sp);

  /* A short page is answered on the server's I/O thread, and so is a
   * sorted one read from its first key's points; a page sorted by a
   * keyword (like sync searches and aggregations) moves to its workers:
   * the status's server counters say which. */
  cJSON *st0 = status(&s);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st0);
  const cJSON *sv0 = cJSON_GetObjectItemCaseSensitive(st0, "server");
  double inline0 = num(sv0, "requests_inline"), deferred0 = num(sv0, "requests_deferred");
  cJSON *pg = search_raw(&s, "{\"query\":{\"namespace\":\"shop\",\"table\":\"products\"},\"limit\":5}", &se);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pg);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pg, "hits")), 5);
  cJSON_Delete(pg);
  pg = search_raw(&s,
                  "{\"query\":{\"namespace\":\"shop\",\"table\":\"products\","
                  "\"sort\":[{\"price\":\"desc\"}]},\"limit\":3}",
                  &se);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pg);
  first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pg, "hits"), 0);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(first, "key")), "k009");
  cJSON_Delete(pg);
  pg = search_raw(&s,
                  "{\"query\":{\"namespace\":\"shop\",\"table\":\"products\","
                  "\"sort\":[{\"category\":\"asc\"}]},\"limit\":3}",
                  &se);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pg);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pg, "hits")), 3);
  cJSON_Delete(pg);
  cJSON *st1 = status(&s);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st1);
  const cJSON *sv1 = cJSON_GetObjectItemCaseSensitive(st1, "server");
  CU_ASSERT_EQUAL(num(sv1, "requests_inline"), inline0 + 2);
  CU_ASSERT_EQUAL(num(sv1, "requests_deferred"), deferred0 + 1);
  cJSON_Delete(st0);
  cJSON_Delete(st1);

  cJSON *st = status(&s);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st);
  CU_ASSERT_EQUAL(num(st, "partition_count"), PARTITIONS);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(st, "partitions")), PARTITIONS);
  CU_ASSERT_EQUAL(num(st, "documents"), 60 - 6);
  CU_ASSERT_EQUAL(num(st, "max_version"), (double)f.version);
  CU_ASSERT_EQUAL(num(st, "failed_log_entries"), 0);
  const cJSON *p;
  cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(st, "partitions")) CU_ASSERT_EQUAL(num(p, "lag"), 0);
  cJSON_Delete(st);

  /* The same events again (at-least-once delivery): nothing changes. */
  gint64 last = f.version;
  f.version = 1; /* replay: versions as first sent */
  GHashTable *again = expect_new();
  for (int i = 0; i < 60; i++) {
    char key[16], cat[16];
    g_snprintf(key, sizeof key, "k%03d", i);
    g_snprintf(cat, sizeof cat, "cat%d", i % 4);
    put(&f, again, key, cat, i % 2 ? "red" : "blue", i);
  }
  for (int i = 0; i < 10; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "k%03d", i);
    put(&f, again, key, "updated", "green", 1000 + i);
  }
  for (int i = 10; i < 16; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "k%03d", i);
    del(&f, again, key);
  }
  CU_ASSERT_EQUAL(f.version, last);
  feed_flush(&f);
  check_term(&s, &f, exp, "category", "cat1", NULL);
  check_term(&s, &f, exp, "category", "updated", NULL);
  check_docs(&s, &f, exp, NULL);
  g_hash_table_destroy(again);

  /* Bad requests: clear errors, and the shard keeps serving. The query is
   * read from the request's tree: its nesting and size limits hold there
   * too (query.max_request_bytes, 1 MiB here, plus room for the request's
   * own members). */
  GString *deep = g_string_new("{\"query\":{\"namespace\":\"shop\",\"table\":\"products\",\"x\":");
  for (int i = 0; i < 64; i++) g_string_append_c(deep, '[');
  for (int i = 0; i < 64; i++) g_string_append_c(deep, ']');
  g_string_append(deep, "}}");
  char *pad = g_strnfill(1200 * 1024, 'a');
  char *huge = g_strdup_printf("{\"query\":{\"namespace\":\"shop\",\"table\":\"products\","
                               "\"filter\":{\"term\":{\"category\":\"%s\"}}}}", pad);
  g_free(pad);
  struct {
    const char *req;
    ixia_code_t code;
    const char *mentions;
  } bad[] = {
      {"{\"query\":", IXIA_EINVAL, NULL},
      {"{\"limit\":3}", IXIA_EINVAL, "query"},
      {"{\"query\":{\"namespace\":\"shop\",\"table\":\"nope\"}}", IXIA_ENOTFOUND, "nope"},
      {"{\"query\":{\"namespace\":\"shop\",\"table\":\"products\",\"filter\":{\"term\":{\"color\":\"red\"}}}}",
       IXIA_EINVAL, "color"},
      {"{\"query\":{\"namespace\":\"shop\",\"table\":\"products\"},\"limit\":-2}", IXIA_EINVAL, "limit"},
      {"{\"query\":{\"namespace\":\"shop\",\"table\":\"products\"},\"limit\":100000000}", IXIA_ETOOLARGE,
       "query.max_limit"},
      {"{\"query\":5}", IXIA_EINVAL, "\"query\" must be an object"},
      {deep->str, IXIA_EINVAL, "nesting"},
      {huge, IXIA_ETOOLARGE, "query.max_request_bytes"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    ixia_error_t *e = NULL;
    cJSON *o = search_raw(&s, bad[i].req, &e);
    CU_ASSERT_PTR_NULL(o);
    cJSON_Delete(o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    if (e->code != bad[i].code || (bad[i].mentions && !strstr(e->message, bad[i].mentions)))
      fprintf(stderr, "\n  %.200s -> %s: %s\n", bad[i].req, ixia_code_name(e->code), e->message);
    CU_ASSERT_EQUAL(e->code, bad[i].code);
    if (bad[i].mentions) CU_ASSERT_PTR_NOT_NULL(strstr(e->message, bad[i].mentions));
    ixia_error_destroy(e);
  }
  g_string_free(deep, TRUE);
  g_free(huge);
  IxiaIxiaError *xe = NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func(g_object_unref);
  CU_ASSERT_FALSE(ixia_search_if_docs(s.client, &out, NS, TABLE, NULL, 0, &xe, NULL));
  CU_ASSERT_TRUE(xe && xe->code == IXIA_EINVAL && strstr(xe->message, "limit"));
  if (xe) g_object_unref(xe);
  g_ptr_array_unref(out);
  check_term(&s, &f, exp, "category", "cat2", NULL);

  g_hash_table_destroy(exp);
  shard_stop(&s);
  feed_stop(&f);
}

/* One line of the failed-updates log whose key is key, parsed; NULL if none. */
static cJSON *failed_line(const char *path, const char *key, int *lines) {
  char *text = NULL;
  *lines = 0;
  if (!g_file_get_contents(path, &text, NULL, NULL)) return NULL;
  cJSON *found = NULL;
  gchar **ls = g_strsplit(text, "\n", -1);
  for (gchar **l = ls; *l; l++) {
    if (!**l) continue;
    (*lines)++;
    cJSON *o = cJSON_Parse(*l);
    CU_ASSERT_PTR_NOT_NULL(o);
    const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "key"));
    if (!found && k && strcmp(k, key) == 0)
      found = o;
    else
      cJSON_Delete(o);
  }
  g_strfreev(ls);
  g_free(text);
  return found;
}

/* An undecodable message and a wrong-typed document go to the failed log,
 * named, with their partition and offset; the rest is indexed. */
static void test_failed_log(void) {
  feed_t f;
  CU_ASSERT_TRUE_FATAL(feed_start(&f));
  shard_t s;
  CU_ASSERT_TRUE_FATAL(shard_start(&s, &f, ""));
  send_schema(&f, SCHEMA_V1);
  GHashTable *exp = expect_new();
  put(&f, exp, "good1", "a", "red", 1);
  GBytes *k = ixia_record_doc_key(NS, TABLE, "garbled", 7);
  size_t klen;
  const void *kd = g_bytes_get_data(k, &klen);
  CU_ASSERT_TRUE(ixt_producer_send(f.prod, TOPIC, kd, klen, "\xff\xfe not thrift", 14));
  g_bytes_unref(k);
  gint64 wrong_v = send_doc(&f, "wrong", "{\"category\":\"a\",\"price\":\"not a number\"}");
  put(&f, exp, "good2", "a", "red", 2);
  feed_flush(&f);
  check_term(&s, &f, exp, "category", "a", NULL);

  int lines = 0;
  cJSON *g = failed_line(s.failed_log, "garbled", &lines);
  CU_ASSERT_EQUAL(lines, 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "ns")), NS);
  CU_ASSERT_PTR_NOT_NULL(strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "error")), "undecodable"));
  CU_ASSERT_TRUE(num(g, "partition") >= 0 && num(g, "offset") >= 0);
  CU_ASSERT_EQUAL(num(g, "partition"), partition_of(&f, "garbled"));
  CU_ASSERT_PTR_NOT_NULL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "time")));
  cJSON_Delete(g);
  cJSON *w = failed_line(s.failed_log, "wrong", &lines);
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  CU_ASSERT_EQUAL(num(w, "version"), (double)wrong_v);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(w, "table")), TABLE);
  CU_ASSERT_PTR_NOT_NULL(strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(w, "error")), "price"));
  CU_ASSERT_EQUAL(num(w, "partition"), partition_of(&f, "wrong"));
  cJSON_Delete(w);
  cJSON *st = status(&s);
  CU_ASSERT_EQUAL(num(st, "failed_log_entries"), 2);
  CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "failed_log")), s.failed_log);
  cJSON_Delete(st);

  /* Indexing goes on after them. */
  put(&f, exp, "good3", "a", "blue", 3);
  feed_flush(&f);
  check_term(&s, &f, exp, "category", "a", NULL);
  g_hash_table_destroy(exp);
  shard_stop(&s);
  feed_stop(&f);
}

static gpointer produce_main(gpointer data) {
  feed_t *f = ((gpointer *)data)[0];
  GHashTable *exp = ((gpointer *)data)[1];
  for (int i = 0; i < 3000; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "c%04d", g_random_int_range(0, 400));
    if (i % 10 == 9)
      del(f, exp, key);
    else
      put(f, exp, key, i % 3 ? "x" : "y", "red", i);
    if (i % 100 == 99) g_usleep(20000);
  }
  return NULL;
}

/* kill -9 mid-stream: after a restart the shard converges and resumes from
 * its stored positions (nothing lost, nothing applied out of order). */
static void test_kill_resume(void) {
  feed_t f;
  CU_ASSERT_TRUE_FATAL(feed_start(&f));
  shard_t s;
  CU_ASSERT_TRUE_FATAL(shard_start(&s, &f, ""));
  send_schema(&f, SCHEMA_V1);
  GHashTable *exp = expect_new();
  gpointer args[] = {&f, exp};
  gint64 t0 = g_get_monotonic_time();
  GThread *t = g_thread_new("produce", produce_main, args);
  /* Kill once it has applied some, while events keep coming. */
  for (int i = 0; i < 200; i++) {
    cJSON *st = status(&s);
    double docs = st ? num(st, "documents") : 0;
    cJSON_Delete(st);
    if (docs > 50) break;
    g_usleep(10000);
  }
  shard_disconnect(&s);
  ixt_daemon_kill(&s.d);
  g_usleep(300000);
  CU_ASSERT_TRUE_FATAL(shard_restart(&s));
  g_thread_join(t);
  feed_flush(&f);
  check_term(&s, &f, exp, "category", "x", NULL);
  gint64 t1 = g_get_monotonic_time();
  check_docs(&s, &f, exp, NULL);
  cJSON *st = status(&s);
  const cJSON *p;
  double next = 0;
  cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(st, "partitions")) {
    CU_ASSERT_EQUAL(num(p, "lag"), 0);
    next += num(p, "next_offset");
  }
  /* Every partition's position is its end: 3000 events + a schema each. */
  CU_ASSERT_EQUAL(next, 3000 + PARTITIONS);
  fprintf(stderr, "\n  3000 events produced, applied (with a kill -9 and restart) in %.2f s; "
                  "status: batches %.0f, apply_ms %.1f\n",
          (double)(t1 - t0) / 1e6, num(st, "batches"), num(st, "apply_ms"));
  cJSON_Delete(st);
  g_hash_table_destroy(exp);
  shard_stop(&s);
  feed_stop(&f);
}

/* Two shards split the partitions: each sees only its keys, together all;
 * the schema reaches both; reindex() backfills a new index with
 * equal-version events and ignores keys of the other shard. */
static void test_split_and_reindex(void) {
  feed_t f;
  CU_ASSERT_TRUE_FATAL(feed_start(&f));
  shard_t a, b;
  CU_ASSERT_TRUE_FATAL(shard_start(&a, &f, "0-1"));
  CU_ASSERT_TRUE_FATAL(shard_start(&b, &f, "2,3"));
  gboolean mask_a[PARTITIONS] = {TRUE, TRUE, FALSE, FALSE};
  gboolean mask_b[PARTITIONS] = {FALSE, FALSE, TRUE, TRUE};
  send_schema(&f, SCHEMA_V1);
  GHashTable *exp = expect_new();
  for (int i = 0; i < 80; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "s%03d", i);
    put(&f, exp, key, i % 2 ? "odd" : "even", i % 3 ? "red" : "blue", i);
  }
  feed_flush(&f);
  check_term(&a, &f, exp, NULL, NULL, mask_a);
  check_term(&b, &f, exp, NULL, NULL, mask_b);
  check_term(&a, &f, exp, "category", "odd", mask_a);
  check_term(&b, &f, exp, "category", "odd", mask_b);
  check_docs(&a, &f, exp, mask_a);
  check_docs(&b, &f, exp, mask_b);
  guint in_a = 0;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, exp);
  while (g_hash_table_iter_next(&it, &k, &v)) in_a += mask_a[partition_of(&f, k)];
  CU_ASSERT_TRUE(in_a > 0 && in_a < 80); /* the split means something */

  /* A new index on color: old documents are not in it until a backfill. */
  send_schema(&f, SCHEMA_V2);
  double total;
  GHashTable *none = search_all(&a, "{\"term\":{\"color\":\"red\"}}", &total);
  CU_ASSERT_EQUAL(total, 0);
  g_hash_table_destroy(none);

  /* Backfill through reindex(): every document at its current version, to
   * shard a only; b's keys must be ignored. */
  GPtrArray *evs = g_ptr_array_new_with_free_func(g_object_unref);
  g_hash_table_iter_init(&it, exp);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    expect_t *x = v;
    g_ptr_array_add(evs, mk_event(IXIA_CHANGE_OP_PUT, k, x->version, x->doc));
  }
  gint32 applied = -1;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(call_ok(ixia_search_if_reindex(a.client, &applied, evs, &xe, &gerr), xe, gerr, &e));
  if (e) fprintf(stderr, "\n  reindex: %s\n", e->message);
  ixia_error_destroy(e);
  CU_ASSERT_EQUAL(applied, (gint32)in_a);
  g_ptr_array_unref(evs);
  check_term(&a, &f, exp, "color", "red", mask_a);
  check_docs(&a, &f, exp, mask_a); /* no foreign key got in */
  none = search_all(&b, "{\"term\":{\"color\":\"red\"}}", &total);
  CU_ASSERT_EQUAL(total, 0); /* b was not backfilled */
  g_hash_table_destroy(none);
  /* New writes after the schema are indexed under color at once. */
  put(&f, exp, "s000", "even", "red", 0.5);
  put(&f, exp, "s001", "odd", "red", 1.5);
  feed_flush(&f);
  GHashTable *got = search_all(&b, "{\"term\":{\"color\":\"red\"}}", &total);
  guint want_b = mask_b[partition_of(&f, "s000")] + mask_b[partition_of(&f, "s001")];
  CU_ASSERT_EQUAL(g_hash_table_size(got), want_b);
  g_hash_table_destroy(got);

  cJSON *st = status(&a);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(st, "partitions")), 2);
  CU_ASSERT_EQUAL(num(st, "reindex_ignored"), 80 - in_a);
  cJSON_Delete(st);
  g_hash_table_destroy(exp);
  shard_stop(&a);
  shard_stop(&b);
  feed_stop(&f);
}

/* A sync search sees an event acknowledged by Kafka just before it. */
static void test_sync_search(void) {
  feed_t f;
  CU_ASSERT_TRUE_FATAL(feed_start(&f));
  shard_t s;
  CU_ASSERT_TRUE_FATAL(shard_start(&s, &f, ""));
  send_schema(&f, SCHEMA_V1);
  GHashTable *exp = expect_new();
  gint64 worst = 0;
  for (int i = 0; i < 30; i++) {
    char key[16], cat[16];
    g_snprintf(key, sizeof key, "y%03d", i);
    g_snprintf(cat, sizeof cat, "only%d", i);
    put(&f, exp, key, cat, "red", i);
    feed_flush(&f); /* acknowledged, as replication waits for before sync */
    gint64 t0 = g_get_monotonic_time();
    check_term(&s, &f, exp, "category", cat, NULL);
    worst = MAX(worst, g_get_monotonic_time() - t0);
  }
  fprintf(stderr, "\n  sync search after produce: worst %.1f ms\n", (double)worst / 1000);
  g_hash_table_destroy(exp);
  shard_stop(&s);
  feed_stop(&f);
}

/* One memcached text-protocol request; returns the reply (caller frees). */
static char *mc_request(int port, const char *req) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  char buf[512] = "";
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, req, strlen(req)) == (ssize_t)strlen(req)) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
  }
  close(fd);
  return g_strdup(buf);
}

/* Indexed keys are deleted from memcached (the key format of cache.h). */
static void test_cache_invalidation(void) {
  ixt_memcached_t mc = {0};
  CU_ASSERT_TRUE_FATAL(ixt_memcached_start(&mc, 0));
  feed_t f;
  CU_ASSERT_TRUE_FATAL(feed_start(&f));
  shard_t s;
  CU_ASSERT_TRUE_FATAL(shard_start_cache(&s, &f, "", mc.addr));
  send_schema(&f, SCHEMA_V1);
  const char *keys[] = {"m1", "m2", "m3"};
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
    char *set = g_strdup_printf("set ixia:shop:products:%s 0 0 5\r\nstale\r\n", keys[i]);
    char *r = mc_request(mc.port, set);
    CU_ASSERT_STRING_EQUAL(r, "STORED\r\n");
    g_free(r);
    g_free(set);
  }
  GHashTable *exp = expect_new();
  put(&f, exp, "m1", "a", "red", 1);
  del(&f, exp, "m2");
  feed_flush(&f);
  check_term(&s, &f, exp, "category", "a", NULL);
  /* The invalidator runs beside the apply thread: allow it a moment. */
  gboolean gone = FALSE;
  for (int i = 0; i < 100 && !gone; i++) {
    char *r1 = mc_request(mc.port, "get ixia:shop:products:m1\r\n");
    char *r2 = mc_request(mc.port, "get ixia:shop:products:m2\r\n");
    gone = strcmp(r1, "END\r\n") == 0 && strcmp(r2, "END\r\n") == 0;
    g_free(r1);
    g_free(r2);
    if (!gone) g_usleep(20000);
  }
  CU_ASSERT_TRUE(gone);
  char *r3 = mc_request(mc.port, "get ixia:shop:products:m3\r\n");
  CU_ASSERT_PTR_NOT_NULL(strstr(r3, "stale")); /* untouched key stays */
  g_free(r3);
  cJSON *st = status(&s);
  CU_ASSERT_EQUAL(num(st, "invalidations"), 2);
  cJSON_Delete(st);
  g_hash_table_destroy(exp);
  shard_stop(&s);
  feed_stop(&f);
  ixt_memcached_stop(&mc);
}

/* A misconfigured shard refuses to start, naming the option. */
static void test_bad_partitions(void) {
  feed_t f;
  CU_ASSERT_TRUE_FATAL(feed_start(&f));
  const char *bad[] = {"7", "1-x", "3-1"};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    shard_t s;
    memset(&s, 0, sizeof s);
    s.dir = ixt_tmpdir();
    char *sets[] = {g_strdup_printf("kafka.brokers=%s", f.kafka.bootstrap),
                    g_strdup_printf("index.path=%s/index", s.dir),
                    g_strdup_printf("indexer.partitions=%s", bad[i]), NULL};
    CU_ASSERT_FALSE(ixt_daemon_start(&s.d, "ixia-indexer", "indexer", s.dir, (const char *const *)sets));
    for (char **p = sets; *p; p++) g_free(*p);
    char *logp = g_strdup_printf("%s/ixia-indexer.log", s.dir);
    char *text = NULL;
    g_file_get_contents(logp, &text, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "indexer.partitions"));
    g_free(text);
    g_free(logp);
    ixt_daemon_stop(&s.d);
    g_free(s.dir);
  }
  feed_stop(&f);
}

/* Kafka deleting events a stopped shard had not read yet (retention; here
 * a 1 MiB budget per partition) must not pass silently: the shard counts
 * them and asks for a repair (which, without an API to repair from, stays
 * pending and says why). */
static void test_offsets_lost(void) {
  feed_t f;
  const char *small[] = {"devkafka.memory_mb=4", NULL};
  CU_ASSERT_TRUE_FATAL(feed_start_sets(&f, small));
  shard_t s;
  CU_ASSERT_TRUE_FATAL(shard_start(&s, &f, ""));
  send_schema(&f, SCHEMA_V1);
  char key[32];
  char *doc = g_strdup_printf("{\"category\":\"x\",\"pad\":\"%0*d\"}", 4000, 0);
  int first = 0;
  while (partition_of(&f, (snprintf(key, sizeof key, "k%d", first), key)) != 0) first++;
  send_doc(&f, key, doc);
  feed_flush(&f);
  cJSON *st = NULL;
  for (int i = 0; i < 200; i++) {
    cJSON_Delete(st);
    st = status(&s);
    if (st && num(st, "documents") >= 1) break;
    g_usleep(20000);
  }
  CU_ASSERT_EQUAL(num(st, "offsets_lost"), 0);
  cJSON_Delete(st);
  shard_disconnect(&s);
  ixt_daemon_kill(&s.d);
  /* ~8 MiB into partition 0 while the shard is down. */
  int sent = 0;
  for (int i = first + 1; sent < 2000; i++) {
    snprintf(key, sizeof key, "k%d", i);
    if (partition_of(&f, key) != 0) continue;
    send_doc(&f, key, doc);
    sent++;
  }
  feed_flush(&f);
  CU_ASSERT_TRUE_FATAL(shard_restart(&s));
  st = NULL;
  for (int i = 0; i < 300; i++) {
    cJSON_Delete(st);
    st = status(&s);
    if (st && num(st, "offsets_lost") > 0) break;
    g_usleep(20000);
  }
  CU_ASSERT_TRUE(num(st, "offsets_lost") > 0);
  CU_ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "repairing")));
  CU_ASSERT_TRUE(num(cJSON_GetObjectItemCaseSensitive(st, "repair_triggers"), "offsets_lost") > 0);
  cJSON_Delete(st);
  char *log = g_strdup_printf("%s/ixia-indexer.log", s.dir);
  char *text = NULL;
  CU_ASSERT_TRUE(g_file_get_contents(log, &text, NULL, NULL) && strstr(text, "were deleted from Kafka"));
  g_free(text);
  g_free(log);
  g_free(doc);
  shard_stop(&s);
  feed_stop(&f);
}

/* The expiry schedule holds one entry per document, at the earliest
 * expiry it was given (an entry per write grew with the writes within a
 * TTL: a session written every second with a day to live held 86,400), in
 * expiry order, with ns, table and key telling documents apart. */
static void test_expiry_schedule(void) {
  ixia_expiry_t *e = ixia_expiry_new();
  ixia_expiry_add(e, "n", "t", "k1", 2, 100);
  ixia_expiry_add(e, "n", "t", "k2", 2, 50);
  for (gint64 t = 101; t < 2000; t++) ixia_expiry_add(e, "n", "t", "k1", 2, t); /* later: no move */
  ixia_expiry_add(e, "n", "u", "k1", 2, 70);  /* another table: another document */
  ixia_expiry_add(e, "m", "t", "k1", 2, 80);  /* another namespace */
  ixia_expiry_add(e, "n", "t", "k10", 3, 90); /* a longer key */
  ixia_expiry_add(e, "n", "t", "k1", 2, 30);  /* earlier: moves up */
  ixia_expiry_add(e, "n", "t", "k3", 2, 0);   /* none: not scheduled */
  ixia_expiry_add(e, "n", "t", "z\0a", 3, 96); /* keys with a NUL byte */
  ixia_expiry_add(e, "n", "t", "z\0b", 3, 97);
  ixia_expiry_add(e, "n", "t", "z\0a", 3, 98);
  CU_ASSERT_EQUAL(ixia_expiry_size(e), 7);
  CU_ASSERT_EQUAL(ixia_expiry_next(e), 30);
  CU_ASSERT_PTR_NULL(ixia_expiry_due(e, 29));
  const struct {
    gint64 now;
    const char *ns, *table, *key;
    size_t key_len;
    gint64 at;
  } want[] = {{40, "n", "t", "k1", 2, 30}, {60, "n", "t", "k2", 2, 50}, {75, "n", "u", "k1", 2, 70},
              {85, "m", "t", "k1", 2, 80}, {95, "n", "t", "k10", 3, 90}, {96, "n", "t", "z\0a", 3, 96},
              {97, "n", "t", "z\0b", 3, 97}};
  for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
    GPtrArray *due = ixia_expiry_due(e, want[i].now);
    CU_ASSERT_TRUE_FATAL(due && due->len == 1);
    ixia_expiry_entry_t *en = g_ptr_array_index(due, 0);
    CU_ASSERT_STRING_EQUAL(en->ns, want[i].ns);
    CU_ASSERT_STRING_EQUAL(en->table, want[i].table);
    CU_ASSERT_TRUE(en->key_len == want[i].key_len && memcmp(en->key, want[i].key, en->key_len) == 0);
    CU_ASSERT_EQUAL(en->expire_at, want[i].at);
    g_ptr_array_unref(due);
  }
  CU_ASSERT_EQUAL(ixia_expiry_size(e), 0);
  CU_ASSERT_EQUAL(ixia_expiry_next(e), 0);
  /* Gone from the schedule, a document is scheduled afresh. */
  ixia_expiry_add(e, "n", "t", "k1", 2, 500);
  CU_ASSERT_EQUAL(ixia_expiry_next(e), 500);

  /* Against a model: random documents and expiries added while time moves
   * on and due entries are taken, each due in order at its earliest. */
  GRand *r = g_rand_new_with_seed(7);
  GHashTable *model = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_hash_table_insert(model, g_strdup("k1"), GINT_TO_POINTER(500));
  guint wrong = 0, taken = 0;
  gint64 now = 600;
  for (guint i = 0; i < 20000; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "k%u", g_rand_int_range(r, 0, 500));
    gint at = (gint)now + g_rand_int_range(r, 1, 5000);
    gpointer old;
    if (!g_hash_table_lookup_extended(model, key, NULL, &old) || at < GPOINTER_TO_INT(old))
      g_hash_table_insert(model, g_strdup(key), GINT_TO_POINTER(at));
    ixia_expiry_add(e, "n", "t", key, strlen(key), at);
    if (i % 50 == 49) {
      now += 100;
      GPtrArray *due = ixia_expiry_due(e, now);
      for (guint j = 0; due && j < due->len; j++) {
        ixia_expiry_entry_t *en = g_ptr_array_index(due, j);
        if (GPOINTER_TO_INT(g_hash_table_lookup(model, en->key)) != en->expire_at || en->expire_at > now) wrong++;
        if (j && en->expire_at < ((ixia_expiry_entry_t *)g_ptr_array_index(due, j - 1))->expire_at) wrong++;
        g_hash_table_remove(model, en->key);
        taken++;
      }
      if (due) g_ptr_array_unref(due);
      if (ixia_expiry_size(e) != g_hash_table_size(model)) wrong++;
    }
  }
  GPtrArray *due = ixia_expiry_due(e, G_MAXINT);
  CU_ASSERT_TRUE_FATAL(due != NULL);
  CU_ASSERT_EQUAL(due->len, g_hash_table_size(model));
  for (guint i = 0; i < due->len; i++) {
    ixia_expiry_entry_t *en = g_ptr_array_index(due, i);
    if (GPOINTER_TO_INT(g_hash_table_lookup(model, en->key)) != en->expire_at) wrong++;
    if (i && en->expire_at < ((ixia_expiry_entry_t *)g_ptr_array_index(due, i - 1))->expire_at) wrong++;
  }
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_TRUE(taken > 1000); /* the interleaving took place */
  g_ptr_array_unref(due);
  g_hash_table_destroy(model);
  g_rand_free(r);
  ixia_expiry_destroy(e);
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    CU_TestFunc fn;
  } tests[] = {
      {"test_expiry_schedule", test_expiry_schedule},
      {"test_bad_partitions", test_bad_partitions},
      {"test_apply_search_replay", test_apply_search_replay},
      {"test_failed_log", test_failed_log},
      {"test_sync_search", test_sync_search},
      {"test_split_and_reindex", test_split_and_reindex},
      {"test_kill_resume", test_kill_resume},
      {"test_cache_invalidation", test_cache_invalidation},
      {"test_offsets_lost", test_offsets_lost},
  };
  CU_initialize_registry();
  CU_pSuite suite = CU_add_suite("indexer", NULL, NULL);
  /* Arguments name the tests to run (all by default). */
  for (guint i = 0; i < G_N_ELEMENTS(tests); i++) {
    gboolean chosen = argc < 2;
    for (int a = 1; a < argc; a++) chosen = chosen || strcmp(argv[a], tests[i].name) == 0;
    if (chosen) CU_add_test(suite, tests[i].name, tests[i].fn);
  }
  return ixt_run();
}
