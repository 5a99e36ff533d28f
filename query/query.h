/* The query language of docs/QUERY.md: parsing, value encoding, per-document
 * evaluation, and aggregation state that can be split across shards. The
 * library (query/) is shared by ixia-query-api, which parses requests,
 * verifies hits and merges shards' partials, and ixia-indexer, which
 * evaluates them on its index.
 *
 * Everything the index and the brute-force evaluator compare goes through one
 * byte encoding of field values, so both sides agree by construction on what
 * "equal", "less than" and "prefix of" mean:
 *   keyword      the UTF-8 bytes of the string
 *   text         each token of the field's analyzer (analyze.c)
 *   long, double, timestamp
 *                8 bytes, order-preserving encoding of the IEEE double
 *                (sign bit flipped for positives, all bits flipped for
 *                negatives; -0 is stored as +0). Longs are limited to
 *                |v| <= 2^53 by the schema check, so doubles hold them exactly.
 *   bool         1 byte, 0 or 1
 * memcmp order of encodings equals value order within one field type.
 * A field's values in a document: the value at its dotted path, or each
 * element when it is an array; null counts as absent; values are
 * deduplicated.
 *
 * Aggregation partials: a shard accumulates an ixia_aggs_t over its matching
 * documents, serialises it with ixia_aggs_partial_json, the query API merges
 * the partials of every shard with ixia_aggs_merge_partial and renders the
 * response with ixia_aggs_result_json. Merging is exact for count, sum, min,
 * max, avg (as sum and count), terms (each shard sends every bucket, up to
 * query.max_terms_buckets) and cardinality (64-bit hashes of the distinct
 * values); percentiles are exact while the merged value count stays within
 * query.max_exact_values, and beyond that come from a log-bucket histogram
 * with 1% relative error.
 *
 * Thread safety: a parsed ixia_query_t is immutable and may be shared; an
 * ixia_aggs_t belongs to one thread at a time. */
#ifndef IXIA_QUERY_H
#define IXIA_QUERY_H

#include <cjson/cJSON.h>
#include <glib.h>
#include <string.h>

#include "config.h"
#include "error.h"
#include "schema.h"

/* ---- values ---- */

/* A borrowed encoded value. */
typedef struct {
  const guint8 *p;
  guint32 len;
} ixia_val_t;

#define IXIA_NUM_BYTES 8

void ixia_num_encode(double d, guint8 out[IXIA_NUM_BYTES]);
double ixia_num_decode(const guint8 *p);

/* Appends the encoded values (GBytes*) of one declared field of doc to out,
 * sorted by memcmp and deduplicated. Returns FALSE with IXIA_ETYPE naming
 * the field and the offending value when a value has the wrong type (the
 * values already appended are then unspecified). */
gboolean ixia_doc_values(const cJSON *doc, const ixia_schema_field_t *ix, GPtrArray *out,
                         ixia_error_t **err);

/* memcmp order of encoded values; a proper prefix sorts first. */
int ixia_val_cmp(const guint8 *a, gsize alen, const guint8 *b, gsize blen);

/* JSON of an encoded value of a field type (string, number or bool). */
cJSON *ixia_val_to_json(ixia_field_type_t type, const guint8 *p, guint32 len);
/* The same value appended to out as JSON text. */
void ixia_val_append_json(GString *out, ixia_field_type_t type, const guint8 *p, gsize len);

/* ---- text analysis (analyze.c) ----
 *
 * The analyzer of a text field (ixia_schema_field_t.analyzer: "standard" or a
 * Snowball language) turns a string into tokens: NFKC-normalised runs of
 * letters, digits and marks, case-folded, then stemmed for a language. The
 * index and the query parser call the same functions, so a query's words
 * meet the documents' tokens exactly. */

/* Called per token in order, with its position; FALSE stops. tok is only
 * valid during the call. */
