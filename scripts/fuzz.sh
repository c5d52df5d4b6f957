#!/usr/bin/env bash
# Runs each libFuzzer target of a clang ASan+UBSan build tree for a bounded time (`make fuzz`).
#   scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]        (no TARGET: every one of targets.txt)
# FUZZ_SECONDS_OVERRIDES="name=seconds ..." gives some targets another duration; FUZZ_TIMEOUT
# (default 10) is the seconds one input may take before it counts as a hang; FUZZ_JOBS (default
# 1) how many targets run at once.
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
# FUZZ_SKIP="a b": targets left out of this run (their corpora are still replayed by ctest).
if [ -n "${FUZZ_SKIP:-}" ]; then
  kept=()
  for t in "${targets[@]}"; do
    case " $FUZZ_SKIP " in *" $t "*) echo "fuzz: $t skipped (FUZZ_SKIP)" ;; *) kept+=("$t") ;; esac
  done
  targets=("${kept[@]}")
fi

artifacts="$build_dir/fuzz-artifacts"
logs="$build_dir/fuzz-logs"
mkdir -p "$artifacts" "$logs"
# Leaks are findings too. UBSan already stops at the first report (-fno-sanitize-recover).
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

for t in "${targets[@]}"; do
  if [ -z "${max_len[$t]:-}" ]; then
    echo "fuzz: unknown target $t (see $list)" >&2
    exit 2
  fi
done

# One target: its verdict goes to $logs/$t.verdict (first line "ok" or "failed", then what to say).
fuzz_one() {
  local t=$1
  local bin="$build_dir/tests/fuzz/fuzz_$t"
  local seeds="tests/fuzz/corpus/$t"
  local work="$build_dir/fuzz-corpus/$t"
  local secs=${override[$t]:-$seconds}
  local log="$logs/$t.log"
  mkdir -p "$work"
  # -timeout: one input taking longer is a finding (on a machine to itself; a loaded one needs
  # more); -rss_limit_mb/-malloc_limit_mb: so is an input that makes the parser take memory
  # without bound. Our inputs are small files.
  "$bin" -max_total_time="$secs" -max_len="${max_len[$t]}" -timeout="${FUZZ_TIMEOUT:-10}" \
    -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
    "$work" "$seeds" >"$log" 2>&1
  local rc=$?
  local execs cov reproducer
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    {
      echo ok
      echo "fuzz: $t ok: ${secs}s, ${execs:-?} runs, ${cov:-cov: ?}, corpus $(ls "$work" | wc -l) inputs"
    } >"$logs/$t.verdict"
  else
    reproducer=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //')
    {
      echo failed
      echo "fuzz: $t FAILED (exit $rc) after ${execs:-?} runs; log $log"
      grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*fuzz invariant failed)' "$log" | head -5
      echo "fuzz: reproducer ${reproducer:-(none written)}; rerun: $bin ${reproducer:-}"
    } >"$logs/$t.verdict"
  fi
}

# FUZZ_JOBS targets at a time (default 1; CI gives one per core). Each target is one process.
jobs=${FUZZ_JOBS:-1}
running=0
for t in "${targets[@]}"; do
  rm -f "$logs/$t.verdict"
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

failed=()
for t in "${targets[@]}"; do
  verdict="$logs/$t.verdict"
  if [ -f "$verdict" ] && [ "$(head -1 "$verdict")" = ok ]; then
    tail -n +2 "$verdict"
  else
    [ -f "$verdict" ] && tail -n +2 "$verdict" >&2
    [ -f "$verdict" ] || echo "fuzz: $t gave no verdict" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
