#!/usr/bin/env python3
"""Guest.node-containerd17, Guest.node-containerd21: CDI specs of `polyaccel cdi generate` run by a
real Kubernetes container runtime node, containerd's CRI plugin (CDI and NRI enabled) with runc,
driven over the CRI gRPC API the way kubelet drives it, in the multi-NUMA test guest
(tests/guest/run-guest.sh) where the test is root on Debian's kernel.

The node is NODE_ROOT (node_root.sh): a plain Debian root of the suite with containerd and runc,
none of polyaccel's files; containerd and runc run chrooted into it, with tmpfs over its /run,
/tmp, /var/lib/containerd and /usr/local/bin (it is a read-only 9p share here), the guest's /dev,
/sys (cgroup2) and a /proc of their own; the rest of it is an overlay with a tmpfs upper layer. The CDI hook the specs name, polyaccel-cdi-hook (static),
is copied into the node's /usr/local/bin as the agent installs it on a host. WORK (/tmp/...,
RUN_DIR) is bound at the same path inside the node: the driver root, the victim directory and the
containers' logs have one path for the test and for the node. The images (node_images.sh) are
`ctr -n k8s.io images import`ed; the CRI client is cri_api.proto's, protoc'd into RUN_DIR/pb.

Checked, as kubelet: RunPodSandbox with the node's network namespace (no CNI), CreateContainer
with the CDI device names in ContainerConfig's CDI devices, StartContainer, ContainerStatus until
it exited, its log file, RemoveContainer, StopPodSandbox, RemovePodSandbox. In the container:
- the spec's device nodes as character devices with the host node's major:minor, no other
  GPU's, the spec's environment (NVIDIA_VISIBLE_DEVICES), the driver root's files mounted; for a
  whole GPU by its DRA name and by its UUID, and a MIG device; a name no spec has is refused;
- with the hooks: `ldconfig -p` lists libcuda.so.1 and libnvidia-ml.so.1 from the cache the
  update-ldcache hook wrote, and the create-symlinks hook made libcuda.so.1 and libcuda.so;
- confinement: images whose loader configuration leads out of the container to a directory of
  the node (WORK/victim, with a shared library in it): ld.so.conf.d lines through /proc/1/root,
  /proc/self/root, "..", absolute and relative symlinks (evil-proc, evil-dotdot), and an
  /etc/ld.so.cache that is a link out (evil-links). After their containers ran with the hooks,
  that directory is unchanged (names, types, modes, sizes, inodes, times, links, contents) and
  their caches list nothing from it. Controls: a naive hook (writes the container's
  /etc/ld.so.cache as a path of the node, runs the node's `ldconfig -r` on the container's root)
  does change it through evil-links, so these checks can fail; whether it does through the
  /proc/1/root lines is printed (with runc 1.1 and 1.3 it does not: when createContainer hooks
  run, pid 1 of the container's /proc already has the container's root).
- the agent's own pods (node_agent.py): the built image imported into containerd, the DRA and
  device-plugin overlays' DaemonSets run as kubelet runs them, registering with node_kubelet (the
  test's kubelet and API server) over the real protocols; workload containers with the CDI
  devices NodePrepareResources returned, and with Allocate's answer.
Measured: container start (CreateContainer + StartContainer, and until a `true` exited) without a
CDI device, with a CDI device and a spec without hooks, and with the hooks; the median of
NODE_TEST_RUNS (20) each.
Usage: cri_node.py NODE_ROOT RUN_DIR WORK POLYACCEL INJECT_NVML SCENARIO TOPOLOGY INJECT_CUDA HOOK
  NODE_KUBELET IMAGE_ARCHIVE RENDERED_DRA_JSON RENDERED_DEVICE_PLUGIN_JSON"""
import hashlib, json, os, shutil, statistics, subprocess, sys, time
import gpu_fixture, node_agent
from guest_lib import check, finish

