"""Shared by the tests: the import path (python/, examples/pytorch/, scripts/) and fake mounts."""
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
for folder in ("scripts", "examples/pytorch", "python"):
    sys.path.insert(0, os.path.join(REPO, folder))


def make_fake_mount(root):
    """Makes root look like a lakecache mount's root: root/.lakecache/prefetch, a regular file
    ("w" replaces its lines, "a" appends, as the mount does for one process). Returns root."""
    os.makedirs(os.path.join(root, ".lakecache"), exist_ok=True)
    open(os.path.join(root, ".lakecache", "prefetch"), "w").close()
    return root


def hinted(root):
    """The lines written to the fake mount's control file."""
    with open(os.path.join(root, ".lakecache", "prefetch"), encoding="utf-8") as f:
        return f.read().splitlines()


def write_file(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path
