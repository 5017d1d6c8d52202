#!/usr/bin/python3
"""Write deep GPT-style ONNX models for scaling benchmarks.

    /usr/bin/python3 bench/gen_deep.py OUTDIR L [L ...]     e.g. OUTDIR 12 24 48 96

For every L it writes OUTDIR/gpt_L/model.onnx (no test data): the `gpt`
fixture's architecture (test/e2e/gen_fixtures.py's GPT class: pre-LN blocks,
fused c_attn Linear + Split, causal mask via tril/Trilu + masked_fill(-inf),
GELU MLP 4x, final LN, LM head tied to wte), exported the same way (opset 14,
do_constant_folding, dim 0 of input and output symbolic 'batch', other output
dims pinned), with L blocks at a small width: vocab 64, seq 8, hidden 32,
2 heads.  Input `idx` int64 [batch,8], output `logits` f32 [batch,8,64].
Seeded (seed 4321 + L), so a re-run reproduces the files.

torch 1.13's exporter is quadratic in the graph size (a direct export of 96
blocks takes 1 to 2 min here), so for L > 3 the graph is written from 2- and
3-block template exports (see "stitching" below); the result is byte-identical
to a direct export, which --verify checks (it also runs the slow direct
export).  --direct skips the stitching.

Options: --vocab --seq --hidden --heads change the width (defaults above).
Run with Debian's python (torch 1.13, onnx 1.12), like gen_fixtures.py.
"""
import argparse
import os
import re
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'test', 'e2e'))

import numpy as np                              # noqa: E402
import onnx                                     # noqa: E402
from onnx import numpy_helper                   # noqa: E402
import torch                                    # noqa: E402
import gen_fixtures as gf                       # noqa: E402


def build(L, vocab=64, seq=8, hidden=32, heads=2):
    torch.manual_seed(4321 + L)
    model = gf.GPT(vocab=vocab, seq=seq, hidden=hidden, heads=heads, layers=L)
    gf.perturb_norms(model, torch.Generator().manual_seed(4321 + L + 1))
    model.eval()
    idx = torch.randint(0, vocab, (1, seq), generator=torch.Generator().manual_seed(4321 + L + 2))
    return model, {'idx': idx}


def export_direct(L, path, width):
    """torch.onnx.export of the L-block model (slow: torch 1.13's exporter is
    quadratic in the number of nodes, 1 to 2 min for L=96 on 2 cores)."""
    model, inputs = build(L, *width)
    gf.export_onnx(model, inputs, ['logits'], 14, path)


# ------------------------------------------------------------- stitching
#
# torch 1.13's exporter is quadratic in the graph size, so deep models are not
# exported directly: two real exports with 2 and 3 blocks (T2, T3) serve as
# templates and the L-block graph is written from them.  In the node and
# initializer lists every item belongs either to block K (node names
# '/h.K/...', unscoped Constant nodes by their consumer, initializers 'h.K.*'
# or by their consumer) or to the rest ('X').  The L-block list is T3's with
# the run of blocks 0,1,2 replaced by blocks 0..L-1 (block 0 from T3's block
# 0, blocks k >= 1 from T3's block 1).  Every digit run in every name is
# affine in (L, k) -- torch numbers values and unscoped nodes with global
# counters that grow by a fixed amount per block -- so it is extrapolated:
#     n = n_T3 + (L - 3) * (n_T3 - n_T2) + (k - r) * (n_T3[block r+1] - n_T3[block r])
# Initializer data comes from the real L-block torch model (same seeds as a
# direct export), transposed where T3's initializer is a folded transpose.
# `--verify` checks the result is byte-identical to a direct export.

BLOCK_RE = re.compile(r'^/?h\.(\d+)[./]')
DIGITS = re.compile(r'(\d+)')


def affine(a, a_next, a2, L, k, r):
    if k == r:              # no block shift (block 0, or outside the blocks)
        a_next = a
    pa, pn, p2 = DIGITS.split(a), DIGITS.split(a_next), DIGITS.split(a2)
    assert len(pa) == len(pn) == len(p2) and pa[0::2] == pn[0::2] == p2[0::2], (a, a_next, a2)
    out = []
    for i, (x, xn, x2) in enumerate(zip(pa, pn, p2)):
        if i % 2 == 0:
            out.append(x)
        else:
            x, xn, x2 = int(x), int(xn), int(x2)
            out.append(str(x + (L - 3) * (x - x2) + (k - r) * (xn - x)))
    return ''.join(out)


def label_items(items, name_of, consumer_label):
    """-> list of (label, index within label); label is a block number or 'X'."""
    res, count = [], {}
    for it in items:
        m = BLOCK_RE.match(name_of(it))
        lab = int(m.group(1)) if m else consumer_label(it)
        res.append((lab, count.setdefault(lab, 0)))
        count[lab] += 1
    return res


def graph_labels(g):
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, n)

    def by_consumer(name):
        c = consumers.get(name)
        m = BLOCK_RE.match(c.name) if c is not None else None
        return int(m.group(1)) if m else 'X'
    nodes = label_items(g.node, lambda n: n.name,
                        lambda n: by_consumer(n.output[0]) if n.name[:1] != '/' else 'X')
    inits = label_items(g.initializer, lambda t: t.name, lambda t: by_consumer(t.name))
    return nodes, inits


