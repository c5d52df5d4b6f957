"""The agent's own pods on the real node of cri_node.py (Guest.node-containerd17/21): the built
image (Image.build) imported into containerd, and each rendered overlay's DaemonSet run as kubelet
runs it, over CRI, with node_kubelet (tests/guest/node_kubelet.cc) playing kubelet's plugin
watcher, device manager and the API server over the real gRPC and HTTP protocols.

The pod is made from the rendered DaemonSet itself: image reference, command, args, env
(fieldRef spec.nodeName included), the container's securityContext as kubelet maps it into CRI
(privileged, capabilities, runAsUser, readOnlyRootFilesystem, no_new_privs from
allowPrivilegeEscalation, kubelet's masked and read-only /proc and /sys paths, seccomp), every
volumeMount with its hostPath (type
Directory checked, DirectoryOrCreate made, propagation kept) or ConfigMap, and what kubelet adds to
every pod: the service account's token, ca.crt and namespace at
/var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/PORT (the API server behind
TLS, socat, with a CA of the test's own). What the test changes, and why (printed as it runs):
- the pod uses the node's network namespace: the node has no CNI;
- --topology (the XE8640 capture, whose PCI addresses the test NVML's GPUs have) and
  --accel-backends on: the guest's own topology has no GPU;
- the NVML test build reads its scenario from NVML_INJECT_SCENARIO (a file mounted in);
- the DRA agent reads the GPUs' minors under --dra-root /test-root, the test's
  /proc/driver/nvidia tree (gpu_fixture): the guest's kernel has no nvidia driver (the
  device-plugin agent asks NVML);
- both overlays are rendered with the least-privilege component (guest_node_test.sh): the agent
  unprivileged, and the GPUs' device nodes (/dev/nvidia0-7, /dev/nvidiactl) given to it as CRI
  devices, as the NVIDIA container runtime adds them for NVIDIA_VISIBLE_DEVICES=all (the guest
  has no NVIDIA runtime).
The driver (gpu_fixture.make_driver_root) is installed in the node's own root, as on a host with
the NVIDIA driver.

Checked, each agent unprivileged (from the node, /proc/<pid>: the image has no shell): CapEff,
CapPrm and CapBnd 0, NoNewPrivs 1, Seccomp 2 (filter), uid 0, its root mounted read-only, its
/dev with the GPUs' nodes the runtime gave and nothing else of the host's; and all of the
following works so.
Checked, DRA overlay: the agent registers polyaccel.io (v1.DRAPlugin) with the plugin watcher,
loads NVML from the driver root, installs polyaccel-cdi-hook on the node where --cdi-hook-path
says and it runs there, publishes the node's GPUs as ResourceSlices (schema-valid); a claim the
test allocates to a GPU is prepared (NodePrepareResources), and a workload container created
with the CDI device ids of that answer starts: the GPU's device node and no other GPU's, its UUID
in NVIDIA_VISIBLE_DEVICES, and the hooks' work (`ldconfig -p` lists libcuda.so.1 and
libnvidia-ml.so.1); unprepared, the claim's spec is gone; StopContainer (SIGTERM): exit 0, the
registration socket removed. NRI: containers pinned by the claims' variables, kept across a
restart of the agent; and the whole chain on the guest's own topology (cpu_claims): a claim for a
core and its node's memory, prepared, its CDI devices given to a container, the container pinned
by the agent's NRI plugin to that core and node.
Device-plugin overlay (a node with CDI on and no NVIDIA container runtime): the agent loads NVML
from the driver root, writes the node's CDI specs into the node's /var/run/cdi, registers
nvidia.com/gpu with the device manager and lists the scenario's GPUs; Allocate of one names its
CDI device beside the device specs and variables; a workload container created with all of
Allocate's answer (as kubelet passes it) has that GPU's node and no other, its UUID, and the
driver's libraries (`ldconfig -p`); /metrics on the container's port has the 8 GPUs and the build's revision, node labels are in the
NFD directory; StopContainer ends the ListAndWatch stream and leaves no socket of the agent's.
The image, as containerd stored it: the OCI annotations (revision = the build's commit),
`polyaccel --version` names that commit, and it has no shell."""
import json, os, queue, shutil, subprocess, threading, time, urllib.request
import gpu_fixture
from guest_lib import check, normalized

NODE_NAME = "node-1"
TOKEN = "polyaccel-node-test-token"


def info(text):
    print("info " + text, flush=True)


class NodeKubelet:
    """node_kubelet as a process: commands on its stdin, answers read from its stdout."""

    def __init__(self, binary, node, log):
        self.proc = subprocess.Popen([binary, node, NODE_NAME, TOKEN], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, text=True)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()
        self.api_port = int(self.wait("api", 60) or 0)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait(self, word, timeout, where=None):
        """The text after WORD of the first line with it (and, with `where`, for which it is
        true), or None after timeout s. Lines of other words are kept for later waits."""
        deadline = time.monotonic() + timeout
        while True:
            for i, line in enumerate(self.seen):
                w, _, rest = line.partition(" ")
                if w == word and (where is None or where(rest)):
                    del self.seen[i]
                    return rest
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line.startswith("error "):
                info("node_kubelet: " + line)
            self.seen.append(line)

    def ask(self, command, word, timeout=120):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        text = self.wait(word, timeout)
        return json.loads(text) if text is not None else None

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Node:
    """What the agent pods need of cri_node.py's node: paths, CRI stubs, helpers."""

    def __init__(self, node, work, cri, runtime, images, in_node, run_container, containerd_tail,
                 long_running, start_times):
        self.node, self.work, self.cri = node, work, cri
        self.runtime, self.images, self.in_node = runtime, images, in_node
        self.run_container, self.containerd_tail = run_container, containerd_tail
        self.start_container, self.container_output, self.remove_container = long_running
        self.start_times = start_times


