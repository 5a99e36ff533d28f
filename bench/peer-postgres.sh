#!/usr/bin/env bash
# The peer: PostgreSQL 15 from the OS packages, holding the same generated
# documents as ixia-bench and answering the same request shapes, driven by
# pgbench over TCP with password auth at the same concurrency. Prints one
# JSON line per workload, in ixia-bench's style, for bench/run.sh.
#
# Usage: bench/peer-postgres.sh DIR   (a scratch directory; removed by the caller)
#   N, DUR, CONNS, QUERY_CONNS, HOT_KEYS, IXIA_BIN as in bench/run.sh.
#
# Setup (the usual way to put JSON in PostgreSQL): table docs(key text primary
# key, doc jsonb); COPY of the documents; a GIN jsonb_path_ops index and
# expression btrees on the filtered fields; VACUUM ANALYZE. Durable defaults
# (fsync, synchronous_commit on); shared_buffers 256 MB like ixia's block
# cache. The server runs as the postgres user (it refuses root).
set -euo pipefail
dir=${1:?usage: peer-postgres.sh DIR}
cd "$(dirname "$0")/.."
N=${N:-1000000}
DUR=${DUR:-15}
CONNS=${CONNS:-16}
QUERY_CONNS=${QUERY_CONNS:-4}
HOT_KEYS=${HOT_KEYS:-1000}
bin=${IXIA_BIN:-$PWD/build/bin}
say() { echo "bench(postgres): $*" >&2; }

pgbin=/usr/lib/postgresql/15/bin
if [ ! -x "$pgbin/initdb" ] || ! command -v pgbench >/dev/null; then
  say "installing PostgreSQL 15 from the OS packages"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    postgresql-15 postgresql-contrib >/dev/null
fi
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

pg=$dir/pg
mkdir -p "$pg"
[ "$(id -u)" -eq 0 ] && chown postgres: "$dir" "$pg"
export PGPASSWORD=ixia-bench
echo "$PGPASSWORD" > "$dir/pgpass.txt"
[ "$(id -u)" -eq 0 ] && chown postgres: "$dir/pgpass.txt"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# C locale: LIKE 'prefix%' can use a plain btree, as ixia's byte order does.
as_pg "$pgbin/initdb" -D "$pg/data" -U bench -A scram-sha-256 --pwfile="$dir/pgpass.txt" --locale=C >/dev/null
as_pg "$pgbin/pg_ctl" -D "$pg/data" -l "$pg/log" -w start \
  -o "-p $port -k $pg -c listen_addresses=127.0.0.1 -c shared_buffers=256MB -c max_connections=100" >/dev/null
stop_pg() { as_pg "$pgbin/pg_ctl" -D "$pg/data" -m fast stop >/dev/null 2>&1 || true; }
trap stop_pg EXIT
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=bench PGDATABASE=postgres
sql() { psql -q -v ON_ERROR_STOP=1 -X "$@"; }

# ---- load: the same documents as ixia's load, COPY + indexes ----------------
say "COPY of $N documents, then the indexes"
sql -c "CREATE TABLE docs (key text PRIMARY KEY, doc jsonb NOT NULL)"
t0=$(date +%s.%N)
# Each generated line holds its key; JSON carries no tab or backslash here.
"$bin/ixia-bench" --docs "$N" gen |
  sed -E 's/^(.*"key":"([^"]*)".*)$/\2\t\1/' |
  sql -c "\\copy docs (key, doc) FROM STDIN"
