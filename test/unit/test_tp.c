/*
 * test_tp.c - tp-plan and tp-rewrite on the fixtures: the search against a
 * brute-force evaluation of all 729 plans of a BERT block over the whole
 * graph, Megatron's plan as the expected winner, and the correctness traps
 * (fused q,k,v, head counts, bias after a row split, LayerNorm over a split
 * axis, a tied embedding).  Numerical correctness of every pattern is
 * checked end to end against torch by test/e2e.sh (chosen and random plans).
 */
#include <math.h>
#include <string.h>

#include "passes/tp.h"
#include "test/unit/util.h"

/* A graph on one node of tp devices, planned as one TP group. */
static PassCtx
ctx(Graph *g, int tp)
{
	PassCtx cx = {.min_duplicate = 2};
	g->cost.train = true; /* TAP's objective: Megatron's plan is the training step's best */
	ir_cluster_mesh(&g->cluster, 1, tp, &g->cost);
	g->mesh = (Mesh){.rows = 1, .cols = tp, .dp = 1, .tp = tp, .pp = 1};
	return cx;
}

static NodeId
node_named(Graph *g, const char *name)
{
	for (NodeId n = 0; n < g->nnodes; n++)
		if (strcmp(g->nodes[n].name, name) == 0)
			return n;
	return IR_NONE;
}

static NodeId
producer_of(Graph *g, NodeId n, int i)
{
	return g->tensors[g->nodes[n].in[i]].producer;
}

/* The whole-graph cost of the anchors' current choices, routed as one
 * region: no boundary is forced to R, unlike tp-plan's search. */
static bool
whole_cost(Graph *g, int tp, double *cost)
{
	TpState s;
	tp_state_init(&s, g, tp, &g->cost);
	bool ok = true;
	for (NodeId n = 0; n < g->nnodes && ok; n++)
		ok = tp_eval_node(&s, n, NULL);
	for (int i = 0; i < g->noutputs && ok; i++) {
		int bits;
		ok = tp_convert(&s, g->outputs[i], s.lay[g->outputs[i]], (Layout){L_R, 0, 1}, &bits);
	}
	*cost = tp_cost(&s);
	tp_state_free(&s);
	return ok;
}

static const char *roles[6] = {"query", "key", "value", "attn_out", "inter", "out"};
static const int megatron[6] = {1, 1, 1, 0, 1, 0}; /* column q,k,v,inter; row attn_out,out */

static void
bert_brute_force(int tp)
{
	Graph *g = fixture_graph("bert");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	PassCtx cx = ctx(g, tp);
	CU_ASSERT_TRUE_FATAL(pass_tp_plan(g, &cx));
	CU_ASSERT_EQUAL_FATAL(g->ntpsearch, 2);
	CU_ASSERT_EQUAL(g->tpsearch[0].choices, 6);
	CU_ASSERT_EQUAL(g->tpsearch[0].enumerated, 729);

	/* anchors by role, in both layers */
	NodeId a[2][6];
	for (int l = 0; l < 2; l++)
		for (int r = 0; r < 6; r++) {
			char name[64];
			snprintf(name, sizeof name, "/layers.%d/%s/MatMul", l, roles[r]);
			a[l][r] = node_named(g, name);
			CU_ASSERT_FATAL(a[l][r] != IR_NONE);
			CU_ASSERT_EQUAL(g->nodes[a[l][r]].tp_axis, megatron[r]);
			CU_ASSERT_EQUAL(g->nodes[a[l][r]].tp_blocks, 1);
		}

	/* brute force: every plan of the block, applied to both layers */
	double best = -1;
	int bestp = -1, valid = 0;
	for (int p = 0; p < 729; p++) {
		for (int r = 0, q = p; r < 6; r++, q /= 3)
			for (int l = 0; l < 2; l++) {
				g->nodes[a[l][r]].tp_axis = q % 3 == 0 ? TP_REPLICATE : q % 3 - 1;
				g->nodes[a[l][r]].tp_blocks = 1;
			}
		double c;
		if (!whole_cost(g, tp, &c))
			continue;
		valid++;
		if (best < 0 || c < best) {
			best = c;
			bestp = p;
		}
	}
	CU_ASSERT_EQUAL(valid, 729);
	int want = 0;
	for (int r = 5; r >= 0; r--)
		want = want * 3 + megatron[r] + 1;
	CU_ASSERT_EQUAL(bestp, want);
	ir_free(g);
}

static void
tp_bert_brute_force_2(void)
{
	bert_brute_force(2);
}

static void
tp_bert_brute_force_4(void)
{
	bert_brute_force(4);
}

