"""``ampc.testing``: helpers for users' test suites that check mixed
precision code.

* ``assert_close(actual, expected, rtol=None, atol=None, equal_nan=False,
  check_dtype=True, msg=None)``: torch.testing's comparison with its
  dtype-aware default tolerances, for ampc tensors, NumPy arrays, numbers
  (and torch tensors, and lists/tuples/dicts of these), reporting the
  number of mismatches, the greatest absolute and relative differences with
  their indices, and the worst elements.
* ``plant_nonfinite(x, index=None, value=inf)``: put inf or NaN into one
  element of a parameter's ``.grad`` (or of a tensor), to test the
  skip-on-overflow path of a GradScaler loop.
* ``count_nonfinite(tensors)`` and ``assert_all_finite(tensors)``: inf and
  NaN counts from the fused AMP check kernel (one pass, nothing written).

>>> import ampc
>>> from ampc.testing import assert_close
>>> assert_close(ampc.tensor([1.0, 2.0]), ampc.tensor([1.0, 2.0 + 1e-7]))
>>> w = ampc.nn.Parameter(ampc.zeros(4))
>>> w.grad = ampc.zeros(4)
>>> ampc.testing.plant_nonfinite(w, index=2)
2
>>> ampc.testing.count_nonfinite([w])
{'inf': 1, 'nan': 0}
"""
import math
import numbers

import numpy as np

from . import _C

__all__ = ["assert_close", "default_tolerances", "plant_nonfinite",
           "count_nonfinite", "assert_all_finite"]

_TB = _C.TensorBase

# torch.testing's defaults: dtype -> (rtol, atol)
_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}

_SHOW_WORST = 5


def default_tolerances(dtype):
    """``(rtol, atol)`` that ``assert_close`` uses for ``dtype`` (an ampc,
    NumPy or torch dtype, or its name); integers and bools compare exactly.

    >>> import ampc
    >>> ampc.testing.default_tolerances(ampc.float16)
    (0.001, 1e-05)
    """
    return _TOLERANCES.get(_dtype_name(dtype), (0.0, 0.0))


def _dtype_name(dtype):
    if isinstance(dtype, type) and issubclass(dtype, np.generic):
        dtype = np.dtype(dtype)
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = str(dtype)
    name = name.split(".")[-1]
    return {"float": "float32", "half": "float16", "double": "float64",
            "long": "int64", "bool_": "bool"}.get(name, name)


class _Value:
    """One side of a comparison: float64 (or int64/bool) values, shape,
    dtype name, and what it was (for messages)."""

    def __init__(self, obj, side):
        self.kind = "number"
        if isinstance(obj, _TB):
            self.kind = "ampc.Tensor"
            self.dtype = obj.dtype.name
            t = obj.detach()
            if t.device_type != "cpu":
                t = t.cpu()
            if self.dtype == "bfloat16":
                t = t.float()
            self.array = np.array(t.numpy())
        elif isinstance(obj, np.ndarray) or isinstance(obj, np.generic):
            self.kind = "numpy.ndarray"
            self.array = np.asarray(obj)
            self.dtype = _dtype_name(self.array.dtype)
        elif (type(obj).__module__.startswith("torch")
              and hasattr(obj, "detach")):
            self.kind = "torch.Tensor"
            self.dtype = _dtype_name(obj.dtype)
            t = obj.detach().cpu()
            if self.dtype == "bfloat16":
                t = t.float()
            self.array = t.numpy()
        elif isinstance(obj, bool):
            self.array, self.dtype = np.asarray(obj), "bool"
        elif isinstance(obj, numbers.Integral):
            self.array, self.dtype = np.asarray(int(obj)), "int64"
        elif isinstance(obj, numbers.Real):
            self.array, self.dtype = np.asarray(float(obj)), "float64"
        else:
            raise TypeError(
                f"assert_close(): {side} must be an ampc tensor, a NumPy "
                "array, a number, or a list/tuple/dict of these, but got "
                f"{type(obj).__name__}")
        self.shape = tuple(self.array.shape)


def _is_container(obj):
    return isinstance(obj, (list, tuple, dict))


