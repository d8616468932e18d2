"""The losses of ``ampc.nn.functional``: ``nll_loss``, ``cross_entropy``
(log_softmax and nll_loss fused in one ``_C`` call) and ``mse_loss``, each
an autograd ``Function`` on one ``_C`` call, with PyTorch's N-d targets,
class-probability targets and deprecated ``size_average``/``reduce``."""
import warnings

from .. import _C
from ..autograd import Function, autocast_listed
from ._args import (_int, _needs_grad, _number, _opt_tensor, _reduction,
                    _tensor)


class _NllLoss(Function):
    node_name = "NllLossBackward0"
    autocast_op = "nll_loss"

    @staticmethod
    def forward(ctx, logp, target, weight, reduction, ignore_index):
        loss, total_weight = _C.nll_loss(logp, target, weight, reduction,
                                         ignore_index)
        ctx.reduction = reduction
        ctx.ignore_index = ignore_index
        ctx.save_for_backward(logp, target, weight, total_weight)
        return loss

    @staticmethod
    def backward(ctx, g):
        logp, target, weight, total_weight = ctx.saved_tensors
        grad = _C.nll_loss_backward(g, logp, target, weight,
                                    ctx.reduction, ctx.ignore_index,
                                    total_weight)
        return grad, None, None, None, None


class _CrossEntropy(Function):
    """log_softmax + nll_loss fused in ``_C.cross_entropy``, which also
    returns the log-probabilities (and any further values) that its
    backward needs."""

    node_name = "CrossEntropyLossBackward0"
    autocast_op = "cross_entropy"

    @staticmethod
    def forward(ctx, logits, target, weight, reduction, ignore_index,
                label_smoothing):
        loss, *saved = _C.cross_entropy(logits, target, weight, reduction,
                                        ignore_index, label_smoothing)
        ctx.args = (reduction, ignore_index, label_smoothing)
        ctx.save_for_backward(target, weight, *saved)
        return loss

    @staticmethod
    def backward(ctx, g):
        target, weight, log_probs, *extra = ctx.saved_tensors
        reduction, ignore_index, label_smoothing = ctx.args
        grad = _C.cross_entropy_backward(g, log_probs, target,
                                         weight, reduction, ignore_index,
                                         label_smoothing, *extra)
        return grad, None, None, None, None, None


def _class_rows(fn, input, target):
    """(N, C, d1, ...) input and (N, d1, ...) target -> (N*d1*..., C) rows
    and a flat target, for the (N, C) kernels; also the shape of a
    reduction='none' result."""
    if input.ndim <= 2:
        return input, target, None
    n, c = input.shape[0], input.shape[1]
    expected = (n,) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(
            f"{fn}(): Expected target size {list(expected)}, got "
            f"{list(target.shape)}")
    perm = (0,) + tuple(range(2, input.ndim)) + (1,)
    rows = input.permute(*perm).reshape(-1, c)
    return rows, target.reshape(-1), expected


def nll_loss(input, target, weight=None, size_average=None,
             ignore_index=-100, reduce=None, reduction="mean"):
    """The negative log-likelihood loss of log-probabilities input (N, C)
    (or (C,), or (N, C, d1, ...)) for class indices target (int64); class
    ``weight``s and ``ignore_index`` as in PyTorch.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.nll_loss(ampc.tensor([[-1.0, -2.0]]), ampc.tensor([1]))
    tensor(2.)
    """
    _tensor("nll_loss", "input", 1, input)
    _tensor("nll_loss", "target", 2, target)
    _opt_tensor("nll_loss", "weight", 3, weight)
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    ignore_index = _int("nll_loss", "ignore_index", ignore_index)
    rows, flat, none_shape = _class_rows("nll_loss", input, target)
    if _needs_grad(rows, weight) or autocast_listed(_NllLoss):
        loss = _NllLoss.apply(rows, flat, weight, reduction, ignore_index)
    else:
        loss = _C.nll_loss(rows, flat, weight, reduction, ignore_index)[0]
    if none_shape is not None and reduction == "none":
        loss = loss.reshape(none_shape)
    return loss


