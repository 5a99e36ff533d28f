/* ixia-bench: drives the Thrift API from concurrent connections and reports
 * throughput and latency percentiles as one JSON line per workload.
 *
 * Workloads (this build):
 *   get-hot   cached gets of a few hot keys through ixia-query-api
 *   memcached raw libmemcached gets of the same value size, the physical
 *             limit to compare get-hot with (same machine, same run)
 *   put       durable puts of product-like documents
 *   cdc-lag   puts at --rate per second; put-to-Kafka lag p50/p99 (lag.c)
 * Latencies are exact (every sample kept and sorted), which is fine for the
 * run lengths used here. */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "config.h"
#include "lag.h"

typedef struct {
  const char *workload;
  const char *api;
  const char *memcached;
  int conns;
  double seconds;
  int keys;
  int thread_id;
  GArray *lat_us; /* gint32 samples */
  guint64 ops;
  guint64 errors;
} worker_t;

static const char *SCHEMA =
    "{\"namespace\":\"bench\",\"table\":\"products\",\"cache_ttl_seconds\":3600,"
    "\"indexes\":[{\"field\":\"category\",\"type\":\"keyword\"},{\"field\":\"price\",\"type\":\"double\"}]}";

static char *product_doc(int i) {
  return g_strdup_printf(
      "{\"key\":\"p%08d\",\"title\":\"red large smart mini\",\"category\":\"cat%02d\","
      "\"brand\":\"brand%04d\",\"country\":\"US\",\"price\":%d.%02d,\"stock\":%d,\"rating\":3.4,"
      "\"tags\":[\"t%03d\",\"t%03d\"],\"updated_at\":1770369490,\"description\":\"heavy small ultra "
      "red basic heavy basic pro small mini large red light pro modern large hard heavy modern soft "
      "green smart soft eco eco large blue mini basic soft smart green basic classic eco heavy green "
      "blue small classic green small soft smart large mini eco light eco eco heavy large green light "
      "basic small light mini smart large basic small modern blue small blue modern smart large green "
      "heavy small ultra red basic heavy basic pro small mini large red light pro modern large hard "
      "heavy modern soft green smart soft eco eco large blue mini basic soft smart green basic classic "
      "eco heavy green blue small classic green small soft smart large mini eco light eco eco heavy "
      "large green light basic small light mini smart large basic small modern blue small blue modern\"}",
      i, i % 50, i % 2000, 5 + i % 200, i % 100, i % 100, i % 300, (i * 7) % 300);
}

static gint64 now_us(void) { return g_get_monotonic_time(); }

static void record(worker_t *w, gint64 t0, gboolean ok) {
  gint32 us = (gint32)MIN(now_us() - t0, G_MAXINT32);
  g_array_append_val(w->lat_us, us);
  if (ok)
    w->ops++;
  else
    w->errors++;
}

static gpointer run_worker(gpointer data) {
  worker_t *w = data;
  gint64 end = now_us() + (gint64)(w->seconds * 1e6);
  GRand *rnd = g_rand_new_with_seed((guint32)w->thread_id * 7919u + 1);
  if (strcmp(w->workload, "memcached") == 0) {
    char cfgstr[256];
    snprintf(cfgstr, sizeof cfgstr, "--SERVER=%s", w->memcached);
    memcached_st *m = memcached(cfgstr, strlen(cfgstr));
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    while (now_us() < end) {
      char key[32];
      snprintf(key, sizeof key, "raw:%d", g_rand_int_range(rnd, 0, w->keys));
      gint64 t0 = now_us();
      size_t len;
      uint32_t flags;
      memcached_return_t rc;
      char *v = memcached_get(m, key, strlen(key), &len, &flags, &rc);
      record(w, t0, v != NULL);
      free(v);
    }
    memcached_free(m);
  } else {
    ixia_client_t *c = ixia_client_new(w->api, NULL);
    while (c && now_us() < end) {
      int k = g_rand_int_range(rnd, 0, w->keys);
      char key[32];
      snprintf(key, sizeof key, "p%08d", k);
      gint64 t0 = now_us();
      gboolean ok;
      if (strcmp(w->workload, "put") == 0) {
        char *doc = product_doc(k);
        ok = ixia_client_put(c, "bench", "products", key, doc, -1, NULL, NULL);
        g_free(doc);
      } else {
        gboolean found = FALSE;
        char *json = NULL;
        ok = ixia_client_get(c, "bench", "products", key, NULL, &found, NULL, &json, NULL) && found;
        g_free(json);
      }
      record(w, t0, ok);
    }
    ixia_client_destroy(c);
  }
  g_rand_free(rnd);
  return NULL;
}

static int cmp_i32(gconstpointer a, gconstpointer b) {
  gint32 x = *(const gint32 *)a, y = *(const gint32 *)b;
  return (x > y) - (x < y);
}

static double pct(GArray *a, double p) {
  if (a->len == 0) return 0;
  guint i = (guint)(p / 100.0 * (a->len - 1) + 0.5);
  return g_array_index(a, gint32, i) / 1000.0;
}

