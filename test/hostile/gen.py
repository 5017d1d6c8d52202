#!/usr/bin/python3
"""gen.py OUTDIR - write hostile-name models for test/hostile.sh.

Every name a model can carry (graph, nodes, inputs, outputs, initializers,
external data files, the model's file and directory) holds the sequences
that broke out of tapc's generated files before (issue 11): comment
closers, a backslash-CR splice, trigraphs, quotes, make's specials, and
payloads that print INJECTED if they ever run.  Two models, the same MLP
(y = relu(x @ W1 + b1) @ W2 + b2, x f32[N,8], N symbolic):

  OUTDIR/<nasty dir>/<nasty file>.onnx   every sequence, newlines included
  OUTDIR/<make dir>/model.onnx           names make can spell (-MD)

each with test_data_set_0 (batch 2) and test_data_set_1 (batch 4), the
references computed here with numpy (not by tapc); and OUTDIR/divmod/, an
integer Div and Mod on run-time inputs that divide by zero and INT64_MIN
by -1, with the documented results worked out in Python.  The two model paths,
relative to OUTDIR, go to OUTDIR/nasty.path and OUTDIR/plain.path (no
final newline: the nasty one holds newlines).  Needs Debian's python3-onnx.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# A payload that runs prints INJ and ECTED joined, or defines a symbol
# INJECTED_*: neither appears in the names themselves.
INJ = [
    " */ int INJECTED_A = 1; /* ",
    "b\\\r/ int INJECTED_B; /*",
    'c"); puts("INJ" "ECTED"); ("',
    "??/\n#define x int INJECTED_D;",
    'e\n*/ int main(void) { return puts("INJ" "ECTED"); } /*',
    "$(shell echo INJ''ECTED) `echo INJ''ECTED` #",
    "\\\"\\\\ ??= ??' ??! \t\r\x01\x7f",
    "</text><script>INJECTED</script>&amp;",
    "\u00e9\u4e2d\U0001f600",
]


def mlp(names, ext, rng):
    """The MLP with the given names; ext maps initializer -> external file."""
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 8)).astype(np.float32)
    b2 = rng.standard_normal(8).astype(np.float32)
    vals = {"w1": w1, "b1": b1, "w2": w2, "b2": b2}
    inits = []
    for k, v in vals.items():
        t = numpy_helper.from_array(v, names[k])
        inits.append(t)
    n = names
    nodes = [
        helper.make_node("MatMul", [n["x"], n["w1"]], [n["h1"]], name=n["mm1"]),
        helper.make_node("Add", [n["h1"], n["b1"]], [n["h2"]], name=n["add1"]),
        helper.make_node("Relu", [n["h2"]], [n["h3"]], name=n["relu"]),
        helper.make_node("MatMul", [n["h3"], n["w2"]], [n["h4"]], name=n["mm2"]),
        helper.make_node("Add", [n["h4"], n["b2"]], [n["y"]], name=n["add2"]),
    ]
    g = helper.make_graph(
        nodes, n["graph"],
        [helper.make_tensor_value_info(n["x"], TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info(n["y"], TensorProto.FLOAT, ["N", 8])],
        initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return m, vals


def externalize(m, name, location, root):
    """Move initializer `name` into the file `location` under root."""
    for t in m.graph.initializer:
        if t.name == name:
            path = os.path.join(root, location)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(b"\x00" * 8 + t.raw_data)  # at offset 8
            del t.external_data[:]
            for k, v in (("location", location), ("offset", "8"),
                         ("length", str(len(t.raw_data)))):
                e = t.external_data.add()
                e.key, e.value = k, v
            t.data_location = TensorProto.EXTERNAL
            t.ClearField("raw_data")
            return
    raise KeyError(name)


def data_sets(root, vals, names, rng):
    for k, batch in ((0, 2), (1, 4)):
        x = rng.standard_normal((batch, 8)).astype(np.float32)
        h = np.maximum(x @ vals["w1"] + vals["b1"], 0)
        y = (h @ vals["w2"] + vals["b2"]).astype(np.float32)
        d = os.path.join(root, "test_data_set_%d" % k)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, names["x"]).SerializeToString())
        with open(os.path.join(d, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, names["y"]).SerializeToString())


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(11)
    keys = ["graph", "x", "y", "h1", "h2", "h3", "h4", "w1", "b1", "w2", "b2",
            "mm1", "add1", "relu", "mm2", "add2"]
    # every name distinct, every one hostile
    nasty = {k: "%s %s" % (k, INJ[i % len(INJ)]) for i, k in enumerate(keys)}
    ndir = 'm "d" $x #y \\ \'q\' ??/ */'.replace("/", "_") + "\n"
    nfile = 'm"o*del\r.onnx'
    root = os.path.join(out, ndir)
    os.makedirs(root, exist_ok=True)
    m, vals = mlp(nasty, {}, rng)
    externalize(m, nasty["w1"], 'sub "*/ dir\n/w1 ??/ $x.bin', root)
    externalize(m, nasty["w2"], "w2 #1 $(x) `y` (1).bin", root)
    onnx.save(m, os.path.join(root, nfile))
    data_sets(root, vals, nasty, rng)
    with open(os.path.join(out, "nasty.path"), "w") as f:
        f.write(os.path.join(ndir, nfile))

    # names that make can spell, for -MD
    plain = {k: "%s */ $x #1 \"q\" ??/" % k for k in keys}
    mdir = "make dir $x #1"
    root = os.path.join(out, mdir)
    os.makedirs(root, exist_ok=True)
    m, vals = mlp(plain, {}, rng)
    externalize(m, plain["w1"], "sub dir/w1 $x #1 (2).bin", root)
    externalize(m, plain["w2"], "w2:colon.bin", root)
    onnx.save(m, os.path.join(root, "model.onnx"))
    data_sets(root, vals, plain, rng)
    with open(os.path.join(out, "plain.path"), "w") as f:
        f.write(os.path.join(mdir, "model.onnx"))
    divmod_model(out)
    arena_model(out)


def divmod_model(out):
    """q = a / b, r = a mod b on int64 inputs known only at run time, with
    the divisions that trap in C: x / 0 and INT64_MIN / -1.  The kernels'
    documented results (docs/ops.md): 0 for a zero divisor, the wrapped
    minimum for MIN / -1; otherwise C's truncation for Div and the
    divisor's sign for Mod (fmod=0)."""
    i64 = TensorProto.INT64
    g = helper.make_graph(
        [helper.make_node("Div", ["a", "b"], ["q"], name="div"),
         helper.make_node("Mod", ["a", "b"], ["r"], name="mod")], "divmod",
        [helper.make_tensor_value_info("a", i64, [6]), helper.make_tensor_value_info("b", i64, [6])],
        [helper.make_tensor_value_info("q", i64, [6]), helper.make_tensor_value_info("r", i64, [6])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    root = os.path.join(out, "divmod")
    os.makedirs(os.path.join(root, "test_data_set_0"), exist_ok=True)
    onnx.save(m, os.path.join(root, "model.onnx"))
    MIN = -(1 << 63)
    a = [7, -7, 5, MIN, MIN, 9]
    b = [2, 2, 0, -1, 0, -4]

    def div(x, y):
        if y == 0:
            return 0
        if x == MIN and y == -1:
            return MIN
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q

    def mod(x, y):
        if y == 0 or y == -1:
            return 0
        r = abs(x) % abs(y)
        r = r if x >= 0 else -r      # C's %: the dividend's sign
        return r + y if r and (r < 0) != (y < 0) else r

    d = os.path.join(root, "test_data_set_0")
    for k, (nm, v) in enumerate((("a", a), ("b", b))):
        with open(os.path.join(d, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(np.array(v, np.int64), nm).SerializeToString())
    for k, (nm, fn) in enumerate((("q", div), ("r", mod))):
        v = np.array([fn(x, y) for x, y in zip(a, b)], np.int64)
        with open(os.path.join(d, "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(v, nm).SerializeToString())


def arena_model(out):
    """300 values of 2^48 bytes each (the most one tensor may hold), all live
    until one Sum: the activation arena's sum is past 2^56 bytes."""
    f32 = TensorProto.FLOAT
    n = 300
    nodes = [helper.make_node("Expand", ["x", "s"], ["e%d" % i], name="exp%d" % i) for i in range(n)]
    nodes.append(helper.make_node("Sum", ["e%d" % i for i in range(n)], ["y"], name="sum"))
    g = helper.make_graph(nodes, "arena", [helper.make_tensor_value_info("x", f32, [1])],
                          [helper.make_tensor_value_info("y", f32, [1 << 46])],
                          initializer=[helper.make_tensor("s", TensorProto.INT64, [1], [1 << 46])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    os.makedirs(os.path.join(out, "arena"), exist_ok=True)
    onnx.save(m, os.path.join(out, "arena", "model.onnx"))


if __name__ == "__main__":
    main()
