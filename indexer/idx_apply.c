/* Applying change events: document records, and turning a batch of events
 * into one RocksDB write batch plus its publication in memory.
 *
 * A document's record (K) keeps what it was indexed under: (field, value)
 * pairs, where the value is a dictionary id for keyword, text and bool
 * fields and the order-preserving 64-bit number for numeric ones. An update
 * diffs old and new pairs, so it touches only the postings, counts, points
 * and column slots that changed, and a delete removes everything without
 * reading the truth store. Version rule: an event applies when its version
 * is >= the record's; a delete leaves a tombstone so a late, older put stays
 * out.
 *
 * A batch accumulates, per posting key, the ids to add and remove (later
 * events win) and writes one merge operand per key; per column block one
 * operand; per dictionary value its new count. Nothing a search reads
 * changes until RocksDB has the batch (see idx.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"
#include "json.h"

/* ------------------------------------------------------------- records */

typedef struct {
  guint32 id;
  gboolean exists; /* has an id (stored or assigned in this batch) */
  gboolean dirty;
  gint64 version, expire_at;
  gboolean deleted;
  GArray *pairs; /* pair_t sorted by (field, val) */
  GArray *lens;  /* lenp_t sorted by field: token counts of its text fields */
} rec_t;

/* A text field's token count in a document (BM25's dl). */
typedef struct {
  guint32 field, len;
} lenp_t;

static void rec_free(gpointer p) {
  rec_t *r = p;
  g_array_free(r->pairs, TRUE);
  g_array_free(r->lens, TRUE);
  g_free(r);
}

/* A text field's length in a record, 0 when absent. */
static guint32 rec_len(const rec_t *r, guint32 field) {
  for (guint i = 0; i < r->lens->len; i++)
    if (g_array_index(r->lens, lenp_t, i).field == field) return g_array_index(r->lens, lenp_t, i).len;
  return 0;
}

static int pair_cmp(gconstpointer a, gconstpointer b) {
  const pair_t *x = a, *y = b;
  if (x->field != y->field) return x->field < y->field ? -1 : 1;
  return x->val < y->val ? -1 : x->val > y->val;
}

/* u32 id, i64 version, i64 expire_at, u8 flags, u32 n, n x (u32 field, u64 value),
 * then u32 m, m x (u32 field, u32 tokens) for its text fields. */
gboolean ixia_idx_rec_decode(const char *v, size_t vl, guint32 *id, gint64 *version,
                             gboolean *deleted, GArray *pairs) {
  if (vl < 25) return FALSE;
  guint32 n = ixia_bytes_get32(v + 21);
  if (n > (vl - 25) / 12) return FALSE;
  *id = ixia_bytes_get32(v);
  *version = (gint64)ixia_bytes_get64(v + 4);
  *deleted = (v[20] & REC_DELETED) != 0;
  if (pairs) {
    g_array_set_size(pairs, n);
    for (guint32 i = 0; i < n; i++) {
      const char *p = v + 25 + (size_t)i * 12;
      g_array_index(pairs, pair_t, i) = (pair_t){ixia_bytes_get32(p), ixia_bytes_get64(p + 4)};
    }
  }
  return TRUE;
}

gint64 ixia_idx_rec_expire_at(const char *v, size_t vl) { return vl >= 25 ? (gint64)ixia_bytes_get64(v + 12) : 0; }

static gboolean rec_decode(const char *v, size_t vl, rec_t *r) {
  if (!ixia_idx_rec_decode(v, vl, &r->id, &r->version, &r->deleted, r->pairs)) return FALSE;
  r->expire_at = ixia_idx_rec_expire_at(v, vl);
  r->exists = TRUE;
  size_t off = 25 + (size_t)r->pairs->len * 12;
  if (vl < off + 4) return vl == off;
  guint32 m = ixia_bytes_get32(v + off);
  if (m != (vl - off - 4) / 8 || (vl - off - 4) % 8) return FALSE;
  g_array_set_size(r->lens, m);
  for (guint32 i = 0; i < m; i++)
    g_array_index(r->lens, lenp_t, i) = (lenp_t){ixia_bytes_get32(v + off + 4 + 8 * i), ixia_bytes_get32(v + off + 8 + 8 * i)};
  return TRUE;
}

static GByteArray *rec_encode(const rec_t *r) {
  GByteArray *b = g_byte_array_sized_new(25 + r->pairs->len * 12);
  ixia_bytes_append32(b, r->id);
  ixia_bytes_append64(b, (guint64)r->version);
  ixia_bytes_append64(b, (guint64)r->expire_at);
  guint8 flags = r->deleted ? REC_DELETED : 0;
  g_byte_array_append(b, &flags, 1);
  ixia_bytes_append32(b, r->pairs->len);
  for (guint i = 0; i < r->pairs->len; i++) {
    const pair_t *p = &g_array_index(r->pairs, pair_t, i);
    ixia_bytes_append32(b, p->field);
    ixia_bytes_append64(b, p->val);
  }
  ixia_bytes_append32(b, r->lens->len);
  for (guint i = 0; i < r->lens->len; i++) {
    ixia_bytes_append32(b, g_array_index(r->lens, lenp_t, i).field);
    ixia_bytes_append32(b, g_array_index(r->lens, lenp_t, i).len);
  }
  return b;
}

GBytes *ixia_idx_doc_key(guint32 table_id, const char *key, size_t key_len) {
  guint8 *k = g_malloc(5 + key_len);
  k[0] = K_DOC;
  ixia_bytes_put32(k + 1, table_id);
  if (key_len) memcpy(k + 5, key, key_len);
  return g_bytes_new_take(k, 5 + key_len);
}

/* -------------------------------------------------------------- batches */

/* Pending changes of one posting or column key; the key is inline (hashed
 * by content) so a change allocates nothing once its key is known. */
typedef struct {
  guint8 key[11];
  guint8 klen;
  roaring_bitmap_t *add, *rem; /* postings */
  GByteArray *col;             /* column operand */
} pend_t;

static guint pend_hash(gconstpointer p) {
  const pend_t *o = p;
  guint h = 2166136261u;
  for (guint i = 0; i < o->klen; i++) h = (h ^ o->key[i]) * 16777619u;
  return h;
}

static gboolean pend_equal(gconstpointer a, gconstpointer b) {
  const pend_t *x = a, *y = b;
  return x->klen == y->klen && memcmp(x->key, y->key, x->klen) == 0;
}

static void pend_free(gpointer p) {
  pend_t *o = p;
  if (o->add) roaring_bitmap_free(o->add);
  if (o->rem) roaring_bitmap_free(o->rem);
  if (o->col) g_byte_array_free(o->col, TRUE);
  g_free(o);
}

static pend_t *pend_get(GHashTable *h, const pend_t *probe) {
  pend_t *o = g_hash_table_lookup(h, probe);
  if (!o) {
    o = g_new0(pend_t, 1);
    memcpy(o->key, probe->key, probe->klen);
    o->klen = probe->klen;
    g_hash_table_add(h, o);
  }
  return o;
}

