/* The query fan-out of ixia-query-api (fanout.h): one query sent to every
 * index shard, the answers merged, every hit verified against the truth
 * store, and cursors that page without repeats or gaps.
 *
 * A query runs one of two ways. Most are sent to the shards by the I/O
 * thread that read the call and finished there when the last answer comes
 * (no thread hand-off; "queries on the API's I/O threads" below says which
 * ones). The rest (min_version, aggregations, large requests, no idle
 * pooled connection) run on a worker, which calls the shards in parallel
 * through a thread pool and waits for all of them. Either way a shard
 * answers a packed page (search_page, common/hitpage.h) whose hits are
 * read where they stand (read_answer); totals add, aggregation partials
 * merge by the rules of query/, a sorted page is a k-way merge of the
 * shards' sorted runs (merge_pages), and a page's hits are re-read from
 * the store in one multi-get. Cursors are opaque, prefixed base64 blobs holding each shard's
 * position (and, for sorted pages, the last hit's sort values). */
#include "fanout.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <thrift/c_glib/thrift_application_exception.h>

#include "bytes.h"
#include "client.h"
#include "hitpage.h"
#include "json.h"
#include "log.h"
#include "server.h"
#include "testhook.h"
#include "watchdog.h"
#include "wire.h"

/* Cursor: "c1:" + base64 of one big-endian int64 per shard: the last
 * internal id returned from that shard, -1 before its first, -2 once it has
 * no more hits. Opaque to clients; checked on the way back in. */
#define CURSOR_PREFIX "c1:"
#define POS_START (-1)
#define POS_DONE (-2)
/* allow_partial: how long past the deadline a shard may still answer (a
 * shard gives up at the deadline itself and says so). */
#define PARTIAL_GRACE_US (200 * 1000)
/* How long past the deadline a shard's answer is waited for without
 * allow_partial (a shard gives up at the deadline itself): then the shard
 * fails with DEADLINE_EXCEEDED, on either path (a worker's blocking call
 * or an I/O thread's watch). */
#define ANSWER_GRACE_US (5 * G_USEC_PER_SEC)

typedef struct {
  char *address;
  GAsyncQueue *idle; /* ixia_shard_client_t* ready for reuse */
} shard_t;

struct ixia_search {
  ixia_store_t *store;
  ixia_fanout_acked_fn acked;
  void *acked_ud;
  ixia_query_limits_t lim;
  shard_t *shards;
  guint n_shards;
  GThreadPool *pool; /* parallel shard calls */
  GThreadPool *retry_pool; /* queries an I/O thread could not finish */
  ixia_watchdog_t *watchdog; /* ends a worker's shard call at its answer_by */
  _Atomic guint64 queries, query_errors, shard_calls, shard_errors, hits_returned, stale_dropped;
  _Atomic guint64 rechecked; /* hits evaluated again on the stored document */
  _Atomic guint64 pages_on_worker; /* pages an I/O thread left to a worker (not in memory) */
  _Atomic guint64 merges_on_worker; /* aggregation merges an I/O thread left to a worker */
  _Atomic guint64 lane_calls, lane_sends; /* calls sent on lanes, and the sends that carried them */
  gboolean lanes_on;  /* query.pipeline_shard_calls */
  guint gen;          /* tells this fanout's lane tables from an earlier one's */
  GMutex lanes_lock;
  GPtrArray *lane_tables; /* lane_t*[n_shards * LANES_PER_SHARD] of each I/O thread that opened one */
};

/* Numbers the fanouts made, so a thread's lane table of one is not taken
 * for another's (lanes, below). */
static guint lane_generation;
struct lane;
static struct lane *lane_find(ixia_fanout_t *s, guint shard, gboolean *more);
static void lanes_free(ixia_fanout_t *s);

/* What the shard calls of one query share; freed by the last holder. A
 * query with allow_partial stops waiting at its deadline: it abandons the
 * round, and calls still running then free their own results. */
typedef struct {
  GMutex lock;
  GCond cond;
  guint pending;
  _Atomic gint refs;
  gboolean abandoned;
} round_t;

/* One sort value of a hit: its encoded bytes (in its shard's page), or
 * missing. */
typedef struct {
  const guint8 *p;
  gsize len;
  gboolean has;
} asval_t;

/* A hit of a shard's answer. */
typedef struct {
  const char *key; /* in its shard's page */
  gint64 id, version;
  double score;    /* NAN when absent */
  gint sort_at;    /* sorted pages: index of its first value in the ahits_t's svals; -1: absent */
  guint n_sort;    /* how many values it has there */
} ahit_t;

/* A shard's hits, read in place from its answer's page (read_answer):
 * keys and sort values point into the page, which the hits keep. */
typedef struct {
  GArray *list;     /* ahit_t */
  GArray *svals;    /* asval_t, the hits' sort values one after another */
  GByteArray *page; /* the answer's frame or array, holding the page */
} ahits_t;

static void ahits_free(ahits_t *a) {
  if (!a) return;
  g_array_free(a->list, TRUE);
  g_array_free(a->svals, TRUE);
  if (a->page) g_byte_array_unref(a->page);
  g_free(a);
}

/* One shard call of one query. */
typedef struct call call_t;
struct call {
  ixia_fanout_t *s;
  guint shard;
  char *request;
  cJSON *response; /* the answer's members but its hits */
  ahits_t *hits;   /* the answer's hits */
  ixia_error_t *err;
  /* a pool job: its round and the query's call to fill while not abandoned */
  round_t *round;
  call_t *dest;
  gint64 answer_by; /* monotonic us: past it the shard fails with a deadline error */
};

static void round_unref(round_t *r) {
  if (!(atomic_fetch_sub(&r->refs, 1) == 1)) return;
  g_mutex_clear(&r->lock);
  g_cond_clear(&r->cond);
  g_free(r);
}

static void counter_add(_Atomic guint64 *c, guint64 n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }

/* ---- a shard's answer ----
 *
 * A shard answers search_page with a packed page (common/hitpage.h): its
 * hits in binary, read where they stand (a page of 100 hits read from
 * JSON text was 16% of the API's CPU on sorted pages of 100, a tree 17%
 * before that), then its other members (totals, positions, aggregation
 * partials, explain) as one JSON object, parsed through cJSON. The page
 * comes from a shard, an ixia daemon; one that cannot be read fails the
 * call as malformed, and a hit the merge cannot use fails the merge. */

/* The answer's page [data, data + len), held by buf (taken), into c: its
 * hits into c->hits, its other members into c->response. FALSE: a page
 * that cannot be read. */
static gboolean read_answer(call_t *c, GByteArray *buf, const guint8 *data, gsize len) {
  ahits_t *a = c->hits = g_new0(ahits_t, 1);
  a->page = buf;
  a->list = g_array_new(FALSE, FALSE, sizeof(ahit_t));
  a->svals = g_array_new(FALSE, FALSE, sizeof(asval_t));
  ixia_hitpage_t pg;
  const char *meta;
  gsize meta_len;
  if (!ixia_hitpage_open(&pg, data, len, &meta, &meta_len)) return FALSE;
  c->response = cJSON_ParseWithLength(meta, meta_len);
  if (!cJSON_IsObject(c->response)) return FALSE;
  /* The hits written in place, room made at once: the count comes from
   * the shard, and a hit takes at least 17 bytes of the page. */
  guint cap = MIN(pg.left, (guint32)(len / 17)), n = 0;
  g_array_set_size(a->list, cap);
  ahit_t *out = (ahit_t *)(void *)a->list->data;
  ixia_hitpage_hit_t h;
  int r;
  while ((r = ixia_hitpage_next(&pg, &h)) > 0 && n < cap) {
    ahit_t *x = &out[n++];
    *x = (ahit_t){h.key, h.id, h.version, h.has_score ? h.score : NAN, -1, 0};
    if (!h.sort) continue;
    x->sort_at = (gint)a->svals->len;
    x->n_sort = h.n_sort;
    g_array_set_size(a->svals, a->svals->len + h.n_sort);
    asval_t *v = &g_array_index(a->svals, asval_t, x->sort_at);
    const guint8 *p = h.sort;
    for (guint k = 0; k < h.n_sort; k++) v[k].has = ixia_hitpage_value(&p, &v[k].p, &v[k].len);
  }
  g_array_set_size(a->list, n);
  return r == 0;
}

/* A shard's answer page [page, page + len) into c (its hits and other
 * members; buf, taken, holds the page), or the error c->err already holds,
 * or a malformed answer's, named after the shard. */
static void shard_settle(ixia_fanout_t *s, call_t *c, GByteArray *buf, const guint8 *page,
                         gsize len) {
  shard_t *sh = &s->shards[c->shard];
  if (buf && !c->err && !read_answer(c, g_steal_pointer(&buf), page, len)) {
    ixia_error_set(&c->err, IXIA_EINTERNAL, "index shard %s answered with a malformed page",
                   sh->address);
    g_clear_pointer(&c->response, cJSON_Delete);
    g_clear_pointer(&c->hits, ahits_free);
  }
  if (c->err) {
    counter_add(&s->shard_errors, 1);
    /* Down, unreachable or unable to answer: the shard, not the API. */
    if (c->err->code == IXIA_EUNAVAILABLE) c->err->code = IXIA_ESHARD;
    ixia_error_prefix(c->err, "shard %u (%s)", c->shard, sh->address);
  }
  if (buf) g_byte_array_unref(buf);
}

/* A transport failure on a pooled connection: the shard restarted, and
 * every connection pooled to it is dead. */
static void drop_idle(shard_t *sh) {
  for (ixia_shard_client_t *old; (old = g_async_queue_try_pop(sh->idle));)
    ixia_shard_client_destroy(old);
}

static void shard_call(ixia_fanout_t *s, call_t *c) {
  shard_t *sh = &s->shards[c->shard];
  counter_add(&s->shard_calls, 1);
  GByteArray *page = NULL;
  /* A pooled connection may have died with a shard restart; that shows only
   * on use, so a transport failure on one is retried once on a new one. */
  for (int attempt = 0; attempt < 2 && !c->err && !page; attempt++) {
    ixia_shard_client_t *client = g_async_queue_try_pop(sh->idle);
    gboolean pooled = client != NULL;
    /* Each call carries its own deadline; the connection's I/O timeout
     * bounds its sends. */
    if (!client) client = ixia_shard_client_new(sh->address, (gint64)s->lim.deadline_ms + 5000, &c->err);
    if (!client) break;
    /* The answer is waited for until answer_by, as an I/O thread's watch
     * waits: then the watchdog shuts the connection down, however the shard
     * paces its bytes, and the shard fails with the same deadline error. (A
     * late answer would come on this connection: it is closed.) */
    ixia_watch_t watch;
    ixia_watchdog_arm(s->watchdog, &watch, ixia_shard_client_fd(client), c->answer_by);
    IxiaIxiaError *xe = NULL;
    GError *gerr = NULL;
    gboolean ok =
        ixia_search_if_search_page(ixia_shard_client_iface(client), &page, c->request, &xe, &gerr);
    gboolean cut = ixia_watchdog_disarm(s->watchdog, &watch);
    /* A server-side error (an IxiaError, or an application exception the
     * generated client read whole) leaves the connection usable; a
     * transport error does not. */
    gboolean transport = !ok && xe == NULL && !(gerr && gerr->domain == THRIFT_APPLICATION_EXCEPTION_ERROR);
    if (transport && (cut || g_get_monotonic_time() >= c->answer_by)) {
      if (gerr) g_error_free(gerr);
      ixia_shard_client_destroy(client);
      ixia_error_set(&c->err, IXIA_EDEADLINE, "no answer within the query's deadline");
      break;
    }
    if (transport && pooled && attempt == 0) {
      if (gerr) g_error_free(gerr);
      ixia_shard_client_destroy(client);
      drop_idle(sh);
      g_clear_pointer(&page, g_byte_array_unref);
      continue;
    }
    ixia_shard_client_check(client, ok, xe, gerr, &c->err);
    /* (Answered as the deadline passed: the answer stands, the connection,
     * shut down, does not.) */
    if (transport || cut) ixia_shard_client_destroy(client);
    else g_async_queue_push(sh->idle, client);
  }
  /* (Settled with the array, which holds the page.) */
  shard_settle(s, c, page, page ? page->data : NULL, page ? page->len : 0);
}

