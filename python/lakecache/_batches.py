"""Batches of records made in shared memory by DataLoader workers, their memory reused.

A DataLoader worker hands each batch to the main process as shared memory (one descriptor per
buffer). Memory made fresh for every batch costs a page fault and a page cleared for every 4 KiB
on both sides: at a GB/s of samples that is most of the loader's time. So each worker keeps a few
batch buffers (its pool) and fills one again once the main process no longer holds it. With each
batch goes a small table in shared memory, the worker's own (its ledger: 1 where a buffer is out).
When the main process receives a batch it notes the batch's storage (a weak reference, which
every tensor or view of the batch keeps alive), and clears in the ledger the buffers whose
storage it has let go. Only the main process clears, only the worker sets, and a worker never
writes into a buffer its ledger does not show free; with none free it makes a fresh one.

What counts is this process letting go: a batch handed on to another process (a queue of
torch.multiprocessing) or by raw pointer must be copied first. Out of a DataLoader worker (no
worker processes) batches are ordinary tensors.
"""
import threading
import uuid

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.data import get_worker_info

POOL = 8  # buffers per worker: the batches in its queue, the one it fills and those held
_ALIGN = 64

_lock = threading.Lock()
# Main process: worker ledger token -> (its table, [(slot, StorageWeakRef)] of batches out).
_ledgers = {}


def _received(items, token=None, slot=None, table=None):
    """In the main process, a batch arriving: (data, sizes[, labels]). A pooled one is noted, and
    the buffers that batches received earlier let go of are given back to their workers."""
    data = items[0]
    if token is None:
        return items
    with _lock:
        entry = _ledgers.setdefault(token, (table, []))
        entry[1].append((slot, StorageWeakRef(data.storage())))
        for key in list(_ledgers):
            table_of, out = _ledgers[key]
            still = []
            for s, ref in out:
                if ref.expired():
                    table_of.numpy()[s] = 0
                else:
                    still.append((s, ref))
            if still:
                out[:] = still
            else:
                del _ledgers[key]  # nothing out: the worker's next batch brings its table again
    return items


class _Sent:
    """(data, sizes) on its way from a worker to the main process, where it arrives as a plain
    tuple. Not a tuple itself: a DataLoader's default_convert would make it a list, and lose the
    buffer's slot."""

    def __init__(self, items, ledger=None, slot=None):
        self.items = items
        self.ledger, self.slot = ledger, slot

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __reduce__(self):
        if self.ledger is None:
            return _received, (self.items,)
        return _received, (self.items, self.ledger.token, self.slot, self.ledger.table)


class _Ledger:
    """A worker's table of its buffers, in shared memory: 1 where one is out."""

    def __init__(self):
        self.token = uuid.uuid4().hex
        self.table = torch.zeros(POOL, dtype=torch.int8).share_memory_()
        self.flags = self.table.numpy()


_pool = None  # a worker's Batches for collate_pooled


def collate_pooled(samples):
    """A DataLoader collate_fn for samples that are 1-D uint8 tensors or (tensor, label): the
    flat (data, sizes[, labels]) of examples/pytorch's collate_ragged, made in a worker's pooled
    buffers (no fresh shared memory per batch)."""
    global _pool
    labelled = isinstance(samples[0], tuple)
    tensors = [s[0] for s in samples] if labelled else samples
    if get_worker_info() is None:
        batch = Batches(len(samples))
    else:
        if _pool is None or _pool.batch_size < len(samples):
            _pool = Batches(len(samples))
        batch = _pool
    for t in tensors:
        batch.add(memoryview(t.reshape(-1).numpy()))
    return batch.take([s[1] for s in samples] if labelled else None)


class Batches:
    """Records gathered into batches of at most batch_size, each (data, sizes): data one flat
    uint8 tensor of the records, sizes an int64 tensor of their lengths, both in one buffer."""

    def __init__(self, batch_size):
        self.batch_size = batch_size
        self.shared = get_worker_info() is not None
        self.ledger = _Ledger() if self.shared else None
        self.buffers = [None] * POOL  # by slot: UntypedStorage
        self.header = (8 * batch_size + _ALIGN - 1) // _ALIGN * _ALIGN
        self.storage = self.view = self.slot = None
        self.sizes = []
        self.used = 0

    @property
    def count(self):
        return len(self.sizes)

    def _buffer(self, n):
        """A buffer of at least n bytes (header included): a free one of the pool, else new."""
        if not self.shared:
            return torch.UntypedStorage(n), None
        for slot in range(POOL):
            if self.ledger.flags[slot] == 0:
                self.ledger.flags[slot] = 1
                storage = self.buffers[slot]
                if storage is None or storage.nbytes() < n:
                    storage = torch.UntypedStorage._new_shared(max(n, 2 * self.header))
                    self.buffers[slot] = storage
                return storage, slot
        return torch.UntypedStorage._new_shared(n), None

    def _data(self, storage, n):
        return torch.empty(0, dtype=torch.uint8).set_(storage, self.header, (n,))

    def add(self, record):
        n = len(record)
        if self.storage is None or self.header + self.used + n > self.storage.nbytes():
            want = max(2 * (self.header + self.used + n), 1 << 20)
            if self.storage is not None:
                want = max(want, self.storage.nbytes() * 2)
            storage, slot = self._buffer(want)
            if self.used:
                self._data(storage, self.used)[:] = self._data(self.storage, self.used)
            self._give_back()
            self.storage, self.slot = storage, slot
            self.view = memoryview(self._data(storage, storage.nbytes() - self.header).numpy())
        self.view[self.used:self.used + n] = record
        self.used += n
        self.sizes.append(n)

    def _give_back(self):
        """Frees the buffer being filled (grown out of, or abandoned) for the pool."""
        if self.slot is not None:
            self.ledger.flags[self.slot] = 0
        self.storage = self.view = self.slot = None

    def release(self):
        """Drops the batch being filled (its records are not sent) and frees its buffer."""
        self._give_back()
        self.sizes, self.used = [], 0

    def take(self, labels=None):
        """(data, sizes) of the records added since the last take, and with labels (a list of
        ints, one per record) an int64 tensor of them too; the next batch starts anew."""
        if self.storage is None:
            self.storage, self.slot = self._buffer(self.header)
        sizes = torch.empty(0, dtype=torch.int64).set_(self.storage, 0, (len(self.sizes),))
        sizes[:] = torch.tensor(self.sizes, dtype=torch.int64)
        data = self._data(self.storage, self.used)
        out = (data, sizes)
        if labels is not None:
            out += (torch.tensor(labels, dtype=torch.int64),)
        if self.shared:
            out = _Sent(out, self.ledger if self.slot is not None else None, self.slot)
        self.storage = self.view = self.slot = None
        self.sizes, self.used = [], 0
        return out
