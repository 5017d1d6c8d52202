#!/bin/sh
# mpi.sh - the mpi backend: every e2e fixture as a job of processes under mpirun.
#
# Needs a runtime built with MPI (TAPRT_MPI=yes from make check; else the
# test is skipped, status 77) and Open MPI's mpirun (MPIRUN).
#
# First test/mpi_comm checks the backend's collectives (every dtype, every
# kind of group, bit for bit against a reduction in group order) and its
# transfers (message order per tag).  Then, for each test/e2e/NAME and each
# plan of PLANS (default: 1x2 -tp=2 at batch 1, 1x2 -pp=2 at batch 4 with
# micro-batches, 2x2 and 2x4 with the degrees tapc picks at batches 1 and
# 4, and 2x4 -dp=2 -pp=2 -tp=2 at batch 4; PLANS="" skips them), the
# program is built once and run twice:
#   mpirun -np N model --backend=mpi --check test_data_set_S --outputs RES
# must pass the reference check (rtol 1e-4, atol 1e-5, as e2e.sh) with one
# line per output (only rank 0 prints), and the threads backend's run of
# the same build must give the same outputs within 1e-6 (the program's own
# --check on SET's inputs with MPI's outputs as the references, --rtol 0
# --atol 1e-6; the backends reduce alike, so they agree to the bit).
# Then the failures, each of which must end the whole job with a non-zero
# status and a line naming the rank and the cause within 10 seconds: a
# world of the wrong size (one line, from rank 0, naming both numbers), an
# input file missing, a kernel error on the ranks of one stage (a token id
# out of range), and a rank killed with SIGKILL in the middle of a run.
# Last: --backend=nccl is refused through the same table, and --help names
# mpi.  Under AddressSanitizer, LSAN_OPTIONS points at test/lsan.supp:
# Open MPI leaves its own allocations for exit to free; the suppressions
# name only Open MPI's libraries, never ours.
. "$srcdir/test/lib.sh"
cd "$srcdir"
if [ "${TAPRT_MPI:-no}" != yes ] || [ -z "${MPIRUN:-}" ]; then
	echo "SKIP: the runtime has no mpi backend (configure found no MPI) or no mpirun"
	finish
	exit 77
fi
# Debian's Open MPI; CI runs as root.  Shared memory only: one machine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# no cross-memory attach between processes: containers often forbid it
# (process_vm_readv needs ptrace rights), and Open MPI then fails transfers
export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
# Under ASan: the slow unwinder, so that a leak's stack reaches the Open MPI
# library that made it even through frames without frame pointers and
# plugins unloaded at MPI_Finalize, and the suppressions can name it
export LSAN_OPTIONS="suppressions=$srcdir/test/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
mpirun() { # NP ARGS...: a job that cannot hang the test suite
	_np=$1; shift
	timeout 120 "$MPIRUN" --oversubscribe -np "$_np" "$@"
}
ranks() { sed -n 's/^[[:space:]]*\.nranks = \([0-9]*\),/\1/p' "$1/main.c"; }
now() { date +%s.%N; }
# since START: the seconds since then; within START LIMIT: at most LIMIT
since() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f s", e - s }'; }
within() { awk -v s="$1" -v e="$2" -v l="$3" 'BEGIN { exit !(e - s <= l) }'; }

# ------------------------------------------ the collectives and transfers
# test/mpi_comm (built beside tapc) prints its failures and a summary
if mpirun 4 "$(dirname "$TAPC")/test/mpi_comm" >"$tmp/log" 2>&1; then
	pass "collectives and transfers ($(grep -E '^[0-9]+ passed' "$tmp/log"))"
else
	fail "collectives and transfers"; head -40 "$tmp/log"
fi

