/* k_nn.c - placeholder kernels until the real ones land. */
#include "runtime/taprt.h"

void
taprt_op_MatMul(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Gemm(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Conv(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_MaxPool(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_AveragePool(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_GlobalAveragePool(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_GlobalMaxPool(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

