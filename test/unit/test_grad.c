/*
 * test_grad.c - autodiff against an independent oracle: central finite
 * differences of the loss, computed by running the forward graph on
 * libtaprt's kernels (test/unit/graph_exec.c).
 *
 * Every gradient rule has at least one case: a tiny graph in IR text
 * whose weights get random values, loss = ReduceSum(Y * R) for a random
 * constant R, autodiff, then every element of every gradient against
 * (L(w + h) - L(w - h)) / 2h.  Graphs are f64 (where the kernels take it)
 * so the comparison is tight.  The cases cover broadcasting, keepdims,
 * negative axes, several outputs, fan-out, older opsets' attribute forms,
 * and weights that must get no gradient.  Whole fixture models (mlp, cnn,
 * ln17, gpt, bert) are differentiated and checked the same way on a few
 * elements per weight, in f64 (every f32 tensor widened) and in f32.  The
 * gradient kernels also have hand-computed cases, and the pass's errors
 * and bookkeeping are checked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad.h"
#include "passes/passes.h"
#include "test/unit/graph_exec.h"
#include "test/unit/rt_util.h"
#include "test/unit/util.h"

/* ------------------------------------------------------------ harness */

static uint64_t rng = 88172645463325252ull;

static double
rnd(double lo, double hi)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

/* Random inline values for t (a float weight without data, or an input's
 * buffer later). */
static void
fill(Graph *g, TensorId id, double lo, double hi)
{
	Tensor *t = &g->tensors[id];
	int64_t n = ir_numel(t);
	t->data = DATA_INLINE;
	t->length = n * ir_dtype_size(t->dtype);
	t->bytes = ir_alloc(&g->arena, (size_t)t->length + 1);
	for (int64_t i = 0; i < n; i++) {
		if (t->dtype == DT_F64)
			((double *)t->bytes)[i] = rnd(lo, hi);
		else if (t->dtype == DT_F32)
			((float *)t->bytes)[i] = (float)rnd(lo, hi);
		else
			die("fill: %s", ir_dtype_name(t->dtype));
	}
}

static NodeId
add_node(Graph *g, Op op, const char *name, int nin, const TensorId *in, TensorId *out)
{
	*out = ir_add_tensor(g, name, TK_VALUE, DT_UNDEF);
	return ir_add_node(g, op, name, nin, in, 1, out);
}

/* loss = ReduceSum(y * R) over every axis, R random of y's type; or
 * ReduceMean(y) when mean. */
static void
add_loss(Graph *g, TensorId y, bool mean)
{
	TensorId p = y, l;
	if (!mean) {
		TensorId r = ir_add_tensor(g, "R", TK_CONST, g->tensors[y].dtype);
		ir_set_shape(&g->tensors[r], g->tensors[y].rank, g->tensors[y].dims);
		fill(g, r, -1, 1);
		TensorId in[2] = {y, r};
		NodeId m = add_node(g, OP_Mul, "loss/Mul", 2, in, &p);
		CU_ASSERT_TRUE_FATAL(ir_infer_node(g, m));
	}
	NodeId s = add_node(g, mean ? OP_ReduceMean : OP_ReduceSum, "loss/Reduce", 1, &p, &l);
	ir_set_attr(g, s, "keepdims", ATTR_INT)->i = 0;
	CU_ASSERT_TRUE_FATAL(ir_infer_node(g, s));
	g->loss = l;
}

/* The printed graph reads back, checks like a model and infers again:
 * the backward nodes use only what the graph's opset allows. */
static void
check_roundtrip(Graph *g)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ir_print(f, g);
	fclose(f);
	Graph *h = ir_parse(text, len, "grad.ir");
	CU_ASSERT_PTR_NOT_NULL(h);
	if (h) {
		bool ok = ir_check(h) && ir_reinfer(h);
		if (!ok)
			printf("\n  round trip: %s\n", diag_last);
		CU_ASSERT_TRUE(ok);
	}
	ir_free(h);
	free(text);
}

/* Is t one of the names in the space-separated list? */
static bool
listed(const char *list, const char *name)
{
	char pat[256];
	snprintf(pat, sizeof pat, " %s ", name);
	char buf[1024];
	snprintf(buf, sizeof buf, " %s ", list ? list : "");
	return strstr(buf, pat) != NULL;
}

static TensorId
grad_of(Graph *g, TensorId w)
{
	for (int i = 0; i < g->ngrads; i++)
		if (g->grads[i].weight == w)
			return g->grads[i].grad;
	return IR_NONE;
}

/* Every float weight has a gradient of its type unless listed in nograd,
 * every backward node is marked and named so, after the forward ones. */
static void
check_bookkeeping(Graph *g, int nfwd, const char *nograd, const char *what)
{
	for (TensorId t = 0; t < g->ntensors; t++) {
		const Tensor *w = &g->tensors[t];
		if (w->kind != TK_WEIGHT || (w->dtype != DT_F32 && w->dtype != DT_F64))
			continue;
		TensorId gr = grad_of(g, t);
		bool want = !listed(nograd, w->name);
		if ((gr != IR_NONE) != want)
			printf("\n  %s: weight '%s' %s a gradient\n", what, w->name, want ? "lacks" : "has");
		CU_ASSERT_EQUAL(gr != IR_NONE, want);
		if (gr == IR_NONE)
			continue;
		const Tensor *d = &g->tensors[gr];
		CU_ASSERT_EQUAL(d->dtype, w->dtype);
		CU_ASSERT_EQUAL(d->rank, w->rank);
		CU_ASSERT_EQUAL(memcmp(d->dims, w->dims, sizeof w->dims[0] * w->rank), 0);
	}
	for (NodeId n = 0; n < g->nnodes; n++) {
		const Node *nd = &g->nodes[n];
		CU_ASSERT_EQUAL(nd->phase, n < nfwd ? PHASE_FWD : PHASE_BWD);
		if (n >= nfwd)
			CU_ASSERT_PTR_NOT_NULL(strstr(nd->name, "/grad"));
	}
}

/*
 * Compare d loss / d w[e] with central differences for the elements e in
 * [0, n) by `every`.  The step actually taken is read back (an f32 weight
 * rounds w + h).  Returns the number of mismatches.
 */
static int
check_fd(GExec *x, Graph *g, int nfwd, TensorId w, TensorId gw, int64_t every, double h,
    double rtol, double atol, const char *what)
{
	int bad = 0;
	int64_t n = ir_numel(&g->tensors[w]);
	for (int64_t e = 0; e < n; e += every) {
		double an = gx_get(x, gw, e), w0 = gx_get(x, w, e);
		gx_set(x, w, e, w0 + h);
		double wp = gx_get(x, w, e);
		CU_ASSERT_TRUE_FATAL(gx_run(x, 0, nfwd));
		double lp = gx_get(x, g->loss, 0);
		gx_set(x, w, e, w0 - h);
		double wm = gx_get(x, w, e);
		CU_ASSERT_TRUE_FATAL(gx_run(x, 0, nfwd));
		double lm = gx_get(x, g->loss, 0);
		gx_set(x, w, e, w0);
		double fd = (lp - lm) / (wp - wm);
		if (!(fabs(an - fd) <= atol + rtol * fmax(fabs(an), fabs(fd)))) {
			if (!bad)
				printf("\n  %s: d/d %s[%lld] is %.9g, finite differences %.9g\n", what,
				    g->tensors[w].name, (long long)e, an, fd);
			bad++;
		}
	}
	CU_ASSERT_TRUE_FATAL(gx_run(x, 0, nfwd));
	return bad;
}

