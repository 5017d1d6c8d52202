/*
 * degrees.c - choose the data, tensor and pipeline degrees of a mesh.
 *
 * Megatron's rule (Narayanan et al. 2021; AMP §5's baseline), on an R x C
 * mesh whose rows are nodes: tensor parallelism inside a node, up to the
 * largest degree dividing C that also divides the model's head counts and
 * hidden sizes; pipeline parallelism across the R nodes, at most one stage
 * per pipe-shard subgraph; data parallelism for the rest.  Two fallbacks
 * keep every mesh usable: when the batch does not split into that many
 * replicas, the spare devices go to more pipeline stages (while there are
 * subgraphs), then to a wider TP group (tp-plan replicates what the wider
 * group cannot split).  Degrees given with -dp/-tp/-pp are kept and the
 * rule fills in the others.  docs/pipeline.md has the rule and examples.
 *
 * Needs: the model's facts (degrees_facts) from a graph that went through
 * fold-constants and pipe-shard.  The choice is explained in one sentence
 * for plan.json.
 */
#include <stdio.h>
#include <string.h>

#include "passes/degrees.h"

static int64_t
gcd(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static bool
is_output(const Graph *g, TensorId t)
{
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == t)
			return true;
	return false;
}

/* The width a weight gives its op's output: output features of MatMul and
 * Gemm, output channels of Conv, the embedding width of Gather. */
static int64_t
hidden_of(const Graph *g, const Node *nd)
{
	TensorId w = nd->nin > 1 ? nd->in[1] : IR_NONE;
	switch (nd->op) {
	case OP_MatMul:
		if (w != IR_NONE && g->tensors[w].kind == TK_WEIGHT && g->tensors[w].rank == 2)
			return g->tensors[w].dims[1];
		return 0;
	case OP_Gemm:
		if (w == IR_NONE || g->tensors[w].kind != TK_WEIGHT || g->tensors[w].rank != 2)
			return 0;
		for (int k = 0; k < nd->nattr; k++)
			if (!strcmp(nd->attr[k].name, "transB") && nd->attr[k].i)
				return g->tensors[w].dims[0];
		return g->tensors[w].dims[1];
	case OP_Conv:
		return w != IR_NONE && g->tensors[w].kind == TK_WEIGHT ? g->tensors[w].dims[0] : 0;
	case OP_ConvTranspose: /* W is [C, M/group, k..] */
		if (w == IR_NONE || g->tensors[w].kind != TK_WEIGHT)
			return 0;
		for (int k = 0; k < nd->nattr; k++)
			if (!strcmp(nd->attr[k].name, "group") && nd->attr[k].i != 1)
				return 0;
		return g->tensors[w].dims[1];
	case OP_Gather:
		w = nd->in[0];
		if (g->tensors[w].kind == TK_WEIGHT && g->tensors[w].rank == 2)
			return g->tensors[w].dims[1];
		return 0;
	default:
		return 0;
	}
}

/* A Reshape splitting the last axis E into (H, E/H): attention heads. */
static int64_t
heads_of(const Graph *g, const Node *nd)
{
	if (nd->op != OP_Reshape || nd->in[0] == IR_NONE || nd->out[0] == IR_NONE)
		return 0;
	const Tensor *x = &g->tensors[nd->in[0]], *y = &g->tensors[nd->out[0]];
	int r = x->rank;
	if (r < 2 || y->rank != r + 1)
		return 0;
	for (int d = 0; d < r - 1; d++)
		if (x->dims[d] != y->dims[d])
			return 0;
	return y->dims[r - 1] > 1 && y->dims[r - 1] * y->dims[r] == x->dims[r - 1] ?
	    y->dims[r - 1] : 0;
}

void
degrees_facts(const Graph *g, ModelFacts *f)
{
	*f = (ModelFacts){.batch = 1, .subgraphs = g->nsubgraphs > 0 ? g->nsubgraphs : 1};
	for (int i = 0; i < g->ninputs; i++) /* the first input with a dim 0 (not a scalar flag) */
		if (g->tensors[g->inputs[i]].rank > 0) {
			f->batch = g->tensors[g->inputs[i]].dims[0];
			break;
		}
	int64_t heads = 0;
	for (NodeId n = 0; n < g->nnodes; n++) {
		const Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		int64_t h = heads_of(g, nd);
		if (h > 0) {
			heads = gcd(heads, h);
			f->heads++;
		}
		/* the last projection (vocabulary, classes) is not a hidden size */
		int64_t w = nd->nout && nd->out[0] != IR_NONE && !is_output(g, nd->out[0]) ?
		    hidden_of(g, nd) : 0;
		if (w > 0)
			f->hidden = gcd(f->hidden, w);
	}
	f->divisor = gcd(heads, f->hidden);
}

static int
largest_divisor(int64_t n, int64_t limit, int64_t also)
{
	for (int64_t d = limit; d > 1; d--)
		if (n % d == 0 && (also == 0 || also % d == 0))
			return (int)d;
	return 1;
}

