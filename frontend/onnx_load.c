/*
 * onnx_load.c - ONNX ModelProto -> IR graph, with the checker's rules.
 *
 * Models come from strangers: the file size is capped, the wire format is
 * pre-scanned (wirescan.c) before protobuf-c unpacks anything, and every
 * rule of the ONNX checker that tapc relies on is re-checked here: an opset
 * import, SSA value names, topological order, defined inputs, consistent
 * dtype and data fields, raw_data length, non-negative dims without int64
 * overflow, external data confined to the model's directory.  Each problem
 * is one diag line naming the file, the node and the tensor.
 *
 * Weights stay in the file: the IR records (file, offset, length) from the
 * wire scan.  Only varint-encoded or attribute tensors are copied inline.
 *
 * Needs: protobuf-c and the onnx.pb-c.h generated from onnx.proto.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/onnx.h"
#include "onnx/onnx.pb-c.h"


/* ------------------------------------------------------- name -> tensor */

typedef struct {
	const char **keys;
	TensorId *vals;
	size_t cap;                     /* power of two */
	size_t n;
} NameMap;

static uint64_t
hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void map_put(NameMap *m, const char *k, TensorId v);

static void
map_grow(NameMap *m)
{
	NameMap old = *m;
	m->cap = old.cap ? old.cap * 2 : 256;
	m->n = 0;
	m->keys = calloc(m->cap, sizeof *m->keys);
	m->vals = calloc(m->cap, sizeof *m->vals);
	if (!m->keys || !m->vals)
		die("out of memory");
	for (size_t i = 0; i < old.cap; i++)
		if (old.keys[i])
			map_put(m, old.keys[i], old.vals[i]);
	free(old.keys);
	free(old.vals);
}

static TensorId *
map_slot(NameMap *m, const char *k)
{
	if (!m->cap)
		return NULL;
	for (size_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->keys[i])
			return NULL;
		if (strcmp(m->keys[i], k) == 0)
			return &m->vals[i];
	}
}

static void
map_put(NameMap *m, const char *k, TensorId v)
{
	if (2 * (m->n + 1) > m->cap)
		map_grow(m);
	size_t i = hash_str(k) & (m->cap - 1);
	while (m->keys[i] && strcmp(m->keys[i], k) != 0)
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = k;
	m->vals[i] = v;
}

static void
map_free(NameMap *m)
{
	free(m->keys);
	free(m->vals);
}

/* ---------------------------------------------------------------- loader */

typedef struct {
	Graph *g;
	const char *path;               /* for diagnostics */
	const char *dir;                /* external data root, NULL to forbid */
	const OnnxOptions *opt;
	const WireInfo *wi;
	NameMap names;                  /* value name -> tensor */
	bool static_batch;              /* no input's dim 0 is symbolic: the export batch is baked */
	int region, branch;             /* the If branch being loaded, or IR_NONE */
	int last_region;                /* the region load_branches just made */
	const char **scoped;            /* names a branch defined, undone when it ends */
	int nscoped, capscoped;
	NameMap later;                  /* node output name -> defining node index */
} Loader;

static bool
dtype_ok(Loader *L, int dt, const char *what, const char *name)
{
	if (dt <= DT_UNDEF || dt >= DT_COUNT) {
		diag_file(L->path, "%s '%s': unknown data type %d", what, name, dt);
		return false;
	}
	if (!ir_dtype_supported((DType)dt)) {
		diag_file(L->path, "%s '%s': data type %s is not supported", what, name,
		    ir_dtype_name((DType)dt));
		return false;
	}
	return true;
}

/* dims must be non-negative and their byte count must fit in int64 */
static bool
dims_ok(Loader *L, const char *what, const char *name, size_t n, const int64_t *dims, DType dt)
{
	if (n > IR_MAX_RANK) {
		diag_file(L->path, "%s '%s': rank %zu is over tapc's limit of %d", what, name,
		    n, IR_MAX_RANK);
		return false;
	}
	int64_t count = 1;
	int64_t size = ir_dtype_size(dt);
	for (size_t i = 0; i < n; i++) {
		if (dims[i] < 0) {
			diag_file(L->path, "%s '%s': dimension %zu is %lld, expected >= 0", what,
			    name, i, (long long)dims[i]);
			return false;
		}
		if (dims[i] && count > INT64_MAX / dims[i]) {
			diag_file(L->path, "%s '%s': element count overflows int64", what, name);
			return false;
		}
		count *= dims[i];
	}
	if (size && count > INT64_MAX / size) {
		diag_file(L->path, "%s '%s': byte size overflows int64", what, name);
		return false;
	}
	if (ir_shape_bytes(dt, (int)n, dims) < 0) {
		diag_file(L->path, "%s '%s': byte size is over tapc's limit of 2^%d bytes", what, name,
		    IR_MAX_BYTES_LOG2);
		return false;
	}
	return true;
}

/* Which typed field holds values of each dtype (ONNX's TensorProto rules). */
typedef enum { F_NONE, F_FLOAT, F_INT32, F_INT64, F_DOUBLE, F_UINT64 } Field;

static const char *field_names[] = {"none", "float_data", "int32_data", "int64_data",
	"double_data", "uint64_data"};

static Field
field_for(DType dt)
{
	switch (dt) {
	case DT_F32: return F_FLOAT;
	case DT_I32: case DT_I16: case DT_I8: case DT_U16: case DT_U8: case DT_BOOL:
	case DT_F16: case DT_BF16:
		return F_INT32;
	case DT_I64: return F_INT64;
	case DT_F64: return F_DOUBLE;
	case DT_U32: case DT_U64: return F_UINT64;
	default: return F_NONE;
	}
}

