/* ixia-recovery verify: the truth store and the index compared.
 *
 * Live, it is the on-demand form of the shards' anti-entropy
 * (common/antientropy.h): per table, the API's digests of key ranges
 * (Ixia.digest) against the sum of every shard's digests over the same
 * ranges (Search.digest; shards hold disjoint partitions, so their digests
 * add up), descending into the ranges that differ until a few keys are
 * listed by both sides (Ixia.keyVersions, Search.docs) and compared; equal
 * tables cost one digest per page of keys on each side. The keys that
 * differ are re-checked once after a pause (writes racing the walk) and
 * classified. Offline (an index directory against a snapshot), both sides
 * are read whole as sorted streams merged in key order: the snapshot's
 * RocksDB and the index's document records.
 *
 * Table names: the API's stats "table_names" (its schema registry, which is
 * every table a document can be written to); offline, the snapshot's schema
 * records. Not the shards' view: a table whose index lost everything must
 * still be compared. */
#include <string.h>

#include "antientropy.h"
#include "index.h"
#include "internal.h"
#include "json.h"
#include "progress.h"
#include "recovery.h"
#include "record.h"
#include "store.h"
#include "timeutil.h"

typedef struct {
  char *key; /* NUL-terminated copy (keys are UTF-8 without NUL) */
  size_t len;
  gint64 version;
  gboolean deleted;
} entry_t;

static void entry_free(gpointer p) {
  entry_t *e = p;
  g_free(e->key);
  g_free(e);
}

static entry_t *entry_new(const char *key, size_t len, gint64 version, gboolean deleted) {
  entry_t *e = g_new(entry_t, 1);
  e->key = ixia_memdup0(key, len);
  e->len = len;
  e->version = version;
  e->deleted = deleted;
  return e;
}

static int key_cmp(const char *a, size_t al, const char *b, size_t bl) {
  int c = memcmp(a, b, MIN(al, bl));
  return c ? c : (al < bl ? -1 : al > bl);
}

/* ---------- streams ---------- */

typedef struct stream stream_t;
/* Appends up to s->page entries with key > after (after_len 0: first). */
typedef gboolean (*fetch_fn)(stream_t *s, const char *after, size_t after_len, GPtrArray *out,
                             ixia_error_t **err);

struct stream {
  fetch_fn fetch;
  gpointer src; /* ixia_client_t*, ixia_shard_client_t*, rocksdb_t*, ixia_idx_t* */
  const char *ns, *table;
  guint page;
  GPtrArray *buf; /* entry_t* */
  guint pos;
  gboolean eof;
  char *last; /* key of the last entry fetched */
  size_t last_len;
};

static void stream_init(stream_t *s, fetch_fn fetch, gpointer src, const char *ns, const char *table,
                        guint page) {
  memset(s, 0, sizeof *s);
  s->fetch = fetch;
  s->src = src;
  s->ns = ns;
  s->table = table;
  s->page = page;
  s->buf = g_ptr_array_new_with_free_func(entry_free);
}

static void stream_clear(stream_t *s) {
  if (s->buf) g_ptr_array_unref(s->buf);
  g_free(s->last);
  memset(s, 0, sizeof *s);
}

/* The current entry, fetching the next page when needed; NULL at the end
 * (or on error, with *err set). */
static entry_t *stream_head(stream_t *s, ixia_error_t **err) {
  if (s->pos < s->buf->len) return g_ptr_array_index(s->buf, s->pos);
  if (s->eof) return NULL;
  g_ptr_array_set_size(s->buf, 0);
  s->pos = 0;
  if (!s->fetch(s, s->last, s->last ? s->last_len : 0, s->buf, err)) {
    s->eof = TRUE;
    return NULL;
  }
  if (s->buf->len == 0) {
    s->eof = TRUE;
    return NULL;
  }
  entry_t *tail = g_ptr_array_index(s->buf, s->buf->len - 1);
  g_free(s->last);
  s->last = ixia_memdup0(tail->key, tail->len);
  s->last_len = tail->len;
  return g_ptr_array_index(s->buf, 0);
}

