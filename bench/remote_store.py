"""A shaped "remote" object store for the benchmarks: s3rver in a network namespace of its own,
reached from a client namespace over a veth pair whose store side is shaped with tbf.

    store = RemoteStore(bench, rate_mbit=800, delay_ms=0)  # bench: a lakebench.BenchBase
    store.start()               # blackhole route, namespaces, veth, tbf, s3rver (+ delay proxy)
    store.endpoint              # "http://10.200.S.1:PORT": valid inside the client namespace only
    store.client(argv)          # argv to run in the client namespace (nsenter --net=...)
    store.upload(files)         # [(key, local path)]: parallel PUTs from the client namespace
    store.link_bytes()          # bytes the store has sent over the link so far
    store.teardown()            # also registered with bench.add_cleanup(): idempotent

Layout (test-infra.md's safety rules): before any namespace exists, `blackhole 10.200.S.0/24` goes
into the root namespace's routing table, so nothing in the root namespace can reach (or leak out
to) a namespace address; S is the first free of 90, 210-249. Namespaces `lcbench-PID-store` (s3rver,
10.200.S.1) and `lcbench-PID-client` (10.200.S.2: every process that talks to the store, started
through store.client()), joined by one veth pair made inside them, `tbf rate RATE` on the store's
end (the direction data flows). Start FUSE daemons with store.client(argv): `nsenter --net` keeps
the root mount namespace, so their mounts are visible to readers in the root namespace.

--delay-ms D (this kernel has no netem): a TCP proxy in the store namespace (this file run as a
script: `remote_store.py proxy LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS`) in front of
s3rver, holding every chunk it forwards for D/2 in each direction, so a round trip gains D. It costs
CPU, and TCP does not see the RTT (its window is not limited by it).

Teardown stops what is left in the namespaces (the bench stops its own processes first), deletes
the namespaces (their veths go with them), then the blackhole route.
"""
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from lakebench import log, tail  # noqa: E402

SUBNETS = [90] + list(range(210, 250))
STORE_PORT = 9000  # s3rver's (or the proxy's) port on the store's address
S3RVER_BEHIND_PROXY = 9001  # s3rver's port on the store namespace's loopback, with a proxy
START_TIMEOUT = 30


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


