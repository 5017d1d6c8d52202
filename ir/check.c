/*
 * check.c - the checker's rules every graph from outside must pass, whether
 * the ONNX loader built it or the IR reader did.
 *
 * An IR file is untrusted input exactly like a model (docs/design.md), so
 * both front ends end here: ir_check holds the rules that are properties of
 * the graph rather than of the protobuf encoding (supported opset and
 * dtypes, shapes whose bytes fit, at least one output, attributes of the
 * right types by ONNX's schema in ir/attrs.def, degrees that multiply to
 * the mesh), and ir_reinfer runs shape inference over a graph read from
 * text, so a declared type that lies about its inputs is an error, not a
 * buffer overflow in the generated program.
 *
 * Needs: ir.c, infer.c, eval.c, diag.c; attrs.def (ir/gen_attrs.py).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* ------------------------------------------------------ attribute schema */

/* Schema types without an AttrType: present means unsupported. */
enum { S_GRAPH = -1, S_GRAPHS = -2, S_SPARSE_TENSOR = -3 };
#define S_FLOAT ATTR_FLOAT
#define S_INT ATTR_INT
#define S_STRING ATTR_STRING
#define S_TENSOR ATTR_TENSOR
#define S_FLOATS ATTR_FLOATS
#define S_INTS ATTR_INTS
#define S_STRINGS ATTR_STRINGS

typedef struct {
	Op op;
	const char *name;
	int type;                       /* AttrType, or S_* */
	int lo, hi;                     /* opsets */
	bool required;
} AttrRule;

static const AttrRule rules[] = {
#define ATTR(op, name, type, lo, hi, req) {OP_##op, #name, S_##type, lo, hi, req},
#include "ir/attrs.def"
#undef ATTR
};

static const char *
type_name(int t)
{
	switch (t) {
	case ATTR_FLOAT: return "FLOAT";
	case ATTR_INT: return "INT";
	case ATTR_STRING: return "STRING";
	case ATTR_TENSOR: return "TENSOR";
	case ATTR_FLOATS: return "FLOATS";
	case ATTR_INTS: return "INTS";
	case ATTR_STRINGS: return "STRINGS";
	case S_GRAPH: return "GRAPH";
	case S_GRAPHS: return "GRAPHS";
	default: return "SPARSE_TENSOR";
	}
}

/* Every attribute of node n is one its operator has at the graph's opset,
 * of that type, and every required one is there. */
static bool
check_attrs(Graph *g, NodeId n)
{
	Node *nd = &g->nodes[n];
	for (int k = 0; k < nd->nattr; k++) {
		const Attr *a = &nd->attr[k];
		const AttrRule *match = NULL, *other = NULL;
		for (size_t i = 0; i < sizeof rules / sizeof *rules && !match; i++) {
			const AttrRule *r = &rules[i];
			if (r->op != nd->op || strcmp(r->name, a->name) != 0)
				continue;
			if (g->opset >= r->lo && g->opset <= r->hi)
				match = r;
			else
				other = r;
		}
		if (!match) {
			if (other)
				diag_node(g, n, "attribute '%s' is not an attribute of %s at opset %lld (opsets %d to %d)",
				    a->name, ir_op_name(nd->op), (long long)g->opset, other->lo, other->hi);
			else
				diag_node(g, n, "attribute '%s' is not an attribute of %s", a->name,
				    ir_op_name(nd->op));
			return false;
		}
		if (match->type < 0) {
			diag_node(g, n, "attribute '%s' of type %s is not supported", a->name,
			    type_name(match->type));
			return false;
		}
		if ((int)a->type != match->type) {
			diag_node(g, n, "attribute '%s' is %s, expected %s", a->name, type_name(a->type),
			    type_name(match->type));
			return false;
		}
		if (a->type == ATTR_TENSOR && (a->t < 0 || a->t >= g->ntensors ||
		    g->tensors[a->t].kind != TK_CONST)) {
			diag_node(g, n, "attribute '%s' does not refer to a constant", a->name);
			return false;
		}
	}
	for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
		const AttrRule *r = &rules[i];
		/* an If's branches are nodes, not attributes */
		if (r->op == nd->op && r->required && r->type >= 0 && g->opset >= r->lo &&
		    g->opset <= r->hi && !ir_attr(g, n, r->name)) {
			diag_node(g, n, "required attribute '%s' is missing", r->name);
			return false;
		}
	}
	return true;
}