static gboolean fetch_shard_docs(stream_t *s, const char *after, size_t after_len, GPtrArray *out,
                                 ixia_error_t **err) {
  GPtrArray *docs = g_ptr_array_new_with_free_func(g_object_unref);
  GByteArray *a = g_byte_array_new();
  if (after) g_byte_array_append(a, (const guint8 *)after, (guint)after_len);
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_search_if_docs(ixia_shard_client_iface(s->src), &docs, s->ns, s->table, a,
                                    (gint32)s->page, &xe, &gerr);
  ok = ixia_shard_client_check(s->src, ok, xe, gerr, err);
  for (guint i = 0; ok && i < docs->len; i++) {
    IxiaIndexedDoc *d = g_ptr_array_index(docs, i);
    g_ptr_array_add(out, entry_new((const char *)d->key->data, d->key->len, d->version, d->deleted));
  }
  g_byte_array_unref(a);
  g_ptr_array_unref(docs);
  return ok;
}

static gboolean fetch_snapshot(stream_t *s, const char *after, size_t after_len, GPtrArray *out,
                               ixia_error_t **err) {
  GBytes *prefix = ixia_record_doc_key(s->ns, s->table, "", 0);
  gsize pl;
  const char *p = g_bytes_get_data(prefix, &pl);
  GByteArray *start = g_byte_array_new();
  g_byte_array_append(start, (const guint8 *)p, (guint)pl);
  if (after) {
    g_byte_array_append(start, (const guint8 *)after, (guint)after_len);
    g_byte_array_append(start, (const guint8 *)"", 1); /* smallest key after `after` */
  }
  rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
  rocksdb_iterator_t *it = rocksdb_create_iterator(s->src, ro);
  gint64 now = ixia_time_now(); /* the store's expiry clock */
  for (rocksdb_iter_seek(it, (const char *)start->data, start->len);
       rocksdb_iter_valid(it) && out->len < s->page; rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl < pl || memcmp(k, p, pl) != 0) break;
    const char *v = rocksdb_iter_value(it, &vl);
    gint64 version, expire_at;
    if (!ixia_record_parse_value(v, vl, &version, &expire_at, NULL, NULL)) continue;
    if (ixia_record_expired(expire_at, now)) continue; /* as the store's scan */
    g_ptr_array_add(out, entry_new(k + pl, kl - pl, version, FALSE));
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  rocksdb_readoptions_destroy(ro);
  g_byte_array_unref(start);
  g_bytes_unref(prefix);
  return ixia_error_from_rocksdb(err, rerr, "snapshot scan");
}

typedef struct {
  GPtrArray *out;
  guint limit;
} collect_t;

static gboolean collect_idx_doc(const char *key, size_t key_len, gint64 version, gboolean deleted,
                                void *ud) {
  collect_t *c = ud;
  g_ptr_array_add(c->out, entry_new(key, key_len, version, deleted));
  return c->out->len < c->limit;
}

static gboolean fetch_index_dir(stream_t *s, const char *after, size_t after_len, GPtrArray *out,
                                ixia_error_t **err) {
  collect_t c = {out, s->page};
  return ixia_idx_foreach_doc(s->src, s->ns, s->table, after, after_len, collect_idx_doc, &c, err);
}

/* ---------- classification and the report ---------- */

typedef enum { K_OK, K_MISSING, K_EXTRA, K_STALE, K_CHANGED } kind_t;

/* The index's view of one key over every shard: the live record with the
 * highest version, else the newest tombstone. */
typedef struct {
  gboolean present, live;
  gint64 version;
} view_t;

static void view_add(view_t *v, const entry_t *e) {
  if (!e->deleted && (!v->live || e->version > v->version)) {
    v->live = TRUE;
    v->version = e->version;
  } else if (e->deleted && !v->live && (!v->present || e->version > v->version)) {
    v->version = e->version;
  }
  v->present = TRUE;
}

