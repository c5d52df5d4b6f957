#!/usr/bin/env bash
# ctest driver of one guest test: builds the initramfs into a temp dir, boots the multi-NUMA
# guest (run-guest.sh) and runs in_guest.py MODE there. Usage: guest_test.sh MODE POLYACCEL PROBE
set -euo pipefail
mode=$1 polyaccel=$2 probe=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/polyaccel-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$here/build-initramfs.sh" "$work"
cat > "$work/script.sh" <<SCRIPT
# 2 MiB pages on every node, more on node 1: topo must report them per node.
for n in 0 1 2 3; do echo \$((8 + 8 * (n == 1))) > /sys/devices/system/node/node\$n/hugepages/hugepages-2048kB/nr_hugepages; done
# torchrun's rendezvous (Guest.run) is over the guest's loopback, which the init leaves down.
ip link set lo up
exec python3 "$here/in_guest.py" "$mode" "$polyaccel" "$probe"
SCRIPT
set +e
"$here/run-guest.sh" "$work" "$work/script.sh" "${GUEST_TIMEOUT:-360}"
rc=$?
set -e
cat "$work/out/guest.log" 2>/dev/null || true
exit $rc
