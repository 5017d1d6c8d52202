/*
 * cost.c - what a node costs: floating-point operations and bytes moved.
 *
 * The shared vocabulary of the cost models (TAP's plan cost, the stage
 * times of pipe-shard and stage-assign, plan.json's predictions).  Counts
 * are from static shapes only; a multiply-add is two operations.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/einsum.h"

/* Einsum: a multiply-add per operand pair for every combination of the
 * labels' values (2 * batch * M * N * K for a matrix product). */
static int64_t
einsum_flops(Graph *g, NodeId id)
{
	Node *n = &g->nodes[id];
	const char *eq = ir_attr_str(g, id, "equation", NULL);
	int rank[EINSUM_MAX_IN];
	const int64_t *dims[EINSUM_MAX_IN];
	if (!eq || n->nin > EINSUM_MAX_IN)
		return 0;
	for (int i = 0; i < n->nin; i++) {
		if (n->in[i] == IR_NONE || g->tensors[n->in[i]].rank < 0)
			return 0;
		rank[i] = g->tensors[n->in[i]].rank;
		dims[i] = g->tensors[n->in[i]].dims;
	}
	einsum_eq e;
	int64_t size[EINSUM_LABELS], all = 1;
	char err[200];
	if (einsum_parse(eq, n->nin, rank, &e, err, sizeof err) ||
	    einsum_sizes(&e, dims, size, err, sizeof err))
		return 0;
	for (int l = 0; l < EINSUM_LABELS; l++)
		if (size[l] > 0 && __builtin_mul_overflow(all, size[l], &all))
			return INT64_MAX / 4;
	return n->nin > 1 ? 2 * (n->nin - 1) * all : all;
}

/* RNN, GRU, LSTM: per step and direction the products with W and R, and
 * about ten operations per gate element (activations, state update).
 * From the inputs, since any output may be omitted. */
static int64_t
rnn_flops(Graph *g, Node *n)
{
	Tensor *x = &g->tensors[n->in[0]], *w = &g->tensors[n->in[1]], *r = &g->tensors[n->in[2]];
	if (x->rank != 3 || w->rank != 3 || r->rank != 3)
		return 0;
	double steps = (double)x->dims[0] * (double)x->dims[1]; /* T * B in either layout */
	double gates = (double)w->dims[0] * (double)w->dims[1]; /* D * G * H */
	double f = steps * gates * (2.0 * ((double)w->dims[2] + (double)r->dims[2]) + 10.0);
	return f < 9e18 ? (int64_t)f : INT64_MAX;
}

int64_t
ir_node_flops(Graph *g, NodeId id)
{
	Node *n = &g->nodes[id];
	if (n->op == OP_RNN || n->op == OP_GRU || n->op == OP_LSTM)
		return n->nin >= 3 && n->in[0] != IR_NONE && n->in[1] != IR_NONE &&
		    n->in[2] != IR_NONE ? rnn_flops(g, n) : 0;
	Tensor *y = n->nout && n->out[0] != IR_NONE ? &g->tensors[n->out[0]] : NULL;
	Tensor *a = n->nin && n->in[0] != IR_NONE ? &g->tensors[n->in[0]] : NULL;
	if (!y || !a || y->rank < 0 || a->rank < 0)
		return 0;
	switch (n->op) {
	case OP_AllReduce: case OP_AllGather: case OP_ReduceScatter: case OP_Shard:
		return 0;               /* communication: costed by tp-plan */
	case OP_MatMul: case OP_FusedMatMul: case OP_MatMulInteger: case OP_QLinearMatMul:
		return 2 * ir_numel(y) * (a->rank ? a->dims[a->rank - 1] : 1);
	case OP_Gemm: {
		int64_t k = ir_attr_int(g, id, "transA", 0) ? a->dims[0] : a->dims[a->rank - 1];
		return 2 * ir_numel(y) * k;
	}
	case OP_FusedSqueezeExcite: {
		/* the mean and the scale over x, the two matrix-vector products */
		Tensor *w = &g->tensors[n->in[1]];
		return 2 * ir_numel(y) + 4 * ir_numel(w) * (a->rank ? a->dims[0] : 1);
	}
	case OP_FusedConvDw: {
		/* the 1x1 over every input pixel, then the depthwise taps */
		Tensor *w1 = &g->tensors[n->in[1]], *w = &g->tensors[n->in[2]];
		int64_t px = a->rank > 1 ? ir_numel(a) / a->dims[1] : 0, k = 1;
		for (int i = 2; i < w->rank; i++)
			k *= w->dims[i];
		return 2 * px * ir_numel(w1) + 2 * ir_numel(y) * k;
	}
	case OP_Conv: case OP_FusedConv: case OP_ConvInteger: case OP_QLinearConv: {
		Tensor *w = &g->tensors[n->in[n->op == OP_QLinearConv ? 3 : 1]];
		int64_t k = 1;
		for (int i = 1; i < w->rank; i++)
			k *= w->dims[i];
		return 2 * ir_numel(y) * k;
	}
	case OP_ConvTranspose: {
		/* every input pixel meets every tap of its group's filters */
		Tensor *w = &g->tensors[n->in[1]];
		int64_t k = 1;
		for (int i = 1; i < w->rank; i++)
			k *= w->dims[i];
		return 2 * ir_numel(a) * k;
	}
	case OP_ConvGradWeight: {
		/* the Conv's products again: every dY element meets a filter's taps */
		Tensor *dy = &g->tensors[n->in[1]];
		int64_t k = 1;
		for (int i = 1; i < y->rank; i++)
			k *= y->dims[i];
		return 2 * ir_numel(dy) * k;
	}
	case OP_Resize: case OP_Upsample: {
		/* taps per output element: 1, 2 per axis (linear), 4 (cubic) */
		const char *m = ir_attr_str(g, id, "mode", "nearest");
		int64_t taps = !strcmp(m, "linear") ? 4 : !strcmp(m, "cubic") ? 16 : 1;
		return 2 * taps * ir_numel(y);
	}
	case OP_Softmax: case OP_LogSoftmax: case OP_Hardmax: case OP_LayerNormalization:
	case OP_FusedLayerNorm: case OP_FusedSoftmax:
	case OP_InstanceNormalization: case OP_SoftmaxGrad: case OP_LogSoftmaxGrad:
		return 5 * ir_numel(y);
	case OP_LayerNormalizationGrad:
		return 10 * ir_numel(a);        /* dY; output 0 may be absent */
	case OP_FusedGelu: case OP_GeluGrad: /* erf's polynomial and the products */
		return 20 * ir_numel(a);
	case OP_Einsum:
		return einsum_flops(g, id);
	case OP_TopK: {
		/* a sort of each line: n log2 n comparisons */
		int64_t axis = ir_attr_int(g, id, "axis", -1), d;
		int lg = 1;
		axis = axis < 0 ? axis + a->rank : axis;
		d = axis >= 0 && axis < a->rank ? a->dims[axis] : 1;
		while (lg < 62 && (INT64_C(1) << lg) < d)
			lg++;
		return ir_numel(a) * lg;
	}
	default:
		return ir_op_kind(n->op) == OPK_REDUCE ? ir_numel(a) : ir_numel(y);
	}
}

