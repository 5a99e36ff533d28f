/* The table the fuzz targets index into: one field of every type, a nested
 * path and a multi-valued field, so every typed path of the decoders is
 * reachable from the seeds. */
#ifndef IXIA_FUZZ_SCHEMA_H
#define IXIA_FUZZ_SCHEMA_H

#define FUZZ_SCHEMA                                                                        \
  "{\"namespace\":\"shop\",\"table\":\"products\",\"cache_ttl_seconds\":60,\"indexes\":[" \
  "{\"field\":\"category\",\"type\":\"keyword\"},{\"field\":\"price\",\"type\":\"double\"}," \
  "{\"field\":\"stock\",\"type\":\"long\"},{\"field\":\"title\",\"type\":\"text\",\"analyzer\":\"english\",\"positions\":true},"\
  "{\"field\":\"tags\",\"type\":\"keyword\"},{\"field\":\"active\",\"type\":\"bool\"},"   \
  "{\"field\":\"updated_at\",\"type\":\"timestamp\"},"                                    \
  "{\"field\":\"seller.country\",\"type\":\"keyword\"}]}"

#endif