/* GPT's fused c_attn is split per head (3 blocks), the Split and the
 * head-count Reshapes shrink, and each block all-reduces twice, before the
 * bias of its row-split projections. */
static void
tp_gpt_rewrite(void)
{
	for (int tp = 2; tp <= 4; tp += 2) {
		Graph *g = fixture_graph("gpt");
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		PassCtx cx = ctx(g, tp);
		CU_ASSERT_TRUE_FATAL(pass_tp_plan(g, &cx));
		NodeId qkv = node_named(g, "/h.0/attn/c_attn/MatMul");
		CU_ASSERT_EQUAL(g->nodes[qkv].tp_axis, 1);
		CU_ASSERT_EQUAL(g->nodes[qkv].tp_blocks, 3);
		/* the rest of Megatron's plan: rows, columns, rows */
		CU_ASSERT_EQUAL(g->nodes[node_named(g, "/h.1/attn/c_proj/MatMul")].tp_axis, 0);
		CU_ASSERT_EQUAL(g->nodes[node_named(g, "/h.1/mlp/mlp.0/MatMul")].tp_axis, 1);
		CU_ASSERT_EQUAL(g->nodes[node_named(g, "/h.1/mlp/mlp.2/MatMul")].tp_axis, 0);
		CU_ASSERT_TRUE_FATAL(pass_tp_rewrite(g, &cx));
		CU_ASSERT_TRUE(pass_verify(g, &cx));

		qkv = node_named(g, "/h.0/attn/c_attn/MatMul");
		Tensor *w = &g->tensors[g->nodes[qkv].in[1]];
		CU_ASSERT_EQUAL(w->slice_axis, 1);
		CU_ASSERT_EQUAL(w->slice_blocks, 3);
		CU_ASSERT_EQUAL(w->slice_parts, tp);
		CU_ASSERT_EQUAL(w->dims[1], 192 / tp);
		NodeId split = node_named(g, "/h.0/attn/Split");
		const int64_t *sz = ir_value(g, g->nodes[split].in[1]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(sz);
		for (int i = 0; i < 3; i++)
			CU_ASSERT_EQUAL(sz[i], 64 / tp);
		NodeId rs = node_named(g, "/h.0/attn/Reshape");
		const int64_t *shape = ir_value(g, g->nodes[rs].in[1]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(shape);
		CU_ASSERT_EQUAL(shape[2], 4 / tp); /* heads per rank */
		CU_ASSERT_EQUAL(shape[3], 16);

		int allreduce = 0, other = 0;
		for (NodeId n = 0; n < g->nnodes; n++) {
			if (g->nodes[n].op == OP_AllReduce && strncmp(g->nodes[n].name, "/h.", 3) == 0)
				allreduce++;
			else if (ir_op_is_comm(g->nodes[n].op) && strncmp(g->nodes[n].name, "/h.", 3) == 0)
				other++;
		}
		CU_ASSERT_EQUAL(allreduce, 4); /* 2 blocks x 2 */
		CU_ASSERT_EQUAL(other, 0);
		/* the bias is whole and added after the sum */
		NodeId add = node_named(g, "/h.0/attn/c_proj/Add");
		Node *nd = &g->nodes[add];
		int bias = g->tensors[nd->in[0]].kind == TK_WEIGHT ? 0 : 1;
		CU_ASSERT_EQUAL(g->tensors[nd->in[bias]].slice_axis, -1);
		CU_ASSERT_EQUAL(g->nodes[producer_of(g, add, 1 - bias)].op, OP_AllReduce);
		ir_free(g);
	}
}

/* A column-split output projection leaves the residual stream split; the
 * LayerNorm after it reduces over that axis, so it gets the full rows. */
static void
tp_layernorm_over_split(void)
{
	Graph *g = fixture_graph("gpt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	PassCtx cx = ctx(g, 2);
	CU_ASSERT_TRUE_FATAL(pass_tp_plan(g, &cx));
	for (int l = 0; l < 2; l++) {
		char name[64];
		snprintf(name, sizeof name, "/h.%d/attn/c_proj/MatMul", l);
		g->nodes[node_named(g, name)].tp_axis = 1;
	}
	CU_ASSERT_TRUE_FATAL(pass_tp_rewrite(g, &cx));
	CU_ASSERT_TRUE(pass_verify(g, &cx));
	NodeId mean = node_named(g, "/h.0/ln_2/ReduceMean");
	Tensor *x = &g->tensors[g->nodes[mean].in[0]];
	CU_ASSERT_EQUAL(x->dims[2], 64);
	CU_ASSERT_EQUAL(g->nodes[producer_of(g, mean, 0)].op, OP_AllGather);
	ir_free(g);
}

/* One table, two consumers split differently: two slices of the same bytes. */
static void
tp_tied_embedding(void)
{
	Graph *g = fixture_graph("tied");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	PassCtx cx = ctx(g, 2);
	CU_ASSERT_TRUE_FATAL(pass_tp_plan(g, &cx));
	NodeId gather = node_named(g, "/wte/Gather"), head = node_named(g, "/Gemm");
	CU_ASSERT_FATAL(gather != IR_NONE && head != IR_NONE);
	TensorId table = g->nodes[gather].in[0];
	CU_ASSERT_EQUAL(g->nodes[head].in[1], table);
	g->nodes[gather].tp_axis = 1;   /* hidden */
	g->nodes[head].tp_axis = 0;     /* vocabulary rows of the transB table: columns */
	CU_ASSERT_TRUE_FATAL(pass_tp_rewrite(g, &cx));
	CU_ASSERT_TRUE(pass_verify(g, &cx));
	gather = node_named(g, "/wte/Gather");
	head = node_named(g, "/Gemm");
	Tensor *a = &g->tensors[g->nodes[gather].in[0]], *b = &g->tensors[g->nodes[head].in[1]];
	CU_ASSERT_NOT_EQUAL(g->nodes[gather].in[0], g->nodes[head].in[1]);
	CU_ASSERT_EQUAL(a->offset, b->offset);
	CU_ASSERT_EQUAL(a->slice_axis, 1);
	CU_ASSERT_EQUAL(b->slice_axis, 0);
	CU_ASSERT_EQUAL(a->dims[0], 96);
	CU_ASSERT_EQUAL(a->dims[1], 16);
	CU_ASSERT_EQUAL(b->dims[0], 48);
	CU_ASSERT_EQUAL(b->dims[1], 32);
	ir_free(g);
}

/* A split that does not divide the weight is not a valid plan. */
static void
tp_indivisible(void)
{
	Graph *g = fixture_graph("mlp"); /* fc3 is 64 -> 10 */
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	PassCtx cx = ctx(g, 4);
	CU_ASSERT_TRUE_FATAL(pass_tp_plan(g, &cx));
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		int w = tp_anchor_input(g, n);
		if (w >= 0 && nd->tp_axis >= 0)
			CU_ASSERT_EQUAL(g->tensors[nd->in[w]].dims[nd->tp_axis] % (4 * nd->tp_blocks), 0);
	}
	int64_t valid = 0, plans = 0;
	for (int i = 0; i < g->ntpsearch; i++) {
		valid += g->tpsearch[i].valid;
		plans += g->tpsearch[i].enumerated;
	}
	CU_ASSERT(valid < plans);
	ir_free(g);
}

static void
tp_cost_model(void)
{
	CostModel m;
	ir_cost_defaults(&m);
	/* ring all-reduce: latency + 2(n-1)/n * bytes / bandwidth */
	CU_ASSERT_DOUBLE_EQUAL(ir_cost_allreduce(&m, 4, 1e10, 1e6), 5e-6 + 1.5e-4, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(ir_cost_allgather(&m, 4, 1e10, 1e6), 5e-6 + 0.75e-4, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(ir_cost_allreduce(&m, 1, 1e10, 1e6), 0, 0);
	const char *bad;
	CU_ASSERT_TRUE(ir_cost_parse(&m, "flops=1e14,bw_intra=3e11,latency=0,objective=infer", &bad));
	CU_ASSERT_DOUBLE_EQUAL(m.flops, 1e14, 1);
	CU_ASSERT_FALSE(m.train);
	CU_ASSERT_DOUBLE_EQUAL(m.latency, 0, 0);
	CU_ASSERT_FALSE(ir_cost_parse(&m, "flops=0", &bad));
	CU_ASSERT_FALSE(ir_cost_parse(&m, "speed=1", &bad));
	CU_ASSERT_STRING_EQUAL(bad, "speed=1");
	CU_ASSERT_FALSE(ir_cost_parse(&m, "bw_inter=fast", &bad));
	CU_ASSERT_FALSE(ir_cost_parse(&m, "objective=both", &bad));
}

void
suite_tp(CU_pSuite s)
{
	ADD(s, tp_bert_brute_force_2);
	ADD(s, tp_bert_brute_force_4);
	ADD(s, tp_gpt_rewrite);
	ADD(s, tp_layernorm_over_split);
	ADD(s, tp_tied_embedding);
	ADD(s, tp_indivisible);
	ADD(s, tp_cost_model);
}
