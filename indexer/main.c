/* ixia-indexer: open the shard's index, consume Kafka into it, serve Search. */
#include <stdio.h>

#include "auth.h"
#include "config.h"
#include "health.h"
#include "indexer.h"
#include "log.h"
#include "server.h"
#include "thrift_gate.h"

int main(int argc, char **argv) {
  ixia_error_t *err = NULL;
  ixia_config_t *cfg = ixia_config_from_args(
      &argc, &argv, NULL,
      "Keeps one index shard up to date from Kafka (indexer.partitions of kafka.topic) and "
      "serves the Search service over it.",
      NULL, &err);
  if (!cfg) {
    fprintf(stderr, "ixia-indexer: %s\n", err->message);
    ixia_error_destroy(err);
    return 2;
  }
  ixia_server_sched_apply(cfg); /* before any thread starts: they inherit it */
  int rc = 1;
  ixia_indexer_t *ix = NULL;
  ixia_thrift_gate_t *gate = NULL;
  ixia_indexer_http_t *http = NULL;
  ThriftProcessor *proc = NULL;
  ixia_server_t *srv = NULL;
  ixia_idx_t *idx = NULL;
  /* Only the service key opens this port (auth.h). */
  ixia_auth_t *auth = ixia_auth_new(cfg, FALSE, &err);
  if (!auth) goto out;
  idx = ixia_idx_open(ixia_config_str(cfg, "index.path"), cfg, &err);
  if (!idx) goto out;
  ix = ixia_indexer_new(cfg, idx, &err);
  if (!ix) goto out;
  proc = ixia_search_processor_new(ix, cfg);
  srv = ixia_server_new(cfg, ixia_config_str(cfg, "indexer.host"),
                        (int)ixia_config_int(cfg, "indexer.port"), proc, &err);
  if (srv) {
    ixia_server_set_workers(srv, ixia_config_threads(cfg, "indexer.search_threads"));
    ixia_server_set_inline(srv, ixia_search_inline_call);
    ixia_server_set_io_auto(srv, g_get_num_processors());
    ixia_indexer_set_server(ix, srv);
    gate = ixia_thrift_gate_new(auth, ixia_search_methods);
    ixia_thrift_gate_set_fast(gate, "search_page", ixia_search_answer_page, proc);
    ixia_thrift_gate_install(gate, srv);
  }
  const char *sock = ixia_config_str(cfg, "indexer.socket");
  if (!srv || (*sock && !ixia_server_listen_unix(srv, sock, "indexer.socket", &err)) ||
      !ixia_server_start(srv, &err))
    goto out;
  http = ixia_indexer_http_new(cfg, ix, &err);
  if (!http && err) goto out;
  if (!ixia_server_write_port_file(srv, ixia_config_str(cfg, "indexer.port_file"), &err)) goto out;
  IXIA_INFO("ixia-indexer serving on %s:%d%s%s, index %s", ixia_config_str(cfg, "indexer.host"),
            ixia_server_port(srv), *sock ? " and " : "", sock, ixia_config_str(cfg, "index.path"));
  ixia_wait_for_signal();
  IXIA_INFO("shutting down");
  rc = 0;
out:
  if (err) {
    IXIA_ERROR("ixia-indexer: %s", err->message);
    ixia_error_destroy(err);
  }
  /* The server first: a worker may wait for a reindex on the apply thread.
   * Then the indexer finishes its current batch before the index closes. */
  ixia_indexer_http_destroy(http);
  if (srv) ixia_server_stop(srv);
  if (ix) ixia_indexer_set_server(ix, NULL); /* no call runs now */
  ixia_server_destroy(srv);
  ixia_thrift_gate_destroy(gate);
  if (proc) g_object_unref(proc);
  ixia_indexer_destroy(ix);
  ixia_idx_destroy(idx);
  ixia_auth_destroy(auth);
  ixia_config_destroy(cfg);
  return rc;
}
