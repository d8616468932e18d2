"""``Adam`` and ``AdamW``: PyTorch's formulas (bias-corrected moments, eps
added after the square root, L2 or decoupled weight decay, amsgrad,
maximize), each parameter updated by one fused pass
(``_C.adam_foreach_step_``: a whole parameter group in one call).

>>> import ampc
>>> w = ampc.nn.Parameter(ampc.tensor([1.0]))
>>> opt = ampc.optim.Adam([w], lr=0.1)
>>> (w * w).sum().backward()
>>> opt.step()
>>> round(float(w), 4)
0.9
"""
from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer, _scalar, required
from .sgd import _amp_state, _check_differentiable, _check_fused, _dev

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """PyTorch's Adam: with g the gradient (negated when ``maximize``),
    g += weight_decay * p (or p *= 1 - lr * weight_decay when
    ``decoupled_weight_decay``, as AdamW); m = b1 m + (1 - b1) g;
    v = b2 v + (1 - b2) g^2; v_max = max(v_max, v) with ``amsgrad``;
    p -= lr / (1 - b1^t) * m / (sqrt(v / (1 - b2^t)) + eps).  By default
    (``foreach=None`` or True) one call updates every parameter of a group
    that shares a device, a dtype and a step count (one kernel launch on a
    GPU); ``foreach=False`` calls once per parameter, as torch's for-loop
    implementation, with the same bits.

    ``fused=True`` sets ``_step_supports_amp_scaling``, as torch: a
    GradScaler hands the step ``grad_scale`` and ``found_inf`` tensors, the
    kernel skips the step on the device when ``found_inf`` is nonzero and
    divides the gradients by ``grad_scale``, writing them back unscaled to
    ``.grad`` as torch's fused kernels do.
    With ``fused=True`` or ``capturable=True`` (CUDA parameters only, as
    torch) the state's ``step`` is a float32 tensor on the parameter's
    device, advanced by the kernel unless the step is skipped, with the
    bias corrections computed from it there: a step never waits for the
    GPU and can be captured in a CUDA graph.

    >>> import ampc
    >>> model = ampc.nn.Linear(3, 1)
    >>> opt = ampc.optim.Adam(model.parameters(), lr=1e-3)
    >>> model(ampc.ones(2, 3)).sum().backward()
    >>> opt.step()
    >>> int(opt.state[model.weight]["step"])
    1
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0, amsgrad=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False,
                 fused=None, decoupled_weight_decay=False):
        name = type(self).__name__
        if lr is not required:
            lr = _scalar(name, "lr", lr)
            if not 0.0 <= lr:
                raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        betas = tuple(_scalar(name, "betas", b) for b in betas)
        if len(betas) != 2:
            raise ValueError(
                f"{name}(): betas must be a pair (beta1, beta2), got "
                f"{len(betas)} values")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_differentiable(name, differentiable)
        _check_fused(fused, foreach)
        defaults = {
            "lr": lr, "betas": betas, "eps": eps,
            "weight_decay": weight_decay, "amsgrad": amsgrad,
            "maximize": maximize, "foreach": foreach,
            "capturable": capturable, "differentiable": differentiable,
            "fused": fused, "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)
        if fused:
            self._step_supports_amp_scaling = True

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)
            group.setdefault("decoupled_weight_decay", False)

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient; with a
        ``closure``, returns its loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = float(_scalar("Adam", "lr", group["lr"]))
            beta1, beta2 = (float(b) for b in group["betas"])
            eps = float(group["eps"])
            weight_decay = float(group["weight_decay"])
            amsgrad = bool(group["amsgrad"])
            maximize = bool(group["maximize"])
            decoupled = bool(group["decoupled_weight_decay"])
            fused = bool(group["fused"])
            capturable = bool(group["capturable"])
            # the kernel advances a counter on the param's device
            on_device = fused or capturable
            # torch's foreach=False is the one-parameter-at-a-time loop;
            # otherwise one call per batch of a device, a dtype and (with
            # host counters) a step number
            foreach = group["foreach"] is not False or fused
            hyper = (lr, beta1, beta2, eps, weight_decay, amsgrad, maximize,
                     decoupled)
            batches = {}
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if capturable and p.device_type != "cuda":
                    raise RuntimeError(
                        "If capturable=True, params and state_steps must be "
                        "on supported devices: ['cuda'].")
                state = self._param_state(p, amsgrad, on_device)
                step_t = state["step"]
                if on_device:
                    step = step_t
                else:
                    _C.binary("add", step_t, 1, step_t)
                    step = int(step_t.item())
                tensors = (p, grad, state["exp_avg"], state["exp_avg_sq"],
                           state.get("max_exp_avg_sq") if amsgrad else None,
                           step)
                if not foreach:
                    grad_scale = found_inf = None
                    if fused:
                        grad_scale, found_inf = _amp_state(self, p)
                    _C.adam_step_(*tensors, *hyper, grad_scale=grad_scale,
                                  found_inf=found_inf)
                    continue
                key = (p.device_type, p.device_index, p.dtype,
                       None if on_device else step)
                batch = batches.get(key)
                if batch is None:
                    batch = batches[key] = tuple([] for _ in tensors)
                for lst, t in zip(batch, tensors):
                    lst.append(t)
            for lists in batches.values():
                grad_scale = found_inf = None
                if fused:
                    grad_scale, found_inf = _amp_state(self, lists[0][0])
                steps = lists[5] if on_device else lists[5][0]
                _C.adam_foreach_step_(
                    *lists[:4], lists[4] if amsgrad else None, steps, *hyper,
                    grad_scale=grad_scale, found_inf=found_inf)
        return loss

    def _param_state(self, p, amsgrad, on_device):
        """p's state, created on its first step; a step counter moved to
        p's device in float32 where the kernel advances it (e.g. from a
        state dict saved without fused)."""
        state = self.state[p]
        if not state:
            shape, dev = tuple(p.shape), _dev(p)
            state["step"] = _C.full((), 0.0, _C.float32,
                                    dev if on_device else "cpu")
            state["exp_avg"] = _C.full(shape, 0, p.dtype, dev)
            state["exp_avg_sq"] = _C.full(shape, 0, p.dtype, dev)
            if amsgrad:
                state["max_exp_avg_sq"] = _C.full(shape, 0, p.dtype, dev)
        if amsgrad and state.get("max_exp_avg_sq") is None:
            # amsgrad switched on after the first steps
            state["max_exp_avg_sq"] = _C.full(tuple(p.shape), 0, p.dtype,
                                              _dev(p))
        step_t = state["step"]
        if on_device and (step_t.device_type != p.device_type
                          or step_t.device_index != p.device_index
                          or step_t.dtype is not _C.float32):
            state["step"] = step_t._to(_dev(p), _C.float32, True)
        return state


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay before
    the Adam update), default weight_decay 1e-2, as PyTorch's AdamW.

    >>> import ampc
    >>> opt = ampc.optim.AdamW(ampc.nn.Linear(2, 2).parameters())
    >>> opt.param_groups[0]["weight_decay"]
    0.01
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-2, amsgrad=False, *, maximize=False,
                 foreach=None, capturable=False, differentiable=False,
                 fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad,
                         foreach=foreach, maximize=maximize,
                         capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
