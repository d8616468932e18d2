"""``parameters_to_vector`` and ``vector_to_parameters``: a model's
parameters as one flat tensor and back, as PyTorch's.

>>> import ampc
>>> lin = ampc.nn.Linear(3, 2)
>>> v = ampc.nn.utils.parameters_to_vector(lin.parameters())
>>> v.shape
ampc.Size([8])
"""
from ...tensor import Tensor
from ..._creation import cat


def _same_device(param, device):
    if device is None:
        return param.device
    if param.device != device:
        raise TypeError(
            "Found two parameters on different devices, this is currently "
            "not supported.")
    return device


def parameters_to_vector(parameters):
    """The parameters, each flattened, concatenated in order (one new
    tensor; autograd sees through it)."""
    device, flat = None, []
    for param in parameters:
        device = _same_device(param, device)
        flat.append(param.view(-1))
    return cat(flat)


def vector_to_parameters(vec, parameters):
    """Point each parameter's data at its slice of ``vec`` (a view, as
    PyTorch's ``param.data = ...``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(
            f"expected torch.Tensor, but got: {type(vec).__name__}")
    device, pointer = None, 0
    for param in parameters:
        device = _same_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
