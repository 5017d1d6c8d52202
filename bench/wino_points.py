#!/usr/bin/python3
"""wino_points.py - the rounding of Winograd F(m, 3) on chosen points.

Builds the Toom-Cook matrices A^T, G, B^T of F(m x m, 3 x 3) for a set of
finite points plus infinity (exact, in fractions), checks that they compute
the 1-D correlation exactly, then runs the 2-D algorithm in float32 the way
runtime/conv_wino.c does (U = G g G^T rounded once from double, V = B^T d B
and Y = A^T M A in float32, M summed over the channels in float32) on random
6x6 patches and weights, and prints the largest and mean error against the
float64 direct sum, beside a float32 direct sum's.  conv_wino.c's points
(0, 1, -1, 1/2, -2) come from this table; docs/runtime.md says why.

    /usr/bin/python3 bench/wino_points.py [TRIALS]

Needs numpy only.
"""
import sys
from fractions import Fraction as Fr

import numpy as np

f32 = np.float32


def polymul(a, b):
    c = [Fr(0)] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for k, y in enumerate(b):
            c[i + k] += x * y
    return c


def toom_cook(points, m, r=3):
    """A^T (m x n), G (n x r), B^T (n x n) of F(m, r), n = m + r - 1, on
    the n - 1 finite points and infinity."""
    n = m + r - 1
    p = [Fr(x) for x in points]
    assert len(p) == n - 1
    at = [[p[j] ** i for j in range(n - 1)] + [Fr(int(i == m - 1))] for i in range(m)]
    g = []
    for j in range(n - 1):
        f = Fr(1)
        for k in range(n - 1):
            if k != j:
                f *= p[j] - p[k]
        g.append([p[j] ** k / f for k in range(r)])
    g.append([Fr(int(k == r - 1)) for k in range(r)])
    bt = []
    for j in range(n - 1):
        q = [Fr(1)]
        for k in range(n - 1):
            if k != j:
                q = polymul(q, [-p[k], Fr(1)])
        bt.append(q + [Fr(0)])
    q = [Fr(1)]
    for k in range(n - 1):
        q = polymul(q, [-p[k], Fr(1)])
    bt.append(q)
    return (np.array(at, dtype=object), np.array(g, dtype=object),
            np.array(bt, dtype=object))


def exact(at, g, bt, m, r=3):
    """Whether y = A^T ((G g) * (B^T d)) is the correlation, in fractions."""
    rng = np.random.default_rng(0)
    d = np.array([Fr(int(x)) for x in rng.integers(-9, 9, m + r - 1)], dtype=object)
    w = np.array([Fr(int(x)) for x in rng.integers(-9, 9, r)], dtype=object)
    y = at.dot(g.dot(w) * bt.dot(d))
    return all(y[i] == sum(d[i + k] * w[k] for k in range(r)) for i in range(m))


def errors(points, m, trials, C=32, seed=1):
    at, g, bt = toom_cook(points, m)
    assert exact(at, g, bt, m)
    n = m + 2
    gd = g.astype(float)
    atf, btf = at.astype(float).astype(f32), bt.astype(float).astype(f32)
    rng = np.random.default_rng(seed)
    worst, total = 0.0, 0.0
    for _ in range(trials):
        d = rng.normal(size=(C, n, n)).astype(f32)
        w = rng.normal(0, 0.3, size=(C, 3, 3)).astype(f32)
        u = np.einsum('ik,ckl,jl->cij', gd, w.astype(float), gd).astype(f32)
        v = np.einsum('ik,ckl->cil', btf, d).astype(f32)
        v = np.einsum('cil,jl->cij', v, btf).astype(f32)
        acc = np.zeros((n, n), f32)
        for c in range(C):
            acc = (acc + u[c] * v[c]).astype(f32)
        y = ((atf @ acc).astype(f32) @ atf.T).astype(f32)
        e = max(abs(float(y[i, j]) - float(np.sum(d[:, i:i + 3, j:j + 3].astype(float) *
                                                   w.astype(float))))
                for i in range(m) for j in range(m))
        worst, total = max(worst, e), total + e
    return worst, total / trials


def direct(trials, C=32, seed=1):
    rng = np.random.default_rng(seed)
    worst, total = 0.0, 0.0
    for _ in range(trials):
        d = rng.normal(size=(C, 6, 6)).astype(f32)
        w = rng.normal(0, 0.3, size=(C, 3, 3)).astype(f32)
        e = 0.0
        for i in range(4):
            for j in range(4):
                prod = (d[:, i:i + 3, j:j + 3] * w).ravel()
                acc = f32(0)
                for x in prod:
                    acc = f32(acc + x)
                e = max(e, abs(float(acc) - float(np.sum(d[:, i:i + 3, j:j + 3].astype(float) *
                                                          w.astype(float)))))
        worst, total = max(worst, e), total + e
    return worst, total / trials


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    h = Fr(1, 2)
    print('F(m x m, 3 x 3) in float32, 32 channels, %d random patches: error against float64' %
          trials)
    print('%-28s %5s %10s %10s' % ('points (and infinity)', 'm', 'max', 'mean'))
    print('%-28s %5s %10.2e %10.2e' % (('direct sum', '4') + direct(trials)))
    for pts, m in [((0, 1, -1), 2), ((0, 1, -1, 2), 3), ((0, 1, -1, 2, -2), 4),
                   ((0, 1, -1, h, -h), 4), ((0, 1, -1, 2, -h), 4), ((0, 1, -1, h, -2), 4),
                   ((0, 1, -1, h, -Fr(3, 2)), 4), ((0, 1, -1, Fr(1, 4), -2), 4)]:
        name = ', '.join(str(x) for x in pts)
        print('%-28s %5d %10.2e %10.2e' % ((name, m) + errors(pts, m, trials)))


if __name__ == '__main__':
    main()
