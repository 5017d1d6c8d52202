/*
 * test_passes.c - the pass manager, verify and fold-constants on graphs
 * built by hand, with expected results worked out from the ONNX spec.
 */
#include <math.h>
#include <string.h>

#include "frontend/onnx.h"
#include "passes/passes.h"
#include "test/unit/util.h"

static TensorId
konst(Graph *g, DType dt, int rank, const int64_t *dims, const void *vals, size_t bytes)
{
	TensorId t = ir_add_tensor(g, "", TK_CONST, dt);
	Tensor *tt = ir_tensor(g, t);
	ir_set_shape(tt, rank, dims);
	tt->data = DATA_INLINE;
	tt->bytes = ir_alloc(&g->arena, bytes + 1);
	memcpy(tt->bytes, vals, bytes);
	tt->length = (int64_t)bytes;
	return t;
}

static TensorId
value(Graph *g, const char *name)
{
	return ir_add_tensor(g, name, TK_VALUE, DT_UNDEF);
}

/*
 * x f32[2,3,4]; y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0), [0]), [12]))
 * The shape is [2,12]: Shape gives [2,3,4], element 0 is 2.
 */
static Graph *
shape_chain(void)
{
	Graph *g = ir_new("chain");
	g->opset = 13;
	int64_t xd[3] = {2, 3, 4}, one[1] = {1};
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 3, xd);
	ir_add_input(g, x);
	int64_t zero = 0, axes0 = 0, twelve = 12;
	TensorId idx = konst(g, DT_I64, 0, NULL, &zero, 8);
	TensorId axes = konst(g, DT_I64, 1, one, &axes0, 8);
	TensorId c12 = konst(g, DT_I64, 1, one, &twelve, 8);
	TensorId s = value(g, "s"), b = value(g, "b"), ub = value(g, "ub");
	TensorId shp = value(g, "shape"), y = value(g, "y");
	ir_add_node(g, OP_Shape, "shape", 1, &x, 1, &s);
	TensorId gin[2] = {s, idx}, uin[2] = {b, axes}, cin[2] = {ub, c12}, rin[2] = {x, shp};
	ir_add_node(g, OP_Gather, "gather", 2, gin, 1, &b);
	ir_add_node(g, OP_Unsqueeze, "unsq", 2, uin, 1, &ub);
	NodeId cat = ir_add_node(g, OP_Concat, "cat", 2, cin, 1, &shp);
	ir_set_attr(g, cat, "axis", ATTR_INT)->i = 0;
	ir_add_node(g, OP_Reshape, "reshape", 2, rin, 1, &y);
	ir_add_output(g, y);
	ir_reindex(g);
	return g;
}

static void
fold_shape_chain(void)
{
	Graph *g = shape_chain();
	PassCtx cx = {0};
	CU_ASSERT_TRUE_FATAL(ir_infer_all(g));
	CU_ASSERT_TRUE(pass_verify(g, &cx));
	CU_ASSERT_TRUE_FATAL(pass_fold_constants(g, &cx));
	CU_ASSERT_TRUE(pass_verify(g, &cx));
	CU_ASSERT_EQUAL_FATAL(g->nnodes, 1);
	Node *r = &g->nodes[0];
	CU_ASSERT_EQUAL(r->op, OP_Reshape);
	Tensor *shp = &g->tensors[r->in[1]];
	CU_ASSERT_EQUAL(shp->kind, TK_CONST);
	CU_ASSERT_EQUAL(shp->data, DATA_INLINE);
	CU_ASSERT_EQUAL_FATAL(ir_numel(shp), 2);
	CU_ASSERT_EQUAL(((int64_t *)shp->bytes)[0], 2);
	CU_ASSERT_EQUAL(((int64_t *)shp->bytes)[1], 12);
	Tensor *y = &g->tensors[g->outputs[0]];
	CU_ASSERT_EQUAL(y->rank, 2);
	CU_ASSERT_EQUAL(y->dims[0], 2);
	CU_ASSERT_EQUAL(y->dims[1], 12);
	ir_free(g);
}

