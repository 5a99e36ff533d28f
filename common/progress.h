/* Progress of a long run on stderr: a redrawn line on a terminal, a plain
 * line every 10 s otherwise (logs and CI keep a readable trace).
 *
 * "backfill shop.products: 45,000 / 100,000 docs (45%)  8,130 docs/s"
 *
 * Thread safety: ixia_progress_add may be called from any thread; new and
 * destroy from the owning thread. A drawing thread runs in between. */
#ifndef IXIA_PROGRESS_H
#define IXIA_PROGRESS_H

#include <glib.h>

typedef struct ixia_progress ixia_progress_t;

/* total 0 = unknown. unit is plural ("docs"). quiet = draw nothing. */
ixia_progress_t *ixia_progress_new(const char *label, guint64 total, const char *unit,
                                   gboolean quiet);
void ixia_progress_add(ixia_progress_t *p, guint64 n);
void ixia_progress_set_total(ixia_progress_t *p, guint64 total);
guint64 ixia_progress_done(const ixia_progress_t *p);
/* Stops drawing and clears the line. */
void ixia_progress_destroy(ixia_progress_t *p);

#endif
