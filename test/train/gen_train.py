#!/usr/bin/python3
"""Generate the torch reference data for tapc's training programs (issue 15).

Run with Debian's system python (torch 1.13, onnx 1.12, numpy 1.24), from any
directory:

    /usr/bin/python3 test/train/gen_train.py [--ort-dir /tmp/ort] [--no-ort] [MODEL...]

For every model NAME it writes

    test/train/NAME/model.onnx        the untrained model (eval-mode export, dim 0
                                      of every input and output symbolic "batch")
    test/train/NAME/params.txt        initializer -> torch parameter map
    test/train/NAME/data/input_N.pb   one fixed batch of 4
    test/train/NAME/data/labels.pb
    test/train/NAME/OPT/args          tapc's training options for this run
    test/train/NAME/OPT/losses.txt    step K's loss (forward of step K, %.9g)
    test/train/NAME/OPT/output_N.pb   the trained model's outputs (eval, same batch)

for OPT in sgd and adamw: 10 steps of torch.optim.SGD / AdamW on the same
batch, starting each from the untrained weights.  The loss is cross_entropy
over the last axis of the first output (mean over all elements, int64 labels)
or mse (mean, f32 labels shaped like the first output); only the first output
feeds the loss.  Everything is float32 on one thread and seeded per model, so
a re-run writes the same bytes.

Checks, all fatal:
  - model.onnx's float initializers are the torch parameters one to one
    (each equal to one parameter or, for a folded Linear weight, its
    transpose), so training the initializers is training the parameters;
  - with onnxruntime-node (ORT_DIR, default /tmp/ort; test/e2e/ort_run.js):
    model.onnx on data/ against torch's untrained eval outputs, and each
    OPT/output_N.pb against onnxruntime running (a) the trained torch model
    re-exported to a temporary ONNX file and (b) model.onnx with its
    initializers replaced by the trained parameters (what `--save` writes);
    max abs error <= 1e-4; report in test/train/ort_crosscheck.txt;
  - the same training in float64 (precision.txt): how far float32 rounding
    alone moves the losses and the trained outputs, the floor under any
    tolerance a test of tapc's training can use.
The two reports are rewritten only when all models were generated.
"""
import argparse
import copy
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True      # no __pycache__ left in test/e2e
sys.path.insert(0, os.path.join(HERE, '..', 'e2e'))
import gen_fixtures as gf  # noqa: E402  (the e2e models, export and ORT helpers)

ABS_TOL = 1e-4
BATCH = 4
STEPS = 10


# ---------------------------------------------------------------- new models

class GPTUntied(gf.GPT):
    """The e2e gpt with its own LM head: tied, torch's constant folding would
    export wte.weight twice (the table, and its transpose for the MatMul), two
    initializers that training would move apart."""
    def __init__(self, vocab=128, seq=16, hidden=64, heads=4, layers=2):
        super().__init__(vocab, seq, hidden, heads, layers)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)


class ViTAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.scale = (hidden // heads) ** -0.5   # a Python float: one Mul by a constant
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.proj = nn.Linear(hidden, hidden)

    def split_heads(self, x):
        B, T, C = x.size()
        return x.view(B, T, self.heads, C // self.heads).transpose(1, 2)

    def forward(self, x):
        B, T, C = x.size()
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        att = F.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1)
        return self.proj(torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, C))


