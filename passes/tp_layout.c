/*
 * tp_layout.c - the SRC sharding patterns: for every op, which layouts its
 * inputs need and which its outputs get, given the layouts that reach it
 * (see tp.h for R, S(axis, blocks) and P).  Used by tp-plan to route and
 * cost candidate plans and by tp-rewrite to materialize the chosen one, so
 * the two can never disagree.
 *
 * Ops without a rule here take the safe pattern: every input replicated,
 * every output replicated.  docs/tensor-parallel.md lists the rules.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/costmodel.h"
#include "passes/tp.h"

static const Layout LR = {L_R, 0, 1}, LP = {L_P, 0, 1};

static Layout
LS(int axis, int blocks)
{
	return (Layout){L_S, (int8_t)axis, (int16_t)blocks};
}

static Tensor *
tin(TpState *s, NodeId n, int i)
{
	Node *nd = &s->g->nodes[n];
	return i < nd->nin && nd->in[i] != IR_NONE ? &s->g->tensors[nd->in[i]] : NULL;
}

static Tensor *
tout(TpState *s, NodeId n, int i)
{
	Node *nd = &s->g->nodes[n];
	return i < nd->nout && nd->out[i] != IR_NONE ? &s->g->tensors[nd->out[i]] : NULL;
}

/* The bandwidth of the TP group's links: the slowest link of any group's
 * ring once mesh-map placed the ranks on the cluster; before, a node's
 * links when tp devices fit in the cluster's first node. */
static double
group_bw(Graph *g, int tp, const CostModel *cm)
{
	const Cluster *c = &g->cluster;
	int n = g->mesh.dp * g->mesh.tp * g->mesh.pp;
	if (g->device && g->mesh.tp == tp && n <= c->ndevices) {
		double bw = 0;
		for (int r0 = 0; r0 < n; r0 += tp) {
			double b = cm_ring_bw(c, g->device + r0, tp);
			bw = r0 == 0 || b < bw ? b : bw;
		}
		return bw;
	}
	int cols = c->nkinds ? c->kinds[0].devices : tp;
	return tp <= cols ? cm->bw_intra : cm->bw_inter;
}

bool
tp_state_init(TpState *s, Graph *g, int tp, const CostModel *cm)
{
	memset(s, 0, sizeof *s);
	s->g = g;
	s->tp = tp;
	s->cm = cm;
	s->bw = group_bw(g, tp, cm);
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->nin > s->cap)
			s->cap = nd->nin;
		if (nd->nout > s->cap)
			s->cap = nd->nout;
	}
	s->cap++;
	s->region = calloc(g->nnodes + 1, sizeof *s->region);
	s->lay = calloc(g->ntensors + 1, sizeof *s->lay);
	s->in = calloc(s->cap, sizeof *s->in);
	s->need = calloc(s->cap, sizeof *s->need);
	s->out = calloc(s->cap, sizeof *s->out);
	if (!s->region || !s->lay || !s->in || !s->need || !s->out)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++)
		s->lay[t] = LR;
	return true;
}

void
tp_state_free(TpState *s)
{
	free(s->region);
	free(s->lay);
	free(s->in);
	free(s->need);
	free(s->out);
}

bool
tp_is_local(Graph *g)
{
	for (NodeId n = 0; n < g->nnodes; n++)
		if (ir_op_is_comm(g->nodes[n].op))
			return true;
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].slice_axis >= 0)
			return true;
	return false;
}

/* ------------------------------------------------------------ anchors */

int
tp_anchor_input(Graph *g, NodeId n)
{
	Node *nd = &g->nodes[n];
	int w = -1;
	if (nd->region != IR_NONE) /* an If's branch is never sharded inside */
		return -1;
	switch (nd->op) {
	case OP_MatMul:
		for (int i = 1; i >= 0; i--) /* the weight side; B first */
			if (nd->in[i] != IR_NONE && g->tensors[nd->in[i]].kind == TK_WEIGHT) {
				w = i;
				break;
			}
		break;
	case OP_Gemm: w = g->tensors[nd->in[1]].kind == TK_WEIGHT ? 1 : -1; break;
	case OP_Conv: case OP_ConvTranspose:
		w = g->tensors[nd->in[1]].kind == TK_WEIGHT ? 1 : -1;
		break;
	case OP_Gather: w = g->tensors[nd->in[0]].kind == TK_WEIGHT ? 0 : -1; break;
	default: return -1;
	}
	if (w >= 0 && g->tensors[nd->in[w]].rank < 2)
		return -1;
	return w;
}

