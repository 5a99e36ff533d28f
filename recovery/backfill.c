#include <string.h>

#include "internal.h"
#include "progress.h"
#include "recovery.h"
#include "thrift_util.h"

gboolean ixia_recovery_wait_shards(ixia_client_t *api, const char *ns, const char *table,
                                   gint64 version, ixia_error_t **err) {
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "namespace", ns);
  cJSON_AddStringToObject(req, "table", table);
  cJSON_AddNumberToObject(req, "limit", 0);
  cJSON_AddNumberToObject(req, "min_version", (double)version);
  char *text = cJSON_PrintUnformatted(req);
  cJSON_Delete(req);
  /* One query waits at most query.max_wait_ms; a shard catching up after a
   * rebuild or an outage may need longer, so keep asking for a while. */
  gint64 give_up = g_get_monotonic_time() + 600 * G_TIME_SPAN_SECOND;
  gboolean ok = FALSE;
  for (;;) {
    ixia_error_t *e = NULL;
    char *resp = NULL;
    ok = ixia_client_query(api, text, &resp, &e);
    g_free(resp);
    gboolean retry = !ok && (e->code == IXIA_EUNAVAILABLE || e->code == IXIA_ENOTCAUGHTUP ||
                             e->code == IXIA_ESHARD);
    if (!retry || g_get_monotonic_time() >= give_up) {
      if (e) {
        ixia_error_prefix(e, "waiting for the index shards to reach version %" G_GINT64_FORMAT, version);
        ixia_error_propagate(err, e);
      }
      break;
    }
    ixia_error_destroy(e);
  }
  cJSON_free(text);
  return ok;
}

gint64 ixia_recovery_latest_version(ixia_client_t *api, ixia_error_t **err) {
  char *json = NULL;
  if (!ixia_client_stats(api, &json, err)) return -1;
  cJSON *stats = cJSON_Parse(json);
  g_free(json);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(stats, "store_latest_version");
  gint64 out = cJSON_IsNumber(v) ? (gint64)v->valuedouble : -1;
  cJSON_Delete(stats);
  if (out < 0) ixia_error_set(err, IXIA_EINTERNAL, "the API's stats lack store_latest_version");
  return out;
}

/* Sends one page to every shard; adds the applied counts. */
static gboolean reindex_page(ixia_shard_client_t **shards, guint n, GPtrArray *events,
                             guint64 *applied, ixia_error_t **err) {
  for (guint i = 0; i < n; i++) {
    gint32 count = 0;
    IxiaIxiaError *xe = NULL;
    GError *gerr = NULL;
    gboolean ok = ixia_search_if_reindex(ixia_shard_client_iface(shards[i]), &count, events, &xe, &gerr);
    if (!ixia_shard_client_check(shards[i], ok, xe, gerr, err)) return FALSE;
    *applied += (guint64)count;
  }
  return TRUE;
}

cJSON *ixia_recovery_backfill(const char *api_addr, const char *ns, const char *table,
                              const ixia_backfill_opts_t *opts, ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  ixia_client_t *api = ixia_client_new(api_addr, err);
  if (!api) return NULL;
  char **addrs = NULL;
  ixia_shard_client_t **shards = NULL;
  guint n = 0;
  guint64 documents = 0, applied = 0;
  ixia_progress_t *progress = NULL;
  char *schema = NULL;
  cJSON *summary = NULL;
  gboolean ok = ixia_client_get_schema(api, ns, table, &schema, err);
  gint64 version = ok ? ixia_recovery_latest_version(api, err) : -1;
  ok = ok && version >= 0 && ixia_recovery_wait_shards(api, ns, table, version, err);
  if (ok) addrs = ixia_client_shards(api, err);
  ok = ok && addrs;
  if (ok) {
    n = g_strv_length(addrs);
    shards = g_new0(ixia_shard_client_t *, n);
    for (guint i = 0; ok && i < n; i++) ok = (shards[i] = ixia_shard_client_new(g_strstrip(addrs[i]), 60000, err)) != NULL;
  }
  if (ok) {
    char *label = g_strdup_printf("backfill %s.%s", ns, table);
    progress = ixia_progress_new(label, 0, "docs", opts->quiet);
    g_free(label);
  }
  char *after = NULL;
  while (ok) {
    GPtrArray *docs = NULL;
    ok = ixia_client_scan(api, ns, table, after, (gint)opts->batch, &docs, err);
    if (!ok || docs->len == 0) {
      if (docs) g_ptr_array_unref(docs);
      break;
    }
    GPtrArray *events = g_ptr_array_new_with_free_func(g_object_unref);
    gint64 now_ms = g_get_real_time() / 1000;
    for (guint i = 0; i < docs->len; i++) {
      IxiaDocument *d = g_ptr_array_index(docs, i);
      g_ptr_array_add(events, ixia_change_event_new(IXIA_CHANGE_OP_PUT, ns, strlen(ns), table,
                                                    strlen(table), d->key, strlen(d->key),
                                                    d->version, d->json, strlen(d->json), 0, now_ms));
    }
    ok = reindex_page(shards, n, events, &applied, err);
    documents += docs->len;
    ixia_progress_add(progress, docs->len);
    g_free(after);
    after = g_strdup(((IxiaDocument *)g_ptr_array_index(docs, docs->len - 1))->key);
    g_ptr_array_unref(events);
    g_ptr_array_unref(docs);
  }
  g_free(after);
  ixia_progress_destroy(progress);
  if (ok) {
    summary = cJSON_CreateObject();
    cJSON_AddStringToObject(summary, "namespace", ns);
    cJSON_AddStringToObject(summary, "table", table);
    cJSON_AddNumberToObject(summary, "documents", (double)documents);
    cJSON_AddNumberToObject(summary, "applied", (double)applied);
    cJSON_AddNumberToObject(summary, "seconds", (double)(g_get_monotonic_time() - start) / 1e6);
  }
  for (guint i = 0; shards && i < n; i++) ixia_shard_client_destroy(shards[i]);
  g_free(shards);
  g_strfreev(addrs);
  g_free(schema);
  ixia_client_destroy(api);
  return summary;
}
