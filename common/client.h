/* Client of the ixia Thrift API (framed binary), used by the CLI, the tests,
 * the benchmarks and the recovery tools.
 *
 * Every call converts Thrift exceptions and transport errors into
 * ixia_error_t: a server-side IxiaError keeps its code and message; a broken
 * connection becomes IXIA_EUNAVAILABLE. Strings returned through out
 * parameters are g_malloc'd and owned by the caller.
 *
 * Thread safety: one client per thread; a client is one connection. */
#ifndef IXIA_CLIENT_H
#define IXIA_CLIENT_H

#include <cjson/cJSON.h>
#include <glib.h>

#include "config.h"
#include "error.h"
#include "ixia_ixia.h"
#include "ixia_search.h"

typedef struct ixia_client ixia_client_t;

/* One framed binary-protocol Thrift connection, shared by every client of
 * an ixia service (the API client, the replication source). */
typedef struct {
  int fd;
  ThriftTransport *transport; /* ixia_wire_socket_new on fd */
  ThriftProtocol *protocol;   /* bounded binary protocol (wire.h) */
} ixia_thrift_conn_t;

/* Whether addr names a service: "host:port", or "unix:PATH" for a
 * Unix-domain socket on this machine (an index shard's indexer.socket);
 * FALSE with an error naming the setting `what` otherwise. */
gboolean ixia_address_check(const char *addr, const char *what, ixia_error_t **err);
#define IXIA_UNIX_PREFIX "unix:"

/* Connects to addr (see ixia_address_check), giving up after connect_timeout_ms; io_timeout_ms
 * (0 = none) bounds each later send and receive. Answers are decoded with
 * the process's wire limits (ixia_wire_limits: server.max_frame_bytes and
 * friends, as the servers use them). */
gboolean ixia_thrift_conn_open(ixia_thrift_conn_t *c, const char *hostport, gint64 connect_timeout_ms,
                               gint64 io_timeout_ms, ixia_error_t **err);
/* Wakes a thread blocked on the connection (it sees an error); thread-safe. */
void ixia_thrift_conn_interrupt(ixia_thrift_conn_t *c);
void ixia_thrift_conn_close(ixia_thrift_conn_t *c);

/* The API address to use: `explicit_addr` if given, else $IXIA_API, else
 * api.host:api.port from cfg (cfg may be NULL: then 127.0.0.1:9090).
 * Caller frees. */
char *ixia_client_address(const char *explicit_addr, const ixia_config_t *cfg);

/* Connects to "host:port". */
ixia_client_t *ixia_client_new(const char *hostport, ixia_error_t **err);
/* Timeouts of every client of this process (client.* in the config table),
 * set once at start-up before threads, by ixia_config_from_args; until then
 * the table's defaults. */
typedef struct {
  gint64 connect_ms; /* TCP connect */
  gint64 auth_ms;    /* the answer to the API key */
  gint64 status_ms;  /* a shard's status (ixia_shard_statuses callers) */
  gint64 shard_ms;   /* one call of the recovery tools to a shard */
} ixia_client_timeouts_t;
void ixia_client_set_timeouts(const ixia_client_timeouts_t *t);
const ixia_client_timeouts_t *ixia_client_timeouts(void);

/* The same, with each send and receive bounded by io_timeout_ms (0 = none). */
ixia_client_t *ixia_client_new_timeout(const char *hostport, gint64 io_timeout_ms, ixia_error_t **err);
/* Wakes a thread blocked in a call on c (the call fails); any thread. */
void ixia_client_interrupt(ixia_client_t *c);
void ixia_client_destroy(ixia_client_t *c);

/* The generated interface, for calls without a wrapper (multiGet, batch). */
IxiaIxiaIf *ixia_client_iface(ixia_client_t *c);
/* Converts the outcome of a raw generated call (ok, its exception, its
 * GError) into ixia_error_t; frees xe and gerr. */
gboolean ixia_client_check(ixia_client_t *c, gboolean ok, IxiaIxiaError *xe, GError *gerr,
                           ixia_error_t **err);

/* expected_version: -1 none, 0 key must be absent, N > 0 current version. */
gboolean ixia_client_put(ixia_client_t *c, const char *ns, const char *table, const char *key,
                         const char *json, gint64 expected_version, gint64 *version,
                         ixia_error_t **err);
gboolean ixia_client_upsert(ixia_client_t *c, const char *ns, const char *table, const char *key,
                            const char *json, gint64 expected_version, gint64 *version,
                            ixia_error_t **err);
gboolean ixia_client_delete(ixia_client_t *c, const char *ns, const char *table, const char *key,
                            gint64 expected_version, gint64 *version, ixia_error_t **err);
/* fields: NULL-terminated list of dotted paths, or NULL for the whole doc.
 * A missing key returns TRUE with *found = FALSE. */
gboolean ixia_client_get(ixia_client_t *c, const char *ns, const char *table, const char *key,
                         const char *const *fields, gboolean *found, gint64 *version, char **json,
                         ixia_error_t **err);
gboolean ixia_client_apply_schema(ixia_client_t *c, const char *schema_json, gint64 *version,
                                  ixia_error_t **err);
gboolean ixia_client_get_schema(ixia_client_t *c, const char *ns, const char *table, char **json,
                                ixia_error_t **err);