/* Run the whole graph once; fill inputs at random in [lo, hi]. */
static GExec *
run_all(Graph *g, double lo, double hi)
{
	GExec *x = gx_new(g);
	if (!x)
		printf("\n  executor: %s\n", gx_why());
	CU_ASSERT_PTR_NOT_NULL_FATAL(x);
	for (int i = 0; i < g->ninputs; i++) {
		TensorId in = g->inputs[i];
		DType dt = g->tensors[in].dtype;
		for (int64_t e = 0; e < ir_numel(&g->tensors[in]); e++)
			gx_set(x, in, e, dt == DT_F32 || dt == DT_F64 ? rnd(lo, hi) : rnd(0, 1) < 0.5);
	}
	bool ok = gx_run(x, 0, g->nnodes);
	if (!ok)
		printf("\n  run: %s\n", gx_error(x));
	CU_ASSERT_TRUE_FATAL(ok);
	return x;
}

/*
 * One case: IR text whose output 0 is differentiated; weights without
 * data and inputs random in [lo, hi]; nograd lists the float weights
 * that must get no gradient.
 */
static void
check_case(const char *what, const char *ir, double lo, double hi, const char *nograd)
{
	Graph *g = ir_parse(ir, strlen(ir), what);
	if (!g)
		printf("\n  %s: %s\n", what, diag_last);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].kind == TK_WEIGHT && g->tensors[t].data == DATA_NONE)
			fill(g, t, lo, hi);
	bool ok = ir_infer_all(g);
	if (!ok)
		printf("\n  %s: %s\n", what, diag_last);
	CU_ASSERT_TRUE_FATAL(ok);
	add_loss(g, g->outputs[0], false);
	int nfwd = g->nnodes;
	PassCtx cx = {0};
	ok = pass_autodiff(g, &cx);
	if (!ok)
		printf("\n  %s: %s\n", what, diag_last);
	CU_ASSERT_TRUE_FATAL(ok);
	CU_ASSERT_TRUE(pass_verify(g, &cx));
	check_bookkeeping(g, nfwd, nograd, what);
	check_roundtrip(g);
	GExec *x = run_all(g, lo, hi);
	bool f32 = g->tensors[g->loss].dtype == DT_F32;
	int bad = 0;
	for (int i = 0; i < g->ngrads; i++) {
		bool wf32 = g->tensors[g->grads[i].weight].dtype == DT_F32;
		bad += check_fd(x, g, nfwd, g->grads[i].weight, g->grads[i].grad, 1,
		    f32 ? 1e-2 : wf32 ? 1e-3 : 1e-6, f32 ? 2e-2 : 1e-5, f32 ? 2e-3 : 1e-7, what);
	}
	CU_ASSERT_EQUAL(bad, 0);
	gx_free(x);
	ir_free(g);
}

#define CASE(what, ir) check_case(what, "graph \"t\" opset=17\n" ir, -1, 1, NULL)
#define CASE_R(what, lo, hi, ir) check_case(what, "graph \"t\" opset=17\n" ir, lo, hi, NULL)
#define CASE_OPSET(what, opset, ir) check_case(what, "graph \"t\" opset=" #opset "\n" ir, -1, 1, NULL)

/* -------------------------------------------------- elementwise, unary */

static void
unary_ops(void)
{
	static const struct {
		const char *op, *attrs;
		double lo, hi;
	} u[] = {
		{"Abs", "", -1, 1}, {"Neg", "", -1, 1}, {"Exp", "", -1, 1}, {"Log", "", 0.5, 2},
		{"Sqrt", "", 0.5, 2}, {"Reciprocal", "", 0.5, 2}, {"Relu", "", -1, 1},
		{"LeakyRelu", "{alpha=0.2}", -1, 1}, {"Elu", "{alpha=0.7}", -1, 1},
		{"Sigmoid", "", -2, 2}, {"HardSigmoid", "{alpha=0.3 beta=0.4}", -4, 4},
		{"Softplus", "", -2, 2}, {"Softsign", "", -2, 2}, {"Tanh", "", -2, 2},
		{"Erf", "", -1.5, 1.5}, {"Sin", "", -3, 3}, {"Cos", "", -3, 3},
		{"Tan", "", -1, 1}, {"Asin", "", -0.8, 0.8}, {"Acos", "", -0.8, 0.8},
		{"Atan", "", -2, 2}, {"Sinh", "", -2, 2}, {"Cosh", "", -2, 2},
		{"Asinh", "", -2, 2}, {"Acosh", "", 1.2, 3}, {"Atanh", "", -0.8, 0.8},
		{"Identity", "", -1, 1}, {"Dropout", "", -1, 1}, {"LeakyRelu", "", -1, 1},
	};
	for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
		char ir[512];
		snprintf(ir, sizeof ir, "graph \"t\" opset=17\n"
		    "%%0 = weight \"a\" f64[3,4]\n"
		    "%%1 = %s %%0 %s : ?[?]   # u\n"
		    "output %%1 \"y\"\n", u[i].op, u[i].attrs);
		check_case(u[i].op, ir, u[i].lo, u[i].hi, NULL);
	}
}

static void
cast_and_clip(void)
{
	CASE("Cast f32 to f64",
	    "%0 = weight \"a\" f32[2,3]\n"
	    "%1 = Cast %0 {to=11} : ?[?]\n"
	    "%2 = Mul %1, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Clip both bounds",
	    "%0 = weight \"a\" f64[3,4]\n"
	    "%1 = const f64[] = [-0.5]\n"
	    "%2 = const f64[] = [0.4]\n"
	    "%3 = Clip %0, %1, %2 : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Clip max only",
	    "%0 = weight \"a\" f64[3,4]\n"
	    "%1 = const f64[] = [0.3]\n"
	    "%2 = Clip %0, _, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE_OPSET("Clip attributes (opset 10)", 10,
	    "%0 = weight \"a\" f64[3,4]\n"
	    "%1 = Clip %0 {max=0.5 min=-0.25} : ?[?]\n"
	    "output %1 \"y\"\n");
}

/* ------------------------------------------- elementwise, broadcasting */