class ViTBlock(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = ViTAttention(hidden, heads)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, inter), nn.GELU(), nn.Linear(inter, hidden))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class ViT(nn.Module):
    """A small vision transformer: 4x4 patches of a 3x16x16 image embedded by a
    strided Conv, a learned cls token in front, learned position embeddings,
    pre-LN blocks with a GELU MLP, a final LayerNorm, a Linear head on the cls
    token."""
    def __init__(self, image=16, patch=4, channels=3, hidden=32, heads=4, inter=64,
                 layers=2, classes=10):
        super().__init__()
        self.hidden = hidden
        self.patch_embed = nn.Conv2d(channels, hidden, patch, stride=patch)
        tokens = (image // patch) ** 2 + 1
        self.cls_token = nn.Parameter(0.5 * torch.randn(1, 1, hidden))
        self.pos_embed = nn.Parameter(0.2 * torch.randn(1, tokens, hidden))
        self.blocks = nn.ModuleList([ViTBlock(hidden, heads, inter) for _ in range(layers)])
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)            # [B, 16, D]
        cls = self.cls_token.expand(x.size(0), 1, self.hidden)         # Expand
        x = torch.cat([cls, x], dim=1) + self.pos_embed                # [B, 17, D]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


class CNNNoBN(nn.Module):
    """gen_fixtures.CNN without BatchNormalization or average pooling: Conv,
    Relu, MaxPool, Flatten and a Linear head on the flattened 16x4x4 map."""
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),      # 16 -> 8
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 8 -> 4
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x):
        return self.fc(self.flatten(self.features(x)))


def vit_inputs(batch, gen):
    return {'x': torch.randn(batch, 3, 16, 16, generator=gen)}


# ---------------------------------------------------------------- the runs

# name: (seed, constructor, input fn, output names, opset, loss,
#        SGD (lr, momentum, weight_decay), AdamW lr)
# AdamW's other settings are torch's defaults (ADAMW below).  bert, t5 and
# mlp use their e2e seeds, so their model.onnx is test/e2e's byte for byte.
# The learning rates bring the loss down smoothly over the 10 steps (no
# step goes up); SGD's momentum and weight decay vary so that each of tapc's
# paths (momentum 0, weight decay 0) is exercised somewhere.
MODELS = {
    'gpt_untied': (2301, GPTUntied, gf.gpt_inputs, ['logits'], 14, 'cross_entropy',
                   (0.03, 0.9, 1e-3), 1e-3),
    'bert': (1234, gf.Bert, gf.bert_inputs, ['last_hidden_state', 'pooler_output'], 13,
             'cross_entropy', (0.1, 0.9, 1e-3), 1e-3),
    't5': (1240, gf.T5, gf.t5_inputs, ['logits'], 14, 'cross_entropy', (0.05, 0.9, 0.0), 1e-3),
    'vit': (2304, ViT, vit_inputs, ['logits'], 13, 'cross_entropy', (0.01, 0.9, 1e-2), 1e-3),
    'mlp': (1238, gf.MLP, gf.mlp_inputs, ['y'], 13, 'mse', (0.1, 0.0, 0.0), 3e-3),
    'cnn': (2306, CNNNoBN, gf.cnn_inputs, ['y'], 13, 'cross_entropy', (0.02, 0.9, 5e-4), 3e-3),
}
ADAMW = dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def make_model(name, dtype=torch.float32):
    seed, ctor = MODELS[name][:2]
    torch.manual_seed(seed)
    model = ctor()
    gf.perturb_norms(model, torch.Generator().manual_seed(seed + 1))
    for p in model.parameters():
        p.requires_grad_(True)
    return model.to(dtype).eval()


def make_batch(name):
    """The inputs, an ordered dict name -> tensor."""
    seed, make_inputs = MODELS[name][0], MODELS[name][2]
    return make_inputs(BATCH, torch.Generator().manual_seed(seed + 2))


def make_labels(name, out0):
    seed, loss = MODELS[name][0], MODELS[name][5]
    gen = torch.Generator().manual_seed(seed + 3)
    if loss == 'cross_entropy':
        return torch.randint(0, out0.shape[-1], out0.shape[:-1], generator=gen)
    return torch.randn(out0.shape, generator=gen)


def loss_fn(kind, out0, labels):
    if kind == 'cross_entropy':
        return F.cross_entropy(out0.reshape(-1, out0.shape[-1]), labels.reshape(-1))
    return F.mse_loss(out0, labels)


