/* Point-in-time recovery of the truth store: ixia-recovery backup and
 * restore. The directory layout and the reasoning are in recovery.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "json.h"
#include "progress.h"
#include "internal.h"
#include "recovery.h"
#include "store.h"

#define BACKUP_FORMAT 1
#define SEGMENT_MAGIC "IXIAWAL1"
#define SEGMENT_MAGIC_LEN 8
#define RECORD_HEADER 12 /* u64 sequence, u32 length */
#define SEGMENT_MAX_BYTES (64u << 20)
#define DEFAULT_PAGE_BYTES (4 << 20)

typedef struct {
  gint64 first, last;
  char *path;
} segment_t;

/* A backup directory as found on disk. */
typedef struct {
  char *dir;
  gint64 base_version;
  GArray *segments; /* segment_t, by version, up to a hole */
  gint64 archived_through; /* last version of an unbroken run from base+1 */
  gint64 hole_to;          /* > 0: versions archived_through+1..hole_to are missing */
} archive_t;

static void segment_clear(gpointer p) { g_free(((segment_t *)p)->path); }

static void archive_free(archive_t *a) {
  if (!a) return;
  g_free(a->dir);
  if (a->segments) g_array_unref(a->segments);
  g_free(a);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(archive_t, archive_free)

static int segment_cmp(gconstpointer a, gconstpointer b) {
  gint64 x = ((const segment_t *)a)->first, y = ((const segment_t *)b)->first;
  return x < y ? -1 : x > y;
}

/* "FIRST-LAST.wal" with both numbers in 20 digits; FALSE for other names. */
static gboolean parse_segment_name(const char *name, gint64 *first, gint64 *last) {
  if (strlen(name) != 20 + 1 + 20 + 4 || name[20] != '-' || strcmp(name + 41, ".wal") != 0)
    return FALSE;
  for (int i = 0; i < 41; i++)
    if (i != 20 && !g_ascii_isdigit(name[i])) return FALSE;
  *first = g_ascii_strtoll(name, NULL, 10);
  *last = g_ascii_strtoll(name + 21, NULL, 10);
  return *first >= 1 && *last >= *first;
}

static char *segment_name(gint64 first, gint64 last) {
  return g_strdup_printf("%020" G_GINT64_FORMAT "-%020" G_GINT64_FORMAT ".wal", first, last);
}

static gboolean read_manifest(const char *dir, gint64 *base_version, ixia_error_t **err) {
  char *path = g_build_filename(dir, "BACKUP.json", NULL);
  char *text = NULL;
  GError *gerr = NULL;
  gboolean ok = g_file_get_contents(path, &text, NULL, &gerr);
  if (!ok) {
    if (g_error_matches(gerr, G_FILE_ERROR, G_FILE_ERROR_NOENT))
      ixia_error_set(err, IXIA_ENOTFOUND,
                     "%s holds no backup (no BACKUP.json): create one with ixia-recovery backup --to %s",
                     dir, dir);
    else
      ixia_error_set(err, IXIA_EUNAVAILABLE, "%s", gerr->message);
    g_error_free(gerr);
    g_free(path);
    return FALSE;
  }
  cJSON *m = cJSON_Parse(text);
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(m, "format");
  const cJSON *base = cJSON_GetObjectItemCaseSensitive(m, "base_version");
  if (!cJSON_IsNumber(format) || format->valueint != BACKUP_FORMAT || !cJSON_IsNumber(base) ||
      base->valuedouble < 0)
    ok = ixia_error_set(err, IXIA_EINTERNAL, "%s is not a format %d backup manifest", path,
                        BACKUP_FORMAT);
  else
    *base_version = (gint64)base->valuedouble;
  cJSON_Delete(m);
  g_free(text);
  g_free(path);
  return ok;
}

/* Reads DIR's manifest and segment list and checks that the segments
 * continue each other from base+1; a hole (a lost segment) ends the usable
 * archive: what follows it is dropped from the list. */
static archive_t *archive_open(const char *dir, ixia_error_t **err) {
  g_autoptr(archive_t) a = g_new0(archive_t, 1);
  a->dir = g_strdup(dir);
  a->segments = g_array_new(FALSE, FALSE, sizeof(segment_t));
  g_array_set_clear_func(a->segments, segment_clear);
  if (!read_manifest(dir, &a->base_version, err)) return NULL;
  char *wal_dir = g_build_filename(dir, "wal", NULL);
  GError *gerr = NULL;
  GDir *d = g_dir_open(wal_dir, 0, &gerr);
  if (!d) {
    gboolean missing = g_error_matches(gerr, G_FILE_ERROR, G_FILE_ERROR_NOENT);
    if (!missing) ixia_error_set(err, IXIA_EUNAVAILABLE, "%s", gerr->message);
    g_error_free(gerr);
    g_free(wal_dir);
    if (!missing) return NULL;
    a->archived_through = a->base_version;
    return g_steal_pointer(&a);
  }
  const char *name;
  while ((name = g_dir_read_name(d))) {
    segment_t s = {0};
    if (!parse_segment_name(name, &s.first, &s.last)) continue; /* .tmp of an interrupted run */
    s.path = g_build_filename(wal_dir, name, NULL);
    g_array_append_val(a->segments, s);
  }
  g_dir_close(d);
  g_free(wal_dir);
  g_array_sort(a->segments, segment_cmp);
  gint64 through = a->base_version;
  for (guint i = 0; i < a->segments->len; i++) {
    segment_t *s = &g_array_index(a->segments, segment_t, i);
    if (s->first > through + 1) {
      a->hole_to = s->first - 1;
      g_array_set_size(a->segments, i);
      break;
    }
    if (s->first <= through) {
      ixia_error_set(err, IXIA_EINTERNAL,
                     "the WAL archive in %s overlaps itself at version %" G_GINT64_FORMAT " (%s)", dir,
                     s->first, s->path);
      return NULL;
    }
    through = s->last;
  }
  a->archived_through = through;
  return g_steal_pointer(&a);
}

static gboolean hole_error(const archive_t *a, ixia_error_t **err) {
  return ixia_error_set(err, IXIA_ENOTFOUND,
                        "the WAL archive in %s has a hole: versions %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
                        " are missing (a segment file was lost), so it is usable up to version %" G_GINT64_FORMAT
                        " only; start a new backup directory",
                        a->dir, a->archived_through + 1, a->hole_to, a->archived_through);
}

static gboolean io_error(ixia_error_t **err, const char *what, const char *path) {
  return ixia_error_set(err, IXIA_EUNAVAILABLE, "%s %s: %s", what, path, g_strerror(errno));
}

static gboolean write_all(int fd, const void *buf, size_t len, const char *path, ixia_error_t **err) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(err, "write", path);
    p += n;
    len -= (size_t)n;
  }
  return TRUE;
}