static void pool_main(gpointer data, gpointer user) {
  call_t *job = data;
  (void)user;
  shard_call(job->s, job);
  round_t *r = job->round;
  g_mutex_lock(&r->lock);
  if (!r->abandoned) {
    job->dest->response = job->response;
    job->dest->hits = job->hits;
    job->dest->err = job->err;
  } else {
    cJSON_Delete(job->response);
    ahits_free(job->hits);
    ixia_error_destroy(job->err);
  }
  if (--r->pending == 0) g_cond_signal(&r->cond);
  g_mutex_unlock(&r->lock);
  round_unref(r);
  g_free(job->request);
  g_free(job);
}

static void retry_main(gpointer data, gpointer user);

ixia_fanout_t *ixia_fanout_new(const ixia_config_t *cfg, ixia_store_t *store,
                               ixia_fanout_acked_fn acked, void *acked_ud, ixia_error_t **err) {
  ixia_fanout_t *s = g_new0(ixia_fanout_t, 1);
  s->store = store;
  s->acked = acked;
  s->acked_ud = acked_ud;
  ixia_query_limits_from_config(cfg, &s->lim);
  g_auto(GStrv) parts = g_strsplit(ixia_config_str(cfg, "query.indexers"), ",", -1);
  GArray *shards = g_array_new(FALSE, TRUE, sizeof(shard_t));
  for (guint i = 0; parts[i]; i++) {
    char *a = g_strstrip(parts[i]);
    if (!*a) continue;
    if (!ixia_address_check(a, "query.indexers", err)) {
      for (guint j = 0; j < shards->len; j++) {
        g_free(g_array_index(shards, shard_t, j).address);
        g_async_queue_unref(g_array_index(shards, shard_t, j).idle);
      }
      g_array_free(shards, TRUE);
      g_free(s);
      return NULL;
    }
    shard_t sh = {g_strdup(a), g_async_queue_new_full((GDestroyNotify)ixia_shard_client_destroy)};
    g_array_append_val(shards, sh);
  }
  s->n_shards = shards->len;
  s->shards = (shard_t *)g_array_free(shards, FALSE);
  if (s->n_shards > 1)
    s->pool = g_thread_pool_new(pool_main, NULL, (gint)(8 * s->n_shards), FALSE, NULL);
  s->retry_pool = g_thread_pool_new(retry_main, NULL, 4, FALSE, NULL);
  s->watchdog = ixia_watchdog_new();
  s->lanes_on = ixia_config_bool(cfg, "query.pipeline_shard_calls");
  s->gen = (guint)g_atomic_int_add(&lane_generation, 1) + 1;
  g_mutex_init(&s->lanes_lock);
  s->lane_tables = g_ptr_array_new();
  return s;
}

void ixia_fanout_destroy(ixia_fanout_t *s) {
  if (!s) return;
  if (s->retry_pool) g_thread_pool_free(s->retry_pool, FALSE, TRUE);
  if (s->pool) g_thread_pool_free(s->pool, FALSE, TRUE);
  ixia_watchdog_destroy(s->watchdog);
  lanes_free(s);
  for (guint i = 0; i < s->n_shards; i++) {
    g_free(s->shards[i].address);
    g_async_queue_unref(s->shards[i].idle);
  }
  g_free(s->shards);
  g_free(s);
}

void ixia_fanout_get_stats(ixia_fanout_t *s, ixia_fanout_stats_t *out) {
  out->shards = s->n_shards;
  out->queries = atomic_load_explicit(&s->queries, memory_order_relaxed);
  out->query_errors = atomic_load_explicit(&s->query_errors, memory_order_relaxed);
  out->shard_calls = atomic_load_explicit(&s->shard_calls, memory_order_relaxed);
  out->lane_calls = atomic_load_explicit(&s->lane_calls, memory_order_relaxed);
  out->lane_sends = atomic_load_explicit(&s->lane_sends, memory_order_relaxed);
  out->shard_errors = atomic_load_explicit(&s->shard_errors, memory_order_relaxed);
  out->hits_returned = atomic_load_explicit(&s->hits_returned, memory_order_relaxed);
  out->stale_hits_dropped = atomic_load_explicit(&s->stale_dropped, memory_order_relaxed);
  out->hits_rechecked = atomic_load_explicit(&s->rechecked, memory_order_relaxed);
  out->pages_on_worker = atomic_load_explicit(&s->pages_on_worker, memory_order_relaxed);
  out->merges_on_worker = atomic_load_explicit(&s->merges_on_worker, memory_order_relaxed);
}

char *ixia_fanout_shard_list(const ixia_fanout_t *s) {
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < s->n_shards; i++)
    g_string_append_printf(out, "%s%s", i ? "," : "", s->shards[i].address);
  return g_string_free(out, FALSE);
}

gboolean ixia_fanout_cursor_decode(guint n_shards, const char *after, gint64 *pos,
                                   ixia_error_t **err) {
  for (guint i = 0; i < n_shards; i++) pos[i] = POS_START;
  if (!after) return TRUE;
  gsize n = 0;
  guchar *raw = NULL;
  if (g_str_has_prefix(after, CURSOR_PREFIX)) raw = g_base64_decode(after + strlen(CURSOR_PREFIX), &n);
  gboolean ok = raw && n == 8 * (gsize)n_shards;
  for (guint i = 0; ok && i < n_shards; i++) {
    guint64 v = 0;
    for (int b = 0; b < 8; b++) v = v << 8 | raw[8 * i + b];
    pos[i] = (gint64)v;
    ok = pos[i] >= POS_DONE && pos[i] <= G_MAXUINT32;
  }
  g_free(raw);
  if (!ok)
    return ixia_error_set(err, IXIA_EINVAL,
                          "after: not a cursor from this query API's \"next\" (or the number of "
                          "index shards changed since)");
  return TRUE;
}

char *ixia_fanout_cursor_encode(guint n_shards, const gint64 *pos) {
  guchar *raw = g_malloc(8 * (gsize)n_shards);
  for (guint i = 0; i < n_shards; i++)
    for (int b = 0; b < 8; b++) raw[8 * i + b] = (guchar)((guint64)pos[i] >> (56 - 8 * b));
  char *b64 = g_base64_encode(raw, 8 * (gsize)n_shards);
  char *out = g_strconcat(CURSOR_PREFIX, b64, NULL);
  g_free(b64);
  g_free(raw);
  return out;
}

#define SORT_CURSOR_PREFIX "s1:"

void ixia_sort_cursor_clear(ixia_sort_cursor_t *c) {
  for (guint i = 0; c->values && i < c->n_values; i++)
    if (c->values[i]) g_bytes_unref(c->values[i]);
  g_free(c->values);
  g_free(c->epoch);
  g_free(c->seq);
  g_free(c->key);
  memset(c, 0, sizeof *c);
}

/* A bounded reader of the cursor's bytes. */
typedef struct {
  const guint8 *p;
  gsize left;
} rd_t;

static gboolean rd_be(rd_t *r, guint n, guint64 *out) {
  if (r->left < n) return FALSE;
  *out = 0;
  for (guint i = 0; i < n; i++) *out = *out << 8 | r->p[i];
  r->p += n;
  r->left -= n;
  return TRUE;
}

gboolean ixia_fanout_sort_cursor_decode(const char *after, guint n_shards, guint n_values,
                                        guint32 sig, ixia_sort_cursor_t *out, ixia_error_t **err) {
  memset(out, 0, sizeof *out);
  gsize n = 0;
  guchar *raw = NULL;
  if (after && g_str_has_prefix(after, SORT_CURSOR_PREFIX))
    raw = g_base64_decode(after + strlen(SORT_CURSOR_PREFIX), &n);
  rd_t r = {raw, raw ? n : 0};
  guint64 v = 0, shards = 0, nv = 0;
  gboolean ok = raw && rd_be(&r, 4, &v) && rd_be(&r, 2, &shards) && shards == n_shards;
  const char *why = "not a cursor from this query API's \"next\" for a sorted query (or the number of index shards changed since)";
  if (ok && (guint32)v != sig) {
    ok = FALSE;
    why = "the cursor is from a query with another sort";
  }
  out->sig = (guint32)v;
  out->n_shards = n_shards;
  out->epoch = g_new0(guint64, MAX(n_shards, 1));
  out->seq = g_new0(guint64, MAX(n_shards, 1));
  for (guint i = 0; ok && i < n_shards; i++) ok = rd_be(&r, 8, &out->epoch[i]) && rd_be(&r, 8, &out->seq[i]);
  ok = ok && rd_be(&r, 1, &nv) && nv == n_values;
  out->values = g_new0(GBytes *, MAX(n_values, 1));
  out->n_values = n_values;
  for (guint i = 0; ok && i < n_values; i++) {
    guint64 has = 0, len = 0;
    ok = rd_be(&r, 1, &has) && has <= 1 && rd_be(&r, 4, &len) && (has || len == 0) && len <= r.left;
    if (ok && has) out->values[i] = g_bytes_new(r.p, len);
    if (ok) r.p += len, r.left -= len;
  }
  guint64 klen = 0;
  ok = ok && rd_be(&r, 4, &klen) && klen == r.left && memchr(r.p, 0, klen) == NULL;
  if (ok) {
    out->key = g_strndup((const char *)r.p, klen);
    out->key_len = klen;
  }
  g_free(raw);
  if (!ok) {
    ixia_sort_cursor_clear(out);
    return ixia_error_set(err, IXIA_EINVAL, "after: %s", why);
  }
  return TRUE;
}

static void put_be(GByteArray *b, guint n, guint64 v) {
  guint8 t[8];
  for (guint i = 0; i < n; i++) t[i] = (guint8)(v >> (8 * (n - 1 - i)));
  g_byte_array_append(b, t, n);
}

char *ixia_fanout_sort_cursor_encode(const ixia_sort_cursor_t *c) {
  GByteArray *b = g_byte_array_new();
  put_be(b, 4, c->sig);
  put_be(b, 2, c->n_shards);
  for (guint i = 0; i < c->n_shards; i++) {
    put_be(b, 8, c->epoch[i]);
    put_be(b, 8, c->seq[i]);
  }
  put_be(b, 1, c->n_values);
  for (guint i = 0; i < c->n_values; i++) {
    gsize n = 0;
    const guint8 *p = c->values[i] ? g_bytes_get_data(c->values[i], &n) : NULL;
    put_be(b, 1, p != NULL || c->values[i] != NULL);
    put_be(b, 4, n);
    if (n) g_byte_array_append(b, p, (guint)n);
  }
  put_be(b, 4, c->key_len);
  if (c->key_len) g_byte_array_append(b, (const guint8 *)c->key, (guint)c->key_len);
  char *b64 = g_base64_encode(b->data, b->len);
  char *out = g_strconcat(SORT_CURSOR_PREFIX, b64, NULL);
  g_free(b64);
  g_byte_array_free(b, TRUE);
  return out;
}

/* Waits, bounded by deadline_us, until replication acknowledged min_version. */
static gboolean wait_replicated(ixia_fanout_t *s, gint64 min_version, gint64 deadline_us,
                                ixia_error_t **err) {
  gint64 latest = ixia_store_latest_version(s->store);
  if (min_version > latest)
    return ixia_error_set(err, IXIA_EINVAL,
                          "min_version %" G_GINT64_FORMAT " is newer than the store's latest "
                          "version %" G_GINT64_FORMAT,
                          min_version, latest);
  gint64 wait_until = MIN(deadline_us, g_get_monotonic_time() + (gint64)s->lim.max_wait_ms * 1000);
  gint64 acked;
  while ((acked = s->acked(s->acked_ud)) < min_version) {
    if (g_get_monotonic_time() >= wait_until)
      return ixia_error_set(err, IXIA_ENOTCAUGHTUP,
                            "min_version %" G_GINT64_FORMAT " not replicated within the wait "
                            "(query.max_wait_ms / timeout_ms); replication has acknowledged %" G_GINT64_FORMAT,
                            min_version, acked);
    g_usleep(1000);
  }
  return TRUE;
}

