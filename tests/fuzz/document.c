/* document: a document's JSON as ixia-query-api receives it in a write.
 * Validated as the write path does (size and nesting limits, a JSON object,
 * the declared fields' types against the fuzz table's schema), then every
 * declared field's values are extracted and encoded as the index does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "common_schema.h"
#include "fuzz.h"
#include "json.h"
#include "query.h"
#include "schema.h"

static ixia_schema_t *schema;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  ixia_config_destroy(ixia_fuzz_config(NULL));
  schema = ixia_schema_parse(FUZZ_SCHEMA, strlen(FUZZ_SCHEMA), NULL);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const ixia_json_limits_t jl = {1 << 20, "limits.max_doc_bytes", 32, "limits.max_json_depth"};
  ixia_error_t *err = NULL;
  cJSON *doc = ixia_json_parse_object((const char *)data, size, &jl, "document", &err);
  if (doc && ixia_schema_check_doc(schema, doc, &err)) {
    GPtrArray *vals = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    for (guint i = 0; i < schema->n_indexes; i++) {
      g_ptr_array_set_size(vals, 0);
      ixia_error_t *e = NULL;
      ixia_doc_values(doc, &schema->indexes[i], vals, &e);
      ixia_error_destroy(e);
    }
    g_ptr_array_unref(vals);
    char *text = ixia_json_print(doc);
    g_free(text);
  }
  ixia_error_destroy(err);
  cJSON_Delete(doc);
  return 0;
}
