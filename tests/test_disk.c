/* Disk-full integration tests: real ixia-query-api, ixia-replication-sink,
 * ixia-devkafka and ixia-indexer processes whose data directories sit on a
 * small tmpfs (64 MiB) that the test mounts, fills with a filler file until
 * the free space is under the daemon's reserve (store.disk_reserve_mb,
 * index.disk_reserve_mb, 16 MiB here), and frees again. They check that
 * writes are refused with RESOURCE_EXHAUSTED (nothing written), reads and
 * searches keep serving, an indexer pauses without moving its positions,
 * the replication checkpoint survives ENOSPC, and everything resumes by
 * itself, losing nothing acknowledged.
 *
 * Mounting needs root (CI runs as root). Without it, or when the kernel
 * refuses the mount (a container without CAP_SYS_ADMIN), every test is
 * skipped: the program says why on stderr and exits 77, which ctest reports
 * as "Skipped", not as passed. Mounts are lazily unmounted by an atexit
 * handler too, so a failing test leaves none behind. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "ixia_search.h"
#include "kafka_support.h"
#include "store.h"
#include "support.h"
#include "thrift_util.h"

#define SKIP_EXIT 77
#define TMPFS_OPTIONS "size=64m,mode=0755"
/* Few inodes: the checkpoint test runs out of them instead of bytes. */
#define TMPFS_FEW_INODES "size=64m,nr_inodes=512,mode=0755"
#define RESERVE_MB 16
#define MIB (1024 * 1024)
#define TOPIC "ixia.changes"
#define PARTITIONS 2
#define NS "disk"
#define TABLE "docs"

static const char *SCHEMA =
    "{\"namespace\":\"disk\",\"table\":\"docs\","
    "\"indexes\":[{\"field\":\"group\",\"type\":\"keyword\"},{\"field\":\"n\",\"type\":\"long\"}]}";

/* ---------- the tmpfs ---------- */

static GPtrArray *mounts; /* mount points still mounted */

static void umount_all(void) {
  for (guint i = 0; mounts && i < mounts->len; i++)
    if (umount2(g_ptr_array_index(mounts, i), MNT_DETACH) != 0)
      fprintf(stderr, "test_disk: umount %s: %s\n", (char *)g_ptr_array_index(mounts, i),
              g_strerror(errno));
  if (mounts) g_ptr_array_set_size(mounts, 0);
}

/* Mounts a fresh tmpfs (options: TMPFS_*) at dir/mnt; NULL (with why) when
 * it cannot. The atexit handler is registered after support.c's (which
 * kills the daemons and removes the directories), so it runs before it. */
static char *mount_tmpfs(const char *dir, const char *options, char **why) {
  if (!mounts) {
    mounts = g_ptr_array_new_with_free_func(g_free);
    atexit(umount_all);
  }
  char *mnt = g_build_filename(dir, "mnt", NULL);
  g_mkdir_with_parents(mnt, 0755);
  if (mount("tmpfs", mnt, "tmpfs", 0, options) != 0) {
    *why = g_strdup_printf("mount -t tmpfs -o %s tmpfs %s: %s", options, mnt, g_strerror(errno));
    g_free(mnt);
    return NULL;
  }
  g_ptr_array_add(mounts, g_strdup(mnt));
  return mnt;
}

static gboolean umount_tmpfs(const char *mnt) {
  gboolean ok = umount2(mnt, MNT_DETACH) == 0;
  if (!ok) fprintf(stderr, "test_disk: umount %s: %s\n", mnt, g_strerror(errno));
  for (guint i = 0; i < mounts->len; i++)
    if (strcmp(g_ptr_array_index(mounts, i), mnt) == 0) g_ptr_array_remove_index(mounts, i--);
  return ok;
}

static gint64 free_bytes(const char *path) {
  struct statvfs st;
  if (statvfs(path, &st) != 0) return -1;
  return (gint64)st.f_bavail * (gint64)st.f_frsize;
}

/* Fills mnt with mnt/filler (preallocated, no data written) until about
 * leave bytes stay free. */
static gboolean fill(const char *mnt, gint64 leave) {
  char *path = g_build_filename(mnt, "filler", NULL);
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  g_free(path);
  if (fd < 0) return FALSE;
  struct stat st;
  gboolean ok = fstat(fd, &st) == 0;
  gint64 grow = free_bytes(mnt) - leave;
  if (ok && grow > 0) ok = posix_fallocate(fd, st.st_size, grow) == 0;
  close(fd);
  return ok && free_bytes(mnt) <= MAX(leave, 0) + 64 * 1024;
}

static void unfill(const char *mnt) {
  char *path = g_build_filename(mnt, "filler", NULL);
  CU_ASSERT_EQUAL(unlink(path), 0);
  g_free(path);
}

/* Creates empty files in mnt/inodes until the file system has no inode
 * left; returns how many, or -1 when it stopped for another reason. */
static int fill_inodes(const char *mnt) {
  char *dir = g_build_filename(mnt, "inodes", NULL);
  int n = 0, why = 0;
  if (g_mkdir_with_parents(dir, 0755) == 0) {
    for (;; n++) {
      char *path = g_strdup_printf("%s/%d", dir, n);
      int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      why = errno;
      g_free(path);
      if (fd < 0) break;
      close(fd);
    }
  }
  g_free(dir);
  return why == ENOSPC ? n : -1;
}

