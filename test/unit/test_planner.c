/*
 * test_planner.c - the planner: placements (ir/cluster.c), the cost model
 * (passes/costmodel.c) and the search (passes/mesh_map.c).
 *
 * Oracles: placements and one candidate's predicted iteration worked out
 * by hand (AMP's equations 1 to 4 on a two-layer model and a two-kind
 * cluster); the exhaustive search against an enumeration written here;
 * every forced (dp, tp, pp) against the free choice; simulated annealing
 * against exhaustive search; Megatron's rule as AMP §5 states it.
 */
#include <math.h>
#include <string.h>

#include "frontend/onnx.h"
#include "passes/costmodel.h"
#include "test/unit/util.h"

static void
test_place(void)
{
	Cluster c;
	CostModel m;
	ir_cost_defaults(&m);
	ir_cluster_mesh(&c, 2, 4, &m);
	int dev[8];
	/* rank (d * pp + s) * tp + q; order tp, dp, pp: device q + 2 (d + 2 s) */
	ir_place(&c, 2, 2, 2, 0, dev);
	int want0[8] = {0, 1, 4, 5, 2, 3, 6, 7};
	CU_ASSERT_EQUAL(memcmp(dev, want0, sizeof dev), 0);
	/* the same by slot: devices in the order n0s0 n1s0 n0s1 n1s1 ... */
	ir_place(&c, 2, 2, 2, 1, dev);
	int slot[8] = {0, 4, 1, 5, 2, 6, 3, 7}, want1[8];
	for (int r = 0; r < 8; r++)
		want1[r] = slot[want0[r]];
	CU_ASSERT_EQUAL(memcmp(dev, want1, sizeof dev), 0);
	/* order pp, dp, tp: device s + 2 (d + 2 q) */
	ir_place(&c, 2, 2, 2, 10, dev);
	CU_ASSERT_STRING_EQUAL(ir_place_order(10), "pp,dp,tp");
	for (int r = 0; r < 8; r++) {
		int q = r % 2, s = r / 2 % 2, d = r / 4;
		CU_ASSERT_EQUAL(dev[r], s + 2 * (d + 2 * q));
	}
	/* every placement is a permutation of the devices */
	for (int p = 0; p < PLACE_COUNT; p++) {
		int seen[8] = {0};
		ir_place(&c, 2, 2, 2, p, dev);
		for (int r = 0; r < 8; r++)
			seen[dev[r]]++;
		for (int d = 0; d < 8; d++)
			CU_ASSERT_EQUAL(seen[d], 1);
	}
}

/* Two kinds of node; links inside a node at its intra_bw, between nodes at
 * the smaller inter_bw. */
static void
two_kinds(Cluster *c)
{
	memset(c, 0, sizeof *c);
	c->nkinds = 2;
	c->kinds[0] = (NodeKind){"fast", 1, 2, 2000, 1e9, 1000, 50};
	c->kinds[1] = (NodeKind){"slow", 1, 2, 1000, 1e9, 500, 100};
	c->nnodes = 2;
	c->ndevices = 4;
	c->latency = 0.001;
	c->alpha = c->beta = 1;
}

static void
test_links(void)
{
	Cluster c;
	two_kinds(&c);
	int node, kind, slot;
	ir_cluster_device(&c, 3, &node, &kind, &slot);
	CU_ASSERT(node == 1 && kind == 1 && slot == 1);
	CU_ASSERT_DOUBLE_EQUAL(ir_cluster_link(&c, 0, 1), 1000, 0);
	CU_ASSERT_DOUBLE_EQUAL(ir_cluster_link(&c, 2, 3), 500, 0);
	CU_ASSERT_DOUBLE_EQUAL(ir_cluster_link(&c, 1, 2), 50, 0);
	int ring[3] = {0, 1, 3};
	CU_ASSERT_DOUBLE_EQUAL(cm_ring_bw(&c, ring, 3), 50, 0); /* 1-3 and 3-0 cross */
	CU_ASSERT_DOUBLE_EQUAL(cm_ring_bw(&c, ring, 2), 1000, 0);
	int rows, cols;
	ir_cluster_shape(&c, &rows, &cols);
	CU_ASSERT(rows == 2 && cols == 2);
	c.kinds[1].devices = 1;
	c.ndevices = 3;
	ir_cluster_shape(&c, &rows, &cols);
	CU_ASSERT(rows == 1 && cols == 3);
}

