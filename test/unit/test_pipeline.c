/*
 * test_pipeline.c - the pipeline planner's arithmetic: the simulator
 * against timelines worked out by hand, pipe_dp and AutoPipe's Algorithm 1
 * against brute force over every partition of random cost arrays, and the
 * AutoPipe heuristic against its starting point and the brute-force best.
 */
#include <math.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/pipeline.h"
#include "test/unit/util.h"

static const PipeOp *
op(const PipeSim *s, int stage, int micro, bool backward)
{
	for (int i = 0; i < s->nops; i++)
		if (s->ops[i].stage == stage && s->ops[i].micro == micro &&
		    s->ops[i].backward == backward)
			return &s->ops[i];
	return NULL;
}

/* 2 stages, forward only, f = 1 and 2, comm 0.5, 3 micro-batches:
 * stage 1 starts at 1.5 and is the bottleneck: 1.5-3.5, 3.5-5.5, 5.5-7.5 */
static void
sim_forward_two_stages(void)
{
	double f[] = {1, 2};
	PipeSpec p = {.nstages = 2, .micro = 3, .fwd = f, .comm = 0.5};
	PipeSim s;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &s));
	CU_ASSERT_DOUBLE_EQUAL(s.time, 7.5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 0, 2, false)->start, 2, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 1, 0, false)->start, 1.5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 1, 1, false)->start, 3.5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 1, 2, false)->start, 5.5, 1e-12);
	CU_ASSERT_EQUAL(s.master, 1);
	/* AMP's formula holds for a forward pipeline: (M-1) max + sum + comm */
	CU_ASSERT_DOUBLE_EQUAL(s.time, 2 * 2 + 3 + 0.5, 1e-12);
	pipe_sim_free(&s);
}

static int
count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* The chart: a box per operation where the timeline puts it */
static void
svg_chart(void)
{
	double f[] = {1, 2};
	PipeSpec p = {.nstages = 2, .micro = 3, .fwd = f, .comm = 0.5};
	PipeSim s;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &s));
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	pipe_svg(m, &s, 2, "gpt <tp=2>");
	fclose(m);
	CU_ASSERT_EQUAL(strncmp(buf, "<svg ", 5), 0);
	CU_ASSERT_STRING_EQUAL(buf + len - 7, "</svg>\n");
	CU_ASSERT_EQUAL(count(buf, "<rect "), 6);
	CU_ASSERT_EQUAL(count(buf, "gpt &lt;tp=2&gt;"), 1);
	/* stage 1's first forward starts at 1.5 of 7.5 s: 84 + 1.5 * 880 / 7.5 */
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "<rect x=\"260.00\" y=\"76.0\" width=\"234.67\""));
	int critical = 0;
	for (int i = 0; i < s.nops; i++)
		critical += s.ops[i].critical;
	CU_ASSERT_EQUAL(count(buf, "stroke=\"#000\""), critical);
	free(buf);
	pipe_sim_free(&s);
}

/* 3 balanced stages, 1F1B, f = 1, b = 2, 3 micro-batches, no comm.  By hand:
 *   s0: F0 0-1  F1 1-2  F2 2-3  B0 7-9   B1 10-12  B2 13-15
 *   s1: F0 1-2  F1 2-3  B0 5-7  F2 7-8   B1 8-10   B2 11-13
 *   s2: F0 2-3  B0 3-5  F1 5-6  B1 6-8   F2 8-9    B2 9-11 */
static void
sim_1f1b_three_stages(void)
{
	double f[] = {1, 1, 1}, b[] = {2, 2, 2};
	PipeSpec p = {.nstages = 3, .micro = 3, .fwd = f, .bwd = b};
	PipeSim s;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &s));
	CU_ASSERT_DOUBLE_EQUAL(s.time, 15, 1e-12);
	static const struct { int st, m; bool bw; double start; } want[] = {
		{0, 2, false, 2}, {0, 0, true, 7}, {0, 1, true, 10}, {0, 2, true, 13},
		{1, 0, true, 5}, {1, 2, false, 7}, {1, 1, true, 8}, {1, 2, true, 11},
		{2, 0, true, 3}, {2, 1, false, 5}, {2, 2, false, 8}, {2, 2, true, 9},
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		const PipeOp *o = op(&s, want[i].st, want[i].m, want[i].bw);
		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_DOUBLE_EQUAL(o->start, want[i].start, 1e-12);
	}
	pipe_sim_free(&s);
}

/* 2 stages, the second twice as slow, 1F1B, 2 micro-batches:
 *   s0: F0 0-1  F1 1-2  B0 7-9   B1 13-15
 *   s1: F0 1-3  B0 3-7  F1 7-9   B1 9-13
 * the critical path runs through stage 1: the master stage */
