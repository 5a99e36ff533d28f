/* Relevance on a shard: the BM25 score of a document for the query's match
 * and match_phrase clauses (query/score.c has the formula and what it sums).
 *
 * The statistics are this shard's, read when the search starts: N is the
 * cardinality of the field's exists posting (documents with a token), df
 * that of the token's posting, avgdl the field's token total (kept exact
 * by the apply thread, written with every batch) over N. A document's
 * length and term counts come from its text field's column block (one
 * 64-bit entry per distinct token, after the length), read a block of
 * 1,024 documents at a time through the decoded-block cache: scoring a
 * match costs a short scan of its slot, no read of the document. */
#include <stdatomic.h>
#include <math.h>
#include <string.h>

#include "idx.h"

typedef struct {
  field_t *f;
  GArray *vids; /* guint32: the clause's distinct tokens in the dictionary, in query order */
  GArray *df;   /* double: documents holding each vid */
  double n, avgdl;
  blk_t *col;
  guint32 block;
} sclause_t;

struct ixia_idx_scorer {
  ixia_idx_search_t *s;
  GArray *clauses; /* sclause_t */
};

static gboolean clause_init(ixia_idx_search_t *s, const ixia_filter_t *f, sclause_t *c) {
  c->vids = g_array_new(FALSE, FALSE, sizeof(guint32));
  c->df = g_array_new(FALSE, FALSE, sizeof(double));
  c->block = G_MAXUINT32;
  c->f = ixia_idx_field_lookup(s->idx, s->table, f->field);
  if (!c->f) return TRUE; /* nothing indexed under it: scores 0 */
  blk_t *e = ixia_idx_posting(s->idx, K_POST, c->f->id, VID_EXISTS, s->err);
  if (!e) return FALSE;
  c->n = (double)roaring_bitmap_get_cardinality(e->bm);
  ixia_idx_blk_unref(e);
  gint64 total = (gint64)atomic_load(&c->f->total_len);
  c->avgdl = c->n > 0 ? (double)total / c->n : 0;
  GHashTable *done = g_hash_table_new(g_bytes_hash, g_bytes_equal);
  for (guint i = 0; i < f->values->len; i++) {
    GBytes *tok = f->values->pdata[i];
    if (!g_hash_table_add(done, tok)) continue; /* a phrase may repeat a word */
    gsize len;
    const guint8 *p = g_bytes_get_data(tok, &len);
    g_rw_lock_reader_lock(&s->idx->dict_lock);
    gint64 vid = ixia_idx_value_id(c->f, p, len);
    g_rw_lock_reader_unlock(&s->idx->dict_lock);
    if (vid < 0) continue; /* in no document: adds 0 */
    blk_t *pb = ixia_idx_posting(s->idx, K_POST, c->f->id, (guint32)vid, s->err);
    if (!pb) {
      g_hash_table_destroy(done);
      return FALSE;
    }
    double df = (double)roaring_bitmap_get_cardinality(pb->bm);
    ixia_idx_blk_unref(pb);
    guint32 v = (guint32)vid;
    g_array_append_val(c->vids, v);
    g_array_append_val(c->df, df);
  }
  g_hash_table_destroy(done);
  return TRUE;
}

ixia_idx_scorer_t *ixia_idx_scorer_new(ixia_idx_search_t *s, gboolean *ok) {
  *ok = TRUE;
  GPtrArray *fs = ixia_query_scoring_clauses(s->q);
  ixia_idx_scorer_t *sc = g_new0(ixia_idx_scorer_t, 1);
  sc->s = s;
  sc->clauses = g_array_new(FALSE, TRUE, sizeof(sclause_t));
  g_array_set_size(sc->clauses, fs->len);
  for (guint i = 0; *ok && i < fs->len; i++)
    *ok = clause_init(s, fs->pdata[i], &g_array_index(sc->clauses, sclause_t, i));
  g_ptr_array_free(fs, TRUE);
  if (!*ok) {
    ixia_idx_scorer_free(sc);
    return NULL;
  }
  return sc;
}

void ixia_idx_scorer_free(ixia_idx_scorer_t *sc) {
  if (!sc) return;
  for (guint i = 0; i < sc->clauses->len; i++) {
    sclause_t *c = &g_array_index(sc->clauses, sclause_t, i);
    if (c->vids) g_array_free(c->vids, TRUE);
    if (c->df) g_array_free(c->df, TRUE);
    ixia_idx_blk_unref(c->col);
  }
  g_array_free(sc->clauses, TRUE);
  g_free(sc);
}

static inline guint64 bits_of(double d) {
  guint64 b;
  memcpy(&b, &d, 8);
  return b;
}

double ixia_idx_score(ixia_idx_scorer_t *sc, guint32 id, gboolean *ok) {
  double score = 0.0;
  guint32 block = id >> BLOCK_BITS, slot = id & (BLOCK_SLOTS - 1);
  for (guint i = 0; i < sc->clauses->len; i++) {
    sclause_t *c = &g_array_index(sc->clauses, sclause_t, i);
    if (!c->f || c->vids->len == 0) continue;
    if (c->block != block) {
      ixia_idx_blk_unref(c->col);
      c->col = ixia_idx_column(sc->s->idx, c->f->id, 8, block, sc->s->err);
      c->block = block;
      if (!c->col) {
        *ok = FALSE;
        return 0.0;
      }
    }
    guint32 n;
    const double *v = col_slot(c->col->col, slot, &n);
    if (n == 0) continue;
    double dl = (double)(bits_of(v[0]) & 0xffffffffu);
    for (guint k = 0; k < c->vids->len; k++) {
      guint64 want = (guint64)g_array_index(c->vids, guint32, k) + 1;
      double tf = 0;
      for (guint32 j = 1; j < n; j++) {
        guint64 e = bits_of(v[j]);
        if (e >> 32 == want) {
          tf = (double)(e & 0xffffffffu);
          break;
        }
      }
      score += ixia_bm25(tf, dl, c->avgdl, g_array_index(c->df, double, k), c->n);
    }
  }
  return score;
}
