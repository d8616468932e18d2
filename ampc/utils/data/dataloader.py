"""``DataLoader``: batches from a data set, in the main process or in
worker processes that prefetch in parallel, as ``torch.utils.data``.

Workers (``num_workers > 0``) are real processes, started with 'fork' on
Linux (the data set is shared copy-on-write, nothing is pickled) and with
Python's default elsewhere ('spawn' on macOS and Windows: the data set
and functions must then be picklable); ``multiprocessing_context``
chooses another.  As in PyTorch, forked workers must not use CUDA.  Each worker has its own task queue; batches come back
through one pipe per worker and are delivered in sampler order.  A
worker's exception is re-raised in the main process with its traceback;
on an error, a timeout, Ctrl-C, an early ``break`` or the end of the data
the workers are stopped and joined.

Fast path: when the default collate is in use and the data set can build
a whole batch at once (``TensorDataset``; ``CIFAR10`` and ``FakeCIFAR10``
whose transform is made of ToTensor, Normalize, RandomCrop and
RandomHorizontalFlip; Subsets of these), the loader gathers each batch
with one fancy-index and runs the transforms on the whole batch.  The
values are those of the per-sample path (bit for bit for deterministic
transforms; the same distribution for random ones).

>>> import ampc
>>> from ampc.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(ampc.arange(10).float(), ampc.arange(10))
>>> [y.tolist() for _, y in DataLoader(ds, batch_size=4)]
[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
"""
import contextlib
import itertools
import multiprocessing
import multiprocessing.connection
import numbers
import os
import signal
import sys
import time
import uuid
import warnings
import weakref

import numpy as np

from ... import cuda as _cuda
from . import _worker
from ._collate import default_collate, default_convert
from ._random import draw_seed
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader"]

# How long shutdown lets the workers finish the batch in hand, in all,
# before terminating them (s): a worker holds no state worth more waiting.
_JOIN_TIMEOUT = 1.0


