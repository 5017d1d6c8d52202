#!/usr/bin/python3
"""Write a GPT-2 ONNX graph whose weights are a sparse file, for the planner.

    /usr/bin/python3 bench/gen_gpt2.py OUTDIR [--layers 24 --hidden 1024
        --heads 16 --seq 1024 --vocab 50257 --batch 32]

The defaults are GPT-2 medium at AMP's experiment sizes (AMP §5: L=24,
H=1024, sequence 1024, batch 32).  OUTDIR/model.onnx holds the graph; every
float weight lives in OUTDIR/weights.bin as external data, a sparse file of
zeros (1.4 GB apparent, a few kB on disk): tapc plans from shapes alone and
never reads float weights, so the planner's benchmarks need no real ones.

The graph is GPT-2's (Radford et al. 2019) as torch.onnx.export writes it
at opset 14, with the node names of the e2e gpt fixture (/h.N/...), so
tapc's graph-nodes, fold-scopes and pipe-shard see the same structure:
token and position embeddings, L pre-LayerNorm blocks (a fused q,k,v
projection split in three, causal softmax attention with 1/sqrt(d) scaling,
an output projection, a 4x GELU MLP in its erf form, residual adds), a
final LayerNorm and the language-model head tied to the token embedding.
Input idx: int64 [batch, seq]; output logits: f32 [batch, seq, vocab].
Needs python3-onnx (Debian's, 1.12) and numpy.
"""
import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, outdir):
        self.nodes, self.inits = [], []
        self.offset = 0
        self.outdir = outdir
        self.n = 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def weight(self, name, dims):
        """A float weight in weights.bin (external data, zeros)."""
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(dims)
        length = 4 * int(np.prod(dims))
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "weights.bin"), ("offset", str(self.offset)),
                     ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.offset += (length + 63) // 64 * 64
        self.inits.append(t)
        return name

    def const(self, name, value, dtype=np.int64):
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op, inputs, scope, n_out=1, **attrs):
        outs = [self.name(f"{scope}/{op}_out") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=f"{scope}/{op}", **attrs))
        return outs[0] if n_out == 1 else outs


def layernorm(b, x, scope, hidden):
    w = b.weight(f"{scope}.weight", [hidden])
    bias = b.weight(f"{scope}.bias", [hidden])
    mean = b.op("ReduceMean", [x], f"/{scope}", axes=[-1], keepdims=1)
    d = b.op("Sub", [x, mean], f"/{scope}")
    sq = b.op("Mul", [d, d], f"/{scope}")
    var = b.op("ReduceMean", [sq], f"/{scope}/var", axes=[-1], keepdims=1)
    eps = b.const(f"{scope}.eps", np.float32(1e-5), np.float32)
    ve = b.op("Add", [var, eps], f"/{scope}/eps")
    sd = b.op("Sqrt", [ve], f"/{scope}")
    n = b.op("Div", [d, sd], f"/{scope}")
    y = b.op("Mul", [n, w], f"/{scope}/scale")
    return b.op("Add", [y, bias], f"/{scope}/shift")


def linear(b, x, scope, din, dout):
    w = b.weight(f"{scope.strip('/').replace('/', '.')}.weight", [din, dout])
    bias = b.weight(f"{scope.strip('/').replace('/', '.')}.bias", [dout])
    y = b.op("MatMul", [x, w], scope)
    return b.op("Add", [y, bias], scope)