/* Makes a rename or a new file in dir durable. */
static gboolean fsync_dir(const char *dir, ixia_error_t **err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error(err, "open", dir);
  gboolean ok = fsync(fd) == 0 || io_error(err, "fsync", dir);
  close(fd);
  return ok;
}

/* Removes a directory of plain files (a RocksDB checkpoint). */
static gboolean remove_flat_dir(const char *dir, ixia_error_t **err) {
  GDir *d = g_dir_open(dir, 0, NULL);
  if (!d) return TRUE;
  const char *name;
  gboolean ok = TRUE;
  while (ok && (name = g_dir_read_name(d))) {
    char *p = g_build_filename(dir, name, NULL);
    if (g_unlink(p) != 0) ok = io_error(err, "cannot remove", p);
    g_free(p);
  }
  g_dir_close(d);
  return ok && (g_rmdir(dir) == 0 || io_error(err, "cannot remove", dir));
}

/* ---------- backup ---------- */

/* The segment being written by this run. */
typedef struct {
  char *wal_dir;
  char *tmp_path;
  int fd;
  gint64 first, last;
  guint64 bytes;
  gboolean broken; /* a write failed: the .tmp is not a whole number of records */
} segment_writer_t;

static gboolean segment_append(segment_writer_t *w, gint64 sequence, gint64 last, const guint8 *data,
                               guint32 len, ixia_error_t **err) {
  w->broken = TRUE; /* until this record is wholly written */
  if (w->fd < 0) {
    char *name = g_strdup_printf("%020" G_GINT64_FORMAT ".tmp", sequence);
    w->tmp_path = g_build_filename(w->wal_dir, name, NULL);
    g_free(name);
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) return io_error(err, "cannot create", w->tmp_path);
    if (!write_all(w->fd, SEGMENT_MAGIC, SEGMENT_MAGIC_LEN, w->tmp_path, err)) return FALSE;
    w->first = sequence;
    w->bytes = SEGMENT_MAGIC_LEN;
  }
  guint8 header[RECORD_HEADER];
  guint64 seq_le = GUINT64_TO_LE((guint64)sequence);
  guint32 len_le = GUINT32_TO_LE(len);
  memcpy(header, &seq_le, 8);
  memcpy(header + 8, &len_le, 4);
  if (!write_all(w->fd, header, RECORD_HEADER, w->tmp_path, err) ||
      !write_all(w->fd, data, len, w->tmp_path, err))
    return FALSE;
  w->last = last;
  w->bytes += RECORD_HEADER + len;
  w->broken = FALSE;
  return TRUE;
}

