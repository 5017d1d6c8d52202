/*
 * strip_aux.c - remove auxiliary nodes before grouping and sharding (TAP §IV-B).
 *
 * Needs: a verified graph (fold-constants has already turned Constant nodes
 * into constants).  Guarantees: no Identity and no inference-mode Dropout
 * remains, except where it is the only producer of a graph output (the
 * output keeps its name); no node whose outputs nobody reads remains; unused
 * weights and constants are gone.  Consumers of an Identity read its source
 * directly, so a weight reached through Identity (torch's tied embeddings)
 * stays one tensor, tied.  Every removal is counted per operator in
 * Graph.stripped for plan.json.
 */
#include <stdlib.h>

#include "passes/passes.h"

/* Identity, or a Dropout whose mask nobody reads (inference: it copies). */
static bool
is_copy(Graph *g, Node *n)
{
	if (n->op == OP_Identity)
		return true;
	if (n->op != OP_Dropout)
		return false;
	if (n->nout > 1 && n->out[1] != IR_NONE && g->nusers[n->out[1]])
		return false;
	return !ir_attr_int(g, (NodeId)(n - g->nodes), "training_mode", 0);
}

/* A graph output, or the training loss: read after the graph runs. */
static bool
is_output(Graph *g, TensorId t)
{
	return ir_is_output(g, t) || (t == g->loss && t != IR_NONE);
}

bool
pass_strip_aux(Graph *g, PassCtx *cx)
{
	(void)cx;
	ir_reindex(g);
	TensorId *repl = malloc(sizeof *repl * (g->ntensors + 1));
	if (!repl)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++)
		repl[t] = t;
	/* copies: forward their source to every consumer (in topological
	 * order, so chains of copies collapse to the first source) */
	for (NodeId id = 0; id < g->nnodes; id++) {
		Node *n = &g->nodes[id];
		for (int i = 0; i < n->nin; i++)
			if (n->in[i] != IR_NONE)
				n->in[i] = repl[n->in[i]];
		if (n->dead || !is_copy(g, n) || n->in[0] == IR_NONE || is_output(g, n->out[0]))
			continue;
		repl[n->out[0]] = n->in[0];
		n->dead = true;
		g->stripped[n->op]++;
	}
	free(repl);
	/* dead nodes: nothing reads any output; walk backwards so a chain
	 * feeding only dead nodes goes too */
	ir_reindex(g);
	for (NodeId id = g->nnodes - 1; id >= 0; id--) {
		Node *n = &g->nodes[id];
		if (n->dead || n->phase == PHASE_OPT) /* an update in place: its effect is the point */
			continue;
		bool used = false;
		for (int i = 0; i < n->nout && !used; i++)
			used = n->out[i] != IR_NONE && (g->nusers[n->out[i]] || is_output(g, n->out[i]));
		if (used)
			continue;
		n->dead = true;
		g->stripped[n->op]++;
		g->stripped_dead++;
		for (int i = 0; i < n->nin; i++) {
			bool again = false; /* ir_reindex counts a node once per tensor */
			for (int k = 0; k < i; k++)
				again |= n->in[k] == n->in[i];
			if (n->in[i] != IR_NONE && !again)
				g->nusers[n->in[i]]--;
		}
	}
	ir_compact(g);
	return true;
}
