/*
 * memplan.c - place a rank's activations in one arena, reusing memory.
 *
 * A rank runs its stage's schedule (Graph.sched, passes/schedule.c): the
 * forward, backward and recompute steps of every micro-batch, receives,
 * sends, gradient buckets and the optimizer.  Each value gets an instance
 * per micro-batch it is computed or received for (a recompute makes a new
 * one), living from the step that makes it to its last reader's, so the
 * arena holds every micro-batch in flight under the schedule: a forward
 * activation the backward reads lives from the forward of micro-batch k to
 * its backward.  Graph outputs computed in the stage are written straight
 * into the program's output buffers, inputs are read from the program's,
 * and views (Reshape and friends) and in-place outputs (optimizers,
 * GradAccumulate) are their source's bytes.  The step functions bind each
 * tensor to its instance's offset per micro-batch (MemPlan.off).
 * Blocks are placed two ways, and the smaller arena wins: largest first at
 * the lowest offset free for their lifetime (every lifetime is known), or
 * first-fit in a free list as the schedule is walked in order, returned
 * after their last use; all offsets 64-byte aligned.  An inference
 * program takes largest first whichever is smaller, placed with small
 * blocks kept off recently freed bytes (EMIT_COOL_BYTES): on two
 * threads a kernel's stores over lines the other core read last wait for
 * each line (6-28 ns against 0.7 on the Zen 4 VM, by where the host puts
 * the vCPUs), and by the time a core's L2 worth of other tensors has been
 * made, the other core's copies are mostly gone.
 * Weights the stage reads get a separate region, packed once.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/emit.h"
#include "passes/pipeline.h"

#define ALIGN(x) (((x) + 63) & ~(int64_t)63)

typedef struct {
	int64_t off, size;
} Block;

typedef struct {
	Block *b;
	int n, cap;
	int64_t top;                    /* high-water mark */
} FreeList;

static int64_t
take(FreeList *fl, int64_t size)
{
	for (int i = 0; i < fl->n; i++) {
		if (fl->b[i].size < size)
			continue;
		int64_t off = fl->b[i].off;
		fl->b[i].off += size;
		fl->b[i].size -= size;
		if (!fl->b[i].size)
			fl->b[i] = fl->b[--fl->n];
		return off;
	}
	int64_t off = fl->top;
	if (__builtin_add_overflow(fl->top, size, &fl->top) || fl->top > EMIT_MAX_REGION)
		fl->top = EMIT_MAX_REGION + 1; /* emit_program refuses the plan */
	return off > EMIT_MAX_REGION ? EMIT_MAX_REGION : off;
}

static int
by_off(const void *a, const void *b)
{
	int64_t x = ((const Block *)a)->off, y = ((const Block *)b)->off;
	return (x > y) - (x < y);
}

static void
give(FreeList *fl, int64_t off, int64_t size)
{
	if (fl->n == fl->cap) {
		fl->cap = fl->cap ? fl->cap * 2 : 64;
		fl->b = realloc(fl->b, sizeof *fl->b * fl->cap);
		if (!fl->b)
			die("out of memory");
	}
	fl->b[fl->n++] = (Block){off, size};
	/* coalesce neighbours so large tensors can reuse freed space */
	qsort(fl->b, fl->n, sizeof *fl->b, by_off);
	int k = 0;
	for (int i = 1; i < fl->n; i++) {
		if (fl->b[k].off + fl->b[k].size == fl->b[i].off)
			fl->b[k].size += fl->b[i].size;
		else
			fl->b[++k] = fl->b[i];
	}
	fl->n = k + 1;
}

/* Does t, a value node n computes its output from, die there: computed in
 * n's stage, read by n alone (once), neither t nor n's output a graph
 * output, and t's bytes its own -- not a view's (Reshape, Squeeze, a
 * zero Pad...), whose source may be read later, or be a graph input or
 * output? */
