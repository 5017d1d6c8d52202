#!/bin/sh
# fuse.sh - the fusion passes (fold-qdq, fold-bn, fuse-conv, fuse-dw, fuse-se,
# fuse-matmul, fuse-norm, fuse-softmax) against the unfused graph (tapc -O0).
# (fuse-matmul also fuses the quantize_dynamic Linear: the qlinear model.)
#
# Models: small graphs made by test/fuse/gen_models.py (python3-onnx) that
# hold every pattern the passes fuse and one they must not (a BN whose Conv
# output has a second reader), plus the cnn, resnet, unet, gpt, bert and qdq
# fixtures.  Each is compiled twice: with the default pipeline (fused) and
# with the same pipeline less the fusion passes (the oracle: the unfused
# program, kernel for kernel the ONNX operators).  The unfused program's
# outputs on the same inputs become a --check reference for the fused one
# (rtol 1e-4, atol 1e-5).  The program with the larger convolutions
# (bigconvs) runs them on oneDNN where the build has it; its unfused twin
# runs with TAPRT_NO_DNNL=1, so im2col + GEMM checks oneDNN's kernels too
# (Winograd's rounding: rtol 1e-3, atol 1e-4).  The fused IR must hold the fused operators the
# patterns promise, so a pass that silently stops matching fails here too.
. "$srcdir/test/lib.sh"
cd "$srcdir"
py=${PYTHON:-/usr/bin/python3}

if ! "$py" test/fuse/gen_models.py "$tmp/gen" 2>"$tmp/err"; then
	fail "gen_models.py: $(tail -1 "$tmp/err")"
	finish
	exit 1
fi

# count OP IR: how many nodes of op OP the IR file holds
count() { grep -c "= $1 " "$2"; }
# expect NAME IR OP N: the fused IR holds exactly N nodes of OP
expect() {
	n=$(count "$3" "$2")
	if [ "$n" = "$4" ]; then pass "$1: $4 $3"; else fail "$1: $n $3, expected $4"; fi
}

# compare NAME MODEL DATADIR [tapc args]: fused program vs unfused program
compare() {
	name=$1 model=$2 data=$3
	shift 3
	for v in fused unfused; do
		p=""
		[ $v = unfused ] && p=-O0
		if ! "$TAPC" "$model" "$@" $p -o "$tmp/$name-$v" 2>"$tmp/err" ||
		    ! make -s -C "$tmp/$name-$v" >"$tmp/err" 2>&1; then
			fail "$name ($v): $(head -1 "$tmp/err")"
			return
		fi
	done
	mkdir -p "$tmp/$name-ref"
	cp "$data"/input_*.pb "$tmp/$name-ref/"
	if ! env $unfused_env "$tmp/$name-unfused/model" --inputs "$tmp/$name-ref" --outputs "$tmp/$name-ref" >"$tmp/err" 2>&1; then
		fail "$name: the unfused program failed: $(head -1 "$tmp/err")"
		return
	fi
	if "$tmp/$name-fused/model" --check "$tmp/$name-ref" $tol >"$tmp/out" 2>&1; then
		pass "$name: fused = unfused"
	else
		fail "$name: fused differs from unfused"
		cat "$tmp/out"
	fi
	"$TAPC" "$model" "$@" -emit=ir -o "$tmp/$name.ir"
}

# again NAME WHAT FLAGS ENV...: the fused program run with FLAGS under ENV
# (threads, ISA) matches the unfused one's outputs too
again() {
	name=$1 what=$2 flags=$3
	shift 3
	if env "$@" "$tmp/$name-fused/model" --check "$tmp/$name-ref" $flags >"$tmp/out" 2>&1; then
		pass "$name: fused $what = unfused"
	else
		fail "$name: fused $what differs from unfused"
		cat "$tmp/out"
	fi
}

# readback NAME: the fused IR read back compiles to the same program
readback() {
	if "$TAPC" "$tmp/$1.ir" -model="$tmp/gen/$1/model.onnx" -o "$tmp/$1-ir" 2>"$tmp/err" &&
	    make -s -C "$tmp/$1-ir" >"$tmp/err" 2>&1 &&
	    "$tmp/$1-ir/model" --check "$tmp/$1-ref" >"$tmp/out" 2>&1; then
		pass "$1: fused IR read back = unfused"
	else
		fail "$1: fused IR read back: $(head -1 "$tmp/err") $(tail -1 "$tmp/out")"
	fi
}

unfused_env= tol=
compare convs "$tmp/gen/convs/model.onnx" "$tmp/gen/convs/data"
expect convs "$tmp/convs.ir" FusedConv 4
expect convs "$tmp/convs.ir" FusedConvDw 1
expect convs "$tmp/convs.ir" BatchNormalization 1
expect convs "$tmp/convs.ir" Conv 1
unfused_env=TAPRT_NO_DNNL=1 tol="--rtol 1e-3 --atol 1e-4"
compare bigconvs "$tmp/gen/bigconvs/model.onnx" "$tmp/gen/bigconvs/data"
expect bigconvs "$tmp/bigconvs.ir" FusedConv 4
unfused_env= tol=
compare se "$tmp/gen/se/model.onnx" "$tmp/gen/se/data"
expect se "$tmp/se.ir" FusedSqueezeExcite 5
expect se "$tmp/se.ir" GlobalAveragePool 1
# the kernel's team from the smallest work up: on 2 and 3 threads the
# first two blocks' 55x61 planes split by bands of pixels, the others by
# channels; in each kind one block's FCs run on every thread (20 x 5) and
# one's in shares (72 x 64)
for t in 2 3; do
	again se "on $t threads" "--threads $t" TAPRT_PAR_MIN=1
