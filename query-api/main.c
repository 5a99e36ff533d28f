/* ixia-query-api: parse options, load config, start, wait. */
#include <stdio.h>
#include <stdlib.h>

#include "api.h"
#include "config.h"
#include "log.h"
#include "server.h"

int main(int argc, char **argv) {
  ixia_error_t *err = NULL;
  ixia_config_t *cfg = ixia_config_from_args(
      &argc, &argv, NULL, "Serves the ixia Thrift API: writes, gets, schemas, stats.", NULL, &err);
  if (!cfg) {
    fprintf(stderr, "ixia-query-api: %s\n", err->message);
    return 2;
  }
  int rc = 1;
  ixia_api_t *api = ixia_api_new(cfg, &err);
  ThriftProcessor *proc = NULL;
  ixia_server_t *srv = NULL;
  if (!api) goto out;
  proc = ixia_api_processor_new(api);
  srv = ixia_server_new(cfg, ixia_config_str(cfg, "api.host"), (int)ixia_config_int(cfg, "api.port"),
                        proc, &err);
  if (srv) ixia_server_set_inline(srv, ixia_api_inline_call);
  if (!srv || !ixia_server_start(srv, &err)) goto out;
  ixia_api_set_server(api, srv);
  if (!ixia_server_write_port_file(srv, ixia_config_str(cfg, "api.port_file"), &err)) goto out;
  IXIA_INFO("ixia-query-api serving on %s:%d", ixia_config_str(cfg, "api.host"), ixia_server_port(srv));
  ixia_wait_for_signal();
  IXIA_INFO("shutting down");
  rc = 0;
out:
  if (err) {
    IXIA_ERROR("ixia-query-api: %s", err->message);
    ixia_error_destroy(err);
  }
  ixia_server_destroy(srv);
  if (proc) g_object_unref(proc);
  ixia_api_destroy(api);
  ixia_config_destroy(cfg);
  return rc;
}
