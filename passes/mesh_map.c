/*
 * mesh_map.c - the planner: choose the data, tensor and pipeline degrees,
 * the micro-batch size and count, and which device runs which rank, by
 * AMP's cost model (passes/costmodel.c) and search (AMP §4.4, Algorithm 1).
 *
 * The space: every dp x tp x pp = the cluster's devices with pp at most
 * pipe-shard's subgraphs and dp dividing the batch B; every micro-batch
 * size b dividing a replica's B / dp (M = B / (dp b) micro-batches); every
 * placement (ir/cluster.c: 6 axis orders x node-major or slot-major device
 * order, the distinct ones).  -dp/-tp/-pp/-microbatches fix their
 * coordinate and the rest is searched.  A space of at most SEARCH_LIMIT
 * candidates is enumerated; a larger one is searched by simulated
 * annealing (Algorithm 1, -anneal-steps, -seed), started from Megatron's
 * choice.  Each candidate's stages are cut by pipe_dp on its own devices'
 * speeds (inside cm_evaluate).  Megatron's rule as AMP §5 states it is
 * costed on the same model as the baseline: tp at most the devices of the
 * smallest node, every micro-batch size, for each the smallest tp x pp
 * that fits in memory (TP first), dp for the rest, ranks tp-major then dp
 * then pp, node by node.
 *
 * A model that mixes samples (BatchNormalization in training mode, a
 * reduction over the batch) or whose batch cannot be followed is planned
 * with dp = 1 and M = 1 only.  A training program (-train) without a
 * pipeline is planned with one micro-batch per replica unless
 * -microbatches asks for gradient accumulation.
 *
 * Needs: pipe-shard's subgraphs (pp > 1 needs them), the cluster in
 * Graph.cluster.  Guarantees: Graph.mesh (degrees), microbatches, device
 * (rank -> device), place and search filled; the graph re-specialized to
 * the micro-batch size (ir_batch_respecialize) when replicas or
 * micro-batches split the batch; subgraph ids cleared when pp = 1.  A
 * graph that already has degrees (an IR file dumped after mesh-map) keeps
 * them: only the placement is searched.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/costmodel.h"

#define SEARCH_LIMIT 100000     /* candidates enumerated; more: annealing */
#define ANNEAL_STEPS 500        /* AMP §5 */
#define ANNEAL_BUDGET 10        /* AMP §5's real-trial budget */

typedef struct {
	int dp, tp, pp;
	int nplace;
	int place[PLACE_COUNT];         /* the distinct placements */
	int nmbs;
	int64_t *mbs;                   /* micro-batch sizes, largest first */
} Triple;

