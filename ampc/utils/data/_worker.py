"""DataLoader worker processes: the worker loop, per-worker seeding,
``get_worker_info()``, exceptions carried back to the main process, and
the transfer of batches through shared memory.

How a batch travels: each worker owns a few shared-memory slots, files
under /dev/shm (a tmpfs: RAM, not disk), one per batch it may have in
flight.  It writes a batch's large arrays into a free slot and sends the
main process a small message naming the slot; the main process (which
mapped the slot file once and unlinked it) copies the arrays into tensors
of its own and hands the slot back.  Slots are reused, so their pages
fault in once.  For a (256, 3, 32, 32) float32 batch this costs about
0.25 ms on each side, against about 10 ms to pickle the same batch
through a pipe (measured on a 2-core x86-64 box).  Where /dev/shm is
missing (macOS, Windows) or full, batches are pickled instead.  Slot
files the main process never took over carry the iterator's name prefix
and are removed at shutdown.

>>> from ampc.utils.data import get_worker_info
>>> get_worker_info() is None        # in the main process
True
"""
import collections
import glob
import mmap
import os
import pickle
import random
import signal
import sys
import traceback

import numpy as np

from ... import _C
from ..._creation import manual_seed
from ..._dtype_device import _NP_TO_DTYPE, bfloat16
from ...tensor import Tensor

__all__ = ["get_worker_info", "WorkerInfo"]

_SHM_DIR = "/dev/shm"
# Arrays smaller than this travel pickled with the message: a file would
# cost more than it saves.
_SHM_MIN_BYTES = 1 << 16
_ALIGN = 64
# How often an idle worker checks that its parent is still alive (s).
POLL_INTERVAL = 1.0

_worker_info = None


# ----------------------------------------------------------------------------
# worker info


class WorkerInfo:
    """What a worker knows about itself: ``id``, ``num_workers``, ``seed``
    and its copy of ``dataset``.

    >>> from ampc.utils.data import WorkerInfo
    >>> WorkerInfo(id=0, num_workers=2, seed=7, dataset=None).seed
    7
    """

    def __init__(self, id, num_workers, seed, dataset):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, "
                f"seed={self.seed}, dataset={type(self.dataset).__name__})")


def get_worker_info():
    """In a DataLoader worker, its ``WorkerInfo``; None in the main
    process.  Useful in ``worker_init_fn`` and in a dataset's
    ``__getitem__``."""
    return _worker_info


# ----------------------------------------------------------------------------
# exceptions from workers


class _KeyErrorMessage(str):
    """KeyError quotes its message with repr(); this keeps the multi-line
    traceback readable."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception caught in a worker, with its formatted traceback, to
    re-raise in the main process."""

    def __init__(self, where):
        exc_type, exc, tb = sys.exc_info()
        self.exc_type_name = exc_type.__name__
        self.exc_msg = "".join(traceback.format_exception(exc_type, exc, tb))
        self.where = where
        # Re-raise as the same type where the main process can unpickle it
        # (a class defined inside a function cannot be).
        try:
            pickle.loads(pickle.dumps(exc_type))
            self.exc_type = exc_type
        except Exception:
            self.exc_type = None

    def reraise(self):
        msg = (f"Caught {self.exc_type_name} {self.where}.\n"
               f"Original {self.exc_msg}")
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        if self.exc_type is None:
            raise RuntimeError(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:
            # Exceptions whose constructor takes other arguments.
            raise RuntimeError(msg) from None
        raise exc


# ----------------------------------------------------------------------------
# the worker's environment


def _single_thread_openmp():
    """Run ampc's CPU kernels on one thread in this (forked) process.

    NOTE: GNU libgomp's thread pool does not survive fork(): a child whose
    parent has run a parallel region hangs in its own first parallel
    region unless that region runs a single thread.  PyTorch sets one
    thread in its workers for the same reason; it also keeps N workers
    from each starting a full team on the same cores.
    """
    _C.set_num_threads(1)


def _seed_worker(seed, base_seed, worker_id):
    """Seed ampc, ``random`` and NumPy's global generator (torch's rule:
    ampc and random get base_seed + worker_id)."""
    manual_seed(seed)
    random.seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed])
                   .generate_state(4))


# ----------------------------------------------------------------------------
# batches through shared memory


def shm_available():
    """True where batches can travel through /dev/shm files (POSIX shared
    memory on a tmpfs); AMPC_DATALOADER_SHM=0 turns it off."""
    if os.environ.get("AMPC_DATALOADER_SHM", "1") == "0":
        return False
    return (hasattr(os, "posix_fallocate") and os.path.isdir(_SHM_DIR)
            and os.access(_SHM_DIR, os.W_OK))


