/*
 * emit_c.c - one rank's translation unit: tensors, constants, nodes, and
 * the init and run functions taprt_main calls.
 *
 * Tensors are numbered as in the IR dump (T[9] is %9), each kernel call
 * carries its ONNX node name, and nothing depends on time or addresses, so
 * two runs of tapc give the same bytes.  Weights are not copied into the
 * source: the weight table records where their bytes are in the model
 * files and init() has the runtime read them (or this rank's slice).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/emit.h"
#include "passes/pipeline.h"

typedef struct {
	FILE *f;
	Graph *g;
	int *num;                       /* tensor id -> %N */
	const MemPlan *mp;
} Emitter;

static void
put_float(FILE *f, double v, bool single)
{
	if (isnan(v))
		fputs(signbit(v) ? "-NAN" : "NAN", f);
	else if (isinf(v))
		fputs(v < 0 ? "-INFINITY" : "INFINITY", f);
	else {
		char buf[40];
		snprintf(buf, sizeof buf, single ? "%.9g" : "%.17g", v);
		fputs(buf, f);
		if (!strpbrk(buf, ".e"))
			fputs(".0", f);
		if (single)
			fputc('f', f);
	}
}

static const char *
ctype(DType t)
{
	switch (t) {
	case DT_F32: return "float";
	case DT_F64: return "double";
	case DT_I64: return "int64_t";
	case DT_I32: return "int32_t";
	case DT_I16: return "int16_t";
	case DT_I8: return "int8_t";
	case DT_U64: return "uint64_t";
	case DT_U32: return "uint32_t";
	case DT_U16: case DT_F16: case DT_BF16: return "uint16_t";
	case DT_U8: case DT_BOOL: return "uint8_t";
	default: return NULL;
	}
}

static void
put_value(FILE *f, DType t, const void *p, int64_t i)
{
	switch (t) {
	case DT_F32: put_float(f, ((const float *)p)[i], true); break;
	case DT_F64: put_float(f, ((const double *)p)[i], false); break;
	case DT_I64: {
		int64_t v = ((const int64_t *)p)[i];
		if (v == INT64_MIN)
			fputs("INT64_MIN", f);
		else
			fprintf(f, "INT64_C(%" PRId64 ")", v);
		break;
	}
	case DT_I32: {
		int32_t v = ((const int32_t *)p)[i];
		if (v == INT32_MIN)
			fputs("INT32_MIN", f);
		else
			fprintf(f, "%" PRId32, v);
		break;
	}
	case DT_I16: fprintf(f, "%d", ((const int16_t *)p)[i]); break;
	case DT_I8: fprintf(f, "%d", ((const int8_t *)p)[i]); break;
	case DT_U64: fprintf(f, "UINT64_C(%" PRIu64 ")", ((const uint64_t *)p)[i]); break;
	case DT_U32: fprintf(f, "%" PRIu32 "u", ((const uint32_t *)p)[i]); break;
	case DT_U16: case DT_F16: case DT_BF16: fprintf(f, "%u", ((const uint16_t *)p)[i]); break;
	case DT_U8: case DT_BOOL: fprintf(f, "%u", ((const uint8_t *)p)[i]); break;
	default: unreachable();
	}
}

/* static const TYPE C<N>[] = {...}; for inline data */
static void
put_data(Emitter *e, TensorId t)
{
	Tensor *tt = &e->g->tensors[t];
	int64_t n = ir_numel(tt);
	fprintf(e->f, "static const %s C%d[%lld] = {", ctype(tt->dtype), e->num[t],
	    (long long)(n ? n : 1));
	for (int64_t i = 0; i < n; i++) {
		fputs(!i ? "\n\t" : i % 8 ? ", " : ",\n\t", e->f);
		put_value(e->f, tt->dtype, tt->bytes, i);
	}
	fputs(n ? "\n};\n" : "0};\n", e->f);
}

static bool
has_data(const Tensor *t)
{
	return t->kind == TK_CONST || (t->kind == TK_WEIGHT && t->data == DATA_INLINE);
}

