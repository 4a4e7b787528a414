"""PyTorch datasets that read a lakecache mount through the native data path (lakecache.native).

TFRecordShards streams the records of TFRecord shards, each shard read in place (block views);
ImageFolder reads one file per sample, a DataLoader batch in one native call (read_many, through
__getitems__). They follow examples/pytorch/datasets.py, their FUSE counterparts: samples are uint8
tensors (ImageFolder: PIL images with decode), shards and files can be checked against SHA-256
digests (`digests`: path -> hex digest) and can give the mount their order of reads (`hint`, or
lakecache.OrderHintSampler). Importing this module imports torch; lakecache itself does not.
"""
import hashlib
import io
import os
import struct

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from lakecache import native
from lakecache._batches import Batches, collate_pooled  # noqa: F401 - collate_pooled: for loaders
from lakecache.hint import write_order

# A record larger than this is read into its own buffer directly.
READ_BYTES = 8 << 20
_HEADER = struct.Struct("<QI")  # length, masked CRC32C of the length's 8 bytes
_CRC = struct.Struct("<I")  # a masked CRC32C; the record's footer holds the data's
_crc32c = None


def masked_crc32c(data):
    """TFRecord's masked CRC32C: the CRC rotated right by 15 bits plus a constant, mod 2^32."""
    global _crc32c
    if _crc32c is None:
        try:
            import crcmod.predefined
        except ImportError as error:
            raise ImportError("checking TFRecord CRCs needs crcmod (Debian: python3-crcmod); "
                              "verify=False skips them") from error
        _crc32c = crcmod.predefined.mkCrcFun("crc-32c")
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class CorruptRecordError(ValueError):
    """A TFRecord file whose bytes are not what was written. The message names the file and the
    record's offset; a DataLoader re-raises it from a worker with the message alone."""

    @classmethod
    def at(cls, path, offset, what):
        """The error for the record at offset of path (offset None: the whole file)."""
        return cls("%s: %s%s" % (path, "" if offset is None else "record at offset %d: " % offset,
                                 what))


class _Views:
    """A file read forward as the node's memory in place (File.view: up to a block at a time, no
    copy); every byte read goes to digest in order."""

    def __init__(self, file, digest):
        self.file, self.digest = file, digest
        self.view = memoryview(b"")
        self.start = 0  # view[start:] is unconsumed
        self.offset = 0  # the file offset of view's end
        # Where bytes that straddle two views are gathered: one buffer for headers and footers,
        # one for data, so that a record's footer never overwrites its data.
        self.small, self.scratch = bytearray(16), bytearray()

    def _next(self):
        """The next view of the file (empty at its end); the current one is let go."""
        self.view.release()
        self.view = self.file.view(self.offset)
        self.start = 0
        self.offset += len(self.view)
        if self.digest and len(self.view):
            self.digest.update(self.view)
        return len(self.view)

    def take(self, n, small=False):
        """The next n bytes (fewer at the end of the file): a slice of the view where they lie
        in one, else a copy in a buffer of this reader's (with small, the one for headers and
        footers, n <= 16); valid until the next call of the same kind."""
        if len(self.view) - self.start >= n:
            taken = self.view[self.start:self.start + n]
            self.start += n
            return taken
        if small:
            target = memoryview(self.small)[:n]
        else:
            if len(self.scratch) < n:
                self.scratch = bytearray(n)
            target = memoryview(self.scratch)[:n]
        return target[:self.take_into(target)]

    def take_into(self, target):
        """Fills target with the next bytes: how many (fewer at the end)."""
        target = memoryview(target)
        filled = 0
        while filled < len(target):
            if self.start == len(self.view) and not self._next():
                break
            n = min(len(target) - filled, len(self.view) - self.start)
            target[filled:filled + n] = self.view[self.start:self.start + n]
            self.start += n
            filled += n
        return filled

    def close(self):
        self.view.release()


