#!/usr/bin/env bash
# Boots the multi-NUMA test guest under QEMU (TCG) and runs one script in it.
# Usage: run-guest.sh WORKDIR SCRIPT [TIMEOUT_S]
#   WORKDIR holds vmlinuz and initramfs.cpio.gz (build-initramfs.sh) and gets out/: the script is
#   copied to out/guest.sh, runs chrooted into the host's root (read-only 9p) with out/ writable
#   at /tmp/out, and leaves out/guest.log and out/guest.rc. Exit status: the script's.
# The guest: 4 NUMA nodes on 2 sockets (2 cores x 2 threads per node, 8 vCPUs... see below),
# 512 MiB per node, a SLIT of 10/12/21, two PCIe expander bridges (pxb-pcie) bound to nodes 1 and
# 3 with an NVMe drive and an e1000e NIC behind root ports, and an emulated Intel IOMMU.
set -euo pipefail
work=${1:?usage: run-guest.sh WORKDIR SCRIPT [TIMEOUT_S]}
script=${2:?usage: run-guest.sh WORKDIR SCRIPT [TIMEOUT_S]}
timeout_s=${3:-180}
out="$work/out"
rm -rf "$out"
mkdir -p "$out"
cp "$script" "$out/guest.sh"
[ -f "$work/nvme1.img" ] || truncate -s 64M "$work/nvme1.img"
[ -f "$work/nvme3.img" ] || truncate -s 64M "$work/nvme3.img"
numa=()
for n in 0 1 2 3; do
  numa+=(-object "memory-backend-ram,id=m$n,size=512M"
         -numa "node,nodeid=$n,cpus=$((2 * n))-$((2 * n + 1)),memdev=m$n")
done
for a in 0 1 2 3; do
  for b in 0 1 2 3; do
    [ "$a" -lt "$b" ] || continue
    if [ $((a / 2)) -eq $((b / 2)) ]; then d=12; else d=21; fi
    numa+=(-numa "dist,src=$a,dst=$b,val=$d")
  done
done
# One TCG thread for all 8 vCPUs (thread=single): with a host thread per vCPU on a 2-core CI
# machine, a vCPU holding a guest spinlock was descheduled while others spun, and the guest
# kernel reported soft lockups for minutes (Guest.cdi, conmon stuck 279 s). It also boots faster.
set +e
timeout "$timeout_s" qemu-system-x86_64 \
  -machine q35 -accel tcg,thread=single -cpu max -smp 8,sockets=2,dies=1,cores=2,threads=2 -m 2G \
  "${numa[@]}" \
  -device intel-iommu,intremap=off \
  -device pxb-pcie,id=pxb1,bus_nr=32,numa_node=1,bus=pcie.0 \
  -device pcie-root-port,id=rp1,bus=pxb1,chassis=1,slot=1 \
  -device pcie-root-port,id=rp2,bus=pxb1,chassis=2,slot=2 \
  -device pxb-pcie,id=pxb3,bus_nr=64,numa_node=3,bus=pcie.0 \
  -device pcie-root-port,id=rp3,bus=pxb3,chassis=3,slot=1 \
  -device pcie-root-port,id=rp4,bus=pxb3,chassis=4,slot=2 \
  -drive "file=$work/nvme1.img,if=none,id=nv1,format=raw" -device nvme,serial=pa1,drive=nv1,bus=rp1 \
  -drive "file=$work/nvme3.img,if=none,id=nv3,format=raw" -device nvme,serial=pa3,drive=nv3,bus=rp3 \
  -netdev user,id=n1 -device e1000e,netdev=n1,bus=rp2 \
  -netdev user,id=n3 -device e1000e,netdev=n3,bus=rp4 \
  -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot,bus=pcie.0 \
  -fsdev "local,id=out,path=$out,security_model=none,multidevs=remap" \
  -device virtio-9p-pci,fsdev=out,mount_tag=out,bus=pcie.0 \
  -kernel "$work/vmlinuz" -initrd "$work/initramfs.cpio.gz" \
  -append "console=ttyS0 quiet panic=-1 no_timer_check intel_iommu=on iommu=pt" \
  -nographic -no-reboot -serial "file:$out/console.log" -monitor none 2> "$out/qemu.err"
qemu_rc=$?
set -e
if [ ! -f "$out/guest.rc" ]; then
  echo "run-guest: the guest left no result (qemu exit $qemu_rc); console:" >&2
  tail -40 "$out/console.log" >&2 || true
  exit 3
fi
exit "$(cat "$out/guest.rc")"