static void
put_attr(Emitter *e, int node, int k, const Attr *a)
{
	FILE *f = e->f;
	fputs("\t{", f);
	ir_esc_c_string(f, a->name);
	switch (a->type) {
	case ATTR_FLOAT:
		fputs(", TAPRT_ATTR_FLOAT, .f = ", f);
		put_float(f, a->f, true);
		break;
	case ATTR_INT:
		fprintf(f, ", TAPRT_ATTR_INT, .i = INT64_C(%" PRId64 ")", a->i);
		break;
	case ATTR_STRING:
		fputs(", TAPRT_ATTR_STRING, .s = ", f);
		ir_esc_c_string(f, a->s);
		break;
	case ATTR_TENSOR:
		fprintf(f, ", TAPRT_ATTR_TENSOR, .t = &T[%d]", e->num[a->t]);
		break;
	case ATTR_FLOATS:
		fprintf(f, ", TAPRT_ATTR_FLOATS, .n = %d, .fs = A%d_%d", a->n, node, k);
		break;
	case ATTR_INTS:
		fprintf(f, ", TAPRT_ATTR_INTS, .n = %d, .is = A%d_%d", a->n, node, k);
		break;
	case ATTR_STRINGS:
		fprintf(f, ", TAPRT_ATTR_STRINGS, .n = %d, .ss = A%d_%d", a->n, node, k);
		break;
	}
	fputs("},\n", f);
}

/* The list values an attribute table points at. */
static void
put_attr_lists(Emitter *e, int node, const Node *n)
{
	FILE *f = e->f;
	for (int k = 0; k < n->nattr; k++) {
		const Attr *a = &n->attr[k];
		if (a->type != ATTR_FLOATS && a->type != ATTR_INTS && a->type != ATTR_STRINGS)
			continue;
		fprintf(f, "static %s A%d_%d[] = {", a->type == ATTR_FLOATS ? "const float" :
		    a->type == ATTR_INTS ? "const int64_t" : "const char *const", node, k);
		for (int i = 0; i < a->n; i++) {
			if (i)
				fputs(", ", f);
			if (a->type == ATTR_FLOATS)
				put_float(f, a->fs[i], true);
			else if (a->type == ATTR_INTS)
				fprintf(f, "INT64_C(%" PRId64 ")", a->is[i]);
			else
				ir_esc_c_string(f, a->ss[i]);
		}
		fputs(a->n ? "};\n" : "0};\n", f);
	}
}

static void
put_node_tables(Emitter *e, NodeId id)
{
	FILE *f = e->f;
	Node *n = &e->g->nodes[id];
	put_attr_lists(e, id, n);
	fprintf(f, "static taprt_tensor *const I%d[] = {", id);
	for (int i = 0; i < n->nin; i++) {
		if (n->in[i] == IR_NONE)
			fprintf(f, "%s0", i ? ", " : "");
		else
			fprintf(f, "%s&T[%d]", i ? ", " : "", e->num[n->in[i]]);
	}
	fprintf(f, "%s};\nstatic taprt_tensor *const O%d[] = {", n->nin ? "" : "0", id);
	for (int i = 0; i < n->nout; i++) {
		if (n->out[i] == IR_NONE)
			fprintf(f, "%s0", i ? ", " : "");
		else
			fprintf(f, "%s&T[%d]", i ? ", " : "", e->num[n->out[i]]);
	}
	fprintf(f, "%s};\n", n->nout ? "" : "0");
	if (n->nattr) {
		fprintf(f, "static const taprt_attr A%d[] = {\n", id);
		for (int k = 0; k < n->nattr; k++)
			put_attr(e, id, k, &n->attr[k]);
		fputs("};\n", f);
	}
	/* the inputs whose bytes never change while the program runs (a
	 * training step's optimizer aside): kernels may keep them repacked */
	uint32_t fixed = 0;
	for (int i = 0; i < n->nin && i < 32; i++)
		if (n->in[i] != IR_NONE && (e->g->tensors[n->in[i]].kind == TK_WEIGHT ||
		    e->g->tensors[n->in[i]].kind == TK_CONST))
			fixed |= (uint32_t)1 << i;
	fprintf(f, "static const taprt_node N%d = {", id);
	char made[64];
	const char *name = n->name;
	bool random = n->op == OP_RandomUniform || n->op == OP_RandomNormal ||
	    n->op == OP_RandomUniformLike || n->op == OP_RandomNormalLike || n->op == OP_Bernoulli;
	if (random && !*name) { /* its name keys its stream (k_random.c): one of its own */
		snprintf(made, sizeof made, "%s#%d", ir_op_name(n->op), id);
		name = made;
	}
	ir_esc_c_string(f, name);
	fprintf(f, ", %d, %d, %d, %d, I%d, O%d, ", (int)e->g->opset, n->nin, n->nout, n->nattr,
	    id, id);
	if (n->nattr)
		fprintf(f, "A%d", id);
	else
		fputs("0", f);
	fprintf(f, ", 0x%" PRIx32 "};\n", fixed);
}

