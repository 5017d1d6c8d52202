/*
 * schedule.c - the schedule as data: for every pipeline stage, the ordered
 * list of steps its ranks run in one iteration.
 *
 *   FWD k       the stage's forward nodes for micro-batch k
 *   RECOMPUTE k the forward nodes again, just before the backward of k
 *   BWD k       its backward nodes (with GradAccumulate when M > 1)
 *   RECV t k    a value of micro-batch k another stage computes, before
 *               the first step of k that reads it
 *   SEND t k    a value the stage computed, right after the step that did,
 *               to each other stage that reads it
 *   SYNC node   a data-parallel gradient bucket, after every backward
 *   SEND/RECV   once per step (micro -1): the gradient of a weight that
 *               several stages hold (a tied embedding), from the stage
 *               that sums it to the others, which update their copies
 *   OPT         the optimizer nodes, last
 *
 * The order of forwards, backwards and recomputes comes from pipe_order
 * (passes/pipeline.c: GPipe, 1F1B, Merak's shifted critical path); an
 * inference program runs the forwards in order.  The simulator reads the
 * same list back (sched_simulate), -emit=schedule draws it and the emitter
 * writes it as the stage's run() (backend/emit_c.c), with a memory plan
 * that holds every micro-batch in flight under it (backend/memplan.c).
 *
 * -schedule picks the kind (default: the one with the least simulated
 * step, ties to 1F1B, which holds the fewest activations).  -recompute
 * =none|all|auto: auto is Merak's stage-aware recomputation (§5.2) by
 * module (pipe-shard's subgraphs): each stage keeps the activations of its
 * last modules, as many as the paper's alpha_i and its memory allow, and
 * its recompute steps re-run the others (StageSched.keep_from,
 * sched_reruns; choose_recompute below).
 *
 * -slice (AutoPipe's micro-batch slicer, §III-C): mesh-map made every
 * micro-batch a pair of halves (Graph.slice > 0, microbatches counts the
 * halves); the order runs on pairs, each pair's forward, recompute and
 * backward one half after the other.  The first Graph.slice pairs are
 * sliced: each forward half is sent as soon as it is computed, so the next
 * stage starts after half a micro-batch; the other pairs' sends, and every
 * backward's, wait for the second half (AutoPipe's aggregated
 * communication).  The count is solved by simulation (slice_count).
 *
 * -subpipeline (Merak's sub-pipelined TMP, §5.3): mesh-map made every
 * micro-batch a pair of halves here too (Graph.subpipe); the order runs on
 * pairs, and each pair's forward, recompute and backward is one paired
 * step (SchedStep.pair on the first half's): the emitter runs the two
 * halves' nodes part by part, a part ending at each TP all-reduce
 * (sched_split), so that one half's all-reduce is in flight while the
 * other half computes.  Both halves' receives come before the pair, their
 * sends after it.  The simulator times a pair by pipe_subpipe_stage.
 *
 * Needs: stage-assign (Node.stage; Graph.stages with pp > 1), and for
 * training autodiff, grad-sync and optimizer.  Guarantees: Graph.sched
 * (one StageSched per stage, in the graph's arena), sched_kind,
 * sched_time.  Stage numbering follows emit_stage: 0 without a pipeline.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/pipeline.h"

static int
nstages(const Graph *g)
{
	return g->mesh.pp > 1 ? g->mesh.pp : 1;
}

static int
node_stage(const Graph *g, NodeId n)
{
	return g->mesh.pp > 1 ? g->nodes[n].stage : 0;
}

StepKind
sched_node_step(const Graph *g, NodeId n)
{
	const Node *nd = &g->nodes[n];
	if (nd->phase == PHASE_OPT)
		return STEP_OPT;
	if (nd->phase == PHASE_FWD)
		return STEP_FWD;
	if (nd->op == OP_AllReduce) {
		const Attr *a = ir_attr(g, n, "group");
		if (a && a->type == ATTR_STRING && strcmp(a->s, "dp") == 0)
			return STEP_SYNC;
	}
	return STEP_BWD;
}

bool
sched_split(const Graph *g, NodeId n)
{
	const Node *nd = &g->nodes[n];
	if (!g->subpipe || nd->op != OP_AllReduce || nd->region != IR_NONE || nd->nin != 1 ||
	    nd->phase == PHASE_OPT)
		return false;
	const Attr *grp = ir_attr(g, n, "group"), *mean = ir_attr(g, n, "mean");
	const Attr *async = ir_attr(g, n, "async");
	return !(grp && grp->type == ATTR_STRING && strcmp(grp->s, "dp") == 0) &&
	    !(mean && mean->i) && !(async && async->i);
}

/* Is t a value a node of another stage makes, read per micro-batch? */
static int
producer_step(const Graph *g, TensorId t, int *stage)
{
	const Tensor *x = &g->tensors[t];
	if (x->kind != TK_VALUE || x->producer == IR_NONE)
		return -1;
	*stage = node_stage(g, x->producer);
	return sched_node_step(g, x->producer);
}

