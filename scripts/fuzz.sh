#!/usr/bin/env bash
# Runs each libFuzzer target of a clang ASan+UBSan build tree for a bounded time (`make fuzz`).
#   scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]        (no TARGET: every one of targets.txt)
# FUZZ_SECONDS_OVERRIDES="name=seconds ..." gives some targets another duration; FUZZ_TIMEOUT
# (default 10) is the seconds one input may take before it counts as a hang.
# Each target grows its own working corpus in BUILD_DIR/fuzz-corpus/<target> (seeded from
# tests/fuzz/corpus/<target>, which is only read); a crash, leak, timeout or out-of-memory leaves
# its reproducer in BUILD_DIR/fuzz-artifacts/ and makes the script exit 1 after the last target.
set -uo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:?build dir}
seconds=${2:?seconds per target}
shift 2
list="$build_dir/tests/fuzz/targets.txt"
if [ ! -f "$list" ]; then
  echo "fuzz: $list is missing: build the clang ASan tree first (make test-asan)" >&2
  exit 2
fi

declare -A max_len override
while read -r name len; do
  [ -n "$name" ] && max_len[$name]=$len
done <"$list"
for pair in ${FUZZ_SECONDS_OVERRIDES:-}; do
  override[${pair%%=*}]=${pair#*=}
done
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(awk 'NF {print $1}' "$list")
fi

artifacts="$build_dir/fuzz-artifacts"
logs="$build_dir/fuzz-logs"
mkdir -p "$artifacts" "$logs"
# Leaks are findings too. UBSan already stops at the first report (-fno-sanitize-recover).
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

failed=()
for t in "${targets[@]}"; do
  if [ -z "${max_len[$t]:-}" ]; then
    echo "fuzz: unknown target $t (see $list)" >&2
    exit 2
  fi
  bin="$build_dir/tests/fuzz/fuzz_$t"
  seeds="tests/fuzz/corpus/$t"
  work="$build_dir/fuzz-corpus/$t"
  mkdir -p "$work"
  secs=${override[$t]:-$seconds}
  log="$logs/$t.log"
  # -timeout: one input taking longer is a finding (on a machine to itself; a loaded one needs
  # more); -rss_limit_mb/-malloc_limit_mb: so is an input that makes the parser take memory
  # without bound. Our inputs are small files.
  "$bin" -max_total_time="$secs" -max_len="${max_len[$t]}" -timeout="${FUZZ_TIMEOUT:-10}" \
    -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
    "$work" "$seeds" >"$log" 2>&1
  rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    echo "fuzz: $t ok: ${secs}s, ${execs:-?} runs, ${cov:-cov: ?}, corpus $(ls "$work" | wc -l) inputs"
  else
    reproducer=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //')
    echo "fuzz: $t FAILED (exit $rc) after ${execs:-?} runs; log $log" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*fuzz invariant failed)' "$log" | head -5 >&2
    echo "fuzz: reproducer ${reproducer:-(none written)}; rerun: $bin ${reproducer:-}" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
