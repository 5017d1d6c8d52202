#!/usr/bin/python3
# extra_index.py OUTDIR - tapc's own node tests for GatherElements, ScatterElements,
# Scatter, ScatterND, CumSum, TopK, OneHot and Einsum, written to OUTDIR/test_tapc_<name>/
# in the layout of the official cases (model.onnx, test_data_set_0/input_N.pb and
# output_N.pb).
#
# The official cases cover one or two attribute settings each and feed TopK's k and
# OneHot's depth as run-time inputs.  These add what models exported by frameworks use
# and the official ones leave out: negative axes and indices, int32 indices, indices
# smaller than the data, every scatter reduction at its opset (max and min at 18), a
# repeated index with reduction none (the last update wins), CumSum on f32/f64/i32/i64
# with a constant or run-time axis, TopK at opsets 1, 10 and 11 with ties (lower index
# first), k past 16 (the merge-sort path), integer data and a NaN, OneHot at opsets 9 and
# 11 (negative indices wrap only from 11; out-of-range ones give an all-off row), and the
# Einsum equations of exported models: batched products (in place, transposed, copied,
# swapped, through scratch), ellipsis broadcasting, weights, transposes, outer products,
# reductions, implicit outputs, diagonals, three operands and integer types.
#
# References are independent of tapc: numpy (np.einsum, np.cumsum, np.take_along_axis,
# np.argsort with kind='stable'), plain loops written from the operator spec for the
# scatters and OneHot, torch.topk for the NaN case.  Needs Debian's /usr/bin/python3 with
# python3-onnx (1.12), numpy and torch.  Deterministic: fixed seeds.  Called by
# test/node/gen.sh.
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20240611)


def tensor_type(a):
    return helper.np_dtype_to_tensor_dtype(a.dtype) if hasattr(helper, "np_dtype_to_tensor_dtype") \
        else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]


