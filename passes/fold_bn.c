/*
 * fold_bn.c - fold an inference BatchNormalization into the Conv before it.
 *
 * Needs: shaped graph; runs after planning (passes/fuse.h).  Conv(X, W, B)
 * followed by BatchNormalization(scale, bias, mean, var, epsilon) that only
 * it reads becomes Conv(X, W', B') with, per output channel m,
 *
 *     s = scale[m] / sqrt(var[m] + epsilon)
 *     W'[m, ...] = W[m, ...] * s        B'[m] = (B[m] - mean[m]) * s + bias[m]
 *
 * computed here, at compile time, in double and rounded once to f32 (the
 * arithmetic onnxruntime's fusion does).  W' and B' are new weights whose
 * bytes tapc holds (inline data: the backend embeds big ones, consts.bin);
 * the old W goes when nothing else reads it.  Only f32, whole (unsliced)
 * parameters, BN in inference form (one output, no training_mode): anything
 * else is left as it was.  Guarantees: the same function, one pass over the
 * activations less per folded BN.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "passes/fuse.h"

/* A weight's or constant's bytes, whole (unsliced) and available at
 * compile time, or NULL (fuse.h). */
const void *
fuse_whole(Graph *g, TensorId t)
{
	if (t == IR_NONE)
		return NULL;
	Tensor *tt = &g->tensors[t];
	if ((tt->kind != TK_WEIGHT && tt->kind != TK_CONST) || tt->slice_axis >= 0 || tt->rank < 0)
		return NULL;
	return ir_weight_bytes(g, t);
}

/* A parameter a fusion can read at compile time: f32, whole, numel
 * elements, its bytes available (fuse.h). */
const float *
fuse_param(Graph *g, TensorId t, int64_t numel)
{
	if (t == IR_NONE || g->tensors[t].dtype != DT_F32 || g->tensors[t].rank < 0 ||
	    ir_numel(&g->tensors[t]) != numel)
		return NULL;
	return fuse_whole(g, t);
}

/* A name no tensor has: base + suffix, then base + suffix + ".N" (fuse.h). */
const char *
fuse_fresh_name(Graph *g, const char *base, const char *suffix)
{
	size_t n = strlen(base) + strlen(suffix) + 24;
	char *buf = malloc(n);
	if (!buf)
		die("out of memory");
	for (int k = 0;; k++) {
		if (k)
			snprintf(buf, n, "%s%s.%d", base, suffix, k);
		else
			snprintf(buf, n, "%s%s", base, suffix);
		bool taken = false;
		for (TensorId t = 0; t < g->ntensors && !taken; t++)
			taken = strcmp(g->tensors[t].name, buf) == 0;
		if (!taken)
			break;
	}
	const char *s = ir_strdup(&g->arena, buf);
	free(buf);
	return s;
}

/* A new inline f32 weight of the given shape holding data (arena bytes;
 * fuse.h). */
TensorId
fuse_new_weight(Graph *g, const char *name, int rank, const int64_t *dims, float *data)
{
	TensorId t = ir_add_tensor(g, name, TK_WEIGHT, DT_F32);
	Tensor *tt = &g->tensors[t];
	ir_set_shape(tt, rank, dims);
	tt->data = DATA_INLINE;
	tt->bytes = data;
	tt->length = ir_nbytes(tt);
	tt->slice_axis = -1;
	tt->slice_parts = 1;
	tt->slice_blocks = 1;
	return t;
}

static bool
fold_one(Graph *g, NodeId bn)
{
	Node *b = &g->nodes[bn];
	if (b->nin != 5 || ir_attr_int(g, bn, "training_mode", 0))
		return false;
	for (int i = 1; i < b->nout; i++)
		if (b->out[i] != IR_NONE)
			return false;
	TensorId x = b->in[0];
	NodeId cv = fuse_producer(g, x, OP_Conv);
	if (cv == IR_NONE || fuse_sole_user(g, x) != bn || !fuse_same_place(g, cv, bn))
		return false;
	Node *c = &g->nodes[cv];
	TensorId w = c->in[1], cb = c->nin > 2 ? c->in[2] : IR_NONE;
	Tensor *wt = &g->tensors[w];
	if (wt->rank < 1 || g->tensors[x].dtype != DT_F32)
		return false;
	int64_t M = wt->dims[0], per = M ? ir_numel(wt) / M : 0;
	const float *W = fuse_param(g, w, ir_numel(wt));
	const float *B = cb != IR_NONE ? fuse_param(g, cb, M) : NULL;
	const float *sc = fuse_param(g, b->in[1], M), *bi = fuse_param(g, b->in[2], M);
	const float *mu = fuse_param(g, b->in[3], M), *var = fuse_param(g, b->in[4], M);
	if (!W || (cb != IR_NONE && !B) || !sc || !bi || !mu || !var)
		return false;
	double eps = ir_attr_float(g, bn, "epsilon", 1e-5f);
	float *w2 = ir_alloc(&g->arena, sizeof *w2 * (size_t)(ir_numel(wt) ? ir_numel(wt) : 1));
	float *b2 = ir_alloc(&g->arena, sizeof *b2 * (size_t)(M ? M : 1));
	for (int64_t m = 0; m < M; m++) {
		double s = (double)sc[m] / sqrt((double)var[m] + eps);
		for (int64_t i = 0; i < per; i++)
			w2[m * per + i] = (float)((double)W[m * per + i] * s);
		b2[m] = (float)(((B ? (double)B[m] : 0.0) - (double)mu[m]) * s + (double)bi[m]);
	}
	/* new tensors may move g->tensors: copy what is needed first */
	int rank = wt->rank;
	int64_t dims[IR_MAX_RANK], bd[1] = {M};
	memcpy(dims, wt->dims, sizeof dims);
	const char *wname = wt->name, *bname = g->tensors[b->in[2]].name;
	TensorId in[3] = {c->in[0], IR_NONE, IR_NONE};
	in[1] = fuse_new_weight(g, fuse_fresh_name(g, wname, "|bn"), rank, dims, w2);
	in[2] = fuse_new_weight(g, fuse_fresh_name(g, bname, "|bn"), 1, bd, b2);
	fuse_set_inputs(g, cv, 3, in);
	/* the Conv now computes what the BN did, in the BN's output */
	c->out[0] = b->out[0];
	g->tensors[b->out[0]].producer = cv;
	b->dead = true;
	return true;
}

bool
pass_fold_bn(Graph *g, PassCtx *cx)
{
	(void)cx;
	return fuse_each(g, OP_BatchNormalization, OP_BatchNormalization, fold_one);
}
