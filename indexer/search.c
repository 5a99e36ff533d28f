/* The Search service of one shard: Thrift glue over the index and the
 * indexer. Every call may run on several server workers at once: searches
 * read index snapshots, and writes (reindex) go through the apply thread.
 * Short searches are answered on the server's I/O threads (stays_inline);
 * the rest move to the workers. */
#include <string.h>

#include "antientropy.h"
#include "bytes.h"
#include "heal.h"
#include "hitpage.h"
#include "indexer.h"
#include "ixia_search.h"
#include "json.h"
#include "log.h"
#include "server.h"
#include "testhook.h"
#include "thrift_util.h"
#include "wire.h"

/* Bounds of docs()'s limit. */
#define DOCS_MAX 10000
/* The largest page a search answers on an I/O thread (see run_search). */
#define INLINE_MAX_LIMIT 100
/* What a search request may hold beyond its query: position, limit,
 * deadline, sort values (each bounded by the key length limit). */
#define REQUEST_OVERHEAD_MAX (64 * 1024)

typedef struct {
  IxiaSearchHandler parent;
  ixia_indexer_t *ix;
  ixia_query_limits_t lim;
} IxiaShardHandler;

typedef struct {
  IxiaSearchHandlerClass parent;
} IxiaShardHandlerClass;

GType ixia_shard_handler_get_type(void);
G_DEFINE_TYPE(IxiaShardHandler, ixia_shard_handler, IXIA_TYPE_SEARCH_HANDLER)

static IxiaShardHandler *handler_of(IxiaSearchIf *iface) { return (IxiaShardHandler *)iface; }

/* An optional integer member of the request; FALSE with an error naming it
 * when present but not an integer in [min, max]. */
static gboolean opt_int(const cJSON *req, const char *name, gint64 min, gint64 max, gint64 *out,
                        gboolean *present, ixia_error_t **err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, name);
  *present = v != NULL && !cJSON_IsNull(v);
  if (!*present) return TRUE;
  if (!cJSON_IsNumber(v) || v->valuedouble != (double)(gint64)v->valuedouble ||
      v->valuedouble < (double)min || v->valuedouble > (double)max)
    return ixia_error_set(err, IXIA_EINVAL,
                          "search request: \"%s\" must be an integer from %" G_GINT64_FORMAT
                          " to %" G_GINT64_FORMAT,
                          name, min, max);
  *out = (gint64)v->valuedouble;
  return TRUE;
}

/* The request's outer parts, checked. */
typedef struct {
  const cJSON *query; /* borrowed from the parsed request */
  const cJSON *sort_after; /* sorted pages: {"values": [b64 | null], "key": "..."} */
  const cJSON *as_of;      /* sorted pages: {"epoch": N, "seq": N} */
  gint64 after_id;
  gint64 limit;       /* -1: the query's own */
  gboolean sync;
  gint64 start_us;
  gint64 deadline_ms; /* 0: the query's timeout_ms */
} search_req_t;

