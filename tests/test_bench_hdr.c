/* Unit tests of ixia-bench's histogram, generators and answer reader:
 * percentiles against exact sorted samples, merging, Zipf frequencies,
 * document shape, answers read as text against cJSON's tree, the machine
 * figures beside a result (parsed text, and a real run in which more
 * threads spin than there are CPUs), answers cut from received bytes for
 * each wire, and the event-driven driver against a real memcached, closed
 * loop and open (--rate: every request due is sent, and timed from when it
 * was due). */
#include <cjson/cJSON.h>
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>

#include "answer.h"
#include "bench.h"
#include "data.h"
#include "hdr.h"
#include "machine.h"
#include "support.h"

static int cmp_i64(gconstpointer a, gconstpointer b) {
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
  return (x > y) - (x < y);
}

/* The exact percentile under the histogram's rank rule. */
static gint64 exact_at(GArray *sorted, double p) {
  guint64 rank = (guint64)ceil(p / 100.0 * sorted->len);
  rank = CLAMP(rank, 1, sorted->len);
  return g_array_index(sorted, gint64, rank - 1);
}

/* Every reported percentile lies in [exact, exact + bucket width): never
 * below the true sample, and above it by less than 1/128 of it (or exactly
 * equal below 256 us). */
static void check_against_exact(ixia_hdr_t *h, GArray *samples) {
  g_array_sort(samples, cmp_i64);
  static const double pcts[] = {0, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100};
  for (guint i = 0; i < G_N_ELEMENTS(pcts); i++) {
    gint64 exact = exact_at(samples, pcts[i]), got = ixia_hdr_value_at(h, pcts[i]);
    CU_ASSERT(got >= exact);
    if (exact < 256) {
      CU_ASSERT_EQUAL(got, exact);
    } else {
      CU_ASSERT((double)(got - exact) <= (double)exact / 128.0);
    }
  }
  CU_ASSERT_EQUAL(ixia_hdr_count(h), samples->len);
  CU_ASSERT_EQUAL(ixia_hdr_min(h), g_array_index(samples, gint64, 0));
  CU_ASSERT_EQUAL(ixia_hdr_max(h), g_array_index(samples, gint64, samples->len - 1));
}

static void test_percentiles_match_sorted_samples(void) {
  GRand *rnd = g_rand_new_with_seed(7);
  /* Log-uniform from 1 us to ~60 s: every bucket size gets used. */
  ixia_hdr_t *h = ixia_hdr_new();
  GArray *samples = g_array_new(FALSE, FALSE, sizeof(gint64));
  double sum = 0;
  for (int i = 0; i < 200000; i++) {
    gint64 v = (gint64)exp(g_rand_double_range(rnd, 0, log(6e7)));
    ixia_hdr_record(h, v);
    g_array_append_val(samples, v);
    sum += (double)v;
  }
  check_against_exact(h, samples);
  CU_ASSERT_DOUBLE_EQUAL(ixia_hdr_mean(h), sum / samples->len, 1e-6 * sum / samples->len);
  ixia_hdr_destroy(h);
  g_array_free(samples, TRUE);
  g_rand_free(rnd);
}

static void test_latency_shaped_and_small(void) {
  /* A typical latency distribution: a mode near 500 us and a long tail. */
  GRand *rnd = g_rand_new_with_seed(11);
  ixia_hdr_t *h = ixia_hdr_new();
  GArray *samples = g_array_new(FALSE, FALSE, sizeof(gint64));
  for (int i = 0; i < 50000; i++) {
    gint64 v = 300 + (gint64)g_rand_int_range(rnd, 0, 400);
    if (g_rand_int_range(rnd, 0, 100) == 0) v *= 50;
    ixia_hdr_record(h, v);
    g_array_append_val(samples, v);
  }
  check_against_exact(h, samples);
  ixia_hdr_destroy(h);
  g_array_free(samples, TRUE);
  /* Three samples: p50 is the middle one, exactly (small values are exact). */
  h = ixia_hdr_new();
  ixia_hdr_record(h, 30);
  ixia_hdr_record(h, 10);
  ixia_hdr_record(h, 20);
  CU_ASSERT_EQUAL(ixia_hdr_value_at(h, 50), 20);
  CU_ASSERT_EQUAL(ixia_hdr_value_at(h, 0), 10);
  CU_ASSERT_EQUAL(ixia_hdr_value_at(h, 100), 30);
  ixia_hdr_destroy(h);
  g_rand_free(rnd);
}

