#!/usr/bin/env bash
# End-to-end test of the ixia CLI: starts a real stack with `ixia-local up`
# in a temporary directory (memcached, ixia-devkafka, ixia-replication-sink
# and ixia-query-api on free loopback ports), runs every CLI command against
# it, then `ixia-local down` and checks that the processes it started are
# gone.
#
# Usage: cli_test.sh BIN_DIR   (registered with ctest as cli_integration)

# `cond && pass ... || fail ...` is safe here: pass always returns 0.
# shellcheck disable=SC2015
set -u

BIN=$(cd "${1:?usage: cli_test.sh BIN_DIR}" && pwd) || exit 2
IXIA=$BIN/ixia
LOCAL=$BIN/ixia-local
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ixia-cli-test.XXXXXX") || exit 2
DIR=$WORK/stack
passed=0
failed=0
stack_down=0
pids_started=""

# --- helpers -----------------------------------------------------------------

pass() {
  passed=$((passed + 1))
  echo "ok   $1"
}

fail() {
  failed=$((failed + 1))
  echo "FAIL $1" >&2
  [ $# -gt 1 ] && printf '     %s\n' "${@:2}" >&2
  return 0
}

# run CMD... : runs with stdin from $STDIN (default /dev/null) and sets
# $rc, $out and $err.
run() {
  "$@" <"${STDIN:-/dev/null}" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  out=$(cat "$WORK/out")
  err=$(cat "$WORK/err")
}

# What the last command did, for failure messages.
last() {
  echo "exit $rc; stdout: ${out:0:400}; stderr: ${err:0:400}"
}

# expect_rc NAME CODE: checks the exit code of the last run.
expect_rc() {
  if [ "$rc" -eq "$2" ]; then pass "$1"; else fail "$1: expected exit $2" "$(last)"; fi
}

# expect_out NAME REGEX: exit 0 and stdout matching an extended regex.
expect_out() {
  if [ "$rc" -eq 0 ] && [[ $out =~ $2 ]]; then
    pass "$1"
  else
    fail "$1: expected exit 0 and stdout matching /$2/" "$(last)"
  fi
}

HAVE_PY=0
command -v python3 >/dev/null 2>&1 && HAVE_PY=1

# json_field JSON PATH: prints a top-level field of a JSON object (python3
# when present; otherwise a crude match good enough for flat test docs).
json_field() {
  if [ $HAVE_PY = 1 ]; then
    python3 -c '
import json, sys
try:
    v = json.loads(sys.argv[1]).get(sys.argv[2])
except (ValueError, AttributeError):
    v = None
print("" if v is None else v if isinstance(v, str) else json.dumps(v))' "$1" "$2"
  else
    sed -n "s/.*\"$2\" *: *\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" <<<"$1"
  fi
}

# json_keys JSON: sorted top-level keys, comma separated.
json_keys() {
  if [ $HAVE_PY = 1 ]; then
    python3 -c '
import json, sys
try:
    print(",".join(sorted(json.loads(sys.argv[1]))))
except (ValueError, TypeError):
    print("(not a JSON object)")' "$1"
  else
    grep -o '"[a-z_]*" *:' <<<"$1" | tr -d '": ' | sort | paste -sd, -
  fi
}

is_json() {
  if [ $HAVE_PY = 1 ]; then
    python3 -c 'import json,sys; json.loads(sys.argv[1])' "$1" 2>/dev/null
  else
    [[ $1 =~ ^\{.*\}$ ]]
  fi
}

# alive PID STARTTIME: the process still runs and is the one recorded.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  read -r -a f <<<"$stat"
  [ "${f[0]}" != Z ] && [ "${f[0]}" != X ] && [ "${f[19]}" = "$2" ]
}

