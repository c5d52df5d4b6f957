#!/usr/bin/env bash
# Builds the initramfs of the multi-NUMA test guest into DIR (a temp dir the caller owns):
# busybox-static, the kernel modules Debian's kernel has as modules for 9p over virtio, NVMe and
# e1000e (in dependency order, from modprobe --show-depends), and an /init that mounts the host's
# root read-only over 9p, chroots into it and runs the command the test wrote to the writable 9p
# share "out". Usage: build-initramfs.sh DIR  -> DIR/initramfs.cpio.gz, DIR/vmlinuz
set -euo pipefail
dir=${1:?usage: build-initramfs.sh DIR}
kernel=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
[ -n "$kernel" ] || { echo "build-initramfs: no /boot/vmlinuz-* (install linux-image-amd64)" >&2; exit 2; }
version=${kernel#/boot/vmlinuz-}
busybox=$(command -v busybox || true)
[ -x /bin/busybox ] && busybox=/bin/busybox
file -L "$busybox" 2>/dev/null | grep -q "statically linked" || {
  echo "build-initramfs: busybox is not static (install busybox-static)" >&2; exit 2; }
root="$dir/root"
rm -rf "$root"
mkdir -p "$root"/{bin,dev,proc,sys,host,out,modules}
cp "$busybox" "$root/bin/busybox"
for tool in sh mount umount insmod mkdir cat echo poweroff sleep chroot mknod ls; do
  ln -s busybox "$root/bin/$tool"
done
# Modules in load order, each once.
: > "$root/modules/order"
for m in virtio_pci 9pnet_virtio 9p nvme e1000e; do
  modprobe --show-depends -S "$version" "$m" 2>/dev/null | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' | while read -r ko; do
  name=$(basename "$ko")
  case "$ko" in
    *.ko.xz) xz -dc "$ko" > "$root/modules/${name%.xz}"; name=${name%.xz} ;;
    *.ko.zst) zstd -qdc "$ko" > "$root/modules/${name%.zst}"; name=${name%.zst} ;;
    *) cp "$ko" "$root/modules/$name" ;;
  esac
  echo "$name" >> "$root/modules/order"
done
cat > "$root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do insmod /modules/$m 2>/dev/null; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose hostroot /host
mount -t 9p -o trans=virtio,version=9p2000.L out /out
for d in proc sys dev; do mount --bind /$d /host/$d; done
# The guest's /tmp is its own and writable; a checkout or build under the host's /tmp (a CI
# clone) must stay visible there, so the host's /tmp directories are bound back (read-only).
mkdir -p /hosttmp
mount --bind /host/tmp /hosttmp
mount -t tmpfs tmp /host/tmp
for d in /hosttmp/*/; do
  d=${d%/}
  n=${d##*/}
  [ -d "$d" ] && [ "$n" != out ] || continue
  mkdir -p "/host/tmp/$n" && mount --bind "$d" "/host/tmp/$n"
done
mount -t tmpfs run /host/run
mkdir -p /host/tmp/out
mount --bind /out /host/tmp/out
mkdir -p /host/dev/hugepages /host/dev/shm
mount -t hugetlbfs none /host/dev/hugepages
mount -t tmpfs shm /host/dev/shm
# On the console (the host keeps it): how far the guest got, for a run that times out.
read -r up idle < /proc/uptime
echo "guest init: booted in $up s, running the test script" > /dev/console
chroot /host /bin/sh /tmp/out/guest.sh > /out/guest.log 2>&1
rc=$?
read -r up idle < /proc/uptime
echo "guest init: the test script exited $rc at $up s" > /dev/console
echo $rc > /out/guest.rc
sync
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$dir/initramfs.cpio.gz"
cp "$kernel" "$dir/vmlinuz"
