"""``interpolate`` (``ampc.nn.functional``): PyTorch's ``F.interpolate``
for 3-D (N, C, W) and 4-D (N, C, H, W) input in the modes 'nearest',
'nearest-exact', 'linear' (3-D), 'bilinear' (4-D) and 'area' (4-D).

Each spatial axis is resampled on its own (the modes are separable), with
PyTorch's CPU index and weight formulas evaluated in float32 as its
kernels do (so the same source pixels are picked): nearest modes gather
along each axis (``_axis_index``); the linear modes gather the two
neighbours and blend them in float32, the last axis first as PyTorch's
bilinear sum, and their gradient adds each output's share back to the
two neighbours.  'area' is ``adaptive_avg_pool2d``.  Under CUDA autocast
the upsampling runs in float32, as PyTorch's (the CPU keeps the input's
dtype).

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.interpolate(ampc.tensor([[[1.0, 2.0]]]), scale_factor=2)
tensor([[[1., 1., 2., 2.]]])
>>> F.interpolate(ampc.tensor([[[1.0, 2.0]]]), size=3, mode="linear",
...               align_corners=True)
tensor([[[1.0000, 1.5000, 2.0000]]])
"""
import math
import numbers

import numpy as np

from .._creation import tensor, zeros
from .._dtype_device import float32
from ..autograd import Function, autocast_listed
from . import _axis_index as _ax
from ._args import _needs_grad, _tensor
from ._avg_pool import adaptive_avg_pool2d

__all__ = ["interpolate"]

_F32 = np.float32
_NEAREST = {
    ("nearest", 1): _ax.subclass("UpsampleNearest1DBackward0", "upsample"),
    ("nearest", 2): _ax.subclass("UpsampleNearest2DBackward0", "upsample"),
    ("nearest-exact", 1): _ax.subclass("UpsampleNearestExact1DBackward0",
                                       "upsample"),
    ("nearest-exact", 2): _ax.subclass("UpsampleNearestExact2DBackward0",
                                       "upsample"),
}
_LINEAR = {"linear": 3, "bilinear": 4}


# ----------------------------------------------------------------------------
# source indices and weights (aten/src/ATen/native/UpSample.h)


def _scale(n_in, n_out, scale):
    """compute_scales_value<float>: 1/scale_factor when one is used, else
    in/out, in float32."""
    if scale is not None and scale > 0:
        return _F32(1.0 / scale)
    return _F32(n_in) / _F32(n_out)


def _nearest_index(mode, n_in, n_out, scale, shortcuts):
    """shortcuts: nearest_idx's exact copies for n_out = n_in and 2 * n_in
    (PyTorch's CPU kernels take them in 2-D but not in 1-D forward)."""
    j = np.arange(n_out)
    if mode == "nearest":
        if shortcuts and n_out == n_in:
            return j
        if shortcuts and n_out == 2 * n_in:
            return j >> 1
        src = np.floor(j.astype(_F32) * _scale(n_in, n_out, scale))
    else:
        # (dst + 0.5) * scale in double, rounded to float by floorf
        src = np.floor(((j + 0.5) * np.float64(_scale(n_in, n_out, scale)))
                       .astype(_F32))
    return np.minimum(src.astype(np.int64), n_in - 1)


def _linear_weights(n_in, n_out, align_corners, scale):
    """(index0, index1, lambda0, lambda1) of each output position."""
    j = np.arange(n_out)
    if n_out == n_in:
        return j, j, np.ones(n_out, _F32), np.zeros(n_out, _F32)
    if align_corners:
        ratio = (_F32(n_in - 1) / _F32(n_out - 1) if n_out > 1
                 else _F32(0))
        real = ratio * j.astype(_F32)
    else:
        ratio = _scale(n_in, n_out, scale)
        real = np.maximum(ratio * (j.astype(_F32) + _F32(0.5)) - _F32(0.5),
                          _F32(0))
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    lam1 = np.clip(real - i0.astype(_F32), _F32(0), _F32(1)).astype(_F32)
    i1 = i0 + (i0 < n_in - 1)
    return i0, i1, _F32(1) - lam1, lam1