int
tp_nchoices(Graph *g, NodeId n)
{
	int w = tp_anchor_input(g, n);
	return w < 0 ? 1 : 1 + g->tensors[g->nodes[n].in[w]].rank;
}

/* Follow a tensor through elementwise ops (a bias Add) to a Split along the
 * same output axis; its output count if the parts are equal. */
static int
split_parts(Graph *g, TensorId t, int axis, int depth)
{
	Tensor *x = &g->tensors[t];
	for (int u = 0; u < g->nusers[t]; u++) {
		Node *c = &g->nodes[g->users[t][u]];
		if (c->op == OP_Split && c->in[0] == t) {
			int64_t a = ir_attr_int(g, g->users[t][u], "axis", 0);
			if (a < 0)
				a += x->rank;
			if (a != axis || c->nout < 2)
				continue;
			for (int i = 0; i < c->nout; i++)
				if (c->out[i] == IR_NONE ||
				    g->tensors[c->out[i]].dims[axis] * c->nout != x->dims[axis])
					return 1;
			return c->nout;
		}
		OpKind k = ir_op_kind(c->op);
		if (depth < 4 && c->nout == 1 && (k == OPK_UNARY || k == OPK_BINARY) &&
		    g->tensors[c->out[0]].rank == x->rank) {
			int p = split_parts(g, c->out[0], axis, depth + 1);
			if (p > 1)
				return p;
		}
	}
	return 1;
}

int
tp_blocks_for(Graph *g, NodeId n, int axis)
{
	Node *nd = &g->nodes[n];
	int w = tp_anchor_input(g, n);
	if (w < 0 || nd->nout < 1 || nd->out[0] == IR_NONE || !g->nusers)
		return 1;
	Tensor *wt = &g->tensors[nd->in[w]];
	Tensor *y = &g->tensors[nd->out[0]];
	int oaxis = -1;
	if (nd->op == OP_MatMul && w == 1 && axis == wt->rank - 1)
		oaxis = y->rank - 1;
	else if (nd->op == OP_Gemm && axis == (ir_attr_int(g, n, "transB", 0) ? 0 : 1))
		oaxis = 1;
	else if ((nd->op == OP_Conv && axis == 0) || (nd->op == OP_ConvTranspose && axis == 1))
		oaxis = 1;
	else if (nd->op == OP_Gather && axis > 0)
		oaxis = y->rank - (wt->rank - axis);
	return oaxis < 0 ? 1 : split_parts(g, nd->out[0], oaxis, 0);
}

/* ------------------------------------------------------------ regions */

int
tp_regions(TpState *s, int **greg_out)
{
	Graph *g = s->g;
	int nreg;
	int *greg = ir_group_blocks(g, &nreg); /* each template instance a region */
	int64_t plans = 0;
	bool open = false;
	for (NodeId n = 0; n < g->nnodes; n++) {
		int gr = g->nodes[n].group;
		if (gr >= 0 && gr < g->ngroups && greg[gr] >= 0) {
			s->region[n] = greg[gr];
			open = false;
			continue;
		}
		int c = tp_nchoices(g, n);
		if (!open || plans * c > TP_MAX_PLANS) {
			nreg++;
			plans = 1;
			open = true;
		}
		plans *= c;
		s->region[n] = nreg - 1;
	}

	*greg_out = greg;
	return nreg;
}

/* ------------------------------------------------------------ helpers */

bool
tp_fits(TpState *s, TensorId t, Layout l)
{
	if (l.kind != L_S)
		return true;
	Tensor *x = &s->g->tensors[t];
	return l.axis >= 0 && l.axis < x->rank && l.blocks >= 1 &&
	    x->dims[l.axis] % ((int64_t)l.blocks * s->tp) == 0 && x->dims[l.axis] > 0;
}