static bool
dies_at(const Graph *g, NodeId n, TensorId t)
{
	const Node *nd = &g->nodes[n];
	const Tensor *tt = &g->tensors[t];
	if (tt->kind != TK_VALUE || tt->producer == IR_NONE ||
	    emit_stage(g, tt->producer) != emit_stage(g, n) || g->nusers[t] != 1 ||
	    g->users[t][0] != n || ir_is_output(g, t) || ir_is_output(g, nd->out[0]))
		return false;
	Op pop = g->nodes[tt->producer].op;
	if (ir_op_is_view(pop) || pop == OP_Pad) /* a Pad that is no view is a copy: lost only */
		return false;
	int reads = 0;
	for (int i = 0; i < nd->nin; i++)
		reads += nd->in[i] == t;
	return reads == 1;
}

int
emit_inplace(const Graph *g, NodeId n, int out)
{
	switch (g->nodes[n].op) { /* the optimizers: (weight, grad, state...) -> (weight, state...) */
	case OP_SGD: case OP_AdamW:
		return out == 0 ? 0 : out + 1;
	case OP_GradAccumulate: /* (sum, dW) -> sum */
		return 0;
	case OP_FusedSqueezeExcite:
		/* x * e into x when x dies here: the bytes the convolution
		 * before it wrote, each thread's share in its own cache (and
		 * no second buffer of x's size) */
		return out == 0 && dies_at(g, n, g->nodes[n].in[0]) ? 0 : -1;
	default:
		return -1;
	}
}

bool
emit_is_view(Graph *g, NodeId id)
{
	Node *n = &g->nodes[id];
	switch (n->op) {
	case OP_Pad: {
		/* all pads known to be zero (torch's AvgPool2d export): a copy */
		const Attr *a = ir_attr(g, id, "pads");
		const int64_t *p = a && a->type == ATTR_INTS ? a->is : NULL;
		int64_t np = a && a->type == ATTR_INTS ? a->n : 0;
		if (!a && n->nin > 1 && n->in[1] != IR_NONE && g->tensors[n->in[1]].dtype == DT_I64 &&
		    g->tensors[n->in[1]].rank >= 0) {
			p = ir_value(g, n->in[1]);
			np = ir_numel(&g->tensors[n->in[1]]);
		}
		if (!p || (n->nin > 3 && n->in[3] != IR_NONE)) /* no pads, or axes */
			return false;
		for (int64_t i = 0; i < np; i++)
			if (p[i] != 0)
				return false;
		break;
	}
	default:
		if (ir_op_is_view(n->op))
			break;
		return false;
	}
	if (n->in[0] == IR_NONE || n->out[0] == IR_NONE)
		return false;
	for (int i = 0; i < g->noutputs; i++) /* outputs are computed into their buffer */
		if (g->outputs[i] == n->out[0])
			return false;
	return true;
}

int
emit_nstages(const Graph *g)
{
	return g->mesh.pp > 1 ? g->mesh.pp : 1;
}

int
emit_stage(const Graph *g, NodeId n)
{
	return g->mesh.pp > 1 ? g->nodes[n].stage : 0;
}

bool
emit_check_stages(Graph *g)
{
	int k = emit_nstages(g), prev = 0;
	for (NodeId n = 0; k > 1 && n < g->nnodes; n++) {
		if (g->nodes[n].dead)
			continue;
		int s = g->nodes[n].stage;
		bool fwd = g->nodes[n].phase == PHASE_FWD; /* backward runs the stages backwards */
		if ((fwd && s < prev) || s < 0 || s >= k) {
			diag_error("%s: node '%s' is in stage %d, but the program has %d pipeline stages "
			    "in order (run stage-assign: -passes=...,pipe-shard,stage-assign)", g->model,
			    g->nodes[n].name, s, k);
			return false;
		}
		if (fwd)
			prev = s;
	}
	return true;
}

/* The stage that owns tensor t: its producer's, else (inputs, weights,
 * constants) the first stage that reads it, else stage 0. */
int
emit_tensor_stage(const Graph *g, TensorId t)
{
	const Tensor *tt = &g->tensors[t];
	if (tt->producer != IR_NONE)
		return emit_stage(g, tt->producer);
	int s = -1;
	for (int i = 0; i < g->nusers[t]; i++) {
		int u = emit_stage(g, g->users[t][i]);
		if (!g->nodes[g->users[t][i]].dead && (s < 0 || u < s))
			s = u;
	}
	return s < 0 ? 0 : s;
}

