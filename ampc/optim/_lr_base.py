"""``LRScheduler``, the base class of the learning-rate schedules, and the
helpers they share: PyTorch's chainable step, its state dicts and its
warning when ``scheduler.step()`` runs before ``optimizer.step()``."""
import functools
import types
import warnings
import weakref

from .. import _C
from .optimizer import Optimizer

_TB = _C.TensorBase

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is "
    "being deprecated where possible. Please use `scheduler.step()` to step "
    "the scheduler. During the deprecation, if epoch is different from "
    "None, the closed form is used instead of the new chainable form, where "
    "available. Please open an issue if you are unable to replicate your "
    "use case: https://github.com/pytorch/pytorch/issues/new/choose.")


def _group_values(optimizer, key):
    """``group[key]`` of every group; tensors (a tensor lr) are copied so
    that the list never aliases the groups."""
    return [g[key].clone() if isinstance(g[key], _TB) else g[key]
            for g in optimizer.param_groups]


def _set_group_value(group, key, value):
    """Set ``group[key]``; a tensor there is filled in place, as torch."""
    if isinstance(group[key], _TB):
        group[key].fill_(float(value))
    else:
        group[key] = value


def _format_param(name, optimizer, param):
    """One value per group: a list or tuple of that length, or one value
    repeated."""
    n = len(optimizer.param_groups)
    if isinstance(param, (list, tuple)):
        if len(param) != n:
            raise ValueError(
                f"{name} must have the same length as "
                f"optimizer.param_groups. {name} has {len(param)} values, "
                f"param_groups has {n}.")
    else:
        param = [param] * n
    return [p.clone() if isinstance(p, _TB) else p for p in param]


class LRScheduler:
    """Base class of the schedulers: subclasses compute the new learning
    rates in ``get_lr`` (from the current ones: the chainable form) and may
    give ``_get_closed_form_lr`` (used by the deprecated ``step(epoch)``).

    ``step()`` is to be called after ``optimizer.step()``; the first
    ``scheduler.step()`` warns (PyTorch's words) when the optimiser has not
    stepped yet.  The check wraps ``optimizer.step`` with a flag, as
    PyTorch does.  The step made by the constructor runs with
    ``_is_initial`` set, as in torch 2.13.
    """

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]
                group.setdefault("initial_lr",
                                 lr.clone() if isinstance(lr, _TB) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        "param 'initial_lr' is not specified in "
                        f"param_groups[{i}] when resuming scheduler with "
                        "last_epoch >= 0.\nThis typically happens when:\n"
                        "1. You're trying to resume training from a "
                        "checkpoint but haven't properly loaded the "
                        "optimizer state\n2. You're using last_epoch >= 0 "
                        "for a fresh training run (not recommended)")
        self.base_lrs = _group_values(optimizer, "initial_lr")
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
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

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

    def _check_step_order(self):
        """Torch's warnings on the first ``step()`` after the constructor's,
        with ampc's hint when a GradScaler skipped the optimiser's step."""
        if self._step_count != 1:
            return
        if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
            warnings.warn(
                "Seems like `optimizer.step()` has been overridden after "
                "learning rate scheduler initialization. Please, make "
                "sure to call `optimizer.step()` before "
                "`lr_scheduler.step()`. See more details at "
                "https://pytorch.org/docs/stable/optim.html"
                "#how-to-adjust-learning-rate", UserWarning, stacklevel=3)
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
                stacklevel=3)

    def step(self, epoch=None):
        """Advance the schedule by one epoch (call after
        ``optimizer.step()``) and write the new rates into the groups."""
        self._check_step_order()
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning,
                          stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        """Advance ``last_epoch`` (or set it to ``epoch``, then use the
        closed form where there is one) and write the new rates."""
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                if hasattr(self, "_get_closed_form_lr"):
                    values = self._get_closed_form_lr()
                else:
                    values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._write_lrs(values)

    def _write_lrs(self, values):
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")


class _LRScheduler(LRScheduler):
    """The old name, kept (as a subclass, as torch) for compatibility."""


class _LambdaState:
    """The state dicts of the schedulers built from ``lr_lambda``: a
    plain function is not saved (None), a callable object's ``__dict__``
    is, as torch."""

    def _init_lambdas(self, optimizer, lr_lambda):
        n = len(optimizer.param_groups)
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * n
        else:
            if len(lr_lambda) != n:
                raise ValueError(
                    f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items()
              if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict):
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        state_dict["lr_lambdas"] = lr_lambdas
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)
