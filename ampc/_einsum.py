"""``ampc.einsum``: PyTorch's Einstein summation, reduced to sums,
permutes, reshapes and batched matrix products (so it runs on the GEMM,
with autograd and autocast through them).

Operands are contracted left to right, two at a time: a label only one
operand still needs is summed away first; then the labels both share and
some later operand or the output needs are the batch, the others both
share are contracted, and the rest are the rows and columns of one
``matmul`` of (batch, rows, contracted) by (batch, contracted, columns).
Size-1 dims broadcast, as in PyTorch.  A label repeated within one operand
first becomes one dim, the diagonal (a strided view, ``Tensor.diagonal``),
so 'ii->i' is the diagonal and 'ii' the trace.  The sublist format is not
supported.

>>> import ampc
>>> ampc.einsum("ij,jk->ik", ampc.ones(2, 3), ampc.ones(3, 4)).shape
ampc.Size([2, 4])
>>> ampc.einsum("bij,bkj->bik", ampc.ones(5, 2, 3),
...             ampc.ones(5, 4, 3)).shape
ampc.Size([5, 2, 4])
>>> ampc.einsum("bij,bkj", ampc.ones(5, 2, 3), ampc.ones(5, 4, 3)).shape
ampc.Size([2, 4])
"""
from . import _C

_TB = _C.TensorBase
_ELL = "..."


def _parse_term(term, offset, k):
    """A term's labels, with '...' kept as one entry; offset: the term's
    position in the equation, for errors."""
    labels, i = [], 0
    while i < len(term):
        ch = term[i]
        if ch == ".":
            if term[i:i + 3] != _ELL:
                raise RuntimeError(
                    f"einsum(): found '.' for operand {k} that is not part "
                    "of any ellipsis")
            if _ELL in labels:
                raise RuntimeError(
                    f"einsum(): found '.' for operand {k} for which an "
                    "ellipsis was already found")
            labels.append(_ELL)
            i += 3
            continue
        if not ch.isascii() or not ch.isalpha():
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {offset + i} in "
                "the equation string, subscripts must be in [a-zA-Z]")
        labels.append(ch)
        i += 1
    return labels


def _expand_ellipsis(labels, ndim, k):
    """Labels with '...' replaced by one label per dim it covers
    ((0, d): the d-th of the ellipsis' dims counted from the right)."""
    named = len(labels) - (_ELL in labels)
    if _ELL not in labels:
        if named != ndim:
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation "
                f"({named}) does not match the number of dimensions "
                f"({ndim}) for operand {k} and no ellipsis was given")
        return labels
    if named > ndim:
        raise RuntimeError(
            f"einsum(): the number of subscripts in the equation ({named}) "
            f"is more than the number of dimensions ({ndim}) for operand {k}")
    n = ndim - named
    at = labels.index(_ELL)
    return (labels[:at] + [(0, n - 1 - d) for d in range(n)]
            + labels[at + 1:])


def _parse(equation, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than "
                           "specified in the equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than "
                           "specified in the equation")
    ins, offset, ell = [], 0, 0
    for k, (term, t) in enumerate(zip(terms, operands)):
        labels = _parse_term(term, offset, k)
        offset += len(term) + 1
        labels = _expand_ellipsis(labels, t.ndim, k)
        ell = max(ell, sum(isinstance(x, tuple) for x in labels))
        ins.append(labels)
    ell_labels = [(0, d) for d in reversed(range(ell))]
    if arrow:
        out = _parse_term(rhs, len(lhs) + 2, len(terms))
        named = [x for x in out if x != _ELL]
        for x in named:
            if named.count(x) > 1:
                raise RuntimeError(
                    f"einsum(): output subscript {x} appears more than once "
                    "in the output")
            if not any(x in labels for labels in ins):
                raise RuntimeError(
                    f"einsum(): output subscript {x} does not appear in the "
                    "equation for any input operand")
        if _ELL in out:
            at = out.index(_ELL)
            out = out[:at] + ell_labels + out[at + 1:]
    else:
        # implicit: the ellipsis dims, then the labels seen once, sorted
        counts = {}
        for labels in ins:
            for x in labels:
                if not isinstance(x, tuple):
                    counts[x] = counts.get(x, 0) + 1
        out = ell_labels + sorted(x for x, c in counts.items() if c == 1)
    return ins, out