static void unfill_inodes(const char *mnt, int n) {
  for (int i = 0; i < n; i++) {
    char *path = g_strdup_printf("%s/inodes/%d", mnt, i);
    CU_ASSERT_EQUAL(unlink(path), 0);
    g_free(path);
  }
}

/* ---------- helpers ---------- */

static ixia_client_t *api_client(const ixt_api_t *api) {
  ixia_error_t *e = NULL;
  ixia_client_t *c = ixia_client_new(api->addr, &e);
  if (!c) fprintf(stderr, "\n  connect %s: %s\n", api->addr, e->message);
  ixia_error_destroy(e);
  return c;
}

static cJSON *stats(ixia_client_t *c) {
  char *json = NULL;
  ixia_error_t *e = NULL;
  if (!ixia_client_stats(c, &json, &e)) {
    fprintf(stderr, "\n  stats: %s\n", e->message);
    ixia_error_destroy(e);
    return NULL;
  }
  cJSON *o = cJSON_Parse(json);
  g_free(json);
  return o;
}

static double num(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static gboolean truth(const cJSON *o, const char *name) {
  return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, name));
}

static double stat_num(ixia_client_t *c, const char *name) {
  cJSON *o = stats(c);
  double v = num(o, name);
  cJSON_Delete(o);
  return v;
}

/* e is a RESOURCE_EXHAUSTED error naming path and option=RESERVE_MB; frees e. */
static void check_exhausted(ixia_error_t *e, const char *what, const char *path, const char *option) {
  char *opt = g_strdup_printf("%s=%d", option, RESERVE_MB);
  gboolean good = e && e->code == IXIA_EEXHAUSTED && strstr(e->message, path) &&
                  strstr(e->message, opt) && strstr(e->message, "MiB free");
  if (!good)
    fprintf(stderr, "\n  %s: want RESOURCE_EXHAUSTED naming %s and %s, got %s: %s\n", what, path, opt,
            e ? ixia_code_name(e->code) : "success", e ? e->message : "");
  CU_ASSERT_TRUE(good);
  g_free(opt);
  ixia_error_destroy(e);
}

static gboolean alive(GPid pid) { return pid > 0 && kill(pid, 0) == 0; }

/* Stops the daemon (SIGTERM) and checks that it shut down cleanly: no
 * sanitizer report and no RocksDB assertion (which aborts) in its log. */
static void stop_clean(ixt_daemon_t *d) {
  char *path = g_strdup_printf("%s/%s.log", d->dir, d->name);
  CU_ASSERT_TRUE(ixt_daemon_stop(d));
  char *text = NULL;
  CU_ASSERT_TRUE(g_file_get_contents(path, &text, NULL, NULL));
  gboolean aborted = text && (strstr(text, "Assertion") || strstr(text, "Aborted"));
  if (aborted) fprintf(stderr, "\n  %s:\n%s\n", path, text);
  CU_ASSERT_FALSE(aborted);
  g_free(text);
  g_free(path);
}

/* Times the daemon's log holds needle. */
static int log_count(const ixt_daemon_t *d, const char *needle) {
  char *path = g_strdup_printf("%s/%s.log", d->dir, d->name);
  char *text = NULL;
  int n = 0;
  if (g_file_get_contents(path, &text, NULL, NULL))
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
  g_free(text);
  g_free(path);
  return n;
}

/* ---------- the truth store ---------- */

typedef struct {
  gint64 version;
  char *json;
} acked_t;

static void acked_free(gpointer p) {
  acked_t *a = p;
  g_free(a->json);
  g_free(a);
}

/* Puts key; on success records the acknowledged version. */
static gboolean put(ixia_client_t *c, GHashTable *acked, const char *key, const char *json,
                    ixia_error_t **err) {
  gint64 v = 0;
  if (!ixia_client_put(c, NS, TABLE, key, json, -1, &v, err)) return FALSE;
  acked_t *a = g_new(acked_t, 1);
  a->version = v;
  a->json = g_strdup(json);
  g_hash_table_replace(acked, g_strdup(key), a);
  return TRUE;
}

static char *doc_json(int n, const char *group) {
  /* About 1 KiB, so the store holds something worth losing. */
  return g_strdup_printf("{\"group\":\"%s\",\"n\":%d,\"pad\":\"%01000d\"}", group, n, n);
}

/* Every acknowledged write reads back with its version and document. */
static void check_acked(ixia_client_t *c, GHashTable *acked) {
  GHashTableIter it;
  gpointer k, v;
  guint bad = 0;
  g_hash_table_iter_init(&it, acked);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    const acked_t *a = v;
    gboolean found = FALSE;
    gint64 version = 0;
    char *json = NULL;
    ixia_error_t *e = NULL;
    gboolean ok = ixia_client_get(c, NS, TABLE, k, NULL, &found, &version, &json, &e);
    if (!ok || !found || version != a->version || g_strcmp0(json, a->json) != 0) {
      if (bad++ < 5)
        fprintf(stderr, "\n  get %s: want version %" G_GINT64_FORMAT ", got %s%s version %" G_GINT64_FORMAT "\n",
                (char *)k, a->version, ok ? "" : e->message, found ? "" : " (not found)", version);
    }
    ixia_error_destroy(e);
    g_free(json);
  }
  CU_ASSERT_EQUAL(bad, 0);
}

