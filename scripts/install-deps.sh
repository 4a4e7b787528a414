#!/usr/bin/env bash
# Installs what lakecache needs to build, test and run its demo on Debian 12: the Debian packages
# below and the pinned npm test servers of package.json. Idempotent: when everything is present it
# installs nothing. Run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  build-essential cmake pkg-config git ca-certificates openssl curl bc python3 clang-format
  libcurl4-openssl-dev libssl-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libxxhash-dev
  libcli11-dev nlohmann-json3-dev libpugixml-dev libgtest-dev libgmock-dev libbenchmark-dev
  libfuse3-dev fuse3
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  swift swift-proxy swift-account swift-container swift-object python3-swift
)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$pkg")
done
# Node.js runs the npm test servers; one installed outside Debian's packages serves as well.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing Debian packages: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# npm test servers, pinned by package-lock.json; reinstalled only when the lock file changes.
stamp=node_modules/.lakecache-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "install-deps: installing npm test servers (package-lock.json)"
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  echo "$want" >"$stamp"
fi
