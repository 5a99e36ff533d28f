/* Self-healing and anti-entropy of one shard (heal.h): the heal thread,
 * the two sides of the comparison (the API over Thrift, the shard's own
 * index), and the re-check that tells a divergence from an edit still in
 * flight. Every change it makes goes through ixia_indexer_reindex, i.e. the
 * apply thread and the version rule, so it can run while the shard
 * consumes Kafka. */
#include "heal.h"

#include <stdatomic.h>
#include <string.h>

#include "antientropy.h"
#include "client.h"
#include "expiry.h"
#include "indexer.h"
#include "json.h"
#include "log.h"
#include "record.h"
#include "thrift_util.h"

/* Keys per listing page (keyVersions) and per top-level digest. */
#define PAGE_KEYS 10000
/* Digest ranges per level, and ranges listed key by key. */
#define FANOUT 16
#define LEAF_KEYS 64
/* Keys per currentEvents call (at most limits.max_get_keys, default 1000). */
#define FETCH_KEYS 500
/* API calls: each send and receive. */
#define API_IO_TIMEOUT_MS 60000
/* The apply thread's schema fetch must not hold up consumption long. */
#define SCHEMA_FETCH_TIMEOUT_MS 3000
/* Back-off after a failed repair. */
#define RETRY_MIN_US (500 * 1000)
#define RETRY_MAX_US (30 * G_USEC_PER_SEC)
/* How long a re-check waits for replication and the shard to catch up. */
#define RECHECK_WAIT_US (30 * G_USEC_PER_SEC)

static const char *const TRIGGER_NAMES[IXIA_HEAL_N_TRIGGERS] = {
    "offsets_lost", "topic_rewound", "position_past_end", "missing_schema", "requested"};

struct ixia_heal {
  ixia_indexer_t *ix;
  ixia_idx_t *idx;
  gboolean self_heal;
  char *api;           /* indexer.api */
  char *api_port_file; /* indexer.api_port_file */
  gint64 ae_rate;      /* keys per second; 0: off */
  gint64 ae_pause_us;
  GThread *thread;

  GMutex lock;
  GCond cond;             /* wakes the heal thread: a request, a stop */
  gboolean stop;          /* under lock */
  ixia_client_t *client;  /* the heal thread's; under lock (destroy interrupts it) */
  char *last_reason;      /* under lock */
  char *last_error;       /* under lock: why the last repair or pass failed; NULL once one works */

  _Atomic gint requested;         /* atomic: a repair is wanted */
  _Atomic gint running;           /* atomic: a repair is running */
  _Atomic gint64 running_since;   /* atomic, monotonic µs */
  _Atomic guint64 triggers[IXIA_HEAL_N_TRIGGERS]; /* atomics */
  _Atomic guint64 repairs, repair_failures, repaired_documents;
  _Atomic gint64 last_repair_ms;
  _Atomic guint64 ae_passes, ae_keys, ae_ranges_differing, ae_candidates, ae_divergent, ae_failures;
  _Atomic gint64 ae_last_pass_ms;
};

/* ---------- the API ---------- */

/* indexer.api, else 127.0.0.1 and the port in indexer.api_port_file. */
static char *api_address(ixia_heal_t *h, ixia_error_t **err) {
  if (*h->api) return g_strdup(h->api);
  if (!*h->api_port_file) {
    ixia_error_set(err, IXIA_EINVAL,
                   "self-healing needs the API's address: set indexer.api (or indexer.api_port_file)");
    return NULL;
  }
  char *text = NULL;
  guint64 port = 0;
  gboolean ok = g_file_get_contents(h->api_port_file, &text, NULL, NULL) &&
                g_ascii_string_to_unsigned(g_strstrip(text), 10, 1, 65535, &port, NULL);
  g_free(text);
  if (!ok) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "indexer.api_port_file %s holds no port (is the API up?)",
                   h->api_port_file);
    return NULL;
  }
  return g_strdup_printf("127.0.0.1:%" G_GUINT64_FORMAT, port);
}

static ixia_client_t *api_connect(ixia_heal_t *h, gint64 io_timeout_ms, ixia_error_t **err) {
  char *addr = api_address(h, err);
  if (!addr) return NULL;
  ixia_client_t *c = ixia_client_new_timeout(addr, io_timeout_ms, err);
  g_free(addr);
  return c;
}

