"""The backward engine: ``backward`` and ``grad`` walk the graph from the
roots in dependency order and accumulate into the leaves' ``.grad``."""
import contextlib
import heapq
import itertools

from .. import _C
from .function import (AccumulateGrad, _accumulate_graph, _accumulate_into,
                       _dev_str, _fresh_grad_fn, _sum_to)
from .grad_mode import enable_grad, no_grad
from .multi_output import forget_slot_grads

_TB = _C.TensorBase
_binary = _C.binary
_cast = _C.cast


# ----------------------------------------------------------------------------
# the engine
class _GradCapture:
    """autograd.grad(): catches the gradients of the chosen inputs instead
    of accumulating them into ``.grad``.  The engine runs only the nodes on
    a path to an input and fills ``stops``: the inputs' nodes below which
    nothing is wanted (their own backward need not run)."""

    def __init__(self, nodes, leaf_ids, n, create_graph):
        self.nodes = nodes          # non-leaf input's grad_fn -> index
        self.leaf_ids = leaf_ids    # id(leaf input) -> index
        self.grads = [None] * n
        self.stops = frozenset()
        self.create_graph = create_graph

    def wanted(self, node):
        if node.__class__ is AccumulateGrad:
            return id(node.variable) in self.leaf_ids
        return node in self.nodes

    def capture(self, node, grad):
        """Record grad if node is wanted; True means: stop at this node
        (for a leaf: do not accumulate into its .grad, never wanted
        here)."""
        if node.__class__ is AccumulateGrad:
            i = self.leaf_ids.get(id(node.variable))
        else:
            i = self.nodes.get(node)
        if i is not None:
            g = self.grads[i]
            self.grads[i] = grad if g is None else (
                g + grad if self.create_graph else _binary("add", g, grad))
        return node.__class__ is AccumulateGrad or node in self.stops


def _needed(edges, wanted):
    """The nodes of the graph (``edges``) from which a wanted node can be
    reached, wanted ones included: the only ones autograd.grad() and
    backward(inputs=) run, as PyTorch's engine does, so no other node's
    backward or hooks run."""
    parents = {}
    for node, out in edges.items():
        for _, nxt in out:
            parents.setdefault(nxt, []).append(node)
    stack = [n for n in edges if wanted(n)]
    needed = set(stack)
    while stack:
        for p in parents.get(stack.pop(), ()):
            if p not in needed:
                needed.add(p)
                stack.append(p)
    return needed


def _check_root(i, t):
    if not isinstance(t, _TB):
        raise TypeError(
            f"backward(): element {i} of tensors must be a Tensor, but got "
            f"{type(t).__name__}")
    if not t.requires_grad:
        raise RuntimeError(
            f"element {i} of tensors does not require grad and does not "
            "have a grad_fn")


def _check_input(fn, i, t):
    """inputs[i] of grad() or backward(inputs=): a tensor that requires
    grad (no gradient could reach it otherwise)."""
    if not isinstance(t, _TB):
        raise TypeError(
            f"{fn}(): inputs[{i}] must be a Tensor, but got "
            f"{type(t).__name__}")
    if not t.requires_grad:
        raise RuntimeError(f"{fn}(): inputs[{i}] does not require grad")


def _make_root_grad(i, t, g, create_graph=False):
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
        if create_graph:
            with enable_grad():
                g = g.to(t.dtype)       # a grad_outputs with a graph
        else:
            g = _cast(g, t.dtype)
    return g


