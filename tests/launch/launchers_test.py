#!/usr/bin/python3
"""Launch.launchers: `polyaccel run` under the real launchers Debian 12 ships: torchrun (torch
1.13.1, through tests/launch/torchrun.py), Open MPI's mpirun, MPICH's (Hydra) mpirun, and Slurm's
srun (slurmctld and slurmd 22.05 started here on localhost, one node, auth/none, a gres.conf of 4
GPU device nodes made with mknod: srun gives the tasks CUDA_VISIBLE_DEVICES as on a GPU node).

1. What each rank gets on a captured XE8640 with the project's test NVML (hgx-8xh100): 4 ranks
   under each launcher each ask `polyaccel run --dry-run --json` with the environment the
   launcher gave them (tests/launch/rank_probe.py plan). Checked: the rank polyaccel read is the
   launcher's, from the launcher's variable; the GPU at index LOCAL_RANK of CUDA_VISIBLE_DEVICES
   (what set_device(local rank) selects) is the GPU polyaccel chose, by its NVML UUID; every GPU
   stays visible; the 4 ranks get 4 GPUs and disjoint CPUs.
2. Real binding on this host: 2 ranks under each launcher run `polyaccel run -- rank_probe.py
   live`; each rank's affinity is what `polyaccel run --dry-run` plans for it, the ranks' CPUs are
   disjoint, and its heap's memory policy binds to the plan's nodes. Under torchrun each rank also
   does what a DDP script does: init_process_group over gloo and an all_reduce.
   Under srun also with --cpu-bind=cores: polyaccel binds within the CPU srun gave each task.
3. Bad input under a launcher: more local ranks than the GPUs given (CUDA_VISIBLE_DEVICES=0 for
   2 ranks; srun --gres=gpu:1) is refused in every rank, exit 2, naming the variables.
Usage: launchers_test.py POLYACCEL NVML_LIB SCENARIO TOPOLOGY"""
import glob, json, os, shutil, subprocess, sys, tempfile, time

polyaccel, nvml, scenario, topology = sys.argv[1:5]
here = os.path.dirname(os.path.abspath(__file__))
probe = os.path.join(here, "rank_probe.py")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


LAUNCHERS = {
    # name: (command prefix for N ranks, the variable of the local rank)
    "torchrun": (lambda n: [sys.executable, os.path.join(here, "torchrun.py"), "--nproc_per_node",
                            str(n), "--master_port", str(29400 + n), "--no_python"], "LOCAL_RANK"),
    "openmpi": (lambda n: ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to",
                           "none", "-np", str(n)], "OMPI_COMM_WORLD_LOCAL_RANK"),
    "mpich": (lambda n: ["mpirun.mpich", "-np", str(n)], "MPI_LOCALRANKID"),
}
uuid_of = {d["pci_bus_id"].lower()[-12:]: d["uuid"] for d in json.load(open(scenario))["devices"]}


def start_slurm():
    """slurmctld and slurmd on localhost in a temp dir; SLURM_CONF for srun. None if absent."""
    if not (shutil.which("slurmctld") and shutil.which("slurmd") and shutil.which("srun")):
        return None
    work = tempfile.mkdtemp(prefix="polyaccel-slurm-")
    for d in ("state", "spool", "dev"):
        os.makedirs(os.path.join(work, d))
    for i in range(4):  # GPU device nodes for gres.conf (nvidia's major; nothing opens them)
        os.mknod("%s/dev/nvidia%d" % (work, i), 0o600 | 0o020000, os.makedev(195, i))
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    port = 20000 + os.getpid() % 10000
    with open(work + "/slurm.conf", "w") as f:
        f.write("""ClusterName=polyaccel
SlurmctldHost={host}(127.0.0.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
SlurmctldPort={p1}
SlurmdPort={p2}
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool
SlurmctldPidFile={w}/slurmctld.pid
SlurmdPidFile={w}/slurmd.pid
SlurmctldLogFile={w}/slurmctld.log
SlurmdLogFile={w}/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
GresTypes=gpu
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} Gres=gpu:4 State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""".format(host=host, p1=port, p2=port + 1, w=work, cpus=os.cpu_count()))
    with open(work + "/gres.conf", "w") as f:
        f.write("Name=gpu File=%s/dev/nvidia[0-3]\n" % work)
    env = dict(os.environ, SLURM_CONF=work + "/slurm.conf")
    daemons = [subprocess.Popen([d, "-D"] + (["-i"] if d == "slurmctld" else []), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for d in ("slurmctld", "slurmd")]
    for _ in range(60):
        r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env)
        if r.stdout.strip() == "idle":
            break
        time.sleep(0.5)
    return work, daemons


