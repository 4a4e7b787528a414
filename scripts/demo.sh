#!/usr/bin/env bash
# The demo: a local S3 server (s3rver) with a generated sample dataset, listed and read through the
# lakecache CLI, every object checked against its SHA-256. Usage: scripts/demo.sh [path/to/lakecache]
set -euo pipefail
cd "$(dirname "$0")/.."
LAKECACHE=$(realpath "${1:-build/lakecache}")
WORK=$(mktemp -d /tmp/lakecache-demo.XXXXXX)
BUCKET=demo
SERVER_PID=""

cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
ENDPOINT="http://127.0.0.1:$PORT"

echo "== starting s3rver on $ENDPOINT"
mkdir -p "$WORK/s3" "$WORK/data"
node --openssl-legacy-provider node_modules/s3rver/bin/s3rver.js -d "$WORK/s3" -a 127.0.0.1 \
  -p "$PORT" --silent --configure-bucket "$BUCKET" >"$WORK/s3rver.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do curl -s -o /dev/null "$ENDPOINT/" && break; sleep 0.1; done

echo "== generating the sample dataset (deterministic)"
gen() {  # gen NAME BYTES: pseudo-random bytes from a key derived from the name
  local key; key=$(printf '%s' "$1" | sha256sum | cut -c1-32)
  head -c "$2" /dev/zero |
    openssl enc -aes-128-ctr -nosalt -K "$key" -iv 00000000000000000000000000000000 >"$WORK/data/$1"
}
mkdir -p "$WORK/data/train" "$WORK/data/images"
for i in $(seq -w 0 7); do gen "train/shard-000$i.tfrecord" $((8 << 20)); done
for i in $(seq -w 0 199); do gen "images/img-$i.jpg" $((100 * 1024 + 10#$i * 37)); done

echo "== uploading $(find "$WORK/data" -type f | wc -l) objects"
(cd "$WORK/data" && find . -type f | sed 's|^\./||' | while read -r f; do
  printf 'url = "%s/%s/%s"\nupload-file = "%s"\noutput = "/dev/null"\n' "$ENDPOINT" "$BUCKET" "$f" "$f"
done) >"$WORK/upload.cfg"
(cd "$WORK/data" && curl -sS --fail --parallel --parallel-max 16 --aws-sigv4 "aws:amz:us-east-1:s3" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
  --user S3RVER:S3RVER -K "$WORK/upload.cfg")

export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
LC=("$LAKECACHE" --endpoint "$ENDPOINT" --path-style)

echo "== lakecache ls s3://$BUCKET/"
"${LC[@]}" ls "s3://$BUCKET/"
echo "== lakecache ls s3://$BUCKET/train/"
"${LC[@]}" ls "s3://$BUCKET/train/"
echo "== lakecache stat s3://$BUCKET/train/shard-0000.tfrecord"
"${LC[@]}" stat "s3://$BUCKET/train/shard-0000.tfrecord"

echo "== reading every object through lakecache cat and checking SHA-256"
start=$(date +%s.%N)
bytes=0 files=0 bad=0
while read -r key; do
  want=$(sha256sum <"$WORK/data/$key" | cut -d' ' -f1)
  got=$("${LC[@]}" cat "s3://$BUCKET/$key" | sha256sum | cut -d' ' -f1)
  [ "$want" = "$got" ] || { echo "MISMATCH: $key"; bad=$((bad + 1)); }
  bytes=$((bytes + $(stat -c %s "$WORK/data/$key"))); files=$((files + 1))
done < <("${LC[@]}" ls -R "s3://$BUCKET/" | cut -c32-)
secs=$(echo "$(date +%s.%N) - $start" | bc -l)
printf '\n%-10s %8s %10s %10s %8s\n' "read" "files" "MiB" "MB/s" "files/s"
printf '%-10s %8d %10.1f %10.1f %8.1f\n' "cli cat" "$files" "$(echo "$bytes/1048576" | bc -l)" \
  "$(echo "$bytes/1000000/$secs" | bc -l)" "$(echo "$files/$secs" | bc -l)"
if [ "$bad" -ne 0 ]; then echo "demo: $bad objects read back wrong"; exit 1; fi
echo "demo: all $files objects read back intact"