/* The instances of tensors a stage's schedule makes: one per value per
 * micro-batch it is computed (or received) for, again when recomputed. */
typedef struct {
	TensorId t;                     /* the tensor owning the bytes (a view's source) */
	int born, last;                 /* events: made, last read */
	int64_t off;
} Inst;

typedef struct {
	Graph *g;
	MemPlan *mp;
	int stage, M;
	Inst *inst;
	int ninst, capinst;
	int *cur;                       /* [ntensors * M]: the live instance of (t, micro) */
	int **use;                      /* per step: instance each tensor is bound to, -1 */
	int event;
} Plan;

static TensorId
root(const MemPlan *mp, TensorId t)
{
	return mp->view[t] != IR_NONE ? mp->view[t] : t;
}

/* Does t's memory live in the arena (not weights, constants or the
 * program's input and output buffers)? */
static bool
in_arena(const Graph *g, const MemPlan *mp, TensorId t)
{
	TensorId r = root(mp, t);
	return g->tensors[r].kind == TK_VALUE && !mp->bound[r] && mp->woffset[r] < 0;
}

static int
make(Plan *p, TensorId t, int k)
{
	if (p->ninst == p->capinst) {
		p->capinst = p->capinst ? 2 * p->capinst : 256;
		p->inst = realloc(p->inst, sizeof *p->inst * p->capinst);
		if (!p->inst)
			die("out of memory");
	}
	p->inst[p->ninst] = (Inst){t, p->event, p->event, -1};
	p->cur[(size_t)t * p->M + k] = p->ninst;
	return p->ninst++;
}

/* Step j reads or writes tensor t of micro-batch k at the current event. */
static void
touch(Plan *p, int j, TensorId t, int k, bool write)
{
	MemPlan *mp = p->mp;
	if (t == IR_NONE || !in_arena(p->g, mp, t))
		return;
	TensorId r = root(mp, t);
	int i = write ? make(p, r, k) : p->cur[(size_t)r * p->M + k];
	if (i < 0)
		die("memplan: stage %d step %d reads '%s' of micro-batch %d before it is made",
		    p->stage, j, p->g->tensors[t].name, k);
	if (p->event > p->inst[i].last)
		p->inst[i].last = p->event;
	p->use[j][t] = i;
	p->use[j][r] = i;
}

/* The nodes of step kind `what` of the stage, in order, at micro-batch k:
 * those of part `part` of a paired step (-subpipeline: the parts end at
 * sched_split's nodes), or all for part -1.  Returns whether it ran the
 * last part. */
static bool
run_nodes(Plan *p, int j, StepKind what, int k, int part)
{
	Graph *g = p->g;
	MemPlan *mp = p->mp;
	StepKind kind = what == STEP_RECOMPUTE ? STEP_FWD : what;
	int at = 0;
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead || emit_stage(g, n) != p->stage || sched_node_step(g, n) != kind)
			continue;
		int mine = at;
		at += sched_split(g, n);
		if ((part >= 0 && mine != part) ||
		    (what == STEP_RECOMPUTE && !sched_reruns(g, p->stage, n)))
			continue;
		for (int i = 0; i < nd->nin; i++)
			touch(p, j, nd->in[i], k, false);
		for (int a = 0; a < nd->nattr; a++)
			if (nd->attr[a].type == ATTR_TENSOR)
				touch(p, j, nd->attr[a].t, k, false);
		if (emit_is_view(g, n)) {
			touch(p, j, nd->out[0], k, false); /* its source's instance */
			continue;
		}
		for (int o = 0; o < nd->nout; o++) {
			TensorId t = nd->out[o];
			if (t == IR_NONE)
				continue;
			touch(p, j, t, k, emit_inplace(g, n, o) < 0 && root(mp, t) == t);
		}
		p->event++;
	}
	return part < 0 || part >= at;
}

