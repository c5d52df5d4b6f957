#!/usr/bin/env python3
"""/metrics latency of `polyaccel agent` (8 H100 through the test NVML library, plus this host)
while slow clients trickle request heads at it: issue 29's figure (p99 within 10 ms with 100
clients that send one header line every 2 s, on a busy machine).

Each trickler connects from its own loopback address (127.0.0.2, 127.0.0.3, ...: distinct
clients, so that the per-client bound does not hide them), sends a request line, then one header
line every --trickle-every seconds for as long as the connection lives, and reconnects when the
agent closes it. Meanwhile sequential gzip scrapes of /metrics (a new connection each, as the
agent answers one request per connection) are timed. --busy N runs N processes that spin on the
CPUs beside it. --tls serves over TLS with basic auth (certificates from openssl in a temporary
directory; the bcrypt verdict is cached after the first scrape), to put TLS's cost beside clear
text's. Prints p50/p99 without and with the tricklers, and how long the tricklers' connections
lived (the head deadline, 3 s by default, bounds it). Not run by CI.

  bench/agent_slow_clients.py [BUILD_DIR] [--tricklers 100] [--scrapes 2000] [--busy 2] [--tls]
"""
import argparse
import base64
import http.client
import multiprocessing
import os
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
# exporter-toolkit's test hash (Go's bcrypt, cost 10) of carol123
CAROL = "$2y$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spin(stop):
    while not stop.is_set():
        sum(i * i for i in range(10000))


def make_tls(dir):
    def run(*cmd):
        subprocess.run(cmd, check=True, capture_output=True)
    ca, ca_key = f"{dir}/ca.crt", f"{dir}/ca.key"
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-days", "2", "-subj", "/CN=bench-ca", "-keyout", ca_key, "-out", ca)
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-subj", "/CN=agent", "-keyout", f"{dir}/server.key", "-out", f"{dir}/server.csr")
    with open(f"{dir}/ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-days", "2", "-in", f"{dir}/server.csr", "-CA", ca, "-CAkey",
        ca_key, "-CAcreateserial", "-extfile", f"{dir}/ext", "-out", f"{dir}/server.crt")
    with open(f"{dir}/web.yml", "w") as f:
        f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                f"basic_auth_users:\n  carol: {CAROL}\n")
    return f"{dir}/web.yml", ca


class Tricklers:
    """N slow clients on one selector thread; each reconnects when the agent closes it."""

    def __init__(self, port, count, every, tls_context):
        self.port, self.count, self.every, self.tls = port, count, every, tls_context
        self.lifetimes, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def connect(self, i):
        s = socket.socket()
        s.bind((f"127.0.0.{2 + i % 250}", 0))
        s.connect(("127.0.0.1", self.port))
        if self.tls:
            s = self.tls.wrap_socket(s, server_hostname="127.0.0.1")
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n")
        s.setblocking(False)
        return s

    def run(self):
        sel = selectors.DefaultSelector()
        conns = {}
        for i in range(self.count):
            s = self.connect(i)
            conns[s] = [i, time.monotonic(), time.monotonic()]
            sel.register(s, selectors.EVENT_READ)
        while not self.stop.is_set():
            for key, _ in sel.select(timeout=0.1):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except (BlockingIOError, ssl.SSLWantReadError):
                    continue
                except OSError:
                    data = b""
                if data:
                    continue
                i, born, _ = conns.pop(s)
                self.lifetimes.append(time.monotonic() - born)
                sel.unregister(s)
                s.close()
                n = self.connect(i)
                conns[n] = [i, time.monotonic(), time.monotonic()]
                sel.register(n, selectors.EVENT_READ)
            now = time.monotonic()
            for s, state in list(conns.items()):
                if now - state[2] >= self.every:
                    state[2] = now
                    try:
                        s.send(b"X-Trickle: 1\r\n")
                    except (OSError, ssl.SSLError):
                        pass
        for s in conns:
            s.close()


def trickle(port, count, every, cafile, stop, results):
    tls = ssl.create_default_context(cafile=cafile) if cafile else None
    t = Tricklers(port, count, every, tls)
    t.stop = stop
    t.run()
    results.send(t.lifetimes)


