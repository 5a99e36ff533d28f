/* Who may call what on the API: the one mapping of each call to an action
 * and a namespace (common/auth.h), used alike by the Thrift handlers
 * (handler.c, the connection's key) and the HTTP routes (http_api.c, the
 * request's Bearer key).
 *
 *   read    get, multiGet, getSchema
 *   write   put, upsert, deleteDoc, batch (every op's namespace), _bulk
 *   query   query (the request's "namespace")
 *   schema  applySchema (the schema's "namespace")
 *   admin   scan (its namespace); snapshot, walSince and key management
 *           (every namespace: a key for "*")
 *   any key stats
 *
 * auth NULL or off: everything is allowed. Thread-safe. */
#ifndef IXIA_API_ACCESS_H
#define IXIA_API_ACCESS_H

#include "api.h"
#include "auth.h"

/* act 0: any valid key. ns NULL: every namespace. */
gboolean ixia_access_allow(ixia_auth_t *auth, const ixia_principal_t *p, ixia_action_t act,
                           const char *ns, ixia_error_t **err);
/* write on the namespace of every op. */
gboolean ixia_access_allow_ops(ixia_auth_t *auth, const ixia_principal_t *p,
                               const ixia_api_op_t *ops, guint n, ixia_error_t **err);
/* act on the "namespace" member of a JSON request (a query, a schema); a
 * request without one is left for the call itself to refuse, but only a
 * key for every namespace may send it. */
gboolean ixia_access_allow_json(ixia_auth_t *auth, const ixia_principal_t *p, ixia_action_t act,
                                const char *json, ixia_error_t **err);

/* The Ixia service's method names (metrics labels), NULL-terminated. */
extern const char *const ixia_api_methods[];

/* The Ixia Thrift processor (as ixia_api_processor_new) whose handlers
 * check every call against the connection's key; auth borrowed. */
ThriftProcessor *ixia_api_processor_new_with_auth(ixia_api_t *api, ixia_auth_t *auth);

#endif