static void
sim_1f1b_unbalanced(void)
{
	double f[] = {1, 2}, b[] = {2, 4};
	PipeSpec p = {.nstages = 2, .micro = 2, .fwd = f, .bwd = b};
	PipeSim s;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &s));
	CU_ASSERT_DOUBLE_EQUAL(s.time, 15, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 1, 1, false)->start, 7, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 0, 1, true)->start, 13, 1e-12);
	CU_ASSERT_EQUAL(s.master, 1);
	CU_ASSERT_TRUE(op(&s, 1, 1, true)->critical);
	CU_ASSERT_FALSE(op(&s, 0, 1, false)->critical);
	pipe_sim_free(&s);
	PipeSpec bad = {.nstages = 0, .micro = 2, .fwd = f};
	CU_ASSERT_FALSE(pipe_simulate(&bad, &s));
}

/* The schedules' orders (pipe_order): every micro-batch forward once and
 * backward once, after its forward and its recompute; the micro-batches a
 * stage holds: GPipe all M, 1F1B K - s, Merak K - s but one more on the
 * penultimate stage (and no recompute on the last). */
static void
schedule_orders(void)
{
	enum { K = 4, M = 8 };
	PipeOp o[3 * M];
	for (int kind = 0; kind < SCHED_COUNT; kind++)
		for (int rec = 0; rec < 2; rec++)
			for (int s = 0; s < K; s++) {
				int n = pipe_order(kind, K, M, s, rec, o);
				int fwd[M] = {0}, bwd[M] = {0}, re[M] = {0};
				for (int i = 0; i < n; i++) {
					int m = o[i].micro;
					if (o[i].backward) {
						CU_ASSERT_EQUAL(fwd[m], 1);
						bwd[m]++;
					} else if (o[i].recompute) {
						re[m]++;
					} else {
						fwd[m]++;
					}
				}
				bool last_merak = kind == SCHED_MERAK && s == K - 1;
				for (int m = 0; m < M; m++) {
					CU_ASSERT_EQUAL(fwd[m], 1);
					CU_ASSERT_EQUAL(bwd[m], 1);
					CU_ASSERT_EQUAL(re[m], rec && !last_merak ? 1 : 0);
				}
				int want = kind == SCHED_GPIPE ? M : kind == SCHED_MERAK && s == K - 2 ?
				    K - s + 1 : K - s;
				CU_ASSERT_EQUAL(pipe_inflight(o, n), want);
			}
}

/* GPipe by hand, 2 stages, f = 1, b = 2, 2 micro-batches, no comm:
 *   s0: F0 0-1  F1 1-2                B0 5-7  B1 7-9
 *   s1:         F0 1-2  F1 2-3  B0 3-5  B1 5-7
 * and an order that waits on itself is refused, not run forever */
static void
sim_gpipe_and_deadlock(void)
{
	double f[] = {1, 1}, b[] = {2, 2};
	PipeSpec p = {.nstages = 2, .micro = 2, .fwd = f, .bwd = b, .sched = SCHED_GPIPE};
	PipeSim s;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &s));
	CU_ASSERT_DOUBLE_EQUAL(s.time, 9, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 1, 1, false)->start, 2, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 1, 0, true)->start, 3, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 0, 0, true)->start, 5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 0, 1, true)->start, 7, 1e-12);
	pipe_sim_free(&s);
	/* stage 0 wants its backward of micro-batch 0 before its forward */
	PipeOp s0[] = {{.micro = 0, .backward = true}, {.micro = 0}};
	PipeOp s1[] = {{.micro = 0}, {.micro = 0, .backward = true}};
	const PipeOp *order[] = {s0, s1};
	int norder[] = {2, 2};
	PipeSpec q = {.nstages = 2, .micro = 1, .fwd = f, .bwd = b, .order = order, .norder = norder};
	CU_ASSERT_FALSE(pipe_simulate(&q, &s));
}

/* A send held for the next micro-batch (AutoPipe's aggregated halves):
 * 2 stages, forward only, f = 1, no comm, 4 micro-batches, the result of
 * micro-batch 2 leaving with that of 3:
 *   s0: F0 0-1  F1 1-2  F2 2-3  F3 3-4
 *   s1:         F0 1-2  F1 2-3         F2 4-5  F3 5-6
 * 6 where sending each on its own gives 5; and in training the gradient
 * of backward 0 held for backward 1 (f 1, b 2, GPipe):
 *   s1: F0 1-2  F1 2-3  B0 3-5  B1 5-7
 *   s0: B0 waits for s1's B1: 7-9, B1 9-11 (without: B0 5-7, B1 7-9) */
