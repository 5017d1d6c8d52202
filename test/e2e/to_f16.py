#!/usr/bin/python3
# to_f16.py MODEL OUTDIR [DATASET...] - a float32 fixture as the float16 model a converter
# makes (onnxconverter-common's float16 conversion, keep_io_types off): every float32
# initializer, Constant value and ConstantOfShape value in float16 (but Resize's scales,
# float32 by the spec), Casts to float retargeted to float16, float32 graph inputs, outputs
# and value_info declared float16.  Writes OUTDIR/model.onnx and, for each DATASET directory
# (test_data_set_N), OUTDIR/<its name>/ with the float32 inputs rounded to float16 and the
# float32 references (torch's) rounded the same; test/e2e.sh checks tapc's half program
# against them at a float16 tolerance.  Needs Debian's /usr/bin/python3 with python3-onnx
# and numpy.
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def half(t):
    if t.data_type == TensorProto.FLOAT:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("usage: to_f16.py MODEL OUTDIR [DATASET...]\n")
        return 2
    m = onnx.load(sys.argv[1])
    g = m.graph
    # inputs the spec types float32 whatever the data (Resize's and Upsample's scales)
    keep = {n.input[i] for n in g.node for i in (1, 2) if len(n.input) > i and
            (n.op_type, i) in (("Resize", 2), ("Upsample", 1))}
    for t in g.initializer:
        if t.name not in keep:
            half(t)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and not (n.op_type == "Constant" and
                                                            n.output[0] in keep):
                half(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    os.makedirs(sys.argv[2], exist_ok=True)
    onnx.save(m, os.path.join(sys.argv[2], "model.onnx"))
    for ds in sys.argv[3:]:
        out = os.path.join(sys.argv[2], os.path.basename(ds.rstrip("/")))
        os.makedirs(out, exist_ok=True)
        for f in sorted(os.listdir(ds)):
            t = onnx.TensorProto()
            with open(os.path.join(ds, f), "rb") as fh:
                t.ParseFromString(fh.read())
            half(t)
            with open(os.path.join(out, f), "wb") as fh:
                fh.write(t.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
