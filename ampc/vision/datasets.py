"""Image data sets: ``CIFAR10`` (torchvision's on-disk layout, download
with checksums) and ``FakeCIFAR10`` (a built-in, learnable stand-in for
machines without CIFAR-10).

Items are ``(img, target)`` as in torchvision, except that ``img`` is a
NumPy uint8 array (32, 32, 3) where torchvision gives a PIL image: ampc
does not depend on Pillow.  ``transforms.ToTensor`` accepts either.

>>> from ampc.vision.datasets import FakeCIFAR10
>>> ds = FakeCIFAR10(train=False, size=20)
>>> img, target = ds[0]
>>> img.shape, img.dtype, len(ds), ds.classes[target] in ds.classes
((32, 32, 3), dtype('uint8'), 20, True)
"""
import hashlib
import http.client
import os
import pickle
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np

from .. import _C
from ..utils.data.dataset import Dataset
from . import transforms as _transforms

__all__ = ["CIFAR10", "FakeCIFAR10"]

_CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog",
                    "frog", "horse", "ship", "truck"]


# ----------------------------------------------------------------------------
# the common item interface


class _ImageArrayDataset(Dataset):
    """A data set held as ``data`` (N, H, W, C) uint8 and ``targets`` (a
    list of ints), with torchvision's transform arguments."""

    def __init__(self, transform, target_transform):
        self.transform = transform
        self.target_transform = target_transform

    def __getitem__(self, index):
        # A copy: a transform that writes into its input must not change
        # the data set.
        img = self.data[index].copy()
        target = int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __len__(self):
        return len(self.data)

    @property
    def class_to_idx(self):
        return {name: i for i, name in enumerate(self.classes)}

    def _batch_getter(self):
        """Whole batches at once when the transform is made of ampc's
        batchable transforms and there is no target transform; see
        ``ampc.utils.data.dataset``."""
        if self.target_transform is not None:
            return None
        steps = _transforms._batch_pipeline(self.transform)
        if steps is None:
            return None
        return _ImageBatch(self.data, np.asarray(self.targets, np.int64),
                           steps)

    def __repr__(self):
        lines = [f"Dataset {type(self).__name__}",
                 f"    Number of datapoints: {len(self)}"]
        lines += [f"    {line}" for line in self._extra_repr()]
        if self.transform is not None:
            lines.append(f"    Transform: {self.transform!r}")
        if self.target_transform is not None:
            lines.append(
                f"    Target transform: {self.target_transform!r}")
        return "\n".join(lines)


class _ImageBatch:
    """indices -> [images, targets], as default_collate would build them
    from __getitem__'s items."""

    def __init__(self, data, targets, steps):
        self.data = data
        self.targets = targets
        self.steps = steps

    def __call__(self, indices):
        images = _transforms._run_batch(self.steps, self.data[indices])
        return [images, _C.from_numpy(self.targets[indices])]


# ----------------------------------------------------------------------------
# CIFAR-10 files


