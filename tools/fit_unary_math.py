"""Derive the polynomials of the unary math in csrc/elementwise_math.h,
csrc/trig_math.h and csrc/arc_hyp_math.h, each fitted by least squares in
relative error, reweighted toward the minimax (Lawson's iteration), on
Chebyshev nodes:

    sin r = r + r^3 S(r^2)             |r| <= 0.8 (pi/4 and the slack of
    cos r = 1 - r^2/2 + r^4 C(r^2)       a float32 quadrant choice)
    expm1 r = r + r^2 (1/2 + r E(r))   |r| <= 0.36 (ln 2 / 2 and slack)
    erf x = x P(x^2)                   |x| <= 1
    erfc a = e^(-a^2) A(a - 5/4)       0.46875 <= a <= 2
    erfc a = e^(-a^2) / a B(1/a^2)     2 <= a <= 10.1 (then erfc
                                       underflows float32)

S, C, E and P from their Taylor series (no cancellation in the targets),
A and B from scipy's erfcx.  The odd functions f x = x + x^3 Q(x^2) of
tan, asin/acos, atan/atan2, sinh, asinh and atanh are fitted in the
relative error of f itself (not of Q), with mpmath's f as the target:

    tan r                 |r| <= 0.8
    asin x                |x| <= 1/2 (and asin sqrt((1 - |x|) / 2) past it)
    atan t                |t| <= 1 (and 1/t past it)
    sinh x                |x| <= 2
    asinh x, atanh x      |x| <= 1/2

Prints the coefficients highest first (the Horner order the headers use),
the low part of the constant term where the header keeps it, and each
fit's relative error.  A developer's tool: needs scipy and mpmath (not
dependencies of ampc).

    python tools/fit_unary_math.py
"""
from math import factorial

import mpmath
import numpy as np
from scipy.special import erfcx


def series(terms):
    """f(u) = sum of c_n u^n, c_n from terms(n), summed in float64."""
    def f(u):
        return sum(terms(n) * u ** n for n in range(30))
    return f


def fit(f, lo, hi, degree, nodes=3000, rounds=80):
    """Coefficients (lowest first) of the polynomial in u on [lo, hi] and
    its max relative error against f."""
    k = np.arange(nodes)
    u = (lo + hi) / 2 + (hi - lo) / 2 * np.cos((2 * k + 1) * np.pi /
                                               (2 * nodes))
    basis = np.vander(u, degree + 1, increasing=True) / f(u)[:, None]
    w = np.ones(nodes)
    for _ in range(rounds):
        c, *_ = np.linalg.lstsq(basis * np.sqrt(w)[:, None], np.sqrt(w),
                                rcond=None)
        r = basis @ c - 1.0
        w = w * np.abs(r)
        w /= w.sum()
    return c, np.abs(r).max()


FITS = [
    ("sin S(s)", series(lambda n: (-1) ** (n + 1) / factorial(2 * n + 3)),
     0.0, 0.64, 3),
    ("cos C(s)", series(lambda n: (-1) ** n / factorial(2 * n + 4)),
     0.0, 0.64, 2),
    ("expm1 E(r)", series(lambda n: 1.0 / factorial(n + 3)), -0.36, 0.36, 4),
    ("erf P(s)", series(lambda n: 2 / np.sqrt(np.pi) * (-1) ** n /
                        (factorial(n) * (2 * n + 1))), 0.0, 1.0, 6),
    ("erfc A(a - 5/4)", lambda u: erfcx(u + 1.25), 0.46875 - 1.25, 0.75, 10),
    ("erfc B(1/a^2)", lambda s: erfcx(1 / np.sqrt(s)) / np.sqrt(s),
     1 / 10.1 ** 2, 0.25, 8),
]

# the fits whose constant term the headers add in two float parts
SPLIT = {"erf P(s)", "erfc B(1/a^2)"}


def fit_odd(f, hi, degree, nodes=600, rounds=60):
    """Q's coefficients (lowest first) for f x = x + x^3 Q(x^2) on (0, hi],
    minimising the relative error of f, and that error."""
    mpmath.mp.dps = 40
    k = np.arange(nodes)
    x = hi / 2 + hi / 2 * np.cos((2 * k + 1) * np.pi / (2 * nodes))
    exact = [f(mpmath.mpf(float(v))) for v in x]
    fx = np.array([float(e) for e in exact])
    rest = np.array([float(e - mpmath.mpf(float(v)))
                     for e, v in zip(exact, x)]) / fx
    basis = np.vander(x * x, degree + 1, increasing=True) * \
        (x ** 3 / fx)[:, None]
    w = np.ones(nodes)
    for _ in range(rounds):
        c, *_ = np.linalg.lstsq(basis * np.sqrt(w)[:, None],
                                rest * np.sqrt(w), rcond=None)
        r = basis @ c - rest
        w = w * np.abs(r)
        w /= w.sum()
    return c, np.abs(r).max()


ODD_FITS = [
    ("tan", mpmath.tan, 0.8, 6),
    ("asin", mpmath.asin, 0.5, 5),
    ("atan", mpmath.atan, 1.0, 8),
    ("sinh", mpmath.sinh, 2.0, 4),
    ("asinh", mpmath.asinh, 0.5, 4),
    ("atanh", mpmath.atanh, 0.5, 5),
]


def main():
    for name, f, lo, hi, degree in FITS:
        coef, err = fit(f, lo, hi, degree)
        print(f"{name} on [{lo:.6g}, {hi:.6g}], degree {degree}: relative "
              f"error {err:.3g}; highest first:")
        print("    " + ", ".join(f"{float(np.float32(c)):.9g}f"
                                 for c in coef[::-1]))
        if name in SPLIT:
            low = coef[0] - float(np.float32(coef[0]))
            print(f"    the constant term's low part: "
                  f"{float(np.float32(low)):.9g}f")
    for name, f, hi, degree in ODD_FITS:
        coef, err = fit_odd(f, hi, degree)
        print(f"{name} x = x + x^3 Q(x^2) on |x| <= {hi:g}, Q of degree "
              f"{degree}: relative error {err:.3g}; highest first:")
        print("    " + ", ".join(f"{float(np.float32(c)):.9g}f"
                                 for c in coef[::-1]))


if __name__ == "__main__":
    main()