/* The heal thread's client, connected on first use. */
static ixia_client_t *client(ixia_heal_t *h, ixia_error_t **err) {
  g_mutex_lock(&h->lock);
  ixia_client_t *c = h->client;
  g_mutex_unlock(&h->lock);
  if (c) return c;
  c = api_connect(h, API_IO_TIMEOUT_MS, err);
  g_mutex_lock(&h->lock);
  h->client = c;
  g_mutex_unlock(&h->lock);
  return c;
}

/* After a failed call: the connection's state is unknown. */
static void client_drop(ixia_heal_t *h) {
  g_mutex_lock(&h->lock);
  ixia_client_t *c = h->client;
  h->client = NULL;
  g_mutex_unlock(&h->lock);
  ixia_client_destroy(c);
}

GPtrArray *ixia_heal_fetch_schemas(ixia_heal_t *h, ixia_error_t **err) {
  ixia_client_t *c = api_connect(h, SCHEMA_FETCH_TIMEOUT_MS, err);
  if (!c) return NULL;
  GPtrArray *events = NULL;
  if (!ixia_client_schema_events(c, &events, err)) events = NULL;
  ixia_client_destroy(c);
  return events;
}

/* ---------- waiting ---------- */

static gboolean stopping(ixia_heal_t *h) {
  g_mutex_lock(&h->lock);
  gboolean s = h->stop;
  g_mutex_unlock(&h->lock);
  return s;
}

/* Sleeps until `until` (monotonic µs), a stop, or (interruptible) a repair
 * request. FALSE when woken by a stop or a request. */
static gboolean nap(ixia_heal_t *h, gint64 until, gboolean interruptible) {
  g_mutex_lock(&h->lock);
  while (!h->stop && !(interruptible && atomic_load(&h->requested)) &&
         g_get_monotonic_time() < until)
    g_cond_wait_until(&h->cond, &h->lock, until);
  gboolean woken = h->stop || (interruptible && atomic_load(&h->requested));
  g_mutex_unlock(&h->lock);
  return !woken;
}

static void set_error(ixia_heal_t *h, const char *msg) {
  g_mutex_lock(&h->lock);
  g_free(h->last_error);
  h->last_error = msg ? g_strdup(msg) : NULL;
  g_mutex_unlock(&h->lock);
}

/* ---------- applying events ---------- */

/* Applies change events through the apply thread; *applied counts the ones
 * that changed the index. */
static gboolean apply_events(ixia_heal_t *h, GPtrArray *events, guint *applied, ixia_error_t **err) {
  guint n = events->len, done = 0;
  ixia_idx_event_t *evs = g_new0(ixia_idx_event_t, n ? n : 1);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < n; i++)
    ok = ixia_indexer_event_from_thrift(g_ptr_array_index(events, i), &evs[i], err);
  ok = ok && ixia_indexer_reindex(h->ix, evs, n, &done, err);
  g_free(evs);
  if (ok && applied) *applied += done;
  return ok;
}

/* ---------- the two sides of one table ---------- */

typedef struct {
  ixia_heal_t *h;
  ixia_client_t *api;
  const char *ns, *table;
  gint32 partition_count;
  const gint32 *partitions;
  guint n_partitions;
  gint64 now; /* epoch seconds: expired documents are not compared */
  gboolean pace; /* anti-entropy: keep to ae_rate */
  GPtrArray *keys;          /* differing keys (char *) */
  GArray *key_versions;     /* gint64: the store version of the listing that showed each */
  guint applied;            /* repair: documents reindexed */
  gboolean repair;          /* reindex differing keys as they are found */
} side_t;

static gboolean pace_keys(side_t *s, gint64 keys, ixia_error_t **err) {
  if (!s->pace || s->h->ae_rate <= 0 || keys <= 0) return TRUE;
  gint64 us = keys * G_USEC_PER_SEC / s->h->ae_rate;
  if (!nap(s->h, g_get_monotonic_time() + us, TRUE))
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "anti-entropy pass interrupted (a repair or a stop)");
  return TRUE;
}

static gboolean truth_ranges(void *ud, const char *after, const char *end, guint max_keys,
                             guint bucket_keys, GArray *out, gint64 *store_version,
                             ixia_error_t **err) {
  side_t *s = ud;
  guint before = out->len;
  if (!ixia_client_digest(s->api, s->ns, s->table, after, end, (gint)max_keys, (gint)bucket_keys,
                          s->partition_count, s->partitions, s->n_partitions, out, store_version, err))
    return FALSE;
  gint64 keys = 0;
  for (guint i = before; i < out->len; i++) keys += g_array_index(out, ixia_ae_range_t, i).count;
  return pace_keys(s, keys, err);
}