# --------------------------------------------------------- every fixture
for m in test/e2e/*/model.onnx; do
	dir=$(dirname "$m")
	name=$(basename "$dir")
	args=$(fixture_args "$dir")
	for run in ${PLANS-1x2:0:-tp=2 1x2:1:-pp=2 2x2:0: 2x2:1: 2x4:0: 2x4:1: 2x4:1:-dp=2,-pp=2,-tp=2}; do
		mesh=${run%%:*}; rest=${run#*:}; set=${rest%%:*}; flags=$(echo "${rest#*:}" | tr , ' ')
		batch=""
		[ "$set" = 1 ] && batch=-batch=4
		out="$tmp/$name-$mesh-$set"
		what="$name mesh $mesh${flags:+ $flags} test_data_set_$set"
		if ! "$TAPC" "$m" $args -mesh "$mesh" $flags $batch -o "$out" 2>"$tmp/err"; then
			fail "$what: tapc: $(head -1 "$tmp/err")"
			continue
		fi
		what="$what ($(sed -n 's/.*"degrees": {"dp": \([0-9]*\), "tp": \([0-9]*\), "pp": \([0-9]*\), "microbatches": \([0-9]*\).*/dp \1 tp \2 pp \3 x\4/p' "$out/plan.json"))"
		if ! make -s -j2 -C "$out" >"$tmp/err" 2>&1; then
			fail "$what: make"; head -5 "$tmp/err"
			continue
		fi
		set_dir="$dir/test_data_set_$set"
		nout=$(ls "$set_dir"/output_*.pb | wc -l)
		mkdir -p "$out/res" "$out/ref"
		if mpirun "$(ranks "$out")" "$out/model" --backend=mpi --check "$set_dir" \
		    --rtol 1e-4 --atol 1e-5 --outputs "$out/res" >"$tmp/log" 2>&1 &&
		    [ "$(grep -c '^output ' "$tmp/log")" = "$nout" ]; then
			pass "$what: mpi"
		else
			fail "$what: mpi"; cat "$tmp/log"
		fi
		sed 's/^/    /' "$tmp/log"
		cp "$set_dir"/input_*.pb "$out/ref/"
		cp "$out"/res/output_*.pb "$out/ref/" 2>/dev/null
		if "$out/model" --check "$out/ref" --rtol 0 --atol 1e-6 >"$tmp/log" 2>&1; then
			pass "$what: threads equal mpi within 1e-6"
		else
			fail "$what: threads equal mpi within 1e-6"; cat "$tmp/log"
		fi
		rm -rf "$out"
	done
done

# ------------------------------------------------ the planner's placement
# A cluster of unlike nodes (one of 4 fast devices, two of 1 slow), where
# mesh-map places the ranks on devices out of rank order: each process
# (world rank w) must run the rank placed on device w, as plan.json and
# TAPRT_SHOW_PLACEMENT say, and the job must still run the model.
cat >"$tmp/cluster.json" <<'EOF'
{"latency": 1e-5, "nodes": [
  {"name": "fast", "devices": 4, "flops": 1e12, "memory": 1e10, "intra_bw": 1e10, "inter_bw": 1e9},
  {"name": "slow", "count": 2, "devices": 1, "flops": 1e11, "memory": 1e10, "inter_bw": 1e9}]}
EOF
out="$tmp/placed"
what="gpt on a 6-device cluster of two kinds, batch 4"
if "$TAPC" test/e2e/gpt/model.onnx -cluster="$tmp/cluster.json" -batch=4 -o "$out" \
    2>"$tmp/err" && make -s -j2 -C "$out" >>"$tmp/err" 2>&1; then
	/usr/bin/python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["ranks"]:
    print("rank %d on device %d" % (r["rank"], r["device"]))' "$out/plan.json" | sort >"$tmp/want"
	check "$what: the placement is not rank order" sh -c "grep -qv 'rank \\([0-9]*\\) on device \\1\$' '$tmp/want'"
	if TAPRT_SHOW_PLACEMENT=1 mpirun 6 "$out/model" --backend=mpi --check test/e2e/gpt/test_data_set_1 \
	    >"$tmp/log" 2>&1; then
		pass "$what: mpi"
	else
		fail "$what: mpi"; cat "$tmp/log"
	fi
	sed -n 's/.*: \(rank [0-9]* on device [0-9]*\) (mpi host .*/\1/p' "$tmp/log" | sort >"$tmp/got"
	check "$what: each process runs the rank placed on its device" cmp -s "$tmp/want" "$tmp/got"
else
	fail "$what: $(head -1 "$tmp/err")"
fi
rm -rf "$out"

