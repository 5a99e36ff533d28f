/* The metrics registry (metrics.h): families of counters and histograms
 * whose series are updated with atomics, and collectors that write the rest
 * at scrape time.
 *
 * A family holds its series in a hash table keyed by the rendered label
 * string, under a reader/writer lock taken only to find or create a series;
 * callers on hot paths keep the series pointer. Series are never freed (a
 * process has a bounded set of them), so a kept pointer stays valid. Sums
 * are doubles updated by compare-and-swap on their bits. */
#include "metrics.h"

#include <stdatomic.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

const double ixia_metrics_latency_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1,      2.5,     5,      10};
const guint ixia_metrics_latency_n = G_N_ELEMENTS(ixia_metrics_latency_buckets);

typedef enum { KIND_COUNTER, KIND_HISTOGRAM } kind_t;

struct ixia_metric_series {
  char *labels;     /* a="x",b="y" or "" */
  _Atomic guint64 count;    /* histogram observations */
  _Atomic guint64 sum_bits; /* double, counters' value or histograms' sum */
  _Atomic guint64 *buckets; /* histograms: n_bounds + 1, not cumulative */
  ixia_metric_family_t *family;
};

struct ixia_metric_family {
  char *name, *help;
  kind_t kind;
  char **label_names;
  guint n_labels;
  double *bounds;
  guint n_bounds;
  GRWLock lock;
  GHashTable *series; /* labels -> series */
  GPtrArray *order;   /* series in creation order */
};

typedef struct {
  ixia_metrics_collect_fn fn;
  gpointer user;
} collector_t;

struct ixia_metrics {
  GMutex lock;
  GPtrArray *families; /* in registration order */
  GArray *collectors;
};

ixia_metrics_t *ixia_metrics_default(void) {
  static gsize once = 0;
  static ixia_metrics_t *m;
  if (g_once_init_enter(&once)) {
    m = g_new0(ixia_metrics_t, 1);
    g_mutex_init(&m->lock);
    m->families = g_ptr_array_new();
    m->collectors = g_array_new(FALSE, FALSE, sizeof(collector_t));
    g_once_init_leave(&once, 1);
  }
  return m;
}

static ixia_metric_family_t *family(ixia_metrics_t *m, const char *name, const char *help,
                                    const char *labels, kind_t kind, const double *bounds,
                                    guint n_bounds) {
  g_mutex_lock(&m->lock);
  ixia_metric_family_t *f = NULL;
  for (guint i = 0; i < m->families->len && !f; i++) {
    ixia_metric_family_t *x = g_ptr_array_index(m->families, i);
    if (strcmp(x->name, name) == 0) f = x;
  }
  if (!f) {
    f = g_new0(ixia_metric_family_t, 1);
    f->name = g_strdup(name);
    f->help = g_strdup(help);
    f->kind = kind;
    f->label_names = labels && *labels ? g_strsplit(labels, ",", -1) : g_new0(char *, 1);
    f->n_labels = g_strv_length(f->label_names);
    f->bounds = bounds ? g_memdup2(bounds, sizeof(double) * n_bounds) : NULL;
    f->n_bounds = bounds ? n_bounds : 0;
    g_rw_lock_init(&f->lock);
    f->series = g_hash_table_new(g_str_hash, g_str_equal);
    f->order = g_ptr_array_new();
    g_ptr_array_add(m->families, f);
  }
  g_mutex_unlock(&m->lock);
  return f;
}

ixia_metric_family_t *ixia_metrics_counter(ixia_metrics_t *m, const char *name, const char *help,
                                           const char *labels) {
  return family(m, name, help, labels, KIND_COUNTER, NULL, 0);
}

ixia_metric_family_t *ixia_metrics_histogram(ixia_metrics_t *m, const char *name,
                                             const char *help, const char *labels,
                                             const double *bounds, guint n_bounds) {
  return family(m, name, help, labels, KIND_HISTOGRAM, bounds, n_bounds);
}

void ixia_prom_label(GString *labels, const char *name, const char *value) {
  if (labels->len) g_string_append_c(labels, ',');
  g_string_append_printf(labels, "%s=\"", name);
  for (const char *p = value ? value : ""; *p; p++) {
    if (*p == '\\') g_string_append(labels, "\\\\");
    else if (*p == '"') g_string_append(labels, "\\\"");
    else if (*p == '\n') g_string_append(labels, "\\n");
    else g_string_append_c(labels, *p);
  }
  g_string_append_c(labels, '"');
}

