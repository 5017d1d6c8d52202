#!/usr/bin/python3
"""Write small ONNX models that hold every pattern the fusion passes fuse,
for test/fuse.sh.

    /usr/bin/python3 test/fuse/gen_models.py OUTDIR

Each OUTDIR/NAME/ gets model.onnx and data/input_N.pb (seeded random
inputs); test/fuse.sh compiles each with and without the fusion passes
and compares the two programs' outputs.  Only python3-onnx and numpy
(what CI installs), no framework: the graphs are written node by node.

    convs    Conv+BN+Relu, Conv+BN+residual Add+Relu, depthwise 3x3/s1 and
             5x5/s2 (+BN+HardSwish), Conv+Clip (bounds as inputs),
             Conv+HardSigmoid, Conv+LeakyRelu, a 1x1 Conv, a BN not folded
             because a second node reads its Conv's output; opset 14
    bigconvs convolutions big enough for oneDNN (3x3/1 Winograd, 3x3/2,
             1x1) with BN, residual, Relu, HardSwish, Clip; opset 14
    se       squeeze-excite blocks: Relu and HardSigmoid FusedConvs with
             Mul(x, e) (x dies there: the memory plan runs it in place);
             plain 1x1 Convs (one without bias) with Mul(e, x), x read
             again after the block (not in place);
             one gated by a Sigmoid fuse-conv does not fuse (left alone);
             20 channels (row blocks of 8 and a tail, dot tails), 2 images;
             the first block on 55x61 planes (3355 pixels: split by bands
             of pixels on 2 and 3 threads, none of equal size), the others
             on 28x31; one block on a Reshape view whose source a second
             view reads after it (not in place)
    mbconv   1x1 + depthwise pairs for fuse-dw: 1x1+BN+HardSwish into a
             3x3/s1 depthwise+BN+Relu (40 channels: blocks of 16 and a
             tail of 8), a 1x1 without activation into 5x5/s2+HardSigmoid,
             1x1+HardSigmoid (not 0 at 0: the depthwise pads must stay 0)
             into 3x3/s2 without bias; left alone: a 1x1 whose output a
             residual Add reads too, a 1x1 of stride 2; 2 images on 57x43
             planes (bands of rows on 2 threads, parts of each block's rows
             on 3), then 29x22, 15x11, 8x6; a 1-D pair (6 -> 20, k5/s2 on
             37 columns)
    xformer  decomposed LayerNorm, MatMul+bias, MatMul+bias+erf GELU,
             MatMul+bias+residual, MatMul+Relu, attention scores scaled by
             Mul and masked by Where(-inf), scaled by Div with an additive
             mask, a plain scaled Softmax; opset 13
    qlinear  onnxruntime's quantize_dynamic Linears (DynamicQuantizeLinear
             -> MatMulInteger -> Cast -> Mul by the scales' product): an s8
             weight with per-column zero points + bias + Relu, one + a
             residual Add (the Mul's operands the other way round), a u8
             weight + bias (the float-GEMM path); left alone: one whose
             Cast a second node reads; opset 13
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(1717)


class G:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def w(self, arr, name=None):
        name = name or 'w%d' % len(self.inits)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op, ins, **attrs):
        self.n += 1
        out = '%s_%d' % (op.lower(), self.n)
        self.nodes.append(helper.make_node(op, ins, [out], name='/%s_%d' % (op, self.n), **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, group=1, bias=True, std=0.3):
        ins = [x, self.w(rng.normal(0, std, (cout, cin // group, k, k)).astype(np.float32))]
        if bias:
            ins.append(self.w(rng.normal(0, 0.1, cout).astype(np.float32)))
        return self.op('Conv', ins, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2,
                       group=group)

    def bn(self, x, c):
        f = np.float32
        return self.op('BatchNormalization', [
            x, self.w((1 + 0.2 * rng.normal(size=c)).astype(f)), self.w((0.1 * rng.normal(size=c)).astype(f)),
            self.w((0.2 * rng.normal(size=c)).astype(f)), self.w((0.5 + rng.random(c)).astype(f))],
            epsilon=1e-5)

    def save(self, path, inputs, outputs, opset):
        graph = helper.make_graph(self.nodes, 'fuse', inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid('', opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, path)


def convs(d):
    g = G()
    x = g.conv('x', 3, 8, 3)                                     # Conv+BN+Relu
    x = g.op('Relu', [g.bn(x, 8)])
    y = g.conv(x, 8, 8, 3, bias=False)                           # +BN+residual+Relu
    x = g.op('Relu', [g.op('Add', [g.bn(y, 8), x])])
    y = g.conv(x, 8, 8, 3, group=8, bias=False)                  # depthwise 3x3
    x = g.op('HardSwish', [g.bn(y, 8)])
    y = g.conv(x, 8, 16, 1)                                      # 1x1
    x = g.op('Clip', [y, g.w(np.float32(-1.0)), g.w(np.float32(2.0))])
    y = g.conv(x, 16, 16, 5, stride=2, group=16)                 # depthwise 5x5/2
    x = g.op('HardSigmoid', [y], alpha=0.25, beta=0.4)
    x = g.op('LeakyRelu', [g.conv(x, 16, 8, 3)], alpha=0.1)
    c = g.conv(x, 8, 8, 3)                                       # read twice: no fold
    x = g.op('Add', [g.op('Relu', [g.bn(c, 8)]), g.op('Sigmoid', [c])])
    g.save(os.path.join(d, 'model.onnx'),
           [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 3, 12, 12])],
           [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 8, 6, 6])], 14)
    return {'x': rng.normal(size=(2, 3, 12, 12)).astype(np.float32)}


def bigconvs(d):
    """Convolutions big enough for oneDNN (runtime/conv_dnnl.c): 3x3 stride
    1 (Winograd), stride 2, 1x1, with BN, residual and activations."""
    g = G()
    x = g.op('Relu', [g.bn(g.conv('x', 8, 32, 3), 32)])
    y = g.bn(g.conv(x, 32, 32, 3, bias=False), 32)
    x = g.op('Relu', [g.op('Add', [y, x])])
    x = g.op('HardSwish', [g.conv(x, 32, 48, 3, stride=2)])
    x = g.op('Clip', [g.conv(x, 48, 64, 1), g.w(np.float32(0.0)), g.w(np.float32(6.0))])
    g.save(os.path.join(d, 'model.onnx'),
           [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 8, 48, 48])],
           [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 64, 24, 24])], 14)
    return {'x': rng.normal(size=(2, 8, 48, 48)).astype(np.float32)}


def se(d):
    """Squeeze-and-excitation blocks (MobileNetV3's) for fuse-se."""
    g = G()
    f = np.float32

    def block(x, c, r, acts, bias1=True, swap=False, std=0.3):
        s = g.op('GlobalAveragePool', [x])
        h = g.conv(s, c, r, 1, bias=bias1, std=std)
        if acts[0]:
            h = g.op(acts[0], [h])
        e = g.conv(h, r, c, 1, std=std)
        if acts[1]:
            e = g.op(acts[1], [e])
        return g.op('Mul', [e, x] if swap else [x, e])

    # the kernel computes small FCs (R C <= 4096 weights) on every thread,
    # larger ones in shares: 72 x 64 at both plane sizes (weights scaled to
    # their fan-in, so that the 72 channels keep the values where 1e-4
    # tells a wrong sum from a reordered one)
    def wide(x):
        e = g.conv(x, 20, 72, 1, std=0.2)
        return g.conv(block(e, 72, 64, ('Relu', 'HardSigmoid'), std=0.12), 72, 20, 1, std=0.12)

    x = g.op('HardSwish', [g.conv('x', 8, 20, 3)])
    x = block(x, 20, 5, ('Relu', 'HardSigmoid'))
    x = wide(x)
    x = g.conv(x, 20, 20, 3, stride=2)
    x = g.op('Add', [block(x, 20, 12, (None, None), bias1=False, swap=True), x])  # x read after
    x = wide(x)
    x = block(x, 20, 5, ('Relu', 'Sigmoid'))                    # not fused
    # a block on a view (Reshape) of r, which a second view reads after it:
    # not in place, or the block's product overwrites r
    r = g.op('Relu', [g.op('Reshape', [x, g.w(np.array([2, 20, 868], np.int64))])])
    shape = g.w(np.array([2, 20, 28, 31], np.int64))
    x = g.op('Add', [block(g.op('Reshape', [r, shape]), 20, 5, ('Relu', 'HardSigmoid')),
                     g.op('Reshape', [r, shape])])
    g.save(os.path.join(d, 'model.onnx'),
           [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 8, 55, 61])],
           [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 20, 28, 31])], 14)
    return {'x': rng.normal(size=(2, 8, 55, 61)).astype(f)}


