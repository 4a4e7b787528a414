#!/usr/bin/env bash
# Configures a build folder: scripts/configure.sh BUILD_DIR [CMAKE_ARGS...]. Every build of the
# Makefile and the scripts (build, build-clang, build-tsan, build-fuzz) goes through it.
#
# The generator is Ninja when it is installed (make deps installs ninja-build), else Unix
# Makefiles. A folder configured before with the other generator (e.g. a build/ from before Ninja)
# cannot be switched by CMake: its cache and its CMakeFiles/ folders (the objects) are removed and it
# is configured anew, so `make` keeps working in it; nothing else of the folder is touched.
# LAKECACHE_GENERATOR="Unix Makefiles" chooses the generator.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: scripts/configure.sh BUILD_DIR [CMAKE_ARGS...]}
shift
generator=${LAKECACHE_GENERATOR:-}
if [ -z "$generator" ]; then
  generator="Unix Makefiles"
  if command -v ninja >/dev/null; then
    generator=Ninja
  fi
fi
cache=$dir/CMakeCache.txt
if [ -f "$cache" ]; then
  old=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")
  if [ -n "$old" ] && [ "$old" != "$generator" ]; then
    echo "configure: $dir was configured for $old; configuring it anew for $generator" >&2
    find "$dir" -name CMakeFiles -type d -prune -exec rm -rf {} +
    rm -f "$cache"
  fi
fi
cmake -S . -B "$dir" -G "$generator" "$@" >/dev/null
