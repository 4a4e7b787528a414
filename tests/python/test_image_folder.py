"""ImageFolderDataset: indexing, checks, decoding, and a DataLoader with the order hint."""
import hashlib
import io
import os
import tempfile
import unittest

from support import hinted, make_fake_mount, write_file

import torch
from datasets import ImageFolderDataset, collate_ragged
from lakecache import OrderHintSampler
from torch.utils.data import DataLoader, RandomSampler


class ImageFolderDatasetTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.mount = make_fake_mount(tmp.name)
        self.root = os.path.join(self.mount, "ns/images")
        self.contents = {}
        for cls, count in (("dog", 3), ("cat", 4), ("emu", 0)):
            os.makedirs(os.path.join(self.root, cls))
            for i in range(count):
                data = os.urandom(1000 + 37 * i)
                self.contents[write_file(os.path.join(self.root, cls, "%d.jpg" % i), data)] = data
        write_file(os.path.join(self.root, "MANIFEST.sha256"), b"not a class")
        self.digests = {p: hashlib.sha256(d).hexdigest() for p, d in self.contents.items()}

    def test_classes_and_samples_are_in_name_order(self):
        dataset = ImageFolderDataset(self.root)
        self.assertEqual(dataset.classes, ["cat", "dog", "emu"])
        self.assertEqual(len(dataset), 7)
        self.assertEqual(dataset.paths[0], os.path.join(self.root, "cat", "0.jpg"))
        self.assertEqual(dataset.paths[4], os.path.join(self.root, "dog", "0.jpg"))
        data, label = dataset[5]
        self.assertEqual(label, 1)
        self.assertEqual(data.dtype, torch.uint8)
        self.assertEqual(bytes(data.numpy()), self.contents[dataset.paths[5]])

    def test_a_file_that_differs_from_its_digest_is_named(self):
        dataset = ImageFolderDataset(self.root, digests=self.digests)
        self.assertEqual(dataset[2][1], 0)
        with open(dataset.paths[2], "r+b") as f:
            f.write(b"!")
        with self.assertRaisesRegex(ValueError, "cat/2.jpg: SHA-256"):
            dataset[2]

    def test_a_file_without_a_digest_is_refused(self):
        del self.digests[os.path.join(self.root, "dog", "1.jpg")]
        with self.assertRaisesRegex(ValueError, "no digest for 1 file"):
            ImageFolderDataset(self.root, digests=self.digests)

    def test_decode_gives_channels_height_width(self):
        from PIL import Image
        encoded = io.BytesIO()
        Image.new("RGB", (5, 3), (10, 20, 30)).save(encoded, "PNG")
        write_file(os.path.join(self.root, "emu", "e.png"), encoded.getvalue())
        image, label = ImageFolderDataset(self.root, decode=True)[-1]
        self.assertEqual((tuple(image.shape), label), ((3, 3, 5), 2))
        self.assertEqual(image[:, 2, 4].tolist(), [10, 20, 30])

    def test_dataloader_with_two_workers_and_the_order_hint(self):
        dataset = ImageFolderDataset(self.root, digests=self.digests)
        sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(3))
        order = list(RandomSampler(dataset, generator=torch.Generator().manual_seed(3)))
        loader = DataLoader(dataset, batch_size=3, num_workers=2, collate_fn=collate_ragged,
                            sampler=OrderHintSampler(sampler, dataset.paths.__getitem__, window=2))
        samples, labels = [], []
        for data, sizes, batch_labels in loader:
            samples.extend(bytes(t.numpy()) for t in torch.split(data, sizes.tolist()))
            labels.extend(batch_labels.tolist())
        self.assertEqual(samples, [self.contents[dataset.paths[i]] for i in order])
        self.assertEqual(labels, [dataset.labels[i] for i in order])
        prefix = os.path.relpath(self.root, self.mount) + "/"
        self.assertEqual(hinted(self.mount),
                         [prefix + os.path.relpath(dataset.paths[i], self.root) for i in order])


if __name__ == "__main__":
    unittest.main()