def mbconv(d):
    """Inverted residual blocks (MobileNet's expand and depthwise layers)
    for fuse-dw."""
    g = G()
    f = np.float32

    def pw(x, cin, cout, bias=True, stride=1):
        ins = [x, g.w(rng.normal(0, 0.3, (cout, cin, 1, 1)).astype(f))]
        if bias:
            ins.append(g.w(rng.normal(0, 0.1, cout).astype(f)))
        return g.op('Conv', ins, kernel_shape=[1, 1], pads=[0] * 4, strides=[stride] * 2)

    x = g.op('HardSwish', [g.bn(pw('x', 12, 40, bias=False), 40)])  # 1x1+BN+HardSwish
    x = g.op('Relu', [g.bn(g.conv(x, 40, 40, 3, group=40, bias=False), 40)])
    x = pw(x, 40, 24)                                             # 1x1, no activation
    x = g.op('HardSigmoid', [g.conv(x, 24, 24, 5, stride=2, group=24)], alpha=0.25, beta=0.4)
    x = g.op('HardSigmoid', [pw(x, 24, 36)], alpha=0.2, beta=0.5)  # nonzero at 0: the pads
    y = g.conv(x, 36, 36, 3, stride=2, group=36, bias=False)      # no bias, no activation
    t = g.op('Relu', [pw(y, 36, 20)])                             # read twice: not fused
    x = g.op('Add', [g.conv(t, 20, 20, 3, group=20), t])
    x = g.conv(pw(x, 20, 20, stride=2), 20, 20, 3, group=20)      # strided 1x1: not fused
    # 1-D: [N, C, W] planes of one row
    e = g.op('Relu', [g.op('Conv', ['s', g.w(rng.normal(0, 0.3, (20, 6, 1)).astype(f)),
                                    g.w(rng.normal(0, 0.1, 20).astype(f))], kernel_shape=[1])])
    s = g.op('Conv', [e, g.w(rng.normal(0, 0.3, (20, 1, 5)).astype(f))], kernel_shape=[5],
             pads=[2, 2], strides=[2], group=20)
    s = g.op('HardSwish', [s])
    g.save(os.path.join(d, 'model.onnx'),
           [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 12, 57, 43]),
            helper.make_tensor_value_info('s', TensorProto.FLOAT, [2, 6, 37])],
           [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 20, 8, 6]),
            helper.make_tensor_value_info(s, TensorProto.FLOAT, [2, 20, 19])], 14)
    return {'x': rng.normal(size=(2, 12, 57, 43)).astype(f),
            's': rng.normal(size=(2, 6, 37)).astype(f)}


