"""Activation layers: ``ReLU``, ``Sigmoid``, ``Tanh``, ``GELU``, ``SiLU``,
``LeakyReLU``, ``Softmax``, ``LogSoftmax``, and ``ReLU6``, ``Hardtanh``,
``ELU``, ``SELU``, ``CELU``, ``Softplus``, ``Hardsigmoid``, ``Hardswish``,
``Softsign``, ``Mish``, ``LogSigmoid`` (composites, nn/_activations_more.py)
and ``PReLU`` (learned slopes, nn/_prelu.py).

>>> import ampc
>>> ampc.nn.ReLU()(ampc.tensor([-1.0, 1.0]))
tensor([0., 1.])
"""
from ..._creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "LeakyReLU", "Softmax",
           "LogSoftmax", "ReLU6", "Hardtanh", "ELU", "SELU", "CELU",
           "Softplus", "Hardsigmoid", "Hardswish", "Softsign", "Mish",
           "LogSigmoid", "PReLU"]


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


def _inplace_str(inplace, sep=", "):
    return sep + "inplace=True" if inplace else ""


class Hardtanh(Module):
    """clamp(x, min_val, max_val) element-wise.

    >>> import ampc
    >>> ampc.nn.Hardtanh(-2, 2)
    Hardtanh(min_val=-2, max_val=2)
    """

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + _inplace_str(self.inplace))


class ReLU6(Hardtanh):
    """min(max(x, 0), 6) element-wise.

    >>> import ampc
    >>> ampc.nn.ReLU6()
    ReLU6()
    """

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace, "")


class ELU(Module):
    """x where positive, else alpha * (exp(x) - 1).

    >>> import ampc
    >>> ampc.nn.ELU()
    ELU(alpha=1.0)
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_str(self.inplace)


class CELU(ELU):
    """x where positive, else alpha * (exp(x / alpha) - 1).

    >>> import ampc
    >>> ampc.nn.CELU(2.0)
    CELU(alpha=2.0)
    """

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class SELU(Module):
    """scale * elu(x, alpha) with the self-normalising constants.

    >>> import ampc
    >>> ampc.nn.SELU()
    SELU()
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.selu(input, self.inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace, "")


class Softplus(Module):
    """log(1 + exp(beta x)) / beta (x where beta x > threshold).

    >>> import ampc
    >>> ampc.nn.Softplus()
    Softplus(beta=1.0, threshold=20.0)
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardsigmoid(Module):
    """clamp(x + 3, 0, 6) / 6 element-wise.

    >>> import ampc
    >>> ampc.nn.Hardsigmoid()
    Hardsigmoid()
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Hardswish(Module):
    """x * clamp(x + 3, 0, 6) / 6 element-wise.

    >>> import ampc
    >>> ampc.nn.Hardswish()
    Hardswish()
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Softsign(Module):
    """x / (1 + |x|) element-wise.

    >>> import ampc
    >>> ampc.nn.Softsign()
    Softsign()
    """

    def forward(self, input):
        return F.softsign(input)


class Mish(Module):
    """x * tanh(softplus(x)) element-wise.

    >>> import ampc
    >>> ampc.nn.Mish()
    Mish()
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.mish(input, self.inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace, "")


class LogSigmoid(Module):
    """log(sigmoid(x)) element-wise.

    >>> import ampc
    >>> ampc.nn.LogSigmoid()
    LogSigmoid()
    """

    def forward(self, input):
        return F.logsigmoid(input)


class PReLU(Module):
    """``F.prelu`` with ``num_parameters`` learned slopes (1, or one per
    input channel), each starting at ``init``.

    >>> import ampc
    >>> ampc.nn.PReLU(3)
    PReLU(num_parameters=3)
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device,
                                      dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
