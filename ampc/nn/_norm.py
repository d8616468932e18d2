"""``batch_norm`` and ``layer_norm`` (``ampc.nn.functional``), each one
autograd ``Function`` over one ``_C`` kernel forward and one backward, and
their differentiable backward formulas for ``create_graph=True``.

A float16/bfloat16 input may come with float32 parameters (weight, bias,
running statistics), as PyTorch allows: the output keeps the input's dtype
and the statistics are accumulated in float32 lanes folded in double.
Under autocast, ``layer_norm`` runs in float32 on CUDA and in the input's
dtype on the CPU; ``batch_norm`` in the input's dtype on both
(``csrc/autocast_ops.def``).

>>> import ampc
>>> import ampc.nn.functional as F
>>> x = ampc.tensor([[1.0, 3.0], [3.0, 5.0]])
>>> F.batch_norm(x, None, None, training=True)
tensor([[-1.0000, -1.0000],
        [ 1.0000,  1.0000]])
>>> F.layer_norm(x, (2,))
tensor([[-1.0000,  1.0000],
        [-1.0000,  1.0000]])
"""
from .. import _C
from ..autograd import Function, autocast_listed
from ._args import _needs_grad, _number, _opt_tensor, _tensor

__all__ = ["batch_norm", "layer_norm"]


def _shaped(g, t):
    """A parameter gradient in its parameter's shape (the kernels return
    batch norm's as (C,))."""
    if g is None or t is None or g.shape == t.shape:
        return g
    return g.view(t.shape)


# ----------------------------------------------------------------------------
# batch_norm


class _BatchNorm(Function):
    """Normalise each channel of x (N, C, *) by its batch statistics
    (training) or the running ones, then scale and shift; training also
    updates the running statistics in place.  Backward is one
    ``_C.batch_norm_backward`` call with the saved mean and 1/std."""

    node_name = "NativeBatchNormBackward0"

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, training,
                momentum, eps):
        y, mean, invstd = _C.batch_norm(x, weight, bias, running_mean,
                                        running_var, training, momentum, eps)
        ctx.training = training
        ctx.eps = eps
        ctx.bias = bias is not None
        ctx.bias_shape = None if bias is None else bias.shape
        ctx.save_for_backward(x, weight, mean, invstd)
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight, mean, invstd = ctx.saved_tensors
        needs = ctx.needs_input_grad
        gx, gw, gb = _C.batch_norm_backward(
            g, x, weight, mean, invstd, ctx.training,
            (needs[0], needs[1], needs[2] and ctx.bias))
        if gb is not None and gb.shape != ctx.bias_shape:
            gb = gb.view(ctx.bias_shape)
        return gx, _shaped(gw, weight), gb, None, None, None, None, None


