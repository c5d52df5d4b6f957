# Thin wrapper over CMake. `make run` and `make test` are the README's quick start.
BUILD_DIR ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

PREFIX ?= /usr/local

.PHONY: deps configure build install image deb deb-suite dist run test build-asan test-asan test-tsan test-sanitize \
  fuzz bench bench-check format clean

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

# The OCI image of the DaemonSet, from Debian 12's packages, as an archive for `podman load` and
# `ctr -n k8s.io images import` (scripts/build-image.sh; docs/install.md). Root, network to the
# Debian archive.
IMAGE_ARCHIVE ?= $(BUILD_DIR)/polyaccel-image.oci.tar
image: build
	bash scripts/build-image.sh $(BUILD_DIR) $(IMAGE_ARCHIVE)

# polyaccel_<version>_amd64.deb for hypervisors and other hosts (scripts/build-deb.sh).
deb: build
	bash scripts/build-deb.sh $(BUILD_DIR) $(BUILD_DIR)

# The .deb for another Debian release, built in a cached root of it from the committed HEAD:
# $(BUILD_DIR)/$(SUITE)/polyaccel_<version>_amd64.deb (scripts/build-deb-suite.sh). Root, network
# to the Debian archive; the first build compiles everything in that root.
SUITE ?= trixie
deb-suite:
	bash scripts/build-deb-suite.sh $(SUITE) $(BUILD_DIR)

# A source tarball of the committed HEAD, polyaccel-<version>-<commit>.tar.gz in $(BUILD_DIR):
# `git archive` writes the commit and its time into scripts/revision.txt (.gitattributes), so
# `make build`, `make image` and `make deb` in the unpacked tree, which has no .git, know it.
# Uncommitted changes are not in it.
dist:
	@mkdir -p $(BUILD_DIR)
	@set -e; version=$$(sed -n 's/^project(polyaccel VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt); \
	  commit=$$(git rev-parse --short=12 HEAD); name=polyaccel-$$version-$$commit; \
	  git archive --format=tar.gz --prefix=$$name/ -o $(BUILD_DIR)/$$name.tar.gz HEAD; \
	  echo $(BUILD_DIR)/$$name.tar.gz

run: build
	./$(BUILD_DIR)/src/polyaccel report

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

# Sanitizer variants (CI runs both after `make test`): the whole suite under AddressSanitizer and
# UndefinedBehaviorSanitizer, built with clang so that the same tree holds the libFuzzer targets
# of tests/fuzz (`make fuzz`); the agent's threaded parts (monitor, exporter, device plugin,
# pod-resources client, DRA driver, partition manager) under ThreadSanitizer.
TSAN_TESTS ?= monitor_test exporter_test pod_resources_test kube_plugin_test dra_test \
  partition_manager_test
LSAN_ENV := LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp
SANITIZE_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 $(LSAN_ENV) \
  UBSAN_OPTIONS=print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp

# A build-asan/ configured with another compiler (GCC before) is started afresh.
build-asan: deps
	@if [ -f build-asan/CMakeCache.txt ] && \
	  ! grep -q '^CMAKE_CXX_COMPILER:.*clang++' build-asan/CMakeCache.txt; then rm -rf build-asan; fi
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DPOLYACCEL_SANITIZE=address,undefined -DPOLYACCEL_BENCH=OFF \
	  >/dev/null
	@cmake --build build-asan -j$(JOBS)

# Not under ASan: the guest tests (TCG is slow enough), the image and package tests (label package:
# an ASan binary in a chroot without /proc cannot start) and the real launchers (label launchers).
test-asan: build-asan
	cd build-asan && $(SANITIZE_ENV) ctest --output-on-failure -j$(JOBS) -LE 'guest|package|launchers'

# Each fuzz target for FUZZ_SECONDS (scripts/fuzz.sh; FUZZ_TARGETS to pick some,
# FUZZ_SECONDS_OVERRIDES="name=seconds ..." for other durations, FUZZ_JOBS targets at once).
# A crash, leak, timeout or out-of-memory fails and leaves its reproducer under
# build-asan/fuzz-artifacts/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
FUZZ_SECONDS_OVERRIDES ?=
FUZZ_JOBS ?= 1
fuzz: build-asan
	$(LSAN_ENV) FUZZ_SECONDS_OVERRIDES="$(FUZZ_SECONDS_OVERRIDES)" FUZZ_JOBS=$(FUZZ_JOBS) \
	  bash scripts/fuzz.sh build-asan $(FUZZ_SECONDS) $(FUZZ_TARGETS)

test-tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DPOLYACCEL_SANITIZE=thread \
	  -DPOLYACCEL_BENCH=OFF >/dev/null
	@cmake --build build-tsan -j$(JOBS) --target polyaccel $(TSAN_TESTS)
	cd build-tsan && $(SANITIZE_ENV) ctest --output-on-failure -j$(JOBS) \
	  -L '^($(shell echo $(TSAN_TESTS) | tr ' ' '|'))$$'

test-sanitize: test-asan test-tsan

bench: build
	@bash scripts/install-deps.sh bench
	bash bench/run.sh $(BUILD_DIR)

# The instruction counts of a one-cell and a four-cell fit, the DRA pool of 8 GPUs with every MIG
# placement and one full scrape, against bench/instruction-counts.txt (callgrind: the clock of a
# shared machine cannot fool it). Fails on growth over 25%. scripts/bench-check.sh, bench/README.md.
bench-check: build
	@cmake --build $(BUILD_DIR) -j$(JOBS) --target instruction_counts
	bash scripts/bench-check.sh $(BUILD_DIR)

format:
	@find src tests bench -name '*.cc' -o -name '*.h' -o -name '*.c' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
