/*
 * fold_scopes.c - find shared subgraphs: repeated blocks of GraphNodes
 * (TAP §IV-C, Algorithm 1).
 *
 * Needs: graph-nodes.  Guarantees: Graph.templates lists each repeated
 * block once, with its instances in graph order and, for each, its
 * GraphNodes in template order (position k plays the same role in every
 * instance); GraphNode.tmpl marks the GraphNodes that belong to one.
 *
 * Two blocks are instances of one template when their canonical hash is
 * equal: the hash of their ops in topological order, each with its
 * operator, attributes, output types, and inputs described by role (an op
 * inside the block by its position, a weight or constant by type and
 * value for small constants, anything else from outside by order of first
 * use and type).  Shapes are part of it, so instances of a template can
 * always share its plan.
 *
 * With names (torch exports scope them: "/h.0/attn/c_attn/MatMul"), blocks
 * are the GraphNodes under one scope prefix, tried from the shallowest
 * depth down, so the largest repeated blocks are found first (Algorithm 1
 * walks the depths the other way and keeps going while blocks repeat; it
 * ends at the same largest blocks).  Deeper levels then find repeats
 * outside those.  Without usable names, the GraphNodes' own hashes along
 * the topological order are searched for tandem repeats: a period p that
 * maps the sequence onto itself k >= -min-duplicate times.  Either way,
 * instances need at least two GraphNodes; a repeated single op is not a
 * block worth a template.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct {
	Graph *g;
	int *local;                     /* per node: position in the block being hashed, -1 */
	int *ext;                       /* per tensor: order of first outside use, -1 */
	bool *claimed;                  /* per GraphNode */
	int min_dup;
} Folder;

static uint64_t
mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

static uint64_t
mix_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = mix(h, (unsigned char)*s);
	return mix(h, 0);
}

static uint64_t
mix_type(uint64_t h, const Tensor *t)
{
	h = mix(h, (uint64_t)t->dtype);
	h = mix(h, (uint64_t)t->rank);
	for (int i = 0; i < t->rank; i++)
		h = mix(h, (uint64_t)t->dims[i]);
	return h;
}

static uint64_t
mix_attr(uint64_t h, Graph *g, const Attr *a)
{
	h = mix_str(mix(h, a->type), a->name);
	switch (a->type) {
	case ATTR_INT: return mix(h, (uint64_t)a->i);
	case ATTR_FLOAT: { uint32_t u; memcpy(&u, &a->f, 4); return mix(h, u); }
	case ATTR_STRING: return mix_str(h, a->s);
	case ATTR_TENSOR: return mix_type(h, &g->tensors[a->t]);
	case ATTR_INTS:
		for (int i = 0; i < a->n; i++)
			h = mix(h, (uint64_t)a->is[i]);
		return h;
	case ATTR_FLOATS:
		for (int i = 0; i < a->n; i++) {
			uint32_t u;
			memcpy(&u, &a->fs[i], 4);
			h = mix(h, u);
		}
		return h;
	case ATTR_STRINGS:
		for (int i = 0; i < a->n; i++)
			h = mix_str(h, a->ss[i]);
		return h;
	}
	return h;
}

