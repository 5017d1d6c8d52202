#!/usr/bin/python3
# extra_edges.py OUTDIR - tapc's own node tests for edge values of the elementwise and
# reduction operators, written to OUTDIR/test_tapc_<name>/ in the layout of the official
# cases (model.onnx, test_data_set_0/input_N.pb and output_N.pb).
#
# What the official cases leave out: NaN through Relu, Clip, HardSigmoid, HardSwish, ReduceMax
# and ReduceMin (it stays NaN, as numpy and onnx's reference keep it); Clip with its min above its max (every
# value becomes max: min(max(x, lo), hi)) on f32 and i32, and its default bounds, which are
# the type's lowest() and max() and so clip infinities; ReduceSumSquare with
# noop_with_empty_axes (the input squared); and the same Clip, Relu, HardSigmoid and HardSwish
# fused into a convolution's epilogue (1x1, depthwise and direct kernels), where each kernel has its own
# copy of the activation.
#
# References are independent of tapc: numpy from the operator spec, torch's conv2d for the
# fused cases.  The folded cases compute the same from Constant nodes, so that tapc evaluates
# them at compile time (ir/eval.c), and add a run-time zero (x * 0) so the graph has an
# input: NaN through Relu, Sign, Max and Min; an integer Pow with float exponents; an int64
# ReduceSum past 2^53; a float32 Sum of three (rounded after each addition, as the kernel and
# onnxruntime do); uint64 values from 2^63 up.  And a graph input that is also an output, read
# through views (Unsqueeze, a zero Pad).  And f16 Max, Min and Mod (their official cases
# are three same-shape vectors): NaN, signed zeros, subnormals and infinities, a broadcast
# row and scalar, three inputs (the kernel folds into its output in place), Mod with fmod 0
# and 1 on mixed signs, against numpy's float16 maximum, minimum, mod and fmod.  And f16
# through the operators tapc computes in f32 (passes/legalize_half.c): unary math with NaN,
# infinities, signed zeros and subnormals, broadcasting arithmetic (a division by zero, an
# overflow to inf), a 3000-term ReduceSum (f32 accumulation), MatMul, Gemm, Conv + Relu with f16
# weights, Softmax, LayerNormalization, results of other types (Less, ArgMax, TopK), a chain with
# a byte-moving Transpose and an intermediate output, bf16 Mul and Add inside an f32 graph, a
# ConstantOfShape of a half value (70x70: not folded) and a simple RNN (the spec's recurrence);
# references computed in float32 on the halves and rounded to float16 after each operator.  And the
# two losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) against torch's nll_loss and
# cross_entropy: weights, ignore_index inside and outside [0, C), every target ignored, i32
# targets, the three reductions, spatial dims, f64.  And LRN (against torch's, and the spec's window
# for an even size), MeanVarianceNormalization over chosen axes, ReverseSequence, and GridSample's
# eighteen modes against torch's grid_sample.  And Det, the windows, DFT and STFT against torch
# (torch.linalg.det, torch's windows, torch.fft, torch.stft), MelWeightMatrix against the spec
# in numpy.  Needs
# Debian's /usr/bin/python3 with python3-onnx (1.12), numpy and torch.  Deterministic:
# fixed seeds.  Called by test/node/gen.sh.
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

RNG = np.random.default_rng(20261129)
F32 = np.float32
NAN, INF = np.float32(np.nan), np.float32(np.inf)


def tensor_type(a):
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]


