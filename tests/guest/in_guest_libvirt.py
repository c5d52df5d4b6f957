#!/usr/bin/env python3
"""Guest.libvirt, run inside the multi-NUMA test guest (tests/guest/run-guest.sh): the domain XML
of `polyaccel place --libvirt` defined and started by a real libvirtd and QEMU in the guest, and
the QEMU process checked from outside: every vCPU thread on the PU its <vcpupin> names, every
other thread (the emulator's) on <emulatorpin>'s cpuset, each guest cell's RAM a hugetlbfs
mapping bound (bind:N) to the planned host node and faulted there, that node's free huge pages
down by the cell's size. While the domain runs, polyaccel reads it from libvirt's status file
(allocations lists it, release refuses it) and the same request no longer gets its PUs or pages;
once destroyed it no longer counts. Usage: in_guest_libvirt.py POLYACCEL
The 9p root is read-only: libvirt's state, cache, log and config directories get tmpfs mounts
here (inside the guest only), with a libvirtd.conf and qemu.conf this script writes."""
import json, os, shutil, signal, subprocess, sys, time
import xml.etree.ElementTree as ET
from guest_lib import check, cpulist, failures, finish, sysfs

polyaccel = sys.argv[1]
NODE = "/sys/devices/system/node"
URI = "qemu:///system"
HUGETLBFS = "/run/polyaccel-hugepages-2M"
PAGE_KB = 2048


def free_pages(node):
    return int(sysfs("%s/node%d/hugepages/hugepages-%dkB/free_hugepages" % (NODE, node, PAGE_KB)))


def sh(*args, check_rc=True, timeout=180):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check_rc and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()[-600:]))
    return r


def virsh(*args, **kw):
    return sh("virsh", "-q", "-c", URI, *args, **kw)


def writable(path):
    """PATH writable on a tmpfs, inside the guest only. Where the read-only root has PATH, the
    tmpfs holds a copy of it; where it lacks PATH (Debian's libvirt-daemon ships no
    /var/lib/libvirt), the tmpfs goes over its parent and each entry of the parent the root has
    is bound back, so that only PATH is new."""
    if os.path.isdir(path):
        keep = "/run/polyaccel-keep" + path.replace("/", "_")
        shutil.copytree(path, keep, symlinks=True)
        sh("mount", "-t", "tmpfs", "-o", "mode=0755", "libvirt", path)
        shutil.copytree(keep, path, symlinks=True, dirs_exist_ok=True)
        return
    parent = os.path.dirname(path)
    if not os.path.ismount(parent) or sh("findmnt", "-n", "-o", "FSTYPE", parent).stdout.strip() != "tmpfs":
        under = "/run/polyaccel-under" + parent.replace("/", "_")
        os.makedirs(under)
        sh("mount", "--bind", parent, under)
        sh("mount", "-t", "tmpfs", "-o", "mode=0755", "libvirt", parent)
        for entry in sorted(os.listdir(under)):
            src, dst = os.path.join(under, entry), os.path.join(parent, entry)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
                continue
            if os.path.isdir(src):
                os.mkdir(dst)
            else:
                open(dst, "w").close()
            sh("mount", "--bind", src, dst)
    os.makedirs(path)