/* fold-constants never copies floating-point weights into the IR */
static void
fold_keeps_weights(void)
{
	Graph *g = ir_new("w");
	g->opset = 13;
	int64_t d[1] = {4};
	TensorId w = ir_add_tensor(g, "w", TK_WEIGHT, DT_F32);
	Tensor *wt = ir_tensor(g, w);
	ir_set_shape(wt, 1, d);
	static float wv[4] = {1, 2, 3, 4};
	wt->data = DATA_INLINE; /* even inline weights stay weights behind Identity */
	wt->bytes = wv;
	wt->length = 16;
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 1, d);
	ir_add_input(g, x);
	TensorId y = value(g, "y");
	TensorId in[2] = {x, w};
	ir_add_node(g, OP_Add, "add", 2, in, 1, &y);
	ir_add_output(g, y);
	ir_reindex(g);
	PassCtx cx = {0};
	CU_ASSERT_TRUE_FATAL(ir_infer_all(g));
	CU_ASSERT_TRUE(pass_fold_constants(g, &cx));
	CU_ASSERT_EQUAL(g->nnodes, 1); /* x is unknown: nothing to fold */
	CU_ASSERT_EQUAL(g->tensors[g->nodes[0].in[1]].kind, TK_WEIGHT);
	ir_free(g);
}

static void
verify_use_before_def(void)
{
	Graph *g = ir_new("bad");
	int64_t d[1] = {3};
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 1, d);
	ir_add_input(g, x);
	TensorId a = value(g, "a"), b = value(g, "b");
	ir_set_shape(ir_tensor(g, a), 1, d);
	ir_set_shape(ir_tensor(g, b), 1, d);
	ir_tensor(g, a)->dtype = ir_tensor(g, b)->dtype = DT_F32;
	ir_add_node(g, OP_Relu, "uses_a", 1, &a, 1, &b); /* a is defined below */
	ir_add_node(g, OP_Neg, "defines_a", 1, &x, 1, &a);
	ir_add_output(g, b);
	ir_reindex(g);
	PassCtx cx = {0};
	quiet_diags();
	CU_ASSERT_FALSE(pass_verify(g, &cx));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "node 'uses_a' (Relu): verify: input 0 ('a') is used before it is defined"));
	ir_free(g);
}

static void
verify_two_producers_and_shapeless(void)
{
	Graph *g = ir_new("bad");
	int64_t d[1] = {3};
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 1, d);
	ir_add_input(g, x);
	TensorId a = value(g, "a");
	ir_set_shape(ir_tensor(g, a), 1, d);
	ir_tensor(g, a)->dtype = DT_F32;
	ir_add_node(g, OP_Relu, "first", 1, &x, 1, &a);
	ir_add_node(g, OP_Neg, "second", 1, &x, 1, &a);
	ir_add_output(g, a);
	PassCtx cx = {0};
	quiet_diags();
	CU_ASSERT_FALSE(pass_verify(g, &cx));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "node 'second' (Neg): verify: output 0 ('a') is produced twice"));
	ir_free(g);

	g = ir_new("shapeless");
	x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 1, d);
	ir_add_input(g, x);
	a = value(g, "a");
	ir_add_node(g, OP_Relu, "r", 1, &x, 1, &a);
	ir_add_output(g, a);
	quiet_diags();
	CU_ASSERT_FALSE(pass_verify(g, &cx));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "verify: output 0 ('a') has no shape"));
	ir_free(g);
}