def make_tls_frontend(n, api_port):
    """A CA and a server certificate for 127.0.0.1 (openssl), socat terminating TLS on 6443 in
    front of the test API server: (CA path, socat process)."""
    pki = n.work + "/pki"
    os.makedirs(pki, exist_ok=True)

    def openssl(*args):
        r = subprocess.run(["openssl", *args], capture_output=True, text=True)
        check(r.returncode == 0, "openssl %s (%s)" % (args[0], r.stderr.strip()[-200:]))

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-days", "2", "-subj", "/CN=node-test-ca", "-keyout", pki + "/ca.key", "-out", pki + "/ca.crt")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
            "/CN=kube-apiserver", "-keyout", pki + "/server.key", "-out", pki + "/server.csr")
    with open(pki + "/ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", pki + "/server.csr", "-CA", pki + "/ca.crt", "-CAkey", pki + "/ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", pki + "/ext", "-out", pki + "/server.crt")
    socat = subprocess.Popen(
        ["socat", "OPENSSL-LISTEN:6443,bind=127.0.0.1,reuseaddr,fork,verify=0,cert=%s/server.crt,key=%s/server.key"
         % (pki, pki), "TCP:127.0.0.1:%d" % api_port],
        stdout=subprocess.DEVNULL, stderr=open(n.work + "/socat.log", "w"))
    return pki + "/ca.crt", socat


