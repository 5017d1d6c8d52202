#!/usr/bin/python3
"""gen_attrs.py - write ir/attrs.def, the attribute schema of every operator
in ir/ops.def, from the ONNX operator schemas of Debian's python3-onnx.

    /usr/bin/python3 ir/gen_attrs.py > ir/attrs.def

One line per (operator, attribute, type, opset range):

    ATTR(Concat, axis, INT, 4, 18, 1)

reads: at opsets 4 to 18, Concat's attribute `axis` has type INT and is
required (1) or optional (0).  ir/check.c checks every node of a model or
an IR file against it, as the ONNX checker does: an attribute the operator
does not have at the model's opset, or one of the wrong type, is an error,
never a default taken silently.  tapc's own collectives (never in a model)
are listed by hand below.  Re-run after adding an operator to ops.def.
"""
import re
import sys

import onnx
import onnx.defs

MAX_OPSET = 18
HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."

# tapc's own ops (ir/ops.def: the collectives tp-rewrite makes, the training
# ops): attributes and types
OWN = {
    "AllReduce": [("group", "STRING", 0), ("mean", "INT", 0), ("async", "INT", 0)],
    "AllGather": [("axis", "INT", 1), ("blocks", "INT", 0), ("parts", "INT", 1)],
    "ReduceScatter": [("axis", "INT", 1), ("blocks", "INT", 0), ("parts", "INT", 1)],
    "Shard": [("axis", "INT", 1), ("blocks", "INT", 0), ("parts", "INT", 1)],
    # the optimizers (torch.optim's SGD and AdamW; passes/optimizer.c)
    "SGD": [("lr", "FLOAT", 1), ("momentum", "FLOAT", 0), ("weight_decay", "FLOAT", 0)],
    "AdamW": [("beta1", "FLOAT", 0), ("beta2", "FLOAT", 0), ("eps", "FLOAT", 0),
              ("lr", "FLOAT", 1), ("weight_decay", "FLOAT", 0)],
    # the gradient ops (passes/autodiff.c, docs/training.md): windows are
    # explicit (no auto_pad), `shape` is the forward input's shape
    "SoftmaxGrad": [("axis", "INT", 1)],
    "LogSoftmaxGrad": [("axis", "INT", 1)],
    "LayerNormalizationGrad": [("axis", "INT", 1), ("epsilon", "FLOAT", 0)],
    "ConvGradWeight": [("dilations", "INTS", 0), ("group", "INT", 0), ("kernel_shape", "INTS", 1),
                       ("pads", "INTS", 0), ("strides", "INTS", 0)],
    "MaxPoolGrad": [("ceil_mode", "INT", 0), ("dilations", "INTS", 0), ("kernel_shape", "INTS", 1),
                    ("pads", "INTS", 0), ("strides", "INTS", 0)],
    "AveragePoolGrad": [("ceil_mode", "INT", 0), ("count_include_pad", "INT", 0),
                        ("dilations", "INTS", 0), ("kernel_shape", "INTS", 1), ("pads", "INTS", 0),
                        ("shape", "INTS", 1), ("strides", "INTS", 0)],
    "GatherGrad": [("axis", "INT", 1), ("shape", "INTS", 1)],
    "GatherElementsGrad": [("axis", "INT", 1), ("shape", "INTS", 1)],
    "SliceGrad": [("shape", "INTS", 1), ("starts", "INTS", 1), ("steps", "INTS", 1)],
    "GradAccumulate": [],
    "GeluGrad": [],
    # the fused kernels (the fusion passes make them; docs/ops.md)
    "FusedConv": [("activation", "STRING", 0), ("activation_params", "FLOATS", 0),
                  ("auto_pad", "STRING", 0), ("dilations", "INTS", 0), ("group", "INT", 0),
                  ("kernel_shape", "INTS", 0), ("pads", "INTS", 0), ("strides", "INTS", 0)],
    "FusedMatMul": [("activation", "STRING", 0), ("activation_params", "FLOATS", 0),
                    ("partial", "INT", 0)],
    "FusedMatMulInteger": [("activation", "STRING", 0), ("activation_params", "FLOATS", 0)],
    "FusedLayerNorm": [("axis", "INT", 0), ("epsilon", "FLOAT", 0)],
    "FusedGelu": [],
    "FusedSoftmax": [("axis", "INT", 0), ("divide", "INT", 0), ("fill", "FLOAT", 0),
                     ("scale", "FLOAT", 0)],
    "FusedSqueezeExcite": [("activation", "STRING", 0), ("activation_params", "FLOATS", 0),
                           ("gate", "STRING", 0), ("gate_params", "FLOATS", 0)],
    "FusedConvDw": [("activation", "STRING", 0), ("activation_params", "FLOATS", 0),
                    ("auto_pad", "STRING", 0), ("dilations", "INTS", 0),
                    ("expand_activation", "STRING", 0),
                    ("expand_activation_params", "FLOATS", 0), ("group", "INT", 0),
                    ("kernel_shape", "INTS", 0), ("pads", "INTS", 0), ("strides", "INTS", 0)],
}

