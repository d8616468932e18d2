"""``ampc.nn.functional``: the layers as functions, with autograd.

Each op is one autograd ``Function`` whose forward is one ``_C`` call and
whose backward is one or two (``_C.linear_backward``, ``_C.relu_backward``,
...).  The functions here check the Python-level arguments (types, the
``reduction`` name, pairs of ints) and turn PyTorch's conveniences
(unbatched images, N-d losses, the deprecated ``size_average``/``reduce``)
into the shapes the ``_C`` ops take; ``_C`` checks shapes, dtypes and
values and names the op in its errors.

>>> import ampc
>>> import ampc.nn.functional as F
>>> x = ampc.randn(4, 10, requires_grad=True)
>>> loss = F.cross_entropy(x, ampc.tensor([1, 0, 9, 3]))
>>> loss.backward()
>>> x.grad.shape
ampc.Size([4, 10])
"""
import warnings

from .. import _C
from ..autograd import Function, _mode, autocast_listed
from ..autograd import inplace as _inplace
from .._dtype_device import _check_dtype, _wrap_dim
from ._args import (_groups, _needs_grad, _number, _opt_tensor, _pair,
                    _reduction, _tensor)  # noqa: F401 (_reduction: modules)
from ._activations import gelu, leaky_relu, silu
from ._activations_more import (celu, celu_, elu, elu_, hardsigmoid,
                                hardswish, hardtanh, hardtanh_, logsigmoid,
                                mish, relu6, selu, selu_, softplus,
                                softsign)
from ._avg_pool import adaptive_avg_pool2d, avg_pool2d
from ._bce import binary_cross_entropy_with_logits
from ._conv1d import conv1d, pre_pad, string_sides
from ._embedding import embedding
from ._encoding import one_hot
from ._group_norm import group_norm
from ._interpolate import interpolate
from ._losses import cross_entropy, mse_loss, nll_loss
from ._losses_more import (binary_cross_entropy, huber_loss, kl_div,
                           l1_loss, smooth_l1_loss)
from ._conv_transpose import conv_transpose1d, conv_transpose2d
from ._feature_dropout import dropout1d, dropout2d, dropout3d
from ._norm import batch_norm, layer_norm
from ._pad import pad
from ._pool_more import (adaptive_avg_pool1d, adaptive_max_pool1d,
                         adaptive_max_pool2d, max_pool1d)
from ._embedding_bag import embedding_bag
from ._prelu import prelu
from ._attention import scaled_dot_product_attention
from ._mha import multi_head_attention_forward
from ._similarity import cosine_similarity, normalize, pairwise_distance

__all__ = [
    "linear", "conv2d", "relu", "relu_", "max_pool2d", "dropout",
    "softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss",
    "flatten", "one_hot", "sigmoid", "tanh",
    "binary_cross_entropy_with_logits", "batch_norm", "layer_norm",
    "relu6", "hardtanh", "hardtanh_", "elu", "elu_", "selu", "selu_",
    "celu", "celu_", "softplus", "hardsigmoid", "hardswish", "softsign",
    "mish", "logsigmoid",
    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "kl_div", "dropout1d", "dropout2d", "dropout3d", "prelu",
    "conv_transpose2d", "conv_transpose1d", "conv1d", "group_norm", "pad",
    "interpolate", "normalize", "cosine_similarity", "pairwise_distance",
    "scaled_dot_product_attention", "multi_head_attention_forward",
    "max_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_avg_pool1d", "embedding_bag",
]


# ----------------------------------------------------------------------------
# linear


class _Linear(Function):
    """y = x @ W^T + b (+ ReLU when fused): one GEMM forward, two GEMMs and
    a column sum backward in ``_C.linear_backward``."""

    node_name = "LinearBackward0"
    autocast_op = "linear"

    @staticmethod
    def forward(ctx, x, weight, bias, relu):
        out = _C.linear(x, weight, bias, relu)
        ctx.relu = relu
        ctx.save_for_backward(x, weight, out if relu else None)
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight, out = ctx.saved_tensors
        if ctx.relu:
            g = _C.relu_backward(g, out)
        needs = tuple(ctx.needs_input_grad[:3])
        gx, gw, gb = _C.linear_backward(g, x, weight, needs)
        return gx, gw, gb, None


def _linear(input, weight, bias, relu):
    if _needs_grad(input, weight, bias) or autocast_listed(_Linear):
        return _Linear.apply(input, weight, bias, relu)
    return _C.linear(input, weight, bias, relu)


