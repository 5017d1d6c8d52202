#!/bin/sh
# netns.sh - the mpi backend across a real network stack: two "hosts" made
# of network namespaces joined by a veth pair, Open MPI's TCP transport
# between them.
#
# Needs root, ip (iproute2) and a kernel that lets this process create
# network namespaces, a runtime with MPI and Open MPI's mpirun; without
# them the test is skipped (status 77).  Host a (10.77.0.1) runs mpirun and
# ranks 0 and 1, host b (10.77.0.2) ranks 2 and 3; mpirun starts its
# daemon on b through a launch agent (plm_rsh_agent, where ssh would be)
# that runs it under `ip netns exec`.  Every process sees only its host's
# interface, so ranks on different hosts can only talk TCP over the veth
# pair; ranks on one host use shared memory.  gpt at -mesh 2x2 (each stage's
# TP group on one host, the pipeline between hosts) must pass --check at
# both batches and equal the threads backend's outputs within 1e-6, with
# each rank in its host's namespace; without the TCP transport the job must
# fail (Open MPI's error, or the set-up watchdog ending its spin) instead of
# hanging; and a
# rank killed with SIGKILL on host b must end the job within 10 s with a
# non-zero status.
. "$srcdir/test/lib.sh"
cd "$srcdir"
skip() { echo "SKIP: $*"; finish; exit 77; }
[ "${TAPRT_MPI:-no}" = yes ] && [ -n "${MPIRUN:-}" ] || skip "the runtime has no mpi backend or there is no mpirun"
[ "$(id -u)" = 0 ] && command -v ip >/dev/null 2>&1 || skip "not root, or no ip (iproute2)"
a=tapc$$a b=tapc$$b
trap 'ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$tmp"' EXIT
ip netns add $a 2>/dev/null && ip netns add $b 2>/dev/null &&
    ip link add tp$$a type veth peer name tp$$b 2>/dev/null || skip "cannot create network namespaces here"
ip link set tp$$a netns $a && ip link set tp$$b netns $b &&
ip -n $a addr add 10.77.0.1/24 dev tp$$a && ip -n $b addr add 10.77.0.2/24 dev tp$$b &&
ip -n $a link set tp$$a up && ip -n $b link set tp$$b up &&
ip -n $a link set lo up && ip -n $b link set lo up || { fail "setting up the veth pair"; finish; exit 1; }

# the launch agent: "agent HOST COMMAND..." like ssh, into the host's network
# namespace and a UTS namespace of its own: Open MPI names its shared-memory
# files after the host name, which two hosts of one machine would share
cat >"$tmp/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
10.77.0.1) ns=$a name=tapc-host-a ;;
10.77.0.2) ns=$b name=tapc-host-b ;;
*) echo "agent: no host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && \$*"
EOF
chmod +x "$tmp/agent"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# no cross-memory attach between processes: containers often forbid it
# (process_vm_readv needs ptrace rights), and Open MPI then fails transfers
export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
export LSAN_OPTIONS="suppressions=$srcdir/test/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
unset OMPI_MCA_btl
job() { # COMMAND...: the 4 ranks on the two hosts, from host a
	timeout 120 ip netns exec $a unshare --uts sh -c 'hostname tapc-host-a && exec "$@"' sh \
	    "$MPIRUN" --host 10.77.0.1:2,10.77.0.2:2 -np 4 \
	    --mca plm_rsh_agent "$tmp/agent" --mca btl "${btl:-self,vader,tcp}" \
	    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 "$@"
}
now() { date +%s.%N; }

# where each rank runs
# (Open MPI's own warnings, which a loaded machine brings, go to stderr)
job sh -c 'echo "$OMPI_COMM_WORLD_RANK $(readlink /proc/self/ns/net)"' >"$tmp/where" 2>"$tmp/where.err"
na=$(ip netns exec $a readlink /proc/self/ns/net) nb=$(ip netns exec $b readlink /proc/self/ns/net)
if [ "$(sort "$tmp/where" | tr '\n' ' ')" = "0 $na 1 $na 2 $nb 3 $nb " ]; then
	pass "ranks 0 and 1 on host a, 2 and 3 on host b"
else
	fail "ranks 0 and 1 on host a, 2 and 3 on host b"; cat "$tmp/where" "$tmp/where.err"
fi

gpt=test/e2e/gpt
for set in 0 1; do
	batch=""
	[ $set = 1 ] && batch=-batch=4
	prog="$tmp/gpt$set"
	what="gpt -mesh 2x2 test_data_set_$set across the hosts"
	if ! "$TAPC" $gpt/model.onnx -mesh 2x2 $batch -o "$prog" 2>"$tmp/err" ||
	    ! make -s -j2 -C "$prog" >"$tmp/err" 2>&1; then
		fail "$what: build: $(head -1 "$tmp/err")"
		continue
	fi
	mkdir -p "$prog/res" "$prog/ref"
	if job "$prog/model" --backend=mpi --check $gpt/test_data_set_$set --outputs "$prog/res" \
	    >"$tmp/log" 2>&1; then
		pass "$what"
	else
		fail "$what"; cat "$tmp/log"
	fi
	cp $gpt/test_data_set_$set/input_*.pb "$prog/res"/output_*.pb "$prog/ref/" 2>/dev/null
	check "... equal to the threads backend within 1e-6" \
	    "$prog/model" --check "$prog/ref" --rtol 0 --atol 1e-6
done

# without TCP the two hosts cannot reach each other: the transfers above did
# cross the network stack
# (Open MPI says so; the runtime's first collective, the split of the world
# by the planner's placement, then either fails and ends the job, or spins
# until the runtime's set-up watchdog ends it: either way, no hang)
t0=$(now)
TAPRT_MPI_SETUP_TIMEOUT=3 btl=self,vader job "$tmp/gpt0/model" --backend=mpi \
    --check $gpt/test_data_set_0 >"$tmp/log" 2>&1
rc=$?
took=$(awk -v s="$t0" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }')
check "without the TCP transport the job fails ($rc), not hangs ($took s)" \
    sh -c "[ $rc != 0 ] && [ $rc != 124 ]"
check "... because the hosts cannot reach each other" grep -qi "unable to reach" "$tmp/log"
check "... ended by Open MPI's error or, if it spun, by the watchdog" sh -c "grep -qi 'unable to reach' '$tmp/log' || grep -q 'rank [0-3]: MPI set-up did not finish in 3 s' '$tmp/log'"

# rank 3, on host b, killed in the middle of a long run
prog="$tmp/gpt0"
job "$prog/model" --backend=mpi --bench 100000000 >"$tmp/log" 2>&1 &
victim=""
for i in $(seq 100); do
	for p in $(pgrep -f "$prog/model --backend=mpi --bench" 2>/dev/null); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=3 && victim=$p
	done
	[ -n "$victim" ] && break
	sleep 0.2
done
sleep 1
t0=$(now)
[ -n "$victim" ] && kill -KILL "$victim"
wait $!
rc=$?
t1=$(now)
took=$(awk -v s="$t0" -v e="$t1" 'BEGIN { printf "%.1f", e - s }')
check "rank 3 on host b killed: found it" [ -n "$victim" ]
check "... the job ends with a non-zero status ($rc)" [ "$rc" != 0 ]
check "... within 10 s ($took s)" awk -v t="$took" 'BEGIN { exit !(t <= 10) }'
check "... a line naming the rank and the signal" grep -Eq "rank 3 .*(signal 9|Killed)" "$tmp/log"
finish