static void
sim_release_by_hand(void)
{
	double f[] = {1, 1}, b[] = {2, 2};
	PipeOp s0[4], s1[4];
	for (int m = 0; m < 4; m++)
		s0[m] = s1[m] = (PipeOp){.micro = m};
	s0[2].release = 1;
	const PipeOp *order[] = {s0, s1};
	int norder[] = {4, 4};
	PipeSpec p = {.nstages = 2, .micro = 4, .fwd = f, .order = order, .norder = norder};
	PipeSim s;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &s));
	CU_ASSERT_DOUBLE_EQUAL(s.time, 6, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 1, 2, false)->start, 4, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 1, 1, false)->start, 2, 1e-12);
	pipe_sim_free(&s);
	s0[2].release = 0;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &s));
	CU_ASSERT_DOUBLE_EQUAL(s.time, 5, 1e-12);
	pipe_sim_free(&s);

	PipeOp t0[4] = {{.micro = 0}, {.micro = 1}, {.micro = 0, .backward = true},
		{.micro = 1, .backward = true}};
	PipeOp t1[4];
	memcpy(t1, t0, sizeof t1);
	t1[2].release = 1;
	const PipeOp *torder[] = {t0, t1};
	int tn[] = {4, 4};
	PipeSpec q = {.nstages = 2, .micro = 2, .fwd = f, .bwd = b, .order = torder, .norder = tn};
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&q, &s));
	CU_ASSERT_DOUBLE_EQUAL(s.time, 11, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(op(&s, 0, 0, true)->start, 7, 1e-12);
	pipe_sim_free(&s);
	t1[2].release = 0;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&q, &s));
	CU_ASSERT_DOUBLE_EQUAL(s.time, 9, 1e-12);
	pipe_sim_free(&s);
}

/* Merak's shifted critical path against 1F1B, both recomputing (Merak
 * §5.1's setting), when the last stage carries a head (twice the others'
 * work): the last stage drops its recompute and the penultimate runs one
 * forward ahead.  1F1B's last stage is the critical path at f + r + b = 8
 * per micro-batch: (K-1) forwards in (3 + 0.3 comm), 8 x 8 on the last
 * stage, then backwards 2 x 3 + 0.3 back: 3.3 + 64 + 6.3 = 73.6; Merak's
 * last stage runs 6 per micro-batch, and the path shifts to stage 2 */
static void
sim_merak_head(void)
{
	double f[] = {1, 1, 1, 2}, b[] = {2, 2, 2, 4};
	bool rec[] = {true, true, true, true};
	PipeSpec p = {.nstages = 4, .micro = 8, .fwd = f, .bwd = b, .comm = 0.1, .recompute = rec};
	PipeSim a, m;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &a));
	CU_ASSERT_DOUBLE_EQUAL(a.time, 73.6, 1e-9);
	CU_ASSERT_EQUAL(a.master, 3);
	p.sched = SCHED_MERAK;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &m));
	CU_ASSERT_TRUE(m.time < a.time - 8);
	CU_ASSERT_TRUE(m.master != 3);
	pipe_sim_free(&a);
	pipe_sim_free(&m);
	/* without recomputation the head bounds both alike: Merak no slower */
	p.recompute = NULL;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &m));
	p.sched = SCHED_1F1B;
	CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &a));
	CU_ASSERT_TRUE(m.time <= a.time + 1e-9);
	pipe_sim_free(&a);
	pipe_sim_free(&m);
}

static unsigned rng = 12345;

static double
rnd(void)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8 & 0xffff) / 65536.0;
}

/* Every partition of n items into k non-empty contiguous stages: call fn. */
static void
each_partition(int n, int k, int *cut, int s, void (*fn)(const int *, void *), void *arg)
{
	if (s == k) {
		if (cut[k - 1] < n) {
			cut[k] = n;
			fn(cut, arg);
		}
		return;
	}
	for (int c = cut[s - 1] + 1; c < n; c++) {
		cut[s] = c;
		each_partition(n, k, cut, s + 1, fn, arg);
	}
}

typedef struct {
	const double *a, *b, *f, *bw;
	int n, k, micro;
	double best;
} Brute;

static double
dp_objective(const Brute *x, const int *cut)
{
	double mx = 0, sum = 0, cc = 0;
	for (int s = 0; s < x->k; s++) {
		double t = 0;
		for (int i = cut[s]; i < cut[s + 1]; i++)
			t += x->a[i];
		mx = t > mx ? t : mx;
		sum += t;
		if (s > 0 && x->b)
			cc += x->b[(cut[s] - 1) * (x->k - 1) + (s - 1)];
	}
	return (x->micro - 1) * mx + sum + cc;
}

static void
brute_dp(const int *cut, void *arg)
{
	Brute *x = arg;
	double v = dp_objective(x, cut);
	if (x->best < 0 || v < x->best)
		x->best = v;
}

