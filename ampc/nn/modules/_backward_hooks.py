"""A module's backward hooks, PyTorch's ``register_full_backward_pre_hook``
and ``register_full_backward_hook``: ``hook(module, grad_output)`` runs when
the gradients of the module's outputs are known (and may replace them),
``hook(module, grad_input, grad_output)`` when the gradients of its
positional arguments are (and may replace those).

As in PyTorch, ``call_with_hooks`` passes the module's tensor arguments,
and returns its tensor outputs, through identity nodes
(``BackwardHookFunctionBackward``): the outputs' node runs the pre-hooks,
the arguments' node the hooks.  One tensor goes through a view node (so an
in-place op on it stays possible); several through one node with an
output per tensor (autograd/multi_output.py).  ``grad_output`` has an entry
per output (None for a non-tensor or an output that got no gradient),
``grad_input`` one per positional argument (None for a non-tensor; zeros
for a tensor that got no gradient, once several are hooked); the hooks run
only where a gradient came through the outputs.  A module that returns
neither a tensor nor a tuple is not hooked (PyTorch's warning).

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
from ...autograd.function import Function, _ViewFunction
from ...tensor import Tensor

__all__ = ["BackwardHookFunction", "BackwardHooksFunction", "setup_input",
           "setup_output"]


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


class BackwardHooksFunction(Function):
    """Aliases of several tensors (those that do not require grad pass
    unchanged) whose backward hands all their gradients to ``call(grads)``
    at once and passes on what that returns."""

    node_name = "BackwardHookFunctionBackward"
    _all_outputs_differentiable = True

    @staticmethod
    def forward(ctx, call, materialize, *tensors):
        ctx.call = call
        ctx.set_materialize_grads(materialize)
        ctx.mark_non_differentiable(*[t for t in tensors
                                      if not t.requires_grad])
        return tuple(t._view(tuple(t.shape)) if t.requires_grad else t
                     for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + tuple(ctx.call(grads))


def _through_hooks(call, tensors, materialize):
    """tensors through one hook node (one view node for one tensor)."""
    if len(tensors) == 1:
        return (BackwardHookFunction.apply(
            tensors[0], lambda g: call((g,))[0]),)
    return BackwardHooksFunction.apply(call, materialize, *tensors)


class _Call:
    """One forward call's backward-hook state: the hooks as they were at
    the call, the argument count, the positions of the tensor arguments
    hooked (None when none requires grad) and the output gradients once
    known."""

    def __init__(self, module, pre, full, n_args, hooked):
        self.module, self.pre, self.full = module, pre, full
        self.n_args, self.hooked = n_args, hooked
        self.n_outputs = 1
        self.outputs = (0,)
        self.grad_output = None

    def on_output_grads(self, grads):
        grad_output = [None] * self.n_outputs
        for k, g in zip(self.outputs, grads):
            grad_output[k] = g
        grad_output = tuple(grad_output)
        for hook in self.pre:
            new = _checked("output", hook(self.module, grad_output),
                           self.n_outputs)
            if new is not None:
                grad_output = new
        self.grad_output = grad_output
        if self.hooked is None and self.full:
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
        return tuple(grad_output[k] for k in self.outputs)

    def on_input_grads(self, grads):
        if self.grad_output is None:
            # no gradient came through the outputs (a graph that reaches
            # the arguments another way, or a second backward): as
            # PyTorch, the hooks do not run
            return grads
        grad_input = [None] * self.n_args
        for k, g in zip(self.hooked, grads):
            grad_input[k] = g
        grad_input = tuple(grad_input)
        for hook in self.full:
            new = _checked("input", hook(self.module, grad_input,
                                         self.grad_output), self.n_args)
            if new is not None:
                grad_input = new
        self.grad_output = None
        return tuple(grad_input[k] for k in self.hooked)


def setup_input(module, hooks, args):
    """Before ``forward``: (the call's state, args with the tensor
    arguments passed through a hook node when one requires grad); the state
    is None when grad mode is off (nothing to hook)."""
    if not _mode.enabled:
        return None, args
    tensors = [k for k, a in enumerate(args) if isinstance(a, Tensor)]
    wanted = any(args[k].requires_grad for k in tensors)
    if len(tensors) == 1 or not wanted:
        # (one tensor: only if it requires grad, as before)
        tensors = [k for k in tensors if args[k].requires_grad]
    call = _Call(module, tuple(hooks.backward_pre.values()),
                 tuple(hooks.backward.values()), len(args),
                 tuple(tensors) if tensors else None)
    if tensors:
        args = list(args)
        hooked = _through_hooks(call.on_input_grads,
                                [args[k] for k in tensors], True)
        for k, t in zip(tensors, hooked):
            args[k] = t
        args = tuple(args)
    return call, args


def setup_output(call, output):
    """After the forward hooks: output with its tensors passed through a
    hook node (unchanged when none requires grad)."""
    single = isinstance(output, Tensor)
    if not single and not isinstance(output, tuple):
        warnings.warn(
            "For backward hooks to be called, module output should be a "
            "Tensor or a tuple of Tensors but received "
            f"{type(output)}")
        return output
    items = [output] if single else list(output)
    at = [k for k, o in enumerate(items) if isinstance(o, Tensor)]
    if call is None or not any(items[k].requires_grad for k in at):
        return output
    call.n_outputs, call.outputs = len(items), tuple(at)
    for k, t in zip(at, _through_hooks(call.on_output_grads,
                                       [items[k] for k in at], False)):
        items[k] = t
    if single:
        return items[0]
    if hasattr(output, "_fields"):          # a named tuple
        return type(output)(*items)
    return type(output)(items)
