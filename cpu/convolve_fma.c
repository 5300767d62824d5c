/* The general 2-D direct convolution's band sums (convolve_fma.h): an
 * AVX-512 build, an AVX2 + FMA build and a scalar fmaf() build of the same
 * chains, picked by sf_simd_level.
 *
 * The vector builds keep a step's input vectors in registers: for each of
 * the band's input rows, the KX shifted vectors of a 16-column block (two
 * blocks for KX <= 15 in AVX-512; 8 columns in AVX2) are loaded once and
 * serve every output row that reads the row (up to SF_CONV2D_RB), each
 * output row's partial a chain of KX FMAs whose weight is broadcast from
 * memory. KX is a compile-time constant there (one copy per width up to 27
 * in AVX-512 and 15 in AVX2; wider kernels take a copy that loads the input
 * at every tap). The rows' sums sit in a 64-byte aligned block in L1
 * (float, or double with dbl): unaligned, its loads and stores split cache
 * lines, which took the H200 host's 15x15 at 2048^2 from 24 to 37 ms. */
#include <math.h>
#include <string.h>
#include "simd.h"
#include "convolve_fma.h"

#if SF_SIMD_DISPATCH
#include <immintrin.h>
#endif

/* ---- scalar: fmaf(), exact wherever it runs ---------------------------- */

static void band_scalar(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb,
                        int dbl, float *out, size_t ostride)
{
    for (int r = 0; r < rb; r++) {
        float *o = out + (size_t)r * ostride;
        for (int x = 0; x < nx; x++) {
            float sf = 0.0f;
            double sd = 0.0;
            for (int kr = 0; kr < ky; kr++) {
                const float *e = rows[r + kr] + x, *w = wf + (size_t)kr * kx;
                float p = 0.0f;
                for (int t = 0; t < kx; t++)
                    p = fmaf(w[t], e[t], p);
                if (dbl)
                    sd += p;
                else
                    sf += p;
            }
            o[x] = dbl ? (float)sd : sf;
        }
    }
}

#if SF_SIMD_DISPATCH

/* Output rows [rlo, rhi] that input row jr of the band feeds (kernel row jr - r). */
#define ROW_RANGE(jr, ky, rb, rlo, rhi)                                                   \
    const int rlo = (jr) - (ky) + 1 < 0 ? 0 : (jr) - (ky) + 1, rhi = (jr) < (rb) - 1 ? (jr) : (rb) - 1

/* ---- AVX-512 --------------------------------------------------------------- */

#define T512 __attribute__((target("avx512f,fma")))

/* s (float, or double with dbl) += the 16 partials p */
static inline __attribute__((always_inline)) T512 void add16(float *sf, double *sd, int dbl,
                                                              __m512 p)
{
    if (dbl) {
        __m256 lo = _mm512_castps512_ps256(p),
               hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1));
        _mm512_storeu_pd(sd, _mm512_add_pd(_mm512_loadu_pd(sd), _mm512_cvtps_pd(lo)));
        _mm512_storeu_pd(sd + 8, _mm512_add_pd(_mm512_loadu_pd(sd + 8), _mm512_cvtps_pd(hi)));
    } else {
        _mm512_storeu_ps(sf, _mm512_add_ps(_mm512_loadu_ps(sf), p));
    }
}

/* The band's rb output rows at columns [x, x + w) from sf / sd. */
static inline __attribute__((always_inline)) void store_block(const float *sf, const double *sd,
                                                              int dbl, int rb, int w, float *out,
                                                              size_t ostride, int x)
{
    for (int r = 0; r < rb; r++) {
        float *o = out + (size_t)r * ostride + x;
        if (dbl)
            for (int i = 0; i < w; i++)
                o[i] = (float)sd[r * SF_CONV2D_VEC + i];
        else
            memcpy(o, sf + r * SF_CONV2D_VEC, (size_t)w * sizeof *o);
    }
}

/* Zero the sums of rb rows, w columns. */
static inline __attribute__((always_inline)) void zero_block(float *sf, double *sd, int dbl, int rb,
                                                             int w)
{
    for (int r = 0; r < rb; r++)
        if (dbl)
            memset(sd + r * SF_CONV2D_VEC, 0, (size_t)w * sizeof *sd);
        else
            memset(sf + r * SF_CONV2D_VEC, 0, (size_t)w * sizeof *sf);
}

