#!/usr/bin/env bash
# `make deb SUITE=trixie`: the .deb built for another Debian release than this machine's, inside a
# build root of that release (mmdebstrap, variant buildd, with the build's -dev packages), so that
# the package's Depends are that release's library packages (scripts/runtime-packages.sh asks the
# root's dpkg; Debian 13 renamed many, e.g. libcurl4t64, libyaml-cpp0.8). The root is cached
# under $POLYACCEL_TEST_CACHE (default /var/cache/polyaccel-test) as build-SUITE-v1, with its own
# ccache, so a second build compiles only what changed. The committed HEAD is built (git
# archive), or the tree itself where there is no .git (a tarball of `make dist`); the tests are
# left out (-DBUILD_TESTING=OFF). Root, network to the Debian archive.
# Usage: build-deb-suite.sh SUITE OUTPUT_DIR   (prints the .deb's path: OUTPUT_DIR/SUITE/*.deb)
# Environment: POLYACCEL_DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
suite=${1:?usage: build-deb-suite.sh SUITE OUTPUT_DIR}
outdir=${2:?usage: build-deb-suite.sh SUITE OUTPUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd -P)
case $suite in *[!a-z]* | "") echo "build-deb-suite: $suite: not a Debian suite name" >&2; exit 2 ;; esac
cache=${POLYACCEL_TEST_CACHE:-/var/cache/polyaccel-test}
mirror=${POLYACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "build-deb-suite: run as root (mmdebstrap, chroot)" >&2; exit 2; }
command -v mmdebstrap > /dev/null || { echo "build-deb-suite: mmdebstrap is missing (scripts/install-deps.sh)" >&2; exit 2; }

# What the build needs of scripts/install-deps.sh's list (not the tests' packages), and dpkg-dev
# for dpkg-shlibdeps.
packages=(cmake pkg-config ccache libhwloc-dev libnuma-dev prometheus-cpp-dev libgrpc++-dev
  protobuf-compiler-grpc libprotobuf-dev protobuf-compiler nlohmann-json3-dev libcli11-dev
  libyaml-cpp-dev libtomlplusplus-dev libxml2-dev libcurl4-openssl-dev libcivetweb-dev zlib1g-dev
  libssl-dev libcrypt-dev dpkg-dev pci.ids)
# v1: bump when the list changes, so a stale cache is not reused.
root="$cache/build-$suite-v1"
mkdir -p "$cache"
exec 9> "$cache/.build-root.lock"
flock 9
if [ ! -f "$root/.polyaccel-build-root" ]; then
  tmp="$root.tmp.$$"
  rm -rf "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  start=$SECONDS
  mmdebstrap --quiet --variant=buildd --include="$(IFS=,; echo "${packages[*]}")" \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$tmp" "$mirror" > "$cache/build-$suite.log" 2>&1 ||
    { echo "build-deb-suite: mmdebstrap of $suite failed ($cache/build-$suite.log):" >&2; tail -20 "$cache/build-$suite.log" >&2; exit 2; }
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start)) s" > "$tmp/.polyaccel-build-root"
  rm -rf "$root"
  mv "$tmp" "$root"
  trap - EXIT
  echo "build-deb-suite: built the $suite build root in $((SECONDS - start)) s" >&2
fi

# The source, fresh each time: HEAD's tarball (as `make dist`), or this tree without .git.
rm -rf "$root/src" "$root/out"
mkdir -p "$root/src" "$root/out" "$root/var/cache/ccache"
top=$(git -C "$src" rev-parse --show-toplevel 2> /dev/null || true)
if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$src" ]; then
  git -C "$src" archive HEAD | tar -x -C "$root/src"
else
  tar -C "$src" --exclude=./build --exclude='./build-*' -c . | tar -x -C "$root/src"
fi
# /proc and /dev for the compilers, in a mount namespace of its own: nothing stays mounted.
start=$SECONDS
# shellcheck disable=SC2016 # (the inner shell expands $1)
unshare --mount --fork bash -euo pipefail -c '
  root=$1
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root CCACHE_DIR=/var/cache/ccache \
    CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=true bash -euo pipefail -c "
      cmake -S /src -B /src/build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > /dev/null
      cmake --build /src/build -j2 > /src/build.log 2>&1 || { tail -40 /src/build.log >&2; exit 1; }
      bash /src/scripts/build-deb.sh /src/build /out"
' build-deb-suite "$root" > "$root/out/path" ||
  { echo "build-deb-suite: the build in the $suite root failed" >&2; exit 2; }
echo "build-deb-suite: built in the $suite root in $((SECONDS - start)) s" >&2
deb=$(basename "$(cat "$root/out/path")")
mkdir -p "$outdir/$suite"
cp "$root/out/$deb" "$outdir/$suite/$deb"
echo "$outdir/$suite/$deb"
