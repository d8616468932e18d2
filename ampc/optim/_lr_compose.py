"""``SequentialLR`` and ``ChainedScheduler`` (schedules composed), and
``ReduceLROnPlateau`` (driven by a metric), with torch's state dicts."""
import bisect
import math
import warnings

from ._lr_base import EPOCH_DEPRECATION_WARNING, LRScheduler, \
    _group_values, _set_group_value
from .optimizer import Optimizer


def _check_schedulers(owner, optimizer, schedulers, what):
    name = type(owner).__name__
    if len(schedulers) < 1:
        raise ValueError(f"{name} expects at least one scheduler{what}, but "
                         "got no scheduler.")
    optimizer = optimizer or schedulers[0].optimizer
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{name} at index {i} should have `optimizer` as "
                            "its attribute.")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(
                f"{name} does not support `ReduceLROnPlateau` scheduler as "
                "it requires additional kwargs to be specified when calling "
                f"`step`, but got one at index {i} in the given schedulers "
                "sequence.")
        if optimizer != s.optimizer:
            raise ValueError(
                f"{name} expects all schedulers to belong to the same "
                f"optimizer, but got scheduler {type(s).__name__} at index "
                f"{i} has {s.optimizer}, which is different from "
                f"{type(optimizer).__name__}.")
    return optimizer


class _Composite:
    """State dicts holding each inner scheduler's own state dict."""

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items()
              if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict):
        inner = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        state_dict["_schedulers"] = inner
        for s, sd in zip(self._schedulers, inner):
            s.load_state_dict(sd)


class SequentialLR(_Composite, LRScheduler):
    """Run ``schedulers[i]`` between ``milestones[i - 1]`` and
    ``milestones[i]``; each starts from its own first value at its
    milestone.

    >>> import ampc
    >>> import ampc.optim.lr_scheduler as S
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, total_iters=9),
    ...                          S.ExponentialLR(opt, 0.9)], milestones=[1])
    >>> opt.step(); s.step(); s.get_last_lr()
    [1.0]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_schedulers(self, optimizer, schedulers, "")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided "
                "to be one more than the number of milestone points, but got "
                f"number of schedulers {len(schedulers)} and the number of "
                f"milestones to be equal to {len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # the inner constructors each stepped once: undo that, restart
        # from the initial rates with the first scheduler
        for group in optimizer.param_groups:
            _set_group_value(group, "lr", group["initial_lr"])
        self.recursive_undo()
        idx = bisect.bisect_right(milestones, 0)
        schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched=None):
        """Take one epoch back from every (nested) scheduler."""
        scheds = self if sched is None else sched
        if hasattr(scheds, "_schedulers"):
            for s in scheds._schedulers:
                self.recursive_undo(s)
        elif hasattr(scheds, "last_epoch"):
            scheds.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite, LRScheduler):
    """Step every scheduler in ``schedulers`` at each ``step()``, so their
    factors multiply.

    >>> import ampc
    >>> import ampc.optim.lr_scheduler as S
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = S.ChainedScheduler([S.ConstantLR(opt, 0.5, total_iters=9),
    ...                         S.ExponentialLR(opt, 0.5)])
    >>> opt.step(); s.step(); s.get_last_lr()
    [0.25]
    """

    def __init__(self, schedulers, optimizer=None):
        self.optimizer = _check_schedulers(self, optimizer, schedulers,
                                           " to be chained")
        self._schedulers = schedulers
        self._last_lr = _group_values(schedulers[-1].optimizer, "lr")

    def step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rates by ``factor`` once ``step(metric)`` has seen no
    improvement for more than ``patience`` epochs (``mode`` "min" or
    "max", improvement beyond ``threshold``, relative or absolute), then
    wait ``cooldown`` epochs; never below ``min_lr`` (one value or one per
    group), and not when the change would be ``eps`` or less.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = ampc.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    >>> for loss in [1.0, 1.0, 1.0]:
    ...     s.step(loss)
    >>> s.get_last_lr()
    [0.1]
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10,
                 threshold=1e-4, threshold_mode="rel", cooldown=0, min_lr=0,
                 eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _group_values(optimizer, "lr")
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        """Record this epoch's ``metrics`` (a number or one-element
        tensor) and reduce the rates if it has plateaued."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning,
                          stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _group_values(self.optimizer, "lr")

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` "
                    f"({len(groups)}) differs from when `ReduceLROnPlateau` "
                    f"was initialized ({len(self.min_lrs)}), usually due to "
                    "a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the "
                    "`optimizer` param groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, min_lr)
            if old - new > self.eps:
                _set_group_value(group, "lr", new)

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError(
                "threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
