/* freshness: put-to-searchable latency.
 *
 * The driver sends puts of new documents (open loop at --rate); a sample of
 * them (--probe-rate per second) become probes. One poller thread queries
 * the index for every pending probe at once ({"in": {"key": [...]}}, no
 * min_version) every --poll-ms (1 ms), and records for each probe the time
 * from its put's scheduled send to the end of the first query that returned
 * it. That bounds visibility from above by one poll round trip, which the
 * result reports (poll_ms). Sampling keeps the polling load flat whatever
 * the put rate. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "data.h"

/* Keys polled per query: an "in" list may hold up to query.max_in_values; 100 keeps a poll cheap. */
#define POLL_MAX_KEYS 100
/* A probe not visible after this long counts as lost. */
#define PROBE_GIVE_UP_US (30 * G_USEC_PER_SEC)

typedef struct {
  char *key;
  gint64 sched_us;
} probe_t;

typedef struct {
  GAsyncQueue *probes; /* probe_t*, from the put threads */
  GThread *poller;
  ixia_client_t *client; /* the poller's */
  _Atomic gint stop;
  double probe_fraction;
  gulong poll_pause_us;
  guint64 nonce;
  /* Poller's, read after it joined. */
  ixia_hdr_t *visible;
  ixia_hdr_t *poll_lat;
  guint64 lost, poll_errors;
  ixia_error_t *poll_error;
} fresh_t;

static void probe_free(gpointer p) {
  probe_t *pr = p;
  g_free(pr->key);
  g_free(pr);
}

/* Queries the first keys of pending; removes and records those visible. */
static void poll_once(fresh_t *f, GPtrArray *pending) {
  GString *req = g_string_new("{\"namespace\":\"" IXIA_BENCH_NS "\",\"table\":\"" IXIA_BENCH_TABLE
                              "\",\"filter\":{\"in\":{\"key\":[");
  guint n = MIN(pending->len, POLL_MAX_KEYS);
  for (guint i = 0; i < n; i++)
    g_string_append_printf(req, "%s\"%s\"", i ? "," : "", ((probe_t *)g_ptr_array_index(pending, i))->key);
  g_string_append_printf(req, "]}},\"fields\":[\"key\"],\"limit\":%u}", n);
  gint64 t0 = g_get_monotonic_time();
  cJSON *resp = NULL;
  ixia_error_t *e = NULL;
  gboolean ok = ixia_bench_query(f->client, req->str, &resp, &e);
  gint64 done = g_get_monotonic_time();
  g_string_free(req, TRUE);
  if (!ok) {
    f->poll_errors++;
    ixia_error_propagate(&f->poll_error, e);
    g_usleep(10000);
    return;
  }
  ixia_hdr_record(f->poll_lat, done - t0);
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  const cJSON *hit;
  cJSON_ArrayForEach(hit, cJSON_GetObjectItemCaseSensitive(resp, "hits")) {
    const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hit, "key"));
    if (k) g_hash_table_add(seen, (gpointer)k);
  }
  for (guint i = n; i-- > 0;) {
    probe_t *p = g_ptr_array_index(pending, i);
    if (g_hash_table_contains(seen, p->key)) {
      ixia_hdr_record(f->visible, done - p->sched_us);
      g_ptr_array_remove_index(pending, i);
    } else if (done - p->sched_us > PROBE_GIVE_UP_US) {
      f->lost++;
      g_ptr_array_remove_index(pending, i);
    }
  }
  g_hash_table_destroy(seen);
  cJSON_Delete(resp);
}

static gpointer poller_main(gpointer data) {
  fresh_t *f = data;
  GPtrArray *pending = g_ptr_array_new_with_free_func(probe_free);
  for (;;) {
    probe_t *p;
    while ((p = g_async_queue_try_pop(f->probes))) g_ptr_array_add(pending, p);
    if (pending->len == 0) {
      if (atomic_load(&f->stop)) break;
      p = g_async_queue_timeout_pop(f->probes, 20000);
      if (p) g_ptr_array_add(pending, p);
      continue;
    }
    poll_once(f, pending);
    g_usleep(f->poll_pause_us);
  }
  g_ptr_array_unref(pending);
  return NULL;
}