(node, run_dir, work, polyaccel, nvml, scenario, topology, cuda, hook, node_kubelet, image_archive,
 rendered_dra, rendered_device_plugin) = sys.argv[1:14]
sys.path.insert(0, run_dir + "/pb")
import grpc  # noqa: E402  (Debian's python3-grpcio)
import cri_api_pb2 as cri  # noqa: E402
import cri_api_pb2_grpc as cri_grpc  # noqa: E402

t_start = time.monotonic()
RUNS = int(os.environ.get("NODE_TEST_RUNS", "20"))
IMAGE = "localhost/polyaccel-node-test/%s:1"
HOOK_IN_NODE = "/usr/local/bin/polyaccel-cdi-hook"
CDI_DIR = "/var/run/cdi"  # in the node; /var/run is /run there
victim = work + "/victim"
driver = work + "/driver"
log_dir = work + "/pods"


def info(text):
    print("info " + text, flush=True)


def sh(*cmd, ok=True, timeout=120):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if ok and r.returncode != 0:
        check(False, "%s exits 0 (%s)" % (" ".join(cmd), (r.stderr or r.stdout).strip()[-300:]))
    return r


def in_node(*cmd, timeout=120):
    return subprocess.run(["chroot", node, *cmd], capture_output=True, text=True, timeout=timeout,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


def stop(text):
    """A failure after which nothing else can be checked."""
    check(False, text)
    finish()


# --- the node: its read-only root with what a running node writes on tmpfs --------------------
versions = open(node + "/.polyaccel-node-root").read().split()
info("node root %s: %s" % (node, " ".join(versions)))
# The node's root is a mount of its own, as a host's / is: runc makes "/" of the container's mount
# namespace a slave and pivots out of it, which fails on a directory that is not a mount point. An
# overlay with a tmpfs upper layer over the read-only share: what kubelet and the agent's hostPath
# volumes make on a node (/var/lib/kubelet, /var/lib/polyaccel/bin, /etc/kubernetes/...) and the
# driver the agent pods' node has can be written where a host has them.
# overlayfs (also containerd's default snapshotter) is a module of Debian's kernel.
sh("modprobe", "overlay", ok=False)
upper = "/tmp/polyaccel-node-upper"
os.makedirs(upper, exist_ok=True)
sh("mount", "-t", "tmpfs", "-o", "mode=0755", "node-upper", upper)
os.makedirs(upper + "/upper")
os.makedirs(upper + "/work")
sh("mount", "-t", "overlay", "-o", "lowerdir=%s,upperdir=%s/upper,workdir=%s/work" % (node, upper, upper),
   "node-root", node)
# A host's / is a shared mount (systemd makes it so); containerd refuses a hostPath volume of /
# with HostToContainer propagation (the DRA overlay's /host) on a private one.
sh("mount", "--make-rshared", node)
for d in ("run", "tmp", "var/lib/containerd", "usr/local/bin"):
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", "node-" + d.replace("/", "-"), "%s/%s" % (node, d))
sh("mount", "-t", "proc", "proc", node + "/proc")
sh("mount", "--rbind", "/sys", node + "/sys")
sh("mount", "--rbind", "/dev", node + "/dev")
for d in (work, run_dir):
    os.makedirs(d, exist_ok=True)
    os.makedirs(node + d)
    sh("mount", "--bind", d, node + d)
snapshotter = "overlayfs" if "overlay" in open("/proc/filesystems").read() else "native"
info("snapshotter %s" % snapshotter)

PAUSE = IMAGE % "pause"
containerd2 = any(v.startswith("containerd=2") for v in versions)
if containerd2:
    config = """version = 3
root = '/var/lib/containerd'
state = '/run/containerd'
[grpc]
  address = '/run/containerd/containerd.sock'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = '%(snapshotter)s'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '%(pause)s'
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = ['%(cdi)s']
  disable_apparmor = true
  disable_hugetlb_controller = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    conf_dir = '/run/cni/net.d'
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = '/var/run/nri/nri.sock'
"""
else:
    config = """version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%(pause)s"
  enable_cdi = true
  cdi_spec_dirs = ["%(cdi)s"]
  disable_apparmor = true
  disable_hugetlb_controller = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    conf_dir = "/run/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "%(snapshotter)s"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = "/var/run/nri/nri.sock"
"""
# Hugepages: containerd drops the hugetlb limits kubelet asks for unless told not to (its default
# disable_hugetlb_controller = true, containerd#10706); a node whose pods use hugepages sets it.
# AppArmor: Debian's kernel has it on, and the node has no apparmor_parser to load containerd's
# default profile with (a node with AppArmor installs it). CNI: the pod uses the node's network,
# but the CRI plugin watches its configuration directory, made where the node is writable.
os.makedirs(node + "/run/polyaccel-test")
with open(node + "/run/polyaccel-test/containerd.toml", "w") as f:
    f.write(config % {"snapshotter": snapshotter, "pause": PAUSE, "cdi": CDI_DIR})
containerd_log = open(work + "/containerd.log", "w")
t = time.monotonic()
containerd = subprocess.Popen(
    ["chroot", node, "/usr/bin/containerd", "--config", "/run/polyaccel-test/containerd.toml"],
    stdout=containerd_log, stderr=subprocess.STDOUT,
    env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": "/tmp"})


def containerd_tail(n=25):
    return "\n  ".join(open(work + "/containerd.log").read().splitlines()[-n:])


channel = grpc.insecure_channel("unix://%s/run/containerd/containerd.sock" % node)
runtime = cri_grpc.RuntimeServiceStub(channel)
images = cri_grpc.ImageServiceStub(channel)
version = None
deadline = time.monotonic() + 240
while time.monotonic() < deadline and containerd.poll() is None:
    try:
        version = runtime.Version(cri.VersionRequest(version="v1"), timeout=10)
        break
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.UNIMPLEMENTED:  # containerd up, its CRI plugin not
            break
        time.sleep(1)
if version is None:
    stop("containerd answers CRI Version (%.0f s):\n  %s" % (time.monotonic() - t, containerd_tail()))
check(True, "CRI Version: %s %s, CRI %s (containerd up in %.1f s)" % (
    version.runtime_name, version.runtime_version, version.runtime_api_version, time.monotonic() - t))
status = runtime.Status(cri.StatusRequest(verbose=True), timeout=60)
conditions = {c.type: c for c in status.status.conditions}
check(conditions.get("RuntimeReady") is not None and conditions["RuntimeReady"].status,
      "RuntimeReady (%s)" % [(c.type, c.status, c.reason) for c in conditions.values()])
cri_config = json.loads(status.info.get("config", "{}"))
check(cri_config.get("enableCDI") is True, "the CRI plugin's config has CDI enabled: enableCDI=%s, "
      "cdiSpecDirs=%s" % (cri_config.get("enableCDI"), cri_config.get("cdiSpecDirs")))
check(os.path.exists(node + "/run/nri/nri.sock"), "NRI is enabled: the node has /run/nri/nri.sock")

# --- the images, imported as a node imports what it cannot pull --------------------------------
t = time.monotonic()
r = in_node("ctr", "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "import",
            "--snapshotter", snapshotter, run_dir + "/images.tar", timeout=300)
check(r.returncode == 0, "ctr -n k8s.io images import (%.1f s) %s" % (
    time.monotonic() - t, (r.stderr or "").strip()[-300:]))
print(r.stdout.strip(), flush=True)
# The CRI plugin learns of them from containerd's events, a moment later (containerd 2).
for name in ("pause", "workload", "evil-proc", "evil-dotdot", "evil-links"):
    deadline = time.monotonic() + 60
    while True:
        st = images.ImageStatus(cri.ImageStatusRequest(image=cri.ImageSpec(image=IMAGE % name)), timeout=60)
        if st.image.id or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    check(st.image.id != "", "CRI ImageStatus knows %s (%s)" % (IMAGE % name, st.image.id[:19]))

# --- the GPUs, their device nodes and the driver root (gpu_fixture.py) ---------------------------
gpu_fixture.make_proc_root(work + "/root")
dev_nodes = gpu_fixture.make_device_nodes()
persistenced = gpu_fixture.make_driver_root(driver, cuda, nvml)
generate = gpu_fixture.Generator(polyaccel, nvml, scenario, topology, work + "/root",
                                 node + CDI_DIR.replace("/var/run", "/run"))

# --- kubelet: one pod in the node's network namespace, its containers ---------------------------
sandbox_config = cri.PodSandboxConfig(
    metadata=cri.PodSandboxMetadata(name="cdi-test", uid="cdi-test-uid", namespace="default"),
    log_directory=log_dir,
    linux=cri.LinuxPodSandboxConfig(
        cgroup_parent="/kubepods/besteffort/podcdi-test-uid",
        security_context=cri.LinuxSandboxSecurityContext(namespace_options=cri.NamespaceOption(
            network=cri.NODE, pid=cri.CONTAINER, ipc=cri.POD))))
t = time.monotonic()
try:
    pod = runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=sandbox_config), timeout=300).pod_sandbox_id
