"""``Adagrad``: PyTorch's update (lr decay, L2 weight decay, the initial
accumulator value, maximize) and its per-parameter state (``step``,
``sum``, created by the constructor as torch does), each parameter
updated by one fused pass (``_C.adagrad_foreach_step_``: a whole
parameter group in one call).

>>> import ampc
>>> w = ampc.nn.Parameter(ampc.tensor([1.0]))
>>> opt = ampc.optim.Adagrad([w], lr=0.1)
>>> (w * w).sum().backward()
>>> opt.step()
>>> round(float(w), 4)
0.9
"""
from .. import _C
from ..autograd import no_grad
from . import _state
from .optimizer import Optimizer, _scalar, required
from .sgd import _amp_state, _check_differentiable, _check_fused

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """PyTorch's Adagrad: at step t, with g the gradient (negated when
    ``maximize``), g += weight_decay * p; sum += g^2;
    p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps).  ``sum``
    starts at ``initial_accumulator_value``.  Each parameter is updated in
    one fused pass, its step counter advanced (and the step's rate taken
    from it) by the kernel where it lives on the parameter's device; by
    default (``foreach=None`` or True) one call updates every parameter of
    a group that shares a device and a dtype (one kernel launch on a GPU),
    and ``foreach=False`` calls once per parameter, as torch's for-loop
    implementation, with the same bits.

    ``fused=True`` keeps ``step`` on the parameter's device and sets
    ``_step_supports_amp_scaling``, as torch: a GradScaler hands the step
    ``grad_scale`` and ``found_inf`` tensors, the kernel skips the step on
    the device when ``found_inf`` is nonzero (the counter included) and
    divides the gradients by ``grad_scale``, writing them back unscaled to
    ``.grad`` as torch's fused kernels do.

    >>> import ampc
    >>> w = ampc.nn.Parameter(ampc.zeros(2))
    >>> opt = ampc.optim.Adagrad([w], initial_accumulator_value=0.1)
    >>> sorted(opt.state[w])
    ['step', 'sum']
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *,
                 maximize=False, differentiable=False, fused=None):
        if lr is not required:
            lr = _scalar("Adagrad", "lr", lr)
            if not 0.0 <= lr:
                raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        _check_differentiable("Adagrad", differentiable)
        _check_fused(fused, foreach)
        defaults = {
            "lr": lr, "lr_decay": lr_decay, "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach, "maximize": maximize,
            "differentiable": differentiable, "fused": fused,
        }
        super().__init__(params, defaults)
        if fused:
            self._step_supports_amp_scaling = True
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, initial_accumulator_value,
                                 bool(group["fused"]))

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)

    def _init_state(self, p, initial_accumulator_value, fused):
        state = self.state[p]
        state["step"] = _state.new_step(p, fused)
        state["sum"] = _state.new_like(p, initial_accumulator_value)
        return state

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient; with a
        ``closure``, returns its loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            fused = bool(group["fused"])
            hyper = (float(_scalar("Adagrad", "lr", group["lr"])),
                     float(group["lr_decay"]), float(group["weight_decay"]),
                     float(group["eps"]), bool(group["maximize"]))
            # one call per batch of a device, a dtype and (with host
            # counters) a step number; foreach=False one per parameter
            foreach = group["foreach"] is not False or fused
            batches = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p] or self._init_state(
                    p, self.defaults["initial_accumulator_value"], fused)
                step_t = _state.on_device_step(state, p) if fused else \
                    state["step"]
                step = _state.counter(step_t, p)
                if step is None:
                    step = float(step_t.item())
                if not foreach:
                    grad_scale = found_inf = None
                    if fused:
                        grad_scale, found_inf = _amp_state(self, p)
                    _C.adagrad_step_(p, p.grad, state["sum"], step, *hyper,
                                     grad_scale=grad_scale,
                                     found_inf=found_inf)
                    continue
                host = not isinstance(step, _C.TensorBase)
                key = (p.device_type, p.device_index, p.dtype,
                       step if host else None)
                batch = batches.setdefault(key, ([], [], [], []))
                for lst, t in zip(batch, (p, p.grad, state["sum"], step)):
                    lst.append(t)
            for key, (ps, gs, sums, steps) in batches.items():
                grad_scale = found_inf = None
                if fused:
                    grad_scale, found_inf = _amp_state(self, ps[0])
                _C.adagrad_foreach_step_(
                    ps, gs, sums, steps if key[3] is None else key[3],
                    *hyper, grad_scale=grad_scale, found_inf=found_inf)
        return loss
