/* API call authorization (access.h). */
#include "access.h"

#include <cjson/cJSON.h>
#include <string.h>

const char *const ixia_api_methods[] = {
    "put",      "upsert",    "deleteDoc", "batch",    "get",          "multiGet",
    "scan",     "query",     "applySchema", "getSchema", "stats",     "snapshot",
    "walSince", "authenticate", "createKey", "listKeys", "revokeKey", NULL};

gboolean ixia_access_allow(ixia_auth_t *auth, const ixia_principal_t *p, ixia_action_t act,
                           const char *ns, ixia_error_t **err) {
  return ixia_auth_check(auth, p, act, ns, err);
}

gboolean ixia_access_allow_ops(ixia_auth_t *auth, const ixia_principal_t *p,
                               const ixia_api_op_t *ops, guint n, ixia_error_t **err) {
  if (!ixia_auth_enabled(auth)) return TRUE;
  gboolean ok = ixia_auth_check(auth, p, IXIA_ACT_WRITE, n ? ops[0].ns : NULL, err);
  for (guint i = 1; ok && i < n; i++)
    if (!ops[i].ns || !ops[i - 1].ns || strcmp(ops[i].ns, ops[i - 1].ns) != 0)
      ok = ixia_auth_check(auth, p, IXIA_ACT_WRITE, ops[i].ns, err);
  return ok;
}

gboolean ixia_access_allow_json(ixia_auth_t *auth, const ixia_principal_t *p, ixia_action_t act,
                                const char *json, ixia_error_t **err) {
  if (!ixia_auth_enabled(auth)) return TRUE;
  /* Only the namespace is read here; the call parses the request fully
   * (with its size and depth limits), so a malformed one is refused there. */
  cJSON *o = json ? cJSON_Parse(json) : NULL;
  const cJSON *ns = o ? cJSON_GetObjectItemCaseSensitive(o, "namespace") : NULL;
  gboolean ok = ixia_auth_check(auth, p, act, cJSON_IsString(ns) ? ns->valuestring : NULL, err);
  cJSON_Delete(o);
  return ok;
}
