#!/usr/bin/env python3
"""Fits the polynomials of cln_softplus (cl/cln_activation.h): CLN_LOG1P_Q_ and CLN_SP_G_.

    python3 scripts/fit_softplus.py 32 0 9          # float: Q alone, on [0, 1] (no small form)
    python3 scripts/fit_softplus.py 64 0.5 16 6     # precision, small-form bound c, degrees of Q, G

softplus(x) takes its small form ln2 + x/2 + x^2 G(x^2) for |x| < c and its big form max(x, 0) +
log1p(t), t = e^-|x|, log1p(t) = t + t^2 Q(t), for |x| >= c, so Q is fitted on [0, e^-c] and G on
[0, c^2]; with c = 0 there is no small form and no G. Each polynomial is fitted by weighted least
squares on Chebyshev nodes (near-minimax), in 60-digit arithmetic (mpmath), to the relative error of
the result it feeds: t^2 (Q - Q*) / log1p(t), and z (G - G*) / softplus(-x) (the smaller of the two
results). The constant terms are exact (Q(0) = -1/2, G(0) = 1/8); the other coefficients are rounded
to the precision one at a time, from the lowest degree up, each rounding followed by a refit of the
higher ones to what the rounded ones leave. Prints the coefficients, highest degree first as the
Horner macros take them, and the largest error of the rounded polynomial in units of 2^-24 (float)
or 2^-53 (double) relative to the result. (e^r's CLN_EXPM1_P_ is older and not refitted here.) Needs
mpmath.
"""
import struct
import sys

import mpmath as mp

mp.mp.dps = 60


def round_to(c, prec):
    if prec == 32:
        return mp.mpf(struct.unpack("f", struct.pack("f", float(c)))[0])
    return mp.mpf(float(c))


def fit(f, w, b, deg, c0, prec):
    """Coefficients of a polynomial of degree deg on [0, b] with constant term c0."""
    nodes = 6 * (deg + 1) + 40
    xs = [b / 2 + b / 2 * mp.cos(mp.pi * (k + mp.mpf(1) / 2) / nodes) for k in range(nodes)]
    fixed = {0: c0}
    while len(fixed) < deg + 1:
        free = [j for j in range(deg + 1) if j not in fixed]
        a = mp.matrix(nodes, len(free))
        y = mp.matrix(nodes, 1)
        for i, x in enumerate(xs):
            for k, j in enumerate(free):
                a[i, k] = w(x) * x**j
            y[i] = w(x) * (f(x) - sum(v * x**j for j, v in fixed.items()))
        c = mp.lu_solve(a.T * a, a.T * y)
        fixed[free[0]] = round_to(c[0], prec)
    return [fixed[j] for j in range(deg + 1)]


def max_error(f, w, b, coeffs, points=3000):
    e = mp.mpf(0)
    for k in range(1, points + 1):
        x = b * mp.mpf(k) / points
        e = max(e, abs(w(x) * (mp.polyval(coeffs[::-1], x) - f(x))))
    return e


def q_exact(t):
    return (mp.log1p(t) - t) / t**2


def q_weight(t):
    return t**2 / mp.log1p(t)


def g_exact(z):
    x = mp.sqrt(z)
    return (mp.log1p(mp.e**x) - mp.log(2) - x / 2) / z


def g_weight(z):
    return z / mp.log1p(mp.e ** (-mp.sqrt(z)))


def main():
    if len(sys.argv) not in (4, 5) or (mp.mpf(sys.argv[2]) > 0) != (len(sys.argv) == 5):
        sys.exit("usage: fit_softplus.py PRECISION C DEGREE_Q [DEGREE_G] (DEGREE_G iff C > 0)")
    prec, c, q_deg = int(sys.argv[1]), mp.mpf(sys.argv[2]), int(sys.argv[3])
    g_deg = int(sys.argv[4]) if c > 0 else 0
    eps = mp.mpf(2) ** (-24 if prec == 32 else -53)
    widen = 1 + mp.mpf(2) ** -20  # the bounds as rounded in the state precision
    for name, f, w, b, deg, c0 in (
        ("CLN_LOG1P_Q_", q_exact, q_weight, mp.e ** (-c), q_deg, mp.mpf(-0.5)),
        ("CLN_SP_G_", g_exact, g_weight, c * c, g_deg, mp.mpf(1) / 8),
    ):
        if deg == 0:  # no small form
            continue
        coeffs = fit(f, w, b * widen, deg, c0, prec)
        err = max_error(f, w, b, coeffs) / eps
        print("%s: degree %d on [0, %.6g], max error %.4f" % (name, deg, float(b), float(err)))
        for v in coeffs[::-1]:
            print("    CLN_R(%r)" % float(v))


if __name__ == "__main__":
    main()
