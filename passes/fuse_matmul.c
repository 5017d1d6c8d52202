/*
 * fuse_matmul.c - give a MatMul its epilogue: bias, GELU or another
 * activation, and the residual Add become one FusedMatMul.  The same for
 * onnxruntime's quantize_dynamic Linear, MatMulInteger -> Cast to f32 ->
 * Mul by one f32 value (the two scales' product): FusedMatMulInteger, its
 * sums converted and scaled, then the same epilogue.
 *
 * Needs: shaped graph; passes/fuse.h says where fusion may happen.  From an
 * f32 MatMul, while the output has one reader in the same place:
 *
 *   Add(y, b) with b a 1-D weight or constant of the last dim  -> bias
 *   Add(y, z) with z exactly y's type                           -> residual Z
 *   the erf GELU torch exports: Div(y, 1.41421354), Erf, Add 1,
 *     Mul by y, Mul 0.5 (y read by the Div and the first Mul)   -> Gelu
 *     (another positive divisor, as an f16 model's 1.4140625, its
 *     activation_params)
 *   Relu, Clip, HardSigmoid, HardSwish, LeakyRelu               -> activation
 *
 * in the order act(A @ B + bias + Z): a residual comes before any
 * activation, a bias before both.  The kernel applies them to each output
 * row after the product (runtime/k_nn.c); the GELU with the same f32
 * operations as the nodes it replaces.  Guarantees: the same function; one
 * pass over the output instead of one per absorbed node (seven for
 * bias + GELU; four for the quantized Linear's Cast, Mul, bias and
 * activation), bit for bit: the kernels' f32 operations are the nodes'.
 *
 * Tensor parallelism: a row-parallel MatMul's product is one rank's
 * partial sum, which tp-rewrite's AllReduce adds up before Megatron's
 * bias and residual Adds.  Those two move before the sum, into the
 * product's epilogue on the group's first rank alone (FusedMatMul
 * partial=1; the others' epilogues add nothing), since
 * sum_r p_r + b + z = (p_0 + b + z) + sum_{r>0} p_r: two passes over a
 * replicated tensor fewer per block on every rank.  No activation moves
 * (it does not distribute over the sum), and Z must be computed before the
 * MatMul, where the fused node stays.  The one fusion across a
 * collective, and the one not bit for bit: the sum rounds in another
 * order than the nodes'.
 */
#include <math.h>

#include "passes/fuse.h"

/* What a MatMul/FusedMatMul (FusedMatMulInteger) node has absorbed so far:
 * the product's `base` inputs (A, B; A, B, the zero points and the scale),
 * then the bias and Z. */
typedef struct {
	TensorId in[7];
	int base;
	const char *act;                /* NULL: none yet */
	float p[2];
	int np;
} Epi;

static void
epi_of(Graph *g, NodeId n, Epi *e)
{
	Node *nd = &g->nodes[n];
	bool f = nd->op == OP_FusedMatMul || nd->op == OP_FusedMatMulInteger;
	e->base = nd->op == OP_FusedMatMulInteger ? 5 : 2;
	for (int i = 0; i < 7; i++)
		e->in[i] = i < nd->nin && (i < e->base || f) ? nd->in[i] : IR_NONE;
	const char *a = f ? ir_attr_str(g, n, "activation", "") : "";
	e->act = *a ? a : NULL;
	const Attr *p = f ? ir_attr(g, n, "activation_params") : NULL;
	e->np = p ? (p->n < 2 ? p->n : 2) : 0;
	for (int i = 0; i < e->np; i++)
		e->p[i] = p->fs[i];
}

/* t read by nodes a and b only (each once), not an output. */
static bool
read_by_two(Graph *g, TensorId t, NodeId *a, NodeId *b)
{
	if (g->nusers[t] != 2 || ir_is_output(g, t))
		return false;
	*a = g->users[t][0];
	*b = g->users[t][1];
	return *a != *b;
}

/* The erf GELU on y, its nodes in node mm's place: returns the final Mul
 * (the fused node's place) and marks the chain's other nodes in
 * chain[0..3]; IR_NONE if not it.  fuse-train's too (fuse.h). */
