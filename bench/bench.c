/* ixia-bench: drives the Thrift API from concurrent connections and prints
 * one JSON line per workload (throughput, latency p50/p99/p99.9 from an
 * HDR-style histogram, workload figures). See bench.h for the concurrency
 * model and open-loop timing, and `ixia-bench --help` for the workloads. */
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "bench.h"
#include "data.h"
#include "lag.h"

static const char *const SUMMARY =
    "Workloads (run in the order given):\n"
    "  load           bulk put of --docs generated products (batch calls of --batch)\n"
    "  index          after load: time until a min_version query for the load's last\n"
    "                 version answers (documents indexed per second), index size\n"
    "  get-hot        gets of --hot-keys keys (served from memory)\n"
    "  http-get-hot   the same gets over HTTP/JSON (--http), keep-alive connections\n"
    "  get-random     gets of uniformly random keys over --keys\n"
    "  mixed          gets and puts at --read-ratio:1 over Zipf(--theta) keys of --keys;\n"
    "                 reports the cache hit ratio\n"
    "  put            durable puts, one document per call, over --keys keys\n"
    "  filter:SHAPE   one filter shape, --limit hits of 2 fields (filter = filter:cat-price);\n"
    "                 the result line is named filter:SHAPE:LIMIT. Shapes:\n"
    "%s"
    "  agg            terms by category (count, sum, avg, min, max of price) over ~30%%\n"
    "  freshness      put new documents (use --rate), poll a query until each is visible:\n"
    "                 put-to-searchable p50/p99\n"
    "  memcached      raw libmemcached gets (the limit beside get-hot)\n"
    "  kafka-produce  raw librdkafka produce, acks=all (the limit beside replication)\n"
    "  cdc-lag        puts at --rate; put-to-Kafka lag (needs --kafka)\n"
    "  siege          connect + get and `ixia get` on a quiet API, then with --idle\n"
    "                 idle connections and a slowloris client open\n"
    "  gen            print --docs generated documents as JSON lines\n"
    "\n"
    "The request workloads (gets, puts, mixed, memcached, filter, agg, freshness,\n"
    "cdc-lag) drive --conns connections from --threads event-driven threads (default\n"
    "2, as pgbench -j 2 beside them in bench/run.sh). A closed loop keeps one request\n"
    "in flight on each connection; with --rate the threads send on a fixed timeline,\n"
    "each request on whichever of their connections is idle (or the first to come\n"
    "free), and latency counts from the scheduled time.\n"
    "Request workloads also report the machine over the run: box_busy_pct (CPU\n"
    "time not idle), cpu_pressure_pct (share of time some runnable task waited for\n"
    "a CPU) and client_wait_us_per_op (this program's request threads waiting for\n"
    "a CPU, per request); a figure the kernel does not offer is left out.";

static gboolean gen_docs(const ixia_bench_opts_t *o) {
  for (gint64 i = 0; i < o->docs; i++) {
    char *doc = ixia_bench_doc((guint64)i, o->seed, 0, NULL);
    gboolean ok = puts(doc) >= 0;
    g_free(doc);
    if (!ok) return FALSE;
  }
  return fflush(stdout) == 0;
}

static const ixia_bench_workload_t *const DRIVEN[] = {
    &ixia_bench_get_hot, &ixia_bench_http_get_hot, &ixia_bench_get_random, &ixia_bench_mixed, &ixia_bench_put,
    &ixia_bench_memcached,
    &ixia_bench_agg,     &ixia_bench_freshness,
};

static int run_filter(ixia_bench_opts_t *o, const char *shape) {
  o->filter_shape = ixia_bench_filter_shape(shape);
  if (o->filter_shape < 0) {
    fprintf(stderr, "ixia-bench: unknown filter shape '%s' (see --help)\n", shape);
    return 2;
  }
  ixia_bench_workload_t wl = ixia_bench_filter;
  char *name = g_strdup_printf("filter:%s:%d", shape, o->limit);
  wl.name = name;
  int rc = ixia_bench_run(o, &wl) ? 0 : 1;
  g_free(name);
  return rc;
}