static gboolean truth_keys(void *ud, const char *after, const char *end, guint limit, GArray *out,
                           gint64 *store_version, ixia_error_t **err) {
  side_t *s = ud;
  return ixia_client_key_versions(s->api, s->ns, s->table, after, end, (gint)limit, s->partition_count,
                                  s->partitions, s->n_partitions, out, store_version, err);
}

typedef struct {
  ixia_ae_cutter_t cut;
  GArray *kvs;     /* index_keys: output */
  const char *end; /* index_keys: "" = none */
  gint64 now;
} index_walk_t;


static gboolean cut_one(const char *key, size_t len, gint64 version, gint64 expire_at, void *ud) {
  index_walk_t *w = ud;
  if (ixia_record_expired(expire_at, w->now)) return TRUE;
  char *k = g_strndup(key, len);
  gboolean more = ixia_ae_cutter_add(&w->cut, k, len, version);
  g_free(k);
  return more;
}

gboolean ixia_heal_index_digest(ixia_idx_t *idx, const char *ns, const char *table,
                                const char *after, const char *const *bounds, guint n,
                                GArray *out, ixia_error_t **err) {
  index_walk_t w = {.now = ixia_expiry_now()};
  ixia_ae_cutter_init(&w.cut, bounds, n, out);
  if (!ixia_idx_foreach_live(idx, ns, table, after, after ? strlen(after) : 0, cut_one, &w, err))
    return FALSE;
  ixia_ae_cutter_finish(&w.cut);
  return TRUE;
}

static gboolean index_ranges(void *ud, const char *after, const char *const *bounds, guint n,
                             GArray *out, ixia_error_t **err) {
  side_t *s = ud;
  return ixia_heal_index_digest(s->h->idx, s->ns, s->table, after, bounds, n, out, err);
}

static gboolean list_one(const char *key, size_t len, gint64 version, gint64 expire_at, void *ud) {
  index_walk_t *w = ud;
  char *k = g_strndup(key, len);
  if (*w->end && strcmp(k, w->end) > 0) {
    g_free(k);
    return FALSE;
  }
  if (ixia_record_expired(expire_at, w->now)) {
    g_free(k);
    return TRUE;
  }
  ixia_ae_kv_t kv = {k, version};
  g_array_append_val(w->kvs, kv);
  return TRUE;
}

static gboolean index_keys(void *ud, const char *after, const char *end, GArray *out,
                           ixia_error_t **err) {
  side_t *s = ud;
  index_walk_t w = {.kvs = out, .end = end, .now = s->now};
  return ixia_idx_foreach_live(s->h->idx, s->ns, s->table, after, strlen(after), list_one, &w, err);
}

static gboolean reindex_keys(side_t *s, ixia_error_t **err);

static gboolean differs(void *ud, const char *key, gint64 truth_version, gint64 index_version,
                        gint64 store_version, const char *leaf_after, ixia_error_t **err) {
  (void)truth_version, (void)index_version, (void)leaf_after;
  side_t *s = ud;
  g_ptr_array_add(s->keys, g_strdup(key));
  g_array_append_val(s->key_versions, store_version);
  /* A repair reindexes as it goes: memory stays bounded by one fetch. */
  return !s->repair || s->keys->len < FETCH_KEYS || reindex_keys(s, err);
}

static const ixia_ae_source_t SOURCE = {truth_ranges, index_ranges, truth_keys, index_keys, differs};
static const ixia_ae_opts_t OPTS = {PAGE_KEYS, FANOUT, LEAF_KEYS};

static void side_init(side_t *s, ixia_heal_t *h, ixia_client_t *api, const char *ns,
                      const char *table, const GArray *owned, gint32 partition_count) {
  memset(s, 0, sizeof *s);
  s->h = h;
  s->api = api;
  s->ns = ns;
  s->table = table;
  s->partition_count = partition_count;
  s->partitions = (const gint32 *)(void *)owned->data;
  s->n_partitions = owned->len;
  s->now = ixia_expiry_now();
  s->keys = g_ptr_array_new_with_free_func(g_free);
  s->key_versions = g_array_new(FALSE, FALSE, sizeof(gint64));
}

