/* API keys: who may do what, on which namespaces.
 *
 * A key grants actions (read, write, query, schema, admin) on namespaces
 * (a list, or "*" for all). Its text is "ixk_<id>_<secret>": the id is
 * public (listing, revoking, logs may name it), the secret is 32 random
 * bytes shown once at creation. The API's key store (auth.keys_file, a
 * JSON file written atomically, mode 0600) keeps each key's id, scope,
 * expiry and the SHA-256 of its text, never the text: keys are random, so a
 * fast hash suffices and verifying costs one hash (about a microsecond).
 *
 * The service key (auth.service_key_file) is what the daemons use among
 * themselves (the API calling shards and sinks, the recovery tools): it
 * grants everything, and it is the only key index shards and sinks accept.
 * ixia-query-api creates the file (random key, mode 0600) when it is
 * missing; the other daemons read it and refuse to start without it.
 *
 * With auth.enabled false (ixia-local's default) every check passes.
 *
 * Ownership: principals are reference-counted (ixia_principal_unref).
 * Thread safety: every function may be called from any thread. */
#ifndef IXIA_AUTH_H
#define IXIA_AUTH_H

#include <glib.h>

#include "config.h"
#include "error.h"

typedef enum {
  IXIA_ACT_READ = 1 << 0,
  IXIA_ACT_WRITE = 1 << 1,
  IXIA_ACT_QUERY = 1 << 2,
  IXIA_ACT_SCHEMA = 1 << 3,
  IXIA_ACT_ADMIN = 1 << 4,
} ixia_action_t;
#define IXIA_ACT_ALL 0x1f

/* "read" ... "admin"; NULL for a combination. */
const char *ixia_action_name(ixia_action_t a);

typedef struct ixia_auth ixia_auth_t;
typedef struct ixia_principal ixia_principal_t;

/* with_store: the API (loads auth.keys_file and creates the service key
 * file if missing); otherwise a daemon that accepts only the service key.
 * With auth on, the service key also becomes the process's client key
 * (ixia_auth_set_client_key): its calls to other daemons use it. */
ixia_auth_t *ixia_auth_new(const ixia_config_t *cfg, gboolean with_store, ixia_error_t **err);
void ixia_auth_destroy(ixia_auth_t *a);
gboolean ixia_auth_enabled(const ixia_auth_t *a);

/* The principal of a key text, or NULL with UNAUTHENTICATED naming why
 * (malformed, unknown or revoked, expired at ...; never the secret). With
 * auth off: an everything-principal for any text. */
ixia_principal_t *ixia_auth_verify(ixia_auth_t *a, const char *key, gsize len, ixia_error_t **err);
ixia_principal_t *ixia_principal_ref(ixia_principal_t *p);
void ixia_principal_unref(ixia_principal_t *p);
/* The key id ("service" for the service key). */
const char *ixia_principal_id(const ixia_principal_t *p);

/* May p do act on namespace ns? ns NULL: on every namespace (calls that are
 * not about one, e.g. snapshot). NULL p: not authenticated. FALSE with
 * UNAUTHENTICATED (no key, expired or revoked since) or PERMISSION_DENIED
 * naming the key id, the action and the namespace. Always TRUE with auth
 * off. */
gboolean ixia_auth_check(ixia_auth_t *a, const ixia_principal_t *p, ixia_action_t act,
                         const char *ns, ixia_error_t **err);

/* Key management (the API's store only). spec_json as for Ixia.createKey;
 * returns JSON with the key's text (g_free). */
char *ixia_auth_create_key(ixia_auth_t *a, const char *spec_json, ixia_error_t **err);
/* {"keys": [...]}: ids, scopes, expiry; never secrets or hashes. */
char *ixia_auth_list_keys(ixia_auth_t *a);
gboolean ixia_auth_revoke_key(ixia_auth_t *a, const char *id, ixia_error_t **err);

/* A new random service key text (for `ixia keys service-key`). */
char *ixia_auth_new_service_key(void);
/* Reads the service key of cfg (auth.service_key_file). NULL with an error
 * naming the option when unreadable. */
char *ixia_auth_read_service_key(const ixia_config_t *cfg, ixia_error_t **err);
/* Writes a new service key to path unless it exists (mode 0600). */
gboolean ixia_auth_ensure_service_key(const char *path, gboolean *created, ixia_error_t **err);

/* The key this process's Thrift clients send (authenticate) after
 * connecting: set once at start (NULL/"" = none). */
void ixia_auth_set_client_key(const char *key);
const char *ixia_auth_client_key(void);
/* A tool's key: IXIA_KEY from the environment, else the service key file
 * when readable, else NULL. Sets it as the client key too. */
void ixia_auth_client_key_from_env(const ixia_config_t *cfg);

#endif
