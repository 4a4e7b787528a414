"""PyTorch datasets over files, e.g. a lakecache mount: TFRecord shards and an image folder.

TFRecordDataset streams the records of TFRecord shards (TensorFlow's framing, CRCs checked);
ImageFolderDataset reads one file per sample. Both hand out the bytes as uint8 tensors: the loader
measures I/O, decoding is the model's business. Both can check every sample against SHA-256
digests (`digests`: path -> hex digest, e.g. from a MANIFEST.sha256), and both can give a lakecache
mount their order of reads (python/lakecache). `collate_ragged` batches samples of any size.
"""
import hashlib
import importlib
import io
import os
import struct
import sys
import warnings

import crcmod.predefined
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

try:
    import lakecache
except ImportError:  # run from a checkout: the package is python/ at the repository's root
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../python"))
    import lakecache

_crc32c = crcmod.predefined.mkCrcFun("crc-32c")
if not importlib.import_module("crcmod.crcmod")._usingExtension:
    warnings.warn("crcmod runs without its C extension: checking TFRecord CRCs will be slow "
                  "(install python3-crcmod)")

# Large reads keep the loader from being the bottleneck on a FUSE mount.
READ_BUFFER_BYTES = 1 << 20
_HEADER = struct.Struct("<QI")  # length, masked CRC32C of the length's 8 bytes
_CRC = struct.Struct("<I")  # a masked CRC32C; the record's footer holds the data's


def masked_crc32c(data):
    """TFRecord's masked CRC32C: the CRC rotated right by 15 bits plus a constant, mod 2^32."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data):
    """One record in TFRecord framing: header (length, its masked CRC), data, data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return b"".join((length, _CRC.pack(masked_crc32c(length)), data,
                     _CRC.pack(masked_crc32c(data))))


def write_tfrecord(path, records):
    """Writes records (bytes-like) to path as a TFRecord file; returns its SHA-256 hex digest."""
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for record in records:
            framed = frame_record(record)
            digest.update(framed)
            f.write(framed)
    return digest.hexdigest()


class CorruptRecordError(ValueError):
    """A TFRecord file whose bytes are not what was written. The message names the file and the
    record's offset; a DataLoader re-raises it from a worker with the message alone."""

    @classmethod
    def at(cls, path, offset, what):
        """The error for the record at offset of path (offset None: the whole file)."""
        return cls("%s: %s%s" % (path, "" if offset is None else "record at offset %d: " % offset,
                                 what))


def read_records(path, verify=True, sha256=None):
    """Yields the data of each record of a TFRecord file as a new bytearray.

    verify checks both CRCs of every record. A truncated record, or with verify a CRC that does
    not match, raises CorruptRecordError with the record's offset. With sha256 (hex), the file's
    bytes are hashed as they are read and checked at its end.
    """
    digest = hashlib.sha256() if sha256 else None
    with open(path, "rb", buffering=READ_BUFFER_BYTES) as f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while offset < size:
            if size - offset < _HEADER.size:
                raise CorruptRecordError.at(path, offset, "truncated header")
            header = f.read(_HEADER.size)
            length, length_crc = _HEADER.unpack(header)
            if verify and masked_crc32c(header[:8]) != length_crc:
                raise CorruptRecordError.at(path, offset, "length CRC mismatch")
            left = size - offset - _HEADER.size
            if left < length + _CRC.size:
                raise CorruptRecordError.at(path, offset, "truncated: %d data bytes and a CRC "
                                            "announced, %d bytes left" % (length, left))
            data = bytearray(length)
            footer = f.read(_CRC.size) if f.readinto(data) == length else b""
            if len(footer) != _CRC.size:
                raise CorruptRecordError.at(path, offset, "truncated while reading (file shrank?)")
            if verify and masked_crc32c(data) != _CRC.unpack(footer)[0]:
                raise CorruptRecordError.at(path, offset, "data CRC mismatch")
            if digest:
                digest.update(header)
                digest.update(data)
                digest.update(footer)
            offset += _HEADER.size + length + _CRC.size
            yield data
    if digest and digest.hexdigest() != sha256:
        actual = digest.hexdigest()
        raise CorruptRecordError.at(path, None, "SHA-256 %s, expected %s" % (actual, sha256))


def _uint8_tensor(data):
    # torch.frombuffer refuses an empty buffer.
    return torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def _require_digests(digests, paths, what):
    """Refuses paths that digests (when given) has no entry for, naming one."""
    if digests is None:
        return
    missing = [p for p in paths if p not in digests]
    if missing:
        raise ValueError("no digest for %d %s(s), e.g. %s" % (len(missing), what, missing[0]))