except grpc.RpcError as e:
    stop("RunPodSandbox (host network): %s\n  %s" % (e.details(), containerd_tail()))
check(True, "RunPodSandbox with the node's network namespace (%.1f s)" % (time.monotonic() - t))
serial = 0


def run_container(image, command, devices, timeout=180, envs=(), mounts=(), linux_devices=(), argv=None):
    """CreateContainer + StartContainer, ContainerStatus until it exited, its log, RemoveContainer.
    IMAGE is one of node_images.sh's images (a name) or a full reference; COMMAND runs under its
    /bin/sh, or ARGV alone. {"error": ...} or {"exit": code, "out": log, "stdout": its stdout lines, "started": s, "exited": s}
    (seconds from CreateContainer to StartContainer's answer, and until the status said exited)."""
    global serial
    serial += 1
    name = "c%d" % serial
    config = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name=name), image=cri.ImageSpec(image=image if "/" in image else IMAGE % image),
        command=argv or ["/bin/sh", "-c", command], log_path=name + ".log", envs=envs, mounts=mounts,
        devices=linux_devices, CDI_devices=[cri.CDIDevice(name=d) for d in devices])
    t0 = time.monotonic()
    cid = None
    try:
        cid = runtime.CreateContainer(cri.CreateContainerRequest(
            pod_sandbox_id=pod, config=config, sandbox_config=sandbox_config), timeout=timeout).container_id
        runtime.StartContainer(cri.StartContainerRequest(container_id=cid), timeout=timeout)
        started = time.monotonic() - t0
        st = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=cid), timeout=60).status
            if st.state == cri.CONTAINER_EXITED:
                break
            time.sleep(0.02)
        exited = time.monotonic() - t0
        if st is None or st.state != cri.CONTAINER_EXITED:
            return {"error": "not exited after %d s" % timeout}
        out, stdout = "", ""
        if os.path.exists(st.log_path):
            # CRI log lines: TIMESTAMP STREAM P|F TEXT
            lines = [l.split(" ", 3) for l in open(st.log_path).read().splitlines()]
            out = "\n".join(f[3] if len(f) == 4 else "" for f in lines)
            stdout = "\n".join(f[3] for f in lines if len(f) == 4 and f[1] == "stdout")
        return {"exit": st.exit_code, "out": out, "stdout": stdout, "started": started, "exited": exited,
                "reason": st.reason, "log_path": st.log_path}
    except grpc.RpcError as e:
        return {"error": "%s: %s" % (e.code().name, e.details())}
    finally:
        if cid:
            try:
                runtime.RemoveContainer(cri.RemoveContainerRequest(container_id=cid), timeout=120)
            except grpc.RpcError as e:
                check(False, "RemoveContainer %s: %s" % (cid[:12], e.details()))


