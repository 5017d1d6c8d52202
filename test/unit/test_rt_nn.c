/* test_rt_nn.c - CUnit tests (placeholder until the suite lands). */
#include "test/unit/util.h"

void
suite_rt_nn(CU_pSuite s)
{
	(void)s;
}
