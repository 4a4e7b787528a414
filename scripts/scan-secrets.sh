#!/bin/sh
# Fails when a secret the test suite used shows up in what it printed: the role tokens of every
# credentials folder the tests made (they start with "lctok_") and the object-store secrets of
# the test servers that have distinctive ones (Swift's "lcsecret-..."). s3rver's fixed secret is
# its key id, "S3RVER", which is not a secret, so it cannot be told apart and is not scanned.
# Usage: scan-secrets.sh FILE... (default: the last ctest run's log).
set -eu
[ "$#" -gt 0 ] || set -- build/Testing/Temporary/LastTest.log
status=0
for f in "$@"; do
  if [ ! -f "$f" ]; then
    echo "scan-secrets: $f: no such file" >&2
    status=2
    continue
  fi
  hits=$(grep -c -E 'lctok_[0-9a-f]{8}|lcsecret-[a-z]+-[0-9a-f]{6}' "$f" || true)
  if [ "$hits" != "0" ]; then
    # Where, never what: the lines are not printed, only their numbers.
    lines=$(grep -n -E 'lctok_[0-9a-f]{8}|lcsecret-[a-z]+-[0-9a-f]{6}' "$f" | cut -d: -f1 | head -20 | tr '\n' ' ')
    echo "scan-secrets: $f: $hits line(s) show a secret (lines $lines)" >&2
    status=1
  fi
done
[ "$status" -ne 0 ] || echo "scan-secrets: no secret in $*"
exit "$status"
