/*
 * memplan.c - place a rank's activations in one arena, reusing memory.
 *
 * Each value tensor lives from the node that produces it to its last use;
 * graph outputs are written straight into the program's output buffers and
 * take no arena space.  A view (Reshape and friends) takes no space either:
 * it is its input's bytes, whose block then lives until the view's last use.  Blocks are placed first-fit in a free list as the
 * nodes are walked in order and returned after their last use, all offsets
 * 64-byte aligned.  Weights get a separate region, packed once.
 */
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
	fl->top += size;
	return off;
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

void
emit_memplan(Graph *g, MemPlan *mp)
{
	int nt = g->ntensors;
	mp->view = malloc(sizeof *mp->view * (nt + 1));
	mp->offset = malloc(sizeof *mp->offset * (nt + 1));
	mp->woffset = malloc(sizeof *mp->woffset * (nt + 1));
	int *last = malloc(sizeof *last * (nt + 1));
	bool *is_out = calloc(nt + 1, 1);
	if (!mp->offset || !mp->woffset || !last || !is_out)
		die("out of memory");
	for (int t = 0; t < nt; t++) {
		mp->offset[t] = mp->woffset[t] = -1;
		mp->view[t] = IR_NONE;
		last[t] = -1;
	}
	for (int i = 0; i < g->noutputs; i++)
		is_out[g->outputs[i]] = true;
	/* a view's uses are uses of the tensor that owns the bytes */
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
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
		if (tt->kind == TK_WEIGHT && tt->data == DATA_FILE) {
			mp->woffset[t] = mp->weight_bytes;
			mp->weight_bytes += ALIGN(ir_nbytes(tt));
		}
	}

	FreeList fl = {0};
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
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
}

void
emit_memplan_free(MemPlan *mp)
{
	free(mp->view);
	free(mp->offset);
	free(mp->woffset);
}
