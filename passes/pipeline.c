/*
 * pipeline.c - the pipeline planner's arithmetic (see pipeline.h): the
 * simulator, AMP's pipe_dp, AutoPipe's Algorithm 1 and critical-path
 * heuristic, and the SVG chart of a simulated schedule.  Needs only libc;
 * dies on out-of-memory like the rest of tapc.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/pipeline.h"

static void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		die("out of memory");
	return p;
}

/* ---------------------------------------------------------- simulator */

int
pipe_order(int sched, int K, int M, int s, bool recompute, PipeOp *out)
{
	int k = 0, f = 0, b = 0;
	if (sched == SCHED_MERAK && s == K - 1)
		recompute = false; /* the last stage holds one micro-batch: nothing to save */
#define FWD() (out[k++] = (PipeOp){.stage = s, .micro = f++})
#define BWD()                                                                     \
	do {                                                                      \
		if (recompute)                                                    \
			out[k++] = (PipeOp){.stage = s, .micro = b, .recompute = true}; \
		out[k++] = (PipeOp){.stage = s, .micro = b++, .backward = true};  \
	} while (0)
	if (sched == SCHED_GPIPE) {
		while (f < M)
			FWD();
		while (b < M)
			BWD();
		return k;
	}
	int warm = K - s - 1 + (sched == SCHED_MERAK && s == K - 2 && K > 1);
	if (warm > M)
		warm = M;
	while (f < warm)
		FWD();
	while (f < M) {
		FWD();
		BWD();
	}
	while (b < M)
		BWD();
#undef FWD
#undef BWD
	return k;
}

int
pipe_inflight(const PipeOp *o, int n)
{
	int held = 0, most = 0;
	for (int i = 0; i < n; i++) {
		if (o[i].recompute)
			continue;
		held += o[i].backward ? -1 : 1;
		most = held > most ? held : most;
	}
	return most;
}