/* The API refuses writes under store.disk_reserve_mb and keeps serving
 * reads; writes resume when space is freed, without a restart, and every
 * acknowledged write is there with its version. */
static void test_store_disk_full(void) {
  char *dir = ixt_tmpdir(), *why = NULL;
  char *mnt = mount_tmpfs(dir, TMPFS_OPTIONS, &why);
  if (!mnt) fprintf(stderr, "\n  %s\n", why);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mnt);
  char *store = g_build_filename(mnt, "store", NULL);
  char *store_set = g_strdup_printf("store.path=%s", store);
  const char *sets[] = {store_set, "store.write_buffer_mb=2", "store.disk_reserve_mb=16",
                        "log.level=info", NULL};
  ixt_api_t api = {0};
  CU_ASSERT_TRUE_FATAL(ixt_api_start(&api, dir, "", sets));
  ixia_client_t *c = api_client(&api);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_TRUE_FATAL(ixia_client_apply_schema(c, SCHEMA, NULL, NULL));
  GHashTable *acked = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, acked_free);
  for (int i = 0; i < 200; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "d%03d", i);
    char *json = doc_json(i, "before");
    CU_ASSERT_TRUE(put(c, acked, key, json, NULL));
    g_free(json);
  }
  gint64 latest = (gint64)stat_num(c, "store_latest_version");

  /* Under the reserve: every kind of write is refused, naming the path. */
  CU_ASSERT_TRUE_FATAL(fill(mnt, 8 * MIB));
  ixia_error_t *e = NULL;
  CU_ASSERT_FALSE(put(c, acked, "new", "{\"n\":1}", &e));
  check_exhausted(e, "put", store, "store.disk_reserve_mb"), e = NULL;
  CU_ASSERT_FALSE(put(c, acked, "d000", "{\"n\":2}", &e));
  check_exhausted(e, "update", store, "store.disk_reserve_mb"), e = NULL;
  CU_ASSERT_FALSE(ixia_client_delete(c, NS, TABLE, "d001", -1, NULL, &e));
  check_exhausted(e, "delete", store, "store.disk_reserve_mb"), e = NULL;
  GPtrArray *ops = g_ptr_array_new_with_free_func(g_object_unref);
  for (int i = 0; i < 3; i++)
    g_ptr_array_add(ops, g_object_new(IXIA_TYPE_WRITE_OP, "kind", IXIA_OP_KIND_PUT, "ns", NS, "table",
                                      TABLE, "key", i ? "b1" : "b0", "json", "{\"n\":3}",
                                      "expected_version", (gint64)-1, NULL));
  GArray *versions = g_array_new(FALSE, TRUE, sizeof(gint64));
  IxiaIxiaError *xe = NULL;
  GError *ge = NULL;
  gboolean ok = ixia_ixia_if_batch(ixia_client_iface(c), &versions, ops, &xe, &ge);
  CU_ASSERT_FALSE(ixia_client_check(c, ok, xe, ge, &e));
  check_exhausted(e, "batch", store, "store.disk_reserve_mb"), e = NULL;
  g_array_unref(versions);
  g_ptr_array_unref(ops);
  CU_ASSERT_FALSE(ixia_client_apply_schema(c, "{\"namespace\":\"disk\",\"table\":\"more\"}", NULL, &e));
  check_exhausted(e, "schema apply", store, "store.disk_reserve_mb"), e = NULL;
  char *snap = g_build_filename(dir, "snap", NULL);
  CU_ASSERT_FALSE(ixia_client_snapshot(c, snap, NULL, &e));
  check_exhausted(e, "snapshot", store, "store.disk_reserve_mb"), e = NULL;
  CU_ASSERT_FALSE(g_file_test(snap, G_FILE_TEST_EXISTS));
  g_free(snap);
  /* The CLI: exit 5, the code's name and the message on stderr. */
  char *cli_argv[] = {IXIA_BIN_DIR "/ixia", "--api", api.addr, "put", NS, TABLE, "cli", "{\"n\":4}", NULL};
  char *cli_err = NULL;
  gint status = -1;
  CU_ASSERT_TRUE(g_spawn_sync(NULL, cli_argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                              &cli_err, &status, NULL));
  CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 5);
  CU_ASSERT_PTR_NOT_NULL(cli_err && strstr(cli_err, "RESOURCE_EXHAUSTED: disk full"));
  g_free(cli_err);

  /* Nothing reached RocksDB; reads, scans and stats go on. */
  cJSON *st = stats(c);
  CU_ASSERT_EQUAL((gint64)num(st, "store_latest_version"), latest);
  CU_ASSERT_TRUE(truth(st, "store_disk_full"));
  CU_ASSERT_TRUE(num(st, "store_disk_free_bytes") >= 0 && num(st, "store_disk_free_bytes") < RESERVE_MB * MIB);
  CU_ASSERT_EQUAL(num(st, "store_disk_reserve_bytes"), RESERVE_MB * MIB);
  /* put, update, delete, batch, schema, CLI put */
  CU_ASSERT_EQUAL(num(st, "store_writes_refused_disk_full"), 6);
  cJSON_Delete(st);
  check_acked(c, acked);
  gboolean found = TRUE;
  CU_ASSERT_TRUE(ixia_client_get(c, NS, TABLE, "new", NULL, &found, NULL, NULL, NULL));
  CU_ASSERT_FALSE(found);
  GPtrArray *docs = NULL;
  CU_ASSERT_TRUE(ixia_client_scan(c, NS, TABLE, NULL, 50, &docs, NULL));
  CU_ASSERT_EQUAL(docs ? docs->len : 0, 50);
  if (docs) g_ptr_array_unref(docs);
  CU_ASSERT_EQUAL(log_count(&api, "under store.disk_reserve_mb=16"), 1);

  /* Space back: writes resume without a restart (bounded wait). */
  unfill(mnt);
  gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  gboolean resumed = FALSE;
  while (!resumed && g_get_monotonic_time() < deadline) {
    e = NULL;
    resumed = put(c, acked, "new", "{\"n\":1}", &e);
    ixia_error_destroy(e);
    if (!resumed) g_usleep(20000);
  }
  CU_ASSERT_TRUE(resumed);
  for (int i = 0; i < 50; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "d%03d", i * 3);
    char *json = doc_json(i, "after");
    CU_ASSERT_TRUE(put(c, acked, key, json, NULL));
    g_free(json);
  }
  CU_ASSERT_TRUE(ixia_client_apply_schema(c, "{\"namespace\":\"disk\",\"table\":\"more\"}", NULL, NULL));
  st = stats(c);
  CU_ASSERT_FALSE(truth(st, "store_disk_full"));
  CU_ASSERT_TRUE(num(st, "store_disk_free_bytes") > RESERVE_MB * MIB);
  cJSON_Delete(st);
  check_acked(c, acked);
  CU_ASSERT_EQUAL(log_count(&api, "over store.disk_reserve_mb=16 again"), 1);
  CU_ASSERT_TRUE(alive(api.pid));

  ixia_client_destroy(c);
  g_hash_table_destroy(acked);
  stop_clean(&api);
  CU_ASSERT_TRUE(umount_tmpfs(mnt));
  g_free(store_set);
  g_free(store);
  g_free(mnt);
  g_free(dir);
}

