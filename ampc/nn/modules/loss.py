"""Loss layers: ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``,
``BCEWithLogitsLoss``.

>>> import ampc
>>> crit = ampc.nn.CrossEntropyLoss()
>>> crit(ampc.zeros(2, 4), ampc.tensor([0, 3]))
tensor(1.3863)
"""
from .. import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "BCEWithLogitsLoss"]


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
