"""The graph's nodes and ``Function``, the base of every differentiable
op: ``apply`` records a node on the output when grad mode is on.  View
Functions and their fresh-node helper live here too, since attaching a node
needs them."""
import itertools
import math
import weakref

from .. import _C
from .grad_mode import _mode, no_grad

_TB = _C.TensorBase
_binary = _C.binary
_reduce = _C.reduce
_cast = _C.cast
_autocast_active = _C.autocast_active
_autocast_cast_args = _C.autocast_cast_args


# ----------------------------------------------------------------------------
# messages (PyTorch's words, so that users can search for them)

_FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access "
    "saved tensors after they have already been freed). Saved intermediate "
    "values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors "
    "after calling backward.")

_LEAF_INPLACE_MSG = (
    "a leaf Variable that requires grad is being used in an in-place "
    "operation.")

_VIEW_LEAF_INPLACE_MSG = (
    "a view of a leaf Variable that requires grad is being used in an "
    "in-place operation.")


def _type_str(t):
    """'ampc.FloatTensor'-style name used in PyTorch's autograd messages."""
    return {
        "float32": "FloatTensor", "float16": "HalfTensor",
        "bfloat16": "BFloat16Tensor", "int64": "LongTensor",
        "bool": "BoolTensor",
    }[t.dtype.name]


# ----------------------------------------------------------------------------
# nodes
class Node:
    """A node of the backward graph (what ``tensor.grad_fn`` holds).

    ``next_functions`` is a tuple of ``(node or None, 0)``, one per input of
    the forward call, as in PyTorch.
    """

    _is_view = False

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    def register_hook(self, hook):
        raise NotImplementedError(
            "register_hook(): backward hooks are not supported by ampc")


class AccumulateGrad(Node):
    """The node that adds a gradient into a leaf tensor's ``.grad``."""

    next_functions = ()
    _metas = ()
    _seq = math.inf         # runs as soon as it is ready (as in PyTorch)

    def __init__(self, variable):
        self.variable = variable

    def _apply(self, grad, engine_state, owned=False, create_graph=False):
        """``owned``: the engine made ``grad`` itself (a cast or a sum) and
        holds it nowhere else, so it may become ``.grad`` as it is."""
        var = self.variable
        if var._tensor_hooks:
            grad = _call_tensor_hooks(var._tensor_hooks, grad)
            owned = False       # a hook may have kept it
        if engine_state is not None and engine_state.capture(self, grad):
            return ()
        if create_graph:
            _accumulate_graph(var, grad)
        else:
            _accumulate_into(var, grad, owned)
        if var._post_accumulate_hooks:
            for hook in tuple(var._post_accumulate_hooks.values()):
                hook(var)
        return ()


def _call_tensor_hooks(hooks, grad):
    """Run a tensor's ``register_hook`` hooks in order, each on the gradient
    the previous one returned (None keeps it); PyTorch's checks on what a
    hook returns."""
    for hook in tuple(hooks.values()):
        new = hook(grad)
        if new is None:
            continue
        if not isinstance(new, _TB):
            raise TypeError(
                f"expected Tensor or None (got {type(new).__name__}) from "
                f"hook '{getattr(hook, '__name__', hook)}'")
        if new.dtype != grad.dtype or _dev_str(new) != _dev_str(grad):
            raise RuntimeError(
                f"hook '{getattr(hook, '__name__', hook)}' has changed the "
                f"type of value (was {grad.dtype} on {_dev_str(grad)}, got "
                f"{new.dtype} on {_dev_str(new)})")
        if new.shape != grad.shape:
            raise RuntimeError(
                f"hook '{getattr(hook, '__name__', hook)}' has changed the "
                f"size of value (was {list(grad.shape)}, got "
                f"{list(new.shape)})")
        grad = new
    return grad