static void test_empty_negative_and_clamped(void) {
  ixia_hdr_t *h = ixia_hdr_new();
  CU_ASSERT_EQUAL(ixia_hdr_value_at(h, 99), 0);
  CU_ASSERT_EQUAL(ixia_hdr_count(h), 0);
  ixia_hdr_record(h, -5);
  CU_ASSERT_EQUAL(ixia_hdr_min(h), 0);
  ixia_hdr_record(h, 2 * IXIA_HDR_MAX_US);
  CU_ASSERT_EQUAL(ixia_hdr_clamped(h), 1);
  CU_ASSERT_EQUAL(ixia_hdr_max(h), 2 * IXIA_HDR_MAX_US);
  /* The clamped sample sits in the top bucket, which ends past 60 s. */
  CU_ASSERT(ixia_hdr_value_at(h, 100) >= IXIA_HDR_MAX_US);
  ixia_hdr_destroy(h);
  ixia_hdr_destroy(NULL);
}

static void test_merge_equals_single_histogram(void) {
  GRand *rnd = g_rand_new_with_seed(3);
  ixia_hdr_t *parts[4], *all = ixia_hdr_new(), *merged = ixia_hdr_new();
  for (int p = 0; p < 4; p++) parts[p] = ixia_hdr_new();
  GArray *samples = g_array_new(FALSE, FALSE, sizeof(gint64));
  for (int i = 0; i < 40000; i++) {
    /* Each part has its own range, so the merge must interleave them. */
    int p = i % 4;
    gint64 v = (gint64)g_rand_int_range(rnd, 1, 1000) * (p * 100 + 1);
    ixia_hdr_record(parts[p], v);
    ixia_hdr_record(all, v);
    g_array_append_val(samples, v);
  }
  for (int p = 0; p < 4; p++) ixia_hdr_merge(merged, parts[p]);
  for (double q = 0; q <= 100; q += 0.5)
    CU_ASSERT_EQUAL(ixia_hdr_value_at(merged, q), ixia_hdr_value_at(all, q));
  CU_ASSERT_EQUAL(ixia_hdr_min(merged), ixia_hdr_min(all));
  CU_ASSERT_EQUAL(ixia_hdr_max(merged), ixia_hdr_max(all));
  check_against_exact(merged, samples);
  for (int p = 0; p < 4; p++) ixia_hdr_destroy(parts[p]);
  ixia_hdr_destroy(all);
  ixia_hdr_destroy(merged);
  g_array_free(samples, TRUE);
  g_rand_free(rnd);
}

static void test_bucket_bounds(void) {
  gint64 lo, hi;
  ixia_hdr_bucket_bounds(255, &lo, &hi);
  CU_ASSERT(lo == 255 && hi == 255);
  ixia_hdr_bucket_bounds(256, &lo, &hi);
  CU_ASSERT(lo == 256 && hi == 257);
  ixia_hdr_bucket_bounds(1000000, &lo, &hi);
  CU_ASSERT(lo <= 1000000 && hi >= 1000000 && hi - lo + 1 <= 1000000 / 128 + 1);
}

