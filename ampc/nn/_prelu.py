"""``prelu``: max(0, x) + weight * min(0, x), with one learned slope or
one per channel (dim 1), as PyTorch's, composed of ``where`` and a
multiply so its gradients (the slope's branch at x = 0, as PyTorch's) and
second derivatives come from autograd.  Autocast runs it in the autocast
dtype (PyTorch lists ``prelu`` with the convolutions on CPU and CUDA).

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.prelu(ampc.tensor([-2.0, 3.0]), ampc.tensor([0.25]))
tensor([-0.5000,  3.0000])
"""
from .. import _C
from .._tensor_where import where as _where
from ..autograd import _mode
from ._args import _tensor

_TORCH_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
                "int64": "Long", "bool": "Bool"}


def prelu(input, weight):
    """``where(input > 0, input, weight * input)``, ``weight`` a scalar or
    one slope per channel (``input.shape[1]``)."""
    _tensor("prelu", "input", 1, input)
    _tensor("prelu", "weight", 2, weight)
    if _C.autocast_active():
        input, weight = _C.autocast_cast_args("prelu", (input, weight),
                                              _mode.enabled)
    if weight.ndim > 1:
        raise RuntimeError(
            "prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
            f"ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() not in (1, channels):
        raise RuntimeError(
            "Mismatch of parameter numbers and input channel size. Found "
            f"parameter numbers = {weight.numel()} and channel size = "
            f"{channels}.")
    if weight.dtype != input.dtype:
        raise RuntimeError(
            "prelu: Type promoting not supported. Got "
            f"{_TORCH_NAMES[input.dtype.name]} and "
            f"{_TORCH_NAMES[weight.dtype.name]}")
    if weight.numel() == 1:
        slope = weight.reshape(())
    else:
        slope = weight.reshape((channels,) + (1,) * (input.ndim - 2))
    return _where(input > 0, input, slope * input)