def linear(input, weight, bias=None):
    """y = input @ weight^T + bias, for input (*, in_features), weight
    (out_features, in_features) and bias (out_features,).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.linear(ampc.ones(2, 3), ampc.ones(4, 3), ampc.zeros(4))
    tensor([[3., 3., 3., 3.],
            [3., 3., 3., 3.]])
    """
    _tensor("linear", "input", 1, input)
    _tensor("linear", "weight", 2, weight)
    _opt_tensor("linear", "bias", 3, bias)
    return _linear(input, weight, bias, False)


# ----------------------------------------------------------------------------
# conv2d


class _Conv2d(Function):
    """2-D cross-correlation (+ ReLU when fused); backward is one
    ``_C.conv2d_backward`` call for input, weight and bias gradients."""

    node_name = "ConvolutionBackward0"
    autocast_op = "conv2d"

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, relu,
                groups):
        out = _C.conv2d(x, weight, bias, stride, padding, dilation, relu,
                        groups)
        ctx.geometry = (stride, padding, dilation)
        ctx.relu = relu
        ctx.groups = groups
        ctx.save_for_backward(x, weight, out if relu else None)
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight, out = ctx.saved_tensors
        if ctx.relu:
            g = _C.relu_backward(g, out)
        stride, padding, dilation = ctx.geometry
        gx, gw, gb = _C.conv2d_backward(g, x, weight, stride, padding,
                                        dilation,
                                        tuple(ctx.needs_input_grad[:3]),
                                        ctx.groups)
        return gx, gw, gb, None, None, None, None, None


def _conv_batch(input):
    """(input as (N, C, H, W), whether it came unbatched as (C, H, W))."""
    if input.ndim == 3:
        return input.unsqueeze(0), True
    if input.ndim != 4:
        raise RuntimeError(
            "Expected 3D (unbatched) or 4D (batched) input to conv2d, but "
            f"got input of size: {list(input.shape)}")
    return input, False


def _conv2d(input, weight, bias, stride, padding, dilation, relu,
            groups=1):
    """conv2d on an (N, C, H, W) or unbatched (C, H, W) input, with the
    geometry already checked to be pairs of ints and groups a positive
    int."""
    input, unbatched = _conv_batch(input)
    if _needs_grad(input, weight, bias) or autocast_listed(_Conv2d):
        out = _Conv2d.apply(input, weight, bias, stride, padding, dilation,
                            relu, groups)
    else:
        out = _C.conv2d(input, weight, bias, stride, padding, dilation,
                        relu, groups)
    return out.squeeze(0) if unbatched else out


class _Conv2dReluMaxPool(Function):
    """conv2d + ReLU + max_pool2d as one node (``Sequential`` fuses the
    three): the ReLU runs in the convolution's epilogue and its backward is
    folded into the pooling's indices (``relu_masked``), so the
    convolution's output is freed after the pooling instead of being kept
    for backward.  The result and its gradients are the same bits as the
    three ops one after the other."""

    node_name = "MaxPool2DWithIndicesBackward0"
    autocast_op = "conv2d"

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, pool,
                groups):
        out = _C.conv2d(x, weight, bias, stride, padding, dilation, True,
                        groups)
        y, indices = _C.max_pool2d(out, *pool, relu_masked=True)
        ctx.conv = (stride, padding, dilation)
        ctx.groups = groups
        ctx.pool = pool
        ctx.out_shape = tuple(out.shape)
        ctx.save_for_backward(x, weight, indices)
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight, indices = ctx.saved_tensors
        g = _C.max_pool2d_backward(g, indices, ctx.out_shape, *ctx.pool,
                                   relu_masked=True)
        gx, gw, gb = _C.conv2d_backward(g, x, weight, *ctx.conv,
                                        tuple(ctx.needs_input_grad[:3]),
                                        ctx.groups)
        return gx, gw, gb, None, None, None, None, None


def _conv2d_relu_max_pool(input, weight, bias, stride, padding, dilation,
                          pool, groups=1):
    """max_pool2d(relu(conv2d(input))) for Sequential; pool is the
    pooling's (kernel_size, stride, padding, dilation, ceil_mode), checked
    pairs, with no window that can be empty (dilation 1, no ceil_mode)."""
    input, unbatched = _conv_batch(input)
    if _needs_grad(input, weight, bias) or \
            autocast_listed(_Conv2dReluMaxPool):
        out = _Conv2dReluMaxPool.apply(input, weight, bias, stride, padding,
                                       dilation, pool, groups)
    else:
        out = _C.max_pool2d(_C.conv2d(input, weight, bias, stride, padding,
                                      dilation, True, groups), *pool)[0]
    return out.squeeze(0) if unbatched else out


