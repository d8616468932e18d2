"""A module's backward hooks, PyTorch's ``register_full_backward_pre_hook``
and ``register_full_backward_hook``: ``hook(module, grad_output)`` runs when
the gradient of the module's output is known (and may replace it),
``hook(module, grad_input, grad_output)`` when the gradients of its tensor
arguments are (and may replace those).

As in PyTorch, ``call_with_hooks`` passes the module's tensor arguments
that require grad, and returns its output, through identity view nodes
(``BackwardHookFunctionBackward``): the output's node runs the pre-hooks,
the arguments' node the hooks.  ampc's nodes have one differentiable
output each, so a hooked module may take at most one argument that
requires grad and must return one tensor (or a tuple holding one); others
raise a clear error at the forward.

>>> import ampc
>>> from ampc import nn
>>> m = nn.Linear(3, 2)
>>> seen = []
>>> h = m.register_full_backward_hook(
...     lambda mod, gin, gout: seen.append((gin[0].shape, gout[0].shape)))
>>> m(ampc.ones(4, 3, requires_grad=True)).sum().backward()
>>> seen
[(ampc.Size([4, 3]), ampc.Size([4, 2]))]
"""
import warnings

from ...autograd import _mode
from ...autograd.function import _ViewFunction
from ...tensor import Tensor

__all__ = ["BackwardHookFunction", "setup_input", "setup_output"]


class BackwardHookFunction(_ViewFunction):
    """An alias of its input whose backward hands the gradient to
    ``call(g)`` and passes on what that returns."""

    node_name = "BackwardHookFunctionBackward"

    @staticmethod
    def forward(ctx, a, call):
        ctx.call = call
        return a._view(tuple(a.shape))

    @staticmethod
    def backward(ctx, g):
        return ctx.call(g), None


def _checked(what, result, n):
    """A hook's result: None, or a tuple of n gradients."""
    if result is None:
        return None
    if not isinstance(result, (tuple, list)):
        raise RuntimeError(
            f"backward hook must return None or a tuple of {n} grad_{what} "
            f"(one per {'argument' if what == 'input' else 'output'}), got "
            f"{type(result).__name__}")
    if len(result) != n:
        raise RuntimeError(
            f"backward hook returned an invalid number of grad_{what} "
            f"({len(result)} given, expected {n})")
    return tuple(result)


class _Call:
    """One forward call's backward-hook state: the hooks as they were at
    the call, the argument count, the position of the argument that
    requires grad (None when none does) and the output gradient once
    known."""

    def __init__(self, module, pre, full, n_args, at):
        self.module, self.pre, self.full = module, pre, full
        self.n_args, self.at = n_args, at
        self.grad_output = None

    def on_output_grad(self, g):
        grad_output = (g,)
        for hook in self.pre:
            new = _checked("output", hook(self.module, grad_output), 1)
            if new is not None:
                grad_output = new
        self.grad_output = grad_output
        if self.at is None and self.full:
            # no argument requires grad: the hooks run now, with None
            warnings.warn(
                "Full backward hook is firing when gradients are computed "
                "with respect to module outputs since no inputs require "
                "gradients.")
            none = (None,) * self.n_args
            for hook in self.full:
                res = hook(self.module, none, grad_output)
                if res is not None and any(r is not None for r in res):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires "
                        "gradient should always return None or None for "
                        "all gradients.")
        return grad_output[0]

    def on_input_grad(self, g):
        grad_input = tuple(g if k == self.at else None
                           for k in range(self.n_args))
        for hook in self.full:
            new = _checked("input", hook(self.module, grad_input,
                                         self.grad_output), self.n_args)
            if new is not None:
                grad_input = new
        return grad_input[self.at]


def _one_tensor(output):
    """The position of the one tensor in output (None: output is one);
    else RuntimeError."""
    if isinstance(output, Tensor):
        return None
    found = [k for k, o in enumerate(output) if isinstance(o, Tensor)] \
        if isinstance(output, (tuple, list)) else []
    if len(found) != 1:
        raise RuntimeError(
            "module backward hooks: ampc supports a module that returns one "
            f"tensor (or a tuple or list holding one), not {output!r:.80}")
    return found[0]


def setup_input(module, hooks, args):
    """Before ``forward``: (the call's state, args with the tensor argument
    that requires grad passed through a hook node); the state is None when
    grad mode is off (nothing to hook)."""
    if not _mode.enabled:
        return None, args
    wanted = [k for k, a in enumerate(args)
              if isinstance(a, Tensor) and a.requires_grad]
    if len(wanted) > 1:
        raise RuntimeError(
            f"module backward hooks: {type(module).__name__} got "
            f"{len(wanted)} tensor arguments that require grad; ampc "
            "supports hooks on modules with at most one")
    call = _Call(module, tuple(hooks.backward_pre.values()),
                 tuple(hooks.backward.values()), len(args),
                 wanted[0] if wanted else None)
    if wanted:
        args = list(args)
        args[call.at] = BackwardHookFunction.apply(args[call.at],
                                                   call.on_input_grad)
        args = tuple(args)
    return call, args


def setup_output(call, output):
    """After the forward hooks: output with its tensor passed through a
    hook node (unchanged when it does not require grad)."""
    at = _one_tensor(output)
    out = output if at is None else output[at]
    if call is None or not out.requires_grad:
        return output
    out = BackwardHookFunction.apply(out, call.on_output_grad)
    if at is None:
        return out
    rebuilt = list(output)
    rebuilt[at] = out
    if isinstance(output, list):
        return rebuilt
    if hasattr(output, "_fields"):          # a named tuple
        return type(output)(*rebuilt)
    return type(output)(rebuilt)
