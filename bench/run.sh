#!/usr/bin/env bash
# Runs every benchmark program built in BUILD_DIR (default: build) and prints their tables.
set -euo pipefail
build=${1:-build}
"$build/bench/topology_bench" --benchmark_min_time=0.2
"$build/bench/mig_bench" --benchmark_min_time=0.2
"$build/bench/accel_bench" --benchmark_min_time=0.2
"$build/bench/place_bench" --benchmark_min_time=0.2
"$build/bench/launch_bench" --benchmark_min_time=0.2
"$build/bench/place_fleet" 20 1000
"$build/bench/audit_bench" --benchmark_min_time=0.2
"$build/bench/exporter_bench" --benchmark_min_time=0.2
echo
python3 "$(dirname "$0")/agent_vs_node_exporter.py" "$build"
python3 "$(dirname "$0")/agent_vs_node_exporter.py" "$build" --full-node --scrapes 2000
"$build/bench/kube_bench" --benchmark_min_time=0.2
"$build/bench/dra_bench" --benchmark_min_time=0.2