typedef gboolean (*ixia_token_fn)(const char *tok, gsize len, guint32 pos, void *ud);

/* Tokens of text; positions start at *pos, which is left one past the last
 * token. analyzer NULL means "standard". */
void ixia_analyze(const char *analyzer, const char *text, gsize len, guint32 *pos,
                  ixia_token_fn fn, void *ud);

/* Appends the distinct tokens of text (GBytes*) to out. */
void ixia_text_tokens(const char *analyzer, const char *text, size_t len, GPtrArray *out);

/* The single token text analyzes to (stemmed when stem), or NULL when it
 * gives none or several (g_free). */
char *ixia_analyze_one(const char *analyzer, const char *text, gboolean stem);

/* ---- limits ---- */

typedef struct {
  guint max_clauses;        /* filter nodes + aggregation nodes (an "in" is one) */
  guint max_in_values;      /* values of one "in" */
  guint max_limit;          /* largest "limit" (result window of one page) */
  guint64 max_postings;     /* postings a shard may touch for one query */
  guint64 max_memory_bytes; /* aggregation state of one query */
  guint max_terms_buckets;  /* buckets one terms aggregation may hold */
  guint max_exact_values;   /* percentiles stay exact up to this many values */
  guint deadline_ms;        /* default and largest per-query deadline */
  gsize max_request_bytes;  /* largest query JSON */
  guint max_wait_ms;        /* longest min_version wait */
  guint64 track_total_hits; /* default exactness of "total" */
} ixia_query_limits_t;

/* Reads the query.* options. */
void ixia_query_limits_from_config(const ixia_config_t *cfg, ixia_query_limits_t *out);

/* ---- parsed query ---- */

typedef enum {
  IXIA_F_TERM,   /* values: one encoded value */
  IXIA_F_IN,     /* values: >= 1 encoded values, sorted, deduplicated */
  IXIA_F_RANGE,  /* lo/hi encoded, NULL when unbounded */
  IXIA_F_PREFIX, /* values: one raw prefix (keyword bytes, or a lower-cased token prefix) */
  IXIA_F_EXISTS,
  IXIA_F_MATCH,  /* values: the distinct tokens; all must be present (any with match_any) */
  IXIA_F_AND,
  IXIA_F_OR,
  IXIA_F_NOT,    /* children: exactly one */
  IXIA_F_MATCH_PHRASE, /* values: the tokens in order (repeats kept), offsets: their positions */
} ixia_filter_kind_t;

typedef struct ixia_filter {
  ixia_filter_kind_t kind;
  const ixia_schema_field_t *field; /* leaf kinds; borrowed from the query's schema */
  GPtrArray *values;         /* GBytes*; TERM, IN, PREFIX, MATCH */
  GBytes *lo, *hi;           /* RANGE */
  gboolean lo_incl, hi_incl;
  struct ixia_filter **children; /* AND, OR, NOT */
  guint n_children;
  gboolean match_any;        /* MATCH with "operator": "or" */
  guint32 *offsets;          /* MATCH_PHRASE: position of each token, the first at 0 */
} ixia_filter_t;

/* One key of a sort (docs/QUERY.md "Sorting"). A multi-valued field sorts
 * by its smallest value ascending and by its largest descending; a document
 * without a value sorts last (or first with missing_first) in either
 * direction; ties after every key are broken by the document key. */
typedef struct {
  const ixia_schema_field_t *field; /* NULL: _score (relevance) */
  gboolean desc;
  gboolean missing_first;
} ixia_sort_key_t;

/* Whether a sort key is a number with missing values last: the order in
 * which a shard walks the field's range index for a page (idx_sort.c), so
 * that such a page can be answered on the shard's I/O thread (search.c). */
static inline gboolean ixia_sort_key_walkable(const ixia_sort_key_t *k) {
  return k->field && ixia_field_type_numeric(k->field->type) && !k->missing_first;
}

#define IXIA_MAX_SORT_KEYS 8