static void test_zipf_frequencies(void) {
  const guint64 n = 1000;
  ixia_zipf_t *z = ixia_zipf_new(n, 0.99);
  GRand *rnd = g_rand_new_with_seed(5);
  guint64 counts[1000] = {0};
  const int draws = 200000;
  for (int i = 0; i < draws; i++) {
    guint64 r = ixia_zipf_rank(z, rnd);
    CU_ASSERT_FATAL(r < n);
    counts[r]++;
  }
  /* Rank 0 is drawn with probability 1 / H(n, 0.99): within 5%. */
  double h = 0;
  for (guint64 r = 1; r <= n; r++) h += 1.0 / pow((double)r, 0.99);
  CU_ASSERT_DOUBLE_EQUAL(ixia_zipf_p(z, 0), 1.0 / h, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL((double)counts[0] / draws, 1.0 / h, 0.05 / h);
  /* Rank 9 is ten times rarer (to 0.99): within 10%. */
  CU_ASSERT_DOUBLE_EQUAL((double)counts[9] / draws, pow(10, -0.99) / h, 0.1 * pow(10, -0.99) / h);
  /* The rank -> key map is a permutation. */
  gboolean *seen = g_new0(gboolean, n);
  for (guint64 r = 0; r < n; r++) {
    guint64 k = ixia_zipf_key(z, r);
    CU_ASSERT_FATAL(k < n);
    CU_ASSERT_FALSE(seen[k]);
    seen[k] = TRUE;
  }
  g_free(seen);
  g_rand_free(rnd);
  ixia_zipf_destroy(z);
  ixia_zipf_destroy(NULL);
}

static void test_doc_shape(void) {
  GHashTable *cats = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  gsize bytes = 0;
  double below = 0;
  const int n = 5000;
  for (int i = 0; i < n; i++) {
    char *doc = ixia_bench_doc((guint64)i, 42, 0, NULL);
    bytes += strlen(doc);
    cJSON *o = cJSON_Parse(doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    char key[32];
    ixia_bench_key((guint64)i, key, sizeof key);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(o, "key")), key);
    g_hash_table_add(cats, g_strdup(cJSON_GetStringValue(cJSON_GetObjectItem(o, "category"))));
    double price = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "price"));
    CU_ASSERT(price >= IXIA_BENCH_PRICE_MIN && price < IXIA_BENCH_PRICE_MAX);
    below += price < 150.7;
    int tags = cJSON_GetArraySize(cJSON_GetObjectItem(o, "tags"));
    CU_ASSERT(tags >= 1 && tags <= 5);
    /* Deterministic: the same document again. */
    char *again = ixia_bench_doc((guint64)i, 42, 0, NULL);
    CU_ASSERT_STRING_EQUAL(doc, again);
    g_free(again);
    cJSON_Delete(o);
    g_free(doc);
  }
  CU_ASSERT_EQUAL(g_hash_table_size(cats), IXIA_BENCH_CATEGORIES);
  CU_ASSERT(bytes / n > 800 && bytes / n < 1300);
  /* agg's filter (price < 150.7) matches ~30%. */
  CU_ASSERT_DOUBLE_EQUAL(below / n, 0.30, 0.03);
  char *custom = ixia_bench_doc(1, 42, 3, "fresh-1");
  CU_ASSERT_PTR_NOT_NULL(strstr(custom, "\"key\":\"fresh-1\""));
  g_free(custom);
  g_hash_table_destroy(cats);
}

/* A timed query's answer, read as text, says what cJSON's tree of it says;
 * anything else is refused. */
