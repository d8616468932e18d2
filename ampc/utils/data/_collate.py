"""``default_collate`` (a list of samples -> one batch) and
``default_convert`` (one sample's NumPy data -> tensors), with PyTorch's
rules and ampc's dtypes:

* tensors are stacked along a new first dim;
* NumPy arrays are stacked and become tensors (float64 -> float32 and
  other ints -> int64, as ``ampc.as_tensor`` does: ampc has no float64 or
  uint8);
* Python floats -> float32, ints -> int64, bools -> bool; NumPy scalars
  as their arrays;
* strings stay a list; dicts, namedtuples, tuples and lists are collated
  field by field (a tuple of fields becomes a list, as in PyTorch).

>>> import ampc
>>> from ampc.utils.data import default_collate
>>> x, y = default_collate([(ampc.zeros(2), 1), (ampc.ones(2), 2)])
>>> x.shape, y
(ampc.Size([2, 2]), tensor([1, 2]))
"""
import collections.abc
import re

import numpy as np

from ... import _C
from ..._creation import stack, tensor
from ..._dtype_device import _NP_TO_DTYPE, bool_, float32, int64
from ...tensor import Tensor

__all__ = ["default_collate", "default_convert"]

# NumPy dtypes that cannot become tensors: strings and objects.
_STR_OBJ = re.compile(r"[SaUO]")

_ERR = ("default_collate: batch must contain tensors, numpy arrays, "
        "numbers, dicts or lists; found {}")


def _array_to_tensor(arr):
    """A NumPy array as a CPU tensor under ampc's dtype rules (float64 ->
    float32, other ints -> int64), sharing memory when its dtype already
    is one ampc has."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype not in _NP_TO_DTYPE:
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float32)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        else:
            raise TypeError(
                f"can't convert an array of dtype {arr.dtype} to a tensor; "
                "ampc has float32, float16, bfloat16, int64 and bool")
    return _C.from_numpy(arr)


def default_convert(data):
    """NumPy arrays and scalars in ``data`` -> tensors, recursively
    (what the DataLoader applies when ``batch_size=None``).

    >>> import numpy as np
    >>> from ampc.utils.data import default_convert
    >>> default_convert({"x": np.zeros(2)})
    {'x': tensor([0., 0.])}
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)):
        if _STR_OBJ.search(data.dtype.str) is not None:
            return data
        return _array_to_tensor(np.asarray(data))
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return _same_mapping(data, {k: default_convert(v)
                                    for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence):
        return _same_sequence(data, [default_convert(d) for d in data])
    return data


def default_collate(batch):
    """Merge a list of samples into a batch (see the module docstring for
    the rules).

    >>> from ampc.utils.data import default_collate
    >>> default_collate([{"a": 1.5}, {"a": 2.5}])
    {'a': tensor([1.5000, 2.5000])}
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if _STR_OBJ.search(elem.dtype.str) is not None:
            raise TypeError(_ERR.format(elem.dtype))
        return _array_to_tensor(_stack_arrays(batch))
    if isinstance(elem, np.generic):
        if _STR_OBJ.search(elem.dtype.str) is not None:
            raise TypeError(_ERR.format(elem.dtype))
        return _array_to_tensor(np.asarray(batch))
    if isinstance(elem, bool):
        return tensor(batch, dtype=bool_)
    if isinstance(elem, int):
        return tensor(batch, dtype=int64)
    if isinstance(elem, float):
        return tensor(batch, dtype=float32)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _same_mapping(elem, {key: default_collate([d[key]
                                                          for d in batch])
                                    for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError(
                "default_collate: each element in list of batch should be of "
                "equal size")
        fields = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        return _same_sequence(elem, fields)
    raise TypeError(_ERR.format(type(elem)))


def _stack_arrays(batch):
    shape = batch[0].shape
    for i, a in enumerate(batch):
        if not isinstance(a, np.ndarray) or a.shape != shape:
            got = a.shape if isinstance(a, np.ndarray) else type(a).__name__
            raise RuntimeError(
                "default_collate: stack expects each array to be equal size, "
                f"but got {list(shape)} at entry 0 and {got} at entry {i}")
    return np.stack(batch)


def _same_mapping(like, items):
    """A mapping of like's type holding items, or a dict when that type
    cannot be built from one."""
    try:
        return type(like)(items)
    except TypeError:
        return items


def _same_sequence(like, items):
    if isinstance(like, list):
        return items
    try:
        return type(like)(items)
    except TypeError:
        return items
