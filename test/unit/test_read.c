/*
 * test_read.c - the IR reader (ir/read.c): round trips, parsed structure,
 * error messages, and no crash on truncated or mutated text.
 *
 * The round-trip graph is built with the ir.c API so that it holds every
 * line form and attribute type the printer can write; the printer is the
 * reference, and print -> read -> print must give the same bytes.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/unit/util.h"

/* ir_print into a malloc'd string. */
static char *
print_str(Graph *g, size_t *len)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	ir_print(f, g);
	fclose(f);
	if (len)
		*len = n;
	return s;
}

static Graph *
read_str(const char *text)
{
	return ir_parse(text, strlen(text), "t.ir");
}

static TensorId
data_tensor(Graph *g, const char *name, TensorKind kind, DType dt, int rank,
    const int64_t *dims, const void *bytes, size_t nbytes)
{
	TensorId id = ir_add_tensor(g, name, kind, dt);
	Tensor *t = ir_tensor(g, id);
	ir_set_shape(t, rank, dims);
	t->data = DATA_INLINE;
	t->length = (int64_t)nbytes;
	t->bytes = ir_alloc(&g->arena, nbytes + 1);
	memcpy(t->bytes, bytes, nbytes);
	return id;
}

static TensorId
value(Graph *g, DType dt, int rank, const int64_t *dims)
{
	TensorId id = ir_add_tensor(g, "", TK_VALUE, dt);
	if (rank >= 0)
		ir_set_shape(ir_tensor(g, id), rank, dims);
	return id;
}