/* The replication checkpoint (store.path/REPLICATION_CHECKPOINT) cannot be
 * saved (ENOSPC): the source keeps shipping, retries the save, and persists
 * it once space is freed; nothing acknowledged misses Kafka. The file
 * system runs out of inodes rather than bytes: the checkpoint's temporary
 * file then fails with ENOSPC, while RocksDB, which creates no file in the
 * meantime, is left alone. (Zero free bytes would also fail RocksDB's own
 * info LOG, and Debian's RocksDB aborts at the LOG line after such a
 * failure: the reason for the reserve, see docs/OPERATIONS.md.) */
static void test_checkpoint_enospc(void) {
  char *dir = ixt_tmpdir(), *why = NULL;
  char *mnt = mount_tmpfs(dir, TMPFS_FEW_INODES, &why);
  if (!mnt) fprintf(stderr, "\n  %s\n", why);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mnt);
  ixt_devkafka_t kafka = {0};
  CU_ASSERT_TRUE_FATAL(ixt_devkafka_start(&kafka, dir, 1, PARTITIONS));
  char *brokers = g_strdup_printf("kafka.brokers=%s", kafka.bootstrap);
  const char *sink_sets[] = {brokers, NULL};
  ixt_daemon_t sink = {0};
  CU_ASSERT_TRUE_FATAL(ixt_daemon_start(&sink, "ixia-replication-sink", "sink", dir, sink_sets));
  char *store = g_build_filename(mnt, "store", NULL);
  char *store_set = g_strdup_printf("store.path=%s", store);
  char *sinks_set = g_strdup_printf("replication.sinks=%s", sink.addr);
  const char *sets[] = {store_set, sinks_set, "store.write_buffer_mb=2", "store.disk_reserve_mb=16",
                        "replication.retry_max_ms=200", "log.level=info", NULL};
  ixt_api_t api = {0};
  CU_ASSERT_TRUE_FATAL(ixt_api_start(&api, dir, "", sets));
  ixia_client_t *c = api_client(&api);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_TRUE_FATAL(ixia_client_apply_schema(c, SCHEMA, NULL, NULL));
  GHashTable *acked = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, acked_free);
  for (int i = 0; i < 20; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "r%02d", i);
    CU_ASSERT_TRUE(put(c, acked, key, "{\"n\":1}", NULL));
  }
  /* Shipped and persisted. */
  gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  gboolean persisted = FALSE;
  while (!persisted && g_get_monotonic_time() < deadline) {
    cJSON *st = stats(c);
    persisted = num(st, "replication_checkpoint_persisted") == num(st, "store_latest_version");
    cJSON_Delete(st);
    if (!persisted) g_usleep(20000);
  }
  CU_ASSERT_TRUE_FATAL(persisted);

  /* Edits the sink has not taken yet, then no inode left. */
  ixt_daemon_kill(&sink);
  for (int i = 20; i < 40; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "r%02d", i);
    CU_ASSERT_TRUE(put(c, acked, key, "{\"n\":2}", NULL));
  }
  gint64 latest = (gint64)stat_num(c, "store_latest_version");
  int inodes = fill_inodes(mnt);
  CU_ASSERT_TRUE_FATAL(inodes > 0);
  CU_ASSERT_TRUE_FATAL(ixt_daemon_restart(&sink));
  /* Shipping goes on (from memory); saving the checkpoint fails, retried. */
  deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  gboolean shipped = FALSE;
  cJSON *st = NULL;
  while (!shipped && g_get_monotonic_time() < deadline) {
    cJSON_Delete(st);
    st = stats(c);
    shipped = (gint64)num(st, "replication_checkpoint") == latest &&
              num(st, "replication_checkpoint_failures") >= 2;
    if (!shipped) g_usleep(20000);
  }
  CU_ASSERT_TRUE(shipped);
  CU_ASSERT_TRUE((gint64)num(st, "replication_checkpoint_persisted") < latest);
  const char *cerr = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "replication_checkpoint_error"));
  if (!cerr || !strstr(cerr, "No space left"))
    fprintf(stderr, "\n  replication_checkpoint_error: %s\n", cerr ? cerr : "(none)");
  CU_ASSERT_PTR_NOT_NULL(cerr && strstr(cerr, "No space left"));
  cJSON_Delete(st);
  CU_ASSERT_TRUE(alive(api.pid));
  CU_ASSERT_EQUAL(log_count(&api, "save replication checkpoint"), 1); /* logged once */

  /* Inodes back: the checkpoint is persisted by itself. */
  unfill_inodes(mnt, inodes);
  deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  persisted = FALSE;
  while (!persisted && g_get_monotonic_time() < deadline) {
    persisted = (gint64)stat_num(c, "replication_checkpoint_persisted") == latest;
    if (!persisted) g_usleep(20000);
  }
  CU_ASSERT_TRUE(persisted);
  char *path = g_build_filename(store, "REPLICATION_CHECKPOINT", NULL);
  char *text = NULL;
  CU_ASSERT_TRUE(g_file_get_contents(path, &text, NULL, NULL));
  CU_ASSERT_EQUAL(text ? g_ascii_strtoll(text, NULL, 10) : -1, latest);
  g_free(text);
  g_free(path);
  CU_ASSERT_EQUAL(log_count(&api, "checkpoint saved again"), 1);

  /* Every acknowledged version reached Kafka. */
  GPtrArray *events = ixt_kafka_consume_all(kafka.bootstrap, TOPIC, 500, 20000);
  CU_ASSERT_PTR_NOT_NULL_FATAL(events);
  GHashTable *seen = g_hash_table_new(g_int64_hash, g_int64_equal);
  for (guint i = 0; i < events->len; i++) {
    IxiaChangeEvent *ev = g_ptr_array_index(events, i);
    g_hash_table_add(seen, &ev->version);
  }
  GHashTableIter it;
  gpointer k, v;
  guint missing = 0;
  g_hash_table_iter_init(&it, acked);
  while (g_hash_table_iter_next(&it, &k, &v))
    if (!g_hash_table_contains(seen, &((acked_t *)v)->version)) missing++;
  CU_ASSERT_EQUAL(missing, 0);
  g_hash_table_destroy(seen);
  g_ptr_array_unref(events);

  ixia_client_destroy(c);
  g_hash_table_destroy(acked);
  stop_clean(&api);
  stop_clean(&sink);
  CU_ASSERT_TRUE(ixt_devkafka_stop(&kafka));
  CU_ASSERT_TRUE(umount_tmpfs(mnt));
  g_free(sinks_set);
  g_free(store_set);
  g_free(brokers);
  g_free(store);
  g_free(mnt);
  g_free(dir);
}