/* The "doc" of a verified hit: the stored text, or the requested fields of
 * it (straight from the text; through a tree when the text cannot be
 * followed that way). */
static void append_doc(const ixia_query_t *q, const ixia_store_doc_t *d, GString *out) {
  if (!q->fields) {
    g_string_append_len(out, d->json, (gssize)d->json_len);
    return;
  }
  guint nf = g_strv_length(q->fields);
  if (ixia_json_project_table(d->json, d->json_len, d->members, d->n_members,
                              (const char *const *)q->fields, nf, out, NULL))
    return;
  cJSON *doc = ixia_json_parse_stored(d->json, d->json_len);
  gboolean all;
  cJSON *sub = ixia_json_project(doc, (const char *const *)q->fields, nf, &all);
  char *text = ixia_json_print(sub);
  g_string_append(out, text ? text : "{}");
  g_free(text);
  cJSON_Delete(sub);
  cJSON_Delete(doc);
}

/* The field paths the filter reads, once each, into out. */
static void filter_paths(const ixia_filter_t *f, GPtrArray *out) {
  if (!f) return;
  if (f->field) {
    gboolean have = FALSE;
    for (guint i = 0; i < out->len && !have; i++) have = strcmp(out->pdata[i], f->field->field) == 0;
    if (!have) g_ptr_array_add(out, f->field->field);
  }
  for (guint i = 0; i < f->n_children; i++) filter_paths(f->children[i], out);
}

/* Whether a stored document matches the filter, evaluated on the members
 * the filter reads (paths) copied out of its text into a small tree; the
 * whole document is parsed only when the text cannot be followed that way
 * (a path through an array of objects). A 1 KB document parsed whole for
 * a `not` was the largest cost of such a page (its hits are re-checked
 * even at the version the shard indexed). */
static gboolean stored_doc_matches(const ixia_query_t *q, const ixia_store_doc_t *d,
                                   const GPtrArray *paths) {
  cJSON *doc = NULL;
  if (paths->len) {
    GString *t = g_string_sized_new(128);
    if (ixia_json_project_table(d->json, d->json_len, d->members, d->n_members,
                                (const char *const *)paths->pdata, paths->len, t, NULL))
      doc = cJSON_ParseWithLength(t->str, t->len);
    g_string_free(t, TRUE);
  }
  if (!doc) doc = ixia_json_parse_stored(d->json, d->json_len);
  gboolean match = doc && ixia_query_match_doc(q, doc);
  cJSON_Delete(doc);
  return match;
}

/* A hit a shard proposed for this page. */
typedef struct {
  const char *key; /* borrowed from the shard's response */
  gint64 version;  /* the version the shard indexed */
  guint shard;     /* which shard proposed it */
  guint extra_at, extra_len; /* members the hit shows after "doc" (",\"sort\":[...]"): in the page's extras */
  gboolean recheck; /* its version does not vouch for the match (call_vouches) */
} cand_t;

/* Whether a hit the shard returned at the version the store still holds
 * matches the filter there, so that the hit needs no re-check. Not when the
 * shard's search overlapped a batch it published ("settled": false): a hit
 * may then pair a version with the values it had before. And for a filter
 * with a negation, only when the shard says every document was indexed
 * under the table's current indexes ("schema_current"): one written before
 * a field was declared, not yet backfilled, matches "not" on that field in
 * the index whatever its value (ixia_query_filter_monotone). */
static gboolean call_vouches(const ixia_query_t *q, const call_t *c) {
  if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c->response, "settled"))) return FALSE;
  return ixia_query_filter_monotone(q) ||
         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c->response, "schema_current"));
}

/* How far ahead of the document being projected the next ones' first
 * bytes are fetched. The documents come from the cache or RocksDB's block
 * cache, scattered over memory: projecting a member walks the text from
 * its start, a chain of cache misses per document when nothing asked for
 * the lines before. */
#define PREFETCH_DOCS 4
#define PREFETCH_BYTES 256

static inline void prefetch_doc(const ixia_store_doc_t *d) {
  if (!d->found) return;
  /* Every line the first PREFETCH_BYTES touch, wherever the text starts. */
  const char *end = d->json + MIN(d->json_len, PREFETCH_BYTES);
  for (const char *p = (const char *)((guintptr)d->json & ~(guintptr)63); p < end; p += 64)
    __builtin_prefetch(p);
}

/* Set while a query is finished on an I/O thread (op_complete): its page
 * is read from memory only, and tl_needed_disk says that a document was
 * not there (the page is then left unread and the query finished on a
 * worker). */
static __thread gboolean tl_memory_only, tl_needed_disk;

/* Re-reads the page's hits from the truth store in one multi-get and
 * appends, comma-separated, those that still exist and still match: a hit
 * whose stored version is the one its shard indexed matched there, so it
 * is not evaluated again when its shard vouches for it (call_vouches).
 * Returns the number appended. */
static guint verify_hits(ixia_fanout_t *s, const ixia_query_t *q, const GArray *cands,
                         const GString *extras, GString *out, guint *stale_by_shard,
                         ixia_error_t **err) {
  guint n = cands->len, kept = 0;
  if (n == 0) return 0;
  const char **keys = g_new(const char *, n);
  size_t *lens = g_new(size_t, n);
  for (guint i = 0; i < n; i++) {
    keys[i] = g_array_index(cands, cand_t, i).key;
    lens[i] = strlen(keys[i]);
  }
  ixia_store_doc_t *docs = g_new0(ixia_store_doc_t, n);
  GPtrArray *paths = NULL; /* the filter's, once a hit needs a re-check */
  ixia_store_pins_t *pins = NULL; /* docs[i].json borrows from it */
  gboolean read;
  if (tl_memory_only) {
    /* (IXIA_TEST_PAGES_FROM_DISK: every page counts as not in memory.) */
    static gint from_disk = -1;
    if (from_disk < 0) from_disk = ixia_test_hook("PAGES_FROM_DISK", 0) != 0;
    gboolean in_memory = !from_disk;
    read = in_memory && ixia_store_multi_get_pinned_in_memory(s->store, q->ns, q->table, n, keys,
                                                              lens, docs, &pins, &in_memory, err);
    if (!in_memory) {
      tl_needed_disk = TRUE;
      read = FALSE;
    }
  } else {
    read = ixia_store_multi_get_pinned(s->store, q->ns, q->table, n, keys, lens, docs, &pins, err);
  }
  if (read) {
    for (guint i = 0; i < MIN(n, PREFETCH_DOCS); i++) prefetch_doc(&docs[i]);
    for (guint i = 0; i < n; i++) {
      if (i + PREFETCH_DOCS < n) prefetch_doc(&docs[i + PREFETCH_DOCS]);
      const ixia_store_doc_t *d = &docs[i];
      gboolean match = d->found;
      const cand_t *c = &g_array_index(cands, cand_t, i);
      if (match && !(!c->recheck && d->version == c->version)) {
        if (!paths) filter_paths(q->filter, paths = g_ptr_array_new());
        match = stored_doc_matches(q, d, paths);
        counter_add(&s->rechecked, 1);
      }
      if (match) {
        if (kept++) g_string_append_c(out, ',');
        ixia_json_put_lit(out, "{\"key\":");
        ixia_json_append_string(out, keys[i], lens[i]);
        ixia_json_put_lit(out, ",\"version\":");
        ixia_json_append_int(out, d->version);
        ixia_json_put_lit(out, ",\"doc\":");
        append_doc(q, d, out);
        if (c->extra_len) ixia_json_put(out, extras->str + c->extra_at, c->extra_len);
        g_string_append_c(out, '}');
      } else {
        counter_add(&s->stale_dropped, 1);
        stale_by_shard[g_array_index(cands, cand_t, i).shard]++;
      }
    }
  }
  ixia_store_pins_free(pins);
  if (paths) g_ptr_array_free(paths, TRUE);
  g_free(docs);
  g_free(keys);
  g_free(lens);
  return kept;
}

/* A shard's search request: the client's query text as it came (the
 * shard parses it against its own schemas; it was parsed here already, so it
 * is one JSON object), this shard's position, limit and deadline, and for
 * sorted pages the sort position. Written as text: printing the parsed
 * query back through cJSON (a round-trip check per number) was 7% of the
 * API's CPU at pages of 10 hits. */
static char *shard_request(const char *query, size_t query_len, gint64 after_id, guint limit,
                           gboolean sync, gint64 deadline_us, const cJSON *sorted) {
  GString *r = g_string_sized_new(query_len + 128);
  g_string_append(r, "{\"query\":");
  g_string_append_len(r, query, (gssize)query_len);
  gint64 left_ms = MAX((deadline_us - g_get_monotonic_time()) / 1000, 1);
  g_string_append_printf(r,
                         ",\"after_id\":%" G_GINT64_FORMAT ",\"limit\":%u,\"sync\":%s,"
                         "\"deadline_ms\":%" G_GINT64_FORMAT,
                         after_id, limit, sync ? "true" : "false", left_ms);
  for (const cJSON *m = sorted ? sorted->child : NULL; m; m = m->next) {
    char *v = ixia_json_print(m);
    g_string_append_c(r, ',');
    ixia_json_append_string(r, m->string, strlen(m->string));
    g_string_append_c(r, ':');
    g_string_append(r, v);
    g_free(v);
  }
  g_string_append_c(r, '}');
  return g_string_free(r, FALSE);
}

/* Once every shard has answered or failed: without partial, FALSE with the
 * first shard error; with partial, FALSE only when no shard answered (the
 * failures stay in calls[i].err for the answer's shard list). */
static gboolean calls_settle(ixia_fanout_t *s, call_t *calls, gboolean partial, ixia_error_t **err) {
  guint answered = 0;
  for (guint i = 0; i < s->n_shards; i++) answered += calls[i].err == NULL;
  for (guint i = 0; i < s->n_shards; i++)
    if (calls[i].err && (!partial || answered == 0)) {
      ixia_error_propagate(err, calls[i].err);
      calls[i].err = NULL;
      return FALSE;
    }
  return TRUE;
}

/* Sends every shard its request. Without partial: FALSE with the first
 * shard error. With partial: waits until give_up_us at most (monotonic), a
 * shard that has not answered by then failing with a deadline error, and
 * leaves the failures in calls[i].err for the caller (FALSE only when no
 * shard answered). */
static gboolean call_shards(ixia_fanout_t *s, call_t *calls, gboolean partial, gint64 give_up_us,
                            ixia_error_t **err) {
  if (s->n_shards == 1) {
    shard_call(s, &calls[0]);
  } else {
    round_t *r = g_new0(round_t, 1);
    g_mutex_init(&r->lock);
    g_cond_init(&r->cond);
    r->pending = s->n_shards;
    r->refs = (gint)s->n_shards + 1;
    for (guint i = 0; i < s->n_shards; i++) {
      call_t *job = g_new0(call_t, 1);
      *job = (call_t){s, i, g_strdup(calls[i].request), NULL, NULL, NULL, r, &calls[i], calls[i].answer_by};
      g_thread_pool_push(s->pool, job, NULL);
    }
    g_mutex_lock(&r->lock);
    while (r->pending > 0) {
      if (!partial) g_cond_wait(&r->cond, &r->lock);
      else if (!g_cond_wait_until(&r->cond, &r->lock, give_up_us)) break;
    }
    r->abandoned = TRUE;
    g_mutex_unlock(&r->lock);
    round_unref(r);
    for (guint i = 0; i < s->n_shards; i++)
      if (!calls[i].response && !calls[i].err)
        ixia_error_set(&calls[i].err, IXIA_EDEADLINE,
                       "shard %u (%s): no answer within the query's deadline", i,
                       s->shards[i].address);
  }
  return calls_settle(s, calls, partial, err);
}