/* horizon: every edit up to it must be in the index (the version the shards
 * were waited for, or the snapshot's). An index version above what the
 * store showed is a newer edit ("changed"), not a divergence, unless it is
 * above `ceiling`, the store's latest version after the index was read: no
 * such edit exists, the index is corrupt. */
static kind_t classify(gboolean in_store, gint64 s, const view_t *ix, gint64 horizon, gint64 ceiling) {
  gboolean newer_edit = ix->version <= ceiling;
  if (in_store) {
    if (ix->live) return ix->version == s ? K_OK : ix->version > s && newer_edit ? K_CHANGED : K_STALE;
    return ix->present && ix->version > s && newer_edit ? K_CHANGED : K_MISSING;
  }
  if (!ix->live) return K_OK;
  return ix->version > horizon && newer_edit ? K_CHANGED : K_EXTRA;
}

typedef struct {
  char *ns, *table, *key, *prev; /* prev: the key walked before (NULL: none) */
  size_t key_len, prev_len;
  gboolean in_store;
  gint64 store_version;
  view_t ix;
  kind_t kind;
} mismatch_t;

static void mismatch_free(gpointer p) {
  mismatch_t *m = p;
  g_free(m->ns);
  g_free(m->table);
  g_free(m->key);
  g_free(m->prev);
  g_free(m);
}

typedef struct {
  const ixia_verify_opts_t *opts;
  guint64 documents, indexed, changed;
  guint64 ranges, keys_listed; /* live: the digest walk's cost */
  guint64 counts[K_CHANGED + 1];
  cJSON *examples[K_CHANGED + 1];
  GPtrArray *candidates; /* mismatch_t*, live mode: to re-check */
  ixia_progress_t *progress;
} report_t;

static const char *const KIND_NAMES[] = {"ok", "missing", "extra", "stale", "changed"};

static void report_add(report_t *r, const mismatch_t *m) {
  r->counts[m->kind]++;
  if (m->kind == K_OK) return;
  cJSON *list = r->examples[m->kind];
  if ((guint)cJSON_GetArraySize(list) >= r->opts->examples) return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "namespace", m->ns);
  cJSON_AddStringToObject(o, "table", m->table);
  cJSON_AddStringToObject(o, "key", m->key);
  if (m->in_store) cJSON_AddNumberToObject(o, "store_version", (double)m->store_version);
  else cJSON_AddNullToObject(o, "store_version");
  if (m->ix.live) cJSON_AddNumberToObject(o, "index_version", (double)m->ix.version);
  else cJSON_AddNullToObject(o, "index_version");
  if (m->ix.present && !m->ix.live)
    cJSON_AddNumberToObject(o, "index_tombstone_version", (double)m->ix.version);
  cJSON_AddItemToArray(list, o);
}

/* Walks one table offline: mismatches go straight to the report, judged
 * against `horizon` (the snapshot's version). */
