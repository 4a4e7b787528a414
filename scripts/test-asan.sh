#!/usr/bin/env bash
# `make test-asan`: the tree built with clang, AddressSanitizer and UndefinedBehaviorSanitizer in
# build-clang (unoptimised, line tables for the reports), and its tests run: unit, cluster, the check that
# clang's thread-safety analysis is on, and the integration tests of INTEGRATION below. The build
# keeps -Werror=thread-safety (CMakeLists.txt gives it to every clang build), so it is also the
# lock-discipline check; `make check-clang` (--build-only) stops after the build and that check.
#
# The options the tests need (ASAN_OPTIONS with detect_leaks, UBSAN_OPTIONS, halt_on_error) come
# from tests/CMakeLists.txt, so plain `ctest` in build-clang does the same and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-clang}
ROOT=$(pwd)
JOBS=${JOBS:-2}
CTEST_JOBS=${CTEST_JOBS:-2}
# The sanitizers' and libFuzzer's runtimes (Debian 12 ships them apart from clang).
scripts/apt-install-missing.sh test-asan clang libclang-rt-14-dev
# The integration tests of the run: together they cover what the unit and cluster tests do not
# (FUSE mounts and their holder, the CLI, master and worker processes, TLS, writes through a mount
# and to the store, hosts in network namespaces, metrics). The others (cluster_test, write_test,
# load_test, mount_test, s3_compat_test) repeat these layers at greater length and would add about
# 19 minutes; docs/reliability.md has the minutes of each. `ctest` in build-clang runs them all.
INTEGRATION=(cli_test cli_mount_test cli_server_test cli_cert_test cluster_launcher_test health_test
  https_test servers_smoke_test fuse_handover_test mount_restart_test s3_write_test
  cluster_write_test multihost_test order_hint_test read_path_test metrics_test native_test
  native_cluster_test)

# Unoptimised: instrumented code at -O1 takes three times the compile time of -O0 (about 25 more
# minutes on 2 cores), and the tests wait mostly on servers and sleeps, not on our code.
# Line tables only: enough for the reports' file:line, and far smaller objects to link.
# With the libFuzzer targets (LAKECACHE_FUZZ: our code also gets coverage instrumentation, which
# the tests do not notice), so CI's short fuzzing run below needs no build of its own.
CC=clang CXX=clang++ scripts/configure.sh "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O0 -gline-tables-only" -DLAKECACHE_SANITIZE=address,undefined \
  -DLAKECACHE_FUZZ=ON
cmake --build "$BUILD_DIR" -j"$JOBS"

cd "$BUILD_DIR"
if [ "${1:-}" = "--build-only" ]; then
  exec ctest --output-on-failure -L '^clang$'
fi
# One ctest run: the integration tests (their COST puts the longest first) start at once and the
# short unit tests fill the other core around them, instead of two runs that each end on one core.
names=$(IFS='|'; echo "${INTEGRATION[*]}")
others=$(cd "$ROOT/tests/integration" && ls ./*_test.cc | sed 's|^\./||; s|\.cc$||' |
  { grep -vxE "$names" || true; } | paste -sd'|' -)
exclude=()
if [ -n "$others" ]; then
  exclude=(-E "^integration\.($others)(\.[0-9]+)?$")
fi
ctest --output-on-failure -j"$CTEST_JOBS" -L '^(unit|cluster|clang|integration)$' "${exclude[@]}"
cd ..
# Every fuzz target for FUZZ_SECONDS (default 10 here) from its seed corpus: a parser change that
# crashes on the corpus or near it fails the run. `make fuzz` runs them 10 minutes each.
FUZZ_SECONDS=${FUZZ_SECONDS:-10} FUZZ_BUILD_DIR=$BUILD_DIR FUZZ_REUSE_BUILD=1 scripts/fuzz.sh