/* New dictionary values of one field in this batch. */
typedef struct {
  GPtrArray *vals;  /* GBytes*, value ids from field->vals->len on */
  GHashTable *ids;  /* GBytes* -> value id + 1 */
} stage_t;

static void stage_free(gpointer p) {
  stage_t *s = p;
  g_ptr_array_free(s->vals, TRUE);
  g_hash_table_destroy(s->ids);
  g_free(s);
}

/* A document's state before an event of the batch (idx_history.c). */
typedef struct {
  guint32 id;
  gboolean was_live;
  GArray *pairs; /* pair_t, text fields left out */
} hnote_t;

/* A document's new doc value slot (idx_docvals.c), published in order. */
typedef struct {
  field_t *f;
  guint32 id, n;
  guint64 first; /* the first value: double bits or a value id */
} dvnote_t;

typedef struct {
  ixia_idx_t *idx;
  rocksdb_writebatch_t *wb;
  GArray *hist;        /* hnote_t, in event order */
  GHashTable *len_delta; /* field_t* -> gint64 change of its total token count (as pointer) */
  GHashTable *recs;    /* GBytes doc key -> rec_t* (overlay of this batch) */
  GHashTable *posts;   /* pend_t* of posting and live keys */
  GHashTable *cols;    /* pend_t* of column keys */
  GHashTable *stages;  /* field_t* -> stage_t* */
  GHashTable *counts;  /* field id << 32 | value id -> count delta (gint) */
  GHashTable *points;  /* field_t* -> GArray of ixia_point_change_t */
  GArray *dvals;       /* dvnote_t, in event order */
  GHashTable *schemas; /* table_t* -> ixia_schema_t* (reference) applied in this batch */
  GPtrArray *new_dict; /* GBytes key/value pairs of new tables and fields */
  GHashTable *field_of; /* const ixia_schema_field_t* (of a live schema) -> field_t* */
  GHashTable *stale;   /* table_t* -> STALE_SOME or STALE_NONE: its stale set (idx.h) */
  guint32 next_doc_id;
  _Atomic gint64 max_version;
} batch_t;

static void wb_put(batch_t *b, const void *k, size_t kl, const void *v, size_t vl) {
  rocksdb_writebatch_put(b->wb, k, kl, v, vl);
}

/* The pending changes of one posting chunk. */
static pend_t *post_pend(batch_t *b, char prefix, guint32 a, guint32 v, guint32 chunk) {
  pend_t probe;
  probe.klen = (guint8)key_post(probe.key, prefix, a, v, (guint16)chunk);
  pend_t *o = pend_get(b->posts, &probe);
  if (!o->add) {
    o->add = roaring_bitmap_create();
    o->rem = roaring_bitmap_create();
  }
  return o;
}

static void post_change(batch_t *b, char prefix, guint32 a, guint32 v, guint32 id, gboolean add) {
  pend_t *o = post_pend(b, prefix, a, v, id >> CHUNK_BITS);
  /* Later changes of the batch win, as operands compose. */
  roaring_bitmap_add(add ? o->add : o->rem, id);
  roaring_bitmap_remove(add ? o->rem : o->add, id);
}

/* post_change(add) of every id of ids, a chunk at a time, as bitmaps. */
static void post_add_all(batch_t *b, char prefix, guint32 a, guint32 v, const roaring_bitmap_t *ids) {
  if (roaring_bitmap_is_empty(ids)) return;
  guint32 last = roaring_bitmap_maximum(ids) >> CHUNK_BITS;
  for (guint32 c = roaring_bitmap_minimum(ids) >> CHUNK_BITS; c <= last; c++) {
    roaring_bitmap_t *chunk =
        roaring_bitmap_from_range((guint64)c << CHUNK_BITS, (guint64)(c + 1) << CHUNK_BITS, 1);
    roaring_bitmap_and_inplace(chunk, ids);
    if (!roaring_bitmap_is_empty(chunk)) {
      pend_t *o = post_pend(b, prefix, a, v, c);
      roaring_bitmap_or_inplace(o->add, chunk);
      roaring_bitmap_andnot_inplace(o->rem, chunk);
    }
    roaring_bitmap_free(chunk);
  }
}

static void col_set(batch_t *b, field_t *f, guint32 id, const pair_t *vals, guint n) {
  if (f->dv) {
    dvnote_t dn = {f, id, n, 0};
    if (n && f->numeric) {
      double d = num_of_key(vals[0].val);
      memcpy(&dn.first, &d, 8);
    } else if (n) {
      dn.first = (guint32)vals[0].val;
    }
    g_array_append_val(b->dvals, dn);
  }
  pend_t probe;
  probe.klen = (guint8)key_col(probe.key, f->id, id >> BLOCK_BITS);
  pend_t *o = pend_get(b->cols, &probe);
  guint8 width = f->numeric ? 8 : 4;
  if (!o->col) {
    o->col = g_byte_array_new();
    guint8 head[2] = {COL_SPARSE, width};
    g_byte_array_append(o->col, head, 2);
  }
  guint32 slot = id & (BLOCK_SLOTS - 1);
  guint8 h[2] = {(guint8)(slot >> 8), (guint8)slot};
  g_byte_array_append(o->col, h, 2);
  ixia_bytes_append32(o->col, n);
  for (guint i = 0; i < n; i++) {
    if (!f->numeric) {
      ixia_bytes_append32(o->col, (guint32)vals[i].val);
      continue;
    }
    double d = num_of_key(vals[i].val);
    guint64 bits;
    memcpy(&bits, &d, 8);
    ixia_bytes_append64(o->col, bits);
  }
}

/* A slot of a text field's term column (K_COL) or position column (K_POS):
 * raw 64-bit entries; none clears the slot. */
static void col_set_raw(batch_t *b, char prefix, const field_t *f, guint32 id, const guint64 *vals,
                        guint n) {
  pend_t probe;
  probe.klen = (guint8)key_colp(probe.key, prefix, f->id, id >> BLOCK_BITS);
  pend_t *o = pend_get(b->cols, &probe);
  if (!o->col) {
    o->col = g_byte_array_new();
    guint8 head[2] = {COL_SPARSE, 8};
    g_byte_array_append(o->col, head, 2);
  }
  guint32 slot = id & (BLOCK_SLOTS - 1);
  guint8 h[2] = {(guint8)(slot >> 8), (guint8)slot};
  g_byte_array_append(o->col, h, 2);
  ixia_bytes_append32(o->col, n);
  for (guint i = 0; i < n; i++) ixia_bytes_append64(o->col, vals[i]);
}

static void len_change(batch_t *b, field_t *f, gint64 delta) {
  if (!delta) return;
  gint64 now = (gint64)GPOINTER_TO_SIZE(g_hash_table_lookup(b->len_delta, f)) + delta;
  g_hash_table_insert(b->len_delta, f, GSIZE_TO_POINTER((gsize)now));
}

