/* Relevance: BM25 of a document for the match and match_phrase clauses of
 * a query, and the brute-force statistics the tests score with.
 *
 * The formula lives here once (ixia_bm25); the index (indexer/idx_score.c)
 * feeds it the statistics of its shard: N and df from the cardinality of
 * its postings, avgdl from the token count it keeps per field, tf and dl
 * from the text field's column. Brute force feeds it the same figures
 * counted over a set of documents, clause by clause and token by token in
 * the same order, so both sides compute the same doubles. */
#include "internal.h"

double ixia_bm25(double tf, double dl, double avgdl, double df, double n) {
  if (tf <= 0 || n <= 0) return 0.0;
  double idf = log(1.0 + (n - df + 0.5) / (df + 0.5));
  double norm = IXIA_BM25_K1 * (1.0 - IXIA_BM25_B + IXIA_BM25_B * dl / (avgdl > 0 ? avgdl : 1.0));
  return idf * tf * (IXIA_BM25_K1 + 1.0) / (tf + norm);
}

/* The scoring clauses of a filter, in order: match and match_phrase
 * outside any "not". */
static void scoring_clauses(const ixia_filter_t *f, GPtrArray *out) {
  if (f->kind == IXIA_F_MATCH || f->kind == IXIA_F_MATCH_PHRASE) {
    g_ptr_array_add(out, (gpointer)f);
    return;
  }
  if (f->kind == IXIA_F_NOT) return;
  for (guint i = 0; i < f->n_children; i++) scoring_clauses(f->children[i], out);
}

GPtrArray *ixia_query_scoring_clauses(const ixia_query_t *q) {
  GPtrArray *out = g_ptr_array_new();
  if (q->filter) scoring_clauses(q->filter, out);
  return out;
}

/* Per scoring field: documents with a token, their tokens, and per token
 * the documents holding it. */
typedef struct {
  const ixia_schema_field_t *ix;
  double n, total;
  GHashTable *df; /* GBytes token -> count (as pointer) */
} fstats_t;

struct ixia_bm25_stats {
  GPtrArray *clauses; /* const ixia_filter_t* */
  GPtrArray *fields;  /* fstats_t* */
};

static fstats_t *fstats_of(const ixia_bm25_stats_t *st, const ixia_schema_field_t *ix) {
  for (guint i = 0; i < st->fields->len; i++)
    if (((fstats_t *)st->fields->pdata[i])->ix == ix) return st->fields->pdata[i];
  return NULL;
}

static void fstats_free(gpointer p) {
  fstats_t *f = p;
  g_hash_table_destroy(f->df);
  g_free(f);
}

ixia_bm25_stats_t *ixia_bm25_stats_new(const ixia_query_t *q) {
  ixia_bm25_stats_t *st = g_new0(ixia_bm25_stats_t, 1);
  st->clauses = ixia_query_scoring_clauses(q);
  st->fields = g_ptr_array_new_with_free_func(fstats_free);
  for (guint i = 0; i < st->clauses->len; i++) {
    const ixia_filter_t *f = st->clauses->pdata[i];
    if (fstats_of(st, f->field)) continue;
    fstats_t *fs = g_new0(fstats_t, 1);
    fs->ix = f->field;
    fs->df = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
    g_ptr_array_add(st->fields, fs);
  }
  return st;
}

void ixia_bm25_stats_free(ixia_bm25_stats_t *st) {
  if (!st) return;
  g_ptr_array_free(st->clauses, TRUE);
  g_ptr_array_free(st->fields, TRUE);
  g_free(st);
}

void ixia_bm25_stats_add(ixia_bm25_stats_t *st, const cJSON *doc) {
  for (guint i = 0; i < st->fields->len; i++) {
    fstats_t *fs = st->fields->pdata[i];
    GArray *toks = ixia_doc_tokens(doc, fs->ix);
    if (toks->len) {
      fs->n++;
      fs->total += toks->len;
      GHashTable *seen = g_hash_table_new(g_bytes_hash, g_bytes_equal);
      for (guint k = 0; k < toks->len; k++) {
        GBytes *t = g_array_index(toks, ixia_token_t, k).tok;
        if (!g_hash_table_add(seen, t)) continue;
        gpointer c = g_hash_table_lookup(fs->df, t);
        g_hash_table_replace(fs->df, g_bytes_ref(t), GSIZE_TO_POINTER(GPOINTER_TO_SIZE(c) + 1));
      }
      g_hash_table_destroy(seen);
    }
    ixia_tokens_free(toks);
  }
}

double ixia_query_score_doc(const ixia_query_t *q, const ixia_bm25_stats_t *st, const cJSON *doc) {
  (void)q;
  double score = 0.0;
  for (guint i = 0; i < st->clauses->len; i++) {
    const ixia_filter_t *f = st->clauses->pdata[i];
    fstats_t *fs = fstats_of(st, f->field);
    GArray *toks = ixia_doc_tokens(doc, f->field);
    double dl = toks->len, avgdl = fs->n > 0 ? fs->total / fs->n : 0;
    GHashTable *done = g_hash_table_new(g_bytes_hash, g_bytes_equal);
    for (guint k = 0; k < f->values->len; k++) {
      GBytes *t = f->values->pdata[k];
      if (!g_hash_table_add(done, t)) continue; /* a phrase may repeat a word */
      double tf = 0;
      for (guint j = 0; j < toks->len; j++) tf += g_bytes_equal(g_array_index(toks, ixia_token_t, j).tok, t);
      double df = (double)GPOINTER_TO_SIZE(g_hash_table_lookup(fs->df, t));
      score += ixia_bm25(tf, dl, avgdl, df, fs->n);
    }
    g_hash_table_destroy(done);
    ixia_tokens_free(toks);
  }
  return score;
}