class _CifarUnpickler(pickle.Unpickler):
    """Unpickles CIFAR batch files: dicts, lists, strings and NumPy arrays,
    nothing else (a pickle can otherwise run arbitrary code)."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name}: a CIFAR file holds only "
            "dicts, lists and NumPy arrays")


def _get(entry, key):
    """entry[key] whether the pickle's keys are str or bytes (files
    written by Python 2 and read with latin1 have str keys; read with
    encoding='bytes' or written from bytes, bytes keys)."""
    if key in entry:
        return entry[key]
    return entry.get(key.encode("ascii"))


def _md5(path, chunk=1 << 20):
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _safe_extract(archive, dest):
    """Extract a .tar.gz into dest, refusing any member that could land
    outside it: absolute paths, '..' components, links, devices."""
    dest_real = os.path.realpath(dest)
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            name = m.name
            parts = name.replace("\\", "/").split("/")
            if os.path.isabs(name) or name.startswith(("/", "\\")) \
                    or ".." in parts:
                raise RuntimeError(
                    f"CIFAR10: refusing to extract {archive}: member "
                    f"{name!r} has a path that escapes the folder")
            if not (m.isfile() or m.isdir()):
                kind = "link" if (m.issym() or m.islnk()) else "special file"
                raise RuntimeError(
                    f"CIFAR10: refusing to extract {archive}: member "
                    f"{name!r} is a {kind}; the CIFAR-10 archive holds "
                    "only files and folders")
            target = os.path.realpath(os.path.join(dest_real, name))
            if os.path.commonpath([dest_real, target]) != dest_real:
                raise RuntimeError(
                    f"CIFAR10: refusing to extract {archive}: member "
                    f"{name!r} has a path that escapes the folder")
        for m in members:
            if hasattr(tarfile, "data_filter"):
                tar.extract(m, dest, filter="data")
            else:
                tar.extract(m, dest)


class _Progress:
    """A one-line download progress report on stderr."""

    def __init__(self, label, total):
        self.label = label
        self.total = total
        self.tty = sys.stderr.isatty()
        self.last = -1
        self.start = time.monotonic()

    def update(self, done):
        if self.total:
            pct = int(100 * done / self.total)
            # Every percent on a terminal, every 10% in a log.
            step = 1 if self.tty else 10
            if pct // step == self.last // step and done != self.total:
                return
            self.last = pct
            rate = done / max(time.monotonic() - self.start, 1e-6) / 1e6
            text = (f"{self.label}: {pct:3d}% ({done / 1e6:.1f}/"
                    f"{self.total / 1e6:.1f} MB, {rate:.1f} MB/s)")
        else:
            text = f"{self.label}: {done / 1e6:.1f} MB"
        sys.stderr.write(("\r" + text) if self.tty else (text + "\n"))
        sys.stderr.flush()

    def close(self):
        if self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _fetch(url, path, timeout=60.0):
    """Download url to path (via path.part), reporting progress."""
    part = path + ".part"
    req = urllib.request.Request(url, headers={"User-Agent": "ampc"})
    with urllib.request.urlopen(req, timeout=timeout) as resp, \
            open(part, "wb") as out:
        total = int(resp.headers.get("Content-Length") or 0)
        bar = _Progress(f"Downloading {os.path.basename(path)}", total)
        done = 0
        while True:
            block = resp.read(1 << 20)
            if not block:
                break
            out.write(block)
            done += len(block)
            bar.update(done)
        bar.close()
    if total and done != total:
        os.unlink(part)
        raise RuntimeError(
            f"CIFAR10: the download of {url} stopped at {done} of {total} "
            "bytes; run again to retry")
    os.replace(part, path)


# ----------------------------------------------------------------------------
# CIFAR10


class CIFAR10(_ImageArrayDataset):
    """The CIFAR-10 data set from ``root/cifar-10-batches-py`` (the folder
    inside the official ``cifar-10-python.tar.gz``, torchvision's layout):
    50,000 training images (``data_batch_1`` .. ``data_batch_5``) or
    10,000 test images (``test_batch``), 32x32 RGB, 10 classes.

    ``download=True`` fetches the archive from ``url`` (or the
    ``AMPC_CIFAR10_URL`` environment variable) when the files are missing,
    checks the MD5 of the archive and of every file in it, and extracts
    it.  Files already present are used as they are, after a check of
    their format.  Items are ``(img, target)``, img a NumPy uint8 array
    (32, 32, 3) (a PIL image in torchvision); ``data`` is (N, 32, 32, 3)
    uint8 and ``targets`` a list of ints, as in torchvision.

    >>> import ampc.vision as torchvision
    >>> ds = torchvision.datasets.CIFAR10(
    ...     "./data", download=True)                # doctest: +SKIP
    >>> len(ds), ds.classes[ds[0][1]]                # doctest: +SKIP
    (50000, 'frog')
    """

    base_folder = "cifar-10-batches-py"
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    filename = "cifar-10-python.tar.gz"
    tgz_md5 = "c58f30108f718f92721af3b95e74349a"
    train_list = [
        ["data_batch_1", "c99cafc152244af753f735de768cd75f"],
        ["data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"],
        ["data_batch_3", "54ebc095f3ab1f0389bbae665268c751"],
        ["data_batch_4", "634d18415352ddfa80567beed471001a"],
        ["data_batch_5", "482c414d41f54cd18b22e5b47cb7c3cb"],
    ]
    test_list = [
        ["test_batch", "40351d587109b95175f43aff81a1287e"],
    ]
    meta = {
        "filename": "batches.meta",
        "key": "label_names",
        "md5": "5ff9c542aee3614f3951f8cda6e48888",
    }
    url_env = "AMPC_CIFAR10_URL"
    image_shape = (3, 32, 32)

    def __init__(self, root, train=True, transform=None,
                 target_transform=None, download=False):
        super().__init__(transform, target_transform)
        self.root = os.path.expanduser(os.fspath(root))
        self.train = train
        if download:
            self.download()
        missing = self._missing_files()
        if missing:
            raise RuntimeError(self._not_found_message(missing))
        files = self.train_list if train else self.test_list
        data, targets = [], []
        for name, _ in files:
            d, t = self._load_batch(os.path.join(self.folder, name))
            data.append(d)
            targets.extend(t)
        c, h, w = self.image_shape
        # Rows are CHW; items are HWC (torchvision's layout), stored
        # contiguous so that batches gather fast.
        self.data = np.ascontiguousarray(
            np.concatenate(data).reshape(-1, c, h, w).transpose(0, 2, 3, 1))
        self.targets = targets
        self.classes = self._load_meta()

    # -- files ---------------------------------------------------------------

    @property
    def folder(self):
        return os.path.join(self.root, self.base_folder)

    def _all_files(self):
        return ([name for name, _ in self.train_list + self.test_list]
                + [self.meta["filename"]])

    def _missing_files(self):
        return [name for name in self._all_files()
                if not os.path.isfile(os.path.join(self.folder, name))]

    def _source_url(self):
        return os.environ.get(self.url_env) or self.url

    def _not_found_message(self, missing):
        folder = os.path.abspath(self.folder)
        return (
            f"CIFAR10: data not found: {folder} lacks "
            f"{', '.join(missing)}.\n"
            f"Expected torchvision's layout: {folder}{os.sep} holding "
            f"{', '.join(self._all_files())} (the folder inside "
            f"{self.filename}).\n"
            f"Pass download=True to fetch {self._source_url()}, or download "
            f"that archive yourself and extract it into "
            f"{os.path.abspath(self.root)}, or put it there as "
            f"{os.path.join(os.path.abspath(self.root), self.filename)} and "
            "pass download=True.\n"
            "Without CIFAR-10, ampc.vision.datasets.FakeCIFAR10 is a "
            "built-in stand-in with the same interface.")

    def _bad_file(self, path, why):
        return RuntimeError(
            f"CIFAR10: {path} is not a valid CIFAR-10 batch file: {why}. It "
            "may be truncated or from another data set; delete "
            f"{os.path.abspath(self.folder)} and run with download=True to "
            "fetch a fresh copy.")

    def _load_pickle(self, path):
        try:
            with open(path, "rb") as f:
                entry = _CifarUnpickler(f, encoding="latin1").load()
        except (EOFError, pickle.UnpicklingError, ValueError, TypeError,
                AttributeError, IndexError, KeyError, ImportError) as e:
            raise self._bad_file(
                path, f"it does not unpickle ({type(e).__name__}: {e})") \
                from None
        if not isinstance(entry, dict):
            raise self._bad_file(
                path, f"it holds a {type(entry).__name__}, not a dict")
        return entry

    def _load_batch(self, path):
        """(data (N, 3072) uint8, labels list) of one batch file, checked."""
        entry = self._load_pickle(path)
        data = _get(entry, "data")
        labels = _get(entry, "labels")
        if labels is None:
            labels = _get(entry, "fine_labels")
        row = int(np.prod(self.image_shape))
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 \
                or data.ndim != 2 or data.shape[1] != row:
            got = (f"{data.dtype} {data.shape}"
                   if isinstance(data, np.ndarray) else type(data).__name__)
            raise self._bad_file(
                path, f"'data' should be a uint8 array (N, {row}), got {got}")
        if not isinstance(labels, (list, np.ndarray)) \
                or len(labels) != len(data):
            n = len(labels) if hasattr(labels, "__len__") else labels
            raise self._bad_file(
                path, f"'labels' should list one label per image "
                f"({len(data)}), got {n!r}")
        labels = [int(v) for v in labels]
        if labels and not 0 <= min(labels) <= max(labels) < \
                len(_CIFAR10_CLASSES):
            raise self._bad_file(
                path, f"labels should be in [0, {len(_CIFAR10_CLASSES)}), "
                f"got [{min(labels)}, {max(labels)}]")
        return data, labels

    def _load_meta(self):
        path = os.path.join(self.folder, self.meta["filename"])
        entry = self._load_pickle(path)
        names = _get(entry, self.meta["key"])
        if not isinstance(names, list) or len(names) != len(
                _CIFAR10_CLASSES):
            raise self._bad_file(
                path, f"'{self.meta['key']}' should list "
                f"{len(_CIFAR10_CLASSES)} class names")
        return [n.decode() if isinstance(n, bytes) else str(n)
                for n in names]

    # -- download ------------------------------------------------------------

    def download(self):
        """Fetch and extract the archive unless the files are present."""
        if not self._missing_files():
            return
        os.makedirs(self.root, exist_ok=True)
        archive = os.path.join(self.root, self.filename)
        url = self._source_url()
        if not (os.path.isfile(archive) and _md5(archive) == self.tgz_md5):
            try:
                _fetch(url, archive)
            except (urllib.error.URLError, OSError,
                    http.client.HTTPException) as e:
                raise RuntimeError(
                    f"CIFAR10: could not download {url}: "
                    f"{getattr(e, 'reason', e)}.\n"
                    + self._not_found_message(self._missing_files())) \
                    from None
            got = _md5(archive)
            if got != self.tgz_md5:
                os.unlink(archive)
                raise RuntimeError(
                    f"CIFAR10: the archive downloaded from {url} has MD5 "
                    f"{got}, expected {self.tgz_md5}: it is corrupted or not "
                    "the CIFAR-10 archive; it was deleted, run again to "
                    "retry")
        self._extract(archive)

    def _extract(self, archive):
        """Extract into a scratch folder, check every file's MD5, then
        move the folder into place: an interrupted run leaves no partial
        folder behind."""
        scratch = tempfile.mkdtemp(prefix=".cifar-extract-", dir=self.root)
        try:
            _safe_extract(archive, scratch)
            src = os.path.join(scratch, self.base_folder)
            checks = self.train_list + self.test_list + [
                [self.meta["filename"], self.meta["md5"]]]
            for name, md5 in checks:
                path = os.path.join(src, name)
                if not os.path.isfile(path):
                    raise RuntimeError(
                        f"CIFAR10: {archive} lacks "
                        f"{self.base_folder}/{name}")
                got = _md5(path)
                if got != md5:
                    raise RuntimeError(
                        f"CIFAR10: {self.base_folder}/{name} in {archive} "
                        f"has MD5 {got}, expected {md5}: the archive is "
                        "corrupted; delete it and run again")
            if os.path.isdir(self.folder):
                shutil.rmtree(self.folder)
            os.replace(src, self.folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _extra_repr(self):
        return [f"Root location: {self.root}",
                f"Split: {'Train' if self.train else 'Test'}"]


# ----------------------------------------------------------------------------
# FakeCIFAR10

# One colour per pair of classes: colour alone tells a pair, the shape
# tells the class within it, so a model must learn shapes too.
_PALETTE = np.array([
    [220, 40, 40], [220, 40, 40], [40, 200, 60], [40, 200, 60],
    [50, 80, 230], [50, 80, 230], [230, 210, 40], [230, 210, 40],
    [200, 60, 210], [200, 60, 210]], dtype=np.float32)
_YY, _XX = np.mgrid[0:32, 0:32].astype(np.float32)
_CHUNK = 1000       # images per independently seeded block


def _shape_mask(kind, dy, dx, r):
    """Class ``kind``'s shape: a bool mask (n, 32, 32) from the pixel
    offsets dy, dx (n, 32, 32) to each image's centre and its size r."""
    ady, adx = np.abs(dy), np.abs(dx)
    if kind == 0:                                   # disk
        return dy * dy + dx * dx <= r * r
    if kind == 1:                                   # square
        return np.maximum(ady, adx) <= 0.8 * r
    if kind == 2:                                   # triangle
        return (dy >= -r) & (dy <= 0.8 * r) & (adx <= 0.6 * (dy + r))
    if kind == 3:                                   # plus
        return ((adx <= 1.5) & (ady <= r)) | ((ady <= 1.5) & (adx <= r))
    if kind == 4:                                   # ring
        d2 = dy * dy + dx * dx
        return (d2 <= r * r) & (d2 >= (r - 2.5) ** 2)
    if kind == 5:                                   # horizontal bar
        return (ady <= 2.0) & (adx <= 1.4 * r)
    if kind == 6:                                   # vertical bar
        return (adx <= 2.0) & (ady <= 1.4 * r)
    if kind == 7:                                   # frame
        m = np.maximum(ady, adx)
        return (m <= r) & (m >= r - 2.0)
    if kind == 8:                                   # diagonal stroke
        return (np.abs(dx - dy) <= 2.5) & (np.abs(dx + dy) <= 2 * r)
    h, q = 0.5 * r, (0.45 * r) ** 2                 # two dots
    return ((dx - h) ** 2 + dy * dy <= q) | ((dx + h) ** 2 + dy * dy <= q)


def _fake_block(seed, split, block):
    """_CHUNK images and labels: a class-coloured shape at a random place
    and size on a random background, plus pixel noise.  Each block has
    its own seed, so a smaller data set is a prefix of a larger one."""
    n = _CHUNK
    rng = np.random.Generator(np.random.PCG64(
        np.random.SeedSequence([seed, split, block])))
    labels = rng.permutation(np.repeat(np.arange(10), n // 10))
    cy = rng.uniform(10, 22, n).astype(np.float32)[:, None, None]
    cx = rng.uniform(10, 22, n).astype(np.float32)[:, None, None]
    r = rng.uniform(5, 9, n).astype(np.float32)[:, None, None]
    bg = rng.uniform(0, 255, (n, 3)).astype(np.float32)
    fg = np.clip(_PALETTE[labels]
                 + rng.normal(0, 30, (n, 3)).astype(np.float32), 0, 255)
    dy, dx = _YY - cy, _XX - cx
    mask = np.empty((n, 32, 32), np.float32)
    for c in range(10):
        sel = labels == c
        mask[sel] = _shape_mask(c, dy[sel], dx[sel], r[sel])
    noise = rng.random((n, 32, 32), dtype=np.float32)
    noise -= 0.5
    noise *= 90
    # Channel planes (n, 32, 32) keep NumPy's inner loops long; one
    # transpose at the end gives HWC.
    img = np.empty((n, 3, 32, 32), np.float32)
    diff = fg - bg
    for ch in range(3):
        plane = img[:, ch]
        np.multiply(mask, diff[:, ch, None, None], out=plane)
        plane += bg[:, ch, None, None]
        plane += noise
    np.clip(img, 0, 255, out=img)
    return img.transpose(0, 2, 3, 1).astype(np.uint8), labels


class FakeCIFAR10(_ImageArrayDataset):
    """A built-in CIFAR-shaped data set for machines without CIFAR-10:
    32x32 RGB uint8 images in 10 classes (50,000 for training, 10,000 for
    test, or ``size``), generated from ``seed`` in a few seconds (50,000
    images: about 1.5 s on one x86-64 core).

    Each class is a shape (disk, square, triangle, ...) drawn in a colour
    that it shares with one other class, at a random place and size, on a
    random background, with noise; train and test come from the same
    distribution with different samples.  A small CNN learns it (the
    lab's SimpleCNN reaches ~65% test accuracy after two epochs on 20,000
    images) while pixel statistics alone do not (nearest class mean:
    ~20%).  Same item interface as ``CIFAR10``; ``root`` is accepted so
    that it can replace CIFAR10 in a script, and is not used.

    >>> from ampc.vision.datasets import FakeCIFAR10
    >>> a = FakeCIFAR10(size=10, seed=3)
    >>> b = FakeCIFAR10(size=10, seed=3)
    >>> bool((a.data == b.data).all()), a.targets == b.targets
    (True, True)
    """

    classes = list(_CIFAR10_CLASSES)

    def __init__(self, root=None, train=True, transform=None,
                 target_transform=None, size=None, seed=0):
        super().__init__(transform, target_transform)
        if size is None:
            size = 50000 if train else 10000
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) \
                or size < 0:
            raise ValueError(
                f"FakeCIFAR10(): size must be a non-negative int, got "
                f"{size!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
                or seed < 0:
            raise ValueError(
                f"FakeCIFAR10(): seed must be a non-negative int, got "
                f"{seed!r}")
        self.root = root
        self.train = train
        self.seed = int(seed)
        split = 0 if train else 1
        data = np.empty((size, 32, 32, 3), np.uint8)
        labels = np.empty(size, np.int64)
        for block in range(-(-size // _CHUNK)):
            lo = block * _CHUNK
            hi = min(lo + _CHUNK, size)
            imgs, labs = _fake_block(self.seed, split, block)
            data[lo:hi] = imgs[:hi - lo]
            labels[lo:hi] = labs[:hi - lo]
        self.data = data
        self.targets = labels.tolist()

    def _extra_repr(self):
        return [f"Split: {'Train' if self.train else 'Test'}",
                f"Seed: {self.seed}"]