/* A forward's loss is read after the step: it lives to the step's end. */
static void
touch_loss(Plan *p, int j, TensorId loss, int k)
{
	if (loss == IR_NONE)
		return;
	p->event--;
	touch(p, j, loss, k, false);
	p->event++;
}

static int
by_size_desc(const void *a, const void *b, void *arg)
{
	const Plan *p = arg;
	int x = *(const int *)a, y = *(const int *)b;
	int64_t sx = ir_nbytes(&p->g->tensors[p->inst[x].t]);
	int64_t sy = ir_nbytes(&p->g->tensors[p->inst[y].t]);
	if (sx != sy)
		return sx < sy ? 1 : -1;
	return p->inst[x].born - p->inst[y].born;
}

static int
by_offset(const void *a, const void *b, void *arg)
{
	const Plan *p = arg;
	int64_t x = p->inst[*(const int *)a].off, y = p->inst[*(const int *)b].off;
	return (x > y) - (x < y);
}

/* Must b's bytes stay off a's?  Live at the same time; or, with made
 * (made[e]: the bytes of the instances made at events 0 .. e), b made
 * after a's last use, b under EMIT_COOL_BYTES, and less than that made
 * in between. */
static bool
clash(const Plan *p, const int64_t *made, const Inst *a, const Inst *b)
{
	if (a->born <= b->last && b->born <= a->last)
		return true;
	if (!made || a->last >= b->born)
		return false;
	return ALIGN(ir_nbytes(&p->g->tensors[b->t])) < EMIT_COOL_BYTES &&
	    made[b->born - 1] - made[a->last] < EMIT_COOL_BYTES;
}

/*
 * Offline placement, largest first (the greedy-by-size of TFLite's
 * planner): each instance goes at the lowest offset where it overlaps no
 * placed instance that is live at the same time (nor, with cool, whose
 * bytes it would take too soon after: clash).  Knowing every lifetime up
 * front it packs the many micro-batches' instances of a schedule much
 * tighter than first-fit in time order.  Sets Inst.off; returns the arena
 * size, or -1 (nothing placed) past PLACE_MAX instances.
 */
#define PLACE_MAX 40000

static int64_t
place_by_size(Plan *p, bool cool)
{
	if (p->ninst > PLACE_MAX)
		return -1;
	int *ord = malloc(sizeof *ord * (p->ninst + 1)), *near = malloc(sizeof *near * (p->ninst + 1));
	int64_t *made = cool ? calloc(p->event + 2, sizeof *made) : NULL;
	if (!ord || !near || (cool && !made))
		die("out of memory");
	if (made) {
		for (int i = 0; i < p->ninst; i++)
			made[p->inst[i].born] += ALIGN(ir_nbytes(&p->g->tensors[p->inst[i].t]));
		for (int e = 1; e <= p->event; e++)
			made[e] += made[e - 1];
	}
	for (int i = 0; i < p->ninst; i++)
		ord[i] = i;
	qsort_r(ord, p->ninst, sizeof *ord, by_size_desc, p);
	int64_t top = 0;
	for (int q = 0; q < p->ninst; q++) {
		Inst *x = &p->inst[ord[q]];
		int64_t size = ALIGN(ir_nbytes(&p->g->tensors[x->t]));
		int nn = 0;
		for (int r = 0; r < q; r++) { /* placed, and live with x */
			Inst *y = &p->inst[ord[r]];
			if (clash(p, made, y, x) || clash(p, made, x, y))
				near[nn++] = ord[r];
		}
		qsort_r(near, nn, sizeof *near, by_offset, p);
		int64_t off = 0;
		for (int r = 0; r < nn; r++) {
			Inst *y = &p->inst[near[r]];
			int64_t ys = ALIGN(ir_nbytes(&p->g->tensors[y->t]));
			if (off + size <= y->off)
				break;
			if (y->off + ys > off)
				off = y->off + ys;
		}
		x->off = off;
		if (off + size > top)
			top = off + size;
	}
	free(ord);
	free(near);
	free(made);
	return top;
}

/* Place the instances first-fit in event order, each given back to the
 * free list after its last use.  Sets Inst.off; returns the arena size. */
