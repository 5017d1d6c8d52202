/* weights.c - placeholder */
#include "runtime/internal.h"
int taprt_load_weights(taprt_ctx *cx, const taprt_rank_program *rp) { (void)cx; (void)rp; return -1; }
void taprt_blas_threads(int n) { (void)n; }
