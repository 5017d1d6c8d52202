#!/usr/bin/python3
"""Write the realistic-size benchmark models (not committed: made at bench time).

    /usr/bin/python3 bench/gen_models.py OUTDIR [NAME ...]

For every NAME (default: all) it writes OUTDIR/NAME/model.onnx and
OUTDIR/NAME/test_data_set_0/input_N.pb, output_N.pb (torch's outputs, eval
mode, float32), like the test/e2e fixtures:

    gpt2s    GPT-2-small width: d 768, 12 heads, T 128, 4 blocks, vocab 2048,
             batch 4 (test/e2e's GPT class: pre-LN, fused c_attn, causal mask,
             Erf-form GELU, tied LM head), opset 14
    bertb    BERT-base width: d 768, 12 heads, FFN 3072, T 128, 4 layers,
             vocab 2048, batch 4 (test/e2e's Bert class: post-LN, additive
             mask, pooler), opset 13
    resnet18 ResNet-18 (basic blocks 64-128-256-512, 1000 classes) at
             224x224, batch 1; BatchNormalization kept in the graph
             (TrainingMode.PRESERVE) as in the cnn/resnet fixtures, opset 13
    mnv3     a MobileNetV3-Small-style CNN at 224x224, batch 1: depthwise
             3x3/5x5 convolutions, squeeze-excite blocks (global pool, 1x1
             convs, HardSigmoid, Mul), HardSwish, BatchNormalization kept,
             opset 14
    segnet   a segmentation net at 224x224, batch 1: a strided Conv encoder
             (BN + ReLU), a ConvTranspose (stride 2) and a bilinear Resize
             back up, a skip Concat, a 1x1 head; opset 13
    qffn     two feed-forward blocks of BERT-base width (768 -> 3072 -> 768,
             ReLU) at T 128, batch 4, as onnxruntime's quantize_dynamic
             writes them: each Linear a DynamicQuantizeLinear of its input,
             MatMulInteger against the int8 weight (symmetric: zero point
             0), Cast, Mul by the two scales, Add of the bias; built with
             onnx's helper, its reference in numpy float32 step by step
             (torch does not export dynamic quantization); opset 13
    gpt2s16  gpt2s as the float16 model a converter makes
             (test/e2e/to_f16.py: weights, constants, inputs and outputs
             f16); its reference torch's float32 outputs of the model with
             its weights rounded to float16, rounded to f16 (compare at rtol
             and atol 2e-2, as test/e2e.sh does)

Dim 0 of every input and output is symbolic ('batch'), so tapc -batch=N
recompiles them.  Seeded: a re-run writes the same models.  Run with Debian's
python (torch 1.13, onnx 1.12), like test/e2e/gen_fixtures.py, whose classes
and export helper this reuses.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'test', 'e2e'))

import torch                                    # noqa: E402
import torch.nn as nn                           # noqa: E402
import gen_fixtures as gf                       # noqa: E402


class ResBlock(nn.Module):
    """torchvision's BasicBlock: two 3x3 convs, BN, ReLU, residual (1x1
    strided conv + BN where the shape changes)."""
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [ResBlock(cin, cout, stride), ResBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, ch, sq):
        super().__init__()
        self.fc1 = nn.Conv2d(ch, sq, 1)
        self.fc2 = nn.Conv2d(sq, ch, 1)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        s = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s


class InvertedResidual(nn.Module):
    """MobileNetV3's bneck: 1x1 expand, depthwise kxk, optional SE, 1x1
    project; HardSwish or ReLU; residual when the shape is kept."""
    def __init__(self, cin, k, exp, cout, se, hs, stride):
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False),
                   nn.BatchNorm2d(exp), act()]
        if se:
            layers.append(SqueezeExcite(exp, max(8, exp // 4)))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.res else y


class MobileNetV3S(nn.Module):
    # (kernel, expansion, out, SE, HardSwish, stride): MobileNetV3-Small
    CFG = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
           (3, 88, 24, False, False, 1), (5, 96, 40, True, True, 2),
           (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
           (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1),
           (5, 288, 96, True, True, 2), (5, 576, 96, True, True, 1),
           (5, 576, 96, True, True, 1)]

    def __init__(self, classes=1000):
        super().__init__()
        layers = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish()]
        cin = 16
        for k, exp, cout, se, hs, s in self.CFG:
            layers.append(InvertedResidual(cin, k, exp, cout, se, hs, s))
            cin = cout
        layers += [nn.Conv2d(cin, 576, 1, bias=False), nn.BatchNorm2d(576), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.head(torch.flatten(x, 1))


class SegNet(nn.Module):
    def __init__(self, classes=8):
        super().__init__()

        def cbr(i, o, s):
            return nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU())
        self.e1 = nn.Sequential(cbr(3, 32, 2), cbr(32, 32, 1))      # 1/2
        self.e2 = nn.Sequential(cbr(32, 64, 2), cbr(64, 64, 1))     # 1/4
        self.e3 = nn.Sequential(cbr(64, 128, 2), cbr(128, 128, 1))  # 1/8
        self.up1 = nn.ConvTranspose2d(128, 64, 2, 2)                # 1/4
        self.d1 = cbr(128, 64, 1)
        self.d2 = cbr(64, 32, 1)
        self.head = nn.Conv2d(32, classes, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(a)
        c = self.e3(b)
        u = torch.relu(self.up1(c))
        y = self.d1(torch.cat([u, b], 1))
        y = nn.functional.interpolate(y, scale_factor=2.0, mode='bilinear', align_corners=False)
        y = self.d2(y)
        y = self.head(y)
        return nn.functional.interpolate(y, scale_factor=2.0, mode='bilinear', align_corners=False)


VOCAB = 2048


def image(batch, gen):
    return {'x': torch.randn(batch, 3, 224, 224, generator=gen)}


# name: (seed, constructor, inputs, outputs, opset, training mode, batch)
MODELS = {
    'gpt2s': (2001, lambda: gf.GPT(vocab=VOCAB, seq=128, hidden=768, heads=12, layers=4),
              lambda b, g: gf.gpt_inputs(b, g, seq=128, vocab=VOCAB), ['logits'], 14, None, 4),
    'bertb': (2002, lambda: gf.Bert(vocab=VOCAB, seq=128, hidden=768, heads=12, inter=3072,
                                    layers=4),
              lambda b, g: gf.bert_inputs(b, g, seq=128, vocab=VOCAB),
              ['last_hidden_state', 'pooler_output'], 13, None, 4),
    'resnet18': (2003, ResNet18, image, ['y'], 13, torch.onnx.TrainingMode.PRESERVE, 1),
    'mnv3': (2004, MobileNetV3S, image, ['y'], 14, torch.onnx.TrainingMode.PRESERVE, 1),
    'segnet': (2005, SegNet, image, ['y'], 13, torch.onnx.TrainingMode.PRESERVE, 1),
}


def qffn(outdir, seed=2006, batch=4, seq=128, d=768, ff=3072):
    """The quantize_dynamic feed-forward model (qffn above) and its numpy reference."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    f32 = np.float32
    nodes, inits = [], []

    def dql(v):                                 # onnx's reference, in float32
        hi, lo = f32(max(0, v.max())), f32(min(0, v.min()))
        s = f32(1.0 if hi == lo else hi - lo) / f32(255)
        z = np.round(np.clip(f32(0) - lo / s, 0, 255)).astype(f32)
        return np.clip(np.round(v / s) + z, 0, 255).astype(np.uint8), s, z.astype(np.uint8)

    def linear(x, v, i, n_in, n_out):
        w = rng.standard_normal((n_in, n_out)).astype(f32) / f32(np.sqrt(n_in))
        ws = f32(np.abs(w).max() / 127)
        wq = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
        b = (rng.standard_normal(n_out) * 0.1).astype(f32)
        p = 'l%d_' % i
        inits.extend([numpy_helper.from_array(wq, p + 'wq'),
                      numpy_helper.from_array(np.array(0, np.int8), p + 'wz'),
                      numpy_helper.from_array(np.array(ws, f32), p + 'ws'),
                      numpy_helper.from_array(b, p + 'b')])
        nodes.extend([
            helper.make_node('DynamicQuantizeLinear', [x], [p + 'q', p + 's', p + 'z']),
            helper.make_node('MatMulInteger', [p + 'q', p + 'wq', p + 'z', p + 'wz'], [p + 'acc']),
            helper.make_node('Cast', [p + 'acc'], [p + 'accf'], to=TensorProto.FLOAT),
            helper.make_node('Mul', [p + 's', p + 'ws'], [p + 'sw']),
            helper.make_node('Mul', [p + 'accf', p + 'sw'], [p + 'mm']),
            helper.make_node('Add', [p + 'mm', p + 'b'], [p + 'y'])])
        q, s, z = dql(v)
        acc = (q.astype(np.int64) - z.astype(np.int64)) @ wq.astype(np.int64)
        return p + 'y', acc.astype(np.int32).astype(f32) * (s * ws) + b

    x = rng.standard_normal((batch, seq, d)).astype(f32)
    name, v = 'x', x
    for blk in range(2):
        h, hv = linear(name, v, 2 * blk, d, ff)
        nodes.append(helper.make_node('Relu', [h], ['r%d' % blk]))
        name, v = linear('r%d' % blk, np.maximum(hv, f32(0)), 2 * blk + 1, ff, d)
        nodes.append(helper.make_node('Add', [name, 'x' if blk == 0 else 'o0'], ['o%d' % blk]))
        name, v = 'o%d' % blk, v + (x if blk == 0 else prev)
        prev = v
    nodes.append(helper.make_node('Identity', [name], ['y']))
    g = helper.make_graph(nodes, 'qffn',
                          [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['batch', seq, d])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['batch', seq, d])],
                          initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)],
                              producer_name='tapc-bench-qffn')
    model.ir_version = 8
    onnx.checker.check_model(model)
    mdir = os.path.join(outdir, 'qffn')
    ddir = os.path.join(mdir, 'test_data_set_0')
    os.makedirs(ddir, exist_ok=True)
    onnx.save(model, os.path.join(mdir, 'model.onnx'))
    gf.write_pb(os.path.join(ddir, 'input_0.pb'), x, 'x')
    gf.write_pb(os.path.join(ddir, 'output_0.pb'), v, 'y')