static void
binary_ops(void)
{
	CASE("Add, both broadcast",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = weight \"b\" f64[3,1]\n"
	    "%2 = Add %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Sub, both broadcast",
	    "%0 = weight \"a\" f64[3,1]\n"
	    "%1 = weight \"b\" f64[2,1,4]\n"
	    "%2 = Sub %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Mul, a bias-like operand",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = weight \"b\" f64[3]\n"
	    "%2 = Mul %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE_R("Div", 0.5, 2,
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = weight \"b\" f64[2,1]\n"
	    "%2 = Div %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Pow, constant exponent 2",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = const f64[] = [2.0]\n"
	    "%2 = Pow %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE_R("Pow, constant exponent 2.5", 0.5, 2,
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = const f64[] = [2.5]\n"
	    "%2 = Pow %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Pow, integer exponent",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = const i64[] = [3]\n"
	    "%2 = Pow %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	/* a base of exact zeros (w * 0) and an exponent of 0 there: b a^(b-1)
	 * is 0 * inf = NaN; the gradient is 0, as torch's */
	CASE("Pow, constant exponent 0 at base 0",
	    "%0 = weight \"w\" f64[2,3]\n"
	    "%1 = const f64[2,3] = [0.0,1.0,0.0,1.0,1.0,0.0]\n"
	    "%2 = Mul %0, %1 : ?[?]\n"
	    "%3 = const f64[] = [0.0]\n"
	    "%4 = Pow %2, %3 : ?[?]\n"
	    "output %4 \"y\"\n");
	CASE("Pow, exponents with 0 at base 0",
	    "%0 = weight \"w\" f64[2,3]\n"
	    "%1 = const f64[2,3] = [0.0,1.0,0.0,1.0,0.0,0.0]\n"
	    "%2 = Mul %0, %1 : ?[?]\n"
	    "%3 = const f64[3] = [0.0,2.0,3.0]\n"
	    "%4 = Pow %2, %3 : ?[?]\n"
	    "output %4 \"y\"\n");
	CASE_R("Pow, weight exponent", 0.5, 1.5,
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = weight \"b\" f64[3]\n"
	    "%2 = Pow %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("PRelu",
	    "%0 = weight \"x\" f64[2,3,4]\n"
	    "%1 = weight \"slope\" f64[3,1]\n"
	    "%2 = PRelu %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Max of three",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = weight \"b\" f64[3]\n"
	    "%2 = weight \"c\" f64[2,1]\n"
	    "%3 = Max %0, %1, %2 : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Min of two",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = weight \"b\" f64[2,3]\n"
	    "%2 = Min %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Max of a tensor with itself (a tie everywhere)",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = Max %0, %0 : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("Max of one",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = Max %0 : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("Sum",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = weight \"b\" f64[3]\n"
	    "%2 = weight \"c\" f64[1,1]\n"
	    "%3 = Sum %0, %1, %2 : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Mean",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = weight \"b\" f64[2,1]\n"
	    "%2 = Mean %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Where",
	    "%0 = const bool[2,3] = [1,0,0,1,1,0]\n"
	    "%1 = weight \"a\" f64[2,3]\n"
	    "%2 = weight \"b\" f64[3]\n"
	    "%3 = Where %0, %1, %2 : ?[?]\n"
	    "output %3 \"y\"\n");
}

/* --------------------------------------------------------- reductions */

static void
reductions(void)
{
	CASE("ReduceSum axes input, keepdims",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = const i64[1] = [1]\n"
	    "%2 = ReduceSum %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("ReduceSum negative axes, no keepdims",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = const i64[2] = [-1,0]\n"
	    "%2 = ReduceSum %0, %1 {keepdims=0} : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("ReduceSum all axes",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = ReduceSum %0 {keepdims=0} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("ReduceSum noop_with_empty_axes",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = ReduceSum %0 {noop_with_empty_axes=1} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE_OPSET("ReduceSum axes attribute (opset 11)", 11,
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = ReduceSum %0 {axes=[1] keepdims=0} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("ReduceMean",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = ReduceMean %0 {axes=[-1] keepdims=0} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE_OPSET("ReduceMean axes input (opset 18)", 18,
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = const i64[2] = [0,2]\n"
	    "%2 = ReduceMean %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("ReduceMax",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = ReduceMax %0 {axes=[1] keepdims=0} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("ReduceMin keepdims",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = ReduceMin %0 {axes=[0,2]} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("ReduceSumSquare",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = const i64[1] = [-2]\n"
	    "%2 = ReduceSumSquare %0 {axes=[-2] keepdims=0} : ?[?]\n"
	    "output %2 \"y\"\n");
}

/* ------------------------------------------------------- data movement */

static void
shape_ops(void)
{
	CASE("Reshape",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = const i64[2] = [4,6]\n"
	    "%2 = Reshape %0, %1 : ?[?]\n"
	    "%3 = Tanh %2 : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Flatten",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = Flatten %0 {axis=2} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("Squeeze, axes input",
	    "%0 = weight \"a\" f64[2,1,3]\n"
	    "%1 = const i64[1] = [1]\n"
	    "%2 = Squeeze %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE_OPSET("Squeeze without axes, Unsqueeze axes attribute (opset 11)", 11,
	    "%0 = weight \"a\" f64[2,1,3]\n"
	    "%1 = Squeeze %0 : ?[?]\n"
	    "%2 = Unsqueeze %1 {axes=[0,3]} : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Transpose",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = Transpose %0 {perm=[2,0,1]} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("Transpose, default perm",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = Transpose %0 : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("Concat with a constant and one input twice",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = const f64[2,2] = [1.0,2.0,3.0,4.0]\n"
	    "%2 = weight \"b\" f64[2,1]\n"
	    "%3 = Concat %0, %1, %2, %0 {axis=-1} : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Split, both outputs used",
	    "%0 = weight \"a\" f64[2,4]\n"
	    "%1, %2 = Split %0 {axis=1} : ?[?], ?[?]\n"
	    "%3 = Mul %1, %2 : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Split, outputs without gradient",
	    "%0 = weight \"a\" f64[5,2]\n"
	    "%1 = const i64[3] = [1,3,1]\n"
	    "%2, %3, _ = Split %0, %1 : ?[?], ?[?], _\n"
	    "%4 = Exp %3 : ?[?]\n"
	    "output %4 \"y\"\n");
	CASE_OPSET("Split attribute (opset 11)", 11,
	    "%0 = weight \"a\" f64[2,5]\n"
	    "%1, %2 = Split %0 {axis=-1 split=[2,3]} : ?[?], ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Slice, step 1",
	    "%0 = weight \"a\" f64[3,5]\n"
	    "%1 = const i64[1] = [1]\n"
	    "%2 = const i64[1] = [4]\n"
	    "%3 = const i64[1] = [-1]\n"
	    "%4 = Slice %0, %1, %2, %3 : ?[?]\n"
	    "output %4 \"y\"\n");
	CASE("Slice, negative and strided steps",
	    "%0 = weight \"a\" f64[4,7]\n"
	    "%1 = const i64[2] = [-1,1]\n"
	    "%2 = const i64[2] = [-100,7]\n"
	    "%3 = const i64[2] = [1,0]\n"
	    "%4 = const i64[2] = [-2,3]\n"
	    "%5 = Slice %0, %1, %2, %3, %4 : ?[?]\n"
	    "output %5 \"y\"\n");
	CASE_OPSET("Slice attributes (opset 9)", 9,
	    "%0 = weight \"a\" f64[3,5]\n"
	    "%1 = Slice %0 {axes=[1] ends=[100] starts=[2]} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("Gather: embedding rows, repeated and negative indices",
	    "%0 = weight \"table\" f64[5,3]\n"
	    "%1 = const i64[2,2] = [0,2,2,-1]\n"
	    "%2 = Gather %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Gather on axis 1",
	    "%0 = weight \"a\" f64[2,4,3]\n"
	    "%1 = const i64[3] = [1,-1,1]\n"
	    "%2 = Gather %0, %1 {axis=1} : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("GatherElements",
	    "%0 = weight \"a\" f64[3,4]\n"
	    "%1 = const i64[3,2] = [0,0,3,-1,2,1]\n"
	    "%2 = GatherElements %0, %1 {axis=1} : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Expand",
	    "%0 = weight \"a\" f64[3,1]\n"
	    "%1 = const i64[3] = [2,3,4]\n"
	    "%2 = Expand %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Tile",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = const i64[2] = [2,3]\n"
	    "%2 = Tile %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Tile, one axis",
	    "%0 = weight \"a\" f64[2,3,2]\n"
	    "%1 = const i64[3] = [1,1,3]\n"
	    "%2 = Tile %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Trilu",
	    "%0 = weight \"a\" f64[2,3,3]\n"
	    "%1 = const i64[] = [1]\n"
	    "%2 = Trilu %0, %1 {upper=0} : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Pad, constant",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = const i64[4] = [0,1,2,0]\n"
	    "%2 = const f64[] = [0.5]\n"
	    "%3 = Pad %0, %1, %2 : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Pad, cropping and padding",
	    "%0 = weight \"a\" f64[3,4]\n"
	    "%1 = const i64[4] = [-1,2,1,-2]\n"
	    "%2 = Pad %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE_OPSET("Pad attribute (opset 10)", 10,
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = Pad %0 {pads=[1,0,0,2]} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("CumSum",
	    "%0 = weight \"a\" f64[2,4]\n"
	    "%1 = const i64[] = [1]\n"
	    "%2 = CumSum %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("CumSum, exclusive and reverse",
	    "%0 = weight \"a\" f64[3,2]\n"
	    "%1 = const i64[] = [0]\n"
	    "%2 = CumSum %0, %1 {exclusive=1 reverse=1} : ?[?]\n"
	    "output %2 \"y\"\n");
}

/* ------------------------------------------------------------ products */

static void
products(void)
{
	CASE("MatMul 2-D",
	    "%0 = weight \"a\" f64[3,4]\n"
	    "%1 = weight \"b\" f64[4,5]\n"
	    "%2 = MatMul %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("MatMul, rows against a matrix",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = weight \"b\" f64[4,5]\n"
	    "%2 = MatMul %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("MatMul, broadcast batch dims",
	    "%0 = weight \"a\" f64[2,1,3,4]\n"
	    "%1 = weight \"b\" f64[3,4,5]\n"
	    "%2 = MatMul %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("MatMul, 1-D left",
	    "%0 = weight \"a\" f64[4]\n"
	    "%1 = weight \"b\" f64[2,4,5]\n"
	    "%2 = MatMul %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("MatMul, 1-D right",
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = weight \"b\" f64[4]\n"
	    "%2 = MatMul %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("MatMul, both 1-D",
	    "%0 = weight \"a\" f64[4]\n"
	    "%1 = weight \"b\" f64[4]\n"
	    "%2 = MatMul %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE_OPSET("MatMul without two-input Gemm (opset 9)", 9,
	    "%0 = weight \"a\" f64[2,3,4]\n"
	    "%1 = weight \"b\" f64[4,5]\n"
	    "%2 = MatMul %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Gemm, transposes, alpha, beta, bias",
	    "%0 = weight \"a\" f64[4,3]\n"
	    "%1 = weight \"b\" f64[5,4]\n"
	    "%2 = weight \"c\" f64[5]\n"
	    "%3 = Gemm %0, %1, %2 {alpha=0.7 beta=1.3 transA=1 transB=1} : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Gemm, transA",
	    "%0 = weight \"a\" f64[4,3]\n"
	    "%1 = weight \"b\" f64[4,5]\n"
	    "%2 = weight \"c\" f64[3,1]\n"
	    "%3 = Gemm %0, %1, %2 {transA=1} : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Gemm, transB, scalar C",
	    "%0 = weight \"a\" f64[3,4]\n"
	    "%1 = weight \"b\" f64[5,4]\n"
	    "%2 = weight \"c\" f64[]\n"
	    "%3 = Gemm %0, %1, %2 {beta=0.5 transB=1} : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE_OPSET("Gemm (opset 9)", 9,
	    "%0 = weight \"a\" f64[3,4]\n"
	    "%1 = weight \"b\" f64[4,5]\n"
	    "%2 = weight \"c\" f64[3,5]\n"
	    "%3 = Gemm %0, %1, %2 {alpha=2.0} : ?[?]\n"
	    "output %3 \"y\"\n");
}

/* --------------------------------------------- convolution and pools */

static void
conv_pool(void)
{
	CASE("Conv 2-D: groups, strides, pads, dilations, bias",
	    "%0 = weight \"x\" f64[2,4,6,7]\n"
	    "%1 = weight \"w\" f64[6,2,3,2]\n"
	    "%2 = weight \"b\" f64[6]\n"
	    "%3 = Conv %0, %1, %2 {dilations=[1,2] group=2 pads=[1,0,1,2] strides=[2,1]} : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("Conv 1-D",
	    "%0 = weight \"x\" f64[1,2,9]\n"
	    "%1 = weight \"w\" f64[3,2,3]\n"
	    "%2 = Conv %0, %1 {strides=[3]} : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Conv SAME_UPPER, stride 2",
	    "%0 = weight \"x\" f64[1,2,5,5]\n"
	    "%1 = weight \"w\" f64[2,2,3,3]\n"
	    "%2 = Conv %0, %1 {auto_pad=\"SAME_UPPER\" strides=[2,2]} : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("Conv 1x1",
	    "%0 = weight \"x\" f64[2,3,2,2]\n"
	    "%1 = weight \"w\" f64[4,3,1,1]\n"
	    "%2 = Conv %0, %1 : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("MaxPool",
	    "%0 = weight \"x\" f64[2,2,4,4]\n"
	    "%1 = MaxPool %0 {kernel_shape=[2,2] strides=[2,2]} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("MaxPool: pads, dilations, ceil_mode, overlapping windows",
	    "%0 = weight \"x\" f64[1,2,6,5]\n"
	    "%1 = MaxPool %0 {ceil_mode=1 dilations=[1,2] kernel_shape=[3,2] pads=[1,1,1,0] strides=[2,1]} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("MaxPool 1-D, Indices output",
	    "%0 = weight \"x\" f64[1,2,7]\n"
	    "%1, %2 = MaxPool %0 {kernel_shape=[3] strides=[2]} : ?[?], ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("AveragePool",
	    "%0 = weight \"x\" f64[2,2,5,5]\n"
	    "%1 = AveragePool %0 {kernel_shape=[3,3] pads=[1,1,1,1] strides=[2,2]} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("AveragePool count_include_pad, ceil_mode",
	    "%0 = weight \"x\" f64[1,2,6,5]\n"
	    "%1 = AveragePool %0 {ceil_mode=1 count_include_pad=1 kernel_shape=[3,2] pads=[1,0,1,1] strides=[2,2]} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("GlobalAveragePool",
	    "%0 = weight \"x\" f64[2,3,4,5]\n"
	    "%1 = GlobalAveragePool %0 : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("GlobalMaxPool",
	    "%0 = weight \"x\" f64[2,3,4,5]\n"
	    "%1 = GlobalMaxPool %0 : ?[?]\n"
	    "output %1 \"y\"\n");
}

/* ------------------------------------------ normalizations and softmax */

static void
norms(void)
{
	check_case("BatchNormalization: running statistics get no gradient",
	    "graph \"t\" opset=15\n"
	    "%0 = weight \"x\" f64[2,3,4,2]\n"
	    "%1 = weight \"scale\" f64[3]\n"
	    "%2 = weight \"bias\" f64[3]\n"
	    "%3 = weight \"mean\" f64[3] = [0.1,-0.2,0.3]\n"
	    "%4 = weight \"var\" f64[3] = [0.5,1.5,0.8]\n"
	    "%5 = BatchNormalization %0, %1, %2, %3, %4 {epsilon=0.001} : ?[?]\n"
	    "output %5 \"y\"\n", -1, 1, "mean var");
	CASE("BatchNormalization of [N,C]",
	    "%0 = weight \"x\" f64[4,3]\n"
	    "%1 = weight \"scale\" f64[3]\n"
	    "%2 = weight \"bias\" f64[3]\n"
	    "%3 = const f64[3] = [0.1,-0.2,0.3]\n"
	    "%4 = const f64[3] = [0.5,1.5,0.8]\n"
	    "%5 = BatchNormalization %0, %1, %2, %3, %4 : ?[?]\n"
	    "output %5 \"y\"\n");
	CASE("LayerNormalization, last axis",
	    "%0 = weight \"x\" f64[2,3,5]\n"
	    "%1 = weight \"scale\" f64[5]\n"
	    "%2 = weight \"bias\" f64[5]\n"
	    "%3 = LayerNormalization %0, %1, %2 {epsilon=0.01} : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("LayerNormalization over two axes, bias of another shape",
	    "%0 = weight \"x\" f64[2,3,4]\n"
	    "%1 = weight \"scale\" f64[3,4]\n"
	    "%2 = weight \"bias\" f64[4]\n"
	    "%3 = LayerNormalization %0, %1, %2 {axis=1} : ?[?]\n"
	    "output %3 \"y\"\n");
	CASE("LayerNormalization, no bias, scale broadcast",
	    "%0 = weight \"x\" f64[3,2,4]\n"
	    "%1 = weight \"scale\" f64[1,4]\n"
	    "%2 = LayerNormalization %0, %1 {axis=-2} : ?[?]\n"
	    "output %2 \"y\"\n");
	CASE("FusedLayerNorm (fuse-train's)",
	    "%0 = weight \"x\" f64[2,3,5]\n"
	    "%1 = weight \"scale\" f64[5]\n"
	    "%2 = weight \"bias\" f64[5]\n"
	    "%3 = FusedLayerNorm %0, %1, %2 {axis=-1 epsilon=0.01} : ?[?]\n"
	    "output %3 \"y\"\n");
	/* fuse-train's GELU (f32 only): GeluGrad against differences of
	 * FusedGelu, over the erf's curve and both tails */
	CASE_R("FusedGelu", -4, 4,
	    "%0 = weight \"x\" f32[3,7]\n"
	    "%1 = FusedGelu %0 : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("Softmax, middle axis",
	    "%0 = weight \"x\" f64[2,3,4]\n"
	    "%1 = Softmax %0 {axis=1} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("Softmax, masked scores",
	    "%0 = weight \"x\" f64[2,3]\n"
	    "%1 = const bool[2,3] = [0,1,1,0,0,1]\n"
	    "%2 = const f64[] = [-inf]\n"
	    "%3 = Where %1, %2, %0 : ?[?]\n"
	    "%4 = Softmax %3 : ?[?]\n"
	    "output %4 \"y\"\n");
	CASE_OPSET("Softmax coerced to 2-D (opset 11)", 11,
	    "%0 = weight \"x\" f64[2,3,4]\n"
	    "%1 = Softmax %0 : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("LogSoftmax",
	    "%0 = weight \"x\" f64[2,3,4]\n"
	    "%1 = LogSoftmax %0 : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE_OPSET("LogSoftmax coerced to 2-D (opset 12)", 12,
	    "%0 = weight \"x\" f64[2,3,4]\n"
	    "%1 = LogSoftmax %0 {axis=0} : ?[?]\n"
	    "output %1 \"y\"\n");
	CASE("decomposed LayerNorm (opset 13 export)",
	    "%0 = weight \"x\" f64[2,3,6]\n"
	    "%1 = weight \"w\" f64[6]\n"
	    "%2 = weight \"b\" f64[6]\n"
	    "%3 = ReduceMean %0 {axes=[-1]} : ?[?]\n"
	    "%4 = Sub %0, %3 : ?[?]\n"
	    "%5 = const f64[] = [2.0]\n"
	    "%6 = Pow %4, %5 : ?[?]\n"
	    "%7 = ReduceMean %6 {axes=[-1]} : ?[?]\n"
	    "%8 = const f64[] = [1e-05]\n"
	    "%9 = Add %7, %8 : ?[?]\n"
	    "%10 = Sqrt %9 : ?[?]\n"
	    "%11 = Div %4, %10 : ?[?]\n"
	    "%12 = Mul %11, %1 : ?[?]\n"
	    "%13 = Add %12, %2 : ?[?]\n"
	    "output %13 \"y\"\n");
}

/* --------------------------------------------------- graph structure */

static void
fan_out(void)
{
	CASE("one tensor used four times",
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = Mul %0, %0 : ?[?]\n"
	    "%2 = Add %1, %0 : ?[?]\n"
	    "%3 = Tanh %2 : ?[?]\n"
	    "%4 = Mul %3, %0 : ?[?]\n"
	    "output %4 \"y\"\n");
}

/* Graph inputs, constants, integer paths and an unused weight get nothing,
 * and nothing is built for the nodes off the path. */
static void
no_gradient_paths(void)
{
	static const char ir[] = "graph \"t\" opset=17\n"
	    "%0 = input \"x\" f64[2,3]\n"
	    "%1 = weight \"w\" f64[3,4]\n"
	    "%2 = weight \"u\" f64[2,4]\n"
	    "%3 = weight \"z\" f64[4]\n"
	    "%4 = MatMul %0, %1 : ?[?]                 # mm\n"
	    "%5 = const f64[4] = [0.5,1.0,1.5,2.0]\n"
	    "%6 = Exp %5 : ?[?]                        # const_exp\n"
	    "%7 = Add %4, %6 : ?[?]                    # add_const\n"
	    "%8 = Relu %0 : ?[?]                       # input_relu\n"
	    "%9 = ReduceSum %8 {keepdims=0} : ?[?]     # input_sum\n"
	    "%10 = Mul %7, %9 : ?[?]                   # mul_input\n"
	    "%11 = ArgMax %2 {axis=1 keepdims=1} : ?[?]  # argmax\n"
	    "%12 = Cast %11 {to=11} : ?[?]             # cast\n"
	    "%13 = Add %10, %12 : ?[?]                 # add_int\n"
	    "output %13 \"y\"\n";
	check_case("no gradient to inputs, constants, integer paths", ir, -1, 1, "u z");
	Graph *g = ir_parse(ir, strlen(ir), "t.ir");
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].kind == TK_WEIGHT)
			fill(g, t, -1, 1);
	CU_ASSERT_TRUE_FATAL(ir_infer_all(g));
	add_loss(g, g->outputs[0], false);
	int nfwd = g->nnodes;
	PassCtx cx = {0};
	CU_ASSERT_TRUE_FATAL(pass_autodiff(g, &cx));
	static const char *off[] = {"const_exp", "input_relu", "input_sum", "argmax", "cast"};
	for (NodeId n = nfwd; n < g->nnodes; n++)
		for (size_t k = 0; k < sizeof off / sizeof off[0]; k++) {
			size_t len = strlen(off[k]);
			bool bad = !strncmp(g->nodes[n].name, off[k], len) && g->nodes[n].name[len] == '/';
			if (bad)
				printf("\n  built '%s' off the path\n", g->nodes[n].name);
			CU_ASSERT_FALSE(bad);
		}
	CU_ASSERT_EQUAL(g->ngrads, 1);
	/* ir_compact drops the unused weight z and renumbers: the loss and
	 * the pair follow */
	int nt = g->ntensors;
	ir_compact(g);
	CU_ASSERT_TRUE(g->ntensors < nt);
	CU_ASSERT_STRING_EQUAL(g->tensors[g->loss].name, "loss/Reduce");
	CU_ASSERT_STRING_EQUAL(g->tensors[g->grads[0].weight].name, "w");
	NodeId p = g->tensors[g->grads[0].grad].producer;
	CU_ASSERT_TRUE(p != IR_NONE && g->nodes[p].phase == PHASE_BWD);
	ir_free(g);
}

/* Contributions are summed in a fixed order: the same graph gives the
 * same backward graph, byte for byte. */
static char *
backward_text(const char *ir)
{
	rng = 12345;
	Graph *g = ir_parse(ir, strlen(ir), "t.ir");
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].kind == TK_WEIGHT)
			fill(g, t, -1, 1);
	CU_ASSERT_TRUE_FATAL(ir_infer_all(g));
	add_loss(g, g->outputs[0], false);
	PassCtx cx = {0};
	CU_ASSERT_TRUE_FATAL(pass_autodiff(g, &cx));
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ir_print(f, g);
	fclose(f);
	ir_free(g);
	return text;
}

static void
deterministic(void)
{
	static const char ir[] = "graph \"t\" opset=17\n"
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = Mul %0, %0 : ?[?]   # sq\n"
	    "%2 = Add %1, %0 : ?[?]   # add\n"
	    "%3 = Sigmoid %0 : ?[?]   # sig\n"
	    "%4 = Mul %2, %3 : ?[?]   # mul\n"
	    "output %4 \"y\"\n";
	char *a = backward_text(ir), *b = backward_text(ir);
	CU_ASSERT_STRING_EQUAL(a, b);
	/* a's gradient sums three contributions: from mul (via sig), add, sq x2 */
	CU_ASSERT_PTR_NOT_NULL(strstr(a, "# sq/grad_acc"));
	free(a);
	free(b);
}

/* ------------------------------------------------------------ errors */

static Graph *
typed(const char *ir)
{
	Graph *g = ir_parse(ir, strlen(ir), "t.ir");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].kind == TK_WEIGHT && g->tensors[t].data == DATA_NONE)
			fill(g, t, -1, 1);
	CU_ASSERT_TRUE_FATAL(ir_infer_all(g));
	return g;
}

/* The pass fails with one error and leaves the graph as it was. */
static void
expect_error(const char *ir, const char *msg)
{
	Graph *g = typed(ir);
	add_loss(g, g->outputs[0], false);
	int nn = g->nnodes, nt = g->ntensors;
	quiet_diags();
	PassCtx cx = {0};
	CU_ASSERT_FALSE(pass_autodiff(g, &cx));
	CU_ASSERT_EQUAL(diag_count, 1);
	if (!strstr(diag_last, msg))
		printf("\n  got: %s\n  expected: %s\n", diag_last, msg);
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, msg));
	CU_ASSERT_EQUAL(g->nnodes, nn);
	CU_ASSERT_EQUAL(g->ntensors, nt);
	CU_ASSERT_EQUAL(g->ngrads, 0);
	diag_stream = stderr;
	ir_free(g);
}

static void
errors(void)
{
	expect_error("graph \"t\" opset=17\n"
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = Tanh %0 : ?[?]\n"
	    "%2 = Einsum %1, %1 {equation=\"ij,ij->ij\"} : ?[?]   # ein\n"
	    "%3 = Relu %2 : ?[?]\n"
	    "output %3 \"y\"\n",
	    "node 'ein' (Einsum): Einsum has no gradient in tapc: docs/ops.md lists the operators that do");
	expect_error("graph \"t\" opset=17\n"
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = AllReduce %0 {group=\"dp\" mean=1} : ?[?]   # ar\n"
	    "output %1 \"y\"\n",
	    "node 'ar' (AllReduce): only tensor parallelism's one-tensor sum is differentiated, "
	    "not a dp bucket of 1");
	expect_error("graph \"t\" opset=17\n"
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = Exp %0 : ?[?]\n"
	    "%2 = const i64[4] = [1,1,1,1]\n"
	    "%3 = Pad %1, %2 {mode=\"reflect\"} : ?[?]   # pad\n"
	    "output %3 \"y\"\n",
	    "node 'pad' (Pad): Pad has a gradient in tapc only in mode constant, not 'reflect'");
	expect_error("graph \"t\" opset=17\n"
	    "%0 = weight \"x\" f64[2,3]\n"
	    "%1 = weight \"s\" f64[3]\n"
	    "%2 = weight \"b\" f64[3]\n"
	    "%3, %4, %5 = LayerNormalization %0, %1, %2 : ?[?], ?[?], ?[?]   # ln\n"
	    "%6 = Cast %4 {to=11} : ?[?]\n"
	    "%7 = Add %3, %6 : ?[?]\n"
	    "output %7 \"y\"\n",
	    "output 1 of LayerNormalization (Mean) has no gradient in tapc");
}

/* Nothing to do without a loss; a loss that is no scalar is refused. */
static void
loss_contract(void)
{
	Graph *g = typed("graph \"t\" opset=17\n"
	    "%0 = weight \"a\" f64[2,3]\n"
	    "%1 = Exp %0 : ?[?]\n"
	    "output %1 \"y\"\n");
	int nn = g->nnodes;
	PassCtx cx = {0};
	CU_ASSERT_TRUE(pass_autodiff(g, &cx));
	CU_ASSERT_EQUAL(g->nnodes, nn);
	CU_ASSERT_EQUAL(g->ngrads, 0);
	g->loss = g->outputs[0];
	quiet_diags();
	CU_ASSERT_FALSE(pass_autodiff(g, &cx));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "is f64[2,3], expected one f32 or f64 value"));
	g->loss = 0;
	CU_ASSERT_FALSE(pass_autodiff(g, &cx));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "is not computed by the graph"));
	diag_stream = stderr;
	/* a second run on a differentiated graph (a training IR file) does
	 * nothing; backward nodes without gradient pairs are refused */
	add_loss(g, g->outputs[0], false);
	CU_ASSERT_TRUE(pass_autodiff(g, &cx));
	int done = g->nnodes;
	CU_ASSERT_TRUE(g->ngrads > 0);
	CU_ASSERT_TRUE(pass_autodiff(g, &cx));
	CU_ASSERT_EQUAL(g->nnodes, done);
	g->ngrads = 0;
	quiet_diags();
	CU_ASSERT_FALSE(pass_autodiff(g, &cx));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "already has backward"));
	diag_stream = stderr;
	ir_free(g);
}