static void side_clear(side_t *s) {
  g_ptr_array_unref(s->keys);
  g_array_unref(s->key_versions);
}

/* The current state of keys[from, from + n) in the store, as events. */
static GPtrArray *current_events(side_t *s, guint from, guint n, ixia_error_t **err) {
  GPtrArray *events = NULL;
  if (!ixia_client_current_events(s->api, s->ns, s->table,
                                  (const char *const *)s->keys->pdata + from, n, &events, err))
    return NULL;
  return events;
}

/* Repair: reindexes the current state of every differing key. */
static gboolean reindex_keys(side_t *s, ixia_error_t **err) {
  gboolean ok = TRUE;
  for (guint from = 0; ok && from < s->keys->len; from += FETCH_KEYS) {
    guint n = MIN(FETCH_KEYS, s->keys->len - from);
    GPtrArray *events = current_events(s, from, n, err);
    ok = events && apply_events(s->h, events, &s->applied, err);
    if (events) g_ptr_array_unref(events);
  }
  g_ptr_array_set_size(s->keys, 0);
  g_array_set_size(s->key_versions, 0);
  return ok;
}

/* ---------- repair ---------- */

/* The tables to compare: every schema the store has, applied first (a
 * shard that lost the schema events cannot index their documents). */
static GPtrArray *fetch_and_apply_schemas(ixia_heal_t *h, ixia_client_t *api, ixia_error_t **err) {
  GPtrArray *schemas = NULL;
  if (!ixia_client_schema_events(api, &schemas, err)) return NULL;
  if (!apply_events(h, schemas, NULL, err)) g_clear_pointer(&schemas, g_ptr_array_unref);
  return schemas;
}

static gboolean repair(ixia_heal_t *h, guint64 *documents, ixia_error_t **err) {
  ixia_client_t *api = client(h, err);
  if (!api) return FALSE;
  gint32 count = 0;
  const GArray *owned = ixia_indexer_partitions(h->ix, &count);
  GPtrArray *schemas = fetch_and_apply_schemas(h, api, err);
  gboolean ok = schemas != NULL;
  for (guint i = 0; ok && i < schemas->len && !stopping(h); i++) {
    IxiaChangeEvent *e = g_ptr_array_index(schemas, i);
    side_t s;
    side_init(&s, h, api, e->ns, e->table, owned, count);
    s.repair = TRUE;
    ixia_ae_stats_t st = {0};
    /* The differing keys of each listing page are fetched and reindexed
     * as they accumulate (differs), the rest at the end. */
    ok = ixia_ae_compare_keys(&SOURCE, &s, &OPTS, &st, err) && reindex_keys(&s, err);
    *documents += s.applied;
    if (ok && st.differing)
      IXIA_INFO("repair: %s.%s: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                " documents differed from the store, %u reindexed",
                e->ns, e->table, st.differing, st.truth_keys, s.applied);
    side_clear(&s);
  }
  if (schemas) g_ptr_array_unref(schemas);
  if (ok && stopping(h)) ok = ixia_error_set(err, IXIA_EUNAVAILABLE, "stopping");
  return ok;
}

static void run_repair(ixia_heal_t *h, gint64 *retry_us) {
  atomic_store(&h->running, 1);
  atomic_store(&h->requested, 0);
  gint64 t0 = g_get_monotonic_time();
  atomic_store_explicit(&h->running_since, t0, memory_order_relaxed);
  g_mutex_lock(&h->lock);
  IXIA_WARN("repair: rebuilding this shard's view from the truth store (%s)",
            h->last_reason ? h->last_reason : "requested");
  g_mutex_unlock(&h->lock);
  guint64 documents = 0;
  ixia_error_t *err = NULL;
  gboolean ok = repair(h, &documents, &err);
  gint64 ms = (g_get_monotonic_time() - t0) / 1000;
  atomic_fetch_add_explicit(&h->repaired_documents, documents, memory_order_relaxed);
  if (ok) {
    atomic_fetch_add_explicit(&h->repairs, 1, memory_order_relaxed);
    atomic_store_explicit(&h->last_repair_ms, ms, memory_order_relaxed);
    set_error(h, NULL);
    IXIA_WARN("repair: done in %.1f s: %" G_GUINT64_FORMAT " documents reindexed from the truth store",
              (double)ms / 1000.0, documents);
    *retry_us = RETRY_MIN_US;
  } else {
    atomic_fetch_add_explicit(&h->repair_failures, 1, memory_order_relaxed);
    set_error(h, err->message);
    client_drop(h);
    if (!stopping(h))
      IXIA_ERROR("repair failed after %.1f s: %s; retrying in %.1f s", (double)ms / 1000.0,
                 err->message, (double)*retry_us / 1e6);
    /* Still wanted: the shard still misses what it missed. */
    atomic_store(&h->requested, 1);
    atomic_store(&h->running, 0);
    ixia_error_destroy(err);
    nap(h, g_get_monotonic_time() + *retry_us, FALSE);
    *retry_us = MIN(*retry_us * 2, RETRY_MAX_US);
    return;
  }
  atomic_store(&h->running, 0);
}

