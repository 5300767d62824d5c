/* The general 2-D direct convolution's band sums (convolve_fma.h): an
 * AVX-512 build, an AVX2 + FMA build and a scalar fmaf() build of the same
 * chains, picked by sf_simd_level.
 *
 * The vector builds take a band's input rows one at a time; each feeds up
 * to SF_CONV2D_RB output rows, whose partials (each a chain of kx FMAs over
 * the row's taps, the weight broadcast from memory) are computed four rows
 * side by side, then two, then one, over SF_CONV2D_VEC columns in AVX-512
 * (four vectors) and 16 in AVX2 (two): many independent chains, so the FMA
 * units are not left waiting on one chain's latency. The input vectors are
 * loaded at each tap (L1 hits), the same loads for every row of a group.
 * The width is a runtime loop, unrolled by four: with nothing held in
 * registers across taps, a copy per width (up to 27, as the schedule before
 * this one had) ran no faster on the H200 host and took a minute to compile
 * (tests/bench/RESULTS.md, stop 57, call F). The rows' sums sit in a 64-byte
 * aligned block in L1 (float, or double with dbl): unaligned, its loads and
 * stores split cache lines, which took the H200 host's 15x15 at 2048^2 from
 * 24 to 37 ms. */
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

/* A band kernel's body (band512, band256): W columns a step, each input
 * row's output rows [rlo, rhi] four at a time, then two, then one, by CHAINS
 * (chains512 or chains256); each row's partials are added in kernel-row
 * order, so the sums are those of convolve_fma.h whatever the grouping. */
#define BAND_BODY(CHAINS, W)                                                                  \
    _Alignas(64) float sf[SF_CONV2D_RB * SF_CONV2D_VEC];                                      \
    _Alignas(64) double sd[SF_CONV2D_RB * SF_CONV2D_VEC];                                     \
    for (int x = 0; x < nx; x += (W)) {                                                       \
        zero_block(sf, sd, dbl, rb, (W));                                                     \
        for (int jr = 0; jr < rb + ky - 1; jr++) {                                            \
            const float *e = rows[jr] + x;                                                    \
            ROW_RANGE(jr, ky, rb, rlo, rhi);                                                  \
            int r = rlo;                                                                      \
            for (; r + 3 <= rhi; r += 4)                                                      \
                CHAINS(e, wf + (size_t)(jr - r) * kx, kx, 4, sf + r * SF_CONV2D_VEC,        \
                       sd + r * SF_CONV2D_VEC, dbl);                                          \
            if (r + 1 <= rhi) {                                                               \
                CHAINS(e, wf + (size_t)(jr - r) * kx, kx, 2, sf + r * SF_CONV2D_VEC,        \
                       sd + r * SF_CONV2D_VEC, dbl);                                          \
                r += 2;                                                                       \
            }                                                                                 \
            if (r <= rhi)                                                                     \
                CHAINS(e, wf + (size_t)(jr - r) * kx, kx, 1, sf + r * SF_CONV2D_VEC,        \
                       sd + r * SF_CONV2D_VEC, dbl);                                          \
        }                                                                                     \
        store_block(sf, sd, dbl, rb, nx - x < (W) ? nx - x : (W), out, ostride, x);          \
    }

/* ---- AVX-512 --------------------------------------------------------------- */

#define T512 __attribute__((target("avx512f,fma")))
#define NB512 (SF_CONV2D_VEC / 16) /* blocks of 16 columns a step */

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

/* R <= 4 output rows' chains side by side (rows r0 .. r0 + R - 1 read
 * kernel rows jr - r0 down to jr - r0 - R + 1: weights w0, w0 - n, ...),
 * each over NB512 blocks of 16 columns: up to 16 independent chains, which
 * share each tap's input vectors (loaded from the input row e) and each
 * weight's broadcast. The chains of one row alone wait on each FMA's
 * latency: that schedule (the input vectors held in registers, the rows one
 * or two at a time) took 1.3-1.5x this one's time for 15x15 and about 2x for
 * 31x31 on the H200 host (tests/bench/RESULTS.md, stop 57, calls D and F). */
static inline __attribute__((always_inline)) T512 void
chains512(const float *e, const float *w0, int n, const int R, float *sf, double *sd, int dbl)
{
    __m512 p[4][NB512];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB512; c++)
            p[r][c] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < n; t++) {
        __m512 v[NB512];
#pragma GCC unroll 4
        for (int c = 0; c < NB512; c++)
            v[c] = _mm512_loadu_ps(e + 16 * c + t);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 wt = _mm512_set1_ps(w0[t - (ptrdiff_t)r * n]);
#pragma GCC unroll 4
            for (int c = 0; c < NB512; c++)
                p[r][c] = _mm512_fmadd_ps(wt, v[c], p[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB512; c++)
            add16(sf + r * SF_CONV2D_VEC + 16 * c, sd + r * SF_CONV2D_VEC + 16 * c, dbl, p[r][c]);
}

static T512 void band512(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb,
                         int dbl, float *out, size_t ostride)
{
    BAND_BODY(chains512, 16 * NB512)
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

/* chains512's schedule in AVX2 + FMA: R <= 4 rows' chains over two blocks
 * of 8 columns (16 registers: 8 sums, 2 inputs, a weight). */
static inline __attribute__((always_inline)) T256 void
chains256(const float *e, const float *w0, int n, const int R, float *sf, double *sd, int dbl)
{
    __m256 p[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        p[r][0] = p[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < n; t++) {
        const __m256 v0 = _mm256_loadu_ps(e + t), v1 = _mm256_loadu_ps(e + 8 + t);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 wt = _mm256_set1_ps(w0[t - (ptrdiff_t)r * n]);
            p[r][0] = _mm256_fmadd_ps(wt, v0, p[r][0]);
            p[r][1] = _mm256_fmadd_ps(wt, v1, p[r][1]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        add8(sf + r * SF_CONV2D_VEC, sd + r * SF_CONV2D_VEC, dbl, p[r][0]);
        add8(sf + r * SF_CONV2D_VEC + 8, sd + r * SF_CONV2D_VEC + 8, dbl, p[r][1]);
    }
}

static T256 void band256(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb,
                         int dbl, float *out, size_t ostride)
{
    BAND_BODY(chains256, 16)
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
