/* Prometheus metrics of one process, in the text exposition format.
 *
 * Two sources feed one page. Families registered here (counters and
 * histograms, each with fixed label names) are updated on hot paths with
 * atomics: a series is looked up once by its label values and then observed
 * without a lock. Collectors (callbacks a daemon registers) write the rest
 * at scrape time from counters the code keeps anyway (stats), as gauges or
 * counters, through ixia_prom_family/ixia_prom_sample. The page is what
 * `promtool check metrics` accepts: one HELP and TYPE per family, its
 * samples together, names [a-zA-Z_:][a-zA-Z0-9_:]*, label values escaped.
 *
 * Label values that come from outside (method names of a request) must be
 * bounded by the caller: every distinct value is a series kept for the
 * life of the process.
 *
 * Thread safety: everything may be called from any thread. */
#ifndef IXIA_METRICS_H
#define IXIA_METRICS_H

#include <glib.h>

typedef struct ixia_metrics ixia_metrics_t;
typedef struct ixia_metric_family ixia_metric_family_t;
typedef struct ixia_metric_series ixia_metric_series_t;

/* The process's registry (created on first use, never freed). */
ixia_metrics_t *ixia_metrics_default(void);

/* A counter family; labels: comma-separated label names ("call,code"), or
 * NULL/"" for none. Registering the same name again returns the family. */
ixia_metric_family_t *ixia_metrics_counter(ixia_metrics_t *m, const char *name, const char *help,
                                           const char *labels);
/* A histogram family with upper bounds (ascending; +Inf is added). */
ixia_metric_family_t *ixia_metrics_histogram(ixia_metrics_t *m, const char *name,
                                             const char *help, const char *labels,
                                             const double *bounds, guint n_bounds);
/* Latency buckets in seconds, 100 µs to 10 s. */
extern const double ixia_metrics_latency_buckets[];
extern const guint ixia_metrics_latency_n;

/* The series of a family for label values (as many as the family has label
 * names, in order; NULL when it has none). Created on first use. */
ixia_metric_series_t *ixia_metrics_series(ixia_metric_family_t *f, const char *const *values);
/* The same with one label value. */
ixia_metric_series_t *ixia_metrics_series1(ixia_metric_family_t *f, const char *value);
void ixia_metric_add(ixia_metric_series_t *s, double n);     /* counters */
void ixia_metric_observe(ixia_metric_series_t *s, double v); /* histograms */
/* A histogram series' count and sum (tests). */
void ixia_metric_histogram_read(ixia_metric_series_t *s, guint64 *count, double *sum);

/* The request metrics every server port shares:
 * ixia_request_duration_seconds{call, transport} (histogram) and
 * ixia_request_errors_total{call, transport, code}. transport: "thrift" or
 * "http"; call: a method or route name from a bounded set. */
ixia_metric_series_t *ixia_metrics_call_latency(const char *transport, const char *call);
void ixia_metrics_call_error(const char *transport, const char *call, const char *code);

/* Collectors write families at scrape time. */
typedef void (*ixia_metrics_collect_fn)(GString *out, gpointer user);
void ixia_metrics_add_collector(ixia_metrics_t *m, ixia_metrics_collect_fn fn, gpointer user);
void ixia_metrics_remove_collector(ixia_metrics_t *m, ixia_metrics_collect_fn fn, gpointer user);

/* The whole page (g_free it). */
char *ixia_metrics_render(ixia_metrics_t *m);

/* Writers for collectors. type: "gauge" or "counter". labels: already
 * formatted `a="x",b="y"` (see ixia_prom_label) or NULL. */
void ixia_prom_family(GString *out, const char *name, const char *type, const char *help);
void ixia_prom_sample(GString *out, const char *name, const char *labels, double value);
/* Appends name="value" (value escaped) to labels, with a comma when labels
 * is not empty. */
void ixia_prom_label(GString *labels, const char *name, const char *value);

/* One stats member (a number or a boolean) as one Prometheus family. */
typedef struct {
  const char *stat; /* member of the stats object */
  const char *name, *type, *help;
  double scale;     /* 0 = 1; e.g. 0.001 turns ms into seconds */
} ixia_prom_stat_t;
/* Writes every family of table whose member stats has (stats: a cJSON *
 * object), then ixia_up{daemon} 1. */
void ixia_prom_stats(GString *out, const void *stats, const ixia_prom_stat_t *table, guint n,
                     const char *daemon);

#endif