static void count_change(batch_t *b, guint32 field, guint32 vid, gint delta) {
  gpointer key = GSIZE_TO_POINTER((gsize)field << 32 | vid);
  gint now = GPOINTER_TO_INT(g_hash_table_lookup(b->counts, key)) + delta;
  g_hash_table_insert(b->counts, key, GINT_TO_POINTER(now));
}

static void point_change(batch_t *b, field_t *f, guint64 key, guint32 id, gboolean add) {
  GArray *a = g_hash_table_lookup(b->points, f);
  if (!a) {
    a = g_array_new(FALSE, FALSE, sizeof(ixia_point_change_t));
    g_hash_table_insert(b->points, f, a);
  }
  ixia_point_change_t c = {key, id, add};
  g_array_append_val(a, c);
}

/* Queues a new dictionary entry (key -> 32-bit id) for the batch's write. */
static void dict_add(batch_t *b, GByteArray *key, guint32 id) {
  guint8 v[4];
  ixia_bytes_put32(v, id);
  g_ptr_array_add(b->new_dict, g_byte_array_free_to_bytes(key));
  g_ptr_array_add(b->new_dict, g_bytes_new(v, 4));
}

static table_t *table_get_or_create(batch_t *b, const char *ns, const char *name) {
  ixia_idx_t *idx = b->idx;
  table_t *t = ixia_idx_table_find(idx, ns, name);
  if (t) return t;
  t = ixia_idx_table_new(idx->tables_by_id->len, ns, name);
  GByteArray *k = g_byte_array_new();
  guint8 p = K_TABLE, zero = 0;
  g_byte_array_append(k, &p, 1);
  g_byte_array_append(k, (const guint8 *)ns, (guint)strlen(ns));
  g_byte_array_append(k, &zero, 1);
  g_byte_array_append(k, (const guint8 *)name, (guint)strlen(name));
  dict_add(b, k, t->id);
  g_rw_lock_writer_lock(&idx->dict_lock);
  ixia_idx_table_register(idx, t);
  g_rw_lock_writer_unlock(&idx->dict_lock);
  return t;
}

/* Tables and fields are registered at once (a search finding an empty one
 * sees nothing); their dictionary keys go with this or the next batch. */
static field_t *field_get_or_create(batch_t *b, table_t *t, const ixia_schema_field_t *ix) {
  ixia_idx_t *idx = b->idx;
  field_t *f = g_hash_table_lookup(b->field_of, ix);
  if (f) return f;
  f = ixia_idx_field_find(t, ix);
  if (!f) {
    f = ixia_idx_field_new(idx->fields->len, t->id, ix->type, ix->field, ix->analyzer, &idx->docvals);
    GByteArray *k = g_byte_array_new();
    guint8 p = K_FIELD, type = (guint8)ix->type, nul = 0;
    g_byte_array_append(k, &p, 1);
    ixia_bytes_append32(k, t->id);
    g_byte_array_append(k, &type, 1);
    g_byte_array_append(k, (const guint8 *)ix->field, (guint)strlen(ix->field));
    if (f->analyzer) {
      g_byte_array_append(k, &nul, 1);
      g_byte_array_append(k, (const guint8 *)f->analyzer, (guint)strlen(f->analyzer));
    }
    dict_add(b, k, f->id);
    g_rw_lock_writer_lock(&idx->dict_lock);
    ixia_idx_field_register(idx, f);
    g_rw_lock_writer_unlock(&idx->dict_lock);
  }
  g_hash_table_insert(b->field_of, (gpointer)ix, f);
  return f;
}

/* The value id of val in f: the dictionary's, or a new one staged in the
 * batch (published with it). */
static guint32 value_get_or_create(batch_t *b, field_t *f, GBytes *val) {
  gpointer id = g_hash_table_lookup(f->ids, val);
  if (id) return GPOINTER_TO_UINT(id) - 1;
  stage_t *s = g_hash_table_lookup(b->stages, f);
  if (!s) {
    s = g_new0(stage_t, 1);
    s->vals = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    s->ids = g_hash_table_new(g_bytes_hash, g_bytes_equal);
    g_hash_table_insert(b->stages, f, s);
  }
  id = g_hash_table_lookup(s->ids, val);
  if (id) return GPOINTER_TO_UINT(id) - 1;
  guint32 vid = f->vals->len + s->vals->len;
  g_ptr_array_add(s->vals, g_bytes_ref(val));
  g_hash_table_insert(s->ids, val, GUINT_TO_POINTER(vid + 1));
  /* Its dictionary entry is written with its count at emit. */
  count_change(b, f->id, vid, 0);
  return vid;
}

static gboolean db_get(ixia_idx_t *idx, const void *k, size_t klen, char **val, size_t *vlen,
                       ixia_error_t **err) {
  char *rerr = NULL;
  *val = rocksdb_get(idx->db, idx->ropts, k, klen, vlen, &rerr);
  return ixia_error_from_rocksdb(err, rerr, "index read");
}

/* The overlay record of a key (loaded on first use). */
static rec_t *rec_get(batch_t *b, guint32 table_id, const char *key, size_t key_len,
                      ixia_error_t **err) {
  GBytes *k = ixia_idx_doc_key(table_id, key, key_len);
  rec_t *r = g_hash_table_lookup(b->recs, k);
  if (r) {
    g_bytes_unref(k);
    return r;
  }
  gsize kl;
  const char *kp = g_bytes_get_data(k, &kl);
  char *v;
  size_t vl;
  if (!db_get(b->idx, kp, kl, &v, &vl, err)) {
    g_bytes_unref(k);
    return NULL;
  }
  r = g_new0(rec_t, 1);
  r->pairs = g_array_new(FALSE, FALSE, sizeof(pair_t));
  r->lens = g_array_new(FALSE, FALSE, sizeof(lenp_t));
  gboolean ok = !v || rec_decode(v, vl, r);
  rocksdb_free(v);
  if (!ok) {
    ixia_error_set(err, IXIA_EINTERNAL, "corrupt document record in index");
    rec_free(r);
    g_bytes_unref(k);
    return NULL;
  }
  g_hash_table_insert(b->recs, k, r);
  return r;
}

static void rec_assign_id(batch_t *b, rec_t *r) {
  r->id = b->next_doc_id++;
  r->exists = TRUE;
}

static field_t *field_by_id(ixia_idx_t *idx, guint32 fid) {
  return fid < idx->fields->len ? idx->fields->pdata[fid] : NULL;
}

/* Updates postings, counts, points, live set and columns of document id
 * from its old pairs to its new ones. */