/* --------------------------------------------------- fixture models */

/*
 * A fixture through the default pipeline, a loss (the mean of output 0),
 * autodiff; every float weight but those listed gets a gradient of its
 * shape.  In f64 the gradient of `samples` elements per weight is
 * compared with finite differences; f32 gives the same gradients to 1e-3.
 */
static Graph *
fixture_autodiff(const char *name, int out, bool f64, const char *nograd, int *nfwd)
{
	Graph *g = fixture_graph(name);
	if (!g)
		printf("\n  %s: %s\n", name, diag_last);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	if (f64)
		gx_promote_f64(g);
	add_loss(g, g->outputs[out], true);
	*nfwd = g->nnodes;
	PassCtx cx = {0};
	bool ok = pass_autodiff(g, &cx);
	if (!ok)
		printf("\n  %s: %s\n", name, diag_last);
	CU_ASSERT_TRUE_FATAL(ok);
	if (!f64)                       /* widened weights no longer match their files */
		CU_ASSERT_TRUE(pass_verify(g, &cx));
	check_bookkeeping(g, *nfwd, nograd, name);
	return g;
}

static void
check_fixture(const char *name, int out, const char *nograd, int samples)
{
	int nfwd;
	rng = 4242;
	Graph *g = fixture_autodiff(name, out, true, nograd, &nfwd);
	GExec *x = run_all(g, -1, 1);
	int bad = 0;
	for (int i = 0; i < g->ngrads; i++) {
		int64_t n = ir_numel(&g->tensors[g->grads[i].weight]);
		int64_t every = n / samples > 0 ? n / samples + 1 : 1;
		bad += check_fd(x, g, nfwd, g->grads[i].weight, g->grads[i].grad, every, 1e-5, 1e-4,
		    1e-8, name);
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* f32: the same inputs give the same gradients to f32 accuracy */
	rng = 4242;
	int nfwd32;
	Graph *h = fixture_autodiff(name, out, false, nograd, &nfwd32);
	check_roundtrip(h);
	GExec *y = run_all(h, -1, 1);
	CU_ASSERT_EQUAL(h->ngrads, g->ngrads);
	for (int i = 0; i < h->ngrads && i < g->ngrads; i++) {
		double num = 0, den = 0;
		int64_t n = ir_numel(&h->tensors[h->grads[i].weight]);
		for (int64_t e = 0; e < n; e++) {
			double a = gx_get(y, h->grads[i].grad, e), b = gx_get(x, g->grads[i].grad, e);
			num += (a - b) * (a - b);
			den += b * b;
		}
		/* a gradient that is zero in exact arithmetic (attention's key bias:
		 * softmax ignores a constant per row) is f32 rounding noise */
		bool ok = num <= 1e-6 * den + (double)n * 1e-14;
		if (!ok)
			printf("\n  %s: f32 gradient of '%s' differs from f64 by %g (relative)\n", name,
			    h->tensors[h->grads[i].weight].name, sqrt(num / (den + 1e-300)));
		CU_ASSERT_TRUE(ok);
	}
	gx_free(x);
	gx_free(y);
	ir_free(g);
	ir_free(h);
}

static void
fixture_mlp(void)
{
	check_fixture("mlp", 0, NULL, 6);
}

static void
fixture_cnn(void)
{
	check_fixture("cnn", 0, "features.1.running_mean features.1.running_var "
	    "features.5.running_mean features.5.running_var", 4);
}

static void
fixture_ln17(void)
{
	check_fixture("ln17", 0, NULL, 5);
}

static void
fixture_gpt(void)
{
	check_fixture("gpt", 0, NULL, 3);
}

static void
fixture_bert(void)
{
	check_fixture("bert", 1, NULL, 2);
}

/* ------------------------------------------------- gradient kernels */

#define A_INT(nm, v) {.name = (nm), .type = TAPRT_ATTR_INT, .i = (v)}
#define A_FLOAT(nm, v) {.name = (nm), .type = TAPRT_ATTR_FLOAT, .f = (v)}
#define A_INTS(nm, cnt, ...) {.name = (nm), .type = TAPRT_ATTR_INTS, .n = (cnt), \
	.is = (const int64_t[]){__VA_ARGS__}}

