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
* ``create_graph=True`` (higher-order gradients) is not supported.
"""
import functools
import heapq
import inspect
import itertools
import math
import threading
import weakref

from . import _C
from ._dtype_device import _pybool

_TB = _C.TensorBase
_binary = _C.binary
_compare = _C.compare
_unary = _C.unary
_reduce = _C.reduce
_cast = _C.cast
_autocast_active = _C.autocast_active
_autocast_cast_args = _C.autocast_cast_args

__all__ = [
    "Function", "backward", "grad", "no_grad", "enable_grad",
    "set_grad_enabled", "is_grad_enabled", "inference_mode",
]

# ----------------------------------------------------------------------------
# grad mode: thread-local, as in PyTorch (a new thread starts enabled)


class _GradMode(threading.local):
    enabled = True


_mode = _GradMode()


def is_grad_enabled():
    """True when operations record the graph for autograd.

    >>> import ampc
    >>> with ampc.no_grad():
    ...     ampc.is_grad_enabled()
    False
    """
    return _mode.enabled


class _GradModeContext:
    """Base of no_grad / enable_grad / set_grad_enabled: a context manager
    that is also a decorator (also for generator functions), restoring the
    previous mode on exit."""

    _target = True

    def __enter__(self):
        self._prev = _mode.enabled
        _mode.enabled = self._target

    def __exit__(self, exc_type, exc, tb):
        _mode.enabled = self._prev
        return False

    def clone(self):
        return self.__class__()

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"{type(self).__name__}(): can only decorate a callable, got "
                f"{type(func).__name__}")
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def _wrap_generator(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            gen = func(*args, **kwargs)
            # the mode is set around every step of the generator and
            # restored while it is suspended
            try:
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as exc:
                        with self.clone():
                            response = gen.throw(exc)
                    else:
                        with self.clone():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value
        return wrapper


class no_grad(_GradModeContext):
    """Context manager and decorator that turns gradient recording off
    (in this thread).

    >>> import ampc
    >>> x = ampc.ones(2, requires_grad=True)
    >>> with ampc.no_grad():
    ...     (x * 2).requires_grad
    False
    >>> @ampc.no_grad()
    ... def f(t):
    ...     return t * 2
    >>> f(x).requires_grad
    False
    """

    _target = False

    def __new__(cls, orig_func=None):
        # ``@no_grad`` without parentheses decorates directly.
        self = super().__new__(cls)
        if orig_func is None:
            return self
        return self(orig_func)


class enable_grad(_GradModeContext):
    """Context manager and decorator that turns gradient recording on
    (in this thread), e.g. inside ``no_grad``.

    >>> import ampc
    >>> with ampc.no_grad():
    ...     with ampc.enable_grad():
    ...         ampc.is_grad_enabled()
    True
    """

    _target = True

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        if orig_func is None:
            return self
        return self(orig_func)


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(mode)``: sets grad mode now (as a function), and
    restores the previous mode on exit (as a context manager or decorator).

    >>> import ampc
    >>> with ampc.set_grad_enabled(False):
    ...     ampc.is_grad_enabled()
    False
    """

    def __init__(self, mode):
        if mode.__class__ is not _pybool:
            raise TypeError(
                "set_grad_enabled(): argument 'mode' must be a bool, but got "
                f"{type(mode).__name__}")
        self._prev = _mode.enabled
        self._target = mode
        _mode.enabled = mode

    def __enter__(self):
        pass

    def __call__(self, func):
        # as a decorator, the mode set by __init__ is undone at once
        _mode.enabled = self._prev
        return super().__call__(func)

    def clone(self):
        return set_grad_enabled(self._target)


class inference_mode(_GradModeContext):
    """Like ``no_grad`` (ampc has no separate inference tensors).

    >>> import ampc
    >>> with ampc.inference_mode():
    ...     ampc.is_grad_enabled()
    False
    """

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode) and mode.__class__ is not _pybool:
            self._target = False
            return self(mode)
        return self

    def __init__(self, mode=True):
        if mode.__class__ is _pybool:
            self._target = not mode

    def clone(self):
        return inference_mode(not self._target)


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

    def _apply(self, grad, engine_state):
        var = self.variable
        if engine_state is not None and engine_state.capture(self, grad):
            return ()
        _accumulate_into(var, grad)
        return ()


