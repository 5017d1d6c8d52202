#!/usr/bin/python3
"""extra_if.py NODEDIR - tapc's own If cases in the backend-test layout.

The official node tests have one If case tapc can run (test_if: constant
branches).  These cover what a real model's If does: branches that read
outer values and weights of the main graph, compute different operators,
carry their own initializers, return an outer value unchanged, give two
outputs (one an outer value through an Identity, as onnxruntime wants), nest an If inside a branch, and a condition known at compile time
(an initializer: tapc inlines the branch).  Each runs with the condition
true and false (test_data_set_0 and _1 of two cases).  References are
numpy's.  Called by test/node/gen.sh; deterministic.
"""
import os
import sys

import numpy as np
from onnx import TensorProto as T, helper, numpy_helper

F32 = T.FLOAT


def vi(name, shape, dt=F32):
    return helper.make_tensor_value_info(name, dt, shape)


def write_case(root, name, graph, feeds, outs, opset=13):
    d = os.path.join(root, "test_tapc_" + name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    ds = os.path.join(d, "test_data_set_0")
    for i, (n, v) in enumerate(feeds):
        with open(os.path.join(ds, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())
    for i, (n, v) in enumerate(outs):
        with open(os.path.join(ds, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())


def main():
    root = sys.argv[1]
    rng = np.random.default_rng(31)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)

    # then: relu(x @ w) * 2 (its own initializer "two"); else: -x + b
    then = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["tm"], name="then/mm"),
         helper.make_node("Relu", ["tm"], ["tr"], name="then/relu"),
         helper.make_node("Mul", ["tr", "two"], ["ty"], name="then/mul")],
        "then", [], [vi("ty", [2, 4])], initializer=[numpy_helper.from_array(np.float32(2), "two")])
    els = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["en"], name="else/neg"),
         helper.make_node("Add", ["en", "b"], ["ey"], name="else/add")],
        "else", [], [vi("ey", [2, 4])])
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=els)],
        "if_outer", [vi("c", [], T.BOOL), vi("x", [2, 4])], [vi("y", [2, 4])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    for c in (True, False):
        y = np.maximum(x @ w, 0) * 2 if c else -x + b
        write_case(root, "if_outer_values_%s" % ("true" if c else "false"), g,
                   [("c", np.array(c)), ("x", x)], [("y", y.astype(np.float32))])

    # two outputs; the else branch returns an outer value unchanged
    then = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["t0"], name="then/sig"),
         helper.make_node("Tanh", ["x"], ["t1"], name="then/tanh")],
        "then", [], [vi("t0", [2, 4]), vi("t1", [2, 4])])
    els = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["e0"], name="else/abs"),
         helper.make_node("Identity", ["x"], ["e1"], name="else/id")],
        "else", [], [vi("e0", [2, 4]), vi("e1", [2, 4])])
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["y0", "y1"], name="if2", then_branch=then, else_branch=els),
         helper.make_node("Add", ["y0", "y1"], ["z"], name="after")],
        "if_two", [vi("c", [], T.BOOL), vi("x", [2, 4])], [vi("z", [2, 4]), vi("y1", [2, 4])])
    for c in (True, False):
        y0 = 1 / (1 + np.exp(-x)) if c else np.abs(x)
        y1 = np.tanh(x) if c else x
        write_case(root, "if_two_outputs_%s" % ("true" if c else "false"), g,
                   [("c", np.array(c)), ("x", x)],
                   [("z", (y0 + y1).astype(np.float32)), ("y1", y1.astype(np.float32))])

    # an If nested in a branch, on a condition computed from the data
    inner_t = helper.make_graph([helper.make_node("Exp", ["x"], ["it"], name="in/exp")],
                                "it", [], [vi("it", [2, 4])])
    inner_e = helper.make_graph([helper.make_node("Sin", ["x"], ["ie"], name="in/sin")],
                                "ie", [], [vi("ie", [2, 4])])
    then = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], name="then/sum", keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["pos"], name="then/gt"),
         helper.make_node("If", ["pos"], ["ti"], name="then/if", then_branch=inner_t,
                          else_branch=inner_e)],
        "then", [], [vi("ti", [2, 4])], initializer=[numpy_helper.from_array(np.float32(0), "zero")])
    els = helper.make_graph([helper.make_node("Cos", ["x"], ["eo"], name="else/cos")],
                            "else", [], [vi("eo", [2, 4])])
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="outer", then_branch=then, else_branch=els)],
        "if_nested", [vi("c", [], T.BOOL), vi("x", [2, 4])], [vi("y", [2, 4])])
    for c, sign in ((True, 1), (True, -1), (False, 1)):
        xs = np.abs(x) * sign
        y = (np.exp(xs) if xs.sum() > 0 else np.sin(xs)) if c else np.cos(xs)
        write_case(root, "if_nested_%s_%s" % ("true" if c else "false", "pos" if sign > 0 else "neg"),
                   g, [("c", np.array(c)), ("x", xs)], [("y", y.astype(np.float32))])

    # a condition known at compile time: tapc inlines the branch
    for c in (True, False):
        then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then/relu")],
                                 "then", [], [vi("t", [2, 4])])
        els = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else/neg")],
                                "else", [], [vi("e", [2, 4])])
        g = helper.make_graph(
            [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=els),
             helper.make_node("Mul", ["y", "y"], ["z"], name="sq")],
            "if_const", [vi("x", [2, 4])], [vi("z", [2, 4])],
            initializer=[numpy_helper.from_array(np.array(c), "c")])
        y = np.maximum(x, 0) if c else -x
        write_case(root, "if_constant_cond_%s" % ("true" if c else "false"), g, [("x", x)],
                   [("z", (y * y).astype(np.float32))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
