"""Keyed and parameter containers: ``ModuleDict`` (modules by name),
``ParameterList`` and ``ParameterDict`` (parameters in a list or by name),
each registered so that the owning module's ``parameters()``,
``state_dict()``, ``to()`` and ``zero_grad()`` see them.

A plain tensor put into a parameter container becomes a ``Parameter``, as
in PyTorch; other objects are kept as they are (and are not parameters).

>>> import ampc
>>> from ampc import nn
>>> heads = nn.ModuleDict({"cls": nn.Linear(4, 2), "box": nn.Linear(4, 4)})
>>> sorted(heads)
['box', 'cls']
>>> scales = nn.ParameterList([ampc.ones(3), ampc.zeros(2)])
>>> [tuple(p.shape) for p in scales.parameters()]
[(3,), (2,)]
"""
import collections
import collections.abc as abc
import operator

from ..parameter import Parameter
from .module import Module
from ...tensor import Tensor

__all__ = ["ModuleDict", "ParameterList", "ParameterDict"]


def _pairs(cls_name, items):
    """The (key, value) pairs of ``update``'s argument: a mapping's items,
    or an iterable of pairs, with PyTorch's errors."""
    if not isinstance(items, abc.Iterable):
        raise TypeError(
            f"{cls_name}.update should be called with an iterable of "
            f"key/value pairs, but got {type(items).__name__}")
    if isinstance(items, (abc.Mapping, ModuleDict, ParameterDict)):
        return list(items.items())
    pairs = []
    for j, pair in enumerate(items):
        if not isinstance(pair, abc.Iterable):
            raise TypeError(
                f"{cls_name} update sequence element #{j} should be "
                f"Iterable; is{type(pair).__name__}")
        pair = list(pair)
        if len(pair) != 2:
            raise ValueError(
                f"{cls_name} update sequence element #{j} has length "
                f"{len(pair)}; 2 is required")
        pairs.append(pair)
    return pairs


def _as_parameter(value):
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _item_repr(key, value, by_type=False):
    """One line of a parameter container's repr: the tensor's dtype, or
    with ``by_type`` its type name (``ampc.FloatTensor``), as PyTorch's
    ParameterList and ParameterDict print them."""
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    size = "x".join(str(n) for n in value.shape)
    where = f" ({value.device})" if value.device.type == "cuda" else ""
    name = value.type() if by_type else value.dtype
    return f"  ({key}): {kind} containing: [{name} of size {size}{where}]"


class ModuleDict(Module):
    """Modules by name, in insertion order, like a ``dict``.

    >>> from ampc import nn
    >>> d = nn.ModuleDict([("act", nn.ReLU())])
    >>> d["act"], "act" in d, len(d)
    (ReLU(), True, 1)
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        """Remove every module."""
        self._modules.clear()

    def pop(self, key):
        """Remove the module ``key`` and return it."""
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Add (or replace) the modules of a mapping or of an iterable of
        (name, module) pairs."""
        for key, module in _pairs("ModuleDict", modules):
            self[key] = module


class ParameterList(Module):
    """Parameters in a list: indexing, slicing, ``len``, iteration,
    ``append`` and ``extend`` as on a list.

    >>> import ampc
    >>> from ampc import nn
    >>> ps = nn.ParameterList([ampc.ones(2)])
    >>> ps.append(ampc.zeros(3))
    ParameterList(
        (0): Parameter containing: [ampc.float32 of size 2]
        (1): Parameter containing: [ampc.float32 of size 3]
    )
    """

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _position(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return str(idx % len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, self._position(idx))

    def __setitem__(self, idx, value):
        setattr(self, self._position(idx), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        """Add ``value`` (a tensor becomes a Parameter) at the end; returns
        self."""
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        """Append every item of the iterable ``values``; returns self."""
        if not isinstance(values, abc.Iterable) or isinstance(values, Tensor):
            raise TypeError(
                "ParameterList.extend should be called with an iterable, "
                f"but got {type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(_item_repr(i, v) for i, v in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Parameters by name (string keys), in insertion order, like a
    ``dict``.  As PyTorch's, ``update`` with a plain ``dict`` adds its items
    in sorted key order (an ``OrderedDict`` keeps its own order).

    >>> import ampc
    >>> from ampc import nn
    >>> pd = nn.ParameterDict({"scale": ampc.ones(2)})
    >>> pd["scale"].requires_grad, list(pd.keys())
    (True, ['scale'])
    """

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _attr(key):
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it "
                f"is not a string (type is '{type(key).__name__}'). Open an "
                "issue on github if you need non-string keys.")
        return key

    def __getitem__(self, key):
        return getattr(self, self._attr(key))

    def __setitem__(self, key, value):
        attr = self._attr(key)
        self._keys[key] = None
        setattr(self, attr, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(collections.OrderedDict(self.items()))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        """Remove and return the last (key, parameter) pair."""
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((key, default) for key in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((key, self[key]) for key in self._keys)

    def values(self):
        return (self[key] for key in self._keys)

    def update(self, parameters):
        """Add (or replace) the items of a mapping or of an iterable of
        (key, value) pairs."""
        pairs = _pairs("ParametersDict", parameters)
        if isinstance(parameters, abc.Mapping) and not isinstance(
                parameters, collections.OrderedDict):
            pairs.sort(key=lambda kv: kv[0])
        for key, value in pairs:
            self[key] = value

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self

    def extra_repr(self):
        return "\n".join(_item_repr(k, v, by_type=True)
                         for k, v in self.items())

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called.")
