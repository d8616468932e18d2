"""``interpolate`` (``ampc.nn.functional``): PyTorch's ``F.interpolate``
for 3-D (N, C, W), 4-D (N, C, H, W) and 5-D (N, C, D, H, W) input in the
modes 'nearest', 'nearest-exact', 'linear' (3-D), 'bilinear' (4-D),
'bicubic' (4-D), 'trilinear' (5-D) and 'area', with ``antialias=True``
for bilinear and bicubic.

'nearest' and 'nearest-exact' gather along each axis (``_axis_index``)
with PyTorch's CPU index formulas evaluated in float32, so the same source
pixels are picked.  The interpolating modes run ampc's separable kernels
(``_resample.py``: torch's weights, bicubic's A = -0.75 with the borders
clamped, the antialias filters).  'area' is adaptive average pooling (one
or two ``adaptive_avg_pool2d`` passes).

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

from . import _axis_index as _ax
from ._args import _tensor
from ._avg_pool import adaptive_avg_pool2d
from ._resample import resample

__all__ = ["interpolate"]

_F32 = np.float32
_NEAREST = {
    (mode, k): _ax.subclass(f"UpsampleNearest{name}{k}DBackward0",
                            "upsample")
    for mode, name in (("nearest", ""), ("nearest-exact", "Exact"))
    for k in (1, 2, 3)
}
# the interpolating modes: (the rank they need, the kernel's mode)
_KERNEL_MODES = {"linear": (3, "linear"), "bilinear": (4, "linear"),
                 "trilinear": (5, "linear"), "bicubic": (4, "cubic")}
_MODES = ("nearest | linear | bilinear | bicubic | trilinear | lanczos | "
          "area | nearest-exact")


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


def _area(input, sizes):
    """Adaptive average pooling to sizes over 1, 2 or 3 spatial dims: the
    windows are products of one window per axis, so a 1-D or 3-D pooling
    is adaptive_avg_pool2d over a unit height or twice (H and W, then D
    against the flattened H * W)."""
    if len(sizes) == 1:
        return adaptive_avg_pool2d(input.unsqueeze(2), (1, sizes[0])) \
            .squeeze(2)
    if len(sizes) == 2:
        return adaptive_avg_pool2d(input, tuple(sizes))
    n, c, d = input.shape[:3]
    od, oh, ow = sizes
    y = adaptive_avg_pool2d(input.reshape(n, c * d, *input.shape[3:]),
                            (oh, ow))
    y = adaptive_avg_pool2d(y.reshape(n, c, d, oh * ow), (od, oh * ow))
    return y.reshape(n, c, od, oh, ow)


def _nearest(input, sizes, scales, mode):
    plan = []
    for k, n in enumerate(sizes):
        # nearest_idx's shortcuts: PyTorch's CPU kernels take them in 2-D
        # and 3-D but not in the 1-D forward
        index = _nearest_index(mode, input.shape[2 + k], n, scales[k],
                               input.ndim > 3)
        if n != input.shape[2 + k] or np.any(index != np.arange(n)):
            plan.append((2 + k, _ax.index_tensor(index, input.device)))
    return _ax.run(_NEAREST[mode, input.ndim - 2], input, tuple(plan))


def _check_mode(input, mode, antialias):
    """PyTorch's errors for a mode the input's rank does not take."""
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos")
                          and input.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and "
            "lanczos modes and requires a 4-D tensor as input")
    if mode == "lanczos" and input.ndim == 4:
        raise NotImplementedError(
            "interpolate(): ampc does not support mode 'lanczos' (PyTorch's "
            "CPU-only Lanczos-3 filter); use 'bicubic' with antialias=True")
    if mode in ("nearest", "nearest-exact", "area"):
        if input.ndim in (3, 4, 5):
            return
    elif _KERNEL_MODES.get(mode, (None,))[0] == input.ndim:
        return
    need = {"linear": 3, "bilinear": 4, "trilinear": 5}.get(mode)
    if need is not None and input.ndim in (3, 4, 5):
        raise NotImplementedError(
            f"Got {input.ndim}D input, but {mode} mode needs {need}D input")
    raise NotImplementedError(
        "Input Error: Only 3D, 4D and 5D input Tensors supported (got "
        f"{input.ndim}D) for the modes: {_MODES} (got {mode})")


def interpolate(input, size=None, scale_factor=None, mode="nearest",
                align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resamples the spatial dims of input (N, C, W), (N, C, H, W) or
    (N, C, D, H, W) to ``size`` (an int or one per dim) or by
    ``scale_factor`` (a float or one per dim; the output size is floor(in
    * scale_factor), and the sampling uses 1/scale_factor unless
    ``recompute_scale_factor``).  'nearest' takes source index floor(dst *
    scale) (PyTorch's, kept for compatibility), 'nearest-exact' floor((dst
    + 0.5) * scale); 'linear', 'bilinear' and 'trilinear' blend the two
    nearest source pixels per dim, 'bicubic' four (cubic convolution, A =
    -0.75), pixel centres aligned, or the corner pixels with
    ``align_corners=True``; ``antialias=True`` (bilinear, bicubic) widens
    the filter by the downsampling factor, as PyTorch (and PIL); 'area'
    averages (adaptive average pooling).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.interpolate(ampc.ones(1, 3, 4, 5), size=(8, 7),
    ...               mode="bicubic").shape
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
    if input.ndim < 3:
        _check_mode(input, mode, False)
    # "area" mode always needs an explicit size: PyTorch reuses the
    # recompute_scale_factor path
    recompute = bool(recompute_scale_factor) or (
        mode == "area" and size is None)
    sizes, scales = _output_size(input, size, scale_factor, recompute)
    _check_mode(input, mode, antialias)
    _check_sizes(input, sizes)
    if mode == "area":
        return _area(input, sizes)
    if mode in _KERNEL_MODES:
        return resample(input, sizes, _KERNEL_MODES[mode][1], align_corners,
                        scales, antialias)
    return _nearest(input, sizes, scales, mode)
