#!/usr/bin/env bash
# Installs what the benches need besides the build (scripts/install-deps.sh): the peers
# bench/compare measures (s3fs-fuse, rclone), matplotlib for the PNG plots, faketime for the clock
# row of bench/faults, and the tools they drive (iproute2 for namespaces and tbf, util-linux for
# nsenter, curl, findutils). Debian 12, as root (or with sudo). Idempotent: when everything is
# present it installs nothing.
set -euo pipefail

DEBIAN_PACKAGES=(s3fs rclone python3-matplotlib iproute2 util-linux curl findutils fuse3 faketime)

"$(dirname "$0")/apt-install-missing.sh" install-bench-deps "${DEBIAN_PACKAGES[@]}"
