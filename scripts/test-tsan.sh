#!/usr/bin/env bash
# `make test-tsan`: builds the gtest programs (unit tests and the in-process cluster tests) with
# ThreadSanitizer in build-tsan and runs them. The options the tests need (TSAN_OPTIONS with
# tests/tsan.supp, halt_on_error) come from tests/CMakeLists.txt, so plain `ctest` in build-tsan
# does the same. `make build-tsan` (--build-only) stops after the build.
#
# TSan keeps its shadow memory at fixed addresses. On a kernel that randomises mmap with more bits
# than the runtime expects (vm.mmap_rnd_bits above 28), a library can land there and every
# instrumented program dies at start with "ThreadSanitizer: unexpected memory mapping". Then the
# tests run without address-space randomisation (setarch -R: this process tree only, no root).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-tsan}
JOBS=${JOBS:-2}
CTEST_JOBS=${CTEST_JOBS:-2}
TARGETS=(common_tests ufs_tests cache_tests meta_tests fetch_tests jobs_tests rpc_tests security_tests
  master_client_tests http_tests fs_tests cluster_client_tests mount_tests fuse_tests cli_tests
  master_tests membership_tests cluster_tests)

# -O1: instrumented code compiles faster than at -O2 (docs/building.md), and the tests wait
# mostly on sleeps and servers (the test code itself is -O0, LAKECACHE_TEST_COMPILE_OPTIONS).
scripts/configure.sh "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAKECACHE_SANITIZE=thread \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG"
cmake --build "$BUILD_DIR" -j"$JOBS" --target "${TARGETS[@]}"
if [ "${1:-}" = "--build-only" ]; then
  exit 0
fi

run=()
if ! probe=$("$BUILD_DIR/tests/common_tests" --gtest_list_tests 2>&1 >/dev/null); then
  if grep -q "unexpected memory mapping" <<<"$probe"; then
    echo "test-tsan: ThreadSanitizer cannot map its shadow memory with ASLR on this kernel" \
      "(vm.mmap_rnd_bits=$(sysctl -n vm.mmap_rnd_bits 2>/dev/null || echo '?')): running under setarch -R"
    run=(setarch "$(uname -m)" -R)
  fi
fi
cd "$BUILD_DIR"
"${run[@]}" ctest --output-on-failure -j"$CTEST_JOBS" -L '^(unit|cluster)$'
