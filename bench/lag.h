/* cdc-lag workload of ixia-bench; see lag.c. */
#ifndef IXIA_BENCH_LAG_H
#define IXIA_BENCH_LAG_H

#include "bench.h"

/* Puts at rate for o->seconds over o->conns connections (o->api) and
 * reads their events from o->topic at o->kafka. Prints one JSON line;
 * returns non-zero when puts failed or events went missing. */
int ixia_bench_cdc_lag(ixia_bench_opts_t *o, double rate, const char *doc_json);

#endif