def _accumulate_into(t, g, owned=False):
    """t.grad += g, allocating a fresh contiguous tensor the first time
    (or adopting g, when the engine owns it and it fits)."""
    old = t.grad
    if old is None:
        if owned and g.dtype == t.dtype and g.shape == t.shape and \
                g.is_contiguous():
            t.grad = g      # as PyTorch steals a gradient nobody else holds
            return
        # a fresh copy: g may be shared with other nodes, or be a stride-0
        # expansion, or be the user's `gradient` argument.
        t.grad = _cast(g, t.dtype)
    elif old.shape == g.shape and old.is_contiguous():
        _binary("add", old, g, old)
    else:
        t.grad = _binary("add", old, g)


def _accumulate_graph(t, g):
    """t.grad += g under create_graph=True: the gradient keeps a graph of
    its own (as PyTorch: a clone the first time, then out-of-place sums)."""
    old = t.grad
    t.grad = g.clone() if old is None else old + g


# NOTE: unlike PyTorch, a leaf has no cached AccumulateGrad node: each op
# that uses a leaf makes its own (cheaper than a weak cache, and adding into
# .grad twice gives the same sum).  autograd.grad() and backward(inputs=)
# therefore match leaves by identity of node.variable.
_grad_accumulator = AccumulateGrad

# creation order of nodes: the engine runs the latest first
_sequence = itertools.count()


class BackwardNode(Node):
    """Base of the ``<Op>Backward0`` classes; an instance is also the ``ctx``
    handed to ``forward`` and ``backward``."""

    # class-level defaults: apply() creates nodes without an __init__ call
    next_functions = ()
    needs_input_grad = ()
    _metas = ()
    _saved = ()
    _versions = ()
    _released = False
    _retained = None
    _seq = 0
    _root_ref = None        # view nodes: weak reference to the base
    _root_fn = None         # view nodes: the base's grad_fn back then
    _tensor_hooks = None    # the output tensor's register_hook hooks
    _out_slots = ()         # where _saved holds the (detached) outputs
    _out_of_slot = None     # _out_slots' output positions (multi_output)
    _slot_grads = None      # several outputs: their gradients, filed
    _out_nodes = None       # several outputs: slot -> weakref to its node
    _out_metas = ()         # several outputs: (shape, dtype, device)
    _materialize = True     # a missing output gradient arrives as zeros
    _non_differentiable = frozenset()   # ids of the outputs marked so

    def save_for_backward(self, *tensors):
        """Keep tensors for backward; an in-place change to any of them
        before backward makes backward raise."""
        self._saved = tensors
        self._versions = tuple(
            None if t is None else t._version for t in tensors)

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(_FREED_MSG)
        for t, v in zip(self._saved, self._versions):
            if t is not None and t._version != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation "
                    "has been modified by an inplace operation: "
                    f"[ampc.{_type_str(t)} {list(t.shape)}], which is saved "
                    f"by {self.name()}, is at version {t._version}; "
                    f"expected version {v} instead. Hint: find the in-place "
                    "operation (add_, mul_, x[...] = ..., +=) that changes "
                    "it and make it out-of-place, or clone() the tensor "
                    "before changing it.")
        return self._saved

    def mark_non_differentiable(self, *tensors):
        """From forward: these outputs get no gradient (and do not require
        grad), as PyTorch's."""
        self._non_differentiable = frozenset(map(id, tensors))

    def set_materialize_grads(self, value):
        """From forward: False hands backward None, not zeros, for an
        output that received no gradient."""
        self._materialize = bool(value)

    def _release(self):
        self._released = True
        self._saved = ()
        self._versions = ()
        if self._slot_grads is not None:
            self._slot_grads = [None] * len(self._slot_grads)

    def _incoming(self, grad, engine_state, create_graph):
        """What every node does first with its gradient: the output
        tensor's hooks, retain_grad(), and autograd.grad()'s capture; None
        when the walk stops here."""
        if self._tensor_hooks:
            grad = _call_tensor_hooks(self._tensor_hooks, grad)
        if self._retained is not None:
            accumulate = _accumulate_graph if create_graph else \
                _accumulate_into
            for ref in self._retained:
                t = ref()
                if t is not None and t._retains_grad and t.grad_fn is self:
                    accumulate(t, grad)
        if engine_state is not None and engine_state.capture(self, grad):
            return None     # a wanted input, and nothing below it is
        return grad

    def _apply(self, grad, engine_state, create_graph=False):
        if self._released:
            raise RuntimeError(_FREED_MSG)
        grad = self._incoming(grad, engine_state, create_graph)
        if grad is None:
            return ()
        if self._slot_grads is None:
            incoming = (grad,)
        else:           # several outputs: grad is their slots' marker
            from .multi_output import take_slot_grads
            incoming = take_slot_grads(self)
        if create_graph:
            from .higher_order import graph_backward
            grads = graph_backward(self, *incoming)
        else:
            grads = self._function.backward(self, *incoming)
        if grads.__class__ is not tuple:
            grads = (grads,)
        n = len(self.next_functions)
        if len(grads) < n and True not in self.needs_input_grad[len(grads):]:
            grads = grads + (None,) * (n - len(grads))
        if len(grads) != n:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of "
                f"gradients (expected {len(self.next_functions)}, got "
                f"{len(grads)})")
        return grads