def _soft_target_cross_entropy(input, target, weight, reduction,
                               label_smoothing):
    """Cross-entropy against class probabilities (a float target of the
    input's shape), composed from log_softmax and element-wise ops."""
    c = input.shape[1] if input.ndim >= 2 else input.shape[0]
    cdim = 1 if input.ndim >= 2 else 0
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(
            "cross_entropy(): a target of class probabilities must have the "
            f"input's shape {list(input.shape)}, got {list(target.shape)}")
    from .functional import log_softmax     # (functional imports this)
    logp = log_softmax(input, cdim)
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / c
    terms = logp * target
    if weight is not None:
        shape = [1] * input.ndim
        shape[cdim] = c
        terms = terms * weight.view(*shape)
    loss = -terms.sum(cdim)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (input.numel() // c)


def cross_entropy(input, target, weight=None, size_average=None,
                  ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """The cross-entropy loss of unnormalised logits input (N, C) (or
    (C,), or (N, C, d1, ...)) against class indices (int64) or class
    probabilities (float, input's shape); PyTorch's ``weight``,
    ``ignore_index``, ``reduction`` and ``label_smoothing``.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.cross_entropy(ampc.zeros(1, 4), ampc.tensor([2]))
    tensor(1.3863)
    """
    _tensor("cross_entropy", "input", 1, input)
    _tensor("cross_entropy", "target", 2, target)
    _opt_tensor("cross_entropy", "weight", 3, weight)
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    ignore_index = _int("cross_entropy", "ignore_index", ignore_index)
    label_smoothing = _number("cross_entropy", "label_smoothing",
                              label_smoothing)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(
            "cross_entropy(): label_smoothing must be between 0.0 and 1.0. "
            f"Got: {label_smoothing}")
    if target.dtype.is_floating_point:
        if autocast_listed(_CrossEntropy):
            # the whole composite runs in autocast's float32, as the op
            input, target = input.float(), target.float()
            weight = None if weight is None else weight.float()
        return _soft_target_cross_entropy(input, target, weight, reduction,
                                          label_smoothing)
    rows, flat, none_shape = _class_rows("cross_entropy", input, target)
    if _needs_grad(rows, weight) or autocast_listed(_CrossEntropy):
        loss = _CrossEntropy.apply(rows, flat, weight, reduction,
                                   ignore_index, label_smoothing)
    else:
        loss = _C.cross_entropy(rows, flat, weight, reduction, ignore_index,
                                label_smoothing)[0]
    if none_shape is not None and reduction == "none":
        loss = loss.reshape(none_shape)
    return loss


class _MseLoss(Function):
    node_name = "MseLossBackward0"
    autocast_op = "mse_loss"

    @staticmethod
    def forward(ctx, input, target, reduction):
        ctx.reduction = reduction
        ctx.save_for_backward(input, target)
        return _C.mse_loss(input, target, reduction)

    @staticmethod
    def backward(ctx, g):
        input, target = ctx.saved_tensors
        gi = _C.mse_loss_backward(g, input, target, ctx.reduction)
        gt = _C.unary("neg", gi) if ctx.needs_input_grad[1] else None
        return (gi if ctx.needs_input_grad[0] else None), gt, None


def mse_loss(input, target, size_average=None, reduce=None,
             reduction="mean"):
    """The mean (or sum, or element-wise) squared error of input against
    target.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.mse_loss(ampc.tensor([1.0, 3.0]), ampc.tensor([0.0, 0.0]))
    tensor(5.)
    """
    _tensor("mse_loss", "input", 1, input)
    _tensor("mse_loss", "target", 2, target)
    reduction = _reduction("mse_loss", size_average, reduce, reduction)
    if input.shape != target.shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the "
            f"input size ({input.shape}). This will likely lead to incorrect "
            "results due to broadcasting. Please ensure they have the same "
            "size.", stacklevel=2)
        shape = _broadcast_shape("mse_loss", input.shape, target.shape)
        input = input.expand(*shape).contiguous()
        target = target.expand(*shape).contiguous()
    if _needs_grad(input, target) or autocast_listed(_MseLoss):
        return _MseLoss.apply(input, target, reduction)
    return _C.mse_loss(input, target, reduction)


def _broadcast_shape(fn, a, b):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y and 1 not in (x, y):
            raise RuntimeError(
                f"{fn}(): The size of tensor a ({x}) must match the size of "
                f"tensor b ({y}) at non-singleton dimension {i}")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)