def _accumulate_into(t, g):
    """t.grad += g, allocating a fresh contiguous tensor the first time."""
    old = t.grad
    if old is None:
        # a fresh copy: g may be shared with other nodes, or be a stride-0
        # expansion, or be the user's `gradient` argument.
        t.grad = _cast(g, t.dtype)
    elif old.shape == g.shape and old.is_contiguous():
        _binary("add", old, g, old)
    else:
        t.grad = _binary("add", old, g)


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
        pass    # only the first float output is differentiable anyway

    def _release(self):
        self._released = True
        self._saved = ()
        self._versions = ()

    def _apply(self, grad, engine_state):
        if self._released:
            raise RuntimeError(_FREED_MSG)
        if self._retained is not None:
            for ref in self._retained:
                t = ref()
                if t is not None and t._retains_grad and t.grad_fn is self:
                    _accumulate_into(t, grad)
        if engine_state is not None and engine_state.capture(self, grad):
            # autograd.grad() captured it; still run the node if something
            # below it is wanted too.
            pass
        grads = self._function.backward(self, grad)
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


def _sum_to(fn_name, g, shape):
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
    if dims:
        g = _reduce("sum", g, tuple(dims), True)
    if g.shape != shape:
        g = g._reshape(shape)
    return g


class Function:
    """Base class of differentiable operations.

    Subclasses define ``forward(ctx, *args)`` and ``backward(ctx, grad)``
    as static methods and are called with ``Op.apply(*args)``.  ``backward``
    returns one gradient (or None) per argument of ``forward``.

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
        suffix = "Backward0" if cls.__module__ == __name__ else "Backward"
        name = cls.__dict__.get("node_name", cls.__name__ + suffix)
        attrs = {"_function": cls, "__module__": cls.__module__,
                 "__qualname__": name}
        if cls.__dict__.get("_is_view"):
            attrs["_is_view"] = True
        cls._node_cls = type(name, (BackwardNode,), attrs)

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
    """The first floating point tensor of a tuple output is the
    differentiable one."""
    outs = list(out)
    for i, o in enumerate(outs):
        if isinstance(o, _TB) and o.dtype.is_floating_point:
            outs[i] = _attach(ctx, o, args)
            break
    return type(out)(outs) if type(out) is tuple else type(out)(*outs)


def _attach(ctx, out, args):
    """Make ``ctx`` the grad_fn of ``out`` and record the edges."""
    if not out.dtype.is_floating_point:
        return out
    for a in args:
        if a is out:
            # forward returned an input unchanged: give the output its own
            # identity (a view), never rewrite the input's history
            out = out._detach()
            break
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
    # A saved output would make a reference cycle (out -> node -> out):
    # keep a detached view instead; it shares the version counter.
    saved = ctx._saved
    if saved:
        for i, t in enumerate(saved):
            if t is out:
                ctx._saved = saved[:i] + (out._detach(),) + saved[i + 1:]
                break
    out.requires_grad = True
    out.grad_fn = ctx
    return out


# ----------------------------------------------------------------------------
# the engine


class _GradCapture:
    """autograd.grad(): catches the gradients of the chosen inputs instead
    of accumulating them into ``.grad``."""

    def __init__(self, nodes, leaf_ids, n):
        self.nodes = nodes          # non-leaf input's grad_fn -> index
        self.leaf_ids = leaf_ids    # id(leaf input) -> index
        self.grads = [None] * n

    def capture(self, node, grad):
        """Record grad if node is wanted; True means: do not accumulate
        into a leaf's .grad (never, for autograd.grad)."""
        if node.__class__ is AccumulateGrad:
            i = self.leaf_ids.get(id(node.variable))
        else:
            i = self.nodes.get(node)
        if i is not None:
            g = self.grads[i]
            self.grads[i] = grad if g is None else _binary("add", g, grad)
        return True


def _check_root(i, t):
    if not isinstance(t, _TB):
        raise TypeError(
            f"backward(): element {i} of tensors must be a Tensor, but got "
            f"{type(t).__name__}")
    if not t.requires_grad:
        raise RuntimeError(
            f"element {i} of tensors does not require grad and does not "
            "have a grad_fn")


