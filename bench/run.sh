#!/usr/bin/env bash
# Measures ixia beside this machine's physical limits, in one run, and writes
# bench/results/<date>.md (bench/results/<date>-quick.md with --quick; a later run
# of the same day is named <date>-<HHMM>, so the first is kept).
# Usage: bench/run.sh [--quick]
#   N           documents to load (default 1000000; --quick 20000)
#   DUR         seconds per timed workload (default 15; --quick 5)
#   CONNS       connections for gets and puts (default 16; ixia-bench drives them from 2
#               event-driven threads, as pgbench -j 2 drives PostgreSQL's)
#   LOAD_CONNS  connections of the bulk load, batches of 100 (default 8)
#   QUERY_CONNS connections of the filter shapes and agg (default 16)
#   SHAPES      filter shapes to run (default: all; ixia-bench --help lists them)
#   IXIA_BIN    binaries to use (default: `make build`, then build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
N=${N:-$([ $quick = 1 ] && echo 20000 || echo 1000000)}
DUR=${DUR:-$([ $quick = 1 ] && echo 5 || echo 15)}
CONNS=${CONNS:-16}
LOAD_CONNS=${LOAD_CONNS:-8}
QUERY_CONNS=${QUERY_CONNS:-16}
SHAPES=${SHAPES:-cat-price narrow wide brand-wide country-narrow in100 not prefix exists sorted}
HOT_KEYS=1000
# ixia-devkafka (librdkafka's mock) walks every record batch of a partition
# to find each fetch's position, so what it keeps per partition sets the
# cost of every fetch and with it put-to-Kafka lag (devkafka.max_batches).
# A bulk load packs ~60 events a batch over 4 partitions, ~22 over 16, ~6
# over 125 (measured); sparse puts one event a batch. 16 partitions and
# 40,000 batches (2,500 a partition) keep the load's backlog while the
# indexer runs behind it (~20,000 batches at 1M) and keep fetches cheap.
# The freshness rows run at half the put rate, one event a batch: 2,500
# batches a partition are then ~14 s of events, and the walk was most of
# put-to-Kafka lag (p50 61 / p99 198 ms at 2,800 puts/s, against 12 / 43 ms
# with 250 a partition). Before the serving rows the budget drops to FRESH_BATCHES
# (devkafka's "max-batches" command): still over a second of events per
# partition ahead of an indexer that keeps up. Kafka itself finds a fetch's
# position through an offset index, whatever it keeps.
PARTITIONS=${PARTITIONS:-16}
BATCHES=${BATCHES:-40000}
FRESH_BATCHES=${FRESH_BATCHES:-4000}
started=$(date +%s)

if [ -z "${IXIA_BIN:-}" ]; then
  make build >/dev/null
  IXIA_BIN=$PWD/build/bin
fi
bin=$IXIA_BIN
dir=$(mktemp -d /tmp/ixia-bench-XXXXXX)
cleanup() { "$bin/ixia-local" down --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
results=$dir/results.jsonl
: > "$results"

say() { echo "bench: $*" >&2; }
# Runs ixia-bench; its JSON lines go to the results file and stderr.
bench() { "$bin/ixia-bench" "$@" | tee -a "$results" >&2 || say "ixia-bench $* failed (figures kept)"; }
# A number from the result line of a workload: get WORKLOAD FIELD.
get() {
  local line
  line=$(grep "\"workload\":\"$1\"" "$results" | tail -1 || true)
  sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p" <<<"$line"
}
# The machine during a row (ixia-bench's box_busy_pct, cpu_pressure_pct,
# client_wait_us_per_op), for telling a product's tail from a saturated box's.
machine() {
  local b p w
  b=$(get "$1" box_busy_pct); p=$(get "$1" cpu_pressure_pct); w=$(get "$1" client_wait_us_per_op)
  [ -n "$b" ] || return 0
  printf '; box busy %s%%' "$b"
  [ -n "$p" ] && printf ', CPU pressure %s%%' "$p"
  [ -n "$w" ] && printf ', load generator waited %s µs a request for a CPU' "$w"
  return 0
}
skipped() { { grep "\"workload\":\"$1\"" "$results" || true; } | sed -n 's/.*"skipped":"\([^"]*\)".*/\1/p' | tail -1; }
xratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f×", a / b; else print "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }
half() { awk -v r="$1" 'BEGIN { printf "%d", (r > 2 ? r / 2 : 1) }'; }
# 1234567 -> 1,234,567
fmt() {
  awk -v x="$1" 'BEGIN { if (x == "") { print "n/a"; exit }
    s = sprintf("%.0f", x); out = ""
    while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    print s out }'
}
mib() { awk -v b="$1" 'BEGIN { if (b == "") print "n/a"; else printf "%.0f MiB", b / 1048576 }'; }
# One command to ixia-devkafka's control port; its reply to stderr.
devkafka() {
  local reply=""
  if ! exec 3<>"/dev/tcp/127.0.0.1/${IXIA_KAFKA_CONTROL##*:}"; then
    say "ixia-devkafka $1: no control port ($IXIA_KAFKA_CONTROL)"
    return 0
  fi
  echo "$1" >&3
  read -r -t 10 reply <&3 || true
  exec 3>&-
  say "ixia-devkafka $1: ${reply:-no reply}"
}

