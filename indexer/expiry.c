/* The expiry schedule (expiry.h): one entry per document, the earliest
 * expiry seen for it, in a binary min-heap by expire_at (a GPtrArray; each
 * entry knows its slot so that an earlier expiry moves it up), found by
 * its (ns, table, key) through a hash table. A mutex only because
 * searches read the minimum; the earliest expiry is also kept in an
 * atomic so that the check a search makes costs one load.
 *
 * Why one entry per document: an entry per applied put grew with the
 * writes within a TTL, not with the documents (a session written every
 * second with a day to live held 86,400 entries), and every backfill added
 * one per expiring document again. Keeping the earliest is always safe:
 * the reaper re-reads the record when the entry falls due and schedules it
 * again at the record's own expiry when that is later (indexer.c). */
#include "expiry.h"

#include <stdatomic.h>
#include <string.h>

#include "json.h"
#include "timeutil.h"

struct ixia_expiry {
  GMutex lock;
  GPtrArray *heap;     /* ixia_expiry_entry_t *, heap-ordered by expire_at */
  GHashTable *by_doc;  /* entry -> entry (hashed and compared by ns, table, key) */
  _Atomic gint64 next; /* heap[0]->expire_at, 0 when empty */
};

static void entry_free(gpointer p) {
  ixia_expiry_entry_t *en = p;
  g_free(en->ns);
  g_free(en->table);
  g_free(en->key);
  g_free(en);
}

static guint doc_hash(gconstpointer p) {
  const ixia_expiry_entry_t *en = p;
  guint h = g_str_hash(en->ns) * 31 + g_str_hash(en->table);
  for (size_t i = 0; i < en->key_len; i++) h = h * 31 + (guchar)en->key[i];
  return h;
}

static gboolean doc_equal(gconstpointer a, gconstpointer b) {
  const ixia_expiry_entry_t *x = a, *y = b;
  return x->key_len == y->key_len && memcmp(x->key, y->key, x->key_len) == 0 &&
         strcmp(x->table, y->table) == 0 && strcmp(x->ns, y->ns) == 0;
}

gint64 ixia_expiry_now(void) { return ixia_time_now(); }

ixia_expiry_t *ixia_expiry_new(void) {
  ixia_expiry_t *e = g_new0(ixia_expiry_t, 1);
  g_mutex_init(&e->lock);
  e->heap = g_ptr_array_new_with_free_func(entry_free);
  e->by_doc = g_hash_table_new(doc_hash, doc_equal);
  return e;
}

void ixia_expiry_destroy(ixia_expiry_t *e) {
  if (!e) return;
  g_hash_table_destroy(e->by_doc);
  g_ptr_array_unref(e->heap);
  g_mutex_clear(&e->lock);
  g_free(e);
}

static gint64 at(ixia_expiry_t *e, guint i) {
  return ((ixia_expiry_entry_t *)g_ptr_array_index(e->heap, i))->expire_at;
}

static void place(ixia_expiry_t *e, guint i, ixia_expiry_entry_t *en) {
  e->heap->pdata[i] = en;
  en->slot = i;
}

static void swap(ixia_expiry_t *e, guint i, guint j) {
  ixia_expiry_entry_t *t = e->heap->pdata[i];
  place(e, i, e->heap->pdata[j]);
  place(e, j, t);
}

static void sift_up(ixia_expiry_t *e, guint i) {
  for (; i > 0 && at(e, (i - 1) / 2) > at(e, i); i = (i - 1) / 2) swap(e, i, (i - 1) / 2);
}

static void sift_down(ixia_expiry_t *e, guint i) {
  guint n = e->heap->len;
  for (;;) {
    guint l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && at(e, l) < at(e, m)) m = l;
    if (r < n && at(e, r) < at(e, m)) m = r;
    if (m == i) break;
    swap(e, i, m);
    i = m;
  }
}

static void publish_next(ixia_expiry_t *e) {
  atomic_store_explicit(&e->next, e->heap->len ? at(e, 0) : 0, memory_order_release);
}

void ixia_expiry_add(ixia_expiry_t *e, const char *ns, const char *table, const char *key,
                     size_t key_len, gint64 expire_at) {
  if (expire_at <= 0) return;
  ixia_expiry_entry_t probe = {.ns = (char *)ns, .table = (char *)table, .key = (char *)key, .key_len = key_len};
  g_mutex_lock(&e->lock);
  ixia_expiry_entry_t *en = g_hash_table_lookup(e->by_doc, &probe);
  if (en) {
    /* Already scheduled: only an earlier expiry moves it. */
    if (expire_at < en->expire_at) {
      en->expire_at = expire_at;
      sift_up(e, en->slot);
    }
  } else {
    en = g_new(ixia_expiry_entry_t, 1);
    en->expire_at = expire_at;
    en->ns = g_strdup(ns);
    en->table = g_strdup(table);
    en->key = ixia_memdup0(key, key_len); /* (keys may hold NUL bytes) */
    en->key_len = key_len;
    g_ptr_array_add(e->heap, NULL);
    place(e, e->heap->len - 1, en);
    g_hash_table_add(e->by_doc, en);
    sift_up(e, en->slot);
  }
  publish_next(e);
  g_mutex_unlock(&e->lock);
}

/* Removes the minimum (caller holds the lock). */
static ixia_expiry_entry_t *pop(ixia_expiry_t *e) {
  guint n = e->heap->len;
  ixia_expiry_entry_t *top = e->heap->pdata[0];
  if (n > 1) place(e, 0, e->heap->pdata[n - 1]);
  g_ptr_array_steal_index(e->heap, n - 1);
  if (n > 1) sift_down(e, 0);
  g_hash_table_remove(e->by_doc, top);
  return top;
}

GPtrArray *ixia_expiry_due(ixia_expiry_t *e, gint64 now) {
  gint64 next = atomic_load_explicit(&e->next, memory_order_acquire);
  if (next == 0 || next > now) return NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func(entry_free);
  g_mutex_lock(&e->lock);
  while (e->heap->len && at(e, 0) <= now) g_ptr_array_add(out, pop(e));
  publish_next(e);
  g_mutex_unlock(&e->lock);
  return out;
}

gint64 ixia_expiry_next(ixia_expiry_t *e) { return atomic_load_explicit(&e->next, memory_order_acquire); }

guint64 ixia_expiry_size(ixia_expiry_t *e) {
  g_mutex_lock(&e->lock);
  guint64 n = e->heap->len;
  g_mutex_unlock(&e->lock);
  return n;
}

static void load_one(const char *ns, const char *table, const char *key, size_t key_len,
                     gint64 expire_at, void *ud) {
  ixia_expiry_add(ud, ns, table, key, key_len, expire_at);
}

gboolean ixia_expiry_load(ixia_expiry_t *e, ixia_idx_t *idx, ixia_error_t **err) {
  return ixia_idx_foreach_expiring(idx, load_one, e, err);
}