# ----------------------------------------------------------------------------
# Function
def _sum_to(fn_name, g, shape, graph=False):
    """Sum a gradient back to ``shape`` (the reverse of broadcasting)."""
    gshape = g.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    dims = list(range(lead)) if lead > 0 else []
    if lead < 0:
        raise RuntimeError(
            f"{fn_name}: gradient of shape {list(gshape)} cannot be summed "
            f"to the input's shape {list(shape)}")
    for i, s in enumerate(shape):
        gs = gshape[lead + i]
        if s == 1 and gs != 1:
            dims.append(lead + i)
        elif s != gs:
            raise RuntimeError(
                f"Function {fn_name} returned an invalid gradient: got "
                f"shape {list(gshape)} but expected shape compatible with "
                f"{list(shape)}")
    if graph:           # create_graph: differentiable sum and reshape
        if dims:
            g = g.sum(tuple(dims), keepdim=True)
        return g.reshape(shape) if g.shape != shape else g
    if dims:
        g = _reduce("sum", g, tuple(dims), True)
    if g.shape != shape:
        g = g._reshape(shape)
    return g


class Function:
    """Base class of differentiable operations.

    Subclasses define ``forward(ctx, *args)`` and ``backward(ctx, *grads)``
    as static methods and are called with ``Op.apply(*args)``.  ``backward``
    gets one gradient per differentiable output (a forward may return a
    tuple of several; see multi_output.py) and returns one gradient (or
    None) per argument of ``forward``.

    >>> import ampc
    >>> class Square(Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         x, = ctx.saved_tensors
    ...         return 2 * x * g
    >>> x = ampc.tensor([3.0], requires_grad=True)
    >>> Square.apply(x).backward(ampc.ones(1))
    >>> x.grad
    tensor([6.])
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # ampc's own ops are named like PyTorch's (AddBackward0)
        suffix = ("Backward0" if cls.__module__.startswith(__package__)
                  else "Backward")
        name = cls.__dict__.get("node_name", cls.__name__ + suffix)
        attrs = {"_function": cls, "__module__": cls.__module__,
                 "__qualname__": name}
        if cls.__dict__.get("_is_view"):
            attrs["_is_view"] = True
        cls._node_cls = type(name, (BackwardNode,), attrs)
        # Every float output of a user's Function is differentiable, as in
        # PyTorch; ampc's own ops that return a tuple differentiate its
        # first float tensor only (the rest are statistics or indices).
        if "_all_outputs_differentiable" not in cls.__dict__:
            cls._all_outputs_differentiable = \
                cls.__module__.partition(".")[0] != "ampc"

    _all_outputs_differentiable = False

    # The op's name in csrc/autocast_ops.def, or None: apply() casts the
    # arguments by autocast's policy for that op before forward runs.
    autocast_op = None

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function subclasses must define forward")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("Function subclasses must define backward")

    @classmethod
    def apply(cls, *args, **kwargs):
        if cls.autocast_op is not None and _autocast_active():
            args = _autocast_cast_args(cls.autocast_op, args, _mode.enabled)
        if _mode.enabled:
            needs = tuple([isinstance(a, _TB) and a.requires_grad
                           for a in args])
            if True in needs:
                ctx = cls._node_cls()
                ctx.needs_input_grad = needs
                _mode.enabled = False
                try:
                    out = cls.forward(ctx, *args, **kwargs)
                finally:
                    _mode.enabled = True
                if out.__class__ is tuple or isinstance(out, tuple):
                    return _attach_tuple(ctx, out, args)
                if id(out) in ctx._non_differentiable:
                    return _own_identity(out, args)
                return _attach(ctx, out, args)
        ctx = cls._node_cls()
        ctx.needs_input_grad = (False,) * len(args)
        with no_grad():
            return cls.forward(ctx, *args, **kwargs)


def autocast_listed(fn):
    """True when ``fn`` (a Function) has an autocast policy and autocast is
    on: its callers must then go through ``fn.apply`` even without grad,
    so that the policy applies."""
    return fn.autocast_op is not None and _autocast_active()


def _attach_tuple(ctx, out, args):
    """A tuple output: every float tensor not marked non-differentiable
    gets a gradient, and backward one argument per output (a user's
    Function, see multi_output.py), or the first such tensor only (ampc's
    own ops)."""
    outs = list(out)
    diff = [i for i, o in enumerate(outs)
            if isinstance(o, _TB) and o.dtype.is_floating_point and
            id(o) not in ctx._non_differentiable]
    for i, o in enumerate(outs):
        if id(o) in ctx._non_differentiable:
            outs[i] = _own_identity(o, args)
    if diff and ctx._function._all_outputs_differentiable:
        from .multi_output import attach_outputs
        attach_outputs(ctx, outs, diff, args)
    elif diff:
        outs[diff[0]] = _attach(ctx, outs[diff[0]], args)
    return type(out)(outs) if type(out) is tuple else type(out)(*outs)


def _own_identity(out, args):
    """out, or when forward returned an input unchanged, a view of it: the
    output gets its own identity, and the input's history is never
    rewritten."""
    for a in args:
        if a is out:
            return out._detach()
    return out


def _record_edges(ctx, args):
    """ctx's edges to the nodes of the arguments that need a gradient, and
    its place in the creation order."""
    nexts = []
    metas = []
    leaves = None
    for a, need in zip(args, ctx.needs_input_grad):
        if need:
            gf = a.grad_fn
            if gf is not None and gf._is_view:
                gf = _fresh_grad_fn(a)
            if gf is None:
                # one AccumulateGrad per leaf within this node (x * x)
                if leaves is None:
                    leaves = {}
                gf = leaves.get(id(a))
                if gf is None:
                    gf = leaves[id(a)] = AccumulateGrad(a)
            nexts.append((gf, 0))
            metas.append((a.shape, a.dtype))
        else:
            nexts.append((None, 0))
            metas.append(None)
    ctx.next_functions = tuple(nexts)
    ctx._metas = tuple(metas)
    ctx._seq = next(_sequence)


def _detach_saved_outputs(ctx, outs):
    """A saved output (outs: the differentiable ones, None elsewhere) would
    make a reference cycle (out -> node -> out): keep a detached view of it
    instead (it shares the version counter).
    ``_out_slots`` records where (and ``_out_of_slot`` which output): with
    create_graph=True a user's backward sees an alias whose grad_fn is the
    output's node there, see higher_order.py."""
    saved = ctx._saved
    if not saved:
        return
    which = {}
    for i, t in enumerate(saved):
        for j, o in enumerate(outs):
            if t is o and o is not None:
                which[i] = j
                break
    if not which:
        return
    aliases = {}
    ctx._saved = tuple(
        aliases.setdefault(which[i], t._detach()) if i in which else t
        for i, t in enumerate(saved))
    ctx._out_slots = tuple(which)
    ctx._out_of_slot = which