/* A graph with every line form, dtype and attribute type in it. */
static Graph *
kitchen_sink(void)
{
	Graph *g = ir_new("mini \"gpt\"\n\\");
	g->model = "dir/sub/model.onnx";
	g->dir = "dir/sub";
	g->opset = 17;
	g->mesh = (Mesh){.rows = 2, .cols = 4, .dp = 2, .tp = 2, .pp = 2};
	ir_add_file(g, "model.onnx");
	ir_add_file(g, "ext data.bin");

	int64_t d116[] = {1, 16}, d4[] = {4}, d2[] = {2}, d3[] = {3}, d8[] = {8};
	int64_t dw[] = {512, 64}, d1164[] = {1, 16, 64}, d1132[] = {1, 16, 32};
	TensorId idx = ir_add_tensor(g, "idx", TK_INPUT, DT_I64);
	ir_set_shape(ir_tensor(g, idx), 2, d116);
	ir_add_input(g, idx);
	TensorId mask = ir_add_tensor(g, "mask\t\x01", TK_INPUT, DT_BOOL);
	ir_set_shape(ir_tensor(g, mask), 2, d116);
	ir_add_input(g, mask);

	TensorId wte = ir_add_tensor(g, "wte.weight", TK_WEIGHT, DT_F32);
	Tensor *t = ir_tensor(g, wte);
	ir_set_shape(t, 2, dw);
	t->data = DATA_FILE;
	t->file = 0;
	t->offset = 0x1a0;
	t->length = ir_nbytes(t);
	TensorId wext = ir_add_tensor(g, "ext", TK_WEIGHT, DT_F16);
	t = ir_tensor(g, wext);
	ir_set_shape(t, 1, d4);
	t->data = DATA_FILE;
	t->file = 1;
	t->offset = 0;
	t->length = ir_nbytes(t);
	/* a weight with no data and no shape yet */
	ir_add_tensor(g, "", TK_WEIGHT, DT_F32);

	float f32[8] = {1.5f, NAN, -INFINITY, INFINITY, -NAN, 1e-45f, 0.0f, -0.0f};
	double f64[3] = {0.1, 1e300, -NAN};
	int64_t i64[2] = {INT64_MIN, INT64_MAX};
	int32_t i32[2] = {INT32_MIN, INT32_MAX};
	int16_t i16[2] = {INT16_MIN, INT16_MAX};
	int8_t i8[2] = {INT8_MIN, INT8_MAX};
	uint64_t u64[2] = {0, UINT64_MAX};
	uint32_t u32[2] = {0, UINT32_MAX};
	uint16_t u16[2] = {0, UINT16_MAX};
	uint8_t u8[2] = {0, UINT8_MAX}, b[2] = {0, 1};
	uint16_t f16[2] = {0x3c00, 0xffff}, bf16[2] = {0x3f80, 0x0001};
	data_tensor(g, "f32", TK_WEIGHT, DT_F32, 1, d8, f32, sizeof f32);
	data_tensor(g, "f64", TK_WEIGHT, DT_F64, 1, d3, f64, sizeof f64);
	data_tensor(g, "i64", TK_WEIGHT, DT_I64, 1, d2, i64, sizeof i64);
	data_tensor(g, "i32", TK_WEIGHT, DT_I32, 1, d2, i32, sizeof i32);
	data_tensor(g, "i16", TK_WEIGHT, DT_I16, 1, d2, i16, sizeof i16);
	data_tensor(g, "i8", TK_WEIGHT, DT_I8, 1, d2, i8, sizeof i8);
	data_tensor(g, "u64", TK_WEIGHT, DT_U64, 1, d2, u64, sizeof u64);
	data_tensor(g, "u32", TK_WEIGHT, DT_U32, 1, d2, u32, sizeof u32);
	data_tensor(g, "u16", TK_WEIGHT, DT_U16, 1, d2, u16, sizeof u16);
	data_tensor(g, "u8", TK_WEIGHT, DT_U8, 1, d2, u8, sizeof u8);
	data_tensor(g, "bool", TK_WEIGHT, DT_BOOL, 1, d2, b, sizeof b);
	data_tensor(g, "f16", TK_WEIGHT, DT_F16, 1, d2, f16, sizeof f16);
	data_tensor(g, "bf16", TK_WEIGHT, DT_BF16, 1, d2, bf16, sizeof bf16);
	float scalar = 2.0f;
	TensorId two = data_tensor(g, "", TK_CONST, DT_F32, 0, NULL, &scalar, sizeof scalar);
	int64_t shape[4] = {1, 16, 4, 16};
	TensorId cval = data_tensor(g, "", TK_CONST, DT_I64, 1, d4, shape, sizeof shape);

	/* Constant whose value only an attribute holds: printed beside it */
	TensorId c = value(g, DT_I64, 1, d4);
	NodeId n = ir_add_node(g, OP_Constant, "", 0, NULL, 1, &c);
	ir_set_attr(g, n, "value", ATTR_TENSOR)->t = cval;

	TensorId emb = value(g, DT_F32, 3, d1164);
	n = ir_add_node(g, OP_Gather, "/wte/Gather", 2, (TensorId[]){wte, idx}, 1, &emb);
	ir_set_attr(g, n, "axis", ATTR_INT)->i = 0;
	g->nodes[n].group = 0;
	g->nodes[n].stage = 0;

	TensorId s0 = value(g, DT_F32, 3, d1132), s2 = value(g, DT_F32, 3, d1132);
	n = ir_add_node(g, OP_Split, "split # with \"odd\" \\ name\nline two  ", 1, &emb, 3,
	    (TensorId[]){s0, IR_NONE, s2});
	ir_set_attr(g, n, "axis", ATTR_INT)->i = -1;
	Attr *a = ir_set_attr(g, n, "split", ATTR_INTS);
	a->n = 3;
	a->is = ir_alloc(&g->arena, 3 * sizeof *a->is);
	a->is[0] = 32, a->is[1] = 16, a->is[2] = 16;
	g->nodes[n].group = 1;

	/* every attribute type, including the empty lists */
	TensorId pad = value(g, DT_F32, 3, d1132);
	n = ir_add_node(g, OP_Pad, "", 3, (TensorId[]){s0, IR_NONE, two}, 1, &pad);
	ir_set_attr(g, n, "alpha", ATTR_FLOAT)->f = 1.0f;
	ir_set_attr(g, n, "epsilon", ATTR_FLOAT)->f = 9.99999975e-06f;
	ir_set_attr(g, n, "big", ATTR_FLOAT)->f = 1e20f;
	ir_set_attr(g, n, "nan", ATTR_FLOAT)->f = NAN;
	ir_set_attr(g, n, "ninf", ATTR_FLOAT)->f = -INFINITY;
	ir_set_attr(g, n, "mode", ATTR_STRING)->s = "con\"st\\ant\n\x01\x7f\xc3\xa9";
	ir_set_attr(g, n, "empty", ATTR_STRING)->s = "";
	ir_set_attr(g, n, "no_ints", ATTR_INTS);
	ir_set_attr(g, n, "no_floats", ATTR_FLOATS);
	ir_set_attr(g, n, "no_strings", ATTR_STRINGS);
	a = ir_set_attr(g, n, "scales", ATTR_FLOATS);
	a->n = 3;
	a->fs = ir_alloc(&g->arena, 3 * sizeof *a->fs);
	a->fs[0] = 1.5f, a->fs[1] = 2.0f, a->fs[2] = -INFINITY;
	a = ir_set_attr(g, n, "names", ATTR_STRINGS);
	a->n = 2;
	a->ss = ir_alloc(&g->arena, 2 * sizeof *a->ss);
	a->ss[0] = "a,b", a->ss[1] = "]\"";
	ir_set_attr(g, n, "shape_of", ATTR_TENSOR)->t = cval;
	ir_set_attr(g, n, "neg", ATTR_INT)->i = INT64_MIN;
	g->nodes[n].stage = 3;

	/* shape not inferred yet, and a scalar; training phases */
	TensorId unk = value(g, DT_UNDEF, -1, NULL);
	NodeId bwd = ir_add_node(g, OP_Add, "", 2, (TensorId[]){pad, s2}, 1, &unk);
	g->nodes[bwd].phase = PHASE_BWD;
	TensorId sc = value(g, DT_F32, 0, NULL);
	NodeId opt = ir_add_node(g, OP_ReduceSum, "r", 1, &unk, 1, &sc);
	g->nodes[opt].phase = PHASE_OPT;
	/* a node with no outputs at all */
	ir_add_node(g, OP_Identity, "sink", 1, &mask, 0, NULL);

	ir_add_output(g, sc);
	ir_add_output(g, idx);
	ir_tensor(g, sc)->name = "logits \"x\"";
	ir_reindex(g);
	return g;
}

