/*
 * onnx.h - the ONNX frontend: load a model file into the IR.
 *
 * onnx_load() maps the file, pre-scans the protobuf wire format
 * (frontend/wirescan.c) for nesting depth and weight locations, unpacks it
 * with protobuf-c, re-checks the ONNX checker's rules, builds the op graph
 * with weights referenced by (file, offset, length) and runs shape
 * inference.  Any problem is one diag line naming file, node and tensor;
 * the result is then NULL.
 */
#ifndef TAPC_ONNX_H
#define TAPC_ONNX_H

#include "ir/ir.h"

#define ONNX_MAX_DEPTH 100              /* protobuf message nesting we accept */
#define ONNX_DEFAULT_MAX_SIZE ((int64_t)2 << 30) /* protobuf's own 2 GiB limit */

/* -dim NAME=N: a value for the dim_param NAME wherever it appears. */
typedef struct {
	const char *name;
	int64_t value;                  /* >= 1 */
} OnnxDim;

/* -input-shape NAME=AxBxC: one input's whole shape. */
typedef struct {
	const char *input;
	int rank;
	int64_t dims[IR_MAX_RANK];      /* each >= 1 */
} OnnxShape;

typedef struct {
	int64_t max_size;               /* model file size cap in bytes */
	int64_t batch;                  /* -batch=N; 0 keeps the model's (symbolic -> 1) */
	bool split;                     /* the batch is a replica's or micro-batch's share:
					 * an operator mixing samples is an error */
	int ndims;
	const OnnxDim *dims;            /* -dim pins */
	int nshapes;
	const OnnxShape *shapes;        /* -input-shape pins */
} OnnxOptions;

/* Where the wire scan found an initializer's payload in the model file. */
typedef struct {
	int64_t raw_off, raw_len;       /* raw_data, if present (raw_len >= 0) */
	int64_t packed_off, packed_len; /* float_data/double_data packed once, else -1 */
	int npacked;                    /* how many times a packed field occurred */
} WireTensor;

typedef struct {
	int ninit;                      /* initializers of the main graph */
	WireTensor *init;               /* malloc'd, ninit entries */
} WireInfo;

/* Walk the wire format of a ModelProto.  Rejects malformed data, nesting
 * deeper than ONNX_MAX_DEPTH and a repeated graph field; fills wi. */
bool onnx_wirescan(const uint8_t *buf, size_t len, const char *path, WireInfo *wi);

Graph *onnx_load(const char *path, const OnnxOptions *o);
/* The same from memory; dir is where external data is looked up, NULL for
 * none allowed (the fuzzer). */
Graph *onnx_load_buffer(const uint8_t *buf, size_t len, const char *path,
    const char *dir, const OnnxOptions *o);

#endif
