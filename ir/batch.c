/*
 * batch.c - where the batch is in every tensor, and a model exported at one
 * batch re-specialized to another.
 *
 * torch.onnx.export without dynamic_axes (its default) bakes the export
 * batch B0 into constants: a Reshape target [4,16,4,16], an Expand of a cls
 * token to [4,1,64], the zero state ConstantOfShape([1,4,32]) of an LSTM.
 * -batch=N, micro-batches and data-parallel replicas need the model at
 * another batch, so this file finds which constant elements are the batch
 * and rewrites them.
 *
 * The analysis gives every tensor a batch position (BPos): the axis that
 * carries the samples and, when a Reshape merged the batch with other dims,
 * the factors around it (dims[axis] == outer * B * inner), or none.  It
 * starts at dim 0 of the graph inputs and goes forward through every
 * operator (batch_forward); where an operator needs an input that carries
 * no batch to carry it (a cls token concatenated to the batch's sequence,
 * an LSTM's initial state), it goes back up that input's producers to the
 * shape constant whose element is the batch (need).
 *
 * A batch position survives a reshape because the batch keeps the same
 * elements before and after it in row-major order: P = product of the
 * dims before it, S = inner * product of the dims after it.  Reshape
 * [4,16,64] -> [4,16,4,16] at B0 = 4 (4 heads): P = 1, S = 1024 puts the
 * batch at axis 0 of the target, never at axis 2 although that dim is also
 * 4: the element-count factorization tells them apart, not the values.
 *
 * Constant elements are traced to where they come from (Prov): a source
 * constant's element can be rewritten; one computed from a Shape of a
 * batched tensor is recomputed by shape inference at the new batch; one
 * computed otherwise cannot be attributed, which is an error when the
 * batch must change.  An operator that mixes samples (a Softmax or a
 * reduction over the batch axis, training-mode BatchNormalization, a
 * Concat or Slice along it) is recorded: the batch can then change but
 * not be split into replicas or micro-batches.
 *
 * Needs: a graph shaped by ir_infer_all at B0, inputs carrying the batch in
 * dim 0.  ir_batch_respecialize patches the constants (each gets a private
 * copy first, so a value shared by two uses changes only where it is the
 * batch) and runs shape inference again.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

#define NO_POS ((BPos){-1, 1, 1})
#define PROV_MAX 64                     /* elements traced per constant */

/* Where a constant element comes from. */
typedef enum { PV_NONE, PV_SRC, PV_SHAPE, PV_OTHER } ProvKind;
typedef struct {
	ProvKind kind;
	TensorId src;                   /* PV_SRC: the constant tensor */
	int32_t elem;                   /* ... and its element */
} Prov;

typedef struct {
	Graph *g;
	int64_t b0;
	BPos *pos;                      /* per tensor */
	bool *pinned;                   /* per tensor: position set by need() */
	Prov **prov;                    /* per tensor: PROV_MAX entries, or NULL */
	BatchPlan *plan;
	bool changed;                   /* need() pinned a tensor: go again */
} An;

static bool
same_pos(BPos a, BPos b)
{
	return a.axis == b.axis && (a.axis < 0 || (a.outer == b.outer && a.inner == b.inner));
}

static int64_t
prod(const int64_t *d, int from, int to)
{
	int64_t p = 1;
	for (int i = from; i < to; i++)
		p *= d[i];
	return p;
}

static Tensor *
tin(An *a, NodeId n, int i)
{
	Node *nd = &a->g->nodes[n];
	return i < nd->nin && nd->in[i] != IR_NONE ? &a->g->tensors[nd->in[i]] : NULL;
}

static BPos
pin(An *a, NodeId n, int i)
{
	Node *nd = &a->g->nodes[n];
	return i < nd->nin && nd->in[i] != IR_NONE ? a->pos[nd->in[i]] : NO_POS;
}

static void
mixes(An *a, NodeId n, const char *why)
{
	/* a training loss is a mean over the replica's rows: the gradient
	 * all-reduce averages the replicas (passes/loss.c) */
	const Node *nd = &a->g->nodes[n];
	if (a->g->loss != IR_NONE && nd->nout == 1 && nd->out[0] == a->g->loss)
		return;
	if (a->plan->mixer == IR_NONE) {
		a->plan->mixer = n;
		snprintf(a->plan->mix_why, sizeof a->plan->mix_why, "%s", why);
	}
}

static void
stuck(An *a, NodeId n, const char *fmt, const char *what)
{
	if (a->plan->stuck == IR_NONE) {
		a->plan->stuck = n;
		snprintf(a->plan->stuck_why, sizeof a->plan->stuck_why, fmt, what);
	}
}

/* ------------------------------------------------------------ provenance */

static int64_t
ival(const Tensor *t, const void *v, int64_t i)
{
	switch (t->dtype) {
	case DT_I64: return ((const int64_t *)v)[i];
	case DT_I32: return ((const int32_t *)v)[i];
	default: return 0;
	}
}

static bool
is_int_list(const Tensor *t)
{
	return (t->dtype == DT_I64 || t->dtype == DT_I32) && t->rank >= 0 && t->rank <= 1 &&
	    ir_numel(t) <= PROV_MAX;
}