NodeId
fuse_gelu(Graph *g, NodeId mm, TensorId y, NodeId chain[4], float *divisor)
{
	NodeId u0, u1, div = IR_NONE, mul1 = IR_NONE;
	if (!read_by_two(g, y, &u0, &u1))
		return IR_NONE;
	for (int k = 0; k < 2; k++) {
		NodeId u = k ? u1 : u0;
		if (g->nodes[u].op == OP_Div)
			div = u;
		else if (g->nodes[u].op == OP_Mul)
			mul1 = u;
	}
	float c;
	if (div == IR_NONE || mul1 == IR_NONE || g->nodes[div].in[0] != y ||
	    !fuse_scalar(g, g->nodes[div].in[1], &c) || !(c > 0 && c < INFINITY))
		return IR_NONE;
	*divisor = c;
	NodeId erf = fuse_sole_user(g, g->nodes[div].out[0]);
	if (erf == IR_NONE || g->nodes[erf].op != OP_Erf)
		return IR_NONE;
	NodeId add = fuse_sole_user(g, g->nodes[erf].out[0]);
	if (add == IR_NONE || g->nodes[add].op != OP_Add)
		return IR_NONE;
	Node *a = &g->nodes[add];
	TensorId one = a->in[0] == g->nodes[erf].out[0] ? a->in[1] : a->in[0];
	if (!fuse_scalar(g, one, &c) || c != 1.0f || fuse_sole_user(g, a->out[0]) != mul1)
		return IR_NONE;
	Node *m1 = &g->nodes[mul1];
	if (!((m1->in[0] == y && m1->in[1] == a->out[0]) || (m1->in[1] == y && m1->in[0] == a->out[0])))
		return IR_NONE;
	NodeId mul2 = fuse_sole_user(g, m1->out[0]);
	if (mul2 == IR_NONE || g->nodes[mul2].op != OP_Mul)
		return IR_NONE;
	Node *m2 = &g->nodes[mul2];
	TensorId half = m2->in[0] == m1->out[0] ? m2->in[1] : m2->in[0];
	if (!fuse_scalar(g, half, &c) || c != 0.5f)
		return IR_NONE;
	NodeId all[5] = {div, erf, add, mul1, mul2};
	for (int i = 0; i < 5; i++)
		if (!fuse_same_place(g, mm, all[i]))
			return IR_NONE;
	chain[0] = div;
	chain[1] = erf;
	chain[2] = add;
	chain[3] = mul1;
	return mul2;
}

/* Is b a bias for an output whose last dim is n: a 1-D f32 weight or
 * constant of n elements? */
static bool
is_bias(Graph *g, TensorId b, int64_t n)
{
	Tensor *t = &g->tensors[b];
	return (t->kind == TK_WEIGHT || t->kind == TK_CONST) && t->dtype == DT_F32 &&
	    t->rank == 1 && t->dims[0] == n;
}

/* t known before node n runs: not computed, or computed by an earlier
 * node. */
static bool
before(const Graph *g, TensorId t, NodeId n)
{
	NodeId p = g->tensors[t].producer;
	return g->tensors[t].kind != TK_VALUE || (p != IR_NONE && p < n);
}

/* A MatMul whose one reader is an AllReduce (a sum over the TP group, as
 * tp-rewrite makes it: not grad-sync's data-parallel mean), its sum then
 * read by an Add of a bias, one of a residual, or both: the header's
 * partial epilogue. */
static bool
partial(Graph *g, NodeId mm)
{
	Node *m = &g->nodes[mm];
	const Tensor *yt = &g->tensors[m->out[0]];
	NodeId ar = fuse_sole_user(g, m->out[0]);
	if (m->op != OP_MatMul || yt->dtype != DT_F32 || yt->rank < 1 || ar == IR_NONE ||
	    g->nodes[ar].op != OP_AllReduce || g->nodes[ar].nout != 1 ||
	    !fuse_same_place(g, mm, ar) || ir_attr_int(g, ar, "mean", 0) ||
	    strcmp(ir_attr_str(g, ar, "group", "tp"), "tp") != 0)
		return false;
	TensorId s = g->nodes[ar].out[0], in[4] = {m->in[0], m->in[1], IR_NONE, IR_NONE};
	if (!fuse_same_type(&g->tensors[s], yt))
		return false;
	NodeId u, absorbed[2];
	int k = 0;
	while (k < 2 && (u = fuse_sole_user(g, s)) != IR_NONE && g->nodes[u].op == OP_Add &&
	    fuse_same_place(g, mm, u)) {
		const Node *a = &g->nodes[u];
		TensorId o = a->in[0] == s ? a->in[1] : a->in[0];
		if (o == s || !fuse_same_type(&g->tensors[a->out[0]], yt))
			break;
		if (in[2] == IR_NONE && is_bias(g, o, yt->dims[yt->rank - 1]))
			in[2] = o;
		else if (in[3] == IR_NONE && fuse_same_type(&g->tensors[o], yt) && before(g, o, mm))
			in[3] = o;
		else
			break;
		absorbed[k++] = u;
		s = a->out[0];
	}
	if (k == 0)
		return false;
	fuse_become(g, mm, OP_FusedMatMul, m->name);
	ir_set_attr(g, mm, "partial", ATTR_INT)->i = 1;
	fuse_set_inputs(g, mm, in[3] != IR_NONE ? 4 : 3, in);
	g->nodes[ar].out[0] = s;
	for (int i = 0; i < k; i++)
		g->nodes[absorbed[i]].dead = true;
	return true;
}

