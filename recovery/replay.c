/* ixia-recovery replay-failed: the failed-updates log re-applied from the
 * truth store's current documents (contract in recovery.h).
 *
 * Locking: the indexer opens the log per append and takes an exclusive
 * flock. The log is moved aside under that lock, so new failures start a new
 * file; an append that opened the old file just before the move lands in
 * the moved file after we release the lock, which is why the moved file is
 * read again (under the lock) before it is removed and any new lines are
 * put back. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failed_log.h"
#include "internal.h"
#include "json.h"
#include "recovery.h"
#include "thrift_util.h"

typedef struct {
  char *ns, *table, *key;
  gint64 version;    /* highest failed version seen for the key */
  GPtrArray *lines;  /* raw lines (with newline), borrowed from the file text */
  gboolean attempted;
} item_t;

static void item_free(gpointer p) {
  item_t *it = p;
  g_free(it->ns);
  g_free(it->table);
  g_free(it->key);
  g_ptr_array_unref(it->lines);
  g_free(it);
}

static int lock_fd(int fd) {
  int rc;
  while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
  }
  return rc;
}

static gboolean read_fd(int fd, off_t from, GString *out, ixia_error_t **err) {
  char buf[65536];
  if (lseek(fd, from, SEEK_SET) < 0) return ixia_error_set(err, IXIA_EUNAVAILABLE, "seek: %s", g_strerror(errno));
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ixia_error_set(err, IXIA_EUNAVAILABLE, "read: %s", g_strerror(errno));
    if (n == 0) return TRUE;
    g_string_append_len(out, buf, n);
  }
}

/* Moves log to aside under the log's lock (appending to a left-over aside
 * file of an interrupted run). FALSE only on I/O errors. */
static gboolean take_log(const char *log, const char *aside, ixia_error_t **err) {
  int fd = open(log, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return TRUE;
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: %s", log, g_strerror(errno));
  }
  gboolean ok = lock_fd(fd) == 0;
  if (!ok) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: flock: %s", log, g_strerror(errno));
  } else if (g_file_test(aside, G_FILE_TEST_EXISTS)) {
    GString *text = g_string_new(NULL);
    ok = read_fd(fd, 0, text, err) && ixia_failed_log_append(aside, text->str, text->len, NULL, err);
    if (ok && unlink(log) != 0) ok = ixia_error_set(err, IXIA_EUNAVAILABLE, "unlink %s: %s", log, g_strerror(errno));
    g_string_free(text, TRUE);
  } else if (rename(log, aside) != 0) {
    ok = ixia_error_set(err, IXIA_EUNAVAILABLE, "rename %s: %s", log, g_strerror(errno));
  }
  close(fd);
  return ok;
}

/* Splits text into entries: replayable ones grouped by key into items (in
 * first-seen order), the rest into `keep` (lines to write back). */
static void parse_entries(const char *text, GPtrArray *items, GString *keep, guint64 *entries,
                          guint64 *not_replayable) {
  GHashTable *by_key = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  const char *p = text;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
    char *line = ixia_memdup0(p, len);
    p += len;
    gboolean blank = TRUE;
    for (size_t i = 0; blank && i < len; i++) blank = g_ascii_isspace(line[i]);
    if (blank) {
      g_free(line);
      continue;
    }
    (*entries)++;
    cJSON *o = cJSON_Parse(line);
    const char *ns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "ns"));
    const char *table = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "table"));
    const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "key"));
    const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "op"));
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "version");
    /* Only document entries with a UTF-8 key can be re-read through the API;
     * the rest (undecodable messages, schemas) need an operator. */
    if (!ns || !table || !key || !*ns || !*table || !*key || (op && !strcmp(op, "SCHEMA"))) {
      g_string_append(keep, line);
      if (!nl) g_string_append_c(keep, '\n');
      (*not_replayable)++;
      g_free(line);
    } else {
      char *id = g_strdup_printf("%s\n%s\n%s", ns, table, key);
      item_t *it = g_hash_table_lookup(by_key, id);
      if (!it) {
        it = g_new0(item_t, 1);
        it->ns = g_strdup(ns);
        it->table = g_strdup(table);
        it->key = g_strdup(key);
        it->lines = g_ptr_array_new_with_free_func(g_free);
        g_hash_table_insert(by_key, id, it);
        g_ptr_array_add(items, it);
      } else {
        g_free(id);
      }
      gint64 ver = cJSON_IsNumber(v) ? (gint64)v->valuedouble : 0;
      if (ver > it->version) it->version = ver;
      if (!nl) {
        char *with_nl = g_strconcat(line, "\n", NULL);
        g_free(line);
        line = with_nl;
      }
      g_ptr_array_add(it->lines, line);
    }
    cJSON_Delete(o);
  }
  g_hash_table_destroy(by_key);
}

