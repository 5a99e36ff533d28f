/* wal_batch: a WalBatch as ixia-replication-sink receives it in a
 * `replicate` call: the first 8 bytes of the input are the batch's sequence
 * (big-endian), the rest its RocksDB WriteBatch bytes, decoded by
 * ixia_sink_decode into change events, which are then serialized as the
 * sink does before producing them. Left out: Kafka (the producer takes the
 * serialized bytes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "sink.h"
#include "thrift_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  ixia_config_destroy(ixia_fuzz_config(NULL));
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  guint64 seq = 0;
  for (int i = 0; i < 8; i++) seq = seq << 8 | data[i];
  ixia_sink_batch_t b = {(gint64)(seq & G_MAXINT64), data + 8, size - 8};
  ixia_error_t *err = NULL;
  gint64 last = 0;
  GPtrArray *events = ixia_sink_decode(&b, 1, 1770000000000, &last, NULL, &err);
  for (guint i = 0; events && i < events->len; i++) {
    ixia_sink_event_t *ev = g_ptr_array_index(events, i);
    GByteArray *bytes = ixia_thrift_serialize(THRIFT_STRUCT(ev->event), TRUE, NULL);
    if (bytes) g_byte_array_unref(bytes);
  }
  if (events) g_ptr_array_unref(events);
  ixia_error_destroy(err);
  return 0;
}
