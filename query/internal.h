/* What the files of the query library share (not part of query.h).
 *
 *   values.c     value encoding, document values
 *   analyze.c    text analyzers: tokens, normalisation, case folding, stems
 *   parse.c      the request parser and the limits
 *   match.c      per-document (brute-force) evaluation
 *   aggs.c       aggregation state: adding documents, summaries, exact sums,
 *                percentile histograms, terms buckets
 *   aggs_more.c  stats, histogram, date_histogram, range, filter(s), top_hits
 *   sort.c       sort values and their order
 *   score.c      BM25
 *   aggs_wire.c  the partial state a shard sends, merging it, the response
 *
 * The aggregation state types live here because aggs.c builds them and
 * aggs_wire.c serialises, merges and renders them. */
#ifndef IXIA_QUERY_INTERNAL_H
#define IXIA_QUERY_INTERNAL_H

#include <math.h>
#include <string.h>

#include "bytes.h"
#include "query.h"


/* ---- values.c ---- */

/* The 8-byte encoding of d as a new GBytes. */
GBytes *ixia_num_bytes(double d);

/* Moves the values of tmp (owned GBytes refs) to out, sorted and without
 * duplicates; tmp is left empty. */
void ixia_values_move_sorted_unique(GPtrArray *tmp, GPtrArray *out);

/* The values of ix in doc, values of another type counting as absent
 * (documents stored before the index was declared may hold anything). */
GPtrArray *ixia_values_lenient(const cJSON *doc, const ixia_schema_field_t *ix);

/* "path.name", g_malloc'd: the path of a member in error messages, built
 * for every member a query names (g_strdup_printf was ~1% of the shard's
 * CPU on pages of 100, and of the API's merging aggregation partials). */
static inline char *ixia_path_member(const char *path, const char *name) {
  gsize pl = strlen(path), nl = strlen(name);
  char *s = g_malloc(pl + nl + 2);
  memcpy(s, path, pl);
  s[pl] = '.';
  memcpy(s + pl + 1, name, nl + 1);
  return s;
}

/* "path[i]", g_malloc'd (likewise). */
static inline char *ixia_path_index(const char *path, guint i) {
  char d[12];
  guint n = sizeof d;
  do d[--n] = (char)('0' + i % 10); while ((i /= 10) && n > 0);
  gsize pl = strlen(path), dl = sizeof d - n;
  char *s = g_malloc(pl + dl + 3);
  memcpy(s, path, pl);
  s[pl] = '[';
  memcpy(s + pl + 1, d + n, dl);
  s[pl + 1 + dl] = ']';
  s[pl + 2 + dl] = '\0';
  return s;
}

static inline gboolean ixia_json_is_integer(const cJSON *v) {
  return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble);
}

/* ---- aggs.c: state ---- */

/* Percentile histogram: the bucket of |x| is ceil(log_gamma |x|), whose
 * midpoint (in relative terms) is within PCT_ALPHA of every value in it. */
#define PCT_ALPHA 0.009
#define PCT_MAX_INDEX 50000 /* beyond log_gamma(DBL_MAX); clamps infinities */

typedef struct {
  gint32 off;     /* bucket index of counts[0] */
  GArray *counts; /* guint64 */
} dense_t;

typedef struct {
  GArray *exact;      /* double; NULL once converted to the histogram */
  guint64 exact_acct; /* bytes accounted for `exact` */
  guint64 zero;       /* histogram: values == 0 */
  dense_t pos, neg;   /* histogram: positive values, negative values by |x| */
  double min, max;    /* of every value, to clamp histogram estimates */
} pct_t;

/* STATS */
typedef struct {
  ixia_fsum_t sum;
  double min, max;
} stats_t;

/* TOP_HITS: the best hits so far, by (sort values, key). */
typedef struct {
  char *key;
  gint64 version;
  GPtrArray *sort; /* GBytes* or NULL, g->n_sort */
} th_hit_t;

typedef struct {
  GPtrArray *hits; /* th_hit_t*, pruned to g->size now and then */
  guint64 acct;    /* bytes accounted */
} tophits_t;

struct ixia_agg_cell {
  guint64 n; /* COUNT: documents; metrics: values read */
  union {
    ixia_fsum_t sum;     /* SUM, AVG */
    double ext;          /* MIN, MAX */
    pct_t *pct;          /* PERCENTILES */
    GHashTable *hashes;  /* CARDINALITY: set of 64-bit hashes stored as pointers */
    GHashTable *buckets; /* bucket kinds: set of bucket_t, keyed through their term_key_t */
    stats_t *stats;      /* STATS */
    tophits_t *top;      /* TOP_HITS */
  } u;
};
typedef struct ixia_agg_cell agg_state_t;

typedef struct {
  guint hash;
  guint32 len;
  const guint8 *p;
} term_key_t;