static void test_answer_read(void) {
  static const struct {
    const char *json;
    gboolean ok;
    guint hits;
    double total, took;
  } cases[] = {
      {"{\"hits\":[{\"key\":\"a\",\"fields\":{\"title\":\"x, [y]\"}},{\"key\":\"b\"}],"
       "\"total\":1021,\"total_relation\":\"eq\",\"took_ms\":0.607}",
       TRUE, 2, 1021, 0.607},
      {" { \"took_ms\" : 2 , \"total\" : 1e4 , \"hits\" : [ ] } ", TRUE, 0, 10000, 2},
      {"{\"hits\":[],\"total\":0}", TRUE, 0, 0, 0},
      {"{\"total\":5}", FALSE, 0, 0, 0},                               /* no hits */
      {"{\"hits\":[]}", FALSE, 0, 0, 0},                               /* no total */
      {"{\"hits\":[1,2],\"total\":2}", FALSE, 0, 0, 0},              /* a hit that is no object */
      {"{\"hits\":{},\"total\":2}", FALSE, 0, 0, 0},                 /* hits not an array */
      {"{\"hits\":[],\"total\":\"7\"}", FALSE, 0, 0, 0},           /* total a string */
      {"{\"hits\":[],\"total\":7x}", FALSE, 0, 0, 0},                /* a bad number */
      {"{\"hits\":[],\"hits\":[{}],\"total\":1}", FALSE, 0, 0, 0}, /* hits twice */
      {"{\"hits\":[{}],\"total\":1", FALSE, 0, 0, 0},                /* cut short */
      {"{\"hits\":[],\"total\":0x10}", FALSE, 0, 0, 0},            /* not JSON's numbers */
      {"{\"hits\":[],\"total\":inf}", FALSE, 0, 0, 0},
      {"{\"hits\":[],\"total\":+1}", FALSE, 0, 0, 0},
      {"{\"hits\":[],\"total\":1,\"took_ms\":1,\"took_ms\":2}", FALSE, 0, 0, 0},
      {"{\"hits\":[],\"total\":-0.5e1,\"took_ms\":1E-3}", TRUE, 0, -5, 0.001},
      {"{\"hits\":[{}],\"total\":1,\"next\":[}", FALSE, 0, 0, 0},      /* broken after the hits */
      {"{\"hits\":[{\"a\":\"]\"}] ,\"total\":1}", TRUE, 1, 1, 0},      /* a bracket in a hit's string */
      {"[]", FALSE, 0, 0, 0},
      {"", FALSE, 0, 0, 0},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    ixia_bench_answer_t a;
    gboolean ok = ixia_bench_answer_read(cases[i].json, &a);
    CU_ASSERT_EQUAL(ok, cases[i].ok);
    if (!ok || !cases[i].ok) continue;
    cJSON *tree = cJSON_Parse(cases[i].json);
    CU_ASSERT_EQUAL(a.hits, (guint)cJSON_GetArraySize(cJSON_GetObjectItem(tree, "hits")));
    CU_ASSERT_EQUAL(a.hits, cases[i].hits);
    CU_ASSERT_DOUBLE_EQUAL(a.total, cases[i].total, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(a.took_ms, cases[i].took, 1e-9);
    cJSON_Delete(tree);
  }
}

static void test_machine_parsers(void) {
  guint64 busy = 0, total = 0, some = 0;
  CU_ASSERT_TRUE(ixia_bench_parse_stat("cpu  100 5 50 800 20 3 2 1 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
                                       &busy, &total));
  CU_ASSERT_EQUAL(total, 981); /* user..steal; guest is inside user */
  CU_ASSERT_EQUAL(busy, 161);  /* all but idle (800) and iowait (20) */
  CU_ASSERT_FALSE(ixia_bench_parse_stat("cpu0 1 2 3\n", &busy, &total));
  CU_ASSERT_FALSE(ixia_bench_parse_stat("cpu  1 2 3\n", &busy, &total));
  CU_ASSERT_FALSE(ixia_bench_parse_stat(NULL, &busy, &total));
  CU_ASSERT_TRUE(ixia_bench_parse_pressure("some avg10=1.00 avg60=2.00 avg300=3.00 total=12345\n"
                                           "full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n",
                                           &some));
  CU_ASSERT_EQUAL(some, 12345);
  CU_ASSERT_FALSE(ixia_bench_parse_pressure("full avg10=0.00 total=99\n", &some));
  CU_ASSERT_FALSE(ixia_bench_parse_pressure("some avg10=1.00\nfull total=5\n", &some));
}

typedef struct {
  gint64 until_us;
  gint64 wait_ns;
} spinner_t;

static gpointer spin(gpointer data) {
  spinner_t *sp = data;
  gint64 w0 = ixia_bench_thread_wait_ns();
  volatile guint64 x = 0;
  while (g_get_monotonic_time() < sp->until_us) x++;
  gint64 w1 = ixia_bench_thread_wait_ns();
  sp->wait_ns = w0 >= 0 && w1 >= w0 ? w1 - w0 : -1;
  return NULL;
}

/* Two more spinning threads than CPUs for 300 ms: the machine is busy, and
 * the threads waited for a CPU between them. */
static void test_machine_report_under_load(void) {
  ixia_bench_machine_t before;
  ixia_bench_machine_snap(&before);
  guint n = g_get_num_processors() + 2;
  spinner_t *sp = g_new0(spinner_t, n);
  GThread **th = g_new0(GThread *, n);
  gint64 until = g_get_monotonic_time() + 300 * 1000;
  for (guint i = 0; i < n; i++) {
    sp[i].until_us = until;
    th[i] = g_thread_new("spin", spin, &sp[i]);
  }
  gint64 wait = 0;
  for (guint i = 0; i < n; i++) {
    g_thread_join(th[i]);
    wait = wait < 0 || sp[i].wait_ns < 0 ? -1 : wait + sp[i].wait_ns;
  }
  cJSON *out = cJSON_CreateObject();
  ixia_bench_machine_report(&before, wait, 1000, out);
  const cJSON *busy = cJSON_GetObjectItem(out, "box_busy_pct");
  CU_ASSERT_PTR_NOT_NULL_FATAL(busy); /* /proc/stat is always there on Linux */
  CU_ASSERT(busy->valuedouble >= 50 && busy->valuedouble <= 100);
  const cJSON *pressure = cJSON_GetObjectItem(out, "cpu_pressure_pct");
  if (pressure) CU_ASSERT(pressure->valuedouble > 0 && pressure->valuedouble <= 100);
  const cJSON *cw = cJSON_GetObjectItem(out, "client_wait_us_per_op");
  if (wait >= 0) {
    /* n threads on n - 2 CPUs for 300 ms: well over 100 ms of waiting. */
    CU_ASSERT(wait > 100 * 1000 * 1000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cw);
    CU_ASSERT_DOUBLE_EQUAL(cw->valuedouble, (double)wait / 1000.0 / 1000.0, 0.06);
  } else {
    CU_ASSERT_PTR_NULL(cw); /* schedstat absent: left out, not made up */
  }
  cJSON_Delete(out);
  g_free(th);
  g_free(sp);
}

/* Where an answer ends, for each wire: never before its last byte, never
 * past it when a second answer follows, and a stream that cannot be an
 * answer is named bad at once rather than awaited. */
static void test_answer_cuts(void) {
  static const struct {
    ixia_bench_wire_t wire;
    const char *bytes;
    gsize len; /* 0: strlen */
    gsize want;
    gboolean bad;
  } cases[] = {
      {IXIA_BENCH_WIRE_THRIFT, "\0\0\0", 3, 0, FALSE},
      {IXIA_BENCH_WIRE_THRIFT, "\0\0\0\5abcd", 8, 0, FALSE},
      {IXIA_BENCH_WIRE_THRIFT, "\0\0\0\5abcde", 9, 9, FALSE},
      {IXIA_BENCH_WIRE_THRIFT, "\0\0\0\2ab\0\0\0\1c", 11, 6, FALSE},
      {IXIA_BENCH_WIRE_THRIFT, "\0\0\0\0", 4, 0, TRUE},
      {IXIA_BENCH_WIRE_THRIFT, "\x7f\0\0\0", 4, 0, TRUE},
      {IXIA_BENCH_WIRE_HTTP, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n", 0, 0, FALSE},
      {IXIA_BENCH_WIRE_HTTP, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab", 0, 0, FALSE},
      {IXIA_BENCH_WIRE_HTTP, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", 0, 41, FALSE},
      {IXIA_BENCH_WIRE_HTTP, "HTTP/1.1 200 OK\r\ncontent-length:2\r\n\r\nabHTTP/1.1 304 x\r\n\r\n", 0, 39, FALSE},
      {IXIA_BENCH_WIRE_HTTP, "HTTP/1.1 304 Not Modified\r\nETag: \"3\"\r\n\r\n", 0, 40, FALSE},
      {IXIA_BENCH_WIRE_HTTP, "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 0, 0, TRUE},
      {IXIA_BENCH_WIRE_HTTP, "XTTP/1.1 200 OK\r\n", 0, 0, TRUE},
      {IXIA_BENCH_WIRE_MEMCACHED, "VALUE raw:1 0 5\r\nhello\r\nEND\r\n", 0, 29, FALSE},
      {IXIA_BENCH_WIRE_MEMCACHED, "VALUE raw:1 0 5\r\nhello\r\nEND\r", 0, 0, FALSE},
      {IXIA_BENCH_WIRE_MEMCACHED, "VALUE raw:1 0 7\r\na\r\nEND\r\r\nEND\r\n", 0, 31, FALSE}, /* END inside */
      {IXIA_BENCH_WIRE_MEMCACHED, "VALUE k 0 2 99\r\nhi\r\nEND\r\nEND\r\n", 0, 25, FALSE},  /* with a cas */
      {IXIA_BENCH_WIRE_MEMCACHED, "END\r\nEND\r\n", 0, 5, FALSE},
      {IXIA_BENCH_WIRE_MEMCACHED, "SERVER_ERROR out of memory\r\n", 0, 28, FALSE},
      {IXIA_BENCH_WIRE_MEMCACHED, "VALUE k 0 x\r\n", 0, 0, TRUE},
      {IXIA_BENCH_WIRE_MEMCACHED, "VALUE k 0\r\n", 0, 0, TRUE},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    gsize len = cases[i].len ? cases[i].len : strlen(cases[i].bytes);
    gboolean bad = !cases[i].bad;
    gsize got = ixia_bench_answer_len(cases[i].wire, (const guint8 *)cases[i].bytes, len, &bad);
    if (got != cases[i].want || bad != cases[i].bad) fprintf(stderr, "case %u: got %zu bad %d\n", i, got, bad);
    CU_ASSERT_EQUAL(got, cases[i].want);
    CU_ASSERT_EQUAL(bad, cases[i].bad);
  }
}

/* ---- the event-driven driver against a real memcached ---- */

#define MC_KEYS 10
static const char MC_VALUE[] = "a value of some length";
static ixia_bench_worker_t mc_totals;

/* Gets of raw:0..9, every 7th of a key never set; or, with --seed 1, a
 * command memcached does not know. */
static gboolean mc_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                           ixia_error_t **err) {
  (void)err;
  guint32 k = (guint32)g_rand_int_range(w->rnd, 0, 7 * MC_KEYS);
  call->op_class = k % 7 == 0; /* 1: a miss is the right answer */
  char req[64];
  int n = w->run->o->seed == 1 ? snprintf(req, sizeof req, "bogus %u\r\n", k)
                               : snprintf(req, sizeof req, "get raw:%u\r\n", call->op_class ? 1000 + k : k % MC_KEYS);
  g_byte_array_append(out, (const guint8 *)req, (guint)n);
  return TRUE;
}

static gboolean mc_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                          gsize len, ixia_error_t **err) {
  char hit[128];
  snprintf(hit, sizeof hit, "VALUE raw:%%u 0 %zu\r\n%s\r\nEND\r\n", strlen(MC_VALUE), MC_VALUE);
  if (call->op_class && len == 5 && memcmp(a, "END\r\n", 5) == 0) return TRUE;
  guint k;
  char text[128];
  if (!call->op_class && len < sizeof text) {
    memcpy(text, a, len);
    text[len] = 0;
    char again[128];
    if (sscanf(text, "VALUE raw:%u", &k) == 1 && k < MC_KEYS) {
      snprintf(again, sizeof again, hit, k);
      if (strcmp(again, text) == 0) {
        w->extra[0] += len;
        return TRUE;
      }
    }
  }
  return ixia_error_set(err, IXIA_EINTERNAL, "unexpected answer: %.*s", (int)MIN(len, 60), (const char *)a);
}

static gint64 mc_p50_us, mc_p97_us, mc_max_us;

/* The values raw:0..9, set over a plain socket. */
static void mc_set_values(const ixt_memcached_t *mc) {
  char *host = g_strndup(mc->addr, strrchr(mc->addr, ':') - mc->addr);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((guint16)mc->port)};
  inet_pton(AF_INET, host, &sa.sin_addr);
  g_free(host);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
  for (int k = 0; k < MC_KEYS; k++) {
    char cmd[128], ans[16] = {0};
    int n = snprintf(cmd, sizeof cmd, "set raw:%d 0 0 %zu\r\n%s\r\n", k, strlen(MC_VALUE), MC_VALUE);
    CU_ASSERT_EQUAL(send(fd, cmd, (size_t)n, 0), n);
    CU_ASSERT_EQUAL(recv(fd, ans, 8, MSG_WAITALL), 8);
    CU_ASSERT_STRING_EQUAL(ans, "STORED\r\n");
  }
  close(fd);
}

static void mc_report(ixia_bench_run_t *r, const ixia_bench_worker_t *tot, cJSON *out) {
  (void)r, (void)out;
  mc_totals = *tot;
  /* The histograms go with the run: their figures are kept here. */
  mc_p50_us = ixia_hdr_value_at(tot->lat[0], 50);
  mc_p97_us = ixia_hdr_value_at(tot->lat[0], 97);
  mc_max_us = ixia_hdr_max(tot->lat[0]);
}

/* Four connections on two threads keep a request in flight each; every
 * answer is cut where it ends (a hit checked byte for byte, a miss as one
 * END line) and counted in its class; error answers fail the run without
 * ending it. */
static void test_event_driver_on_memcached(void) {
  ixt_memcached_t mc = {0};
  CU_ASSERT_FATAL(ixt_memcached_start(&mc, 0));
  {
    ixia_error_t *e = NULL;
    ixia_bench_opts_t o0 = {.memcached = mc.addr, .conns = 1};
    ixia_bench_workload_t set = {.name = "set", .wire = IXIA_BENCH_WIRE_MEMCACHED};
    ixia_bench_run_t r0 = {.o = &o0, .wl = &set};
    gpointer conn = ixia_bench_events_open(&r0, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(conn);
    ixia_bench_events_close(conn);
  }
  mc_set_values(&mc);
  ixia_bench_opts_t o = {.memcached = mc.addr, .conns = 4, .threads = 2, .seconds = 0.4, .seed = 7};
  ixia_bench_workload_t wl = {.name = "mc-test", .class_names = {"hit", "miss"},
                              .wire = IXIA_BENCH_WIRE_MEMCACHED, .request = mc_request,
                              .answer = mc_answer, .report = mc_report};
  memset(&mc_totals, 0, sizeof mc_totals);
  CU_ASSERT_TRUE(ixia_bench_run(&o, &wl));
  guint64 hits = mc_totals.ops[0], misses = mc_totals.ops[1];
  CU_ASSERT(hits > 200);
  CU_ASSERT_EQUAL(mc_totals.errors, 0);
  CU_ASSERT_EQUAL(mc_totals.extra[0], hits * (strlen("VALUE raw:0 0 22\r\n") + strlen(MC_VALUE) + 7));
  CU_ASSERT(misses > hits / 12 && misses < hits / 3); /* 1 in 7 */
  /* Answers memcached gives to a command it does not know: errors, the run
   * goes on to its end and fails. */
  o.seed = 1;
  memset(&mc_totals, 0, sizeof mc_totals);
  CU_ASSERT_FALSE(ixia_bench_run(&o, &wl));
  CU_ASSERT(mc_totals.errors > 100);
  CU_ASSERT_EQUAL(mc_totals.ops[0] + mc_totals.ops[1], 0);
  CU_ASSERT_PTR_NOT_NULL(mc_totals.first_error);
  ixt_memcached_stop(&mc);
}

/* Gets of the hit keys only; with --seed 3 the 100th answer a thread
 * reads holds that thread for 40 ms, as a stalled server would. */
static gboolean mc_hit_request(ixia_bench_worker_t *w, ixia_bench_call_t *call, GByteArray *out,
                               ixia_error_t **err) {
  (void)err;
  char req[64];
  int n = snprintf(req, sizeof req, "get raw:%d\r\n", g_rand_int_range(w->rnd, 0, MC_KEYS));
  g_byte_array_append(out, (const guint8 *)req, (guint)n);
  call->op_class = 0;
  return TRUE;
}

static gboolean mc_hit_answer(ixia_bench_worker_t *w, const ixia_bench_call_t *call, const guint8 *a,
                              gsize len, ixia_error_t **err) {
  if (w->run->o->seed == 3 && ++w->extra[1] == 100) g_usleep(40000);
  return mc_answer(w, call, a, len, err);
}

/* The open loop sends exactly the requests its timeline makes due (2,000/s
 * for 0.5 s: 1,000, whatever the answers do), on whichever connection is
 * idle; a 40 ms stall of one thread counts in every request that fell due
 * behind it (2 threads at 1 ms each: ~40 of its requests, so the 97th
 * percentile is over 10 ms), where a closed loop would time one slow
 * request. */
static void test_event_driver_open_loop(void) {
  ixt_memcached_t mc = {0};
  CU_ASSERT_FATAL(ixt_memcached_start(&mc, 0));
  mc_set_values(&mc);
  ixia_bench_opts_t o = {.memcached = mc.addr, .conns = 4, .threads = 2, .seconds = 0.5, .rate = 2000, .seed = 5};
  ixia_bench_workload_t wl = {.name = "mc-open", .wire = IXIA_BENCH_WIRE_MEMCACHED,
                              .request = mc_hit_request, .answer = mc_hit_answer, .report = mc_report};
  memset(&mc_totals, 0, sizeof mc_totals);
  CU_ASSERT_TRUE(ixia_bench_run(&o, &wl));
  CU_ASSERT_EQUAL(mc_totals.ops[0], 1000);
  CU_ASSERT_EQUAL(mc_totals.errors, 0);
  CU_ASSERT(mc_p50_us < 10000);
  o.seed = 3;
  memset(&mc_totals, 0, sizeof mc_totals);
  CU_ASSERT_TRUE(ixia_bench_run(&o, &wl));
  CU_ASSERT_EQUAL(mc_totals.ops[0], 1000);
  CU_ASSERT(mc_max_us >= 30000); /* the requests due just after the stall began */
  CU_ASSERT(mc_p97_us >= 10000);
  CU_ASSERT(mc_p50_us < 10000);
  ixt_memcached_stop(&mc);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("bench", NULL, NULL);
  IXT_ADD(s, test_percentiles_match_sorted_samples);
  IXT_ADD(s, test_latency_shaped_and_small);
  IXT_ADD(s, test_empty_negative_and_clamped);
  IXT_ADD(s, test_merge_equals_single_histogram);
  IXT_ADD(s, test_bucket_bounds);
  IXT_ADD(s, test_zipf_frequencies);
  IXT_ADD(s, test_doc_shape);
  IXT_ADD(s, test_answer_read);
  IXT_ADD(s, test_machine_parsers);
  IXT_ADD(s, test_machine_report_under_load);
  IXT_ADD(s, test_answer_cuts);
  IXT_ADD(s, test_event_driver_on_memcached);
  IXT_ADD(s, test_event_driver_open_loop);
  return ixt_run();
}
