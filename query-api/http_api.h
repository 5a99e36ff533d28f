/* The HTTP/JSON interface of ixia-query-api (docs/HTTP.md): every Thrift
 * call as a resource, the status console at /, and the API's /readyz and
 * /metrics contents.
 *
 * Routes convert between HTTP and the api.c calls the Thrift handlers use,
 * after the same authorization (access.h): no logic is written twice. The
 * request's key is `Authorization: Bearer KEY`.
 *
 * Thread safety: the handler runs on the HTTP port's event loops and
 * workers, any number at once. */
#ifndef IXIA_API_HTTP_H
#define IXIA_API_HTTP_H

#include "api.h"
#include "auth.h"
#include "http.h"

typedef struct ixia_api_http ixia_api_http_t;

/* Serves api (and its key store auth, may be NULL) on the HTTP port
 * http.host:http.port; NULL with no error when http.port is -1. Registers
 * the API's metrics collector. api and auth are borrowed. */
ixia_api_http_t *ixia_api_http_new(const ixia_config_t *cfg, ixia_api_t *api, ixia_auth_t *auth,
                                   ixia_error_t **err);
void ixia_api_http_destroy(ixia_api_http_t *h);
int ixia_api_http_port(const ixia_api_http_t *h);

/* The handler and readiness (for tests driving them without sockets). */
void ixia_api_http_handle(ixia_http_req_t *r, gpointer api_http);
gboolean ixia_api_http_ready(gpointer api_http, GPtrArray *reasons);

#endif
