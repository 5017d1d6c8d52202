/*
 * graph_nodes.c - group the op graph into GraphNodes (TAP §IV-B).
 *
 * Needs: strip-aux.  Guarantees: every live node belongs to exactly one
 * GraphNode (Node.group), GraphNodes are listed in topological order of
 * their first op, and each holds at most one "anchor": an op that owns a
 * weight or a unit of computation (MatMul, Gemm, Conv, ConvTranspose, an
 * embedding Gather, a normalization, a pooling, a resampling, a
 * recurrent layer).  Lighter ops join the GraphNode of
 * an input's producer in the same name scope, so a MatMul takes its bias
 * Add and reshapes, a LayerNorm chain (ReduceMean, Sub, Pow, Sqrt, Div,
 * Mul, Add) stays together, and attention's scores, scale, mask and
 * Softmax form one GraphNode (TAP: "a Softmax with its scale").  Without names every scope is "", and light ops
 * follow their producer's anchor: the grouping is coarser but still
 * structural, which is all fold-scopes needs.  An If and every node of its
 * branches form one GraphNode (an If is planned as one unit).
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static bool
is_anchor(Graph *g, Node *n)
{
	switch (n->op) {
	case OP_MatMul: case OP_Gemm: case OP_Conv: case OP_ConvTranspose:
	case OP_LayerNormalization: case OP_BatchNormalization: case OP_InstanceNormalization:
	case OP_MaxPool: case OP_AveragePool: case OP_GlobalAveragePool: case OP_GlobalMaxPool:
	case OP_Resize: case OP_Upsample: case OP_RNN: case OP_GRU: case OP_LSTM:
		return true;
	case OP_Gather: /* an embedding: the table is a weight */
		return n->in[0] != IR_NONE && g->tensors[n->in[0]].kind == TK_WEIGHT;
	default:
		return false;
	}
}

/* Length of the scope part of a node name: "/h.0/attn/MatMul" -> "/h.0/attn". */
static size_t
scope_len(const char *name)
{
	const char *slash = strrchr(name, '/');
	return slash ? (size_t)(slash - name) : 0;
}

static bool
same_scope(const char *a, const char *b)
{
	size_t la = scope_len(a), lb = scope_len(b);
	return la == lb && memcmp(a, b, la) == 0;
}

bool
pass_graph_nodes(Graph *g, PassCtx *cx)
{
	(void)cx;
	int *size = calloc(g->nnodes + 1, sizeof *size);
	NodeId *first = malloc(sizeof *first * (g->nnodes + 1));
	/* an If and its branches (nested ones too) are one unit: one GraphNode
	 * per outermost region, never sharded or cut inside */
	int *parent = malloc(sizeof *parent * (g->nregions + 1));
	int *rgroup = malloc(sizeof *rgroup * (g->nregions + 1));
	if (!size || !first || !parent || !rgroup)
		die("out of memory");
	for (int r = 0; r < g->nregions; r++)
		parent[r] = rgroup[r] = IR_NONE;
	for (NodeId id = 0; id < g->nnodes; id++)
		if (!g->nodes[id].dead && g->nodes[id].owns != IR_NONE)
			parent[g->nodes[id].owns] = g->nodes[id].region;
	int ng = 0;
	for (NodeId id = 0; id < g->nnodes; id++) {
		Node *n = &g->nodes[id];
		n->group = IR_NONE;
		if (n->dead)
			continue;
		int r = n->region != IR_NONE ? n->region : n->owns;
		while (r != IR_NONE && parent[r] != IR_NONE)
			r = parent[r];
		if (r != IR_NONE && rgroup[r] != IR_NONE)
			n->group = rgroup[r];
		else if (r == IR_NONE && !is_anchor(g, n))
			for (int i = 0; i < n->nin && n->group == IR_NONE; i++) {
				TensorId t = n->in[i];
				NodeId p = t == IR_NONE ? IR_NONE : g->tensors[t].producer;
				if (p != IR_NONE && same_scope(g->nodes[p].name, n->name))
					n->group = g->nodes[p].group;
			}
		if (n->group == IR_NONE) {
			first[ng] = id;
			n->group = ng++;
			if (r != IR_NONE)
				rgroup[r] = n->group;
		}
		size[n->group]++;
	}
	free(parent);
	free(rgroup);
	g->ngroups = ng;
	g->groups = ir_alloc(&g->arena, sizeof *g->groups * (ng + 1));
	for (int k = 0; k < ng; k++) {
		GraphNode *gn = &g->groups[k];
		gn->name = g->nodes[first[k]].name;
		gn->nodes = ir_alloc(&g->arena, sizeof *gn->nodes * size[k]);
		gn->tmpl = IR_NONE;
	}
	for (NodeId id = 0; id < g->nnodes; id++)
		if (!g->nodes[id].dead) {
			GraphNode *gn = &g->groups[g->nodes[id].group];
			gn->nodes[gn->nnodes++] = id;
		}
	g->ntemplates = 0;
	free(size);
	free(first);
	return true;
}
