/* The configuration table (config.h) and its values.
 *
 * The table below is the single list of every option of every daemon and
 * tool: name, type, default, bounds and the text docs/CONFIG.md is
 * generated from. A config is an array of parsed values indexed like the
 * table, so reading an option is a name lookup and no parsing. Loading the
 * config also applies the process-wide settings (log level and format, wire
 * limits, client timeouts) before any thread starts. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "log.h"
#include "testhook.h"
#include "wire.h"

#define MIB (1024 * 1024)

static const ixia_option_t options[] = {
    /* log */
    {"log.level", IXIA_OPT_STRING, "info", 0, 0, "Log level: error, warn, info or debug."},
    {"log.format", IXIA_OPT_STRING, "text", 0, 0,
     "text: one line per event (time, level, message); json: one JSON object per line "
     "({\"time\", \"level\", \"daemon\", \"pid\", \"msg\"}) for log shippers."},

    /* api */
    {"api.host", IXIA_OPT_STRING, "127.0.0.1", 0, 0,
     "Address ixia-query-api listens on, and the address clients use when no --api is given."},
    {"api.port", IXIA_OPT_INT, "9090", 0, 65535,
     "TCP port of ixia-query-api. 0 picks a free port (see api.port_file)."},
    {"api.port_file", IXIA_OPT_STRING, "", 0, 0,
     "If set, ixia-query-api writes the port it listens on to this file once it serves."},

    /* client: every outgoing Thrift connection (common/client.h) */
    {"client.connect_timeout_ms", IXIA_OPT_INT, "5000", 100, 600000,
     "How long a client waits for a TCP connection to an ixia daemon before giving up: the CLI, "
     "the recovery tools, the API calling index shards, the replication source, a shard repairing "
     "itself from the API."},
    {"client.auth_timeout_ms", IXIA_OPT_INT, "10000", 100, 600000,
     "How long a client waits for the answer to its API key (sent first on every connection "
     "when auth.key is set)."},
    {"client.status_timeout_ms", IXIA_OPT_INT, "2000", 100, 600000,
     "Longest wait for an index shard's status: `ixia shards`, the status console and /readyz "
     "(an unanswered shard is reported unreachable)."},
    {"client.shard_timeout_ms", IXIA_OPT_INT, "120000", 1000, 86400000,
     "Longest wait of the recovery tools (backfill, replay-failed, verify) for one answer of an "
     "index shard: a reindex page, a digest or a listing."},

    /* http: the HTTP port of every daemon (common/http.h) */
    {"http.host", IXIA_OPT_STRING, "127.0.0.1", 0, 0,
     "Address the HTTP ports of every daemon listen on (ixia-query-api's HTTP/JSON interface and "
     "status console; /metrics, /healthz and /readyz everywhere)."},
    {"http.port", IXIA_OPT_INT, "8080", -1, 65535,
     "HTTP port of ixia-query-api (HTTP/JSON interface, status console, /metrics, /healthz, "
     "/readyz). 0 picks a free port; -1 = no HTTP port."},
    {"http.port_file", IXIA_OPT_STRING, "", 0, 0,
     "If set, ixia-query-api writes its HTTP port to this file once it serves."},
    {"http.threads", IXIA_OPT_INT, "2", 1, 64,
     "Event loops (threads) that own a daemon's HTTP connections; cheap calls (cached gets, "
     "stats, metrics) are answered on them."},
    {"http.workers", IXIA_OPT_INT, "32", 1, 4096,
     "Threads that run HTTP requests which may block (writes, queries, reads from disk or "
     "memcached)."},
    {"http.max_queued", IXIA_OPT_INT, "10000", 1, 10000000,
     "HTTP requests waiting for a worker beyond which new ones get 429 (RESOURCE_EXHAUSTED)."},
    {"http.max_connections", IXIA_OPT_INT, "20000", 1, 1000000,
     "Most open HTTP connections of a daemon; beyond it a new connection gets 503 and is closed."},
    {"http.max_header_bytes", IXIA_OPT_INT, "16384", 4096, 16777216,
     "Memory for one HTTP connection's request line and headers; a request with more is refused "
     "(431) and its connection closed. It is libmicrohttpd's whole memory for a connection (also "
     "its read buffer: request bodies arrive in pieces of at most this size, and the answer's "
     "headers), zeroed for every request, so it costs CPU on each one (measured: 8-9% of a "
     "cached get's CPU at 65536, 3-4% at 16384)."},
    {"http.max_body_bytes", IXIA_OPT_INT, "4194304", 1024, 1024LL * MIB,
     "Largest HTTP request body (except _bulk): a larger one gets 413 TOO_LARGE."},
    {"http.max_bulk_bytes", IXIA_OPT_INT, "67108864", 1024, 4096LL * MIB,
     "Largest body of a POST .../_bulk (NDJSON) request."},
    {"http.request_timeout_ms", IXIA_OPT_INT, "30000", 100, 86400000,
     "A new HTTP connection must send its first bytes within this long; until then it holds no "
     "event loop (silent connections, slowloris)."},
    {"http.idle_timeout_ms", IXIA_OPT_INT, "300000", 1000, 86400000,
     "An HTTP connection with no bytes moving for this long is closed: between keep-alive "
     "requests and in the middle of one (libmicrohttpd has one inactivity timeout; whole "
     "seconds)."},
    {"http.tls_cert_file", IXIA_OPT_STRING, "", 0, 0,
     "PEM certificate (chain) of the HTTP ports. With http.tls_key_file set too, every daemon's "
     "HTTP port speaks only HTTPS."},
    {"http.tls_key_file", IXIA_OPT_STRING, "", 0, 0, "PEM private key of http.tls_cert_file."},

    /* auth: API keys (common/auth.h) */
    {"auth.enabled", IXIA_OPT_BOOL, "true", 0, 0,
     "Require API keys: on the API (Thrift authenticate, HTTP Authorization: Bearer), and the "
     "service key on index shards and sinks. ixia-local turns it off unless told otherwise."},
    {"auth.keys_file", IXIA_OPT_STRING, "data/keys.json", 0, 0,
     "ixia-query-api's key store: ids, scopes, expiry and SHA-256 hashes of the API keys (never "
     "the keys), managed with `ixia keys`."},
    {"auth.service_key_file", IXIA_OPT_STRING, "data/service.key", 0, 0,
     "File holding the service key the daemons use among themselves (and the recovery tools): "
     "it grants everything. ixia-query-api creates it (mode 0600) when missing; index shards "
     "and sinks need it to start when auth.enabled."},

    /* server: the Thrift server shared by every daemon */
    {"server.io_threads", IXIA_OPT_INT, "0", 0, 64,
     "Threads that own the server's connections (epoll): they accept, read whole frames, "
     "answer cheap calls themselves and write answers; an idle connection costs no thread. "
     "0 = half the cores, at least 1, on the sink, where the cheap calls are short and the "
     "cores are better left to the workers; one per core on ixia-query-api, whose I/O threads "
     "finish queries (the merge and the re-read of every hit from the store; measured on 2 "
     "cores, 16 connections, one thread against two: a page of 100 under category = X AND a "
     "price range 7,309-7,881 against 8,798-8,965 queries/s, cached gets 109,446-116,990 "
     "against 103,772-106,919/s, p99 0.33 against 0.43 ms), and on an index shard, which runs "
     "small searches on them."},
    {"server.sched_batch", IXIA_OPT_BOOL, "true", 0, 0,
     "Run the daemon's threads (ixia-query-api, ixia-indexer, ixia-replication-sink) under "
     "Linux's SCHED_BATCH policy: a thread woken by a message (a request, a shard's answer) "
     "does not preempt the running thread (the one that sent it, which finishes its turn "
     "first, instead of being switched out in the middle of its send). Fewer context switches "
     "per request: on 2 cores, 16 connections, a page of 10 under category = X AND a price "
     "range served 17,516-18,115 queries/s against 14,177-14,767 (put throughput and "
     "put-to-searchable latency did not move). Priorities and fair shares are unchanged; a "
     "woken thread may wait up to a time slice behind whatever else runs on its core, so on a "
     "host shared with latency-sensitive work you may prefer false: the daemon keeps the "
     "policy it was started with."},
    {"server.workers", IXIA_OPT_INT, "128", 1, 4096,
     "Threads that run requests. A request waits in a queue when all are busy; idle connections "
     "hold none."},
    {"server.max_connections", IXIA_OPT_INT, "20000", 1, 1000000,
     "Most open connections. Beyond it a new connection is answered with an error naming this "
     "option and closed. Also bounded by the process's open-file limit, which the server raises "
     "to its hard maximum at start."},
    {"server.max_frame_bytes", IXIA_OPT_INT, "67108864", 1024, 1024LL * MIB,
     "Largest Thrift frame, in both directions: a server closes a connection whose frame header "
     "announces more; a client (CLI, tools, the API calling shards and sinks) refuses a larger "
     "answer with an error naming this option. Set it the same on every process."},
    {"server.max_depth", IXIA_OPT_INT, "32", 4, 10000,
     "Deepest nesting of structs, lists, sets and maps in one Thrift message (requests, answers, "
     "change events). Deeper messages are refused before they are decoded further."},
    {"server.max_items", IXIA_OPT_INT, "250000", 1000, 1000000000,
     "Most list, set and map elements in one Thrift message, all containers together."},
    {"server.request_timeout_ms", IXIA_OPT_INT, "30000", 100, 86400000,
     "A frame must arrive whole within this long of its first byte, and an answer must be taken "
     "by the client within this long; otherwise the connection is closed (slow clients)."},
    {"server.idle_timeout_ms", IXIA_OPT_INT, "300000", 100, 86400000,
     "A connection with no request for this long is closed. Clients reconnect."},

    /* limits on input */
    {"limits.max_doc_bytes", IXIA_OPT_INT, "1048576", 2, 256LL * MIB,
     "Largest document, in bytes of JSON."},
    {"limits.max_json_depth", IXIA_OPT_INT, "32", 1, 1000,
     "Deepest nesting of objects and arrays accepted in a document."},
    {"limits.max_key_bytes", IXIA_OPT_INT, "512", 1, 4096, "Longest document key, in bytes."},
    {"limits.max_batch_ops", IXIA_OPT_INT, "1000", 1, 1000000,
     "Most operations in one batch call."},
    {"limits.max_get_keys", IXIA_OPT_INT, "1000", 1, 1000000, "Most keys in one multiGet call."},

    /* store */
    {"store.path", IXIA_OPT_STRING, "data/store", 0, 0, "Directory of the RocksDB truth store."},
    {"store.sync", IXIA_OPT_BOOL, "true", 0, 0,
     "Sync the WAL before acknowledging a write. Turning it off loses acknowledged writes on a crash."},
    {"store.max_group_ops", IXIA_OPT_INT, "2048", 1, 1000000,
     "Most operations the writer commits in one synced group (group commit)."},
    {"store.max_group_bytes", IXIA_OPT_INT, "8388608", 65536, 1024LL * MIB,
     "Most document bytes the writer commits in one group. A group is one WAL record, shipped to a "
     "sink in one call, so keep it well below the sink's server.max_frame_bytes."},
    {"store.wal_ttl_seconds", IXIA_OPT_INT, "86400", 0, 31536000,
     "Keep WAL files at least this long, so replication can catch up after an outage."},
    {"store.wal_size_limit_mb", IXIA_OPT_INT, "4096", 0, 1048576,
     "Keep at most this much archived WAL. 0 = no size limit (the TTL alone applies)."},
    {"store.block_cache_mb", IXIA_OPT_INT, "0", 0, 1048576,
     "RocksDB block cache of the documents (uncompressed blocks). A get that the memtables and "
     "the row cache miss is answered on the I/O thread when its block is here, and otherwise "
     "waits for a worker thread and a block read; size it to the documents that are read. "
     "0 = an eighth of the memory (physical, or the cgroup's limit when lower), at least 256."},
    {"store.doc_cache_mb", IXIA_OPT_INT, "0", 0, 1048576,
     "Document cache of ixia-query-api: stored documents by key, for gets and the hits of "
     "queries, kept consistent by the store's writer (a write drops its keys before it reaches "
     "RocksDB and, with store.doc_cache_writes, caches what it wrote once RocksDB holds it). A hit is one hash lookup, where RocksDB's read path cost about 2 us a document "
     "with everything in memory. Size it to the documents that are read. 0 = an eighth of the "
     "memory (physical, or the cgroup's limit when lower), at least 256."},
    {"store.doc_cache_writes", IXIA_OPT_BOOL, "true", 0, 0,
     "The store's writer puts each document it writes into the document cache (write-through), "
     "so reads of recent writes, and of a whole load that fits store.doc_cache_mb, never miss "
     "first. Off: only reads fill the cache (for write-mostly data that is seldom read back, "
     "such as short-lived documents with a TTL)."},
    {"store.row_cache_mb", IXIA_OPT_INT, "0", 0, 1048576,
     "RocksDB row cache: whole documents by key (a hit skips the index and data block search, "
     "not RocksDB's read path). 0 = off: store.doc_cache_mb holds the same documents."},
    {"store.write_buffer_mb", IXIA_OPT_INT, "64", 1, 65536, "RocksDB memtable size."},
    {"store.compaction_low_priority", IXIA_OPT_BOOL, "true", 0, 0,
     "Run the truth store's compactions at the lowest CPU priority (nice 19, process-wide): "
     "on a machine whose cores are all busy they take what the writes and reads leave, and "
     "flushes keep the normal priority. Compactions only fall behind when the cores stay "
     "saturated; RocksDB then slows writes down as it always does."},
    {"store.disk_reserve_mb", IXIA_OPT_INT, "256", 0, 1048576,
     "Free space kept on the file system of store.path (flood-stage watermark). Below it, "
     "ixia-query-api refuses every write, schema apply and snapshot with RESOURCE_EXHAUSTED before "
     "it reaches RocksDB (which aborts the process once a write of its fails for lack of space), "
     "keeps serving reads, "
     "and resumes writing by itself once space is freed. Keep it above what RocksDB writes on its "
     "own: memtable flushes (up to 2 x store.write_buffer_mb), the WAL file it preallocates "
     "(1.1 x store.write_buffer_mb) and one write group (store.max_group_bytes). 0 = off."},

    /* cache */
    {"cache.servers", IXIA_OPT_STRING, "127.0.0.1:11211", 0, 0,
     "Comma-separated memcached servers (host:port), consistently hashed. Empty disables the cache."},
    {"cache.get_path", IXIA_OPT_STRING, "auto", 0, 0,
     "How a get that the store's memory (memtables, block and row caches) cannot answer is "
     "served: 'memcached' (look-aside: memcached, then the store's disk under a lease and a "
     "backfill), 'store' (the store's disk directly), or 'auto': whichever costs less, as "
     "measured on this API's recent gets (get_memcached_us and get_disk_read_us in stats; "
     "every 64th get takes the other path to keep both measured)."},
    {"cache.timeout_ms", IXIA_OPT_INT, "50", 1, 60000,
     "Connect, send and receive timeout for memcached. Keep it short: a hung memcached only slows gets."},
    {"cache.retry_timeout_s", IXIA_OPT_INT, "2", 1, 3600,
     "After a memcached server fails, skip it for this many seconds."},
    {"cache.default_ttl_seconds", IXIA_OPT_INT, "300", 1, 2592000,
     "Cache TTL for tables whose schema sets no cache_ttl_seconds."},
    {"cache.lease_ttl_seconds", IXIA_OPT_INT, "5", 1, 3600,
     "Lifetime of the placeholder a cache miss takes before its backfill."},
    {"cache.pool_size", IXIA_OPT_INT, "192", 1, 4096,
     "memcached connections shared by all threads; keep it above server.workers plus cache.backfill_threads."},
    {"cache.backfill_threads", IXIA_OPT_INT, "2", 1, 256, "Threads that backfill the cache after misses."},
    {"cache.backfill_queue_max", IXIA_OPT_INT, "10000", 1, 10000000,
     "Pending backfills beyond this are dropped (the next get misses again)."},
    {"cache.invalidation_retry_max", IXIA_OPT_INT, "100000", 0, 100000000,
     "Deletes that failed (memcached down or timing out) kept for retry, at least every "
     "100 ms, until memcached confirms them; beyond this many the oldest are given up "
     "(counted: cache_invalidation_retries_dropped) and the cache TTL bounds their "
     "staleness."},

    /* replication source (inside ixia-query-api) */
    {"replication.sinks", IXIA_OPT_STRING, "", 0, 0,
     "Comma-separated ixia-replication-sink addresses (host:port). Empty turns replication off."},
    {"replication.max_batch_bytes", IXIA_OPT_INT, "4194304", 1024, 1024LL * MIB,
     "Most WAL bytes shipped to a sink in one call; the write batch that crosses the limit is still included whole."},
    {"replication.retry_min_ms", IXIA_OPT_INT, "50", 1, 60000,
     "First back-off after a failed shipment; doubles on each failure."},
    {"replication.retry_max_ms", IXIA_OPT_INT, "5000", 1, 600000, "Longest back-off between shipments."},
    {"replication.call_timeout_ms", IXIA_OPT_INT, "60000", 100, 3600000,
     "How long the source waits for a sink to answer one shipment."},

    /* replication sink */
    {"sink.host", IXIA_OPT_STRING, "127.0.0.1", 0, 0, "Address ixia-replication-sink listens on."},
    {"sink.port", IXIA_OPT_INT, "9091", 0, 65535, "Port of ixia-replication-sink. 0 picks a free port."},
    {"sink.port_file", IXIA_OPT_STRING, "", 0, 0,
     "If set, the sink writes the port it listens on to this file once it serves."},
    {"sink.http_port", IXIA_OPT_INT, "8081", -1, 65535,
     "HTTP port of ixia-replication-sink (/metrics, /healthz, /readyz). 0 picks a free port; "
     "-1 = none."},
    {"sink.http_port_file", IXIA_OPT_STRING, "", 0, 0,
     "If set, the sink writes its HTTP port to this file once it serves."},
    {"sink.delivery_timeout_ms", IXIA_OPT_INT, "30000", 100, 3600000,
     "A replicate call fails if Kafka has not acknowledged every event by then (the source re-sends)."},

    /* kafka (producer in the sink, consumers in the indexer and tools) */
    {"kafka.brokers", IXIA_OPT_STRING, "127.0.0.1:9092", 0, 0,
     "Kafka bootstrap servers (host:port,...). ixia-local points this at ixia-devkafka."},
    {"kafka.topic", IXIA_OPT_STRING, "ixia.changes", 0, 0, "Topic of the change events."},
    {"kafka.linger_ms", IXIA_OPT_INT, "2", 0, 10000,
     "Producer linger: how long the sink lets events gather into one Kafka request. A "
     "replication call waits for its events' acknowledgements, and events gather while the "
     "previous call is out, so the linger adds to every call; fewer, fuller requests cost the "
     "sink and the brokers less CPU an event. On a 2-core machine at 1,800 puts/s: 5 gave "
     "put-to-Kafka p50 13-14 / p99 23-24 ms at 80 us of sink CPU a put, 2 gave p50 8-9 / p99 "
     "15-19 ms at 100 us, 1 gave p50 6-7 / p99 16-20 ms at 112 us."},
    {"kafka.message_timeout_ms", IXIA_OPT_INT, "20000", 100, 3600000,
     "librdkafka message.timeout.ms: a delivery not acknowledged by then fails."},
    {"kafka.metadata_timeout_ms", IXIA_OPT_INT, "30000", 100, 3600000,
     "How long ixia-indexer (at start) and `ixia-recovery rebuild-index` wait for the topic's "
     "metadata (its partition count) before giving up."},

    /* ixia-indexer: one index shard */
    {"index.path", IXIA_OPT_STRING, "data/index", 0, 0, "Directory of the shard's index RocksDB."},
    {"index.sync", IXIA_OPT_BOOL, "false", 0, 0,
     "Sync the index WAL on every applied batch. Off by default: the index is rebuilt from Kafka "
     "positions stored with it, and an unsynced tail is re-read after a crash."},
    {"index.block_cache_mb", IXIA_OPT_INT, "256", 8, 1048576, "Index RocksDB block cache size."},
    {"index.row_cache_mb", IXIA_OPT_INT, "64", 0, 1048576,
     "Index RocksDB row cache: the id records a search reads to name its hits. 0 = off."},
    {"index.write_buffer_mb", IXIA_OPT_INT, "64", 1, 65536, "Index RocksDB memtable size."},
    {"index.compaction_low_priority", IXIA_OPT_BOOL, "true", 0, 0,
     "Run the index's compactions at the lowest CPU priority (nice 19, process-wide), so the "
     "thread that applies change events and the searches go first; flushes keep the normal "
     "priority. See store.compaction_low_priority."},
    {"index.disk_reserve_mb", IXIA_OPT_INT, "256", 0, 1048576,
     "Free space kept on the file systems of index.path and of the failed-updates log. Below it, "
     "ixia-indexer pauses: it applies and consumes nothing (its positions stay), keeps serving "
     "searches, refuses reindex calls with RESOURCE_EXHAUSTED, re-checks every second and resumes "
     "by itself once space is freed. Keep it above what RocksDB writes on its own (memtable "
     "flushes of up to 2 x index.write_buffer_mb, compactions) plus one batch. 0 = off."},
    {"index.cache_mb", IXIA_OPT_INT, "512", 1, 1048576,
     "Memory for decoded postings, column blocks and id records (which name a page's hits; "
     "about 40 bytes per document) that searches read (roughly least recently used first out), "
     "on top of index.block_cache_mb. The points of numeric fields (about 16 bytes per value) are "
     "held besides, and so is a directory of the cached id-record blocks (32 KiB per 4,194,304 "
     "document ids, kept while the index is open)."},
    {"index.docvalues_mb", IXIA_OPT_INT, "1024", 0, 1048576,
     "Memory for doc values: the value of every document of each keyword, bool and numeric field "
     "in one slot per document (8 bytes for numbers, 4 for the others, whether the document has "
     "the field or not, in chunks of 65,536 documents), loaded at open. Filters check candidates "
     "against them with one memory read each; beyond the budget, candidates are checked against "
     "the column blocks of index.cache_mb (slower for scattered candidates). 0 = off."},
    {"index.sort_history_seconds", IXIA_OPT_INT, "600", 1, 86400,
     "How long a shard remembers the sort values documents had before they changed, so that "
     "paging a sorted query with \"after\" neither repeats nor skips a document whose sorted "
     "field changed meanwhile. A cursor older than this (or older than what "
     "index.sort_history_mb holds, or from before the shard restarted) is refused: start "
     "paging again."},
    {"index.sort_history_mb", IXIA_OPT_INT, "64", 1, 1048576,
     "Memory for those remembered values (about 100 bytes per changed document plus 12 per "
     "indexed value); the oldest go first."},
    {"indexer.search_threads", IXIA_OPT_INT, "0", 0, 4096,
     "Threads that run Search calls on ixia-indexer (it uses this instead of server.workers). "
     "0 = twice the cores, at least 4: searches only compute, and threads beyond the cores "
     "cost wake-ups (measured: 128 workers 3,010 queries/s, 4 workers 3,770 on 2 cores). Keep "
     "it above the number of concurrent min_version searches, which wait. A page of at most "
     "100 hits with no aggregation or exact total is answered on the I/O thread that read it "
     "(server.io_threads), without a hand-off to these threads; a sorted one only when its "
     "first key is a number whose nearest few thousand values settle the page (otherwise it "
     "moves here)."},
    {"index.max_values_per_field", IXIA_OPT_INT, "1000", 1, 1000000,
     "Most distinct values (or text tokens) one document may have in one indexed field; more "
     "sends the event to the failed-updates log."},
    {"indexer.host", IXIA_OPT_STRING, "127.0.0.1", 0, 0, "Address ixia-indexer's Search service listens on."},
    {"indexer.port", IXIA_OPT_INT, "9093", 0, 65535, "Port of the Search service. 0 picks a free port."},
    {"indexer.port_file", IXIA_OPT_STRING, "", 0, 0,
     "If set, the indexer writes its listening port to this file once it serves."},
    {"indexer.socket", IXIA_OPT_STRING, "", 0, 0,
     "Path of a Unix-domain socket the Search service also listens on, for an ixia-query-api on "
     "the same machine (query.indexers=unix:PATH): a query's call to the shard then skips the "
     "TCP/IP stack on both sides. Empty: TCP only. A socket file left by an indexer that died is "
     "replaced; one a live process serves, or a file of another kind, stops the start. The file's "
     "permissions follow the umask, and the service key is asked for as on TCP. ixia-local uses "
     "DIR/indexer.sock."},
    {"indexer.http_port", IXIA_OPT_INT, "8083", -1, 65535,
     "HTTP port of ixia-indexer (/metrics, /healthz, /readyz). 0 picks a free port; -1 = none."},
    {"indexer.http_port_file", IXIA_OPT_STRING, "", 0, 0,
     "If set, the indexer writes its HTTP port to this file once it serves."},
    {"indexer.consumer_group", IXIA_OPT_STRING, "ixia-indexer", 0, 0,
     "Kafka consumer group the shards commit their positions to after each applied batch, for "
     "monitoring only (kafka-consumer-groups, Burrow): positions stored in the index stay the "
     "truth. Empty = no commits."},
    {"indexer.partitions", IXIA_OPT_STRING, "", 0, 0,
     "Kafka partitions of kafka.topic this shard consumes, e.g. \"0,1\" or \"0-3\"; empty = all."},
    {"indexer.failed_log", IXIA_OPT_STRING, "", 0, 0,
     "Failed-updates log (JSON lines). Empty = <index.path>.failed-updates.jsonl (beside the "
     "index directory, outside it, so it survives an index wipe)."},
    {"indexer.batch_max_events", IXIA_OPT_INT, "2000", 1, 1000000,
     "Most events applied in one index write batch."},
    {"indexer.batch_wait_ms", IXIA_OPT_INT, "2", 0, 10000,
     "How long the consumer waits for more events before applying a partial batch; it adds up "
     "to this to put-to-searchable latency. Under load batches fill before the wait ends."},
    {"indexer.fetch_wait_ms", IXIA_OPT_INT, "4", 1, 10000,
     "librdkafka fetch.wait.max.ms: the longest a fetch waits on an idle partition. Brokers that "
     "answer a waiting fetch only at its timeout (the mock cluster) add up to this to "
     "put-to-searchable latency; a shorter wait costs empty fetches while idle. On a 2-core "
     "machine at 2,600 puts/s, 4 and 2 (against 10 and 5) took put-to-searchable from p50 "
     "18-19 / p99 29-32 ms to 12-13 / 18-20 ms (the mock cluster), for 1.5% of a core in the "
     "indexer and 2% in the mock spent on empty fetches while idle (2% and 3% when the mock "
     "keeps 2,000 record batches a partition, which each fetch walks)."},
    {"indexer.invalidate_cache", IXIA_OPT_BOOL, "true", 0, 0,
     "Delete each indexed key from memcached (cache.servers) once more after applying it."},
    {"indexer.retry_max_ms", IXIA_OPT_INT, "5000", 10, 600000,
     "Longest back-off after the index store fails to write a batch."},
    {"indexer.api", IXIA_OPT_STRING, "", 0, 0,
     "Address (host:port) of an ixia-query-api the shard repairs itself from and compares itself "
     "with (self-healing, anti-entropy). Empty: indexer.api_port_file, else neither runs."},
    {"indexer.api_port_file", IXIA_OPT_STRING, "", 0, 0,
     "When indexer.api is empty: a file holding the port of an ixia-query-api on 127.0.0.1 (its "
     "api.port_file), read whenever the shard connects; for local stacks whose API starts after "
     "the indexer."},
    {"indexer.self_heal", IXIA_OPT_BOOL, "true", 0, 0,
     "Repair the shard from the truth store, without an operator, when it finds edits it can "
     "never read from Kafka (deleted offsets, a re-created topic, positions past a partition's "
     "end, a missing schema). Off: those are only logged and counted, and the shard must be "
     "rebuilt from a snapshot."},
    {"indexer.anti_entropy_keys_per_s", IXIA_OPT_INT, "2000", 0, 100000000,
     "Continuous anti-entropy: at most this many keys a second of the shard's tables are compared "
     "with the truth store by range digests; divergent documents are counted and repaired. 0 = "
     "off."},
    {"indexer.anti_entropy_pause_s", IXIA_OPT_INT, "60", 1, 86400,
     "Pause between two anti-entropy passes (and before the first)."},

    /* Queries (ixia-query-api fans out; ixia-indexer evaluates) */
    {"query.indexers", IXIA_OPT_STRING, "", 0, 0,
     "Comma-separated addresses of every index shard's Search service: host:port, or "
     "unix:PATH for a shard on this machine that listens on PATH (its indexer.socket). Empty: "
     "queries answer UNAVAILABLE."},
    {"query.threads", IXIA_OPT_INT, "0", 0, 4096,
     "Threads that run the Thrift `query` calls of ixia-query-api that cannot be answered on "
     "the I/O thread that read them (other blocking calls use server.workers). A query without "
     "min_version or a top_hits aggregation is sent to its shards from the I/O thread, which "
     "serves its other connections meanwhile and finishes the query when the answers come (no "
     "thread hand-off; `requests_answered_later` in stats); the rest run here: queries with "
     "min_version or top_hits, over 16 KiB, or that find neither a lane (query.pipeline_shard_calls) nor an idle connection to a shard "
     "(they open one). (A query whose pooled connection is dead, a page whose documents "
     "are not all in memory, and aggregations whose shards answered over 256 KiB are finished "
     "on four threads of their own: the I/O thread never reads the disk nor merges long; "
     "query_pages_read_on_worker and query_merges_on_worker in stats.) 0 = twice the cores, "
     "at least 4: a query mostly waits a moment for its "
     "shards and then computes, and a small pool kept busy takes its next query without a "
     "wake-up (measured on 2 cores, 16 connections, pages of 10 hits: 128 threads 215 us of "
     "API CPU per query and p99 9-15 ms, 4 threads 175 us and p99 5 ms). Keep it above the "
     "number of concurrent queries that wait: for min_version (up to query.max_wait_ms) or "
     "for slow shards. Queries over HTTP run on http.workers."},
    {"query.pipeline_shard_calls", IXIA_OPT_BOOL, "true", 0, 0,
     "Each I/O thread of ixia-query-api keeps up to four connections (lanes) to each shard, on "
     "which the queries it sends are pipelined, each on the lane with the fewest calls at the "
     "shard: the requests of one pass over its connections leave in one send per lane, and "
     "answers that come together are read with one receive (query_shard_calls_pipelined and "
     "query_shard_sends_pipelined in stats). false: one call at a time on each pooled "
     "connection, a send and a receive per query on each side."},
    {"query.max_request_bytes", IXIA_OPT_INT, "1048576", 1024, 1024LL * MIB,
     "Largest query request, in bytes of JSON."},
    {"query.max_clauses", IXIA_OPT_INT, "128", 1, 100000,
     "Most filter and aggregation nodes in one query (an \"in\" list counts as one)."},
    {"query.max_in_values", IXIA_OPT_INT, "10000", 1, 1000000,
     "Most values in one \"in\" list. A list costs the API and each shard CPU in proportion to its "
     "length: on a 2-core machine, a shuffled list of 10,000 values took 4-5 ms of each (one that "
     "comes sorted 3-4 ms: it is only checked, not sorted)."},
    {"query.max_limit", IXIA_OPT_INT, "1000", 1, 1000000, "Largest \"limit\" (hits per page)."},
    {"query.max_postings", IXIA_OPT_INT, "200000000", 1000, 1000000000000LL,
     "Most postings (document ids read from posting lists) one shard may touch for one query."},
    {"query.max_memory_mb", IXIA_OPT_INT, "256", 1, 1048576,
     "Most memory one query's aggregation state may use on one shard or when merging."},
    {"query.max_terms_buckets", IXIA_OPT_INT, "100000", 1, 100000000,
     "Most buckets one terms aggregation may hold (each shard sends all of its buckets)."},
    {"query.max_exact_values", IXIA_OPT_INT, "1000000", 0, 1000000000,
     "Percentiles stay exact while the values they read number at most this; above, a log "
     "histogram with 1% relative error is used."},
    {"query.deadline_ms", IXIA_OPT_INT, "5000", 1, 3600000,
     "Default and largest query deadline (a request's \"timeout_ms\" may lower it)."},
    {"query.max_wait_ms", IXIA_OPT_INT, "10000", 0, 3600000,
     "Longest wait for min_version (every shard applying that version)."},
    {"query.track_total_hits", IXIA_OPT_INT, "10000", 0, 9007199254740992,
     "\"total\" is exact up to this many matches; beyond it a shard stops counting once its "
     "page is full (\"total_relation\": \"gte\", a lower bound). A request's "
     "\"track_total_hits\" (true = exact, or a number) overrides it. Aggregations always read "
     "every match."},

    /* ixia-devkafka: the embedded, in-memory broker for local runs and tests */
    {"devkafka.brokers", IXIA_OPT_INT, "3", 1, 16, "Brokers in the mock cluster."},
    {"devkafka.partitions", IXIA_OPT_INT, "4", 1, 1024, "Partitions of kafka.topic."},
    {"devkafka.memory_mb", IXIA_OPT_INT, "1024", 1, 1048576,
     "Memory budget of ixia-devkafka's backlog: record batches kept per partition are bounded by "
     "this divided by devkafka.partitions; beyond it the oldest are deleted (a consumer further "
     "behind loses them, and an index shard repairs itself). Memory is used only as events "
     "arrive."},
    {"devkafka.max_batches", IXIA_OPT_INT, "20000", 16, 10000000,
     "Record batches ixia-devkafka keeps over all partitions (split evenly), besides "
     "devkafka.memory_mb; beyond it the oldest are deleted. The mock finds a fetch's position by "
     "walking every batch of the partition, so this bounds the cost of each fetch: at 300,000 "
     "batches kept, put-to-Kafka p99 rose from 13 to 230 ms. A busy producer packs many events "
     "into a batch, so a bulk load keeps far more events than this; sparse writes keep about one "
     "event per batch."},
    {"devkafka.bootstrap_file", IXIA_OPT_STRING, "", 0, 0,
     "If set, ixia-devkafka writes its bootstrap address list to this file once it serves."},
    {"devkafka.control_port_file", IXIA_OPT_STRING, "", 0, 0,
     "If set, ixia-devkafka serves its fault-injection control protocol on a loopback port written here."},

    {NULL, 0, NULL, 0, 0, NULL},
};