static void
registry(void)
{
	CU_ASSERT_PTR_NOT_NULL(pass_lookup("verify"));
	CU_ASSERT_PTR_NOT_NULL(pass_lookup("fold-constants"));
	CU_ASSERT_PTR_NULL(pass_lookup("fold_constants"));
	quiet_diags();
	CU_ASSERT_TRUE(pass_check_pipeline(PASS_DEFAULT_PIPELINE, "-passes"));
	CU_ASSERT_FALSE(pass_check_pipeline("verify,bogus", "-passes"));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "unknown pass 'bogus' in -passes"));
	for (int i = 0; i < pass_count; i++)
		CU_ASSERT_PTR_EQUAL(pass_lookup(pass_registry[i].name), &pass_registry[i]);
}

/* -stop-after ends the pipeline; -print-after prints only after that pass */
static void
pipeline_options(void)
{
	Graph *g = shape_chain();
	CU_ASSERT_TRUE_FATAL(ir_infer_all(g));
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	PassOptions o = {.print_before = "", .print_after = "verify", .stop_after = "verify",
		.ir_dump_dir = "", .print_stream = f};
	PassCtx cx = {0};
	diag_reset();
	CU_ASSERT_TRUE(pass_run_pipeline(g, &cx, "verify,fold-constants", &o));
	fclose(f);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "*** IR Dump After verify ***\ngraph \"chain\""));
	CU_ASSERT_PTR_NULL(strstr(buf, "fold-constants"));
	CU_ASSERT_EQUAL(g->nnodes, 5); /* fold-constants did not run */
	free(buf);
	ir_free(g);
}

/* ---------------------------------------------------------- pruning */

/* Every instance of a template has, at each position, a GraphNode with the
 * same op sequence as the first instance's (checked op by op, not by hash). */
static void
check_instances(Graph *g)
{
	for (int t = 0; t < g->ntemplates; t++) {
		Template *tp = &g->templates[t];
		for (int i = 1; i < tp->ninstances; i++)
			for (int k = 0; k < tp->ngroups; k++) {
				GraphNode *a = &g->groups[tp->inst[k]];
				GraphNode *b = &g->groups[tp->inst[i * tp->ngroups + k]];
				CU_ASSERT_EQUAL_FATAL(a->nnodes, b->nnodes);
				for (int j = 0; j < a->nnodes; j++)
					CU_ASSERT_EQUAL(g->nodes[a->nodes[j]].op, g->nodes[b->nodes[j]].op);
				CU_ASSERT_EQUAL(b->tmpl, t);
			}
	}
}

/* What we know of the fixtures (test/e2e/README.md): gpt and bert have two
 * identical blocks, t5 two encoder and two decoder blocks (two templates),
 * resmlp four residual blocks, resnet two stages of two blocks at
 * different widths (two templates), the others no repeats.  With and
 * without names. */
static void
fold_scopes_fixtures(void)
{
	static const struct {
		const char *name;
		int templates, instances;
		bool transformer;       /* several light ops per anchor */
	} want[] = {{"gpt", 1, 2, true}, {"bert", 1, 2, true}, {"t5", 2, 2, true},
		{"resmlp", 1, 4, false}, {"resnet", 2, 2, false}, {"mlp", 0, 0, false},
		{"cnn", 0, 0, false}, {"ln17", 0, 0, false}};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		for (int strip = 0; strip < 2; strip++) {
			Graph *g = fixture_graph_opt(want[i].name, strip);
			CU_ASSERT_PTR_NOT_NULL_FATAL(g);
			if (g->ntemplates != want[i].templates)
				fprintf(stderr, "%s%s: %d templates\n", want[i].name, strip ? " unnamed" : "",
				    g->ntemplates);
			CU_ASSERT_EQUAL(g->ntemplates, want[i].templates);
			for (int t = 0; t < g->ntemplates; t++)
				CU_ASSERT_EQUAL(g->templates[t].ninstances, want[i].instances);
			check_instances(g);
			/* grouping never splits an op; on transformers it folds several */
			CU_ASSERT_TRUE(g->ngroups <= g->nnodes);
			if (want[i].transformer)
				CU_ASSERT_TRUE(2 * g->ngroups < g->nnodes);
			ir_free(g);
		}
}