typedef struct {
	Graph *g;
	SchedStep *steps;
	int n, cap;
} Builder;

static void
add(Builder *b, SchedStep st)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 64;
		b->steps = realloc(b->steps, sizeof *b->steps * b->cap);
		if (!b->steps)
			die("out of memory");
	}
	b->steps[b->n++] = st;
}

/*
 * The values stage s receives and sends.  recv[t] = the step kind before
 * which the stage first needs t (FWD or BWD), -1 if it receives nothing;
 * send[t * K + s'] = true if t goes to stage s' after the step making it.
 */
static void
boundaries(Graph *g, int s, int *recv, bool *send)
{
	int K = nstages(g);
	for (TensorId t = 0; t < g->ntensors; t++)
		recv[t] = -1;
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		int ns = node_stage(g, n), kind = sched_node_step(g, n), ps = -1;
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (t == IR_NONE || producer_step(g, t, &ps) < 0 || ps == ns)
				continue;
			int pk = producer_step(g, t, &ps);
			if (kind == STEP_OPT) {
				/* a tied weight's gradient for another stage's copy:
				 * once per step, after the producer's last backward
				 * and gradient sync, before the reader's optimizer */
				if (ns == s)
					recv[t] = STEP_OPT;
				if (ps == s)
					send[(size_t)t * K + ns] = true;
				continue;
			}
			if ((pk != STEP_FWD && pk != STEP_BWD) || (kind != STEP_FWD && kind != STEP_BWD))
				die("schedule: node '%s' (stage %d) reads '%s' of stage %d out of a %s step",
				    nd->name, ns, g->tensors[t].name, ps, pk == STEP_SYNC ? "sync" :
				    pk == STEP_OPT ? "optimizer" : "per-micro-batch");
			if (ns == s) { /* before the first step that reads it */
				if (recv[t] < 0 || kind < recv[t])
					recv[t] = kind;
			}
			if (ps == s)
				send[(size_t)t * K + ns] = true;
		}
	}
}

/*
 * Stage s's forwards, backwards and recomputes in order into o (room for
 * 3 microbatches): pipe_order's, and with -slice or -subpipeline its
 * operations on pairs of halves expanded into the halves (-slice: a
 * recompute right before the backward of its own half; -subpipeline: each
 * operation's halves side by side, as one paired step runs them).
 */
static int
stage_order(const Graph *g, int kind, int s, bool recompute, PipeOp *o)
{
	int K = nstages(g), M = g->microbatches > 1 ? g->microbatches : 1;
	if (g->slice <= 0 && !g->subpipe)
		return pipe_order(kind, K, M, s, recompute, o);
	PipeOp *pair = malloc(sizeof *pair * (3 * (M / 2) + 1));
	if (!pair)
		die("out of memory");
	int np = pipe_order(kind, K, M / 2, s, recompute, pair), n = 0;
	for (int i = 0; i < np; i++) {
		PipeOp a = pair[i];
		if (g->slice > 0 && a.recompute && i + 1 < np && pair[i + 1].backward &&
		    pair[i + 1].micro == a.micro) {
			PipeOp b = pair[++i];
			for (int h = 0; h < 2; h++) {
				o[n] = a, o[n++].micro = 2 * a.micro + h;
				o[n] = b, o[n++].micro = 2 * b.micro + h;
			}
			continue;
		}
		for (int h = 0; h < 2; h++)
			o[n] = a, o[n++].micro = 2 * a.micro + h;
	}
	free(pair);
	return n;
}

