/* Generated data for ixia-bench: product documents and Zipf-distributed
 * key ranks.
 *
 * Documents are shaped like shared/sample-doc.json: key "p%012d", 50
 * categories (cat00..cat49), 2,000 brands, 15 countries, a price uniform in
 * [1, 500), 1-5 tags out of 300, a discount in ~20% of documents, ~1 KB
 * with the description. Document i is
 * a pure function of (i, seed), so a workload can tell which documents a
 * filter should match without reading them back.
 *
 * Thread safety: the functions are reentrant; an ixia_zipf_t is immutable
 * once built and may be shared by threads (each passes its own GRand). */
#ifndef IXIA_BENCH_DATA_H
#define IXIA_BENCH_DATA_H

#include <glib.h>

#define IXIA_BENCH_CATEGORIES 50
#define IXIA_BENCH_BRANDS 2000
#define IXIA_BENCH_PRICE_MIN 1.0
#define IXIA_BENCH_PRICE_MAX 500.0

/* Key of document i ("p%012d"), written into buf (>= 16 bytes). */
void ixia_bench_key(guint64 i, char *buf, size_t size);
/* Document i as JSON (g_malloc'd); its "key" field is key, or document i's
 * key when key is NULL. `variant` changes price and stock, as an update of
 * the same product would. */
char *ixia_bench_doc(guint64 i, guint32 seed, guint32 variant, const char *key);

/* Zipf over ranks 0..n-1 with exponent theta (0.99 as in YCSB): rank r has
 * probability proportional to 1 / (r + 1)^theta. Built as a cumulative
 * table (8 bytes per rank), sampled by binary search. */
typedef struct ixia_zipf ixia_zipf_t;
ixia_zipf_t *ixia_zipf_new(guint64 n, double theta);
void ixia_zipf_destroy(ixia_zipf_t *z);
guint64 ixia_zipf_rank(const ixia_zipf_t *z, GRand *rnd);
/* Probability of rank r, for tests. */
double ixia_zipf_p(const ixia_zipf_t *z, guint64 r);
/* A key index for a rank: a fixed permutation of 0..n-1, so that the hot
 * keys are spread over the key space rather than all at its start. */
guint64 ixia_zipf_key(const ixia_zipf_t *z, guint64 rank);

#endif
