"""The native data path: read files of a lakecache mount from the node's memory, beside FUSE.

`open` gives a read-only file object, `read_many` reads a batch of (file, offset, length) in one
call, `iter_views` hands out a range as read-only memoryviews of the node's memory, without a copy.
Paths are as for the builtin open() (absolute, or relative to the working folder) and must lie in a
lakecache mount; the mount's server must serve the native path.

Underneath, each process attaches one lakecache._native.Client per mount, on first use: after
fork() (e.g. DataLoader workers) the child attaches its own. The library serialises the calls on a
client, so threads of a process read one at a time; for parallel reads give each thread its own
lakecache._native.Client.

The extension lakecache._native (the C library liblakecache_native) comes from the CMake build, not
from pip: `make` builds it into build/python/lakecache/ beside links to these files, so
`PYTHONPATH=build/python` imports both (python/README.md).
"""
import io
import os
import threading

from lakecache.hint import mount_root

try:
    from lakecache import _native
except ImportError as error:
    raise ImportError(
        "lakecache.native needs the extension lakecache._native (%s). It is built by the CMake "
        "build (`make`, or `ninja -C build lakecache_python`) into build/python/lakecache/: run "
        "with PYTHONPATH=build/python (python/README.md)" % error) from error

Client = _native.Client
File = _native.File

# A native read is a round trip to the mount's server: read ahead in large pieces.
DEFAULT_BUFFER_SIZE = 1 << 20

_lock = threading.Lock()
_pid = os.getpid()
# mount_root()'s root (or, below no control file, the folder) -> Client; mountpoint -> Client.
_client_of_root = {}
_client_of_mount = {}


def _forget_clients():
    """After fork(): the parent's clients are left alone (a child never detaches them)."""
    global _lock, _pid
    _lock = threading.Lock()  # another thread may have held it at the fork
    _client_of_root.clear()
    _client_of_mount.clear()
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forget_clients)


def _absolute(path):
    """path (str, bytes or os.PathLike) as an absolute str (undecodable bytes kept, os.fsdecode)."""
    return os.path.abspath(os.fsdecode(path))


def client(path):
    """This process's Client for the mount that holds path, attached on first use."""
    path = _absolute(path)
    found = mount_root(path)
    key = found[0] if found else os.path.dirname(path)
    if _pid != os.getpid():  # a fork that register_at_fork did not see (fork() from C)
        _forget_clients()
    with _lock:
        attached = _client_of_root.get(key)
        if attached is None or attached.closed:
            try:
                attached = Client(key)
            except OSError as error:  # named after the path asked for, not its folder
                raise OSError(error.errno, error.strerror, path) from None
            existing = _client_of_mount.get(attached.mountpoint)
            if existing is not None and not existing.closed:
                attached.close()
                attached = existing
            _client_of_mount[attached.mountpoint] = attached
            _client_of_root[key] = attached
    return attached


def _native_file(target):
    """The lakecache._native.File under a file of this module, or None for anything else."""
    if isinstance(target, File):
        return target
    if isinstance(target, io.BufferedReader):
        target = target.raw
    if isinstance(target, NativeFile):
        return target.native
    return None


class NativeFile(io.RawIOBase):
    """A file of a lakecache mount read through the native path; read-only, seekable.

    Beside io.RawIOBase: size (of the version opened: fixed), pread/preadinto (at an offset,
    leaving the position), view (bytes in place). fileno() is unsupported: there is no descriptor.
    """

    def __init__(self, native, name=None):
        super().__init__()
        self.native = native
        self.name = native.name if name is None else name
        self.mode = "rb"

    @property
    def size(self):
        return self.native.size

    def readable(self):
        self._checkClosed()
        return True

    def seekable(self):
        self._checkClosed()
        return True

    def readinto(self, buffer):
        return self.native.readinto(buffer)

    def read(self, size=-1):
        return self.native.read(-1 if size is None else size)

    def readall(self):
        return self.native.read(-1)

    def seek(self, offset, whence=io.SEEK_SET):
        return self.native.seek(offset, whence)

    def tell(self):
        return self.native.tell()

    def pread(self, size, offset):
        """Up to size bytes at offset (size < 0: to the end), as bytes; the position stays."""
        return self.native.pread(size, offset)

    def preadinto(self, buffer, offset):
        """Fills buffer from offset: the bytes read, fewer only at the end; the position stays."""
        return self.native.preadinto(buffer, offset)

    def view(self, offset=0, length=-1):
        """Up to length bytes at offset in place, a read-only memoryview: see iter_views."""
        return self.native.view(offset, length)

    def close(self):
        if not self.closed:
            try:
                self.native.close()
            finally:
                super().close()

    def __repr__(self):
        return "<lakecache.native.NativeFile name=%r size=%d%s>" % (
            self.name, self.native.size, " closed" if self.closed else "")