done
# the fused IR read back (an absent B1 is an empty input)
readback se
compare mbconv "$tmp/gen/mbconv/model.onnx" "$tmp/gen/mbconv/data"
expect mbconv "$tmp/mbconv.ir" FusedConvDw 4
expect mbconv "$tmp/mbconv.ir" FusedConv 2
expect mbconv "$tmp/mbconv.ir" Conv 2
# the team from the smallest work up: the first pair's 57x43 planes split
# by bands of rows on 2 threads, in shares of each block's rows on 3 (each
# part computes its top rows of the 1x1 again), the others by blocks of
# channels
for t in 2 3; do
	again mbconv "on $t threads" "--threads $t" TAPRT_PAR_MIN=1
done
# the AVX2 and portable kernels (blocks of 8 channels)
for isa in avx2 baseline; do
	again mbconv "with TAPRT_ISA=$isa" "" TAPRT_ISA=$isa
done
readback mbconv
compare xformer "$tmp/gen/xformer/model.onnx" "$tmp/gen/xformer/data"
expect xformer "$tmp/xformer.ir" FusedLayerNorm 3
expect xformer "$tmp/xformer.ir" FusedSoftmax 3
expect xformer "$tmp/xformer.ir" Softmax 0
expect xformer "$tmp/xformer.ir" Erf 0
expect xformer "$tmp/xformer.ir" ReduceMean 0
n=$(grep -c 'FusedMatMul.*activation="Gelu"' "$tmp/xformer.ir")
check "xformer: two GELUs fused ($n)" test "$n" = 2
# the second's divisor is sqrt(2) rounded to f16 (a half model's), kept as its parameter
n=$(grep -c 'FusedMatMul.*activation="Gelu" activation_params=\[1.4140625\]' "$tmp/xformer.ir")
check "xformer: the f16 divisor as the GELU's parameter ($n)" test "$n" = 1
n=$(count FusedMatMul "$tmp/xformer.ir")
check "xformer: 11 FusedMatMul ($n)" test "$n" = 11
compare qlinear "$tmp/gen/qlinear/model.onnx" "$tmp/gen/qlinear/data"
expect qlinear "$tmp/qlinear.ir" FusedMatMulInteger 3
expect qlinear "$tmp/qlinear.ir" MatMulInteger 1
expect qlinear "$tmp/qlinear.ir" Cast 1
n=$(grep -c 'FusedMatMulInteger.*activation="Relu"' "$tmp/qlinear.ir")
check "qlinear: one Relu fused ($n)" test "$n" = 1
# the float-GEMM path for the s8 weights too, and the team
again qlinear "without oneDNN" "" TAPRT_NO_DNNL=1
again qlinear "on 2 threads" "--threads 2" TAPRT_PAR_MIN=1
readback qlinear
compare qlinear-tp2 "$tmp/gen/qlinear/model.onnx" "$tmp/gen/qlinear/data" -mesh 1x2
# the fixtures, at two ranks too: fusion runs on each rank's graph
for m in cnn resnet unet gpt bert qdq; do
	compare "$m" "test/e2e/$m/model.onnx" "test/e2e/$m/test_data_set_1" -batch=4
	compare "$m-tp2" "test/e2e/$m/model.onnx" "test/e2e/$m/test_data_set_1" -batch=4 -mesh 1x2
done
# tensor parallelism (-mesh 1x2 alone plans dp=2): each block's two
# row-parallel products take the bias and residual Adds after their
# AllReduce into their epilogue (partial=1, the first rank adds them)
for m in gpt bert; do
	compare "$m-tp" "test/e2e/$m/model.onnx" "test/e2e/$m/test_data_set_1" -batch=4 -mesh 1x2 -tp=2
	n=$(grep -c 'FusedMatMul .*partial=1' "$tmp/$m-tp.ir")
	check "$m-tp: 4 row-parallel products with their Adds ($n)" test "$n" = 4
	n=$(grep -A1 '= AllReduce ' "$tmp/$m-tp.ir" | grep -c '= Add ')
	check "$m-tp: no Add after an AllReduce ($n)" test "$n" = 0
done
expect cnn "$tmp/cnn.ir" BatchNormalization 0
expect resnet "$tmp/resnet.ir" BatchNormalization 0
expect gpt "$tmp/gpt.ir" Erf 0
# fold-qdq: the three weights' QuantizeLinear -> DequantizeLinear folded, the
# input's pair left (it quantizes a graph input, computed on every run)
expect qdq "$tmp/qdq.ir" QuantizeLinear 1
expect qdq "$tmp/qdq.ir" DequantizeLinear 1
finish
