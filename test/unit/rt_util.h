/*
 * rt_util.h - building runtime tensors and nodes by hand in kernel tests.
 *
 *     float xv[] = {1, 2, 3, 4};
 *     taprt_tensor x = rt_tensor(TAPRT_F32, xv, 2, (int64_t[]){2, 2});
 *     taprt_tensor *in[] = {&x}, *out[] = {&y};
 *     taprt_node n = rt_node(in, 1, out, 1, NULL, 0);
 *     taprt_op_Relu(NULL, &n);
 *
 * Every input counts as fixed (taprt_node.fixed: Conv's oneDNN path keeps
 * its weights reordered); a test that changes a weight between calls of one
 * node clears the bit.
 */
#ifndef TAPC_TEST_RT_UTIL_H
#define TAPC_TEST_RT_UTIL_H

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "runtime/taprt.h"

typedef void kernel(taprt_ctx *cx, const taprt_node *n);

/* Record rank r's first failure in a multi-rank test: t has bad[] and why[]. */
#define RANK_CHECK(t, r, cond, ...)                                          \
	do {                                                                 \
		if (!(cond) && !(t)->bad[r]++)                               \
			snprintf((t)->why[r], sizeof (t)->why[r], __VA_ARGS__); \
	} while (0)

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static inline taprt_tensor
rt_tensor(int dtype, void *data, int rank, const int64_t *dims)
{
	taprt_tensor t = {.data = data, .dtype = dtype, .rank = rank, .numel = 1};
	for (int i = 0; i < rank; i++) {
		t.dims[i] = dims[i];
		t.numel *= dims[i];
	}
	return t;
}

/* attrs must be sorted by name, as tapc emits them */
static inline taprt_node
rt_node(taprt_tensor *const *in, int nin, taprt_tensor *const *out, int nout,
    const taprt_attr *attr, int nattr)
{
	taprt_node n = {.name = "test", .opset = 17, .nin = nin, .nout = nout,
		.nattr = nattr, .in = in, .out = out, .attr = attr, .fixed = ~0u};
	return n;
}

/* Run op on the node at this opset; the kernel must not report an error. */
static inline void
rt_run(kernel *op, taprt_tensor **in, int nin, taprt_tensor **out, int nout,
    const taprt_attr *attr, int nattr, int opset)
{
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	taprt_node n = rt_node(in, nin, out, nout, attr, nattr);
	n.opset = opset;
	op(&cx, &n);
	CU_ASSERT_STRING_EQUAL(cx.error, "");
	taprt_packs_free(&cx);
}

#endif