/* The provenance of t's elements, made on first use from its producer. */
static const Prov *
prov_of(An *a, TensorId t)
{
	Graph *g = a->g;
	Tensor *x = &g->tensors[t];
	if (a->prov[t] || !is_int_list(x))
		return a->prov[t];
	Prov *p = calloc(PROV_MAX, sizeof *p);
	if (!p)
		die("out of memory");
	a->prov[t] = p;
	int64_t n = ir_numel(x);
	if (x->kind == TK_CONST || x->kind == TK_WEIGHT) {
		for (int64_t i = 0; i < n; i++)
			p[i] = (Prov){PV_SRC, t, (int32_t)i};
		return p;
	}
	for (int64_t i = 0; i < n; i++)
		p[i].kind = PV_OTHER;
	NodeId pr = x->producer;
	if (pr == IR_NONE)
		return p;
	Node *nd = &g->nodes[pr];
	switch (nd->op) {
	case OP_Shape:
		for (int64_t i = 0; i < n; i++)
			p[i].kind = PV_SHAPE;
		break;
	case OP_Constant: {
		/* the value attribute's tensor is the source */
		const Attr *v = ir_attr(g, pr, "value");
		if (v && v->type == ATTR_TENSOR && ir_numel(&g->tensors[v->t]) == n)
			for (int64_t i = 0; i < n; i++)
				p[i] = (Prov){PV_SRC, v->t, (int32_t)i};
		break;
	}
	case OP_Identity: case OP_Cast: case OP_CastLike: case OP_Unsqueeze: case OP_Squeeze:
	case OP_Reshape: case OP_Flatten: {
		const Prov *q = nd->in[0] != IR_NONE ? prov_of(a, nd->in[0]) : NULL;
		if (q && ir_numel(&g->tensors[nd->in[0]]) == n)
			memcpy(p, q, sizeof *p * n);
		break;
	}
	case OP_Concat: {
		int64_t k = 0;
		for (int i = 0; i < nd->nin && k <= n; i++) {
			const Prov *q = nd->in[i] != IR_NONE ? prov_of(a, nd->in[i]) : NULL;
			int64_t m = nd->in[i] != IR_NONE ? ir_numel(&g->tensors[nd->in[i]]) : 0;
			for (int64_t j = 0; j < m && k < n; j++, k++)
				p[k] = q ? q[j] : (Prov){PV_OTHER, IR_NONE, 0};
		}
		break;
	}
	case OP_Gather: case OP_Slice: {
		/* a selection from a 1-D list: match the values by position */
		Tensor *src = &g->tensors[nd->in[0]];
		const Prov *q = prov_of(a, nd->in[0]);
		const void *sv = ir_value(g, nd->in[0]), *ov = ir_value(g, t);
		const void *iv = nd->op == OP_Gather && nd->nin > 1 ? ir_value(g, nd->in[1]) : NULL;
		if (!q || !sv || !ov || src->rank != 1)
			break;
		if (nd->op == OP_Gather && iv) {
			Tensor *it = &g->tensors[nd->in[1]];
			for (int64_t i = 0; i < n && i < ir_numel(it); i++) {
				int64_t j = ival(it, iv, i);
				j = j < 0 ? j + src->dims[0] : j;
				if (j >= 0 && j < src->dims[0])
					p[i] = q[j];
			}
		} else if (nd->op == OP_Slice) {
			/* starts at input 1 (or the attribute); step 1 or -1 */
			int64_t start = 0, step = 1;
			const Attr *sa = ir_attr(g, pr, "starts");
			const void *s1 = nd->nin > 1 && nd->in[1] != IR_NONE ? ir_value(g, nd->in[1]) : NULL;
			const void *s4 = nd->nin > 4 && nd->in[4] != IR_NONE ? ir_value(g, nd->in[4]) : NULL;
			if (s1)
				start = ival(&g->tensors[nd->in[1]], s1, 0);
			else if (sa && sa->type == ATTR_INTS && sa->n)
				start = sa->is[0];
			if (s4)
				step = ival(&g->tensors[nd->in[4]], s4, 0);
			int64_t d = src->dims[0];
			start = start < 0 ? start + d : start;
			start = start < 0 ? 0 : start > d ? d : start;
			if (step < 0 && start >= d)
				start = d - 1;
			for (int64_t i = 0; i < n && step != 0; i++) {
				int64_t j = start + i * step;
				if (j >= 0 && j < d)
					p[i] = q[j];
			}
		}
		break;
	}
	default: {
		/* arithmetic: recomputed at the new batch if it reads a Shape */
		bool shape = false;
		for (int i = 0; i < nd->nin; i++) {
			const Prov *q = nd->in[i] != IR_NONE ? prov_of(a, nd->in[i]) : NULL;
			int64_t m = nd->in[i] != IR_NONE ? ir_numel(&g->tensors[nd->in[i]]) : 0;
			for (int64_t j = 0; q && j < m; j++)
				shape |= q[j].kind == PV_SHAPE;
		}
		if (shape)
			for (int64_t i = 0; i < n; i++)
				p[i].kind = PV_SHAPE;
		break;
	}
	}
	return p;
}

/* Element e of input k of node n is the batch times f: rewrite its source
 * (a constant) or trust shape inference to recompute it (from a Shape).
 * False when it can be neither. */
static bool
batch_element(An *a, NodeId n, int k, int64_t e, int64_t f)
{
	Graph *g = a->g;
	TensorId t = g->nodes[n].in[k];
	const Prov *p = prov_of(a, t);
	if (!p || e >= ir_numel(&g->tensors[t])) {
		stuck(a, n, "its %s input holds the batch but is not a small integer list", "shape");
		return false;
	}
	if (p[e].kind == PV_SHAPE)
		return true;
	if (p[e].kind != PV_SRC) {
		stuck(a, n, "the batch in its %s input is computed from constants tapc cannot trace", "shape");
		return false;
	}
	BatchPlan *b = a->plan;
	for (int i = 0; i < b->npatch; i++)
		if (b->patch[i].t == p[e].src && b->patch[i].elem == p[e].elem && b->patch[i].axis < 0)
			return b->patch[i].factor == f;
	if (b->npatch == b->cappatch) {
		b->cappatch = b->cappatch ? 2 * b->cappatch : 16;
		if (!(b->patch = realloc(b->patch, sizeof *b->patch * b->cappatch)))
			die("out of memory");
	}
	b->patch[b->npatch++] = (BatchPatch){p[e].src, p[e].elem, f, n, IR_NONE, -1};
	return true;
}

/* A constant whose data holds the export batch on `axis`, the same slice
 * repeated (a zero state, a mask shared by every sample): it can be cut or
 * repeated to another batch.  Records that as a patch; false if the slices
 * differ. */
static bool
batch_data(An *a, TensorId t, BPos want, NodeId user)
{
	Graph *g = a->g;
	Tensor *x = &g->tensors[t];
	const void *v = ir_numel(x) <= IR_EVAL_MAX_ELEMS ? ir_value(g, t) : NULL;
	int64_t f = want.outer * want.inner;
	if (!v || want.outer != 1 || x->dims[want.axis] != f * a->b0) {
		stuck(a, user, "its input '%s' holds the export batch in its data", x->name);
		return false;
	}
	/* every batch index's block must equal the first */
	int64_t block = ir_dtype_size(x->dtype) * f * prod(x->dims, want.axis + 1, x->rank);
	int64_t outer = prod(x->dims, 0, want.axis);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t b = 1; b < a->b0; b++)
			if (memcmp((const char *)v + (o * a->b0 + b) * block,
			    (const char *)v + o * a->b0 * block, (size_t)block) != 0) {
				stuck(a, user, "its input '%s' holds per-sample data of the export batch", x->name);
				return false;
			}
	BatchPlan *p = a->plan;
	for (int i = 0; i < p->npatch; i++)
		if (p->patch[i].t == t && p->patch[i].axis >= 0)
			return p->patch[i].axis == want.axis;
	if (p->npatch == p->cappatch) {
		p->cappatch = p->cappatch ? 2 * p->cappatch : 16;
		if (!(p->patch = realloc(p->patch, sizeof *p->patch * p->cappatch)))
			die("out of memory");
	}
	p->patch[p->npatch++] = (BatchPatch){t, 0, f, user, IR_NONE, want.axis};
	return true;
}

