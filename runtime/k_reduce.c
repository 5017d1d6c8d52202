/* k_reduce.c - placeholder kernels until the real ones land. */
#include "runtime/taprt.h"

void
taprt_op_ReduceMean(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_ReduceSum(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_ReduceMax(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_ReduceMin(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_ReduceProd(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_ReduceSumSquare(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_ArgMax(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_ArgMin(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Softmax(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_LogSoftmax(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_LayerNormalization(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_BatchNormalization(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

