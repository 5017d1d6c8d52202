/*
 * grad.h - what autodiff's gradient rules see: the context of one backward
 * construction, the rule table and the node builders the rules share.
 *
 * A rule differentiates one forward node.  It gets the gradients of the
 * node's outputs (dy[i], IR_NONE where an output has none) and, for each
 * input i that grad_wants(), builds nodes computing that input's share of
 * d loss / d input and hands it to grad_accumulate().  Rules build nodes
 * only through the grad_* builders below, which mark them backward, name
 * them after the forward node and copy its GraphNode, subgraph, stage and
 * region; every built node is shape-inferred at once.  A rule that meets a
 * form it cannot differentiate reports it with diag_node and returns false;
 * autodiff then leaves the graph as it was.
 *
 * The table is passes/grad_rules.def: one GRAD(op, rule, nodiff) line per
 * operator, the rule defined in any file (grad_rules.c, grad_rules_nn.c;
 * tensor parallelism's collectives get theirs from another file).
 */
#ifndef TAPC_GRAD_H
#define TAPC_GRAD_H

#include "ir/ir.h"

typedef struct GradCtx GradCtx;

/* Differentiate node n given its outputs' gradients; false after a diag. */
typedef bool GradRule(GradCtx *c, NodeId n, const TensorId *dy);

/* Inputs no gradient ever flows into (indices, shapes, conditions, Clip's
 * bounds, BatchNormalization's running statistics): a bit per input. */
#define GRAD_IN(i) (1u << (i))
#define GRAD_NONE_FROM(i) (~0u << (i))  /* input i and every later one */
#define GRAD_ALL (~0u)                  /* piecewise constant: zero gradient */

#define GRAD(op, rule, nodiff) GradRule rule;
#include "passes/grad_rules.def"
#undef GRAD

typedef struct {
	GradRule *rule;                 /* NULL: the operator has no gradient rule */
	unsigned nodiff;                /* GRAD_IN bits of inputs that get no gradient */
} GradInfo;

const GradInfo *grad_info(Op op);

struct GradCtx {
	Graph *g;
	NodeId fwd;                     /* the forward node being differentiated */
	int nfwd;                       /* forward tensors: ids below have the arrays below */
	bool *needs;                    /* per forward tensor: d loss / d t is computed */
	TensorId *grad;                 /* per forward tensor: its gradient so far */
	int built;                      /* nodes built for fwd (names /grad, /grad_1, ...) */
	/* Tensor parallelism (Graph.tp_layouts): per forward tensor, the sum
	 * of the contributions that are this rank's share only, and the node
	 * that gave the last; grad_whole all-reduces them into grad. */
	bool tp;
	TensorId *partial;
	NodeId *partial_from;
	int nreduce;                    /* gradient all-reduces built (names) */
};

/* Does input i of n need a gradient? */
bool grad_wants(GradCtx *c, NodeId n, int i);
/* Add contribution to t's gradient: the first becomes it, later ones are
 * summed onto it in the order they come (an Add node, annotated like
 * from).  Every contribution to every gradient goes through here.  Under
 * tensor parallelism a contribution to a replicated t from a node computed
 * piecewise (a split or partial operand) is this rank's share: the shares
 * are summed apart and all-reduced over the TP group by grad_whole. */
void grad_accumulate(GradCtx *c, TensorId t, TensorId contribution, NodeId from);
/* t's whole gradient (IR_NONE: none), once every contribution is in. */
TensorId grad_whole(GradCtx *c, TensorId t);

/* ------------------------------------------------- the forward node */

TensorId grad_in(GradCtx *c, NodeId n, int i);      /* IR_NONE when absent */
TensorId grad_out(GradCtx *c, NodeId n, int i);
int grad_rank(GradCtx *c, TensorId t);
int grad_dims(GradCtx *c, TensorId t, int64_t *dims); /* dims[IR_MAX_RANK]; the rank */
int64_t grad_axis(int64_t axis, int rank);          /* a negative axis from the end */
/* An integer list from input slot (its value: shapes are static) or else
 * attribute name (NULL: none): the count, -1 when neither is there. */
