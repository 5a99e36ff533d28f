# Thin wrapper over CMake. `make run` and `make test` are the two commands a
# newcomer needs; both install missing Debian packages first.
BUILD_DIR ?= build
CMAKE_FLAGS ?=
ifeq ($(SANITIZE),1)
BUILD_DIR := build-asan
CMAKE_FLAGS += -DIXIA_SANITIZE=ON
endif
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
RUN_DIR ?= run

.PHONY: deps build test run clean

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

run: build
	$(BUILD_DIR)/bin/ixia-local run --dir $(RUN_DIR)

clean:
	rm -rf build build-asan
