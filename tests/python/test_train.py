"""make_dataset.py and train.py end to end on small datasets in a temporary folder."""
import contextlib
import io
import json
import os
import tempfile
import unittest

import support

import make_dataset
import train
from datasets import CorruptRecordError


class TrainTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name

    def make(self, kind, *args):
        out = os.path.join(self.tmp, kind)
        with contextlib.redirect_stdout(io.StringIO()):
            make_dataset.main([out, "--kind", kind, "--seed", "7"] + list(args))
        return out

    def train(self, root, *args):
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            train.main(["--root", root, "--json", "--workers", "2",
                        "--verify", os.path.join(root, make_dataset.MANIFEST)] + list(args))
        return json.loads(output.getvalue())

    def test_images_are_read_and_verified_every_epoch(self):
        root = self.make("images", "--classes", "3", "--files", "20", "--max-size", "30KiB")
        report = self.train(root, "--dataset", "images", "--epochs", "2", "--shuffle",
                            "--batch-size", "6", "--compute-ms", "1")
        self.assertTrue(report["verified"])
        sizes = sum(os.path.getsize(os.path.join(root, "class-%03d" % c, f))
                    for c in range(3) for f in os.listdir(os.path.join(root, "class-%03d" % c)))
        for epoch in report["epochs"]:
            self.assertEqual((epoch["samples"], epoch["bytes"]), (20, sizes))
            self.assertLessEqual(epoch["wait_seconds"], epoch["seconds"])

    def test_the_order_hint_reaches_a_mount(self):
        mount = support.make_fake_mount(self.tmp)
        root = self.make("images", "--files", "12", "--max-size", "30KiB")
        self.train(root, "--dataset", "images", "--hint", "--hint-window", "5")
        self.assertEqual(len(support.hinted(mount)), 12)

    def test_tfrecord_shards_are_read_and_verified(self):
        root = self.make("tfrecord", "--shards", "3", "--shard-size", "100KiB",
                         "--record-size", "10000")
        report = self.train(root, "--dataset", "tfrecord", "--hint", "--batch-size", "4")
        self.assertEqual(report["epochs"][0]["samples"], 3 * (100 * 1024 // 10016))
        self.assertEqual(report["epochs"][0]["bytes"], 3 * 10 * 10000)

    def test_a_corrupt_image_fails_verification(self):
        root = self.make("images", "--classes", "2", "--files", "6", "--max-size", "30KiB")
        with open(os.path.join(root, "class-001", "img-000003.jpg"), "r+b") as f:
            f.write(b"\x00")
        with self.assertRaisesRegex(ValueError, "img-000003.jpg: SHA-256"):
            self.train(root, "--dataset", "images")

    def test_a_shard_that_is_not_the_listed_one_fails_verification(self):
        root = self.make("tfrecord", "--shards", "2", "--shard-size", "50KiB",
                         "--record-size", "1000")
        first, second = (os.path.join(root, "train-%05d-of-00002.tfrecord" % i) for i in (0, 1))
        os.replace(first, second)  # valid records, wrong file
        with self.assertRaisesRegex(ValueError, "manifest are not in the dataset"):
            self.train(root, "--dataset", "tfrecord")
        with open(second, "rb") as f, open(first, "wb") as g:
            g.write(f.read())
        with self.assertRaisesRegex(CorruptRecordError, "00001-of-00002.tfrecord: SHA-256"):
            self.train(root, "--dataset", "tfrecord", "--workers", "0")

    def test_the_same_seed_makes_the_same_files(self):
        first = self.make("images", "--files", "4", "--real-jpeg", "--max-size", "20KiB")
        with open(os.path.join(first, make_dataset.MANIFEST)) as f:
            manifest = f.read()
        os.rename(first, first + ".1")
        self.make("images", "--files", "4", "--real-jpeg", "--max-size", "20KiB")
        with open(os.path.join(first, make_dataset.MANIFEST)) as f:
            self.assertEqual(f.read(), manifest)
        self.assertEqual(len(manifest.splitlines()), 4)

    def test_sizes_parse_with_binary_and_decimal_units(self):
        sizes = ("4096", "8MiB", "8M", "130MB", "1k")
        self.assertEqual([make_dataset.parse_size(s) for s in sizes],
                         [4096, 8 << 20, 8 << 20, 130 * 10**6, 1024])


if __name__ == "__main__":
    unittest.main()
