"""TFRecord framing, its checks, and TFRecordDataset through a DataLoader."""
import os
import struct
import tempfile
import unittest

from support import hinted, make_fake_mount

import gen_dataset  # scripts/gen_dataset.py: an independent TFRecord writer, pure Python
import torch
from datasets import (CorruptRecordError, TFRecordDataset, collate_ragged, masked_crc32c,
                      read_records, write_tfrecord)
from torch.utils.data import DataLoader


def crc32c_bitwise(data):
    """CRC-32C from its definition (reflected polynomial 0x82F63B78), one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def unmask(masked):
    rotated = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


class MaskedCrcTest(unittest.TestCase):
    # CRC-32C check values (RFC 3720 B.4, TensorFlow's crc32c_test.cc).
    VECTORS = [(b"", 0), (b"123456789", 0xE3069283), (bytes(32), 0x8A9136AA),
               (b"\xff" * 32, 0x62A8AB43), (bytes(range(32)), 0x46DD794E),
               (bytes(range(31, -1, -1)), 0x113FDB5C)]

    def test_crc_vectors_unmask_from_the_masked_crc(self):
        for data, crc in self.VECTORS:
            self.assertEqual(unmask(masked_crc32c(data)), crc, data)
            self.assertEqual(crc32c_bitwise(data), crc, data)

    def test_mask_of_a_known_crc(self):
        # crc 0xE3069283 rotated right by 15 bits is 0x2507C60D; plus 0xA282EAD8 mod 2^32.
        self.assertEqual(masked_crc32c(b"123456789"), 0xC78AB0E5)

    def test_framing_matches_an_independent_writer(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.tfrecord")
            records = [b"", b"x", os.urandom(70000)]
            write_tfrecord(path, records)
            with open(path, "rb") as f:
                written = f.read()
        expected = b"".join(gen_dataset.frame(r, gen_dataset.crc32c(r)) for r in records)
        self.assertEqual(written, expected)


class ReadRecordsTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.path = os.path.join(tmp.name, "r.tfrecord")
        # Records across the 1 MiB read buffer's edge, and empty ones.
        self.records = [os.urandom(n) for n in (10, 0, 700000, 600000, 1, 0)]
        self.sha256 = write_tfrecord(self.path, self.records)
        self.offsets = [0]
        for r in self.records:
            self.offsets.append(self.offsets[-1] + len(r) + 16)

    def patch(self, offset, data):
        with open(self.path, "r+b") as f:
            f.seek(offset)
            f.write(data)

    def read(self, **kwargs):
        return [bytes(r) for r in read_records(self.path, **kwargs)]

    def test_records_round_trip(self):
        self.assertEqual(self.read(), self.records)
        self.assertEqual(self.read(verify=False, sha256=self.sha256), self.records)

    def test_a_flipped_data_byte_names_the_record(self):
        self.patch(self.offsets[2] + 12 + 5000, b"\x00" if self.records[2][5000] else b"\x01")
        with self.assertRaisesRegex(CorruptRecordError,
                                    "r.tfrecord: record at offset %d: data CRC" % self.offsets[2]):
            self.read()
        self.assertEqual(len(self.read(verify=False)), len(self.records))

    def test_a_changed_length_names_the_record(self):
        self.patch(self.offsets[3], struct.pack("<Q", 5))
        with self.assertRaisesRegex(CorruptRecordError,
                                    "record at offset %d: length CRC" % self.offsets[3]):
            self.read()

    def test_a_truncated_file_names_the_last_record(self):
        os.truncate(self.path, self.offsets[4] - 3)
        with self.assertRaisesRegex(CorruptRecordError,
                                    "record at offset %d: truncated" % self.offsets[3]):
            self.read(verify=False)
        os.truncate(self.path, self.offsets[3] + 5)
        with self.assertRaisesRegex(CorruptRecordError,
                                    "record at offset %d: truncated header" % self.offsets[3]):
            self.read()

    def test_a_file_digest_mismatch_is_reported_at_its_end(self):
        with self.assertRaisesRegex(CorruptRecordError, "r.tfrecord: SHA-256 %s, expected 00" %
                                    self.sha256):
            self.read(sha256="00" * 32)


class TFRecordDatasetTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.mount = make_fake_mount(tmp.name)
        self.shards, self.digests, self.records = [], {}, []
        for s in range(5):
            records = [bytes([s, r]) * 50 for r in range(7)]  # fixed size: default_collate stacks
            path = os.path.join(self.mount, "ns/train-%d.tfrecord" % s)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self.digests[path] = write_tfrecord(path, records)
            self.shards.append(path)
            self.records.extend(records)

    def test_shards_are_split_between_ranks_then_workers(self):
        dataset = TFRecordDataset(self.shards, rank=1, world_size=2)
        self.assertEqual(dataset.worker_shards(), [self.shards[1], self.shards[3]])

    def test_dataloader_with_two_workers_yields_every_record_verified(self):
        dataset = TFRecordDataset(self.shards, digests=self.digests, hint=True)
        loader = DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=collate_ragged)
        got = []
        for data, sizes in loader:
            got.extend(bytes(t.numpy()) for t in torch.split(data, sizes.tolist()))
        self.assertEqual(sorted(got), sorted(self.records))
        # Each worker wrote its own order with "w"; the fake file keeps the last writer's lines.
        lines = hinted(self.mount)
        self.assertTrue(lines)
        self.assertLessEqual(set(lines), {"ns/train-%d.tfrecord" % s for s in range(5)})

    def test_fixed_size_records_stack_with_the_default_collate(self):
        loader = DataLoader(TFRecordDataset(self.shards[:1]), batch_size=7)
        (batch,) = list(loader)
        self.assertEqual(tuple(batch.shape), (7, 100))
        self.assertEqual(batch.dtype, torch.uint8)

    def test_hint_in_one_process_lists_its_shards_in_order(self):
        list(TFRecordDataset(self.shards, hint=True))
        self.assertEqual(hinted(self.mount), ["ns/train-%d.tfrecord" % s for s in range(5)])

    def test_a_shard_without_a_digest_is_refused(self):
        with self.assertRaisesRegex(ValueError, "no digest for 1 shard"):
            TFRecordDataset(self.shards, digests=dict(list(self.digests.items())[1:]))

    def test_a_corrupt_shard_fails_the_loader_with_its_name(self):
        with open(self.shards[2], "r+b") as f:
            f.seek(12 + 3)
            f.write(b"\xee")
        loader = DataLoader(TFRecordDataset(self.shards), batch_size=4, num_workers=2,
                            collate_fn=collate_ragged)
        with self.assertRaisesRegex(CorruptRecordError, "train-2.tfrecord: record at offset 0"):
            list(loader)


if __name__ == "__main__":
    unittest.main()
