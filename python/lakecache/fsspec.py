"""fsspec for a lakecache mount: protocol "lakecache", reading through the native data path.

    fs = fsspec.filesystem("lakecache")                   # paths are the mount's local paths
    fs.cat_file("lakecache:///mnt/lake/ns/dir/file")
    fs = fsspec.filesystem("lakecache", root="/mnt/lake")  # paths are relative to root
    with fs.open("lakecache://ns/dir/file") as f: ...

Without root, paths are absolute local paths (a relative one is an error: "lakecache://x/y" is
x/y, not /x/y). With root, every path is relative to it and leading slashes are ignored, so
"lakecache:///ns/f" is root/ns/f; listings name entries the same way. Listing and metadata come
from the mount (os.scandir, os.stat); reads from lakecache.native: open() gives a native file,
cat_file/cat_ranges/cat read a whole batch in one native call. The file system is read-only: write
modes and every change raise NotImplementedError (write through the mount itself).

Importing this module registers the protocol with fsspec; an installed package (pip install
./python) also declares it as an fsspec.specs entry point, so fsspec finds it without the import.
"""
import datetime
import os
import posixpath
import stat

import fsspec
from fsspec.spec import AbstractFileSystem

from lakecache import native

READ_ONLY = ("lakecache: the native data path is read-only: write through the mount "
             "(its local path) instead")


class LakecacheFileSystem(AbstractFileSystem):
    """A lakecache mount (or a folder of one: root) as an fsspec file system, read-only."""

    protocol = "lakecache"
    root_marker = "/"

    def __init__(self, root=None, *args, **storage_options):
        super().__init__(*args, **storage_options)
        if root is not None:
            root = os.path.abspath(os.fsdecode(root))
        self.root = root

    # ---- paths: fsspec's (relative to root, or absolute) <-> local ---------------------------

    def _path(self, path):
        """A path as this file system names it: no protocol, normalised."""
        path = self._strip_protocol(path)
        if self.root is not None:
            path = posixpath.normpath("/" + path).lstrip("/")
            return "" if path == "." else path
        if not path.startswith("/"):
            raise ValueError("lakecache: %r is not absolute: give lakecache:///<mount>/<path>, or "
                             "a root (LakecacheFileSystem(root=...))" % path)
        return posixpath.normpath(path)

    def _local(self, path):
        """The local path in the mount of a path of this file system."""
        path = self._path(path)
        if self.root is None:
            return path
        return os.path.join(self.root, path) if path else self.root

    def _join(self, folder, name):
        return posixpath.join(folder, name) if folder else name

    # ---- listing and metadata -----------------------------------------------------------------

    def _info(self, name, st):
        if stat.S_ISDIR(st.st_mode):
            kind = "directory"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
        else:
            kind = "other"
        return {"name": name, "size": st.st_size, "type": kind, "mtime": st.st_mtime,
                "mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid, "nlink": st.st_nlink}

    def info(self, path, **kwargs):
        name = self._path(path)
        try:
            st = os.stat(self._local(name))
        except FileNotFoundError:
            raise FileNotFoundError(path) from None
        return self._info(name, st)

    def ls(self, path, detail=True, **kwargs):
        name = self._path(path)
        local = self._local(name)
        try:
            entries = list(os.scandir(local))
        except NotADirectoryError:
            listing = [self.info(name)]
        except FileNotFoundError:
            raise FileNotFoundError(path) from None
        else:
            listing = []
            for entry in entries:
                try:
                    st = entry.stat()
                except OSError:  # e.g. a dangling link: its own metadata
                    st = entry.stat(follow_symlinks=False)
                listing.append(self._info(self._join(name, entry.name), st))
        return listing if detail else [entry["name"] for entry in listing]

    def exists(self, path, **kwargs):
        return os.path.exists(self._local(path))

    def isdir(self, path):
        return os.path.isdir(self._local(path))

    def isfile(self, path):
        return os.path.isfile(self._local(path))

    def size(self, path):
        return os.stat(self._local(path)).st_size

    def modified(self, path):
        return datetime.datetime.fromtimestamp(os.stat(self._local(path)).st_mtime,
                                               tz=datetime.timezone.utc)

    # ---- reading ------------------------------------------------------------------------------

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        if mode != "rb":
            raise NotImplementedError("%s (%s, mode %r)" % (READ_ONLY, path, mode))
        return native.open(self._local(path), "rb", -1 if block_size is None else block_size)

    def cat_file(self, path, start=None, end=None, **kwargs):
        return self.cat_ranges([path], [start], [end], on_error="raise")[0]

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """The bytes of each (path, start, end) as a list, read in one batch; start and end as
        in slices (None: the file's start or end; negative: from the end). on_error "return"
        puts a failed range's exception in its place, "raise" raises the first."""
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        starts = starts if isinstance(starts, list) else [starts] * len(paths)
        ends = ends if isinstance(ends, list) else [ends] * len(paths)
        if len(starts) != len(paths) or len(ends) != len(paths):
            raise ValueError("paths, starts and ends must be as long")
        results = [None] * len(paths)
        items, positions = [], []
        for position, (path, start, end) in enumerate(zip(paths, starts, ends)):
            try:
                local = self._local(path)
                items.append((local,) + _range(local, start, end))
                positions.append(position)
            except (OSError, ValueError) as error:
                results[position] = error
        for position, data in zip(positions, native.read_many(items, return_exceptions=True)):
            results[position] = data if isinstance(data, BaseException) else data.tobytes()
        if on_error == "raise":
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        return results

    def cat(self, path, recursive=False, on_error="raise", **kwargs):
        """The bytes of a file, or {path: bytes} of several (a list, a glob, recursive), the
        files read in one batch. on_error: "raise", "omit" (leave failed files out) or "return"
        (their exceptions as values)."""
        paths = self.expand_path(path, recursive=recursive)
        if len(paths) == 1 and not isinstance(path, list) and paths[0] == self._path(path):
            return self.cat_file(paths[0])
        files = [p for p in paths if not self.isdir(p)]
        out = {}
        for name, data in zip(files, self.cat_ranges(files, None, None, on_error="return")):
            if isinstance(data, BaseException):
                if on_error == "raise":
                    raise data
                if on_error == "omit":
                    continue
            out[name] = data
        return out

    # ---- read-only ----------------------------------------------------------------------------

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError(READ_ONLY)

    mkdir = makedirs = mkdirs = rmdir = _rm = rm_file = rm = cp_file = mv = touch = _refuse
    pipe_file = put_file = _refuse


def _range(local, start, end):
    """(offset, length) of the slice start:end of the file at local, which is stat'ed only for a
    negative bound; length -1 is "to the end"."""
    size = None
    if (start is not None and start < 0) or (end is not None and end < 0):
        size = os.stat(local).st_size
    offset = 0 if start is None else (max(0, size + start) if start < 0 else start)
    if end is None:
        return offset, -1
    if end < 0:
        end = size + end
    return offset, max(0, end - offset)


fsspec.register_implementation("lakecache", LakecacheFileSystem, clobber=True)
