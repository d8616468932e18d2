"""``BatchNorm1d`` and ``BatchNorm2d``: per-channel normalisation by the
batch's statistics while training and by running estimates in evaluation,
with PyTorch's parameters, buffers and state-dict keys.

>>> import ampc
>>> [name for name, _ in ampc.nn.BatchNorm2d(16).named_buffers()]
['running_mean', 'running_var', 'num_batches_tracked']
"""
from ... import _C
from ..._creation import empty, ones, tensor, zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d"]


class _BatchNorm(Module):
    """What BatchNorm1d and BatchNorm2d share (PyTorch's _NormBase and
    _BatchNorm): ``weight``/``bias`` (C) when ``affine``, and the buffers
    ``running_mean``, ``running_var`` (C) and ``num_batches_tracked`` (an
    int64 scalar) when ``track_running_stats``.  ``momentum=None`` makes the
    running statistics a cumulative average over the batches seen."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__()
        if num_features.__class__ is bool or \
                not isinstance(num_features, int) or num_features < 0:
            raise ValueError(
                f"{type(self).__name__}(): num_features must be a "
                f"non-negative int, got {num_features!r}")
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, device=device,
                                          dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, device=device,
                                            dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(
                num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(
                num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(
                0, dtype=_C.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        """Running mean 0, variance 1 and no batch seen."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        """Fresh running statistics, weight 1 and bias 0 (as PyTorch)."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def forward(self, input):
        if not isinstance(input, _C.TensorBase):
            raise TypeError(
                f"{type(self).__name__}.forward(): expected a Tensor input, "
                f"but got {type(input).__name__}")
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and \
                self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                # the cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        # batch statistics while training, and in evaluation without
        # running estimates
        use_batch = self.training or (self.running_mean is None
                                      and self.running_var is None)
        tracked = not self.training or self.track_running_stats
        return F.batch_norm(
            input, self.running_mean if tracked else None,
            self.running_var if tracked else None, self.weight, self.bias,
            use_batch, factor, self.eps)

    def _load_from_state_dict(self, state_dict, prefix, strict,
                              missing_keys, unexpected_keys, error_msgs,
                              assign):
        # a state dict from before num_batches_tracked existed (PyTorch's
        # version 1) loads with the current count, as in PyTorch
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            state_dict = dict(state_dict)
            state_dict[key] = (self.num_batches_tracked
                               if self.num_batches_tracked is not None
                               else tensor(0, dtype=_C.int64))
        super()._load_from_state_dict(state_dict, prefix, strict,
                                      missing_keys, unexpected_keys,
                                      error_msgs, assign)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum="
                f"{self.momentum}, affine={self.affine}, bias="
                f"{self.bias is not None}, track_running_stats="
                f"{self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs over N (and L).

    >>> import ampc
    >>> bn = ampc.nn.BatchNorm1d(3)
    >>> bn(ampc.randn(8, 3)).shape
    ampc.Size([8, 3])
    """

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(
                f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs over N, H and W.

    >>> import ampc
    >>> bn = ampc.nn.BatchNorm2d(4).eval()
    >>> bn(ampc.ones(2, 4, 3, 3)).shape
    ampc.Size([2, 4, 3, 3])
    """

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")