def optimizer(name, opt, params):
    sgd, adamw_lr = MODELS[name][6], MODELS[name][7]
    if opt == 'sgd':
        lr, momentum, wd = sgd
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd)
    return torch.optim.AdamW(params, lr=adamw_lr, **ADAMW)


def args_line(name, opt):
    loss, sgd, adamw_lr = MODELS[name][5:8]
    if opt == 'sgd':
        return '-loss=%s -optimizer=sgd -lr=%g -momentum=%g -weight-decay=%g' % ((loss,) + sgd)
    return ('-loss=%s -optimizer=adamw -lr=%g -beta1=%g -beta2=%g -eps=%g -weight-decay=%g'
            % (loss, adamw_lr, ADAMW['betas'][0], ADAMW['betas'][1], ADAMW['eps'],
               ADAMW['weight_decay']))


def as_tuple(outs):
    return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)


def train(name, model, opt, inputs, labels, steps=STEPS):
    """STEPS steps on the one batch; model is trained in place.  Returns the
    losses (step K's forward, before its update) and the eval outputs after.
    A parameter the loss does not reach keeps .grad None, and torch's
    optimizers skip it: no update, no weight decay (bert's pooler)."""
    loss_kind = MODELS[name][5]
    in_names = list(inputs)
    args = [inputs[n] for n in in_names]
    o = optimizer(name, opt, model.parameters())
    model.train()
    losses = []
    for _ in range(steps):
        o.zero_grad()
        loss = loss_fn(loss_kind, as_tuple(model(*args))[0], labels)
        loss.backward()
        o.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        outs = as_tuple(model(*args))
    return losses, outs


# ---------------------------------------------------------------- params map

def param_map(model, model_path):
    """[(initializer, parameter, transposed)] for model.onnx, checked one to
    one: every float initializer is exactly one parameter or its transpose,
    every parameter is exactly one initializer."""
    m = onnx.load(model_path)
    params = [(n, p.detach().numpy()) for n, p in model.named_parameters()]
    pairs, seen = [], {}
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.dtype != np.float32:
            continue
        hits = [(n, False) for n, p in params if p.shape == a.shape and np.array_equal(p, a)]
        hits += [(n, True) for n, p in params
                 if p.ndim == 2 and p.T.shape == a.shape and np.array_equal(p.T, a)]
        if len(hits) != 1:
            raise SystemExit('%s: initializer %s matches %d parameters: %s'
                             % (model_path, init.name, len(hits), hits))
        pn, tr = hits[0]
        if pn in seen:
            raise SystemExit('%s: parameter %s is initializers %s and %s'
                             % (model_path, pn, seen[pn], init.name))
        seen[pn] = init.name
        pairs.append((init.name, pn, tr))
    missing = [n for n, _ in params if n not in seen]
    if missing:
        raise SystemExit('%s: parameters not in the graph: %s' % (model_path, missing))
    return pairs


def substitute(model_path, out_path, model, pairs):
    """model.onnx with each initializer replaced by its trained parameter."""
    m = onnx.load(model_path)
    params = dict(model.named_parameters())
    inits = {i.name: i for i in m.graph.initializer}
    for iname, pname, tr in pairs:
        a = params[pname].detach().numpy()
        inits[iname].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(a.T if tr else a),
                                                      iname))
    onnx.save(m, out_path)


# ---------------------------------------------------------------- generate

def write_outputs(d, out_names, outs):
    for j, (n, o) in enumerate(zip(out_names, outs)):
        assert o.dtype == torch.float32
        gf.write_pb(os.path.join(d, 'output_%d.pb' % j), o.numpy(), n)