bool
degrees_choose(const Mesh *mesh, const DegreeRequest *q, const ModelFacts *f,
    const char *model, Mesh *out, int *micro, char *rule, size_t n)
{
	int N = mesh->rows * mesh->cols;
	*out = *mesh;
	if (q->dp < 0 || q->tp < 0 || q->pp < 0 || q->microbatches < 0) {
		diag_error("-dp=%d -tp=%d -pp=%d -microbatches=%d: degrees are positive counts", q->dp,
		    q->tp, q->pp, q->microbatches);
		return false;
	}
	int64_t forced = (int64_t)(q->dp ? q->dp : 1) * (q->tp ? q->tp : 1) * (q->pp ? q->pp : 1);
	bool all = q->dp && q->tp && q->pp;
	if (forced > N || N % forced || (all && forced != N)) {
		diag_error("-dp=%d -tp=%d -pp=%d: the mesh %dx%d has %d device%s; the degrees must "
		    "multiply to that (those not given are chosen)", q->dp, q->tp, q->pp, mesh->rows,
		    mesh->cols, N, N == 1 ? "" : "s");
		return false;
	}
	int rem = (int)(N / forced), k = 0;
	char fall[256] = "";

	int tp = q->tp;
	if (!tp && q->dp && q->pp)
		tp = rem;
	else if (!tp)
		tp = f->divisor ? largest_divisor(rem, mesh->cols, gcd(mesh->cols, f->divisor)) : 1;
	int pp = q->pp;
	if (!pp)
		pp = q->dp ? N / (q->dp * tp) : largest_divisor(N / tp, mesh->rows < f->subgraphs ?
		    mesh->rows : f->subgraphs, mesh->rows);
	int dp = q->dp, tp0 = tp, pp0 = pp;
	if (!dp) {
		int L = N / (tp * pp);
		dp = largest_divisor(L, L, f->batch);
		int x = L / dp;
		if (x > 1) {
			k = snprintf(fall, sizeof fall, " (of %d devices left: the batch %lld splits into "
			    "%d replica%s only, so the others go to", L, (long long)f->batch, dp,
			    dp == 1 ? "" : "s");
			int grow = q->pp ? 1 : largest_divisor(x, f->subgraphs / pp, 0);
			if (grow > 1) {
				pp *= grow;
				x /= grow;
				k += snprintf(fall + k, sizeof fall - k, " more pipeline stages (pp %d)", pp);
			}
			if (x > 1 && !q->tp) {
				tp *= x;
				k += snprintf(fall + k, sizeof fall - k, "%s a wider TP group (tp %d: tp-plan "
				    "replicates what it cannot split)", grow > 1 ? " and" : "", tp);
				x = 1;
			}
			k += snprintf(fall + k, sizeof fall - k, ")");
			if (x > 1) {
				diag_error("%s: the batch %lld does not split into %d data-parallel replicas, "
				    "and -tp=%d -pp=%d leave no other place for the mesh's devices (-batch=N)",
				    model, (long long)f->batch, L, q->tp, q->pp);
				return false;
			}
		}
	}
	if ((int64_t)dp * tp * pp != N) {
		diag_error("-dp=%d -tp=%d -pp=%d: the mesh %dx%d has %d devices; the degrees must "
		    "multiply to that", dp, tp, pp, mesh->rows, mesh->cols, N);
		return false;
	}
	if (f->batch % dp) {
		diag_error("%s: -dp=%d does not divide the batch %lld (-batch=N sets it)", model, dp,
		    (long long)f->batch);
		return false;
	}
	int64_t replica = f->batch / dp;
	int m = q->microbatches;
	if (m && replica % m) {
		diag_error("%s: -microbatches=%d does not divide a replica's batch %lld (the batch %lld "
		    "over dp %d; -batch=N sets it)", model, m, (long long)replica, (long long)f->batch, dp);
		return false;
	}
	if (!m)
		m = pp > 1 ? largest_divisor(replica, 2 * pp, 0) : 1;

	int w = 0;
	if (q->tp)
		w += snprintf(rule + w, n - w, "tp %d (-tp)", tp);
	else if (q->dp && q->pp)
		w += snprintf(rule + w, n - w, "tp %d (the rest of the mesh)", tp);
	else if (f->divisor)
		w += snprintf(rule + w, n - w, "Megatron's rule: tp %d inside a mesh row of %d (the "
		    "largest that divides the %s, gcd %lld)", tp0, mesh->cols, f->heads ?
		    "head counts and hidden sizes" : "hidden sizes", (long long)f->divisor);
	else
		w += snprintf(rule + w, n - w, "Megatron's rule: tp 1 (no head counts or hidden "
		    "sizes to split)");
	if (q->pp)
		w += snprintf(rule + w, n - w, ", pp %d (-pp)", pp);
	else if (q->dp)
		w += snprintf(rule + w, n - w, ", pp %d (the rest of the mesh)", pp);
	else
		w += snprintf(rule + w, n - w, ", pp %d across the %d mesh row%s (%d subgraph%s)", pp0,
		    mesh->rows, mesh->rows == 1 ? "" : "s", f->subgraphs, f->subgraphs == 1 ? "" : "s");
	if (q->dp)
		w += snprintf(rule + w, n - w, ", dp %d (-dp)", dp);
	else
		w += snprintf(rule + w, n - w, ", dp %d for the rest%s", dp, fall);
	snprintf(rule + w, n - w, "; %d micro-batch%s per replica%s", m, m == 1 ? "" : "es",
	    q->microbatches ? " (-microbatches)" : "");
	out->dp = dp;
	out->tp = tp;
	out->pp = pp;
	*micro = m;
	return true;
}
