/*
 * gemm_libs.c - the GEMM library comparison of docs/runtime.md ("GEMM"):
 * GFLOP/s of one row-major sgemm on tapc's own product shapes, one thread.
 *
 *   cc -O2 bench/gemm_libs.c -o gb_ob -I/usr/include/x86_64-linux-gnu/openblas-pthread \
 *      -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas
 *   cc -O2 bench/gemm_libs.c -o gb_blis -I/usr/include/blis \
 *      -L/usr/lib/x86_64-linux-gnu/blis-openmp -lblis -Wl,-rpath,/usr/lib/x86_64-linux-gnu/blis-openmp
 *   cc -O2 -DUSE_DNNL bench/gemm_libs.c -o gb_dnnl -ldnnl
 *   OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 BLIS_NUM_THREADS=1 OPENBLAS_CORETYPE=SKYLAKEX ./gb_ob
 *
 * Needs libopenblas-dev, libblis-dev, libdnnl-dev (not build dependencies of
 * tapc: only this measurement uses BLIS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(USE_DNNL)
#include <dnnl.h>
#define SGEMM(M,N,K,a,lda,b,ldb,c,ldc) dnnl_sgemm('N','N',M,N,K,1.0f,a,lda,b,ldb,0.0f,c,ldc)
#else
#include <cblas.h>
#define SGEMM(M,N,K,a,lda,b,ldb,c,ldc) cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,M,N,K,1.0f,a,lda,b,ldb,0.0f,c,ldc)
#endif
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){
  int shapes[][4]={ /* M N K batch */
   {512,2304,768,1},{512,768,768,1},{512,3072,768,1},{512,768,3072,1},
   {128,128,64,48},{128,64,128,48},
   {16,16,16,16},{4,64,64,1},{64,192,64,1},
   {64,3136,147,1},{64,3136,576,1},{128,784,1152,1},{256,196,2304,1},{512,49,4608,1},{128,784,64,1},
   {16,256,27,1},{16,64,72,1}};
  int ns=sizeof shapes/sizeof shapes[0];
  float *a=malloc(4*4096*4096),*b=malloc(4*4096*4096),*c=malloc(4*4096*4096);
  for(long i=0;i<4096L*4096;i++){a[i]=(i%7)*0.1f;b[i]=(i%5)*0.1f;}
  for(int s=0;s<ns;s++){int M=shapes[s][0],N=shapes[s][1],K=shapes[s][2],B=shapes[s][3];
    double fl=2.0*M*N*K*B; int it=(int)(2e9/fl)+1; if(it>20000)it=20000;
    for(int w=0;w<2;w++) for(int bb=0;bb<B;bb++) SGEMM(M,N,K,a+(long)bb*M*K,K,b+(long)bb*K*N,N,c+(long)bb*M*N,N);
    double best=1e30;
    for(int r=0;r<3;r++){double t0=now();
    for(int i=0;i<it;i++) for(int bb=0;bb<B;bb++) SGEMM(M,N,K,a+(long)bb*M*K,K,b+(long)bb*K*N,N,c+(long)bb*M*N,N);
    double t=(now()-t0)/it; if(t<best)best=t;}
    printf("%5d %5d %5d x%-3d %9.4f ms %7.1f GF\n",M,N,K,B,best,fl/best/1e6);
  }
}