def _make_root_grad(i, t, g):
    if g is None:
        if t.numel() != 1:
            raise RuntimeError(
                "grad can be implicitly created only for scalar outputs")
        return _C.full(tuple(t.shape), 1.0, t.dtype, _dev_str(t))
    if not isinstance(g, _TB):
        raise TypeError(
            f"backward(): gradient {i} must be a Tensor or None, but got "
            f"{type(g).__name__}")
    if g.shape != t.shape:
        raise RuntimeError(
            f"Mismatch in shape: grad_output[{i}] has a shape of "
            f"{list(g.shape)} and output[{i}] has a shape of "
            f"{list(t.shape)}.")
    if g.device_type != t.device_type or g.device_index != t.device_index:
        raise RuntimeError(
            f"backward(): gradient {i} is on {_dev_str(g)} but the output "
            f"is on {_dev_str(t)}")
    if g.dtype != t.dtype:
        g = _cast(g, t.dtype)
    return g


def _dev_str(t):
    if t.device_type == "cpu":
        return "cpu"
    return f"cuda:{t.device_index}"


def _run_backward(roots, root_grads, retain_graph, capture=None):
    """Run the graph below ``roots`` (tensors) seeded with ``root_grads``.

    Nodes run when every gradient bound for them has arrived, latest-created
    first (PyTorch's order, so low-precision sums round the same way); all
    the AccumulateGrad nodes of one leaf are merged, so a leaf's gradient is
    summed in full before it is added into ``.grad``.
    """
    canon = {}

    def key(node):
        if node.__class__ is AccumulateGrad:
            return canon.setdefault(id(node.variable), node)
        return node

    root_nodes = []
    buffers = {}
    for t, g in zip(roots, root_grads):
        node = _fresh_grad_fn(t)
        node = key(AccumulateGrad(t) if node is None else node)
        if node in buffers:
            buffers[node] = _binary("add", buffers[node], g)
        else:
            buffers[node] = g
            root_nodes.append(node)

    # dependency counts, by an iterative DFS
    deps = {}
    seen = set(root_nodes)
    stack = list(root_nodes)
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            nxt = key(nxt)
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)

    ready = []
    tie = itertools.count()
    for n in root_nodes:
        if deps.get(n, 0) == 0:
            heapq.heappush(ready, (-n._seq, next(tie), n))
    ran = []
    try:
        while ready:
            node = heapq.heappop(ready)[2]
            grad = buffers.pop(node, None)
            if grad is not None:
                grads = node._apply(grad, capture)
                ran.append(node)
            else:
                grads = ()
            metas = node._metas
            for k, (nxt, _) in enumerate(node.next_functions):
                if nxt is None:
                    continue
                nxt = key(nxt)
                gi = grads[k] if k < len(grads) else None
                if gi is not None:
                    shape, dtype = metas[k]
                    if gi.shape != shape:
                        gi = _sum_to(node.name(), gi, shape)
                    if gi.dtype != dtype:
                        gi = _cast(gi, dtype)
                    old = buffers.get(nxt)
                    buffers[nxt] = gi if old is None else \
                        _binary("add", old, gi)
                left = deps[nxt] - 1
                deps[nxt] = left
                if left == 0:
                    heapq.heappush(ready, (-nxt._seq, next(tie), nxt))
    finally:
        if not retain_graph:
            for node in ran:
                if node.__class__ is not AccumulateGrad:
                    node._release()


def backward(tensors, grad_tensors=None, retain_graph=None,
             create_graph=False, inputs=None):
    """Compute the gradients of ``tensors`` w.r.t. the graph leaves and add
    them into the leaves' ``.grad``.

    >>> import ampc
    >>> x = ampc.ones(3, requires_grad=True)
    >>> ampc.autograd.backward([(x * 2).sum()])
    >>> x.grad
    tensor([2., 2., 2.])
    """
    if create_graph:
        raise NotImplementedError(
            "backward(): create_graph=True (higher-order gradients) is not "
            "supported by ampc")
    if isinstance(tensors, _TB):
        tensors = (tensors,)
    else:
        tensors = tuple(tensors)
    if grad_tensors is None:
        grad_tensors = (None,) * len(tensors)
    elif isinstance(grad_tensors, _TB):
        grad_tensors = (grad_tensors,)
    else:
        grad_tensors = tuple(grad_tensors)
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(
            f"backward(): got {len(grad_tensors)} gradients for "
            f"{len(tensors)} tensors")
    for i, t in enumerate(tensors):
        _check_root(i, t)
    grads = [_make_root_grad(i, t, g)
             for i, (t, g) in enumerate(zip(tensors, grad_tensors))]
    capture = None
    if inputs is not None:
        if isinstance(inputs, _TB):
            inputs = (inputs,)
        capture = _InputsOnly(tuple(inputs))
    with no_grad():
        _run_backward(tensors, grads, bool(retain_graph), capture)


