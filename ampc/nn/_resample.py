"""interpolate's separable modes on ampc's kernels (csrc/nn_interp.c,
cpu/interp_loops.h, cuda/interp.cu): 'linear' (3-D), 'bilinear' (4-D),
'trilinear' (5-D) and 'bicubic' (4-D), and bilinear/bicubic with
``antialias=True``.  One autograd node per mode, named as PyTorch's; the
gradient is the adjoint kernel (``_C.interpolate_backward``, a gather on
the GPU: deterministic), and that pass's own gradient is the resampling
again, so create_graph goes through both.  Under CUDA autocast they run in
float32 (PyTorch's fp32 list: upsample for linear/bilinear,
upsample_trilinear, upsample_bicubic); the CPU keeps the input's dtype.
"""
from .. import _C
from ..autograd import Function, autocast_listed
from ._args import _needs_grad

__all__ = ["resample"]


def _kernel(x, size, geom):
    mode, align_corners, scales, antialias = geom
    return _C.interpolate(x, size, mode, align_corners, scales, antialias)


def _kernel_grad(g, in_shape, geom):
    mode, align_corners, scales, antialias = geom
    return _C.interpolate_backward(g, in_shape, mode, align_corners, scales,
                                   antialias)


class _Resample(Function):
    """The resampling; geom is (mode 'linear' or 'cubic', align_corners,
    scales, antialias), _C.interpolate's arguments after the size."""

    @staticmethod
    def forward(ctx, x, size, geom):
        ctx.in_shape = tuple(x.shape)
        ctx.geom = geom
        return _kernel(x, size, geom)

    @staticmethod
    def backward(ctx, g):
        return _kernel_grad(g, ctx.in_shape, ctx.geom), None, None


def _node(name, autocast_op):
    return type(name, (_Resample,), {
        "node_name": name + "Backward0", "autocast_op": autocast_op,
        "__module__": __name__})


# (kernel mode, spatial dims, antialias) -> the node
_NODES = {
    ("linear", 1, False): _node("UpsampleLinear1D", "upsample"),
    ("linear", 2, False): _node("UpsampleBilinear2D", "upsample"),
    ("linear", 3, False): _node("UpsampleTrilinear3D", "upsample_trilinear"),
    ("cubic", 2, False): _node("UpsampleBicubic2D", "upsample_bicubic"),
    ("linear", 2, True): _node("UpsampleBilinear2DAa", "upsample"),
    ("cubic", 2, True): _node("UpsampleBicubic2DAa", "upsample_bicubic"),
}


class _ResampleGrad(Function):
    """The resampling's input gradient as a differentiable op (its
    gradient is the resampling of the incoming gradient)."""

    node_name = "UpsampleBackwardBackward0"

    @staticmethod
    def forward(ctx, g, in_shape, geom, node):
        ctx.size = tuple(g.shape[2:])
        ctx.geom, ctx.node = geom, node
        return _kernel_grad(g, in_shape, geom)

    @staticmethod
    def backward(ctx, gg):
        return ctx.node.apply(gg, ctx.size, ctx.geom), None, None, None


def formulas():
    """The differentiable backward of each node here, for
    ``backward(create_graph=True)`` (autograd/higher_order.py)."""
    def grad(node, g):
        return (_ResampleGrad.apply(g, node.in_shape, node.geom,
                                    node._function), None, None)
    out = {cls: grad for cls in (_Resample, *_NODES.values())}
    out[_ResampleGrad] = _ResampleGrad.backward
    return out


def resample(x, sizes, mode, align_corners, scales, antialias=False):
    """x (N, C, *spatial) resampled to ``sizes`` by the kernel mode
    'linear' or 'cubic'; scales: the scale_factor per dim the sampling
    uses (None: in / out)."""
    geom = (mode, bool(align_corners), tuple(scales), bool(antialias))
    cls = _NODES[mode, len(sizes), bool(antialias)]
    if _needs_grad(x) or autocast_listed(cls):
        return cls.apply(x, tuple(sizes), geom)
    return _kernel(x, tuple(sizes), geom)
