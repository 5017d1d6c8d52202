/*
 * plan_json.c - plan.json: what tapc decided, for people and tools.
 *
 * Format version 1: the program and model, the mesh, the cluster and the
 * degrees (and the search that chose them), one entry per rank with its
 * device, every tensor with its size, and the predicted costs tapc's cost
 * model knows.  Keys are written
 * in a fixed order and numbers as integers, so the file is diffable.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/emit.h"
#include "passes/pipeline.h"
#include "passes/tp.h"

#define PLAN_FORMAT_VERSION 1

static const char *
kind_name(TensorKind k)
{
	switch (k) {
	case TK_INPUT: return "input";
	case TK_WEIGHT: return "weight";
	case TK_CONST: return "const";
	default: return "value";
	}
}

/* What TAP's pruning did: ops before and after, GraphNodes, templates. */
static void
put_pruning(FILE *f, Graph *g)
{
	int live = 0;
	for (NodeId n = 0; n < g->nnodes; n++)
		live += !g->nodes[n].dead;
	fprintf(f, "  \"pruning\": {\"ops_loaded\": %d, \"ops\": %d, \"graphnodes\": %d, \"stripped\": {",
	    g->ops_loaded, live, g->ngroups);
	bool first = true;
	for (int op = 0; op < OP_COUNT; op++)
		if (g->stripped[op]) {
			fprintf(f, "%s\"%s\": %d", first ? "" : ", ", ir_op_name((Op)op), g->stripped[op]);
			first = false;
		}
	fprintf(f, "}, \"dead\": %d,\n    \"templates\": [", g->stripped_dead);
	for (int t = 0; t < g->ntemplates; t++) {
		Template *tp = &g->templates[t];
		fprintf(f, "%s\n      {\"id\": %d, \"name\": ", t ? "," : "", t);
		ir_esc_json(f, tp->name);
		fprintf(f, ", \"graphnodes\": %d, \"instances\": [", tp->ngroups);
		for (int i = 0; i < tp->ninstances; i++) {
			const GraphNode *gn = &g->groups[tp->inst[i * tp->ngroups]];
			fprintf(f, "%s\n        {\"first_op\": ", i ? "," : "");
			ir_esc_json(f, gn->nnodes ? g->nodes[gn->nodes[0]].name : "");
			fputs(", \"graphnodes\": [", f);
			for (int k = 0; k < tp->ngroups; k++)
				fprintf(f, "%s%d", k ? ", " : "", tp->inst[i * tp->ngroups + k]);
			fputs("]}", f);
		}
		fputs("]}", f);
	}
	fputs(g->ntemplates ? "\n    ]},\n" : "]},\n", f);
}

/* The role of an anchor's split: column (output features), row (the
 * contraction), or the axis for convolutions and embeddings. */
static const char *
split_role(Graph *g, NodeId n)
{
	Node *nd = &g->nodes[n];
	int a = nd->tp_axis;
	if (a == TP_REPLICATE)
		return "replicate";
	switch (nd->op) {
	case OP_MatMul:
		if (nd->in[1] != IR_NONE && g->tensors[nd->in[1]].kind == TK_WEIGHT)
			return a == g->tensors[nd->in[1]].rank - 1 ? "column" : a == g->tensors[nd->in[1]].rank - 2 ? "row" : "batch";
		return a == g->tensors[nd->in[0]].rank - 2 ? "rows of the output" : "row";
	case OP_Gemm:
		return a == (ir_attr_int(g, n, "transB", 0) ? 0 : 1) ? "column" : "row";
	case OP_Conv: return a == 0 ? "output channels" : a == 1 ? "input channels" : "spatial";
	case OP_ConvTranspose: return a == 1 ? "output channels" : a == 0 ? "input channels" : "spatial";
	case OP_Gather: return a == 0 ? "vocabulary" : "hidden";
	default: return "split";
	}
}

