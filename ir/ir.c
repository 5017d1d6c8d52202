/*
 * ir.c - building, indexing and freeing the IR graph (see ir.h).
 *
 * Needs nothing but libc.  The graph owns an arena for strings and small
 * arrays and two growable arrays (tensors, nodes); ir_free releases all.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"

/* ---------------------------------------------------------------- ops */

static const char *op_names[] = {
#define OP(name, kind) #name,
#include "ir/ops.def"
#undef OP
};

static const OpKind op_kinds[] = {
#define OP(name, kind) OPK_##kind,
#include "ir/ops.def"
#undef OP
};

const char *
ir_op_name(Op op)
{
	return (unsigned)op < OP_COUNT ? op_names[op] : "?";
}

OpKind
ir_op_kind(Op op)
{
	return op_kinds[op];
}

bool
ir_op_is_comm(Op op)
{
	return op_kinds[op] == OPK_COMM;
}

bool
ir_op_is_view(Op op)
{
	return op == OP_Reshape || op == OP_Flatten || op == OP_Squeeze || op == OP_Unsqueeze ||
	    op == OP_Identity;
}

bool
ir_op_lookup(const char *name, Op *op)
{
	for (int i = 0; i < OP_COUNT; i++)
		if (strcmp(op_names[i], name) == 0) {
			*op = (Op)i;
			return true;
		}
	return false;
}

/* -------------------------------------------------------------- dtypes */

static const struct {
	const char *name;
	int size;
} dtypes[DT_COUNT] = {
	[DT_UNDEF] = {"?", 0},    [DT_F32] = {"f32", 4},  [DT_U8] = {"u8", 1},
	[DT_I8] = {"i8", 1},      [DT_U16] = {"u16", 2},  [DT_I16] = {"i16", 2},
	[DT_I32] = {"i32", 4},    [DT_I64] = {"i64", 8},  [DT_STRING] = {"str", 0},
	[DT_BOOL] = {"bool", 1},  [DT_F16] = {"f16", 2},  [DT_F64] = {"f64", 8},
	[DT_U32] = {"u32", 4},    [DT_U64] = {"u64", 8},  [DT_C64] = {"c64", 8},
	[DT_C128] = {"c128", 16}, [DT_BF16] = {"bf16", 2},
};

const char *
ir_dtype_name(DType t)
{
	return (unsigned)t < DT_COUNT ? dtypes[t].name : "?";
}

bool
ir_dtype_lookup(const char *name, DType *t)
{
	for (int i = 1; i < DT_COUNT; i++)
		if (strcmp(dtypes[i].name, name) == 0) {
			*t = (DType)i;
			return true;
		}
	return false;
}

int
ir_dtype_size(DType t)
{
	return (unsigned)t < DT_COUNT ? dtypes[t].size : 0;
}

/* --------------------------------------------------------------- arena */

struct ArenaBlock {
	ArenaBlock *next;
	size_t used, cap;
	_Alignas(16) unsigned char mem[];
};

void *
ir_alloc(Arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	ArenaBlock *b = a->head;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		b = malloc(sizeof *b + cap);
		if (!b)
			die("out of memory (%zu bytes)", n);
		b->next = a->head;
		b->used = 0;
		b->cap = cap;
		a->head = b;
	}
	void *p = b->mem + b->used;
	b->used += n;
	memset(p, 0, n);
	return p;
}

char *
ir_strdup(Arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = ir_alloc(a, n);
	memcpy(p, s, n);
	return p;
}