bool
tp_convert(TpState *s, TensorId t, Layout a, Layout b, int *bits)
{
	*bits = 0;
	if (tp_same(a, b))
		return true;
	if (b.kind == L_P || !tp_fits(s, t, b))
		return false;
	double bytes = (double)ir_nbytes(&s->g->tensors[t]);
	if (a.kind == L_P && b.kind == L_R) {
		*bits = TC_ALLREDUCE;
		s->comm += ir_cost_allreduce(s->cm, s->tp, s->bw, bytes);
	} else if (a.kind == L_P) {
		*bits = TC_REDUCESCATTER;
		s->comm += ir_cost_allgather(s->cm, s->tp, s->bw, bytes);
	} else if (a.kind == L_R) {
		*bits = TC_SHARD;       /* a local slice: no communication */
		return true;
	} else {
		*bits = TC_ALLGATHER | (b.kind == L_S ? TC_SHARD : 0);
		s->comm += ir_cost_allgather(s->cm, s->tp, s->bw, bytes);
	}
	s->ncoll++;
	return true;
}

Layout
tp_seen(TpState *s, TensorId t, NodeId consumer)
{
	NodeId p = s->g->tensors[t].producer;
	if (p == IR_NONE || s->region[p] != s->region[consumer])
		return LR;
	return s->lay[t];
}

bool
tp_crosses(TpState *s, TensorId t)
{
	Graph *g = s->g;
	NodeId p = g->tensors[t].producer;
	if (p == IR_NONE)
		return false;
	if (ir_is_output(g, t))
		return true;
	if (t == g->loss)               /* read after the graph, whole: replicated */
		return true;
	for (int u = 0; u < g->nusers[t]; u++)
		if (s->region[g->users[t][u]] != s->region[p])
			return true;
	return false;
}

double
tp_cost(const TpState *s)
{
	return s->cm->train ? 3 * s->compute + 2 * s->comm : s->compute + s->comm;
}

/* Integer list from input i (a known value) or attribute name; -1 if absent. */
static int
int_list(Graph *g, NodeId n, int i, const char *name, int64_t *out, int max)
{
	Node *nd = &g->nodes[n];
	if (i < nd->nin && nd->in[i] != IR_NONE) {
		const int64_t *v = ir_value(g, nd->in[i]);
		Tensor *t = &g->tensors[nd->in[i]];
		if (!v || t->dtype != DT_I64)
			return -2;
		int c = (int)ir_numel(t);
		for (int k = 0; k < c && k < max; k++)
			out[k] = v[k];
		return c;
	}
	const Attr *a = ir_attr(g, n, name);
	if (!a || a->type != ATTR_INTS)
		return -1;
	for (int k = 0; k < a->n && k < max; k++)
		out[k] = a->is[k];
	return a->n;
}

static int
norm(int64_t a, int rank)
{
	return (int)(a < 0 ? a + rank : a);
}

/* ------------------------------------------------------------ the rules */

/* Every input replicated (also used as a rule's fallback). */
static void
all_r(TpState *s, NodeId n)
{
	Node *nd = &s->g->nodes[n];
	for (int i = 0; i < nd->nin; i++)
		s->need[i] = LR;
	for (int i = 0; i < nd->nout; i++)
		s->out[i] = LR;
}

static void
outs(TpState *s, NodeId n, Layout l)
{
	for (int i = 0; i < s->g->nodes[n].nout; i++)
		s->out[i] = l;
}

/* Elementwise with broadcasting: a split follows its axis through; P passes
 * through the ops that are linear in it (Add of partials, Mul/Div by a
 * replicated factor, Neg); a bias added to a partial sum needs the sum
 * first, or it would be added tp times. */
static void
rule_eltwise(TpState *s, NodeId n)
{
	Graph *g = s->g;
	Node *nd = &g->nodes[n];
	Tensor *y = tout(s, n, 0);
	int src = -1;
	for (int i = 0; i < nd->nin; i++)
		if (tin(s, n, i) && s->in[i].kind == L_S) {
			src = i;
			break;
		}
	if (src >= 0 && y) {
		int a = s->in[src].axis + (y->rank - tin(s, n, src)->rank), k = s->in[src].blocks;
		for (int i = 0; i < nd->nin; i++) {
			Tensor *x = tin(s, n, i);
			int ai = x ? a - (y->rank - x->rank) : -1;
			s->need[i] = !x || ai < 0 || x->dims[ai] != y->dims[a] ? LR : LS(ai, k);
		}
		outs(s, n, LS(a, k));
		return;
	}
	int np = 0, nr = 0;
	for (int i = 0; i < nd->nin; i++)
		if (tin(s, n, i))
			s->in[i].kind == L_P ? np++ : nr++;
	bool partial = false;
	if (np > 0) {
		switch (nd->op) {
		case OP_Add: case OP_Sub: case OP_Sum: partial = nr == 0; break;
		case OP_Mul: partial = np == 1; break;
		case OP_Div: partial = np == 1 && s->in[0].kind == L_P; break;
		case OP_Neg: case OP_Identity: partial = true; break;
		default: break;
		}
	}
	for (int i = 0; i < nd->nin; i++)
		s->need[i] = partial && s->in[i].kind == L_P ? LP : LR;
	outs(s, n, partial ? LP : LR);
}

