#!/usr/bin/python3
"""gen_diag.py - write the bad-model cases of test/diag/.

Each case is one ONNX model breaking one rule tapc checks on untrusted
input (docs: DESIGN.md "Untrusted input"), plus the exact first stderr
line a user should read:

    CASE.onnx  CASE.expected  [CASE.args]          a single-file model
    CASE/model.onnx + data files  CASE.expected    external-data cases

test/diag.sh runs `tapc CASE.onnx` (or `tapc CASE/model.onnx`) from this
directory, so the expected lines name the file relatively.  An empty
.expected file marks a positive control that must compile.  .args holds
extra tapc arguments, one per line.

The expected lines are written from the rule, not copied from tapc's
output.  Needs Debian's python (onnx 1.12, numpy):
    /usr/bin/python3 test/diag/gen_diag.py
Everything is deterministic; a re-run reproduces the files byte for byte.
"""
import os
import shutil
import sys

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {}      # name -> (expected message without the prefix, args)


# ------------------------------------------------------------ wire format
def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7f
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wt):
    return varint(field << 3 | wt)


def ld(field, payload):
    """A length-delimited field."""
    return key(field, 2) + varint(len(payload)) + payload


def vi(field, v):
    return key(field, 0) + varint(v)


# ----------------------------------------------------------------- models
def tiny_graph(**kw):
    """x f32[1,4] -> Relu -> y f32[1,4], with overrides."""
    nodes = kw.pop("nodes", [helper.make_node("Relu", ["x"], ["y"], name="relu")])
    inputs = kw.pop("inputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])])
    outputs = kw.pop("outputs", [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    inits = kw.pop("inits", [])
    assert not kw, kw
    return helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)


def make_model(graph, opset=13):
    opsets = [] if opset is None else [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def w_tensor(name="w", dims=(2, 2), dtype=TensorProto.FLOAT):
    """An initializer built field by field (helper.make_tensor checks too much)."""
    t = TensorProto()
    t.name = name
    t.dims.extend(dims)
    if dtype is not None:
        t.data_type = dtype
    return t


def add_graph(inits, extra_in=None):
    """y = x + w with x, y f32[2,2]; the case breaks something in inits."""
    return tiny_graph(
        nodes=[helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])] + (extra_in or []),
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        inits=inits)


def good_w():
    t = w_tensor()
    t.float_data.extend([1, 2, 3, 4])
    return t


# ---------------------------------------------------------------- writing
def clean():
    for n in os.listdir(HERE):
        p = os.path.join(HERE, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif n.endswith((".onnx", ".ir", ".expected", ".args")):
            os.unlink(p)


def case(name, data, msg, args=()):
    """A single-file case; msg is what follows 'tapc: error: NAME.onnx: '."""
    if isinstance(data, onnx.ModelProto):
        data = data.SerializeToString()
    with open(os.path.join(HERE, name + ".onnx"), "wb") as f:
        f.write(data)
    finish(name, name + ".onnx", msg, args)


def ir_case(name, text, msg, args=()):
    """An IR-file case: CASE.ir holding text (IR files are untrusted too)."""
    with open(os.path.join(HERE, name + ".ir"), "w") as f:
        f.write(text)
    finish(name, name + ".ir", msg, args)


def dir_case(name, model, files=(), links=(), dirs=(), msg="", fifos=(), args=(), ir=None):
    """An external-data case: CASE/model.onnx (or CASE/model.ir when ir is
    its text, or when fifos names model.ir) plus files {rel: bytes},
    symlinks {rel: target}, FIFOs and directories."""
    root = os.path.join(HERE, name)
    os.mkdir(root)
    if fifos:  # made by test/diag.sh in a copy, like the symlinks
        with open(os.path.join(root, "FIFOS"), "w") as f:
            f.write("".join(x + "\n" for x in fifos))
    for d in dirs:
        os.makedirs(os.path.join(root, d))
    for rel, data in dict(files).items():
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    # Symlinks are not committed (make dist's tar would follow them): they
    # are listed in CASE/SYMLINKS and test/diag.sh makes them in a copy.
    if links:
        with open(os.path.join(root, "SYMLINKS"), "w") as f:
            for rel, target in dict(links).items():
                f.write("%s %s\n" % (rel, target))
    input_name = "model.ir" if ir is not None or "model.ir" in fifos else "model.onnx"
    if ir is not None:
        with open(os.path.join(root, "model.ir"), "w") as f:
            f.write(ir)
    elif model is not None:
        with open(os.path.join(root, "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
    finish(name, name + "/" + input_name, msg, args)


def expect(name, line):
    """A case whose first error line does not start with its input's path
    (a command-line file, -MD): the whole line."""
    with open(os.path.join(HERE, name + ".expected"), "w") as f:
        f.write(line + "\n")
    CASES[name] = line


def finish(name, path, msg, args):
    line = "" if msg is None else "tapc: error: %s: %s" % (path, msg)
    with open(os.path.join(HERE, name + ".expected"), "w") as f:
        f.write(line + "\n" if line else "")
    if args:
        with open(os.path.join(HERE, name + ".args"), "w") as f:
            f.write("".join(a + "\n" for a in args))
    CASES[name] = line


# ------------------------------------------------------------------ cases
def cases_file():
    ok = make_model(tiny_graph())
    okb = ok.SerializeToString()
    case("ok_tiny", ok, None)
    # weights in packed float_data / double_data / int64_data (the unit
    # test compares the file bytes at the loader's offsets with these)
    d = w_tensor("d", dims=(3,), dtype=TensorProto.DOUBLE)
    d.double_data.extend([0.5, -1.25, 3e300])
    k = w_tensor("k", dims=(2,), dtype=TensorProto.INT64)
    k.int64_data.extend([-7, 1 << 40])
    w = good_w()
    w.ClearField("float_data")
    w.float_data.extend([1.5, -2.0, 3.25, 1e-30])
    case("ok_typed_data", make_model(add_graph([w, d, k])), None)

    # size cap
    case("size_cap", ok, "file is %d bytes, over the limit of 64 bytes (-max-model-size)" % len(okb),
         ["-max-model-size=64"])

    # framing errors; the offset a user needs is that of the bad field's key
    # (where the valid model ends), not where the scanner gave up.
    # An ir_version varint cut after two continuation bytes:
    case("truncated_varint", okb + b"\x08\xff\xff",
         "not an ONNX model: malformed protobuf at byte offset %d" % len(okb))
    # producer_name claims 64 bytes, 3 follow
    case("length_past_end", okb + b"\x12\x40abc",
         "not an ONNX model: malformed protobuf at byte offset %d" % len(okb))
    # end-group (wire type 4) key for field 1
    case("wire_type_group", okb + b"\x0c",
         "not an ONNX model: malformed protobuf at byte offset %d" % len(okb))
    case("field_zero", okb + b"\x00\x00",
         "not an ONNX model: malformed protobuf at byte offset %d" % len(okb))
    case("empty", b"", "not an ONNX model: the file is empty")

    # 50 nested If nodes: model, graph, node, attribute, graph, ... over 150
    # levels (1.4 KB).
    # The message at depth 100 (the 101st counting the model) is refused.
    body = ld(1, helper.make_node("Relu", ["x"], ["y"]).SerializeToString())
    for _ in range(50):
        attr = ld(1, b"then_branch") + vi(20, 5) + ld(6, body)
        body = ld(1, ld(4, b"If") + ld(5, attr))
    deep = vi(1, 8) + ld(8, vi(2, 13)) + ld(7, body)
    case("too_deep", deep,
         "protobuf messages nested deeper than 100 at byte offset %d" % find_depth(deep, 100))

    # the same through TypeProto: an input of sequence(sequence(...)) 60 deep
    t = helper.make_tensor_type_proto(TensorProto.FLOAT, [1])
    for _ in range(60):
        t = helper.make_sequence_type_proto(t)
    g = tiny_graph(inputs=[helper.make_value_info("x", t)])
    tb = make_model(g).SerializeToString()
    # depth: model 0, graph 1, value_info 2, type 3, seq 4, type 5, ...
    case("too_deep_type", tb,
         "protobuf messages nested deeper than 100 at byte offset %d" % find_depth(tb, 100))

    case("two_graphs", okb + ld(7, tiny_graph().SerializeToString()),
         "the model holds more than one graph field (byte offset %d)" % len(okb))

    case("no_opset", make_model(tiny_graph(), opset=None),
         "no opset_import for the default ONNX domain")
    m = make_model(tiny_graph(), opset=None)
    m.opset_import.extend([helper.make_opsetid("ai.onnx.ml", 3)])
    case("only_ml_opset", m, "no opset_import for the default ONNX domain")
    case("opset_too_old", make_model(tiny_graph(), opset=0),
         "opset 0 is not supported (tapc reads opsets 1 to 18)")
    case("opset_too_new", make_model(tiny_graph(), opset=19),
         "opset 19 is not supported (tapc reads opsets 1 to 18)")
    legacy = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"], name="add", broadcast=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    case("legacy_broadcast", make_model(legacy, opset=6),
         "node 'add' (Add): attribute 'broadcast' asks for the broadcasting of opsets before 7, "
         "which tapc does not support")
    scale = helper.make_tensor("s", TensorProto.FLOAT, [4, 1], [1.0, 2.0, 3.0, 4.0])
    ln = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", axis=2)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])], initializer=[scale])
    case("layernorm_scale_inner_broadcast", make_model(ln, opset=17),
         "node 'ln' (LayerNormalization): input 1 is f32[4,1]: broadcasting inside the "
         "normalized dims [4,5] is not supported (only leading 1s)")
    zrow = helper.make_tensor("za", TensorProto.UINT8, [3], [1, 2, 3])
    mmi = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "za"], ["y"], name="mmi")], "g",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [3, 4]),
         helper.make_tensor_value_info("b", TensorProto.UINT8, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 5])], initializer=[zrow])
    case("matmulinteger_a_per_row", make_model(mmi),
         "node 'mmi' (MatMulInteger): input 2 (a_zero_point) is u8[3]: one value (tapc "
         "quantizes this operand per tensor)")
    f1 = [helper.make_tensor(n, TensorProto.FLOAT, [], [0.5]) for n in ("xs", "ws", "ys")]
    z1 = [helper.make_tensor(n, TensorProto.UINT8, [], [0]) for n in ("xz", "wz", "yz")]
    fbias = helper.make_tensor("B", TensorProto.FLOAT, [2], [1.0, 2.0])
    qlc = helper.make_graph(
        [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"],
                          ["y"], name="qc")], "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 1, 4, 4]),
         helper.make_tensor_value_info("w", TensorProto.UINT8, [2, 1, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 2, 2, 2])],
        initializer=f1 + z1 + [fbias])
    case("qlinearconv_float_bias", make_model(qlc),
         "node 'qc' (QLinearConv): input 8 (B) is f32[2], expected i32[2]")
    pads = helper.make_tensor("p", TensorProto.INT64, [4], [0, 1, 0, 1])
    wrap = helper.make_graph(
        [helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode="wrap")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], initializer=[pads])
    case("pad_wrap_opset18", make_model(wrap, opset=18),
         "node 'pad' (Pad): mode wrap needs Pad at opset 19 or later, the model has 18")

    m = onnx.ModelProto()
    m.ir_version = 8
    m.opset_import.extend([helper.make_opsetid("", 13)])
    case("no_graph", m, "the model has no graph")
    case("no_outputs", make_model(tiny_graph(outputs=[])), "the graph has no outputs")

    # SSA
    case("ssa_two_nodes", make_model(tiny_graph(nodes=[
        helper.make_node("Relu", ["x"], ["y"], name="relu1"),
        helper.make_node("Relu", ["x"], ["y"], name="relu2")])),
        "node 'relu2' (Relu): output 'y' is already defined (values must be assigned once)")
    case("ssa_shadow_input", make_model(tiny_graph(nodes=[
        helper.make_node("Relu", ["x"], ["x"], name="relu")], outputs=[
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])])),
        "node 'relu' (Relu): output 'x' is already defined (values must be assigned once)")
    case("ssa_init_twice", make_model(add_graph([good_w(), good_w()])),
         "initializers: value 'w' is defined more than once")
    case("ssa_input_twice", make_model(tiny_graph(inputs=[
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])])),
        "graph inputs: value 'x' is defined more than once")

    case("not_topological", make_model(tiny_graph(nodes=[
        helper.make_node("Relu", ["t"], ["y"], name="second"),
        helper.make_node("Relu", ["x"], ["t"], name="first")])),
        "node 'second' (Relu): input 't' is used before the node that defines it "
        "(nodes are not in topological order)")
    case("undefined_input", make_model(tiny_graph(nodes=[
        helper.make_node("Add", ["x", "nope"], ["y"], name="add")])),
        "node 'add' (Add): input 'nope' is not defined")
    case("undefined_output", make_model(tiny_graph(outputs=[
        helper.make_tensor_value_info("nope", TensorProto.FLOAT, [1, 4])])),
        "graph output 'nope' is not defined")

    # data types
    t = w_tensor(dtype=None)
    t.float_data.extend([1, 2, 3, 4])
    case("dtype_missing", make_model(add_graph([t])), "initializer 'w': no data type")
    t = w_tensor(dtype=TensorProto.UNDEFINED)
    t.float_data.extend([1, 2, 3, 4])
    case("dtype_undefined", make_model(add_graph([t])), "initializer 'w': unknown data type 0")
    t = w_tensor(dtype=99)
    t.float_data.extend([1, 2, 3, 4])
    case("dtype_unknown", make_model(add_graph([t])), "initializer 'w': unknown data type 99")
    t = w_tensor(dtype=TensorProto.STRING)
    t.string_data.extend([b"a", b"b", b"c", b"d"])
    case("dtype_string", make_model(add_graph([t])),
         "initializer 'w': data type str is not supported")
    case("input_dtype_unknown", make_model(tiny_graph(inputs=[
        helper.make_tensor_value_info("x", 77, [1, 4])])),
        "input 'x': unknown data type 77")

    # data fields
    t = w_tensor()
    t.int64_data.extend([1, 2, 3, 4])
    case("field_mismatch", make_model(add_graph([t])),
         "initializer 'w': data type f32 but the values are in int64_data")
    t = w_tensor()
    t.raw_data = b"\0" * 12
    case("raw_data_length", make_model(add_graph([t])),
         "initializer 'w': raw_data is 12 bytes, expected 16 for f32[2,2]")
    t = w_tensor()
    t.float_data.extend([1, 2, 3])
    case("typed_count", make_model(add_graph([t])),
         "initializer 'w': float_data holds 3 values, expected 4 for f32[2,2]")
    t = w_tensor()
    case("no_values", make_model(add_graph([t])), "initializer 'w': no values for f32[2,2]")
    t = good_w()
    t.raw_data = b"\0" * 16
    case("two_data_fields", make_model(add_graph([t])),
         "initializer 'w': values in more than one data field")

    # dims
    t = w_tensor(dims=(2, -1))
    case("neg_dim_initializer", make_model(add_graph([t])),
         "initializer 'w': dimension 1 is -1, expected >= 0")
    case("neg_dim_input", make_model(tiny_graph(inputs=[
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, -4])])),
        "input 'x': dimension 1 is -4, expected >= 0")
    t = w_tensor(dims=(1 << 62, 8))
    case("numel_overflow", make_model(add_graph([t])),
         "initializer 'w': element count overflows int64")
    t = w_tensor(dims=(1 << 61, 1))
    case("bytes_overflow", make_model(add_graph([t])),
         "initializer 'w': byte size overflows int64")
    case("numel_overflow_input", make_model(tiny_graph(inputs=[
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1 << 32, 1 << 32])])),
        "input 'x': element count overflows int64")
    t = w_tensor(dims=(1,) * 9)
    t.float_data.append(1)
    case("rank_over_8", make_model(add_graph([t])),
         "initializer 'w': rank 9 is over tapc's limit of 8")
    case("rank_over_8_input", make_model(tiny_graph(inputs=[
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1] * 9)])),
        "input 'x': rank 9 is over tapc's limit of 8")

    # inputs
    case("input_no_shape", make_model(tiny_graph(inputs=[
        helper.make_tensor_value_info("x", TensorProto.FLOAT, None)])),
        "input 'x': no shape (tapc needs static shapes)")
    case("input_not_tensor", make_model(tiny_graph(inputs=[
        helper.make_value_info("x", helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(TensorProto.FLOAT, [1, 4])))])),
        "input 'x': type is not a tensor")
    case("symbolic_dim", make_model(tiny_graph(inputs=[
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n"])])),
        "symbolic dimension without a value: 'n' (input 'x' dim 1); give each one with -dim NAME=N "
        "or the input's shape with -input-shape INPUT=AxBxC")
    # symbolic dims as other exporters write them, and the pins that bind them
    p2o = make_model(tiny_graph(
        nodes=[helper.make_node("Relu", ["x"], ["y"], name="r"),
               helper.make_node("Relu", ["m"], ["z"], name="r2")],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                              ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1"]),
                helper.make_tensor_value_info("m", TensorProto.FLOAT, ["batch", "sequence", ""])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                 helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]))
    case("symbolic_dims_listed", p2o,
         "symbolic dimensions without a value: 'p2o.DynamicDimension.1' (input 'x' dim 2), "
         "'sequence' (input 'm' dim 1), '?' (input 'm' dim 2); give each one with -dim NAME=N "
         "or the input's shape with -input-shape INPUT=AxBxC")
    case("ok_pinned_dims", p2o, None,
         ["-dim", "p2o.DynamicDimension.1=5", "-input-shape=m=2x7x9", "-dim", "p2o.DynamicDimension.0=2"])
    case("pin_unknown_dim", p2o,
         "-dim seq=4: no input has a dimension named 'seq' (the model's symbolic dimensions: "
         "'p2o.DynamicDimension.0', 'p2o.DynamicDimension.1', 'batch', 'sequence')", ["-dim", "seq=4"])
    case("pin_unknown_input", p2o, "-input-shape q: the model has no input 'q' (its inputs: 'x', 'm')",
         ["-input-shape", "q=1x2"])
    case("pin_rank", p2o, "-input-shape x: 2 dims given, but input 'x' has rank 3",
         ["-input-shape", "x=1x3"])
    case("pin_static", p2o, "-input-shape x: dim 1 is 4, but the model fixes it at 3",
         ["-input-shape", "x=1x4x5"])
    case("pin_conflict", p2o, "dimension 'p2o.DynamicDimension.1' is 5 by -input-shape x but 6 by -dim",
         ["-input-shape", "x=1x3x5", "-dim", "p2o.DynamicDimension.1=6"])
    case("pin_zero", p2o, None, ["-dim", "sequence=0"])
    expect("pin_zero", "tapc: error: -dim sequence=0: expected NAME=N with N a positive count")

    # operators
    case("unsupported_op", make_model(tiny_graph(nodes=[
        helper.make_node("FooBar", ["x"], ["y"], name="foo")])),
        "node 'foo' (FooBar): unsupported operator 'FooBar' (docs/ops.md lists the supported ones)")
    case("internal_collective", make_model(tiny_graph(nodes=[
        helper.make_node("AllReduce", ["x"], ["y"], name="ar")])),
        "node 'ar' (AllReduce): 'AllReduce' is tapc's own collective, which only tp-rewrite makes; "
        "a model cannot use it")
    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 8, 4])
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 8])
    case("nms", make_model(tiny_graph(
        nodes=[helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["sel"], name="/nms")],
        inputs=[boxes, scores],
        outputs=[helper.make_tensor_value_info("sel", TensorProto.INT64, [8, 3])])),
        "node '/nms' (NonMaxSuppression): unsupported operator 'NonMaxSuppression' "
        "(docs/ops.md lists the supported ones)")
    case("unsupported_domain", make_model(tiny_graph(nodes=[
        helper.make_node("FusedGemm", ["x"], ["y"], name="fg", domain="com.microsoft")])),
        "node 'fg' (FusedGemm): operator domain 'com.microsoft' is not supported")
    branch = tiny_graph()
    case("subgraph_if", make_model(tiny_graph(
        nodes=[helper.make_node("If", ["c"], ["y"], name="if",
                                then_branch=branch, else_branch=branch)],
        inputs=[helper.make_tensor_value_info("c", TensorProto.BOOL, [])])),
        "node 'if' (If): the then branch has inputs; an If's branches take none")
    n = helper.make_node("Relu", ["x"], ["y"], name="relu")
    n.attribute.extend([helper.make_attribute("body", branch)])
    case("subgraph_attr", make_model(tiny_graph(nodes=[n])),
         "node 'relu' (Relu): attribute 'body' holds a subgraph; control flow other than If is "
         "not supported")

    # If: the branches must agree on each output; the condition is one bool
    def if_model(t_shape, e_shape, cond=TensorProto.BOOL):
        t = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then/relu")], "t", [],
                              [helper.make_tensor_value_info("t", TensorProto.FLOAT, t_shape)])
        e = helper.make_graph([helper.make_node("Slice", ["x", "s", "e", "a"], ["u"], name="else/slice")],
                              "e", [], [helper.make_tensor_value_info("u", TensorProto.FLOAT, e_shape)],
                              initializer=[helper.make_tensor("s", TensorProto.INT64, [1], [0]),
                                           helper.make_tensor("e", TensorProto.INT64, [1], [e_shape[1]]),
                                           helper.make_tensor("a", TensorProto.INT64, [1], [1])])
        return make_model(tiny_graph(
            nodes=[helper.make_node("If", ["c"], ["y"], name="if", then_branch=t, else_branch=e)],
            inputs=[helper.make_tensor_value_info("c", cond, []),
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])]))
    case("if_branches_differ", if_model([1, 4], [1, 3]),
         "node 'if' (If): output 0 is f32[1,4] in the then branch but f32[1,3] in the else branch; "
         "tapc compiles both and needs them the same")
    case("if_cond_float", if_model([1, 4], [1, 4], TensorProto.FLOAT),
         "node 'if' (If): the condition is f32[], expected one bool")
    case("ok_if", if_model([1, 4], [1, 4]), None, ["-mesh", "1x2"])
    loop = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="b")], "body", [], [])
    case("loop", make_model(tiny_graph(nodes=[helper.make_node("Loop", ["", "c"], ["y"], name="loop",
                                                              body=loop)],
                                       inputs=[helper.make_tensor_value_info("c", TensorProto.BOOL, [])])),
         "node 'loop' (Loop): unsupported operator 'Loop' (docs/ops.md lists the supported ones)")
    n = helper.make_node("LeakyRelu", ["x"], ["y"], name="lrelu", alpha=0.1)
    n.attribute.extend([helper.make_attribute("alpha", 0.2)])
    case("duplicate_attr", make_model(tiny_graph(nodes=[n])),
         "node 'lrelu' (LeakyRelu): attribute 'alpha' is given twice")

    # a sparse initializer
    m = make_model(add_graph([good_w()]))
    sp = m.graph.sparse_initializer.add()
    sp.values.CopyFrom(helper.make_tensor("s", TensorProto.FLOAT, [1], [1.0]))
    sp.indices.CopyFrom(helper.make_tensor("s_i", TensorProto.INT64, [1], [0]))
    sp.dims.extend([4])
    case("sparse_initializer", m, "sparse initializers are not supported")

    # shape inference: [2,3] x [4,5]
    case("matmul_shapes", make_model(tiny_graph(
        nodes=[helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
        inputs=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
                helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])),
        "node 'mm' (MatMul): input 1 is f32[4,5], expected [3,N]")

    # replicas need the batch as dim 0 of every output: a sum over the batch
    case("batch_reduced", make_model(tiny_graph(
        nodes=[helper.make_node("ReduceMax", ["x"], ["y"], name="max", axes=[0], keepdims=0)],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])),
        "node 'max' (ReduceMax): the batch cannot be split into replicas or micro-batches: it "
        "reduces over the batch's axis; -dp=1 -microbatches=1 works", ["-dp=2", "-batch=2"])

    # a model exported at a fixed batch (torch's default): the batch baked
    # into constants is found and rewritten; where it cannot be, one error
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    heads = make_model(tiny_graph(
        nodes=[helper.make_node("Reshape", ["x", "s1"], ["h"], name="split_heads"),
               helper.make_node("Relu", ["h"], ["r"], name="relu"),
               helper.make_node("Reshape", ["r", "s2"], ["y"], name="merge_heads")],
        inputs=[helper.make_tensor_value_info("x", f32, [4, 8])],
        outputs=[helper.make_tensor_value_info("y", f32, [4, 8])],
        inits=[helper.make_tensor("s1", i64, [3], [4, 4, 2]),
               helper.make_tensor("s2", i64, [2], [4, 8])]))
    case("ok_static_batch", heads, None, ["-batch=8"])
    case("ok_static_split", heads, None, ["-batch=8", "-dp=2"])
    g = tiny_graph(nodes=[helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                   inputs=[helper.make_tensor_value_info("x", f32, [2, 4])],
                   outputs=[helper.make_tensor_value_info("y", f32, [2, 4])],
                   inits=[helper.make_tensor("w", f32, [2, 4], [1, 2, 3, 4, 5, 6, 7, 8])])
    case("static_per_sample", make_model(g),
         "node 'add' (Add): the export batch 2 cannot be changed to 4: its input 'w' holds "
         "per-sample data of the export batch; -batch=2 (the export batch) works, or re-export "
         "with a dynamic batch", ["-batch=4"])
    g = tiny_graph(nodes=[helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=0)],
                   inputs=[helper.make_tensor_value_info("x", f32, [4, 4])],
                   outputs=[helper.make_tensor_value_info("y", f32, [4, 4])])
    case("static_mixing", make_model(g),
         "node 'sm' (Softmax): the batch cannot be split into replicas or micro-batches: it "
         "normalizes over the batch's axis; -dp=1 -microbatches=1 works", ["-dp=2"])
    case("ok_static_mixing_batch", make_model(g), None, ["-batch=8"])

    # recurrent ops: W of 3 gates for an LSTM's 4, a constant sequence
    # length past seq_length, an activation the spec does not name
    def rnn(op, gates, w_rows, attrs, extra_inits=(), node_in=("x", "w", "r")):
        return make_model(tiny_graph(
            nodes=[helper.make_node(op, list(node_in), ["", "y"], name=op.lower(), **attrs)],
            inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 3])],
            outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4])],
            inits=[helper.make_tensor("w", TensorProto.FLOAT, [1, w_rows, 3], [0.0] * w_rows * 3),
                   helper.make_tensor("r", TensorProto.FLOAT, [1, 4 * gates, 4],
                                      [0.0] * 16 * gates)] + list(extra_inits)), opset=14)
    case("rnn_weight_shape", rnn("LSTM", 4, 12, {"hidden_size": 4}),
         "node 'lstm' (LSTM): input 1 is f32[1,12,3], expected [1,16,3]")
    case("rnn_seq_lens", rnn("LSTM", 4, 16, {"hidden_size": 4},
                             [helper.make_tensor("len", TensorProto.INT32, [2], [3, 5])],
                             ("x", "w", "r", "", "len")),
         "node 'lstm' (LSTM): sequence_lens[1] is 5, outside [0, 3]")
    case("rnn_activation", rnn("GRU", 3, 12, {"activations": ["Sigmoid", "Swish"]}),
         "node 'gru' (GRU): unknown activation 'Swish'")