/* ---------- the indexer ---------- */

typedef struct {
  ixt_devkafka_t kafka;
  ixt_producer_t *prod;
  rd_kafka_t *raw;       /* schema events go to every partition */
  gint64 version;
  guint sent;            /* messages produced */
  GHashTable *expect;    /* key -> version (deleted keys: negative) */
} feed_t;

static gboolean feed_start(feed_t *f, const char *dir) {
  memset(f, 0, sizeof *f);
  if (!ixt_devkafka_start(&f->kafka, dir, 1, PARTITIONS)) return FALSE;
  f->prod = ixt_producer_new(f->kafka.bootstrap, NULL);
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  char errstr[256];
  rd_kafka_conf_set(conf, "bootstrap.servers", f->kafka.bootstrap, errstr, sizeof errstr);
  f->raw = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!f->raw) rd_kafka_conf_destroy(conf);
  f->expect = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  return f->prod && f->raw;
}

static void feed_stop(feed_t *f) {
  ixt_producer_destroy(f->prod);
  if (f->raw) rd_kafka_destroy(f->raw);
  g_hash_table_destroy(f->expect);
  CU_ASSERT_TRUE(ixt_devkafka_stop(&f->kafka));
}

static IxiaChangeEvent *mk_event(IxiaChangeOp op, const char *key, gint64 version, const char *doc) {
  return ixia_change_event_new(op, NS, strlen(NS), TABLE, strlen(TABLE), key, strlen(key), version,
                               doc, doc ? strlen(doc) : 0, 0, g_get_real_time() / 1000);
}