static int64_t
place_first_fit(Plan *p)
{
	int nev = p->event + 1;
	int *nfree = calloc(nev + 1, sizeof *nfree), *start = calloc(nev + 2, sizeof *start);
	int *byl = malloc(sizeof *byl * (p->ninst + 1));
	if (!nfree || !start || !byl)
		die("out of memory");
	for (int i = 0; i < p->ninst; i++)
		nfree[p->inst[i].last]++;
	for (int e = 0; e < nev; e++)
		start[e + 1] = start[e] + nfree[e];
	memset(nfree, 0, sizeof *nfree * (nev + 1));
	for (int i = 0; i < p->ninst; i++)
		byl[start[p->inst[i].last] + nfree[p->inst[i].last]++] = i;
	FreeList fl = {0};
	int next = 0;
	for (int e = 0; e < nev; e++) {
		for (; next < p->ninst && p->inst[next].born == e; next++)
			p->inst[next].off = take(&fl, ALIGN(ir_nbytes(&p->g->tensors[p->inst[next].t])));
		for (int q = start[e]; q < start[e + 1]; q++) {
			Inst *in = &p->inst[byl[q]];
			give(&fl, in->off, ALIGN(ir_nbytes(&p->g->tensors[in->t])));
		}
	}
	free(fl.b);
	free(nfree);
	free(start);
	free(byl);
	return fl.top;
}