/* The named gpt template covers a whole block: ln_1 to the second residual. */
static void
fold_scopes_gpt_block(void)
{
	Graph *g = fixture_graph("gpt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL_FATAL(g->ntemplates, 1);
	Template *tp = &g->templates[0];
	CU_ASSERT_STRING_EQUAL(tp->name, "/h.#");
	for (int i = 0; i < tp->ninstances; i++) {
		char want[32];
		snprintf(want, sizeof want, "/h.%d/", i);
		for (int k = 0; k < tp->ngroups; k++) {
			GraphNode *gn = &g->groups[tp->inst[i * tp->ngroups + k]];
			for (int j = 0; j < gn->nnodes; j++)
				CU_ASSERT_EQUAL(strncmp(g->nodes[gn->nodes[j]].name, want, strlen(want)), 0);
		}
	}
	/* every op under /h.0/ is in the first instance */
	int in_block = 0, covered = 0;
	for (NodeId n = 0; n < g->nnodes; n++)
		if (strncmp(g->nodes[n].name, "/h.0/", 5) == 0) {
			in_block++;
			for (int k = 0; k < tp->ngroups; k++)
				covered += g->nodes[n].group == tp->inst[k];
		}
	CU_ASSERT_EQUAL(in_block, covered);
	ir_free(g);
}

/* -min-duplicate above the repeat count finds nothing */
static void
fold_scopes_min_duplicate(void)
{
	Graph *g = fixture_graph("gpt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	PassCtx cx = {.min_duplicate = 3};
	CU_ASSERT_TRUE(pass_fold_scopes(g, &cx));
	CU_ASSERT_EQUAL(g->ntemplates, 0);
	ir_free(g);
}

/* strip-aux keeps a weight reached through Identity one tensor */
static void
strip_aux_counts(void)
{
	Graph *g = fixture_graph("gpt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	for (NodeId n = 0; n < g->nnodes; n++) {
		CU_ASSERT_NOT_EQUAL(g->nodes[n].op, OP_Identity);
		CU_ASSERT_FALSE(g->nodes[n].dead);
	}
	ir_free(g);
}

/*
 * legalize-half on x f16[2,2] (input), w f16[2,2] (weight):
 *   a = Add(x, w); r = Relu(a); t = Transpose(r); y = Mul(t, w); outputs y, a
 * Add, Relu and Mul compute in f32 between Casts; Transpose moves the halves
 * as they are with -half=exact, Relu's f32 result with -half=f32; x is converted once, w at compile time into an f32 weight
 * (one for every stage: the Mul may be in another); a and y stay f16 graph
 * outputs.  A weight a backward node reads is not converted, and the
 * backward node is refused.
 */
static Graph *
half_graph(int mul_stage, Phase mul_phase)
{
	Graph *g = ir_new("half");
	g->opset = 17;
	int64_t d[2] = {2, 2};
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F16);
	ir_set_shape(ir_tensor(g, x), 2, d);
	ir_add_input(g, x);
	TensorId w = ir_add_tensor(g, "w", TK_WEIGHT, DT_F16);
	Tensor *wt = ir_tensor(g, w);
	ir_set_shape(wt, 2, d);
	/* 1, the smallest subnormal (2^-24), -inf, 0.333251953125 */
	static uint16_t wv[4] = {0x3c00, 0x0001, 0xfc00, 0x3555};
	wt->data = DATA_INLINE;
	wt->bytes = wv;
	wt->length = 8;
	TensorId a = value(g, "a"), r = value(g, "r"), t = value(g, "t"), y = value(g, "y");
	TensorId ain[2] = {x, w}, min[2] = {t, w};
	ir_add_node(g, OP_Add, "add", 2, ain, 1, &a);
	ir_add_node(g, OP_Relu, "relu", 1, &a, 1, &r);
	ir_add_node(g, OP_Transpose, "tr", 1, &r, 1, &t);
	NodeId mul = ir_add_node(g, OP_Mul, "mul", 2, min, 1, &y);
	for (NodeId n = 0; n < g->nnodes; n++)
		g->nodes[n].stage = 0;
	g->nodes[mul].stage = mul_stage;
	g->nodes[mul].phase = mul_phase;
	ir_add_output(g, y);
	ir_add_output(g, a);
	ir_reindex(g);
	CU_ASSERT_TRUE_FATAL(ir_infer_all(g));
	return g;
}

static int
casts_of(Graph *g, const char *name)
{
	int k = 0;
	for (NodeId n = 0; n < g->nnodes; n++)
		k += !g->nodes[n].dead && g->nodes[n].op == OP_Cast &&
		    !strcmp(g->tensors[g->nodes[n].in[0]].name, name);
	return k;
}

/* The live nodes' ops in order into ops[]; their count. */
static int
live_ops(Graph *g, Op *ops, int max)
{
	int k = 0;
	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead && k < max)
			ops[k++] = g->nodes[n].op;
	return k;
}

