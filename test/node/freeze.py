#!/usr/bin/python3
# freeze.py CASEDIR OUTDIR NAME... - make a "frozen" variant of a backend node test: the
# graph inputs NAME... become initializers holding their test_data_set_0 values, so that
# shape-determining inputs (Reshape's shape, Slice's starts, Pad's pads, ...) are known at
# compile time, as tapc's static shapes need.  Writes OUTDIR/model.onnx and
# OUTDIR/test_data_set_0/ with the remaining inputs renumbered and the outputs copied.
# Needs /usr/bin/python3 with python3-onnx.  Used by test/node/run.sh.
import os
import shutil
import sys

import onnx


def main():
    if len(sys.argv) < 4:
        sys.stderr.write("usage: freeze.py CASEDIR OUTDIR NAME...\n")
        return 2
    case, out, names = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    model = onnx.load(os.path.join(case, "model.onnx"))
    data = os.path.join(case, "test_data_set_0")
    inits = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in inits]
    if not names <= {i.name for i in graph_inputs}:
        sys.stderr.write("freeze.py: %s: not graph inputs: %s\n"
                         % (case, " ".join(sorted(names - {i.name for i in graph_inputs}))))
        return 1
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    kept = []
    for n, inp in enumerate(graph_inputs):
        path = os.path.join(data, "input_%d.pb" % n)
        if inp.name in names:
            t = onnx.load_tensor(path)
            t.name = inp.name
            model.graph.initializer.append(t)
            model.graph.input.remove(inp)
        else:
            shutil.copyfile(path, os.path.join(out, "test_data_set_0", "input_%d.pb" % len(kept)))
            kept.append(inp.name)
    for f in os.listdir(data):
        if f.startswith("output_"):
            shutil.copyfile(os.path.join(data, f), os.path.join(out, "test_data_set_0", f))
    onnx.save(model, os.path.join(out, "model.onnx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
