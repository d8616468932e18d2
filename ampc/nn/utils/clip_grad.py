"""Gradient clipping, as ``torch.nn.utils``: ``clip_grad_norm_``,
``clip_grad_value_``, ``get_total_norm`` and ``clip_grads_with_norm_``.

The norm of every gradient is one fused C pass (kernel slot ``grad_norm``,
double accumulation); the scaling is a second pass, made only when the
coefficient is below 1.  Clipping gradients that a GradScaler scaled and
has not unscaled yet warns once, with the fix.

>>> import ampc
>>> w = ampc.nn.Parameter(ampc.tensor([3.0, 4.0]))
>>> w.grad = ampc.tensor([3.0, 4.0])
>>> ampc.nn.utils.clip_grad_norm_([w], max_norm=1.0)
tensor(5.)
>>> [round(v, 4) for v in w.grad.tolist()]
[0.6, 0.8]
"""
import math
import types
import warnings

from ... import _C

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_",
           "get_total_norm", "clip_grads_with_norm_"]

_TB = _C.TensorBase

_SCALED_WARNING = (
    "clip_grad_norm_(): these gradients come from a loss scaled by "
    "GradScaler (scaler.scale(loss).backward()) and have not been unscaled "
    "yet, so they are `scale` times too large and max_norm clips them far "
    "too hard.  Call scaler.unscale_(optimizer) before clipping.  (If "
    "max_norm was multiplied by scaler.get_scale() on purpose, ignore this "
    "warning.)")


def _dev(t):
    return "cpu" if t.device_type == "cpu" else f"cuda:{t.device_index}"


def _by_device(tensors):
    """``tensors`` grouped by device, first seen first (the C ops take the
    tensors of one device at a time)."""
    groups = {}
    for t in tensors:
        groups.setdefault(_dev(t), []).append(t)
    return list(groups.values())


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """The ``norm_type``-norm of ``tensors`` taken together, as if they
    were one vector (a 0-d tensor; ``tensor(0.)`` for none).  ``norm_type``
    may be any float, ``inf`` or ``'inf'``.

    >>> import ampc
    >>> ampc.nn.utils.get_total_norm([ampc.tensor([3.0]), ampc.tensor([4.0])])
    tensor(5.)
    """
    tensors = [tensors] if isinstance(tensors, _TB) else list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return _C.full((), 0.0, _C.float32)
    groups = _by_device(tensors)
    if len(groups) == 1:
        total_norm = _C._grad_norm(tensors, norm_type)
    else:
        # as torch: the norm, on the first tensor's device, of the
        # per-tensor norms, merged device by device (a 0-"norm" counts
        # nonzero norms: the devices' counts add up)
        first = _dev(tensors[0])
        total_norm = _C._grad_norm(
            [_C._grad_norm(g, norm_type)._to(first, None) for g in groups],
            1.0 if norm_type == 0.0 else norm_type)
    if error_if_nonfinite and not math.isfinite(total_norm.item()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from "
            "`parameters` is non-finite, so it cannot be clipped. To disable "
            "this error and scale the gradients by the non-finite norm "
            "anyway, set `error_if_nonfinite=False`")
    return total_norm


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of ``parameters`` in place by
    ``min(max_norm / (total_norm + 1e-6), 1)``, given the total norm.

    >>> import ampc
    >>> w = ampc.nn.Parameter(ampc.ones(2))
    >>> w.grad = ampc.tensor([6.0, 8.0])
    >>> ampc.nn.utils.clip_grads_with_norm_([w], 5.0, ampc.tensor(10.0))
    >>> [round(v, 4) for v in w.grad.tolist()]
    [3.0, 4.0]
    """
    if isinstance(parameters, _TB):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    if len(grads) == 0:
        return
    for group in _by_device(grads):
        # the norm goes to each device's gradients, as torch moves the
        # coefficient (the same arithmetic, amp_reduce.h, on either side)
        norm = total_norm
        if isinstance(norm, _TB) and _dev(norm) != _dev(group[0]):
            norm = norm._to(_dev(group[0]), None)
        _C._clip_grads_with_norm_(group, max_norm, norm)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0,
                    error_if_nonfinite=False, foreach=None):
    """Clip the gradients of ``parameters`` (an iterable of tensors, or one
    tensor) so that their total ``norm_type``-norm is at most ``max_norm``;
    returns the total norm before clipping, a 0-d tensor.  Under a
    GradScaler, call ``scaler.unscale_(optimizer)`` first.

    >>> import ampc
    >>> w = ampc.nn.Parameter(ampc.zeros(2))
    >>> w.grad = ampc.tensor([-2.0, 1.0])
    >>> ampc.nn.utils.clip_grad_norm_(w, 1.0, norm_type="inf")
    tensor(2.)
    >>> [round(v, 4) for v in w.grad.tolist()]
    [-1.0, 0.5]
    """
    if isinstance(parameters, _TB):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and len(parameters) == 0:
            warnings.warn(
                "`parameters` is an empty generator, no gradient clipping "
                "will occur.", stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    if grads and _C._amp_clip_pending(grads):
        warnings.warn(_SCALED_WARNING, UserWarning, stacklevel=2)
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite,
                                foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0,
                   error_if_nonfinite=False, foreach=None):
    """Deprecated spelling of :func:`clip_grad_norm_` (FutureWarning).

    >>> import ampc, warnings
    >>> w = ampc.nn.Parameter(ampc.zeros(1))
    >>> w.grad = ampc.tensor([2.0])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     ampc.nn.utils.clip_grad_norm([w], 1.0)
    tensor(2.)
    """
    warnings.warn(
        "`ampc.nn.utils.clip_grad_norm` is now deprecated in favor of "
        "`ampc.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type,
                           error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of ``parameters`` in place to
    ``[-clip_value, clip_value]``.

    >>> import ampc
    >>> w = ampc.nn.Parameter(ampc.zeros(3))
    >>> w.grad = ampc.tensor([-5.0, 0.5, 5.0])
    >>> ampc.nn.utils.clip_grad_value_([w], 1.0)
    >>> w.grad.tolist()
    [-1.0, 0.5, 1.0]
    """
    if isinstance(parameters, _TB):
        parameters = [parameters]
    clip_value = float(clip_value)
    for p in parameters:
        g = p.grad
        if g is not None:
            _C.clamp(g, -clip_value, clip_value, g)
