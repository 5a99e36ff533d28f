/* Deadlines for blocking socket calls: a thread that shuts a registered
 * socket down once its deadline passes.
 *
 * A receive timeout (SO_RCVTIMEO) bounds each recv, not a call: a peer
 * that sends a byte now and then keeps a blocking call going for as long as
 * it likes. Shut down at the deadline, the socket makes the blocked recv
 * (and every later one) return at once, so the call fails there whatever
 * the peer does; the caller then closes the connection.
 *
 * A watch is the caller's memory (a stack variable will do) between arm and
 * disarm. Thread safety: every call may run concurrently; a watch is armed
 * and disarmed by one thread. */
#ifndef IXIA_QUERY_WATCHDOG_H
#define IXIA_QUERY_WATCHDOG_H

#include <glib.h>

typedef struct ixia_watchdog ixia_watchdog_t;

typedef struct {
  int fd;
  gint64 by;      /* monotonic µs */
  gboolean fired; /* the socket was shut down */
} ixia_watch_t;

ixia_watchdog_t *ixia_watchdog_new(void);
/* Joins the thread; every watch must be disarmed. NULL is a no-op. */
void ixia_watchdog_destroy(ixia_watchdog_t *w);

/* Shuts fd down (both directions) at monotonic time by unless disarmed
 * first. */
void ixia_watchdog_arm(ixia_watchdog_t *w, ixia_watch_t *x, int fd, gint64 by);
/* Ends the watch; TRUE when the socket was shut down (the connection is
 * then unusable). */
gboolean ixia_watchdog_disarm(ixia_watchdog_t *w, ixia_watch_t *x);

#endif
