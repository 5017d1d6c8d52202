/*
 * stage_assign.c - group pipe-shard's subgraphs into pipeline stages (AMP
 * §4.3 and Algorithm 2, AutoPipe §III-B), and keep the assignment the
 * pipeline simulator ranks best.
 *
 * Needs: pipe-shard (Node.subgraph); Graph.mesh, microbatches and device
 * (mesh-map's plan; without a placement, the default one); tp-rewrite when
 * TP is on (costs are then a rank's: local shapes, its collectives; mesh-map
 * made the shapes a micro-batch's).  A stage's time is its FLOPs at the
 * slowest device of its TP group plus its collectives on the group's
 * slowest ring link, with the rates of costmodel.c (backward: twice the
 * forward FLOPs and every collective again for objective=train, none for
 * infer).  A cut costs the bytes crossing it over the link between the
 * two stages' devices, plus latency.  Candidates: pipe_dp_stages (AMP's
 * pipe_dp with each stage on its own devices, within their memory),
 * AutoPipe's planner on the stages' mean rates, and Megatron's even split
 * of the blocks (reported as the baseline); the simulator (1F1B for
 * train, forward-only for infer) picks.
 *
 * Guarantees: Node.stage on every node, stages contiguous in node order and
 * non-empty; Graph.stages, Graph.subgraph_fwd and the pipe_* fields filled.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/costmodel.h"
#include "passes/pipeline.h"

/* Per subgraph: FLOPs, TP ring bytes, collectives, operator calls, bytes
 * the operators stream. */
#define NCOMP 5

/* Ring bytes of a collective node (eq. 1 without the link: all-reduce
 * 2(n-1)/n of the tensor, gathers and scatters (n-1)/n); 0 for others. */
static double
ring_bytes(Graph *g, NodeId n, int tp)
{
	Node *nd = &g->nodes[n];
	if (!ir_op_is_comm(nd->op) || nd->op == OP_Shard)
		return 0;
	Tensor *big = &g->tensors[nd->op == OP_ReduceScatter ? nd->in[0] : nd->out[0]];
	double f = (double)(tp - 1) / tp * (nd->op == OP_AllReduce ? 2 : 1);
	return f * (double)ir_nbytes(big);
}

/* The problem a pipeline's stages pose: per subgraph a rank's forward
 * FLOPs, TP ring bytes, collectives and operator calls; per stage forward
 * and backward
 * seconds per unit on its devices; cut costs; memory. */
typedef struct {
	int n, k, M;
	double *item;                   /* [n * NCOMP] */
	double *fcoef, *bcoef, *coef;   /* [k * NCOMP]: forward, backward, both */
	double *cut;                    /* [n * (k-1)] */
	double *mi, *mc, *cap;          /* memory: [n * 2], [k * 2], [k] */
	double comm;                    /* mean transfer, for the simulator */
} Stages;

static void
stage_times(const Stages *S, const int *cut, double *f, double *b)
{
	for (int j = 0; j < S->k; j++) {
		f[j] = b[j] = 0;
		for (int i = cut[j]; i < cut[j + 1]; i++)
			for (int c = 0; c < NCOMP; c++) {
				f[j] += S->fcoef[j * NCOMP + c] * S->item[i * NCOMP + c];
				b[j] += S->bcoef[j * NCOMP + c] * S->item[i * NCOMP + c];
			}
	}
}

static bool
fits_memory(const Stages *S, const int *cut)
{
	for (int j = 0; j < S->k; j++) {
		double m = 0;
		for (int i = cut[j]; i < cut[j + 1]; i++)
			m += S->mc[j * 2] * S->mi[i * 2] + S->mc[j * 2 + 1] * S->mi[i * 2 + 1];
		if (m > S->cap[j])
			return false;
	}
	return true;
}

