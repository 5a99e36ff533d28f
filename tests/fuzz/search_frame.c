/* search_frame: what a client connection sends to an ixia-indexer shard.
 *
 * The input is a byte stream of framed requests to the Search service, each
 * served as a server worker does: search_page's hand-coded reader and
 * handler (ixia_search_answer_page), and for any frame it leaves
 * ixia_server_serve_frame, with the real shard handler over a real index
 * shard: an index RocksDB in a temporary
 * directory and an ixia_indexer consuming from librdkafka's mock cluster
 * started in this process (ixia-devkafka's code), holding the fuzz table's
 * schema. Searches run with a short deadline (query.deadline_ms) so that a
 * "sync" request waits briefly. Left out: the sockets (tests/test_hostile.c). */
#include <stdio.h>
#include <string.h>

#include "common_schema.h"
#include "devkafka.h"
#include "fuzz.h"
#include "index.h"
#include "indexer.h"
#include "server.h"
#include "wire.h"

/* Process-lifetime state, kept reachable. */
static ixia_config_t *kcfg, *cfg;
static ixia_devkafka_t *dk;
static ixia_idx_t *idx;
static ixia_indexer_t *ix;
static ThriftProcessor *proc;
static ixia_wire_limits_t lim;
static GByteArray *out;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  char *dir = ixia_fuzz_tmpdir();
  const char *ksets[] = {"devkafka.brokers=1", "devkafka.partitions=2", NULL};
  kcfg = ixia_fuzz_config(ksets);
  ixia_error_t *err = NULL;
  dk = ixia_devkafka_new(kcfg, &err);
  if (!dk) {
    fprintf(stderr, "search_frame: %s\n", err->message);
    abort();
  }
  char *brokers = g_strdup_printf("kafka.brokers=%s", ixia_devkafka_bootstraps(dk));
  char *index = g_strdup_printf("index.path=%s/index", dir);
  const char *sets[] = {brokers, index, "cache.servers=", "index.disk_reserve_mb=0",
                        "query.deadline_ms=200", "query.max_wait_ms=200",
                        "server.max_frame_bytes=1048576", NULL};
  cfg = ixia_fuzz_config(sets);
  idx = ixia_idx_open(ixia_config_str(cfg, "index.path"), cfg, &err);
  ix = idx ? ixia_indexer_new(cfg, idx, &err) : NULL;
  ixia_idx_event_t schema = {IXIA_IDX_SCHEMA, "shop", "products", "", 0, 1, FUZZ_SCHEMA,
                             strlen(FUZZ_SCHEMA), 0};
  if (!ix || !ixia_indexer_reindex(ix, &schema, 1, NULL, &err)) {
    fprintf(stderr, "search_frame: %s\n", err ? err->message : "?");
    abort();
  }
  proc = ixia_search_processor_new(ix, cfg);
  lim = ixia_wire_limits_from_config(cfg);
  out = g_byte_array_new();
  g_free(brokers);
  g_free(index);
  g_free(dir);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  while (size >= 4) {
    guint32 len = (guint32)data[0] << 24 | (guint32)data[1] << 16 | (guint32)data[2] << 8 | data[3];
    if (len > lim.max_frame || len > size - 4) break;
    g_byte_array_set_size(out, 4);
    if (!ixia_search_answer_page(proc, data + 4, len, out))
      ixia_server_serve_frame(proc, &lim, data + 4, len);
    data += 4 + len;
    size -= 4 + len;
  }
  return 0;
}