static void
near(const double *got, const double *want, int n)
{
	for (int i = 0; i < n; i++) {
		if (!(fabs(got[i] - want[i]) <= 1e-6))
			printf("\n  [%d] got %.9g want %.9g\n", i, got[i], want[i]);
		CU_ASSERT_DOUBLE_EQUAL(got[i], want[i], 1e-6);
	}
}

static void
kernel_softmax_grad(void)
{
	double y[] = {0.2, 0.3, 0.5}, dy[] = {1, 0, 0}, dx[3];
	taprt_tensor ty = rt_tensor(TAPRT_F64, y, 2, DIMS(1, 3));
	taprt_tensor tdy = rt_tensor(TAPRT_F64, dy, 2, DIMS(1, 3));
	taprt_tensor tdx = rt_tensor(TAPRT_F64, dx, 2, DIMS(1, 3));
	taprt_tensor *in[] = {&tdy, &ty}, *out[] = {&tdx};
	taprt_attr a[] = {A_INT("axis", -1)};
	rt_run(taprt_op_SoftmaxGrad, in, 2, out, 1, a, 1, 17);
	near(dx, (double[]){0.16, -0.06, -0.1}, 3);
	/* LogSoftmaxGrad: dX = dY - softmax * sum(dY) */
	double ly[] = {log(0.2), log(0.3), log(0.5)}, ldy[] = {1, 1, 0};
	ty.data = ly;
	tdy.data = ldy;
	rt_run(taprt_op_LogSoftmaxGrad, in, 2, out, 1, a, 1, 17);
	near(dx, (double[]){0.6, 0.4, -1.0}, 3);
	/* along axis 0 of [3,1] (a strided axis) */
	ty = rt_tensor(TAPRT_F64, y, 2, DIMS(3, 1));
	tdy = rt_tensor(TAPRT_F64, dy, 2, DIMS(3, 1));
	tdx = rt_tensor(TAPRT_F64, dx, 2, DIMS(3, 1));
	taprt_attr a0[] = {A_INT("axis", 0)};
	rt_run(taprt_op_SoftmaxGrad, in, 2, out, 1, a0, 1, 17);
	near(dx, (double[]){0.16, -0.06, -0.1}, 3);
}

