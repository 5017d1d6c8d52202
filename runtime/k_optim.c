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
 * cx->step.  Needs nothing but libm.
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
	(void)cx;
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
#define BODY(T)                                                                 \
	{                                                                       \
		T *m = mp, *v = vp, g = gr[i];                                  \
		w[i] = w[i] * (T)(1 - lr * wd);                                 \
		m[i] = m[i] * (T)b1 + g * (T)(1 - b1);                          \
		v[i] = v[i] * (T)b2 + g * g * (T)(1 - b2);                      \
		T denom = sqrt(v[i]) / (T)bc2 + (T)eps;                         \
		w[i] = w[i] + (T)(-step_size) * (m[i] / denom);                 \
	}
	if (n->in[0]->dtype == TAPRT_F64)
		OPT_LOOP(double);
	else
		OPT_LOOP(float);
#undef BODY
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