/* Appends ",\"score\":X" for a hit of a query that scores (its shard's
 * BM25); nothing otherwise. */
static void append_score(GString *out, const ixia_query_t *q, const ahit_t *hit) {
  if (!q->scoring) return;
  char num[32];
  ixia_json_format_number(hit->score, num);
  g_string_append(out, ",\"score\":");
  g_string_append(out, num);
}

/* Takes hits shard by shard up to q->limit, advancing pos, and verifies
 * them; the hits' JSON goes to out, comma-separated. */
static gboolean collect_hits(ixia_fanout_t *s, const ixia_query_t *q, call_t *calls, gint64 *pos,
                             GString *out, guint *returned, guint *stale_by_shard,
                             ixia_error_t **err) {
  GArray *cands = g_array_new(FALSE, FALSE, sizeof(cand_t));
  GString *extras = g_string_new(NULL);
  guint taken = 0;
  for (guint i = 0; i < s->n_shards; i++) {
    if (pos[i] == POS_DONE || !calls[i].response) continue; /* done, or failed (allow_partial) */
    const GArray *hits = calls[i].hits ? calls[i].hits->list : NULL;
    guint n = hits ? hits->len : 0;
    if (taken >= q->limit) break; /* this shard and the rest wait for the next page */
    guint used = 0;
    gboolean vouches = call_vouches(q, &calls[i]);
    for (; used < n && taken < q->limit; used++) {
      const ahit_t *h = &g_array_index(hits, ahit_t, used);
      pos[i] = h->id;
      taken++;
      cand_t c = {h->key, h->version, i, (guint)extras->len, 0, !vouches};
      append_score(extras, q, h);
      c.extra_len = (guint)extras->len - c.extra_at;
      g_array_append_val(cands, c);
    }
    /* A shard that sent fewer than asked has nothing after them. */
    if (used == n && n < q->limit) pos[i] = POS_DONE;
  }
  ixia_error_t *e = NULL;
  *returned = verify_hits(s, q, cands, extras, out, stale_by_shard, &e);
  gboolean ok = e == NULL || ixia_error_propagate(err, e);
  g_string_free(extras, TRUE);
  g_array_free(cands, TRUE);
  return ok;
}

/* ---- sorted pages ---- */

/* What each shard is told for a sorted page: the cursor's values and key
 * (search_after) and that shard's positions. */
static cJSON **sorted_requests(const ixia_fanout_t *s, const ixia_sort_cursor_t *cur) {
  cJSON **out = g_new0(cJSON *, s->n_shards);
  for (guint i = 0; i < s->n_shards; i++) {
    out[i] = cJSON_CreateObject();
    if (!cur) continue;
    cJSON *after = cJSON_AddObjectToObject(out[i], "sort_after");
    cJSON *vals = cJSON_AddArrayToObject(after, "values");
    for (guint k = 0; k < cur->n_values; k++) {
      if (!cur->values[k]) {
        cJSON_AddItemToArray(vals, cJSON_CreateNull());
        continue;
      }
      gsize n;
      const guchar *p = g_bytes_get_data(cur->values[k], &n);
      char *b64 = g_base64_encode(n ? p : (const guchar *)"", n);
      cJSON_AddItemToArray(vals, cJSON_CreateString(b64));
      g_free(b64);
    }
    cJSON_AddStringToObject(after, "key", cur->key);
    if (!cur->epoch[i]) continue; /* the shard failed on the first page: positions as of now */
    cJSON *as_of = cJSON_AddObjectToObject(out[i], "as_of");
    cJSON_AddNumberToObject(as_of, "epoch", (double)cur->epoch[i]);
    cJSON_AddNumberToObject(as_of, "seq", (double)cur->seq[i]);
  }
  return out;
}

/* A hit of a shard's sorted page. */
typedef struct {
  const ahit_t *hit;   /* its key and version */
  const asval_t *sort; /* its sort values, q->n_sort */
  guint shard;
} shit_t;

static gint shit_cmp(gconstpointer a, gconstpointer b, gpointer qp) {
  const shit_t *x = a, *y = b;
  const ixia_query_t *q = qp;
  for (guint k = 0; k < q->n_sort; k++) {
    const asval_t *u = &x->sort[k], *v = &y->sort[k];
    int c = ixia_sort_cmp_one(&q->sort[k], u->p, u->len, u->has, v->p, v->len, v->has);
    if (c) return c;
  }
  return strcmp(x->hit->key, y->hit->key);
}

/* The first `taken` of all (the shards' hits, shard after shard) by
 * (values, key): all itself, sorted, or a new array. A shard sends its
 * page in order, so the shards' runs are merged, at most `taken` times
 * the number of shards comparisons, and a page from one shard is taken
 * as it is: sorting a page of 100 hits already in order was 4% of the
 * API's CPU on sorted pages. A run found out of order (checked as the
 * runs are found) sorts the whole array instead. */
static GArray *merge_pages(const ixia_query_t *q, guint n_shards, GArray *all, guint taken) {
  const shit_t *x = (const shit_t *)(void *)all->data;
  /* (A run per shard: the hits come shard after shard.) */
  guint n_runs = 0, *head = g_new(guint, n_shards + 1), *end = g_new(guint, n_shards + 1);
  gboolean in_order = TRUE;
  for (guint i = 0; in_order && i < all->len; i++) {
    if (i == 0 || x[i].shard != x[i - 1].shard) {
      if (n_runs == n_shards) { /* cannot happen: never write past the arrays */
        in_order = FALSE;
        break;
      }
      head[n_runs] = i;
      end[n_runs++] = i + 1;
      continue;
    }
    in_order = shit_cmp(&x[i - 1], &x[i], (gpointer)q) < 0;
    end[n_runs - 1] = i + 1;
  }
  GArray *page = all;
  if (!in_order) {
    g_array_sort_with_data(all, shit_cmp, (gpointer)q);
  } else if (n_runs > 1) {
    page = g_array_sized_new(FALSE, FALSE, sizeof(shit_t), taken);
    while (page->len < taken) {
      guint best = G_MAXUINT;
      for (guint r = 0; r < n_runs; r++)
        if (head[r] < end[r] && (best == G_MAXUINT || shit_cmp(&x[head[r]], &x[head[best]], (gpointer)q) < 0))
          best = r;
      g_array_append_val(page, x[head[best]++]);
    }
  }
  g_free(head);
  g_free(end);
  return page;
}

/* Merges the shards' sorted pages: the first q->limit by (values, key),
 * verified; *next is the cursor after them, or NULL on the last page. */
static gboolean collect_sorted_hits(ixia_fanout_t *s, const ixia_query_t *q, call_t *calls,
                                    GString *out, guint *returned, char **next,
                                    guint *stale_by_shard, ixia_error_t **err) {
  *next = NULL;
  /* (The arrays sized once for the pages' hits: grown by doubling, they
   * were 2-3% of the API's CPU on sorted pages of 100.) */
  guint n_all = 0;
  for (guint i = 0; i < s->n_shards; i++)
    if (calls[i].response && calls[i].hits && calls[i].hits->list)
      n_all += calls[i].hits->list->len;
  GArray *all = g_array_sized_new(FALSE, FALSE, sizeof(shit_t), n_all);
  guint64 *epoch = g_new0(guint64, s->n_shards), *seq = g_new0(guint64, s->n_shards);
  gboolean *vouches = g_new0(gboolean, s->n_shards);
  gboolean ok = TRUE, more = FALSE;
  for (guint i = 0; ok && i < s->n_shards; i++) {
    const cJSON *resp = calls[i].response;
    if (!resp) continue; /* failed (allow_partial): keeps no positions */
    vouches[i] = call_vouches(q, &calls[i]);
    const GArray *hits = calls[i].hits ? calls[i].hits->list : NULL;
    guint n = hits ? hits->len : 0;
    const cJSON *as_of = cJSON_GetObjectItemCaseSensitive(resp, "sort_as_of");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(as_of, "epoch");
    const cJSON *sq = cJSON_GetObjectItemCaseSensitive(as_of, "seq");
    if (q->limit && (!cJSON_IsNumber(e) || !cJSON_IsNumber(sq))) {
      ok = ixia_error_set(err, IXIA_EINTERNAL, "shard %u answered a sorted page without sort_as_of", i);
      break;
    }
    epoch[i] = cJSON_IsNumber(e) ? (guint64)e->valuedouble : 0;
    seq[i] = cJSON_IsNumber(sq) ? (guint64)sq->valuedouble : 0;
    if (n >= q->limit && q->limit) more = TRUE;
    for (guint j = 0; ok && j < n; j++) {
      const ahit_t *h = &g_array_index(hits, ahit_t, j);
      if (h->sort_at < 0 || h->n_sort != q->n_sort) {
        ok = ixia_error_set(err, IXIA_EINTERNAL, "shard %u answered a malformed sorted hit", i);
        break;
      }
      shit_t x = {h, &g_array_index(calls[i].hits->svals, asval_t, h->sort_at), i};
      g_array_append_val(all, x);
    }
  }
  guint taken = MIN(q->limit, all->len);
  GArray *cands = g_array_sized_new(FALSE, FALSE, sizeof(cand_t), taken);
  GString *extras = g_string_sized_new(32 * (gsize)taken + 16);
  if (ok) {
    if (all->len > taken) more = TRUE;
    GArray *page = merge_pages(q, s->n_shards, all, taken);
    for (guint i = 0; i < taken; i++) {
      const shit_t *x = &g_array_index(page, shit_t, i);
      /* Written as text: printing through cJSON checked every number's
       * round trip with sscanf (~10% of the API's CPU at limit 100). */
      cand_t c = {x->hit->key, x->hit->version, x->shard, (guint)extras->len, 0, !vouches[x->shard]};
      g_string_append(extras, ",\"sort\":[");
      for (guint k = 0; k < q->n_sort; k++) {
        if (k) g_string_append_c(extras, ',');
        const asval_t *v = &x->sort[k];
        if (v->has) ixia_sort_value_append(extras, &q->sort[k], v->p, v->len);
        else g_string_append(extras, "null");
      }
      g_string_append_c(extras, ']');
      append_score(extras, q, x->hit);
      c.extra_len = (guint)extras->len - c.extra_at;
      g_array_append_val(cands, c);
    }
    if (more && taken > 0) {
      const shit_t *last = &g_array_index(page, shit_t, taken - 1);
      GBytes **vals = g_new0(GBytes *, q->n_sort);
      for (guint k = 0; k < q->n_sort; k++)
        if (last->sort[k].has) vals[k] = g_bytes_new(last->sort[k].p, last->sort[k].len);
      ixia_sort_cursor_t cur = {q->sort_sig, s->n_shards, epoch, seq, q->n_sort,
                                vals, (char *)last->hit->key, strlen(last->hit->key)};
      *next = ixia_fanout_sort_cursor_encode(&cur);
      for (guint k = 0; k < q->n_sort; k++)
        if (vals[k]) g_bytes_unref(vals[k]);
      g_free(vals);
    }
    ixia_error_t *e = NULL;
    *returned = verify_hits(s, q, cands, extras, out, stale_by_shard, &e);
    if (e) ok = ixia_error_propagate(err, e);
    if (page != all) g_array_free(page, TRUE);
  }
  g_string_free(extras, TRUE);
  g_array_free(cands, TRUE);
  g_array_free(all, TRUE);
  g_free(epoch);
  g_free(seq);
  g_free(vouches);
  if (!ok) g_clear_pointer(next, g_free);
  return ok;
}

/* top_hits results found in a response (a top_hits node and its hits). */
typedef struct {
  const ixia_agg_t *g;
  cJSON *hits;
} th_ref_t;