def read_ld(b):
    """Split key + length off a length-delimited field; returns (key, body)."""
    i = 0
    while b[i] & 0x80:
        i += 1
    i += 1
    n, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            break
    return b[:i], b[i:i + n]


# sub-message fields along the chains of too_deep and too_deep_type
SUB = {("model", 7): "graph", ("graph", 11): "vi", ("vi", 2): "type",
       ("type", 4): "seq", ("seq", 1): "type", ("type", 1): "ttype",
       ("ttype", 2): "shape", ("shape", 1): "dim", ("graph", 1): "node",
       ("graph", 12): "vi", ("model", 8): "opset", ("node", 5): "attr",
       ("attr", 6): "graph"}


def find_depth(buf, want):
    """Byte offset of the key of the first message at depth `want` (the
    model is depth 0), walking only the fields in SUB."""
    def walk(b, base, typ, depth):
        i = 0
        while i < len(b):
            at = i
            k, i = rd(b, i)
            f, wt = k >> 3, k & 7
            if wt == 0:
                _, i = rd(b, i)
                continue
            if wt == 1:
                i += 8
                continue
            if wt == 5:
                i += 4
                continue
            n, i = rd(b, i)
            sub = SUB.get((typ, f))
            if sub:
                if depth + 1 == want:
                    return base + at
                r = walk(b[i:i + n], base + i, sub, depth + 1)
                if r is not None:
                    return r
            i += n
        return None

    def rd(b, i):
        n, shift = 0, 0
        while True:
            c = b[i]
            i += 1
            n |= (c & 0x7f) << shift
            shift += 7
            if not c & 0x80:
                return n, i
    r = walk(buf, 0, "model", 0)
    assert r is not None
    return r