static cJSON *parse_request(IxiaShardHandler *h, const char *json, search_req_t *r,
                            ixia_error_t **err) {
  const ixia_query_limits_t *lim = &h->lim;
  r->start_us = g_get_monotonic_time();
  /* A filter nests two JSON levels per clause ({"and": [...]}). */
  int depth = (int)MIN(2 * (gint64)lim->max_clauses + 16, 1000);
  /* The query is read from this tree (not printed and parsed again), so
   * its byte limit is checked on the whole request, with room for the
   * request's own members (position, sort values). */
  const ixia_json_limits_t jl = {lim->max_request_bytes + REQUEST_OVERHEAD_MAX,
                                 "query.max_request_bytes", depth, "query.max_clauses"};
  cJSON *req = ixia_json_parse_object(json, strlen(json), &jl, "search request", err);
  if (!req) return NULL;
  gboolean ok = TRUE, have_limit = FALSE, have_after = FALSE, have_deadline = FALSE;
  gint64 limit = 0, after = -1, deadline_ms = 0;
  r->query = cJSON_GetObjectItemCaseSensitive(req, "query");
  const cJSON *sync = cJSON_GetObjectItemCaseSensitive(req, "sync");
  if (!cJSON_IsObject(r->query))
    ok = ixia_error_set(err, IXIA_EINVAL, "search request: \"query\" must be an object");
  ok = ok && opt_int(req, "after_id", -1, G_MAXUINT32, &after, &have_after, err);
  ok = ok && opt_int(req, "limit", 0, G_MAXINT32, &limit, &have_limit, err);
  ok = ok && opt_int(req, "deadline_ms", 1, G_MAXINT32, &deadline_ms, &have_deadline, err);
  if (ok && sync && !cJSON_IsNull(sync) && !cJSON_IsBool(sync))
    ok = ixia_error_set(err, IXIA_EINVAL, "search request: \"sync\" must be true or false");
  if (ok && have_limit && limit > lim->max_limit)
    ok = ixia_error_set(err, IXIA_ETOOLARGE,
                        "limit %" G_GINT64_FORMAT " is over the limit of %u (query.max_limit)",
                        limit, lim->max_limit);
  if (!ok) {
    cJSON_Delete(req);
    return NULL;
  }
  /* The query API pages across shards by internal id; its own limit and
   * position override the query's. */
  r->sort_after = cJSON_GetObjectItemCaseSensitive(req, "sort_after");
  r->as_of = cJSON_GetObjectItemCaseSensitive(req, "as_of");
  r->limit = have_limit ? limit : -1;
  r->after_id = have_after ? after : -1;
  r->sync = cJSON_IsTrue(sync);
  r->deadline_ms = have_deadline ? MIN(deadline_ms, (gint64)lim->deadline_ms) : 0;
  return req;
}

/* A JSON number that is a whole count from 0 to 2^53. */
static gboolean json_is_count(const cJSON *v) {
  return cJSON_IsNumber(v) && v->valuedouble >= 0 && ixia_bytes_is_safe_int(v->valuedouble);
}

static void bytes_unref0(gpointer b) {
  if (b) g_bytes_unref(b);
}

/* The sorted page's position from the request: after (values, key) and
 * the positions' as_of. FALSE with an error naming the bad part. */
static gboolean sort_position(const search_req_t *r, const ixia_query_t *q, GPtrArray *values,
                              ixia_idx_after_t *after, gboolean *has_after,
                              ixia_idx_search_opts_t *so, ixia_error_t **err) {
  *has_after = FALSE;
  if (r->as_of && !cJSON_IsNull(r->as_of)) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r->as_of, "epoch");
    const cJSON *sq = cJSON_GetObjectItemCaseSensitive(r->as_of, "seq");
    if (!json_is_count(e) || !json_is_count(sq) || e->valuedouble < 1)
      return ixia_error_set(err, IXIA_EINVAL, "search request: \"as_of\" must be {\"epoch\": N, \"seq\": N}");
    so->as_of_epoch = (guint64)e->valuedouble;
    so->as_of = (guint64)sq->valuedouble;
  }
  if (!r->sort_after || cJSON_IsNull(r->sort_after)) return TRUE;
  const cJSON *vals = cJSON_GetObjectItemCaseSensitive(r->sort_after, "values");
  const cJSON *key = cJSON_GetObjectItemCaseSensitive(r->sort_after, "key");
  if (!q->n_sort || !cJSON_IsArray(vals) || cJSON_GetArraySize(vals) != (int)q->n_sort ||
      !cJSON_IsString(key))
    return ixia_error_set(err, IXIA_EINVAL,
                          "search request: \"sort_after\" must be {\"values\": [one per sort key], "
                          "\"key\": \"...\"} of a sorted query");
  for (const cJSON *v = vals->child; v; v = v->next) {
    if (cJSON_IsNull(v)) {
      g_ptr_array_add(values, NULL);
      continue;
    }
    if (!cJSON_IsString(v)) return ixia_error_set(err, IXIA_EINVAL, "search request: bad sort value");
    gsize n = 0;
    guchar *raw = g_base64_decode(v->valuestring, &n);
    g_ptr_array_add(values, g_bytes_new_take(raw, n));
  }
  after->values = (GBytes **)values->pdata;
  after->key = key->valuestring;
  after->key_len = strlen(key->valuestring);
  so->after = after;
  *has_after = TRUE;
  return TRUE;
}

