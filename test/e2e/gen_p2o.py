#!/usr/bin/python3
"""gen_p2o.py - test/e2e/p2o/: a model with symbolic non-batch dims, written
with python3-onnx the way Paddle's paddle2onnx and other exporters write
them, with onnxruntime's outputs as the reference.

    /usr/bin/python3 test/e2e/gen_p2o.py [--ort-dir /tmp/ort]

The input is x: [p2o.DynamicDimension.0, 3, 16, p2o.DynamicDimension.1]
(NCHW, batch and width symbolic) and the graph computes its shapes at run
time, as such exports do (Shape -> Gather -> Concat -> Reshape):

    Conv(3->8, 3x3, pad 1) -> Relu -> ReduceMean over H -> Reshape [N, 8, W]
    -> Transpose [N, W, 8] -> MatMul [8, 16] -> Add bias -> y [N, W, 16]

tapc needs the width: test/e2e.sh passes the words of p2o/args
(-dim p2o.DynamicDimension.1=24) to every compilation.  test_data_set_0 is
batch 1, test_data_set_1 batch 4, both at width 24; their outputs come from
onnxruntime-node (test/e2e/ort_run.js), so the script fails without it.
Seeded: a re-run writes the same bytes.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
WIDTH = 24


def model():
    rng = np.random.default_rng(2024)
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.3
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    inits = [numpy_helper.from_array(f(8, 3, 3, 3), "conv2d_0.w_0"),
             numpy_helper.from_array(f(8), "conv2d_0.b_0"),
             numpy_helper.from_array(f(8, 16), "linear_0.w_0"),
             numpy_helper.from_array(f(16), "linear_0.b_0"),
             i64("idx0", [0]), i64("idx3", [3]), i64("c8", [8])]
    nodes = [
        helper.make_node("Conv", ["x", "conv2d_0.w_0", "conv2d_0.b_0"], ["conv"],
                         name="p2o.Conv.0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="p2o.Relu.0"),
        helper.make_node("ReduceMean", ["relu"], ["pool"], name="p2o.ReduceMean.0", axes=[2],
                         keepdims=0),
        # the target [N, 8, W] from the input's own shape, at run time
        helper.make_node("Shape", ["x"], ["shape"], name="p2o.Shape.0"),
        helper.make_node("Gather", ["shape", "idx0"], ["n"], name="p2o.Gather.0", axis=0),
        helper.make_node("Gather", ["shape", "idx3"], ["w"], name="p2o.Gather.1", axis=0),
        helper.make_node("Concat", ["n", "c8", "w"], ["target"], name="p2o.Concat.0", axis=0),
        helper.make_node("Reshape", ["pool", "target"], ["feat"], name="p2o.Reshape.0"),
        helper.make_node("Transpose", ["feat"], ["seq"], name="p2o.Transpose.0", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["seq", "linear_0.w_0"], ["mm"], name="p2o.MatMul.0"),
        helper.make_node("Add", ["mm", "linear_0.b_0"], ["y"], name="p2o.Add.0"),
    ]
    g = helper.make_graph(
        nodes, "paddle-infer",
        [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, ["p2o.DynamicDimension.0", 3, 16, "p2o.DynamicDimension.1"])],
        [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["p2o.DynamicDimension.0", "p2o.DynamicDimension.1", 16])],
        initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=7,
                          producer_name="PaddlePaddle")
    onnx.checker.check_model(m)
    return m


def run_ort(ort_dir, model_path, x):
    with tempfile.TemporaryDirectory() as tmp:
        ind, outd = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        os.makedirs(ind)
        os.makedirs(outd)
        x.tofile(os.path.join(ind, "x.bin"))
        with open(os.path.join(ind, "inputs.json"), "w") as f:
            json.dump([{"name": "x", "dtype": "float32", "shape": list(x.shape), "file": "x.bin"}], f)
        env = dict(os.environ, ORT_DIR=ort_dir)
        subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model_path, ind, outd],
                       check=True, env=env)
        with open(os.path.join(outd, "outputs.json")) as f:
            meta = json.load(f)[0]
        return np.fromfile(os.path.join(outd, meta["file"]), np.float32).reshape(meta["shape"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ort-dir", default="/tmp/ort")
    args = ap.parse_args()
    d = os.path.join(HERE, "p2o")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(model(), path)
    with open(os.path.join(d, "args"), "w") as f:
        f.write("-dim p2o.DynamicDimension.1=%d\n" % WIDTH)
    rng = np.random.default_rng(7)
    for k, batch in enumerate((1, 4)):
        x = rng.standard_normal((batch, 3, 16, WIDTH)).astype(np.float32)
        y = run_ort(args.ort_dir, path, x)
        assert y.shape == (batch, WIDTH, 16), y.shape
        ds = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(ds)
        with open(os.path.join(ds, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, "x").SerializeToString())
        with open(os.path.join(ds, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, "y").SerializeToString())
    print("p2o: %d bytes, outputs from onnxruntime" % os.path.getsize(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