void
ir_arena_free(Arena *a)
{
	for (ArenaBlock *b = a->head, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	a->head = NULL;
}

/* --------------------------------------------------------------- graph */

static void *
grow(void *p, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return p;
	int n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	p = realloc(p, (size_t)n * elem);
	if (!p)
		die("out of memory");
	*cap = n;
	return p;
}

Graph *
ir_new(const char *name)
{
	Graph *g = calloc(1, sizeof *g);
	if (!g)
		die("out of memory");
	g->name = ir_strdup(&g->arena, name ? name : "");
	g->model = "";
	g->dir = ".";
	ir_cost_defaults(&g->cost);
	ir_cluster_mesh(&g->cluster, 1, 1, &g->cost);
	g->loss = IR_NONE;
	return g;
}

int *
ir_group_blocks(const Graph *g, int *nblocks)
{
	int *blk = malloc(sizeof *blk * (g->ngroups + 1)), n = 0;
	if (!blk)
		die("out of memory");
	for (int i = 0; i < g->ngroups; i++)
		blk[i] = -1;
	for (int t = 0; t < g->ntemplates; t++) {
		const Template *T = &g->templates[t];
		for (int i = 0; i < T->ninstances; i++, n++)
			for (int k = 0; k < T->ngroups; k++)
				blk[T->inst[i * T->ngroups + k]] = n;
	}
	if (nblocks)
		*nblocks = n;
	return blk;
}

void
ir_free(Graph *g)
{
	if (!g)
		return;
	free(g->tensors);
	free(g->nodes);
	free(g->nusers);
	free(g->users);
	free(g->tpsearch);
	free(g->stages);
	ir_arena_free(&g->arena);
	free(g);
}

TensorId
ir_add_tensor(Graph *g, const char *name, TensorKind kind, DType dt)
{
	g->tensors = grow(g->tensors, &g->captensors, g->ntensors + 1, sizeof(Tensor));
	TensorId id = g->ntensors++;
	Tensor *t = &g->tensors[id];
	memset(t, 0, sizeof *t);
	t->name = ir_strdup(&g->arena, name ? name : "");
	t->kind = kind;
	t->dtype = dt;
	t->rank = -1;
	t->producer = IR_NONE;
	t->file = -1;
	t->slice_axis = -1;
	return id;
}

NodeId
ir_add_node(Graph *g, Op op, const char *name, int nin, const TensorId *in,
    int nout, const TensorId *out)
{
	g->nodes = grow(g->nodes, &g->capnodes, g->nnodes + 1, sizeof(Node));
	NodeId id = g->nnodes++;
	Node *n = &g->nodes[id];
	memset(n, 0, sizeof *n);
	n->op = op;
	n->name = ir_strdup(&g->arena, name ? name : "");
	n->nin = nin;
	n->nout = nout;
	n->in = ir_alloc(&g->arena, sizeof(TensorId) * (nin ? nin : 1));
	n->out = ir_alloc(&g->arena, sizeof(TensorId) * (nout ? nout : 1));
	if (nin)
		memcpy(n->in, in, sizeof(TensorId) * nin);
	for (int i = 0; i < nout; i++) {
		n->out[i] = out[i];
		if (out[i] != IR_NONE)
			g->tensors[out[i]].producer = id;
	}
	n->group = IR_NONE;
	n->subgraph = IR_NONE;
	n->stage = IR_NONE;
	n->region = IR_NONE;
	n->owns = IR_NONE;
	n->phase = PHASE_FWD;
	n->tp_axis = TP_NONE;
	n->tp_blocks = 1;
	return id;
}

void
ir_set_shape(Tensor *t, int rank, const int64_t *dims)
{
	if (rank < 0 || rank > IR_MAX_RANK)
		die("rank %d out of range", rank);
	t->rank = rank;
	for (int i = 0; i < rank; i++)
		t->dims[i] = dims[i];
}

int
ir_add_file(Graph *g, const char *path)
{
	for (int i = 0; i < g->nfiles; i++)
		if (strcmp(g->files[i], path) == 0)
			return i;
	const char **f = ir_alloc(&g->arena, sizeof *f * (g->nfiles + 1));
	if (g->nfiles)
		memcpy(f, g->files, sizeof *f * g->nfiles);
	f[g->nfiles] = ir_strdup(&g->arena, path);
	g->files = f;
	return g->nfiles++;
}

static TensorId *
append_id(Graph *g, TensorId *list, int n, TensorId t)
{
	TensorId *l = ir_alloc(&g->arena, sizeof *l * (n + 1));
	if (n)
		memcpy(l, list, sizeof *l * n);
	l[n] = t;
	return l;
}

void
ir_add_input(Graph *g, TensorId t)
{
	g->inputs = append_id(g, g->inputs, g->ninputs++, t);
}

void
ir_add_output(Graph *g, TensorId t)
{
	g->outputs = append_id(g, g->outputs, g->noutputs++, t);
}

int64_t
ir_numel(const Tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->rank; i++)
		n *= t->dims[i];
	return n;
}

