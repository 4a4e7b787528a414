"""Shared pieces of the lakecache benchmark scripts (bench/read_path, bench/cluster_read,
bench/compare; bench/remote_store.py builds on it).

A script imports this module (its own folder on sys.path), subclasses BenchBase for its
measurements and calls run_main(), which installs the signal handlers and always tears down: every
process a bench started (BenchBase.track) is stopped, its mount unmounted, then the clean-ups it
registered (BenchBase.add_cleanup: network namespaces, routes, loop mounts) run, newest first, and
the temp dir is removed (unless --keep-tmp), on success, failure, SIGINT, SIGTERM or SIGHUP.

Binaries: $LAKECACHE (default $BUILD_DIR/lakecache), $FUSE_CEILING (default
$BUILD_DIR/bench/fuse_ceiling) and $WIRE_CEILING (default $BUILD_DIR/bench/wire_ceiling), BUILD_DIR
defaulting to build/ of the repo; $S3RVER_JS (default node_modules/s3rver/bin/s3rver.js of the
repo).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_DIR = os.path.join(REPO, os.environ.get("BUILD_DIR", "build"))
LAKECACHE = os.environ.get("LAKECACHE", os.path.join(BUILD_DIR, "lakecache"))
FUSE_CEILING = os.environ.get("FUSE_CEILING", os.path.join(BUILD_DIR, "bench", "fuse_ceiling"))
WIRE_CEILING = os.environ.get("WIRE_CEILING", os.path.join(BUILD_DIR, "bench", "wire_ceiling"))
S3RVER_JS = os.environ.get("S3RVER_JS", os.path.join(REPO, "node_modules", "s3rver", "bin", "s3rver.js"))

MiB = 1 << 20
BUCKET = "bench"
MEM_CACHE = "1GiB"  # the standalone mount's memory cache (mount_lakecache)

PROG = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "lakebench"


def set_prog(name):
    """The name log lines and messages start with."""
    global PROG
    PROG = name


def log(msg):
    print(f"[{PROG} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_bytes(text):
    """"100KiB", "64MiB", "1GiB", "4096": a byte count (K/M/G and KiB/MiB/GiB are powers of 2)."""
    units = {"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": MiB, "MiB": MiB, "G": 1 << 30, "GiB": 1 << 30}
    num = text.rstrip("KMGiB")
    unit = text[len(num):]
    try:
        value = int(float(num) * units[unit])
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 512MiB)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: must be more than 0")
    return value


def parse_size(text):
    value = parse_bytes(text)
    if value < 8 * MiB or value % MiB:
        raise argparse.ArgumentTypeError("size must be a whole number of MiB, at least 8MiB")
    return value


def format_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{n}B"


def require_root(why="drop_caches and FUSE mounts"):
    if os.geteuid() != 0:
        sys.exit(f"{PROG}: needs root ({why})")


def drop_caches(level=3):
    """The kernel's caches dropped: 3 the page cache and the dentries and inodes, 2 these only."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write(f"{level}\n")


def read_all(path):
    """Reads `path` sequentially in 1 MiB reads; returns (bytes, seconds)."""
    buf = bytearray(MiB)
    view = [buf]
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        start = time.perf_counter()
        while True:
            n = os.readv(fd, view)
            if n == 0:
                break
            total += n
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
    return total, seconds


def cpu_seconds(pid):
    """utime + stime of a running process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid):
    """[(pid, argv)] of pid's children and theirs, from /proc/PID/task/*/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    for child in map(int, f.read().split()):
                        with open(f"/proc/{child}/cmdline", "rb") as c:
                            out.append((child, c.read().decode(errors="replace").split("\0")))
                        todo.append(child)
        except OSError:
            pass  # gone meanwhile
    return out


