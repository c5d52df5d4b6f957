#!/usr/bin/env python3
"""Side by side: `polyaccel agent` (8 H100 GPUs through the test NVML library, plus this host)
and Debian's prometheus-node-exporter, in one run, scraped the same way (sequential GETs of
/metrics with Accept-Encoding: gzip, as Prometheus sends them).

Prints for each: scrape latency p50/p99, CPU seconds the exporter process used per 1000 scrapes,
and its RSS after N scrapes (default 10,000; RSS is also sampled every 1000 to show whether it
stays flat). Not run by CI.

  bench/agent_vs_node_exporter.py [BUILD_DIR] [--scrapes N] [--full-node]

--full-node: the node at full size, 8 H200 GPUs each in MIG with 7 instances and GPM on
(tests/inject/nvml/scenarios/hgx-8xh200-mig7-gpm.json) on the captured Dell XE8640 (its PCIe
tree and switches, --topology) with 8 RDMA NICs, with the host families of this machine. The
capture has 4 ConnectX HCAs; the script writes a copy of it (in a temporary folder) in which the
captured ConnectX-7 of one switch, with its downstream port, is copied to a free port of each of
the four GPU switches (full_node_topology below), as an HGX board with a NIC per GPU pair has.

With --full-node both read the same RDMA port counters: the script builds a sysfs tree whose
sys/class/infiniband holds the 8 RDMA devices of that topology, each with one ACTIVE HDR port,
node_exporter's counters/ files and an mlx5 set of hw_counters/ (infiniband_tree below), and
whose other sys/ entries link to this host's /sys. The agent reads it with --host-root (its RDMA
port families; nothing else of the host, as with --topology alone), node_exporter with
--path.sysfs and --collector.infiniband (its host families as usual, and node_infiniband_*).

node_exporter comes from Debian's prometheus-node-exporter package (or --node-exporter PATH, a
binary unpacked from it); when it is not installed the script says so and measures the agent
alone.
"""
import argparse
import copy
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
CLK_TCK = os.sysconf("SC_CLK_TCK")


XE8640 = os.path.join(SOURCE, "../shared/fixtures/topologies",
                      "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml")
# The captured ConnectX-7 (mlx5_2, 0000:5e:00.0) sits behind downstream port 0000:5b:02.0 of a
# GPU switch. Copies of that port and HCA go to a free bus of each of the four GPU switches
# (the switch's upstream port, the free bus, the new downstream port): each bus lies in its
# switch's captured bus range.
CX7_PORT = "0000:5b:02.0"
NEW_NICS = [("0000:49:00.0", 0x4c, "0000:4a:01.0"), ("0000:5a:00.0", 0x5c, "0000:5b:01.0"),
            ("0000:c8:00.0", 0xcc, "0000:c9:02.0"), ("0000:d8:00.0", 0xdc, "0000:d9:02.0")]


