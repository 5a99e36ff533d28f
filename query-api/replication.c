/* The replication source (replication.h): the truth store's WAL shipped to
 * replication sinks, at least once, in order.
 *
 * One thread owns the checkpoint and the sink connection; it prefers the
 * in-memory tail the store fills as it commits and falls back to reading
 * the WAL when the tail does not continue the checkpoint. Nothing advances
 * until a sink has answered, so a failure at any point only repeats. */
#include "replication.h"

#include <stdatomic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>


#include "client.h"
#include "ixia_replication_sink.h"
#include "log.h"
#include "metrics.h"
#include "thrift_util.h"

struct ixia_replication {
  ixia_store_t *store;
  gchar **sinks;
  guint n_sinks;
  guint current;
  gint64 max_batch_bytes;
  gint64 retry_min_ms, retry_max_ms, call_timeout_ms;
  char *checkpoint_path;
  GThread *thread;
  _Atomic gint stopping;
  GMutex lock; /* guards the fields below */
  GCond wake;  /* destroy wakes back-off sleeps */
  gint64 checkpoint;  /* last version a sink acknowledged */
  gint64 persisted;   /* the version in REPLICATION_CHECKPOINT */
  guint64 events_published, calls, failures, checkpoint_failures;
  guint64 wal_reads;  /* reads of the WAL files: the tail did not continue the checkpoint */
  guint64 reconnects; /* calls that succeeded at once on a new connection after the kept one failed */
  char *checkpoint_error; /* why the last save failed; NULL once one succeeds */
  gboolean gap;
  gint64 gap_missing_from, gap_available_from;
  char *last_error;
  /* Batches the store committed, in order (IxiaWalBatch), so that a source
   * that keeps up ships from memory; the WAL is read only when the tail does
   * not start right after the checkpoint (after a restart, a failure, or an
   * overflow that dropped the oldest). Guarded by lock. */
  GQueue tail;
  gsize tail_bytes;
  /* When the edits not yet acknowledged were committed: (last version of a
   * committed group, monotonic µs), oldest first, at most PENDING_MAX (the
   * oldest are what the age needs). Guarded by lock. */
  GArray *pending;
  gint64 started_us;
  gint64 call_since_us; /* a shipment waits for a sink since then; 0: none */
  /* connection to the current sink; conn.fd is read by destroy (under lock)
   * to interrupt a call in flight */
  ixia_thrift_conn_t conn;
  IxiaReplicationSinkIf *client;
  ixia_metric_series_t *group_sizes;
};