/* Does stage s use tensor t: read by one of its nodes (or their attributes),
 * or a graph output the stage writes? */
static bool *
stage_uses(Graph *g, int s)
{
	bool *use = calloc(g->ntensors + 1, 1);
	if (!use)
		die("out of memory");
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead || emit_stage(g, n) != s)
			continue;
		for (int i = 0; i < nd->nin; i++)
			if (nd->in[i] != IR_NONE)
				use[nd->in[i]] = true;
		for (int i = 0; i < nd->nout; i++)
			if (nd->out[i] != IR_NONE)
				use[nd->out[i]] = true;
		for (int k = 0; k < nd->nattr; k++)
			if (nd->attr[k].type == ATTR_TENSOR)
				use[nd->attr[k].t] = true;
	}
	for (int i = 0; i < g->noutputs; i++)
		if (emit_tensor_stage(g, g->outputs[i]) == s)
			use[g->outputs[i]] = true;
	return use;
}

/*
 * The calls of stage s's nodes of one step kind (schedule.c) in one region
 * (IR_NONE: the top level) and branch, at `indent` tabs.  An If runs one of its branches where it is:
 * the branches' nodes were placed before it in the graph, but they read
 * only values defined before the If and nothing outside reads them, so
 * they run inside `if (cond) { then } else { else }` and the If's kernel
 * then copies the taken branch's outputs.  Values cross stages only from
 * the top level (an If is never cut), by the schedule's send steps.
 */
static void
put_nodes(Emitter *e, int stage, StepKind what, int region, int branch, int indent, int part)
{
	Graph *g = e->g;
	FILE *f = e->f;
	StepKind kind = what == STEP_RECOMPUTE ? STEP_FWD : what;
	int at = 0;
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead || emit_stage(g, n) != stage || nd->region != region ||
		    (region != IR_NONE && nd->branch != branch) || sched_node_step(g, n) != kind)
			continue;
		int mine = at; /* the part (-subpipeline): as memplan.c's run_nodes counts */
		at += sched_split(g, n);
		if ((part >= 0 && mine != part) ||
		    (what == STEP_RECOMPUTE && !sched_reruns(g, stage, n)))
			continue;
		if (nd->op == OP_If) {
			fprintf(f, "%.*sif (*(const uint8_t *)T[%d].data) {\n", indent, "\t\t\t\t\t\t\t\t\t\t\t\t",
			    e->num[nd->in[0]]);
			put_nodes(e, stage, what, nd->owns, 0, indent + 1, -1);
			fprintf(f, "%.*s} else {\n", indent, "\t\t\t\t\t\t\t\t\t\t\t\t");
			put_nodes(e, stage, what, nd->owns, 1, indent + 1, -1);
			fprintf(f, "%.*s}\n", indent, "\t\t\t\t\t\t\t\t\t\t\t\t");
		}
		fprintf(f, "%.*s", indent, "\t\t\t\t\t\t\t\t\t\t\t\t");
		if (sched_split(g, n)) /* its half's next part waits for it */
			fprintf(f, "if (taprt_allreduce_start(cx, &N%d, &RQ[k & 1]))\n%.*sreturn -1;", n,
			    indent + 1, "\t\t\t\t\t\t\t\t\t\t\t\t\t");
		else if (emit_is_view(g, n))
			fprintf(f, "/* T[%d] is T[%d] as %s */", e->num[nd->out[0]],
			    e->num[nd->in[0]], ir_op_name(nd->op));
		else
			fprintf(f, "taprt_op_%s(cx, &N%d);", ir_op_name(nd->op), n);
		if (nd->name[0]) {
			fputs("\t/* ", f);
			ir_esc_c_comment(f, nd->name);
			fputs(" */", f);
		}
		fputc('\n', f);
		if (nd->phase == PHASE_BWD && g->mesh.dp > 1) /* started gradient all-reduces advance */
			fprintf(f, "%.*sif (cx->pending) taprt_comm_progress(cx);\n", indent,
			    "\t\t\t\t\t\t\t\t\t\t\t\t");
	}
}