int64_t
ir_node_bytes(Graph *g, NodeId id)
{
	Node *n = &g->nodes[id];
	int64_t b = 0;
	for (int i = 0; i < n->nin; i++)
		if (n->in[i] != IR_NONE && g->tensors[n->in[i]].rank >= 0)
			b += ir_nbytes(&g->tensors[n->in[i]]);
	for (int i = 0; i < n->nout; i++)
		if (n->out[i] != IR_NONE && g->tensors[n->out[i]].rank >= 0)
			b += ir_nbytes(&g->tensors[n->out[i]]);
	return b;
}

/* ------------------------------------------------- the model's constants */

void
ir_cost_defaults(CostModel *m)
{
	/* One CPU core with OpenBLAS, ranks as threads of one process, and
	 * 10 Gb/s Ethernet between nodes: the default backend's machine.
	 * docs/tensor-parallel.md explains each and how to set GPU values. */
	*m = (CostModel){
		.flops = 5e10,
		.bw_intra = 1e10,
		.bw_inter = 1.25e9,
		.latency = 5e-6,
		.memory = 16.0 * (1 << 30),
		.mem_bw = 1e10,
		.train = false,
	};
}

bool
ir_cost_parse(CostModel *m, const char *spec, const char **bad)
{
	static char item[128];
	for (const char *p = spec; *p;) {
		size_t n = strcspn(p, ",");
		snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item - 1 ? n : sizeof item - 1), p);
		*bad = item;
		char *eq = strchr(item, '=');
		if (!eq)
			return false;
		*eq = 0;
		const char *key = item, *val = eq + 1;
		if (strcmp(key, "objective") == 0) {
			if (strcmp(val, "train") == 0)
				m->train = true;
			else if (strcmp(val, "infer") == 0)
				m->train = false;
			else
				return *eq = '=', false;
		} else {
			char *end;
			double v = strtod(val, &end);
			double *dst = strcmp(key, "flops") == 0 ? &m->flops :
			    strcmp(key, "bw_intra") == 0 ? &m->bw_intra :
			    strcmp(key, "bw_inter") == 0 ? &m->bw_inter :
			    strcmp(key, "latency") == 0 ? &m->latency :
			    strcmp(key, "op_latency") == 0 ? &m->op_latency :
			    strcmp(key, "mem_bw") == 0 ? &m->mem_bw :
			    strcmp(key, "memory") == 0 ? &m->memory : NULL;
			bool zero_ok = dst == &m->latency || dst == &m->op_latency || dst == &m->mem_bw;
			if (!dst || end == val || *end || !isfinite(v) || v < 0 || (v == 0 && !zero_ok))
				return *eq = '=', false;
			*dst = v;
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return true;
}

double
ir_cost_allreduce(const CostModel *m, int n, double bw, double bytes)
{
	return n <= 1 ? 0 : m->latency + 2.0 * (n - 1) / n * bytes / bw;
}

double
ir_cost_allgather(const CostModel *m, int n, double bw, double bytes)
{
	return n <= 1 ? 0 : m->latency + 1.0 * (n - 1) / n * bytes / bw;
}
