#!/usr/bin/env bash
# `make deb`: polyaccel_<version>_amd64.deb for hosts outside Kubernetes (hypervisors, Slurm
# nodes): the binary, the systemd units (polyaccel-agent.service enabled and started, as Debian
# does for a daemon; polyaccel-mig.service when /etc/polyaccel/mig-config.yaml exists), bash/zsh/
# fish completion, the man pages, a commented /etc/polyaccel/config.yaml and
# /etc/default/polyaccel-agent (both conffiles). Depends: the runtime libraries
# (scripts/runtime-packages.sh). Built with dpkg-deb from a staged tree; no debhelper needed.
# Usage: build-deb.sh BUILD_DIR OUTPUT_DIR   (prints the .deb's path)
set -euo pipefail
build=${1:?usage: build-deb.sh BUILD_DIR OUTPUT_DIR}
outdir=${2:?usage: build-deb.sh BUILD_DIR OUTPUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
binary="$build/src/polyaccel"
[ -x "$binary" ] || { echo "build-deb: $binary is missing (make build)" >&2; exit 2; }
version=$("$binary" --version | awk '{print $2}')
# The binary names the commit it was configured at; an image or package of a stale build would
# carry a revision its binary does not have.
# In a tree without .git (a tarball of `make dist`) the commit is the one the tarball names
# (scripts/source-revision.sh), as it was for the binary's configure.
built=$("$binary" --version | sed -n 's/.*commit \([0-9a-z]*\).*/\1/p')
read -r revision commit_time <<< "$("$here/source-revision.sh" "$src")"
[ "$built" = "${revision:0:12}" ] || { echo "build-deb: $binary is of commit ${built:-(none)}, the tree is at ${revision:0:12}: make build first" >&2; exit 2; }
arch=$(dpkg --print-architecture)
epoch=${SOURCE_DATE_EPOCH:-${commit_time:-$(date +%s)}}
export SOURCE_DATE_EPOCH=$epoch

work=$(mktemp -d /tmp/polyaccel-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
stage="$work/stage"
DESTDIR="$stage" cmake --install "$build" --prefix /usr --strip > /dev/null
install -D -m 0644 "$src/deploy/debian/config.yaml" "$stage/etc/polyaccel/config.yaml"
install -D -m 0644 "$src/deploy/debian/polyaccel-agent.default" "$stage/etc/default/polyaccel-agent"
gzip -9n "$stage"/usr/share/man/man1/*.1
# Debian policy 12.5: every package has /usr/share/doc/<package>/copyright.
install -D -m 0644 "$src/deploy/debian/copyright" "$stage/usr/share/doc/polyaccel/copyright"
source_url=${IMAGE_SOURCE-$("$here/source-url.sh" "$src")}
{
  echo "polyaccel $version"
  echo "Commit: $revision"
  [ -z "$source_url" ] || echo "Source: $source_url"
  echo "Documentation: docs/install.md of the source tree."
} > "$stage/usr/share/doc/polyaccel/README"

install -d "$stage/DEBIAN"
depends=$("$here/runtime-packages.sh" "$binary" --versioned)
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: polyaccel
Version: $version
Architecture: $arch
Maintainer: polyaccel developers <polyaccel@localhost>
Installed-Size: $size
Depends: $depends, init-system-helpers (>= 1.54~)
Recommends: hwloc
Suggests: libnvidia-ml1, librocm-smi64-1
Section: admin
Priority: optional
Description: accelerator performance layer: topology, tuning audit, NUMA placement, exporter
 polyaccel discovers a host's CPUs, NUMA nodes, hugepages, GPUs/HPUs, RDMA NICs and the
 PCIe/NVLink paths between them; audits the host's tuning; places VMs and processes
 NUMA-aligned (Nova's flavor extra specs, libvirt XML, bound launches); plans and applies
 MIG layouts; and runs as an agent: a Prometheus exporter with DCGM-exporter's and AMD's
 metric names, and on Kubernetes nodes a device plugin and DRA driver.
 The vendors' libraries (NVML, ROCm SMI, HLML) come with their drivers and are loaded at run
 time when present.
EOF
printf '/etc/polyaccel/config.yaml\n/etc/default/polyaccel-agent\n' > "$stage/DEBIAN/conffiles"

# Maintainer scripts as debhelper's dh_installsystemd writes them, by hand: enable and start the
# agent on a first install, restart it on an upgrade, stop it on removal, forget it on purge.
# deb-systemd-helper works without a running systemd (a chroot, an image build).
cat > "$stage/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] || [ "$1" = abort-upgrade ]; then
  if deb-systemd-helper debian-installed polyaccel-agent.service; then
    deb-systemd-helper update-state polyaccel-agent.service > /dev/null || true
  else
    deb-systemd-helper enable polyaccel-agent.service > /dev/null || true
  fi
  deb-systemd-helper update-state polyaccel-mig.service > /dev/null || true
  if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload > /dev/null || true
    if [ -n "$2" ]; then
      deb-systemd-invoke try-restart polyaccel-agent.service > /dev/null || true
    else
      deb-systemd-invoke start polyaccel-agent.service > /dev/null || true
    fi
  fi
fi
exit 0
EOF
cat > "$stage/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  deb-systemd-invoke stop polyaccel-agent.service > /dev/null || true
fi
exit 0
EOF
cat > "$stage/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload > /dev/null || true
fi
if [ "$1" = purge ] && [ -x /usr/bin/deb-systemd-helper ]; then
  deb-systemd-helper purge polyaccel-agent.service polyaccel-mig.service > /dev/null || true
fi
exit 0
EOF
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
find "$stage" -exec touch --no-dereference -d "@$epoch" {} +

mkdir -p "$outdir"
deb="$outdir/polyaccel_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb.tmp" > /dev/null
mv "$deb.tmp" "$deb"
echo "$deb"
