/* The index's dictionaries in memory: tables, their declared fields, and
 * per keyword, text or bool field the value dictionary in both directions
 * with a live document count per value, and its values in byte order.
 *
 * Postings, columns and records hold small integers (GokuL's dictionary
 * encoding); these maps turn query values into ids and ids back into the
 * values aggregations report. They are loaded whole at open (idx_open.c)
 * because every search and every applied event consults them. Counts are
 * the planner's cardinality estimates: exact per value, kept by the apply
 * thread and persisted with the dictionary entry. The ordered view (a
 * balanced tree) is what keyword ranges and prefixes walk: a RocksDB
 * iterator over the same entries cost an iterator, a seek and a step per
 * value, 40% of the shard's CPU under a prefix matching 100 brands.
 * Numeric fields have no dictionary: their points (idx_points.c) answer
 * equality and ranges.
 *
 * An entry is never freed while the index is open, so views handed to
 * aggregations (ixia_val_t) stay valid without a lock once taken. */
#include <string.h>

#include "idx.h"

/* A name of the maps below, built in buf when it fits: the lookups run for
 * every field and table a query names, and building each name with
 * g_strdup_printf was ~1% of the shard's CPU on pages of 100. */
typedef struct {
  char *s; /* buf, or g_malloc'd */
  char buf[192];
} name_t;

static const char *name_build(name_t *nm, const char *a, const char *sep, const char *b,
                              const char *sep2, const char *c) {
  gsize al = strlen(a), sl = strlen(sep), bl = strlen(b), s2l = sep2 ? strlen(sep2) : 0,
        cl = c ? strlen(c) : 0, n = al + sl + bl + s2l + cl;
  nm->s = n < sizeof nm->buf ? nm->buf : g_malloc(n + 1);
  char *p = nm->s;
  memcpy(p, a, al), p += al;
  memcpy(p, sep, sl), p += sl;
  memcpy(p, b, bl), p += bl;
  if (s2l) memcpy(p, sep2, s2l), p += s2l;
  if (cl) memcpy(p, c, cl), p += cl;
  *p = '\0';
  return nm->s;
}

static void name_done(name_t *nm) {
  if (nm->s != nm->buf) g_free(nm->s);
}

/* A field's identity: its type, path and, for text, its analyzer (the
 * tokens depend on it), so that a field dropped and declared again another
 * way never sees the old entries: "TYPE:PATH" or "TYPE:PATH|ANALYZER".
 * Analyzer names hold no '|'. */
static const char *field_name(name_t *nm, ixia_field_type_t type, const char *path,
                              const char *analyzer) {
  char t[16];
  guint v = (guint)type, i = sizeof t - 1;
  t[i] = '\0';
  do t[--i] = (char)('0' + v % 10); while ((v /= 10) && i > 0);
  if (type == IXIA_FIELD_TEXT)
    return name_build(nm, t + i, ":", path, "|", analyzer ? analyzer : IXIA_ANALYZER_STANDARD);
  return name_build(nm, t + i, ":", path, NULL, NULL);
}

/* A table's: "NS\nTABLE". */
static const char *table_name(name_t *nm, const char *ns, const char *table) {
  return name_build(nm, ns, "\n", table, NULL, NULL);
}

table_t *ixia_idx_table_new(guint32 id, const char *ns, const char *name) {
  table_t *t = g_new0(table_t, 1);
  t->id = id;
  t->ns = g_strdup(ns);
  t->name = g_strdup(name);
  t->fields = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  return t;
}

void ixia_idx_table_free(gpointer p) {
  table_t *t = p;
  if (!t) return;
  g_free(t->ns);
  g_free(t->name);
  if (t->schema) ixia_schema_unref(t->schema);
  g_hash_table_destroy(t->fields);
  g_free(t);
}

/* The dictionary's byte order: RocksDB's order of the value keys. */
static gint bytes_order(gconstpointer a, gconstpointer b) {
  gsize al, bl;
  const guint8 *ap = g_bytes_get_data((GBytes *)a, &al), *bp = g_bytes_get_data((GBytes *)b, &bl);
  return ixia_val_cmp(ap, al, bp, bl);
}

field_t *ixia_idx_field_new(guint32 id, guint32 table_id, ixia_field_type_t type,
                            const char *path, const char *analyzer, ixia_docvals_budget_t *dvb) {
  field_t *f = g_new0(field_t, 1);
  f->id = id;
  f->table_id = table_id;
  f->type = type;
  f->numeric = ixia_field_type_numeric(type);
  f->path = g_strdup(path);
  if (type == IXIA_FIELD_TEXT) f->analyzer = g_strdup(analyzer ? analyzer : IXIA_ANALYZER_STANDARD);
  if (f->numeric) {
    f->points = ixia_points_new();
  } else {
    f->ids = g_hash_table_new(g_bytes_hash, g_bytes_equal);
    f->order = g_tree_new(bytes_order);
    f->vals = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    f->vv = g_array_new(FALSE, TRUE, sizeof(ixia_val_t));
    f->counts = g_array_new(FALSE, TRUE, sizeof(guint32));
  }
  /* index.docvalues_mb = 0: no doc values; checks read the columns. */
  if (type != IXIA_FIELD_TEXT && dvb->limit > 0) f->dv = ixia_docvals_new(f->numeric ? 8 : 4, dvb);
  return f;
}