/* Does the step (what, micro k) hold its sends for the other half of its
 * pair?  With halves, every first half but the first `sliced` pairs'
 * forwards. */
static bool
deferred(const Graph *g, int sliced, StepKind what, int k)
{
	return g->slice > 0 && k % 2 == 0 && (what == STEP_BWD || k / 2 >= sliced);
}

/* The time of one half of a paired step on stage s: half the pair's (the
 * pair's sends leave with its second half). */
static double
paired(const PipeStage *st, double t, double coll)
{
	return pipe_subpipe_stage(t - coll, coll, st->ncoll) / 2;
}

/* A stage's memory with its last j of nsub modules kept (the others re-run
 * before each backward; mod[i]: module i's forward bytes its backward
 * reads, per micro-batch): what it keeps whatever happens, the in-flight
 * micro-batches' received values and kept activations, and one
 * micro-batch's re-run activations (the one whose backward runs). */
static double
stage_memory(const double *mod, int nsub, double keep, double edge, int inflight, int j)
{
	double kept = 0, all = 0;
	for (int i = 0; i < nsub; i++) {
		all += mod[i];
		if (i >= nsub - j)
			kept += mod[i];
	}
	return keep + inflight * (edge + kept) + (all - kept);
}

/*
 * The recompute choice of every stage (RECOMPUTE_*): rec[s], and
 * keep[s], the first subgraph whose activations stage s keeps (INT_MAX:
 * it re-runs every forward node).  auto is Merak's stage-aware
 * recomputation (§5.2) with pipe-shard's subgraphs as its modules: alpha_1
 * (the first stage's share of kept modules) is the largest that fits the
 * first stage's memory, tried from all its modules down one at a time (the
 * paper raises it until a run fails; we ask the cost model), and
 *   alpha_i = min(1, (s-1) alpha_1 / (s-i))  for i in [2, s-1)
 *   alpha_{s-1} = alpha_{s-2},  alpha_s = 1
 * (stages 1..s), each rounded down to whole modules and lowered further
 * where the stage's own estimate does not fit (the paper's formula assumes
 * alike stages; ours are not, and a failed run is what it would tune away).
 * A stage holding one micro-batch keeps everything.  Without a stage table
 * (no pipeline), a stage recomputes whole when its in-flight activations
 * do not fit.
 */
