/*
 * tp_plan.c - derive the tensor-parallel plan (TAP §IV-D to §IV-F, Alg. 2
 * and 3): choose, for every weight anchor, replicate or a split along one
 * of the weight's axes.
 *
 * Needs: verify (static shapes); uses graph-nodes and fold-scopes when they
 * ran.  The graph is cut into regions: each instance of a shared-subgraph
 * template is one, and the ops outside templates form runs of at most
 * TP_MAX_PLANS candidate plans.  Tensors that cross regions are replicated
 * (R) at the boundary, so a region's best plan does not depend on the
 * others.  For one instance of each template, and for each other region,
 * every candidate plan is enumerated (the product of the anchors' choices:
 * 3^V for V matrices), validated by pattern routing (tp_layout.c) and
 * costed; the cheapest valid plan is applied to every instance.  The
 * search is thus independent of depth.
 *
 * The cost (docs/tensor-parallel.md): compute per rank at CostModel.flops,
 * plus collectives (latency + ring volume / bandwidth), for a training step
 * (3x forward compute, every collective once forward and once backward) or
 * a forward pass (-cost=objective=infer).  mesh-map asks tp_choose for the
 * plan of every TP degree it considers, to cost them (passes/costmodel.c).
 *
 * Needs: Graph.mesh.tp (mesh-map's, or an IR file's).  Guarantees:
 * Node.tp_axis/tp_blocks set on every anchor (TP_REPLICATE or a split),
 * Node.tp_comm notes the collectives, Graph.tpsearch and tp_memory (one
 * rank's weights, for plan.json) filled.  With tp = 1 the pass does
 * nothing.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/tp.h"

static double
now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef struct {
	TpState s;
	unsigned random;                /* -tp-random: a random valid plan */
	uint64_t rng;
	int *choice, *best;
	int *blocks;                    /* [anchor][axis] */
} Search;

static uint64_t
next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void
set_choice(Graph *g, NodeId a, int c, const int *blocks)
{
	Node *nd = &g->nodes[a];
	nd->tp_axis = c == 0 ? TP_REPLICATE : c - 1;
	nd->tp_blocks = c == 0 ? 1 : blocks[c - 1];
}

/* Route and cost the region's nodes under the anchors' current choices. */
static bool
eval_region(TpState *s, const NodeId *nodes, int nn)
{
	s->compute = s->comm = 0;
	s->ncoll = 0;
	for (int i = 0; i < nn; i++)
		if (!tp_eval_node(s, nodes[i], NULL))
			return false;
	Graph *g = s->g;
	for (int i = 0; i < nn; i++) {
		Node *nd = &g->nodes[nodes[i]];
		for (int o = 0; o < nd->nout; o++) {
			int bits;
			if (nd->out[o] != IR_NONE && tp_crosses(s, nd->out[o]) &&
			    !tp_convert(s, nd->out[o], s->lay[nd->out[o]], (Layout){L_R, 0, 1}, &bits))
				return false;
		}
	}
	return true;
}

/* Alg. 2 on one region: enumerate, route, cost, keep the best (the first
 * cheapest in enumeration order, replicate first: deterministic). */
static void
search(Search *S, const NodeId *nodes, int nn, const NodeId *anchors, int na, TpSearch *rec)
{
	Graph *g = S->s.g;
	double t0 = now_ms();
	for (int a = 0; a < na; a++) {
		S->choice[a] = 0;
		S->best[a] = 0;
		for (int ax = 0; ax < IR_MAX_RANK; ax++)
			S->blocks[a * IR_MAX_RANK + ax] = tp_blocks_for(g, anchors[a], ax);
	}
	double best = -1;
	int64_t nvalid = 0, nenum = 0;
	for (;;) {
		for (int a = 0; a < na; a++)
			set_choice(g, anchors[a], S->choice[a], &S->blocks[a * IR_MAX_RANK]);
		nenum++;
		if (eval_region(&S->s, nodes, nn)) {
			double c = tp_cost(&S->s);
			nvalid++;
			bool take = S->random ? next_rand(&S->rng) % (uint64_t)nvalid == 0 :
			    best < 0 || c < best;
			if (take) {
				best = c;
				memcpy(S->best, S->choice, sizeof *S->best * na);
			}
		}
		int a = 0;
		while (a < na && ++S->choice[a] == tp_nchoices(g, anchors[a]))
			S->choice[a++] = 0;
		if (a == na)
			break;
	}
	for (int a = 0; a < na; a++)
		set_choice(g, anchors[a], S->best[a], &S->blocks[a * IR_MAX_RANK]);
	rec->choices = na;
	rec->enumerated = nenum;
	rec->valid = nvalid;
	rec->cost = best;
	rec->ms = now_ms() - t0;
}