static gboolean walk_table(report_t *r, stream_t *store, stream_t *shards, guint n_shards,
                           gint64 horizon, ixia_error_t **err) {
  char *prev = NULL;
  size_t prev_len = 0;
  ixia_error_t *e = NULL;
  for (;;) {
    entry_t *se = stream_head(store, &e);
    const entry_t *min = se;
    for (guint i = 0; !e && i < n_shards; i++) {
      entry_t *h = stream_head(&shards[i], &e);
      if (h && (!min || key_cmp(h->key, h->len, min->key, min->len) < 0)) min = h;
    }
    if (e || !min) break;
    char *key = ixia_memdup0(min->key, min->len);
    size_t key_len = min->len;
    gboolean in_store = se && key_cmp(se->key, se->len, key, key_len) == 0;
    gint64 s = in_store ? se->version : 0;
    if (in_store) {
      store->pos++;
      r->documents++;
      ixia_progress_add(r->progress, 1);
    }
    view_t ix = {0};
    for (guint i = 0; i < n_shards; i++) {
      entry_t *h = shards[i].pos < shards[i].buf->len ? g_ptr_array_index(shards[i].buf, shards[i].pos) : NULL;
      if (h && key_cmp(h->key, h->len, key, key_len) == 0) {
        view_add(&ix, h);
        shards[i].pos++;
      }
    }
    if (ix.live) r->indexed++;
    kind_t k = classify(in_store, s, &ix, horizon, G_MAXINT64);
    if (k != K_OK) {
      mismatch_t *m = g_new0(mismatch_t, 1);
      m->ns = g_strdup(store->ns);
      m->table = g_strdup(store->table);
      m->key = g_strdup(key);
      m->key_len = key_len;
      m->prev = prev ? g_memdup2(prev, prev_len + 1) : NULL;
      m->prev_len = prev_len;
      m->in_store = in_store;
      m->store_version = s;
      m->ix = ix;
      m->kind = k;
      report_add(r, m);
      mismatch_free(m);
    }
    g_free(prev);
    prev = key;
    prev_len = key_len;
  }
  g_free(prev);
  return e ? ixia_error_propagate(err, e) : TRUE;
}

static cJSON *report_json(report_t *r, gint64 start, gint64 version) {
  cJSON *o = cJSON_CreateObject();
  guint64 bad = r->counts[K_MISSING] + r->counts[K_EXTRA] + r->counts[K_STALE];
  cJSON_AddBoolToObject(o, "ok", bad == 0);
  cJSON_AddNumberToObject(o, "store_version", (double)version);
  cJSON_AddNumberToObject(o, "documents", (double)r->documents);
  cJSON_AddNumberToObject(o, "indexed", (double)r->indexed);
  for (int k = K_MISSING; k <= K_STALE; k++) {
    cJSON *x = cJSON_AddObjectToObject(o, KIND_NAMES[k]);
    cJSON_AddNumberToObject(x, "count", (double)r->counts[k]);
    cJSON_AddItemToObject(x, "examples", r->examples[k]);
    r->examples[k] = NULL;
  }
  cJSON_AddNumberToObject(o, "changed", (double)r->counts[K_CHANGED]);
  double secs = (double)(g_get_monotonic_time() - start) / 1e6;
  cJSON_AddNumberToObject(o, "seconds", secs);
  cJSON_AddNumberToObject(o, "docs_per_second", secs > 0 ? (double)r->documents / secs : 0);
  return o;
}

static void report_init(report_t *r, const ixia_verify_opts_t *opts, const char *label) {
  memset(r, 0, sizeof *r);
  r->opts = opts;
  for (int k = 0; k <= K_CHANGED; k++) r->examples[k] = cJSON_CreateArray();
  r->candidates = g_ptr_array_new_with_free_func(mismatch_free);
  r->progress = ixia_progress_new(label, 0, "docs", opts->quiet);
}

static void report_clear(report_t *r) {
  ixia_progress_destroy(r->progress);
  for (int k = 0; k <= K_CHANGED; k++) cJSON_Delete(r->examples[k]);
  g_ptr_array_unref(r->candidates);
}

/* ---------- live mode ---------- */

static cJSON *api_stats(ixia_client_t *api, ixia_error_t **err) {
  char *json = NULL;
  if (!ixia_client_stats(api, &json, err)) return NULL;
  cJSON *o = cJSON_Parse(json);
  g_free(json);
  if (!o) ixia_error_set(err, IXIA_EINTERNAL, "the API's stats are not JSON");
  return o;
}

/* Candidates are in walk order: by table, then key, in runs sharing the
 * leaf they were found in (same prev). Returns the end of the run at i. */
static guint run_end(GPtrArray *c, guint i) {
  const mismatch_t *a = g_ptr_array_index(c, i);
  guint j = i + 1;
  for (; j < c->len; j++) {
    const mismatch_t *b = g_ptr_array_index(c, j);
    if (strcmp(a->ns, b->ns) || strcmp(a->table, b->table) || g_strcmp0(a->prev, b->prev)) break;
  }
  return j;
}