/* KX a constant (kx < 0: the runtime width -kx, the input loaded at every tap). */
static inline __attribute__((always_inline)) T512 void
band512_body(const float *const *rows, const float *wf, const int KX, const int NB, int kx, int ky,
             int nx, int rb, int dbl, float *out, size_t ostride)
{
    const int n = KX > 0 ? KX : kx;
    _Alignas(64) float sf[SF_CONV2D_RB * SF_CONV2D_VEC];
    _Alignas(64) double sd[SF_CONV2D_RB * SF_CONV2D_VEC];
    for (int x = 0; x < nx; x += 16 * NB) {
        zero_block(sf, sd, dbl, rb, 16 * NB);
        for (int jr = 0; jr < rb + ky - 1; jr++) {
            const float *e = rows[jr] + x;
            ROW_RANGE(jr, ky, rb, rlo, rhi);
            if (KX > 0) {
                __m512 v[2][KX > 0 ? KX : 1];
#pragma GCC unroll 32
                for (int t = 0; t < KX; t++)
                    for (int c = 0; c < NB; c++)
                        v[c][t] = _mm512_loadu_ps(e + 16 * c + t);
                int r = rlo;
                if (NB == 1) /* two output rows' chains side by side (21x21 at 2048^2 on
                              * the VM: 36 against 39-47 ms one at a time) */
                    for (; r < rhi; r += 2) {
                        const float *w0 = wf + (size_t)(jr - r) * KX, *w1 = w0 - KX;
                        __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();
#pragma GCC unroll 32
                        for (int t = 0; t < KX; t++) {
                            p0 = _mm512_fmadd_ps(_mm512_set1_ps(w0[t]), v[0][t], p0);
                            p1 = _mm512_fmadd_ps(_mm512_set1_ps(w1[t]), v[0][t], p1);
                        }
                        add16(sf + r * SF_CONV2D_VEC, sd + r * SF_CONV2D_VEC, dbl, p0);
                        add16(sf + (r + 1) * SF_CONV2D_VEC, sd + (r + 1) * SF_CONV2D_VEC, dbl, p1);
                    }
                for (; r <= rhi; r++) {
                    const float *w = wf + (size_t)(jr - r) * KX;
                    __m512 p[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
#pragma GCC unroll 32
                    for (int t = 0; t < KX; t++) {
                        const __m512 wt = _mm512_set1_ps(w[t]);
                        for (int c = 0; c < NB; c++)
                            p[c] = _mm512_fmadd_ps(wt, v[c][t], p[c]);
                    }
                    for (int c = 0; c < NB; c++)
                        add16(sf + r * SF_CONV2D_VEC + 16 * c, sd + r * SF_CONV2D_VEC + 16 * c, dbl,
                              p[c]);
                }
            } else {
                for (int r = rlo; r <= rhi; r++) {
                    const float *w = wf + (size_t)(jr - r) * n;
                    __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();
                    for (int t = 0; t < n; t++) {
                        const __m512 wt = _mm512_set1_ps(w[t]);
                        p0 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(e + t), p0);
                        p1 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(e + 16 + t), p1);
                    }
                    add16(sf + r * SF_CONV2D_VEC, sd + r * SF_CONV2D_VEC, dbl, p0);
                    add16(sf + r * SF_CONV2D_VEC + 16, sd + r * SF_CONV2D_VEC + 16, dbl, p1);
                }
            }
        }
        store_block(sf, sd, dbl, rb, nx - x < 16 * NB ? nx - x : 16 * NB, out, ostride, x);
    }
}

#define KX_1_13(F) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13)
#define KX_1_15(F) KX_1_13(F) F(14) F(15)
#define KX_16_27(F) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23) F(24) F(25) F(26) F(27)

