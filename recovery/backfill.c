/* `ixia-recovery backfill` (recovery.h): one table reindexed from the truth
 * store while the stack runs.
 *
 * It waits until every shard has applied the store's latest version, then
 * walks the table through the API page by page and sends each page to
 * every shard's reindex call (internal.c); shards keep the keys they own
 * and the version rule keeps a newer edit from Kafka from being undone. */
#include <string.h>

#include "internal.h"
#include "progress.h"
#include "recovery.h"
#include "thrift_util.h"

cJSON *ixia_recovery_backfill(const char *api_addr, const char *ns, const char *table,
                              const ixia_backfill_opts_t *opts, ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  ixia_client_t *api = ixia_client_new(api_addr, err);
  if (!api) return NULL;
  ixia_recovery_shards_t shards = {0};
  guint64 documents = 0, applied = 0;
  ixia_progress_t *progress = NULL;
  char *schema = NULL;
  cJSON *summary = NULL;
  gboolean ok = ixia_client_get_schema(api, ns, table, &schema, err);
  gint64 version = ok ? ixia_recovery_latest_version(api, err) : -1;
  ok = ok && version >= 0 && ixia_recovery_wait_shards(api, ns, table, version, err);
  ok = ok && ixia_recovery_shards_open(api, &shards, err);
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
      /* With its TTL, so that the shard drops it from the index when it
       * expires (an API older than the member sends none). */
      gint64 expire_at = d->__isset_expire_at ? d->expire_at : 0;
      g_ptr_array_add(events, ixia_change_event_new(IXIA_CHANGE_OP_PUT, ns, strlen(ns), table,
                                                    strlen(table), d->key, strlen(d->key), d->version,
                                                    d->json, strlen(d->json), expire_at, now_ms));
    }
    ok = ixia_recovery_reindex(&shards, events, &applied, err);
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
  ixia_recovery_shards_close(&shards);
  g_free(schema);
  ixia_client_destroy(api);
  return summary;
}
