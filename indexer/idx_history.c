/* What documents looked like before recent batches: the memory that keeps a
 * sorted cursor stable while writers change the sorted fields.
 *
 * A sorted page is read "after" the previous page's last sort values
 * (search_after). If a document's sort value changed between two pages it
 * would move across the cursor and be returned twice or never. So a paging
 * session keeps positions as of its first page: the first page records the
 * shard's publish sequence (as_of, a counter of published batches), and
 * every page positions a document by its values as of that sequence. The
 * apply thread records, for every document a batch changes, the indexed
 * values it had before (its record's pairs, text fields left out), under
 * the batch's sequence number, before the batch is published; a search
 * looks up the documents changed after its as_of and sorts them by their
 * old values. A document created after as_of is positioned by its first
 * values. Which documents match is still decided on current values (and
 * every hit is verified against the truth store), so a document deleted or
 * changed out of the filter meanwhile is not returned, and one present
 * before paging began and still matching is returned exactly once.
 *
 * Entries are kept for index.sort_history_seconds and within
 * index.sort_history_mb, oldest dropped first; a cursor older than the
 * oldest dropped entry, or from before the shard was opened (a random epoch
 * per open), is refused with a message that says to start paging again,
 * as an expired point-in-time is in Elasticsearch.
 *
 * Thread safety: one writer (the apply thread), any number of searches;
 * one mutex. */
#include <string.h>

#include "idx.h"

typedef struct {
  guint64 seq;
  gint64 at_us;
  guint32 id;
  gboolean was_live;
  guint n;
  pair_t *pairs;
} hentry_t;

struct ixia_idx_history {
  GMutex lock;
  GQueue entries;   /* hentry_t*, in seq order */
  GHashTable *docs; /* id -> GQueue* of that document's entries (borrowed), in order */
  gsize bytes, max_bytes;
  gint64 max_age_us;
  guint64 horizon; /* entries with seq <= horizon may be gone */
  guint64 epoch;
};

static void queue_free(gpointer q) { g_queue_free(q); }

ixia_idx_history_t *ixia_idx_history_new(gsize max_bytes, gint64 max_age_us, guint64 epoch) {
  ixia_idx_history_t *h = g_new0(ixia_idx_history_t, 1);
  g_mutex_init(&h->lock);
  g_queue_init(&h->entries);
  h->docs = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, queue_free);
  h->max_bytes = max_bytes;
  h->max_age_us = max_age_us;
  h->epoch = epoch;
  return h;
}

static void entry_free(hentry_t *e) {
  g_free(e->pairs);
  g_free(e);
}

void ixia_idx_history_destroy(ixia_idx_history_t *h) {
  if (!h) return;
  g_hash_table_destroy(h->docs);
  g_queue_clear_full(&h->entries, (GDestroyNotify)entry_free);
  g_mutex_clear(&h->lock);
  g_free(h);
}

guint64 ixia_idx_history_epoch(ixia_idx_history_t *h) { return h->epoch; }

static gsize entry_bytes(const hentry_t *e) { return sizeof *e + 64 + (gsize)e->n * sizeof(pair_t); }

/* Caller holds the lock. */
static void prune(ixia_idx_history_t *h, gint64 now) {
  while (h->entries.head) {
    hentry_t *e = h->entries.head->data;
    if (h->bytes <= h->max_bytes && now - e->at_us <= h->max_age_us) break;
    g_queue_pop_head(&h->entries);
    GQueue *dq = g_hash_table_lookup(h->docs, GUINT_TO_POINTER(e->id));
    if (dq) {
      g_queue_remove(dq, e); /* its first entry */
      if (g_queue_is_empty(dq)) g_hash_table_remove(h->docs, GUINT_TO_POINTER(e->id));
    }
    h->bytes -= entry_bytes(e);
    h->horizon = MAX(h->horizon, e->seq);
    entry_free(e);
  }
}

void ixia_idx_history_add(ixia_idx_history_t *h, guint64 seq, guint32 id, const pair_t *old,
                          guint n, gboolean was_live) {
  hentry_t *e = g_new(hentry_t, 1);
  gint64 now = g_get_monotonic_time();
  *e = (hentry_t){seq, now, id, was_live, n, n ? g_memdup2(old, n * sizeof(pair_t)) : NULL};
  g_mutex_lock(&h->lock);
  g_queue_push_tail(&h->entries, e);
  GQueue *dq = g_hash_table_lookup(h->docs, GUINT_TO_POINTER(id));
  if (!dq) {
    dq = g_queue_new();
    g_hash_table_insert(h->docs, GUINT_TO_POINTER(id), dq);
  }
  g_queue_push_tail(dq, e);
  h->bytes += entry_bytes(e);
  prune(h, now);
  g_mutex_unlock(&h->lock);
}

static void hstate_free(gpointer p) {
  hstate_t *s = p;
  g_free(s->pairs);
  g_free(s);
}

GHashTable *ixia_idx_history_since(ixia_idx_history_t *h, guint64 epoch, guint64 as_of,
                                   guint64 max_changes, gboolean *over, ixia_error_t **err) {
  if (over) *over = FALSE;
  g_mutex_lock(&h->lock);
  if (epoch != h->epoch || as_of < h->horizon) {
    gboolean restarted = epoch != h->epoch;
    g_mutex_unlock(&h->lock);
    ixia_error_set(err, IXIA_EINVAL,
                   restarted ? "after: the cursor's positions are from before this index shard "
                               "restarted; start again from the first page"
                             : "after: the cursor is older than the sort history this index shard "
                               "keeps (index.sort_history_seconds, index.sort_history_mb); start "
                               "again from the first page");
    return NULL;
  }
  GHashTable *out = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, hstate_free);
  /* Newest first: the first entry after as_of is met last, so each
   * document ends with the state it had at as_of. */
  guint64 seen = 0;
  for (GList *l = h->entries.tail; l; l = l->prev) {
    hentry_t *e = l->data;
    if (e->seq <= as_of) break;
    if (max_changes && ++seen > max_changes) {
      if (over) *over = TRUE;
      break;
    }
    hstate_t *s = g_hash_table_lookup(out, GUINT_TO_POINTER(e->id));
    if (!s) {
      s = g_new0(hstate_t, 1);
      s->current = TRUE; /* absent at as_of and ever since it changed: its values now */
      g_hash_table_insert(out, GUINT_TO_POINTER(e->id), s);
    }
    if (!e->was_live) continue; /* created after as_of: an older state, if any, stays */
    g_free(s->pairs);
    s->current = FALSE;
    s->n = e->n;
    s->pairs = e->n ? g_memdup2(e->pairs, e->n * sizeof(pair_t)) : NULL;
  }
  g_mutex_unlock(&h->lock);
  return out;
}