/* tp-plan's decisions (TAP): searches, per weight pattern, collectives. */
static void
put_tensor_parallel(FILE *f, Graph *g)
{
	const CostModel *c = &g->cost;
	fprintf(f, "  \"tensor_parallel\": {\"degree\": %d, \"objective\": \"%s\", ", g->mesh.tp,
	    c->train ? "train" : "infer");
	fprintf(f, "\"cost_model\": {\"flops\": %g, \"bw_intra\": %g, \"bw_inter\": %g, "
	    "\"latency\": %g, \"memory\": %g},\n", c->flops, c->bw_intra, c->bw_inter, c->latency,
	    c->memory);
	fprintf(f, "    \"predicted_seconds\": %.6g, \"memory_per_device\": %lld, \"search_ms\": %.3f,\n",
	    g->tp_cost, (long long)g->tp_memory, g->tp_search_ms);
	fputs("    \"searches\": [", f);
	for (int i = 0; i < g->ntpsearch; i++) {
		TpSearch *r = &g->tpsearch[i];
		fprintf(f, "%s\n      {\"template\": ", i ? "," : "");
		ir_esc_json(f, r->name);
		fprintf(f, ", \"instances\": %d, \"choices\": %d, \"plans\": %lld, \"valid\": %lld, "
		    "\"seconds\": %.6g, \"ms\": %.3f}", r->instances, r->choices, (long long)r->enumerated,
		    (long long)r->valid, r->cost, r->ms);
	}
	fputs("],\n    \"anchors\": [", f);
	bool first = true;
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->tp_axis == TP_NONE)
			continue;
		int w = tp_anchor_input(g, n);
		fprintf(f, "%s\n      {\"node\": ", first ? "" : ",");
		ir_esc_json(f, nd->name);
		fprintf(f, ", \"op\": \"%s\", \"graphnode\": %d, \"weight\": ", ir_op_name(nd->op), nd->group);
		ir_esc_json(f, w >= 0 ? g->tensors[nd->in[w]].name : "");
		fputs(", \"pattern\": ", f);
		ir_esc_json(f, split_role(g, n));
		fprintf(f, ", \"axis\": %d, \"blocks\": %d}", nd->tp_axis, nd->tp_blocks);
		first = false;
	}
	fputs("],\n    \"weights\": [", f);
	first = true;
	for (TensorId t = 0; t < g->ntensors; t++) {
		Tensor *x = &g->tensors[t];
		if (x->kind != TK_WEIGHT || !g->nusers || !g->nusers[t])
			continue;
		char ty[IR_TYPESTR];
		fprintf(f, "%s\n      {\"name\": ", first ? "" : ",");
		ir_esc_json(f, x->name);
		if (x->slice_axis >= 0)
			fprintf(f, ", \"pattern\": \"split\", \"axis\": %d, \"blocks\": %d", x->slice_axis,
			    x->slice_blocks);
		else
			fputs(", \"pattern\": \"replicate\"", f);
		fputs(", \"local\": ", f);
		ir_esc_json(f, ir_typestr(x, ty));
		fputc('}', f);
		first = false;
	}
	fputs("],\n    \"collectives\": [", f);
	first = true;
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (!ir_op_is_comm(nd->op))
			continue;
		char ty[IR_TYPESTR];
		Tensor *big = &g->tensors[nd->op == OP_AllGather || nd->op == OP_AllReduce ? nd->out[0] : nd->in[0]];
		fprintf(f, "%s\n      {\"op\": \"%s\", \"node\": ", first ? "" : ",", ir_op_name(nd->op));
		ir_esc_json(f, nd->name);
		fprintf(f, ", \"graphnode\": %d, \"type\": ", nd->group);
		ir_esc_json(f, ir_typestr(big, ty));
		fprintf(f, ", \"bytes\": %lld}", (long long)ir_nbytes(big));
		first = false;
	}
	fputs("]},\n", f);
}

