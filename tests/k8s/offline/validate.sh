#!/usr/bin/env bash
# Offline validation of the Helm chart (deploy/helm/lakecache) and the training examples
# (examples/kubernetes), with helm and node only: no cluster.
#  1. helm lint --strict and helm template over every values file in values/;
#  2. every rendered object and every example against the Kubernetes 1.27 schemas (wrong types,
#     missing required fields, bad enums, unknown fields) and the spec lint (check.js); the
#     PyTorchJob and MPIJob have no CRD schema here, so their pod templates are checked against
#     the core PodTemplateSpec schema;
#     the ServiceMonitor has no schema in kubernetes-models: crd_schemas.js writes out its CRD's
#     fields; check.js also checks what each file's ServiceMonitors reach (Services, ports, pods,
#     the metrics token);
#  3. the metrics values of each values file (metrics_check.js): listeners, ports, scrape
#     annotations, the metrics token, the ServiceMonitor and its Services;
#  4. the training pod's dataset check, run on a dataset that matches its manifest and on three
#     that do not;
#  5. every case in broken/ must fail, with the message its `# expect:` line names;
#  6. with LAKECACHE (the binary), each rendered config loads as the daemons load it, with the
#     worker's arguments (`lakecache config show`).
# Usage: validate.sh [REPO [LAKECACHE]] (default: the repository this script is in).
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../../..}" && pwd)
lakecache=${2:-}
here=$root/tests/k8s/offline
chart=$root/deploy/helm/lakecache
helm=${HELM:-$root/node_modules/.bin/helm}
export NODE_PATH=$root/node_modules
for need in "$helm" "$NODE_PATH/kubernetes-models" "$NODE_PATH/yaml"; do
  if [ ! -e "$need" ]; then
    echo "validate: $need is missing: run scripts/install-deps.sh" >&2
    exit 1
  fi
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
check() { node "$here/check.js" "$@"; }
passed=0
failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