/* A value's bytes as a quoted base64 string: numbers (8 bytes) and short
 * keywords in a buffer on the stack, longer ones through GLib's. */
static void append_base64(GString *out, const guchar *p, gsize n) {
  char buf[4 * (64 / 3 + 1) + 8];
  if (n > 64) {
    char *t = g_base64_encode(p, n);
    g_string_append_c(out, '"');
    g_string_append(out, t);
    g_string_append_c(out, '"');
    g_free(t);
    return;
  }
  gint state = 0, save = 0;
  gsize len = g_base64_encode_step(p, n, FALSE, buf, &state, &save);
  len += g_base64_encode_close(FALSE, buf + len, &state, &save);
  g_string_append_c(out, '"');
  g_string_append_len(out, buf, (gssize)len);
  g_string_append_c(out, '"');
}

/* The hits array as JSON text: a page of 100 printed through cJSON (one
 * object per hit, a round-trip check per number) was 11% of the indexer's
 * CPU on sorted pages. Sort values are base64 (no escaping needed). */
static void append_hits(GString *out, const ixia_query_t *q, const GArray *hits) {
  g_string_append(out, "\"hits\":[");
  for (guint i = 0; i < hits->len; i++) {
    const ixia_idx_hit_t *hit = &g_array_index(hits, ixia_idx_hit_t, i);
    if (i) g_string_append_c(out, ',');
    ixia_json_put_lit(out, "{\"key\":");
    ixia_json_append_string(out, hit->key, strlen(hit->key));
    ixia_json_put_lit(out, ",\"version\":");
    ixia_json_append_int(out, hit->version);
    ixia_json_put_lit(out, ",\"id\":");
    ixia_json_append_int(out, hit->id);
    if (q->n_sort) {
      g_string_append(out, ",\"sort\":[");
      for (guint k = 0; k < hit->n_sort; k++) {
        const guint8 *p;
        gsize n;
        if (k) g_string_append_c(out, ',');
        if (!ixia_idx_hit_sort_value(hit, k, &p, &n)) {
          g_string_append(out, "null");
          continue;
        }
        append_base64(out, n ? p : (const guchar *)"", n);
      }
      g_string_append_c(out, ']');
    }
    if (q->scoring) {
      char num[32];
      ixia_json_format_number(hit->score, num);
      g_string_append_printf(out, ",\"score\":%s", num);
    }
    g_string_append_c(out, '}');
  }
  g_string_append_c(out, ']');
}

/* The hits as a packed page (hitpage.h), for search_page: what
 * append_hits writes, in binary. */
static void put_page_hits(GByteArray *page, const ixia_query_t *q, const GArray *hits) {
  g_byte_array_set_size(page, 256 + hits->len * 48); /* room at once (emptied by begin) */
  guint32 flags = (q->n_sort ? IXIA_HITPAGE_SORT : 0) | (q->scoring ? IXIA_HITPAGE_SCORE : 0);
  ixia_hitpage_begin(page, flags);
  for (guint i = 0; i < hits->len; i++) {
    const ixia_idx_hit_t *hit = &g_array_index(hits, ixia_idx_hit_t, i);
    ixia_hitpage_put_hit(page, hit->key, strlen(hit->key), hit->version, hit->id);
    if (q->n_sort) {
      ixia_hitpage_put_count(page, hit->n_sort);
      for (guint k = 0; k < hit->n_sort; k++) {
        const guint8 *p = NULL;
        gsize n = 0;
        gboolean has = ixia_idx_hit_sort_value(hit, k, &p, &n);
        ixia_hitpage_put_value(page, has, p, n);
      }
    }
    if (q->scoring) ixia_hitpage_put_score(page, hit->score);
  }
}

const char *const ixia_search_methods[] = {"search", "search_page", "status", "reindex",
                                           "docs", "digest", "authenticate", NULL};

gboolean ixia_search_inline_call(const char *method, guint32 len) {
  return (len == 6 && memcmp(method, "search", 6) == 0) ||
         (len == 11 && memcmp(method, "search_page", 11) == 0);
}

