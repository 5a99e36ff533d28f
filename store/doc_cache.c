/* The store's document cache (doc_cache.h): stored values by RocksDB key,
 * so that a get or a page of query hits finds a hot document with one hash
 * lookup instead of RocksDB's read path.
 *
 * Why: RocksDB's row cache answers a key only after the read path has
 * picked each level's file and checked its bloom filter, and builds a
 * cache key per file; a page of 100 hits spent 38% of the API's CPU in
 * MultiGet (about 2.2 us a key) with every document in memory. Here a hit
 * costs a stripe lock and a hash probe.
 *
 * Shape: NSTRIPES stripes chosen by the key's hash, each a hash table, an
 * LRU list and a byte budget (max_bytes / NSTRIPES), under its own mutex.
 * Values are refcounted GBytes, so a reader keeps a value after the lock
 * is released and an eviction or a write cannot pull it away.
 *
 * Consistency: the cache never holds a value older than what RocksDB holds
 * once a write has returned. A stripe counts writes under way (`writing`)
 * and bumps a generation when one begins; write_begin also drops the key's
 * entry. A reader that misses takes a ticket (the generation, or
 * NO_TICKET while a write of the stripe is under way), reads RocksDB, and
 * inserts only if the generation is still its ticket: any write of the key
 * that could have overtaken its read began after the ticket and bumped the
 * generation. Readers during a write read RocksDB (which orders them) and
 * insert nothing; a hit during a write cannot happen, its key was dropped
 * first. Expiry is the readers' business: a cached value carries its
 * expiry like the stored one.
 *
 * Write-through (store.doc_cache_writes): write_end may also cache the value
 * just written. It is the newest value of its key (one writer, and a later
 * write's write_begin drops it), so gets of recent writes, and a whole bulk
 * load that fits the budget, are answered from here without a first miss. */
#include "doc_cache.h"

#include <string.h>

#define NSTRIPES 64
/* Bookkeeping per entry beyond the key and value bytes: the entry (64),
 * the GBytes (~32), the hash table's three slot arrays (~24 at its load)
 * and two allocations' headers and rounding. */
#define ENTRY_OVERHEAD 192

typedef struct {
  const guint8 *p;
  gsize len;
  guint64 hash;
} kref_t;

typedef struct {
  kref_t k; /* k.p points into key[] */
  GBytes *val;
  GList link; /* in the stripe's lru, head = most recent */
  gsize cost;
  guint8 key[];
} entry_t;

typedef struct {
  GMutex lock;
  GHashTable *map; /* kref_t* (the entry's own) -> entry_t* */
  GQueue lru;
  guint64 bytes, gen;
  guint writing;
  guint64 hits, misses, inserts, evictions;
} stripe_t;

struct ixia_doccache {
  guint64 max_bytes, stripe_bytes;
  stripe_t stripes[NSTRIPES];
};

static guint64 key_hash(const guint8 *p, gsize n) {
  guint64 h = G_GUINT64_CONSTANT(0xcbf29ce484222325);
  for (gsize i = 0; i < n; i++) h = (h ^ p[i]) * G_GUINT64_CONSTANT(0x100000001b3);
  /* FNV-1a alone leaves the high bits (the stripe) nearly blind to the last
   * bytes: keys "k0".."k2999" fell in 15 of the 64 stripes. MurmurHash3's
   * finaliser spreads every input bit over all 64. */
  h ^= h >> 33;
  h *= G_GUINT64_CONSTANT(0xff51afd7ed558ccd);
  h ^= h >> 33;
  h *= G_GUINT64_CONSTANT(0xc4ceb9fe1a85ec53);
  return h ^ (h >> 33);
}

static guint kref_hash(gconstpointer k) { return (guint)((const kref_t *)k)->hash; }

static gboolean kref_equal(gconstpointer a, gconstpointer b) {
  const kref_t *x = a, *y = b;
  return x->hash == y->hash && x->len == y->len && memcmp(x->p, y->p, x->len) == 0;
}

static void entry_free(entry_t *e) {
  g_bytes_unref(e->val);
  g_free(e);
}

ixia_doccache_t *ixia_doccache_new(guint64 max_bytes) {
  if (max_bytes == 0) return NULL;
  ixia_doccache_t *c = g_new0(ixia_doccache_t, 1);
  c->max_bytes = max_bytes;
  c->stripe_bytes = MAX(max_bytes / NSTRIPES, 1);
  for (guint i = 0; i < NSTRIPES; i++) {
    g_mutex_init(&c->stripes[i].lock);
    c->stripes[i].map = g_hash_table_new(kref_hash, kref_equal);
    g_queue_init(&c->stripes[i].lru);
  }
  return c;
}

void ixia_doccache_destroy(ixia_doccache_t *c) {
  if (!c) return;
  for (guint i = 0; i < NSTRIPES; i++) {
    stripe_t *st = &c->stripes[i];
    for (GList *l = st->lru.head; l;) {
      GList *next = l->next;
      entry_free(l->data);
      l = next;
    }
    g_hash_table_destroy(st->map);
    g_mutex_clear(&st->lock);
  }
  g_free(c);
}

