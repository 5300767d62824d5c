#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec*1e-6;}
#define RB 8
/* NB: column blocks of W_ lanes, NB of them */
#define BODY(NAME, TGT, V, W_, LOADU, SET1, FMA, ADD, ZERO, STOREU, NB)                           \
static inline __attribute__((always_inline,target(TGT))) void NAME(const float*e,int ne,const float*Wt,float*out,int nx,int ny,const int KX,int ky){ \
  for(int y0=0;y0<ny;y0+=RB){ int rb= ny-y0<RB?ny-y0:RB;                                     \
    for(int x=0;x<nx;x+=W_*NB){                                                              \
      V s[RB][NB]; for(int r=0;r<RB;r++) for(int c=0;c<NB;c++) s[r][c]=ZERO;                  \
      for(int jr=0;jr<rb+ky-1;jr++){                                                          \
        const float*er=e+(size_t)(y0+jr)*ne+x;                                                \
        V v[NB][32];                                                                          \
        _Pragma("GCC unroll 32") for(int t=0;t<KX;t++) for(int c=0;c<NB;c++) v[c][t]=LOADU(er+W_*c+t); \
        int rlo=jr-ky+1<0?0:jr-ky+1, rhi=jr<rb-1?jr:rb-1;                                     \
        for(int r=rlo;r<=rhi;r++){ const float*w=Wt+(size_t)(jr-r)*KX;                        \
          V p[NB]; for(int c=0;c<NB;c++) p[c]=ZERO;                                           \
          _Pragma("GCC unroll 32") for(int t=0;t<KX;t++){ V wb=SET1(w[t]); for(int c=0;c<NB;c++) p[c]=FMA(wb,v[c][t],p[c]);} \
          for(int c=0;c<NB;c++) s[r][c]=ADD(s[r][c],p[c]); }                                  \
      }                                                                                       \
      for(int r=0;r<rb;r++) for(int c=0;c<NB;c++) STOREU(out+(size_t)(y0+r)*nx+x+W_*c,s[r][c]); \
    }}}
BODY(b512_2,"avx512f,fma",__m512,16,_mm512_loadu_ps,_mm512_set1_ps,_mm512_fmadd_ps,_mm512_add_ps,_mm512_setzero_ps(),_mm512_storeu_ps,2)
BODY(b512_1,"avx512f,fma",__m512,16,_mm512_loadu_ps,_mm512_set1_ps,_mm512_fmadd_ps,_mm512_add_ps,_mm512_setzero_ps(),_mm512_storeu_ps,1)
BODY(b256_1,"avx2,fma",__m256,8,_mm256_loadu_ps,_mm256_set1_ps,_mm256_fmadd_ps,_mm256_add_ps,_mm256_setzero_ps(),_mm256_storeu_ps,1)
#define SW(F) switch(kx){case 3:F(e,ne,W,o,nx,ny,3,ky);break;case 5:F(e,ne,W,o,nx,ny,5,ky);break;case 7:F(e,ne,W,o,nx,ny,7,ky);break;case 9:F(e,ne,W,o,nx,ny,9,ky);break;case 13:F(e,ne,W,o,nx,ny,13,ky);break;case 15:F(e,ne,W,o,nx,ny,15,ky);break;case 21:F(e,ne,W,o,nx,ny,21,ky);break;}
__attribute__((target("avx512f,fma"))) static void w512_2(const float*e,int ne,const float*W,float*o,int nx,int ny,int kx,int ky){SW(b512_2)}
__attribute__((target("avx512f,fma"))) static void w512_1(const float*e,int ne,const float*W,float*o,int nx,int ny,int kx,int ky){SW(b512_1)}
__attribute__((target("avx2,fma"))) static void w256_1(const float*e,int ne,const float*W,float*o,int nx,int ny,int kx,int ky){SW(b256_1)}
static void ref_px(const float*e,int ne,const float*W,int kx,int ky,int x,int y,float*o){
  float s=0; for(int kr=0;kr<ky;kr++){float p=0; for(int t=0;t<kx;t++) p=fmaf(W[kr*kx+t],e[(size_t)(y+kr)*ne+x+t],p); s+=p;} *o=s;}
int main(int argc,char**argv){int n=atoi(argv[1]), kx=atoi(argv[2]), ky=kx; int ne=n+kx-1+64, nye=n+ky-1+16;
  float*e=calloc((size_t)ne*nye,4),*o=malloc((size_t)(n+16)*(n+64)*4),*W=malloc(kx*ky*4);
  srand(1); for(int y=0;y<n;y++)for(int x=0;x<n;x++) e[(size_t)(y+ky/2)*ne+x+kx/2]=(rand()/(float)RAND_MAX-0.5f);
  for(int i=0;i<kx*ky;i++){int a=i%kx-kx/2,b=i/kx-ky/2; W[i]=expf(-(a*a*0.08f+b*b*0.05f+a*b*0.02f));}
  const char*nm[]={"512x2","512x1","256x1"}; int nx=n,ny=n;
  for(int v=0;v<3;v++){ double best=1e9; for(int k=0;k<5;k++){double t0=now();
    switch(v){case 0:w512_2(e,ne,W,o,nx,ny,kx,ky);break;case 1:w512_1(e,ne,W,o,nx,ny,kx,ky);break;case 2:w256_1(e,ne,W,o,nx,ny,kx,ky);break;}
    double t=now()-t0; if(t<best)best=t;}
    int bad=0; for(int q=0;q<2000;q++){int x=rand()%n,y=rand()%n; float r; ref_px(e,ne,W,kx,ky,x,y,&r); if(memcmp(&r,&o[(size_t)y*n+x],4))bad++;}
    printf("%s k%d %.2f ms bad %d (%.3f ns/tap/px)\n",nm[v],kx,best,bad,best*1e6/((double)n*n*kx*ky));}
}
