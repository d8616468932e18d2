"""The cyclic schedules: ``CosineAnnealingWarmRestarts`` (SGDR),
``OneCycleLR`` and ``CyclicLR`` (both with momentum or Adam's beta1
cycled against the rate), torch's formulas and state."""
import functools
import math
import types

from ._lr_base import LRScheduler, _format_param, _set_group_value
from .optimizer import Optimizer


def _set_momentum(group, use_beta1, value):
    """The group's momentum, or its beta1 (Adam's betas[0])."""
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _check_cycle_momentum(optimizer):
    """True when the optimiser cycles beta1 (it has betas), False for
    momentum; torch's error when it has neither."""
    if "momentum" not in optimizer.defaults and \
            "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with "
                         "`cycle_momentum` option enabled")
    return "betas" in optimizer.defaults


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the initial rate to ``eta_min`` over ``T_i``
    epochs, then a restart, ``T_i`` growing by ``T_mult`` each cycle
    (``T_0`` the first).  ``step(epoch)`` accepts a fractional epoch (call
    it once per batch with ``epoch + i / iters``).

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0)
    >>> s = ampc.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> opt.step(); s.step(); s.get_last_lr()
    [0.5]
    >>> s.step(); s.get_last_lr()
    [1.0]
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0,
                 last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(
                f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(
                f"Expected float or int eta_min, but got {eta_min} of type "
                f"{type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr()
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch=None):
        """Advance one epoch, or go to ``epoch`` (a float allowed); as
        torch, neither form warns."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(
                    f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    # the cycle holding epoch: T_0 (T_mult^n - 1) /
                    # (T_mult - 1) <= epoch
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1)
                                     + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) \
                        / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._write_lrs(values)


_PHASE_KEYS = ("end_step", "start_lr", "end_lr", "start_momentum",
               "end_momentum")


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the rate rises from max_lr / ``div_factor`` to
    ``max_lr`` over the first ``pct_start`` of ``total_steps`` (or
    ``epochs * steps_per_epoch``), then anneals to initial_lr /
    ``final_div_factor`` (``three_phase``: back to the initial rate first),
    by a cosine or linearly; with ``cycle_momentum`` the momentum (SGD) or
    beta1 (Adam) moves the other way between ``max_momentum`` and
    ``base_momentum``.  Step it once per batch.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=0.1,
    ...                      momentum=0.9)
    >>> s = ampc.optim.lr_scheduler.OneCycleLR(opt, 1.0, total_steps=10)
    >>> round(s.get_last_lr()[0], 6), opt.param_groups[0]["momentum"]
    (0.04, 0.95)
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None,
                 steps_per_epoch=None, pct_start=0.3, anneal_strategy="cos",
                 cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError("Expected positive integer total_steps, but "
                                 f"got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(
                    f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError("Expected positive integer steps_per_epoch, "
                                 f"but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs "
                             "AND steps_per_epoch)")
        up = float(pct_start * self.total_steps) - 1
        last = self.total_steps - 1
        if three_phase:
            phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * self.total_steps) - 2, "max_lr",
                 "initial_lr", "base_momentum", "max_momentum"),
                (last, "initial_lr", "min_lr", "max_momentum",
                 "max_momentum")]
        else:
            phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (last, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        self._schedule_phases = [dict(zip(_PHASE_KEYS, p)) for p in phases]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError("Expected float between 0 and 1 pct_start, but "
                             f"got {pct_start}")
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or "
                             f"'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _check_cycle_momentum(optimizer)
            maxs = _format_param("max_momentum", optimizer, max_momentum)
            bases = _format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m, b, group in zip(maxs, bases, optimizer.param_groups):
                    self._set_momentum(group, m)
                    group["max_momentum"] = m
                    group["base_momentum"] = b
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        _set_momentum(group, self.use_beta1, value)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        self._warn_get_lr()
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"Tried to step {step} times. The specified number of total "
                f"steps is {self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == last:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]],
                                            group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(
                            group[phase["start_momentum"]],
                            group[phase["end_momentum"]], pct))
                    break
                start = end
        return lrs


class CyclicLR(LRScheduler):
    """The cyclical learning-rate policy (Smith, 2017): each group's rate
    moves from ``base_lr`` up to ``max_lr`` over ``step_size_up`` steps and
    back over ``step_size_down`` (default: the same), the amplitude scaled
    by ``mode`` ('triangular': 1; 'triangular2': halved each cycle;
    'exp_range': ``gamma ** step``) or by ``scale_fn`` of the cycle number
    or the step (``scale_mode`` 'cycle' or 'iterations').  With
    ``cycle_momentum`` the momentum (SGD, RMSprop) or beta1 (Adam) moves
    the other way, from ``max_momentum`` down to ``base_momentum``.  Step
    it once per batch.  torch's formulas, in the same float expressions, so
    rates and momenta equal torch's bit for bit.

    >>> import ampc
    >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=1.0,
    ...                      momentum=0.9)
    >>> s = ampc.optim.lr_scheduler.CyclicLR(opt, 0.1, 1.0, step_size_up=2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     opt.step()
    ...     s.step()
    ...     lrs.append(round(s.get_last_lr()[0], 6))
    >>> lrs, opt.param_groups[0]["momentum"]
    ([0.55, 1.0, 0.55, 0.1], 0.9)
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000,
                 step_size_down=None, mode="triangular", gamma=1.0,
                 scale_fn=None, scale_mode="cycle", cycle_momentum=True,
                 base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_group_value(group, "lr", lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) \
            if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ["triangular", "triangular2", "exp_range"] and \
                scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _check_cycle_momentum(optimizer)
            self.base_momentums = _format_param("base_momentum", optimizer,
                                                base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer,
                                               max_momentum)
            if last_epoch == -1:
                for m, b, group in zip(self.max_momentums,
                                       self.base_momentums,
                                       optimizer.param_groups):
                    _set_momentum(group, self.use_beta1, m)
                    group["max_momentum"] = m
                    group["base_momentum"] = b
        super().__init__(optimizer, last_epoch)
        # as torch: the constructor's step used the groups' initial_lr
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        """The built-in scale of ``mode`` (and its scale_mode), unless a
        ``scale_fn`` was given."""
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = self._triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = self._triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = functools.partial(self._exp_range_scale_fn,
                                                   self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        """The amplitude's scale at x (a cycle number or a step)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    @staticmethod
    def _triangular_scale_fn(x):
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x):
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma, x):
        return gamma ** x

    def get_lr(self):
        """The rates at ``last_epoch`` (the batch index); with
        ``cycle_momentum``, also writes the groups' momenta."""
        self._warn_get_lr()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = []
        for base_lr, max_lr in zip(self.base_lrs, self.max_lrs):
            base_height = (max_lr - base_lr) * scale_factor
            lrs.append(base_lr + base_height * self.scale_fn(at))
        if self.cycle_momentum:
            for group, base, top in zip(self.optimizer.param_groups,
                                        self.base_momentums,
                                        self.max_momentums):
                base_height = (top - base) * scale_factor
                _set_momentum(group, self.use_beta1,
                              top - base_height * self.scale_fn(at))
        return lrs

    def state_dict(self):
        """torch's: everything but the optimiser and the built-in scale
        function; a ``scale_fn`` that is a plain function is not saved
        (None), a callable object's ``__dict__`` is."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict):
        """Restore ``state_dict()`` (the scale_fn given to the constructor
        is kept, its saved attributes restored)."""
        fn = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()