static void collect_top_hits(const ixia_agg_t *g, cJSON *hits, void *ud) {
  th_ref_t r = {g, hits};
  g_array_append_val((GArray *)ud, r);
}

/* Gives every top_hits hit its document, read from the truth store in one
 * multi-get (projected to the top_hits' "fields"), and its current version;
 * a document gone meanwhile leaves the list. Not re-checked against the
 * filter: aggregations are the index's view (docs/QUERY.md). */
static gboolean attach_top_hits(ixia_fanout_t *s, const ixia_query_t *q, cJSON *res,
                                ixia_error_t **err) {
  GArray *refs = g_array_new(FALSE, FALSE, sizeof(th_ref_t));
  ixia_aggs_foreach_top_hits(q, res, collect_top_hits, refs);
  GPtrArray *hits = g_ptr_array_new();
  GArray *owner = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint i = 0; i < refs->len; i++)
    for (cJSON *h = g_array_index(refs, th_ref_t, i).hits->child; h; h = h->next) {
      g_ptr_array_add(hits, h);
      g_array_append_val(owner, i);
    }
  guint n = hits->len;
  gboolean ok = TRUE;
  if (n) {
    const char **keys = g_new(const char *, n);
    size_t *lens = g_new(size_t, n);
    for (guint i = 0; i < n; i++) {
      keys[i] = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hits->pdata[i], "key"));
      if (!keys[i]) keys[i] = "";
      lens[i] = strlen(keys[i]);
    }
    ixia_store_doc_t *docs = g_new0(ixia_store_doc_t, n);
    ok = ixia_store_multi_get(s->store, q->ns, q->table, n, keys, lens, docs, err);
    for (guint i = 0; ok && i < n; i++) {
      cJSON *h = hits->pdata[i];
      const ixia_agg_t *g = g_array_index(refs, th_ref_t, g_array_index(owner, guint, i)).g;
      cJSON *doc = docs[i].found ? ixia_json_parse_stored(docs[i].json, docs[i].json_len) : NULL;
      if (!doc) {
        cJSON_Delete(cJSON_DetachItemViaPointer(g_array_index(refs, th_ref_t, g_array_index(owner, guint, i)).hits, h));
        continue;
      }
      if (g->fields) {
        cJSON *sub = ixia_json_project(doc, (const char *const *)g->fields, g_strv_length(g->fields), NULL);
        cJSON_Delete(doc);
        doc = sub;
      }
      cJSON_ReplaceItemInObjectCaseSensitive(h, "version", cJSON_CreateNumber((double)docs[i].version));
      cJSON_AddItemToObject(h, "doc", doc);
    }
    for (guint i = 0; i < n; i++) g_free(docs[i].json);
    g_free(docs);
    g_free(keys);
    g_free(lens);
  }
  g_ptr_array_free(hits, TRUE);
  g_array_free(owner, TRUE);
  g_array_free(refs, TRUE);
  return ok;
}

static cJSON *merge_aggs(ixia_fanout_t *s, const ixia_query_t *q, call_t *calls, ixia_error_t **err) {
  ixia_aggs_t *aggs = ixia_aggs_new(q, &s->lim);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < s->n_shards; i++) {
    const cJSON *partial = cJSON_GetObjectItemCaseSensitive(calls[i].response, "aggs");
    if (!partial || cJSON_IsNull(partial)) continue;
    ok = ixia_aggs_merge_partial(aggs, partial, err);
  }
  cJSON *res = ok ? ixia_aggs_result(aggs, err) : NULL;
  ixia_aggs_destroy(aggs);
  if (res && !attach_top_hits(s, q, res, err)) g_clear_pointer(&res, cJSON_Delete);
  return res;
}

/* "shards": {"total", "ok", "failed": [{"shard", "address", "code",
 * "error"}], "states": [{"shard", "as_of", "stale_dropped", "repairing"}]}:
 * which shards answered and how current each answering shard's part of the
 * answer is (as_of: the newest version the shard had applied). */
static void append_shards(GString *out, ixia_fanout_t *s, call_t *calls, const guint *stale_by_shard) {
  guint n_ok = 0;
  for (guint i = 0; i < s->n_shards; i++) n_ok += calls[i].err == NULL;
  g_string_append(out, "\"shards\":{\"total\":");
  ixia_json_append_int(out, s->n_shards);
  g_string_append(out, ",\"ok\":");
  ixia_json_append_int(out, n_ok);
  g_string_append(out, ",\"failed\":[");
  gboolean first = TRUE;
  for (guint i = 0; i < s->n_shards; i++) {
    if (!calls[i].err) continue;
    g_string_append(out, first ? "{\"shard\":" : ",{\"shard\":");
    first = FALSE;
    ixia_json_append_int(out, i);
    g_string_append(out, ",\"address\":");
    ixia_json_append_string(out, s->shards[i].address, strlen(s->shards[i].address));
    const char *code = ixia_code_name(calls[i].err->code);
    g_string_append(out, ",\"code\":");
    ixia_json_append_string(out, code, strlen(code));
    g_string_append(out, ",\"error\":");
    ixia_json_append_string(out, calls[i].err->message, strlen(calls[i].err->message));
    g_string_append_c(out, '}');
  }
  g_string_append(out, "],\"states\":[");
  first = TRUE;
  for (guint i = 0; i < s->n_shards; i++) {
    const cJSON *r = calls[i].response;
    if (!r) continue; /* failed: listed in "failed" */
    const cJSON *as_of = cJSON_GetObjectItemCaseSensitive(r, "as_of");
    if (!cJSON_IsNumber(as_of)) as_of = cJSON_GetObjectItemCaseSensitive(r, "max_version");
    char num[32];
    ixia_json_format_number(cJSON_IsNumber(as_of) ? as_of->valuedouble : 0, num);
    g_string_append(out, first ? "{\"shard\":" : ",{\"shard\":");
    first = FALSE;
    ixia_json_append_int(out, i);
    g_string_append(out, ",\"as_of\":");
    g_string_append(out, num);
    g_string_append(out, ",\"stale_dropped\":");
    ixia_json_append_int(out, stale_by_shard[i]);
    g_string_append(out, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "repairing"))
                              ? ",\"repairing\":true}"
                              : ",\"repairing\":false}");
  }
  g_string_append(out, "]}");
}

/* "allow_repairing": false refuses an answer from a shard that is
 * repairing itself: that shard fails (listed in "failed" with
 * allow_partial, else the query fails with SHARD_UNAVAILABLE). */
static gboolean refuse_repairing(ixia_fanout_t *s, const ixia_query_t *q, call_t *calls, ixia_error_t **err) {
  for (guint i = 0; !q->allow_repairing && i < s->n_shards; i++) {
    if (!calls[i].response || calls[i].err ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(calls[i].response, "repairing")))
      continue;
    ixia_error_t *e = ixia_error_new(IXIA_ESHARD,
                                     "shard %u (%s) is repairing itself from the truth store and may miss "
                                     "documents until it is done; the query asked for allow_repairing: false",
                                     i, s->shards[i].address);
    if (!q->allow_partial) return ixia_error_propagate(err, e);
    calls[i].err = e;
  }
  return TRUE;
}

/* One query's state across its shard calls. */
typedef struct {
  gint64 start_us, deadline;
  gint64 *pos;     /* per shard: the cursor's position */
  call_t *calls;   /* per shard */
  guint *stale;    /* per shard: hits dropped by the re-check */
  cJSON **sorted;  /* per shard: a sorted page's position, or NULL */
} run_t;

/* Everything before the shard calls: the cursor, the min_version wait,
 * each shard's request. */
static gboolean run_begin(ixia_fanout_t *s, const ixia_query_t *q, const char *request,
                          size_t request_len, gint64 start_us, run_t *r, ixia_error_t **err) {
  *r = (run_t){start_us, start_us + (gint64)q->timeout_ms * 1000, g_new(gint64, s->n_shards),
               g_new0(call_t, s->n_shards), g_new0(guint, s->n_shards), NULL};
  gint64 deadline = r->deadline, *pos = r->pos;
  call_t *calls = r->calls;
  cJSON **sorted = NULL;
  gboolean ok;
  if (q->n_sort) {
    /* Sorted: every shard reads its page after the cursor's position. */
    ixia_sort_cursor_t cur;
    for (guint i = 0; i < s->n_shards; i++) pos[i] = POS_START;
    ok = !q->after || ixia_fanout_sort_cursor_decode(q->after, s->n_shards, q->n_sort, q->sort_sig, &cur, err);
    if (ok) sorted = sorted_requests(s, q->after ? &cur : NULL);
    if (ok && q->after) ixia_sort_cursor_clear(&cur);
  } else {
    ok = ixia_fanout_cursor_decode(s->n_shards, q->after, pos, err);
  }
  if (ok && q->min_version > 0) ok = wait_replicated(s, q->min_version, deadline, err);
  for (guint i = 0; ok && i < s->n_shards; i++) {
    calls[i].s = s;
    calls[i].shard = i;
    calls[i].answer_by = deadline + (q->allow_partial ? PARTIAL_GRACE_US : ANSWER_GRACE_US);
    /* A finished shard still counts toward totals and aggregations. */
    guint limit = pos[i] == POS_DONE ? 0 : q->limit;
    calls[i].request = shard_request(request, request_len, pos[i] == POS_DONE ? POS_START : pos[i], limit,
                                     q->min_version > 0, deadline, sorted ? sorted[i] : NULL);
  }
  r->sorted = sorted;
  return ok;
}

/* Everything after the shard calls (settled, calls_settle): the merge, the
 * re-check against the truth store, the answer's text. */
static char *run_finish(ixia_fanout_t *s, const ixia_query_t *q, run_t *r, ixia_error_t **err) {
  gint64 start_us = r->start_us, *pos = r->pos;
  call_t *calls = r->calls;
  guint *stale = r->stale;
  /* The answer, its hits written in place (copying a page of 100 hits
   * from a buffer of their own was 1% of the API's CPU): room for a page
   * of short documents, so it is not grown piece by piece. */
  GString *out = g_string_sized_new(576 + 128 * (gsize)MIN(q->limit, 1000));
  g_string_append(out, "{\"hits\":[");
  gboolean ok = refuse_repairing(s, q, calls, err);
  guint returned = 0;
  char *text = NULL;
  if (ok) {
    /* A shard that failed counts for nothing, even when it answered. */
    for (guint i = 0; i < s->n_shards; i++)
      if (calls[i].err) {
        g_clear_pointer(&calls[i].response, cJSON_Delete);
        g_clear_pointer(&calls[i].hits, ahits_free);
      }
    double total = 0;
    gboolean exact = TRUE;
    for (guint i = 0; i < s->n_shards; i++) {
      if (!calls[i].response) continue;
      total += cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(calls[i].response, "total"));
      const cJSON *rel = cJSON_GetObjectItemCaseSensitive(calls[i].response, "total_relation");
      if (cJSON_IsString(rel) && strcmp(rel->valuestring, "gte") == 0) exact = FALSE;
    }
    char *next_sorted = NULL;
    ok = q->n_sort ? collect_sorted_hits(s, q, calls, out, &returned, &next_sorted, stale, err)
                   : collect_hits(s, q, calls, pos, out, &returned, stale, err);
    if (tl_needed_disk) ok = FALSE; /* left for a worker: nothing else is touched */
    cJSON *aggs = ok ? merge_aggs(s, q, calls, err) : NULL;
    ok = ok && aggs;
    if (ok) {
      /* Written as text, hits first: printing the rest through cJSON (its
       * number printer, a buffer grown by reallocation, a copy) was 6.5% of
       * the API's CPU at pages of 10 hits. Members as before: hits, shards,
       * total, total_relation, aggs, next, explain, took_ms. */
      char num[32];
      g_string_append(out, "],");
      append_shards(out, s, calls, stale);
      ixia_json_format_number(total, num);
      g_string_append(out, ",\"total\":");
      g_string_append(out, num);
      g_string_append(out, exact ? ",\"total_relation\":\"eq\"" : ",\"total_relation\":\"gte\"");
      char *a = ixia_json_print(aggs);
      g_string_append(out, ",\"aggs\":");
      g_string_append(out, a ? a : "null");
      g_free(a);
      gboolean more = FALSE;
      for (guint i = 0; i < s->n_shards; i++) more = more || pos[i] != POS_DONE;
      char *cursor = !q->n_sort && more && q->limit > 0 ? ixia_fanout_cursor_encode(s->n_shards, pos) : NULL;
      const char *next = q->n_sort ? next_sorted : cursor;
      g_string_append(out, ",\"next\":");
      if (next) ixia_json_append_string(out, next, strlen(next));
      else g_string_append(out, "null");
      g_free(cursor);
      if (q->explain) {
        cJSON *ex = cJSON_CreateArray();
        for (guint i = 0; i < s->n_shards; i++) {
          cJSON *e = cJSON_DetachItemFromObjectCaseSensitive(calls[i].response, "explain");
          if (!e) e = cJSON_CreateObject();
          cJSON_AddNumberToObject(e, "shard", i);
          cJSON_AddItemToArray(ex, e);
        }
        char *t = ixia_json_print(ex);
        cJSON_Delete(ex);
        g_string_append(out, ",\"explain\":");
        g_string_append(out, t ? t : "[]");
        g_free(t);
      }
      ixia_json_format_number((double)(g_get_monotonic_time() - start_us) / 1000.0, num);
      g_string_append(out, ",\"took_ms\":");
      g_string_append(out, num);
      g_string_append_c(out, '}');
      counter_add(&s->hits_returned, returned);
      text = g_string_free(g_steal_pointer(&out), FALSE);
    }
    cJSON_Delete(aggs);
    g_free(next_sorted);
  }
  if (out) g_string_free(out, TRUE);
  return text;
}

