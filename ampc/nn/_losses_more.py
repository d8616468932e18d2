"""``l1_loss``, ``smooth_l1_loss``, ``huber_loss``, ``binary_cross_entropy``
and ``kl_div``: PyTorch's element-wise losses, composed from ampc's
differentiable tensor ops (so they have second derivatives) in the inputs'
dtype, with PyTorch's signatures, reductions, size-mismatch warning and
argument errors.  ``binary_cross_entropy`` is an autograd ``Function`` with
PyTorch's closed-form gradients (finite at input 0 and 1, where the clamped
logs have kinks).

Autocast: PyTorch lists all five in its float32 policy on CPU, and all
but ``binary_cross_entropy`` on CUDA, where it *bans* that one; so does
``_C``'s policy table (``csrc/autocast_ops.def``), applied here.

>>> import ampc
>>> import ampc.nn.functional as F
>>> F.l1_loss(ampc.tensor([1.0, -3.0]), ampc.zeros(2))
tensor(2.)
"""
import warnings

from .. import _C
from .._tensor_where import where as _where
from ..autograd import Function, _mode
from ._args import (_needs_grad, _number, _opt_tensor, _reduction,
                    _tensor)
from ._losses import _broadcast_shape

_TORCH_DTYPE_NAMES = {"float16": "Half", "bfloat16": "BFloat16",
                      "float32": "Float", "int64": "Long", "bool": "Bool"}


def _autocast(fn, *tensors):
    """The autocast policy of ``fn`` from ``_C``'s table (float32 for all
    five; ``binary_cross_entropy`` refused under CUDA autocast)."""
    if not _C.autocast_active():
        return tensors
    return _C.autocast_cast_args(fn, tensors, _mode.enabled)


def _size_warning(input, target):
    warnings.warn(
        f"Using a target size ({target.shape}) that is different to the "
        f"input size ({input.shape}). This will likely lead to incorrect "
        "results due to broadcasting. Please ensure they have the same "
        "size.", stacklevel=3)


def _pair_args(fn, input, target):
    """Check input/target, warn on different sizes and broadcast them."""
    _tensor(fn, "input", 1, input)
    _tensor(fn, "target", 2, target)
    if tuple(input.shape) != tuple(target.shape):
        _size_warning(input, target)
        shape = _broadcast_shape(fn, input.shape, target.shape)
        input = input.expand(*shape)
        target = target.expand(*shape)
    return input, target


def _check_weight(weight, input):
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


# ----------------------------------------------------------------------------
# l1_loss, smooth_l1_loss, huber_loss


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
            weight=None):
    """The mean (or sum, or element-wise) absolute error of input against
    target; an optional ``weight`` of the input's size scales each element
    (then 'mean' divides by ``weight.sum()``), as in PyTorch.  The gradient
    at input == target is 0.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.l1_loss(ampc.tensor([1.0, 3.0]), ampc.zeros(2), reduction="sum")
    tensor(4.)
    """
    fn = "l1_loss"
    input, target = _pair_args(fn, input, target)
    _opt_tensor(fn, "weight", 6, weight)
    reduction = _reduction(fn, size_average, reduce, reduction)
    input, target, weight = _autocast(fn, input, target, weight)
    loss = (input - target).abs()
    if weight is None:
        return _reduce(loss, reduction)
    _check_weight(weight, input)
    loss = loss * weight
    if reduction == "mean":
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def _quadratic_or_linear(input, target, width, scale_linear):
    """0.5 d^2 (/ width) for |d| < width, else the linear part."""
    d = input - target
    ad = d.abs()
    if scale_linear:         # huber: delta * (|d| - delta / 2)
        return _where(ad < width, 0.5 * d * d, width * (ad - 0.5 * width))
    return _where(ad < width, 0.5 * d * d / width, ad - 0.5 * width)