/* MatMul and Gemm: a = (m axis, k axis) of A, b = (k axis, n axis) of B,
 * batch axes broadcast on the left.  wa/wb: the side whose layout the plan
 * fixed (the weight). */
static void
rule_matmul(TpState *s, NodeId n, int am, int ak, int bk, int bn, int wa, int wb)
{
	Graph *g = s->g;
	Node *nd = &g->nodes[n];
	Tensor *A = tin(s, n, 0), *B = tin(s, n, 1), *Y = tout(s, n, 0);
	int ro = Y->rank, ym = ro - 2, yn = ro - 1;
	Layout la = s->in[0], lb = s->in[1];
	s->need[0] = la;
	s->need[1] = lb;
	Layout y = LR;
	/* the driver: the fixed weight, else the first non-replicated side */
	bool drive_b = wb || (!wa && la.kind == L_R);
	Layout d = drive_b ? lb : la;
	if (d.kind == L_R) { /* the other side decides */
		drive_b = !drive_b;
		d = drive_b ? lb : la;
		if ((drive_b && wb) || (!drive_b && wa))
			d = LR;
	}
	if (d.kind == L_P) {
		if ((drive_b ? la : lb).kind == L_R) {
			y = LP;
		} else {
			s->need[0] = s->need[1] = LR;
		}
	} else if (d.kind == L_S) {
		int ax = d.axis;
		bool is_k = drive_b ? ax == bk : ax == ak;
		bool is_m = !drive_b && ax == am;
		bool is_n = drive_b && ax == bn;
		bool other_fixed = drive_b ? wa : wb;
		if (is_k && other_fixed) { /* the weight stays whole: gather the input */
			s->need[drive_b ? 1 : 0] = LR;
		} else if (is_k) {
			if (drive_b)
				s->need[0] = LS(ak, d.blocks);
			else
				s->need[1] = LS(bk, d.blocks);
			y = LP;
		} else if (is_m || is_n) {
			if (drive_b)
				s->need[0] = LR;
			else
				s->need[1] = LR;
			y = LS(is_m ? ym : yn, d.blocks);
		} else if (nd->op == OP_MatMul) { /* a batch axis */
			Tensor *X = drive_b ? B : A, *O = drive_b ? A : B;
			int oa = ax + (ro - X->rank), oi = oa - (ro - O->rank);
			Layout other = oi < 0 || O->rank < 3 || O->dims[oi] != Y->dims[oa] ? LR :
			    LS(oi, d.blocks);
			s->need[drive_b ? 0 : 1] = other;
			y = LS(oa, d.blocks);
		} else {
			s->need[0] = s->need[1] = LR;
		}
	}
	s->out[0] = y;
}

static void
rule_gemm(TpState *s, NodeId n, int w)
{
	Graph *g = s->g;
	bool ta = ir_attr_int(g, n, "transA", 0), tb = ir_attr_int(g, n, "transB", 0);
	rule_matmul(s, n, ta ? 1 : 0, ta ? 0 : 1, tb ? 1 : 0, tb ? 0 : 1, w == 0, w == 1);
	Tensor *C = tin(s, n, 2), *Y = tout(s, n, 0);
	if (!C)
		return;
	Layout y = s->out[0];
	if (y.kind == L_P) {
		/* added once, after the all-reduce */
		s->need[2] = LR;
		s->out[0] = LR;
		s->gemm_allreduce = true;
		if (ir_attr_float(g, n, "beta", 1.0f) != 1.0f)
			s->out[0].kind = -1; /* no pattern: C would need scaling */
		return;
	}
	int ci = y.kind == L_S ? y.axis - (Y->rank - C->rank) : -1;
	s->need[2] = ci < 0 || C->dims[ci] != Y->dims[y.axis] ? LR : LS(ci, y.blocks);
}