static void rec_diff(batch_t *b, guint32 table_id, guint32 id, const GArray *oldp,
                     gboolean was_live, const GArray *newp, gboolean now_live) {
  guint on = oldp ? oldp->len : 0, nn = newp ? newp->len : 0;
  const pair_t *op = on ? (const pair_t *)(void *)oldp->data : NULL;
  const pair_t *np = nn ? (const pair_t *)(void *)newp->data : NULL;
  guint i = 0, j = 0;
  while (i < on || j < nn) {
    /* One field at a time: its old run [i, ie) and new run [j, je). */
    guint32 fid = i < on && (j >= nn || op[i].field <= np[j].field) ? op[i].field : np[j].field;
    guint ie = i, je = j;
    while (ie < on && op[ie].field == fid) ie++;
    while (je < nn && np[je].field == fid) je++;
    field_t *f = field_by_id(b->idx, fid);
    gboolean changed = FALSE;
    guint a = i, c = j;
    while (f && (a < ie || c < je)) {
      int cmp = a >= ie ? 1 : c >= je ? -1 : pair_cmp(&op[a], &np[c]);
      if (cmp == 0) {
        a++, c++;
        continue;
      }
      const pair_t *p = cmp < 0 ? &op[a++] : &np[c++];
      gboolean add = cmp > 0;
      changed = TRUE;
      if (f->numeric) {
        point_change(b, f, p->val, id, add);
      } else {
        post_change(b, K_POST, fid, (guint32)p->val, id, add);
        count_change(b, fid, (guint32)p->val, add ? 1 : -1);
      }
    }
    if (f && (ie > i) != (je > j)) post_change(b, K_POST, fid, VID_EXISTS, id, je > j);
    if (f && changed && f->type != IXIA_FIELD_TEXT) col_set(b, f, id, np ? np + j : NULL, je - j);
    i = ie;
    j = je;
  }
  if (was_live != now_live) post_change(b, K_LIVE, table_id, LIVE_ALL, id, now_live);
}

static void fail_event(ixia_idx_t *idx, const ixia_idx_event_t *ev, ixia_error_t *why,
                       ixia_idx_failed_fn failed, void *ud) {
  atomic_fetch_add(&idx->events_failed, 1);
  if (failed) failed(ev, why, ud);
  ixia_error_destroy(why);
}

/* Extracts and validates every declared field's values of a document. */
static GPtrArray **doc_extract(ixia_idx_t *idx, const ixia_schema_t *s, const cJSON *doc,
                               GArray **occs, ixia_error_t **err) {
  GPtrArray **vals = g_new0(GPtrArray *, s->n_indexes + 1);
  for (guint i = 0; i < s->n_indexes; i++) {
    vals[i] = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    /* Text: every occurrence too (term counts, length, positions). */
    gboolean ok = s->indexes[i].type == IXIA_FIELD_TEXT
                      ? ixia_doc_text(doc, &s->indexes[i], vals[i], &occs[i], err)
                      : ixia_doc_values(doc, &s->indexes[i], vals[i], err);
    if (!ok) goto fail;
    if (vals[i]->len > idx->max_values) {
      ixia_error_set(err, IXIA_ETOOLARGE,
                     "field %s has %u values, more than index.max_values_per_field (%u)",
                     s->indexes[i].field, vals[i]->len, idx->max_values);
      goto fail;
    }
  }
  return vals;
fail:
  for (guint i = 0; i < s->n_indexes; i++) {
    if (vals[i]) g_ptr_array_free(vals[i], TRUE);
    ixia_tokens_free(occs[i]);
    occs[i] = NULL;
  }
  g_free(vals);
  return NULL;
}

static gboolean field_listed(field_t *const *fs, guint n, const field_t *f) {
  for (guint i = 0; i < n; i++)
    if (fs[i] == f) return TRUE;
  return FALSE;
}

/* A text field's columns for one document: its length and term counts,
 * and its positions when the field stores them. */
static void text_columns(batch_t *b, field_t *f, const ixia_schema_field_t *ix, guint32 id,
                         GPtrArray *distinct, const guint32 *vids, GArray *occ) {
  guint n = distinct->len;
  guint32 *tf = g_new0(guint32, MAX(n, 1));
  guint64 *pos = ix->positions ? g_new(guint64, MAX(occ->len, 1)) : NULL;
  for (guint k = 0; k < occ->len; k++) {
    const ixia_token_t *t = &g_array_index(occ, ixia_token_t, k);
    /* distinct is sorted and holds every token (ixia_doc_text): a binary
     * search, where a hash table built per document cost more than the
     * few lookups it served. */
    gint found = ixia_values_find(distinct, t->tok);
    g_assert(found >= 0);
    guint j = (guint)found;
    tf[j]++;
    if (pos) pos[k] = term_entry(vids[j], t->pos);
  }
  guint64 *terms = g_new(guint64, n + 1);
  terms[0] = occ->len;
  for (guint j = 0; j < n; j++) terms[j + 1] = term_entry(vids[j], tf[j]);
  col_set_raw(b, K_COL, f, id, terms, occ->len ? n + 1 : 0);
  if (ix->positions) col_set_raw(b, K_POS, f, id, pos, occ->len);
  g_free(terms);
  g_free(pos);
  g_free(tf);
}

/* The non-text pairs of a record (what sorting reads). */
static GArray *sortable_pairs(batch_t *b, const GArray *pairs) {
  GArray *out = g_array_new(FALSE, FALSE, sizeof(pair_t));
  for (guint i = 0; pairs && i < pairs->len; i++) {
    const pair_t *p = &g_array_index(pairs, pair_t, i);
    field_t *f = field_by_id(b->idx, p->field);
    if (f && f->type != IXIA_FIELD_TEXT) g_array_append_val(out, *p);
  }
  return out;
}

/* Records a document's state before this event for stable sorted cursors
 * (idx_history.c), when the event changes what sorting reads or whether it
 * exists. newp NULL: it is deleted. */
static void history_note(batch_t *b, const rec_t *r, gboolean was_live, const GArray *newp) {
  GArray *old = was_live ? sortable_pairs(b, r->pairs) : g_array_new(FALSE, FALSE, sizeof(pair_t));
  gboolean now_live = newp != NULL;
  if (was_live && now_live) {
    GArray *nw = sortable_pairs(b, newp);
    gboolean same = nw->len == old->len &&
                    (old->len == 0 || memcmp(nw->data, old->data, old->len * sizeof(pair_t)) == 0);
    g_array_free(nw, TRUE);
    if (same) {
      g_array_free(old, TRUE);
      return;
    }
  }
  hnote_t n = {r->id, was_live, old};
  g_array_append_val(b->hist, n);
}

typedef enum { EV_APPLIED, EV_SKIPPED, EV_FAILED, EV_ERROR } ev_result_t;

static ixia_schema_t *schema_of(batch_t *b, table_t *t) {
  ixia_schema_t *s = g_hash_table_lookup(b->schemas, t);
  return s ? s : t->schema;
}

/* ------------------------------------------------------ the stale set */

enum { STALE_SOME = 1, STALE_NONE = 2 };

/* Whether t's stale set may hold documents: read once a batch (a cached
 * posting), then kept up to date by mark_stale. A read error counts as
 * "may": removing ids that are not there is harmless. */
static gboolean stale_some(batch_t *b, table_t *t) {
  gint st = GPOINTER_TO_INT(g_hash_table_lookup(b->stale, t));
  if (!st) {
    blk_t *blk = ixia_idx_posting(b->idx, K_LIVE, t->id, LIVE_STALE, NULL);
    st = blk && roaring_bitmap_is_empty(blk->bm) ? STALE_NONE : STALE_SOME;
    ixia_idx_blk_unref(blk);
    g_hash_table_insert(b->stale, t, GINT_TO_POINTER(st));
  }
  return st == STALE_SOME;
}

