/* A page of search hits as an index shard answers the query API
 * (Search.search_page): the hits packed in binary, then the answer's other
 * members (totals, positions, aggregation partials) as one JSON object.
 *
 * Why binary: a page of 100 sorted hits written as JSON by the shard and
 * read back by the API (keys unescaped into copies, integers parsed, sort
 * values base64-encoded and decoded) was ~10% of the shard's CPU and ~16%
 * of the API's on sorted pages of 100. Packed, the API reads a hit's key
 * and sort values where they stand in the page.
 *
 * Layout (integers big-endian, as every ixia codec: bytes.h):
 *
 *   header  "IXP1"  flags:u32  n_hits:u32  meta_len:u32
 *   hit     key_len:u32  key bytes  0x00  version:i64  id:u32
 *           [n_sort:u8 value{n_sort}]   when flags has IXIA_HITPAGE_SORT
 *           [score: f64 bits:u64]       when flags has IXIA_HITPAGE_SCORE
 *   value   0x00 (missing) | 0x01 len:u32 bytes
 *   meta    meta_len bytes: a JSON object, the last bytes of the page
 *
 * A key is followed by a NUL so that the reader hands it out in place as
 * a C string; a key holding a NUL is refused by the reader.
 *
 * The reader checks every length against the bytes left (the page comes
 * from another process) and fails on anything else: tests/fuzz/hit_page.c
 * feeds it arbitrary bytes.
 *
 * Thread safety: pure functions over caller-owned memory. */
#ifndef IXIA_HITPAGE_H
#define IXIA_HITPAGE_H

#include <glib.h>

#define IXIA_HITPAGE_SORT 1u  /* every hit carries its sort values */
#define IXIA_HITPAGE_SCORE 2u /* every hit carries its score */
#define IXIA_HITPAGE_HEADER 16

/* ---- writing ---- */

/* Starts a page in out (emptied first). */
void ixia_hitpage_begin(GByteArray *out, guint32 flags);
/* Appends a hit; then its sort values (IXIA_HITPAGE_SORT) and its score
 * (IXIA_HITPAGE_SCORE), in that order. */
void ixia_hitpage_put_hit(GByteArray *out, const char *key, gsize key_len, gint64 version,
                          guint32 id);
void ixia_hitpage_put_count(GByteArray *out, guint n_sort);
void ixia_hitpage_put_value(GByteArray *out, gboolean has, const guint8 *p, gsize len);
void ixia_hitpage_put_score(GByteArray *out, double score);
/* Ends the page: n_hits hits were put; meta is the JSON object of the
 * other members. */
void ixia_hitpage_finish(GByteArray *out, guint32 n_hits, const char *meta, gsize meta_len);

/* ---- reading ---- */

typedef struct {
  const guint8 *p, *e; /* the hits not read yet */
  guint32 flags, left;
} ixia_hitpage_t;

typedef struct {
  const char *key; /* in the page, NUL-terminated */
  gsize key_len;
  gint64 version;
  guint32 id;
  const guint8 *sort; /* n_sort values (checked): read with ixia_hitpage_value */
  guint n_sort;
  gboolean has_score;
  double score;
} ixia_hitpage_hit_t;

/* Opens a page of len bytes; *meta (not NUL-terminated) and *meta_len are
 * its JSON object. FALSE when the header or the sizes do not add up. */
gboolean ixia_hitpage_open(ixia_hitpage_t *pg, const guint8 *data, gsize len, const char **meta,
                           gsize *meta_len);
/* The next hit: 1, 0 after the last (every byte of the hits read), -1 for
 * a malformed hit. */
int ixia_hitpage_next(ixia_hitpage_t *pg, ixia_hitpage_hit_t *hit);
/* Reads the value at *p (one of a hit's, checked by ixia_hitpage_next)
 * and moves *p past it; FALSE for a missing value. */
gboolean ixia_hitpage_value(const guint8 **p, const guint8 **v, gsize *len);

#endif
