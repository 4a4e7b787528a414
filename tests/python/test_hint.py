"""lakecache.hint against fake mounts in a temporary folder: no FUSE, no torch."""
import os
import tempfile
import unittest

from support import hinted, make_fake_mount

from lakecache import OrderHintSampler, mount_root, write_order


class HintTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.mount = make_fake_mount(os.path.join(self.tmp, "mnt"))

    def path(self, relative):
        return os.path.join(self.mount, relative)

    def test_mount_root_finds_the_nearest_control_file_above_a_path(self):
        self.assertEqual(mount_root(self.path("ns/train/a.jpg")), (self.mount, "ns/train/a.jpg"))
        self.assertEqual(mount_root(self.path("top.txt")), (self.mount, "top.txt"))
        inner = make_fake_mount(self.path("ns/inner"))
        self.assertEqual(mount_root(os.path.join(inner, "x/b.jpg")), (inner, "x/b.jpg"))

    def test_mount_root_is_none_outside_a_mount(self):
        self.assertIsNone(mount_root(os.path.join(self.tmp, "elsewhere/a.jpg")))
        self.assertIsNone(mount_root(self.mount))  # the root is not under itself

    def test_mount_root_normalizes_relative_and_dotted_paths(self):
        os.makedirs(self.path("ns/train"))
        self.assertEqual(mount_root(self.path("ns/train/../val/./c.jpg")),
                         (self.mount, "ns/val/c.jpg"))
        cwd = os.getcwd()
        self.addCleanup(os.chdir, cwd)
        os.chdir(self.path("ns"))
        self.assertEqual(mount_root("train/d.jpg"), (self.mount, "ns/train/d.jpg"))

    def test_mount_root_resolves_a_symbolic_link_into_the_mount(self):
        os.makedirs(self.path("ns/train"))
        link = os.path.join(self.tmp, "data")
        os.symlink(self.path("ns/train"), link)
        self.assertEqual(mount_root(os.path.join(link, "e.jpg")), (self.mount, "ns/train/e.jpg"))

    def test_write_order_writes_relative_paths_in_order(self):
        paths = [self.path("ns/b/%03d.jpg" % i) for i in (5, 1, 9)]
        self.assertEqual(write_order(paths), 3)
        self.assertEqual(hinted(self.mount), ["ns/b/005.jpg", "ns/b/001.jpg", "ns/b/009.jpg"])

    def test_write_order_replaces_the_order_and_append_extends_it(self):
        write_order([self.path("a"), self.path("b")])
        write_order([self.path("c")])
        self.assertEqual(hinted(self.mount), ["c"])
        self.assertEqual(write_order([self.path("d"), self.path("e")], append=True), 2)
        self.assertEqual(hinted(self.mount), ["c", "d", "e"])

    def test_write_order_groups_paths_by_mount_and_ignores_others(self):
        other = make_fake_mount(os.path.join(self.tmp, "other"))
        paths = [self.path("1"), os.path.join(other, "x/2"), os.path.join(self.tmp, "3"),
                 self.path("4"), os.path.join(other, "x/5")]
        self.assertEqual(write_order(iter(paths)), 4)
        self.assertEqual(hinted(self.mount), ["1", "4"])
        self.assertEqual(hinted(other), ["x/2", "x/5"])
        self.assertEqual(write_order([os.path.join(self.tmp, "outside")]), 0)

    def test_write_order_skips_names_the_control_file_cannot_carry(self):
        self.assertEqual(write_order([self.path("a\nb"), self.path("#c"), self.path("d")]), 1)
        self.assertEqual(hinted(self.mount), ["d"])

    def test_a_failing_control_file_is_logged_once_and_ignored(self):
        broken = os.path.join(self.tmp, "old-mount")
        os.makedirs(os.path.join(broken, ".lakecache", "prefetch"))  # a folder: open fails
        with self.assertLogs("lakecache", "WARNING") as logs:
            self.assertEqual(write_order([os.path.join(broken, "a"), self.path("b")]), 1)
        self.assertIn(broken, logs.output[0])
        with self.assertNoLogs("lakecache"):
            self.assertEqual(write_order([os.path.join(broken, "a")]), 0)
        self.assertEqual(hinted(self.mount), ["b"])

    def test_a_control_file_that_refuses_the_lines_is_logged_and_not_counted(self):
        full = os.path.join(self.tmp, "full-mount")
        os.makedirs(os.path.join(full, ".lakecache"))
        os.symlink("/dev/full", os.path.join(full, ".lakecache", "prefetch"))  # writes: ENOSPC
        with self.assertLogs("lakecache", "WARNING") as logs:
            self.assertEqual(write_order([os.path.join(full, "a"), self.path("b")]), 1)  # close
            many = (os.path.join(full, "%d" % i) for i in range(200000))  # over the write buffer
            self.assertEqual(write_order(many), 0)
        self.assertEqual(len(logs.output), 1)
        self.assertIn("No space left", logs.output[0])


class OrderHintSamplerTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.mount = make_fake_mount(tmp.name)
        self.order = [7, 2, 9, 0, 4, 1, 8, 3, 6, 5]

    def path_of(self, index):
        return os.path.join(self.mount, "f%d" % index)

    def names(self, indices):
        return ["f%d" % i for i in indices]

    def test_without_a_window_the_whole_epoch_is_hinted_before_the_first_index(self):
        sampler = OrderHintSampler(self.order, self.path_of)
        indices = iter(sampler)
        self.assertEqual(next(indices), 7)
        self.assertEqual(hinted(self.mount), self.names(self.order))
        self.assertEqual([7] + list(indices), self.order)

    def test_a_window_is_appended_when_iteration_reaches_the_middle_of_the_previous(self):
        sampler = OrderHintSampler(self.order, self.path_of, window=3)
        hinted_after = []
        for index in sampler:
            hinted_after.append(len(hinted(self.mount)))
        # Windows [0,3) [3,6) [6,9) [9,10): the next is added at positions 1, 4 and 7.
        self.assertEqual(hinted_after, [3, 6, 6, 6, 9, 9, 9, 10, 10, 10])
        self.assertEqual(hinted(self.mount), self.names(self.order))

    def test_each_epoch_starts_a_new_order(self):
        epochs = [self.order, list(reversed(self.order))]
        sampler = OrderHintSampler(EpochSampler(epochs), self.path_of, window=4)
        list(sampler)
        sampler.set_epoch(1)
        self.assertEqual(list(sampler), epochs[1])
        self.assertEqual(hinted(self.mount), self.names(epochs[1]))

    def test_len_and_set_epoch_go_to_the_wrapped_sampler(self):
        wrapped = EpochSampler([[1, 2], [3, 4]])
        sampler = OrderHintSampler(wrapped, self.path_of)
        self.assertEqual(len(sampler), 2)
        sampler.set_epoch(1)
        self.assertEqual(wrapped.epoch, 1)
        OrderHintSampler([1], self.path_of).set_epoch(3)  # nothing to forward to

    def test_a_window_below_one_is_refused(self):
        with self.assertRaises(ValueError):
            OrderHintSampler(self.order, self.path_of, window=0)


class EpochSampler:
    """A sampler with a fixed order per epoch, and set_epoch like DistributedSampler's."""

    def __init__(self, orders):
        self.orders, self.epoch = orders, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.orders[self.epoch])

    def __iter__(self):
        return iter(self.orders[self.epoch])


if __name__ == "__main__":
    unittest.main()
