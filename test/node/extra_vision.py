#!/usr/bin/python3
# extra_vision.py NODEDIR - tapc's own backend node tests for the vision operators (Resize,
# Upsample, ConvTranspose, InstanceNormalization, DepthToSpace, SpaceToDepth; Conv and
# AveragePool of one depth slice with depth pads): what the official cases leave out.
# Writes NODEDIR/test_tapc_<name>/model.onnx and test_data_set_0/{input,output}_N.pb in the
# official layout; run by test/node/gen.sh.
#
# The references never come from tapc:
#   - Resize and Upsample: onnx 1.12's numpy reference (onnx.backend.test.case.node.resize:
#     interpolate_nd and its coefficient functions).  What 1.12 predates (opset 18's axes and
#     keep_aspect_ratio_policy, half_pixel_symmetric, antialias) goes through ref_resize below,
#     which follows the later onnx reference (onnx/reference/ops/op_resize.py) axis by axis
#     and is itself checked here against 1.12's functions wherever both apply.  Upsample and
#     Resize-10 use asymmetric coordinates with floor (growing) or ceil (shrinking) nearest
#     rounding, as onnxruntime does: the spec of those opsets does not say.
#   - ConvTranspose, InstanceNormalization and the 3-D Conv and AveragePool: torch.nn.functional
#     (conv_transpose1d/2d/3d, instance_norm, conv3d, avg_pool3d on explicitly padded
#     input); pads torch cannot express (asymmetric, auto_pad, output_shape) cut or extend
#     torch's unpadded result at the pads the ONNX spec derives.
#   - DepthToSpace and SpaceToDepth: the spec's reshape/transpose definitions in numpy.
# Deterministic (fixed seeds); every model is a few kilobytes.  Needs /usr/bin/python3 with
# python3-onnx, numpy and torch.
import os
import sys

import numpy as np

for _name, _type in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if _name not in vars(np):  # bookworm's numpy dropped the aliases onnx 1.12 uses
        setattr(np, _name, _type)

import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.backend.test.case.node import resize as R  # noqa: E402

OUT = None
RNG = np.random.RandomState(20240611)
F32 = np.float32


