"""``conv_transpose2d`` and ``conv_transpose1d`` (the 2-D one over a unit
height): the transposed ("fractionally strided") convolution, which is conv2d's input gradient taken as a forward op: the
same kernels (``_C.conv2d_input_grad``: our CPU GEMM + col2im, cuDNN's
backward-data on the GPU), and its gradients are conv2d's other two passes
(``autograd.higher_order.ConvInputGrad``, which also gives second
derivatives).

Weight (C_in, C_out / groups, KH, KW), as PyTorch's; the output is
(H - 1) stride - 2 padding + dilation (KH - 1) + output_padding + 1 high
(likewise wide).  An output padding of a stride or more (allowed below the
dilation) asks for rows that a conv2d of the output would map past the
input's last row, so the input is extended with zero rows for it (and
their gradient dropped).

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.conv_transpose2d(ampc.ones(1, 2, 3, 3), ampc.ones(2, 4, 3, 3),
...                    stride=2, output_padding=1).shape
ampc.Size([1, 4, 8, 8])
"""
from .. import _C
from .._creation import cat, zeros
from ..autograd import _mode
from ..autograd.higher_order import ConvInputGrad
from ._args import _groups, _opt_tensor, _pair, _tensor
from ._conv1d import _single


class _ConvTranspose2d(ConvInputGrad):
    node_name = "ConvolutionBackward0"


def _check(input, weight, bias, groups):
    """PyTorch's shape checks, worded as its messages."""
    if weight.ndim != 4:
        raise RuntimeError(
            "conv_transpose2d(): expected weight to be 4-D (in_channels, "
            "out_channels / groups, kernel_height, kernel_width), got shape "
            f"{list(weight.shape)}")
    w = list(weight.shape)
    if w[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by "
            f"{groups} at dimension 0, but got weight of size [{w}] instead")
    if input.shape[1] != w[0]:
        raise RuntimeError(
            f"Given transposed=1, weight of size {w}, expected "
            f"input{list(input.shape)} to have {w[0]} channels, but got "
            f"{input.shape[1]} channels instead")
    if bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(
            "conv_transpose2d(): expected bias to have the input's dtype "
            f"{input.dtype}, got {bias.dtype}")
    if bias is not None and (bias.ndim != 1 or
                             bias.shape[0] != w[1] * groups):
        raise RuntimeError(
            f"Given transposed=1, weight of size {w}, expected bias to be "
            f"1-dimensional with {w[1] * groups} elements, but got bias of "
            f"size {list(bias.shape)} instead")


def _output_size(input, weight, stride, padding, output_padding, dilation):
    """(H_out, W_out), after PyTorch's output-padding rule."""
    if any(op >= s and op >= d for op, s, d in
           zip(output_padding, stride, dilation)):
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, "
            f"but got output_padding_height: {output_padding[0]} "
            f"output_padding_width: {output_padding[1]} stride_height: "
            f"{stride[0]} stride_width: {stride[1]} dilation_height: "
            f"{dilation[0]} dilation_width: {dilation[1]}")
    size = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for n, s, p, d, k, op in zip(
                     input.shape[2:], stride, padding, dilation,
                     weight.shape[2:], output_padding))
    if min(size) < 1:
        raise RuntimeError(
            f"conv_transpose2d(): the output would be {size[0]}x{size[1]} "
            f"for an input of {input.shape[2]}x{input.shape[3]}: the "
            f"padding {padding} is too large")
    return size


def _extend(input, size, weight, stride, padding, dilation):
    """input with zero rows/columns appended up to the height and width a
    conv2d of an output of ``size`` gives (beyond the input's only when an
    output padding reaches a stride)."""
    for axis, (n, s, p, d, k) in enumerate(zip(
            size, stride, padding, dilation, weight.shape[2:])):
        need = (n + 2 * p - d * (k - 1) - 1) // s + 1
        have = input.shape[2 + axis]
        if need > have:
            shape = list(input.shape)
            shape[2 + axis] = need - have
            input = cat([input, zeros(shape, dtype=input.dtype,
                                      device=input.device)], 2 + axis)
    return input


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0,
                     output_padding=0, groups=1, dilation=1):
    """The transposed convolution of input (N, C_in, H, W) or (C_in, H, W)
    with weight (C_in, C_out / groups, KH, KW), plus bias (C_out)."""
    _tensor("conv_transpose2d", "input", 1, input)
    _tensor("conv_transpose2d", "weight", 2, weight)
    _opt_tensor("conv_transpose2d", "bias", 3, bias)
    groups = _groups("conv_transpose2d", groups)
    stride = _pair("conv_transpose2d", "stride", stride)
    padding = _pair("conv_transpose2d", "padding", padding)
    output_padding = _pair("conv_transpose2d", "output_padding",
                           output_padding)
    dilation = _pair("conv_transpose2d", "dilation", dilation)
    if _C.autocast_active():
        input, weight, bias = _C.autocast_cast_args(
            "conv_transpose2d", (input, weight, bias), _mode.enabled)
    unbatched = input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    elif input.ndim != 4:
        raise RuntimeError(
            "Expected 3D (unbatched) or 4D (batched) input to "
            f"conv_transpose2d, but got input of size: {list(input.shape)}")
    _check(input, weight, bias, groups)
    size = _output_size(input, weight, stride, padding, output_padding,
                        dilation)
    out_shape = (input.shape[0], weight.shape[1] * groups) + size
    x = _extend(input, size, weight, stride, padding, dilation)
    geom = (stride, padding, dilation)
    if _mode.enabled and (x.requires_grad or weight.requires_grad):
        out = _ConvTranspose2d.apply(x, weight, out_shape, geom, groups)
    else:
        out = _C.conv2d_input_grad(x, weight, out_shape, *geom, groups)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0,
                     output_padding=0, groups=1, dilation=1):
    """The transposed convolution of input (N, C_in, L) or (C_in, L) with
    weight (C_in, C_out / groups, K): ``conv_transpose2d`` over a unit
    height (its kernels, gradients and autocast policy)."""
    fn = "conv_transpose1d"
    _tensor(fn, "input", 1, input)
    _tensor(fn, "weight", 2, weight)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            "Expected 2D (unbatched) or 3D (batched) input to "
            f"conv_transpose1d, but got input of size: {list(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(
            "conv_transpose1d(): expected weight to be 3-D (in_channels, "
            "out_channels / groups, kernel_size), got shape "
            f"{list(weight.shape)}")
    stride = (1, _single(fn, "stride", stride))
    padding = (0, _single(fn, "padding", padding))
    output_padding = (0, _single(fn, "output_padding", output_padding))
    dilation = (1, _single(fn, "dilation", dilation))
    out = conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(2), bias,
                           stride, padding, output_padding, groups, dilation)
    return out.squeeze(-2)
