/*
 * pipe_shard.c - Merak's graph sharding (§4.2, Algorithms 1 and 2): cut the
 * op graph into a sequence of subgraphs, each depending only on the one
 * before it (plus graph inputs and common tensors relayed along), with
 * a parameter-count threshold deciding where a subgraph ends.
 *
 * Needs: static shapes, nodes in topological order; fold-scopes' templates
 * when present (a common tensor is one read in more than one instance).
 * Where Merak cuts as soon as a subgraph's parameters pass the threshold,
 * this cuts at the next point where the fewest values cross, so a
 * transformer block becomes an attention and an FFN subgraph (AutoPipe's
 * sub-layer granularity) instead of being cut between a MatMul and its
 * bias.  The function is the core the pipe-shard pass of
 * issue 6 will run; it only computes subgraph ids and changes nothing.
 *
 * Adapted to tapc's IR: weights and constants are parameters inside a
 * subgraph, not nodes, so they never cross a cut; a node's parameter count
 * is the element count of its weight inputs.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/pipeline.h"
#include "passes/passes.h"

static bool
is_data(Graph *g, TensorId t)
{
	return t != IR_NONE && (g->tensors[t].kind == TK_VALUE || g->tensors[t].kind == TK_INPUT);
}

int
pipe_shard(Graph *g, int max_subgraphs, int *sub)
{
	int N = g->nnodes, k = max_subgraphs > 0 ? max_subgraphs : 1;
	ir_reindex(g);
	int64_t *params = calloc(N + 1, sizeof *params);
	double *psum = calloc(N + 1, sizeof *psum);
	int *first_user = malloc(sizeof *first_user * (g->ntensors + 1));
	int *left = calloc(g->ntensors + 1, sizeof *left);   /* common: users not seen yet */
	int *out_of = malloc(sizeof *out_of * (g->ntensors + 1)); /* an output of subgraph */
	bool *common = calloc(g->ntensors + 1, 1);
	NodeId *visited = malloc(sizeof *visited * (N + 1));
	if (!params || !psum || !first_user || !left || !out_of || !common || !visited)
		die("out of memory");

	/* parameters per node; the threshold: Merak's share total / k (Alg. 2
	 * line 2) halved, since a full subgraph here ends only at the next
	 * narrow point: a block's attention (a third of its parameters) then
	 * still ends a subgraph, a LayerNorm-sized piece does not */
	double total = 0;
	for (NodeId n = 0; n < N; n++) {
		Node *nd = &g->nodes[n];
		for (int i = 0; i < nd->nin; i++)
			if (nd->in[i] != IR_NONE && g->tensors[nd->in[i]].kind == TK_WEIGHT)
				params[n] += ir_numel(&g->tensors[nd->in[i]]);
		total += (double)params[n];
	}
	double threshold = total / (2.0 * k);
	/* common tensors: read inside more than one block (an attention mask
	 * every block reads; Merak: more users than blocks).  Blocks are the
	 * template instances; a residual stream read twice by a decomposed
	 * LayerNorm and once by its Add is not common. */
	int *inst = ir_group_blocks(g, NULL);
	for (TensorId t = 0; t < g->ntensors; t++) {
		first_user[t] = -1;
		out_of[t] = -1;
		if (!is_data(g, t))
			continue;
		int seen = -1;
		for (int u = 0; u < g->nusers[t] && !common[t]; u++) {
			int gr = g->nodes[g->users[t][u]].group;
			int b = gr >= 0 && gr < g->ngroups ? inst[gr] : -1;
			if (b >= 0 && seen >= 0 && b != seen)
				common[t] = true;
			if (b >= 0)
				seen = b;
		}
		left[t] = common[t] ? g->nusers[t] : 0;
	}
	free(inst);

	/* how many values cross a cut after each node (common tensors aside;
	 * graph outputs live to the end): a subgraph that is full ends at the
	 * next point where the fewest cross, a block's residual Add rather
	 * than between a MatMul and its bias (AutoPipe's sub-layers) */
	int *live = calloc(N + 1, sizeof *live);
	if (!live)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++) {
		if (!is_data(g, t) || common[t])
			continue;
		int first = g->tensors[t].producer, last = -1;
		for (int u = 0; u < g->nusers[t]; u++)
			if (g->users[t][u] > last)
				last = g->users[t][u];
		if (ir_is_output(g, t))
			last = N;
		if (last > first) { /* crosses the cuts after first .. last-1 */
			live[first < 0 ? 0 : first]++;
			live[last]--;
		}
	}
	for (int i = 1; i <= N; i++)
		live[i] += live[i - 1];
	/* never cut inside an If: from its first branch node to the If */
	bool *inside = calloc(N + 1, sizeof *inside);
	int *parent = malloc(sizeof *parent * (g->nregions + 1));
	int *start = malloc(sizeof *start * (g->nregions + 1));
	if (!inside || !parent || !start)
		die("out of memory");
	for (int r = 0; r < g->nregions; r++)
		parent[r] = IR_NONE, start[r] = N;
	for (NodeId n = 0; n < N; n++)
		if (g->nodes[n].owns != IR_NONE)
			parent[g->nodes[n].owns] = g->nodes[n].region;
	for (NodeId n = 0; n < N; n++) {
		int r = g->nodes[n].region;
		while (r != IR_NONE && parent[r] != IR_NONE)
			r = parent[r];
		if (r != IR_NONE && n < start[r])
			start[r] = n;
	}
	for (NodeId n = 0; n < N; n++) {
		int r = g->nodes[n].owns;
		if (r != IR_NONE && g->nodes[n].region == IR_NONE)
			for (NodeId m = start[r]; m < n; m++)
				inside[m] = true;
	}
	free(parent);
	free(start);

	int narrow = N + 1;
	for (int i = 0; i < N - 1; i++)
		if (live[i] < narrow && !inside[i])
			narrow = live[i];

	int s = 0, nvis = 0;
	bool full = false;
	for (NodeId n = 0; n < N; n++) {
		Node *nd = &g->nodes[n];
		/* Alg. 1: the farthest dependency */
		int smin = s;
		NodeId nmin = IR_NONE;
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (!is_data(g, t))
				continue;
			NodeId p = g->tensors[t].producer;
			if (common[t]) {
				left[t]--;
			} else if (p == IR_NONE) { /* a graph input: with its first user */
				if (first_user[t] < 0)
					first_user[t] = n;
				else if (first_user[t] != n && sub[first_user[t]] < smin) /* Mul(x, x) */
					smin = sub[first_user[t]], nmin = first_user[t];
			} else if (out_of[t] >= 0) { /* an output of an earlier subgraph */
				if (out_of[t] + 1 < smin)
					smin = out_of[t] + 1, nmin = p;
			} else if (nvis && p != visited[nvis - 1] && sub[p] < smin) {
				smin = sub[p], nmin = p;
			}
		}
		/* Alg. 2 lines 5-11: merge back to the dependency's subgraph */
		if (smin < s) {
			for (int v = nvis - 1; v >= 0; v--) {
				Node *vd = &g->nodes[visited[v]];
				psum[sub[visited[v]]] -= (double)params[visited[v]];
				sub[visited[v]] = smin;
				psum[smin] += (double)params[visited[v]];
				for (int o = 0; o < vd->nout; o++) /* now inside smin */
					if (vd->out[o] != IR_NONE)
						out_of[vd->out[o]] = -1;
				if (visited[v] == nmin)
					break;
			}
			for (TensorId t = 0; t < g->ntensors; t++)
				if (out_of[t] >= smin)
					out_of[t] = -1;
			s = smin;
		}
		sub[n] = s;
		visited[nvis++] = n;
		psum[s] += (double)params[n];
		/* lines 13-21: a full subgraph ends after this node */
		full |= psum[s] > threshold;
		if (full && live[n] <= narrow && s < k - 1 && n < N - 1 && !inside[n]) {
			full = false;
			for (TensorId t = 0; t < g->ntensors; t++)
				if (common[t] && left[t] > 0 && out_of[t] < 0 && g->tensors[t].producer != IR_NONE &&
				    g->tensors[t].producer <= n)
					out_of[t] = s;
			for (int o = 0; o < nd->nout; o++)
				if (nd->out[o] != IR_NONE)
					out_of[nd->out[o]] = s;
			s++;
		}
	}
	free(params);
	free(psum);
	free(first_user);
	free(left);
	free(out_of);
	free(common);
	free(visited);
	free(live);
	free(inside);
	/* ids may skip numbers after merges: renumber 0, 1, 2, ... */
	int count = 0;
	for (NodeId n = 0, last = -1; n < N; n++) {
		if (sub[n] != last) {
			last = sub[n];
			count++;
		}
		sub[n] = count - 1;
	}
	return count;
}