int grad_int_arg(GradCtx *c, NodeId n, int slot, const char *name, int64_t *out, int max);
/* Hand input i of n a contribution to its gradient (grad_accumulate); the
 * _sum form first sums dy to the input's shape, and does nothing when the
 * input wants no gradient. */
void grad_give(GradCtx *c, NodeId n, int i, TensorId contribution);
void grad_give_sum(GradCtx *c, NodeId n, int i, TensorId dy);

/* ------------------------------------------------------------ builders */

/* A backward node with nout new outputs (none where keep[i] is false;
 * keep NULL: all), not yet inferred: set attributes, then grad_finish. */
NodeId grad_begin(GradCtx *c, Op op, int nin, const TensorId *in, int nout, const bool *keep);
/* Shape inference of a built node (a failure is a bug of a rule: die);
 * returns its first output. */
TensorId grad_finish(GradCtx *c, NodeId n);
void grad_set_int(GradCtx *c, NodeId n, const char *name, int64_t v);
void grad_set_float(GradCtx *c, NodeId n, const char *name, float v);
void grad_set_ints(GradCtx *c, NodeId n, const char *name, int cnt, const int64_t *v);
void grad_set_str(GradCtx *c, NodeId n, const char *name, const char *s);
/* Copy the forward node's attribute `name`, if it has it. */
void grad_copy_attr(GradCtx *c, NodeId n, NodeId from, const char *name);

/* One-output nodes without attributes. */
TensorId grad_op1(GradCtx *c, Op op, TensorId a);
TensorId grad_op2(GradCtx *c, Op op, TensorId a, TensorId b);
TensorId grad_op3(GradCtx *c, Op op, TensorId a, TensorId b, TensorId d);

/* Constants (TK_CONST, inline): a scalar of a float or bool dtype, a 1-D
 * i64 list, a float tensor of any shape. */
TensorId grad_scalar(GradCtx *c, DType dt, double v);
TensorId grad_num(GradCtx *c, TensorId like, double v);   /* a scalar of like's dtype */
TensorId grad_ints(GradCtx *c, int cnt, const int64_t *v);
TensorId grad_const(GradCtx *c, DType dt, int rank, const int64_t *dims, const double *v);

/* The shape operations, in the form the graph's opset takes (attributes
 * or inputs).  Axes are non-negative. */
TensorId grad_reduce(GradCtx *c, Op op, TensorId x, int naxes, const int64_t *axes, bool keep);
TensorId grad_reshape(GradCtx *c, TensorId x, int rank, const int64_t *dims);
TensorId grad_reshape_like(GradCtx *c, TensorId x, TensorId like);
TensorId grad_expand(GradCtx *c, TensorId x, int rank, const int64_t *dims);
TensorId grad_transpose(GradCtx *c, TensorId x, const int64_t *perm);
TensorId grad_unsqueeze(GradCtx *c, TensorId x, int naxes, const int64_t *axes);
TensorId grad_cast(GradCtx *c, TensorId x, DType to);
TensorId grad_slice(GradCtx *c, TensorId x, int n, const int64_t *starts, const int64_t *ends,
    const int64_t *axes);
TensorId grad_pad(GradCtx *c, TensorId x, const int64_t *pads);
/* x's values broadcast to like's shape: Expand. */
TensorId grad_expand_like(GradCtx *c, TensorId x, TensorId like);
/* Zeros of like's type. */
TensorId grad_zeros(GradCtx *c, TensorId like);
/* The gradient of a broadcast: dy (of a broadcast result's shape) summed
 * over the axes that broadcasting added or stretched, reshaped to like's
 * shape.  dy itself when nothing was broadcast. */
TensorId grad_sum_to(GradCtx *c, TensorId dy, TensorId like);

static inline Tensor *
grad_t(GradCtx *c, TensorId t)
{
	return &c->g->tensors[t];
}

#endif