bool
pipe_simulate(const PipeSpec *p, PipeSim *out)
{
	memset(out, 0, sizeof *out);
	int K = p->nstages, M = p->micro;
	if (K < 1 || M < 1 || !p->fwd || p->comm < 0)
		return false;
	bool train = p->bwd != NULL;
	/* each stage's order: forward only, given, or the schedule's */
	int *first = xcalloc(K + 1, sizeof *first);
	for (int s = 0; s < K; s++)
		first[s + 1] = first[s] + (p->order ? p->norder[s] : !train ? M : 3 * M);
	out->ops = xcalloc(first[K], sizeof *out->ops);
	for (int s = 0; s < K; s++) {
		PipeOp *o = out->ops + out->nops;
		int k = 0;
		if (p->order)
			for (k = 0; k < p->norder[s]; k++) {
				o[k] = p->order[s][k];
				o[k].stage = s;
				if (!train && (o[k].backward || o[k].recompute))
					break; /* forward only: no backward time */
			}
		else if (!train)
			for (int m = 0; m < M; m++)
				o[k++] = (PipeOp){.stage = s, .micro = m};
		else
			k = pipe_order(p->sched, K, M, s, p->recompute && p->recompute[s], o);
		first[s] = out->nops;
		out->nops += k;
	}
	first[K] = out->nops;
	/* where each operation is: index of (stage, micro, fwd/bwd/recompute) */
	int *at = xcalloc((size_t)K * M * 3, sizeof *at);
	for (int i = 0; i < (int)((size_t)K * M * 3); i++)
		at[i] = -1;
	for (int i = 0; i < out->nops; i++) {
		PipeOp *o = &out->ops[i];
		if (o->micro < 0 || o->micro >= M) {
			free(first);
			free(at);
			pipe_sim_free(out);
			return false;
		}
		at[(o->stage * M + o->micro) * 3 + (o->recompute ? 2 : o->backward)] = i;
	}
	int *next = xcalloc(K, sizeof *next), *pred = xcalloc(out->nops, sizeof *pred);
	bool *done = xcalloc(out->nops, 1);
	double *free_at = xcalloc(K, sizeof *free_at);
	int left = out->nops;
	for (bool progress = true; left && progress;) {
		progress = false;
		for (int s = 0; s < K; s++) {
			while (first[s] + next[s] < first[s + 1]) {
				int i = first[s] + next[s];
				PipeOp *o = &out->ops[i];
				int dep = -1; /* the operation whose result this one needs */
				bool missing = false;
				if (o->recompute)
					dep = -1;
				else if (!o->backward && s > 0)
					missing = (dep = at[((s - 1) * M + o->micro) * 3]) < 0;
				else if (o->backward && s < K - 1)
					missing = (dep = at[((s + 1) * M + o->micro) * 3 + 1]) < 0;
				else if (o->backward)
					missing = (dep = at[(s * M + o->micro) * 3]) < 0;
				if (!missing && dep >= 0 && out->ops[dep].stage != s && out->ops[dep].release) {
					/* the result left with a later micro-batch's */
					int m = out->ops[dep].micro + out->ops[dep].release;
					missing = m < 0 || m >= M ||
					    (dep = at[(out->ops[dep].stage * M + m) * 3 +
					    out->ops[dep].backward]) < 0;
				}
				if (missing || (dep >= 0 && !done[dep]))
					break;
				double ready = dep < 0 ? 0 : out->ops[dep].end +
				    (out->ops[dep].stage != s ? p->comm : 0);
				int prev = next[s] ? i - 1 : -1;
				o->start = ready > free_at[s] ? ready : free_at[s];
				pred[i] = ready > free_at[s] || prev < 0 ? dep : prev;
				o->end = o->start + (o->backward ? p->bwd[s] : o->recompute && p->refwd ?
				    p->refwd[s] : p->fwd[s]);
				free_at[s] = o->end;
				done[i] = true;
				next[s]++;
				left--;
				progress = true;
			}
		}
	}
	free(first);
	if (left) {
		free(at);
		free(next);
		free(pred);
		free(done);
		free(free_at);
		pipe_sim_free(out);
		return false; /* an order that deadlocks */
	}
	/* the critical path: back from the last end, through the predecessor
	 * that decided each start */
	int last = 0;
	for (int i = 1; i < out->nops; i++)
		if (out->ops[i].end >= out->ops[last].end)
			last = i;
	out->time = out->ops[last].end;
	double *busy = xcalloc(K, sizeof *busy);
	for (int i = last; i >= 0; i = pred[i]) {
		out->ops[i].critical = true;
		busy[out->ops[i].stage] += out->ops[i].end - out->ops[i].start;
	}
	out->master = 0;
	for (int s = 1; s < K; s++)
		if (busy[s] >= busy[out->master])
			out->master = s;
	free(busy);
	free(at);
	free(next);
	free(pred);
	free(done);
	free(free_at);
	return true;
}

void
pipe_sim_free(PipeSim *s)
{
	free(s->ops);
	s->ops = NULL;
}

void
pipe_stage_sums(const double *v, const int *cut, int k, double *out)
{
	for (int s = 0; s < k; s++) {
		out[s] = 0;
		for (int i = cut[s]; i < cut[s + 1]; i++)
			out[s] += v[i];
	}
}

/* ------------------------------------------------------------ pipe_dp */

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The problem with prefix sums: P[i * nc + c] = sum of component c of items
 * [0, i). */
typedef struct {
	const PipeProblem *p;
	double *P, *PM;
	double *D;                      /* [(k+1) * (n+1)] */
	int *par;
	bool *reach, *next;
} Dp;

static double
stage_time(const Dp *d, int j, int s, int e)
{
	const PipeProblem *p = d->p;
	double t = 0;
	for (int c = 0; c < p->ncomp; c++)
		t += p->coef[j * p->ncomp + c] * (d->P[e * p->ncomp + c] - d->P[s * p->ncomp + c]);
	return t;
}

static bool
stage_fits(const Dp *d, int j, int s, int e)
{
	const PipeProblem *p = d->p;
	if (!p->nmem)
		return true;
	double m = 0;
	for (int c = 0; c < p->nmem; c++)
		m += p->mem_coef[j * p->nmem + c] * (d->PM[e * p->nmem + c] - d->PM[s * p->nmem + c]);
	return m <= p->mem_cap[j];
}

