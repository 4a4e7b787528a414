"""Shared pieces of the lakecache benchmark scripts (bench/read_path, bench/cluster_read).

A script imports this module (its own folder on sys.path), subclasses BenchBase for its
measurements and calls run_main(), which installs the signal handlers and always tears down: every
process a bench started (BenchBase.track) is stopped, its mount unmounted, and the temp dir removed
(unless --keep-tmp), on success, failure, SIGINT, SIGTERM or SIGHUP.

Binaries: $LAKECACHE (default $BUILD_DIR/lakecache) and $FUSE_CEILING (default
$BUILD_DIR/bench/fuse_ceiling), BUILD_DIR defaulting to build/ of the repo; $S3RVER_JS (default
node_modules/s3rver/bin/s3rver.js of the repo).
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_DIR = os.path.join(REPO, os.environ.get("BUILD_DIR", "build"))
LAKECACHE = os.environ.get("LAKECACHE", os.path.join(BUILD_DIR, "lakecache"))
FUSE_CEILING = os.environ.get("FUSE_CEILING", os.path.join(BUILD_DIR, "bench", "fuse_ceiling"))
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


def parse_size(text):
    units = {"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": MiB, "MiB": MiB, "G": 1 << 30, "GiB": 1 << 30}
    num = text.rstrip("KMGiB")
    unit = text[len(num):]
    if unit not in units or not num:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 512MiB)")
    value = int(float(num) * units[unit])
    if value < 8 * MiB or value % MiB:
        raise argparse.ArgumentTypeError("size must be a whole number of MiB, at least 8MiB")
    return value


def require_root(why="drop_caches and FUSE mounts"):
    if os.geteuid() != 0:
        sys.exit(f"{PROG}: needs root ({why})")


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


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


def write_pattern_file(path, size, seed):
    """Incompressible bytes, different for each seed and each MiB."""
    chunk = bytearray(os.urandom(MiB))
    with open(path, "wb") as f:
        for i in range(size // MiB):
            chunk[0:16] = seed.to_bytes(8, "little") + i.to_bytes(8, "little")
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


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
        self.env = dict(os.environ)
        for name in ("AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            self.env.pop(name, None)
        self.env["AWS_ACCESS_KEY_ID"] = "S3RVER"
        self.env["AWS_SECRET_ACCESS_KEY"] = "S3RVER"
        self.mount_count = 0

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
        if self.args.keep_tmp:
            log(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def track(self, proc, mnt=None):
        self.procs.append((proc, mnt))
        return proc

    def stop_tracked(self, proc):
        for i, (p, mnt) in enumerate(self.procs):
            if p is proc:
                self.stop(p, mnt)
                del self.procs[i]
                return

    def spawn(self, argv, out_path, mnt=None, env=None):
        """Starts argv with stdout and stderr to out_path, tracked for teardown."""
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env)
        return self.track(proc, mnt)

    def check_binaries(self, *binaries):
        for binary in binaries:
            if not os.access(binary, os.X_OK):
                raise RuntimeError(f"{binary} not found: build it (or set LAKECACHE / FUSE_CEILING / BUILD_DIR)")

    # ---- s3rver and uploads ----------------------------------------------------------------
    def start_s3rver(self):
        for attempt in range(3):
            port = free_port()
            data = os.path.join(self.tmp, f"s3rver-{attempt}")
            os.makedirs(data)
            argv = ["node", "--openssl-legacy-provider", S3RVER_JS, "-d", data, "-a", "127.0.0.1",
                    "-p", str(port), "--configure-bucket", self.bucket]
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

    def curl_common(self):
        return ('output = "/dev/null"\naws-sigv4 = "aws:amz:us-east-1:s3"\nuser = "S3RVER:S3RVER"\n'
                'header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\nnoproxy = "*"\npath-as-is\n'
                'fail\nno-progress-meter\n')

    def run_curl_config(self, entries, parallel):
        """Runs one curl over a config of `entries` (each a block of curl config lines); returns
        the seconds it took."""
        cfg = os.path.join(self.tmp, f"curl-{time.monotonic_ns()}.config")
        with open(cfg, "w") as f:
            f.write("next\n".join(e + self.curl_common() for e in entries))
        start = time.perf_counter()
        r = subprocess.run(["curl", "--parallel", "--parallel-max", str(parallel), "-K", cfg],
                           capture_output=True, text=True, env=self.env)
        seconds = time.perf_counter() - start
        if r.returncode != 0:
            raise RuntimeError(f"curl failed ({r.returncode}): {r.stderr[-2000:]}")
        return seconds

    def url(self, key):
        return f"{self.endpoint}/{self.bucket}/{key}"

    def upload(self, files):
        """Uploads [(key, local path)] to the bucket, 16 at a time."""
        entries = [f'url = "{self.url(key)}"\nupload-file = "{path}"\n' for key, path in files]
        self.run_curl_config(entries, 16)

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
        print(",".join(header))
        for r in out:
            print(",".join(f'"{c}"' if "," in c else c for c in r))
    else:
        print(title)
        widths = [max(len(str(r[i])) for r in [header] + out) for i in range(len(header))]
        for r in [header] + out:
            print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                            for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return failed


def add_common_args(p, size_help="size of the big file/object (default 512MiB)"):
    p.add_argument("--size", type=parse_size, default=512 * MiB, help=size_help)
    p.add_argument("--csv", action="store_true", help="print the table as CSV")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is printed (default 3)")
    p.add_argument("--tmp-dir", default=None, help="where the temp dir goes (default $TMPDIR or /tmp); local disk")
    p.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (logs) after the run")


def run_main(bench, body):
    """Runs body(bench) -> failed (bool) with SIGTERM, SIGHUP and SIGINT turned into SystemExit,
    then always tears the bench down (signals ignored meanwhile); exits 1 when body says a goal
    failed, 0 otherwise. An exception from body propagates (traceback, exit 1) after teardown."""

    def on_signal(signum, _frame):
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