/* The value of element e of input k, if known. */
static bool
elem_value(An *a, NodeId n, int k, int64_t e, int64_t *v)
{
	Tensor *t = tin(a, n, k);
	const void *p = t ? ir_value(a->g, a->g->nodes[n].in[k]) : NULL;
	if (!p || !is_int_list(t) || e >= ir_numel(t))
		return false;
	*v = ival(t, p, e);
	return true;
}

/* ---------------------------------------------------------- positions */

/* The batch at (P elements before, S after, per batch index) in a tensor
 * of shape dims: an axis that is exactly the batch if one fits, else the
 * outermost axis that holds it merged with other dims, or NO_POS.  (At a
 * batch of 1, [6,1,16] holds P = 6, S = 16 both as axis 1 and inside axis
 * 0; the whole axis is the reading a reshape keeps.) */
static BPos
place(int64_t b0, int64_t P, int64_t S, int rank, const int64_t *dims)
{
	for (int j = 0; j < rank; j++)
		if (dims[j] == b0 && prod(dims, 0, j) == P && prod(dims, j + 1, rank) == S)
			return (BPos){j, 1, 1};
	for (int j = 0; j < rank; j++) {
		int64_t before = prod(dims, 0, j), after = prod(dims, j + 1, rank);
		if (!before || P % before || dims[j] % (P / before))
			continue;
		int64_t outer = P / before, rest = dims[j] / outer;
		if (rest % b0)
			continue;
		int64_t inner = rest / b0;
		if (inner * after == S)
			return (BPos){j, outer, inner};
	}
	return NO_POS;
}

static void
before_after(const Tensor *t, BPos p, int64_t b0, int64_t *P, int64_t *S)
{
	*P = prod(t->dims, 0, p.axis) * p.outer;
	*S = p.inner * prod(t->dims, p.axis + 1, t->rank);
	(void)b0;
}

static void need(An *a, TensorId t, BPos want, NodeId user);

/* Every input of an elementwise op aligned to the output's rank: the batch
 * positions must agree; an input that carries no batch but has the batch's
 * full extent on its axis (B0 > 1) must be made to carry it. */
static BPos
elementwise(An *a, NodeId n, int first, int last)
{
	Graph *g = a->g;
	Node *nd = &g->nodes[n];
	Tensor *o = &g->tensors[nd->out[0]];
	BPos out = NO_POS;
	for (int i = first; i < last && i < nd->nin; i++) {
		Tensor *t = tin(a, n, i);
		BPos p = pin(a, n, i);
		if (!t || p.axis < 0)
			continue;
		BPos al = {p.axis + o->rank - t->rank, p.outer, p.inner};
		if (out.axis >= 0 && !same_pos(out, al)) {
			mixes(a, n, "its inputs carry the batch on different axes");
			return out;
		}
		out = al;
	}
	if (out.axis < 0)
		return out;
	for (int i = first; i < last && i < nd->nin; i++) {
		Tensor *t = tin(a, n, i);
		if (!t || a->pos[nd->in[i]].axis >= 0)
			continue;
		int ax = out.axis - (o->rank - t->rank);
		if (ax >= 0 && a->b0 > 1 && t->dims[ax] == o->dims[out.axis])
			need(a, nd->in[i], (BPos){ax, out.outer, out.inner}, n);
	}
	return out;
}

/* The reduced or normalized axes of n (ArgMax's axis, the Reduce* axes),
 * as a mask over the input's rank; -1 when they are not known. */
static int64_t
reduced_axes(An *a, NodeId n, int rank)
{
	Graph *g = a->g;
	Node *nd = &g->nodes[n];
	int64_t mask = 0;
	if (nd->op == OP_ArgMax || nd->op == OP_ArgMin) {
		int64_t ax = ir_attr_int(g, n, "axis", 0);
		return (int64_t)1 << (ax < 0 ? ax + rank : ax);
	}
	const Attr *at = ir_attr(g, n, "axes");
	int cnt = 0;
	int64_t axes[IR_MAX_RANK];
	if (at && at->type == ATTR_INTS) {
		for (int i = 0; i < at->n && i < IR_MAX_RANK; i++)
			axes[cnt++] = at->is[i];
	} else if (nd->nin > 1 && nd->in[1] != IR_NONE) {
		for (int64_t i = 0; i < ir_numel(&g->tensors[nd->in[1]]) && i < IR_MAX_RANK; i++)
			if (!elem_value(a, n, 1, i, &axes[cnt++]))
				return -1;
	}
	if (!cnt)
		return ir_attr_int(g, n, "noop_with_empty_axes", 0) ? 0 : ((int64_t)1 << rank) - 1;
	for (int i = 0; i < cnt; i++)
		mask |= (int64_t)1 << (axes[i] < 0 ? axes[i] + rank : axes[i]);
	return mask;
}

/* A reshape-like op (Reshape, Flatten, Squeeze, Unsqueeze, a view): the
 * batch keeps its elements before and after; a Reshape's target element
 * there is the batch (times the merged dims) unless 0 or -1. */
static BPos
reshape(An *a, NodeId n)
{
	Graph *g = a->g;
	Node *nd = &g->nodes[n];
	Tensor *x = tin(a, n, 0), *o = &g->tensors[nd->out[0]];
	BPos p = pin(a, n, 0);
	if (p.axis < 0)
		return NO_POS;
	int64_t P, S;
	before_after(x, p, a->b0, &P, &S);
	BPos q = place(a->b0, P, S, o->rank, o->dims);
	if (q.axis < 0) {
		stuck(a, n, "the batch does not stay one dimension of its %s", "output");
		return NO_POS;
	}
	if (nd->op == OP_Reshape) {
		int64_t v;
		if (elem_value(a, n, 1, q.axis, &v) && v != 0 && v != -1)
			batch_element(a, n, 1, q.axis, q.outer * q.inner);
	}
	return q;
}

