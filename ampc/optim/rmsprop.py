"""``RMSprop``: PyTorch's update (square root before eps, the centered
variant, momentum, L2 weight decay, maximize) and its per-parameter
state (``step``, ``square_avg``, ``momentum_buffer``, ``grad_avg``),
each parameter updated by one fused pass (``_C.rmsprop_foreach_step_``:
a whole parameter group in one call).

>>> import ampc
>>> w = ampc.nn.Parameter(ampc.tensor([1.0]))
>>> opt = ampc.optim.RMSprop([w], lr=0.01)
>>> (w * w).sum().backward()
>>> opt.step()
>>> round(float(w), 4)
0.9
"""
from .. import _C
from ..autograd import no_grad
from . import _state
from .optimizer import Optimizer, _scalar, required
from .sgd import _check_differentiable

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """PyTorch's RMSprop: with g the gradient (negated when ``maximize``),
    g += weight_decay * p; v = alpha v + (1 - alpha) g^2; with
    ``centered``, m = lerp(m, g, 1 - alpha) and the denominator
    sqrt(v - m^2) + eps, else sqrt(v) + eps; with ``momentum``,
    buf = momentum buf + g / den and p -= lr buf, else
    p -= lr g / den.  Each parameter is updated in one fused pass, its
    step counter advanced by the kernel where it lives on the parameter's
    device; by default (``foreach=None`` or True) one call updates every
    parameter of a group that shares a device and a dtype (one kernel
    launch on a GPU), and ``foreach=False`` calls once per parameter, as
    torch's for-loop implementation, with the same bits.
    ``capturable=True`` (CUDA parameters) keeps ``step`` on the device.

    >>> import ampc
    >>> opt = ampc.optim.RMSprop(ampc.nn.Linear(2, 2).parameters(),
    ...                          momentum=0.9, centered=True)
    >>> opt.param_groups[0]["alpha"]
    0.99
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8,
                 weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if lr is not required:
            lr = _scalar("RMSprop", "lr", lr)
            if not 0.0 <= lr:
                raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        _check_differentiable("RMSprop", differentiable)
        defaults = {
            "lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
            "centered": centered, "weight_decay": weight_decay,
            "capturable": capturable, "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient; with a
        ``closure``, returns its loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            momentum = float(group["momentum"])
            centered = bool(group["centered"])
            capturable = bool(group["capturable"])
            hyper = (float(_scalar("RMSprop", "lr", group["lr"])),
                     float(group["alpha"]), float(group["eps"]),
                     float(group["weight_decay"]), momentum, centered,
                     bool(group["maximize"]))
            foreach = group["foreach"] is not False
            batches = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                if capturable:
                    _state.check_capturable(p)
                state = self._param_state(p, momentum, centered, capturable)
                row = (p, p.grad, state["square_avg"],
                       state["momentum_buffer"] if momentum > 0 else None,
                       state["grad_avg"] if centered else None,
                       _state.counter(state["step"], p))
                if not foreach:
                    _C.rmsprop_step_(*row, *hyper)
                    continue
                key = (p.device_type, p.device_index, p.dtype,
                       row[5] is None)
                batch = batches.setdefault(key, tuple([] for _ in row))
                for lst, t in zip(batch, row):
                    lst.append(t)
            for key, lists in batches.items():
                _C.rmsprop_foreach_step_(
                    *lists[:3], lists[3] if momentum > 0 else None,
                    lists[4] if centered else None,
                    None if key[3] else lists[5], *hyper)
        return loss

    def _param_state(self, p, momentum, centered, capturable):
        """p's state, created on its first step (the momentum buffer and
        grad_avg also when switched on later); with ``capturable``, the
        counter on p's device."""
        state = self.state[p]
        if not state:
            state["step"] = _state.new_step(p, capturable)
            state["square_avg"] = _state.new_like(p, 0)
        if momentum > 0 and "momentum_buffer" not in state:
            state["momentum_buffer"] = _state.new_like(p, 0)
        if centered and "grad_avg" not in state:
            state["grad_avg"] = _state.new_like(p, 0)
        if capturable:
            _state.on_device_step(state, p)
        return state