/* A PUT (doc) or DELETE (NULL) of key with the next version, keyed by the
 * truth-store key as the sink produces it. */
static void send_doc(feed_t *f, const char *key, const char *doc) {
  gint64 v = ++f->version;
  IxiaChangeEvent *e = mk_event(doc ? IXIA_CHANGE_OP_PUT : IXIA_CHANGE_OP_DELETE, key, v, doc);
  GBytes *k = ixia_record_doc_key(NS, TABLE, key, strlen(key));
  size_t len;
  const void *d = g_bytes_get_data(k, &len);
  CU_ASSERT_TRUE(ixt_producer_send_event(f->prod, TOPIC, e, d, len));
  g_bytes_unref(k);
  g_object_unref(e);
  g_hash_table_replace(f->expect, g_strdup(key), GINT_TO_POINTER((gint)(doc ? v : -v)));
  f->sent++;
}

static void feed_flush(feed_t *f) { CU_ASSERT_EQUAL(ixt_producer_wait(f->prod, 20000), 0); }

static void send_schema(feed_t *f) {
  feed_flush(f);
  IxiaChangeEvent *e = mk_event(IXIA_CHANGE_OP_SCHEMA, "", ++f->version, SCHEMA);
  GByteArray *value = ixia_thrift_serialize(THRIFT_STRUCT(e), TRUE, NULL);
  GBytes *k = ixia_record_schema_key(NS, TABLE);
  size_t len;
  const void *d = g_bytes_get_data(k, &len);
  for (gint32 p = 0; p < PARTITIONS; p++) {
    CU_ASSERT_EQUAL(rd_kafka_producev(f->raw, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_PARTITION(p),
                                      RD_KAFKA_V_KEY(d, len), RD_KAFKA_V_VALUE(value->data, value->len),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                    RD_KAFKA_RESP_ERR_NO_ERROR);
    f->sent++;
  }
  CU_ASSERT_EQUAL(rd_kafka_flush(f->raw, 20000), RD_KAFKA_RESP_ERR_NO_ERROR);
  g_bytes_unref(k);
  g_byte_array_unref(value);
  g_object_unref(e);
}

static cJSON *shard_status(ixia_shard_client_t *s) {
  char *json = NULL;
  ixia_error_t *e = NULL;
  if (!ixia_shard_client_status(s, &json, &e)) {
    fprintf(stderr, "\n  status: %s\n", e->message);
    ixia_error_destroy(e);
    return NULL;
  }
  cJSON *o = cJSON_Parse(json);
  g_free(json);
  return o;
}

/* Sum of the partitions' next offsets, and their largest lag (-1 unknown). */
static double positions(const cJSON *st, double *max_lag) {
  double sum = 0;
  *max_lag = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(st, "partitions")) {
    sum += MAX(num(p, "next_offset"), 0);
    *max_lag = num(p, "lag") < 0 ? -1 : MAX(*max_lag, num(p, "lag"));
  }
  return sum;
}

/* search over every document: the total, or -1 with *err. */
static double search_total(ixia_shard_client_t *s, gboolean sync, int deadline_ms, ixia_error_t **err) {
  char *req = g_strdup_printf("{\"query\":{\"namespace\":\"disk\",\"table\":\"docs\"},\"limit\":0,"
                              "\"sync\":%s,\"deadline_ms\":%d}",
                              sync ? "true" : "false", deadline_ms);
  char *json = NULL;
  double total = -1;
  if (ixia_shard_client_search(s, req, &json, err)) {
    cJSON *o = cJSON_Parse(json);
    total = num(o, "total");
    cJSON_Delete(o);
  }
  g_free(json);
  g_free(req);
  return total;
}

/* The shard's docs() equal what was sent: every key at its last version,
 * deletes as tombstones. */