/* The index's current view of candidates [i, j) (one run): each shard's
 * records from just after the run's prev through its last key, in one
 * pass (keys inserted since are paged over). */
static gboolean lookup_index(ixia_shard_client_t **shards, guint n, GPtrArray *c, guint i, guint j,
                             ixia_error_t **err) {
  const mismatch_t *first = g_ptr_array_index(c, i), *last = g_ptr_array_index(c, j - 1);
  GHashTable *views = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  ixia_error_t *fail = NULL;
  for (guint s = 0; !fail && s < n; s++) {
    stream_t st;
    stream_init(&st, fetch_shard_docs, shards[s], first->ns, first->table, 256);
    if (first->prev) {
      st.last = ixia_memdup0(first->prev, first->prev_len);
      st.last_len = first->prev_len;
    }
    entry_t *e;
    while ((e = stream_head(&st, &fail)) && key_cmp(e->key, e->len, last->key, last->key_len) <= 0) {
      view_t *v = g_hash_table_lookup(views, e->key);
      if (!v) g_hash_table_insert(views, g_strdup(e->key), v = g_new0(view_t, 1));
      view_add(v, e);
      st.pos++;
    }
    stream_clear(&st);
  }
  for (guint k = i; !fail && k < j; k++) {
    mismatch_t *m = g_ptr_array_index(c, k);
    view_t *v = g_hash_table_lookup(views, m->key);
    m->ix = v ? *v : (view_t){0};
  }
  g_hash_table_destroy(views);
  return fail ? ixia_error_propagate(err, fail) : TRUE;
}

/* The store's current version of candidates [i, j) of one table, read in
 * batches (Ixia.currentEvents: a DELETE means absent). */
#define STORE_READ_KEYS 500
static gboolean lookup_store(ixia_client_t *api, GPtrArray *c, guint i, guint j, ixia_error_t **err) {
  for (guint from = i; from < j; from += STORE_READ_KEYS) {
    guint n = MIN(STORE_READ_KEYS, j - from);
    const char **keys = g_new(const char *, n);
    for (guint k = 0; k < n; k++) keys[k] = ((mismatch_t *)g_ptr_array_index(c, from + k))->key;
    const mismatch_t *m0 = g_ptr_array_index(c, from);
    GPtrArray *events = NULL;
    gboolean ok = ixia_client_current_events(api, m0->ns, m0->table, keys, n, &events, err);
    for (guint k = 0; ok && k < n && k < events->len; k++) {
      IxiaChangeEvent *e = g_ptr_array_index(events, k);
      mismatch_t *m = g_ptr_array_index(c, from + k);
      m->in_store = e->op == IXIA_CHANGE_OP_PUT;
      m->store_version = m->in_store ? e->version : 0;
    }
    if (events) g_ptr_array_unref(events);
    g_free(keys);
    if (!ok) return FALSE;
  }
  return TRUE;
}

/* Re-checks the candidates: store reads first, then the shards wait for the
 * store's version after those reads, then the index reads. */
