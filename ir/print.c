/*
 * print.c - write a graph in tapc's textual IR (docs/ir.md has the grammar).
 *
 * One line per tensor source or node, in topological order: inputs, then
 * weights, then nodes, each constant just before its first use.  Tensors are
 * renumbered %0, %1, ... in order of appearance, so the text depends only on
 * the graph and never on ids, pointers or time.  ir/read.c parses the same
 * text back: print -> read -> print is byte-identical.
 *
 * With a data file (ir_print_data: tapc -emit=ir -o FILE), the values of a
 * weight or constant of more than IR_INLINE_MAX elements go to that file
 * instead, raw little-endian bytes at 64-byte aligned offsets, and its line
 * reads "@+0xOFFSET": a BatchNormalization folded into ResNet-18's weights
 * printed 157 MB of decimals otherwise.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

typedef struct {
	FILE *f;
	Graph *g;
	int *num;                       /* printed number per tensor, -1 if none yet */
	int next;
	FILE *data;                     /* the data file's stream (ir_print_data), or NULL */
	int64_t data_off;               /* bytes written to it so far */
	bool data_failed;               /* a write to it failed */
} Printer;

static void
put_quoted(FILE *f, const char *s)
{
	ir_esc_ir(f, s, true);
}

/* A float that reads back as a float: always has '.', 'e', "inf" or "nan". */
void
ir_put_float(FILE *f, double v, int digits)
{
	char buf[64];
	if (isnan(v)) {
		fputs(signbit(v) ? "-nan" : "nan", f);
		return;
	}
	if (isinf(v)) {
		fputs(v < 0 ? "-inf" : "inf", f);
		return;
	}
	snprintf(buf, sizeof buf, "%.*g", digits, v);
	if (!strpbrk(buf, ".e"))
		strcat(buf, ".0");
	fputs(buf, f);
}

static int *print_graph(FILE *out, Graph *g, FILE *data, const char *data_name, int64_t *data_bytes);

static bool
is_plain(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') ||
		    ('0' <= *s && *s <= '9') || *s == '.' || *s == '_' || *s == '-' || *s == '/'))
			return false;
	return true;
}

static void
put_values(FILE *f, DType dt, const void *p, int64_t n)
{
	fputc('[', f);
	for (int64_t i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		switch (dt) {
		case DT_F32: ir_put_float(f, ((const float *)p)[i], 9); break;
		case DT_F64: ir_put_float(f, ((const double *)p)[i], 17); break;
		case DT_I64: fprintf(f, "%" PRId64, ((const int64_t *)p)[i]); break;
		case DT_I32: fprintf(f, "%" PRId32, ((const int32_t *)p)[i]); break;
		case DT_I16: fprintf(f, "%" PRId16, ((const int16_t *)p)[i]); break;
		case DT_I8: fprintf(f, "%" PRId8, ((const int8_t *)p)[i]); break;
		case DT_U64: fprintf(f, "%" PRIu64, ((const uint64_t *)p)[i]); break;
		case DT_U32: fprintf(f, "%" PRIu32, ((const uint32_t *)p)[i]); break;
		case DT_U16: fprintf(f, "%" PRIu16, ((const uint16_t *)p)[i]); break;
		case DT_U8: case DT_BOOL: fprintf(f, "%u", ((const uint8_t *)p)[i]); break;
		case DT_F16: case DT_BF16:
			fprintf(f, "0x%04x", ((const uint16_t *)p)[i]);
			break;
		default: die("cannot print %s values", ir_dtype_name(dt));
		}
	}
	fputc(']', f);
}

static int
number(Printer *pr, TensorId t)
{
	if (pr->num[t] < 0)
		pr->num[t] = pr->next++;
	return pr->num[t];
}

static void
put_ref(Printer *pr, TensorId t)
{
	if (t == IR_NONE)
		fputc('_', pr->f);
	else
		fprintf(pr->f, "%%%d", number(pr, t));
}

