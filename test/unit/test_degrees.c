/*
 * test_degrees.c - the degree rule (passes/degrees.c).
 *
 * The model facts against the fixtures' own configurations
 * (test/e2e/gen_fixtures.py: GPT has 4 heads of width 16 in 64, the MLP
 * 64-wide hidden layers), hand-worked meshes for Megatron's rule and its
 * fallbacks, forced degrees kept or refused, and the invariants of every
 * answer over a grid of meshes, batches, subgraph counts and divisors:
 * dp x tp x pp is the device count, forced degrees are kept, replicas and
 * micro-batches divide the batch, and without forced degrees every mesh
 * gets an answer.
 */
#include "test/unit/util.h"

#include "passes/degrees.h"

static void
test_facts(void)
{
	Graph *g = fixture_graph("gpt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	ModelFacts f;
	degrees_facts(g, &f);
	CU_ASSERT_EQUAL(f.batch, 1);
	CU_ASSERT(f.heads >= 2);        /* q, k and v of both blocks */
	CU_ASSERT_EQUAL(f.hidden, 64);  /* 64, 192 (fused qkv), 256; the 128-word head excluded */
	CU_ASSERT_EQUAL(f.divisor, 4);  /* 4 heads */
	ir_free(g);

	g = fixture_graph("mlp");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	degrees_facts(g, &f);
	CU_ASSERT_EQUAL(f.heads, 0);
	CU_ASSERT_EQUAL(f.divisor, 64); /* 64, 64; the 10-class output layer excluded */
	ir_free(g);
}

typedef struct {
	int rows, cols;
	DegreeRequest q;
	ModelFacts f;
	bool ok;
	int dp, tp, pp, micro;
} Case;

static void
test_rule(void)
{
	ModelFacts gpt1 = {.batch = 1, .subgraphs = 6, .divisor = 4, .heads = 4, .hidden = 64};
	ModelFacts gpt4 = gpt1, mlp1 = {.batch = 1, .subgraphs = 3, .divisor = 64, .hidden = 64};
	ModelFacts none = {.batch = 1, .subgraphs = 1};
	gpt4.batch = 4;
	const Case cases[] = {
		{1, 1, {0}, gpt1, true, 1, 1, 1, 1},
		{1, 2, {0}, gpt1, true, 1, 2, 1, 1},       /* TP inside the node */
		{1, 8, {0}, gpt4, true, 2, 4, 1, 1},       /* tp 4 (heads), dp 2 for the rest */
		{1, 8, {0}, gpt1, true, 1, 4, 2, 1},       /* batch 1: the rest to stages */
		{2, 2, {0}, gpt4, true, 1, 2, 2, 4},       /* PP across nodes, 4 micro-batches */
		{2, 8, {0}, gpt4, true, 2, 4, 2, 2},       /* 16 ranks: 2 replicas of batch 2 */
		{2, 8, {0}, gpt1, true, 1, 4, 4, 1},
		{2, 8, {0}, mlp1, true, 1, 8, 2, 1},
		{4, 1, {0}, mlp1, true, 1, 2, 2, 1},       /* 3 subgraphs: 2 of the 4 rows, TP the rest */
		{2, 2, {0}, none, true, 1, 4, 1, 1},       /* nothing divides: a wider TP group */
		{1, 4, {.pp = 2}, gpt1, true, 1, 2, 2, 1}, /* -pp: TP takes the rest */
		{1, 4, {.tp = 2}, gpt4, true, 2, 2, 1, 1},
		{2, 4, {.dp = 2, .tp = 2, .pp = 2}, gpt4, true, 2, 2, 2, 2},
		{2, 4, {.dp = 2, .tp = 2, .pp = 2, .microbatches = 1}, gpt4, true, 2, 2, 2, 1},
		{2, 4, {.dp = 2}, gpt4, true, 2, 4, 1, 1}, /* the rest: tp 4 inside the row */
		{2, 4, {.dp = 2, .tp = 2, .pp = 2}, gpt1, false, 0, 0, 0, 0}, /* batch 1 */
		{2, 4, {.dp = 3}, gpt4, false, 0, 0, 0, 0},                   /* 3 does not divide 8 */
		{2, 4, {.dp = 2, .tp = 2, .pp = 1}, gpt4, false, 0, 0, 0, 0}, /* 4 of 8 devices */
		{1, 8, {.tp = 2, .pp = 2}, mlp1, false, 0, 0, 0, 0},          /* no room for dp 2 */
		{1, 2, {.pp = 2, .microbatches = 3}, gpt4, false, 0, 0, 0, 0},
	};
	quiet_diags();
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const Case *c = &cases[i];
		Mesh mesh = {c->rows, c->cols, 0, 0, 0}, out;
		int micro = 0;
		char rule[1024];
		bool ok = degrees_choose(&mesh, &c->q, &c->f, "m.onnx", &out, &micro, rule, sizeof rule);
		CU_ASSERT_EQUAL(ok, c->ok);
		if (ok != c->ok || !ok)
			continue;
		if (out.dp != c->dp || out.tp != c->tp || out.pp != c->pp || micro != c->micro)
			fprintf(stderr, "\ncase %zu: %dx%d got dp %d tp %d pp %d M %d: %s\n", i, c->rows,
			    c->cols, out.dp, out.tp, out.pp, micro, rule);
		CU_ASSERT_EQUAL(out.dp, c->dp);
		CU_ASSERT_EQUAL(out.tp, c->tp);
		CU_ASSERT_EQUAL(out.pp, c->pp);
		CU_ASSERT_EQUAL(micro, c->micro);
		CU_ASSERT_EQUAL(out.rows, c->rows);
		CU_ASSERT_EQUAL(out.cols, c->cols);
	}
	diag_stream = stderr;
}

