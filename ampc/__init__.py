"""ampc: mixed-precision training for Python with a C/CUDA engine, behind
PyTorch's names (``import ampc as torch``).

>>> import ampc
>>> x = ampc.ones(2, 3, requires_grad=True)
>>> y = (x.half() * 2).float().sum()
>>> y.backward()
>>> x.grad
tensor([[2., 2., 2.],
        [2., 2., 2.]])
"""
# noqa: F401 below: these are re-exports (ampc's public names)
from . import _C
from ._dtype_device import (  # noqa: F401
    Size, device, dtype, float32, float16, bfloat16, int64, bool_ as bool,
    _device_str,
)
from .tensor import Tensor, return_types  # noqa: F401
from . import autograd  # noqa: F401
from .autograd import (  # noqa: F401
    no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
)
from ._creation import *            # noqa: F401,F403 (creation + functions)
from ._creation import __all__ as _creation_all
from ._creation import FUNCTIONS as _FUNCTIONS
from ._tensor_where import where  # noqa: F401
from . import cuda  # noqa: F401
from . import cpu  # noqa: F401
from . import backends  # noqa: F401

# Every tensor C creates is an ampc.Tensor, every shape an ampc.Size.
_C._set_classes(Tensor, Size)
# autocast casts a tensor that requires grad through the autograd Cast (what
# Tensor.to(dtype) does), so gradients flow back to float32 weights in
# float32; C casts the others itself.
_C._set_autocast_cast_fn(autograd.functions.Cast.apply)
from ._C import (  # noqa: E402,F401
    autocast, is_autocast_enabled, get_autocast_dtype,
    is_autocast_cache_enabled, clear_autocast_cache, set_autocast_enabled,
    set_autocast_dtype, set_autocast_cache_enabled,
    autocast_increment_nesting, autocast_decrement_nesting,
)
from ._autocast_legacy import *  # noqa: E402,F401,F403

globals().update(_FUNCTIONS)        # ampc.add, ampc.sum, ampc.max, ...

float = float32
half = float16
long = int64

__version__ = "0.1.0"


def memory_allocated(device="cpu"):  # noqa: F811
    """Bytes of live tensor storage on ``device`` ("cpu" by default).

    >>> import ampc
    >>> before = ampc.memory_allocated()
    >>> t = ampc.empty(1000)
    >>> ampc.memory_allocated() - before
    4000
    """
    return _C.memory_allocated(_device_str("memory_allocated", device))


def max_memory_allocated(device="cpu"):  # noqa: F811
    """The peak of ``memory_allocated(device)`` since the last reset."""
    return _C.max_memory_allocated(
        _device_str("max_memory_allocated", device))


def reset_peak_memory_stats(device="cpu"):  # noqa: F811
    """Restart the peak count of ``device`` from its current live bytes."""
    _C.reset_peak_memory_stats(
        _device_str("reset_peak_memory_stats", device))


__all__ = [
    "Tensor", "Size", "device", "dtype", "float32", "float", "float16",
    "half", "bfloat16", "int64", "long", "bool", "autograd", "no_grad",
    "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "cuda", "backends", "memory_allocated", "max_memory_allocated",
    "reset_peak_memory_stats", "return_types", "where",
] + list(_creation_all) + list(_FUNCTIONS)

# checkpoints, layers and optimisers (issue 3)
from .serialization import save, load  # noqa: E402
from . import nn  # noqa: E402
from . import optim  # noqa: E402

__all__ += ["save", "load", "nn", "optim"]

# data loading and vision data sets (issue 5)
from . import utils  # noqa: E402
from . import vision  # noqa: E402

from .utils.data import Generator  # noqa: E402

from ._print_options import set_printoptions  # noqa: E402
set_num_threads = _C.set_num_threads
get_num_threads = _C.get_num_threads
from ._finfo import finfo, iinfo  # noqa: E402
from ._tensor_shape import eye, linspace  # noqa: E402
from ._einsum import einsum  # noqa: E402
from . import linalg  # noqa: E402
from ._deterministic import *  # noqa: E402,F401,F403
from ._deterministic import __all__ as _deterministic_all  # noqa: E402

__all__ += ["utils", "vision", "Generator", "set_num_threads",
            "get_num_threads", "finfo", "iinfo", "eye", "linspace",
            "set_printoptions", "einsum", "linalg"]

# AMP: GradScaler and the fused kernels; testing helpers (issue 4)
from . import amp  # noqa: E402
from .cuda import amp as _cuda_amp  # noqa: E402,F401 (ampc.cuda.amp)
from . import testing  # noqa: E402

_amp_foreach_non_finite_check_and_unscale_ = \
    _C._amp_foreach_non_finite_check_and_unscale_
_amp_update_scale_ = _C._amp_update_scale_

__all__ += ["amp", "testing"] + list(_deterministic_all)

# more tensor functions: prod, tril, roll, lerp, randperm, ... (the
# methods in _tensor_more.py and _tensor_layout.py, the random draws in
# _random_more.py)
from ._tensor_layout import *  # noqa: E402,F401,F403
from ._tensor_layout import __all__ as _layout_all  # noqa: E402
from ._random_more import *  # noqa: E402,F401,F403
from ._random_more import __all__ as _random_all  # noqa: E402
from ._creation import _make_function  # noqa: E402

_MORE_FUNCTIONS = [
    "prod", "logsumexp", "count_nonzero", "lerp", "addcmul", "addcdiv",
    "nan_to_num", "nan_to_num_", "tril", "triu", "roll", "movedim",
    "moveaxis", "repeat_interleave", "diag", "diagonal", "diag_embed",
    "outer", "ger",
    # _tensor_extra.py
    "amax", "amin", "median", "select", "dot", "vdot", "mv", "trace",
    "clamp_min", "clamp_max", "tensor_split", "hsplit", "vsplit", "dsplit",
    "nansum", "nanmean", "diff", "unique", "bincount", "softmax",
    "log_softmax",
    # _tensor_select.py
    "kthvalue", "cummax", "cummin", "histc", "cross",
]
globals().update({n: _make_function(n) for n in _MORE_FUNCTIONS})
__all__ += list(_layout_all) + list(_random_all) + _MORE_FUNCTIONS

# PyTorch dtypes ampc does not have: a clear error instead of a bare
# AttributeError (a script's `dtype=torch.int32` names it at import time)
_MISSING_DTYPES = frozenset((
    "float64", "double", "int32", "int", "int16", "short", "int8", "uint8",
    "uint16", "uint32", "uint64", "complex64", "cfloat", "complex128",
    "cdouble", "complex32", "chalf", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "qint8", "quint8", "qint32"))


def __getattr__(name):
    if name in _MISSING_DTYPES:
        raise AttributeError(
            f"module 'ampc' has no attribute '{name}': ampc has no {name} "
            "dtype; its dtypes are float32 (float), float16 (half), "
            "bfloat16, int64 (long) and bool, and autocast takes float16 "
            "or bfloat16")
    raise AttributeError(f"module 'ampc' has no attribute '{name}'")
