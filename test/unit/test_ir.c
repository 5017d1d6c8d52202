/*
 * test_ir.c - the IR's building blocks: tables, attributes, def-use,
 * compaction, the printer against hand-written text, and docs/ops.md
 * agreeing with ir/ops.def.
 */
#include <string.h>

#include "test/unit/util.h"

static void
dtype_table(void)
{
	DType t;
	CU_ASSERT_TRUE(ir_dtype_lookup("f32", &t) && t == DT_F32);
	CU_ASSERT_TRUE(ir_dtype_lookup("i64", &t) && t == DT_I64);
	CU_ASSERT_FALSE(ir_dtype_lookup("float", &t));
	CU_ASSERT_EQUAL(ir_dtype_size(DT_F32), 4);
	CU_ASSERT_EQUAL(ir_dtype_size(DT_BOOL), 1);
	CU_ASSERT_EQUAL(ir_dtype_size(DT_F16), 2);
	CU_ASSERT_EQUAL(ir_dtype_size(DT_F64), 8);
	/* ONNX TensorProto.DataType numbering */
	CU_ASSERT_EQUAL(DT_I64, 7);
	CU_ASSERT_EQUAL(DT_BF16, 16);
	for (int i = 1; i < DT_COUNT; i++) {
		CU_ASSERT_TRUE(ir_dtype_lookup(ir_dtype_name((DType)i), &t) && (int)t == i);
	}
}

static void
op_table(void)
{
	Op op;
	CU_ASSERT_TRUE(ir_op_lookup("MatMul", &op) && op == OP_MatMul);
	CU_ASSERT_STRING_EQUAL(ir_op_name(OP_LayerNormalization), "LayerNormalization");
	CU_ASSERT_FALSE(ir_op_lookup("NonMaxSuppression", &op));
	CU_ASSERT_FALSE(ir_op_lookup("matmul", &op));
	for (int i = 0; i < OP_COUNT; i++)
		CU_ASSERT_TRUE(ir_op_lookup(ir_op_name((Op)i), &op) && (int)op == i);
}

static void
attrs_sorted(void)
{
	Graph *g = ir_new("g");
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	TensorId y = ir_add_tensor(g, "y", TK_VALUE, DT_UNDEF);
	NodeId n = ir_add_node(g, OP_Transpose, "t", 1, &x, 1, &y);
	ir_set_attr(g, n, "zeta", ATTR_INT)->i = 3;
	ir_set_attr(g, n, "alpha", ATTR_FLOAT)->f = 0.5f;
	ir_set_attr(g, n, "mid", ATTR_STRING)->s = "m";
	ir_set_attr(g, n, "alpha", ATTR_INT)->i = 9; /* replaces, keeps one */
	Node *nd = ir_node(g, n);
	CU_ASSERT_EQUAL(nd->nattr, 3);
	CU_ASSERT_STRING_EQUAL(nd->attr[0].name, "alpha");
	CU_ASSERT_STRING_EQUAL(nd->attr[1].name, "mid");
	CU_ASSERT_STRING_EQUAL(nd->attr[2].name, "zeta");
	CU_ASSERT_EQUAL(ir_attr_int(g, n, "alpha", -1), 9);
	CU_ASSERT_EQUAL(ir_attr_int(g, n, "zeta", -1), 3);
	CU_ASSERT_EQUAL(ir_attr_int(g, n, "none", -1), -1);
	CU_ASSERT_STRING_EQUAL(ir_attr_str(g, n, "mid", ""), "m");
	ir_free(g);
}

static void
arena_aligned(void)
{
	Arena a = {0};
	for (int i = 1; i < 200; i++) {
		char *p = ir_alloc(&a, (size_t)i * 37);
		CU_ASSERT_EQUAL((uintptr_t)p % 16, 0);
		CU_ASSERT_EQUAL(p[0], 0);
		CU_ASSERT_EQUAL(p[i * 37 - 1], 0);
	}
	char *big = ir_alloc(&a, 1 << 20);
	CU_ASSERT_PTR_NOT_NULL(big);
	ir_arena_free(&a);
	CU_ASSERT_PTR_NULL(a.head);
}

/* x -> Relu -> a -> Neg -> b (dead) ; a -> Abs -> c (output) */
static Graph *
chain(NodeId *dead)
{
	Graph *g = ir_new("c");
	int64_t d[2] = {2, 3};
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 2, d);
	ir_add_input(g, x);
	TensorId a = ir_add_tensor(g, "a", TK_VALUE, DT_F32);
	TensorId b = ir_add_tensor(g, "b", TK_VALUE, DT_F32);
	TensorId c = ir_add_tensor(g, "c", TK_VALUE, DT_F32);
	ir_add_node(g, OP_Relu, "relu", 1, &x, 1, &a);
	*dead = ir_add_node(g, OP_Neg, "neg", 1, &a, 1, &b);
	ir_add_node(g, OP_Abs, "abs", 1, &a, 1, &c);
	for (TensorId t = a; t <= c; t++)
		ir_set_shape(ir_tensor(g, t), 2, d);
	ir_add_output(g, c);
	ir_reindex(g);
	return g;
}

