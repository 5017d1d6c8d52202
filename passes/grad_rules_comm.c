/*
 * grad_rules_comm.c - autodiff's rules for tensor parallelism's
 * collectives (tp-rewrite's AllReduce, AllGather, ReduceScatter, Shard):
 * each backward collective is the conjugate of the forward one.
 *
 * Needs: a graph tp-rewrite made (Graph.tp_layouts).  The loss is the same
 * value on every rank, so the gradient of a replicated tensor is the whole
 * d loss / d tensor on every rank, that of a split tensor each rank's
 * slice of it, and that of a partial sum the gradient of the sum:
 *
 *   forward                        backward
 *   AllReduce   P -> R   y = sum x     dx = dy              (identity)
 *   AllGather   S -> R   y = [x_q]     dx = Shard(dy)       (own slice)
 *   ReduceScatter P -> S               dx = AllGather(dy)
 *   Shard       R -> S   y = x[q]      dx = AllGather(dy)
 *
 * The other half of the conjugation lives in grad_accumulate: what an
 * operator computed piecewise (a split or partial operand) gives a
 * replicated input only this rank's share, and the shares are summed by
 * an AllReduce before the gradient is used.  Gradient all-reduces of data
 * parallelism (group="dp") and buckets are the optimizer's side, never
 * differentiated.
 */
#include <string.h>

#include "passes/grad.h"

/* A collective of the same axis, blocks and parts as the forward n. */
static TensorId
conjugate(GradCtx *c, NodeId n, Op op, TensorId dy)
{
	NodeId b = grad_begin(c, op, 1, &dy, 1, NULL);
	grad_copy_attr(c, b, n, "axis");
	grad_copy_attr(c, b, n, "blocks");
	grad_copy_attr(c, b, n, "parts");
	return grad_finish(c, b);
}

bool
grad_allreduce(GradCtx *c, NodeId n, const TensorId *dy)
{
	const Node *nd = &c->g->nodes[n];
	const char *grp = ir_attr_str(c->g, n, "group", "tp");
	if (nd->nin != 1 || strcmp(grp, "tp") != 0 || ir_attr_int(c->g, n, "mean", 0) != 0) {
		diag_node(c->g, n, "only tensor parallelism's one-tensor sum is differentiated, "
		    "not a %s bucket of %d", grp, nd->nin);
		return false;
	}
	if (dy[0] != IR_NONE && grad_wants(c, n, 0))
		grad_give(c, n, 0, dy[0]);
	return true;
}

bool
grad_allgather(GradCtx *c, NodeId n, const TensorId *dy)
{
	if (dy[0] != IR_NONE && grad_wants(c, n, 0))
		grad_give(c, n, 0, conjugate(c, n, OP_Shard, dy[0]));
	return true;
}

/* ReduceScatter and Shard: the slices gathered back. */
bool
grad_gather_back(GradCtx *c, NodeId n, const TensorId *dy)
{
	if (dy[0] != IR_NONE && grad_wants(c, n, 0))
		grad_give(c, n, 0, conjugate(c, n, OP_AllGather, dy[0]));
	return true;
}