/* Builds the event for an item from the store's current document (with
 * its TTL, so that the shard drops it from the index when it expires);
 * NULL when the API could not answer. */
static IxiaChangeEvent *current_event(ixia_client_t *api, const item_t *it, ixia_error_t **err) {
  GPtrArray *events = NULL;
  const char *keys[1] = {it->key};
  if (!ixia_client_current_events(api, it->ns, it->table, keys, 1, &events, err)) return NULL;
  IxiaChangeEvent *ev = NULL;
  if (events->len == 1 && ((IxiaChangeEvent *)g_ptr_array_index(events, 0))->op == IXIA_CHANGE_OP_PUT)
    ev = g_object_ref(g_ptr_array_index(events, 0));
  else
    /* The delete's own version is unknown; the failed one is enough to
     * remove what the index holds and can never outrank a re-creation. */
    ev = ixia_change_event_new(IXIA_CHANGE_OP_DELETE, it->ns, strlen(it->ns), it->table,
                               strlen(it->table), it->key, strlen(it->key), it->version, NULL, 0, 0,
                               g_get_real_time() / 1000);
  g_ptr_array_unref(events);
  return ev;
}

/* Keys (ns\ntable\nkey\nversion) of the entries now in the log. */
static GHashTable *logged_now(const char *log) {
  GHashTable *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  char *text = NULL;
  if (!g_file_get_contents(log, &text, NULL, NULL)) return set;
  char **lines = g_strsplit(text, "\n", -1);
  for (char **l = lines; *l; l++) {
    cJSON *o = cJSON_Parse(*l);
    const char *ns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "ns"));
    const char *table = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "table"));
    const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "key"));
    if (ns && table && key)
      g_hash_table_add(set, g_strdup_printf("%s\n%s\n%s", ns, table, key));
    cJSON_Delete(o);
  }
  g_strfreev(lines);
  g_free(text);
  return set;
}

/* Puts back lines appended to the aside file after it was read, then
 * removes it, under its lock. */
