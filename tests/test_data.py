"""ampc.utils.data: collate rules, samplers, DataLoader ordering,
shuffling, drop_last and len; worker processes (order, errors with their
traceback, clean shutdown on break / timeout / Ctrl-C / a dead worker,
seeding); and the fast path against the per-sample path."""
import collections
import glob
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import ampc
import ampc.vision.transforms as T
from ampc.utils.data import (BatchSampler, ConcatDataset, DataLoader,
                             Dataset, Generator, RandomSampler,
                             SequentialSampler, Subset, TensorDataset,
                             default_collate, default_convert,
                             get_worker_info, random_split)
from ampc.vision.datasets import FakeCIFAR10
from helpers import torch_or_skip

LAB = T.Compose([T.ToTensor(), T.Normalize((0.5, 0.5, 0.5),
                                           (0.5, 0.5, 0.5))])
AUG = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
                 T.ToTensor(), T.Normalize((0.4, 0.5, 0.6), (0.2, 0.3, 0.4))])


# ----------------------------------------------------------------------------
# data sets used by the worker tests (module level: picklable for spawn)


class Numbers(Dataset):
    """Item i is (float32 i, i); optionally slow, or failing at one
    index."""

    def __init__(self, n, delay=0.0, fail_at=None, exc=ValueError):
        self.n, self.delay, self.fail_at, self.exc = n, delay, fail_at, exc

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        if i == self.fail_at:
            raise self.exc(f"bad item {i}")
        return np.float32(i), i


class Seeds(Dataset):
    """What a worker's random state gives."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return [info.id, info.seed, float(ampc.rand(1).item()),
                float(np.random.rand()), random.random()]


_INIT_MARK = None


def _mark_init(worker_id):
    global _INIT_MARK
    _INIT_MARK = 100 + worker_id


class InitMark(Dataset):
    """What worker_init_fn left in the worker."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return _INIT_MARK


class ParallelOps(Dataset):
    """Items computed with ampc ops large enough to run in parallel."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return (ampc.ones(1 << 20) * i).sum()


def _alive(pid):
    """True while pid runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids, timeout=5.0):
    end = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.02)
    return [p for p in pids if _alive(p)]


def _leftover_shm(pid=None):
    return glob.glob(f"/dev/shm/ampc-loader-{pid or os.getpid()}-*")


def _batches(loader):
    return [[t.numpy().copy() if isinstance(t, ampc.Tensor) else t
             for t in b] for b in loader]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert len(x) == len(y)
        for u, v in zip(x, y):
            assert u.dtype == v.dtype
            np.testing.assert_array_equal(u, v)


# ----------------------------------------------------------------------------
# collate


def test_collate_tensors_arrays_numbers():
    b = default_collate([ampc.ones(2, 3), ampc.zeros(2, 3)])
    assert b.shape == (2, 2, 3) and b.numpy()[0].sum() == 6
    a = default_collate([np.arange(3, dtype=np.float64), np.ones(3)])
    assert a.dtype is ampc.float32 and a.shape == (2, 3)
    u = default_collate([np.zeros((2, 2), np.uint8)] * 3)
    assert u.dtype is ampc.int64 and u.shape == (3, 2, 2)
    h = default_collate([np.zeros(2, np.float16)] * 2)
    assert h.dtype is ampc.float16
    assert default_collate([1, 2, 3]).dtype is ampc.int64
    f = default_collate([1.5, 2.0])
    assert f.dtype is ampc.float32 and f.tolist() == [1.5, 2.0]
    assert default_collate([True, False]).dtype is ampc.bool
    s = default_collate([np.float64(1.5), np.float64(2.5)])
    assert s.dtype is ampc.float32 and s.tolist() == [1.5, 2.5]
    assert default_collate([np.int32(4), np.int32(5)]).dtype is ampc.int64
    assert default_collate(["a", "b"]) == ["a", "b"]