/* Whether a search may run on the I/O thread that read it. A page of at
 * most INLINE_MAX_LIMIT hits, with no aggregation and no total beyond
 * query.track_total_hits, stops early and costs tens to hundreds of
 * microseconds: answering it where it was read saves handing it to a
 * worker and back (two thread wake-ups, the shard's main fixed cost per
 * query). A sorted page runs bounded there (ixia_idx_search_opts_t): one
 * that would read more than its first key's points near the page gives
 * up and goes to a worker. Anything that may wait (a sync search catching
 * up, expiries due, a schema to learn from the API) or read much
 * (aggregations read every match) goes to a worker, which runs the call
 * again from the start. */
static gboolean stays_inline(IxiaShardHandler *h, const ixia_query_t *q, guint limit) {
  /* A sort whose first key is not a number with missing values last would
   * only give up after planning: it goes at once. */
  if (q->n_sort && !ixia_sort_key_walkable(&q->sort[0])) return FALSE;
  return !q->n_aggs && limit <= INLINE_MAX_LIMIT &&
         q->track_total_hits <= h->lim.track_total_hits && !ixia_indexer_expiry_due(h->ix);
}

/* Hands the call to a worker (it runs again there from the start). */
static char *defer_call(gboolean *deferred) {
  ixia_server_defer();
  *deferred = TRUE;
  return NULL;
}

/* A request the I/O thread parsed, handed to the worker that runs it
 * (ixia_server_defer_with): parsing it again was the worker's first cost
 * (an `in` of 10,000 values: ~40% of the shard's time for the query). */
typedef struct {
  cJSON *req;
  search_req_t r; /* points into req */
  ixia_query_t *q;
} parsed_t;

static void parsed_free(gpointer p) {
  parsed_t *pd = p;
  cJSON_Delete(pd->req);
  ixia_query_destroy(pd->q);
  g_free(pd);
}

/* defer_call, leaving the parsed request to the worker. */
static char *defer_parsed(cJSON *req, const search_req_t *r, ixia_query_t *q, gboolean *deferred) {
  parsed_t *pd = g_new(parsed_t, 1);
  *pd = (parsed_t){req, *r, q};
  ixia_server_defer_with(pd, parsed_free);
  *deferred = TRUE;
  return NULL;
}

static char *search_parsed(IxiaShardHandler *h, cJSON *req, const search_req_t *rq, ixia_query_t *q,
                           GByteArray *page, gboolean *deferred, ixia_error_t **err);

/* Runs a search request: its answer as JSON text (search), or, with page,
 * into page (search_page), the text returned then being a placeholder.
 * NULL with err set on failure, or with *deferred when a worker runs it. */
