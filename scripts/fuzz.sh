#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets of fuzz/ with clang in build-fuzz (our code instrumented
# for coverage and with AddressSanitizer + UndefinedBehaviorSanitizer) and runs each (JOBS at a time) for
# FUZZ_SECONDS (default 600), starting from a copy of its seed corpus (fuzz/corpus/<target>/), so
# the tree is never written. Prints one row per target; exits non-zero when any target crashed,
# leaked, timed out or ran out of memory, naming the reproducer and the command that replays it.
#
#   FUZZ_SECONDS=30 scripts/fuzz.sh               # CI's short run
#   FUZZ_TARGETS="s3_xml config" scripts/fuzz.sh  # some targets only
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-600}
JOBS=${JOBS:-2}
ROOT=$(pwd)

scripts/apt-install-missing.sh fuzz clang libclang-rt-14-dev

# -O1 and line tables only: with the sanitizers, -O2 -g compiles far slower on small machines, and
# line tables are all a stack trace needs. No NDEBUG: a fuzz build keeps every check.
# FUZZ_REUSE_BUILD=1: FUZZ_BUILD_DIR is a build configured with LAKECACHE_FUZZ already (make
# test-asan's): its flags are kept.
if [ "${FUZZ_REUSE_BUILD:-0}" != 1 ]; then
  CC=clang CXX=clang++ scripts/configure.sh "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DLAKECACHE_FUZZ=ON \
    -DLAKECACHE_BUILD_TESTS=OFF
fi
nice -n 10 cmake --build "$BUILD_DIR" -j"$JOBS" --target fuzzers

targets=${FUZZ_TARGETS:-$(cd fuzz && ls ./*_fuzz.cc | sed 's|^\./||; s|_fuzz\.cc$||')}
work=$(mktemp -d -t lakecache-fuzz.XXXXXX)
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run_target TARGET: fuzzes TARGET in $work/TARGET; leaves its table row in row, and when it
# crashed, what to say about it in failures.
run_target() {
  local target=$1 bin dir args start rc=0 seconds execs rate cov artifacts crashes a
  bin=$ROOT/$BUILD_DIR/fuzz/${target}_fuzz
  dir=$work/$target
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
  [ -d "fuzz/corpus/$target" ] && cp -r "fuzz/corpus/$target/." "$dir/corpus/"
  args=(-max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$dir/artifacts/")
  [ -f "fuzz/$target.dict" ] && args+=(-dict="$ROOT/fuzz/$target.dict")
  echo "fuzz: $target for ${FUZZ_SECONDS}s (log: $dir/log)"
  start=$(date +%s)
  # Scratch files of the targets (a block file, a cache directory) go to $dir/tmp.
  TMPDIR=$dir/tmp nice -n 10 "$bin" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  seconds=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  cov=$({ grep -a -o ' cov: [0-9]*' "$dir/log" || true; } | tail -1 | tr -dc '0-9')
  artifacts=$(find "$dir/artifacts" -type f | sort)
  crashes=$(printf '%s' "$artifacts" | grep -c . || true)
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi  # died without an artifact
  printf '%-14s %8s %12s %9s %7s %8s\n' "$target" "$seconds" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "$crashes" >"$dir/row"
  if [ "$crashes" -gt 0 ]; then
    {
      echo "$target: exit $rc, log $dir/log"
      for a in $artifacts; do printf '  reproducer %s\n  replay: %s %s\n' "$a" "$bin" "$a"; done
      grep -a -m1 -E 'ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|libFuzzer)|runtime error' \
        "$dir/log" | sed 's/^/  /' || true
    } >"$dir/failures"
  fi
}

# The targets run JOBS at a time: each is one process that keeps one core busy.
running=0
for target in $targets; do
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
wait

rows=()
failures=()
for target in $targets; do
  rows+=("$(cat "$work/$target/row")")
  [ -f "$work/$target/failures" ] && mapfile -t -O "${#failures[@]}" failures <"$work/$target/failures"
done

echo
printf '%-14s %8s %12s %9s %7s %8s\n' target seconds executions exec/s cov crashes
printf '%s\n' "${rows[@]}"
if [ "${#failures[@]}" -gt 0 ]; then
  echo
  echo "fuzz: FAILED (kept $work)"
  printf '%s\n' "${failures[@]}"
  exit 1
fi
rm -rf "$work"
echo "fuzz: OK, no crashes"