def test_collate_containers():
    Point = collections.namedtuple("Point", "x y")
    out = default_collate([{"a": 1, "b": (np.ones(2), "s")},
                           {"a": 2, "b": (np.zeros(2), "t")}])
    assert out["a"].tolist() == [1, 2]
    assert isinstance(out["b"], list)           # tuples become lists
    assert out["b"][0].shape == (2, 2) and out["b"][1] == ["s", "t"]
    p = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(p, Point) and p.x.tolist() == [1, 3]
    lists = default_collate([[1, 2], [3, 4]])
    assert [t.tolist() for t in lists] == [[1, 3], [2, 4]]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([ampc.ones(2), ampc.ones(3)])
    with pytest.raises(TypeError, match="found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([np.array(["x"]), np.array(["y"])])


def test_collate_matches_torch():
    tcollate = torch_or_skip().utils.data.default_collate
    batch = [(np.arange(6, dtype=np.float32).reshape(2, 3) + k, k, 0.5 * k,
              {"m": np.int64(k)}) for k in range(4)]
    ours, theirs = default_collate(batch), tcollate(batch)
    assert isinstance(ours, list) and isinstance(theirs, list)
    for o, t in zip(ours[:3], theirs[:3]):
        assert tuple(o.shape) == tuple(t.shape)
        np.testing.assert_array_equal(o.numpy(), t.numpy())
    np.testing.assert_array_equal(ours[3]["m"].numpy(),
                                  theirs[3]["m"].numpy())


def test_default_convert():
    out = default_convert({"x": np.zeros(2), "y": [np.int16(3), "s"]})
    assert out["x"].dtype is ampc.float32
    assert out["y"][0].dtype is ampc.int64 and out["y"][1] == "s"
    assert default_convert((np.ones(1),))[0].tolist() == [1.0]


# ----------------------------------------------------------------------------
# data sets and samplers


def test_datasets():
    x, y = ampc.arange(10).float(), ampc.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10 and ds[3][1].item() == 3
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(ampc.zeros(3), ampc.zeros(4))
    sub = Subset(ds, [9, 0, 4])
    assert len(sub) == 3 and sub[0][1].item() == 9
    cat = ConcatDataset([Numbers(3), Numbers(2)])
    assert len(cat) == 5 and cat[4][1] == 1 and cat[-5][1] == 0
    assert len(Numbers(2) + Numbers(3)) == 5
    with pytest.raises(NotImplementedError):
        Dataset()[0]


def test_random_split():
    g = Generator().manual_seed(7)
    a, b = random_split(range(10), [7, 3], generator=g)
    assert len(a) == 7 and len(b) == 3
    assert sorted(list(a) + list(b)) == list(range(10))
    a2, _ = random_split(range(10), [7, 3],
                         generator=Generator().manual_seed(7))
    assert list(a) == list(a2)
    parts = random_split(range(11), [0.5, 0.3, 0.2])
    assert [len(p) for p in parts] == [6, 3, 2]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(range(10), [5, 6])


def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5],
                                                      [6]]
    assert len(BatchSampler(range(7), 3, True)) == 2
    with pytest.raises(ValueError, match="positive integer"):
        BatchSampler(range(3), 0, False)
    ampc.manual_seed(0)
    r = RandomSampler(range(50), replacement=True, num_samples=200)
    draws = list(r)
    assert len(draws) == 200 and set(draws) <= set(range(50))
    r = RandomSampler(range(5), num_samples=12)
    draws = list(r)
    assert len(draws) == 12 and sorted(draws[:5]) == list(range(5))


# ----------------------------------------------------------------------------
# DataLoader in the main process


def test_order_len_drop_last():
    ds = Numbers(10)
    loader = DataLoader(ds, batch_size=3)
    assert len(loader) == 4
    got = [y.tolist() for _, y in loader]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    x, y = next(iter(loader))
    assert x.dtype is ampc.float32 and y.dtype is ampc.int64
    dropped = DataLoader(ds, batch_size=3, drop_last=True)
    assert len(dropped) == 3 and [len(y) for _, y in dropped] == [3, 3, 3]
    single = list(DataLoader(ds, batch_size=None))
    assert len(single) == 10 and single[4][1] == 4
    assert single[4][0].dtype is ampc.float32
    bs = DataLoader(ds, batch_sampler=[[4, 1], [0]])
    assert [y.tolist() for _, y in bs] == [[4, 1], [0]]
    samp = DataLoader(ds, batch_size=2, sampler=[3, 2, 1])
    assert [y.tolist() for _, y in samp] == [[3, 2], [1]]


