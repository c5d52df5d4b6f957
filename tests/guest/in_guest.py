#!/usr/bin/env python3
"""Checks run inside the multi-NUMA test guest (tests/guest/run-guest.sh), chrooted into the
host's root, against the guest's own sysfs. Usage: in_guest.py MODE POLYACCEL PROBE
MODE: topo | run | place | audit. Prints what it checked; exits 1 on the first mismatch."""
import json, os, subprocess, sys, threading, time
from guest_lib import check, cpulist, finish, sysfs

mode, polyaccel, probe = sys.argv[1], sys.argv[2], sys.argv[3]


def polyaccel_json(*args):
    r = subprocess.run([polyaccel, *args, "--json"], capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


NODE = "/sys/devices/system/node"
nodes = sorted(int(d[4:]) for d in os.listdir(NODE) if d.startswith("node") and d[4:].isdigit())


def topo():
    rc, j, err = polyaccel_json("topo")
    check(rc == 0 and j is not None, "topo --json exits 0 (%s)" % err.strip())
    by_node = {n["os_index"]: n for n in j["numa_nodes"]}
    check(sorted(by_node) == nodes, "NUMA nodes %s = sysfs %s" % (sorted(by_node), nodes))
    for n in nodes:
        got = by_node.get(n, {})
        check(got.get("cpus") == cpulist(sysfs("%s/node%d/cpulist" % (NODE, n))),
              "node %d CPUs %s" % (n, got.get("cpus")))
        kb = [l for l in sysfs("%s/node%d/meminfo" % (NODE, n)).splitlines() if "MemTotal" in l]
        total = int(kb[0].split()[-2]) * 1024
        check(got.get("memory_bytes") == total, "node %d memory %s = %d" % (n, got.get("memory_bytes"), total))
        hp_dir = "%s/node%d/hugepages" % (NODE, n)
        want = {}
        for d in os.listdir(hp_dir):
            size = int(d.split("-")[1][:-2]) * 1024
            want[size] = int(sysfs("%s/%s/nr_hugepages" % (hp_dir, d)))
        have = {h["size_bytes"]: h["total"] for h in got.get("hugepages", [])}
        check(all(have.get(s, 0) == c for s, c in want.items()),
              "node %d hugepages %s = sysfs %s" % (n, have, want))
    dist = j.get("numa_distances") or {}
    rows = {o: v for o, v in zip(dist.get("os_index", []), dist.get("values", []))}
    for n in nodes:
        want = [int(x) for x in sysfs("%s/node%d/distance" % (NODE, n)).split()]
        check(rows.get(n) == want, "node %d distances %s = %s" % (n, rows.get(n), want))
    devices = {d["pci_bus_id"]: d for d in j["nics"] + j["nvme"]}
    for addr in sorted(os.listdir("/sys/bus/pci/devices")):
        cls = sysfs("/sys/bus/pci/devices/%s/class" % addr)
        if not (cls.startswith("0x0108") or cls.startswith("0x0200")):
            continue
        node = int(sysfs("/sys/bus/pci/devices/%s/numa_node" % addr))
        d = devices.get(addr)
        check(d is not None and d["numa_nodes"] == [node],
              "%s (class %s) on node %d: %s" % (addr, cls, node, d and d["numa_nodes"]))
    # IOMMU groups (intel-iommu): every group and its members as sysfs has them, each NIC and
    # NVMe drive in the group its iommu_group link names.
    root = "/sys/kernel/iommu_groups"
    want = {int(g): sorted(os.listdir("%s/%s/devices" % (root, g))) for g in os.listdir(root)}
    have = {g["id"]: [m["pci_bus_id"] for m in g["members"]] for g in j.get("iommu_groups", [])}
    check(len(want) > 0 and have == want, "IOMMU groups %s = sysfs %s" % (have, want))
    for addr, d in devices.items():
        link = os.path.basename(os.readlink("/sys/bus/pci/devices/%s/iommu_group" % addr))
        check(d["pci"]["iommu_group"] == int(link), "%s in IOMMU group %s" % (addr, link))


def run():
    for ranks in (1, 4, 8):
        for rank in range(ranks):
            env = dict(os.environ, LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks))
            r = subprocess.run([polyaccel, "run", "--", probe], capture_output=True, text=True, env=env)
            lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
            check(r.returncode == 0 and len(lines) == 1,
                  "run rank %d/%d exits 0 (%s)" % (rank, ranks, r.stderr.strip()[-200:]))
            if not lines:
                continue
            got = json.loads(lines[0])
            cpus = cpulist(got["cpus"])
            on = {n for n in nodes if set(cpus) <= set(cpulist(sysfs("%s/node%d/cpulist" % (NODE, n))))}
            check(len(on) == 1, "rank %d/%d CPUs %s on one node %s" % (rank, ranks, got["cpus"], sorted(on)))
            node = on.pop() if on else -1
            check(got["mempolicy_mode"] == 2 and got["mempolicy_nodes"] == str(node),
                  "rank %d/%d MPOL_BIND to node %d: mode %d nodes %s" % (
                      rank, ranks, node, got["mempolicy_mode"], got["mempolicy_nodes"]))
            check(got["page_nodes"] == str(node),
                  "rank %d/%d touched pages on node %d: %s" % (rank, ranks, node, got["page_nodes"]))
            if ranks == 8:
                check(len(cpus) == 1, "rank %d/8 gets one of the 8 PUs: %s" % (rank, got["cpus"]))


    # The README's line under the real torchrun (Debian's torch 1.13, tests/launch/torchrun.py):
    # 4 ranks, each bound by `polyaccel run` to its own NUMA node, CPUs and memory.
    torchrun = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launch", "torchrun.py")
    t = time.monotonic()
    r = subprocess.run(["/usr/bin/python3", torchrun, "--nproc_per_node", "4", "--no_python",
                        polyaccel, "run", "--", probe], capture_output=True, text=True, timeout=300)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    check(r.returncode == 0 and len(lines) == 4, "torchrun: 4 ranks under polyaccel run (%.0f s) %s" % (
        time.monotonic() - t, r.stderr.strip()[-300:]))
    seen = set()
    for got in lines:
        cpus = cpulist(got["cpus"])
        on = {n for n in nodes if set(cpus) <= set(cpulist(sysfs("%s/node%d/cpulist" % (NODE, n))))}
        node = on.pop() if len(on) == 1 else -1
        check(node >= 0 and got["mempolicy_mode"] == 2 and got["mempolicy_nodes"] == str(node) and
              got["page_nodes"] == str(node),
              "torchrun rank on node %d: CPUs %s, MPOL_BIND %s, pages on %s" % (
                  node, got["cpus"], got["mempolicy_nodes"], got["page_nodes"]))
        seen.add(node)
    check(seen == set(nodes), "torchrun: the 4 ranks on the 4 NUMA nodes: %s" % sorted(seen))


