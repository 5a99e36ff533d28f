/* The store's document cache (doc_cache.h): stored values by RocksDB key,
 * so that a get or a page of query hits finds a hot document with one hash
 * probe instead of RocksDB's read path.
 *
 * Why: RocksDB's row cache answers a key only after the read path has
 * picked each level's file and checked its bloom filter, and builds a
 * cache key per file; a page of 100 hits spent 38% of the API's CPU in
 * MultiGet (about 2.2 us a key) with every document in memory. Here a hit
 * costs a stripe lock and a hash probe.
 *
 * Shape: NSTRIPES stripes chosen by the key's hash, each an open-addressing
 * table, a FIFO of its entries and a byte budget (max_bytes / NSTRIPES),
 * under its own mutex. An entry holds its key and value in one allocation
 * and is refcounted: a reader gets a reference to the entry itself
 * (ixia_doccache_ref_t) that keeps it alive after the lock is released, so
 * an eviction or a write cannot pull it away.
 *
 * Why so: with a million documents cached, a page of 100 hits is bound by
 * memory latency, not instructions. GLib's hash table (hashes, keys and
 * values in three arrays), an LRU list relinked on every hit (its two
 * neighbours) and a GBytes apart from its data cost seven to nine cache
 * misses a hit: 24% of the API's CPU under a page of 100 (g_hash_table_lookup,
 * g_list_remove_link, the key compare). Here a slot holds the hash beside
 * the entry pointer, a hit only sets the entry's `referenced` bit (second-
 * chance FIFO, which approximates LRU: an entry read since it last reached
 * the FIFO's end is moved back to its start instead of being evicted), and
 * ixia_doccache_lookup_many probes a whole page in three passes that
 * prefetch the slots, then the entries, before reading them, so the misses
 * of different keys overlap instead of queueing.
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
 * Member tables: an entry also lists the top-level members of the stored
 * document (ixia_json_member_table), built once when the entry is, so that
 * a page of query hits projects its fields from the table instead of
 * scanning each document's text; it sits right after the header, in the
 * lines a page's lookup prefetches.
 *
 * Write-through (store.doc_cache_writes): write_end may also cache the value
 * just written. It is the newest value of its key (one writer, and a later
 * write's write_begin drops it), so gets of recent writes, and a whole bulk
 * load that fits the budget, are answered from here without a first miss. */
#include "doc_cache.h"

#include <stdatomic.h>
#include <string.h>

#include "json.h"
#include "record.h"

#define NSTRIPES 64
/* Bookkeeping per entry beyond the key and value bytes: the entry's header
 * (64) and the allocator's rounding. The slot arrays are counted as they
 * are (a stripe's bytes include its table). */
#define ENTRY_OVERHEAD 80
/* A stripe's table starts with this many slots, doubles at half full and
 * shrinks to a quarter full below an eighth, so it holds between 2 and 8
 * slots (32 to 128 bytes) per entry once it has grown. */
#define MIN_SLOTS 16

/* The entry is what a reference points at (ixia_doccache_ref_t). */
typedef struct ixia_doccache_ref {
  GList link; /* in the stripe's fifo: head = newest */
  guint64 hash;
  gsize cost;
  gatomicrefcount refs; /* the stripe's, while cached, and one per view */
  guint32 klen, vlen;
  gboolean referenced; /* read since it last passed the fifo's tail */
  guint16 n_members;   /* entries of the member table (0: none) */
  guint32 json_off;    /* where the document's text starts in the value */
  guint8 bytes[];      /* the member table, then the key and the value */
} entry_t;

/* Where the key starts: after the member table, which sits right after the
 * header, in the lines a page's lookup prefetches with it (at the entry's
 * end, past a 1 KB value, it was one more cache miss a hit). */
static inline const guint8 *entry_key(const entry_t *e) {
  return e->bytes + (gsize)e->n_members * IXIA_JSON_MEMBER_WORDS * sizeof(guint16);
}

/* Top-level members a table is built for; a document with more is walked. */
#define MAX_MEMBERS 64

typedef struct {
  guint64 hash;
  entry_t *e; /* NULL: empty */
} slot_t;