def import_image(n, archive):
    """ctr -n k8s.io images import of the OCI archive (read from stdin: the archive is not in the
    node's root); the reference it was imported under."""
    t = time.monotonic()
    with open(archive, "rb") as f:
        r = subprocess.run(["chroot", n.node, "ctr", "--address", "/run/containerd/containerd.sock",
                            "-n", "k8s.io", "images", "import", "-"], stdin=f, capture_output=True,
                           text=True, timeout=600, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    check(r.returncode == 0, "ctr -n k8s.io images import of the built image (%.1f s, %d MB) %s" % (
        time.monotonic() - t, os.path.getsize(archive) >> 20, (r.stderr or "").strip()[-300:]))
    refs = n.in_node("ctr", "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "images",
                     "ls", "-q").stdout.split()
    return [ref for ref in refs if "polyaccel" in ref and "node-test" not in ref]


def check_image(n, ref):
    """What the image itself must be, as containerd stored it: its manifest's OCI annotations
    (revision = the build's commit), `polyaccel --version` naming that commit, and no shell."""
    revision = os.environ.get("POLYACCEL_REVISION", "")
    ctr = ["ctr", "--address", "/run/containerd/containerd.sock", "-n", "k8s.io"]
    listed = n.in_node(*ctr, "images", "ls").stdout.splitlines()
    digest = next((l.split()[2] for l in listed if l.split()[:1] == [ref]), "")
    manifest = {}
    for _ in range(3):  # an index names the manifest
        r = n.in_node(*ctr, "content", "get", digest) if digest else None
        doc = json.loads(r.stdout) if r is not None and r.returncode == 0 else {}
        if "manifests" in doc:
            digest = doc["manifests"][0]["digest"]
            continue
        manifest = doc
        break
    notes = manifest.get("annotations", {})
    check(revision and notes.get("org.opencontainers.image.revision") == revision,
          "image: containerd's manifest of %s has the annotation revision %s (%s)" % (ref, revision, notes))
    check(bool(notes.get("org.opencontainers.image.version")),
          "image: annotation org.opencontainers.image.version: %s" % notes.get("org.opencontainers.image.version"))
    # The source is the checkout's remote as https, or none (a clone of a local folder, as CI's):
    # never a file:// URL or a path of the build host (scripts/source-url.sh).
    source = notes.get("org.opencontainers.image.source")
    check(source is None or source.startswith("https://"),
          "image: annotation org.opencontainers.image.source is an https URL or absent: %s" % source)
    r = n.run_container(ref, "", [], argv=["/usr/bin/polyaccel", "--version"])
    check("error" not in r and r["exit"] == 0 and revision[:12] in r["out"],
          "image: polyaccel --version names commit %s: %s" % (revision[:12], r.get("error") or r["out"].strip()))
    r = n.run_container(ref, "", [], argv=["/bin/sh", "-c", "true"])
    check("error" in r or r["exit"] != 0, "image: it has no shell (%s)" % (r.get("error") or r.get("exit")))


# kubelet's /proc and /sys paths masked and made read-only in a container that is not privileged
# (kubernetes pkg/securitycontext/util.go, ConvertToRuntimeMaskedPaths and
# ConvertToRuntimeReadonlyPaths for the Default procMount; containerd drops them when privileged).
MASKED_PATHS = ["/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
                "/sys/firmware", "/sys/devices/virtual/powercap"]
READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
# What the NVIDIA container runtime gives a container of NVIDIA_VISIBLE_DEVICES=all and
# NVIDIA_DRIVER_CAPABILITIES=utility: every GPU's node and nvidiactl.
RUNTIME_GPU_NODES = ["/dev/nvidia%d" % i for i in range(8)] + ["/dev/nvidiactl"]


def security_context(cri, sc):
    """The container's securityContext as kubelet passes it to the runtime (kuberuntime's
    convertToRuntimeSecurityContext): capabilities as named, runAsUser, readOnlyRootFilesystem,
    no_new_privs = allowPrivilegeEscalation false, the default masked and read-only paths, and
    the seccomp profile (Unconfined where none is named: kubelet without --seccomp-default)."""
    caps = sc.get("capabilities", {})
    seccomp = {"RuntimeDefault": cri.SecurityProfile.RuntimeDefault,
               "Localhost": cri.SecurityProfile.Localhost}.get(
        sc.get("seccompProfile", {}).get("type"), cri.SecurityProfile.Unconfined)
    out = cri.LinuxContainerSecurityContext(
        privileged=bool(sc.get("privileged")),
        capabilities=cri.Capability(add_capabilities=caps.get("add", []),
                                    drop_capabilities=caps.get("drop", [])),
        readonly_rootfs=bool(sc.get("readOnlyRootFilesystem")),
        no_new_privs=sc.get("allowPrivilegeEscalation") is False,
        masked_paths=MASKED_PATHS, readonly_paths=READONLY_PATHS,
        seccomp=cri.SecurityProfile(profile_type=seccomp))
    if "runAsUser" in sc:
        out.run_as_user.value = sc["runAsUser"]
    return out


def check_unprivileged(n, label, cid, sc):
    """The agent's process as the kernel sees it, from the node (the image has no shell): no
    effective, permitted or bounding capability but those the securityContext adds back,
    no_new_privs, seccomp filtering, uid 0, a read-only root, the GPUs' nodes the runtime gave
    and no other node of the host's /dev."""
    tasks = n.in_node("ctr", "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "tasks",
                      "ls").stdout.splitlines()
    pid = next((int(t.split()[1]) for t in tasks if t.split()[:1] == [cid]), 0)
    check(pid > 0, "%s: the agent's process on the node: pid %d" % (label, pid))
    if not pid:
        return
    status = dict(l.split(":", 1) for l in open("/proc/%d/status" % pid).read().splitlines() if ":" in l)
    status = {k: v.strip() for k, v in status.items()}
    want = 0
    for cap in sc.get("capabilities", {}).get("add", []):
        want |= 1 << {"SYS_ADMIN": 21}[cap]
    for field in ("CapEff", "CapPrm", "CapBnd"):
        check(int(status.get(field, "-1"), 16) == want, "%s: the agent's %s is %#x: %s" % (
            label, field, want, status.get(field)))
    check(status.get("NoNewPrivs") == "1", "%s: the agent runs with no_new_privs: %s" % (
        label, status.get("NoNewPrivs")))
    check(status.get("Seccomp") == "2", "%s: the agent runs under a seccomp filter (RuntimeDefault): "
          "Seccomp %s" % (label, status.get("Seccomp")))
    check(status.get("Uid", "").split()[:2] == ["0", "0"], "%s: the agent runs as uid 0: %s" % (
        label, status.get("Uid")))
    root = [l.split() for l in open("/proc/%d/mountinfo" % pid) if l.split()[4:5] == ["/"]]
    check(root and root[-1][5].split(",")[0] == "ro", "%s: the container's root is mounted read-only: %s" % (
        label, root[-1][5] if root else "no root mount"))
    dev = "/proc/%d/root/dev/" % pid
    given = sorted("/dev/" + f for f in os.listdir(dev) if f.startswith("nvidia"))
    check(given == sorted(p for p in RUNTIME_GPU_NODES), "%s: the container's /dev has the GPUs' nodes "
          "the runtime gave and not the host's /dev (nvidia-uvm, nvidia-caps): %s" % (label, given))


def run_daemonset(n, kubelet, rendered, label, ca_crt, scenario, topology, extra_mounts=(), extra_args=()):
    """The DaemonSet of RENDERED (kubectl kustomize's objects) as kubelet runs it: its pod
    sandbox and container, started. (sandbox id, container id, the DaemonSet's container) or
    None."""
    cri = n.cri
    objects = json.load(open(rendered))
    ds = next(o for o in objects if o["kind"] == "DaemonSet")
    configmaps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    image = normalized(c["image"])
    st = n.images.ImageStatus(cri.ImageStatusRequest(image=cri.ImageSpec(image=image)), timeout=60)
    check(st.image.id != "", "%s: CRI ImageStatus knows the DaemonSet's image %s" % (label, image))
    if not st.image.id:
        return None
    sc = c.get("securityContext", {})
    privileged = bool(sc.get("privileged"))
    check(not privileged, "%s: the rendered DaemonSet's agent is not privileged (the least-privilege "
          "component): %s" % (label, sc))
    pod_dir = "/run/polyaccel-test/pods/" + label  # kubelet's /var/lib/kubelet/pods/<uid>
    os.makedirs(n.node + pod_dir)
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = []
    propagation = {"HostToContainer": cri.PROPAGATION_HOST_TO_CONTAINER,
                   "Bidirectional": cri.PROPAGATION_BIDIRECTIONAL}
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        if "hostPath" in v:
            path, kind = v["hostPath"]["path"], v["hostPath"].get("type", "")
            # Resolved in the node's root (chroot): /var/run is a link to /run there.
            source = path
            if kind == "DirectoryOrCreate":
                r = n.in_node("mkdir", "-p", "-m", "0755", path)
                check(r.returncode == 0, "%s: hostPath %s (DirectoryOrCreate) made on the node %s" % (
                    label, path, r.stderr.strip()))
            elif kind == "Directory":
                check(n.in_node("test", "-d", path).returncode == 0,
                      "%s: hostPath %s (type Directory) is a directory of the node" % (label, path))
        elif "configMap" in v:
            name = v["configMap"]["name"]
            source = "%s/configmaps/%s" % (pod_dir, name)
            os.makedirs(n.node + source)
            for key, text in configmaps.get(name, {}).get("data", {}).items():
                with open("%s%s/%s" % (n.node, source, key), "w") as f:
                    f.write(text)
        else:
            check(False, "%s: volume %s: a kind this test does not map" % (label, m["name"]))
            continue
        mounts.append(cri.Mount(container_path=m["mountPath"], host_path=source,
                                readonly=bool(m.get("readOnly")),
                                propagation=propagation.get(m.get("mountPropagation"), cri.PROPAGATION_PRIVATE)))
    envs = [cri.KeyValue(key="KUBERNETES_SERVICE_HOST", value="127.0.0.1"),
            cri.KeyValue(key="KUBERNETES_SERVICE_PORT", value="6443")]
    for e in c.get("env", []):
        if "value" in e:
            envs.append(cri.KeyValue(key=e["name"], value=e["value"]))
        elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            envs.append(cri.KeyValue(key=e["name"], value=NODE_NAME))
        else:
            check(False, "%s: env %s: a source this test does not map" % (label, e["name"]))
    if pod.get("automountServiceAccountToken", True):
        sa = pod_dir + "/serviceaccount"
        os.makedirs(n.node + sa)
        for name, text in (("token", TOKEN), ("ca.crt", open(ca_crt).read()),
                           ("namespace", ds["metadata"].get("namespace", "default"))):
            with open("%s%s/%s" % (n.node, sa, name), "w") as f:
                f.write(text)
        mounts.append(cri.Mount(container_path="/var/run/secrets/kubernetes.io/serviceaccount",
                                host_path=sa, readonly=True))
    # What a GPU node has and this guest has not (the module's docstring).
    test_dir = pod_dir + "/test"
    os.makedirs(n.node + test_dir)
    shutil.copyfile(scenario, n.node + test_dir + "/scenario.json")
    if topology:
        shutil.copyfile(topology, n.node + test_dir + "/topology.xml")
    mounts.append(cri.Mount(container_path="/test", host_path=test_dir, readonly=True))
    for host, container in extra_mounts:
        mounts.append(cri.Mount(container_path=container, host_path=host, readonly=True))
    envs.append(cri.KeyValue(key="NVML_INJECT_SCENARIO", value="/test/scenario.json"))
    # Without a topology: the guest's own (hwloc in the container), and no GPU library.
    test_args = ["--topology", "/test/topology.xml", "--accel-backends", "on"] if topology else \
        ["--accel-backends", "off"]
    args = c.get("args", []) + test_args + list(extra_args)
    info("%s: %s %s" % (label, " ".join(c.get("command", [])), " ".join(args)))

    os.makedirs(n.work + "/pods/agent-" + label)  # kubelet makes the pod's log directory
    sandbox = cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name="polyaccel-agent-" + label, uid="agent-%s-uid" % label,
                                        namespace=ds["metadata"].get("namespace", "default")),
        log_directory=n.work + "/pods/agent-" + label,
        linux=cri.LinuxPodSandboxConfig(
            cgroup_parent="/kubepods/burstable/podagent-%s-uid" % label,
            security_context=cri.LinuxSandboxSecurityContext(
                namespace_options=cri.NamespaceOption(network=cri.NODE, pid=cri.CONTAINER, ipc=cri.POD),
                privileged=privileged)))
    try:
        sandbox_id = n.runtime.RunPodSandbox(cri.RunPodSandboxRequest(config=sandbox), timeout=300).pod_sandbox_id
        config = cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name=c["name"]), image=cri.ImageSpec(image=image),
            command=c.get("command", []), args=args, envs=envs, mounts=mounts,
            log_path=c["name"] + ".log",
            # Not privileged: the GPUs' nodes as the NVIDIA container runtime adds them (the module's
            # docstring).
            devices=[] if privileged else [cri.Device(container_path=p, host_path=p, permissions="rw")
                                           for p in RUNTIME_GPU_NODES],
            linux=cri.LinuxContainerConfig(security_context=security_context(cri, sc)))
        cid = n.runtime.CreateContainer(cri.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox), timeout=300).container_id
        n.runtime.StartContainer(cri.StartContainerRequest(container_id=cid), timeout=300)
    except Exception as e:  # grpc.RpcError
        check(False, "%s: the DaemonSet's pod runs: %s\n  %s" % (label, e, n.containerd_tail()))
        return None
    check(True, "%s: the DaemonSet's pod and container run (privileged=%s, %d mounts)" % (
        label, privileged, len(mounts)))
    if not privileged:
        check_unprivileged(n, label, cid, sc)
    return sandbox_id, cid, c