say "starting a local stack in $dir"
"$bin/ixia-local" up --dir "$dir" --set devkafka.partitions="$PARTITIONS" --set devkafka.max_batches="$BATCHES" >/dev/null
set -a; . "$dir/local.env"; set +a

# ---- physical limits, measured first on a quiet machine ------------------
say "raw Kafka produce to ixia-devkafka (acks=all, ~1 KB, ${DUR}s)"
bench --duration "$DUR" kafka-produce
say "raw memcached gets ($CONNS connections, ${DUR}s)"
bench --duration "$DUR" --conns "$CONNS" --hot-keys "$HOT_KEYS" memcached

db=$dir/dbbench
mkdir -p "$db"
dbb() { db_bench --value_size=950 --key_size=24 --compression_type=lz4 "$@" 2>/dev/null | { grep -E '^(fillrandom|fillseq|readrandom) ' || true; } | tail -1; }
dbrate() { awk '{for (i = 1; i <= NF; i++) if ($i ~ /^ops\/sec/) print $(i-1)}' <<<"$1"; }
say "RocksDB: synced single puts ($CONNS threads), synced batches of 100 ($LOAD_CONNS threads), unsynced puts, random gets"
db_sync=$(dbb --benchmarks=fillrandom --num=10000000 --duration="$DUR" --threads="$CONNS" --sync=1 --db="$db/sync")
db_batch=$(dbb --benchmarks=fillrandom --num=10000000 --duration="$DUR" --threads="$LOAD_CONNS" --batch_size=100 --sync=1 --db="$db/batch")
db_nosync=$(dbb --benchmarks=fillrandom --num=10000000 --duration="$DUR" --threads=1 --sync=0 --db="$db/nosync")
dbb --benchmarks=fillseq --num="$N" --threads=1 --sync=0 --db="$db/read" >/dev/null
db_read=$(dbb --benchmarks=readrandom --use_existing_db=1 --num="$N" --duration="$DUR" --threads="$CONNS" --db="$db/read")
rm -rf "$db"

# ---- ixia ---------------------------------------------------------------------
say "load: $N documents over $LOAD_CONNS connections, batches of 100; then the index catch-up"
bench --docs "$N" --conns "$LOAD_CONNS" --batch 100 load index
index_du=$(du -sb "$dir/index" | cut -f1)
store_du=$(du -sb "$dir/store" | cut -f1)
# What the load leaves running (RocksDB compactions of the store and of the
# index) would fall on the first timed rows (the first filter row measured
# 5,207/s in one run and 9,499/s in the next): wait until the machine is
# idle (90% of two seconds), at most two minutes.
quiet() {
  local t0=$SECONDS a b i tot idle
  while [ $((SECONDS - t0)) -lt 120 ]; do
    read -ra a < /proc/stat; sleep 2; read -ra b < /proc/stat
    idle=$((b[4] + b[5] - a[4] - a[5])); tot=0
    for i in 1 2 3 4 5 6 7 8; do tot=$((tot + b[i] - a[i])); done
    [ $((100 * idle)) -ge $((90 * tot)) ] && break
  done
  say "the machine went quiet $((SECONDS - t0)) s after $1"
}
quiet "the load"