typedef enum {
  IXIA_AGG_COUNT,
  IXIA_AGG_SUM,
  IXIA_AGG_AVG,
  IXIA_AGG_MIN,
  IXIA_AGG_MAX,
  IXIA_AGG_TERMS,
  IXIA_AGG_PERCENTILES,
  IXIA_AGG_CARDINALITY,
  IXIA_AGG_STATS,
  IXIA_AGG_HISTOGRAM,
  IXIA_AGG_DATE_HISTOGRAM,
  IXIA_AGG_RANGE,
  IXIA_AGG_FILTER,
  IXIA_AGG_FILTERS,
  IXIA_AGG_TOP_HITS,
} ixia_agg_kind_t;

/* Bucket aggregations with nested aggregations: terms and the ones below. */
static inline gboolean ixia_agg_is_bucket(ixia_agg_kind_t k) {
  return k == IXIA_AGG_TERMS || (k >= IXIA_AGG_HISTOGRAM && k <= IXIA_AGG_FILTERS);
}

/* One bucket of a range aggregation: [from, to), either end open. */
typedef struct {
  char *key;
  double from, to;
  gboolean has_from, has_to;
} ixia_agg_range_t;

typedef struct ixia_agg {
  char *name;
  ixia_agg_kind_t kind;
  const ixia_schema_field_t *field; /* NULL for COUNT; borrowed from the schema */
  guint field_slot;          /* index into ixia_query_t.agg_fields */
  guint size;                /* TERMS: buckets returned (default 10) */
  double *percents;          /* PERCENTILES: in (0, 100] */
  guint n_percents;
  struct ixia_agg **subs;    /* bucket kinds: nested aggregations */
  guint n_subs;
  /* HISTOGRAM: bucket width and offset; DATE_HISTOGRAM: fixed width in
   * seconds, or 0 with a calendar unit (cal_unit, an ixia_cal_unit_t),
   * offset in seconds and a time-zone offset in seconds */
  double interval, offset;
  int cal_unit;
  gint32 tz;
  guint64 min_doc_count;     /* HISTOGRAM, DATE_HISTOGRAM: empty buckets within the range shown at 0 */
  ixia_agg_range_t *ranges;  /* RANGE */
  guint n_ranges;
  struct ixia_filter **filters; /* FILTER (one) and FILTERS */
  char **filter_names;       /* FILTERS: the buckets' names */
  guint n_filters;
  ixia_sort_key_t *sort;     /* TOP_HITS: NULL = by document key */
  guint n_sort;
  char **fields;             /* TOP_HITS: projection of the hits' documents, or NULL */
} ixia_agg_t;

typedef struct ixia_query {
  char *ns, *table;
  ixia_schema_t *schema;   /* owned reference */
  ixia_filter_t *filter;   /* NULL matches every document */
  char **fields;           /* NULL-terminated projection, or NULL for whole documents */
  guint limit;             /* hits per page; 0 = aggregations only. Default 10. */
  char *after;             /* opaque cursor from a previous response, or NULL */
  gint64 min_version;      /* 0 = no wait */
  guint timeout_ms;        /* deadline; defaults to limits->deadline_ms */
  guint64 track_total_hits; /* count exactly up to this many (G_MAXUINT64: all) */
  gboolean explain;        /* return the shards' plans */
  gboolean allow_repairing; /* FALSE: fail rather than answer from a shard that is
                               repairing itself (default TRUE: answer, and say so) */
  gboolean allow_partial;  /* answer from the shards that answer, listing the others */
  ixia_sort_key_t *sort;   /* NULL: hits in index order */
  guint n_sort;
  guint32 sort_sig;        /* hash of the sort, carried by cursors to refuse another sort's */
  gboolean scoring;        /* the filter has match or match_phrase outside any "not": hits
                              carry a BM25 score (score.c) */
  ixia_agg_t **aggs;
  guint n_aggs;
  /* Every field any aggregation reads, once each; ixia_agg_t.field_slot
   * indexes this array. The index feeds values in this order. */
  const ixia_schema_field_t **agg_fields;
  guint n_agg_fields;
} ixia_query_t;