# ----------------------------------------------------------------------------
# linear modes


def _blend_plan(x, sizes, align_corners, scales):
    """Per spatial axis, the last first: (dim, index0, index1, lambda0,
    lambda1) as tensors on x's device, the lambdas shaped to broadcast."""
    plan = []
    for k in reversed(range(len(sizes))):
        dim = 2 + k
        i0, i1, l0, l1 = _linear_weights(x.shape[dim], sizes[k],
                                         align_corners, scales[k])
        shape = (sizes[k],) + (1,) * (x.ndim - 1 - dim)
        plan.append((dim, _ax.index_tensor(i0, x.device),
                     _ax.index_tensor(i1, x.device),
                     tensor(l0, device=x.device).view(shape),
                     tensor(l1, device=x.device).view(shape)))
    return tuple(plan)


def _blend(x, plan):
    dtype = x.dtype
    for dim, i0, i1, l0, l1 in plan:
        # (float32 lambdas: a float16/bfloat16 x blends in float32)
        x = x.index_select(dim, i0) * l0 + x.index_select(dim, i1) * l1
    return x.to(dtype) if x.dtype is not dtype else x


def _blend_grad(g, shape, plan):
    dtype = g.dtype
    shapes = [tuple(shape)]
    for dim, i0, *_ in plan[:-1]:
        s = list(shapes[-1])
        s[dim] = i0.shape[0]
        shapes.append(tuple(s))
    for (dim, i0, i1, l0, l1), s in zip(reversed(plan), reversed(shapes)):
        g = g.float()
        g = zeros(s, dtype=float32, device=g.device) \
            .index_add_(dim, i0, g * l0).index_add_(dim, i1, g * l1)
    return g.to(dtype) if g.dtype is not dtype else g


class _UpsampleLinear(Function):
    autocast_op = "upsample"

    @staticmethod
    def forward(ctx, x, plan):
        ctx.shape = tuple(x.shape)
        ctx.plan = plan
        return _blend(x, plan)

    @staticmethod
    def backward(ctx, g):
        return _blend_grad(g, ctx.shape, ctx.plan), None


_LINEAR_NODES = {
    3: type("UpsampleLinear1D", (_UpsampleLinear,),
            {"node_name": "UpsampleLinear1DBackward0"}),
    4: type("UpsampleBilinear2D", (_UpsampleLinear,),
            {"node_name": "UpsampleBilinear2DBackward0"}),
}


def formulas():
    """The differentiable backward of the linear modes, for
    ``backward(create_graph=True)`` (autograd/higher_order.py)."""
    return {cls: cls.backward
            for cls in (_UpsampleLinear, *_LINEAR_NODES.values())}


# ----------------------------------------------------------------------------
# arguments


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _output_size(input, size, scale_factor, recompute):
    """(output sizes, the scale per axis the kernels use or None)."""
    dim = input.ndim - 2
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if recompute:
            raise ValueError("recompute_scale_factor is not meaningful with "
                             "an explicit size.")
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial "
                    "dimensions, but got input with spatial dimensions of "
                    f"{spatial} and output size of {size}. Please provide "
                    "input tensor in (N, C, d1, d2, ...,dK) format and "
                    "output size in (o1, o2, ...,oK) format.")
            if not all(_is_int(s) for s in size):
                raise TypeError(
                    "expected size to be one of int or Tuple[int] or "
                    "Tuple[int, int] or Tuple[int, int, int], but got size "
                    f"with types {[type(s) for s in size]}")
            return [int(s) for s in size], [None] * dim
        if not _is_int(size):
            raise TypeError(
                "expected size to be one of int or Tuple[int] or "
                "Tuple[int, int] or Tuple[int, int, int], but got size "
                f"with types {type(size)}")
        return [int(size)] * dim, [None] * dim
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of "
                "spatial dimensions, but got input with spatial dimensions "
                f"of {spatial} and scale_factor of shape {scale_factor}. "
                "Please provide input tensor in (N, C, d1, d2, ...,dK) "
                "format and scale_factor in (s1, s2, ...,sK) format.")
        scales = [float(s) for s in scale_factor]
    else:
        scales = [float(scale_factor)] * dim
    sizes = [math.floor(float(n) * s) for n, s in zip(spatial, scales)]
    return sizes, ([None] * dim if recompute else scales)


