"""Order hints: tell a lakecache mount which files this process will read next, in order.

A mount serves the control file `<mount root>/.lakecache/prefetch`. Writing paths to it, one per
line and relative to the mount root, makes the mount prefetch those files in that order within its
memory budget. Opening it with "w" replaces the writing process's order, with "a" extends it. The
mount matches reads by file, not by process, so DataLoader workers profit from the main process's
hint. A hint never changes the bytes read, and giving one never fails the caller: an error on a
control file is logged once and ignored.

Thread safety: the functions may be called from several threads; the folder cache tolerates races.
"""
import logging
import os

CONTROL_FILE = os.path.join(".lakecache", "prefetch")
# Large enough that millions of paths go to the mount in few writes.
WRITE_BUFFER_BYTES = 1 << 20

_log = logging.getLogger("lakecache")
# Folder, as given or real -> (mount root, the folder relative to it + "/", or "" for the root) or
# None. Lives as long as the process: a mount made over a folder already looked up is not seen.
_root_of_folder = {}
_warned_roots = set()


def mount_root(path):
    """Returns (mount root, path relative to it) for the lakecache mount above path, else None.

    The root is the nearest ancestor folder A of path (not path itself) such that A/CONTROL_FILE
    exists; symbolic links in the folder are resolved. Results are cached per folder, so hinting
    millions of files checks each folder once, and an absolute path costs a dictionary lookup.
    """
    if not isinstance(path, str):
        path = os.fsdecode(path)
    folder, _, name = path.rpartition("/")
    if not path.startswith("/") or name in ("", ".", ".."):
        folder, name = os.path.split(os.path.abspath(path))
        if not name:
            return None
    try:
        found = _root_of_folder[folder]
    except KeyError:
        found = _root_of_folder[folder] = _root_of_real_folder(os.path.realpath(folder or "/"))
    if found is None:
        return None
    root, prefix = found
    return root, prefix + name


def _root_of_real_folder(folder):
    """(mount root, folder relative to it with a trailing '/', or "") or None; folder is real."""
    if folder in _root_of_folder:
        return _root_of_folder[folder]
    if os.path.exists(os.path.join(folder, CONTROL_FILE)):
        found = (folder, "")
    else:
        parent = os.path.dirname(folder)
        above = None if parent == folder else _root_of_real_folder(parent)
        found = None if above is None else (above[0], above[1] + os.path.basename(folder) + "/")
    _root_of_folder[folder] = found
    return found


def write_order(paths, append=False):
    """Hints that paths will be read in this order; returns how many paths were hinted.

    Paths are grouped by mount root, keeping their order within each, and streamed to that
    root's control file ("a" if append, else "w"). Paths outside lakecache mounts, and names the
    control file cannot carry (a newline, a leading '#'), are skipped. A root whose control file
    fails (e.g. an older mount without one) is logged once and its paths are not counted.
    """
    controls = {}  # mount root -> open control file, None once it failed
    counts = {}
    try:
        for path in paths:
            found = mount_root(path)
            if found is None or "\n" in found[1] or found[1].startswith("#"):
                continue
            root, relative = found
            if root not in controls:
                controls[root] = _open_control(root, append)
                counts[root] = 0
            control = controls[root]
            if control is None:
                continue
            try:
                control.write(relative + "\n")
                counts[root] += 1
            except OSError as error:
                _warn_once(root, error)
                _close(root, control)
                controls[root] = None
    finally:
        for root, control in controls.items():
            if control is not None and not _close(root, control):
                controls[root] = None
    return sum(counts[root] for root, control in controls.items() if control is not None)


def _open_control(root, append):
    try:
        # surrogateescape: a file name that is not UTF-8 reaches the mount as its original bytes.
        return open(os.path.join(root, CONTROL_FILE), "a" if append else "w", encoding="utf-8",
                    errors="surrogateescape", newline="\n", buffering=WRITE_BUFFER_BYTES)
    except OSError as error:
        _warn_once(root, error)
        return None


def _close(root, control):
    """Closes a control file, which writes what is buffered; False (logged) if that fails."""
    try:
        control.close()
        return True
    except OSError as error:
        _warn_once(root, error)
        return False


def _warn_once(root, error):
    if root not in _warned_roots:
        _warned_roots.add(root)
        _log.warning("lakecache: no order hint for the mount at %s (%s); reads are unaffected",
                     root, error)


class OrderHintSampler:
    """Wraps a sampler (any iterable of indices) and hints the order of the files it will yield.

    Each iteration lists the wrapped sampler's indices for the epoch, hints path_of(index) for
    them, then yields them unchanged. With window=None the whole epoch is hinted at once; with
    window=N the first N are hinted with a new order, and the next N are appended when iteration
    reaches the middle of the previous N, so the mount never holds the whole epoch's list.
    len() and set_epoch() go to the wrapped sampler (e.g. DistributedSampler). Used as a
    DataLoader's sampler it runs in the main process while workers read: the mount matches by file.
    """

    def __init__(self, sampler, path_of, window=None):
        if window is not None and window < 1:
            raise ValueError("window must be at least 1, or None for the whole epoch")
        self.sampler = sampler
        self.path_of = path_of
        self.window = window

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        order = list(self.sampler)
        if self.window is None:
            write_order(map(self.path_of, order))
            yield from order
            return
        window = self.window
        write_order(map(self.path_of, order[:window]))
        for position, index in enumerate(order):
            if position % window == window // 2:
                next_window = position - window // 2 + window
                write_order(map(self.path_of, order[next_window:next_window + window]), append=True)
            yield index
