/*
 * util.h - helpers shared by the CUnit suites.
 *
 * Each suite file defines `void suite_NAME(CU_pSuite s)` adding its tests
 * with ADD(s, fn); main.c registers the suites listed in suites.def.
 * UNIT_SRCDIR (set by make check) points at the source tree for fixtures.
 */
#ifndef TAPC_TEST_UTIL_H
#define TAPC_TEST_UTIL_H

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/ir.h"

#define ADD(s, fn) CU_add_test((s), #fn, (fn))

#define SUITE(name) void suite_##name(CU_pSuite s);
#include "test/unit/suites.def"
#undef SUITE

/* Path of a file in the source tree: srcpath("test/e2e/gpt/model.onnx"). */
const char *srcpath(const char *rel);
/* test/e2e/NAME/model.onnx through the default pipeline on one device;
 * NULL if it does not load. */
Graph *fixture_graph(const char *name);
/* fixture_graph, with every node name erased first when strip_names (only
 * the structure left). */
Graph *fixture_graph_opt(const char *name, bool strip_names);
/* Silence diagnostics into a buffer; diag_last keeps the latest line. */
void quiet_diags(void);

#endif