typedef struct {
  GMutex lock;
  /* Written under the lock; read without it only to prefetch (see
   * lookup_many), hence atomic. */
  _Atomic(slot_t *) slots;
  _Atomic gsize mask; /* slots - 1, a power of two minus one */
  gsize count;
  GQueue fifo;
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

/* The stripe is chosen by the high half of the hash, the slot by the low
 * half, so the two are independent. */
static stripe_t *stripe_of(ixia_doccache_t *c, guint64 hash) { return &c->stripes[(hash >> 32) % NSTRIPES]; }

static void entry_unref(gpointer p) {
  entry_t *e = p;
  if (g_atomic_ref_count_dec(&e->refs)) g_free(e);
}

/* A reader's reference to e. */
static ixia_doccache_ref_t *entry_ref(entry_t *e) {
  g_atomic_ref_count_inc(&e->refs);
  return e;
}

const void *ixia_doccache_value(const ixia_doccache_ref_t *r, gsize *len) {
  *len = r->vlen;
  return entry_key(r) + r->klen;
}

const guint16 *ixia_doccache_members(const ixia_doccache_ref_t *r, gsize *json_off, guint *n) {
  *n = r->n_members;
  *json_off = r->json_off;
  return r->n_members ? (const guint16 *)(const void *)r->bytes : NULL;
}

void ixia_doccache_release(ixia_doccache_ref_t *r) {
  if (r) entry_unref(r);
}

/* ---- the table: linear probing, deletion by backward shift ---- */

/* Under st's lock: the slot index holding key, or -1. */
static gssize table_find(const stripe_t *st, guint64 hash, const void *key, gsize klen) {
  slot_t *slots = atomic_load_explicit(&st->slots, memory_order_relaxed);
  gsize mask = atomic_load_explicit(&st->mask, memory_order_relaxed);
  for (gsize i = hash & mask;; i = (i + 1) & mask) {
    const slot_t *s = &slots[i];
    if (!s->e) return -1;
    if (s->hash == hash && s->e->klen == klen && memcmp(entry_key(s->e), key, klen) == 0) return (gssize)i;
  }
}

/* Under st's lock: places e in the first free slot of its probe sequence
 * (the caller knows its key is absent). */
static void table_place(slot_t *slots, gsize mask, entry_t *e) {
  gsize i = e->hash & mask;
  while (slots[i].e) i = (i + 1) & mask;
  slots[i] = (slot_t){e->hash, e};
}

/* Under st's lock: the table rebuilt with nmask + 1 slots; the stripe's
 * bytes follow the array's size. */
static void table_resize(stripe_t *st, gsize nmask) {
  slot_t *slots = atomic_load_explicit(&st->slots, memory_order_relaxed);
  gsize mask = atomic_load_explicit(&st->mask, memory_order_relaxed);
  slot_t *ns = g_new0(slot_t, nmask + 1);
  for (gsize i = 0; i <= mask; i++)
    if (slots[i].e) table_place(ns, nmask, slots[i].e);
  atomic_store_explicit(&st->slots, ns, memory_order_relaxed);
  atomic_store_explicit(&st->mask, nmask, memory_order_relaxed);
  /* A reader prefetching without the lock may still hold the old array's
   * address: prefetching freed memory is harmless, reading it is not, and
   * nothing reads slots without the lock. */
  g_free(slots);
  st->bytes = st->bytes - (mask + 1) * sizeof(slot_t) + (nmask + 1) * sizeof(slot_t);
}

static void table_add(stripe_t *st, entry_t *e) {
  gsize mask = atomic_load_explicit(&st->mask, memory_order_relaxed);
  if ((st->count + 1) * 2 > mask + 1) {
    table_resize(st, (mask + 1) * 2 - 1);
    mask = atomic_load_explicit(&st->mask, memory_order_relaxed);
  }
  table_place(atomic_load_explicit(&st->slots, memory_order_relaxed), mask, e);
  st->count++;
}

/* Empties slot i and moves later members of its cluster back, so every
 * probe sequence stays unbroken without tombstones; a table left under an
 * eighth full shrinks to a quarter. */
static void table_remove_at(stripe_t *st, gsize i) {
  slot_t *slots = atomic_load_explicit(&st->slots, memory_order_relaxed);
  gsize mask = atomic_load_explicit(&st->mask, memory_order_relaxed);
  gsize hole = i;
  for (gsize j = (i + 1) & mask; slots[j].e; j = (j + 1) & mask) {
    gsize home = slots[j].hash & mask;
    /* j's entry may fill the hole when its home is not in (hole, j]. */
    gboolean stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!stays) {
      slots[hole] = slots[j];
      hole = j;
    }
  }
  slots[hole] = (slot_t){0, NULL};
  st->count--;
  if (mask + 1 > MIN_SLOTS && st->count * 8 < mask + 1) {
    gsize n = MIN_SLOTS;
    while (n < st->count * 4) n *= 2;
    table_resize(st, n - 1);
  }
}