def scrape(port, n, tls_context):
    headers = {"Accept-Encoding": "gzip"}
    if tls_context:
        headers["Authorization"] = "Basic " + base64.b64encode(b"carol:carol123").decode()
    lat = []
    for _ in range(n):
        if tls_context:
            c = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=tls_context)
        else:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        t0 = time.perf_counter()
        c.request("GET", "/metrics", headers=headers)
        r = c.getresponse()
        r.read()
        lat.append(time.perf_counter() - t0)
        c.close()
        if r.status != 200:
            sys.exit(f"scrape answered {r.status}")
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--tricklers", type=int, default=100)
    ap.add_argument("--trickle-every", type=float, default=2.0)
    ap.add_argument("--scrapes", type=int, default=2000)
    ap.add_argument("--busy", type=int, default=0, help="CPU-spinning processes beside the agent")
    ap.add_argument("--tls", action="store_true")
    args = ap.parse_args()
    polyaccel = os.path.join(args.build, "src/polyaccel")
    nvml = os.path.join(args.build, "tests/inject/nvml/libnvidia-ml.so.1")
    tmp = tempfile.TemporaryDirectory()
    port = free_port()
    cmd = [polyaccel, "agent", "--accel-backends", "on", "--listen", f"127.0.0.1:{port}",
           "--interval", "10s", "--kubelet-dir", "", "--pod-resources-socket", "",
           "--nfd-features-dir", "", "--state", ""]
    tls_context, ca = None, None
    if args.tls:
        web, ca = make_tls(tmp.name)
        cmd += ["--web-config-file", web]
        tls_context = ssl.create_default_context(cafile=ca)
    env = dict(os.environ, POLYACCEL_NVML_LIB=nvml,
               NVML_INJECT_SCENARIO=os.path.join(SOURCE, "tests/inject/nvml/scenarios/hgx-8xh100.json"),
               POLYACCEL_ROCM_SMI_LIB="/nonexistent", POLYACCEL_HLML_LIB="/nonexistent")
    agent = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    stop_busy = multiprocessing.Event()
    busy = [multiprocessing.Process(target=spin, args=(stop_busy,)) for _ in range(args.busy)]
    try:
        time.sleep(1.5)
        scrape(port, 20, tls_context)  # warm-up (and the bcrypt verdict cached)
        for p in busy:
            p.start()
        quiet = scrape(port, args.scrapes, tls_context)
        # The tricklers in a process of their own: their TLS handshakes must not take the GIL
        # from the timed scrapes.
        results, child = multiprocessing.Pipe(duplex=False)
        stop_tricklers = multiprocessing.Event()
        trickling = multiprocessing.Process(
            target=trickle, args=(port, args.tricklers, args.trickle_every,
                                  ca if args.tls else None, stop_tricklers, child))
        trickling.start()
        time.sleep(args.trickle_every + 1)
        loaded = scrape(port, args.scrapes, tls_context)
        stop_tricklers.set()
        lifetimes = results.recv()
        trickling.join()
    finally:
        stop_busy.set()
        for p in busy:
            p.join()
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=10)
    kind = "TLS + basic auth" if args.tls else "clear text"
    print(f"{args.scrapes} sequential gzip scrapes, {kind}, {os.cpu_count()} CPUs, "
          f"{args.busy} spinning processes beside")
    print(f"  without tricklers:  p50 {quiet[0]:.2f} ms  p99 {quiet[1]:.2f} ms")
    print(f"  with {args.tricklers} tricklers (a line every {args.trickle_every:g} s): "
          f"p50 {loaded[0]:.2f} ms  p99 {loaded[1]:.2f} ms")
    life = sorted(lifetimes)
    if life:
        print(f"  trickling connections closed by the agent: {len(life)}, lived "
              f"{life[len(life) // 2]:.2f} s median, {life[-1]:.2f} s longest")
    else:
        print("  no trickling connection was closed by the agent")


if __name__ == "__main__":
    main()
