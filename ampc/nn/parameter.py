"""``nn.Parameter``: a tensor that a ``Module`` registers as one of its
parameters when it is assigned as an attribute.

>>> import ampc
>>> from ampc.nn import Parameter
>>> p = Parameter(ampc.zeros(2))
>>> p.requires_grad, p.is_leaf
(True, True)
"""
from .. import _C
from .._creation import empty
from ..tensor import Tensor

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A leaf tensor that is a module parameter.  It shares ``data``'s
    storage and requires grad unless told otherwise.

    >>> import ampc
    >>> lin = ampc.nn.Linear(3, 2)
    >>> isinstance(lin.weight, ampc.nn.Parameter)
    True
    >>> ampc.nn.Parameter(ampc.ones(2), requires_grad=False).requires_grad
    False
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, _C.TensorBase):
            raise TypeError(
                "Parameter(): argument 'data' must be a Tensor, but got "
                f"{type(data).__name__}")
        if requires_grad and not data.dtype.is_floating_point:
            raise RuntimeError(
                "Only Tensors of floating point dtype can require gradients, "
                f"got a Parameter of dtype {data.dtype!r}")
        return Tensor._make_subclass(cls, data, bool(requires_grad))

    def __init__(self, data=None, requires_grad=True):
        pass        # all done by __new__ (Tensor has no __init__ to run)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        rebuild, args = super().__reduce_ex__(protocol)
        return (_rebuild_parameter, (rebuild, args, self.requires_grad))


def _rebuild_parameter(rebuild, args, requires_grad):
    return Parameter(rebuild(*args), requires_grad)