static double
cut_cost(const Dp *d, int j, int s)
{
	const PipeProblem *p = d->p;
	return j > 0 && p->cut ? p->cut[(s - 1) * (p->k - 1) + (j - 1)] : 0;
}

/* Least sum of stage times and cut costs with every stage at most T (and
 * within memory); DBL_MAX if none.  Fills d->par. */
static double
dp_within(Dp *d, double T)
{
	const PipeProblem *p = d->p;
	int n = p->n, k = p->k, w = n + 1;
	double *D = d->D;
	for (int i = 0; i <= n; i++)
		D[i] = i == 0 ? 0 : DBL_MAX;
	for (int j = 1; j <= k; j++)
		for (int i = 0; i <= n; i++) {
			double best = DBL_MAX;
			int arg = -1;
			for (int s = j - 1; s <= i - 1; s++) {
				if (D[(j - 1) * w + s] == DBL_MAX)
					continue;
				double t = stage_time(d, j - 1, s, i);
				if (t > T || !stage_fits(d, j - 1, s, i))
					continue;
				double v = D[(j - 1) * w + s] + t + cut_cost(d, j - 1, s);
				if (v < best)
					best = v, arg = s;
			}
			D[j * w + i] = best;
			d->par[j * w + i] = arg;
		}
	return D[k * w + n];
}

static void
dp_cut(const Dp *d, int *cut)
{
	int n = d->p->n, k = d->p->k;
	cut[k] = n;
	for (int j = k, i = n; j >= 1; j--)
		cut[j - 1] = i = d->par[j * (n + 1) + i];
}

static double
largest_stage(const Dp *d, const int *cut)
{
	double m = 0;
	for (int j = 0; j < d->p->k; j++) {
		double t = stage_time(d, j, cut[j], cut[j + 1]);
		m = t > m ? t : m;
	}
	return m;
}

/* Can the k stages, in order, each non-empty, at most T and within memory,
 * hold the n items?  The ends a stage starting at s reaches form the range
 * (s, far(s)], far non-decreasing in s: two pointers per stage. */
static bool
feasible(Dp *d, double T)
{
	const PipeProblem *p = d->p;
	int n = p->n;
	bool *reach = d->reach, *next = d->next;
	memset(reach, 0, n + 1);
	reach[0] = true;
	for (int j = 0; j < p->k; j++) {
		memset(next, 0, n + 1);
		int far = 0, mark = 0; /* next[] set up to mark */
		for (int s = 0; s < n; s++) {
			if (far < s)
				far = s;
			while (far < n && stage_time(d, j, s, far + 1) <= T && stage_fits(d, j, s, far + 1))
				far++;
			if (!reach[s])
				continue;
			for (int e = (mark > s ? mark : s) + 1; e <= far; e++)
				next[e] = true;
			mark = far > mark ? far : mark;
		}
		bool *t = reach;
		reach = next;
		next = t;
	}
	bool ok = reach[n];
	return ok;
}

double
pipe_stage_time(const PipeProblem *p, int j, int s, int e)
{
	double t = 0;
	for (int i = s; i < e; i++)
		for (int c = 0; c < p->ncomp; c++)
			t += p->coef[j * p->ncomp + c] * p->item[i * p->ncomp + c];
	return t;
}