def smooth_l1_loss(input, target, size_average=None, reduce=None,
                   reduction="mean", beta=1.0):
    """PyTorch's smooth L1 loss: 0.5 d^2 / beta where |d| < beta, else
    |d| - 0.5 beta (d = input - target); beta = 0 is the L1 loss.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.smooth_l1_loss(ampc.tensor([0.5, 3.0]), ampc.zeros(2),
    ...                  reduction="none")
    tensor([0.1250, 2.5000])
    """
    fn = "smooth_l1_loss"
    input, target = _pair_args(fn, input, target)
    reduction = _reduction(fn, size_average, reduce, reduction)
    beta = _number(fn, "beta", beta)
    if beta < 0:
        raise RuntimeError(
            "smooth_l1_loss does not support negative values for beta.")
    input, target = _autocast(fn, input, target)
    if beta == 0.0:
        return _reduce((input - target).abs(), reduction)
    return _reduce(_quadratic_or_linear(input, target, beta, False),
                   reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """PyTorch's Huber loss: 0.5 d^2 where |d| < delta, else
    delta (|d| - 0.5 delta) (d = input - target); an optional ``weight`` of
    the input's size scales each element ('mean' is then the plain mean).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.huber_loss(ampc.tensor([0.5, 3.0]), ampc.zeros(2), delta=2.0,
    ...              reduction="none")
    tensor([0.1250, 4.0000])
    """
    fn = "huber_loss"
    input, target = _pair_args(fn, input, target)
    _opt_tensor(fn, "weight", 5, weight)
    reduction = _reduction(fn, None, None, reduction)
    delta = _number(fn, "delta", delta)
    if not delta > 0:
        raise RuntimeError(
            "huber_loss does not support non-positive values for delta.")
    input, target, weight = _autocast(fn, input, target, weight)
    loss = _quadratic_or_linear(input, target, delta, True)
    if weight is not None:
        _check_weight(weight, input)
        loss = loss * weight
    return _reduce(loss, reduction)


# ----------------------------------------------------------------------------
# binary_cross_entropy


def _bce_elementwise(x, y, weight):
    """-(y log x + (1 - y) log(1 - x)), each log clamped at -100."""
    loss = -(y * x.log().clamp(min=-100) +
             (1 - y) * (1 - x).log().clamp(min=-100))
    return loss if weight is None else loss * weight


class _BinaryCrossEntropy(Function):
    node_name = "BinaryCrossEntropyBackward0"

    @staticmethod
    def forward(ctx, x, y, weight, reduction):
        ctx.reduction = reduction
        ctx.save_for_backward(x, y, weight)
        return _reduce(_bce_elementwise(x, y, weight), reduction)

    @staticmethod
    def backward(ctx, g):
        # PyTorch's closed forms, in differentiable ops (create_graph):
        # input: g w (x - y) / max(x (1 - x), 1e-12); target: -g w logit(x)
        x, y, weight = ctx.saved_tensors
        if ctx.reduction == "mean":
            g = g / x.numel()
        w = g if weight is None else g * weight
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = w * (x - y) / (x * (1 - x)).clamp(min=1e-12)
        if ctx.needs_input_grad[1]:
            gy = w * ((1 - x).log() - x.log())
        return gx, gy, None, None


def formulas():
    """The create_graph formula: backward above is written with
    differentiable ops."""
    return {_BinaryCrossEntropy: _BinaryCrossEntropy.backward}


def _check_unit_interval(fn, name, t):
    if t.numel() and not bool(((t >= 0) & (t <= 1)).all()):
        raise RuntimeError(
            f"{fn}(): all elements of {name} should be between 0 and 1")


def binary_cross_entropy(input, target, weight=None, size_average=None,
                         reduce=None, reduction="mean"):
    """Binary cross-entropy of probabilities ``input`` against ``target``
    (same shape and dtype, values in [0, 1]): each log term is clamped at
    -100, as in PyTorch; ``weight`` (broadcast to the target) scales each
    element.  Refused under CUDA autocast, as in PyTorch (use
    ``binary_cross_entropy_with_logits``).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.binary_cross_entropy(ampc.tensor([0.5, 1.0]), ampc.ones(2))
    tensor(0.3466)
    """
    fn = "binary_cross_entropy"
    _tensor(fn, "input", 1, input)
    _tensor(fn, "target", 2, target)
    _opt_tensor(fn, "weight", 3, weight)
    reduction = _reduction(fn, size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the "
            f"input size ({input.shape}) is deprecated. Please ensure they "
            "have the same size.")
    if weight is not None:
        if _needs_grad(weight):
            raise RuntimeError(
                "The function 'binary_cross_entropy' is not differentiable "
                "with respect to argument 'weight'. This input cannot have "
                "requires_grad True.")
        shape = _broadcast_shape(fn, target.shape, weight.shape)
        if tuple(shape) != tuple(target.shape):
            raise RuntimeError(
                f"{fn}(): weight of size {list(weight.shape)} cannot be "
                f"broadcast to the target's size {list(target.shape)}")
        weight = weight.expand(*shape)
    input, target, weight = _autocast(fn, input, target, weight)
    for name, t in (("target", target), ("weight", weight)):
        if t is not None and t.dtype != input.dtype:
            raise RuntimeError(
                f"{fn}(): Found dtype "
                f"{_TORCH_DTYPE_NAMES.get(t.dtype.name, t.dtype.name)} but "
                "expected "
                f"{_TORCH_DTYPE_NAMES.get(input.dtype.name, input.dtype.name)}"
                f" (the {name})")
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"{fn}(): expected a floating-point input, got {input.dtype}")
    _check_unit_interval(fn, "input", input)
    _check_unit_interval(fn, "target", target)
    if _needs_grad(input, target):
        return _BinaryCrossEntropy.apply(input, target, weight, reduction)
    return _reduce(_bce_elementwise(input, target, weight), reduction)