static void
test_invariants(void)
{
	static const int64_t batches[] = {1, 2, 4, 6, 8};
	static const int64_t divisors[] = {0, 2, 4, 6, 64};
	int answered = 0;
	quiet_diags();
	for (int rows = 1; rows <= 4; rows++)
		for (int cols = 1; cols <= 8; cols++)
			for (int bi = 0; bi < 5; bi++)
				for (int di = 0; di < 5; di++)
					for (int sub = 1; sub <= 6; sub++)
						for (int forced = 0; forced < 8; forced++) {
		int N = rows * cols;
		/* force a subset of {dp 2, tp 2, pp 2} */
		DegreeRequest q = {forced & 1 ? 2 : 0, forced & 2 ? 2 : 0, forced & 4 ? 2 : 0, 0};
		ModelFacts f = {.batch = batches[bi], .subgraphs = sub, .divisor = divisors[di]};
		Mesh mesh = {rows, cols, 0, 0, 0}, out;
		int micro = 0;
		char rule[1024];
		bool ok = degrees_choose(&mesh, &q, &f, "m.onnx", &out, &micro, rule, sizeof rule);
		if (!forced)
			CU_ASSERT(ok); /* every mesh compiles */
		if (!ok)
			continue;
		answered++;
		CU_ASSERT_EQUAL(out.dp * out.tp * out.pp, N);
		CU_ASSERT(!q.dp || out.dp == q.dp);
		CU_ASSERT(!q.tp || out.tp == q.tp);
		CU_ASSERT(!q.pp || out.pp == q.pp);
		CU_ASSERT_EQUAL(f.batch % out.dp, 0);
		CU_ASSERT(micro >= 1 && (f.batch / out.dp) % micro == 0);
		CU_ASSERT(micro <= 2 * out.pp);
		if (!q.pp && !q.dp)
			CU_ASSERT(out.pp <= sub);
		CU_ASSERT(rule[0] != 0);
	}
	CU_ASSERT(answered > 10000);
	diag_stream = stderr;
}

void
suite_degrees(CU_pSuite s)
{
	ADD(s, test_facts);
	ADD(s, test_rule);
	ADD(s, test_invariants);
}
