# lakecache: `make demo` and `make test` are the two commands a newcomer needs (see README.md).
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
CTEST_JOBS ?= 2

.PHONY: all deps configure build test demo format format-check clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(CTEST_JOBS)

demo: build
	@scripts/demo.sh $(BUILD_DIR)/lakecache

FORMAT_FILES = $(shell git ls-files '*.cc' '*.h')

format:
	@clang-format -i $(FORMAT_FILES)

format-check: deps
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: OK"

clean:
	rm -rf $(BUILD_DIR)