def generate(name):
    """Writes NAME/; returns what the checks need."""
    seed, ctor, make_inputs, out_names, opset = MODELS[name][:5]
    model = make_model(name)
    inputs = make_batch(name)
    in_names = list(inputs)

    mdir = os.path.join(HERE, name)
    os.makedirs(mdir, exist_ok=True)
    for d in ['data', 'sgd', 'adamw']:
        if os.path.isdir(os.path.join(mdir, d)):
            shutil.rmtree(os.path.join(mdir, d))
        os.makedirs(os.path.join(mdir, d))
    model_path = os.path.join(mdir, 'model.onnx')
    gf.export_onnx(model, inputs, out_names, opset, model_path)
    pairs = param_map(model, model_path)
    with open(os.path.join(mdir, 'params.txt'), 'w') as f:
        f.write('# initializer parameter [transposed]: model.onnx initializer -> torch parameter\n')
        for iname, pname, tr in pairs:
            f.write('%s %s%s\n' % (iname, pname, ' transposed' if tr else ''))

    with torch.no_grad():
        untrained = as_tuple(model(*[inputs[n] for n in in_names]))
    labels = make_labels(name, untrained[0])
    ddir = os.path.join(mdir, 'data')
    for j, n in enumerate(in_names):
        gf.write_pb(os.path.join(ddir, 'input_%d.pb' % j), inputs[n].numpy(), n)
    gf.write_pb(os.path.join(ddir, 'labels.pb'), labels.numpy(), 'labels')

    runs = {}
    for opt in ['sgd', 'adamw']:
        trained = copy.deepcopy(model)
        losses, outs = train(name, trained, opt, inputs, labels)
        odir = os.path.join(mdir, opt)
        with open(os.path.join(odir, 'args'), 'w') as f:
            f.write(args_line(name, opt) + '\n')
        with open(os.path.join(odir, 'losses.txt'), 'w') as f:
            f.write(''.join('%.9g\n' % l for l in losses))
        write_outputs(odir, out_names, outs)
        runs[opt] = (trained, losses, outs)
    return dict(model=model, inputs=inputs, labels=labels, untrained=untrained, pairs=pairs,
                runs=runs)


# ---------------------------------------------------------------- checks

def compare(tag, refs, got, lines):
    """refs, got: [(name, ndarray)]; appends a line per output, returns the
    worst max abs error."""
    worst = 0.0
    assert len(refs) == len(got), (tag, len(refs), len(got))
    for (rn, r), (gn, g) in zip(refs, got):
        assert rn == gn and r.shape == g.shape, (tag, rn, gn, r.shape, g.shape)
        diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
        mabs = float(diff.max())
        mrel = float((diff / np.maximum(np.abs(r.astype(np.float64)), 1e-6)).max())
        worst = max(worst, mabs)
        lines.append('%-36s %-18s shape=%-10s max_abs=%.3e max_rel=%.3e%s' % (
            tag, rn, 'x'.join(map(str, r.shape)), mabs, mrel,
            '' if mabs <= ABS_TOL else '   <-- FAIL'))
    return worst


def ort_check(name, g, ort_dir, lines):
    mdir = os.path.join(HERE, name)
    out_names = MODELS[name][3]
    opset = MODELS[name][4]
    inputs = [(n, t.numpy()) for n, t in g['inputs'].items()]
    worst = compare('%s untrained' % name,
                    [(n, o.numpy()) for n, o in zip(out_names, g['untrained'])],
                    gf.run_ort(ort_dir, os.path.join(mdir, 'model.onnx'), inputs), lines)
    for opt, (trained, _, _) in g['runs'].items():
        refs = [gf.load_pb(os.path.join(mdir, opt, 'output_%d.pb' % j))
                for j in range(len(out_names))]
        with tempfile.TemporaryDirectory() as tmp:
            re_path = os.path.join(tmp, 'reexport.onnx')
            gf.export_onnx(trained, g['inputs'], out_names, opset, re_path)
            worst = max(worst, compare('%s %s re-exported' % (name, opt), refs,
                                       gf.run_ort(ort_dir, re_path, inputs), lines))
            sub_path = os.path.join(tmp, 'substituted.onnx')
            substitute(os.path.join(mdir, 'model.onnx'), sub_path, trained, g['pairs'])
            worst = max(worst, compare('%s %s model.onnx+trained' % (name, opt), refs,
                                       gf.run_ort(ort_dir, sub_path, inputs), lines))
    return worst