/* Makes the open segment durable and gives it its final name. */
static gboolean segment_seal(segment_writer_t *w, ixia_error_t **err) {
  if (w->fd < 0) return TRUE;
  gboolean ok = fsync(w->fd) == 0 || io_error(err, "fsync", w->tmp_path);
  if (close(w->fd) != 0 && ok) ok = io_error(err, "close", w->tmp_path);
  w->fd = -1;
  char *name = segment_name(w->first, w->last);
  char *path = g_build_filename(w->wal_dir, name, NULL);
  ok = ok && (g_rename(w->tmp_path, path) == 0 || io_error(err, "cannot rename", w->tmp_path));
  ok = ok && fsync_dir(w->wal_dir, err);
  g_free(name);
  g_free(path);
  g_clear_pointer(&w->tmp_path, g_free);
  return ok;
}

static void segment_abort(segment_writer_t *w) {
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
  if (w->tmp_path) g_unlink(w->tmp_path);
  g_clear_pointer(&w->tmp_path, g_free);
}

/* Drops the .tmp segments an interrupted run left behind. */
static void remove_tmp_segments(const char *wal_dir) {
  GDir *d = g_dir_open(wal_dir, 0, NULL);
  if (!d) return;
  const char *name;
  while ((name = g_dir_read_name(d))) {
    if (!g_str_has_suffix(name, ".tmp")) continue;
    char *p = g_build_filename(wal_dir, name, NULL);
    g_unlink(p);
    g_free(p);
  }
  g_dir_close(d);
}

/* A directory a first backup may use: absent, empty, or holding only what an
 * interrupted first run left (LOCK, base.partial, base). */
static gboolean fresh_dir_usable(const char *dir, ixia_error_t **err) {
  GDir *d = g_dir_open(dir, 0, NULL);
  if (!d) return TRUE;
  const char *name;
  gboolean ok = TRUE;
  while (ok && (name = g_dir_read_name(d)))
    if (strcmp(name, "LOCK") && strcmp(name, "base") && strcmp(name, "base.partial"))
      ok = ixia_error_set(err, IXIA_EINVAL,
                          "%s is not empty and holds no backup (no BACKUP.json; found '%s'): use a new directory",
                          dir, name);
  g_dir_close(d);
  return ok;
}

/* Takes the base snapshot into DIR/base through the API and records its
 * version in DIR/BACKUP.json (written last: it is what makes DIR a backup). */
static gboolean take_base(ixia_client_t *api, const char *dir, gint64 *base_version,
                          ixia_error_t **err) {
  if (!fresh_dir_usable(dir, err)) return FALSE;
  char *partial = g_build_filename(dir, "base.partial", NULL);
  char *base = g_build_filename(dir, "base", NULL);
  char *manifest = g_build_filename(dir, "BACKUP.json", NULL);
  gchar *result = NULL;
  cJSON *r = NULL;
  gboolean ok = remove_flat_dir(partial, err) && remove_flat_dir(base, err);
  if (ok) {
    ok = ixia_client_snapshot(api, partial, &result, err);
    if (!ok && err && *err) ixia_error_prefix(*err, "base snapshot into %s", partial);
  }
  if (ok) {
    r = cJSON_Parse(result);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "version");
    if (!cJSON_IsNumber(v))
      ok = ixia_error_set(err, IXIA_EINTERNAL, "snapshot returned no version: %s", result);
    else
      *base_version = (gint64)v->valuedouble;
  }
  ok = ok && (g_rename(partial, base) == 0 || io_error(err, "cannot rename", partial)) &&
       fsync_dir(dir, err);
  if (ok) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "format", BACKUP_FORMAT);
    cJSON_AddNumberToObject(m, "base_version", (double)*base_version);
    GDateTime *now = g_date_time_new_now_utc();
    char *iso = g_date_time_format_iso8601(now);
    cJSON_AddStringToObject(m, "created_at", iso);
    g_free(iso);
    g_date_time_unref(now);
    char *text = cJSON_Print(m);
    cJSON_Delete(m);
    GError *gerr = NULL;
    ok = g_file_set_contents_full(manifest, text, -1,
                                  G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0644,
                                  &gerr) ||
         ixia_error_from_gerror(err, gerr, IXIA_EUNAVAILABLE, "write backup manifest");
    cJSON_free(text);
  }
  cJSON_Delete(r);
  g_free(result);
  g_free(partial);
  g_free(base);
  g_free(manifest);
  return ok;
}