/*
 * -subpipeline: the body of a step function's parts, `switch (part)`, a
 * part ending at each TP all-reduce it starts (sched_split) and the next
 * part of the same half beginning with its wait.  np[kind] gets the count.
 */
static void
put_parts(Emitter *e, int stage, StepKind what, int *np)
{
	Graph *g = e->g;
	StepKind kind = what == STEP_RECOMPUTE ? STEP_FWD : what;
	NodeId *split = malloc(sizeof *split * (g->nnodes + 1));
	if (!split)
		die("out of memory");
	int ns = 0;
	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead && emit_stage(g, n) == stage && sched_node_step(g, n) == kind &&
		    sched_split(g, n))
			split[ns++] = n;
	fputs("\tswitch (part) {\n", e->f);
	for (int p = 0; p <= ns; p++) {
		fprintf(e->f, "\tcase %d:\n", p);
		/* the wait for the all-reduce that ended the half's last part,
		 * where this step ran it (a recompute may keep it) */
		if (p > 0 && (what != STEP_RECOMPUTE || sched_reruns(g, stage, split[p - 1])))
			fputs("\t\tif (taprt_allreduce_wait(cx, &RQ[k & 1]))\n\t\t\treturn -1;\n", e->f);
		put_nodes(e, stage, what, IR_NONE, 0, 2, p);
		fputs("\t\tbreak;\n", e->f);
	}
	fputs("\t}\n", e->f);
	np[what] = ns + 1;
	free(split);
}