def setup_libvirt():
    for d in ("/etc/libvirt", "/var/lib/libvirt", "/var/cache/libvirt", "/var/log/libvirt"):
        writable(d)
    os.makedirs("/run/libvirt", exist_ok=True)
    # libvirtd resolves its built-in QEMU user and group (libvirt-qemu, which the package
    # libvirt-daemon-system would create) before it reads qemu.conf's user = "root".
    for db, entry in (("passwd", "libvirt-qemu:x:64055:64055:libvirt:/var/lib/libvirt:/usr/sbin/nologin"),
                      ("group", "libvirt-qemu:x:64055:")):
        with open("/etc/" + db) as f:
            lines = f.read().splitlines()
        if not any(l.startswith("libvirt-qemu:") for l in lines):
            with open("/run/polyaccel-" + db, "w") as f:
                f.write("\n".join(lines + [entry]) + "\n")
            sh("mount", "--bind", "/run/polyaccel-" + db, "/etc/" + db)
    # One hugetlbfs mount per reserved page size (2 MiB here): libvirt backs each cell with a
    # file there ("Unable to find any usable hugetlbfs mount" without one).
    os.makedirs(HUGETLBFS, exist_ok=True)
    sh("mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "polyaccel-hugepages", HUGETLBFS)
    with open("/etc/libvirt/libvirtd.conf", "w") as f:
        f.write('auth_unix_rw = "none"\nauth_unix_ro = "none"\n'
                'log_outputs = "3:file:/var/log/libvirt/libvirtd.log"\n')
    # The guest has no cgroup hierarchy, no SELinux/AppArmor, no virtlogd and no libvirt-qemu
    # user: QEMU runs as root, libvirt pins with sched_setaffinity and binds memory with
    # QEMU's memory-backend policy (what it does without the cpuset controller).
    with open("/etc/libvirt/qemu.conf", "w") as f:
        f.write('user = "root"\ngroup = "root"\ndynamic_ownership = 0\nremember_owner = 0\n'
                'security_driver = "none"\ncgroup_controllers = [ ]\nnamespaces = [ ]\n'
                'stdio_handler = "file"\nhugetlbfs_mount = [ "%s" ]\n' % HUGETLBFS)


def libvirtd_log():
    for path in ("/var/log/libvirt/libvirtd.stderr", "/var/log/libvirt/libvirtd.log"):
        try:
            print("--- %s (tail)\n%s" % (path, open(path).read()[-3000:]))
        except OSError:
            pass


def start_libvirtd():
    log = open("/var/log/libvirt/libvirtd.stderr", "w")
    d = subprocess.Popen(["libvirtd", "--config", "/etc/libvirt/libvirtd.conf"],
                         stdout=log, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    # A connection waits for the QEMU driver, which first probes QEMU's capabilities (a QEMU
    # started under TCG in this TCG guest: the slow part).
    while time.monotonic() - t0 < 400 and d.poll() is None:
        try:
            if virsh("version", check_rc=False, timeout=400).returncode == 0:
                print("libvirtd answers after %.1f s" % (time.monotonic() - t0), flush=True)
                return d
        except subprocess.TimeoutExpired:
            break
        time.sleep(0.5)
    check(False, "libvirtd starts and answers on %s (exit %s)" % (URI, d.poll()))
    libvirtd_log()
    sys.exit(1)


def qemu_threads(pid):
    return sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))


def allowed(pid, tid):
    for line in open("/proc/%d/task/%d/status" % (pid, tid)):
        if line.startswith("Cpus_allowed_list:"):
            return cpulist(line.split(":", 1)[1])
    return None


def hugetlb_mappings(pid):
    """numa_maps lines of files on our hugetlbfs: (policy, {node: pages}, fields)."""
    out = []
    for line in open("/proc/%d/numa_maps" % pid):
        fields = line.split()
        if not any(f.startswith("file=" + HUGETLBFS) for f in fields):
            continue
        pages = {int(f[1:].split("=")[0]): int(f.split("=")[1])
                 for f in fields if f[0] == "N" and f[1:2].isdigit()}
        out.append((fields[1], pages, fields))
    return out


def for_tcg(xml):
    """The nested guest has no /dev/kvm: a TCG domain, and TCG's 'maximum' CPU model in place of
    host-passthrough (which libvirt refuses for TCG). Nothing of the placement changes."""
    root = ET.fromstring(xml)
    assert root.get("type") == "kvm", root.get("type")
    root.set("type", "qemu")
    cpu = root.find("cpu")
    if cpu is not None and cpu.get("mode") == "host-passthrough":
        cpu.set("mode", "maximum")
    return ET.tostring(root, encoding="unicode")


def place_json(args, domains=None):
    """polyaccel place ARGS --json: (exit code, the JSON or None)."""
    extra = ["--libvirt-domains", domains] if domains else []
    r = sh(polyaccel, "place", *args, *extra, "--json", check_rc=False)
    return r.returncode, (json.loads(r.stdout) if r.returncode in (0, 1) and r.stdout else None), r


