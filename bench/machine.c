/* The machine's figures beside a workload's result (machine.h): snapshots
 * of /proc/stat and /proc/pressure/cpu before and after, and each request
 * thread's own run-queue wait, read by the thread itself at its start and
 * end (a thread's /proc entry is gone once it is joined, so the driver
 * cannot read it afterwards). Parsing is kept apart from reading so the
 * unit test can feed it text. */
#include "machine.h"

#include <string.h>

gboolean ixia_bench_parse_stat(const char *text, guint64 *busy, guint64 *total) {
  if (!text || strncmp(text, "cpu ", 4) != 0) return FALSE;
  /* user nice system idle iowait irq softirq steal (guest time is already
   * in user and nice) */
  guint64 v[8] = {0};
  const char *p = text + 4;
  for (int i = 0; i < 8; i++) {
    char *end;
    v[i] = g_ascii_strtoull(p, &end, 10);
    if (end == p) return FALSE;
    p = end;
  }
  guint64 sum = 0;
  for (int i = 0; i < 8; i++) sum += v[i];
  *total = sum;
  *busy = sum - v[3] - v[4];
  return TRUE;
}

gboolean ixia_bench_parse_pressure(const char *text, guint64 *some_us) {
  if (!text || strncmp(text, "some ", 5) != 0) return FALSE;
  const char *nl = strchr(text, '\n');
  const char *t = g_strstr_len(text, nl ? nl - text : -1, "total=");
  if (!t) return FALSE;
  char *end;
  *some_us = g_ascii_strtoull(t + 6, &end, 10);
  return end != t + 6;
}

static char *read_text(const char *path) {
  char *text = NULL;
  return g_file_get_contents(path, &text, NULL, NULL) ? text : NULL;
}

void ixia_bench_machine_snap(ixia_bench_machine_t *m) {
  *m = (ixia_bench_machine_t){.at_us = g_get_monotonic_time()};
  char *stat = read_text("/proc/stat");
  m->has_stat = ixia_bench_parse_stat(stat, &m->busy, &m->total);
  g_free(stat);
  char *psi = read_text("/proc/pressure/cpu");
  m->has_pressure = ixia_bench_parse_pressure(psi, &m->pressure_us);
  g_free(psi);
}

gint64 ixia_bench_thread_wait_ns(void) {
  char *text = read_text("/proc/thread-self/schedstat");
  if (!text) return -1;
  /* on-CPU ns, run-queue wait ns, timeslices */
  char *end;
  g_ascii_strtoull(text, &end, 10);
  const char *p = end;
  guint64 wait = g_ascii_strtoull(p, &end, 10);
  gint64 out = end != p ? (gint64)wait : -1;
  g_free(text);
  return out;
}

static double one_decimal(double x) { return (double)(gint64)(x * 10 + 0.5) / 10; }

void ixia_bench_machine_report(const ixia_bench_machine_t *before, gint64 client_wait_ns,
                               guint64 ops, cJSON *out) {
  ixia_bench_machine_t now;
  ixia_bench_machine_snap(&now);
  if (before->has_stat && now.has_stat && now.total > before->total)
    cJSON_AddNumberToObject(out, "box_busy_pct",
                            one_decimal(100.0 * (double)(now.busy - before->busy) /
                                        (double)(now.total - before->total)));
  gint64 wall = now.at_us - before->at_us;
  if (before->has_pressure && now.has_pressure && wall > 0)
    cJSON_AddNumberToObject(out, "cpu_pressure_pct",
                            one_decimal(100.0 * (double)(now.pressure_us - before->pressure_us) / (double)wall));
  if (client_wait_ns >= 0 && ops > 0)
    cJSON_AddNumberToObject(out, "client_wait_us_per_op",
                            one_decimal((double)client_wait_ns / 1000.0 / (double)ops));
}
