#!/usr/bin/env python3
"""Guest.cdi: CDI specs written by `polyaccel cdi generate` consumed by a real container runtime,
podman with crun, in the multi-NUMA test guest (tests/guest/run-guest.sh), where the test is root
on Debian's kernel. Nothing is downloaded: the image is `podman import` of a rootfs made here
from busybox-static, storage is vfs on the guest's tmpfs, the network is none.

The GPUs are those of the NVML test build (tests/inject/nvml, scenario hgx-8xh100: 8 H100, one
of them with a MIG 3g.40gb instance) on the XE8640 capture; their device minors come from a
/proc/driver/nvidia tree made here (as agent_dra_test does), and their device nodes are made with
mknod in the guest's own devtmpfs, with majors the guest's kernel has not registered.

Checked in the container that `podman run --device polyaccel.io/gpu=NAME` starts: the spec's
device nodes are there as character devices with the host node's major:minor, no other GPU's
node is, and the spec's environment is set; for a whole GPU by its DRA name and by its UUID (the
device plugin's cdi-cri name), and for a MIG device with its capability nodes. A name the spec
does not have is refused by podman. What podman does with a spec of the default cdiVersion.

The NVIDIA driver's user space (`cdi generate --driver-root`): a driver root made here holds real
shared libraries at the driver's paths, the test builds of libcuda.so.1 (tests/inject/cuda) and
libnvidia-ml.so.1 (tests/inject/nvml) as lib*.so.550.54.15, an nvidia-smi, the persistenced socket
and GSP firmware. In the container started from that spec, the files are mounted, the
create-symlinks hook made libcuda.so.1 and libcuda.so, and the update-ldcache hook (both the
static polyaccel-cdi-hook beside polyaccel) wrote a cache in which `ldconfig -p` (Debian's static
/sbin/ldconfig, put in the image) lists libcuda.so.1 and libnvidia-ml.so.1.
Usage: cdi_podman.py POLYACCEL INJECT_NVML NVML_SCENARIO TOPOLOGY_XML INJECT_CUDA"""
import os, shutil, subprocess, sys, tarfile, time
import gpu_fixture
from guest_lib import check, finish
from guest_podman import Podman

polyaccel, nvml, scenario, topology, cuda = sys.argv[1:6]
t_start = time.monotonic()


work = "/tmp/cdi-podman"
cdi_dir = "/var/run/cdi"  # podman 4.3 reads /etc/cdi and /var/run/cdi only (no cdi_spec_dirs)
proc_root = work + "/root"
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

# --- the driver's view: /proc/driver/nvidia for the scenario's GPUs, device nodes in /dev ------
gpu_fixture.make_proc_root(proc_root)
nodes = gpu_fixture.make_device_nodes()
generate = gpu_fixture.Generator(polyaccel, nvml, scenario, topology, proc_root, cdi_dir)


# --- podman: storage, runtime state and configuration on the guest's tmpfs (guest_podman.py) ---
podman = Podman(work)

