"""Learning-rate schedules: ``StepLR`` and ``CosineAnnealingLR`` over an
``ampc.optim`` optimiser, with PyTorch's chainable updates, state dicts and
its warning when ``scheduler.step()`` runs before ``optimizer.step()``.

>>> import ampc
>>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
>>> sched = ampc.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
>>> lrs = []
>>> for epoch in range(5):
...     opt.step()
...     sched.step()
...     lrs.append(sched.get_last_lr()[0])
>>> lrs
[1.0, 0.5, 0.5, 0.25, 0.25]
"""
import functools
import math
import warnings
import weakref

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is "
    "being deprecated where possible. Please use `scheduler.step()` to step "
    "the scheduler. During the deprecation, if epoch is different from "
    "None, the closed form is used instead of the new chainable form, where "
    "available. Please open an issue if you are unable to replicate your "
    "use case: https://github.com/pytorch/pytorch/issues/new/choose.")


class LRScheduler:
    """Base class of the schedulers: subclasses compute the new learning
    rates in ``get_lr`` (from the current ones: the chainable form) and may
    give ``_get_closed_form_lr``.

    ``step()`` is to be called after ``optimizer.step()``; the first
    ``scheduler.step()`` warns (PyTorch's words) when the optimiser has not
    stepped yet.  The check wraps ``optimizer.step`` with a flag, as
    PyTorch does.
    """

    _get_lr_called_within_step = False

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        "param 'initial_lr' is not specified in "
                        f"param_groups[{i}] when resuming an optimizer")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._patch_optimizer_step()
        self._initial_step()

    def _patch_optimizer_step(self):
        """Wrap ``optimizer.step`` so that calling it sets
        ``optimizer._opt_called`` (what the order warning checks)."""
        opt = self.optimizer
        if hasattr(opt.step, "_wrapped_by_lr_sched"):
            return
        func = opt.step.__func__
        opt_ref = weakref.ref(opt)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            o = opt_ref()
            o._opt_called = True
            return func.__get__(o, o.__class__)(*args, **kwargs)

        wrapper._wrapped_by_lr_sched = True
        opt.step = wrapper

    def _initial_step(self):
        self._step_count = 0
        self.step()

    def state_dict(self):
        """Everything but the optimiser, as a dict."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict()`` returned."""
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The learning rates of the groups after the last ``step()``."""
        return self._last_lr

    def get_lr(self):
        """The next learning rates (subclasses)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement get_lr()")

    def _warn_get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, "
                "please use `get_last_lr()`.", UserWarning, stacklevel=3)

    def step(self, epoch=None):
        """Advance the schedule by one epoch (call after
        ``optimizer.step()``) and write the new rates into the groups."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after "
                    "learning rate scheduler initialization. Please, make "
                    "sure to call `optimizer.step()` before "
                    "`lr_scheduler.step()`. See more details at "
                    "https://pytorch.org/docs/stable/optim.html"
                    "#how-to-adjust-learning-rate", UserWarning,
                    stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                hint = ""
                if getattr(self.optimizer, "_amp_step_skipped", False):
                    hint = (
                        " (ampc: optimizer.step() did not run because "
                        "GradScaler.step() skipped it: the gradients held "
                        "inf/NaN, as is normal in the first iterations "
                        "while the loss scale settles. The order in your "
                        "loop is right and the warning is harmless; "
                        "scaler.stats()['last_step_skipped'] tells when a "
                        "step is skipped.)")
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before "
                    "`optimizer.step()`. In PyTorch 1.1.0 and later, you "
                    "should call them in the opposite order: "
                    "`optimizer.step()` before `lr_scheduler.step()`.  "
                    "Failure to do this will result in PyTorch skipping the "
                    "first value of the learning rate schedule. See more "
                    "details at https://pytorch.org/docs/stable/optim.html"
                    "#how-to-adjust-learning-rate" + hint, UserWarning,
                    stacklevel=2)
        self._step_count += 1
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning,
                              stacklevel=2)
                self.last_epoch = epoch
                if hasattr(self, "_get_closed_form_lr"):
                    values = self._get_closed_form_lr()
                else:
                    values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]


_LRScheduler = LRScheduler


class StepLR(LRScheduler):
    """Multiply each group's learning rate by ``gamma`` every
    ``step_size`` epochs.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=0.1)
    >>> ampc.optim.lr_scheduler.StepLR(opt, step_size=30).get_last_lr()
    [0.1]
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Anneal each learning rate from its initial value to ``eta_min``
    along a half cosine over ``T_max`` epochs (then back up, as PyTorch's
    chainable form does).

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> sched = ampc.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> opt.step(); sched.step(); round(sched.get_last_lr()[0], 6)
    0.5
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        groups = self.optimizer.param_groups
        t, T, eta_min = self.last_epoch, self.T_max, self.eta_min
        if t == 0:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and t > 0:
            return [eta_min + (base - eta_min)
                    * (1 + math.cos(t * math.pi / T)) / 2
                    for base in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (base - eta_min) * (1 - math.cos(math.pi / T))
                    / 2 for base, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / T))
                / (1 + math.cos(math.pi * (t - 1) / T))
                * (g["lr"] - eta_min) + eta_min for g in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]