def precision_check(name, g, lines):
    """Train a float64 copy of the untrained model the same way."""
    inputs = {n: (t.double() if t.is_floating_point() else t) for n, t in g['inputs'].items()}
    labels = g['labels'].double() if g['labels'].is_floating_point() else g['labels']
    for opt, (_, losses, outs) in g['runs'].items():
        l64, o64 = train(name, copy.deepcopy(g['model']).double(), opt, inputs, labels)
        rel = [abs(a - b) / abs(b) for a, b in zip(losses, l64)]
        odiff = max(float((o.double() - p).abs().max()) for o, p in zip(outs, o64))
        oscale = max(float(p.abs().max()) for p in o64)
        lines.append('%-10s %-5s loss %.4f -> %.4f  f32/f64 loss rel diff: steps 1-3 %.1e, '
                     'all %.1e; trained outputs max abs diff %.1e (max |out| %.2f)' % (
                         name, opt, l64[0], l64[-1], max(rel[:3]), max(rel), odiff, oscale))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ort-dir', default='/tmp/ort',
                    help='directory holding node_modules/onnxruntime-node (default /tmp/ort)')
    ap.add_argument('--no-ort', action='store_true', help='skip the onnxruntime cross-check')
    ap.add_argument('models', nargs='*', help='subset of: ' + ' '.join(MODELS))
    args = ap.parse_args()
    names = args.models or list(MODELS)
    for n in names:
        if n not in MODELS:
            ap.error('unknown model ' + n)

    torch.set_num_threads(1)
    gens = {}
    for n in names:
        gens[n] = generate(n)
        print(gf.format_summary(n, os.path.join(HERE, n, 'model.onnx')))
    print()

    all_models = set(names) == set(MODELS)
    plines = ['torch %s: the same 10 steps in float64 against the float32 reference'
              % torch.__version__, '']
    for n in names:
        precision_check(n, gens[n], plines)
    print('\n'.join(plines))
    if all_models:
        with open(os.path.join(HERE, 'precision.txt'), 'w') as f:
            f.write('\n'.join(plines) + '\n')

    if args.no_ort:
        return 0
    if not gf.ort_available(args.ort_dir):
        print('onnxruntime-node not found under %s: skipping cross-check' % args.ort_dir,
              file=sys.stderr)
        return 0
    lines = ['onnxruntime-node cross-check (intraOpNumThreads=1) vs torch %s float32 reference'
             % torch.__version__,
             'untrained: model.onnx on data/ vs torch eval outputs of the untrained model',
             'OPT re-exported: the trained torch model exported again, vs OPT/output_N.pb',
             'OPT model.onnx+trained: model.onnx, initializers set to the trained parameters '
             '(params.txt), vs OPT/output_N.pb',
             'max_abs = max|ort - torch|, max_rel = max(|ort - torch| / max(|torch|, 1e-6))',
             'tolerance: max_abs <= %g' % ABS_TOL, '']
    worst = 0.0
    for n in names:
        worst = max(worst, ort_check(n, gens[n], args.ort_dir, lines))
    lines += ['', 'worst max_abs: %.3e -> %s' % (worst, 'OK' if worst <= ABS_TOL else 'FAIL')]
    report = '\n'.join(lines) + '\n'
    print(report, end='')
    if all_models:
        with open(os.path.join(HERE, 'ort_crosscheck.txt'), 'w') as f:
            f.write(report)
    if worst > ABS_TOL:
        print('FAIL: onnxruntime disagrees with torch beyond %g' % ABS_TOL, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
