/* The deadline thread of blocking socket calls (watchdog.h).
 *
 * One thread sleeps until the earliest armed deadline and shuts down every
 * socket whose deadline passed; an arm wakes it only when its deadline
 * comes before that (deadlines are mostly alike, so most arms wake
 * nothing: a query on a worker pays a lock, not a context switch).
 * The watches are a plain list: there are as many as calls in flight on
 * worker threads, a few dozen at most, and each wake-up scans them once.
 * Shutting down under the lock that disarm takes means a watch's fd is
 * never touched after disarm returns, so the caller may close it (and the
 * number be reused) at once. */
#include "watchdog.h"

#include <sys/socket.h>

struct ixia_watchdog {
  GMutex lock;
  GCond wake;
  GList *watches; /* ixia_watch_t*, under lock */
  gint64 wake_at;  /* when the thread wakes next (G_MAXINT64: when signalled); under lock */
  gboolean stop;
  GThread *thread;
};

static gpointer watchdog_main(gpointer data) {
  ixia_watchdog_t *w = data;
  g_mutex_lock(&w->lock);
  while (!w->stop) {
    gint64 now = g_get_monotonic_time(), next = G_MAXINT64;
    for (GList *l = w->watches; l; l = l->next) {
      ixia_watch_t *x = l->data;
      if (x->fired) continue;
      if (x->by <= now) {
        shutdown(x->fd, SHUT_RDWR);
        x->fired = TRUE;
      } else if (x->by < next) {
        next = x->by;
      }
    }
    w->wake_at = next;
    if (next == G_MAXINT64) g_cond_wait(&w->wake, &w->lock);
    else g_cond_wait_until(&w->wake, &w->lock, next);
    w->wake_at = 0; /* awake: it scans the list before sleeping again */
  }
  g_mutex_unlock(&w->lock);
  return NULL;
}

ixia_watchdog_t *ixia_watchdog_new(void) {
  ixia_watchdog_t *w = g_new0(ixia_watchdog_t, 1);
  g_mutex_init(&w->lock);
  g_cond_init(&w->wake);
  w->thread = g_thread_new("ixia-watchdog", watchdog_main, w);
  return w;
}

void ixia_watchdog_destroy(ixia_watchdog_t *w) {
  if (!w) return;
  g_mutex_lock(&w->lock);
  w->stop = TRUE;
  g_cond_signal(&w->wake);
  g_mutex_unlock(&w->lock);
  g_thread_join(w->thread);
  g_list_free(w->watches);
  g_cond_clear(&w->wake);
  g_mutex_clear(&w->lock);
  g_free(w);
}

void ixia_watchdog_arm(ixia_watchdog_t *w, ixia_watch_t *x, int fd, gint64 by) {
  *x = (ixia_watch_t){.fd = fd, .by = by};
  g_mutex_lock(&w->lock);
  w->watches = g_list_prepend(w->watches, x);
  if (by < w->wake_at) g_cond_signal(&w->wake);
  g_mutex_unlock(&w->lock);
}

gboolean ixia_watchdog_disarm(ixia_watchdog_t *w, ixia_watch_t *x) {
  g_mutex_lock(&w->lock);
  w->watches = g_list_remove(w->watches, x);
  gboolean fired = x->fired;
  g_mutex_unlock(&w->lock);
  return fired;
}
