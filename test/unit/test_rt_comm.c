/* test_rt_comm.c - CUnit tests (placeholder until the suite lands). */
#include "test/unit/util.h"

void
suite_rt_comm(CU_pSuite s)
{
	(void)s;
}