def rss_kib(pid):
    """VmRSS of a process in KiB; None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def mount_server(mount_proc):
    """The pid of the server of the mount whose `lakecache mount` process is mount_proc (the
    process whose argv has --holder)."""
    deadline = time.monotonic() + 10
    while True:
        for pid, argv in descendants(mount_proc.pid):
            if "--holder" in argv:
                return pid
        if time.monotonic() > deadline:
            raise RuntimeError(f"no server process under the mount (pid {mount_proc.pid})")
        time.sleep(0.05)


def set_affinity_all_threads(pid, cpus):
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:
                pass  # a thread that just ended
    except OSError:
        pass  # the process ended


def mbps(nbytes, seconds):
    return nbytes / seconds / 1e6


def is_mounted(path):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def write_pattern_file(path, size, seed, base=None, sync=True):
    """Incompressible bytes, different for each seed and each MiB; any size (the last MiB is cut).
    `base`: a random MiB to start from (default a fresh one; pass one to write many small files
    quickly). `sync`: fsync the file (the caller may sync once for many files instead)."""
    chunk = bytearray(base if base is not None else os.urandom(MiB))
    with open(path, "wb") as f:
        for i in range(-(-size // MiB)):
            chunk[0:16] = seed.to_bytes(8, "little") + i.to_bytes(8, "little")
            f.write(chunk[:min(MiB, size - i * MiB)])
        if sync:
            f.flush()
            os.fsync(f.fileno())


def read_range(path, offset=0, length=None, buf=None):
    """Reads `length` bytes of path from `offset` (default: to the end) in 1 MiB preads; returns
    the bytes read."""
    buf = buf if buf is not None else bytearray(MiB)
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while length is None or total < length:
            want = MiB if length is None else min(MiB, length - total)
            n = os.preadv(fd, [memoryview(buf)[:want]], offset + total)
            if n == 0:
                break
            total += n
    finally:
        os.close(fd)
    return total


def run_readers(work, jobs):
    """Runs work(job) for every job of each list in `jobs` (one thread per list, in order within a
    list); returns (sum of the results, seconds). The first exception of any thread is raised
    after all threads end."""
    results, errors = [0] * len(jobs), []

    def run(i):
        try:
            for job in jobs[i]:
                results[i] += work(job)
        except BaseException as e:  # noqa: B902 - re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    return sum(results), seconds


def bench_env():
    """This environment with the S3RVER credentials and without anything that would redirect or
    change an S3 client (proxies, endpoint, profile, session token)."""
    env = dict(os.environ)
    for name in list(env):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy") or name in (
                "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            del env[name]
    env["AWS_ACCESS_KEY_ID"] = "S3RVER"
    env["AWS_SECRET_ACCESS_KEY"] = "S3RVER"
    return env


def tail(path, chars=2000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-chars:]
    except OSError as e:
        return f"({path}: {e})"


def run_quiet(argv):
    """Runs argv, output discarded; its exit status, or None when it could not be started."""
    try:
        return subprocess.run(argv, capture_output=True).returncode
    except OSError as e:
        log(f"{argv[0]}: {e}")
        return None


class BenchBase:
    """Temp dir, s3rver, uploads, mounts and the processes behind them, and their teardown.

    args needs size, repeat, tmp_dir and keep_tmp. Every process started goes into self.procs with
    its mountpoint (None for a server); teardown() stops them newest first."""

    bucket = BUCKET

    def __init__(self, args, tmp_prefix):
        self.args = args
        self.size = args.size
        self.tmp = tempfile.mkdtemp(prefix=tmp_prefix, dir=args.tmp_dir)
        self.procs = []  # (Popen, mountpoint or None)
        self.port = None
        self.endpoint = None
        self.env = bench_env()
        self.netrc = None  # a store whose access key has a ':' (Swift's test:tester): curl's credentials
        self.mount_count = 0
        self.cleanups = []  # callables run at teardown after the processes stopped, newest first

    # ---- teardown ------------------------------------------------------------------------
    def unmount(self, mnt):
        """Never raises: a lakecache binary that cannot run (being relinked, say) must not leave
        the mount behind."""
        if not is_mounted(mnt):
            return
        if run_quiet([LAKECACHE, "umount", mnt]) != 0 or is_mounted(mnt):
            run_quiet(["fusermount3", "-u", "-z", mnt])
        if is_mounted(mnt):
            run_quiet(["umount", "-l", mnt])

    def stop(self, proc, mnt):
        if mnt is not None:
            self.unmount(mnt)
        if proc.poll() is None:
            try:
                proc.wait(timeout=10 if mnt is not None else 0.1)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if mnt is not None:
            self.unmount(mnt)  # a process that died mounted leaves a dead mount behind

    def teardown(self):
        for proc, mnt in reversed(self.procs):
            try:
                self.stop(proc, mnt)
            except Exception as e:  # keep tearing down the rest
                log(f"teardown: {e}")
                if proc.poll() is None:
                    proc.kill()
        self.procs.clear()
        while self.cleanups:
            fn = self.cleanups.pop()
            try:
                fn()
            except Exception as e:  # keep tearing down the rest
                log(f"teardown: {e}")
        if self.args.keep_tmp:
            log(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def add_cleanup(self, fn):
        """fn() runs at teardown, after every tracked process has stopped (newest first)."""
        self.cleanups.append(fn)
        return fn

    def track(self, proc, mnt=None):
        self.procs.append((proc, mnt))
        return proc

    def stop_tracked(self, proc):
        for i, (p, mnt) in enumerate(self.procs):
            if p is proc:
                self.stop(p, mnt)
                del self.procs[i]
                return

    def spawn(self, argv, out_path, mnt=None, env=None, new_session=False):
        """Starts argv with stdout and stderr to out_path, tracked for teardown (new_session: in a
        session and process group of its own, for a process that may kill its group)."""
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=new_session)
        return self.track(proc, mnt)

    def check_binaries(self, *binaries):
        for binary in binaries:
            if not os.access(binary, os.X_OK):
                raise RuntimeError(f"{binary} not found: build it (or set LAKECACHE / FUSE_CEILING / "
                                   "WIRE_CEILING / BUILD_DIR)")

    # ---- s3rver and uploads ----------------------------------------------------------------
    def s3rver_argv(self, data_dir, host, port):
        return ["node", "--openssl-legacy-provider", S3RVER_JS, "-d", data_dir, "-a", host,
                "-p", str(port), "--configure-bucket", self.bucket]

    def start_s3rver(self):
        for attempt in range(3):
            port = free_port()
            data = os.path.join(self.tmp, f"s3rver-{attempt}")
            os.makedirs(data)
            argv = self.s3rver_argv(data, "127.0.0.1", port)
            proc = self.spawn(argv, os.path.join(self.tmp, f"s3rver-{attempt}.log"))
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and proc.poll() is None and not accepts(port):
                time.sleep(0.1)
            if proc.poll() is None and accepts(port):
                self.port = port
                self.endpoint = f"http://127.0.0.1:{port}"
                return
            self.stop_tracked(proc)
        raise RuntimeError("s3rver did not start; see its log in " + self.tmp)

    def curl_auth(self):
        """curl's credentials as arguments: S3RVER's, or a netrc file (curl --user splits at the first ':')."""
        return ["--netrc-file", self.netrc] if self.netrc else ["--user", "S3RVER:S3RVER"]

    def curl_common(self):
        auth = f'netrc-file = "{self.netrc}"\n' if self.netrc else 'user = "S3RVER:S3RVER"\n'
        return ('output = "/dev/null"\naws-sigv4 = "aws:amz:us-east-1:s3"\n' + auth +
                'header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\nnoproxy = "*"\npath-as-is\n'
                'fail\nno-progress-meter\n')

    def run_curl_config(self, entries, parallel, prefix=()):
        """Runs one curl over a config of `entries` (each a block of curl config lines), its argv
        after `prefix` (e.g. nsenter into a namespace); returns the seconds it took."""
        cfg = os.path.join(self.tmp, f"curl-{time.monotonic_ns()}.config")
        with open(cfg, "w") as f:
            f.write("next\n".join(e + self.curl_common() for e in entries))
        start = time.perf_counter()
        r = subprocess.run([*prefix, "curl", "--parallel", "--parallel-max", str(parallel), "-K", cfg],
                           capture_output=True, text=True, env=self.env)
        seconds = time.perf_counter() - start
        if r.returncode != 0:
            raise RuntimeError(f"curl failed ({r.returncode}): {r.stderr[-2000:]}")
        return seconds

    def url(self, key):
        return f"{self.endpoint}/{self.bucket}/{key}"

    def upload(self, files, prefix=(), parallel=16):
        """Uploads [(key, local path)] to the bucket, `parallel` at a time (curl after `prefix`)."""
        entries = [f'url = "{self.url(key)}"\nupload-file = "{path}"\n' for key, path in files]
        self.run_curl_config(entries, parallel, prefix)

    # ---- lakecache servers (master, workers) --------------------------------------------------
    def write_cluster_config(self, path, namespace, policy=None):
        """A config with one namespace on the bucket at self.endpoint (S3RVER credentials)."""
        with open(path, "w") as f:
            f.write(f"namespaces:\n"
                    f"  {namespace}:\n"
                    f"    uri: s3://{self.bucket}/\n"
                    f"    endpoint: {self.endpoint}\n"
                    f"    path_style: true\n"
                    f"    access_key: S3RVER\n"
                    f"    secret_key: S3RVER\n"
                    + (f"cache:\n  policy: {policy}\n" if policy else ""))
        return path

    def start_server(self, role, config, args, prefix=(), name=None, timeout=30):
        """Starts `lakecache --config CONFIG ... ROLE ARGS --address-file T/NAME.addr` (role
        master or worker; after `prefix`), logging at info to T/NAME.log (NAME defaults to the
        role); returns the address it wrote."""
        name = name or role
        addr_file = os.path.join(self.tmp, f"{name}.addr")
        log_file = os.path.join(self.tmp, f"{name}.log")
        out_file = os.path.join(self.tmp, f"{name}.out")
        if os.path.exists(addr_file):  # a previous run of the same name
            os.unlink(addr_file)
        argv = [*prefix, LAKECACHE, "--config", config, "--log-level", "info", "--log-file", log_file,
                role, *args, "--address-file", addr_file]
        proc = self.spawn(argv, out_file, env=self.env)
        deadline = time.monotonic() + timeout
        while not os.path.exists(addr_file):  # written whole (renamed into place)
            if proc.poll() is not None or time.monotonic() > deadline:
                log(tail(out_file) + tail(log_file))
                raise RuntimeError(f"the {name} did not start (exit status {proc.poll()}); logs in {self.tmp}")
            time.sleep(0.05)
        with open(addr_file) as f:
            return f.read().strip()

    def cluster_status(self, master, prefix=()):
        """`lakecache cluster status --master MASTER --json` (after `prefix`), parsed."""
        r = subprocess.run([*prefix, LAKECACHE, "cluster", "status", "--master", master, "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"cluster status failed ({r.returncode}): {r.stderr[-1000:]}")
        return json.loads(r.stdout)

    def wait_workers(self, master, addresses, prefix=(), timeout=30):
        """Until the master lists every worker address as reachable."""
        deadline = time.monotonic() + timeout
        while True:
            workers = self.cluster_status(master, prefix)["workers"]
            listed = {w.get("address") for w in workers if w.get("reachable")}
            if set(addresses) <= listed:
                return workers
            if time.monotonic() > deadline:
                raise RuntimeError(f"the master at {master} does not list the workers {addresses}: {workers}")
            time.sleep(0.1)

    # ---- mounts ------------------------------------------------------------------------------
    def new_dir(self, name):
        self.mount_count += 1
        path = os.path.join(self.tmp, f"{name}-{self.mount_count}")
        os.makedirs(path)
        return path

    def wait_mounted(self, proc, mnt, what):
        deadline = time.monotonic() + 30
        while not is_mounted(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not mount at {mnt}")
            time.sleep(0.02)

    def start_mount(self, argv, mnt, what, out_path=None, env=None):
        """Starts a FUSE daemon that mounts at mnt (its output to out_path, default mnt.log) and
        waits for the mount; on failure logs the end of that output and raises."""
        out_path = out_path or mnt + ".log"
        proc = self.spawn(argv, out_path, mnt=mnt, env=env)
        try:
            self.wait_mounted(proc, mnt, what)
        except RuntimeError:
            log(tail(out_path))
            raise
        return proc

    def mount_lakecache(self, extra=()):
        """A standalone mount of the bucket: 1 GiB memory cache and a new 4 GiB cache dir."""
        mnt = self.new_dir("mnt")
        cache_dir = self.new_dir("cache")
        argv = [LAKECACHE, "mount", f"s3://{self.bucket}", mnt, "--endpoint", self.endpoint, "--path-style",
                "--log-level", "warn", "--mem-cache", MEM_CACHE, "--cache-dir", cache_dir,
                "--cache-size", "4GiB", *extra]
        proc = self.start_mount(argv, mnt, "lakecache", env=self.env)
        return proc, mnt

    # ---- measurements ----------------------------------------------------------------------
    def timed_reads(self, path, drop, label, repeat=None):
        """Reads path `repeat` (default --repeat) times, dropping the kernel's caches before each
        read when `drop`; returns the median MB/s."""
        results = []
        for _ in range(self.args.repeat if repeat is None else repeat):
            if drop:
                drop_caches()
            n, s = read_all(path)
            if n != self.size:
                raise RuntimeError(f"{label}: read {n} bytes of {path}, expected {self.size}")
            results.append(mbps(n, s))
        log(f"{label}: " + ", ".join(f"{r:.0f}" for r in results) + " MB/s")
        return statistics.median(results)


def format_table(header, rows):
    """Lines of a plain-text table: the first column left-aligned, the others right-aligned."""
    rows = [[str(c) for c in r] for r in [header] + list(rows)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def csv_line(cells):
    return ",".join(f'"{c}"' if ("," in str(c) or '"' in str(c)) else str(c) for c in cells)


def print_table(rows, csv, title):
    """rows: (name, value, baseline or None, goal or None, ">=" or "<=" or None). Prints the table
    (title first, unless csv); returns True when a goal failed."""
    out = []
    failed = False
    for name, value, base, goal, op in rows:
        ratio = value / base if base else None
        if goal is None:
            verdict = ""
        else:
            ok = ratio >= goal if op == ">=" else ratio <= goal
            verdict = "PASS" if ok else "FAIL"
            failed |= not ok
        out.append((name, f"{value:.0f}", f"{base:.0f}" if base else "-",
                    f"{ratio:.2f}" if ratio is not None else "-",
                    f"{op} {goal}" if goal is not None else "-", verdict))
    header = ("measurement", "MB/s", "baseline", "ratio", "goal", "result")
    if csv:
        print(csv_line(header))
        for r in out:
            print(csv_line(r))
    else:
        print(title)
        for line in format_table(header, out):
            print(line)
    return failed


def add_common_args(p, size_help="size of the big file/object (default 512MiB)"):
    p.add_argument("--size", type=parse_size, default=512 * MiB, help=size_help)
    p.add_argument("--csv", action="store_true", help="print the table as CSV")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is printed (default 3)")
    p.add_argument("--tmp-dir", default=None, help="where the temp dir goes (default $TMPDIR or /tmp); local disk")
    p.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (logs) after the run")


def replace_doc_section(path, begin, end, block, heading):
    """Replaces the text from the marker `begin` to the marker `end` (both included) of the file at
    path with block (which starts with begin and ends with end); a file without the markers gets
    `## heading` and block appended."""
    with open(path) as f:
        doc = f.read()
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + f"\n\n## {heading}\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(doc)


def plot_bars(png, title, groups, series, unit, log_scale=False):
    """A PNG of grouped horizontal bars: one group per label of `groups`, one bar per series
    [(name, [(median, low, high) or None for each group])], error bars from low to high. Uses
    matplotlib; an interpreter without it (a pyenv python first on PATH, say) hands the plot to
    /usr/bin/python3, where Debian's python3-matplotlib lives. Returns an error message, or None."""
    spec = dict(png=png, title=title, groups=groups, series=series, unit=unit, log_scale=log_scale)
    try:
        import matplotlib
    except ImportError:
        system = "/usr/bin/python3"
        if not os.access(system, os.X_OK) or os.path.realpath(system) == os.path.realpath(sys.executable):
            return "matplotlib is not installed (Debian: python3-matplotlib)"
        bench_dir = os.path.dirname(os.path.abspath(__file__))
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); sys.dont_write_bytecode = True; "
                "import lakebench; err = lakebench.plot_bars(**json.loads(sys.argv[2])); "
                "sys.exit(err or 0)")
        r = subprocess.run([system, "-c", code, bench_dir, json.dumps(spec)], capture_output=True, text=True)
        return None if r.returncode == 0 else (r.stderr.strip() or r.stdout.strip())[-500:]
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(groups)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    bar = 0.8 / max(1, max(sum(1 for _, vals in series if vals[i] is not None) for i in range(n)))
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.2 * sum(1 for _, vals in series for v in vals if v is not None)
                                    + 0.25 * n))
    labelled = set()
    for i in range(n):  # each group's bars side by side, only the series that have a value there
        present = [(j, name, vals[i]) for j, (name, vals) in enumerate(series) if vals[i] is not None]
        for pos, (j, name, v) in enumerate(present):
            y = i + (pos - (len(present) - 1) / 2) * bar
            ax.barh(y, v[0], height=bar, xerr=[[v[0] - v[1]], [v[2] - v[0]]], capsize=2,
                    color=colors[j % len(colors)], label=None if name in labelled else name)
            labelled.add(name)
    ax.set_yticks(range(n))
    ax.set_yticklabels(groups)
    ax.invert_yaxis()
    if log_scale:
        ax.set_xscale("log")
    ax.set_xlabel(unit)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return None


def run_main(bench, body):
    """Runs body(bench) -> failed (bool) with SIGTERM, SIGHUP and SIGINT turned into SystemExit,
    then always tears the bench down (signals ignored meanwhile); exits 1 when body says a goal
    failed, 0 otherwise. An exception from body propagates (traceback, exit 1) after teardown."""

    def on_signal(signum, _frame):
        log(f"{signal.Signals(signum).name}: stopping; cleaning up")
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        failed = body(bench)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        bench.teardown()
    sys.exit(1 if failed else 0)