def _run_backward(roots, root_grads, retain_graph, capture=None,
                  create_graph=False):
    """Run the graph below ``roots`` (tensors) seeded with ``root_grads``.

    Nodes run when every gradient bound for them has arrived, latest-created
    first (PyTorch's order, so low-precision sums round the same way); all
    the AccumulateGrad nodes of one leaf are merged, so a leaf's gradient is
    summed in full before it is added into ``.grad``.  ``create_graph``:
    every gradient is computed with differentiable operations (the caller
    turns grad mode on), see higher_order.py.
    """
    canon = {}
    acc_cls = AccumulateGrad

    root_nodes = []
    buffers = {}
    # the nodes whose buffered gradient the engine made itself (a cast or a
    # sum) and holds nowhere else: a leaf may adopt it as .grad uncopied
    owned = set()
    for t, g in zip(roots, root_grads):
        node = _fresh_grad_fn(t)
        if node is None:
            node = AccumulateGrad(t)
        if node.__class__ is acc_cls:
            node = canon.setdefault(id(node.variable), node)
        if node in buffers:
            buffers[node] = _binary("add", buffers[node], g)
            owned.add(node)
        else:
            buffers[node] = g
            root_nodes.append(node)

    # dependency counts, by an iterative DFS; edges[node] = its (input
    # index, next node) pairs, the next node canonical (one AccumulateGrad
    # per leaf)
    deps = {}
    edges = {}
    stack = list(root_nodes)
    for node in stack:
        edges[node] = None
    while stack:
        node = stack.pop()
        out = []
        for k, (nxt, _) in enumerate(node.next_functions):
            if nxt is None:
                continue
            if nxt.__class__ is acc_cls:
                nxt = canon.setdefault(id(nxt.variable), nxt)
            out.append((k, nxt))
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in edges:
                edges[nxt] = None
                stack.append(nxt)
        edges[node] = out

    if capture is not None:
        needed = _needed(edges, capture.wanted)
        deps = {}
        for node in needed:
            out = [(k, nxt) for k, nxt in edges[node] if nxt in needed]
            edges[node] = out
            for _, nxt in out:
                deps[nxt] = deps.get(nxt, 0) + 1
        capture.stops = frozenset(n for n in needed if not edges[n])
        root_nodes = [n for n in root_nodes if n in needed]

    ready = []
    tie = itertools.count()
    push, pop = heapq.heappush, heapq.heappop
    for n in root_nodes:
        if deps.get(n, 0) == 0:
            push(ready, (-n._seq, next(tie), n))
    ran = []
    try:
        while ready:
            node = pop(ready)[2]
            grad = buffers.pop(node, None)
            if grad is not None:
                if create_graph:
                    grads = (node._apply(grad, capture, False, True)
                             if node.__class__ is acc_cls else
                             node._apply(grad, capture, True))
                elif node.__class__ is acc_cls and node in owned:
                    grads = node._apply(grad, capture, True)
                else:
                    grads = node._apply(grad, capture)
                owned.discard(node)
                if capture is None or node not in capture.stops:
                    # (a wanted input's node that stops the walk did not
                    # run its backward: its saved tensors stay, as in
                    # PyTorch, for a later backward through it)
                    ran.append(node)
            else:
                grads = ()
            metas = node._metas
            ng = len(grads)
            for k, nxt in edges[node]:
                gi = grads[k] if k < ng else None
                if gi is not None:
                    shape, dtype = metas[k]
                    made = False
                    if gi.shape != shape:
                        gi = _sum_to(node.name(), gi, shape, create_graph)
                    if gi.dtype != dtype:
                        gi = gi.to(dtype) if create_graph else \
                            _cast(gi, dtype)
                        made = True
                    old = buffers.get(nxt)
                    if old is not None:
                        gi = old + gi if create_graph else \
                            _binary("add", old, gi)
                        made = True
                    buffers[nxt] = gi
                    if made:    # (not made: nxt had no buffer, so no mark)
                        owned.add(nxt)
                left = deps[nxt] - 1
                deps[nxt] = left
                if left == 0:
                    push(ready, (-nxt._seq, next(tie), nxt))
    except BaseException:
        forget_slot_grads(ran)
        raise
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
    grads = [_make_root_grad(i, t, g, create_graph)
             for i, (t, g) in enumerate(zip(tensors, grad_tensors))]
    capture = None
    if inputs is not None:
        inputs = (inputs,) if isinstance(inputs, _TB) else tuple(inputs)
        if not inputs:
            raise RuntimeError(
                "`inputs` argument to `backward()` cannot be empty.")
        capture = _InputsOnly(inputs, create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    with _backward_mode(create_graph):
        _run_backward(tensors, grads, bool(retain_graph), capture,
                      create_graph)


@contextlib.contextmanager
def _backward_mode(create_graph):
    """No grad mode for an ordinary backward; for create_graph, grad mode
    on and autocast off (each gradient keeps its forward's dtype)."""
    if not create_graph:
        with no_grad():
            yield
        return
    with enable_grad(), _C.autocast("cpu", enabled=False), \
            _C.autocast("cuda", enabled=False):
        yield


class _InputsOnly:
    """backward(inputs=...): accumulate into the given tensors' ``.grad``
    only, leaves or not, running only the nodes on a path to them."""

    def __init__(self, inputs, create_graph):
        self.accumulate = _accumulate_graph if create_graph else \
            _accumulate_into
        self.leaf_ids = set()
        self.nodes = {}             # non-leaf input's grad_fn -> the input
        for i, t in enumerate(inputs):
            _check_input("backward", i, t)
            if t.grad_fn is None:
                self.leaf_ids.add(id(t))
            else:
                self.nodes[t.grad_fn] = t
        self.stops = frozenset()

    def wanted(self, node):
        if node.__class__ is AccumulateGrad:
            return id(node.variable) in self.leaf_ids
        return node in self.nodes

    def capture(self, node, grad):
        if node.__class__ is AccumulateGrad:
            return False            # a wanted leaf (no other runs)
        t = self.nodes.get(node)
        if t is not None and not t._retains_grad:   # (else already done)
            self.accumulate(t, grad)
        return node in self.stops


def grad(outputs, inputs, grad_outputs=None, retain_graph=None,
         create_graph=False, allow_unused=False):
    """Return the gradients of ``outputs`` w.r.t. ``inputs`` without
    touching any ``.grad``.

    >>> import ampc
    >>> x = ampc.tensor([1.0, 2.0], requires_grad=True)
    >>> ampc.autograd.grad((x * x).sum(), x)
    (tensor([2., 4.]),)
    """
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
        _check_input("grad", i, t)
        if t.grad_fn is None:
            slot.append(leaf_ids.setdefault(id(t), i))
        else:
            slot.append(nodes.setdefault(t.grad_fn, i))
    cap = _GradCapture(nodes, leaf_ids, len(inputs), create_graph)
    grads = [_make_root_grad(i, t, g, create_graph)
             for i, (t, g) in enumerate(zip(outputs, grad_outputs))]
    if retain_graph is None:
        retain_graph = create_graph
    with _backward_mode(create_graph):
        _run_backward(outputs, grads, bool(retain_graph), cap, create_graph)
    result = []
    for i, t in enumerate(inputs):
        g = cap.grads[slot[i]]
        if g is None and not allow_unused:
            raise RuntimeError(
                f"One of the differentiated Tensors (inputs[{i}]) appears "
                "to not have been used in the graph. Set allow_unused=True "
                "if this is the desired behavior.")
        if g is not None and g.dtype != t.dtype:
            if create_graph:
                with enable_grad():
                    g = g.to(t.dtype)
            else:
                g = _cast(g, t.dtype)
        result.append(g)
    return tuple(result)