# python3-onnx 1.12 knows opsets up to 17; tapc reads 18.  The operators
# tapc supports that changed in opset 18, with their attributes there (from
# the ONNX 1.13 operator changelog): (name, type, required).
OPSET18 = {
    "Pad": [("mode", "STRING", 0)],
    "ReduceMax": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "ReduceMean": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "ReduceMin": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "ReduceProd": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "ReduceSumSquare": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "ReduceL1": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "ReduceL2": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "ReduceLogSum": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "ReduceLogSumExp": [("keepdims", "INT", 0), ("noop_with_empty_axes", "INT", 0)],
    "Resize": [("antialias", "INT", 0), ("axes", "INTS", 0),
               ("coordinate_transformation_mode", "STRING", 0), ("cubic_coeff_a", "FLOAT", 0),
               ("exclude_outside", "INT", 0), ("extrapolation_value", "FLOAT", 0),
               ("keep_aspect_ratio_policy", "STRING", 0), ("mode", "STRING", 0),
               ("nearest_mode", "STRING", 0)],
    "ScatterElements": [("axis", "INT", 0), ("reduction", "STRING", 0)],
    "ScatterND": [("reduction", "STRING", 0)],
    "Split": [("axis", "INT", 0), ("num_outputs", "INT", 0)],
}

TYPES = {
    onnx.defs.OpSchema.AttrType.FLOAT: "FLOAT",
    onnx.defs.OpSchema.AttrType.INT: "INT",
    onnx.defs.OpSchema.AttrType.STRING: "STRING",
    onnx.defs.OpSchema.AttrType.TENSOR: "TENSOR",
    onnx.defs.OpSchema.AttrType.GRAPH: "GRAPH",
    onnx.defs.OpSchema.AttrType.FLOATS: "FLOATS",
    onnx.defs.OpSchema.AttrType.INTS: "INTS",
    onnx.defs.OpSchema.AttrType.STRINGS: "STRINGS",
    onnx.defs.OpSchema.AttrType.GRAPHS: "GRAPHS",
    onnx.defs.OpSchema.AttrType.SPARSE_TENSOR: "SPARSE_TENSOR",
}


def main():
    text = open(HERE + "/ops.def").read()
    ops = re.findall(r"^OP\((\w+), (\w+)\)", text, re.M)
    names = [o for o, _ in ops]
    # every version of every op: since_version -> attributes
    versions = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain != "" or s.name not in names or s.since_version > MAX_OPSET:
            continue
        versions.setdefault(s.name, []).append(s)
    out = []
    for op in names:
        if op in OWN:
            for a, t, req in OWN[op]:
                out.append("ATTR(%s, %s, %s, 1, %d, %d)" % (op, a, t, MAX_OPSET, req))
            continue
        if op not in versions:
            sys.exit("gen_attrs.py: no ONNX schema for %s" % op)
        vs = sorted(versions[op], key=lambda s: s.since_version)
        # (attr, type, required) -> list of [lo, hi] ranges, merged when adjacent
        ranges = {}
        def add(key, lo, hi):
            r = ranges.setdefault(key, [])
            if r and r[-1][1] == lo - 1:
                r[-1][1] = hi
            else:
                r.append([lo, hi])
        last = MAX_OPSET - 1 if op in OPSET18 else MAX_OPSET
        for i, s in enumerate(vs):
            lo = s.since_version
            hi = vs[i + 1].since_version - 1 if i + 1 < len(vs) else last
            for a, at in sorted(s.attributes.items()):
                if at.type not in TYPES:
                    sys.exit("gen_attrs.py: %s.%s has attribute type %s" % (op, a, at.type))
                add((a, TYPES[at.type], int(at.required)), lo, hi)
        for a, t, req in OPSET18.get(op, []):
            add((a, t, req), MAX_OPSET, MAX_OPSET)
        # If's branches are lowered into nodes of the graph by the loader
        # (ir.h, Node.region): the If node keeps no graph attributes
        if op == "If":
            ranges = {k: v for k, v in ranges.items() if k[1] != "GRAPH"}
        for (a, t, req), rs in sorted(ranges.items()):
            for lo, hi in rs:
                out.append("ATTR(%s, %s, %s, %d, %d, %d)" % (op, a, t, lo, hi, req))
    print("/*")
    print(" * attrs.def - the attributes of every operator in ops.def, by opset:")
    print(" * ATTR(op, name, type, first opset, last opset, required).")
    print(" *")
    print(" * Generated by ir/gen_attrs.py from the ONNX %s operator schemas" % onnx.__version__)
    print(" * (tapc's collectives by hand there); do not edit, re-run it.  Read by")
    print(" * ir/check.c.")
    print(" */")
    for line in out:
        print(line)


if __name__ == "__main__":
    main()
