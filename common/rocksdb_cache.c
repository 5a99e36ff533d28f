/* RocksDB block caches that hold index and filter blocks
 * (rocksdb_cache.h): how such a cache is split into shards. The truth
 * store keeps those blocks with its table readers and RocksDB's own
 * sharding; the index shards cache them (cache_index_and_filter_blocks).
 *
 * Why: RocksDB splits an LRU cache into up to 64 shards by key hash, down
 * to 512 KiB each, and keeps index and filter blocks in the high-priority
 * half of their shard. A table's whole-key bloom filter is one block of
 * ~1.2 bytes a key: about 1.2 MiB for a 64 MiB table of a million keys.
 * With the index shard's 256 MiB cache that made 64 shards of 4 MiB, 2 MiB
 * for filters and indexes, so two large tables' filters in one shard
 * pushed each other out, and every point read of the index (each document
 * an index batch applies reads its old record) read and checksummed a
 * whole filter from the file again: measured after a repair left three
 * 70 MiB tables, 27% of the apply thread in copying the filter out of the
 * page cache, 25% in its checksum, and put-to-searchable at 7-12 s instead
 * of 20-30 ms. Shards of at least 32 MiB hold a dozen such filters each;
 * at that size the shard mutex is still uncontended with the handful of
 * threads a daemon reads with. */
#include "rocksdb_cache.h"

/* Compactions at nice 19. A trace of put-to-searchable on a 2-core machine
 * that also ran the API, the Kafka mock and the load generator (4,000
 * puts/s) found the index's apply thread runnable and waiting for a CPU for
 * 20-60 ms of each batch that needed 1.5-11 ms of it. Each daemon runs in
 * its own scheduling group (autogroup), so inside it the compaction
 * threads compete with the apply thread, or with the store's writer,
 * directly. RocksDB renices a pool thread when it next picks a job; the
 * default environment, and so the setting, is the process's. */
void ixia_rocksdb_lower_compaction_priority(void) {
  rocksdb_env_t *env = rocksdb_create_default_env();
  rocksdb_env_lower_thread_pool_cpu_priority(env);
  rocksdb_env_destroy(env);
}

int ixia_rocksdb_cache_shard_bits(size_t bytes) {
  int bits = 0;
  while (bits < 6 && (bytes >> (bits + 1)) >= IXIA_ROCKSDB_CACHE_MIN_SHARD) bits++;
  return bits;
}

rocksdb_cache_t *ixia_rocksdb_cache_new(size_t bytes) {
  rocksdb_lru_cache_options_t *o = rocksdb_lru_cache_options_create();
  rocksdb_lru_cache_options_set_capacity(o, bytes);
  rocksdb_lru_cache_options_set_num_shard_bits(o, ixia_rocksdb_cache_shard_bits(bytes));
  rocksdb_cache_t *c = rocksdb_cache_create_lru_opts(o);
  rocksdb_lru_cache_options_destroy(o);
  return c;
}
