/* ixia-recovery snapshot: a checkpoint of the truth store taken by the API
 * (Ixia.snapshot), plus SNAPSHOT.json beside it. */
#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "json.h"
#include "recovery.h"

#define SNAPSHOT_JSON "SNAPSHOT.json"
#define SNAPSHOT_STORE "store"

static gboolean dir_is_empty(const char *dir) {
  GDir *d = g_dir_open(dir, 0, NULL);
  if (!d) return TRUE;
  gboolean empty = g_dir_read_name(d) == NULL;
  g_dir_close(d);
  return empty;
}

/* Writes path atomically (temporary file + rename). */
static gboolean write_json_file(const char *path, cJSON *o, ixia_error_t **err) {
  char *text = cJSON_Print(o);
  char *with_nl = g_strconcat(text, "\n", NULL);
  cJSON_free(text);
  GError *gerr = NULL;
  gboolean ok = g_file_set_contents(path, with_nl, -1, &gerr);
  g_free(with_nl);
  if (!ok) return ixia_error_from_gerror(err, gerr, IXIA_EUNAVAILABLE, path);
  return TRUE;
}

cJSON *ixia_recovery_snapshot(const char *api_addr, const char *dir_arg, ixia_error_t **err) {
  gint64 start = g_get_monotonic_time();
  /* The API resolves the path on its own host with its own working
   * directory: hand it an absolute one. */
  char *dir = g_canonicalize_filename(dir_arg, NULL);
  cJSON *summary = NULL;
  if (g_file_test(dir, G_FILE_TEST_EXISTS) && !dir_is_empty(dir)) {
    ixia_error_set(err, IXIA_EINVAL, "snapshot directory %s exists and is not empty", dir);
    g_free(dir);
    return NULL;
  }
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    ixia_error_set(err, IXIA_EUNAVAILABLE, "cannot create %s: %s", dir, g_strerror(errno));
    g_free(dir);
    return NULL;
  }
  char *store = g_build_filename(dir, SNAPSHOT_STORE, NULL);
  ixia_client_t *api = ixia_client_new(api_addr, err);
  char *reply = NULL;
  cJSON *r = NULL;
  if (api && ixia_client_snapshot(api, store, &reply, err)) {
    r = cJSON_Parse(reply);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "version");
    if (!cJSON_IsNumber(v)) {
      ixia_error_set(err, IXIA_EINTERNAL, "the API's snapshot reply has no version: %s", reply);
    } else {
      GDateTime *now = g_date_time_new_now_utc();
      char *stamp = g_date_time_format_iso8601(now);
      g_date_time_unref(now);
      cJSON *meta = cJSON_CreateObject();
      cJSON_AddNumberToObject(meta, "version", v->valuedouble);
      cJSON_AddStringToObject(meta, "created_at", stamp);
      cJSON_AddStringToObject(meta, "api", api_addr);
      cJSON_AddStringToObject(meta, "store", SNAPSHOT_STORE);
      char *meta_path = g_build_filename(dir, SNAPSHOT_JSON, NULL);
      if (write_json_file(meta_path, meta, err)) {
        summary = cJSON_CreateObject();
        cJSON_AddStringToObject(summary, "dir", dir);
        cJSON_AddStringToObject(summary, "store", store);
        cJSON_AddNumberToObject(summary, "version", v->valuedouble);
        cJSON_AddStringToObject(summary, "created_at", stamp);
        cJSON_AddStringToObject(summary, "api", api_addr);
        cJSON_AddNumberToObject(summary, "seconds", (double)(g_get_monotonic_time() - start) / 1e6);
      }
      g_free(meta_path);
      cJSON_Delete(meta);
      g_free(stamp);
    }
  }
  if (!summary && err && *err) ixia_error_prefix(*err, "snapshot to %s", dir);
  cJSON_Delete(r);
  g_free(reply);
  ixia_client_destroy(api);
  g_free(store);
  g_free(dir);
  return summary;
}

gboolean ixia_recovery_snapshot_info(const char *dir, gint64 *version, char **store_path,
                                     ixia_error_t **err) {
  char *path = g_build_filename(dir, SNAPSHOT_JSON, NULL);
  char *text = NULL;
  GError *gerr = NULL;
  gboolean ok = g_file_get_contents(path, &text, NULL, &gerr);
  if (!ok) {
    ixia_error_from_gerror(err, gerr, IXIA_ENOTFOUND, "not a snapshot directory (made by ixia-recovery snapshot)");
  } else {
    cJSON *o = cJSON_Parse(text);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "version");
    const char *store = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "store"));
    if (!cJSON_IsNumber(v)) {
      ok = ixia_error_set(err, IXIA_EINVAL, "%s: no \"version\"", path);
    } else {
      if (version) *version = (gint64)v->valuedouble;
      if (store_path) *store_path = g_build_filename(dir, store ? store : SNAPSHOT_STORE, NULL);
    }
    cJSON_Delete(o);
  }
  g_free(text);
  g_free(path);
  return ok;
}