/* ------------------------------------------------------------- backward */

/*
 * t carries no batch, but node `user` needs it at `want`: go up its
 * producers to the shape constant that sets that dim and make it the batch
 * (Expand of a cls token, ConstantOfShape of a zero state, Tile), or
 * through ops that only move the dim.  A constant holding the batch in its
 * data cannot be rewritten: stuck.
 */
static void
need(An *a, TensorId t, BPos want, NodeId user)
{
	Graph *g = a->g;
	Tensor *x = &g->tensors[t];
	if (a->pos[t].axis >= 0 || want.axis < 0 || want.axis >= x->rank)
		return;
	NodeId pr = x->producer;
	if (pr == IR_NONE) {
		if ((x->kind == TK_CONST || x->kind == TK_WEIGHT) && batch_data(a, t, want, user)) {
			a->pos[t] = want;
			a->pinned[t] = true;
			a->changed = true;
		} else if (x->kind == TK_INPUT) {
			stuck(a, user, "its input '%s' carries no batch", x->name);
		}
		return;
	}
	Node *nd = &g->nodes[pr];
	int64_t f = want.outer * want.inner;
	bool ok = true;
	switch (nd->op) {
	case OP_Constant: {
		const Attr *v = ir_attr(g, pr, "value");
		ok = v && v->type == ATTR_TENSOR && batch_data(a, v->t, want, user);
		break;
	}
	case OP_Expand: {
		Tensor *s = tin(a, pr, 1), *src = tin(a, pr, 0);
		int64_t k = want.axis - (x->rank - (s ? ir_numel(s) : 0));
		int sa = want.axis - (x->rank - src->rank);
		if (sa >= 0 && src->dims[sa] != 1) {
			need(a, nd->in[0], (BPos){sa, want.outer, want.inner}, user);
			return;
		}
		ok = k >= 0 && batch_element(a, pr, 1, k, f);
		break;
	}
	case OP_ConstantOfShape:
		ok = batch_element(a, pr, 0, want.axis, f);
		break;
	case OP_Range: { /* arange(B0): the limit is the batch */
		int64_t start, delta;
		if (want.axis != 0 || !elem_value(a, pr, 0, 0, &start) || !elem_value(a, pr, 2, 0, &delta) ||
		    start != 0 || delta != 1) {
			stuck(a, user, "its input '%s' is a Range tapc cannot follow to the batch", x->name);
			return;
		}
		ok = batch_element(a, pr, 1, 0, f);
		break;
	}
	case OP_Tile: {
		Tensor *src = tin(a, pr, 0);
		if (src->dims[want.axis] != 1) {
			stuck(a, user, "its input '%s' is a Tile of the batch's extent", x->name);
			return;
		}
		ok = batch_element(a, pr, 1, want.axis, f);
		break;
	}
	case OP_Identity: case OP_Cast: case OP_CastLike: case OP_Dropout: case OP_Relu: case OP_Neg:
	case OP_QuantizeLinear: case OP_DequantizeLinear:
		need(a, nd->in[0], want, user);
		return;
	case OP_Transpose: {
		const Attr *perm = ir_attr(g, pr, "perm");
		int ax = perm && perm->type == ATTR_INTS && want.axis < perm->n ? (int)perm->is[want.axis] :
		    x->rank - 1 - want.axis;
		need(a, nd->in[0], (BPos){ax, want.outer, want.inner}, user);
		return;
	}
	case OP_Unsqueeze: case OP_Squeeze: case OP_Reshape: case OP_Flatten: {
		Tensor *src = tin(a, pr, 0);
		int64_t P = prod(x->dims, 0, want.axis) * want.outer;
		int64_t S = want.inner * prod(x->dims, want.axis + 1, x->rank);
		BPos q = place(a->b0, P, S, src->rank, src->dims);
		if (q.axis < 0) {
			stuck(a, user, "cannot place the batch in the input of '%s'", x->name);
			return;
		}
		need(a, nd->in[0], q, user);
		if (nd->op == OP_Reshape) {
			int64_t v;
			if (elem_value(a, pr, 1, want.axis, &v) && v != 0 && v != -1)
				batch_element(a, pr, 1, want.axis, f);
		}
		return;
	}
	case OP_RandomUniformLike: case OP_RandomNormalLike: case OP_Bernoulli:
		/* the input's shape, element for element */
		need(a, nd->in[0], want, user);
		return;
	case OP_Concat: {
		int64_t ax = ir_attr_int(g, pr, "axis", 0);
		ax = ax < 0 ? ax + x->rank : ax;
		if (ax == want.axis) {
			stuck(a, user, "'%s' is a Concat along the batch's axis", x->name);
			return;
		}
		for (int i = 0; i < nd->nin; i++)
			if (nd->in[i] != IR_NONE)
				need(a, nd->in[i], want, user);
		return;
	}
	default:
		if (ir_op_kind(nd->op) == OPK_UNARY || ir_op_kind(nd->op) == OPK_BINARY ||
		    ir_op_kind(nd->op) == OPK_VARIADIC) {
			for (int i = 0; i < nd->nin; i++) {
				Tensor *in = tin(a, pr, i);
				int ax = in ? want.axis - (x->rank - in->rank) : -1;
				if (in && ax >= 0 && in->dims[ax] == x->dims[want.axis] && x->dims[want.axis] != 1)
					need(a, nd->in[i], (BPos){ax, want.outer, want.inner}, user);
			}
			return;
		}
		stuck(a, user, "its input '%s' has the batch's extent from an operator tapc cannot trace",
		    x->name);
		return;
	}
	if (!ok)
		return;
	a->pos[t] = want;
	a->pinned[t] = true;
	a->changed = true;
}

/* -------------------------------------------------------------- forward */

static void
set_out(An *a, NodeId n, int i, BPos p)
{
	Node *nd = &a->g->nodes[n];
	if (i < nd->nout && nd->out[i] != IR_NONE && !a->pinned[nd->out[i]])
		a->pos[nd->out[i]] = p;
}