static gboolean recheck(report_t *r, ixia_client_t *api, ixia_shard_client_t **shards, guint n,
                        ixia_error_t **err) {
  GPtrArray *c = r->candidates;
  if (c->len == 0) return TRUE;
  g_usleep((gulong)r->opts->recheck_ms * 1000);
  for (guint i = 0; i < c->len;) {
    guint j = i + 1;
    /* Whole tables at a time for the store. */
    const mismatch_t *a = g_ptr_array_index(c, i);
    while (j < c->len && !strcmp(a->ns, ((mismatch_t *)g_ptr_array_index(c, j))->ns) &&
           !strcmp(a->table, ((mismatch_t *)g_ptr_array_index(c, j))->table))
      j++;
    if (!lookup_store(api, c, i, j, err)) return FALSE;
    i = j;
  }
  cJSON *stats = api_stats(api, err);
  if (!stats) return FALSE;
  gint64 horizon = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(stats, "store_latest_version"));
  cJSON_Delete(stats);
  mismatch_t *first = g_ptr_array_index(c, 0);
  if (!ixia_recovery_wait_shards(api, first->ns, first->table, horizon, err)) return FALSE;
  for (guint i = 0; i < c->len;) {
    guint j = run_end(c, i);
    if (!lookup_index(shards, n, c, i, j, err)) return FALSE;
    i = j;
  }
  stats = api_stats(api, err);
  if (!stats) return FALSE;
  gint64 ceiling = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(stats, "store_latest_version"));
  cJSON_Delete(stats);
  for (guint i = 0; i < c->len; i++) {
    mismatch_t *m = g_ptr_array_index(c, i);
    m->kind = classify(m->in_store, m->store_version, &m->ix, horizon, ceiling);
    report_add(r, m);
  }
  return TRUE;
}

/* ---------- live mode: the anti-entropy walk over every shard ---------- */

/* Digest ranges per level, and ranges listed key by key (as the shards'
 * own anti-entropy). */
#define FANOUT 16
#define LEAF_KEYS 64

typedef struct {
  report_t *r;
  ixia_client_t *api;
  ixia_shard_client_t **shards;
  guint n;
  const char *ns, *table;
  guint top_keys; /* max_keys of the walk's top-level calls (progress) */
} live_t;

static gboolean live_truth_ranges(void *ud, const char *after, const char *end, guint max_keys,
                                  guint bucket_keys, GArray *out, gint64 *store_version,
                                  ixia_error_t **err) {
  live_t *l = ud;
  guint before = out->len;
  if (!ixia_client_digest(l->api, l->ns, l->table, after, end, (gint)max_keys, (gint)bucket_keys, 0,
                          NULL, 0, out, store_version, err))
    return FALSE;
  for (guint i = before; max_keys == l->top_keys && i < out->len; i++)
    ixia_progress_add(l->r->progress, (guint64)g_array_index(out, ixia_ae_range_t, i).count);
  return TRUE;
}

/* Every shard's digests of the same ranges, added up. */
static gboolean live_index_ranges(void *ud, const char *after, const char *const *bounds, guint n,
                                  GArray *out, ixia_error_t **err) {
  live_t *l = ud;
  gboolean ok = TRUE;
  for (guint s = 0; ok && s < l->n; s++) {
    GArray *part = ixia_ae_ranges_new();
    ok = ixia_shard_client_digest(l->shards[s], l->ns, l->table, after, bounds, n, part, err);
    if (ok && part->len != n)
      ok = ixia_error_set(err, IXIA_EINTERNAL, "shard %s sent %u digests for %u ranges",
                          ixia_shard_client_address(l->shards[s]), part->len, n);
    for (guint i = 0; ok && i < n; i++) {
      ixia_ae_range_t *p = &g_array_index(part, ixia_ae_range_t, i);
      if (s == 0) {
        ixia_ae_range_t r = {g_strdup(p->last_key), p->count, p->hash};
        g_array_append_val(out, r);
      } else {
        ixia_ae_range_t *r = &g_array_index(out, ixia_ae_range_t, out->len - n + i);
        r->count += p->count;
        r->hash += p->hash;
      }
    }
    g_array_unref(part);
  }
  return ok;
}

static gboolean live_truth_keys(void *ud, const char *after, const char *end, guint limit, GArray *out,
                                gint64 *store_version, ixia_error_t **err) {
  live_t *l = ud;
  return ixia_client_key_versions(l->api, l->ns, l->table, after, end, (gint)limit, 0, NULL, 0, out,
                                  store_version, err);
}

static gint kv_cmp(gconstpointer a, gconstpointer b) {
  return strcmp(((const ixia_ae_kv_t *)a)->key, ((const ixia_ae_kv_t *)b)->key);
}