class RemoteStore:
    """s3rver behind a shaped veth, in namespaces; see the module docstring."""

    def __init__(self, bench, rate_mbit=800, delay_ms=0, name=None):
        self.bench = bench
        self.rate_mbit = rate_mbit
        self.delay_ms = delay_ms
        name = name or f"lcbench-{os.getpid()}"
        self.store_ns = f"{name}-store"
        self.client_ns = f"{name}-client"
        self.store_dev = "lcb-store"
        self.client_dev = "lcb-client"
        self.subnet = None  # "10.200.S.0/24" once the blackhole route is ours
        self.namespaces = []
        self.endpoint = None
        self.store_ip = self.client_ip = None
        bench.add_cleanup(self.teardown)

    # ---- namespaces --------------------------------------------------------------------------
    def client(self, argv):
        """argv run in the client namespace (network only: mounts stay visible)."""
        return ["nsenter", f"--net=/run/netns/{self.client_ns}", *argv]

    def in_store(self, argv):
        return ["nsenter", f"--net=/run/netns/{self.store_ns}", *argv]

    def _add_blackhole(self):
        for s in SUBNETS:
            base = f"10.200.{s}."
            routes = _ip("-o", "route", "show", "match", base + "1").stdout.splitlines()
            addrs = _ip("-o", "addr", "show", "to", base + "0/24").stdout.splitlines()
            if any(not r.startswith("default") for r in routes if r.strip()) or any(a.strip() for a in addrs):
                continue  # in use: a network, or another bench or test lab
            # `add`, not `replace`: never take over a route someone else owns.
            if _ip("route", "add", "blackhole", base + "0/24", check=False).returncode == 0:
                self.subnet = base + "0/24"
                self.store_ip, self.client_ip = base + "1", base + "2"
                return
        raise RuntimeError("no free 10.200.S.0/24 for the blackhole route (see `ip route`)")

    def _check_blackholed(self, ip):
        """`ip route get` fails for a blackholed address; an answer means a route out."""
        out = _ip("route", "get", ip, check=False)
        if out.returncode == 0:
            raise RuntimeError(f"the root namespace would route {ip} somewhere: {out.stdout.strip()}")

    def start(self):
        t0 = time.monotonic()
        self._add_blackhole()  # first: no namespace exists before the route does
        self._check_blackholed(self.store_ip)
        for ns in (self.store_ns, self.client_ns):
            _ip("netns", "add", ns)
            self.namespaces.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        # Both ends are made inside their namespaces: nothing appears in the root namespace.
        _ip("link", "add", self.store_dev, "netns", self.store_ns, "type", "veth",
            "peer", "name", self.client_dev, "netns", self.client_ns)
        for ns, dev, ip in ((self.store_ns, self.store_dev, self.store_ip),
                            (self.client_ns, self.client_dev, self.client_ip)):
            _ip("-n", ns, "addr", "add", ip + "/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        if self.rate_mbit:
            r = subprocess.run(["tc", "-n", self.store_ns, "qdisc", "add", "dev", self.store_dev, "root", "tbf",
                                "rate", f"{self.rate_mbit}mbit", "burst", "256kb", "latency", "50ms"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"tc tbf failed: {r.stderr.strip()}")
        self._start_s3rver()
        log(f"remote store: s3rver at {self.endpoint} in namespace {self.store_ns}, clients in "
            f"{self.client_ns}; link {self.describe()} ({time.monotonic() - t0:.1f} s)")

    def describe(self):
        rate = f"tbf {self.rate_mbit} Mbit/s" if self.rate_mbit else "unshaped"
        return rate + (f", +{self.delay_ms} ms RTT (user-space proxy)" if self.delay_ms else "")

    def _start_s3rver(self):
        b = self.bench
        data = os.path.join(b.tmp, "s3rver-data")
        os.makedirs(data, exist_ok=True)
        if self.delay_ms:
            argv = b.s3rver_argv(data, "127.0.0.1", S3RVER_BEHIND_PROXY)
            b.spawn(self.in_store(argv), os.path.join(b.tmp, "s3rver.log"))
            proxy = [sys.executable, os.path.abspath(__file__), "proxy", self.store_ip, str(STORE_PORT),
                     "127.0.0.1", str(S3RVER_BEHIND_PROXY), str(self.delay_ms)]
            b.spawn(self.in_store(proxy), os.path.join(b.tmp, "delay-proxy.log"))
        else:
            argv = b.s3rver_argv(data, self.store_ip, STORE_PORT)
            b.spawn(self.in_store(argv), os.path.join(b.tmp, "s3rver.log"))
        self.endpoint = f"http://{self.store_ip}:{STORE_PORT}"
        b.endpoint = self.endpoint
        deadline = time.monotonic() + START_TIMEOUT
        probe = self.client(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2",
                             "--noproxy", "*", self.endpoint + "/"])
        while True:
            r = subprocess.run(probe, capture_output=True, text=True)
            if r.stdout.strip() not in ("", "000"):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("s3rver did not answer in the store namespace: " + tail(os.path.join(b.tmp, "s3rver.log")))
            time.sleep(0.2)

    # ---- data ----------------------------------------------------------------------------------
    def upload(self, files, parallel=16):
        """[(key, local path)]: PUTs from the client namespace, `parallel` at a time (upstream is
        not shaped; s3rver takes ~90 MB/s)."""
        self.bench.upload(files, prefix=self.client(()), parallel=parallel)

    def link_bytes(self):
        """Bytes the store's end of the veth has sent (IP packets, headers included)."""
        r = _ip("-n", self.store_ns, "-j", "-s", "link", "show", "dev", self.store_dev)
        return json.loads(r.stdout)[0]["stats64"]["tx"]["bytes"]

    # ---- teardown --------------------------------------------------------------------------------
    def teardown(self):
        for ns in self.namespaces:  # whatever is still running there was started by this bench
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                log(f"teardown: stopping pid {pid}, still running in {ns}")
                try:
                    os.kill(int(pid), 9)
                except (OSError, ValueError):
                    pass
        for ns in reversed(self.namespaces):
            r = _ip("netns", "del", ns, check=False)
            if r.returncode != 0:
                log(f"teardown: ip netns del {ns}: {r.stderr.strip()}")
        self.namespaces = []
        if self.subnet:  # last: no namespace address is reachable any more
            r = _ip("route", "del", "blackhole", self.subnet, check=False)
            if r.returncode != 0:
                log(f"teardown: ip route del blackhole {self.subnet}: {r.stderr.strip()}")
            self.subnet = None


# ---- the delay proxy (runs as a separate process in the store namespace) ---------------------------
def _pump(src, dst, delay):
    """Forwards src to dst, each chunk sent `delay` seconds after it arrived."""
    q = queue.Queue()

    def reader():
        try:
            while True:
                data = src.recv(1 << 18)
                q.put((time.monotonic() + delay, data))
                if not data:
                    return
        except OSError:
            q.put((0, b""))

    def writer():
        try:
            while True:
                due, data = q.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                src.shutdown(socket.SHUT_RD)
            except OSError:
                pass

    threading.Thread(target=reader, daemon=True).start()
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    return w


def _serve_proxy(listen_host, listen_port, target_host, target_port, delay_ms):
    delay = delay_ms / 2000.0  # half the added round trip each way
    server = socket.create_server((listen_host, listen_port), backlog=256, reuse_port=False)

    def handle(client):
        try:
            upstream = socket.create_connection((target_host, target_port))
        except OSError:
            client.close()
            return
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        a = _pump(client, upstream, delay)
        b = _pump(upstream, client, delay)
        a.join()
        b.join()
        client.close()
        upstream.close()

    while True:
        conn, _ = server.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "proxy":
        _serve_proxy(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]))
    else:
        sys.exit(__doc__)