static char *run_search(IxiaShardHandler *h, const char *json, GByteArray *page, gboolean *deferred,
                        ixia_error_t **err) {
  parsed_t *pd = ixia_server_on_io_thread() ? NULL : ixia_server_deferred_data();
  if (pd) {
    /* Parsed by the I/O thread that deferred it: its checks passed there. */
    char *out = search_parsed(h, pd->req, &pd->r, pd->q, page, deferred, err);
    g_free(pd);
    return out;
  }
  search_req_t r = {0};
  gboolean on_io = ixia_server_on_io_thread();
  cJSON *req = parse_request(h, json, &r, err);
  if (!req) return NULL;
  if (on_io && (r.sync || ixia_test_hook("SEARCH_DELAY_MS", 0) > 0)) {
    cJSON_Delete(req);
    return defer_call(deferred);
  }
  ixia_idx_t *idx = ixia_indexer_index(h->ix);
  gint64 ms = r.deadline_ms ? r.deadline_ms : (gint64)h->lim.deadline_ms;
  /* Catch up before parsing: the query may name a field whose index a
   * schema event just before it added. */
  if (r.sync && !ixia_indexer_wait_caught_up(h->ix, r.start_us + ms * G_TIME_SPAN_MILLISECOND, err)) {
    cJSON_Delete(req);
    return NULL;
  }
  /* A slow shard, for the tests of allow_partial. */
  gint64 delay_ms = ixia_test_hook("SEARCH_DELAY_MS", 0);
  if (delay_ms > 0) g_usleep((gulong)delay_ms * 1000);
  char *q_ns = g_strdup(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r.query, "namespace")));
  char *q_table = g_strdup(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r.query, "table")));
  ixia_error_t *perr = NULL;
  ixia_query_t *q = ixia_query_parse_tree(r.query, ixia_idx_schema, idx, &h->lim, &perr);
  /* The API knew the table (it parsed the query first), this shard does
   * not: its schema event was lost. Learn it from the API (which also
   * starts a repair); while a repair runs that may take a moment, so wait
   * for it (bounded by the deadline) rather than answer NOT_FOUND. */
  if (!q && perr->code == IXIA_ENOTFOUND && on_io) {
    ixia_error_destroy(perr);
    g_free(q_ns);
    g_free(q_table);
    cJSON_Delete(req);
    return defer_call(deferred);
  }
  if (!q && perr->code == IXIA_ENOTFOUND && q_ns && q_table) {
    if (ixia_indexer_learn_schema(h->ix, q_ns, q_table)) {
      ixia_error_destroy(perr), perr = NULL;
      q = ixia_query_parse_tree(r.query, ixia_idx_schema, idx, &h->lim, &perr);
    }
  }
  while (!q && perr->code == IXIA_ENOTFOUND && ixia_indexer_repairing(h->ix) &&
         g_get_monotonic_time() + 10 * G_TIME_SPAN_MILLISECOND < r.start_us + ms * G_TIME_SPAN_MILLISECOND) {
    g_usleep(10000);
    ixia_error_destroy(perr), perr = NULL;
    q = ixia_query_parse_tree(r.query, ixia_idx_schema, idx, &h->lim, &perr);
  }
  g_free(q_ns);
  g_free(q_table);
  if (!q) {
    ixia_error_propagate(err, perr);
    cJSON_Delete(req);
    return NULL;
  }
  return search_parsed(h, req, &r, q, page, deferred, err);
}

/* Runs a parsed request and frees req and q (or hands them to a worker
 * when it cannot run on this I/O thread). */