static void run_clear(ixia_fanout_t *s, run_t *r) {
  for (guint i = 0; r->calls && i < s->n_shards; i++) {
    g_free(r->calls[i].request);
    cJSON_Delete(r->calls[i].response);
    ahits_free(r->calls[i].hits);
    ixia_error_destroy(r->calls[i].err);
  }
  g_free(r->calls);
  g_free(r->pos);
  g_free(r->stale);
  for (guint i = 0; r->sorted && i < s->n_shards; i++) cJSON_Delete(r->sorted[i]);
  g_free(r->sorted);
  memset(r, 0, sizeof *r);
}

static char *run(ixia_fanout_t *s, const ixia_query_t *q, const char *request, size_t request_len,
                 gint64 start_us, ixia_error_t **err) {
  run_t r;
  char *text = NULL;
  /* allow_partial: a shard that fails, or has not answered shortly after
   * the deadline, is listed instead of failing the query. */
  if (run_begin(s, q, request, request_len, start_us, &r, err) &&
      call_shards(s, r.calls, q->allow_partial, r.deadline + PARTIAL_GRACE_US, err))
    text = run_finish(s, q, &r, err);
  run_clear(s, &r);
  return text;
}

char *ixia_fanout_run(ixia_fanout_t *s, const char *request_json, size_t len,
                      ixia_schema_lookup_fn lookup, void *lookup_ud, ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  counter_add(&s->queries, 1);
  ixia_error_t *e = NULL;
  char *out = NULL;
  ixia_query_t *q = ixia_query_parse(request_json, len, lookup, lookup_ud, &s->lim, &e);
  if (q && s->n_shards == 0)
    ixia_error_set(&e, IXIA_ESHARD,
                   "query: no index shards are configured (query.indexers is empty)");
  if (q && !e) {
    /* The shards parse the same text again, against their own schemas. */
    out = run(s, q, request_json, len, start, &e);
  }
  ixia_query_destroy(q);
  if (e) {
    counter_add(&s->query_errors, 1);
    ixia_error_propagate(err, e);
  }
  return out;
}

/* ---- queries on the API's I/O threads ----
 *
 * A worker that runs a query sleeps while its shards search: the I/O
 * thread hands it the call (a wake-up), the shard's answer wakes it, and
 * it hands the connection back (a third). A quarter of the API's CPU at
 * pages of 10 was those switches. Here the I/O thread that read the call
 * sends each shard its request on one of its lanes (below; or, lanes off,
 * on a pooled connection), watches the sockets (server.h) and serves its
 * other connections; the last answer
 * finishes the query on the same thread (the merge, the re-check against
 * the truth store, the answer) as run() does, so a query costs no thread
 * hand-off at all.
 *
 * Only what never waits is taken: a query with min_version (it waits for
 * replication), with a top_hits aggregation (its documents are read from
 * the store, perhaps from the disk), over ASYNC_MAX_REQUEST bytes (its
 * send could wait) or with neither a lane nor an idle pooled connection to
 * every shard (opening one blocks) goes to a worker (the connections it opens are
 * pooled for the next ones). Other aggregations are taken, and their
 * partials merged here when the shards' pages hold at most
 * ASYNC_MAX_AGG_ANSWER bytes; a longer merge is left to a worker (the
 * benchmark's terms aggregation of 50 buckets answers far less, and its
 * hand-offs to a worker and back were 10% of the API's CPU under 16
 * connections). A
 * pooled connection that turns out dead (the shard restarted) sends the
 * query to a worker too, which runs it again from the start on new
 * connections, as run() does for its own calls. The page's documents are
 * read from memory only (store.h): a page that needs the disk is finished
 * by a worker from the same answers, its cursor positions put back. A
 * shard that has not
 * answered ANSWER_GRACE_US after the query's deadline (PARTIAL_GRACE_US
 * with allow_partial) fails with a deadline error; its connection is
 * closed, since its answer may still come. */

/* Largest request sent from an I/O thread (well under any socket's send
 * buffer); larger ones go to a worker. */
#define ASYNC_MAX_REQUEST 16384
/* Most page bytes whose aggregation partials an I/O thread merges. */
#define ASYNC_MAX_AGG_ANSWER (256 * 1024)

typedef struct {
  ixia_fanout_op_t *op;
  guint i;
  ixia_shard_client_t *client; /* NULL once pooled again or closed */
  gboolean sent;
  gint32 seqid; /* the call's: an answer with another is a stale one */
  ixia_server_watch_t *watch;
  GByteArray *in; /* the answer frame so far, header included */
  struct lane *lane; /* sent (or to be sent) on this thread's lane to the shard, until answered */
} op_shard_t;

struct ixia_fanout_op {
  ixia_fanout_t *s;
  ixia_query_t *q;
  char *request;
  size_t request_len;
  gint64 start_us;
  run_t r;
  ixia_error_t *err; /* the query failed before its shard calls */
  op_shard_t *sh;    /* per shard */
  guint pending;
  gsize answered;    /* bytes of the shards' pages so far */
  gboolean stopping; /* the API stops: answer that */
  gboolean finish;   /* the shards answered; a worker finishes it (page not in memory, long merge) */
  gboolean on_worker; /* prepared for a worker (ixia_fanout_op_run), not for launch */
  ixia_fanout_done_fn done;
  gpointer ud;
};

static void lane_abandon(struct lane *ln, op_shard_t *x);

static void op_free(ixia_fanout_op_t *op) {
  ixia_fanout_t *s = op->s;
  for (guint i = 0; op->sh && i < s->n_shards; i++) {
    op_shard_t *x = &op->sh[i];
    if (x->lane) lane_abandon(x->lane, x);
    /* Unsent: the connection is as good as before. Sent and unanswered:
     * its answer may still come, so it cannot serve another call. */
    if (x->client && !x->sent) g_async_queue_push(s->shards[i].idle, x->client);
    else ixia_shard_client_destroy(x->client);
    if (x->in) g_byte_array_unref(x->in);
  }
  g_free(op->sh);
  run_clear(s, &op->r);
  ixia_query_destroy(op->q);
  ixia_error_destroy(op->err);
  g_free(op->request);
  g_free(op);
}

/* Some aggregation among n (or nested in them) is a top_hits. */
static gboolean aggs_read_store(ixia_agg_t *const *aggs, guint n) {
  for (guint i = 0; i < n; i++)
    if (aggs[i]->kind == IXIA_AGG_TOP_HITS || aggs_read_store(aggs[i]->subs, aggs[i]->n_subs))
      return TRUE;
  return FALSE;
}

ixia_fanout_op_t *ixia_fanout_prepare(ixia_fanout_t *s, const char *request_json, size_t len,
                                      ixia_schema_lookup_fn lookup, void *lookup_ud) {
  if (s->n_shards == 0) return NULL; /* a worker says so */
  gint64 start = g_get_monotonic_time();
  ixia_fanout_op_t *op = g_new0(ixia_fanout_op_t, 1);
  op->s = s;
  op->start_us = start;
  ixia_error_t *e = NULL;
  op->q = ixia_query_parse(request_json, len, lookup, lookup_ud, &s->lim, &e);
  if (!op->q || e) {
    /* Answered here: a request that does not parse needs no thread. */
    op->err = e ? e : ixia_error_new(IXIA_EINVAL, "query: cannot parse the request");
    counter_add(&s->queries, 1);
    return op;
  }
  /* A request larger than a socket takes at once would have the I/O
   * thread wait for the shard to read it. */
  gboolean take = op->q->min_version <= 0 && !aggs_read_store(op->q->aggs, op->q->n_aggs) &&
                  len <= ASYNC_MAX_REQUEST;
  op->sh = g_new0(op_shard_t, s->n_shards);
  for (guint i = 0; take && i < s->n_shards; i++) {
    /* This thread's least busy lane to the shard, or an idle pooled
     * connection, which becomes a lane at launch when the thread has room
     * for one more and the lanes it has are all waiting (or are full).
     * The lane found here is still the thread's at launch: nothing runs on
     * the thread in between. */
    gboolean more = FALSE;
    struct lane *ln = lane_find(s, i, &more);
    op->sh[i] = (op_shard_t){op, i, NULL, FALSE, 0, NULL, NULL, NULL};
    if (!ln || more) op->sh[i].client = g_async_queue_try_pop(s->shards[i].idle);
    if (!op->sh[i].client) op->sh[i].lane = ln;
    take = op->sh[i].lane || op->sh[i].client;
  }
  if (!take) {
    /* For a worker, parsed: the connections taken go back (unsent). */
    for (guint i = 0; i < s->n_shards; i++) {
      if (op->sh[i].client) g_async_queue_push(s->shards[i].idle, g_steal_pointer(&op->sh[i].client));
      op->sh[i].lane = NULL;
    }
    g_clear_pointer(&op->sh, g_free);
    op->on_worker = TRUE;
  }
  op->request = g_strndup(request_json, len);
  op->request_len = len;
  counter_add(&s->queries, 1);
  return op;
}

gboolean ixia_fanout_op_on_worker(const ixia_fanout_op_t *op) { return op->on_worker; }

void ixia_fanout_op_free(ixia_fanout_op_t *op) {
  if (op) op_free(op);
}

char *ixia_fanout_op_run(ixia_fanout_op_t *op, ixia_error_t **err) {
  ixia_fanout_t *s = op->s;
  ixia_error_t *e = g_steal_pointer(&op->err);
  /* Its deadline counts from when the I/O thread read it. */
  char *out = e ? NULL : run(s, op->q, op->request, op->request_len, op->start_us, &e);
  op_free(op);
  if (e) {
    counter_add(&s->query_errors, 1);
    ixia_error_propagate(err, e);
  }
  return out;
}