static bool
parse_count(const char *s, int64_t *v)
{
	char *end;
	for (const char *c = s; *c; c++) /* digits only: strtoll would skip " " and take "+" */
		if (*c < '0' || *c > '9')
			return false;
	if (!*s)
		return false;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*v = x;
	return true;
}

static bool
load_external(Loader *L, Onnx__TensorProto *tp, Tensor *t, const char *what, const char *name)
{
	const char *loc = NULL;
	int64_t off = 0, len = -1;
	for (size_t i = 0; i < tp->n_external_data; i++) {
		const char *k = tp->external_data[i]->key ? tp->external_data[i]->key : "";
		const char *v = tp->external_data[i]->value ? tp->external_data[i]->value : "";
		if (strcmp(k, "location") == 0)
			loc = v;
		else if ((strcmp(k, "offset") == 0 && !parse_count(v, &off)) ||
		    (strcmp(k, "length") == 0 && !parse_count(v, &len))) {
			diag_file(L->path, "%s '%s': external data %s '%s' is not a byte count", what,
			    name, k, v);
			return false;
		}
	}
	if (!L->dir) {
		diag_file(L->path, "%s '%s': external data is not allowed here", what, name);
		return false;
	}
	if (!loc || !*loc) {
		diag_file(L->path, "%s '%s': external data has no location", what, name);
		return false;
	}
	if (strchr(loc, '\\')) { /* a Windows path: "..\\x" is no file name we want */
		diag_file(L->path, "%s '%s': external data location '%s' leaves the model's directory",
		    what, name, loc);
		return false;
	}
	char why[PATH_MAX + 128];
	int64_t size;
	int fd = ir_file_open(L->dir, loc, "external data location", "the model's directory",
	    &size, why, sizeof why);
	if (fd < 0) {
		diag_file(L->path, "%s '%s': %s", what, name, why);
		return false;
	}
	close(fd);
	struct stat st = {.st_size = size};
	int64_t want = ir_nbytes(t);
	if (len < 0)
		len = want;
	if (off > st.st_size || len > st.st_size - off) {
		diag_file(L->path, "%s '%s': external data offset %lld + length %lld is beyond the end of '%s' (%lld bytes)",
		    what, name, (long long)off, (long long)len, loc, (long long)st.st_size);
		return false;
	}
	if (len != want) {
		char ty[IR_TYPESTR];
		diag_file(L->path, "%s '%s': external data length is %lld bytes, expected %lld for %s",
		    what, name, (long long)len, (long long)want, ir_typestr(t, ty));
		return false;
	}
	t->data = DATA_FILE;
	t->file = ir_add_file(L->g, loc);
	t->offset = off;
	t->length = len;
	return true;
}

/* Copy typed-field values into dtype-sized little-endian elements. */
static void *
decode_typed(Loader *L, Onnx__TensorProto *tp, Field f, DType dt, int64_t n)
{
	int size = ir_dtype_size(dt);
	unsigned char *out = ir_alloc(&L->g->arena, (size_t)(n * size) + 1);
	for (int64_t i = 0; i < n; i++) {
		uint64_t v = 0;
		switch (f) {
		case F_FLOAT: memcpy(out + i * 4, &tp->float_data[i], 4); continue;
		case F_DOUBLE: memcpy(out + i * 8, &tp->double_data[i], 8); continue;
		case F_INT32: v = (uint64_t)(int64_t)tp->int32_data[i]; break;
		case F_INT64: v = (uint64_t)tp->int64_data[i]; break;
		case F_UINT64: v = tp->uint64_data[i]; break;
		default: unreachable();
		}
		memcpy(out + i * size, &v, size); /* little-endian truncation */
	}
	return out;
}

/*
 * Validate a TensorProto and attach its data to t (whose dtype and shape
 * this sets).  wt is the wire scan's record for main-graph initializers,
 * NULL for attribute tensors, which are always copied inline.
 */
