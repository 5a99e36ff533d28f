/* Free-space reserves of data directories (disk.h).
 *
 * A reserve watches the file systems of a daemon's data paths and measures
 * them with statvfs when asked (before each write group or index batch):
 * a system call without I/O, cheap enough to make on every group. The last
 * measure is kept under a mutex with the verdict, so stats and health
 * checks read it without a system call, and the change of verdict is
 * logged once each way. */
#include "disk.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "log.h"

#define MIB (1024.0 * 1024.0)

typedef struct {
  char *path;
  dev_t dev;
  gint64 free;        /* last measured, -1 unknown */
  gboolean warned;    /* statvfs failure logged */
} watched_t;

struct ixia_disk_reserve {
  char *who;
  char *option;
  char *resumes;
  gint64 reserve_mb;
  gint64 reserve;     /* bytes */
  GMutex lock;        /* guards the fields below */
  GArray *watched;    /* watched_t */
  gint64 free;        /* least free over watched, -1 unknown */
  gboolean exhausted;
};

gboolean ixia_disk_free(const char *path, gint64 *bytes, ixia_error_t **err) {
  struct statvfs st;
  if (statvfs(path, &st) != 0)
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "free space of %s: statvfs: %s", path,
                          g_strerror(errno));
  *bytes = (gint64)st.f_bavail * (gint64)st.f_frsize;
  return TRUE;
}

ixia_disk_reserve_t *ixia_disk_reserve_new(const char *who, const char *option, gint64 reserve_mb,
                                           const char *resumes) {
  ixia_disk_reserve_t *r = g_new0(ixia_disk_reserve_t, 1);
  r->who = g_strdup(who);
  r->option = g_strdup(option);
  r->resumes = g_strdup(resumes);
  r->reserve_mb = MAX(reserve_mb, 0);
  r->reserve = r->reserve_mb << 20;
  r->free = -1;
  r->watched = g_array_new(FALSE, TRUE, sizeof(watched_t));
  g_mutex_init(&r->lock);
  return r;
}

void ixia_disk_reserve_destroy(ixia_disk_reserve_t *r) {
  if (!r) return;
  for (guint i = 0; i < r->watched->len; i++) g_free(g_array_index(r->watched, watched_t, i).path);
  g_array_free(r->watched, TRUE);
  g_mutex_clear(&r->lock);
  g_free(r->who);
  g_free(r->option);
  g_free(r->resumes);
  g_free(r);
}

void ixia_disk_reserve_watch(ixia_disk_reserve_t *r, const char *path) {
  struct stat st;
  gboolean known = stat(path, &st) == 0;
  g_mutex_lock(&r->lock);
  gboolean dup = FALSE;
  for (guint i = 0; i < r->watched->len && !dup; i++) {
    const watched_t *w = &g_array_index(r->watched, watched_t, i);
    dup = known ? w->dev == st.st_dev : g_strcmp0(w->path, path) == 0;
  }
  if (!dup) {
    watched_t w = {.path = g_strdup(path), .dev = known ? st.st_dev : 0, .free = -1};
    g_array_append_val(r->watched, w);
  }
  g_mutex_unlock(&r->lock);
}

gboolean ixia_disk_reserve_check(ixia_disk_reserve_t *r, ixia_error_t **err) {
  g_mutex_lock(&r->lock);
  gint64 least = -1;
  const watched_t *short_of = NULL; /* the file system with the least space */
  for (guint i = 0; i < r->watched->len; i++) {
    watched_t *w = &g_array_index(r->watched, watched_t, i);
    ixia_error_t *e = NULL;
    if (!ixia_disk_free(w->path, &w->free, &e)) {
      w->free = -1;
      if (!w->warned) IXIA_WARN("%s: %s; not checking its reserve (%s)", r->who, e->message, r->option);
      w->warned = TRUE;
      ixia_error_destroy(e);
      continue;
    }
    w->warned = FALSE;
    if (least < 0 || w->free < least) {
      least = w->free;
      short_of = w;
    }
  }
  gboolean was = r->exhausted;
  r->free = least;
  r->exhausted = r->reserve > 0 && least >= 0 && least < r->reserve;
  char *msg = NULL;
  if (r->exhausted)
    msg = g_strdup_printf("disk full: %.1f MiB free on %s, under %s=%" G_GINT64_FORMAT
                          "; %s when space is freed",
                          (double)least / MIB, short_of->path, r->option, r->reserve_mb, r->resumes);
  if (r->exhausted && !was)
    IXIA_WARN("%s: %s", r->who, msg);
  else if (!r->exhausted && was)
    IXIA_INFO("%s: %.1f MiB free on %s, over %s=%" G_GINT64_FORMAT " again; %s", r->who,
              least >= 0 ? (double)least / MIB : -1.0, short_of ? short_of->path : "(unknown)",
              r->option, r->reserve_mb, r->resumes);
  gboolean ok = !r->exhausted;
  g_mutex_unlock(&r->lock);
  if (!ok) ixia_error_set(err, IXIA_EEXHAUSTED, "%s", msg);
  g_free(msg);
  return ok;
}

gint64 ixia_disk_reserve_free(ixia_disk_reserve_t *r) {
  g_mutex_lock(&r->lock);
  gint64 v = r->free;
  g_mutex_unlock(&r->lock);
  return v;
}

gboolean ixia_disk_reserve_exhausted(ixia_disk_reserve_t *r) {
  g_mutex_lock(&r->lock);
  gboolean v = r->exhausted;
  g_mutex_unlock(&r->lock);
  return v;
}

gint64 ixia_disk_reserve_bytes(const ixia_disk_reserve_t *r) { return r->reserve; }
