"""``nn.init.trunc_normal_``: N(mean, std^2) conditioned on [a, b], by
rejection in float64 from draws of ampc's generator (``ampc.manual_seed``
makes it repeatable), so that, unlike an inverse-CDF method, it keeps full
relative precision deep in the tails.  With m the interval's point nearest
the mean, in standard units:

- an interval holding at least 5% of the normal's mass keeps the normal
  draws that fall inside it;
- a tail interval wider than 1/|m| (|m| >= 1) draws x = m + E/m, E
  exponential, and keeps it with probability exp(-(x - m)^2 / 2) (Robert's
  exponential proposal, which accepts most draws however far out the tail
  lies);
- any other (narrow) draws x uniformly over it and keeps it with
  probability exp((m^2 - x^2) / 2), the density over its largest value on
  the interval (at least e^-1.5 of the time).
"""
import math
import warnings

import numpy as np

from .. import _creation
from ..autograd import no_grad

_NORMAL_PROPOSAL_MASS = 0.05


def _mass(lo, hi):
    """P(lo <= Z <= hi) for a standard normal Z."""
    if lo >= 0:
        return 0.5 * (math.erfc(lo / math.sqrt(2)) -
                      math.erfc(hi / math.sqrt(2)))
    if hi <= 0:
        return _mass(-hi, -lo)
    return 1.0 - _mass(hi, math.inf) - _mass(-lo, math.inf)


def _draw(lo, hi, count, device):
    """Up to ``count`` accepted standard-normal samples in [lo, hi] from
    one round of proposals (float64)."""
    if _mass(lo, hi) >= _NORMAL_PROPOSAL_MASS:
        z = _creation.randn(count, device=device).cpu().numpy()
        z = z.astype(np.float64)
        return z[(z >= lo) & (z <= hi)]
    m = min(max(0.0, lo), hi)
    u = _creation.rand(2, count, device=device).cpu().numpy()
    u = u.astype(np.float64)
    if abs(m) >= 1.0 and (hi - lo) * abs(m) > 1.0:
        if m < 0:
            return -_tail(-hi, -lo, u)
        return _tail(lo, hi, u)
    x = lo + (hi - lo) * u[0]
    return x[u[1] < np.exp((m - x) * (m + x) / 2)]


def _tail(lo, hi, u):
    """Accepted samples in [lo, hi], 1 <= lo, from uniforms u (2, count)."""
    x = lo - np.log1p(-u[0]) / lo
    return x[(u[1] < np.exp(-(x - lo) ** 2 / 2)) & (x <= hi)]


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0,
                  generator=None):
    """Fill ``tensor`` from N(mean, std^2) truncated to [a, b].

    >>> import ampc
    >>> t = ampc.nn.init.trunc_normal_(ampc.empty(1000), std=0.02,
    ...                                a=-0.04, b=0.04)
    >>> bool((t.abs() <= 0.04).all())
    True
    """
    from .init import _check
    _check("trunc_normal_", tensor, generator)
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.", stacklevel=2)
    if not std > 0 or not a < b:
        raise ValueError(
            f"trunc_normal_(): expected std > 0 and a < b, but got std={std}, "
            f"a={a}, b={b}")
    n = tensor.numel()
    lo, hi = (a - mean) / std, (b - mean) / std
    out = np.empty(n, dtype=np.float64)
    filled, rate = 0, 1.0
    while filled < n:
        want = n - filled
        count = int(min(max(want / rate * 1.2, 1024), 1 << 24))
        got = _draw(lo, hi, count, tensor.device)
        rate = max(len(got) / count, 1e-6)
        take = min(len(got), want)
        out[filled:filled + take] = got[:take]
        filled += take
    values = np.clip(out * std + mean, a, b).astype(np.float32)
    with no_grad():
        src = _creation.tensor(values.reshape(tuple(tensor.shape)),
                               device=tensor.device)
        tensor.copy_(src)
        return tensor.clamp_(a, b)
