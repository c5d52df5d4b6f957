#!/usr/bin/env bash
# The images of the guest node tests (cri_node.py), made here since no registry is reachable: one
# OCI layout archive, made with umoci from busybox-static, that `ctr -n k8s.io images import`
# loads as five images (io.containerd.image.name in the index):
#   localhost/polyaccel-node-test/pause:1       the CRI sandbox ("pause") image: sleeps
#   localhost/polyaccel-node-test/workload:1    busybox's applets, Debian's static /sbin/ldconfig
#                                               (`ldconfig -p` reads the cache the hook wrote) and
#                                               the usual /etc/ld.so.conf(.d) of a Debian image
#   localhost/polyaccel-node-test/evil-proc:1   the workload plus an ld.so.conf.d entry that leads
#                                               out of the container through /proc/1/root to VICTIM
#   localhost/polyaccel-node-test/evil-dotdot:1 the same through "..", absolute and relative
#                                               symlinks
#   localhost/polyaccel-node-test/evil-links:1  the workload whose /etc/ld.so.cache is an
#                                               absolute symlink to VICTIM/ld.so.cache
# VICTIM is a directory of the node (outside the container) that the update-ldcache hook must
# neither write to nor list. Usage: node_images.sh OUT.tar VICTIM
set -euo pipefail
output=${1:?usage: node_images.sh OUT.tar VICTIM}
victim=${2:?usage: node_images.sh OUT.tar VICTIM}
for tool in umoci python3; do
  command -v "$tool" > /dev/null || { echo "node_images: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
busybox=$(command -v busybox || true)
[ -x /bin/busybox ] && busybox=/bin/busybox
file -L "$busybox" 2> /dev/null | grep -q "statically linked" ||
  { echo "node_images: busybox is not static (install busybox-static)" >&2; exit 2; }
file -L /sbin/ldconfig | grep -q "static-pie linked\|statically linked" ||
  { echo "node_images: /sbin/ldconfig is not static" >&2; exit 2; }
work=$(mktemp -d /tmp/polyaccel-node-images.XXXXXX)
trap 'rm -rf "$work"' EXIT
base="$work/base"
mkdir -p "$base"/{bin,sbin,dev,proc,sys,tmp,run,opt,etc/ld.so.conf.d,usr/lib/x86_64-linux-gnu}
cp "$busybox" "$base/bin/busybox"
for applet in sh stat env sed [ readlink cat ls sleep true echo find grep; do
  ln -s busybox "$base/bin/$applet"
done
cp /sbin/ldconfig "$base/sbin/ldconfig"
echo "include /etc/ld.so.conf.d/*.conf" > "$base/etc/ld.so.conf"
printf '/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n' \
  > "$base/etc/ld.so.conf.d/x86_64-linux-gnu.conf"
# The ways out of the container's root an ld.so.conf line may take.
evil_proc="$work/evil-proc"
mkdir -p "$evil_proc/etc/ld.so.conf.d"
echo "/proc/1/root$victim" > "$evil_proc/etc/ld.so.conf.d/evil.conf"
evil_dotdot="$work/evil-dotdot"
mkdir -p "$evil_dotdot/etc/ld.so.conf.d" "$evil_dotdot/opt"
ln -s "/proc/1/root$victim" "$evil_dotdot/opt/escape"
ln -s "../../../../../proc/1/root$victim" "$evil_dotdot/opt/up"
ln -s "$victim" "$evil_dotdot/opt/abs"
printf '%s\n' "/usr/lib/../../../../../proc/1/root$victim" "/opt/../../../proc/self/root$victim" \
  "/opt/escape" "/opt/up" "/opt/up/." "/opt/abs" "../../..$victim" > "$evil_dotdot/etc/ld.so.conf.d/evil.conf"
# A loader cache that is a link out: a hook that writes it without resolving it in the root
# writes the node's file.
evil_links="$work/evil-links"
mkdir -p "$evil_links/etc"
ln -s "$victim/ld.so.cache" "$evil_links/etc/ld.so.cache"

layout="$work/layout"
umoci init --layout "$layout"
umoci new --image "$layout:workload"
umoci insert --rootless=false --image "$layout:workload" "$base" / > /dev/null
umoci config --image "$layout:workload" --config.cmd /bin/sh --config.env PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
for tag in pause evil-proc evil-dotdot evil-links; do
  umoci tag --image "$layout:workload" "$tag"
done
umoci config --image "$layout:pause" --config.entrypoint /bin/sleep --config.cmd 2147483
umoci insert --rootless=false --image "$layout:evil-proc" "$evil_proc" / > /dev/null
umoci insert --rootless=false --image "$layout:evil-dotdot" "$evil_dotdot" / > /dev/null
umoci insert --rootless=false --image "$layout:evil-links" "$evil_links" / > /dev/null
umoci gc --layout "$layout"
python3 - "$layout/index.json" <<'PY'
import json, sys
index = json.load(open(sys.argv[1]))
for m in index["manifests"]:
    notes = m.setdefault("annotations", {})
    full = "localhost/polyaccel-node-test/%s:1" % notes["org.opencontainers.image.ref.name"]
    notes["org.opencontainers.image.ref.name"] = full
    notes["io.containerd.image.name"] = full
json.dump(index, open(sys.argv[1], "w"), separators=(",", ":"))
PY
tar --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$output" .