bool
emit_stage_c(Graph *g, int stage, const MemPlan *mp, const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/stage%d.c", dir, stage);
	FILE *f = fopen(path, "w");
	if (!f) {
		diag_error("cannot write '%s': %s", path, strerror(errno));
		return false;
	}
	Emitter e = {.f = f, .g = g, .mp = mp, .num = ir_print_numbers(g)};
	int ntensors = 0, tp = g->mesh.tp > 1 ? g->mesh.tp : 1, pp = emit_nstages(g);
	int micro = g->microbatches > 1 ? g->microbatches : 1;
	for (TensorId t = 0; t < g->ntensors; t++)
		if (e.num[t] >= ntensors)
			ntensors = e.num[t] + 1;
	bool *use = stage_uses(g, stage);

	fprintf(f, "/*\n * stage%d.c - pipeline stage %d of %d of graph '", stage, stage, pp);
	ir_esc_c_comment(f, g->name);
	fputs("', generated by tapc from ", f);
	ir_esc_c_comment(f, g->model);
	fprintf(f, ".\n * T[N] is %%N in `tapc -emit=ir`; each call names its ONNX node.\n"
	    " * The tables hold one rank's state, so the Makefile compiles this file once\n"
	    " * per rank of the stage (every TP coordinate of every replica), with\n"
	    " * -DTAPRT_RANK=r.  run() is the stage's schedule over the replica's %d\n"
	    " * micro-batch%s (tapc's schedule pass): forwards, backwards, sends, receives.\n */\n",
	    micro, micro == 1 ? "" : "es");
	fputs("#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n#include <taprt.h>\n\n", f);
	fputs("#ifndef TAPRT_RANK\n#define TAPRT_RANK 0\n#endif\n"
	    "#define TAPRT_CAT_(a, b) a##b\n#define TAPRT_CAT(a, b) TAPRT_CAT_(a, b)\n"
	    "#define RANK_PROGRAM TAPRT_CAT(taprt_rank, TAPRT_RANK)\n", f);
	fprintf(f, "#define MICROBATCHES %d\n\n", micro);

	/* tensors, in %N order, with their types and shapes */
	TensorId *byn = malloc(sizeof *byn * (ntensors + 1));
	if (!byn)
		die("out of memory");
	for (int i = 0; i < ntensors; i++)
		byn[i] = IR_NONE;
	for (TensorId t = 0; t < g->ntensors; t++)
		if (e.num[t] >= 0)
			byn[e.num[t]] = t;
	fprintf(f, "static taprt_tensor T[%d] = {\n", ntensors ? ntensors : 1);
	for (int i = 0; i < ntensors; i++) {
		Tensor *t = byn[i] == IR_NONE || !use[byn[i]] ? NULL : &g->tensors[byn[i]];
		if (!t)
			continue;
		fprintf(f, "\t[%d] = {0, %d, %d, {", i, (int)t->dtype, t->rank);
		for (int d = 0; d < t->rank; d++)
			fprintf(f, d ? ", %lld" : "%lld", (long long)t->dims[d]);
		fprintf(f, "%s}, %lld},", t->rank ? "" : "0", (long long)ir_numel(t));
		if (t->kind == TK_INPUT || t->kind == TK_WEIGHT) {
			fputs(t->kind == TK_INPUT ? " /* input " : " /* weight ", f);
			ir_esc_c_comment(f, t->name);
			fputs(" */", f);
		} else if (mp->recv[byn[i]]) {
			fprintf(f, " /* from stage %d */", emit_tensor_stage(g, byn[i]));
		}
		fputc('\n', f);
	}
	fputs("};\n\n", f);

	bool blob = false;
	for (int i = 0; i < ntensors; i++)
		if (byn[i] != IR_NONE && use[byn[i]] && has_data(&g->tensors[byn[i]])) {
			if (mp->blob && mp->blob[byn[i]] >= 0)
				blob = true;
			else
				put_data(&e, byn[i]);
		}
	if (blob) /* consts.S: the large constants */
		fputs("extern const unsigned char taprt_consts[];\n", f);
	fputc('\n', f);

	/* the weight table: where each weight's bytes are in the model files */
	int nweights = 0;
	for (int i = 0; i < ntensors; i++)
		if (byn[i] != IR_NONE && mp->woffset[byn[i]] >= 0 &&
		    g->tensors[byn[i]].kind == TK_WEIGHT)
			nweights++;
	fprintf(f, "static const taprt_weight W[%d] = {\n", nweights ? nweights : 1);
	for (int i = 0; i < ntensors; i++) {
		if (byn[i] == IR_NONE || mp->woffset[byn[i]] < 0 || g->tensors[byn[i]].kind != TK_WEIGHT)
			continue; /* optimizer state: zero, not loaded */
		Tensor *t = &g->tensors[byn[i]];
		fprintf(f, "\t{&T[%d], %d, %lld, %d, {", i, t->file, (long long)t->offset, t->rank);
		for (int d = 0; d < t->rank; d++)
			fprintf(f, d ? ", %lld" : "%lld", (long long)(t->slice_axis == d ?
			    t->dims[d] * t->slice_parts : t->dims[d]));
		if (t->slice_axis >= 0) /* this rank's slice: the full axis is parts x local */
			fprintf(f, "%s}, %d, %d, %d", t->rank ? "" : "0", t->slice_axis,
			    t->slice_parts, t->slice_blocks);
		else
			fprintf(f, "%s}, -1, 1, 1", t->rank ? "" : "0");
		/* the file's halves, converted as they load (legalize-half) */
		fprintf(f, ", %d},\n", (int)t->file_dtype);
	}
	fputs("};\n\n", f);

	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead && emit_stage(g, n) == stage && !emit_is_view(g, n))
			put_node_tables(&e, n);

	const StageSched *ss = &g->sched[stage];
	TensorId loss = g->loss != IR_NONE && emit_tensor_stage(g, g->loss) == stage ? g->loss :
	    IR_NONE;
	if (loss != IR_NONE) /* the step's loss: the mean of its micro-batches' */
		fputs("\nstatic double LOSS_V;\nstatic taprt_tensor LOSS = {&LOSS_V, 11, 0, {0}, 1};\n", f);

	fputs("\nextern const taprt_rank_program RANK_PROGRAM;\n\n", f);
	/* init: weights, state, constants, and what aliases them */
	fputs("static int\ninit(taprt_ctx *cx)\n{\n\tchar *w = cx->weights;\n\t(void)w;\n", f);
	for (int i = 0; i < ntensors; i++) {
		TensorId t = byn[i];
		if (t == IR_NONE || !use[t])
			continue;
		TensorId r = mp->view[t] != IR_NONE ? mp->view[t] : t;
		if (has_data(&g->tensors[r]) && mp->blob && mp->blob[r] >= 0)
			fprintf(f, "\tT[%d].data = (void *)(taprt_consts + %lld);%s\n", i,
			    (long long)mp->blob[r], r != t ? " /* a view */" : "");
		else if (has_data(&g->tensors[r]))
			fprintf(f, "\tT[%d].data = (void *)C%d;%s\n", i, e.num[r], r != t ? " /* a view */" : "");
		else if (mp->woffset[r] >= 0)
			fprintf(f, "\tT[%d].data = w + %lld;%s\n", i, (long long)mp->woffset[r],
			    r != t ? " /* in place */" : "");
	}
	fputs("\treturn taprt_load_weights(cx, &RANK_PROGRAM);\n}\n\n", f);

	/* micro-batch k's rows of the program's inputs and outputs */
	fputs("static void\nbind_io(taprt_ctx *cx, int64_t k)\n{\n\t(void)cx;\n\t(void)k;\n", f);
	for (int i = 0; i < g->ninputs; i++) /* a scalar input (a flag) is every micro-batch's */
		if (use[g->inputs[i]])
			fprintf(f, "\tT[%d].data = (char *)cx->inputs[%d] + k * %lld;\n",
			    e.num[g->inputs[i]], i, g->tensors[g->inputs[i]].rank ?
			    (long long)ir_nbytes(&g->tensors[g->inputs[i]]) : 0LL);
	for (int i = 0; i < g->noutputs; i++) {
		TensorId t = g->outputs[i];
		bool first = true;
		for (int k = 0; k < i; k++)
			first &= g->outputs[k] != t;
		if (first && emit_into_output(g, mp, t))
			fprintf(f, "\tT[%d].data = (char *)cx->outputs[%d] + k * %lld;\n", e.num[t], i,
			    (long long)ir_nbytes(&g->tensors[t]));
	}
	for (int i = 0; i < ntensors; i++) {
		TensorId t = byn[i];
		if (t != IR_NONE && use[t] && mp->view[t] != IR_NONE && mp->bound[mp->view[t]])
			fprintf(f, "\tT[%d].data = T[%d].data; /* a view */\n", i, e.num[mp->view[t]]);
	}
	fputs("}\n\n", f);
	fputs("static void\nbind(taprt_ctx *cx, const int32_t *t, const int64_t *off, int n)\n{\n"
	    "\tfor (int i = 0; i < n; i++)\n\t\tT[t[i]].data = (char *)cx->arena + off[i];\n}\n\n", f);

	/* the step functions: per kind, the tensors its steps bind in the arena
	 * and, per micro-batch, where */
	static const char *fn[STEP_COUNT] = {[STEP_FWD] = "fwd", [STEP_BWD] = "bwd",
		[STEP_RECOMPUTE] = "recompute", [STEP_OPT] = "opt"};
	static const char *up[STEP_COUNT] = {[STEP_FWD] = "F", [STEP_BWD] = "B",
		[STEP_RECOMPUTE] = "R", [STEP_OPT] = "O"};
	int M = micro, np[STEP_COUNT] = {0};
	if (g->subpipe) /* per half: its started TP all-reduce (k & 1 of micro-batch k) */
		fputs("static taprt_request *RQ[2];\n\n", f);
	for (int kind = 0; kind < STEP_COUNT; kind++) {
		if (!fn[kind])
			continue;
		int first = -1;
		for (int j = 0; j < ss->nsteps && first < 0; j++)
			if ((int)ss->steps[j].kind == kind)
				first = j;
		if (first < 0)
			continue;
		int nl = 0;
		for (int i = 0; i < ntensors; i++)
			nl += byn[i] != IR_NONE && mp->off[first][byn[i]] >= 0;
		int rows = kind == STEP_OPT ? 1 : M;
		fprintf(f, "static const int32_t L%s[%d] = {", up[kind], nl ? nl : 1);
		for (int i = 0, c = 0; i < ntensors; i++)
			if (byn[i] != IR_NONE && mp->off[first][byn[i]] >= 0)
				fprintf(f, "%s%d", c++ ? ", " : "", i);
		fprintf(f, "%s};\nstatic const int64_t O%s[%d][%d] = {\n", nl ? "" : "0", up[kind], rows,
		    nl ? nl : 1);
		for (int r = 0; r < rows; r++) {
			int js = -1;
			for (int j = 0; j < ss->nsteps && js < 0; j++)
				if ((int)ss->steps[j].kind == kind && (kind == STEP_OPT || ss->steps[j].micro == r))
					js = j;
			fputs("\t{", f);
			for (int i = 0, c = 0; i < ntensors; i++)
				if (byn[i] != IR_NONE && mp->off[first][byn[i]] >= 0)
					fprintf(f, "%s%lld", c++ ? ", " : "", js >= 0 ?
					    (long long)mp->off[js][byn[i]] : 0LL);
			fputs(nl ? "},\n" : "0},\n", f);
		}
		if (g->subpipe && kind != STEP_OPT)
			fprintf(f, "};\n\nstatic int\n%s_part(taprt_ctx *cx, int64_t k, int part)\n{\n",
			    fn[kind]);
		else
			fprintf(f, "};\n\nstatic int\n%s(taprt_ctx *cx, int64_t k)\n{\n", fn[kind]);
		fprintf(f, "\tcx->micro = (int)k;\n\tbind(cx, L%s, O%s[%s], %d);\n\tbind_io(cx, k);\n",
		    up[kind], up[kind], kind == STEP_OPT ? "0" : "k", nl);
		if (!g->subpipe || kind == STEP_OPT) {
			put_nodes(&e, stage, kind, IR_NONE, 0, 1, -1);
		} else {
			put_parts(&e, stage, kind, np);
			fprintf(f, "\tif (part != %d)\n\t\treturn cx->error[0] ? -1 : 0;\n", np[kind] - 1);
		}
		if (kind == STEP_FWD) {
			/* outputs this stage owns that are not computed into their
			 * buffer: inputs, weights, constants, or a value listed twice */
			for (int i = 0; i < g->noutputs; i++) {
				TensorId t = g->outputs[i];
				if (emit_tensor_stage(g, t) != stage)
					continue;
				bool direct = emit_into_output(g, mp, t);
				for (int q = 0; q < i && direct; q++)
					direct = g->outputs[q] != t;
				if (!direct)
					fprintf(f, "\tmemcpy((char *)cx->outputs[%d] + k * %lld, T[%d].data, %lld);\n",
					    i, (long long)ir_nbytes(&g->tensors[t]), e.num[t],
					    (long long)ir_nbytes(&g->tensors[t]));
			}
			if (loss != IR_NONE)
				fprintf(f, "\tLOSS_V += (double)*(const %s *)T[%d].data / MICROBATCHES;\n",
				    g->tensors[loss].dtype == DT_F64 ? "double" : "float", e.num[loss]);
		}
		fputs("\treturn cx->error[0] ? -1 : 0;\n}\n\n", f);
		if (!g->subpipe || kind == STEP_OPT)
			continue;
		bool b = kind == STEP_BWD; /* the first half may start the gradient sums */
		fprintf(f, "/* micro-batch k's parts in order */\nstatic int\n%s(taprt_ctx *cx, int64_t k)\n"
		    "{\n\tfor (int p = 0; p < %d; p++)\n\t\tif (%s_part(cx, k, p))\n\t\t\treturn -1;\n"
		    "\treturn 0;\n}\n\n", fn[kind], np[kind], fn[kind]);
		fprintf(f, "/* halves k and k + 1 part by part: one half's all-reduce in flight while\n"
		    " * the other computes (-subpipeline) */\nstatic int\n%s2(taprt_ctx *cx, int64_t k%s)\n"
		    "{\n\tfor (int p = 0; p < %d; p++) {\n%s\t\tif (%s_part(cx, k, p))\n"
		    "\t\t\treturn -1;\n%s\t\tif (%s_part(cx, k + 1, p))\n\t\t\treturn -1;\n"
		    "\t}\n\treturn 0;\n}\n\n", fn[kind], b ? ", bool first" : "", np[kind],
		    b ? "\t\tcx->first_backward = first;\n" : "", fn[kind],
		    b ? "\t\tcx->first_backward = false;\n" : "", fn[kind]);
	}

	/* run(): the schedule, step by step */
	fprintf(f, "/* stage %d's schedule (%s", stage, sched_name(g->sched_kind));
	if (ss->recompute)
		fputs(", recomputing", f);
	fprintf(f, "): at most %d micro-batch%s in flight */\n", ss->inflight,
	    ss->inflight == 1 ? "" : "es");
	fputs("static int\nrun(taprt_ctx *cx)\n{\n\tchar *a = cx->arena;\n\t(void)a;\n", f);
	if (loss != IR_NONE)
		fputs("\tLOSS_V = 0;\n", f);
	bool first_bwd = true;
	for (int j = 0; j < ss->nsteps; j++) {
		const SchedStep *st = &ss->steps[j];
		if (st->pair) { /* this step and the next, interleaved (-subpipeline) */
			fprintf(f, "\tif (%s2(cx, %d%s))\n\t\treturn -1;\n", fn[st->kind], st->micro,
			    st->kind != STEP_BWD ? "" : first_bwd ? ", true" : ", false");
			first_bwd = first_bwd && st->kind != STEP_BWD;
			j++;
			continue;
		}
		switch (st->kind) {
		case STEP_FWD: case STEP_RECOMPUTE:
			fprintf(f, "\tif (%s(cx, %d))\n\t\treturn -1;\n", fn[st->kind], st->micro);
			break;
		case STEP_BWD:
			fprintf(f, "\tcx->first_backward = %d;\n\tif (bwd(cx, %d))\n\t\treturn -1;\n",
			    first_bwd, st->micro);
			first_bwd = false;
			break;
		case STEP_OPT:
			fputs("\tif (opt(cx, 0))\n\t\treturn -1;\n", f);
			break;
		case STEP_RECV: case STEP_SEND: {
			int i = e.num[st->t];
			TensorId r = mp->view[st->t] != IR_NONE ? mp->view[st->t] : st->t;
			if (mp->off[j][st->t] >= 0)
				fprintf(f, "\tT[%d].data = a + %lld;\n", i, (long long)mp->off[j][st->t]);
			else if (mp->bound[r] && st->micro >= 0)
				/* the program's own rows (an output another stage
				 * reads): micro-batch k's, also when the send waited
				 * for a later micro-batch's step (-slice) */
				fprintf(f, "\tbind_io(cx, %d);\n", st->micro);
			int d = (st->peer - stage) * tp;
			fprintf(f, "\tif (taprt_%s(cx, &T[%d], cx->rank %c %d, %d))\n\t\treturn -1;"
			    "\t/* micro-batch %d %s stage %d */\n", st->kind == STEP_RECV ? "recv" : "send", i,
			    d < 0 ? '-' : '+', d < 0 ? -d : d, i, st->micro,
			    st->kind == STEP_RECV ? "from" : "to", st->peer);
			break;
		}
		case STEP_SYNC: {
			Node *nd = &g->nodes[st->node];
			for (int q = 0; q < nd->nin + nd->nout; q++) {
				TensorId t = q < nd->nin ? nd->in[q] : nd->out[q - nd->nin];
				if (t != IR_NONE && mp->off[j][t] >= 0)
					fprintf(f, "\tT[%d].data = a + %lld;\n", e.num[t], (long long)mp->off[j][t]);
			}
			fprintf(f, "\ttaprt_op_AllReduce(cx, &N%d);\t/* ", st->node);
			ir_esc_c_comment(f, nd->name);
			fputs(" */\n\tif (cx->error[0])\n\t\treturn -1;\n", f);
			break;
		}
		default:
			unreachable();
		}
	}
	fputs("\treturn 0;\n}\n\n", f);
	/* what the stage reads and computes: with a process per rank, what
	 * each process loads and sends to rank 0 */
	fprintf(f, "static const bool READS[%d] = {", g->ninputs ? g->ninputs : 1);
	for (int i = 0; i < g->ninputs; i++)
		fprintf(f, "%s%d", i ? ", " : "", use[g->inputs[i]] ? 1 : 0);
	fprintf(f, "%s};\nstatic const bool WRITES[%d] = {", g->ninputs ? "" : "0",
	    g->noutputs ? g->noutputs : 1);
	for (int i = 0; i < g->noutputs; i++)
		fprintf(f, "%s%d", i ? ", " : "", emit_tensor_stage(g, g->outputs[i]) == stage ? 1 : 0);
	fprintf(f, "%s};\n", g->noutputs ? "" : "0");
	fprintf(f, "const taprt_rank_program RANK_PROGRAM = {init, run, %lld, %lld, %d, W, READS, WRITES",
	    (long long)mp->arena_bytes, (long long)mp->weight_bytes, nweights);
	if (loss != IR_NONE) /* training: the loss */
		fputs(", &LOSS", f);
	fputs("};\n", f);
	free(byn);
	free(use);
	free(e.num);
	if (fclose(f) != 0) {
		diag_error("cannot write '%s': %s", path, strerror(errno));
		return false;
	}
	return true;
}