/* x f32[4,8] -> MatMul W1 [8,16] (subgraph 0) -> MatMul W2 [16,8]
 * (subgraph 1): 1024 FLOPs each, 512-byte weights, h of 256 bytes
 * crossing the cut. */
static Graph *
two_layers(void)
{
	Graph *g = ir_new("two");
	int64_t dx[2] = {4, 8}, dw1[2] = {8, 16}, dh[2] = {4, 16}, dw2[2] = {16, 8}, dy[2] = {4, 8};
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	TensorId w1 = ir_add_tensor(g, "w1", TK_WEIGHT, DT_F32);
	TensorId h = ir_add_tensor(g, "h", TK_VALUE, DT_F32);
	TensorId w2 = ir_add_tensor(g, "w2", TK_WEIGHT, DT_F32);
	TensorId y = ir_add_tensor(g, "y", TK_VALUE, DT_F32);
	ir_set_shape(&g->tensors[x], 2, dx);
	ir_set_shape(&g->tensors[w1], 2, dw1);
	ir_set_shape(&g->tensors[h], 2, dh);
	ir_set_shape(&g->tensors[w2], 2, dw2);
	ir_set_shape(&g->tensors[y], 2, dy);
	ir_add_input(g, x);
	TensorId in1[2] = {x, w1}, in2[2] = {h, w2};
	NodeId a = ir_add_node(g, OP_MatMul, "fc1", 2, in1, 1, &h);
	NodeId b = ir_add_node(g, OP_MatMul, "fc2", 2, in2, 1, &y);
	ir_add_output(g, y);
	g->nodes[a].subgraph = 0;
	g->nodes[b].subgraph = 1;
	g->nsubgraphs = 2;
	ir_reindex(g);
	two_kinds(&g->cluster);
	g->cost.train = true;
	return g;
}

/*
 * dp 2, pp 2, micro-batches of 1 row (M = 2), training.  Placement tp, dp,
 * pp node by node: stage 0 of both replicas on the fast node, stage 1 on
 * the slow one.  Per replica, a quarter of the batch per micro-batch:
 *   t0 = 3 x 256 FLOPs / 2000 = 0.384, t1 = 3 x 256 / 1000 = 0.768,
 *   c0 = 2 x (0.001 + 64 bytes / 50) = 2.562 (forward and backward),
 *   eq. 4: (2 - 1) x 0.768 + 0.384 + 0.768 + 2.562 = 4.482;
 *   DP sync of stage 1's 512 bytes over the slow node's link (500 B/s):
 *   0.001 + 2 x 1/2 x 512 / 500 = 1.025 (stage 0's, 0.513, is faster);
 *   eq. 2: 4.482 + 1.025 = 5.507.
 * Memory: stage 0 holds 4 x 512 (weights, gradients, Adam's moments) and
 * 2 micro-batches of 64 bytes of activations in flight: 2176.
 */