/* Does t's line point into the data file rather than list its values? */
static bool
to_data(const Printer *pr, const Tensor *t)
{
	return pr->data && t->data == DATA_INLINE && ir_numel(t) > IR_INLINE_MAX &&
	    t->length == ir_numel(t) * ir_dtype_size(t->dtype);
}

static void
put_source(Printer *pr, TensorId id)
{
	Graph *g = pr->g;
	Tensor *t = &g->tensors[id];
	char ty[IR_TYPESTR];
	fprintf(pr->f, "  %%%d = ", number(pr, id));
	switch (t->kind) {
	case TK_INPUT: fputs("input ", pr->f); break;
	case TK_WEIGHT: fputs("weight ", pr->f); break;
	case TK_CONST: fputs("const ", pr->f); break;
	case TK_STATE: fputs("state ", pr->f); break;
	default: unreachable();
	}
	if (t->kind != TK_CONST) {
		put_quoted(pr->f, t->name);
		fputc(' ', pr->f);
	}
	fputs(ir_typestr(t, ty), pr->f);
	if (to_data(pr, t)) {
		int64_t off = (pr->data_off + 63) / 64 * 64;
		static const char zeros[64];
		if (off > pr->data_off &&
		    fwrite(zeros, 1, (size_t)(off - pr->data_off), pr->data) != (size_t)(off - pr->data_off))
			pr->data_failed = true;
		if (fwrite(t->bytes, 1, (size_t)t->length, pr->data) != (size_t)t->length)
			pr->data_failed = true;
		pr->data_off = off + t->length;
		fprintf(pr->f, " @+0x%" PRIx64, (uint64_t)off);
	} else if (t->data == DATA_FILE) {
		fputs(" @", pr->f);
		if (is_plain(g->files[t->file]))
			fputs(g->files[t->file], pr->f);
		else
			put_quoted(pr->f, g->files[t->file]);
		fprintf(pr->f, "+0x%" PRIx64, (uint64_t)t->offset);
		if (t->slice_axis >= 0) {
			fprintf(pr->f, " slice=%d/%d", t->slice_axis, t->slice_parts);
			if (t->slice_blocks > 1)
				fprintf(pr->f, " blocks=%d", t->slice_blocks);
		}
		if (t->file_dtype != DT_UNDEF)
			fprintf(pr->f, " from=%s", ir_dtype_name(t->file_dtype));
	} else if (t->data == DATA_INLINE) {
		fputs(" = ", pr->f);
		put_values(pr->f, t->dtype, t->bytes, ir_numel(t));
	}
	fputc('\n', pr->f);
}

static void
put_attr(Printer *pr, const Attr *a)
{
	FILE *f = pr->f;
	fprintf(f, "%s=", a->name);
	switch (a->type) {
	case ATTR_INT: fprintf(f, "%" PRId64, a->i); break;
	case ATTR_FLOAT: ir_put_float(f, a->f, 9); break;
	case ATTR_STRING: put_quoted(f, a->s); break;
	case ATTR_TENSOR: put_ref(pr, a->t); break;
	case ATTR_INTS:
		if (!a->n)
			fputs("ints[]", f);
		else
			put_values(f, DT_I64, a->is, a->n);
		break;
	case ATTR_FLOATS:
		if (!a->n)
			fputs("floats[]", f);
		else
			put_values(f, DT_F32, a->fs, a->n);
		break;
	case ATTR_STRINGS:
		fputs(a->n ? "[" : "strings[", f);
		for (int i = 0; i < a->n; i++) {
			if (i)
				fputc(',', f);
			put_quoted(f, a->ss[i]);
		}
		fputc(']', f);
		break;
	}
}

