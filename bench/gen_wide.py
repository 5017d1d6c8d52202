#!/usr/bin/python3
"""Write a wide MLP, heavy in weights, for the mpi backend's benchmarks.

    /usr/bin/python3 bench/gen_wide.py OUTDIR [--width 1024] [--hidden 4096]
        [--blocks 4] [--batch 32]

OUTDIR/model.onnx: input `x` f32[batch, width] (dim 0 symbolic, 'batch'),
then --blocks residual blocks x = x + (Relu(x W1 + b1) W2 + b2), W1
[width, hidden], W2 [hidden, width], and output `y` f32[batch, width].  The
defaults make 4 x 2 x 1024 x 4096 floats: 128 MiB of weights, enough that a
rank's share of them is most of its memory, and about 34 MFLOP per sample,
so that compute dominates a run.  OUTDIR/test_data_set_0 holds one batch of
--batch rows in the ONNX test-data layout, its output computed with numpy
in float32.  Seeded: a re-run writes the same bytes.  Needs only numpy and
onnx (python3-onnx), not torch.  Tensor parallelism splits W1 by columns and
W2 by rows (Megatron's MLP), so every weight but the last biases is sliced.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('outdir')
    ap.add_argument('--width', type=int, default=1024)
    ap.add_argument('--hidden', type=int, default=4096)
    ap.add_argument('--blocks', type=int, default=4)
    ap.add_argument('--batch', type=int, default=32)
    a = ap.parse_args()
    rng = np.random.default_rng(2024)
    nodes, inits = [], []
    x = 'x'
    for b in range(a.blocks):
        w1 = (rng.standard_normal((a.width, a.hidden)) / np.sqrt(a.width)).astype(np.float32)
        b1 = (rng.standard_normal(a.hidden) * 0.1).astype(np.float32)
        w2 = (rng.standard_normal((a.hidden, a.width)) / np.sqrt(a.hidden) * 0.5).astype(np.float32)
        b2 = (rng.standard_normal(a.width) * 0.1).astype(np.float32)
        p = f'/blocks.{b}'
        for name, arr in (('fc1.weight', w1), ('fc1.bias', b1), ('fc2.weight', w2), ('fc2.bias', b2)):
            inits.append(numpy_helper.from_array(arr, f'blocks.{b}.{name}'))
        nodes += [
            helper.make_node('MatMul', [x, f'blocks.{b}.fc1.weight'], [f'{p}/fc1/MatMul_out'], name=f'{p}/fc1/MatMul'),
            helper.make_node('Add', [f'{p}/fc1/MatMul_out', f'blocks.{b}.fc1.bias'], [f'{p}/fc1/Add_out'], name=f'{p}/fc1/Add'),
            helper.make_node('Relu', [f'{p}/fc1/Add_out'], [f'{p}/act/Relu_out'], name=f'{p}/act/Relu'),
            helper.make_node('MatMul', [f'{p}/act/Relu_out', f'blocks.{b}.fc2.weight'], [f'{p}/fc2/MatMul_out'], name=f'{p}/fc2/MatMul'),
            helper.make_node('Add', [f'{p}/fc2/MatMul_out', f'blocks.{b}.fc2.bias'], [f'{p}/fc2/Add_out'], name=f'{p}/fc2/Add'),
            helper.make_node('Add', [x, f'{p}/fc2/Add_out'], [f'{p}/Add_out' if b < a.blocks - 1 else 'y'], name=f'{p}/Add'),
        ]
        x = f'{p}/Add_out'
    graph = helper.make_graph(
        nodes, 'wide',
        [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['batch', a.width])],
        [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['batch', a.width])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 14)],
                              producer_name='tapc bench/gen_wide.py')
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(os.path.join(a.outdir, 'test_data_set_0'), exist_ok=True)
    onnx.save(model, os.path.join(a.outdir, 'model.onnx'))

    xs = rng.standard_normal((a.batch, a.width)).astype(np.float32)
    y = xs
    ws = {t.name: numpy_helper.to_array(t) for t in inits}
    for b in range(a.blocks):
        h = np.maximum(y @ ws[f'blocks.{b}.fc1.weight'] + ws[f'blocks.{b}.fc1.bias'], 0)
        y = y + (h @ ws[f'blocks.{b}.fc2.weight'] + ws[f'blocks.{b}.fc2.bias'])
    for name, arr, kind in (('x', xs, 'input'), ('y', y.astype(np.float32), 'output')):
        with open(os.path.join(a.outdir, 'test_data_set_0', f'{kind}_0.pb'), 'wb') as f:
            f.write(numpy_helper.from_array(arr, name).SerializeToString())
    mib = sum(t.dims[0] * (t.dims[1] if len(t.dims) > 1 else 1) for t in inits) * 4 / 2**20
    print(f'{a.outdir}/model.onnx: {a.blocks} blocks, width {a.width}, hidden {a.hidden}: '
          f'{mib:.1f} MiB of weights; test_data_set_0 at batch {a.batch}')


if __name__ == '__main__':
    main()
