# lakecache: `make demo` and `make test` are the two commands a newcomer needs (see README.md).
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
# Tests at a time: most wait on servers, sleeps and the kernel, so 4 keep 2 cores busy (770 tests:
# 7.2 minutes at -j4, 10.4 at -j2).
CTEST_JOBS ?= 4

.PHONY: all deps configure build test k8s-test check-clang test-asan test-tsan build-tsan fuzz demo bench bench-quick bench-train \
	bench-native bench-meta bench-load-scale faults faults-quick bench-deps format format-check clean

all: build

deps:
	@scripts/install-deps.sh

# Ninja when installed (scripts/configure.sh; a folder made with another generator is reconfigured).
configure: deps
	@scripts/configure.sh $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

# Then no secret the tests used (role tokens, the Swift secret) may appear in anything they printed.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(CTEST_JOBS)
	@scripts/scan-secrets.sh $(BUILD_DIR)/Testing/Temporary/LastTest.log

# The Helm chart's pods in real containers (rootful podman on a local Debian 12 base): master, two
# workers, the FUSE pod, a training pod reading through the host folder, the load Job; see
# tests/k8s/containers/README.md. Needs root; leaves nothing running, mounted or stored.
k8s-test: build
	@tests/k8s/containers/run.sh $(BUILD_DIR)/lakecache

# Everything built with clang, whose thread-safety analysis (-Werror=thread-safety) checks the lock
# discipline of common/mutex.h; runs only the check that the analysis is on. It is test-asan's
# build (build-clang), so CI runs test-asan instead and a later test-asan builds nothing again.
check-clang: deps
	@JOBS=$(JOBS) scripts/test-asan.sh --build-only

# The test suite built with clang, AddressSanitizer and UndefinedBehaviorSanitizer (build-clang),
# and run: unit, cluster, the clang check and the integration tests that cover what those do not.
test-asan: deps
	@JOBS=$(JOBS) CTEST_JOBS=$(CTEST_JOBS) scripts/test-asan.sh

# The unit and in-process cluster tests built with ThreadSanitizer (build-tsan), and run.
test-tsan: deps
	@JOBS=$(JOBS) CTEST_JOBS=$(CTEST_JOBS) scripts/test-tsan.sh

# Only the build of test-tsan (build-tsan); a later test-tsan builds nothing again.
build-tsan: deps
	@JOBS=$(JOBS) scripts/test-tsan.sh --build-only

# Every libFuzzer target of fuzz/ (built with clang in build-fuzz) for FUZZ_SECONDS each, from a
# copy of its seed corpus; fails on any crash, naming the reproducer. A short run: make fuzz FUZZ_SECONDS=30.
FUZZ_SECONDS ?= 600
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) scripts/fuzz.sh

demo: build
	@scripts/demo.sh $(BUILD_DIR)/lakecache

# lakecache against s3fs and rclone over a shaped link (bench/compare, needs root): results in
# bench/results/, the summary in docs/benchmarks.md. BENCH_ARGS passes flags, e.g. --systems.
bench: build bench-deps
	@BUILD_DIR=$(BUILD_DIR) bench/compare $(BENCH_ARGS)

# The same at CI size (a few minutes), bench/write's writes and bench/native's reads at CI size (the
# latter also with the memory tiers in reserved huge pages) and bench/meta_scale's 1M-object tree:
# checks that every cell is produced, asserts no speed.
bench-quick: build bench-deps
	@BUILD_DIR=$(BUILD_DIR) bench/compare --quick $(BENCH_ARGS)
	@BUILD_DIR=$(BUILD_DIR) bench/write --quick
	@BUILD_DIR=$(BUILD_DIR) bench/native --quick
	@BUILD_DIR=$(BUILD_DIR) bench/native --quick --huge-pages hugetlb
	@BUILD_DIR=$(BUILD_DIR) bench/meta_scale --quick

# A PyTorch training loop's epochs over lakecache, s3fs, rclone and local disk (bench/train, needs
# root): TFRecord shards and shuffled small files, with and without the order hint.
bench-train: build bench-deps
	@BUILD_DIR=$(BUILD_DIR) bench/train $(BENCH_ARGS)

# The native data path against the FUSE mount and this machine's ceilings (bench/native, needs root):
# sequential, random, small files and DataLoader epochs on a standalone mount, then a co-located and
# a remote cluster mount; reader and mount-server CPU per GB, the server's peak RSS.
bench-native: build bench-deps
	@BUILD_DIR=$(BUILD_DIR) bench/native $(BENCH_ARGS)

# Metadata at scale (bench/meta_scale, needs root): a mount's memory and walk rates over synthetic://
# trees of 1M and 10M objects (BENCH_ARGS=--with-100m adds 100M), and a 1M-entry folder.
bench-meta: build
	@BUILD_DIR=$(BUILD_DIR) bench/meta_scale $(BENCH_ARGS)

# Loading many small files (bench/load_scale, needs root): `lakecache load -R` of a tree of small
# files on s3rver beside `cp -r` through a mount and `rclone copy`, files/s and peak RSS, and the
# metadata-only load of a synthetic:// tree (BENCH_ARGS=--quick: 20k files, 200k objects).
bench-load-scale: build
	@BUILD_DIR=$(BUILD_DIR) bench/load_scale $(BENCH_ARGS)

# The fault matrix (bench/faults, needs root): each fault injected under 8 readers, with what they
# saw; the table goes to docs/reliability.md. faults-quick is its CI size: every row, each outcome
# asserted (0 wrong bytes, no hang, failures only where the row allows them).
faults: build bench-deps
	@BUILD_DIR=$(BUILD_DIR) bench/faults $(BENCH_ARGS)

faults-quick: build bench-deps
	@BUILD_DIR=$(BUILD_DIR) bench/faults --quick
	@BUILD_DIR=$(BUILD_DIR) bench/fanout --quick

bench-deps:
	@scripts/install-bench-deps.sh

FORMAT_FILES = $(shell git ls-files '*.cc' '*.h')

format:
	@clang-format -i $(FORMAT_FILES)

format-check: deps
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: OK"

clean:
	rm -rf $(BUILD_DIR) build-clang build-tsan build-fuzz