/* --------------------------------------------------------------- tensors */

bool
ir_dtype_supported(DType t)
{
	return t > DT_UNDEF && t < DT_COUNT && t != DT_STRING && t != DT_C64 && t != DT_C128;
}

int64_t
ir_shape_bytes(DType dt, int rank, const int64_t *dims)
{
	int64_t n = ir_dtype_size(dt);
	if (rank < 0 || rank > IR_MAX_RANK)
		return -1;
	for (int i = 0; i < rank; i++)
		if (dims[i] < 0 || __builtin_mul_overflow(n, dims[i], &n) || n > IR_MAX_BYTES)
			return -1;
	return n;
}

/* A tensor the graph starts from (input, weight, constant), or a value
 * whose type was declared: a supported dtype and a shape that fits. */
static const char *
kind_name(TensorKind k)
{
	return k == TK_INPUT ? "input" : k == TK_WEIGHT ? "weight" : k == TK_CONST ? "constant" :
	    k == TK_STATE ? "state" : "value";
}

static bool
check_tensor(Graph *g, TensorId id)
{
	Tensor *t = &g->tensors[id];
	const char *what = kind_name(t->kind);
	if (t->kind == TK_VALUE && t->rank < 0 && t->dtype == DT_UNDEF)
		return true;            /* "?[?]": inference will type it */
	if (!ir_dtype_supported(t->dtype)) {
		diag_file(g->model, "%s '%s': data type %s is not supported", what, t->name,
		    ir_dtype_name(t->dtype));
		return false;
	}
	if (t->rank < 0) {
		diag_file(g->model, "%s '%s' has no shape", what, t->name);
		return false;
	}
	if (ir_shape_bytes(t->dtype, t->rank, t->dims) < 0) {
		char ty[IR_TYPESTR];
		diag_file(g->model, "%s '%s' is %s: its byte size is over tapc's limit of 2^%d bytes",
		    what, t->name, ir_typestr(t, ty), IR_MAX_BYTES_LOG2);
		return false;
	}
	return true;
}

/* A training graph's loss (one f32/f64 value a node computes) and its
 * gradient pairs (a float weight and a computed tensor of its type). */
static bool
check_training(Graph *g)
{
	char a[IR_TYPESTR], b[IR_TYPESTR];
	if (g->loss != IR_NONE) {
		Tensor *l = &g->tensors[g->loss];
		if (l->kind != TK_VALUE || (l->dtype != DT_F32 && l->dtype != DT_F64) ||
		    ir_numel(l) != 1) {
			diag_file(g->model, "the loss '%s' is %s %s, expected one computed f32 or f64 value",
			    l->name, kind_name(l->kind), ir_typestr(l, a));
			return false;
		}
	}
	for (int i = 0; i < g->ngrads; i++) {
		Tensor *w = &g->tensors[g->grads[i].weight], *d = &g->tensors[g->grads[i].grad];
		bool same = w->dtype == d->dtype && w->rank == d->rank;
		for (int k = 0; same && k < w->rank; k++)
			same = w->dims[k] == d->dims[k];
		if (g->loss == IR_NONE || w->kind != TK_WEIGHT || d->kind != TK_VALUE || !same ||
		    (w->dtype != DT_F32 && w->dtype != DT_F64)) {
			diag_file(g->model, "gradient %d: '%s' (%s %s) for '%s' (%s %s): expected a computed "
			    "tensor of a float weight's type, in a graph with a loss", i, d->name,
			    kind_name(d->kind), ir_typestr(d, b), w->name, kind_name(w->kind),
			    ir_typestr(w, a));
			return false;
		}
	}
	return true;
}

