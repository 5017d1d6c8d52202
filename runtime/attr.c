/*
 * attr.c - attribute look-up for kernels, and dtype tables.
 *
 * Attributes arrive sorted by name (tapc sorts them), so look-up is a
 * binary search; kernels call these once per node per run.
 */
#include <string.h>

#include "runtime/taprt.h"

int
taprt_dtype_size(int dtype)
{
	switch (dtype) {
	case TAPRT_F32: case TAPRT_I32: case TAPRT_U32: return 4;
	case TAPRT_F64: case TAPRT_I64: case TAPRT_U64: return 8;
	case TAPRT_I16: case TAPRT_U16: case TAPRT_F16: case TAPRT_BF16: return 2;
	case TAPRT_I8: case TAPRT_U8: case TAPRT_BOOL: return 1;
	default: return 0;
	}
}

const char *
taprt_dtype_name(int dtype)
{
	switch (dtype) {
	case TAPRT_F32: return "f32";
	case TAPRT_U8: return "u8";
	case TAPRT_I8: return "i8";
	case TAPRT_U16: return "u16";
	case TAPRT_I16: return "i16";
	case TAPRT_I32: return "i32";
	case TAPRT_I64: return "i64";
	case TAPRT_BOOL: return "bool";
	case TAPRT_F16: return "f16";
	case TAPRT_F64: return "f64";
	case TAPRT_U32: return "u32";
	case TAPRT_U64: return "u64";
	case TAPRT_BF16: return "bf16";
	default: return "?";
	}
}

const taprt_attr *
taprt_attr_get(const taprt_node *n, const char *name)
{
	int lo = 0, hi = n->nattr - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		int c = strcmp(n->attr[mid].name, name);
		if (c == 0)
			return &n->attr[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

int64_t
taprt_attr_int(const taprt_node *n, const char *name, int64_t dflt)
{
	const taprt_attr *a = taprt_attr_get(n, name);
	return a && a->type == TAPRT_ATTR_INT ? a->i : dflt;
}

float
taprt_attr_float(const taprt_node *n, const char *name, float dflt)
{
	const taprt_attr *a = taprt_attr_get(n, name);
	return a && a->type == TAPRT_ATTR_FLOAT ? a->f : dflt;
}

const char *
taprt_attr_str(const taprt_node *n, const char *name, const char *dflt)
{
	const taprt_attr *a = taprt_attr_get(n, name);
	return a && a->type == TAPRT_ATTR_STRING ? a->s : dflt;
}

int
taprt_ints(const taprt_node *n, int input, const char *name, int64_t *out, int max)
{
	if (input >= 0 && input < n->nin && n->in[input]) {
		const taprt_tensor *t = n->in[input];
		for (int64_t i = 0; i < t->numel && i < max; i++)
			out[i] = t->dtype == TAPRT_I32 ? ((const int32_t *)t->data)[i] :
			    ((const int64_t *)t->data)[i];
		return (int)t->numel;
	}
	const taprt_attr *a = name ? taprt_attr_get(n, name) : NULL;
	if (!a || a->type != TAPRT_ATTR_INTS)
		return -1;
	for (int i = 0; i < a->n && i < max; i++)
		out[i] = a->is[i];
	return a->n;
}
