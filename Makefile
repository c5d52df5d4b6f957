# Thin wrapper over CMake. `make run` and `make test` are the README's quick start.
BUILD_DIR ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

PREFIX ?= /usr/local

.PHONY: deps configure build install run test test-asan test-tsan test-sanitize bench format clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

# The binary, bash/zsh/fish completion, a man page per command and the systemd units, under
# $(PREFIX) (DESTDIR for packaging).
install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

run: build
	./$(BUILD_DIR)/src/polyaccel report

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

# Sanitizer variants (CI runs both after `make test`): the whole suite under AddressSanitizer and
# UndefinedBehaviorSanitizer; the agent's threaded parts (monitor, exporter, device plugin,
# pod-resources client) under ThreadSanitizer.
TSAN_TESTS ?= monitor_test exporter_test pod_resources_test kube_plugin_test
# Leak checking is off: the test builds of the vendor libraries (tests/inject) keep their scenario
# state for the life of the process by design, and LeakSanitizer reports it once they are dlclosed.
SANITIZE_ENV := ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp

test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DPOLYACCEL_SANITIZE=address,undefined \
	  -DPOLYACCEL_BENCH=OFF >/dev/null
	@cmake --build build-asan -j$(JOBS)
	cd build-asan && $(SANITIZE_ENV) ctest --output-on-failure -j$(JOBS)

test-tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DPOLYACCEL_SANITIZE=thread \
	  -DPOLYACCEL_BENCH=OFF >/dev/null
	@cmake --build build-tsan -j$(JOBS) --target polyaccel $(TSAN_TESTS)
	cd build-tsan && $(SANITIZE_ENV) ctest --output-on-failure -j$(JOBS) \
	  -L '^($(shell echo $(TSAN_TESTS) | tr ' ' '|'))$$'

test-sanitize: test-asan test-tsan

bench: build
	bash bench/run.sh $(BUILD_DIR)

format:
	@find src tests bench -name '*.cc' -o -name '*.h' -o -name '*.c' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
