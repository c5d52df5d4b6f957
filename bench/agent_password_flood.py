#!/usr/bin/env python3
"""/healthz latency of `polyaccel agent` while one address floods it with fresh passwords, and the
time to a 401 for unknown and known users at mixed bcrypt costs: issue 40, items 2 and 8.

The web config is the shipped one's shape (deploy/kubernetes/overlays/monitoring-tls, without
TLS): basic_auth_users with carol (cost 10, password carol123) and dave (cost 12, a hash that no
password matches), auth_excluded_paths [/healthz]. --flood connections from 127.0.0.1 each send
GET /metrics with a password never sent before, again as soon as answered (a new connection each,
as the agent answers one request per connection); meanwhile sequential GET /healthz from
127.0.0.2 are timed. Then, with no flood, each kind of 401 is timed: an unknown user, carol and
dave with a wrong password; and carol's good password, first (bcrypt) and again (remembered).
Each binary given is run in turn, on the same machine in the same run. Not run by CI.

  bench/agent_password_flood.py BINARY [BINARY...] [--build DIR] [--flood 64] [--probes 200]
"""
import argparse
import base64
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
# exporter-toolkit's test hashes (Go's bcrypt, cost 10); dave's raised to cost 12 matches nothing.
CAROL = "$2y$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu"
DAVE12 = "$2y$12$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, path, user=None, password=None, source="127.0.0.1", timeout=30):
    """(HTTP status, seconds); status 0 when no answer came."""
    head = f"GET {path} HTTP/1.1\r\nHost: agent\r\n"
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        head += f"Authorization: Basic {token}\r\n"
    head += "\r\n"
    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                      source_address=(source, 0)) as s:
            s.sendall(head.encode())
            answer = b""
            while b"\r\n" not in answer:
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
            while s.recv(65536):
                pass
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    except OSError:
        status = 0
    return status, time.perf_counter() - start


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def measure(binary, build, flood, probes):
    tmp = tempfile.TemporaryDirectory()
    web = os.path.join(tmp.name, "web.yml")
    with open(web, "w") as f:
        f.write(f"basic_auth_users:\n  carol: {CAROL}\n  dave: {DAVE12}\n"
                "auth_excluded_paths: [/healthz]\n")
    port = free_port()
    cmd = [binary, "agent", "--accel-backends", "on", "--listen", f"127.0.0.1:{port}",
           "--interval", "10s", "--kubelet-dir", "", "--pod-resources-socket", "",
           "--nfd-features-dir", "", "--state", "", "--web-config-file", web]
    env = dict(os.environ, POLYACCEL_NVML_LIB=os.path.join(build, "tests/inject/nvml/libnvidia-ml.so.1"),
               NVML_INJECT_SCENARIO=os.path.join(SOURCE, "tests/inject/nvml/scenarios/hgx-8xh100.json"),
               POLYACCEL_ROCM_SMI_LIB="/nonexistent", POLYACCEL_HLML_LIB="/nonexistent")
    agent = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        quiet = [request(port, "/healthz", source="127.0.0.2")[1] for _ in range(probes)]
        stop = threading.Event()
        counter = itertools.count()
        statuses = {}
        lock = threading.Lock()

        def flooder():
            while not stop.is_set():
                status, _ = request(port, "/metrics", "carol", f"guess{next(counter)}")
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1

        threads = [threading.Thread(target=flooder) for _ in range(flood)]
        for t in threads:
            t.start()
        time.sleep(1)
        loaded, probe_statuses = [], {}
        for _ in range(probes):
            status, seconds = request(port, "/healthz", source="127.0.0.2")
            loaded.append(seconds)
            probe_statuses[status] = probe_statuses.get(status, 0) + 1
        stop.set()
        for t in threads:
            t.join()
        time.sleep(1)
        times = {}
        for name, user, password in [("unknown user", "mallory", "x"),
                                     ("carol (cost 10), wrong", "carol", "x"),
                                     ("dave (cost 12), wrong", "dave", "x")]:
            times[name] = statistics.median(
                request(port, "/metrics", user, f"{password}{i}")[1] for i in range(10))
        first = request(port, "/metrics", "carol", "carol123")
        again = statistics.median(request(port, "/metrics", "carol", "carol123")[1]
                                  for _ in range(10))
    finally:
        agent.terminate()
        agent.wait()
    print(f"{binary}")
    print(f"  /healthz quiet: p50 {percentile(quiet, 50) * 1e3:.1f} ms, "
          f"p99 {percentile(quiet, 99) * 1e3:.1f} ms")
    print(f"  /healthz with {flood} connections of fresh passwords: "
          f"p50 {percentile(loaded, 50) * 1e3:.1f} ms, p99 {percentile(loaded, 99) * 1e3:.1f} ms, "
          f"statuses {dict(sorted(probe_statuses.items()))}")
    print(f"  flood answers: {dict(sorted(statuses.items()))}")
    for name, seconds in times.items():
        print(f"  401 {name}: median {seconds * 1e3:.1f} ms")
    print(f"  carol's good password: first {first[1] * 1e3:.1f} ms ({first[0]}), "
          f"again median {again * 1e3:.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"),
                    help="where the test NVML library was built")
    ap.add_argument("--flood", type=int, default=64)
    ap.add_argument("--probes", type=int, default=200)
    args = ap.parse_args()
    for binary in args.binaries:
        measure(binary, args.build, args.flood, args.probes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