/* ---------- anti-entropy ---------- */

static gint64 json_int(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(v) ? (gint64)v->valuedouble : -1;
}

/* Waits until replication has acknowledged `version` and the shard has
 * applied its partitions up to their ends. */
static gboolean wait_caught_up(ixia_heal_t *h, ixia_client_t *api, gint64 version, ixia_error_t **err) {
  gint64 deadline = g_get_monotonic_time() + RECHECK_WAIT_US;
  for (;;) {
    char *json = NULL;
    if (!ixia_client_stats(api, &json, err)) return FALSE;
    cJSON *o = cJSON_Parse(json);
    g_free(json);
    gint64 acked = json_int(o, "replication_checkpoint");
    cJSON_Delete(o);
    if (acked >= version) break;
    if (g_get_monotonic_time() >= deadline)
      return ixia_error_set(err, IXIA_ENOTCAUGHTUP,
                            "replication has not acknowledged version %" G_GINT64_FORMAT
                            " (at %" G_GINT64_FORMAT ")",
                            version, acked);
    if (!nap(h, g_get_monotonic_time() + 100 * 1000, FALSE))
      return ixia_error_set(err, IXIA_EUNAVAILABLE, "stopping");
  }
  return ixia_indexer_wait_caught_up(h->ix, deadline, err);
}

/* Re-checks the keys a walk found different: once the shard holds every
 * edit up to the listing's version, a key whose store version is not newer
 * than that and still differs is a divergence; it is repaired. */
static gboolean recheck(side_t *s, ixia_error_t **err) {
  ixia_heal_t *h = s->h;
  if (s->keys->len == 0) return TRUE;
  gint64 horizon = 0;
  for (guint i = 0; i < s->key_versions->len; i++)
    horizon = MAX(horizon, g_array_index(s->key_versions, gint64, i));
  if (!wait_caught_up(h, s->api, horizon, err)) return FALSE;
  atomic_fetch_add_explicit(&h->ae_candidates, s->keys->len, memory_order_relaxed);
  gboolean ok = TRUE;
  for (guint from = 0; ok && from < s->keys->len; from += FETCH_KEYS) {
    guint n = MIN(FETCH_KEYS, s->keys->len - from);
    GPtrArray *events = current_events(s, from, n, err);
    ok = events != NULL;
    GPtrArray *fix = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; ok && i < n; i++) {
      IxiaChangeEvent *e = g_ptr_array_index(events, i);
      gint64 listed = g_array_index(s->key_versions, gint64, from + i);
      gboolean present, deleted;
      gint64 iv, expire_at;
      ok = ixia_idx_doc_record(h->idx, s->ns, s->table, (const char *)e->key->data, e->key->len,
                               &present, &deleted, &iv, &expire_at, err);
      gboolean live = ok && present && !deleted && !ixia_record_expired(expire_at, ixia_expiry_now());
      gboolean bad;
      if (e->op == IXIA_CHANGE_OP_PUT)
        bad = e->version <= listed && (!live || iv != e->version);
      else
        bad = live && iv <= listed;
      if (ok && bad) {
        char *key = g_strndup((const char *)e->key->data, e->key->len);
        IXIA_WARN("anti-entropy: %s.%s key %s diverged (store %s%" G_GINT64_FORMAT ", index %s%" G_GINT64_FORMAT
                  "); repairing it",
                  s->ns, s->table, key, e->op == IXIA_CHANGE_OP_PUT ? "version " : "absent at ",
                  e->version, live ? "version " : "absent, ", live ? iv : 0);
        g_free(key);
        g_ptr_array_add(fix, g_object_ref(e));
      }
    }
    if (ok && fix->len) {
      atomic_fetch_add_explicit(&h->ae_divergent, fix->len, memory_order_relaxed);
      ok = apply_events(h, fix, NULL, err);
    }
    g_ptr_array_unref(fix);
    if (events) g_ptr_array_unref(events);
  }
  g_ptr_array_set_size(s->keys, 0);
  g_array_set_size(s->key_versions, 0);
  return ok;
}

