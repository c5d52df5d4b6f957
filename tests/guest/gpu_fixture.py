"""The NVIDIA node that the guest CDI tests (cdi_podman.py with podman, cri_node.py with containerd
over CRI) hand to a real container runtime, made in the test guest where the test is root:

- GPUs: those of the NVML test build (tests/inject/nvml, scenario hgx-8xh100: 8 H100, one of them
  with a MIG 3g.40gb instance) on the XE8640 capture; their device minors come from a
  /proc/driver/nvidia tree made under a scratch root (as agent_dra_test does);
- device nodes: made with mknod in the guest's own devtmpfs, with majors the guest's kernel has
  not registered, so they cannot reach a real driver;
- a driver root (`cdi generate --driver-root`) with real shared libraries at the driver's paths,
  the test builds of libcuda.so.1 (tests/inject/cuda) and libnvidia-ml.so.1 (tests/inject/nvml)
  as lib*.so.550.54.15, an nvidia-smi, the persistenced socket and GSP firmware;
- `polyaccel cdi generate` of those into a CDI directory."""
import json, os, shutil, socket, stat, subprocess
from guest_lib import check

BUSES = ["18", "2a", "4e", "5f", "9a", "ab", "cb", "db"]
VERSION = "550.54.15"
LIBDIR = "/usr/lib/x86_64-linux-gnu/"
# The nvidia driver's static major is 195; uvm and caps get dynamic ones. All three are chosen
# among those the guest's kernel has not registered.
NVIDIA, UVM, CAPS = 195, 509, 508


def make_proc_root(proc_root):
    """/proc/driver/nvidia under proc_root: the GPUs' minors and the MIG capability minors."""
    for i, b in enumerate(BUSES):
        d = "%s/proc/driver/nvidia/gpus/0000:%s:00.0" % (proc_root, b)
        os.makedirs(d)
        with open(d + "/information", "w") as f:
            f.write("Model: NVIDIA H100 80GB HBM3\nDevice Minor: %d\n" % i)
    os.makedirs(proc_root + "/proc/driver/nvidia-caps")
    with open(proc_root + "/proc/driver/nvidia-caps/mig-minors", "w") as f:
        f.write("config 1\nmonitor 2\ngpu7/gi2/access 66\ngpu7/gi2/ci0/access 67\n")


def make_device_nodes():
    """The GPUs' device nodes in /dev; {path: (major, minor)}."""
    with open("/proc/devices") as f:
        taken = {int(l.split()[0]) for l in f if l.strip() and l.split()[0].isdigit()}
    check(not taken & {NVIDIA, UVM, CAPS},
          "majors %d, %d, %d are free in the guest" % (NVIDIA, UVM, CAPS))
    nodes = {"/dev/nvidia%d" % i: (NVIDIA, i) for i in range(len(BUSES))}
    nodes.update({"/dev/nvidiactl": (NVIDIA, 255), "/dev/nvidia-uvm": (UVM, 0),
                  "/dev/nvidia-uvm-tools": (UVM, 1), "/dev/nvidia-caps/nvidia-cap66": (CAPS, 66),
                  "/dev/nvidia-caps/nvidia-cap67": (CAPS, 67)})
    os.makedirs("/dev/nvidia-caps", exist_ok=True)
    for path, (major, minor) in nodes.items():
        if os.path.exists(path):
            os.unlink(path)
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    return nodes


def make_driver_root(driver, cuda, nvml):
    """The driver's user space under driver (a root of its own, or a node's /); returns the bound persistenced socket (keep it
    open while containers mount it)."""
    libdir = driver + LIBDIR.rstrip("/")
    os.makedirs(libdir, exist_ok=True)  # (a node's own root has it)
    shutil.copyfile(cuda, "%s/libcuda.so.%s" % (libdir, VERSION))
    shutil.copyfile(nvml, "%s/libnvidia-ml.so.%s" % (libdir, VERSION))
    os.makedirs(driver + "/usr/bin", exist_ok=True)
    with open(driver + "/usr/bin/nvidia-smi", "w") as f:
        f.write("#!/bin/sh\necho nvidia-smi from the driver root\n")
    os.chmod(driver + "/usr/bin/nvidia-smi", 0o755)
    os.makedirs("%s/lib/firmware/nvidia/%s" % (driver, VERSION))
    with open("%s/lib/firmware/nvidia/%s/gsp_ga10x.bin" % (driver, VERSION), "w") as f:
        f.write("gsp firmware\n")
    os.makedirs(driver + "/run/nvidia-persistenced", exist_ok=True)
    persistenced = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    persistenced.bind(driver + "/run/nvidia-persistenced/socket")
    return persistenced


def driver_mounts():
    """The container paths a spec generated from make_driver_root's root mounts."""
    return sorted(["/lib/firmware/nvidia/%s/gsp_ga10x.bin" % VERSION,
                   "/run/nvidia-persistenced/socket", "/usr/bin/nvidia-smi",
                   LIBDIR + "libcuda.so." + VERSION, LIBDIR + "libnvidia-ml.so." + VERSION])