def ext_model(entries, location=TensorProto.EXTERNAL, name="w"):
    t = w_tensor(name)
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    if location is not None:
        t.data_location = location
    return make_model(add_graph([t]))


W16 = bytes(range(16))


def cases_dir():
    dir_case("ok_external", ext_model([("location", "w.bin")]), files={"w.bin": W16}, msg=None)
    dir_case("ext_absolute", ext_model([("location", "/etc/passwd")]),
             msg="initializer 'w': external data location '/etc/passwd' is an absolute path")
    dir_case("ext_dotdot", ext_model([("location", "../ok_external/w.bin")]),
             msg="initializer 'w': external data location '../ok_external/w.bin' leaves the model's directory")
    dir_case("ext_symlink_file", ext_model([("location", "w.bin")]),
             files={"real.bin": W16}, links={"w.bin": "real.bin"},
             msg="initializer 'w': external data location 'w.bin' goes through a symbolic link")
    dir_case("ext_symlink_dir", ext_model([("location", "sub/w.bin")]),
             files={"real/w.bin": W16}, dirs=["real"], links={"sub": "real"},
             msg="initializer 'w': external data location 'sub/w.bin' goes through a symbolic link")
    dir_case("ext_missing", ext_model([("location", "w.bin")]),
             msg="initializer 'w': external data location 'w.bin': No such file or directory")
    dir_case("ext_not_dir", ext_model([("location", "w.bin/x")]), files={"w.bin": W16},
             msg="initializer 'w': external data location 'w.bin/x': Not a directory")
    dir_case("ext_is_dir", ext_model([("location", "sub")]), dirs=["sub"],
             files={"sub/w.bin": W16},   # git keeps no empty directory
             msg="initializer 'w': external data location 'sub' is not a regular file")
    dir_case("ext_no_location", ext_model([("offset", "0")]),
             msg="initializer 'w': external data has no location")
    dir_case("ext_beyond", ext_model([("location", "w.bin"), ("offset", "8"), ("length", "16")]),
             files={"w.bin": W16},
             msg="initializer 'w': external data offset 8 + length 16 is beyond the end of 'w.bin' (16 bytes)")
    dir_case("ext_length", ext_model([("location", "w.bin"), ("length", "8")]),
             files={"w.bin": W16},
             msg="initializer 'w': external data length is 8 bytes, expected 16 for f32[2,2]")
    dir_case("ext_bad_offset", ext_model([("location", "w.bin"), ("offset", "-4")]),
             files={"w.bin": W16},
             msg="initializer 'w': external data offset '-4' is not a byte count")
    dir_case("ext_default", ext_model([("location", "w.bin")], location=TensorProto.DEFAULT),
             files={"w.bin": W16},
             msg="initializer 'w': external_data given but data_location is not EXTERNAL")
    m = ext_model([("location", "w.bin")])
    m.graph.initializer[0].raw_data = W16
    dir_case("ext_and_values", m, files={"w.bin": W16},
             msg="initializer 'w': external data and values in the model at once")