typedef union {
  gint64 i;
  gboolean b;
  double d;
  char *s;
} value_t;

struct ixia_config {
  GHashTable *index; /* name -> index+1 */
  value_t *values;
  guint n;
};

const ixia_option_t *ixia_config_options(void) { return options; }

static int find_option(const ixia_config_t *cfg, const char *name) {
  gpointer v = g_hash_table_lookup(cfg->index, name);
  return v ? GPOINTER_TO_INT(v) - 1 : -1;
}

static gboolean parse_value(const ixia_option_t *o, const char *text, value_t *out,
                            ixia_error_t **err) {
  char *end = NULL;
  switch (o->type) {
    case IXIA_OPT_INT: {
      errno = 0;
      gint64 v = g_ascii_strtoll(text, &end, 10);
      if (errno || end == text || *end)
        return ixia_error_set(err, IXIA_EINVAL, "config %s: '%s' is not an integer", o->name, text);
      if (v < o->min || v > o->max)
        return ixia_error_set(err, IXIA_EINVAL,
                              "config %s: %" G_GINT64_FORMAT " is outside [%" G_GINT64_FORMAT
                              ", %" G_GINT64_FORMAT "]",
                              o->name, v, o->min, o->max);
      out->i = v;
      return TRUE;
    }
    case IXIA_OPT_BOOL:
      if (!g_ascii_strcasecmp(text, "true") || !strcmp(text, "1") || !g_ascii_strcasecmp(text, "yes"))
        out->b = TRUE;
      else if (!g_ascii_strcasecmp(text, "false") || !strcmp(text, "0") ||
               !g_ascii_strcasecmp(text, "no"))
        out->b = FALSE;
      else
        return ixia_error_set(err, IXIA_EINVAL, "config %s: '%s' is not a boolean (true/false)",
                              o->name, text);
      return TRUE;
    case IXIA_OPT_DOUBLE:
      errno = 0;
      out->d = g_ascii_strtod(text, &end);
      if (errno || end == text || *end)
        return ixia_error_set(err, IXIA_EINVAL, "config %s: '%s' is not a number", o->name, text);
      return TRUE;
    case IXIA_OPT_STRING:
      out->s = g_strdup(text);
      return TRUE;
  }
  return FALSE;
}