/* Looks a table's schema up; returns a new reference or NULL with *err set
 * (IXIA_ENOTFOUND for an unknown table). */
typedef ixia_schema_t *(*ixia_schema_lookup_fn)(const char *ns, const char *table, void *ud,
                                                ixia_error_t **err);

/* Parses a request as in docs/QUERY.md. Errors are IXIA_EINVAL with a message that
 * names the bad part by its JSON path ("filter.and[2].range.price: ...");
 * IXIA_ENOTFOUND for an unknown table; IXIA_ETOOLARGE naming the limit
 * ("query.max_clauses", "query.max_limit"). Filters and aggregations may only
 * name declared (indexed) fields of the table. */
ixia_query_t *ixia_query_parse(const char *json, size_t len, ixia_schema_lookup_fn lookup,
                               void *lookup_ud, const ixia_query_limits_t *lim,
                               ixia_error_t **err);
/* The same from a request already parsed (borrowed; not kept): an index
 * shard reads the query out of its search request without printing and
 * parsing it again. The nesting limit applies to root itself; the byte
 * limit is the caller's (it holds the text). */
ixia_query_t *ixia_query_parse_tree(const cJSON *root, ixia_schema_lookup_fn lookup,
                                    void *lookup_ud, const ixia_query_limits_t *lim,
                                    ixia_error_t **err);
void ixia_query_destroy(ixia_query_t *q);

/* TRUE when doc satisfies the query's filter (brute force, one document). */
gboolean ixia_query_match_doc(const ixia_query_t *q, const cJSON *doc);

/* TRUE when the filter has no "not": a document that gains values can only
 * start matching, never stop. Then an index that holds a document at its
 * current version, even one indexed before a field was declared, can have
 * matched it only if the document matches: the query API skips re-checking
 * such hits (unless the shard's search overlapped the publish of a batch:
 * ixia_idx_result_t.settled). A filter with "not" needs the shard to hold
 * no such document (ixia_idx_result_t.schema_current). */
gboolean ixia_query_filter_monotone(const ixia_query_t *q);

/* ---- relevance (score.c) ----
 *
 * BM25 (k1 = 1.2, b = 0.75; Lucene's idf) of a document for a query: the
 * sum, over the match and match_phrase clauses outside any "not" (in filter
 * order) and their distinct tokens (in query order), of
 *   idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)),
 *   idf = ln(1 + (N - df + 0.5) / (df + 0.5))
 * where tf is the token's count in the document's field, dl the field's
 * token count, N the documents with at least one token in the field, df
 * those holding the token and avgdl the mean dl over N. Each shard computes
 * N, df and avgdl over its own documents (docs/QUERY.md). */

#define IXIA_BM25_K1 1.2
#define IXIA_BM25_B 0.75

double ixia_bm25(double tf, double dl, double avgdl, double df, double n);

/* The scoring clauses of q's filter in scoring order (const ixia_filter_t*;
 * g_ptr_array_free). */
GPtrArray *ixia_query_scoring_clauses(const ixia_query_t *q);

/* Every token occurrence of a text field in doc (wrong-typed values left
 * out), in order: positions count across the strings of an array with a gap
 * of IXIA_POSITION_GAP, so a phrase never spans two strings. */
typedef struct {
  GBytes *tok;
  guint32 pos;
} ixia_token_t;
#define IXIA_POSITION_GAP 100
GArray *ixia_doc_tokens(const cJSON *doc, const ixia_schema_field_t *ix);
/* Both at once, as the index reads a text field: the distinct tokens into
 * out (like ixia_doc_values) and every occurrence into *occ (always set;
 * ixia_tokens_free). FALSE with IXIA_ETYPE for a value that is not a
 * string. */
