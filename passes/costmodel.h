/*
 * costmodel.h - the cost model of a whole plan (AMP §4.2, §4.3), the one
 * module every pass that weighs a plan asks: mesh-map for each candidate,
 * stage-assign for the chosen plan's stages, plan.json for the record.
 *
 * The model, per candidate (dp, tp, pp, micro-batch size b, placement),
 * on a graph whose pipe-shard subgraphs are the layers:
 *   compute  a stage's FLOPs (one rank's share under TAP's plan for tp)
 *            at the slowest device of its TP group, times alpha (eq. 3),
 *            plus op_latency per operator call (a calibrated launch cost)
 *            and the bytes each operator reads and writes at the device's
 *            mem_bw (when given: what makes elementwise work cost);
 *   TP sync  each collective: latency + beta * ring bytes / slowest link
 *            of the TP group's ring (eq. 1, see docs/planner.md);
 *   p2p      activations crossing a cut: latency + beta * bytes / link;
 *   pipeline eq. 4: (M-1) max t_i + sum c_i + sum t_i, the stages cut by
 *            pipe_dp_stages with each stage's own device speeds;
 *   DP sync  each stage's gradients all-reduced over its DP group (eq. 1);
 *   total    eq. 2: the slowest pipeline plus the slowest DP sync.
 * Training (CostModel.train) runs backward at twice the forward FLOPs and
 * every collective and transfer twice; inference has no backward and no DP
 * sync.  Memory per device is a hard limit: weights (x4 for training:
 * gradients and Adam's two moments) plus the activations of the
 * micro-batches in flight (1F1B: min(pp - stage, M)).
 *
 * Subgraph costs are taken once per TP degree on the graph as shaped (the
 * batch B) and scale with b / B.
 */
#ifndef TAPC_COSTMODEL_H
#define TAPC_COSTMODEL_H

#include "passes/passes.h"

/* One pipe-shard subgraph for one TP degree, at the graph's batch. */
typedef struct {
	double flops;                   /* one rank's forward FLOPs */
	double coll_bytes;              /* TP collectives: ring bytes (all-reduce 2(n-1)/n x M) */
	double ncoll;                   /* TP collectives, forward */
	double nops;                    /* operator calls, forward (views and collectives not) */
	double bytes;                   /* one rank's activation bytes its operators read and write */
	double wread;                   /* ... and weight bytes they read (per micro-batch, unscaled) */
	double act_bytes;               /* one rank's activations (every op's outputs) */
	double weight_bytes;            /* one rank's weights */
	double cross_bytes;             /* one rank's share of what crosses the cut after it */
} SubCost;

/* A stage's rates on its devices (worst over the replicas, or one's). */
typedef struct {
	double flop_s;                  /* seconds per forward FLOP: alpha / slowest device */
	double byte_s;                  /* seconds per byte an operator streams (0: not modelled) */
	double coll_s;                  /* seconds per TP ring byte: beta / slowest ring link */
	double next_s;                  /* seconds per byte to the next stage: beta / link */
	double memory;                  /* bytes of its smallest device */
} StageRate;

typedef struct CostMemo CostMemo;

typedef struct {
	Graph *g;
	const Cluster *c;
	bool train;
	int64_t batch;                  /* the rows the graph is shaped at */
	int nsub;                       /* subgraphs: pipe-shard's, or 1 */
	int ntp;
	int tpv[64];                    /* TP degrees costed so far */
	SubCost *sub[64];               /* ... their [nsub] costs */
	CostMemo *memo;                 /* stage cuts by the candidate's rates */
	int64_t evals;                  /* cm_evaluate calls */
	int64_t cuts;                   /* ... that ran pipe_dp_stages */
	int *dev;                       /* scratch: rank -> device */
	StageRate *rate;                /* scratch */
} CostCtx;

void cm_init(CostCtx *m, Graph *g);
void cm_free(CostCtx *m);
/* Per-subgraph costs for tp (TAP's search for tp runs once, then cached). */
const SubCost *cm_subcosts(CostCtx *m, int tp);
/* Rates of every stage of a placement dev (rank -> device): replica d, or
 * the worst over the replicas for d < 0. */
void cm_rates(const Cluster *c, const int *dev, int dp, int tp, int pp, int d, StageRate *r);
/* Bytes/s of the slowest link of a ring through devs[0..n-1] (n < 2: inf). */
double cm_ring_bw(const Cluster *c, const int *devs, int n);
/*
 * Evaluate a candidate: fills p->seconds (< 0 if it does not fit in memory
 * or cannot be cut into pp stages), pipeline, dpsync, memory.  cut gets
 * the stage boundaries (pp + 1) when not NULL.
 */
void cm_evaluate(CostCtx *m, PlanChoice *p, int *cut);

#endif
