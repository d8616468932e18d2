"""``Tensor.prod``, ``logsumexp``, ``count_nonzero`` and the element-wise
``lerp``, ``addcmul``, ``addcdiv`` and ``nan_to_num`` (with their in-place
forms): PyTorch's signatures, dtypes and errors.  All but ``prod`` and
``lerp`` are composed from ampc's differentiable ops, so their gradients
(and second derivatives) come from the ops they are made of; 16-bit inputs
are computed in float32 and rounded once, as PyTorch's CPU does.  A mixin
of ``Tensor``.

``lerp`` is one fused pass (``_C.lerp``: torch's two-sided rule in float32,
on every CPU level and on CUDA); its gradients are torch's (LerpBackward0
for a number weight, LerpBackward1 for a tensor), with second derivatives.

``prod`` is one pass of the C reductions (``_C.reduce("prod")``: the
float dtypes multiplied in double and rounded once, ints in wrapping
int64, on every CPU level and on CUDA); its gradient is PyTorch's,
correct with zeros in the input (``prod_grad``).

>>> import ampc
>>> ampc.tensor([[1.0, 2.0], [3.0, 4.0]]).prod(1)
tensor([ 2., 12.])
"""
import math

from . import _C
from ._dtype_device import _wrap_dim, float32, int64
from ._tensor_args import _TB, _check_number, _check_tensor
from ._tensor_stats import _dims, _extreme
from .autograd.function import Function
from .autograd.inplace import inplace as _inplace
from .autograd.grad_mode import _mode


def _autocast(op, *tensors):
    """The arguments cast by autocast's policy for ``op``
    (csrc/autocast_ops.def); unchanged when autocast is off."""
    if not _C.autocast_active():
        return tensors
    return _C.autocast_cast_args(op, tensors, _mode.enabled)


def _wide16(t):
    return t.to(float32) if t.dtype.is_floating_point and \
        t.dtype.itemsize == 2 else t


class Prod(Function):
    """The product over all elements or one dim: one ``_C.reduce("prod")``
    pass (float dtypes multiplied in double and rounded once, ints
    wrapping int64); its gradient by ``prod_grad``."""

    node_name = "ProdBackward0"

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        ctx.dim, ctx.keepdim = dim, keepdim
        ctx.save_for_backward(x)
        return _C.reduce("prod", x, dim, keepdim)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return prod_grad(x, g, ctx.dim, ctx.keepdim), None, None


def prod_grad(x, g, dim, keepdim):
    """g times the product of the other elements, as PyTorch: prod / x
    where the slice has no zero; where it has one, the product of the
    non-zeros at the zero and 0 elsewhere; 0 for two zeros or more.
    Written with differentiable ops (no 0 / 0 even in an unselected
    branch), so it is also the create_graph formula."""
    from ._tensor_where import where
    w, g = _wide16(x), _wide16(g)
    dims = tuple(range(x.ndim)) if dim is None else (dim,) if x.ndim else ()
    if not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    zero = _C.compare("eq", w.detach(), 0)
    nz = zero.sum(dims, keepdim=True) if dims else zero.to(int64)
    safe = w.masked_fill(zero, 1.0)
    p = Prod.apply(safe, dim, True)
    one = _C.compare("eq", nz, 1) & zero
    out = where(_C.compare("eq", nz, 0), g * p / safe,
                where(one, g * p, 0.0))
    return out.to(x.dtype)


class LerpScalar(Function):
    """lerp with a number weight w: one ``_C.lerp`` pass; the gradients
    are g * (1 - w) and g * w (PyTorch's LerpBackward0)."""

    node_name = "LerpBackward0"
    _saves_self = False

    @staticmethod
    def forward(ctx, start, end, weight):
        ctx.weight = weight
        return _C.lerp(start, end, weight)

    @staticmethod
    def backward(ctx, g):
        w = ctx.weight
        need_s, need_e, _ = ctx.needs_input_grad
        return (_C.binary("mul", g, 1.0 - w) if need_s else None,
                _C.binary("mul", g, w) if need_e else None, None)