/* x = [1,2,3], eps 0: mean 2, inv = sqrt(1.5), xhat = [-inv, 0, inv]. */
static void
kernel_layernorm_grad(void)
{
	double x[] = {1, 2, 3}, s[] = {1, 1, 1}, dy[] = {1, 0, 0}, dx[3], ds[3], db[3];
	taprt_tensor tx = rt_tensor(TAPRT_F64, x, 2, DIMS(1, 3));
	taprt_tensor ts = rt_tensor(TAPRT_F64, s, 1, DIMS(3));
	taprt_tensor tdy = rt_tensor(TAPRT_F64, dy, 2, DIMS(1, 3));
	taprt_tensor tdx = rt_tensor(TAPRT_F64, dx, 2, DIMS(1, 3));
	taprt_tensor tds = rt_tensor(TAPRT_F64, ds, 1, DIMS(3));
	taprt_tensor tdb = rt_tensor(TAPRT_F64, db, 1, DIMS(3));
	taprt_tensor *in[] = {&tdy, &tx, &ts}, *out[] = {&tdx, &tds, &tdb};
	taprt_attr a[] = {A_INT("axis", -1), A_FLOAT("epsilon", 0)};
	rt_run(taprt_op_LayerNormalizationGrad, in, 3, out, 3, a, 2, 17);
	double inv = sqrt(1.5);
	near(dx, (double[]){inv / 6, -inv / 3, inv / 6}, 3);
	near(ds, (double[]){-inv, 0, 0}, 3);
	near(db, (double[]){1, 0, 0}, 3);
	/* dX alone (the other outputs absent) */
	taprt_tensor *only[] = {&tdx, NULL, NULL};
	memset(dx, 0, sizeof dx);
	rt_run(taprt_op_LayerNormalizationGrad, in, 3, only, 3, a, 2, 17);
	near(dx, (double[]){inv / 6, -inv / 3, inv / 6}, 3);
}

