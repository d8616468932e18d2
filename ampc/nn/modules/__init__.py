"""The layer classes of ``ampc.nn`` (re-exported there)."""
from .module import Module, _IncompatibleKeys
from .container import Sequential, ModuleList
from .linear import Linear, Identity
from .embedding import Embedding
from .conv import Conv2d
from .activation import (ReLU, Sigmoid, Tanh, GELU, SiLU, LeakyReLU, Softmax,
                         LogSoftmax, ReLU6, Hardtanh, ELU, SELU, CELU,
                         Softplus, Hardsigmoid, Hardswish, Softsign, Mish,
                         LogSigmoid)
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .flatten import Flatten
from .dropout import Dropout
from .loss import (CrossEntropyLoss, NLLLoss, MSELoss, BCEWithLogitsLoss,
                   L1Loss, SmoothL1Loss, HuberLoss, BCELoss, KLDivLoss)
from .batchnorm import BatchNorm1d, BatchNorm2d
from .normalization import LayerNorm
from .distance import CosineSimilarity, PairwiseDistance

__all__ = [
    "Module", "Sequential", "ModuleList", "Linear", "Identity", "Embedding",
    "Conv2d",
    "ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "LeakyReLU", "Softmax",
    "LogSoftmax", "ReLU6", "Hardtanh", "ELU", "SELU", "CELU", "Softplus",
    "Hardsigmoid", "Hardswish", "Softsign", "Mish", "LogSigmoid",
    "MaxPool2d",
    "AvgPool2d", "AdaptiveAvgPool2d",
    "Flatten", "Dropout",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "BCEWithLogitsLoss",
    "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "KLDivLoss",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "_IncompatibleKeys",
    "CosineSimilarity", "PairwiseDistance",
]