class _ShmBatch:
    """A batch whose large arrays are in shared-memory slot ``slot`` of
    its worker (the file ``path``); ``tree`` is the batch with each of
    them replaced by a ``_Ref``.  ``replaces``: the slot's previous file,
    when the worker had to grow it."""

    __slots__ = ("slot", "path", "tree", "replaces")

    def __init__(self, slot, path, tree, replaces):
        self.slot = slot
        self.path = path
        self.tree = tree
        self.replaces = replaces


class _Ref:
    """Where one array lies in a slot, and what it was: an ampc tensor
    ('tensor'), a bfloat16 tensor stored as its bits ('bf16'), or a NumPy
    array ('array')."""

    __slots__ = ("offset", "shape", "np_dtype", "kind")

    def __init__(self, offset, shape, np_dtype, kind):
        self.offset = offset
        self.shape = shape
        self.np_dtype = np_dtype
        self.kind = kind


def _map_tree(obj, fn):
    """obj with fn applied to each leaf of its lists, tuples, namedtuples
    and dicts."""
    if isinstance(obj, list):
        return [_map_tree(o, fn) for o in obj]
    if isinstance(obj, tuple):
        items = [_map_tree(o, fn) for o in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, dict):
        out = {k: _map_tree(v, fn) for k, v in obj.items()}
        if type(obj) is dict:
            return out
        try:
            return type(obj)(out)
        except TypeError:
            return out
    return fn(obj)


def _leaf_array(obj):
    """(array, kind) for a leaf that may go to shared memory, else None."""
    if isinstance(obj, Tensor):
        if obj.device.type != "cpu" or obj.requires_grad:
            return None
        if obj.dtype is bfloat16:
            return _C.to_bits(obj._contiguous()), "bf16"
        return obj._numpy(), "tensor"
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":
        return obj, "array"
    return None


class _Slot:
    __slots__ = ("path", "size", "buf")

    def __init__(self, path, size, buf):
        self.path = path
        self.size = size
        self.buf = buf