static void
brute_balance(const int *cut, void *arg)
{
	Brute *x = arg;
	double mx = 0;
	for (int s = 0; s < x->k; s++) {
		double t = 0;
		for (int i = cut[s]; i < cut[s + 1]; i++)
			t += x->a[i];
		mx = t > mx ? t : mx;
	}
	if (x->best < 0 || mx < x->best)
		x->best = mx;
}

static double
sim_time(const Brute *x, const int *cut)
{
	double sf[8], sb[8];
	pipe_stage_sums(x->f, cut, x->k, sf);
	pipe_stage_sums(x->bw, cut, x->k, sb);
	PipeSpec p = {.nstages = x->k, .micro = x->micro, .fwd = sf, .bwd = sb, .comm = 0.1};
	PipeSim s;
	pipe_simulate(&p, &s);
	double t = s.time;
	pipe_sim_free(&s);
	return t;
}

static void
brute_sim(const int *cut, void *arg)
{
	Brute *x = arg;
	double v = sim_time(x, cut);
	if (x->best < 0 || v < x->best)
		x->best = v;
}

static bool
valid_cut(const int *cut, int n, int k)
{
	if (cut[0] != 0 || cut[k] != n)
		return false;
	for (int s = 0; s < k; s++)
		if (cut[s + 1] <= cut[s])
			return false;
	return true;
}

/* pipe_dp and Algorithm 1 reach the brute-force optimum on random arrays */
static void
dp_matches_brute_force(void)
{
	for (int trial = 0; trial < 300; trial++) {
		int n = 1 + trial % 9, k = 1 + (trial / 9) % 4;
		if (k > n)
			continue;
		double a[9], b[9 * 3];
		for (int i = 0; i < n; i++)
			a[i] = 0.1 + rnd() * (trial % 3 ? 1 : 10);
		for (int i = 0; i < n * (k - 1 > 0 ? k - 1 : 1); i++)
			b[i] = rnd() * 0.5;
		Brute x = {.a = a, .b = trial % 2 ? b : NULL, .n = n, .k = k,
			.micro = 1 + trial % 5, .best = -1};
		int cut[10] = {0}, got[10];
		if (k == 1) {
			cut[1] = n;
			brute_dp(cut, &x);
		} else {
			each_partition(n, k, cut, 1, brute_dp, &x);
		}
		double v = pipe_dp(a, n, k, x.b, x.micro, got);
		CU_ASSERT_DOUBLE_EQUAL(v, x.best, 1e-9);
		CU_ASSERT_TRUE(valid_cut(got, n, k));
		CU_ASSERT_DOUBLE_EQUAL(dp_objective(&x, got), v, 1e-9);

		x.best = -1;
		if (k == 1)
			brute_balance(cut, &x);
		else
			each_partition(n, k, cut, 1, brute_balance, &x);
		v = pipe_balance(a, n, k, got);
		CU_ASSERT_DOUBLE_EQUAL(v, x.best, 1e-9);
		CU_ASSERT_TRUE(valid_cut(got, n, k));
	}
	int cut[3];
	double a[2] = {1, 2};
	CU_ASSERT(pipe_dp(a, 2, 3, NULL, 1, cut) < 0);
	CU_ASSERT(pipe_balance(a, 2, 0, cut) < 0);
}

/* The objective of a heterogeneous cut, computed here from the problem's
 * arrays: < 0 when a stage is over its memory. */
typedef struct {
	const PipeProblem *p;
	double best;
	int nfeasible;
} Hetero;

static double
hetero_objective(const PipeProblem *p, const int *cut)
{
	double mx = 0, sum = 0;
	for (int j = 0; j < p->k; j++) {
		double t = 0, m = 0;
		for (int i = cut[j]; i < cut[j + 1]; i++) {
			for (int c = 0; c < p->ncomp; c++)
				t += p->coef[j * p->ncomp + c] * p->item[i * p->ncomp + c];
			for (int c = 0; c < p->nmem; c++)
				m += p->mem_coef[j * p->nmem + c] * p->mem_item[i * p->nmem + c];
		}
		if (p->nmem && m > p->mem_cap[j])
			return -1;
		mx = t > mx ? t : mx;
		sum += t;
		if (j > 0 && p->cut)
			sum += p->cut[(cut[j] - 1) * (p->k - 1) + (j - 1)];
	}
	return (p->micro - 1) * mx + sum;
}

static void
brute_hetero(const int *cut, void *arg)
{
	Hetero *x = arg;
	double v = hetero_objective(x->p, cut);
	if (v >= 0) {
		x->nfeasible++;
		if (x->best < 0 || v < x->best)
			x->best = v;
	}
}

/* pipe_dp_stages: stages with their own speeds, links and memory reach the
 * brute-force optimum, or report that nothing fits */
