#!/usr/bin/env bash
# Measures ixia beside this machine's physical limits, in one run, and writes
# bench/results/<date>.md. Usage: bench/run.sh [--quick]
#   N       documents to load (default 200000; --quick 20000)
#   DUR     seconds per get workload (default 15; --quick 5)
#   CONNS   concurrent connections for gets (default 16)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
N=${N:-$([ $quick = 1 ] && echo 20000 || echo 200000)}
DUR=${DUR:-$([ $quick = 1 ] && echo 5 || echo 15)}
CONNS=${CONNS:-16}
LOAD_CONNS=${LOAD_CONNS:-8}

make build >/dev/null
bin=$PWD/build/bin
dir=$(mktemp -d /tmp/ixia-bench-XXXXXX)
cleanup() { "$bin/ixia-local" down --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT

echo "bench: starting a local stack in $dir" >&2
"$bin/ixia-local" up --dir "$dir" >/dev/null
set -a; . "$dir/local.env"; set +a

"$bin/ixia" schema apply - >/dev/null <<'JSON'
{"namespace": "bench", "table": "products", "cache_ttl_seconds": 3600,
 "indexes": [{"field": "category", "type": "keyword"}, {"field": "brand", "type": "keyword"},
             {"field": "country", "type": "keyword"}, {"field": "price", "type": "double"},
             {"field": "tags", "type": "keyword"}, {"field": "updated_at", "type": "timestamp"}]}
JSON

echo "bench: generating $N documents" >&2
bench/gen-products.sh "$N" > "$dir/products.jsonl"
bytes=$(wc -c < "$dir/products.jsonl")

echo "bench: ixia load ($LOAD_CONNS connections, batches of 100)" >&2
load_line=$("$bin/ixia" load bench products "$dir/products.jsonl" --key-field key --conns "$LOAD_CONNS" --batch 100 | tail -1)
load_rate=$(sed -n 's/.*(\([0-9.]*\) docs\/s).*/\1/p' <<<"$load_line")

echo "bench: RocksDB synced puts, db_bench fillrandom, $LOAD_CONNS threads, 1 KB values" >&2
db_out=$(db_bench --benchmarks=fillrandom --num=$((N / LOAD_CONNS / 4)) --threads="$LOAD_CONNS" \
  --value_size=950 --key_size=24 --sync=1 --db="$dir/dbbench" --compression_type=lz4 2>/dev/null | grep '^fillrandom')
db_rate=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^ops\/sec/) print $(i-1)}' <<<"$db_out")

echo "bench: cached gets through ixia vs raw memcached gets ($CONNS connections, ${DUR}s each)" >&2
gets=$("$bin/ixia-bench" --duration "$DUR" --conns "$CONNS" --keys 1000 get-hot memcached)
field() { sed -n "s/.*\"workload\":\"$1\".*\"$2\":\([0-9.]*\).*/\1/p" <<<"$gets"; }
ixia_get=$(field get-hot ops_per_s); ixia_p50=$(field get-hot p50_ms); ixia_p99=$(field get-hot p99_ms)
mc_get=$(field memcached ops_per_s); mc_p50=$(field memcached p50_ms); mc_p99=$(field memcached p99_ms)
hit_ratio=$("$bin/ixia" stats | sed -n 's/.*"cache_hit_ratio":\([0-9.]*\).*/\1/p')

echo "bench: durable puts with replication on ($CONNS connections, ${DUR}s)" >&2
put_on=$("$bin/ixia-bench" --duration "$DUR" --conns "$CONNS" --keys 100000 put)
echo "bench: durable puts with replication off (a second API on its own store, no sinks)" >&2
"$bin/ixia-query-api" --set api.port=0 --set api.port_file="$dir/off.port" --set store.path="$dir/store-off" \
  --set cache.servers="$IXIA_MEMCACHED" --set log.level=warn > "$dir/off.log" 2>&1 &
off_pid=$!
for _ in $(seq 100); do [ -s "$dir/off.port" ] && break; sleep 0.1; done
put_off=$("$bin/ixia-bench" --api "127.0.0.1:$(cat "$dir/off.port")" --duration "$DUR" --conns "$CONNS" --keys 100000 put)
kill "$off_pid"; wait "$off_pid" 2>/dev/null || true
pfield() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" <<<"$1"; }
on_rate=$(pfield "$put_on" ops_per_s); off_rate=$(pfield "$put_off" ops_per_s)
lag_rate=$(awk -v r="$on_rate" 'BEGIN { printf "%d", r / 2 }')
echo "bench: put-to-Kafka lag at half the maximum put load ($lag_rate puts/s)" >&2
lag=$("$bin/ixia-bench" --duration "$DUR" --conns "$CONNS" --rate "$lag_rate" cdc-lag || true)
lag_p50=$(pfield "$lag" lag_p50_ms); lag_p99=$(pfield "$lag" lag_p99_ms)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }
mkdir -p bench/results
out=bench/results/$(date -u +%Y-%m-%d).md
{
  echo "# ixia bench, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release; echo "$PRETTY_NAME"), $(uname -r)."
  echo "Run: N=$N documents ($((bytes / 1024 / 1024)) MiB of JSON), load over $LOAD_CONNS connections, gets over $CONNS connections for ${DUR}s."
  echo
  echo "| workload | ixia | physical limit (same run) | ixia / limit |"
  echo "|---|---|---|---|"
  echo "| durable put (\`ixia load\`, synced WAL, group commit) | ${load_rate} docs/s | db_bench fillrandom sync=1, $LOAD_CONNS threads: ${db_rate} ops/s | $(ratio "$load_rate" "$db_rate") |"
  echo "| cached get throughput | ${ixia_get} gets/s | raw memcached get (libmemcached): ${mc_get} gets/s | $(ratio "$ixia_get" "$mc_get") |"
  echo "| cached get latency p50 / p99 | ${ixia_p50} / ${ixia_p99} ms | ${mc_p50} / ${mc_p99} ms | |"
  echo "| durable put, replication on ($CONNS conns, 1 doc per call) | ${on_rate} puts/s | same with replication off: ${off_rate} puts/s | $(ratio "$on_rate" "$off_rate") |"
  echo "| put-to-Kafka lag at ${lag_rate} puts/s, p50 / p99 | ${lag_p50} / ${lag_p99} ms | | |"
  echo
  echo "Cache hit ratio over the run: ${hit_ratio}. Load summary: \`$load_line\`"
  echo
  echo '```'
  echo "$gets"
  echo "$put_on"
  echo "$put_off"
  echo "$lag"
  echo "$db_out"
  echo '```'
} > "$out"
cat "$out"
