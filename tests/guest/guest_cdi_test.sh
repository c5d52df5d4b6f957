#!/usr/bin/env bash
# ctest driver of Guest.cdi: boots the multi-NUMA guest (build-initramfs.sh, run-guest.sh), where
# the test is real root on Debian's kernel, and runs cdi_podman.py there: specs written by
# `polyaccel cdi generate` are run by podman and crun (tests/guest/cdi_podman.py says what is
# checked). Usage: guest_cdi_test.sh POLYACCEL INJECT_NVML NVML_SCENARIO TOPOLOGY_XML INJECT_CUDA
set -euo pipefail
polyaccel=$1 nvml=$2 scenario=$3 topology=$4 cuda=$5
here=$(cd "$(dirname "$0")" && pwd)
for tool in podman crun conmon; do
  command -v "$tool" > /dev/null || { echo "guest_cdi_test: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/polyaccel-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$here/build-initramfs.sh" "$work"
cat > "$work/script.sh" <<SCRIPT
# crun and podman's cgroupfs manager want the unified cgroup hierarchy, which the init does not mount.
mount -t cgroup2 cgroup2 /sys/fs/cgroup
exec python3 "$here/cdi_podman.py" "$polyaccel" "$nvml" "$scenario" "$topology" "$cuda"
SCRIPT
set +e
"$here/run-guest.sh" "$work" "$work/script.sh" "${GUEST_TIMEOUT:-360}"
rc=$?
set -e
cat "$work/out/guest.log" 2>/dev/null || true
exit $rc