static void
kernel_conv_grad_weight(void)
{
	float x[9], dy[] = {1, 1, 1, 1}, dw[4];
	for (int i = 0; i < 9; i++)
		x[i] = (float)(i + 1);
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, 1, 3, 3));
	taprt_tensor tdy = rt_tensor(TAPRT_F32, dy, 4, DIMS(1, 1, 2, 2));
	taprt_tensor tdw = rt_tensor(TAPRT_F32, dw, 4, DIMS(1, 1, 2, 2));
	taprt_tensor *in[] = {&tx, &tdy}, *out[] = {&tdw};
	taprt_attr a[] = {A_INTS("kernel_shape", 2, 2, 2)};
	rt_run(taprt_op_ConvGradWeight, in, 2, out, 1, a, 1, 17);
	CU_ASSERT_EQUAL(dw[0], 12);
	CU_ASSERT_EQUAL(dw[1], 16);
	CU_ASSERT_EQUAL(dw[2], 24);
	CU_ASSERT_EQUAL(dw[3], 28);
}

static void
kernel_pool_grads(void)
{
	/* MaxPool: the maximum's position; the first one on a tie */
	double x[] = {1, 4, 3, 2}, dy[] = {5}, dx[4];
	taprt_tensor tx = rt_tensor(TAPRT_F64, x, 4, DIMS(1, 1, 2, 2));
	taprt_tensor tdy = rt_tensor(TAPRT_F64, dy, 4, DIMS(1, 1, 1, 1));
	taprt_tensor tdx = rt_tensor(TAPRT_F64, dx, 4, DIMS(1, 1, 2, 2));
	taprt_tensor *in[] = {&tdy, &tx}, *out[] = {&tdx};
	taprt_attr a[] = {A_INTS("kernel_shape", 2, 2, 2)};
	rt_run(taprt_op_MaxPoolGrad, in, 2, out, 1, a, 1, 17);
	near(dx, (double[]){0, 5, 0, 0}, 4);
	x[0] = x[1] = 4;
	rt_run(taprt_op_MaxPoolGrad, in, 2, out, 1, a, 1, 17);
	near(dx, (double[]){5, 0, 0, 0}, 4);
	/* AveragePool 1-D, kernel 2, pads 1: windows [-1,0] [0,1] [1,2] [2,3] */
	double ady[] = {1, 2, 4, 8}, adx[3];
	taprt_tensor tady = rt_tensor(TAPRT_F64, ady, 3, DIMS(1, 1, 4));
	taprt_tensor tadx = rt_tensor(TAPRT_F64, adx, 3, DIMS(1, 1, 3));
	taprt_tensor *ain[] = {&tady}, *aout[] = {&tadx};
	taprt_attr b[] = {A_INT("count_include_pad", 0), A_INTS("kernel_shape", 1, 2),
	    A_INTS("pads", 2, 1, 1), A_INTS("shape", 3, 1, 1, 3)};
	rt_run(taprt_op_AveragePoolGrad, ain, 1, aout, 1, b, 4, 17);
	near(adx, (double[]){2, 3, 10}, 3);
	b[0].i = 1;
	rt_run(taprt_op_AveragePoolGrad, ain, 1, aout, 1, b, 4, 17);
	near(adx, (double[]){1.5, 3, 6}, 3);
}