class DataLoader:
    """Iterate over ``dataset`` in batches.

    Arguments follow PyTorch: ``batch_size`` (None: no batching),
    ``shuffle`` (a new order each epoch, from ampc's generator or
    ``generator``), ``sampler`` / ``batch_sampler`` (custom orders),
    ``num_workers`` (worker processes; 0 loads in the main process),
    ``collate_fn`` (default: ``default_collate``), ``pin_memory`` (copy
    each batch's tensors into pinned host memory, so that
    ``x.to("cuda", non_blocking=True)`` is fast and queued; needs a GPU,
    warns and does nothing without one), ``drop_last``,
    ``timeout`` (seconds to wait for a worker's batch; 0: forever),
    ``worker_init_fn(worker_id)``, ``multiprocessing_context``,
    ``generator``, ``prefetch_factor`` (batches in flight per worker,
    default 2) and ``persistent_workers`` (keep workers between epochs).

    >>> import ampc
    >>> from ampc.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(ampc.zeros(10, 3), ampc.arange(10))
    >>> _ = ampc.manual_seed(0)
    >>> x, y = next(iter(DataLoader(ds, batch_size=4, shuffle=True)))
    >>> x.shape, y.shape
    (ampc.Size([4, 3]), ampc.Size([4]))
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None,
                 batch_sampler=None, num_workers=0, collate_fn=None,
                 pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor=None,
                 persistent_workers=False):
        if isinstance(num_workers, bool) or not isinstance(
                num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use "
                "num_workers=0 to disable multiprocessing.")
        if not isinstance(timeout, numbers.Real) or timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in "
                "multiprocessing.let num_workers > 0 to enable "
                "multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is None:
            prefetch_factor = 2
        if isinstance(prefetch_factor, bool) or not isinstance(
                prefetch_factor, numbers.Integral) or prefetch_factor < 1:
            raise ValueError(
                "prefetch_factor option should be a positive integer, got "
                f"{prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if shuffle not in (None, True, False):
            raise TypeError(
                f"DataLoader(): shuffle must be a bool, got {shuffle!r}")
        if not hasattr(dataset, "__getitem__"):
            raise TypeError(
                "DataLoader(): dataset must be a map-style data set (with "
                f"__getitem__ and __len__), got {type(dataset).__name__}")

        if sampler is not None and shuffle:
            raise ValueError(
                "sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None \
                    or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with "
                    "batch_size, shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is "
                "mutually exclusive with drop_last")
        if sampler is None:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self._default_collate = collate_fn in (None, default_collate)
        self.pin_memory = bool(pin_memory)
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = int(prefetch_factor)
        self.persistent_workers = bool(persistent_workers)
        self._iterator = None
        if self.pin_memory and not _cuda.is_available():
            warnings.warn(
                "'pin_memory' argument is set as true but no accelerator is "
                "found, then device pinned memory won't be used.",
                stacklevel=2)

    @property
    def _pinning(self):
        """Whether batches are pinned (pin_memory=True and a GPU)."""
        return self.pin_memory and _cuda.is_available()

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None or self._iterator._closed:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset()
            return self._iterator
        return _MultiProcessIter(self)

    def _fetcher(self):
        """What turns a sampler's output into a batch: the data set's
        batch getter where there is one, else __getitem__ + collate."""
        getter = None
        if self._auto_collation and self._default_collate:
            make = getattr(self.dataset, "_batch_getter", None)
            getter = make() if make is not None else None
        return _Fetcher(self.dataset, self._auto_collation, self.collate_fn,
                        getter)

    def _context(self):
        ctx = self.multiprocessing_context
        if ctx is None:
            # fork shares the data set instead of pickling it to each
            # worker; it is safe on Linux (see _worker._single_thread_openmp
            # for OpenMP), not on macOS, where Python defaults to spawn.
            return multiprocessing.get_context(
                "fork" if sys.platform.startswith("linux") else None)
        if isinstance(ctx, str):
            return multiprocessing.get_context(ctx)
        return ctx


class _Fetcher:
    """indices -> batch, in the main process or in a worker."""

    def __init__(self, dataset, auto_collation, collate_fn, batch_getter):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.batch_getter = batch_getter

    def __call__(self, index):
        if self.batch_getter is not None:
            return self.batch_getter(np.asarray(index, dtype=np.int64))
        if self.auto_collation:
            return self.collate_fn([self.dataset[i] for i in index])
        return self.collate_fn(self.dataset[index])


# ----------------------------------------------------------------------------
# pinning


def _pin(data):
    """``data`` with every CPU tensor in it (through dicts, lists, tuples
    and namedtuples, as PyTorch's pin_memory) copied to pinned memory.

    >>> import ampc
    >>> _pin({"n": 3})
    {'n': 3}
    """
    from ...tensor import Tensor
    if isinstance(data, Tensor):
        return data.pin_memory() if data.device_type == "cpu" else data
    if isinstance(data, dict):
        return type(data)((k, _pin(v)) for k, v in data.items())
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_pin(v) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(_pin(v) for v in data)
    return data


# ----------------------------------------------------------------------------
# iterators


class _BaseIter:
    def __init__(self, loader):
        self._loader = loader
        self._sampler_iter = iter(loader._index_sampler)
        # Drawn with or without workers (as PyTorch does), so that a seed
        # gives the same shuffle either way.
        self._base_seed = draw_seed(loader.generator)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetch = loader._fetcher()

    def __next__(self):
        index = next(self._sampler_iter)
        batch = self._fetch(index)
        if self._loader._pinning:
            batch = _pin(batch)
        self._num_yielded += 1
        return batch


class _WorkerPool:
    """The worker processes of one iterator and their channels: a task
    queue per worker, a result pipe per worker, the shared-memory
    reader.  Separate from the iterator so that a weakref.finalize can
    shut it down when the iterator is collected or the interpreter
    exits, whichever comes first."""

    def __init__(self, loader, base_seed):
        self.workers = []
        self.task_queues = []
        self.result_conns = []
        self.reader = _worker.ShmReader()
        self.shm_prefix = None
        if _worker.shm_available():
            self.shm_prefix = os.path.join(
                _worker._SHM_DIR,
                f"ampc-loader-{os.getpid()}-{uuid.uuid4().hex[:12]}")
        self.closed = False
        self.owner = os.getpid()
        ctx = loader._context()
        fetcher = loader._fetcher()
        n = loader.num_workers
        # Python >= 3.12 warns on fork() with threads alive (here: OpenMP's
        # idle pool); the workers reset OpenMP to one thread, which is the
        # hazard it warns about.  NOTE: catch_warnings() resets Python's
        # "warn once" registry, so it is used only where that warning exists;
        # elsewhere a script's own warnings would repeat every epoch.
        quiet = (warnings.catch_warnings() if sys.version_info >= (3, 12)
                 else contextlib.nullcontext())
        try:
            with quiet:
                if sys.version_info >= (3, 12):
                    warnings.filterwarnings(
                        "ignore", category=DeprecationWarning,
                        message=".*multi-threaded.*fork.*")
                for wid in range(n):
                    self._start(ctx, loader, fetcher, wid, n, base_seed)
        except BaseException:
            self.shutdown()
            raise

    def _start(self, ctx, loader, fetcher, wid, n, base_seed):
        tasks = ctx.Queue()
        recv_end, send_end = ctx.Pipe(duplex=False)
        w = ctx.Process(
            target=_worker.worker_loop,
            args=(fetcher, tasks, send_end, wid, n, base_seed,
                  loader.worker_init_fn, self.shm_prefix,
                  loader.prefetch_factor, os.getpid()),
            daemon=True)
        self.task_queues.append(tasks)
        self.result_conns.append(recv_end)
        w.start()
        self.workers.append(w)
        # The worker holds the send end now; closing ours lets a dead
        # worker show up as EOF on the pipe.
        send_end.close()

    def shutdown(self):
        """Stop and join every worker (terminating those that do not
        finish their batch in time), close the channels, and remove any
        shared memory left behind."""
        # NOTE: a forked worker inherits copies of the iterators alive in
        # the main process; when its garbage collector frees one, this
        # runs there and must leave the main process's workers alone.
        if self.closed or os.getpid() != self.owner:
            return
        self.closed = True
        try:
            for q in self.task_queues:
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
            # A worker blocked on sending a batch gets a broken pipe.
            for conn in self.result_conns:
                conn.close()
            deadline = time.monotonic() + _JOIN_TIMEOUT
            for w in self.workers:
                w.join(timeout=max(deadline - time.monotonic(), 0.0))
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=1.0)
                if w.is_alive():
                    w.kill()
                    w.join()
            for q in self.task_queues:
                q.cancel_join_thread()
                q.close()
        finally:
            self.reader.close()
            if self.shm_prefix is not None:
                _worker.remove_leftovers(self.shm_prefix)


class _MultiProcessIter(_BaseIter):
    """Workers with one task queue each; task i goes to worker i mod N,
    so worker w's results arrive on its pipe in task order and the next
    batch is always the next message of a known worker."""

    def __init__(self, loader):
        super().__init__(loader)
        self._timeout = loader.timeout
        self._prefetch = loader.prefetch_factor * loader.num_workers
        self._persistent = loader.persistent_workers
        self._pool = _WorkerPool(loader, self._base_seed)
        self._finalizer = weakref.finalize(self, self._pool.shutdown)
        self._worker_pids = [w.pid for w in self._pool.workers]
        self._epoch = 0
        self._start_epoch()

    @property
    def _closed(self):
        return self._pool.closed

    def _shutdown(self):
        self._finalizer()

    def _start_epoch(self):
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_worker = {}
        self._worker_cycle = itertools.cycle(range(len(self._pool.workers)))
        for _ in range(self._prefetch):
            self._put_task()

    def _reset(self):
        """A new epoch for persistent workers: a fresh sampler pass; the
        results still in flight from the last one are dropped as they
        arrive (they carry the old epoch number)."""
        self._sampler_iter = iter(self._loader._index_sampler)
        self._num_yielded = 0
        self._epoch += 1
        self._start_epoch()

    def _put_task(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        wid = next(self._worker_cycle)
        self._pool.task_queues[wid].put(
            ("task", self._epoch, self._send_idx, index))
        self._task_worker[self._send_idx] = wid
        self._send_idx += 1

    def __next__(self):
        try:
            return self._next()
        except StopIteration:
            raise
        except BaseException:
            # A worker's error, a timeout, a dead worker or Ctrl-C: stop
            # every worker before the exception leaves.
            self._shutdown()
            raise

    def _next(self):
        if self._closed or self._rcvd_idx >= self._send_idx:
            if not self._persistent:
                self._shutdown()
            raise StopIteration
        wid = self._task_worker.pop(self._rcvd_idx)
        queue = self._pool.task_queues[wid]
        reader = self._pool.reader

        def free(slot):
            queue.put(("free", slot))

        while True:
            epoch, idx, msg = self._receive(wid)
            if epoch == self._epoch:
                break
            reader.discard(msg, free)
        self._rcvd_idx += 1
        if isinstance(msg, _worker.ExceptionWrapper):
            msg.reraise()
        batch = reader.decode(msg, free)
        self._put_task()
        if self._loader._pinning:
            # in the main process: pinned memory belongs to this process's
            # CUDA context and cannot travel through a pipe
            batch = _pin(batch)
        self._num_yielded += 1
        return batch

    def _receive(self, wid):
        """The next message from worker wid, watching for its death and
        for the timeout."""
        conn = self._pool.result_conns[wid]
        worker = self._pool.workers[wid]
        timeout = self._timeout if self._timeout > 0 else None
        ready = multiprocessing.connection.wait([conn, worker.sentinel],
                                                timeout)
        if not ready:
            raise RuntimeError(
                f"DataLoader timed out after {self._timeout} seconds")
        if conn in ready or conn.poll():
            try:
                return conn.recv()
            except EOFError:
                pass
        worker.join(timeout=1.0)
        code = worker.exitcode
        how = (f"is killed by signal: {_signal_name(-code)}"
               if code is not None and code < 0 else
               f"exited unexpectedly with exit code {code}")
        raise RuntimeError(f"DataLoader worker (pid {worker.pid}) {how}.")


def _signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)