static bool
load_tensor(Loader *L, Onnx__TensorProto *tp, const WireTensor *wt, TensorId id,
    const char *what, const char *name)
{
	Graph *g = L->g;
	if (!tp->has_data_type) {
		diag_file(L->path, "%s '%s': no data type", what, name);
		return false;
	}
	if (!dtype_ok(L, tp->data_type, what, name) ||
	    !dims_ok(L, what, name, tp->n_dims, tp->dims, (DType)tp->data_type))
		return false;
	if (tp->segment) {
		diag_file(L->path, "%s '%s': segmented tensors are not supported", what, name);
		return false;
	}
	Tensor *t = ir_tensor(g, id);
	t->dtype = (DType)tp->data_type;
	ir_set_shape(t, (int)tp->n_dims, tp->dims);
	int64_t n = ir_numel(t), nbytes = ir_nbytes(t);

	size_t counts[] = {0, tp->n_float_data, tp->n_int32_data, tp->n_int64_data,
		tp->n_double_data, tp->n_uint64_data};
	Field want = field_for(t->dtype);
	int sources = tp->has_raw_data + (tp->n_string_data > 0);
	for (int f = F_FLOAT; f <= F_UINT64; f++) {
		if (!counts[f])
			continue;
		sources++;
		if (f != (int)want) {
			diag_file(L->path, "%s '%s': data type %s but the values are in %s", what, name,
			    ir_dtype_name(t->dtype), field_names[f]);
			return false;
		}
	}
	if (tp->n_string_data) {
		diag_file(L->path, "%s '%s': data type %s but the values are in string_data", what,
		    name, ir_dtype_name(t->dtype));
		return false;
	}
	bool external = tp->has_data_location &&
	    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	if (external) {
		if (sources) {
			diag_file(L->path, "%s '%s': external data and values in the model at once", what, name);
			return false;
		}
		return load_external(L, tp, t, what, name);
	}
	if (tp->n_external_data) {
		diag_file(L->path, "%s '%s': external_data given but data_location is not EXTERNAL", what, name);
		return false;
	}
	if (sources > 1) {
		diag_file(L->path, "%s '%s': values in more than one data field", what, name);
		return false;
	}
	if (tp->has_raw_data) {
		if ((int64_t)tp->raw_data.len != nbytes) {
			char ty[IR_TYPESTR];
			diag_file(L->path, "%s '%s': raw_data is %zu bytes, expected %lld for %s", what,
			    name, tp->raw_data.len, (long long)nbytes, ir_typestr(t, ty));
			return false;
		}
		if (wt && wt->raw_len == nbytes) {
			t->data = DATA_FILE;
			t->file = 0;
			t->offset = wt->raw_off;
			t->length = nbytes;
		} else {
			t->data = DATA_INLINE;
			t->bytes = ir_alloc(&g->arena, (size_t)nbytes + 1);
			memcpy(t->bytes, tp->raw_data.data, (size_t)nbytes);
			t->length = nbytes;
		}
		return true;
	}
	if (sources == 0) {
		if (n != 0) {
			char ty[IR_TYPESTR];
			diag_file(L->path, "%s '%s': no values for %s", what, name, ir_typestr(t, ty));
			return false;
		}
		t->data = DATA_INLINE;
		t->bytes = ir_alloc(&g->arena, 1);
		return true;
	}
	if ((int64_t)counts[want] != n) {
		char ty[IR_TYPESTR];
		diag_file(L->path, "%s '%s': %s holds %zu values, expected %lld for %s", what, name,
		    field_names[want], counts[want], (long long)n, ir_typestr(t, ty));
		return false;
	}
	/* packed float/double payloads are the raw little-endian bytes already */
	if (wt && wt->npacked == 1 && wt->packed_len == nbytes &&
	    (want == F_FLOAT || want == F_DOUBLE)) {
		t->data = DATA_FILE;
		t->file = 0;
		t->offset = wt->packed_off;
		t->length = nbytes;
		return true;
	}
	t->data = DATA_INLINE;
	t->bytes = decode_typed(L, tp, want, t->dtype, n);
	t->length = nbytes;
	return true;
}

/* A graph input's declared shape: each dim a value or a symbol (dim_param,
 * "" when unnamed), resolved by resolve_shapes once every input is read. */
typedef struct {
	int rank;
	int64_t dims[IR_MAX_RANK];
	const char *param[IR_MAX_RANK]; /* NULL: a static dim */
} InputDims;

/* A graph input's type: a tensor with a shape whose dims are values or
 * symbols; the symbols get values in resolve_shapes. */
static bool
load_input_type(Loader *L, Onnx__ValueInfoProto *vi, TensorId id, InputDims *in)
{
	const char *name = vi->name;
	Onnx__TypeProto *ty = vi->type;
	if (!ty || ty->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !ty->tensor_type) {
		diag_file(L->path, "input '%s': type is not a tensor", name);
		return false;
	}
	Onnx__TypeProto__Tensor *tt = ty->tensor_type;
	if (!tt->has_elem_type || !dtype_ok(L, tt->elem_type, "input", name))
		return tt->has_elem_type ? false : (diag_file(L->path, "input '%s': no element type", name), false);
	if (!tt->shape) {
		diag_file(L->path, "input '%s': no shape (tapc needs static shapes)", name);
		return false;
	}
	Onnx__TensorShapeProto *sh = tt->shape;
	if (sh->n_dim > IR_MAX_RANK) {
		diag_file(L->path, "input '%s': rank %zu is over tapc's limit of %d", name, sh->n_dim,
		    IR_MAX_RANK);
		return false;
	}
	in->rank = (int)sh->n_dim;
	for (size_t i = 0; i < sh->n_dim; i++) {
		Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
		in->param[i] = NULL;
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
			in->dims[i] = d->dim_value;
			continue;
		}
		in->param[i] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
		    d->dim_param ? d->dim_param : "";
		in->dims[i] = 1;
	}
	Tensor *t = ir_tensor(L->g, id);
	t->dtype = (DType)tt->elem_type;
	return dims_ok(L, "input", name, sh->n_dim, in->dims, t->dtype);
}

/* The value a -dim or -input-shape pin gave a symbol, and which pin. */
typedef struct {
	const char *name;
	int64_t value;
	const char *by;                 /* "-dim" or the input whose shape was pinned */
} Binding;

static Binding *
binding(Binding *b, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(b[i].name, name) == 0)
			return &b[i];
	return NULL;
}

static bool
bind(Loader *L, Binding *b, int *n, const char *name, int64_t value, const char *by)
{
	Binding *old = binding(b, *n, name);
	if (old && old->value != value) {
		diag_file(L->path, "dimension '%s' is %lld by %s but %lld by %s", name,
		    (long long)old->value, old->by, (long long)value, by);
		return false;
	}
	if (!old)
		b[(*n)++] = (Binding){name, value, by};
	return true;
}

/*
 * Every input's shape, from what the model declares and what the user
 * pinned (-input-shape NAME=AxB, -dim NAME=N, -batch=N): a static dim must
 * agree with its pin; a symbol takes its input's pin, else its -dim value;
 * an unbound symbol in dim 0 is the batch (-batch, else 1; its name kept in
 * sym0); without any symbolic dim 0, -batch sets every input's dim 0; any
 * other unbound symbol is one error listing them all.
 */