static gboolean prepare(const char *workload, const char *api, const char *mc, int keys) {
  if (strcmp(workload, "memcached") == 0) {
    char cfgstr[256];
    snprintf(cfgstr, sizeof cfgstr, "--SERVER=%s", mc);
    memcached_st *m = memcached(cfgstr, strlen(cfgstr));
    char *doc = product_doc(0);
    for (int i = 0; i < keys; i++) {
      char key[32];
      snprintf(key, sizeof key, "raw:%d", i);
      memcached_set(m, key, strlen(key), doc, strlen(doc), 0, 0);
    }
    g_free(doc);
    memcached_free(m);
    return TRUE;
  }
  ixia_error_t *e = NULL;
  ixia_client_t *c = ixia_client_new(api, &e);
  gboolean ok = c && ixia_client_apply_schema(c, SCHEMA, NULL, &e);
  if (ok && strcmp(workload, "get-hot") == 0) {
    for (int i = 0; ok && i < keys; i++) {
      char key[32];
      snprintf(key, sizeof key, "p%08d", i);
      char *doc = product_doc(i);
      ok = ixia_client_put(c, "bench", "products", key, doc, -1, NULL, &e);
      g_free(doc);
      /* The first get misses and backfills; later gets are hits. */
      gboolean found;
      ok = ok && ixia_client_get(c, "bench", "products", key, NULL, &found, NULL, NULL, &e);
    }
    g_usleep(200000);
  }
  if (e) fprintf(stderr, "ixia-bench: %s\n", e->message);
  ixia_error_destroy(e);
  ixia_client_destroy(c);
  return ok;
}

int main(int argc, char **argv) {
  char *api_opt = NULL, *mc = NULL;
  int conns = 16, keys = 1000;
  double seconds = 10, rate = 1000;
  char *kafka = NULL;
  GOptionEntry entries[] = {
      {"api", 0, 0, G_OPTION_ARG_STRING, &api_opt, "ixia API address (default $IXIA_API)", "HOST:PORT"},
      {"memcached", 0, 0, G_OPTION_ARG_STRING, &mc, "memcached for the raw workload (default $IXIA_MEMCACHED)", "HOST:PORT"},
      {"conns", 0, 0, G_OPTION_ARG_INT, &conns, "concurrent connections, one thread each (16)", "N"},
      {"duration", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "seconds per workload (10)", "S"},
      {"keys", 0, 0, G_OPTION_ARG_INT, &keys, "distinct keys (1000)", "N"},
      {"rate", 0, 0, G_OPTION_ARG_DOUBLE, &rate, "cdc-lag: puts per second, open loop (1000)", "R"},
      {"kafka", 0, 0, G_OPTION_ARG_STRING, &kafka, "cdc-lag: Kafka bootstrap (default $IXIA_KAFKA)", "HOSTS"},
      {NULL, 0, 0, 0, NULL, NULL, NULL},
  };
  ixia_error_t *err = NULL;
  ixia_config_t *cfg = ixia_config_from_args(&argc, &argv, "WORKLOAD...",
                                             "Workloads: get-hot, memcached, put, cdc-lag", entries, &err);
  if (!cfg || argc < 2) {
    fprintf(stderr, "ixia-bench: %s\n", cfg ? "name at least one workload: get-hot, memcached, put, cdc-lag" : err->message);
    return 2;
  }
  char *api = ixia_client_address(api_opt, cfg);
  if (!mc && g_getenv("IXIA_MEMCACHED")) mc = g_strdup(g_getenv("IXIA_MEMCACHED"));
  int rc = 0;
  for (int a = 1; a < argc; a++) {
    const char *wl = argv[a];
    if (!strcmp(wl, "cdc-lag")) {
      const char *k = kafka ? kafka : g_getenv("IXIA_KAFKA");
      if (!k) {
        printf("{\"workload\":\"cdc-lag\",\"skipped\":\"no --kafka or IXIA_KAFKA\"}\n");
        continue;
      }
      if (!prepare("put", api, mc, keys)) {
        rc = 1;
        continue;
      }
      char *doc = product_doc(1);
      if (ixia_bench_cdc_lag(api, k, ixia_config_str(cfg, "kafka.topic"), rate, seconds, conns, doc)) rc = 1;
      g_free(doc);
      continue;
    }
    if (strcmp(wl, "get-hot") && strcmp(wl, "memcached") && strcmp(wl, "put")) {
      fprintf(stderr, "ixia-bench: unknown workload '%s'\n", wl);
      rc = 2;
      continue;
    }
    if (!strcmp(wl, "memcached") && !mc) {
      printf("{\"workload\":\"memcached\",\"skipped\":\"no --memcached or IXIA_MEMCACHED\"}\n");
      continue;
    }
    if (!prepare(wl, api, mc, keys)) {
      rc = 1;
      continue;
    }
    worker_t *w = g_new0(worker_t, conns);
    GThread **th = g_new0(GThread *, conns);
    for (int i = 0; i < conns; i++) {
      w[i] = (worker_t){.workload = wl, .api = api, .memcached = mc, .conns = conns,
                        .seconds = seconds, .keys = keys, .thread_id = i,
                        .lat_us = g_array_new(FALSE, FALSE, sizeof(gint32))};
      th[i] = g_thread_new("bench", run_worker, &w[i]);
    }
    GArray *all = g_array_new(FALSE, FALSE, sizeof(gint32));
    guint64 ops = 0, errors = 0;
    for (int i = 0; i < conns; i++) {
      g_thread_join(th[i]);
      g_array_append_vals(all, w[i].lat_us->data, w[i].lat_us->len);
      ops += w[i].ops;
      errors += w[i].errors;
      g_array_free(w[i].lat_us, TRUE);
    }
    g_array_sort(all, cmp_i32);
    printf("{\"workload\":\"%s\",\"conns\":%d,\"seconds\":%.1f,\"ops\":%" G_GUINT64_FORMAT
           ",\"errors\":%" G_GUINT64_FORMAT ",\"ops_per_s\":%.0f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
           "\"p999_ms\":%.3f}\n",
           wl, conns, seconds, ops, errors, ops / seconds, pct(all, 50), pct(all, 99), pct(all, 99.9));
    fflush(stdout);
    if (errors) rc = 1;
    g_array_free(all, TRUE);
    g_free(w);
    g_free(th);
  }
  g_free(api);
  g_free(api_opt);
  g_free(mc);
  g_free(kafka);
  ixia_config_destroy(cfg);
  return rc;
}
