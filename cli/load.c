/* `ixia load` (load.h): JSON lines into `batch` calls over several
 * connections.
 *
 * One reading thread parses and checks each line and fills batches; worker
 * threads, each owning one client, send them. The queue between them is
 * bounded so memory stays flat on any input size. A batch the server
 * refuses is sent again one document at a time, so only the guilty lines
 * fail, each named by its line number; only an unreachable API or a full
 * disk stops the run. Progress is drawn by common/progress. */
#include "load.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "client.h"
#include "bytes.h"
#include "json.h"

/* Errors beyond this many are counted but not printed: a wrong table or a
 * file of the wrong shape would otherwise print one line per document. */
#define LOAD_MAX_SHOWN_ERRORS 50
#define LOAD_PROGRESS_INTERVAL_US (250 * G_TIME_SPAN_MILLISECOND)
#define LOAD_BAR_WIDTH 30

typedef struct {
  GPtrArray *ops;   /* IxiaWriteOp*, owned */
  GArray *lines;    /* guint64 line number of each op */
  gsize bytes;      /* JSON bytes in ops */
} load_batch_t;

typedef struct {
  const ixia_load_opts_t *o;

  /* Bounded queue of batches: the reader blocks when the workers fall
   * behind, so memory stays at a few batches per connection whatever the
   * file size. */
  GMutex mu;
  GCond cond;
  GQueue queue;
  guint max_queued;
  gboolean closed;  /* no more batches will be pushed */
  gboolean aborted; /* stop reading and drop queued batches */

  /* Guarded by mu. */
  guint64 lines, loaded, failed;
  guint64 bytes_read, total_bytes; /* total_bytes 0 when unknown (a pipe) */
  guint errors_shown;
  ixia_error_t *fatal;
  gboolean done; /* tells the progress thread to finish */
  gint64 start_us;
  gboolean bar_drawn;
} load_t;

typedef struct {
  load_t *l;
  ixia_client_t *client; /* NULL after a transport error, until reconnected */
  GThread *thread;
} load_worker_t;

static load_batch_t *load_batch_new(void) {
  load_batch_t *b = g_new0(load_batch_t, 1);
  b->ops = g_ptr_array_new_with_free_func(g_object_unref);
  b->lines = g_array_new(FALSE, FALSE, sizeof(guint64));
  return b;
}

static void load_batch_free(load_batch_t *b) {
  if (!b) return;
  g_ptr_array_unref(b->ops);
  g_array_unref(b->lines);
  g_free(b);
}

static guint64 load_batch_line(const load_batch_t *b, guint i) {
  return g_array_index(b->lines, guint64, i);
}

/* Clears the progress bar so that a message can take its line; mu held. */
static void load_clear_bar_locked(load_t *l) {
  if (l->bar_drawn) {
    fputs("\r\033[K", stderr);
    l->bar_drawn = FALSE;
  }
}

/* Prints one error line ("ixia: CODE: line N: ...") unless the cap is
 * reached; mu held. */
