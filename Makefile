# Thin wrapper over CMake. `make run` and `make test` are the two commands a
# newcomer needs; both install missing Debian packages first.
BUILD_DIR ?= build
CMAKE_FLAGS ?=
ifeq ($(SANITIZE),1)
BUILD_DIR := build-asan
CMAKE_FLAGS += -DIXIA_SANITIZE=ON
endif
FUZZ_DIR ?= build-fuzz
SECONDS ?= 60
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Tests run twice as many at once as there are cores: an integration test
# spends most of its time waiting on the processes it started (the suite
# used ~37% of 2 cores at -j nproc). Sanitized builds are CPU-bound, so
# they run one per core.
ifeq ($(SANITIZE),1)
TEST_JOBS ?= $(JOBS)
else
TEST_JOBS ?= $(shell expr $(JOBS) \* 2)
endif
RUN_DIR ?= run

.PHONY: deps build test run fuzz-build fuzz clean

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The libFuzzer targets (clang, ASan + UBSan, everything instrumented).
fuzz-build: deps
	@cmake -S . -B $(FUZZ_DIR) -DCMAKE_C_COMPILER=clang -DIXIA_FUZZ=ON \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz

# Every unit and integration test, then every fuzz corpus replayed under
# ASan/UBSan.
test: build fuzz-build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(TEST_JOBS) --timeout 600
	cd $(FUZZ_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600 -L fuzz

# Fuzzes every target for SECONDS seconds each.
fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_DIR) $(SECONDS)

run: build
	$(BUILD_DIR)/bin/ixia-local run --dir $(RUN_DIR)

clean:
	rm -rf build build-asan $(FUZZ_DIR)
