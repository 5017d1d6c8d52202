/* k_data.c - placeholder kernels until the real ones land. */
#include "runtime/taprt.h"

void
taprt_op_Constant(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_ConstantOfShape(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Shape(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Size(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Range(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Reshape(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Flatten(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Squeeze(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Unsqueeze(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Transpose(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Concat(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Split(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Slice(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Gather(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Expand(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Tile(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Trilu(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Pad(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