ixia_config_t *ixia_config_new(void) {
  ixia_config_t *cfg = g_new0(ixia_config_t, 1);
  cfg->index = g_hash_table_new(g_str_hash, g_str_equal);
  for (cfg->n = 0; options[cfg->n].name; cfg->n++)
    g_hash_table_insert(cfg->index, (gpointer)options[cfg->n].name, GINT_TO_POINTER(cfg->n + 1));
  cfg->values = g_new0(value_t, cfg->n);
  for (guint i = 0; i < cfg->n; i++) {
    ixia_error_t *e = NULL;
    if (!parse_value(&options[i], options[i].def, &cfg->values[i], &e))
      g_error("bad built-in default: %s", e->message);
  }
  return cfg;
}

void ixia_config_destroy(ixia_config_t *cfg) {
  if (!cfg) return;
  for (guint i = 0; i < cfg->n; i++)
    if (options[i].type == IXIA_OPT_STRING) g_free(cfg->values[i].s);
  g_free(cfg->values);
  g_hash_table_destroy(cfg->index);
  g_free(cfg);
}

gboolean ixia_config_set(ixia_config_t *cfg, const char *name, const char *value,
                         ixia_error_t **err) {
  int i = find_option(cfg, name);
  if (i < 0) return ixia_error_set(err, IXIA_EINVAL, "unknown config option '%s'", name);
  value_t v;
  if (!parse_value(&options[i], value, &v, err)) return FALSE;
  if (options[i].type == IXIA_OPT_STRING) g_free(cfg->values[i].s);
  cfg->values[i] = v;
  return TRUE;
}

