/*
 * grad_sync.c - data parallelism's gradient all-reduce: every weight's
 * gradient averaged over its data-parallel group (the ranks of the same
 * stage and TP coordinate in every replica), in buckets, as torch's
 * DistributedDataParallel does.
 *
 * Gradients are bucketed in the order backward makes them (the last
 * layers' first), up to GRAD_BUCKET bytes each (DDP's default 25 MiB),
 * never two pipeline stages' in one bucket; each bucket is one AllReduce
 * node (group "dp", mean 1, async 1) placed right after the node that
 * makes its last gradient.  async: a backend that starts collectives (MPI)
 * starts the bucket there and the program advances it between the backward
 * nodes that follow, so the sync overlaps the rest of backward; the
 * optimizer's first update waits for every bucket (runtime/k_comm.c).  The
 * threads backend runs it on the spot.  Each replica's loss is the mean
 * over its rows and the replicas have equal rows, so the average is the
 * gradient of the global mean.
 *
 * Needs: autodiff (Graph.grads), Graph.mesh.dp.  Guarantees: Graph.grads
 * names the averaged gradients.  With dp 1 or no gradients it does nothing.
 */
#include <stdlib.h>

#include "passes/passes.h"

#define GRAD_BUCKET ((int64_t)25 << 20)

static int
by_producer(const void *a, const void *b, void *arg)
{
	Graph *g = arg;
	NodeId x = g->tensors[((const struct GradPair *)a)->grad].producer;
	NodeId y = g->tensors[((const struct GradPair *)b)->grad].producer;
	return (x > y) - (x < y);
}

/* The pipeline stage of gradient i's producer: a bucket is one stage's. */
static int
grad_stage(const Graph *g, int i)
{
	NodeId p = g->tensors[g->grads[i].grad].producer;
	return p != IR_NONE && g->mesh.pp > 1 ? g->nodes[p].stage : 0;
}

bool
pass_grad_sync(Graph *g, PassCtx *cx)
{
	(void)cx;
	if (g->ngrads == 0 || g->mesh.dp <= 1 || ir_has_phase(g, PHASE_OPT)) /* IR file: done */
		return true;
	qsort_r(g->grads, g->ngrads, sizeof *g->grads, by_producer, g);
	int nold = g->nnodes;
	NodeId *after = malloc(sizeof *after * (g->ngrads + 1)); /* bucket b goes after node */
	int nb = 0;
	for (int i = 0; i < g->ngrads;) {
		int j = i;
		int64_t bytes = 0;
		while (j < g->ngrads && (j == i || bytes + ir_nbytes(&g->tensors[g->grads[j].grad]) <=
		    GRAD_BUCKET) && g->tensors[g->grads[j].grad].dtype ==
		    g->tensors[g->grads[i].grad].dtype && grad_stage(g, j) == grad_stage(g, i))
			bytes += ir_nbytes(&g->tensors[g->grads[j++].grad]);
		int k = j - i;
		TensorId *in = malloc(sizeof *in * k), *out = malloc(sizeof *out * k);
		if (!in || !out)
			die("out of memory");
		for (int q = 0; q < k; q++) {
			TensorId grad = g->grads[i + q].grad;
			in[q] = grad;
			char name[512];
			snprintf(name, sizeof name, "%s:dp", g->tensors[grad].name);
			out[q] = ir_add_tensor(g, name, TK_VALUE, g->tensors[grad].dtype);
		}
		char name[64];
		snprintf(name, sizeof name, "/grad_sync/bucket%d", nb);
		NodeId n = ir_add_node(g, OP_AllReduce, name, k, in, k, out);
		Node *nd = &g->nodes[n];
		NodeId last = g->tensors[in[k - 1]].producer;
		nd->phase = PHASE_BWD;
		if (last != IR_NONE) { /* its stage and If branch: the last gradient's node's */
			nd->subgraph = g->nodes[last].subgraph;
			nd->stage = g->nodes[last].stage;
		}
		ir_set_attr(g, n, "group", ATTR_STRING)->s = "dp";
		ir_set_attr(g, n, "mean", ATTR_INT)->i = 1;
		ir_set_attr(g, n, "async", ATTR_INT)->i = 1; /* started here, completed by the optimizer */
		if (!ir_infer_node(g, n))
			die("grad-sync: the bucket does not type");
		for (int q = 0; q < k; q++)
			g->grads[i + q].grad = out[q];
		after[nb++] = last;
		free(in);
		free(out);
		i = j;
	}
	/* each bucket right after its last gradient's producer */
	NodeId *order = malloc(sizeof *order * (g->nnodes + 1));
	int k = 0;
	for (int b = 0; b < nb; b++) /* a gradient of no node (none today) first */
		if (after[b] == IR_NONE)
			order[k++] = nold + b;
	for (NodeId n = 0; n < nold; n++) {
		order[k++] = n;
		for (int b = 0; b < nb; b++)
			if (after[b] == n)
				order[k++] = nold + b;
	}
	ir_reorder(g, order);
	free(order);
	free(after);
	return true;
}
