/*
 * fuzz_emit.c - libFuzzer target for what tapc writes (make fuzz): a model
 * from arbitrary bytes is loaded, planned on one rank or two (tensor
 * parallelism when the size is odd) and emitted as a program directory with a -MD depfile, and
 * the output must be well-formed in its own language: every C file passes
 * `cc -fsyntax-only -std=c11 -Werror=comment -Werror=trigraphs`, the
 * Makefile and the depfile parse under `make -n`, plan.json parses as
 * JSON (jansson).  Names are the attack surface (issue 11): a model's
 * names must never change the meaning of a generated file.
 *
 * Needs cc and make on PATH; TAPC_SRCDIR (compiled in) for taprt.h.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/emit.h"
#include "frontend/onnx.h"
#include "passes/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void
cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (dir[0] && system(cmd) != 0)
		fprintf(stderr, "fuzz_emit: could not remove %s\n", dir);
}

static int
run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	if (!null) {
		null = fopen("/dev/null", "w");
		snprintf(dir, sizeof dir, "/tmp/tapc-fuzz-emit-XXXXXX");
		if (!mkdtemp(dir))
			abort();
		atexit(cleanup);
	}
	diag_stream = null;
	diag_reset();
	int devices = 1 + (size & 1);
	/* a real file, so the program's weights have somewhere to come from */
	char model[128];
	snprintf(model, sizeof model, "%s/fuzz.onnx", dir);
	FILE *f = fopen(model, "wb");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	OnnxOptions o = {0};
	Graph *g = onnx_load(model, &o);
	if (!g)
		return 0;
	PassCtx cx = {.min_duplicate = 2, .tp = devices};
	ir_cluster_mesh(&g->cluster, 1, devices, &g->cost);
	g->mesh.rows = 1;
	g->mesh.cols = devices;
	PassOptions po = {.print_before = "", .print_after = "", .stop_after = "",
		.ir_dump_dir = "", .print_stream = null};
	char out[128], dep[160], cmd[1024];
	snprintf(out, sizeof out, "%s/out", dir);
	snprintf(dep, sizeof dep, "%s/out.d", dir);
	EmitOptions eo = {.outdir = out, .program = "model", .depfile = dep, .input = model,
		.tapc_exe = ""};
	if (pass_run_pipeline(g, &cx, PASS_DEFAULT_PIPELINE, &po) && emit_program(g, &eo)) {
		snprintf(cmd, sizeof cmd, "cd %s && for f in *.c; do cc -fsyntax-only -std=c11 "
		    "-Werror=comment -Werror=trigraphs -I%s/runtime \"$f\" || exit 1; done && "
		    "make -s -n >/dev/null && make -s -n -f %s >/dev/null", out, TAPC_SRCDIR, dep);
		if (run(cmd) != 0)
			abort(); /* a generated file that its own language refuses */
		snprintf(cmd, sizeof cmd, "%s/plan.json", out);
		json_error_t e;
		json_t *j = json_load_file(cmd, 0, &e);
		if (!j)
			abort();
		json_decref(j);
	}
	ir_free(g);
	return 0;
}