/* Canonical hash of the ops of GraphNodes gns[0..n) (any order). */
static uint64_t
block_hash(Folder *f, const int *gns, int n)
{
	Graph *g = f->g;
	int nops = 0, nins = 0;
	for (int i = 0; i < n; i++) {
		nops += g->groups[gns[i]].nnodes;
		for (int j = 0; j < g->groups[gns[i]].nnodes; j++)
			nins += g->nodes[g->groups[gns[i]].nodes[j]].nin;
	}
	NodeId *ops = malloc(sizeof *ops * (nops + 1));
	TensorId *seen = malloc(sizeof *seen * (nins + 1)); /* a Sum may read 300 */
	int k = 0, nseen = 0, next_ext = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < g->groups[gns[i]].nnodes; j++)
			ops[k++] = g->groups[gns[i]].nodes[j];
	/* topological order is node order */
	for (int i = 1; i < nops; i++)
		for (int j = i; j > 0 && ops[j - 1] > ops[j]; j--) {
			NodeId t = ops[j];
			ops[j] = ops[j - 1];
			ops[j - 1] = t;
		}
	for (int i = 0; i < nops; i++)
		f->local[ops[i]] = i;
	/* the partition into GraphNodes too, so instances align position by position */
	uint64_t h = mix(0, (uint64_t)nops);
	for (int i = 0; i < n; i++)
		h = mix(h, (uint64_t)g->groups[gns[i]].nnodes);
	for (int i = 0; i < nops; i++) {
		Node *nd = &g->nodes[ops[i]];
		h = mix(mix(mix(h, nd->op), nd->nin), nd->nout);
		for (int a = 0; a < nd->nattr; a++)
			h = mix_attr(h, g, &nd->attr[a]);
		for (int o = 0; o < nd->nout; o++)
			h = nd->out[o] == IR_NONE ? mix(h, 1) : mix_type(h, &g->tensors[nd->out[o]]);
		for (int a = 0; a < nd->nin; a++) {
			TensorId t = nd->in[a];
			if (t == IR_NONE) {
				h = mix(h, 2);
				continue;
			}
			Tensor *tt = &g->tensors[t];
			NodeId p = tt->producer;
			if (p != IR_NONE && f->local[p] >= 0) {
				int slot = 0;
				while (g->nodes[p].out[slot] != t)
					slot++;
				h = mix(mix(mix(h, 3), (uint64_t)f->local[p]), (uint64_t)slot);
			} else if (tt->kind == TK_WEIGHT || tt->kind == TK_CONST) {
				h = mix_type(mix(h, 4 + (tt->kind == TK_CONST)), tt);
				if (tt->kind == TK_CONST && tt->bytes && ir_numel(tt) <= 64)
					for (int64_t b = 0; b < ir_nbytes(tt); b++)
						h = mix(h, ((const uint8_t *)tt->bytes)[b]);
			} else {
				if (f->ext[t] < 0) {
					f->ext[t] = next_ext++;
					seen[nseen++] = t;
				}
				h = mix_type(mix(mix(h, 6), (uint64_t)f->ext[t]), tt);
			}
		}
	}
	for (int i = 0; i < nops; i++)
		f->local[ops[i]] = -1;
	for (int i = 0; i < nseen; i++)
		f->ext[seen[i]] = -1;
	free(ops);
	free(seen);
	return h;
}

/* "/h.12/attn" -> "/h.#/attn": instances' names differ in numbers only */
static const char *
pattern(Graph *g, const char *s, size_t len)
{
	char *p = ir_alloc(&g->arena, len + 1);
	size_t k = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] >= '0' && s[i] <= '9') {
			if (!k || p[k - 1] != '#')
				p[k++] = '#';
		} else {
			p[k++] = s[i];
		}
	}
	p[k] = 0;
	return p;
}

static void
add_template(Folder *f, const char *name, int ngroups, int ninst, const int *inst)
{
	Graph *g = f->g;
	Template *t = ir_alloc(&g->arena, sizeof *t * (g->ntemplates + 1));
	if (g->ntemplates)
		memcpy(t, g->templates, sizeof *t * g->ntemplates);
	g->templates = t;
	Template *nt = &t[g->ntemplates];
	nt->name = name;
	nt->ngroups = ngroups;
	nt->ninstances = ninst;
	nt->inst = ir_alloc(&g->arena, sizeof *nt->inst * ngroups * ninst);
	memcpy(nt->inst, inst, sizeof *nt->inst * ngroups * ninst);
	for (int i = 0; i < ngroups * ninst; i++) {
		g->groups[inst[i]].tmpl = g->ntemplates;
		f->claimed[inst[i]] = true;
	}
	g->ntemplates++;
}

/* ------------------------------------------------------------- names */

typedef struct {
	const char *name;               /* scope prefix */
	size_t len;
	int first;                      /* index of its first GraphNode in `order` */
	int n;                          /* GraphNodes */
	uint64_t hash;                  /* canonical hash (blocks of >= 2 GraphNodes) */
	int next;                       /* next block with an equal hash, -1 */
} Block;

/* Length of the first `depth` components of name's scope ("/a/b/c/Op", 2
 * -> "/a/b"), or 0 if it has fewer. */
static size_t
prefix_len(const char *name, int depth)
{
	const char *p = name;
	if (*p != '/')
		return 0;
	for (int d = 0; d < depth; d++) {
		const char *next = strchr(p + 1, '/');
		if (!next)
			return 0;
		p = next;
	}
	return (size_t)(p - name);
}

/* An open-addressing table of ints keyed by a 64-bit hash, with the key's
 * equality decided by the caller (eq).  Linear time: no sorting anywhere. */
typedef struct {
	int *slot;                      /* -1 empty, else a caller's index */
	size_t mask;
} Table;

static void
table_init(Table *t, int n)
{
	size_t cap = 16;
	while (cap < (size_t)n * 2 + 2)
		cap *= 2;
	t->slot = malloc(sizeof *t->slot * cap);
	for (size_t i = 0; i < cap; i++)
		t->slot[i] = -1;
	t->mask = cap - 1;
}