gboolean ixia_doc_text(const cJSON *doc, const ixia_schema_field_t *ix, GPtrArray *out, GArray **occ,
                       ixia_error_t **err);
/* The position of b among sorted, distinct values (as ixia_doc_values and
 * ixia_doc_text give them), or -1. */
gint ixia_values_find(const GPtrArray *sorted, GBytes *b);
void ixia_tokens_free(GArray *toks);

/* Brute-force statistics over a set of documents (what a shard would
 * compute over its own), and a document's score with them. */
typedef struct ixia_bm25_stats ixia_bm25_stats_t;
ixia_bm25_stats_t *ixia_bm25_stats_new(const ixia_query_t *q);
void ixia_bm25_stats_add(ixia_bm25_stats_t *st, const cJSON *doc);
double ixia_query_score_doc(const ixia_query_t *q, const ixia_bm25_stats_t *st, const cJSON *doc);
void ixia_bm25_stats_free(ixia_bm25_stats_t *st);

/* ---- sorting (sort.c) ----
 *
 * A document's sort values are one encoded value per sort key (the value
 * encoding above, so memcmp orders values of one field; _score as an
 * encoded number), or NULL where it has none. The index computes them from
 * its columns, brute force from the document; both are compared here. */

/* The sort values of doc (GPtrArray of GBytes* or NULL, q->n_sort long;
 * free with g_ptr_array_unref). score is the document's _score. */
GPtrArray *ixia_sort_values_of_doc(const ixia_query_t *q, const cJSON *doc, double score);

/* Order of two documents' sort values under q's sort (negative: a first),
 * ignoring the key tiebreak. */
int ixia_sort_cmp_values(const ixia_query_t *q, GBytes *const *a, GBytes *const *b);

/* The same for any list of sort keys (top_hits has its own). */
GPtrArray *ixia_sort_values_of(const ixia_sort_key_t *keys, guint n, const cJSON *doc, double score);
int ixia_sort_cmp_keys(const ixia_sort_key_t *keys, guint n, GBytes *const *a, GBytes *const *b);

/* One key's comparison of two values (NULL: missing). */
int ixia_sort_cmp_one(const ixia_sort_key_t *k, const guint8 *a, gsize alen, gboolean a_has,
                      const guint8 *b, gsize blen, gboolean b_has);

/* The JSON a hit shows for one sort value (number, string, bool or null). */
cJSON *ixia_sort_value_json(const ixia_sort_key_t *k, GBytes *v);
/* The same as text, for a value present (its encoded bytes). */
void ixia_sort_value_append(GString *out, const ixia_sort_key_t *k, const guint8 *p, gsize len);

/* ---- aggregations ---- */

typedef struct ixia_aggs ixia_aggs_t;

/* State for q's aggregations. The query must outlive it. */
ixia_aggs_t *ixia_aggs_new(const ixia_query_t *q, const ixia_query_limits_t *lim);
void ixia_aggs_destroy(ixia_aggs_t *a);

/* Adds one matching document. vals[i] / nvals[i]: the document's encoded
 * values of q->agg_fields[i] (borrowed, for the duration of the call).
 * FALSE with IXIA_ETOOLARGE naming query.max_memory_mb or
 * query.max_terms_buckets when a limit is exceeded; the state is then
 * unusable. */
gboolean ixia_aggs_add(ixia_aggs_t *a, const ixia_val_t *const *vals, const guint *nvals,
                       ixia_error_t **err);

/* Convenience for brute force: extracts the values from doc and adds it
 * (filter and filters evaluate their filters on doc; top_hits need the
 * key: ixia_aggs_add_hit). */
gboolean ixia_aggs_add_doc(ixia_aggs_t *a, const cJSON *doc, ixia_error_t **err);
/* The same with the document's key, version and score, for top_hits. */
gboolean ixia_aggs_add_hit(ixia_aggs_t *a, const cJSON *doc, const char *key, gint64 version,
                           double score, ixia_error_t **err);