static gboolean ae_pass(ixia_heal_t *h, ixia_error_t **err) {
  ixia_client_t *api = client(h, err);
  if (!api) return FALSE;
  gint32 count = 0;
  const GArray *owned = ixia_indexer_partitions(h->ix, &count);
  GPtrArray *schemas = NULL;
  if (!ixia_client_schema_events(api, &schemas, err)) return FALSE;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < schemas->len; i++) {
    IxiaChangeEvent *e = g_ptr_array_index(schemas, i);
    side_t s;
    side_init(&s, h, api, e->ns, e->table, owned, count);
    s.pace = TRUE;
    ixia_ae_stats_t st = {0};
    ok = ixia_ae_walk(&SOURCE, &s, &OPTS, &st, err) && recheck(&s, err);
    atomic_fetch_add_explicit(&h->ae_keys, st.truth_keys, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->ae_ranges_differing, st.ranges_differing, memory_order_relaxed);
    side_clear(&s);
  }
  g_ptr_array_unref(schemas);
  return ok;
}

static void run_ae_pass(ixia_heal_t *h) {
  gint64 t0 = g_get_monotonic_time();
  ixia_error_t *err = NULL;
  if (ae_pass(h, &err)) {
    atomic_fetch_add_explicit(&h->ae_passes, 1, memory_order_relaxed);
    atomic_store_explicit(&h->ae_last_pass_ms, (g_get_monotonic_time() - t0) / 1000, memory_order_relaxed);
    return;
  }
  client_drop(h);
  /* Interrupted by a repair request or a stop: nothing to report. */
  if (atomic_load(&h->requested) || stopping(h)) {
    ixia_error_destroy(err);
    return;
  }
  atomic_fetch_add_explicit(&h->ae_failures, 1, memory_order_relaxed);
  IXIA_WARN("anti-entropy pass failed: %s; next pass in %" G_GINT64_FORMAT " s", err->message,
            h->ae_pause_us / G_USEC_PER_SEC);
  ixia_error_destroy(err);
}

/* ---------- the thread ---------- */

static gpointer heal_main(gpointer data) {
  ixia_heal_t *h = data;
  gint64 retry_us = RETRY_MIN_US;
  gboolean ae = h->ae_rate > 0 && (*h->api || *h->api_port_file);
  /* The first pass waits a pause too: a starting stack is busy enough. */
  gint64 next_ae = g_get_monotonic_time() + h->ae_pause_us;
  while (!stopping(h)) {
    if (atomic_load(&h->requested) && h->self_heal) {
      run_repair(h, &retry_us);
      continue;
    }
    if (ae && g_get_monotonic_time() >= next_ae) {
      run_ae_pass(h);
      next_ae = g_get_monotonic_time() + h->ae_pause_us;
      continue;
    }
    nap(h, ae ? next_ae : g_get_monotonic_time() + 10 * G_USEC_PER_SEC, TRUE);
  }
  return NULL;
}

ixia_heal_t *ixia_heal_new(const ixia_config_t *cfg, ixia_indexer_t *ix) {
  ixia_heal_t *h = g_new0(ixia_heal_t, 1);
  h->ix = ix;
  h->idx = ixia_indexer_index(ix);
  h->self_heal = ixia_config_bool(cfg, "indexer.self_heal");
  h->api = g_strdup(ixia_config_str(cfg, "indexer.api"));
  h->api_port_file = g_strdup(ixia_config_str(cfg, "indexer.api_port_file"));
  h->ae_rate = ixia_config_int(cfg, "indexer.anti_entropy_keys_per_s");
  h->ae_pause_us = ixia_config_int(cfg, "indexer.anti_entropy_pause_s") * G_USEC_PER_SEC;
  g_mutex_init(&h->lock);
  g_cond_init(&h->cond);
  return h;
}