static stripe_t *stripe_of(ixia_doccache_t *c, const kref_t *k) {
  return &c->stripes[(k->hash >> 32) % NSTRIPES];
}

static void drop(stripe_t *st, entry_t *e) {
  g_hash_table_remove(st->map, &e->k);
  g_queue_unlink(&st->lru, &e->link);
  st->bytes -= e->cost;
  entry_free(e);
}

GBytes *ixia_doccache_lookup(ixia_doccache_t *c, const void *key, gsize klen, guint64 *ticket) {
  *ticket = IXIA_DOCCACHE_NO_TICKET;
  if (!c) return NULL;
  kref_t k = {key, klen, key_hash(key, klen)};
  stripe_t *st = stripe_of(c, &k);
  g_mutex_lock(&st->lock);
  entry_t *e = g_hash_table_lookup(st->map, &k);
  GBytes *v = NULL;
  if (e) {
    g_queue_unlink(&st->lru, &e->link);
    g_queue_push_head_link(&st->lru, &e->link);
    v = g_bytes_ref(e->val);
    st->hits++;
  } else {
    if (st->writing == 0) *ticket = st->gen;
    st->misses++;
  }
  g_mutex_unlock(&st->lock);
  return v;
}

/* An entry for key holding val (a reference taken), built outside any
 * lock; NULL when it could never fit a stripe. */
static entry_t *entry_new(ixia_doccache_t *c, const void *key, gsize klen, GBytes *val) {
  gsize cost = klen + g_bytes_get_size(val) + ENTRY_OVERHEAD;
  if (cost > c->stripe_bytes) return NULL;
  entry_t *e = g_malloc(sizeof *e + klen);
  memcpy(e->key, key, klen);
  e->k = (kref_t){e->key, klen, key_hash(key, klen)};
  e->val = g_bytes_ref(val);
  e->link = (GList){e, NULL, NULL};
  e->cost = cost;
  return e;
}

/* Under st's lock: e becomes the most recent entry, the least recent ones
 * make room. */
static void admit(ixia_doccache_t *c, stripe_t *st, entry_t *e) {
  g_hash_table_insert(st->map, &e->k, e);
  g_queue_push_head_link(&st->lru, &e->link);
  st->bytes += e->cost;
  st->inserts++;
  while (st->bytes > c->stripe_bytes) {
    drop(st, st->lru.tail->data);
    st->evictions++;
  }
}

GBytes *ixia_doccache_insert(ixia_doccache_t *c, const void *key, gsize klen, const void *value,
                             gsize vlen, guint64 ticket) {
  if (!c || ticket == IXIA_DOCCACHE_NO_TICKET) return NULL;
  if (klen + vlen + ENTRY_OVERHEAD > c->stripe_bytes) return NULL; /* before copying it */
  /* Built outside the lock: the copy is the expensive part. */
  GBytes *copy = g_bytes_new(value, vlen);
  entry_t *e = entry_new(c, key, klen, copy);
  g_bytes_unref(copy);
  if (!e) return NULL;
  stripe_t *st = stripe_of(c, &e->k);
  GBytes *out = NULL;
  g_mutex_lock(&st->lock);
  if (st->gen == ticket && st->writing == 0 && !g_hash_table_contains(st->map, &e->k)) {
    admit(c, st, e);
    out = g_bytes_ref(e->val);
    e = NULL;
  }
  g_mutex_unlock(&st->lock);
  if (e) entry_free(e);
  return out;
}

void ixia_doccache_write_begin(ixia_doccache_t *c, const void *key, gsize klen) {
  if (!c) return;
  kref_t k = {key, klen, key_hash(key, klen)};
  stripe_t *st = stripe_of(c, &k);
  g_mutex_lock(&st->lock);
  st->writing++;
  st->gen++;
  entry_t *e = g_hash_table_lookup(st->map, &k);
  if (e) drop(st, e);
  g_mutex_unlock(&st->lock);
}

void ixia_doccache_write_end(ixia_doccache_t *c, const void *key, gsize klen, GBytes *written) {
  if (!c) return;
  entry_t *e = written ? entry_new(c, key, klen, written) : NULL;
  kref_t k = e ? e->k : (kref_t){key, klen, key_hash(key, klen)};
  stripe_t *st = stripe_of(c, &k);
  g_mutex_lock(&st->lock);
  g_assert(st->writing > 0);
  /* The writer's own value is the newest there is: no ticket needed, and
   * no reader cached the key while the write was under way. */
  if (e) {
    entry_t *old = g_hash_table_lookup(st->map, &e->k);
    if (old) drop(st, old);
    admit(c, st, e);
  }
  st->writing--;
  g_mutex_unlock(&st->lock);
}

void ixia_doccache_get_stats(ixia_doccache_t *c, ixia_doccache_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (!c) return;
  out->max_bytes = c->max_bytes;
  for (guint i = 0; i < NSTRIPES; i++) {
    stripe_t *st = &c->stripes[i];
    g_mutex_lock(&st->lock);
    out->hits += st->hits;
    out->misses += st->misses;
    out->inserts += st->inserts;
    out->evictions += st->evictions;
    out->entries += g_hash_table_size(st->map);
    out->bytes += st->bytes;
    g_mutex_unlock(&st->lock);
  }
}
