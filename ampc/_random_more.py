"""``randperm``, ``bernoulli``, ``normal`` (PyTorch's four overloads) and
``multinomial``; ``Tensor.bernoulli_`` with a tensor of probabilities and
``Tensor.exponential_``.

Uniform and normal draws come from ampc's global Philox stream (the one
``ampc.manual_seed`` seeds, ``csrc/ops_random.c``), or, with
``generator=``, from that ``ampc.Generator``.  Permutations and
multinomial draws run on the host through ``utils.data``'s
``numpy_rng(generator)``, whose seed is itself drawn from the global
stream: every result is repeatable under ``ampc.manual_seed``, though not
equal to torch's streams.

>>> import ampc
>>> _ = ampc.manual_seed(0); a = ampc.randperm(5)
>>> _ = ampc.manual_seed(0); bool((a == ampc.randperm(5)).all())
True
"""
import operator

import numpy as np

from . import _C
from ._dtype_device import (_check_dtype, _device_str, _pybool, float32,
                            int64)
from ._tensor_args import _TB, _check_number, _check_tensor
from ._tensor_more import _dev

__all__ = ["randperm", "bernoulli", "normal", "multinomial"]


def _rng(generator):
    from .utils.data._random import numpy_rng
    return numpy_rng(generator)


def _draw(kind, shape, generator, dev):
    """float32 draws of ``shape``: uniform in [0, 1) or standard normal."""
    if generator is None:
        t = _C.empty(tuple(shape), float32, dev)
        _C.random_(t, kind, 0.0, 1.0)
        return t
    rng = _rng(generator)
    a = (rng.random(shape, dtype=np.float32) if kind == "uniform"
         else rng.standard_normal(shape, dtype=np.float32))
    t = _C.tensor_from_array(np.ascontiguousarray(a), float32, "cpu")
    if dev != "cpu":
        out = _C.empty(tuple(shape), float32, dev)
        return _C.copy_(out, t)
    return t


def _host(t):
    return np.asarray(t.detach().float().cpu().tolist(), dtype=np.float64)


def randperm(n, *, generator=None, dtype=int64, device=None,
             requires_grad=False):
    """A random permutation of 0 .. n-1 (int64 by default)."""
    if n.__class__ is _pybool or not hasattr(n, "__index__"):
        raise TypeError("randperm(): argument 'n' must be int, not "
                        f"{type(n).__name__}")
    n = operator.index(n)
    if n < 0:
        raise RuntimeError("randperm(): Trying to create tensor with "
                           f"negative dimension {n}: [{n}]")
    dtype = _check_dtype("randperm", "dtype", dtype) or int64
    perm = _rng(generator).permutation(n).astype(np.int64)
    t = _C.tensor_from_array(perm, int64, "cpu")
    dev = _device_str("randperm", device)
    out = _C.empty((n,), dtype, dev)
    _C.copy_(out, t)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _check_probs(fn, p):
    if not p.dtype.is_floating_point:
        raise NotImplementedError(
            f"{fn}(): not implemented for '{p.dtype.name}' probabilities "
            "(a floating point tensor)")
    ok = _C.compare("ge", p, 0.0).all() & _C.compare("le", p, 1.0).all()
    if not bool(ok):
        raise RuntimeError(f"{fn}(): Expected p_in >= 0 && p_in <= 1 to be "
                           "true, but got false (every probability must be "
                           "in [0, 1])")


