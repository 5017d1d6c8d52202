#!/usr/bin/python3
# extra_rnn.py OUTDIR - tapc's own node tests for RNN, GRU and LSTM, written to
# OUTDIR/test_tapc_<name>/ in the layout of the official cases (model.onnx,
# test_data_set_0/input_N.pb and output_N.pb).
#
# The official cases cover only the defaults, a bias, peepholes, layout 1 and
# sequence_lens at full length, one direction each.  These add reverse and
# bidirectional nodes, initial states, listed activations (all eleven the spec
# names, with activation_alpha/beta), clip, linear_before_reset, input_forget,
# shorter sequence_lens (an input and a constant), omitted outputs, layout 1
# bidirectional and the opset 7 forms.  Their references come from the numpy
# implementation below, written from the operator spec one sequence at a time
# (a reverse direction runs on the flipped sequence), which this script first
# checks against onnx 1.12's own helpers (LSTM_Helper, GRU_Helper, RNN_Helper)
# wherever those reach (one forward direction, default activations).  Then
# torch.nn.LSTM/GRU/RNN models (bidirectional, two layers, batch_first, an
# initial state fed as an input) exported by torch.onnx.export at opsets 13
# and 14, with torch's outputs as references.
#
# Needs Debian's /usr/bin/python3 with python3-onnx (1.12), numpy and torch.
# Deterministic: fixed seeds.  Called by test/node/gen.sh.
import io
import os
import sys

import numpy as np

for _name, _type in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if _name not in vars(np):  # onnx 1.12's test cases still use these aliases
        setattr(np, _name, _type)

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}

# name: (takes alpha, takes beta, default alpha, default beta, function)
ACTS = {
    "relu": (False, False, 0, 0, lambda x, a, b: np.maximum(x, 0)),
    "tanh": (False, False, 0, 0, lambda x, a, b: np.tanh(x)),
    "sigmoid": (False, False, 0, 0, lambda x, a, b: 1 / (1 + np.exp(-x))),
    "affine": (True, True, 1.0, 0.0, lambda x, a, b: a * x + b),
    "leakyrelu": (True, False, 0.01, 0, lambda x, a, b: np.where(x >= 0, x, a * x)),
    "thresholdedrelu": (True, False, 1.0, 0, lambda x, a, b: np.where(x > a, x, 0)),
    "scaledtanh": (True, True, 1.0, 1.0, lambda x, a, b: a * np.tanh(b * x)),
    "hardsigmoid": (True, True, 0.2, 0.5, lambda x, a, b: np.clip(a * x + b, 0, 1)),
    "elu": (True, False, 1.0, 0, lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1))),
    "softsign": (False, False, 0, 0, lambda x, a, b: x / (1 + np.abs(x))),
    "softplus": (False, False, 0, 0, lambda x, a, b: np.log1p(np.exp(x))),
}


def activations(names, alphas, betas):
    """(function, alpha, beta) per listed name; alpha and beta values go, in
    order, to the functions that take them (as onnxruntime reads the spec)."""
    out, ia, ib = [], 0, 0
    for nm in names:
        takes_a, takes_b, a, b, fn = ACTS[nm.lower()]
        if takes_a and ia < len(alphas):
            a, ia = alphas[ia], ia + 1
        if takes_b and ib < len(betas):
            b, ib = betas[ib], ib + 1
        out.append((fn, a, b))
    return out


