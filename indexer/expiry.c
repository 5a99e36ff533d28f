/* The expiry schedule (expiry.h): a binary min-heap of entries by
 * expire_at in a GPtrArray, under a mutex only because searches read its
 * minimum; the earliest expiry is also kept in an atomic so that the
 * check a search makes costs one load. */
#include "expiry.h"

#include <stdatomic.h>
#include <string.h>

#include "timeutil.h"

struct ixia_expiry {
  GMutex lock;
  GPtrArray *heap; /* ixia_expiry_entry_t *, heap-ordered by expire_at */
  _Atomic gint64 next; /* heap[0]->expire_at, 0 when empty */
};

static void entry_free(gpointer p) {
  ixia_expiry_entry_t *en = p;
  g_free(en->ns);
  g_free(en->table);
  g_free(en->key);
  g_free(en);
}

gint64 ixia_expiry_now(void) { return ixia_time_now(); }

ixia_expiry_t *ixia_expiry_new(void) {
  ixia_expiry_t *e = g_new0(ixia_expiry_t, 1);
  g_mutex_init(&e->lock);
  e->heap = g_ptr_array_new_with_free_func(entry_free);
  return e;
}

void ixia_expiry_destroy(ixia_expiry_t *e) {
  if (!e) return;
  g_ptr_array_unref(e->heap);
  g_mutex_clear(&e->lock);
  g_free(e);
}

static gint64 at(ixia_expiry_t *e, guint i) {
  return ((ixia_expiry_entry_t *)g_ptr_array_index(e->heap, i))->expire_at;
}

static void swap(ixia_expiry_t *e, guint i, guint j) {
  gpointer t = e->heap->pdata[i];
  e->heap->pdata[i] = e->heap->pdata[j];
  e->heap->pdata[j] = t;
}

static void publish_next(ixia_expiry_t *e) {
  atomic_store_explicit(&e->next, e->heap->len ? at(e, 0) : 0, memory_order_release);
}

void ixia_expiry_add(ixia_expiry_t *e, const char *ns, const char *table, const char *key,
                     size_t key_len, gint64 expire_at) {
  if (expire_at <= 0) return;
  ixia_expiry_entry_t *en = g_new(ixia_expiry_entry_t, 1);
  en->expire_at = expire_at;
  en->ns = g_strdup(ns);
  en->table = g_strdup(table);
  en->key = g_strndup(key, key_len);
  en->key_len = key_len;
  g_mutex_lock(&e->lock);
  g_ptr_array_add(e->heap, en);
  for (guint i = e->heap->len - 1; i > 0 && at(e, (i - 1) / 2) > at(e, i); i = (i - 1) / 2)
    swap(e, i, (i - 1) / 2);
  publish_next(e);
  g_mutex_unlock(&e->lock);
}

/* Removes the minimum (caller holds the lock). */
static ixia_expiry_entry_t *pop(ixia_expiry_t *e) {
  guint n = e->heap->len;
  ixia_expiry_entry_t *top = e->heap->pdata[0];
  e->heap->pdata[0] = e->heap->pdata[n - 1];
  g_ptr_array_steal_index(e->heap, n - 1);
  n--;
  for (guint i = 0;;) {
    guint l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && at(e, l) < at(e, m)) m = l;
    if (r < n && at(e, r) < at(e, m)) m = r;
    if (m == i) break;
    swap(e, i, m);
    i = m;
  }
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