/* A document of t indexed under t's current schema (or deleted): it no
 * longer waits for a backfill. */
static void stale_drop(batch_t *b, table_t *t, guint32 id) {
  if (stale_some(b, t)) post_change(b, K_LIVE, t->id, LIVE_STALE, id, FALSE);
}

/* Whether schema s declares an index that prev lacks: a field (path, type,
 * analyzer) or positions of a text field. */
static gboolean schema_adds(const ixia_schema_t *prev, const ixia_schema_t *s) {
  for (guint i = 0; i < s->n_indexes; i++) {
    const ixia_schema_field_t *x = &s->indexes[i];
    gboolean had = FALSE;
    for (guint j = 0; !had && j < prev->n_indexes; j++) {
      const ixia_schema_field_t *y = &prev->indexes[j];
      had = y->type == x->type && !strcmp(y->field, x->field) &&
            !g_strcmp0(y->analyzer, x->analyzer) && (y->positions || !x->positions);
    }
    if (!had) return TRUE;
  }
  return FALSE;
}

/* Every document of t live at this point of the batch was indexed without
 * an index t declares from now on: all of them join the stale set. */
static gboolean mark_stale(batch_t *b, table_t *t, ixia_error_t **err) {
  blk_t *live = ixia_idx_posting(b->idx, K_LIVE, t->id, LIVE_ALL, err);
  if (!live) return FALSE;
  roaring_bitmap_t *now = roaring_bitmap_copy(live->bm);
  ixia_idx_blk_unref(live);
  /* With this batch's changes to the live set so far. */
  for (guint32 c = 0; c <= b->next_doc_id >> CHUNK_BITS; c++) {
    pend_t probe;
    probe.klen = (guint8)key_post(probe.key, K_LIVE, t->id, LIVE_ALL, (guint16)c);
    pend_t *o = g_hash_table_lookup(b->posts, &probe);
    if (!o) continue;
    roaring_bitmap_or_inplace(now, o->add);
    roaring_bitmap_andnot_inplace(now, o->rem);
  }
  post_add_all(b, K_LIVE, t->id, LIVE_STALE, now);
  if (!roaring_bitmap_is_empty(now)) g_hash_table_insert(b->stale, t, GINT_TO_POINTER(STALE_SOME));
  roaring_bitmap_free(now);
  return TRUE;
}

static ev_result_t apply_put(batch_t *b, const ixia_idx_event_t *ev, ixia_error_t **why,
                             ixia_error_t **err) {
  ixia_idx_t *idx = b->idx;
  table_t *t = ixia_idx_table_find(idx, ev->ns, ev->table);
  ixia_schema_t *s = t ? schema_of(b, t) : NULL;
  if (!s) {
    ixia_error_set(why, IXIA_ENOTFOUND, "no schema for table %s.%s in the index", ev->ns,
                   ev->table);
    return EV_FAILED;
  }
  rec_t *r = rec_get(b, t->id, ev->key, ev->key_len, err);
  if (!r) return EV_ERROR;
  if (r->exists && ev->version < r->version) return EV_SKIPPED;
  cJSON *doc = ixia_json_parse_stored(ev->doc, ev->doc_len);
  if (!doc || !cJSON_IsObject(doc)) {
    cJSON_Delete(doc);
    ixia_error_set(why, IXIA_EINVAL, "undecodable document (not a JSON object)");
    return EV_FAILED;
  }
  GArray **occs = g_new0(GArray *, s->n_indexes + 1);
  GPtrArray **vals = doc_extract(idx, s, doc, occs, why);
  cJSON_Delete(doc);
  if (!vals) {
    g_free(occs);
    return EV_FAILED;
  }

  gboolean was_live = r->exists && !r->deleted;
  if (!r->exists) rec_assign_id(b, r);
  GArray *pairs = g_array_new(FALSE, FALSE, sizeof(pair_t));
  GArray *lens = g_array_new(FALSE, FALSE, sizeof(lenp_t));
  /* Text fields written (a few: a list, not a table built per document). */
  field_t **texts = g_new(field_t *, s->n_indexes + 1);
  guint n_texts = 0;
  for (guint i = 0; i < s->n_indexes; i++) {
    field_t *f = field_get_or_create(b, t, &s->indexes[i]);
    guint32 *vids = g_new(guint32, vals[i]->len + 1);
    for (guint j = 0; j < vals[i]->len; j++) {
      GBytes *v = vals[i]->pdata[j];
      pair_t p = {f->id, 0};
      if (f->numeric) p.val = ixia_bytes_get64(g_bytes_get_data(v, NULL));
      else p.val = vids[j] = value_get_or_create(b, f, v);
      g_array_append_val(pairs, p);
    }
    if (occs[i] && !field_listed(texts, n_texts, f)) {
      texts[n_texts++] = f;
      text_columns(b, f, &s->indexes[i], r->id, vals[i], vids, occs[i]);
      if (occs[i]->len) {
        lenp_t l = {f->id, occs[i]->len};
        g_array_append_val(lens, l);
      }
      len_change(b, f, (gint64)occs[i]->len - (was_live ? rec_len(r, f->id) : 0));
    }
    g_free(vids);
    ixia_tokens_free(occs[i]);
    g_ptr_array_free(vals[i], TRUE);
  }
  g_free(vals);
  g_free(occs);
  /* Text fields the document had and no longer declares or holds. */
  for (guint i = 0; was_live && i < r->lens->len; i++) {
    field_t *f = field_by_id(idx, g_array_index(r->lens, lenp_t, i).field);
    if (!f || field_listed(texts, n_texts, f)) continue;
    col_set_raw(b, K_COL, f, r->id, NULL, 0);
    col_set_raw(b, K_POS, f, r->id, NULL, 0);
    len_change(b, f, -(gint64)g_array_index(r->lens, lenp_t, i).len);
  }
  g_free(texts);
  g_array_free(r->lens, TRUE);
  r->lens = lens;
  g_array_sort(pairs, pair_cmp);
  guint w = 0; /* two declarations of one path and type share a field */
  for (guint i = 0; i < pairs->len; i++)
    if (w == 0 || pair_cmp(&g_array_index(pairs, pair_t, i), &g_array_index(pairs, pair_t, w - 1)))
      g_array_index(pairs, pair_t, w++) = g_array_index(pairs, pair_t, i);
  g_array_set_size(pairs, w);

  history_note(b, r, was_live, pairs);
  rec_diff(b, t->id, r->id, was_live ? r->pairs : NULL, was_live, pairs, TRUE);
  g_array_free(r->pairs, TRUE);
  r->pairs = pairs;
  r->version = ev->version;
  r->expire_at = ev->expire_at;
  r->deleted = FALSE;
  r->dirty = TRUE;
  stale_drop(b, t, r->id);
  return EV_APPLIED;
}