show_logs() {
  for log in "$DIR"/logs/*.log; do
    [ -f "$log" ] || continue
    echo "---- last lines of $log" >&2
    tail -n 20 "$log" >&2
  done
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  if [ "$stack_down" = 0 ] && [ -d "$DIR" ]; then
    [ "$failed" -gt 0 ] && show_logs
    "$LOCAL" down --dir "$DIR" >/dev/null 2>&1
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() {
  echo "$passed passed, $failed failed"
  [ $failed -eq 0 ]
  exit $?
}

# --- the stack ---------------------------------------------------------------

for b in "$IXIA" "$LOCAL" "$BIN/ixia-query-api" "$BIN/ixia-devkafka" "$BIN/ixia-replication-sink" "$BIN/ixia-indexer"; do
  [ -x "$b" ] || { echo "cli_test: $b is missing; build first" >&2; exit 1; }
done

run "$LOCAL" up --dir "$DIR"
if [ $rc -ne 0 ] || [ ! -f "$DIR/local.env" ]; then
  fail "ixia-local up" "$(last)"
  show_logs
  finish
fi
pass "ixia-local up"
[[ $err == *"ixia-devkafka keeps up to 1024 MiB of events"* ]] &&
  pass "ixia-local up prints devkafka's backlog budget" ||
  fail "ixia-local up prints devkafka's backlog budget" "$(last)"
pids_started=$(awk '!/^#/ && NF == 3 {print $2 ":" $3}' "$DIR/pids")
cp "$DIR/pids" "$WORK/pids.before"
if grep -q '^IXIA_API=127\.0\.0\.1:[0-9]\+$' "$DIR/local.env" &&
  grep -q '^IXIA_MEMCACHED=127\.0\.0\.1:[0-9]\+$' "$DIR/local.env"; then
  pass "local.env has IXIA_API and IXIA_MEMCACHED"
else
  fail "local.env has IXIA_API and IXIA_MEMCACHED" "$(cat "$DIR/local.env")"
fi
if grep -Eq '^IXIA_KAFKA=127\.0\.0\.1:[0-9]+(,127\.0\.0\.1:[0-9]+)*$' "$DIR/local.env" &&
  grep -q '^IXIA_KAFKA_CONTROL=127\.0\.0\.1:[0-9]\+$' "$DIR/local.env" &&
  grep -q '^IXIA_SINK=127\.0\.0\.1:[0-9]\+$' "$DIR/local.env"; then
  pass "local.env has IXIA_KAFKA, IXIA_KAFKA_CONTROL and IXIA_SINK"
else
  fail "local.env has IXIA_KAFKA, IXIA_KAFKA_CONTROL and IXIA_SINK" "$(cat "$DIR/local.env")"
fi
[ "$(wc -w <<<"$pids_started")" -eq 5 ] && pass "five processes recorded" ||
  fail "five processes recorded" "$(cat "$DIR/pids")"

set -a
# shellcheck disable=SC1091
. "$DIR/local.env"
set +a

run "$LOCAL" up --dir "$DIR"
if [ $rc -ne 0 ] && [[ $err == *"already"* ]]; then
  pass "second up on a running dir refused"
else
  fail "second up on a running dir refused" "$(last)"
fi

run "$LOCAL" status --dir "$DIR"
expect_out "ixia-local status" \
  "memcached +running.*ixia-devkafka +running.*ixia-replication-sink +running.*ixia-indexer +running.*ixia-query-api +running"

# memcached answers on the advertised port.
mc_port=${IXIA_MEMCACHED##*:}
# (The braces keep 2>/dev/null from applying to the rest of the script.)
if { exec 3<>"/dev/tcp/127.0.0.1/$mc_port"; } 2>/dev/null; then
  printf 'version\r\n' >&3
  read -r -t 5 reply <&3 || reply=""
  exec 3>&-
else
  reply=""
fi
[[ $reply == VERSION* ]] && pass "memcached answers at IXIA_MEMCACHED" ||
  fail "memcached answers at IXIA_MEMCACHED" "reply: '$reply'"

# ixia-devkafka's control port answers; the sink accepts connections.
if { exec 3<>"/dev/tcp/127.0.0.1/${IXIA_KAFKA_CONTROL##*:}"; } 2>/dev/null; then
  printf 'bootstrap\n' >&3
  read -r -t 5 reply <&3 || reply=""
  exec 3>&-
else
  reply=""
fi
[ "$reply" = "ok $IXIA_KAFKA" ] && pass "devkafka control port answers at IXIA_KAFKA_CONTROL" ||
  fail "devkafka control port answers at IXIA_KAFKA_CONTROL" "reply: '$reply'"
if { exec 3<>"/dev/tcp/127.0.0.1/${IXIA_SINK##*:}"; } 2>/dev/null; then
  exec 3>&-
  pass "sink accepts connections at IXIA_SINK"
else
  fail "sink accepts connections at IXIA_SINK"
fi

# --- usage and connection errors --------------------------------------------

run "$IXIA" --help
expect_out "ixia --help lists the commands" "put NS TABLE KEY.*schema apply.*load NS TABLE"
run "$IXIA" help
expect_out "ixia help" "schema show NS TABLE"
run "$IXIA" put shop
expect_rc "wrong argument count is a usage error" 2
run "$IXIA" frobnicate
expect_rc "unknown command is a usage error" 2
run "$IXIA" --api 127.0.0.1:1 stats
if [ $rc -eq 4 ] && [[ $err == "ixia: UNAVAILABLE: "* ]]; then
  pass "unreachable API exits 4"
else
  fail "unreachable API exits 4" "$(last)"
fi
run "$IXIA" config-doc
expect_out "config-doc prints the reference" "^# Configuration reference"

# --- schema ------------------------------------------------------------------

cat >"$WORK/schema.json" <<'EOF'
{"namespace": "shop", "table": "products", "ttl_seconds": 0, "cache_ttl_seconds": 300,
 "indexes": [{"field": "category", "type": "keyword"}, {"field": "price", "type": "double"},
             {"field": "title", "type": "text"}, {"field": "stock", "type": "long"}]}
EOF
run "$IXIA" schema apply "$WORK/schema.json"
expect_out "schema apply prints the version" '^\{"version":[0-9]+\}$'
run "$IXIA" schema show shop products
if [ $rc -eq 0 ] && is_json "$out" && [[ $out == *'"price"'* ]] && [[ $out == *'"double"'* ]]; then
  pass "schema show"
else
  fail "schema show" "$(last)"
fi

# --- put / get / upsert / delete ---------------------------------------------

doc='{"title":"Red mug","price":9.5,"category":"mugs","stock":3}'
run "$IXIA" put shop products p1 "$doc"
expect_out "put prints the version" '^\{"version":[0-9]+\}$'
v1=$(json_field "$out" version)

run "$IXIA" get shop products p1
if [ $rc -eq 0 ] && [ "$(json_keys "$out")" = "category,price,stock,title" ] &&
  [ "$(json_field "$out" title)" = "Red mug" ] && [ "$(json_field "$out" price)" = "9.5" ]; then
  pass "get returns the document"
else
  fail "get returns the document" "$(last)"
fi

run "$IXIA" get shop products p1 --fields title,price
if [ $rc -eq 0 ] && [ "$(json_keys "$out")" = "price,title" ]; then
  pass "get --fields returns the subset"
else
  fail "get --fields returns the subset" "$(last)"
fi

run "$IXIA" get shop products no-such-key
if [ $rc -eq 3 ] && [[ $err == "ixia: NOT_FOUND: "* ]] && [ -z "$out" ]; then
  pass "get of a missing key exits 3"
else
  fail "get of a missing key exits 3" "$(last)"
fi

run "$IXIA" put shop products p1 "$doc" --expect-version 999999999
if [ $rc -eq 1 ] && [[ $err == "ixia: CONFLICT: "* ]]; then
  pass "put --expect-version with a stale version is a conflict"
else
  fail "put --expect-version with a stale version is a conflict" "$(last)"
fi

run "$IXIA" upsert shop products p1 '{"stock":7}' --expect-version "$v1"
expect_out "upsert --expect-version with the current version" '^\{"version":[0-9]+\}$'
run "$IXIA" get shop products p1
if [ "$(json_field "$out" stock)" = 7 ] && [ "$(json_field "$out" title)" = "Red mug" ]; then
  pass "upsert merged top-level fields"
else
  fail "upsert merged top-level fields" "$(last)"
fi

run "$IXIA" delete shop products p1
expect_out "delete prints the version" '^\{"version":[0-9]+\}$'
run "$IXIA" get shop products p1
expect_rc "get after delete exits 3" 3

echo '{"title":"Blue bowl","price":4.25,"category":"bowls"}' >"$WORK/p2.json"
STDIN=$WORK/p2.json run "$IXIA" put shop products p2 -
expect_out "put - reads the document from stdin" '^\{"version":[0-9]+\}$'
run "$IXIA" get shop products p2
[ "$(json_field "$out" title)" = "Blue bowl" ] && pass "document put from stdin is stored" ||
  fail "document put from stdin is stored" "$(last)"

# --- refused writes ------------------------------------------------------------

run "$IXIA" put shop products p3 '{"title":"x","price":"cheap"}'
if [ $rc -eq 6 ] && [[ $err == "ixia: TYPE_MISMATCH: "* ]] && [[ $err == *price* ]]; then
  pass "wrong-typed field refused (exit 6, bad input), naming the field"
else
  fail "wrong-typed field refused (exit 6, bad input), naming the field" "$(last)"
fi
run "$IXIA" get shop products p3
expect_rc "refused document was not stored" 3

run "$IXIA" put shop no_such_table k1 '{"a":1}'
if [ $rc -ne 0 ] && [[ $err == "ixia: "* ]] && [[ $err == *no_such_table* ]]; then
  pass "put to an unknown table refused"
else
  fail "put to an unknown table refused" "$(last)"
fi

run "$IXIA" put shop products p4 '{"title": '
if [ $rc -eq 6 ] && [[ $err == "ixia: INVALID_ARGUMENT: "* ]]; then
  pass "malformed JSON refused (exit 6)"
else
  fail "malformed JSON refused (exit 6)" "$(last)"
fi

# --- bulk load ----------------------------------------------------------------

# 2000 lines; line 1000 is not JSON.
awk 'BEGIN {
  for (i = 1; i <= 2000; i++) {
    if (i == 1000) print "{\"id\": \"k1000\", \"title\": broken";
    else printf "{\"id\":\"k%d\",\"title\":\"item %d\",\"category\":\"cat%02d\",\"price\":%d.5}\n", i, i, i % 10, i;
  }
}' >"$WORK/load.jsonl"
run "$IXIA" load shop products "$WORK/load.jsonl" --key-field id --conns 4 --batch 50
if [ $rc -eq 1 ] && [[ $out =~ ^loaded\ 1999\ documents\ in\ [0-9.]+\ s\ \([0-9]+\ docs/s\) ]]; then
  pass "load: summary line counts 1999 documents, exit 1 for the bad line"
else
  fail "load: summary line counts 1999 documents, exit 1 for the bad line" "$(last)"
fi
[[ $err == *"line 1000"* ]] && pass "load: bad line reported with its number" ||
  fail "load: bad line reported with its number" "$(last)"

ok=1
for k in 1 999 1001 1500 2000; do
  run "$IXIA" get shop products "k$k"
  if [ $rc -ne 0 ] || [ "$(json_field "$out" title)" != "item $k" ]; then
    ok=0
    fail "load: get k$k" "$(last)"
  fi
done
[ $ok = 1 ] && pass "load: loaded documents are readable"
run "$IXIA" get shop products k1000
expect_rc "load: the bad line was not stored" 3

head -n 10 "$WORK/load.jsonl" | sed 's/"item /"again /' >"$WORK/small.jsonl"
STDIN=$WORK/small.jsonl run "$IXIA" load shop products - --key-field id
expect_out "load - reads stdin and exits 0" '^loaded 10 documents in'
run "$IXIA" get shop products k10
[ "$(json_field "$out" title)" = "again 10" ] && pass "load from stdin replaced documents" ||
  fail "load from stdin replaced documents" "$(last)"

echo '{"title":"no id here"}' >"$WORK/nokey.jsonl"
run "$IXIA" load shop products "$WORK/nokey.jsonl" --key-field id
if [ $rc -eq 1 ] && [[ $err == *"line 1"* ]] && [[ $err == *id* ]]; then
  pass "load: a line without the key field is reported"
else
  fail "load: a line without the key field is reported" "$(last)"
fi

# --- query and recovery --------------------------------------------------------

# min_version: the query waits until the index holds the load (read-your-writes).
vlast=$(json_field "$("$IXIA" put shop products marker '{"category":"cat03","price":5000.5}')" version)
run "$IXIA" query "{\"namespace\":\"shop\",\"table\":\"products\",\"filter\":{\"term\":{\"category\":\"cat03\"}},\"limit\":5,\"fields\":[\"price\"],\"min_version\":$vlast,\"aggs\":{\"n\":{\"count\":{}},\"top\":{\"max\":\"price\"}}}"
# k3, k13, ..., k1993 (200 documents) plus the marker.
if [ $rc -eq 0 ] && is_json "$out" && [ "$(json_field "$out" total)" = "201" ] &&
  [[ $out == *'"top":{"value":5000.5}'* ]] && [[ $out == *'"next":"'* ]]; then
  pass "query: total, aggregation and a next cursor"
else
  fail "query: total, aggregation and a next cursor" "$(last)"
fi
echo '{"namespace":"shop","table":"products","filter":{"range":{"price":{"gte":"cheap"}}}}' >"$WORK/q.json"
STDIN=$WORK/q.json run "$IXIA" query -
if [ $rc -eq 6 ] && [[ $err == *INVALID_ARGUMENT* ]] && [[ $err == *'filter.range.price'* ]]; then
  pass "query -: a bad query names the bad part"
else
  fail "query -: a bad query names the bad part" "$(last)"
fi

# min_version that replication cannot reach in time (the sink is stopped):
# exit 9, not 4 (the API answers).
sink_pid=$(awk '$1 == "ixia-replication-sink" {print $2}' "$DIR/pids")
kill -STOP "$sink_pid"
vnew=$(json_field "$("$IXIA" put shop products waiting '{"category":"cat03","price":1.5}')" version)
run "$IXIA" query "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":0,\"min_version\":$vnew,\"timeout_ms\":300}"
kill -CONT "$sink_pid"
if [ $rc -eq 9 ] && [[ $err == "ixia: NOT_CAUGHT_UP: "* ]]; then
  pass "query: min_version not reached in time exits 9"
else
  fail "query: min_version not reached in time exits 9" "$(last)"
fi
run "$IXIA" query "{\"namespace\":\"shop\",\"table\":\"products\",\"limit\":0,\"min_version\":$vnew}"
if [ $rc -eq 0 ] && [[ $out == *'"states":[{"shard":0,"as_of":'* ]] && [[ $out == *'"repairing":false'* ]]; then
  pass "query: each shard's as_of, stale hits and repairing state"
else
  fail "query: each shard's as_of, stale hits and repairing state" "$(last)"
fi
# --- search features through the CLI --------------------------------------------

cat >"$WORK/schema2.json" <<'EOF'
{"namespace": "shop", "table": "cli2",
 "indexes": [{"field": "title", "type": "text", "analyzer": "english", "positions": true},
             {"field": "price", "type": "double"}, {"field": "at", "type": "timestamp"},
             {"field": "v.color", "type": "keyword"}]}
EOF
run "$IXIA" schema apply "$WORK/schema2.json"
expect_out "schema apply with an analyzer and positions" '^\{"version":[0-9]+\}$'
"$IXIA" put shop cli2 a '{"title":"Red MUGS for the Café","price":12,"at":"2024-01-31T23:30:00-02:00","v":[{"color":"red"},{"color":"blue"}]}' >/dev/null
"$IXIA" put shop cli2 b '{"title":"a red mug","price":30,"at":1706745600,"v":[{"color":"green"}]}' >/dev/null
vb=$(json_field "$("$IXIA" put shop cli2 c '{"title":"mugs, red and cafe","price":30,"at":"2024-03-01T00:00:00Z"}')" version)
run "$IXIA" put shop cli2 d '{"price":1e400}'
[ $rc -eq 6 ] && [[ $err == *INVALID_ARGUMENT* ]] && [[ $err == *'price: the number is outside the range of a double'* ]] &&
  pass "put: a number outside double range is refused, naming the path" || fail "put: 1e400 refused" "$(last)"
run "$IXIA" put shop cli2 d '{"v":[{"color":5}]}'
[ $rc -eq 6 ] && [[ $err == *TYPE_MISMATCH* ]] && [[ $err == *'v[0].color is an integer'* ]] &&
  pass "put: a declared field inside an array of objects is type-checked" || fail "put: v[0].color refused" "$(last)"
q2='"namespace":"shop","table":"cli2"'
run "$IXIA" query "{$q2,\"min_version\":$vb,\"sort\":[{\"price\":\"desc\"}],\"limit\":2,\"fields\":[\"price\"]}"
# b and c tie on price 30: by key. The next page holds a.
if [ $rc -eq 0 ] && [[ $out == '{"hits":[{"key":"b",'*'"sort":[30]},{"key":"c",'* ]] && [[ $out == *'"next":"s1:'* ]]; then
  pass "query: sorted, ties by key, a sort cursor"
  next=$(json_field "$out" next)
  run "$IXIA" query "{$q2,\"sort\":[{\"price\":\"desc\"}],\"limit\":2,\"after\":\"$next\"}"
  [ $rc -eq 0 ] && [[ $out == '{"hits":[{"key":"a",'* ]] && [[ $out == *'"next":null'* ]] &&
    pass "query: the next sorted page" || fail "query: the next sorted page" "$(last)"
else
  fail "query: sorted, ties by key, a sort cursor" "$(last)"
fi
run "$IXIA" query "{$q2,\"filter\":{\"match_phrase\":{\"title\":\"red mugs\"}},\"sort\":[\"_score\"],\"fields\":[\"title\"]}"
[ $rc -eq 0 ] && [ "$(json_field "$out" total)" = "2" ] && [[ $out == *'"score":'* ]] && [[ $out != *'"key":"c"'* ]] &&
  pass "query: match_phrase with stems, scored" || fail "query: match_phrase" "$(last)"
run "$IXIA" query "{$q2,\"filter\":{\"match\":{\"title\":\"CAFÉ\"}},\"limit\":0}"
[ $rc -eq 0 ] && [ "$(json_field "$out" total)" = "1" ] && pass "query: Unicode case folding" || fail "query: CAFÉ" "$(last)"
run "$IXIA" query "{$q2,\"filter\":{\"term\":{\"v.color\":\"blue\"}},\"limit\":0,\"allow_partial\":true}"
[ $rc -eq 0 ] && [ "$(json_field "$out" total)" = "1" ] && [[ $out == *'"shards":{"total":1,"ok":1,"failed":[],"states":[{"shard":0,'* ]] &&
  pass "query: arrays of objects, shards in the answer" || fail "query: v.color" "$(last)"
run "$IXIA" query "{$q2,\"limit\":0,\"aggs\":{\"st\":{\"stats\":\"price\"},\"m\":{\"date_histogram\":{\"field\":\"at\",\"calendar_interval\":\"month\"}},\"r\":{\"range\":{\"field\":\"price\",\"ranges\":[{\"key\":\"cheap\",\"to\":20},{\"from\":20}]}},\"top\":{\"top_hits\":{\"size\":1,\"sort\":[{\"price\":\"asc\"}],\"fields\":[\"title\"]}}}}"
# a (2024-02-01T01:30Z) and b in February, c in March.
if [ $rc -eq 0 ] && [[ $out == *'"st":{"count":3,"min":12,"max":30,"avg":24,"sum":72}'* ]] &&
  [[ $out == *'{"key":1706745600,"key_as_string":"2024-02-01T00:00:00Z","count":2}'* ]] &&
  [[ $out == *'"key_as_string":"2024-03-01T00:00:00Z","count":1}'* ]] &&
  [[ $out == *'{"key":"cheap","to":20,"count":1}'* ]] && [[ $out == *'"doc":{"title":"Red MUGS for the Café"}'* ]]; then
  pass "query: stats, date_histogram, range and top_hits"
else
  fail "query: stats, date_histogram, range and top_hits" "$(last)"
fi

# ixia-local has the API call its shard over the shard's Unix-domain socket
# (TCP when the socket's path would be too long).
shard_addr="unix:$DIR/indexer.sock"
[ ${#shard_addr} -lt 113 ] || shard_addr=$IXIA_INDEXER
run "$IXIA" shards
if [ $rc -eq 0 ] && is_json "$out" && [[ $out == *'"partition_count"'* ]] &&
  [[ $out == *"\"$shard_addr\""* ]]; then
  pass "shards prints each shard's status"
else
  fail "shards prints each shard's status" "$(last)"
fi

run "$BIN/ixia-recovery" backfill --help
[ $rc -eq 0 ] && [[ $out == *NAMESPACE* ]] && pass "ixia-recovery backfill --help" ||
  fail "ixia-recovery backfill --help" "$(last)"
all=$(json_field "$("$IXIA" query '{"namespace":"shop","table":"products","limit":0}')" total)
run "$BIN/ixia-recovery" backfill shop products --quiet
if [ $rc -eq 0 ] && is_json "$out" && [ -n "$all" ] && [ "$(json_field "$out" documents)" = "$all" ]; then
  pass "ixia-recovery backfill finds the stack through local.env"
else
  fail "ixia-recovery backfill finds the stack through local.env" "$(last)"
fi
run "$BIN/ixia-recovery" frobnicate
expect_rc "ixia-recovery: unknown subcommand is a usage error" 2

# --- a shard down, ixia-local restart ------------------------------------------

idx_pid=$(awk '$1 == "ixia-indexer" {print $2}' "$DIR/pids")
kill -9 "$idx_pid"
run "$IXIA" query '{"namespace":"shop","table":"products","limit":0}'
if [ $rc -eq 7 ] && [[ $err == "ixia: SHARD_UNAVAILABLE: "* ]]; then
  pass "query with the shard down exits 7 (not 4: the API answers)"
else
  fail "query with the shard down exits 7 (not 4: the API answers)" "$(last)"
fi
run "$LOCAL" restart ixia-indexer --dir "$DIR"
new_pid=$(awk '$1 == "ixia-indexer" {print $2}' "$DIR/pids")
if [ $rc -eq 0 ] && [ -n "$new_pid" ] && [ "$new_pid" != "$idx_pid" ] && grep -q "^IXIA_INDEXER=$IXIA_INDEXER\$" "$DIR/local.env"; then
  pass "ixia-local restart ixia-indexer: same port, the new process recorded"
else
  fail "ixia-local restart ixia-indexer: same port, the new process recorded" "$(last)" "pids: $(cat "$DIR/pids")"
fi
# The killed one is no longer expected alive; the new one is, until down.
kept=""
for ps in $pids_started; do [ "${ps%%:*}" = "$idx_pid" ] || kept="$kept $ps"; done
pids_started="$kept $new_pid:$(awk '{print $22}' "/proc/$new_pid/stat" 2>/dev/null)"
run "$LOCAL" status --dir "$DIR"
[ $rc -eq 0 ] && [[ $out == *"ixia-indexer"*"running"*"pid $new_pid"* ]] &&
  pass "status shows the restarted indexer running" || fail "status shows the restarted indexer running" "$(last)"
run "$IXIA" query '{"namespace":"shop","table":"products","limit":0}'
expect_out "query answers again after the restart" '"total":'
run "$LOCAL" restart no-such --dir "$DIR"
expect_rc "ixia-local restart of an unknown daemon is a usage error" 2

# --- stats ------------------------------------------------------------------

run "$IXIA" stats
if [ $rc -eq 0 ] && is_json "$out" && [[ $out == *'"cache_hits"'* ]] &&
  [[ $out == *'"cache_misses"'* ]]; then
  pass "stats is JSON with cache_hits and cache_misses"
else
  fail "stats is JSON with cache_hits and cache_misses" "$(last)"
fi

# --- down ---------------------------------------------------------------------

for ps in $pids_started; do
  alive "${ps%%:*}" "${ps##*:}" ||
    fail "process ${ps%%:*} ($(awk -v p="${ps%%:*}" '$2 == p {print $1}' "$DIR/pids")) died during the test"
done
[ $failed -gt 0 ] && show_logs
run "$LOCAL" down --dir "$DIR"
stack_down=1
expect_rc "ixia-local down" 0
left=""
for ps in $pids_started; do
  alive "${ps%%:*}" "${ps##*:}" && left="$left ${ps%%:*}"
done
[ -z "$left" ] && pass "down stopped every started process" ||
  fail "down stopped every started process" "still running:$left"
names=$(awk '!/^#/ && NF == 3 {print $1}' "$WORK/pids.before" | paste -sd' ' -)
[ "$names" = "memcached ixia-devkafka ixia-replication-sink ixia-indexer ixia-query-api" ] && [ -z "$left" ] &&
  pass "down stopped all five: memcached, devkafka, sink, indexer, query-api" ||
  fail "down stopped all five: memcached, devkafka, sink, indexer, query-api" "recorded: $names" \
    "still running:$left"
leftover=""
for f in pids local.env api.port sink.port indexer.port kafka.bootstrap kafka.control; do
  [ -e "$DIR/$f" ] && leftover="$leftover $f"
done
[ -z "$leftover" ] && pass "down removed pids, local.env and the address files" ||
  fail "down removed pids, local.env and the address files" "left:$leftover"
run "$LOCAL" status --dir "$DIR"
expect_rc "status after down reports nothing running" 1

finish
