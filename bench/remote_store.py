"""A shaped "remote" object store for the benchmarks: s3rver (or Swift with s3api) in a network
namespace of its own, reached from a client namespace over a veth pair whose store side is shaped
with tbf.

    store = RemoteStore(bench, rate_mbit=800, delay_ms=0, kind="s3rver")  # bench: a lakebench.BenchBase
    store.start()               # blackhole route, namespaces, veth, tbf, the store (+ delay proxy)
    store.access_key, store.secret_key  # the store's credentials (also in bench.env, bench.netrc)
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

kind="swift": OpenStack Swift with s3api (Debian swift swift-proxy swift-account swift-container
swift-object, scripts/install-deps.sh), configured as the tests configure it: the runner script
(run_swift.py: builds the rings, forks the four servers) and the config templates are read out of
tests/support/test_servers.cc (kSwiftRunner, kSwiftConf, kDefaultSection, kBackendConf, kProxyConf),
so there is one recipe. The account, container and object servers listen on the store namespace's
loopback (127.0.0.1:6202/6201/6200, as the rings say), the proxy on STORE_IP:9000; tempauth's
test:tester gets a random secret (never printed); the bucket is made by a signed PUT. Unlike
s3rver, Swift checks SigV4 signatures and completes a multipart upload without copying the parts
(s3api writes a static large object manifest). curl gets the credentials from a netrc file
(bench.netrc; `curl --user` would split the access key at its ':'), lakecache from bench.env's
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.

Teardown stops what is left in the namespaces (the bench stops its own processes first), deletes
the namespaces (their veths go with them), then the blackhole route.

BridgeLab (below): many hosts as namespaces on one bridge, each link shaped in both directions, on
the same safety rules (bench/fanout).
"""
import json
import os
import pwd
import queue
import re
import secrets
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
KINDS = ("s3rver", "swift")
SWIFT_SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "tests", "support", "test_servers.cc")
SWIFT_BACKENDS = (("account", 6202), ("container", 6201), ("object", 6200))  # on the store's loopback
SWIFT_SERVERS = ("proxy", "account", "container", "object")


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def claim_subnet():
    """Blackholes the first free 10.200.S.0/24 of SUBNETS in the root namespace and returns its
    base ("10.200.S."); first, before any namespace exists: nothing in the root namespace can then
    reach (or leak out to) a lab address. Checks that the route took."""
    for s in SUBNETS:
        base = f"10.200.{s}."
        routes = _ip("-o", "route", "show", "match", base + "1").stdout.splitlines()
        addrs = _ip("-o", "addr", "show", "to", base + "0/24").stdout.splitlines()
        if any(not r.startswith("default") for r in routes if r.strip()) or any(a.strip() for a in addrs):
            continue  # in use: a network, or another bench or test lab
        # `add`, not `replace`: never take over a route someone else owns.
        if _ip("route", "add", "blackhole", base + "0/24", check=False).returncode == 0:
            # `ip route get` fails for a blackholed address; an answer means a route out.
            out = _ip("route", "get", base + "1", check=False)
            if out.returncode == 0:
                _ip("route", "del", "blackhole", base + "0/24", check=False)
                raise RuntimeError(f"the root namespace would route {base}1 somewhere: {out.stdout.strip()}")
            return base
    raise RuntimeError("no free 10.200.S.0/24 for the blackhole route (see `ip route`)")


def release_lab(namespaces, subnet):
    """Stops whatever still runs in `namespaces` (the bench stops its own processes first), deletes
    them (their veths and qdiscs go with them), then the blackhole route of `subnet`, last: no
    namespace address is reachable any more."""
    for ns in namespaces:
        for _ in range(20):  # a stopped runner's children (Swift's servers) take a moment to go
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            if not pids:
                break
            time.sleep(0.1)
        for pid in pids:
            log(f"teardown: stopping pid {pid}, still running in {ns}")
            try:
                os.kill(int(pid), 9)
            except (OSError, ValueError):
                pass
    for ns in reversed(namespaces):
        r = _ip("netns", "del", ns, check=False)
        if r.returncode != 0:
            log(f"teardown: ip netns del {ns}: {r.stderr.strip()}")
    if subnet:
        r = _ip("route", "del", "blackhole", subnet, check=False)
        if r.returncode != 0:
            log(f"teardown: ip route del blackhole {subnet}: {r.stderr.strip()}")


def tx_bytes(ns, dev):
    """Bytes `dev` in namespace `ns` has sent (IP packets, headers included)."""
    r = _ip("-n", ns, "-j", "-s", "link", "show", "dev", dev)
    return json.loads(r.stdout)[0]["stats64"]["tx"]["bytes"]


