/* ixia-replication-sink: parse options, load config, start, wait, stop. */
#include <stdio.h>
#include <stdlib.h>

#include "auth.h"
#include "config.h"
#include "health.h"
#include "log.h"
#include "server.h"
#include "sink.h"
#include "thrift_gate.h"

int main(int argc, char **argv) {
  ixia_error_t *err = NULL;
  ixia_config_t *cfg = ixia_config_from_args(
      &argc, &argv, NULL,
      "Receives truth-store WAL batches and publishes them to Kafka as change events.", NULL, &err);
  if (!cfg) {
    fprintf(stderr, "ixia-replication-sink: %s\n", err->message);
    ixia_error_destroy(err);
    return 2;
  }
  ixia_server_sched_apply(cfg); /* before any thread starts: they inherit it */
  int rc = 1;
  static const char *const methods[] = {"replicate", "stats", "authenticate", NULL};
  ThriftProcessor *proc = NULL;
  ixia_server_t *srv = NULL;
  ixia_sink_t *sink = NULL;
  ixia_thrift_gate_t *gate = NULL;
  ixia_sink_http_t *http = NULL;
  /* Only the service key opens this port (auth.h). */
  ixia_auth_t *auth = ixia_auth_new(cfg, FALSE, &err);
  if (!auth) goto out;
  sink = ixia_sink_new(cfg, &err);
  if (!sink) goto out;
  proc = ixia_sink_processor_new(sink);
  const char *host = ixia_config_str(cfg, "sink.host");
  srv = ixia_server_new(cfg, host, (int)ixia_config_int(cfg, "sink.port"), proc, &err);
  if (!srv) goto out;
  gate = ixia_thrift_gate_new(auth, methods);
  ixia_thrift_gate_install(gate, srv);
  if (!ixia_server_start(srv, &err)) goto out;
  http = ixia_sink_http_new(cfg, sink, &err);
  if (!http && err) goto out;
  ixia_sink_set_server(sink, srv);
  if (!ixia_server_write_port_file(srv, ixia_config_str(cfg, "sink.port_file"), &err)) goto out;
  IXIA_INFO("ixia-replication-sink serving on %s:%d", host, ixia_server_port(srv));
  ixia_wait_for_signal();
  IXIA_INFO("shutting down");
  rc = 0;
out:
  if (err) {
    IXIA_ERROR("ixia-replication-sink: %s", err->message);
    ixia_error_destroy(err);
  }
  /* Calls in flight finish first; then the producer flushes (bounded). */
  ixia_sink_http_destroy(http);
  ixia_server_stop(srv);
  ixia_sink_destroy(sink);
  ixia_server_destroy(srv);
  ixia_thrift_gate_destroy(gate);
  ixia_auth_destroy(auth);
  if (proc) g_object_unref(proc);
  ixia_config_destroy(cfg);
  return rc;
}
