/* schema: a table schema's JSON as ixia-query-api receives it in
 * `applySchema` (and an indexer in a SCHEMA event). Parsed by
 * ixia_schema_parse; a schema that parses is checked as an evolution of the
 * fuzz table's schema and of itself, and checked against a document. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "common_schema.h"
#include "fuzz.h"
#include "schema.h"

static ixia_schema_t *base;
static cJSON *doc;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  ixia_config_destroy(ixia_fuzz_config(NULL));
  base = ixia_schema_parse(FUZZ_SCHEMA, strlen(FUZZ_SCHEMA), NULL);
  doc = cJSON_Parse("{\"category\":\"c\",\"price\":1.5,\"a\":{\"b\":[1,\"x\",{\"c\":null}]}}");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ixia_error_t *err = NULL;
  ixia_schema_t *s = ixia_schema_parse((const char *)data, size, &err);
  ixia_error_destroy(err), err = NULL;
  if (!s) return 0;
  ixia_schema_check_evolution(base, s, &err);
  ixia_error_destroy(err), err = NULL;
  ixia_schema_check_evolution(s, s, &err);
  ixia_error_destroy(err), err = NULL;
  ixia_schema_check_doc(s, doc, &err);
  ixia_error_destroy(err);
  ixia_schema_unref(s);
  return 0;
}
