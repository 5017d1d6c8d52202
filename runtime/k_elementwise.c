/* k_elementwise.c - placeholder kernels until the real ones land. */
#include "runtime/taprt.h"

void
taprt_op_Abs(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Neg(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Exp(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Log(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Sqrt(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Reciprocal(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Floor(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Ceil(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Round(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Sign(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Relu(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_LeakyRelu(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Elu(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Selu(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Sigmoid(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_HardSigmoid(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_HardSwish(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Softplus(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Softsign(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Tanh(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Erf(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Sin(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Cos(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Not(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_IsNaN(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Identity(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Cast(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Clip(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Dropout(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Add(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Sub(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Mul(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Div(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Pow(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Mod(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_PRelu(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Equal(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Less(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_LessOrEqual(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Greater(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_GreaterOrEqual(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_And(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Or(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Xor(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Max(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Min(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Sum(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Mean(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

void
taprt_op_Where(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx; (void)n;
}

