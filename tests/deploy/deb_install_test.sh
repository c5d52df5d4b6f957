#!/usr/bin/env bash
# Package.deb: `make deb`'s package installed as an operator installs it, in a fresh Debian 12 root
# (Package.deb-SUITE: the package of `make deb-suite SUITE=...`, built in a root of that release,
# in a fresh root of that release)
# (mmdebstrap, variant apt: Essential packages and apt, nothing of this machine's; and systemd and
# man-db, as a hypervisor has them), with
# `apt-get install ./polyaccel_*.deb`, which brings the runtime libraries from the archive.
# Checked there: polyaccel --version names the build's commit and runs a command on a captured
# topology; the units pass `systemd-analyze verify`; the agent is enabled, the MIG unit is not;
# the conffiles are in place; `apt-get purge` leaves none of the package's files.
# Usage: deb_install_test.sh BUILD_DIR TOPOLOGY_XML [SUITE [DEB]]   (SUITE: default bookworm, this
#   machine's release, whose package is built from BUILD_DIR; another is built by
#   scripts/build-deb-suite.sh from the committed HEAD; DEB: that package, already built)
set -euo pipefail
build=$1 topology=$2 suite=${3:-bookworm} prebuilt=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
for tool in mmdebstrap dpkg-deb systemd-analyze; do
  command -v "$tool" > /dev/null || { echo "deb_install_test: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/polyaccel-deb-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/deploy/check.sh
. "$here/check.sh"

start=$SECONDS
if [ "$suite" = bookworm ]; then
  deb=$("$src/scripts/build-deb.sh" "$build" "$work")
  revision=$("$build/src/polyaccel" --version | sed -n 's/.*commit \([0-9a-f]*\).*/\1/p')
  sources=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && sources+=("$f")
  done
else
  deb=$prebuilt
  [ -n "$deb" ] || deb=$("$src/scripts/build-deb-suite.sh" "$suite" "$work")
  # The commit its README names (scripts/build-deb.sh).
  revision=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/polyaccel/README | sed -n 's/^Commit: //p')
  revision=${revision:0:12}
  sources=("${POLYACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}")
fi
echo "info $(basename "$deb") for $suite: $(stat -c %s "$deb") bytes, built in $((SECONDS - start)) s"
echo "info Depends: $(dpkg-deb -f "$deb" Depends)"
root="$work/root"
start=$SECONDS
mmdebstrap --quiet --variant=apt --format=directory --include=systemd,man-db \
  --customize-hook="copy-in $deb /tmp" \
  --customize-hook='chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/'"$(basename "$deb")"' > "$1/tmp/apt-install.log" 2>&1 || { cat "$1/tmp/apt-install.log"; exit 1; }' \
  --aptopt='Acquire::Check-Valid-Until "false"' "$suite" "$root" "${sources[@]}"
echo "info fresh $suite root with the package installed in $((SECONDS - start)) s"
mkdir -p "$root/tmp/capture"
cp "$topology" "$root/tmp/capture/topology.xml"
check "polyaccel --version names the build's commit $revision" \
  sh -c "chroot '$root' polyaccel --version | grep -F 'commit $revision'"
check "polyaccel topo runs on a capture in the installed root" \
  chroot "$root" polyaccel topo --topology /tmp/capture/topology.xml -q
check "polyaccel report runs on a capture in the installed root" \
  chroot "$root" polyaccel report --topology /tmp/capture/topology.xml -q
check "copyright file installed (Debian policy 12.5)" test -s "$root/usr/share/doc/polyaccel/copyright"
check "man page and bash completion installed" \
  test -f "$root/usr/share/man/man1/polyaccel-agent.1.gz" -a -f "$root/usr/share/bash-completion/completions/polyaccel"
check "conffiles in place: /etc/polyaccel/config.yaml, /etc/default/polyaccel-agent" \
  test -f "$root/etc/polyaccel/config.yaml" -a -f "$root/etc/default/polyaccel-agent"
check "the commented default config is accepted as it is" \
  chroot "$root" polyaccel topo --topology /tmp/capture/topology.xml -q --config /etc/polyaccel/config.yaml
for unit in polyaccel-agent.service polyaccel-mig.service; do
  check "systemd-analyze verify $unit" \
    sh -c "chroot '$root' systemd-analyze verify /lib/systemd/system/$unit 2>&1 | tee /dev/stderr | (! grep -q .)"
done
check "polyaccel-agent.service enabled on install" \
  test -L "$root/etc/systemd/system/multi-user.target.wants/polyaccel-agent.service"
check "polyaccel-mig.service not enabled (it needs a MIG config)" \
  test ! -e "$root/etc/systemd/system/multi-user.target.wants/polyaccel-mig.service"
check "apt-get purge removes it" chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q polyaccel
check "no file of the package left" \
  sh -c "! ls '$root/usr/bin/polyaccel' '$root/etc/polyaccel/config.yaml' '$root/lib/systemd/system/polyaccel-agent.service' '$root/etc/systemd/system/multi-user.target.wants/polyaccel-agent.service' 2>/dev/null | grep ."
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