double
pipe_dp_stages(const PipeProblem *p, int *cut)
{
	int n = p->n, k = p->k, M = p->micro, nc = p->ncomp, nm = p->nmem;
	if (k < 1 || k > n || M < 1 || nc < 1 || nc > PIPE_MAX_COMP || nm < 0 ||
	    nm > PIPE_MAX_COMP)
		return -1;
	Dp d = {.p = p};
	d.P = xcalloc((size_t)(n + 1) * nc, sizeof *d.P);
	d.PM = xcalloc((size_t)(n + 1) * (nm ? nm : 1), sizeof *d.PM);
	for (int i = 0; i < n; i++) {
		for (int c = 0; c < nc; c++)
			d.P[(i + 1) * nc + c] = d.P[i * nc + c] + p->item[i * nc + c];
		for (int c = 0; c < nm; c++)
			d.PM[(i + 1) * nm + c] = d.PM[i * nm + c] + p->mem_item[i * nm + c];
	}
	d.D = xcalloc((size_t)(k + 1) * (n + 1), sizeof *d.D);
	d.par = xcalloc((size_t)(k + 1) * (n + 1), sizeof *d.par);
	d.reach = xcalloc(n + 1, 1);
	d.next = xcalloc(n + 1, 1);
	int *c = xcalloc(k + 1, sizeof *c);
	double *cand = NULL, best = -1;

	/* the least sum, without a bound on the largest stage: a lower bound on
	 * the sum part of the objective, and the answer when M = 1 */
	double lb = dp_within(&d, DBL_MAX);
	if (lb == DBL_MAX)
		goto done;              /* no partition fits in memory */
	dp_cut(&d, cut);
	best = (M - 1) * largest_stage(&d, cut) + lb;
	if (M == 1)
		goto done;

	/* the smallest feasible largest stage, by bisection on feasibility */
	double lo = 0, hi = 0;
	for (int j = 0; j < k; j++) {
		double t = stage_time(&d, j, 0, n);
		hi = t > hi ? t : hi;
	}
	for (int it = 0; it < 200 && hi - lo > 1e-13 * hi; it++) {
		double mid = lo + (hi - lo) / 2;
		if (feasible(&d, mid))
			hi = mid;
		else
			lo = mid;
	}
	double v = dp_within(&d, hi);
	if (v == DBL_MAX)
		die("pipe_dp_stages: a feasible bound has no partition");
	dp_cut(&d, c);
	double tstar = largest_stage(&d, c);
	v = (M - 1) * tstar + v;
	if (v < best) {
		best = v;
		memcpy(cut, c, sizeof *cut * (k + 1));
	}

	/* larger bounds: only stage times T with (M-1) T + lb < best can win */
	double lim = (best - lb) / (M - 1);
	size_t nc2 = 0, cap = 1024;
	cand = xcalloc(cap, sizeof *cand);
	for (int j = 0; j < k; j++)
		for (int s = j; s < n; s++)
			for (int e = s + 1; e <= n; e++) {
				double t = stage_time(&d, j, s, e);
				if (t >= lim)
					break;
				if (t <= tstar)
					continue;
				if (nc2 == cap) {
					cap *= 2;
					if (!(cand = realloc(cand, cap * sizeof *cand)))
						die("out of memory");
				}
				cand[nc2++] = t;
			}
	qsort(cand, nc2, sizeof *cand, cmp_double);
	size_t step = p->max_bounds > 0 && nc2 > (size_t)p->max_bounds ?
	    (nc2 + p->max_bounds - 1) / p->max_bounds : 1;
	for (size_t i = 0; i < nc2; i += step) {
		double T = cand[i];
		if (T >= lim)
			break;
		if (i && T == cand[i - step])
			continue;
		double s = dp_within(&d, T);
		if (s == DBL_MAX)
			continue;
		dp_cut(&d, c);
		double o = (M - 1) * largest_stage(&d, c) + s;
		if (o < best) {
			best = o;
			memcpy(cut, c, sizeof *cut * (k + 1));
			lim = (best - lb) / (M - 1);
		}
		if (s <= lb)
			break;          /* the sum is as small as it gets: larger T only lose */
	}
done:
	free(d.P);
	free(d.PM);
	free(d.D);
	free(d.par);
	free(d.reach);
	free(d.next);
	free(c);
	free(cand);
	return best;
}

double
pipe_dp(const double *a, int n, int k, const double *b, int micro, int *cut)
{
	if (k < 1)
		return -1;
	double *one = xcalloc(k, sizeof *one);
	for (int j = 0; j < k; j++)
		one[j] = 1;
	PipeProblem p = {.n = n, .k = k, .micro = micro, .ncomp = 1, .item = a, .coef = one,
		.cut = b};
	double v = pipe_dp_stages(&p, cut);
	free(one);
	return v;
}

