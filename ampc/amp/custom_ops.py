"""Autocast for code autocast knows nothing of: PyTorch's ``custom_fwd`` /
``custom_bwd`` decorators for the ``forward`` and ``backward`` of a custom
``ampc.autograd.Function``, and ``register_op`` (beyond PyTorch), which
gives any function one of autocast's own policies, so that it runs in float32,
in the low dtype or in the widest of its inputs' dtypes, and says so when it
fails (user_needs.md A6).

>>> import ampc
>>> @ampc.amp.register_op(policy="fp32")
... def sq_norm(x):
...     return (x * x).sum()
>>> with ampc.autocast("cpu", dtype=ampc.bfloat16):
...     sq_norm(ampc.ones(3, dtype=ampc.bfloat16)).dtype
ampc.float32
"""
import collections.abc
import functools

from .. import _C
from .._dtype_device import float32

__all__ = ["custom_bwd", "custom_fwd", "register_op"]

_TB = _C.TensorBase
_FLOATS = ("float32", "float16", "bfloat16")


def _check_device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(
            f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def _eligible(t, device_type):
    """A tensor that autocast would cast: floating, on ``device_type``
    (float64 is never cast, as in PyTorch; ampc has no float64 tensors)."""
    return t.dtype.name in _FLOATS and t.device.type == device_type


def _cast(value, device_type, dtype):
    """``value`` with every eligible tensor inside it (through lists,
    tuples, named tuples and mappings) cast to ``dtype``.

    PyTorch's ``_cast`` also walks any other iterable and hands back a
    generator in its place, so a module, a ``range`` or a data loader passed
    to a decorated forward arrives consumed or changed; ampc passes such
    values through as they are."""
    if isinstance(value, _TB):
        return value.to(dtype) if _eligible(value, device_type) else value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_cast(v, device_type, dtype) for v in value]
        if hasattr(value, "_fields"):       # a named tuple
            return type(value)(*items)
        return type(value)(items)
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorate the ``forward`` of a custom ``Function`` for autocast.

    Without ``cast_inputs``, ``forward``'s ops run under the caller's
    autocast state, and ``custom_bwd`` makes ``backward`` run under the same
    one.  With ``cast_inputs=dtype``, inside an autocast region of
    ``device_type`` the floating tensors among the arguments (nested in
    containers too) are cast to ``dtype`` and ``forward`` runs with autocast
    off; outside one it changes nothing.  PyTorch's ``torch.amp.custom_fwd``.

    >>> import ampc
    >>> class Scale2(ampc.autograd.Function):
    ...     @staticmethod
    ...     @ampc.amp.custom_fwd(device_type="cpu", cast_inputs=ampc.float32)
    ...     def forward(ctx, x):
    ...         return x * 2
    ...     @staticmethod
    ...     @ampc.amp.custom_bwd(device_type="cpu")
    ...     def backward(ctx, g):
    ...         return g * 2
    >>> with ampc.autocast("cpu"):
    ...     Scale2.apply(ampc.ones(2, dtype=ampc.bfloat16)).dtype
    ampc.float32
    """
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type,
                                 cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = _C.get_autocast_dtype(device_type)
        active = _C.is_autocast_enabled(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = active
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not active:
            return fwd(*args, **kwargs)
        with _C.autocast(device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs),
                       **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorate the ``backward`` of a custom ``Function`` so that it runs
    under the autocast state its ``forward`` (decorated with ``custom_fwd``)
    ran under.  PyTorch's ``torch.amp.custom_bwd``."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        if not hasattr(ctx, "_fwd_used_autocast"):
            raise RuntimeError(
                f"custom_bwd: {bwd.__qualname__} is decorated with "
                "custom_bwd but its Function's forward is not decorated "
                "with custom_fwd, so the forward's autocast state is "
                "unknown; decorate the forward with "
                f"@ampc.amp.custom_fwd(device_type='{device_type}')")
        with _C.autocast(device_type, enabled=ctx._fwd_used_autocast,
                         dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd


# ----------------------------------------------------------------------------
# register_op: autocast's policies for users' own functions

_POLICIES = ("lower_precision_fp", "fp32", "promote")


def _tensors(value):
    """Every tensor inside ``value`` (through lists, tuples and dicts)."""
    if isinstance(value, _TB):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, collections.abc.Mapping):
        for v in value.values():
            yield from _tensors(v)


def _widest(tensors):
    """The widest floating dtype among ``tensors``, by autocast's promotion:
    their common dtype when they share one, else float32 (float32 is wider
    than either 16-bit type, and float16 with bfloat16 needs float32)."""
    names = {t.dtype.name for t in tensors}
    return getattr(_C, names.pop()) if len(names) == 1 else float32


def _describe(tensors):
    return ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in tensors)


def register_op(fn=None, *, policy, name=None):
    """Give ``fn`` one of autocast's op policies (beyond PyTorch).

    Inside an autocast region for the device of ``fn``'s floating tensor
    arguments, those tensors (nested in lists, tuples and dicts too) are cast
    by ``policy`` and ``fn`` then runs with autocast off, so everything in it
    computes in that dtype:

    - ``"fp32"``: float32 (for numerically sensitive code: norms, losses,
      exponentials, reductions);
    - ``"lower_precision_fp"``: the region's autocast dtype (float16 or
      bfloat16: for matrix products and convolutions);
    - ``"promote"``: the widest dtype among the tensors (for ops that mix
      inputs and must not lose precision); float16 with bfloat16 gives
      float32, where autocast's own promote ops (``cat``, ``stack``) raise.

    Outside autocast ``fn`` is called unchanged.  An exception raised by
    ``fn`` under the policy gets a note naming the op, the policy and the
    dtypes before and after the casts.  Use it as ``register_op(fn,
    policy=...)`` or as a decorator ``@register_op(policy=...)``; ``name``
    (default ``fn.__qualname__``) is the op's name in those notes.  The
    wrapper's ``autocast_policy`` attribute holds the policy.

    >>> import ampc
    >>> def mix(a, b):
    ...     return a + b
    >>> mix = ampc.amp.register_op(mix, policy="lower_precision_fp")
    >>> with ampc.autocast("cpu", dtype=ampc.bfloat16):
    ...     mix(ampc.ones(2), ampc.ones(2)).dtype
    ampc.bfloat16
    """
    if policy not in _POLICIES:
        raise ValueError(
            f"register_op(): policy must be one of {', '.join(_POLICIES)}; "
            f"got {policy!r}")
    if fn is None:
        return functools.partial(register_op, policy=policy, name=name)
    if not callable(fn):
        raise TypeError(
            f"register_op(): expected a callable, got {type(fn).__name__}")
    op_name = name if name is not None else getattr(
        fn, "__qualname__", repr(fn))

    @functools.wraps(fn)
    def run_with_policy(*args, **kwargs):
        tensors = [t for t in _tensors((args, kwargs))
                   if t.dtype.name in _FLOATS]
        if not tensors:
            return fn(*args, **kwargs)
        device_type = tensors[0].device.type
        if not _C.is_autocast_enabled(device_type):
            return fn(*args, **kwargs)
        on_device = [t for t in tensors if t.device.type == device_type]
        if policy == "fp32":
            dtype = float32
        elif policy == "lower_precision_fp":
            dtype = _C.get_autocast_dtype(device_type)
        else:
            dtype = _widest(on_device)
        cast_args = _cast(args, device_type, dtype)
        cast_kwargs = _cast(kwargs, device_type, dtype)
        try:
            with _C.autocast(device_type, enabled=False):
                return fn(*cast_args, **cast_kwargs)
        except Exception as e:
            e.add_note(
                f"in op '{op_name}' (autocast policy '{policy}', "
                f"autocast('{device_type}', "
                f"dtype={_C.get_autocast_dtype(device_type)})): "
                f"its tensor arguments {_describe(on_device)} were cast to "
                f"{dtype} and it ran with autocast off")
            raise

    run_with_policy.autocast_policy = policy
    return run_with_policy