static gboolean fresh_prepare(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err) {
  const ixia_bench_opts_t *o = r->o;
  if (!ixia_bench_apply_schema(o, err)) return FALSE;
  ixia_client_t *c = ixia_client_new(o->api, err);
  if (!c) return FALSE;
  ixia_error_t *e = NULL;
  if (ixia_bench_count(c, "{\"term\":{\"key\":\"no-such-key\"}}", &e) < 0) {
    ixia_client_destroy(c);
    if (!ixia_bench_is_missing_feature(e)) return ixia_error_propagate(err, e);
    *skip = g_strdup_printf("query: %s: %s", ixia_code_name(e->code), e->message);
    ixia_error_destroy(e);
    return TRUE;
  }
  fresh_t *f = g_new0(fresh_t, 1);
  *state = f;
  f->client = c;
  f->probes = g_async_queue_new_full(probe_free);
  f->visible = ixia_hdr_new();
  f->poll_lat = ixia_hdr_new();
  f->poll_pause_us = (gulong)(o->poll_ms * 1000);
  f->probe_fraction = o->rate > 0 ? MIN(1.0, o->probe_rate / o->rate) : 1.0;
  /* New keys in every run: a key indexed by an earlier run would look
   * visible at once. */
  f->nonce = (guint64)g_get_real_time();
  f->poller = g_thread_new("bench-poll", poller_main, f);
  return TRUE;
}

/* A put of the worker's next new key. */
static gboolean fresh_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                              ixia_error_t **err) {
  (void)err;
  fresh_t *f = w->run->state;
  guint64 seq = w->extra[0]++;
  snprintf(call->key, sizeof call->key, "f%" G_GUINT64_FORMAT "-%d-%" G_GUINT64_FORMAT, f->nonce, w->id, seq);
  char *doc = ixia_bench_doc(seq, w->run->o->seed, 0, call->key);
  ixia_bench_put_message(call, doc, out);
  g_free(doc);
  return TRUE;
}

/* A sample of the acknowledged puts become probes, timed from the put's
 * scheduled send (w->sched_us). */
static gboolean fresh_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                             gsize len, ixia_error_t **err) {
  if (!ixia_bench_put_answer(call, a, len, NULL, err)) return FALSE;
  fresh_t *f = w->run->state;
  if (g_rand_double(w->rnd) < f->probe_fraction) {
    probe_t *p = g_new0(probe_t, 1);
    p->key = g_strdup(call->key);
    p->sched_us = w->sched_us;
    g_async_queue_push(f->probes, p);
    w->extra[1]++;
  }
  return TRUE;
}

static void stop_poller(fresh_t *f) {
  if (!f->poller) return;
  atomic_store(&f->stop, 1);
  g_thread_join(f->poller);
  f->poller = NULL;
}

static void fresh_report(ixia_bench_run_t *r, const ixia_bench_worker_t *tot, cJSON *out) {
  fresh_t *f = r->state;
  stop_poller(f); /* waits for the last probes (or gives up on them) */
  cJSON_AddNumberToObject(out, "probes", (double)tot->extra[1]);
  cJSON_AddNumberToObject(out, "visible", (double)ixia_hdr_count(f->visible));
  cJSON_AddNumberToObject(out, "lost", (double)f->lost);
  ixia_bench_add_latency(out, "fresh_", f->visible);
  cJSON_AddNumberToObject(out, "poll_pause_ms", r->o->poll_ms);
  cJSON_AddNumberToObject(out, "polls", (double)ixia_hdr_count(f->poll_lat));
  cJSON_AddNumberToObject(out, "poll_errors", (double)f->poll_errors);
  ixia_bench_add_latency(out, "poll_", f->poll_lat);
  if (f->poll_error) cJSON_AddStringToObject(out, "poll_error", f->poll_error->message);
}

static void fresh_cleanup(gpointer state) {
  fresh_t *f = state;
  if (!f) return;
  stop_poller(f);
  g_async_queue_unref(f->probes);
  ixia_client_destroy(f->client);
  ixia_hdr_destroy(f->visible);
  ixia_hdr_destroy(f->poll_lat);
  ixia_error_destroy(f->poll_error);
  g_free(f);
}

const ixia_bench_workload_t ixia_bench_freshness = {
    .name = "freshness", .class_names = {NULL, NULL}, .prepare = fresh_prepare,
    .wire = IXIA_BENCH_WIRE_THRIFT, .request = fresh_request, .answer = fresh_answer,
    .report = fresh_report, .cleanup = fresh_cleanup};