gboolean ixia_config_set_assignment(ixia_config_t *cfg, const char *assignment,
                                    ixia_error_t **err) {
  const char *eq = strchr(assignment, '=');
  if (!eq || eq == assignment)
    return ixia_error_set(err, IXIA_EINVAL, "--set expects section.key=value, got '%s'", assignment);
  char *name = g_strndup(assignment, (gsize)(eq - assignment));
  gboolean ok = ixia_config_set(cfg, name, eq + 1, err);
  g_free(name);
  return ok;
}

gboolean ixia_config_load_file(ixia_config_t *cfg, const char *path, ixia_error_t **err) {
  GKeyFile *kf = g_key_file_new();
  GError *gerr = NULL;
  gboolean ok = TRUE;
  if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &gerr)) {
    ok = ixia_error_from_gerror(err, gerr, IXIA_EINVAL, path);
    goto out;
  }
  gchar **groups = g_key_file_get_groups(kf, NULL);
  for (gchar **g = groups; ok && *g; g++) {
    gchar **keys = g_key_file_get_keys(kf, *g, NULL, NULL);
    for (gchar **k = keys; ok && k && *k; k++) {
      char *name = g_strdup_printf("%s.%s", *g, *k);
      char *value = g_key_file_get_string(kf, *g, *k, NULL);
      ok = ixia_config_set(cfg, name, value ? value : "", err);
      if (!ok && err && *err) ixia_error_prefix(*err, "%s", path);
      g_free(name);
      g_free(value);
    }
    g_strfreev(keys);
  }
  g_strfreev(groups);