/* Returns 0 on success, 1 when the workload failed, 2 when unknown. */
static int run_one(ixia_bench_opts_t *o, const char *wl) {
  for (guint i = 0; i < G_N_ELEMENTS(DRIVEN); i++)
    if (!strcmp(wl, DRIVEN[i]->name)) return ixia_bench_run(o, DRIVEN[i]) ? 0 : 1;
  if (!strcmp(wl, "filter")) return run_filter(o, "cat-price");
  if (g_str_has_prefix(wl, "filter:")) return run_filter(o, wl + strlen("filter:"));
  if (!strcmp(wl, "load")) return ixia_bench_load(o) ? 0 : 1;
  if (!strcmp(wl, "index")) return ixia_bench_index(o) ? 0 : 1;
  if (!strcmp(wl, "kafka-produce")) return ixia_bench_kafka_produce(o) ? 0 : 1;
  if (!strcmp(wl, "gen")) return gen_docs(o) ? 0 : 1;
  if (!strcmp(wl, "siege")) return ixia_bench_siege(o, o->idle) ? 0 : 1;
  if (!strcmp(wl, "cdc-lag")) {
    if (!o->kafka) {
      ixia_bench_print_skip("cdc-lag", "no --kafka or IXIA_KAFKA");
      return 0;
    }
    ixia_error_t *e = NULL;
    if (!ixia_bench_apply_schema(o, &e)) {
      fprintf(stderr, "ixia-bench: cdc-lag: %s\n", e->message);
      ixia_error_destroy(e);
      return 1;
    }
    char *doc = ixia_bench_doc(1, o->seed, 0, NULL);
    int rc = ixia_bench_cdc_lag(o, o->rate > 0 ? o->rate : 1000, doc);
    g_free(doc);
    return rc ? 1 : 0;
  }
  fprintf(stderr, "ixia-bench: unknown workload '%s' (see --help)\n", wl);
  return 2;
}