def _compare_containers(actual, expected, path, kwargs):
    if isinstance(actual, dict) != isinstance(expected, dict):
        other = expected if isinstance(actual, dict) else actual
        raise AssertionError(
            f"{path or 'The inputs'}: a dict is compared with a "
            f"{type(other).__name__}")
    if isinstance(actual, dict):
        if set(actual) != set(expected):
            raise AssertionError(
                f"{path or 'The inputs'}: the keys do not match: "
                f"{sorted(map(repr, actual))} != "
                f"{sorted(map(repr, expected))}")
        for k in actual:
            _compare(actual[k], expected[k], f"{path}[{k!r}]", kwargs)
        return
    if len(actual) != len(expected):
        raise AssertionError(
            f"{path or 'The inputs'}: the lengths do not match: "
            f"{len(actual)} != {len(expected)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        _compare(a, e, f"{path}[{i}]", kwargs)


def _index(flat, shape):
    if len(shape) == 0:
        return "()"
    return str(tuple(int(i) for i in np.unravel_index(flat, shape)))


def _fmt(v):
    return repr(float(v)) if isinstance(v, (float, np.floating)) else repr(v)


def _report(a, e, ok, rtol, atol, exact):
    """torch.testing's mismatch message, plus the worst elements."""
    af = a.astype(np.float64).reshape(-1)
    ef = e.astype(np.float64).reshape(-1)
    bad = np.flatnonzero(~ok.reshape(-1))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        absdiff = np.abs(af - ef)
        reldiff = absdiff / np.abs(ef)
    # a NaN or inf on one side is the worst possible difference
    absdiff = np.where(np.isnan(absdiff), np.inf, absdiff)
    reldiff = np.where(np.isnan(reldiff), np.inf, reldiff)
    total = ok.size
    title = ("Scalars are not " if a.ndim == 0 else "Tensor-likes are not ") \
        + ("equal!" if exact else "close!")
    lines = [title, ""]
    if a.ndim > 0:
        lines.append(f"Mismatched elements: {bad.size} / {total} "
                     f"({100.0 * bad.size / total:.1f}%)")
    ia = bad[np.argmax(absdiff[bad])]
    ir = bad[np.argmax(reldiff[bad])]
    where_a = f" at index {_index(ia, a.shape)}" if a.ndim else ""
    where_r = f" at index {_index(ir, a.shape)}" if a.ndim else ""
    if exact:
        lines.append(f"Greatest absolute difference: {_fmt(absdiff[ia])}"
                     f"{where_a}")
        lines.append(f"Greatest relative difference: {_fmt(reldiff[ir])}"
                     f"{where_r}")
    else:
        lines.append(f"Greatest absolute difference: {_fmt(absdiff[ia])}"
                     f"{where_a} (up to {atol} allowed)")
        lines.append(f"Greatest relative difference: {_fmt(reldiff[ir])}"
                     f"{where_r} (up to {rtol} allowed)")
    if a.ndim > 0:
        worst = bad[np.argsort(-absdiff[bad], kind="stable")][:_SHOW_WORST]
        lines.append(f"Worst mismatches ({len(worst)} of {bad.size}):")
        for i in worst:
            lines.append(f"  index {_index(i, a.shape)}: actual "
                         f"{_fmt(af[i])}, expected {_fmt(ef[i])}, "
                         f"|diff| {_fmt(absdiff[i])}")
    return "\n".join(lines)


def _compare(actual, expected, path, kwargs):
    if _is_container(actual) or _is_container(expected):
        if not (_is_container(actual) and _is_container(expected)):
            raise AssertionError(
                f"{path or 'The inputs'}: a {type(actual).__name__} is "
                f"compared with a {type(expected).__name__}")
        _compare_containers(actual, expected, path, kwargs)
        return
    rtol, atol = kwargs["rtol"], kwargs["atol"]
    a = _Value(actual, "actual")
    e = _Value(expected, "expected")
    where = f" ({path})" if path else ""
    if a.shape != e.shape:
        _fail(kwargs, f"The values for attribute 'shape' do not match: "
                      f"{a.shape} != {e.shape}{where}.")
    both_tensors = a.kind != "number" and e.kind != "number"
    if kwargs["check_dtype"] and both_tensors and a.dtype != e.dtype:
        _fail(kwargs, f"The values for attribute 'dtype' do not match: "
                      f"{a.dtype} != {e.dtype}{where}.")
    if rtol is None:
        ra, aa = default_tolerances(a.dtype)
        re, ae = default_tolerances(e.dtype)
        rtol, atol = max(ra, re), max(aa, ae)
    exact = rtol == 0 and atol == 0
    av = a.array.astype(np.float64)
    ev = e.array.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        # inf matches only the same inf; NaN only NaN, with equal_nan
        finite = np.isfinite(av) & np.isfinite(ev)
        ok = (av == ev) | (finite &
                           (np.abs(av - ev) <= atol + rtol * np.abs(ev)))
        if kwargs["equal_nan"]:
            ok |= np.isnan(av) & np.isnan(ev)
    if not ok.all():
        _fail(kwargs, _report(av, ev, ok, rtol, atol, exact)
              + (f"\n({path})" if path else ""))


def _fail(kwargs, message):
    msg = kwargs["msg"]
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = msg
    raise AssertionError(message)


def assert_close(actual, expected, rtol=None, atol=None, equal_nan=False,
                 check_dtype=True, msg=None):
    """Assert ``|actual - expected| <= atol + rtol * |expected|`` element
    by element, with torch.testing's default tolerances for the dtypes
    (float32 1.3e-6/1e-5, float16 1e-3/1e-5, bfloat16 1.6e-2/1e-5, float64
    1e-7/1e-7, integers and bool exact; the looser of the two sides when
    they differ).  inf must match the same inf; NaN matches NaN only with
    ``equal_nan``.  Shapes must match, and dtypes too when both sides are
    tensors or arrays and ``check_dtype``.  ``msg`` replaces the report (a
    callable gets the report and returns the message).

    >>> import ampc
    >>> ampc.testing.assert_close(ampc.tensor([1.0, 2.0]).half(),
    ...                           ampc.tensor([1.0, 2.001]).half())
    >>> ampc.testing.assert_close(ampc.tensor([1.0, 2.5]),
    ...                           ampc.tensor([1.0, 2.0]))
    Traceback (most recent call last):
    ...
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 2 (50.0%)
    Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)
    Greatest relative difference: 0.25 at index (1,) (up to 1.3e-06 allowed)
    Worst mismatches (1 of 1):
      index (1,): actual 2.5, expected 2.0, |diff| 0.5
    """
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(
            "Both 'rtol' and 'atol' must be either specified or omitted, "
            f"but got no {missing}.")
    kwargs = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan,
              "check_dtype": check_dtype, "msg": msg}
    _compare(actual, expected, "", kwargs)


