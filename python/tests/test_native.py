"""The native data path from Python against a real mount: lakecache.native, lakecache.fsspec and
lakecache.datasets, every byte read checked against SHA-256 digests. Standard library only (fsspec,
torch and crcmod tests are skipped without them).

LAKECACHE_TEST_MOUNT is a folder of a mounted lakecache namespace, LAKECACHE_TEST_FILES a JSON
object {path relative to that folder: SHA-256 hex} of files there (one or more, any sizes;
*.tfrecord files are parsed as TFRecord too). Without them every test is skipped. The extension
must be importable, e.g. from a build:

    PYTHONPATH=build/python LAKECACHE_TEST_MOUNT=/mnt/lake/ns/data \\
    LAKECACHE_TEST_FILES='{"a.bin": "<sha256>", "dir/b.tfrecord": "<sha256>"}' \\
        /usr/bin/python3 -m unittest discover -s python/tests -v
"""
import errno
import gc
import hashlib
import json
import os
import threading
import traceback
import unittest

MOUNT = os.environ.get("LAKECACHE_TEST_MOUNT")
FILES = json.loads(os.environ.get("LAKECACHE_TEST_FILES") or "{}")


def setUpModule():
    if not MOUNT or not FILES:
        raise unittest.SkipTest("LAKECACHE_TEST_MOUNT and LAKECACHE_TEST_FILES are not set")
    global native, _native
    # Set for a mount: a missing extension fails the tests, it does not skip them.
    from lakecache import _native, native


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def paths():
    """(absolute path, expected SHA-256) of every test file."""
    return [(os.path.join(MOUNT, relative), digest) for relative, digest in sorted(FILES.items())]


def missing_path():
    return os.path.join(MOUNT, "lakecache-test-no-such-file")