/* stage-assign's decisions: the stage table and the simulated schedule. */
static void
put_pipeline(FILE *f, Graph *g, const MemPlan *mps)
{
	fprintf(f, "  \"pipeline\": {\"stages\": %d, \"microbatches\": %d, \"subgraphs\": %d, \"method\": ",
	    g->nstages, g->microbatches, g->nsubgraphs);
	ir_esc_json(f, g->pipe_method ? g->pipe_method : "");
	fprintf(f, ", \"simulated_seconds\": %.6g, \"stage_time_std\": %.6g,\n", g->pipe_time,
	    g->pipe_std);
	fprintf(f, "    \"megatron_even_split\": {\"simulated_seconds\": %.6g, \"stage_time_std\": %.6g},\n",
	    g->pipe_even_time, g->pipe_even_std);
	fprintf(f, "    \"p2p_seconds\": %.6g, \"ms\": %.3f, \"stage_table\": [", g->pipe_comm, g->pipe_ms);
	int tp = g->mesh.tp > 1 ? g->mesh.tp : 1, dp = g->mesh.dp > 1 ? g->mesh.dp : 1;
	for (int s = 0; s < g->nstages; s++) {
		PipeStage *st = &g->stages[s];
		const char *first = "";
		for (NodeId n = 0; n < g->nnodes && !*first; n++)
			if (g->nodes[n].stage == s)
				first = g->nodes[n].name;
		fprintf(f, "%s\n      {\"stage\": %d, \"subgraphs\": [%d, %d], \"first_op\": ", s ? "," : "",
		    s, st->first, st->first + st->nsub - 1);
		ir_esc_json(f, first);
		/* the memory a rank of the stage needs: weights and activations */
		fprintf(f, ", \"forward_seconds\": %.6g, \"backward_seconds\": %.6g, \"weight_bytes\": %lld, "
		    "\"arena_bytes\": %lld, \"ranks\": [", st->fwd, st->bwd, (long long)st->weight_bytes,
		    (long long)mps[s].arena_bytes);
		for (int d = 0; d < dp; d++) /* every replica's */
			for (int q = 0; q < tp; q++)
				fprintf(f, "%s%d", d || q ? ", " : "", (d * g->nstages + s) * tp + q);
		fputs("]", f);
		if (g->sched) {
			const StageSched *ss = &g->sched[s];
			fprintf(f, ", \"steps\": %d, \"in_flight\": %d, \"recompute\": %s", ss->nsteps,
			    ss->inflight, ss->recompute ? "true" : "false");
			/* Merak's alpha: the share of the stage's modules (subgraphs)
			 * whose activations stay for the backward */
			int kept = !ss->recompute ? st->nsub : ss->keep_from == INT_MAX ? 0 :
			    st->first + st->nsub - ss->keep_from;
			fprintf(f, ", \"modules\": %d, \"modules_kept\": %d", st->nsub, kept);
		}
		fputs("}", f);
	}
	fputs("]", f);
	if (g->sched) { /* the schedule pass: its kind and each kind's simulated step */
		fprintf(f, ",\n    \"schedule\": {\"kind\": \"%s\", \"simulated_seconds\": %.6g, "
		    "\"simulated\": {", g->loss != IR_NONE ? sched_name(g->sched_kind) : "forward",
		    g->sched_time);
		for (int k = 0; k < SCHED_COUNT; k++)
			fprintf(f, "%s\"%s\": %.6g", k ? ", " : "", sched_name(k), g->sched_times[k]);
		fputs("}", f);
		if (g->slice > 0) /* AutoPipe's slicer: micro-batches are pairs of halves */
			fprintf(f, ", \"slice\": {\"pairs\": %d, \"sliced\": %d, "
			    "\"simulated_unsliced_seconds\": %.6g}", g->microbatches / 2, g->slice,
			    g->slice_none_time);
		if (g->subpipe) { /* Merak's sub-pipelined TMP: pairs of halves interleaved */
			int nsplit = 0;
			for (NodeId n = 0; n < g->nnodes; n++)
				nsplit += !g->nodes[n].dead && sched_split(g, n);
			fprintf(f, ", \"subpipeline\": {\"pairs\": %d, \"split_allreduces\": %d, "
			    "\"simulated_unpaired_seconds\": %.6g}", g->microbatches / 2, nsplit,
			    g->subpipe_none_time);
		}
		fputs("}", f);
	}
	fputs("},\n", f);
}

