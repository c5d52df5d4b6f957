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
  # the agent's TLS (OpenSSL) and basic_auth_users' bcrypt (libxcrypt): src/exporter/web_security.cc
  libssl-dev libcrypt-dev
  # a real TLS server in front of the test API server (tests/dra/tls_api_server_test.cc)
  socat openssl
  # the live multi-NUMA guest of tests/guest: QEMU (TCG), Debian's kernel, busybox for its init
  qemu-system-x86 linux-image-amd64 busybox-static cpio python3 file
  # libvirtd and its QEMU driver inside that guest (Guest.libvirt: place --libvirt started for real)
  libvirt-daemon libvirt-daemon-driver-qemu
  # the container runtime that runs our CDI specs in that guest (tests/guest/cdi_podman.py)
  podman crun conmon
  # the CRI client that plays kubelet against containerd in that guest (tests/guest/cri_node.py)
  python3-grpcio python3-grpc-tools
  # `make image` and `make deb` (scripts/build-image.sh, build-deb.sh), and their tests: the
  # image's root from Debian's packages, the OCI layout, the rendered manifests' reading
  mmdebstrap umoci dpkg-dev python3-yaml
  # `ctr images import` of that image into a containerd the test starts (Image.containerd); on a
  # host with systemd the package also starts its own containerd service (a unix socket only)
  containerd
  # the launchers `polyaccel run` is tested under (tests/launch/launchers_test.py): torchrun
  # (CPU torch, gloo), Open MPI's and MPICH's mpirun, Slurm's srun with its own slurmctld and
  # slurmd (on a host with systemd, their packages also start services of their own)
  python3-torch openmpi-bin mpich slurmd slurmctld slurm-client
  # node for the CEL evaluator of tests/deploy (npm's @bufbuild/cel, installed below)
  nodejs
  # `make bench-check` counts instructions under callgrind (scripts/bench-check.sh)
  valgrind
)
# `install-deps.sh bench` (make bench) adds the peer of bench/agent_vs_node_exporter.py. Not for
# the tests: on a host with systemd the package starts a node_exporter service on :9100.
if [ "${1:-}" = bench ]; then
  packages+=(prometheus-node-exporter)
fi

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi

# Debian 12's kubectl 1.20 (kustomize v2.0.3), unpacked beside whatever kubectl the host has (a
# current one, kustomize v5; Debian's package would conflict with it): tests/deploy renders every
# overlay of deploy/kubernetes with both.
kubectl_v2=/usr/local/lib/polyaccel-test/kubectl-1.20
if [ ! -x "$kubectl_v2/kubectl" ]; then
  deb_dir=$(mktemp -d)
  chmod 0755 "$deb_dir"  # apt's download user writes there
  ( cd "$deb_dir" && { apt-get download -qq kubernetes-client 2> /dev/null ||
      { $sudo apt-get update -qq && apt-get download -qq kubernetes-client; }; } ) >&2
  dpkg-deb -x "$deb_dir"/kubernetes-client_*.deb "$deb_dir/root"
  $sudo install -D -m 0755 "$deb_dir/root/usr/bin/kubectl" "$kubectl_v2/kubectl"
  rm -rf "$deb_dir"
fi
# A host without any kubectl gets that one on PATH (the docs' examples and the Guest.node-* renders use it).
command -v kubectl > /dev/null || $sudo ln -sf "$kubectl_v2/kubectl" /usr/local/bin/kubectl

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -ne 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Packages of Debian forky (testing) that tests read but Debian 12 lacks, unpacked (dpkg-deb -x)
# under /usr/local/lib/polyaccel-test/<package>: apt-get with a private sources list, lists and
# cache in a temporary directory, so the host's apt sources and dpkg database stay as they are.
# opentelemetry-proto: OpenTelemetry's published .proto files, with which tests/exporter/otlp_test
# decodes the agent's OTLP requests; prometheus (3.5): the scraper of UTF-8 names
# (escaping=allow-utf-8) in tests/exporter/utf8_names_test (Debian 12's is 2.42).
forky_unpack() {
  local package=$1 dest=/usr/local/lib/polyaccel-test/$1
  [ -f "$dest/.unpacked" ] && return 0
  local tmp
  tmp=$(mktemp -d)
  chmod 0755 "$tmp"  # apt's download user writes there
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
  echo "deb ${POLYACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian} forky main" > "$tmp/sources.list"
  local opts=(-o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o Debug::NoLocking=1)
  ( cd "$tmp" && apt-get "${opts[@]}" update -qq && apt-get "${opts[@]}" download -qq "$package" ) >&2
  $sudo rm -rf "$dest"
  $sudo mkdir -p "$dest"
  $sudo dpkg-deb -x "$tmp/${package}"_*.deb "$dest"
  $sudo touch "$dest/.unpacked"
  rm -rf "$tmp"
}
forky_unpack opentelemetry-proto
forky_unpack prometheus

# A CEL evaluator, pinned, for tests/deploy: the DRA overlay's ValidatingAdmissionPolicy has its
# expressions evaluated on requests for the agent's own node and for another. npm comes with a
# nodejs from elsewhere (NodeSource); Debian's nodejs needs Debian's npm.
cel_dir=/usr/local/lib/polyaccel-test/cel
if [ ! -f "$cel_dir/node_modules/@bufbuild/cel/package.json" ]; then
  if ! command -v npm > /dev/null; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  $sudo npm install --silent --no-audit --no-fund --prefix "$cel_dir" @bufbuild/cel@0.6.1 >&2
fi
