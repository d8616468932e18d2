"""The lab's data: CIFAR-10 from a folder in torchvision's layout when it is
there, else the built-in FakeCIFAR10, with the lab's transform (ToTensor,
then Normalize to [-1, 1]) and optionally fewer images.

>>> from ampc.lab.data import load_data
>>> data = load_data("fake", train_size=100, test_size=50)
>>> data.source, len(data.train), len(data.test)
('fake', 100, 50)
"""
import os
from dataclasses import dataclass

from ..utils.data import Dataset
from ..vision import transforms
from ..vision.datasets import CIFAR10, FakeCIFAR10

__all__ = ["LabData", "load_data", "lab_transform", "CIFAR10_TRAIN",
           "CIFAR10_TEST"]

CIFAR10_TRAIN = 50000
CIFAR10_TEST = 10000

# FakeCIFAR10 is drawn from a fixed seed, so that runs with different
# --seed values (initial weights, batch order) still see the same images.
_FAKE_SEED = 0


def lab_transform():
    """The transform of the lab's scripts: uint8 HWC images to float32 CHW
    tensors in [-1, 1].

    >>> import numpy as np
    >>> lab_transform()(np.zeros((32, 32, 3), np.uint8)).shape
    ampc.Size([3, 32, 32])
    """
    return transforms.Compose(
        [transforms.ToTensor(),
         transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])


@dataclass
class LabData:
    """The training and test sets of a lab run and where they came from:
    ``source`` is "cifar10" or "fake"; ``root`` the CIFAR-10 folder used;
    ``note`` the one line that says why the built-in set stands in, or
    None.

    >>> d = load_data("fake", train_size=10, test_size=10)
    >>> d.describe()
    'FakeCIFAR10 (built in): 10 training / 10 test images'
    """

    train: Dataset
    test: Dataset
    source: str
    root: str = None
    note: str = None

    def describe(self):
        name = ("CIFAR-10 from " + self.root if self.source == "cifar10"
                else "FakeCIFAR10 (built in)")
        return (f"{name}: {len(self.train):,} training / "
                f"{len(self.test):,} test images")


def _cifar_root(path):
    """The folder that holds ``cifar-10-batches-py``: ``path`` itself, or
    its parent when ``path`` is that folder."""
    path = os.path.expanduser(os.fspath(path))
    inner = os.path.join(path, CIFAR10.base_folder)
    if not os.path.isdir(inner) and \
            os.path.basename(os.path.normpath(path)) == CIFAR10.base_folder:
        return os.path.dirname(os.path.normpath(path)) or "."
    return path


def _take(ds, n, what, total):
    """Keep the first ``n`` images of ``ds`` (the CIFAR-10 files are in
    random order, so a prefix has every class in about equal share)."""
    if n is None:
        return ds
    if n > len(ds):
        raise ValueError(
            f"{what} {n:,} is more than the {len(ds):,} images there "
            f"(CIFAR-10 has {total:,})")
    ds.data = ds.data[:n]
    ds.targets = ds.targets[:n]
    return ds


def load_data(data="./data", train_size=None, test_size=None,
              download=False):
    """The lab's data sets.

    ``data`` is a folder that holds (or is) ``cifar-10-batches-py``, or
    "fake" for the built-in FakeCIFAR10.  A folder without CIFAR-10 falls
    back to FakeCIFAR10 and says so in ``note``, unless ``download`` is
    true: then CIFAR-10 is downloaded into it (and an error raised where
    that fails).  A CIFAR-10 folder that is there but damaged raises
    CIFAR10's error, which says how to repair it.  ``train_size`` and
    ``test_size`` keep that many images (None: all; FakeCIFAR10 then has
    CIFAR-10's sizes).

    >>> load_data("/nonexistent", train_size=20, test_size=20).note[:24]
    'CIFAR-10 not found under'
    """
    transform = lab_transform()
    if str(data) != "fake":
        root = _cifar_root(data)
        folder = os.path.join(root, CIFAR10.base_folder)
        if download or os.path.isdir(folder):
            train = CIFAR10(root, train=True, download=download,
                            transform=transform)
            test = CIFAR10(root, train=False, transform=transform)
            train = _take(train, train_size, "--train-size", CIFAR10_TRAIN)
            test = _take(test, test_size, "--test-size", CIFAR10_TEST)
            return LabData(train, test, "cifar10", root=root)
        note = (f"CIFAR-10 not found under {root} (no {folder}); using the "
                "built-in FakeCIFAR10 (--download fetches CIFAR-10 there, "
                "--data PATH reads it from elsewhere)")
    else:
        note = None
    train = FakeCIFAR10(train=True, transform=transform, seed=_FAKE_SEED,
                        size=CIFAR10_TRAIN if train_size is None
                        else train_size)
    test = FakeCIFAR10(train=False, transform=transform, seed=_FAKE_SEED,
                       size=CIFAR10_TEST if test_size is None else test_size)
    return LabData(train, test, "fake", note=note)