static void
rule_conv(TpState *s, NodeId n, bool fixed)
{
	Graph *g = s->g;
	Layout x = s->in[0], w = s->in[1];
	bool bias = tin(s, n, 2) != NULL;
	int64_t group = ir_attr_int(g, n, "group", 1);
	all_r(s, n);
	s->need[1] = w;
	if (fixed && w.kind == L_S) {
		if (group != 1 || w.axis > 1 || (w.axis == 1 && bias)) {
			s->out[0].kind = -1; /* no pattern */
			return;
		}
		if (w.axis == 0) { /* output channels */
			if (bias)
				s->need[2] = LS(0, w.blocks);
			s->out[0] = LS(1, w.blocks);
		} else { /* input channels: partial sums */
			s->need[0] = LS(1, w.blocks);
			s->out[0] = LP;
		}
		return;
	}
	if (!fixed)
		s->need[1] = LR;
	if (x.kind == L_S && x.axis == 0) { /* the batch */
		s->need[0] = x;
		s->out[0] = x;
	}
}

/* ConvTranspose's W is [C, M/group, k..]: output channels are axis 1, input
 * channels axis 0 (the transpose of Conv's). */
static void
rule_conv_transpose(TpState *s, NodeId n, bool fixed)
{
	Graph *g = s->g;
	Layout x = s->in[0], w = s->in[1];
	bool bias = tin(s, n, 2) != NULL;
	int64_t group = ir_attr_int(g, n, "group", 1);
	all_r(s, n);
	s->need[1] = w;
	if (fixed && w.kind == L_S) {
		if (group != 1 || w.axis > 1 || (w.axis == 0 && bias)) {
			s->out[0].kind = -1; /* no pattern */
			return;
		}
		if (w.axis == 1) { /* output channels */
			if (bias)
				s->need[2] = LS(0, w.blocks);
			s->out[0] = LS(1, w.blocks);
		} else { /* input channels: partial sums */
			s->need[0] = LS(1, w.blocks);
			s->out[0] = LP;
		}
		return;
	}
	if (!fixed)
		s->need[1] = LR;
	if (x.kind == L_S && x.axis == 0) { /* the batch */
		s->need[0] = x;
		s->out[0] = x;
	}
}

static void
rule_gather(TpState *s, NodeId n, bool fixed)
{
	Graph *g = s->g;
	Tensor *D = tin(s, n, 0), *I = tin(s, n, 1);
	int axis = norm(ir_attr_int(g, n, "axis", 0), D->rank);
	Layout d = s->in[0], ix = s->in[1];
	all_r(s, n);
	if (d.kind == L_S) {
		if (d.axis == axis) {
			if (fixed) /* a vocabulary split needs a masked lookup: not a pattern */
				s->out[0].kind = -1;
			return;
		}
		s->need[0] = d;
		s->out[0] = LS(d.axis < axis ? d.axis : d.axis - 1 + I->rank, d.blocks);
	} else if (d.kind == L_P) {
		s->need[0] = LP;
		s->out[0] = LP;
	} else if (ix.kind == L_S) {
		s->need[1] = ix;
		s->out[0] = LS(axis + ix.axis, ix.blocks);
	}
}

/* The start of the single-input movement rules: everything replicated,
 * and a partial sum passes through (the op is linear).  True when input 0
 * is not split, so there is nothing more to decide. */
static bool
unsplit(TpState *s, NodeId n)
{
	all_r(s, n);
	if (s->in[0].kind == L_P) {
		s->need[0] = LP;
		outs(s, n, LP);
	}
	return s->in[0].kind != L_S;
}

/* Reshape, Flatten, Squeeze, Unsqueeze: a split survives when the elements
 * each rank holds are still one split of the new shape.  In row-major
 * order S(a, k) deals out units of U = chunk * inner(a) elements to the
 * ranks in turn; find the output axis whose split deals the same units. */
