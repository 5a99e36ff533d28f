/* hit_page: a page of hits as an index shard answers search_page
 * (common/hitpage.h), which ixia-query-api reads in place. Opened and read
 * to its end as the API reads it: every hit's key (as a C string), its
 * sort values, its score, then the page's JSON object; a page that reads
 * to its end must have used every byte before the object. */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "fuzz.h"
#include "hitpage.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  return 0;
}

/* Where the values' bytes go, so that reading them is not optimised away. */
static volatile gsize sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ixia_hitpage_t pg;
  const char *meta;
  gsize meta_len;
  if (!ixia_hitpage_open(&pg, data, size, &meta, &meta_len)) return 0;
  ixia_hitpage_hit_t h;
  int r;
  gsize sum = 0;
  while ((r = ixia_hitpage_next(&pg, &h)) > 0) {
    if (strlen(h.key) != h.key_len) abort(); /* a key is whole, NUL-terminated */
    const guint8 *p = h.sort, *v;
    gsize len;
    for (guint k = 0; k < h.n_sort; k++)
      if (ixia_hitpage_value(&p, &v, &len))
        for (gsize i = 0; i < len; i++) sum += v[i];
  }
  if (r == 0 && pg.p != (const guint8 *)meta) abort(); /* ended before the object */
  cJSON_Delete(cJSON_ParseWithLength(meta, meta_len));
  sink = sum;
  return 0;
}