def container_log(n, cid):
    try:
        st = n.runtime.ContainerStatus(n.cri.ContainerStatusRequest(container_id=cid), timeout=60).status
        if not os.path.exists(st.log_path):
            return "(no log at %s; state %s, reason %s, %s)" % (st.log_path, st.state, st.reason, st.message)
        return open(st.log_path).read()
    except Exception as e:  # grpc.RpcError
        return "(no status: %s)" % e


def stop_pod(n, label, sandbox_id, cid):
    """StopContainer with a grace period (SIGTERM), as kubelet deletes a pod: the exit code."""
    cri = n.cri
    t = time.monotonic()
    n.runtime.StopContainer(cri.StopContainerRequest(container_id=cid, timeout=30), timeout=120)
    st = n.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=cid), timeout=60).status
    check(st.state == cri.CONTAINER_EXITED and st.exit_code == 0,
          "%s: StopContainer (SIGTERM): the agent exited %d in %.1f s" % (label, st.exit_code, time.monotonic() - t))
    info("%s: the agent's log:\n  %s" % (label, "\n  ".join(container_log(n, cid).splitlines()[-12:])))
    if time.monotonic() - t > 20:
        info("%s: containerd's log:\n  %s" % (label, n.containerd_tail(60)))
    try:
        n.runtime.RemoveContainer(cri.RemoveContainerRequest(container_id=cid), timeout=120)
        n.runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=120)
        n.runtime.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=120)
    except Exception as e:  # grpc.RpcError
        check(False, "%s: the pod goes (%s)\n  %s" % (label, e, n.containerd_tail(80)))