def _conv_sides(fn, padding, weight, stride, dilation, error=RuntimeError):
    """((top, bottom), (left, right)): padding as pairs of ints, 'valid'
    or 'same' (PyTorch's split: the odd element of an uneven total at the
    bottom or right)."""
    if isinstance(padding, str):
        return string_sides(fn, padding, tuple(weight.shape[2:4]), stride,
                            dilation, error)
    return tuple((p, p) for p in _pair(fn, "padding", padding))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1,
           groups=1):
    """2-D convolution (cross-correlation) of input (N, C, H, W) or
    (C, H, W) with weight (OC, C/groups, KH, KW); stride, padding and
    dilation are ints or pairs, padding may also be 'valid' or 'same'.
    With groups G (dividing C and OC), output channels [g*OC/G,
    (g+1)*OC/G) see only input channels [g*C/G, (g+1)*C/G); G = C is a
    depthwise convolution.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.conv2d(ampc.ones(1, 1, 3, 3), ampc.ones(1, 1, 2, 2)).shape
    ampc.Size([1, 1, 2, 2])
    >>> F.conv2d(ampc.ones(1, 4, 3, 3), ampc.ones(8, 1, 3, 3),
    ...          groups=4).shape
    ampc.Size([1, 8, 1, 1])
    """
    _tensor("conv2d", "input", 1, input)
    _tensor("conv2d", "weight", 2, weight)
    _opt_tensor("conv2d", "bias", 3, bias)
    groups = _groups("conv2d", groups)
    stride = _pair("conv2d", "stride", stride)
    dilation = _pair("conv2d", "dilation", dilation)
    if weight.ndim != 4:
        raise RuntimeError(
            "conv2d(): expected weight to be 4-D (out_channels, "
            "in_channels, kernel_height, kernel_width), got shape "
            f"{list(weight.shape)}")
    sides = _conv_sides("conv2d", padding, weight, stride, dilation)
    _conv_batch(input)      # the rank check, before any padding
    input, padding = pre_pad(input, sides)
    return _conv2d(input, weight, bias, stride, padding, dilation, False,
                   groups)


# ----------------------------------------------------------------------------
# activations