static ev_result_t apply_delete(batch_t *b, const ixia_idx_event_t *ev, ixia_error_t **err) {
  /* A tombstone needs a table id even for a table the index has never seen,
   * so that a late, older put stays out. */
  table_t *t = table_get_or_create(b, ev->ns, ev->table);
  rec_t *r = rec_get(b, t->id, ev->key, ev->key_len, err);
  if (!r) return EV_ERROR;
  if (r->exists && ev->version < r->version) return EV_SKIPPED;
  gboolean was_live = r->exists && !r->deleted;
  if (!r->exists) rec_assign_id(b, r);
  if (was_live) history_note(b, r, TRUE, NULL);
  if (was_live) rec_diff(b, t->id, r->id, r->pairs, TRUE, NULL, FALSE);
  for (guint i = 0; was_live && i < r->lens->len; i++) {
    field_t *f = field_by_id(b->idx, g_array_index(r->lens, lenp_t, i).field);
    if (!f) continue;
    col_set_raw(b, K_COL, f, r->id, NULL, 0);
    col_set_raw(b, K_POS, f, r->id, NULL, 0);
    len_change(b, f, -(gint64)g_array_index(r->lens, lenp_t, i).len);
  }
  g_array_set_size(r->lens, 0);
  g_array_set_size(r->pairs, 0);
  r->version = ev->version;
  r->expire_at = 0;
  r->deleted = TRUE;
  r->dirty = TRUE;
  stale_drop(b, t, r->id);
  return EV_APPLIED;
}

static ev_result_t apply_schema(batch_t *b, const ixia_idx_event_t *ev, ixia_error_t **why,
                                ixia_error_t **err) {
  ixia_schema_t *s = ixia_schema_parse(ev->doc, ev->doc_len, why);
  if (!s) return EV_FAILED;
  s->version = ev->version;
  table_t *t = table_get_or_create(b, s->ns, s->table);
  ixia_schema_t *cur = schema_of(b, t);
  if (cur && cur->version > ev->version) {
    ixia_schema_unref(s);
    return EV_SKIPPED;
  }
  guint8 k[5] = {K_SCHEMA};
  ixia_bytes_put32(k + 1, t->id);
  GByteArray *v = g_byte_array_new();
  ixia_bytes_append64(v, (guint64)ev->version);
  g_byte_array_append(v, (const guint8 *)s->json, (guint)strlen(s->json));
  wb_put(b, k, 5, v->data, v->len);
  g_byte_array_free(v, TRUE);
  /* A first schema finds no documents: puts wait for one (apply_put). */
  if (cur && schema_adds(cur, s) && !mark_stale(b, t, err)) {
    ixia_schema_unref(s);
    return EV_ERROR;
  }
  for (guint i = 0; i < s->n_indexes; i++) field_get_or_create(b, t, &s->indexes[i]);
  g_hash_table_insert(b->schemas, t, s); /* replaces (and unrefs) an earlier one of the batch */
  return EV_APPLIED;
}

/* ----------------------------------------------------------------- emit */

/* The bytes of value vid of f (published or staged in this batch). */
static GBytes *value_bytes(batch_t *b, field_t *f, guint32 vid) {
  if (vid < f->vals->len) return f->vals->pdata[vid];
  stage_t *s = g_hash_table_lookup(b->stages, f);
  guint32 i = vid - f->vals->len;
  return s && i < s->vals->len ? s->vals->pdata[i] : NULL;
}

static guint32 count_now(batch_t *b, field_t *f, guint32 vid, gint delta) {
  gint64 base = vid < f->counts->len ? g_array_index(f->counts, guint32, vid) : 0;
  (void)b;
  return (guint32)CLAMP(base + delta, 0, G_MAXUINT32);
}

/* One entry of the write batch; keys and values owned here, or borrowed
 * from the batch's pending tables. */
typedef struct {
  const guint8 *k, *v;
  size_t kl, vl;
  gboolean merge;
  gpointer own_k, own_v; /* g_free'd; NULL when borrowed */
} emit_t;

static int emit_cmp(gconstpointer a, gconstpointer b) {
  const emit_t *x = a, *y = b;
  int c = memcmp(x->k, y->k, MIN(x->kl, y->kl));
  return c ? c : (x->kl > y->kl) - (x->kl < y->kl);
}

static void emit_add(GArray *e, const void *k, size_t kl, const void *v, size_t vl,
                     gboolean merge, gpointer own_k, gpointer own_v) {
  emit_t x = {k, v, kl, vl, merge, own_k, own_v};
  g_array_append_val(e, x);
}

/* Puts every change of the batch into the write batch in key order: the
 * memtable's skiplist inserts a key right after the previous one much
 * faster than anywhere else (a profile of the apply showed a quarter of its
 * time recomputing skiplist splices for keys written in hash order). */
/* The id record of a document (record key kp: K_DOC, table id, key): table
 * id, version, key. */
static GByteArray *id_value(const guint8 *kp, gsize kl, const rec_t *r) {
  GByteArray *dv = g_byte_array_sized_new((guint)(12 + kl - 5));
  ixia_bytes_append32(dv, ixia_bytes_get32(kp + 1));
  ixia_bytes_append64(dv, (guint64)r->version);
  g_byte_array_append(dv, kp + 5, (guint)(kl - 5));
  return dv;
}

/* The next record the batch changed, with its key, from a walk of b->recs. */
static gboolean next_dirty(GHashTableIter *it, rec_t **r, const guint8 **kp, gsize *kl) {
  gpointer k, v;
  while (g_hash_table_iter_next(it, &k, &v)) {
    *r = v;
    if (!(*r)->dirty) continue;
    *kp = g_bytes_get_data(k, kl);
    return TRUE;
  }
  return FALSE;
}

