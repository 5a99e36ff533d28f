/* A concurrent Thrift server (framed transport, binary protocol).
 *
 * Thrift c_glib ships only a one-connection-at-a-time server. This one runs
 * an accept loop on its own thread and hands each connection to a GThreadPool
 * worker that serves requests on it until the client hangs up. Limits
 * (server.* in the config): frame size checked from the frame header before
 * anything is read, string and list sizes inside messages, an idle/stall
 * timeout per connection, and a cap on connections served at once.
 *
 * The processor must be safe to call from several threads at once.
 * Thread safety: new/start/stop/destroy from one controlling thread. */
#ifndef IXIA_SERVER_H
#define IXIA_SERVER_H

#include <thrift/c_glib/processor/thrift_processor.h>

#include "config.h"
#include "error.h"

typedef struct ixia_server ixia_server_t;

/* Binds and listens on host:port (port 0 picks a free one). Takes a
 * reference on processor. */
ixia_server_t *ixia_server_new(const ixia_config_t *cfg, const char *host, int port,
                               ThriftProcessor *processor, ixia_error_t **err);
/* The port actually bound. */
int ixia_server_port(const ixia_server_t *srv);
gboolean ixia_server_start(ixia_server_t *srv, ixia_error_t **err);
/* Stops accepting, closes open connections and waits for workers. */
void ixia_server_stop(ixia_server_t *srv);
void ixia_server_destroy(ixia_server_t *srv);

/* Counters for stats. */
guint64 ixia_server_connections_total(const ixia_server_t *srv);
guint64 ixia_server_rejected_frames(const ixia_server_t *srv);

/* Blocks until SIGINT or SIGTERM. */
void ixia_wait_for_signal(void);

/* Writes the bound port to path (atomically; nothing when path is empty),
 * so that scripts and tests starting a daemon on port 0 can find it. */
gboolean ixia_server_write_port_file(const ixia_server_t *srv, const char *path, ixia_error_t **err);

/* Writes text to path atomically (temp file + rename), so a reader polling
 * for it never sees a partial file. */
gboolean ixia_write_file_atomic(const char *path, const char *text, ixia_error_t **err);

#endif
