/* agg_partial: the "aggs" object of a shard's search response, the
 * partial aggregation state ixia-query-api merges from every shard. Merged
 * by ixia_aggs_merge_partial into the state of a fixed query holding every
 * aggregation kind (nested too), twice (as two shards would), then rendered
 * as the response. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "common_schema.h"
#include "fuzz.h"
#include "query.h"
#include "schema.h"

static ixia_query_t *q;
static ixia_query_limits_t lim;

static ixia_schema_t *schema;
static ixia_schema_t *lookup(const char *ns, const char *table, void *ud, ixia_error_t **err) {
  (void)ns, (void)table, (void)ud, (void)err;
  return ixia_schema_ref(schema);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* Small limits keep each input cheap (a histogram may otherwise fill up
   * to 100,000 empty buckets with their sub-aggregations: legitimate work
   * that only timed out under load); the limits' own paths stay reachable. */
  const char *sets[] = {"query.max_memory_mb=64", "query.max_exact_values=100",
                        "query.max_terms_buckets=5000", NULL};
  ixia_config_t *cfg = ixia_fuzz_config(sets);
  ixia_query_limits_from_config(cfg, &lim);
  schema = ixia_schema_parse(FUZZ_SCHEMA, strlen(FUZZ_SCHEMA), NULL);
  const char *req =
      "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":0,\"aggs\":{"
      "\"n\":{\"count\":{}},\"s\":{\"sum\":\"price\"},\"a\":{\"avg\":\"price\"},"
      "\"lo\":{\"min\":\"stock\"},\"hi\":{\"max\":\"updated_at\"},"
      "\"p\":{\"percentiles\":{\"field\":\"price\",\"percents\":[1,50,99.9]}},"
      "\"c\":{\"cardinality\":\"tags\"},"
      "\"t\":{\"terms\":{\"field\":\"category\",\"size\":3,\"aggs\":{"
      "\"m\":{\"max\":\"price\"},\"u\":{\"terms\":{\"field\":\"active\"}}}}},"
      "\"st\":{\"stats\":\"price\"},"
      "\"h\":{\"histogram\":{\"field\":\"price\",\"interval\":10,\"aggs\":{\"x\":{\"stats\":\"stock\"}}}},"
      "\"d\":{\"date_histogram\":{\"field\":\"updated_at\",\"calendar_interval\":\"month\",\"time_zone\":\"+01:00\"}},"
      "\"r\":{\"range\":{\"field\":\"stock\",\"ranges\":[{\"to\":5},{\"key\":\"many\",\"from\":5}]}},"
      "\"f\":{\"filter\":{\"filter\":{\"term\":{\"active\":true}},\"aggs\":{\"c\":{\"count\":{}}}}},"
      "\"fs\":{\"filters\":{\"filters\":{\"a\":{\"exists\":\"tags\"}},\"aggs\":{"
      "\"top\":{\"top_hits\":{\"size\":2,\"sort\":[{\"price\":\"desc\"}]}}}}},"
      "\"th\":{\"top_hits\":{\"size\":3}}}}";
  ixia_error_t *err = NULL;
  q = ixia_query_parse(req, strlen(req), lookup, NULL, &lim, &err);
  if (!q) {
    fprintf(stderr, "agg_partial: %s\n", err->message);
    abort();
  }
  ixia_config_destroy(cfg);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cJSON *partial = cJSON_ParseWithLength((const char *)data, size);
  if (!partial) return 0;
  ixia_aggs_t *a = ixia_aggs_new(q, &lim);
  if (ixia_aggs_merge_partial(a, partial, NULL) && ixia_aggs_merge_partial(a, partial, NULL))
    cJSON_Delete(ixia_aggs_result_json(a));
  ixia_aggs_destroy(a);
  cJSON_Delete(partial);
  return 0;
}