def counts_running(name, args, plan):
    """While libvirtd runs the domain: polyaccel reads it from /run/libvirt/qemu/NAME.xml (its
    status file) as a read-only placement and the same request no longer gets what it holds; with
    --libvirt-domains none (the state file alone, as before) it would get the very same PUs."""
    held = set(cpulist(plan["held_pus"]))
    r = sh(polyaccel, "allocations", "--json", check_rc=False)
    check(r.returncode == 0, "%s: allocations --json (%s)" % (name, r.stderr.strip()))
    guests = [p for p in json.loads(r.stdout)["placements"] if p["name"] == "libvirt:" + name] if r.returncode == 0 else []
    check(len(guests) == 1 and guests[0].get("owner") == "libvirt",
          "%s: allocations lists libvirt:%s, owner libvirt" % (name, name))
    if guests:
        g = guests[0]
        check(set(cpulist(g["held_pus"])) == held, "%s: the domain holds PUs %s = the plan's %s" % (
            name, g["held_pus"], plan["held_pus"]))
        check({(c["host_numa_node"], c["memory_bytes"], c["page_size_bytes"]) for c in g["cells"]} ==
              {(c["host_numa_node"], c["memory_bytes"], c["page_size_bytes"]) for c in plan["cells"]},
              "%s: the domain's cells (node, memory, page size) = the plan's: %s" % (name, g["cells"]))
    rc, blind, _ = place_json(args, "none")
    check(rc == 0 and set(cpulist(blind["held_pus"])) == held,
          "%s: counting the state file alone, the same request gets the domain's PUs %s again" % (
              name, blind and blind.get("held_pus")))
    rc, seen, r = place_json(args)
    if rc == 0:
        again = set(cpulist(seen["held_pus"]))
        check(not (again & held), "%s: the same request now avoids the domain's PUs %s: gets %s" % (
            name, sorted(held), sorted(again)))
        for c in seen["cells"]:
            node, pages = c["host_numa_node"], c["memory_bytes"] // (PAGE_KB * 1024)
            check(pages <= free_pages(node), "%s: a cell of %d pages on node %d, which has %d free" % (
                name, pages, node, free_pages(node)))
    else:
        check(rc == 1, "%s: the same request no longer fits (exit %d: %s)" % (name, rc, r.stdout.strip()[-300:]))
    r = sh(polyaccel, "release", "libvirt:" + name, check_rc=False)
    check(r.returncode == 2 and "is a guest libvirt runs" in r.stderr,
          "%s: release libvirt:%s is refused: %s" % (name, name, r.stderr.strip()))


