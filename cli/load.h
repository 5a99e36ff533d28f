/* Bulk loader behind `ixia load`: reads JSON lines, takes each document's key
 * from a field, and writes them with `batch` calls over several connections
 * at once.
 *
 * The reading thread parses and checks every line (so that one bad line is
 * reported with its number instead of failing a whole atomic batch), groups
 * documents into batches and hands them through a bounded queue to one
 * worker thread per connection. Each worker owns its own client (clients are
 * not thread-safe). An unreachable API (UNAVAILABLE, after one retry on a
 * fresh connection) or a refusal for lack of disk space
 * (RESOURCE_EXHAUSTED) stops the whole load, naming the lines not loaded;
 * any other refused batch is retried one document at a time so that only
 * the guilty lines fail. */
#ifndef IXIA_LOAD_H
#define IXIA_LOAD_H

#include <glib.h>

#include "error.h"

typedef struct {
  const char *api;       /* HOST:PORT */
  const char *ns;
  const char *table;
  const char *path;      /* "-" reads stdin */
  const char *key_field; /* dotted path of the key inside each document */
  int conns;             /* concurrent connections, one thread each */
  int batch;             /* documents per batch call */
  gsize max_doc_bytes;   /* local checks mirroring the server's limits */
  int max_depth;
  gsize max_key_bytes;
  gsize max_batch_bytes; /* a batch is also cut when its JSON reaches this */
  gboolean progress;     /* draw a progress bar on stderr */
} ixia_load_opts_t;

typedef struct {
  guint64 lines;   /* lines read (blank lines included) */
  guint64 loaded;  /* documents acknowledged by the server */
  guint64 failed;  /* lines refused locally or by the server */
  double seconds;
  /* Set when the load stopped early (unreadable input, API unreachable);
   * failed then does not count the lines never read. */
  ixia_error_t *fatal;
} ixia_load_result_t;

/* Runs the load to the end (or until a fatal error). Per-line errors are
 * printed on stderr as they happen. The caller frees result->fatal. */
void ixia_load_run(const ixia_load_opts_t *opts, ixia_load_result_t *result);

#endif