static void check_docs(ixia_shard_client_t *s, feed_t *f) {
  GHashTable *got = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GByteArray *after = g_byte_array_new();
  for (;;) {
    GPtrArray *out = g_ptr_array_new_with_free_func(g_object_unref);
    IxiaIxiaError *xe = NULL;
    GError *ge = NULL;
    ixia_error_t *e = NULL;
    gboolean ok = ixia_search_if_docs(ixia_shard_client_iface(s), &out, NS, TABLE, after, 100, &xe, &ge);
    ok = ixia_shard_client_check(s, ok, xe, ge, &e);
    if (!ok) fprintf(stderr, "\n  docs: %s\n", e->message);
    ixia_error_destroy(e);
    CU_ASSERT_TRUE(ok);
    guint n = ok ? out->len : 0;
    for (guint i = 0; i < n; i++) {
      IxiaIndexedDoc *d = g_ptr_array_index(out, i);
      g_hash_table_replace(got, g_strndup((const char *)d->key->data, d->key->len),
                           GINT_TO_POINTER((gint)(d->deleted ? -d->version : d->version)));
      g_byte_array_set_size(after, 0);
      g_byte_array_append(after, d->key->data, d->key->len);
    }
    g_ptr_array_unref(out);
    if (n < 100) break;
  }
  g_byte_array_unref(after);
  guint bad = 0;
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, f->expect);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    gpointer gv = NULL;
    if (!g_hash_table_lookup_extended(got, k, NULL, &gv) || gv != v) {
      if (bad++ < 5)
        fprintf(stderr, "\n  docs: %s: want %d, got %d\n", (char *)k, GPOINTER_TO_INT(v), GPOINTER_TO_INT(gv));
    }
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(g_hash_table_size(got), g_hash_table_size(f->expect));
  g_hash_table_destroy(got);
}

static guint live_docs(feed_t *f) {
  guint n = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init(&it, f->expect);
  while (g_hash_table_iter_next(&it, NULL, &v)) n += GPOINTER_TO_INT(v) > 0;
  return n;
}

/* Under index.disk_reserve_mb the indexer pauses: nothing applied, no
 * position moved, searches answer, reindex is refused; once space is freed
 * it catches up by itself and every event is applied. */
static void test_indexer_disk_full(void) {
  char *dir = ixt_tmpdir(), *why = NULL;
  char *mnt = mount_tmpfs(dir, TMPFS_OPTIONS, &why);
  if (!mnt) fprintf(stderr, "\n  %s\n", why);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mnt);
  feed_t f;
  CU_ASSERT_TRUE_FATAL(feed_start(&f, dir));
  char *index = g_build_filename(mnt, "index", NULL);
  char *sets[] = {g_strdup_printf("kafka.brokers=%s", f.kafka.bootstrap),
                  g_strdup_printf("index.path=%s", index),
                  g_strdup("index.write_buffer_mb=2"),
                  g_strdup("index.disk_reserve_mb=16"),
                  g_strdup("indexer.batch_max_events=100"),
                  g_strdup("indexer.batch_wait_ms=2"),
                  g_strdup("cache.servers="),
                  g_strdup("log.level=info"),
                  NULL};
  ixt_daemon_t d = {0};
  CU_ASSERT_TRUE_FATAL(ixt_daemon_start(&d, "ixia-indexer", "indexer", dir, (const char *const *)sets));
  for (char **p = sets; *p; p++) g_free(*p);
  ixia_error_t *e = NULL;
  ixia_shard_client_t *s = ixia_shard_client_new(d.addr, 30000, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);

  send_schema(&f);
  for (int i = 0; i < 100; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "k%03d", i);
    char *json = doc_json(i, "before");
    send_doc(&f, key, json);
    g_free(json);
  }
  feed_flush(&f);
  CU_ASSERT_EQUAL(search_total(s, TRUE, 20000, NULL), 100);
  cJSON *st = shard_status(s);
  double lag;
  double before = positions(st, &lag);
  CU_ASSERT_EQUAL(before, f.sent);
  CU_ASSERT_FALSE(truth(st, "disk_paused"));
  cJSON_Delete(st);
  guint live_before = live_docs(&f);

  /* Under the reserve, then more events: updates, new keys, deletes. */
  CU_ASSERT_TRUE_FATAL(fill(mnt, 8 * MIB));
  for (int i = 0; i < 300; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "k%03d", i % 150);
    if (i % 10 == 9) {
      send_doc(&f, key, NULL);
    } else {
      char *json = doc_json(i, "during");
      send_doc(&f, key, json);
      g_free(json);
    }
  }
  feed_flush(&f);
  gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  gboolean paused = FALSE;
  st = NULL;
  while (!paused && g_get_monotonic_time() < deadline) {
    cJSON_Delete(st);
    st = shard_status(s);
    paused = truth(st, "disk_paused");
    if (!paused) g_usleep(20000);
  }
  CU_ASSERT_TRUE_FATAL(paused);
  CU_ASSERT_TRUE(num(st, "disk_free_bytes") >= 0 && num(st, "disk_free_bytes") < RESERVE_MB * MIB);
  CU_ASSERT_EQUAL(num(st, "disk_reserve_bytes"), RESERVE_MB * MIB);
  CU_ASSERT_TRUE(num(st, "disk_pauses") >= 1);
  cJSON_Delete(st);
  /* More events while paused: the lag shows them all (the indexer asks
   * Kafka for the partitions' ends every second), nothing is applied and
   * no position moves. */
  for (int i = 0; i < 20; i++) {
    char key[16];
    g_snprintf(key, sizeof key, "p%02d", i);
    char *json = doc_json(i, "paused");
    send_doc(&f, key, json);
    g_free(json);
  }
  feed_flush(&f);
  deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  double lag_sum = 0;
  st = NULL;
  while (lag_sum != f.sent - before && g_get_monotonic_time() < deadline) {
    cJSON_Delete(st);
    st = shard_status(s);
    lag_sum = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(st, "partitions")) lag_sum += num(p, "lag");
    if (lag_sum != f.sent - before) g_usleep(20000);
  }
  CU_ASSERT_EQUAL(lag_sum, f.sent - before);
  CU_ASSERT_TRUE(truth(st, "disk_paused"));
  CU_ASSERT_EQUAL(positions(st, &lag), before);
  CU_ASSERT_EQUAL(num(st, "documents"), live_before);
  cJSON_Delete(st);
  /* Searches answer at once from what is indexed. */
  gint64 t0 = g_get_monotonic_time();
  CU_ASSERT_EQUAL(search_total(s, FALSE, 5000, NULL), live_before);
  CU_ASSERT_TRUE(g_get_monotonic_time() - t0 < G_USEC_PER_SEC);
  /* A sync search cannot catch up: its normal error, naming the pause. */
  e = NULL;
  CU_ASSERT_EQUAL(search_total(s, TRUE, 300, &e), -1);
  CU_ASSERT_EQUAL(e ? e->code : 0, IXIA_ENOTCAUGHTUP);
  CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "not caught up") && strstr(e->message, "paused"));
  ixia_error_destroy(e);
  /* Reindex would write: refused. */
  GPtrArray *evs = g_ptr_array_new_with_free_func(g_object_unref);
  g_ptr_array_add(evs, mk_event(IXIA_CHANGE_OP_PUT, "k000", 1, "{\"group\":\"x\",\"n\":1}"));
  gint32 applied = -1;
  IxiaIxiaError *xe = NULL;
  GError *ge = NULL;
  e = NULL;
  gboolean ok = ixia_search_if_reindex(ixia_shard_client_iface(s), &applied, evs, &xe, &ge);
  CU_ASSERT_FALSE(ixia_shard_client_check(s, ok, xe, ge, &e));
  check_exhausted(e, "reindex", index, "index.disk_reserve_mb");
  g_ptr_array_unref(evs);
  CU_ASSERT_EQUAL(log_count(&d, "under index.disk_reserve_mb=16"), 1);

  /* Space back: catches up by itself. */
  unfill(mnt);
  deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  gboolean caught_up = FALSE;
  st = NULL;
  while (!caught_up && g_get_monotonic_time() < deadline) {
    cJSON_Delete(st);
    st = shard_status(s);
    caught_up = !truth(st, "disk_paused") && positions(st, &lag) == f.sent && lag == 0;
    if (!caught_up) g_usleep(20000);
  }
  CU_ASSERT_TRUE(caught_up);
  CU_ASSERT_EQUAL(num(st, "documents"), live_docs(&f));
  CU_ASSERT_EQUAL(num(st, "events_failed"), 0);
  /* Each event applied exactly once: none lost, the dropped batch not
   * applied twice (every event here is newer than the last). */
  CU_ASSERT_EQUAL(num(st, "events_applied"), f.sent);
  CU_ASSERT_EQUAL(num(st, "messages"), f.sent);
  cJSON_Delete(st);
  CU_ASSERT_EQUAL(search_total(s, TRUE, 20000, NULL), live_docs(&f));
  check_docs(s, &f);
  CU_ASSERT_EQUAL(log_count(&d, "over index.disk_reserve_mb=16 again"), 1);
  CU_ASSERT_TRUE(alive(d.pid));

  ixia_shard_client_destroy(s);
  stop_clean(&d);
  feed_stop(&f);
  CU_ASSERT_TRUE(umount_tmpfs(mnt));
  g_free(index);
  g_free(mnt);
  g_free(dir);
}

