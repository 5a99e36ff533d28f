/* The query path of ixia-query-api: fan-out to every index shard, merge,
 * verification against the truth store, pagination.
 *
 * A query is parsed here first (bad queries never reach a shard), then sent
 * to every shard of query.indexers in parallel. Totals add up; aggregation
 * partials merge (see query/query.h for what is exact). Unsorted hits are
 * taken shard by shard in each shard's internal-id order, so the cursor is
 * one position per shard and pages never repeat or skip a document that
 * stays matched while paging. Sorted hits: each shard sends its best page
 * after the cursor (search_after), the pages are merged by sort values then
 * key, and the cursor is the last hit's values, key and each shard's
 * positions (as_of), which keep documents in place while they change. Every
 * hit is re-read from the truth store, and re-checked against the filter
 * unless its shard vouches for it at that version; missing or no longer
 * matching documents are dropped (counted in stats as stale_hits_dropped),
 * so a page can hold fewer than `limit` hits while `next` is still set. A
 * shard's answer is waited for until the query's deadline plus a grace;
 * a worker's blocking call is cut then (watchdog.h), however the shard
 * paces its bytes.
 *
 * min_version: first waits until replication has acknowledged that version
 * (so Kafka holds every edit up to it), then asks each shard to catch up to
 * its partitions' high watermarks before evaluating.
 *
 * Thread safety: all calls may run concurrently. */
#ifndef IXIA_QUERY_SEARCH_H
#define IXIA_QUERY_SEARCH_H

#include "config.h"
#include "error.h"
#include "query.h"
#include "store.h"

typedef struct ixia_search ixia_fanout_t;

/* Version acknowledged by replication (every edit up to it is in Kafka). */
typedef gint64 (*ixia_fanout_acked_fn)(void *ud);

/* Reads query.* options. With no query.indexers, queries answer
 * UNAVAILABLE. store is borrowed and must outlive the search. */
ixia_fanout_t *ixia_fanout_new(const ixia_config_t *cfg, ixia_store_t *store,
                               ixia_fanout_acked_fn acked, void *acked_ud, ixia_error_t **err);
void ixia_fanout_destroy(ixia_fanout_t *s);

/* Runs a request; returns the response JSON (g_malloc'd) described in
 * docs/QUERY.md. lookup resolves table schemas. */
char *ixia_fanout_run(ixia_fanout_t *s, const char *request_json, size_t len,
                      ixia_schema_lookup_fn lookup, void *lookup_ud, ixia_error_t **err);

/* The same query answered without a thread of its own, for a call on an
 * I/O thread of the API's Thrift server (server.h: watches). prepare
 * parses the request; NULL when no shard is configured (ixia_fanout_run
 * says so). When ixia_fanout_op_on_worker(op), the query is not for this
 * path (it waits for replication, has a top_hits aggregation, is large, or a
 * shard has no idle pooled connection): hand op to a worker, which runs it with
 * ixia_fanout_op_run (the request is not parsed again), or free it with
 * ixia_fanout_op_free. Otherwise launch sends the shard calls and returns;
 * done(ud, json, err) then runs exactly once with the response (g_malloc'd)
 * or an error, both the callee's to free: later on this I/O thread, on a
 * worker when a pooled connection turned out dead and the query ran again
 * there or when a worker finished it (a page not in memory, a long
 * aggregation merge), or before launch returns for a request that does not
 * parse. Call
 * prepare and launch on the I/O thread. */
typedef struct ixia_fanout_op ixia_fanout_op_t;
typedef void (*ixia_fanout_done_fn)(gpointer ud, char *json, ixia_error_t *err);
ixia_fanout_op_t *ixia_fanout_prepare(ixia_fanout_t *s, const char *request_json, size_t len,
                                      ixia_schema_lookup_fn lookup, void *lookup_ud);
void ixia_fanout_launch(ixia_fanout_op_t *op, ixia_fanout_done_fn done, gpointer ud);
gboolean ixia_fanout_op_on_worker(const ixia_fanout_op_t *op);
/* Runs a prepared query on the calling thread (a worker) and frees op:
 * the response as ixia_fanout_run's. */
char *ixia_fanout_op_run(ixia_fanout_op_t *op, ixia_error_t **err);
/* NULL is ignored. */
void ixia_fanout_op_free(ixia_fanout_op_t *op);

typedef struct {
  guint shards;
  _Atomic guint64 queries, query_errors, shard_calls, shard_errors;
  _Atomic guint64 hits_returned, stale_hits_dropped;
  _Atomic guint64 hits_rechecked; /* hits matched again on the stored document: their shard did not
                                    vouch for them, or the store holds a newer version */
  _Atomic guint64 pages_on_worker; /* queries whose page an I/O thread left to a worker */
  _Atomic guint64 merges_on_worker; /* queries whose aggregation merge an I/O thread left to a worker */
  _Atomic guint64 lane_calls; /* shard calls pipelined on an I/O thread's lanes to the shards */
  _Atomic guint64 lane_sends; /* the sends that carried them (several calls of one pass each) */
} ixia_fanout_stats_t;

void ixia_fanout_get_stats(ixia_fanout_t *s, ixia_fanout_stats_t *out);

/* The shard addresses, comma-separated (g_malloc'd): tools find the shards
 * of a running stack through the API's stats. */
char *ixia_fanout_shard_list(const ixia_fanout_t *s);

/* The "after" cursor: one position per shard (an internal id, -1 = start,
 * -2 = done), as "c1:" + base64 of 8-byte big-endian values. Decode fills
 * pos[n_shards]; an absent cursor (NULL) is the start; anything else that
 * is not a cursor for n_shards shards is IXIA_EINVAL. Encode returns a new
 * string. Pure functions (the fuzz target drives them). */
gboolean ixia_fanout_cursor_decode(guint n_shards, const char *after, gint64 *pos,
                                   ixia_error_t **err);
char *ixia_fanout_cursor_encode(guint n_shards, const gint64 *pos);

/* The cursor of a sorted query (search_after): the last hit's sort values
 * and key, and per shard the positions it sorted by (idx_history.c on the
 * shards). "s1:" + base64 of: u32 sort signature, u16 shards, per shard u64
 * epoch and u64 sequence, u8 values, per value u8 present, u32 length and
 * the encoded value, u32 key length and the key. Decode checks the shard
 * count, the number of values and the signature of the query's sort
 * (IXIA_EINVAL otherwise). Pure functions (the fuzz target drives them). */
typedef struct {
  guint32 sig;
  guint n_shards;
  guint64 *epoch, *seq; /* n_shards each */
  guint n_values;
  GBytes **values;      /* n_values, NULL = missing */
  char *key;
  gsize key_len;
} ixia_sort_cursor_t;

gboolean ixia_fanout_sort_cursor_decode(const char *after, guint n_shards, guint n_values,
                                        guint32 sig, ixia_sort_cursor_t *out, ixia_error_t **err);
char *ixia_fanout_sort_cursor_encode(const ixia_sort_cursor_t *c);
void ixia_sort_cursor_clear(ixia_sort_cursor_t *c);

#endif