/* ---- stripes ---- */

ixia_doccache_t *ixia_doccache_new(guint64 max_bytes) {
  if (max_bytes == 0) return NULL;
  ixia_doccache_t *c = g_new0(ixia_doccache_t, 1);
  c->max_bytes = max_bytes;
  c->stripe_bytes = MAX(max_bytes / NSTRIPES, 1);
  for (guint i = 0; i < NSTRIPES; i++) {
    stripe_t *st = &c->stripes[i];
    g_mutex_init(&st->lock);
    atomic_init(&st->slots, g_new0(slot_t, MIN_SLOTS));
    atomic_init(&st->mask, (gsize)MIN_SLOTS - 1);
    st->bytes = MIN_SLOTS * sizeof(slot_t);
    g_queue_init(&st->fifo);
  }
  return c;
}

void ixia_doccache_destroy(ixia_doccache_t *c) {
  if (!c) return;
  for (guint i = 0; i < NSTRIPES; i++) {
    stripe_t *st = &c->stripes[i];
    for (GList *l = st->fifo.head; l;) {
      GList *next = l->next;
      entry_unref(l->data);
      l = next;
    }
    g_free(atomic_load(&st->slots));
    g_mutex_clear(&st->lock);
  }
  g_free(c);
}

/* Under st's lock: the entry in slot i leaves the cache. */
static void drop_at(stripe_t *st, gsize i) {
  slot_t *slots = atomic_load_explicit(&st->slots, memory_order_relaxed);
  entry_t *e = slots[i].e;
  table_remove_at(st, i);
  g_queue_unlink(&st->fifo, &e->link);
  st->bytes -= e->cost;
  entry_unref(e);
}

/* Under st's lock: a hit. */
static ixia_doccache_ref_t *hit(stripe_t *st, gsize i) {
  slot_t *slots = atomic_load_explicit(&st->slots, memory_order_relaxed);
  entry_t *e = slots[i].e;
  e->referenced = TRUE;
  st->hits++;
  return entry_ref(e);
}

ixia_doccache_ref_t *ixia_doccache_lookup(ixia_doccache_t *c, const void *key, gsize klen,
                                          guint64 *ticket) {
  *ticket = IXIA_DOCCACHE_NO_TICKET;
  if (!c) return NULL;
  guint64 h = key_hash(key, klen);
  stripe_t *st = stripe_of(c, h);
  g_mutex_lock(&st->lock);
  gssize i = table_find(st, h, key, klen);
  ixia_doccache_ref_t *v = NULL;
  if (i >= 0) {
    v = hit(st, (gsize)i);
  } else {
    if (st->writing == 0) *ticket = st->gen;
    st->misses++;
  }
  g_mutex_unlock(&st->lock);
  return v;
}

/* Keys probed together: enough to overlap the misses, few enough that the
 * lines prefetched by the first pass are still cached in the third. */
#define PROBE_GROUP 32