static TpSearch *
add_record(Graph *g, const char *name, int first, int instances)
{
	g->tpsearch = realloc(g->tpsearch, sizeof *g->tpsearch * (g->ntpsearch + 1));
	if (!g->tpsearch)
		die("out of memory");
	TpSearch *r = &g->tpsearch[g->ntpsearch++];
	*r = (TpSearch){.name = name, .first = first, .instances = instances};
	return r;
}

static const char *conv_names[] = {"allreduce", "allgather", "reducescatter", "shard"};

/* Route the whole plan once more and note each node's collectives. */
static double
note_plan(TpState *s, int64_t *mem)
{
	Graph *g = s->g;
	int *convs = calloc(s->cap, sizeof *convs);
	bool *sliced = calloc(g->ntensors + 1, sizeof *sliced);
	s->compute = s->comm = 0;
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		memset(convs, 0, sizeof *convs * s->cap);
		if (!tp_eval_node(s, n, convs))
			die("tp-plan: the chosen plan does not route at '%s'", nd->name);
		char buf[512];
		size_t k = 0;
		buf[0] = 0;
		for (int i = 0; i < nd->nin; i++) {
			if (nd->in[i] != IR_NONE && g->tensors[nd->in[i]].kind == TK_WEIGHT &&
			    s->need[i].kind == L_S)
				sliced[nd->in[i]] = true;
			for (int b = 0; b < 4; b++)
				if (convs[i] >> b & 1 && (1 << b) != TC_SHARD && k < sizeof buf - 40)
					k += snprintf(buf + k, sizeof buf - k, "%s%s:%d", k ? "," : "",
					    conv_names[b], i);
		}
		if (s->gemm_allreduce)
			k += snprintf(buf + k, sizeof buf - k, "%sallreduce:out", k ? "," : "");
		for (int o = 0; o < nd->nout; o++) {
			int bits;
			if (nd->out[o] == IR_NONE || !tp_crosses(s, nd->out[o]))
				continue;
			tp_convert(s, nd->out[o], s->lay[nd->out[o]], (Layout){L_R, 0, 1}, &bits);
			for (int b = 0; b < 3; b++)
				if (bits >> b & 1 && k < sizeof buf - 40)
					k += snprintf(buf + k, sizeof buf - k, "%s%s:out%d", k ? "," : "",
					    conv_names[b], o);
		}
		nd->tp_comm = k ? ir_strdup(&g->arena, buf) : NULL;
	}
	*mem = 0;
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].kind == TK_WEIGHT && g->nusers[t])
			*mem += ir_nbytes(&g->tensors[t]) / (sliced[t] ? s->tp : 1);
	free(convs);
	free(sliced);
	return tp_cost(s);
}

