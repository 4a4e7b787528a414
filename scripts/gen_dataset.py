#!/usr/bin/env python3
"""Writes the demo's deterministic sample dataset and a SHA-256 manifest of it.

  gen_dataset.py OUTDIR MANIFEST [--shards 24] [--shard-mib 32] [--record-kib 100] [--images 2000]

OUTDIR/train/train-NNNNN-of-NNNNN.tfrecord: TFRecord shards of exactly --shard-mib MiB each, in real
TFRecord framing (uint64 little-endian length, masked CRC32C of the length, data, masked CRC32C of
the data), records of --record-kib KiB of pseudo-random bytes (the last record of a shard is shorter
so that the shard is exactly its size). OUTDIR/images/class-NN/img-NNNNN.jpg: small JPEG-sized files
(20-200 KiB) with a real JFIF header and end marker around pseudo-random bytes, and
OUTDIR/images/labels.csv (file,label). The labels file also keeps `images/` in s3rver's root listing:
s3rver 3.7 leaves out of a delimited listing a folder that holds only folders.
MANIFEST: `sha256  path` lines (sha256sum's format), paths relative to OUTDIR, in name order.

Standard library only, and fast enough for the demo: CRC32C is a pure-Python table, run only over a
pool of 128 random blocks. Every record is the XOR of two distinct pool blocks, so all records differ,
and CRC32C being affine over GF(2), crc(A ^ B) = crc(A) ^ crc(B) ^ crc(zeros of the same length):
each record's CRC costs two lookups, not a pass over its bytes (checked against a direct computation).
"""
import argparse
import hashlib
import itertools
import os
import random
import struct
import sys

SEED = 20240601
POOL = 128


def _table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = _table()


def crc32c(data, crc=0):
    """CRC32C (Castagnoli) of data; pass a previous result as crc to continue it."""
    crc ^= 0xFFFFFFFF
    t = TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    """TFRecord's masked CRC: rotate right by 15 bits, add a constant."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class Pool:
    """Random blocks of one record size, with their CRCs (whole and at one prefix length)."""

    def __init__(self, rng, size, tail):
        self.size, self.tail = size, tail
        self.ints, self.crc, self.crc_tail = [], [], []
        for _ in range(POOL):
            block = rng.randbytes(size)
            head = crc32c(block[:tail])
            self.ints.append(int.from_bytes(block, "little"))
            self.crc_tail.append(head)
            self.crc.append(crc32c(block[tail:], head))
        self.zero_crc = crc32c(bytes(size))
        self.zero_crc_tail = crc32c(bytes(tail))
        self.pairs = itertools.combinations(range(POOL), 2)  # 8128 distinct records

    def record(self, length):
        """The next record's (data, crc); length is the record size or the tail length."""
        return self.combine(*next(self.pairs), length)

    def combine(self, a, b, length):
        """Pool blocks a ^ b, cut to length, and its CRC32C from theirs."""
        data = (self.ints[a] ^ self.ints[b]).to_bytes(self.size, "little")
        if length == self.size:
            return data, self.crc[a] ^ self.crc[b] ^ self.zero_crc
        return data[:length], self.crc_tail[a] ^ self.crc_tail[b] ^ self.zero_crc_tail


def frame(data, crc):
    header = struct.pack("<Q", len(data))
    return b"".join((header, struct.pack("<I", masked(crc32c(header))), data,
                     struct.pack("<I", masked(crc))))


def write(outdir, rel, chunks, manifest):
    path = os.path.join(outdir, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for chunk in chunks:
            h.update(chunk)
            f.write(chunk)
    manifest.append((rel, h.hexdigest()))


def shard_chunks(pool, shard_bytes, record_bytes):
    left = shard_bytes
    while left > 0:
        length = record_bytes if left >= record_bytes + 16 else left - 16
        data, crc = pool.record(length)
        yield frame(data, crc)
        left -= length + 16


def jpeg(rng, index, size):
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x01\x00\x48\x00\x48\x00\x00"
    text = b"lakecache demo image %05d" % index
    com = b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text
    head = b"\xff\xd8" + app0 + com
    return head + rng.randbytes(size - len(head) - 2) + b"\xff\xd9"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("manifest")
    p.add_argument("--shards", type=int, default=24)
    p.add_argument("--shard-mib", type=int, default=32)
    p.add_argument("--record-kib", type=int, default=100)
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=20)
    args = p.parse_args()

    assert crc32c(b"123456789") == 0xE3069283, "CRC32C self-test failed"
    shard_bytes, record_bytes = args.shard_mib << 20, args.record_kib << 10
    tail = shard_bytes % (record_bytes + 16) - 16
    if tail <= 0:  # the shard size is a multiple of the framed record size, or nearly
        tail = record_bytes // 2
    rng = random.Random(SEED)
    pool = Pool(rng, record_bytes, tail)
    # The XOR shortcut must agree with a direct CRC32C of a record.
    for length in (record_bytes, tail):
        data, crc = pool.combine(3, 77, length)
        assert crc == crc32c(data), "CRC32C XOR shortcut disagrees with a direct computation"

    manifest = []
    for i in range(args.shards):
        rel = "train/train-%05d-of-%05d.tfrecord" % (i, args.shards)
        write(args.outdir, rel, shard_chunks(pool, shard_bytes, record_bytes), manifest)
    labels = ["file,label\n"]
    for i in range(args.images):
        size = rng.randint(20 << 10, 200 << 10)
        rel = "class-%02d/img-%05d.jpg" % (i % args.classes, i)
        write(args.outdir, "images/" + rel, [jpeg(rng, i, size)], manifest)
        labels.append("%s,%d\n" % (rel, i % args.classes))
    write(args.outdir, "images/labels.csv", ["".join(labels).encode()], manifest)

    manifest.sort()
    with open(args.manifest, "w") as f:
        for rel, digest in manifest:
            f.write("%s  %s\n" % (digest, rel))
    total = sum(os.path.getsize(os.path.join(args.outdir, rel)) for rel, _ in manifest)
    print("gen_dataset: %d shards x %d MiB, %d images + labels.csv; %d files, %.1f MiB" %
          (args.shards, args.shard_mib, args.images, len(manifest), total / 2**20))


if __name__ == "__main__":
    sys.exit(main())