def test_shuffle_follows_the_seed():
    ds = Numbers(100)

    def epoch(loader):
        return [i for _, y in loader for i in y.tolist()]

    ampc.manual_seed(0)
    loader = DataLoader(ds, batch_size=16, shuffle=True)
    first, second = epoch(loader), epoch(loader)
    assert sorted(first) == list(range(100))
    assert first != list(range(100)) and first != second
    ampc.manual_seed(0)
    again = DataLoader(ds, batch_size=16, shuffle=True)
    assert epoch(again) == first and epoch(again) == second

    def with_generator():
        return epoch(DataLoader(ds, batch_size=16, shuffle=True,
                                generator=Generator().manual_seed(3)))

    ampc.manual_seed(1)
    a = with_generator()
    ampc.manual_seed(2)
    assert with_generator() == a


def test_argument_errors():
    ds = Numbers(4)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=[0, 1], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option"):
        DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="non-negative"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="timeout"):
        DataLoader(ds, timeout=-1)
    with pytest.raises(ValueError, match="num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(ds, prefetch_factor=3)
    with pytest.raises(ValueError, match="drop_last"):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="positive integer"):
        DataLoader(ds, batch_size=0)


def test_pin_memory_is_accepted():
    with pytest.warns(UserWarning, match="pin_memory"):
        loader = DataLoader(Numbers(4), batch_size=2, pin_memory=True)
    assert [y.tolist() for _, y in loader] == [[0, 1], [2, 3]]