static T512 void band512(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb,
                         int dbl, float *out, size_t ostride)
{
    switch (kx) {
#define CASE2(K) case K: band512_body(rows, wf, K, 2, kx, ky, nx, rb, dbl, out, ostride); return;
#define CASE1(K) case K: band512_body(rows, wf, K, 1, kx, ky, nx, rb, dbl, out, ostride); return;
        KX_1_15(CASE2)
        KX_16_27(CASE1)
#undef CASE1
#undef CASE2
    default:
        band512_body(rows, wf, 0, 2, kx, ky, nx, rb, dbl, out, ostride);
    }
}

/* ---- AVX2 + FMA ------------------------------------------------------------ */

#define T256 __attribute__((target("avx2,fma")))

static inline __attribute__((always_inline)) T256 void add8(float *sf, double *sd, int dbl, __m256 p)
{
    if (dbl) {
        _mm256_storeu_pd(sd, _mm256_add_pd(_mm256_loadu_pd(sd),
                                           _mm256_cvtps_pd(_mm256_castps256_ps128(p))));
        _mm256_storeu_pd(sd + 4, _mm256_add_pd(_mm256_loadu_pd(sd + 4),
                                               _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1))));
    } else {
        _mm256_storeu_ps(sf, _mm256_add_ps(_mm256_loadu_ps(sf), p));
    }
}

static inline __attribute__((always_inline)) T256 void
band256_body(const float *const *rows, const float *wf, const int KX, int kx, int ky, int nx,
             int rb, int dbl, float *out, size_t ostride)
{
    const int n = KX > 0 ? KX : kx;
    _Alignas(64) float sf[SF_CONV2D_RB * SF_CONV2D_VEC];
    _Alignas(64) double sd[SF_CONV2D_RB * SF_CONV2D_VEC];
    for (int x = 0; x < nx; x += 8) {
        zero_block(sf, sd, dbl, rb, 8);
        for (int jr = 0; jr < rb + ky - 1; jr++) {
            const float *e = rows[jr] + x;
            ROW_RANGE(jr, ky, rb, rlo, rhi);
            if (KX > 0) {
                __m256 v[KX > 0 ? KX : 1];
#pragma GCC unroll 16
                for (int t = 0; t < KX; t++)
                    v[t] = _mm256_loadu_ps(e + t);
                for (int r = rlo; r <= rhi; r++) {
                    const float *w = wf + (size_t)(jr - r) * KX;
                    __m256 p = _mm256_setzero_ps();
#pragma GCC unroll 16
                    for (int t = 0; t < KX; t++)
                        p = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), v[t], p);
                    add8(sf + r * SF_CONV2D_VEC, sd + r * SF_CONV2D_VEC, dbl, p);
                }
            } else {
                for (int r = rlo; r <= rhi; r++) {
                    const float *w = wf + (size_t)(jr - r) * n;
                    __m256 p = _mm256_setzero_ps();
                    for (int t = 0; t < n; t++)
                        p = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), _mm256_loadu_ps(e + t), p);
                    add8(sf + r * SF_CONV2D_VEC, sd + r * SF_CONV2D_VEC, dbl, p);
                }
            }
        }
        store_block(sf, sd, dbl, rb, nx - x < 8 ? nx - x : 8, out, ostride, x);
    }
}

static T256 void band256(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb,
                         int dbl, float *out, size_t ostride)
{
    switch (kx) {
#define CASE(K) case K: band256_body(rows, wf, K, kx, ky, nx, rb, dbl, out, ostride); return;
        KX_1_15(CASE)
#undef CASE
    default:
        band256_body(rows, wf, 0, kx, ky, nx, rb, dbl, out, ostride);
    }
}
#endif /* SF_SIMD_DISPATCH */

void sf_conv2d_band(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb,
                    int dbl, float *out, size_t ostride)
{
#if SF_SIMD_DISPATCH
    int level = sf_simd_level();
    if (level >= SF_SIMD_AVX512) {
        band512(rows, wf, kx, ky, nx, rb, dbl, out, ostride);
        return;
    }
    if (level >= SF_SIMD_AVX2_FMA) {
        band256(rows, wf, kx, ky, nx, rb, dbl, out, ostride);
        return;
    }
#endif
    band_scalar(rows, wf, kx, ky, nx, rb, dbl, out, ostride);
}