static gboolean load_checkpoint(ixia_replication_t *r, ixia_error_t **err) {
  char *text = NULL;
  GError *gerr = NULL;
  if (!g_file_get_contents(r->checkpoint_path, &text, NULL, &gerr)) {
    if (g_error_matches(gerr, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
      g_error_free(gerr);
      r->checkpoint = r->persisted = 0; /* a new store: ship from the first version */
      return TRUE;
    }
    return ixia_error_from_gerror(err, gerr, IXIA_EINTERNAL, r->checkpoint_path);
  }
  char *end = NULL;
  gint64 v = g_ascii_strtoll(text, &end, 10);
  gboolean ok = end != text && v >= 0;
  g_free(text);
  if (!ok)
    return ixia_error_set(err, IXIA_EINTERNAL, "%s is corrupt; replace it with the last shipped version",
                          r->checkpoint_path);
  r->checkpoint = r->persisted = v;
  return TRUE;
}

static gboolean save_checkpoint(ixia_replication_t *r, gint64 v, ixia_error_t **err) {
  char text[32];
  snprintf(text, sizeof text, "%" G_GINT64_FORMAT "\n", v);
  GError *gerr = NULL;
  /* Durable: an acknowledged checkpoint must survive a crash, or the next
   * start would re-send (harmless) — but a torn file would lose our place. */
  if (!g_file_set_contents_full(r->checkpoint_path, text, -1,
                                G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0644,
                                &gerr))
    return ixia_error_from_gerror(
        err, gerr,
        g_error_matches(gerr, G_FILE_ERROR, G_FILE_ERROR_NOSPC) ? IXIA_EEXHAUSTED : IXIA_EUNAVAILABLE,
        "save replication checkpoint");
  return TRUE;
}

static void set_last_error(ixia_replication_t *r, const char *msg) {
  g_mutex_lock(&r->lock);
  g_free(r->last_error);
  r->last_error = msg ? g_strdup(msg) : NULL;
  g_mutex_unlock(&r->lock);
}

static void disconnect(ixia_replication_t *r) {
  g_clear_object(&r->client);
  g_mutex_lock(&r->lock);
  ixia_thrift_conn_close(&r->conn);
  g_mutex_unlock(&r->lock);
}

static gboolean connect_sink(ixia_replication_t *r, ixia_error_t **err) {
  if (r->client) return TRUE;
  ixia_thrift_conn_t conn;
  /* A sink waits for Kafka; bound how long we wait for the sink. */
  if (!ixia_thrift_conn_open(&conn, r->sinks[r->current], MIN(r->call_timeout_ms, ixia_client_timeouts()->connect_ms),
                             r->call_timeout_ms, err)) {
    if (err && *err) ixia_error_prefix(*err, "sink");
    return FALSE;
  }
  g_mutex_lock(&r->lock);
  if (atomic_load(&r->stopping)) {
    /* destroy interrupted the connection it saw; it would not see this one. */
    g_mutex_unlock(&r->lock);
    ixia_thrift_conn_close(&conn);
    return ixia_error_set(err, IXIA_EUNAVAILABLE, "replication is stopping");
  }
  r->conn = conn;
  g_mutex_unlock(&r->lock);
  r->client = g_object_new(IXIA_TYPE_REPLICATION_SINK_CLIENT, "input_protocol", r->conn.protocol,
                           "output_protocol", r->conn.protocol, NULL);
  return TRUE;
}

/* Sleeps up to ms unless destroy wakes us. Returns FALSE when stopping. */
static gboolean backoff(ixia_replication_t *r, gint64 ms) {
  gint64 deadline = g_get_monotonic_time() + ms * 1000;
  g_mutex_lock(&r->lock);
  while (!atomic_load(&r->stopping) && g_cond_wait_until(&r->wake, &r->lock, deadline)) {
  }
  g_mutex_unlock(&r->lock);
  return !atomic_load(&r->stopping);
}

/* Most WAL batches in one shipment, well under the sink's server.max_items
 * (each batch is one list element of the call). */
#define SHIP_MAX_BATCHES 10000

typedef struct {
  GPtrArray *batches; /* IxiaWalBatch */
  gint64 first, last; /* versions covered */
  guint64 edits;
  gboolean gap;
  gint64 gap_available_from;
} wal_read_t;

static gboolean add_wal_batch(gint64 first, gint64 last, const char *data, size_t len,
                              gpointer user) {
  wal_read_t *out = user;
  g_ptr_array_add(out->batches, ixia_wal_batch_new(first, data, len));
  if (out->batches->len == 1) out->first = first;
  out->last = last;
  out->edits += (guint64)(last - first + 1);
  return out->batches->len < SHIP_MAX_BATCHES;
}

/* Reads whole write batches after `checkpoint`, up to max_batch_bytes. */
static gboolean read_wal(ixia_replication_t *r, gint64 checkpoint, wal_read_t *out,
                         ixia_error_t **err) {
  gint64 available_from = 0;
  if (!ixia_store_read_wal(r->store, checkpoint, r->max_batch_bytes, add_wal_batch, out,
                           &available_from, err))
    return FALSE;
  out->gap = available_from > 0;
  out->gap_available_from = available_from;
  return TRUE;
}

#define TAIL_MAX_BYTES (64u << 20)

static gint64 batch_last(IxiaWalBatch *b) {
  return ixia_record_batch_last(b->sequence, (const char *)b->data->data, b->data->len);
}

/* Commit times kept for the age of the oldest pending edit. */
#define PENDING_MAX 65536
typedef struct {
  gint64 last;
  gint64 at_us;
} pending_t;

static void on_commit(gint64 first_version, const char *batch, size_t len, gpointer user) {
  ixia_replication_t *r = user;
  IxiaWalBatch *b = ixia_wal_batch_new(first_version, batch, len);
  pending_t p = {ixia_record_batch_last(first_version, batch, len), g_get_monotonic_time()};
  ixia_metric_observe(r->group_sizes, (double)(p.last - first_version + 1));
  g_mutex_lock(&r->lock);
  if (r->pending->len < PENDING_MAX) g_array_append_val(r->pending, p);
  g_queue_push_tail(&r->tail, b);
  r->tail_bytes += len;
  while (r->tail_bytes > TAIL_MAX_BYTES) { /* far behind: the WAL has it all */
    IxiaWalBatch *old = g_queue_pop_head(&r->tail);
    r->tail_bytes -= old->data->len;
    g_object_unref(old);
  }
  g_mutex_unlock(&r->lock);
}

/* Takes batches continuing right after checkpoint from the in-memory tail.
 * FALSE when the tail cannot serve (the WAL must be read). */
static gboolean take_from_tail(ixia_replication_t *r, gint64 checkpoint, wal_read_t *out) {
  g_mutex_lock(&r->lock);
  IxiaWalBatch *head;
  while ((head = g_queue_peek_head(&r->tail)) && batch_last(head) <= checkpoint) {
    g_queue_pop_head(&r->tail);
    r->tail_bytes -= head->data->len;
    g_object_unref(head);
  }
  gint64 next = checkpoint + 1;
  gint64 bytes = 0;
  while ((head = g_queue_peek_head(&r->tail)) && head->sequence == next &&
         out->batches->len < SHIP_MAX_BATCHES &&
         (bytes == 0 || bytes + head->data->len <= r->max_batch_bytes)) {
    g_queue_pop_head(&r->tail);
    r->tail_bytes -= head->data->len;
    bytes += head->data->len;
    if (out->batches->len == 0) out->first = head->sequence;
    out->last = batch_last(head);
    out->edits += (guint64)(out->last - head->sequence + 1);
    next = out->last + 1;
    g_ptr_array_add(out->batches, head);
  }
  g_mutex_unlock(&r->lock);
  return out->batches->len > 0;
}

/* A call on a kept connection that fails in the transport sooner than this
 * is taken for a connection the sink closed while it idled
 * (server.idle_timeout_ms) and made again at once on a new one (a sink that
 * closed it for another reason, e.g. a frame over its limit, refuses the
 * second call the same way, which then fails as usual). */
#define STALE_CONN_US (1000 * 1000)

static gboolean ship(ixia_replication_t *r, GPtrArray *batches, ixia_error_t **err) {
  for (int attempt = 0;; attempt++) {
    gboolean kept = r->client != NULL;
    if (!connect_sink(r, err)) return FALSE;
    gint64 acked = 0, t0 = g_get_monotonic_time();
    IxiaIxiaError *xe = NULL;
    GError *gerr = NULL;
    gboolean ok = ixia_replication_sink_if_replicate(r->client, &acked, batches, &xe, &gerr);
    if (!ok && !xe && kept && attempt == 0 && g_get_monotonic_time() - t0 < STALE_CONN_US &&
        !atomic_load(&r->stopping)) {
      /* Shipping is at least once: if the sink did publish, the events
       * go twice and consumers drop the repeats by version. */
      if (gerr) g_error_free(gerr);
      disconnect(r);
      continue;
    }
    if (ok && attempt > 0) {
      g_mutex_lock(&r->lock);
      r->reconnects++;
      g_mutex_unlock(&r->lock);
    }
    IxiaWalBatch *last_batch = batches->len ? g_ptr_array_index(batches, batches->len - 1) : NULL;
    if (ok && !xe && last_batch && acked != batch_last(last_batch)) {
      /* Only what the sink says it published may move the checkpoint. */
      ixia_error_set(err, IXIA_EINTERNAL,
                     "sink %s acknowledged up to version %" G_GINT64_FORMAT ", expected %" G_GINT64_FORMAT,
                     r->sinks[r->current], acked, batch_last(last_batch));
      ok = FALSE;
    }
    if (xe) {
      ixia_error_set(err, (ixia_code_t)xe->code, "sink %s: %s", r->sinks[r->current], xe->message);
      g_object_unref(xe);
      ok = FALSE;
    } else if (!ok) {
      ixia_error_set(err, IXIA_EUNAVAILABLE, "sink %s: %s", r->sinks[r->current],
                     gerr ? gerr->message : "call failed");
      disconnect(r); /* the connection's state is unknown now */
    }
    if (gerr) g_error_free(gerr);
    return ok;
  }
}

/* Consecutive reads that found nothing past the checkpoint although the
 * store holds newer versions. A committed edit is in the WAL before the
 * store's sequence moves, so this persisting means the WAL lost them. */
#define EMPTY_READS_FOR_GAP 20
#define CHECKPOINT_EVERY_US (200 * 1000)

/* Persists the acknowledged checkpoint when it moved, at most every
 * CHECKPOINT_EVERY_US (always with force, at shutdown). A failure (a full
 * disk: the file lives in store.path) is logged once (and at shutdown),
 * counted and retried on the next call; shipping goes on meanwhile, since a
 * crash then only re-sends from the older persisted version, which
 * consumers drop by version. */
static void persist_checkpoint(ixia_replication_t *r, gint64 *last_attempt, gboolean force) {
  g_mutex_lock(&r->lock);
  gint64 v = r->checkpoint, persisted = r->persisted;
  g_mutex_unlock(&r->lock);
  gint64 now = g_get_monotonic_time();
  if (v == persisted || (!force && now - *last_attempt < CHECKPOINT_EVERY_US)) return;
  *last_attempt = now;
  ixia_error_t *err = NULL;
  gboolean ok = save_checkpoint(r, v, &err);
  g_mutex_lock(&r->lock);
  gboolean was_failing = r->checkpoint_error != NULL;
  g_clear_pointer(&r->checkpoint_error, g_free);
  if (ok) {
    r->persisted = v;
  } else {
    r->checkpoint_failures++;
    r->checkpoint_error = g_strdup(err->message);
  }
  g_mutex_unlock(&r->lock);
  if (!ok && (!was_failing || force))
    IXIA_WARN("replication: %s; retrying every %d ms, shipping goes on (a restart now re-sends "
              "from version %" G_GINT64_FORMAT ")",
              err->message, CHECKPOINT_EVERY_US / 1000, persisted + 1);
  else if (ok && was_failing)
    IXIA_INFO("replication: checkpoint saved again (version %" G_GINT64_FORMAT ")", v);
  ixia_error_destroy(err);
}

static void report_gap(ixia_replication_t *r, gint64 missing_from, gint64 available_from) {
  IXIA_ERROR("replication: WAL gap: version %" G_GINT64_FORMAT
             " is no longer in the WAL (oldest available: %" G_GINT64_FORMAT
             ", 0 = none). Shipping stopped; rebuild the index from a snapshot (see docs/OPERATIONS.md).",
             missing_from, available_from);
  g_mutex_lock(&r->lock);
  r->gap = TRUE;
  r->gap_missing_from = missing_from;
  r->gap_available_from = available_from;
  g_mutex_unlock(&r->lock);
  set_last_error(r, "WAL gap: shipping stopped");
}

static gpointer replication_main(gpointer data) {
  ixia_replication_t *r = data;
  gint64 delay = r->retry_min_ms;
  int empty_reads = 0;
  gint64 last_persist = 0;
  while (!atomic_load(&r->stopping)) {
    persist_checkpoint(r, &last_persist, FALSE);
    g_mutex_lock(&r->lock);
    gint64 checkpoint = r->checkpoint;
    gboolean gap = r->gap;
    g_mutex_unlock(&r->lock);
    if (gap) {
      backoff(r, 1000); /* stopped for good; stay up for stats */
      continue;
    }
    if (ixia_store_wait_newer(r->store, checkpoint, 200) <= checkpoint) continue;
    wal_read_t w = {.batches = g_ptr_array_new_with_free_func(g_object_unref)};
    ixia_error_t *err = NULL;
    gboolean ok = take_from_tail(r, checkpoint, &w);
    if (!ok) {
      /* Slow (RocksDB finds the record in the WAL files): at most after a
       * restart, a failed shipment or an overflow of the tail. */
      g_mutex_lock(&r->lock);
      r->wal_reads++;
      g_mutex_unlock(&r->lock);
      ok = read_wal(r, checkpoint, &w, &err);
    }
    empty_reads = ok && !w.gap && w.batches->len == 0 ? empty_reads + 1 : 0;
    if (ok && w.gap) {
      report_gap(r, checkpoint + 1, w.gap_available_from);
    } else if (empty_reads >= EMPTY_READS_FOR_GAP) {
      report_gap(r, checkpoint + 1, 0);
    } else if (ok && w.batches->len > 0) {
      g_mutex_lock(&r->lock);
      r->call_since_us = g_get_monotonic_time();
      g_mutex_unlock(&r->lock);
      ok = ship(r, w.batches, &err);
      g_mutex_lock(&r->lock);
      r->call_since_us = 0;
      g_mutex_unlock(&r->lock);
      g_mutex_lock(&r->lock);
      r->calls++;
      g_mutex_unlock(&r->lock);
      /* The checkpoint is persisted at most every CHECKPOINT_EVERY_US (at
       * the top of the loop): an fsync per shipment would put the disk on
       * the lag's critical path. After a crash the source restarts from the
       * last persisted one and re-sends at most that much, which consumers
       * drop by version; it can never be ahead of what a sink
       * acknowledged. */
      if (ok) {
        g_mutex_lock(&r->lock);
        r->checkpoint = w.last;
        r->events_published += w.edits;
        guint done = 0;
        while (done < r->pending->len && g_array_index(r->pending, pending_t, done).last <= w.last) done++;
        if (done) g_array_remove_range(r->pending, 0, done);
        g_mutex_unlock(&r->lock);
        delay = r->retry_min_ms;
        set_last_error(r, NULL);
      }
    } else if (ok) {
      /* Nothing readable yet past the checkpoint (e.g. the edit is not in a
       * WAL file yet); try again shortly. */
      backoff(r, 5);
    }
    if (!ok) {
      g_mutex_lock(&r->lock);
      r->failures++;
      g_mutex_unlock(&r->lock);
      IXIA_WARN("replication: %s; retrying in %" G_GINT64_FORMAT " ms", err->message, delay);
      set_last_error(r, err->message);
      disconnect(r);
      r->current = (r->current + 1) % r->n_sinks;
      backoff(r, delay);
      delay = MIN(delay * 2, r->retry_max_ms);
    }
    ixia_error_destroy(err);
    g_ptr_array_free(w.batches, TRUE);
  }
  persist_checkpoint(r, &last_persist, TRUE);
  return NULL;
}

ixia_replication_t *ixia_replication_new(const ixia_config_t *cfg, ixia_store_t *store,
                                         ixia_error_t **err) {
  ixia_replication_t *r = g_new0(ixia_replication_t, 1);
  r->conn.fd = -1;
  g_mutex_init(&r->lock);
  g_cond_init(&r->wake);
  r->store = store;
  r->max_batch_bytes = ixia_config_int(cfg, "replication.max_batch_bytes");
  r->retry_min_ms = ixia_config_int(cfg, "replication.retry_min_ms");
  r->retry_max_ms = MAX(r->retry_min_ms, ixia_config_int(cfg, "replication.retry_max_ms"));
  r->call_timeout_ms = ixia_config_int(cfg, "replication.call_timeout_ms");
  r->checkpoint_path = g_build_filename(ixia_config_str(cfg, "store.path"), "REPLICATION_CHECKPOINT", NULL);
  gchar **parts = g_strsplit(ixia_config_str(cfg, "replication.sinks"), ",", -1);
  GPtrArray *sinks = g_ptr_array_new();
  for (gchar **p = parts; *p; p++) {
    char *s = g_strstrip(g_strdup(*p));
    if (*s)
      g_ptr_array_add(sinks, s);
    else
      g_free(s);
  }
  g_strfreev(parts);
  r->n_sinks = sinks->len;
  g_ptr_array_add(sinks, NULL);
  r->sinks = (gchar **)g_ptr_array_free(sinks, FALSE);
  if (!load_checkpoint(r, err)) {
    ixia_replication_destroy(r);
    return NULL;
  }
  g_queue_init(&r->tail);
  r->pending = g_array_new(FALSE, FALSE, sizeof(pending_t));
  r->started_us = g_get_monotonic_time();
  static const double group_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
  r->group_sizes = ixia_metrics_series(
      ixia_metrics_histogram(ixia_metrics_default(), "ixia_store_group_commit_edits",
                             "Edits per group commit (one synced WAL write shared by the "
                             "writers waiting at that moment).",
                             NULL, group_buckets, G_N_ELEMENTS(group_buckets)),
      NULL);
  gint64 latest = ixia_store_latest_version(store);
  if (r->checkpoint > latest) {
    /* Versions up to the checkpoint would never be shipped: a store restored
     * from an older copy, or a hand-edited checkpoint. Never skip silently. */
    report_gap(r, latest + 1, 0);
    IXIA_ERROR("replication: checkpoint %" G_GINT64_FORMAT " is ahead of the store (latest %" G_GINT64_FORMAT
               "); fix %s",
               r->checkpoint, latest, r->checkpoint_path);
  }
  for (guint i = 0; i < r->n_sinks; i++) {
    const char *colon = strrchr(r->sinks[i], ':');
    char *end = NULL;
    guint64 port = colon ? g_ascii_strtoull(colon + 1, &end, 10) : 0;
    if (!colon || colon == r->sinks[i] || !end || *end || port == 0 || port > 65535) {
      ixia_error_set(err, IXIA_EINVAL, "replication.sinks: bad address '%s', expected HOST:PORT",
                     r->sinks[i]);
      ixia_replication_destroy(r);
      return NULL;
    }
  }
  if (r->n_sinks > 0) {
    ixia_store_set_commit_cb(store, on_commit, r);
    IXIA_INFO("replication: shipping from version %" G_GINT64_FORMAT " to %u sink(s)",
              r->checkpoint + 1, r->n_sinks);
    r->thread = g_thread_new("ixia-replicate", replication_main, r);
  } else {
    IXIA_INFO("replication: off (replication.sinks is empty)");
  }
  return r;
}

void ixia_replication_destroy(ixia_replication_t *r) {
  if (!r) return;
  g_mutex_lock(&r->lock);
  atomic_store(&r->stopping, 1);
  g_cond_broadcast(&r->wake);
  ixia_thrift_conn_interrupt(&r->conn); /* a call waiting on a slow sink */
  g_mutex_unlock(&r->lock);
  if (r->n_sinks > 0 && r->store) ixia_store_set_commit_cb(r->store, NULL, NULL);
  if (r->thread) g_thread_join(r->thread);
  g_queue_clear_full(&r->tail, g_object_unref);
  if (r->pending) g_array_unref(r->pending);
  disconnect(r);
  g_strfreev(r->sinks);
  g_free(r->checkpoint_path);
  g_free(r->last_error);
  g_free(r->checkpoint_error);
  g_mutex_clear(&r->lock);
  g_cond_clear(&r->wake);
  g_free(r);
}

gint64 ixia_replication_acked(ixia_replication_t *r) {
  g_mutex_lock(&r->lock);
  gint64 v = r->checkpoint;
  g_mutex_unlock(&r->lock);
  return v;
}

void ixia_replication_get_stats(ixia_replication_t *r, ixia_replication_stats_t *out) {
  g_mutex_lock(&r->lock);
  out->enabled = r->n_sinks > 0;
  out->checkpoint = r->checkpoint;
  out->events_published = r->events_published;
  out->calls = r->calls;
  out->failures = r->failures;
  out->gap = r->gap;
  out->gap_missing_from = r->gap_missing_from;
  out->gap_available_from = r->gap_available_from;
  out->last_error = g_strdup(r->last_error);
  out->persisted = r->persisted;
  out->checkpoint_failures = r->checkpoint_failures;
  out->wal_reads = r->wal_reads;
  out->reconnects = r->reconnects;
  out->checkpoint_error = g_strdup(r->checkpoint_error);
  gint64 now = g_get_monotonic_time();
  out->latest = ixia_store_latest_version(r->store);
  /* The oldest edit not acknowledged: its commit time, or (committed before
   * this process started) the start. */
  gint64 since = 0;
  if (out->latest > r->checkpoint && r->n_sinks > 0) {
    since = r->started_us;
    for (guint i = 0; i < r->pending->len; i++) {
      const pending_t *p = &g_array_index(r->pending, pending_t, i);
      if (p->last > r->checkpoint) {
        since = p->at_us;
        break;
      }
    }
  }
  out->pending_age_ms = since ? (now - since) / 1000 : 0;
  out->call_age_ms = r->call_since_us ? (now - r->call_since_us) / 1000 : 0;
  g_mutex_unlock(&r->lock);
}