def test_lab_script_usage():
    """The lab's lines, through the module attributes it uses."""
    import ampc as torch
    import ampc.vision as torchvision
    import ampc.vision.transforms as transforms
    transform = transforms.Compose(
        [transforms.ToTensor(),
         transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    trainset = torchvision.datasets.FakeCIFAR10(
        root="./data", train=True, transform=transform, size=600)
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=256,
                                              shuffle=True, num_workers=2)
    sizes = []
    for i, data in enumerate(trainloader, 0):
        inputs, labels = data[0].to("cpu"), data[1].to("cpu")
        assert inputs.dtype is torch.float32 and labels.dtype is torch.int64
        assert -1.0 <= inputs.min().item() and inputs.max().item() <= 1.0
        sizes.append(tuple(inputs.shape))
    assert sizes == [(256, 3, 32, 32), (256, 3, 32, 32), (88, 3, 32, 32)]


# ----------------------------------------------------------------------------
# worker processes


@pytest.mark.parametrize("num_workers", [1, 3])
def test_workers_keep_order(num_workers):
    ds = Numbers(50)
    ref = _batches(DataLoader(ds, batch_size=4))
    loader = DataLoader(ds, batch_size=4, num_workers=num_workers)
    _assert_same(_batches(loader), ref)
    _assert_same(_batches(loader), ref)             # a second epoch
    ampc.manual_seed(5)
    shuffled = _batches(DataLoader(ds, batch_size=4, shuffle=True,
                                   num_workers=num_workers))
    ampc.manual_seed(5)
    _assert_same(shuffled, _batches(DataLoader(ds, batch_size=4,
                                               shuffle=True)))
    assert not _leftover_shm()


def test_workers_large_batches_and_types():
    """Batches big enough for shared memory, of every dtype, with
    non-tensor parts, arrive intact."""
    n = 40
    x = ampc.from_numpy(np.random.default_rng(0).random(
        (n, 3, 40, 40), dtype=np.float32))
    ds = TensorDataset(x, x.half(), x.bfloat16(), ampc.arange(n),
                       x > 0.5)
    ref = list(DataLoader(ds, batch_size=16))
    got = list(DataLoader(ds, batch_size=16, num_workers=2))
    for r, g in zip(ref, got):
        for a, b in zip(r, g):
            assert a.dtype is b.dtype and a.shape == b.shape
            assert bool((a.float() == b.float()).all())
    strings = list(DataLoader(["ab", "cd", "ef"], batch_size=2,
                              num_workers=2))
    assert strings == [["ab", "cd"], ["ef"]]


def test_worker_exception_is_reraised_with_traceback():
    loader = DataLoader(Numbers(40, fail_at=13), batch_size=4,
                        num_workers=2)
    it = iter(loader)
    with pytest.raises(ValueError) as e:
        for _ in it:
            pass
    msg = str(e.value)
    assert "Caught ValueError in DataLoader worker process 1." in msg
    assert "Original Traceback (most recent call last):" in msg
    assert "in __getitem__" in msg and "bad item 13" in msg
    assert _wait_gone(it._worker_pids) == []
    assert not _leftover_shm()


class LocalError(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


def test_worker_exceptions_of_other_kinds():
    with pytest.raises(KeyError, match="Caught KeyError"):
        list(DataLoader(Numbers(8, fail_at=2, exc=KeyError), batch_size=2,
                        num_workers=1))
    # An exception type that cannot be rebuilt from a message.
    with pytest.raises(RuntimeError, match="Caught LocalError"):
        list(DataLoader(Numbers(8, fail_at=2,
                                exc=lambda m: LocalError(m, 1)),
                        batch_size=2, num_workers=1))

    def bad_init(worker_id):
        raise OSError("no init")

    with pytest.raises(OSError, match="no init"):
        list(DataLoader(Numbers(8), batch_size=2, num_workers=1,
                        worker_init_fn=bad_init))


def test_early_break_stops_workers():
    loader = DataLoader(FakeCIFAR10(size=2000, transform=LAB),
                        batch_size=64, num_workers=2)
    it = iter(loader)
    for k, _ in enumerate(it):
        if k == 2:
            break
    pids = it._worker_pids
    assert all(_alive(p) for p in pids)
    del it
    assert _wait_gone(pids) == []
    assert not _leftover_shm()
    assert not multiprocessing.active_children()


def test_timeout():
    loader = DataLoader(Numbers(8, delay=0.5), batch_size=4, num_workers=1,
                        timeout=0.2)
    it = iter(loader)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
        next(it)
    assert time.monotonic() - t0 < 5
    assert _wait_gone(it._worker_pids) == []


def test_dead_worker_is_reported():
    it = iter(DataLoader(Numbers(400, delay=0.01), batch_size=4,
                         num_workers=2))
    next(it)
    os.kill(it._worker_pids[0], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="killed by signal: SIGKILL"):
        for _ in it:
            pass
    assert _wait_gone(it._worker_pids) == []


_CTRL_C_SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import ampc
    from ampc.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 10 ** 6
        def __getitem__(self, i):
            time.sleep(0.002)
            return np.zeros((3, 32, 32), np.float32), i

    it = iter(DataLoader(Slow(), batch_size=64, num_workers=2))
    next(it)
    print(*it._worker_pids, flush=True)
    for batch in it:
        pass
""")


def test_ctrl_c_leaves_no_workers(tmp_path):
    script = tmp_path / "ctrl_c.py"
    script.write_text(_CTRL_C_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "KeyboardInterrupt" in err
    assert _wait_gone(pids) == []
    assert not _leftover_shm(proc.pid)


def test_workers_can_run_parallel_ops():
    """OpenMP's thread pool does not survive fork: workers must still run
    ampc's parallel kernels after the main process has used them."""
    assert (ampc.ones(1 << 22) * 2).sum().item() == 2 * (1 << 22)
    loader = DataLoader(ParallelOps(), batch_size=2, num_workers=2,
                        timeout=30)
    assert [b.tolist() for b in loader] == [[0.0, 1 << 20],
                                            [2 << 20, 3 << 20]]


def test_worker_seeds():
    def run(seed):
        ampc.manual_seed(seed)
        loader = DataLoader(Seeds(), batch_size=None, num_workers=2)
        return [list(map(float, item)) for item in loader]

    a = run(0)
    assert run(0) == a
    assert run(1) != a
    by_worker = {int(item[0]): item for item in a}
    assert set(by_worker) == {0, 1}
    # seed = base_seed + worker_id, and every generator differs per worker.
    assert by_worker[1][1] == by_worker[0][1] + 1
    for k in (2, 3, 4):
        assert by_worker[0][k] != by_worker[1][k]
    loader = DataLoader(InitMark(), batch_size=None, num_workers=2,
                        worker_init_fn=_mark_init)
    assert sorted(loader) == [100, 100, 101, 101]


def test_persistent_workers():
    loader = DataLoader(Numbers(30), batch_size=4, num_workers=2,
                        persistent_workers=True)
    first = [y.tolist() for _, y in loader]
    pids = loader._iterator._worker_pids
    for k, _ in enumerate(loader):      # break early: stale results
        if k == 1:
            break
    assert [y.tolist() for _, y in loader] == first
    assert loader._iterator._worker_pids == pids
    it = loader._iterator
    it._shutdown()
    assert _wait_gone(pids) == []


def test_forked_copy_leaves_the_workers_alone():
    """A forked process (a worker of another loader) holds copies of the
    live iterators; freeing one there must not stop the real workers."""
    loader = DataLoader(Numbers(8), batch_size=2, num_workers=1,
                        persistent_workers=True)
    first = [y.tolist() for _, y in loader]
    it = loader._iterator
    child = multiprocessing.get_context("fork").Process(target=it._shutdown)
    child.start()
    child.join()
    assert child.exitcode == 0
    assert [y.tolist() for _, y in loader] == first
    it._shutdown()
    assert _wait_gone(it._worker_pids) == []


def test_spawn_context():
    ds = FakeCIFAR10(size=300, transform=LAB)
    ref = _batches(DataLoader(ds, batch_size=100))
    got = _batches(DataLoader(ds, batch_size=100, num_workers=1,
                              multiprocessing_context="spawn"))
    _assert_same(got, ref)


# ----------------------------------------------------------------------------
# fast path


def _slow(loader_kwargs):
    """The same loader forced onto the per-sample path (a collate_fn
    that is not the default one)."""
    return DataLoader(**loader_kwargs,
                      collate_fn=lambda b: default_collate(b))


def test_fast_path_equals_per_sample_path():
    ds = FakeCIFAR10(size=700, transform=LAB)
    kw = dict(dataset=ds, batch_size=128)
    assert DataLoader(**kw)._fetcher().batch_getter is not None
    assert _slow(kw)._fetcher().batch_getter is None
    ref = _batches(_slow(kw))
    _assert_same(_batches(DataLoader(**kw)), ref)
    _assert_same(_batches(DataLoader(**kw, num_workers=2)), ref)
    # Other batchable pipelines, and Subsets of them.
    for tf in (None, T.ToTensor(), T.Compose([])):
        ds.transform = tf
        _assert_same(_batches(DataLoader(**kw)), _batches(_slow(kw)))
    ds.transform = LAB
    sub = Subset(ds, list(range(699, 0, -3)))
    kw = dict(dataset=sub, batch_size=50)
    assert DataLoader(**kw)._fetcher().batch_getter is not None
    _assert_same(_batches(DataLoader(**kw)), _batches(_slow(kw)))


def test_fast_path_tensor_dataset():
    x = ampc.from_numpy(np.random.default_rng(1).random((30, 5),
                                                        dtype=np.float32))
    kw = dict(dataset=TensorDataset(x, ampc.arange(30)), batch_size=7)
    assert DataLoader(**kw)._fetcher().batch_getter is not None
    _assert_same(_batches(DataLoader(**kw)), _batches(_slow(kw)))
    grad = TensorDataset(ampc.zeros(4, 2, requires_grad=True))
    assert DataLoader(grad)._fetcher().batch_getter is None


def test_fast_path_only_for_known_transforms():
    class MyToTensor(T.ToTensor):
        pass

    for tf in (T.Compose([MyToTensor()]), T.Compose([lambda v: v]),
               T.Compose([T.Normalize((0,), (1,)), T.ToTensor()])):
        ds = FakeCIFAR10(size=10, transform=tf)
        assert DataLoader(ds)._fetcher().batch_getter is None
    ds = FakeCIFAR10(size=10, transform=LAB, target_transform=int)
    assert DataLoader(ds)._fetcher().batch_getter is None


def test_fast_path_random_transforms_same_distribution():
    ds = FakeCIFAR10(size=1200, transform=AUG)
    loader = DataLoader(ds, batch_size=300)
    assert loader._fetcher().batch_getter is not None
    ampc.manual_seed(0)
    fast = np.concatenate([x.numpy() for x, _ in loader])
    ampc.manual_seed(0)
    again = np.concatenate([x.numpy() for x, _ in loader])
    np.testing.assert_array_equal(fast, again)      # follows the seed
    plain = np.concatenate([x.numpy() for x, _ in DataLoader(
        FakeCIFAR10(size=1200, transform=T.Compose(AUG.transforms[2:])),
        batch_size=300)])
    # Same per-channel statistics as the per-sample path...
    ampc.manual_seed(0)
    slow = np.concatenate([x.numpy() for x, _ in _slow(
        dict(dataset=ds, batch_size=300))])
    np.testing.assert_allclose(fast.mean(axis=(0, 2, 3)),
                               slow.mean(axis=(0, 2, 3)), atol=0.05)
    # ... and the same share of untouched images (no shift, no flip):
    # 1/81 * 1/2 of them.
    same = (fast == plain).all(axis=(1, 2, 3)).mean()
    assert same < 0.03