/* The bucket a value falls in: a histogram's floor((v - offset) / interval)
 * * interval + offset, a date_histogram's start of the fixed or calendar
 * interval (in local time at its time-zone offset, shifted by its offset),
 * in epoch seconds. The index and brute force both bucket with this. */
double ixia_agg_bucket_key(const ixia_agg_t *g, double v);

/* Whether doc satisfies one filter (filter and filters aggregations). */
gboolean ixia_filter_match_doc(const ixia_filter_t *f, const cJSON *doc);

/* The shard-side partial state as JSON (mergeable, lossless for exact parts). */
cJSON *ixia_aggs_partial_json(const ixia_aggs_t *a);

/* Merges a partial produced by ixia_aggs_partial_json for the same query. */
gboolean ixia_aggs_merge_partial(ixia_aggs_t *a, const cJSON *partial, ixia_error_t **err);

/* ixia_aggs_result_json with an error: NULL and IXIA_ETOOLARGE when a
 * histogram would show more than query.max_terms_buckets buckets. */
cJSON *ixia_aggs_result(const ixia_aggs_t *a, ixia_error_t **err);

/* Calls fn for each top_hits result in a response's "aggs" (result of
 * ixia_aggs_result for q), with its node: the caller adds the documents. */
typedef void (*ixia_top_hits_fn)(const ixia_agg_t *g, cJSON *hits, void *ud);
void ixia_aggs_foreach_top_hits(const ixia_query_t *q, cJSON *result, ixia_top_hits_fn fn, void *ud);

/* The response "aggs" object:
 *   count                  {"value": N}
 *   sum                    {"value": X}            (0 when no values)
 *   avg, min, max          {"value": X | null}     (null when no values)
 *   terms                  {"buckets": [{"key": K, "count": N, <sub-name>: {...}}, ...],
 *                           "other_count": N}      (buckets by count desc, then key asc)
 *   percentiles            {"values": {"50": X | null, ...}, "exact": true|false}
 *                          (nearest rank: the ceil(p/100*n)-th smallest value)
 *   cardinality            {"value": N}
 * sum/avg/min/max/percentiles read every value of multi-valued fields; terms
 * counts a document once in each distinct value's bucket; count counts
 * documents. */
cJSON *ixia_aggs_result_json(const ixia_aggs_t *a);

/* Approximate bytes held, for the memory limit. */
guint64 ixia_aggs_memory(const ixia_aggs_t *a);

/* ---- exact sums ---- */

/* Shewchuk's non-overlapping partials (as Python's math.fsum): the result
 * is the correctly rounded sum whatever the order of the values, so sums
 * computed per shard, per block or per document merge without loss.
 * Zero-initialise; ixia_fsum_clear frees. */
typedef struct {
  double *parts; /* increasing magnitude; NULL until the first value */
  guint16 n, cap;
  guint special; /* infinities, NaN, overflow seen */
} ixia_fsum_t;

/* Adds x; returns the bytes the partials grew by (for memory accounting). */
gsize ixia_fsum_add(ixia_fsum_t *s, double x);
/* Adds every partial of b to s; returns the bytes grown. */
gsize ixia_fsum_merge(ixia_fsum_t *s, const ixia_fsum_t *b);
double ixia_fsum_result(const ixia_fsum_t *s);
void ixia_fsum_clear(ixia_fsum_t *s);

/* A superaccumulator (after Neal, "Fast exact summation using small and
 * large superaccumulators", 2015): the exact sum of many doubles as
 * integers, one per 32 bits of binary exponent. Adding a value is two
 * integer additions with no branch on the data, which is what column
 * aggregations need (a Shewchuk partial sum compares and branches per
 * value); ixia_xsum_into gives the same exact value as ixia_fsum_t would,
 * for merging and for the wire. Zero-initialise. A value's mantissa,
 * shifted to its place, lands as a 32-bit piece in one chunk and at most
 * 52 bits in the next; every IXIA_XSUM_RUN additions the chunks carry into
 * each other (ixia_xsum_carry), so no chunk can overflow however many
 * values are added. */