/* Ends the query: its answer, or its error, through done. */
static void op_complete(ixia_fanout_op_t *op) {
  ixia_fanout_t *s = op->s;
  ixia_error_t *e = g_steal_pointer(&op->err);
  char *text = NULL;
  if (!e && op->stopping)
    e = ixia_error_new(IXIA_EUNAVAILABLE, "ixia-query-api is stopping; the query was not answered");
  if (!e && calls_settle(s, op->r.calls, op->q->allow_partial, &e)) {
    /* (IXIA_TEST_AGG_MERGE_MAX: the most page bytes merged here.) */
    static gint merge_max = -1;
    if (merge_max < 0) merge_max = ixia_test_hook("AGG_MERGE_MAX", ASYNC_MAX_AGG_ANSWER);
    if (op->q->n_aggs && op->answered > (gsize)merge_max) {
      /* A long merge: a worker's, from the same answers. */
      op->finish = TRUE;
      counter_add(&s->merges_on_worker, 1);
      g_thread_pool_push(s->retry_pool, op, NULL);
      return;
    }
    /* The page's documents from memory only: a disk read would hold every
     * connection of this thread. A page that needs one is finished on a
     * worker from the same answers (the cursor positions put back). */
    gint64 *pos = g_memdup2(op->r.pos, sizeof *pos * s->n_shards);
    tl_memory_only = TRUE;
    tl_needed_disk = FALSE;
    text = run_finish(s, op->q, &op->r, &e);
    tl_memory_only = FALSE;
    if (tl_needed_disk) {
      g_free(text);
      ixia_error_destroy(e);
      memcpy(op->r.pos, pos, sizeof *pos * s->n_shards);
      g_free(pos);
      op->finish = TRUE;
      counter_add(&s->pages_on_worker, 1);
      g_thread_pool_push(s->retry_pool, op, NULL);
      return;
    }
    g_free(pos);
  }
  if (e) counter_add(&s->query_errors, 1);
  op->done(op->ud, text, e);
  op_free(op);
}

/* A worker runs a query whose pooled connection was dead, from the start,
 * or finishes one whose page is not in memory. */
static void retry_main(gpointer data, gpointer user) {
  ixia_fanout_op_t *op = data;
  (void)user;
  ixia_error_t *e = NULL;
  char *text = op->finish ? run_finish(op->s, op->q, &op->r, &e)
                          : run(op->s, op->q, op->request, op->request_len, op->start_us, &e);
  if (e) counter_add(&op->s->query_errors, 1);
  op->done(op->ud, text, e);
  op_free(op);
}

/* A pooled connection failed: every call of the query stops here (their
 * connections are closed with it) and a worker runs it again. */
static void op_retry(ixia_fanout_op_t *op, guint failed) {
  ixia_fanout_t *s = op->s;
  drop_idle(&s->shards[failed]);
  for (guint i = 0; i < s->n_shards; i++) {
    op_shard_t *x = &op->sh[i];
    ixia_server_watch_end(x->watch);
    x->watch = NULL;
    if (x->lane) lane_abandon(x->lane, x);
    if (x->sent) g_clear_pointer(&x->client, ixia_shard_client_destroy);
  }
  run_clear(s, &op->r);
  op->pending = 0;
  g_thread_pool_push(s->retry_pool, op, NULL);
}

/* Reads what the socket holds of the answer: 1 once its frame is whole,
 * 0 while more is to come, -1 when the connection failed or closed, or
 * sent more than one answer or a frame over the limit. */
