"""Loss layers: ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``,
``BCEWithLogitsLoss``, ``L1Loss``, ``SmoothL1Loss``, ``HuberLoss``,
``BCELoss``, ``KLDivLoss``.

>>> import ampc
>>> crit = ampc.nn.CrossEntropyLoss()
>>> crit(ampc.zeros(2, 4), ampc.tensor([0, 3]))
tensor(1.3863)
"""
from .. import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "BCEWithLogitsLoss",
           "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "KLDivLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = F._reduction(type(self).__name__, size_average,
                                     reduce, reduction)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        # a buffer: it moves and casts with the module, as in PyTorch
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """Cross-entropy of logits (N, C) against class indices (or class
    probabilities), with optional class ``weight``, ``ignore_index``,
    ``reduction`` ('mean', 'sum', 'none') and ``label_smoothing``.

    >>> import ampc
    >>> ampc.nn.CrossEntropyLoss(label_smoothing=0.1)
    CrossEntropyLoss()
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100,
                 reduce=None, reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight,
                               ignore_index=self.ignore_index,
                               reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities (N, C) for class
    indices, with optional class ``weight`` and ``ignore_index``.

    >>> import ampc
    >>> ampc.nn.NLLLoss()(ampc.tensor([[-0.5, -1.0]]), ampc.tensor([0]))
    tensor(0.5000)
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100,
                 reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight,
                          ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """Mean (or summed, or element-wise) squared error.

    >>> import ampc
    >>> ampc.nn.MSELoss()(ampc.ones(3), ampc.zeros(3))
    tensor(1.)
    """

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of ``sigmoid(input)`` against ``target``, stable
    for any logit, with optional element ``weight`` and per-class
    ``pos_weight`` (buffers: they move and cast with the module).

    >>> import ampc
    >>> ampc.nn.BCEWithLogitsLoss()(ampc.zeros(3), ampc.ones(3))
    tensor(0.6931)
    """

    def __init__(self, weight=None, size_average=None, reduce=None,
                 reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction,
            pos_weight=self.pos_weight)


class L1Loss(_Loss):
    """Mean (or summed, or element-wise) absolute error.

    >>> import ampc
    >>> ampc.nn.L1Loss()(ampc.ones(3), ampc.zeros(3))
    tensor(1.)
    """

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Smooth L1 loss: quadratic below ``beta``, linear above (beta = 0 is
    the L1 loss).

    >>> import ampc
    >>> ampc.nn.SmoothL1Loss(beta=0.5)(ampc.ones(3), ampc.zeros(3))
    tensor(0.7500)
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean",
                 beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction,
                                beta=self.beta)


class HuberLoss(_Loss):
    """Huber loss: quadratic below ``delta``, ``delta``-scaled linear above.

    >>> import ampc
    >>> ampc.nn.HuberLoss(delta=0.5)(ampc.ones(3), ampc.zeros(3))
    tensor(0.3750)
    """

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction,
                            delta=self.delta)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities, with an optional element
    ``weight`` (a buffer); refused under CUDA autocast, as in PyTorch.

    >>> import ampc
    >>> ampc.nn.BCELoss()(ampc.tensor([0.5]), ampc.ones(1))
    tensor(0.6931)
    """

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of log-probabilities from a target
    (probabilities, or log-probabilities when ``log_target``); use
    ``reduction='batchmean'`` for the divergence itself.

    >>> import ampc
    >>> ampc.nn.KLDivLoss(reduction="batchmean", log_target=True)
    KLDivLoss()
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean",
                 log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction,
                        log_target=self.log_target)