static void load_report_locked(load_t *l, ixia_code_t code, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
static void load_report_locked(load_t *l, ixia_code_t code, const char *fmt, ...) {
  if (l->errors_shown > LOAD_MAX_SHOWN_ERRORS) return;
  load_clear_bar_locked(l);
  if (l->errors_shown++ == LOAD_MAX_SHOWN_ERRORS) {
    fprintf(stderr, "ixia: further errors are counted but not shown\n");
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  fprintf(stderr, "ixia: %s: %s\n", ixia_code_name(code), msg);
  g_free(msg);
}

/* Records a fatal error and makes everybody stop; mu held. */
static void load_abort_locked(load_t *l, ixia_error_t *e) {
  ixia_error_propagate(&l->fatal, e);
  l->aborted = TRUE;
  g_cond_broadcast(&l->cond);
}

/* Blocks while the queue is full. Returns FALSE (and frees b) if the load
 * was aborted. */
static gboolean load_push(load_t *l, load_batch_t *b) {
  g_mutex_lock(&l->mu);
  while (!l->aborted && g_queue_get_length(&l->queue) >= l->max_queued)
    g_cond_wait(&l->cond, &l->mu);
  gboolean ok = !l->aborted;
  if (ok) {
    g_queue_push_tail(&l->queue, b);
    g_cond_broadcast(&l->cond);
  }
  g_mutex_unlock(&l->mu);
  if (!ok) load_batch_free(b);
  return ok;
}

/* Next batch, or NULL when the queue is closed and empty or the load was
 * aborted. */
static load_batch_t *load_pop(load_t *l) {
  g_mutex_lock(&l->mu);
  while (!l->aborted && !l->closed && g_queue_is_empty(&l->queue))
    g_cond_wait(&l->cond, &l->mu);
  load_batch_t *b = l->aborted ? NULL : g_queue_pop_head(&l->queue);
  if (b) g_cond_broadcast(&l->cond);
  g_mutex_unlock(&l->mu);
  return b;
}

static gboolean load_worker_connect(load_worker_t *w, ixia_error_t **err) {
  if (w->client) return TRUE;
  w->client = ixia_client_new(w->l->o->api, err);
  return w->client != NULL;
}

/* A transport error leaves the connection in an unknown state: drop it and
 * let the next call reconnect. */
static void load_worker_check_conn(load_worker_t *w, const ixia_error_t *e) {
  if (e && e->code == IXIA_EUNAVAILABLE) {
    ixia_client_destroy(w->client);
    w->client = NULL;
  }
}

static gboolean load_send_batch(load_worker_t *w, load_batch_t *b, ixia_error_t **err) {
  if (!load_worker_connect(w, err)) return FALSE;
  GArray *versions = g_array_new(FALSE, FALSE, sizeof(gint64));
  IxiaIxiaError *xe = NULL;
  GError *gerr = NULL;
  gboolean ok = ixia_ixia_if_batch(ixia_client_iface(w->client), &versions, b->ops, &xe, &gerr);
  ok = ixia_client_check(w->client, ok, xe, gerr, err);
  g_array_unref(versions);
  if (!ok) load_worker_check_conn(w, *err);
  return ok;
}

static gboolean load_put_one(load_worker_t *w, IxiaWriteOp *op, ixia_error_t **err) {
  if (!load_worker_connect(w, err)) return FALSE;
  gboolean ok = ixia_client_put(w->client, op->ns, op->table, op->key, op->json,
                                op->expected_version, NULL, err);
  if (!ok) load_worker_check_conn(w, *err);
  return ok;
}

/* Sends the whole batch, or with one >= 0 only its op number `one`. A
 * broken connection gets one retry on a fresh one: the lost call may or
 * may not have been applied, and sending the same puts again is harmless. */
static gboolean load_call(load_worker_t *w, load_batch_t *b, int one, ixia_error_t **err) {
  for (int attempt = 0;; attempt++) {
    ixia_error_t *e = NULL;
    gboolean ok = one < 0 ? load_send_batch(w, b, &e)
                          : load_put_one(w, g_ptr_array_index(b->ops, one), &e);
    if (ok) return TRUE;
    if (e->code != IXIA_EUNAVAILABLE || attempt == 1) return ixia_error_propagate(err, e);
    ixia_error_destroy(e);
  }
}

/* Errors that no other document of the load would escape. */
static gboolean load_fatal(const ixia_error_t *e) {
  return e->code == IXIA_EUNAVAILABLE || e->code == IXIA_EEXHAUSTED;
}

/* The API stays unreachable, or refuses writes for lack of disk space
 * (RESOURCE_EXHAUSTED): ops from..end of b are lost, and so is the rest of
 * the load. */
static void load_give_up(load_worker_t *w, load_batch_t *b, guint from, ixia_error_t *e) {
  load_t *l = w->l;
  g_mutex_lock(&l->mu);
  l->failed += b->ops->len - from;
  ixia_error_prefix(e, "lines %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT " not loaded",
                    load_batch_line(b, from), load_batch_line(b, b->ops->len - 1));
  load_abort_locked(l, e);
  g_mutex_unlock(&l->mu);
}

/* After the server refused a whole batch, sends its documents one at a
 * time so that only the guilty lines fail and are named. Nothing of the
 * refused batch was applied (batches are atomic), so this writes each
 * document once. */
static void load_send_one_by_one(load_worker_t *w, load_batch_t *b) {
  load_t *l = w->l;
  for (guint i = 0; i < b->ops->len; i++) {
    ixia_error_t *e = NULL;
    if (!load_call(w, b, (int)i, &e) && load_fatal(e)) {
      load_give_up(w, b, i, e);
      return;
    }
    g_mutex_lock(&l->mu);
    if (!e) {
      l->loaded++;
    } else {
      l->failed++;
      load_report_locked(l, e->code, "line %" G_GUINT64_FORMAT ": %s", load_batch_line(b, i),
                         e->message);
    }
    g_mutex_unlock(&l->mu);
    ixia_error_destroy(e);
  }
}

static void load_send(load_worker_t *w, load_batch_t *b) {
  load_t *l = w->l;
  ixia_error_t *e = NULL;
  if (load_call(w, b, -1, &e)) {
    g_mutex_lock(&l->mu);
    l->loaded += b->ops->len;
    g_mutex_unlock(&l->mu);
    return;
  }
  if (load_fatal(e)) {
    load_give_up(w, b, 0, e);
    return;
  }
  g_mutex_lock(&l->mu);
  load_report_locked(l, e->code,
                     "lines %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT
                     ": batch refused: %s; retrying its documents one at a time",
                     load_batch_line(b, 0), load_batch_line(b, b->ops->len - 1), e->message);
  g_mutex_unlock(&l->mu);
  ixia_error_destroy(e);
  load_send_one_by_one(w, b);
}

static gpointer load_worker_main(gpointer data) {
  load_worker_t *w = data;
  load_batch_t *b;
  while ((b = load_pop(w->l)) != NULL) {
    load_send(w, b);
    load_batch_free(b);
  }
  return NULL;
}

/* Draws "[=====>    ]  45%  45000 docs  8130 docs/s"; mu held. */
static void load_draw_bar_locked(load_t *l) {
  double secs = (double)(g_get_monotonic_time() - l->start_us) / G_TIME_SPAN_SECOND;
  double rate = secs > 0 ? (double)l->loaded / secs : 0;
  GString *s = g_string_new("\r");
  if (l->total_bytes > 0) {
    double frac = MIN(1.0, (double)l->bytes_read / (double)l->total_bytes);
    int filled = (int)(frac * LOAD_BAR_WIDTH);
    g_string_append_c(s, '[');
    for (int i = 0; i < LOAD_BAR_WIDTH; i++)
      g_string_append_c(s, i < filled ? '=' : i == filled ? '>' : ' ');
    g_string_append_printf(s, "] %3d%%  ", (int)(frac * 100));
  }
  g_string_append_printf(s, "%" G_GUINT64_FORMAT " docs  %.0f docs/s", l->loaded, rate);
  if (l->failed) g_string_append_printf(s, "  %" G_GUINT64_FORMAT " failed", l->failed);
  g_string_append(s, "\033[K");
  fputs(s->str, stderr);
  fflush(stderr);
  g_string_free(s, TRUE);
  l->bar_drawn = TRUE;
}

static gpointer load_progress_main(gpointer data) {
  load_t *l = data;
  g_mutex_lock(&l->mu);
  while (!l->done) {
    load_draw_bar_locked(l);
    gint64 until = g_get_monotonic_time() + LOAD_PROGRESS_INTERVAL_US;
    while (!l->done && g_cond_wait_until(&l->cond, &l->mu, until)) {
    }
  }
  load_clear_bar_locked(l);
  g_mutex_unlock(&l->mu);
  return NULL;
}

/* The document key from the key field: a non-empty string, or an integer
 * (ids are often numbers), within the key size limit. */
static char *load_key(const cJSON *doc, const ixia_load_opts_t *o, ixia_error_t **err) {
  const cJSON *k = ixia_json_path(doc, o->key_field);
  char *key = NULL;
  if (!k) {
    ixia_error_set(err, IXIA_EINVAL, "no key field '%s'", o->key_field);
    return NULL;
  }
  if (cJSON_IsString(k)) {
    key = g_strdup(k->valuestring);
  } else if (cJSON_IsNumber(k) && ixia_bytes_is_safe_int(k->valuedouble)) {
    key = g_strdup_printf("%.0f", k->valuedouble);
  } else {
    ixia_error_set(err, IXIA_EINVAL, "key field '%s' must be a string or an integer",
                   o->key_field);
    return NULL;
  }
  gsize len = strlen(key);
  if (len == 0 || len > o->max_key_bytes) {
    ixia_error_set(err, IXIA_EINVAL, "key field '%s' is %zu bytes; a key is 1-%zu bytes",
                   o->key_field, len, o->max_key_bytes);
    g_free(key);
    return NULL;
  }
  return key;
}

/* Builds the write for one line, or sets err naming what is wrong with it. */
static IxiaWriteOp *load_line_op(const ixia_load_opts_t *o, const char *text, gsize len,
                                 ixia_error_t **err) {
  const ixia_json_limits_t jl = {o->max_doc_bytes, "limits.max_doc_bytes", o->max_depth,
                                 "limits.max_json_depth"};
  cJSON *doc = ixia_json_parse_object(text, len, &jl, "document", err);
  if (!doc) return NULL;
  char *key = load_key(doc, o, err);
  cJSON_Delete(doc);
  if (!key) return NULL;
  IxiaWriteOp *op = g_object_new(IXIA_TYPE_WRITE_OP, NULL);
  op->kind = IXIA_OP_KIND_PUT;
  op->__isset_kind = TRUE;
  op->ns = g_strdup(o->ns);
  op->__isset_ns = TRUE;
  op->table = g_strdup(o->table);
  op->__isset_table = TRUE;
  op->key = key;
  op->__isset_key = TRUE;
  /* The line as read: the server parses it anyway, so re-printing would
   * only cost time. */
  op->json = g_strndup(text, len);
  op->__isset_json = TRUE;
  op->expected_version = -1;
  op->__isset_expected_version = TRUE;
  return op;
}

static gboolean load_is_blank(const char *s, gsize len) {
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isspace(s[i])) return FALSE;
  return TRUE;
}

/* The reading side: runs on the calling thread until EOF or abort. */
static void load_read(load_t *l, FILE *in) {
  const ixia_load_opts_t *o = l->o;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  guint64 lineno = 0;
  load_batch_t *b = load_batch_new();
  while ((n = getline(&line, &cap, in)) != -1) {
    lineno++;
    gsize len = (gsize)n;
    g_mutex_lock(&l->mu);
    l->lines = lineno;
    l->bytes_read += len;
    gboolean aborted = l->aborted;
    g_mutex_unlock(&l->mu);
    if (aborted) break;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    if (load_is_blank(line, len)) continue;
    ixia_error_t *e = NULL;
    IxiaWriteOp *op = load_line_op(o, line, len, &e);
    if (!op) {
      g_mutex_lock(&l->mu);
      l->failed++;
      load_report_locked(l, e->code, "line %" G_GUINT64_FORMAT ": %s", lineno, e->message);
      g_mutex_unlock(&l->mu);
      ixia_error_destroy(e);
      continue;
    }
    /* Cut before a document that would push the batch over its byte
     * budget, so that one frame stays well under the server's limit. */
    if (b->ops->len > 0 && b->bytes + len > o->max_batch_bytes) {
      if (!load_push(l, b)) {
        b = NULL;
        g_object_unref(op);
        break;
      }
      b = load_batch_new();
    }
    g_ptr_array_add(b->ops, op);
    g_array_append_val(b->lines, lineno);
    b->bytes += len;
    if (b->ops->len >= (guint)o->batch) {
      if (!load_push(l, b)) {
        b = NULL;
        break;
      }
      b = load_batch_new();
    }
  }
  if (ferror(in)) {
    g_mutex_lock(&l->mu);
    load_abort_locked(l, ixia_error_new(IXIA_EINTERNAL, "reading %s: %s",
                                        strcmp(o->path, "-") == 0 ? "stdin" : o->path,
                                        g_strerror(errno)));
    g_mutex_unlock(&l->mu);
  }
  free(line); /* getline allocates with malloc */
  if (b && b->ops->len > 0)
    load_push(l, b);
  else
    load_batch_free(b);
}

void ixia_load_run(const ixia_load_opts_t *o, ixia_load_result_t *r) {
  memset(r, 0, sizeof *r);
  gboolean use_stdin = strcmp(o->path, "-") == 0;
  FILE *in = use_stdin ? stdin : fopen(o->path, "r");
  if (!in) {
    r->fatal = ixia_error_new(IXIA_EINVAL, "cannot open %s: %s", o->path, g_strerror(errno));
    return;
  }

  load_t l = {.o = o, .max_queued = (guint)o->conns * 2};
  g_mutex_init(&l.mu);
  g_cond_init(&l.cond);
  g_queue_init(&l.queue);
  struct stat st;
  if (fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode)) l.total_bytes = (guint64)st.st_size;

  /* Connect every worker before reading anything: an unreachable API is
   * then one clear error rather than a failure per batch. */
  load_worker_t *workers = g_new0(load_worker_t, o->conns);
  for (int i = 0; i < o->conns; i++) {
    workers[i].l = &l;
    ixia_error_t *e = NULL;
    if (!load_worker_connect(&workers[i], &e)) {
      r->fatal = e;
      break;
    }
  }

  l.start_us = g_get_monotonic_time();
  GThread *progress = NULL;
  if (!r->fatal) {
    for (int i = 0; i < o->conns; i++)
      workers[i].thread = g_thread_new("ixia-load", load_worker_main, &workers[i]);
    if (o->progress) progress = g_thread_new("ixia-progress", load_progress_main, &l);

    load_read(&l, in);

    g_mutex_lock(&l.mu);
    l.closed = TRUE;
    g_cond_broadcast(&l.cond);
    g_mutex_unlock(&l.mu);
    for (int i = 0; i < o->conns; i++) g_thread_join(workers[i].thread);

    g_mutex_lock(&l.mu);
    l.done = TRUE;
    g_cond_broadcast(&l.cond);
    g_mutex_unlock(&l.mu);
    if (progress) g_thread_join(progress);

    /* Batches still queued after an abort were never sent. */
    load_batch_t *b;
    while ((b = g_queue_pop_head(&l.queue)) != NULL) {
      l.failed += b->ops->len;
      load_batch_free(b);
    }
    r->fatal = l.fatal;
  }
  r->seconds = (double)(g_get_monotonic_time() - l.start_us) / G_TIME_SPAN_SECOND;
  r->lines = l.lines;
  r->loaded = l.loaded;
  r->failed = l.failed;

  for (int i = 0; i < o->conns; i++) ixia_client_destroy(workers[i].client);
  g_free(workers);
  if (!use_stdin) fclose(in);
  g_queue_clear(&l.queue);
  g_cond_clear(&l.cond);
  g_mutex_clear(&l.mu);
}
