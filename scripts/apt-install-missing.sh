#!/usr/bin/env bash
# apt-install-missing.sh NAME PACKAGE...: installs those of the Debian packages that are not
# installed yet (as root, or with sudo), saying so under NAME; installs nothing when all are there.
# Two of these at once (CI runs some stages side by side) take turns: apt allows one at a time.
set -euo pipefail
name=$1
shift

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for pkg in "$@"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$pkg")
done

if [ "${#missing[@]}" -gt 0 ]; then
  exec 9>/tmp/lakecache-apt.lock
  flock 9
  echo "$name: installing Debian packages: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
