#!/usr/bin/python3
"""random_ops.py - a model of the random operators, and the statistics its
program's outputs must have (test/e2e.sh).

    random_ops.py gen DIR              DIR/model.onnx and DIR/in/input_*.pb (batch 4)
    random_ops.py inputs DIR B         DIR/inB/input_*.pb at batch B
    random_ops.py check OUT B [OUT2]   OUT/output_*.pb of a run at batch B; OUT2, a
                                       second run's, must differ (another run's values)

The model: y = x + RandomNormalLike(x, mean 2, scale 3); u = x +
RandomUniform [1, 2000] on [-1, 3) with a seed; b = Bernoulli(p) into bool; h =
RandomUniformLike(x) as f16; d, the difference of two unnamed standard
RandomNormalLike(x), whose draws must be their own (deviation sqrt 2).  x [B, 2000] is zeros, p's rows 0, 0.3, 0.9 and
1 repeated.  The checks are the distributions' (numpy computes them): each
mean within 5 standard errors, the deviation within 2%, the uniform in
[low, high), the Bernoulli rows' frequencies within 0.03, p = 0 and 1 exact,
row 0 and row B/2 not the same draws (data-parallel replicas each have
their own stream).
Exit status 1 with a line saying which check failed.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

W = 2000


def gen(d):
    x = h.make_tensor_value_info("x", T.FLOAT, ["B", W])
    p = h.make_tensor_value_info("p", T.FLOAT, ["B", W])
    nodes = [
        h.make_node("RandomNormalLike", ["x"], ["n"], mean=2.0, scale=3.0),
        h.make_node("Add", ["x", "n"], ["y"]),
        h.make_node("RandomUniform", [], ["r"], shape=[1, W], low=-1.0, high=3.0, seed=5.0),
        h.make_node("Add", ["x", "r"], ["u"]),
        h.make_node("Bernoulli", ["p"], ["b"], dtype=T.BOOL),
        h.make_node("RandomUniformLike", ["x"], ["hf"], dtype=T.FLOAT16),
        h.make_node("RandomNormalLike", ["x"], ["n1"]),
        h.make_node("RandomNormalLike", ["x"], ["n2"]),
        h.make_node("Sub", ["n1", "n2"], ["d"]),
    ]
    outs = [h.make_tensor_value_info("y", T.FLOAT, ["B", W]),
            h.make_tensor_value_info("u", T.FLOAT, ["B", W]),
            h.make_tensor_value_info("b", T.BOOL, ["B", W]),
            h.make_tensor_value_info("hf", T.FLOAT16, ["B", W]),
            h.make_tensor_value_info("d", T.FLOAT, ["B", W])]
    m = h.make_model(h.make_graph(nodes, "random", [x, p], outs),
                     opset_imports=[h.make_opsetid("", 15)])
    onnx.checker.check_model(m)
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    inputs(d, 4, "in")


def inputs(d, b, sub=None):
    sub = sub or "in%d" % b
    os.makedirs(os.path.join(d, sub), exist_ok=True)
    x = np.zeros((b, W), np.float32)
    p = np.tile(np.array([0.0, 0.3, 0.9, 1.0], np.float32), b)[:b, None].repeat(W, 1)
    for i, (name, a) in enumerate((("x", x), ("p", p))):
        with open(os.path.join(d, sub, "input_%d.pb" % i), "wb") as f:
            f.write(nh.from_array(a, name).SerializeToString())


def read(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return nh.to_array(t)


def check(out, b, out2=None):
    y, u, bern, hf, d = (read(os.path.join(out, "output_%d.pb" % i)) for i in range(5))
    bad = []
    n = y.size

    def near(what, got, want, tol):
        if not abs(got - want) <= tol:
            bad.append("%s %.5g, expected %.5g within %.3g" % (what, got, want, tol))

    if y.shape != (b, W) or bern.shape != (b, W) or hf.shape != (b, W) or u.shape != (b, W):
        bad.append("shapes %s %s %s %s" % (y.shape, u.shape, bern.shape, hf.shape))
    near("normal mean", y.mean(), 2.0, 5 * 3 / np.sqrt(n))
    near("normal deviation", y.std(), 3.0, 0.06)
    if not (u.min() >= -1 and u.max() < 3):
        bad.append("uniform outside [-1, 3): %g %g" % (u.min(), u.max()))
    near("uniform mean", u[0].mean(), 1.0, 5 * 4 / np.sqrt(12 * W))
    h32 = hf.astype(np.float32)
    if hf.dtype != np.float16 or not (h32.min() >= 0 and h32.max() < 1):
        bad.append("f16 uniform %s outside [0, 1): %g %g" % (hf.dtype, h32.min(), h32.max()))
    near("f16 uniform mean", h32.mean(), 0.5, 5 / np.sqrt(12 * n))
    near("deviation of the difference of two unnamed normals", d.std(), np.sqrt(2), 0.03)
    for r, want in enumerate([0.0, 0.3, 0.9, 1.0][:b]):
        rows = bern[r::4].astype(np.float64)
        near("Bernoulli frequency at p %g" % want, rows.mean(), want,
             0 if want in (0.0, 1.0) else 0.03)
    if b >= 2 and np.mean(y[0] == y[b // 2]) > 0.001:
        bad.append("rows 0 and %d repeat each other (replicas sharing a stream?)" % (b // 2))
    if out2 is not None:
        y2 = read(os.path.join(out2, "output_0.pb"))
        if np.mean(y2 == y) > 0.001:
            bad.append("a second run repeats the first's normal values")
        u2 = read(os.path.join(out2, "output_1.pb"))
        if np.array_equal(u2, u):
            bad.append("a second run repeats the seeded uniform's values")
    if bad:
        print("random_ops.py: " + "; ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "gen":
        gen(a[1])
    elif len(a) == 3 and a[0] == "inputs":
        inputs(a[1], int(a[2]))
    elif len(a) in (3, 4) and a[0] == "check":
        sys.exit(check(a[1], int(a[2]), a[3] if len(a) == 4 else None))
    else:
        sys.exit(__doc__)