echo "== helm lint --strict and helm template ($("$helm" version --short))"
for values in "$here"/values/*.yaml; do
  name=$(basename "$values" .yaml)
  if ! "$helm" lint --strict "$chart" -f "$values" >"$out/lint.log" 2>&1; then
    cat "$out/lint.log"
    fail "helm lint --strict -f values/$name.yaml"
    continue
  fi
  if "$helm" template lakecache "$chart" -f "$values" >"$out/$name.yaml" 2>"$out/template.log"; then
    pass "helm lint --strict and helm template -f values/$name.yaml"
  else
    cat "$out/template.log"
    fail "helm template -f values/$name.yaml"
  fi
done

echo "== rendered objects and examples: schemas, unknown fields, spec lint"
rendered=("$out"/*.yaml)
if check "${rendered[@]}"; then pass "every rendered object"; else fail "rendered objects"; fi
ex=$root/examples/kubernetes
if check --training "$ex/train-pod.yaml" "$ex/pytorchjob.yaml" "$ex/mpijob.yaml" && check "$ex/load-job.yaml"; then
  pass "every example"
else
  fail "examples"
fi
if sh -n "$ex/arena-submit.sh" && grep -q -- '--data-dir="/mnt/lake/' "$ex/arena-submit.sh"; then
  pass "arena-submit.sh parses and maps /mnt/lake/<ns>"
else
  fail "arena-submit.sh"
fi

echo "== metrics: listeners, scrape annotations, the metrics token and the ServiceMonitor"
for values in "$here"/values/*.yaml; do
  name=$(basename "$values" .yaml)
  [ -f "$out/$name.yaml" ] || continue
  if node "$here/metrics_check.js" "$chart/values.yaml" "$values" "$out/$name.yaml" >"$out/metrics.log" 2>&1; then
    pass "values/$name.yaml: $(grep -c '^ok' "$out/metrics.log") metrics checks"
  else
    cat "$out/metrics.log"
    fail "values/$name.yaml: metrics"
  fi
done

echo "== the training pod's dataset check"
node -e 'const y=require("yaml").parse(require("fs").readFileSync(process.argv[1],"utf8"));
         process.stdout.write(y.spec.containers[0].args[0])' "$ex/train-pod.yaml" >"$out/check.sh"
data=$out/dataset
mkdir -p "$data/train/class a" "$data/val"
head -c 300000 /dev/urandom >"$data/train/class a/img 1.jpg"
head -c 5000 /dev/urandom >"$data/train/shard-0.tfrecord"
printf 'label\n' >"$data/val/labels.csv"
(cd "$data" && find . -type f ! -name MANIFEST.sha256 | sed 's|^\./||' | sort | while IFS= read -r f; do sha256sum "$f"; done >MANIFEST.sha256)
run_check() { DATA_DIR=$data sh "$out/check.sh" >"$out/check.log" 2>&1; }
if run_check && grep -q '3 files read' "$out/check.log"; then
  pass "the check passes a dataset that matches its manifest"
else
  cat "$out/check.log"
  fail "the check on a matching dataset"
fi
expect_check_fails() {  # what, expected message
  if run_check; then
    fail "the check passed $1"
  elif grep -q -- "$2" "$out/check.log"; then
    pass "the check fails $1: $(grep -m1 -- "$2" "$out/check.log")"
  else
    cat "$out/check.log"
    fail "the check failed $1 without saying '$2'"
  fi
}
cp "$data/val/labels.csv" "$out/labels.csv"
printf 'LABEL\n' >"$data/val/labels.csv"
expect_check_fails "on a changed byte" "labels.csv: FAILED"
cp "$out/labels.csv" "$data/val/labels.csv"
mv "$data/train/shard-0.tfrecord" "$out/"
expect_check_fails "on a missing file" "< train/shard-0.tfrecord"
mv "$out/shard-0.tfrecord" "$data/train/"
touch "$data/train/unlisted"
expect_check_fails "on a file the manifest does not list" "> train/unlisted"

echo "== broken cases must fail, naming the problem"
for case in "$here"/broken/*.yaml; do
  name=broken/$(basename "$case")
  expect=$(sed -n 's/^# expect: //p' "$case")
  read -r -a flags <<<"$(sed -n 's/^# flags: //p' "$case")"
  if [[ $case == *.values.yaml ]]; then
    if "$helm" template lakecache "$chart" -f "$case" >"$out/broken.yaml" 2>"$out/broken.log"; then
      check "${flags[@]}" "$out/broken.yaml" >"$out/broken.log" 2>&1 && status=0 || status=$?
    else
      status=1
    fi
  else
    check "${flags[@]}" "$case" >"$out/broken.log" 2>&1 && status=0 || status=$?
  fi
  if [ "$status" -eq 0 ]; then
    fail "$name passed; it must fail with '$expect'"
  elif grep -qF -- "$expect" "$out/broken.log"; then
    pass "$name fails: $(grep -m1 -F -- "$expect" "$out/broken.log" | sed -E 's/^ *([^ ]*\.yaml: )?//')"
  else
    cat "$out/broken.log"
    fail "$name failed without saying '$expect'"
  fi
done

if [ -n "$lakecache" ]; then
  echo "== rendered configs, loaded by $lakecache config show with the worker's -o overrides"
  for rendered in "${rendered[@]}"; do
    name=$(basename "$rendered" .yaml)
    # The ConfigMap's one file, and the worker container's -o arguments.
    node -e 'const fs=require("fs"),Y=require("yaml");
      const docs=Y.parseAllDocuments(fs.readFileSync(process.argv[1],"utf8")).map((d)=>d.toJS());
      const cm=docs.find((d)=>d&&d.kind==="ConfigMap"); const [file,text]=Object.entries(cm.data)[0];
      fs.writeFileSync(process.argv[2]+"/"+file,text);
      const w=docs.find((d)=>d&&d.kind==="DaemonSet"&&d.metadata.name.endsWith("-worker"));
      const a=w.spec.template.spec.containers[0].args; const o=[];
      a.forEach((x,i)=>{if(x==="-o")o.push("-o",a[i+1]);});
      console.log([process.argv[2]+"/"+file,...o].join("\n"));' "$rendered" "$out" >"$out/args"
    mapfile -t args <"$out/args"
    if "$lakecache" --config "${args[@]}" config show >"$out/show.log" 2>&1 &&
      grep -q '^namespaces:' "$out/show.log"; then
      pass "values/$name.yaml: lakecache loads the rendered $(basename "${args[0]}")"
    else
      cat "$out/show.log"
      fail "values/$name.yaml: lakecache refuses the rendered $(basename "${args[0]}")"
    fi
    rm -f "${args[0]}"
  done
fi

echo "validate: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
