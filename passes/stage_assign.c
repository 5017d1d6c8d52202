/*
 * stage_assign.c - group pipe-shard's subgraphs into pipeline stages (AMP
 * §4.3 and Algorithm 2, AutoPipe §III-B), and keep the assignment the
 * pipeline simulator ranks best.
 *
 * Needs: pipe-shard (Node.subgraph); tp-rewrite when TP is on (costs are
 * then a rank's: local shapes, its collectives).  Per subgraph, the forward
 * time of one micro-batch is its FLOPs at CostModel.flops plus its
 * collectives (the driver loaded the model at the micro-batch size, so the
 * shapes are a micro-batch's); backward is twice
 * the forward for objective=train, none for infer.  A cut costs the bytes
 * crossing it over the link between the two stages' ranks, plus latency.
 * Candidates: AMP's pipe_dp, AutoPipe's planner, and Megatron's even split
 * of the blocks (reported as the baseline); the simulator (1F1B for train,
 * forward-only for infer) picks.
 *
 * Guarantees: Node.stage on every node, stages contiguous in node order and
 * non-empty; Graph.stages and the pipe_* fields filled.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/pipeline.h"
#include "passes/passes.h"

static double
coll_cost(Graph *g, NodeId n, int tp, double bw)
{
	Node *nd = &g->nodes[n];
	if (!ir_op_is_comm(nd->op) || nd->op == OP_Shard)
		return 0;
	Tensor *big = &g->tensors[nd->op == OP_ReduceScatter ? nd->in[0] : nd->out[0]];
	double bytes = (double)ir_nbytes(big);
	return nd->op == OP_AllReduce ? ir_cost_allreduce(&g->cost, tp, bw, bytes) :
	    ir_cost_allgather(&g->cost, tp, bw, bytes);
}

/* Row of the mesh a stage's ranks sit in (replica 0's: rank = stage * tp + q). */
static int
row_of(Graph *g, int stage, int tp)
{
	return g->mesh.cols ? stage * tp / g->mesh.cols : 0;
}

/* Standard deviation of the stage times (forward + backward) of a cut. */
static double
stage_std(const double *w, const int *cut, int k)
{
	double *t = calloc(k, sizeof *t), mean = 0, var = 0;
	pipe_stage_sums(w, cut, k, t);
	for (int s = 0; s < k; s++)
		mean += t[s] / k;
	for (int s = 0; s < k; s++)
		var += (t[s] - mean) * (t[s] - mean) / k;
	free(t);
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
	int k = cx->mesh.pp;
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
	int tp = cx->mesh.tp > 1 ? cx->mesh.tp : 1, M = cx->microbatches > 0 ? cx->microbatches : 1;
	const CostModel *cm = &g->cost;
	double bw_tp = tp <= (g->mesh.cols ? g->mesh.cols : tp) ? cm->bw_intra : cm->bw_inter;
	double *f = calloc(nsub, sizeof *f), *b = cm->train ? calloc(nsub, sizeof *b) : NULL;
	double *w = calloc(nsub, sizeof *w), *cross = calloc(nsub, sizeof *cross);
	int64_t *wbytes = calloc(nsub, sizeof *wbytes);
	/* per subgraph: compute and collectives; bytes crossing each cut */
	ir_reindex(g);
	bool *counted = calloc(g->ntensors + 1, 1);
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		int j = nd->subgraph;
		f[j] += ((double)ir_node_flops(g, n) / cm->flops + coll_cost(g, n, tp, bw_tp));
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (t == IR_NONE)
				continue;
			if (g->tensors[t].kind == TK_WEIGHT && !counted[t]) {
				counted[t] = true;
				wbytes[j] += ir_nbytes(&g->tensors[t]);
			}
		}
		for (int o = 0; o < nd->nout; o++) {
			TensorId t = nd->out[o];
			int last = j;
			if (t == IR_NONE)
				continue;
			for (int u = 0; u < g->nusers[t]; u++)
				if (g->nodes[g->users[t][u]].subgraph > last)
					last = g->nodes[g->users[t][u]].subgraph;
			for (int c = j; c < last; c++) /* crosses the cuts after j .. last-1 */
				cross[c] += (double)ir_nbytes(&g->tensors[t]);
		}
	}
	for (int j = 0; j < nsub; j++) {
		if (b)
			b[j] = 2 * f[j];
		w[j] = f[j] + (b ? b[j] : 0);
	}
	/* cut after subgraph c as the boundary of stages s | s+1 */
	double *bc = calloc((size_t)nsub * (k - 1) + 1, sizeof *bc), mean = 0;
	for (int c = 0; c < nsub; c++)
		for (int s = 0; s + 1 < k; s++) {
			double bw = row_of(g, s, tp) == row_of(g, s + 1, tp) ? cm->bw_intra : cm->bw_inter;
			double v = cm->latency + cross[c] / bw;
			bc[c * (k - 1) + s] = (cm->train ? 2 : 1) * v; /* activations and gradients */
			mean += v / ((double)nsub * (k - 1));
		}
	int *cut = calloc(k + 1, sizeof *cut), *best = calloc(k + 1, sizeof *best);
	double bt = -1;
	const char *method = "";
	pipe_dp(w, nsub, k, bc, M, cut);
	double t = pipe_simulate_cuts(f, b, k, M, mean, cut, NULL);
	bt = t, method = "AMP pipe_dp", memcpy(best, cut, sizeof *cut * (k + 1));
	t = pipe_autopipe(f, b, nsub, k, M, mean, cut);
	if (t < bt)
		bt = t, method = "AutoPipe", memcpy(best, cut, sizeof *cut * (k + 1));
	g->pipe_even_time = -1;
	if (even_split(g, nsub, k, cut)) {
		t = pipe_simulate_cuts(f, b, k, M, mean, cut, NULL);
		g->pipe_even_time = t;
		g->pipe_even_std = stage_std(w, cut, k);
		if (t < bt)
			bt = t, method = "Megatron even split", memcpy(best, cut, sizeof *cut * (k + 1));
	}
	/* annotate and record */
	free(g->stages);
	g->stages = calloc(k, sizeof *g->stages);
	for (int s = 0; s < k; s++) {
		PipeStage *st = &g->stages[s];
		st->first = best[s];
		st->nsub = best[s + 1] - best[s];
		for (int j = best[s]; j < best[s + 1]; j++) {
			st->fwd += f[j];
			st->bwd += b ? b[j] : 0;
			st->weight_bytes += wbytes[j];
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
	g->mesh.dp = cx->mesh.dp > 1 ? cx->mesh.dp : 1;
	g->mesh.tp = tp;
	g->mesh.pp = k;
	g->microbatches = M;
	g->pipe_comm = mean;
	g->pipe_time = bt;
	g->pipe_std = stage_std(w, best, k);
	g->pipe_method = method;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	g->pipe_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	free(f);
	free(b);
	free(w);
	free(cross);
	free(wbytes);
	free(counted);
	free(bc);
	free(cut);
	free(best);
	return true;
}