static void
rule_reshape(TpState *s, NodeId n)
{
	Tensor *X = tin(s, n, 0), *Y = tout(s, n, 0);
	Layout x = s->in[0];
	if (unsplit(s, n))
		return;
	int64_t inner = 1;
	for (int d = x.axis + 1; d < X->rank; d++)
		inner *= X->dims[d];
	int64_t U = X->dims[x.axis] / ((int64_t)x.blocks * s->tp) * inner;
	int64_t yin = 1;
	for (int b = Y->rank - 1; b >= 0; yin *= Y->dims[b], b--) {
		if (yin == 0 || U % yin != 0)
			continue;
		int64_t c = U / yin;
		if (c > 0 && Y->dims[b] % (c * s->tp) == 0) {
			s->need[0] = x;
			s->out[0] = LS(b, (int)(Y->dims[b] / (c * s->tp)));
			return;
		}
	}
}

static void
rule_transpose(TpState *s, NodeId n)
{
	Tensor *X = tin(s, n, 0);
	Layout x = s->in[0];
	if (unsplit(s, n))
		return;
	int64_t perm[IR_MAX_RANK];
	int c = int_list(s->g, n, 99, "perm", perm, IR_MAX_RANK);
	for (int i = 0; i < X->rank; i++) {
		int p = c == X->rank ? (int)perm[i] : X->rank - 1 - i;
		if (p == x.axis) {
			s->need[0] = x;
			s->out[0] = LS(i, x.blocks);
			return;
		}
	}
}

static void
rule_split(TpState *s, NodeId n)
{
	Graph *g = s->g;
	Node *nd = &g->nodes[n];
	Tensor *X = tin(s, n, 0);
	Layout x = s->in[0];
	int axis = norm(ir_attr_int(g, n, "axis", 0), X->rank);
	all_r(s, n);
	if (x.kind == L_P || (x.kind == L_S && x.axis != axis)) {
		s->need[0] = x;
		outs(s, n, x);
		return;
	}
	if (x.kind != L_S)
		return;
	int64_t unit = X->dims[axis] / x.blocks; /* chunk * tp */
	for (int i = 0; i < nd->nout; i++)
		if (!tout(s, n, i) || tout(s, n, i)->dims[axis] % unit != 0)
			return;
	int64_t off = 0;
	for (int i = 0; i < nd->nout; i++) {
		int64_t d = tout(s, n, i)->dims[axis];
		if (off % unit != 0)
			return;
		s->out[i] = LS(axis, (int)(d / unit));
		off += d;
	}
	s->need[0] = x;
}

static void
rule_concat(TpState *s, NodeId n)
{
	Graph *g = s->g;
	Node *nd = &g->nodes[n];
	int axis = norm(ir_attr_int(g, n, "axis", 0), tout(s, n, 0)->rank);
	Layout first = s->in[0];
	bool same = first.kind != L_R && !(first.kind == L_S && first.axis == axis);
	for (int i = 1; i < nd->nin && same; i++)
		same = tp_same(s->in[i], first);
	all_r(s, n);
	if (same) {
		for (int i = 0; i < nd->nin; i++)
			s->need[i] = first;
		s->out[0] = first;
	}
}

/* A split survives an op that works independently along other axes:
 * keep(a) says whether axis a of input 0 is such an axis. */
static void
rule_keep(TpState *s, NodeId n, unsigned keep_mask)
{
	Layout x = s->in[0];
	all_r(s, n);
	if (x.kind == L_S && (keep_mask >> x.axis & 1)) {
		s->need[0] = x;
		outs(s, n, x);
	}
}

static void
rule_norm(TpState *s, NodeId n)
{
	Graph *g = s->g;
	Node *nd = &g->nodes[n];
	Tensor *X = tin(s, n, 0);
	Layout x = s->in[0];
	if (nd->op == OP_LayerNormalization) {
		int axis = norm(ir_attr_int(g, n, "axis", -1), X->rank);
		rule_keep(s, n, (1u << axis) - 1);
		return;
	}
	/* BatchNormalization: per channel (axis 1) */
	all_r(s, n);
	if (x.kind == L_S) {
		s->need[0] = x;
		s->out[0] = x;
		if (x.axis == 1)
			for (int i = 1; i < nd->nin; i++)
				s->need[i] = LS(0, x.blocks);
	}
}

/* InstanceNormalization: statistics per image and channel, so a split of
 * the batch or of the channels (with scale and B split alike) survives. */
static void
rule_instance_norm(TpState *s, NodeId n)
{
	Layout x = s->in[0];
	all_r(s, n);
	if (x.kind == L_S && x.axis <= 1) {
		s->need[0] = x;
		s->out[0] = x;
		if (x.axis == 1)
			s->need[1] = s->need[2] = LS(0, x.blocks);
	}
}

