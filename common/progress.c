/* Progress lines of long runs (progress.h).
 *
 * Workers only add to an atomic counter; a drawing thread reads it and
 * redraws the line on a terminal every 200 ms, or prints a plain line every
 * 10 s when stderr is not one (logs and CI keep a readable trace). Destroy
 * stops the thread and clears the terminal line; the caller prints its own
 * summary. */
#include "progress.h"

#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

struct ixia_progress {
  char *label;
  char *unit;
  _Atomic guint64 done;
  _Atomic guint64 total;
  gint64 start_us;
  gboolean tty;
  GMutex lock;
  GCond cond;
  gboolean stop; /* guarded by lock */
  GThread *thread;
};

static void draw(ixia_progress_t *p) {
  guint64 done = atomic_load_explicit(&p->done, memory_order_relaxed);
  guint64 total = atomic_load_explicit(&p->total, memory_order_relaxed);
  double secs = (double)(g_get_monotonic_time() - p->start_us) / G_TIME_SPAN_SECOND;
  GString *s = g_string_new(p->tty ? "\r" : "");
  g_string_append_printf(s, "%s: %" G_GUINT64_FORMAT, p->label, done);
  if (total) g_string_append_printf(s, " / %" G_GUINT64_FORMAT, total);
  g_string_append_printf(s, " %s", p->unit);
  if (total) g_string_append_printf(s, " (%d%%)", (int)(100.0 * (double)MIN(done, total) / (double)total));
  if (secs > 0) g_string_append_printf(s, "  %.0f %s/s", (double)done / secs, p->unit);
  g_string_append(s, p->tty ? "\033[K" : "\n");
  fputs(s->str, stderr);
  fflush(stderr);
  g_string_free(s, TRUE);
}

static gpointer draw_main(gpointer data) {
  ixia_progress_t *p = data;
  gint64 interval = p->tty ? 200 * G_TIME_SPAN_MILLISECOND : 10 * G_TIME_SPAN_SECOND;
  g_mutex_lock(&p->lock);
  while (!p->stop) {
    gint64 until = g_get_monotonic_time() + interval;
    while (!p->stop && g_cond_wait_until(&p->cond, &p->lock, until)) {
    }
    if (!p->stop) draw(p);
  }
  g_mutex_unlock(&p->lock);
  return NULL;
}

ixia_progress_t *ixia_progress_new(const char *label, guint64 total, const char *unit,
                                   gboolean quiet) {
  ixia_progress_t *p = g_new0(ixia_progress_t, 1);
  p->label = g_strdup(label);
  p->unit = g_strdup(unit);
  p->total = total;
  p->start_us = g_get_monotonic_time();
  p->tty = isatty(STDERR_FILENO);
  g_mutex_init(&p->lock);
  g_cond_init(&p->cond);
  if (!quiet) p->thread = g_thread_new("ixia-progress", draw_main, p);
  return p;
}

void ixia_progress_add(ixia_progress_t *p, guint64 n) {
  atomic_fetch_add_explicit(&p->done, n, memory_order_relaxed);
}

void ixia_progress_set_total(ixia_progress_t *p, guint64 total) {
  atomic_store_explicit(&p->total, total, memory_order_relaxed);
}

guint64 ixia_progress_done(const ixia_progress_t *p) {
  return atomic_load_explicit(&p->done, memory_order_relaxed);
}

void ixia_progress_destroy(ixia_progress_t *p) {
  if (!p) return;
  if (p->thread) {
    g_mutex_lock(&p->lock);
    p->stop = TRUE;
    g_cond_signal(&p->cond);
    g_mutex_unlock(&p->lock);
    g_thread_join(p->thread);
    if (p->tty) fputs("\r\033[K", stderr);
  }
  g_mutex_clear(&p->lock);
  g_cond_clear(&p->cond);
  g_free(p->label);
  g_free(p->unit);
  g_free(p);
}