say "filter shapes at limit 10 and 100, and agg ($QUERY_CONNS connections, ${DUR}s each)"
for limit in 10 100; do
  for shape in $SHAPES; do bench --duration "$DUR" --conns "$QUERY_CONNS" --limit "$limit" "filter:$shape"; done
done
bench --duration "$DUR" --conns "$QUERY_CONNS" agg
# Values aggregated per second of one core: the same query, one at a time
# (under 16 connections a query's time includes waiting for the cores).
agg_alone=$("$bin/ixia-bench" --duration "$DUR" --conns 1 agg || true)
echo "$agg_alone" | sed 's/"workload":"agg"/"workload":"agg-alone"/' >> "$results"

# The index has caught up and the rows below write one event a batch: from
# here on the mock keeps FRESH_BATCHES (see above), or each put pays its walk
# (measured: 105-140 us of devkafka CPU a put at 2,500 batches a partition,
# 61-62 us at 250; 3,518-4,199 puts/s against 4,009-4,275).
devkafka "max-batches $FRESH_BATCHES"
say "cached gets (get-hot, $CONNS connections, ${DUR}s)"
bench --duration "$DUR" --conns "$CONNS" --hot-keys "$HOT_KEYS" get-hot
say "cached gets over HTTP/JSON, keep-alive (http-get-hot, $CONNS connections, ${DUR}s)"
bench --duration "$DUR" --conns "$CONNS" --hot-keys "$HOT_KEYS" http-get-hot
say "random gets over $N documents (get-random, $CONNS connections, ${DUR}s)"
bench --duration "$DUR" --conns "$CONNS" --keys "$N" get-random
say "mixed: gets and puts 15:1, Zipf keys over $N documents ($CONNS connections, ${DUR}s)"
bench --duration "$DUR" --conns "$CONNS" --keys "$N" mixed
say "durable puts, one per call ($CONNS connections, ${DUR}s)"
bench --duration "$DUR" --conns "$CONNS" --keys "$N" put

# The closed-loop puts leave the indexer a backlog: let it catch up first,
# or freshness would measure the backlog rather than the pipeline.
settle() { "$bin/ixia-bench" index >/dev/null 2>&1 || true; }
put_rate=$(get put ops_per_s)
fresh_rate=$(half "${put_rate:-2}")
say "freshness and put-to-Kafka lag at half the maximum put load ($fresh_rate puts/s)"
settle
bench --duration "$DUR" --conns "$CONNS" --rate "$fresh_rate" freshness
settle
bench --duration "$DUR" --conns "$CONNS" --rate "$fresh_rate" cdc-lag

say "durable puts with replication off (a second API on its own store, no sinks)"
"$bin/ixia-query-api" --set api.port=0 --set api.port_file="$dir/off.port" --set store.path="$dir/store-off" \
  --set cache.servers="$IXIA_MEMCACHED" --set log.level=warn > "$dir/off.log" 2>&1 &