static void lookup_group(ixia_doccache_t *c, guint n, const char *const *keys, const size_t *klens,
                         ixia_doccache_ref_t **out, guint64 *tickets) {
  guint64 hs[PROBE_GROUP];
  /* Pass 1: the home slot of every key (the array's address read without
   * the lock: a stale one only wastes the prefetch). */
  for (guint i = 0; i < n; i++) {
    hs[i] = key_hash((const guint8 *)keys[i], klens[i]);
    stripe_t *st = stripe_of(c, hs[i]);
    /* The address is computed as an integer: the array and the mask are
     * read apart and may not match, and a prefetch never faults. */
    guintptr slots = (guintptr)atomic_load_explicit(&st->slots, memory_order_relaxed);
    gsize mask = atomic_load_explicit(&st->mask, memory_order_relaxed);
    __builtin_prefetch((const void *)(slots + (hs[i] & mask) * sizeof(slot_t)));
  }
  /* Pass 2: the entries those slots point at (key and the value's start). */
  for (guint i = 0; i < n; i++) {
    stripe_t *st = stripe_of(c, hs[i]);
    g_mutex_lock(&st->lock);
    slot_t *slots = atomic_load_explicit(&st->slots, memory_order_relaxed);
    gsize mask = atomic_load_explicit(&st->mask, memory_order_relaxed);
    for (gsize j = hs[i] & mask; slots[j].e; j = (j + 1) & mask)
      if (slots[j].hash == hs[i]) {
        __builtin_prefetch(slots[j].e);
        /* (The member table and the key follow the header: the lines
         * after it hold them and the document's first members.) */
        for (int l = 1; l < 4; l++) __builtin_prefetch((const char *)slots[j].e + 64 * l);
        break;
      }
    g_mutex_unlock(&st->lock);
  }
  /* Pass 3: the lookups themselves, from cached lines. */
  for (guint i = 0; i < n; i++) {
    stripe_t *st = stripe_of(c, hs[i]);
    tickets[i] = IXIA_DOCCACHE_NO_TICKET;
    out[i] = NULL;
    g_mutex_lock(&st->lock);
    gssize j = table_find(st, hs[i], keys[i], klens[i]);
    if (j >= 0) {
      out[i] = hit(st, (gsize)j);
    } else {
      if (st->writing == 0) tickets[i] = st->gen;
      st->misses++;
    }
    g_mutex_unlock(&st->lock);
  }
}

void ixia_doccache_lookup_many(ixia_doccache_t *c, guint n, const char *const *keys,
                               const size_t *klens, ixia_doccache_ref_t **out, guint64 *tickets) {
  if (!c) {
    for (guint i = 0; i < n; i++) out[i] = NULL, tickets[i] = IXIA_DOCCACHE_NO_TICKET;
    return;
  }
  for (guint i = 0; i < n; i += PROBE_GROUP)
    lookup_group(c, MIN(n - i, PROBE_GROUP), keys + i, klens + i, out + i, tickets + i);
}

/* An entry for key holding a copy of the value, built outside any lock;
 * NULL when it could never fit a stripe. */
static entry_t *entry_new(ixia_doccache_t *c, const void *key, gsize klen, const void *value,
                          gsize vlen) {
  /* The stored document's member table (ixia_json_member_table), built
   * once here: a page's projection then reads it instead of scanning the
   * text (the scan was ~17% of the API's CPU on a page of 100). */
  guint16 members[IXIA_JSON_MEMBER_WORDS * MAX_MEMBERS];
  gint64 version, expire_at;
  const char *json = NULL;
  size_t json_len = 0;
  guint n = ixia_record_parse_value((const char *)value, vlen, &version, &expire_at, &json, &json_len)
                ? ixia_json_member_table(json, json_len, members, MAX_MEMBERS)
                : 0;
  gsize table_bytes = n * IXIA_JSON_MEMBER_WORDS * sizeof(guint16);
  gsize cost = table_bytes + klen + vlen + ENTRY_OVERHEAD;
  /* It must fit a stripe beside the smallest table. */
  if (cost + MIN_SLOTS * sizeof(slot_t) > c->stripe_bytes || klen > G_MAXUINT32 || vlen > G_MAXUINT32)
    return NULL;
  entry_t *e = g_malloc(sizeof *e + table_bytes + klen + vlen);
  if (n) memcpy(e->bytes, members, table_bytes);
  memcpy(e->bytes + table_bytes, key, klen);
  if (vlen) memcpy(e->bytes + table_bytes + klen, value, vlen);
  e->n_members = (guint16)n;
  e->json_off = n ? (guint32)(json - (const char *)value) : 0;
  e->link = (GList){e, NULL, NULL};
  e->hash = key_hash(key, klen);
  e->cost = cost;
  g_atomic_ref_count_init(&e->refs);
  e->klen = (guint32)klen;
  e->vlen = (guint32)vlen;
  e->referenced = FALSE;
  return e;
}