static void
put_node(Printer *pr, NodeId id)
{
	Graph *g = pr->g;
	Node *n = &g->nodes[id];
	char *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);
	FILE *out = pr->f;
	char ty[IR_TYPESTR];

	/* constants are printed just before their first use, to read in place */
	for (int i = 0; i < n->nin; i++)
		if (n->in[i] != IR_NONE && pr->num[n->in[i]] < 0 &&
		    g->tensors[n->in[i]].kind == TK_CONST)
			put_source(pr, n->in[i]);
	for (int i = 0; i < n->nattr; i++)
		if (n->attr[i].type == ATTR_TENSOR && pr->num[n->attr[i].t] < 0)
			put_source(pr, n->attr[i].t);

	pr->f = f;
	fputs("  ", f);
	for (int i = 0; i < n->nout; i++) {
		if (i)
			fputs(", ", f);
		put_ref(pr, n->out[i]);
	}
	fprintf(f, " = %s", ir_op_name(n->op));
	for (int i = 0; i < n->nin; i++) {
		fputs(i ? ", " : " ", f);
		put_ref(pr, n->in[i]);
	}
	if (n->nattr) {
		fputs(" {", f);
		for (int i = 0; i < n->nattr; i++) {
			if (i)
				fputc(' ', f);
			put_attr(pr, &n->attr[i]);
		}
		fputc('}', f);
	}
	fputs(" :", f);
	for (int i = 0; i < n->nout; i++) {
		fputs(i ? ", " : " ", f);
		if (n->out[i] == IR_NONE)
			fputc('_', f);
		else
			fputs(ir_typestr(&g->tensors[n->out[i]], ty), f);
	}
	if (n->group != IR_NONE)
		fprintf(f, " gn=%d", n->group);
	if (n->subgraph != IR_NONE)
		fprintf(f, " sg=%d", n->subgraph);
	if (n->stage != IR_NONE)
		fprintf(f, " stage=%d", n->stage);
	if (n->phase != PHASE_FWD)
		fprintf(f, " phase=%s", n->phase == PHASE_BWD ? "bwd" : "opt");
	if (n->tp_axis == TP_REPLICATE)
		fputs(" tp=R", f);
	else if (n->tp_axis >= 0)
		fprintf(f, n->tp_blocks > 1 ? " tp=S%d/%d" : " tp=S%d", n->tp_axis, n->tp_blocks);
	if (n->tp_comm)
		fprintf(f, " comm=%s", n->tp_comm);
	if (n->owns != IR_NONE)
		fprintf(f, " region=%d", n->owns);
	if (n->region != IR_NONE)
		fprintf(f, " %s=%d", n->branch ? "else" : "then", n->region);
	fclose(f);
	pr->f = out;

	fputs(line, out);
	if (n->name[0]) {
		for (int col = (int)len; col < 60; col++)
			fputc(' ', out);
		fputs("  # ", out);
		ir_esc_ir(out, n->name, false);
	}
	fputc('\n', out);
	free(line);
}

int *
ir_print_numbers(Graph *g)
{
	/* the numbering is a by-product of printing; print where nobody reads */
	FILE *null = fopen("/dev/null", "w");
	if (!null)
		die("cannot open /dev/null");
	int *num = print_graph(null, g, NULL, NULL, NULL);
	fclose(null);
	return num;
}

void
ir_print(FILE *f, Graph *g)
{
	free(print_graph(f, g, NULL, NULL, NULL));
}

bool
ir_print_data(FILE *f, Graph *g, FILE *data, const char *data_name, int64_t *data_bytes)
{
	free(print_graph(f, g, data, data_name, data_bytes));
	return *data_bytes >= 0;
}

/* The header line: it names the data file, which is only known to be needed
 * once the body has been printed. */