void ixia_idx_field_free(gpointer p) {
  field_t *f = p;
  if (!f) return;
  g_free(f->path);
  g_free(f->analyzer);
  if (f->ids) g_hash_table_destroy(f->ids);
  if (f->order) g_tree_destroy(f->order);
  if (f->vals) g_ptr_array_free(f->vals, TRUE);
  if (f->vv) g_array_free(f->vv, TRUE);
  if (f->counts) g_array_free(f->counts, TRUE);
  ixia_points_destroy(f->points);
  ixia_docvals_destroy(f->dv);
  g_free(f);
}

table_t *ixia_idx_table_find(ixia_idx_t *idx, const char *ns, const char *table) {
  name_t nm;
  table_t *t = g_hash_table_lookup(idx->tables, table_name(&nm, ns, table));
  name_done(&nm);
  return t;
}

field_t *ixia_idx_field_find(table_t *t, const ixia_schema_field_t *ix) {
  name_t nm;
  field_t *f = g_hash_table_lookup(t->fields, field_name(&nm, ix->type, ix->field, ix->analyzer));
  name_done(&nm);
  return f;
}

void ixia_idx_table_register(ixia_idx_t *idx, table_t *t) {
  name_t nm;
  g_hash_table_insert(idx->tables, g_strdup(table_name(&nm, t->ns, t->name)), t);
  name_done(&nm);
  if (idx->tables_by_id->len <= t->id) g_ptr_array_set_size(idx->tables_by_id, (gint)t->id + 1);
  idx->tables_by_id->pdata[t->id] = t;
}

gboolean ixia_idx_field_register(ixia_idx_t *idx, field_t *f) {
  table_t *t = f->table_id < idx->tables_by_id->len ? idx->tables_by_id->pdata[f->table_id] : NULL;
  if (!t) return FALSE;
  name_t nm;
  g_hash_table_insert(t->fields, g_strdup(field_name(&nm, f->type, f->path, f->analyzer)), f);
  name_done(&nm);
  if (idx->fields->len <= f->id) g_ptr_array_set_size(idx->fields, (gint)f->id + 1);
  idx->fields->pdata[f->id] = f;
  return TRUE;
}

void ixia_idx_value_set(field_t *f, guint32 vid, GBytes *val, guint32 count) {
  if (f->vals->len <= vid) {
    g_ptr_array_set_size(f->vals, (gint)vid + 1);
    g_array_set_size(f->vv, vid + 1);
    g_array_set_size(f->counts, vid + 1);
  }
  GBytes *old = f->vals->pdata[vid];
  if (old) {
    g_hash_table_remove(f->ids, old);
    g_tree_remove(f->order, old);
  }
  f->vals->pdata[vid] = g_bytes_ref(val);
  gsize len;
  const guint8 *p = g_bytes_get_data(val, &len);
  g_array_index(f->vv, ixia_val_t, vid) = (ixia_val_t){p, (guint32)len};
  g_array_index(f->counts, guint32, vid) = count;
  g_hash_table_insert(f->ids, val, GUINT_TO_POINTER(vid + 1));
  g_tree_replace(f->order, val, GUINT_TO_POINTER(vid + 1));
  if (old) g_bytes_unref(old);
}

field_t *ixia_idx_field_lookup(ixia_idx_t *idx, table_t *t, const ixia_schema_field_t *ix) {
  g_rw_lock_reader_lock(&idx->dict_lock);
  field_t *f = ixia_idx_field_find(t, ix);
  g_rw_lock_reader_unlock(&idx->dict_lock);
  return f;
}

gint64 ixia_idx_value_id(field_t *f, const guint8 *p, gsize len) {
  if (!f->ids) return -1;
  GBytes *b = g_bytes_new_static(len ? p : (const guint8 *)"", len);
  gint64 id = ixia_idx_value_id_of(f, b);
  g_bytes_unref(b);
  return id;
}

gint64 ixia_idx_value_id_of(field_t *f, GBytes *val) {
  gpointer v = f->ids ? g_hash_table_lookup(f->ids, val) : NULL;
  return v ? (gint64)GPOINTER_TO_UINT(v) - 1 : -1;
}
