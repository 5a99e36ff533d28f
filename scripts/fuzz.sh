#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for SECONDS seconds each.
# Usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]   (make fuzz SECONDS=N)
# New inputs go to BUILD_DIR/corpus/<target> (the repository corpus is read
# as a second folder, never written); crashes, leaks and timeouts to
# BUILD_DIR/crashes/<target>/. Prints per target: executions per second,
# coverage (libFuzzer's cov and ft), corpus size, findings. Exits 1 when any
# target found something.
set -uo pipefail
build=${1:?usage: fuzz.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: fuzz.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
cd "$(dirname "$0")/.."
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(ls tests/fuzz/corpus))
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-fast_unwind_on_malloc=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
printf '%-14s %10s %8s %8s %8s  %s\n' target exec/s cov ft corpus result
for t in "${targets[@]}"; do
  bin=$build/bin/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz.sh: $bin is not built (make fuzz-build)" >&2; exit 2; }
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  log=$build/crashes/$t/fuzz.log
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/crashes/$t/" \
    "$build/corpus/$t" "tests/fuzz/corpus/$t" > "$log" 2>&1
  rc=$?
  final=$(grep -E '^#[0-9]+[[:space:]]+(DONE|NEW|REDUCE|pulse|INITED)' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$final")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$final")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$final")
  eps=$(sed -n 's/^stat::average_exec_per_sec:[[:space:]]*\([0-9]*\).*/\1/p' "$log")
  found=$(ls "$build/crashes/$t" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' || true)
  if [ $rc -ne 0 ] || [ -n "$found" ]; then
    result="FOUND: $(echo $found | tr ' ' ',') (log: $log)"
    failed=1
  else
    result=ok
  fi
  printf '%-14s %10s %8s %8s %8s  %s\n' "$t" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
done
exit $failed