def _check_sizes(input, sizes):
    spatial = list(input.shape[2:])
    if min(spatial) > 0 and min(sizes) > 0:
        return
    names = "HW"[-len(sizes):] if len(sizes) <= 2 else "DHW"
    got_in = ", ".join(f"{a}: {n}" for a, n in zip(names, spatial))
    got_out = ", ".join(f"{a}: {n}" for a, n in zip(names, sizes))
    raise RuntimeError(
        "Input and output sizes should be greater than 0, but got input "
        f"({got_in}) output ({got_out})")


def interpolate(input, size=None, scale_factor=None, mode="nearest",
                align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resamples the spatial dims of input (N, C, W) or (N, C, H, W) to
    ``size`` (an int or one per dim) or by ``scale_factor`` (a float or
    one per dim; the output size is floor(in * scale_factor), and the
    sampling uses 1/scale_factor unless ``recompute_scale_factor``).
    'nearest' takes source index floor(dst * scale) (PyTorch's, kept for
    compatibility), 'nearest-exact' floor((dst + 0.5) * scale); 'linear'
    and 'bilinear' blend the two nearest source pixels, pixel centres
    aligned, or the corner pixels with ``align_corners=True``; 'area'
    averages (adaptive average pooling).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.interpolate(ampc.ones(1, 3, 4, 5), size=(8, 7),
    ...               mode="bilinear").shape
    ampc.Size([1, 3, 8, 7])
    """
    _tensor("interpolate", "input", 1, input)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the "
                "interpolating modes: linear | bilinear | bicubic | "
                "trilinear")
    elif align_corners is None:
        align_corners = False
    if input.ndim not in (3, 4) or mode not in (
            "nearest", "nearest-exact", "area", "linear", "bilinear"):
        raise NotImplementedError(
            "interpolate(): ampc supports 3-D and 4-D input in the modes "
            "nearest | nearest-exact | linear (3-D) | bilinear (4-D) | area "
            f"(4-D), got {input.ndim}-D input and mode '{mode}'")
    sizes, scales = _output_size(input, size, scale_factor,
                                 bool(recompute_scale_factor))
    if antialias:
        raise NotImplementedError(
            "interpolate(): ampc does not support antialias=True")
    if mode in _LINEAR and _LINEAR[mode] != input.ndim:
        raise NotImplementedError(
            f"Got {input.ndim}D input, but {mode} mode needs "
            f"{_LINEAR[mode]}D input")
    _check_sizes(input, sizes)
    if mode == "area":
        if input.ndim != 4:
            raise NotImplementedError(
                "interpolate(): ampc supports mode 'area' for 4-D input only")
        return adaptive_avg_pool2d(input, tuple(sizes))
    if mode in _LINEAR:
        plan = _blend_plan(input, sizes, align_corners, scales)
        cls = _LINEAR_NODES[input.ndim]
        if _needs_grad(input) or autocast_listed(cls):
            return cls.apply(input, plan)
        return _blend(input, plan)
    plan = []
    for k, n in enumerate(sizes):
        index = _nearest_index(mode, input.shape[2 + k], n, scales[k],
                               input.ndim == 4)
        if n != input.shape[2 + k] or np.any(index != np.arange(n)):
            plan.append((2 + k, _ax.index_tensor(index, input.device)))
    return _ax.run(_NEAREST[mode, input.ndim - 2], input, tuple(plan))
