"""``ampc.nn.utils``: utilities over a model's parameters (gradient
clipping: ``clip_grad_norm_``, ``clip_grad_value_``)."""
from .clip_grad import (  # noqa: F401
    clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm,
    clip_grads_with_norm_,
)

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_",
           "get_total_norm", "clip_grads_with_norm_"]