/* The live records of every shard in (after, end], merged. */
static gboolean live_index_keys(void *ud, const char *after, const char *end, GArray *out,
                                ixia_error_t **err) {
  live_t *l = ud;
  ixia_error_t *e = NULL;
  for (guint s = 0; !e && s < l->n; s++) {
    stream_t st;
    stream_init(&st, fetch_shard_docs, l->shards[s], l->ns, l->table, 1000);
    st.last = g_strdup(after);
    st.last_len = strlen(after);
    entry_t *h;
    while ((h = stream_head(&st, &e)) && (!*end || strcmp(h->key, end) <= 0)) {
      if (!h->deleted) {
        ixia_ae_kv_t kv = {g_strdup(h->key), h->version};
        g_array_append_val(out, kv);
      }
      st.pos++;
    }
    stream_clear(&st);
  }
  if (e) return ixia_error_propagate(err, e);
  g_array_sort(out, kv_cmp);
  return TRUE;
}

/* A key whose versions differ: a candidate for the re-check. */
static gboolean live_differs(void *ud, const char *key, gint64 truth_version, gint64 index_version,
                             gint64 store_version, const char *leaf_after, ixia_error_t **err) {
  (void)store_version, (void)err;
  live_t *l = ud;
  mismatch_t *m = g_new0(mismatch_t, 1);
  m->ns = g_strdup(l->ns);
  m->table = g_strdup(l->table);
  m->key = g_strdup(key);
  m->key_len = strlen(key);
  if (*leaf_after) {
    m->prev = g_strdup(leaf_after);
    m->prev_len = strlen(leaf_after);
  }
  m->in_store = truth_version > 0;
  m->store_version = truth_version;
  m->ix = (view_t){index_version > 0, index_version > 0, index_version};
  m->kind = K_CHANGED;
  g_ptr_array_add(l->r->candidates, m);
  return TRUE;
}

static const ixia_ae_source_t LIVE = {live_truth_ranges, live_index_ranges, live_truth_keys,
                                      live_index_keys, live_differs};

cJSON *ixia_recovery_verify(const char *api_addr, const ixia_verify_opts_t *opts, ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  ixia_client_t *api = ixia_client_new(api_addr, err);
  if (!api) return NULL;
  cJSON *out = NULL;
  report_t r;
  report_init(&r, opts, "verify");
  cJSON *stats = api_stats(api, err);
  gint64 version = stats ? (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(stats, "store_latest_version")) : -1;
  cJSON *tables = cJSON_GetObjectItemCaseSensitive(stats, "table_names");
  gboolean ok = stats != NULL;
  if (ok && !cJSON_IsArray(tables))
    ok = ixia_error_set(err, IXIA_EUNSUPPORTED, "the API's stats have no \"table_names\" (an older ixia-query-api?)");
  ixia_recovery_shards_t set = {0};
  if (ok) ok = ixia_recovery_shards_open(api, &set, err);
  ixia_shard_client_t **shards = set.shards;
  guint n = set.n;
  const cJSON *t;
  /* One wait covers every table: shards wait on positions, not tables. */
  cJSON *first = cJSON_GetArrayItem(tables, 0);
  if (ok && first)
    ok = ixia_recovery_wait_shards(api, cJSON_GetStringValue(cJSON_GetArrayItem(first, 0)),
                     cJSON_GetStringValue(cJSON_GetArrayItem(first, 1)), version, err);
  cJSON_ArrayForEach(t, tables) {
    if (!ok) break;
    const char *ns = cJSON_GetStringValue(cJSON_GetArrayItem(t, 0));
    const char *table = cJSON_GetStringValue(cJSON_GetArrayItem(t, 1));
    if (!ns || !table) continue;
    live_t l = {&r, api, shards, n, ns, table, opts->page};
    const ixia_ae_opts_t ao = {opts->page, FANOUT, LEAF_KEYS};
    ixia_ae_stats_t st = {0};
    ok = ixia_ae_walk(&LIVE, &l, &ao, &st, err);
    r.documents += st.truth_keys;
    r.indexed += st.index_keys;
    r.ranges += st.ranges;
    r.keys_listed += st.keys_listed;
  }
  if (ok) ok = recheck(&r, api, shards, n, err);
  if (ok) {
    out = report_json(&r, start, version);
    cJSON_AddStringToObject(out, "mode", "live");
    cJSON_AddNumberToObject(out, "tables", cJSON_GetArraySize(tables));
    cJSON_AddNumberToObject(out, "shards", n);
    cJSON_AddNumberToObject(out, "rechecked", r.candidates->len);
    /* The walk's cost: digests compared and keys listed. */
    cJSON_AddNumberToObject(out, "ranges_compared", (double)r.ranges);
    cJSON_AddNumberToObject(out, "keys_listed", (double)r.keys_listed);
  }
  report_clear(&r);
  cJSON_Delete(stats);
  ixia_recovery_shards_close(&set);
  ixia_client_destroy(api);
  return out;
}