/* The simulated iteration of a cut (1F1B, or forward only without bcoef). */
static double
simulate(const Stages *S, const int *cut, bool train)
{
	double *f = calloc(S->k, sizeof *f), *b = calloc(S->k, sizeof *b);
	stage_times(S, cut, f, b);
	PipeSpec p = {.nstages = S->k, .micro = S->M, .fwd = f, .bwd = train ? b : NULL,
		.comm = S->comm};
	PipeSim sim;
	if (!pipe_simulate(&p, &sim))
		die("stage-assign: bad pipeline");
	double t = sim.time;
	pipe_sim_free(&sim);
	free(f);
	free(b);
	return t;
}

/* Standard deviation of the stage times (forward + backward) of a cut. */
static double
stage_std(const Stages *S, const int *cut)
{
	int k = S->k;
	double *f = calloc(k, sizeof *f), *b = calloc(k, sizeof *b), mean = 0, var = 0;
	stage_times(S, cut, f, b);
	for (int s = 0; s < k; s++)
		mean += (f[s] + b[s]) / k;
	for (int s = 0; s < k; s++)
		var += (f[s] + b[s] - mean) * (f[s] + b[s] - mean) / k;
	free(f);
	free(b);
	return sqrt(var);
}

/* Megatron: the blocks (template instances) split evenly, what comes before
 * the first with the first stage, what comes after the last with the last.
 * False if there are fewer blocks than stages. */
static bool
even_split(Graph *g, int nsub, int k, int *cut)
{
	int *blk = calloc(nsub + 1, sizeof *blk), nblk = 0, last = -1;
	int *inst = ir_group_blocks(g, &nblk);
	/* each subgraph's block: that of its first node in a block, else the last seen */
	for (int j = 0; j < nsub; j++)
		blk[j] = -1;
	for (NodeId n = 0; n < g->nnodes; n++) {
		int gr = g->nodes[n].group, j = g->nodes[n].subgraph;
		int b = gr >= 0 && gr < g->ngroups ? inst[gr] : -1;
		if (b >= 0 && blk[j] < 0)
			blk[j] = b;
	}
	for (int j = 0; j < nsub; j++)
		blk[j] = blk[j] >= 0 ? (last = blk[j]) : last;
	bool ok = nblk >= k;
	cut[0] = 0;
	for (int s = 1; s < k && ok; s++) {
		int want = s * nblk / k; /* the first block of stage s */
		int j = 0;
		while (j < nsub && (blk[j] < 0 || blk[j] < want))
			j++;
		cut[s] = j;
		ok = j > cut[s - 1] && j < nsub;
	}
	cut[k] = nsub;
	free(blk);
	free(inst);
	return ok;
}