slurm = start_slurm()
if slurm:
    # More tasks than CPUs need --overcommit (which also gives the step fewer CPUs).
    LAUNCHERS["srun"] = (lambda n: ["srun", "-n", str(n), "--gres=gpu:4", "--cpu-bind=none"] +
                         (["--overcommit"] if n > os.cpu_count() else []),
                         "SLURM_LOCALID")
else:
    check(False, "srun: slurmctld, slurmd or srun is missing (scripts/install-deps.sh)")


def launch(name, n, command, env):
    prefix, _ = LAUNCHERS[name]
    t = time.monotonic()
    r = subprocess.run(prefix(n) + command, capture_output=True, text=True, env=env, timeout=240)
    return r, time.monotonic() - t


def reports(out, mode):
    return [json.load(open(f)) for f in sorted(glob.glob("%s/%s-*.json" % (out, mode)))]


base_env = dict(os.environ, SLURM_CONF=slurm[0] + "/slurm.conf" if slurm else "",
                POLYACCEL_NVML_LIB=nvml, NVML_INJECT_SCENARIO=scenario,
                POLYACCEL_AMD_SMI_LIB="/nonexistent", POLYACCEL_ROCM_SMI_LIB="/nonexistent",
                POLYACCEL_HLML_LIB="/nonexistent", OMPI_MCA_rmaps_base_oversubscribe="1",
                POLYACCEL_LOCK_DIR=tempfile.gettempdir())
for v in ("LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SLURM_LOCALID"):
    base_env.pop(v, None)
