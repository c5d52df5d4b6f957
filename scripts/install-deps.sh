#!/usr/bin/env bash
# Installs every Debian 12 package that polyaccel's build and tests need (`bench`: and the benches').
# Idempotent: quick when everything is present; runs `apt-get update` only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache clang-format
  clang llvm libclang-rt-14-dev
  libhwloc-dev hwloc libnuma-dev
  prometheus-cpp-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libtomlplusplus-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  prometheus libvirt-clients libxml2-utils libxml2-dev
  bzip2 tar curl pci.ids
  libcurl4-openssl-dev libcivetweb-dev zlib1g-dev
  # kubectl 1.20 (kustomize v2.0.3): tests/deploy renders every overlay of deploy/kubernetes
  kubernetes-client
  # a real TLS server in front of the test API server (tests/dra/tls_api_server_test.cc)
  socat openssl
  # the live multi-NUMA guest of tests/guest: QEMU (TCG), Debian's kernel, busybox for its init
  qemu-system-x86 linux-image-amd64 busybox-static cpio python3 file
  # libvirtd and its QEMU driver inside that guest (Guest.libvirt: place --libvirt started for real)
  libvirt-daemon libvirt-daemon-driver-qemu
  # the container runtime that runs our CDI specs in that guest (tests/guest/cdi_podman.py)
  podman crun conmon
)
# `install-deps.sh bench` (make bench) adds the peer of bench/agent_vs_node_exporter.py. Not for
# the tests: on a host with systemd the package starts a node_exporter service on :9100.
if [ "${1:-}" = bench ]; then
  packages+=(prometheus-node-exporter)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi
echo "install-deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