def write_case(outdir, name, op, opset, inputs, outputs, attrs=None, consts=None):
    """One node test: inputs and outputs are [(name, array)]; consts are
    [(name, array)] initializers (inputs the node needs at compile time)."""
    consts = consts or []
    node_inputs = [n for n, _ in inputs] + [n for n, _ in consts]
    # keep the node's input order: consts name their slot by position in `order`
    node = helper.make_node(op, node_inputs if not attrs or "_order" not in attrs else attrs["_order"],
                            [n for n, _ in outputs],
                            **{k: v for k, v in (attrs or {}).items() if k != "_order"})
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, tensor_type(a), a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(n, tensor_type(a), a.shape) for n, a in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="tapc-extra-index")
    model.ir_version = 8 if opset >= 15 else 7
    onnx.checker.check_model(model)
    d = os.path.join(outdir, "test_tapc_" + name)
    ds = os.path.join(d, "test_data_set_0")
    os.makedirs(ds, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for i, (n, a) in enumerate(inputs):
        with open(os.path.join(ds, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    for i, (n, a) in enumerate(outputs):
        with open(os.path.join(ds, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def rand(shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-9, 10, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def indices(shape, dim, dtype=np.int64, negative=True):
    lo = -dim if negative else 0
    return RNG.integers(lo, dim, size=shape).astype(dtype)


# ------------------------------------------------------------------- GatherElements

def gather_elements_ref(data, idx, axis):
    axis %= data.ndim
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    # non-axis dims of idx may be smaller: take the matching corner of data
    corner = tuple(slice(0, s) if d != axis else slice(None) for d, s in enumerate(idx.shape))
    return np.take_along_axis(data[corner], idx, axis=axis)


def gather_elements(out):
    for name, shape, ishape, axis, dt, it, opset in [
        ("gather_elements_neg_axis_3d", (3, 4, 5), (3, 4, 2), -1, np.float32, np.int64, 13),
        ("gather_elements_axis1_smaller", (4, 5, 3), (2, 7, 3), 1, np.float32, np.int64, 13),
        ("gather_elements_i32_indices_i64_data", (5, 3), (4, 2), 0, np.int64, np.int32, 11),
        ("gather_elements_axis2_f64", (2, 3, 6), (2, 2, 4), 2, np.float64, np.int64, 13),
    ]:
        data = rand(shape, dt)
        idx = indices(ishape, shape[axis], it)
        write_case(out, name, "GatherElements", opset, [("data", data), ("indices", idx)],
                   [("y", gather_elements_ref(data, idx, axis))], {"axis": axis})


# ---------------------------------------------------------- ScatterElements, Scatter

def combine(a, b, reduction):
    if reduction == "add":
        return a + b
    if reduction == "mul":
        return a * b
    if reduction == "max":
        return max(a, b)
    if reduction == "min":
        return min(a, b)
    return b


def scatter_elements_ref(data, idx, upd, axis, reduction="none"):
    """The spec's loop, in index order: with none a repeated index keeps the last."""
    out = data.copy()
    axis %= data.ndim
    for pos in np.ndindex(*idx.shape):
        k = int(idx[pos])
        if k < 0:
            k += data.shape[axis]
        tgt = list(pos)
        tgt[axis] = k
        tgt = tuple(tgt)
        out[tgt] = combine(out[tgt], upd[pos], reduction)
    return out


def scatter_elements(out):
    cases = [
        # name, data shape, indices shape, axis, reduction, dtype, opset
        ("scatter_elements_none_duplicates", (3, 5), (3, 4), 1, "none", np.float32, 13),
        ("scatter_elements_neg_axis_3d", (2, 4, 6), (2, 3, 3), -1, "none", np.float32, 13),
        ("scatter_elements_add_i64", (4, 3), (6, 3), 0, "add", np.int64, 16),
        ("scatter_elements_mul_f64", (3, 4), (3, 5), 1, "mul", np.float64, 16),
        ("scatter_elements_max", (2, 3, 4), (2, 5, 2), 1, "max", np.float32, 18),
        ("scatter_elements_min_i32", (5, 4), (7, 4), 0, "min", np.int32, 18),
        ("scatter_elements_add_i32_indices", (4, 4), (4, 6), -1, "add", np.float32, 18),
    ]
    for name, shape, ishape, axis, red, dt, opset in cases:
        data = rand(shape, dt)
        it = np.int32 if "i32_indices" in name else np.int64
        idx = indices(ishape, shape[axis], it)
        upd = rand(ishape, dt)
        attrs = {"axis": axis}
        if red != "none":
            attrs["reduction"] = red
        write_case(out, name, "ScatterElements", opset,
                   [("data", data), ("indices", idx), ("updates", upd)],
                   [("y", scatter_elements_ref(data, idx, upd, axis, red))], attrs)
    # the opset-9 name, with negative indices (not in the official scatter cases)
    data = rand((4, 3))
    idx = indices((3, 3), 4)
    upd = rand((3, 3))
    write_case(out, "scatter_opset9_axis0", "Scatter", 9,
               [("data", data), ("indices", idx), ("updates", upd)],
               [("y", scatter_elements_ref(data, idx, upd, 0))], {"axis": 0})


# ---------------------------------------------------------------------- ScatterND

def scatternd_ref(data, idx, upd, reduction="none"):
    out = data.copy()
    k = idx.shape[-1]
    for pos in np.ndindex(*idx.shape[:-1]):
        tup = tuple(int(v) + (data.shape[j] if v < 0 else 0) for j, v in enumerate(idx[pos]))
        if reduction == "none":
            out[tup] = upd[pos]
        else:
            sl = out[tup]
            flat = np.array(sl, copy=True).reshape(-1)
            u = np.asarray(upd[pos]).reshape(-1)
            for i in range(flat.size):
                flat[i] = combine(flat[i], u[i], reduction)
            out[tup] = flat.reshape(np.shape(sl))
    assert k <= data.ndim
    return out


def scatternd(out):
    cases = [
        # name, data shape, indices shape (last = k), reduction, dtype, opset
        ("scatternd_none_duplicates", (5, 3), (4, 1), "none", np.float32, 13),
        ("scatternd_elements_k2", (4, 3), (2, 3, 2), "none", np.float32, 13),
        ("scatternd_k2_of_3d_neg", (3, 4, 2), (5, 2), "none", np.float32, 16),
        ("scatternd_add_duplicates", (4, 2, 3), (6, 1), "add", np.float32, 16),
        ("scatternd_mul_i64", (3, 3), (4, 2), "mul", np.int64, 16),
        ("scatternd_max", (4, 5), (3, 1), "max", np.float32, 18),
        ("scatternd_min_f64", (2, 3, 4), (2, 2, 2), "min", np.float64, 18),
        ("scatternd_add_i32_data", (6,), (5, 1), "add", np.int32, 18),
    ]
    for name, shape, ishape, red, dt, opset in cases:
        data = rand(shape, dt)
        k = ishape[-1]
        # ScatterND's indices are int64 only (GatherElements' and ScatterElements' may be int32)
        idx = np.stack([indices(ishape[:-1], shape[j]) for j in range(k)], axis=-1)
        if name == "scatternd_none_duplicates":
            idx = np.array([[1], [3], [1], [-4]], dtype=np.int64)    # row 1 twice: last wins
        upd = rand(ishape[:-1] + shape[k:], dt)
        attrs = {} if red == "none" else {"reduction": red}
        write_case(out, name, "ScatterND", opset,
                   [("data", data), ("indices", idx), ("updates", upd)],
                   [("y", scatternd_ref(data, idx, upd, red))], attrs)


# ------------------------------------------------------------------------- CumSum

def cumsum_ref(x, axis, exclusive=0, reverse=0):
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        c = c - y
    return np.flip(c, axis) if reverse else c


def cumsum(out):
    cases = [
        # name, shape, axis, exclusive, reverse, dtype, axis dtype, axis constant
        ("cumsum_3d_axis1_excl_rev", (2, 4, 3), 1, 1, 1, np.float32, np.int64, True),
        ("cumsum_3d_neg_axis_rev", (3, 2, 5), -1, 0, 1, np.float32, np.int32, True),
        ("cumsum_i32_axis0_excl", (5, 3), 0, 1, 0, np.int32, np.int64, True),
        ("cumsum_i64_runtime_axis", (3, 4), 1, 0, 0, np.int64, np.int32, False),
        ("cumsum_f64_axis0", (4, 2, 2), 0, 0, 0, np.float64, np.int64, True),
        ("cumsum_f32_runtime_neg_axis_excl", (2, 3, 4), -2, 1, 0, np.float32, np.int64, False),
    ]
    for name, shape, axis, excl, rev, dt, at, const in cases:
        x = rand(shape, dt)
        a = np.array(axis, dtype=at)
        attrs = {}
        if excl:
            attrs["exclusive"] = 1
        if rev:
            attrs["reverse"] = 1
        y = cumsum_ref(x, axis, excl, rev)
        if const:
            write_case(out, name, "CumSum", 14, [("x", x)], [("y", y)], attrs, [("axis", a)])
        else:
            write_case(out, name, "CumSum", 14, [("x", x), ("axis", a)], [("y", y)], attrs)


# --------------------------------------------------------------------------- TopK

def topk_ref(x, k, axis, largest):
    """Stable argsort: ties keep the lower index first, as the spec asks."""
    key = -x.astype(np.float64) if largest else x
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, idx, axis=axis), idx


def topk(out):
    cases = [
        # name, shape, k, axis, largest, dtype, opset, ties
        ("top_k_opset1_attr", (3, 6), 2, -1, 1, np.float32, 1, False),
        ("top_k_opset10_const", (4, 5), 3, 1, 1, np.float32, 10, False),
        ("top_k_axis0_3d_smallest", (6, 2, 3), 4, 0, 0, np.float32, 11, False),
        ("top_k_ties_largest", (3, 8), 5, 1, 1, np.float32, 11, True),
        ("top_k_ties_smallest_axis0", (9, 3), 6, 0, 0, np.float32, 11, True),
        ("top_k_merge_sort_k20", (2, 40), 20, -1, 1, np.float32, 11, True),
        ("top_k_full_sort_smallest", (3, 33), 33, 1, 0, np.float64, 11, True),
        ("top_k_i64_ties", (2, 10), 4, -1, 1, np.int64, 11, True),
        ("top_k_i32_smallest", (4, 7), 3, 1, 0, np.int32, 11, True),
    ]
    for name, shape, k, axis, largest, dt, opset, ties in cases:
        x = RNG.integers(-3, 4, size=shape).astype(dt) if ties else rand(shape, dt)
        v, i = topk_ref(x, k, axis, largest)
        attrs = {"axis": axis}
        if opset >= 11:
            attrs["largest"] = largest
            attrs["sorted"] = 1
        if opset == 1:
            attrs["k"] = k
            write_case(out, name, "TopK", opset, [("x", x)], [("values", v), ("indices", i)], attrs)
        else:
            write_case(out, name, "TopK", opset, [("x", x)], [("values", v), ("indices", i)],
                       attrs, [("k", np.array([k], dtype=np.int64))])
    # one NaN per row: torch.topk ranks NaN above every number
    import torch
    x = rand((3, 6))
    x[0, 2] = np.nan
    x[2, 5] = np.nan
    for largest in (1, 0):
        v, i = torch.topk(torch.from_numpy(x), 3, dim=1, largest=bool(largest), sorted=True)
        write_case(out, "top_k_nan_" + ("largest" if largest else "smallest"), "TopK", 11,
                   [("x", x)], [("values", v.numpy()), ("indices", i.numpy().astype(np.int64))],
                   {"axis": 1, "largest": largest}, [("k", np.array([3], dtype=np.int64))])


# ------------------------------------------------------------------------- OneHot

def onehot_ref(idx, depth, values, axis, opset):
    """The spec: an index outside the range gives an all-off row; negative
    indices count from the end only from opset 11."""
    r = idx.ndim
    axis = axis + r + 1 if axis < 0 else axis
    out = np.full(idx.shape[:axis] + (depth,) + idx.shape[axis:], values[0], dtype=values.dtype)
    for pos in np.ndindex(*idx.shape):
        k = int(idx[pos])          # truncates floats, as a cast does
        if k < 0 and opset >= 11:
            k += depth
        if 0 <= k < depth:
            out[pos[:axis] + (k,) + pos[axis:]] = values[1]
    return out


def onehot(out):
    cases = [
        # name, indices, depth, values, axis, opset
        ("onehot_opset9_negative_is_off", np.array([0, -1, 3, 4, -5], dtype=np.int64),
         np.array(5, dtype=np.int64), np.array([0, 1], dtype=np.float32), -1, 9),
        ("onehot_out_of_range_rows", np.array([[2, 7], [-9, -3]], dtype=np.int32),
         np.array([6], dtype=np.float32), np.array([-1, 4], dtype=np.int64), -1, 11),
        ("onehot_axis0_float_indices", np.array([[1.7, -2.2], [0.0, 3.9]], dtype=np.float32),
         np.array(4.0, dtype=np.float32), np.array([0.5, 2.5], dtype=np.float32), 0, 11),
        ("onehot_axis1_3d_f64_values", RNG.integers(-4, 6, size=(2, 3, 2)).astype(np.int64),
         np.array(4, dtype=np.int32), np.array([1.0, -1.0], dtype=np.float64), 1, 11),
    ]
    for name, idx, depth, values, axis, opset in cases:
        y = onehot_ref(idx, int(depth.reshape(-1)[0]), values, axis, opset)
        write_case(out, name, "OneHot", opset, [("indices", idx), ("values", values)],
                   [("y", y)], {"axis": axis, "_order": ["indices", "depth", "values"]},
                   [("depth", depth)])


# ------------------------------------------------------------------------- Einsum

def einsum(out):
    f = np.float32
    cases = [
        # name, equation, operand shapes, dtype, weight operands (by position)
        ("einsum_bmm", "bij,bjk->bik", [(3, 4, 5), (3, 5, 6)], f, ()),
        ("einsum_attention_scores", "bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)], f, ()),
        ("einsum_attention_context", "bhqk,bhkd->bhqd", [(2, 3, 5, 6), (2, 3, 6, 4)], f, ()),
        # ellipses of different lengths broadcast right-aligned, as numpy does
        # (onnxruntime rejects them; the same length with 1s it accepts)
        ("einsum_ellipsis_bcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)], f, ()),
        ("einsum_ellipsis_same_len", "...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 6)], f, ()),
        ("einsum_ellipsis_bcast_b", "...ij,...jk->...ik", [(3, 4, 5), (2, 3, 5, 6)], f, ()),
        ("einsum_ellipsis_small", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)], f, ()),
        ("einsum_bmm_bcast_batch", "bij,bjk->bik", [(1, 4, 5), (3, 5, 6)], f, ()),
        ("einsum_linear_weight", "bsh,hd->bsd", [(2, 3, 8), (8, 5)], f, (1,)),
        ("einsum_linear_weight_f64", "bsh,dh->bsd", [(2, 3, 8), (5, 8)], np.float64, (1,)),
        ("einsum_transpose_2d", "ij->ji", [(3, 5)], f, ()),
        ("einsum_transpose_heads", "bhqk->bqhk", [(2, 3, 4, 5)], f, ()),
        ("einsum_ellipsis_transpose", "...ij->...ji", [(2, 3, 4, 5)], f, ()),
        ("einsum_outer", "i,j->ij", [(4,), (6,)], f, ()),
        ("einsum_row_sum", "ij->i", [(4, 7)], f, ()),
        ("einsum_total_sum", "ij->", [(4, 7)], f, ()),
        ("einsum_implicit_matmul", "ij,jk", [(3, 4), (4, 5)], f, ()),
        ("einsum_implicit_transpose", "ji", [(3, 4)], f, ()),
        ("einsum_implicit_upper_first", "bA", [(2, 3)], f, ()),
        ("einsum_elementwise", "ij,ij->ij", [(3, 4), (3, 4)], f, ()),
        ("einsum_elementwise_bcast1", "ij,ij->ij", [(3, 4), (1, 4)], f, ()),
        ("einsum_diagonal", "ii->i", [(5, 5)], f, ()),
        ("einsum_trace_implicit", "ii", [(4, 4)], f, ()),
        ("einsum_batch_diagonal", "bii->bi", [(3, 4, 4)], f, ()),
        ("einsum_three_operands", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], f, ()),
        ("einsum_output_swapped", "ij,jk->ki", [(3, 4), (4, 5)], f, ()),
        ("einsum_output_scattered", "ijk,kl->jli", [(3, 4, 5), (5, 6)], f, ()),
        ("einsum_operand_copied", "ikj,kl->ijl", [(3, 5, 4), (5, 6)], f, ()),
        ("einsum_sum_within_operand", "ij,jk->k", [(3, 4), (4, 5)], f, ()),
        ("einsum_matvec_batched", "bij,bj->bi", [(4, 5, 6), (4, 6)], f, ()),
        ("einsum_uppercase", "Bij,BjK->BiK", [(2, 4, 5), (2, 5, 6)], f, ()),
        ("einsum_spaces", " b i j , b j k -> b i k ", [(2, 3, 4), (2, 4, 5)], f, ()),
        ("einsum_i32_matmul", "ij,jk->ik", [(3, 4), (4, 5)], np.int32, ()),
        ("einsum_i64_batched", "bij,bkj->bik", [(2, 3, 4), (2, 5, 4)], np.int64, ()),
        ("einsum_f64_bmm_big", "bij,bjk->bik", [(2, 17, 19), (2, 19, 23)], np.float64, ()),
    ]
    for name, eq, shapes, dt, weights in cases:
        ops = [rand(s, dt) for s in shapes]
        y = np.einsum(eq.replace(" ", ""), *[o.astype(np.float64) if dt == f else o for o in ops])
        y = np.asarray(y).astype(dt)
        names = ["x%d" % i for i in range(len(ops))]
        ins = [(n, o) for i, (n, o) in enumerate(zip(names, ops)) if i not in weights]
        consts = [(n, o) for i, (n, o) in enumerate(zip(names, ops)) if i in weights]
        write_case(out, name, "Einsum", 12, ins, [("y", y)],
                   {"equation": eq, "_order": names}, consts)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: extra_index.py OUTDIR\n")
        return 2
    out = sys.argv[1]
    gather_elements(out)
    scatter_elements(out)
    scatternd(out)
    cumsum(out)
    topk(out)
    onehot(out)
    einsum(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