static gboolean drop_aside(const char *aside, gsize consumed, const char *log, ixia_error_t **err) {
  int fd = open(aside, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? TRUE : ixia_error_set(err, IXIA_EUNAVAILABLE, "%s: %s", aside, g_strerror(errno));
  gboolean ok = lock_fd(fd) == 0;
  GString *late = g_string_new(NULL);
  if (ok) ok = read_fd(fd, (off_t)consumed, late, err);
  if (ok && late->len) ok = ixia_failed_log_append(log, late->str, late->len, NULL, err);
  if (ok && unlink(aside) != 0) ok = ixia_error_set(err, IXIA_EUNAVAILABLE, "unlink %s: %s", aside, g_strerror(errno));
  g_string_free(late, TRUE);
  close(fd);
  return ok;
}

cJSON *ixia_recovery_replay_failed(const char *api_addr, const char *log, guint batch,
                                   ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  char *aside = g_strconcat(log, ".replaying", NULL);
  GPtrArray *items = g_ptr_array_new_with_free_func(item_free);
  GString *keep = g_string_new(NULL);
  char *text = NULL;
  gsize text_len = 0;
  guint64 entries = 0, not_replayable = 0, replayed = 0, still_failing = 0, not_attempted = 0;
  ixia_client_t *api = NULL;
  ixia_recovery_shards_t shards = {0};
  cJSON *summary = NULL;
  gboolean ok = take_log(log, aside, err);
  if (ok && g_file_test(aside, G_FILE_TEST_EXISTS)) {
    GError *gerr = NULL;
    ok = g_file_get_contents(aside, &text, &text_len, &gerr) ||
         ixia_error_from_gerror(err, gerr, IXIA_EUNAVAILABLE, aside);
  }
  if (ok && text) parse_entries(text, items, keep, &entries, &not_replayable);
  /* Connection problems leave entries "not attempted" (written back), they
   * do not fail the run: the summary says what happened. */
  ixia_error_t *conn = NULL;
  if (ok && items->len) {
    api = ixia_client_new(api_addr, &conn);
    if (api) ixia_recovery_shards_open(api, &shards, &conn);
  }
  guint step = batch ? batch : 500;
  for (guint at = 0; ok && !conn && at < items->len; at += step) {
    GPtrArray *events = g_ptr_array_new_with_free_func(g_object_unref);
    guint end = MIN(at + step, items->len);
    for (guint i = at; !conn && i < end; i++) {
      IxiaChangeEvent *ev = current_event(api, g_ptr_array_index(items, i), &conn);
      if (ev) g_ptr_array_add(events, ev);
    }
    if (!conn && ixia_recovery_reindex(&shards, events, NULL, &conn))
      for (guint i = at; i < end; i++) ((item_t *)g_ptr_array_index(items, i))->attempted = TRUE;
    g_ptr_array_unref(events);
  }
  if (ok) {
    /* Re-failures were appended to the log by the indexer meanwhile. */
    GHashTable *again = logged_now(log);
    for (guint i = 0; i < items->len; i++) {
      item_t *it = g_ptr_array_index(items, i);
      if (!it->attempted) {
        for (guint j = 0; j < it->lines->len; j++) g_string_append(keep, g_ptr_array_index(it->lines, j));
        not_attempted += it->lines->len;
      } else {
        char *id = g_strdup_printf("%s\n%s\n%s", it->ns, it->table, it->key);
        if (g_hash_table_contains(again, id)) still_failing += it->lines->len;
        else replayed += it->lines->len;
        g_free(id);
      }
    }
    g_hash_table_destroy(again);
    if (keep->len) ok = ixia_failed_log_append(log, keep->str, keep->len, NULL, err);
    if (ok && text) ok = drop_aside(aside, text_len, log, err);
  }
  if (ok) {
    summary = cJSON_CreateObject();
    cJSON_AddBoolToObject(summary, "ok", still_failing + not_attempted + not_replayable == 0);
    cJSON_AddStringToObject(summary, "log", log);
    cJSON_AddNumberToObject(summary, "entries", (double)entries);
    cJSON_AddNumberToObject(summary, "keys", items->len);
    cJSON_AddNumberToObject(summary, "replayed", (double)replayed);
    cJSON_AddNumberToObject(summary, "still_failing", (double)still_failing);
    cJSON_AddNumberToObject(summary, "not_attempted", (double)not_attempted);
    cJSON_AddNumberToObject(summary, "not_replayable", (double)not_replayable);
    if (conn) cJSON_AddStringToObject(summary, "error", conn->message);
    cJSON_AddNumberToObject(summary, "seconds", (double)(g_get_monotonic_time() - start) / 1e6);
  }
  ixia_error_destroy(conn);
  ixia_recovery_shards_close(&shards);
  ixia_client_destroy(api);
  g_free(text);
  g_string_free(keep, TRUE);
  g_ptr_array_unref(items);
  g_free(aside);
  return summary;
}