static void batch_emit(batch_t *b) {
  GArray *e = g_array_sized_new(FALSE, FALSE, sizeof(emit_t),
                                g_hash_table_size(b->posts) + g_hash_table_size(b->cols) +
                                    3 * g_hash_table_size(b->recs) + g_hash_table_size(b->counts));
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, b->posts);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    pend_t *o = k;
    if (roaring_bitmap_is_empty(o->add) && roaring_bitmap_is_empty(o->rem)) continue;
    size_t len = 0;
    char *op = ixia_idx_op_encode(o->add, o->rem, &len);
    if (!op) g_error("out of memory encoding a posting operand");
    /* malloc'd by the operand encoder: copied into GLib's allocator. */
    gpointer own = g_memdup2(op, len);
    free(op);
    emit_add(e, o->key, o->klen, own, len, TRUE, NULL, own);
  }
  g_hash_table_iter_init(&it, b->cols);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    pend_t *o = k;
    emit_add(e, o->key, o->klen, o->col->data, o->col->len, TRUE, NULL, NULL);
  }
  g_hash_table_iter_init(&it, b->recs);
  rec_t *r;
  const guint8 *kp;
  gsize kl;
  while (next_dirty(&it, &r, &kp, &kl)) {
    GByteArray *enc = rec_encode(r);
    guint elen = enc->len;
    guint8 *ev = g_byte_array_free(enc, FALSE);
    emit_add(e, kp, kl, ev, elen, FALSE, NULL, ev);
    /* id -> table, version, key: what a hit needs, in one read. */
    guint8 *dk = g_malloc(5);
    dk[0] = K_ID;
    ixia_bytes_put32(dk + 1, r->id);
    GByteArray *dv = id_value(kp, kl, r);
    guint dlen = dv->len;
    guint8 *dvp = g_byte_array_free(dv, FALSE);
    emit_add(e, dk, 5, dvp, dlen, FALSE, dk, dvp);
  }
  /* Dictionary values: new ones now, with their counts (the id must be
   * durable with the postings that use it); changed counts of known values
   * every COUNTS_EVERY batches (they are estimates). */
  ixia_idx_t *idx = b->idx;
  gboolean flush = idx->batches_since_counts + 1 >= COUNTS_EVERY;
  GHashTable *emitted = flush ? g_hash_table_new(g_direct_hash, g_direct_equal) : NULL;
  g_hash_table_iter_init(&it, b->counts);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    guint64 fv = (guint64)GPOINTER_TO_SIZE(k);
    field_t *f = field_by_id(b->idx, (guint32)(fv >> 32));
    guint32 vid = (guint32)fv;
    if (f && vid < f->vals->len && !flush) {
      g_hash_table_add(idx->dirty_counts, k);
      continue;
    }
    if (emitted) g_hash_table_add(emitted, k);
    GBytes *val = f ? value_bytes(b, f, vid) : NULL;
    if (!val) continue;
    gsize len;
    const guint8 *p = g_bytes_get_data(val, &len);
    guint8 *key = g_malloc(5 + len), *val8 = g_malloc(8);
    key[0] = K_VALUE;
    ixia_bytes_put32(key + 1, f->id);
    if (len) memcpy(key + 5, p, len);
    ixia_bytes_put32(val8, vid);
    ixia_bytes_put32(val8 + 4, count_now(b, f, vid, GPOINTER_TO_INT(v)));
    emit_add(e, key, 5 + len, val8, 8, FALSE, key, val8);
  }
  if (flush) {
    g_hash_table_iter_init(&it, idx->dirty_counts);
    while (g_hash_table_iter_next(&it, &k, NULL)) {
      if (g_hash_table_contains(emitted, k)) continue;
      guint64 fv = (guint64)GPOINTER_TO_SIZE(k);
      field_t *f = field_by_id(idx, (guint32)(fv >> 32));
      guint32 vid = (guint32)fv;
      if (!f || vid >= f->vals->len) continue;
      gsize len;
      const guint8 *p = g_bytes_get_data(f->vals->pdata[vid], &len);
      guint8 *key = g_malloc(5 + len), *val8 = g_malloc(8);
      key[0] = K_VALUE;
      ixia_bytes_put32(key + 1, f->id);
      if (len) memcpy(key + 5, p, len);
      ixia_bytes_put32(val8, vid);
      ixia_bytes_put32(val8 + 4, g_array_index(f->counts, guint32, vid));
      emit_add(e, key, 5 + len, val8, 8, FALSE, key, val8);
    }
    g_hash_table_destroy(emitted);
  }
  /* Text fields' token totals, exact with every batch (BM25's avgdl). */
  g_hash_table_iter_init(&it, b->len_delta);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    field_t *f = k;
    guint8 *key = g_malloc(6), *val8 = g_malloc(8);
    key[0] = K_META, key[1] = 'l';
    ixia_bytes_put32(key + 2, f->id);
    ixia_bytes_put64(val8, (guint64)(f->total_len + (gint64)GPOINTER_TO_SIZE(v)));
    emit_add(e, key, 6, val8, 8, FALSE, key, val8);
  }
  for (guint i = 0; i + 1 < b->new_dict->len; i += 2) {
    gsize kl, vl;
    const void *kp = g_bytes_get_data(b->new_dict->pdata[i], &kl);
    const void *vp = g_bytes_get_data(b->new_dict->pdata[i + 1], &vl);
    emit_add(e, kp, kl, vp, vl, FALSE, NULL, NULL);
  }
  g_array_sort(e, emit_cmp);
  for (guint i = 0; i < e->len; i++) {
    emit_t *x = &g_array_index(e, emit_t, i);
    if (x->merge)
      rocksdb_writebatch_merge(b->wb, (const char *)x->k, x->kl, (const char *)x->v, x->vl);
    else
      rocksdb_writebatch_put(b->wb, (const char *)x->k, x->kl, (const char *)x->v, x->vl);
    g_free(x->own_k);
    g_free(x->own_v);
  }
  g_array_free(e, TRUE);
}

/* RocksDB holds the batch: make it visible to searches. */
static void batch_publish(batch_t *b) {
  ixia_idx_t *idx = b->idx;
  GHashTableIter it;
  gpointer k, v;
  /* The old states first: a search that sees any of the batch can find
   * them (idx_sort.c), then the batch, then its sequence. */
  guint64 seq = idx->publish_seq + 1;
  for (guint i = 0; i < b->hist->len; i++) {
    hnote_t *n = &g_array_index(b->hist, hnote_t, i);
    ixia_idx_history_add(idx->history, seq, n->id, (const pair_t *)(void *)n->pairs->data,
                         n->pairs->len, n->was_live);
  }
  g_rw_lock_writer_lock(&idx->dict_lock);
  g_hash_table_iter_init(&it, b->stages);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    field_t *f = k;
    stage_t *s = v;
    guint32 base = f->vals->len;
    for (guint i = 0; i < s->vals->len; i++) ixia_idx_value_set(f, base + i, s->vals->pdata[i], 0);
  }
  g_hash_table_iter_init(&it, b->counts);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    guint64 fv = (guint64)GPOINTER_TO_SIZE(k);
    field_t *f = field_by_id(idx, (guint32)(fv >> 32));
    guint32 vid = (guint32)fv;
    if (f && f->counts && vid < f->counts->len)
      g_array_index(f->counts, guint32, vid) = count_now(b, f, vid, GPOINTER_TO_INT(v));
  }
  g_hash_table_iter_init(&it, b->schemas);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    table_t *t = k;
    ixia_schema_t *old = t->schema;
    t->schema = ixia_schema_ref(v);
    if (old) ixia_schema_unref(old);
  }
  g_rw_lock_writer_unlock(&idx->dict_lock);

  g_hash_table_iter_init(&it, b->len_delta);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    field_t *f = k;
    atomic_store(&f->total_len, f->total_len + (gint64)GPOINTER_TO_SIZE(v));
  }
  g_hash_table_iter_init(&it, b->points);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    GArray *a = v;
    ixia_points_update(((field_t *)k)->points, (const ixia_point_change_t *)(void *)a->data, a->len);
  }
  for (guint i = 0; i < b->dvals->len; i++) {
    const dvnote_t *dn = &g_array_index(b->dvals, dvnote_t, i);
    if (dn->f->numeric) {
      ixia_docvals_set(dn->f->dv, dn->id, &dn->first, dn->n);
    } else {
      guint32 vid = (guint32)dn->first;
      ixia_docvals_set(dn->f->dv, dn->id, &vid, dn->n);
    }
  }

  ixia_idx_publish_t *p = ixia_idx_publish_begin(idx);
  g_hash_table_iter_init(&it, b->posts);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    pend_t *o = k;
    ixia_idx_publish_posting(p, o->key, o->add, o->rem);
  }
  g_hash_table_iter_init(&it, b->cols);
  while (g_hash_table_iter_next(&it, &k, NULL)) {
    pend_t *o = k;
    ixia_idx_publish_column(p, o->key, o->col->data, o->col->len);
  }
  g_hash_table_iter_init(&it, b->recs);
  rec_t *r;
  const guint8 *kp;
  gsize kl;
  while (next_dirty(&it, &r, &kp, &kl)) {
    GByteArray *dv = id_value(kp, kl, r);
    ixia_idx_publish_record(p, r->id, dv->data, dv->len);
    g_byte_array_free(dv, TRUE);
  }
  ixia_idx_publish_end(p);
  atomic_store(&idx->publish_seq, seq);
  atomic_fetch_add(&idx->publish_gen, 1);
}