static char *search_parsed(IxiaShardHandler *h, cJSON *req, const search_req_t *rq, ixia_query_t *q,
                           GByteArray *page, gboolean *deferred, ixia_error_t **err) {
  search_req_t r = *rq;
  gboolean on_io = ixia_server_on_io_thread();
  ixia_idx_t *idx = ixia_indexer_index(h->ix);
  gint64 ms = r.deadline_ms ? r.deadline_ms : (gint64)h->lim.deadline_ms;
  if (!r.deadline_ms && q->timeout_ms > 0) ms = MIN((gint64)q->timeout_ms, ms);
  gint64 deadline_us = r.start_us + ms * G_TIME_SPAN_MILLISECOND;
  guint limit = r.limit >= 0 ? (guint)r.limit : q->limit;
  if (on_io && !stays_inline(h, q, limit)) return defer_parsed(req, &r, q, deferred);
  /* Documents past their expiry leave the index before anything counts
   * (on an I/O thread nothing is due: stays_inline). */
  ixia_indexer_settle_expired(h->ix, deadline_us);
  char *out = NULL;
  ixia_aggs_t *aggs = q->n_aggs ? ixia_aggs_new(q, &h->lim) : NULL;
  /* (Room for the page from the start: grown by doubling, a page of 100
   * hits of 80 bytes moved six times.) */
  GArray *hits = g_array_sized_new(FALSE, FALSE, sizeof(ixia_idx_hit_t), MIN(limit, 1024));
  ixia_idx_search_opts_t so = {.after_id = r.after_id, .limit = limit,
                               .deadline_us = deadline_us, .explain = q->explain, .bounded = on_io};
  ixia_idx_result_t res;
  GPtrArray *after_values = g_ptr_array_new_with_free_func(bytes_unref0);
  ixia_idx_after_t after = {0};
  gboolean has_after = FALSE;
  gboolean searched = sort_position(&r, q, after_values, &after, &has_after, &so, err) &&
                      ixia_idx_search(idx, q, &so, &h->lim, hits, aggs, &res, err);
  /* Too much for an I/O thread: a worker runs it again from the start. */
  gboolean gave_up = searched && res.gave_up;
  if (searched && !gave_up) {
    /* Written as text, hits first: building a tree and printing it cost
     * 5% of the shard's CPU at pages of 10 hits. Only the explanation and
     * the aggregation partials, trees of their own, are printed from
     * trees (ixia_json_print). */
    GString *text = g_string_sized_new(page ? 256 : 256 + hits->len * 96);
    g_string_append_c(text, '{');
    if (page) put_page_hits(page, q, hits);
    else append_hits(text, q, hits);
    if (q->n_sort) {
      /* The positions a later page is sorted by ("as_of" below is the
       * newest applied version: one member name, one meaning). */
      g_string_append(text, ",\"sort_as_of\":{\"epoch\":");
      ixia_json_append_int(text, (gint64)res.as_of_epoch);
      g_string_append(text, ",\"seq\":");
      ixia_json_append_int(text, (gint64)res.as_of);
      g_string_append_c(text, '}');
    }
    g_string_append(text, ",\"total\":");
    ixia_json_append_int(text, (gint64)res.total);
    g_string_append(text, res.total_exact ? ",\"total_relation\":\"eq\"" : ",\"total_relation\":\"gte\"");
    /* A batch published during the search: the caller re-checks the hits. */
    if (!res.settled) g_string_append(text, ",\"settled\":false");
    /* Its hits match a negation at their versions (no re-check needed). */
    if (res.schema_current) g_string_append(text, ",\"schema_current\":true");
    gboolean printed = TRUE;
    if (res.explain) {
      char *ex = ixia_json_print(res.explain);
      cJSON_Delete(res.explain);
      printed = ex != NULL;
      g_string_append(text, ",\"explain\":");
      g_string_append(text, ex ? ex : "null");
      g_free(ex);
    }
    if (aggs) {
      cJSON *partial = ixia_aggs_partial_json(aggs);
      char *a = ixia_json_print(partial);
      cJSON_Delete(partial);
      printed = printed && a != NULL;
      g_string_append(text, ",\"aggs\":");
      g_string_append(text, a ? a : "null");
      g_free(a);
    } else {
      g_string_append(text, ",\"aggs\":null");
    }
    /* How current the answer is: the newest version applied, and whether
     * the shard is repairing itself (it may miss edits until done). */
    gint64 max_version = ixia_idx_max_version(idx);
    g_string_append(text, ",\"max_version\":");
    ixia_json_append_int(text, max_version);
    g_string_append(text, ",\"as_of\":");
    ixia_json_append_int(text, max_version);
    g_string_append(text, ixia_indexer_repairing(h->ix) ? ",\"repairing\":true}" : ",\"repairing\":false}");
    if (printed && page) {
      /* The members after the hits, each written with its leading comma:
       * the page's JSON object starts with the first of them. */
      g_string_erase(text, 1, 1);
      ixia_hitpage_finish(page, hits->len, text->str, text->len);
      g_string_free(text, TRUE);
      out = g_strdup("");
    } else if (printed) {
      out = g_string_free(text, FALSE);
    } else {
      g_string_free(text, TRUE);
      ixia_error_set(err, IXIA_EINTERNAL, "out of memory printing a search response");
    }
  }
  ixia_idx_hits_clear(hits);
  g_array_free(hits, TRUE);
  g_ptr_array_free(after_values, TRUE);
  ixia_aggs_destroy(aggs);
  if (gave_up) return defer_parsed(req, &r, q, deferred);
  cJSON_Delete(req); /* r's members point into it */
  ixia_query_destroy(q);
  return out;
}

static gboolean h_search(IxiaSearchIf *iface, gchar **ret, const gchar *request_json,
                         IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "search", "request_json", request_json);
  ixia_error_t *err = NULL;
  gboolean deferred = FALSE;
  char *out = run_search(handler_of(iface), request_json, NULL, &deferred, &err);
  if (deferred) {
    *ret = g_strdup(""); /* dropped: the call runs again on a worker */
    return TRUE;
  }
  if (!out) return ixia_error_to_thrift(xe, err);
  *ret = out;
  return TRUE;
}