void ixia_heal_start(ixia_heal_t *h) {
  if (!*h->api && !*h->api_port_file)
    IXIA_INFO("heal: no indexer.api: this shard cannot repair itself from the truth store and runs "
              "no anti-entropy");
  h->thread = g_thread_new("ixia-heal", heal_main, h);
}

void ixia_heal_stop(ixia_heal_t *h) {
  if (!h) return;
  g_mutex_lock(&h->lock);
  h->stop = TRUE;
  if (h->client) ixia_client_interrupt(h->client);
  g_cond_broadcast(&h->cond);
  g_mutex_unlock(&h->lock);
  if (h->thread) g_thread_join(h->thread);
  h->thread = NULL;
}

void ixia_heal_destroy(ixia_heal_t *h) {
  if (!h) return;
  ixia_heal_stop(h);
  ixia_client_destroy(h->client);
  g_mutex_clear(&h->lock);
  g_cond_clear(&h->cond);
  g_free(h->api);
  g_free(h->api_port_file);
  g_free(h->last_reason);
  g_free(h->last_error);
  g_free(h);
}

void ixia_heal_request(ixia_heal_t *h, ixia_heal_trigger_t why, const char *detail) {
  atomic_fetch_add_explicit(&h->triggers[why], 1, memory_order_relaxed);
  gboolean fresh = !atomic_load(&h->requested) && !atomic_load(&h->running);
  g_mutex_lock(&h->lock);
  g_free(h->last_reason);
  h->last_reason = g_strdup_printf("%s: %s", TRIGGER_NAMES[why], detail);
  atomic_store(&h->requested, 1);
  g_cond_broadcast(&h->cond);
  g_mutex_unlock(&h->lock);
  if (!h->self_heal && fresh)
    IXIA_ERROR("this shard misses edits (%s: %s) and indexer.self_heal is off: rebuild it from a "
               "snapshot (docs/OPERATIONS.md)",
               TRIGGER_NAMES[why], detail);
  else if (fresh)
    IXIA_WARN("repair requested (%s): %s", TRIGGER_NAMES[why], detail);
}

gboolean ixia_heal_repairing(ixia_heal_t *h) {
  return h->self_heal && (atomic_load(&h->requested) || atomic_load(&h->running));
}

void ixia_heal_status(ixia_heal_t *h, cJSON *o) {
  cJSON_AddBoolToObject(o, "self_heal", h->self_heal);
  cJSON_AddBoolToObject(o, "repairing", ixia_heal_repairing(h));
  if (atomic_load(&h->running))
    cJSON_AddNumberToObject(o, "repair_running_s",
                            (double)(g_get_monotonic_time() - atomic_load_explicit(&h->running_since, memory_order_relaxed)) / 1e6);
  cJSON *t = cJSON_AddObjectToObject(o, "repair_triggers");
  for (int i = 0; i < IXIA_HEAL_N_TRIGGERS; i++)
    cJSON_AddNumberToObject(t, TRIGGER_NAMES[i], (double)atomic_load_explicit(&h->triggers[i], memory_order_relaxed));
#define COUNTER(name, field) \
  cJSON_AddNumberToObject(o, name, (double)atomic_load_explicit(&h->field, memory_order_relaxed))
  COUNTER("repairs", repairs);
  COUNTER("repair_failures", repair_failures);
  COUNTER("repaired_documents", repaired_documents);
  COUNTER("last_repair_ms", last_repair_ms);
  COUNTER("anti_entropy_passes", ae_passes);
  COUNTER("anti_entropy_keys", ae_keys);
  COUNTER("anti_entropy_ranges_differing", ae_ranges_differing);
  COUNTER("anti_entropy_rechecked", ae_candidates);
  COUNTER("anti_entropy_divergent", ae_divergent);
  COUNTER("anti_entropy_failures", ae_failures);
  COUNTER("anti_entropy_last_pass_ms", ae_last_pass_ms);
#undef COUNTER
  cJSON_AddNumberToObject(o, "anti_entropy_keys_per_s", (double)h->ae_rate);
  g_mutex_lock(&h->lock);
  if (h->last_reason) cJSON_AddStringToObject(o, "last_repair_reason", h->last_reason);
  if (h->last_error) cJSON_AddStringToObject(o, "heal_error", h->last_error);
  g_mutex_unlock(&h->lock);
}