int64_t
ir_nbytes(const Tensor *t)
{
	return ir_numel(t) * ir_dtype_size(t->dtype);
}

char *
ir_typestr(const Tensor *t, char *buf)
{
	char *p = buf;
	p += sprintf(p, "%s", ir_dtype_name(t->dtype));
	if (t->rank < 0) {
		strcpy(p, "[?]");
		return buf;
	}
	*p++ = '[';
	for (int i = 0; i < t->rank; i++)
		p += sprintf(p, i ? ",%lld" : "%lld", (long long)t->dims[i]);
	*p++ = ']';
	*p = 0;
	return buf;
}

/* ---------------------------------------------------------- attributes */

Attr *
ir_set_attr(Graph *g, NodeId id, const char *name, AttrType type)
{
	Node *n = &g->nodes[id];
	int i = 0;
	while (i < n->nattr && strcmp(n->attr[i].name, name) < 0)
		i++;
	if (i < n->nattr && strcmp(n->attr[i].name, name) == 0) {
		memset(&n->attr[i], 0, sizeof n->attr[i]);
	} else {
		Attr *a = ir_alloc(&g->arena, sizeof *a * (n->nattr + 1));
		if (n->nattr) {
			memcpy(a, n->attr, sizeof *a * i);
			memcpy(a + i + 1, n->attr + i, sizeof *a * (n->nattr - i));
		}
		n->attr = a;
		n->nattr++;
	}
	n->attr[i].name = ir_strdup(&g->arena, name);
	n->attr[i].type = type;
	return &n->attr[i];
}

const Attr *
ir_attr(const Graph *g, NodeId id, const char *name)
{
	const Node *n = &g->nodes[id];
	for (int i = 0; i < n->nattr; i++)
		if (strcmp(n->attr[i].name, name) == 0)
			return &n->attr[i];
	return NULL;
}

int64_t
ir_attr_int(const Graph *g, NodeId n, const char *name, int64_t dflt)
{
	const Attr *a = ir_attr(g, n, name);
	return a && a->type == ATTR_INT ? a->i : dflt;
}

float
ir_attr_float(const Graph *g, NodeId n, const char *name, float dflt)
{
	const Attr *a = ir_attr(g, n, name);
	return a && a->type == ATTR_FLOAT ? a->f : dflt;
}

const char *
ir_attr_str(const Graph *g, NodeId n, const char *name, const char *dflt)
{
	const Attr *a = ir_attr(g, n, name);
	return a && a->type == ATTR_STRING ? a->s : dflt;
}

/* ------------------------------------------------------------- def-use */

bool
ir_has_phase(const Graph *g, int phase)
{
	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead && g->nodes[n].phase == phase)
			return true;
	return false;
}

bool
ir_is_output(const Graph *g, TensorId t)
{
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == t)
			return true;
	return false;
}

void
ir_replace_uses(Graph *g, TensorId from, TensorId to)
{
	for (NodeId m = 0; m < g->nnodes; m++)
		for (int i = 0; i < g->nodes[m].nin; i++)
			if (g->nodes[m].in[i] == from)
				g->nodes[m].in[i] = to;
}

