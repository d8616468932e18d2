"""``MaxPool2d``, ``AvgPool2d``, ``AdaptiveAvgPool2d``, ``MaxPool1d``,
``AdaptiveMaxPool1d``, ``AdaptiveMaxPool2d`` and ``AdaptiveAvgPool1d``.

>>> import ampc
>>> ampc.nn.MaxPool2d(kernel_size=2, stride=2)
MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
>>> ampc.nn.AvgPool2d(3, stride=2, padding=1)
AvgPool2d(kernel_size=3, stride=2, padding=1)
>>> ampc.nn.AdaptiveAvgPool2d((1, 1))
AdaptiveAvgPool2d(output_size=(1, 1))
"""
from .. import functional as F
from .module import Module

__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AvgPool2d", "MaxPool1d", "MaxPool2d"]


class MaxPool2d(Module):
    """The maximum over kernel_size windows of (N, C, H, W) or (C, H, W)
    input; ``stride`` defaults to ``kernel_size``, padding pads with -inf.

    >>> import ampc
    >>> ampc.nn.MaxPool2d(2)(ampc.ones(1, 3, 4, 4)).shape
    ampc.Size([1, 3, 2, 2])
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride,
                            self.padding, self.dilation,
                            ceil_mode=self.ceil_mode,
                            return_indices=self.return_indices)

    def _relu_fold(self):
        """(kernel_size, stride, padding) as pairs when a ReLU before this
        pooling can have its backward folded into the indices (no window
        can be empty: dilation 1, no ceil_mode), else None."""
        if self.return_indices or self.ceil_mode or \
                F._pair("max_pool2d", "dilation", self.dilation) != (1, 1):
            return None
        stride = self.stride
        if stride is None or (isinstance(stride, (tuple, list))
                              and len(stride) == 0):
            stride = self.kernel_size       # as F.max_pool2d
        return tuple(F._pair("max_pool2d", name, v) for name, v in (
            ("kernel_size", self.kernel_size), ("stride", stride),
            ("padding", self.padding)))

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, "
                f"ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """The mean over kernel_size windows of (N, C, H, W) or (C, H, W)
    input (``F.avg_pool2d``'s arguments).

    >>> import ampc
    >>> ampc.nn.AvgPool2d(2)(ampc.ones(1, 3, 4, 4)).shape
    ampc.Size([1, 3, 2, 2])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride,
                            self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")


class AdaptiveAvgPool2d(Module):
    """Average pooling to ``output_size`` (``F.adaptive_avg_pool2d``): a
    ResNet's ``AdaptiveAvgPool2d((1, 1))`` before its classifier.

    >>> import ampc
    >>> ampc.nn.AdaptiveAvgPool2d(1)(ampc.ones(2, 3, 5, 7)).shape
    ampc.Size([2, 3, 1, 1])
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class MaxPool1d(Module):
    """The maximum over kernel_size windows along the last dim of (N, C,
    L) or (C, L) input (``F.max_pool1d``'s arguments).

    >>> import ampc
    >>> ampc.nn.MaxPool1d(3)
    MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride,
                            self.padding, self.dilation,
                            ceil_mode=self.ceil_mode,
                            return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, "
                f"ceil_mode={self.ceil_mode}")


class _AdaptivePool(Module):
    """An adaptive pooling to ``output_size``."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(_AdaptivePool):
    """Max pooling to ``output_size`` (``F.adaptive_max_pool2d``).

    >>> import ampc
    >>> ampc.nn.AdaptiveMaxPool2d((3, None))(ampc.ones(1, 5, 7)).shape
    ampc.Size([1, 3, 7])
    """

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size,
                                     self.return_indices)


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """Max pooling of (N, C, L) or (C, L) input to ``output_size``
    (``F.adaptive_max_pool1d``)."""

    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size,
                                     self.return_indices)


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average pooling of (N, C, L) or (C, L) input to ``output_size``
    (``F.adaptive_avg_pool1d``)."""

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)
