/* test_rt_data.c - CUnit tests (placeholder until the suite lands). */
#include "test/unit/util.h"

void
suite_rt_data(CU_pSuite s)
{
	(void)s;
}
