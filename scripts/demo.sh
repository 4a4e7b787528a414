#!/usr/bin/env bash
# The demo: a local S3 server (s3rver) holding a generated sample dataset (TFRecord shards and small
# JPEG-sized files), mounted with `lakecache mount`, read cold, then warm after a remount on the same
# cache dir with the kernel page cache dropped; every file is checked against its SHA-256 both times.
# Usage: scripts/demo.sh [path/to/lakecache]. Run as root (or with sudo) to drop the page cache.
# Leaves nothing mounted or running, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s.%N)
LAKECACHE=$(realpath "${1:-build/lakecache}")
WORK=$(mktemp -d /tmp/lakecache-demo.XXXXXX)
MNT=$WORK/mnt
BUCKET=demo
S3RVER_PID="" HOLDER_PID="" SERVER_PID=""  # the last two: the mount's (find_mount_pids)

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }
elapsed() { echo "$(date +%s.%N) - $1" | bc -l; }

# Sets HOLDER_PID and SERVER_PID, the mount's two processes: `mount --background` forks the holder,
# which keeps the FUSE connection and starts the server (whose argv adds --holder SOCKET); the server
# serves, and at unmount logs its cache stats and frees the cache dir. Both have $MNT in their argv.
find_mount_pids() {
  local f pid argv
  HOLDER_PID="" SERVER_PID=""
  for f in $(grep -lzxF -- "$MNT" /proc/[0-9]*/cmdline 2>/dev/null); do
    pid=${f#/proc/}
    pid=${pid%/cmdline}
    mapfile -d '' -t argv 2>/dev/null <"$f" || continue
    [ "${argv[0]:-}" = "$LAKECACHE" ] || continue
    if [[ " ${argv[*]} " == *" --holder "* ]]; then SERVER_PID=$pid; else HOLDER_PID=$pid; fi
  done
}

# Whether a process runs: a zombie has exited (the holder is reaped by whoever adopted it, the server
# by the holder; not by us).
running() { local s; s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1); [ -n "$s" ] && [ "$s" != Z ]; }

