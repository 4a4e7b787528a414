#!/usr/bin/python3
"""Reads a dataset through a PyTorch DataLoader as a training job does, and measures the loader.

  train.py --dataset tfrecord|images --root DIR [--epochs 1] [--batch-size 64] [--workers 4]
           [--compute-ms 0] [--hint [--hint-window N]] [--shuffle] [--seed 0]
           [--verify MANIFEST] [--no-crc] [--native] [--drop-caches] [--json]

DIR holds *.tfrecord shards, or class folders of files (make_dataset.py writes either), e.g. a
lakecache mount's /mnt/lake/<namespace>/train. Each batch is followed by --compute-ms of sleep, a
stand-in for the model's step: a sleep, not a busy loop, leaves the CPU to the loader's workers as
a GPU step would. Per epoch it reports samples/s, MB/s (10^6 bytes of sample payload per second)
and the fraction of the epoch's wall time spent waiting for a batch: near 0 the loader keeps up
with the compute, near 1 the job is bound by I/O.

--hint gives the mount the order of reads (python/lakecache): images through OrderHintSampler,
TFRecord by each worker for its shards. --verify checks every sample against a MANIFEST.sha256
(paths relative to DIR): each image file's SHA-256 as it is read, and each shard's as its last
record is read (on top of the records' CRCs, unless --no-crc). Under torchrun, RANK and
WORLD_SIZE split the samples between ranks.

--native reads through the mount's native data path instead of its files (lakecache.datasets:
TFRecordShards, and ImageFolder, which reads each batch in one call), the loop being the same. It
needs the extension lakecache._native, from the CMake build: run with PYTHONPATH=build/python.
"""
import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, DistributedSampler

from datasets import ImageFolderDataset, TFRecordDataset, collate_ragged
import lakecache  # importable once datasets is: it adds python/ to the path in a checkout


def load_manifest(path, root):
    """{path under root: SHA-256 hex} from sha256sum output whose paths are relative to root."""
    digests = {}
    with open(path) as f:
        for line in filter(str.strip, f):
            digest, _, name = line.rstrip("\n").partition(" ")
            digests[os.path.join(root, name[1:])] = digest  # name starts with ' ' or '*'
    return digests


def make_loader(kind, root, batch_size=64, workers=4, hint=False, hint_window=None,
                shuffle=False, seed=0, digests=None, check_crc=True, rank=0, world_size=1,
                native=False):
    """A DataLoader over root's dataset whose batches are collate_ragged's (data, sizes[, labels]).

    kind "tfrecord" reads root's *.tfrecord shards in name order; "images" reads root's class
    folders, shuffled per epoch by seed + epoch when shuffle (call loader.sampler.set_epoch).
    digests (path -> SHA-256 hex) checks every sample; it must list exactly the dataset's files.
    native reads through lakecache.datasets (the native data path) instead of the files: the same
    samples; ImportError if lakecache._native is missing.
    """
    if native:
        from lakecache import datasets as native_datasets  # ImportError says how to build it
        shard_dataset, image_dataset = native_datasets.TFRecordShards, native_datasets.ImageFolder
        image_options = dict(decode=False)  # the bytes, as ImageFolderDataset gives them
        collate = native_datasets.collate_pooled  # collate_ragged's batches, in reused buffers
    else:
        shard_dataset, image_dataset, image_options = TFRecordDataset, ImageFolderDataset, {}
        collate = collate_ragged
    if kind == "tfrecord":
        shards = sorted(e.path for e in os.scandir(root) if e.name.endswith(".tfrecord"))
        _check_listed(digests, shards)
        if native:
            # The dataset makes the batches itself, each in shared memory: one copy per record.
            dataset = shard_dataset(shards, verify=check_crc, hint=hint, rank=rank,
                                    world_size=world_size, digests=digests, batch_size=batch_size)
            return DataLoader(dataset, batch_size=None, num_workers=workers,
                              persistent_workers=workers > 0)
        dataset = shard_dataset(shards, verify=check_crc, hint=hint, rank=rank,
                                world_size=world_size, digests=digests)
        sampler = None
    elif kind == "images":
        dataset = image_dataset(root, digests=digests, **image_options)
        _check_listed(digests, dataset.paths)
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=shuffle,
                                     seed=seed)
        if hint:
            sampler = lakecache.OrderHintSampler(sampler, dataset.paths.__getitem__, hint_window)
    else:
        raise ValueError("unknown dataset kind %r" % kind)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      collate_fn=collate, persistent_workers=workers > 0)


