/* api_frame: what a client connection sends to ixia-query-api.
 *
 * The input is a byte stream of framed requests (4-byte big-endian length,
 * then a binary-protocol message), as on the API port; each frame goes
 * through the path a server runs: the hand-coded readers and handlers of
 * get and query (ixia_api_answer_get, ixia_api_answer_query: off an I/O
 * thread the query runs in place), and for any frame those leave,
 * ixia_server_serve_frame (message check, bounded protocol, the generated
 * processor, the real handlers), and the client's reader of get answers, over
 * a real truth store (RocksDB in a temporary directory, unsynced) holding the
 * fuzz table. Left out: the sockets (the event loop is covered by
 * tests/test_hostile.c), the cache and replication (off), and `snapshot`
 * calls, which write a checkpoint to whatever absolute path they name: the
 * harness must not write outside its sandbox. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "common_schema.h"
#include "fuzz.h"
#include "server.h"
#include "wire.h"

/* Process-lifetime state, kept reachable. */
static ixia_config_t *cfg;
static ixia_api_t *api;
static ThriftProcessor *proc;
static ixia_wire_limits_t lim;
static GByteArray *out;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  char *dir = ixia_fuzz_tmpdir();
  char *store = g_strdup_printf("store.path=%s/store", dir);
  const char *sets[] = {store, "store.sync=false", "cache.servers=", "replication.sinks=",
                        "query.indexers=", "store.disk_reserve_mb=0", "store.wal_size_limit_mb=64",
                        "server.max_frame_bytes=1048576", NULL};
  cfg = ixia_fuzz_config(sets);
  ixia_error_t *err = NULL;
  api = ixia_api_new(cfg, &err);
  if (!api || !ixia_api_apply_schema(api, FUZZ_SCHEMA, NULL, &err)) {
    fprintf(stderr, "api_frame: %s\n", err ? err->message : "?");
    abort();
  }
  proc = ixia_api_processor_new(api);
  lim = ixia_wire_limits_from_config(cfg);
  out = g_byte_array_new();
  g_free(store);
  g_free(dir);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  while (size >= 4) {
    guint32 len = (guint32)data[0] << 24 | (guint32)data[1] << 16 | (guint32)data[2] << 8 | data[3];
    if (len > lim.max_frame || len > size - 4) break; /* a server closes the connection */
    const guint8 *frame = data + 4;
    const char *name = NULL;
    guint32 name_len = 0;
    gint32 seqid;
    gboolean snapshot = ixia_wire_peek_call(frame, len, &name, &name_len, &seqid) &&
                        name_len == 8 && memcmp(name, "snapshot", 8) == 0;
    if (!snapshot) {
      g_byte_array_set_size(out, 4);
      if (!ixia_api_answer_get(proc, frame, len, out) &&
          !ixia_api_answer_query(proc, frame, len, out))
        ixia_server_serve_frame(proc, &lim, frame, len);
    }
    /* The same bytes as an answer to the client's get (its hand-coded reader). */
    gboolean found;
    gint64 version;
    const char *json;
    gsize json_len;
    if (ixia_wire_read_get_reply(frame, len, &found, &version, &json, &json_len) && json_len) {
      volatile char last = json[json_len - 1]; /* within the frame (ASan checks the read) */
      (void)last;
    }
    data += 4 + len;
    size -= 4 + len;
  }
  return 0;
}
