#!/usr/bin/env bash
# The "node root" of the guest node tests (guest_node_test.sh): a plain Debian root of SUITE with
# only containerd and runc added (mmdebstrap, minbase), what a Kubernetes node of that Debian
# release runs. None of polyaccel's files are in it: the CDI hook the runtime runs must work with
# only what the node has. Cached under $POLYACCEL_TEST_CACHE (default /var/cache/polyaccel-test)
# as node-SUITE-v1, built once (about a minute from Debian's archive) and reused read-only.
# Usage: node_root.sh SUITE  -> prints the root's path.
# Exit 77 when the root is not cached and Debian's archive cannot be reached (no network).
# Environment: POLYACCEL_DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
suite=${1:?usage: node_root.sh SUITE}
cache=${POLYACCEL_TEST_CACHE:-/var/cache/polyaccel-test}
mirror=${POLYACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# v1: bump when what goes into the root changes, so a stale cache is not reused.
root="$cache/node-$suite-v1"
if [ -f "$root/.polyaccel-node-root" ]; then
  echo "$root"
  exit 0
fi
command -v mmdebstrap > /dev/null || { echo "node_root: mmdebstrap is missing (scripts/install-deps.sh)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "node_root: run as root (mmdebstrap keeps file owners)" >&2; exit 2; }
mkdir -p "$cache"
exec 9> "$cache/.node-root.lock"
flock 9
if [ -f "$root/.polyaccel-node-root" ]; then  # another run built it meanwhile
  echo "$root"
  exit 0
fi
tmp="$root.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
# An archive snapshot's Release file can be past its Valid-Until (testing suites are signed for a
# week): what matters here is the packages, not their freshness.
if ! mmdebstrap --quiet --variant=minbase --include=containerd,runc \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$tmp" "$mirror" > "$cache/node-$suite.log" 2>&1; then
  host=${mirror#*://}
  host=${host%%/*}
  port=80
  [ "${mirror%%://*}" != https ] || port=443
  case $host in *:*) port=${host##*:} host=${host%:*} ;; esac
  if ! timeout 15 bash -c "exec 3<>/dev/tcp/$host/$port" 2> /dev/null; then
    echo "node_root: SKIP: cannot reach $host:$port to build the $suite node root (no network)" >&2
    exit 77
  fi
  echo "node_root: mmdebstrap of $suite failed ($cache/node-$suite.log):" >&2
  tail -20 "$cache/node-$suite.log" >&2
  exit 2
fi
for tool in containerd ctr runc; do
  [ -x "$tmp/usr/bin/$tool" ] || [ -x "$tmp/usr/sbin/$tool" ] ||
    { echo "node_root: $suite's root has no $tool" >&2; exit 2; }
done
# Mount points the guest test puts tmpfs on (the root is read-only there, a 9p share of the host's).
mkdir -p "$tmp/var/lib/containerd" "$tmp/usr/local/bin"
# What every installed node has and a pod in the node's network namespace gets a copy of.
[ -s "$tmp/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$tmp/etc/hosts"
[ -s "$tmp/etc/hostname" ] || echo node > "$tmp/etc/hostname"
[ -e "$tmp/etc/resolv.conf" ] || : > "$tmp/etc/resolv.conf"
found=$(find "$tmp" -xdev -iname '*polyaccel*' | head -5)
[ -z "$found" ] || { echo "node_root: the node root holds polyaccel files: $found" >&2; exit 2; }
{
  echo "suite=$suite"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s"
  # shellcheck disable=SC2016 # (dpkg-query's format, not the shell's)
  chroot "$tmp" dpkg-query -W -f='${Package}=${Version}\n' containerd runc
} > "$tmp/.polyaccel-node-root"
rm -rf "$root"
mv "$tmp" "$root"
trap - EXIT
echo "node_root: built the $suite node root in $(($(date +%s) - start)) s" >&2
echo "$root"