def _attach(ctx, out, args):
    """Make ``ctx`` the grad_fn of ``out`` and record the edges."""
    if not out.dtype.is_floating_point:
        return out
    out = _own_identity(out, args)
    _record_edges(ctx, args)
    _detach_saved_outputs(ctx, (out,))
    out.requires_grad = True
    out.grad_fn = ctx
    return out


def _dev_str(t):
    if t.device_type == "cpu":
        return "cpu"
    return f"cuda:{t.device_index}"


# -- views: backward re-shapes the gradient; _is_view marks them for the
# in-place checks.
class _ViewFunction(Function):
    """A Function whose output shares storage with its input.  Its node
    keeps a weak reference to the input (the view's base), so an in-place
    op on the view can rewrite the base's history too (see inplace())."""

    _is_view = True

    def __init_subclass__(cls, **kwargs):
        cls._is_view = True
        super().__init_subclass__(**kwargs)

    @classmethod
    def apply(cls, *args, **kwargs):
        out = super().apply(*args, **kwargs)
        node = out.grad_fn
        if node is not None and node.__class__._function is cls:
            inp = args[0]
            if _storage_start(out) != _storage_start(inp):
                node._is_view = False       # reshape had to copy
                return out
            # the root base: the first tensor of the chain of views
            root, root_fn = inp, inp.grad_fn
            if root_fn is not None and root_fn._is_view:
                r = root_fn._root_ref() if root_fn._root_ref else None
                if r is not None:
                    root, root_fn = r, root_fn._root_fn
            node._root_ref = weakref.ref(root)
            node._root_fn = root_fn
        return out