/* The devices the plan is for: -cluster's nodes, or -mesh's. */
static void
put_cluster(FILE *f, Graph *g)
{
	const Cluster *c = &g->cluster;
	fprintf(f, "  \"cluster\": {\"devices\": %d, \"objective\": \"%s\", \"latency\": %.6g, "
	    "\"alpha\": %.6g, \"beta\": %.6g, \"nodes\": [", c->ndevices, g->cost.train ? "train" :
	    "infer", c->latency, c->alpha, c->beta);
	for (int k = 0; k < c->nkinds; k++) {
		const NodeKind *n = &c->kinds[k];
		fprintf(f, "%s\n    {\"name\": ", k ? "," : "");
		ir_esc_json(f, n->name);
		fprintf(f, ", \"count\": %d, \"devices\": %d, \"flops\": %.6g, \"memory\": %.6g, "
		    "\"intra_bw\": %.6g, \"inter_bw\": %.6g}", n->count, n->devices, n->flops, n->memory,
		    n->intra_bw, n->inter_bw);
	}
	fputs("]},\n", f);
}

static void
put_choice(FILE *f, const PlanChoice *p)
{
	if (!p->dp) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"dp\": %d, \"tp\": %d, \"pp\": %d, \"microbatch_size\": %lld, "
	    "\"microbatches\": %d, \"placement\": {\"order\": \"%s\", \"devices\": \"%s\"}, "
	    "\"predicted_seconds\": %.6g, \"pipeline_seconds\": %.6g, \"dpsync_seconds\": %.6g, "
	    "\"memory_bytes\": %.6g}", p->dp, p->tp, p->pp, (long long)p->mbs, p->micro,
	    ir_place_order(p->place), p->place % 2 ? "by-slot" : "by-node", p->seconds, p->pipeline,
	    p->dpsync, p->memory);
}

/* mesh-map's record: the space, the chosen plan, Megatron's, the best ten. */
static void
put_search(FILE *f, Graph *g)
{
	const PlanSearch *s = &g->search;
	fputs("  \"search\": {\"method\": ", f);
	ir_esc_json(f, s->method);
	fprintf(f, ", \"candidates_total\": %lld, \"candidates_evaluated\": %lld, "
	    "\"seconds\": %.6g, \"seed\": %u,\n    \"chosen\": ", (long long)s->total,
	    (long long)s->evaluated, s->seconds, s->seed);
	put_choice(f, &s->chosen);
	fputs(",\n    \"megatron\": ", f);
	put_choice(f, &s->megatron);
	fputs(",\n    \"top\": [", f);
	for (int i = 0; i < s->ntop; i++) {
		fputs(i ? ",\n      " : "\n      ", f);
		put_choice(f, &s->top[i]);
	}
	fputs("]},\n", f);
}

/*
 * A training rank's memory at its peak: its weights (this rank's shards),
 * their gradients, the optimizer's state, and the activation arena, which
 * holds the forward activations kept for backward, the gradients and the
 * backward temporaries (the memory plan's peak; the gradients are all
 * alive at the optimizer step).  peak = weights + state + arena.
 */
static void
put_train_memory(FILE *f, Graph *g, const MemPlan *mp)
{
	int64_t w = 0, st = 0, gr = 0;
	bool *sum = calloc(g->ntensors + 1, 1); /* GradAccumulate's sums: gradients, not state */
	for (NodeId n = 0; n < g->nnodes; n++)
		if (g->nodes[n].op == OP_GradAccumulate && !g->nodes[n].dead)
			sum[g->nodes[n].in[0]] = true;
	for (TensorId t = 0; t < g->ntensors; t++) {
		if (mp->woffset[t] < 0 || sum[t])
			continue;
		if (g->tensors[t].kind == TK_STATE)
			st += ir_nbytes(&g->tensors[t]);
		else
			w += ir_nbytes(&g->tensors[t]);
	}
	for (int i = 0; i < g->ngrads; i++)
		if (mp->woffset[g->grads[i].weight] >= 0)
			gr += ir_nbytes(&g->tensors[g->grads[i].grad]);
	fprintf(f, ", \"memory\": {\"weights\": %lld, \"gradients\": %lld, \"optimizer_state\": %lld, "
	    "\"activations\": %lld, \"peak\": %lld}", (long long)w, (long long)gr, (long long)st,
	    (long long)mp->arena_bytes, (long long)(mp->weight_bytes + mp->arena_bytes));
	free(sum);
}

