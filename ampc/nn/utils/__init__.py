"""``ampc.nn.utils``: utilities over a model's parameters (gradient
clipping: ``clip_grad_norm_``, ``clip_grad_value_``; flattening:
``parameters_to_vector``, ``vector_to_parameters``; ``rnn.pad_sequence``)."""
from .clip_grad import (  # noqa: F401
    clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm,
    clip_grads_with_norm_,
)
from . import rnn  # noqa: F401
from .convert_parameters import (  # noqa: F401
    parameters_to_vector, vector_to_parameters,
)

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_",
           "get_total_norm", "clip_grads_with_norm_", "parameters_to_vector",
           "vector_to_parameters", "rnn"]
