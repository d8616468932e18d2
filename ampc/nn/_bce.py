"""``binary_cross_entropy_with_logits``: PyTorch's numerically stable
sigmoid + binary cross-entropy, with ``weight``, ``pos_weight`` and the
reductions.  Written with ampc's element-wise ops; its gradient has its own
closed form, (1 - y) - lw * (1 - sigmoid(x)) with lw = 1 + (pos_weight - 1)
* y, so it is exact at x = 0 where the stable forward has kinks (relu,
abs).  Under autocast it runs in float32 on both devices, as in PyTorch.

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.binary_cross_entropy_with_logits(ampc.zeros(2), ampc.ones(2))
tensor(0.6931)
"""
from ..autograd import Function, autocast_listed
from ._args import _needs_grad, _reduction, _tensor


def _softplus_neg(x):
    """log(1 + exp(-x)), stable: m + log(exp(-m) + exp(-x - m)), m =
    max(-x, 0)."""
    m = (-x).relu()
    return m + ((-m).exp() + (-x - m).exp()).log()


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _elementwise(x, y, weight, pos_weight):
    """The per-element loss and softplus(-x) (for the gradients)."""
    sp = _softplus_neg(x)
    lw = sp if pos_weight is None else ((pos_weight - 1) * y + 1) * sp
    loss = (1 - y) * x + lw
    return (loss if weight is None else loss * weight), sp


def bce_grads(ctx, g, x, y, weight, pos_weight):
    """The gradients of every input that needs one, from g; written with
    differentiable tensor ops, so it is also the create_graph formula."""
    n = x.numel()
    if ctx.reduction == "mean":
        g = g / n
    w = g if weight is None else g * weight
    need = ctx.needs_input_grad
    gx = gy = gw = gp = None
    lw = 1 if pos_weight is None else (pos_weight - 1) * y + 1
    if need[0]:
        gx = w * ((1 - y) - lw * (1 - x.sigmoid()))
    if need[1] or need[3]:
        sp = _softplus_neg(x)
        if need[1]:
            gy = w * (-x if pos_weight is None else (pos_weight - 1) * sp - x)
        if need[3]:
            gp = w * y * sp
    if need[2]:
        gw = g * _elementwise(x, y, None, pos_weight)[0]
    return gx, gy, gw, gp, None


class _BceWithLogits(Function):
    node_name = "BinaryCrossEntropyWithLogitsBackward0"
    autocast_op = "binary_cross_entropy_with_logits"

    @staticmethod
    def forward(ctx, x, y, weight, pos_weight, reduction):
        ctx.reduction = reduction
        ctx.save_for_backward(x, y, weight, pos_weight)
        return _reduce(_elementwise(x, y, weight, pos_weight)[0], reduction)

    @staticmethod
    def backward(ctx, g):
        return bce_grads(ctx, g, *ctx.saved_tensors)


def binary_cross_entropy_with_logits(input, target, weight=None,
                                     size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Binary cross-entropy of ``sigmoid(input)`` against ``target`` (same
    shape, probabilities), stable for any logit: ``weight`` scales each
    element (broadcast), ``pos_weight`` the positive term per class (the
    last dim)."""
    fn = "binary_cross_entropy_with_logits"
    _tensor(fn, "input", 1, input)
    _tensor(fn, "target", 2, target)
    reduction = _reduction(fn, size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Target size ({target.shape}) must be the same as input size "
            f"({input.shape})")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is not None:
            _tensor(fn, name, 3 if name == "weight" else 7, t)
    if _needs_grad(input, target, weight, pos_weight) or \
            autocast_listed(_BceWithLogits):
        return _BceWithLogits.apply(input, target, weight, pos_weight,
                                    reduction)
    return _reduce(_elementwise(input, target, weight, pos_weight)[0],
                   reduction)