static void
choose_recompute(Graph *g, int mode, int kind, bool *rec, int *keep_from)
{
	int K = nstages(g), M = g->microbatches > 1 ? g->microbatches : 1;
	for (int s = 0; s < K; s++) {
		rec[s] = mode == RECOMPUTE_ALL;
		keep_from[s] = INT_MAX;
	}
	if (mode != RECOMPUTE_AUTO)
		return;
	bool table = g->stages && g->nstages == K && K > 1;
	int nsub = table ? g->nsubgraphs : 0;
	/* per stage: bytes held per micro-batch without recomputation (forward
	 * values its backward reads) by producing module, the values it
	 * receives, and what the stage keeps whatever happens (weights, their
	 * gradient, state) */
	double *keep = calloc(K, sizeof *keep), *held = calloc(K, sizeof *held);
	double *edge = calloc(K, sizeof *edge), *mod = calloc(nsub + 1, sizeof *mod);
	bool *seen = calloc(g->ntensors + 1, 1);
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead || sched_node_step(g, n) != STEP_BWD)
			continue;
		int s = node_stage(g, n);
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (t == IR_NONE || seen[t])
				continue;
			Tensor *x = &g->tensors[t];
			int ps = -1;
			if (x->kind == TK_WEIGHT || x->kind == TK_STATE) {
				seen[t] = true;
				keep[s] += 4.0 * (double)ir_nbytes(x); /* weight, gradient, state */
			} else if (producer_step(g, t, &ps) == STEP_FWD) {
				seen[t] = true;
				held[s] += (double)ir_nbytes(x);
				int sg = g->nodes[x->producer].subgraph;
				if (ps != s)
					edge[s] += (double)ir_nbytes(x);
				else if (table && sg >= 0 && sg < nsub)
					mod[sg] += (double)ir_nbytes(x);
			}
		}
	}
	int *inflight = calloc(K, sizeof *inflight);
	double *cap = calloc(K, sizeof *cap);
	for (int s = 0; s < K; s++) {
		PipeOp *o = malloc(sizeof *o * (3 * M + 1));
		int n = stage_order(g, kind, s, false, o);
		inflight[s] = pipe_inflight(o, n);
		free(o);
		cap[s] = g->cost.memory > 0 ? g->cost.memory : 1e300;
		if (g->cluster.ndevices > 0 && g->device) {
			int node, k, slot;
			ir_cluster_device(&g->cluster, g->device[s * (g->mesh.tp > 1 ? g->mesh.tp : 1)],
			    &node, &k, &slot);
			cap[s] = g->cluster.kinds[k].memory;
		}
		if (!table) /* whole stages: recompute where holding them does not fit */
			rec[s] = keep[s] + inflight[s] * held[s] > cap[s] && inflight[s] > 1;
	}
	if (table) {
		int *kept = calloc(K, sizeof *kept);
		const PipeStage *st = g->stages;
		for (int j1 = st[0].nsub; j1 >= 0; j1--) {
			double a1 = (double)j1 / st[0].nsub, prev = a1, a = a1;
			bool fits = true;
			for (int s = 0; s < K; s++) { /* the paper's stage i = s + 1 */
				int i = s + 1;
				a = i == 1 ? a1 : i == K ? 1 : i == K - 1 ? prev :
				    fmin(1, (K - 1) * a1 / (K - i));
				prev = a;
				int j = (int)floor(a * st[s].nsub + 1e-9);
				const double *m = mod + st[s].first;
				if (inflight[s] <= 1) /* recomputing frees nothing */
					j = st[s].nsub;
				while (inflight[s] > 1 && j > 0 &&
				    stage_memory(m, st[s].nsub, keep[s], edge[s], inflight[s], j) > cap[s])
					j--;
				if (s == 0 && j < j1)
					fits = false;
				kept[s] = j;
			}
			if (fits || j1 == 0)
				break;
		}
		for (int s = 0; s < K; s++) {
			rec[s] = kept[s] < st[s].nsub;
			keep_from[s] = rec[s] ? st[s].first + st[s].nsub - kept[s] : INT_MAX;
			if (rec[s] && kept[s] == 0)
				keep_from[s] = INT_MAX;
		}
		free(kept);
	}
	free(inflight);
	free(cap);
	free(keep);
	free(held);
	free(edge);
	free(mod);
	free(seen);
}

bool
sched_reruns(const Graph *g, int stage, NodeId n)
{
	const StageSched *ss = g->sched ? &g->sched[stage] : NULL;
	return !ss || ss->keep_from == INT_MAX || g->nodes[n].subgraph == IR_NONE ||
	    g->nodes[n].subgraph < ss->keep_from;
}

/* The steps of stage s under kind, with recompute where rec[] says
 * (re-running the forward nodes before subgraph keep_from) and the first
 * `sliced` pairs of halves sliced. */