/* Holds DIR/LOCK for the process's lifetime of fd: one backup per DIR. */
static int lock_dir(const char *dir, ixia_error_t **err) {
  char *path = g_build_filename(dir, "LOCK", NULL);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    io_error(err, "cannot open", path);
  } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "another backup is running into %s (%s is locked)", dir, path);
    close(fd);
    fd = -1;
  }
  g_free(path);
  return fd;
}

typedef struct {
  ixia_client_t *api;
  segment_writer_t w;
  gint64 through; /* last archived version */
  gint64 target;  /* store's latest version when the run started */
  gint32 page_bytes;
  guint64 batches, bytes;
  ixia_progress_t *progress;
} archiver_t;

/* Appends the WAL batches after a->through up to a->target. */
static gboolean archive_wal(archiver_t *a, ixia_error_t **err) {
  while (a->through < a->target) {
    GPtrArray *page = NULL;
    ixia_error_t *e = NULL;
    if (!ixia_client_wal_since(a->api, a->through, a->page_bytes, &page, &e)) {
      if (e->code == IXIA_ENOTFOUND) {
        ixia_error_set(err, IXIA_ENOTFOUND,
                       "this backup cannot be continued: its archive ends at version %" G_GINT64_FORMAT
                       " and %s. Start a new one in an empty directory, and run backups more often "
                       "than the WAL is kept",
                       a->through, e->message);
        ixia_error_destroy(e);
        return FALSE;
      }
      return ixia_error_propagate(err, e);
    }
    gboolean ok = page->len > 0 ||
                  ixia_error_set(err, IXIA_EINTERNAL,
                                 "walSince after version %" G_GINT64_FORMAT " returned nothing although "
                                 "the store was at version %" G_GINT64_FORMAT,
                                 a->through, a->target);
    for (guint i = 0; ok && i < page->len; i++) {
      IxiaWalBatch *b = g_ptr_array_index(page, i);
      gint64 last = ixia_record_batch_last(b->sequence, (const char *)b->data->data, b->data->len);
      if (b->sequence != a->through + 1 || last < b->sequence) {
        ok = ixia_error_set(err, IXIA_EINTERNAL,
                            "WAL batch of versions %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
                            " does not continue the archive at version %" G_GINT64_FORMAT,
                            b->sequence, last, a->through + 1);
        break;
      }
      ok = segment_append(&a->w, b->sequence, last, b->data->data, b->data->len, err);
      if (ok && a->w.bytes >= SEGMENT_MAX_BYTES) ok = segment_seal(&a->w, err);
      if (ok) {
        ixia_progress_add(a->progress, (guint64)(last - a->through));
        a->through = last;
        a->batches++;
        a->bytes += b->data->len;
      }
    }
    g_ptr_array_unref(page);
    if (!ok) return FALSE;
  }
  return TRUE;
}