def build(a):
    b = Builder(a.outdir)
    B, T, H, NH, V = a.batch, a.seq, a.hidden, a.heads, a.vocab
    hd = H // NH
    wte = b.weight("wte.weight", [V, H])
    wpe = b.weight("wpe.weight", [T, H])
    tok = b.op("Gather", [wte, "idx"], "/wte", axis=0)
    pos = b.const("pos", np.arange(T).reshape(1, T))
    pe = b.op("Gather", [wpe, pos], "/wpe", axis=0)
    x = b.op("Add", [tok, pe], "/add_pos")
    mask = b.const("causal", np.triu(np.full((T, T), -1e9, np.float32), 1), np.float32)
    scale = b.const("scale", np.float32(1 / math.sqrt(hd)), np.float32)
    half = b.const("half", np.float32(0.5), np.float32)
    one = b.const("one", np.float32(1.0), np.float32)
    rsqrt2 = b.const("rsqrt2", np.float32(1 / math.sqrt(2)), np.float32)
    heads_shape = b.const("heads_shape", [B, T, NH, hd])
    merge_shape = b.const("merge_shape", [B, T, H])
    split = b.const("qkv_split", [H, H, H])
    for i in range(a.layers):
        s = f"/h.{i}"
        h = layernorm(b, x, f"h.{i}.ln_1", H)
        qkv = linear(b, h, f"{s}/attn/c_attn", H, 3 * H)
        q, k, v = b.op("Split", [qkv, split], f"{s}/attn", n_out=3, axis=2)
        qs, ks, vs = (b.op("Reshape", [t, heads_shape], f"{s}/attn/{n}")
                      for t, n in ((q, "q"), (k, "k"), (v, "v")))
        qt = b.op("Transpose", [qs], f"{s}/attn/q", perm=[0, 2, 1, 3])
        kt = b.op("Transpose", [ks], f"{s}/attn/k", perm=[0, 2, 3, 1])
        vt = b.op("Transpose", [vs], f"{s}/attn/v", perm=[0, 2, 1, 3])
        att = b.op("MatMul", [qt, kt], f"{s}/attn/scores")
        att = b.op("Mul", [att, scale], f"{s}/attn/scale")
        att = b.op("Add", [att, mask], f"{s}/attn/mask")
        att = b.op("Softmax", [att], f"{s}/attn", axis=-1)
        y = b.op("MatMul", [att, vt], f"{s}/attn/values")
        y = b.op("Transpose", [y], f"{s}/attn/merge", perm=[0, 2, 1, 3])
        y = b.op("Reshape", [y, merge_shape], f"{s}/attn/merge")
        y = linear(b, y, f"{s}/attn/c_proj", H, H)
        x = b.op("Add", [x, y], f"{s}/res1")
        h = layernorm(b, x, f"h.{i}.ln_2", H)
        h = linear(b, h, f"{s}/mlp/mlp.0", H, 4 * H)
        e = b.op("Mul", [h, rsqrt2], f"{s}/mlp/gelu")
        e = b.op("Erf", [e], f"{s}/mlp/gelu")
        e = b.op("Add", [e, one], f"{s}/mlp/gelu")
        e = b.op("Mul", [h, e], f"{s}/mlp/gelu/x")
        h = b.op("Mul", [e, half], f"{s}/mlp/gelu/half")
        h = linear(b, h, f"{s}/mlp/mlp.2", 4 * H, H)
        x = b.op("Add", [x, h], f"{s}/res2")
    x = layernorm(b, x, "ln_f", H)
    wt = b.op("Transpose", [wte], "/lm_head", perm=[1, 0])
    logits = b.op("MatMul", [x, wt], "/lm_head")
    b.nodes[-1].output[0] = "logits"
    g = helper.make_graph(
        b.nodes, "gpt2",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [B, T])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, T, V])],
        b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)],
                          producer_name="tapc bench/gen_gpt2.py")
    os.makedirs(a.outdir, exist_ok=True)
    onnx.save(m, os.path.join(a.outdir, "model.onnx"))
    with open(os.path.join(a.outdir, "weights.bin"), "wb") as f:
        f.truncate(b.offset)            # sparse: zeros, no blocks on disk
    return b.offset


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, default=32)
    a = p.parse_args()
    n = build(a)
    print(f"{a.outdir}/model.onnx: GPT-2 L={a.layers} H={a.hidden} heads={a.heads} "
          f"T={a.seq} V={a.vocab} batch={a.batch}; weights.bin {n / 1e9:.2f} GB (sparse)")


if __name__ == "__main__":
    main()