void
tp_choose(Graph *g, int tp, const CostModel *cm, unsigned random, bool record)
{
	ir_reindex(g);
	Search S = {.random = random, .rng = 0x9e3779b97f4a7c15ull ^ random};
	TpState *s = &S.s;
	tp_state_init(s, g, tp, cm);
	S.choice = calloc(g->nnodes + 1, sizeof *S.choice);
	S.best = calloc(g->nnodes + 1, sizeof *S.best);
	S.blocks = calloc((size_t)(g->nnodes + 1) * IR_MAX_RANK, sizeof *S.blocks);
	NodeId *nodes = malloc(sizeof *nodes * (g->nnodes + 1));
	NodeId *anchors = malloc(sizeof *anchors * (g->nnodes + 1));
	if (!S.choice || !S.best || !S.blocks || !nodes || !anchors)
		die("out of memory");
	if (record)
		g->ntpsearch = 0;
	TpSearch scratch;

	/* regions: template instances first, then runs outside them */
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		nd->tp_axis = tp_anchor_input(g, n) >= 0 ? TP_REPLICATE : TP_NONE;
		nd->tp_blocks = 1;
		nd->tp_comm = NULL;
	}
	int *greg;
	int nreg = tp_regions(s, &greg);

	/* each region's nodes, in graph order: order[rstart[r] .. rstart[r+1]) */
	int *rstart = calloc(nreg + 2, sizeof *rstart);
	NodeId *order = malloc(sizeof *order * (g->nnodes + 1));
	bool *rtmpl = calloc(nreg + 1, sizeof *rtmpl);
	if (!rstart || !order || !rtmpl)
		die("out of memory");
	for (NodeId n = 0; n < g->nnodes; n++)
		rstart[s->region[n] + 1]++;
	for (int r = 0; r < nreg; r++)
		rstart[r + 1] += rstart[r];
	for (NodeId n = 0; n < g->nnodes; n++) /* rstart[r] counts up to r+1's start */
		order[rstart[s->region[n]]++] = n;
	for (int r = nreg; r > 0; r--)
		rstart[r] = rstart[r - 1];
	rstart[0] = 0;
	for (int i = 0; i < g->ngroups; i++)
		if (greg[i] >= 0)
			rtmpl[greg[i]] = true;

	/* one search per template, applied to every instance */
	for (int t = 0; t < g->ntemplates; t++) {
		Template *T = &g->templates[t];
		int nn = 0, na = 0, reg0 = greg[T->inst[0]];
		for (int i = rstart[reg0]; i < rstart[reg0 + 1]; i++) {
			nodes[nn++] = order[i];
			if (g->nodes[order[i]].tp_axis != TP_NONE)
				anchors[na++] = order[i];
		}
		TpSearch *rec = record ? add_record(g, T->name, T->inst[0], T->ninstances) : &scratch;
		search(&S, nodes, nn, anchors, na, rec);
		for (int i = 1; i < T->ninstances; i++) {
			int reg = greg[T->inst[i * T->ngroups]], k = 0;
			for (int j = rstart[reg]; j < rstart[reg + 1]; j++) {
				Node *nd = &g->nodes[order[j]];
				if (nd->tp_axis == TP_NONE)
					continue;
				if (k >= na || g->nodes[anchors[k]].op != nd->op)
					die("tp-plan: instance %d of template %d differs from the first", i, t);
				nd->tp_axis = g->nodes[anchors[k]].tp_axis;
				nd->tp_blocks = g->nodes[anchors[k]].tp_blocks;
				k++;
			}
		}
	}
	/* the regions outside templates */
	TpSearch rest = {0};
	bool any = false;
	for (int r = 0; r < nreg; r++) {
		if (rtmpl[r] || rstart[r] == rstart[r + 1])
			continue;
		int nn = 0, na = 0;
		for (int i = rstart[r]; i < rstart[r + 1]; i++) {
			nodes[nn++] = order[i];
			if (g->nodes[order[i]].tp_axis != TP_NONE)
				anchors[na++] = order[i];
		}
		TpSearch one = {0};
		search(&S, nodes, nn, anchors, na, &one);
		if (one.valid == 0)
			die("tp-plan: no valid plan for a region (replicating everything always routes)");
		rest.choices += one.choices;
		rest.enumerated += one.enumerated;
		rest.valid += one.valid;
		rest.cost += one.cost;
		rest.ms += one.ms;
		if (!any)
			rest.first = g->nodes[nodes[0]].group;
		any = true;
	}
	if (any && record) {
		TpSearch *rec = add_record(g, "", rest.first, 1);
		*rec = rest;
		rec->name = "";
		rec->instances = 1;
	}
	free(greg);
	free(rstart);
	free(order);
	free(rtmpl);
	free(nodes);
	free(anchors);
	free(S.choice);
	free(S.best);
	free(S.blocks);
	tp_state_free(s);
}

bool
pass_tp_plan(Graph *g, PassCtx *cx)
{
	int tp = g->mesh.tp;
	if (tp <= 1)
		return true;
	if (tp_is_local(g)) {
		diag_file(g->model, "the graph is already one rank's (it has collectives or sliced "
		    "weights): tp-plan needs the whole model");
		return false;
	}
	tp_choose(g, tp, &g->cost, cx->tp_random, true);
	g->tp_search_ms = 0;
	for (int i = 0; i < g->ntpsearch; i++)
		g->tp_search_ms += g->tpsearch[i].ms;

	TpState st;
	tp_state_init(&st, g, tp, &g->cost);
	int *greg;
	tp_regions(&st, &greg);
	free(greg);
	int64_t mem;
	g->tp_cost = note_plan(&st, &mem);
	g->tp_memory = mem * (g->cost.train ? 4 : 1);
	tp_state_free(&st);
	return true;
}
