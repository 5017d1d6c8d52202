/* test_rt_reduce.c - CUnit tests (placeholder until the suite lands). */
#include "test/unit/util.h"

void
suite_rt_reduce(CU_pSuite s)
{
	(void)s;
}