/* --------------------------------------------------- AutoPipe planner */

double
pipe_balance(const double *w, int n, int k, int *cut)
{
	if (k < 1 || k > n)
		return -1;
	double *P = xcalloc(n + 1, sizeof *P);
	for (int i = 0; i < n; i++)
		P[i + 1] = P[i] + w[i];
	int W = n + 1;
	double *t = xcalloc((size_t)(k + 1) * W, sizeof *t);
	int *par = xcalloc((size_t)(k + 1) * W, sizeof *par);
	for (int i = 0; i <= n; i++)
		for (int j = 0; j <= k; j++)
			t[j * W + i] = DBL_MAX;
	t[0] = 0;
	for (int i = 1; i <= n; i++)
		for (int j = 1; j <= k && j <= i; j++)
			for (int c = j - 1; c < i; c++) {
				if (t[(j - 1) * W + c] == DBL_MAX)
					continue;
				double v = t[(j - 1) * W + c];
				if (P[i] - P[c] > v)
					v = P[i] - P[c];
				if (v < t[j * W + i]) {
					t[j * W + i] = v;
					par[j * W + i] = c;
				}
			}
	double best = t[k * W + n];
	cut[k] = n;
	for (int j = k, i = n; j >= 1; j--)
		cut[j - 1] = i = par[j * W + i];
	free(P);
	free(t);
	free(par);
	return best;
}

double
pipe_simulate_cuts(const double *f, const double *b, int k, int micro, double comm, const int *cut,
    int *master)
{
	double *sf = xcalloc(k, sizeof *sf), *sb = b ? xcalloc(k, sizeof *sb) : NULL;
	pipe_stage_sums(f, cut, k, sf);
	if (b)
		pipe_stage_sums(b, cut, k, sb);
	PipeSpec p = {.nstages = k, .micro = micro, .fwd = sf, .bwd = sb, .comm = comm};
	PipeSim sim;
	if (!pipe_simulate(&p, &sim))
		die("pipe_simulate_cuts: bad pipeline");
	double t = sim.time;
	if (master)
		*master = sim.master;
	pipe_sim_free(&sim);
	free(sf);
	free(sb);
	return t;
}

double
pipe_autopipe(const double *f, const double *b, int n, int k, int micro, double comm, int *cut)
{
	if (k < 1 || k > n || micro < 1)
		return -1;
	double *w = xcalloc(n, sizeof *w);
	for (int i = 0; i < n; i++)
		w[i] = f[i] + (b ? b[i] : 0);
	pipe_balance(w, n, k, cut);
	int master;
	double best = pipe_simulate_cuts(f, b, k, micro, comm, cut, &master);
	int *cand = xcalloc(k + 1, sizeof *cand), *keep = xcalloc(k + 1, sizeof *keep);
	for (int iter = 0; iter < 4 * n * k && master > 0; iter++) {
		/* candidates that move the master stage's load: its first block to
		 * the stage before, its last block to the stage after, each as is
		 * and with the stages before rebalanced (Algorithm 1) */
		int i = master, bestm = -1;
		double bt = best;
		for (int v = 0; v < 4; v++) {
			memcpy(cand, cut, sizeof *cand * (k + 1));
			if (v < 2) {
				if (cut[i + 1] - cut[i] < 2)
					continue;
				cand[i]++;
				if (v == 1 && i > 1)
					pipe_balance(w, cand[i], i, cand);
			} else {
				if (i == k - 1 || cut[i + 1] - cut[i] < 2)
					continue;
				cand[i + 1]--;
				if (v == 3)
					pipe_balance(w, cand[i + 1], i + 1, cand);
			}
			int m;
			double t = pipe_simulate_cuts(f, b, k, micro, comm, cand, &m);
			if (t < bt) {
				bt = t;
				bestm = m;
				memcpy(keep, cand, sizeof *keep * (k + 1));
			}
		}
		if (bestm < 0)
			break;
		best = bt;
		master = bestm;
		memcpy(cut, keep, sizeof *cut * (k + 1));
	}
	free(w);
	free(cand);
	free(keep);
	return best;
}

