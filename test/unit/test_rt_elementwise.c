/* test_rt_elementwise.c - CUnit tests (placeholder until the suite lands). */
#include "test/unit/util.h"

void
suite_rt_elementwise(CU_pSuite s)
{
	(void)s;
}
