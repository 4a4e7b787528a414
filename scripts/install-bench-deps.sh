#!/usr/bin/env bash
# Installs what bench/compare needs besides the build (scripts/install-deps.sh): the peers it
# measures (s3fs-fuse, rclone), matplotlib for its PNG plots, and the tools it drives (iproute2
# for namespaces and tbf, util-linux for nsenter, curl, findutils). Debian 12, as root (or with
# sudo). Idempotent: when everything is present it installs nothing.
set -euo pipefail

DEBIAN_PACKAGES=(s3fs rclone python3-matplotlib iproute2 util-linux curl findutils fuse3)

"$(dirname "$0")/apt-install-missing.sh" install-bench-deps "${DEBIAN_PACKAGES[@]}"
