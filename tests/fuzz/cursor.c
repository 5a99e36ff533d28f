/* cursor: the "after" value of a query request, the opaque cursor a
 * previous response's "next" gave (or anything a client sends instead).
 * The first input byte picks the number of index shards (1-8), the rest is
 * the cursor text, decoded by the query API's cursor decoders (the
 * unsorted "c1:" and the sorted "s1:"); a cursor that decodes is encoded
 * again and must come back the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fanout.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  ixia_config_destroy(ixia_fuzz_config(NULL));
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  guint shards = 1 + data[0] % 8;
  char *after = ixia_fuzz_text(data + 1, size - 1);
  gint64 pos[8];
  ixia_error_t *err = NULL;
  if (ixia_fanout_cursor_decode(shards, after, pos, &err)) {
    char *again = ixia_fanout_cursor_encode(shards, pos);
    gint64 back[8];
    if (!ixia_fanout_cursor_decode(shards, again, back, NULL) ||
        memcmp(pos, back, shards * sizeof pos[0]) != 0)
      abort(); /* encode and decode disagree */
    g_free(again);
  }
  ixia_error_destroy(err);
  err = NULL;
  /* The sorted cursor: the signature, shard and value counts it claims are
   * taken as the query's, so decoding goes past those checks. */
  if (g_str_has_prefix(after, "s1:")) {
    gsize n = 0;
    guchar *raw = g_base64_decode(after + 3, &n);
    if (raw && n >= 6) {
      guint32 sig = (guint32)raw[0] << 24 | (guint32)raw[1] << 16 | (guint32)raw[2] << 8 | raw[3];
      guint ns = (guint)raw[4] << 8 | raw[5];
      gsize at = 6 + 16 * (gsize)ns;
      guint nv = at < n ? raw[at] : 0;
      ixia_sort_cursor_t c;
      if (ns >= 1 && ns <= 64 && ixia_fanout_sort_cursor_decode(after, ns, nv, sig, &c, &err)) {
        char *again = ixia_fanout_sort_cursor_encode(&c);
        if (strcmp(again, after) != 0) {
          /* base64 may be spelled differently; the bytes must agree */
          ixia_sort_cursor_t d;
          if (!ixia_fanout_sort_cursor_decode(again, ns, nv, sig, &d, NULL) || d.key_len != c.key_len ||
              memcmp(d.key, c.key, c.key_len) != 0 || memcmp(d.seq, c.seq, ns * 8) != 0)
            abort();
          ixia_sort_cursor_clear(&d);
        }
        g_free(again);
        ixia_sort_cursor_clear(&c);
      }
      ixia_error_destroy(err);
    }
    g_free(raw);
  }
  g_free(after);
  return 0;
}