def full_node_topology(folder):
    """The XE8640 capture with 8 RDMA NICs (4 captured, 4 copies of its ConnectX-7); its path."""
    tree = ET.parse(XE8640)
    objects = list(tree.iter("object"))
    by_busid = {o.get("pci_busid"): o for o in objects if o.get("pci_busid")}
    next_index = max(int(o.get("gp_index")) for o in objects) + 1
    rdma = lambda: sum(1 for o in tree.iter("object") if o.get("osdev_type") == "3")
    first = rdma()
    for n, (switch, bus, port_busid) in enumerate(NEW_NICS):
        if port_busid in by_busid or f"0000:{bus:02x}:00.0" in by_busid:
            sys.exit(f"{XE8640}: {port_busid} or bus {bus:02x} is taken: the capture changed")
        port = copy.deepcopy(by_busid[CX7_PORT])
        port.set("pci_busid", port_busid)
        port.set("bridge_pci", f"0000:[{bus:02x}-{bus:02x}]")
        hca = port.find("object")
        hca.set("pci_busid", f"0000:{bus:02x}:00.0")
        guid = f"a088:c203:0009:{0x7050 + n:04x}"  # unique, next to the captured one's
        for o in port.iter("object"):
            o.set("gp_index", str(next_index))
            next_index += 1
            if o.get("osdev_type") == "2":  # the IPoIB netdev, named after its bus
                o.set("name", f"ibp{bus}s0")
            if o.get("osdev_type") == "3":
                o.set("name", f"mlx5_{first + n}")
            for info in o.findall("info"):
                if info.get("name") in ("NodeGUID", "SysImageGUID"):
                    info.set("value", guid)
                elif info.get("name") == "Port1GID0":
                    info.set("value", "fe80:0000:0000:0000:" + guid)
                elif info.get("name") == "Address":  # IPoIB: its last 3 bytes are the GUID's
                    tail = guid.replace(":", "")[-6:]
                    info.set("value", info.get("value")[:-8] + ":".join(
                        tail[i:i + 2] for i in range(0, 6, 2)))
        for info in port.findall("info"):
            if info.get("name") == "PCISlot":
                port.remove(info)  # a slot number of the capture would be claimed twice
        # Among the switch's downstream ports in bus order, as the kernel lists them.
        parent = by_busid[switch]
        ports = [c for c in parent if c.tag == "object"]
        port.set("pci_type", ports[0].get("pci_type"))  # this switch's IDs
        after = [c for c in ports if int(c.get("bridge_pci")[6:8], 16) > bus]
        parent.insert(list(parent).index(after[0]) if after else len(parent), port)
    if rdma() != 8:
        sys.exit(f"{XE8640}: the full node has {rdma()} RDMA NICs, not 8")
    path = os.path.join(folder, "xe8640-8xrdma.xml")
    with open(path, "wb") as f:
        f.write(b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        tree.write(f, encoding="utf-8", xml_declaration=False)
    return path


# node_exporter's counters (procfs' InfiniBandCounters) and the hw_counters of an mlx5 port.
IB_COUNTERS = ["excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
               "local_link_integrity_errors", "multicast_rcv_packets", "multicast_xmit_packets",
               "port_rcv_constraint_errors", "port_rcv_data", "port_rcv_errors", "port_rcv_packets",
               "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
               "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards",
               "port_xmit_packets", "port_xmit_wait", "symbol_error", "unicast_rcv_packets",
               "unicast_xmit_packets", "VL15_dropped"]
MLX5_HW_COUNTERS = ["duplicate_request", "implied_nak_seq_err", "lifespan", "local_ack_timeout_err",
                    "np_cnp_sent", "np_ecn_marked_roce_packets", "out_of_buffer", "out_of_sequence",
                    "packet_seq_err", "req_cqe_error", "req_cqe_flush_error",
                    "req_remote_access_errors", "req_remote_invalid_request", "resp_cqe_error",
                    "resp_cqe_flush_error", "resp_local_length_error", "resp_remote_access_errors",
                    "rnr_nak_retry_err", "roce_adp_retrans", "roce_adp_retrans_to",
                    "roce_slow_restart", "roce_slow_restart_cnps", "roce_slow_restart_trans",
                    "rp_cnp_handled", "rp_cnp_ignored", "rx_atomic_requests",
                    "rx_icrc_encapsulated", "rx_read_requests", "rx_write_requests"]


def infiniband_tree(folder, topology):
    """A root whose sys/class/infiniband holds the topology's RDMA devices with counters; the
    rest of sys/ links to this host's /sys (node_exporter's other collectors read the host)."""
    root = os.path.join(folder, "root")
    sys_dir = os.path.join(root, "sys")
    classes = os.path.join(sys_dir, "class")
    os.makedirs(classes)
    for entry in os.listdir("/sys"):
        if entry != "class":
            os.symlink(os.path.join("/sys", entry), os.path.join(sys_dir, entry))
    for entry in os.listdir("/sys/class"):
        if entry != "infiniband":
            os.symlink(os.path.join("/sys/class", entry), os.path.join(classes, entry))
    names = sorted(o.get("name") for o in ET.parse(topology).iter("object")
                   if o.get("osdev_type") == "3")
    for n, name in enumerate(names):
        dev = os.path.join(classes, "infiniband", name)
        files = {"board_id": "MT_0000000838", "fw_ver": "28.39.1002", "hca_type": "MT4129",
                 "node_guid": f"a088:c203:0009:{0x7050 + n:04x}"}
        port = os.path.join(dev, "ports", "1")
        files.update({"ports/1/state": "4: ACTIVE", "ports/1/phys_state": "5: LinkUp",
                      "ports/1/rate": "200 Gb/sec (4X HDR)", "ports/1/link_layer": "InfiniBand",
                      "ports/1/lid": f"0x{n + 1:x}"})
        for k, c in enumerate(IB_COUNTERS):
            files["ports/1/counters/" + c] = str(1_000_000_007 * (k + 1) * (n + 1))
        for k, c in enumerate(MLX5_HW_COUNTERS):
            files["ports/1/hw_counters/" + c] = str(1009 * (k + 1) * (n + 1))
        for rel, text in files.items():
            path = os.path.join(dev, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text + "\n")
    return root, names


def count_lines(port, prefix):
    """How many sample lines of the scrape start with `prefix`."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    return sum(1 for line in c.getresponse().read().decode().splitlines()
               if line.startswith(prefix))


def rdma_busids(topology):
    """The PCI addresses of the RDMA NICs (PCI devices with an OpenFabrics OS device)."""
    return sorted(o.get("pci_busid") for o in ET.parse(topology).iter("object")
                  if o.get("type") == "PCIDev" and
                  any(c.get("osdev_type") == "3" for c in o.findall("object")))


def nics_in_scrape(port, busids):
    """Those of `busids` that the scrape lists as NICs (polyaccel_placement_device_held)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    return [b for b in busids if any(
        line.startswith("polyaccel_placement_device_held{") and 'device="nic' in line and
        f'pci_bus_id="{b}"' in line for line in text.splitlines())]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def wait_ready(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/metrics")
            if c.getresponse().status == 200:
                return True
        except OSError:
            time.sleep(0.1)
    return False


def wait_for(port, text, timeout=60):
    """Until a scrape holds `text` (GPM's rates need two samples of the agent's interval)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/metrics")
        if text in c.getresponse().read():
            return True
        time.sleep(0.5)
    return False


def measure(name, pid, port, scrapes):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Accept-Encoding": "gzip", "Accept": "text/plain"}
    for _ in range(20):  # warm-up
        conn.request("GET", "/metrics", headers=headers)
        conn.getresponse().read()
    latencies, rss_track = [], []
    cpu_before = cpu_seconds(pid)
    size = 0
    for i in range(scrapes):
        t0 = time.perf_counter()
        conn.request("GET", "/metrics", headers=headers)
        body = conn.getresponse().read()
        latencies.append(time.perf_counter() - t0)
        size = len(body)
        if (i + 1) % 1000 == 0:
            rss_track.append(rss_mib(pid))
    cpu = cpu_seconds(pid) - cpu_before
    latencies.sort()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    return {
        "name": name, "p50_ms": p(0.50), "p99_ms": p(0.99),
        "cpu_s_per_1000": cpu * 1000 / scrapes, "rss_mib": rss_mib(pid),
        "rss_track": rss_track, "gzip_bytes": size,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--scrapes", type=int, default=10000)
    ap.add_argument("--full-node", action="store_true")
    ap.add_argument("--node-exporter", help="node_exporter binary (default: on PATH)")
    args = ap.parse_args()

    polyaccel = os.path.join(args.build, "src/polyaccel")
    nvml = os.path.join(args.build, "tests/inject/nvml/libnvidia-ml.so.1")
    for f in (polyaccel, nvml):
        if not os.path.exists(f):
            sys.exit(f"{f}: not built (cmake --build {args.build})")
    node_exporter = args.node_exporter or shutil.which("prometheus-node-exporter")

    procs, results = [], []
    folder = tempfile.mkdtemp(prefix="agent_vs_node_exporter.")
    try:
        port = free_port()
        scenario = "hgx-8xh200-mig7-gpm.json" if args.full_node else "hgx-8xh100.json"
        env = dict(os.environ, POLYACCEL_NVML_LIB=nvml,
                   NVML_INJECT_SCENARIO=os.path.join(SOURCE, "tests/inject/nvml/scenarios", scenario),
                   POLYACCEL_ROCM_SMI_LIB="/nonexistent", POLYACCEL_HLML_LIB="/nonexistent")
        command = [polyaccel, "agent", "--accel-backends", "on", "--listen",
                   f"127.0.0.1:{port}", "--interval", "2s" if args.full_node else "10s"]
        name = "polyaccel agent (8 GPUs + host)"
        if args.full_node:
            topology = full_node_topology(folder)
            ib_root, ib_devices = infiniband_tree(folder, topology)
            command += ["--topology", topology, "--host-root", ib_root]
            name = "polyaccel agent (8 GPUs x 7 MIG, GPM, 8 RDMA)"
        agent = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        procs.append(agent)
        targets = [(name, agent.pid, port)]
        if node_exporter:
            ne_port = free_port()
            ne_command = [node_exporter, f"--web.listen-address=127.0.0.1:{ne_port}"]
            ne_name = "node_exporter (defaults)"
            if args.full_node:
                ne_command += [f"--path.sysfs={ib_root}/sys", "--collector.infiniband"]
                ne_name = "node_exporter (defaults + infiniband)"
            ne = subprocess.Popen(ne_command, stderr=subprocess.DEVNULL)
            procs.append(ne)
            targets.append((ne_name, ne.pid, ne_port))
        else:
            print("prometheus-node-exporter is not installed (apt-get install "
                  "prometheus-node-exporter): measuring the agent alone\n")
        for name, pid, p in targets:
            if not wait_ready(p):
                sys.exit(f"{name} did not answer on port {p}")
        if args.full_node and not wait_for(port, b"DCGM_FI_PROF_SM_ACTIVE"):
            sys.exit("the agent gave no GPM (DCGM_FI_PROF_*) families within 60 s")
        if args.full_node:
            rdma = nics_in_scrape(port, rdma_busids(topology))
            if len(rdma) != 8:
                sys.exit(f"the scrape lists {len(rdma)} RDMA NICs ({', '.join(rdma)}), not 8")
            ports = count_lines(port, "polyaccel_rdma_port_data_received_bytes_total{")
            if ports != len(ib_devices):
                sys.exit(f"the agent serves {ports} RDMA ports, not {len(ib_devices)}")
            if node_exporter:
                ports = count_lines(ne_port, "node_infiniband_port_data_received_bytes_total{")
                if ports != len(ib_devices):
                    sys.exit(f"node_exporter serves {ports} InfiniBand ports, not {len(ib_devices)}")
        for name, pid, p in targets:
            results.append(measure(name, pid, p, args.scrapes))
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        shutil.rmtree(folder)

    print(f"{args.scrapes} sequential scrapes each, gzip, on {os.cpu_count()} CPUs")
    print(f"{'exporter':46} {'p50 ms':>8} {'p99 ms':>8} {'CPU s/1000':>11} {'RSS MiB':>8} {'gzip B':>8}  RSS every 1000")
    for r in results:
        track = " ".join(f"{x:.1f}" for x in r["rss_track"])
        print(f"{r['name']:46} {r['p50_ms']:8.3f} {r['p99_ms']:8.3f} {r['cpu_s_per_1000']:11.3f} "
              f"{r['rss_mib']:8.1f} {r['gzip_bytes']:8d}  {track}")
    if len(results) == 2:
        a, n = results
        print(f"\nagent / node_exporter: p50 {a['p50_ms'] / n['p50_ms']:.2f}, "
              f"p99 {a['p99_ms'] / n['p99_ms']:.2f}, CPU {a['cpu_s_per_1000'] / n['cpu_s_per_1000']:.2f}")


if __name__ == "__main__":
    main()