/* search_page: the page is written into the (empty) array the processor
 * hands over. */
static gboolean h_search_page(IxiaSearchIf *iface, GByteArray **ret, const gchar *request_json,
                              IxiaIxiaError **xe, GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "search_page", "request_json", request_json);
  ixia_error_t *err = NULL;
  gboolean deferred = FALSE;
  if (!*ret) *ret = g_byte_array_new();
  char *out = run_search(handler_of(iface), request_json, *ret, &deferred, &err);
  if (deferred) return TRUE; /* dropped: the call runs again on a worker */
  if (!out) return ixia_error_to_thrift(xe, err);
  g_free(out);
  return TRUE;
}

/* search_page answered from its frame (ixia_thrift_gate_set_fast): the same
 * run and answer as h_search_page without the generated coding, whose
 * argument and result objects, property reads and copies of the request
 * and of the page were ~9% of the shard's CPU on a sorted page of 100. */
gboolean ixia_search_answer_page(gpointer processor, const guint8 *frame, guint32 size,
                                 GByteArray *out) {
  gint32 seqid;
  const char *json;
  gsize len;
  if (!ixia_wire_read_string_call(frame, size, "search_page", &seqid, &json, &len)) return FALSE;
  static GPrivate page_key = G_PRIVATE_INIT((GDestroyNotify)g_byte_array_unref);
  GByteArray *page = ixia_server_thread_bytes(&page_key);
  IxiaShardHandler *h = (IxiaShardHandler *)((IxiaSearchProcessor *)processor)->handler;
  ixia_error_t *err = NULL;
  gboolean deferred = FALSE;
  char *text = run_search(h, json, page, &deferred, &err);
  if (deferred) {
    /* The server drops this answer and runs the frame again on a worker. */
    ixia_wire_append_error(out, "search_page", 11, seqid, IXIA_EUNAVAILABLE, "deferred");
  } else if (!text) {
    ixia_wire_append_error(out, "search_page", 11, seqid, (gint32)err->code, err->message);
    ixia_error_destroy(err);
  } else {
    ixia_wire_append_string_reply(out, "search_page", seqid, page->data, page->len);
  }
  g_free(text);
  return TRUE;
}

static gboolean h_status(IxiaSearchIf *iface, gchar **ret, IxiaIxiaError **xe, GError **error) {
  (void)xe, (void)error;
  *ret = ixia_indexer_status(handler_of(iface)->ix);
  return TRUE;
}

static gboolean h_reindex(IxiaSearchIf *iface, gint32 *ret, const GPtrArray *events,
                          IxiaIxiaError **xe, GError **error) {
  (void)error;
  guint n = events ? events->len : 0;
  ixia_idx_event_t *evs = g_new0(ixia_idx_event_t, n ? n : 1);
  ixia_error_t *err = NULL;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < n; i++) {
    ok = ixia_indexer_event_from_thrift(g_ptr_array_index(events, i), &evs[i], &err);
    if (!ok) ixia_error_prefix(err, "reindex event %u", i);
  }
  guint applied = 0;
  ok = ok && ixia_indexer_reindex(handler_of(iface)->ix, evs, n, &applied, &err);
  g_free(evs);
  if (!ok) return ixia_error_to_thrift(xe, err);
  *ret = (gint32)MIN(applied, (guint)G_MAXINT32);
  return TRUE;
}

typedef struct {
  GPtrArray *out;
  guint limit;
} docs_ctx_t;

static gboolean collect_doc(const char *key, size_t key_len, gint64 version, gboolean deleted,
                            void *ud) {
  docs_ctx_t *c = ud;
  IxiaIndexedDoc *d = g_object_new(IXIA_TYPE_INDEXED_DOC, NULL);
  if (!d->key) d->key = g_byte_array_new();
  g_byte_array_append(d->key, (const guint8 *)key, (guint)key_len);
  d->version = version;
  d->deleted = deleted;
  d->__isset_key = d->__isset_version = d->__isset_deleted = TRUE;
  g_ptr_array_add(c->out, d);
  return c->out->len < c->limit;
}