def read_records(path, verify=True, sha256=None, read_bytes=READ_BYTES, copy=True):
    """Yields the data of each record of a TFRecord file as a new bytearray, read natively in
    place (views of the node's memory, a block at a time). With copy False, a record of at most
    read_bytes is a memoryview instead, of that memory or of a buffer where it straddles two
    blocks, valid until the next record.

    verify checks both CRCs of every record. A truncated record, or with verify a CRC that does
    not match, raises CorruptRecordError with the record's offset. With sha256 (hex), the file's
    bytes are hashed as they are read and checked at its end.
    """
    if read_bytes < _HEADER.size + _CRC.size:
        raise ValueError("read_bytes must be at least %d" % (_HEADER.size + _CRC.size))
    digest = hashlib.sha256() if sha256 else None
    with native.open(path, buffering=0) as f:
        size = f.size  # of the version opened: fixed
        chunks = _Views(f, digest)
        try:
            yield from _records(path, chunks, size, verify, read_bytes, copy)
        finally:
            chunks.close()
    if digest and digest.hexdigest() != sha256:
        actual = digest.hexdigest()
        raise CorruptRecordError.at(path, None, "SHA-256 %s, expected %s" % (actual, sha256))


def _records(path, chunks, size, verify, read_bytes, copy):
    """read_records' loop over a file of size bytes read from chunks."""
    offset = 0
    while offset < size:
        if size - offset < _HEADER.size:
            raise CorruptRecordError.at(path, offset, "truncated header")
        header = chunks.take(_HEADER.size, small=True)
        length, length_crc = _HEADER.unpack(header)
        if verify and masked_crc32c(header[:8]) != length_crc:
            raise CorruptRecordError.at(path, offset, "length CRC mismatch")
        left = size - offset - _HEADER.size
        if left < length + _CRC.size:
            raise CorruptRecordError.at(path, offset, "truncated: %d data bytes and a CRC "
                                        "announced, %d bytes left" % (length, left))
        if length <= read_bytes:
            data = chunks.take(length)
            if copy:
                data = bytearray(data)
        else:
            data = bytearray(length)
            if chunks.take_into(data) != length:
                data = None
        footer = (chunks.take(_CRC.size, small=True) if data is not None and len(data) == length
                  else b"")
        if len(footer) != _CRC.size:
            raise CorruptRecordError.at(path, offset, "truncated while reading")
        if verify and masked_crc32c(data) != _CRC.unpack(footer)[0]:
            raise CorruptRecordError.at(path, offset, "data CRC mismatch")
        offset += _HEADER.size + length + _CRC.size
        yield data


def _uint8_tensor(data):
    # torch.frombuffer refuses an empty buffer; it keeps data (and so its memory) alive.
    if not len(data):
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(data, dtype=torch.uint8)


def _require_digests(digests, paths, what):
    """Refuses paths that digests (when given) has no entry for, naming one."""
    if digests is None:
        return
    missing = [p for p in paths if p not in digests]
    if missing:
        raise ValueError("no digest for %d %s(s), e.g. %s" % (len(missing), what, missing[0]))