ixia_metric_series_t *ixia_metrics_series(ixia_metric_family_t *f, const char *const *values) {
  GString *labels = g_string_new(NULL);
  for (guint i = 0; i < f->n_labels; i++) ixia_prom_label(labels, f->label_names[i], values[i]);
  g_rw_lock_reader_lock(&f->lock);
  ixia_metric_series_t *s = g_hash_table_lookup(f->series, labels->str);
  g_rw_lock_reader_unlock(&f->lock);
  if (s) {
    g_string_free(labels, TRUE);
    return s;
  }
  g_rw_lock_writer_lock(&f->lock);
  s = g_hash_table_lookup(f->series, labels->str);
  if (!s) {
    s = g_new0(ixia_metric_series_t, 1);
    s->labels = g_string_free(labels, FALSE);
    labels = NULL;
    s->family = f;
    if (f->kind == KIND_HISTOGRAM) s->buckets = g_new0(_Atomic guint64, f->n_bounds + 1);
    g_hash_table_insert(f->series, s->labels, s);
    g_ptr_array_add(f->order, s);
  }
  g_rw_lock_writer_unlock(&f->lock);
  if (labels) g_string_free(labels, TRUE);
  return s;
}

ixia_metric_series_t *ixia_metrics_series1(ixia_metric_family_t *f, const char *value) {
  const char *v[1] = {value};
  return ixia_metrics_series(f, v);
}

static void add_double(_Atomic guint64 *bits, double n) {
  guint64 old = atomic_load_explicit(bits, memory_order_relaxed), next;
  do {
    double d;
    memcpy(&d, &old, sizeof d);
    d += n;
    memcpy(&next, &d, sizeof d);
  } while (!atomic_compare_exchange_weak_explicit(bits, &old, next, memory_order_relaxed, memory_order_relaxed));
}

static double load_double(_Atomic guint64 *bits) {
  guint64 v = atomic_load_explicit(bits, memory_order_relaxed);
  double d;
  memcpy(&d, &v, sizeof d);
  return d;
}

void ixia_metric_add(ixia_metric_series_t *s, double n) {
  if (s) add_double(&s->sum_bits, n);
}

