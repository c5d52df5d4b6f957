#!/usr/bin/env bash
# ctest driver of Guest.image: renders the default overlay's manifests here, then boots the
# multi-NUMA guest and runs image_daemonset.py there: podman runs the image (made by the
# Image.build test, scripts/build-image.sh) as the rendered DaemonSet does
# (tests/guest/image_daemonset.py says what is checked).
# Usage: guest_image_test.sh ARCHIVE FAKE_KUBELET INJECT_NVML SCENARIO TOPOLOGY
set -euo pipefail
archive=$1 fake_kubelet=$2 nvml=$3 scenario=$4 topology=$5
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
overlay=${POLYACCEL_DEFAULT_OVERLAY:-$src/deploy/kubernetes/overlays/device-plugin}
for tool in podman crun conmon kubectl; do
  command -v "$tool" > /dev/null || { echo "guest_image_test: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/polyaccel-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
[ -s "$archive" ] || { echo "guest_image_test: $archive is missing (the Image.build test makes it)" >&2; exit 2; }
kubectl kustomize "$overlay" > "$work/rendered.yaml"
/usr/bin/python3 -c 'import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], open(sys.argv[2], "w"))' \
  "$work/rendered.yaml" "$work/rendered.json"
revision=$(git -C "$src" rev-parse HEAD)
"$here/build-initramfs.sh" "$work"
cat > "$work/script.sh" <<SCRIPT
# crun and podman's cgroupfs manager want the unified cgroup hierarchy, which the init does not mount.
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# podman 4.3's load unpacks an OCI archive under /var/tmp whatever TMPDIR says.
mount -t tmpfs vartmp /var/tmp
# /metrics is read on the container's port over the guest's loopback (the init leaves it down).
ip link set lo up
cd "$here"
exec /usr/bin/python3 "$here/image_daemonset.py" "$archive" "$work/rendered.json" \
  "$fake_kubelet" "$nvml" "$scenario" "$topology" "$revision"
SCRIPT
set +e
"$here/run-guest.sh" "$work" "$work/script.sh" "${GUEST_TIMEOUT:-480}"
rc=$?
set -e
cat "$work/out/guest.log" 2>/dev/null || true
exit $rc
