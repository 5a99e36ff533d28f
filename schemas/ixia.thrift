/*
 * ixia RPC interface. Framed transport, binary protocol.
 *
 * Documents travel as JSON text: the server parses and validates them, so
 * clients in any language need nothing but a JSON encoder.
 */

namespace c_glib Ixia

/* Error codes carried by IxiaError.code; the CLI prints code and message. */
enum ErrorCode {
  OK = 0,
  INVALID_ARGUMENT = 1,    /* bad key, bad JSON, bad schema, bad query */
  NOT_FOUND = 2,           /* unknown namespace/table, missing schema */
  CONFLICT = 3,            /* expected version did not match */
  TOO_LARGE = 4,           /* over a size, depth or count limit */
  TYPE_MISMATCH = 5,       /* a declared field has the wrong type */
  UNAVAILABLE = 6,         /* a dependency failed; retry later */
  INTERNAL = 7,
  UNSUPPORTED = 8,         /* not implemented yet */
  RESOURCE_EXHAUSTED = 9,  /* refused, nothing written: free disk space under its reserve
                              (store.disk_reserve_mb, index.disk_reserve_mb); retry later */
  DEADLINE_EXCEEDED = 10,  /* a query ran past its deadline (query.deadline_ms, timeout_ms) */
  NOT_CAUGHT_UP = 11,      /* min_version was not reached within the wait (query.max_wait_ms) */
  SHARD_UNAVAILABLE = 12   /* an index shard could not answer (down, or repairing itself
                              when the query asked for allow_repairing: false) */
}

exception IxiaError {
  1: i32 code,
  2: string message
}

enum OpKind {
  PUT = 1,
  UPSERT = 2,
  DELETE_DOC = 3
}

/* expected_version: -1 = no condition, 0 = the key must not exist,
 * N > 0 = the key's current version must be N. */
struct WriteOp {
  1: OpKind kind,
  2: string ns,
  3: string table,
  4: string key,
  5: string json,            /* ignored for DELETE_DOC */
  6: i64 expected_version = -1
}

struct Document {
  1: bool found,
  2: string key,
  3: i64 version,
  4: string json             /* empty when not found */
}

/* One WAL write batch exactly as RocksDB stores it (WriteBatch data). */
struct WalBatch {
  1: i64 sequence,   /* sequence number (= version) of the batch's first edit */
  2: binary data
}

service Ixia {
  /* Replace the document; returns its new version once the WAL is synced. */
  i64 put(1: string ns, 2: string table, 3: string key, 4: string json,
          5: i64 expected_version) throws (1: IxiaError err),

  /* Merge top-level fields into the document (creating it if absent). */
  i64 upsert(1: string ns, 2: string table, 3: string key, 4: string json,
             5: i64 expected_version) throws (1: IxiaError err),

  /* "delete" is a reserved word in Thrift IDL, hence the name. */
  i64 deleteDoc(1: string ns, 2: string table, 3: string key,
                4: i64 expected_version) throws (1: IxiaError err),

  /* Atomic: every op applies, or none does. Returns one version per op. */
  list<i64> batch(1: list<WriteOp> ops) throws (1: IxiaError err),

  /* fields empty = whole document. A missing key gives found=false. */
  Document get(1: string ns, 2: string table, 3: string key,
               4: list<string> fields) throws (1: IxiaError err),

  list<Document> multiGet(1: string ns, 2: string table, 3: list<string> keys,
                          4: list<string> fields) throws (1: IxiaError err),

  /* Documents of a table with key > after_key (byte order), at most
   * `limit` (1..limits.max_get_keys) and fewer when they would fill half of
   * server.max_frame_bytes, read from one consistent view of the truth
   * store. For backfills and verification: page with the last key until a
   * page comes back empty. */
  list<Document> scan(1: string ns, 2: string table, 3: string after_key, 4: i32 limit)
      throws (1: IxiaError err),

  /* Query request and response are JSON as described in docs/QUERY.md. */
  string query(1: string request_json) throws (1: IxiaError err),

  /* Schema JSON as described in docs/SCHEMA.md; returns the stored version. */
  i64 applySchema(1: string schema_json) throws (1: IxiaError err),
  string getSchema(1: string ns, 2: string table) throws (1: IxiaError err),

  /* Counters as a JSON object. */
  string stats() throws (1: IxiaError err),

  /* Recovery (ixia-recovery). A consistent RocksDB checkpoint of the truth
   * store written to `dir`, a path on the API's host that must not exist.
   * Takes no downtime. Returns JSON {"dir": ..., "version": V}: the snapshot
   * holds exactly the edits up to version V. */
  string snapshot(1: string dir) throws (1: IxiaError err),

  /* Whole WAL write batches holding versions > after, in order, up to about
   * max_bytes (at least one batch when any exists): the archive that makes
   * point-in-time restore possible. NOT_FOUND when the WAL no longer holds
   * version after+1 (purged: take a new snapshot). */
  list<WalBatch> walSince(1: i64 after, 2: i32 max_bytes) throws (1: IxiaError err)
}

