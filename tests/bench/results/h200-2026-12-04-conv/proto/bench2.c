/* The band kernels of the previous main and of the new code side by side
 * (call A, B): old_fma.c is `git show e3d2337:cpu/convolve_fma.c`, built with
 * -Dsf_conv2d_band=old_conv2d_band, the new file with
 * -Dsf_conv2d_band=new_conv2d_band, both -O3 with -I include -I src/calc,
 * linked with src/calc/simd.c. Usage: bench2 N KX KY ROUNDS (an N x N
 * image, rows extended with slack as direct_2d's ring has them); prints the
 * median and lowest of the rounds and whether the two outputs have the
 * same bits. SKYFIND_SIMD=avx2 takes the AVX2 + FMA builds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void old_conv2d_band(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb, int dbl, float *out, size_t ostride);
void new_conv2d_band(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb, int dbl, float *out, size_t ostride);
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return (x>y)-(x<y);}
int main(int argc,char**argv){
  int nx=argc>1?atoi(argv[1]):2048, ny=nx, kx=argc>2?atoi(argv[2]):15, ky=argc>3?atoi(argv[3]):kx, reps=argc>4?atoi(argv[4]):5;
  int dbl=kx*ky>225;
  int nxv=(nx+63)/64*64; size_t rw=nxv+kx-1+64;
  float *E=aligned_alloc(64,sizeof(float)*rw*(ny+ky-1+8));
  srand(1); for(size_t i=0;i<rw*(ny+ky-1+8);i++) E[i]=(rand()/(float)RAND_MAX-0.5f)*((i%97)?1:1e-30f);
  float *wf=malloc(sizeof(float)*kx*ky); for(int i=0;i<kx*ky;i++) wf[i]=rand()/(float)RAND_MAX/(kx*ky);
  float *o[2]; o[0]=aligned_alloc(64,sizeof(float)*nx*(size_t)ny); o[1]=aligned_alloc(64,sizeof(float)*nx*(size_t)ny);
  const float *rows[80];
  double t[2][64];
  for(int rep=0;rep<reps;rep++) for(int v=0;v<2;v++){
      double t0=now();
      for(int y0=0;y0<ny;y0+=8){int rb=ny-y0<8?ny-y0:8; for(int j=0;j<rb+ky-1;j++) rows[j]=E+(size_t)(y0+j)*rw;
        (v?new_conv2d_band:old_conv2d_band)(rows,wf,kx,ky,nx,rb,dbl,o[v]+(size_t)y0*nx,nx);}
      t[v][rep]=now()-t0;
  }
  qsort(t[0],reps,sizeof(double),cmpd); qsort(t[1],reps,sizeof(double),cmpd);
  printf("%dx%d k%dx%d old %.2f (%.2f) new %.2f (%.2f) ms median (lowest)  %s\n",nx,ny,kx,ky,t[0][reps/2],t[0][0],t[1][reps/2],t[1][0],
    !memcmp(o[0],o[1],sizeof(float)*nx*(size_t)ny)?"same bits":"DIFFER");
  return 0;
}