cJSON *ixia_recovery_backup(const char *api_addr, const char *dir_arg, const ixia_backup_opts_t *opts,
                            ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  /* The API resolves the snapshot path on its side: never hand it a
   * relative one. */
  char *dir = g_canonicalize_filename(dir_arg, NULL);
  char *wal_dir = g_build_filename(dir, "wal", NULL);
  archiver_t a = {.w = {.wal_dir = wal_dir, .fd = -1},
                  .page_bytes = opts->page_bytes > 0 ? opts->page_bytes : DEFAULT_PAGE_BYTES};
  archive_t *arc = NULL;
  cJSON *summary = NULL;
  int lock_fd = -1;
  gboolean ok = g_mkdir_with_parents(dir, 0755) == 0 || io_error(err, "cannot create", dir);
  ok = ok && (lock_fd = lock_dir(dir, err)) >= 0;
  ok = ok && (a.api = ixia_client_new(api_addr, err)) != NULL;
  if (ok) {
    char *manifest = g_build_filename(dir, "BACKUP.json", NULL);
    gint64 base = 0;
    if (!g_file_test(manifest, G_FILE_TEST_EXISTS)) ok = take_base(a.api, dir, &base, err);
    g_free(manifest);
  }
  ok = ok && (g_mkdir_with_parents(wal_dir, 0755) == 0 || io_error(err, "cannot create", wal_dir));
  if (ok) remove_tmp_segments(wal_dir);
  ok = ok && (arc = archive_open(dir, err)) != NULL;
  ok = ok && (arc->hole_to == 0 || hole_error(arc, err));
  if (ok) {
    a.through = arc->archived_through;
    a.target = ixia_recovery_latest_version(a.api, err);
    ok = a.target >= 0;
  }
  if (ok) {
    char *label = g_strdup_printf("backup %s", dir);
    a.progress = ixia_progress_new(label, (guint64)MAX(a.target - a.through, 0), "versions", opts->quiet);
    g_free(label);
    ok = archive_wal(&a, err) && segment_seal(&a.w, err);
    ixia_progress_destroy(a.progress);
  }
  /* After a failed call the records written so far are whole batches: keep
   * them. After a failed write, drop the segment (sealed ones stay valid). */
  if (!ok && !a.w.broken) segment_seal(&a.w, NULL);
  segment_abort(&a.w);
  if (ok) {
    summary = cJSON_CreateObject();
    cJSON_AddStringToObject(summary, "dir", dir);
    cJSON_AddNumberToObject(summary, "base_version", (double)arc->base_version);
    cJSON_AddNumberToObject(summary, "archived_through", (double)a.through);
    cJSON_AddNumberToObject(summary, "batches", (double)a.batches);
    cJSON_AddNumberToObject(summary, "bytes", (double)a.bytes);
    cJSON_AddNumberToObject(summary, "seconds", (double)(g_get_monotonic_time() - start) / 1e6);
  }
  ixia_client_destroy(a.api);
  archive_free(arc);
  if (lock_fd >= 0) close(lock_fd);
  g_free(wal_dir);
  g_free(dir);
  return summary;
}

/* ---------- restore ---------- */

static gboolean copy_file(const char *from, const char *to, ixia_error_t **err) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  if (in < 0) return io_error(err, "cannot open", from);
  int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    close(in);
    return io_error(err, "cannot create", to);
  }
  gboolean ok = TRUE;
  char *buf = g_malloc(1 << 20);
  for (;;) {
    ssize_t n = read(in, buf, 1 << 20);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = io_error(err, "read", from);
    if (n <= 0) break;
    if (!(ok = write_all(out, buf, (size_t)n, to, err))) break;
  }
  g_free(buf);
  ok = ok && (fsync(out) == 0 || io_error(err, "fsync", to));
  close(in);
  if (close(out) != 0 && ok) ok = io_error(err, "close", to);
  return ok;
}

/* Creates dir if absent; FALSE unless it is empty. */
static gboolean dir_is_empty(const char *dir, ixia_error_t **err) {
  if (g_mkdir_with_parents(dir, 0755) != 0) return io_error(err, "cannot create", dir);
  GError *gerr = NULL;
  GDir *d = g_dir_open(dir, 0, &gerr);
  if (!d) return ixia_error_from_gerror(err, gerr, IXIA_EUNAVAILABLE, "restore target");
  gboolean empty = g_dir_read_name(d) == NULL;
  g_dir_close(d);
  return empty || ixia_error_set(err, IXIA_EINVAL,
                                 "%s is not empty: restore builds a new store in an empty directory", dir);
}

/* Copies the base checkpoint (plain files) into an empty dir. */
static gboolean copy_base(const char *base, const char *store_dir, ixia_error_t **err) {
  GError *gerr = NULL;
  GDir *d = g_dir_open(base, 0, &gerr);
  if (!d) return ixia_error_from_gerror(err, gerr, IXIA_ENOTFOUND, "base snapshot");
  const char *name;
  gboolean ok = TRUE;
  while (ok && (name = g_dir_read_name(d))) {
    char *from = g_build_filename(base, name, NULL), *to = g_build_filename(store_dir, name, NULL);
    if (g_file_test(from, G_FILE_TEST_IS_DIR))
      ok = ixia_error_set(err, IXIA_EINTERNAL, "unexpected directory %s in the base snapshot", from);
    else
      ok = copy_file(from, to, err);
    g_free(from);
    g_free(to);
  }
  g_dir_close(d);
  return ok && fsync_dir(store_dir, err);
}

