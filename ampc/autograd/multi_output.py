"""A user's Function whose forward returns a tuple.

As in PyTorch, every float tensor of the tuple not marked with
``ctx.mark_non_differentiable`` is differentiable, and ``backward`` gets
one argument per element of the tuple: the output's gradient, zeros for an
output that got none (or a non-differentiable tensor), None for an element
that is not a tensor; after ``ctx.set_materialize_grads(False)``, None
instead of zeros.

ampc's engine hands each node one incoming gradient, so each differentiable
output has a small node of its own (``OutputSlot``, the output's
``grad_fn``) in front of the Function's node: it runs that output's hooks,
``retain_grad()`` and ``autograd.grad()`` capture as any node does, files
the gradient with the Function's node and passes on a 0-dim marker.  The
engine runs the Function's node once, after every output node that the
backward reaches.

>>> import ampc
>>> class SplitScale(ampc.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         return x * 2, x * 3
...     @staticmethod
...     def backward(ctx, ga, gb):
...         return ga * 2 + gb * 3
>>> x = ampc.ones(2, requires_grad=True)
>>> a, b = SplitScale.apply(x)
>>> (a.sum() + b.sum()).backward()
>>> x.grad
tensor([5., 5.])
"""
import weakref

from .. import _C
from .function import (_FREED_MSG, _TB, BackwardNode, _detach_saved_outputs,
                       _dev_str, _own_identity, _record_edges, _sequence,
                       _storage_start)

__all__ = ["OutputSlot", "attach_outputs", "forget_slot_grads", "output_node",
           "take_slot_grads"]

_marker = None


def _marker_tensor():
    """The 0-dim float32 that an output's node passes to the Function's
    node (the engine sums what several pass on; nobody reads it)."""
    global _marker
    if _marker is None:
        _marker = _C.full((), 0.0, _C.float32, "cpu")
    return _marker


class OutputSlot(BackwardNode):
    """The node of output ``_slot`` of the Function node ``_owner``;
    ``_shares_input``: the output is a view of an argument, which an
    in-place op may not change (PyTorch's rule for functions returning
    several views)."""

    _shares_input = False

    def name(self):
        return self._owner.name()

    def __repr__(self):
        return f"<{self.name()} object at {id(self):#x}>"

    def _apply(self, grad, engine_state, create_graph=False):
        if self._released or self._owner._released:
            raise RuntimeError(_FREED_MSG)
        grad = self._incoming(grad, engine_state, create_graph)
        if grad is None:
            return ()
        # a second node of the same output (a saved output's, after its
        # own died) adds to what the first filed
        slots = self._owner._slot_grads
        prev = slots[self._slot]
        if prev is not None:
            grad = prev + grad if create_graph else \
                _C.binary("add", prev, grad)
        slots[self._slot] = grad
        return (_marker_tensor(),)


def output_node(owner, slot):
    """The node of output ``slot`` of ``owner``: the output's own while it
    lives (a saved output unpacked under create_graph=True gets it, hooks
    and retain_grad included, as in PyTorch), else a new one."""
    ref = owner._out_nodes.get(slot)
    node = ref() if ref is not None else None
    if node is not None:
        return node
    node = OutputSlot()
    node._owner = owner
    node._slot = slot
    marker = _marker_tensor()
    node.next_functions = ((owner, 0),)
    node._metas = ((marker.shape, marker.dtype),)
    node.needs_input_grad = (True,)
    node._seq = next(_sequence)
    owner._out_nodes[slot] = weakref.ref(node)
    return node


def attach_outputs(ctx, outs, diff, args):
    """Make outs[i] for i in diff differentiable outputs of ctx (in place
    in the list outs), each with a node of its own."""
    for i in diff:
        outs[i] = _own_identity(outs[i], args)
    _record_edges(ctx, args)
    _detach_saved_outputs(ctx, [o if i in diff else None
                                for i, o in enumerate(outs)])
    ctx._slot_grads = [None] * len(outs)
    ctx._out_nodes = {}
    ctx._out_metas = tuple(
        (tuple(o.shape), o.dtype, _dev_str(o)) if isinstance(o, _TB)
        else None for o in outs)
    for i in diff:
        outs[i].requires_grad = True
        outs[i].grad_fn = output_node(ctx, i)
        if any(isinstance(a, _TB) and _storage_start(a) ==
               _storage_start(outs[i]) for a in args):
            outs[i].grad_fn._shares_input = True


def take_slot_grads(ctx):
    """backward's arguments: the gradients the output nodes filed, zeros
    (materialised) or None for the rest; the slots emptied for the next
    backward."""
    grads = ctx._slot_grads
    ctx._slot_grads = [None] * len(grads)
    if ctx._materialize:
        grads = [_C.full(meta[0], 0, meta[1], meta[2])
                 if g is None and meta is not None else g
                 for g, meta in zip(grads, ctx._out_metas)]
    return tuple(grads)


def forget_slot_grads(nodes):
    """After a backward that raised: the gradients that the output nodes
    among ``nodes`` filed, dropped (the next backward must not see them)."""
    for node in nodes:
        owner = getattr(node, "_owner", None)
        if owner is not None and owner._slot_grads is not None:
            owner._slot_grads = [None] * len(owner._slot_grads)
