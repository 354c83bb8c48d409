# The two set-up commands (README): `make run` and `make test`.
# Both install what is missing (scripts/install-deps.sh) and build with CMake presets.

JOBS ?= $(shell nproc)
DATA_DIR ?= data
LISTEN ?= 127.0.0.1:9800

.PHONY: run test deps build build-asan build-fuzz test-release test-asan test-fuzz clean

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

build-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)

test-release: build
	@ctest --preset release -j $(JOBS)

test-asan: build-asan
	@ctest --preset asan -j $(JOBS)

# libFuzzer targets (clang-14, ASan + UBSan), each fuzzed ~10 s (docs/fuzzing.md).
build-fuzz: deps
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)

test-fuzz: build-fuzz
	@ctest --preset fuzz -j $(JOBS)

test: test-release test-asan test-fuzz

run: build
	@DATA_DIR=$(DATA_DIR) LISTEN=$(LISTEN) bash scripts/run-demo.sh

clean:
	rm -rf build