static bool
resolve_shapes(Loader *L, InputDims *in)
{
	Graph *g = L->g;
	const OnnxOptions *o = L->opt;
	int cap = o->ndims + g->ninputs * IR_MAX_RANK + 1, nb = 0;
	Binding *b = calloc(cap, sizeof *b);
	char *by = calloc(g->ninputs + 1, 300);
	if (!b || !by)
		die("out of memory");
	bool ok = true;
	/* -input-shape: the named input's dims, and the values of its symbols */
	for (int k = 0; ok && k < o->nshapes; k++) {
		const OnnxShape *p = &o->shapes[k];
		int i = 0;
		while (i < g->ninputs && strcmp(g->tensors[g->inputs[i]].name, p->input) != 0)
			i++;
		if (i == g->ninputs) {
			char names[600] = "";
			for (int j = 0; j < g->ninputs && strlen(names) < 500; j++)
				snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'",
				    j ? ", " : "", g->tensors[g->inputs[j]].name);
			diag_file(L->path, "-input-shape %s: the model has no input '%s' (its inputs: %s)",
			    p->input, p->input, names);
			ok = false;
			break;
		}
		if (p->rank != in[i].rank) {
			diag_file(L->path, "-input-shape %s: %d dims given, but input '%s' has rank %d",
			    p->input, p->rank, p->input, in[i].rank);
			ok = false;
			break;
		}
		char *who = by + 300 * i;
		snprintf(who, 300, "-input-shape %s", p->input);
		for (int d = 0; ok && d < p->rank; d++) {
			if (!in[i].param[d] && in[i].dims[d] != p->dims[d]) {
				diag_file(L->path, "-input-shape %s: dim %d is %lld, but the model fixes it at %lld",
				    p->input, d, (long long)p->dims[d], (long long)in[i].dims[d]);
				ok = false;
			} else if (in[i].param[d] && *in[i].param[d]) {
				ok = bind(L, b, &nb, in[i].param[d], p->dims[d], who);
			}
		}
	}
	/* -dim: a symbol some input has */
	for (int k = 0; ok && k < o->ndims; k++) {
		bool found = false;
		for (int i = 0; i < g->ninputs && !found; i++)
			for (int d = 0; d < in[i].rank && !found; d++)
				found = in[i].param[d] && strcmp(in[i].param[d], o->dims[k].name) == 0;
		if (!found) {
			char names[600] = "";
			for (int i = 0; i < g->ninputs; i++)
				for (int d = 0; d < in[i].rank; d++)
					if (in[i].param[d] && *in[i].param[d] && !strstr(names, in[i].param[d]) &&
					    strlen(names) + strlen(in[i].param[d]) < 500)
						snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'",
						    *names ? ", " : "", in[i].param[d]);
			diag_file(L->path, "-dim %s=%lld: no input has a dimension named '%s' (%s%s)",
			    o->dims[k].name, (long long)o->dims[k].value, o->dims[k].name,
			    *names ? "the model's symbolic dimensions: " : "the model has no named symbolic dimension",
			    names);
			ok = false;
			break;
		}
		ok = bind(L, b, &nb, o->dims[k].name, o->dims[k].value, "-dim");
	}
	/* every dim gets its value; unbound symbols outside dim 0 are collected */
	bool any0 = false;
	for (int i = 0; i < g->ninputs; i++)
		any0 |= in[i].rank > 0 && in[i].param[0];
	char unbound[1024] = "";
	int nunbound = 0;
	for (int i = 0; ok && i < g->ninputs; i++) {
		Tensor *t = ir_tensor(g, g->inputs[i]);
		bool pinned = false;
		for (int k = 0; k < o->nshapes; k++)
			pinned |= strcmp(o->shapes[k].input, t->name) == 0;
		for (int d = 0; d < in[i].rank; d++) {
			const char *p = in[i].param[d];
			if (!p)
				continue; /* a static batch stays: onnx_load_buffer re-specializes */
			const Binding *v = *p ? binding(b, nb, p) : NULL;
			if (pinned) {
				for (int k = 0; k < o->nshapes; k++)
					if (strcmp(o->shapes[k].input, t->name) == 0)
						in[i].dims[d] = o->shapes[k].dims[d];
			} else if (v) {
				in[i].dims[d] = v->value;
			} else if (d == 0) {
				in[i].dims[d] = o->batch > 0 ? o->batch : 1;
				t->sym0 = ir_strdup(&g->arena, *p ? p : "?");
				continue;
			} else {
				char item[300];
				snprintf(item, sizeof item, "%s'%s' (input '%s' dim %d)", nunbound ? ", " : "",
				    *p ? p : "?", t->name, d);
				if (strlen(unbound) + strlen(item) < sizeof unbound - 8)
					strcat(unbound, item);
				else if (!strstr(unbound, ", ..."))
					strcat(unbound, ", ...");
				nunbound++;
				continue;
			}
			if (d == 0 && o->batch > 0 && in[i].dims[d] != o->batch) {
				diag_file(L->path, "-batch=%lld, but %s gives input '%s' dim 0 the value %lld",
				    (long long)o->batch, pinned ? "-input-shape" : "-dim", t->name,
				    (long long)in[i].dims[d]);
				ok = false;
			}
		}
	}
	L->static_batch = !any0;
	if (ok && nunbound) {
		diag_file(L->path, "symbolic dimension%s without a value: %s; give each one with -dim NAME=N "
		    "or the input's shape with -input-shape INPUT=AxBxC", nunbound > 1 ? "s" : "", unbound);
		ok = false;
	}
	for (int i = 0; ok && i < g->ninputs; i++) {
		Tensor *t = ir_tensor(g, g->inputs[i]);
		if (!(ok = dims_ok(L, "input", t->name, in[i].rank, in[i].dims, t->dtype)))
			break;
		ir_set_shape(t, in[i].rank, in[i].dims);
	}
	free(by);
	free(b);
	return ok;
}

/* The tensor a name stands for here, or IR_NONE (a branch's names are gone
 * once the branch ends: their slots hold IR_NONE). */
static TensorId
lookup(Loader *L, const char *name)
{
	TensorId *t = map_slot(&L->names, name);
	return t ? *t : IR_NONE;
}

