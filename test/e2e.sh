#!/bin/sh
# e2e.sh - every fixture compiled, built and checked against its reference.
#
# For each test/e2e/NAME and each mesh of MESHES (default 1x1 1x2 1x4 2x2
# 2x4 2x8), with the plan tapc chooses (mesh-map's search: at batch 1
# tensor and pipeline parallelism, at batch 4 replicas too): `tapc
# model.onnx -mesh M -o OUT`, `make -C OUT`, `OUT/model --check
# test_data_set_0` (batch 1, the default) and, recompiled with -batch=4,
# `--check test_data_set_1`, at rtol 1e-4 / atol 1e-5 (at 1x1 also with
# `--threads 2`: the kernels' intra-op threads, with TAPRT_PAR_MIN=1 so
# that every OpenMP loop runs split).  Then pipelines
# forced where the search picks other degrees:
# -pp=2 on 1x2 and -pp=4 on 1x4 (or as many stages as the
# model has subgraphs, when fewer: 1xN -pp=N), both batches; and the 3D
# plan -dp=2 -pp=2 -tp=2 on 2x4 at batch 4 (two replicas of two micro-
# batches), and AutoPipe's slicer, -pp=2 -microbatches=2 -slice at batch 4
# (four halves of one row).  The references come from torch (test/e2e/gen_fixtures.py),
# cross-checked with onnxruntime, so every multi-rank program is checked
# against the framework, not against tapc's one-rank output.  A fixture's
# args file (p2o: -dim for a symbolic width) goes with every compilation.
# Then, since
# the cost model picks only one plan per fixture, RANDOM_SEEDS (default 1
# 2 3) more plans per mesh of RANDOM_MESHES (default 1x2 1x4), drawn
# uniformly from the valid ones (-tp-random=SEED), must pass the same
# check: every sharding pattern the router accepts has to compute the
# model.  Then the static-batch exports (below), then five fixtures as float16 models
# (below).  Last, plans forced by
# editing tp-plan's dump (the traps of
# docs/tensor-parallel.md: a tied table split two ways, a split residual
# stream reaching LayerNorm) are rewritten, built and checked.
. "$srcdir/test/lib.sh"
cd "$srcdir"
for m in test/e2e/*/model.onnx; do
	dir=$(dirname "$m")
	name=$(basename "$dir")
	# the most stages this model has (stage-assign: "cuts into only N")
	pp4=4
	args=$(fixture_args "$dir")
	if ! "$TAPC" "$m" $args -mesh 1x4 -pp=4 -emit=plan -o /dev/null 2>"$tmp/err"; then
		pp4=$(sed -n 's/.*cuts into only \([0-9]*\) pipeline subgraphs.*/\1/p' "$tmp/err")
		[ -n "$pp4" ] || { fail "$name: -pp=4: $(head -1 "$tmp/err")"; pp4=4; }
	fi
	runs=""
	for mesh in ${MESHES:-1x1 1x2 1x4 2x2 2x4 2x8}; do
		runs="$runs $mesh:0:0: $mesh:1:0:"
	done
	runs="$runs 1x2:0:0:-pp=2 1x2:1:0:-pp=2 1x$pp4:0:0:-pp=$pp4 1x$pp4:1:0:-pp=$pp4"
	runs="$runs 2x4:1:0:-dp=2,-pp=2,-tp=2 1x2:1:0:-pp=2,-microbatches=2,-slice"
	for mesh in ${RANDOM_MESHES:-1x2 1x4}; do
		for seed in ${RANDOM_SEEDS:-1 2 3}; do
			runs="$runs $mesh:0:$seed:"
		done
	done
	for run in $runs; do
		mesh=${run%%:*}; rest=${run#*:}; set=${rest%%:*}; rest=${rest#*:}
		seed=${rest%%:*}; flags=$(echo "${rest#*:}" | tr , ' ')
		out="$tmp/$name-$mesh-$set-$seed"
		batch=""
		[ $set = 1 ] && batch=-batch=4
		random=""
		[ $seed != 0 ] && random=-tp-random=$seed
		what="$name mesh $mesh${flags:+ $flags} test_data_set_$set${random:+ random plan $seed}"
		if ! "$TAPC" "$m" $args -mesh "$mesh" $flags $batch $random -o "$out" 2>"$tmp/err"; then
			fail "$what: tapc: $(head -1 "$tmp/err")"
			continue
		fi
		what="$what ($(sed -n 's/.*"degrees": {"dp": \([0-9]*\), "tp": \([0-9]*\), "pp": \([0-9]*\), "microbatches": \([0-9]*\).*/dp \1 tp \2 pp \3 x\4/p' "$out/plan.json"))"
		if ! make -s -C "$out" >"$tmp/err" 2>&1; then
			fail "$what: make"; head -5 "$tmp/err"
			continue
		fi
		if "$out/model" --check "$dir/test_data_set_$set" --rtol 1e-4 --atol 1e-5 >"$tmp/log" 2>&1; then
			pass "$what"
		else
			fail "$what"; cat "$tmp/log"
		fi
		sed 's/^/    /' "$tmp/log"
		# the kernels' intra-op threads (OpenMP loops, the GEMM and
		# oneDNN on the rank's team): the one-rank program again
		if [ "$mesh" = 1x1 ] && [ -z "$flags$random" ]; then
			if TAPRT_PAR_MIN=1 "$out/model" --threads 2 --check "$dir/test_data_set_$set" --rtol 1e-4 \
			    --atol 1e-5 >"$tmp/log" 2>&1; then
				pass "$what --threads 2"
			else
				fail "$what --threads 2"; cat "$tmp/log"
			fi
		fi
		rm -rf "$out"
	done
done

# Static-batch exports (test/e2e/NAME/static/: torch.onnx.export's default,
# no dynamic axes, the export batch B0 baked into Reshape targets, Expand
# shapes, zero states): compiled at each batch of NAME/static/batches
# (B0, 2*B0, 1; tapc re-specializes the model, ir/batch.c) and checked
# against torch's outputs at that batch; then at 2*B0 with -pp=2 (micro-
# batches of another size again), -dp=2, and the default degrees of 2x2
# and 2x4.
for m in test/e2e/*/static/model.onnx; do
	dir=$(dirname "$m")
	name=$(basename "$(dirname "$dir")")/static
	set -- $(cat "$dir/batches")
	runs="$1:0: $2:1: $3:2: $2:1:-pp=2 $2:1:-dp=2 $2:1:-mesh,2x2 $2:1:-mesh,2x4"
	for run in $runs; do
		b=${run%%:*}; rest=${run#*:}; set=${rest%%:*}; flags=$(echo "${rest#*:}" | tr , ' ')
		out="$tmp/static-$(echo "$name" | tr / -)-$b-$set"
		what="$name -batch=$b${flags:+ $flags} test_data_set_$set"
		if ! "$TAPC" "$m" -batch="$b" $flags -o "$out" 2>"$tmp/err"; then
			fail "$what: tapc: $(head -1 "$tmp/err")"
			continue
		fi
		what="$what ($(sed -n 's/.*"degrees": {"dp": \([0-9]*\), "tp": \([0-9]*\), "pp": \([0-9]*\), "microbatches": \([0-9]*\).*/dp \1 tp \2 pp \3 x\4/p' "$out/plan.json"))"
		if ! make -s -C "$out" >"$tmp/err" 2>&1; then
			fail "$what: make"; head -5 "$tmp/err"
			continue
		fi
		if "$out/model" --check "$dir/test_data_set_$set" --rtol 1e-4 --atol 1e-5 >"$tmp/log" 2>&1; then
			pass "$what"
		else
			fail "$what"; cat "$tmp/log"
		fi
		sed 's/^/    /' "$tmp/log"
		rm -rf "$out"
	done
done

# compile_check WHAT OUT DATASET RTOL ATOL TAPC-ARGS...: tapc TAPC-ARGS -o OUT, make, and
# OUT/model --check DATASET at RTOL/ATOL; one pass or fail for WHAT; OUT removed after
compile_check() {
	what=$1 out=$2 data=$3 rtol=$4 atol=$5
	shift 5
	if ! "$TAPC" "$@" -o "$out" 2>"$tmp/err"; then
		fail "$what: tapc: $(head -1 "$tmp/err")"
	elif ! make -s -C "$out" >"$tmp/err" 2>&1; then
		fail "$what: make"; head -5 "$tmp/err"
	elif "$out/model" --check "$data" --rtol "$rtol" --atol "$atol" >"$tmp/log" 2>&1; then
		pass "$what"
	else
		fail "$what"; cat "$tmp/log"
	fi
	rm -rf "$out"
}

# Half precision: gpt, bert, cnn, resnet and mlp as the float16 models a converter makes
# (test/e2e/to_f16.py: weights, constants, inputs and outputs f16), so that every node is
# computed in f32 by legalize-half (weights converted at compile time, f32 between the nodes,
# then fused): at 1x1 and 1x2 (the plan tapc picks) at batch 1, and gpt and resnet with -pp=2
# at batch 4 (halves sent between stages), and gpt, bert and cnn with -half=exact at 1x1 (each
# node's result rounded to f16, unfused), against torch's float32 outputs rounded to float16,
# at rtol and atol 2e-2 (the half programs differ from them by up to 0.012, the half weights'
# and, with -half=exact, activations' rounding).
py=${PYTHON:-/usr/bin/python3}
for name in gpt bert cnn resnet mlp; do
	h="$tmp/f16-$name"
	if ! "$py" test/e2e/to_f16.py "test/e2e/$name/model.onnx" "$h" \
	    "test/e2e/$name/test_data_set_0" "test/e2e/$name/test_data_set_1" 2>"$tmp/err"; then
		fail "$name f16: to_f16.py: $(tail -1 "$tmp/err")"
		continue
	fi
	runs="1x1::0 1x2::0"
	case $name in gpt|resnet) runs="$runs 1x2:-pp=2,-batch=4:1" ;; esac
	case $name in gpt|bert|cnn) runs="$runs 1x1:-half=exact:0" ;; esac
	for run in $runs; do
		mesh=${run%%:*}; rest=${run#*:}; flags=$(echo "${rest%%:*}" | tr , ' '); set=${rest#*:}
		compile_check "$name f16 -mesh $mesh${flags:+ $flags} test_data_set_$set" \
		    "$tmp/f16-$name-out" "$h/test_data_set_$set" 2e-2 2e-2 \
		    "$h/model.onnx" -mesh "$mesh" $flags
	done
done

# The random operators (test/e2e/random_ops.py): their outputs' statistics at batch 4 on one
# rank (and a second run's values new ones), and at batch 8 re-specialized on two
# data-parallel replicas (each its own draws); test/unit's rt_elementwise has the streams'
# rules and the distributions at 200,000 elements.
r="$tmp/random"
if "$py" test/e2e/random_ops.py gen "$r" 2>"$tmp/err" && "$py" test/e2e/random_ops.py inputs "$r" 8; then
	for run in "1x1 4 in" "1x2 8 in8 -dp=2"; do
		set -- $run
		mesh=$1 b=$2 ins=$3; shift 3
		what="random operators -mesh $mesh -batch=$b $*"
		rm -rf "$r/prog" "$r/o1" "$r/o2" && mkdir "$r/o1" "$r/o2"
		if ! "$TAPC" "$r/model.onnx" -mesh "$mesh" -batch="$b" "$@" -o "$r/prog" 2>"$tmp/err"; then
			fail "$what: tapc: $(head -1 "$tmp/err")"
		elif ! make -s -C "$r/prog" >"$tmp/err" 2>&1; then
			fail "$what: make"; head -5 "$tmp/err"
		elif "$r/prog/model" --inputs "$r/$ins" --outputs "$r/o1" >"$tmp/log" 2>&1 &&
		    "$r/prog/model" --inputs "$r/$ins" --outputs "$r/o2" --bench 2 --warmup 0 >>"$tmp/log" 2>&1 &&
		    "$py" test/e2e/random_ops.py check "$r/o1" "$b" "$r/o2" >>"$tmp/log" 2>&1; then
			pass "$what"
		else
			fail "$what"; cat "$tmp/log"
		fi
	done
else
	fail "random operators: random_ops.py: $(tail -1 "$tmp/err")"
fi

# forced FIXTURE MESH SED-SCRIPT: edit the tp= patterns of tp-plan's dump
forced() {
	name=$1 mesh=$2 edit=$3
	what="$name mesh $mesh forced plan: $edit"
	out="$tmp/forced-$name-$mesh"
	if ! "$TAPC" "test/e2e/$name/model.onnx" -mesh "$mesh" -stop-after=tp-plan -emit=ir \
	    -o "$tmp/planned.ir" 2>"$tmp/err"; then
		fail "$what: tapc: $(head -1 "$tmp/err")"
		return
	fi
	sed "$edit" "$tmp/planned.ir" >"$tmp/forced.ir"
	if cmp -s "$tmp/planned.ir" "$tmp/forced.ir"; then
		fail "$what: the edit changed nothing"
	else
		compile_check "$what" "$out" "test/e2e/$name/test_data_set_0" 1e-4 1e-5 \
		    "$tmp/forced.ir" -passes=tp-rewrite,verify
	fi
}
# the recurrent layers stay whole: a column-split projection reaches the LSTM
# split (gathered first), the head's row split takes a slice of the RNN's output
forced rnn 1x2 '/# \/proj_in\/MatMul$/s/tp=R/tp=S1/; /# \/head\/MatMul$/s/tp=R/tp=S0/'
# the tied table: the embedding split by hidden, the output projection by vocabulary
forced tied 1x2 '/# \/wte\/Gather$/s/tp=R/tp=S1/; /# \/Gemm$/s/tp=R/tp=S0/'
forced tied 1x4 '/# \/wte\/Gather$/s/tp=R/tp=S1/; /# \/Gemm$/s/tp=R/tp=S0/'
# the Gemms' contraction split: the product is summed before the bias
forced tied 1x2 '/# \/fc1\/Gemm$/s/tp=R/tp=S1/; /# \/fc2\/Gemm$/s/tp=R/tp=S1/'
# a column-split attention projection: the residual stream reaches ln_2 split
forced gpt 1x2 '/c_proj\/MatMul$/s/tp=S0/tp=S1/'
forced gpt 1x4 '/c_proj\/MatMul$/s/tp=S0/tp=S1/'
finish