typedef struct {
	Graph *g;
	PassCtx *cx;
	CostCtx cm;
	int N;
	int64_t B;
	bool split;                     /* may the batch be split? */
	int ntri;
	Triple *tri;                    /* every valid triple, forced or not */
	bool *in_space;                 /* [ntri]: allowed by the forced degrees */
	int64_t total;                  /* candidates in the space */
	PlanSearch *rec;
	uint64_t rng;
} Map;

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t
next_rand(Map *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static double
rand01(Map *m)
{
	return (next_rand(m) >> 11) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------------------ space */

static void
distinct_places(Map *m, Triple *t)
{
	int n = t->dp * t->tp * t->pp;
	int *maps = malloc(sizeof *maps * (size_t)n * PLACE_COUNT);
	if (!maps)
		die("out of memory");
	t->nplace = 0;
	for (int p = 0; p < PLACE_COUNT; p++) {
		int *d = maps + (size_t)t->nplace * n;
		ir_place(&m->g->cluster, t->dp, t->tp, t->pp, p, d);
		bool dup = false;
		for (int q = 0; q < t->nplace && !dup; q++)
			dup = memcmp(maps + (size_t)q * n, d, sizeof *d * n) == 0;
		if (!dup)
			t->place[t->nplace++] = p;
	}
	free(maps);
}

/* The divisors of n, largest first, at most max of them (malloc'd). */
static int
divisors(int64_t n, int max, int64_t **out)
{
	int64_t *lo = calloc(max + 1, sizeof *lo), *hi = calloc(max + 1, sizeof *hi);
	int nl = 0, nh = 0;
	if (!lo || !hi)
		die("out of memory");
	for (int64_t d = 1; d * d <= n && nl + nh < max; d++)
		if (n % d == 0) {
			lo[nl++] = d;
			if (d != n / d && nl + nh < max)
				hi[nh++] = n / d;
		}
	/* hi holds the large ones in decreasing order, lo the small increasing */
	int k = 0;
	int64_t *r = calloc(nl + nh + 1, sizeof *r);
	if (!r)
		die("out of memory");
	for (int i = 0; i < nh; i++)
		r[k++] = hi[i];
	for (int i = nl - 1; i >= 0; i--)
		r[k++] = lo[i];
	free(lo);
	free(hi);
	*out = r;
	return k;
}

#define MAX_MBS 4096

/* Every (dp, tp, pp) that covers the devices, with its micro-batch sizes;
 * in_space marks those the forced degrees allow. */
static void
enumerate(Map *m, int nsub)
{
	PassCtx *cx = m->cx;
	int N = m->N, cap = 0;
	for (int pp = 1; pp <= N && pp <= nsub; pp++) {
		if (N % pp)
			continue;
		for (int tp = 1; tp <= N / pp; tp++) {
			if ((N / pp) % tp)
				continue;
			int dp = N / pp / tp;
			if (m->B % dp || (dp > 1 && !m->split))
				continue;
			if (m->ntri == cap) {
				cap = cap ? 2 * cap : 64;
				m->tri = realloc(m->tri, sizeof *m->tri * cap);
				m->in_space = realloc(m->in_space, cap);
				if (!m->tri || !m->in_space)
					die("out of memory");
			}
			Triple *t = &m->tri[m->ntri];
			*t = (Triple){.dp = dp, .tp = tp, .pp = pp};
			int64_t rows = m->B / dp;
			/* training without a pipeline: one micro-batch (more only
			 * accumulate gradients, slower) unless -microbatches says */
			if (m->split && (!cx->train.on || pp > 1 || cx->microbatches > 1)) {
				t->nmbs = divisors(rows, MAX_MBS, &t->mbs);
				while (t->nmbs && rows / t->mbs[t->nmbs - 1] > IR_MAX_DEVICES)
					t->nmbs--; /* too many micro-batches */
			} else {
				t->mbs = calloc(1, sizeof *t->mbs);
				if (!t->mbs)
					die("out of memory");
				t->mbs[t->nmbs++] = rows;
			}
			distinct_places(m, t);
			bool ok = (!cx->dp || cx->dp == dp) && (!cx->tp || cx->tp == tp) &&
			    (!cx->pp || cx->pp == pp);
			if (ok && cx->microbatches) {
				bool any = false;
				for (int i = 0; i < t->nmbs; i++)
					any |= rows / t->mbs[i] == cx->microbatches;
				ok = any;
			}
			m->in_space[m->ntri] = ok;
			if (ok) {
				int nm = cx->microbatches ? 1 : t->nmbs;
				m->total += (int64_t)nm * t->nplace;
			}
			m->ntri++;
		}
	}
}

static PlanChoice
choice(const Triple *t, int64_t mbs, int place, int64_t B)
{
	return (PlanChoice){.dp = t->dp, .tp = t->tp, .pp = t->pp, .mbs = mbs,
		.micro = (int)(B / t->dp / mbs), .place = place};
}

static bool
mbs_allowed(Map *m, const Triple *t, int64_t mbs)
{
	if (m->cx->slice && t->pp > 1 && mbs % 2)
		return false; /* -slice halves the micro-batch */
	if (m->cx->subpipeline && t->tp > 1 && mbs % 2)
		return false; /* so does -subpipeline */
	return !m->cx->microbatches || m->B / t->dp / mbs == m->cx->microbatches;
}

/* Keep the PLAN_TOP best (cheapest first; equal ones in the order found). */
static void
note(Map *m, const PlanChoice *p)
{
	PlanSearch *r = m->rec;
	if (p->seconds < 0)
		return;
	for (int i = 0; i < r->ntop; i++) { /* annealing revisits candidates */
		const PlanChoice *q = &r->top[i]; /* field by field: the struct has padding */
		if (q->dp == p->dp && q->tp == p->tp && q->pp == p->pp && q->mbs == p->mbs &&
		    q->micro == p->micro && q->place == p->place)
			return;
	}
	int at = r->ntop;
	while (at > 0 && r->top[at - 1].seconds > p->seconds)
		at--;
	if (at >= PLAN_TOP)
		return;
	int n = r->ntop < PLAN_TOP ? r->ntop : PLAN_TOP - 1;
	memmove(&r->top[at + 1], &r->top[at], sizeof *r->top * (n - at));
	r->top[at] = *p;
	if (r->ntop < PLAN_TOP)
		r->ntop++;
}

static PlanChoice
evaluate(Map *m, PlanChoice p)
{
	cm_evaluate(&m->cm, &p, NULL);
	note(m, &p);
	return p;
}

static void
exhaustive(Map *m)
{
	for (int i = 0; i < m->ntri; i++) {
		Triple *t = &m->tri[i];
		if (!m->in_space[i])
			continue;
		for (int b = 0; b < t->nmbs; b++) {
			if (!mbs_allowed(m, t, t->mbs[b]))
				continue;
			for (int p = 0; p < t->nplace; p++)
				evaluate(m, choice(t, t->mbs[b], t->place[p], m->B));
		}
	}
}

/* ------------------------------------------------------- Megatron */

/* AMP §5: tp at most the devices of the smallest node; for every
 * micro-batch size the smallest tp x pp that fits (the larger tp first),
 * dp the rest; ranks placed tp, dp, pp from the innermost, node by node.
 * The best over the micro-batch sizes; dp == 0 if nothing fits. */
static PlanChoice
megatron(Map *m)
{
	const Cluster *c = &m->g->cluster;
	int g = c->ndevices;
	for (int k = 0; k < c->nkinds; k++)
		g = c->kinds[k].devices < g ? c->kinds[k].devices : g;
	PlanChoice best = {.seconds = -1};
	int64_t *sizes;
	int nsizes = m->split ? divisors(m->B, MAX_MBS, &sizes) : 1;
	if (!m->split) {
		sizes = calloc(1, sizeof *sizes);
		if (!sizes)
			die("out of memory");
		sizes[0] = m->B;
	}
	for (int bi = 0; bi < nsizes; bi++) {
		int64_t b = sizes[bi];
		/* triples in order of tp x pp, then the larger tp */
		PlanChoice found = {.seconds = -1};
		int fprod = 0;
		for (int i = 0; i < m->ntri; i++) {
			Triple *t = &m->tri[i];
			int prod = t->tp * t->pp;
			if (t->tp > g || (m->B / t->dp) % b || (m->cx->train.on && t->pp == 1 &&
			    m->cx->microbatches <= 1 && m->B / t->dp != b))
				continue;
			if (found.seconds >= 0 && (prod > fprod || (prod == fprod && t->tp <= found.tp)))
				continue;
			PlanChoice p = choice(t, b, 0, m->B);
			cm_evaluate(&m->cm, &p, NULL);
			if (p.seconds >= 0) {
				found = p;
				fprod = prod;
			}
		}
		if (found.seconds >= 0 && (best.seconds < 0 || found.seconds < best.seconds))
			best = found;
	}
	free(sizes);
	if (best.seconds < 0)
		best = (PlanChoice){.seconds = -1};
	return best;
}

/* ------------------------------------------------ simulated annealing */

static int
pick(Map *m, int n)
{
	return n > 1 ? (int)(next_rand(m) % (uint64_t)n) : 0;
}

/* A triple in the space sharing dp (vary tp) or tp (vary dp) with t. */
static int
neighbour(Map *m, int cur, bool vary_tp)
{
	int cand[64], n = 0, seen = 0;
	for (int i = 0; i < m->ntri; i++) {
		if (!m->in_space[i])
			continue;
		bool same = vary_tp ? m->tri[i].dp == m->tri[cur].dp : m->tri[i].tp == m->tri[cur].tp;
		if (!same)
			continue;
		seen++;         /* reservoir sampling: uniform over all matches */
		if (n < 64)
			cand[n++] = i;
		else if (pick(m, seen) < 64)
			cand[pick(m, 64)] = i;
	}
	return n ? cand[pick(m, n)] : cur;
}

static int
triple_of(Map *m, const PlanChoice *p)
{
	for (int i = 0; i < m->ntri; i++)
		if (m->tri[i].dp == p->dp && m->tri[i].tp == p->tp && m->tri[i].pp == p->pp)
			return i;
	return -1;
}

/* Algorithm 1's sample_mbs and sample_tile for the degrees of triple ti:
 * a micro-batch size (half the time the chain's own, else a random one),
 * and the best of the triple's tilings for it
 * (at most PLACE_COUNT cost-model calls, and the tiling is what decides
 * whether a group's links are fast: sampled, it drowns the degrees' signal
 * in noise). */
static PlanChoice
sample(Map *m, int ti, int64_t near)
{
	Triple *t = &m->tri[ti];
	int64_t b = 0;
	if (near > 0 && rand01(m) < 0.5) /* half the time: the size the chain has, or the
					   * nearest smaller one the replica's rows allow */
		for (int i = 0; i < t->nmbs && !b; i++)
			if (t->mbs[i] <= near && mbs_allowed(m, t, t->mbs[i]))
				b = t->mbs[i];
	while (!b) {
		b = t->mbs[pick(m, t->nmbs)];
		if (!mbs_allowed(m, t, b))
			b = 0;
	}
	PlanChoice best = {.seconds = -1};
	for (int p = 0; p < t->nplace; p++) {
		PlanChoice c = evaluate(m, choice(t, b, t->place[p], m->B));
		if (c.seconds >= 0 && (best.seconds < 0 || c.seconds < best.seconds))
			best = c;
	}
	if (best.seconds < 0) {
		best = choice(t, b, t->place[0], m->B);
		best.seconds = -1;      /* nothing fits */
	}
	return best;
}

static void
anneal(Map *m, const PlanChoice *start)
{
	int steps = m->cx->anneal_steps > 0 ? m->cx->anneal_steps : ANNEAL_STEPS;
	int ti = start ? triple_of(m, start) : -1;
	PlanChoice cur;
	if (ti >= 0 && m->in_space[ti] && mbs_allowed(m, &m->tri[ti], start->mbs)) {
		cur = evaluate(m, *start);
	} else {
		int n = 0;
		for (int i = 0; i < m->ntri; i++)
			n += m->in_space[i];
		int k = pick(m, n);
		for (ti = 0; ti < m->ntri; ti++)
			if (m->in_space[ti] && k-- == 0)
				break;
		cur = sample(m, ti, 0);
	}
	double scale = cur.seconds > 0 ? cur.seconds : 1;
	double *seen = malloc(sizeof *seen * (m->ntri + 1)); /* the record: best per triple */
	if (!seen)
		die("out of memory");
	for (int i = 0; i < m->ntri; i++)
		seen[i] = -1;
	if (cur.seconds >= 0)
		seen[ti] = cur.seconds;
	for (int i = 0; i < steps; i++) {
		double temp = pow(1e-3, (double)i / steps);    /* cool_down: 1 -> 0.001 */
		int nt = neighbour(m, ti, rand01(m) > 0.5);
		PlanChoice p = sample(m, nt, cur.seconds >= 0 ? cur.mbs : 0);
		if (p.seconds < 0)
			continue;
		if (seen[nt] < 0 || p.seconds < seen[nt])
			seen[nt] = p.seconds;
		if (cur.seconds < 0) {
			cur = p, ti = nt;
			scale = p.seconds;
			continue;
		}
		double d = cur.seconds - p.seconds;
		double acc = exp((d < 0 ? d : 0) / (temp * scale));
		if (rand01(m) < acc)
			cur = p, ti = nt;
	}
	/* Algorithm 1's last lines spend a budget of real trials (10 in AMP
	 * §5) on the best records.  tapc has no trials at compile time: it
	 * spends the budget on the cost model instead, evaluating every
	 * micro-batch size and placement of the degrees of the 10 best
	 * records (one per (dp, tp, pp)). */
	for (int k = 0; k < ANNEAL_BUDGET; k++) {
		int t = -1;
		for (int i = 0; i < m->ntri; i++)
			if (seen[i] >= 0 && (t < 0 || seen[i] < seen[t]))
				t = i;
		if (t < 0)
			break;
		seen[t] = -1;
		Triple *tr = &m->tri[t];
		for (int b = 0; b < tr->nmbs; b++)
			for (int p = 0; p < tr->nplace && mbs_allowed(m, tr, tr->mbs[b]); p++)
				evaluate(m, choice(tr, tr->mbs[b], tr->place[p], m->B));
	}
	free(seen);
}

/* ---------------------------------------------------------- apply */

static void
describe(FILE *f, const PlanChoice *p)
{
	fprintf(f, "dp %d, tp %d, pp %d, %d micro-batch%s of %lld row%s, placement %s %s", p->dp,
	    p->tp, p->pp, p->micro, p->micro == 1 ? "" : "es", (long long)p->mbs,
	    p->mbs == 1 ? "" : "s", ir_place_order(p->place), p->place % 2 ? "by-slot" : "by-node");
}

/* Does every input and output reappear at the micro-batch with dim 0
 * scaled and the other dims equal? */
static bool
rows_scale(Graph *g, int64_t (*before)[IR_MAX_RANK], const int *rank, int64_t batch, int64_t mbs)
{
	for (int k = 0; k < g->ninputs + g->noutputs; k++) {
		bool in = k < g->ninputs;
		Tensor *t = &g->tensors[in ? g->inputs[k] : g->outputs[k - g->ninputs]];
		if (in && rank[k] == 0 && t->rank == 0)
			continue;       /* a scalar input (a flag): every replica reads it whole */
		bool same = rank[k] >= 1 && rank[k] == t->rank && t->dims[0] > 0 &&
		    before[k][0] == t->dims[0] * (batch / mbs) && before[k][0] % batch == 0;
		for (int d = 1; same && d < t->rank; d++)
			same = before[k][d] == t->dims[d];
		if (!same) {
			char ty[IR_TYPESTR];
			diag_error("%s: %s '%s' is %s at the micro-batch of %lld rows but has %lld rows "
			    "at the batch %lld: data parallelism and micro-batches need the batch as dim 0 "
			    "of every input and output", g->model, in ? "input" : "output", t->name,
			    ir_typestr(t, ty), (long long)mbs, (long long)before[k][0], (long long)batch);
			return false;
		}
	}
	return true;
}

static bool
respecialize(Graph *g, BatchPlan *bp, int64_t batch, int64_t mbs)
{
	int n = g->ninputs + g->noutputs;
	int64_t (*before)[IR_MAX_RANK] = calloc(n + 1, sizeof *before);
	int *rank = calloc(n + 1, sizeof *rank);
	if (!before || !rank)
		die("out of memory");
	for (int k = 0; k < n; k++) {
		Tensor *t = &g->tensors[k < g->ninputs ? g->inputs[k] : g->outputs[k - g->ninputs]];
		memcpy(before[k], t->dims, sizeof before[k]);
		rank[k] = t->rank;
	}
	bool ok = ir_batch_respecialize(g, bp, mbs) && rows_scale(g, before, rank, batch, mbs);
	free(before);
	free(rank);
	return ok;
}

static void
apply(Map *m, const PlanChoice *p)
{
	Graph *g = m->g;
	int rows, cols;
	ir_cluster_shape(&g->cluster, &rows, &cols);
	g->mesh = (Mesh){rows, cols, p->dp, p->tp, p->pp};
	g->microbatches = p->micro;
	int n = p->dp * p->tp * p->pp;
	g->device = ir_alloc(&g->arena, sizeof *g->device * n);
	ir_place(&g->cluster, p->dp, p->tp, p->pp, p->place, g->device);
	g->place = p->place;
	/* tp-plan weighs compute against the TP group's links on these devices */
	double slow = INFINITY;
	for (int r = 0; r < n; r++) {
		int k;
		ir_cluster_device(&g->cluster, g->device[r], NULL, &k, NULL);
		slow = g->cluster.kinds[k].flops < slow ? g->cluster.kinds[k].flops : slow;
	}
	g->cost.flops = slow;
	g->cost.latency = g->cluster.latency;
	if (p->pp == 1) {
		for (NodeId i = 0; i < g->nnodes; i++)
			g->nodes[i].subgraph = IR_NONE;
		g->nsubgraphs = 0;
	}
	for (NodeId i = 0; i < g->nnodes; i++) { /* the costing's TAP plans */
		g->nodes[i].tp_axis = TP_NONE;
		g->nodes[i].tp_blocks = 1;
	}
}

static bool
check_forced(Map *m, int nsub, const BatchPlan *bp, bool analysed)
{
	PassCtx *cx = m->cx;
	Graph *g = m->g;
	int N = m->N;
	int64_t forced = (int64_t)(cx->dp ? cx->dp : 1) * (cx->tp ? cx->tp : 1) * (cx->pp ? cx->pp : 1);
	bool all = cx->dp && cx->tp && cx->pp;
	if (forced > N || N % forced || (all && forced != N)) {
		char d[48];
		diag_error("%s: the cluster has %d device%s; the degrees must multiply to that "
		    "(those not given are chosen)", pass_degrees(d, cx->dp, cx->tp, cx->pp), N,
		    N == 1 ? "" : "s");
		return false;
	}
	if (cx->pp > nsub) {
		diag_file(g->model, "-pp=%d: the model cuts into only %d pipeline subgraph%s", cx->pp,
		    nsub, nsub == 1 ? "" : "s");
		return false;
	}
	if ((cx->dp > 1 || cx->microbatches > 1) && !m->split) {
		if (analysed && bp->mixer != IR_NONE)
			diag_node(g, bp->mixer, "the batch cannot be split into replicas or micro-batches: "
			    "%s; -dp=1 -microbatches=1 works", bp->mix_why);
		else if (analysed && bp->stuck != IR_NONE)
			diag_node(g, bp->stuck, "the batch cannot be split into replicas or micro-batches: "
			    "%s", bp->stuck_why);
		else
			diag_file(g->model, "the batch cannot be split into replicas or micro-batches: %s",
			    analysed ? bp->stuck_why : "no input carries it");
		return false;
	}
	if (cx->dp && m->B % cx->dp) {
		diag_error("%s: -dp=%d does not divide the batch %lld (-batch=N sets it)", g->model,
		    cx->dp, (long long)m->B);
		return false;
	}
	if (cx->microbatches && cx->dp && (m->B / cx->dp) % cx->microbatches) {
		diag_error("%s: -microbatches=%d does not divide a replica's batch %lld (the batch %lld "
		    "over dp %d; -batch=N sets it)", g->model, cx->microbatches,
		    (long long)(m->B / cx->dp), (long long)m->B, cx->dp);
		return false;
	}
	if (cx->slice && cx->pp == 1) {
		diag_error("-slice -pp=1: the slicer shortens a pipeline's start-up; there is no "
		    "pipeline to slice");
		return false;
	}
	if (cx->slice && !m->split) {
		diag_file(g->model, "-slice: the batch cannot be split, so a micro-batch cannot be "
		    "halved");
		return false;
	}
	if (cx->subpipeline && cx->tp == 1) {
		diag_error("-subpipeline -tp=1: sub-pipelined TMP overlaps tensor parallelism's "
		    "all-reduces; there are none at tp 1");
		return false;
	}
	if (cx->subpipeline && cx->slice) {
		diag_error("-subpipeline and -slice both run each micro-batch as two halves; use one");
		return false;
	}
	if (cx->subpipeline && !m->split) {
		diag_file(g->model, "-subpipeline: the batch cannot be split, so a micro-batch cannot "
		    "be halved");
		return false;
	}
	if ((cx->slice || cx->subpipeline) && cx->microbatches && cx->dp &&
	    (m->B / cx->dp / cx->microbatches) % 2) {
		diag_error("%s: %s halves each micro-batch, but -microbatches=%d of a replica's "
		    "batch %lld gives micro-batches of %lld row%s, an odd number (-batch=N)", g->model,
		    cx->slice ? "-slice" : "-subpipeline", cx->microbatches, (long long)(m->B / cx->dp),
		    (long long)(m->B / cx->dp / cx->microbatches),
		    m->B / cx->dp / cx->microbatches == 1 ? "" : "s");
		return false;
	}
	return true;
}

/* The space is empty: say which forced degree or which limit empties it. */
static void
explain_empty(Map *m, int nsub)
{
	PassCtx *cx = m->cx;
	Graph *g = m->g;
	if (cx->tp && cx->pp && !cx->dp) {
		int dp = m->N / (cx->tp * cx->pp);
		diag_error("%s: the batch %lld does not split into %d data-parallel replicas, and "
		    "-tp=%d -pp=%d leave no other place for the cluster's devices (-batch=N)", g->model,
		    (long long)m->B, dp, cx->tp, cx->pp);
	} else if (cx->microbatches) {
		int dp = 0, ndp = 0; /* the data-parallel degrees the other constraints leave */
		for (int i = 0; i < m->ntri; i++) {
			Triple *t = &m->tri[i];
			if ((!cx->dp || cx->dp == t->dp) && (!cx->tp || cx->tp == t->tp) &&
			    (!cx->pp || cx->pp == t->pp) && t->dp != dp)
				dp = t->dp, ndp++;
		}
		if (ndp == 1)
			diag_error("%s: -microbatches=%d does not divide a replica's batch %lld (the batch "
			    "%lld over dp %d; -batch=N sets it)", g->model, cx->microbatches,
			    (long long)(m->B / dp), (long long)m->B, dp);
		else
			diag_error("%s: -microbatches=%d does not divide a replica's batch for any "
			    "data-parallel degree that fits (the batch %lld; -batch=N sets it)", g->model,
			    cx->microbatches, (long long)m->B);
	} else {
		diag_error("%s: no way to use the cluster's %d devices: the batch %lld splits into too "
		    "few replicas and the model into %d pipeline subgraph%s (-batch=N)", g->model, m->N,
		    (long long)m->B, nsub, nsub == 1 ? "" : "s");
	}
}

const char *
pass_degrees(char buf[48], int dp, int tp, int pp)
{
	const char *name[3] = {"dp", "tp", "pp"};
	int v[3] = {dp, tp, pp}, n = 0;
	buf[0] = 0;
	for (int i = 0; i < 3; i++)
		if (v[i] > 0)
			n += snprintf(buf + n, 48 - n, "%s-%s=%d", n ? " " : "", name[i], v[i]);
	return buf;
}

bool
pass_mesh_map(Graph *g, PassCtx *cx)
{
	double t0 = now();
	Map m = {.g = g, .cx = cx, .N = g->cluster.ndevices, .rec = &g->search,
		.rng = 0x2545f4914f6cdd1dull ^ ((uint64_t)cx->seed * 0x9e3779b97f4a7c15ull)};
	if (m.N < 1)
		die("mesh-map: no cluster");
	if (cx->dp < 0 || cx->tp < 0 || cx->pp < 0 || cx->microbatches < 0) {
		diag_error("-dp=%d -tp=%d -pp=%d -microbatches=%d: degrees are positive counts", cx->dp,
		    cx->tp, cx->pp, cx->microbatches);
		return false;
	}
	PlanSearch *rec = &g->search;
	*rec = (PlanSearch){.seed = cx->seed};
	cm_init(&m.cm, g);
	m.B = m.cm.batch;
	int nsub = m.cm.nsub;

	/* an IR file planned already: its degrees, the placement searched */
	PassCtx given;
	bool planned = g->mesh.dp > 0;
	if (planned) {
		int64_t rows = m.B * g->mesh.dp * (g->microbatches > 1 ? g->microbatches : 1);
		if (g->mesh.dp * g->mesh.tp * g->mesh.pp != m.N) {
			diag_error("%s: the IR file's degrees dp %d x tp %d x pp %d do not cover the "
			    "cluster's %d devices", g->model, g->mesh.dp, g->mesh.tp, g->mesh.pp, m.N);
			cm_free(&m.cm);
			return false;
		}
		given = (PassCtx){.dp = g->mesh.dp, .tp = g->mesh.tp, .pp = g->mesh.pp,
			.microbatches = g->microbatches > 1 ? g->microbatches : 1};
		m.cx = &given;
		m.B = rows;
		m.split = true;
	}

	BatchPlan bp = {0};
	bool analysed = false;
	if (!planned && (m.N > 1 || cx->microbatches > 1)) {
		analysed = ir_batch_plan(g, &bp);
		m.split = analysed && bp.mixer == IR_NONE && bp.stuck == IR_NONE && bp.b0 == m.B;
	}
	if (!planned && !check_forced(&m, nsub, &bp, analysed))
		goto fail;

	enumerate(&m, planned ? g->mesh.pp : nsub);
	if (planned) { /* the graph is a micro-batch's: cost it as one */
		for (int i = 0; i < m.ntri; i++) {
			Triple *t = &m.tri[i];
			t->nmbs = 1;
			t->mbs[0] = m.cm.batch;
		}
	}
	if (m.total == 0) {
		explain_empty(&m, nsub);
		goto fail;
	}
	PlanChoice meg = megatron(&m);
	if (!planned && (cx->search == SEARCH_EXHAUSTIVE ||
	    (cx->search == SEARCH_AUTO && m.total <= SEARCH_LIMIT))) {
		rec->method = "exhaustive";
		exhaustive(&m);
	} else if (!planned) {
		rec->method = "simulated annealing";
		anneal(&m, meg.seconds >= 0 ? &meg : NULL);
	} else {
		rec->method = "given";
		exhaustive(&m);
	}
	rec->total = m.total;
	rec->evaluated = m.cm.evals;
	rec->megatron = meg;
	if (rec->ntop == 0) {
		/* nothing fits: the least memory any candidate needs */
		PlanChoice least = {.memory = INFINITY};
		for (int i = 0; i < m.ntri; i++)
			if (m.in_space[i]) {
				Triple *t = &m.tri[i];
				for (int b = 0; b < t->nmbs; b++) {
					if (!mbs_allowed(&m, t, t->mbs[b]))
						continue;
					PlanChoice p = choice(t, t->mbs[b], 0, m.B);
					cm_evaluate(&m.cm, &p, NULL);
					if (p.memory > 0 && p.memory < least.memory)
						least = p;
				}
			}
		if (least.memory == INFINITY && (cx->slice || cx->subpipeline)) {
			diag_file(g->model, "%s halves each micro-batch, but every %s plan for this "
			    "batch has micro-batches of an odd number of rows (-batch=N, -microbatches=M)",
			    cx->slice ? "-slice" : "-subpipeline", cx->slice ? "pipelined" :
			    "tensor-parallel");
			goto fail;
		}
		double have = 0;
		for (int k = 0; k < g->cluster.nkinds; k++)
			have = g->cluster.kinds[k].memory > have ? g->cluster.kinds[k].memory : have;
		diag_file(g->model, "no plan fits in memory: the leanest (dp %d, tp %d, pp %d, "
		    "micro-batches of %lld rows) needs at least %.3g bytes per device, more than the "
		    "%.3g a device has: use more devices or devices with more memory", least.dp,
		    least.tp, least.pp, (long long)least.mbs, least.memory, have);
		goto fail;
	}
	rec->chosen = rec->top[0];
	rec->seconds = now() - t0;

	char *rule = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&rule, &len);
	fprintf(f, "mesh-map, %s search of %lld candidate%s: ", rec->method, (long long)rec->total,
	    rec->total == 1 ? "" : "s");
	describe(f, &rec->chosen);
	fprintf(f, "; predicted %.4g s per %s", rec->chosen.seconds, g->cost.train ?
	    "training step" : "batch");
	if (meg.seconds > 0)
		fprintf(f, " (Megatron's rule, %.4g s: %.3gx)", meg.seconds, meg.seconds /
		    rec->chosen.seconds);
	if (!m.split && m.N > 1 && !planned)
		fprintf(f, "; the batch is not split: %s", analysed && bp.mixer != IR_NONE ?
		    bp.mix_why : analysed ? bp.stuck_why : "no input carries it");
	fclose(f);
	g->degree_rule = ir_strdup(&g->arena, rule);
	free(rule);
	apply(&m, &rec->chosen);
	int64_t mbs = rec->chosen.mbs;
	/* AutoPipe's slicer and Merak's sub-pipelined TMP: every micro-batch a
	 * pair of halves (the schedule pass decides which pairs' forwards are
	 * sliced, or interleaves each pair at its TP all-reduces) */
	if (!planned && (cx->slice || cx->subpipeline)) {
		const char *opt = cx->slice ? "-slice" : "-subpipeline";
		if (cx->slice && g->mesh.pp < 2) {
			diag_file(g->model, "-slice: the plan chosen has no pipeline (%s); -pp=N forces "
			    "one", g->degree_rule);
			goto fail;
		}
		if (cx->subpipeline && g->mesh.tp < 2) {
			diag_file(g->model, "-subpipeline: the plan chosen has no tensor parallelism "
			    "(%s); -tp=N forces it", g->degree_rule);
			goto fail;
		}
		if (g->microbatches > IR_MAX_DEVICES / 2) {
			diag_error("%s: %d micro-batches make %d halves, more than %d", opt,
			    g->microbatches, 2 * g->microbatches, IR_MAX_DEVICES);
			goto fail;
		}
		mbs /= 2;
		g->microbatches *= 2;
		if (cx->slice) /* check_forced refuses the two together */
			g->slice = 1;
		else
			g->subpipe = true;
	}
	if (!planned && mbs != m.B && !respecialize(g, &bp, m.B, mbs))
		goto fail;
	if (analysed)
		ir_batch_plan_free(&bp);
	for (int i = 0; i < m.ntri; i++)
		free(m.tri[i].mbs);
	free(m.tri);
	free(m.in_space);
	cm_free(&m.cm);
	return true;
fail:
	if (analysed)
		ir_batch_plan_free(&bp);
	for (int i = 0; i < m.ntri; i++)
		free(m.tri[i].mbs);
	free(m.tri);
	free(m.in_space);
	cm_free(&m.cm);
	return false;
}