typedef struct {
  rocksdb_t *db;
  rocksdb_writeoptions_t *wopts;
  gint64 applied_through; /* store's version so far */
  gint64 to_version;
  guint64 batches;
  gboolean done;          /* reached a batch past to_version */
  ixia_progress_t *progress;
} replayer_t;

static gboolean replay_batch(replayer_t *r, gint64 sequence, const char *data, size_t len,
                             const char *path, ixia_error_t **err) {
  gint64 last = ixia_record_batch_last(sequence, data, len);
  if (sequence != r->applied_through + 1 || last < sequence)
    return ixia_error_set(err, IXIA_EINTERNAL,
                          "%s: batch of versions %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
                          " does not continue the store at version %" G_GINT64_FORMAT,
                          path, sequence, last, r->applied_through);
  if (last > r->to_version) {
    r->done = TRUE;
    return TRUE;
  }
  rocksdb_writebatch_t *wb = rocksdb_writebatch_create_from(data, len);
  char *rerr = NULL;
  rocksdb_write(r->db, r->wopts, wb, &rerr);
  rocksdb_writebatch_destroy(wb);
  if (!ixia_error_from_rocksdb(err, rerr, "replay WAL batch")) return FALSE;
  gint64 now = (gint64)rocksdb_get_latest_sequence_number(r->db);
  /* The whole point: replayed edits must get their original versions. */
  if (now != last)
    return ixia_error_set(err, IXIA_EINTERNAL,
                          "replaying the batch of versions %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
                          " left the store at version %" G_GINT64_FORMAT ": versions would not match",
                          sequence, last, now);
  ixia_progress_add(r->progress, (guint64)(last - r->applied_through));
  r->applied_through = last;
  r->batches++;
  return TRUE;
}

/* Replays one segment's records while they stay <= to_version. */
static gboolean replay_segment(replayer_t *r, const segment_t *s, ixia_error_t **err) {
  gchar *data = NULL;
  gsize len = 0;
  GError *gerr = NULL;
  if (!g_file_get_contents(s->path, &data, &len, &gerr))
    return ixia_error_from_gerror(err, gerr, IXIA_EUNAVAILABLE, "read WAL archive");
  gboolean ok = len >= SEGMENT_MAGIC_LEN && memcmp(data, SEGMENT_MAGIC, SEGMENT_MAGIC_LEN) == 0;
  if (!ok) ixia_error_set(err, IXIA_EINTERNAL, "%s is not an ixia WAL segment", s->path);
  gsize pos = SEGMENT_MAGIC_LEN;
  gint64 last_in_file = s->first - 1;
  while (ok && !r->done && pos < len) {
    guint64 seq_le;
    guint32 len_le;
    if (len - pos < RECORD_HEADER) {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "%s is truncated at byte %zu", s->path, pos);
      break;
    }
    memcpy(&seq_le, data + pos, 8);
    memcpy(&len_le, data + pos + 8, 4);
    gint64 seq = (gint64)GUINT64_FROM_LE(seq_le);
    guint32 blen = GUINT32_FROM_LE(len_le);
    pos += RECORD_HEADER;
    if (len - pos < blen) {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "%s is truncated at byte %zu", s->path, pos);
      break;
    }
    ok = replay_batch(r, seq, data + pos, blen, s->path, err);
    last_in_file = ixia_record_batch_last(seq, data + pos, blen);
    pos += blen;
  }
  if (ok && !r->done && last_in_file != s->last)
    ok = ixia_error_set(err, IXIA_EINTERNAL,
                        "%s ends at version %" G_GINT64_FORMAT ", its name says %" G_GINT64_FORMAT,
                        s->path, last_in_file, s->last);
  g_free(data);
  return ok;
}

static gboolean write_replication_checkpoint(const char *store_dir, gint64 version,
                                             ixia_error_t **err) {
  /* Same file and format as query-api/replication.c. */
  char *path = g_build_filename(store_dir, "REPLICATION_CHECKPOINT", NULL);
  char *text = g_strdup_printf("%" G_GINT64_FORMAT "\n", version);
  GError *gerr = NULL;
  gboolean ok = g_file_set_contents_full(path, text, -1,
                                         G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                         0644, &gerr) ||
                ixia_error_from_gerror(err, gerr, IXIA_EUNAVAILABLE, path);
  g_free(text);
  g_free(path);
  return ok;
}