static int shard_read(op_shard_t *x) {
  int fd = ixia_shard_client_fd(x->client);
  guint32 max = ixia_wire_limits().max_frame;
  if (!x->in) x->in = g_byte_array_new();
  for (;;) {
    guint have = x->in->len;
    gsize need = 4;
    if (have >= 4) {
      guint32 size = ixia_bytes_get32(x->in->data);
      if (size > max) return -1;
      need = 4 + (gsize)size;
      if (have == need) return 1;
      if (have > need) return -1;
    }
    guint want = have >= 4 ? (guint)MIN(need - have, 1u << 20) : 65536;
    g_byte_array_set_size(x->in, have + want);
    ssize_t r = recv(fd, x->in->data + have, want, MSG_DONTWAIT);
    g_byte_array_set_size(x->in, have + (guint)MAX(r, 0));
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
}

/* A whole answer frame (header included; taken) into x's call: its page,
 * or the error it carries. FALSE when it is no search_page answer: the
 * connection it came on is out of step. */
static gboolean answer_settle(op_shard_t *x, GByteArray *frame) {
  ixia_fanout_op_t *op = x->op;
  ixia_fanout_t *s = op->s;
  call_t *c = &op->r.calls[x->i];
  const char *address = s->shards[x->i].address;
  const char *v = NULL, *msg = NULL;
  gsize vlen = 0, mlen = 0;
  gint32 code = 0;
  gboolean ok = TRUE;
  switch (ixia_wire_read_string_reply(frame->data + 4, frame->len - 4, "search_page", &v, &vlen,
                                      &code, &msg, &mlen)) {
    case IXIA_WIRE_REPLY_OK:
      break;
    /* The errors a worker's call gives for the same answers (client.c's
     * check_call; a frame that cannot be read is a transport failure). */
    case IXIA_WIRE_REPLY_ERROR:
      if (msg) ixia_error_set(&c->err, (ixia_code_t)code, "%.*s", (int)mlen, msg);
      else ixia_error_set(&c->err, (ixia_code_t)code, "(no message)");
      break;
    case IXIA_WIRE_REPLY_EXCEPTION:
      ixia_error_set(&c->err, IXIA_EINVAL, "index shard at %s: application error: %.*s", address,
                     (int)mlen, msg ? msg : "");
      break;
    default:
      ixia_error_set(&c->err, IXIA_EUNAVAILABLE, "index shard at %s: malformed answer frame",
                     address);
      ok = FALSE;
      break;
  }
  /* (Settled with the frame, which holds the page.) */
  if (c->err) {
    shard_settle(s, c, NULL, NULL, 0);
    g_byte_array_unref(frame);
  } else {
    shard_settle(s, c, frame, (const guint8 *)v, vlen);
  }
  op->answered += vlen;
  return ok;
}

/* One more of the query's shards is settled; the last finishes it. */
static void op_shard_done(ixia_fanout_op_t *op) {
  if (--op->pending == 0) op_complete(op);
}

static void on_shard(ixia_server_watch_t *w, ixia_server_watch_event_t ev, gpointer ud) {
  op_shard_t *x = ud;
  ixia_fanout_op_t *op = x->op;
  call_t *c = &op->r.calls[x->i];
  if (ev == IXIA_SERVER_WATCH_READABLE) {
    int got = shard_read(x);
    if (got == 0) return;
    ixia_server_watch_end(w);
    x->watch = NULL;
    if (got < 0) {
      op_retry(op, x->i);
      return;
    }
    /* An answer to another call (one given up on this connection) is not
     * this one's: the connection is out of step, as a dead one. */
    const char *name;
    guint32 name_len;
    gint32 seqid;
    if (ixia_wire_peek_call(x->in->data + 4, x->in->len - 4, &name, &name_len, &seqid) &&
        seqid != x->seqid) {
      op_retry(op, x->i);
      return;
    }
    if (!answer_settle(x, g_steal_pointer(&x->in)))
      g_clear_pointer(&x->client, ixia_shard_client_destroy);
    /* An answer, even an error, leaves the connection ready for the next. */
    if (x->client) g_async_queue_push(op->s->shards[x->i].idle, g_steal_pointer(&x->client));
  } else {
    ixia_server_watch_end(w); /* over (the server would end it): before its socket closes */
    x->watch = NULL;
    if (ev == IXIA_SERVER_WATCH_STOPPING) {
      op->stopping = TRUE;
    } else {
      ixia_error_set(&c->err, IXIA_EDEADLINE, "no answer within the query's deadline");
      shard_settle(op->s, c, NULL, NULL, 0);
    }
    /* Its answer may still come: the connection cannot be reused. */
    g_clear_pointer(&x->client, ixia_shard_client_destroy);
  }
  g_clear_pointer(&x->in, g_byte_array_unref);
  op_shard_done(op);
}

/* Sends a whole frame on a shard connection: without waiting when the
 * socket takes it (a request is small), else waiting for the socket as a
 * blocking send does, bounded by the connection's I/O timeout. */
static gboolean send_frame(int fd, const GByteArray *f) {
  gsize pos = 0;
  int flags = MSG_NOSIGNAL | MSG_DONTWAIT;
  while (pos < f->len) {
    ssize_t w = send(fd, f->data + pos, f->len - pos, flags);
    if (w > 0) {
      pos += (gsize)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && (flags & MSG_DONTWAIT)) {
      flags = MSG_NOSIGNAL;
      continue;
    }
    return FALSE;
  }
  return TRUE;
}

/* ---- lanes: one connection per I/O thread and shard, calls pipelined ----
 *
 * A pooled connection carries one call at a time: each query's request is
 * a send of its own, which the shard reads with a recv of its own and
 * answers with a send of its own, each a system call and most a wake-up
 * on the other side. Under pages of 10 at 16 connections the unix-socket
 * sends and receives of the API alone were a fifth of its CPU. A lane is a
 * connection that one I/O thread keeps to one shard, with every call it
 * sent and not yet had answered in a queue: the requests launched during
 * one pass of the thread leave together at the pass's end (one send), the
 * shard reads them with one recv and answers them in order (it runs a
 * connection's frames one after another), and the answers that came
 * together are read with one recv. Answers are matched to calls by order
 * and checked by seqid.
 *
 * A lane is made from an idle pooled connection (opening one would block
 * the thread) when a query is launched and the thread has no lane to the
 * shard, or fewer than LANES_PER_SHARD that all have calls at the shard.
 * A call whose query stops waiting for it (another shard's connection
 * failed) stays in the queue with no owner, and its answer is dropped
 * when it comes. A lane that fails (the shard closed it, answered
 * out of order or malformed) retries every call it held on a worker, as a
 * failed pooled connection does; a call that outlives its deadline fails
 * with the deadline error and takes the lane down with it, since every
 * call behind it waits for its answer. */

/* Most calls in flight on one lane, and most request bytes waiting for the
 * pass's end: beyond either, a query takes a pooled connection. */
#define LANE_MAX_CALLS 64
#define LANE_MAX_OUT (256 * 1024)
/* Lanes one I/O thread keeps to one shard. A shard runs a connection's
 * calls one after another, on the I/O thread that owns the connection, so
 * one lane per API thread could leave a shard's other threads idle (the
 * two lanes of a 2-thread API, both on one shard thread, took a
 * shard-bound filter from ~30k to ~23k queries/s); each query takes the
 * lane with the fewest calls at the shard, so a lane waiting on a busy
 * shard thread is passed over. */
#define LANES_PER_SHARD 4
/* A lane's watch deadline while it waits for nothing. */
#define LANE_IDLE_DEADLINE (G_MAXINT64 / 2)

typedef struct {
  op_shard_t *x; /* NULL once its query stopped waiting for it */
  gint32 seqid;
  gint64 until;  /* the call's answer_by */
} lane_call_t;

typedef struct lane {
  ixia_fanout_t *s;
  guint shard;
  struct lane **slot;   /* where its thread finds it; cleared when it closes */
  ixia_shard_client_t *client;
  ixia_server_watch_t *watch;
  GByteArray *out;      /* requests to send at the pass's end */
  gboolean flush_asked;
  guint queued;         /* calls in `out` (the tail of `calls`) */
  GQueue calls;         /* lane_call_t*, in the order sent */
  GByteArray *in;       /* bytes received and not yet taken as answers */
  gint64 deadline;      /* the watch's */
} lane_t;

static __thread lane_t **tl_lanes;   /* this thread's lanes of the fanout of generation tl_lanes_gen */
static __thread guint tl_lanes_gen;

/* This thread's lane table of s (made on first use), or NULL: lanes off,
 * not an I/O thread. */
static lane_t **lane_table(ixia_fanout_t *s) {
  if (!s->lanes_on || !ixia_server_can_watch()) return NULL;
  if (tl_lanes && tl_lanes_gen == s->gen) return tl_lanes;
  lane_t **t = g_new0(lane_t *, (gsize)s->n_shards * LANES_PER_SHARD);
  g_mutex_lock(&s->lanes_lock);
  g_ptr_array_add(s->lane_tables, t);
  g_mutex_unlock(&s->lanes_lock);
  tl_lanes = t;
  tl_lanes_gen = s->gen;
  return t;
}

/* This thread's lane to the shard with the fewest calls in flight, when it
 * can take one more (else NULL); *more: the thread could open another
 * lane to the shard, and that one would wait for nothing (none yet, or
 * the best has calls in flight). */
static lane_t *lane_find(ixia_fanout_t *s, guint shard, gboolean *more) {
  lane_t **t = lane_table(s), *best = NULL;
  gboolean room = FALSE;
  guint best_out = 0;
  for (guint k = 0; t && k < LANES_PER_SHARD; k++) {
    lane_t *ln = t[shard * LANES_PER_SHARD + k];
    if (!ln) {
      room = TRUE;
      continue;
    }
    /* Fewest calls at the shard; on a tie, one with requests waiting for
     * the pass's end, so that they leave together. */
    guint out = ln->calls.length - ln->queued;
    if (!best || out < best_out || (out == best_out && ln->queued > best->queued)) {
      best = ln;
      best_out = out;
    }
  }
  *more = room && (!best || best_out > 0);
  if (best && (best->calls.length >= LANE_MAX_CALLS || best->out->len >= LANE_MAX_OUT)) best = NULL;
  return best;
}

static void lane_free(lane_t *ln) {
  for (lane_call_t *lc; (lc = g_queue_pop_head(&ln->calls));) g_free(lc);
  ixia_shard_client_destroy(ln->client);
  g_byte_array_unref(ln->out);
  if (ln->in) g_byte_array_unref(ln->in);
  g_free(ln);
}

/* Stops the lane: no call is sent or read on it any more. Its queue is
 * left to the caller, who settles the calls. */
static void lane_close(lane_t *ln) {
  if (ln->slot && *ln->slot == ln) *ln->slot = NULL;
  ln->slot = NULL;
  ixia_server_watch_end(ln->watch);
  ln->watch = NULL;
  if (ln->flush_asked) return; /* freed by the pending flush */
  lane_free(ln);
}

/* The lane failed at `now`: its calls past their deadlines fail with the
 * deadline error, the others are retried on a worker (with the rest of
 * their queries), and the connection is closed. */
static void lane_fail(lane_t *ln, gint64 now) {
  GQueue calls = ln->calls;
  g_queue_init(&ln->calls);
  g_byte_array_set_size(ln->out, 0);
  ln->queued = 0;
  ixia_fanout_t *s = ln->s;
  lane_close(ln);
  for (lane_call_t *lc; (lc = g_queue_pop_head(&calls)); g_free(lc)) {
    op_shard_t *x = lc->x;
    if (!x) continue;
    x->lane = NULL;
    if (lc->until <= now) {
      call_t *c = &x->op->r.calls[x->i];
      ixia_error_set(&c->err, IXIA_EDEADLINE, "no answer within the query's deadline");
      shard_settle(s, c, NULL, NULL, 0);
      op_shard_done(x->op);
    } else {
      /* (op_retry drops the shard's idle connections too: they are as
       * likely dead as this one.) */
      op_retry(x->op, x->i);
    }
  }
}

/* x's query stops waiting for its call: the answer will be dropped. */
static void lane_abandon(struct lane *ln, op_shard_t *x) {
  for (GList *l = ln->calls.head; l; l = l->next) {
    lane_call_t *lc = l->data;
    if (lc->x == x) lc->x = NULL;
  }
  x->lane = NULL;
}

/* The watch's deadline: the oldest call's (the shard answers in order). */
static void lane_set_deadline(lane_t *ln) {
  gint64 until = LANE_IDLE_DEADLINE;
  for (GList *l = ln->calls.head; l; l = l->next) until = MIN(until, ((lane_call_t *)l->data)->until);
  ln->deadline = until;
  ixia_server_watch_set_deadline(ln->watch, until);
}

/* The pass is over: its requests leave in one send. */
static void lane_flush(gpointer data) {
  lane_t *ln = data;
  ln->flush_asked = FALSE;
  if (!ln->slot) { /* closed meanwhile */
    lane_free(ln);
    return;
  }
  ln->queued = 0;
  if (ln->out->len == 0) return;
  counter_add(&ln->s->lane_sends, 1);
  gboolean ok = send_frame(ixia_shard_client_fd(ln->client), ln->out);
  g_byte_array_set_size(ln->out, 0);
  if (!ok) lane_fail(ln, g_get_monotonic_time());
}

/* Reads what the socket holds; FALSE when the connection failed or closed. */
static gboolean lane_read(lane_t *ln) {
  int fd = ixia_shard_client_fd(ln->client);
  if (!ln->in) ln->in = g_byte_array_new();
  for (;;) {
    guint have = ln->in->len, want = 65536;
    g_byte_array_set_size(ln->in, have + want);
    ssize_t r = recv(fd, ln->in->data + have, want, MSG_DONTWAIT);
    g_byte_array_set_size(ln->in, have + (guint)MAX(r, 0));
    if (r > 0 && (guint)r < want) return TRUE; /* drained (the watch fires again if not) */
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

/* Takes the whole answers read, in order; FALSE when the lane is out of
 * step (an answer without a call, another seqid, a frame over the limit or
 * no search_page answer). */
static gboolean lane_take(lane_t *ln) {
  guint32 max = ixia_wire_limits().max_frame;
  guint pos = 0;
  gboolean ok = TRUE;
  while (ok && ln->in && ln->in->len - pos >= 4) {
    guint32 size = ixia_bytes_get32(ln->in->data + pos);
    if (size > max) {
      ok = FALSE;
      break;
    }
    if (ln->in->len - pos - 4 < size) break;
    lane_call_t *lc = g_queue_pop_head(&ln->calls);
    const char *name;
    guint32 name_len;
    gint32 seqid;
    if (!lc || !ixia_wire_peek_call(ln->in->data + pos + 4, size, &name, &name_len, &seqid) ||
        seqid != lc->seqid) {
      if (lc) g_queue_push_head(&ln->calls, lc);
      ok = FALSE;
      break;
    }
    op_shard_t *x = lc->x;
    g_free(lc);
    if (x) {
      GByteArray *frame;
      if (pos == 0 && ln->in->len == 4 + size) {
        frame = g_steal_pointer(&ln->in); /* the only one: no copy */
      } else {
        frame = g_byte_array_sized_new(4 + size);
        g_byte_array_append(frame, ln->in->data + pos, 4 + size);
      }
      x->lane = NULL;
      ok = answer_settle(x, frame);
      op_shard_done(x->op);
    }
    pos += 4 + size;
    if (!ln->in) pos = 0;
  }
  if (ln->in && pos) g_byte_array_remove_range(ln->in, 0, pos);
  return ok;
}

static void lane_event(ixia_server_watch_t *w, ixia_server_watch_event_t ev, gpointer ud) {
  lane_t *ln = ud;
  (void)w;
  gint64 now = g_get_monotonic_time();
  if (ev == IXIA_SERVER_WATCH_READABLE) {
    if (lane_read(ln) && lane_take(ln)) {
      lane_set_deadline(ln);
      return;
    }
  } else if (ev == IXIA_SERVER_WATCH_STOPPING) {
    GQueue calls = ln->calls;
    g_queue_init(&ln->calls);
    lane_close(ln);
    for (lane_call_t *lc; (lc = g_queue_pop_head(&calls)); g_free(lc)) {
      if (!lc->x) continue;
      lc->x->lane = NULL;
      lc->x->op->stopping = TRUE;
      op_shard_done(lc->x->op);
    }
    return;
  }
  lane_fail(ln, now);
}

/* A lane made of a pooled connection (taken on success), or NULL. */
static lane_t *lane_open(ixia_fanout_t *s, guint shard, ixia_shard_client_t *client) {
  lane_t **t = lane_table(s), **slot = NULL;
  for (guint k = 0; t && !slot && k < LANES_PER_SHARD; k++)
    if (!t[shard * LANES_PER_SHARD + k]) slot = &t[shard * LANES_PER_SHARD + k];
  if (!slot) return NULL;
  lane_t *ln = g_new0(lane_t, 1);
  ln->s = s;
  ln->shard = shard;
  ln->client = client;
  ln->out = g_byte_array_new();
  ln->deadline = LANE_IDLE_DEADLINE;
  g_queue_init(&ln->calls);
  ln->watch = ixia_server_watch(ixia_shard_client_fd(client), LANE_IDLE_DEADLINE, lane_event, ln);
  if (!ln->watch) {
    ln->client = NULL;
    lane_free(ln);
    return NULL;
  }
  ln->slot = slot;
  *slot = ln;
  return ln;
}

/* Queues x's request frame f on the lane, to leave at the pass's end. */
static void lane_send(lane_t *ln, op_shard_t *x, const GByteArray *f, gint32 seqid, gint64 until) {
  g_byte_array_append(ln->out, f->data, f->len);
  lane_call_t *lc = g_new(lane_call_t, 1);
  *lc = (lane_call_t){x, seqid, until};
  g_queue_push_tail(&ln->calls, lc);
  ln->queued++;
  x->lane = ln;
  x->sent = TRUE;
  counter_add(&ln->s->lane_calls, 1);
  if (until < ln->deadline) {
    ln->deadline = until;
    ixia_server_watch_set_deadline(ln->watch, until);
  }
  if (ln->flush_asked) return;
  ln->flush_asked = ixia_server_at_pass_end(lane_flush, ln);
  if (!ln->flush_asked) lane_flush(ln); /* (not on an I/O thread: cannot happen) */
}

/* Frees the lanes left (every I/O thread has stopped). */
static void lanes_free(ixia_fanout_t *s) {
  for (guint i = 0; s->lane_tables && i < s->lane_tables->len; i++) {
    lane_t **t = s->lane_tables->pdata[i];
    for (guint k = 0; k < s->n_shards * LANES_PER_SHARD; k++)
      if (t[k] && !t[k]->flush_asked) lane_free(t[k]);
    g_free(t);
  }
  if (s->lane_tables) g_ptr_array_unref(s->lane_tables);
  g_mutex_clear(&s->lanes_lock);
}

void ixia_fanout_launch(ixia_fanout_op_t *op, ixia_fanout_done_fn done, gpointer ud) {
  ixia_fanout_t *s = op->s;
  op->done = done;
  op->ud = ud;
  if (op->err || !run_begin(s, op->q, op->request, op->request_len, op->start_us, &op->r, &op->err)) {
    op_complete(op);
    return;
  }
  gint64 until = op->r.deadline + (op->q->allow_partial ? PARTIAL_GRACE_US : ANSWER_GRACE_US);
  op->pending = s->n_shards;
  GByteArray *f = g_byte_array_new();
  for (guint i = 0; i < s->n_shards; i++) {
    op_shard_t *x = &op->sh[i];
    counter_add(&s->shard_calls, 1);
    const char *req = op->r.calls[i].request;
    g_byte_array_set_size(f, 4);
    static _Atomic gint32 next_seqid;
    x->seqid = atomic_fetch_add_explicit(&next_seqid, 1, memory_order_relaxed) & G_MAXINT32;
    ixia_wire_append_string_call(f, "search_page", x->seqid, req, strlen(req));
    ixia_bytes_put32(f->data, f->len - 4);
    if (!x->lane && x->client && (x->lane = lane_open(s, i, x->client))) x->client = NULL;
    if (x->lane) {
      lane_send(x->lane, x, f, x->seqid, until);
      continue;
    }
    int fd = ixia_shard_client_fd(x->client);
    x->sent = TRUE;
    if (!send_frame(fd, f) || !(x->watch = ixia_server_watch(fd, until, on_shard, x))) {
      op_retry(op, i);
      break;
    }
  }
  g_byte_array_unref(f);
}