static void
scope_add(Loader *L, const char *name)
{
	if (L->region == IR_NONE)
		return;
	if (L->nscoped == L->capscoped) {
		L->capscoped = L->capscoped ? 2 * L->capscoped : 64;
		if (!(L->scoped = realloc(L->scoped, sizeof *L->scoped * L->capscoped)))
			die("out of memory");
	}
	L->scoped[L->nscoped++] = name;
}

static bool
define(Loader *L, const char *name, TensorId id, const char *by)
{
	if (lookup(L, name) != IR_NONE) {
		diag_file(L->path, "%s: value '%s' is defined more than once", by, name);
		return false;
	}
	map_put(&L->names, name, id);
	scope_add(L, name);
	return true;
}

static char *
bytes_str(Loader *L, ProtobufCBinaryData b, bool *ok)
{
	*ok = !b.len || memchr(b.data, 0, b.len) == NULL; /* data may be NULL when empty */
	char *s = ir_alloc(&L->g->arena, b.len + 1);
	if (b.len)
		memcpy(s, b.data, b.len);
	return s;
}

static bool
load_attr(Loader *L, NodeId nid, Onnx__AttributeProto *a)
{
	Graph *g = L->g;
	const char *an = a->name ? a->name : "";
	if (!*an) {
		diag_node(g, nid, "an attribute has no name");
		return false;
	}
	for (const char *c = an; *c; c++)
		if (!(('a' <= *c && *c <= 'z') || ('A' <= *c && *c <= 'Z') ||
		    ('0' <= *c && *c <= '9') || *c == '_' || *c == '.' || *c == '-')) {
			diag_node(g, nid, "attribute name '%s' is not an identifier", an);
			return false;
		}
	if (ir_attr(g, nid, an)) {
		diag_node(g, nid, "attribute '%s' is given twice", an);
		return false;
	}
	if (a->ref_attr_name && *a->ref_attr_name) {
		diag_node(g, nid, "attribute '%s' refers to a function attribute; functions are not supported", an);
		return false;
	}
	int type = a->has_type ? (int)a->type : 0;
	if (!type) { /* IR version 1 models leave the type out: infer it */
		type = a->t ? 4 : a->g ? 5 : a->n_floats ? 6 : a->n_ints ? 7 : a->n_strings ? 8 :
		    a->has_f ? 1 : a->has_i ? 2 : a->has_s ? 3 : 0;
	}
	Attr *at;
	bool ok = true;
	switch (type) {
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
		ir_set_attr(g, nid, an, ATTR_FLOAT)->f = a->f;
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
		ir_set_attr(g, nid, an, ATTR_INT)->i = a->i;
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
		char *s = bytes_str(L, a->s, &ok);
		if (!ok) {
			diag_node(g, nid, "attribute '%s' holds a NUL byte", an);
			return false;
		}
		ir_set_attr(g, nid, an, ATTR_STRING)->s = s;
		return true;
	}
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
		if (!a->t) {
			diag_node(g, nid, "attribute '%s' has type TENSOR but no tensor", an);
			return false;
		}
		char what[600];
		snprintf(what, sizeof what, "node '%s' (%s): attribute", g->nodes[nid].name,
		    ir_op_name(g->nodes[nid].op));
		TensorId t = ir_add_tensor(g, "", TK_CONST, DT_UNDEF);
		if (!load_tensor(L, a->t, NULL, t, what, an))
			return false;
		/* a Constant whose value is in a file becomes a weight (load_node);
		 * other attribute tensors are a few elements, always inline */
		if (g->tensors[t].data == DATA_FILE &&
		    (g->nodes[nid].op != OP_Constant || strcmp(an, "value") != 0)) {
			diag_node(g, nid, "attribute '%s': external data is only supported for a Constant's value", an);
			return false;
		}
		ir_set_attr(g, nid, an, ATTR_TENSOR)->t = t;
		return true;
	}
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
		at = ir_set_attr(g, nid, an, ATTR_FLOATS);
		at->n = (int)a->n_floats;
		at->fs = ir_alloc(&g->arena, sizeof(float) * (a->n_floats + 1));
		if (a->n_floats)
			memcpy(at->fs, a->floats, sizeof(float) * a->n_floats);
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
		at = ir_set_attr(g, nid, an, ATTR_INTS);
		at->n = (int)a->n_ints;
		at->is = ir_alloc(&g->arena, sizeof(int64_t) * (a->n_ints + 1));
		if (a->n_ints)
			memcpy(at->is, a->ints, sizeof(int64_t) * a->n_ints);
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
		const char **ss = ir_alloc(&g->arena, sizeof *ss * (a->n_strings + 1));
		for (size_t i = 0; i < a->n_strings && ok; i++)
			ss[i] = bytes_str(L, a->strings[i], &ok);
		if (!ok) {
			diag_node(g, nid, "attribute '%s' holds a NUL byte", an);
			return false;
		}
		at = ir_set_attr(g, nid, an, ATTR_STRINGS);
		at->n = (int)a->n_strings;
		at->ss = ss;
		return true;
	}
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
		/* an If's branches are its nodes already (load_branches) */
		if (g->nodes[nid].op == OP_If && (strcmp(an, "then_branch") == 0 ||
		    strcmp(an, "else_branch") == 0) && type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)
			return true;
		diag_node(g, nid, "attribute '%s' holds a subgraph; control flow other than If is not supported", an);
		return false;
	default:
		diag_node(g, nid, "attribute '%s' has unsupported type %d", an, type);
		return false;
	}
}

static bool load_node(Loader *L, Onnx__NodeProto *np, int index);

/* One If branch: its initializers and nodes, marked with region and branch,
 * its names visible only inside it; *outs gets its outputs' tensors. */
