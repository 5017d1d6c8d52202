/*
 * main.c - the CUnit runner for every suite in suites.def.
 *
 * Exit status is non-zero when any assertion fails, so `make check` fails.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include "frontend/onnx.h"
#include "passes/passes.h"
#include "test/unit/util.h"

const char *
srcpath(const char *rel)
{
	static char buf[8][4096];
	static int k;
	const char *top = getenv("UNIT_SRCDIR");
	char *b = buf[k++ % 8];
	snprintf(b, sizeof buf[0], "%s/%s", top ? top : ".", rel);
	return b;
}

Graph *
fixture_graph_opt(const char *name, bool strip_names)
{
	char rel[256];
	snprintf(rel, sizeof rel, "test/e2e/%s/model.onnx", name);
	OnnxOptions o = {0};
	Graph *g = onnx_load(srcpath(rel), &o);
	if (!g)
		return NULL;
	if (strip_names)
		for (NodeId n = 0; n < g->nnodes; n++)
			g->nodes[n].name = "";
	PassCtx cx = {.min_duplicate = 2};
	PassOptions po = {.print_before = "", .print_after = "", .stop_after = "", .ir_dump_dir = ""};
	diag_reset();
	if (!pass_run_pipeline(g, &cx, PASS_PLAN_PIPELINE ",verify", &po)) {
		ir_free(g);
		return NULL;
	}
	return g;
}

Graph *
fixture_graph(const char *name)
{
	return fixture_graph_opt(name, false);
}

void
quiet_diags(void)
{
	static FILE *null;
	if (!null)
		null = fopen("/dev/null", "w");
	diag_stream = null;
	diag_reset();
}

int
main(int argc, char **argv)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
#define SUITE(name)                                                       \
	if (argc < 2 || strcmp(argv[1], #name) == 0)                      \
		suite_##name(CU_add_suite(#name, NULL, NULL));
#include "test/unit/suites.def"
#undef SUITE
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned run = CU_get_number_of_tests_run();
	unsigned failed = CU_get_number_of_tests_failed();
	/* the plain summary line test/all.sh adds up */
	printf("\n%u passed, %u failed\n", run - failed, failed);
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
