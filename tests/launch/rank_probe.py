#!/usr/bin/python3
"""One rank of tests/launch/launchers_test.py, started by a real launcher.

plan POLYACCEL TOPOLOGY OUT: asks `polyaccel run --dry-run --json` on the captured topology what
this rank gets, with the environment the launcher gave it, and writes it with the launcher's own
rank variables to OUT/plan-<pid>.json.
live OUT [gloo]: runs under `polyaccel run` (real binding): writes its CPU affinity, the memory
policy of its heap (/proc/self/numa_maps) and the visibility variables to OUT/live-<pid>.json;
with gloo, as a DDP script does: init_process_group over gloo, an all_reduce of its rank, and the
device index it would pass to torch.cuda.set_device (int(LOCAL_RANK))."""
import json, os, subprocess, sys

mode = sys.argv[1]
launcher_vars = {k: v for k, v in os.environ.items()
                 if k.startswith(("LOCAL_", "OMPI_COMM_WORLD_LOCAL", "MPI_LOCAL", "SLURM_LOCALID",
                                  "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODEID", "SLURM_TASKS_PER_NODE",
                                  "SLURM_NTASKS_PER_NODE", "RANK", "WORLD_SIZE", "PMI_RANK"))}
report = {"pid": os.getpid(), "launcher": launcher_vars}
if mode == "plan":
    polyaccel, topology, out = sys.argv[2:5]
    r = subprocess.run([polyaccel, "run", "--topology", topology, "--accel-backends", "on",
                        "--dry-run", "--json", "--", "true"], capture_output=True, text=True)
    report["exit_code"] = r.returncode
    report["stderr"] = r.stderr
    report["plan"] = json.loads(r.stdout) if r.returncode == 0 else None
else:
    out = sys.argv[2]
    report["cpus"] = sorted(os.sched_getaffinity(0))
    heap = [l for l in open("/proc/self/numa_maps") if "heap" in l]
    report["heap_policy"] = heap[0].split()[1] if heap else ""
    report["env"] = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")}
    if len(sys.argv) > 3 and sys.argv[3] == "gloo":
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        t = torch.tensor([dist.get_rank() + 1])
        dist.all_reduce(t)
        report["all_reduce"] = int(t.item())
        report["world"] = dist.get_world_size()
        report["set_device_index"] = int(os.environ["LOCAL_RANK"])
        dist.destroy_process_group()
with open("%s/%s-%d.json" % (out, mode, os.getpid()), "w") as f:
    json.dump(report, f)
