/* ixia-bench internals: options, the closed/open-loop drivers shared by the
 * request/response workloads, and result printing.
 *
 * Concurrency model: --conns connections spread over --threads threads
 * (default 2), each of which drives its connections from one epoll set
 * (bench/events.c), as pgbench -c N -j 2 drives PostgreSQL's in
 * bench/run.sh: the load generator shares the machine with what it
 * measures, and a blocked thread per connection spent a third of the
 * machine's CPU on its own context switches (perf of ixia-bench under
 * mixed: 64% of its samples in schedule() after a blocking recv).
 *
 * Closed loop (no --rate): each connection has one request in flight and
 * sends its next as soon as the previous one answered; latency is measured
 * per request. Open loop (--rate R): thread t of T sends on a fixed
 * timeline, one request every T/R seconds (phases staggered across
 * threads), each on an idle connection of its thread (or the first to come
 * free), whatever the answers do; latency is measured from the *scheduled*
 * send time, so a stall delays and counts every request scheduled behind
 * it (no coordinated omission).
 *
 * Every workload prints one JSON line: {"workload": NAME, ...} or
 * {"workload": NAME, "skipped": REASON} when the feature it measures is not
 * available (e.g. the API answers UNAVAILABLE or UNSUPPORTED for query). */
#ifndef IXIA_BENCH_H
#define IXIA_BENCH_H

#include <cjson/cJSON.h>
#include <glib.h>

#include "client.h"
#include "config.h"
#include "error.h"
#include "answer.h"
#include "hdr.h"

#define IXIA_BENCH_NS "bench"
#define IXIA_BENCH_TABLE "products"

typedef struct {
  char *api;       /* host:port of ixia-query-api */
  char *http;      /* http://host:port of its HTTP port (http-get-hot), NULL if unknown */
  char *memcached; /* host:port, for the raw memcached workload */
  char *kafka;     /* bootstrap servers, for cdc-lag and kafka-produce */
  const char *topic; /* the change-event topic (kafka.topic) */
  int threads, conns;
  double seconds;
  double rate;       /* 0 = closed loop */
  gint64 keys;       /* key space of mixed and put */
  gint64 hot_keys;   /* key space of get-hot */
  gint64 docs;       /* documents of load */
  int batch;         /* documents per batch call in load */
  double theta;      /* Zipf exponent of mixed */
  int read_ratio;    /* gets per put in mixed */
  double probe_rate; /* freshness: puts per second whose visibility is tracked */
  double poll_ms;    /* freshness: pause between two polls */
  guint32 seed;
  int idle;          /* siege: idle connections */
  int filter_shape;  /* filter: the shape (ixia_bench_filter_shape) */
  int limit;         /* filter: hits per query */
  /* Set by load for a following index workload in the same invocation. */
  gint64 load_start_us, load_end_us, load_last_version, load_docs, load_bytes;
  double index_timeout_s; /* index: give up waiting for the catch-up */
} ixia_bench_opts_t;

typedef struct ixia_bench_run ixia_bench_run_t;
typedef struct ixia_bench_worker ixia_bench_worker_t;

/* How an event-driven workload's connections speak (events.c connects and
 * cuts answers; frames.c). */
typedef enum {
  IXIA_BENCH_WIRE_THRIFT,    /* the API's framed binary Thrift: request() writes the message */
  IXIA_BENCH_WIRE_HTTP,      /* HTTP/1.1 keep-alive to --http */
  IXIA_BENCH_WIRE_MEMCACHED, /* memcached's text protocol to --memcached */
} ixia_bench_wire_t;

/* Bytes of the first whole answer at the start of in (len bytes so far): 0
 * while more are needed; *bad set (and 0 returned) when the bytes cannot
 * start an answer of that wire (or announce one over 256 MiB). For Thrift
 * the answer includes its 4-byte frame header. */
gsize ixia_bench_answer_len(ixia_bench_wire_t wire, const guint8 *in, gsize len, gboolean *bad);

/* One request in flight on a connection of the event-driven driver: what
 * the workload's request() noted for its answer(). */
typedef struct {
  int op_class;
  gint32 seqid;
  char key[48];
} ixia_bench_call_t;

/* Counters a workload may add to per worker; summed over workers. */
#define IXIA_BENCH_EXTRA 4

struct ixia_bench_worker {
  ixia_bench_run_t *run;
  int id;
  GRand *rnd;
  /* The latency's start of the request being written or answered: when it
   * fell due (open loop) or was sent (closed loop). */
  gint64 sched_us;
  ixia_hdr_t *lat[2];
  guint64 ops[2], errors;
  guint64 extra[IXIA_BENCH_EXTRA];
  ixia_error_t *first_error;
};

typedef struct {
  const char *name;
  /* Names of op classes 0 and 1 (per-class figures); NULL if one class. */
  const char *class_names[2];
  /* Run-wide set-up; *state is handed to every later hook. Sets *skip
   * (g_malloc'd) to skip the workload. */
  gboolean (*prepare)(ixia_bench_run_t *r, gpointer *state, char **skip, ixia_error_t **err);
  /* The calls, driven by events.c over connections of the wire:
   * request() appends the next request's bytes to out (for Thrift the
   * message, which the driver frames) and notes in *call what answer()
   * needs (call->op_class: the request's class); answer() checks the whole
   * answer (for Thrift the frame's body) and adds the workload's counters;
   * FALSE with err for an error answer. */
  ixia_bench_wire_t wire;
  gboolean (*request)(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                      ixia_error_t **err);
  gboolean (*answer)(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *ans,
                     gsize len, ixia_error_t **err);
  /* Adds workload figures to the result; totals holds the summed counters. */
  void (*report)(ixia_bench_run_t *r, const ixia_bench_worker_t *totals, cJSON *out);
  void (*cleanup)(gpointer state);
} ixia_bench_workload_t;

