"""The decaying schedules: ``LambdaLR``, ``MultiplicativeLR``, ``StepLR``,
``MultiStepLR``, ``ConstantLR``, ``LinearLR``, ``ExponentialLR``,
``PolynomialLR`` and ``CosineAnnealingLR``.  Each ``get_lr`` is torch's
chainable (recursive) form and each ``_get_closed_form_lr`` its closed
form, the same formulas in the same order, so the rates match torch's
bit for bit over any number of steps."""
import bisect
import collections
import math

from ._lr_base import LRScheduler, _LambdaState, _group_values


class LambdaLR(_LambdaState, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch); ``lr_lambda`` is a function or
    a list of one per group.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = ampc.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)
    >>> opt.step(); s.step(); s.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self._init_lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        return [base * fn(self.last_epoch)
                for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """lr *= lr_lambda(epoch) at each step after the first.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = ampc.optim.lr_scheduler.MultiplicativeLR(opt, lambda e: 0.5)
    >>> opt.step(); s.step(); s.step(); s.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self._init_lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError("lr_lambda should be a function, but got "
                                f"{type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [g["lr"] * fn(self.last_epoch)
                for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


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
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the learning rates by ``gamma`` at each epoch in
    ``milestones`` (a milestone given twice multiplies twice).

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = ampc.optim.lr_scheduler.MultiStepLR(opt, [1, 3], gamma=0.5)
    >>> opt.step(); s.step(); s.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = collections.Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        if self.last_epoch not in self.milestones:
            return _group_values(self.optimizer, "lr")
        k = self.milestones[self.last_epoch]
        return [g["lr"] * self.gamma ** k for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        k = bisect.bisect_right(milestones, self.last_epoch)
        return [base * self.gamma ** k for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr * ``factor`` for the first ``total_iters`` epochs, then lr.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> ampc.optim.lr_scheduler.ConstantLR(opt, factor=0.5).get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5,
                 last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be "
                             "between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in groups]
        if self.last_epoch != self.total_iters:
            return _group_values(self.optimizer, "lr")
        return [g["lr"] * (1.0 / self.factor) for g in groups]

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters)
                        * (1 - self.factor)) for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the learning rates linearly from ``start_factor`` to
    ``end_factor`` over ``total_iters`` epochs.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = ampc.optim.lr_scheduler.LinearLR(opt, 0.5, total_iters=2)
    >>> opt.step(); s.step(); s.get_last_lr()
    [0.75]
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0,
                 total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than "
                "0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be "
                             "between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        d = self.end_factor - self.start_factor
        ratio = 1.0 + d / (self.total_iters * self.start_factor
                           + (self.last_epoch - 1) * d)
        return [g["lr"] * ratio for g in groups]

    def _get_closed_form_lr(self):
        d = self.end_factor - self.start_factor
        t = min(self.total_iters, self.last_epoch)
        return [base * (self.start_factor + d * t / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr *= ``gamma`` every epoch.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = ampc.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> opt.step(); s.step(); s.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - t / total_iters) ** power, then constant.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = ampc.optim.lr_scheduler.PolynomialLR(opt, total_iters=4)
    >>> opt.step(); s.step(); s.get_last_lr()
    [0.75]
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        t, T = self.last_epoch, self.total_iters
        decay = ((1.0 - t / T) / (1.0 - (t - 1) / T)) ** self.power
        return [g["lr"] * decay for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        t = min(self.total_iters, self.last_epoch)
        return [base * (1.0 - t / self.total_iters) ** self.power
                for base in self.base_lrs]


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
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
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