t1=$(date +%s.%N)
sql -c "CREATE INDEX docs_gin ON docs USING gin (doc jsonb_path_ops)"
sql -c "CREATE INDEX docs_price ON docs (((doc->>'price')::float8))"
sql -c "CREATE INDEX docs_cat_price ON docs ((doc->>'category'), ((doc->>'price')::float8))"
sql -c "CREATE INDEX docs_brand ON docs ((doc->>'brand'))"
sql -c "CREATE INDEX docs_country ON docs ((doc->>'country'))"
sql -c "VACUUM ANALYZE docs"
t2=$(date +%s.%N)
size=$(sql -At -c "SELECT pg_total_relation_size('docs')")
awk -v n="$N" -v a="$t0" -v b="$t1" -v c="$t2" -v s="$size" 'BEGIN {
  printf "{\"workload\":\"pg-load\",\"docs\":%d,\"copy_s\":%.1f,\"index_s\":%.1f,\"total_s\":%.1f,\"docs_per_s\":%.0f,\"disk_bytes\":%d}\n",
    n, b - a, c - b, c - a, n / (c - a), s }'

# ---- timed workloads with pgbench -------------------------------------------
# run NAME CLIENTS SCRIPT: pgbench for DUR seconds over TCP; prints ops/s,
# mean and p50/p99 latency (from pgbench's per-transaction log), and
# pgbench's own CPU per transaction (the shell's `times` for its child).
# PROTOCOL: pgbench's query mode (-M): simple (each query parsed and planned,
# as psycopg2 or node-postgres send them) or prepared (as JDBC after a few
# executions, or pgx).
run() {
  local name=$1 clients=$2 script=$3 logdir
  logdir=$(mktemp -d "$dir/log-XXXX")
  printf '%s\n' "$script" > "$logdir/script.sql"
  local out
  out=$(cd "$logdir" && { pgbench -n -M "$PROTOCOL" -c "$clients" -j 2 -T "$DUR" -f script.sql -l --log-prefix=tx 2>&1 ||
    echo "pgbench exited with an error"; }; times)
  if grep -q '^pgbench exited with an error$' <<<"$out"; then
    say "$name failed: $(tail -4 <<<"$out" | head -2)"; echo "{\"workload\":\"$name\",\"error\":\"pgbench failed\"}"; return 0
  fi
  local tps txs cpu
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' <<<"$out")
  txs=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
  # times: the shell's user and system time, then its children's.
  cpu=$(tail -1 <<<"$out" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); t += a[1] * 60 + a[2] } print t }')
  # Log columns: client, transaction, latency in microseconds, ...
  cat "$logdir"/tx.* | awk '{print $3}' | sort -n | awk -v name="$name" -v tps="$tps" -v c="$clients" \
    -v cpu_us_op="$(awk -v c="$cpu" -v n="$txs" 'BEGIN { if (n > 0) printf "%.1f", c * 1e6 / n; else print -1 }')" '
    { v[NR] = $1; s += $1 }
    END { if (NR == 0) { printf "{\"workload\":\"%s\",\"error\":\"no transactions\"}\n", name; exit }
          p50 = v[int(NR * 0.50) > 0 ? int(NR * 0.50) : 1]; p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
          printf "{\"workload\":\"%s\",\"conns\":%d,\"ops_per_s\":%.1f,\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"client_cpu_us_per_op\":%s}\n",
            name, c, tps, s / NR / 1000, p50 / 1000, p99 / 1000, v[NR] / 1000, cpu_us_op }'
  rm -rf "$logdir"
}
# each NAME CLIENTS SCRIPT: pg-NAME with the simple protocol (the goals'
# reference), then pgp-NAME with prepared statements (PG_PREPARED=0: not).
each() {
  PROTOCOL=simple run "pg-$1" "$2" "$3"
  if [ "${PG_PREPARED:-1}" = 1 ]; then PROTOCOL=prepared run "pgp-$1" "$2" "$3"; fi
}

