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
  UNAUTHENTICATED = 10,    /* no API key on this connection, or an unknown, revoked or
                              expired one: call authenticate first (docs/HTTP.md, "API keys") */
  PERMISSION_DENIED = 11,  /* the key does not grant this action on this namespace */
  DEADLINE_EXCEEDED = 12,  /* a query ran past its deadline (query.deadline_ms, timeout_ms) */
  NOT_CAUGHT_UP = 13,      /* min_version was not reached within the wait (query.max_wait_ms) */
  SHARD_UNAVAILABLE = 14   /* an index shard could not answer (down, or repairing itself
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
  4: string json,            /* empty when not found */
  5: optional i64 expire_at  /* scan only: epoch seconds of the document's TTL; unset: none */
}

/* One WAL write batch exactly as RocksDB stores it (WriteBatch data). */
struct WalBatch {
  1: i64 sequence,   /* sequence number (= version) of the batch's first edit */
  2: binary data
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

/* One key of a table and the version of its document (repair, anti-entropy). */
struct KeyVersion {
  1: string key,
  2: i64 version
}

/* The (key, version) set of one key range, hashed: count, and the sum
 * (mod 2^64) of XXH3-64 over each key's bytes followed by its version as 8
 * big-endian bytes. A range is (the previous range's last_key, last_key];
 * the first one starts after the call's after_key; last_key "" reaches the
 * end of the table. Two sides that hold the same pairs in a range compute
 * the same digest, whatever the order they read them in. */
struct RangeDigest {
  1: string last_key,
  2: i64 count,
  3: i64 hash
}

/* An answer read from one view of the truth store: store_version is the
 * store's latest version just before that view was taken, so every edit of
 * a listed key up to it is reflected, and a key absent from the view was
 * absent at that version. */
struct KeyVersionPage {
  1: i64 store_version,
  2: list<KeyVersion> keys
}

struct DigestPage {
  1: i64 store_version,
  2: list<RangeDigest> ranges
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
  list<WalBatch> walSince(1: i64 after, 2: i32 max_bytes) throws (1: IxiaError err),

  /* API keys (docs/HTTP.md, "API keys"). With auth on (auth.enabled), a
   * connection calls authenticate once, first; every later call on it acts
   * with that key's namespaces x actions. A connection that has not
   * authenticated gets UNAUTHENTICATED; a call outside the key's scope gets
   * PERMISSION_DENIED. Every ixia server port (the index shards' and the
   * sinks' too, which take only the service key) answers this call the same
   * way, so clients send it right after connecting. */
  void authenticate(1: string key) throws (1: IxiaError err),

  /* Admin on every namespace. spec_json: {"namespaces": ["shop"] or ["*"],
   * "actions": ["read", "write", "query", "schema", "admin"],
   * "expires_at": epoch seconds (0 = never), "description": "..."}. Returns
   * JSON {"id", "key", ...}: the only time the secret is shown; the server
   * keeps a SHA-256 hash. */
  string createKey(1: string spec_json) throws (1: IxiaError err),
  /* JSON {"keys": [{"id", "namespaces", "actions", "expires_at", "created_at",
   * "description", "expired"}]}: never the secrets. */
  string listKeys() throws (1: IxiaError err),
  void revokeKey(1: string id) throws (1: IxiaError err),

  /* Self-healing shards and anti-entropy (indexer/heal.c, recovery verify).
   * Partition filter: with partition_count > 0 and a non-empty partitions
   * list, only keys whose Kafka partition (CRC-32 of the truth-store key
   * modulo partition_count, as the replication sink publishes them) is
   * listed; otherwise every key. Unexpired documents only. */

  /* Keys and versions (no documents) of a table in (after_key, end_key]
   * (end_key "" = to the end), in key byte order, at most limit
   * (1..limits.max_get_keys). */
  KeyVersionPage keyVersions(1: string ns, 2: string table, 3: string after_key,
                             4: string end_key, 5: i32 limit, 6: i32 partition_count,
                             7: list<i32> partitions) throws (1: IxiaError err),

  /* Digests of (after_key, end_key]: consecutive ranges of bucket_keys keys,
   * over at most max_keys keys (1..10,000,000). When the walk reaches the
   * end of the interval, the last range is stretched to end_key (an empty
   * one if needed), so the ranges always tile (after_key, last last_key]. */
  DigestPage digest(1: string ns, 2: string table, 3: string after_key, 4: string end_key,
                    5: i32 max_keys, 6: i32 bucket_keys, 7: i32 partition_count,
                    8: list<i32> partitions) throws (1: IxiaError err),

  /* The current state of keys of a table as change events, for reindexing:
   * PUT with the document, its version and expiry; a missing (or expired)
   * key is a DELETE at the store's latest version just before it was read.
   * At most limits.max_get_keys keys. */
  list<ChangeEvent> currentEvents(1: string ns, 2: string table, 3: list<string> keys)
      throws (1: IxiaError err),

  /* Every table schema as a SCHEMA change event (with the version it was
   * applied at). */
  list<ChangeEvent> schemaEvents() throws (1: IxiaError err)
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

  /* The same search, answered as a packed page (common/hitpage.h): the
   * hits in binary, then the other members of search's response as one
   * JSON object. The query API calls this one: reading 100 hits from JSON
   * text cost more than the rest of its merge. */
  binary search_page(1: string request_json) throws (1: IxiaError err),

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
      throws (1: IxiaError err),

  /* Digests (RangeDigest) of the shard's live, unexpired documents of a
   * table over consecutive ranges: (after_key, bounds[0]], (bounds[0],
   * bounds[1]], ...; a last bound "" reaches the end of the table. At most
   * 10,000 bounds. */
  list<RangeDigest> digest(1: string ns, 2: string table, 3: string after_key,
                           4: list<string> bounds) throws (1: IxiaError err)
}
