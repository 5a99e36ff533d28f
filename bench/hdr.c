/* The latency histogram (hdr.h): log-linear buckets over microseconds.
 *
 * A record is a bucket index computed from the value's highest bit and an
 * increment, so recording costs no allocation and no lock (each thread keeps
 * its own histogram and the runner merges them). Percentiles walk the
 * buckets once and report a bucket's upper bound, which is what bounds the
 * relative error stated in hdr.h. */
#include "hdr.h"

#include <math.h>

/* Sub-buckets per power of two; values below 2 * SUB are exact. */
#define SUB_BITS 7
#define SUB (1 << SUB_BITS)
/* Highest power of two holding IXIA_HDR_MAX_US (60e6 < 2^26). */
#define TOP_POW 25
#define N_BUCKETS (2 * SUB + (TOP_POW - SUB_BITS) * SUB)

struct ixia_hdr {
  guint64 counts[N_BUCKETS];
  guint64 count, clamped;
  gint64 min, max;
  double sum;
};

static guint bucket_of(gint64 v) {
  if (v < 2 * SUB) return (guint)v;
  int k = 63 - __builtin_clzll((unsigned long long)v); /* k >= SUB_BITS + 1 */
  int shift = k - SUB_BITS;
  return (guint)(2 * SUB + (k - SUB_BITS - 1) * SUB + ((v >> shift) - SUB));
}

static void bounds_of(guint b, gint64 *lo, gint64 *hi) {
  if (b < 2 * SUB) {
    *lo = *hi = b;
    return;
  }
  guint rel = b - 2 * SUB;
  int shift = (int)(rel / SUB) + 1;
  gint64 sub = SUB + rel % SUB;
  *lo = sub << shift;
  *hi = ((sub + 1) << shift) - 1;
}

void ixia_hdr_bucket_bounds(gint64 v, gint64 *lo, gint64 *hi) {
  bounds_of(bucket_of(CLAMP(v, 0, IXIA_HDR_MAX_US)), lo, hi);
}

ixia_hdr_t *ixia_hdr_new(void) { return g_new0(ixia_hdr_t, 1); }

void ixia_hdr_destroy(ixia_hdr_t *h) { g_free(h); }

void ixia_hdr_record(ixia_hdr_t *h, gint64 us) {
  if (us < 0) us = 0;
  if (h->count == 0 || us < h->min) h->min = us;
  if (us > h->max) h->max = us;
  h->sum += (double)us;
  h->count++;
  if (us > IXIA_HDR_MAX_US) {
    h->clamped++;
    us = IXIA_HDR_MAX_US;
  }
  h->counts[bucket_of(us)]++;
}

void ixia_hdr_merge(ixia_hdr_t *into, const ixia_hdr_t *from) {
  if (from->count == 0) return;
  for (guint i = 0; i < N_BUCKETS; i++) into->counts[i] += from->counts[i];
  into->min = into->count ? MIN(into->min, from->min) : from->min;
  into->max = MAX(into->max, from->max);
  into->sum += from->sum;
  into->count += from->count;
  into->clamped += from->clamped;
}

guint64 ixia_hdr_count(const ixia_hdr_t *h) { return h->count; }
guint64 ixia_hdr_clamped(const ixia_hdr_t *h) { return h->clamped; }
gint64 ixia_hdr_min(const ixia_hdr_t *h) { return h->count ? h->min : 0; }
gint64 ixia_hdr_max(const ixia_hdr_t *h) { return h->max; }
double ixia_hdr_mean(const ixia_hdr_t *h) { return h->count ? h->sum / (double)h->count : 0; }

gint64 ixia_hdr_value_at(const ixia_hdr_t *h, double p) {
  if (h->count == 0) return 0;
  p = CLAMP(p, 0.0, 100.0);
  guint64 rank = (guint64)ceil(p / 100.0 * (double)h->count);
  rank = CLAMP(rank, 1, h->count);
  guint64 seen = 0;
  for (guint b = 0; b < N_BUCKETS; b++) {
    seen += h->counts[b];
    if (seen >= rank) {
      gint64 lo, hi;
      bounds_of(b, &lo, &hi);
      return CLAMP(hi, h->min, h->max);
    }
  }
  return h->max;
}
