/* A latency histogram in the style of HdrHistogram: log-linear buckets over
 * microseconds, so memory is fixed (about 20 KiB) whatever the sample count
 * and percentiles carry a bounded relative error.
 *
 * Layout: values below 256 us have one bucket each (exact); above, every
 * power of two [2^k, 2^(k+1)) is split into 128 equal buckets, so a bucket
 * is at most 1/128 (0.8%) of its values wide. The range is 0 us to
 * IXIA_HDR_MAX_US (60 s); larger values are counted in the top bucket and
 * reported in `clamped`. min, max and mean are exact.
 *
 * Thread safety: none; give each thread its own histogram and merge them
 * (ixia_hdr_merge) once the threads are done. */
#ifndef IXIA_BENCH_HDR_H
#define IXIA_BENCH_HDR_H

#include <glib.h>

#define IXIA_HDR_MAX_US G_GINT64_CONSTANT(60000000)

typedef struct ixia_hdr ixia_hdr_t;

ixia_hdr_t *ixia_hdr_new(void);
void ixia_hdr_destroy(ixia_hdr_t *h);

/* Records one value in microseconds; negative values count as 0. */
void ixia_hdr_record(ixia_hdr_t *h, gint64 us);
/* Adds every sample of from into into (from is unchanged). */
void ixia_hdr_merge(ixia_hdr_t *into, const ixia_hdr_t *from);

guint64 ixia_hdr_count(const ixia_hdr_t *h);
guint64 ixia_hdr_clamped(const ixia_hdr_t *h);
/* 0 when empty. */
gint64 ixia_hdr_min(const ixia_hdr_t *h);
gint64 ixia_hdr_max(const ixia_hdr_t *h);
double ixia_hdr_mean(const ixia_hdr_t *h);

/* The value at percentile p (0..100): the highest value of the bucket
 * holding the sample of rank ceil(p/100 * count) (rank 1 for p = 0),
 * clamped to [min, max]; 0 when empty. It is >= that sample and exceeds it
 * by less than the bucket width (< 1/128 of it above 256 us). */
gint64 ixia_hdr_value_at(const ixia_hdr_t *h, double p);

/* The bucket bounds of a value, for tests: [*lo, *hi] holds v. */
void ixia_hdr_bucket_bounds(gint64 v, gint64 *lo, gint64 *hi);

#endif
