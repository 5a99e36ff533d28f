/* Generated benchmark data (data.h): documents and Zipf key ranks.
 *
 * Every document is a pure function of (index, seed), drawn from a
 * splitmix64 stream without allocation, so a load generator can rebuild any
 * document it wrote and a checker can tell what a key must hold. Zipf ranks
 * come from a precomputed CDF searched by bisection, then mapped to keys by
 * a stride coprime with n, so hot keys are spread over the key space rather
 * than clustered at its start. */
#include "data.h"

#include <math.h>
#include <stdio.h>

/* splitmix64: a whole document from one 64-bit seed, no allocation (a GRand
 * per document would cost more than the document). */
static guint64 mix_next(guint64 *s) {
  guint64 z = (*s += G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static guint32 mix_below(guint64 *s, guint32 n) { return (guint32)(mix_next(s) % n); }
static double mix_unit(guint64 *s) { return (double)(mix_next(s) >> 11) / 9007199254740992.0; }

static const char *const COUNTRIES[] = {"US", "CA", "MX", "GB", "DE", "FR", "ES", "IT",
                                        "NL", "SE", "PL", "JP", "KR", "AU", "BR"};
static const char *const WORDS[] = {"red",   "blue", "green", "small", "large", "light",
                                    "heavy", "smart", "mini", "pro",   "eco",   "basic",
                                    "classic", "modern", "soft", "hard", "ultra"};
#define N_WORDS G_N_ELEMENTS(WORDS)
#define DESCRIPTION_WORDS 130

void ixia_bench_key(guint64 i, char *buf, size_t size) {
  snprintf(buf, size, "p%012" G_GUINT64_FORMAT, i);
}

char *ixia_bench_doc(guint64 i, guint32 seed, guint32 variant, const char *key) {
  guint64 s = i * G_GUINT64_CONSTANT(0x100000001b3) ^ ((guint64)seed << 32);
  guint64 v = s ^ ((guint64)variant * G_GUINT64_CONSTANT(0x2545f4914f6cdd1d));
  GString *d = g_string_sized_new(1100);
  char own[32];
  if (!key) {
    ixia_bench_key(i, own, sizeof own);
    key = own;
  }
  g_string_append_printf(d, "{\"key\":\"%s\",\"title\":\"%s %s %s %s\"", key,
                         WORDS[mix_below(&s, N_WORDS)], WORDS[mix_below(&s, N_WORDS)],
                         WORDS[mix_below(&s, N_WORDS)], WORDS[mix_below(&s, N_WORDS)]);
  guint32 category = mix_below(&s, IXIA_BENCH_CATEGORIES);
  guint32 brand = mix_below(&s, IXIA_BENCH_BRANDS);
  const char *country = COUNTRIES[mix_below(&s, G_N_ELEMENTS(COUNTRIES))];
  double price = IXIA_BENCH_PRICE_MIN +
                 mix_unit(variant ? &v : &s) * (IXIA_BENCH_PRICE_MAX - IXIA_BENCH_PRICE_MIN);
  g_string_append_printf(d,
                         ",\"category\":\"cat%02u\",\"brand\":\"brand%04u\",\"country\":\"%s\","
                         "\"price\":%.2f,\"stock\":%u,\"rating\":%.1f,\"tags\":[",
                         category, brand, country, floor(price * 100) / 100,
                         mix_below(variant ? &v : &s, 1000), 1 + mix_unit(&s) * 4);
  guint32 ntags = 1 + mix_below(&s, 5);
  for (guint32 t = 0; t < ntags; t++)
    g_string_append_printf(d, "%s\"t%03u\"", t ? "," : "", mix_below(&s, 300));
  g_string_append_c(d, ']');
  if (mix_below(&s, 5) == 0) g_string_append_printf(d, ",\"discount\":%u", 5 + mix_below(&s, 40));
  g_string_append_printf(d, ",\"updated_at\":%u,\"description\":\"",
                         1760000000u + mix_below(&s, 10000000) + variant);
  for (int w = 0; w < DESCRIPTION_WORDS; w++) {
    if (w) g_string_append_c(d, ' ');
    g_string_append(d, WORDS[mix_below(&s, N_WORDS)]);
  }
  g_string_append(d, "\"}");
  return g_string_free(d, FALSE);
}

struct ixia_zipf {
  guint64 n;
  double *cdf; /* cdf[r] = P(rank <= r) */
  guint64 stride; /* coprime with n: rank -> key permutation */
};

static guint64 gcd64(guint64 a, guint64 b) {
  while (b) {
    guint64 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

ixia_zipf_t *ixia_zipf_new(guint64 n, double theta) {
  g_return_val_if_fail(n > 0, NULL);
  ixia_zipf_t *z = g_new0(ixia_zipf_t, 1);
  z->n = n;
  z->cdf = g_new(double, n);
  double sum = 0;
  for (guint64 r = 0; r < n; r++) {
    sum += 1.0 / pow((double)(r + 1), theta);
    z->cdf[r] = sum;
  }
  for (guint64 r = 0; r < n; r++) z->cdf[r] /= sum;
  z->cdf[n - 1] = 1.0;
  /* A large odd stride near n * golden ratio, nudged until coprime. */
  z->stride = (guint64)((double)n * 0.6180339887) | 1;
  while (n > 1 && gcd64(z->stride, n) != 1) z->stride += 2;
  return z;
}

void ixia_zipf_destroy(ixia_zipf_t *z) {
  if (!z) return;
  g_free(z->cdf);
  g_free(z);
}

guint64 ixia_zipf_rank(const ixia_zipf_t *z, GRand *rnd) {
  double u = g_rand_double(rnd);
  guint64 lo = 0, hi = z->n - 1;
  while (lo < hi) {
    guint64 mid = lo + (hi - lo) / 2;
    if (z->cdf[mid] > u)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

double ixia_zipf_p(const ixia_zipf_t *z, guint64 r) {
  return r == 0 ? z->cdf[0] : z->cdf[r] - z->cdf[r - 1];
}

guint64 ixia_zipf_key(const ixia_zipf_t *z, guint64 rank) {
  return (guint64)(((unsigned __int128)rank * z->stride) % z->n);
}
