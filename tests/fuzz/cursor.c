/* cursor: the "after" value of a query request, the opaque cursor a
 * previous response's "next" gave (or anything a client sends instead).
 * The first input byte picks the number of index shards (1-8), the rest is
 * the cursor text, decoded by the query API's cursor decoder; a cursor that
 * decodes is encoded again and must come back the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "search.h"

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
  if (ixia_search_cursor_decode(shards, after, pos, &err)) {
    char *again = ixia_search_cursor_encode(shards, pos);
    gint64 back[8];
    if (!ixia_search_cursor_decode(shards, again, back, NULL) ||
        memcmp(pos, back, shards * sizeof pos[0]) != 0)
      abort(); /* encode and decode disagree */
    g_free(again);
  }
  ixia_error_destroy(err);
  g_free(after);
  return 0;
}
