/* load: a bulk put of --docs generated products with batch calls.
 * index: how fast the index catches up with that load (issue 4): the time
 * from the load's start until a min_version query for the load's last
 * version answers, i.e. until every shard has applied every document. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "data.h"

gboolean ixia_bench_load(ixia_bench_opts_t *o) {
  ixia_error_t *err = NULL;
  if (!ixia_bench_apply_schema(o, &err)) {
    fprintf(stderr, "ixia-bench: load: %s\n", err->message);
    ixia_error_destroy(err);
    return FALSE;
  }
  ixia_hdr_t *lat = ixia_hdr_new();
  gint64 last = 0, bytes = 0;
  gint64 t0 = g_get_monotonic_time();
  gboolean ok = ixia_bench_put_docs(o, 0, o->docs, &last, &bytes, lat, &err);
  gint64 t1 = g_get_monotonic_time();
  double secs = (double)(t1 - t0) / 1e6;
  cJSON *out = ixia_bench_result_new("load");
  cJSON_AddNumberToObject(out, "docs", (double)o->docs);
  cJSON_AddNumberToObject(out, "bytes", (double)bytes);
  cJSON_AddNumberToObject(out, "batch", o->batch);
  cJSON_AddNumberToObject(out, "conns", o->conns);
  cJSON_AddNumberToObject(out, "seconds", (double)(gint64)(secs * 100) / 100);
  cJSON_AddNumberToObject(out, "docs_per_s", (double)(gint64)((double)o->docs / secs + 0.5));
  cJSON_AddNumberToObject(out, "last_version", (double)last);
  ixia_bench_add_latency(out, "batch_", lat);
  if (err) cJSON_AddStringToObject(out, "error", err->message);
  ixia_bench_print(out);
  ixia_hdr_destroy(lat);
  ixia_error_destroy(err);
  if (ok) {
    o->load_start_us = t0;
    o->load_end_us = t1;
    o->load_last_version = last;
    o->load_docs = o->docs;
    o->load_bytes = bytes;
  }
  return ok;
}

/* Sums numeric fields of every shard's status (shards from the API's
 * stats). Returns FALSE when a shard did not answer. */
static gboolean shard_totals(ixia_client_t *api, const char *const *fields, double *sums,
                             ixia_error_t **err) {
  char *list = ixia_bench_stat_str(api, "query_indexers", err);
  if (!list) return FALSE;
  char **shards = g_strsplit(list, ",", -1);
  gboolean ok = TRUE;
  for (guint i = 0; ok && shards[i]; i++) {
    if (!*shards[i]) continue;
    ixia_shard_client_t *c = ixia_shard_client_new(shards[i], 10000, err);
    char *json = NULL;
    ok = c && ixia_shard_client_status(c, &json, err);
    cJSON *st = ok ? cJSON_Parse(json) : NULL;
    for (guint f = 0; st && fields[f]; f++)
      sums[f] += cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(st, fields[f]));
    cJSON_Delete(st);
    g_free(json);
    ixia_shard_client_destroy(c);
  }
  g_strfreev(shards);
  g_free(list);
  return ok;
}

