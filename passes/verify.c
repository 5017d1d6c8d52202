/*
 * verify.c - check the IR's invariants; run between passes like QBE's.
 *
 * Needs: any graph.  Guarantees nothing new; reports the first broken
 * invariant of each node: ids in range, SSA (one producer per tensor),
 * topological order (inputs defined before use), every produced tensor typed
 * and shaped, weights and constants backed by data of the right length,
 * tensor attributes pointing at constants, graph outputs defined.
 */
#include <stdlib.h>

#include "passes/passes.h"

static bool
check_source(Graph *g, TensorId id)
{
	Tensor *t = &g->tensors[id];
	char ty[IR_TYPESTR];
	if (t->rank < 0 || t->dtype == DT_UNDEF) {
		diag_file(g->model, "verify: %s '%s' has no type", t->kind == TK_INPUT ? "input" : "constant",
		    t->name);
		return false;
	}
	if (t->kind == TK_INPUT || t->kind == TK_STATE) /* state: zero, no data */
		return true;
	/* a tensor-parallel slice records the whole tensor's bytes */
	int64_t parts = t->slice_axis >= 0 ? t->slice_parts : 1;
	if (t->slice_axis >= 0 && (t->data != DATA_FILE || t->slice_axis >= t->rank ||
	    t->slice_parts < 1 || t->slice_blocks < 1 || t->dims[t->slice_axis] % t->slice_blocks)) {
		diag_file(g->model, "verify: weight '%s' has a bad slice", t->name);
		return false;
	}
	/* a weight converted as it loads: f16 or bf16 in the file, f32 here */
	int64_t bytes = ir_nbytes(t) * parts;
	if (t->file_dtype != DT_UNDEF) {
		if (t->data != DATA_FILE || t->dtype != DT_F32 ||
		    (t->file_dtype != DT_F16 && t->file_dtype != DT_BF16)) {
			diag_file(g->model, "verify: weight '%s' converts from %s to %s as it loads "
			    "(only f16 or bf16 file bytes to f32)", t->name, ir_dtype_name(t->file_dtype),
			    ir_dtype_name(t->dtype));
			return false;
		}
		bytes /= 2;
	}
	if (t->data == DATA_NONE ||
	    (t->data == DATA_FILE && (t->file < 0 || t->file >= g->nfiles || t->offset < 0)) ||
	    t->length != bytes) {
		diag_file(g->model, "verify: weight '%s' %s has no data of %lld bytes", t->name,
		    ir_typestr(t, ty), (long long)ir_nbytes(t));
		return false;
	}
	return true;
}

bool
pass_verify(Graph *g, PassCtx *cx)
{
	(void)cx;
	bool ok = true;
	char *defined = calloc(g->ntensors + 1, 1);
	char *produced = calloc(g->ntensors + 1, 1);
	if (!defined || !produced)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++) {
		if (g->tensors[t].kind == TK_VALUE)
			continue;
		defined[t] = 1;
		ok &= check_source(g, t);
	}
	for (NodeId n = 0; n < g->nnodes && ok; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		for (int i = 0; i < nd->nin && ok; i++) {
			TensorId t = nd->in[i];
			if (t == IR_NONE)
				continue;
			if (t < 0 || t >= g->ntensors) {
				diag_node(g, n, "verify: input %d refers to tensor %d of %d", i, t, g->ntensors);
				ok = false;
			} else if (!defined[t]) {
				diag_node(g, n, "verify: input %d ('%s') is used before it is defined", i,
				    g->tensors[t].name);
				ok = false;
			}
		}
		for (int i = 0; i < nd->nattr && ok; i++) {
			const Attr *a = &nd->attr[i];
			if (a->type == ATTR_TENSOR && (a->t < 0 || a->t >= g->ntensors ||
			    g->tensors[a->t].kind != TK_CONST)) {
				diag_node(g, n, "verify: attribute '%s' does not refer to a constant", a->name);
				ok = false;
			}
		}
		for (int i = 0; i < nd->nout && ok; i++) {
			TensorId t = nd->out[i];
			if (t == IR_NONE)
				continue;
			if (t < 0 || t >= g->ntensors || g->tensors[t].kind != TK_VALUE) {
				diag_node(g, n, "verify: output %d is not a value tensor", i);
				ok = false;
			} else if (produced[t]) {
				diag_node(g, n, "verify: output %d ('%s') is produced twice", i,
				    g->tensors[t].name);
				ok = false;
			} else if (g->tensors[t].rank < 0 || g->tensors[t].dtype == DT_UNDEF) {
				diag_node(g, n, "verify: output %d ('%s') has no shape", i, g->tensors[t].name);
				ok = false;
			}
			if (ok)
				produced[t] = defined[t] = 1;
		}
	}
	for (int i = 0; i < g->noutputs && ok; i++) {
		TensorId t = g->outputs[i];
		if (t < 0 || t >= g->ntensors || !defined[t]) {
			diag_file(g->model, "verify: graph output %d is not defined", i);
			ok = false;
		}
	}
	free(defined);
	free(produced);
	return ok;
}