/* The pass: when a pipeline may be planned (the cluster has more than one
 * device, or -pp forces one, or an IR file's degrees have one), every node
 * gets its subgraph (Node.subgraph, printed sg=N); the bound is 2 x blocks
 * + 4 (issue 6).  mesh-map clears them again if it plans no pipeline. */
bool
pass_pipe_shard(Graph *g, PassCtx *cx)
{
	if (g->mesh.dp ? g->mesh.pp <= 1 : g->cluster.ndevices <= 1 && cx->pp <= 1)
		return true;
	if (g->loss != IR_NONE && g->mesh.dp) {
		/* an IR file's training graph, cut already: its backward nodes
		 * read forward values across the whole graph and would merge
		 * every subgraph into one, so the cut it carries (sg=) stays */
		int most = -1;
		for (NodeId n = 0; n < g->nnodes; n++)
			if (!g->nodes[n].dead && g->nodes[n].subgraph != IR_NONE &&
			    g->nodes[n].subgraph > most)
				most = g->nodes[n].subgraph;
		if (most >= 0) {
			g->nsubgraphs = most + 1;
			return true;
		}
	}
	int blocks = 1;
	for (int t = 0; t < g->ntemplates; t++)
		if (g->templates[t].ninstances > blocks)
			blocks = g->templates[t].ninstances;
	int *sub = malloc(sizeof *sub * (g->nnodes + 1));
	if (!sub)
		die("out of memory");
	g->nsubgraphs = pipe_shard(g, 2 * blocks + 4, sub);
	for (NodeId n = 0; n < g->nnodes; n++)
		g->nodes[n].subgraph = sub[n];
	free(sub);
	return true;
}