static bool
load_branch(Loader *L, Onnx__GraphProto *gp, const char *nname, const char *which, int region,
    int branch, TensorId *outs, size_t nout)
{
	Graph *g = L->g;
	if (gp->n_input) {
		diag_file(L->path, "node '%s' (If): the %s branch has inputs; an If's branches take none",
		    nname, which);
		return false;
	}
	if (gp->n_sparse_initializer) {
		diag_file(L->path, "node '%s' (If): sparse initializers are not supported", nname);
		return false;
	}
	if (gp->n_output != nout) {
		diag_file(L->path, "node '%s' (If): the %s branch has %zu outputs, the If %zu", nname,
		    which, gp->n_output, nout);
		return false;
	}
	int saved_region = L->region, saved_branch = L->branch, mark = L->nscoped;
	L->region = region;
	L->branch = branch;
	bool ok = true;
	for (size_t i = 0; ok && i < gp->n_initializer; i++) {
		Onnx__TensorProto *tp = gp->initializer[i];
		const char *name = tp->name ? tp->name : "";
		TensorId id = ir_add_tensor(g, name, TK_WEIGHT, DT_UNDEF);
		ok = *name && define(L, g->tensors[id].name, id, "initializers") &&
		    load_tensor(L, tp, NULL, id, "initializer", name);
		if (!*name)
			diag_file(L->path, "node '%s' (If): an initializer of the %s branch has no name", nname, which);
	}
	for (size_t i = 0; ok && i < gp->n_node; i++)
		ok = load_node(L, gp->node[i], -1);
	for (size_t i = 0; ok && i < nout; i++) {
		const char *vn = gp->output[i]->name ? gp->output[i]->name : "";
		if ((outs[i] = lookup(L, vn)) == IR_NONE) {
			diag_file(L->path, "node '%s' (If): output '%s' of the %s branch is not defined", nname,
			    vn, which);
			ok = false;
		}
	}
	/* the branch's names end with it (the other branch may reuse them) */
	for (int i = L->nscoped - 1; i >= mark; i--)
		map_put(&L->names, L->scoped[i], IR_NONE);
	L->nscoped = mark;
	L->region = saved_region;
	L->branch = saved_branch;
	return ok;
}

/* The branches of If node np, loaded before it; returns its inputs: the
 * condition, the then branch's outputs, the else branch's. */
static TensorId *
load_branches(Loader *L, Onnx__NodeProto *np, const char *nname, const TensorId *in, bool *ok)
{
	Onnx__GraphProto *br[2] = {NULL, NULL};
	for (size_t i = 0; i < np->n_attribute; i++) {
		Onnx__AttributeProto *a = np->attribute[i];
		const char *an = a->name ? a->name : "";
		int k = strcmp(an, "then_branch") == 0 ? 0 : strcmp(an, "else_branch") == 0 ? 1 : -1;
		if (k >= 0 && a->g)
			br[k] = a->g;
	}
	if (np->n_input != 1 || in[0] == IR_NONE || !br[0] || !br[1]) {
		diag_file(L->path, "node '%s' (If): expected one input (the condition) and two branches, "
		    "then_branch and else_branch", nname);
		*ok = false;
		return NULL;
	}
	size_t nout = np->n_output;
	TensorId *all = malloc(sizeof *all * (1 + 2 * nout + 1));
	if (!all)
		die("out of memory");
	all[0] = in[0];
	int region = L->g->nregions++;
	*ok = load_branch(L, br[0], nname, "then", region, 0, all + 1, nout) &&
	    load_branch(L, br[1], nname, "else", region, 1, all + 1 + nout, nout);
	L->last_region = region;
	if (!*ok) {
		free(all);
		return NULL;
	}
	return all;
}