class RemoteStore:
    """s3rver (or Swift) behind a shaped veth, in namespaces; see the module docstring."""

    def __init__(self, bench, rate_mbit=800, delay_ms=0, name=None, kind="s3rver"):
        if kind not in KINDS:
            raise ValueError(f"no remote store of kind {kind!r}")
        self.bench = bench
        self.kind = kind
        self.access_key, self.secret_key = (("test:tester", secrets.token_hex(16)) if kind == "swift"
                                            else ("S3RVER", "S3RVER"))
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

    def start(self):
        t0 = time.monotonic()
        base = claim_subnet()  # first: no namespace exists before the route does
        self.subnet, self.store_ip, self.client_ip = base + "0/24", base + "1", base + "2"
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
        self._start_swift() if self.kind == "swift" else self._start_s3rver()
        log(f"remote store: {self.title()} at {self.endpoint} in namespace {self.store_ns}, clients in "
            f"{self.client_ns}; link {self.describe()} ({time.monotonic() - t0:.1f} s)")

    def title(self):
        return "Swift (s3api)" if self.kind == "swift" else "s3rver"

    def describe(self):
        rate = f"tbf {self.rate_mbit} Mbit/s" if self.rate_mbit else "unshaped"
        return rate + (f", +{self.delay_ms} ms RTT (user-space proxy)" if self.delay_ms else "")

    def _listen(self):
        """(host, port) the store listens on: the store's address, or loopback behind the delay proxy."""
        return ("127.0.0.1", S3RVER_BEHIND_PROXY) if self.delay_ms else (self.store_ip, STORE_PORT)

    def _start_proxy(self):
        if self.delay_ms:
            proxy = [sys.executable, os.path.abspath(__file__), "proxy", self.store_ip, str(STORE_PORT),
                     "127.0.0.1", str(S3RVER_BEHIND_PROXY), str(self.delay_ms)]
            self.bench.spawn(self.in_store(proxy), os.path.join(self.bench.tmp, "delay-proxy.log"))
        self.endpoint = f"http://{self.store_ip}:{STORE_PORT}"
        self.bench.endpoint = self.endpoint

    def _start_s3rver(self):
        b = self.bench
        data = os.path.join(b.tmp, "s3rver-data")
        os.makedirs(data, exist_ok=True)
        b.spawn(self.in_store(b.s3rver_argv(data, *self._listen())), os.path.join(b.tmp, "s3rver.log"))
        self._start_proxy()
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

    def _start_swift(self):
        b, d = self.bench, os.path.join(self.bench.tmp, "swift")
        os.makedirs(os.path.join(d, "devices", "d1"))
        with open(SWIFT_SOURCE) as f:
            source = f.read()

        def const(name):  # a raw string literal of test_servers.cc: R"DELIM(...)DELIM"
            m = re.search(name + r'\s*=\s*R"(\w*)\((.*?)\)\1"', source, re.S)
            if not m:
                raise RuntimeError(f"{name} not found in {SWIFT_SOURCE}")
            return m.group(2)

        def replace_once(text, pattern, new):
            text, n = re.subn(pattern, lambda _: new, text)
            if n != 1:
                raise RuntimeError(f"{pattern!r}: {n} matches in {SWIFT_SOURCE}'s Swift configs, not 1")
            return text

        # The secret is in the proxy's config (in the bench's temp dir, mode 700) and the netrc, never printed.
        files = {"swift.conf": const("kSwiftConf"), "run_swift.py": const("kSwiftRunner"),
                 "netrc": f"machine {self.store_ip} login {self.access_key} password {self.secret_key}\n"}
        user, host, port = pwd.getpwuid(os.geteuid()).pw_name, *self._listen()
        for name, p in (("proxy", port), *SWIFT_BACKENDS):
            conf = const("kDefaultSection").format(port=p, user=user, dir=d)
            if name == "proxy":
                conf = replace_once(conf, r"(?m)^bind_ip = .*$", f"bind_ip = {host}")
                conf += replace_once(const("kProxyConf"), r"(?m)^user_test_tester = \S+",
                                     f"user_test_tester = {self.secret_key}")
            else:
                conf += const("kBackendConf").format(name=name)
            files[f"{name}-server.conf"] = conf
        for name, text in files.items():
            fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
        # run_swift.py kills its process group when a server exits: a group of its own.
        runner = b.spawn(self.in_store(["/usr/bin/python3", os.path.join(d, "run_swift.py"), d,
                                        *[str(p) for _, p in SWIFT_BACKENDS]]),
                         os.path.join(d, "swift.log"), new_session=True)
        self._start_proxy()
        b.netrc = os.path.join(d, "netrc")
        b.env["AWS_ACCESS_KEY_ID"], b.env["AWS_SECRET_ACCESS_KEY"] = self.access_key, self.secret_key
        put = self.client(["curl", "-sS", "--noproxy", "*", "--max-time", "10", "--aws-sigv4",
                           "aws:amz:us-east-1:s3", *b.curl_auth(), "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                           "-X", "PUT", "-o", "/dev/null", "-w", "%{http_code}", f"{self.endpoint}/{b.bucket}"])
        deadline, status = time.monotonic() + START_TIMEOUT * 2, ""
        while True:  # the proxy may answer (503) before the account and container servers do
            status = subprocess.run(put, capture_output=True, text=True).stdout.strip()
            if status == "200":
                return
            if runner.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Swift: PUT of bucket {b.bucket} answered {status or 'nothing'}; logs in {d}: "
                                   + self._swift_logs(d))
            time.sleep(0.5)

    @staticmethod
    def _swift_logs(d):
        return "".join(f"\n{name}.log: " + tail(os.path.join(d, f"{name}.log"), 600)
                       for name in ("swift", *SWIFT_SERVERS) if os.path.exists(os.path.join(d, f"{name}.log")))

    # ---- data ----------------------------------------------------------------------------------
    def upload(self, files, parallel=16):
        """[(key, local path)]: PUTs from the client namespace, `parallel` at a time (upstream is
        not shaped; s3rver takes ~90 MB/s)."""
        self.bench.upload(files, prefix=self.client(()), parallel=parallel)

    def link_bytes(self):
        """Bytes the store's end of the veth has sent (IP packets, headers included)."""
        return tx_bytes(self.store_ns, self.store_dev)

    # ---- teardown --------------------------------------------------------------------------------
    def teardown(self):
        release_lab(self.namespaces, self.subnet)
        self.namespaces = []
        self.subnet = None


class BridgeLab:
    """Hosts as network namespaces on one bridge, each link optionally shaped with tbf in both
    directions (bench/fanout; bench/faults' HostLab is one with fixed hosts).

        lab = BridgeLab(bench, ["store", "master", "host0", "host1"])  # bench: a lakebench.BenchBase
        lab.start()                   # blackhole route, namespaces, the bridge, one veth per host
        lab.shape("host0", 200)       # tbf 200 Mbit/s on host0's eth0 (egress) and its bridge port (ingress)
        lab.run_in("host0", argv)     # argv run in host0's namespace (nsenter --net: mounts stay visible)
        lab.ip_of("host0")            # "10.200.S.3": valid inside the lab's namespaces only
        lab.tx_bytes("host0")         # bytes host0's eth0 has sent so far
        lab.teardown()                # also registered with bench.add_cleanup(): idempotent

    Before any namespace exists, `blackhole 10.200.S.0/24` goes into the root namespace's routing
    table (S: the first free of SUBNETS), so nothing in the root namespace can reach (or leak out to)
    a lab address. The bridge lives in a hub namespace of its own (NAME-hub, ports p0, p1, ...); host
    h is namespace NAME-h with eth0 at 10.200.S.(i+1), i its position in `hosts`. Teardown stops
    whatever still runs in the lab's namespaces (the bench stops its own processes first), deletes
    the namespaces (veths and qdiscs go with them), then the blackhole route."""

    def __init__(self, bench, hosts, name=None):
        if len(hosts) > 250:
            raise ValueError("at most 250 hosts on a /24")
        self.bench = bench
        self.hosts = list(hosts)
        self.name = name or f"lcl{os.getpid()}"
        self.namespaces = []
        self.subnet = self.base = None
        bench.add_cleanup(self.teardown)

    def ns(self, host):
        return f"{self.name}-{host}"

    def run_in(self, host, argv):
        return ["nsenter", f"--net=/run/netns/{self.ns(host)}", *argv]

    def ip_of(self, host):
        return self.base + str(self.hosts.index(host) + 1)

    def port_of(self, host):
        """The host's port on the bridge (in the hub namespace)."""
        return f"p{self.hosts.index(host)}"

    def start(self):
        self.base = claim_subnet()
        self.subnet = self.base + "0/24"
        hub = self.ns("hub")
        for host in ("hub", *self.hosts):
            _ip("netns", "add", self.ns(host))
            self.namespaces.append(self.ns(host))
            _ip("-n", self.ns(host), "link", "set", "lo", "up")
        _ip("-n", hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", hub, "link", "set", "br0", "up")
        for host in self.hosts:  # both ends made inside their namespaces: nothing in the root one
            port = self.port_of(host)
            _ip("-n", hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", self.ns(host))
            _ip("-n", hub, "link", "set", port, "master", "br0")
            _ip("-n", hub, "link", "set", port, "up")
            _ip("-n", self.ns(host), "addr", "add", self.ip_of(host) + "/24", "dev", "eth0")
            _ip("-n", self.ns(host), "link", "set", "eth0", "up")

    def shape(self, host, rate_mbit, burst="256kb", latency="50ms"):
        """tbf at rate_mbit on the host's eth0 (what it sends) and on its bridge port (what it
        receives); 0 or None removes the shaping."""
        for ns, dev in ((self.ns(host), "eth0"), (self.ns("hub"), self.port_of(host))):
            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True)
            if rate_mbit:
                r = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                                    f"{rate_mbit}mbit", "burst", burst, "latency", latency],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"tc tbf on {ns} {dev} failed: {r.stderr.strip()}")

    def tx_bytes(self, host):
        """Bytes the host's eth0 has sent (IP packets, headers included)."""
        return tx_bytes(self.ns(host), "eth0")

    def teardown(self):
        release_lab(self.namespaces, self.subnet)
        self.namespaces = []
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
