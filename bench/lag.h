/* cdc-lag workload of ixia-bench; see lag.c. */
#ifndef IXIA_BENCH_LAG_H
#define IXIA_BENCH_LAG_H

/* Prints one JSON line; returns non-zero when puts failed or events went
 * missing. */
int ixia_bench_cdc_lag(const char *api, const char *brokers, const char *topic, double rate,
                       double seconds, int conns, const char *doc_json);

#endif