static void
kernel_scatters(void)
{
	/* GatherGrad: rows 2, 0, 2 (as -1) of a [3,2] table */
	double dy[] = {1, 2, 3, 4, 5, 6}, dx[6];
	int64_t idx[] = {2, 0, -1};
	taprt_tensor tdy = rt_tensor(TAPRT_F64, dy, 2, DIMS(3, 2));
	taprt_tensor ti = rt_tensor(TAPRT_I64, idx, 1, DIMS(3));
	taprt_tensor tdx = rt_tensor(TAPRT_F64, dx, 2, DIMS(3, 2));
	taprt_tensor *in[] = {&tdy, &ti}, *out[] = {&tdx};
	taprt_attr a[] = {A_INT("axis", 0), A_INTS("shape", 2, 3, 2)};
	rt_run(taprt_op_GatherGrad, in, 2, out, 1, a, 2, 17);
	near(dx, (double[]){3, 4, 0, 0, 6, 8}, 6);
	/* an index out of range is a run-time error */
	idx[1] = 3;
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	taprt_node n = rt_node(in, 2, out, 1, a, 2);
	taprt_op_GatherGrad(&cx, &n);
	CU_ASSERT_PTR_NOT_NULL(strstr(cx.error, "index 3 is out of range"));
	/* GatherElementsGrad on axis 1 */
	double edy[] = {1, 2, 3, 4}, edx[4];
	int64_t eidx[] = {1, 1, 0, -1};
	taprt_tensor tedy = rt_tensor(TAPRT_F64, edy, 2, DIMS(2, 2));
	taprt_tensor tei = rt_tensor(TAPRT_I64, eidx, 2, DIMS(2, 2));
	taprt_tensor tedx = rt_tensor(TAPRT_F64, edx, 2, DIMS(2, 2));
	taprt_tensor *ein[] = {&tedy, &tei}, *eout[] = {&tedx};
	taprt_attr e[] = {A_INT("axis", 1), A_INTS("shape", 2, 2, 2)};
	rt_run(taprt_op_GatherElementsGrad, ein, 2, eout, 1, e, 2, 17);
	near(edx, (double[]){0, 3, 3, 4}, 4);
	/* SliceGrad: x[4::-2] of 5 */
	float sdy[] = {1, 2, 3}, sdx[5];
	taprt_tensor tsdy = rt_tensor(TAPRT_F32, sdy, 1, DIMS(3));
	taprt_tensor tsdx = rt_tensor(TAPRT_F32, sdx, 1, DIMS(5));
	taprt_tensor *sin_[] = {&tsdy}, *sout[] = {&tsdx};
	taprt_attr s[] = {A_INTS("shape", 1, 5), A_INTS("starts", 1, 4), A_INTS("steps", 1, -2)};
	rt_run(taprt_op_SliceGrad, sin_, 1, sout, 1, s, 3, 17);
	float want[] = {3, 0, 2, 0, 1};
	CU_ASSERT_EQUAL(memcmp(sdx, want, sizeof want), 0);
}

/* The gradient ops' shape inference refuses what would make a kernel
 * read or write out of bounds (an IR file is untrusted). */
static void
train_op_checks(void)
{
	static const struct {
		const char *ir, *msg;
	} bad[] = {
		{"%0 = weight \"d\" f64[3]\n"
		 "%1 = SliceGrad %0 {shape=[5] starts=[4] steps=[2]} : ?[?]\n",
		 "3 elements from 4 by 2 do not fit in 5"},
		{"%0 = weight \"d\" f64[1,1,2,2]\n"
		 "%1 = weight \"x\" f64[1,1,3,3]\n"
		 "%2 = MaxPoolGrad %0, %1 {kernel_shape=[3,3]} : ?[?]\n",
		 "which is not the window's output over the input"},
		{"%0 = weight \"d\" f64[2,3]\n"
		 "%1 = const i64[3] = [0,1,2]\n"
		 "%2 = GatherGrad %0, %1 {axis=0 shape=[4,3]} : ?[?]\n",
		 "do not fit a Gather"},
		{"%0 = weight \"d\" f64[2,3]\n"
		 "%1 = weight \"x\" f64[2,4]\n"
		 "%2 = weight \"s\" f64[4]\n"
		 "%3, _, _ = LayerNormalizationGrad %0, %1, %2 {axis=-1} : ?[?], _, _\n",
		 "input 1 is f64[2,4], expected f64[2,3] like input 0"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char text[1024];
		snprintf(text, sizeof text, "graph \"t\" opset=17\n%soutput %%0 \"d\"\n", bad[i].ir);
		Graph *g = ir_parse(text, strlen(text), "t.ir");
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		quiet_diags();
		CU_ASSERT_FALSE(ir_infer_all(g));
		if (!strstr(diag_last, bad[i].msg))
			printf("\n  got: %s\n  expected: %s\n", diag_last, bad[i].msg);
		CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, bad[i].msg));
		diag_stream = stderr;
		ir_free(g);
	}
}

/* ----------------------------------------------------------- tables */

/* docs/ops.md's "Gradients" section names exactly the operators with a
 * rule, and every operator has a kernel. */
static void
grad_doc_in_sync(void)
{
	FILE *f = fopen(srcpath("docs/ops.md"), "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	bool seen[OP_COUNT] = {0}, in = false;
	char line[2048];
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "## ", 3))
			in = !strncmp(line, "## Gradients", 12);
		if (!in || line[0] != '-')
			continue;
		/* "- `Add`, `Sub`: ..." : the names before the colon */
		char *colon = strstr(line, ":");
		for (char *p = line; (p = strchr(p, '`')) && (!colon || p < colon);) {
			char *e = strchr(p + 1, '`');
			if (!e)
				break;
			*e = 0;
			Op op;
			if (ir_op_lookup(p + 1, &op))
				seen[op] = true;
			else
				printf("\n  docs/ops.md lists a gradient for unknown '%s'\n", p + 1);
			p = e + 1;
		}
	}
	fclose(f);
	for (int i = 0; i < OP_COUNT; i++) {
		bool rule = grad_info((Op)i)->rule != NULL;
		if (rule != seen[i])
			printf("\n  %s: %s\n", ir_op_name((Op)i), rule ? "has a rule, not in docs/ops.md" :
			    "in docs/ops.md's gradients, no rule");
		CU_ASSERT_EQUAL(rule, seen[i]);
		CU_ASSERT_PTR_NOT_NULL(gx_kernel_of((Op)i));
	}
}

void
suite_grad(CU_pSuite s)
{
	ADD(s, unary_ops);
	ADD(s, cast_and_clip);
	ADD(s, binary_ops);
	ADD(s, reductions);
	ADD(s, shape_ops);
	ADD(s, products);
	ADD(s, conv_pool);
	ADD(s, norms);
	ADD(s, fan_out);
	ADD(s, no_gradient_paths);
	ADD(s, deterministic);
	ADD(s, errors);
	ADD(s, loss_contract);
	ADD(s, kernel_softmax_grad);
	ADD(s, kernel_layernorm_grad);
	ADD(s, kernel_conv_grad_weight);
	ADD(s, kernel_pool_grads);
	ADD(s, kernel_scatters);
	ADD(s, train_op_checks);
	ADD(s, grad_doc_in_sync);
	ADD(s, fixture_mlp);
	ADD(s, fixture_cnn);
	ADD(s, fixture_ln17);
	ADD(s, fixture_gpt);
	ADD(s, fixture_bert);
}