#define IXIA_XSUM_CHUNKS 69
#define IXIA_XSUM_RUN 512
typedef struct {
  gint64 c[IXIA_XSUM_CHUNKS]; /* value = sum of c[i] * 2^(32 i - 1074) */
  guint special;              /* infinities and NaN seen (as ixia_fsum_t) */
  guint run;                  /* additions since the last carry */
} ixia_xsum_t;

/* Carries every chunk into [-2^31, 2^31), leaving the value as it is. */
void ixia_xsum_carry(ixia_xsum_t *s);

static inline void ixia_xsum_add(ixia_xsum_t *s, double x) {
  guint64 bits;
  memcpy(&bits, &x, sizeof bits);
  guint e = (guint)(bits >> 52) & 0x7FF;
  if (G_UNLIKELY(e == 0x7FF)) {
    s->special |= (bits & G_GUINT64_CONSTANT(0xFFFFFFFFFFFFF)) ? 4u : (bits >> 63) ? 2u : 1u;
    return;
  }
  guint64 m = bits & G_GUINT64_CONSTANT(0xFFFFFFFFFFFFF);
  if (e) m |= G_GUINT64_CONSTANT(1) << 52;
  else e = 1;
  guint pos = e - 1, sh = pos & 31; /* the weight of m's lowest bit: 2^(pos - 1074) */
  gint64 *c = s->c + (pos >> 5);
  /* m << sh, up to 84 bits, as lo + hi * 2^32. */
  gint64 lo = (gint64)(guint32)(m << sh), hi = (gint64)(m >> (32 - sh));
  gint64 neg = -(gint64)(bits >> 63); /* 0 or -1: conditional negation without a branch */
  c[0] += (lo ^ neg) - neg;
  c[1] += (hi ^ neg) - neg;
  if (G_UNLIKELY(++s->run == IXIA_XSUM_RUN)) ixia_xsum_carry(s);
}
/* Adds the exact value of x to s; returns the bytes s grew by. */
gsize ixia_xsum_into(const ixia_xsum_t *x, ixia_fsum_t *s);

/* A window in front of a superaccumulator, for the values of one bucket:
 * those whose binary exponents lie within IXIA_XWIN_SPAN of the window's
 * base add as integers (the mantissa shifted to its place) into one 128-bit
 * accumulator, a few bytes that stay in the L1 cache, where the
 * superaccumulator's two chunks of 69 are scattered over 560 bytes a
 * bucket; the rest go to the superaccumulator as they come. The first
 * value of a normal magnitude sets the base, IXIA_XWIN_SPAN / 2 below its
 * exponent. Exact either way: ixia_xwin_flush adds the accumulated integer
 * to the superaccumulator, which must precede any read of it. An addition
 * is under 2^63, so 2^64 of them fit between flushes. Zero-initialise. */
#define IXIA_XWIN_SPAN 10u    /* 53-bit mantissa << 10: under 2^63 */
#define IXIA_XWIN_MAX_BASE 1900u /* the flushed pieces stay finite doubles */
__extension__ typedef __int128 ixia_i128;
typedef struct {
  ixia_i128 acc; /* sum of +-(mantissa << (exponent - base)) */
  guint32 base;  /* biased exponent of the accumulator's unit; 0 = not set */
} ixia_xwin_t;

/* Adds the value of bits, whose biased exponent lies sh <= IXIA_XWIN_SPAN
 * above w's base (set), to w's integer. */
