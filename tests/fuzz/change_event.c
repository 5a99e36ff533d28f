/* change_event: a Kafka message value as ixia-indexer reads it.
 *
 * Decoded exactly as the consumer does (compact protocol through the bounded
 * protocols of common/wire.c, then ixia_indexer_event_from_thrift) and, when
 * it is an event, applied to a real index shard (RocksDB in a temporary
 * directory) that holds the fuzz table's schema, so documents inside events
 * reach the indexing code. Left out: Kafka itself (the consumer hands the
 * payload bytes over unchanged). */
#include <stdio.h>
#include <string.h>

#include "common_schema.h"
#include "fuzz.h"
#include "index.h"
#include "indexer.h"
#include "thrift_util.h"

static ixia_config_t *cfg; /* process lifetime, kept reachable */
static ixia_idx_t *idx;

static void on_failed(const ixia_idx_event_t *ev, const ixia_error_t *why, void *ud) {
  (void)ev, (void)why, (void)ud;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  char *dir = ixia_fuzz_tmpdir();
  char *index = g_strdup_printf("%s/index", dir);
  const char *sets[] = {"index.disk_reserve_mb=0", "index.write_buffer_mb=8", NULL};
  cfg = ixia_fuzz_config(sets);
  ixia_error_t *err = NULL;
  idx = ixia_idx_open(index, cfg, &err);
  ixia_idx_event_t schema = {IXIA_IDX_SCHEMA, "shop", "products", "", 0, 1, FUZZ_SCHEMA,
                             strlen(FUZZ_SCHEMA), 0};
  if (!idx || !ixia_idx_apply(idx, &schema, 1, NULL, 0, on_failed, NULL, NULL, &err)) {
    fprintf(stderr, "change_event: %s\n", err ? err->message : "?");
    abort();
  }
  g_free(index);
  g_free(dir);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ixia_thrift_init();
  IxiaChangeEvent *e = g_object_new(IXIA_TYPE_CHANGE_EVENT, NULL);
  ixia_error_t *err = NULL;
  ixia_idx_event_t ev;
  if (ixia_thrift_deserialize(THRIFT_STRUCT(e), data, size, TRUE, &err) &&
      ixia_indexer_event_from_thrift(e, &ev, &err)) {
    if (!ixia_idx_apply(idx, &ev, 1, NULL, 0, on_failed, NULL, NULL, &err)) abort();
  }
  ixia_error_destroy(err);
  g_object_unref(e);
  return 0;
}
