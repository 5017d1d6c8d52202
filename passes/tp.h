/*
 * tp.h - tensor-parallel layouts and the SRC sharding patterns of every op
 * (TAP §IV-D, §IV-E), shared by tp-plan (search) and tp-rewrite (apply).
 *
 * Every tensor has a layout across the TP group of `tp` ranks:
 *   R          replicated: each rank holds the whole tensor;
 *   S(a, k)    split along axis a: the axis is viewed as [k, tp, chunk]
 *              and rank q holds [:, q, :] (k = 1 is a contiguous split;
 *              k = 3 keeps a fused q,k,v projection's heads apart);
 *   P          partial sums: each rank holds a tensor of the full shape,
 *              and the value is their sum.
 * A plan fixes the layout of each anchor's weight (Node.tp_axis); pattern
 * routing then walks the ops in producer-to-consumer order and, at each,
 * looks up the op's pattern for the layouts that reach it.  The pattern
 * says which layout each input needs (a Communicate step converts it:
 * P->R all-reduce, S->R all-gather, P->S reduce-scatter, R->S a local
 * slice) and which layout each output gets.  A plan is invalid when an
 * anchor's weight would need a different layout than the plan gives it or
 * a split does not divide a dimension.
 *
 * Needs: static shapes (verify); GraphNodes and templates are used when
 * present (graph-nodes, fold-scopes) to form the searched regions.
 */
#ifndef TAPC_TP_H
#define TAPC_TP_H

#include "passes/passes.h"

enum { L_R, L_S, L_P };

typedef struct {
	int8_t kind;                    /* L_R, L_S, L_P */
	int8_t axis;                    /* L_S */
	int16_t blocks;                 /* L_S, >= 1 */
} Layout;

/* Collectives a conversion inserts (bit set). */
enum { TC_ALLREDUCE = 1, TC_ALLGATHER = 2, TC_REDUCESCATTER = 4, TC_SHARD = 8 };

typedef struct {
	Graph *g;
	int tp;
	double bw;                      /* bandwidth of the TP group's links */
	const CostModel *cm;
	int *region;                    /* per node: the region it is searched in */
	Layout *lay;                    /* per tensor: the layout its producer gives it */
	/* one node's pattern, filled by tp_eval_node */
	int cap;
	Layout *in, *need, *out;
	bool gemm_allreduce;            /* Gemm with a split contraction and a bias C:
					 * the product is all-reduced before C is added */
	/* the evaluation so far */
	double compute, comm;           /* forward seconds */
	int ncoll;
} TpState;

bool tp_state_init(TpState *s, Graph *g, int tp, const CostModel *cm);
void tp_state_free(TpState *s);

static inline bool
tp_same(Layout a, Layout b)
{
	return a.kind == b.kind && (a.kind != L_S || (a.axis == b.axis && a.blocks == b.blocks));
}

/* TAP's search (tp_plan.c): every anchor's layout for groups of tp ranks
 * (Node.tp_axis, tp_blocks), the cheapest by cm; random != 0 takes a
 * random valid plan instead (-tp-random).  record: keep the searches in
 * Graph.tpsearch for plan.json. */
void tp_choose(Graph *g, int tp, const CostModel *cm, unsigned random, bool record);

/* Has tp-rewrite already made this graph a rank's (collectives, slices)? */
bool tp_is_local(Graph *g);

/* The input of node n whose layout the plan chooses, or -1. */
int tp_anchor_input(Graph *g, NodeId n);
/* Choices for an anchor: replicate, then one split per weight axis. */
int tp_nchoices(Graph *g, NodeId n);
/* The block count a split of the anchor's weight along axis uses: 3 when its
 * output reaches a Split into 3 equal parts along the same axis, else 1. */
int tp_blocks_for(Graph *g, NodeId n, int axis);

/* Cut the graph into searched regions (s->region): one per template
 * instance, then runs of other ops with at most TP_MAX_PLANS candidate
 * plans each.  Returns the count; *greg (malloc'd) maps GraphNode ->
 * region for template members, -1 for others. */
#define TP_MAX_PLANS 6561               /* 3^8 */
int tp_regions(TpState *s, int **greg);

/* The layout node `consumer` sees for tensor t: R across regions. */
Layout tp_seen(TpState *s, TensorId t, NodeId consumer);
/* Route one node: fill s->in/need/out, add compute and conversion costs.
 * False if the plan has no pattern here.  convs (may be NULL) gets, per
 * input, the TC_* bits of its conversion. */
bool tp_eval_node(TpState *s, NodeId n, int *convs);
/* True if tensor t, produced in its producer's region, is consumed in
 * another region or is a graph output: it is made R right after. */
bool tp_crosses(TpState *s, TensorId t);
/* Cost of converting t from layout a to b; false if impossible. */
bool tp_convert(TpState *s, TensorId t, Layout a, Layout b, int *bits);
/* Does layout l fit tensor t (the split divides the axis)? */
bool tp_fits(TpState *s, TensorId t, Layout l);
/* The step cost of the evaluation so far (train: fwd+bwd). */
double tp_cost(const TpState *s);

#endif
