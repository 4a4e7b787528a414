#!/usr/bin/env bash
# Runs the whole CTest suite of a build folder ROUNDS times in a row (3 by default) while one CPU
# hog per core competes with it at the same priority, and says how each round ended. A test that
# passes idle and fails here waits on time instead of on an event: a defect of the test.
#
#   scripts/suite-under-load.sh [BUILD_DIR] [ROUNDS] [-- CTEST_ARGS...]
#
# The hogs (sha256sum of /dev/zero) are this script's children and are killed when it ends, however
# it ends. Exit status: 0 when every round passed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
ROUNDS=${2:-3}
shift $(($# > 2 ? 2 : $#))
[ "${1:-}" = "--" ] && shift
CTEST_JOBS=${CTEST_JOBS:-2}

hogs=()
stop_hogs() {
  if [ ${#hogs[@]} -gt 0 ]; then
    kill "${hogs[@]}" 2>/dev/null || true
    wait "${hogs[@]}" 2>/dev/null || true
  fi
}
trap stop_hogs EXIT
for ((i = 0; i < $(nproc); i++)); do
  sha256sum /dev/zero >/dev/null &
  hogs+=($!)
done

failed=0
for ((round = 1; round <= ROUNDS; round++)); do
  log=$BUILD_DIR/Testing/suite-under-load-$round.log
  start=$(date +%s)
  rc=0
  (cd "$BUILD_DIR" && ctest --output-on-failure -j"$CTEST_JOBS" "$@") >"$log" 2>&1 || rc=$?
  summary=$(grep -E '^[0-9]+% tests passed' "$log" || echo "no summary (exit $rc)")
  echo "round $round: $summary in $(($(date +%s) - start)) s, load $(cut -d' ' -f1-3 /proc/loadavg) ($log)"
  if [ "$rc" -ne 0 ]; then
    failed=$((failed + 1))
    sed -n '/The following tests FAILED/,$p' "$log"
  fi
done
echo "suite-under-load: $((ROUNDS - failed)) of $ROUNDS rounds passed with $(nproc) CPU hogs"
[ "$failed" -eq 0 ]