def start_container(image, command, envs=(), devices=(), hugepages=()):
    """CreateContainer + StartContainer of a container that keeps running (in the test's pod):
    its id, or {"error": ...}. Its log: container_output(id); gone with remove_container(id).
    HUGEPAGES: (page size, bytes) limits, as kubelet passes a pod's hugepages-<size> requests."""
    global serial
    serial += 1
    name = "c%d" % serial
    config = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name=name), image=cri.ImageSpec(image=IMAGE % image),
        command=["/bin/sh", "-c", command], log_path=name + ".log", envs=envs,
        CDI_devices=[cri.CDIDevice(name=d) for d in devices],
        linux=cri.LinuxContainerConfig(resources=cri.LinuxContainerResources(hugepage_limits=[
            cri.HugepageLimit(page_size=size, limit=limit) for size, limit in hugepages])))
    try:
        cid = runtime.CreateContainer(cri.CreateContainerRequest(
            pod_sandbox_id=pod, config=config, sandbox_config=sandbox_config), timeout=180).container_id
        runtime.StartContainer(cri.StartContainerRequest(container_id=cid), timeout=180)
        return cid
    except grpc.RpcError as e:
        return {"error": "%s: %s" % (e.code().name, e.details())}


def container_output(cid):
    st = runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=cid), timeout=60).status
    if not os.path.exists(st.log_path):
        return ""
    return "\n".join(l.split(" ", 3)[3] if l.count(" ") >= 3 else ""
                     for l in open(st.log_path).read().splitlines())