/* The slot holding an index equal to the key, or the empty one to fill. */
static int *
table_find(Table *t, uint64_t h, bool (*eq)(void *, int), void *key)
{
	for (size_t i = h & t->mask;; i = (i + 1) & t->mask)
		if (t->slot[i] < 0 || eq(key, t->slot[i]))
			return &t->slot[i];
}

typedef struct {
	const Block *blocks;
	const char *name;
	size_t len;
	uint64_t hash;
} Key;

static bool
same_prefix(void *k, int b)
{
	const Key *key = k;
	return key->blocks[b].len == key->len && memcmp(key->blocks[b].name, key->name, key->len) == 0;
}

static bool
same_hash(void *k, int b)
{
	const Key *key = k;
	return key->blocks[b].hash == key->hash;
}

/*
 * Blocks are the unclaimed GraphNodes under one depth-d scope prefix, in
 * graph order; blocks with equal canonical hashes and at least min_dup
 * members form a template, instances in graph order.  Hash tables group by
 * prefix and by hash, so each depth is linear in GraphNodes.
 */
static int
fold_by_names(Folder *f)
{
	Graph *g = f->g;
	int ng = g->ngroups, found = 0, maxdepth = 0;
	for (int k = 0; k < ng; k++)
		for (int d = 1; prefix_len(g->groups[k].name, d); d++)
			maxdepth = d > maxdepth ? d : maxdepth;
	int *order = malloc(sizeof *order * (ng + 1));
	int *blockof = malloc(sizeof *blockof * (ng + 1));
	Block *blocks = malloc(sizeof *blocks * (ng + 1));
	for (int depth = 1; depth <= maxdepth; depth++) {
		Table byname, byhash;
		table_init(&byname, ng);
		table_init(&byhash, ng);
		int nb = 0;
		for (int k = 0; k < ng; k++) {
			blockof[k] = -1;
			size_t len = f->claimed[k] ? 0 : prefix_len(g->groups[k].name, depth);
			if (!len)
				continue;
			Key key = {blocks, g->groups[k].name, len, 0};
			uint64_t h = 1469598103934665603ULL;
			for (size_t i = 0; i < len; i++)
				h = (h ^ (unsigned char)key.name[i]) * 1099511628211ULL;
			int *slot = table_find(&byname, h, same_prefix, &key);
			if (*slot < 0) {
				blocks[nb] = (Block){key.name, len, 0, 0, 0, -1};
				*slot = nb++;
			}
			blockof[k] = *slot;
			blocks[*slot].n++;
		}
		/* lay the blocks' GraphNodes out contiguously, in graph order */
		for (int b = 0, at = 0; b < nb; b++) {
			blocks[b].first = at;
			at += blocks[b].n;
			blocks[b].n = 0;
		}
		for (int k = 0; k < ng; k++)
			if (blockof[k] >= 0) {
				Block *bl = &blocks[blockof[k]];
				order[bl->first + bl->n++] = k;
			}
		/* chain blocks of equal hash; heads in order of first appearance */
		int *heads = malloc(sizeof *heads * (nb + 1)), nh = 0;
		for (int b = 0; b < nb; b++) {
			if (blocks[b].n < 2)
				continue;
			blocks[b].hash = block_hash(f, order + blocks[b].first, blocks[b].n);
			Key key = {blocks, NULL, 0, blocks[b].hash};
			int *slot = table_find(&byhash, blocks[b].hash, same_hash, &key);
			if (*slot < 0) {
				*slot = b;
				heads[nh++] = b;
			} else {
				int t = *slot;
				while (blocks[t].next >= 0)
					t = blocks[t].next;
				blocks[t].next = b;
			}
		}
		for (int i = 0; i < nh; i++) {
			int count = 0;
			for (int b = heads[i]; b >= 0; b = blocks[b].next)
				count++;
			if (count < f->min_dup)
				continue;
			int w = blocks[heads[i]].n, c = 0;
			int *inst = malloc(sizeof *inst * w * count);
			for (int b = heads[i]; b >= 0; b = blocks[b].next)
				memcpy(inst + w * c++, order + blocks[b].first, sizeof *inst * w);
			add_template(f, pattern(g, blocks[heads[i]].name, blocks[heads[i]].len), w,
			    count, inst);
			free(inst);
			found++;
		}
		free(heads);
		free(byname.slot);
		free(byhash.slot);
	}
	free(order);
	free(blockof);
	free(blocks);
	return found;
}

/* --------------------------------------------------------- structure */