/* ---------- offline mode ---------- */

static void add_table(const char *ns, size_t nl, const char *table, size_t tl, GPtrArray *names) {
  g_ptr_array_add(names, ixia_memdup0(ns, nl));
  g_ptr_array_add(names, ixia_memdup0(table, tl));
}

/* (ns, table) pairs, flattened, from the snapshot's schema records. */
static GPtrArray *snapshot_tables(rocksdb_t *db, ixia_error_t **err) {
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
  rocksdb_iterator_t *it = rocksdb_create_iterator(db, ro);
  for (rocksdb_iter_seek(it, "s", 1); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t kl, nl, tl;
    const char *k = rocksdb_iter_key(it, &kl), *ns, *table;
    if (kl == 0 || k[0] != 's') break;
    if (ixia_record_parse_key(k, kl, NULL, &ns, &nl, &table, &tl, NULL, NULL)) add_table(ns, nl, table, tl, names);
  }
  char *rerr = NULL;
  rocksdb_iter_get_error(it, &rerr);
  rocksdb_iter_destroy(it);
  rocksdb_readoptions_destroy(ro);
  if (!ixia_error_from_rocksdb(err, rerr, "snapshot schemas")) g_clear_pointer(&names, g_ptr_array_unref);
  return names;
}

cJSON *ixia_recovery_verify_offline(const char *index_dir, const char *snapshot_dir,
                                    const ixia_config_t *cfg, const ixia_verify_opts_t *opts,
                                    ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  gint64 version = 0;
  rocksdb_t *db = ixia_recovery_open_snapshot(snapshot_dir, &version, err);
  if (!db) return NULL;
  if (!g_file_test(index_dir, G_FILE_TEST_IS_DIR)) {
    ixia_error_set(err, IXIA_ENOTFOUND, "no index directory %s", index_dir);
    rocksdb_close(db);
    return NULL;
  }
  ixia_idx_t *idx = ixia_idx_open(index_dir, cfg, err);
  GPtrArray *names = idx ? snapshot_tables(db, err) : NULL;
  cJSON *out = NULL;
  report_t r;
  report_init(&r, opts, "verify (offline)");
  gboolean ok = names != NULL;
  for (guint i = 0; ok && i + 1 < names->len; i += 2) {
    stream_t store, index;
    stream_init(&store, fetch_snapshot, db, g_ptr_array_index(names, i), g_ptr_array_index(names, i + 1), opts->page);
    stream_init(&index, fetch_index_dir, idx, store.ns, store.table, opts->page);
    ok = walk_table(&r, &store, &index, 1, version, err);
    stream_clear(&store);
    stream_clear(&index);
  }
  if (ok) {
    out = report_json(&r, start, version);
    cJSON_AddStringToObject(out, "mode", "offline");
    cJSON_AddNumberToObject(out, "tables", names->len / 2);
  }
  report_clear(&r);
  if (names) g_ptr_array_unref(names);
  ixia_idx_destroy(idx);
  rocksdb_close(db);
  return out;
}