def xformer(d):
    B, T, C, H = 2, 8, 16, 2
    g = G()
    f = np.float32

    def ln(x):
        mu = g.op('ReduceMean', [x], axes=[-1])
        dd = g.op('Sub', [x, mu])
        v = g.op('ReduceMean', [g.op('Pow', [dd, g.w(f(2.0))])], axes=[-1])
        s = g.op('Sqrt', [g.op('Add', [v, g.w(f(1e-5))])])
        n = g.op('Mul', [g.op('Div', [dd, s]), g.w((1 + 0.2 * rng.normal(size=C)).astype(f))])
        return g.op('Add', [n, g.w((0.1 * rng.normal(size=C)).astype(f))])

    def linear(x, cin, cout):
        y = g.op('MatMul', [x, g.w(rng.normal(0, 0.3, (cin, cout)).astype(f))])
        return g.op('Add', [g.w((0.1 * rng.normal(size=cout)).astype(f)), y])

    def heads(x):   # [B,T,C] -> [B,H,T,C/H]
        r = g.op('Reshape', [x, g.w(np.array([B, T, H, C // H], np.int64))])
        return g.op('Transpose', [r], perm=[0, 2, 1, 3])

    x = ln('x')
    q, k, v = heads(linear(x, C, C)), heads(linear(x, C, C)), heads(linear(x, C, C))
    kt = g.op('Transpose', [k], perm=[0, 1, 3, 2])
    s = g.op('Mul', [g.op('MatMul', [q, kt]), g.w(f(0.35))])
    causal = np.triu(np.ones((T, T), bool), 1)
    p = g.op('Softmax', [g.op('Where', [g.w(causal), g.w(f(-np.inf)), s])], axis=-1)
    s2 = g.op('Div', [g.op('MatMul', [q, kt]), g.w(f(2.5))])
    p2 = g.op('Softmax', [g.op('Add', [s2, 'mask'])], axis=-1)
    p3 = g.op('Softmax', [g.op('Mul', [g.w(f(0.5)), g.op('MatMul', [k, g.op('Transpose', [q], perm=[0, 1, 3, 2])])])], axis=-1)
    a = g.op('Add', [g.op('Add', [g.op('MatMul', [p, v]), g.op('MatMul', [p2, v])]), g.op('MatMul', [p3, v])])
    a = g.op('Reshape', [g.op('Transpose', [a], perm=[0, 2, 1, 3]), g.w(np.array([B, T, C], np.int64))])
    x = g.op('Add', [linear(a, C, C), 'x'])                      # residual
    h = linear(ln(x), C, 4 * C)                                  # erf GELU
    e = g.op('Add', [g.op('Erf', [g.op('Div', [h, g.w(f(1.41421354))])]), g.w(f(1.0))])
    h = g.op('Mul', [g.op('Mul', [h, e]), g.w(f(0.5))])
    x = g.op('Add', [x, linear(h, 4 * C, C)])
    h = linear(ln(x), C, 2 * C)                                  # a half model's GELU:
    e = g.op('Add', [g.op('Erf', [g.op('Div', [h, g.w(f(1.4140625))])]), g.w(f(1.0))])
    h = g.op('Mul', [g.op('Mul', [h, e]), g.w(f(0.5))])          # sqrt(2) rounded to f16
    x = g.op('Add', [x, linear(h, 2 * C, C)])
    y = g.op('Relu', [g.op('MatMul', [x, g.w(rng.normal(0, 0.3, (C, C)).astype(f))])])
    g.save(os.path.join(d, 'model.onnx'),
           [helper.make_tensor_value_info('x', TensorProto.FLOAT, [B, T, C]),
            helper.make_tensor_value_info('mask', TensorProto.FLOAT, [B, 1, 1, T])],
           [helper.make_tensor_value_info(y, TensorProto.FLOAT, [B, T, C])], 13)
    mask = np.zeros((B, 1, 1, T), f)
    mask[1, :, :, T - 3:] = -10000.0
    return {'x': rng.normal(size=(B, T, C)).astype(f), 'mask': mask}


def qlinear(d):
    B, T, C = 2, 6, 24
    g = G()
    f = np.float32

    def product(x, wq, zb, swap=False):
        q = '%s_q' % x
        g.nodes.append(helper.make_node('DynamicQuantizeLinear', [x], [q, q + 's', q + 'z']))
        acc = g.op('MatMulInteger', [q, g.w(wq), q + 'z', g.w(zb)])
        c = g.op('Cast', [acc], to=TensorProto.FLOAT)
        sw = g.op('Mul', [q + 's', g.w(f(rng.uniform(0.002, 0.01)))])
        return g.op('Mul', [sw, c] if swap else [c, sw]), c

    w1 = rng.integers(-127, 128, (C, 2 * C)).astype(np.int8)
    y, _ = product('x', w1, rng.integers(-3, 4, 2 * C).astype(np.int8))
    h = g.op('Relu', [g.op('Add', [y, g.w((0.1 * rng.normal(size=2 * C)).astype(f))])])
    w2 = rng.integers(-127, 128, (2 * C, C)).astype(np.int8)
    y, _ = product(h, w2, np.array(0, np.int8), swap=True)
    r = g.op('Add', ['x', y])                                   # residual
    w3 = rng.integers(0, 256, (C, C)).astype(np.uint8)
    y, _ = product(r, w3, np.array(128, np.uint8))
    u = g.op('Add', [g.w((0.1 * rng.normal(size=C)).astype(f)), y])
    w4 = rng.integers(-127, 128, (C, C)).astype(np.int8)
    y, c = product(u, w4, np.array(0, np.int8))
    out = g.op('Add', [y, g.op('Mul', [c, g.w(f(1e-4))])])    # the Cast read twice
    g.save(os.path.join(d, 'model.onnx'),
           [helper.make_tensor_value_info('x', TensorProto.FLOAT, [B, T, C])],
           [helper.make_tensor_value_info(out, TensorProto.FLOAT, [B, T, C])], 13)
    return {'x': rng.normal(size=(B, T, C)).astype(f)}


def main():
    out = sys.argv[1]
    for name, fn in [('convs', convs), ('bigconvs', bigconvs), ('se', se),
                     ('mbconv', mbconv), ('xformer', xformer), ('qlinear', qlinear)]:
        d = os.path.join(out, name)
        os.makedirs(os.path.join(d, 'data'), exist_ok=True)
        for i, (n, arr) in enumerate(fn(d).items()):
            with open(os.path.join(d, 'data', 'input_%d.pb' % i), 'wb') as fh:
                fh.write(numpy_helper.from_array(arr, n).SerializeToString())


if __name__ == '__main__':
    main()
