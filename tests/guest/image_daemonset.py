#!/usr/bin/env python3
"""Guest.image: the image of `make image` run as the DaemonSet runs it, in the multi-NUMA test
guest where the test is root on Debian's kernel and podman with crun works.

The podman command is made from the rendered DaemonSet itself (RENDERED_JSON, `kubectl kustomize`
of the default overlay, converted on the host): its image reference, command, args, env,
privileged, and every volumeMount with its hostPath (created under a scratch root when the guest
lacks it: the guest's / is the host's, read-only) or ConfigMap. The test adds only what a GPU
node would have and this guest has not: the driver's NVML where NVIDIA's runtime puts it (here
the project's test NVML, tests/inject/nvml, read through the image's own loader path), its
scenario, and the captured topology those GPUs belong to (--topology, --accel-backends on).

Checked: podman loads the archive under the DaemonSet's name with its OCI annotations; the agent
in the container registers nvidia.com/gpu with a kubelet (fake_kubelet, the real device-plugin
protocol) on the mounted device-plugins directory and lists the scenario's GPUs; /metrics
answers with those GPUs and the build's revision; node labels are written to the mounted NFD
directory; `podman stop` (SIGTERM) ends the ListAndWatch stream and removes the plugin's socket;
`polyaccel --version` in the image names the build's commit; the image has no shell.
Usage: image_daemonset.py IMAGE_TAR RENDERED_JSON FAKE_KUBELET NVML_LIB SCENARIO TOPOLOGY REVISION"""
import json, os, subprocess, sys, time, urllib.request
from guest_lib import check, finish, normalized
from guest_podman import Podman

image_tar, rendered, fake_kubelet, nvml, scenario, topology, revision = sys.argv[1:8]
t_start = time.monotonic()
work = "/tmp/image-daemonset"
scratch = work + "/host"  # hostPaths this read-only root lacks are made here
os.makedirs(scratch, exist_ok=True)
podman = Podman(work)
print("info %s" % podman("--version").stdout.strip(), flush=True)

objects = json.load(open(rendered))
ds = [o for o in objects if o["kind"] == "DaemonSet"][0]
configmaps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
pod = ds["spec"]["template"]["spec"]
c = pod["containers"][0]

image = normalized(c["image"])

# --- the archive, loaded as `ctr images import` or `podman load` would --------------------------
t = time.monotonic()
r = podman("load", "-i", image_tar)
check(r.returncode == 0, "podman load of the OCI archive (%.1f s) %s" % (
    time.monotonic() - t, r.stderr.strip()[-300:]))
if r.returncode != 0:
    finish()
loaded = [l.split(": ", 1)[1] for l in r.stdout.splitlines() if l.startswith("Loaded image")]
check(len(loaded) == 1, "the archive names one image: %s" % loaded)
loaded = loaded[0] if loaded else ""
r = podman("image", "inspect", loaded)
info = json.loads(r.stdout)[0] if r.returncode == 0 else {}
notes = info.get("Annotations") or {}
check(notes.get("org.opencontainers.image.revision") == revision,
      "annotation revision is the build's commit %s (%s)" % (revision, notes))
for key in ("org.opencontainers.image.version", "org.opencontainers.image.source"):
    check(bool(notes.get(key)), "annotation %s: %s" % (key, notes.get(key)))
print("info image size %s bytes (podman's count)" % info.get("Size"), flush=True)
# The DaemonSet's reference is the archive's name, unless an overlay's `images:` renamed it, as an
# operator who pushes it to a registry of theirs does.
if loaded != image:
    print("info the DaemonSet runs %s; the archive holds %s: tagged so" % (image, loaded))
    r = podman("tag", loaded, image)
    check(r.returncode == 0, "tagged as the DaemonSet's image %s" % image)

# --- the DaemonSet's container as podman arguments ----------------------------------------------
volumes = {v["name"]: v for v in pod.get("volumes", [])}
host_dir = {}  # the guest-side path of each hostPath volume
args = ["run", "-d", "--name", "polyaccel-agent", "--pull", "never", "--network", "host"]
if c.get("securityContext", {}).get("privileged"):
    args.append("--privileged")
for m in c.get("volumeMounts", []):
    v = volumes[m["name"]]
    if "hostPath" in v:
        path = v["hostPath"]["path"]
        # The guest's own /sys, /dev and /proc; what it cannot write (the host's read-only root)
        # or lacks is made under the scratch root.
        usable = os.path.exists(path) and (m.get("readOnly") or os.access(path, os.W_OK))
        source = path if usable else scratch + path
        os.makedirs(source, exist_ok=True)
        host_dir[m["mountPath"]] = source
    elif "configMap" in v:
        source = "%s/configmaps/%s" % (work, v["configMap"]["name"])
        os.makedirs(source, exist_ok=True)
        for key, text in configmaps.get(v["configMap"]["name"], {}).get("data", {}).items():
            with open(source + "/" + key, "w") as f:
                f.write(text)
    else:
        check(False, "volume %s: a kind this test does not map" % m["name"])
        continue
    args += ["-v", "%s:%s%s" % (source, m["mountPath"], ":ro" if m.get("readOnly") else "")]
for e in c.get("env", []):
    if "value" in e:
        args += ["-e", "%s=%s" % (e["name"], e["value"])]
    elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
        args += ["-e", "%s=guest-node" % e["name"]]
