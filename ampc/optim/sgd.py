"""``SGD``: stochastic gradient descent with momentum, dampening, weight
decay, Nesterov momentum and maximize, exactly PyTorch's update, each
parameter updated by one fused pass (``_C.sgd_foreach_step_``: a whole
parameter group in one call).

>>> import ampc
>>> w = ampc.nn.Parameter(ampc.tensor([1.0]))
>>> opt = ampc.optim.SGD([w], lr=0.5, momentum=0.9)
>>> (w * w).sum().backward()
>>> opt.step()
>>> w
Parameter containing:
tensor([0.], requires_grad=True)
"""
from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer, _scalar, required

__all__ = ["SGD"]


def _check_differentiable(name, differentiable):
    if differentiable:
        raise RuntimeError(
            f"{name}(): differentiable=True is not supported by ampc (its "
            "steps are fused in-place kernels that autograd does not "
            "record)")


def _check_fused(fused, foreach):
    """torch's constructor check of ``fused``: None, False or True, and not
    together with ``foreach=True``."""
    if fused not in (None, False, True):
        raise TypeError(f"fused must be None, False or True, got {fused!r}")
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _amp_state(opt, p):
    """The ``grad_scale`` and ``found_inf`` that a GradScaler set on ``opt``
    for this step (PyTorch's ``_step_supports_amp_scaling`` contract), as
    tensors on ``p``'s device, or None."""
    out = []
    for name in ("grad_scale", "found_inf"):
        t = getattr(opt, name, None)
        if t is not None and (t.device_type != p.device_type
                              or t.device_index != p.device_index):
            t = t._to(_dev(p), None, False)
        out.append(t)
    return out


class SGD(Optimizer):
    """PyTorch's SGD.  With g the gradient (negated when ``maximize``):
    g += weight_decay * p; with momentum, buf = g on the first step, then
    buf = momentum * buf + (1 - dampening) * g, and g = buf (or
    g + momentum * buf with ``nesterov``); p -= lr * g.  Each parameter
    is updated in one fused pass; by default (``foreach=None`` or True)
    one call updates every parameter of a group that shares a device and
    a dtype (one kernel launch on a GPU), and ``foreach=False`` calls once
    per parameter, as torch's for-loop implementation.  The results are
    the same bits either way.

    ``fused=True`` also sets ``_step_supports_amp_scaling``, as torch: a
    GradScaler then hands the step its ``grad_scale`` and ``found_inf``
    tensors (attributes of the optimizer) instead of syncing to decide the
    skip, and the kernel itself skips the step when ``found_inf`` is nonzero
    and divides the gradients by ``grad_scale``, writing them back unscaled
    to ``.grad`` as torch's fused kernels do.  On a GPU the step then never
    waits for the device.
    NOTE: with momentum, the buffer starts at zero; if the very first step is
    skipped, the next one treats it as a later step (buf = (1 - dampening)
    * g instead of g, the same when dampening is 0).

    >>> import ampc
    >>> model = ampc.nn.Linear(3, 1)
    >>> opt = ampc.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    >>> opt.zero_grad()
    >>> model(ampc.ones(2, 3)).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0,
                 weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        if lr is not required:
            lr = _scalar("SGD", "lr", lr)
            if lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                "Nesterov momentum requires a momentum and zero dampening")
        _check_differentiable("SGD", differentiable)
        _check_fused(fused, foreach)
        defaults = {
            "lr": lr, "momentum": momentum, "dampening": dampening,
            "weight_decay": weight_decay, "nesterov": nesterov,
            "maximize": maximize, "foreach": foreach,
            "differentiable": differentiable, "fused": fused,
        }
        super().__init__(params, defaults)
        if fused:
            self._step_supports_amp_scaling = True

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient; with a
        ``closure`` (re-computes the loss, calls backward), returns its
        loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = float(_scalar("SGD", "lr", group["lr"]))
            momentum = float(group["momentum"])
            dampening = float(group["dampening"])
            weight_decay = float(_scalar("SGD", "weight_decay",
                                         group["weight_decay"]))
            nesterov = bool(group["nesterov"])
            maximize = bool(group["maximize"])
            fused = bool(group["fused"])
            # torch's foreach=False is the one-parameter-at-a-time loop;
            # otherwise one call per (device, dtype, first step) batch
            foreach = group["foreach"] is not False or fused
            batches = {}
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                buf = None
                first = False
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        # the step sets it to the (decayed) gradient; a
                        # fused step may be skipped on the device, so its
                        # buffer must hold a value already
                        first = True
                        shape = tuple(p.shape)
                        if fused:
                            buf = _C.full(shape, 0, p.dtype, _dev(p))
                        else:
                            buf = _C.empty(shape, p.dtype, _dev(p))
                        state["momentum_buffer"] = buf
                if not foreach:
                    self._step_one(p, grad, buf, first, fused, lr, momentum,
                                   dampening, weight_decay, nesterov,
                                   maximize)
                    continue
                key = (p.device_type, p.device_index, p.dtype, first)
                batch = batches.setdefault(key, ([], [], []))
                batch[0].append(p)
                batch[1].append(grad)
                batch[2].append(buf)
            for (_, _, _, first), (ps, gs, bs) in batches.items():
                grad_scale = found_inf = None
                if fused:
                    grad_scale, found_inf = _amp_state(self, ps[0])
                _C.sgd_foreach_step_(ps, gs, bs if momentum != 0 else None,
                                     lr, momentum, dampening, weight_decay,
                                     nesterov, maximize, first,
                                     grad_scale=grad_scale,
                                     found_inf=found_inf)
        return loss

    def _step_one(self, p, grad, buf, first, fused, lr, momentum, dampening,
                  weight_decay, nesterov, maximize):
        grad_scale = found_inf = None
        if fused:
            grad_scale, found_inf = _amp_state(self, p)
        _C.sgd_step_(p, grad, buf, lr, momentum, dampening, weight_decay,
                     nesterov, maximize, first, grad_scale=grad_scale,
                     found_inf=found_inf)


def _dev(t):
    return "cpu" if t.device_type == "cpu" else f"cuda:{t.device_index}"