void
emit_memplan(Graph *g, int stage, MemPlan *mp)
{
	int nt = g->ntensors;
	const StageSched *ss = &g->sched[stage];
	mp->blob = NULL;
	mp->view = malloc(sizeof *mp->view * (nt + 1));
	mp->woffset = malloc(sizeof *mp->woffset * (nt + 1));
	mp->recv = calloc(nt + 1, 1);
	mp->bound = calloc(nt + 1, 1);
	bool *used = calloc(nt + 1, 1);
	if (!mp->view || !mp->woffset || !mp->recv || !mp->bound || !used)
		die("out of memory");
	for (int t = 0; t < nt; t++) {
		mp->woffset[t] = -1;
		mp->view[t] = IR_NONE;
	}
	for (int i = 0; i < g->ninputs; i++)
		mp->bound[g->inputs[i]] = true;
	for (int i = 0; i < g->noutputs; i++) {
		TensorId t = g->outputs[i];
		/* computed here: into the output buffer; else copied out by its
		 * owner (an input stays bound to its input buffer: a view of it
		 * is bound there too) */
		if (emit_tensor_stage(g, t) == stage) {
			used[t] = true;
			if (emit_computed(g, t))
				mp->bound[t] = true;
		}
	}
	/* views and in-place outputs: the bytes of the tensor they alias */
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead || emit_stage(g, n) != stage)
			continue;
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (t == IR_NONE)
				continue;
			used[t] = true;
			if (g->tensors[t].kind == TK_VALUE && emit_stage(g, g->tensors[t].producer) != stage)
				mp->recv[t] = true;
		}
		for (int i = 0; i < nd->nout; i++)
			if (nd->out[i] != IR_NONE)
				used[nd->out[i]] = true;
		if (emit_is_view(g, n)) {
			TensorId src = nd->in[0];
			mp->view[nd->out[0]] = mp->view[src] != IR_NONE ? mp->view[src] : src;
		}
		for (int o = 0; o < nd->nout; o++) { /* in place: output o is input i's bytes */
			int i = emit_inplace(g, n, o);
			if (i >= 0 && nd->out[o] != IR_NONE) {
				TensorId src = nd->in[i];
				mp->view[nd->out[o]] = mp->view[src] != IR_NONE ? mp->view[src] : src;
			}
		}
	}

	mp->weight_bytes = 0;
	for (TensorId t = 0; t < nt; t++) {
		Tensor *tt = &g->tensors[t];
		/* weights from the model files, and optimizer state (zero) */
		if (((tt->kind == TK_WEIGHT && tt->data == DATA_FILE) || tt->kind == TK_STATE) && used[t]) {
			mp->woffset[t] = mp->weight_bytes;
			if (__builtin_add_overflow(mp->weight_bytes, ALIGN(ir_nbytes(tt)), &mp->weight_bytes) ||
			    mp->weight_bytes > EMIT_MAX_REGION)
				mp->weight_bytes = EMIT_MAX_REGION + 1;
		}
	}

	/* walk the schedule: every instance's first and last event */
	int M = g->microbatches > 1 ? g->microbatches : 1;
	Plan p = {.g = g, .mp = mp, .stage = stage, .M = M};
	p.cur = malloc(sizeof *p.cur * ((size_t)nt * M + 1));
	p.use = malloc(sizeof *p.use * (ss->nsteps + 1));
	if (!p.cur || !p.use)
		die("out of memory");
	for (size_t i = 0; i < (size_t)nt * M; i++)
		p.cur[i] = -1;
	TensorId loss = g->loss != IR_NONE && emit_tensor_stage(g, g->loss) == stage ? g->loss : IR_NONE;
	for (int j = 0; j < ss->nsteps; j++) {
		const SchedStep *st = &ss->steps[j];
		int k = st->micro >= 0 ? st->micro : M - 1; /* sync, optimizer: the step's last */
		p.use[j] = malloc(sizeof *p.use[j] * (nt + 1));
		if (!p.use[j])
			die("out of memory");
		for (TensorId t = 0; t < nt; t++)
			p.use[j][t] = -1;
		switch (st->kind) {
		case STEP_RECV:
			touch(&p, j, st->t, k, true);
			p.event++;
			break;
		case STEP_SEND:
			touch(&p, j, st->t, k, false);
			p.event++;
			break;
		case STEP_FWD: case STEP_RECOMPUTE: case STEP_BWD:
			/* a recompute: the forward nodes sched_reruns says; the
			 * others' values stay */
			if (st->pair && j + 1 < ss->nsteps) {
				/* -subpipeline: the halves part by part, as they run;
				 * step j + 1's instances are micro-batch k + 1's */
				p.use[j + 1] = malloc(sizeof *p.use[j + 1] * (nt + 1));
				if (!p.use[j + 1])
					die("out of memory");
				for (TensorId t = 0; t < nt; t++)
					p.use[j + 1][t] = -1;
				for (int part = 0;; part++) {
					run_nodes(&p, j, st->kind, k, part);
					if (run_nodes(&p, j + 1, st->kind, k + 1, part))
						break;
				}
				if (st->kind == STEP_FWD) {
					touch_loss(&p, j, loss, k);
					touch_loss(&p, j + 1, loss, k + 1);
				}
				j++;
				break;
			}
			run_nodes(&p, j, st->kind, k, -1);
			if (st->kind == STEP_FWD)
				touch_loss(&p, j, loss, k);
			break;
		case STEP_OPT:
			run_nodes(&p, j, STEP_OPT, k, -1);
			break;
		case STEP_SYNC: {
			Node *nd = &g->nodes[st->node];
			for (int i = 0; i < nd->nin; i++)
				touch(&p, j, nd->in[i], k, false);
			for (int o = 0; o < nd->nout; o++)
				touch(&p, j, nd->out[o], k, true);
			p.event++;
			break;
		}
		default:
			unreachable();
		}
	}

	/* An inference program takes the largest-first placement, cooled,
	 * whenever it placed anything; a training schedule the smaller of the
	 * two (its arena is the memory in flight its schedules are compared
	 * by: docs/pipeline.md). */
	bool infer = !ir_has_phase(g, PHASE_BWD) && !ir_has_phase(g, PHASE_OPT);
	mp->arena_bytes = place_by_size(&p, infer);
	if (mp->arena_bytes < 0 || !infer) {
		int64_t *by_size = malloc(sizeof *by_size * (p.ninst + 1));
		for (int i = 0; i < p.ninst; i++)
			by_size[i] = p.inst[i].off;
		int64_t top = place_first_fit(&p);
		if (mp->arena_bytes >= 0 && mp->arena_bytes <= top)
			for (int i = 0; i < p.ninst; i++)
				p.inst[i].off = by_size[i];
		else
			mp->arena_bytes = top;
		free(by_size);
	}
	mp->nsteps = ss->nsteps;
	mp->off = malloc(sizeof *mp->off * (ss->nsteps + 1));
	for (int j = 0; j < ss->nsteps; j++) {
		mp->off[j] = malloc(sizeof *mp->off[j] * (nt + 1));
		for (TensorId t = 0; t < nt; t++)
			mp->off[j][t] = p.use[j][t] >= 0 ? p.inst[p.use[j][t]].off : -1;
		free(p.use[j]);
	}
	free(p.inst);
	free(p.cur);
	free(p.use);
	free(used);
}