static bool
load_node(Loader *L, Onnx__NodeProto *np, int index)
{
	Graph *g = L->g;
	char label[32];
	const char *nname = np->name && *np->name ? np->name : index < 0 ? "(in a branch)" :
	    (snprintf(label, sizeof label, "#%d", index), label);
	const char *optype = np->op_type ? np->op_type : "";
	const char *domain = np->domain ? np->domain : "";
	Op op;
	if (*domain && strcmp(domain, "ai.onnx") != 0) {
		diag_file(L->path, "node '%s' (%s): operator domain '%s' is not supported", nname,
		    optype, domain);
		return false;
	}
	if (ir_op_lookup(optype, &op) && ir_op_kind(op) == OPK_TRAIN) {
		diag_file(L->path, "node '%s' (%s): '%s' is one of tapc's training ops, which only its passes make; a model cannot use it",
		    nname, optype, optype);
		return false;
	}
	if (ir_op_lookup(optype, &op) && ir_op_is_comm(op)) {
		diag_file(L->path, "node '%s' (%s): '%s' is tapc's own collective, which only tp-rewrite makes; a model cannot use it",
		    nname, optype, optype);
		return false;
	}
	if (ir_op_lookup(optype, &op) && ir_op_kind(op) == OPK_FUSED) {
		diag_file(L->path, "node '%s' (%s): '%s' is tapc's own fused kernel, which only the fusion passes make; a model cannot use it",
		    nname, optype, optype);
		return false;
	}
	if (!ir_op_lookup(optype, &op)) {
		diag_file(L->path, "node '%s' (%s): unsupported operator '%s' (docs/ops.md lists the supported ones)",
		    nname, optype, optype);
		return false;
	}
	if (np->n_input > 4096 || np->n_output > 4096) {
		diag_file(L->path, "node '%s' (%s): too many inputs or outputs", nname, optype);
		return false;
	}
	TensorId *in = malloc(sizeof *in * (np->n_input + 1));
	TensorId *out = malloc(sizeof *out * (np->n_output + 1));
	if (!in || !out)
		die("out of memory");
	bool ok = true;
	for (size_t i = 0; i < np->n_input && ok; i++) {
		const char *vn = np->input[i] ? np->input[i] : "";
		if (!*vn) {
			in[i] = IR_NONE;
			continue;
		}
		if ((in[i] = lookup(L, vn)) != IR_NONE)
			continue;
		TensorId *def = L->region == IR_NONE ? map_slot(&L->later, vn) : NULL;
		if (def && *def >= index) {
			diag_file(L->path, "node '%s' (%s): input '%s' is used before the node that defines it (nodes are not in topological order)",
			    nname, optype, vn);
		} else {
			diag_file(L->path, "node '%s' (%s): input '%s' is not defined", nname, optype, vn);
		}
		ok = false;
	}
	/* an If's branches: their nodes come first (before its outputs are
	 * named), its inputs become the condition, then each branch's outputs */
	if (ok && op == OP_If) {
		TensorId *all = load_branches(L, np, nname, in, &ok);
		if (ok) {
			free(in);
			in = all;
		}
	}
	for (size_t i = 0; i < np->n_output && ok; i++) {
		const char *vn = np->output[i] ? np->output[i] : "";
		if (!*vn) {
			out[i] = IR_NONE;
			continue;
		}
		if (lookup(L, vn) != IR_NONE) {
			diag_file(L->path, "node '%s' (%s): output '%s' is already defined (values must be assigned once)",
			    nname, optype, vn);
			ok = false;
			break;
		}
		out[i] = ir_add_tensor(g, vn, TK_VALUE, DT_UNDEF);
		map_put(&L->names, g->tensors[out[i]].name, out[i]);
		scope_add(L, g->tensors[out[i]].name);
	}
	if (ok) {
		int nin = op == OP_If ? 1 + 2 * (int)np->n_output : (int)np->n_input;
		NodeId nid = ir_add_node(g, op, np->name ? np->name : "", nin, in, (int)np->n_output, out);
		g->nodes[nid].region = L->region;
		g->nodes[nid].branch = L->branch;
		if (op == OP_If)
			g->nodes[nid].owns = L->last_region;
		for (size_t i = 0; i < np->n_attribute && ok; i++)
			ok = load_attr(L, nid, np->attribute[i]);
		/* opsets before 7 broadcast one way along an axis, not like numpy */
		const Attr *bc = ok ? ir_attr(g, nid, "broadcast") : NULL;
		if (bc && bc->type == ATTR_INT && bc->i) {
			diag_node(g, nid, "attribute 'broadcast' asks for the broadcasting of opsets before 7, which tapc does not support");
			ok = false;
		}
		const Attr *v = ok && op == OP_Constant ? ir_attr(g, nid, "value") : NULL;
		if (v && v->type == ATTR_TENSOR && g->tensors[v->t].data == DATA_FILE && np->n_output == 1 &&
		    out[0] != IR_NONE) {
			/* a Constant whose value is in external data is a weight:
			 * its output takes the file reference and the node goes */
			Tensor *c = &g->tensors[v->t], *w = &g->tensors[out[0]];
			w->kind = TK_WEIGHT;
			w->dtype = c->dtype;
			ir_set_shape(w, c->rank, c->dims);
			w->producer = IR_NONE;
			w->data = DATA_FILE;
			w->file = c->file;
			w->offset = c->offset;
			w->length = c->length;
			g->nnodes--;
		}
	}
	free(in);
	free(out);
	return ok;
}

/*
 * The model at the batch asked for.  A model whose batch is symbolic was
 * shaped at it already (resolve_shapes); one exported at a fixed batch B0
 * has B0 baked into constants, so ir/batch.c finds them and re-specializes
 * it.  Splitting the batch into replicas or micro-batches also needs every
 * operator to keep samples apart.  Errors name the node and say what works.
 */
static bool
batch_to(Loader *L)
{
	Graph *g = L->g;
	int64_t want = L->opt->batch;
	bool change = L->static_batch && want > 0;
	if (!change && !L->opt->split)
		return true;
	BatchPlan plan;
	if (!ir_batch_plan(g, &plan)) {
		if (change)
			diag_file(L->path, "-batch=%lld: %s", (long long)want, plan.stuck_why);
		ir_batch_plan_free(&plan);
		return !change;
	}
	change = change && plan.b0 != want;
	bool ok = true;
	if (change && plan.stuck != IR_NONE) {
		diag_node(g, plan.stuck, "the export batch %lld cannot be changed to %lld: %s; "
		    "-batch=%lld (the export batch) works, or re-export with a dynamic batch",
		    (long long)plan.b0, (long long)want, plan.stuck_why, (long long)plan.b0);
		ok = false;
	} else if (L->opt->split && plan.mixer != IR_NONE) {
		diag_node(g, plan.mixer, "the batch cannot be split into replicas or micro-batches: %s; "
		    "-dp=1 -microbatches=1 works", plan.mix_why);
		ok = false;
	} else if (change) {
		ok = ir_batch_respecialize(g, &plan, want);
	}
	ir_batch_plan_free(&plan);
	return ok;
}

