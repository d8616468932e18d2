"""The per-parameter state that RMSprop and Adagrad share: the ``step``
counter (a 0-d float32 tensor, torch's layout) and tensors like a
parameter.  Their fused kernels advance a counter that lives on the
parameter's device themselves (``counter``); one elsewhere (a CUDA
parameter's CPU counter, as torch keeps it without ``capturable`` or
``fused``) is advanced here."""
from .. import _C
from .sgd import _dev


def check_capturable(p):
    if p.device_type != "cuda":
        raise RuntimeError(
            "If capturable=True, params and state_steps must be on "
            "supported devices: ['cuda'].")


def new_step(p, on_device):
    """A step counter: a 0-d float32 tensor on the CPU (or p's device)."""
    return _C.full((), 0.0, _C.float32, _dev(p) if on_device else "cpu")


def on_device_step(state, p):
    """state["step"] moved to p's device in float32 (a counter from a state
    dict saved without ``capturable``/``fused``, say); returns it."""
    step_t = state["step"]
    if step_t.device_type != p.device_type or \
            step_t.device_index != p.device_index or \
            step_t.dtype is not _C.float32:
        step_t = state["step"] = step_t._to(_dev(p), _C.float32, True)
    return step_t


def counter(step_t, p):
    """step_t when the kernel can advance it (a float32 counter on p's
    device), else None after advancing it here."""
    if step_t.dtype is _C.float32 and step_t.device_type == p.device_type \
            and step_t.device_index == p.device_index:
        return step_t
    _C.binary("add", step_t, 1, step_t)
    return None


def new_like(p, value):
    return _C.full(tuple(p.shape), value, p.dtype, _dev(p))