class TFRecordDataset(IterableDataset):
    """The records of TFRecord shards, each a 1-D uint8 tensor of its data.

    Shards are split between DDP ranks (shard i to rank i % world_size), then between DataLoader
    workers (i to worker i % num_workers), each reading its shards in order. verify checks every
    record's CRCs; digests (shard path -> SHA-256 hex) checks each whole shard as well. With hint,
    each worker gives a lakecache mount the order of its shards as it starts an iteration.
    """

    def __init__(self, shards, verify=True, hint=False, rank=0, world_size=1, digests=None):
        self.shards = list(shards)
        self.verify, self.hint = verify, hint
        self.rank, self.world_size = rank, world_size
        self.digests = digests
        _require_digests(digests, self.shards, "shard")

    def worker_shards(self):
        """The shards the calling worker (or the main process without workers) reads."""
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        return self.shards[self.rank::self.world_size][worker::workers]

    def __iter__(self):
        shards = self.worker_shards()
        if self.hint:
            lakecache.write_order(shards)
        for shard in shards:
            sha256 = self.digests[shard] if self.digests else None
            for data in read_records(shard, self.verify, sha256):
                yield _uint8_tensor(data)


class ImageFolderDataset(Dataset):
    """Samples laid out as root/<class>/<file>, like torchvision's ImageFolder.

    Classes are root's subfolders in sorted order (label = position); samples are the files of
    each, sorted, listed once at construction (`paths[i]` is sample i's file). A sample is
    (uint8 tensor of the file's bytes, label), or with decode a CHW uint8 image tensor (PIL)
    instead of the bytes. digests (path -> SHA-256 hex) checks each file's bytes as it is read.
    """

    def __init__(self, root, decode=False, digests=None):
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        self.paths, self.labels = [], []
        for label, name in enumerate(self.classes):
            folder = os.path.join(root, name)
            files = sorted(e.name for e in os.scandir(folder) if e.is_file())
            self.paths.extend(os.path.join(folder, f) for f in files)
            self.labels.extend([label] * len(files))
        self.decode = decode
        self.digests = digests
        _require_digests(digests, self.paths, "file")

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        path = self.paths[index]
        data = _read_file(path)
        if self.digests is not None:
            actual = hashlib.sha256(data).hexdigest()
            if actual != self.digests[path]:
                raise ValueError("%s: SHA-256 %s, expected %s" % (path, actual, self.digests[path]))
        return (_decode(data) if self.decode else _uint8_tensor(data)), self.labels[index]


def _read_file(path):
    """The whole file in one read of its size (more only if the file system returns less)."""
    with open(path, "rb", buffering=0) as f:
        data = bytearray(os.fstat(f.fileno()).st_size)
        view, filled = memoryview(data), 0
        while filled < len(data):
            got = f.readinto(view[filled:])
            if not got:
                raise OSError("%s: ended after %d of its %d bytes" % (path, filled, len(data)))
            filled += got
    return data


def _decode(data):
    from PIL import Image  # only the decoding path needs PIL
    with Image.open(io.BytesIO(data)) as image:
        rgb = image.convert("RGB")
    pixels = torch.frombuffer(bytearray(rgb.tobytes()), dtype=torch.uint8)
    return pixels.view(rgb.height, rgb.width, 3).permute(2, 0, 1)


def collate_ragged(batch):
    """Collates samples of any size cheaply: one flat uint8 tensor plus each sample's size.

    Returns (data, sizes) for tensor samples and (data, sizes, labels) for (tensor, label)
    samples; torch.split(data, sizes.tolist()) gives the samples back. One tensor per batch
    crosses from a worker, not one per sample as with a list.
    """
    labelled = isinstance(batch[0], tuple)
    tensors = [sample[0] for sample in batch] if labelled else batch
    flat = [t.reshape(-1) for t in tensors]
    out = None
    if torch.utils.data.get_worker_info() is not None:
        # In a DataLoader worker, the batch is made in shared memory at once, as default_collate
        # does: put on the worker's queue, a tensor elsewhere is copied there first.
        numel = sum(t.numel() for t in flat)
        out = torch.empty(0, dtype=flat[0].dtype).set_(
            torch.UntypedStorage._new_shared(numel * flat[0].element_size()))
    collated = (torch.cat(flat, out=out), torch.tensor([t.numel() for t in flat], dtype=torch.int64))
    if labelled:
        collated += (torch.tensor([sample[1] for sample in batch], dtype=torch.int64),)
    return collated
