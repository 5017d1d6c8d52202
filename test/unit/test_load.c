/* test_load.c - CUnit tests (placeholder until the suite lands). */
#include "test/unit/util.h"

void
suite_load(CU_pSuite s)
{
	(void)s;
}