# Unmounts $MNT and waits for the server to exit (it writes its cache stats, then frees the cache
# dir), then for the holder: it exits after its server, but a server outlives a holder that died.
# Whichever is left after 30 s is stopped by its pid, the holder first (it would restart a killed
# server, and stops its own on SIGTERM).
unmount() {
  local pid
  if mountpoint -q "$MNT"; then
    for _ in 1 2 3 4 5; do "$LAKECACHE" umount "$MNT" 2>/dev/null && break; sleep 1; done
    mountpoint -q "$MNT" && { fusermount3 -u -z "$MNT" 2>/dev/null || as_root umount -l "$MNT"; }
  fi
  for pid in $SERVER_PID $HOLDER_PID; do
    for _ in $(seq 300); do running "$pid" || break; sleep 0.1; done
    running "$pid" && break
  done
  for pid in $HOLDER_PID $SERVER_PID; do
    running "$pid" || continue
    echo "demo: mount process $pid did not exit 30 s after unmount; stopping it" >&2
    kill "$pid" 2>/dev/null; sleep 1; running "$pid" && kill -9 "$pid" 2>/dev/null
  done
  HOLDER_PID="" SERVER_PID=""
  return 0
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  unmount
  [ -n "$S3RVER_PID" ] && kill "$S3RVER_PID" 2>/dev/null && wait "$S3RVER_PID" 2>/dev/null
  if mountpoint -q "$MNT"; then
    echo "demo: $MNT is still mounted; $WORK left in place" >&2
  else
    rm -rf --one-file-system "$WORK"
  fi
  printf 'demo: cleaned up (nothing left mounted or running); %.0f s in all\n' "$(elapsed "$T0")"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
ENDPOINT="http://127.0.0.1:$PORT"

echo "== starting s3rver on $ENDPOINT (request log: every GET it serves is counted)"
mkdir -p "$WORK/s3" "$WORK/data" "$WORK/cache" "$MNT"
node --openssl-legacy-provider node_modules/s3rver/bin/s3rver.js -d "$WORK/s3" -a 127.0.0.1 \
  -p "$PORT" --configure-bucket "$BUCKET" >"$WORK/s3rver.log" 2>&1 &
S3RVER_PID=$!
for _ in $(seq 100); do curl -s -o /dev/null "$ENDPOINT/" && break; sleep 0.1; done
curl -s -o /dev/null "$ENDPOINT/" || { echo "demo: s3rver did not start:"; cat "$WORK/s3rver.log"; exit 1; }

echo "== generating the sample dataset (deterministic): scripts/gen_dataset.py"
python3 scripts/gen_dataset.py "$WORK/data" "$WORK/manifest.sha256"
NFILES=$(wc -l <"$WORK/manifest.sha256")
NBYTES=$(cd "$WORK/data" && cut -c67- "$WORK/manifest.sha256" | tr '\n' '\0' | du -cb --files0-from=- |
  tail -n1 | cut -f1)

echo "== uploading $NFILES objects ($((NBYTES >> 20)) MiB)"
t=$(date +%s.%N)
(cd "$WORK/data" && cut -c67- "$WORK/manifest.sha256" | while read -r f; do
  printf 'url = "%s/%s/%s"\nupload-file = "%s"\noutput = "/dev/null"\n' "$ENDPOINT" "$BUCKET" "$f" "$f"
done) >"$WORK/upload.cfg"
(cd "$WORK/data" && curl -sS --fail --parallel --parallel-max 16 --aws-sigv4 "aws:amz:us-east-1:s3" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --user S3RVER:S3RVER -K "$WORK/upload.cfg") \
  2>"$WORK/upload.err" || { echo "demo: upload failed:"; tr '\r' '\n' <"$WORK/upload.err" | awk '/curl:/ && ++n <= 10'; exit 1; }
rm -rf "$WORK/data"  # from here on the bucket is the only copy; the manifest has the checksums
printf 'uploaded in %.1f s\n' "$(elapsed "$t")"

export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
mount_bucket() {  # mount_bucket LOGFILE
  "$LAKECACHE" mount "s3://$BUCKET" "$MNT" --endpoint "$ENDPOINT" --path-style \
    --cache-dir "$WORK/cache" --cache-size 2GiB --mem-cache 512MiB \
    --log-file "$1" --log-level info --background
  find_mount_pids  # `mount --background` printed "mounted ... (log: ...)"
  echo "its holder pid ${HOLDER_PID:-?}, server pid ${SERVER_PID:-?}; cache dir $WORK/cache"
}

drop_page_cache() {
  sync
  if as_root sh -c 'echo 3 > /proc/sys/vm/drop_caches' 2>/dev/null; then
    echo "kernel page cache dropped"
  else
    echo "note: could not drop the kernel page cache (needs root)"
  fi
}

# Object requests s3rver has logged so far: `info: KEY STATUS TIME SIZE` lines, e.g.
# `info: train/x.tfrecord 206 12ms 4mb`; listings (`info: ?list-type=2...`) are left out. After the
# upload the mount is the only client, and it only reads: these are its GETs.
store_gets() {
  sed 's/\x1b\[[0-9;]*m//g' "$WORK/s3rver.log" | grep -cE '^info: [^?[:space:]]+ [0-9]{3} [0-9.]+m?s ' || true
}

# read_all PHASE: lists the mount, reads every file with 4 parallel readers, checks each SHA-256.
declare -A FILES MIB MBPS FPS GETS BAD
read_all() {
  local phase=$1 t secs gets0 bytes
  gets0=$(store_gets)
  t=$(date +%s.%N)
  (
    cd "$MNT"
    find . -type f | sed 's|^\./||' | sort >"$WORK/$phase.files"
    # Shards one per reader, small files 32 per sha256sum: 4 streams busy in both parts.
    grep '\.tfrecord$' "$WORK/$phase.files" | xargs -r -d '\n' -P 4 -n 1 sha256sum || true
    grep -v '\.tfrecord$' "$WORK/$phase.files" | xargs -r -d '\n' -P 4 -n 32 sha256sum || true
  ) >"$WORK/$phase.sums" 2>"$WORK/$phase.errors"
  secs=$(elapsed "$t")
  bytes=$(cd "$MNT" && tr '\n' '\0' <"$WORK/$phase.files" | du -cb --files0-from=- | tail -n1 | cut -f1)
  FILES[$phase]=$(wc -l <"$WORK/$phase.sums")
  MIB[$phase]=$(echo "$bytes / 1048576" | bc -l)
  MBPS[$phase]=$(echo "$bytes / 1000000 / $secs" | bc -l)
  FPS[$phase]=$(echo "${FILES[$phase]} / $secs" | bc -l)
  GETS[$phase]=$(($(store_gets) - gets0))
  # Missing, extra or wrong files: manifest lines not read back exactly, and lines read but not listed.
  BAD[$phase]=$(($(sort "$WORK/manifest.sha256" | comm -23 - <(sort "$WORK/$phase.sums") | wc -l) +
    $(sort "$WORK/$phase.sums" | comm -13 <(sort "$WORK/manifest.sha256") - | wc -l)))
  printf '%s: %d files, %.1f MiB in %.1f s; %d wrong or missing\n' "$phase" "${FILES[$phase]}" \
    "${MIB[$phase]}" "$secs" "${BAD[$phase]}"
  if [ "${BAD[$phase]}" -ne 0 ]; then
    sort "$WORK/manifest.sha256" | comm -3 - <(sort "$WORK/$phase.sums") >"$WORK/$phase.diff" || true
    head -n 5 "$WORK/$phase.diff" "$WORK/$phase.errors"
  fi
}

echo "== epoch 1 (cold): mount with an empty cache dir, read and check everything"
mount_bucket "$WORK/mount-cold.log"
read_all cold
unmount

echo "== epoch 2 (warm): remount on the same cache dir, drop the page cache, read and check again"
mount_bucket "$WORK/mount-warm.log"
drop_page_cache
read_all warm
unmount

# Warm hit ratio: from the mount's `cache stats:` line, written at unmount, when the binary has it
# (hits summed over the tiers, against fetches from the store, or against misses); otherwise from
# s3rver's request log: 1 - warm object GETs / cold object GETs.
stats_line() { { grep -h 'cache stats:' "$1" 2>/dev/null || true; } | tail -n1 | sed 's/.*cache stats: *//'; }
sum_of() { { grep -oE "\b$1[=: ]+[0-9]+" <<<"$2" || true; } | awk -F'[=: ]+' '{s += $NF; n++} END {if (n) print s}'; }
WARM_STATS=$(stats_line "$WORK/mount-warm.log")
RATIO="" METHOD=""
if [ -n "$WARM_STATS" ]; then
  hits=$(sum_of hits "$WARM_STATS") fetches=$(sum_of fetches "$WARM_STATS")
  misses=$(sum_of misses "$WARM_STATS")
  if [ -n "$hits" ] && [ -n "$fetches" ] && [ $((hits + fetches)) -gt 0 ]; then
    RATIO=$(echo "100 * $hits / ($hits + $fetches)" | bc -l)
    METHOD="the mount's cache stats: hits / (hits + fetches)"
  elif [ -n "$hits" ] && [ -n "$misses" ] && [ $((hits + misses)) -gt 0 ]; then
    RATIO=$(echo "100 * $hits / ($hits + $misses)" | bc -l)
    METHOD="the mount's cache stats: hits / (hits + misses)"
  fi
fi
if [ -z "$RATIO" ] && [ "${GETS[cold]}" -gt 0 ]; then
  RATIO=$(echo "100 * (1 - ${GETS[warm]} / ${GETS[cold]})" | bc -l)
  METHOD="s3rver's request log: 1 - warm object GETs / cold object GETs"
fi

echo
printf '%-6s %7s %9s %9s %9s %11s\n' phase files MiB MB/s files/s "store GETs"
for phase in cold warm; do
  printf '%-6s %7d %9.1f %9.1f %9.1f %11d\n' "$phase" "${FILES[$phase]}" "${MIB[$phase]}" \
    "${MBPS[$phase]}" "${FPS[$phase]}" "${GETS[$phase]}"
done
if [ -n "$RATIO" ]; then
  printf 'warm hit ratio: %.1f%% (from %s)\n' "$RATIO" "$METHOD"
else
  echo "warm hit ratio: unknown (no cache stats line and no cold GETs)"
fi
[ -n "$WARM_STATS" ] && echo "warm mount's cache stats: $WARM_STATS"
printf 'demo: %.0f s so far (server, dataset, upload, two epochs; build not included)\n' "$(elapsed "$T0")"
if [ "${BAD[cold]}" -ne 0 ] || [ "${BAD[warm]}" -ne 0 ] ||
  [ "${FILES[cold]}" -ne "$NFILES" ] || [ "${FILES[warm]}" -ne "$NFILES" ]; then
  echo "demo: FAILED: SHA-256 check: cold ${BAD[cold]}, warm ${BAD[warm]} files wrong or missing"
  exit 1
fi
echo "demo: SHA-256 check passed: all $NFILES files read back intact, cold and warm"