def remove_container(cid):
    """StopContainer and RemoveContainer. A StopContainer that fails is asked again, as kubelet
    does at its next sync: containerd 1.7 once answered "failed to kill container: ttrpc:
    closed" (its shim's connection) and the same request then succeeds. Said when it happens."""
    for attempt in range(3):
        try:
            runtime.StopContainer(cri.StopContainerRequest(container_id=cid, timeout=5), timeout=120)
            break
        except grpc.RpcError as e:
            if attempt == 2:
                raise
            print("info StopContainer %s failed (%s), asked again as kubelet would" % (cid[:12], e.details()),
                  flush=True)
            time.sleep(1)
    runtime.RemoveContainer(cri.RemoveContainerRequest(container_id=cid), timeout=120)


def ran(r, label):
    """The container ran and exited 0."""
    ok = "error" not in r and r["exit"] == 0
    check(ok, "%s: created, started, exited 0 (%s)" % (label, r.get("error") or "exit %s in %.1f s%s" % (
        r["exit"], r["exited"], "" if ok else ", log: " + r["out"][-400:].replace("\n", " | "))))
    return ok


def expect_device(spec, name, label):
    """The container of CDI device KIND=NAME has exactly the spec's nodes and environment."""
    want_nodes, want_env = gpu_fixture.spec_device(spec, name)
    check(want_nodes is not None, "%s: the spec names %s" % (label, name))
    if want_nodes is None:
        return
    qualified = "%s=%s" % (spec["kind"], name)
    r = run_container("workload", gpu_fixture.PROBE, [qualified])
    if not ran(r, "%s: a container with CDI device %s" % (label, qualified)):
        return
    env_set = gpu_fixture.check_probe(label, r["out"], want_nodes, want_env, dev_nodes)
    check(bool(env_set.get("NVIDIA_VISIBLE_DEVICES")),
          "%s: NVIDIA_VISIBLE_DEVICES=%s" % (label, env_set.get("NVIDIA_VISIBLE_DEVICES")))


def start_times(label, image, devices, envs=()):
    """RUNS containers running `true`: the medians, printed."""
    started, exited = [], []
    for _ in range(RUNS):
        r = run_container(image, "true", devices, envs=envs)
        if "error" in r or r["exit"] != 0:
            ran(r, "%s: a `true` container" % label)
            return None
        started.append(r["started"])
        exited.append(r["exited"])
    result = (statistics.median(started), statistics.median(exited))
    times[label] = result
    info("START TIME %-26s median of %d: create+start %.3f s, until exited %.3f s "
         "(min %.3f, max %.3f)" % (label, RUNS, result[0], result[1], min(exited), max(exited)))
    return result