def _check_listed(digests, paths):
    """Every file the manifest lists is in the dataset (the datasets check the converse)."""
    absent = set(digests or ()) - set(paths)
    if absent:
        raise ValueError("%d file(s) of the manifest are not in the dataset, e.g. %s" %
                         (len(absent), min(absent)))


def run_epoch(loader, compute_s):
    """Iterates loader once, sleeping compute_s after each batch.

    Returns {samples, bytes, seconds, wait_seconds}: bytes of sample payload, the epoch's wall
    time, and the time spent waiting for the loader (starting its iterator, and in next()).
    """
    samples = payload = 0
    start = time.perf_counter()
    batches = iter(loader)
    wait = time.perf_counter() - start
    while True:
        asked = time.perf_counter()
        batch = next(batches, None)
        wait += time.perf_counter() - asked
        if batch is None:
            break
        samples += len(batch[1])
        payload += batch[0].numel()
        if compute_s:
            time.sleep(compute_s)
    return dict(samples=samples, bytes=payload, seconds=time.perf_counter() - start,
                wait_seconds=wait)


def rates(stats):
    """samples/s, MB/s (10^6 B/s) and the waiting fraction of one epoch's stats."""
    seconds = stats["seconds"] or float("inf")
    return dict(samples_per_s=stats["samples"] / seconds, mb_per_s=stats["bytes"] / 1e6 / seconds,
                wait_fraction=stats["wait_seconds"] / seconds)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", choices=("tfrecord", "images"), required=True)
    p.add_argument("--root", required=True, help="the dataset's folder, e.g. in a lakecache mount")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=4, help="DataLoader worker processes")
    p.add_argument("--compute-ms", type=float, default=0.0, help="simulated step per batch (sleep)")
    p.add_argument("--hint", action="store_true", help="give the mount the order of reads")
    p.add_argument("--hint-window", type=int, help="images: hint this many files at a time")
    p.add_argument("--shuffle", action="store_true", help="images: a new order every epoch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verify", metavar="MANIFEST", help="check every sample (MANIFEST.sha256)")
    p.add_argument("--no-crc", action="store_true", help="tfrecord: skip the records' CRC check")
    p.add_argument("--native", action="store_true",
                   help="read through the mount's native data path (needs lakecache._native)")
    p.add_argument("--drop-caches", action="store_true",
                   help="benchmarks: drop the kernel's page cache before each epoch (root), so that "
                        "every epoch reads through the mount, as on a node whose memory the job needs")
    p.add_argument("--json", action="store_true", help="print one JSON report instead of text")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    root = os.path.abspath(args.root)
    digests = load_manifest(args.verify, root) if args.verify else None
    try:
        loader = make_loader(args.dataset, root, args.batch_size, args.workers, args.hint,
                             args.hint_window, args.shuffle, args.seed, digests, not args.no_crc,
                             int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                             args.native)
    except ImportError as error:
        if not args.native:
            raise
        print("train.py: --native: %s" % error, file=sys.stderr)
        return 2
    epochs = []
    for epoch in range(args.epochs):
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        if args.drop_caches:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        stats = run_epoch(loader, args.compute_ms / 1e3)
        if digests and args.dataset == "images" and stats["samples"] != len(loader.sampler):
            raise RuntimeError("epoch %d read %d samples, expected %d" %
                               (epoch + 1, stats["samples"], len(loader.sampler)))
        stats.update(rates(stats), epoch=epoch + 1)
        epochs.append(stats)
        if not args.json:
            print("epoch %d/%d: %d samples, %.1f MB in %.2f s: %.1f samples/s, %.1f MB/s, waited "
                  "for data %.1f%% of the time" %
                  (epoch + 1, args.epochs, stats["samples"], stats["bytes"] / 1e6, stats["seconds"],
                   stats["samples_per_s"], stats["mb_per_s"], 100 * stats["wait_fraction"]),
                  flush=True)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        json.dump(dict(settings=settings, torch=torch.__version__, verified=bool(digests),
                       epochs=epochs), sys.stdout, indent=2)
        print()
    elif digests:
        print("verified: every sample matched %s" % args.verify)


if __name__ == "__main__":
    sys.exit(main())