def export(outdir, name, half=False):
    """Write OUTDIR/NAME; half: the model's parameters rounded to float16
    values first (its reference then computed from them)."""
    if name == 'qffn':
        return qffn(outdir)
    if name == 'gpt2s16':
        return export_half(outdir, 'gpt2s', name)
    seed, ctor, make_inputs, out_names, opset, training, batch = MODELS[name]
    torch.manual_seed(seed)
    model = ctor()
    gf.perturb_norms(model, torch.Generator().manual_seed(seed + 1))
    model.eval()
    if half:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.half().float())
    mdir = os.path.join(outdir, name)
    ddir = os.path.join(mdir, 'test_data_set_0')
    os.makedirs(ddir, exist_ok=True)
    inputs = make_inputs(batch, torch.Generator().manual_seed(seed + 2))
    in_names = list(inputs.keys())
    gf.export_onnx(model, inputs, out_names, opset, os.path.join(mdir, 'model.onnx'), training)
    with torch.no_grad():
        outs = model(*[inputs[n] for n in in_names])
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    for j, n in enumerate(in_names):
        gf.write_pb(os.path.join(ddir, 'input_%d.pb' % j), inputs[n].numpy(), n)
    for j, (n, o) in enumerate(zip(out_names, outs)):
        gf.write_pb(os.path.join(ddir, 'output_%d.pb' % j), o.numpy(), n)


def export_half(outdir, base, name):
    """OUTDIR/NAME: model BASE as the float16 model a converter makes
    (test/e2e/to_f16.py).  Its weights are rounded to float16 in torch
    first, so that the reference is the half model's own function computed
    in float32 (the converter's rounding of the weights alone moves
    GPT-2-width logits by up to 0.125 from the float32 model's)."""
    tmp = os.path.join(outdir, name + '.f32')
    export(tmp, base, half=True)
    subprocess.run([sys.executable, os.path.join(HERE, '..', 'test', 'e2e', 'to_f16.py'),
                    os.path.join(tmp, base, 'model.onnx'), os.path.join(outdir, name),
                    os.path.join(tmp, base, 'test_data_set_0')], check=True)
    shutil.rmtree(tmp)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    known = list(MODELS) + ['qffn', 'gpt2s16']
    names = sys.argv[2:] or known
    for n in names:
        if n not in known:
            sys.exit('gen_models.py: unknown model %s (known: %s)' % (n, ' '.join(known)))
        export(sys.argv[1], n)


if __name__ == '__main__':
    main()