def settle():
    """Time for the runtime to see a rewritten spec directory (containerd 2 watches it)."""
    time.sleep(2)


# --- 1. the specs without hooks: device nodes, environment, the driver root's mounts -------------
specs = generate("--driver-root", driver, "--no-hooks")
gpu = next((s for s in specs if s["kind"] == "polyaccel.io/gpu"), None)
check(gpu is not None, "a polyaccel.io/gpu spec is written: %s" % [s["kind"] for s in specs])
if gpu is None:
    finish()
check(not gpu.get("containerEdits", {}).get("hooks"), "--no-hooks: the spec has no hooks")
settle()
names = [d["name"] for d in gpu["devices"]]
whole = next((n for n in names if n.startswith("gpu-") and "-mig-" not in n), "gpu-0")
mig = next((d["name"] for d in gpu["devices"] if "-mig-" in d["name"] and any(
    "nvidia-caps" in n["path"] for n in d["containerEdits"].get("deviceNodes", []))), None)
expect_device(gpu, whole, "whole GPU")
uuid = gpu_fixture.spec_device(gpu, whole)[1].get("NVIDIA_VISIBLE_DEVICES", "")
check(uuid.startswith("GPU-") and uuid in names, "%s's UUID %s is a device name too" % (whole, uuid))
if uuid in names:
    expect_device(gpu, uuid, "GPU by UUID")
check(mig is not None, "the spec has a MIG device with capability nodes: %s" % names)
if mig:
    expect_device(gpu, mig, "MIG device")
r = run_container("workload", "true", ["polyaccel.io/gpu=gpu-99"])
check("error" in r and "gpu-99" in r["error"], "a CDI device no spec has is refused: %s" % (
    r.get("error") or "it ran"))
r = run_container("workload", gpu_fixture.DRIVER_PROBE, ["polyaccel.io/gpu=" + whole])
if ran(r, "driver root, no hooks"):
    out = r["out"].splitlines()
    for want in ("socket", "nvidia-smi from the driver root", "gsp firmware", "node /dev/nvidia0",
                 "node /dev/nvidiactl", "node /dev/nvidia-uvm"):
        check(want in out, "driver root, no hooks: the container has %r" % want)
    info("without hooks, the container's ldconfig -p: %s" % [l for l in out if l.startswith("ldcache")])

times = {}
times["no CDI device"] = start_times("no CDI device", "workload", [])
times["CDI device, no hooks"] = start_times("CDI device, no hooks", "workload", ["polyaccel.io/gpu=" + whole])

