"""``Adagrad``: PyTorch's update (lr decay, L2 weight decay, the initial
accumulator value, maximize) and its per-parameter state (``step``,
``sum``, created by the constructor as torch does), written with ampc's
in-place element-wise ops (``_tensor_steps``), not a fused kernel.

>>> import ampc
>>> w = ampc.nn.Parameter(ampc.tensor([1.0]))
>>> opt = ampc.optim.Adagrad([w], lr=0.1)
>>> (w * w).sum().backward()
>>> opt.step()
>>> round(float(w), 4)
0.9
"""
from ..autograd import no_grad
from . import _tensor_steps as ts
from .optimizer import Optimizer, _scalar, required
from .sgd import _check_differentiable

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """PyTorch's Adagrad: at step t, with g the gradient (negated when
    ``maximize``), g += weight_decay * p; sum += g^2;
    p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps).  ``sum``
    starts at ``initial_accumulator_value``.  Each parameter takes about
    six element-wise passes (no fused kernel); ``foreach`` is accepted and
    changes nothing, ``fused=True`` is refused.

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
        if fused:
            raise RuntimeError(
                "Adagrad(): fused=True is not supported by ampc (its step "
                "is element-wise tensor ops, not a fused kernel); leave "
                "fused=None")
        defaults = {
            "lr": lr, "lr_decay": lr_decay, "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach, "maximize": maximize,
            "differentiable": differentiable, "fused": fused,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, initial_accumulator_value)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)

    def _init_state(self, p, initial_accumulator_value):
        state = self.state[p]
        state["step"] = ts.new_step(p, False)
        state["sum"] = ts.new_like(p, initial_accumulator_value)
        return state

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient; with a
        ``closure``, returns its loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = float(_scalar("Adagrad", "lr", group["lr"]))
            lr_decay = float(group["lr_decay"])
            eps = float(group["eps"])
            weight_decay = float(group["weight_decay"])
            maximize = bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p] or self._init_state(
                    p, self.defaults["initial_accumulator_value"])
                step = ts.advance(state["step"])
                g = ts.effective_grad(p, p.grad, weight_decay, maximize)
                clr = lr / (1 + (step - 1) * lr_decay)
                acc = state["sum"]
                std = ts.new_like(p)
                ts.addcmul_(acc, g, 1, std)
                ts.unary("sqrt", acc, std)
                ts.binary("add", std, eps, std)
                ts.addcdiv_(p, g, std, -clr)
        return loss
