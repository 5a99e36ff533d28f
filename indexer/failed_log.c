/* The failed-updates log (failed_log.h): where it is, what a line says,
 * and how lines reach the disk.
 *
 * An append opens the file, takes an exclusive flock, writes, fdatasyncs and
 * closes it again. Keeping no descriptor open is what lets replay-failed
 * rename the log aside and rewrite it while the shard runs: the next append
 * creates the file anew rather than writing into the renamed one. The
 * directory is fsync'd after the first append of a writer, so a log created
 * just now survives a crash too. */
#include "failed_log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "index.h"
#include "json.h"

char *ixia_failed_log_path(const ixia_config_t *cfg) {
  const char *set = ixia_config_str(cfg, "indexer.failed_log");
  if (set && *set) return g_strdup(set);
  /* Canonical form drops trailing slashes, so "data/index/" names the same
   * file as "data/index". */
  char *index = g_canonicalize_filename(ixia_config_str(cfg, "index.path"), NULL);
  char *path = g_strconcat(index, ".failed-updates.jsonl", NULL);
  g_free(index);
  return path;
}

gboolean ixia_failed_log_append(const char *path, const char *text, size_t len,
                                gboolean *dir_synced, ixia_error_t **err) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "failed-updates log %s: %s", path,
                          g_strerror(errno));
  while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  const char *p = text;
  size_t left = len;
  gboolean ok = TRUE;
  while (ok && left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = FALSE;
      break;
    }
    p += w;
    left -= (size_t)w;
  }
  ok = ok && fdatasync(fd) == 0;
  int saved = errno;
  close(fd);
  if (!ok)
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "failed-updates log %s: write: %s", path,
                          g_strerror(saved));
  if (!dir_synced || !*dir_synced) {
    /* The file may have just been created: make its name durable too. */
    char *dir = g_path_get_dirname(path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      gboolean synced = fsync(dfd) == 0;
      if (dir_synced) *dir_synced = synced;
      close(dfd);
    }
    g_free(dir);
  }
  return TRUE;
}

static void add_str_or_null(cJSON *o, const char *name, const char *s, size_t len) {
  if (s && g_utf8_validate(s, (gssize)len, NULL)) {
    char *copy = ixia_memdup0(s, len);
    cJSON_AddStringToObject(o, name, copy);
    g_free(copy);
  } else {
    cJSON_AddNullToObject(o, name);
  }
}

static const char *op_name(gint op) {
  switch (op) {
    case IXIA_IDX_PUT: return "PUT";
    case IXIA_IDX_DELETE: return "DELETE";
    case IXIA_IDX_SCHEMA: return "SCHEMA";
    default: return NULL;
  }
}

char *ixia_failed_log_line(const char *ns, size_t ns_len, const char *table, size_t table_len,
                         const char *key, size_t key_len, gint64 version, gint op,
                         ixia_code_t code, const char *error, gint32 partition, gint64 offset) {
  cJSON *o = cJSON_CreateObject();
  add_str_or_null(o, "ns", ns, ns_len);
  add_str_or_null(o, "table", table, table_len);
  add_str_or_null(o, "key", key, key_len);
  if (key && !g_utf8_validate(key, (gssize)key_len, NULL)) {
    char *b64 = g_base64_encode((const guchar *)key, key_len);
    cJSON_AddStringToObject(o, "key_base64", b64);
    g_free(b64);
  }
  if (version >= 0)
    cJSON_AddNumberToObject(o, "version", (double)version);
  else
    cJSON_AddNullToObject(o, "version");
  if (op_name(op))
    cJSON_AddStringToObject(o, "op", op_name(op));
  else
    cJSON_AddNullToObject(o, "op");
  cJSON_AddStringToObject(o, "error", error);
  cJSON_AddStringToObject(o, "code", ixia_code_name(code));
  GDateTime *now = g_date_time_new_now_utc();
  char *stamp = g_date_time_format_iso8601(now);
  g_date_time_unref(now);
  cJSON_AddStringToObject(o, "time", stamp);
  g_free(stamp);
  if (partition >= 0) {
    cJSON_AddNumberToObject(o, "partition", partition);
    cJSON_AddNumberToObject(o, "offset", (double)offset);
  } else {
    cJSON_AddNullToObject(o, "partition");
    cJSON_AddNullToObject(o, "offset");
  }
  char *text = ixia_json_print(o);
  cJSON_Delete(o);
  char *line = g_strconcat(text, "\n", NULL);
  g_free(text);
  return line;
}