# --- 2. the hooks: polyaccel-cdi-hook installed on the node, run by runc ------------------------
have_hook = os.path.isfile(hook)
check(have_hook, "the CDI hook program %s is built" % hook)
if have_hook:
    shutil.copyfile(hook, node + HOOK_IN_NODE)
    os.chmod(node + HOOK_IN_NODE, 0o755)
    r = in_node(HOOK_IN_NODE, "version")
    check(r.returncode == 0, "%s runs in the node root, which has none of polyaccel's libraries: "
          "`version` exits %d (%s)" % (HOOK_IN_NODE, r.returncode, (r.stdout + r.stderr).strip()[-200:]))
    specs = generate("--driver-root", driver, "--cdi-hook-path", HOOK_IN_NODE)
    gpu = next((s for s in specs if s["kind"] == "polyaccel.io/gpu"), {})
    hooks = gpu.get("containerEdits", {}).get("hooks", [])
    check(len(hooks) >= 2 and all(h.get("path") == HOOK_IN_NODE and h.get("hookName") == "createContainer"
                                  for h in hooks),
          "the spec's createContainer hooks run %s: %s" % (HOOK_IN_NODE, [
              (h.get("path"), h.get("args", [])[1:2]) for h in hooks]))
    settle()
    L = gpu_fixture.LIBDIR
    r = run_container("workload", gpu_fixture.DRIVER_PROBE + "; " + gpu_fixture.PROBE,
                      ["polyaccel.io/gpu=" + whole])
    if ran(r, "with the hooks"):
        out = r["out"].splitlines()
        cache = [l for l in out if l.startswith("ldcache")]
        for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
            check(any((lib + " (libc6,x86-64) => " + L + lib) in l for l in cache),
                  "with the hooks: ldconfig -p in the container lists %s: %s" % (lib, cache))
        for link, target in (("libcuda.so.1", "libcuda.so." + gpu_fixture.VERSION),
                             ("libcuda.so", "libcuda.so.1"),
                             ("libnvidia-ml.so.1", "libnvidia-ml.so." + gpu_fixture.VERSION)):
            check("link %s %s" % (link, target) in out, "with the hooks: %s%s -> %s" % (L, link, target))
        seen, env_set = gpu_fixture.parse_probe(r["out"])
        check(seen.get("/dev/nvidia0", ("",))[0] == "character special file" and
              bool(env_set.get("NVIDIA_VISIBLE_DEVICES")),
              "with the hooks: /dev/nvidia0 is a character device (%s), NVIDIA_VISIBLE_DEVICES=%s" % (
                  seen.get("/dev/nvidia0"), env_set.get("NVIDIA_VISIBLE_DEVICES")))

    # --- 3. confinement: images whose loader configuration leads out of the container ----------
    def make_victim():
        shutil.rmtree(victim, ignore_errors=True)
        os.makedirs(victim + "/sub")
        shutil.copyfile(nvml, victim + "/libvictim.so.1.0")  # a shared library with a SONAME
        shutil.copyfile(cuda, victim + "/sub/libcuda.so.9")
        with open(victim + "/README", "w") as f:
            f.write("a directory of the node that no container may write to\n")
        os.symlink("libvictim.so.1.0", victim + "/libvictim.so")

    def snapshot(top):
        """Everything of top that a write would change: names, types, modes, sizes, link counts,
        inodes, times, link targets and contents."""
        out = {}
        for dirpath, dirnames, filenames in os.walk(top):
            for n in [""] + dirnames + filenames:
                p = os.path.join(dirpath, n) if n else dirpath
                st = os.lstat(p)
                entry = (st.st_mode, st.st_size, st.st_nlink, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
                if os.path.islink(p):
                    entry += (os.readlink(p),)
                elif os.path.isfile(p):
                    entry += (hashlib.sha256(open(p, "rb").read()).hexdigest(),)
                out[os.path.relpath(p, top)] = entry
        return out

    def changes(before):
        after = snapshot(victim)
        return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))

    EVIL = ("evil-proc", "evil-dotdot", "evil-links")
    # Controls, so that these checks can fail: a hook that trusts the image, on the same images,
    # does reach the victim. It writes the container's /etc/ld.so.cache as a path of the node
    # (without resolving it in the container's root) and runs the node's ldconfig on the
    # container's root (`ldconfig -r`, what update-ldcache hooks did).
    naive = "/usr/local/bin/naive-ldcache-hook"
    with open(node + naive, "w") as f:
        f.write("#!/bin/sh\nbundle=$(sed -n 's/.*\"bundle\" *: *\"\\([^\"]*\\)\".*/\\1/p')\n"
                "printf 'naive cache\\n' > \"$bundle/rootfs/etc/ld.so.cache\"\n"
                "/sbin/ldconfig -r \"$bundle/rootfs\"\nexit 0\n")
    os.chmod(node + naive, 0o755)
    naive_spec = generate.cdi_dir + "/polyaccel-test.io-naive.json"
    with open(naive_spec, "w") as f:
        json.dump({"cdiVersion": "0.5.0", "kind": "polyaccel-test.io/naive", "devices": [
            {"name": "hook", "containerEdits": {"hooks": [
                {"hookName": "createContainer", "path": naive, "args": ["naive-ldcache-hook"]}]}}]}, f)
    settle()
    escaped = {}
    for image in EVIL:
        make_victim()
        before = snapshot(victim)
        ran(run_container(image, "true", ["polyaccel-test.io/naive=hook"]), "control: %s, naive hook" % image)
        escaped[image] = changes(before)
        info("control: a naive hook on %s %s the node's %s %s" % (
            image, "changed" if escaped[image] else "did not change", victim, escaped[image]))
    check(bool(escaped.get("evil-links")), "control: through evil-links, a naive hook changes the "
          "node's %s (the checks below can fail)" % victim)
    os.unlink(naive_spec)
    make_victim()
    settle()

    before = snapshot(victim)
    for image in EVIL:
        probe = "cat /etc/ld.so.conf.d/evil.conf | sed 's/^/conf /'; ldconfig -p | sed 's/^/ldcache /'"
        r = run_container(image, probe, ["polyaccel.io/gpu=" + whole])
        out = r.get("out", "").splitlines()
        cache = [l for l in out if l.startswith("ldcache")]
        if image == "evil-links":
            # What the hook does with a cache that is a link out is its choice (replace the link,
            # or refuse the container); only the node must not change.
            info("evil-links with the hooks: %s; ldconfig -p: %s" % (
                r.get("error") or "exit %s" % r.get("exit"), cache))
        elif ran(r, "%s: with the hooks" % image):
            info("%s: ld.so.conf.d/evil.conf: %s" % (image, [l[5:] for l in out if l.startswith("conf ")]))
            check(any(("libnvidia-ml.so.1 (libc6,x86-64) => " + L + "libnvidia-ml.so.1") in l for l in cache),
                  "%s: its cache lists the driver's libnvidia-ml.so.1: %s" % (image, cache))
        leaked = [l for l in cache if "victim" in l or "/proc/" in l or "libcuda.so.9" in l or "/opt/" in l]
        check(not leaked, "%s: the container's cache lists nothing from the node's %s: %s" % (
            image, victim, leaked))
        check(not changes(before), "%s: the node's %s is untouched: %s" % (image, victim, changes(before)))

    times["CDI device, hooks"] = start_times("CDI device, hooks", "workload", ["polyaccel.io/gpu=" + whole])