static void batch_free(batch_t *b) {
  for (guint i = 0; i < b->hist->len; i++) g_array_free(g_array_index(b->hist, hnote_t, i).pairs, TRUE);
  g_array_free(b->hist, TRUE);
  g_hash_table_destroy(b->len_delta);
  g_ptr_array_free(b->new_dict, TRUE);
  g_hash_table_destroy(b->field_of);
  g_hash_table_destroy(b->stale);
  g_hash_table_destroy(b->recs);
  g_hash_table_destroy(b->posts);
  g_hash_table_destroy(b->cols);
  g_hash_table_destroy(b->stages);
  g_hash_table_destroy(b->counts);
  g_hash_table_destroy(b->points);
  g_array_free(b->dvals, TRUE);
  g_hash_table_destroy(b->schemas);
  rocksdb_writebatch_destroy(b->wb);
}

static void array_free(gpointer a) { g_array_free(a, TRUE); }

gboolean ixia_idx_apply(ixia_idx_t *idx, const ixia_idx_event_t *events, guint n,
                        const ixia_idx_position_t *positions, guint n_positions,
                        ixia_idx_failed_fn failed, void *failed_ud, guint *applied,
                        ixia_error_t **err) {
  batch_t b = {
      .idx = idx,
      .wb = rocksdb_writebatch_create(),
      .hist = g_array_new(FALSE, FALSE, sizeof(hnote_t)),
      .len_delta = g_hash_table_new(g_direct_hash, g_direct_equal),
      .recs = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref,
                                    rec_free),
      .posts = g_hash_table_new_full(pend_hash, pend_equal, pend_free, NULL),
      .cols = g_hash_table_new_full(pend_hash, pend_equal, pend_free, NULL),
      .stages = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, stage_free),
      .counts = g_hash_table_new(g_direct_hash, g_direct_equal),
      .points = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, array_free),
      .dvals = g_array_new(FALSE, FALSE, sizeof(dvnote_t)),
      .schemas = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                       (GDestroyNotify)ixia_schema_unref),
      .new_dict = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref),
      .field_of = g_hash_table_new(g_direct_hash, g_direct_equal),
      .stale = g_hash_table_new(g_direct_hash, g_direct_equal),
      .next_doc_id = idx->next_doc_id,
      .max_version = idx->max_version,
  };
  /* Dictionary entries of an earlier batch whose write failed. */
  for (guint i = 0; i < idx->pending_dict->len; i++)
    g_ptr_array_add(b.new_dict, g_bytes_ref(idx->pending_dict->pdata[i]));
  g_ptr_array_set_size(idx->pending_dict, 0);

  guint n_applied = 0, n_skipped = 0;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < n; i++) {
    const ixia_idx_event_t *ev = &events[i];
    ixia_error_t *why = NULL;
    ev_result_t res;
    switch (ev->op) {
      case IXIA_IDX_PUT: res = apply_put(&b, ev, &why, err); break;
      case IXIA_IDX_DELETE: res = apply_delete(&b, ev, err); break;
      case IXIA_IDX_SCHEMA: res = apply_schema(&b, ev, &why, err); break;
      default:
        ixia_error_set(&why, IXIA_EINVAL, "unknown event operation %d", (int)ev->op);
        res = EV_FAILED;
    }
    if (res == EV_ERROR) {
      ok = FALSE;
      break;
    }
    /* Every event read counts as processed, for min_version waits. */
    if (ev->version > b.max_version) b.max_version = ev->version;
    if (res == EV_APPLIED) n_applied++;
    else if (res == EV_SKIPPED) n_skipped++;
    else fail_event(idx, ev, why, failed, failed_ud);
  }
  if (ok) {
    batch_emit(&b);
    for (guint i = 0; i < n_positions; i++) {
      guint8 k[6] = {K_META, 'p'}, v[8];
      ixia_bytes_put32(k + 2, (guint32)positions[i].partition ^ 0x80000000u);
      ixia_bytes_put64(v, (guint64)positions[i].next_offset);
      wb_put(&b, k, 6, v, 8);
    }
    guint8 mv[8];
    ixia_bytes_put64(mv, (guint64)b.max_version);
    wb_put(&b, "Mv", 2, mv, 8);
    char *rerr = NULL;
    /* Odd from here to the end of the publish: a search's uncached reads
     * (id records, postings) see RocksDB's new state from the write on. */
    atomic_fetch_add(&idx->publish_gen, 1);
    rocksdb_write(idx->db, idx->wopts, b.wb, &rerr);
    ok = ixia_error_from_rocksdb(err, rerr, "index write");
    if (!ok) atomic_fetch_add(&idx->publish_gen, 1); /* nothing to publish */
  }
  if (ok) {
    batch_publish(&b);
    if (++idx->batches_since_counts >= COUNTS_EVERY) {
      g_hash_table_remove_all(idx->dirty_counts);
      idx->batches_since_counts = 0;
    }
    idx->next_doc_id = b.next_doc_id;
    atomic_store(&idx->max_version, b.max_version);
    atomic_fetch_add(&idx->events_applied, n_applied);
    atomic_fetch_add(&idx->events_skipped, n_skipped);
    if (applied) *applied = n_applied;
  } else {
    /* Nothing was published; new tables and fields stay registered and
     * their dictionary entries go with the next batch. */
    for (guint i = 0; i < b.new_dict->len; i++)
      g_ptr_array_add(idx->pending_dict, g_bytes_ref(b.new_dict->pdata[i]));
    if (applied) *applied = 0;
  }
  batch_free(&b);
  return ok;
}

gboolean ixia_idx_flush_counts(ixia_idx_t *idx, ixia_error_t **err) {
  if (!idx->dirty_counts || g_hash_table_size(idx->dirty_counts) == 0) return TRUE;
  idx->batches_since_counts = COUNTS_EVERY; /* the next (empty) batch writes them */
  return ixia_idx_apply(idx, NULL, 0, NULL, 0, NULL, NULL, NULL, err);
}