# ----------------------------------------------------------------------------
# kl_div


def _xlogy_self(t):
    """t log t, 0 where t == 0 (PyTorch's xlogy(t, t); NaN for t < 0)."""
    return _where(t == 0, 0.0, t * t.log())


def kl_div(input, target, size_average=None, reduce=None, reduction="mean",
           log_target=False):
    """PyTorch's Kullback-Leibler divergence of log-probabilities
    ``input`` from ``target`` (probabilities, or log-probabilities when
    ``log_target``): target (log target - input) element-wise (0 where
    target is 0).  ``reduction='batchmean'`` divides the sum by the batch
    size (the KL divergence); 'mean' (the default) divides by the number of
    elements, with PyTorch's warning.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.kl_div(ampc.tensor([[-1.0, -1.0]]), ampc.tensor([[0.0, 0.5]]),
    ...          reduction="batchmean")
    tensor(0.1534)
    """
    fn = "kl_div"
    _tensor(fn, "input", 1, input)
    _tensor(fn, "target", 2, target)
    if size_average is not None or reduce is not None:
        reduction = _reduction(fn, size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size "
            "and the support size.'batchmean' divides only by the batch "
            "size, and aligns with the KL div math definition.'mean' will "
            "be changed to behave the same as 'batchmean' in the next major "
            "release.", stacklevel=2)
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(
            f"{reduction} is not a valid value for reduction (expected "
            "'mean', 'batchmean', 'sum' or 'none' in kl_div())")
    if not isinstance(log_target, bool):
        raise TypeError(
            f"{fn}(): argument 'log_target' must be bool, not "
            f"{type(log_target).__name__}")
    if tuple(input.shape) != tuple(target.shape):
        _broadcast_shape(fn, input.shape, target.shape)     # (the error)
    input, target = _autocast(fn, input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = _xlogy_self(target) - target * input
    if reduction == "batchmean":
        loss = loss.sum()
        return loss / input.shape[0] if input.ndim != 0 else loss
    return _reduce(loss, reduction)