def reference(op, X, W, R, B=None, lens=None, h0=None, c0=None, P=None, direction="forward",
              layout=0, acts=None, alphas=(), betas=(), clip=None, input_forget=0, lbr=0):
    """Y, Y_h (and Y_c for LSTM) of one node, in float64 from the float32 data."""
    G = GATES[op]
    X = X.astype(np.float64)
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    T, Bn, _ = X.shape
    D, H = W.shape[0], R.shape[2]
    nfn = len(DEFAULT_ACTS[op])
    names = acts if acts is not None else DEFAULT_ACTS[op] * D
    fns = activations(names, list(alphas), list(betas))
    if len(fns) == nfn and D == 2:
        fns = fns * 2
    lens = np.full(Bn, T) if lens is None else lens
    Y = np.zeros((T, D, Bn, H))
    Yh = np.zeros((D, Bn, H))
    Yc = np.zeros((D, Bn, H))

    def cl(v):
        return v if clip is None else np.clip(v, -clip, clip)

    def act(k, v, d):
        fn, a, b = fns[d * nfn + k]
        return fn(v, a, b)

    for d in range(D):
        back = direction == "reverse" or d == 1
        w, r = W[d].astype(np.float64), R[d].astype(np.float64)
        bias = np.zeros(2 * G * H) if B is None else B[d].astype(np.float64)
        wb, rb = bias[:G * H], bias[G * H:]
        p = np.zeros(3 * H) if P is None else P[d].astype(np.float64)
        for b in range(Bn):
            L = int(lens[b])
            h = np.zeros(H) if h0 is None else h0[d, b].astype(np.float64)
            c = np.zeros(H) if c0 is None else c0[d, b].astype(np.float64)
            seq = X[:L, b]
            if back:
                seq = seq[::-1]
            ys = []
            for x in seq:
                if op == "RNN":
                    h = act(0, cl(x @ w.T + h @ r.T + wb + rb), d)
                elif op == "GRU":
                    gx, gb = x @ w.T, wb
                    z = act(0, cl(gx[:H] + h @ r[:H].T + wb[:H] + rb[:H]), d)
                    rr = act(0, cl(gx[H:2 * H] + h @ r[H:2 * H].T + wb[H:2 * H] + rb[H:2 * H]), d)
                    rh, rbh = r[2 * H:], rb[2 * H:]
                    if lbr:
                        pre = gx[2 * H:] + rr * (h @ rh.T + rbh) + gb[2 * H:]
                    else:
                        pre = gx[2 * H:] + (rr * h) @ rh.T + rbh + gb[2 * H:]
                    hh = act(1, cl(pre), d)
                    h = (1 - z) * hh + z * h
                else:
                    g = x @ w.T + h @ r.T + wb + rb
                    i = act(0, cl(g[:H] + p[:H] * c), d)
                    f = 1 - i if input_forget else act(0, cl(g[2 * H:3 * H] + p[2 * H:] * c), d)
                    cc = act(1, cl(g[3 * H:]), d)
                    c = f * c + i * cc
                    o = act(0, cl(g[H:2 * H] + p[H:2 * H] * c), d)
                    h = o * act(2, c, d)
                ys.append(h)
            if back:
                ys = ys[::-1]
            for t in range(L):
                Y[t, d, b] = ys[t]
            if L:
                Yh[d, b], Yc[d, b] = h, c
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    res = [Y, Yh] + ([Yc] if op == "LSTM" else [])
    return [v.astype(np.float32) for v in res]


def check_against_onnx_helpers():
    """The reference agrees with onnx's helpers where they reach."""
    from onnx.backend.test.case.node.gru import GRU_Helper
    from onnx.backend.test.case.node.lstm import LSTM_Helper
    from onnx.backend.test.case.node.rnn import RNN_Helper
    rng = np.random.default_rng(7)
    T, Bn, I, H = 4, 3, 3, 5
    for op, hlp in (("RNN", RNN_Helper), ("GRU", GRU_Helper), ("LSTM", LSTM_Helper)):
        G = GATES[op]
        for back in (False, True):
            for lbr in ((0, 1) if op == "GRU" else (0,)):
                X = rng.standard_normal((T, Bn, I)).astype(np.float32)
                W = (rng.standard_normal((1, G * H, I)) * 0.5).astype(np.float32)
                R = (rng.standard_normal((1, G * H, H)) * 0.5).astype(np.float32)
                B = (rng.standard_normal((1, 2 * G * H)) * 0.5).astype(np.float32)
                h0 = rng.standard_normal((1, Bn, H)).astype(np.float32)
                kw = dict(X=X[::-1] if back else X, W=W, R=R, B=B, initial_h=h0)
                extra = {}
                if op == "LSTM":
                    kw["initial_c"] = extra["c0"] = rng.standard_normal((1, Bn, H)).astype(np.float32)
                    kw["P"] = extra["P"] = rng.standard_normal((1, 3 * H)).astype(np.float32)
                if op == "GRU":
                    kw["linear_before_reset"] = lbr
                Yo, Yho = hlp(**kw).step()
                Yo = Yo[::-1] if back else Yo
                ours = reference(op, X, W, R, B, h0=h0, direction="reverse" if back else "forward",
                                 lbr=lbr, **extra)
                assert np.allclose(ours[0], Yo, atol=1e-5), (op, back, lbr, "Y")
                assert np.allclose(ours[1], Yho, atol=1e-5), (op, back, lbr, "Y_h")


