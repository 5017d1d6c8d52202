/*
 * cpu.c - what the CPU the program runs on can do, for the kernels that
 * carry a variant per instruction set (conv_pw.c, conv_dw.c, k_nn.c's
 * direct convolution) and for gemm.c's choice of OpenBLAS kernels.
 *
 * Needs: GCC's or clang's __builtin_cpu_supports on x86-64 (libgcc's
 * checks include the OS's support: XCR0's YMM and ZMM state); elsewhere
 * every answer is "none".
 *
 * TAPRT_ISA=avx2 or =baseline in the environment caps what taprt_isa
 * reports, so that the AVX2 and portable variants run on an AVX-512 CPU
 * too; the unit tests cap it with taprt_isa_limit to test each variant.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

bool
taprt_cpu_avx512(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vl");
#else
	return false;
#endif
}

static bool
cpu_avx2(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
	return false;
#endif
}

static int isa_cpu = -1;                /* the CPU's, capped by TAPRT_ISA */
static int isa_limit = TAPRT_ISA_AVX512; /* taprt_isa_limit's */

int
taprt_isa(void)
{
	int v = __atomic_load_n(&isa_cpu, __ATOMIC_RELAXED);
	if (v < 0) {
		v = taprt_cpu_avx512() ? TAPRT_ISA_AVX512 : cpu_avx2() ? TAPRT_ISA_AVX2 :
		    TAPRT_ISA_BASE;
		const char *cap = getenv("TAPRT_ISA");
		if (cap && !strcmp(cap, "avx2") && v > TAPRT_ISA_AVX2)
			v = TAPRT_ISA_AVX2;
		else if (cap && !strcmp(cap, "baseline"))
			v = TAPRT_ISA_BASE;
		__atomic_store_n(&isa_cpu, v, __ATOMIC_RELAXED);
	}
	int lim = __atomic_load_n(&isa_limit, __ATOMIC_RELAXED);
	return v < lim ? v : lim;
}

int
taprt_isa_limit(int level)
{
	__atomic_store_n(&isa_limit, level, __ATOMIC_RELAXED);
	return taprt_isa();
}