class NativeBufferedReader(io.BufferedReader):
    """io.BufferedReader over a NativeFile, with its size, pread and view."""

    @property
    def size(self):
        return self.raw.size

    def pread(self, size, offset):
        return self.raw.pread(size, offset)

    def preadinto(self, buffer, offset):
        return self.raw.preadinto(buffer, offset)

    def view(self, offset=0, length=-1):
        return self.raw.view(offset, length)


def _check_mode(mode):
    if not isinstance(mode, str) or set(mode) - set("rbtwax+") or mode.count("r") > 1:
        raise ValueError("invalid mode: %r" % (mode,))
    if set(mode) & set("wax+"):
        raise NotImplementedError(
            "lakecache.native reads only (mode %r): write through the mount with the builtin "
            "open()" % (mode,))
    if "r" not in mode or ("b" in mode and "t" in mode):
        raise ValueError("invalid mode: %r" % (mode,))


def open(file, mode="rb", buffering=-1, encoding=None, errors=None, newline=None):
    """Opens a file of a lakecache mount for reading, as the builtin open() does.

    file is a path or a descriptor open for reading through the mount (which stays the caller's).
    mode is "rb" (the default) or "r"/"rt" for text. buffering 0 gives the NativeFile itself,
    otherwise a NativeBufferedReader with a buffer of buffering bytes (-1: DEFAULT_BUFFER_SIZE).
    A missing file raises FileNotFoundError, like any OSError of the mount with its errno.
    """
    _check_mode(mode)
    binary = "b" in mode
    if binary and (encoding is not None or errors is not None or newline is not None):
        raise ValueError("binary mode does not take an encoding, errors or newline argument")
    if isinstance(file, int):
        native = client(os.readlink("/proc/self/fd/%d" % file)).open_fd(file)
        name = file
    else:
        name = file
        path = _absolute(file)
        native = client(path).open(path)
    raw = NativeFile(native, name)
    if buffering == 0:
        if not binary:
            raw.close()
            raise ValueError("can't have unbuffered text I/O")
        return raw
    buffered = NativeBufferedReader(raw, DEFAULT_BUFFER_SIZE if buffering in (-1, 1) else buffering)
    if binary:
        return buffered
    text = io.TextIOWrapper(buffered, encoding, errors, newline)
    text.mode = mode
    return text


def read_many(items, return_exceptions=False):
    """Reads a batch: one call per mount whatever the number of items.

    items are (path or file of this module, offset, length), length -1 (or None) for the rest of
    the file. Returns one writable memoryview per item, in order (shorter at the end of a file):
    memory of its own, freed with the memoryview. A failed item raises its OSError, naming its path,
    once every read is done; with return_exceptions=True the error takes its place in the list.
    """
    items = list(items)
    results = [None] * len(items)
    groups = {}  # id(client) -> (client, positions, items)
    for position, item in enumerate(items):
        try:
            target, offset, length = item
        except (TypeError, ValueError):
            raise TypeError("read_many: each item is (path or file, offset, length), not %r" %
                            (item,)) from None
        native = _native_file(target)
        try:
            if native is not None:
                owner, target = native.client, native
            else:
                target = _absolute(target)
                owner = client(target)
        except OSError as error:
            results[position] = error
            continue
        group = groups.setdefault(id(owner), (owner, [], []))
        group[1].append(position)
        group[2].append((target, offset, -1 if length is None else length))
    for owner, positions, batch in groups.values():
        for position, result in zip(positions, owner.read_many(batch, return_exceptions=True)):
            results[position] = result
    if not return_exceptions:
        for result in results:
            if isinstance(result, BaseException):
                raise result
    return results


def iter_views(file, offset=0, length=-1):
    """Yields read-only memoryviews of the node's memory covering length bytes of file at offset
    (length -1: to the end), in order, without a copy; file is a path or a file of this module.

    Each view is memory the session holds anchored until the memoryview (and every slice of it) is
    gone or released, and the session may anchor only so much at once: use each view and let it
    go (`with view:`) before taking many more. A path is opened for the iteration only.
    """
    native = _native_file(file)
    opened = None
    if native is None:
        path = _absolute(file)
        native = opened = client(path).open(path)
    try:
        end = None if length is None or length < 0 else offset + length
        while end is None or offset < end:
            view = native.view(offset, -1 if end is None else end - offset)
            if not len(view):
                return
            offset += len(view)
            yield view
    finally:
        if opened is not None:
            opened.close()
