/* ixia-recovery verify: the truth store and the index compared key by key.
 *
 * Every table is walked as sorted streams merged in key order: the store's
 * documents (Ixia.scan pages, or the snapshot's RocksDB offline) and each
 * shard's document records (Search.docs pages, or the index directory
 * offline). Both list a table's keys in byte order, so one pass with one
 * page per stream in memory compares any number of documents.
 *
 * Table names: the API's stats "table_names" (its schema registry, which is
 * every table a document can be written to); offline, the snapshot's schema
 * records. Not the shards' view: a table whose index lost everything must
 * still be compared. */
#include <string.h>

#include "index.h"
#include "internal.h"
#include "json.h"
#include "progress.h"
#include "recovery.h"
#include "store.h"

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

/* The API's default limits.max_get_keys, which bounds a scan page. */
#define API_SCAN_DEFAULT_MAX 1000

static gboolean fetch_api_scan(stream_t *s, const char *after, size_t after_len, GPtrArray *out,
                               ixia_error_t **err) {
  (void)after_len;
  GPtrArray *docs = NULL;
  ixia_error_t *e = NULL;
  if (!ixia_client_scan(s->src, s->ns, s->table, after, (gint)s->page, &docs, &e)) {
    /* The API's page limit is its own config: fall back to its default. */
    if (e->code != IXIA_EINVAL || s->page <= API_SCAN_DEFAULT_MAX) return ixia_error_propagate(err, e);
    ixia_error_destroy(e);
    s->page = API_SCAN_DEFAULT_MAX;
    if (!ixia_client_scan(s->src, s->ns, s->table, after, (gint)s->page, &docs, err)) return FALSE;
  }
  for (guint i = 0; i < docs->len; i++) {
    IxiaDocument *d = g_ptr_array_index(docs, i);
    g_ptr_array_add(out, entry_new(d->key, strlen(d->key), d->version, FALSE));
  }
  g_ptr_array_unref(docs);
  return TRUE;
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
  GBytes *prefix = ixia_store_doc_key(s->ns, s->table, "", 0);
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
  gint64 now = g_get_real_time() / G_USEC_PER_SEC;
  for (rocksdb_iter_seek(it, (const char *)start->data, start->len);
       rocksdb_iter_valid(it) && out->len < s->page; rocksdb_iter_next(it)) {
    size_t kl, vl;
    const char *k = rocksdb_iter_key(it, &kl);
    if (kl < pl || memcmp(k, p, pl) != 0) break;
    const char *v = rocksdb_iter_value(it, &vl);
    gint64 version, expire_at;
    if (!ixia_store_parse_value(v, vl, &version, &expire_at, NULL, NULL)) continue;
    if (expire_at != 0 && expire_at <= now) continue; /* as the store's scan */
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

/* Walks one table; mismatches go to r->candidates (recheck) or straight to
 * the report with `horizon` (offline). */
static gboolean walk_table(report_t *r, stream_t *store, stream_t *shards, guint n_shards,
                           gboolean recheck, gint64 horizon, ixia_error_t **err) {
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
    /* Live walk: anything short of equal is a candidate for the re-check. */
    kind_t k = recheck ? (in_store == ix.live && (!in_store || ix.version == s) ? K_OK : K_CHANGED)
                       : classify(in_store, s, &ix, horizon, G_MAXINT64);
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
      if (recheck) {
        g_ptr_array_add(r->candidates, m);
      } else {
        report_add(r, m);
        mismatch_free(m);
      }
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

/* The index's current view of one key: each shard's records from just
 * after the key walked before it (keys inserted since are paged over). */
static gboolean lookup_index(ixia_shard_client_t **shards, guint n, const mismatch_t *m, view_t *v,
                             ixia_error_t **err) {
  memset(v, 0, sizeof *v);
  for (guint i = 0; i < n; i++) {
    stream_t s;
    stream_init(&s, fetch_shard_docs, shards[i], m->ns, m->table, 64);
    if (m->prev) {
      s.last = ixia_memdup0(m->prev, m->prev_len);
      s.last_len = m->prev_len;
    }
    ixia_error_t *fail = NULL;
    entry_t *e;
    while ((e = stream_head(&s, &fail)) && key_cmp(e->key, e->len, m->key, m->key_len) < 0) s.pos++;
    if (e && key_cmp(e->key, e->len, m->key, m->key_len) == 0) view_add(v, e);
    stream_clear(&s);
    if (fail) return ixia_error_propagate(err, fail);
  }
  return TRUE;
}

/* Re-checks each candidate: store read first, then the shards wait for the
 * store's version after those reads, then the index read. */
static gboolean recheck(report_t *r, ixia_client_t *api, ixia_shard_client_t **shards, guint n,
                        ixia_error_t **err) {
  if (r->candidates->len == 0) return TRUE;
  g_usleep((gulong)r->opts->recheck_ms * 1000);
  for (guint i = 0; i < r->candidates->len; i++) {
    mismatch_t *m = g_ptr_array_index(r->candidates, i);
    gboolean found = FALSE;
    gint64 version = 0;
    char *json = NULL;
    if (!ixia_client_get(api, m->ns, m->table, m->key, NULL, &found, &version, &json, err)) return FALSE;
    g_free(json);
    m->in_store = found;
    m->store_version = found ? version : 0;
  }
  cJSON *stats = api_stats(api, err);
  if (!stats) return FALSE;
  gint64 horizon = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(stats, "store_latest_version"));
  cJSON_Delete(stats);
  mismatch_t *first = g_ptr_array_index(r->candidates, 0);
  if (!ixia_recovery_wait_shards(api, first->ns, first->table, horizon, err)) return FALSE;
  for (guint i = 0; i < r->candidates->len; i++) {
    mismatch_t *m = g_ptr_array_index(r->candidates, i);
    if (!lookup_index(shards, n, m, &m->ix, err)) return FALSE;
  }
  stats = api_stats(api, err);
  if (!stats) return FALSE;
  gint64 ceiling = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(stats, "store_latest_version"));
  cJSON_Delete(stats);
  for (guint i = 0; i < r->candidates->len; i++) {
    mismatch_t *m = g_ptr_array_index(r->candidates, i);
    m->kind = classify(m->in_store, m->store_version, &m->ix, horizon, ceiling);
    report_add(r, m);
  }
  return TRUE;
}

cJSON *ixia_recovery_verify(const char *api_addr, const ixia_verify_opts_t *opts, ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  ixia_client_t *api = ixia_client_new(api_addr, err);
  if (!api) return NULL;
  char **addrs = NULL;
  ixia_shard_client_t **shards = NULL;
  guint n = 0;
  cJSON *out = NULL;
  report_t r;
  report_init(&r, opts, "verify");
  cJSON *stats = api_stats(api, err);
  gint64 version = stats ? (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(stats, "store_latest_version")) : -1;
  cJSON *tables = cJSON_GetObjectItemCaseSensitive(stats, "table_names");
  gboolean ok = stats != NULL;
  if (ok && !cJSON_IsArray(tables))
    ok = ixia_error_set(err, IXIA_EUNSUPPORTED, "the API's stats have no \"table_names\" (an older ixia-query-api?)");
  if (ok) ok = (addrs = ixia_client_shards(api, err)) != NULL;
  if (ok) {
    n = g_strv_length(addrs);
    shards = g_new0(ixia_shard_client_t *, n);
    for (guint i = 0; ok && i < n; i++) ok = (shards[i] = ixia_shard_client_new(g_strstrip(addrs[i]), 120000, err)) != NULL;
  }
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
    stream_t store, *ss = g_new0(stream_t, n);
    stream_init(&store, fetch_api_scan, api, ns, table, opts->page);
    for (guint i = 0; i < n; i++) stream_init(&ss[i], fetch_shard_docs, shards[i], ns, table, opts->page);
    ok = walk_table(&r, &store, ss, n, TRUE, 0, err);
    stream_clear(&store);
    for (guint i = 0; i < n; i++) stream_clear(&ss[i]);
    g_free(ss);
  }
  if (ok) ok = recheck(&r, api, shards, n, err);
  if (ok) {
    out = report_json(&r, start, version);
    cJSON_AddStringToObject(out, "mode", "live");
    cJSON_AddNumberToObject(out, "tables", cJSON_GetArraySize(tables));
    cJSON_AddNumberToObject(out, "shards", n);
    cJSON_AddNumberToObject(out, "rechecked", r.candidates->len);
  }
  report_clear(&r);
  cJSON_Delete(stats);
  for (guint i = 0; shards && i < n; i++) ixia_shard_client_destroy(shards[i]);
  g_free(shards);
  g_strfreev(addrs);
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
    if (ixia_store_parse_key(k, kl, NULL, &ns, &nl, &table, &tl, NULL, NULL)) add_table(ns, nl, table, tl, names);
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
    ok = walk_table(&r, &store, &index, 1, FALSE, version, err);
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
