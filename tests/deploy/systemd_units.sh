#!/usr/bin/env bash
# The bare-metal units (deploy/systemd): systemd-analyze verify finds nothing to say about any of
# them (an unknown key, a missing binary, a bad directive all print a line), and every ExecStart
# command line parses with this build's lakecache (flags and their values; the config and master
# are placeholders, so the command stops at the config, never at a flag). A unit with an unknown
# key must fail the same check.
# Usage: systemd_units.sh SOURCE_DIR LAKECACHE_BINARY
set -euo pipefail
src=$1 bin=$(realpath "$2")
units=$src/deploy/systemd
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# systemd-analyze checks the binaries named: point the units at this build.
prepare() {
  sed "s|/usr/local/bin/lakecache|$bin|g" "$1" > "$work/$(basename "$1")"
}

verify() {  # prints what systemd-analyze says; fails when it says anything
  local out
  out=$(cd "$work" && SYSTEMD_LOG_COLOR=0 systemd-analyze verify "./$1" 2>&1 | grep -v '^$' || true)
  [[ -z $out ]] || { printf '%s\n' "$out"; return 1; }
}

# The environment file's values, as systemd would give them to ExecStart.
set -a
# shellcheck disable=SC1091
. "$units/lakecache.env"
set +a
LAKECACHE_MOUNTPOINT=$work/mnt  # an existing folder: the mount checks it before its config
mkdir "$LAKECACHE_MOUNTPOINT"

for unit in "$units"/*.service; do
  name=$(basename "$unit")
  prepare "$unit"
  if ! verify "$name"; then echo "FAIL: $name: systemd-analyze verify complained" >&2; fail=1; fi
  # ExecStart with its continuation lines joined and ${VAR} expanded from lakecache.env.
  cmd=$(awk '/^ExecStart=/{line=$0; while (line ~ /\\$/) {sub(/\\$/, "", line); getline more; line = line more} print substr(line, 11)}' "$unit")
  cmd=$(eval "printf '%s' \"$cmd\"")
  cmd=${cmd//\/etc\/lakecache\/config.yaml/$work/none.yaml}
  out=$(timeout 10 bash -c "${cmd//\/usr\/local\/bin\/lakecache/$bin}" 2>&1 </dev/null) || true
  if [[ $out != *"$work/none.yaml: cannot open"* ]]; then
    echo "FAIL: $name: ExecStart did not get as far as its config: $out" >&2
    fail=1
  else
    echo "ok: $name (verify clean; ExecStart flags parse)"
  fi
done

# The check can fail: an unknown key is reported.
sed 's/^Restart=on-failure/Restrat=on-failure/' "$units/lakecache-worker.service" > "$work/broken.service"
sed -i "s|/usr/local/bin/lakecache|$bin|g" "$work/broken.service"
if verify broken.service >/dev/null; then
  echo "FAIL: a unit with an unknown key passed systemd-analyze verify" >&2
  fail=1
else
  echo "ok: a unit with an unknown key is refused"
fi
exit $fail
