/*
 * costmodel.c - the cost model of a whole plan (costmodel.h has the
 * equations): per-subgraph costs under TAP's plan for each TP degree, the
 * rates of each stage's devices, and a candidate's predicted iteration.
 *
 * Needs: pipe-shard's subgraphs when pp > 1 is to be costed (else the graph
 * is one layer); the cluster in Graph.cluster; tp_choose for TP degrees
 * above 1.  Stage cuts are memoized on everything they depend on (the
 * items, the stage rates, the memory limits), so candidates that differ
 * only where it cannot matter (a placement with the same links) share one
 * pipe_dp_stages run.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/costmodel.h"
#include "passes/pipeline.h"
#include "passes/tp.h"

static void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		die("out of memory");
	return p;
}

/* Per subgraph and stage: FLOPs, TP ring bytes, collectives, operator
 * calls, bytes streamed. */
#define NCOMP 5

/* ------------------------------------------------------------ memo */

typedef struct {
	uint64_t h1, h2;                /* 0, 0: empty */
	int at;                         /* offset of the cut in pool, -1: no partition */
	double obj;
} MemoEntry;

struct CostMemo {
	int cap, used;
	MemoEntry *e;
	int *pool;
	size_t npool, cappool;
};

static void
hash_bytes(uint64_t *h1, uint64_t *h2, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		*h1 = (*h1 ^ b[i]) * 0x100000001b3ull;          /* FNV-1a */
		*h2 = (*h2 + b[i] + 1) * 0x9e3779b97f4a7c15ull; /* a second, independent mix */
		*h2 ^= *h2 >> 29;
	}
}

static MemoEntry *
memo_find(CostMemo *m, uint64_t h1, uint64_t h2)
{
	if (!m->cap) {
		m->cap = 1024;
		m->e = xcalloc(m->cap, sizeof *m->e);
	}
	if (2 * (m->used + 1) > m->cap) {
		CostMemo n = {.cap = 2 * m->cap};
		n.e = xcalloc(n.cap, sizeof *n.e);
		for (int i = 0; i < m->cap; i++)
			if (m->e[i].h1 || m->e[i].h2) {
				size_t j = m->e[i].h1 & (n.cap - 1);
				while (n.e[j].h1 || n.e[j].h2)
					j = (j + 1) & (n.cap - 1);
				n.e[j] = m->e[i];
			}
		free(m->e);
		m->e = n.e;
		m->cap = n.cap;
	}
	size_t j = h1 & (m->cap - 1);
	while ((m->e[j].h1 || m->e[j].h2) && !(m->e[j].h1 == h1 && m->e[j].h2 == h2))
		j = (j + 1) & (m->cap - 1);
	return &m->e[j];
}

/* ------------------------------------------------------------ setup */

void
cm_init(CostCtx *m, Graph *g)
{
	memset(m, 0, sizeof *m);
	m->g = g;
	m->c = &g->cluster;
	m->train = g->cost.train;
	m->batch = 1;
	for (int i = 0; i < g->ninputs; i++) /* the first input with a dim 0 (not a flag) */
		if (g->tensors[g->inputs[i]].rank > 0) {
			m->batch = g->tensors[g->inputs[i]].dims[0];
			break;
		}
	if (m->batch < 1)
		m->batch = 1;
	m->nsub = 1;
	for (NodeId n = 0; n < g->nnodes; n++)
		if (g->nodes[n].subgraph != IR_NONE && g->nodes[n].subgraph + 1 > m->nsub)
			m->nsub = g->nodes[n].subgraph + 1;
	m->memo = xcalloc(1, sizeof *m->memo);
	m->dev = xcalloc(m->c->ndevices + 1, sizeof *m->dev);
	m->rate = xcalloc(m->c->ndevices + 1, sizeof *m->rate);
}

void
cm_free(CostCtx *m)
{
	for (int i = 0; i < m->ntp; i++)
		free(m->sub[i]);
	if (m->memo) {
		free(m->memo->e);
		free(m->memo->pool);
		free(m->memo);
	}
	free(m->dev);
	free(m->rate);
	memset(m, 0, sizeof *m);
}