void
emit_plan(FILE *f, Graph *g, const EmitOptions *o, const MemPlan *mps)
{
	int64_t flops = 0, bytes = 0, wbytes = 0;
	for (NodeId n = 0; n < g->nnodes; n++) {
		flops += ir_node_flops(g, n);
		bytes += ir_node_bytes(g, n);
	}
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].kind == TK_WEIGHT)
			wbytes += ir_nbytes(&g->tensors[t]);
	Mesh *m = &g->mesh;
	fprintf(f, "{\n  \"format_version\": %d,\n  \"program\": ", PLAN_FORMAT_VERSION);
	ir_esc_json(f, o->program);
	fputs(",\n  \"model\": ", f);
	ir_esc_json(f, g->model);
	fprintf(f, ",\n  \"opset\": %lld,\n", (long long)g->opset);
	fprintf(f, "  \"mesh\": {\"rows\": %d, \"cols\": %d},\n", m->rows, m->cols);
	put_cluster(f, g);
	int dp = m->dp ? m->dp : 1, tp = m->tp ? m->tp : 1, pp = emit_nstages(g);
	fprintf(f, "  \"degrees\": {\"dp\": %d, \"tp\": %d, \"pp\": %d, \"microbatches\": %d, "
	    "\"rule\": ", dp, tp, pp, g->microbatches > 1 ? g->microbatches : 1);
	ir_esc_json(f, g->degree_rule ? g->degree_rule : dp * tp * pp == 1 ? "one device: nothing to "
	    "divide" : "as the IR file says");
	fputs("},\n  \"ranks\": [", f);
	int64_t arena = 0;
	int *nodes = calloc(pp, sizeof *nodes);
	for (int s = 0; s < pp; s++)
		arena = mps[s].arena_bytes > arena ? mps[s].arena_bytes : arena;
	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead && emit_stage(g, n) >= 0 && emit_stage(g, n) < pp)
			nodes[emit_stage(g, n)]++;
	for (int r = 0; r < dp * pp * tp; r++) {
		int s = r / tp % pp;
		fprintf(f, "%s\n    {\"rank\": %d, \"dp\": %d, \"tp\": %d, \"stage\": %d, \"device\": %d, "
		    "\"nodes\": %d, \"arena_bytes\": %lld, \"weight_bytes\": %lld, \"source\": "
		    "\"stage%d.c\"", r ? "," : "", r, r / (tp * pp), r % tp, s, g->device ? g->device[r] : r,
		    nodes[s], (long long)mps[s].arena_bytes, (long long)mps[s].weight_bytes, s);
		if (g->loss != IR_NONE)
			put_train_memory(f, g, &mps[s]);
		fputc('}', f);
	}
	free(nodes);
	fputs("\n  ],\n", f);
	fprintf(f, "  \"predicted\": {\"flops\": %lld, \"bytes_moved\": %lld, \"weight_bytes\": %lld, "
	    "\"activation_bytes\": %lld},\n", (long long)flops, (long long)bytes, (long long)wbytes,
	    (long long)arena);
	if (g->search.method)
		put_search(f, g);
	put_pruning(f, g);
	if (tp > 1)
		put_tensor_parallel(f, g);
	if (g->nstages > 1)
		put_pipeline(f, g, mps);
	fputs("  \"tensors\": [\n", f);
	int *num = ir_print_numbers(g);
	bool first = true;
	for (TensorId t = 0; t < g->ntensors; t++) {
		Tensor *tt = &g->tensors[t];
		if (num[t] < 0)
			continue;
		char ty[IR_TYPESTR];
		fprintf(f, "%s    {\"id\": %d, \"kind\": \"%s\", \"name\": ", first ? "" : ",\n", num[t],
		    kind_name(tt->kind));
		ir_esc_json(f, tt->name[0] == '%' ? "" : tt->name);
		fputs(", \"type\": ", f);
		ir_esc_json(f, ir_typestr(tt, ty));
		fprintf(f, ", \"bytes\": %lld}", (long long)ir_nbytes(tt));
		first = false;
	}
	fputs("\n  ]\n}\n", f);
	free(num);
}

bool
emit_plan_json(Graph *g, const EmitOptions *o, const MemPlan *mps, const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/plan.json", dir);
	FILE *f = fopen(path, "w");
	if (!f) {
		diag_error("cannot write '%s': %s", path, strerror(errno));
		return false;
	}
	emit_plan(f, g, o, mps);
	if (fclose(f) != 0) {
		diag_error("cannot write '%s': %s", path, strerror(errno));
		return false;
	}
	return true;
}
