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
	const char *mesh;               /* -mesh RxC, "" if not given */
	const char *emit;               /* -emit=c|ir|plan|schedule|search */
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
	int dp;                         /* -dp=N, 0 = searched */
	int tp;                         /* -tp=N, 0 = searched */
	int pp;                         /* -pp=N, 0 = searched */
	int microbatches;               /* -microbatches=M, 0 = searched */
	const char *cost;               /* -cost=key=value,... */
	const char *cluster;            /* -cluster=FILE, "" for none */
	const char *search;             /* -search=auto|exhaustive|anneal */
	bool train;                     /* -train */
	const char *loss;               /* -loss=cross_entropy|mse */
	const char *optimizer;          /* -optimizer=sgd|adamw */
	double lr, momentum;            /* -lr, -momentum */
	double weight_decay;            /* -weight-decay; < 0: the optimizer's default */
	double beta1, beta2, eps;       /* AdamW's */
	const char *schedule;           /* -schedule=gpipe|1f1b|merak, "" the best predicted */
	const char *recompute;          /* -recompute=none|all|auto */
	const char *half;               /* -half=f32|exact */
	bool slice;                     /* -slice */
	bool subpipeline;               /* -subpipeline */
	int anneal_steps;               /* -anneal-steps=N, 0 = AMP's 500 */
	unsigned seed;                  /* -seed=N */
	unsigned tp_random;             /* -tp-random=SEED (hidden, testing) */
	bool md;                        /* -MD or -MF */
	const char *mf;                 /* -MF FILE, "" for the default */
	const char *model;              /* -model=FILE: an IR file's model, "" for its header's */
	int ndim;
	const char *const *dim;         /* -dim NAME=N, as given */
	int ninput_shape;
	const char *const *input_shape; /* -input-shape NAME=AxBxC, as given */
	unsigned given;                 /* CL_GIVEN_*: which of the options whose default
					 * is a "not given" value the user gave */
} TapcOptions;

/* The options whose default (0, or < 0) stands for "not given": the user's
 * own 0 or negative value is an error, which only this tells apart. */
enum {
	CL_GIVEN_BATCH = 1 << 0,
	CL_GIVEN_MAX_MODEL_SIZE = 1 << 1,
	CL_GIVEN_DP = 1 << 2,
	CL_GIVEN_TP = 1 << 3,
	CL_GIVEN_PP = 1 << 4,
	CL_GIVEN_MICROBATCHES = 1 << 5,
	CL_GIVEN_ANNEAL_STEPS = 1 << 6,
	CL_GIVEN_WEIGHT_DECAY = 1 << 7,
	CL_GIVEN_MESH = 1 << 8,         /* "" is not given; -mesh= is an error */
};

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
