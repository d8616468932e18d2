"""Activation layers: ``ReLU``, ``Sigmoid``, ``Tanh``, ``GELU``, ``SiLU``,
``LeakyReLU``, ``Softmax``, ``LogSoftmax``.

>>> import ampc
>>> ampc.nn.ReLU()(ampc.tensor([-1.0, 1.0]))
tensor([0., 1.])
"""
from .. import functional as F
from .module import Module

__all__ = ["ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "LeakyReLU", "Softmax",
           "LogSoftmax"]


class ReLU(Module):
    """max(x, 0) element-wise (in place with ``inplace=True``).

    >>> import ampc
    >>> ampc.nn.ReLU()
    ReLU()
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """1 / (1 + exp(-x)) element-wise.

    >>> import ampc
    >>> ampc.nn.Sigmoid()(ampc.zeros(2))
    tensor([0.5000, 0.5000])
    """

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """tanh(x) element-wise.

    >>> import ampc
    >>> ampc.nn.Tanh()(ampc.zeros(1))
    tensor([0.])
    """

    def forward(self, input):
        return F.tanh(input)


class GELU(Module):
    """x * Phi(x) element-wise (``approximate="tanh"``: the tanh form).

    >>> import ampc
    >>> ampc.nn.GELU()
    GELU(approximate='none')
    """

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x) element-wise.

    >>> import ampc
    >>> ampc.nn.SiLU()
    SiLU()
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x where positive, else negative_slope * x.

    >>> import ampc
    >>> ampc.nn.LeakyReLU(0.2)
    LeakyReLU(negative_slope=0.2)
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return (f"negative_slope={self.negative_slope}"
                + (", inplace=True" if self.inplace else ""))


class Softmax(Module):
    """softmax along ``dim``.

    >>> import ampc
    >>> ampc.nn.Softmax(dim=1)(ampc.zeros(1, 2))
    tensor([[0.5000, 0.5000]])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("dim", None)

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log_softmax along ``dim``.

    >>> import ampc
    >>> ampc.nn.LogSoftmax(dim=0)(ampc.zeros(2))
    tensor([-0.6931, -0.6931])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("dim", None)

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"