# --- 4. the agent's own pods from the rendered overlays, registering with the test's kubelet ----
node_agent.run(node_agent.Node(node, work, cri, runtime, images, in_node, run_container, containerd_tail,
                               (start_container, container_output, remove_container), start_times),
               node_kubelet, image_archive, rendered_dra, rendered_device_plugin, scenario, topology,
               cuda, nvml, dev_nodes)

# --- the pod goes ---------------------------------------------------------------------------------
for call, req in ((runtime.StopPodSandbox, cri.StopPodSandboxRequest(pod_sandbox_id=pod)),
                  (runtime.RemovePodSandbox, cri.RemovePodSandboxRequest(pod_sandbox_id=pod))):
    try:
        call(req, timeout=120)
        check(True, "%s" % call._method.decode().rsplit("/", 1)[-1])
    except grpc.RpcError as e:
        check(False, "%s: %s" % (call._method.decode(), e.details()))
persistenced.close()
containerd.terminate()
try:
    containerd.wait(timeout=60)
except subprocess.TimeoutExpired:
    containerd.kill()
containerd_log.close()
errors = [l for l in open(work + "/containerd.log").read().splitlines() if "level=error" in l]
info("containerd logged %d error line(s)%s" % (len(errors), (":\n  " + "\n  ".join(errors[-10:])) if errors else ""))
for label, value in times.items():
    if value:
        info("START TIME SUMMARY %s (%s): %-22s create+start %.3f s, until `true` exited %.3f s" % (
            version.runtime_version, snapshotter, label, value[0], value[1]))
info("guest test wall time: %.1f s" % (time.monotonic() - t_start))
finish()