bool
pass_stage_assign(Graph *g, PassCtx *cx)
{
	int k = g->mesh.pp;
	if (k <= 1)
		return true;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int nsub = 0;
	for (NodeId n = 0; n < g->nnodes; n++) {
		if (g->nodes[n].subgraph == IR_NONE) {
			diag_node(g, n, "stage-assign needs pipe-shard's subgraphs: run pipe-shard first");
			return false;
		}
		if (g->nodes[n].subgraph + 1 > nsub)
			nsub = g->nodes[n].subgraph + 1;
	}
	if (nsub < k) {
		diag_file(g->model, "-pp=%d: the model cuts into only %d pipeline subgraph%s", k, nsub,
		    nsub == 1 ? "" : "s");
		return false;
	}
	int tp = g->mesh.tp > 1 ? g->mesh.tp : 1, dp = g->mesh.dp > 1 ? g->mesh.dp : 1;
	int M = g->microbatches > 0 ? g->microbatches : 1, ranks = dp * tp * k;
	const CostModel *cm = &g->cost;
	bool train = cm->train;
	/* the devices: mesh-map's placement, or the default one */
	Cluster own;
	const Cluster *cl = &g->cluster;
	if (cl->ndevices < ranks) {
		ir_cluster_mesh(&own, 1, ranks, cm);
		cl = &own;
	}
	int *dev = g->device;
	if (!dev) {
		dev = ir_alloc(&g->arena, sizeof *dev * ranks);
		ir_place(cl, dp, tp, k, 0, dev);
	}
	StageRate *r = calloc(k, sizeof *r);
	cm_rates(cl, dev, dp, tp, k, -1, r);

	/* per subgraph, one rank's: FLOPs, ring bytes, collectives, weights,
	 * activations, bytes crossing the cut after it */
	Stages S = {.n = nsub, .k = k, .M = M};
	S.item = calloc((size_t)nsub * NCOMP, sizeof *S.item);
	S.mi = calloc((size_t)nsub * 2, sizeof *S.mi);
	double *cross = calloc(nsub, sizeof *cross);
	int64_t *wbytes = calloc(nsub, sizeof *wbytes);
	ir_reindex(g);
	int *counted = calloc(g->ntensors + 1, sizeof *counted);
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		int j = nd->subgraph;
		if (nd->phase != PHASE_FWD)
			continue; /* the backward is modelled from the forward, below */
		S.item[j * NCOMP] += (double)ir_node_flops(g, n);
		S.item[j * NCOMP + 1] += ring_bytes(g, n, tp);
		S.item[j * NCOMP + 2] += ir_op_is_comm(nd->op) && nd->op != OP_Shard;
		bool call = !ir_op_is_view(nd->op) && !ir_op_is_comm(nd->op);
		S.item[j * NCOMP + 3] += call;
		S.item[j * NCOMP + 4] += call ? (double)ir_node_bytes(g, n) : 0;
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (t != IR_NONE && g->tensors[t].kind == TK_WEIGHT && counted[t] != j + 1) {
				counted[t] = j + 1;
				wbytes[j] += ir_nbytes(&g->tensors[t]);
			}
		}
		for (int o = 0; o < nd->nout; o++) {
			TensorId t = nd->out[o];
			int last = j;
			if (t == IR_NONE)
				continue;
			S.mi[j * 2 + 1] += (double)ir_nbytes(&g->tensors[t]);
			for (int u = 0; u < g->nusers[t]; u++)
				if (g->nodes[g->users[t][u]].subgraph > last)
					last = g->nodes[g->users[t][u]].subgraph;
			for (int c = j; c < last; c++) /* crosses the cuts after j .. last-1 */
				cross[c] += (double)ir_nbytes(&g->tensors[t]);
		}
	}
	for (int j = 0; j < nsub; j++)
		S.mi[j * 2] = (double)wbytes[j];
	double lat = cl->latency, cmul = train ? 2 : 1;
	S.fcoef = calloc((size_t)k * NCOMP, sizeof *S.fcoef);
	S.bcoef = calloc((size_t)k * NCOMP, sizeof *S.bcoef);
	S.coef = calloc((size_t)k * NCOMP, sizeof *S.coef);
	S.mc = calloc((size_t)k * 2, sizeof *S.mc);
	S.cap = calloc(k, sizeof *S.cap);
	for (int j = 0; j < k; j++) {
		/* backward: twice the FLOPs, calls and bytes, every collective again */
		double f[NCOMP] = {r[j].flop_s, r[j].coll_s, tp > 1 ? lat : 0, cl->op_latency,
			r[j].byte_s};
		for (int c = 0; c < NCOMP; c++) {
			S.fcoef[j * NCOMP + c] = f[c];
			S.bcoef[j * NCOMP + c] = train ? (c == 1 || c == 2 ? f[c] : 2 * f[c]) : 0;
			S.coef[j * NCOMP + c] = S.fcoef[j * NCOMP + c] + S.bcoef[j * NCOMP + c];
		}
		S.mc[j * 2] = train ? 4 : 1;
		S.mc[j * 2 + 1] = train ? (k - j < M ? k - j : M) : 1;
		S.cap[j] = r[j].memory;
	}
	/* cut after subgraph c as the boundary of stages s | s+1 */
	S.cut = calloc((size_t)nsub * (k - 1) + 1, sizeof *S.cut);
	for (int c = 0; c < nsub; c++)
		for (int j = 0; j + 1 < k; j++) {
			double v = lat + cross[c] * r[j].next_s;
			S.cut[c * (k - 1) + j] = cmul * v; /* activations and gradients */
			S.comm += v / ((double)nsub * (k - 1));
		}
	PipeProblem pr = {.n = nsub, .k = k, .micro = M, .ncomp = NCOMP, .item = S.item,
		.coef = S.coef, .cut = S.cut, .nmem = 2, .mem_item = S.mi, .mem_coef = S.mc,
		.mem_cap = S.cap};
	int *cut = calloc(k + 1, sizeof *cut), *best = calloc(k + 1, sizeof *best);
	bool limit = pipe_dp_stages(&pr, cut) >= 0;
	if (!limit) { /* the rank's graph needs more than mesh-map's estimate: drop the limit */
		pr.nmem = 0;
		pipe_dp_stages(&pr, cut);
	}
	double bt = simulate(&S, cut, train), t;
	const char *method = "AMP pipe_dp";
	memcpy(best, cut, sizeof *cut * (k + 1));
	/* AutoPipe on the stages' mean rates; the simulator on their own */
	double *f = calloc(nsub, sizeof *f), *b = calloc(nsub, sizeof *b);
	for (int i = 0; i < nsub; i++)
		for (int j = 0; j < k; j++)
			for (int c = 0; c < NCOMP; c++) {
				f[i] += S.fcoef[j * NCOMP + c] * S.item[i * NCOMP + c] / k;
				b[i] += S.bcoef[j * NCOMP + c] * S.item[i * NCOMP + c] / k;
			}
	pipe_autopipe(f, train ? b : NULL, nsub, k, M, S.comm, cut);
	t = simulate(&S, cut, train);
	if (t < bt && (!limit || fits_memory(&S, cut)))
		bt = t, method = "AutoPipe", memcpy(best, cut, sizeof *cut * (k + 1));
	g->pipe_even_time = -1;
	if (even_split(g, nsub, k, cut)) {
		t = simulate(&S, cut, train);
		g->pipe_even_time = t;
		g->pipe_even_std = stage_std(&S, cut);
		if (t < bt && (!limit || fits_memory(&S, cut)))
			bt = t, method = "Megatron even split", memcpy(best, cut, sizeof *cut * (k + 1));
	}
	/* annotate and record */
	free(g->stages);
	g->stages = calloc(k, sizeof *g->stages);
	double *sf = calloc(k, sizeof *sf), *sb = calloc(k, sizeof *sb);
	stage_times(&S, best, sf, sb);
	g->subgraph_fwd = ir_alloc(&g->arena, sizeof *g->subgraph_fwd * nsub);
	for (int s = 0; s < k; s++) {
		PipeStage *st = &g->stages[s];
		for (int j = best[s]; j < best[s + 1]; j++)
			for (int c = 0; c < NCOMP; c++)
				g->subgraph_fwd[j] += S.fcoef[s * NCOMP + c] * S.item[j * NCOMP + c];
		st->first = best[s];
		st->nsub = best[s + 1] - best[s];
		st->fwd = sf[s];
		st->bwd = train ? sb[s] : 0;
		for (int j = best[s]; j < best[s + 1]; j++) {
			st->weight_bytes += wbytes[j];
			/* the collectives' share (ring bytes, latency): -subpipeline */
			for (int c = 1; c <= 2; c++) {
				st->fwd_coll += S.fcoef[s * NCOMP + c] * S.item[j * NCOMP + c];
				st->bwd_coll += train ? S.bcoef[s * NCOMP + c] * S.item[j * NCOMP + c] : 0;
			}
			st->ncoll += (int)S.item[j * NCOMP + 2];
		}
	}
	for (NodeId n = 0; n < g->nnodes; n++) {
		int s = 0;
		while (s + 1 < k && g->nodes[n].subgraph >= best[s + 1])
			s++;
		g->nodes[n].stage = s;
	}
	g->nsubgraphs = nsub;
	g->nstages = k;
	g->pipe_comm = S.comm;
	g->pipe_time = bt;
	g->pipe_std = stage_std(&S, best);
	g->pipe_method = method;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	g->pipe_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	free(r);
	free(S.item), free(S.mi), free(S.fcoef), free(S.bcoef), free(S.coef);
	free(S.mc), free(S.cap), free(S.cut);
	free(cross);
	free(wbytes);
	free(counted);
	free(cut);
	free(best);
	free(f);
	free(b);
	free(sf);
	free(sb);
	return true;
}
