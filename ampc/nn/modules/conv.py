"""``Conv2d`` and ``Conv1d``: 2-D convolution over (N, C, H, W) images,
1-D over (N, C, L) sequences; ``ConvTranspose2d`` and ``ConvTranspose1d``:
their transposes (upsampling by a learned kernel).

>>> import ampc
>>> ampc.nn.Conv2d(3, 32, kernel_size=3, padding=1)
Conv2d(3, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
>>> ampc.nn.Conv2d(32, 32, kernel_size=3, padding=1, groups=32)
Conv2d(32, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=32)
"""
import math

from ... import _C
from ..._creation import empty
from .. import functional as F
from .. import init
from .._conv1d import _single, conv_sides, padding_sides, pre_pad
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]


def _add_parameters(conv, channels, out_channels, bias, device, dtype):
    """The convolution's (uninitialised) ``weight`` of shape channels +
    its kernel_size and ``bias`` (out_channels) or a None bias."""
    conv.weight = Parameter(empty(*channels, *conv.kernel_size,
                                  device=device, dtype=dtype))
    if bias:
        conv.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
    else:
        conv.register_parameter("bias", None)


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _check_padding_mode(padding_mode):
    if padding_mode not in _PADDING_MODES:
        raise ValueError(
            "padding_mode must be one of {'replicate', 'reflect', "
            "'circular', 'zeros'}, but got padding_mode="
            f"'{padding_mode}'")