# ------------------------------------------------------------ failures
gpt=test/e2e/gpt
prog="$tmp/gpt"
"$TAPC" $gpt/model.onnx -mesh 2x2 -o "$prog" 2>"$tmp/err" && make -s -j2 -C "$prog" >"$tmp/err" 2>&1 ||
	{ fail "failures: cannot build gpt 2x2: $(head -1 "$tmp/err")"; finish; exit 1; }

# a world of 3 processes for a program of 4 ranks
t0=$(now)
mpirun 3 "$prog/model" --backend=mpi --check $gpt/test_data_set_0 >"$tmp/log" 2>&1
rc=$?
t1=$(now); took=$(since "$t0")
check "wrong world size: exit status 1 (got $rc)" [ "$rc" = 1 ]
check "... one line from the program, naming both numbers" \
    [ "$(grep -c "^$prog/model: " "$tmp/log")" = 1 ]
check "... which says so" grep -q "the program has 4 ranks, but MPI started 3 processes" "$tmp/log"
check "... within 10 s ($took)" within "$t0" "$t1" 10

# an input file that is not there: the ranks that read it say so, the job ends
mkdir -p "$tmp/noinput"
t0=$(now)
mpirun 4 "$prog/model" --backend=mpi --inputs "$tmp/noinput" >"$tmp/log" 2>&1
rc=$?
t1=$(now); took=$(since "$t0")
check "missing input: non-zero status ($rc)" [ "$rc" != 0 ]
check "... a line naming the rank and the file" \
    grep -Eq "^$prog/model: rank [01]: .*/noinput/input_0.pb: No such file" "$tmp/log"
check "... within 10 s ($took)" within "$t0" "$t1" 10

# a kernel error: token ids out of range make stage 0's Gather fail, while
# stage 1 waits for it; 16 int64 ids of 2^63-1 (dims 1 16, dtype 7, raw_data)
mkdir -p "$tmp/badids"
{
	printf '\010\001\010\020\020\007\112\200\001'
	i=0
	while [ $i -lt 16 ]; do printf '\377\377\377\377\377\377\377\177'; i=$((i + 1)); done
} >"$tmp/badids/input_0.pb"
t0=$(now)
mpirun 4 "$prog/model" --backend=mpi --inputs "$tmp/badids" >"$tmp/log" 2>&1
rc=$?
t1=$(now); took=$(since "$t0")
check "kernel error: non-zero status ($rc)" [ "$rc" != 0 ]
check "... a line naming the rank and the node" \
    grep -Eq "^$prog/model: rank [01]: node '.*' \(Gather\)" "$tmp/log"
check "... within 10 s ($took)" within "$t0" "$t1" 10

# a rank killed in the middle of a long run
"$MPIRUN" --oversubscribe -np 4 "$prog/model" --backend=mpi --bench 100000000 --inputs $gpt/test_data_set_0 \
    >"$tmp/log" 2>&1 &
job=$!
victim=""
for i in $(seq 100); do # wait for the 4 processes, then for them to run
	for p in $(pgrep -P $job 2>/dev/null); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
	done
	[ -n "$victim" ] && [ "$(pgrep -c -P $job)" = 4 ] && break
	sleep 0.2
done
sleep 1
t0=$(now)
[ -n "$victim" ] && kill -KILL "$victim"
( sleep 30; kill $job 2>/dev/null ) & # never hang the suite
guard=$!
wait $job
rc=$?
kill $guard 2>/dev/null
t1=$(now); took=$(since "$t0")
check "rank 1 killed: found its process" [ -n "$victim" ]
check "... the job ends with a non-zero status ($rc)" [ "$rc" != 0 ]
check "... within 10 s ($took)" within "$t0" "$t1" 10
check "... a line naming the rank and the signal" grep -Eq "rank 1 .*(signal 9|Killed)" "$tmp/log"
sed 's/^/    /' "$tmp/log" | grep -v '^    *$' | head -8

# the same table answers for the backends it does not have
"$prog/model" --backend=nccl --check $gpt/test_data_set_0 >"$tmp/log" 2>&1
rc=$?
check "--backend=nccl: exit status 1 ($rc)" [ "$rc" = 1 ]
check "... says it is not built" grep -q "backend 'nccl' is not built into this runtime" "$tmp/log"
"$prog/model" --help >"$tmp/log" 2>&1
check "--help names the mpi backend" grep -q "built into this runtime: threads, mpi" "$tmp/log"
finish