def write(outdir, name, nodes, inputs, outputs, inits=(), opset=13, check=True):
    """inputs, outputs and inits are [(name, array)]; check=False for what onnx 1.12's
    checker predates (opset 18)."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, tensor_type(a), a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(n, tensor_type(a), a.shape) for n, a in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="tapc-extra-edges")
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    d = os.path.join(outdir, "test_tapc_" + name, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(outdir, "test_tapc_" + name, "model.onnx"))
    for kind, lst in (("input", inputs), ("output", outputs)):
        for i, (n, a) in enumerate(lst):
            with open(os.path.join(d, "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())


def clip(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)      # the spec's order; NaN stays NaN


def elementwise(out):
    x = np.array([[-2, -0.5, NAN, 0, 0.25, 3, -INF, INF]], F32)
    write(out, "relu_nan", [helper.make_node("Relu", ["x"], ["y"])], [("x", x)],
          [("y", np.maximum(x, F32(0)))])
    lo, hi = np.array(0.5, F32), np.array(-0.5, F32)
    write(out, "clip_min_above_max", [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
          [("x", x)], [("y", clip(x, lo, hi))], [("lo", lo), ("hi", hi)])
    xi = np.array([-7, -1, 0, 2, 9], np.int32)
    loi, hii = np.array(3, np.int32), np.array(1, np.int32)
    write(out, "clip_min_above_max_i32", [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
          [("x", xi)], [("y", clip(xi, loi, hii))], [("lo", loi), ("hi", hii)])
    big = np.finfo(F32).max
    write(out, "clip_default_bounds", [helper.make_node("Clip", ["x", "", "hi"], ["y"])],
          [("x", x)], [("y", clip(x, -big, np.array(1, F32)))], [("hi", np.array(1, F32))])
    write(out, "clip_opset6_default_max", [helper.make_node("Clip", ["x"], ["y"], min=-1.0)],
          [("x", x)], [("y", clip(x, F32(-1), big))], opset=6)
    # HardSigmoid and HardSwish through numpy's clip: NaN stays NaN (37 values: vectors and a tail)
    xl = np.concatenate([x[0], RNG.standard_normal(29).astype(F32) * 4])[None, :]
    xl[0, 20] = NAN
    write(out, "hardsigmoid_nan", [helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)],
          [("x", xl)], [("y", clip(F32(0.3) * xl + F32(0.4), F32(0), F32(1)))])
    write(out, "hardswish_nan", [helper.make_node("HardSwish", ["x"], ["y"])], [("x", xl)],
          [("y", xl * clip(xl / F32(6) + F32(0.5), F32(0), F32(1)))], opset=14)


def half(out):
    F16 = np.float16
    rng = np.random.default_rng(20261130)     # its own: the other cases' data stay as they were
    a = np.array([[-2, -0.0, np.nan, 0, 0.25, 3, -np.inf, np.inf],
                  [65504, -65504, 6e-8, -6e-8, 1, np.nan, 0.0, -1]], F16)
    row = np.array([0.5, 0.0, 1, -0.0, np.nan, -3, 2, -np.inf], F16)
    scal = np.array(0.25, F16)
    c = (rng.standard_normal((2, 8)) * 4).astype(F16)
    for op, fn in (("Max", np.maximum), ("Min", np.minimum)):
        low = op.lower()
        write(out, low + "_f16_nan_row", [helper.make_node(op, ["a", "b"], ["y"])],
              [("a", a), ("b", row)], [("y", fn(a, row))])
        write(out, low + "_f16_scalar_three", [helper.make_node(op, ["s", "a", "c"], ["y"])],
              [("s", scal), ("a", a), ("c", c)], [("y", fn(fn(scal, a), c))])
    x = np.array([[-4.3, 7.2, 5.0, 4.3, -7.2, 8.0, -0.0, 1000], [3, -3, 0.5, -0.5, 9, -9, 2, -1e-3]],
                 F16)
    d = np.array([2.1, -3.4, 8.0, -2.1, 3.4, 5.0, 3, -7], F16)
    write(out, "mod_f16_mixed_sign_row", [helper.make_node("Mod", ["x", "d"], ["y"])],
          [("x", x), ("d", d)], [("y", np.mod(x, d))])
    write(out, "fmod_f16_mixed_sign_scalar", [helper.make_node("Mod", ["x", "d"], ["y"], fmod=1)],
          [("x", x), ("d", np.array(-2.5, F16))], [("y", np.fmod(x, np.array(-2.5, F16)))])
    # CastLike to f16 (the like tensor an initializer), then an f16 Add: legalize-half
    # leaves the CastLike alone and computes the Add in f32
    xf = (rng.standard_normal((3, 5)) * 100).astype(np.float32)
    xf[0, :3] = [70000, -1e-9, np.nan]
    h = xf.astype(F16)
    write(out, "castlike_f16_add", [helper.make_node("CastLike", ["x", "like"], ["h"]),
                                    helper.make_node("Add", ["h", "h"], ["y"])],
          [("x", xf)], [("h", h), ("y", (h.astype(np.float32) * 2).astype(F16))],
          [("like", np.zeros((1,), F16))], opset=15)


def half_compute(out):
    """f16 through operators libtaprt computes in f32 (passes/legalize_half.c): each node's
    result is its f32 result rounded to f16 once.  References: numpy on the f16 values
    widened to float32, rounded to float16 after each operator (numpy's own float16 ufuncs
    do the same for the elementwise ones), torch's conv2d in float32."""
    F16 = np.float16
    rng = np.random.default_rng(20261201)     # its own: the other cases' data stay as they were
    mk = helper.make_node

    def r16(shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(F16)

    def f(a):
        return a.astype(F32)
    x = r16((3, 37), 2)
    x[0, :8] = np.array([np.nan, -np.inf, np.inf, -0.0, 0, 6e-8, 65504, -65504], F16)
    sig = lambda v: F32(1) / (F32(1) + np.exp(-v))
    for op, ref in (("Relu", lambda v: np.maximum(v, F32(0))), ("Sigmoid", sig),
                    ("Tanh", np.tanh), ("Exp", np.exp), ("Abs", np.abs), ("Neg", np.negative)):
        with np.errstate(all="ignore"):
            y = ref(f(x)).astype(F16)
        write(out, op.lower() + "_f16", [mk(op, ["x"], ["y"])], [("x", x)], [("y", y)])
    xp = np.abs(r16((2, 21), 3))
    xp[0, 0] = 0
    write(out, "sqrt_f16", [mk("Sqrt", ["x"], ["y"])], [("x", xp)],
          [("y", np.sqrt(f(xp)).astype(F16))])
    # broadcasting binaries, one operand a row of halves, one a weight (cast once, read twice)
    a, row = r16((4, 19), 3), r16((19,), 2)
    row[3] = 0                                  # a division by zero: inf
    for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                   ("Div", np.divide)):
        with np.errstate(all="ignore"):
            y = fn(f(a), f(row)).astype(F16)
        write(out, op.lower() + "_f16_row", [mk(op, ["a", "b"], ["y"])], [("a", a), ("b", row)],
              [("y", y)])
    # overflow: two halves whose sum is past 65504 become inf, as f16 arithmetic does
    big = np.array([60000, -60000, 30000, 1], F16)
    with np.errstate(over="ignore"):
        y = (f(big) + f(big)).astype(F16)
    write(out, "add_f16_overflow", [mk("Add", ["a", "a"], ["y"])], [("a", big)], [("y", y)])
    # a sum of 3000 halves near 1 (f32 accumulates; a float16 running sum stops at 2048)
    ones = np.ones((1, 3000), F16)
    write(out, "reducesum_f16_long", [mk("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)],
          [("x", ones)], [("y", f(ones).sum(axis=1).astype(F16))], opset=11)
    # MatMul, Gemm with transB and a bias, weights f16 initializers
    m, w, c = r16((4, 64)), r16((64, 24), 0.2), r16((24,))
    write(out, "matmul_f16", [mk("MatMul", ["m", "w"], ["y"])], [("m", m)],
          [("y", (f(m) @ f(w)).astype(F16))], [("w", w)])
    wt = np.ascontiguousarray(w.T)
    write(out, "gemm_f16_transb_bias", [mk("Gemm", ["m", "wt", "c"], ["y"], transB=1)],
          [("m", m)], [("y", (f(m) @ f(wt).T + f(c)).astype(F16))], [("wt", wt), ("c", c)])
    # a Conv with bias and a Relu after it (two nodes, each rounded)
    xi, wc, bc = r16((1, 3, 9, 10)), r16((8, 3, 3, 3), 0.3), r16((8,), 0.1)
    conv = F.conv2d(torch.from_numpy(f(xi)), torch.from_numpy(f(wc)), torch.from_numpy(f(bc)),
                    padding=1).numpy().astype(F16)
    write(out, "conv_relu_f16", [mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                                 mk("Relu", ["c"], ["y"])],
          [("x", xi)], [("y", np.maximum(f(conv), F32(0)).astype(F16))], [("w", wc), ("b", bc)])
    # Softmax and LayerNormalization on the last axis
    s = r16((3, 5, 17), 3)
    e = np.exp(f(s) - f(s).max(axis=-1, keepdims=True))
    write(out, "softmax_f16", [mk("Softmax", ["x"], ["y"], axis=-1)], [("x", s)],
          [("y", (e / e.sum(axis=-1, keepdims=True)).astype(F16))])
    g, bb = r16((17,)), r16((17,))
    mu = f(s).mean(axis=-1, keepdims=True)
    var = ((f(s) - mu) ** 2).mean(axis=-1, keepdims=True)
    ln = ((f(s) - mu) / np.sqrt(var + F32(1e-5)) * f(g) + f(bb)).astype(F16)
    write(out, "layernorm_f16", [mk("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
          [("x", s)], [("y", ln)], [("g", g), ("b", bb)], opset=17)
    # results of other types from halves: a comparison (bool), ArgMax (int64), TopK (both)
    q, p = r16((3, 11)), r16((3, 11))
    q[1, 4] = p[1, 4]
    write(out, "less_f16", [mk("Less", ["q", "p"], ["y"])], [("q", q), ("p", p)],
          [("y", f(q) < f(p))])
    write(out, "argmax_f16", [mk("ArgMax", ["q"], ["y"], axis=1, keepdims=0)], [("q", q)],
          [("y", np.argmax(f(q), axis=1).astype(np.int64))])
    k = np.array([4], np.int64)
    idx = np.argsort(-f(q), axis=1, kind="stable")[:, :4]
    write(out, "topk_f16", [mk("TopK", ["q", "k"], ["v", "i"], axis=1)], [("q", q)],
          [("v", np.take_along_axis(q, idx, axis=1)), ("i", idx.astype(np.int64))], [("k", k)])
    # a chain in one stage: MatMul -> Transpose (moves halves as they are) -> Add of the
    # same weight's transpose -> Sigmoid, with the MatMul's result an output too
    wq = r16((8, 8), 0.5)
    h1 = (f(m[:, :8]) @ f(wq)).astype(F16)
    h2 = h1.T
    h3 = (f(h2) + f(wq)[:, :4]).astype(F16)
    write(out, "chain_f16",
          [mk("MatMul", ["x", "w"], ["h1"]), mk("Transpose", ["h1"], ["h2"]),
           mk("Slice", ["w", "s0", "s1", "s2"], ["ws"]), mk("Add", ["h2", "ws"], ["h3"]),
           mk("Sigmoid", ["h3"], ["y"])],
          [("x", np.ascontiguousarray(m[:, :8]))],
          [("y", sig(f(h3)).astype(F16)), ("h1", h1)],
          [("w", wq), ("s0", np.array([0], np.int64)), ("s1", np.array([4], np.int64)),
           ("s2", np.array([1], np.int64))])
    # bf16 inside a float32 graph: tapc's Cast to bf16 keeps a float's high half
    def bf(v):
        return (v.astype(F32).view(np.uint32) & np.uint32(0xffff0000)).view(F32)
    xb = rng.standard_normal((2, 13)).astype(F32) * 3
    cb = rng.standard_normal((13,)).astype(F32)
    write(out, "bf16_mul_add", [mk("Cast", ["x"], ["xb"], to=onnx.TensorProto.BFLOAT16),
                                mk("Cast", ["c"], ["cb"], to=onnx.TensorProto.BFLOAT16),
                                mk("Mul", ["xb", "cb"], ["m"]), mk("Add", ["m", "xb"], ["s"]),
                                mk("Cast", ["s"], ["y"], to=onnx.TensorProto.FLOAT)],
          [("x", xb)], [("y", bf(bf(bf(xb) * bf(cb)) + bf(xb)))], [("c", cb)])
    # a ConstantOfShape of a half value too large to fold (a node whose type is its value's)
    xc = r16((70, 70))
    val = onnx.helper.make_tensor("v", onnx.TensorProto.FLOAT16, [1], [1.5])
    write(out, "constantofshape_f16_add",
          [mk("ConstantOfShape", ["s"], ["c"], value=val), mk("Add", ["x", "c"], ["y"])],
          [("x", xc)], [("y", (f(xc) + F32(1.5)).astype(F16))], [("s", np.array([70, 70], np.int64))])
    # a simple RNN (tanh) over 4 steps: H_t = tanh(X_t W^T + H_(t-1) R^T + Wb + Rb), the spec's
    xr, wr, rr, br = r16((4, 2, 3)), r16((1, 5, 3), 0.5), r16((1, 5, 5), 0.5), r16((1, 10), 0.2)
    h = np.zeros((2, 5), F32)
    ys = []
    for t in range(4):
        h = np.tanh(f(xr[t]) @ f(wr[0]).T + h @ f(rr[0]).T + f(br[0, :5]) + f(br[0, 5:]))
        ys.append(h)
    write(out, "rnn_f16", [mk("RNN", ["x", "w", "r", "b"], ["y", "yh"], hidden_size=5)],
          [("x", xr)], [("y", np.stack(ys)[:, None].astype(F16)), ("yh", ys[-1][None].astype(F16))],
          [("w", wr), ("r", rr), ("b", br)])


def reductions(out):
    x = RNG.standard_normal((3, 4, 5)).astype(F32)
    x[0, 1, 2] = NAN
    x[2, 0, 4] = NAN
    x[1, 3, 0] = NAN
    for op, fn in (("ReduceMax", np.max), ("ReduceMin", np.min)):
        for axes in ([1], [2], [0, 2]):
            name = "%s_nan_axes_%s" % (op.lower(), "_".join(map(str, axes)))
            write(out, name, [helper.make_node(op, ["x"], ["y"], axes=axes, keepdims=0)],
                  [("x", x)], [("y", fn(x, axis=tuple(axes)))])
    xs = RNG.standard_normal((2, 3)).astype(F32)
    write(out, "reducesumsquare_noop_empty_axes",
          [helper.make_node("ReduceSumSquare", ["x"], ["y"], noop_with_empty_axes=1)],
          [("x", xs)], [("y", np.square(xs))], opset=18, check=False)
    # LogSumExp where exp overflows float32 (about 1000) and of infinities: torch.logsumexp
    # (a generator of their own: the cases after keep their data)
    rng = np.random.default_rng(20261130)
    xl = (rng.standard_normal((4, 6)) * 3 + 1000).astype(F32)
    xl[1] = -np.inf
    xl[2, 3] = np.inf
    xl[3, :3] = -np.inf
    write(out, "reducelogsumexp_large_inf",
          [helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[1], keepdims=0)],
          [("x", xl)], [("y", torch.logsumexp(torch.from_numpy(xl), dim=1).numpy())])
    # opset 18: axes as an input, noop_with_empty_axes; L1 of integers
    x3 = rng.standard_normal((3, 4, 5)).astype(F32)
    write(out, "reducel2_axes_input",
          [helper.make_node("ReduceL2", ["x", "axes"], ["y"], keepdims=1)],
          [("x", x3)], [("y", np.sqrt(np.sum(np.square(x3.astype(np.float64)), axis=(0, 2),
                                              keepdims=True)).astype(F32))],
          [("axes", np.array([0, -1], np.int64))], opset=18, check=False)
    write(out, "reducelogsum_noop_empty_axes",
          [helper.make_node("ReduceLogSum", ["x"], ["y"], noop_with_empty_axes=1)],
          [("x", xs)], [("y", xs)], opset=18, check=False)
    # Hardmax along a middle axis: ties (the first), a NaN (numpy's argmax takes it)
    xh = rng.integers(-3, 3, (2, 5, 3)).astype(F32)
    xh[1, 3, 2] = NAN
    oh = np.moveaxis(np.eye(5, dtype=F32)[np.argmax(xh, axis=1)], -1, 1)
    write(out, "hardmax_axis1_ties_nan", [helper.make_node("Hardmax", ["x"], ["y"], axis=1)],
          [("x", xh)], [("y", oh)])
    # BitShift by the width and more (C leaves it undefined; 0 with Python's integers),
    # broadcasting a row of shifts; EyeLike past the matrix and to another type
    for dt, w in ((np.uint8, 8), (np.uint32, 32)):
        xb = rng.integers(0, 2 ** w, (3, 6), dtype=np.uint64).astype(dt)
        sh = np.array([0, 1, w - 1, w, w + 1, 2 * w + 3], dt)
        for d in ("LEFT", "RIGHT"):
            ref = np.array([[((int(a) << int(s)) & (2 ** w - 1) if d == "LEFT" else int(a) >> int(s))
                             if s < w else 0 for a, s in zip(r, sh)] for r in xb], dt)
            write(out, "bitshift_%s_%s_past_width" % (d.lower(), np.dtype(dt).name),
                  [helper.make_node("BitShift", ["x", "s"], ["y"], direction=d)],
                  [("x", xb), ("s", sh)], [("y", ref)])
    xe = rng.standard_normal((3, 5)).astype(F32)
    write(out, "eyelike_k_f16_int32", [helper.make_node("EyeLike", ["x"], ["a"], k=2, dtype=10),
                                       helper.make_node("EyeLike", ["x"], ["b"], k=-7, dtype=6)],
          [("x", xe)], [("a", np.eye(3, 5, k=2, dtype=np.float16)), ("b", np.eye(3, 5, k=-7, dtype=np.int32))])
    # QuantizeLinear to i8 per channel of a 4-D tensor: ties to even (x / scale at n + 0.5),
    # saturation at both ends; then DequantizeLinear back (a QDQ pair), numpy's float32
    sc = np.array([0.5, 0.25, 2.0], F32)
    zp = np.array([-3, 0, 100], np.int8)
    xq = (rng.standard_normal((2, 3, 2, 4)) * 40).astype(F32)
    xq[0, :, 0, :4] = np.array([2.5, -2.5, 3.5, 400], F32)[None, :] * sc[:, None]
    xq[1, :, 1, :2] = np.array([-1e6, 1e6], F32)
    qv = np.clip(np.rint(xq / sc[None, :, None, None]) + zp[None, :, None, None].astype(F32),
                 -128, 127).astype(np.int8)
    dq = (qv.astype(F32) - zp[None, :, None, None].astype(F32)) * sc[None, :, None, None]
    write(out, "quantize_dequantize_i8_axis1_ties",
          [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
           helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
          [("x", xq)], [("q", qv), ("y", dq)], [("s", sc), ("z", zp)])
    # GatherND with two batch dims, negative indices and slices (k < rank - b): onnx's
    # reference implementation (its backend test's gather_nd_impl)
    from onnx.backend.test.case.node.gathernd import gather_nd_impl
    xg = rng.standard_normal((2, 3, 4, 5, 6)).astype(F32)
    ig = np.stack([rng.integers(-4, 4, (2, 3, 7)), rng.integers(-5, 5, (2, 3, 7))], -1)
    write(out, "gathernd_batch2_negative_slices",
          [helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=2)],
          [("x", xg), ("i", ig.astype(np.int64))], [("y", gather_nd_impl(xg, ig, 2))])
    xi = rng.integers(-1000, 1000, (4, 7)).astype(np.int32)
    write(out, "reducel1_int32",
          [helper.make_node("ReduceL1", ["x"], ["y"], axes=[1], keepdims=0)],
          [("x", xi)], [("y", np.sum(np.abs(xi), axis=1).astype(np.int32))])


def fused(out):
    """Conv + Clip (min above max), Conv + Relu, HardSigmoid and HardSwish on NaN: FusedConv's
    epilogues."""
    for name, c, m, k, group in (("1x1", 8, 16, 1, 1), ("depthwise", 16, 16, 3, 16),
                                 ("direct", 4, 8, 3, 1)):
        x = RNG.standard_normal((1, c, 9, 10)).astype(F32)
        x[0, 0, 4, 5] = NAN
        w = RNG.standard_normal((m, c // group, k, k)).astype(F32)
        b = RNG.standard_normal(m).astype(F32)
        pad = k // 2
        conv = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                        padding=pad, groups=group).numpy()
        lo, hi = np.array(0.25, F32), np.array(-0.25, F32)
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k],
                                  pads=[pad] * 4, group=group),
                 helper.make_node("Clip", ["c", "lo", "hi"], ["y"]),
                 helper.make_node("Conv", ["x", "w", "b"], ["c2"], kernel_shape=[k, k],
                                  pads=[pad] * 4, group=group),
                 helper.make_node("Relu", ["c2"], ["z"])]
        write(out, "conv_%s_clip_min_above_max_relu_nan" % name, nodes, [("x", x)],
              [("y", clip(conv, lo, hi)), ("z", np.maximum(conv, F32(0)))],
              [("w", w), ("b", b), ("lo", lo), ("hi", hi)])
        # the HardSigmoid and HardSwish epilogues: NaN stays NaN
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k],
                                  pads=[pad] * 4, group=group),
                 helper.make_node("HardSigmoid", ["c"], ["y"], alpha=0.25, beta=0.5),
                 helper.make_node("Conv", ["x", "w", "b"], ["c2"], kernel_shape=[k, k],
                                  pads=[pad] * 4, group=group),
                 helper.make_node("HardSwish", ["c2"], ["z"])]
        write(out, "conv_%s_hardsigmoid_hardswish_nan" % name, nodes, [("x", x)],
              [("y", clip(F32(0.25) * conv + F32(0.5), F32(0), F32(1))),
               ("z", conv * clip(conv / F32(6) + F32(0.5), F32(0), F32(1)))],
              [("w", w), ("b", b)], opset=14)