/* The batch position of every output of node n from its inputs'. */
static void
forward(An *a, NodeId n)
{
	Graph *g = a->g;
	Node *nd = &g->nodes[n];
	if (!nd->nout || nd->out[0] == IR_NONE)
		return;
	Tensor *o = &g->tensors[nd->out[0]];
	Tensor *x = tin(a, n, 0);
	BPos p = pin(a, n, 0), out = NO_POS;
	int rank = x ? x->rank : 0;
	switch (nd->op) {
	case OP_Shape: case OP_Size: case OP_Constant: case OP_ConstantOfShape: case OP_Range:
		set_out(a, n, 0, NO_POS);
		return;
	case OP_MatMul: case OP_MatMulInteger: case OP_QLinearMatMul: {
		/* the quantized products: a's and y's parameters are one value,
		 * b's along its columns (never the batch's axis here) */
		int ib = nd->op == OP_QLinearMatMul ? 3 : 1;
		Tensor *b = tin(a, n, ib);
		BPos pb = pin(a, n, ib);
		int R = o->rank;
		if (p.axis >= 0) {
			if (x->rank == 1 || p.axis == x->rank - 1)
				mixes(a, n, "it contracts over the batch's axis");
			else
				out = (BPos){p.axis == x->rank - 2 ? R - 2 : p.axis + R - x->rank, p.outer, p.inner};
		}
		if (pb.axis >= 0) {
			BPos ob = NO_POS;
			if (b->rank == 1 || pb.axis == b->rank - 2)
				mixes(a, n, "it contracts over the batch's axis");
			else
				ob = (BPos){pb.axis == b->rank - 1 ? R - 1 : pb.axis + R - b->rank, pb.outer, pb.inner};
			if (out.axis >= 0 && ob.axis >= 0 && !same_pos(out, ob))
				mixes(a, n, "both operands carry the batch, on different axes");
			if (out.axis < 0)
				out = ob;
		}
		if (out.axis >= 0 && out.axis < R - 2) /* a batch dim: the other operand broadcasts or carries it */
			elementwise(a, n, 0, 0);
		break;
	}
	case OP_Gemm: {
		bool ta = ir_attr_int(g, n, "transA", 0) != 0;
		if (p.axis >= 0 && p.axis == (ta ? 1 : 0))
			out = (BPos){0, p.outer, p.inner};
		else if (p.axis >= 0)
			mixes(a, n, "it contracts over the batch's axis");
		if (pin(a, n, 1).axis >= 0)
			mixes(a, n, "its weight operand carries the batch");
		if (out.axis >= 0 && nd->nin > 2 && nd->in[2] != IR_NONE && pin(a, n, 2).axis < 0) {
			Tensor *c = tin(a, n, 2);
			if (c->rank == 2 && a->b0 > 1 && c->dims[0] == o->dims[0])
				need(a, nd->in[2], (BPos){0, 1, 1}, n);
		}
		break;
	}
	case OP_Conv: case OP_ConvTranspose: case OP_MaxPool: case OP_AveragePool:
	case OP_ConvInteger: case OP_QLinearConv:
	case OP_GlobalAveragePool: case OP_GlobalMaxPool: case OP_InstanceNormalization:
	case OP_DepthToSpace: case OP_SpaceToDepth: case OP_BatchNormalization:
	case OP_Resize: case OP_Upsample: case OP_LRN: case OP_GridSample:
		if (p.axis > 0) {
			mixes(a, n, "the batch is not its dim 0 (N)");
		} else if (p.axis == 0) {
			out = p;
			if (nd->op == OP_BatchNormalization && ir_attr_int(g, n, "training_mode", 0))
				mixes(a, n, "training-mode BatchNormalization normalizes over the batch");
			if (nd->op == OP_Resize && nd->nin > 3 && nd->in[3] != IR_NONE &&
			    ir_numel(tin(a, n, 3)) == rank) {
				int64_t v;
				if (elem_value(a, n, 3, 0, &v) && v != 1)
					batch_element(a, n, 3, 0, p.outer * p.inner);
			}
		}
		for (int i = 1; i < nd->nout; i++) /* MaxPool's indices, BN's stats */
			set_out(a, n, i, i == 1 && nd->op == OP_MaxPool ? out : NO_POS);
		break;
	case OP_LayerNormalization: {
		int64_t ax = ir_attr_int(g, n, "axis", -1);
		ax = ax < 0 ? ax + rank : ax;
		if (p.axis >= ax)
			mixes(a, n, "it normalizes over the batch's axis");
		else
			out = p;
		for (int i = 1; i < nd->nout; i++)
			set_out(a, n, i, out);
		break;
	}
	case OP_MeanVarianceNormalization: {
		const Attr *ax = ir_attr(g, n, "axes");
		bool over = false;
		for (int k = 0; k < (ax ? ax->n : 3); k++) {
			int64_t v = ax ? ax->is[k] : (int64_t[]){0, 2, 3}[k];
			over |= (v < 0 ? v + rank : v) == p.axis;
		}
		if (p.axis >= 0 && over)
			mixes(a, n, "it normalizes over the batch's axis");
		else
			out = p;
		break;
	}
	case OP_NegativeLogLikelihoodLoss: case OP_SoftmaxCrossEntropyLoss: {
		/* input [N, C, d...] and target [N, d...]: the batch in N of both */
		BPos pt = pin(a, n, 1);
		if (p.axis < 0 && pt.axis < 0)
			break;
		if (p.axis != 0 || pt.axis != 0 || !same_pos(p, pt)) {
			mixes(a, n, "its input and target do not both carry the batch in dim 0 (N)");
			break;
		}
		if (strcmp(ir_attr_str(g, n, "reduction", "mean"), "none") == 0)
			out = p;
		else
			mixes(a, n, "it sums over the batch (reduction sum or mean)");
		set_out(a, n, 1, p); /* the log-probabilities */
		break;
	}
	case OP_DynamicQuantizeLinear:
		if (p.axis >= 0)
			mixes(a, n, "its scale and zero point are the whole tensor's range");
		break;
	case OP_Softmax: case OP_LogSoftmax: case OP_Hardmax: {
		int64_t ax = ir_attr_int(g, n, "axis", g->opset >= 13 ? -1 : 1);
		ax = ax < 0 ? ax + rank : ax;
		if (p.axis >= 0 && (g->opset >= 13 ? p.axis == ax : p.axis >= ax))
			mixes(a, n, "it normalizes over the batch's axis");
		else
			out = p;
		break;
	}
	case OP_ReduceMean: case OP_ReduceSum: case OP_ReduceMax: case OP_ReduceMin:
	case OP_ReduceProd: case OP_ReduceSumSquare: case OP_ReduceL1: case OP_ReduceL2:
	case OP_ReduceLogSum: case OP_ReduceLogSumExp: case OP_ArgMax: case OP_ArgMin: {
		if (p.axis < 0)
			break;
		int64_t mask = reduced_axes(a, n, rank);
		bool keep = ir_attr_int(g, n, "keepdims", 1) != 0;
		if (mask < 0 || mask >> p.axis & 1) {
			mixes(a, n, "it reduces over the batch's axis");
			break;
		}
		int shift = 0;
		for (int i = 0; i < p.axis && !keep; i++)
			shift += (int)(mask >> i & 1);
		out = (BPos){p.axis - shift, p.outer, p.inner};
		break;
	}
	case OP_CumSum: case OP_TopK: case OP_GatherElements: case OP_ScatterElements:
	case OP_Scatter: {
		int64_t ax = nd->op == OP_CumSum ? 0 : ir_attr_int(g, n, "axis", nd->op == OP_TopK ? -1 : 0);
		if (nd->op == OP_CumSum && !elem_value(a, n, 1, 0, &ax))
			ax = -100;
		ax = ax < 0 && ax > -100 ? ax + rank : ax;
		if (p.axis >= 0 && (ax == p.axis || ax == -100)) {
			mixes(a, n, "it works along the batch's axis");
			break;
		}
		out = p;
		if (nd->op == OP_GatherElements || nd->op == OP_ScatterElements || nd->op == OP_Scatter) {
			/* indices (and updates) are per sample too */
			out = elementwise(a, n, 0, nd->nin);
		}
		for (int i = 1; i < nd->nout; i++)
			set_out(a, n, i, out);
		break;
	}
	case OP_RandomUniformLike: case OP_RandomNormalLike: case OP_Bernoulli:
		out = p; /* the input's shape; its values do not matter (Bernoulli's: per element) */
		break;
	case OP_Trilu: case OP_Det:
		if (p.axis >= rank - 2)
			mixes(a, n, "the batch is one of its matrix axes");
		else
			out = p;
		break;
	case OP_DFT: case OP_STFT: {
		/* the batch is the signal's axis 0, or any but the transformed
		 * axis and the last (real or imaginary) of DFT's */
		int64_t ax = nd->op == OP_DFT ? ir_attr_int(g, n, "axis", 1) : 1;
		ax = ax < 0 ? ax + rank : ax;
		if (p.axis >= 0 && (p.axis == ax || p.axis == rank - 1 || (nd->op == OP_STFT && p.axis)))
			mixes(a, n, "the batch is an axis it transforms");
		else
			out = p;
		for (int i = 1; i < nd->nin; i++)
			if (pin(a, n, i).axis >= 0)
				mixes(a, n, "its frame sizes or window carry the batch");
		break;
	}
	case OP_Reshape: case OP_Flatten: case OP_Squeeze: case OP_Unsqueeze:
		out = reshape(a, n);
		break;
	case OP_Transpose: {
		if (p.axis < 0)
			break;
		const Attr *perm = ir_attr(g, n, "perm");
		for (int i = 0; i < o->rank; i++) {
			int src = perm && perm->type == ATTR_INTS && i < perm->n ? (int)perm->is[i] : rank - 1 - i;
			if (src == p.axis)
				out = (BPos){i, p.outer, p.inner};
		}
		break;
	}
	case OP_Concat: {
		int64_t ax = ir_attr_int(g, n, "axis", 0);
		ax = ax < 0 ? ax + o->rank : ax;
		for (int i = 0; i < nd->nin; i++) {
			BPos q = pin(a, n, i);
			if (q.axis >= 0 && q.axis == ax) {
				mixes(a, n, "it concatenates along the batch's axis");
				break;
			}
			if (q.axis >= 0)
				out = q;
		}
		if (out.axis >= 0) /* every part must carry it: a cls token, at any B0 */
			for (int i = 0; i < nd->nin; i++)
				if (nd->in[i] != IR_NONE && a->pos[nd->in[i]].axis < 0)
					need(a, nd->in[i], out, n);
		break;
	}
	case OP_Split:
		if (p.axis >= 0) {
			int64_t ax = ir_attr_int(g, n, "axis", 0);
			ax = ax < 0 ? ax + rank : ax;
			if (ax == p.axis)
				mixes(a, n, "it splits along the batch's axis");
			else
				out = p;
		}
		for (int i = 0; i < nd->nout; i++)
			set_out(a, n, i, out);
		return;
	case OP_Slice: {
		if (p.axis < 0)
			break;
		out = p;
		/* which axes are sliced: input 3 (or the attribute), else all */
		Tensor *at = tin(a, n, 3);
		const Attr *aa = ir_attr(g, n, "axes");
		int cnt = at ? (int)ir_numel(at) : aa && aa->type == ATTR_INTS ? aa->n : rank;
		for (int i = 0; i < cnt; i++) {
			int64_t axv = i;
			if (at && !elem_value(a, n, 3, i, &axv))
				axv = -100;
			else if (!at && aa && aa->type == ATTR_INTS)
				axv = aa->is[i];
			axv = axv < 0 && axv > -100 ? axv + rank : axv;
			if (axv != p.axis && axv != -100)
				continue;
			/* the batch's axis stays whole, or the slice picks samples */
			if (o->dims[p.axis] != x->dims[p.axis] || axv == -100) {
				mixes(a, n, "it slices the batch's axis");
				break;
			}
			/* a step other than 1 along it (-1 keeps the extent) reorders
			 * the samples */
			int64_t step = 1;
			if (tin(a, n, 4) && !elem_value(a, n, 4, i, &step))
				step = 0;
			if (step != 1) {
				mixes(a, n, "it steps along the batch's axis");
				break;
			}
			int64_t end;
			Tensor *et = tin(a, n, 2);
			const Attr *ea = ir_attr(g, n, "ends");
			bool known = et ? elem_value(a, n, 2, i, &end) : ea && ea->type == ATTR_INTS && i < ea->n ?
			    (end = ea->is[i], true) : false;
			/* an end of exactly the batch's extent must follow the batch */
			if (known && end == x->dims[p.axis] && et)
				batch_element(a, n, 2, i, p.outer * p.inner);
		}
		break;
	}
	case OP_Gather: {
		Tensor *idx = tin(a, n, 1);
		BPos pi = pin(a, n, 1);
		int64_t ax = ir_attr_int(g, n, "axis", 0);
		ax = ax < 0 ? ax + rank : ax;
		if (p.axis >= 0 && p.axis == ax) {
			mixes(a, n, "it gathers along the batch's axis");
		} else if (p.axis >= 0) {
			out = p.axis < ax ? p : (BPos){p.axis + idx->rank - 1, p.outer, p.inner};
			if (pi.axis >= 0)
				mixes(a, n, "both its data and its indices carry the batch");
		} else if (pi.axis >= 0) {
			out = (BPos){(int)ax + pi.axis, pi.outer, pi.inner};
		}
		break;
	}
	case OP_Expand: {
		Tensor *s = tin(a, n, 1);
		if (p.axis < 0)
			break;
		out = (BPos){p.axis + o->rank - rank, p.outer, p.inner};
		int64_t k = out.axis - (o->rank - (s ? ir_numel(s) : 0)), v;
		if (k >= 0 && elem_value(a, n, 1, k, &v) && v != 1)
			batch_element(a, n, 1, k, p.outer * p.inner);
		break;
	}
	case OP_Tile: {
		int64_t v;
		if (p.axis >= 0 && (!elem_value(a, n, 1, p.axis, &v) || v != 1))
			mixes(a, n, "it repeats along the batch's axis");
		else
			out = p;
		break;
	}
	case OP_Pad: {
		if (p.axis < 0)
			break;
		int64_t lo = 0, hi = 0;
		const Attr *pa = ir_attr(g, n, "pads");
		Tensor *pt = tin(a, n, 1);
		if (pt && !(elem_value(a, n, 1, p.axis, &lo) && elem_value(a, n, 1, p.axis + rank, &hi)))
			lo = 1;
		else if (!pt && pa && pa->type == ATTR_INTS && pa->n == 2 * rank) {
			lo = pa->is[p.axis];
			hi = pa->is[p.axis + rank];
		}
		if (lo || hi)
			mixes(a, n, "it pads the batch's axis");
		else
			out = p;
		break;
	}
	case OP_OneHot: {
		if (p.axis < 0)
			break;
		int64_t ax = ir_attr_int(g, n, "axis", -1);
		ax = ax < 0 ? ax + rank + 1 : ax;
		out = (BPos){p.axis + (p.axis >= ax), p.outer, p.inner};
		break;
	}
	case OP_ScatterND: {
		Tensor *ix = tin(a, n, 1);
		int64_t k = ix && ix->rank ? ix->dims[ix->rank - 1] : 0;
		if (p.axis >= 0 && p.axis < k)
			mixes(a, n, "its indices address the batch's axis");
		else
			out = p;
		break;
	}
	case OP_RNN: case OP_GRU: case OP_LSTM: {
		bool l1 = ir_attr_int(g, n, "layout", 0) != 0;
		int bx = l1 ? 0 : 1;
		if (p.axis >= 0 && p.axis != bx) {
			mixes(a, n, "the batch is its sequence axis");
			break;
		}
		if (p.axis < 0)
			break;
		/* the initial states carry the batch too: torch's zero states are
		 * ConstantOfShape of the export batch */
		for (int i = 5; i < nd->nin && i < 7; i++)
			if (nd->in[i] != IR_NONE && a->pos[nd->in[i]].axis < 0)
				need(a, nd->in[i], (BPos){l1 ? 0 : 1, 1, 1}, n);
		if (nd->nin > 4 && nd->in[4] != IR_NONE && a->pos[nd->in[4]].axis < 0)
			need(a, nd->in[4], (BPos){0, 1, 1}, n);
		set_out(a, n, 0, (BPos){l1 ? 0 : 2, 1, 1});
		for (int i = 1; i < nd->nout; i++)
			set_out(a, n, i, (BPos){l1 ? 0 : 1, 1, 1});
		return;
	}
	case OP_If: {
		/* each output where both branches have it; the condition is one
		 * bool, so every sample takes the same branch */
		int k = nd->nout;
		if (p.axis >= 0)
			mixes(a, n, "its condition carries the batch");
		for (int j = 0; j < k; j++) {
			BPos t = pin(a, n, 1 + j), e = pin(a, n, 1 + k + j);
			if (!same_pos(t, e))
				mixes(a, n, "its branches hold the batch in different places");
			set_out(a, n, j, same_pos(t, e) ? t : NO_POS);
		}
		return;
	}
	case OP_QuantizeLinear: case OP_DequantizeLinear: {
		/* per tensor, or per index of `axis`: the batch's axis must not be it */
		const Tensor *s = tin(a, n, 1);
		int64_t ax = ir_attr_int(g, n, "axis", 1);
		ax = ax < 0 ? ax + rank : ax;
		if (p.axis >= 0 && s && ir_numel(s) != 1 && ax == p.axis)
			mixes(a, n, "it quantizes along the batch's axis");
		else
			out = p;
		break;
	}
	case OP_Einsum:
		/* the equation's letters would tell; until they do, only a batch
		 * that reaches no Einsum is re-specialized */
		for (int i = 0; i < nd->nin; i++)
			if (pin(a, n, i).axis >= 0)
				mixes(a, n, "tapc does not trace the batch through Einsum equations");
		break;
	default:
		switch (ir_op_kind(nd->op)) {
		case OPK_UNARY: case OPK_BINARY: case OPK_VARIADIC:
			out = elementwise(a, n, 0, nd->nin);
			break;
		default:
			for (int i = 0; i < nd->nin; i++)
				if (pin(a, n, i).axis >= 0)
					mixes(a, n, "tapc does not know where this operator keeps the batch");
			break;
		}
	}
	set_out(a, n, 0, out);
	for (int i = 1; i < nd->nout; i++)
		if (nd->op == OP_Dropout || ir_op_kind(nd->op) == OPK_UNARY)
			set_out(a, n, i, out);
}

