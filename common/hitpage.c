/* The packed page of search hits (hitpage.h): written by an index shard,
 * read by the query API. The writer appends to a GByteArray and fills the
 * header's counts at the end; the reader walks the page once, checking
 * each length against the bytes left before it reads past it. */
#include "hitpage.h"

#include <string.h>

#include "bytes.h"

#define MAGIC "IXP1"

/* n more bytes at the end of out, to write in place: one call a hit
 * rather than one a field (GLib's appends were half of the writer's cost
 * on pages of 100 hits). */
static inline guint8 *extend(GByteArray *out, gsize n) {
  guint at = out->len;
  g_byte_array_set_size(out, at + (guint)n);
  return out->data + at;
}

void ixia_hitpage_begin(GByteArray *out, guint32 flags) {
  g_byte_array_set_size(out, 0);
  guint8 *p = extend(out, IXIA_HITPAGE_HEADER);
  memcpy(p, MAGIC, 4);
  ixia_bytes_put32(p + 4, flags);
  ixia_bytes_put32(p + 8, 0);  /* n_hits, by ixia_hitpage_finish */
  ixia_bytes_put32(p + 12, 0); /* meta_len, likewise */
}

void ixia_hitpage_put_hit(GByteArray *out, const char *key, gsize key_len, gint64 version,
                          guint32 id) {
  guint8 *p = extend(out, 4 + key_len + 1 + 8 + 4);
  ixia_bytes_put32(p, (guint32)key_len);
  memcpy(p + 4, key, key_len);
  p += 4 + key_len;
  *p++ = 0;
  ixia_bytes_put64(p, (guint64)version);
  ixia_bytes_put32(p + 8, id);
}

void ixia_hitpage_put_count(GByteArray *out, guint n_sort) { *extend(out, 1) = (guint8)n_sort; }

void ixia_hitpage_put_value(GByteArray *out, gboolean has, const guint8 *p, gsize len) {
  if (!has) {
    *extend(out, 1) = 0;
    return;
  }
  guint8 *q = extend(out, 1 + 4 + len);
  q[0] = 1;
  ixia_bytes_put32(q + 1, (guint32)len);
  if (len) memcpy(q + 5, p, len);
}

void ixia_hitpage_put_score(GByteArray *out, double score) {
  guint64 bits;
  memcpy(&bits, &score, sizeof bits);
  ixia_bytes_put64(extend(out, 8), bits);
}

void ixia_hitpage_finish(GByteArray *out, guint32 n_hits, const char *meta, gsize meta_len) {
  ixia_bytes_put32(out->data + 8, n_hits);
  ixia_bytes_put32(out->data + 12, (guint32)meta_len);
  g_byte_array_append(out, (const guint8 *)meta, (guint)meta_len);
}

gboolean ixia_hitpage_open(ixia_hitpage_t *pg, const guint8 *data, gsize len, const char **meta,
                           gsize *meta_len) {
  memset(pg, 0, sizeof *pg);
  if (len < IXIA_HITPAGE_HEADER || memcmp(data, MAGIC, 4) != 0) return FALSE;
  guint32 ml = ixia_bytes_get32(data + 12);
  if (ml > len - IXIA_HITPAGE_HEADER) return FALSE;
  pg->flags = ixia_bytes_get32(data + 4);
  pg->left = ixia_bytes_get32(data + 8);
  pg->p = data + IXIA_HITPAGE_HEADER;
  pg->e = data + len - ml;
  *meta = (const char *)pg->e;
  *meta_len = ml;
  return TRUE;
}

/* Whether n more bytes are there. */
static inline gboolean have(const ixia_hitpage_t *pg, const guint8 *p, gsize n) {
  return (gsize)(pg->e - p) >= n;
}

int ixia_hitpage_next(ixia_hitpage_t *pg, ixia_hitpage_hit_t *hit) {
  if (pg->left == 0) return pg->p == pg->e ? 0 : -1;
  const guint8 *p = pg->p;
  if (!have(pg, p, 4)) return -1;
  guint32 kl = ixia_bytes_get32(p);
  p += 4;
  /* The key, its NUL, the version and the id. */
  if (kl > (gsize)(pg->e - p) || !have(pg, p + kl, 1 + 8 + 4)) return -1;
  if (p[kl] != 0 || memchr(p, 0, kl)) return -1;
  hit->key = (const char *)p;
  hit->key_len = kl;
  p += kl + 1;
  hit->version = (gint64)ixia_bytes_get64(p);
  hit->id = ixia_bytes_get32(p + 8);
  p += 12;
  hit->sort = NULL;
  hit->n_sort = 0;
  if (pg->flags & IXIA_HITPAGE_SORT) {
    if (!have(pg, p, 1)) return -1;
    hit->n_sort = *p++;
    hit->sort = p;
    for (guint k = 0; k < hit->n_sort; k++) {
      if (!have(pg, p, 1) || *p > 1) return -1;
      if (*p++ == 0) continue;
      if (!have(pg, p, 4)) return -1;
      guint32 n = ixia_bytes_get32(p);
      p += 4;
      if (!have(pg, p, n)) return -1;
      p += n;
    }
  }
  hit->has_score = (pg->flags & IXIA_HITPAGE_SCORE) != 0;
  hit->score = 0;
  if (hit->has_score) {
    if (!have(pg, p, 8)) return -1;
    guint64 bits = ixia_bytes_get64(p);
    memcpy(&hit->score, &bits, sizeof bits);
    p += 8;
  }
  pg->p = p;
  pg->left--;
  return 1;
}

gboolean ixia_hitpage_value(const guint8 **p, const guint8 **v, gsize *len) {
  const guint8 *q = *p;
  if (*q++ == 0) {
    *p = q;
    *v = NULL;
    *len = 0;
    return FALSE;
  }
  *len = ixia_bytes_get32(q);
  *v = q + 4;
  *p = q + 4 + *len;
  return TRUE;
}
