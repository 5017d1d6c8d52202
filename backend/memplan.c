/*
 * memplan.c - place a rank's activations in one arena, reusing memory.
 *
 * A rank runs the nodes of its pipeline stage (all of them without a
 * pipeline).  Each value tensor lives from the node that produces it to its
 * last use in the stage; a value received from an earlier stage lives from
 * the start of the micro-batch to its last use; graph outputs computed in
 * the stage are written straight into the program's output buffers and take
 * no arena space.  A view (Reshape and friends) takes no space either: it
 * is its input's bytes, whose block then lives until the view's last use.
 * Blocks are placed first-fit in a free list as the nodes are walked in
 * order and returned after their last use, all offsets 64-byte aligned.
 * Weights the stage reads get a separate region, packed once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/emit.h"

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

bool
emit_is_view(Graph *g, NodeId id)
{
	Node *n = &g->nodes[id];
	switch (n->op) {
	case OP_Reshape: case OP_Flatten: case OP_Squeeze: case OP_Unsqueeze: case OP_Identity:
		break;
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
		if (s < prev || s >= k) {
			diag_error("%s: node '%s' is in stage %d, but the program has %d pipeline stages "
			    "in order (run stage-assign: -passes=...,pipe-shard,stage-assign)", g->model,
			    g->nodes[n].name, s, k);
			return false;
		}
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

void
emit_memplan(Graph *g, int stage, MemPlan *mp)
{
	int nt = g->ntensors;
	mp->blob = NULL;
	mp->view = malloc(sizeof *mp->view * (nt + 1));
	mp->offset = malloc(sizeof *mp->offset * (nt + 1));
	mp->woffset = malloc(sizeof *mp->woffset * (nt + 1));
	mp->recv = calloc(nt + 1, 1);
	int *last = malloc(sizeof *last * (nt + 1));
	bool *is_out = calloc(nt + 1, 1), *used = calloc(nt + 1, 1);
	if (!mp->view || !mp->offset || !mp->woffset || !mp->recv || !last || !is_out || !used)
		die("out of memory");
	for (int t = 0; t < nt; t++) {
		mp->offset[t] = mp->woffset[t] = -1;
		mp->view[t] = IR_NONE;
		last[t] = -1;
	}
	for (int i = 0; i < g->noutputs; i++) {
		TensorId t = g->outputs[i];
		/* computed here: into the output buffer; else copied out by its owner */
		is_out[t] = emit_tensor_stage(g, t) == stage;
		used[t] |= is_out[t];
	}
	/* a view's uses are uses of the tensor that owns the bytes */
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
		if (emit_is_view(g, n)) {
			TensorId src = nd->in[0];
			mp->view[nd->out[0]] = mp->view[src] != IR_NONE ? mp->view[src] : src;
		}
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (t != IR_NONE)
				last[mp->view[t] != IR_NONE ? mp->view[t] : t] = n;
		}
	}

	mp->weight_bytes = 0;
	for (TensorId t = 0; t < nt; t++) {
		Tensor *tt = &g->tensors[t];
		if (tt->kind == TK_WEIGHT && tt->data == DATA_FILE && used[t]) {
			mp->woffset[t] = mp->weight_bytes;
			if (__builtin_add_overflow(mp->weight_bytes, ALIGN(ir_nbytes(tt)), &mp->weight_bytes) ||
			    mp->weight_bytes > EMIT_MAX_REGION)
				mp->weight_bytes = EMIT_MAX_REGION + 1;
		}
	}

	FreeList fl = {0};
	for (TensorId t = 0; t < nt; t++) /* received at the start of a micro-batch */
		if (mp->recv[t]) {
			mp->offset[t] = take(&fl, ALIGN(ir_nbytes(&g->tensors[t])));
			if (last[t] < 0)
				give(&fl, mp->offset[t], ALIGN(ir_nbytes(&g->tensors[t])));
		}
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead || emit_stage(g, n) != stage)
			continue;
		if (emit_is_view(g, n)) {
			mp->offset[nd->out[0]] = mp->offset[mp->view[nd->out[0]]];
			continue; /* no code, no memory; its source lives on */
		}
		for (int i = 0; i < nd->nout; i++) {
			TensorId t = nd->out[i];
			if (t == IR_NONE || is_out[t])
				continue;
			mp->offset[t] = take(&fl, ALIGN(ir_nbytes(&g->tensors[t])));
		}
		/* outputs nobody reads die at once; inputs die at their last use */
		for (int i = 0; i < nd->nout; i++) {
			TensorId t = nd->out[i];
			if (t != IR_NONE && mp->offset[t] >= 0 && last[t] < 0)
				give(&fl, mp->offset[t], ALIGN(ir_nbytes(&g->tensors[t])));
		}
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (t == IR_NONE)
				continue;
			t = mp->view[t] != IR_NONE ? mp->view[t] : t;
			bool again = false;
			for (int k = 0; k < i; k++)
				again |= nd->in[k] != IR_NONE &&
				    (mp->view[nd->in[k]] != IR_NONE ? mp->view[nd->in[k]] : nd->in[k]) == t;
			if (!again && last[t] == n && mp->offset[t] >= 0)
				give(&fl, mp->offset[t], ALIGN(ir_nbytes(&g->tensors[t])));
		}
	}
	mp->arena_bytes = fl.top;
	free(fl.b);
	free(last);
	free(is_out);
	free(used);
}

void
emit_memplan_free(MemPlan *mp)
{
	free(mp->view);
	free(mp->offset);
	free(mp->woffset);
	free(mp->recv);
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