def folded(out):
    """Each case: (name, nodes computing "f" from constants, constants, reference)."""
    nanv = np.array([-1.5, NAN, 2, -0.0], F32)
    other = np.array([NAN, 1, 3, -2], F32)
    base, expo = np.array([9, 2, 16, 4], np.int64), np.array([0.5, 1.5, 0.25, 2.5], F32)
    big = np.array([[2 ** 53, 1, 1], [-(2 ** 53), -1, 5]], np.int64)
    s1, s2, s3 = (np.array(v, F32) for v in ([1e8, 1], [1, 1e8], [-1e8, -1e8]))
    u1 = np.array([2 ** 63 + 5, 10, 2 ** 64 - 1], np.uint64)
    u2 = np.array([3, 2 ** 63 + 1, 2], np.uint64)
    mk = helper.make_node
    cases = [
        ("relu_nan", [mk("Relu", ["a"], ["f"])], [("a", nanv)], np.maximum(nanv, F32(0))),
        ("sign_nan", [mk("Sign", ["a"], ["f"])], [("a", nanv)], np.sign(nanv)),
        ("max_nan", [mk("Max", ["a", "b"], ["f"])], [("a", nanv), ("b", other)],
         np.maximum(nanv, other)),
        ("min_nan", [mk("Min", ["b", "a"], ["f"])], [("a", nanv), ("b", other)],
         np.minimum(other, nanv)),
        ("pow_int_base_float_exponent", [mk("Pow", ["a", "b"], ["f"])],
         [("a", base), ("b", expo)], (base.astype(np.float64) ** expo).astype(np.int64)),
        ("reducesum_i64_past_2_53", [mk("ReduceSum", ["a", "ax"], ["f"], keepdims=0)],
         [("a", big), ("ax", np.array([1], np.int64))], big.sum(axis=1)),
        ("sum3_f32", [mk("Sum", ["a", "b", "c"], ["f"])], [("a", s1), ("b", s2), ("c", s3)],
         (s1 + s2) + s3),
        ("max_u64", [mk("Max", ["a", "b"], ["f"])], [("a", u1), ("b", u2)], np.maximum(u1, u2)),
        ("div_u64", [mk("Div", ["a", "b"], ["f"])], [("a", u1), ("b", u2)], u1 // u2),
    ]
    for name, nodes, consts, ref in cases:
        x = np.zeros(ref.shape, ref.dtype)
        zero = np.zeros((), ref.dtype)
        # Constant nodes: tapc reads those (float initializers are weights, never read)
        nodes = [mk("Constant", [], [n], value=numpy_helper.from_array(a, n)) for n, a in consts] \
            + nodes + [mk("Mul", ["x", "zero"], ["xz"]), mk("Add", ["f", "xz"], ["y"])]
        write(out, "folded_" + name, nodes, [("x", x)], [("y", ref)], [("zero", zero)])


def views(out):
    """A graph input that is also a graph output, read through views (the
    memory plan binds a view of an input where the input is): Unsqueeze twice
    to an output, and a zero Pad into a MatMul."""
    x = RNG.standard_normal((2, 16)).astype(F32)
    mk = helper.make_node
    axes = [("a0", np.array([0], np.int64)), ("a1", np.array([1], np.int64))]
    write(out, "input_output_unsqueezed",
          [mk("Unsqueeze", ["x", "a0"], ["v1"]), mk("Unsqueeze", ["v1", "a1"], ["v2"])],
          [("x", x)], [("x", x), ("v2", x[None, None])], axes)
    w = RNG.standard_normal((16, 3)).astype(F32)
    write(out, "input_output_padded_matmul",
          [mk("Pad", ["x", "p"], ["xp"]), mk("MatMul", ["xp", "w"], ["y"])],
          [("x", x)], [("y", x @ w), ("x", x)], [("p", np.zeros(4, np.int64)), ("w", w)])


def losses(out):
    """NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against torch's nll_loss and
    cross_entropy: weights with a negative ignore_index over two spatial dims (f64, the
    log-probabilities output too), an ignore_index inside [0, C) with i32 targets and sum,
    every target ignored under mean (NaN, torch's 0 / 0), reduction none with weights, and
    1000 classes (the vectorized f32 row)."""
    rng = np.random.default_rng(20261201)     # its own: the other cases' data stay as they were
    T = torch.from_numpy
    x = rng.standard_normal((3, 5, 2, 3)) * 3
    t = rng.integers(0, 5, (3, 2, 3))
    t[0, 0, :] = -1
    w = rng.uniform(0.2, 2, 5)
    loss = F.cross_entropy(T(x), T(t), weight=T(w), ignore_index=-1, reduction="mean")
    write(out, "sce_f64_weight_negative_ii_logprob",
          [helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y", "lp"],
                            ignore_index=-1)],
          [("x", x), ("t", t), ("w", w)],
          [("y", loss.numpy()), ("lp", F.log_softmax(T(x), 1).numpy())])
    lp = (rng.standard_normal((4, 6)) * 2).astype(F32)
    ti = np.array([2, 0, 5, 2], np.int32)
    write(out, "nll_i32_ii_in_range_sum",
          [helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], ignore_index=2,
                            reduction="sum")],
          [("x", lp), ("t", ti)],
          [("y", F.nll_loss(T(lp), T(ti.astype(np.int64)), ignore_index=2,
                            reduction="sum").numpy())])
    xs = rng.standard_normal((2, 3)).astype(F32)
    ta = np.array([1, 1], np.int64)
    write(out, "sce_all_ignored_mean_nan",
          [helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"], ignore_index=1)],
          [("x", xs), ("t", ta)],
          [("y", F.cross_entropy(T(xs), T(ta), ignore_index=1).numpy())])
    lpn = (rng.standard_normal((2, 4, 5)) * 2).astype(F32)
    tn = rng.integers(0, 4, (2, 5))
    wn = rng.uniform(0.5, 1.5, 4).astype(F32)
    write(out, "nll_none_weight_NCd",
          [helper.make_node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"],
                            reduction="none")],
          [("x", lpn), ("t", tn), ("w", wn)],
          [("y", F.nll_loss(T(lpn), T(tn), weight=T(wn), reduction="none").numpy())])
    xb = (rng.standard_normal((8, 1000)) * 4).astype(F32)
    tb = rng.integers(0, 1000, 8)
    write(out, "sce_1000_classes",
          [helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"])],
          [("x", xb), ("t", tb)], [("y", F.cross_entropy(T(xb), T(tb)).numpy())])


def norms(out):
    """LRN against torch's local_response_norm (odd size, AlexNet's) and the spec's window in
    numpy (even size: onnx puts the odd channel after c, torch before); MeanVarianceNormalization
    over axes (0, 1) of a rank-3 input with a constant slice; ReverseSequence along axis 1 with
    lengths 0, 1 and all the steps."""
    rng = np.random.default_rng(20261202)     # its own: the other cases' data stay as they were
    x = (rng.standard_normal((2, 7, 3, 4)) * 3).astype(F32)
    y = F.local_response_norm(torch.from_numpy(x), 5, alpha=2e-3, beta=0.7, k=1.5).numpy()
    write(out, "lrn_size5_torch",
          [helper.make_node("LRN", ["x"], ["y"], size=5, alpha=2e-3, beta=0.7, bias=1.5)],
          [("x", x)], [("y", y)])
    xd = x.astype(np.float64)
    s = np.zeros_like(xd)
    for c in range(7):
        s[:, c] = (xd[:, max(0, c - 1):min(7, c + 2 + 1)] ** 2).sum(1)
    write(out, "lrn_size4_spec_window",
          [helper.make_node("LRN", ["x"], ["y"], size=4, alpha=0.5, beta=0.6, bias=2.0)],
          [("x", x)], [("y", (xd / (2.0 + 0.5 / 4 * s) ** 0.6).astype(F32))])
    xm = rng.standard_normal((3, 4, 5)) * 2 + 1
    xm[:, :, 2] = 0.75
    mean = xm.mean((0, 1), keepdims=True)
    std = np.sqrt(np.maximum((xm ** 2).mean((0, 1), keepdims=True) - mean ** 2, 0))
    write(out, "mvn_axes01_constant_slice",
          [helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 1])],
          [("x", xm)], [("y", (xm - mean) / (std + 1e-9))])
    xr = rng.standard_normal((4, 5, 3)).astype(F32)
    lens = np.array([0, 1, 5, 3], np.int64)
    yr = xr.copy()
    for b, n in enumerate(lens):
        yr[b, :n] = xr[b, :n][::-1]
    write(out, "reversesequence_batch0_lengths",
          [helper.make_node("ReverseSequence", ["x", "l"], ["y"], time_axis=1, batch_axis=0)],
          [("x", xr), ("l", lens)], [("y", yr)])