void
ir_reindex(Graph *g)
{
	free(g->nusers);
	free(g->users);
	g->nusers = calloc(g->ntensors + 1, sizeof *g->nusers);
	g->users = calloc(g->ntensors + 1, sizeof *g->users);
	if (!g->nusers || !g->users)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++)
		g->tensors[t].producer = IR_NONE;
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		for (int i = 0; i < nd->nout; i++)
			if (nd->out[i] != IR_NONE)
				g->tensors[nd->out[i]].producer = n;
		for (int i = 0; i < nd->nin; i++)
			if (nd->in[i] != IR_NONE)
				g->nusers[nd->in[i]]++;
	}
	/* one block for all user lists, carved per tensor */
	int total = 0;
	for (TensorId t = 0; t < g->ntensors; t++)
		total += g->nusers[t];
	NodeId *all = ir_alloc(&g->arena, sizeof *all * (total + 1));
	for (TensorId t = 0; t < g->ntensors; t++) {
		g->users[t] = all;
		all += g->nusers[t];
		g->nusers[t] = 0;
	}
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		for (int i = 0; i < nd->nin; i++) {
			TensorId t = nd->in[i];
			if (t == IR_NONE)
				continue;
			/* a node reading one tensor twice is one user */
			if (g->nusers[t] && g->users[t][g->nusers[t] - 1] == n)
				continue;
			g->users[t][g->nusers[t]++] = n;
		}
	}
}

static void
mark_attr_tensors(Graph *g, bool *live)
{
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		for (int i = 0; i < nd->nattr; i++)
			if (nd->attr[i].type == ATTR_TENSOR)
				live[nd->attr[i].t] = true;
	}
}

void
ir_compact(Graph *g)
{
	g->sched = NULL; /* names ids that change: the emitter makes it again */
	bool *live = calloc(g->ntensors + 1, 1);
	TensorId *tmap = malloc(sizeof *tmap * (g->ntensors + 1));
	NodeId *nmap = malloc(sizeof *nmap * (g->nnodes + 1));
	if (!live || !tmap || !nmap)
		die("out of memory");
	for (int i = 0; i < g->ninputs; i++)
		live[g->inputs[i]] = true;
	for (int i = 0; i < g->noutputs; i++)
		live[g->outputs[i]] = true;
	/* training: the loss and each weight's gradient stay, renumbered */
	if (g->loss != IR_NONE)
		live[g->loss] = true;
	for (int i = 0; i < g->ngrads; i++)
		live[g->grads[i].weight] = live[g->grads[i].grad] = true;
	mark_attr_tensors(g, live);
	for (NodeId n = 0; n < g->nnodes; n++) {
		Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		for (int i = 0; i < nd->nin; i++)
			if (nd->in[i] != IR_NONE)
				live[nd->in[i]] = true;
		for (int i = 0; i < nd->nout; i++)
			if (nd->out[i] != IR_NONE)
				live[nd->out[i]] = true;
	}
	int nt = 0;
	for (TensorId t = 0; t < g->ntensors; t++) {
		tmap[t] = live[t] ? nt : IR_NONE;
		if (live[t])
			g->tensors[nt++] = g->tensors[t];
	}
	g->ntensors = nt;
	int nn = 0;
	for (NodeId n = 0; n < g->nnodes; n++) {
		nmap[n] = g->nodes[n].dead ? IR_NONE : nn;
		if (!g->nodes[n].dead)
			g->nodes[nn++] = g->nodes[n];
	}
	g->nnodes = nn;
	for (NodeId n = 0; n < nn; n++) {
		Node *nd = &g->nodes[n];
		for (int i = 0; i < nd->nin; i++)
			if (nd->in[i] != IR_NONE)
				nd->in[i] = tmap[nd->in[i]];
		for (int i = 0; i < nd->nout; i++)
			if (nd->out[i] != IR_NONE)
				nd->out[i] = tmap[nd->out[i]];
		for (int i = 0; i < nd->nattr; i++)
			if (nd->attr[i].type == ATTR_TENSOR)
				nd->attr[i].t = tmap[nd->attr[i].t];
	}
	for (int i = 0; i < g->ninputs; i++)
		g->inputs[i] = tmap[g->inputs[i]];
	for (int i = 0; i < g->noutputs; i++)
		g->outputs[i] = tmap[g->outputs[i]];
	if (g->loss != IR_NONE)
		g->loss = tmap[g->loss];
	for (int i = 0; i < g->ngrads; i++) {
		g->grads[i].weight = tmap[g->grads[i].weight];
		g->grads[i].grad = tmap[g->grads[i].grad];
	}
	for (int gi = 0; gi < g->ngroups; gi++) {
		GraphNode *gn = &g->groups[gi];
		int k = 0;
		for (int i = 0; i < gn->nnodes; i++)
			if (nmap[gn->nodes[i]] != IR_NONE)
				gn->nodes[k++] = nmap[gn->nodes[i]];
		gn->nnodes = k;
	}
	free(live);
	free(tmap);
	free(nmap);
	ir_reindex(g);
}

