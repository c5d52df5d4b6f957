#!/usr/bin/env bash
# make bench-check: counts the instructions (valgrind's callgrind, not the clock) of the
# operations in bench/instruction_counts.cc and compares them with bench/instruction-counts.txt.
# Fails when one grew by more than 25%; says so when one shrank by more than 25% (update the
# counts then, so that the guard keeps its edge). --update rewrites the file: commit it with the
# change that moved the counts and say why in the message (bench/README.md).
#   scripts/bench-check.sh BUILD_DIR [--update]
set -euo pipefail
build=${1:?usage: bench-check.sh BUILD_DIR [--update]}
update=${2:-}
here=$(cd "$(dirname "$0")/.." && pwd)
counts_file=$here/bench/instruction-counts.txt
program=$build/bench/instruction_counts
[[ -x $program ]] || { echo "bench-check: $program is not built" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "bench-check: valgrind is not installed (scripts/install-deps.sh)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The host families are read from the captured NEC host (2 NUMA nodes, hugepages, 2 IB HCAs).
tar -xjf "$here/../shared/fixtures/topologies/sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2" -C "$work"
root=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)

valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" --collect-atstart=no \
  --toggle-collect='(anonymous namespace)::count_*' "$program" "$root" >"$work/stdout" 2>"$work/valgrind.log" || {
  cat "$work/valgrind.log" >&2
  echo "bench-check: $program failed under valgrind" >&2
  exit 2
}
runs=$(awk '/^runs /{print $2}' "$work/stdout")
callgrind_annotate --inclusive=yes --threshold=100 "$work/callgrind.out" >"$work/annotate.txt"

python3 - "$work/annotate.txt" "$runs" "$counts_file" "$update" <<'PY'
import re, sys
annotate, runs, counts_file, update = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
measured = {}
for line in open(annotate):
    m = re.match(r"\s*([\d,]+)\s.*\(anonymous namespace\)::count_(\w+)\(", line)
    if m:
        measured[m.group(2)] = int(m.group(1).replace(",", "")) // runs
if not measured:
    sys.exit("bench-check: callgrind counted nothing in the count_* functions")
if update == "--update":
    with open(counts_file, "w") as f:
        f.write("# Instructions per operation (bench/instruction_counts.cc under callgrind), checked by\n"
                "# `make bench-check`. Update with scripts/bench-check.sh BUILD --update in the commit\n"
                "# that changes them, and say why (bench/README.md).\n")
        for name in sorted(measured):
            f.write(f"{name} {measured[name]}\n")
    print(f"bench-check: wrote {counts_file}")
    sys.exit(0)
kept = {}
for line in open(counts_file):
    line = line.strip()
    if line and not line.startswith("#"):
        name, value = line.split()
        kept[name] = int(value)
failed = False
print(f"{'operation':24} {'kept':>12} {'now':>12} {'change':>8}")
for name in sorted(set(kept) | set(measured)):
    if name not in measured:
        print(f"{name:24} {kept[name]:12d} {'':>12}  missing from the program")
        failed = True
        continue
    if name not in kept:
        print(f"{name:24} {'':>12} {measured[name]:12d}  missing from the counts file")
        failed = True
        continue
    ratio = measured[name] / kept[name]
    note = ""
    if ratio > 1.25:
        note = "  grew by more than 25%"
        failed = True
    elif ratio < 0.75:
        note = "  shrank by more than 25%: update the counts (bench/README.md)"
    print(f"{name:24} {kept[name]:12d} {measured[name]:12d} {ratio - 1:+8.1%}{note}")
sys.stdout.flush()
sys.exit("bench-check: failed" if failed else 0)
PY