def scenario(name, args, expect):
    t0 = time.monotonic()
    r = sh(polyaccel, "place", *args, "--libvirt", "--name", name, "--json", check_rc=False)
    check(r.returncode == 0, "%s: place %s fits (%s)" % (name, " ".join(args), r.stderr.strip()))
    if r.returncode != 0:
        return
    plan = json.loads(r.stdout)
    xml = plan["libvirt_xml"]
    dom = ET.fromstring(xml)
    pins = {int(p.get("vcpu")): cpulist(p.get("cpuset")) for p in dom.iter("vcpupin")}
    emulatorpin = cpulist(dom.find("cputune/emulatorpin").get("cpuset"))
    memnode = {int(m.get("cellid")): int(m.get("nodeset")) for m in dom.iter("memnode")}
    # The XML says what the plan says (the rest is checked against the XML).
    want_pins = {int(v): [pu] for c in plan["cells"] for v, pu in c["cpu_pinning"].items()}
    check(pins == want_pins, "%s: <vcpupin> %s = the plan's pinning %s" % (name, pins, want_pins))
    check(emulatorpin == cpulist(plan["emulator_pus"]),
          "%s: <emulatorpin> %s = the plan's emulator PUs %s" % (name, emulatorpin, plan["emulator_pus"]))
    check(memnode == {c["guest_cell"]: c["host_numa_node"] for c in plan["cells"]},
          "%s: <memnode> %s = the plan's cells" % (name, memnode))
    expect(plan, pins, emulatorpin)
    path = "/tmp/%s.xml" % name
    with open(path, "w") as f:
        f.write(for_tcg(xml))
    before = {n: free_pages(n) for n in set(memnode.values())}
    virsh("define", path)
    t_start = time.monotonic()
    # Paused: QEMU is up, its vCPU threads exist and are pinned, its RAM is allocated; the guest
    # has no disk to boot, so running it would only spin the firmware's boot loop under TCG.
    r = virsh("start", "--paused", name, check_rc=False, timeout=300)
    check(r.returncode == 0, "%s: virsh start --paused (%s)" % (name, r.stderr.strip()[-800:]))
    if r.returncode != 0:
        print(sh("tail", "-30", "/var/log/libvirt/qemu/%s.log" % name, check_rc=False).stdout)
        virsh("undefine", name, check_rc=False)
        return
    print("%s: started in %.1f s" % (name, time.monotonic() - t_start), flush=True)
    pid = int(sysfs("/run/libvirt/qemu/%s.pid" % name))
    state = virsh("domstate", name).stdout.strip()
    check(state == "paused", "%s: domain state %s" % (name, state))
    cpus = json.loads(virsh("qemu-monitor-command", name, '{"execute":"query-cpus-fast"}').stdout)
    vcpu_tid = {c["cpu-index"]: c["thread-id"] for c in cpus["return"]}
    check(sorted(vcpu_tid) == sorted(pins), "%s: QEMU has vCPUs %s = <vcpupin>'s" % (name, sorted(vcpu_tid)))
    check(len(set(vcpu_tid.values())) == len(vcpu_tid), "%s: one thread per vCPU %s" % (name, vcpu_tid))
    threads = qemu_threads(pid)
    for v, tid in sorted(vcpu_tid.items()):
        got = allowed(pid, tid) if tid in threads else None
        check(got == pins.get(v), "%s: vCPU %d thread %d Cpus_allowed_list %s = <vcpupin> %s" % (
            name, v, tid, got, pins.get(v)))
    others = [t for t in threads if t not in vcpu_tid.values()]
    check(pid in others, "%s: the main thread %d is an emulator thread" % (name, pid))
    cell_node = {c["guest_cell"]: c["host_numa_node"] for c in plan["cells"]}
    for tid in others:
        got = allowed(pid, tid)
        comm = sysfs("/proc/%d/task/%d/comm" % (pid, tid))
        if comm.startswith("TC tc-ram-node"):
            # QEMU's thread-context (libvirt 9 + QEMU 7.2) that preallocates cell N's RAM: QEMU
            # gives it the CPUs of the cell's host node (node-affinity), not <emulatorpin>.
            node = cell_node.get(int(comm[len("TC tc-ram-node"):]))
            want = cpulist(sysfs("%s/node%d/cpulist" % (NODE, node))) if node is not None else None
            check(got == want, "%s: %s thread %d Cpus_allowed_list %s = node %s's CPUs %s" % (
                name, comm, tid, got, node, want))
            continue
        check(got == emulatorpin, "%s: emulator thread %d (%s) Cpus_allowed_list %s = <emulatorpin> %s" % (
            name, tid, comm, got, emulatorpin))
    maps = hugetlb_mappings(pid)
    check(len(maps) == len(plan["cells"]), "%s: one hugetlbfs RAM mapping per cell: %d" % (name, len(maps)))
    used = {}
    for c in plan["cells"]:
        node, pages = c["host_numa_node"], c["memory_bytes"] // (PAGE_KB * 1024)
        check(c["page_size_bytes"] == PAGE_KB * 1024, "%s: cell %d planned on 2 MiB pages" % (name, c["guest_cell"]))
        hit = [m for m in maps if m[0] == "bind:%d" % node and m[1] == {node: pages} and "huge" in m[2]]
        check(len(hit) >= 1, "%s: cell %d RAM bind:%d, huge, %d pages on node %d: %s" % (
            name, c["guest_cell"], node, pages, node, [" ".join(m[2][1:]) for m in maps]))
        used[node] = used.get(node, 0) + pages
    for node, n in sorted(used.items()):
        now = free_pages(node)
        check(before[node] - now == n, "%s: node %d free 2 MiB pages %d -> %d (the guest's %d)" % (
            name, node, before[node], now, n))
    counts_running(name, args, plan)
    virsh("destroy", name)
    rc, after, _ = place_json(args)
    check(rc == 0 and after["held_pus"] == plan["held_pus"],
          "%s: destroyed, it no longer counts: the request gets PUs %s again" % (name, after and after.get("held_pus")))
    virsh("undefine", name)
    check(name not in virsh("list", "--all", "--name").stdout.split(), "%s: destroyed and undefined" % name)
    after = {n: free_pages(n) for n in before}
    check(after == before, "%s: the pages are back after destroy: %s = %s" % (name, after, before))
    print("%s: %.1f s" % (name, time.monotonic() - t0), flush=True)