/* ---------------------------------------------------------------- entry */

bool
ir_batch_plan(Graph *g, BatchPlan *plan)
{
	memset(plan, 0, sizeof *plan);
	plan->mixer = plan->stuck = IR_NONE;
	plan->b0 = -1;
	for (int i = 0; i < g->ninputs; i++) {
		Tensor *t = &g->tensors[g->inputs[i]];
		if (t->rank < 1)
			continue;
		if (plan->b0 < 0)
			plan->b0 = t->dims[0];
		else if (t->dims[0] != plan->b0) {
			snprintf(plan->stuck_why, sizeof plan->stuck_why,
			    "inputs disagree on the batch (dim 0): %lld and %lld", (long long)plan->b0,
			    (long long)t->dims[0]);
			plan->stuck_input = true;
			return false;
		}
	}
	if (plan->b0 < 1) {
		snprintf(plan->stuck_why, sizeof plan->stuck_why, "no input has a batch dimension");
		plan->stuck_input = true;
		return false;
	}
	An a = {.g = g, .b0 = plan->b0, .plan = plan};
	a.pos = malloc(sizeof *a.pos * (g->ntensors + 1));
	a.pinned = calloc(g->ntensors + 1, sizeof *a.pinned);
	a.prov = calloc(g->ntensors + 1, sizeof *a.prov);
	if (!a.pos || !a.pinned || !a.prov)
		die("out of memory");
	ir_reindex(g);
	/* forward again each time need() pinned a tensor: every pin turns a
	 * tensor from no batch to batch, so this ends */
	for (int round = 0; round <= g->ntensors; round++) {
		for (TensorId t = 0; t < g->ntensors; t++)
			if (!a.pinned[t])
				a.pos[t] = NO_POS;
		for (int i = 0; i < g->ninputs; i++)
			if (g->tensors[g->inputs[i]].rank >= 1)
				a.pos[g->inputs[i]] = (BPos){0, 1, 1};
		/* patches stay from round to round: a round only adds batched
		 * tensors, so what was the batch stays the batch */
		a.changed = false;
		plan->mixer = IR_NONE;
		for (NodeId n = 0; n < g->nnodes; n++)
			if (!g->nodes[n].dead)
				forward(&a, n);
		if (!a.changed)
			break;
	}
	plan->pos = a.pos;
	for (TensorId t = 0; t < g->ntensors; t++)
		free(a.prov[t]);
	free(a.prov);
	free(a.pinned);
	return true;
}

