# The two set-up commands (README): `make run` and `make test`.
# Both install what is missing (scripts/install-deps.sh) and build with CMake presets.

JOBS ?= $(shell nproc)
# CTest runs twice as many tests as cores: the e2e tests spend most of their
# time waiting on servers and timers (docs/testing.md).
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))
DATA_DIR ?= data
LISTEN ?= 127.0.0.1:9800

.PHONY: run test deps build build-asan test-release test-asan clean

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

# ASan + UBSan (clang-14): the unit and e2e tests, and each libFuzzer target
# run briefly from a fixed seed (docs/fuzzing.md).
build-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)

test-release: build
	@ctest --preset release -j $(TEST_JOBS)

test-asan: build-asan
	@ctest --preset asan -j $(TEST_JOBS)

test: test-release test-asan

run: build
	@DATA_DIR=$(DATA_DIR) LISTEN=$(LISTEN) bash scripts/run-demo.sh

clean:
	rm -rf build