def expand(items, labels, L):
    """T3 item order with the run of blocks 0,1,2 expanded to 0..L-1:
    yields (label, index, k) -- k the target block (None for 'X')."""
    out, i = [], 0
    while i < len(items):
        lab, _ = labels[i]
        if lab == 'X':
            out.append(('X', labels[i][1], None))
            i += 1
            continue
        assert lab == 0, labels[i]
        groups = {}
        while i < len(items) and labels[i][0] != 'X':
            groups.setdefault(labels[i][0], []).append(labels[i][1])
            i += 1
        assert sorted(groups) == [0, 1, 2] and len(groups[1]) == len(groups[2])
        for k in range(L):
            for j in groups[min(k, 1)]:
                out.append((min(k, 1), j, k))
    return out


def stitch(L, path, width, tmpdir):
    t2p, t3p = os.path.join(tmpdir, 't2.onnx'), os.path.join(tmpdir, 't3.onnx')
    export_direct(2, t2p, width)
    export_direct(3, t3p, width)
    t2, t3 = onnx.load(t2p), onnx.load(t3p)
    sd2, sd3, sdL = ({k: v.numpy() for k, v in build(n, *width)[0].state_dict().items()}
                     for n in (2, 3, L))

    # index both templates by (label, index)
    tables = []
    for t in (t2, t3):
        nl, il = graph_labels(t.graph)
        tables.append((dict(zip(nl, t.graph.node)), dict(zip(il, t.graph.initializer)), nl, il))
    (n2, i2, _, _), (n3, i3, nl3, il3) = tables

    def pick(table2, table3, lab, j, k):
        """(T3 ref item, T3 next-block item, T2 item, r)"""
        if lab == 'X':
            return table3[('X', j)], table3[('X', j)], table2[('X', j)], 0
        return table3[(lab, j)], table3[(lab + 1, j)], table2[(lab, j)], lab

    # which parameter each T3 initializer holds (maybe transposed)
    def source(t, sd):
        a = numpy_helper.to_array(t)
        if t.name in sd:
            return t.name, False
        for name, v in sd.items():
            if v.ndim == 2 and v.T.shape == a.shape and np.array_equal(v.T, a):
                return name, True
        raise AssertionError('no parameter for initializer ' + t.name)

    src3 = {t.name: source(t, sd3) for t in t3.graph.initializer}
    src2 = {t.name: source(t, sd2) for t in t2.graph.initializer}

    g = t3.graph
    new_nodes = []
    for lab, j, k in expand(g.node, nl3, L):
        a, an, a2, r = pick(n2, n3, lab, j, k)
        kk = r if k is None else k
        assert a.op_type == an.op_type == a2.op_type and a.attribute == an.attribute == a2.attribute
        n = onnx.NodeProto()
        n.CopyFrom(a)
        n.name = affine(a.name, an.name, a2.name, L, kk, r)
        for field in ('input', 'output'):
            vals = [affine(x, y, z, L, kk, r) for x, y, z in
                    zip(getattr(a, field), getattr(an, field), getattr(a2, field))]
            del getattr(n, field)[:]
            getattr(n, field).extend(vals)
        new_nodes.append(n)
    new_inits = []
    for lab, j, k in expand(g.initializer, il3, L):
        a, an, a2, r = pick(i2, i3, lab, j, k)
        kk = r if k is None else k
        (p, tr), (pn, _), (p2, _) = src3[a.name], src3[an.name], src2[a2.name]
        v = sdL[affine(p, pn, p2, L, kk, r)]
        t = numpy_helper.from_array(np.ascontiguousarray(v.T if tr else v),
                                    affine(a.name, an.name, a2.name, L, kk, r))
        assert t.dims == a.dims and t.data_type == a.data_type
        new_inits.append(t)
    del g.node[:]
    g.node.extend(new_nodes)
    del g.initializer[:]
    g.initializer.extend(new_inits)
    onnx.checker.check_model(t3)
    onnx.shape_inference.infer_shapes(t3, check_type=True, strict_mode=True)
    onnx.save(t3, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('outdir')
    ap.add_argument('depths', nargs='+', type=int, help='numbers of blocks')
    ap.add_argument('--vocab', type=int, default=64)
    ap.add_argument('--seq', type=int, default=8)
    ap.add_argument('--hidden', type=int, default=32)
    ap.add_argument('--heads', type=int, default=2)
    ap.add_argument('--direct', action='store_true',
                    help='torch.onnx.export every depth directly (slow for deep models)')
    ap.add_argument('--verify', action='store_true',
                    help='also export directly and check the files are byte-identical')
    args = ap.parse_args()
    if any(L < 1 for L in args.depths):
        ap.error('depths must be >= 1')
    width = (args.vocab, args.seq, args.hidden, args.heads)

    torch.set_num_threads(1)
    warnings.filterwarnings('ignore', category=torch.jit.TracerWarning)
    t_all = time.time()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for L in args.depths:
            t0 = time.time()
            mdir = os.path.join(args.outdir, 'gpt_%d' % L)
            os.makedirs(mdir, exist_ok=True)
            path = os.path.join(mdir, 'model.onnx')
            if args.direct or L <= 3:
                export_direct(L, path, width)
            else:
                stitch(L, path, width, tmp)
            _, ops = gf.op_summary(path)
            msg = 'gpt_%d: %d nodes, %d bytes, %.2f s' % (
                L, sum(d['count'] for d in ops.values()), os.path.getsize(path), time.time() - t0)
            if args.verify:
                ref = os.path.join(tmp, 'direct.onnx')
                export_direct(L, ref, width)
                with open(ref, 'rb') as f1, open(path, 'rb') as f2:
                    same = f1.read() == f2.read()
                ok = ok and same
                msg += ', direct export %s' % ('byte-identical' if same else 'DIFFERS')
            print(msg, flush=True)
    print('total %.2f s' % (time.time() - t_all))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