void
ir_batch_plan_free(BatchPlan *plan)
{
	free(plan->pos);
	free(plan->patch);
	memset(plan, 0, sizeof *plan);
}

/* An inline copy of constant t, which the patches change. */
static TensorId
private_copy(Graph *g, TensorId t)
{
	Tensor *x = &g->tensors[t];
	const void *v = ir_value(g, t);
	if (!v)
		return IR_NONE;
	TensorId c = ir_add_tensor(g, "", TK_CONST, x->dtype);
	x = &g->tensors[t]; /* the array may have moved */
	Tensor *y = &g->tensors[c];
	ir_set_shape(y, x->rank, x->dims);
	y->name = x->name;
	y->data = DATA_INLINE;
	y->length = ir_nbytes(x);
	y->bytes = ir_alloc(&g->arena, (size_t)y->length + 1);
	memcpy(y->bytes, v, (size_t)y->length);
	y->value = y->bytes;
	return c;
}

/* Constant y, whose blocks along `axis` repeat one per sample of batch b0,
 * with as many blocks as batch b has. */
static bool
resize(Graph *g, Tensor *y, int axis, int64_t b0, int64_t b)
{
	int64_t dims[IR_MAX_RANK];
	memcpy(dims, y->dims, sizeof dims[0] * y->rank);
	int64_t f = dims[axis] / b0;
	dims[axis] = f * b;
	int64_t nbytes = ir_shape_bytes(y->dtype, y->rank, dims);
	if (nbytes < 0 || nbytes / (ir_dtype_size(y->dtype) ? ir_dtype_size(y->dtype) : 1) > IR_EVAL_MAX_ELEMS * 64) {
		diag_file(g->model, "constant '%s' would be too large at batch %lld", y->name, (long long)b);
		return false;
	}
	int64_t block = ir_dtype_size(y->dtype) * f * prod(y->dims, axis + 1, y->rank);
	int64_t outer = prod(y->dims, 0, axis);
	char *bytes = ir_alloc(&g->arena, (size_t)nbytes + 1);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t k = 0; k < b; k++)
			memcpy(bytes + (o * b + k) * block, (char *)y->bytes + o * b0 * block, (size_t)block);
	ir_set_shape(y, y->rank, dims);
	y->bytes = bytes;
	y->value = bytes;
	y->length = nbytes;
	return true;
}