out:
  g_key_file_free(kf);
  return ok;
}

static const value_t *get(const ixia_config_t *cfg, const char *name, ixia_opt_type_t type) {
  int i = find_option(cfg, name);
  if (i < 0 || options[i].type != type) g_error("config: no option %s of that type", name);
  return &cfg->values[i];
}

gint64 ixia_config_int(const ixia_config_t *cfg, const char *name) {
  return get(cfg, name, IXIA_OPT_INT)->i;
}
int ixia_config_threads(const ixia_config_t *cfg, const char *name) {
  gint64 n = ixia_config_int(cfg, name);
  return (int)(n > 0 ? n : MAX(4, 2 * (gint64)g_get_num_processors()));
}
gboolean ixia_config_bool(const ixia_config_t *cfg, const char *name) {
  return get(cfg, name, IXIA_OPT_BOOL)->b;
}
double ixia_config_double(const ixia_config_t *cfg, const char *name) {
  return get(cfg, name, IXIA_OPT_DOUBLE)->d;
}
const char *ixia_config_str(const ixia_config_t *cfg, const char *name) {
  return get(cfg, name, IXIA_OPT_STRING)->s;
}

char **ixia_split_list(const char *list) {
  GPtrArray *out = g_ptr_array_new();
  char **parts = g_strsplit(list ? list : "", ",", -1);
  for (char **p = parts; *p; p++) {
    char *f = g_strstrip(*p);
    if (*f) g_ptr_array_add(out, g_strdup(f));
  }
  g_strfreev(parts);
  g_ptr_array_add(out, NULL);
  return (char **)g_ptr_array_free(out, FALSE);
}

