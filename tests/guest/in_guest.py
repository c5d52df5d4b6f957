#!/usr/bin/env python3
"""Checks run inside the multi-NUMA test guest (tests/guest/run-guest.sh), chrooted into the
host's root, against the guest's own sysfs. Usage: in_guest.py MODE POLYACCEL PROBE
MODE: topo | run | place. Prints what it checked; exits 1 on the first mismatch."""
import json, os, subprocess, sys, threading

mode, polyaccel, probe = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def cpulist(text):
    out = []
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def sysfs(path):
    with open(path) as f:
        return f.read().strip()


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


{"topo": topo, "run": run, "place": place}[mode]()
print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