# The ixia-bench shapes (bench/workloads.c, bench/data.h): prices are uniform
# in [1, 500] with 50 categories, 2,000 brands, 15 countries, a discount in ~20%
# of the documents; the aggregation reads the ~30% of documents with
# price < 150.7. Each filter shape runs at LIMIT 10 and LIMIT 100, two fields.
countries="'US','CA','MX','GB','DE','FR','ES','IT','NL','SE','PL','JP','KR','AU','BR'"
country_pick="(ARRAY[$countries])[:c]"
shape_sql() { # SHAPE LIMIT
  local cols="SELECT key, doc->'title', doc->'price' FROM docs WHERE" lim="LIMIT $2;"
  case $1 in
    cat-price) printf '%s\n' "\\set c random(0, 49)" "\\set a random(1, 479)" \
      "$cols doc->>'category' = 'cat' || lpad(:c::text, 2, '0') AND (doc->>'price')::float8 BETWEEN :a AND :a + 20 $lim" ;;
    narrow) printf '%s\n' "\\set a random(100, 49950)" \
      "$cols (doc->>'price')::float8 BETWEEN :a / 100.0 AND :a / 100.0 + 0.5 $lim" ;;
    wide) printf '%s\n' "\\set a random(1, 249)" \
      "$cols (doc->>'price')::float8 BETWEEN :a AND :a + 250 $lim" ;;
    brand-wide) printf '%s\n' "\\set b random(0, 1999)" "\\set a random(1, 249)" \
      "$cols doc->>'brand' = 'brand' || lpad(:b::text, 4, '0') AND (doc->>'price')::float8 BETWEEN :a AND :a + 250 $lim" ;;
    country-narrow) printf '%s\n' "\\set c random(1, 15)" "\\set a random(100, 49800)" \
      "$cols doc->>'country' = $country_pick AND (doc->>'price')::float8 BETWEEN :a / 100.0 AND :a / 100.0 + 2 $lim" ;;
    in100) printf '%s\n' "\\set b random(0, 1899)" \
      "$cols doc->>'brand' IN (SELECT 'brand' || lpad(g::text, 4, '0') FROM generate_series(:b, :b + 99) g) $lim" ;;
    not) printf '%s\n' "\\set c random(1, 15)" "$cols NOT (doc->>'country' = $country_pick) $lim" ;;
    prefix) printf '%s\n' "\\set p random(0, 19)" \
      "$cols doc->>'brand' LIKE 'brand' || lpad(:p::text, 2, '0') || '%' $lim" ;;
    exists) printf '%s\n' "$cols doc ? 'discount' $lim" ;;
    # ixia's sorted shape: a 30% filter, ORDER BY price DESC, ties by key.
    sorted) printf '%s\n' "$cols doc->>'category' < 'cat15' ORDER BY (doc->>'price')::float8 DESC, key $lim" ;;
  esac
}
for shape in ${SHAPES:-cat-price narrow wide brand-wide country-narrow in100 not prefix exists sorted}; do
  for limit in 10 100; do
    say "filter:$shape, limit $limit ($QUERY_CONNS conns)"
    each "filter:$shape:$limit" "$QUERY_CONNS" "$(shape_sql "$shape" "$limit")"
  done
done
say "agg: terms by category, count/sum/avg/min/max of price over ~30% ($QUERY_CONNS conns)"
each agg "$QUERY_CONNS" "SELECT doc->>'category', count(*), sum((doc->>'price')::float8),
  avg((doc->>'price')::float8), min((doc->>'price')::float8), max((doc->>'price')::float8)
  FROM docs WHERE (doc->>'price')::float8 < 150.7 GROUP BY 1;"
say "get of $HOT_KEYS hot keys ($CONNS conns)"
each get-hot "$CONNS" "\\set k random(0, $((HOT_KEYS - 1)))
SELECT doc FROM docs WHERE key = 'p' || lpad(:k::text, 12, '0');"
say "get of random keys over $N ($CONNS conns)"
each get-random "$CONNS" "\\set k random(0, $((N - 1)))
SELECT doc FROM docs WHERE key = 'p' || lpad(:k::text, 12, '0');"
say "durable single-document upsert ($CONNS conns)"
doc=$("$bin/ixia-bench" --docs 1 gen | sed "s/'/''/g")
each upsert "$CONNS" "\\set k random(0, $((N - 1)))
INSERT INTO docs VALUES ('p' || lpad(:k::text, 12, '0'), '$doc')
  ON CONFLICT (key) DO UPDATE SET doc = EXCLUDED.doc;"