static int
sub_of(const Graph *g, NodeId n)
{
	return g->nodes[n].subgraph == IR_NONE ? 0 : g->nodes[n].subgraph;
}

static bool
is_split(const Layout *l)
{
	return l->kind == L_S;
}

/* The costs of every subgraph when TAP's plan for tp is applied: route the
 * plan with unit constants (1 FLOP/s, 1 byte/s, no latency), so the
 * evaluation's compute is FLOPs and its communication ring bytes. */
static void
measure(CostCtx *m, int tp, SubCost *sc)
{
	Graph *g = m->g;
	int nsub = m->nsub;
	int *seen = xcalloc(g->ntensors + 1, sizeof *seen); /* weight: last subgraph + 1 counted */
	double *per = xcalloc(g->ntensors + 1, sizeof *per); /* one rank's bytes of each value */
	ir_reindex(g);
	TpState st, *s = &st;
	CostModel unit = {.flops = 1, .bw_intra = 1, .bw_inter = 1, .latency = 0, .memory = 1,
		.train = m->train};
	if (tp > 1) {
		tp_choose(g, tp, &g->cost, 0, false);
		tp_state_init(s, g, tp, &unit);
		s->bw = 1;
		int *greg;
		tp_regions(s, &greg);
		free(greg);
	}
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		SubCost *x = &sc[sub_of(g, n)];
		int j = sub_of(g, n);
		bool call = !ir_op_is_view(nd->op) && !ir_op_is_comm(nd->op);
		x->nops += call; /* a call per micro-batch */
		if (tp > 1) {
			double c0 = s->compute, m0 = s->comm;
			int k0 = s->ncoll;
			if (!tp_eval_node(s, n, NULL))
				die("costmodel: TAP's plan for tp %d does not route at '%s'", tp, nd->name);
			for (int i = 0; i < nd->nin; i++) {
				TensorId t = nd->in[i];
				if (t == IR_NONE)
					continue;
				double b = (double)ir_nbytes(&g->tensors[t]) / (is_split(&s->need[i]) ? tp : 1);
				bool w = g->tensors[t].kind == TK_WEIGHT;
				*(w ? &x->wread : &x->bytes) += call ? b : 0;
				if (w && seen[t] != j + 1) {
					seen[t] = j + 1;
					x->weight_bytes += b;
				}
			}
			for (int o = 0; o < nd->nout; o++) {
				TensorId t = nd->out[o];
				int bits;
				if (t == IR_NONE)
					continue;
				bool crosses = tp_crosses(s, t);
				if (crosses)
					tp_convert(s, t, s->lay[t], (Layout){L_R, 0, 1}, &bits);
				per[t] = (double)ir_nbytes(&g->tensors[t]) /
				    (!crosses && is_split(&s->lay[t]) ? tp : 1);
				double b = (double)ir_nbytes(&g->tensors[t]) / (is_split(&s->lay[t]) ? tp : 1);
				x->act_bytes += b;
				x->bytes += call ? b : 0;
			}
			x->flops += s->compute - c0;
			x->coll_bytes += s->comm - m0;
			x->ncoll += s->ncoll - k0;
		} else {
			x->flops += (double)ir_node_flops(g, n);
			for (int i = 0; i < nd->nin; i++) {
				TensorId t = nd->in[i];
				if (t != IR_NONE && call)
					*(g->tensors[t].kind == TK_WEIGHT ? &x->wread : &x->bytes) +=
					    (double)ir_nbytes(&g->tensors[t]);
				if (t != IR_NONE && g->tensors[t].kind == TK_WEIGHT && seen[t] != j + 1) {
					seen[t] = j + 1;
					x->weight_bytes += (double)ir_nbytes(&g->tensors[t]);
				}
			}
			for (int o = 0; o < nd->nout; o++)
				if (nd->out[o] != IR_NONE) {
					per[nd->out[o]] = (double)ir_nbytes(&g->tensors[nd->out[o]]);
					x->act_bytes += per[nd->out[o]];
					x->bytes += call ? per[nd->out[o]] : 0;
				}
		}
	}
	/* what crosses each cut: a value from subgraph j read in a later one */
	if (nsub > 1)
		for (TensorId t = 0; t < g->ntensors; t++) {
			NodeId p = g->tensors[t].producer;
			if (g->tensors[t].kind != TK_VALUE || g->nusers[t] == 0)
				continue;
			int first = p != IR_NONE ? sub_of(g, p) : nsub, last = -1;
			for (int u = 0; u < g->nusers[t]; u++) {
				int k = sub_of(g, g->users[t][u]);
				first = p == IR_NONE && k < first ? k : first;
				last = k > last ? k : last;
			}
			double b = p != IR_NONE ? per[t] : (double)ir_nbytes(&g->tensors[t]);
			for (int c = first; c < last; c++)
				sc[c].cross_bytes += b;
		}
	if (tp > 1)
		tp_state_free(s);
	free(seen);
	free(per);
}

