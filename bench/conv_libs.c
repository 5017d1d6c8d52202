/*
 * conv_libs.c - the convolution comparison of docs/runtime.md
 * ("Convolutions"): oneDNN on ResNet-18's 11 convolution shapes at 224x224,
 * one thread: NCHW tensors as they are, its own layout (direct kernels), and
 * with WINO=1 Winograd for the 3x3 stride-1 ones; prints each shape and the
 * total over the network's layers.
 *
 *   cc -O2 bench/conv_libs.c -o conv_libs -ldnnl && OMP_NUM_THREADS=1 ./conv_libs
 */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CK(x) do { dnnl_status_t s_ = (x); if (s_ != dnnl_success) { printf("fail %s: %d\n", #x, s_); exit(1);} } while (0)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static double run(dnnl_engine_t eng, dnnl_stream_t st, int C, int M, int H, int k, int s, int any) {
  int p = k/2; int O = (H + 2*p - k)/s + 1;
  dnnl_dims_t sd = {1, C, H, H}, wd = {M, C, k, k}, bd = {M}, dd = {1, M, O, O};
  dnnl_dims_t strides = {s, s}, pad = {p, p};
  dnnl_memory_desc_t smd, wmd, bmd, dmd;
  CK(dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, any == 1 ? dnnl_format_tag_any : any == 2 ? dnnl_nhwc : dnnl_nchw));
  CK(dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x));
  CK(dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, any == 1 ? dnnl_format_tag_any : any == 2 ? dnnl_nhwc : dnnl_nchw));
  dnnl_convolution_desc_t cd;
  dnnl_status_t ws = dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, (getenv("WINO") && k == 3 && s == 1) ? dnnl_convolution_winograd : dnnl_convolution_direct, &smd, &wmd, &bmd, &dmd, strides, pad, pad); if (ws) { printf("desc fail\n"); return 0; }
  dnnl_primitive_attr_t attr; CK(dnnl_primitive_attr_create(&attr));
  dnnl_post_ops_t po; CK(dnnl_post_ops_create(&po)); CK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0));
  CK(dnnl_primitive_attr_set_post_ops(attr, po));
  dnnl_primitive_desc_t pd; if (dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL)) { printf("no impl C%d M%d H%d\n", C, M, H); return 0; }
  const char *impl; CK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
  const dnnl_memory_desc_t *qs = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *qw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *qd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  dnnl_memory_t ms, mw, mb, md;
  CK(dnnl_memory_create(&ms, qs, eng, DNNL_MEMORY_ALLOCATE)); CK(dnnl_memory_create(&mw, qw, eng, DNNL_MEMORY_ALLOCATE));
  CK(dnnl_memory_create(&mb, &bmd, eng, DNNL_MEMORY_ALLOCATE)); CK(dnnl_memory_create(&md, qd, eng, DNNL_MEMORY_ALLOCATE));
  dnnl_primitive_t prim; CK(dnnl_primitive_create(&prim, pd));
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md}};
  for (int i = 0; i < 3; i++) CK(dnnl_primitive_execute(prim, st, 4, args)); dnnl_stream_wait(st);
  int it = 50; double best = 1e9;
  for (int r = 0; r < 3; r++) { double t0 = now(); for (int i = 0; i < it; i++) CK(dnnl_primitive_execute(prim, st, 4, args)); dnnl_stream_wait(st); double t = (now()-t0)/it; if (t < best) best = t; }
  double fl = 2.0*M*O*O*C*k*k;
  printf("C%4d M%4d H%4d k%d s%d %s: %.4f ms %.1f GF  [%s]\n", C, M, H, k, s, any==1?"blocked":any==2?"nhwc   ":"nchw   ", best, fl/best/1e6, impl);
  return best;
}
int main(){
  dnnl_engine_t eng; CK(dnnl_engine_create(&eng, dnnl_cpu, 0)); dnnl_stream_t st; CK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  int L[][6] = {{3,64,224,7,2,1},{64,64,56,3,1,4},{64,128,56,3,2,1},{128,128,28,3,1,3},{64,128,56,1,2,1},{128,256,28,3,2,1},{256,256,14,3,1,3},{128,256,28,1,2,1},{256,512,14,3,2,1},{512,512,7,3,1,3},{256,512,14,1,2,1}};
  for (int a = 0; a < 3; a++) { double tot = 0; for (unsigned i = 0; i < sizeof L/sizeof L[0]; i++) tot += L[i][5]*run(eng, st, L[i][0], L[i][1], L[i][2], L[i][3], L[i][4], a); printf("total %.3f ms\n", tot); }
}