/* Every live node but the Casts and the Transpose reads and writes f32; y
 * and a are still the model's f16 outputs, y made by a Cast to f16; w's
 * f32 copy is one weight holding w's values. */
static void
check_half_graph(Graph *g)
{
	for (NodeId n = 0; n < g->nnodes; n++) {
		const Node *nd = &g->nodes[n];
		if (nd->dead || nd->op == OP_Cast || nd->op == OP_Transpose)
			continue;
		for (int i = 0; i < nd->nin; i++)
			CU_ASSERT_EQUAL(g->tensors[nd->in[i]].dtype, DT_F32);
		CU_ASSERT_EQUAL(g->tensors[nd->out[0]].dtype, DT_F32);
	}
	for (int i = 0; i < g->noutputs; i++)
		CU_ASSERT_EQUAL(g->tensors[g->outputs[i]].dtype, DT_F16);
	CU_ASSERT_STRING_EQUAL(g->tensors[g->outputs[0]].name, "y");
	CU_ASSERT_EQUAL(g->nodes[g->tensors[g->outputs[0]].producer].op, OP_Cast);
	CU_ASSERT_EQUAL(ir_attr_int(g, g->tensors[g->outputs[0]].producer, "to", 0), DT_F16);
	CU_ASSERT_EQUAL(casts_of(g, "w"), 0);
	int copies = 0;
	for (TensorId t = 0; t < g->ntensors; t++) {
		const Tensor *tt = &g->tensors[t];
		if (strcmp(tt->name, "w:to_f32"))
			continue;
		copies++;
		CU_ASSERT_EQUAL(tt->kind, TK_WEIGHT);
		CU_ASSERT_EQUAL_FATAL(tt->dtype, DT_F32);
		const float *v = tt->bytes;
		CU_ASSERT_EQUAL(v[0], 1.0f);
		CU_ASSERT_EQUAL(v[1], 0x1p-24f);
		CU_ASSERT_TRUE(isinf(v[2]) && v[2] < 0);
		CU_ASSERT_EQUAL(v[3], 0.333251953125f);
	}
	CU_ASSERT_EQUAL(copies, 1);
}

