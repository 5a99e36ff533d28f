/* What the machine did while a workload ran: how busy its CPUs were, how
 * long runnable tasks waited for one, and how long the load generator's own
 * threads waited for one.
 *
 * The benchmark shares a small machine with everything it measures, so a
 * latency tail can be the product's or the machine's: at saturation the
 * load generator's threads wait for a CPU too, and an open-loop workload
 * counts that wait in every request scheduled behind it. These figures let
 * a reader of a result tell the two apart. All of them come from Linux's
 * /proc (a figure the kernel does not offer is reported absent, never
 * made up):
 *   busy      share of CPU time not idle or waiting on I/O (/proc/stat);
 *   pressure  share of wall time in which at least one runnable task waited
 *             for a CPU (/proc/pressure/cpu "some", PSI; Linux 4.20+);
 *   wait      time a thread spent runnable but not running
 *             (/proc/thread-self/schedstat, second field, nanoseconds).
 *
 * Thread safety: every function may be called from any thread; a snapshot
 * is a plain value owned by its caller, and ixia_bench_thread_wait_ns reads
 * the calling thread's own figure. */
#ifndef IXIA_BENCH_MACHINE_H
#define IXIA_BENCH_MACHINE_H

#include <cjson/cJSON.h>
#include <glib.h>

typedef struct {
  gint64 at_us;            /* monotonic time of the snapshot */
  guint64 busy, total;     /* CPU time in clock ticks, all CPUs */
  gboolean has_stat;
  guint64 pressure_us;     /* cumulative "some" stall time */
  gboolean has_pressure;
} ixia_bench_machine_t;

/* Takes a snapshot of the machine-wide figures. */
void ixia_bench_machine_snap(ixia_bench_machine_t *m);

/* The calling thread's cumulative run-queue wait in nanoseconds, or -1 when
 * the kernel does not offer it (schedstats off, no /proc). */
gint64 ixia_bench_thread_wait_ns(void);

/* Adds to out what happened between before and now:
 * "box_busy_pct" and "cpu_pressure_pct" when the kernel offers them, and,
 * when client_wait_ns >= 0 and ops > 0, "client_wait_us_per_op": the
 * run-queue wait of the load generator's request threads over the run,
 * per request. */
void ixia_bench_machine_report(const ixia_bench_machine_t *before, gint64 client_wait_ns,
                               guint64 ops, cJSON *out);

/* Parsers, exposed for the unit test: the busy and total ticks of the
 * first ("cpu") line of /proc/stat text, and the "total=" of the "some"
 * line of /proc/pressure/cpu text. FALSE when the text has no such line. */
gboolean ixia_bench_parse_stat(const char *text, guint64 *busy, guint64 *total);
gboolean ixia_bench_parse_pressure(const char *text, guint64 *some_us);

#endif