static void
dp_stages_brute_force(void)
{
	int infeasible = 0, limited = 0;
	for (int trial = 0; trial < 600; trial++) {
		int n = 1 + trial % 8, k = 1 + (trial / 8) % 4;
		if (k > n)
			continue;
		double item[8 * 3], coef[4 * 3], cutc[8 * 3], mi[8 * 2], mc[4 * 2], cap[4];
		for (int i = 0; i < n * 3; i++)
			item[i] = rnd() * (i % 3 == 2 ? 3 : 1);
		for (int j = 0; j < k * 3; j++)
			coef[j] = 0.2 + rnd() * (trial % 4 ? 2 : 0.1);
		for (int i = 0; i < n * 3; i++)
			cutc[i] = rnd() * 0.3;
		for (int i = 0; i < n * 2; i++)
			mi[i] = rnd();
		for (int j = 0; j < k; j++) {
			mc[j * 2] = 4;
			mc[j * 2 + 1] = k - j;
			cap[j] = 1 + rnd() * 10 * n / k;
		}
		PipeProblem p = {.n = n, .k = k, .micro = 1 + trial % 6, .ncomp = 3, .item = item,
			.coef = coef, .cut = trial % 2 ? cutc : NULL, .nmem = trial % 3 ? 2 : 0,
			.mem_item = mi, .mem_coef = mc, .mem_cap = cap};
		Hetero x = {.p = &p, .best = -1};
		int cut[10] = {0}, got[10];
		if (k == 1) {
			cut[1] = n;
			brute_hetero(cut, &x);
		} else {
			each_partition(n, k, cut, 1, brute_hetero, &x);
		}
		double v = pipe_dp_stages(&p, got);
		if (x.best < 0) {
			CU_ASSERT(v < 0);
			infeasible++;
			continue;
		}
		limited += p.nmem > 0;
		CU_ASSERT_DOUBLE_EQUAL(v, x.best, 1e-9);
		CU_ASSERT_TRUE(valid_cut(got, n, k));
		CU_ASSERT_DOUBLE_EQUAL(hetero_objective(&p, got), v, 1e-9);
		for (int j = 0; j < k; j++) /* the time of a stage, as the problem says */
			CU_ASSERT_DOUBLE_EQUAL(pipe_stage_time(&p, j, got[j], got[j + 1]),
			    hetero_objective(&(PipeProblem){.n = got[j + 1] - got[j], .k = 1, .micro = 1,
				.ncomp = 3, .item = item + got[j] * 3, .coef = coef + j * 3}, (int[]){0,
				got[j + 1] - got[j]}), 1e-12);
	}
	CU_ASSERT(infeasible > 40);     /* the memory limits bite, */
	CU_ASSERT(limited > 150);       /* and often leave a partition */
}

/* AutoPipe's heuristic: a valid partition, its reported time is the
 * simulator's, never worse than Algorithm 1's, never better than the best */
static void
autopipe_heuristic(void)
{
	int improved = 0;
	for (int trial = 0; trial < 120; trial++) {
		int n = 2 + trial % 7, k = 2 + (trial / 7) % 3;
		if (k > n)
			continue;
		double f[8], bw[8], w[8];
		for (int i = 0; i < n; i++) {
			f[i] = 0.2 + rnd();
			bw[i] = 2 * f[i] * (0.8 + 0.4 * rnd());
			w[i] = f[i] + bw[i];
		}
		Brute x = {.f = f, .bw = bw, .n = n, .k = k, .micro = 2 + trial % 6, .best = -1};
		int cut[9] = {0}, got[9], start[9];
		each_partition(n, k, cut, 1, brute_sim, &x);
		double t = pipe_autopipe(f, bw, n, k, x.micro, 0.1, got);
		CU_ASSERT_TRUE(valid_cut(got, n, k));
		CU_ASSERT_DOUBLE_EQUAL(t, sim_time(&x, got), 1e-9);
		pipe_balance(w, n, k, start);
		double t0 = sim_time(&x, start);
		CU_ASSERT(t <= t0 + 1e-12);
		CU_ASSERT(t >= x.best - 1e-9);
		improved += t < t0 - 1e-12;
	}
	CU_ASSERT(improved > 0); /* the heuristic does something on some inputs */
}

/* ------------------------------------------------------- pipe_shard */

/* In how many template instances (blocks) t is read: a common tensor,
 * relayed between subgraphs, is read in more than one. */
static int
in_blocks(Graph *g, TensorId t)
{
	int n = 0, seen[64];
	for (int u = 0; u < g->nusers[t]; u++) {
		int gr = g->nodes[g->users[t][u]].group, b = -1;
		for (int tm = 0, base = 0; tm < g->ntemplates && gr >= 0; tm++) {
			Template *T = &g->templates[tm];
			for (int i = 0; i < T->ninstances * T->ngroups; i++)
				if (T->inst[i] == gr)
					b = base + i / T->ngroups;
			base += T->ninstances;
		}
		bool dup = b < 0;
		for (int j = 0; j < n && !dup; j++)
			dup = seen[j] == b;
		if (!dup && n < 64)
			seen[n++] = b;
	}
	return n;
}