void ixia_metric_observe(ixia_metric_series_t *s, double v) {
  if (!s || !s->buckets || isnan(v)) return;
  const ixia_metric_family_t *f = s->family;
  guint i = 0;
  while (i < f->n_bounds && v > f->bounds[i]) i++;
  atomic_fetch_add_explicit(&s->buckets[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
  add_double(&s->sum_bits, v);
}

void ixia_metric_histogram_read(ixia_metric_series_t *s, guint64 *count, double *sum) {
  *count = atomic_load_explicit(&s->count, memory_order_relaxed);
  *sum = load_double(&s->sum_bits);
}

void ixia_metrics_add_collector(ixia_metrics_t *m, ixia_metrics_collect_fn fn, gpointer user) {
  collector_t c = {fn, user};
  g_mutex_lock(&m->lock);
  g_array_append_val(m->collectors, c);
  g_mutex_unlock(&m->lock);
}

void ixia_metrics_remove_collector(ixia_metrics_t *m, ixia_metrics_collect_fn fn, gpointer user) {
  g_mutex_lock(&m->lock);
  for (guint i = 0; i < m->collectors->len; i++) {
    collector_t *c = &g_array_index(m->collectors, collector_t, i);
    if (c->fn == fn && c->user == user) {
      g_array_remove_index(m->collectors, i);
      break;
    }
  }
  g_mutex_unlock(&m->lock);
}

void ixia_prom_family(GString *out, const char *name, const char *type, const char *help) {
  g_string_append_printf(out, "# HELP %s ", name);
  for (const char *p = help; *p; p++) {
    if (*p == '\\') g_string_append(out, "\\\\");
    else if (*p == '\n') g_string_append(out, "\\n");
    else g_string_append_c(out, *p);
  }
  g_string_append_printf(out, "\n# TYPE %s %s\n", name, type);
}

static void append_value(GString *out, double v) {
  if (isnan(v)) g_string_append(out, "NaN");
  else if (isinf(v)) g_string_append(out, v > 0 ? "+Inf" : "-Inf");
  else if (v == (double)(gint64)v && fabs(v) < 1e15) g_string_append_printf(out, "%" G_GINT64_FORMAT, (gint64)v);
  else {
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append(out, g_ascii_dtostr(buf, sizeof buf, v));
  }
}

void ixia_prom_sample(GString *out, const char *name, const char *labels, double value) {
  g_string_append(out, name);
  if (labels && *labels) g_string_append_printf(out, "{%s}", labels);
  g_string_append_c(out, ' ');
  append_value(out, value);
  g_string_append_c(out, '\n');
}

static void render_family(GString *out, ixia_metric_family_t *f) {
  g_rw_lock_reader_lock(&f->lock);
  if (f->order->len == 0 && f->n_labels > 0) {
    g_rw_lock_reader_unlock(&f->lock);
    return; /* nothing observed yet: no family without samples */
  }
  ixia_prom_family(out, f->name, f->kind == KIND_COUNTER ? "counter" : "histogram", f->help);
  if (f->order->len == 0) {
    /* An unlabelled family shows its zero. */
    g_rw_lock_reader_unlock(&f->lock);
    ixia_metric_series_t *s = ixia_metrics_series(f, NULL);
    g_rw_lock_reader_lock(&f->lock);
    (void)s;
  }
  for (guint i = 0; i < f->order->len; i++) {
    ixia_metric_series_t *s = g_ptr_array_index(f->order, i);
    if (f->kind == KIND_COUNTER) {
      char *name = g_str_has_suffix(f->name, "_total") ? g_strdup(f->name)
                                                        : g_strconcat(f->name, "_total", NULL);
      ixia_prom_sample(out, name, s->labels, load_double(&s->sum_bits));
      g_free(name);
      continue;
    }
    char *bucket = g_strconcat(f->name, "_bucket", NULL);
    guint64 cum = 0;
    for (guint b = 0; b <= f->n_bounds; b++) {
      cum += atomic_load_explicit(&s->buckets[b], memory_order_relaxed);
      GString *l = g_string_new(s->labels);
      char le[G_ASCII_DTOSTR_BUF_SIZE];
      ixia_prom_label(l, "le", b < f->n_bounds ? g_ascii_formatd(le, sizeof le, "%g", f->bounds[b]) : "+Inf");
      ixia_prom_sample(out, bucket, l->str, (double)cum);
      g_string_free(l, TRUE);
    }
    g_free(bucket);
    char *sum = g_strconcat(f->name, "_sum", NULL), *count = g_strconcat(f->name, "_count", NULL);
    ixia_prom_sample(out, sum, s->labels, load_double(&s->sum_bits));
    /* The count is the +Inf bucket: equal even while observations land. */
    ixia_prom_sample(out, count, s->labels, (double)cum);
    g_free(sum);
    g_free(count);
  }
  g_rw_lock_reader_unlock(&f->lock);
}

char *ixia_metrics_render(ixia_metrics_t *m) {
  GString *out = g_string_new(NULL);
  g_mutex_lock(&m->lock);
  GPtrArray *fams = g_ptr_array_copy(m->families, NULL, NULL);
  GArray *cols = g_array_copy(m->collectors);
  g_mutex_unlock(&m->lock);
  for (guint i = 0; i < fams->len; i++) render_family(out, g_ptr_array_index(fams, i));
  for (guint i = 0; i < cols->len; i++) {
    collector_t *c = &g_array_index(cols, collector_t, i);
    c->fn(out, c->user);
  }
  g_ptr_array_unref(fams);
  g_array_unref(cols);
  return g_string_free(out, FALSE);
}

ixia_metric_series_t *ixia_metrics_call_latency(const char *transport, const char *call) {
  static ixia_metric_family_t *_Atomic f;
  if (!atomic_load(&f))
    atomic_store(&f, ixia_metrics_histogram(ixia_metrics_default(), "ixia_request_duration_seconds",
                                   "Time to answer a request, by call and transport.",
                                   "call,transport", ixia_metrics_latency_buckets,
                                   ixia_metrics_latency_n));
  const char *v[2] = {call, transport};
  return ixia_metrics_series(f, v);
}

void ixia_metrics_call_error(const char *transport, const char *call, const char *code) {
  static ixia_metric_family_t *_Atomic f;
  if (!atomic_load(&f))
    atomic_store(&f, ixia_metrics_counter(ixia_metrics_default(), "ixia_request_errors_total",
                                 "Requests answered with an error, by call, transport and error code.",
                                 "call,transport,code"));
  const char *v[3] = {call, transport, code};
  ixia_metric_add(ixia_metrics_series(f, v), 1);
}

void ixia_prom_stats(GString *out, const void *stats, const ixia_prom_stat_t *table, guint n,
                     const char *daemon) {
  for (guint i = 0; i < n; i++) {
    const ixia_prom_stat_t *m = &table[i];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(stats, m->stat);
    if (!cJSON_IsNumber(v) && !cJSON_IsBool(v)) continue;
    double x = cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? 1 : 0) : v->valuedouble * (m->scale ? m->scale : 1);
    ixia_prom_family(out, m->name, m->type, m->help);
    ixia_prom_sample(out, m->name, NULL, x);
  }
  ixia_prom_family(out, "ixia_up", "gauge", "1 while the daemon serves.");
  GString *l = g_string_new(NULL);
  ixia_prom_label(l, "daemon", daemon);
  ixia_prom_sample(out, "ixia_up", l->str, 1);
  g_string_free(l, TRUE);
}