/* --------------------------------------------------------------- SVG */

void
pipe_svg(FILE *f, const PipeSim *s, int nstages, const char *title)
{
	const double left = 84, width = 880, row = 30, top = 44;
	double scale = s->time > 0 ? width / s->time : 0;
	int micro = 0;
	for (int i = 0; i < s->nops; i++)
		if (s->ops[i].micro + 1 > micro)
			micro = s->ops[i].micro + 1;
	double h = top + nstages * row + 30;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
	    "font-family=\"sans-serif\" font-size=\"12\">\n", left + width + 16, h);
	fputs("<text x=\"8\" y=\"20\" font-size=\"14\">", f);
	for (const char *p = title ? title : ""; *p; p++) /* escape for XML */
		fputs(*p == '<' ? "&lt;" : *p == '&' ? "&amp;" : *p == '>' ? "&gt;" :
		    (char[2]){*p, 0}, f);
	fprintf(f, " (%d stages, %d micro-batches, iteration %.6g s; outlined: critical path)</text>\n",
	    nstages, micro, s->time);
	for (int st = 0; st < nstages; st++)
		fprintf(f, "<text x=\"8\" y=\"%.1f\">stage %d</text>\n", top + st * row + 19, st);
	for (int i = 0; i < s->nops; i++) {
		const PipeOp *o = &s->ops[i];
		double x = left + o->start * scale, w = (o->end - o->start) * scale;
		double y = top + o->stage * row;
		int hue = micro ? 360 * o->micro / micro : 0;
		fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
		    "fill=\"hsl(%d,65%%,%d%%)\" stroke=\"%s\" stroke-width=\"%s\">"
		    "<title>stage %d, micro-batch %d, %s: %.6g-%.6g s</title></rect>\n",
		    x, y + 2, w, row - 6, hue, o->backward ? 78 : o->recompute ? 90 : 58,
		    o->critical ? "#000" : "#fff", o->critical ? "2" : "1", o->stage, o->micro,
		    o->backward ? "backward" : o->recompute ? "recompute" : "forward", o->start, o->end);
		if (w >= 16)
			fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%s%d</text>\n",
			    x + w / 2, y + 19, o->backward ? "b" : o->recompute ? "r" : "", o->micro);
	}
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#888\"/>\n", left,
	    h - 22, left + width, h - 22);
	fprintf(f, "<text x=\"%.0f\" y=\"%.1f\">0</text><text x=\"%.0f\" y=\"%.1f\" "
	    "text-anchor=\"end\">%.6g s</text>\n</svg>\n", left, h - 8, left + width, h - 8, s->time);
}

double
pipe_subpipe_time(const double *c, const double *a, int n)
{
	double tc = 0, tm = 0, ar[2] = {0, 0};
	for (int i = 0; i <= n; i++) {
		double end[2];
		for (int h = 0; h < 2; h++) { /* compute: A's segment i, then B's */
			end[h] = (tc > ar[h] ? tc : ar[h]) + c[i];
			tc = end[h];
		}
		for (int h = 0; h < 2 && i < n; h++) { /* their all-reduces, in turn */
			ar[h] = (tm > end[h] ? tm : end[h]) + a[i];
			tm = ar[h];
		}
	}
	return tc > tm ? tc : tm;
}

double
pipe_subpipe_stage(double compute, double coll, int ncoll)
{
	if (ncoll <= 0)
		return 2 * (compute + coll);
	double *c = malloc(sizeof *c * (ncoll + 1)), *a = malloc(sizeof *a * ncoll);
	if (!c || !a)
		die("out of memory");
	for (int i = 0; i < ncoll; i++) {
		c[i] = compute / ncoll;
		a[i] = coll / ncoll;
	}
	c[ncoll] = 0;
	double t = pipe_subpipe_time(c, a, ncoll);
	free(c);
	free(a);
	return t;
}