/* Why these tests cannot run here (g_malloc'd), or NULL. */
static char *cannot_run(void) {
  if (geteuid() != 0)
    return g_strdup_printf("not running as root (euid %d): mounting a tmpfs needs root",
                           (int)geteuid());
  char *dir = ixt_tmpdir(), *why = NULL;
  char *mnt = mount_tmpfs(dir, TMPFS_FEW_INODES, &why);
  if (mnt) umount_tmpfs(mnt);
  g_free(mnt);
  g_free(dir);
  return why;
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    CU_TestFunc fn;
  } tests[] = {
      {"test_store_disk_full", test_store_disk_full},
      {"test_checkpoint_enospc", test_checkpoint_enospc},
      {"test_indexer_disk_full", test_indexer_disk_full},
  };
  CU_initialize_registry();
  char *why = cannot_run();
  if (why) {
    fprintf(stderr, "test_disk: SKIPPED, all %u tests: %s\n", (guint)G_N_ELEMENTS(tests), why);
    g_free(why);
    CU_cleanup_registry();
    return SKIP_EXIT;
  }
  CU_pSuite suite = CU_add_suite("disk", NULL, NULL);
  /* Arguments name the tests to run (all by default). */
  for (guint i = 0; i < G_N_ELEMENTS(tests); i++) {
    gboolean chosen = argc < 2;
    for (int a = 1; a < argc; a++) chosen = chosen || strcmp(argv[a], tests[i].name) == 0;
    if (chosen) CU_add_test(suite, tests[i].name, tests[i].fn);
  }
  return ixt_run();
}