# ------------------------------------------------- issue 11: hostile input
def cases_hostile():
    """One or more cases per class of issue 11 (test/hostile.sh compiles the
    injection models; these are what must be refused, or must now work)."""
    f32 = TensorProto.FLOAT
    # a name make cannot spell, with -MD: refused before anything is written
    dir_case("make_unspellable", ext_model([("location", "w%.bin")]), files={"w%.bin": W16},
             args=["-MD"])
    expect("make_unspellable", "tapc: error: -MD: dependency 'make_unspellable/w%.bin' holds "
           "byte 0x25, which a make rule cannot spell; rename it or leave out -MD/-MF")

    # crashes in tapc, now compiled: a Constant whose value is in external
    # data is a weight; a node reading one graph input twice, on two ranks
    t = w_tensor("c", dims=(2, 2))
    for k, v in (("location", "c.bin"),):
        e = t.external_data.add()
        e.key, e.value = k, v
    t.data_location = TensorProto.EXTERNAL
    g = tiny_graph(nodes=[helper.make_node("Constant", [], ["c"], value=t, name="k"),
                          helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                   inputs=[helper.make_tensor_value_info("x", f32, [2, 2])],
                   outputs=[helper.make_tensor_value_info("y", f32, [2, 2])])
    dir_case("ok_constant_external", make_model(g), files={"c.bin": W16}, msg=None)
    g = tiny_graph(nodes=[helper.make_node("ConstantOfShape", ["s"], ["y"], value=t, name="cos")],
                   inputs=[], outputs=[helper.make_tensor_value_info("y", f32, [2, 2])],
                   inits=[helper.make_tensor("s", TensorProto.INT64, [2], [2, 2])])
    dir_case("attr_external", make_model(g), files={"c.bin": W16},
             msg="node 'cos' (ConstantOfShape): attribute 'value': external data is only "
                 "supported for a Constant's value")
    g = tiny_graph(nodes=[helper.make_node("Mul", ["x", "x"], ["y"], name="sq")],
                   inputs=[helper.make_tensor_value_info("x", f32, [2, 4])],
                   outputs=[helper.make_tensor_value_info("y", f32, [2, 4])])
    case("ok_same_input_twice", make_model(g), None, ["-mesh", "1x2"])

    # byte counts: fit in int64 elements, not in bytes or any buffer
    big = 1 << 61
    g = tiny_graph(nodes=[helper.make_node("Expand", ["x", "s"], ["y"], name="exp")],
                   inputs=[helper.make_tensor_value_info("x", f32, [1])],
                   outputs=[helper.make_tensor_value_info("y", f32, [big])],
                   inits=[helper.make_tensor("s", TensorProto.INT64, [1], [big])])
    case("expand_bytes", make_model(g),
         "node 'exp' (Expand): output 0 would be f32[%d], over tapc's limit of 2^48 bytes" % big)
    g = tiny_graph(nodes=[helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos",
                                           value=helper.make_tensor("v", f32, [1], [1.0]))],
                   inputs=[], outputs=[helper.make_tensor_value_info("y", f32, [1 << 30, 1 << 30])],
                   inits=[helper.make_tensor("s", TensorProto.INT64, [2], [1 << 30, 1 << 30])])
    case("constofshape_bytes", make_model(g),
         "node 'cos' (ConstantOfShape): output 0 would be f32[%d,%d], over tapc's limit of 2^48 bytes"
         % (1 << 30, 1 << 30))
    g = tiny_graph(inputs=[helper.make_tensor_value_info("x", f32, ["N", 1 << 20])],
                   outputs=[helper.make_tensor_value_info("y", f32, ["N", 1 << 20])])
    case("batch_bytes", make_model(g),
         "input 'x': byte size is over tapc's limit of 2^48 bytes", ["-batch=1099511627776"])
    case("degrees_overflow", ok_model(), None, ["-dp=65536", "-tp=65536"])
    expect("degrees_overflow",
           "tapc: error: -dp=65536 -tp=65536: 4294967296 ranks, over tapc's limit of 65536")

    # integer Div/Mod that would trap: refused, naming the node
    i64 = TensorProto.INT64
    g = tiny_graph(nodes=[helper.make_node("Div", ["x", "z"], ["y"], name="div")],
                   inputs=[helper.make_tensor_value_info("x", i64, [2])],
                   outputs=[helper.make_tensor_value_info("y", i64, [2])],
                   inits=[helper.make_tensor("z", i64, [2], [3, 0])])
    case("div_zero", make_model(g),
         "node 'div' (Div): integer division by zero: element 1 of input 1 is 0")
    g = tiny_graph(nodes=[helper.make_node("Mod", ["x", "z"], ["y"], name="mod")],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.INT32, [2])],
                   outputs=[helper.make_tensor_value_info("y", TensorProto.INT32, [2])],
                   inits=[helper.make_tensor("z", TensorProto.INT32, [1], [0])])
    case("mod_zero", make_model(g),
         "node 'mod' (Mod): integer modulo by zero: element 0 of input 1 is 0")
    g = tiny_graph(nodes=[helper.make_node("Div", ["a", "b"], ["y"], name="div")],
                   inputs=[], outputs=[helper.make_tensor_value_info("y", i64, [1])],
                   inits=[helper.make_tensor("a", i64, [1], [-(1 << 63)]),
                          helper.make_tensor("b", i64, [1], [-1])])
    case("div_min", make_model(g),
         "node 'div' (Div): integer division overflows: i64's minimum -9223372036854775808 "
         "by -1 (output element 0)")

    # attributes of the wrong type, or unknown: errors, not defaults
    def axis_concat(attr):
        n = helper.make_node("Concat", ["x", "x"], ["y"], name="cat")
        n.attribute.append(attr)
        return make_model(tiny_graph(nodes=[n],
                                     inputs=[helper.make_tensor_value_info("x", f32, [1, 4])],
                                     outputs=[helper.make_tensor_value_info("y", f32, [1, 8])]))
    case("attr_ints_for_int", axis_concat(helper.make_attribute("axis", [1, 2])),
         "node 'cat' (Concat): attribute 'axis' is INTS, expected INT")
    case("attr_float_for_int", axis_concat(helper.make_attribute("axis", 1.0)),
         "node 'cat' (Concat): attribute 'axis' is FLOAT, expected INT")
    n = helper.make_node("Relu", ["x"], ["y"], name="relu", alpha=0.5)
    case("attr_unknown", make_model(tiny_graph(nodes=[n])),
         "node 'relu' (Relu): attribute 'alpha' is not an attribute of Relu")
    n = helper.make_node("Squeeze", ["x"], ["y"], name="sq", axes=[0])
    case("attr_wrong_opset", make_model(tiny_graph(
        nodes=[n], outputs=[helper.make_tensor_value_info("y", f32, [4])])),
         "node 'sq' (Squeeze): attribute 'axes' is not an attribute of Squeeze at opset 13 (opsets 1 to 12)")
    case("attr_missing", make_model(tiny_graph(nodes=[helper.make_node("Cast", ["x"], ["y"], name="c")])),
         "node 'c' (Cast): required attribute 'to' is missing")
    # malformed numbers in external data
    for nm, off in (("ext_space_offset", " -8"), ("ext_plus_offset", "+8")):
        dir_case(nm, ext_model([("location", "w.bin"), ("offset", off)]), files={"w.bin": W16},
                 msg="initializer 'w': external data offset '%s' is not a byte count" % off)

    # hangs: a FIFO or a device where a file should be
    dir_case("fifo_model", None, fifos=["model.onnx"], msg="not a regular file")
    dir_case("fifo_ir", None, fifos=["model.ir"], msg="not a regular file")
    dir_case("fifo_weight", ext_model([("location", "w.bin")]), fifos=["w.bin"],
             msg="initializer 'w': external data location 'w.bin' is not a regular file")
    dir_case("fifo_cluster", ok_model(), fifos=["c.txt"], args=["-cluster=fifo_cluster/c.txt"])
    expect("fifo_cluster", "tapc: error: fifo_cluster/c.txt: not a regular file")
    dir_case("fifo_rsp", ok_model(), fifos=["args.rsp"], args=["@fifo_rsp/args.rsp"])
    expect("fifo_rsp", "tapc: error: fifo_rsp/args.rsp: not a regular file")
    case("rsp_dev_zero", ok_model(), None, ["@/dev/zero"])
    expect("rsp_dev_zero", "tapc: error: /dev/zero: not a regular file")
    case("rsp_missing", ok_model(), None, ["@rsp_missing.nonexistent"])
    expect("rsp_missing", "tapc: error: rsp_missing.nonexistent: cannot open: No such file or directory")

    # IR files are untrusted exactly like models
    relu = ('  %0 = input "x" f32[4]\n'
            '  %1 = Relu %0 : f32[4]   # relu\n'
            '  output %1 "y"\n')
    ir_case("ir_model_absolute", 'graph "g" model="/etc/passwd" opset=13\n' + relu,
            "model path '/etc/passwd' must be relative and inside the current directory "
            "(tapc -model=FILE names the model instead)")
    ir_case("ir_model_dotdot", 'graph "g" model="../../secret.onnx" opset=13\n' + relu,
            "model path '../../secret.onnx' must be relative and inside the current directory "
            "(tapc -model=FILE names the model instead)")
    ir_case("ir_weight_dotdot", 'graph "g" model="m.onnx" opset=13\n'
            '  %0 = input "x" f32[4]\n  %1 = weight "w" f32[4] @"../w.bin"+0x0\n'
            '  %2 = Add %0, %1 : f32[4]\n  output %2 "y"\n',
            "line 3: weight file must be a relative path inside the model's directory")
    dir_case("ir_symlink_dir", None, dirs=["real"], links={"sub": "real"},
             ir='graph "g" model="ir_symlink_dir/sub/m.onnx" opset=13\n' + relu,
             msg="model directory 'ir_symlink_dir/sub' goes through a symbolic link")
    ir_case("ir_lying_type", 'graph "g" model="m.onnx" opset=13\n'
            '  %0 = input "x" f32[4]\n  %1 = Relu %0 : f32[9]   # relu\n  output %1 "y"\n',
            "node 'relu' (Relu): output 0 is declared f32[9], but its inputs give f32[4]")
    ir_case("ir_lying_dtype", 'graph "g" model="m.onnx" opset=13\n'
            '  %0 = input "x" f32[4]\n  %1 = Relu %0 : f64[4]   # relu\n  output %1 "y"\n',
            "node 'relu' (Relu): output 0 is declared f64[4], but its inputs give f32[4]")
    ir_case("ir_degrees", 'graph "g" model="m.onnx" opset=13 mesh=1x1 dp=2147483647 tp=1 pp=1\n'
            + relu,
            "mesh=1x1 dp=2147483647 tp=1 pp=1: the degrees must be positive and multiply to "
            "the mesh's devices (at most 65536)")
    ir_case("ir_degrees_product", 'graph "g" model="m.onnx" opset=13 mesh=1x4 dp=65536 tp=65536 pp=1\n'
            + relu,
            "mesh=1x4 dp=65536 tp=65536 pp=1: the degrees must be positive and multiply to "
            "the mesh's devices (at most 65536)")
    for nm, op in (("ir_opset_zero", 0), ("ir_opset_big", 1000)):
        ir_case(nm, 'graph "g" model="m.onnx" opset=%d\n' % op + relu,
                "opset %d is not supported (tapc reads opsets 1 to 18)" % op)
    ir_case("ir_string", 'graph "g" model="m.onnx" opset=13\n  %0 = input "x" str[4]\n'
            '  %1 = Identity %0 : str[4]\n  output %1 "y"\n',
            "input 'x': data type str is not supported")
    ir_case("ir_complex", 'graph "g" model="m.onnx" opset=13\n  %0 = input "x" c64[4]\n'
            '  %1 = Identity %0 : c64[4]\n  output %1 "y"\n',
            "input 'x': data type c64 is not supported")
    ir_case("ir_no_outputs", 'graph "g" model="m.onnx" opset=13\n  %0 = input "x" f32[4]\n'
            '  %1 = Relu %0 : f32[4]\n', "the graph has no outputs")
    ir_case("ir_runtime_reshape", 'graph "g" model="m.onnx" opset=13\n  %0 = input "x" f32[4]\n'
            '  %1 = input "s" i64[2]\n  %2 = Reshape %0, %1 : f32[2,2]   # r\n  output %2 "y"\n',
            "node 'r' (Reshape): input 1 's' is not a compile-time constant")
    # Det and the signal operators of opset 17 (ir/infer.c)
    ir_case("ir_det_not_square", 'graph "g" model="m.onnx" opset=13\n  %0 = input "x" f32[2,3]\n'
            '  %1 = Det %0 : f32[]   # det\n  output %1 "y"\n',
            "node 'det' (Det): input 0 is f32[2,3], expected square matrices")
    ir_case("ir_window_opset", 'graph "g" model="m.onnx" opset=13\n  %0 = input "n" i64[]\n'
            '  %1 = HannWindow %0 : f32[4]   # w\n  output %1 "y"\n',
            "node 'w' (HannWindow): HannWindow needs opset 17 or later, the model has 13")
    ir_case("ir_window_size_runtime", 'graph "g" model="m.onnx" opset=17\n  %0 = input "n" i64[]\n'
            '  %1 = HannWindow %0 : f32[4]   # w\n  output %1 "y"\n',
            "node 'w' (HannWindow): input 0 'n' is not a compile-time constant (the size "
            "decides the output shape)")
    ir_case("ir_dft_onesided_complex", 'graph "g" model="m.onnx" opset=17\n'
            '  %0 = input "x" f32[1,8,2]\n  %1 = DFT %0 {onesided=1} : f32[1,5,2]   # d\n'
            '  output %1 "y"\n',
            "node 'd' (DFT): onesided with a complex input: tapc computes the one-sided "
            "transform of real signals only")
    ir_case("ir_dft_axis", 'graph "g" model="m.onnx" opset=17\n'
            '  %0 = input "x" f32[1,8,1]\n  %1 = DFT %0 {axis=2} : f32[1,8,2]   # d\n'
            '  output %1 "y"\n',
            "node 'd' (DFT): axis 2 of f32[1,8,1]: expected a signal axis, 1 to 1")
    ir_case("ir_attr_type", 'graph "g" model="m.onnx" opset=13\n  %0 = input "x" f32[4]\n'
            '  %1 = Softmax %0 {axis=0.5} : f32[4]   # sm\n  output %1 "y"\n',
            "node 'sm' (Softmax): attribute 'axis' is FLOAT, expected INT")
    ir_case("ir_forward_ref", 'graph "g" model="m.onnx" opset=13\n  %0 = input "x" f32[4]\n'
            '  %1 = Relu %2 : f32[4]   # a\n  %2 = Neg %0 : f32[4]   # b\n  output %1 "y"\n',
            "node 'a' (Relu): input 0 is used before the node that defines it")
    # tapc's fused operators in an IR file: shapes and activations checked
    se = ('graph "g" model="m.onnx" opset=14\n  %0 = input "x" f32[1,8,3,3]\n'
          '  %1 = input "w1" f32[2,8,1,1]\n  %2 = input "w2" f32[8,2,1,1]\n'
          '  %3 = input "b1" f32[2]\n')
    ir_case("ir_fused_se_shape", se + '  %4 = FusedSqueezeExcite %0, %1, %1, %3 : f32[1,8,3,3]'
            '   # se\n  output %4 "y"\n',
            "node 'se' (FusedSqueezeExcite): input 2 is f32[2,8,1,1], expected f32[8,2,1...]")
    ir_case("ir_fused_se_bias", se + '  %4 = FusedSqueezeExcite %0, %1, %2, _, %3 : f32[1,8,3,3]'
            '   # se\n  output %4 "y"\n',
            "node 'se' (FusedSqueezeExcite): input 4 is f32[2], expected f32[8]")
    ir_case("ir_fused_act", se + '  %4 = FusedSqueezeExcite %0, %1, %2, %3 {gate="Tanh"} :'
            ' f32[1,8,3,3]   # se\n  output %4 "y"\n',
            "node 'se' (FusedSqueezeExcite): attribute 'gate' is 'Tanh', expected Relu, Clip,"
            " HardSigmoid, HardSwish, LeakyRelu or Gelu")
    dw = ('graph "g" model="m.onnx" opset=14\n  %0 = input "x" f32[1,4,6,6]\n'
          '  %1 = input "w1" f32[4,8]\n  %2 = input "w" f32[8,1,3,3]\n')
    ir_case("ir_fused_dw_w1", dw + '  %3 = FusedConvDw %0, %2, %2 {group=8} : f32[1,8,6,6]'
            '   # dw\n  output %3 "y"\n',
            "node 'dw' (FusedConvDw): input 1 is f32[8,1,3,3], expected f32[4,C]")
    ir_case("ir_fused_dw_group", dw + '  %3 = FusedConvDw %0, %1, %2 {group=4 pads=[1,1,1,1]} :'
            ' f32[1,8,6,6]   # dw\n  output %3 "y"\n',
            "node 'dw' (FusedConvDw): attribute 'group' is 4, expected 8 (depthwise)")
    ir_case("ir_fused_dw_act", dw + '  %3 = FusedConvDw %0, %1, %2 {expand_activation="Elu"} :'
            ' f32[1,8,4,4]   # dw\n  output %3 "y"\n',
            "node 'dw' (FusedConvDw): attribute 'expand_activation' is 'Elu', expected Relu,"
            " Clip, HardSigmoid, HardSwish, LeakyRelu or Gelu")


def ok_model():
    return make_model(tiny_graph())


def main():
    clean()
    cases_file()
    cases_dir()
    cases_hostile()
    for name in sorted(CASES):
        for suffix in ("", ".onnx"):
            p = os.path.join(HERE, name + suffix)
            if os.path.isfile(p) and os.path.getsize(p) > 16384:
                sys.exit("%s is larger than 16 KiB" % p)
    print("%d cases" % len(CASES))


if __name__ == "__main__":
    main()
