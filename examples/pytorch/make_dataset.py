#!/usr/bin/python3
"""Writes a deterministic sample dataset for train.py, and its MANIFEST.sha256, into a folder.

  make_dataset.py OUT --kind tfrecord [--shards 4] [--shard-size 8MiB] [--record-size 100KiB]
  make_dataset.py OUT --kind images [--classes 10] [--files 1000] [--min-size 20KiB]
                      [--max-size 200KiB] [--real-jpeg]

tfrecord: OUT/train-NNNNN-of-NNNNN.tfrecord, each holding as many records of exactly --record-size
random bytes as fit in --shard-size (16 bytes of framing per record), so that default_collate can
stack them. images: OUT/class-NNN/img-NNNNNN.jpg, file i in class i % classes, of a random size
between --min-size and --max-size: a JFIF header and end marker around random bytes, or with
--real-jpeg a real JPEG of random pixels (for ImageFolderDataset(decode=True)) whose size is near
the drawn one.
OUT/MANIFEST.sha256 lists every file in sha256sum's format, paths relative to OUT, as the
Kubernetes examples expect (`cd OUT && sha256sum -c MANIFEST.sha256` checks a copy). The same
--seed writes the same bytes. Upload OUT to a bucket and train over its mount, e.g.
/mnt/lake/<namespace>/<prefix>.
"""
import argparse
import hashlib
import io
import os
import random
import re
import struct
import sys

from datasets import write_tfrecord

MANIFEST = "MANIFEST.sha256"
_UNITS = {"": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30,
          "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def parse_size(text):
    """Bytes in '130MB' (10^6), '8MiB' or '8M' (2^20), '4096'."""
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", text.strip())
    if not match or match.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError("not a size: %r (e.g. 100KiB, 130MB, 4096)" % text)
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def write_shards(out, rng, args):
    records = max(1, args.shard_size // (args.record_size + 16))
    for i in range(args.shards):
        name = "train-%05d-of-%05d.tfrecord" % (i, args.shards)
        digest = write_tfrecord(os.path.join(out, name),
                                (rng.randbytes(args.record_size) for _ in range(records)))
        yield name, digest


def jfif_like(rng, size):
    """A JFIF header and end marker around random bytes: a JPEG's look and size, not its pixels."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x01\x00\x48\x00\x48\x00\x00"
    head = b"\xff\xd8" + app0
    return head + rng.randbytes(max(0, size - len(head) - 2)) + b"\xff\xd9"


def real_jpeg(rng, size):
    from PIL import Image  # only --real-jpeg needs PIL
    side = max(8, int((size / 0.65) ** 0.5))  # random pixels at quality 75: ~0.65 byte each
    image = Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3))
    encoded = io.BytesIO()
    image.save(encoded, "JPEG", quality=75)
    return encoded.getvalue()


def write_images(out, rng, args):
    make = real_jpeg if args.real_jpeg else jfif_like
    for i in range(args.files):
        name = "class-%03d/img-%06d.jpg" % (i % args.classes, i)
        data = make(rng, rng.randint(args.min_size, args.max_size))
        os.makedirs(os.path.join(out, os.path.dirname(name)), exist_ok=True)
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        yield name, hashlib.sha256(data).hexdigest()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="the folder to write (created if missing)")
    p.add_argument("--kind", choices=("tfrecord", "images"), required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--shard-size", type=parse_size, default="8MiB")
    p.add_argument("--record-size", type=parse_size, default="100KiB")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--files", type=int, default=1000)
    p.add_argument("--min-size", type=parse_size, default="20KiB")
    p.add_argument("--max-size", type=parse_size, default="200KiB")
    p.add_argument("--real-jpeg", action="store_true")
    args = p.parse_args(argv)
    if args.min_size > args.max_size:
        p.error("--min-size is larger than --max-size")
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    write = write_shards if args.kind == "tfrecord" else write_images
    entries = sorted(write(args.out, rng, args))
    with open(os.path.join(args.out, MANIFEST), "w") as f:
        f.writelines("%s  %s\n" % (digest, name) for name, digest in entries)
    total = sum(os.path.getsize(os.path.join(args.out, name)) for name, _ in entries)
    print("make_dataset: %d files (%s), %.1f MB, in %s (manifest %s)" %
          (len(entries), args.kind, total / 1e6, args.out, MANIFEST))


if __name__ == "__main__":
    sys.exit(main())