char *ixia_config_doc_markdown(void) {
  static const char *const type_names[] = {"integer", "boolean", "string", "number"};
  GString *s = g_string_new(
      "# Configuration reference\n\n"
      "<!-- Generated by `ixia config-doc` from common/config.c; a test keeps it equal. -->\n\n"
      "Every ixia daemon and tool reads the same options. They come from the built-in defaults,\n"
      "then a config file (`--config FILE` or the `IXIA_CONFIG` environment variable, GKeyFile\n"
      "syntax: `[section]` then `key = value`), then `--set section.key=value` on the command\n"
      "line, later ones winning. Unknown options and out-of-range values are errors.\n");
  const char *section = NULL;
  size_t section_len = 0;
  for (const ixia_option_t *o = options; o->name; o++) {
    const char *dot = strchr(o->name, '.');
    size_t len = (size_t)(dot - o->name);
    if (!section || len != section_len || strncmp(section, o->name, len) != 0) {
      section = o->name;
      section_len = len;
      g_string_append_printf(s, "\n## [%.*s]\n\n| option | type | default | range | meaning |\n"
                                "|---|---|---|---|---|\n",
                             (int)len, o->name);
    }
    char *range = o->type == IXIA_OPT_INT
                      ? g_strdup_printf("%" G_GINT64_FORMAT " – %" G_GINT64_FORMAT, o->min, o->max)
                      : g_strdup("");
    g_string_append_printf(s, "| `%s` | %s | `%s` | %s | %s |\n", o->name, type_names[o->type],
                           o->def, range, o->doc);
    g_free(range);
  }
  return g_string_free(s, FALSE);
}

