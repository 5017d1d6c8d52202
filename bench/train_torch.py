#!/usr/bin/python3
"""torch's side of bench/train.sh: time training steps, and export the model
and batch tapc trains on.

    /usr/bin/python3 bench/train_torch.py OUTDIR MODEL [--steps N] [--warmup W]

MODEL is one of test/train's models (gpt_untied, bert, ...) at its sizes, or
gpt_wide: the same GPT with an untied head at a realistic width (hidden 512,
8 heads, 4 blocks, sequence 128, vocabulary 1024, batch 8).  Writes
OUTDIR/model.onnx, OUTDIR/data/input_N.pb, OUTDIR/data/labels.pb and
OUTDIR/args (tapc's options: the batch, AdamW, lr 1e-4 and torch's defaults), and
prints one line `torch_ms_per_step X`: the median over --steps timed AdamW
steps (forward, loss, backward, optimizer step on one fixed batch) after
--warmup, with torch.set_num_threads(1).  Needs Debian's python3-torch.
"""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, '..', 'test', 'train'))
sys.path.insert(0, os.path.join(HERE, '..', 'test', 'e2e'))
import gen_fixtures as gf  # noqa: E402
import gen_train as gt  # noqa: E402


def build(name):
    if name == 'gpt_wide':
        torch.manual_seed(1234)
        model = gt.GPTUntied(vocab=1024, seq=128, hidden=512, heads=8, layers=4)
        gen = torch.Generator().manual_seed(1235)
        inputs = {'idx': torch.randint(0, 1024, (8, 128), generator=gen)}
        return model.eval(), inputs, 'cross_entropy'
    model = gt.make_model(name)
    return model, gt.make_batch(name), gt.MODELS[name][5]


def main():
    p = argparse.ArgumentParser()
    p.add_argument('outdir')
    p.add_argument('model')
    p.add_argument('--steps', type=int, default=20)
    p.add_argument('--warmup', type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    model, inputs, loss_kind = build(a.model)
    os.makedirs(os.path.join(a.outdir, 'data'), exist_ok=True)
    names = list(inputs)
    args = [inputs[n] for n in names]
    with torch.no_grad():
        out0 = gt.as_tuple(model(*args))[0]
    gen = torch.Generator().manual_seed(77)
    labels = (torch.randint(0, out0.shape[-1], out0.shape[:-1], generator=gen)
              if loss_kind == 'cross_entropy' else torch.randn(out0.shape, generator=gen))
    out_names = ['output_%d' % i for i in range(len(gt.as_tuple(out0)))]
    gf.export_onnx(model, inputs, out_names[:1] if len(out_names) == 1 else out_names, 14,
                   os.path.join(a.outdir, 'model.onnx'))
    for i, n in enumerate(names):
        gf.write_pb(os.path.join(a.outdir, 'data', 'input_%d.pb' % i), inputs[n].numpy(), n)
    gf.write_pb(os.path.join(a.outdir, 'data', 'labels.pb'), labels.numpy(), 'labels')
    with open(os.path.join(a.outdir, 'args'), 'w') as f:
        f.write('-batch=%d -loss=%s -optimizer=adamw -lr=0.0001 -beta1=0.9 -beta2=0.999 '
                '-eps=1e-08 -weight-decay=0.01\n' % (args[0].shape[0], loss_kind))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = gt.loss_fn(loss_kind, gt.as_tuple(model(*args))[0], labels)
        loss.backward()
        opt.step()
        t = time.perf_counter() - t0
        if i >= a.warmup:
            times.append(t)
    times.sort()
    print('torch_ms_per_step %.4f' % (times[len(times) // 2] * 1e3))


if __name__ == '__main__':
    main()