static gboolean h_docs(IxiaSearchIf *iface, GPtrArray **ret, const gchar *ns, const gchar *table,
                       const GByteArray *after_key, const gint32 limit, IxiaIxiaError **xe,
                       GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "docs", "ns", ns, "table", table);
  if (limit < 1 || limit > DOCS_MAX)
    return ixia_error_to_thrift(
        xe, ixia_error_new(IXIA_EINVAL, "docs: limit must be from 1 to %d, not %d", DOCS_MAX, (int)limit));
  ixia_error_t *err = NULL;
  if (!ixia_name_valid(ns, "namespace", &err) || !ixia_name_valid(table, "table", &err))
    return ixia_error_to_thrift(xe, err);
  docs_ctx_t c = {*ret, (guint)limit};
  gboolean have_after = after_key && after_key->len > 0;
  if (!ixia_idx_foreach_doc(ixia_indexer_index(handler_of(iface)->ix), ns, table,
                            have_after ? (const char *)after_key->data : NULL,
                            have_after ? after_key->len : 0, collect_doc, &c, &err))
    return ixia_error_to_thrift(xe, err);
  return TRUE;
}

/* Most bounds of one digest call. */
#define DIGEST_MAX_BOUNDS 10000

static gboolean h_digest(IxiaSearchIf *iface, GPtrArray **ret, const gchar *ns, const gchar *table,
                         const gchar *after_key, const GPtrArray *bounds, IxiaIxiaError **xe,
                         GError **error) {
  (void)error;
  IXIA_THRIFT_REQUIRE(xe, "digest", "ns", ns, "table", table, "bounds", bounds);
  ixia_error_t *err = NULL;
  if (bounds->len == 0 || bounds->len > DIGEST_MAX_BOUNDS)
    return ixia_error_to_thrift(
        xe, ixia_error_new(IXIA_EINVAL, "digest: 1 to %d bounds, not %u", DIGEST_MAX_BOUNDS, bounds->len));
  for (guint i = 0; i + 1 < bounds->len; i++) {
    const char *a = g_ptr_array_index(bounds, i), *b = g_ptr_array_index(bounds, i + 1);
    if (!a || !b || !*a || (*b && strcmp(a, b) >= 0))
      return ixia_error_to_thrift(
          xe, ixia_error_new(IXIA_EINVAL, "digest: bounds must increase, with \"\" (the end) only last"));
  }
  GArray *ranges = ixia_ae_ranges_new();
  gboolean ok = ixia_heal_index_digest(ixia_indexer_index(handler_of(iface)->ix), ns, table, after_key,
                                       (const char *const *)bounds->pdata, bounds->len, ranges, &err);
  for (guint i = 0; ok && i < ranges->len; i++) {
    const ixia_ae_range_t *r = &g_array_index(ranges, ixia_ae_range_t, i);
    g_ptr_array_add(*ret, ixia_range_digest_new(r->last_key, r->count, r->hash));
  }
  g_array_unref(ranges);
  return ok ? TRUE : ixia_error_to_thrift(xe, err);
}

static void ixia_shard_handler_init(IxiaShardHandler *self) { (void)self; }

static void ixia_shard_handler_class_init(IxiaShardHandlerClass *klass) {
  IxiaSearchHandlerClass *h = IXIA_SEARCH_HANDLER_CLASS(klass);
  h->search = h_search;
  h->search_page = h_search_page;
  h->status = h_status;
  h->reindex = h_reindex;
  h->docs = h_docs;
  h->digest = h_digest;
}

ThriftProcessor *ixia_search_processor_new(ixia_indexer_t *ix, const ixia_config_t *cfg) {
  IxiaShardHandler *handler = g_object_new(ixia_shard_handler_get_type(), NULL);
  handler->ix = ix;
  ixia_query_limits_from_config(cfg, &handler->lim);
  ThriftProcessor *p = g_object_new(IXIA_TYPE_SEARCH_PROCESSOR, "handler", handler, NULL);
  g_object_unref(handler); /* the processor holds its own reference */
  return p;
}