typedef struct {
  term_key_t key;    /* first, so the table hashes buckets and lookup keys alike */
  guint64 count;
  guint64 last_doc;  /* the document that last counted here: once per document */
  agg_state_t *subs; /* n_subs, in the same allocation, followed by the key bytes */
} bucket_t;

#define CARD_ENTRY_BYTES 24
#define BUCKET_OVERHEAD 32 /* the hash table's slot */

struct ixia_aggs {
  const ixia_query_t *q;
  ixia_query_limits_t lim;
  agg_state_t *top; /* one per q->aggs[i] */
  guint64 mem;
  guint64 doc_seq;
  ixia_code_t fail_code; /* IXIA_OK until a limit was hit */
  char *fail_msg;
  double log_gamma;
};

/* Records the first failure (the state is unusable from then on) and sets
 * err. Always FALSE. */
gboolean ixia_aggs_fail(ixia_aggs_t *a, ixia_error_t **err, ixia_code_t code, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
/* Accounts bytes; FALSE naming query.max_memory_mb past the limit. */
gboolean ixia_aggs_mem_grow(ixia_aggs_t *a, guint64 bytes, ixia_error_t **err);
gboolean ixia_aggs_check_usable(const ixia_aggs_t *a, ixia_error_t **err);

gboolean ixia_aggs_fsum_add(ixia_aggs_t *a, ixia_fsum_t *s, double x, ixia_error_t **err);

gboolean ixia_pct_dense_add(ixia_aggs_t *a, dense_t *d, gint32 idx, guint64 by, ixia_error_t **err);
gboolean ixia_pct_hist_add(ixia_aggs_t *a, pct_t *p, double x, guint64 by, ixia_error_t **err);
gboolean ixia_pct_to_hist(ixia_aggs_t *a, pct_t *p, ixia_error_t **err);
gboolean ixia_pct_add_exact(ixia_aggs_t *a, pct_t *p, const double *v, guint n, ixia_error_t **err);
/* The rank-th smallest value (1-based) of the histogram. */
double ixia_pct_hist_rank(const ixia_aggs_t *a, const pct_t *p, guint64 rank);
int ixia_double_cmp(const void *a, const void *b);

/* What brute force knows of the document being added (top_hits and
 * filter aggregations need more than the values). */
typedef struct {
  const cJSON *doc; /* NULL: values only */
  const char *key;  /* NULL: no key (top_hits skip it) */
  gint64 version;
  double score;
} ixia_hitctx_t;

void ixia_aggs_state_init(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st);
void ixia_aggs_state_clear(const ixia_agg_t *g, agg_state_t *st);
gboolean ixia_aggs_state_add(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                             const ixia_val_t *const *vals, const guint *nvals, const ixia_hitctx_t *d,
                             ixia_error_t **err);
cJSON *ixia_aggs_state_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st,
                              ixia_error_t **err);

/* ---- aggs_wire.c: pieces of the wire form ---- */

cJSON *ixia_b64_json(const guint8 *p, gsize len);
cJSON *ixia_b64_doubles(const double *v, gsize n);
/* A base64 member as 64-bit big-endian words (g_free), NULL when malformed. */
guint64 *ixia_get_words(const cJSON *o, const char *key, gsize *n);
double ixia_bitsd(guint64 b);
gboolean ixia_get_count(const cJSON *o, const char *key, guint64 *out);
gboolean ixia_bad_partial(ixia_error_t **err, const char *path, const char *what);

/* ---- aggs_more.c: stats, histograms, range, filter(s), top_hits ---- */

void ixia_more_init(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st);
void ixia_more_clear(const ixia_agg_t *g, agg_state_t *st);
gboolean ixia_more_add(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                       const ixia_val_t *const *vals, const guint *nvals, const ixia_hitctx_t *d,
                       ixia_error_t **err);
gboolean ixia_more_cell_merge(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *c,
                              const ixia_agg_summary_t *s, ixia_error_t **err);
/* stats and top_hits: their members of the partial (added to o), merging them */
void ixia_more_partial(const ixia_agg_t *g, const agg_state_t *st, cJSON *o);
gboolean ixia_more_merge(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st, const cJSON *j,
                         guint64 n, const char *path, ixia_error_t **err);
/* every kind but the first eight: the response object */
cJSON *ixia_more_result(const ixia_aggs_t *a, const ixia_agg_t *g, const agg_state_t *st,
                        ixia_error_t **err);

/* The bucket of key in terms state st, created when missing; NULL at
 * query.max_terms_buckets or query.max_memory_mb. */
bucket_t *ixia_aggs_bucket_get(ixia_aggs_t *a, const ixia_agg_t *g, agg_state_t *st,
                               const guint8 *p, guint32 len, guint hash, ixia_error_t **err);

#endif
