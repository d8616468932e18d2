"""``RMSprop``: PyTorch's update (square root before eps, the centered
variant, momentum, L2 weight decay, maximize) and its per-parameter
state (``step``, ``square_avg``, ``momentum_buffer``, ``grad_avg``),
written with ampc's in-place element-wise ops (``_tensor_steps``), not a
fused kernel.

>>> import ampc
>>> w = ampc.nn.Parameter(ampc.tensor([1.0]))
>>> opt = ampc.optim.RMSprop([w], lr=0.01)
>>> (w * w).sum().backward()
>>> opt.step()
>>> round(float(w), 4)
0.9
"""
from ..autograd import no_grad
from . import _tensor_steps as ts
from .optimizer import Optimizer, _scalar, required
from .sgd import _check_differentiable

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """PyTorch's RMSprop: with g the gradient (negated when ``maximize``),
    g += weight_decay * p; v = alpha v + (1 - alpha) g^2; with
    ``centered``, m = lerp(m, g, 1 - alpha) and the denominator
    sqrt(v - m^2) + eps, else sqrt(v) + eps; with ``momentum``,
    buf = momentum buf + g / den and p -= lr buf, else
    p -= lr g / den.  Each parameter takes about ten element-wise passes
    (no fused kernel); ``foreach`` is accepted and changes nothing.
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
            lr = float(_scalar("RMSprop", "lr", group["lr"]))
            alpha = float(group["alpha"])
            eps = float(group["eps"])
            weight_decay = float(group["weight_decay"])
            momentum = float(group["momentum"])
            centered = bool(group["centered"])
            maximize = bool(group["maximize"])
            capturable = bool(group["capturable"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                if capturable:
                    ts.check_capturable(p)
                state = self._param_state(p, momentum, centered, capturable)
                ts.advance(state["step"])
                g = ts.effective_grad(p, p.grad, weight_decay, maximize)
                self._update(p, g, state, lr, alpha, eps, momentum,
                             centered)
        return loss

    def _param_state(self, p, momentum, centered, capturable):
        state = self.state[p]
        if not state:
            state["step"] = ts.new_step(p, capturable)
            state["square_avg"] = ts.new_like(p, 0)
            if momentum > 0:
                state["momentum_buffer"] = ts.new_like(p, 0)
            if centered:
                state["grad_avg"] = ts.new_like(p, 0)
        return state

    @staticmethod
    def _update(p, g, state, lr, alpha, eps, momentum, centered):
        sa = state["square_avg"]
        den = ts.new_like(p)
        ts.binary("mul", sa, alpha, sa)
        ts.addcmul_(sa, g, 1 - alpha, den)
        if centered:
            ga = state["grad_avg"]
            ts.lerp_(ga, g, 1 - alpha, den)
            ts.unary("square", ga, den)
            ts.binary("sub", sa, den, den)
            ts.unary("sqrt", den, den)
        else:
            ts.unary("sqrt", sa, den)
        ts.binary("add", den, eps, den)
        if momentum > 0:
            buf = state["momentum_buffer"]
            ts.binary("mul", buf, momentum, buf)
            ts.addcdiv_(buf, g, den, 1)
            ts.binary("mul", buf, lr, den)
            ts.binary("sub", p, den, p)
        else:
            ts.addcdiv_(p, g, den, -lr)