bool
ir_batch_respecialize(Graph *g, const BatchPlan *plan, int64_t batch)
{
	/* each patched constant gets one private copy, pointed to by the node
	 * whose input chain reads it; other readers keep the original */
	for (int i = 0; i < plan->npatch; i++) {
		const BatchPatch *p = &plan->patch[i];
		TensorId c = IR_NONE;
		for (int k = 0; k < i && c == IR_NONE; k++)
			if (plan->patch[k].t == p->t)
				c = plan->patch[k].copy;
		if (c == IR_NONE) {
			c = private_copy(g, p->t);
			if (c == IR_NONE) {
				diag_file(g->model, "the batch constant '%s' cannot be read", g->tensors[p->t].name);
				return false;
			}
			/* every reader of the original now reads the copy: the
			 * analysis saw them all at the batch */
			for (NodeId n = 0; n < g->nnodes; n++)
				for (int k = 0; k < g->nodes[n].nin; k++)
					if (g->nodes[n].in[k] == p->t)
						g->nodes[n].in[k] = c;
			for (NodeId n = 0; n < g->nnodes; n++)
				for (int k = 0; k < g->nodes[n].nattr; k++)
					if (g->nodes[n].attr[k].type == ATTR_TENSOR && g->nodes[n].attr[k].t == p->t)
						g->nodes[n].attr[k].t = c;
		}
		((BatchPatch *)p)->copy = c;
		Tensor *y = &g->tensors[c];
		int64_t v = p->factor * batch;
		if (p->axis >= 0 && !resize(g, y, p->axis, plan->b0, batch))
			return false;
		else if (p->axis >= 0)
			continue;
		if (y->dtype == DT_I64)
			((int64_t *)y->bytes)[p->elem] = v;
		else
			((int32_t *)y->bytes)[p->elem] = (int32_t)v;
	}
	for (int i = 0; i < g->ninputs; i++) {
		Tensor *t = &g->tensors[g->inputs[i]];
		if (t->rank >= 1)
			t->dims[0] = batch;
		if (ir_shape_bytes(t->dtype, t->rank, t->dims) < 0) {
			diag_file(g->model, "input '%s': byte size is over tapc's limit of 2^%d bytes at "
			    "batch %lld", t->name, IR_MAX_BYTES_LOG2, (long long)batch);
			return false;
		}
	}
	/* every value is inferred again at the new batch */
	for (TensorId t = 0; t < g->ntensors; t++) {
		Tensor *x = &g->tensors[t];
		if (x->kind == TK_VALUE) {
			x->rank = -1;
			x->value = NULL;
		}
	}
	ir_reindex(g);
	return ir_infer_all(g);
}