/* Opens the copied base as a truth store (same column families and options
 * as the API uses). */
static ixia_store_t *open_restored(const char *store_dir, ixia_error_t **err) {
  ixia_config_t *cfg = ixia_config_new();
  ixia_store_t *store = NULL;
  if (ixia_config_set(cfg, "store.path", store_dir, err) &&
      ixia_config_set(cfg, "store.sync", "false", err) &&
      ixia_config_set(cfg, "store.block_cache_mb", "8", err))
    store = ixia_store_open(cfg, err);
  ixia_config_destroy(cfg);
  return store;
}

cJSON *ixia_recovery_restore(const char *dir, gint64 to_version, const char *store_dir,
                             const ixia_backup_opts_t *opts, ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  g_autoptr(archive_t) arc = archive_open(dir, err);
  if (!arc) return NULL;
  gint64 requested = to_version < 0 ? arc->archived_through : to_version;
  if (requested < arc->base_version) {
    ixia_error_set(err, IXIA_EINVAL,
                   "version %" G_GINT64_FORMAT " is older than the base snapshot of %s (version %" G_GINT64_FORMAT
                   "): restore it from an older backup",
                   requested, dir, arc->base_version);
    return NULL;
  }
  if (requested > arc->archived_through && arc->hole_to > 0) {
    hole_error(arc, err);
    return NULL;
  }
  if (requested > arc->archived_through) {
    ixia_error_set(err, IXIA_EINVAL,
                   "version %" G_GINT64_FORMAT " is beyond the archive of %s, which ends at version %" G_GINT64_FORMAT
                   ": run ixia-recovery backup --to %s first",
                   requested, dir, arc->archived_through, dir);
    return NULL;
  }
  char *base = g_build_filename(dir, "base", NULL);
  gboolean ok = dir_is_empty(store_dir, err);
  gboolean wrote = ok;
  ok = ok && copy_base(base, store_dir, err);
  g_free(base);
  ixia_store_t *store = ok ? open_restored(store_dir, err) : NULL;
  ok = store != NULL;
  replayer_t r = {.to_version = requested};
  if (ok) {
    r.db = ixia_store_db(store);
    r.applied_through = ixia_store_latest_version(store);
    if (r.applied_through != arc->base_version)
      ok = ixia_error_set(err, IXIA_EINTERNAL,
                          "the base snapshot opens at version %" G_GINT64_FORMAT ", BACKUP.json says %" G_GINT64_FORMAT,
                          r.applied_through, arc->base_version);
  }
  if (ok) {
    /* Unsynced writes, one flush at the end: the restore is redone from
     * scratch if it is interrupted. */
    r.wopts = rocksdb_writeoptions_create();
    r.progress = ixia_progress_new("restore", (guint64)(requested - arc->base_version), "versions",
                                   opts->quiet);
    for (guint i = 0; ok && !r.done && i < arc->segments->len; i++)
      ok = replay_segment(&r, &g_array_index(arc->segments, segment_t, i), err);
    ixia_progress_destroy(r.progress);
    rocksdb_writeoptions_destroy(r.wopts);
    ok = ok && ixia_store_flush(store, err);
  }
  ixia_store_destroy(store);
  ok = ok && write_replication_checkpoint(store_dir, r.applied_through, err);
  if (!ok) {
    if (wrote && err && *err)
      ixia_error_prefix(*err, "restore into %s (empty it before retrying)", store_dir);
    return NULL;
  }
  cJSON *summary = cJSON_CreateObject();
  cJSON_AddStringToObject(summary, "from", dir);
  cJSON_AddStringToObject(summary, "to", store_dir);
  cJSON_AddNumberToObject(summary, "base_version", (double)arc->base_version);
  cJSON_AddNumberToObject(summary, "requested_version", (double)requested);
  cJSON_AddNumberToObject(summary, "restored_version", (double)r.applied_through);
  if (r.applied_through != requested)
    cJSON_AddStringToObject(summary, "note",
                            "the requested version is inside a write batch; batches are atomic, so the "
                            "store was restored to the end of the batch before it");
  cJSON_AddNumberToObject(summary, "batches", (double)r.batches);
  cJSON_AddNumberToObject(summary, "seconds", (double)(g_get_monotonic_time() - start) / 1e6);
  return summary;
}
