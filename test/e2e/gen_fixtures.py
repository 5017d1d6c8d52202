#!/usr/bin/python3
"""Generate tapc's end-to-end test fixtures (ONNX test-data layout).

Run with Debian's system python (torch 1.13, onnx 1.12, numpy 1.24), from any
directory:

    /usr/bin/python3 test/e2e/gen_fixtures.py [--ort-dir /tmp/ort] [--no-ort]

For every model NAME it writes

    test/e2e/NAME/model.onnx
    test/e2e/NAME/test_data_set_0/input_N.pb, output_N.pb   (batch 1)
    test/e2e/NAME/test_data_set_1/input_N.pb, output_N.pb   (batch 4)

Reference outputs come from the torch model itself (eval mode, float32).
Weights are seeded, so re-running reproduces the same files.

Opsets:
    gpt   opset 14   (tril -> Trilu needs >= 14)
    bert  opset 13
    mlp   opset 13
    cnn   opset 13   (exported with TrainingMode.PRESERVE on an eval-mode model
                      so BatchNormalization is kept, not folded into Conv)
    ln17  opset 17   (torch emits LayerNormalization)
    t5    opset 14   (encoder-decoder, RMSNorm, causal mask via tril -> Trilu)
    resmlp opset 13  (4 residual LayerNorm/Linear/ReLU/Linear blocks)
    tied  opset 13   (embedding table reused as the Gemm output projection)
    rnn   opset 14   (LSTM, GRU and RNN nodes: recurrent layers stay replicated)
    qdq   opset 13   (QuantizeLinear/DequantizeLinear pairs, per tensor and per channel)
All models but ln17 thus have LayerNorm decomposed into
ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add.  Dim 0 of every input and output is
symbolic ("batch"); all other dims are static.

Passing model names regenerates only those (seeds are fixed per model, so a
subset run writes the same bytes as a full run).  Files other than model.onnx
and test_data_set_*/ in a fixture directory (expected.ir) are left alone.

If onnxruntime-node is installed (see ort_run.js; --ort-dir names the directory
holding node_modules/, default /tmp/ort), every test data set is also run
through onnxruntime with one intra-op thread and compared with torch; the
report goes to stdout and to test/e2e/ort_crosscheck.txt, and the script fails
if any max abs error exceeds 1e-4.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ABS_TOL = 1e-4


# ---------------------------------------------------------------- models

def perturb_norms(model, gen):
    """Give LayerNorm / BatchNorm non-trivial parameters and running stats."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, nn.BatchNorm2d, nn.InstanceNorm2d)):
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
            if isinstance(m, RMSNorm):
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=gen))
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(0.2 * torch.randn(m.running_mean.shape, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=gen))


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads, seq):
        super().__init__()
        self.hidden, self.heads = hidden, heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)   # fused q,k,v (GPT-2 c_attn)
        self.c_proj = nn.Linear(hidden, hidden)
        self.seq = seq

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.hidden, dim=2)
        hs = C // self.heads
        q = q.view(B, T, self.heads, hs).transpose(1, 2)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        causal = torch.tril(torch.ones(T, T, device=x.device))
        att = att.masked_fill(causal == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPTBlock(nn.Module):
    def __init__(self, hidden, heads, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads, seq)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(),
                                 nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab=128, seq=16, hidden=64, heads=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.h = nn.ModuleList([GPTBlock(hidden, heads, seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight          # tied
        with torch.no_grad():
            self.wte.weight.normal_(0.0, 0.3)
            self.wpe.weight.normal_(0.0, 0.1)

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.ln_attn = nn.LayerNorm(hidden, eps=1e-12)
        self.inter = nn.Linear(hidden, inter)
        self.out = nn.Linear(inter, hidden)
        self.ln_out = nn.LayerNorm(hidden, eps=1e-12)

    def split_heads(self, x):
        B, T, C = x.size()
        return x.view(B, T, self.heads, C // self.heads).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        B, T, C = x.size()
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(C // self.heads)
        scores = scores + ext_mask
        probs = F.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        x = self.ln_attn(self.attn_out(ctx) + x)            # post-LN
        h = F.gelu(self.inter(x))
        return self.ln_out(self.out(h) + x)


class Bert(nn.Module):
    def __init__(self, vocab=96, seq=12, hidden=64, heads=4, inter=128, layers=2,
                 type_vocab=2):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(seq, hidden)
        self.token_type = nn.Embedding(type_vocab, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(hidden, heads, inter) for _ in range(layers)])
        self.pool = nn.Linear(hidden, hidden)
        self.seq = seq

    def forward(self, input_ids, attention_mask, token_type_ids):
        T = input_ids.size(1)
        pos = torch.arange(T, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.position(pos) + self.token_type(token_type_ids)
        x = self.ln(x)
        ext = attention_mask[:, None, None, :].to(torch.float32)
        ext = (1.0 - ext) * -10000.0
        for layer in self.layers:
            x = layer(x, ext)
        pooled = torch.tanh(self.pool(x[:, 0]))
        return x, pooled


class MLP(nn.Module):
    def __init__(self, features=32, hidden=64, out=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, out))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2),                                       # 16 -> 8
            nn.Conv2d(8, 16, 3, stride=1, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AvgPool2d(2),                                       # 8 -> 4
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))                               # GlobalAveragePool
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        return self.fc(self.flatten(self.features(x)))


class LN17(nn.Module):
    def __init__(self, hidden=32, inter=64):
        super().__init__()
        self.fc1 = nn.Linear(hidden, inter)
        self.ln = nn.LayerNorm(inter)
        self.fc2 = nn.Linear(inter, hidden)

    def forward(self, x):
        return self.fc2(F.gelu(self.ln(self.fc1(x))))


class RMSNorm(nn.Module):
    """T5LayerNorm: scale only, no mean subtraction, no bias."""
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


class T5Attention(nn.Module):
    """T5 attention: separate bias-free q/k/v/o, no 1/sqrt(d) scaling (T5 folds
    it into the init), additive mask.  kv=None: self-attention."""
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        with torch.no_grad():   # T5 init: q scaled down by sqrt(d_head)
            self.q.weight.mul_((hidden // heads) ** -0.5)

    def shape(self, x):
        B, T, C = x.size()
        return x.view(B, T, self.heads, C // self.heads).transpose(1, 2)

    def forward(self, x, kv=None, mask=None):
        B, T, C = x.size()
        kv = x if kv is None else kv
        q = self.shape(self.q(x))
        k = self.shape(self.k(kv))
        v = self.shape(self.v(kv))
        scores = torch.matmul(q, k.transpose(-1, -2))
        if mask is not None:
            scores = scores + mask
        probs = F.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).contiguous().view(B, T, C)
        return self.o(ctx)


class T5FFN(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.wi = nn.Linear(hidden, inter, bias=False)
        self.wo = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.wo(F.relu(self.wi(x)))


class T5EncoderBlock(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.ln_1 = RMSNorm(hidden)
        self.self_attn = T5Attention(hidden, heads)
        self.ln_2 = RMSNorm(hidden)
        self.ffn = T5FFN(hidden, inter)

    def forward(self, x):
        x = x + self.self_attn(self.ln_1(x))
        return x + self.ffn(self.ln_2(x))


class T5DecoderBlock(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.ln_1 = RMSNorm(hidden)
        self.self_attn = T5Attention(hidden, heads)
        self.ln_2 = RMSNorm(hidden)
        self.cross_attn = T5Attention(hidden, heads)
        self.ln_3 = RMSNorm(hidden)
        self.ffn = T5FFN(hidden, inter)

    def forward(self, x, enc, causal):
        x = x + self.self_attn(self.ln_1(x), mask=causal)
        x = x + self.cross_attn(self.ln_2(x), kv=enc)
        return x + self.ffn(self.ln_3(x))


class T5Stack(nn.Module):
    def __init__(self, embed_tokens, block, layers, hidden, heads, inter):
        super().__init__()
        self.embed_tokens = embed_tokens          # the shared embedding
        self.block = nn.ModuleList([block(hidden, heads, inter) for _ in range(layers)])
        self.final_norm = RMSNorm(hidden)


class T5Encoder(T5Stack):
    def __init__(self, embed_tokens, layers, hidden, heads, inter):
        super().__init__(embed_tokens, T5EncoderBlock, layers, hidden, heads, inter)

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        for blk in self.block:
            x = blk(x)
        return self.final_norm(x)


class T5Decoder(T5Stack):
    def __init__(self, embed_tokens, layers, hidden, heads, inter):
        super().__init__(embed_tokens, T5DecoderBlock, layers, hidden, heads, inter)

    def forward(self, decoder_input_ids, enc):
        T = decoder_input_ids.size(1)
        causal = torch.tril(torch.ones(T, T, device=decoder_input_ids.device))
        causal = (1.0 - causal) * -1e9                   # additive, [T, T]
        y = self.embed_tokens(decoder_input_ids)
        for blk in self.block:
            y = blk(y, enc, causal)
        return self.final_norm(y)


class T5(nn.Module):
    """T5 (v1.1-like) encoder-decoder without relative position bias: shared
    token embedding, pre-RMSNorm blocks, ReLU FFN, untied LM head."""
    def __init__(self, vocab=64, hidden=32, heads=4, inter=64, enc_layers=2, dec_layers=2):
        super().__init__()
        self.shared = nn.Embedding(vocab, hidden)
        with torch.no_grad():
            self.shared.weight.normal_(0.0, 1.0)
        self.encoder = T5Encoder(self.shared, enc_layers, hidden, heads, inter)
        self.decoder = T5Decoder(self.shared, dec_layers, hidden, heads, inter)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids, decoder_input_ids):
        return self.lm_head(self.decoder(decoder_input_ids, self.encoder(input_ids)))


class ResMLPBlock(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, inter)
        self.fc2 = nn.Linear(inter, hidden)

    def forward(self, x):
        return x + self.fc2(F.relu(self.fc1(self.ln(x))))


class ResMLP(nn.Module):
    def __init__(self, features=32, hidden=64, inter=128, out=10, layers=4):
        super().__init__()
        self.proj_in = nn.Linear(features, hidden)
        self.blocks = nn.ModuleList([ResMLPBlock(hidden, inter) for _ in range(layers)])
        self.head = nn.Linear(hidden, out)

    def forward(self, x):
        x = self.proj_in(x)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 conv + BN, a residual, ReLU."""
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class ResNet(nn.Module):
    """Two stages of two identical blocks each, at different widths: two
    shared-subgraph templates (fold-scopes)."""
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.stage1 = nn.Sequential(BasicBlock(8), BasicBlock(8))
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)        # 16 -> 8
        self.stage2 = nn.Sequential(BasicBlock(16), BasicBlock(16))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.stage1(F.relu(self.stem(x)))
        x = self.stage2(F.relu(self.down(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class Tied(nn.Module):
    """A language model whose output projection is its embedding table (one
    initializer used by Gather and by Gemm transB=1, as F.linear exports on a
    2-D input), with a 2-D MLP of Gemms with biases in between: the tied
    weight and the Gemm-bias traps of tensor parallelism."""
    def __init__(self, vocab=96, seq=8, hidden=32, inter=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, inter)
        self.fc2 = nn.Linear(inter, hidden)
        self.ln_f = nn.LayerNorm(hidden)
        self.hidden = hidden

    def forward(self, idx):
        x = self.wte(idx).reshape(-1, self.hidden)          # [B*S, E]
        x = x + self.fc2(F.gelu(self.fc1(self.ln(x))))      # Gemm + bias
        logits = F.linear(self.ln_f(x), self.wte.weight)    # Gemm transB=1, tied
        return logits.reshape(idx.shape[0], idx.shape[1], -1)


class Recurrent(nn.Module):
    """A sequence model of the three recurrent ONNX ops between Linear layers:
    a 2-layer bidirectional LSTM, a GRU and a ReLU RNN, all batch_first (torch
    exports the transposes to ONNX's [T,B,I] and the zero initial states as
    ConstantOfShape of the batch)."""
    def __init__(self, features=8, hidden=16, out=6):
        super().__init__()
        self.proj_in = nn.Linear(features, hidden)
        self.lstm = nn.LSTM(hidden, hidden // 2, num_layers=2, bidirectional=True,
                            batch_first=True)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.rnn = nn.RNN(hidden, hidden, nonlinearity='relu', batch_first=True)
        self.head = nn.Linear(hidden, out)

    def forward(self, x):
        x, _ = self.lstm(F.relu(self.proj_in(x)))
        x, _ = self.gru(x)
        x, _ = self.rnn(x)
        return self.head(x)


class UNetBlock(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.conv = nn.Conv2d(i, o, 3, padding=1)
        self.norm = nn.InstanceNorm2d(o, affine=True)

    def forward(self, x):
        return F.relu(self.norm(self.conv(x)))


class UNet(nn.Module):
    """A small UNet-style segmentation net: Conv + InstanceNorm blocks, max-pool
    downsampling, a ConvTranspose and a bilinear Resize upsampling, Concat skip
    connections, a nearest Resize and a 1x1 head (2 classes)."""
    def __init__(self):
        super().__init__()
        self.enc1 = UNetBlock(3, 8)
        self.enc2 = UNetBlock(8, 16)
        self.mid = UNetBlock(16, 32)
        self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec2 = UNetBlock(32, 16)
        self.red1 = nn.Conv2d(16, 8, 1)
        self.dec1 = UNetBlock(16, 8)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        u1 = F.interpolate(self.red1(d2), scale_factor=2, mode='bilinear', align_corners=False)
        d1 = self.dec1(torch.cat([u1, e1], 1))
        n1 = F.interpolate(d1, scale_factor=2, mode='nearest')
        return self.head(F.avg_pool2d(n1, 2))


class QDQ(nn.Module):
    """A CNN quantized the QDQ way, as torch exports fake quantization: the
    input through QuantizeLinear/DequantizeLinear (int8, scale 1/16), every
    weight through a per-channel pair (int8, axis 0).  The scales are powers
    of two, so x / scale (ONNX) and x * (1 / scale) (torch's kernel) round
    alike and torch's outputs are the model's exactly; only values the graph
    is given are quantized, so no rounding depends on a kernel's last bit."""

    def __init__(self, classes=10):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, classes)
        for n in ('c1', 'c2', 'fc'):
            w = getattr(self, n).weight.detach()
            amax = w.abs().reshape(w.shape[0], -1).amax(1)
            self.register_buffer(n + '_scale', torch.exp2(torch.ceil(torch.log2(amax / 127))))
            self.register_buffer(n + '_zero', torch.zeros(w.shape[0], dtype=torch.int32))

    def w(self, n):
        return torch.fake_quantize_per_channel_affine(
            getattr(self, n).weight, getattr(self, n + '_scale'), getattr(self, n + '_zero'),
            0, -128, 127)

    def forward(self, x):
        x = torch.fake_quantize_per_tensor_affine(x, 1.0 / 16, 0, -128, 127)
        x = F.max_pool2d(F.relu(F.conv2d(x, self.w('c1'), self.c1.bias, padding=1)), 2)
        x = F.relu(F.conv2d(x, self.w('c2'), self.c2.bias, padding=1))
        return F.linear(F.adaptive_avg_pool2d(x, 1).flatten(1), self.w('fc'), self.fc.bias)


class RecurrentIf(nn.Module):
    """A recurrent model that picks its cell on an input flag: an If (exported
    from TorchScript) whose then branch runs an LSTM and else branch a GRU,
    between Linear layers."""
    def __init__(self, features=8, hidden=16, out=6):
        super().__init__()
        self.proj = nn.Linear(features, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, out)

    def forward(self, x, flag):
        h = self.proj(x)
        if bool(flag):
            y, _ = self.lstm(h)
        else:
            y, _ = self.gru(h)
        return self.head(torch.relu(y))


# ---------------------------------------------------------------- inputs

def gpt_inputs(batch, gen, seq=16, vocab=128):
    return {'idx': torch.randint(0, vocab, (batch, seq), generator=gen)}


def bert_inputs(batch, gen, seq=12, vocab=96):
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.long)
    tt = torch.zeros(batch, seq, dtype=torch.long)
    for b in range(batch):
        valid = seq - (3 * b + 2) % (seq // 2)   # batch 1: 10 valid; others vary
        mask[b, valid:] = 0
        tt[b, valid // 2:valid] = 1
    return {'input_ids': ids, 'attention_mask': mask, 'token_type_ids': tt}


def mlp_inputs(batch, gen):
    return {'x': torch.randn(batch, 32, generator=gen)}


def cnn_inputs(batch, gen):
    return {'x': torch.randn(batch, 3, 16, 16, generator=gen)}


def ln17_inputs(batch, gen):
    return {'x': torch.randn(batch, 8, 32, generator=gen)}


def t5_inputs(batch, gen, src=12, tgt=8, vocab=64):
    return {'input_ids': torch.randint(0, vocab, (batch, src), generator=gen),
            'decoder_input_ids': torch.randint(0, vocab, (batch, tgt), generator=gen)}


def resmlp_inputs(batch, gen):
    return {'x': torch.randn(batch, 32, generator=gen)}


def tied_inputs(batch, gen, seq=8, vocab=96):
    return {'idx': torch.randint(0, vocab, (batch, seq), generator=gen)}


def resnet_inputs(batch, gen):
    return {'x': torch.randn(batch, 3, 16, 16, generator=gen)}


def rnn_inputs(batch, gen):
    return {'x': torch.randn(batch, 6, 8, generator=gen)}


def unet_inputs(batch, gen):
    return {'x': torch.randn(batch, 3, 16, 16, generator=gen)}


def qdq_inputs(batch, gen):
    # times 3: some inputs past the int8 range of the input's QuantizeLinear (+-8)
    return {'x': torch.randn(batch, 3, 16, 16, generator=gen) * 3}


def recif_inputs(batch, gen):
    # batch 1 takes the LSTM branch, batch 4 the GRU branch
    return {'x': torch.randn(batch, 5, 8, generator=gen), 'flag': torch.tensor(batch == 1)}


# name: (seed, constructor, input fn, output names, opset, training mode)
# Seeds are fixed per model (the first five are the 1234 + alphabetical index
# they were generated with), so adding a model never changes another's files.
MODELS = {
    'gpt': (1236, GPT, gpt_inputs, ['logits'], 14, None),
    'bert': (1234, Bert, bert_inputs, ['last_hidden_state', 'pooler_output'], 13, None),
    'mlp': (1238, MLP, mlp_inputs, ['y'], 13, None),
    'cnn': (1235, CNN, cnn_inputs, ['y'], 13, torch.onnx.TrainingMode.PRESERVE),
    'ln17': (1237, LN17, ln17_inputs, ['y'], 17, None),
    't5': (1240, T5, t5_inputs, ['logits'], 14, None),
    'resmlp': (1239, ResMLP, resmlp_inputs, ['y'], 13, None),
    'resnet': (1241, ResNet, resnet_inputs, ['y'], 13, torch.onnx.TrainingMode.PRESERVE),
    'tied': (1242, Tied, tied_inputs, ['logits'], 13, None),
    'rnn': (1243, Recurrent, rnn_inputs, ['y'], 14, None),
    'unet': (1244, UNet, unet_inputs, ['y'], 13, None),
    'recif': (1245, RecurrentIf, recif_inputs, ['y'], 14, None),
    'qdq': (1246, QDQ, qdq_inputs, ['y'], 13, None),
}
SCRIPTED = {'recif'}   # exported from TorchScript: the If stays an If
BATCHES = [1, 4]   # test_data_set_0, test_data_set_1

# The same models exported as torch.onnx.export does by default: no dynamic
# axes, the export batch baked into the graph's constants (NAME/static/).
# The export batch equals the head count for the attention models, so a
# Reshape [B,T,H,d] holds two equal dims tapc must tell apart.
STATIC_B0 = {'gpt': 4, 'bert': 4, 't5': 4, 'mlp': 3, 'cnn': 2, 'ln17': 2, 'resmlp': 3,
             'resnet': 2, 'tied': 2, 'rnn': 3, 'unet': 2, 'recif': 2,
             'qdq': 2}


# ---------------------------------------------------------------- export

def write_pb(path, arr, name):
    t = numpy_helper.from_array(np.array(arr, order='C'), name)  # keeps 0-d (ascontiguousarray does not)
    with open(path, 'wb') as f:
        f.write(t.SerializeToString())


def export_onnx(model, inputs, out_names, opset, model_path, training=None, scripted=False):
    """Export eval-mode `model` on `inputs` (an ordered dict name -> tensor) to
    model_path with dim 0 of every input and output symbolic ('batch') and
    every other output dim pinned to its static value.  Also used by
    bench/gen_deep.py."""
    in_names = list(inputs.keys())
    dyn = {n: {0: 'batch'} for n in in_names + out_names if n not in inputs or inputs[n].dim()}
    kwargs = dict(input_names=in_names, output_names=out_names, dynamic_axes=dyn,
                  opset_version=opset, do_constant_folding=True)
    if training is not None:
        kwargs['training'] = training
    args = tuple(inputs[n] for n in in_names)
    with torch.no_grad():
        torch.onnx.export(torch.jit.script(model) if scripted else model, args, model_path, **kwargs)
        outs = model(*args)
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)

    # torch's exporter names non-batch output dims symbolically when they are
    # computed from Shape (e.g. 'MatMullogits_dim_1' for the sequence length);
    # pin every output dim but 0 to its static value so only 'batch' is
    # symbolic.  This touches output type metadata only, never a node.
    m = onnx.load(model_path)
    for vi in m.graph.input: # TorchScript leaves a scalar input's shape out
        if vi.name in inputs and inputs[vi.name].dim() == 0:
            vi.type.tensor_type.shape.SetInParent()
    for vi, o in zip(m.graph.output, outs):
        dims = vi.type.tensor_type.shape.dim
        assert len(dims) == o.dim(), (model_path, vi.name)
        for k, d in enumerate(dims):
            if k == 0:
                d.dim_param = 'batch'
            else:
                d.dim_value = o.shape[k]
    onnx.checker.check_model(m)
    onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    onnx.save(m, model_path)


def retie(model_path, table):
    """torch's constant folding turns F.linear(x, wte.weight) into a MatMul
    with a transposed copy of the table; put the tie back as other exporters
    write it: Gemm(x, table, transB=1) on the one shared initializer."""
    m = onnx.load(model_path)
    inits = {i.name: i for i in m.graph.initializer}
    w = numpy_helper.to_array(inits[table])
    for k, node in enumerate(m.graph.node):
        b = inits.get(node.input[1]) if node.op_type == 'MatMul' else None
        if b is None:
            continue
        bt = numpy_helper.to_array(b)
        if bt.shape == w.T.shape and np.array_equal(bt, w.T):
            gemm = onnx.helper.make_node('Gemm', [node.input[0], table], list(node.output),
                                         name=node.name.replace('MatMul', 'Gemm'), transB=1)
            m.graph.node.remove(node)
            m.graph.node.insert(k, gemm)
            m.graph.initializer.remove(b)
            break
    else:
        raise SystemExit('retie: no MatMul with the transposed %s' % table)
    onnx.checker.check_model(m)
    onnx.save(m, model_path)


def export(name):
    seed, ctor, make_inputs, out_names, opset, training = MODELS[name]
    torch.manual_seed(seed)
    model = ctor()
    gen = torch.Generator().manual_seed(seed + 1)
    perturb_norms(model, gen)
    model.eval()

    # Replace only what this script writes (expected.ir and other files
    # kept beside the fixture survive a re-run).
    mdir = os.path.join(HERE, name)
    os.makedirs(mdir, exist_ok=True)
    for ds in os.listdir(mdir):
        if ds.startswith('test_data_set_'):
            shutil.rmtree(os.path.join(mdir, ds))

    data_gen = torch.Generator().manual_seed(seed + 2)
    datasets = [make_inputs(b, data_gen) for b in BATCHES]
    in_names = list(datasets[0].keys())
    model_path = os.path.join(mdir, 'model.onnx')
    export_onnx(model, datasets[0], out_names, opset, model_path, training, name in SCRIPTED)
    if name == 'tied':
        retie(model_path, 'wte.weight')

    for i, inputs in enumerate(datasets):
        ddir = os.path.join(mdir, 'test_data_set_%d' % i)
        os.makedirs(ddir)
        with torch.no_grad():
            outs = model(*[inputs[n] for n in in_names])
        if not isinstance(outs, (tuple, list)):
            outs = (outs,)
        for j, n in enumerate(in_names):
            write_pb(os.path.join(ddir, 'input_%d.pb' % j), inputs[n].numpy(), n)
        for j, (n, o) in enumerate(zip(out_names, outs)):
            assert o.dtype == torch.float32
            write_pb(os.path.join(ddir, 'output_%d.pb' % j), o.numpy(), n)
    return mdir


def export_static(name):
    """NAME/static/: the model exported at batch B0 with no dynamic axes,
    and torch's outputs at B0, 2*B0 and 1 (test_data_set_0, 1, 2); the
    batches are listed in NAME/static/batches for test/e2e.sh."""
    seed, ctor, make_inputs, out_names, opset, training = MODELS[name]
    torch.manual_seed(seed)
    model = ctor()
    gen = torch.Generator().manual_seed(seed + 1)
    perturb_norms(model, gen)
    model.eval()
    b0 = STATIC_B0[name]
    sdir = os.path.join(HERE, name, 'static')
    if os.path.isdir(sdir):
        shutil.rmtree(sdir)
    os.makedirs(sdir)
    data_gen = torch.Generator().manual_seed(seed + 3)
    batches = [b0, 2 * b0, 1]
    datasets = [make_inputs(b, data_gen) for b in batches]
    in_names = list(datasets[0].keys())
    model_path = os.path.join(sdir, 'model.onnx')
    kwargs = dict(input_names=in_names, output_names=out_names, opset_version=opset,
                  do_constant_folding=True)
    if training is not None:
        kwargs['training'] = training
    args = tuple(datasets[0][n] for n in in_names)
    with torch.no_grad():
        torch.onnx.export(torch.jit.script(model) if name in SCRIPTED else model, args, model_path,
                          **kwargs)
    if name == 'tied':
        retie(model_path, 'wte.weight')
    m = onnx.load(model_path)
    for vi in m.graph.input: # TorchScript leaves a scalar input's shape out
        if datasets[0][vi.name].dim() == 0:
            vi.type.tensor_type.shape.SetInParent()
    onnx.save(m, model_path)
    onnx.checker.check_model(m)
    for vi in m.graph.input:
        if datasets[0][vi.name].dim():
            assert vi.type.tensor_type.shape.dim[0].dim_value == b0, (name, vi.name)
    for i, inputs in enumerate(datasets):
        ddir = os.path.join(sdir, 'test_data_set_%d' % i)
        os.makedirs(ddir)
        with torch.no_grad():
            outs = model(*[inputs[n] for n in in_names])
        if not isinstance(outs, (tuple, list)):
            outs = (outs,)
        for j, n in enumerate(in_names):
            write_pb(os.path.join(ddir, 'input_%d.pb' % j), inputs[n].numpy(), n)
        for j, (n, o) in enumerate(zip(out_names, outs)):
            write_pb(os.path.join(ddir, 'output_%d.pb' % j), o.numpy(), n)
    with open(os.path.join(sdir, 'batches'), 'w') as f:
        f.write(' '.join(map(str, batches)) + '\n')
    return sdir


# ---------------------------------------------------------------- op summary

def op_summary(model_path):
    m = onnx.load(model_path)
    ops = {}
    for node in m.graph.node:
        d = ops.setdefault(node.op_type, {'count': 0, 'attrs': set(), 'ninputs': set()})
        d['count'] += 1
        d['attrs'].update(a.name for a in node.attribute)
        d['ninputs'].add(len(node.input))
    opset = [(o.domain or 'ai.onnx', o.version) for o in m.opset_import]
    return opset, ops


def format_summary(name, model_path):
    opset, ops = op_summary(model_path)
    lines = ['%s: opset %s, %d bytes, %d nodes' % (
        name, ', '.join('%s=%d' % o for o in opset), os.path.getsize(model_path),
        sum(d['count'] for d in ops.values()))]
    for op in sorted(ops):
        d = ops[op]
        lines.append('  %-20s x%-3d inputs=%s attrs=%s' % (
            op, d['count'], ','.join(map(str, sorted(d['ninputs']))),
            ','.join(sorted(d['attrs'])) or '-'))
    return '\n'.join(lines)


# ---------------------------------------------------------------- ort check

NP2ORT = {np.dtype('float32'): 'float32', np.dtype('float64'): 'float64',
          np.dtype('int64'): 'int64', np.dtype('int32'): 'int32',
          np.dtype('bool'): 'bool', np.dtype('uint8'): 'uint8', np.dtype('int8'): 'int8'}


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, 'rb') as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def run_ort(ort_dir, model_path, inputs):
    """inputs: list of (name, ndarray). Returns list of (name, ndarray)."""
    with tempfile.TemporaryDirectory() as tmp:
        ind, outd = os.path.join(tmp, 'in'), os.path.join(tmp, 'out')
        os.makedirs(ind)
        man = []
        for i, (n, a) in enumerate(inputs):
            f = 'in_%d.bin' % i
            np.ascontiguousarray(a).astype(a.dtype.newbyteorder('<')).tofile(os.path.join(ind, f))
            man.append({'name': n, 'dtype': NP2ORT[a.dtype], 'shape': list(a.shape), 'file': f})
        with open(os.path.join(ind, 'inputs.json'), 'w') as f:
            json.dump(man, f)
        env = dict(os.environ, ORT_DIR=ort_dir)
        subprocess.run(['node', os.path.join(HERE, 'ort_run.js'), model_path, ind, outd],
                       check=True, env=env)
        with open(os.path.join(outd, 'outputs.json')) as f:
            oman = json.load(f)
        res = []
        for e in oman:
            dt = {'bool': np.uint8}.get(e['dtype'], np.dtype(e['dtype']))
            a = np.fromfile(os.path.join(outd, e['file']), dtype=dt).reshape(e['shape'])
            res.append((e['name'], a))
        return res


def ort_available(ort_dir):
    try:
        subprocess.run(['node', '-e', "require('onnxruntime-node')"], check=True,
                       cwd=ort_dir, capture_output=True)
        return True
    except (OSError, subprocess.CalledProcessError):
        return False


def crosscheck(names, ort_dir, sets=None):
    lines = ['onnxruntime-node cross-check (intraOpNumThreads=1) vs torch %s float32 reference'
             % torch.__version__,
             'max_abs = max|ort - torch|, max_rel = max(|ort - torch| / max(|torch|, 1e-6))',
             'tolerance: max_abs <= %g' % ABS_TOL, '']
    worst = 0.0
    for name in names:
        mdir = os.path.join(HERE, name)
        mpath = os.path.join(mdir, 'model.onnx')
        for ds in sorted(d for d in os.listdir(mdir) if d.startswith('test_data_set_'))[:sets]:
            ddir = os.path.join(mdir, ds)
            nin = len([f for f in os.listdir(ddir) if f.startswith('input_')])
            nout = len([f for f in os.listdir(ddir) if f.startswith('output_')])
            inputs = [load_pb(os.path.join(ddir, 'input_%d.pb' % i)) for i in range(nin)]
            refs = [load_pb(os.path.join(ddir, 'output_%d.pb' % i)) for i in range(nout)]
            got = run_ort(ort_dir, mpath, inputs)
            assert len(got) == len(refs), (name, ds, len(got), len(refs))
            for (rn, r), (gn, g) in zip(refs, got):
                assert rn == gn and r.shape == g.shape, (name, ds, rn, gn, r.shape, g.shape)
                diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
                mabs = float(diff.max())
                mrel = float((diff / np.maximum(np.abs(r.astype(np.float64)), 1e-6)).max())
                worst = max(worst, mabs)
                flag = '' if mabs <= ABS_TOL else '   <-- FAIL'
                lines.append('%-6s %-16s %-18s shape=%-14s max_abs=%.3e max_rel=%.3e%s' % (
                    name, ds, rn, 'x'.join(map(str, r.shape)), mabs, mrel, flag))
    lines.append('')
    lines.append('worst max_abs: %.3e -> %s' % (worst, 'OK' if worst <= ABS_TOL else 'FAIL'))
    report = '\n'.join(lines) + '\n'
    print(report, end='')
    return report, worst <= ABS_TOL


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ort-dir', default='/tmp/ort',
                    help='directory holding node_modules/onnxruntime-node (default /tmp/ort)')
    ap.add_argument('--no-ort', action='store_true', help='skip the onnxruntime cross-check')
    ap.add_argument('--static', action='store_true',
                    help='write only the static-batch exports (NAME/static/)')
    ap.add_argument('models', nargs='*', help='subset of: ' + ' '.join(MODELS))
    args = ap.parse_args()
    names = args.models or list(MODELS)
    for n in names:
        if n not in MODELS:
            ap.error('unknown model ' + n)

    torch.set_num_threads(1)
    if args.static:
        for n in names:
            export_static(n)
            print(format_summary(n + '/static', os.path.join(HERE, n, 'static', 'model.onnx')))
        if args.no_ort or not ort_available(args.ort_dir):
            return 0
        report, ok = crosscheck([n + '/static' for n in names], args.ort_dir, sets=1)
        if set(names) == set(MODELS):
            with open(os.path.join(HERE, 'ort_crosscheck_static.txt'), 'w') as f:
                f.write(report)
        return 0 if ok else 1
    for n in names:
        export(n)
    for n in names:
        print(format_summary(n, os.path.join(HERE, n, 'model.onnx')))
    print()

    if args.no_ort:
        return 0
    if not ort_available(args.ort_dir):
        print('onnxruntime-node not found under %s: skipping cross-check' % args.ort_dir,
              file=sys.stderr)
        return 0
    report, ok = crosscheck(names, args.ort_dir)
    if set(names) == set(MODELS):
        with open(os.path.join(HERE, 'ort_crosscheck.txt'), 'w') as f:
            f.write(report)
    if not ok:
        print('FAIL: onnxruntime disagrees with torch beyond %g' % ABS_TOL, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