class Generator:
    """`polyaccel cdi generate` of the NVML test build's GPUs (proc_root's minors) into cdi_dir."""

    def __init__(self, polyaccel, nvml, scenario, topology, proc_root, cdi_dir):
        self.polyaccel, self.topology = polyaccel, topology
        self.proc_root, self.cdi_dir = proc_root, cdi_dir
        self.env = dict(os.environ, POLYACCEL_NVML_LIB=nvml, NVML_INJECT_SCENARIO=scenario,
                        POLYACCEL_AMD_SMI_LIB="/nonexistent", POLYACCEL_ROCM_SMI_LIB="/nonexistent",
                        POLYACCEL_HLML_LIB="/nonexistent")

    def __call__(self, *extra):
        """Rewrites cdi_dir's specs; the specs it printed (--json). The directory itself stays:
        a runtime that watches it (containerd's CDI cache) keeps its watch."""
        os.makedirs(self.cdi_dir, exist_ok=True)
        for name in os.listdir(self.cdi_dir):
            os.unlink(os.path.join(self.cdi_dir, name))
        r = subprocess.run([self.polyaccel, "cdi", "generate", "--topology", self.topology,
                            "--accel-backends", "on", "--root", self.proc_root, "--cdi-dir",
                            self.cdi_dir, *extra, "--json"],
                           capture_output=True, text=True, env=self.env)
        check(r.returncode == 0, "cdi generate %s exits 0 (%s)" % (" ".join(extra), r.stderr.strip()))
        return json.loads(r.stdout)["specs"] if r.returncode == 0 else []


# What a container reports of its devices and environment: each /dev node (type, major:minor in
# hex) and each variable (the /dev/nvidia-caps directory itself is not a node).
PROBE = ("for p in /dev/nvidia* /dev/nvidia-caps/*; do [ -e $p ] && [ ! -d $p ] && "
         "stat -c 'node %n %F %t:%T' $p; done; env | sed 's/^/env /'")


def parse_probe(out):
    """PROBE's output: ({path: (file type, major, minor)}, {variable: value})."""
    seen, env_set = {}, {}
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "node" and rest.count(" ") >= 2:  # (not DRIVER_PROBE's "node PATH")
            path, _, tail = rest.partition(" ")
            ftype, _, mm = tail.rpartition(" ")
            major, minor = (int(x, 16) for x in mm.split(":"))
            seen[path] = (ftype, major, minor)
        elif kind == "env":
            k, _, val = rest.partition("=")
            env_set[k] = val
    return seen, env_set


def check_probe(label, out, want_nodes, want_env, nodes):
    """What PROBE printed in a container started with a device: the spec's nodes as character
    devices with the host nodes' major:minor (`nodes`: host path -> (major, minor)), no NVIDIA
    node it does not name, its environment. Returns the environment seen."""
    seen, env_set = parse_probe(out)
    for path, host_path in sorted(want_nodes.items()):
        st = os.stat(host_path)
        want = ("character special file", os.major(st.st_rdev), os.minor(st.st_rdev))
        check(seen.get(path) == want and want[1:] == nodes.get(host_path),
              "%s: %s in the container is %s, the host's %s is %s" % (
                  label, path, seen.get(path), host_path, want))
    extra = sorted(set(seen) - set(want_nodes))
    check(not extra, "%s: no NVIDIA node the spec does not name: %s" % (label, extra))
    for k, val in sorted(want_env.items()):
        check(env_set.get(k) == val, "%s: %s=%s in the container (%s)" % (label, k, val, env_set.get(k)))
    return env_set


def spec_device(spec, name):
    """The device nodes ({container path: host path}) and environment a spec gives a device."""
    dev = next((d for d in spec.get("devices", []) if d["name"] == name), None)
    if dev is None:
        return None, None
    edits = [dev["containerEdits"], spec.get("containerEdits", {})]
    nodes = {n["path"]: n.get("hostPath", n["path"]) for e in edits for n in e.get("deviceNodes", [])}
    env = dict(s.split("=", 1) for e in edits for s in e.get("env", []))
    return nodes, env


# What a container reports of the driver's user space and the loader cache a hook wrote.
DRIVER_PROBE = ("ldconfig -p | sed 's/^/ldcache /'; for l in libcuda.so.1 libcuda.so "
                "libnvidia-ml.so.1; do echo \"link $l $(readlink %s$l)\"; done; "
                "[ -S /run/nvidia-persistenced/socket ] && echo socket; nvidia-smi; "
                "cat /lib/firmware/nvidia/%s/gsp_ga10x.bin; "
                "for p in /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm; do [ -c $p ] && echo node $p; done"
                % (LIBDIR, VERSION))
