"""Helpers of the optimisers written with ampc's element-wise ops
(RMSprop, Adagrad) instead of a fused kernel: each op writes into a
buffer of the step (``out=``), so a step allocates at most two temporaries
per parameter and every op is one pass over memory, on the CPU or a GPU
alike; on 16-bit parameters each op rounds to the parameter's dtype, as
PyTorch's own for-loop implementation does."""
from .. import _C
from .sgd import _dev

binary = _C.binary
unary = _C.unary


def check_capturable(p):
    if p.device_type != "cuda":
        raise RuntimeError(
            "If capturable=True, params and state_steps must be on "
            "supported devices: ['cuda'].")


def new_step(p, on_device):
    """A step counter: a 0-d float32 tensor on the CPU (or p's device)."""
    return _C.full((), 0.0, _C.float32, _dev(p) if on_device else "cpu")


def advance(step_t):
    """step += 1; the new value as a Python float."""
    binary("add", step_t, 1, step_t)
    return float(step_t.item())


def effective_grad(p, grad, weight_decay, maximize):
    """-grad when maximizing, plus weight_decay * p: a new tensor when
    either applies (torch's ``grad.add(param, alpha=weight_decay)``),
    else the gradient itself, which is only read."""
    g = unary("neg", grad) if maximize else grad
    if weight_decay != 0:
        t = binary("mul", p, weight_decay)
        g = binary("add", g, t, t)
    return g


def addcmul_(acc, g, value, tmp):
    """acc += value * g * g (``tmp`` is scratch of acc's shape)."""
    unary("square", g, tmp)
    if value != 1:
        binary("mul", tmp, value, tmp)
    binary("add", acc, tmp, acc)


def lerp_(start, end, weight, tmp):
    """start += weight * (end - start), in torch's two forms (the one
    exact at weight 1 for large weights)."""
    binary("sub", end, start, tmp)
    if abs(weight) < 0.5:
        binary("mul", tmp, weight, tmp)
        binary("add", start, tmp, start)
    else:
        binary("mul", tmp, 1.0 - weight, tmp)
        binary("sub", end, tmp, start)


def addcdiv_(p, g, den, value):
    """p += value * g / den, overwriting ``den``."""
    binary("div", g, den, den)
    if value != 1:
        binary("mul", den, value, den)
    binary("add", p, den, p)


def new_like(p, value=None):
    shape, dev = tuple(p.shape), _dev(p)
    if value is None:
        return _C.empty(shape, p.dtype, dev)
    return _C.full(shape, value, p.dtype, dev)