class LerpTensor(Function):
    """lerp with a tensor weight: one ``_C.lerp`` pass; the gradients are
    g * (1 - weight), g * weight and g * (end - start) (PyTorch's
    LerpBackward1), summed back over broadcast dims by the engine."""

    node_name = "LerpBackward1"

    @staticmethod
    def forward(ctx, start, end, weight):
        need_s, need_e, need_w = ctx.needs_input_grad
        ctx.save_for_backward(start if need_w else None,
                              end if need_w else None,
                              weight if need_s or need_e else None)
        return _C.lerp(start, end, weight)

    @staticmethod
    def backward(ctx, g):
        s, e, w = ctx.saved_tensors
        need_s, need_e, need_w = ctx.needs_input_grad
        return (_C.binary("mul", g, _C.binary("sub", 1.0, w))
                if need_s else None,
                _C.binary("mul", g, w) if need_e else None,
                _C.binary("mul", g, _C.binary("sub", e, s))
                if need_w else None)


def _lerp_tensor_graph(node, g):
    s, e, w = node.saved_tensors
    need_s, need_e, need_w = node.needs_input_grad
    return (g * (1.0 - w) if need_s else None, g * w if need_e else None,
            g * (e - s) if need_w else None)


def formulas():
    """The create_graph formulas of Prod (prod_grad is differentiable) and
    lerp."""
    return {Prod: lambda node, g: (prod_grad(node.saved_tensors[0], g,
                                             node.dim, node.keepdim),
                                   None, None),
            LerpScalar: lambda node, g: (g * (1.0 - node.weight),
                                         g * node.weight, None),
            LerpTensor: _lerp_tensor_graph}


def _dev(t):
    return "cpu" if t.device_type == "cpu" else f"cuda:{t.device_index}"


def _broadcast_to_self(fn, self, shape):
    if tuple(shape) != tuple(self.shape):
        raise RuntimeError(
            f"{fn}(): output with shape {list(self.shape)} doesn't match the "
            f"broadcast shape {list(shape)}")


class _TensorMore:

    # -- reductions ----------------------------------------------------------

    def prod(self, dim=None, keepdim=False, *, dtype=None):
        """The product of all elements, or along ``dim`` (one int); bool
        and int64 multiply in int64 (wrapping on overflow, as torch),
        float dtypes in double, rounded once to the dtype."""
        if dim is not None:
            if isinstance(dim, (tuple, list)):
                raise TypeError("prod(): argument 'dim' must be an int, "
                                f"not {type(dim).__name__}")
            dim = _wrap_dim("prod", dim, self.ndim)
        x = self if dtype is None else self.to(dtype)
        if dtype is None:
            x, = _autocast("prod", x)
        if _mode.enabled and x.requires_grad:
            return Prod.apply(x, dim, keepdim)
        return _C.reduce("prod", x, dim, keepdim)

    def logsumexp(self, dim, keepdim=False):
        """log(sum(exp(x))) over ``dim`` (an int or a tuple), shifted by
        the max so it cannot overflow; an infinite max shifts by 0 (all
        -inf gives -inf, a +inf gives inf), an empty dim gives -inf."""
        x, = _autocast("logsumexp", self)
        if not x.dtype.is_floating_point:
            x = x.to(float32)
        dims = _dims("logsumexp", x, dim)
        w = _wide16(x)
        if x.ndim == 0:
            return x.clone()
        if any(x.shape[d] == 0 for d in dims):
            shape = [1 if d in dims else n for d, n in enumerate(x.shape)]
            if not keepdim:
                shape = [n for d, n in enumerate(x.shape) if d not in dims]
            return _C.full(tuple(shape), -math.inf, x.dtype, _dev(x))
        m = _extreme(w.detach(), dims, True, True)
        m = m.masked_fill(m.isinf(), 0.0)
        out = (w - m).exp().sum(dims, keepdim=True).log() + m
        if not keepdim:
            for d in reversed(dims):
                out = out.squeeze(d)
        return out.to(x.dtype)

    def count_nonzero(self, dim=None):
        """The number of non-zero elements (int64), over all or ``dim``
        (an int or a tuple)."""
        nz = _C.compare("ne", self.detach(), 0)
        if dim is None:
            return nz.sum(dtype=int64)
        dims = _dims("count_nonzero", self, dim)
        return nz.sum(dims) if dims else nz.to(int64)

    # -- element-wise --------------------------------------------------------

    def lerp(self, end, weight):
        """self + weight * (end - self), with PyTorch's formula (from the
        end for |weight| >= 0.5, so weight 1 gives end exactly), in one
        pass; end (and a tensor weight) must have self's dtype and device.
        """
        fn, weight = _lerp_args(self, end, weight)
        if fn is None:
            return _C.lerp(self, end, weight)
        return fn.apply(self, end, weight)

    def lerp_(self, end, weight):
        fn, weight = _lerp_args(self, end, weight)
        if fn is None:
            return _C.lerp(self, end, weight, self)
        return _inplace(self, fn, end, weight)

    def addcmul(self, tensor1, tensor2, *, value=1):
        """self + value * tensor1 * tensor2 (broadcast, promoted)."""
        return _addc("addcmul", self, tensor1, tensor2, value)

    def addcmul_(self, tensor1, tensor2, *, value=1):
        return _addc_("addcmul_", self, tensor1, tensor2, value)

    def addcdiv(self, tensor1, tensor2, *, value=1):
        """self + value * tensor1 / tensor2 (true division; integer
        tensor1 and tensor2 are refused, as in PyTorch)."""
        return _addc("addcdiv", self, tensor1, tensor2, value)

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return _addc_("addcdiv_", self, tensor1, tensor2, value)

    def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
        """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and
        ``neginf`` (by default 0 and the dtype's largest and lowest finite
        values); an integer tensor comes back as a copy."""
        if not self.dtype.is_floating_point:
            return self.clone()
        return _nan_to_num(self, nan, posinf, neginf)

    def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
        if not self.dtype.is_floating_point:
            return self
        return self.copy_(_nan_to_num(self, nan, posinf, neginf))


