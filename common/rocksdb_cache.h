/* RocksDB block caches that hold index and filter blocks (the index
 * shards'; rocksdb_cache.c): how such a cache is split into shards; and the
 * priority of RocksDB's compaction threads.
 *
 * Thread safety: every function may be called from any thread. */
#ifndef IXIA_ROCKSDB_CACHE_H
#define IXIA_ROCKSDB_CACHE_H

#include <rocksdb/c.h>
#include <stddef.h>

/* The smallest shard a block cache is split into (see rocksdb_cache.c). */
#define IXIA_ROCKSDB_CACHE_MIN_SHARD ((size_t)32 << 20)

/* log2 of the shard count for a cache of `bytes`: as many shards as keep
 * each at least IXIA_ROCKSDB_CACHE_MIN_SHARD, at most 64 (RocksDB's own
 * ceiling), at least one. */
int ixia_rocksdb_cache_shard_bits(size_t bytes);

/* A new LRU block cache of `bytes`, split as above (the caller destroys it
 * with rocksdb_cache_destroy). */
rocksdb_cache_t *ixia_rocksdb_cache_new(size_t bytes);

/* Lowers the CPU priority of RocksDB's low-priority (compaction) threads,
 * process-wide: each takes nice 19 at its next job (rocksdb_cache.c). */
void ixia_rocksdb_lower_compaction_priority(void);

#endif
