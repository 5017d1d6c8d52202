/*
 * degrees.h - the data, tensor and pipeline degrees of a mesh (degrees.c).
 *
 * The driver probes the model (load, fold, pipe-shard) for the facts the
 * rule needs, then asks degrees_choose for dp x tp x pp = the mesh's
 * devices and the micro-batch count.  Megatron's rule for now; AMP's
 * cost-model search over degrees will be another chooser behind the same
 * call.
 */
#ifndef TAPC_DEGREES_H
#define TAPC_DEGREES_H

#include "ir/ir.h"

/* What the user forced (> 0) or left to the rule (0). */
typedef struct {
	int dp, tp, pp, microbatches;
} DegreeRequest;

/* What the rule needs to know about the model. */
typedef struct {
	int64_t batch;                  /* dim 0 of the first input (1 without inputs) */
	int subgraphs;                  /* pipe-shard's count: the most stages there can be */
	int64_t divisor;                /* gcd of the head counts and hidden sizes; 0: none */
	int heads;                      /* head counts found (for the message) */
	int64_t hidden;                 /* gcd of the hidden sizes alone, 0: none */
} ModelFacts;

/* The facts of a graph after fold-constants (Reshape targets constant) and
 * pipe-shard (Graph.nsubgraphs). */
void degrees_facts(const Graph *g, ModelFacts *f);

/* Degrees for the mesh: forced ones as given, the rest by Megatron's rule
 * (TP inside a mesh row up to what the heads and hidden sizes divide, PP
 * across rows, DP for the rest, then fallbacks when the batch or the
 * subgraphs run out).  out gets rows, cols, dp, tp, pp; *micro the
 * micro-batches per replica; rule (n bytes) says why.  False after a diag
 * error: forced degrees that do not fit the mesh, the batch or the model. */
bool degrees_choose(const Mesh *mesh, const DegreeRequest *req, const ModelFacts *f,
    const char *model, Mesh *out, int *micro, char *rule, size_t n);

#endif