void
ir_reorder(Graph *g, const NodeId *order)
{
	g->sched = NULL;
	int n = g->nnodes;
	Node *nodes = malloc(sizeof *nodes * (n + 1));
	NodeId *nmap = malloc(sizeof *nmap * (n + 1));
	if (!nodes || !nmap)
		die("out of memory");
	for (int i = 0; i < n; i++) {
		nodes[i] = g->nodes[order[i]];
		nmap[order[i]] = i;
	}
	memcpy(g->nodes, nodes, sizeof *nodes * n);
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].producer != IR_NONE)
			g->tensors[t].producer = nmap[g->tensors[t].producer];
	for (int gi = 0; gi < g->ngroups; gi++)
		for (int i = 0; i < g->groups[gi].nnodes; i++)
			g->groups[gi].nodes[i] = nmap[g->groups[gi].nodes[i]];
	free(nodes);
	free(nmap);
	ir_reindex(g);
}

/* -------------------------------------------------------------- values */

/* Read a small file-backed tensor's bytes, through the same rules as the
 * loader's (ir/file.c): inside the model's directory, no symbolic link, a
 * regular file that holds the whole range.  NULL if anything is off. */
static void *
read_file_bytes(Graph *g, const Tensor *t)
{
	char why[256];
	int64_t size;
	int fd = ir_file_open(g->dir, g->files[t->file], "weight file", "the model's directory",
	    &size, why, sizeof why);
	if (fd < 0)
		return NULL;
	if (t->offset < 0 || t->offset > size || t->length > size - t->offset) {
		close(fd);
		return NULL;
	}
	void *buf = ir_alloc(&g->arena, (size_t)t->length + 1);
	int64_t got = 0;
	while (got < t->length) {
		ssize_t r = pread(fd, (char *)buf + got, (size_t)(t->length - got), t->offset + got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += r;
	}
	close(fd);
	return got == t->length ? buf : NULL;
}

const void *
ir_weight_bytes(Graph *g, TensorId id)
{
	Tensor *t = &g->tensors[id];
	if (t->data == DATA_INLINE)
		return t->bytes;
	if (t->data == DATA_FILE && t->rank >= 0 && t->length == ir_nbytes(t) &&
	    t->file_dtype == DT_UNDEF) /* not halves converted as they load */
		return read_file_bytes(g, t);
	return NULL;
}

const void *
ir_value(Graph *g, TensorId id)
{
	Tensor *t = &g->tensors[id];
	if (t->value)
		return t->value;
	if (t->rank < 0 || ir_numel(t) > IR_EVAL_MAX_ELEMS)
		return NULL;
	/* shapes need integers and the odd float scalar (Range's start); bigger
	 * floating-point weights are parameters, never read at compile time */
	bool integral = t->dtype != DT_F32 && t->dtype != DT_F64 && t->dtype != DT_F16 &&
	    t->dtype != DT_BF16;
	if (t->data == DATA_INLINE)
		t->value = t->bytes;
	else if (t->data == DATA_FILE && (integral || ir_numel(t) <= 16) &&
	    t->length == ir_nbytes(t) && t->file_dtype == DT_UNDEF)
		t->value = read_file_bytes(g, t);
	return t->value;
}