int main(int argc, char **argv) {
  char *api_opt = NULL, *mc = NULL, *kafka = NULL, *http = NULL;
  int threads = 0, conns = 16, batch = 100, read_ratio = 15, seed = 42, idle = 10000, limit = 100;
  gint64 keys = 100000, hot_keys = 1000, docs = 100000;
  double seconds = 10, rate = 0, theta = 0.99, probe_rate = 100, poll_ms = 1, index_timeout = 1800;
  GOptionEntry entries[] = {
      {"api", 0, 0, G_OPTION_ARG_STRING, &api_opt, "ixia API address (default $IXIA_API)", "HOST:PORT"},
      {"memcached", 0, 0, G_OPTION_ARG_STRING, &mc, "memcached (default $IXIA_MEMCACHED)", "HOST:PORT"},
      {"http", 0, 0, G_OPTION_ARG_STRING, &http, "the API's HTTP port (default $IXIA_HTTP)", "http://HOST:PORT"},
      {"kafka", 0, 0, G_OPTION_ARG_STRING, &kafka, "Kafka bootstrap (default $IXIA_KAFKA)", "HOSTS"},
      {"threads", 0, 0, G_OPTION_ARG_INT, &threads,
       "client threads (default: 2 for event-driven workloads, else --conns)", "N"},
      {"conns", 0, 0, G_OPTION_ARG_INT, &conns, "connections, spread over the threads (16)", "N"},
      {"duration", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "seconds per timed workload (10)", "S"},
      {"rate", 0, 0, G_OPTION_ARG_DOUBLE, &rate, "requests per second, open loop (0: closed loop)", "R"},
      {"keys", 0, 0, G_OPTION_ARG_INT64, &keys, "key space of mixed and put (100000)", "N"},
      {"hot-keys", 0, 0, G_OPTION_ARG_INT64, &hot_keys, "key space of get-hot and memcached (1000)", "N"},
      {"docs", 0, 0, G_OPTION_ARG_INT64, &docs, "documents of load and gen (100000)", "N"},
      {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "documents per batch call in load (100)", "N"},
      {"theta", 0, 0, G_OPTION_ARG_DOUBLE, &theta, "Zipf exponent of mixed (0.99)", "T"},
      {"read-ratio", 0, 0, G_OPTION_ARG_INT, &read_ratio, "gets per put in mixed (15)", "N"},
      {"probe-rate", 0, 0, G_OPTION_ARG_DOUBLE, &probe_rate,
       "freshness: tracked puts per second (100)", "R"},
      {"poll-ms", 0, 0, G_OPTION_ARG_DOUBLE, &poll_ms, "freshness: pause between polls (1)", "MS"},
      {"index-timeout", 0, 0, G_OPTION_ARG_DOUBLE, &index_timeout,
       "index: seconds to wait for the catch-up (1800)", "S"},
      {"seed", 0, 0, G_OPTION_ARG_INT, &seed, "seed of the generated documents (42)", "N"},
      {"idle", 0, 0, G_OPTION_ARG_INT, &idle, "siege: idle connections to hold open (10000)", "N"},
      {"limit", 0, 0, G_OPTION_ARG_INT, &limit, "filter: hits per query (100)", "N"},
      {NULL, 0, 0, 0, NULL, NULL, NULL},
  };
  ixia_error_t *err = NULL;
  char *summary = g_strdup_printf(SUMMARY, ixia_bench_filter_shapes_help());
  ixia_config_t *cfg = ixia_config_from_args(&argc, &argv, "WORKLOAD...", summary, entries, &err);
  g_free(summary);
  if (!cfg || argc < 2) {
    fprintf(stderr, "ixia-bench: %s\n", cfg ? "name at least one workload (see --help)" : err->message);
    ixia_error_destroy(err);
    ixia_config_destroy(cfg);
    return 2;
  }
  if (conns < 1 || batch < 1 || keys < 1 || hot_keys < 1 || keys > G_MAXINT32 ||
      hot_keys > G_MAXINT32 || docs < 0 || seconds <= 0 || rate < 0 || read_ratio < 0 || poll_ms < 0 ||
      limit < 0) {
    fprintf(stderr, "ixia-bench: --conns, --batch, --keys, --hot-keys must be >= 1, --duration > 0\n");
    ixia_config_destroy(cfg);
    return 2;
  }
  ixia_auth_client_key_from_env(cfg);
  ixia_bench_opts_t o = {
      .api = ixia_client_address(api_opt, cfg),
      .memcached = mc ? g_strdup(mc) : g_strdup(g_getenv("IXIA_MEMCACHED")),
      .http = http ? g_strdup(http) : g_strdup(g_getenv("IXIA_HTTP")),
      .kafka = kafka ? g_strdup(kafka) : g_strdup(g_getenv("IXIA_KAFKA")),
      .topic = ixia_config_str(cfg, "kafka.topic"),
      .threads = threads, /* 0: the driver's default */
      .conns = conns,
      .seconds = seconds,
      .rate = rate,
      .keys = keys,
      .hot_keys = hot_keys,
      .docs = docs,
      .batch = batch,
      .theta = theta,
      .read_ratio = read_ratio,
      .probe_rate = probe_rate,
      .poll_ms = poll_ms,
      .index_timeout_s = index_timeout,
      .seed = (guint32)seed,
      .idle = idle,
      .limit = limit,
  };
  int rc = 0;
  for (int a = 1; a < argc; a++) {
    int one = run_one(&o, argv[a]); /* not inside MAX: it evaluates twice */
    rc = MAX(rc, one);
  }
  g_free(o.api);
  g_free(o.memcached);
  g_free(o.http);
  g_free(o.kafka);
  g_free(http);
  g_free(api_opt);
  g_free(mc);
  g_free(kafka);
  ixia_config_destroy(cfg);
  return rc;
}