# ----------------------------------------------------------------------------
# inf/NaN helpers for GradScaler tests


def _target(x, fn):
    """The tensor to plant into: a parameter's .grad, else x itself."""
    if not isinstance(x, _TB):
        raise TypeError(f"{fn}(): expected a tensor or parameter, got "
                        f"{type(x).__name__}")
    if x.requires_grad:
        if x.grad is None:
            raise ValueError(
                f"{fn}(): the parameter has no .grad yet: run backward() "
                "first (or pass the gradient tensor itself)")
        return x.grad
    return x


def plant_nonfinite(x, index=None, value=math.inf):
    """Write ``value`` (inf by default; -inf or nan too) into one element
    of ``x.grad`` when ``x`` requires grad, else of ``x`` itself, and
    return the element's flat index.  ``index``: a flat int or a tuple of
    ints (negative counts from the end); None: element 0.

    >>> import ampc, math
    >>> g = ampc.zeros(2, 3)
    >>> ampc.testing.plant_nonfinite(g, (1, 2), value=math.nan)
    5
    >>> g.isnan().sum().item()
    1
    """
    t = _target(x, "plant_nonfinite")
    n = t.numel()
    if n == 0:
        raise ValueError("plant_nonfinite(): the tensor has no elements")
    shape = tuple(t.shape)
    if index is None:
        flat = 0
    elif isinstance(index, tuple):
        if len(index) != len(shape):
            raise IndexError(
                f"plant_nonfinite(): index {index} has {len(index)} "
                f"entries, but the tensor has {len(shape)} dimensions")
        idx = []
        for i, s in zip(index, shape):
            if not -s <= i < s:
                raise IndexError(f"plant_nonfinite(): index {index} is out "
                                 f"of range for shape {shape}")
            idx.append(i % s)
        flat = int(np.ravel_multi_index(idx, shape)) if shape else 0
    else:
        if not -n <= index < n:
            raise IndexError(f"plant_nonfinite(): flat index {index} is out "
                             f"of range for {n} elements")
        flat = index % n
    pos = tuple(int(i) for i in np.unravel_index(flat, shape)) \
        if shape else ()
    t[pos] = float(value)
    return flat


def count_nonfinite(tensors):
    """``{"inf": ..., "nan": ...}`` over ``tensors`` (tensors or
    parameters, whose .grad is counted; None grads are skipped), in one
    fused pass that writes nothing.

    >>> import ampc, math
    >>> ampc.testing.count_nonfinite([ampc.tensor([1.0, math.inf, math.nan])])
    {'inf': 1, 'nan': 1}
    """
    if isinstance(tensors, _TB):
        tensors = [tensors]
    ts = []
    for x in tensors:
        if isinstance(x, _TB) and x.requires_grad:
            if x.grad is not None:
                ts.append(x.grad)
        else:
            ts.append(_target(x, "count_nonfinite"))
    # one pass per device: the fused op takes the tensors of one device
    by_device = {}
    for t in ts:
        by_device.setdefault(str(t.device), []).append(t)
    inf = nan = 0
    for group in by_device.values():
        counts = _C._amp_count_nonfinite(group)
        inf += sum(c[0] for c in counts)
        nan += sum(c[1] for c in counts)
    return {"inf": inf, "nan": nan}


def assert_all_finite(tensors, msg=None):
    """Raise AssertionError when any of ``tensors`` (or of the parameters'
    gradients) holds inf or NaN.

    >>> import ampc
    >>> ampc.testing.assert_all_finite([ampc.ones(3)])
    """
    c = count_nonfinite(tensors)
    if c["inf"] or c["nan"]:
        raise AssertionError(
            msg or f"found {c['inf']} inf and {c['nan']} NaN elements")