def _diagonals(t, labels, k):
    """t with each subscript repeated within it reduced to one dim by
    taking the diagonal (a strided view): (t, its labels, each once)."""
    labels = list(labels)
    for q in range(len(labels) - 1, 0, -1):
        x = labels[q]
        if x not in labels[:q]:
            continue
        p = labels.index(x)
        if t.shape[p] != t.shape[q]:
            raise RuntimeError(
                f"einsum(): subscript {x} is repeated for operand {k} but "
                f"the sizes don't match, {t.shape[q]} != {t.shape[p]}")
        t = t.diagonal(0, p, q)
        labels = [y for i, y in enumerate(labels) if i not in (p, q)] + [x]
    return t, labels


def _sizes(ins, operands):
    """Each label's size over the operands (size-1 dims broadcast)."""
    sizes = {}
    for k, (labels, t) in enumerate(zip(ins, operands)):
        for x, n in zip(labels, t.shape):
            seen = sizes.get(x, 1)
            if n != 1 and seen != 1 and n != seen:
                name = "..." if isinstance(x, tuple) else x
                raise RuntimeError(
                    f"einsum(): subscript {name} has size {n} for operand "
                    f"{k} which does not broadcast with previously seen size "
                    f"{seen}")
            sizes[x] = max(seen, n)
    return sizes


def _sum_away(t, labels, keep):
    """t with the labels not in ``keep`` summed out."""
    gone = [i for i, x in enumerate(labels) if x not in keep]
    if gone:
        t = t.sum(tuple(gone))
        labels = [x for x in labels if x in keep]
    return t, labels


def _arranged(t, labels, order, sizes):
    """t permuted to the label order ``order`` (every label of t in it),
    size-1 dims expanded to the label's size."""
    t = t.permute(*[labels.index(x) for x in order]) if order else t
    shape = tuple(sizes[x] for x in order)
    return t.expand(*shape) if tuple(t.shape) != shape else t


def _prod(sizes, labels):
    n = 1
    for x in labels:
        n *= sizes[x]
    return n


def _contract(a, la, b, lb, needed, sizes):
    """The product of a and b summed over their shared labels that no one
    else needs: (result, its labels)."""
    batch = [x for x in la if x in lb and x in needed]
    summed = [x for x in la if x in lb and x not in needed]
    rows = [x for x in la if x not in lb]
    cols = [x for x in lb if x not in la]
    a = _arranged(a, la, batch + rows + summed, sizes)
    b = _arranged(b, lb, batch + summed + cols, sizes)
    nb, nr = _prod(sizes, batch), _prod(sizes, rows)
    ns, nc = _prod(sizes, summed), _prod(sizes, cols)
    out = a.reshape(nb, nr, ns).matmul(b.reshape(nb, ns, nc))
    labels = batch + rows + cols
    return out.reshape(*[sizes[x] for x in labels]), labels


def einsum(*args):
    """``einsum(equation, *operands)`` (or ``einsum(equation, [operands])``):
    the sum over the repeated subscripts of the products of the operands'
    elements, PyTorch's semantics: '->' names the output's subscripts
    (implicitly: those that appear once, sorted, after the ellipsis'
    dims), '...' stands for broadcast dims.

    >>> import ampc
    >>> ampc.einsum("i,i", ampc.ones(3), ampc.ones(3))
    tensor(3.)
    """
    if not args or not isinstance(args[0], str):
        raise TypeError("einsum(): expected the equation (a str) first; "
                        "ampc does not support the sublist format")
    equation, operands = args[0], list(args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    for i, t in enumerate(operands):
        if not isinstance(t, _TB):
            raise TypeError(
                f"einsum(): expected Tensor as element {i} in argument 1, "
                f"but got {type(t).__name__}")
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    ins, out = _parse(equation, operands)
    for k, t in enumerate(operands):
        operands[k], ins[k] = _diagonals(t, ins[k], k)
    sizes = _sizes(ins, operands)
    t, labels = operands[0], ins[0]
    for k in range(len(operands)):
        later = set(out)
        for rest in ins[k + 1:]:
            later.update(rest)
        if k == 0:
            t, labels = _sum_away(t, labels, later)
            continue
        b, lb = _sum_away(operands[k], ins[k], later | set(labels))
        t, labels = _sum_away(t, labels, later | set(lb))
        t, labels = _contract(t, labels, b, lb, later, sizes)
    t, labels = _sum_away(t, labels, set(out))
    return _arranged(t, labels, out, sizes)