class TFRecordShards(IterableDataset):
    """The records of TFRecord shards, each a 1-D uint8 tensor of its data, read natively.

    Shards are split between DDP ranks (shard i to rank i % world_size), then between DataLoader
    workers (i to worker i % num_workers), each reading its shards in order, in place.
    verify checks every record's CRCs (crcmod); digests (shard path -> SHA-256 hex) checks each
    whole shard as well. With hint, each worker gives the mount the order of its shards.
    """

    def __init__(self, shards, verify=True, hint=False, rank=0, world_size=1, digests=None,
                 read_bytes=READ_BYTES, batch_size=None):
        self.shards = list(shards)
        self.batch_size = batch_size
        self.verify, self.hint = verify, hint
        self.rank, self.world_size = rank, world_size
        self.digests = digests
        self.read_bytes = read_bytes
        self._pool = None  # a worker's Batches, kept from one epoch to the next
        _require_digests(digests, self.shards, "shard")
        if verify:
            masked_crc32c(b"")  # no crcmod: fail here, not in a worker

    def worker_shards(self):
        """The shards the calling worker (or the main process without workers) reads."""
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        return self.shards[self.rank::self.world_size][worker::workers]

    def __iter__(self):
        shards = self.worker_shards()
        if self.hint:
            write_order(shards)
        if self.batch_size:
            yield from self._batches(shards)
            return
        for shard in shards:
            sha256 = self.digests[shard] if self.digests else None
            for data in read_records(shard, self.verify, sha256, self.read_bytes):
                yield _uint8_tensor(data)

    def _batches(self, shards):
        """Batches of batch_size records as (data, sizes), the flat form collate_ragged gives,
        each record copied once, from the node's memory into a buffer in shared memory that a
        DataLoader hands to its main process without a copy, and that the worker fills again once
        the main process has let go of the batch (lakecache._batches)."""
        if get_worker_info() is None:
            batch = Batches(self.batch_size)
        else:
            if self._pool is None or self._pool.batch_size != self.batch_size:
                self._pool = Batches(self.batch_size)
            batch = self._pool
        try:
            for shard in shards:
                sha256 = self.digests[shard] if self.digests else None
                for data in read_records(shard, self.verify, sha256, self.read_bytes, copy=False):
                    batch.add(data)
                    if batch.count == self.batch_size:
                        yield batch.take()
            if batch.count:
                yield batch.take()
        finally:
            batch.release()  # a batch left unfinished (the loop was left early)


class ImageFolder(Dataset):
    """Samples laid out as root/<class>/<file>, like torchvision's ImageFolder, read natively.

    Classes are root's subfolders in sorted order (label = position, class_to_idx); samples are
    the files of each, sorted, listed once at construction (`paths[i]` is sample i's file). A
    sample is (x, label): x is the file decoded by PIL as an RGB image, or without decode its bytes
    as a 1-D uint8 tensor; transform, when given, is applied to x. A DataLoader with a batch size
    reads each batch in one native call (__getitems__); dataset[[i, j, ...]] does the same.
    digests (path -> SHA-256 hex) checks each file's bytes as it is read.
    """

    def __init__(self, root, transform=None, decode=True, digests=None):
        self.root = root
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        self.class_to_idx = {name: label for label, name in enumerate(self.classes)}
        self.paths, self.labels = [], []
        for label, name in enumerate(self.classes):
            folder = os.path.join(root, name)
            files = sorted(e.name for e in os.scandir(folder) if e.is_file())
            self.paths.extend(os.path.join(folder, f) for f in files)
            self.labels.extend([label] * len(files))
        self.transform = transform
        self.decode = decode
        self.digests = digests
        _require_digests(digests, self.paths, "file")

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        if isinstance(index, (list, tuple)):
            return self.__getitems__(index)
        return self.__getitems__([index])[0]

    def __getitems__(self, indices):
        """The samples at indices, their files read in one native batch."""
        paths = [self.paths[i] for i in indices]
        contents = native.read_many([(path, 0, -1) for path in paths])
        return [(self._sample(path, data), self.labels[i])
                for i, path, data in zip(indices, paths, contents)]

    def _sample(self, path, data):
        if self.digests is not None:
            actual = hashlib.sha256(data).hexdigest()
            if actual != self.digests[path]:
                raise ValueError("%s: SHA-256 %s, expected %s" % (path, actual, self.digests[path]))
        x = decode_image(data) if self.decode else _uint8_tensor(data)
        return self.transform(x) if self.transform is not None else x


def decode_image(data):
    """A file's bytes decoded by PIL as an RGB image."""
    from PIL import Image  # only decoding needs PIL
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


def to_tensor(image):
    """A PIL image as a CHW uint8 tensor (a transform for ImageFolder without torchvision)."""
    pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    return pixels.view(image.height, image.width, len(image.getbands())).permute(2, 0, 1)
