#!/usr/bin/env python3
"""Fit the rational erf of the CPU kernels' GELU (vgelu in ggml/kernels/kernels_body.h).

erf(x/√2) ≈ x·P(x²)/Q(x²) on |x| ≤ 4√2 (erf(4) rounds to 1 in float32), P of degree 7 and Q of
degree 4 in x², Q(0) = 1: a minimax fit of the absolute error of erf by Lawson's iteration on a
linearised least-squares problem (Sanathanan-Koerner weights 1/Q), in Chebyshev polynomials of
z²/16 for conditioning. It prints the error in double, the worst error of the whole GELU
x·(Q + x·P)/(2Q) evaluated in float32 (without fused multiply-adds, so a little pessimistic)
against the bound TestGELUAccuracy uses, and the coefficients as the kernel writes them.

Usage: python3 scripts/gelu_fit.py   (numpy and scipy)
"""
import numpy as np
from scipy.special import erf

NP, NQ, ZMAX = 7, 4, 4.0


def fit():
    z = np.unique(np.concatenate([np.linspace(0, ZMAX, 40000), ZMAX * np.sin(np.linspace(0, np.pi / 2, 8000))]))
    s = (z / ZMAX) ** 2
    f = np.where(z > 0, erf(z) / np.where(z > 0, z, 1), 2 / np.sqrt(np.pi))  # erf(z)/z
    vp = np.polynomial.chebyshev.chebvander(2 * s - 1, NP)
    vq = np.polynomial.chebyshev.chebvander(2 * s - 1, NQ)
    q_prev, lw, best = np.ones_like(s), np.ones_like(s), (np.inf, None)
    for _ in range(300):
        a = np.hstack([vp, -(f[:, None] * vq[:, 1:])])  # P − f·(Q − T0) = f
        w = np.maximum(z, 1e-3) / np.abs(q_prev) * np.sqrt(lw)
        c, *_ = np.linalg.lstsq(a * w[:, None], f * w, rcond=None)
        p, q = c[: NP + 1], np.concatenate([[1.0], c[NP + 1:]])
        q_prev = vq @ q
        e = np.abs(z * ((vp @ p) / q_prev - f))
        if e.max() < best[0]:
            best = (e.max(), (p.copy(), q.copy()))
        lw = lw * np.sqrt(e / e.max() + 1e-4)
        lw /= lw.mean()
    p, q = best[1]
    mono = lambda c: np.polynomial.Chebyshev(c, domain=[0, 1]).convert(kind=np.polynomial.Polynomial).coef
    pm, qm = mono(p), mono(q)
    # to x: z = x/√2, z²/16 = x²/32; normalise Q(0) = 1
    scale = np.array([(1 / 32.0) ** i for i in range(max(len(pm), len(qm)))])
    pm, qm = pm * scale[: len(pm)] / np.sqrt(2), qm * scale[: len(qm)]
    return best[0], pm / qm[0], qm / qm[0]


def gelu32(x, pm, qm):
    x = np.float32(x)
    lim = np.float32(ZMAX * np.sqrt(2))
    xc = np.minimum(np.maximum(x, -lim), lim)
    u = xc * xc
    p, q = np.float32(pm[-1]), np.float32(qm[-1])
    for c in pm[-2::-1]:
        p = p * u + np.float32(c)
    for c in qm[-2::-1]:
        q = q * u + np.float32(c)
    a = np.maximum(xc * p + q, np.float32(0))
    return (x * np.float32(0.5)) * (a / q)


def main():
    err, pm, qm = fit()
    print("erf(z) absolute error in double: %.3g" % err)
    xs = np.concatenate([np.linspace(-12, 12, 2400001), [-1e30, -87, 87, 1e30]]).astype(np.float32)
    x64 = xs.astype(np.float64)
    want = 0.5 * x64 * (1 + erf(x64 / np.sqrt(2)))
    got = gelu32(xs, pm, qm).astype(np.float64)
    ratio = np.abs(got - want) / (2.5e-7 * np.abs(x64) + 6e-8 * np.abs(want) + 1e-37)
    print("GELU in float32: largest |d|/bound %.3f at x = %g" % (ratio.max(), xs[ratio.argmax()]))
    print("P (x², from the highest power):", ", ".join("%.9ef" % np.float32(c) for c in pm[::-1]))
    print("Q (x², from the highest power):", ", ".join("%.9ef" % np.float32(c) for c in qm[::-1]))


if __name__ == "__main__":
    main()