def case(name, nodes, inputs, outputs, inits=(), opset=13):
    """Write one test: inputs/outputs/inits are (name, array) lists."""
    def info(n, a):
        return helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape)
    graph = helper.make_graph(nodes, name, [info(n, a) for n, a in inputs],
                              [info(n, a) for n, a in outputs],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, producer_name="tapc extra_vision.py",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    d = os.path.join(OUT, "test_tapc_" + name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for kind, lst in (("input", inputs), ("output", outputs)):
        for i, (n, a) in enumerate(lst):
            with open(os.path.join(d, "test_data_set_0", "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())


def rand(*shape, dtype=F32):
    return RNG.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------ Resize reference

def linear_coeffs_antialias(ratio, scale):
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    footprint = 2 - 2 * start
    args = (np.arange(start, start + footprint) - ratio) * scale
    coeffs = np.clip(1 - np.abs(args), 0, 1)
    return np.array(coeffs) / sum(coeffs)


def cubic_coeffs_antialias(ratio, scale, A=-0.75):
    scale = min(scale, 1.0)

    def k(x):
        x = abs(x)
        if x <= 1:
            return (A + 2) * x ** 3 - (A + 3) * x ** 2 + 1
        if x < 2:
            return A * x ** 3 - 5 * A * x ** 2 + 8 * A * x - 4 * A
        return 0.0
    i_start = int(np.floor(-2 / scale) + 1)
    coeffs = [k(scale * (i - ratio)) for i in range(i_start, 2 - i_start)]
    return np.array(coeffs) / sum(coeffs)


def interp_1d(data, scale, out_int, x, get_coeffs, roi, extrap, ct, excl):
    """One output element along one axis: the later onnx reference's _interpolate_1d_with_x."""
    n_in = len(data)
    ow = scale * n_in
    if ct == "align_corners":
        xo = 0.0 if ow == 1 else x * (n_in - 1) / (ow - 1)
    elif ct == "asymmetric":
        xo = x / scale
    elif ct == "tf_crop_and_resize":
        xo = (roi[1] - roi[0]) * (n_in - 1) / 2 if ow == 1 else x * (roi[1] - roi[0]) * (n_in - 1) / (ow - 1)
        xo += roi[0] * (n_in - 1)
        if xo < 0 or xo > n_in - 1:
            return extrap
    elif ct == "pytorch_half_pixel":
        # the spec's "length_resized > 1 ? ... : 0" (onnx's reference has -0.5 when ow == 1)
        xo = 0.0 if out_int <= 1 else (x + 0.5) / scale - 0.5
    elif ct == "half_pixel":
        xo = (x + 0.5) / scale - 0.5
    elif ct == "half_pixel_symmetric":
        xo = n_in / 2 * (1 - out_int / ow) + (x + 0.5) / scale - 0.5
    elif ct == "tf_half_pixel_for_nn":
        xo = (x + 0.5) / scale
    else:
        raise ValueError(ct)
    xo = float(xo)
    ratio = 1 if xo.is_integer() else xo - np.floor(xo)
    coeffs = np.array(get_coeffs(ratio), dtype=np.float64)
    n = len(coeffs)
    pad = int(np.ceil(n / 2))
    padded = np.pad(np.asarray(data, dtype=np.float64), pad, mode="edge")
    xp = xo + pad
    idx = sorted(sorted(range(len(padded)), key=lambda i: (abs(xp - i), i))[:n])
    if excl:
        for k, i in enumerate(idx):
            if i - pad < 0 or i - pad >= n_in:
                coeffs[k] = 0
        coeffs /= sum(coeffs)
    return float(np.dot(coeffs, padded[idx]))


def ref_resize(x, mode="nearest", ct="half_pixel", nm="round_prefer_floor", a=-0.75, excl=0,
               aa=0, extrap=0.0, scales=None, sizes=None, axes=None, roi=None, kar="stretch",
               v10=False):
    """Resize's reference, one axis at a time (each axis is a linear map; extrapolated
    positions are extrapolation_value whichever axis put them outside)."""
    r = x.ndim
    axes = list(range(r)) if axes is None else [d % r for d in axes]
    sc = [1.0] * r
    out = list(x.shape)
    full_roi = [0.0] * r + [1.0] * r
    if roi is not None:
        for i, d in enumerate(axes):
            full_roi[d], full_roi[r + d] = roi[i], roi[len(axes) + i]
    if scales is not None:
        for i, d in enumerate(axes):
            sc[d] = float(scales[i])
        out = [int(x.shape[d] * sc[d]) for d in range(r)]
    else:
        for i, d in enumerate(axes):
            out[d] = int(sizes[i])
        sc = [out[d] / x.shape[d] for d in range(r)]
        if kar != "stretch":
            s = (min if kar == "not_larger" else max)(sc[d] for d in axes)
            sc = [s if d in axes else 1.0 for d in range(r)]
            out = [int(s * x.shape[d] + 0.5) if d in axes else x.shape[d] for d in range(r)]
    y = x.astype(np.float64)
    bad = np.zeros(out, dtype=bool)
    for d in range(r):
        s = sc[d]
        if mode == "nearest":
            m = ("ceil" if s < 1 else "floor") if v10 else nm
            get = lambda ratio, m=m: R.nearest_coeffs(ratio, mode=m)  # noqa: E731
        elif mode == "linear":
            get = (lambda ratio, s=s: linear_coeffs_antialias(ratio, s)) if aa else R.linear_coeffs
        else:
            get = (lambda ratio, s=s: cubic_coeffs_antialias(ratio, s, a)) if aa else \
                (lambda ratio: R.cubic_coeffs(ratio, A=a))
        M = np.zeros((out[d], x.shape[d]))
        oob = np.zeros(out[d], dtype=bool)
        droi = [full_roi[d], full_roi[r + d]]
        for j in range(out[d]):
            for i in range(x.shape[d]):
                e = np.zeros(x.shape[d])
                e[i] = 1
                v = interp_1d(e, s, out[d], j, get, droi, np.nan, ct, excl)
                if ct not in ("half_pixel_symmetric", "tf_half_pixel_for_nn") and not aa and \
                        not (ct == "pytorch_half_pixel" and (out[d] <= 1 or s * x.shape[d] == 1)):
                    w = R.interpolate_1d_with_x(e, s, j, get, roi=np.array(droi), extrapolation_value=np.nan,
                                                coordinate_transformation_mode=ct, exclude_outside=excl)
                    assert (np.isnan(v) and np.isnan(w)) or abs(v - w) < 1e-12, (ct, mode, v, w)
                if np.isnan(v):
                    oob[j] = True
                    break
                M[j, i] = v
        y = np.moveaxis(np.tensordot(M, np.moveaxis(y, d, 0), axes=1), 0, d)
        idx = [slice(None)] * r
        idx[d] = oob
        bad[tuple(idx)] = True
    y[bad] = extrap
    return y.astype(x.dtype) if x.dtype.kind == "f" else y.round().astype(x.dtype)


def check_nd(x, y, get, **kw):
    """Where onnx 1.12's n-d reference applies, the axis-by-axis one must agree with it."""
    ref = R.interpolate_nd(x, get, **kw).astype(x.dtype)
    assert np.allclose(ref, y, rtol=1e-5, atol=1e-5), (kw, ref, y)


def resize_node(out, mode, opset, scales=None, sizes=None, roi=None, x="X", **attrs):
    """A Resize node reading named initializers ('' for omitted inputs)."""
    if opset < 11:
        ins = [x, scales]
    else:
        ins = [x, roi or "", scales or ""] + ([sizes] if sizes else [])
    return helper.make_node("Resize", ins, [out], mode=mode, **attrs)


def resize_cases():
    coords = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
    modes = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
    # binary fractions: the exact ties that tell the nearest_modes apart, computed exactly in
    # any precision (0.6 puts x_original a rounding error away from an integer instead)
    up, down = np.array([1, 1, 1.75, 2.5], F32), np.array([1, 1, 0.75, 0.5], F32)

    # nearest: every nearest_mode, growing and shrinking, per coordinate mode
    for ct in coords + ["tf_half_pixel_for_nn"]:
        opset = 11 if ct == "tf_half_pixel_for_nn" else 13
        x = np.arange(24, dtype=F32).reshape(1, 1, 4, 6)
        nodes, outs = [], []
        for nm in modes:
            for tag, s in (("up", up), ("down", down)):
                name = "y_%s_%s" % (nm, tag)
                nodes.append(resize_node(name, "nearest", opset, scales="s_" + tag, roi="roi" if opset == 11 else None,
                                         coordinate_transformation_mode=ct, nearest_mode=nm))
                y = ref_resize(x, "nearest", ct, nm, scales=s)
                if ct != "tf_half_pixel_for_nn":
                    check_nd(x, y, lambda r, nm=nm: R.nearest_coeffs(r, mode=nm), scale_factors=s,
                             coordinate_transformation_mode=ct)
                outs.append((name, y))
        inits = [("s_up", up), ("s_down", down)] + ([("roi", np.zeros(0, F32))] if opset == 11 else [])
        case("resize_nearest_" + ct, nodes, [("X", x)], outs, inits, opset)

    # n-linear: 1-D, bilinear (NCHW), trilinear (NCDHW), growing and shrinking
    shapes = {"1d": ((7,), [1.6], [0.6]), "2d": ((1, 2, 4, 5), [1, 1, 1.5, 2.2], [1, 1, 0.5, 0.7]),
              "3d": ((1, 1, 3, 4, 5), [1, 1, 1.7, 1.5, 0.6], [1, 1, 0.7, 0.5, 0.8]),
              # exactly 2x along rows long enough for the runtime's two-outputs-a-step path
              "1dx2": ((13,), [2], [0.5]), "2dx2": ((1, 2, 6, 11), [1, 1, 2, 2], [1, 1, 0.5, 0.5])}
    for ct in coords:
        nodes, ins, outs, inits = [], [], [], []
        for dim, (shape, su, sd) in shapes.items():
            x = rand(*shape)
            ins.append(("x" + dim, x))
            for tag, s in (("up", np.array(su, F32)), ("down", np.array(sd, F32))):
                name = "y%s_%s" % (dim, tag)
                inits.append(("s%s_%s" % (dim, tag), s))
                nodes.append(resize_node(name, "linear", 13, scales="s%s_%s" % (dim, tag), x="x" + dim,
                                         coordinate_transformation_mode=ct))
                y = ref_resize(x, "linear", ct, scales=s)
                check_nd(x, y, R.linear_coeffs, scale_factors=s, coordinate_transformation_mode=ct)
                outs.append((name, y))
        case("resize_linear_" + ct, nodes, ins, outs, inits)

    # cubic: cubic_coeff_a and exclude_outside, growing and shrinking, 2-D and 3-D
    for ct in coords:
        x2, x3 = rand(1, 1, 5, 6), rand(1, 1, 3, 4, 4)
        nodes, outs = [], []
        inits = [("s_up", np.array([1, 1, 1.8, 1.5], F32)), ("s_down", np.array([1, 1, 0.6, 0.5], F32)),
                 ("s3", np.array([1, 1, 1.4, 0.75, 1.5], F32))]
        for A in (-0.75, -0.5):
            for excl in (0, 1):
                for tag in ("up", "down"):
                    s = dict(inits)["s_" + tag]
                    name = "y_a%d_x%d_%s" % (int(-A * 100), excl, tag)
                    nodes.append(resize_node(name, "cubic", 13, scales="s_" + tag, coordinate_transformation_mode=ct,
                                             cubic_coeff_a=A, exclude_outside=excl))
                    y = ref_resize(x2, "cubic", ct, a=A, excl=excl, scales=s)
                    check_nd(x2, y, lambda r, A=A: R.cubic_coeffs(r, A=A), scale_factors=s,
                             coordinate_transformation_mode=ct, exclude_outside=excl)
                    outs.append((name, y))
        nodes.append(resize_node("y3d", "cubic", 13, scales="s3", x="x3", coordinate_transformation_mode=ct))
        outs.append(("y3d", ref_resize(x3, "cubic", ct, scales=dict(inits)["s3"])))
        # an output of length 1 (where pytorch_half_pixel maps to 0)
        inits.append(("s_one", np.array([1, 1, 0.25, 0.5], F32)))
        nodes.append(resize_node("y_one", "cubic", 13, scales="s_one", coordinate_transformation_mode=ct))
        outs.append(("y_one", ref_resize(x2, "cubic", ct, scales=dict(inits)["s_one"])))
        case("resize_cubic_" + ct, nodes, [("X", x2), ("x3", x3)], outs, inits)

    # tf_crop_and_resize: roi inside and beyond the input (extrapolation_value), every mode;
    # roi as an initializer and as a run-time input (it decides no shape)
    x = rand(1, 2, 5, 6)
    roi_in = np.array([0, 0, 0.25, 0.125, 1, 1, 0.75, 0.875], F32)
    roi_out = np.array([0, 0, -0.25, 0.25, 1, 1, 1.25, 1.5], F32)
    sizes = np.array([1, 2, 4, 5], np.int64)
    nodes, outs = [], []
    for mode in ("nearest", "linear", "cubic"):
        for tag, roi in (("in", roi_in), ("out", roi_out)):
            name = "y_%s_%s" % (mode, tag)
            nodes.append(resize_node(name, mode, 13, sizes="sizes", roi="roi_" + tag,
                                     coordinate_transformation_mode="tf_crop_and_resize",
                                     extrapolation_value=-3.5))
            y = ref_resize(x, mode, "tf_crop_and_resize", roi=roi, sizes=sizes, extrap=-3.5)
            outs.append((name, y))
    s = np.array([1, 1, 1.5, 0.75], F32)
    nodes.append(resize_node("y_scales", "linear", 13, scales="s", roi="roi_rt",
                             coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=2.0))
    outs.append(("y_scales", ref_resize(x, "linear", "tf_crop_and_resize", roi=roi_out, scales=s, extrap=2.0)))
    check_nd(x, outs[-1][1], R.linear_coeffs, scale_factors=s, roi=roi_out,
             coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=2.0)
    case("resize_tf_crop_and_resize", nodes, [("X", x), ("roi_rt", roi_out)], outs,
         [("roi_in", roi_in), ("roi_out", roi_out), ("sizes", sizes), ("s", s)])

    # opset 11's form: roi and scales are required inputs, empty when sizes decide
    x = rand(1, 3, 4, 4)
    sizes = np.array([1, 3, 7, 3], np.int64)
    nodes = [helper.make_node("Resize", ["X", "roi", "empty", "sizes"], ["y_lin"], mode="linear",
                              coordinate_transformation_mode="pytorch_half_pixel"),
             helper.make_node("Resize", ["X", "roi", "empty", "sizes"], ["y_near"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor")]
    outs = [("y_lin", ref_resize(x, "linear", "pytorch_half_pixel", sizes=sizes)),
            ("y_near", ref_resize(x, "nearest", "asymmetric", "floor", sizes=sizes))]
    check_nd(x, outs[0][1], R.linear_coeffs, output_size=sizes, coordinate_transformation_mode="pytorch_half_pixel")
    case("resize_opset11_sizes", nodes, [("X", x)], outs,
         [("roi", np.zeros(0, F32)), ("empty", np.zeros(0, F32)), ("sizes", sizes)], 11)

    # scales from a Constant node (a folded constant), on a graph input of batch 2
    x = rand(2, 3, 3, 4)
    s = np.array([1, 1, 2, 2], F32)
    nodes = [helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(s)),
             helper.make_node("Resize", ["X", "", "s"], ["Y"], mode="linear")]
    case("resize_constant_scales", nodes, [("X", x)], [("Y", ref_resize(x, "linear", scales=s))])

    # nearest on integer data and f64 linear/cubic
    xi = RNG.randint(0, 255, (1, 2, 3, 4)).astype(np.uint8)
    x32 = RNG.randint(-1000, 1000, (2, 5)).astype(np.int32)
    xd = rand(1, 1, 4, 5, dtype=np.float64)
    xd2 = rand(1, 1, 3, 12, dtype=np.float64)
    nodes = [resize_node("yu8", "nearest", 13, scales="su", x="xu8", nearest_mode="round_prefer_ceil"),
             resize_node("yf64x2", "linear", 13, scales="s2", x="xf64x2"),
             resize_node("yi32", "nearest", 13, sizes="szi", x="xi32", coordinate_transformation_mode="align_corners"),
             resize_node("yf64", "linear", 13, scales="su", x="xf64"),
             resize_node("yf64c", "cubic", 13, scales="sd", x="xf64", exclude_outside=1)]
    su, sd, szi = np.array([1, 1, 1.5, 2.5], F32), np.array([1, 1, 0.5, 0.6], F32), np.array([3, 9], np.int64)
    s2 = np.array([1, 1, 2, 2], F32)
    outs = [("yu8", ref_resize(xi, "nearest", nm="round_prefer_ceil", scales=su)),
            ("yf64x2", ref_resize(xd2, "linear", scales=s2)),
            ("yi32", ref_resize(x32, "nearest", "align_corners", sizes=szi)),
            ("yf64", ref_resize(xd, "linear", scales=su)),
            ("yf64c", ref_resize(xd, "cubic", excl=1, scales=sd))]
    case("resize_dtypes", nodes, [("xu8", xi), ("xi32", x32), ("xf64", xd), ("xf64x2", xd2)], outs,
         [("su", su), ("sd", sd), ("szi", szi), ("s2", s2)])

    # opset 10: (X, scales), asymmetric coordinates, floor/ceil nearest
    x = rand(1, 2, 4, 6)
    su, sd = np.array([1, 1, 2, 1.5], F32), np.array([1, 1, 0.5, 0.7], F32)
    nodes, outs = [], []
    for mode in ("nearest", "linear"):
        for tag, s in (("up", su), ("down", sd)):
            nodes.append(resize_node("y_%s_%s" % (mode, tag), mode, 10, scales="s_" + tag))
            outs.append(("y_%s_%s" % (mode, tag), ref_resize(x, mode, "asymmetric", scales=s, v10=True)))
    case("resize_opset10", nodes, [("X", x)], outs, [("s_up", su), ("s_down", sd)], 10)

    # opset 18: axes (scales and sizes, negative axes), keep_aspect_ratio_policy,
    # half_pixel_symmetric, antialias
    x = rand(1, 2, 5, 7)
    nodes, outs, inits = [], [], []

    def add(name, mode, scales=None, sizes=None, roi=None, **attrs):
        ins = ["X", "", "", ""]
        for i, (k, v) in enumerate((("roi", roi), ("scales", scales), ("sizes", sizes))):
            if v is not None:
                inits.append(("%s_%s" % (k, name), v))
                ins[i + 1] = "%s_%s" % (k, name)
        while ins[-1] == "":
            ins.pop()
        nodes.append(helper.make_node("Resize", ins, [name], mode=mode, **attrs))
        ref = dict(attrs)
        kw = {"ct": ref.pop("coordinate_transformation_mode", "half_pixel"),
              "kar": ref.pop("keep_aspect_ratio_policy", "stretch"), "aa": ref.pop("antialias", 0),
              "excl": ref.pop("exclude_outside", 0), "a": ref.pop("cubic_coeff_a", -0.75),
              "nm": ref.pop("nearest_mode", "round_prefer_floor"),
              "extrap": ref.pop("extrapolation_value", 0.0), "axes": ref.pop("axes", None)}
        assert not ref
        outs.append((name, ref_resize(x, mode, scales=scales, sizes=sizes, roi=roi, **kw)))

    add("axes_scales", "linear", scales=np.array([1.6, 0.5], F32), axes=[3, 2])
    add("axes_neg", "nearest", scales=np.array([2.5], F32), axes=[-1])
    add("axes_sizes", "cubic", sizes=np.array([3, 9], np.int64), axes=[1, 3])
    for kar in ("stretch", "not_larger", "not_smaller"):
        add("kar_%s" % kar, "linear", sizes=np.array([1, 2, 9, 8], np.int64), keep_aspect_ratio_policy=kar)
        add("kar_axes_%s" % kar, "nearest", sizes=np.array([3, 4], np.int64), axes=[2, 3],
            keep_aspect_ratio_policy=kar)
    for mode in ("nearest", "linear", "cubic"):
        add("sym_%s" % mode, mode, scales=np.array([1, 1, 0.7, 1.3], F32),
            coordinate_transformation_mode="half_pixel_symmetric")
    add("sym_sizes", "linear", sizes=np.array([4, 10], np.int64), axes=[2, 3], keep_aspect_ratio_policy="not_larger",
        coordinate_transformation_mode="half_pixel_symmetric")
    add("crop_axes", "linear", sizes=np.array([3], np.int64), roi=np.array([0.1, 0.9], F32), axes=[3],
        coordinate_transformation_mode="tf_crop_and_resize")
    for mode in ("linear", "cubic"):
        add("aa_%s_down" % mode, mode, scales=np.array([1, 1, 0.4, 0.3], F32), antialias=1)
        add("aa_%s_mixed" % mode, mode, scales=np.array([1, 1, 1.6, 0.6], F32), antialias=1)
        add("aa_%s_excl" % mode, mode, scales=np.array([1, 1, 0.6, 0.45], F32), antialias=1, exclude_outside=1,
            coordinate_transformation_mode="align_corners")
    case("resize_opset18", nodes, [("X", x)], outs, inits, 18)


def upsample_cases():
    x2, x4, x5 = rand(3, 4), rand(1, 2, 3, 4), rand(1, 1, 2, 3, 3)
    s2, s4, s5 = np.array([2, 1.5], F32), np.array([1, 1, 2, 3], F32), np.array([1, 1, 1.5, 2, 1], F32)
    for opset in (7, 9):
        nodes, outs, inits = [], [], []
        for name, x, s in (("y2", "x2", s2), ("y4", "x4", s4), ("y5", "x5", s5)):
            for mode in ("nearest", "linear"):
                out = "%s_%s" % (name, mode)
                if opset == 7:
                    nodes.append(helper.make_node("Upsample", [x], [out], mode=mode, scales=[float(v) for v in s]))
                else:
                    inits.append(("s_" + out, s))
                    nodes.append(helper.make_node("Upsample", [x, "s_" + out], [out], mode=mode))
                data = {"x2": x2, "x4": x4, "x5": x5}[x]
                outs.append((out, ref_resize(data, mode, "asymmetric", scales=s, v10=True)))
        case("upsample_opset%d" % opset, nodes, [("x2", x2), ("x4", x4), ("x5", x5)], outs, inits, opset)


# ------------------------------------------------------------------ ConvTranspose

def convt_ref(x, w, b, strides, dil, group, pb, out_shape, opad=None, pads=None):
    """torch's conv_transpose at pads pb (the leading ones) and output size out_shape: with
    pads torch can express, torch computes it; otherwise its unpadded result is cut or
    extended with zeros, and the bias added."""
    nd = x.ndim - 2
    fn = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][nd - 1]
    tx, tw = torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64))
    tb = None if b is None else torch.from_numpy(b.astype(np.float64))
    full = fn(tx, tw, None, stride=strides, padding=0, output_padding=0, groups=group, dilation=dil).numpy()
    y = np.zeros(full.shape[:2] + tuple(out_shape))
    src = tuple([slice(None)] * 2 + [slice(max(p, 0), min(p + o, f)) for p, o, f in zip(pb, out_shape, full.shape[2:])])
    dst = tuple([slice(None)] * 2 + [slice(max(-p, 0), max(-p, 0) + min(p + o, f) - max(p, 0))
                                     for p, o, f in zip(pb, out_shape, full.shape[2:])])
    y[dst] = full[src]
    if b is not None:
        y += b.reshape((1, -1) + (1,) * nd)
    if pads is not None and all(p < s or p < d for p, s, d in zip(opad, strides, dil)) and \
            pads[:nd] == pads[nd:]:
        direct = fn(tx, tw, tb, stride=strides, padding=pads[:nd], output_padding=opad, groups=group,
                    dilation=dil).numpy()
        assert direct.shape == y.shape and np.allclose(direct, y), "torch's padding disagrees"
        y = direct
    return y.astype(x.dtype)


def convt_case(name, xs, ws, group=1, strides=None, dil=None, pads=None, opad=None, auto_pad=None,
               output_shape=None, bias=True, kernel_shape=False, dtype=F32, opset=11):
    nd = len(xs) - 2
    x, w = rand(*xs, dtype=dtype), rand(*ws, dtype=dtype)
    b = rand(ws[1] * group, dtype=dtype) if bias else None
    st, dl = strides or [1] * nd, dil or [1] * nd
    op = opad or [0] * nd
    k = list(ws[2:])
    attrs = {"group": group} if group != 1 else {}
    for key, v in (("strides", strides), ("dilations", dil), ("pads", pads), ("output_padding", opad),
                   ("output_shape", output_shape)):
        if v is not None:
            attrs[key] = v
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    if kernel_shape:
        attrs["kernel_shape"] = k
    # the spec's output size and leading pads
    full = [st[i] * (xs[2 + i] - 1) + op[i] + (k[i] - 1) * dl[i] + 1 for i in range(nd)]
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = output_shape or [xs[2 + i] * st[i] for i in range(nd)]
        tot = [full[i] - out[i] for i in range(nd)]
        pb = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in tot]
    else:
        p = [0] * (2 * nd) if pads is None or auto_pad == "VALID" else pads
        pb = p[:nd]
        out = [full[i] - p[i] - p[nd + i] for i in range(nd)]
    y = convt_ref(x, w, b, st, dl, group, pb, out, op, None if auto_pad or output_shape else (pads or [0] * (2 * nd)))
    inits = [("W", w)] + ([("B", b)] if bias else [])
    node = helper.make_node("ConvTranspose", ["X", "W"] + (["B"] if bias else []), ["Y"], **attrs)
    case("convtranspose_" + name, [node], [("X", x)], [("Y", y)], inits, opset)


def convtranspose_cases():
    convt_case("1d_groups_dil_opad", [2, 4, 5], [4, 3, 3], group=2, strides=[3], dil=[2], pads=[1, 2], opad=[1])
    convt_case("1d_sym_pads", [1, 3, 6], [3, 2, 4], strides=[2], pads=[1, 1], opad=[1])
    convt_case("2d_groups_asym", [1, 6, 3, 4], [6, 2, 3, 2], group=3, strides=[2, 1], dil=[1, 2],
               pads=[0, 1, 1, 0], opad=[1, 0])
    convt_case("2d_sym_torch", [2, 4, 4, 3], [4, 3, 3, 3], strides=[2, 2], pads=[1, 1, 1, 1], opad=[1, 1],
               kernel_shape=True)
    convt_case("2d_depthwise", [1, 4, 3, 3], [4, 2, 2, 2], group=4, strides=[2, 2], bias=False)
    convt_case("2d_k1_stride3", [1, 2, 3, 2], [2, 3, 1, 1], strides=[3, 3])
    convt_case("2d_same_lower", [1, 2, 3, 4], [2, 3, 3, 2], strides=[2, 3], auto_pad="SAME_LOWER")
    convt_case("2d_same_upper_dil", [1, 2, 4, 3], [2, 2, 3, 3], strides=[2, 1], dil=[2, 1], auto_pad="SAME_UPPER")
    convt_case("2d_valid", [1, 2, 3, 3], [2, 2, 2, 3], strides=[2, 2], auto_pad="VALID", opad=[1, 0])
    convt_case("2d_output_shape_crop", [1, 2, 4, 4], [2, 2, 3, 3], strides=[2, 2], output_shape=[7, 6])
    convt_case("2d_output_shape_same_upper", [1, 2, 4, 4], [2, 2, 3, 3], strides=[2, 2], output_shape=[7, 6],
               auto_pad="SAME_UPPER")
    convt_case("1d_output_shape_opad", [1, 2, 5], [2, 3, 3], strides=[2], output_shape=[12], opad=[1])
    convt_case("3d_groups_opad", [1, 4, 2, 3, 2], [4, 1, 2, 3, 2], group=2, strides=[2, 1, 2], pads=[1, 0, 0, 1, 1, 0],
               opad=[1, 0, 1])
    convt_case("3d_no_bias", [2, 2, 2, 2, 3], [2, 3, 2, 2, 2], strides=[1, 2, 2], dil=[2, 1, 1], bias=False)
    convt_case("2d_f64", [1, 3, 3, 3], [3, 2, 3, 3], strides=[2, 2], pads=[1, 0, 0, 1], dtype=np.float64)
    convt_case("2d_opset1", [1, 2, 3, 3], [2, 2, 2, 2], strides=[2, 2], opset=1)
    # taps that never meet ((k - 1) * dilation < stride): the runtime writes each output once
    convt_case("2d_k2s2_unet", [2, 6, 5, 7], [6, 4, 2, 2], strides=[2, 2])
    convt_case("2d_k2s2_groups_pads", [1, 4, 4, 5], [4, 3, 2, 2], group=2, strides=[2, 2],
               pads=[1, 0, 0, 1], opad=[1, 1])
    convt_case("2d_k2s3_dil2_opad", [1, 3, 3, 4], [3, 2, 2, 2], strides=[3, 3], dil=[2, 1],
               opad=[2, 1], bias=False)
    convt_case("1d_k3s4_same_upper", [2, 2, 5], [2, 3, 3], strides=[4], auto_pad="SAME_UPPER")
    convt_case("3d_k2s2", [1, 2, 2, 3, 2], [2, 3, 2, 2, 2], strides=[2, 2, 2], pads=[0, 1, 0, 1, 0, 0])
    convt_case("2d_k2s2_f64", [1, 3, 3, 4], [3, 2, 2, 2], strides=[2, 2], dtype=np.float64)


# ------------------------------------------------------- 3-D, one depth slice in

def planar3d_cases():
    """Conv and AveragePool of depth-1 input with kernel depth 1 where the
    depth pads add output slices or shift the one there is (torch's
    Conv3d((1, 3, 3), padding=1)): the 2-D kernels must not take them.
    Reference: torch on the input padded explicitly (zeros)."""
    def padded(x, pads):
        nd = len(pads) // 2
        t = []
        for d in reversed(range(nd)):
            t += [pads[d], pads[nd + d]]
        return F.pad(torch.from_numpy(x), t)

    for name, c, m, group, strides, pads, bias in (
            ("depthwise_pads", 8, 8, 8, [1, 1, 1], [1, 1, 1, 1, 1, 1], False),
            ("dense_pads", 16, 16, 1, [1, 1, 1], [1, 1, 1, 1, 1, 1], True),
            ("dense_begin_pad_stride2", 16, 16, 1, [2, 1, 1], [1, 1, 1, 0, 1, 1], True),
            ("depthwise_end_pad", 8, 8, 8, [1, 2, 2], [0, 1, 0, 2, 1, 1], True)):
        x, w = rand(1, c, 1, 6, 7), rand(m, c // group, 1, 3, 3)
        b = rand(m)
        y = F.conv3d(padded(x, pads), torch.from_numpy(w), torch.from_numpy(b) if bias else None,
                     stride=strides, groups=group).numpy()
        node = helper.make_node("Conv", ["X", "W"] + (["B"] if bias else []), ["Y"], group=group,
                                kernel_shape=[1, 3, 3], strides=strides, pads=pads)
        inits = [("W", w)] + ([("B", b)] if bias else [])
        case("conv_3d_depth1_" + name, [node], [("X", x)], [("Y", y)], inits)
    x = rand(1, 3, 1, 5, 6)
    pads = [1, 1, 0, 1, 0, 1]
    y = F.avg_pool3d(padded(x, pads), [1, 3, 2], stride=[1, 1, 2]).numpy()
    node = helper.make_node("AveragePool", ["X"], ["Y"], kernel_shape=[1, 3, 2], strides=[1, 1, 2],
                            pads=pads, count_include_pad=1)
    case("averagepool_3d_depth1_pads", [node], [("X", x)], [("Y", y)])


# ------------------------------------------------------------------ the rest

def instancenorm_cases():
    for name, shape, eps, dt in (("3d", (2, 3, 7), 1e-5, F32), ("5d_eps", (1, 2, 3, 4, 2), 0.1, F32),
                                 ("f64", (2, 2, 3, 3), 1e-3, np.float64)):
        x, s, b = rand(*shape, dtype=dt) * 3 + 1, rand(shape[1], dtype=dt), rand(shape[1], dtype=dt)
        y = F.instance_norm(torch.from_numpy(x.astype(np.float64)), weight=torch.from_numpy(s.astype(np.float64)),
                            bias=torch.from_numpy(b.astype(np.float64)), eps=eps).numpy().astype(dt)
        node = helper.make_node("InstanceNormalization", ["X", "S", "B"], ["Y"], epsilon=eps)
        case("instancenorm_" + name, [node], [("X", x)], [("Y", y)], [("S", s), ("B", b)], 6)


def d2s(x, b, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def s2d(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def depth_space_cases():
    x = rand(2, 18, 2, 3)
    nodes = [helper.make_node("DepthToSpace", ["X"], ["dcr"], blocksize=3, mode="DCR"),
             helper.make_node("DepthToSpace", ["X"], ["crd"], blocksize=3, mode="CRD")]
    case("depthtospace_blocksize3", nodes, [("X", x)], [("dcr", d2s(x, 3, "DCR")), ("crd", d2s(x, 3, "CRD"))])
    xi = RNG.randint(-100, 100, (1, 8, 3, 2)).astype(np.int64)
    node = helper.make_node("DepthToSpace", ["X"], ["Y"], blocksize=2)
    case("depthtospace_opset1_i64", [node], [("X", xi)], [("Y", d2s(xi, 2, "DCR"))], opset=1)
    xu = RNG.randint(0, 255, (1, 4, 4, 2)).astype(np.uint8)
    case("depthtospace_default_u8", [node], [("X", xu)], [("Y", d2s(xu, 2, "DCR"))], opset=11)
    x = rand(2, 2, 6, 9)
    node = helper.make_node("SpaceToDepth", ["X"], ["Y"], blocksize=3)
    case("spacetodepth_blocksize3", [node], [("X", x)], [("Y", s2d(x, 3))])
    xi = RNG.randint(-100, 100, (1, 3, 4, 2)).astype(np.int32)
    node = helper.make_node("SpaceToDepth", ["X"], ["Y"], blocksize=2)
    case("spacetodepth_i32", [node], [("X", xi)], [("Y", s2d(xi, 2))], opset=1)


def main():
    global OUT
    if len(sys.argv) != 2:
        sys.stderr.write("usage: extra_vision.py NODEDIR\n")
        return 2
    OUT = sys.argv[1]
    torch.manual_seed(0)
    resize_cases()
    upsample_cases()
    convtranspose_cases()
    planar3d_cases()
    instancenorm_cases()
    depth_space_cases()
    return 0


if __name__ == "__main__":
    sys.exit(main())