gboolean ixia_bench_index(ixia_bench_opts_t *o) {
  ixia_error_t *err = NULL;
  ixia_client_t *c = ixia_client_new(o->api, &err);
  if (!c) {
    fprintf(stderr, "ixia-bench: index: %s\n", err->message);
    ixia_error_destroy(err);
    return FALSE;
  }
  gboolean ok = TRUE;
  if (ixia_bench_count(c, NULL, &err) < 0) {
    if (ixia_bench_is_missing_feature(err)) {
      char *why = g_strdup_printf("query: %s: %s", ixia_code_name(err->code), err->message);
      ixia_bench_print_skip("index", why);
      g_free(why);
    } else {
      fprintf(stderr, "ixia-bench: index: %s\n", err->message);
      ok = FALSE;
    }
    ixia_error_destroy(err);
    ixia_client_destroy(c);
    return ok;
  }
  /* Without a load in this invocation: the backlog pending now. */
  gint64 start = o->load_start_us, version = o->load_last_version;
  if (!version) {
    double v = 0;
    ok = ixia_bench_stat(c, "store_latest_version", &v, &err);
    version = (gint64)v;
    start = g_get_monotonic_time();
  }
  char *req = g_strdup_printf("{\"namespace\":\"" IXIA_BENCH_NS "\",\"table\":\"" IXIA_BENCH_TABLE
                              "\",\"limit\":0,\"min_version\":%" G_GINT64_FORMAT "}",
                              version);
  gint64 give_up = g_get_monotonic_time() + (gint64)(o->index_timeout_s * 1e6);
  gint64 total = -1;
  guint waits = 0;
  while (ok) {
    cJSON *resp = NULL;
    ixia_error_t *e = NULL;
    gint64 asked = g_get_monotonic_time();
    if (ixia_bench_query(c, req, &resp, &e)) {
      total = (gint64)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(resp, "total"));
      cJSON_Delete(resp);
      break;
    }
    /* A bounded wait ran out (query.max_wait_ms, the deadline): ask again;
     * anything else is an error. */
    waits++;
    if (e->code == IXIA_EINVAL || e->code == IXIA_ENOTFOUND || g_get_monotonic_time() > give_up)
      ok = ixia_error_propagate(&err, e);
    else {
      ixia_error_destroy(e);
      /* An error that came back at once is not a wait: do not spin. */
      if (g_get_monotonic_time() - asked < 50000) g_usleep(50000);
    }
  }
  gint64 done = g_get_monotonic_time();
  g_free(req);
  gboolean answered = ok;
  /* min_version only proves the shards reached Kafka's end: events dropped
   * by the broker (ixia-devkafka keeps ~5 MiB per partition) never arrive,
   * so check the count too. */
  if (ok && o->load_docs && total < o->load_docs)
    ok = ixia_error_set(&err, IXIA_EINTERNAL,
                        "the index holds %" G_GINT64_FORMAT " documents, fewer than the %" G_GINT64_FORMAT
                        " loaded: events were lost between the store and the index",
                        total, o->load_docs);
  static const char *const fields[] = {"documents", "disk_bytes", "apply_ms", "events_applied", NULL};
  double sums[G_N_ELEMENTS(fields)] = {0};
  ixia_error_t *se = NULL;
  gboolean have_status = answered && shard_totals(c, fields, sums, &se);
  ixia_client_destroy(c);
  cJSON *out = ixia_bench_result_new("index");
  cJSON_AddNumberToObject(out, "min_version", (double)version);
  if (answered) cJSON_AddNumberToObject(out, "total", (double)total);
  if (ok) {
    double secs = (double)(done - start) / 1e6;
    gint64 docs = o->load_docs ? o->load_docs : total;
    cJSON_AddNumberToObject(out, "docs", (double)docs);
    cJSON_AddNumberToObject(out, "seconds", (double)(gint64)(secs * 100) / 100);
    cJSON_AddNumberToObject(out, "docs_per_s", (double)(gint64)((double)docs / secs + 0.5));
    if (o->load_end_us)
      cJSON_AddNumberToObject(out, "behind_load_s",
                              (double)(gint64)((double)(done - o->load_end_us) / 1e4) / 100);
    cJSON_AddNumberToObject(out, "retries", waits);
  }
  if (have_status) {
    cJSON_AddNumberToObject(out, "index_documents", sums[0]);
    cJSON_AddNumberToObject(out, "index_disk_bytes", sums[1]);
    cJSON_AddNumberToObject(out, "index_apply_s", (double)(gint64)(sums[2] / 10) / 100);
    cJSON_AddNumberToObject(out, "events_applied", sums[3]);
    if (o->load_bytes)
      cJSON_AddNumberToObject(out, "index_to_raw",
                              (double)(gint64)(sums[1] / (double)o->load_bytes * 1000) / 1000);
  } else if (se) {
    cJSON_AddStringToObject(out, "status_error", se->message);
  }
  if (err) cJSON_AddStringToObject(out, "error", err->message);
  ixia_bench_print(out);
  ixia_error_destroy(se);
  ixia_error_destroy(err);
  return ok;
}