# ------------------------------------------------------------------ writing cases

def write_case(outdir, name, model, inputs, outputs):
    onnx.checker.check_model(model)
    d = os.path.join(outdir, "test_tapc_" + name)
    ds = os.path.join(d, "test_data_set_0")
    os.makedirs(ds, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    assert len(names) == len(inputs), (name, names)
    for k, (nm, v) in enumerate(zip(names, inputs)):
        with open(os.path.join(ds, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(v, nm).SerializeToString())
    onames = [o.name for o in model.graph.output]
    assert len(onames) == len(outputs), (name, onames)
    for k, (nm, v) in enumerate(zip(onames, outputs)):
        with open(os.path.join(ds, "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(np.ascontiguousarray(v), nm).SerializeToString())


ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
INPUT_NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def onnx_case(outdir, name, op, T=3, Bn=2, I=3, H=4, direction="forward", layout=0, bias=True,
              h0=False, c0=False, peep=False, lens=None, lens_const=False, outs=(1, 1, 1),
              weights_init=False, opset=14, seed=0, scale=0.5, **attrs):
    """One RNN/GRU/LSTM node; inputs X, W, R, B, sequence_lens, initial_h, initial_c, P as
    asked (W/R/B initializers with weights_init), outputs Y, Y_h, Y_c where outs says."""
    rng = np.random.default_rng(seed)
    G, D = GATES[op], 2 if direction == "bidirectional" else 1
    xs = (Bn, T, I) if layout else (T, Bn, I)
    hs = (Bn, D, H) if layout else (D, Bn, H)
    vals = {
        "X": rng.standard_normal(xs).astype(np.float32),
        "W": (rng.standard_normal((D, G * H, I)) * scale).astype(np.float32),
        "R": (rng.standard_normal((D, G * H, H)) * scale).astype(np.float32),
    }
    if bias:
        vals["B"] = (rng.standard_normal((D, 2 * G * H)) * scale).astype(np.float32)
    if lens is not None:
        vals["sequence_lens"] = np.array(lens, dtype=np.int32)
    if h0:
        vals["initial_h"] = rng.standard_normal(hs).astype(np.float32)
    if c0:
        vals["initial_c"] = rng.standard_normal(hs).astype(np.float32)
    if peep:
        vals["P"] = (rng.standard_normal((D, 3 * H)) * scale).astype(np.float32)
    inames = INPUT_NAMES[:8 if op == "LSTM" else 6]
    last = max(k for k, nm in enumerate(inames) if nm in vals)
    node_in = [nm if nm in vals else "" for nm in inames[:last + 1]]
    onames = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    node_out = [nm if outs[k] else "" for k, nm in enumerate(onames)]
    while node_out and not node_out[-1]:
        node_out.pop()
    if direction != "forward":
        attrs["direction"] = direction
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(op, node_in, node_out, hidden_size=H, **attrs)
    init_names = set()
    if weights_init:
        init_names |= {"W", "R", "B", "P"} & set(vals)
    if lens_const:
        init_names.add("sequence_lens")
    inits = [numpy_helper.from_array(vals[nm], nm) for nm in node_in if nm in init_names]
    ginputs = [helper.make_tensor_value_info(nm, ELEM[vals[nm].dtype], vals[nm].shape)
               for nm in node_in if nm and nm not in init_names]
    kw = {k: v for k, v in attrs.items() if k in ("clip", "input_forget", "activation_alpha",
                                                  "activation_beta")}
    if "activations" in attrs:
        kw["acts"] = attrs["activations"]
    if "activation_alpha" in kw:
        kw["alphas"] = kw.pop("activation_alpha")
    if "activation_beta" in kw:
        kw["betas"] = kw.pop("activation_beta")
    ref = reference(op, vals["X"], vals["W"], vals["R"], vals.get("B"), vals.get("sequence_lens"),
                    vals.get("initial_h"), vals.get("initial_c"), vals.get("P"), direction, layout,
                    lbr=attrs.get("linear_before_reset", 0), **kw)
    goutputs, outputs = [], []
    for k, nm in enumerate(node_out):
        if nm:
            goutputs.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, ref[k].shape))
            outputs.append(ref[k])
    graph = helper.make_graph([node], name, ginputs, goutputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="tapc-extra_rnn")
    write_case(outdir, name, model, [vals[nm] for nm in node_in if nm and nm not in init_names],
               outputs)


def onnx_cases(outdir):
    all_out = dict(outs=(1, 1, 1))
    # directions and initial states
    for op in ("RNN", "GRU", "LSTM"):
        low = op.lower()
        lstm = op == "LSTM"
        onnx_case(outdir, low + "_reverse", op, direction="reverse", h0=True, c0=lstm, seed=1)
        onnx_case(outdir, low + "_bidirectional", op, direction="bidirectional", h0=True,
                  c0=lstm, peep=lstm, seed=2, **all_out)
        onnx_case(outdir, low + "_bidirectional_no_bias", op, direction="bidirectional",
                  bias=False, seed=3, weights_init=True)
        onnx_case(outdir, low + "_layout1_bidirectional", op, direction="bidirectional",
                  layout=1, h0=True, c0=lstm, seed=4, T=4, Bn=3)
        onnx_case(outdir, low + "_clip", op, direction="bidirectional", clip=0.7, scale=1.5,
                  h0=True, seed=5)
        # sequences shorter than seq_length, including an empty one, as an input
        # and as a constant; onnxruntime's semantics (zeros past the end)
        onnx_case(outdir, low + "_seq_lens", op, direction="bidirectional", T=4, Bn=3,
                  lens=[4, 2, 0], h0=True, c0=lstm, seed=6)
        onnx_case(outdir, low + "_seq_lens_const_layout1", op, direction="reverse", layout=1,
                  T=4, Bn=3, lens=[1, 4, 3], lens_const=True, weights_init=True, seed=7)
        onnx_case(outdir, low + "_only_y_batch1", op, outs=(1, 0, 0), direction="reverse", Bn=1,
                  seed=8)
        onnx_case(outdir, low + "_opset7", op, opset=7, direction="bidirectional", h0=True,
                  seed=9)
    onnx_case(outdir, "lstm_only_y_c", "LSTM", outs=(0, 0, 1), h0=True, c0=True, seed=10)
    onnx_case(outdir, "lstm_y_and_y_c", "LSTM", outs=(1, 0, 1), peep=True, seed=11,
              weights_init=True)
    onnx_case(outdir, "gru_only_y_h_bidirectional", "GRU", outs=(0, 1),
              direction="bidirectional", seed=12)
    # GRU linear_before_reset
    onnx_case(outdir, "gru_linear_before_reset", "GRU", linear_before_reset=1, h0=True,
              direction="bidirectional", seed=13)
    onnx_case(outdir, "gru_linear_before_reset_reverse_clip", "GRU", linear_before_reset=1,
              direction="reverse", clip=0.6, scale=1.5, seed=14)
    onnx_case(outdir, "gru_linear_before_reset_opset7", "GRU", opset=7, linear_before_reset=1,
              seed=15, lens=[3, 1])
    # LSTM input_forget, with and without peepholes
    onnx_case(outdir, "lstm_input_forget", "LSTM", input_forget=1, h0=True, c0=True, seed=16)
    onnx_case(outdir, "lstm_input_forget_peepholes_bidirectional", "LSTM", input_forget=1,
              peep=True, direction="bidirectional", c0=True, seed=17)
    onnx_case(outdir, "lstm_peepholes_clip_seq_lens", "LSTM", peep=True, clip=0.5, scale=1.5,
              lens=[2, 3], T=3, c0=True, seed=18)
    # listed activations: every function the spec names, listed and default parameters
    acts = [
        ("rnn", "RNN", "forward", ["Relu"], [], []),
        ("rnn", "RNN", "bidirectional", ["Affine", "ScaledTanh"], [0.8, 1.2], [0.1, 0.6]),
        ("rnn", "RNN", "bidirectional", ["ThresholdedRelu", "Softplus"], [0.2], []),
        ("rnn", "RNN", "reverse", ["Elu"], [0.5], []),
        ("rnn", "RNN", "forward", ["LeakyRelu"], [], []),       # default alpha 0.01
        ("rnn", "RNN", "forward", ["Softsign"], [], []),
        ("rnn", "RNN", "bidirectional", ["HardSigmoid", "Sigmoid"], [], []),  # defaults
        ("gru", "GRU", "bidirectional", ["HardSigmoid", "Softsign", "Sigmoid", "Elu"],
         [0.3, 0.7], [0.4]),
        ("gru", "GRU", "forward", ["Sigmoid", "Relu"], [], []),
        ("gru", "GRU", "reverse", ["HardSigmoid", "ScaledTanh"], [0.25, 0.9], [0.45, 1.1]),
        ("lstm", "LSTM", "bidirectional",
         ["HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "ScaledTanh", "Elu"],
         [0.3, 0.05, 1.1, 0.4], [0.45, 0.8]),
        ("lstm", "LSTM", "forward", ["Sigmoid", "Affine", "Tanh"], [0.9], [0.05]),
        ("lstm", "LSTM", "reverse", ["Sigmoid", "Softplus", "ThresholdedRelu"], [0.1], []),
        # a bidirectional node may list one set for both directions
        ("lstm", "LSTM", "bidirectional", ["Sigmoid", "Relu", "Softsign"], [], []),
    ]
    for k, (low, op, direction, names, al, be) in enumerate(acts):
        kw = {"activations": names}
        if al:
            kw["activation_alpha"] = al
        if be:
            kw["activation_beta"] = be
        onnx_case(outdir, "%s_activations_%d" % (low, k), op, direction=direction, h0=True,
                  seed=20 + k, **kw)


# ------------------------------------------------------------------ torch exports

def torch_cases(outdir):
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)

    def export(name, module, args, in_names, out_names, opset):
        module.eval()
        with torch.no_grad():
            ref = module(*args)
        ref = ref if isinstance(ref, tuple) else (ref,)
        flat = []
        for v in ref:
            flat += list(v) if isinstance(v, tuple) else [v]
        buf = io.BytesIO()
        torch.onnx.export(module, args, buf, input_names=in_names, output_names=out_names,
                          opset_version=opset, do_constant_folding=True)
        model = onnx.load_from_string(buf.getvalue())
        write_case(outdir, name, model, [a.numpy() for a in args], [v.numpy() for v in flat])

    class Seq(torch.nn.Module):
        def __init__(self, rnn, h0=False):
            super().__init__()
            self.rnn, self.h0 = rnn, h0

        def forward(self, x, *state):
            if not state:
                return self.rnn(x)
            return self.rnn(x, state if len(state) > 1 else state[0])

    x_bf = torch.randn(2, 5, 3)        # batch_first: [B, T, I]
    x_tf = torch.randn(5, 2, 3)        # [T, B, I]
    lstm = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    export("torch_lstm_bidirectional_2layers_batch_first", Seq(lstm), (x_bf,), ["x"],
           ["y", "h_n", "c_n"], 13)
    gru = torch.nn.GRU(3, 5, num_layers=2, bidirectional=True)
    export("torch_gru_bidirectional_2layers", Seq(gru), (x_tf,), ["x"], ["y", "h_n"], 14)
    rnn = torch.nn.RNN(3, 4, num_layers=2, nonlinearity="relu", bidirectional=True,
                       batch_first=True)
    export("torch_rnn_relu_bidirectional_2layers", Seq(rnn), (x_bf,), ["x"], ["y", "h_n"], 13)
    rnn = torch.nn.RNN(3, 4, bidirectional=False)
    export("torch_rnn_tanh", Seq(rnn), (x_tf,), ["x"], ["y", "h_n"], 14)
    # a non-zero initial state fed as inputs
    lstm = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    h0, c0 = torch.randn(4, 2, 4), torch.randn(4, 2, 4)
    export("torch_lstm_initial_state", Seq(lstm), (x_bf, h0, c0), ["x", "h0", "c0"],
           ["y", "h_n", "c_n"], 14)
    gru = torch.nn.GRU(3, 4, batch_first=True)
    export("torch_gru_initial_state", Seq(gru), (x_bf, torch.randn(1, 2, 4)), ["x", "h0"],
           ["y", "h_n"], 13)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: extra_rnn.py OUTDIR\n")
        return 2
    check_against_onnx_helpers()
    onnx_cases(sys.argv[1])
    torch_cases(sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