static void
test_cost_by_hand(void)
{
	Graph *g = two_layers();
	CostCtx cm;
	cm_init(&cm, g);
	CU_ASSERT_EQUAL(cm.batch, 4);
	CU_ASSERT_EQUAL(cm.nsub, 2);
	const SubCost *sc = cm_subcosts(&cm, 1);
	CU_ASSERT_DOUBLE_EQUAL(sc[0].flops, 1024, 0);
	CU_ASSERT_DOUBLE_EQUAL(sc[1].flops, 1024, 0);
	CU_ASSERT_DOUBLE_EQUAL(sc[0].weight_bytes, 512, 0);
	CU_ASSERT_DOUBLE_EQUAL(sc[0].cross_bytes, 256, 0);
	CU_ASSERT_DOUBLE_EQUAL(sc[1].cross_bytes, 0, 0);
	PlanChoice p = {.dp = 2, .tp = 1, .pp = 2, .mbs = 1, .micro = 2, .place = 0};
	int cut[3];
	cm_evaluate(&cm, &p, cut);
	CU_ASSERT(cut[0] == 0 && cut[1] == 1 && cut[2] == 2);
	CU_ASSERT_DOUBLE_EQUAL(p.pipeline, 4.482, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(p.dpsync, 1.025, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(p.seconds, 5.507, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(p.memory, 2176, 1e-9);

	/* order pp, tp, dp: each replica's pipeline inside one node.  Replica
	 * 0 (fast): 0.384 + 2 x 0.384 + 2 (0.001 + 64/1000) = 1.282; replica 1
	 * (slow): 0.768 + 1.536 + 2 (0.001 + 64/500) = 2.562, the slower;
	 * the DP groups now cross nodes: 0.001 + 512/50 = 10.241. */
	p = (PlanChoice){.dp = 2, .tp = 1, .pp = 2, .mbs = 1, .micro = 2, .place = 8};
	CU_ASSERT_STRING_EQUAL(ir_place_order(8), "pp,tp,dp");
	cm_evaluate(&cm, &p, NULL);
	CU_ASSERT_DOUBLE_EQUAL(p.pipeline, 2.562, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(p.dpsync, 10.241, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(p.seconds, 12.803, 1e-9);

	/* with a call cost of 0.01 s and streaming at 1000 and 500 B/s: each
	 * micro-batch's MatMul reads 32 + 512 bytes and writes 64 (x, h and y
	 * scale with the batch, the weights do not), so
	 *   t0 = 3 (256/2000 + 0.01 + 608/1000) = 2.238,
	 *   t1 = 3 (256/1000 + 0.01 + 608/500) = 4.446,
	 *   eq. 4: 4.446 + 2.238 + 4.446 + 2.562 = 13.692, + 1.025 */
	g->cluster.op_latency = 0.01;
	g->cluster.kinds[0].mem_bw = 1000;
	g->cluster.kinds[1].mem_bw = 500;
	cm_free(&cm);
	cm_init(&cm, g);
	p = (PlanChoice){.dp = 2, .tp = 1, .pp = 2, .mbs = 1, .micro = 2, .place = 0};
	cm_evaluate(&cm, &p, NULL);
	CU_ASSERT_DOUBLE_EQUAL(p.pipeline, 13.692, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(p.seconds, 14.717, 1e-9);
	g->cluster.op_latency = 0;
	g->cluster.kinds[0].mem_bw = g->cluster.kinds[1].mem_bw = 0;

	/* inference: no backward, no DP sync, one micro-batch in flight */
	g->cost.train = false;
	cm_free(&cm);
	cm_init(&cm, g);
	p = (PlanChoice){.dp = 2, .tp = 1, .pp = 2, .mbs = 1, .micro = 2, .place = 0};
	cm_evaluate(&cm, &p, NULL);
	/* 0.256 + 0.128 + 0.256 + (0.001 + 64/50) */
	CU_ASSERT_DOUBLE_EQUAL(p.seconds, 1.921, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(p.dpsync, 0, 0);
	CU_ASSERT_DOUBLE_EQUAL(p.memory, 512 + 64, 1e-9);

	/* memory is a hard limit */
	g->cluster.kinds[0].memory = 500;
	cm_free(&cm);
	cm_init(&cm, g);
	cm_evaluate(&cm, &p, NULL);
	CU_ASSERT(p.seconds < 0);
	cm_free(&cm);
	ir_free(g);
}

/* ------------------------------------------------------- the search */

/* fixture NAME at batch B, through the passes before mesh-map, on c */
static Graph *
before_map(const char *name, int64_t batch, const Cluster *c, bool train)
{
	char rel[256];
	snprintf(rel, sizeof rel, "test/e2e/%s/model.onnx", name);
	OnnxOptions o = {.batch = batch};
	diag_reset();
	Graph *g = onnx_load(srcpath(rel), &o);
	if (!g) {
		fprintf(stderr, "load %s: %s\n", rel, diag_last);
		return NULL;
	}
	g->cluster = *c;
	g->cost.train = train;
	PassCtx cx = {.min_duplicate = 2};
	PassOptions po = {.print_before = "", .print_after = "", .stop_after = "", .ir_dump_dir = ""};
	if (!pass_run_pipeline(g, &cx, "verify,fold-constants,strip-aux,graph-nodes,fold-scopes,"
	    "pipe-shard", &po)) {
		fprintf(stderr, "passes %s: %s\n", rel, diag_last);
		ir_free(g);
		return NULL;
	}
	return g;
}

static bool
plan(const char *name, int64_t batch, const Cluster *c, PassCtx *cx, PlanSearch *out)
{
	Graph *g = before_map(name, batch, c, true);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	bool ok = pass_mesh_map(g, cx);
	if (ok)
		*out = g->search;
	ir_free(g);
	return ok;
}

/* AMP §5.1's kind of cluster: 4 nodes of 4 devices */
static void
homogeneous(Cluster *c)
{
	CostModel m = {.flops = 4.37e12, .bw_intra = 9.375e9, .bw_inter = 6.25e9, .latency = 1e-5,
		.memory = 1.2e10};
	ir_cluster_mesh(c, 4, 4, &m);
}

/* AMP §5.2's: 3 nodes of 4 fast devices, 4 nodes of 1 slow device */
static void
heterogeneous(Cluster *c)
{
	memset(c, 0, sizeof *c);
	c->nkinds = 2;
	c->kinds[0] = (NodeKind){"a100x4", 3, 4, 1.56e14, 4e10, 3e11, 1.25e9};
	c->kinds[1] = (NodeKind){"k80x1", 4, 1, 4.37e12, 1.2e10, 0, 7.5e9};
	c->nnodes = 7;
	c->ndevices = 16;
	c->latency = 1e-5;
	c->alpha = c->beta = 1;
}

/* The exhaustive search finds the minimum of an enumeration written here,
 * over a space of the size counted here. */
static void
test_exhaustive_is_minimum(void)
{
	Cluster c;
	heterogeneous(&c);
	Graph *g = before_map("gpt", 16, &c, true);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CostCtx cm;
	cm_init(&cm, g);
	double best = INFINITY;
	int64_t count = 0;
	int N = 16, dev[PLACE_COUNT][16];
	for (int dp = 1; dp <= N; dp++)
		for (int tp = 1; dp * tp <= N; tp++) {
			if (N % (dp * tp) || 16 % dp)
				continue;
			int pp = N / (dp * tp);
			if (pp > cm.nsub)
				continue;
			int nd = 0;
			for (int p = 0; p < PLACE_COUNT; p++) {
				ir_place(&c, dp, tp, pp, p, dev[nd]);
				bool dup = false;
				for (int q = 0; q < nd; q++)
					dup |= memcmp(dev[q], dev[nd], sizeof dev[0]) == 0;
				if (dup)
					continue;
				nd++;
				for (int64_t b = 1; b <= 16 / dp; b++) {
					if ((16 / dp) % b)
						continue;
					count++;
					PlanChoice x = {.dp = dp, .tp = tp, .pp = pp, .mbs = b,
						.micro = (int)(16 / dp / b), .place = p};
					cm_evaluate(&cm, &x, NULL);
					if (x.seconds >= 0 && x.seconds < best)
						best = x.seconds;
				}
			}
		}
	cm_free(&cm);
	PassCtx cx = {.search = SEARCH_EXHAUSTIVE};
	CU_ASSERT_TRUE_FATAL(pass_mesh_map(g, &cx));
	CU_ASSERT_STRING_EQUAL(g->search.method, "exhaustive");
	CU_ASSERT_EQUAL(g->search.total, count);
	CU_ASSERT_DOUBLE_EQUAL(g->search.chosen.seconds, best, 1e-15);
	CU_ASSERT(g->search.ntop == PLAN_TOP);
	for (int i = 1; i < g->search.ntop; i++)
		CU_ASSERT(g->search.top[i].seconds >= g->search.top[i - 1].seconds);
	/* the plan is applied: degrees, a micro-batch's shapes, the placement */
	PlanChoice *ch = &g->search.chosen;
	CU_ASSERT_EQUAL(g->mesh.dp * g->mesh.tp * g->mesh.pp, 16);
	CU_ASSERT_EQUAL(g->mesh.dp, ch->dp);
	CU_ASSERT_EQUAL(g->microbatches, ch->micro);
	CU_ASSERT_EQUAL(g->tensors[g->inputs[0]].dims[0], ch->mbs);
	ir_place(&c, ch->dp, ch->tp, ch->pp, ch->place, dev[0]);
	CU_ASSERT_EQUAL(memcmp(g->device, dev[0], sizeof(int) * 16), 0);
	ir_free(g);
}

/* No forced (dp, tp, pp) beats the free choice (AMP §5.1's setup), and the
 * free choice is one of them. */
static void
test_forced_never_better(void)
{
	Cluster c;
	homogeneous(&c);
	PassCtx free_cx = {0};
	PlanSearch fs = {0}, s = {0};
	CU_ASSERT_TRUE_FATAL(plan("gpt", 16, &c, &free_cx, &fs));
	int feasible = 0, equal = 0;
	for (int dp = 1; dp <= 16; dp *= 2)
		for (int tp = 1; dp * tp <= 16; tp *= 2) {
			PassCtx cx = {.dp = dp, .tp = tp, .pp = 16 / (dp * tp)};
			quiet_diags();
			if (!plan("gpt", 16, &c, &cx, &s))
				continue;       /* more stages than subgraphs */
			feasible++;
			CU_ASSERT(s.chosen.seconds >= fs.chosen.seconds - 1e-15);
			equal += s.chosen.seconds == fs.chosen.seconds;
			CU_ASSERT(s.chosen.dp == dp && s.chosen.tp == tp);
		}
	CU_ASSERT(feasible >= 10);
	CU_ASSERT(equal >= 1);
	/* and on the heterogeneous cluster, the free choice beats Megatron's */
	heterogeneous(&c);
	CU_ASSERT_TRUE_FATAL(plan("gpt", 16, &c, &free_cx, &fs));
	CU_ASSERT(fs.megatron.dp > 0);
	CU_ASSERT(fs.chosen.seconds <= fs.megatron.seconds);
}

/* Megatron's rule (AMP §5): tp at most the smallest node's devices, its
 * own placement, and for its micro-batch size no smaller tp x pp fits. */
static void
test_megatron_rule(void)
{
	Cluster c;
	heterogeneous(&c);
	c.kinds[1].memory = 2.5e6; /* tight enough that one device cannot hold all */
	Graph *g = before_map("gpt", 16, &c, true);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	PassCtx cx = {0};
	CU_ASSERT_TRUE_FATAL(pass_mesh_map(g, &cx));
	PlanChoice m = g->search.megatron;
	CU_ASSERT_FATAL(m.dp > 0);
	CU_ASSERT_EQUAL(m.tp, 1);       /* the k80 nodes have one device */
	CU_ASSERT_EQUAL(m.place, 0);
	CU_ASSERT(m.pp > 1);            /* the memory limit bites */
	ir_free(g);
	g = before_map("gpt", 16, &c, true);
	CostCtx cm;
	cm_init(&cm, g);
	for (int pp = 1; pp < m.pp; pp++) { /* tp = 1: the product is pp */
		if (16 % pp)
			continue;
		int dp = 16 / pp;
		if (16 % dp || (16 / dp) % m.mbs)
			continue;
		PlanChoice x = {.dp = dp, .tp = 1, .pp = pp, .mbs = m.mbs,
			.micro = (int)(16 / dp / m.mbs), .place = 0};
		cm_evaluate(&cm, &x, NULL);
		CU_ASSERT(x.seconds < 0);
	}
	cm_free(&cm);
	ir_free(g);
}

/* Simulated annealing (Algorithm 1) reaches within 1% of the exhaustive
 * search, seed after seed, on spaces small enough to enumerate. */
static void
test_annealing_close(void)
{
	Cluster cs[3];
	homogeneous(&cs[0]);
	heterogeneous(&cs[1]);
	CostModel big = {.flops = 1e14, .bw_intra = 3e11, .bw_inter = 2.5e10, .latency = 1e-5,
		.memory = 4e10};
	ir_cluster_mesh(&cs[2], 32, 8, &big);
	int64_t batch[3] = {16, 32, 64};
	for (int k = 0; k < 3; k++) {
		PassCtx ex = {.search = SEARCH_EXHAUSTIVE};
		PlanSearch e = {0}, a = {0};
		CU_ASSERT_TRUE_FATAL(plan("gpt", batch[k], &cs[k], &ex, &e));
		for (unsigned seed = 1; seed <= 4; seed++) {
			PassCtx cx = {.search = SEARCH_ANNEAL, .seed = seed};
			CU_ASSERT_TRUE_FATAL(plan("gpt", batch[k], &cs[k], &cx, &a));
			CU_ASSERT_STRING_EQUAL(a.method, "simulated annealing");
			CU_ASSERT(a.chosen.seconds <= 1.01 * e.chosen.seconds);
			CU_ASSERT(a.chosen.seconds >= e.chosen.seconds - 1e-15);
		}
	}
}

/* A space over the enumeration limit is annealed, and the search stays
 * cheap: a small fraction of the space evaluated, no worse than Megatron. */
static void
test_large_space(void)
{
	Cluster c;
	CostModel m = {.flops = 1e14, .bw_intra = 3e11, .bw_inter = 2.5e10, .latency = 1e-5,
		.memory = 1e15};
	ir_cluster_mesh(&c, 90, 8, &m); /* 720 devices: 30 divisors */
	PassCtx cx = {0};
	PlanSearch s = {0};
	CU_ASSERT_TRUE_FATAL(plan("gpt", 1441440, &c, &cx, &s)); /* 288 divisors */
	CU_ASSERT(s.total > 100000);
	CU_ASSERT_STRING_EQUAL(s.method, "simulated annealing");
	CU_ASSERT(s.evaluated < s.total / 5);
	CU_ASSERT(s.megatron.dp == 0 || s.chosen.seconds <= s.megatron.seconds);
}

/* The memory limit: the plan fits, or tapc says none does. */
static void
test_memory_limit(void)
{
	Cluster c;
	CostModel m = {.flops = 1e12, .bw_intra = 1e10, .bw_inter = 1e9, .latency = 1e-5,
		.memory = 1.2e6};
	ir_cluster_mesh(&c, 1, 4, &m);
	PassCtx cx = {0};
	PlanSearch s = {0};
	CU_ASSERT_TRUE_FATAL(plan("gpt", 4, &c, &cx, &s));
	CU_ASSERT(s.chosen.memory <= 1.2e6);
	CU_ASSERT(s.chosen.tp * s.chosen.pp > 1); /* a whole replica does not fit */
	c.kinds[0].memory = 1e4;
	quiet_diags();
	CU_ASSERT_FALSE(plan("gpt", 4, &c, &cx, &s));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "no plan fits in memory"));
}

void
suite_planner(CU_pSuite s)
{
	ADD(s, test_place);
	ADD(s, test_links);
	ADD(s, test_cost_by_hand);
	ADD(s, test_exhaustive_is_minimum);
	ADD(s, test_forced_never_better);
	ADD(s, test_megatron_rule);
	ADD(s, test_annealing_close);
	ADD(s, test_large_space);
	ADD(s, test_memory_limit);
}