off_pid=$!
for _ in $(seq 100); do [ -s "$dir/off.port" ] && break; sleep 0.1; done
put_off=$("$bin/ixia-bench" --api "127.0.0.1:$(cat "$dir/off.port")" --duration "$DUR" --conns "$CONNS" --keys 100000 put || true)
[ -n "$put_off" ] || { say "replication-off API did not serve; its log:"; tail -5 "$dir/off.log" >&2; }
kill "$off_pid" 2>/dev/null || true
wait "$off_pid" 2>/dev/null || true
off_rate=$(sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p' <<<"$put_off")
echo "$put_off" | sed 's/"workload":"put"/"workload":"put-replication-off"/' >> "$results"

say "siege: a normal get beside 10,000 idle connections and a slowloris client"
bench --idle 10000 siege

# ---- the peer: PostgreSQL 15 with the same documents and request shapes -------
say "the peer: PostgreSQL 15 (bench/peer-postgres.sh)"
"$bin/ixia-local" down --dir "$dir" >/dev/null 2>&1 || true # its cores to the peer
N=$N DUR=$DUR CONNS=$CONNS QUERY_CONNS=$QUERY_CONNS HOT_KEYS=$HOT_KEYS IXIA_BIN=$bin SHAPES=$SHAPES \
  bench/peer-postgres.sh "$dir" | tee -a "$results" >&2 || say "the PostgreSQL peer failed (figures kept)"
pg() { get "pg-$1" "$2"; }
pgp() { get "pgp-$1" "$2"; } # the same with prepared statements
pgcell() {
  local v w; v=$(pg "$1" ops_per_s); w=$(pgp "$1" ops_per_s)
  if [ -n "$v" ]; then printf '%s' "$(fmt "$v")/s, p50 $(pg "$1" p50_ms) / p99 $(pg "$1" p99_ms) ms"; else printf 'n/a'; fi
  if [ -n "$w" ]; then printf '%s' "; prepared: $(fmt "$w")/s, p99 $(pgp "$1" p99_ms) ms"; fi
  echo
}
# pgratio FN IXIA NAME: IXIA against PostgreSQL's simple protocol, and
# against its prepared statements when they ran.
pgratio() {
  local w; w=$(pgp "$3" ops_per_s)
  printf '%s' "$("$1" "$2" "$(pg "$3" ops_per_s)")"
  if [ -n "$w" ]; then printf '%s' " ($("$1" "$2" "$w") prepared)"; fi
  echo
}

# ---- report --------------------------------------------------------------------
row_err() { local e; e=$({ grep "\"workload\":\"$1\"" "$results" || true; } | sed -n 's/.*"error":"\([^"]*\)".*/\1/p' | tail -1); if [ -n "$e" ]; then echo "**error: $e**"; fi; }
row_skip() { local s; s=$(skipped "$1"); if [ -n "$s" ]; then echo "skipped: $s"; fi; }
mkdir -p bench/results
suffix=""
if [ $quick = 1 ]; then suffix=-quick; fi
out=bench/results/$(date -u +%Y-%m-%d)$suffix.md
[ -e "$out" ] && out=bench/results/$(date -u +%Y-%m-%d-%H%M)$suffix.md
raw_bytes=$(get load bytes)
elapsed=$(( $(date +%s) - started ))
{
  echo "# ixia bench, $(date -u +%Y-%m-%dT%H:%MZ)${suffix:+ (--quick)}"
  echo
  echo "Machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release; echo "$PRETTY_NAME"), $(uname -r)."
  echo "Run: N=$(fmt "$N") generated documents ($(mib "$raw_bytes") of JSON), ${DUR}s per timed workload, $elapsed s in all."
  echo "Everything (load generator, ixia, memcached, Kafka mock, db_bench) shares this machine; ixia-devkafka with $PARTITIONS partitions, at most $BATCHES record batches kept ($FRESH_BATCHES from the cached-get rows on, once the index has caught up: the mock walks every kept batch to find each fetch's position). Rows of requests say how busy the machine was (CPU time not idle), its CPU pressure (the share of time in which some runnable task waited for a CPU) and how long the load generator's own threads waited for one, per request: on a saturated box an open-loop row counts that wait in every request scheduled behind it."
  echo
  echo "| workload | ixia | physical limit (same run) | ixia / limit | PostgreSQL 15 (same run) | ixia / PostgreSQL |"
  echo "|---|---|---|---|---|---|"
  echo "| load: durable puts in batches of 100, $LOAD_CONNS conns | $(fmt "$(get load docs_per_s)") docs/s | db_bench fillrandom sync=1 batch_size=100, $LOAD_CONNS threads: $(fmt "$(dbrate "$db_batch")") ops/s | $(ratio "$(get load docs_per_s)" "$(dbrate "$db_batch")") | $(pg load total_s) s COPY + CREATE INDEX ($(fmt "$(pg load docs_per_s)") docs/s) | $(ratio "$(get load docs_per_s)" "$(pg load docs_per_s)") |"
  echo "| index catch-up after the load (load start → min_version query answers) | $(fmt "$(get index docs_per_s)") docs/s $(row_skip index)$(row_err index) | db_bench fillrandom sync=0, 1 thread: $(fmt "$(dbrate "$db_nosync")") ops/s | $(ratio "$(get index docs_per_s)" "$(dbrate "$db_nosync")") | | |"
  echo "| durable put, 1 doc per call, $CONNS conns (goal ≥ 50%) | $(fmt "$put_rate") puts/s, p99 $(get put p99_ms) ms$(machine put) | db_bench fillrandom sync=1, $CONNS threads: $(fmt "$(dbrate "$db_sync")") ops/s | $(ratio "$put_rate" "$(dbrate "$db_sync")") | upsert: $(pgcell upsert) | $(pgratio ratio "$put_rate" upsert) |"
  echo "| cached get (get-hot), $CONNS conns (goal ≥ 50%, p99 < 5 ms) | $(fmt "$(get get-hot ops_per_s)") gets/s, p50 $(get get-hot p50_ms) / p99 $(get get-hot p99_ms) / p99.9 $(get get-hot p999_ms) ms | raw memcached get: $(fmt "$(get memcached ops_per_s)") gets/s, p50 $(get memcached p50_ms) / p99 $(get memcached p99_ms) ms | $(ratio "$(get get-hot ops_per_s)" "$(get memcached ops_per_s)") | get of the same hot keys: $(pgcell get-hot) | $(pgratio ratio "$(get get-hot ops_per_s)" get-hot) |"
  echo "| cached get over HTTP/JSON, keep-alive (http-get-hot), $CONNS conns (goal ≥ 80% of get-hot) | $(fmt "$(get http-get-hot ops_per_s)") gets/s, p50 $(get http-get-hot p50_ms) / p99 $(get http-get-hot p99_ms) ms $(row_skip http-get-hot)$(row_err http-get-hot) | the same gets over Thrift (get-hot): $(fmt "$(get get-hot ops_per_s)") gets/s | $(ratio "$(get http-get-hot ops_per_s)" "$(get get-hot ops_per_s)") | | |"
  echo "| random get over N keys (get-random), $CONNS conns (goal ≥ 1.5× PostgreSQL) | $(fmt "$(get get-random ops_per_s)") gets/s, p50 $(get get-random p50_ms) / p99 $(get get-random p99_ms) ms, cache hit ratio $(get get-random cache_hit_ratio) | db_bench readrandom over N keys, $CONNS threads: $(fmt "$(dbrate "$db_read")") ops/s | $(ratio "$(get get-random ops_per_s)" "$(dbrate "$db_read")") | get of random keys: $(pgcell get-random) | $(pgratio ratio "$(get get-random ops_per_s)" get-random) |"
  echo "| mixed 15:1 get:put, Zipf 0.99 over N keys, $CONNS conns | $(fmt "$(get mixed ops_per_s)") ops/s, get p99 $(get mixed get_p99_ms) ms, put p99 $(get mixed put_p99_ms) ms, cache hit ratio $(get mixed cache_hit_ratio)$(machine mixed) | raw memcached get: $(fmt "$(get memcached ops_per_s)") gets/s (misses go to RocksDB: db_bench readrandom over N keys, $CONNS threads: $(fmt "$(dbrate "$db_read")") ops/s) | $(ratio "$(get mixed ops_per_s)" "$(get memcached ops_per_s)") | get of random keys: $(pgcell get-random) | |"
  echo "| durable put with replication on vs off, $CONNS conns | $(fmt "$put_rate") puts/s | replication off: $(fmt "$off_rate") puts/s | $(ratio "$put_rate" "$off_rate") | | |"
  echo "| agg: terms by category (count/sum/avg/min/max of price) over $(get agg matched_fraction) of docs, $QUERY_CONNS conns (goal p50 < 20 ms, ≥ 100× PostgreSQL, ≥ 50M values/s per core) | p50 $(get agg p50_ms) / p99 $(get agg p99_ms) ms, $(get agg ops_per_s) queries/s; one at a time: p50 $(get agg-alone p50_ms) ms, $(fmt "$(get agg-alone agg_values_per_s)") values/s on one core $(row_skip agg) | | | $(pgcell agg) | $(pgratio ratio "$(get agg ops_per_s)" agg) |"
  echo "| freshness: put → visible to a query, at $fresh_rate puts/s (goal p99 < 50 ms) | p50 $(get freshness fresh_p50_ms) / p99 $(get freshness fresh_p99_ms) / max $(get freshness fresh_max_ms) ms ($(get freshness visible) probes, $(get freshness lost) lost)$(machine freshness) $(row_skip freshness) | | | | |"
  echo "| \`ixia get\` with 10,000 idle connections and a slowloris open (goal < 100 ms) | p50 $(get siege siege_ixia_get_p50_ms) / max $(get siege siege_ixia_get_max_ms) ms ($(get siege idle_connections) idle held; slowloris cut after $(get siege slowloris_cut_after_ms) ms) $(row_err siege) | the same on a quiet API: p50 $(get siege quiet_ixia_get_p50_ms) / max $(get siege quiet_ixia_get_max_ms) ms | | | |"
  echo "| put → readable from Kafka, at $fresh_rate puts/s, by a consumer whose fetches wait ≤ 1 ms (goal p99 < 20 ms) | p50 $(get cdc-lag lag_p50_ms) / p99 $(get cdc-lag lag_p99_ms) ms | raw produce (acks=all): $(fmt "$(get kafka-produce ops_per_s)") msgs/s, p50 $(get kafka-produce p50_ms) / p99 $(get kafka-produce p99_ms) ms | | | |"
  echo
  echo "Filter shapes, every hit re-read from the truth store, 2 fields per hit, $QUERY_CONNS connections (goals: limit 10 ≥ 3× PostgreSQL, limit 100 ≥ 1.5×, p99 < 10 ms):"
  echo
  echo "PostgreSQL runs every workload twice: with pgbench's simple query protocol (each query parsed and planned, as psycopg2 or node-postgres send them; the goals were set against it) and with prepared statements (-M prepared, as JDBC after a few executions or pgx); cells and ratios give the second in parentheses or after \"prepared\"."
  echo
  echo "(\`sorted\`: category < cat15, ~30%, sorted by price descending, against PostgreSQL's ORDER BY (doc->>'price')::float8 DESC, key LIMIT n on the price btree; goal at limit 100: ≥ 3× PostgreSQL, p99 < 20 ms.)"
  echo
  echo "| shape | ixia, limit 10 | PostgreSQL, limit 10 | ratio | ixia, limit 100 | PostgreSQL, limit 100 | ratio |"
  echo "|---|---|---|---|---|---|---|"
  for shape in $SHAPES; do
    cells=""
    for limit in 10 100; do
      w="filter:$shape:$limit"
      v=$(get "$w" ops_per_s)
      if [ -n "$v" ]; then ix="$(fmt "$v")/s, p50 $(get "$w" p50_ms) / p99 $(get "$w" p99_ms) ms, total $(get "$w" avg_total)"; else ix="n/a $(row_skip "$w")$(row_err "$w")"; fi
      cells="$cells | $ix | $(pgcell "$w") | $(pgratio xratio "$v" "$w")"
    done
    echo "| $shape$cells |"
  done
  echo
  # Both load generators drive their connections from 2 event-driven threads; what each
  # costs the shared machine per request, from its own CPU time.
  cpu_range() { # PREFIX LIMIT: min–max of client_cpu_us_per_op over the shapes
    for shape in $SHAPES; do get "$1filter:$shape:$2" client_cpu_us_per_op; done |
      awk 'NF { if (n == 0 || $1 < lo) lo = $1; if (n == 0 || $1 > hi) hi = $1; n++ }
           END { if (n) printf "%s–%s", lo, hi; else printf "n/a" }'
  }
  echo "Load generators' own CPU per request, µs (ixia-bench, and pgbench -j 2 beside it): cached get $(get get-hot client_cpu_us_per_op) and $(pg get-hot client_cpu_us_per_op); random get $(get get-random client_cpu_us_per_op) and $(pg get-random client_cpu_us_per_op); put $(get put client_cpu_us_per_op) and upsert $(pg upsert client_cpu_us_per_op); filter pages of 10 $(cpu_range "" 10) and $(cpu_range pg- 10), of 100 $(cpu_range "" 100) and $(cpu_range pg- 100); agg $(get agg client_cpu_us_per_op) and $(pg agg client_cpu_us_per_op)."
  echo
  echo "Index size on disk: $(mib "$index_du") for $(fmt "$N") documents ($(mib "$raw_bytes") of JSON; index/raw = $(ratio "$index_du" "$raw_bytes")); truth store: $(mib "$store_du"). Indexer's own count: $(mib "$(get index index_disk_bytes)")."
  echo
  echo '```'
  cat "$results"
  echo "$db_sync"
  echo "$db_batch"
  echo "$db_nosync"
  echo "$db_read"
  echo '```'
} > "$out"
cat "$out"