/* Under st's lock: e (absent until now) becomes the newest entry; the
 * oldest entries not read since they last reached the fifo's end make
 * room, the read ones going back to its start. */
static void admit(ixia_doccache_t *c, stripe_t *st, entry_t *e) {
  table_add(st, e);
  g_queue_push_head_link(&st->fifo, &e->link);
  st->bytes += e->cost;
  st->inserts++;
  /* A scan that finds every entry read since its last pass sends them all
   * back before it evicts one: O(entries) under the lock now and then, O(1)
   * amortised (each pass clears a mark). */
  while (st->bytes > c->stripe_bytes && st->fifo.length > 1) {
    entry_t *old = st->fifo.tail->data;
    /* e itself is never the one to go (it fits the budget alone): it can
     * reach the tail when the entries before it went back to the start. */
    if (old->referenced || old == e) {
      old->referenced = FALSE;
      g_queue_unlink(&st->fifo, &old->link);
      g_queue_push_head_link(&st->fifo, &old->link);
      continue;
    }
    gssize i = table_find(st, old->hash, entry_key(old), old->klen);
    g_assert(i >= 0); /* every entry of the fifo is in the table */
    drop_at(st, (gsize)i);
    st->evictions++;
  }
}

ixia_doccache_ref_t *ixia_doccache_insert(ixia_doccache_t *c, const void *key, gsize klen,
                                          const void *value, gsize vlen, guint64 ticket) {
  if (!c || ticket == IXIA_DOCCACHE_NO_TICKET) return NULL;
  /* Built outside the lock: the copy is the expensive part. */
  entry_t *e = entry_new(c, key, klen, value, vlen);
  if (!e) return NULL;
  stripe_t *st = stripe_of(c, e->hash);
  ixia_doccache_ref_t *out = NULL;
  g_mutex_lock(&st->lock);
  if (st->gen == ticket && st->writing == 0 && table_find(st, e->hash, key, klen) < 0) {
    admit(c, st, e);
    out = entry_ref(e);
    e = NULL;
  }
  g_mutex_unlock(&st->lock);
  if (e) entry_unref(e);
  return out;
}

void ixia_doccache_write_begin(ixia_doccache_t *c, const void *key, gsize klen) {
  if (!c) return;
  guint64 h = key_hash(key, klen);
  stripe_t *st = stripe_of(c, h);
  g_mutex_lock(&st->lock);
  st->writing++;
  st->gen++;
  gssize i = table_find(st, h, key, klen);
  if (i >= 0) drop_at(st, (gsize)i);
  g_mutex_unlock(&st->lock);
}

void ixia_doccache_write_end(ixia_doccache_t *c, const void *key, gsize klen, GBytes *written) {
  if (!c) return;
  entry_t *e = NULL;
  if (written) {
    gsize vlen;
    const void *v = g_bytes_get_data(written, &vlen);
    e = entry_new(c, key, klen, v, vlen);
  }
  guint64 h = e ? e->hash : key_hash(key, klen);
  stripe_t *st = stripe_of(c, h);
  g_mutex_lock(&st->lock);
  g_assert(st->writing > 0);
  /* The writer's own value is the newest there is: no ticket needed, and
   * no reader cached the key while the write was under way. */
  if (e) {
    gssize i = table_find(st, h, key, klen);
    if (i >= 0) drop_at(st, (gsize)i);
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
    out->entries += st->count;
    out->bytes += st->bytes;
    g_mutex_unlock(&st->lock);
  }
}
