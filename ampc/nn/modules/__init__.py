"""The layer classes of ``ampc.nn`` (re-exported there)."""
from .module import Module, _IncompatibleKeys
from .container import Sequential, ModuleList
from .container_dict import ModuleDict, ParameterList, ParameterDict
from .linear import Linear, Identity
from .embedding import Embedding, EmbeddingBag
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .activation import (ReLU, Sigmoid, Tanh, GELU, SiLU, LeakyReLU, Softmax,
                         LogSoftmax, ReLU6, Hardtanh, ELU, SELU, CELU,
                         Softplus, Hardsigmoid, Hardswish, Softsign, Mish,
                         LogSigmoid, PReLU)
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d,
                      AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool2d,
                      MaxPool1d, MaxPool2d)
from .flatten import Flatten, Unflatten
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .loss import (CrossEntropyLoss, NLLLoss, MSELoss, BCEWithLogitsLoss,
                   L1Loss, SmoothL1Loss, HuberLoss, BCELoss, KLDivLoss)
from .batchnorm import BatchNorm1d, BatchNorm2d
from .normalization import GroupNorm, LayerNorm
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from .distance import CosineSimilarity, PairwiseDistance
from .normalization import LayerNorm
from .attention import MultiheadAttention
from .transformer import TransformerEncoder, TransformerEncoderLayer
from .transformer_decoder import (Transformer, TransformerDecoder,
                                  TransformerDecoderLayer)
from .rnn import (RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell,
                  GRUCell)

__all__ = [
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
    "ParameterDict", "Linear", "Identity", "Embedding", "EmbeddingBag",
    "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
    "ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "LeakyReLU", "Softmax",
    "LogSoftmax", "ReLU6", "Hardtanh", "ELU", "SELU", "CELU", "Softplus",
    "Hardsigmoid", "Hardswish", "Softsign", "Mish", "LogSigmoid", "PReLU",
    "MaxPool2d",
    "AvgPool2d", "AdaptiveAvgPool2d", "MaxPool1d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "AdaptiveAvgPool1d",
    "Flatten", "Unflatten", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "BCEWithLogitsLoss",
    "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "KLDivLoss",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "_IncompatibleKeys",
    "Conv1d", "GroupNorm", "Upsample", "UpsamplingNearest2d",
    "UpsamplingBilinear2d", "CosineSimilarity", "PairwiseDistance",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
    "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell",
    "GRUCell",
]
