"""Reverse-mode autograd: grad mode, ``Function``, the backward engine, and
one small ``Function`` per differentiable tensor op.

The shape is tinygrad's (``mlops.py``) with PyTorch's names: each op is a
``Function`` subclass whose ``forward`` makes one ``_C`` call and whose
``backward`` makes a few; ``Function.apply`` runs ``forward`` and, when grad
mode is on and an input requires grad, records a node that the output's
``grad_fn`` holds.  C never walks the graph.

>>> import ampc
>>> x = ampc.tensor([1.0, 2.0], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad
tensor([2., 4.])

Design notes:

* The node *is* the ``ctx``: an instance of ``<Op>Backward0``, a class made
  for each ``Function`` subclass, so ``grad_fn`` reprs read like PyTorch's.
* The engine (``_run_backward``) sorts the graph with an iterative DFS (no
  recursion limit), then runs nodes in dependency order, adding up the
  gradients that reach a node.  Before a gradient reaches an input it is
  summed back to the input's shape (broadcasting) and cast to the input's
  dtype, in one place for all ops, as PyTorch's ``validate_outputs`` does.
  This is what makes a cast's gradient flow back in the source dtype.
* ``.grad`` of a leaf is a fresh tensor on the first accumulation and is
  then accumulated *in place* (as PyTorch does when not building a graph):
  a reference held to ``p.grad`` sees later backward passes.
* After backward (without ``retain_graph=True``) every node that ran is
  released: its saved tensors are dropped, and running it again raises
  PyTorch's "Trying to backward through the graph a second time" error.
  NOTE: this is slightly stricter than PyTorch, which only complains when a
  freed node had saved tensors (so it allows ``(x + 1).sum()`` twice).
* In-place ops record ``_version`` of every saved tensor; backward checks it.
* Only one output of a ``Function`` is differentiable (the first floating
  point tensor it returns); others (argmax indices) never require grad.
* ``create_graph=True`` (higher-order gradients) runs the differentiable
  formulas of ``higher_order.py``.
"""
from .grad_mode import (  # noqa: F401
    _mode, enable_grad, inference_mode, is_grad_enabled, no_grad,
    set_grad_enabled,
)
from .function import (  # noqa: F401
    AccumulateGrad, BackwardNode, Function, Node, _dev_str, _type_str,
    autocast_listed,
)
from .engine import backward, grad  # noqa: F401
from .functions import (  # noqa: F401
    Abs, Add, Cast, Ceil, Clamp, Clone, Cos, Div, Erf, Erfc, Exp, Expm1,
    Floor, Frac, Log, Log1p, Log2, Log10, MaskedFill, Maximum, Minimum, Mul,
    Neg, Pow, Reciprocal, Relu, Round, Rsqrt, Sigmoid, Sign, Sin, Sqrt, Sub,
    Tanh, ToDevice, Trunc, Where,
)
from .math_functions import (  # noqa: F401
    Acos, Acosh, Asin, Asinh, Atan, Atan2, Atanh, Cosh, Fmod, Remainder,
    Sinh, Tan,
)
from .views import (  # noqa: F401
    Expand, Flatten, GetItem, Permute, Reshape, Squeeze, Transpose,
    Unsqueeze, View,
)
from .reductions import (  # noqa: F401
    Cat, Contiguous, MaxAll, MaxDim, Mean, MinAll, MinDim, Stack, Sum,
)
from .inplace import (  # noqa: F401
    CopyFrom, Overwrite, SetItem, SetItemOutOfPlace, _check_inplace,
    _rebase, inplace,
)
from .indexing import (  # noqa: F401
    IndexAdd, IndexGather, IndexPut, IndexScatterAdd,
)
from .scatter import DelayedError, ScatterReduce  # noqa: F401

__all__ = [
    "Function", "backward", "grad", "no_grad", "enable_grad",
    "set_grad_enabled", "is_grad_enabled", "inference_mode",
]