static bool
absorb(Graph *g, NodeId mm)
{
	Node *m = &g->nodes[mm];
	TensorId y = m->out[0];
	Tensor *yt = &g->tensors[y];
	if (yt->dtype != DT_F32 || yt->rank < 1 || ir_attr_int(g, mm, "partial", 0))
		return false;
	if (partial(g, mm))
		return true;
	Epi e;
	epi_of(g, mm, &e);
	const int ib = e.base, iz = e.base + 1;
	NodeId to = IR_NONE, chain[4] = {IR_NONE, IR_NONE, IR_NONE, IR_NONE};
	NodeId u = fuse_sole_user(g, y);
	if (u != IR_NONE && fuse_same_place(g, mm, u) && g->nodes[u].op == OP_Add && !e.act) {
		Node *a = &g->nodes[u];
		TensorId o = a->in[0] == y ? a->in[1] : a->in[0];
		if (o != y && e.in[ib] == IR_NONE && e.in[iz] == IR_NONE &&
		    is_bias(g, o, yt->dims[yt->rank - 1])) {
			e.in[ib] = o;
			to = u;
		} else if (o != y && e.in[iz] == IR_NONE && fuse_same_type(&g->tensors[o], yt)) {
			e.in[iz] = o;
			to = u;
		}
	} else if (u != IR_NONE && fuse_same_place(g, mm, u) && !e.act &&
	    fuse_epilogue_activation(g, u, &e.act, e.p, &e.np)) {
		to = u;
	} else if (u == IR_NONE && !e.act && (to = fuse_gelu(g, mm, y, chain, &e.p[0])) != IR_NONE) {
		e.act = "Gelu";
		e.np = e.p[0] != 1.41421354f; /* the default divisor unwritten */
	}
	if (to == IR_NONE)
		return false;
	fuse_become(g, to, e.base == 5 ? OP_FusedMatMulInteger : OP_FusedMatMul, m->name);
	if (e.act) {
		ir_set_attr(g, to, "activation", ATTR_STRING)->s = ir_strdup(&g->arena, e.act);
		if (e.np) {
			Attr *a = ir_set_attr(g, to, "activation_params", ATTR_FLOATS);
			a->n = e.np;
			a->fs = ir_alloc(&g->arena, sizeof *a->fs * e.np);
			memcpy(a->fs, e.p, sizeof *e.p * e.np);
		}
	}
	int nin = e.in[iz] != IR_NONE ? iz + 1 : e.in[ib] != IR_NONE ? ib + 1 : e.base;
	fuse_set_inputs(g, to, nin, e.in);
	g->nodes[mm].dead = true;
	for (int i = 0; i < 4; i++)
		if (chain[i] != IR_NONE)
			g->nodes[chain[i]].dead = true;
	return true;
}

/* MatMulInteger q -> Cast to f32 -> Mul by one f32 value s: the Mul
 * becomes FusedMatMulInteger(A, B, zero points, s); its epilogue follows
 * as a MatMul's. */
static bool
qstart(Graph *g, NodeId mm)
{
	Node *m = &g->nodes[mm];
	NodeId c = fuse_sole_user(g, m->out[0]);
	if (c == IR_NONE || !fuse_same_place(g, mm, c) || g->nodes[c].op != OP_Cast ||
	    g->tensors[g->nodes[c].out[0]].dtype != DT_F32)
		return false;
	TensorId cf = g->nodes[c].out[0];
	NodeId u = fuse_sole_user(g, cf);
	if (u == IR_NONE || !fuse_same_place(g, mm, u) || g->nodes[u].op != OP_Mul)
		return false;
	Node *mu = &g->nodes[u];
	TensorId s = mu->in[0] == cf ? mu->in[1] : mu->in[0];
	if (s == cf || g->tensors[s].dtype != DT_F32 || ir_numel(&g->tensors[s]) != 1 ||
	    !fuse_same_type(&g->tensors[mu->out[0]], &g->tensors[cf]))
		return false;
	TensorId in[5] = {m->in[0], m->in[1], m->nin > 2 ? m->in[2] : IR_NONE,
		m->nin > 3 ? m->in[3] : IR_NONE, s};
	fuse_become(g, u, OP_FusedMatMulInteger, m->name);
	fuse_set_inputs(g, u, 5, in);
	g->nodes[mm].dead = true;
	g->nodes[c].dead = true;
	return true;
}

static bool
absorb_any(Graph *g, NodeId n)
{
	return g->nodes[n].op == OP_MatMulInteger ? qstart(g, n) : absorb(g, n);
}

bool
pass_fuse_matmul(Graph *g, PassCtx *cx)
{
	(void)cx;
	return fuse_each(g, OP_MatMul, OP_FusedMatMul, absorb) &&
	    fuse_each(g, OP_MatMulInteger, OP_FusedMatMulInteger, absorb_any);
}