struct ixia_bench_run {
  ixia_bench_opts_t *o;
  const ixia_bench_workload_t *wl;
  gpointer state;
};

/* "host:port" or "http://host:port[/...]" -> a connected, blocking TCP
 * socket (-1 with err naming `what`, the option it came from). */
int ixia_bench_tcp_connect(const char *addr, const char *what, ixia_error_t **err);
/* The event-driven driver (events.c): a connection of the workload's wire
 * (NULL with err), closed by ixia_bench_events_close; the loop of one
 * thread (worker w, one of nthreads) over its n connections from start_us
 * to end_us, closed (rate <= 0) or open at the run's rate, then it waits
 * for the answers in flight, at most 10 s. */
gpointer ixia_bench_events_open(ixia_bench_run_t *r, ixia_error_t **err);
void ixia_bench_events_close(gpointer conn);
void ixia_bench_events_run(ixia_bench_worker_t *w, gpointer const *conns, guint n, gint64 start_us,
                           gint64 end_us, double rate, int nthreads);
/* The put call's message for call->key and doc (its seqid set in call),
 * and the check of its answer, which gives the new version (workloads.c). */
void ixia_bench_put_message(ixia_bench_call_t *call, const char *doc, GByteArray *out);
gboolean ixia_bench_put_answer(const ixia_bench_call_t *call, const guint8 *a, gsize len,
                               gint64 *version, ixia_error_t **err);
/* Threads of an event-driven run when --threads is not given. */
#define IXIA_BENCH_EVENT_THREADS 2

/* Runs the workload: prepare, the threads, the report. Prints its line;
 * returns FALSE when it failed (errors, or set-up failed). */
gboolean ixia_bench_run(ixia_bench_opts_t *o, const ixia_bench_workload_t *wl);

/* Result lines. */
cJSON *ixia_bench_result_new(const char *workload);
/* Adds PREFIXp50_ms, p99_ms, p999_ms, max_ms, mean_ms (prefix may be ""). */
void ixia_bench_add_latency(cJSON *out, const char *prefix, const ixia_hdr_t *h);
/* Prints out on one line and frees it. */
void ixia_bench_print(cJSON *out);
void ixia_bench_print_skip(const char *workload, const char *reason);

/* The bench table schema: the product fields plus "key" as a keyword, so a
 * document can be found by a term query on its key (freshness). */
extern const char *const IXIA_BENCH_SCHEMA;
gboolean ixia_bench_apply_schema(const ixia_bench_opts_t *o, ixia_error_t **err);

/* Numbers and strings from the API's stats. The string is g_malloc'd. */
gboolean ixia_bench_stat(ixia_client_t *c, const char *field, double *value, ixia_error_t **err);
char *ixia_bench_stat_str(ixia_client_t *c, const char *field, ixia_error_t **err);

/* Runs a query; *resp is the parsed response (cJSON_Delete it). */
gboolean ixia_bench_query(ixia_client_t *c, const char *request, cJSON **resp, ixia_error_t **err);
/* Number of documents of the bench table matched by filter_json (NULL: all),
 * or -1 with err set. Used to check that query works before timing it. */
gint64 ixia_bench_count(ixia_client_t *c, const char *filter_json, ixia_error_t **err);
/* TRUE when err means the feature is missing (UNAVAILABLE/UNSUPPORTED). */
gboolean ixia_bench_is_missing_feature(const ixia_error_t *err);

/* Puts documents first..first+n-1 (ixia_bench_doc) with batch calls of
 * o->batch over o->conns connections. Returns FALSE on the first failure.
 * *last_version gets the highest version written, *bytes the documents'
 * JSON bytes, lat records each batch call's latency (each may be NULL). */
gboolean ixia_bench_put_docs(const ixia_bench_opts_t *o, gint64 first, gint64 n,
                             gint64 *last_version, gint64 *bytes, ixia_hdr_t *lat,
                             ixia_error_t **err);
/* Makes sure documents 0..n-1 exist (checks the last one, loads all if it
 * is missing). */
gboolean ixia_bench_ensure_docs(const ixia_bench_opts_t *o, gint64 n, ixia_error_t **err);

/* The workloads. */
extern const ixia_bench_workload_t ixia_bench_get_hot, ixia_bench_http_get_hot, ixia_bench_get_random, ixia_bench_mixed, ixia_bench_put,
    ixia_bench_memcached, ixia_bench_filter, ixia_bench_agg, ixia_bench_freshness;
/* Index of a filter shape by name, or -1; the shapes for --help. */
int ixia_bench_filter_shape(const char *name);
const char *ixia_bench_filter_shapes_help(void);

/* siege: a fresh connection + get, and the `ixia get` command, on a quiet
 * API and then with `idle` idle connections and a slowloris client open
 * (bench/siege.c). */
gboolean ixia_bench_siege(const ixia_bench_opts_t *o, int idle);

/* Workloads with their own drivers; return FALSE on failure. */
gboolean ixia_bench_load(ixia_bench_opts_t *o);
gboolean ixia_bench_index(ixia_bench_opts_t *o);
gboolean ixia_bench_kafka_produce(ixia_bench_opts_t *o);

#endif
