"""``ampc.nn``: modules, parameters, layers and losses with PyTorch's names
and semantics (``import ampc.nn as nn``).

>>> import ampc
>>> import ampc.nn as nn
>>> model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
...                       nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 10))
>>> model(ampc.randn(2, 3, 8, 8)).shape
ampc.Size([2, 10])
"""
from .parameter import Parameter
from .modules import (
    Module, Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict, Linear, Identity, Embedding, Conv2d, ConvTranspose2d,
    ReLU, Sigmoid, Tanh, GELU, SiLU, LeakyReLU, Softmax, LogSoftmax,
    ReLU6, Hardtanh, ELU, SELU, CELU, Softplus, Hardsigmoid, Hardswish,
    Softsign, Mish, LogSigmoid, PReLU, Unflatten, Dropout1d, Dropout2d,
    Dropout3d,
    MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Dropout,
    CrossEntropyLoss, NLLLoss, MSELoss, BCEWithLogitsLoss, L1Loss,
    SmoothL1Loss, HuberLoss, BCELoss, KLDivLoss, BatchNorm1d,
    BatchNorm2d, LayerNorm,
)
from .modules import (RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell,
                      LSTMCell, GRUCell)
from . import functional
from . import init
from . import utils

__all__ = [
    "Parameter", "Module", "Sequential", "ModuleList", "ModuleDict",
    "ParameterList", "ParameterDict", "PReLU", "Unflatten", "Dropout1d",
    "Dropout2d", "Dropout3d", "Linear", "Identity",
    "Embedding",
    "Conv2d", "ConvTranspose2d", "ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "LeakyReLU",
    "Softmax", "LogSoftmax", "ReLU6", "Hardtanh", "ELU", "SELU", "CELU",
    "Softplus", "Hardsigmoid", "Hardswish", "Softsign", "Mish", "LogSigmoid",
    "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Flatten",
    "Dropout", "CrossEntropyLoss", "NLLLoss", "MSELoss", "BCEWithLogitsLoss",
    "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "KLDivLoss",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "functional",
    "init", "utils",
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell",
    "GRUCell",
]