static inline void ixia_xwin_add_at(ixia_xwin_t *w, guint64 bits, guint32 sh) {
  gint64 m = (gint64)(((bits & G_GUINT64_CONSTANT(0xFFFFFFFFFFFFF)) | G_GUINT64_CONSTANT(1) << 52) << sh);
  gint64 neg = -(gint64)(bits >> 63);
  w->acc += (m ^ neg) - neg;
}

static inline void ixia_xwin_add(ixia_xwin_t *w, ixia_xsum_t *s, double x) {
  guint64 bits;
  memcpy(&bits, &x, sizeof bits);
  guint32 e = (guint32)(bits >> 52) & 0x7FF;
  guint32 sh = e - w->base; /* wraps above the span for e < base */
  if (G_UNLIKELY(sh > IXIA_XWIN_SPAN || !w->base)) {
    if (w->base || e <= IXIA_XWIN_SPAN / 2 || e > IXIA_XWIN_MAX_BASE + IXIA_XWIN_SPAN / 2) {
      ixia_xsum_add(s, x); /* outside the window, subnormal, huge, inf or NaN */
      return;
    }
    w->base = e - IXIA_XWIN_SPAN / 2;
    sh = IXIA_XWIN_SPAN / 2;
  }
  ixia_xwin_add_at(w, bits, sh);
}
/* Moves what the window accumulated into s (exactly); the base stays. */
void ixia_xwin_flush(ixia_xwin_t *w, ixia_xsum_t *s);

/* ---- accumulating outside documents ----
 *
 * For an engine that aggregates whole blocks of documents at once (the
 * index's column engine): it keeps its own dense accumulators and merges
 * one summary per aggregation node and bucket into the state, instead of
 * one call per document. A cell is the state of one aggregation node: a
 * top-level one, or one inside a terms bucket. */
typedef struct ixia_agg_cell ixia_agg_cell_t;

/* The cell of q->aggs[i]. */
ixia_agg_cell_t *ixia_aggs_top_cell(ixia_aggs_t *a, guint i);

/* The sub-cells (g->n_subs, in g->subs order) of terms cell c's bucket for
 * the encoded value key, created when missing, with count documents added
 * to its count. NULL with IXIA_ETOOLARGE at query.max_terms_buckets or
 * query.max_memory_mb. */
ixia_agg_cell_t *ixia_aggs_cell_bucket(ixia_aggs_t *a, const ixia_agg_t *g, ixia_agg_cell_t *c,
                                       const guint8 *key, guint32 len, guint64 count,
                                       ixia_error_t **err);
/* Sub-cell i of a bucket's cells. */
ixia_agg_cell_t *ixia_aggs_cell_sub(ixia_agg_cell_t *subs, guint i);

/* A top_hits candidate an engine found (borrowed). */
typedef struct {
  const char *key;
  gint64 version;
  GBytes *const *sort; /* g->n_sort values, NULL = missing */
} ixia_agg_hit_t;

/* What an engine accumulated for one (non-bucket) node in one bucket. */
typedef struct {
  guint64 n;            /* COUNT: documents; others: values read */
  ixia_fsum_t sum;      /* SUM, AVG, STATS */
  double ext;           /* MIN, MAX; STATS: the minimum (when n > 0) */
  double max;           /* STATS: the maximum */
  const ixia_agg_hit_t *hits; /* TOP_HITS: its best (any number; the state keeps g->size) */
  guint n_hits;
  const double *values; /* PERCENTILES: every value read (n of them) */
  const guint64 *hashes; /* CARDINALITY: ixia_val_hash of each distinct value */
  guint n_hashes;
} ixia_agg_summary_t;

gboolean ixia_aggs_cell_merge(ixia_aggs_t *a, const ixia_agg_t *g, ixia_agg_cell_t *c,
                              const ixia_agg_summary_t *s, ixia_error_t **err);

/* The 64-bit hash cardinality counts an encoded value by. */
guint64 ixia_val_hash(const guint8 *p, guint32 len);

#endif