static bool
load_graph(Loader *L, Onnx__ModelProto *m)
{
	Graph *g = L->g;
	Onnx__GraphProto *gp = m->graph;
	bool have_opset = false;
	for (size_t i = 0; i < m->n_opset_import; i++) {
		const char *d = m->opset_import[i]->domain ? m->opset_import[i]->domain : "";
		if (*d && strcmp(d, "ai.onnx") != 0)
			continue;
		if (have_opset) {
			diag_file(L->path, "opset_import lists the default ONNX domain twice");
			return false;
		}
		have_opset = true;
		g->opset = m->opset_import[i]->version;
	}
	if (!have_opset) {
		diag_file(L->path, "no opset_import for the default ONNX domain");
		return false;
	}
	if (g->opset < IR_MIN_OPSET || g->opset > IR_MAX_OPSET) {
		diag_file(L->path, "opset %lld is not supported (tapc reads opsets %d to %d)",
		    (long long)g->opset, IR_MIN_OPSET, IR_MAX_OPSET);
		return false;
	}
	if (!gp) {
		diag_file(L->path, "the model has no graph");
		return false;
	}
	if (gp->n_sparse_initializer) {
		diag_file(L->path, "sparse initializers are not supported");
		return false;
	}
	g->name = ir_strdup(&g->arena, gp->name ? gp->name : "");
	if (L->wi->ninit != (int)gp->n_initializer)
		die("wire scan saw %d initializers, protobuf-c %zu", L->wi->ninit, gp->n_initializer);

	/* initializers first: graph inputs that name one are weights (IR < 4) */
	for (size_t i = 0; i < gp->n_initializer; i++) {
		Onnx__TensorProto *tp = gp->initializer[i];
		const char *name = tp->name ? tp->name : "";
		if (!*name) {
			diag_file(L->path, "initializer #%zu has no name", i);
			return false;
		}
		TensorId id = ir_add_tensor(g, name, TK_WEIGHT, DT_UNDEF);
		if (!define(L, g->tensors[id].name, id, "initializers") ||
		    !load_tensor(L, tp, &L->wi->init[i], id, "initializer", name))
			return false;
	}
	InputDims *dims = calloc(gp->n_input + 1, sizeof *dims);
	if (!dims)
		die("out of memory");
	bool ok = true;
	for (size_t i = 0; ok && i < gp->n_input; i++) {
		Onnx__ValueInfoProto *vi = gp->input[i];
		const char *name = vi->name ? vi->name : "";
		if (!*name) {
			diag_file(L->path, "graph input #%zu has no name", i);
			ok = false;
			break;
		}
		TensorId w = lookup(L, name);
		if (w != IR_NONE && g->tensors[w].kind == TK_WEIGHT)
			continue;
		TensorId id = ir_add_tensor(g, name, TK_INPUT, DT_UNDEF);
		ok = define(L, g->tensors[id].name, id, "graph inputs") &&
		    load_input_type(L, vi, id, &dims[g->ninputs]);
		if (ok)
			ir_add_input(g, id);
	}
	ok = ok && resolve_shapes(L, dims);
	free(dims);
	if (!ok)
		return false;

	/* where each value is defined, to tell "out of order" from "undefined" */
	for (size_t i = 0; i < gp->n_node; i++)
		for (size_t j = 0; j < gp->node[i]->n_output; j++) {
			const char *vn = gp->node[i]->output[j];
			if (vn && *vn && !map_slot(&L->later, vn))
				map_put(&L->later, vn, (TensorId)i);
		}
	for (size_t i = 0; i < gp->n_node; i++)
		if (!load_node(L, gp->node[i], (int)i))
			return false;
	for (size_t i = 0; i < gp->n_output; i++) {
		const char *name = gp->output[i]->name ? gp->output[i]->name : "";
		TensorId t = lookup(L, name);
		if (t == IR_NONE) {
			diag_file(L->path, "graph output '%s' is not defined", name);
			return false;
		}
		ir_add_output(g, t);
	}
	ir_reindex(g);
	g->ops_loaded = g->nnodes;
	return ir_check(g) && ir_infer_all(g) && batch_to(L);
}

static const char *
dir_of(Arena *a, const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return ".";
	if (slash == path)
		return "/";
	char *d = ir_strdup(a, path);
	d[slash - path] = 0;
	return d;
}

Graph *
onnx_load_buffer(const uint8_t *buf, size_t len, const char *path, const char *dir,
    const OnnxOptions *o)
{
	WireInfo wi;
	if (len == 0) {
		diag_file(path, "not an ONNX model: the file is empty");
		return NULL;
	}
	if (!onnx_wirescan(buf, len, path, &wi))
		return NULL;
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
	if (!m) {
		free(wi.init);
		diag_file(path, "not an ONNX model: protobuf-c could not unpack it");
		return NULL;
	}
	Graph *g = ir_new("");
	const char *slash = strrchr(path, '/');
	g->model = ir_strdup(&g->arena, path);
	g->dir = dir ? ir_strdup(&g->arena, dir) : ".";
	ir_add_file(g, slash ? slash + 1 : path);
	Loader L = {.g = g, .path = g->model, .dir = dir, .opt = o, .wi = &wi, .region = IR_NONE,
		.last_region = IR_NONE};
	bool ok = load_graph(&L, m);
	map_free(&L.names);
	map_free(&L.later);
	free(L.scoped);
	onnx__model_proto__free_unpacked(m, NULL);
	free(wi.init);
	if (!ok) {
		ir_free(g);
		return NULL;
	}
	return g;
}

Graph *
onnx_load(const char *path, const OnnxOptions *o)
{
	char why[PATH_MAX + 128];
	int64_t size;
	int fd = ir_file_open(NULL, path, "", "", &size, why, sizeof why);
	if (fd < 0) {
		diag_file(path, "%s", why);
		return NULL;
	}
	struct stat st = {.st_size = size};
	int64_t cap = o->max_size > 0 ? o->max_size : ONNX_DEFAULT_MAX_SIZE;
	if (st.st_size > cap) {
		close(fd);
		diag_file(path, "file is %lld bytes, over the limit of %lld bytes (-max-model-size)",
		    (long long)st.st_size, (long long)cap);
		return NULL;
	}
	void *map = NULL;
	if (st.st_size > 0) {
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			close(fd);
			diag_file(path, "cannot map: %s", strerror(errno));
			return NULL;
		}
	}
	close(fd);
	Arena tmp = {0};
	Graph *g = onnx_load_buffer(map ? map : "", (size_t)st.st_size, path, dir_of(&tmp, path), o);
	ir_arena_free(&tmp);
	if (map)
		munmap(map, (size_t)st.st_size);
	return g;
}