static void
def_use(void)
{
	NodeId dead;
	Graph *g = chain(&dead);
	CU_ASSERT_EQUAL(g->nusers[1], 2); /* a: Neg and Abs */
	CU_ASSERT_EQUAL(g->nusers[0], 1);
	CU_ASSERT_EQUAL(g->nusers[3], 0); /* c: graph output only */
	CU_ASSERT_EQUAL(g->tensors[3].producer, 2);
	ir_free(g);
}

static void
compact(void)
{
	NodeId dead;
	Graph *g = chain(&dead);
	g->nodes[dead].dead = true;
	ir_compact(g);
	CU_ASSERT_EQUAL(g->nnodes, 2);
	CU_ASSERT_EQUAL(g->ntensors, 3); /* b is gone */
	CU_ASSERT_STRING_EQUAL(g->nodes[1].name, "abs");
	CU_ASSERT_STRING_EQUAL(g->tensors[g->outputs[0]].name, "c");
	CU_ASSERT_EQUAL(g->tensors[g->outputs[0]].producer, 1);
	CU_ASSERT_EQUAL(g->nusers[1], 1); /* a: Abs only now */
	ir_free(g);
}

static char *
print_to_string(Graph *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ir_print(f, g);
	fclose(f);
	return buf;
}

/* The printer against text written by hand from docs/ir.md. */
static void
printer_by_hand(void)
{
	Graph *g = ir_new("tiny");
	g->model = "m/tiny.onnx";
	g->opset = 13;
	ir_add_file(g, "tiny.onnx");
	int64_t xd[2] = {4, 8}, wd[2] = {8, 2}, sd[1] = {2};
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 2, xd);
	ir_add_input(g, x);
	TensorId w = ir_add_tensor(g, "w", TK_WEIGHT, DT_F32);
	Tensor *wt = ir_tensor(g, w);
	ir_set_shape(wt, 2, wd);
	wt->data = DATA_FILE;
	wt->file = 0;
	wt->offset = 0x1a0;
	wt->length = 64;
	TensorId s = ir_add_tensor(g, "", TK_CONST, DT_I64);
	Tensor *st = ir_tensor(g, s);
	ir_set_shape(st, 1, sd);
	static int64_t sv[2] = {2, -1};
	st->data = DATA_INLINE;
	st->bytes = sv;
	st->length = 16;
	TensorId y = ir_add_tensor(g, "y", TK_VALUE, DT_F32);
	TensorId z = ir_add_tensor(g, "z", TK_VALUE, DT_F32);
	int64_t yd[2] = {4, 2}, zd[2] = {2, 4};
	ir_set_shape(ir_tensor(g, y), 2, yd);
	ir_set_shape(ir_tensor(g, z), 2, zd);
	TensorId in1[2] = {x, w}, in2[2] = {y, s};
	ir_add_node(g, OP_MatMul, "/fc/MatMul", 2, in1, 1, &y);
	NodeId r = ir_add_node(g, OP_Reshape, "", 2, in2, 1, &z);
	ir_set_attr(g, r, "allowzero", ATTR_INT)->i = 0;
	ir_add_output(g, z);
	char *text = print_to_string(g);
	const char *want =
	    "graph \"tiny\" model=\"m/tiny.onnx\" opset=13\n"
	    "  %0 = input \"x\" f32[4,8]\n"
	    "  %1 = weight \"w\" f32[8,2] @tiny.onnx+0x1a0\n"
	    "  %2 = MatMul %0, %1 : f32[4,2]                               # /fc/MatMul\n" /* '#' in column 63 */
	    "  %3 = const i64[2] = [2,-1]\n" /* constants just before first use */
	    "  %4 = Reshape %2, %3 {allowzero=0} : f32[2,4]\n"
	    "  output %4 \"z\"\n";
	CU_ASSERT_STRING_EQUAL(text, want);
	if (strcmp(text, want) != 0)
		fprintf(stderr, "\n--- got\n%s--- want\n%s", text, want);
	free(text);
	ir_free(g);
}

/* docs/ops.md lists exactly the operators of ir/ops.def. */
static void
ops_doc_in_sync(void)
{
	FILE *f = fopen(srcpath("docs/ops.md"), "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	bool seen[OP_COUNT] = {0};
	char line[1024];
	int rows = 0;
	while (fgets(line, sizeof line, f)) {
		char name[128];
		if (sscanf(line, "| `%127[A-Za-z0-9]` |", name) != 1)
			continue;
		Op op;
		rows++;
		if (!ir_op_lookup(name, &op)) {
			fprintf(stderr, "docs/ops.md lists %s, which ir/ops.def lacks\n", name);
			CU_FAIL("docs/ops.md lists an unsupported operator");
			continue;
		}
		CU_ASSERT_FALSE(seen[op]);
		seen[op] = true;
	}
	fclose(f);
	for (int i = 0; i < OP_COUNT; i++)
		if (!seen[i]) {
			fprintf(stderr, "docs/ops.md does not list %s\n", ir_op_name((Op)i));
			CU_FAIL("an operator of ir/ops.def is missing from docs/ops.md");
		}
	CU_ASSERT_EQUAL(rows, OP_COUNT);
}

void
suite_ir(CU_pSuite s)
{
	ADD(s, dtype_table);
	ADD(s, op_table);
	ADD(s, attrs_sorted);
	ADD(s, arena_aligned);
	ADD(s, def_use);
	ADD(s, compact);
	ADD(s, printer_by_hand);
	ADD(s, ops_doc_in_sync);
}