static StageSched
build_stage(Graph *g, int s, int kind, bool recompute, int keep_from, int sliced)
{
	int K = nstages(g), M = g->microbatches > 1 ? g->microbatches : 1;
	bool train = g->loss != IR_NONE;
	int *recv = malloc(sizeof *recv * (g->ntensors + 1));
	bool *send = calloc((size_t)g->ntensors * K + 1, 1);
	if (!recv || !send)
		die("out of memory");
	boundaries(g, s, recv, send);
	/* values only optimizers of other stages read travel once per step */
	bool *once = calloc(g->ntensors + 1, 1);
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead || sched_node_step(g, n) != STEP_OPT)
			continue;
		for (int i = 0; i < nd->nin; i++)
			if (nd->in[i] != IR_NONE && g->tensors[nd->in[i]].producer != IR_NONE &&
			    node_stage(g, g->tensors[nd->in[i]].producer) != node_stage(g, n))
				once[nd->in[i]] = true;
	}
	bool has[STEP_COUNT] = {0};
	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead && node_stage(g, n) == s)
			has[sched_node_step(g, n)] = true;
	Builder b = {.g = g};
	PipeOp *o = malloc(sizeof *o * (3 * M + 1));
	int n = 0;
	if (train && has[STEP_BWD]) {
		n = stage_order(g, kind, s, recompute, o);
	} else {
		for (int m = 0; m < M; m++)
			o[n++] = (PipeOp){.stage = s, .micro = m};
	}
	int held[STEP_COUNT]; /* a first half whose sends wait for the second: its micro */
	for (int i = 0; i < STEP_COUNT; i++)
		held[i] = -1;
	for (int i = 0; i < n; i++) {
		int k = o[i].micro;
		StepKind what = o[i].backward ? STEP_BWD : o[i].recompute ? STEP_RECOMPUTE : STEP_FWD;
		/* -subpipeline: the first half of a pair, the second next */
		bool pair = g->subpipe && k % 2 == 0 && i + 1 < n && o[i + 1].micro == k + 1 &&
		    o[i + 1].backward == o[i].backward && o[i + 1].recompute == o[i].recompute;
		if (what != STEP_RECOMPUTE && !(g->subpipe && k % 2)) /* a pair's: before it */
			for (int m = k; m <= k + pair; m++)
				for (TensorId t = 0; t < g->ntensors; t++)
					if (recv[t] == (int)what) {
						int ps = 0;
						producer_step(g, t, &ps);
						add(&b, (SchedStep){STEP_RECV, m, t, ps, IR_NONE});
					}
		add(&b, (SchedStep){what, k, IR_NONE, -1, IR_NONE, pair});
		if (what == STEP_RECOMPUTE)
			continue;
		if (deferred(g, sliced, what, k) || pair) {
			held[what] = k;
			continue;
		}
		for (int m = held[what] >= 0 ? held[what] : k; m <= k; m++)
			for (TensorId t = 0; t < g->ntensors; t++) {
				int ps = -1;
				if (producer_step(g, t, &ps) != (int)what || ps != s || once[t])
					continue;
				for (int to = 0; to < K; to++)
					if (send[(size_t)t * K + to])
						add(&b, (SchedStep){STEP_SEND, m, t, to, IR_NONE});
			}
		held[what] = -1;
	}
	for (NodeId x = 0; x < g->nnodes; x++)
		if (!g->nodes[x].dead && node_stage(g, x) == s && sched_node_step(g, x) == STEP_SYNC)
			add(&b, (SchedStep){STEP_SYNC, -1, IR_NONE, -1, x});
	/* once per step: tied weights' gradients, out and in */
	for (TensorId t = 0; t < g->ntensors; t++) {
		int ps = -1;
		if (!once[t] || producer_step(g, t, &ps) < 0 || ps != s)
			continue;
		for (int to = 0; to < K; to++)
			if (send[(size_t)t * K + to])
				add(&b, (SchedStep){STEP_SEND, -1, t, to, IR_NONE});
	}
	for (TensorId t = 0; t < g->ntensors; t++)
		if (recv[t] == STEP_OPT) {
			int ps = 0;
			producer_step(g, t, &ps);
			add(&b, (SchedStep){STEP_RECV, -1, t, ps, IR_NONE});
		}
	if (has[STEP_OPT])
		add(&b, (SchedStep){STEP_OPT, -1, IR_NONE, -1, IR_NONE});
	StageSched st = {.nsteps = b.n, .inflight = train && has[STEP_BWD] ? pipe_inflight(o, n) : 1,
		.recompute = recompute && !(kind == SCHED_MERAK && s == K - 1)};
	st.keep_from = st.recompute ? keep_from : INT_MAX;
	st.steps = ir_alloc(&g->arena, sizeof *st.steps * (b.n + 1));
	memcpy(st.steps, b.steps, sizeof *st.steps * b.n);
	free(b.steps);
	free(o);
	free(recv);
	free(send);
	free(once);
	return st;
}