class Conv2d(Module):
    """2-D convolution (cross-correlation) with ``out_channels`` filters of
    ``kernel_size`` over ``in_channels``; ``stride``, ``padding`` (ints,
    pairs, or 'valid'/'same'), ``dilation`` and ``groups`` as in PyTorch
    (``groups`` divides both channel counts; ``groups=in_channels`` is a
    depthwise convolution).  ``weight`` (out, in / groups, kh, kw) and
    ``bias`` start as U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
    in / groups * kh * kw (PyTorch's default).  ``padding_mode`` 'zeros',
    'reflect', 'replicate' or 'circular' (the input padded by ``F.pad``
    first, as PyTorch).

    >>> import ampc
    >>> conv = ampc.nn.Conv2d(3, 8, 3, padding=1)
    >>> conv(ampc.ones(2, 3, 5, 5)).shape
    ampc.Size([2, 8, 5, 5])
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1,
                 padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        for name, v in (("in_channels", in_channels),
                        ("out_channels", out_channels), ("groups", groups)):
            if v.__class__ is bool or not isinstance(v, int) or v <= 0:
                raise ValueError(
                    f"Conv2d(): expected {name} to be a positive int, got "
                    f"{v!r}")
        for name, v in (("in_channels", in_channels),
                        ("out_channels", out_channels)):
            if v % groups:
                raise ValueError(
                    f"Conv2d(): {name} must be divisible by groups, got "
                    f"{name}={v}, groups={groups}")
        _check_padding_mode(padding_mode)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = F._pair("Conv2d", "kernel_size", kernel_size)
        if min(self.kernel_size) <= 0:
            raise ValueError(
                "Conv2d(): kernel_size must be positive, got "
                f"{self.kernel_size}")
        self.stride = F._pair("Conv2d", "stride", stride)
        self.dilation = F._pair("Conv2d", "dilation", dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        _add_parameters(self, (out_channels, in_channels // groups),
                        out_channels, bias, device, dtype)
        self._sides = F._conv_sides("Conv2d", padding, self.weight,
                                    self.stride, self.dilation, ValueError)
        self.padding = (padding if isinstance(padding, str)
                        else tuple(left for left, _ in self._sides))
        self.reset_parameters()

    def reset_parameters(self):
        """Draw fresh initial values (PyTorch's default scheme)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _forward(self, input, relu=False, pool=None):
        """conv2d, with relu: + ReLU, with pool (MaxPool2d._relu_fold's
        pairs): + ReLU + max_pool2d."""
        if not isinstance(input, _C.TensorBase):
            raise TypeError(
                f"Conv2d.forward(): expected a Tensor input, but got "
                f"{type(input).__name__}")
        F._conv_batch(input)    # the rank check, before any padding
        input, padding = pre_pad(input, self._sides, self.padding_mode)
        if pool is not None:
            return F._conv2d_relu_max_pool(input, self.weight, self.bias,
                                           self.stride, padding,
                                           self.dilation, pool, self.groups)
        return F._conv2d(input, self.weight, self.bias, self.stride,
                         padding, self.dilation, relu, self.groups)

    def forward(self, input):
        return self._forward(input)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size="
             f"{self.kernel_size}, stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"   # strings unquoted, as PyTorch
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _ConvTransposeNd(Module):
    """ConvTranspose1d and ConvTranspose2d: ``weight`` (in, out / groups,
    *kernel_size) and ``bias`` start as U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    with fan_in = out / groups * prod(kernel_size), as PyTorch's.
    ``forward(input, output_size=None)``: an ``output_size`` picks the
    output padding that gives it (PyTorch's rule and error)."""

    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1,
                 padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        fn = type(self).__name__
        for name, v in (("in_channels", in_channels),
                        ("out_channels", out_channels), ("groups", groups)):
            if v.__class__ is bool or not isinstance(v, int) or v <= 0:
                raise ValueError(
                    f"{fn}(): expected {name} to be a positive int, got "
                    f"{v!r}")
            if v % groups:
                raise ValueError(f"{name} must be divisible by groups")
        if padding_mode != "zeros":
            raise ValueError(
                f'Only "zeros" padding mode is supported for {fn}')
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = self._tuple("kernel_size", kernel_size)
        self.stride = self._tuple("stride", stride)
        self.padding = self._tuple("padding", padding)
        self.output_padding = self._tuple("output_padding", output_padding)
        self.dilation = self._tuple("dilation", dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        _add_parameters(self, (in_channels, out_channels // groups),
                        out_channels, bias, device, dtype)
        self.reset_parameters()

    reset_parameters = Conv2d.reset_parameters

    def _tuple(self, name, v):
        fn = type(self).__name__
        if self._dims == 1:
            return (_single(fn, name, v),)
        return F._pair(fn, name, v)

    def _output_padding(self, input, output_size):
        """The output padding that gives ``output_size`` (its last entries,
        one per spatial dim), with PyTorch's error when no padding can."""
        output_size = list(output_size)[-self._dims:]
        spatial = list(input.shape[-self._dims:])
        low = [(n - 1) * s - 2 * p + d * (k - 1) + 1
               for n, s, p, d, k in zip(spatial, self.stride, self.padding,
                                        self.dilation, self.kernel_size)]
        high = [m + s - 1 for m, s in zip(low, self.stride)]
        if any(not lo <= n <= hi
               for n, lo, hi in zip(output_size, low, high)):
            raise ValueError(
                f"requested an output size of {output_size}, but valid "
                f"sizes range from {low} to {high} (for an input of "
                f"{input.shape[-self._dims:]})")
        return tuple(n - lo for n, lo in zip(output_size, low))

    def forward(self, input, output_size=None):
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(input, output_size)
        op = F.conv_transpose1d if self._dims == 1 else F.conv_transpose2d
        return op(input, self.weight, self.bias, self.stride, self.padding,
                  output_padding, self.groups, self.dilation)

    def extra_repr(self):
        zero, one = (0,) * self._dims, (1,) * self._dims
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size="
             f"{self.kernel_size}, stride={self.stride}")
        if self.padding != zero:
            s += f", padding={self.padding}"
        if self.dilation != one:
            s += f", dilation={self.dilation}"
        if self.output_padding != zero:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose2d(_ConvTransposeNd):
    """``F.conv_transpose2d`` with ``in_channels`` inputs, ``out_channels``
    outputs and a kernel of ``kernel_size`` (see _ConvTransposeNd).

    >>> import ampc
    >>> up = ampc.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1)
    >>> up(ampc.ones(1, 8, 5, 5), output_size=[10, 10]).shape
    ampc.Size([1, 4, 10, 10])
    """


class ConvTranspose1d(_ConvTransposeNd):
    """``F.conv_transpose1d`` over (N, C, L) or (C, L) input (see
    _ConvTransposeNd).

    >>> import ampc
    >>> ampc.nn.ConvTranspose1d(8, 4, 4, stride=2)(ampc.ones(2, 8, 5)).shape
    ampc.Size([2, 4, 12])
    """

    _dims = 1


class Conv1d(Module):
    """1-D convolution (cross-correlation) with ``out_channels`` filters of
    ``kernel_size`` over ``in_channels`` of (N, C, L) or (C, L) input;
    ``stride``, ``padding`` (an int, 'valid' or 'same'), ``dilation`` and
    ``groups`` as in PyTorch, and ``padding_mode`` 'zeros', 'reflect',
    'replicate' or 'circular' (the input padded by ``F.pad`` first).
    ``weight`` (out, in / groups, k) and ``bias`` start as
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in / groups * k.

    >>> import ampc
    >>> conv = ampc.nn.Conv1d(4, 8, 3, padding=1)
    >>> conv(ampc.ones(2, 4, 10)).shape
    ampc.Size([2, 8, 10])
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1,
                 padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups.__class__ is bool or not isinstance(groups, int) or \
                groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        _check_padding_mode(padding_mode)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = (_single("Conv1d", "kernel_size", kernel_size),)
        self.stride = (_single("Conv1d", "stride", stride),)
        self.dilation = (_single("Conv1d", "dilation", dilation),)
        self._sides = padding_sides("Conv1d", padding, self.kernel_size[0],
                                    self.stride[0], self.dilation[0],
                                    ValueError)
        self.padding = (padding if isinstance(padding, str)
                        else (self._sides[0],))
        self.groups = groups
        self.padding_mode = padding_mode
        _add_parameters(self, (out_channels, in_channels // groups),
                        out_channels, bias, device, dtype)
        self.reset_parameters()

    reset_parameters = Conv2d.reset_parameters

    def forward(self, input):
        if not isinstance(input, _C.TensorBase):
            raise TypeError(
                f"Conv1d.forward(): expected a Tensor input, but got "
                f"{type(input).__name__}")
        if input.ndim not in (2, 3):
            raise RuntimeError(
                "Expected 2D (unbatched) or 3D (batched) input to conv1d, "
                f"but got input of size: {list(input.shape)}")
        return conv_sides(input, self.weight, self.bias, self.stride[0],
                          self._sides, self.dilation[0], self.groups,
                          self.padding_mode)

    def extra_repr(self):
        # PyTorch's format (padding strings unquoted)
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size="
             f"{self.kernel_size}, stride={self.stride}")
        if self.padding != (0,):
            s += f", padding={self.padding}"
        if self.dilation != (1,):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s
