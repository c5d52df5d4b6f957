#!/usr/bin/env bash
# ctest driver of Guest.node-containerd17 (SUITE trixie: Debian 13's containerd 1.7) and
# Guest.node-containerd21 (SUITE forky: containerd 2.1): a Kubernetes container runtime node
# (containerd's CRI plugin with CDI and NRI, runc) in the multi-NUMA guest, driven over CRI as
# kubelet drives it, running the specs of `polyaccel cdi generate` and their polyaccel-cdi-hook
# (tests/guest/cri_node.py says what is checked and measured). Here, on the host: the node root
# (node_root.sh, cached; exit 77, a skip, when it is not cached and there is no network), the
# images (node_images.sh), the CRI client (cri_api.proto, protoc'd with grpc_tools), the initramfs.
# The DRA and device-plugin overlays are rendered here (kubectl kustomize) for the agent's pods,
# with the least-privilege component.
# Usage: guest_node_test.sh SUITE POLYACCEL INJECT_NVML NVML_SCENARIO TOPOLOGY_XML INJECT_CUDA HOOK
#   NODE_KUBELET IMAGE_ARCHIVE
# Environment: GUEST_TIMEOUT (s, default 1000), NODE_TEST_RUNS (containers per start-time median,
# default 20).
set -euo pipefail
suite=$1 polyaccel=$2 nvml=$3 scenario=$4 topology=$5 cuda=$6 hook=$7 node_kubelet=$8 archive=$9
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
start=$(date +%s)
/usr/bin/python3 -c 'import grpc, grpc_tools.protoc' 2> /dev/null ||
  { echo "guest_node_test: python3-grpcio or python3-grpc-tools is missing (scripts/install-deps.sh)" >&2; exit 2; }
set +e
node=$("$here/node_root.sh" "$suite")
rc=$?
set -e
[ "$rc" -eq 0 ] || exit "$rc"
echo "guest_node_test: node root $node ($(tr '\n' ' ' < "$node/.polyaccel-node-root")), ready after $(($(date +%s) - start)) s"
found=$(find "$node" -xdev -iname '*polyaccel*' -not -name .polyaccel-node-root | head -5)
[ -z "$found" ] || { echo "guest_node_test: the node root holds polyaccel files: $found" >&2; exit 2; }
work=$(mktemp -d /tmp/polyaccel-node.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The guest's scratch directory, bound at the same path into the node (cri_node.py); the images'
# ld.so.conf.d entries lead to its victim/.
guest_work=/tmp/polyaccel-node-guest
mkdir "$work/pb"
/usr/bin/python3 -m grpc_tools.protoc -I"$here" --python_out="$work/pb" --grpc_python_out="$work/pb" \
  "$here/cri_api.proto"
"$here/node_images.sh" "$work/images.tar" "$guest_work/victim"
[ -s "$archive" ] || { echo "guest_node_test: $archive is missing (the Image.build test makes it)" >&2; exit 2; }
# Each with the least-privilege component (docs/kubernetes.md, "What each variant needs, and
# why"), as an operator combines them: the agents run unprivileged, with the GPUs the NVIDIA
# runtime would give them (node_agent.py).
for overlay in dra device-plugin; do
  mkdir "$work/k-$overlay"
  printf 'resources:\n  - %s\ncomponents:\n  - %s\n' \
    "$(realpath --relative-to="$work/k-$overlay" "$src/deploy/kubernetes/overlays/$overlay")" \
    "$(realpath --relative-to="$work/k-$overlay" "$src/deploy/kubernetes/components/least-privilege")" \
    > "$work/k-$overlay/kustomization.yaml"
  kubectl kustomize "$work/k-$overlay" 2> /dev/null > "$work/$overlay.yaml"
  /usr/bin/python3 -c 'import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], open(sys.argv[2], "w"))' \
    "$work/$overlay.yaml" "$work/$overlay.json"
done
"$here/build-initramfs.sh" "$work"
cat > "$work/script.sh" <<SCRIPT
# runc and containerd's cgroupfs driver want the unified cgroup hierarchy, which the init does not mount.
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# The agent pods reach the test API server on the node's loopback (the init leaves it down).
ip link set lo up
cd "$here"
exec /usr/bin/python3 "$here/cri_node.py" "$node" "$work" "$guest_work" "$polyaccel" "$nvml" \
  "$scenario" "$topology" "$cuda" "$hook" "$node_kubelet" "$archive" "$work/dra.json" \
  "$work/device-plugin.json"
SCRIPT
[ -z "${NODE_TEST_RUNS:-}" ] || sed -i "1i export NODE_TEST_RUNS=$NODE_TEST_RUNS" "$work/script.sh"
# The commit the image's annotations, build_info and --version must name.
sed -i "1i export POLYACCEL_REVISION=$(git -C "$src" rev-parse HEAD)" "$work/script.sh"
echo "guest_node_test: booting the guest $(($(date +%s) - start)) s after the start"
set +e
"$here/run-guest.sh" "$work" "$work/script.sh" "${GUEST_TIMEOUT:-1000}"
rc=$?
set -e
cat "$work/out/guest.log" 2>/dev/null || true
echo "guest_node_test: $suite: total wall time $(($(date +%s) - start)) s (exit $rc)"
exit $rc