for name, (_, variable) in LAUNCHERS.items():
    if not shutil.which(LAUNCHERS[name][0](1)[0]):
        check(False, "%s: the launcher is missing (scripts/install-deps.sh)" % name)
        continue
    # --- 1. the plan each rank gets on the capture ------------------------------------------
    out = tempfile.mkdtemp(prefix="polyaccel-launch-")
    r, seconds = launch(name, 4, [sys.executable, probe, "plan", polyaccel, topology, out], base_env)
    ranks = reports(out, "plan")
    check(r.returncode == 0 and len(ranks) == 4, "%s: 4 ranks ran (%.1f s) %s" % (
        name, seconds, (r.stderr or "")[-300:]))
    gpus, cpus = set(), []
    for rep in ranks:
        plan = rep["plan"] or {}
        lr = plan.get("local_rank") or {}
        mine = int(rep["launcher"].get(variable, -1))
        visible = plan.get("env", {}).get("CUDA_VISIBLE_DEVICES", "").split(",")
        chosen = plan.get("gpus", ["?"])[0]
        check(rep["exit_code"] == 0 and lr.get("rank") == mine and lr.get("from") == variable and
              lr.get("world") == 4,
              "%s rank %d: polyaccel reads rank %s of %s from %s %s" % (
                  name, mine, lr.get("rank"), lr.get("world"), lr.get("from"), rep["stderr"][-200:]))
        index = plan.get("device_index")
        check(index == mine and 0 <= mine < len(visible) and
              visible[mine] == uuid_of.get(chosen[-12:].lower()),
              "%s rank %d: CUDA_VISIBLE_DEVICES[%d] is the chosen GPU %s (%s), %d GPUs visible" % (
                  name, mine, mine, chosen, uuid_of.get(chosen[-12:].lower()), len(visible)))
        gpus.add(chosen)
        cpus.append(set(plan.get("cpus", [])))
    check(len(gpus) == 4, "%s: 4 ranks, 4 GPUs: %s" % (name, sorted(gpus)))
    check(all(not (a & b) for i, a in enumerate(cpus) for b in cpus[i + 1:]) and all(cpus),
          "%s: the ranks' CPUs are disjoint" % name)
    shutil.rmtree(out)

    # --- 2. real binding on this host, 2 ranks ------------------------------------------------
    out = tempfile.mkdtemp(prefix="polyaccel-launch-")
    live_env = dict(base_env, POLYACCEL_NVML_LIB="/nonexistent")
    extra = ["gloo"] if name == "torchrun" else []
    r, seconds = launch(name, 2, [polyaccel, "run", "--", sys.executable, probe, "live", out] + extra,
                        live_env)
    ranks = reports(out, "live")
    check(r.returncode == 0 and len(ranks) == 2, "%s: 2 ranks ran bound (%.1f s) %s" % (
        name, seconds, (r.stderr or "")[-300:]))
    seen = []
    for rep in ranks:
        mine = rep["launcher"].get(variable, "?")
        # What polyaccel plans for that rank, asked with the launcher's variables.
        env = dict(live_env, **rep["launcher"])
        p = subprocess.run([polyaccel, "run", "--dry-run", "--json", "--", "true"],
                           capture_output=True, text=True, env=env)
        plan = json.loads(p.stdout) if p.returncode == 0 else {}
        check(rep["cpus"] == plan.get("cpus"), "%s rank %s: bound to CPUs %s as planned (%s)" % (
            name, mine, rep["cpus"], plan.get("cpus")))
        mems = plan.get("mems", [])
        check(rep["heap_policy"] == "bind:" + ",".join(map(str, mems)),
              "%s rank %s: heap memory policy %s (plan: nodes %s)" % (
                  name, mine, rep["heap_policy"], mems))
        seen.append(set(rep["cpus"]))
        if extra:
            check(rep.get("all_reduce") == 3 and rep.get("world") == 2,
                  "%s rank %s: gloo all_reduce over 2 ranks gives 1+2=3 (%s)" % (
                      name, mine, rep.get("all_reduce")))
    if len(seen) == 2:
        check(not (seen[0] & seen[1]), "%s: the 2 bound ranks share no CPU" % name)
    shutil.rmtree(out)

    # --- 3. more ranks than the GPUs given -----------------------------------------------------
    env = dict(base_env, CUDA_VISIBLE_DEVICES="0")
    command = [polyaccel, "run", "--topology", topology, "--accel-backends", "on", "--dry-run",
               "--", "true"]
    if name == "srun":  # Slurm sets CUDA_VISIBLE_DEVICES itself, from the GPUs it gives
        command = ["srun", "-n", "2", "--gres=gpu:1"] + command
        r = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    else:
        r, _ = launch(name, 2, command, env)
    said = r.stdout + r.stderr
    check(r.returncode != 0 and "2 local ranks (%s): more than the 1 GPUs" % variable in said,
          "%s: 2 ranks for CUDA_VISIBLE_DEVICES=0 refused, naming %s" % (name, variable))

# srun --cpu-bind=cores: each task already holds one CPU; polyaccel binds within it, never wider.
if slurm:
    out = tempfile.mkdtemp(prefix="polyaccel-launch-")
    live_env = dict(base_env, POLYACCEL_NVML_LIB="/nonexistent")
    r = subprocess.run(["srun", "-n", "2", "--cpu-bind=cores", polyaccel, "run", "--",
                        sys.executable, probe, "live", out], capture_output=True, text=True,
                       env=live_env, timeout=120)
    ranks = reports(out, "live")
    check(r.returncode == 0 and len(ranks) == 2, "srun --cpu-bind=cores: 2 tasks ran (%s)" %
          r.stderr[-300:])
    cpus = sorted(tuple(rep["cpus"]) for rep in ranks)
    check(all(len(c) == 1 for c in cpus) and len(set(cpus)) == len(cpus),
          "srun --cpu-bind=cores: each task keeps the one CPU srun gave it: %s" % cpus)
    shutil.rmtree(out)
    for d in slurm[1]:
        d.terminate()
        d.wait(timeout=30)
    shutil.rmtree(slurm[0], ignore_errors=True)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
