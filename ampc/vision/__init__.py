"""``ampc.vision``: image data sets and transforms with torchvision's
names, so that ``import ampc.vision as torchvision`` serves the lab's
scripts.

>>> import ampc.vision as torchvision
>>> import ampc.vision.transforms as transforms
>>> ds = torchvision.datasets.FakeCIFAR10(size=4,
...                                       transform=transforms.ToTensor())
>>> ds[0][0].shape
ampc.Size([3, 32, 32])
"""
from . import datasets, transforms  # noqa: F401

__all__ = ["datasets", "transforms"]