/* The axes a Resize or Upsample leaves alone, along which it works
 * independently: scale 1 in scales, or an axis opset 18's axes leave out.
 * An axis sizes names keeps its full size in the rank's graph, so it is not
 * one; tf_crop_and_resize's roi may move any axis. */
static unsigned
resize_keep(Graph *g, NodeId n)
{
	Node *nd = &g->nodes[n];
	int r = g->tensors[nd->in[0]].rank;
	bool up = nd->op == OP_Upsample, v10 = up || g->opset < 11;
	if (!v10 && !strcmp(ir_attr_str(g, n, "coordinate_transformation_mode", ""),
	    "tf_crop_and_resize"))
		return 0;
	int64_t ax[IR_MAX_RANK];
	int na = v10 ? -1 : int_list(g, n, 99, "axes", ax, IR_MAX_RANK);
	if (na < 0 || na > r) {
		na = r;
		for (int i = 0; i < r; i++)
			ax[i] = i;
	}
	unsigned listed = 0;
	for (int i = 0; i < na; i++)
		listed |= 1u << norm(ax[i], r);
	unsigned keep = ((1u << r) - 1) & ~listed;
	const float *sc = NULL;
	int ns = 0, si = v10 ? 1 : 2;
	const Attr *a = up && (nd->nin < 2 || nd->in[1] == IR_NONE) ? ir_attr(g, n, "scales") : NULL;
	if (a && a->type == ATTR_FLOATS) {
		sc = a->fs;
		ns = a->n;
	} else if (si < nd->nin && nd->in[si] != IR_NONE && g->tensors[nd->in[si]].dtype == DT_F32) {
		sc = ir_value(g, nd->in[si]);
		ns = (int)ir_numel(&g->tensors[nd->in[si]]);
	}
	for (int i = 0; sc && ns == na && i < na; i++)
		if (sc[i] == 1.0f)
			keep |= 1u << norm(ax[i], r);
	return keep;
}

static void
rule_reduce(TpState *s, NodeId n)
{
	Graph *g = s->g;
	Node *nd = &g->nodes[n];
	Tensor *X = tin(s, n, 0);
	Layout x = s->in[0];
	bool keep = ir_attr_int(g, n, "keepdims", 1) != 0;
	unsigned mask = 0;
	if (nd->op == OP_ArgMax || nd->op == OP_ArgMin) {
		mask = 1u << norm(ir_attr_int(g, n, "axis", 0), X->rank);
	} else {
		int64_t ax[IR_MAX_RANK];
		int c = int_list(g, n, 1, "axes", ax, IR_MAX_RANK);
		if (c == -2 || c > IR_MAX_RANK) {
			all_r(s, n);
			return;
		}
		if (c <= 0)
			mask = ir_attr_int(g, n, "noop_with_empty_axes", 0) ? 0 : (1u << X->rank) - 1;
		for (int i = 0; i < c; i++)
			mask |= 1u << norm(ax[i], X->rank);
	}
	all_r(s, n);
	if (x.kind == L_P && (nd->op == OP_ReduceSum || nd->op == OP_ReduceMean)) {
		s->need[0] = s->out[0] = LP;
		return;
	}
	if (x.kind != L_S || (mask >> x.axis & 1))
		return;
	int a = x.axis;
	if (!keep)
		for (int i = 0; i < x.axis; i++)
			a -= mask >> i & 1;
	s->need[0] = x;
	s->out[0] = LS(a, x.blocks);
}

/* ---------------------------------------------------------- the router */

