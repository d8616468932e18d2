"""``keep_weight_casts``: an explicit weight-cast policy (beyond PyTorch;
user_needs #9 and A7).

Autocast casts every float32 weight to float16/bfloat16 at each forward
(cached only within one region, and never for frozen weights).  A kept cast
is instead a persistent 16-bit copy of the weight: autocast uses it in place
of the cast, and ampc's optimizers (SGD, Adam, AdamW: foreach, fused or one
by one, on the CPU and on CUDA) rewrite it from the updated float32 weight
in the same pass that updates the weight, so a training step casts no
weight at all.  Any other write to the weight through ampc (an in-place
op, ``load_state_dict``, a new ``.data``, a CUDA graph replay) is noticed
through the weight's version, and the copy is cast again at its next use.
(A write through a NumPy view of the weight is not seen, as autograd's
version checks do not see it.)  The copies cost the bytes that ``nbytes``
reports, held between steps too; a CUDA graph keeps the copies it uses
alive.

>>> import ampc
>>> model = ampc.nn.Linear(64, 32)
>>> casts = ampc.amp.keep_weight_casts(model, dtype=ampc.bfloat16)
>>> casts
KeptWeightCasts(bfloat16, 2 tensors, 4160 bytes)
>>> opt = ampc.optim.SGD(model.parameters(), lr=0.1)
>>> with ampc.autocast("cpu", dtype=ampc.bfloat16):
...     loss = model(ampc.ones(4, 64)).float().sum()   # no weight is cast
>>> loss.backward()
>>> opt.step()                                          # rewrites the copies
>>> casts.release()
"""
import weakref

from .. import _C

__all__ = ["KeptWeightCasts", "keep_weight_casts"]


def _parameters(params):
    """(name, tensor) pairs from a module, an optimizer or an iterable of
    tensors."""
    if hasattr(params, "named_parameters"):
        return list(params.named_parameters())
    if hasattr(params, "param_groups"):
        return [(f"param_groups[{g}][{i}]", p)
                for g, group in enumerate(params.param_groups)
                for i, p in enumerate(group["params"])]
    if isinstance(params, _C.TensorBase):
        raise TypeError(
            "keep_weight_casts(): params must be a module, an optimizer or "
            "an iterable of tensors; wrap a single tensor in a list")
    try:
        items = list(params)
    except TypeError:
        raise TypeError(
            "keep_weight_casts(): params must be a module, an optimizer or "
            f"an iterable of tensors, not {type(params).__name__}") from None
    for i, p in enumerate(items):
        if not isinstance(p, _C.TensorBase):
            raise TypeError(
                f"keep_weight_casts(): params[{i}] is a "
                f"{type(p).__name__}, expected a tensor")
    return [(f"params[{i}]", p) for i, p in enumerate(items)]


class KeptWeightCasts:
    """The kept casts that one ``keep_weight_casts`` call made: their
    ``dtype``, ``len()``, ``nbytes`` and ``by_device`` (bytes per device),
    ``names`` of the parameters, and ``release()`` (also at the exit of a
    ``with`` block), after which autocast casts those weights again.  A
    cast lives while its parameter does, whether or not this object is
    kept."""

    def __init__(self, dtype, named):
        self.dtype = dtype
        self.names = [name for name, _ in named]
        self._refs = [weakref.ref(p) for _, p in named]

    def _live(self):
        out = []
        for ref in self._refs:
            p = ref()
            if p is not None:
                cast = _C._kept_weight_cast(p)
                if cast is not None:
                    out.append(cast)
        return out

    def __len__(self):
        return len(self._live())

    @property
    def by_device(self):
        """Bytes of the kept casts per device ("cpu", "cuda:0")."""
        out = {}
        for cast in self._live():
            dev = str(cast.device)
            out[dev] = out.get(dev, 0) + cast.numel() * cast.element_size()
        return out

    @property
    def nbytes(self):
        """The memory the kept casts hold, in bytes."""
        return sum(self.by_device.values())

    def release(self):
        """Drops the kept casts of these weights (also where another
        ``keep_weight_casts`` call kept them; their memory goes once no
        autograd or CUDA graph holds them); autocast casts these weights
        again at every forward."""
        for ref in self._refs:
            p = ref()
            if p is not None:
                _C._release_weight_cast(p)
        self._refs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __repr__(self):
        n = len(self)
        name = str(self.dtype).replace("ampc.", "")
        return (f"KeptWeightCasts({name}, {n} tensor{'s' * (n != 1)}, "
                f"{self.nbytes} bytes)")


def keep_weight_casts(params, dtype=None):
    """Keeps a float16/bfloat16 copy of each float32 weight of ``params``
    (a module, an optimizer, or an iterable of tensors), which autocast
    then uses instead of casting the weight, and which ampc's optimizers
    refresh in their fused step.  ``dtype`` defaults to the autocast dtype
    of the weights' device (``ampc.get_autocast_dtype``); autocast regions
    of another dtype cast as usual.  Weights that are not float32 leaves
    are left out; frozen weights (``requires_grad=False``) are kept too,
    and are then never cast again.  Returns a ``KeptWeightCasts``.

    ValueError when ``params`` has no float32 weight or ``dtype`` is not a
    16-bit float; RuntimeError when a weight keeps a cast of the other
    16-bit dtype already."""
    named = _parameters(params)
    eligible = [(n, p) for n, p in named
                if p.dtype == _C.float32 and p.grad_fn is None
                and p._base is None]
    if not eligible:
        raise ValueError(
            "keep_weight_casts(): no float32 weight among the "
            f"{len(named)} tensors given (only float32 leaves are cast by "
            "autocast)")
    if dtype is None:
        from .. import get_autocast_dtype
        dtype = get_autocast_dtype(eligible[0][1].device_type)
    made = []
    try:
        for _, p in eligible:
            if _C._kept_weight_cast(p) is None:
                made.append(p)
            _C._keep_weight_cast(p, dtype)
    except BaseException:
        for p in made:      # all or nothing
            _C._release_weight_cast(p)
        raise
    return KeptWeightCasts(dtype, eligible)