const SubCost *
cm_subcosts(CostCtx *m, int tp)
{
	for (int i = 0; i < m->ntp; i++)
		if (m->tpv[i] == tp)
			return m->sub[i];
	if (m->ntp == (int)(sizeof m->tpv / sizeof *m->tpv))
		die("costmodel: more than %d TP degrees", m->ntp);
	SubCost *sc = xcalloc(m->nsub, sizeof *sc);
	measure(m, tp, sc);
	m->tpv[m->ntp] = tp;
	m->sub[m->ntp++] = sc;
	return sc;
}

/* ------------------------------------------------------------ rates */

static const NodeKind *
kind_of(const Cluster *c, int d)
{
	int k;
	ir_cluster_device(c, d, NULL, &k, NULL);
	return &c->kinds[k];
}

double
cm_ring_bw(const Cluster *c, const int *devs, int n)
{
	double bw = INFINITY;
	for (int i = 0; n > 1 && i < n; i++) {
		double l = ir_cluster_link(c, devs[i], devs[(i + 1) % n]);
		bw = l < bw ? l : bw;
	}
	return bw;
}

void
cm_rates(const Cluster *c, const int *dev, int dp, int tp, int pp, int d, StageRate *r)
{
	int *ring = xcalloc(tp, sizeof *ring);
	for (int s = 0; s < pp; s++) {
		StageRate *x = &r[s];
		*x = (StageRate){.memory = INFINITY};
		for (int e = d < 0 ? 0 : d; e < (d < 0 ? dp : d + 1); e++) {
			double slow = INFINITY, next = INFINITY, stream = INFINITY;
			for (int q = 0; q < tp; q++) {
				int a = dev[(e * pp + s) * tp + q];
				const NodeKind *k = kind_of(c, a);
				slow = k->flops < slow ? k->flops : slow;
				stream = k->mem_bw < stream ? k->mem_bw : stream;
				x->memory = k->memory < x->memory ? k->memory : x->memory;
				ring[q] = a;
				if (s + 1 < pp) {
					double l = ir_cluster_link(c, a, dev[(e * pp + s + 1) * tp + q]);
					next = l < next ? l : next;
				}
			}
			double fs = c->alpha / slow, cs = tp > 1 ? c->beta / cm_ring_bw(c, ring, tp) : 0;
			double ns = s + 1 < pp ? c->beta / next : 0, bs = stream > 0 ? c->alpha / stream : 0;
			x->flop_s = fs > x->flop_s ? fs : x->flop_s;
			x->byte_s = bs > x->byte_s ? bs : x->byte_s;
			x->coll_s = cs > x->coll_s ? cs : x->coll_s;
			x->next_s = ns > x->next_s ? ns : x->next_s;
		}
	}
	free(ring);
}

/* ------------------------------------------------------- evaluation */

/* Micro-batches whose activations a stage holds at once. */
static double
in_flight(bool train, int pp, int s, int M)
{
	if (!train)
		return 1;
	return pp - s < M ? pp - s : M;
}

