/* query: a query request's JSON as ixia-query-api receives it in `query`
 * (and a shard in its search request's "query"). Parsed by
 * ixia_query_parse against the fuzz table's schema; a query that parses is
 * evaluated against a few fixed documents (brute force, as the differential
 * tests do) and its aggregations are fed those documents, written as a
 * shard's partial, merged back and rendered as the response. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "common_schema.h"
#include "fuzz.h"
#include "query.h"
#include "schema.h"

static ixia_schema_t *schema;
static ixia_query_limits_t lim;
static cJSON *docs[4];

static ixia_schema_t *lookup(const char *ns, const char *table, void *ud, ixia_error_t **err) {
  (void)ud;
  if (g_strcmp0(ns, "shop") || g_strcmp0(table, "products")) {
    ixia_error_set(err, IXIA_ENOTFOUND, "no table %s.%s", ns, table);
    return NULL;
  }
  return ixia_schema_ref(schema);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *sets[] = {"query.max_memory_mb=64", NULL};
  ixia_config_t *cfg = ixia_fuzz_config(sets);
  ixia_query_limits_from_config(cfg, &lim);
  schema = ixia_schema_parse(FUZZ_SCHEMA, strlen(FUZZ_SCHEMA), NULL);
  const char *d[] = {
      ("{\"category\":\"cat01\",\"price\":9.5,\"stock\":3,\"title\":\"Red Mug\",\"tags\":[\"a\",\"b\"],"
       "\"active\":true,\"updated_at\":1770000000,\"seller\":{\"country\":\"US\"}}"),
      "{\"category\":\"cat02\",\"price\":-0.0,\"stock\":-9007199254740992,\"title\":\"blue cup\"}",
      "{\"price\":1e308,\"tags\":[],\"seller\":{}}",
      "{\"category\":\"\",\"price\":[1,2,3],\"active\":false,\"updated_at\":0}",
  };
  for (guint i = 0; i < G_N_ELEMENTS(d); i++) docs[i] = cJSON_Parse(d[i]);
  ixia_config_destroy(cfg);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ixia_error_t *err = NULL;
  ixia_query_t *q = ixia_query_parse((const char *)data, size, lookup, NULL, &lim, &err);
  ixia_error_destroy(err);
  if (!q) return 0;
  ixia_aggs_t *shard = q->n_aggs ? ixia_aggs_new(q, &lim) : NULL;
  gboolean ok = TRUE;
  for (guint i = 0; i < G_N_ELEMENTS(docs); i++)
    if (ixia_query_match_doc(q, docs[i]) && shard && ok) ok = ixia_aggs_add_doc(shard, docs[i], NULL);
  if (shard && ok) {
    cJSON *partial = ixia_aggs_partial_json(shard);
    ixia_aggs_t *api = ixia_aggs_new(q, &lim);
    if (ixia_aggs_merge_partial(api, partial, NULL)) cJSON_Delete(ixia_aggs_result_json(api));
    ixia_aggs_destroy(api);
    cJSON_Delete(partial);
  }
  ixia_aggs_destroy(shard);
  ixia_query_destroy(q);
  return 0;
}