def distance(a, b):
    return int(sysfs("%s/node%d/distance" % (NODE, a)).split()[b])


def isolated(plan, pins, emulatorpin):
    """hw:emulator_threads_policy=isolate: one PU of its own, on guest cell 0's host node."""
    vcpu_pus = {pu for p in pins.values() for pu in p}
    node0 = plan["cells"][0]["host_numa_node"]
    check(len(emulatorpin) == 1 and emulatorpin[0] not in vcpu_pus and
          emulatorpin[0] in cpulist(sysfs("%s/node%d/cpulist" % (NODE, node0))),
          "pa-one-cell: isolate gives the emulator one PU %s of its own on node %d (vCPUs on %s)" % (
              emulatorpin, node0, sorted(vcpu_pus)))


def shared_set_one_socket(plan, pins, emulatorpin):
    """hw:emulator_threads_policy=share with a cpu_shared_set: the emulator on the shared set
    (Nova); two cells on the dedicated set 2-7 (nodes 1-3): nodes 2 and 3 share a socket
    (distance 12), so the cells must not straddle the sockets (21)."""
    check(emulatorpin == [0, 1], "pa-two-cells: emulator on cpu_shared_set 0-1: %s" % emulatorpin)
    nodes = [c["host_numa_node"] for c in plan["cells"]]
    check(len(nodes) == 2 and distance(nodes[0], nodes[1]) == 12,
          "pa-two-cells: the cells' nodes %s are one socket apart (distance %s, 12 possible)" % (
              nodes, len(nodes) == 2 and distance(nodes[0], nodes[1])))


t_all = time.monotonic()
setup_libvirt()
daemon = start_libvirtd()
try:
    # One cell, its emulator thread isolated on a PU of its own (Nova's isolate), 2 MiB pages.
    scenario("pa-one-cell", ["--vcpus", "1", "--memory", "64MiB", "--spec", "hw:cpu_policy=dedicated",
                             "--spec", "hw:mem_page_size=2MiB", "--spec", "hw:emulator_threads_policy=isolate"],
             isolated)
    # Two cells on two nodes, the emulator threads on the host's cpu_shared_set (Nova's share).
    scenario("pa-two-cells", ["--vcpus", "4", "--memory", "128MiB", "--spec", "hw:cpu_policy=dedicated",
                              "--spec", "hw:numa_nodes=2", "--spec", "hw:mem_page_size=2MiB",
                              "--spec", "hw:emulator_threads_policy=share",
                              "--cpu-dedicated-set", "2-7", "--cpu-shared-set", "0-1"],
             shared_set_one_socket)
except Exception as e:  # a virsh step that failed: say which, after the checks so far
    check(False, str(e))
finally:
    daemon.send_signal(signal.SIGTERM)
    try:
        rc = daemon.wait(timeout=60)
    except subprocess.TimeoutExpired:
        daemon.kill()
        rc = daemon.wait()
    check(rc == 0, "libvirtd stops on SIGTERM: exit %s" % rc)
    if failures:
        libvirtd_log()
print("Guest.libvirt in the guest: %.1f s" % (time.monotonic() - t_all))
finish()