def dra_overlay(n, kubelet, rendered, ca_crt, scenario, topology, dev_nodes):
    label = "dra"
    t = time.monotonic()
    pod = run_daemonset(n, kubelet, rendered, label, ca_crt, scenario, topology,
                        [(n.work + "/root", "/test-root")], ["--dra-root", "/test-root"])
    if not pod:
        return
    sandbox_id, cid, c = pod
    flags = dict(a.split("=", 1) for a in c.get("args", []) if a.startswith("--") and "=" in a)
    reg = kubelet.wait("registered", 300, lambda rest: json.loads(rest).get("name") == "polyaccel.io")
    reg = json.loads(reg) if reg else {}
    check(reg.get("accepted") and "v1.DRAPlugin" in reg.get("versions", []),
          "dra: the agent registered polyaccel.io with the plugin watcher %.1f s after its pod was "
          "made: %s" % (time.monotonic() - t, reg))
    log = container_log(n, cid)
    if not reg:
        info("dra: the agent's log:\n  " + "\n  ".join(log.splitlines()[-20:]))
        stop_pod(n, label, sandbox_id, cid)
        return
    check("NVML from the driver root: /host/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." + gpu_fixture.VERSION in log,
          "dra: the agent loaded NVML from the driver root the DaemonSet mounts at /host")
    hook = flags.get("--cdi-hook-path", "")
    r = n.in_node(hook, "version") if hook else None
    check(r is not None and r.returncode == 0, "dra: the agent installed %s on the node, and it runs "
          "there (%s)" % (hook, (r.stdout + r.stderr).strip()[-100:] if r else "no --cdi-hook-path"))

    devices = kubelet.ask("slices 120", "slices") or []
    gpus = [d for d in devices if d["device"].startswith("gpu-") and "-mig-" not in d["device"] and d["uuid"]]
    check(len(gpus) >= 7, "dra: the node's ResourceSlices list its GPUs (%d devices, %d whole GPUs)" % (
        len(devices), len(gpus)))
    if not gpus:
        info("dra: the API server's requests: %s; socat: %s" % (
            kubelet.ask("requests", "requests"), open(n.work + "/socat.log").read()[-500:]))
        info("dra: the agent's log:\n  " + "\n  ".join(container_log(n, cid).splitlines()[-30:]))
        stop_pod(n, label, sandbox_id, cid)
        return
    gpu = gpus[1]
    t = time.monotonic()
    prepared = kubelet.ask("dra-prepare gpu-claim claim-uid-1 " + gpu["device"], "dra-prepared") or {}
    result = prepared.get("claims", {}).get("claim-uid-1", {})
    ids = [i for d in result.get("devices", []) for i in d.get("cdi_device_ids", [])]
    check(ids and not result.get("error"), "dra: NodePrepareResources of a claim for %s (%s) in %.2f s: CDI "
          "devices %s %s" % (gpu["device"], gpu["uuid"], time.monotonic() - t, ids, result.get("error", "")))
    specs = os.listdir(n.node + "/run/cdi")
    info("dra: the node's CDI specs: %s" % specs)
    if ids:
        r = n.run_container("workload", gpu_fixture.DRIVER_PROBE + "; " + gpu_fixture.PROBE, ids)
        ok = "error" not in r and r["exit"] == 0
        check(ok, "dra: a workload container with the claim's CDI devices starts and exits 0 (%s)" % (
            r.get("error") or r.get("out", "")[-300:]))
        if ok:
            out = r["out"].splitlines()
            cache = [l for l in out if l.startswith("ldcache")]
            L = gpu_fixture.LIBDIR
            for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
                check(any((lib + " (libc6,x86-64) => " + L + lib) in l for l in cache),
                      "dra: in the workload, ldconfig -p lists %s: %s" % (lib, cache))
            seen, env_set = gpu_fixture.parse_probe(r["out"])
            gpu_nodes = sorted(p for p in seen if p[len("/dev/nvidia"):].isdigit())
            check(len(gpu_nodes) == 1 and seen[gpu_nodes[0]][1:] == dev_nodes.get(gpu_nodes[0]),
                  "dra: the workload has one GPU's device node, the host's: %s" % gpu_nodes)
            check(env_set.get("NVIDIA_VISIBLE_DEVICES") == gpu["uuid"],
                  "dra: NVIDIA_VISIBLE_DEVICES=%s is the claimed GPU's UUID %s" % (
                      env_set.get("NVIDIA_VISIBLE_DEVICES"), gpu["uuid"]))
    unprepared = kubelet.ask("dra-unprepare gpu-claim claim-uid-1", "dra-unprepared") or {}
    check(unprepared.get("claims", {}).get("claim-uid-1") is not None and
          not unprepared["claims"]["claim-uid-1"].get("error"),
          "dra: NodeUnprepareResources: %s" % unprepared)
    left = sorted(os.listdir(n.node + "/run/cdi"))
    check(not [s for s in left if "claim" in s], "dra: the claim's CDI spec is gone: %s" % left)
    errors = kubelet.ask("schema-errors", "schema-errors")
    check(errors == [], "dra: the API server found every object the agent wrote valid: %s" % errors)
    check(any("nri: registered with" in l for l in container_log(n, cid).splitlines()),
          "dra: the agent registered with containerd as an NRI plugin")
    # Issue 39's figure: what the plugin adds to a container's start, shared and claimed (without
    # the plugin: at the end, on the same quiet node).
    n.start_times("NRI plugin, shared pool", "workload", [])
    node1 = open("/sys/devices/system/node/node1/cpulist").read().strip()
    n.start_times("NRI plugin, claimed CPUs", "workload", [], [
        n.cri.KeyValue(key="POLYACCEL_CPUS_timing", value=node1),
        n.cri.KeyValue(key="POLYACCEL_MEMS_timing", value="1")])
    shared, claimed = nri_start(n)
    shared_before = allowed(n, shared) if isinstance(shared, str) else None
    stop_pod(n, label, sandbox_id, cid)
    # The agent again, as after an upgrade or a crash: it learns the claims back.
    pod = run_daemonset(n, kubelet, rendered, label + "-restarted", ca_crt, scenario, topology,
                        [(n.work + "/root", "/test-root")], ["--dra-root", "/test-root"])
    if pod:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "nri: registered with" not in container_log(n, pod[1]):
            time.sleep(0.5)
        nri_after_restart(n, container_log(n, pod[1]), "polyaccel-agent-%s-restarted/%s" % (label, pod[2]["name"]),
                          shared, claimed, shared_before)
        stop_pod(n, label + "-restarted", pod[0], pod[1])
    cpu_claims(n, kubelet, rendered, label, ca_crt, scenario)
    n.start_times("no NRI plugin", "workload", [])
    registry = n.node + "/var/lib/kubelet/plugins_registry"
    check(not [s for s in os.listdir(registry) if s.startswith("polyaccel")],
          "dra: the registration socket is gone: %s" % os.listdir(registry))