ixia_config_t *ixia_config_from_args(int *argc, char ***argv, const char *parameter_string,
                                     const char *summary, const GOptionEntry *extra,
                                     ixia_error_t **err) {
  char *config_file = NULL;
  char **sets = NULL;
  GOptionEntry common[] = {
      {"config", 0, 0, G_OPTION_ARG_FILENAME, &config_file,
       "Config file (GKeyFile); default $IXIA_CONFIG", "FILE"},
      {"set", 0, 0, G_OPTION_ARG_STRING_ARRAY, &sets,
       "Override one option (repeatable); see docs/CONFIG.md", "SECTION.KEY=VALUE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL},
  };
  GOptionContext *ctx = g_option_context_new(parameter_string);
  if (summary) g_option_context_set_summary(ctx, summary);
  g_option_context_add_main_entries(ctx, common, NULL);
  if (extra) g_option_context_add_main_entries(ctx, extra, NULL);
  GError *gerr = NULL;
  ixia_config_t *cfg = NULL;
  if (!g_option_context_parse(ctx, argc, argv, &gerr)) {
    ixia_error_from_gerror(err, gerr, IXIA_EINVAL, "command line");
    goto out;
  }
  cfg = ixia_config_new();
  const char *file = config_file ? config_file : g_getenv("IXIA_CONFIG");
  gboolean ok = TRUE;
  if (file && *file) ok = ixia_config_load_file(cfg, file, err);
  for (char **s = sets; ok && s && *s; s++) ok = ixia_config_set_assignment(cfg, *s, err);
  if (ok && !ixia_log_set_level_name(ixia_config_str(cfg, "log.level")))
    ok = ixia_error_set(err, IXIA_EINVAL, "config log.level: unknown level '%s'",
                        ixia_config_str(cfg, "log.level"));
  if (ok && !ixia_log_set_format_name(ixia_config_str(cfg, "log.format")))
    ok = ixia_error_set(err, IXIA_EINVAL, "config log.format: '%s' is neither text nor json",
                        ixia_config_str(cfg, "log.format"));
  if (ok) {
    /* Clients and in-memory decoding use the same wire limits as servers. */
    ixia_wire_limits_t lim = ixia_wire_limits_from_config(cfg);
    ixia_wire_set_limits(&lim);
    ixia_client_set_timeouts(&(ixia_client_timeouts_t){
        .connect_ms = ixia_config_int(cfg, "client.connect_timeout_ms"),
        .auth_ms = ixia_config_int(cfg, "client.auth_timeout_ms"),
        .status_ms = ixia_config_int(cfg, "client.status_timeout_ms"),
        .shard_ms = ixia_config_int(cfg, "client.shard_timeout_ms"),
    });
    ixia_test_hook_start_clock();
  }
  if (!ok) {
    ixia_config_destroy(cfg);
    cfg = NULL;
  }
out:
  g_option_context_free(ctx);
  g_free(config_file);
  g_strfreev(sets);
  return cfg;
}
