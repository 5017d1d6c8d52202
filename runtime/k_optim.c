/*
 * k_optim.c - the optimizers: one weight's update, in place, with
 * torch.optim's exact update rules (torch 1.13's single-tensor code, in
 * the same order of operations, f32 arithmetic on f32 weights).
 *
 *   SGD(w, g[, buf])     d = g + weight_decay * w
 *                        buf = momentum * buf + d   (buf zero at the start,
 *                                                    so step 1 gives d: torch's clone)
 *                        w = w - lr * (momentum ? buf : d)
 *   AdamW(w, g, m, v)    w = w * (1 - lr * weight_decay)
 *                        m = beta1 * m + (1 - beta1) * g
 *                        v = beta2 * v + (1 - beta2) * g * g
 *                        w = w - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *
 * Outputs are the inputs' storage (the emitter binds them so); t is
 * cx->step.  Each first completes the data-parallel gradient all-reduces
 * started asynchronously (taprt_comm_wait).  Needs nothing but libm.
 */
#include <math.h>

#include "runtime/internal.h"

#define OPT_LOOP(T)                                                             \
	do {                                                                    \
		T *w = n->in[0]->data;                                          \
		const T *gr = n->in[1]->data;                                   \
		for (int64_t i = 0; i < count; i++)                             \
			BODY(T);                                                \
	} while (0)

void
taprt_op_SGD(taprt_ctx *cx, const taprt_node *n)
{
	double lr = taprt_attr_float(n, "lr", 0), mom = taprt_attr_float(n, "momentum", 0);
	double wd = taprt_attr_float(n, "weight_decay", 0);
	int64_t count = n->in[0]->numel;
	void *bufp = mom != 0 && n->nin > 2 ? n->in[2]->data : NULL;
	if (cx->pending && taprt_comm_wait(cx) != 0) /* the gradients' started all-reduces */
		return;
#define BODY(T)                                                                 \
	{                                                                       \
		T d = gr[i];                                                    \
		if (wd != 0)                                                    \
			d = d + (T)wd * w[i];                                   \
		if (bufp) {                                                     \
			T *b = bufp;                                            \
			b[i] = b[i] * (T)mom + d;                               \
			d = b[i];                                               \
		}                                                               \
		w[i] = w[i] + (T)(-lr) * d;                                     \
	}
	if (n->in[0]->dtype == TAPRT_F64)
		OPT_LOOP(double);
	else
		OPT_LOOP(float);
#undef BODY
}

/* One dtype's AdamW loop: restrict pointers and the dtype's own sqrt (a
 * float's square root through double rounds to the same float), so the
 * loop vectorizes. */
#define ADAMW_LOOP(T, SQRT)                                                     \
	do {                                                                    \
		T *restrict w = n->in[0]->data, *restrict m = mp, *restrict v = vp; \
		const T *restrict g = n->in[1]->data;                           \
		const T decay = (T)(1 - lr * wd), c1 = (T)b1, c1m = (T)(1 - b1); \
		const T c2 = (T)b2, c2m = (T)(1 - b2), bc = (T)bc2, e = (T)eps;  \
		const T ss = (T)(-step_size);                                   \
		for (int64_t i = 0; i < count; i++) {                           \
			T x = w[i] * decay;                                     \
			T mi = m[i] * c1 + g[i] * c1m;                          \
			T vi = v[i] * c2 + g[i] * g[i] * c2m;                   \
			m[i] = mi;                                              \
			v[i] = vi;                                              \
			w[i] = x + ss * (mi / (SQRT(vi) / bc + e));             \
		}                                                               \
	} while (0)

void
taprt_op_AdamW(taprt_ctx *cx, const taprt_node *n)
{
	double lr = taprt_attr_float(n, "lr", 1e-3), b1 = taprt_attr_float(n, "beta1", 0.9);
	double b2 = taprt_attr_float(n, "beta2", 0.999), eps = taprt_attr_float(n, "eps", 1e-8);
	double wd = taprt_attr_float(n, "weight_decay", 1e-2);
	double t = cx->step > 0 ? (double)cx->step : 1;
	double step_size = lr / (1 - pow(b1, t)), bc2 = sqrt(1 - pow(b2, t));
	int64_t count = n->in[0]->numel;
	void *mp = n->in[2]->data, *vp = n->in[3]->data;
	if (cx->pending && taprt_comm_wait(cx) != 0)
		return;
	if (n->in[0]->dtype == TAPRT_F64)
		ADAMW_LOOP(double, sqrt);
	else
		ADAMW_LOOP(float, sqrtf);
}

/*
 * GradAccumulate(sum, dW) -> sum, in place: the sum of a weight's gradient
 * over the micro-batches of a step.  The stage's first backward of the
 * step (cx->first_backward) starts the sum with dW, the others add theirs,
 * in micro-batch order, so the result is the same on every run.
 */
void
taprt_op_GradAccumulate(taprt_ctx *cx, const taprt_node *n)
{
	int64_t count = n->in[0]->numel;
	if (n->in[0]->dtype == TAPRT_F64) {
		double *s = n->in[0]->data;
		const double *d = n->in[1]->data;
		for (int64_t i = 0; i < count; i++)
			s[i] = cx->first_backward ? d[i] : s[i] + d[i];
	} else {
		float *s = n->in[0]->data;
		const float *d = n->in[1]->data;
		for (int64_t i = 0; i < count; i++)
			s[i] = cx->first_backward ? d[i] : s[i] + d[i];
	}
}