static void
put_header(FILE *f, Graph *g, const char *data_name)
{
	fputs("graph ", f);
	put_quoted(f, g->name);
	fputs(" model=", f);
	put_quoted(f, g->model);
	fprintf(f, " opset=%" PRId64, g->opset);
	if (g->mesh.dp) /* once the degrees are chosen */
		fprintf(f, " mesh=%dx%d dp=%d tp=%d pp=%d", g->mesh.rows, g->mesh.cols,
		    g->mesh.dp, g->mesh.tp, g->mesh.pp);
	if (g->mesh.dp && g->microbatches > 1) /* shapes are a micro-batch's */
		fprintf(f, " microbatches=%d", g->microbatches);
	if (g->mesh.dp && g->slice > 0) /* microbatches counts halves */
		fprintf(f, " slice=%d", g->slice);
	if (g->mesh.dp && g->subpipe) /* ... and so here */
		fputs(" subpipeline=1", f);
	if (data_name) {
		fputs(" data=", f);
		put_quoted(f, data_name);
	}
	fputc('\n', f);
}

static int *
print_graph(FILE *out, Graph *g, FILE *data, const char *data_name, int64_t *data_bytes)
{
	Printer pr = {.g = g, .data = data};
	pr.num = malloc(sizeof *pr.num * (g->ntensors + 1));
	if (!pr.num)
		die("out of memory");
	for (int i = 0; i < g->ntensors; i++)
		pr.num[i] = -1;
	char *body = NULL;
	size_t len = 0;
	FILE *f = data ? open_memstream(&body, &len) : out;
	if (!f)
		die("out of memory");
	pr.f = f;
	if (!data)
		put_header(f, g, NULL);

	for (int i = 0; i < g->ninputs; i++)
		put_source(&pr, g->inputs[i]);
	for (TensorId t = 0; t < g->ntensors; t++)
		if (pr.num[t] < 0 && g->tensors[t].kind == TK_WEIGHT)
			put_source(&pr, t);
	for (TensorId t = 0; t < g->ntensors; t++) /* optimizer state, after the weights */
		if (pr.num[t] < 0 && g->tensors[t].kind == TK_STATE)
			put_source(&pr, t);
	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead)
			put_node(&pr, n);
	for (int t = 0; t < g->ntemplates; t++) {
		Template *tp = &g->templates[t];
		fprintf(f, "  template %d ", t);
		put_quoted(f, tp->name);
		fprintf(f, " graphnodes=%d instances=%d", tp->ngroups, tp->ninstances);
		for (int i = 0; i < tp->ninstances; i++)
			for (int k = 0; k < tp->ngroups; k++)
				fprintf(f, "%s%d%s", k ? "," : " [", tp->inst[i * tp->ngroups + k],
				    k == tp->ngroups - 1 ? "]" : "");
		fputc('\n', f);
	}
	for (int i = 0; i < g->noutputs; i++) /* a folded output */
		if (pr.num[g->outputs[i]] < 0 && g->tensors[g->outputs[i]].kind == TK_CONST)
			put_source(&pr, g->outputs[i]);
	for (int i = 0; i < g->noutputs; i++) {
		fputs("  output ", f);
		put_ref(&pr, g->outputs[i]);
		fputc(' ', f);
		put_quoted(f, g->tensors[g->outputs[i]].name);
		fputc('\n', f);
	}
	/* a training graph: the loss, and each trained weight's gradient */
	if (g->loss != IR_NONE) {
		fputs("  loss ", f);
		put_ref(&pr, g->loss);
		fputc('\n', f);
	}
	for (int i = 0; i < g->ngrads; i++) {
		fputs("  grad ", f);
		put_ref(&pr, g->grads[i].weight);
		fputc(' ', f);
		put_ref(&pr, g->grads[i].grad);
		fputc('\n', f);
	}
	if (data) {
		if (fclose(f) != 0)
			die("out of memory");
		put_header(out, g, pr.data_off ? data_name : NULL);
		fwrite(body, 1, len, out);
		free(body);
		*data_bytes = !pr.data_failed && fflush(data) == 0 ? pr.data_off : -1;
	}
	return pr.num;
}
