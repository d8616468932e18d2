"""Containers: ``Sequential`` (modules run in order) and ``ModuleList``
(modules held in a list, registered so that their parameters are found).

>>> import ampc
>>> from ampc import nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
>>> len(net), type(net[1]).__name__
(3, 'ReLU')
"""
import collections
import operator

from .module import Module

__all__ = ["Sequential", "ModuleList"]


def _index(cls_name, idx, n):
    """idx (a negative index counts from the end) as a position in
    [0, n), with PyTorch's IndexError."""
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


class Sequential(Module):
    """Modules applied one after the other: ``Sequential(m1, m2, ...)`` or
    ``Sequential(OrderedDict(name=module, ...))``.  Indexing, slicing,
    ``len`` and iteration work as on a list.

    A ``Conv2d`` or ``Linear`` directly followed by a ``ReLU`` runs as one
    fused op (ReLU in the GEMM epilogue), and a ``Conv2d``, ``ReLU``,
    ``MaxPool2d`` triple (dilation 1, no ``ceil_mode``) as one op whose
    ReLU backward is folded into the pooling's indices, so that the
    convolution's output is not kept for backward; the results and their
    gradients are exactly those of the layers run one after the other.
    A module with forward hooks is never folded, so its hooks run.

    >>> import ampc
    >>> from ampc import nn
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    >>> net(ampc.ones(2, 3)).shape
    ampc.Size([2, 4])
    >>> net[0]
    Linear(in_features=3, out_features=4, bias=True)
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(collections.OrderedDict(
                list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_index("Sequential", idx, len(keys))]]

    def __setitem__(self, idx, module):
        keys = list(self._modules)
        setattr(self, keys[_index("Sequential", idx, len(keys))], module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        if isinstance(idx, slice):
            for key in keys[idx]:
                delattr(self, key)
        else:
            delattr(self, keys[_index("Sequential", idx, len(keys))])
        # keep the names 0..n-1, as PyTorch does
        modules = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(
                "add operator supports only objects of Sequential class, "
                f"but {type(other)} is given.")
        return Sequential(*self, *other)

    def append(self, module):
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, sequential):
        """Append every module of ``sequential``; returns self."""
        for layer in sequential:
            self.append(layer)
        return self

    def insert(self, index, module):
        """Insert ``module`` before position ``index``; returns self."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m
        return self

    def forward(self, input):
        from .activation import ReLU
        from .conv import Conv2d
        from .linear import Linear
        from .pooling import MaxPool2d
        modules = list(self._modules.values())
        i, n = 0, len(modules)
        while i < n:
            m = modules[i]
            # (a module with hooks is called, never folded)
            if i + 1 < n and type(modules[i + 1]) is ReLU and \
                    type(m) in (Conv2d, Linear) and \
                    not m._has_hooks() and \
                    not modules[i + 1]._has_hooks():
                pool = None
                if type(m) is Conv2d and i + 2 < n and \
                        type(modules[i + 2]) is MaxPool2d and \
                        not modules[i + 2]._has_hooks():
                    pool = modules[i + 2]._relu_fold()
                if pool is not None:
                    input = m._forward(input, pool=pool)
                    i += 3
                else:
                    input = m._forward(input, relu=True)
                    i += 2
            else:
                input = m(input)
                i += 1
        return input


class ModuleList(Module):
    """A list of modules whose parameters the owning module sees.

    >>> import ampc
    >>> from ampc import nn
    >>> layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    >>> len(list(layers.parameters()))
    6
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        keys = list(self._modules)
        return self._modules[keys[_index("ModuleList", idx, len(keys))]]

    def __setitem__(self, idx, module):
        keys = list(self._modules)
        setattr(self, keys[_index("ModuleList", idx, len(keys))], module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        if isinstance(idx, slice):
            for key in keys[idx]:
                delattr(self, key)
        else:
            delattr(self, keys[_index("ModuleList", idx, len(keys))])
        modules = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        """Append every module of the iterable ``modules``; returns
        self."""
        if isinstance(modules, Module) and not isinstance(
                modules, (ModuleList, Sequential)):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but "
                f"got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        """Insert ``module`` before position ``index``."""
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)