def _verify_batch_size(shape):
    values = shape[0]
    for n in shape[2:]:
        values *= n
    if values == 1:
        raise ValueError(
            "Expected more than 1 value per channel when training, got "
            f"input size {shape}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None,
               training=False, momentum=0.1, eps=1e-5):
    """Batch normalisation of input (N, C, *) over N and the trailing
    dims, per channel: (x - mean) / sqrt(var + eps) * weight + bias.  In
    training the batch's mean and biased variance are used and the running
    statistics (when given) move towards the batch's mean and unbiased
    variance by ``momentum``; otherwise the running statistics are used.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> rm, rv = ampc.zeros(2), ampc.ones(2)
    >>> y = F.batch_norm(ampc.tensor([[0.0, 2.0], [2.0, 6.0]]), rm, rv,
    ...                  training=True)
    >>> rm
    tensor([0.1000, 0.4000])
    """
    _tensor("batch_norm", "input", 1, input)
    _opt_tensor("batch_norm", "running_mean", 2, running_mean)
    _opt_tensor("batch_norm", "running_var", 3, running_var)
    _opt_tensor("batch_norm", "weight", 4, weight)
    _opt_tensor("batch_norm", "bias", 5, bias)
    momentum = _number("batch_norm", "momentum", momentum)
    eps = _number("batch_norm", "eps", eps)
    training = bool(training)
    if training and input.ndim >= 2:
        _verify_batch_size(input.shape)
    if training and eps <= 0.0:
        raise ValueError(
            f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if _needs_grad(input, weight, bias):
        return _BatchNorm.apply(input, weight, bias, running_mean,
                                running_var, training, momentum, eps)
    return _C.batch_norm(input, weight, bias, running_mean, running_var,
                         training, momentum, eps)[0]


# ----------------------------------------------------------------------------
# layer_norm


class _LayerNorm(Function):
    """Normalise each row of the trailing ``normalized_shape`` dims of x
    by its mean and biased variance, then scale and shift per element.
    Backward is one ``_C.layer_norm_backward`` call with the saved mean
    and 1/std of each row."""

    node_name = "NativeLayerNormBackward0"
    autocast_op = "layer_norm"

    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        y, mean, rstd = _C.layer_norm(x, normalized_shape, weight, bias, eps)
        ctx.normalized_shape = normalized_shape
        ctx.eps = eps
        ctx.bias = bias is not None
        ctx.save_for_backward(x, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight, mean, rstd = ctx.saved_tensors
        needs = ctx.needs_input_grad
        gx, gw, gb = _C.layer_norm_backward(
            g, x, ctx.normalized_shape, weight, mean, rstd,
            (needs[0], needs[2], needs[3] and ctx.bias))
        return gx, None, gw, gb, None


def _normalized_shape(v):
    if not isinstance(v, (tuple, list)):
        raise TypeError(
            "layer_norm(): argument 'normalized_shape' (position 2) must be "
            f"tuple of ints, not {type(v).__name__}")
    return tuple(v)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the trailing dims ``normalized_shape`` of
    input: each row is normalised by its own mean and biased variance,
    (x - mean) / sqrt(var + eps) * weight + bias, with weight and bias of
    shape ``normalized_shape``.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.layer_norm(ampc.tensor([[0.0, 4.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    _tensor("layer_norm", "input", 1, input)
    normalized_shape = _normalized_shape(normalized_shape)
    _opt_tensor("layer_norm", "weight", 3, weight)
    _opt_tensor("layer_norm", "bias", 4, bias)
    eps = _number("layer_norm", "eps", eps)
    if _needs_grad(input, weight, bias) or autocast_listed(_LayerNorm):
        return _LayerNorm.apply(input, normalized_shape, weight, bias, eps)
    return _C.layer_norm(input, normalized_shape, weight, bias, eps)[0]


# ----------------------------------------------------------------------------
# differentiable backward formulas (autograd/higher_order.py), in float32:
# the statistics are recomputed from x with differentiable ops, so that the
# second derivative reaches x through them


def _normalised(x, dims, eps):
    """(x - mean) * rstd over dims, and rstd (keepdim), as graphs of x."""
    centred = x - x.mean(dims, keepdim=True)
    rstd = ((centred * centred).mean(dims, keepdim=True) + eps) ** -0.5
    return centred * rstd, rstd


def _input_grad(gxhat, xhat, rstd, dims):
    """d/dx of a normalisation with batch statistics, given the gradient
    gxhat of the normalised values."""
    return rstd * (gxhat - gxhat.mean(dims, keepdim=True)
                   - xhat * (gxhat * xhat).mean(dims, keepdim=True))


def batch_norm_graph_grads(node, g):
    """``_BatchNorm``'s input gradients as a graph (create_graph=True)."""
    x, weight, mean, invstd = node.saved_tensors
    needs = node.needs_input_grad
    xf, g = x.float(), g.float()
    dims = (0,) + tuple(range(2, x.ndim))
    bshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    w = None if weight is None else weight.float().reshape(bshape)
    if node.training:
        xhat, rstd = _normalised(xf, dims, node.eps)
    else:
        rstd = invstd.reshape(bshape)
        xhat = (xf - mean.reshape(bshape)) * rstd
    gx = gw = gb = None
    if needs[0]:
        gxhat = g if w is None else g * w
        gx = (_input_grad(gxhat, xhat, rstd, dims) if node.training
              else gxhat * rstd)
    if needs[1] and weight is not None:
        gw = (g * xhat).sum(dims).reshape(weight.shape)
    if needs[2] and node.bias:
        gb = g.sum(dims).reshape(node.bias_shape)
    return gx, gw, gb, None, None, None, None, None


def layer_norm_graph_grads(node, g):
    """``_LayerNorm``'s input gradients as a graph (create_graph=True)."""
    x, weight, _, _ = node.saved_tensors
    needs = node.needs_input_grad
    xf, g = x.float(), g.float()
    nd = len(node.normalized_shape)
    dims = tuple(range(x.ndim - nd, x.ndim))
    lead = tuple(range(x.ndim - nd))
    xhat, rstd = _normalised(xf, dims, node.eps)
    gx = gw = gb = None
    if needs[0]:
        gxhat = g if weight is None else g * weight.float()
        gx = _input_grad(gxhat, xhat, rstd, dims)
    if needs[2] and weight is not None:
        gw = (g * xhat).sum(lead) if lead else g * xhat
    if needs[3] and node.bias:
        gb = g.sum(lead) if lead else g
    return gx, None, gw, gb, None