static void
build_all(Graph *g, int kind, const bool *rec, const int *keep, int sliced)
{
	int K = nstages(g);
	g->sched_kind = kind;
	g->sched = ir_alloc(&g->arena, sizeof *g->sched * K);
	ir_reindex(g);
	for (int s = 0; s < K; s++)
		g->sched[s] = build_stage(g, s, kind, rec && rec[s], keep ? keep[s] : INT_MAX, sliced);
}

void
sched_build(Graph *g, int kind, const bool *rec)
{
	build_all(g, kind, rec, NULL, g->slice);
}

/*
 * AutoPipe's Algorithm 2, by simulation: the number of pairs to slice.
 * The paper computes, with closed-form start and end times, the first
 * mb at which the next unbroken micro-batch would start no earlier if
 * it were sliced too; tapc runs its event simulator on the schedule with
 * 1, 2, ... sliced pairs (at most the stage count: past the warm-up,
 * slicing shortens no start-up) and keeps the fewest that reach the
 * least simulated step.  Builds Graph.sched with that count; *none gets
 * the step with no pair sliced (every send aggregated: the halves then
 * pipeline as whole micro-batches do).
 */
static int
slice_count(Graph *g, int kind, const bool *rec, const int *keep, double *none)
{
	int K = nstages(g), pairs = g->microbatches / 2, most = pairs < K ? pairs : K;
	build_all(g, kind, rec, keep, 0);
	*none = sched_simulate(g, NULL);
	int best = 1;
	double bt = -1;
	for (int mb = 1; mb <= most; mb++) {
		build_all(g, kind, rec, keep, mb);
		double t = sched_simulate(g, NULL);
		if (t >= 0 && (bt < 0 || t < bt * (1 - 1e-9)))
			bt = t, best = mb;
	}
	build_all(g, kind, rec, keep, best);
	return best;
}

double
sched_simulate(Graph *g, PipeSim *out)
{
	int K = nstages(g), M = g->microbatches > 1 ? g->microbatches : 1;
	if (!g->sched || K < 2 || !g->stages || g->nstages != K)
		return -1;
	bool train = g->loss != IR_NONE && g->cost.train;
	PipeOp **order = calloc(K, sizeof *order);
	int *norder = calloc(K, sizeof *norder);
	double *f = calloc(K, sizeof *f), *bw = calloc(K, sizeof *bw), *rf = calloc(K, sizeof *rf);
	for (int s = 0; s < K; s++) {
		f[s] = g->stages[s].fwd;
		bw[s] = g->stages[s].bwd;
		if (g->subpipe) { /* every forward and backward is half of a pair */
			f[s] = paired(&g->stages[s], f[s], g->stages[s].fwd_coll);
			bw[s] = paired(&g->stages[s], bw[s], g->stages[s].bwd_coll);
		}
		/* a recompute re-runs the subgraphs before keep_from */
		rf[s] = f[s];
		const PipeStage *ps = &g->stages[s];
		if (g->sched[s].keep_from != INT_MAX && g->subgraph_fwd) {
			rf[s] = 0;
			for (int j = ps->first; j < ps->first + ps->nsub && j < g->sched[s].keep_from; j++)
				rf[s] += g->subgraph_fwd[j];
		}
		order[s] = calloc(g->sched[s].nsteps + 1, sizeof **order);
		int last[2] = {-1, -1}; /* the latest forward and backward in order[s] */
		for (int i = 0; i < g->sched[s].nsteps; i++) {
			SchedStep *st = &g->sched[s].steps[i];
			if (st->kind == STEP_FWD || st->kind == STEP_BWD || st->kind == STEP_RECOMPUTE) {
				if (st->kind != STEP_RECOMPUTE)
					last[st->kind == STEP_BWD] = norder[s];
				order[s][norder[s]++] = (PipeOp){.stage = s, .micro = st->micro,
					.backward = st->kind == STEP_BWD,
					.recompute = st->kind == STEP_RECOMPUTE};
			} else if (st->kind == STEP_SEND && st->micro >= 0) {
				/* a send after a later micro-batch's step: the value
				 * leaves when that step ends */
				int ps, b = producer_step(g, st->t, &ps) == STEP_BWD;
				if (last[b] >= 0 && order[s][last[b]].micro != st->micro)
					for (int j = last[b] - 1; j >= 0; j--)
						if (order[s][j].micro == st->micro && !order[s][j].recompute &&
						    order[s][j].backward == b) {
							order[s][j].release = order[s][last[b]].micro - st->micro;
							break;
						}
			}
		}
	}
	PipeSpec p = {.nstages = K, .micro = M, .fwd = f, .bwd = train ? bw : NULL, .refwd = rf,
		.comm = g->pipe_comm, .order = (const PipeOp *const *)order, .norder = norder};
	PipeSim sim;
	double t = -1;
	if (pipe_simulate(&p, &sim)) {
		t = sim.time;
		if (out)
			*out = sim;
		else
			pipe_sim_free(&sim);
	}
	for (int s = 0; s < K; s++)
		free(order[s]);
	free(order);
	free(norder);
	free(f);
	free(bw);
	free(rf);
	return t;
}

