/* Unit tests of replication-sink/: the WAL decoder on batches read back from
 * a real truth store's WAL (and on hand-built and broken ones), and the
 * Kafka side against an in-process librdkafka mock cluster: round trip,
 * concurrent calls, injected produce errors, brokers down, the Thrift glue. */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/transport/thrift_framed_transport.h>
#include <thrift/c_glib/transport/thrift_socket.h>

#include "ixia_replication_sink.h"
#include "server.h"
#include "sink.h"
#include "store.h"
#include "support.h"
#include "thrift_util.h"

enum { PARTITIONS = 4, BROKERS = 3 };
/* Kafka protocol ApiKey of ProduceRequest; librdkafka's RD_KAFKA_PROTO_*
 * names live in a header it does not install. */
enum { KAFKA_API_PRODUCE = 0 };

static char *dir;
static ixia_config_t *store_cfg;
static ixia_store_t *store;
static rd_kafka_t *mock_rk; /* only hosts the mock cluster */
static rd_kafka_mock_cluster_t *mock;
static const char *bootstraps;

/* ---------- fixtures ---------- */

static int setup(void) {
  dir = ixt_tmpdir();
  store_cfg = ixia_config_new();
  char *path = g_build_filename(dir, "store", NULL);
  ixia_config_set(store_cfg, "store.path", path, NULL);
  ixia_config_set(store_cfg, "store.sync", "false", NULL); /* speed; durability is not tested here */
  g_free(path);
  ixia_error_t *e = NULL;
  store = ixia_store_open(store_cfg, &e);
  if (!store) {
    fprintf(stderr, "store: %s\n", e->message);
    return 1;
  }
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  char errstr[256];
  rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
  mock_rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!mock_rk) {
    fprintf(stderr, "mock handle: %s\n", errstr);
    return 1;
  }
  mock = rd_kafka_mock_cluster_new(mock_rk, BROKERS);
  if (!mock) return 1;
  bootstraps = rd_kafka_mock_cluster_bootstraps(mock);
  return 0;
}

static int teardown(void) {
  if (mock) rd_kafka_mock_cluster_destroy(mock);
  if (mock_rk) rd_kafka_destroy(mock_rk);
  ixia_store_destroy(store);
  ixia_config_destroy(store_cfg);
  g_free(dir);
  return 0;
}

/* ---------- helpers: store and WAL ---------- */

static gint64 put_ttl(const char *key, const char *json, gint64 ttl) {
  ixia_write_op_t op = {.kind = IXIA_WRITE_PUT, .ns = "shop", .table = "items", .key = key,
                        .key_len = strlen(key), .json = json, .json_len = strlen(json),
                        .expected_version = -1, .ttl_seconds = ttl};
  gint64 v = 0;
  ixia_error_t *e = NULL;
  if (!ixia_store_write(store, &op, 1, &v, &e)) {
    fprintf(stderr, "put: %s\n", e->message);
    ixia_error_destroy(e);
    return -1;
  }
  return v;
}

static gint64 put(const char *key, const char *json) { return put_ttl(key, json, 0); }

/* WAL batches read back from the store, owning their bytes. */
typedef struct {
  GArray *batches; /* ixia_sink_batch_t, data points into bufs */
  GPtrArray *bufs;
} wal_t;

static void wal_free(wal_t *w) {
  g_array_free(w->batches, TRUE);
  g_ptr_array_unref(w->bufs);
  g_free(w);
}

/* Every batch from the one holding `from` to the end, exactly as the
 * replication source reads them. */
static wal_t *read_wal(gint64 from) {
  wal_t *w = g_new0(wal_t, 1);
  w->batches = g_array_new(FALSE, TRUE, sizeof(ixia_sink_batch_t));
  w->bufs = g_ptr_array_new_with_free_func(g_free);
  char *err = NULL;
  rocksdb_wal_iterator_t *it = rocksdb_get_updates_since(ixia_store_db(store), (uint64_t)from, NULL, &err);
  CU_ASSERT_PTR_NULL(err);
  free(err);
  for (; it && rocksdb_wal_iter_valid(it); rocksdb_wal_iter_next(it)) {
    uint64_t seq = 0;
    rocksdb_writebatch_t *wb = rocksdb_wal_iter_get_batch(it, &seq);
    size_t len = 0;
    const char *data = rocksdb_writebatch_data(wb, &len);
    void *copy = g_memdup2(data, len);
    g_ptr_array_add(w->bufs, copy);
    ixia_sink_batch_t b = {(gint64)seq, copy, len};
    g_array_append_val(w->batches, b);
    rocksdb_writebatch_destroy(wb);
  }
  if (it) rocksdb_wal_iter_destroy(it);
  return w;
}

static ixia_sink_event_t *find_version(GPtrArray *events, gint64 version) {
  for (guint i = 0; i < events->len; i++) {
    ixia_sink_event_t *ev = g_ptr_array_index(events, i);
    if (ev->event->version == version) return ev;
  }
  return NULL;
}

static gboolean key_is(const IxiaChangeEvent *e, const char *key) {
  return e->key && e->key->len == strlen(key) && memcmp(e->key->data, key, e->key->len) == 0;
}

static gboolean bytes_equal_key(GBytes *b, GBytes *expected) { return g_bytes_equal(b, expected); }

/* ---------- decoder ---------- */