bool
ir_check(Graph *g)
{
	if (g->opset < IR_MIN_OPSET || g->opset > IR_MAX_OPSET) {
		diag_file(g->model, "opset %lld is not supported (tapc reads opsets %d to %d)",
		    (long long)g->opset, IR_MIN_OPSET, IR_MAX_OPSET);
		return false;
	}
	if (!g->noutputs) {
		diag_file(g->model, "the graph has no outputs");
		return false;
	}
	Mesh *m = &g->mesh;
	if (m->dp || m->tp || m->pp) {
		int64_t devices = (int64_t)m->rows * m->cols;
		int64_t ranks = (int64_t)m->dp * m->tp * m->pp;
		if (m->rows < 1 || m->cols < 1 || devices > IR_MAX_DEVICES || m->dp < 1 ||
		    m->tp < 1 || m->pp < 1 || ranks != devices) {
			diag_file(g->model, "mesh=%dx%d dp=%d tp=%d pp=%d: the degrees must be positive "
			    "and multiply to the mesh's devices (at most %d)", m->rows, m->cols, m->dp,
			    m->tp, m->pp, IR_MAX_DEVICES);
			return false;
		}
	}
	if (g->microbatches < 0 || g->microbatches > IR_MAX_DEVICES) {
		diag_file(g->model, "microbatches=%d: expected 1 to %d", g->microbatches, IR_MAX_DEVICES);
		return false;
	}
	/* slice=N: micro-batches are pairs of halves, N of them sliced */
	if (g->slice < 0 || (g->slice > 0 && (g->mesh.pp < 2 || g->microbatches < 2 ||
	    g->microbatches % 2 || g->slice > g->microbatches / 2))) {
		diag_file(g->model, "slice=%d: expected with pp > 1, an even microbatches= (the halves) "
		    "and at most microbatches/2 sliced micro-batches", g->slice);
		return false;
	}
	/* subpipeline=1: micro-batches are pairs of halves inside TP blocks */
	if (g->subpipe && (g->mesh.tp < 2 || g->microbatches < 2 || g->microbatches % 2 ||
	    g->slice > 0)) {
		diag_file(g->model, "subpipeline=1: expected with tp > 1, an even microbatches= (the "
		    "halves) and no slice=");
		return false;
	}
	for (TensorId t = 0; t < g->ntensors; t++)
		if (!check_tensor(g, t))
			return false;
	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead && !check_attrs(g, n))
			return false;
	return check_training(g);
}

/* ------------------------------------------------------------ inference */

bool
ir_reinfer(Graph *g)
{
	bool *ready = calloc(g->ntensors + 1, 1);
	int cap = 16;
	Tensor *decl = malloc(sizeof *decl * cap);
	if (!ready || !decl)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++)
		ready[t] = g->tensors[t].kind != TK_VALUE;
	bool ok = true;
	for (NodeId n = 0; ok && n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		for (int i = 0; ok && i < nd->nin; i++)
			if (nd->in[i] != IR_NONE && !ready[nd->in[i]]) {
				diag_node(g, n, "input %d is used before the node that defines it", i);
				ok = false;
			}
		if (!ok)
			break;
		/* what the text declares, against what the inputs give */
		if (nd->nout > cap) {
			cap = nd->nout;
			if (!(decl = realloc(decl, sizeof *decl * cap)))
				die("out of memory");
		}
		for (int i = 0; i < nd->nout; i++)
			if (nd->out[i] != IR_NONE)
				decl[i] = g->tensors[nd->out[i]];
		if (!(ok = ir_infer_node(g, n)))
			break;
		ir_eval_node(g, n);
		for (int i = 0; ok && i < nd->nout; i++) {
			if (nd->out[i] == IR_NONE)
				continue;
			Tensor *t = &g->tensors[nd->out[i]];
			ready[nd->out[i]] = true;
			if (decl[i].rank < 0 && decl[i].dtype == DT_UNDEF)
				continue;
			bool same = decl[i].dtype == t->dtype && decl[i].rank == t->rank;
			for (int d = 0; same && d < t->rank; d++)
				same = decl[i].dims[d] == t->dims[d];
			if (!same) {
				char a[IR_TYPESTR], b[IR_TYPESTR];
				diag_node(g, n, "output %d is declared %s, but its inputs give %s", i,
				    ir_typestr(&decl[i], a), ir_typestr(t, b));
				ok = false;
			}
		}
	}
	free(decl);
	free(ready);
	return ok;
}