def _lerp_args(self, end, weight):
    """The Function that records lerp (None when autograd has nothing to
    record) and the weight, a number coerced to a float."""
    tensor_w = isinstance(weight, _TB)
    if not tensor_w:
        weight = _check_number("lerp", "weight", weight, False)
    if not (_mode.enabled and (
            self.requires_grad or getattr(end, "requires_grad", False) or
            (tensor_w and weight.requires_grad))):
        return None, weight
    return (LerpTensor if tensor_w else LerpScalar), weight


def _addc_args(fn, self, t1, t2, value):
    _check_tensor(fn, "tensor1", t1)
    _check_tensor(fn, "tensor2", t2)
    value = _check_number(fn, "value", value, False)
    if fn.startswith("addcdiv") and not t1.dtype.is_floating_point and \
            not t2.dtype.is_floating_point:
        raise RuntimeError(
            f"{fn}(): Integer division with addcdiv is no longer supported; "
            "use (input + value * torch.trunc(tensor1 / tensor2)) for "
            "integer division or (input + value * tensor1 / tensor2) for "
            "true division")
    return value


def _addc(fn, self, t1, t2, value):
    value = _addc_args(fn, self, t1, t2, value)
    # the three tensors' result dtype: t1 and t2's, standing for both as
    # an empty tensor of their dimension category (0-d or not)
    probe = _C.empty((0,) if t1.ndim or t2.ndim else (),
                     _C.result_type(t1, t2), "cpu")
    dt = _C.result_type(self, probe)
    a, b, c = _wide16(self), _wide16(t1), _wide16(t2)
    term = b * c if fn.startswith("addcmul") else b / c
    if value != 1:
        term = term * value
    return (a + term).to(dt)


def _addc_(fn, self, t1, t2, value):
    out = _addc(fn, self, t1, t2, value)
    _broadcast_to_self(fn, self, out.shape)
    return self.copy_(out)


def _nan_to_num(self, nan, posinf, neginf):
    from ._finfo import finfo
    fi = finfo(self.dtype)
    nan = _check_number("nan_to_num", "nan", nan)
    posinf = fi.max if posinf is None else _check_number(
        "nan_to_num", "posinf", posinf)
    neginf = fi.min if neginf is None else _check_number(
        "nan_to_num", "neginf", neginf)
    x = self.detach()
    out = self.masked_fill(_C.compare("ne", x, x), 0.0 if nan is None
                           else nan)
    out = out.masked_fill(_C.compare("eq", x, math.inf), posinf)
    return out.masked_fill(_C.compare("eq", x, -math.inf), neginf)

