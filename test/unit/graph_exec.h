/*
 * graph_exec.h - run an IR graph on libtaprt's kernels, for tests.
 *
 * The executor gives every tensor its own buffer (no memory plan, no
 * views), loads weights from the model's files and constants from the
 * IR, and calls taprt_op_<Op> per node in order, as a generated program
 * would on one rank.  Tests set inputs and weights through gx_tensor and
 * run any range of nodes (the forward part alone, for finite
 * differences).  Control flow (If) and collectives are not run.
 *
 *     GExec *x = gx_new(g);
 *     gx_set(x, in, 0, 1.5);
 *     if (!gx_run(x, 0, g->nnodes)) puts(gx_error(x));
 *     double l = gx_get(x, g->loss, 0);
 */
#ifndef TAPC_TEST_GRAPH_EXEC_H
#define TAPC_TEST_GRAPH_EXEC_H

#include "ir/ir.h"
#include "runtime/taprt.h"

typedef struct GExec GExec;

typedef void gx_kernel(taprt_ctx *cx, const taprt_node *n);

/* NULL when a tensor has no shape or a weight cannot be read (gx_why). */
GExec *gx_new(Graph *g);
const char *gx_why(void);
void gx_free(GExec *x);
taprt_tensor *gx_tensor(GExec *x, TensorId t);
double gx_get(GExec *x, TensorId t, int64_t i);  /* a float or integer element */
void gx_set(GExec *x, TensorId t, int64_t i, double v);
/* Run nodes [from, to); false with gx_error set at the first failure. */
bool gx_run(GExec *x, NodeId from, NodeId to);
const char *gx_error(GExec *x);
/* The kernel of an operator, NULL if libtaprt has none. */
gx_kernel *gx_kernel_of(Op op);

/*
 * Make every f32 tensor of g f64 (constants converted, Cast's `to` too),
 * so finite differences of a fixture model are exact to ~1e-9; weights
 * stay f32 in their files and gx_new converts them when loading.
 */
void gx_promote_f64(Graph *g);

#endif