class NativeFileTest(unittest.TestCase):
    def test_read_gives_each_file(self):
        for path, digest in paths():
            with native.open(path) as f:
                data = f.read()
                self.assertEqual(f.read(), b"")
                self.assertEqual(f.tell(), len(data))
            self.assertEqual(sha256(data), digest, path)
            self.assertEqual(f.size, os.path.getsize(path), path)
            self.assertTrue(f.closed)

    def test_readinto_in_odd_pieces(self):
        for path, digest in paths():
            hashed, buffer = hashlib.sha256(), bytearray(65537)
            with native.open(path, buffering=0) as f:
                self.assertIsInstance(f, native.NativeFile)
                while True:
                    got = f.readinto(buffer)
                    if not got:
                        break
                    hashed.update(memoryview(buffer)[:got])
            self.assertEqual(hashed.hexdigest(), digest, path)

    def test_pread_seek_and_tell_agree_with_the_whole(self):
        for path, digest in paths():
            with native.open(path, buffering=0) as f:
                whole = f.pread(-1, 0)
                self.assertEqual(sha256(whole), digest, path)
                size = len(whole)
                for offset, length in ((0, 1), (size // 3, 4097), (max(0, size - 5), 100),
                                       (size, 10), (size + 1000, 10)):
                    self.assertEqual(f.pread(length, offset), whole[offset:offset + length])
                    target = bytearray(length)
                    got = f.preadinto(target, offset)
                    self.assertEqual(bytes(target[:got]), whole[offset:offset + length])
                self.assertEqual(f.tell(), 0)  # pread leaves the position
                self.assertEqual(f.seek(0, os.SEEK_END), size)
                self.assertEqual(f.seek(-min(size, 7), os.SEEK_END), size - min(size, 7))
                self.assertEqual(f.read(), whole[-min(size, 7):] if size else b"")
                f.seek(size // 2)
                self.assertEqual(f.read(10), whole[size // 2:size // 2 + 10])
                with self.assertRaises(OSError):
                    f.seek(-1)

    def test_text_mode(self):
        path, digest = paths()[0]
        with open(path, "rb") as fuse:
            expected = fuse.read().decode("latin-1")
        with native.open(path, "r", encoding="latin-1", newline="") as f:
            self.assertEqual(f.read(), expected)

    def test_views_are_the_bytes_in_place(self):
        for path, digest in paths():
            hashed = hashlib.sha256()
            kept = None
            with native.open(path) as f:
                offset = 0
                while True:
                    view = f.view(offset, 1 << 20)
                    self.assertTrue(view.readonly)
                    self.assertLessEqual(len(view), 1 << 20)
                    if not len(view):
                        break
                    hashed.update(view)
                    if kept is None:
                        kept = (offset, bytes(view), view)
                    offset += len(view)
                self.assertEqual(offset, f.size)
            self.assertEqual(hashed.hexdigest(), digest, path)
            if kept is not None:
                # A view outlives its file, and the owner lives as long as the memoryview.
                del f
                gc.collect()
                self.assertEqual(bytes(kept[2]), kept[1])
                kept[2].release()

    def test_iter_views_covers_a_range(self):
        for path, digest in paths():
            with open(path, "rb") as fuse:
                whole = fuse.read()
            self.assertEqual(b"".join(bytes(v) for v in native.iter_views(path)), whole)
            start, length = len(whole) // 4, len(whole) // 2
            with native.open(path) as f:
                pieces = [bytes(v) for v in native.iter_views(f, start, length)]
            self.assertEqual(b"".join(pieces), whole[start:start + length])

    def test_open_fd(self):
        path, digest = paths()[0]
        fd = os.open(path, os.O_RDONLY)
        try:
            with native.open(fd) as f:
                self.assertEqual(sha256(f.read()), digest)
            os.fstat(fd)  # still the caller's
        finally:
            os.close(fd)

    def test_a_client_opens_paths_relative_to_its_mountpoint(self):
        path, digest = paths()[0]
        with _native.Client(path) as client:
            mountpoint = client.mountpoint
            real = os.path.realpath(path)
            self.assertTrue(real.startswith(mountpoint.rstrip("/") + "/"), (real, mountpoint))
            with client.open(os.path.relpath(real, mountpoint)) as f:
                self.assertEqual(sha256(f.read()), digest)
            with client.open(path) as f:
                self.assertEqual(f.size, os.path.getsize(path))

    def test_threads_share_the_process_client(self):
        failures = []

        def read_all():
            try:
                for path, digest in paths():
                    with native.open(path) as f:
                        if sha256(f.read()) != digest:
                            failures.append("%s: wrong bytes" % path)
            except Exception:  # noqa: BLE001 - reported below
                failures.append(traceback.format_exc())

        threads = [threading.Thread(target=read_all) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(failures, [])

    def test_a_forked_child_reads_and_the_parent_goes_on(self):
        path, digest = paths()[0]
        inherited = native.open(path, buffering=0)
        self.addCleanup(inherited.close)
        inherited.pread(1, 0)  # the parent's client is attached and in use
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                os.close(reader)
                seen = {}
                for child_path, _ in paths():
                    with native.open(child_path) as f:
                        seen[child_path] = sha256(f.read())
                seen["inherited"] = sha256(inherited.pread(-1, 0))
                batch = native.read_many([(p, 0, -1) for p, _ in paths()])
                seen["batch"] = [sha256(r) for r in batch]
                os.write(writer, json.dumps(seen).encode())
                status = 0
            except BaseException:  # noqa: BLE001 - the child must not return into unittest
                traceback.print_exc()
            finally:
                os._exit(status)
        os.close(writer)
        with os.fdopen(reader, "rb") as pipe:
            report = pipe.read()
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the child failed (its stderr)")
        seen = json.loads(report)
        for child_path, expected in paths():
            self.assertEqual(seen[child_path], expected, child_path)
        self.assertEqual(seen["inherited"], digest)
        self.assertEqual(seen["batch"], [expected for _, expected in paths()])
        # The child's exit left the parent's session alone.
        self.assertEqual(sha256(inherited.pread(-1, 0)), digest)
        with native.open(path) as f:
            self.assertEqual(sha256(f.read()), digest)


class ReadManyTest(unittest.TestCase):
    def test_whole_files_by_path_in_one_batch(self):
        results = native.read_many([(path, 0, -1) for path, _ in paths()])
        self.assertEqual([sha256(r) for r in results], [digest for _, digest in paths()])
        for result in results:
            self.assertIsInstance(result, memoryview)
            self.assertFalse(result.readonly)

    def test_ranges_of_open_files_and_paths_mixed(self):
        items, expected, files = [], [], []
        for path, _ in paths():
            with open(path, "rb") as fuse:
                whole = fuse.read()
            f = native.open(path)
            files.append(f)
            size = len(whole)
            for offset, length in ((0, 10), (size // 2, size), (size, 5), (size // 3, -1)):
                items.append((f if len(items) % 2 else path, offset, length))
                expected.append(whole[offset:] if length == -1 else whole[offset:offset + length])
        try:
            self.assertEqual([bytes(r) for r in native.read_many(items)], expected)
        finally:
            for f in files:
                f.close()

    def test_a_missing_file_raises_after_the_batch_or_takes_its_place(self):
        path, digest = paths()[0]
        with self.assertRaises(FileNotFoundError) as raised:
            native.read_many([(path, 0, -1), (missing_path(), 0, -1)])
        self.assertEqual(raised.exception.errno, errno.ENOENT)
        self.assertIn("lakecache-test-no-such-file", str(raised.exception))
        first, error = native.read_many([(path, 0, -1), (missing_path(), 0, -1)],
                                        return_exceptions=True)
        self.assertEqual(sha256(first), digest)
        self.assertIsInstance(error, FileNotFoundError)

    def test_bad_items_are_refused(self):
        path, _ = paths()[0]
        with self.assertRaises(TypeError):
            native.read_many([(path, 0)])
        with self.assertRaises(ValueError):
            native.read_many([(path, -1, 10)])
        self.assertEqual(native.read_many([]), [])


class ErrorTest(unittest.TestCase):
    def test_a_missing_file_is_file_not_found(self):
        with self.assertRaises(FileNotFoundError) as raised:
            native.open(missing_path())
        self.assertEqual(raised.exception.errno, errno.ENOENT)
        client = native.client(missing_path())
        with self.assertRaises(OSError) as raised:
            client.open(missing_path())
        self.assertEqual(raised.exception.errno, errno.ENOENT)

    def test_write_modes_are_refused(self):
        path, _ = paths()[0]
        for mode in ("wb", "ab", "r+b", "w", "xb"):
            with self.assertRaises(NotImplementedError, msg=mode):
                native.open(path, mode)

    def test_a_closed_file_refuses_reads(self):
        path, _ = paths()[0]
        f = native.open(path, buffering=0)
        f.close()
        for call in (f.read, f.tell, lambda: f.pread(1, 0), lambda: f.view(0, 1)):
            with self.assertRaises(ValueError):
                call()


class FsspecTest(unittest.TestCase):
    def setUp(self):
        try:
            import fsspec
        except ImportError:
            self.skipTest("no fsspec (Debian: python3-fsspec)")
        import lakecache.fsspec
        self.fsspec = fsspec
        self.module = lakecache.fsspec

    def test_absolute_urls(self):
        fs = self.fsspec.filesystem("lakecache")
        self.assertIsInstance(fs, self.module.LakecacheFileSystem)
        for path, digest in paths():
            url = "lakecache://" + path
            self.assertEqual(sha256(fs.cat_file(url)), digest)
            self.assertEqual(fs.info(url)["size"], os.path.getsize(path))
            self.assertEqual(fs.info(url)["type"], "file")
            with self.fsspec.open(url, "rb") as f:
                self.assertEqual(sha256(f.read()), digest)
            listing = fs.ls(os.path.dirname(path), detail=False)
            self.assertIn(os.path.normpath(path), listing)
        self.assertFalse(fs.exists(missing_path()))
        with self.assertRaises(FileNotFoundError):
            fs.cat_file(missing_path())

    def test_a_root_and_ranges(self):
        fs = self.module.LakecacheFileSystem(root=MOUNT)
        names = sorted(FILES)
        contents = {}
        for name in names:
            with open(os.path.join(MOUNT, name), "rb") as fuse:
                contents[name] = fuse.read()
        starts = [0, 1, -3, None]
        ends = [5, None, None, -1]
        for name in names:
            got = fs.cat_ranges([name] * 4, starts, ends)
            self.assertEqual(got, [contents[name][s:e] for s, e in zip(starts, ends)])
            self.assertEqual(fs.cat_file("lakecache://" + name, 2, 9), contents[name][2:9])
        self.assertEqual(fs.cat(names), contents)
        got = fs.cat_ranges([names[0], "no-such-file"], 0, None)
        self.assertEqual(got[0], contents[names[0]])
        self.assertIsInstance(got[1], FileNotFoundError)
        top = names[0].split("/")[0]
        self.assertIn(top, fs.ls("", detail=False))

    def test_writes_are_refused(self):
        fs = self.module.LakecacheFileSystem(root=MOUNT)
        name = sorted(FILES)[0]
        with self.assertRaises(NotImplementedError):
            fs.open(name, "wb")
        with self.assertRaises(NotImplementedError):
            fs.rm(name)
        with self.assertRaises(NotImplementedError):
            fs.mkdir("lakecache-test-new-folder")


class TFRecordTest(unittest.TestCase):
    def test_shards_parse_and_match_their_digests(self):
        shards = [(p, d) for p, d in paths() if p.endswith(".tfrecord")]
        if not shards:
            self.skipTest("no *.tfrecord in LAKECACHE_TEST_FILES")
        try:
            import crcmod  # noqa: F401 - the CRC check needs it
            from lakecache import datasets
        except ImportError as error:
            self.skipTest("no torch or crcmod: %s" % error)
        for path, digest in shards:
            # A small read size: records cross reads, and larger ones are read directly.
            records = list(datasets.read_records(path, verify=True, sha256=digest,
                                                 read_bytes=64 << 10))
            self.assertEqual(list(datasets.read_records(path, verify=True, sha256=digest)),
                             records)
            # Records taken in place (copy=False), as batches take them: the same bytes.
            self.assertEqual([bytes(r) for r in datasets.read_records(path, sha256=digest,
                                                                      copy=False)], records)

    def test_pooled_image_batches_stay_intact_while_held(self):
        """collate_pooled makes an image folder's batches in the workers' reused buffers: every
        batch the main process holds keeps its bytes and labels."""
        root = os.path.join(MOUNT, "images")
        if not os.path.isdir(root):
            self.skipTest("no images folder in the test mount")
        try:
            from torch.utils.data import DataLoader
            from lakecache import datasets
        except ImportError as error:
            self.skipTest("no torch: %s" % error)
        dataset = datasets.ImageFolder(root, decode=False)
        expected = []
        for path, label in zip(dataset.paths, dataset.labels):
            with open(path, "rb") as f:
                expected.append((hashlib.sha256(f.read()).hexdigest()[:16], label))
        expected.sort()
        loader = DataLoader(dataset, batch_size=2, num_workers=2,
                            collate_fn=datasets.collate_pooled)
        kept, got = [], []
        for data, sizes, labels in loader:
            kept.append((data, bytes(data.numpy())))
            at = 0
            for n, label in zip(sizes.tolist(), labels.tolist()):
                got.append((hashlib.sha256(data[at:at + n].numpy()).hexdigest()[:16], label))
                at += n
        self.assertEqual(sorted(got), expected)
        self.assertGreater(len(kept), 2 * 8)
        changed = sum(bytes(d.numpy()) != then for d, then in kept)
        self.assertEqual(changed, 0, "%d of %d held batches were written over" % (changed, len(kept)))

    def test_batches_hold_every_record_in_order(self):
        shards = sorted(p for p, _ in paths() if p.endswith(".tfrecord"))
        if not shards:
            self.skipTest("no *.tfrecord in LAKECACHE_TEST_FILES")
        try:
            from lakecache import datasets
        except ImportError as error:
            self.skipTest("no torch: %s" % error)
        expected = [bytes(r) for s in shards for r in datasets.read_records(s, verify=False)]
        got = []
        for data, sizes in datasets.TFRecordShards(shards, verify=False, batch_size=7):
            self.assertLessEqual(len(sizes), 7)
            at = 0
            for n in sizes.tolist():
                got.append(bytes(data[at:at + n].numpy()))
                at += n
            self.assertEqual(at, data.numel())
        self.assertEqual(got, expected)

    def test_a_loaders_batches_stay_intact_while_anything_holds_them(self):
        """Workers fill their batch buffers again once the main process lets go: batches (or
        mere views of them) it still holds are never written over."""
        shards = sorted(p for p, _ in paths() if p.endswith(".tfrecord"))
        if not shards:
            self.skipTest("no *.tfrecord in LAKECACHE_TEST_FILES")
        try:
            from torch.utils.data import DataLoader
            from lakecache import datasets
        except ImportError as error:
            self.skipTest("no torch: %s" % error)

        def digest(b):
            return hashlib.sha256(b).hexdigest()[:16]

        expected = sorted(digest(r) for s in shards for r in datasets.read_records(s, verify=False))
        dataset = datasets.TFRecordShards(shards, verify=False, batch_size=3)
        loader = DataLoader(dataset, batch_size=None, num_workers=2)
        for hold in ("batches", "views", "nothing"):
            kept, got = [], []  # kept: (tensor held, its digest when it arrived)
            for data, sizes in loader:
                records, at = [], 0
                for n in sizes.tolist():
                    records.append(data[at:at + n])
                    at += n
                got += [digest(r.numpy()) for r in records]
                if hold == "batches":
                    kept.append((data, digest(data.numpy())))
                elif hold == "views":
                    kept.append((records[-1], got[-1]))  # the batch itself is let go
            self.assertEqual(sorted(got), expected, hold)
            changed = sum(digest(tensor.numpy()) != then for tensor, then in kept)
            self.assertEqual(changed, 0, "%s: %d of %d held were written over" %
                             (hold, changed, len(kept)))
            self.assertGreater(len(kept) if hold != "nothing" else len(got), 2 * 8)


if __name__ == "__main__":
    unittest.main()
