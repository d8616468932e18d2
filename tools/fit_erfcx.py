"""Derive the polynomial Q of csrc/activation_math.h's normal CDF:
erfc(a) = t Q(t) exp(-a^2) with t = 1 / (1 + a/2), so Q(t) = erfcx(a) / t,
fitted on t in [1 / (1 + 9.5/2), 1] (a in [0, 9.5]; past that Phi(-x)
underflows float32) by least squares in relative error, reweighted toward
the minimax (Lawson's iteration), on Chebyshev nodes.  Prints the
coefficients highest first (the Horner order the header uses), the fit's
relative error and the error of a float32 Horner evaluation with fused
multiply-adds.  A developer's tool: needs scipy (not a dependency of ampc).

    python tools/fit_erfcx.py [--degree 8]
"""
import argparse

import numpy as np
from scipy.special import erfcx

LO, HI = 1.0 / (1.0 + 9.5 / 2.0), 1.0


def target(t):
    return erfcx(2.0 * (1.0 - t) / t) / t


def fit(degree, nodes=4000, rounds=60):
    """Coefficients (lowest first, float64) and the fit's max relative
    error."""
    k = np.arange(nodes)
    t = (LO + HI) / 2 + (HI - LO) / 2 * np.cos((2 * k + 1) * np.pi /
                                               (2 * nodes))
    u = (2 * t - (LO + HI)) / (HI - LO)
    basis = np.polynomial.chebyshev.chebvander(u, degree) / target(t)[:, None]
    w = np.ones(nodes)
    for _ in range(rounds):
        c, *_ = np.linalg.lstsq(basis * np.sqrt(w)[:, None], np.sqrt(w),
                                rcond=None)
        r = basis @ c - 1.0
        w = w * np.abs(r)
        w /= w.sum()
    cheb = np.polynomial.Chebyshev(c, domain=[LO, HI])
    return cheb.convert(kind=np.polynomial.Polynomial).coef, np.abs(r).max()


def float32_error(coef):
    """Max relative error of Horner in float32 with an fma per step."""
    c = coef.astype(np.float32)
    t = np.linspace(LO, HI, 400001).astype(np.float32)
    q = np.full_like(t, c[-1])
    for ci in c[-2::-1]:
        # float32 operands, one rounding per fma (float64 holds the exact
        # product of two float32s)
        q = (q.astype(np.float64) * t + np.float64(ci)).astype(np.float32)
    return np.abs(q / target(t.astype(np.float64)) - 1.0).max()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--degree", type=int, default=8)
    args = p.parse_args()
    coef, err = fit(args.degree)
    print("coefficients, highest first:")
    for c in coef[::-1]:
        print(f"    {float(np.float32(c)):.9g}f")
    print(f"fit max relative error {err:.3g}; float32 Horner "
          f"{float32_error(coef):.3g}")


if __name__ == "__main__":
    main()