void
cm_evaluate(CostCtx *m, PlanChoice *p, int *cutout)
{
	const Cluster *c = m->c;
	int dp = p->dp, tp = p->tp, K = p->pp, M = p->micro, n = m->nsub;
	m->evals++;
	p->seconds = -1;
	p->pipeline = p->dpsync = p->memory = 0;
	if (K > n || (int64_t)dp * tp * K > c->ndevices || p->mbs < 1 || M < 1)
		return;
	const SubCost *sc = cm_subcosts(m, tp);
	double scale = (double)p->mbs / (double)m->batch;
	double fm = m->train ? 3 : 1, cmul = m->train ? 2 : 1, wf = m->train ? 4 : 1;
	double lat = c->latency;
	ir_place(c, dp, tp, K, p->place, m->dev);
	StageRate *r = m->rate;
	cm_rates(c, m->dev, dp, tp, K, -1, r);

	/* the stage cut, on the worst replica's rates */
	double *item = xcalloc((size_t)n * NCOMP, sizeof *item);
	double *coef = xcalloc((size_t)K * NCOMP, sizeof *coef);
	double *cutc = xcalloc((size_t)n * (K > 1 ? K - 1 : 1), sizeof *cutc);
	double *mi = xcalloc((size_t)n * 2, sizeof *mi), *mc = xcalloc((size_t)K * 2, sizeof *mc);
	double *cap = xcalloc(K, sizeof *cap);
	for (int i = 0; i < n; i++) {
		item[i * NCOMP] = sc[i].flops * scale;
		item[i * NCOMP + 1] = sc[i].coll_bytes * scale;
		item[i * NCOMP + 2] = sc[i].ncoll;
		item[i * NCOMP + 3] = sc[i].nops;
		item[i * NCOMP + 4] = sc[i].bytes * scale + sc[i].wread;
		mi[i * 2] = sc[i].weight_bytes;
		mi[i * 2 + 1] = sc[i].act_bytes * scale;
		for (int j = 0; j + 1 < K; j++)
			cutc[i * (K - 1) + j] = cmul * (lat + sc[i].cross_bytes * scale * r[j].next_s);
	}
	for (int j = 0; j < K; j++) {
		coef[j * NCOMP] = r[j].flop_s * fm;
		coef[j * NCOMP + 1] = r[j].coll_s * cmul;
		coef[j * NCOMP + 2] = tp > 1 ? lat * cmul : 0;
		coef[j * NCOMP + 3] = c->op_latency * fm;
		coef[j * NCOMP + 4] = r[j].byte_s * fm;
		mc[j * 2] = wf;
		mc[j * 2 + 1] = in_flight(m->train, K, j, M);
		cap[j] = r[j].memory;
	}
	PipeProblem pr = {.n = n, .k = K, .micro = M, .ncomp = NCOMP, .item = item, .coef = coef,
		.cut = K > 1 ? cutc : NULL, .nmem = 2, .mem_item = mi, .mem_coef = mc, .mem_cap = cap,
		.max_bounds = 64};
	uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
	int key[3] = {n, K, M};
	hash_bytes(&h1, &h2, key, sizeof key);
	hash_bytes(&h1, &h2, item, sizeof *item * n * NCOMP);
	hash_bytes(&h1, &h2, coef, sizeof *coef * K * NCOMP);
	hash_bytes(&h1, &h2, cutc, sizeof *cutc * n * (K > 1 ? K - 1 : 0));
	hash_bytes(&h1, &h2, mi, sizeof *mi * n * 2);
	hash_bytes(&h1, &h2, mc, sizeof *mc * K * 2);
	hash_bytes(&h1, &h2, cap, sizeof *cap * K);
	if (!h1 && !h2)
		h2 = 1;
	CostMemo *memo = m->memo;
	MemoEntry *e = memo_find(memo, h1, h2);
	if (!e->h1 && !e->h2) {
		int *cut = xcalloc(K + 1, sizeof *cut);
		double obj = pipe_dp_stages(&pr, cut);
		m->cuts++;
		e = memo_find(memo, h1, h2); /* (no growth in between: same slot) */
		*e = (MemoEntry){.h1 = h1, .h2 = h2, .at = -1, .obj = obj};
		memo->used++;
		if (obj >= 0) {
			if (memo->npool + K + 1 > memo->cappool) {
				memo->cappool = 2 * (memo->npool + K + 1) + 1024;
				if (!(memo->pool = realloc(memo->pool, sizeof *memo->pool * memo->cappool)))
					die("out of memory");
			}
			e->at = (int)memo->npool;
			memcpy(memo->pool + memo->npool, cut, sizeof *cut * (K + 1));
			memo->npool += K + 1;
		}
		free(cut);
	}
	int at = e->at;
	free(item);
	free(coef);
	free(cutc);
	free(mi);
	free(mc);
	if (at < 0) { /* no cut fits in memory: what an even share would need at least */
		double need = 0;
		for (int i = 0; i < n; i++)
			need += sc[i].weight_bytes * wf + sc[i].act_bytes * scale * in_flight(m->train, K,
			    K - 1, M);
		p->memory = need / K;
		free(cap);
		return;
	}
	const int *cut = memo->pool + at;
	if (cutout)
		memcpy(cutout, cut, sizeof *cut * (K + 1));

	/* per stage: FLOPs, ring bytes, collectives, weights, activations, and
	 * the bytes to the next stage */
	double *F = xcalloc(K, sizeof *F), *V = xcalloc(K, sizeof *V), *N = xcalloc(K, sizeof *N);
	double *O = xcalloc(K, sizeof *O), *Y = xcalloc(K, sizeof *Y);
	double *W = xcalloc(K, sizeof *W), *A = xcalloc(K, sizeof *A), *X = xcalloc(K, sizeof *X);
	for (int j = 0; j < K; j++) {
		for (int i = cut[j]; i < cut[j + 1]; i++) {
			F[j] += sc[i].flops * scale;
			V[j] += sc[i].coll_bytes * scale;
			N[j] += sc[i].ncoll;
			O[j] += sc[i].nops;
			Y[j] += sc[i].bytes * scale + sc[i].wread;
			W[j] += sc[i].weight_bytes;
			A[j] += sc[i].act_bytes * scale;
		}
		X[j] = sc[cut[j + 1] - 1].cross_bytes * scale;
		double mem = W[j] * wf + A[j] * in_flight(m->train, K, j, M);
		p->memory = mem > p->memory ? mem : p->memory;
		if (mem > cap[j]) {
			free(cap);
			free(F), free(V), free(N), free(O), free(Y), free(W), free(A), free(X);
			return;
		}
	}
	/* eq. 4 for every replica's pipeline, on its own devices */
	double worst = 0;
	for (int d = 0; d < dp; d++) {
		cm_rates(c, m->dev, dp, tp, K, d, r);
		double most = 0, sum = 0;
		for (int j = 0; j < K; j++) {
			double t = (F[j] * r[j].flop_s + O[j] * c->op_latency + Y[j] * r[j].byte_s) * fm +
			    (tp > 1 ? V[j] * r[j].coll_s * cmul + N[j] * lat * cmul : 0);
			most = t > most ? t : most;
			sum += t;
			if (j + 1 < K)
				sum += cmul * (lat + X[j] * r[j].next_s);
		}
		double T = (M - 1) * most + sum;
		worst = T > worst ? T : worst;
	}
	p->pipeline = worst;
	/* DP sync: each stage's gradients over each of its DP groups' rings */
	if (m->train && dp > 1) {
		int *ring = xcalloc(dp, sizeof *ring);
		for (int j = 0; j < K; j++)
			for (int q = 0; q < tp; q++) {
				for (int d = 0; d < dp; d++)
					ring[d] = m->dev[(d * K + j) * tp + q];
				double t = lat + c->beta * 2.0 * (dp - 1) / dp * W[j] / cm_ring_bw(c, ring, dp);
				p->dpsync = t > p->dpsync ? t : p->dpsync;
			}
		free(ring);
	}
	p->seconds = p->pipeline + p->dpsync;
	free(cap);
	free(F), free(V), free(N), free(O), free(Y), free(W), free(A), free(X);
}