static void
legalize_half(void)
{
	PassCtx cx = {.half_exact = true};
	Op ops[16];

	/* -half=exact: Cast x, Add, Cast a, Cast a, Relu, Cast r, Transpose,
	 * Cast t, Mul, Cast y: every result rounded to its half */
	Graph *g = half_graph(0, PHASE_FWD);
	CU_ASSERT_TRUE_FATAL(pass_legalize_half(g, &cx));
	CU_ASSERT_TRUE(pass_verify(g, &cx));
	static const Op exact[] = {OP_Cast, OP_Add, OP_Cast, OP_Cast, OP_Relu, OP_Cast,
		OP_Transpose, OP_Cast, OP_Mul, OP_Cast};
	CU_ASSERT_EQUAL_FATAL(live_ops(g, ops, 16), 10);
	for (int i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(ops[i], exact[i]);
	CU_ASSERT_EQUAL(casts_of(g, "x"), 1);
	CU_ASSERT_EQUAL(casts_of(g, "a"), 1);
	CU_ASSERT_EQUAL(g->tensors[g->nodes[6].in[0]].dtype, DT_F16); /* Transpose */
	check_half_graph(g);
	ir_free(g);

	/* -half=f32 (the default): Relu reads the Add's f32 result, not a
	 * rounded a (which stays, an output); the Transpose moves Relu's f32
	 * result and the Mul reads it: no rounding of r or t */
	cx.half_exact = false;
	g = half_graph(0, PHASE_FWD);
	CU_ASSERT_TRUE_FATAL(pass_legalize_half(g, &cx));
	CU_ASSERT_TRUE(pass_verify(g, &cx));
	static const Op f32[] = {OP_Cast, OP_Add, OP_Cast, OP_Relu, OP_Transpose, OP_Mul, OP_Cast};
	CU_ASSERT_EQUAL_FATAL(live_ops(g, ops, 16), 7);
	for (int i = 0; i < 7; i++)
		CU_ASSERT_EQUAL(ops[i], f32[i]);
	CU_ASSERT_EQUAL(casts_of(g, "a"), 0);
	for (NodeId n = 0; n < g->nnodes; n++) {
		const Node *nd = &g->nodes[n];
		if (nd->op == OP_Relu)
			CU_ASSERT_EQUAL(g->nodes[g->tensors[nd->in[0]].producer].op, OP_Add);
		if (nd->op == OP_Transpose)
			CU_ASSERT_EQUAL(g->nodes[g->tensors[nd->in[0]].producer].op, OP_Relu);
		if (nd->op == OP_Mul)
			CU_ASSERT_EQUAL(g->nodes[g->tensors[nd->in[0]].producer].op, OP_Transpose);
	}
	check_half_graph(g);
	ir_free(g);

	/* the Mul in stage 1 reads the same converted w; the Transpose, in
	 * stage 0, still moves f32, and its result crosses to stage 1 as a
	 * half: rounded after it, converted back before the Mul */
	g = half_graph(1, PHASE_FWD);
	CU_ASSERT_TRUE_FATAL(pass_legalize_half(g, &cx));
	CU_ASSERT_TRUE(pass_verify(g, &cx));
	static const Op staged[] = {OP_Cast, OP_Add, OP_Cast, OP_Relu, OP_Transpose, OP_Cast,
		OP_Cast, OP_Mul, OP_Cast};
	CU_ASSERT_EQUAL_FATAL(live_ops(g, ops, 16), 9);
	for (int i = 0; i < 9; i++)
		CU_ASSERT_EQUAL(ops[i], staged[i]);
	CU_ASSERT_EQUAL(casts_of(g, "t"), 1);
	check_half_graph(g);
	ir_free(g);

	g = half_graph(0, PHASE_BWD);
	quiet_diags();
	CU_ASSERT_FALSE(pass_legalize_half(g, &cx));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "training on f16 or bf16 tensors is not supported"));
	ir_free(g);
}

void
suite_passes(CU_pSuite s)
{
	ADD(s, fold_shape_chain);
	ADD(s, fold_keeps_weights);
	ADD(s, verify_use_before_def);
	ADD(s, verify_two_producers_and_shapeless);
	ADD(s, registry);
	ADD(s, pipeline_options);
	ADD(s, fold_scopes_fixtures);
	ADD(s, fold_scopes_gpt_block);
	ADD(s, fold_scopes_min_duplicate);
	ADD(s, strip_aux_counts);
	ADD(s, legalize_half);
}