def gridsample(out):
    """GridSample against torch's grid_sample: every mode, padding mode and align_corners (18
    outputs of one graph) at points inside and up to 0.8 past the borders, on a 5x7 image."""
    rng = np.random.default_rng(20261203)     # its own: the other cases' data stay as they were
    x = rng.standard_normal((2, 3, 5, 7)).astype(F32)
    grid = rng.uniform(-1.8, 1.8, (2, 4, 6, 2)).astype(F32)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0, 0]]
    nodes, outs = [], []
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for ac in (0, 1):
                name = "y_%s_%s_%d" % (mode, pad, ac)
                nodes.append(helper.make_node("GridSample", ["x", "g"], [name], mode=mode,
                                              padding_mode=pad, align_corners=ac))
                outs.append((name, F.grid_sample(torch.from_numpy(x), torch.from_numpy(grid),
                                                 mode=mode, padding_mode=pad,
                                                 align_corners=bool(ac)).numpy()))
    write(out, "gridsample_modes_torch", nodes, [("x", x), ("g", grid)], outs, opset=16)


def signal(out):
    """Det against torch.linalg.det (a batch of 5x5, f64, a singular matrix, 1x1); the windows
    against torch's (Hamming with the spec's 25/46 and 21/46; the official cases' references
    use pi = 3.1415), periodic and symmetric, f32 and f64; DFT against torch.fft (real and
    complex, forward and inverse, onesided, a dft_length that pads and one that cuts, an inner
    axis, a negative one, f64; lengths that are prime, 400, 42, 512 and 1, for the FFT's
    factors); STFT against torch.stft (center=False: Hann window, a frame
    without a window, onesided and two-sided of a complex signal); MelWeightMatrix from the
    spec's formula in numpy."""
    rng = np.random.default_rng(20261201)     # its own: the other cases' data stay as they were
    T = torch.from_numpy
    x = rng.standard_normal((3, 4, 5, 5)).astype(F32)
    xd = rng.standard_normal((2, 3, 3))
    xs = rng.standard_normal((2, 4, 4)).astype(F32)
    xs[1, 3] = 2 * xs[1, 1] - xs[1, 0]        # a singular matrix: its determinant 0
    x1 = rng.standard_normal((3, 1, 1)).astype(F32)
    outs = [(n, torch.linalg.det(T(a)).numpy()) for n, a in (("y", x), ("yd", xd), ("ys", xs), ("y1", x1))]
    write(out, "det_torch", [helper.make_node("Det", [i], [o]) for i, o in
                             (("x", "y"), ("xd", "yd"), ("xs", "ys"), ("x1", "y1"))],
          [("x", x), ("xd", xd), ("xs", xs), ("x1", x1)], outs, opset=11)

    nodes, inits, outs, ins = [], [], [], []
    for op, size, periodic, dt in (("HannWindow", 16, 1, F32), ("HannWindow", 7, 0, np.float64),
                                   ("HammingWindow", 10, 1, F32), ("HammingWindow", 10, 0, F32),
                                   ("BlackmanWindow", 12, 1, F32), ("BlackmanWindow", 9, 0, np.float64)):
        tag = "%s_%d_%d" % (op, size, periodic)
        td = torch.float64 if dt == np.float64 else torch.float32
        if op == "HannWindow":
            w = torch.hann_window(size, periodic=bool(periodic), dtype=td)
        elif op == "HammingWindow":
            w = torch.hamming_window(size, periodic=bool(periodic), alpha=25 / 46, beta=21 / 46, dtype=td)
        else:
            w = torch.blackman_window(size, periodic=bool(periodic), dtype=td)
        # y = window + x: the graph has an input, and the window is not folded away
        xin = rng.standard_normal(size).astype(dt)
        inits.append(("n_" + tag, np.array(size, dtype=np.int64)))
        nodes += [helper.make_node(op, ["n_" + tag], ["w_" + tag], periodic=periodic,
                                   output_datatype=11 if dt == np.float64 else 1),
                  helper.make_node("Add", ["w_" + tag, "x_" + tag], ["y_" + tag])]
        ins.append(("x_" + tag, xin))
        outs.append(("y_" + tag, (w + T(xin)).numpy()))
    write(out, "windows_torch", nodes, ins, outs, inits=inits, opset=17)

    def real(c):                               # complex [...] -> [..., 2]
        return torch.view_as_real(c).numpy()
    xr = rng.standard_normal((2, 12, 3)).astype(F32)
    xc = rng.standard_normal((2, 12, 3, 2)).astype(F32)
    xd = rng.standard_normal((2, 3, 10))
    cases = [  # name, input, attrs, dft_length, reference
        ("y_real", xr[..., None], dict(axis=1), None, real(torch.fft.fft(T(xr), dim=1))),
        ("y_onesided", xr[..., None], dict(axis=1, onesided=1), None, real(torch.fft.rfft(T(xr), dim=1))),
        ("y_pad", xr[..., None], dict(axis=1), 16, real(torch.fft.fft(T(xr), n=16, dim=1))),
        ("y_cut_onesided", xr[..., None], dict(axis=1, onesided=1), 9,
         real(torch.fft.rfft(T(xr), n=9, dim=1))),
        ("y_complex", xc, dict(axis=2), None, real(torch.fft.fft(torch.view_as_complex(T(xc)), dim=2))),
        ("y_inverse", xc, dict(axis=-2, inverse=1), None,
         real(torch.fft.ifft(torch.view_as_complex(T(xc)), dim=2))),
        ("y_f64", xd[..., None], dict(axis=2), None, real(torch.fft.fft(T(xd), dim=2))),
    ]
    nodes, ins, inits, outs = [], [], [], []
    for name, xin, attrs, n, ref in cases:
        ins.append(("x" + name[1:], xin))
        args = ["x" + name[1:]]
        if n is not None:
            inits.append(("n" + name[1:], np.array(n, dtype=np.int64)))
            args.append("n" + name[1:])
        nodes.append(helper.make_node("DFT", args, [name], **attrs))
        outs.append((name, ref.astype(xin.dtype)))
    write(out, "dft_torch", nodes, ins, outs, inits=inits, opset=17)

    sig = rng.standard_normal((2, 64)).astype(F32)
    sigc = rng.standard_normal((2, 40, 2)).astype(F32)
    win = torch.hann_window(16)
    ref = torch.stft(T(sig), 16, hop_length=4, window=win, center=False, onesided=True,
                     return_complex=True)                              # [B, bins, frames]
    ref_nowin = torch.stft(T(sig), 8, hop_length=5, window=torch.ones(8), center=False,
                           onesided=True, return_complex=True)
    refc = torch.stft(torch.view_as_complex(T(sigc)), 8, hop_length=3, window=torch.ones(8),
                      center=False, onesided=False, return_complex=True)
    write(out, "stft_torch",
          [helper.make_node("STFT", ["s", "step4", "win"], ["y"]),
           helper.make_node("STFT", ["s", "step5", "", "len8"], ["y_nowin"]),
           helper.make_node("STFT", ["sc", "step3", "", "len8"], ["y_complex"], onesided=0)],
          [("s", sig[..., None]), ("sc", sigc)],
          [("y", real(ref.transpose(1, 2))), ("y_nowin", real(ref_nowin.transpose(1, 2))),
           ("y_complex", real(refc.transpose(1, 2)))],
          inits=[("step4", np.array(4, dtype=np.int64)), ("step5", np.array(5, dtype=np.int64)),
                 ("step3", np.array(3, dtype=np.int64)), ("len8", np.array(8, dtype=np.int64)),
                 ("win", win.numpy())], opset=17)

    # the FFT's factors: a prime (7, 97: one direct butterfly), 4 4 5 5 (400, an audio
    # frame), 2 3 7 (42), 4 4 4 4 2 (512), a length 1
    xl = rng.standard_normal((2, 512, 2)).astype(F32)
    nodes, inits, outs = [], [], []
    for L, onesided in ((7, 0), (97, 1), (400, 1), (42, 0), (512, 0), (1, 0)):
        name = "y_%d" % L
        inits.append(("n_%d" % L, np.array(L, dtype=np.int64)))
        if onesided:   # a real signal: the first channel, cut to L
            nodes += [helper.make_node("Slice", ["xl", "zero", "one", "two"], ["xr_%d" % L]),
                      helper.make_node("DFT", ["xr_%d" % L, "n_%d" % L], [name], axis=1, onesided=1)]
            ref = torch.fft.rfft(T(xl[:, :, 0]), n=L, dim=1)
        else:
            nodes.append(helper.make_node("DFT", ["xl", "n_%d" % L], [name], axis=1))
            ref = torch.fft.fft(torch.view_as_complex(T(xl)), n=L, dim=1)
        outs.append((name, real(ref)))
    inits += [("zero", np.array([0], dtype=np.int64)), ("one", np.array([1], dtype=np.int64)),
              ("two", np.array([2], dtype=np.int64))]
    write(out, "dft_lengths_torch", nodes, [("xl", xl)], outs, inits=inits, opset=17)

    # MelWeightMatrix: the spec's triangles written out in float64 numpy, a speech front
    # end's sizes (40 filters on a 400-point frame at 16 kHz, 20 to 8000 Hz), f64 weights
    mels, length, rate, lo, hi = 40, 400, 16000, np.float32(20), np.float32(8000)
    pts = np.arange(mels + 2, dtype=np.float64)
    lmel, hmel = (2595 * np.log10(1 + np.float64(e) / 700) for e in (lo, hi))
    hz = 700 * (np.power(10, (lmel + pts * (hmel - lmel) / (mels + 2)) / 2595) - 1)
    at = np.floor((length + 1) * hz / rate).astype(np.int64)
    mw = np.zeros((length // 2 + 1, mels))
    for i in range(mels):
        l, c, h = at[i], at[i + 1], at[i + 2]
        if c == l:
            mw[c, i] = 1
        else:
            mw[l:c + 1, i] = (np.arange(l, c + 1) - l) / (c - l)
        if h > c:
            mw[c:h, i] = (h - np.arange(c, h)) / (h - c)
    z = rng.standard_normal(mw.shape)
    write(out, "melweightmatrix",
          [helper.make_node("MelWeightMatrix", ["m", "n", "r", "lo", "hi"], ["w"], output_datatype=11),
           helper.make_node("Add", ["w", "z"], ["y"])],
          [("z", z)], [("y", mw + z)],
          inits=[("m", np.array(mels, dtype=np.int32)), ("n", np.array(length, dtype=np.int64)),
                 ("r", np.array(rate, dtype=np.int64)), ("lo", lo), ("hi", hi)], opset=17)


def conv_int(x, w, pads, strides, dils, group):
    """Conv over int64 operands already less their zero points (the pads 0), N-D, groups."""
    ns = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[ns + i]) for i in range(ns)])
    M, Cg = w.shape[0], w.shape[1]
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - dils[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(ns)]
    y = np.zeros((x.shape[0], M) + tuple(out), np.int64)
    Mg = M // group
    for o in np.ndindex(*out):
        for t in np.ndindex(*k):
            idx = tuple(slice(None) for _ in range(2)) + tuple(
                o[i] * strides[i] + t[i] * dils[i] for i in range(ns))
            xv = xp[idx]                                    # [N, C]
            for g in range(group):
                wt = w[(slice(g * Mg, (g + 1) * Mg), slice(None)) + t]     # [Mg, Cg]
                y[(slice(None), slice(g * Mg, (g + 1) * Mg)) + o] += xv[:, g * Cg:(g + 1) * Cg] @ wt.T
    return y