class _InputsOnly:
    """backward(inputs=...): accumulate only into the given leaves."""

    def __init__(self, inputs):
        self.ids = {id(t) for t in inputs}

    def capture(self, node, grad):
        if node.__class__ is AccumulateGrad:
            # returning True skips the accumulation
            return id(node.variable) not in self.ids
        return False


def grad(outputs, inputs, grad_outputs=None, retain_graph=None,
         create_graph=False, allow_unused=False):
    """Return the gradients of ``outputs`` w.r.t. ``inputs`` without
    touching any ``.grad``.

    >>> import ampc
    >>> x = ampc.tensor([1.0, 2.0], requires_grad=True)
    >>> ampc.autograd.grad((x * x).sum(), x)
    (tensor([2., 4.]),)
    """
    if create_graph:
        raise NotImplementedError(
            "grad(): create_graph=True (higher-order gradients) is not "
            "supported by ampc")
    outputs = (outputs,) if isinstance(outputs, _TB) else tuple(outputs)
    single = isinstance(inputs, _TB)
    inputs = (inputs,) if single else tuple(inputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    elif isinstance(grad_outputs, _TB):
        grad_outputs = (grad_outputs,)
    else:
        grad_outputs = tuple(grad_outputs)
    for i, t in enumerate(outputs):
        _check_root(i, t)
    nodes = {}
    leaf_ids = {}
    slot = []
    for i, t in enumerate(inputs):
        if not isinstance(t, _TB):
            raise TypeError(
                f"grad(): inputs[{i}] must be a Tensor, but got "
                f"{type(t).__name__}")
        if not t.requires_grad:
            raise RuntimeError(
                f"grad(): inputs[{i}] does not require grad")
        if t.grad_fn is None:
            slot.append(leaf_ids.setdefault(id(t), i))
        else:
            slot.append(nodes.setdefault(t.grad_fn, i))
    cap = _GradCapture(nodes, leaf_ids, len(inputs))
    grads = [_make_root_grad(i, t, g)
             for i, (t, g) in enumerate(zip(outputs, grad_outputs))]
    with no_grad():
        _run_backward(outputs, grads, bool(retain_graph), cap)
    result = []
    for i, t in enumerate(inputs):
        g = cap.grads[slot[i]]
        if g is None and not allow_unused:
            raise RuntimeError(
                f"One of the differentiated Tensors (inputs[{i}]) appears "
                "to not have been used in the graph. Set allow_unused=True "
                "if this is the desired behavior.")
        if g is not None and g.dtype != t.dtype:
            g = _cast(g, t.dtype)
        result.append(g)
    return tuple(result)


# ----------------------------------------------------------------------------
# op Functions: one _C call forward, a few backward.  backward may return a
# gradient of the broadcast shape and the promoted dtype: the engine sums
# and casts it back to each input (see _run_backward).


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        return _binary("add", a, b)

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        return _binary("sub", a, b)

    @staticmethod
    def backward(ctx, g):
        return g, (_unary("neg", g) if ctx.needs_input_grad[1] else None)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ta, tb = isinstance(a, _TB), isinstance(b, _TB)
        ctx.save_for_backward(a if ta else None, b if tb else None)
        ctx.a = None if ta else a       # Python scalars only: a node never
        ctx.b = None if tb else b       # keeps tensors outside _saved
        return _binary("mul", a, b)

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.saved_tensors
        a = ctx.a if sa is None else sa
        b = ctx.b if sb is None else sb
        need_a, need_b = ctx.needs_input_grad
        return (_binary("mul", g, b) if need_a else None,
                _binary("mul", g, a) if need_b else None)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = _binary("div", a, b)
        if isinstance(b, _TB):
            ctx.save_for_backward(b, out)
        else:
            ctx.save_for_backward(None, None)
        ctx.b = None if isinstance(b, _TB) else b
        return out

    @staticmethod
    def backward(ctx, g):
        b, out = ctx.saved_tensors
        if b is None:
            b = ctx.b
        ga = _binary("div", g, b)
        gb = None
        if ctx.needs_input_grad[1]:
            # d(a/b)/db = -a/b^2 = -(a/b)/b
            gb = _unary("neg", _binary("mul", ga, out))
        return (ga if ctx.needs_input_grad[0] else None), gb


class Pow(Function):
    autocast_op = "pow"

    @staticmethod
    def forward(ctx, a, b):
        out = _binary("pow", a, b)
        ctx.save_for_backward(a if isinstance(a, _TB) else None,
                              b if isinstance(b, _TB) else None, out)
        ctx.a = None if isinstance(a, _TB) else a
        ctx.b = None if isinstance(b, _TB) else b
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        ga = gb = None
        if need_a:
            bb = ctx.b if b is None else b
            if bb.__class__ in (int, float) and bb == 0:
                ga = _binary("mul", g, 0.0)
            else:
                # b * a^(b-1)
                bm1 = bb - 1 if b is None else _binary("sub", b, 1)
                ga = _binary("mul", g,
                             _binary("mul", _binary("pow", a, bm1), bb))
        if need_b:
            # out * ln(a)
            if a is None:
                ga_log = math.log(ctx.a) if ctx.a > 0 else float("nan")
                gb = _binary("mul", _binary("mul", g, out), ga_log)
            else:
                gb = _binary("mul", _binary("mul", g, out),
                             _unary("log", a))
        return ga, gb


class Maximum(Function):
    _op = "maximum"
    _cmp = "gt"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _binary(ctx._function._op, a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        # the winner takes the gradient; ties split it evenly (as PyTorch)
        win = _compare(ctx._function._cmp, a, b)
        tie = _compare("eq", a, b)
        w = _binary("add", win, _binary("mul", tie, 0.5))
        ga = _binary("mul", g, w)
        gb = _binary("sub", g, ga) if ctx.needs_input_grad[1] else None
        return ga, gb


class Minimum(Maximum):
    _op = "minimum"
    _cmp = "lt"

    forward = Maximum.forward
    backward = Maximum.backward


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return _unary("neg", a)

    @staticmethod
    def backward(ctx, g):
        return _unary("neg", g)


class Abs(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _unary("abs", a)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("mul", g, _unary("sign", a))


class Sqrt(Function):
    @staticmethod
    def forward(ctx, a):
        out = _unary("sqrt", a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary("div", g, _binary("mul", out, 2))


class Exp(Function):
    autocast_op = "exp"

    @staticmethod
    def forward(ctx, a):
        out = _unary("exp", a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary("mul", g, out)


class Log(Function):
    autocast_op = "log"

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _unary("log", a)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return _binary("div", g, a)


class Relu(Function):
    @staticmethod
    def forward(ctx, a):
        out = _unary("relu", a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return _binary("mul", g, _compare("gt", out, 0))


class Sign(Function):
    @staticmethod
    def forward(ctx, a):
        return _unary("sign", a)

    @staticmethod
    def backward(ctx, g):
        return _binary("mul", g, 0)


class Clamp(Function):
    @staticmethod
    def forward(ctx, a, min=None, max=None):
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = min, max
        return _C.clamp(a, min, max)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        lo, hi = ctx.lo, ctx.hi
        # the gradient passes where lo <= a <= hi (as PyTorch)
        mask = None
        if lo is not None:
            mask = _compare("ge", a, lo)
        if hi is not None:
            m = _compare("le", a, hi)
            mask = m if mask is None else _binary("mul", mask, m)
        if mask is None:
            return g
        return _binary("mul", g, mask)


class Cast(Function):
    """to(dtype): the gradient flows back in the source dtype (the engine
    casts it)."""

    node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, a, dtype):
        return _cast(a, dtype)

    @staticmethod
    def backward(ctx, g):
        return g, None


class Clone(Function):
    @staticmethod
    def forward(ctx, a):
        return _cast(a, a.dtype)

    @staticmethod
    def backward(ctx, g):
        return g


class ToDevice(Function):
    node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, a, device, dtype):
        ctx.src = _dev_str(a)
        out = _C.empty(tuple(a.shape), dtype, device)
        return _C.copy_(out, a)

    @staticmethod
    def backward(ctx, g):
        if _dev_str(g) == ctx.src:
            return g, None, None
        out = _C.empty(tuple(g.shape), g.dtype, ctx.src)
        return _C.copy_(out, g), None, None


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


class View(_ViewFunction):
    @staticmethod
    def forward(ctx, a, shape):
        ctx.in_shape = a.shape
        return a._view(shape)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None


class Reshape(_ViewFunction):
    @staticmethod
    def forward(ctx, a, shape):
        ctx.in_shape = a.shape
        return a._reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None


class Flatten(_ViewFunction):
    @staticmethod
    def forward(ctx, a, start, end):
        ctx.in_shape = a.shape
        return a._flatten(start, end)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None, None


class Unsqueeze(_ViewFunction):
    @staticmethod
    def forward(ctx, a, dim):
        ctx.in_shape = a.shape
        return a._unsqueeze(dim)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None


class Squeeze(_ViewFunction):
    @staticmethod
    def forward(ctx, a, dim):
        ctx.in_shape = a.shape
        return a._squeeze(dim)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.in_shape), None


class Transpose(_ViewFunction):
    @staticmethod
    def forward(ctx, a, d0, d1):
        ctx.dims = (d0, d1)
        return a._transpose(d0, d1)

    @staticmethod
    def backward(ctx, g):
        return g._transpose(*ctx.dims), None, None


class Permute(_ViewFunction):
    @staticmethod
    def forward(ctx, a, dims):
        ctx.dims = dims
        return a._permute(dims)

    @staticmethod
    def backward(ctx, g):
        n = len(ctx.dims)
        inv = [0] * n
        for i, d in enumerate(ctx.dims):
            inv[d % n] = i
        return g._permute(tuple(inv)), None


class Expand(_ViewFunction):
    @staticmethod
    def forward(ctx, a, shape):
        return a._expand(shape)

    @staticmethod
    def backward(ctx, g):
        return g, None      # the engine sums it back to the input's shape


class GetItem(_ViewFunction):
    @staticmethod
    def forward(ctx, a, index):
        ctx.in_shape = a.shape
        ctx.index = index
        return a._getitem(index)

    @staticmethod
    def backward(ctx, g):
        out = _C.full(tuple(ctx.in_shape), 0, g.dtype, _dev_str(g))
        _C.copy_(out._getitem(ctx.index), g)
        return out, None


class Contiguous(Function):
    @staticmethod
    def forward(ctx, a):
        return a._contiguous()

    @staticmethod
    def backward(ctx, g):
        return g


# -- reductions

def _keepdim_shape(in_shape, dim):
    """The shape of a keepdim reduction over ``dim`` (None: all dims)."""
    nd = len(in_shape)
    if dim is None:
        return (1,) * nd
    dims = dim if isinstance(dim, tuple) else (dim,)
    dims = {d % nd if nd else 0 for d in dims}
    return tuple(1 if i in dims else s for i, s in enumerate(in_shape))


class Sum(Function):
    autocast_op = "sum"

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.in_shape = a.shape
        ctx.keep = _keepdim_shape(a.shape, dim)
        return _reduce("sum", a, dim, keepdim)

    @staticmethod
    def backward(ctx, g):
        return g._reshape(ctx.keep)._expand(tuple(ctx.in_shape))


class Mean(Function):
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.in_shape = a.shape
        ctx.keep = _keepdim_shape(a.shape, dim)
        out = _reduce("mean", a, dim, keepdim)
        n = 1
        for s in a.shape:
            n *= s
        for s in ctx.keep:
            n //= s if s else 1
        ctx.n = n
        return out

    @staticmethod
    def backward(ctx, g):
        g = _binary("div", g, ctx.n)
        return g._reshape(ctx.keep)._expand(tuple(ctx.in_shape))


class MaxAll(Function):
    """max()/min() over all elements: the gradient is shared evenly by the
    elements equal to the result (as PyTorch)."""

    node_name = "MaxBackward1"
    _op = "max"

    @staticmethod
    def forward(ctx, a):
        out = _reduce(ctx._function._op, a)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_tensors
        if out.item() != out.item():    # NaN: the NaNs take the gradient
            mask = _compare("ne", a, a)
        else:
            mask = _compare("eq", a, out)
        count = _reduce("sum", mask)
        return _binary("mul", mask, _binary("div", g, count))


class MinAll(MaxAll):
    node_name = "MinBackward1"
    _op = "min"
    forward = MaxAll.forward
    backward = MaxAll.backward


class MaxDim(Function):
    """max(dim)/min(dim): the gradient goes to the index that won."""

    node_name = "MaxBackward0"
    _op = "max_dim"

    @staticmethod
    def forward(ctx, a, dim, keepdim):
        values, indices = _reduce(ctx._function._op, a, dim, keepdim)
        ctx.in_shape = tuple(a.shape)
        nd = len(ctx.in_shape)
        ctx.dim = dim % nd if nd else 0
        ctx.keepdim = keepdim
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, g):
        indices, = ctx.saved_tensors
        shape = ctx.in_shape
        if not shape:
            return g, None, None
        keep = _keepdim_shape(shape, ctx.dim)
        idx = indices._reshape(keep)
        r = shape[ctx.dim]
        ar_shape = tuple(r if i == ctx.dim else 1 for i in range(len(shape)))
        ar = _C.arange(0, r, 1, _C.int64, _dev_str(g))._reshape(ar_shape)
        mask = _compare("eq", ar, idx)
        return _binary("mul", g._reshape(keep), mask), None, None


class MinDim(MaxDim):
    node_name = "MinBackward0"
    _op = "min_dim"
    forward = MaxDim.forward
    backward = MaxDim.backward


# -- joins

class Cat(Function):
    autocast_op = "cat"

    @staticmethod
    def forward(ctx, *tensors, dim=0):
        out = _C.cat(tensors, dim)
        nd = out.ndim
        ctx.dim = dim % nd if nd else 0
        ctx.sizes = [t.shape[ctx.dim] if t.ndim else 0 for t in tensors]
        return out

    @staticmethod
    def backward(ctx, g):
        grads = []
        start = 0
        pre = (slice(None),) * ctx.dim
        for need, n in zip(ctx.needs_input_grad, ctx.sizes):
            if need:
                grads.append(g._getitem(pre + (slice(start, start + n),)))
            else:
                grads.append(None)
            start += n
        return tuple(grads)


class Stack(Function):
    autocast_op = "stack"

    @staticmethod
    def forward(ctx, *tensors, dim=0):
        ctx.dim = dim
        return _C.cat([t._unsqueeze(dim) for t in tensors], dim)

    @staticmethod
    def backward(ctx, g):
        pre = (slice(None),) * ctx.dim
        return tuple(g._getitem(pre + (i,)) if need else None
                     for i, need in enumerate(ctx.needs_input_grad))


# -- in-place writes (the node that an in-place op leaves on its tensor)

class SetItem(Function):
    """self[index] = value, done in place: self's gradient is zero where
    it was overwritten, value's is the gradient of the written region."""

    node_name = "CopySlices"

    @staticmethod
    def forward(ctx, a, value, index):
        ctx.index = index
        view = a._getitem(index)
        if isinstance(value, _TB):
            _C.copy_(view, value)
        else:
            _C.fill_(view, value)
        return a

    @staticmethod
    def backward(ctx, g):
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = _cast(g, g.dtype)
            _C.fill_(ga._getitem(ctx.index), 0)
        if ctx.needs_input_grad[1]:
            gv = g._getitem(ctx.index)
        return ga, gv, None


class CopyFrom(Function):
    """dst.copy_(src): the new values come from src only."""

    node_name = "CopyBackwards"

    @staticmethod
    def forward(ctx, dst, src):
        out = _C.empty(tuple(dst.shape), dst.dtype, _dev_str(dst))
        return _C.copy_(out, src)

    @staticmethod
    def backward(ctx, g):
        return None, g


class Overwrite(Function):
    """fill_/zero_/uniform_/...: the old values get no gradient."""

    node_name = "FillBackward0"

    @staticmethod
    def forward(ctx, old, new):
        return new

    @staticmethod
    def backward(ctx, g):
        return None, None


def _check_inplace(t):
    """Checks an in-place op (grad mode on) on ``t``: raises PyTorch's
    errors for a leaf that requires grad or a view of one.  Returns the
    base tensor when t is a view of a non-leaf that is still alive (its
    history must change too), else None."""
    if not t.requires_grad:
        # a view of a tensor without history, written with values that
        # require grad: the base's history changes too.  Needs the C
        # engine's TensorBase._base (the viewed tensor; None for
        # non-views and for detach()); until it exists, only t changes.
        base = getattr(t, "_base", None)
        while base is not None:
            up = getattr(base, "_base", None)
            if up is None:
                break
            base = up
        if base is not None and base.requires_grad and \
                base.grad_fn is None:
            raise RuntimeError(_VIEW_LEAF_INPLACE_MSG)
        return base
    gf = _fresh_grad_fn(t)
    if gf is None:
        raise RuntimeError(_LEAF_INPLACE_MSG)
    if not gf._is_view:
        return None
    root = gf._root_ref() if gf._root_ref is not None else None
    if root is None:
        # the base is gone; only a leaf at the end of the chain matters
        node = gf
        while node is not None and node._is_view:
            node = node.next_functions[0][0]
        if node.__class__ is AccumulateGrad:
            raise RuntimeError(_VIEW_LEAF_INPLACE_MSG)
        return None
    if root.grad_fn is None:
        raise RuntimeError(_VIEW_LEAF_INPLACE_MSG)
    return root


def _rebase(t, out):
    """After writing ``out``'s values into ``t``, make ``t`` carry out's
    history (the in-place op becomes t's grad_fn)."""
    if out.grad_fn is None:
        return
    t.requires_grad = True
    t.grad_fn = out.grad_fn


def _rebase_view(view, base, out):
    """``view`` (a view of ``base``) now holds ``out``'s values: base's
    history becomes CopySlices(base's old history, out), and view's a
    strided view of the new base (PyTorch's CopySlices, in small)."""
    geom = (tuple(view.shape), view.stride(),
            view.storage_offset() - base.storage_offset())
    holder = CopySlices.apply(base, out, geom)
    base.requires_grad = True
    base.grad_fn = holder.grad_fn
    alias = AsStrided.apply(base, geom)
    view.requires_grad = True
    view.grad_fn = alias.grad_fn


def inplace(t, fn, *args, **kwargs):
    """Run the out-of-place Function ``fn`` on (t, *args) and write the
    result into ``t`` as an in-place op that autograd sees.  Used when grad
    mode is on and t or an argument requires grad."""
    base = _check_inplace(t)
    src = t
    if fn._saves_self:
        # the Function keeps its input for backward: give it a copy that
        # the write below does not change
        src = Clone.apply(t)
    out = fn.apply(src, *args, **kwargs)
    if out.shape != t.shape:
        raise RuntimeError(
            f"output with shape {list(t.shape)} doesn't match the broadcast "
            f"shape {list(out.shape)}")
    if out.dtype != t.dtype and (out.dtype.is_floating_point
                                 and not t.dtype.is_floating_point):
        raise RuntimeError(
            f"result type {out.dtype.name} can't be cast to the desired "
            f"output type {t.dtype.name}")
    _C.copy_(t, out)
    if base is None:
        _rebase(t, out)
    else:
        _rebase_view(t, base, out)
    return t


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


class CopySlices(Function):
    """The node an in-place op on a view leaves on the view's base: the
    written region's gradient goes to the new values, the rest to the
    base's old history."""

    node_name = "CopySlices"

    @staticmethod
    def forward(ctx, base, new, geom):
        ctx.geom = geom
        ctx.base_geom = (tuple(base.shape), base.stride())
        return base

    @staticmethod
    def backward(ctx, g):
        shape, stride = ctx.base_geom
        vshape, vstride, off = ctx.geom
        buf, gb = _zeros_like_geometry(g, shape, stride)
        _C.copy_(gb, g)
        region = buf._as_strided(vshape, vstride, off)
        gnew = _cast(region, region.dtype) if ctx.needs_input_grad[1] \
            else None
        _C.fill_(region, 0)
        return gb, gnew, None


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
        _C.copy_(buf._as_strided(vshape, vstride, off), g)
        return gb, None


class SetItemOutOfPlace(Function):
    """``a`` with a[index] = value, as a new tensor (for writes to views,
    through inplace())."""

    node_name = "CopySlices"

    @staticmethod
    def forward(ctx, a, value, index):
        ctx.index = index
        out = _cast(a, a.dtype)
        view = out._getitem(index)
        if isinstance(value, _TB):
            _C.copy_(view, value)
        else:
            _C.fill_(view, value)
        return out

    backward = SetItem.backward


for _cls in (Add, Sub, Neg, Exp, Sqrt, Relu, Sign, Cast, Clone, CopyFrom,
             Overwrite, SetItemOutOfPlace):
    _cls._saves_self = False
for _cls in (Mul, Div, Pow, Maximum, Minimum, Abs, Log, Clamp):
    _cls._saves_self = True
Function._saves_self = True
