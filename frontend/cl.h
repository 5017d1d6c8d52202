/*
 * cl.h - tapc's command line, parsed by LLVM Support's cl library.
 *
 * frontend/cl.cpp is the project's one C++ file: it declares the options
 * with llvm::cl (LLVM-style single-dash long options, `--opt` and `-opt=v`
 * forms, @file response files), installs LLVM's crash stack-trace handler,
 * and hands the values to C through this struct.  Strings point into storage
 * that lives until exit.
 */
#ifndef TAPC_CL_H
#define TAPC_CL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
	const char *input;              /* positional: model.onnx or file.ir */
	const char *output;             /* -o */
	const char *mesh;               /* -mesh RxC */
	const char *emit;               /* -emit=ir|c|plan */
	const char *passes;             /* -passes=a,b,c ("" = default) */
	const char *print_before;       /* comma-joined pass names */
	const char *print_after;
	bool print_before_all;
	bool print_after_all;
	const char *stop_after;
	bool time_passes;
	bool no_fuse;                   /* -O0: the default pipeline without the fusion passes */
	bool verify_each;
	const char *ir_dump_dir;
	int64_t batch;                  /* 0 = as the model says */
	int64_t max_model_size;
	bool list_passes;
	int min_duplicate;              /* -min-duplicate=N */
	int dp;                         /* -dp=N, 0 = the degree rule's */
	int tp;                         /* -tp=N, 0 = the degree rule's */
	int pp;                         /* -pp=N, 0 = the degree rule's */
	int microbatches;               /* -microbatches=M, 0 = default */
	const char *cost;               /* -cost=key=value,... */
	const char *cluster;            /* -cluster=FILE, "" for none */
	unsigned tp_random;             /* -tp-random=SEED (hidden, testing) */
	bool md;                        /* -MD or -MF */
	const char *mf;                 /* -MF FILE, "" for the default */
	const char *model;              /* -model=FILE: an IR file's model, "" for its header's */
	int ndim;
	const char *const *dim;         /* -dim NAME=N, as given */
	int ninput_shape;
	const char *const *input_shape; /* -input-shape NAME=AxBxC, as given */
} TapcOptions;

#ifdef __cplusplus
extern "C" {
#endif
/* Parse argv into o.  overview is -help's first paragraph; extra its tail.
 * Returns false after LLVM has printed the error (usage problems). */
bool cl_parse(int argc, char **argv, const char *overview, const char *extra, TapcOptions *o);
#ifdef __cplusplus
}
#endif

#endif