static void test_decode_real_wal(void) {
  gint64 from = ixia_store_latest_version(store) + 1;
  ixia_write_op_t schema = {.kind = IXIA_WRITE_SCHEMA, .ns = "shop", .table = "items",
                            .json = "{\"namespace\":\"shop\",\"table\":\"items\"}",
                            .json_len = strlen("{\"namespace\":\"shop\",\"table\":\"items\"}"),
                            .expected_version = -1};
  gint64 vs = 0;
  CU_ASSERT_TRUE_FATAL(ixia_store_write(store, &schema, 1, &vs, NULL));
  gint64 va = put_ttl("a", "{\"x\":1}", 3600);
  gint64 vb = put("b", "{\"y\":2}");
  cJSON *patch = cJSON_Parse("{\"z\":3}");
  ixia_write_op_t up = {.kind = IXIA_WRITE_UPSERT, .ns = "shop", .table = "items", .key = "a",
                        .key_len = 1, .doc = patch, .expected_version = -1};
  gint64 va2 = 0;
  CU_ASSERT_TRUE(ixia_store_write(store, &up, 1, &va2, NULL));
  cJSON_Delete(patch);
  /* One atomic request: three edits in one WAL batch. */
  ixia_write_op_t multi[3] = {
      {.kind = IXIA_WRITE_PUT, .ns = "shop", .table = "items", .key = "c", .key_len = 1,
       .json = "{}", .json_len = 2, .expected_version = -1},
      {.kind = IXIA_WRITE_DELETE, .ns = "shop", .table = "items", .key = "b", .key_len = 1,
       .expected_version = -1},
      {.kind = IXIA_WRITE_PUT, .ns = "other", .table = "t2", .key = "k\xc3\xa9", .key_len = 3,
       .json = "{\"q\":[1,2]}", .json_len = 11, .expected_version = -1},
  };
  gint64 mv[3];
  CU_ASSERT_TRUE_FATAL(ixia_store_write(store, multi, 3, mv, NULL));
  CU_ASSERT_EQUAL(mv[1], mv[0] + 1);

  wal_t *w = read_wal(from);
  CU_ASSERT_TRUE_FATAL(w->batches->len >= 1);
  ixia_sink_decode_info_t info;
  gint64 last = -1;
  ixia_error_t *e = NULL;
  GPtrArray *events = ixia_sink_decode((ixia_sink_batch_t *)w->batches->data, w->batches->len, 12345,
                                       &last, &info, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(events);
  CU_ASSERT_EQUAL(last, mv[2]);
  CU_ASSERT_EQUAL(last, ixia_store_latest_version(store));
  CU_ASSERT_EQUAL(info.skipped, 0);
  CU_ASSERT_EQUAL(info.version_mismatches, 0);

  ixia_sink_event_t *ev = find_version(events, vs);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  CU_ASSERT_EQUAL(ev->event->op, IXIA_CHANGE_OP_SCHEMA);
  CU_ASSERT_STRING_EQUAL(ev->event->ns, "shop");
  CU_ASSERT_STRING_EQUAL(ev->event->table, "items");
  CU_ASSERT_EQUAL(ev->event->key->len, 0);
  CU_ASSERT_STRING_EQUAL(ev->event->doc, schema.json);
  GBytes *sk = ixia_record_schema_key("shop", "items");
  CU_ASSERT_TRUE(bytes_equal_key(ev->kafka_key, sk));
  g_bytes_unref(sk);

  ev = find_version(events, va);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  CU_ASSERT_EQUAL(ev->event->op, IXIA_CHANGE_OP_PUT);
  CU_ASSERT_TRUE(key_is(ev->event, "a"));
  CU_ASSERT_STRING_EQUAL(ev->event->doc, "{\"x\":1}");
  CU_ASSERT_TRUE(ev->event->expire_at > g_get_real_time() / G_USEC_PER_SEC);
  CU_ASSERT_EQUAL(ev->event->timestamp_ms, 12345);
  CU_ASSERT_EQUAL(ev->event->format, 1);
  GBytes *ka = ixia_record_doc_key("shop", "items", "a", 1);
  CU_ASSERT_TRUE(bytes_equal_key(ev->kafka_key, ka));

  /* The upsert's event holds the whole merged document, as stored. */
  ev = find_version(events, va2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  CU_ASSERT_EQUAL(ev->event->op, IXIA_CHANGE_OP_PUT);
  CU_ASSERT_TRUE(bytes_equal_key(ev->kafka_key, ka));
  gboolean found = FALSE;
  gint64 cur = 0;
  char *json = NULL;
  CU_ASSERT_TRUE(ixia_store_get(store, "shop", "items", "a", 1, &found, &cur, NULL, &json, NULL, NULL));
  CU_ASSERT_EQUAL(cur, va2);
  CU_ASSERT_STRING_EQUAL(ev->event->doc, json);
  g_free(json);
  g_bytes_unref(ka);

  ev = find_version(events, vb);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  CU_ASSERT_EQUAL(ev->event->expire_at, 0);

  ev = find_version(events, mv[1]);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  CU_ASSERT_EQUAL(ev->event->op, IXIA_CHANGE_OP_DELETE);
  CU_ASSERT_TRUE(key_is(ev->event, "b"));
  CU_ASSERT_FALSE(ev->event->__isset_doc);
  CU_ASSERT_PTR_NULL(ev->event->doc);

  ev = find_version(events, mv[2]);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  CU_ASSERT_STRING_EQUAL(ev->event->ns, "other");
  CU_ASSERT_STRING_EQUAL(ev->event->table, "t2");
  CU_ASSERT_TRUE(key_is(ev->event, "k\xc3\xa9"));
  CU_ASSERT_STRING_EQUAL(ev->event->doc, "{\"q\":[1,2]}");

  /* Events come out in WAL order with consecutive versions. */
  for (guint i = 1; i < events->len; i++) {
    ixia_sink_event_t *a = g_ptr_array_index(events, i - 1), *b = g_ptr_array_index(events, i);
    CU_ASSERT_EQUAL(b->event->version, a->event->version + 1);
  }
  CU_ASSERT_EQUAL(((ixia_sink_event_t *)g_ptr_array_index(events, events->len - 1))->event->version, last);

  /* The envelope survives the compact protocol. */
  ev = find_version(events, mv[2]);
  GByteArray *bytes = ixia_thrift_serialize(THRIFT_STRUCT(ev->event), TRUE, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
  IxiaChangeEvent *back = g_object_new(IXIA_TYPE_CHANGE_EVENT, NULL);
  CU_ASSERT_TRUE(ixia_thrift_deserialize(THRIFT_STRUCT(back), bytes->data, bytes->len, TRUE, NULL));
  CU_ASSERT_EQUAL(back->version, mv[2]);
  CU_ASSERT_TRUE(key_is(back, "k\xc3\xa9"));
  CU_ASSERT_STRING_EQUAL(back->doc, "{\"q\":[1,2]}");
  g_object_unref(back);
  g_byte_array_unref(bytes);

  g_ptr_array_unref(events);
  wal_free(w);

  /* No batches: nothing to do, sequence 0. */
  events = ixia_sink_decode(NULL, 0, 0, &last, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(events);
  CU_ASSERT_EQUAL(events->len, 0);
  CU_ASSERT_EQUAL(last, 0);
  g_ptr_array_unref(events);
}

/* A stored value: 'D', version and expire_at big-endian, JSON. */
static GByteArray *value_of(gint64 version, gint64 expire_at, const char *json) {
  GByteArray *v = g_byte_array_new();
  guint8 hdr[IXIA_RECORD_VALUE_HEADER];
  hdr[0] = 'D';
  for (int i = 0; i < 8; i++) {
    hdr[1 + i] = (guint8)((guint64)version >> (56 - 8 * i));
    hdr[9 + i] = (guint8)((guint64)expire_at >> (56 - 8 * i));
  }
  g_byte_array_append(v, hdr, sizeof hdr);
  g_byte_array_append(v, (const guint8 *)json, (guint)strlen(json));
  return v;
}

static void wb_put(rocksdb_writebatch_t *wb, GBytes *key, GByteArray *value) {
  size_t kl;
  const char *k = g_bytes_get_data(key, &kl);
  rocksdb_writebatch_put(wb, k, kl, (const char *)value->data, value->len);
  g_bytes_unref(key);
  g_byte_array_unref(value);
}

static GPtrArray *decode_wb(rocksdb_writebatch_t *wb, gint64 seq, gint64 *last,
                            ixia_sink_decode_info_t *info, ixia_error_t **err) {
  ixia_sink_batch_t b = {.sequence = seq};
  b.data = rocksdb_writebatch_data(wb, &b.len);
  return ixia_sink_decode(&b, 1, 1, last, info, err);
}

static void test_decode_built_batches(void) {
  const gint64 seq = 1000;
  rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
  wb_put(wb, ixia_record_doc_key("n", "t", "k1", 2), value_of(seq, 77, "{\"a\":1}"));
  rocksdb_writebatch_put(wb, "x-unknown", 9, "v", 1); /* skipped, still a sequence */
  rocksdb_writebatch_delete(wb, "\x00", 1);            /* delete of an unknown kind */
  GBytes *k2 = ixia_record_doc_key("n", "t", "k2", 2);
  rocksdb_writebatch_delete(wb, g_bytes_get_data(k2, NULL), g_bytes_get_size(k2));
  wb_put(wb, ixia_record_doc_key("n", "t", "k3", 2), value_of(999, 0, "{}")); /* wrong version */
  wb_put(wb, ixia_record_schema_key("n", "t"), value_of(seq + 5, 0, "{\"s\":1}"));
  gint64 last = 0;
  ixia_sink_decode_info_t info;
  ixia_error_t *e = NULL;
  GPtrArray *events = decode_wb(wb, seq, &last, &info, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(events);
  CU_ASSERT_EQUAL(last, seq + 5);
  CU_ASSERT_EQUAL(info.edits, 6);
  CU_ASSERT_EQUAL(info.skipped, 2);
  CU_ASSERT_EQUAL(info.version_mismatches, 1);
  CU_ASSERT_EQUAL_FATAL(events->len, 4);
  IxiaChangeEvent *ev0 = ((ixia_sink_event_t *)g_ptr_array_index(events, 0))->event;
  CU_ASSERT_EQUAL(ev0->op, IXIA_CHANGE_OP_PUT);
  CU_ASSERT_EQUAL(ev0->version, seq);
  CU_ASSERT_EQUAL(ev0->expire_at, 77);
  ixia_sink_event_t *del = g_ptr_array_index(events, 1);
  CU_ASSERT_EQUAL(del->event->op, IXIA_CHANGE_OP_DELETE);
  CU_ASSERT_EQUAL(del->event->version, seq + 3); /* skipped edits kept their sequences */
  CU_ASSERT_TRUE(key_is(del->event, "k2"));
  CU_ASSERT_TRUE(g_bytes_equal(del->kafka_key, k2));
  /* A mismatch is reported; the event carries what readers of the store see. */
  CU_ASSERT_EQUAL(((ixia_sink_event_t *)g_ptr_array_index(events, 2))->event->version, 999);
  IxiaChangeEvent *sch = ((ixia_sink_event_t *)g_ptr_array_index(events, 3))->event;
  CU_ASSERT_EQUAL(sch->op, IXIA_CHANGE_OP_SCHEMA);
  CU_ASSERT_EQUAL(sch->version, seq + 5);
  g_ptr_array_unref(events);
  g_bytes_unref(k2);
  rocksdb_writebatch_destroy(wb);
}

static void expect_decode_error(rocksdb_writebatch_t *wb, gint64 seq, ixia_code_t code, const char *needle) {
  ixia_error_t *e = NULL;
  GPtrArray *events = decode_wb(wb, seq, NULL, NULL, &e);
  CU_ASSERT_PTR_NULL(events);
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_EQUAL(e->code, code);
  if (!strstr(e->message, needle)) fprintf(stderr, "unexpected message: %s\n", e->message);
  CU_ASSERT_PTR_NOT_NULL(strstr(e->message, needle));
  ixia_error_destroy(e);
  if (events) g_ptr_array_unref(events);
}

static void test_decode_refuses_what_it_cannot_version(void) {
  /* An edit of another column family: iterate does not report it and, on
   * RocksDB 7.8, stops there, so the put after it would be lost. */
  char *cfdir = g_build_filename(dir, "cfdb", NULL);
  rocksdb_options_t *opts = rocksdb_options_create();
  rocksdb_options_set_create_if_missing(opts, 1);
  char *rerr = NULL;
  rocksdb_t *db = rocksdb_open(opts, cfdir, &rerr);
  CU_ASSERT_PTR_NULL_FATAL(rerr);
  rocksdb_column_family_handle_t *cf = rocksdb_create_column_family(db, opts, "other", &rerr);
  CU_ASSERT_PTR_NULL_FATAL(rerr);
  rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
  rocksdb_writebatch_put_cf(wb, cf, "a", 1, "b", 1);
  wb_put(wb, ixia_record_doc_key("n", "t", "k", 1), value_of(11, 0, "{}"));
  expect_decode_error(wb, 10, IXIA_EINTERNAL, "record 0 is of type 5");
  rocksdb_writebatch_destroy(wb);
  rocksdb_column_family_handle_destroy(cf);
  rocksdb_close(db);
  rocksdb_options_destroy(opts);
  g_free(cfdir);

  /* Merges and range deletes: same story. */
  wb = rocksdb_writebatch_create();
  rocksdb_writebatch_merge(wb, "dk", 2, "v", 1);
  expect_decode_error(wb, 10, IXIA_EINTERNAL, "cannot assign versions");
  rocksdb_writebatch_destroy(wb);
  wb = rocksdb_writebatch_create();
  rocksdb_writebatch_delete_range(wb, "a", 1, "b", 1);
  expect_decode_error(wb, 10, IXIA_EINTERNAL, "cannot assign versions");
  rocksdb_writebatch_destroy(wb);

  /* A document record without the value header is corruption, not skipped. */
  wb = rocksdb_writebatch_create();
  GBytes *k = ixia_record_doc_key("n", "t", "k", 1);
  rocksdb_writebatch_put(wb, g_bytes_get_data(k, NULL), g_bytes_get_size(k), "{}", 2);
  expect_decode_error(wb, 10, IXIA_EINTERNAL, "malformed document record at sequence 10");
  rocksdb_writebatch_destroy(wb);
  /* A 'd' key too short to hold its own lengths. */
  wb = rocksdb_writebatch_create();
  rocksdb_writebatch_delete(wb, "d\x09", 2);
  expect_decode_error(wb, 10, IXIA_EINTERNAL, "malformed document key");
  rocksdb_writebatch_destroy(wb);

  /* Bad input from the caller. */
  ixia_error_t *e = NULL;
  ixia_sink_batch_t shortb = {5, "abc", 3};
  CU_ASSERT_PTR_NULL(ixia_sink_decode(&shortb, 1, 0, NULL, NULL, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
  ixia_error_destroy(e), e = NULL;
  ixia_sink_batch_t nodata = {5, NULL, 0};
  CU_ASSERT_PTR_NULL(ixia_sink_decode(&nodata, 1, 0, NULL, NULL, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
  ixia_error_destroy(e), e = NULL;

  /* Truncated body: the header promises more records than it holds. */
  wb = rocksdb_writebatch_create();
  wb_put(wb, ixia_record_doc_key("n", "t", "k", 1), value_of(10, 0, "{\"long\":\"value\"}"));
  ixia_sink_batch_t trunc = {.sequence = 10};
  trunc.data = rocksdb_writebatch_data(wb, &trunc.len);
  trunc.len -= 5;
  CU_ASSERT_PTR_NULL(ixia_sink_decode(&trunc, 1, 0, NULL, NULL, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(e ? strstr(e->message, "runs past the end") : NULL);
  ixia_error_destroy(e), e = NULL;

  /* Out of order or overlapping batches would break per-key order. */
  ixia_sink_batch_t two[2] = {{.sequence = 20}, {.sequence = 20}};
  two[0].data = rocksdb_writebatch_data(wb, &two[0].len);
  two[1] = two[0];
  CU_ASSERT_PTR_NULL(ixia_sink_decode(two, 2, 0, NULL, NULL, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
  ixia_error_destroy(e), e = NULL;
  two[1].sequence = 21; /* contiguous: fine (the version mismatch is only logged) */
  GPtrArray *ok = ixia_sink_decode(two, 2, 0, NULL, NULL, &e);
  CU_ASSERT_PTR_NOT_NULL(ok);
  if (ok) g_ptr_array_unref(ok);
  ixia_sink_batch_t zero = two[0];
  zero.sequence = 0;
  CU_ASSERT_PTR_NULL(ixia_sink_decode(&zero, 1, 0, NULL, NULL, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
  ixia_error_destroy(e), e = NULL;
  rocksdb_writebatch_destroy(wb);

  /* A WAL batch whose header names another sequence than the caller's. */
  gint64 v = put("hdr", "{}");
  wal_t *w = read_wal(v);
  CU_ASSERT_TRUE_FATAL(w->batches->len >= 1);
  ixia_sink_batch_t b = g_array_index(w->batches, ixia_sink_batch_t, 0);
  b.sequence += 1;
  CU_ASSERT_PTR_NULL(ixia_sink_decode(&b, 1, 0, NULL, NULL, &e));
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "header says"));
  ixia_error_destroy(e), e = NULL;
  wal_free(w);
}

/* ---------- Kafka ---------- */

static ixia_config_t *sink_cfg(const char *topic, const char *delivery_ms, const char *message_ms) {
  ixia_config_t *cfg = ixia_config_new();
  ixia_config_set(cfg, "kafka.brokers", bootstraps, NULL);
  ixia_config_set(cfg, "kafka.topic", topic, NULL);
  ixia_config_set(cfg, "sink.delivery_timeout_ms", delivery_ms, NULL);
  ixia_config_set(cfg, "kafka.message_timeout_ms", message_ms, NULL);
  ixia_config_set(cfg, "kafka.linger_ms", "5", NULL);
  return cfg;
}

static ixia_sink_t *new_sink(const ixia_config_t *cfg) {
  ixia_error_t *e = NULL;
  ixia_sink_t *s = ixia_sink_new(cfg, &e);
  if (!s) fprintf(stderr, "sink: %s\n", e->message);
  ixia_error_destroy(e);
  return s;
}

static void create_topic(const char *topic) {
  CU_ASSERT_EQUAL(rd_kafka_mock_topic_create(mock, topic, PARTITIONS, BROKERS), RD_KAFKA_RESP_ERR_NO_ERROR);
}

typedef struct {
  GBytes *kafka_key;
  IxiaChangeEvent *event;
} consumed_t;

static void consumed_free(consumed_t *c) {
  g_bytes_unref(c->kafka_key);
  g_object_unref(c->event);
  g_free(c);
}

/* Everything in topic, read from the beginning up to the high watermarks
 * (what Kafka acknowledged before the call). */
static GPtrArray *consume_all(const char *topic) {
  GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)consumed_free);
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  char errstr[256];
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, errstr, sizeof errstr);
  rd_kafka_conf_set(conf, "group.id", "test_sink", errstr, sizeof errstr);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr, sizeof errstr);
  rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rk);
  rd_kafka_poll_set_consumer(rk);
  gint64 high[PARTITIONS];
  gint64 wanted = 0;
  rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(PARTITIONS);
  for (int p = 0; p < PARTITIONS; p++) {
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t kerr = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 10000);
    CU_ASSERT_EQUAL(kerr, RD_KAFKA_RESP_ERR_NO_ERROR);
    high[p] = hi;
    wanted += hi - lo;
    rd_kafka_topic_partition_list_add(parts, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  CU_ASSERT_EQUAL(rd_kafka_assign(rk, parts), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(parts);
  gint64 deadline = g_get_monotonic_time() + 15 * G_USEC_PER_SEC;
  while ((gint64)out->len < wanted && g_get_monotonic_time() < deadline) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    if (!m->err && m->offset < high[m->partition]) {
      consumed_t *c = g_new0(consumed_t, 1);
      c->kafka_key = g_bytes_new(m->key, m->key_len);
      c->event = g_object_new(IXIA_TYPE_CHANGE_EVENT, NULL);
      CU_ASSERT_TRUE(ixia_thrift_deserialize(THRIFT_STRUCT(c->event), m->payload, m->len, TRUE, NULL));
      g_ptr_array_add(out, c);
    }
    rd_kafka_message_destroy(m);
  }
  CU_ASSERT_EQUAL((gint64)out->len, wanted);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

/* Every decoded event of w is in `got`, keyed by its store key, and (when
 * exact) nothing else is; when ordered (every test but the one whose calls
 * race on purpose), per key, versions only increase, repeats of a version
 * already delivered aside. */
static void check_topic(wal_t *w, GPtrArray *got, gboolean exact, gboolean ordered) {
  GPtrArray *want = ixia_sink_decode((ixia_sink_batch_t *)w->batches->data, w->batches->len, 0, NULL,
                                     NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  GHashTable *by_version = g_hash_table_new(g_int64_hash, g_int64_equal);
  for (guint i = 0; i < got->len; i++) {
    consumed_t *c = g_ptr_array_index(got, i);
    g_hash_table_insert(by_version, &c->event->version, c);
  }
  guint missing = 0, wrong = 0;
  for (guint i = 0; i < want->len; i++) {
    ixia_sink_event_t *ev = g_ptr_array_index(want, i);
    consumed_t *c = g_hash_table_lookup(by_version, &ev->event->version);
    if (!c) {
      missing++;
      continue;
    }
    if (!g_bytes_equal(c->kafka_key, ev->kafka_key) || c->event->op != ev->event->op ||
        g_strcmp0(c->event->ns, ev->event->ns) || g_strcmp0(c->event->table, ev->event->table) ||
        g_strcmp0(c->event->doc, ev->event->doc) || c->event->key->len != ev->event->key->len ||
        memcmp(c->event->key->data, ev->event->key->data, c->event->key->len))
      wrong++;
  }
  CU_ASSERT_EQUAL(missing, 0);
  CU_ASSERT_EQUAL(wrong, 0);
  if (exact) CU_ASSERT_EQUAL(got->len, want->len);
  /* Per Kafka key (consumed in partition order), versions only increase,
   * under every fault: a repeat may only bring back a version already
   * delivered (at-least-once). */
  ixt_order_t *order = ixt_order_new();
  for (guint i = 0; i < got->len; i++) {
    consumed_t *c = g_ptr_array_index(got, i);
    gsize klen;
    const void *k = g_bytes_get_data(c->kafka_key, &klen);
    ixt_order_next(order, k, klen, c->event->version);
  }
  if (ordered) CU_ASSERT_EQUAL(ixt_order_violations(order), 0);
  ixt_order_destroy(order);
  g_hash_table_destroy(by_version);
  g_ptr_array_unref(want);
}

/* Writes n documents (several keys, each rewritten) and returns the WAL
 * batches holding them. */
static wal_t *write_docs(const char *prefix, int n) {
  gint64 from = ixia_store_latest_version(store) + 1;
  for (int i = 0; i < n; i++) {
    char key[64], json[64];
    g_snprintf(key, sizeof key, "%s-%d", prefix, i % 37);
    g_snprintf(json, sizeof json, "{\"i\":%d}", i);
    CU_ASSERT_TRUE(put(key, json) > 0);
  }
  wal_t *w = read_wal(from);
  /* The iterator starts at the batch holding `from`; drop older ones. */
  while (w->batches->len > 0 && g_array_index(w->batches, ixia_sink_batch_t, 0).sequence < from)
    g_array_remove_index(w->batches, 0);
  return w;
}

static gboolean replicate(ixia_sink_t *s, wal_t *w, gint64 *last, ixia_error_t **e) {
  return ixia_sink_replicate(s, (ixia_sink_batch_t *)w->batches->data, w->batches->len, last, e);
}

static void test_bad_config(void) {
  ixia_config_t *cfg = sink_cfg("", "10000", "8000");
  ixia_error_t *e = NULL;
  CU_ASSERT_PTR_NULL(ixia_sink_new(cfg, &e));
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_EINVAL);
  ixia_error_destroy(e);
  ixia_sink_destroy(NULL);
  ixia_config_destroy(cfg);
}

static void test_publish_round_trip(void) {
  create_topic("t-roundtrip");
  ixia_config_t *cfg = sink_cfg("t-roundtrip", "10000", "8000");
  ixia_sink_t *s = new_sink(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  gint64 last = -1;
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(ixia_sink_replicate(s, NULL, 0, &last, &e));
  CU_ASSERT_EQUAL(last, 0);

  wal_t *w = write_docs("rt", 300);
  CU_ASSERT_TRUE(replicate(s, w, &last, &e));
  if (e) fprintf(stderr, "replicate: %s\n", e->message);
  CU_ASSERT_EQUAL(last, ixia_store_latest_version(store));
  GPtrArray *got = consume_all("t-roundtrip");
  CU_ASSERT_EQUAL(got->len, 300);
  check_topic(w, got, TRUE, TRUE);
  g_ptr_array_unref(got);

  char *stats = ixia_sink_stats(s);
  cJSON *j = cJSON_Parse(stats);
  CU_ASSERT_EQUAL(cJSON_GetObjectItem(j, "events_published")->valuedouble, 300);
  CU_ASSERT_EQUAL(cJSON_GetObjectItem(j, "calls")->valuedouble, 2);
  CU_ASSERT_EQUAL(cJSON_GetObjectItem(j, "call_failures")->valuedouble, 0);
  CU_ASSERT_EQUAL(cJSON_GetObjectItem(j, "last_sequence")->valuedouble, (double)last);
  CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(j, "kafka_topic")->valuestring, "t-roundtrip");
  CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(j, "kafka_brokers")->valuestring, bootstraps);
  cJSON_Delete(j);
  g_free(stats);
  wal_free(w);
  ixia_sink_destroy(s);
  ixia_config_destroy(cfg);
}

typedef struct {
  ixia_sink_t *sink;
  ixia_sink_batch_t *batches;
  guint n;
  gboolean ok;
} call_arg_t;

static gpointer call_thread(gpointer data) {
  call_arg_t *a = data;
  gint64 last = 0;
  ixia_error_t *e = NULL;
  a->ok = ixia_sink_replicate(a->sink, a->batches, a->n, &last, &e) &&
          last == a->batches[a->n - 1].sequence;
  if (e) fprintf(stderr, "concurrent replicate: %s\n", e->message);
  ixia_error_destroy(e);
  return NULL;
}

static void test_concurrent_calls(void) {
  create_topic("t-concurrent");
  ixia_config_t *cfg = sink_cfg("t-concurrent", "10000", "8000");
  ixia_sink_t *s = new_sink(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  wal_t *w = write_docs("cc", 400); /* one edit per batch: writes were sequential */
  enum { T = 4 };
  guint per = w->batches->len / T;
  CU_ASSERT_TRUE_FATAL(per > 0);
  call_arg_t args[T];
  GThread *threads[T];
  for (int t = 0; t < T; t++) {
    args[t] = (call_arg_t){s, &g_array_index(w->batches, ixia_sink_batch_t, t * per),
                           t == T - 1 ? w->batches->len - t * per : per, FALSE};
    threads[t] = g_thread_new("call", call_thread, &args[t]);
  }
  for (int t = 0; t < T; t++) {
    g_thread_join(threads[t]);
    CU_ASSERT_TRUE(args[t].ok);
  }
  GPtrArray *got = consume_all("t-concurrent");
  /* Calls raced, so one key's edits may interleave across calls (the
   * replication source never races its calls); presence and exact count
   * still hold. */
  CU_ASSERT_EQUAL(got->len, 400);
  check_topic(w, got, FALSE, FALSE);
  g_ptr_array_unref(got);
  wal_free(w);
  ixia_sink_destroy(s);
  ixia_config_destroy(cfg);
}

static void test_retriable_produce_errors(void) {
  create_topic("t-retry");
  ixia_config_t *cfg = sink_cfg("t-retry", "10000", "8000");
  ixia_sink_t *s = new_sink(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  wal_t *w = write_docs("re", 100);
  rd_kafka_mock_push_request_errors(mock, KAFKA_API_PRODUCE, 6,
                                    RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                                    RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
                                    RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
                                    RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
                                    RD_KAFKA_RESP_ERR__TRANSPORT,
                                    RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
  gint64 last = 0;
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(replicate(s, w, &last, &e));
  if (e) fprintf(stderr, "replicate: %s\n", e->message);
  ixia_error_destroy(e);
  rd_kafka_mock_clear_request_errors(mock, KAFKA_API_PRODUCE);
  GPtrArray *got = consume_all("t-retry");
  /* Retries of a request that timed out may be stored twice; nothing is
   * missing and per key the order holds. */
  check_topic(w, got, FALSE, TRUE);
  g_ptr_array_unref(got);
  wal_free(w);
  ixia_sink_destroy(s);
  ixia_config_destroy(cfg);
}

static void test_permanent_produce_error_fails_call(void) {
  create_topic("t-perm");
  ixia_config_t *cfg = sink_cfg("t-perm", "10000", "8000");
  ixia_sink_t *s = new_sink(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  wal_t *w = write_docs("pe", 40);
  /* Connect first, so the error hits produce and not start-up. */
  gint64 last = 0;
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(replicate(s, w, &last, NULL));
  /* Not retriable: the request's messages fail. (Not an authorization
   * error: librdkafka then marks the topic unusable until its next metadata
   * refresh, minutes away.) */
  rd_kafka_mock_push_request_errors(mock, KAFKA_API_PRODUCE, 1, RD_KAFKA_RESP_ERR_INVALID_RECORD);
  CU_ASSERT_FALSE(replicate(s, w, &last, &e));
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_EQUAL(e->code, IXIA_EUNAVAILABLE);
  CU_ASSERT_PTR_NOT_NULL(strstr(e->message, "INVALID_RECORD"));
  ixia_error_destroy(e), e = NULL;
  rd_kafka_mock_clear_request_errors(mock, KAFKA_API_PRODUCE);
  /* The source re-sends; the sink recovers. */
  gboolean ok = FALSE;
  for (int i = 0; i < 5 && !ok; i++) {
    ok = replicate(s, w, &last, &e);
    if (e) fprintf(stderr, "retry %d: %s\n", i, e->message);
    ixia_error_destroy(e), e = NULL;
  }
  CU_ASSERT_TRUE(ok);
  GPtrArray *got = consume_all("t-perm");
  check_topic(w, got, FALSE, TRUE);
  g_ptr_array_unref(got);
  char *stats = ixia_sink_stats(s);
  cJSON *j = cJSON_Parse(stats);
  CU_ASSERT_TRUE(cJSON_GetObjectItem(j, "call_failures")->valuedouble >= 1);
  CU_ASSERT_TRUE(cJSON_GetObjectItem(j, "delivery_failures")->valuedouble >= 1);
  cJSON_Delete(j);
  g_free(stats);
  wal_free(w);
  ixia_sink_destroy(s);
  ixia_config_destroy(cfg);
}

static double stat_of(ixia_sink_t *s, const char *name) {
  char *stats = ixia_sink_stats(s);
  cJSON *j = cJSON_Parse(stats);
  cJSON *item = cJSON_GetObjectItem(j, name);
  double v = item ? item->valuedouble : -1;
  cJSON_Delete(j);
  g_free(stats);
  return v;
}

/* An idempotent producer that loses sequence sync with a broker is dead
 * for good; the sink replaces it and carries on. */
static void test_fatal_producer_error_is_survived(void) {
  create_topic("t-fatal");
  ixia_config_t *cfg = sink_cfg("t-fatal", "10000", "8000");
  ixia_sink_t *s = new_sink(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  wal_t *w = write_docs("fa", 40);
  gint64 last = 0;
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(replicate(s, w, &last, NULL));
  rd_kafka_mock_push_request_errors(mock, KAFKA_API_PRODUCE, 1,
                                    RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
  CU_ASSERT_FALSE(replicate(s, w, &last, &e));
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_EQUAL(e->code, IXIA_EUNAVAILABLE);
  CU_ASSERT_PTR_NOT_NULL(strstr(e->message, "OUT_OF_ORDER_SEQUENCE_NUMBER"));
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_TRUE(replicate(s, w, &last, &e));
  if (e) fprintf(stderr, "after fatal: %s\n", e->message);
  ixia_error_destroy(e), e = NULL;
  CU_ASSERT_EQUAL(stat_of(s, "producer_restarts"), 1);
  GPtrArray *got = consume_all("t-fatal");
  check_topic(w, got, FALSE, TRUE);
  g_ptr_array_unref(got);
  wal_free(w);
  ixia_sink_destroy(s);
  ixia_config_destroy(cfg);
}

static void test_brokers_down_fails_within_timeout(void) {
  create_topic("t-down");
  ixia_config_t *cfg = sink_cfg("t-down", "2000", "1500");
  ixia_sink_t *s = new_sink(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  wal_t *w = write_docs("dn", 50);
  gint64 last = 0;
  ixia_error_t *e = NULL;
  CU_ASSERT_TRUE(replicate(s, w, &last, NULL)); /* connected and working */

  CU_ASSERT_EQUAL(rd_kafka_mock_broker_set_down(mock, -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  gint64 t0 = g_get_monotonic_time();
  call_arg_t arg = {s, (ixia_sink_batch_t *)(void *)w->batches->data, w->batches->len, TRUE};
  GThread *call = g_thread_new("call", call_thread, &arg);
  /* The outage shows in stats within a second, long before the call fails:
   * deliveries pending, and how long the oldest call has waited. */
  while (stat_of(s, "oldest_pending_ms") < 1000 && g_get_monotonic_time() - t0 < 1900 * 1000) g_usleep(20000);
  CU_ASSERT_TRUE(stat_of(s, "oldest_pending_ms") >= 1000);
  CU_ASSERT_TRUE(stat_of(s, "pending_deliveries") >= 50);
  CU_ASSERT_EQUAL(stat_of(s, "waiting_calls"), 1);
  g_thread_join(call);
  gint64 took_ms = (g_get_monotonic_time() - t0) / 1000;
  CU_ASSERT_FALSE(arg.ok);
  fprintf(stderr, "brokers down: failed in %" G_GINT64_FORMAT " ms\n", took_ms);
  CU_ASSERT_TRUE(took_ms <= 2000 + 1000); /* the deadline, plus slack for a loaded machine */
  CU_ASSERT_EQUAL(stat_of(s, "waiting_calls"), 0);

  CU_ASSERT_EQUAL(rd_kafka_mock_broker_set_up(mock, -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  /* Like the source: re-send until it goes through (reconnect back-off). */
  gboolean ok = FALSE;
  gint64 until = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  while (!ok && g_get_monotonic_time() < until) {
    ok = replicate(s, w, &last, &e);
    ixia_error_destroy(e), e = NULL;
  }
  CU_ASSERT_TRUE(ok);
  CU_ASSERT_EQUAL(last, g_array_index(w->batches, ixia_sink_batch_t, w->batches->len - 1).sequence);
  GPtrArray *got = consume_all("t-down");
  check_topic(w, got, FALSE, TRUE);
  g_ptr_array_unref(got);
  wal_free(w);
  ixia_sink_destroy(s);
  ixia_config_destroy(cfg);
}

/* The Thrift glue, through the real server and a generated client. */
static void test_thrift_service(void) {
  create_topic("t-thrift");
  ixia_config_t *cfg = sink_cfg("t-thrift", "10000", "8000");
  ixia_sink_t *s = new_sink(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  ThriftProcessor *proc = ixia_sink_processor_new(s);
  ixia_error_t *e = NULL;
  ixia_server_t *srv = ixia_server_new(cfg, "127.0.0.1", 0, proc, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
  CU_ASSERT_TRUE_FATAL(ixia_server_start(srv, &e));
  ixia_sink_set_server(s, srv);

  ThriftTransport *sock = g_object_new(THRIFT_TYPE_SOCKET, "hostname", "127.0.0.1", "port",
                                       (guint)ixia_server_port(srv), NULL);
  ThriftTransport *framed = g_object_new(THRIFT_TYPE_FRAMED_TRANSPORT, "transport", sock, NULL);
  ThriftProtocol *proto = g_object_new(THRIFT_TYPE_BINARY_PROTOCOL, "transport", framed, NULL);
  IxiaReplicationSinkIf *client = g_object_new(IXIA_TYPE_REPLICATION_SINK_CLIENT, "input_protocol", proto,
                                               "output_protocol", proto, NULL);
  CU_ASSERT_TRUE_FATAL(thrift_transport_open(framed, NULL));

  wal_t *w = write_docs("th", 20);
  GPtrArray *batches = g_ptr_array_new_with_free_func(g_object_unref);
  for (guint i = 0; i < w->batches->len; i++) {
    ixia_sink_batch_t *b = &g_array_index(w->batches, ixia_sink_batch_t, i);
    IxiaWalBatch *wb = g_object_new(IXIA_TYPE_WAL_BATCH, NULL);
    wb->sequence = b->sequence;
    wb->__isset_sequence = TRUE;
    wb->data = g_byte_array_new();
    g_byte_array_append(wb->data, b->data, (guint)b->len);
    wb->__isset_data = TRUE;
    g_ptr_array_add(batches, wb);
  }
  gint64 last = 0;
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  CU_ASSERT_TRUE(ixia_replication_sink_if_replicate(client, &last, batches, &xe, &gerr));
  CU_ASSERT_PTR_NULL(xe);
  CU_ASSERT_EQUAL(last, ixia_store_latest_version(store));

  /* A broken batch comes back as IxiaError, and the connection stays usable. */
  IxiaWalBatch *bad = g_ptr_array_index(batches, 0);
  g_byte_array_set_size(bad->data, 4);
  CU_ASSERT_FALSE(ixia_replication_sink_if_replicate(client, &last, batches, &xe, &gerr));
  CU_ASSERT_PTR_NOT_NULL_FATAL(xe);
  CU_ASSERT_EQUAL(xe->code, IXIA_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(xe->message, "too short"));
  g_object_unref(xe), xe = NULL;
  if (gerr) g_error_free(gerr), gerr = NULL;

  gchar *stats = NULL;
  CU_ASSERT_TRUE(ixia_replication_sink_if_stats(client, &stats, &xe, &gerr));
  CU_ASSERT_PTR_NOT_NULL(stats && strstr(stats, "\"events_published\":20"));
  CU_ASSERT_PTR_NOT_NULL(stats && strstr(stats, "\"connections_total\":1"));
  g_free(stats);

  g_ptr_array_unref(batches);
  thrift_transport_close(framed, NULL);
  g_object_unref(client);
  g_object_unref(proto);
  g_object_unref(framed);
  g_object_unref(sock);
  ixia_server_stop(srv);
  ixia_server_destroy(srv);
  g_object_unref(proc);
  GPtrArray *got = consume_all("t-thrift");
  check_topic(w, got, TRUE, TRUE);
  g_ptr_array_unref(got);
  wal_free(w);
  ixia_sink_destroy(s);
  ixia_config_destroy(cfg);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("sink", setup, teardown);
  IXT_ADD(s, test_decode_real_wal);
  IXT_ADD(s, test_decode_built_batches);
  IXT_ADD(s, test_decode_refuses_what_it_cannot_version);
  IXT_ADD(s, test_bad_config);
  IXT_ADD(s, test_publish_round_trip);
  IXT_ADD(s, test_concurrent_calls);
  IXT_ADD(s, test_retriable_produce_errors);
  IXT_ADD(s, test_permanent_produce_error_fails_call);
  IXT_ADD(s, test_fatal_producer_error_is_survived);
  IXT_ADD(s, test_brokers_down_fails_within_timeout);
  IXT_ADD(s, test_thrift_service);
  return ixt_run();
}