static void
roundtrip_text(const char *text, size_t len)
{
	quiet_diags();
	Graph *g = ir_parse(text, len, "rt.ir");
	if (!g)
		fprintf(stderr, "\n%s\n%s", diag_last, text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	size_t len2;
	char *again = print_str(g, &len2);
	CU_ASSERT_EQUAL(len2, len);
	CU_ASSERT(len2 == len && memcmp(again, text, len) == 0);
	if (len2 != len || memcmp(again, text, len) != 0)
		fprintf(stderr, "\n--- printed\n%s--- reread\n%s", text, again);
	free(again);
	ir_free(g);
}

static void
test_roundtrip_all_forms(void)
{
	Graph *g = kitchen_sink();
	size_t len;
	char *text = print_str(g, &len);
	roundtrip_text(text, len);

	/* the same structure, not just the same text */
	Graph *h = ir_parse(text, len, "rt.ir");
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_STRING_EQUAL(h->name, g->name);
	CU_ASSERT_STRING_EQUAL(h->model, "dir/sub/model.onnx");
	CU_ASSERT_STRING_EQUAL(h->dir, "dir/sub");
	CU_ASSERT_EQUAL(h->opset, 17);
	CU_ASSERT(h->mesh.rows == 2 && h->mesh.cols == 4 && h->mesh.dp == 2 &&
	    h->mesh.tp == 2 && h->mesh.pp == 2);
	CU_ASSERT_EQUAL(h->nnodes, g->nnodes);
	CU_ASSERT_EQUAL(h->ninputs, 2);
	CU_ASSERT_EQUAL(h->noutputs, 2);
	CU_ASSERT_EQUAL(h->nfiles, 2);
	CU_ASSERT_STRING_EQUAL(h->files[1], "ext data.bin");
	CU_ASSERT_EQUAL(h->ngroups, 2);
	for (TensorId t = 0; t < h->ntensors; t++) {
		Tensor *x = ir_tensor(h, t);
		if (x->data != DATA_NONE)
			CU_ASSERT_EQUAL(x->length, ir_nbytes(x));
	}
	for (NodeId n = 0; n < h->nnodes; n++) {
		CU_ASSERT_EQUAL(h->nodes[n].op, g->nodes[n].op);
		CU_ASSERT_STRING_EQUAL(h->nodes[n].name, g->nodes[n].name);
		CU_ASSERT_EQUAL(h->nodes[n].nattr, g->nodes[n].nattr);
		CU_ASSERT_EQUAL(h->nodes[n].group, g->nodes[n].group);
		CU_ASSERT_EQUAL(h->nodes[n].stage, g->nodes[n].stage);
	}
	ir_free(h);
	free(text);
	ir_free(g);
}

/* A text as a person writes it: every field checked, not only the reprint. */
static void
test_read_structure(void)
{
	static const char text[] =
	    "# a comment line, and a blank one\n"
	    "\n"
	    "graph \"g\" model=\"m.onnx\" opset=13\n"
	    "  %0 = input \"x\" f32[2,3]\n"
	    "  %1 = weight \"w\" f32[3,4] @\"w x.bin\"+0x10\n"
	    "  %2 = const i64[2] = [2,-4]\n"
	    "  %3 = MatMul %0, %1 : f32[2,4] gn=5   # /mm\n"
	    "  %4, _ = Split %3 {axis=1 scale=0.5 mode=\"a\\\"b\" l=[1,2] fl=[1.0,2] s=[\"p\",\"q\"] e=ints[]} : f32[2,2], _\n"
	    "  %5 = Reshape %4, %2 : f32[2,2] stage=1 phase=bwd\n"
	    "  output %5 \"y\"\n";
	quiet_diags();
	Graph *g = read_str(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(diag_count, 0);
	CU_ASSERT_STRING_EQUAL(g->name, "g");
	CU_ASSERT_STRING_EQUAL(g->dir, ".");
	CU_ASSERT_EQUAL(g->opset, 13);
	CU_ASSERT_EQUAL(g->mesh.rows, 0);
	CU_ASSERT_EQUAL(g->ntensors, 6);
	CU_ASSERT_EQUAL(g->nnodes, 3);

	Tensor *x = ir_tensor(g, g->inputs[0]);
	CU_ASSERT_EQUAL(g->ninputs, 1);
	CU_ASSERT_STRING_EQUAL(x->name, "x");
	CU_ASSERT(x->kind == TK_INPUT && x->dtype == DT_F32 && x->rank == 2);
	CU_ASSERT(x->dims[0] == 2 && x->dims[1] == 3 && x->data == DATA_NONE);

	Tensor *w = ir_tensor(g, 1);
	CU_ASSERT(w->kind == TK_WEIGHT && w->data == DATA_FILE);
	CU_ASSERT_STRING_EQUAL(g->files[w->file], "w x.bin");
	CU_ASSERT_EQUAL(w->offset, 16);
	CU_ASSERT_EQUAL(w->length, 48);
	CU_ASSERT_EQUAL(w->producer, IR_NONE);

	Tensor *c = ir_tensor(g, 2);
	CU_ASSERT(c->kind == TK_CONST && c->dtype == DT_I64 && c->data == DATA_INLINE);
	CU_ASSERT_EQUAL(c->length, 16);
	CU_ASSERT(((int64_t *)c->bytes)[0] == 2 && ((int64_t *)c->bytes)[1] == -4);

	Node *mm = ir_node(g, 0);
	CU_ASSERT(mm->op == OP_MatMul && mm->nin == 2 && mm->nout == 1);
	CU_ASSERT(mm->in[0] == 0 && mm->in[1] == 1 && mm->out[0] == 3);
	CU_ASSERT_STRING_EQUAL(mm->name, "/mm");
	CU_ASSERT(mm->group == 5 && mm->stage == IR_NONE);
	CU_ASSERT_EQUAL(g->ngroups, 6);
	CU_ASSERT(g->groups[5].nnodes == 1 && g->groups[5].nodes[0] == 0);
	CU_ASSERT_EQUAL(g->groups[0].nnodes, 0);
	CU_ASSERT(ir_tensor(g, 3)->rank == 2 && ir_tensor(g, 3)->dims[1] == 4);

	Node *sp = ir_node(g, 1);
	CU_ASSERT(sp->op == OP_Split && sp->nout == 2 && sp->out[1] == IR_NONE);
	CU_ASSERT_STRING_EQUAL(sp->name, "");
	CU_ASSERT_EQUAL(sp->nattr, 7);
	CU_ASSERT_EQUAL(ir_attr_int(g, 1, "axis", 0), 1);
	CU_ASSERT_EQUAL(ir_attr_float(g, 1, "scale", 0), 0.5f);
	CU_ASSERT_STRING_EQUAL(ir_attr_str(g, 1, "mode", ""), "a\"b");
	const Attr *a = ir_attr(g, 1, "l");
	CU_ASSERT(a && a->type == ATTR_INTS && a->n == 2 && a->is[0] == 1 && a->is[1] == 2);
	a = ir_attr(g, 1, "fl");
	CU_ASSERT(a && a->type == ATTR_FLOATS && a->n == 2 && a->fs[1] == 2.0f);
	a = ir_attr(g, 1, "s");
	CU_ASSERT(a && a->type == ATTR_STRINGS && a->n == 2 && strcmp(a->ss[1], "q") == 0);
	a = ir_attr(g, 1, "e");
	CU_ASSERT(a && a->type == ATTR_INTS && a->n == 0);
	/* attributes come out sorted by name whatever the text's order */
	CU_ASSERT_STRING_EQUAL(sp->attr[0].name, "axis");
	CU_ASSERT_STRING_EQUAL(sp->attr[6].name, "scale");

	Node *rs = ir_node(g, 2);
	CU_ASSERT(rs->op == OP_Reshape && rs->stage == 1 && rs->in[1] == 2);
	CU_ASSERT(rs->phase == PHASE_BWD);
	CU_ASSERT(g->nodes[0].phase == PHASE_FWD);
	CU_ASSERT_EQUAL(g->noutputs, 1);
	CU_ASSERT_STRING_EQUAL(ir_tensor(g, g->outputs[0])->name, "y");
	CU_ASSERT_EQUAL(ir_tensor(g, g->outputs[0])->producer, 2);
	/* def-use is built */
	CU_ASSERT(g->nusers[3] == 1 && g->users[3][0] == 1);
	CU_ASSERT_EQUAL(g->nusers[2], 1);
	ir_free(g);
}

/* Uses before definitions (an unsorted graph) read, and print as they came. */
static void
test_forward_refs(void)
{
	static const char text[] =
	    "graph \"g\" model=\"/abs/m.onnx\" opset=1\n"
	    "  %0 = input \"x\" f32[1]\n"
	    "  %1 = Relu %2 : f32[1]\n"
	    "  %2 = Neg %0 : f32[1]\n"
	    "  output %1 \"y\"\n";
	roundtrip_text(text, strlen(text));
	Graph *g = read_str(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_STRING_EQUAL(g->dir, "/abs");
	CU_ASSERT_EQUAL(g->nodes[0].in[0], g->nodes[1].out[0]);
	CU_ASSERT_EQUAL(ir_tensor(g, g->nodes[0].in[0])->producer, 1);
	ir_free(g);

	/* numbers need not be dense or in order; the reprint renumbers */
	static const char sparse[] =
	    "graph \"g\" model=\"m.onnx\" opset=1\n"
	    "  %70 = input \"x\" f32[1]\n"
	    "  %9 = Neg %70 : f32[1]\n"
	    "  output %9 \"y\"\n";
	static const char dense[] =
	    "graph \"g\" model=\"m.onnx\" opset=1\n"
	    "  %0 = input \"x\" f32[1]\n"
	    "  %1 = Neg %0 : f32[1]\n"
	    "  output %1 \"y\"\n";
	g = read_str(sparse);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	char *s = print_str(g, NULL);
	CU_ASSERT_STRING_EQUAL(s, dense);
	free(s);
	ir_free(g);
}

static void
test_header_forms(void)
{
	quiet_diags();
	Graph *g = read_str("graph \"\"\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT(g->ntensors == 0 && g->nnodes == 0 && g->opset == 0);
	CU_ASSERT_STRING_EQUAL(g->model, "");
	CU_ASSERT_STRING_EQUAL(g->dir, ".");
	ir_free(g);
	g = read_str("graph \"g\" model=\"/m.onnx\" opset=18 mesh=3x5 dp=3 tp=5 pp=1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_STRING_EQUAL(g->dir, "/");
	CU_ASSERT(g->mesh.rows == 3 && g->mesh.cols == 5 && g->mesh.dp == 3 && g->mesh.tp == 5 &&
	    g->mesh.pp == 1);
	ir_free(g);
}

static const struct {
	const char *text;
	const char *msg;                /* diag_last after "tapc: error: t.ir: " */
} bad[] = {
	{"", "line 1: expected 'graph' header, found end of file"},
	{"\n\n", "line 2: expected 'graph' header, found end of file"},
	{"  %0 = input \"x\" f32[1]\n", "line 1: expected 'graph' header, found '%0'"},
	{"graph g\n", "line 1: expected quoted graph name, found 'g'"},
	{"graph \"g\" opset=x\n", "line 1: expected opset, found 'x'"},
	{"graph \"g\" opset=1 opset=2\n", "line 1: duplicate opset= in header"},
	{"graph \"g\" mesh=0x2\n", "line 1: mesh rows and columns must be at least 1"},
	/* found by fuzz_read: a lone dp= printed back as mesh=0x0 */
	{"graph \"g\" dp=1\n",
	    "line 1: dp=, tp=, pp=, microbatches=, slice= and subpipeline= need mesh=, dp=, tp= and pp= together"},
	{"graph \"g\" mesh=1x2 dp=1 tp=2\n",
	    "line 1: dp=, tp=, pp=, microbatches=, slice= and subpipeline= need mesh=, dp=, tp= and pp= together"},
	{"graph \"g\" mesh=1x2 dp=0 tp=2 pp=1\n", "line 1: dp 0 out of range [1, 2147483647]"},
	{"graph \"g\" color=1\n",
	    "line 1: expected model=, opset=, mesh=, dp=, tp=, pp=, microbatches=, slice=, subpipeline= or data=, found 'color'"},
	{"graph \"g\" data=\"../w\"\n",
	    "line 1: data file '../w' must be a file name in the IR file's directory, without '/'"},
	{"graph \"g\" data=\"d/w\"\n",
	    "line 1: data file 'd/w' must be a file name in the IR file's directory, without '/'"},
	{"graph \"g\" data=\"..\"\n",
	    "line 1: data file '..' must be a file name in the IR file's directory, without '/'"},
	{"graph \"g\" data=\"no such file\"\n",
	    "line 1: data file 'no such file': No such file or directory"},
	{"graph \"g\"\n%0 = weight \"w\" f16[4] @m.onnx+0x0 from=f16\n",
	    "line 2: from= converts f16 or bf16 file bytes to an f32 weight, found 'f16'"},
	{"graph \"g\"\n%0 = weight \"w\" f32[4] @m.onnx+0x0 from=i8\n",
	    "line 2: from= converts f16 or bf16 file bytes to an f32 weight, found 'i8'"},
	{"graph \"g\"\n%0 = weight \"w\" f32[20] @+0x40\n",
	    "line 2: '@+0x40' without a data file (data= in the header)"},
	{"graph \"g\n", "line 1: unterminated string"},
	{"graph \"g\\q\"\n", "line 1: unknown escape '\\q' in string"},
	{"graph \"g\\x00\"\n", "line 1: string contains a NUL byte"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%0 = input \"y\" f32[1]\n",
	    "line 3: %0 is already defined on line 2"},
	{"graph \"g\"\n%0 = Neg %1 : f32[1]\n", "line 2: %1 is used but never defined"},
	{"graph \"g\"\noutput %3 \"y\"\n", "line 2: %3 is used but never defined"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Frob %0 : f32[1]\n",
	    "line 3: unknown op 'Frob'"},
	{"graph \"g\"\n%0 = input \"x\" f33[1]\n", "line 2: unknown dtype 'f33'"},
	{"graph \"g\"\n%0 = input \"x\" f32[1,2,3,4,5,6,7,8,9]\n", "line 2: rank exceeds 8"},
	{"graph \"g\"\n%0 = input \"x\" f32[-1]\n",
	    "line 2: dimension -1 out of range [0, 9223372036854775807]"},
	{"graph \"g\"\n%0 = input \"x\" f32[1x]\n", "line 2: expected dimension, found '1x'"},
	{"graph \"g\"\n%0 = input \"x\" f32[99999999999999999999]\n",
	    "line 2: dimension 99999999999999999999 out of range"},
	{"graph \"g\"\n%0 = input \"x\" f32[4294967296,4294967296]\n",
	    "line 2: element count overflows"},
	{"graph \"g\"\n%0 = const f32[3] = [1.0,2.0]\n",
	    "line 2: expected 3 values for f32[3], found 2"},
	{"graph \"g\"\n%0 = const u8[1] = [256]\n",
	    "line 2: u8 value 256 out of range [0, 255]"},
	{"graph \"g\"\n%0 = const bool[1] = [2]\n", "line 2: bool value 2 out of range [0, 1]"},
	{"graph \"g\"\n%0 = const f32[1] = [1.0.0]\n", "line 2: expected float, found '1.0.0'"},
	{"graph \"g\"\n%0 = const f32[1] = [1e99]\n", "line 2: expected float, found '1e99'"},
	{"graph \"g\"\n%0 = const f16[1] = [0x10000]\n",
	    "line 2: expected 0xHHHH value, found '0x10000'"},
	{"graph \"g\"\n%0 = const str[1] = [1]\n", "line 2: str tensors cannot have inline values"},
	{"graph \"g\"\n%0 = weight \"w\" f32[1] @../w.bin+0x0\n",
	    "line 2: weight file must be a relative path inside the model's directory"},
	{"graph \"g\"\n%0 = weight \"w\" f32[1] @\"/etc/passwd\"+0x0\n",
	    "line 2: weight file must be a relative path inside the model's directory"},
	{"graph \"g\"\n%0 = weight \"w\" f32[1] @m.onnx+0x10000000000000000\n",
	    "line 2: offset out of range"},
	{"graph \"g\"\n%0 = weight \"w\" f32[1] @m.onnx+16\n",
	    "line 2: expected '0x' offset, found '16'"},
	{"graph \"g\"\n%0 = input \"x\" f32[1] extra\n",
	    "line 2: expected end of line, found 'extra'"},
	{"graph \"g\"\n%0, %1 = input \"x\" f32[1]\n",
	    "line 2: an input line defines exactly one %N"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1, %2 = Split %0 : f32[1]\n",
	    "line 3: expected 2 output types, found 1"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0 : f32[1], f32[1]\n",
	    "line 3: expected 1 output types, found more"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1, _ = Split %0 : f32[1], f32[1]\n",
	    "line 3: output 1 is _, so its type must be _ too"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0\n",
	    "line 3: expected ':' and output types, found end of line"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0 {a=1 a=2} : f32[1]\n",
	    "line 3: duplicate attribute 'a'"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0 {a=[]} : f32[1]\n",
	    "line 3: empty list needs a type: write ints[], floats[] or strings[]"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0 {a=[1,2.5]} : f32[1]\n",
	    "line 3: expected integer, found '2.5'"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0 {a=1 : f32[1]\n",
	    "line 3: expected attribute name, found ':'"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0 {a=%0} : f32[1]\n",
	    "line 3: attribute 'a' needs a const or weight defined on an earlier line, found %0"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0 : f32[1] gn=-1\n",
	    "line 3: GraphNode -1 out of range [0, 1048575]"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\n%1 = Neg %0 : f32[1]  # a\\tb\n",
	    "line 3: unknown escape '\\t' in node name"},
	{"graph \"g\"\n%0 = input \"x\" f32[1]\noutput %0 \"y\"\n",
	    "line 3: output %0 is named differently on an earlier line"},
	{"graph \"g\"\n%99999999999 = input \"x\" f32[1]\n", "line 2: tensor number too large"},
	{"graph \"g\"\ngraph \"h\"\n", "line 2: expected a tensor %N, found 'graph'"},
	{"graph \"g\"\n%0 = input \"x\" \x01[1]\n", "line 2: expected a type, found byte 0x01"},
};

static void
test_errors(void)
{
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char want[1024];
		quiet_diags();
		Graph *g = read_str(bad[i].text);
		snprintf(want, sizeof want, "tapc: error: t.ir: %s", bad[i].msg);
		CU_ASSERT_PTR_NULL(g);
		CU_ASSERT_EQUAL(diag_count, 1);
		CU_ASSERT_STRING_EQUAL(diag_last, want);
		if (g || strcmp(diag_last, want) != 0)
			fprintf(stderr, "\ncase %zu: got \"%s\"\n", i, diag_last);
		ir_free(g);
	}
}

/* Any prefix and a few thousand random mutations: a graph or NULL, no crash
 * (run under ASan/UBSan to mean something). */
static void
test_no_crash(void)
{
	Graph *g = kitchen_sink();
	size_t len;
	char *text = print_str(g, &len);
	ir_free(g);
	quiet_diags();
	for (size_t n = 0; n <= len; n++) {
		/* a private copy so ASan sees reads past the prefix */
		char *p = malloc(n + 1);
		memcpy(p, text, n);
		ir_free(ir_parse(p, n, "t.ir"));
		free(p);
	}
	static const char junk[] = "%_=,[]{}\"\\#@+:x0-9e.n \n\x00\xff";
	unsigned seed = 12345;
	char *p = malloc(len);
	for (int round = 0; round < 3000; round++) {
		memcpy(p, text, len);
		for (int k = 0; k < 1 + round % 4; k++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = (seed >> 8) % len;
			seed = seed * 1103515245u + 12345u;
			p[at] = (seed >> 16) & 1 ? (char)(seed >> 20) : junk[(seed >> 20) % (sizeof junk - 1)];
		}
		Graph *h = ir_parse(p, len, "t.ir");
		if (h) {
			/* whatever reads must also print */
			char *s = print_str(h, NULL);
			free(s);
		}
		ir_free(h);
	}
	free(p);
	free(text);
	CU_PASS("no crash");
}

/* The big values in a data file (ir_print_data, tapc -emit=ir -o FILE):
 * the text names it and points into it, reading the pair gives the values
 * back bit for bit (the inline print of the graph read back is the inline
 * print of the original), and the reader refuses ranges past its end. */
static void
test_data_file(void)
{
	char dir[] = "/tmp/tapc-unit-data.XXXXXX";
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	Graph *g = ir_new("g");
	g->opset = 17;
	float w[40];
	int64_t k[17], s4[4] = {1, 2, 3, 4};
	for (int i = 0; i < 40; i++)
		w[i] = i == 3 ? NAN : (float)i / 7.0f - 1;
	for (int i = 0; i < 17; i++)
		k[i] = (int64_t)i * -1234567891011;
	int64_t d40[] = {5, 8}, d17[] = {17}, d4[] = {4};
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 2, d40);
	ir_add_input(g, x);
	TensorId wt = data_tensor(g, "w", TK_WEIGHT, DT_F32, 2, d40, w, sizeof w);
	TensorId kt = data_tensor(g, "", TK_CONST, DT_I64, 1, d17, k, sizeof k);
	TensorId st = data_tensor(g, "", TK_CONST, DT_I64, 1, d4, s4, sizeof s4);
	TensorId y = value(g, DT_F32, 2, d40), z = value(g, DT_I64, 1, d17);
	TensorId in1[] = {x, wt}, in2[] = {kt, st};
	ir_add_node(g, OP_Add, "add", 2, in1, 1, &y);
	ir_add_node(g, OP_Expand, "e", 2, in2, 1, &z);
	ir_add_output(g, y);
	ir_add_output(g, z);
	ir_reindex(g);

	char path[64], data[80];
	snprintf(path, sizeof path, "%s/g.ir", dir);
	snprintf(data, sizeof data, "%s/g.ir.weights", dir);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len), *df = fopen(data, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(df);
	int64_t bytes = -1;
	CU_ASSERT(ir_print_data(f, g, df, "g.ir.weights", &bytes));
	fclose(f);
	fclose(df);
	/* w at 0, k at the next 64-byte boundary; the 4-element const inline */
	CU_ASSERT_EQUAL(bytes, 192 + 17 * 8);
	CU_ASSERT(strstr(text, " data=\"g.ir.weights\"\n") != NULL);
	CU_ASSERT(strstr(text, "f32[5,8] @+0x0\n") != NULL);
	CU_ASSERT(strstr(text, "i64[17] @+0xc0\n") != NULL);
	CU_ASSERT(strstr(text, "i64[4] = [1,2,3,4]\n") != NULL);

	quiet_diags();
	Graph *h = ir_parse(text, len, path);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_STRING_EQUAL(h->ir_data, data);
	char *a = print_str(g, NULL), *b = print_str(h, NULL);
	CU_ASSERT_STRING_EQUAL(a, b);
	free(a);
	free(b);
	ir_free(h);

	/* a data file cut short: the line whose range is past its end */
	CU_ASSERT_EQUAL(truncate(data, 200), 0);
	h = ir_parse(text, len, path);
	CU_ASSERT_PTR_NULL(h);
	CU_ASSERT(strstr(diag_last, "line 5: bytes 0xc0+136 are past the data file's end (200 bytes)") != NULL);
	if (!strstr(diag_last, "past the data file's end"))
		fprintf(stderr, "\n%s\n%s", diag_last, text);
	unlink(data);
	rmdir(dir);
	free(text);
	ir_free(g);
}

/* A weight converted as it loads (legalize-half's f32 copy of a sliced
 * half weight): "from=" reads back, the file range is the halves'. */
static void
test_from_dtype(void)
{
	static const char text[] =
	    "graph \"g\" model=\"m.onnx\" opset=17\n"
	    "  %0 = weight \"w\" f32[2,4] @m.onnx+0x10 slice=1/2 from=bf16\n"
	    "  %1 = weight \"v\" f32[6] @m.onnx+0x40 from=f16\n"
	    "  %2 = Add %0, %0 : f32[2,4]\n"
	    "  output %2 \"y\"\n";
	roundtrip_text(text, sizeof text - 1);
	quiet_diags();
	Graph *g = read_str(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	for (TensorId t = 0; t < g->ntensors; t++) {
		const Tensor *x = &g->tensors[t];
		if (!strcmp(x->name, "w")) {
			CU_ASSERT_EQUAL(x->file_dtype, DT_BF16);
			CU_ASSERT_EQUAL(x->length, 2 * 8 * 2); /* two parts of 8 halves */
		}
		if (!strcmp(x->name, "v")) {
			CU_ASSERT_EQUAL(x->file_dtype, DT_F16);
			CU_ASSERT_EQUAL(x->length, 6 * 2);
		}
	}
	ir_free(g);
}

void
suite_read(CU_pSuite s)
{
	ADD(s, test_from_dtype);
	ADD(s, test_data_file);
	ADD(s, test_roundtrip_all_forms);
	ADD(s, test_read_structure);
	ADD(s, test_forward_refs);
	ADD(s, test_header_forms);
	ADD(s, test_errors);
	ADD(s, test_no_crash);
}
