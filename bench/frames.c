/* Where one answer ends in the bytes an event-driven connection received
 * (bench.h: ixia_bench_answer_len), for each wire the load generator
 * speaks. Kept apart from the driver (events.c) so the unit test reads it
 * on its own: a cut in the wrong place would misread every later answer of
 * the connection.
 *
 * Thrift: a 4-byte big-endian length, then that many bytes. HTTP/1.1: the
 * status line and headers up to the blank line, then Content-Length bytes
 * (the API always sends one; chunked answers are not expected). memcached's
 * text protocol: "VALUE key flags bytes\r\n", the bytes, "\r\nEND\r\n" for
 * a hit; "END\r\n" for a miss; any other line (ERROR, SERVER_ERROR ...) is
 * a whole answer of one line. */
#include <string.h>

#include "bench.h"

#define MAX_ANSWER (256u << 20)

static gsize thrift_len(const guint8 *in, gsize len, gboolean *bad) {
  if (len < 4) return 0;
  guint32 n = (guint32)in[0] << 24 | (guint32)in[1] << 16 | (guint32)in[2] << 8 | in[3];
  if (n == 0 || n > MAX_ANSWER) {
    *bad = TRUE;
    return 0;
  }
  return len >= 4 + (gsize)n ? 4 + (gsize)n : 0;
}

/* The value of header `name` (with its colon) in head[0..n), or NULL. */
static const char *header_in(const char *head, gsize n, const char *name) {
  gsize nl = strlen(name);
  for (const char *p = head; p && p < head + n;) {
    const char *eol = memchr(p, '\n', (gsize)(head + n - p));
    if (!eol) break;
    if ((gsize)(eol - p) > nl && g_ascii_strncasecmp(p, name, nl) == 0) return p + nl;
    p = eol + 1;
  }
  return NULL;
}

static gsize http_len(const guint8 *in, gsize len, gboolean *bad) {
  if (len >= 5 && memcmp(in, "HTTP/", 5) != 0) {
    *bad = TRUE;
    return 0;
  }
  const char *s = (const char *)in;
  const char *end = memmem(s, len, "\r\n\r\n", 4);
  if (!end) {
    if (len > 65536) *bad = TRUE; /* no end of headers in 64 KiB */
    return 0;
  }
  gsize head = (gsize)(end - s) + 4;
  const char *cl = header_in(s, head, "Content-Length:");
  guint64 body = 0;
  if (cl) {
    char *stop = NULL;
    while (*cl == ' ' || *cl == '\t') cl++;
    body = g_ascii_strtoull(cl, &stop, 10);
    if (stop == cl || body > MAX_ANSWER) {
      *bad = TRUE;
      return 0;
    }
  }
  return len >= head + body ? head + (gsize)body : 0;
}

static gsize memcached_len(const guint8 *in, gsize len, gboolean *bad) {
  const char *s = (const char *)in;
  const char *eol = memmem(s, len, "\r\n", 2);
  if (!eol) {
    if (len > 4096) *bad = TRUE;
    return 0;
  }
  gsize line = (gsize)(eol - s) + 2;
  if (!(line > 6 && memcmp(s, "VALUE ", 6) == 0)) return line; /* END, or an error line */
  /* VALUE <key> <flags> <bytes> [<cas>]: the third word after VALUE. */
  const char *p = s + 6, *stop = s + line - 2;
  for (int word = 0; word < 2 && p; word++) {
    p = memchr(p, ' ', (gsize)(stop - p));
    if (p) p++;
  }
  guint64 bytes = 0;
  gboolean ok = p && p < stop && g_ascii_isdigit(*p);
  for (; ok && p < stop && g_ascii_isdigit(*p); p++) {
    bytes = bytes * 10 + (guint64)(*p - '0');
    ok = bytes <= MAX_ANSWER;
  }
  if (!ok || (p < stop && *p != ' ')) {
    *bad = TRUE;
    return 0;
  }
  gsize want = line + (gsize)bytes + 2 + 5; /* data, \r\n, END\r\n */
  return len >= want ? want : 0;
}

gsize ixia_bench_answer_len(ixia_bench_wire_t wire, const guint8 *in, gsize len, gboolean *bad) {
  *bad = FALSE;
  switch (wire) {
    case IXIA_BENCH_WIRE_THRIFT: return thrift_len(in, len, bad);
    case IXIA_BENCH_WIRE_HTTP: return http_len(in, len, bad);
    case IXIA_BENCH_WIRE_MEMCACHED: return memcached_len(in, len, bad);
  }
  *bad = TRUE;
  return 0;
}
