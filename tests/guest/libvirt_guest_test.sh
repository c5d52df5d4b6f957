#!/usr/bin/env bash
# ctest driver of Guest.libvirt: boots the multi-NUMA guest (run-guest.sh) with 40 2 MiB pages on
# every node and runs in_guest_libvirt.py there: place --libvirt's XML started by libvirtd + QEMU
# in the guest, and polyaccel counting the running domains. Usage: libvirt_guest_test.sh POLYACCEL
set -euo pipefail
polyaccel=$(realpath "$1")  # the guest runs it from another directory
here=$(cd "$(dirname "$0")" && pwd)
for tool in libvirtd virsh qemu-system-x86_64; do
  command -v "$tool" > /dev/null || { echo "libvirt_guest_test: no $tool (scripts/install-deps.sh)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/polyaccel-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$here/build-initramfs.sh" "$work"
cat > "$work/script.sh" <<SCRIPT
for n in 0 1 2 3; do echo 40 > /sys/devices/system/node/node\$n/hugepages/hugepages-2048kB/nr_hugepages; done
exec python3 "$here/in_guest_libvirt.py" "$polyaccel"
SCRIPT
set +e
start=$(date +%s)
"$here/run-guest.sh" "$work" "$work/script.sh" "${GUEST_TIMEOUT:-840}"
rc=$?
set -e
cat "$work/out/guest.log" 2>/dev/null || true
echo "Guest.libvirt: $(( $(date +%s) - start )) s from boot to poweroff"
exit $rc
