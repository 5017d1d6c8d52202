/*
 * fuse_conv.c - give a Conv its epilogue: the residual Add and the
 * activation after it become one FusedConv.
 *
 * Needs: shaped graph, after fold-bn (so Conv -> BN -> Add -> Relu has
 * become Conv -> Add -> Relu); passes/fuse.h says where fusion may happen.
 * An f32 Conv whose output only an Add reads, the Add's other operand being
 * a tensor of exactly the output's type, takes it as the residual Z; one
 * whose output (or the residual sum) only an activation reads -- Relu, Clip
 * with constant bounds, HardSigmoid, HardSwish, LeakyRelu -- takes it as
 * `activation`.  The FusedConv computes act(Conv(X, W, B) + Z) with the
 * epilogue applied while each GEMM's rows are in cache (runtime/k_nn.c).
 * Guarantees: the same function; each absorbed node's pass over memory gone.
 */
#include <math.h>

#include "passes/fuse.h"

/* The activation node n as (name, params); false if it is not one the
 * kernels fuse. */
static bool
activation(Graph *g, NodeId n, const char **name, float *p, int *np)
{
	Node *nd = &g->nodes[n];
	*np = 0;
	switch (nd->op) {
	case OP_Relu: *name = "Relu"; return true;
	case OP_HardSwish: *name = "HardSwish"; return true;
	case OP_HardSigmoid:
		*name = "HardSigmoid";
		p[0] = ir_attr_float(g, n, "alpha", 0.2f);
		p[1] = ir_attr_float(g, n, "beta", 0.5f);
		*np = 2;
		return true;
	case OP_LeakyRelu:
		*name = "LeakyRelu";
		p[0] = ir_attr_float(g, n, "alpha", 0.01f);
		*np = 1;
		return true;
	case OP_Clip:
		*name = "Clip";
		p[0] = -INFINITY;
		p[1] = INFINITY;
		*np = 2;
		if (g->opset < 11) {
			p[0] = ir_attr_float(g, n, "min", p[0]);
			p[1] = ir_attr_float(g, n, "max", p[1]);
			return true;
		}
		/* bounds from inputs: known at compile time, or no fusion */
		for (int i = 1; i < 3; i++)
			if (i < nd->nin && nd->in[i] != IR_NONE && !fuse_scalar(g, nd->in[i], &p[i - 1]))
				return false;
		return true;
	default:
		return false;
	}
}

bool
fuse_epilogue_activation(Graph *g, NodeId n, const char **name, float *p, int *np)
{
	return activation(g, n, name, p, np);
}

/* Absorb the sole reader of conv node cv's output, if it fits; the fused
 * node is then that reader's. */
static bool
absorb(Graph *g, NodeId cv)
{
	Node *c = &g->nodes[cv];
	TensorId y = c->out[0];
	NodeId u = fuse_sole_user(g, y);
	if (u == IR_NONE || !fuse_same_place(g, cv, u) || g->tensors[y].dtype != DT_F32)
		return false;
	bool fused = c->op == OP_FusedConv;
	bool has_act = fused && *ir_attr_str(g, cv, "activation", "");
	TensorId in[4] = {c->in[0], c->in[1], c->nin > 2 ? c->in[2] : IR_NONE,
		fused && c->nin > 3 ? c->in[3] : IR_NONE};
	const char *act = NULL;
	float p[2];
	int np = 0;
	Node *un = &g->nodes[u];
	if (un->op == OP_Add && in[3] == IR_NONE && !has_act) {
		TensorId z = un->in[0] == y ? un->in[1] : un->in[0];
		if (z == y || !fuse_same_type(&g->tensors[z], &g->tensors[y]))
			return false;
		in[3] = z;
	} else if (has_act || !activation(g, u, &act, p, &np)) {
		return false;
	}
	/* the reader becomes the FusedConv: the Conv's attributes, inputs */
	const Attr *attrs = c->attr;
	int nattr = c->nattr;
	fuse_become(g, u, OP_FusedConv, c->name);
	for (int k = 0; k < nattr; k++)
		fuse_copy_attr(g, u, &attrs[k]);
	if (act) {
		ir_set_attr(g, u, "activation", ATTR_STRING)->s = ir_strdup(&g->arena, act);
		if (np) {
			Attr *a = ir_set_attr(g, u, "activation_params", ATTR_FLOATS);
			a->n = np;
			a->fs = ir_alloc(&g->arena, sizeof *a->fs * np);
			memcpy(a->fs, p, sizeof *p * np);
		}
	}
	int nin = in[3] != IR_NONE ? 4 : in[2] != IR_NONE ? 3 : 2;
	fuse_set_inputs(g, u, nin, in);
	g->nodes[cv].dead = true;
	return true;
}

bool
pass_fuse_conv(Graph *g, PassCtx *cx)
{
	(void)cx;
	/* a fused node lands at the reader, where the driver meets it again
	 * and tries the next reader */
	return fuse_each(g, OP_Conv, OP_FusedConv, absorb);
}