print("info %s, %s" % (podman("--version").stdout.strip(), subprocess.run(
    ["crun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]), flush=True)

# The image: busybox-static and the applets the check uses, imported from a tarball.
rootfs = work + "/rootfs.tar"
with tarfile.open(rootfs, "w") as tar:
    for d in ("bin", "dev", "proc", "sys", "tmp", "etc"):
        ti = tarfile.TarInfo(d)
        ti.type, ti.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(ti)
    tar.add(os.path.realpath(shutil.which("busybox")), "bin/busybox")
    tar.add("/sbin/ldconfig", "sbin/ldconfig")  # Debian's is static: `ldconfig -p` in the container
    for applet in ("sh", "stat", "env", "sed", "[", "readlink", "cat"):
        ti = tarfile.TarInfo("bin/" + applet)
        ti.type, ti.linkname = tarfile.SYMTYPE, "busybox"
        tar.addfile(ti)
IMAGE = "localhost/polyaccel-cdi-test:1"
r = podman("import", "--change", "CMD=/bin/sh", rootfs, IMAGE)
check(r.returncode == 0, "podman import of the busybox rootfs (%s)" % r.stderr.strip()[-300:])

PROBE = gpu_fixture.PROBE


def run_with(device):
    return podman("run", "--rm", "--network", "none", "--pull", "never", "--device", device,
                  IMAGE, "sh", "-c", PROBE)


def expect_device(spec, name, label):
    """podman run --device KIND=NAME: the container has exactly the spec's nodes and env."""
    want_nodes, want_env = gpu_fixture.spec_device(spec, name)
    check(want_nodes is not None, "%s: the spec names %s" % (label, name))
    if want_nodes is None:
        return
    qualified = "%s=%s" % (spec["kind"], name)
    r = run_with(qualified)
    check(r.returncode == 0, "%s: podman run --device %s exits 0 (%s)" % (
        label, qualified, r.stderr.strip()[-400:]))
    if r.returncode != 0:
        return
    gpu_fixture.check_probe(label, r.stdout, want_nodes, want_env, nodes)


# --- the default spec (cdiVersion 0.5.0, the lowest our specs need: hostPath and names starting
# with a digit; the newest podman 4.3's CDI library knows) --------------------------------------
specs = generate()
check(all(s.get("cdiVersion") == "0.5.0" for s in specs),
      "the default cdiVersion is 0.5.0: %s" % [s.get("cdiVersion") for s in specs])
gpu = next((s for s in specs if s["kind"] == "polyaccel.io/gpu"), None)
check(gpu is not None, "a polyaccel.io/gpu spec is written: %s" % [s["kind"] for s in specs])
if gpu is not None:
    names = [d["name"] for d in gpu["devices"]]
    whole = next((n for n in names if n.startswith("gpu-") and "-mig-" not in n), None)
    # The MIG device whose instance has capability minors (gpu7/gi2 above): the 3g.40gb.
    mig = next((d["name"] for d in gpu["devices"] if "-mig-" in d["name"] and any(
        "nvidia-caps" in n["path"] for n in d["containerEdits"].get("deviceNodes", []))), None)
    check(whole is not None and mig is not None,
          "the spec has a whole GPU and a MIG device with capability nodes: %s" % names)
    if whole:
        expect_device(gpu, whole, "whole GPU")
        env_of = dict(s.split("=", 1) for s in
                      next(d for d in gpu["devices"] if d["name"] == whole)["containerEdits"]["env"])
        uuid = env_of.get("NVIDIA_VISIBLE_DEVICES", "")
        check(uuid.startswith("GPU-") and uuid in names, "%s's UUID %s is a device name too" % (whole, uuid))
        if uuid in names:
            expect_device(gpu, uuid, "GPU by UUID")
    if mig:
        expect_device(gpu, mig, "MIG device")
    r = run_with("polyaccel.io/gpu=gpu-99")
    check(r.returncode != 0 and "gpu-99" in r.stderr,
          "a device the spec lacks is refused: rc %d (%s)" % (r.returncode, r.stderr.strip()[-300:]))

# --- a later cdiVersion asked for (0.8.0, the current): podman 4.3's CDI library knows versions
# up to 0.5.0 and skips a spec of a later one, saying only "unresolvable CDI devices". What this
# podman does with it is reported, not asserted: a later podman runs it.
generate("--cdi-version", "0.8.0")
r = run_with("polyaccel.io/gpu=gpu-0")
print("info cdiVersion 0.8.0: podman %s" % (
    "runs it" if r.returncode == 0 else "refuses it: " + r.stderr.strip()[-300:]), flush=True)
# --- the NVIDIA driver's user space from a driver root ----------------------------------------
VERSION = gpu_fixture.VERSION
driver = work + "/driver"
persistenced = gpu_fixture.make_driver_root(driver, cuda, nvml)
specs = generate("--driver-root", driver)
gpu = next((s for s in specs if s["kind"] == "polyaccel.io/gpu"), {})
edits = gpu.get("containerEdits", {})
mounted = sorted(m["containerPath"] for m in edits.get("mounts", []))
L = gpu_fixture.LIBDIR
check(mounted == gpu_fixture.driver_mounts(),
      "the spec mounts the driver root's files: %s" % mounted)
hooks = [h["args"][1] for h in edits.get("hooks", []) if len(h.get("args", [])) > 1]
hook_program = os.path.join(os.path.dirname(os.path.realpath(polyaccel)), "polyaccel-cdi-hook")
check(hooks == ["create-symlinks", "update-ldcache"] and all(
    h["hookName"] == "createContainer" and h["path"] == hook_program
    for h in edits.get("hooks", [])), "the spec's createContainer hooks run %s: %s" % (hook_program, hooks))
DRIVER_PROBE = gpu_fixture.DRIVER_PROBE
first = next((d["name"] for d in gpu.get("devices", []) if d["name"].startswith("gpu-")
              and "-mig-" not in d["name"]), "gpu-0")
r = podman("run", "--rm", "--network", "none", "--pull", "never", "--device",
           "polyaccel.io/gpu=" + first, IMAGE, "sh", "-c", DRIVER_PROBE)
check(r.returncode == 0, "driver root: podman run --device polyaccel.io/gpu=%s exits 0 (%s)"
      % (first, r.stderr.strip()[-600:]))
out = r.stdout.splitlines()
for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
    check(any(l.startswith("ldcache") and (lib + " (libc6,x86-64) => " + L + lib) in l for l in out),
          "driver root: ldconfig -p in the container lists %s: %s" % (
              lib, [l for l in out if l.startswith("ldcache")]))
for link, target in (("libcuda.so.1", "libcuda.so." + VERSION), ("libcuda.so", "libcuda.so.1"),
                     ("libnvidia-ml.so.1", "libnvidia-ml.so." + VERSION)):
    check("link %s %s" % (link, target) in out, "driver root: %s%s -> %s" % (L, link, target))
for want in ("socket", "nvidia-smi from the driver root", "gsp firmware", "node /dev/nvidia0",
             "node /dev/nvidiactl", "node /dev/nvidia-uvm"):
    check(want in out, "driver root: the container has %r" % want)
persistenced.close()

print("info %s" % podman.summary())
print("info guest test wall time: %.1f s" % (time.monotonic() - t_start))
finish()
