/* Byte helpers every codec of ixia shares.
 *
 * Integers in stored keys, stored values and the binary wire formats are
 * big-endian: keys then sort numerically under RocksDB's bytewise
 * comparator, and one convention holds everywhere (the store's records, the
 * index's keys and blocks, aggregation partials, cursors, Thrift frames).
 * The helpers are header-only because they sit on the index's hot paths
 * (a posting key or a column slot per call) and compile to a load and a
 * byte swap.
 *
 * IXIA_SAFE_INT_MAX is 2^53: the largest magnitude up to which every
 * integer is exact in a double, and so in a JSON number. Counts, versions
 * and longs that travel as JSON numbers are held within it, with
 * ixia_bytes_is_safe_int as the one check.
 *
 * Thread safety: pure functions. */
#ifndef IXIA_BYTES_H
#define IXIA_BYTES_H

#include <glib.h>
#include <math.h>

#define IXIA_SAFE_INT_MAX 9007199254740992.0 /* 2^53 */

/* A whole number within [-2^53, 2^53]. */
static inline gboolean ixia_bytes_is_safe_int(double v) {
  return v >= -IXIA_SAFE_INT_MAX && v <= IXIA_SAFE_INT_MAX && v == floor(v);
}

static inline void ixia_bytes_put32(guint8 *p, guint32 v) {
  p[0] = (guint8)(v >> 24), p[1] = (guint8)(v >> 16), p[2] = (guint8)(v >> 8), p[3] = (guint8)v;
}
static inline guint32 ixia_bytes_get32(const void *vp) {
  const guint8 *p = vp;
  return (guint32)p[0] << 24 | (guint32)p[1] << 16 | (guint32)p[2] << 8 | p[3];
}
static inline void ixia_bytes_put64(guint8 *p, guint64 v) {
  ixia_bytes_put32(p, (guint32)(v >> 32));
  ixia_bytes_put32(p + 4, (guint32)v);
}
static inline guint64 ixia_bytes_get64(const void *p) {
  return (guint64)ixia_bytes_get32(p) << 32 | ixia_bytes_get32((const guint8 *)p + 4);
}
static inline void ixia_bytes_append32(GByteArray *b, guint32 v) {
  guint8 t[4];
  ixia_bytes_put32(t, v);
  g_byte_array_append(b, t, 4);
}
static inline void ixia_bytes_append64(GByteArray *b, guint64 v) {
  guint8 t[8];
  ixia_bytes_put64(t, v);
  g_byte_array_append(b, t, 8);
}

#endif
