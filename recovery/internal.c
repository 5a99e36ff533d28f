/* What the recovery subcommands share (internal.h): reaching the index
 * shards through the API, waiting for them to catch up, and sending them
 * reindex pages.
 *
 * backfill, replay-failed and verify all start the same way: connect to the
 * API, ask it for the shards it fans out to, open a client per shard with
 * the one timeout of the config table (client.shard_timeout_ms), and wait
 * until every shard has applied the store's latest version. Reindexing goes
 * to every shard, because a shard ignores keys of partitions it does not
 * own: the tools need not know the partitioning. */
#include "internal.h"

#include <string.h>

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
    /* An unreachable shard answers at once: do not hammer the API. */
    g_usleep(100 * G_TIME_SPAN_MILLISECOND);
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

gboolean ixia_recovery_shards_open(ixia_client_t *api, ixia_recovery_shards_t *out,
                                   ixia_error_t **err) {
  memset(out, 0, sizeof *out);
  char **addrs = ixia_client_shards(api, err);
  if (!addrs) return FALSE;
  out->n = g_strv_length(addrs);
  out->shards = g_new0(ixia_shard_client_t *, out->n ? out->n : 1);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < out->n; i++)
    ok = (out->shards[i] = ixia_shard_client_new(g_strstrip(addrs[i]),
                                                 ixia_client_timeouts()->shard_ms, err)) != NULL;
  g_strfreev(addrs);
  if (!ok) ixia_recovery_shards_close(out);
  return ok;
}

void ixia_recovery_shards_close(ixia_recovery_shards_t *s) {
  for (guint i = 0; s->shards && i < s->n; i++) ixia_shard_client_destroy(s->shards[i]);
  g_free(s->shards);
  s->shards = NULL;
  s->n = 0;
}

gboolean ixia_recovery_reindex(const ixia_recovery_shards_t *s, GPtrArray *events,
                               guint64 *applied, ixia_error_t **err) {
  for (guint i = 0; i < s->n; i++) {
    gint32 count = 0;
    IxiaIxiaError *xe = NULL;
    GError *gerr = NULL;
    gboolean ok = ixia_search_if_reindex(ixia_shard_client_iface(s->shards[i]), &count, events, &xe, &gerr);
    if (!ixia_shard_client_check(s->shards[i], ok, xe, gerr, err)) return FALSE;
    if (applied) *applied += (guint64)count;
  }
  return TRUE;
}