def requant(acc, mult, zp, dt):
    """onnx's reference: the int sums times the float32 multiplier in float64, rounded half
    to even, plus the zero point, saturated."""
    info = np.iinfo(dt)
    return np.clip(np.round(acc * mult.astype(np.float64)) + zp, info.min, info.max).astype(dt)


def wrap32(v):
    return ((v + 2**31) % 2**32 - 2**31).astype(np.int32)


def quantized(out):
    """DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv in
    exact integer numpy (int64 sums, wrapped to 32 bits) and onnx's reference requantization:
    i8 and u8 operands, per-column and per-channel zero points and scales, broadcast batches,
    1100 columns, sums past float's 24 bits and past int32 (wrapping), groups, strides, dilations and
    asymmetric pads in 1-, 2- and 3-D, s8 weights (oneDNN's int8 matmul) with u8 and s8
    activations, and onnxruntime's quantize_dynamic pattern
    (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> Add)."""
    rng = np.random.default_rng(20261203)     # its own: the other cases' data stay as they were
    U8, I8, I32 = np.uint8, np.int8, np.int32
    a = rng.integers(0, 256, (2, 3, 5, 37)).astype(U8)
    b = rng.integers(-128, 128, (3, 37, 1100)).astype(I8)
    za, zb = np.array(131, U8), rng.integers(-5, 6, 1100).astype(I8)
    y = (a.astype(np.int64) - 131) @ (b.astype(np.int64) - zb.astype(np.int64))
    write(out, "matmulinteger_u8_i8_percolumn_bcast",
          [helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
          [("a", a), ("b", b), ("za", za), ("zb", zb)], [("y", wrap32(y))])
    a1 = np.full(40000, 255, U8)
    b1 = rng.integers(200, 256, (40000, 3)).astype(U8)
    write(out, "matmulinteger_1d_wraps",
          [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
          [("a", a1), ("b", b1)], [("y", wrap32(a1.astype(np.int64) @ b1.astype(np.int64)))])
    qa = rng.integers(0, 256, (4, 33)).astype(U8)
    qb = rng.integers(-128, 128, (33, 7)).astype(I8)
    sa, sb, sy = np.array(0.02, F32), rng.uniform(0.005, 0.02, 7).astype(F32), np.array(0.9, F32)
    zqa, zqb, zy = np.array(120, U8), rng.integers(-3, 4, 7).astype(I8), np.array(-7, I8)
    acc = (qa.astype(np.int64) - 120) @ (qb.astype(np.int64) - zqb.astype(np.int64))
    write(out, "qlinearmatmul_percolumn_i8_out",
          [helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                            ["y"])],
          [("a", qa), ("sa", sa), ("za", zqa), ("b", qb), ("sb", sb), ("zb", zqb), ("sy", sy),
           ("zy", zy)],
          [("y", requant(acc, sa * sb / sy, -7, I8))])
    ta, tb = rng.integers(0, 8, (3, 4)).astype(U8), rng.integers(0, 8, (4, 5)).astype(U8)
    one, half = np.array(1, F32), np.array(0.5, F32)
    acc = ta.astype(np.int64) @ tb.astype(np.int64)
    write(out, "qlinearmatmul_ties_to_even",
          [helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                            ["y"])],
          [("a", ta), ("sa", one), ("za", np.array(0, U8)), ("b", tb), ("sb", half),
           ("zb", np.array(0, U8)), ("sy", one), ("zy", np.array(0, U8))],
          [("y", requant(acc, one * half / one, 0, U8))])
    x = rng.integers(0, 256, (2, 4, 9, 8)).astype(U8)
    w = rng.integers(-128, 128, (6, 2, 3, 3)).astype(I8)
    zw = rng.integers(-4, 5, 6).astype(I8)
    pads, strides, dils = [1, 2, 0, 1], [2, 1], [1, 2]
    yc = conv_int(x.astype(np.int64) - 7, w.astype(np.int64) - zw.reshape(6, 1, 1, 1), pads,
                  strides, dils, 2)
    write(out, "convinteger_groups_strides_dilations_perchannel",
          [helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], group=2,
                            pads=pads, strides=strides, dilations=dils)],
          [("x", x), ("w", w), ("zx", np.array(7, U8)), ("zw", zw)], [("y", wrap32(yc))])
    x1 = rng.integers(-128, 128, (1, 3, 20)).astype(I8)
    w1 = rng.integers(0, 256, (4, 3, 5)).astype(U8)
    y1 = conv_int(x1.astype(np.int64) + 3, w1.astype(np.int64) - 100, [2, 1], [3], [1], 1)
    write(out, "convinteger_1d",
          [helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], pads=[2, 1],
                            strides=[3])],
          [("x", x1), ("w", w1), ("zx", np.array(-3, I8)), ("zw", np.array(100, U8))],
          [("y", wrap32(y1))])
    x3 = rng.integers(0, 256, (1, 2, 4, 5, 5)).astype(U8)
    w3 = rng.integers(0, 256, (3, 2, 2, 3, 3)).astype(U8)
    y3 = conv_int(x3.astype(np.int64), w3.astype(np.int64), [0, 1, 1, 1, 1, 1], [1, 2, 2],
                  [1, 1, 1], 1)
    write(out, "convinteger_3d",
          [helper.make_node("ConvInteger", ["x", "w"], ["y"], pads=[0, 1, 1, 1, 1, 1],
                            strides=[1, 2, 2])],
          [("x", x3), ("w", w3)], [("y", wrap32(y3))])
    xd = rng.integers(200, 256, (1, 300, 3, 3)).astype(U8)      # sums past float's 2^24
    wd = rng.integers(200, 256, (2, 300, 3, 3)).astype(U8)
    write(out, "convinteger_sums_past_float",
          [helper.make_node("ConvInteger", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
          [("x", xd), ("w", wd)],
          [("y", wrap32(conv_int(xd.astype(np.int64), wd.astype(np.int64), [1, 1, 1, 1], [1, 1],
                                 [1, 1], 1)))])
    qx = rng.integers(0, 256, (1, 3, 10, 10)).astype(U8)
    qw = rng.integers(-127, 128, (5, 3, 3, 3)).astype(I8)
    sx, sw, sy = np.array(0.03, F32), rng.uniform(0.002, 0.01, 5).astype(F32), np.array(0.25, F32)
    zqw = rng.integers(-2, 3, 5).astype(I8)
    bias = rng.integers(-3000, 3000, 5).astype(I32)
    acc = conv_int(qx.astype(np.int64) - 128, qw.astype(np.int64) - zqw.reshape(5, 1, 1, 1),
                   [1, 1, 1, 1], [2, 2], [1, 1], 1) + bias.reshape(1, 5, 1, 1)
    write(out, "qlinearconv_perchannel_bias",
          [helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "B"],
                            ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
          [("x", qx), ("sx", sx), ("zx", np.array(128, U8)), ("w", qw), ("sw", sw),
           ("zw", zqw), ("sy", sy), ("zy", np.array(60, U8)), ("B", bias)],
          [("y", requant(acc, (sx * sw / sy).reshape(1, 5, 1, 1), 60, U8))])

    # an s8 weight: oneDNN's int8 matmul where it sums exactly (VNNI), the zero points folded
    # in after from the row and column sums
    for name, adt in (("u8", U8), ("s8", I8)):
        info = np.iinfo(adt)
        wa = rng.integers(info.min, info.max + 1, (2, 5, 70)).astype(adt)
        wb = rng.integers(-128, 128, (70, 33)).astype(I8)
        wza, wzb = np.array(info.max // 3, adt), rng.integers(-9, 10, 33).astype(I8)
        acc = (wa.astype(np.int64) - wza.astype(np.int64)) @ (wb.astype(np.int64) - wzb)
        write(out, "matmulinteger_weight_%s_percolumn" % name,
              [helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
              [("a", wa), ("za", wza)], [("y", wrap32(acc))], inits=[("b", wb), ("zb", wzb)])
        ws_ = rng.uniform(0.001, 0.004, 33).astype(F32)
        write(out, "qlinearmatmul_weight_%s" % name,
              [helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                                ["y"])],
              [("a", wa), ("za", wza)],
              [("y", requant(acc, np.array(0.05, F32) * ws_ / np.array(0.02, F32), 3, U8))],
              inits=[("sa", np.array(0.05, F32)), ("b", wb), ("sb", ws_), ("zb", wzb),
                     ("sy", np.array(0.02, F32)), ("zy", np.array(3, U8))])

    def dql(v):
        hi, lo = F32(max(0, v.max())), F32(min(0, v.min()))
        s = F32(1.0 if hi == lo else hi - lo) / F32(255)
        z = np.round(np.clip(F32(0) - lo / s, 0, 255)).astype(F32)
        return np.clip(np.round(v / s) + z, 0, 255).astype(U8), np.array(s, F32), np.array(z, U8)
    for name, v in (("random", (rng.standard_normal((3, 50)) * 4).astype(F32)),
                    ("all_negative", -rng.uniform(0.5, 3, (7,)).astype(F32)),
                    ("all_zero", np.zeros((2, 2), F32))):
        q, s, z = dql(v)
        write(out, "dynamicquantizelinear_" + name,
              [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
              [("x", v)], [("y", q), ("s", s), ("z", z)])
    # onnxruntime's quantize_dynamic on a Linear: the activation quantized at run time
    xf = (rng.standard_normal((2, 8, 16)) * 2).astype(F32)
    wq = rng.integers(-127, 128, (16, 24)).astype(I8)
    ws, wb = np.array(0.01, F32), rng.standard_normal(24).astype(F32)
    q, s, z = dql(xf)
    acc = (q.astype(np.int64) - z.astype(np.int64)) @ wq.astype(np.int64)
    yf = acc.astype(F32) * (s * ws) + wb
    write(out, "quantize_dynamic_linear",
          [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
           helper.make_node("MatMulInteger", ["q", "wq", "z"], ["acc"]),
           helper.make_node("Cast", ["acc"], ["accf"], to=onnx.TensorProto.FLOAT),
           helper.make_node("Mul", ["s", "ws"], ["sw"]),
           helper.make_node("Mul", ["accf", "sw"], ["yd"]),
           helper.make_node("Add", ["yd", "wb"], ["y"])],
          [("x", xf)], [("y", yf)], inits=[("wq", wq), ("ws", ws), ("wb", wb)])


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: extra_edges.py OUTDIR\n")
        return 2
    out = sys.argv[1]
    elementwise(out)
    half(out)
    half_compute(out)
    reductions(out)
    fused(out)
    folded(out)
    views(out)
    losses(out)
    norms(out)
    gridsample(out)
    signal(out)
    quantized(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