def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (element-wise), else 0, in input's
    dtype; with a number ``p``, that probability everywhere."""
    _check_tensor("bernoulli", "input", input)
    if p is not None:
        out = _C.empty(tuple(input.shape), input.dtype, _dev(input))
        return _TensorRandom.bernoulli_(out, p, generator=generator)
    _check_probs("bernoulli", input)
    u = _draw("uniform", tuple(input.shape), generator, _dev(input))
    return _C.compare("lt", u, input.detach()).to(input.dtype)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None,
           device=None, requires_grad=False):
    """Draws of N(mean, std^2): ``normal(mean, std)`` with a tensor mean
    and/or std (broadcast; their dtype), or ``normal(mean, std, size)``
    with numbers (float32 unless ``dtype``)."""
    tm, ts = isinstance(mean, _TB), isinstance(std, _TB)
    if not tm and not ts:
        if size is None:
            raise TypeError("normal(): with a number mean and std, argument "
                            "'size' (a tuple of ints) is required")
        mean = _check_number("normal", "mean", mean, False)
        std = _check_number("normal", "std", std, False)
        if std < 0:
            raise RuntimeError(f"normal(): expects std >= 0.0, but found "
                               f"std {std}")
        from ._creation import _new
        out, shape = _new("normal", (size,), dtype, device)
        z = _draw("normal", shape, generator, _dev(out))
        out = _C.copy_(out, z * std + mean)
        return out.requires_grad_(True) if requires_grad else out
    from .nn._losses import _broadcast_shape
    tensors = [t for t in (mean, std) if isinstance(t, _TB)]
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"normal(): expected a floating point "
                               f"tensor, got {t.dtype.name}")
    if ts:
        if not bool(_C.compare("ge", std.detach(), 0.0).all()):
            raise RuntimeError("normal(): expects all elements of std >= "
                               "0.0")
    elif _check_number("normal", "std", std, False) < 0:
        raise RuntimeError(f"normal(): expects std >= 0.0, but found std "
                           f"{std}")
    shape = _broadcast_shape("normal", mean.shape if tm else (),
                             std.shape if ts else ())
    dt = tensors[0].dtype if len(tensors) == 1 else \
        _C.result_type(mean, std)
    z = _draw("normal", shape, generator, _dev(tensors[0]))
    m = mean.detach() if tm else mean
    s = std.detach() if ts else std
    return (z * s + m).to(dt)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """``num_samples`` category indices per row of ``input`` (1-D or 2-D
    non-negative weights, not necessarily summing to 1), drawn with or
    without replacement (int64)."""
    _check_tensor("multinomial", "input", input)
    if input.ndim not in (1, 2):
        raise RuntimeError("multinomial(): prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError("multinomial(): only supports floating-point "
                           f"dtypes for input, got: {input.dtype.name}")
    k = operator.index(num_samples)
    if k <= 0:
        raise RuntimeError("multinomial(): cannot sample n_sample <= 0 "
                           "samples")
    w = _host(input).reshape(-1, input.shape[-1])
    n = w.shape[1]
    if not replacement and k > n:
        raise RuntimeError("multinomial(): cannot sample n_sample > "
                           "prob_dist.size(-1) samples without replacement")
    if not np.isfinite(w).all() or (w < 0).any():
        raise RuntimeError("multinomial(): probability tensor contains "
                           "either `inf`, `nan` or element < 0")
    total = w.sum(axis=1)
    if (total <= 0).any():
        raise RuntimeError("multinomial(): invalid multinomial distribution "
                           "(sum of probabilities <= 0)")
    if not replacement and ((w > 0).sum(axis=1) < k).any():
        raise RuntimeError(
            "multinomial(): invalid multinomial distribution (with "
            "replacement=False, not enough non-negative category to sample)")
    rng = _rng(generator)
    if replacement:
        cdf = np.cumsum(w, axis=1)
        u = rng.random((w.shape[0], k)) * total[:, None]
        idx = np.stack([np.searchsorted(c, r, side="right")
                        for c, r in zip(cdf, u)])
        # u * total can round up to the total: the last category drawn
        last = n - 1 - np.argmax(w[:, ::-1] > 0, axis=1)
        idx = np.minimum(idx, last[:, None])
    else:
        # the k smallest of E_i / w_i (E_i ~ Exp(1)) are a draw without
        # replacement with probabilities proportional to w
        with np.errstate(divide="ignore"):
            keys = rng.standard_exponential(w.shape) / w
        idx = np.argsort(keys, axis=1, kind="stable")[:, :k]
    idx = np.ascontiguousarray(idx.astype(np.int64))
    if input.ndim == 1:
        idx = idx[0]
    t = _C.tensor_from_array(idx, int64, "cpu")
    if input.device_type != "cpu":
        out = _C.empty(tuple(t.shape), int64, _dev(input))
        return _C.copy_(out, t)
    return t


class _TensorRandom:
    """Tensor's bernoulli/bernoulli_ (a tensor p too), multinomial and
    exponential_."""

    def bernoulli(self, p=None, *, generator=None):
        """``ampc.bernoulli(self, p)``."""
        return bernoulli(self, p, generator=generator)

    def multinomial(self, num_samples, replacement=False, *,
                    generator=None):
        """``ampc.multinomial(self, num_samples, replacement)``."""
        return multinomial(self, num_samples, replacement,
                           generator=generator)

    def bernoulli_(self, p=0.5, *, generator=None):
        """Fill self with 1 with probability ``p`` (a number, or a tensor
        broadcast to self's shape), else 0."""
        if not isinstance(p, _TB) and generator is None:
            return super().bernoulli_(p)    # the C kernel's own draw
        if isinstance(p, _TB):
            _check_probs("bernoulli_", p)
            p = p.detach().expand(*self.shape)
        else:
            p = _check_number("bernoulli_", "p", p, False)
            if not 0 <= p <= 1:
                raise RuntimeError("bernoulli_(): expects p to be in "
                                   f"[0, 1], but got p={p}")
        u = _draw("uniform", tuple(self.shape), generator, _dev(self))
        return self.copy_(_C.compare("lt", u, p))

    def exponential_(self, lambd=1.0, *, generator=None):
        """Fill self with draws of density lambd * exp(-lambd * x)."""
        lambd = _check_number("exponential_", "lambd", lambd, False)
        if not self.dtype.is_floating_point:
            raise RuntimeError(
                "exponential_(): Exponential distribution is a continuous "
                "probability distribution. dtype must be a floating point "
                f"but you specified {self.dtype.name}")
        if not lambd > 0:
            raise RuntimeError("exponential_(): expects lambda > 0.0, but "
                               f"found lambda={lambd}")
        u = _draw("uniform", tuple(self.shape), generator, _dev(self))
        # 1 - u lies in (0, 1], so the log is finite
        return self.copy_(_C.unary("log", 1.0 - u) * (-1.0 / lambd))
