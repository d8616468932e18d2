"""Recurrent layers as PyTorch's: ``RNN``, ``LSTM``, ``GRU`` (stacked,
bidirectional, batch_first, dropout between layers, LSTM's proj_size) and
the cells ``RNNCell``, ``LSTMCell``, ``GRUCell``, with PyTorch's parameter
names and shapes (``weight_ih_l0``, ``bias_hh_l1_reverse``, ...), gate
orders and initialisation (every parameter U(-1/sqrt(H), 1/sqrt(H))).

>>> import ampc
>>> lstm = ampc.nn.LSTM(10, 20, num_layers=2)
>>> out, (h, c) = lstm(ampc.randn(5, 3, 10))
>>> out.shape, h.shape
(ampc.Size([5, 3, 20]), ampc.Size([2, 3, 20]))
"""
import math
import numbers
import warnings

from ... import _C
from ..._creation import empty, zeros
from ...autograd import _mode
from .. import init
from .._rnn import cell, recurrent
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell",
           "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _nonlinearity(v):
    if v not in ("tanh", "relu"):
        raise ValueError(
            f"Unknown nonlinearity '{v}'. Select from 'tanh' or 'relu'.")
    return v


def _init_uniform(module):
    stdv = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 \
        else 0
    for w in module.parameters():
        init.uniform_(w, -stdv, stdv)


class RNNBase(Module):
    """The stacked recurrent layer behind RNN, LSTM and GRU; ``mode`` is
    'LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU'."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1,
                 bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if isinstance(dropout, bool) or \
                not isinstance(dropout, numbers.Number) or \
                not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing "
                "the probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent "
                "layer, so non-zero dropout expects num_layers greater than "
                f"1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=3)
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(
                "hidden_size should be of type int, got: "
                f"{type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError(
                "proj_size should be a positive integer or zero to disable "
                "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError(
                "proj_size argument is only supported for LSTM, not RNN or "
                "GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gates = _GATES[mode] * hidden_size
        out_size = proj_size or hidden_size
        dirs = 2 if bidirectional else 1
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for d in range(dirs):
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                layer_in = input_size if layer == 0 else out_size * dirs
                shapes = [("weight_ih", (gates, layer_in)),
                          ("weight_hh", (gates, out_size))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for name, shape in shapes:
                    self.register_parameter(name + suffix, Parameter(
                        empty(*shape, device=device, dtype=dtype)))
                    names.append(name + suffix)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        """Every parameter U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _init_uniform(self)

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names]
                for names in self._all_weights]

    def _layer_weights(self):
        """Per layer and direction: (w_ih, w_hh, b_ih, b_hh, w_hr)."""
        out = []
        for names in self._all_weights:
            get = {n.split("_l")[0]: getattr(self, n) for n in names}
            out.append((get["weight_ih"], get["weight_hh"],
                        get.get("bias_ih"), get.get("bias_hh"),
                        get.get("weight_hr")))
        return out

    def _check_input(self, input, packed):
        name = type(self).__name__
        if not isinstance(input, _C.TensorBase):
            raise TypeError(
                f"{name}.forward(): expected a Tensor input, but got "
                f"{type(input).__name__}")
        if packed and input.ndim != 2:
            raise RuntimeError(
                f"input must have 2 dimensions, got {input.ndim}")
        if not packed and input.ndim not in (2, 3):
            raise ValueError(
                f"{name}: Expected input to be 2D or 3D, got {input.ndim}D "
                "instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(
                "input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {input.shape[-1]}")
        w = self.weight_ih_l0
        # under any autocast the policy casts instead (PyTorch checks only
        # outside autocast too)
        if input.dtype != w.dtype and not _C.autocast_active():
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight "
                f"dtype ({w.dtype}). Convert input: input.to({w.dtype}), "
                f"or convert model: model.to({input.dtype})")

    def _check_hidden(self, h, shape, what):
        if tuple(h.shape) != shape:
            raise RuntimeError(
                f"Expected {what} size {shape}, got {list(h.shape)}")

    def _hidden(self, input, hx, batch, unbatched):
        """(h0, c0) as (L*D, N, ·) tensors, zeros where hx is None."""
        dirs = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        h_shape = (self.num_layers * dirs, batch,
                   self.proj_size or self.hidden_size)
        c_shape = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            h0 = zeros(*h_shape, dtype=input.dtype, device=input.device)
            c0 = zeros(*c_shape, dtype=input.dtype, device=input.device) \
                if lstm else None
            return h0, c0
        hs = tuple(hx) if lstm else (hx,)
        want = 2 if unbatched else 3
        if any(h.ndim != want for h in hs):
            kind = "unbatched 2-D" if unbatched else "batched 3-D"
            if lstm:
                raise RuntimeError(
                    f"For {kind} input, hx and cx should also be {want}-D "
                    f"but got ({hs[0].ndim}-D, {hs[1].ndim}-D) tensors")
            raise RuntimeError(
                f"For {kind} input, hx should also be {want}-D but got "
                f"{hs[0].ndim}-D tensor")
        if unbatched:
            hs = tuple(h.unsqueeze(1) for h in hs)
        if not lstm:
            self._check_hidden(hs[0], h_shape, "hidden")
            return hs[0], None
        self._check_hidden(hs[0], h_shape, "hidden[0]")
        self._check_hidden(hs[1], c_shape, "hidden[1]")
        return hs

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        if packed:
            self._check_input(input.data, packed)
            sizes = tuple(input.batch_sizes.tolist())
            order, x = input.sorted_indices, input.data
            batch, unbatched = sizes[0], False
        else:
            self._check_input(input, packed)
            unbatched = input.ndim == 2
            x = input.unsqueeze(1) if unbatched else (
                input.transpose(0, 1) if self.batch_first else input)
            steps, batch = x.shape[0], x.shape[1]
            sizes, order = (batch,) * steps, None
            x = x.reshape((steps * batch, x.shape[2]))
        h0, c0 = self._hidden(x, hx, batch, unbatched)
        if order is not None and hx is not None:
            h0 = h0.index_select(1, order)
            c0 = None if c0 is None else c0.index_select(1, order)
        weights = self._layer_weights()
        mode = self.mode.lower()
        if _C.autocast_active():
            flat = [w for ws in weights for w in ws if w is not None]
            x, h0, c0, flat = _C.autocast_cast_args(
                mode, (x, h0, c0, flat), _mode.enabled)
            it = iter(flat)
            weights = [tuple(None if w is None else next(it) for w in ws)
                       for ws in weights]
        out, hn, cn = recurrent(mode, x, sizes, h0, c0, weights,
                                self.num_layers, self.bidirectional,
                                self.dropout, self.training)
        if packed:
            out = PackedSequence(out, input.batch_sizes, order,
                                 input.unsorted_indices)
            if order is not None:
                hn = hn.index_select(1, input.unsorted_indices)
                cn = None if cn is None else \
                    cn.index_select(1, input.unsorted_indices)
        else:
            out = out.reshape((len(sizes), batch, out.shape[1]))
            if unbatched:
                out, hn = out.squeeze(1), hn.squeeze(1)
                cn = None if cn is None else cn.squeeze(1)
            elif self.batch_first:
                out = out.transpose(0, 1)
        return (out, (hn, cn)) if cn is not None else (out, hn)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)
    (or relu with ``nonlinearity='relu'``)."""

    def __init__(self, input_size, hidden_size, num_layers=1,
                 nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("RNN_" + _nonlinearity(nonlinearity).upper(),
                         input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """LSTM (gates i, f, g, o); ``proj_size`` > 0 projects each h_t by
    ``weight_hr`` (proj_size, hidden_size).  forward(input, (h0, c0))
    returns (output, (h_n, c_n))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False,
                 proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, proj_size,
                         device, dtype)


