/* Reading a timed query's answer (answer.h).
 *
 * The load generator shares the machine with the servers it measures, so
 * it reads a timed query's answer the way pgbench reads rows: it counts the
 * hits (each must be an object) and reads total and took_ms from the text,
 * without building a tree. cJSON's tree of a page of 100 hits cost 176-258
 * us of the client's CPU a query (malloc, strtod and strncmp of every
 * member), as much as the shard that found them. */
#include "answer.h"

#include <string.h>

#include "json.h"

/* A number member's token, read strictly: JSON's number grammar (the walk
 * does not check scalars, and strtod alone takes hex, inf, nan and a "+"). */
static gboolean answer_number(const char *v, const char *vend, double *out) {
  char buf[64];
  gsize n = (gsize)(vend - v);
  if (n == 0 || n >= sizeof buf) return FALSE;
  if (!(g_ascii_isdigit(v[0]) || (v[0] == '-' && n > 1 && g_ascii_isdigit(v[1])))) return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!g_ascii_isdigit(v[i]) && !strchr("-+.eE", v[i])) return FALSE;
  memcpy(buf, v, n);
  buf[n] = '\0';
  char *end = NULL;
  *out = g_ascii_strtod(buf, &end);
  return end == buf + n;
}

gboolean ixia_bench_answer_read(const char *json, ixia_bench_answer_t *a) {
  *a = (ixia_bench_answer_t){0};
  gboolean hits_seen = FALSE, total_seen = FALSE, took_seen = FALSE;
  ixia_json_walk_t w;
  const char *k, *kend, *v, *vend;
  int r;
  if (!ixia_json_members_open(&w, json, strlen(json))) return FALSE;
  /* Peeked: the hits are walked where they stand, not first skipped whole
   * to find their end (scanning the text was a third of the client's CPU
   * for a page of 100; the hits are nearly all of it). */
  while ((r = ixia_json_members_peek(&w, &k, &kend, &v)) == 1) {
    if (ixia_json_key_is(k, kend, "hits")) {
      ixia_json_walk_t h;
      const char *e, *eend;
      int hr;
      if (hits_seen || !ixia_json_elements_open(&h, v, (size_t)(w.e - v))) return FALSE;
      while ((hr = ixia_json_elements_next(&h, &e, &eend)) == 1) {
        if (*e != '{') return FALSE;
        a->hits++;
      }
      if (hr != 0) return FALSE;
      hits_seen = TRUE;
      vend = h.p; /* past the closing bracket */
    } else {
      if (!(vend = ixia_json_value_end(&w, v))) return FALSE;
      if (ixia_json_key_is(k, kend, "total")) {
        if (total_seen || !answer_number(v, vend, &a->total)) return FALSE;
        total_seen = TRUE;
      } else if (ixia_json_key_is(k, kend, "took_ms")) {
        if (took_seen || !answer_number(v, vend, &a->took_ms)) return FALSE;
        took_seen = TRUE;
      }
    }
    ixia_json_walk_resume(&w, vend);
  }
  return r == 0 && hits_seen && total_seen;
}