class ShmWriter:
    """A worker's shared-memory slots.  A slot holds one batch from the
    moment the worker writes it until the main process has copied it out
    and sent the slot back ("free"); the slots are reused, so their pages
    are faulted in once, not once per batch.  At most ``max_slots``
    exist: as many as the batches a worker can have in flight."""

    def __init__(self, prefix, worker_id, max_slots):
        self.prefix = f"{prefix}-{worker_id}"
        self.max_slots = max_slots
        self.slots = []
        self.free = []
        self.made = 0

    def encode(self, batch, wait_free):
        """The message that carries ``batch``: a _ShmBatch when it has
        large arrays and a slot can hold them, else the batch itself
        (pickled by the pipe).  ``wait_free()`` blocks until the main
        process frees a slot."""
        arrays = []
        size = 0

        def to_ref(obj):
            nonlocal size
            leaf = _leaf_array(obj)
            if leaf is None or leaf[0].nbytes < _SHM_MIN_BYTES:
                return obj
            arr, kind = leaf
            arrays.append((arr, size))
            ref = _Ref(size, arr.shape, arr.dtype.str, kind)
            size += -(-arr.nbytes // _ALIGN) * _ALIGN
            return ref

        tree = _map_tree(batch, to_ref)
        if not arrays:
            return batch
        if not self.free and len(self.slots) < self.max_slots:
            self.slots.append(None)
            self.free.append(len(self.slots) - 1)
        while not self.free:
            wait_free()
        index = self.free.pop()
        slot = self.slots[index]
        replaces = None
        if slot is None or slot.size < size:
            new = self._make(size)
            if new is None:
                self.free.append(index)
                return batch
            if slot is not None:
                replaces = slot.path
                self._drop(slot)
            slot = self.slots[index] = new
        for arr, off in arrays:
            np.copyto(np.ndarray(arr.shape, arr.dtype, buffer=slot.buf,
                                 offset=off), arr)
        return _ShmBatch(index, slot.path, tree, replaces)

    def release(self, index):
        self.free.append(index)

    def _make(self, size):
        path = f"{self.prefix}-{self.made}"
        self.made += 1
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            # posix_fallocate reserves the pages now: a full /dev/shm
            # fails here with ENOSPC (the batch is then pickled) instead
            # of killing the worker with SIGBUS on a write later.
            os.posix_fallocate(fd, 0, size)
            buf = mmap.mmap(fd, size)
        except OSError:
            os.unlink(path)
            return None
        finally:
            os.close(fd)
        return _Slot(path, size, buf)

    def _drop(self, slot):
        slot.buf.close()
        try:
            os.unlink(slot.path)    # unless the main process already did
        except FileNotFoundError:
            pass


class ShmReader:
    """The main process's side: maps each slot file once (unlinking it
    at once, so nothing is left in /dev/shm if either side dies), copies
    batches out of it into tensors of its own, and frees the slot."""

    def __init__(self):
        self.maps = {}

    def decode(self, msg, free):
        """A worker's message -> the batch, in memory this process owns.
        ``free(slot)`` hands a slot back to its worker."""
        if not isinstance(msg, _ShmBatch):
            return msg
        buf = self._map(msg)

        def load(obj):
            if not isinstance(obj, _Ref):
                return obj
            src = np.ndarray(obj.shape, np.dtype(obj.np_dtype), buffer=buf,
                             offset=obj.offset)
            if obj.kind == "array":
                return src.copy()
            if obj.kind == "bf16":
                return _C.from_bits(src.copy(), bfloat16)
            # Into ampc-allocated storage: the allocator reuses the blocks
            # of earlier batches, so no fresh pages fault in, and the
            # batch counts in ampc.memory_allocated() like any tensor.
            t = _C.empty(obj.shape, _NP_TO_DTYPE[src.dtype], "cpu")
            np.copyto(t._numpy(), src)
            return t

        try:
            return _map_tree(msg.tree, load)
        finally:
            free(msg.slot)

    def discard(self, msg, free):
        """Drop a message unread, handing its slot back."""
        if isinstance(msg, _ShmBatch):
            self._map(msg)      # takes over (unlinks) a new slot file
            free(msg.slot)

    def _map(self, msg):
        if msg.replaces is not None:
            old = self.maps.pop(msg.replaces, None)
            if old is not None:
                old.close()
        buf = self.maps.get(msg.path)
        if buf is None:
            fd = os.open(msg.path, os.O_RDONLY)
            try:
                os.unlink(msg.path)
                buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
            self.maps[msg.path] = buf
        return buf

    def close(self):
        for buf in self.maps.values():
            buf.close()
        self.maps.clear()


def remove_leftovers(prefix):
    """Unlink every slot file of an iterator's workers that the main
    process had not yet taken over."""
    for path in glob.glob(glob.escape(prefix) + "-*"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


# ----------------------------------------------------------------------------
# the worker loop


def worker_loop(fetcher, task_queue, result_conn, worker_id, num_workers,
                base_seed, worker_init_fn, shm_prefix, max_slots,
                parent_pid):
    """Serve ("task", epoch, idx, indices) messages until None, sending
    (epoch, idx, message) back in order; ("free", slot) messages return
    shared-memory slots."""
    global _worker_info
    # Ctrl-C is the main process's to handle: it shuts the workers down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _single_thread_openmp()
    seed = base_seed + worker_id
    _seed_worker(seed, base_seed, worker_id)
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers,
                              seed=seed, dataset=fetcher.dataset)
    where = f"in DataLoader worker process {worker_id}"
    writer = None if shm_prefix is None else ShmWriter(
        shm_prefix, worker_id, max_slots)
    tasks = collections.deque()
    stop = False

    def read():
        """One message from the main process (None on a timeout)."""
        nonlocal stop
        try:
            m = task_queue.get(timeout=POLL_INTERVAL)
        except Exception:   # queue.Empty; or the queue broke under us
            if os.getppid() != parent_pid:
                stop = True     # orphaned: the main process is gone
            return
        if m is None:
            stop = True
        elif m[0] == "free":
            writer.release(m[1])
        else:
            tasks.append(m)

    def wait_free():
        read()
        if stop:
            raise _Stop

    init_error = None
    if worker_init_fn is not None:
        try:
            worker_init_fn(worker_id)
        except Exception:
            init_error = ExceptionWrapper(where)
    try:
        while not stop:
            if not tasks:
                read()
                continue
            _, epoch, idx, indices = tasks.popleft()
            if init_error is not None:
                msg, init_error = init_error, None
            else:
                try:
                    batch = fetcher(indices)
                    msg = batch if writer is None else writer.encode(
                        batch, wait_free)
                except _Stop:
                    break
                except Exception:
                    msg = ExceptionWrapper(where)
            try:
                result_conn.send((epoch, idx, msg))
            except (pickle.PicklingError, TypeError, AttributeError):
                result_conn.send(
                    (epoch, idx, ExceptionWrapper(where + " (sending the "
                                                  "batch)")))
            del msg
    except (BrokenPipeError, EOFError, ConnectionResetError):
        pass                # the main process closed its end: shut down
    result_conn.close()


class _Stop(Exception):
    """The main process asked a worker waiting for a free slot to stop."""