STATUS_LOOP = ("while true; do grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status | tr '\\n\\t' '  ';"
               " echo; sleep 0.3; done")
# Before STATUS_LOOP: the container's own hugetlb limit, once (cgroup v2, its own namespace).
HUGETLB_LINE = "echo hugetlb $(cat /sys/fs/cgroup/hugetlb.2MB.max 2>&1); "


def allowed(n, cid, want=None, timeout=15):
    """The container's latest (Cpus_allowed_list, Mems_allowed_list), waiting up to TIMEOUT for
    WANT (a predicate on it)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        lines = [l.split() for l in n.container_output(cid).splitlines() if l.startswith("Cpus_allowed_list")]
        if lines and len(lines[-1]) >= 4:
            last = (lines[-1][1], lines[-1][3])
            if want is None or want(last):
                return last
        time.sleep(0.3)
    return last


def cpu_list(text):
    out = set()
    for part in text.split(","):
        if part:
            a, _, b = part.partition("-")
            out |= set(range(int(a), int(b or a) + 1))
    return out


def nri_start(n):
    """Pods of the test on the real runtime while the DRA agent is its NRI plugin: a container
    without a claim (shared), then two whose claims hold the CPUs and memory of NUMA nodes 1 and
    2 (the environment the claims' CDI specs set). Each claimed container has exactly its CPUs
    and node; the shared one leaves both. The containers, for nri_after_restart."""
    nodes = {i: open("/sys/devices/system/node/node%d/cpulist" % i).read().strip() for i in (1, 2)}
    shared = n.start_container("workload", STATUS_LOOP)
    check(isinstance(shared, str), "nri: a container without a claim starts (%s)" % shared)
    claimed = {}
    for node, cpus in nodes.items():
        envs = [n.cri.KeyValue(key="POLYACCEL_CPUS_claim%d" % node, value=cpus),
                n.cri.KeyValue(key="POLYACCEL_MEMS_claim%d" % node, value=str(node))]
        cid = n.start_container("workload", STATUS_LOOP, envs=envs)
        check(isinstance(cid, str), "nri: a container whose claim holds NUMA node %d starts (%s)" % (node, cid))
        if isinstance(cid, str):
            got = allowed(n, cid)
            check(got == (cpus, str(node)), "nri: its Cpus_allowed_list and Mems_allowed_list are the "
                  "claim's %s and %d: %s" % (cpus, node, got))
            claimed[node] = (cid, cpus)
    if isinstance(shared, str):
        taken = set().union(*(cpu_list(c) for _, c in claimed.values())) if claimed else set()
        got = allowed(n, shared, lambda a: not cpu_list(a[0]) & taken)
        check(got is not None and not cpu_list(got[0]) & taken and cpu_list(got[0]),
              "nri: the running container without a claim was moved off the claimed CPUs %s: %s" % (
                  sorted(taken), got))
    return shared, claimed


def cpu_claims(n, kubelet, rendered, label, ca_crt, scenario):
    """Issue 39's chain on the real runtime, with no stand-in between the parts: the DRA agent on
    the guest's own topology (no --topology; --dra-cpus core --dra-memory) publishes its cores
    and its NUMA nodes' memory; NodePrepareResources of a claim for a core of NUMA node 3 and that
    node's memory answers CDI devices; a container created with those CDI devices (containerd
    applies the claim's spec, which sets the claim's CPU variables) is given exactly that core and
    node by the same agent's NRI plugin. Node 3: nri_start's claims hold nodes 1 and 2.
    Node 3 is given 16 pages of 2 MB and the container asks for 32 (its pod's hugepages-2Mi): the
    plugin lowers its hugetlb limit to the 16 its claimed node holds."""
    lbl = label + "-cpus"
    pages = "/sys/devices/system/node/node3/hugepages/hugepages-2048kB/nr_hugepages"
    with open(pages, "w") as f:
        f.write("16")
    check(open(pages).read().strip() == "16", "cpus: node 3 holds 16 pages of 2 MB")
    pod = run_daemonset(n, kubelet, rendered, lbl, ca_crt, scenario, None, (),
                        ["--dra-cpus", "core", "--dra-memory"])
    if not pod:
        return
    sandbox_id, cid = pod[0], pod[1]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "nri: registered with" not in container_log(n, cid):
        time.sleep(0.5)
    first = min(cpu_list(open("/sys/devices/system/node/node3/cpulist").read().strip()))
    core = cpu_list(open("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % first).read())
    want = ["cpu-%d" % first, "memory-numa-3"]
    names = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        names = [d["device"] for d in (kubelet.ask("slices 120", "slices") or [])]
        if all(w in names for w in want):
            break
        time.sleep(1)
    check(all(w in names for w in want), "cpus: the agent on the guest's own topology publishes its cores "
          "and its NUMA nodes' memory (%s among %s)" % (want, names))
    if not all(w in names for w in want):
        info("cpus: the agent's log:\n  " + "\n  ".join(container_log(n, cid).splitlines()[-20:]))
        stop_pod(n, lbl, sandbox_id, cid)
        return
    prepared = kubelet.ask("dra-prepare cpu-claim claim-uid-cpus " + ",".join(want), "dra-prepared") or {}
    result = prepared.get("claims", {}).get("claim-uid-cpus", {})
    ids = [i for d in result.get("devices", []) for i in d.get("cdi_device_ids", [])]
    check(len(ids) == 2 and not result.get("error"), "cpus: NodePrepareResources of a claim for %s: CDI "
          "devices %s %s" % (want, ids, result.get("error", "")))
    if ids:
        c = n.start_container("workload", HUGETLB_LINE + STATUS_LOOP, devices=ids,
                              hugepages=[("2MB", 32 << 21)])
        check(isinstance(c, str), "cpus: a container with the claim's CDI devices starts (%s)" % c)
        if isinstance(c, str):
            got = allowed(n, c, lambda a: cpu_list(a[0]) == core and a[1] == "3")
            check(got is not None and cpu_list(got[0]) == core and got[1] == "3",
                  "cpus: the agent's NRI plugin gave it the claimed core %s and NUMA node 3: %s" % (
                      sorted(core), got))
            limit = [l.split(None, 1)[-1] for l in n.container_output(c).splitlines()
                     if l.startswith("hugetlb ")][-1:]
            check(limit == [str(16 << 21)], "cpus: its pod asked for 32 pages of 2 MB, its hugetlb.2MB.max "
                  "is the 16 its claimed node holds (%d): %s" % (16 << 21, limit))
            check("its hugetlb limit is lowered to that" in container_log(n, cid),
                  "cpus: the agent said it lowered the limit")
            n.remove_container(c)
        # `polyaccel run` inside such a container (the agent's image, which has it) plans within
        # the claim: the CPUs and node the NRI plugin gave the container, none outside.
        r = n.run_container(normalized(pod[2]["image"]), None, ids,
                            argv=["/usr/bin/polyaccel", "run", "--dry-run", "--json", "--", "true"])
        # The plan is what it printed on stdout: ROCm SMI, in the image for AMD nodes, prints its
        # own complaint to stderr on a node without /sys/class/drm, interleaved in the log.
        try:
            plan = json.loads(r.get("stdout", ""))
        except ValueError:
            plan = {}
        check(plan.get("cpus") and set(plan["cpus"]) <= core and plan.get("mems") == [3],
              "cpus: `polyaccel run` in a container of the claim binds within its core %s and node 3: "
              "cpus %s, mems %s (%s)" % (sorted(core), plan.get("cpus"), plan.get("mems"),
                                         r.get("error") or r.get("out", "")[-300:] if not plan else ""))
    unprepared = kubelet.ask("dra-unprepare cpu-claim claim-uid-cpus", "dra-unprepared") or {}
    check(unprepared.get("claims", {}).get("claim-uid-cpus") is not None and
          not unprepared["claims"]["claim-uid-cpus"].get("error"),
          "cpus: NodeUnprepareResources: %s" % unprepared)
    stop_pod(n, lbl, sandbox_id, cid)


def nri_after_restart(n, log, own, shared, claimed, shared_before):
    """After the agent's restart: nobody was moved (its log and the containers say so); then a
    claimed container goes and the shared one grows onto its CPUs."""
    # Only the agent's own new container, made while no plugin was there, is moved onto the pool.
    line = [l for l in log.splitlines() if "nri: registered with" in l]
    moved = line[-1].rstrip().split(" moved")[-1] if line else "?"
    check(line and ("with claimed CPUs" in line[-1]) and (moved == "" or (moved.startswith(" (") and moved.endswith("/%s)" % own) and " " not in moved[2:])),
          "nri: the restarted agent learnt %d claims back and moved none of the containers it had "
          "placed: %s" % (len(claimed), line[-1:] or log[-500:]))
    before = allowed(n, shared) if isinstance(shared, str) else None
    if isinstance(shared, str):
        check(before == shared_before, "nri: the shared container kept %s across the restart: %s" % (
            shared_before, before))
    for node, (cid, cpus) in claimed.items():
        check(allowed(n, cid) == (cpus, str(node)), "nri: after the restart the claimed container of "
              "node %d still has %s" % (node, cpus))
    if claimed and isinstance(shared, str):
        node, (cid, cpus) = sorted(claimed.items())[0]
        n.remove_container(cid)
        del claimed[node]
        got = allowed(n, shared, lambda a: cpu_list(cpus) <= cpu_list(a[0]))
        check(got is not None and cpu_list(cpus) <= cpu_list(got[0]),
              "nri: the claimed container of node %d went; the shared one grew from %s onto its CPUs: %s" % (
                  node, before and before[0], got))
    for cid, _ in claimed.values():
        n.remove_container(cid)
    if isinstance(shared, str):
        n.remove_container(shared)


def device_plugin_overlay(n, kubelet, rendered, ca_crt, scenario, topology, nvml, dev_nodes):
    label = "device-plugin"
    pod = run_daemonset(n, kubelet, rendered, label, ca_crt, scenario, topology)
    if not pod:
        return
    sandbox_id, cid, c = pod
    ids = kubelet.ask("dp-devices nvidia.com/gpu 7 300", "dp-devices", 320) or []
    log = container_log(n, cid)
    check("NVML from the driver root: /host/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." + gpu_fixture.VERSION in log,
          "device-plugin: the agent loaded NVML from the driver root the DaemonSet mounts at /host")
    specs = sorted(os.listdir(n.node + "/run/cdi"))
    check("polyaccel.io-gpu.json" in specs, "device-plugin: the agent wrote the node's CDI specs into the "
          "node's /var/run/cdi: %s" % specs)
    uuids = {g.get("uuid") for g in json.load(open(scenario)).get("devices", [])}
    check(len(ids) >= 7 and set(ids) <= uuids, "device-plugin: nvidia.com/gpu registered, ListAndWatch "
          "lists the scenario's GPUs by UUID: %s" % ids)
    if not ids:
        info("device-plugin: the agent's log:\n  " + "\n  ".join(container_log(n, cid).splitlines()[-20:]))
        stop_pod(n, label, sandbox_id, cid)
        return
    alloc = kubelet.ask("dp-allocate nvidia.com/gpu " + ids[0], "dp-allocated") or {}
    resp = (alloc.get("container_responses") or [{}])[0]
    info("device-plugin: Allocate(%s): %s" % (ids[0], json.dumps(resp)[:600]))
    cri = n.cri
    devices = [cri.Device(container_path=d["container_path"], host_path=d["host_path"],
                          permissions=d.get("permissions", "rw")) for d in resp.get("devices", [])]
    mounts = [cri.Mount(container_path=m["container_path"], host_path=m["host_path"],
                        readonly=bool(m.get("read_only"))) for m in resp.get("mounts", [])]
    envs = [cri.KeyValue(key=k, value=v) for k, v in resp.get("envs", {}).items()]
    cdi = [d["name"] for d in resp.get("cdi_devices", [])]
    check(devices or cdi, "device-plugin: Allocate names device nodes or CDI devices: %s %s" % (
        [d.container_path for d in devices], cdi))
    check(len(cdi) == 1 and cdi[0].startswith("polyaccel.io/gpu="),
          "device-plugin: Allocate names the GPU's CDI device of the node's spec: %s" % cdi)
    r = n.run_container("workload", gpu_fixture.DRIVER_PROBE + "; " + gpu_fixture.PROBE, cdi, envs=envs,
                        linux_devices=devices, mounts=mounts)
    ok = "error" not in r and r["exit"] == 0
    check(ok, "device-plugin: a workload container with Allocate's answer starts and exits 0 (%s)" % (
        r.get("error") or r.get("out", "")[-300:]))
    if ok:
        seen, env_set = gpu_fixture.parse_probe(r["out"])
        gpu_nodes = sorted(p for p in seen if p[len("/dev/nvidia"):].isdigit())
        check(len(gpu_nodes) == 1 and seen[gpu_nodes[0]][1:] == dev_nodes.get(gpu_nodes[0]),
              "device-plugin: the workload has one GPU's device node, the host's: %s" % gpu_nodes)
        check(env_set.get("NVIDIA_VISIBLE_DEVICES") == ids[0],
              "device-plugin: NVIDIA_VISIBLE_DEVICES=%s is the allocated GPU %s" % (
                  env_set.get("NVIDIA_VISIBLE_DEVICES"), ids[0]))
        cache = [l for l in r["out"].splitlines() if l.startswith("ldcache")]
        for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
            check(any((lib + " (libc6,x86-64) => " + gpu_fixture.LIBDIR + lib) in l for l in cache),
                  "device-plugin: in the workload, ldconfig -p lists %s: %s" % (lib, cache))
    metrics_and_labels(n, c, uuids)
    stop_pod(n, label, sandbox_id, cid)
    ended = kubelet.ask("dp-stream-end nvidia.com/gpu 30", "dp-stream-end", 60)
    check(ended is True, "device-plugin: the ListAndWatch stream ended with the agent")
    left = [s for s in os.listdir(n.node + "/var/lib/kubelet/device-plugins") if s.endswith(".sock")
            and s != "kubelet.sock"]
    check(left == [], "device-plugin: no socket of the agent's left in device-plugins: %s" % left)


def metrics_and_labels(n, c, uuids):
    """The exporter on the container's port (the pod shares the node's network) and the node
    labels in the NFD directory the DaemonSet mounts."""
    port = c["ports"][0]["containerPort"]
    revision = os.environ.get("POLYACCEL_REVISION", "")
    body = ""
    for _ in range(60):
        try:
            body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
            if len([l for l in body.splitlines() if l.startswith("DCGM_FI_DEV_GPU_TEMP{")]) == len(uuids):
                break
        except OSError:
            pass
        time.sleep(1)
    temps = [l for l in body.splitlines() if l.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    check(len(temps) == len(uuids) == 8, "device-plugin: /metrics on the container port %d has the 8 GPUs "
          "(%d)" % (port, len(temps)))
    check(revision and ('revision="%s' % revision[:12]) in body,
          "device-plugin: polyaccel_build_info names revision %s" % revision[:12])
    flags = dict(a.split("=", 1) for a in c.get("args", []) if a.startswith("--") and "=" in a)
    nfd = n.node + flags.get("--nfd-features-dir", "/nonexistent")
    text = open(nfd + "/polyaccel").read() if os.path.isfile(nfd + "/polyaccel") else ""
    check(any(l.startswith("nvidia.com/gpu.count=") for l in text.splitlines()),
          "device-plugin: node labels in the mounted NFD directory: %s" % text.splitlines()[:6])


def run(n, node_kubelet, archive, rendered_dra, rendered_device_plugin, scenario, topology, cuda, nvml,
        dev_nodes):
    """Both overlays' agents, one after the other, on this node."""
    t_start = time.monotonic()
    refs = import_image(n, archive)
    info("the built image in containerd: %s" % refs)
    if refs:
        check_image(n, refs[0])
    # What kubelet makes at its start; the driver, installed in the node's root.
    for d in ("device-plugins", "plugins_registry", "plugins", "pod-resources"):
        os.makedirs(n.node + "/var/lib/kubelet/" + d, exist_ok=True)
    persistenced = gpu_fixture.make_driver_root(n.node, cuda, nvml)
    for name in os.listdir(n.node + "/run/cdi"):
        os.unlink(n.node + "/run/cdi/" + name)  # `cdi generate`'s specs of the earlier checks
    log = open(n.work + "/node_kubelet.log", "w")
    kubelet = NodeKubelet(node_kubelet, n.node, log)
    check(kubelet.api_port > 0, "node_kubelet: the test API server listens (port %d)" % kubelet.api_port)
    ca_crt, socat = make_tls_frontend(n, kubelet.api_port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen("https://127.0.0.1:6443/version", timeout=5,
                                   context=__import__("ssl").create_default_context(cafile=ca_crt))
            break
        except urllib.error.HTTPError:
            break  # it answers (401 without the token)
        except OSError:
            time.sleep(0.3)
    try:
        dra_overlay(n, kubelet, rendered_dra, ca_crt, scenario, topology, dev_nodes)
        device_plugin_overlay(n, kubelet, rendered_device_plugin, ca_crt, scenario, topology, nvml, dev_nodes)
    finally:
        kubelet.close()
        socat.kill()
        persistenced.close()
        log.close()
    info("the agent pods took %.1f s" % (time.monotonic() - t_start))