/* ---------------------------------------------------------------------------
 * Change data capture: truth-store WAL -> replication sink -> Kafka.
 * ------------------------------------------------------------------------ */


/* Served by ixia-replication-sink. Sinks are stateless: the query API's
 * replication source may use any of several. */
service ReplicationSink {
  /* Publishes every edit of the batches to Kafka and returns only after
   * Kafka acknowledged all of them (acks=all). Returns the sequence of the
   * last edit published. Any failed delivery fails the call: the source
   * re-sends, so consumers must be idempotent by version. */
  i64 replicate(1: list<WalBatch> batches) throws (1: IxiaError err),
  string stats() throws (1: IxiaError err)
}

enum ChangeOp {
  PUT = 1,      /* doc holds the whole document after the write */
  DELETE = 2,
  SCHEMA = 3    /* doc holds the table schema JSON; key is empty */
}

/* The Kafka change event. Message value: ChangeEvent in Thrift's compact
 * protocol. Message key: the truth-store key bytes of the document
 * ('d', len(ns), ns, len(table), table, key; 's' ... for schemas), so every
 * edit of a key lands on one partition, in order.
 *
 * Versioning: `format` is 1. Readers ignore unknown fields (Thrift does);
 * a change that old readers must not misread bumps `format`. */
struct ChangeEvent {
  1: i16 format = 1,
  2: ChangeOp op,
  3: string ns,
  4: string table,
  5: binary key,         /* the document key (empty for SCHEMA) */
  6: i64 version,        /* the edit's WAL sequence number */
  7: optional string doc,
  8: i64 expire_at = 0,  /* epoch seconds, 0 = never */
  9: i64 timestamp_ms    /* wall-clock ms when the sink decoded the edit */
}

/* ---------------------------------------------------------------------------
 * Index shards: served by each ixia-indexer for the partitions it consumes.
 * ------------------------------------------------------------------------ */

/* A document as the index records it (for verify and dump-index). */
struct IndexedDoc {
  1: binary key,
  2: i64 version,
  3: bool deleted
}

service Search {
  /* Request JSON: {"query": <the SPEC query object>, "after_id": N (-1 =
   * first page), "limit": N, "sync": bool, "deadline_ms": N}. With sync, the
   * shard first catches up to its partitions' current high watermarks
   * (bounded by the deadline): the query API sets it for min_version once
   * replication has acknowledged that version, which makes every earlier
   * edit visible. Response JSON: {"hits": [{"key": K, "version": N, "id":
   * N}], "total": N, "aggs": <partial aggregation state>, "max_version": N}. */
  string search(1: string request_json) throws (1: IxiaError err),

  /* JSON: partitions with positions and lag, partition count, max applied
   * version, document and event counters, failed-update count. */
  string status() throws (1: IxiaError err),

  /* Applies events directly, with the same version rule as Kafka events
   * (backfill after adding an index, replay of failed updates). Events for
   * keys of partitions this shard does not own are ignored. Returns how
   * many events were applied. Failing events go to the shard's failed-updates
   * log and are not counted. */
  i32 reindex(1: list<ChangeEvent> events) throws (1: IxiaError err),

  /* Documents of a table with key > after_key, in key order (deleted ones
   * as tombstones), at most `limit`. */
  list<IndexedDoc> docs(1: string ns, 2: string table, 3: binary after_key, 4: i32 limit)
      throws (1: IxiaError err)
}