const char *
sched_name(int kind)
{
	return kind == SCHED_GPIPE ? "gpipe" : kind == SCHED_MERAK ? "merak" : "1f1b";
}

bool
pass_schedule(Graph *g, PassCtx *cx)
{
	int K = nstages(g);
	ir_reindex(g);
	if (K > 1 && (!g->stages || g->nstages != K)) {
		diag_file(g->model, "schedule: %d pipeline stages but no stage table: run stage-assign "
		    "first", K);
		return false;
	}
	for (NodeId n = 0; n < g->nnodes && K > 1; n++)
		if (!g->nodes[n].dead && (g->nodes[n].stage < 0 || g->nodes[n].stage >= K)) {
			diag_node(g, n, "schedule: the node has no pipeline stage (run stage-assign)");
			return false;
		}
	bool *rec = calloc(K, sizeof *rec);
	int *keep = calloc(K, sizeof *keep);
	for (int k = 0; k < SCHED_COUNT; k++)
		g->sched_times[k] = -1;
	int want = cx->schedule > 0 ? cx->schedule - 1 : -1, best = SCHED_1F1B;
	double bt = -1;
	/* preference on ties: 1F1B (fewest activations), Merak, GPipe */
	static const int kinds[] = {SCHED_1F1B, SCHED_MERAK, SCHED_GPIPE};
	double none = -1;
	for (int i = 0; i < 3; i++) {
		int kind = kinds[i];
		choose_recompute(g, g->loss != IR_NONE ? cx->recompute : RECOMPUTE_NONE, kind, rec, keep);
		if (g->slice > 0 && K > 1)
			slice_count(g, kind, rec, keep, &none);
		else
			build_all(g, kind, rec, keep, g->slice);
		double t = sched_simulate(g, NULL);
		g->sched_times[kind] = t;
		if (want < 0 && t >= 0 && (bt < 0 || t < bt * (1 - 1e-9)))
			bt = t, best = kind;
	}
	int kind = want >= 0 ? want : best;
	choose_recompute(g, g->loss != IR_NONE ? cx->recompute : RECOMPUTE_NONE, kind, rec, keep);
	if (g->slice > 0 && K > 1)
		g->slice = slice_count(g, kind, rec, keep, &g->slice_none_time);
	else
		build_all(g, kind, rec, keep, g->slice);
	g->sched_time = sched_simulate(g, NULL);
	if (g->subpipe) { /* what the pairs gain: their halves timed as plain micro-batches */
		g->subpipe = false;
		g->subpipe_none_time = sched_simulate(g, NULL);
		g->subpipe = true;
	}
	free(rec);
	free(keep);
	return true;
}
