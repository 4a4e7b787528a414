"""Batches of records made in shared memory by DataLoader workers, their memory reused.

A DataLoader worker hands each batch to the main process as shared memory (one descriptor per
tensor). Memory made fresh for every batch costs a page fault and a page cleared for every 4 KiB
on both sides: at a GB/s of samples that is most of the loader's time. So each worker keeps a few
batch buffers (a pool) and fills one again once the main process no longer holds it: when the
main process receives a batch it notes the batch's storage (a weak reference to it, which every
tensor or view of the batch keeps alive), and marks in a small table both sides share (the
ledger) the buffers whose storage it has let go. A worker never writes into a buffer the ledger
does not show free; with none free it makes a fresh one, as without a pool. Out of a DataLoader
worker (no worker processes) batches are ordinary tensors.
"""
import threading
import uuid

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.data import get_worker_info

POOL = 8  # buffers per worker: the batches in its queue, the one it fills and those held
MAX_WORKERS = 64  # workers with a pool; more make fresh buffers
_ALIGN = 64

_lock = threading.Lock()
_ledgers = {}  # main process: token -> (ledger, [(slot, StorageWeakRef), ...] received)


class Ledger:
    """The table of a dataset's buffers, made in the main process before its workers start (they
    inherit it, or receive it with the dataset): 1 where a worker's buffer is in use."""

    def __init__(self):
        self.token = uuid.uuid4().hex
        self.table = torch.zeros(MAX_WORKERS * POOL, dtype=torch.int8).share_memory_()
        with _lock:
            _ledgers[self.token] = (self.table.numpy(), [])

    def __getstate__(self):
        return self.token, self.table

    def __setstate__(self, state):
        self.token, self.table = state


def _received(data, sizes, token, slot):
    """In the main process, a pooled batch arriving: noted, and the buffers it let go freed."""
    with _lock:
        entry = _ledgers.get(token)
        if entry is not None:
            table, held = entry
            still = []
            for s, ref in held:
                if ref.expired():
                    table[s] = 0
                else:
                    still.append((s, ref))
            still.append((slot, StorageWeakRef(data.storage())))
            held[:] = still
    return data, sizes


class _Pooled:
    """(data, sizes) of a buffer of the pool, on its way to the main process, where it arrives as
    a plain tuple. Not a tuple itself: a DataLoader's default_convert would make it a list."""

    def __init__(self, data, sizes, token, slot):
        self.items = (data, sizes)
        self.token, self.slot = token, slot

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return 2

    def __iter__(self):
        return iter(self.items)

    def __reduce__(self):
        return _received, (*self.items, self.token, self.slot)


class Batches:
    """Records gathered into batches of at most batch_size, each (data, sizes): data one flat
    uint8 tensor of the records, sizes an int64 tensor of their lengths, both in one buffer."""

    def __init__(self, batch_size, ledger):
        self.batch_size = batch_size
        self.ledger = ledger
        info = get_worker_info()
        self.shared = info is not None
        self.slots = []
        if self.shared and ledger is not None and info.id < MAX_WORKERS:
            self.slots = list(range(info.id * POOL, (info.id + 1) * POOL))
        self.buffers = {}  # slot -> UntypedStorage
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
        table = self.ledger.table.numpy() if self.slots else None
        for slot in self.slots:
            if table[slot] == 0:
                table[slot] = 1
                storage = self.buffers.get(slot)
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
            self._release()
            self.storage, self.slot = storage, slot
            self.view = memoryview(self._data(storage, storage.nbytes() - self.header).numpy())
        self.view[self.used:self.used + n] = record
        self.used += n
        self.sizes.append(n)

    def _release(self):
        """Gives back a buffer left unsent (grown out of, or a batch never taken)."""
        if self.slot is not None:
            self.ledger.table.numpy()[self.slot] = 0
        self.storage = self.view = self.slot = None

    def take(self):
        """(data, sizes) of the records added since the last take; the next batch starts anew."""
        if self.storage is None:
            self.storage, self.slot = self._buffer(self.header)
        sizes = torch.empty(0, dtype=torch.int64).set_(self.storage, 0, (len(self.sizes),))
        sizes[:] = torch.tensor(self.sizes, dtype=torch.int64)
        out = (self._data(self.storage, self.used), sizes)
        if self.slot is not None:
            out = _Pooled(*out, self.ledger.token, self.slot)
        self.storage = self.view = self.slot = None
        self.sizes, self.used = [], 0
        return out
