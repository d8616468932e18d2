"""``ampc.nn.init``: fill tensors in place with PyTorch's initialisation
schemes, drawing from ampc's generator (``ampc.manual_seed`` makes them
repeatable).  Each runs under ``no_grad`` and returns its tensor.

>>> import ampc
>>> w = ampc.empty(64, 32)
>>> _ = ampc.nn.init.kaiming_uniform_(w, a=5 ** 0.5)
>>> float(w.abs().max()) <= (1 / 32) ** 0.5
True
"""
import math
import numbers
import warnings

from .. import _C
from ..autograd import no_grad
from .._dtype_device import _pybool

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
    "kaiming_normal_", "trunc_normal_",
]


def _check(fn, tensor, generator=None):
    if not isinstance(tensor, _C.TensorBase):
        raise TypeError(
            f"{fn}(): argument 'tensor' must be a Tensor, but got "
            f"{type(tensor).__name__}")
    if generator is not None:
        raise TypeError(
            f"{fn}(): ampc.nn.init draws from ampc's global generator (seed "
            "it with ampc.manual_seed); pass generator=None")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity: 1 for linear/conv/sigmoid,
    5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for
    leaky_relu, 3/4 for selu.

    >>> import ampc
    >>> round(ampc.nn.init.calculate_gain("relu"), 4)
    1.4142
    """
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, _pybool) and isinstance(
                param, numbers.Real):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight: in/out features times the receptive
    field (the product of the dims after the first two)."""
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer "
            "than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(
            f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill ``tensor`` with values drawn uniformly from [a, b).

    >>> import ampc
    >>> t = ampc.nn.init.uniform_(ampc.empty(3), -1, 1)
    >>> bool((t.abs() <= 1).all())
    True
    """
    _check("uniform_", tensor, generator)
    with no_grad():
        return tensor.uniform_(a, b)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill ``tensor`` with values drawn from N(mean, std^2).

    >>> import ampc
    >>> ampc.nn.init.normal_(ampc.empty(2, 2)).shape
    ampc.Size([2, 2])
    """
    _check("normal_", tensor, generator)
    with no_grad():
        return tensor.normal_(mean, std)


def constant_(tensor, val):
    """Fill ``tensor`` with ``val``.

    >>> import ampc
    >>> ampc.nn.init.constant_(ampc.empty(2), 0.5)
    tensor([0.5000, 0.5000])
    """
    _check("constant_", tensor)
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    """Fill ``tensor`` with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill ``tensor`` with zeros.

    >>> import ampc
    >>> ampc.nn.init.zeros_(ampc.empty(2))
    tensor([0., 0.])
    """
    return constant_(tensor, 0.0)


def _no_op_if_empty(tensor):
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op",
                      stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in +
    fan_out)).

    >>> import ampc
    >>> w = ampc.nn.init.xavier_uniform_(ampc.empty(3, 5))
    >>> float(w.abs().max()) <= (6 / 8) ** 0.5
    True
    """
    _check("xavier_uniform_", tensor, generator)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    with no_grad():
        return tensor.uniform_(-a, a)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in +
    fan_out))."""
    _check("xavier_normal_", tensor, generator)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    with no_grad():
        return tensor.normal_(0.0, std)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu",
                     generator=None):
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan),
    gain = calculate_gain(nonlinearity, a).  ``Linear`` and ``Conv2d``
    use it with a = sqrt(5), giving bound = 1 / sqrt(fan_in).

    >>> import ampc
    >>> w = ampc.nn.init.kaiming_uniform_(ampc.empty(8, 6), a=0)
    >>> float(w.abs().max()) <= (6 / 6) ** 0.5
    True
    """
    _check("kaiming_uniform_", tensor, generator)
    if _no_op_if_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    with no_grad():
        return tensor.uniform_(-bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu",
                    generator=None):
    """He normal: N(0, std^2) with std = gain / sqrt(fan)."""
    _check("kaiming_normal_", tensor, generator)
    if _no_op_if_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    with no_grad():
        return tensor.normal_(0.0, gain / math.sqrt(fan))


from ._trunc_normal import trunc_normal_  # noqa: E402 (uses _check above)
