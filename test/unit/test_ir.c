/* test_ir.c - CUnit tests (placeholder until the suite lands). */
#include "test/unit/util.h"

void
suite_ir(CU_pSuite s)
{
	(void)s;
}
