"""Learning-rate schedules over an ``ampc.optim`` optimiser, PyTorch's
(torch 2.13): the same constructors, defaults, errors, chainable and
closed forms, state dicts and the warning when ``scheduler.step()`` runs
before ``optimizer.step()``.

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
# EPOCH_DEPRECATION_WARNING and _LRScheduler: names of torch's module too
from ._lr_base import (EPOCH_DEPRECATION_WARNING, LRScheduler,  # noqa: F401
                       _LRScheduler)
from ._lr_compose import ChainedScheduler, ReduceLROnPlateau, SequentialLR
from ._lr_cycles import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from ._lr_decay import (ConstantLR, CosineAnnealingLR, ExponentialLR,
                        LambdaLR, LinearLR, MultiplicativeLR, MultiStepLR,
                        PolynomialLR, StepLR)

__all__ = [
    "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
    "LinearLR", "ExponentialLR", "SequentialLR", "CosineAnnealingLR",
    "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
    "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR",
    "LRScheduler",
]