bool
tp_eval_node(TpState *s, NodeId n, int *convs)
{
	Graph *g = s->g;
	Node *nd = &g->nodes[n];
	int w = nd->tp_axis != TP_NONE ? tp_anchor_input(g, n) : -1;
	for (int i = 0; i < nd->nin; i++)
		s->in[i] = nd->in[i] == IR_NONE ? LR : tp_seen(s, nd->in[i], n);
	if (w >= 0) {
		s->in[w] = nd->tp_axis == TP_REPLICATE ? LR : LS(nd->tp_axis, nd->tp_blocks);
		if (!tp_fits(s, nd->in[w], s->in[w]))
			return false;
	}
	s->gemm_allreduce = false;
	OpKind k = ir_op_kind(nd->op);
	if (nd->region != IR_NONE || nd->op == OP_If) {
		/* an If is one unit: its branches run whole on every rank, on
		 * whole inputs, and every rank takes the same branch */
		all_r(s, n);
		goto routed;
	}
	switch (nd->op) {
	case OP_MatMul:
		if (tin(s, n, 0)->rank < 2 || tin(s, n, 1)->rank < 2) {
			all_r(s, n);
			break;
		}
		rule_matmul(s, n, tin(s, n, 0)->rank - 2, tin(s, n, 0)->rank - 1,
		    tin(s, n, 1)->rank - 2, tin(s, n, 1)->rank - 1, w == 0, w == 1);
		break;
	case OP_Gemm: rule_gemm(s, n, w); break;
	case OP_Conv: rule_conv(s, n, w == 1); break;
	case OP_ConvTranspose: rule_conv_transpose(s, n, w == 1); break;
	case OP_InstanceNormalization: rule_instance_norm(s, n); break;
	case OP_Resize: case OP_Upsample: rule_keep(s, n, resize_keep(g, n)); break;
	case OP_DepthToSpace: case OP_SpaceToDepth: rule_keep(s, n, 1u); break;
	case OP_Gather: rule_gather(s, n, w == 0); break;
	case OP_Reshape: case OP_Flatten: case OP_Squeeze: case OP_Unsqueeze:
		rule_reshape(s, n);
		break;
	case OP_Transpose: rule_transpose(s, n); break;
	case OP_Split: rule_split(s, n); break;
	case OP_Concat: rule_concat(s, n); break;
	case OP_Softmax: case OP_LogSoftmax: case OP_Hardmax: {
		int r = tin(s, n, 0)->rank;
		int axis = norm(ir_attr_int(g, n, "axis", g->opset >= 13 ? -1 : 1), r);
		rule_keep(s, n, g->opset >= 13 ? ~(1u << axis) : (1u << axis) - 1);
		break;
	}
	case OP_LayerNormalization: case OP_BatchNormalization: rule_norm(s, n); break;
	case OP_QuantizeLinear: case OP_DequantizeLinear: {
		/* elementwise with the scale replicated, unless x is split
		 * along the axis the scale runs along */
		int r = tin(s, n, 0)->rank;
		bool per = ir_numel(tin(s, n, 1)) != 1;
		rule_keep(s, n, per ? ~(1u << norm(ir_attr_int(g, n, "axis", 1), r)) : ~0u);
		break;
	}
	case OP_MaxPool: case OP_AveragePool: case OP_GlobalAveragePool: case OP_GlobalMaxPool:
		rule_keep(s, n, 3u);    /* batch and channels */
		break;
	case OP_RNN: case OP_GRU: case OP_LSTM:
		/* the recurrence needs every gate of the whole state at each
		 * step: weights, states and sequence stay whole on every rank */
		all_r(s, n);
		break;
	default:
		if (k == OPK_UNARY || k == OPK_BINARY || k == OPK_VARIADIC)
			rule_eltwise(s, n);
		else if (k == OPK_REDUCE)
			rule_reduce(s, n);
		else
			all_r(s, n);
		break;
	}
routed:
	for (int i = 0; i < nd->nout; i++)
		if (s->out[i].kind < 0 || (nd->out[i] != IR_NONE && !tp_fits(s, nd->out[i], s->out[i])))
			return false;
	bool sharded = s->gemm_allreduce;
	for (int i = 0; i < nd->nin; i++) {
		if (nd->in[i] == IR_NONE)
			continue;
		int bits = 0;
		if (i == w) {
			if (!tp_same(s->need[i], s->in[i]))
				return false;
		} else if (!tp_convert(s, nd->in[i], s->in[i], s->need[i], &bits)) {
			return false;
		}
		if (convs)
			convs[i] = bits;
		if (s->need[i].kind != L_R)
			sharded = true;
	}
	if (s->gemm_allreduce) {
		int bits;
		tp_convert(s, nd->out[0], LP, LR, &bits);
	}
	for (int i = 0; i < nd->nout; i++) {
		if (nd->out[i] == IR_NONE)
			continue;
		s->lay[nd->out[i]] = s->out[i];
		if (s->out[i].kind != L_R)
			sharded = true;
	}
	s->compute += (double)ir_node_flops(g, n) / (sharded ? s->tp : 1) / s->cm->flops;
	return true;
}