gboolean ixia_client_stats(ixia_client_t *c, char **json, ixia_error_t **err);
/* API keys (Ixia.createKey, listKeys, revokeKey; admin on every
 * namespace): *json as the calls return it. */
gboolean ixia_client_create_key(ixia_client_t *c, const char *spec_json, char **json,
                                ixia_error_t **err);
gboolean ixia_client_list_keys(ixia_client_t *c, char **json, ixia_error_t **err);
gboolean ixia_client_revoke_key(ixia_client_t *c, const char *id, ixia_error_t **err);
/* Ixia.snapshot: a checkpoint of the truth store written to dir on the
 * API's host; *json is {"dir", "version"}. */
gboolean ixia_client_snapshot(ixia_client_t *c, const char *dir, char **json, ixia_error_t **err);
/* Up to limit documents of a table with key > after (NULL: from the
 * first), in key order: *docs is a new GPtrArray of IxiaDocument (unref it). */
gboolean ixia_client_scan(ixia_client_t *c, const char *ns, const char *table, const char *after,
                          gint limit, GPtrArray **docs, ixia_error_t **err);
/* The index shard addresses the API fans queries out to (its stats'
 * "query_indexers"), as a NULL-terminated array (g_strfreev); an error when
 * it has none. */
char **ixia_client_shards(ixia_client_t *c, ixia_error_t **err);
gboolean ixia_client_query(ixia_client_t *c, const char *request_json, char **response_json,
                           ixia_error_t **err);
/* Ixia.walSince: the whole WAL batches holding versions > after, in order, up
 * to about max_bytes: *batches is a new GPtrArray of IxiaWalBatch (unref it).
 * IXIA_ENOTFOUND when the API's WAL no longer holds version after+1. */
gboolean ixia_client_wal_since(ixia_client_t *c, gint64 after, gint32 max_bytes,
                               GPtrArray **batches, ixia_error_t **err);

/* Repair listings (Ixia.keyVersions, digest, currentEvents, schemaEvents;
 * schemas/ixia.thrift). partitions: the filter (NULL or n_partitions 0:
 * every key). keyVersions appends ixia_ae_kv_t to out (antientropy.h),
 * digest ixia_ae_range_t; currentEvents and schemaEvents return a new
 * GPtrArray of IxiaChangeEvent (unref it). */
gboolean ixia_client_key_versions(ixia_client_t *c, const char *ns, const char *table,
                                  const char *after, const char *end, gint limit,
                                  gint32 partition_count, const gint32 *partitions,
                                  guint n_partitions, GArray *out, gint64 *store_version,
                                  ixia_error_t **err);
gboolean ixia_client_digest(ixia_client_t *c, const char *ns, const char *table, const char *after,
                            const char *end, gint max_keys, gint bucket_keys,
                            gint32 partition_count, const gint32 *partitions, guint n_partitions,
                            GArray *out, gint64 *store_version, ixia_error_t **err);
gboolean ixia_client_current_events(ixia_client_t *c, const char *ns, const char *table,
                                    const char *const *keys, guint n, GPtrArray **events,
                                    ixia_error_t **err);
gboolean ixia_client_schema_events(ixia_client_t *c, GPtrArray **events, ixia_error_t **err);

/* A client of one index shard's Search service (ixia-indexer). Same
 * ownership and threading rules as ixia_client_t. io_timeout_ms (0 = none)
 * bounds each send and receive. */
typedef struct ixia_shard_client ixia_shard_client_t;
ixia_shard_client_t *ixia_shard_client_new(const char *hostport, gint64 io_timeout_ms,
                                           ixia_error_t **err);
void ixia_shard_client_destroy(ixia_shard_client_t *c);
IxiaSearchIf *ixia_shard_client_iface(ixia_shard_client_t *c);
const char *ixia_shard_client_address(const ixia_shard_client_t *c);
/* The connection's socket (blocking, with the I/O timeout), for a caller
 * that sends a whole call and reads its whole answer itself (wire.h's
 * string calls) between calls made through the client. */
int ixia_shard_client_fd(const ixia_shard_client_t *c);
/* As ixia_client_check, naming the shard in transport errors. */
gboolean ixia_shard_client_check(ixia_shard_client_t *c, gboolean ok, IxiaIxiaError *xe,
                                 GError *gerr, ixia_error_t **err);
/* Search.search / Search.status: *json is g_malloc'd. */
gboolean ixia_shard_client_search(ixia_shard_client_t *c, const char *request_json, char **json,
                                  ixia_error_t **err);
gboolean ixia_shard_client_status(ixia_shard_client_t *c, char **json, ixia_error_t **err);
/* Every shard's status: a JSON array of {"address", "status": {...}} or
 * {"address", "error": "..."} (`ixia shards`, the API's /v1/_shards and
 * readiness). *all_up (may be NULL) is FALSE when one could not answer. */
cJSON *ixia_shard_statuses(char **addrs, gint64 io_timeout_ms, gboolean *all_up);
/* Search.digest: appends one ixia_ae_range_t per bound to out. */
gboolean ixia_shard_client_digest(ixia_shard_client_t *c, const char *ns, const char *table,
                                  const char *after, const char *const *bounds, guint n,
                                  GArray *out, ixia_error_t **err);

#endif
