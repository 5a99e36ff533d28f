/* ixia-query-api: parse options, load config, start, wait. */
#include <stdio.h>
#include <stdlib.h>

#include "access.h"
#include "api.h"
#include "auth.h"
#include "config.h"
#include "http_api.h"
#include "log.h"
#include "server.h"
#include "thrift_gate.h"

int main(int argc, char **argv) {
  ixia_error_t *err = NULL;
  ixia_config_t *cfg = ixia_config_from_args(
      &argc, &argv, NULL,
      "Serves the ixia API: Thrift (api.port) and HTTP/JSON (http.port): writes, gets, "
      "queries, schemas, stats, metrics, the status console.",
      NULL, &err);
  if (!cfg) {
    fprintf(stderr, "ixia-query-api: %s\n", err->message);
    return 2;
  }
  ixia_server_sched_apply(cfg); /* before any thread starts: they inherit it */
  int rc = 1;
  ixia_api_t *api = NULL;
  ThriftProcessor *proc = NULL;
  ixia_server_t *srv = NULL;
  ixia_thrift_gate_t *gate = NULL;
  ixia_api_http_t *http = NULL;
  ixia_auth_t *auth = ixia_auth_new(cfg, TRUE, &err);
  if (!auth) goto out;
  api = ixia_api_new(cfg, &err);
  if (!api) goto out;
  proc = ixia_api_processor_new_with_auth(api, auth);
  srv = ixia_server_new(cfg, ixia_config_str(cfg, "api.host"), (int)ixia_config_int(cfg, "api.port"),
                        proc, &err);
  if (!srv) goto out;
  ixia_server_set_inline(srv, ixia_api_inline_call);
  /* Queries are finished on the I/O threads (fanout.h): one per core. */
  ixia_server_set_io_auto(srv, g_get_num_processors());
  ixia_server_set_method_threads(srv, "query", ixia_config_threads(cfg, "query.threads"));
  gate = ixia_thrift_gate_new(auth, ixia_api_methods);
  ixia_thrift_gate_set_fast(gate, "get", ixia_api_answer_get, proc);
  ixia_thrift_gate_set_fast(gate, "query", ixia_api_answer_query, proc);
  ixia_thrift_gate_install(gate, srv);
  if (!ixia_server_start(srv, &err)) goto out;
  ixia_api_set_server(api, srv);
  http = ixia_api_http_new(cfg, api, auth, &err);
  if (!http && err) goto out;
  if (!ixia_server_write_port_file(srv, ixia_config_str(cfg, "api.port_file"), &err)) goto out;
  IXIA_INFO("ixia-query-api serving Thrift on %s:%d%s", ixia_config_str(cfg, "api.host"),
            ixia_server_port(srv), ixia_auth_enabled(auth) ? " (API keys required)" : "");
  ixia_wait_for_signal();
  IXIA_INFO("shutting down");
  rc = 0;
out:
  if (err) {
    IXIA_ERROR("ixia-query-api: %s", err->message);
    ixia_error_destroy(err);
  }
  ixia_api_http_destroy(http);
  ixia_server_destroy(srv);
  ixia_thrift_gate_destroy(gate);
  if (proc) g_object_unref(proc);
  ixia_api_destroy(api);
  ixia_auth_destroy(auth);
  ixia_config_destroy(cfg);
  return rc;
}