/* Merak's invariants on every fixture: ids in node order, at most the
 * bound, and every value read in a later subgraph comes from the one just
 * before (graph inputs stay with their first user; common tensors, read
 * in more than one block, are relayed).  And the granularity: GPT's cuts
 * fall between sub-layers (at the residual Adds), not inside them. */
static void
shard_fixtures(void)
{
	const char *names[] = {"gpt", "bert", "t5", "resnet", "resmlp", "cnn", "mlp", "ln17", "tied"};
	for (size_t f = 0; f < sizeof names / sizeof *names; f++) {
		Graph *g = fixture_graph(names[f]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		int blocks = 1;
		for (int t = 0; t < g->ntemplates; t++)
			if (g->templates[t].ninstances > blocks)
				blocks = g->templates[t].ninstances;
		int *sub = calloc(g->nnodes + 1, sizeof *sub);
		int bound = 2 * blocks + 4;
		int k = pipe_shard(g, bound, sub);
		CU_ASSERT(k >= 2 && k <= bound);
		CU_ASSERT_EQUAL(sub[0], 0);
		CU_ASSERT_EQUAL(sub[g->nnodes - 1], k - 1);
		for (NodeId n = 1; n < g->nnodes; n++)
			CU_ASSERT(sub[n] == sub[n - 1] || sub[n] == sub[n - 1] + 1);
		for (NodeId n = 0; n < g->nnodes; n++) {
			Node *nd = &g->nodes[n];
			for (int i = 0; i < nd->nin; i++) {
				TensorId t = nd->in[i];
				if (t == IR_NONE || g->tensors[t].kind != TK_VALUE)
					continue;
				NodeId p = g->tensors[t].producer;
				bool relayed = in_blocks(g, t) > 1;
				CU_ASSERT(sub[p] <= sub[n]);
				if (!relayed && sub[p] + 1 < sub[n])
					printf("\n%s: '%s' reads %s of '%s' across %d cuts\n", names[f],
					    nd->name, g->tensors[t].name, g->nodes[p].name, sub[n] - sub[p]);
				CU_ASSERT(relayed || sub[p] + 1 >= sub[n]);
			}
		}
		/* graph inputs: every reader in one subgraph */
		for (int i = 0; i < g->ninputs; i++) {
			TensorId t = g->inputs[i];
			if (in_blocks(g, t) > 1)
				continue;
			for (int u = 1; u < g->nusers[t]; u++)
				CU_ASSERT_EQUAL(sub[g->users[t][u]], sub[g->users[t][0]]);
		}
		free(sub);
		ir_free(g);
	}
	/* one subgraph when asked for one */
	Graph *g = fixture_graph("gpt");
	int *sub = calloc(g->nnodes + 1, sizeof *sub);
	CU_ASSERT_EQUAL(pipe_shard(g, 1, sub), 1);
	/* GPT, 2 blocks, bound 8: the token embedding, the position embedding
	 * with attention 0, FFN 0, attention 1, FFN 1, final LayerNorm + head */
	static const char *starts[] = {"/wte/Gather", "/wpe/Gather", "/h.0/ln_2/ReduceMean",
		"/h.1/ln_1/ReduceMean", "/h.1/ln_2/ReduceMean", "/ln_f/ReduceMean"};
	CU_ASSERT_EQUAL_FATAL(pipe_shard(g, 8, sub), 6);
	for (NodeId n = 0, k = 0; n < g->nnodes; n++)
		if (n == 0 || sub[n] != sub[n - 1])
			CU_ASSERT_STRING_EQUAL(g->nodes[n].name, starts[k++]);
	free(sub);
	ir_free(g);
}

/* A node reading one graph input twice (Mul(x, x)): pipe_shard once read
 * the subgraph of the node it was still placing.  The ids start as garbage
 * here, so a read before the write shows up as an id out of range. */
static void
shard_same_input_twice(void)
{
	Graph *g = ir_new("sq");
	g->opset = 13;
	TensorId x = ir_add_tensor(g, "x", TK_INPUT, DT_F32);
	ir_set_shape(ir_tensor(g, x), 2, (int64_t[]){2, 4});
	ir_add_input(g, x);
	TensorId y = ir_add_tensor(g, "y", TK_VALUE, DT_F32), z = ir_add_tensor(g, "z", TK_VALUE, DT_F32);
	ir_add_node(g, OP_Mul, "sq", 2, (TensorId[]){x, x}, 1, &y);
	ir_add_node(g, OP_Mul, "sq2", 2, (TensorId[]){y, x}, 1, &z);
	ir_add_output(g, z);
	CU_ASSERT_TRUE_FATAL(ir_infer_all(g));
	ir_reindex(g);
	int sub[3] = {-12345678, -12345678, -12345678};
	int k = pipe_shard(g, 4, sub);
	CU_ASSERT(k >= 1 && k <= 2);
	for (int n = 0; n < 2; n++)
		CU_ASSERT(sub[n] >= 0 && sub[n] < k);
	ir_free(g);
}

/* stage-assign on GPT (2 blocks, 6 subgraphs) over 2 and 3 stages: a
 * contiguous cover in node order, the stage table's simulation is the
 * reported time, no worse than Megatron's even split (when there is one) */
static void
stage_assign_gpt(void)
{
	for (int k = 2; k <= 3; k++) {
		Graph *g = fixture_graph("gpt");
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		PassCtx cx = {0};
		g->cost.train = true; /* 1F1B, the simulation below */
		ir_cluster_mesh(&g->cluster, 1, k, &g->cost);
		g->mesh = (Mesh){.rows = 1, .cols = k, .dp = 1, .tp = 1, .pp = k};
		g->microbatches = 4;
		CU_ASSERT_TRUE_FATAL(pass_pipe_shard(g, &cx));
		CU_ASSERT_TRUE_FATAL(pass_stage_assign(g, &cx));
		CU_ASSERT_EQUAL(g->nstages, k);
		CU_ASSERT_EQUAL(g->nsubgraphs, 6);
		CU_ASSERT_EQUAL(g->stages[0].first, 0);
		for (int s = 0; s < k; s++) {
			CU_ASSERT(g->stages[s].nsub >= 1);
			if (s) {
				CU_ASSERT_EQUAL(g->stages[s].first, g->stages[s - 1].first + g->stages[s - 1].nsub);
			}
		}
		CU_ASSERT_EQUAL(g->stages[k - 1].first + g->stages[k - 1].nsub, 6);
		for (NodeId n = 1; n < g->nnodes; n++)
			CU_ASSERT(g->nodes[n].stage >= g->nodes[n - 1].stage);
		double fw[3], bw[3];
		for (int s = 0; s < k; s++)
			fw[s] = g->stages[s].fwd, bw[s] = g->stages[s].bwd;
		PipeSpec p = {.nstages = k, .micro = 4, .fwd = fw, .bwd = bw, .comm = g->pipe_comm};
		PipeSim sim;
		CU_ASSERT_TRUE_FATAL(pipe_simulate(&p, &sim));
		CU_ASSERT_DOUBLE_EQUAL(sim.time, g->pipe_time, 1e-12);
		pipe_sim_free(&sim);
		if (k == 2) {
			CU_ASSERT(g->pipe_even_time > 0 && g->pipe_time <= g->pipe_even_time);
		} else {
			CU_ASSERT(g->pipe_even_time < 0); /* 2 blocks cannot fill 3 stages evenly */
		}
		ir_free(g);
	}
	/* more stages than subgraphs is an error, not a crash */
	Graph *g = fixture_graph("mlp");
	PassCtx cx = {0};
	ir_cluster_mesh(&g->cluster, 1, 8, &g->cost);
	g->mesh = (Mesh){.rows = 1, .cols = 8, .dp = 1, .tp = 1, .pp = 8};
	g->microbatches = 1;
	CU_ASSERT_TRUE_FATAL(pass_pipe_shard(g, &cx));
	quiet_diags();
	CU_ASSERT_FALSE(pass_stage_assign(g, &cx));
	CU_ASSERT_PTR_NOT_NULL(strstr(diag_last, "cuts into only"));
	ir_free(g);
}

/* -slice on GPT over 2 stages, 3 micro-batches as 6 halves: the
 * schedule pass solves the sliced count (at least 1, at most the pairs),
 * the sliced pairs' forward halves are sent one by one (FWD 2p, its
 * SENDs, FWD 2p+1, its SENDs), the others' after both halves (FWD 2p,
 * FWD 2p+1, SENDs of 2p, SENDs of 2p+1); the stage receiving them reads
 * every half before its forward; the simulated step is no longer than
 * with no pair sliced, and shorter than that here (stage 1 starts after
 * half a micro-batch). */
static void
schedule_slice_gpt(void)
{
	Graph *g = fixture_graph("gpt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	PassCtx cx = {0};
	ir_cluster_mesh(&g->cluster, 1, 2, &g->cost);
	g->mesh = (Mesh){.rows = 1, .cols = 2, .dp = 1, .tp = 1, .pp = 2};
	g->microbatches = 6;
	g->slice = 1;
	CU_ASSERT_TRUE_FATAL(pass_pipe_shard(g, &cx));
	CU_ASSERT_TRUE_FATAL(pass_stage_assign(g, &cx));
	CU_ASSERT_TRUE_FATAL(pass_schedule(g, &cx));
	CU_ASSERT(g->slice >= 1 && g->slice <= 2); /* at most the stage count */
	CU_ASSERT(g->sched_time > 0 && g->sched_time < g->slice_none_time);
	/* stage 0: the order of its forwards and sends */
	const StageSched *st = &g->sched[0];
	int seq[64], n = 0;
	for (int i = 0; i < st->nsteps && n < 64; i++) {
		const SchedStep *x = &st->steps[i];
		if (x->kind == STEP_FWD)
			seq[n++] = x->micro;
		else if (x->kind == STEP_SEND && (n == 0 || seq[n - 1] != 100 + x->micro))
			seq[n++] = 100 + x->micro; /* one entry per run of sends */
	}
	int want[64], w = 0;
	for (int p = 0; p < 3; p++)
		if (p < g->slice) {
			want[w++] = 2 * p, want[w++] = 100 + 2 * p;
			want[w++] = 2 * p + 1, want[w++] = 100 + 2 * p + 1;
		} else {
			want[w++] = 2 * p, want[w++] = 2 * p + 1;
			want[w++] = 100 + 2 * p, want[w++] = 100 + 2 * p + 1;
		}
	CU_ASSERT_EQUAL_FATAL(n, w);
	CU_ASSERT_EQUAL(memcmp(seq, want, sizeof *seq * w), 0);
	/* stage 1: every forward after its receives */
	int got = 0;
	for (int i = 0; i < g->sched[1].nsteps; i++) {
		const SchedStep *x = &g->sched[1].steps[i];
		if (x->kind == STEP_RECV)
			got |= 1 << x->micro;
		if (x->kind == STEP_FWD)
			CU_ASSERT(got & (1 << x->micro));
	}
	ir_free(g);
}

/*
 * Merak's sub-pipelined TMP (§5.3): pipe_subpipe_stage against the paper's
 * closed forms for K layers of two blocks alike, each ending with its
 * all-reduce (T_m, T_a a layer's forward compute and communication):
 *   forward  1/4 T_m + (K - 1/4) max{T_m, T_a} + 1/4 T_a
 *   backward 1/2 T_m + (K - 1/4) max{2 T_m, T_a} + 1/4 T_a
 * (a half's block computes a quarter of the layer's forward, half of its
 * backward, and all-reduces a quarter of its bytes); and pipe_subpipe_time
 * on uneven blocks against a timeline worked by hand.
 */
static void
subpipe_paper_formula(void)
{
	static const double tm[] = {1, 2, 1, 3}, ta[] = {2, 1, 1, 0.5};
	for (int K = 1; K <= 4; K++)
		for (int i = 0; i < 4; i++) {
			double m = tm[i], a = ta[i];
			double fp = m / 4 + (K - 0.25) * fmax(m, a) + a / 4;
			double bp = m / 2 + (K - 0.25) * fmax(2 * m, a) + a / 4;
			CU_ASSERT_DOUBLE_EQUAL(pipe_subpipe_stage(K * m / 2, K * a / 2, 2 * K), fp, 1e-12);
			CU_ASSERT_DOUBLE_EQUAL(pipe_subpipe_stage(K * m, K * a / 2, 2 * K), bp, 1e-12);
			/* never slower than the halves one after the other */
			CU_ASSERT_TRUE(fp <= 2 * (K * m / 2 + K * a / 2) + 1e-12);
		}
	/* A 0-1 (A computes), B 1-2, A's all-reduce 1-3, B's 3-5; A 3-6, B 6-9,
	 * A's 6-7, B's 9-10: the pair ends at 10 (14 one half after the other) */
	double c[] = {1, 3, 0}, a[] = {2, 1};
	CU_ASSERT_DOUBLE_EQUAL(pipe_subpipe_time(c, a, 2), 10, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(pipe_subpipe_stage(5, 1, 0), 12, 1e-12); /* nothing to overlap */
}

void
suite_pipeline(CU_pSuite s)
{
	ADD(s, sim_forward_two_stages);
	ADD(s, sim_1f1b_three_stages);
	ADD(s, sim_1f1b_unbalanced);
	ADD(s, schedule_orders);
	ADD(s, sim_gpipe_and_deadlock);
	ADD(s, sim_merak_head);
	ADD(s, sim_release_by_hand);
	ADD(s, schedule_slice_gpt);
	ADD(s, subpipe_paper_formula);
	ADD(s, svg_chart);
	ADD(s, dp_matches_brute_force);
	ADD(s, dp_stages_brute_force);
	ADD(s, autopipe_heuristic);
	ADD(s, shard_fixtures);
	ADD(s, shard_same_input_twice);
	ADD(s, stage_assign_gpt);
}
