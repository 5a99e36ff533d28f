/* What a timed query's answer says, read without a tree (answer.c).
 * Stateless and thread-safe. */
#ifndef IXIA_BENCH_ANSWER_H
#define IXIA_BENCH_ANSWER_H

#include <glib.h>

/* The number of hits, "total" and "took_ms" (0 when absent). */
typedef struct {
  guint hits;
  double total, took_ms;
} ixia_bench_answer_t;

/* Reads json (NUL-terminated); FALSE when it is not an object with one
 * "hits" array of objects, one numeric "total" and at most one numeric
 * "took_ms". */
gboolean ixia_bench_answer_read(const char *json, ixia_bench_answer_t *a);

#endif