class GRU(RNNBase):
    """GRU (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False,
                 device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, 0, device,
                         dtype)


class RNNCellBase(Module):
    """One step's parameters: weight_ih (G*H, I), weight_hh (G*H, H),
    bias_ih, bias_hh (G*H,)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks,
                 device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        g = num_chunks * hidden_size
        self.weight_ih = Parameter(empty(g, input_size, device=device,
                                         dtype=dtype))
        self.weight_hh = Parameter(empty(g, hidden_size, device=device,
                                         dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(g, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(g, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Every parameter U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _init_uniform(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _check(self, input, hx, names):
        """input and the hidden tensors as 2-D, after PyTorch's checks;
        also whether the input came unbatched."""
        cls = type(self).__name__
        if not isinstance(input, _C.TensorBase):
            raise TypeError(
                f"{cls}.forward(): expected a Tensor input, but got "
                f"{type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ValueError(
                f"{cls}: Expected input to be 1D or 2D, got {input.ndim}D "
                "instead")
        for h, name in zip(hx, names):
            if h is not None and h.ndim not in (1, 2):
                raise ValueError(
                    f"{cls}: Expected {name} to be 1D or 2D, got {h.ndim}D "
                    "instead")
        unbatched = input.ndim == 1
        if unbatched:
            input = input.unsqueeze(0)
        batch = input.shape[0]
        if input.shape[1] != self.input_size:
            raise RuntimeError(
                "input has inconsistent input_size: got "
                f"{input.shape[1]} expected {self.input_size}")
        out = []
        for k, h in enumerate(hx):
            if h is None:
                h = zeros(batch, self.hidden_size, dtype=input.dtype,
                          device=input.device)
            elif unbatched:
                h = h.unsqueeze(0)
            if h.shape[0] != batch:
                raise RuntimeError(
                    f"Input batch size {batch} doesn't match hidden{k} "
                    f"batch size {h.shape[0]}")
            if h.shape[1] != self.hidden_size:
                raise RuntimeError(
                    f"hidden{k} has inconsistent hidden_size: got "
                    f"{h.shape[1]}, expected {self.hidden_size}")
            out.append(h)
        return input, out, unbatched

    def _step(self, mode, input, h, c):
        return cell(mode, input, h, c, self.weight_ih, self.weight_hh,
                    self.bias_ih, self.bias_hh)


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True,
                 nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = _nonlinearity(nonlinearity)

    def forward(self, input, hx=None):
        input, (h,), unbatched = self._check(input, (hx,), ("hidden",))
        h = self._step("rnn_" + self.nonlinearity, input, h, None)
        return h.squeeze(0) if unbatched else h


class LSTMCell(RNNCellBase):
    """One LSTM step: forward(input, (h, c)) -> (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        hx = (None, None) if hx is None else tuple(hx)
        input, (h, c), unbatched = self._check(input, hx, ("hx[0]", "hx[1]"))
        h, c = self._step("lstm", input, h, c)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step: forward(input, h) -> h'."""

    def __init__(self, input_size, hidden_size, bias=True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        input, (h,), unbatched = self._check(input, (hx,), ("hidden",))
        h = self._step("gru", input, h, None)
        return h.squeeze(0) if unbatched else h
