#!/bin/sh
# Runs an integration test program of an AddressSanitizer build so that a report from any process
# of the run fails it: the lakecache servers and mounts the test starts write their output to logs
# the test deletes, and a daemon's exit status is never looked at, so a leak found at its exit
# would go unseen. Every instrumented process of the run writes its reports to a folder of its own
# instead (the runtime's log_path), and they are printed here afterwards.
# Usage: sanitizer_reports.sh PROGRAM [ARGS...]
set -u
dir=$(mktemp -d "${TMPDIR:-/tmp}/lakecache-sanitizer.XXXXXX") || exit 1
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$dir/report"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$dir/report"
"$@"
status=$?
reports=0
for report in "$dir"/report.*; do
  [ -e "$report" ] || continue
  reports=$((reports + 1))
  echo "== sanitizer report of pid ${report##*.}:" >&2
  cat "$report" >&2
done
rm -rf "$dir"
if [ "$reports" -gt 0 ]; then
  echo "sanitizer_reports: $reports process(es) reported an error (above)" >&2
  [ "$status" -eq 0 ] && status=1
fi
exit "$status"