# What a GPU node has and this guest lacks (see the docstring).
args += ["-v", "%s:/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1:ro" % nvml,
         "-v", "%s:/test/scenario.json:ro" % scenario, "-v", "%s:/test/topology.xml:ro" % topology,
         "-e", "NVML_INJECT_SCENARIO=/test/scenario.json"]
command = c.get("command", [])
if command:
    args += ["--entrypoint", command[0]]
args += [image] + command[1:] + c.get("args", []) + [
    "--topology", "/test/topology.xml", "--accel-backends", "on"]

flags = dict(a.split("=", 1) for a in c.get("args", []) if a.startswith("--") and "=" in a)
plugins_dir = host_dir.get(flags.get("--kubelet-dir", "/var/lib/kubelet/device-plugins"))
check(plugins_dir is not None, "the DaemonSet mounts the --kubelet-dir it passes")
if plugins_dir is None:
    finish()
kubelet_log = open(work + "/kubelet.log", "w")
kubelet = subprocess.Popen([fake_kubelet, plugins_dir, "nvidia.com/gpu", "1", "180"],
                           stdout=kubelet_log, stderr=subprocess.STDOUT)
time.sleep(0.5)
print("info podman %s" % " ".join(args), flush=True)
t_run = time.monotonic()
r = podman(*args)
check(r.returncode == 0, "podman run of the DaemonSet's container (%s)" % r.stderr.strip()[-300:])
if r.returncode != 0:
    kubelet.kill()
    finish()


def kubelet_said(word, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = open(work + "/kubelet.log").read()
        if word in text or kubelet.poll() is not None:
            return text
        time.sleep(0.5)
    return open(work + "/kubelet.log").read()


text = kubelet_said("device ", 180)
devices = [l.split()[1] for l in text.splitlines() if l.startswith("device ")]
check("registered nvidia.com/gpu" in text, "the agent registered nvidia.com/gpu with the kubelet "
      "(%.1f s after podman run)" % (time.monotonic() - t_run))
# Whole GPUs by UUID, those of the scenario; with the sharing config's MIG strategy a GPU in MIG
# mode is served as its MIG devices instead. The count is the one the agent says it serves.
uuids = set()
for gpu in json.load(open(scenario)).get("devices", []):
    uuids.add(gpu.get("uuid"))
logs = podman("logs", "polyaccel-agent")
served = [l for l in (logs.stdout + logs.stderr).splitlines() if "serving nvidia.com/gpu (" in l]
count = int(served[0].split("(")[1].split()[0]) if served else -1
check(len(devices) == count and count >= 7 and set(devices) <= uuids,
      "ListAndWatch lists the %d GPUs the agent serves, by the scenario's UUIDs: %s" % (count, devices))

port = c["ports"][0]["containerPort"]
body = ""
for _ in range(60):
    try:
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
        if "DCGM_FI_DEV_GPU_TEMP{" in body:
            break
    except OSError:
        pass
    time.sleep(1)
temps = [l for l in body.splitlines() if l.startswith("DCGM_FI_DEV_GPU_TEMP{")]
check(len(temps) == len(uuids) == 8, "/metrics on the container port %d has the 8 GPUs (%d)" % (port, len(temps)))
check(('revision="%s' % revision[:12]) in body, "polyaccel_build_info names revision %s" % revision[:12])
nfd = host_dir.get(flags.get("--nfd-features-dir", ""), "")
labels = os.listdir(nfd) if nfd and os.path.isdir(nfd) else []
check(len(labels) > 0, "node labels written to the mounted NFD directory: %s" % labels)

# --- SIGTERM: the stream ends and the plugin's socket goes ---------------------------------------
t = time.monotonic()
r = podman("stop", "-t", "20", "polyaccel-agent")
stopped = time.monotonic() - t
check(r.returncode == 0, "podman stop (SIGTERM) in %.1f s" % stopped)
try:
    kubelet.wait(timeout=30)
except subprocess.TimeoutExpired:
    kubelet.kill()
text = open(work + "/kubelet.log").read()
check("stream ended" in text, "the kubelet saw the ListAndWatch stream end")
left = sorted(n for n in os.listdir(plugins_dir) if n.endswith(".sock"))
check(left == [], "no socket left in the device-plugins directory: %s" % left)
r = podman("inspect", "-f", "{{.State.ExitCode}}", "polyaccel-agent")
check(r.stdout.strip() == "0", "the agent exited 0 on SIGTERM (%s)" % r.stdout.strip())
logs = podman("logs", "polyaccel-agent")
print("info agent log:\n  " + "\n  ".join((logs.stdout + logs.stderr).strip().splitlines()[-15:]))

# --- the image itself ----------------------------------------------------------------------------
r = podman("run", "--rm", "--network", "none", "--pull", "never", image, "--version")
check(r.returncode == 0 and revision[:12] in r.stdout,
      "polyaccel --version in the image names commit %s: %s" % (revision[:12], r.stdout.strip()))
r = podman("run", "--rm", "--network", "none", "--pull", "never", "--entrypoint", "/bin/sh", image,
           "-c", "true")
check(r.returncode != 0, "the image has no shell")
print("info %s" % podman.summary())
print("info Guest.image in-guest time %.1f s" % (time.monotonic() - t_start))
finish()
