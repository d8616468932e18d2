"""``ampc.nn``: modules, parameters, layers and losses with PyTorch's names
and semantics (``import ampc.nn as nn``).

>>> import ampc
>>> import ampc.nn as nn
>>> model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
...                       nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 10))
>>> model(ampc.randn(2, 3, 8, 8)).shape
ampc.Size([2, 10])
"""
from .parameter import Parameter
from . import modules as _modules
from .modules import *  # noqa: F401,F403 (every layer class)
from . import functional
from . import init
from . import utils

__all__ = (["Parameter"] +
           [name for name in _modules.__all__ if not name.startswith("_")] +
           ["functional", "init", "utils"])