def _fresh_grad_fn(t):
    """t.grad_fn, brought up to date when t is a view whose base has been
    changed in place since (PyTorch regenerates view histories the same
    way): the view's history becomes a strided view of the base's current
    history."""
    gf = t.grad_fn
    if gf is None or not gf._is_view:
        return gf
    ref = gf._root_ref
    root = ref() if ref is not None else None
    if root is None or root.grad_fn is gf._root_fn:
        return gf
    geom = (tuple(t.shape), t.stride(),
            t.storage_offset() - root.storage_offset())
    gf = AsStrided.apply(root, geom).grad_fn
    t.grad_fn = gf
    return gf


def _storage_start(t):
    """The address of t's storage (equal for all views of one storage)."""
    return t.data_ptr() - t.storage_offset() * t.element_size()


def _zeros_like_geometry(g, shape, stride):
    """A zero buffer and a view of it with ``shape`` and ``stride``."""
    span = 1
    for n, st in zip(shape, stride):
        if n == 0:
            span = 1
            break
        span += (n - 1) * st
    buf = _C.full((span,), 0, g.dtype, _dev_str(g))
    return buf, buf._as_strided(tuple(shape), tuple(stride), 0)


def _fold_broadcast(g, vshape, vstride):
    """(g, shape) for writing g (of vshape) into a view with strides
    vstride: a dim of stride 0 holds one element many times, so g is summed
    over it (keepdim) and the write's shape has 1 there."""
    dims = tuple(d for d, (n, st) in enumerate(zip(vshape, vstride))
                 if st == 0 and n > 1)
    if not dims:
        return g, tuple(vshape)
    return g.sum(dims, keepdim=True), tuple(
        1 if d in dims else n for d, n in enumerate(vshape))


class AsStrided(_ViewFunction):
    """A view of ``a`` with the geometry recorded by an in-place op on a
    view (shape, strides, offset relative to a's storage offset)."""

    @staticmethod
    def forward(ctx, a, geom):
        ctx.geom = geom
        ctx.base_geom = (tuple(a.shape), a.stride())
        vshape, vstride, off = geom
        return a._as_strided(vshape, vstride, a.storage_offset() + off)

    @staticmethod
    def backward(ctx, g):
        shape, stride = ctx.base_geom
        vshape, vstride, off = ctx.geom
        buf, gb = _zeros_like_geometry(g, shape, stride)
        g, vshape = _fold_broadcast(g, vshape, vstride)
        _C.copy_(buf._as_strided(vshape, vstride, off), g)
        return gb, None