class _Relu(Function):
    node_name = "ReluBackward0"
    _saves_self = False     # saves its output, not its input

    @staticmethod
    def forward(ctx, x):
        out = _C.unary("relu", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _C.relu_backward(g, out)


def relu(input, inplace=False):
    """max(input, 0), element-wise (in place with ``inplace=True``).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.relu(ampc.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    _tensor("relu", "input", 1, input)
    if inplace:
        return relu_(input)
    if _mode.enabled and input.requires_grad:
        return _Relu.apply(input)
    return _C.unary("relu", input)


def relu_(input):
    """In-place ``relu``; returns ``input``."""
    _tensor("relu_", "input", 1, input)
    if _mode.enabled and input.requires_grad:
        return _inplace(input, _Relu)
    _C.unary("relu", input, input)
    return input


def _softmax_dim(name, ndim, stacklevel):
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change "
        "the call to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


class _Softmax(Function):
    node_name = "SoftmaxBackward0"
    autocast_op = "softmax"

    @staticmethod
    def forward(ctx, x, dim, dtype):
        y = _C.softmax(x, dim, dtype)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return _C.softmax_backward(g, y, ctx.dim), None, None


class _LogSoftmax(Function):
    node_name = "LogSoftmaxBackward0"
    autocast_op = "log_softmax"

    @staticmethod
    def forward(ctx, x, dim, dtype):
        y = _C.log_softmax(x, dim, dtype)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return _C.log_softmax_backward(g, y, ctx.dim), None, None


def _softmax_common(name, fn, raw, input, dim, dtype, stacklevel):
    _tensor(name, "input", 1, input)
    dtype = _check_dtype(name, "dtype", dtype)
    if dim is None:
        dim = _softmax_dim(name, input.ndim, stacklevel + 1)
    dim = _wrap_dim(name, dim, max(input.ndim, 1))
    if (_mode.enabled and input.requires_grad) or autocast_listed(fn):
        return fn.apply(input, dim, dtype)
    return raw(input, dim, dtype)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim``, computed stably (max
    subtracted); ``dtype`` computes and returns in that dtype.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.softmax(ampc.tensor([0.0, 0.0]), dim=0)
    tensor([0.5000, 0.5000])
    """
    return _softmax_common("softmax", _Softmax, _C.softmax, input, dim,
                           dtype, _stacklevel)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) along ``dim``, computed as x - logsumexp(x).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.log_softmax(ampc.tensor([0.0, 0.0]), dim=0)
    tensor([-0.6931, -0.6931])
    """
    return _softmax_common("log_softmax", _LogSoftmax, _C.log_softmax,
                           input, dim, dtype, _stacklevel)


# ----------------------------------------------------------------------------
# pooling and dropout


class _MaxPool2d(Function):
    node_name = "MaxPool2DWithIndicesBackward0"

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation, ceil_mode):
        y, indices = _C.max_pool2d(x, kernel_size, stride, padding,
                                   dilation, ceil_mode)
        ctx.in_shape = tuple(x.shape)
        # the geometry lets the CUDA backward gather without atomics
        ctx.geometry = (kernel_size, stride, padding, dilation)
        ctx.save_for_backward(indices)
        return y, indices

    @staticmethod
    def backward(ctx, g):
        indices, = ctx.saved_tensors
        return _C.max_pool2d_backward(g, indices, ctx.in_shape,
                                      *ctx.geometry)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode=False, return_indices=False):
    """The maximum of each kernel_size window of input (N, C, H, W) or
    (C, H, W); stride defaults to kernel_size.  ``return_indices=True``
    also returns the flat index of each maximum in its H*W plane.

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.max_pool2d(ampc.arange(16.0).view(1, 1, 4, 4), 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    _tensor("max_pool2d", "input", 1, input)
    kernel_size = _pair("max_pool2d", "kernel_size", kernel_size)
    if stride is None or (isinstance(stride, (tuple, list))
                          and len(stride) == 0):
        stride = kernel_size
    else:
        stride = _pair("max_pool2d", "stride", stride)
    padding = _pair("max_pool2d", "padding", padding)
    dilation = _pair("max_pool2d", "dilation", dilation)
    ceil_mode = bool(ceil_mode)
    unbatched = input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    elif input.ndim != 4:
        raise RuntimeError(
            "max_pool2d(): Expected 3D or 4D (batch mode) tensor for input "
            f"with optional 0 dim batch size, but got input of size: "
            f"{list(input.shape)}")
    if _mode.enabled and input.requires_grad:
        y, indices = _MaxPool2d.apply(input, kernel_size, stride, padding,
                                      dilation, ceil_mode)
    else:
        y, indices = _C.max_pool2d(input, kernel_size, stride, padding,
                                   dilation, ceil_mode)
    if unbatched:
        y, indices = y.squeeze(0), indices.squeeze(0)
    return (y, indices) if return_indices else y


class _Dropout(Function):
    node_name = "NativeDropoutBackward0"
    _saves_self = False     # saves only the mask

    @staticmethod
    def forward(ctx, x, p):
        y, mask = _C.dropout(x, p, True)
        ctx.p = p
        ctx.save_for_backward(mask)
        return y

    @staticmethod
    def backward(ctx, g):
        mask, = ctx.saved_tensors
        return _C.dropout_backward(g, mask, ctx.p), None


def sigmoid(input):
    """1 / (1 + exp(-input)), element-wise (``input.sigmoid()``)."""
    _tensor("sigmoid", "input", 1, input)
    return input.sigmoid()


def tanh(input):
    """tanh(input), element-wise (``input.tanh()``)."""
    _tensor("tanh", "input", 1, input)
    return input.tanh()


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by
    1/(1-p), in training mode; the identity otherwise.  Draws from ampc's
    generator (``ampc.manual_seed`` makes it repeatable).

    >>> import ampc
    >>> import ampc.nn.functional as F
    >>> F.dropout(ampc.ones(4), p=0.5, training=False)
    tensor([1., 1., 1., 1.])
    """
    _tensor("dropout", "input", 1, input)
    p = _number("dropout", "p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(
            f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    grad = _mode.enabled and input.requires_grad
    if inplace:
        if grad:
            return _inplace(input, _Dropout, p)
        y, _ = _C.dropout(input, p, True)
        _C.copy_(input, y)
        return input
    if grad:
        return _Dropout.apply(input, p)
    return _C.dropout(input, p, True)[0]


def flatten(input, start_dim=0, end_dim=-1):
    """``input.flatten(start_dim, end_dim)`` (as ``ampc.flatten``)."""
    return _tensor("flatten", "input", 1, input).flatten(start_dim, end_dim)
