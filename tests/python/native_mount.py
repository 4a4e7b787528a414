#!/usr/bin/python3
"""The Python package's native data path against a real mount (CTest: python.NativePackage...).

Starts s3rver on a free loopback port, uploads a small dataset of TFRecord shards (of 9 MiB, so
that records straddle blocks) and image files (examples/pytorch/make_dataset.py) and a few odd
files (empty, one byte, several blocks), mounts the bucket with `lakecache mount`, then runs,
with PYTHONPATH=BUILD/python:
- python/tests/test_native.py (lakecache.native, .fsspec, .datasets; every byte checked against
  SHA-256), with LAKECACHE_TEST_MOUNT and LAKECACHE_TEST_FILES set;
- examples/pytorch/train.py --native over the shards and over the images, every sample verified
  against the dataset's manifest, with 2 loader workers.
Tears everything down, also on failure. Needs root (FUSE). Usage: native_mount.py BUILD_DIR
"""
import hashlib
import json
import os
import subprocess
import sys
import types

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.dont_write_bytecode = True
import lakebench  # noqa: E402


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build"))
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("skipped: needs root and /dev/fuse")
        return 0
    lakebench.LAKECACHE = os.path.join(build, "lakecache")
    args = types.SimpleNamespace(size=0, repeat=1, tmp_dir=None, keep_tmp=False)
    bench = lakebench.BenchBase(args, "lakecache-native-py-")
    try:
        return run(bench, build)
    finally:
        bench.teardown()


def run(bench, build):
    data = os.path.join(bench.tmp, "data")
    make = os.path.join(REPO, "examples", "pytorch", "make_dataset.py")
    py = "/usr/bin/python3"
    subprocess.run([py, make, os.path.join(data, "shards"), "--kind", "tfrecord", "--shards", "3",
                    "--shard-size", "9MiB", "--record-size", "100KiB"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([py, make, os.path.join(data, "images"), "--kind", "images", "--classes", "3",
                    "--files", "40", "--max-size", "60KiB"], check=True, stdout=subprocess.DEVNULL)
    odd = os.path.join(data, "odd")
    os.makedirs(odd)
    for name, size in (("empty.bin", 0), ("one.bin", 1), ("blocks.bin", 9 * 1024 * 1024 + 17)):
        with open(os.path.join(odd, name), "wb") as f:
            f.write(os.urandom(size))
    files = []
    for folder, _, names in os.walk(data):
        for name in names:
            path = os.path.join(folder, name)
            files.append((os.path.relpath(path, data), path))
    bench.start_s3rver()
    bench.upload(files)
    _, mnt = bench.mount_lakecache()
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), PYTHONDONTWRITEBYTECODE="1",
               LAKECACHE_TEST_MOUNT=mnt,
               LAKECACHE_TEST_FILES=json.dumps({rel: sha256(path) for rel, path in files
                                                if not rel.endswith("MANIFEST.sha256")}))
    failed = 0
    r = subprocess.run([py, "-m", "unittest", "discover", "-s", os.path.join(REPO, "python", "tests"),
                        "-v"], env=env)
    failed |= r.returncode != 0
    train = os.path.join(REPO, "examples", "pytorch", "train.py")
    for kind, folder in (("tfrecord", "shards"), ("images", "images")):
        root = os.path.join(mnt, folder)
        r = subprocess.run([py, train, "--native", "--dataset", kind, "--root", root, "--workers", "2",
                            "--batch-size", "8", "--epochs", "2", "--shuffle",
                            "--verify", os.path.join(root, "MANIFEST.sha256"), "--json"],
                           env=env, capture_output=True, text=True)
        report = json.loads(r.stdout) if r.returncode == 0 else None
        ok = report is not None and report.get("verified")
        print(f"train.py --native --dataset {kind}: {'verified' if ok else 'FAILED'}"
              + ("" if ok else f"\n{r.stdout[-2000:]}{r.stderr[-4000:]}"))
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