def place():
    state = "/tmp/place-state.json"
    results = []

    def commit(i):
        r = subprocess.run([polyaccel, "place", "--vcpus", "1", "--memory", "64MiB", "--spec",
                            "hw:cpu_policy=dedicated", "--commit", "--name", "g%d" % i,
                            "--state", state, "--json"], capture_output=True, text=True)
        results.append((i, r.returncode, r.stdout, r.stderr))

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    placed = [json.loads(o) for i, rc, o, e in results if rc == 0]
    refused = [(i, rc, e) for i, rc, o, e in results if rc != 0]
    # 8 PUs: 8 dedicated one-vCPU guests fit, 2 are refused with "No fit" (exit 1), none double-booked.
    check(len(placed) == 8, "8 of 10 concurrent commits placed: %d (%s)" % (len(placed), refused))
    check(all(rc == 1 for i, rc, e in refused), "the others are refused as no fit: %s" % refused)
    held = [p["held_pus"] for p in placed]
    with open(state) as f:
        recorded = json.load(f)
    check(len(recorded["placements"]) == 8, "8 placements recorded")
    pus = [tuple(cpulist(h) if isinstance(h, str) else h) for h in held]
    check(len(set(pus)) == len(pus), "no PU held twice: %s" % pus)
    rels = []
    def release(i):
        r = subprocess.run([polyaccel, "release", "g%d" % i, "--state", state], capture_output=True, text=True)
        rels.append(r.returncode)
    names = [int(p["name"][1:]) for p in placed]
    threads = [threading.Thread(target=release, args=(i,)) for i in names[:4]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(state) as f:
        recorded = json.load(f)
    check(rels == [0] * 4 and len(recorded["placements"]) == 4,
          "4 concurrent releases: %s, %d left" % (rels, len(recorded["placements"])))


def audit():
    # Planted: NUMA balancing on, node 3 without the 2 MiB pages the other nodes have (the
    # driver left 8 on each of 0-2). A hypervisor that wants 8 pages per node.
    with open("/proc/sys/kernel/numa_balancing", "w") as f:
        f.write("1\n")
    hp3 = "%s/node3/hugepages/hugepages-2048kB/nr_hugepages" % NODE
    with open(hp3, "w") as f:
        f.write("0\n")
    args = ["audit", "--role", "hypervisor", "--hugepages-per-node", "16MiB"]
    rc, before, err = polyaccel_json(*args)
    check(before is not None, "audit --json answers (rc %d, %s)" % (rc, err.strip()[-200:]))
    if before is None:
        return
    found = {(f["id"], f["subject"]) for f in before["findings"]}
    check(rc == 1, "audit exits 1 with findings: %d" % rc)
    check(("numa.balancing", "kernel") in found, "finds numa.balancing on: %s" % sorted(found))
    check(("hugepages.reserved", "node3") in found, "finds node3 short of hugepages")
    check(not any(i == "hugepages.reserved" and s in ("node0", "node1", "node2") for i, s in found),
          "no hugepages finding on nodes 0-2, which have their 8 pages")
    rc, fixed, err = polyaccel_json(*args, "--fix")
    check(fixed is not None and "fix" in fixed, "audit --fix --json answers (rc %d, %s)" % (rc, err.strip()[-200:]))
    if fixed is None or "fix" not in fixed:
        return
    applied = {a["path"]: a for a in fixed["fix"]["applied"]}
    check(fixed["fix"]["failed"] == [], "no write failed: %s" % fixed["fix"]["failed"])
    nb = applied.get("/proc/sys/kernel/numa_balancing")
    check(nb is not None and nb["old"] == "1" and nb["now"] == "0", "--fix turned numa_balancing off: %s" % nb)
    hp = applied.get(hp3)
    check(hp is not None and hp["old"] == "0" and hp["now"] == "8", "--fix reserved node3's 8 pages: %s" % hp)
    # What --fix says it applied is true of the guest's files.
    for path, a in applied.items():
        check(sysfs(path) == a["value"], "%s reads %s after --fix" % (path, a["value"]))
    after = {(f["id"], f["subject"]) for f in fixed["findings"]}
    for fid, subject in [("numa.balancing", "kernel"), ("hugepages.reserved", "node3")]:
        check((fid, subject) not in after, "the audit after --fix no longer finds %s %s" % (fid, subject))
    pending = {(p["id"], p["subject"]) for p in fixed["fix"]["pending"]}
    check(after <= found, "--fix added no finding: %s" % sorted(after - found))
    rc, again, err = polyaccel_json(*args)
    check(again is not None, "re-audit answers (%s)" % err.strip()[-200:])
    if again is None:
        return
    regained = {(f["id"], f["subject"]) for f in again["findings"]}
    check(regained == after, "a fresh audit agrees with the one --fix ran: %s vs %s" % (sorted(regained), sorted(after)))
    check(after <= pending, "what is left is what --fix lists as waiting for a reboot or the operator: %s" % sorted(after - pending))


{"topo": topo, "run": run, "place": place, "audit": audit}[mode]()
finish()
