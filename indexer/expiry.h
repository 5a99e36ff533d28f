/* The expiry schedule of one shard: which indexed documents expire when, so
 * that the shard drops them on its own clock (the truth store hides an
 * expired document and its compaction filter removes it, but produces no
 * delete event).
 *
 * An entry is (expire_at, ns, table, key), one per document, kept in a
 * min-heap in memory. The apply thread adds the expiry of every applied
 * PUT that carries one and, at start, of every live expiring document in
 * the index (ixia_idx_foreach_expiring: only tables whose schema sets
 * ttl_seconds are read); a document already scheduled keeps the earlier of
 * the two. An entry may therefore be early or stale (the document was
 * updated with another expiry, or deleted): whoever pops a due entry
 * re-reads the document's record, deletes it when the record's expiry has
 * come, and schedules the record's expiry again when it lies ahead.
 * An entry the reaper cannot handle (its record unreadable, the delete not
 * applied) is scheduled again a second ahead. Memory: about 200 bytes plus
 * the key per expiring document (the entry, its copies of ns, table and
 * key, its heap and hash table slots).
 *
 * Thread safety: add/due/load from the apply thread; ixia_expiry_next from
 * any thread (a search asks whether something is due before it counts). */
#ifndef IXIA_EXPIRY_H
#define IXIA_EXPIRY_H

#include <glib.h>

#include "index.h"

typedef struct ixia_expiry ixia_expiry_t;

typedef struct {
  gint64 expire_at;
  char *ns, *table;
  char *key; /* a copy of key_len bytes, NUL-terminated */
  size_t key_len;
  guint slot; /* (the schedule's: where the entry sits in its heap) */
} ixia_expiry_entry_t;

ixia_expiry_t *ixia_expiry_new(void);
void ixia_expiry_destroy(ixia_expiry_t *e);

void ixia_expiry_add(ixia_expiry_t *e, const char *ns, const char *table, const char *key,
                     size_t key_len, gint64 expire_at);
/* Schedules every live expiring document of idx. */
gboolean ixia_expiry_load(ixia_expiry_t *e, ixia_idx_t *idx, ixia_error_t **err);
/* The earliest scheduled expiry (epoch seconds), 0 when none. */
gint64 ixia_expiry_next(ixia_expiry_t *e);
/* Removes and returns the entries with expire_at <= now: a GPtrArray of
 * ixia_expiry_entry_t * that frees them; NULL when none is due. */
GPtrArray *ixia_expiry_due(ixia_expiry_t *e, gint64 now);
guint64 ixia_expiry_size(ixia_expiry_t *e);

/* Epoch seconds, the clock expiries are compared with (as the store's). */
gint64 ixia_expiry_now(void);

#endif