void
emit_memplan_free(MemPlan *mp)
{
	free(mp->view);
	free(mp->woffset);
	free(mp->recv);
	free(mp->bound);
	for (int j = 0; j < mp->nsteps; j++)
		free(mp->off[j]);
	free(mp->off);
}

static bool
inline_data(const Tensor *t)
{
	return t->kind == TK_CONST || (t->kind == TK_WEIGHT && t->data == DATA_INLINE);
}

int64_t *
emit_blob_layout(Graph *g, int64_t *bytes)
{
	int64_t *off = malloc(sizeof *off * (g->ntensors + 1)), at = 0;
	if (!off)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++) {
		Tensor *tt = &g->tensors[t];
		off[t] = -1;
		if (inline_data(tt) && tt->bytes && ir_nbytes(tt) > EMIT_BLOB_MIN) {
			off[t] = at;
			at += (ir_nbytes(tt) + 63) & ~(int64_t)63;
		}
	}
	*bytes = at;
	return off;
}

MemPlan *
emit_memplans(Graph *g)
{
	if (!g->sched) { /* no schedule pass ran: the default one, not simulated */
		sched_build(g, SCHED_1F1B, NULL);
		g->sched_time = -1;
		for (int k = 0; k < SCHED_COUNT; k++)
			g->sched_times[k] = -1;
	}
	MemPlan *mps = malloc(sizeof *mps * emit_nstages(g));
	if (!mps)
		die("out of memory");
	int64_t bytes;
	int64_t *blob = emit_blob_layout(g, &bytes);
	for (int s = 0; s < emit_nstages(g); s++) {
		emit_memplan(g, s, &mps[s]);
		mps[s].blob = blob;
	}
	return mps;
}

void
emit_memplans_free(Graph *g, MemPlan *mps)
{
	if (emit_nstages(g) > 0)
		free((void *)mps[0].blob);
	for (int s = 0; s < emit_nstages(g); s++)
		emit_memplan_free(&mps[s]);
	free(mps);
}

bool
emit_blob(Graph *g, const int64_t *off, int64_t bytes, const char *dir)
{
	if (bytes == 0)
		return true;
	char path[4096];
	snprintf(path, sizeof path, "%s/consts.bin", dir);
	FILE *f = fopen(path, "wb");
	bool ok = f != NULL;
	static const char zero[64];
	int64_t at = 0;
	for (TensorId t = 0; ok && t < g->ntensors; t++) {
		if (off[t] < 0)
			continue;
		int64_t n = ir_nbytes(&g->tensors[t]);
		ok = fwrite(zero, 1, (size_t)(off[t] - at), f) == (size_t)(off[t] - at) &&
		    fwrite(g->tensors[t].bytes, 1, (size_t)n, f) == (size_t)n;
		at = off[t] + n;
	}
	if (f)
		ok = fclose(f) == 0 && ok;
	if (ok) {
		snprintf(path, sizeof path, "%s/consts.S", dir);
		f = fopen(path, "w");
		ok = f && fputs("/* consts.S - the program's large constants (consts.bin), generated by tapc. */\n"
		    "\t.section .rodata\n\t.balign 64\n\t.globl taprt_consts\n"
		    "taprt_consts:\n\t.incbin \"consts.bin\"\n"
		    "\t.section .note.GNU-stack,\"\",@progbits\n", f) >= 0;
		if (f)
			ok = fclose(f) == 0 && ok;
	}
	if (!ok)
		diag_error("cannot write '%s': %s", path, strerror(errno));
	return ok;
}