static int
by_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/*
 * The best tandem repeat among unclaimed GraphNodes: K >= min_dup copies of
 * a block of w >= 2 GraphNodes every p positions, covering the most.  A run
 * of L positions where h[i] == h[i + p] holds K copies of width
 * min(p, L - (K-2)p): a copy may be narrower than the period when the
 * GraphNode at a block's edge differs in the last copy (the op after the
 * last block joins it).  Candidate periods are distances between equal
 * hashes.
 */
static bool
best_repeat(Folder *f, const uint64_t *h, int n, int *start, int *period, int *copies, int *width)
{
	int best = 0;
	int *cand = malloc(sizeof *cand * (n + 1));
	int ncand = 0;
	for (int i = 0; i < n; i++) {
		if (f->claimed[i])
			continue;
		for (int j = i + 1; j < n && j - i <= n / f->min_dup; j++)
			if (h[j] == h[i]) {
				cand[ncand++] = j - i;
				break;
			}
	}
	qsort(cand, ncand, sizeof *cand, by_int);
	for (int c = 0; c < ncand; c++) {
		int p = cand[c];
		if (p < 2 || (c && cand[c - 1] == p))
			continue;
		for (int i = 0; i + p < n;) {
			if (f->claimed[i] || f->claimed[i + p] || h[i] != h[i + p]) {
				i++;
				continue;
			}
			int j = i;
			while (j + p < n && !f->claimed[j] && !f->claimed[j + p] && h[j] == h[j + p])
				j++;
			int len = j - i;
			for (int k = f->min_dup; (k - 2) * p < len; k++) {
				int w = len - (k - 2) * p;
				w = w > p ? p : w;
				if (w >= 2 && k * w > best) {
					best = k * w;
					*start = i;
					*period = p;
					*copies = k;
					*width = w;
				}
			}
			i = j + 1;
		}
	}
	free(cand);
	return best > 0;
}

static int
fold_by_structure(Folder *f)
{
	Graph *g = f->g;
	int n = g->ngroups, found = 0;
	uint64_t *h = malloc(sizeof *h * (n + 1));
	for (int k = 0; k < n; k++)
		h[k] = block_hash(f, &k, 1);
	int s, p, k, w;
	while (best_repeat(f, h, n, &s, &p, &k, &w)) {
		/* every copy must be the same block, edges included */
		uint64_t want = 0;
		int *inst = malloc(sizeof *inst * w * k);
		int good = 0;
		for (int c = 0; c < k; c++) {
			for (int i = 0; i < w; i++)
				inst[good * w + i] = s + c * p + i;
			uint64_t bh = block_hash(f, inst + good * w, w);
			if (good == 0)
				want = bh;
			if (bh == want)
				good++;
		}
		if (good >= f->min_dup) {
			add_template(f, "", w, good, inst);
			found++;
		} else {
			f->claimed[s] = true; /* not a real repeat: do not try this start again */
		}
		free(inst);
	}
	/* positions marked only to skip a false repeat are free again */
	for (int i = 0; i < n; i++)
		f->claimed[i] = g->groups[i].tmpl != IR_NONE;
	free(h);
	return found;
}

static int
by_first(const void *a, const void *b)
{
	return ((const Template *)a)->inst[0] - ((const Template *)b)->inst[0];
}

bool
pass_fold_scopes(Graph *g, PassCtx *cx)
{
	if (!g->ngroups && g->nnodes) { /* no ops at all (all folded) is fine */
		diag_file(g->model, "fold-scopes needs GraphNodes: run graph-nodes before it");
		return false;
	}
	Folder f = {.g = g, .min_dup = cx->min_duplicate > 1 ? cx->min_duplicate : 2};
	f.local = malloc(sizeof *f.local * (g->nnodes + 1));
	f.ext = malloc(sizeof *f.ext * (g->ntensors + 1));
	f.claimed = calloc(g->ngroups + 1, 1);
	for (int i = 0; i < g->nnodes; i++)
		f.local[i] = -1;
	for (int i = 0; i < g->ntensors; i++)
		f.ext[i] = -1;
	g->ntemplates = 0;
	for (int k = 0; k < g->ngroups; k++)
		g->groups[k].tmpl = IR_NONE;
	/* names are a hint: when they find nothing, look at the structure */
	if (!fold_by_names(&f))
		fold_by_structure(&f);
	/* templates in graph order (of their first GraphNode), for readers */
	if (g->ntemplates > 1)
		qsort(g->templates, g->ntemplates, sizeof *g->templates, by_first);
	for (int t = 0; t < g->ntemplates; t++)
		for (int i = 0; i < g->templates[t].ngroups * g->templates[t].ninstances; i++)
			g->groups[g->templates[t].inst[i]].tmpl = t;
	free(f.local);
	free(f.ext);
	free(f.claimed);
	return true;
}
