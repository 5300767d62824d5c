/* Stage `background`, CPU twin. method=global: iterative kappa-sigma clipping
 * around the median to convergence, exactly as the GPU-programming lesson's
 * numpy code (median of the current set, population std, keep
 * median - k*std < v < median + k*std, stop when nothing is clipped).
 * Bounds are formed in float32 as numpy does with float32 data. The file:
 * the parameters' defaults and checks; the global clipping's passes and
 * sf_background_cpu (which hands mesh and bane to their files); last, the
 * CPU runner's view of local maps before they are made (sf_bkg_view: BANE's
 * grid or the mesh's interpolation, one pixel or the rows). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "skyfind/background.h"
#include "fixsum.h"
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <pthread.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "background_mesh.h"
#include "background_bane.h"
#include "background_global.h"
#include "select.h"
#include "simd.h"
#include "wallclock.h"
#if SF_SIMD_DISPATCH
#include <immintrin.h> /* full_chunk_avx8, edge_chunk_avx8 */
#endif

void sf_bkg_params_default(sf_bkg_params *p)
{
    p->method = SF_BKG_GLOBAL;
    p->kappa = 3.0;
    p->maxiter = 100;
    p->box = 64;
    p->step = SF_BANE_STEP_NOBEAM;
    p->filter = 3;
    p->estimator = SF_BKG_EST_SEXTRACTOR;
    p->interp = SF_BKG_INTERP_BICUBIC;
    p->min_valid = 0.5;
}

void sf_bkg_resolve_auto(sf_bkg_params *p, double bmaj_pix, double bmin_pix)
{
    if (p->method == SF_BKG_BANE) {
        double b = bmin_pix > 0 ? sqrt(bmaj_pix * bmin_pix) : bmaj_pix;
        if (p->step == 0)
            p->step = b > 0 ? (int)ceil(SF_BANE_STEP_BEAMS * b - 1e-9) : SF_BANE_STEP_NOBEAM;
        if (p->box == 0)
            p->box = SF_BANE_BOX_STEPS * p->step;
    } else if (p->box == 0) {
        p->box = bmaj_pix > 0 ? (int)lround(4.0 * bmaj_pix) : 64;
    }
    if (p->box < 1)
        p->box = 1;
}

sf_status sf_bkg_check_params(const sf_bkg_params *p)
{
    if (p->method != SF_BKG_GLOBAL && p->method != SF_BKG_MESH && p->method != SF_BKG_BANE)
        return sf_fail(SF_ERR_PARAM, "background method %d is not available", p->method);
    if (!(p->kappa > 0) || !isfinite(p->kappa))
        return sf_fail(SF_ERR_PARAM, "background kappa %g must be a positive number", p->kappa);
    if (p->maxiter < 1)
        return sf_fail(SF_ERR_PARAM, "background maxiter %d must be at least 1", p->maxiter);
    if (p->method == SF_BKG_MESH)
        return sf_bkg_mesh_check_params(p);
    if (p->method == SF_BKG_BANE) {
        if (p->box < 1)
            return sf_fail(SF_ERR_PARAM, "background box %d must be at least 1 pixel", p->box);
        if (p->step < 1)
            return sf_fail(SF_ERR_PARAM, "background step %d must be at least 1 pixel", p->step);
    }
    return SF_OK;
}

/* method=global follows the plan of src/calc/background_global.h: FULL
 * passes over the image in BKG_CHUNKS fixed pixel ranges (each with its own
 * region of window and edge values and its own partial sums, added in
 * chunk order), EDGE iterations over the regions only, and the median read
 * from the window's keys (sf_fkey), binned by value once per FULL pass and
 * a bin sorted where a rank falls, or, when it
 * is not in the window, selected among the image's kept values by
 * sf_select_radix (select.c).
 *
 * In this file, in order: the parameters (defaults, beam-based auto sizes,
 * checks); method=global's work records and row runs; keep and the FULL
 * pass (full_run_body: a row run's SSE2 and scalar rule; full_chunk; its
 * AVX2 copy full_chunk_avx8 with its permutation tables; full_pass, which
 * picks one), the EDGE pass in the same shape (edge_values, edge_chunk,
 * edge_chunk_avx8, edge_pass) and sum_parts; the median's helpers
 * (select_image, the radix pass and sort (sf_radix_sort_keys of select.c
 * for few keys), the window's bins and window_key, first_window from the
 * sampled pixels, whose three ranks sf_select_key_ranks selects);
 * sf_background_cpu, which runs the plan and dispatches
 * method=mesh and method=bane to their files. */
#define BKG_CHUNKS 64
#define BKG_BINS 2048

/* SKYFIND_BKG_PROFILE=1 (a developer knob): method=global's phases' wall
 * times on stderr (work space, first window with its gather and ranks, FULL
 * passes, EDGE passes, the window's sorts, the image selections, the
 * constant maps). */
enum { BP_SPACE, BP_FIRST, BP_FULL, BP_EDGE, BP_SORT, BP_SELECT, BP_MAPS, BP_N };

typedef struct { /* one chunk's share of a FULL or an EDGE pass */
    size_t n, below, wwin, ecnt, rlo, rhi; /* EDGE: n, below = clipped low, high */
    double s, s2;
    float mn, mx;
} bkg_part;

typedef struct {
    const sf_image *img;
    size_t n, cap;          /* pixels; values one chunk's region may keep */
    float *reg;             /* [BKG_CHUNKS * cap] */
    size_t efill[BKG_CHUNKS]; /* edge values kept at the end of each region */
    bkg_part part[BKG_CHUNKS];
    size_t wwin[BKG_CHUNKS]; /* window values in each region */
    uint32_t *wkeys, *wtmp; /* the window's keys, by bins (or sorted); wkcap of each */
    size_t wkcap, *cnt;     /* cnt: nth * BKG_BINS counters of the sort and the bins */
    float wlo, whi;         /* the last FULL pass's window */
    size_t wboff[BKG_BINS + 1]; /* each bin's first key in wkeys (wnb bins) */
    unsigned char wbsorted[BKG_BINS]; /* whether a bin's keys are sorted yet */
    int nth, wsorted, wnb;  /* wsorted: the window is binned (wnb > 0) or sorted (wnb 0) */
    double t_gather, t_ranks; /* SKYFIND_BKG_PROFILE: the first window's gather and ranks */
} bkg_ctx;

/* Pixels [i, end) of chunk rows: the run starting at raster index i, at
 * most to the end of its row, in *len. */
static inline const float *run_at(const sf_image *im, size_t i, size_t end, size_t *len)
{
    size_t y = i / (size_t)im->nx, x = i % (size_t)im->nx, l = (size_t)im->nx - x;
    *len = l < end - i ? l : end - i;
    return im->data + y * im->stride + x;
}

static inline size_t chunk_start(const bkg_ctx *c, int k) { return c->n * (size_t)k / BKG_CHUNKS; }

/* Value v into a region of top + 1 values, branch-free: window values (cw)
 * fill it from its start, edge values (ce) from its end, and every value
 * looked at is written to the next free slot of both ends (so a region
 * holds top values; the counts go on past a full one, which sum_parts
 * reports as an overflow). */
static inline void keep(float *reg, size_t top, bkg_part *pt, float v, size_t cw, size_t ce)
{
    reg[pt->wwin < top ? pt->wwin : top] = v;
    reg[top - (pt->ecnt < top ? pt->ecnt : top)] = v;
    pt->wwin += cw;
    pt->ecnt += ce;
}

/* One kept value into lane j of a chunk's partial (the scalar path of
 * full_pass; the SSE2 path does the same per lane, in the same order). */
#define FULL_ONE(v, j)                                                                   \
    do {                                                                                 \
        const float v_ = (v);                                                            \
        const int in_ = v_ > lo && v_ < hi; /* also false for NaN and infinities */     \
        const double d_ = in_ ? (double)v_ - sh : 0.0;                                   \
        q[j] += d_;                                                                      \
        q2[j] += d_ * d_;                                                                \
        pt.n += (size_t)in_;                                                             \
        pt.mn = in_ && v_ < pt.mn ? v_ : pt.mn;                                          \
        pt.mx = in_ && v_ > pt.mx ? v_ : pt.mx;                                          \
        pt.below += (size_t)(in_ && v_ < wlo);                                           \
        keep(reg, top, &pt, v_, (size_t)(in_ && v_ >= wlo && v_ <= whi),                 \
             (size_t)(in_ && !(v_ >= wlo && v_ <= whi) && (v_ <= elo || v_ >= ehi)));     \
    } while (0)

#ifdef __SSE2__
/* The four lanes' minimum and maximum of kept values into pt (lane 0 first). */
static inline void lanes_minmax(bkg_part *pt, __m128 mn, __m128 mx)
{
    float f[4];
    _mm_storeu_ps(f, mn);
    for (int j = 0; j < 4; j++)
        pt->mn = f[j] < pt->mn ? f[j] : pt->mn;
    _mm_storeu_ps(f, mx);
    for (int j = 0; j < 4; j++)
        pt->mx = f[j] > pt->mx ? f[j] : pt->mx;
}
#endif

/* Pixels x .. len-1 of a row run p (x a multiple of 4) into a chunk's
 * partial *ptp, lane sums q and q2 and region reg: four at a time (SSE2),
 * then one by one (FULL_ONE). */
SF_SIMD_BODY void full_run_body(bkg_part *ptp, double *q, double *q2, float *reg, size_t top,
                               const float *p, size_t x, size_t len, float lo, float hi, double sh,
                               float wlo, float whi, float elo, float ehi)
{
    bkg_part pt = *ptp;
    {
#ifdef __SSE2__
        {
            const __m128 LO = _mm_set1_ps(lo), HI = _mm_set1_ps(hi), WLO = _mm_set1_ps(wlo),
                         WHI = _mm_set1_ps(whi), ELO = _mm_set1_ps(elo), EHI = _mm_set1_ps(ehi),
                         PINF = _mm_set1_ps(INFINITY), NINF = _mm_set1_ps(-INFINITY);
            const __m128d SH = _mm_set1_pd(sh);
            __m128d a0 = _mm_setr_pd(q[0], q[1]), a1 = _mm_setr_pd(q[2], q[3]);
            __m128d b0 = _mm_setr_pd(q2[0], q2[1]), b1 = _mm_setr_pd(q2[2], q2[3]);
            __m128 mn = _mm_set1_ps(pt.mn), mx = _mm_set1_ps(pt.mx);
            __m128i cnt = _mm_setzero_si128(), blw = _mm_setzero_si128();
            for (; x + 4 <= len; x += 4) {
                const __m128 v = _mm_loadu_ps(p + x);
                const __m128 in = _mm_and_ps(_mm_cmpgt_ps(v, LO), _mm_cmplt_ps(v, HI));
                const __m128d d0 = _mm_and_pd(_mm_sub_pd(_mm_cvtps_pd(v), SH),
                                              _mm_castps_pd(_mm_unpacklo_ps(in, in)));
                const __m128d d1 = _mm_and_pd(_mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(v, v)), SH),
                                              _mm_castps_pd(_mm_unpackhi_ps(in, in)));
                a0 = _mm_add_pd(a0, d0);
                a1 = _mm_add_pd(a1, d1);
                b0 = _mm_add_pd(b0, _mm_mul_pd(d0, d0));
                b1 = _mm_add_pd(b1, _mm_mul_pd(d1, d1));
                cnt = _mm_sub_epi32(cnt, _mm_castps_si128(in));
                mn = _mm_min_ps(mn, _mm_or_ps(_mm_and_ps(in, v), _mm_andnot_ps(in, PINF)));
                mx = _mm_max_ps(mx, _mm_or_ps(_mm_and_ps(in, v), _mm_andnot_ps(in, NINF)));
                blw = _mm_sub_epi32(blw, _mm_castps_si128(_mm_and_ps(in, _mm_cmplt_ps(v, WLO))));
                {
                    const __m128 win = _mm_and_ps(_mm_cmpge_ps(v, WLO), _mm_cmple_ps(v, WHI));
                    const __m128 col = _mm_and_ps(
                        in, _mm_or_ps(win, _mm_or_ps(_mm_cmple_ps(v, ELO), _mm_cmpge_ps(v, EHI))));
                    const int cm = _mm_movemask_ps(col), wm = _mm_movemask_ps(win);
                    for (int j = 0; j < 4; j++)
                        keep(reg, top, &pt, p[x + j], (size_t)(cm & wm) >> j & 1,
                             (size_t)(cm & ~wm) >> j & 1);
                }
            }
            {
                int32_t u[4];
                _mm_storeu_pd(q, a0);
                _mm_storeu_pd(q + 2, a1);
                _mm_storeu_pd(q2, b0);
                _mm_storeu_pd(q2 + 2, b1);
                _mm_storeu_si128((__m128i *)u, cnt);
                pt.n += (size_t)(uint32_t)u[0] + (uint32_t)u[1] + (uint32_t)u[2] + (uint32_t)u[3];
                _mm_storeu_si128((__m128i *)u, blw);
                pt.below += (size_t)(uint32_t)u[0] + (uint32_t)u[1] + (uint32_t)u[2] + (uint32_t)u[3];
                lanes_minmax(&pt, mn, mx);
            }
        }
#endif
        for (; x < len; x++)
            FULL_ONE(p[x], x & 3);
    }
    *ptp = pt;
}

/* FULL pass: the kept values lo < v < hi of every chunk (sums of v - shift
 * in four lanes, value x of a row run in lane x % 4), the count below the
 * window, and the window's [wlo, whi] and the edges' (v <= elo or v >= ehi)
 * values copied into the chunk's region. A chunk at a time (both builds,
 * simd.h). */
SF_SIMD_BODY void full_chunk_body(bkg_ctx *c, int k, float lo, float hi, double sh, float wlo,
                                 float whi, float elo, float ehi)
{
    const size_t top = c->cap - 1;
    bkg_part pt = {0, 0, 0, 0, 0, 0, 0, 0, INFINITY, -INFINITY};
    double q[4] = {0, 0, 0, 0}, q2[4] = {0, 0, 0, 0};
    float *reg = c->reg + (size_t)k * c->cap;
    size_t len, end = chunk_start(c, k + 1);
    for (size_t i = chunk_start(c, k); i < end; i += len) {
        const float *p = run_at(c->img, i, end, &len);
        full_run_body(&pt, q, q2, reg, top, p, 0, len, lo, hi, sh, wlo, whi, elo, ehi);
    }
    pt.s = (q[0] + q[1]) + (q[2] + q[3]);
    pt.s2 = (q2[0] + q2[1]) + (q2[2] + q2[3]);
    c->part[k] = pt;
    c->efill[k] = pt.ecnt;
    c->wwin[k] = pt.wwin;
}
SF_SIMD_KERNEL_VOID(full_chunk,
               (bkg_ctx *c, int k, float lo, float hi, double sh, float wlo, float whi, float elo,
                float ehi),
               (c, k, lo, hi, sh, wlo, whi, elo, ehi))

#if SF_SIMD_DISPATCH
/* full_chunk with eight pixels a step (AVX2, no FMA), for a CPU that has
 * it: the same bits as full_chunk_body's SSE2 loop, which it follows lane
 * for lane. The sums keep their four double lanes (pixel x of a run in lane
 * x % 4: an 8-step adds its first four, then its last four), the minimum
 * and maximum their four float lanes updated in the same order, the counts
 * are integers; the window's and the edges' values go to the region by a
 * permutation each (the window's packed in scan order from its start, the
 * edges' reversed, to the end's next slots downwards, as keep() places them
 * one by one) where the region has room for both stores, else one by one
 * through keep(). The tail of a run (fewer than 8 pixels) takes
 * full_chunk_body's SSE2 step and scalar rule. keep() puts a value in
 * every looked-at slot; the slots past the counts are never read. */
static int32_t bkg_pack[256][8], bkg_rpack[256][8];
static pthread_once_t bkg_pack_once = PTHREAD_ONCE_INIT;

static void bkg_pack_init(void)
{
    for (int m = 0; m < 256; m++) {
        int n = 0;
        for (int j = 0; j < 8; j++)
            bkg_pack[m][j] = bkg_rpack[m][j] = 0;
        for (int j = 0; j < 8; j++)
            if (m >> j & 1) {
                bkg_pack[m][n] = j;      /* n-th set lane first */
                bkg_rpack[m][7 - n] = j; /* ... last */
                n++;
            }
    }
}

__attribute__((target("avx2"))) static void full_chunk_avx8(bkg_ctx *c, int k, float lo, float hi,
                                                            double sh, float wlo, float whi,
                                                            float elo, float ehi)
{
    const size_t top = c->cap - 1;
    bkg_part pt = {0, 0, 0, 0, 0, 0, 0, 0, INFINITY, -INFINITY};
    double q[4] = {0, 0, 0, 0}, q2[4] = {0, 0, 0, 0};
    float *reg = c->reg + (size_t)k * c->cap;
    size_t len, end = chunk_start(c, k + 1);
    const __m256 LO = _mm256_set1_ps(lo), HI = _mm256_set1_ps(hi), WLO = _mm256_set1_ps(wlo),
                 WHI = _mm256_set1_ps(whi), ELO = _mm256_set1_ps(elo), EHI = _mm256_set1_ps(ehi);
    const __m128 PINF = _mm_set1_ps(INFINITY), NINF = _mm_set1_ps(-INFINITY);
    const __m256d SH = _mm256_set1_pd(sh);
    for (size_t i = chunk_start(c, k); i < end; i += len) {
        const float *p = run_at(c->img, i, end, &len);
        size_t x = 0;
        __m256d A = _mm256_loadu_pd(q), B = _mm256_loadu_pd(q2);
        __m128 mn = _mm_set1_ps(pt.mn), mx = _mm_set1_ps(pt.mx);
        size_t n8 = 0, b8 = 0;
        for (; x + 8 <= len; x += 8) {
            const __m256 v = _mm256_loadu_ps(p + x);
            const __m256 in = _mm256_and_ps(_mm256_cmp_ps(v, LO, _CMP_GT_OQ),
                                            _mm256_cmp_ps(v, HI, _CMP_LT_OQ));
            const __m128 v0 = _mm256_castps256_ps128(v), v1 = _mm256_extractf128_ps(v, 1);
            const __m128 i0 = _mm256_castps256_ps128(in), i1 = _mm256_extractf128_ps(in, 1);
            const __m256d d0 = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(v0), SH),
                                             _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_castps_si128(i0))));
            const __m256d d1 = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(v1), SH),
                                             _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_castps_si128(i1))));
            A = _mm256_add_pd(A, d0);
            B = _mm256_add_pd(B, _mm256_mul_pd(d0, d0));
            A = _mm256_add_pd(A, d1);
            B = _mm256_add_pd(B, _mm256_mul_pd(d1, d1));
            mn = _mm_min_ps(mn, _mm_or_ps(_mm_and_ps(i0, v0), _mm_andnot_ps(i0, PINF)));
            mx = _mm_max_ps(mx, _mm_or_ps(_mm_and_ps(i0, v0), _mm_andnot_ps(i0, NINF)));
            mn = _mm_min_ps(mn, _mm_or_ps(_mm_and_ps(i1, v1), _mm_andnot_ps(i1, PINF)));
            mx = _mm_max_ps(mx, _mm_or_ps(_mm_and_ps(i1, v1), _mm_andnot_ps(i1, NINF)));
            {
                const int im = _mm256_movemask_ps(in);
                const int bm = im & _mm256_movemask_ps(_mm256_cmp_ps(v, WLO, _CMP_LT_OQ));
                const __m256 win = _mm256_and_ps(_mm256_cmp_ps(v, WLO, _CMP_GE_OQ),
                                                 _mm256_cmp_ps(v, WHI, _CMP_LE_OQ));
                const int wm = _mm256_movemask_ps(win);
                const int em = im & ~wm &
                               _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(v, ELO, _CMP_LE_OQ),
                                                               _mm256_cmp_ps(v, EHI, _CMP_GE_OQ)));
                const int cw = im & wm;
                n8 += (size_t)__builtin_popcount((unsigned)im);
                b8 += (size_t)__builtin_popcount((unsigned)bm);
                if (pt.wwin + pt.ecnt + 16 <= top) { /* room for both stores: no branch on the masks */
                    _mm256_storeu_ps(reg + pt.wwin,
                                     _mm256_permutevar8x32_ps(
                                         v, _mm256_loadu_si256((const __m256i *)bkg_pack[cw])));
                    _mm256_storeu_ps(reg + top - pt.ecnt - 7,
                                     _mm256_permutevar8x32_ps(
                                         v, _mm256_loadu_si256((const __m256i *)bkg_rpack[em])));
                    pt.wwin += (size_t)__builtin_popcount((unsigned)cw);
                    pt.ecnt += (size_t)__builtin_popcount((unsigned)em);
                } else {
                    for (int j = 0; j < 8; j++)
                        keep(reg, top, &pt, p[x + j], (size_t)(cw >> j & 1), (size_t)(em >> j & 1));
                }
            }
        }
        pt.n += n8;
        pt.below += b8;
        _mm256_storeu_pd(q, A);
        _mm256_storeu_pd(q2, B);
        lanes_minmax(&pt, mn, mx);
        /* the run's last len % 8 pixels: full_chunk_body's steps of 4, then its scalar rule */
        full_run_body(&pt, q, q2, reg, top, p, x, len, lo, hi, sh, wlo, whi, elo, ehi);
    }
    pt.s = (q[0] + q[1]) + (q[2] + q[3]);
    pt.s2 = (q2[0] + q2[1]) + (q2[2] + q2[3]);
    c->part[k] = pt;
    c->efill[k] = pt.ecnt;
    c->wwin[k] = pt.wwin;
}
#endif

static void full_pass(bkg_ctx *c, float lo, float hi, float shift, float wlo, float whi, float elo,
                      float ehi)
{
#if SF_SIMD_DISPATCH
    if (sf_simd_avx2()) {
        pthread_once(&bkg_pack_once, bkg_pack_init);
#pragma omp parallel for schedule(static) num_threads(c->nth)
        for (int k = 0; k < BKG_CHUNKS; k++)
            full_chunk_avx8(c, k, lo, hi, (double)shift, wlo, whi, elo, ehi);
        c->wsorted = 0;
        c->wlo = wlo;
        c->whi = whi;
        return;
    }
#endif
#pragma omp parallel for schedule(static) num_threads(c->nth)
    for (int k = 0; k < BKG_CHUNKS; k++)
        full_chunk(c, k, lo, hi, (double)shift, wlo, whi, elo, ehi);
    c->wsorted = 0;
    c->wlo = wlo;
    c->whi = whi;
}
#undef FULL_ONE

/* The EDGE rule for values i .. n-1 of a chunk's region (value i in lane
 * i % 4 of q and q2; cnt: clipped low, clipped high, left low, left high),
 * branch-free; then the chunk's partial from the lanes and counts. */
static inline void edge_values(const float *reg, size_t i, size_t n, double *q, double *q2,
                               size_t *cnt, float lo, float hi, double sh, float elo, float ehi)
{
    for (; i < n; i++) {
        const float v = reg[i];
        const int low = v <= elo, high = v >= ehi; /* bitwise: no branches */
        const int cl1 = low & (v <= lo), ch1 = high & (v >= hi);
        const double m = (double)(cl1 | ch1), d = ((double)v - sh) * m;
        q[i & 3] += d;
        q2[i & 3] += d * d;
        cnt[0] += (size_t)cl1;
        cnt[1] += (size_t)ch1;
        cnt[2] += (size_t)(low & !cl1);
        cnt[3] += (size_t)(high & !ch1);
    }
}

static inline void edge_part(bkg_ctx *c, int k, const double *q, const double *q2, const size_t *cnt)
{
    bkg_part pt = {0, 0, 0, 0, 0, 0, 0, 0, INFINITY, -INFINITY};
    pt.s = (q[0] + q[1]) + (q[2] + q[3]);
    pt.s2 = (q2[0] + q2[1]) + (q2[2] + q2[3]);
    pt.n = cnt[0];
    pt.below = cnt[1];
    pt.rlo = cnt[2];
    pt.rhi = cnt[3];
    c->part[k] = pt;
}

/* EDGE pass: in every region, the edge values now clipped (v <= lo below,
 * v >= hi above), their sums shifted by the FULL pass's shift, and the edge
 * values left on either side. A chunk at a time (both builds, simd.h). */
SF_SIMD_BODY void edge_chunk_body(bkg_ctx *c, int k, float lo, float hi, double sh, float elo,
                                 float ehi)
{
    double q[4] = {0, 0, 0, 0}, q2[4] = {0, 0, 0, 0};
    size_t cnt[4] = {0, 0, 0, 0};
    edge_values(c->reg + (size_t)(k + 1) * c->cap - c->efill[k], 0, c->efill[k], q, q2, cnt, lo,
                hi, sh, elo, ehi);
    edge_part(c, k, q, q2, cnt);
}
SF_SIMD_KERNEL_VOID(edge_chunk,
               (bkg_ctx *c, int k, float lo, float hi, double sh, float elo, float ehi),
               (c, k, lo, hi, sh, elo, ehi))

#if SF_SIMD_DISPATCH
/* edge_chunk with eight values a step (AVX2, no FMA): value i in double
 * lane i % 4 (a step adds its first four, then its last four), each term
 * ((double)v - sh) * m with m = 1 or 0 as edge_chunk_body forms it, so the
 * same sums; the counts are integers. The last len % 8 values one by one,
 * as there. */
__attribute__((target("avx2"))) static void edge_chunk_avx8(bkg_ctx *c, int k, float lo, float hi,
                                                            double sh, float elo, float ehi)
{
    const float *reg = c->reg + (size_t)(k + 1) * c->cap - c->efill[k];
    const size_t n = c->efill[k];
    double q[4], q2[4];
    size_t cnt[4] = {0, 0, 0, 0}, i = 0;
    const __m256 LO = _mm256_set1_ps(lo), HI = _mm256_set1_ps(hi), ELO = _mm256_set1_ps(elo),
                 EHI = _mm256_set1_ps(ehi);
    const __m256d SH = _mm256_set1_pd(sh), ONE = _mm256_set1_pd(1.0);
    __m256d A = _mm256_setzero_pd(), B = _mm256_setzero_pd();
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(reg + i);
        const __m256 low = _mm256_cmp_ps(v, ELO, _CMP_LE_OQ), high = _mm256_cmp_ps(v, EHI, _CMP_GE_OQ);
        const __m256 cl1 = _mm256_and_ps(low, _mm256_cmp_ps(v, LO, _CMP_LE_OQ));
        const __m256 ch1 = _mm256_and_ps(high, _mm256_cmp_ps(v, HI, _CMP_GE_OQ));
        const __m256 cut = _mm256_or_ps(cl1, ch1);
        const __m128 c0 = _mm256_castps256_ps128(cut), c1 = _mm256_extractf128_ps(cut, 1);
        const __m256d m0 = _mm256_and_pd(_mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_castps_si128(c0))), ONE);
        const __m256d m1 = _mm256_and_pd(_mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_castps_si128(c1))), ONE);
        const __m256d d0 = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), SH), m0);
        const __m256d d1 = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), SH), m1);
        const int lm = _mm256_movemask_ps(low), hm = _mm256_movemask_ps(high),
                  clm = _mm256_movemask_ps(cl1), chm = _mm256_movemask_ps(ch1);
        A = _mm256_add_pd(A, d0);
        B = _mm256_add_pd(B, _mm256_mul_pd(d0, d0));
        A = _mm256_add_pd(A, d1);
        B = _mm256_add_pd(B, _mm256_mul_pd(d1, d1));
        cnt[0] += (size_t)__builtin_popcount((unsigned)clm);
        cnt[1] += (size_t)__builtin_popcount((unsigned)chm);
        cnt[2] += (size_t)__builtin_popcount((unsigned)(lm & ~clm));
        cnt[3] += (size_t)__builtin_popcount((unsigned)(hm & ~chm));
    }
    _mm256_storeu_pd(q, A);
    _mm256_storeu_pd(q2, B);
    edge_values(reg, i, n, q, q2, cnt, lo, hi, sh, elo, ehi); /* the last n % 8 */
    edge_part(c, k, q, q2, cnt);
}
#endif

static void edge_pass(bkg_ctx *c, float lo, float hi, float shift, float elo, float ehi)
{
#if SF_SIMD_DISPATCH
    if (sf_simd_avx2()) {
#pragma omp parallel for schedule(static) num_threads(c->nth)
        for (int k = 0; k < BKG_CHUNKS; k++)
            edge_chunk_avx8(c, k, lo, hi, (double)shift, elo, ehi);
        return;
    }
#endif
#pragma omp parallel for schedule(static) num_threads(c->nth)
    for (int k = 0; k < BKG_CHUNKS; k++)
        edge_chunk(c, k, lo, hi, (double)shift, elo, ehi);
}

/* The chunks' partials added in chunk order. */
static bkg_part sum_parts(const bkg_ctx *c, int *over)
{
    bkg_part t = {0, 0, 0, 0, 0, 0, 0, 0, INFINITY, -INFINITY};
    *over = 0;
    for (int k = 0; k < BKG_CHUNKS; k++) {
        const bkg_part *p = &c->part[k];
        t.n += p->n;
        t.below += p->below;
        t.wwin += p->wwin;
        t.rlo += p->rlo;
        t.rhi += p->rhi;
        t.s += p->s;
        t.s2 += p->s2;
        t.mn = p->mn < t.mn ? p->mn : t.mn;
        t.mx = p->mx > t.mx ? p->mx : t.mx;
        *over |= p->wwin + p->ecnt > c->cap - 1;
    }
    return t;
}

/* The median's two middle values, ranks nn/2 - 1 (*v0; nn/2 itself when nn is
 * odd) and nn/2 (*v1), among the image's nn kept values (lo < v < hi), when
 * the median is not in the window: the kept values copied out and selected
 * by sf_select_radix (select.c). -1 without memory. */
static int select_image(const bkg_ctx *c, float lo, float hi, size_t nn, float *v0, float *v1)
{
    float *a = malloc(nn * sizeof *a);
    size_t m = 0, len;
    if (!a)
        return -1;
    for (size_t i = 0; i < c->n; i += len) {
        const float *p = run_at(c->img, i, c->n, &len);
        for (size_t x = 0; x < len; x++)
            if (p[x] > lo && p[x] < hi && m < nn)
                a[m++] = p[x];
    }
    *v1 = sf_select_radix(a, m, nn / 2, nn % 2 ? NULL : v0);
    if (nn % 2)
        *v0 = *v1;
    free(a);
    return 0;
}

/* One stable pass of an LSD radix sort: src -> dst by the digit
 * (key >> shift) & mask, in nth contiguous parts (cnt: nth * BKG_BINS). */
static void radix_pass(const uint32_t *src, uint32_t *dst, size_t n, int shift, uint32_t mask, int nth,
                       size_t *cnt)
{
    memset(cnt, 0, (size_t)nth * BKG_BINS * sizeof *cnt);
#pragma omp parallel num_threads(nth)
    {
        int t = 0, team = 1; /* the team may be smaller than asked: its size decides the parts */
#ifdef _OPENMP
        t = omp_get_thread_num();
        team = omp_get_num_threads();
#endif
        size_t *c = cnt + (size_t)t * BKG_BINS;
        const size_t i0 = n * (size_t)t / (size_t)team, i1 = n * (size_t)(t + 1) / (size_t)team;
        for (size_t i = i0; i < i1; i++)
            c[(src[i] >> shift) & mask]++;
#pragma omp barrier
#pragma omp single
        {
            size_t run = 0;
            for (uint32_t d = 0; d <= mask; d++)
                for (int u = 0; u < team; u++) {
                    size_t k = cnt[(size_t)u * BKG_BINS + d];
                    cnt[(size_t)u * BKG_BINS + d] = run;
                    run += k;
                }
        }
        for (size_t i = i0; i < i1; i++)
            dst[c[(src[i] >> shift) & mask]++] = src[i];
    }
}

/* radix_sort on the calling thread (fewer than RADIX_SERIAL_MAX keys, or one
 * thread): sf_radix_sort_keys (select.c). On the H200 host's 16 threads the
 * parallel passes' cleared count arrays and their serial prefix took
 * longer than the work for the first window's 65536 samples (the sort
 * 1.1-1.3 ms at 16 threads, 0.9-1.0 ms at one; tests/bench/RESULTS.md,
 * calls V and W). */
#define RADIX_SERIAL_MAX ((size_t)1 << 17)
/* The n keys a sorted into b, by three radix passes (11, 11 and 10 bits)
 * through both buffers (a is left holding the second pass's order); a few
 * keys on the calling thread. */
static void radix_sort(uint32_t *a, uint32_t *b, size_t n, int nth, size_t *cnt)
{
    if (n < RADIX_SERIAL_MAX || (nth == 1 && n <= UINT32_MAX)) { /* 32-bit counters */
        sf_radix_sort_keys(a, b, n);
        return;
    }
    radix_pass(a, b, n, 0, 2047u, nth, cnt);
    radix_pass(b, a, n, 11, 2047u, nth, cnt);
    radix_pass(a, b, n, 22, 1023u, nth, cnt);
}

/* The window's values by value, for the median's ranks (once per FULL
 * pass; the EDGE iterations after it ask the same window for other ranks).
 * Its keys (sf_fkey) are placed bin by bin into c->wkeys: wnb bins of equal
 * width between the window's bounds ((v - wlo) * scale in double, rounded
 * down and clamped: monotone in v, so the bins are in value order, and -0
 * and +0 share one), a count and a placement by the threads, each over the
 * same chunks in both; a bin's keys are sorted only when a rank falls in it
 * (window_key). The window is narrow (SF_BKG_WINDOW sigma) and its values
 * nearly evenly spread, so a bin holds a few dozen; the key at a rank is
 * the sorted window's whatever the bins, as the radix sort of every key
 * (three passes of the whole window) gave it before, at a third of the
 * memory traffic. A window whose bounds are not finite keeps that sort. */
static int sort_window(bkg_ctx *c, size_t wtotal)
{
    size_t off[BKG_CHUNKS + 1];
    const double span = (double)c->whi - (double)c->wlo;
    int nb = 16;
    double scale;
    if (c->wsorted)
        return 0;
    if (wtotal > c->wkcap) {
        free(c->wkeys);
        free(c->wtmp);
        c->wkeys = malloc(wtotal * sizeof *c->wkeys);
        c->wtmp = malloc(wtotal * sizeof *c->wtmp);
        c->wkcap = c->wkeys && c->wtmp ? wtotal : 0;
        if (!c->wkcap)
            return -1;
    }
    off[0] = 0;
    for (int k = 0; k < BKG_CHUNKS; k++)
        off[k + 1] = off[k] + c->wwin[k];
    while (nb < BKG_BINS && (size_t)nb * 32 < wtotal)
        nb <<= 1;
    scale = (nb - 1) / span;
    if (!(span > 0.0) || !isfinite(span) || !(scale > 0.0) || !isfinite(scale)) {
#pragma omp parallel for schedule(static) num_threads(c->nth)
        for (int k = 0; k < BKG_CHUNKS; k++) {
            const float *reg = c->reg + (size_t)k * c->cap;
            uint32_t *o = c->wtmp + off[k];
            for (size_t i = 0; i < c->wwin[k]; i++)
                o[i] = sf_fkey(reg[i]);
        }
        radix_sort(c->wtmp, c->wkeys, wtotal, c->nth, c->cnt);
        c->wnb = 0;
        c->wsorted = 1;
        return 0;
    }
    memset(c->cnt, 0, (size_t)c->nth * BKG_BINS * sizeof *c->cnt);
#pragma omp parallel num_threads(c->nth)
    {
        int t = 0, team = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        team = omp_get_num_threads();
#endif
        size_t *h = c->cnt + (size_t)t * BKG_BINS;
        const double wlo = (double)c->wlo;
        const int top = nb - 1;
        /* the same contiguous chunks a thread in both loops */
        const int k0 = BKG_CHUNKS * t / team, k1 = BKG_CHUNKS * (t + 1) / team;
        for (int k = k0; k < k1; k++) {
            const float *reg = c->reg + (size_t)k * c->cap;
            uint16_t *bn = (uint16_t *)(c->wtmp + off[k]); /* the bins, in the scratch */
            for (size_t i = 0; i < c->wwin[k]; i++) {
                const double d = ((double)reg[i] - wlo) * scale;
                const int b = d <= 0.0 ? 0 : (d >= (double)top ? top : (int)d);
                bn[i] = (uint16_t)b;
                h[b]++;
            }
        }
#pragma omp barrier
#pragma omp single
        {
            size_t run = 0;
            for (int d = 0; d < nb; d++) {
                c->wboff[d] = run;
                for (int u = 0; u < team; u++) {
                    const size_t n = c->cnt[(size_t)u * BKG_BINS + d];
                    c->cnt[(size_t)u * BKG_BINS + d] = run;
                    run += n;
                }
            }
            c->wboff[nb] = run;
        }
        for (int k = k0; k < k1; k++) {
            const float *reg = c->reg + (size_t)k * c->cap;
            const uint16_t *bn = (const uint16_t *)(c->wtmp + off[k]);
            for (size_t i = 0; i < c->wwin[k]; i++)
                c->wkeys[h[bn[i]]++] = sf_fkey(reg[i]);
        }
    }
    memset(c->wbsorted, 0, (size_t)nb);
    c->wnb = nb;
    c->wsorted = 1;
    return 0;
}

static int key_cmp(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The window's key at rank j (0-based, sf_fkey order) after sort_window:
 * the bin that holds rank j, its keys sorted the first time one is asked
 * for. */
static uint32_t window_key(bkg_ctx *c, size_t j)
{
    int lo = 0, hi = c->wnb - 1;
    if (!c->wnb)
        return c->wkeys[j];
    while (lo < hi) { /* the last bin starting at or before j */
        const int mid = (lo + hi + 1) / 2;
        if (c->wboff[mid] <= j)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (!c->wbsorted[lo]) {
        uint32_t *k = c->wkeys + c->wboff[lo];
        const size_t n = c->wboff[lo + 1] - c->wboff[lo];
        if (n > 4096) { /* a crowded bin (values piled on a few levels) */
            radix_sort(k, c->wtmp, n, c->nth, c->cnt);
            memcpy(k, c->wtmp, n * sizeof *k);
        } else {
            qsort(k, n, sizeof *k, key_cmp);
        }
        c->wbsorted[lo] = 1;
    }
    return c->wkeys[j];
}

/* The first pass's window, [*a, *b], and edges, (-inf, *elo] and
 * [*ehi, inf), from m >= 256 finite pixels sampled at a fixed step
 * (background_global.h); 0 when the image has too few. The samples are
 * gathered by the threads (a load from memory each, which one thread waits
 * for in turn) and the three ranks selected from their keys
 * (sf_select_key_ranks; three quickselects, or radix selections with their
 * 256 KB of counts each, took one thread 2-3 ms at 4096^2, and the sort of
 * every key 0.7-1.1 ms). */
static int first_window(bkg_ctx *c, float kappa, float *a, float *b, float *elo, float *ehi)
{
    const sf_image *img = c->img;
    const size_t n = c->n, step = sf_bkg_sample_step(n);
    const size_t ns = n > step / 2 ? (n - step / 2 - 1) / step + 1 : 0;
    size_t m = 0, ka, kb;
    uint32_t rk[3];
    double q = 0, q2 = 0, t0 = sf_wall_ms(), t1;
    float ms;
    float *smp = malloc((ns + 1) * sizeof *smp);
    uint32_t *key = malloc(2 * (ns + 1) * sizeof *key);
    if (!smp || !key) {
        free(smp);
        free(key);
        return 0;
    }
#pragma omp parallel for schedule(static) num_threads(c->nth) if (ns >= 4096)
    for (size_t j = 0; j < ns; j++) {
        const size_t i = step / 2 + j * step;
        smp[j] = img->data[i / (size_t)img->nx * img->stride + i % (size_t)img->nx];
    }
    for (size_t j = 0; j < ns; j++)
        if (isfinite(smp[j])) {
            key[m] = sf_fkey(smp[j]);
            smp[m++] = smp[j];
        }
    if (m < 256) {
        free(smp);
        free(key);
        return 0;
    }
    t1 = sf_wall_ms();
    c->t_gather = t1 - t0;
    sf_bkg_first_ranks(m, &ka, &kb);
    {
        const size_t ks[3] = {ka, m / 2, kb};
        sf_select_key_ranks(key, key + m, m, ks, 3, rk);
    }
    c->t_ranks = sf_wall_ms() - t1;
    ms = sf_fkey_value(rk[1]);
    for (size_t i = 0; i < m; i++) {
        const double d = (double)smp[i] - ms;
        q += d;
        q2 += d * d;
    }
    sf_bkg_first_edges(ms, sf_bkg_first_sigma(q, q2, m), kappa, elo, ehi);
    *a = sf_fkey_value(rk[0]);
    *b = sf_fkey_value(rk[2]);
    free(smp);
    free(key);
    return 1;
}

sf_status sf_background_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                            sf_image *bkg, sf_image *rms)
{
    sf_status s = sf_bkg_check_params(p);
    size_t n = sf_npix(img->nx, img->ny);
    unsigned long long nprev = 0;
    bkg_ctx *c = NULL;
    sf_bkg_stats r;
    const float kf = (float)p->kappa, wfac = sf_bkg_window_factor();
    const int edges_on = sf_bkg_edges_on();
    sf_bkg_plan pl;
    float cmin = 0.0f; /* the last FULL pass's smallest value (constant data) */
    const int prof = getenv("SKYFIND_BKG_PROFILE") != NULL;
    double bp[BP_N] = {0}, bt = 0;
    int nfull = 0, nedge = 0;
#define BKG_T0() (bt = prof ? sf_wall_ms() : 0)
#define BKG_T1(k) (bp[k] += prof ? sf_wall_ms() - bt : 0)

    if (s)
        return s;
    if (p->method == SF_BKG_MESH)
        return sf_background_mesh_cpu(img, p, st, bkg, rms);
    if (p->method == SF_BKG_BANE)
        return sf_background_bane_cpu(img, p, st, bkg, rms);
    if (img->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs a host image");
    memset(&r, 0, sizeof r);
    BKG_T0();
    c = calloc(1, sizeof *c);
    if (c) {
        c->img = img;
        c->n = n;
        c->nth = 1;
#ifdef _OPENMP
        c->nth = omp_get_max_threads();
#endif
        c->cap = n / BKG_CHUNKS / 4 + 1024;
        c->reg = malloc(BKG_CHUNKS * c->cap * sizeof *c->reg);
        c->cnt = malloc((size_t)c->nth * BKG_BINS * sizeof *c->cnt);
    }
    if (!c || !c->reg || !c->cnt) {
        s = sf_fail(SF_ERR_NOMEM, "background: %zu bytes of work space", n * sizeof(float));
        goto fail;
    }
    BKG_T1(BP_SPACE);
    sf_bkg_plan_init(&pl);
    for (int it = 1;; it++) {
        unsigned long long nn = 0, below = 0;
        double sum = 0, ss = 0, dn, dm, var;
        float shift = 0.0f, m0, m1, med;
        int constant = 0, edge = sf_bkg_plan_edge(&pl), over;
        if (edge) { /* only the edge values near the bounds */
            bkg_part t;
            BKG_T0();
            edge_pass(c, pl.lo, pl.hi, pl.bshift, pl.elo, pl.ehi);
            BKG_T1(BP_EDGE);
            nedge++;
            t = sum_parts(c, &over);
            if (t.rlo == 0 || t.rhi == 0) {
                edge = 0; /* one side has no edge value left: count it all again */
            } else {
                sf_bkg_plan_edge_sums(&pl, t.n, t.below, t.s, t.s2, &nn, &below, &sum, &ss);
                shift = pl.bshift;
            }
        }
        if (!edge) { /* the whole image */
            float first[4], wlo, whi, elo, ehi;
            int sampled;
            BKG_T0();
            sampled = it == 1 && wfac != 0.0f &&
                      first_window(c, kf, &first[0], &first[1], &first[2], &first[3]);
            BKG_T1(BP_FIRST);
            const int edges = sf_bkg_plan_ranges(&pl, it, sampled ? first : NULL, wfac, edges_on,
                                                 &wlo, &whi, &elo, &ehi);
            bkg_part t;
            shift = it == 1 ? sf_bkg_first_shift(img->data[(size_t)(img->ny / 2) * img->stride +
                                                           (size_t)(img->nx / 2)])
                            : pl.med;
            BKG_T0();
            full_pass(c, pl.lo, pl.hi, shift, wlo, whi, elo, ehi);
            BKG_T1(BP_FULL);
            nfull++;
            t = sum_parts(c, &over);
            nn = t.n;
            below = t.below;
            sum = t.s;
            ss = t.s2;
            constant = t.mn == t.mx; /* sigma is then exactly 0 */
            cmin = t.mn;
            sf_bkg_plan_full(&pl, nn, below, sum, ss, shift, t.wwin, over, edges, elo, ehi);
            if (it == 1)
                r.nvalid = (long long)nn;
        }
        if (nn == 0) {
            s = sf_fail(SF_ERR_EMPTY, it == 1 ? "background: the image has no finite pixels"
                                              : "background: clipping removed every pixel (sigma is 0?)");
            goto fail;
        }
        if (it > 1 && nn == nprev) { /* the last iteration clipped nothing */
            r.converged = 1;
            break;
        }
        if (it > p->maxiter)
            break;
        dn = (double)nn;
        dm = sum / dn;
        var = ss / dn - dm * dm;
        r.mean = constant ? (double)cmin : (double)shift + dm;
        r.sigma = constant ? 0.0 : (double)(float)sqrt(var > 0 ? var : 0.0);
        { /* the median: ranks (nn - 1) / 2 and nn / 2, in the window when it holds them */
            const unsigned long long r0 = (nn - 1) / 2, r1 = nn / 2;
            int window;
            BKG_T0();
            window = sf_bkg_plan_in_window(&pl, below, r0, r1) && sort_window(c, pl.wtotal) == 0;
            BKG_T1(BP_SORT);
            BKG_T0();
            if (window) {
                m0 = sf_fkey_value(window_key(c, r0 - below));
                m1 = sf_fkey_value(window_key(c, r1 - below));
            } else if (select_image(c, pl.lo, pl.hi, nn, &m0, &m1)) {
                s = sf_fail(SF_ERR_NOMEM, "background: %llu floats to select the median from", nn);
                goto fail;
            }
            BKG_T1(BP_SELECT);
            if (m1 == 0.0f)
                m1 = 0.0f; /* -0 and +0: +0 */
            /* numpy: the middle, or the float32 mean of the two middle values */
            med = nn % 2 ? m1 : sf_mean2_f32(m0, m1);
            r.median = med;
            r.nused = (long long)nn;
            r.niter = it;
            nprev = nn;
            if ((float)r.sigma == 0.0f) { /* constant data: nothing left to clip */
                r.converged = 1;
                break;
            }
            sf_bkg_plan_next(&pl, it, med, (float)r.sigma, kf, window);
        }
    }
    r.npasses = pl.nfull;
    BKG_T0();
    if (bkg || rms) {
        for (size_t i = 0; i < n; i++) {
            if (bkg)
                bkg->data[i] = (float)r.median;
            if (rms)
                rms->data[i] = (float)r.sigma;
        }
    }
    BKG_T1(BP_MAPS);
    if (prof)
        fprintf(stderr,
                "background profile: %d threads, %dx%d: work space %.2f ms, first window %.2f ms "
                "(gather %.2f, ranks %.2f), %d FULL passes %.2f ms, %d EDGE passes %.2f ms, window sorts %.2f ms, "
                "selections %.2f ms, maps %.2f ms\n",
                c->nth, img->nx, img->ny, bp[BP_SPACE], bp[BP_FIRST], c->t_gather, c->t_ranks,
                nfull, bp[BP_FULL], nedge,
                bp[BP_EDGE], bp[BP_SORT], bp[BP_SELECT], bp[BP_MAPS]);
#undef BKG_T0
#undef BKG_T1
    *st = r;
fail:
    if (c) {
        free(c->reg);
        free(c->cnt);
        free(c->wkeys);
        free(c->wtmp);
    }
    free(c);
    return s;
}

/* ---- the CPU runner's maps before they are made (sf_bkg_view) ----------- */
struct sf_bkg_view {
    sf_image img;              /* the image the maps belong to (its NaN) */
    int nan;                   /* it has non-finite pixels */
    int bane;                  /* method=bane: grid; else mesh */
    sf_bane_grid grid;
    sf_bkg_mesh_interp *mesh;
};

sf_status sf_background_view_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                                 sf_bkg_view **view)
{
    sf_status s = sf_bkg_check_params(p);
    sf_bkg_view *v;
    *view = NULL;
    if (s)
        return s;
    if (p->method != SF_BKG_MESH && p->method != SF_BKG_BANE)
        return sf_fail(SF_ERR_PARAM, "background: method=global has no maps to view");
    if (img->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs a host image");
    if (!(v = calloc(1, sizeof *v)))
        return sf_fail(SF_ERR_NOMEM, "background: a view of the maps");
    v->img = *img;
    v->bane = p->method == SF_BKG_BANE;
    s = v->bane ? sf_background_bane_grid_cpu(img, p, st, &v->grid)
                : sf_background_mesh_interp_cpu(img, p, st, &v->mesh);
    if (s) {
        free(v);
        return s;
    }
    v->nan = st->nvalid < (long long)sf_npix(img->nx, img->ny);
    *view = v;
    return SF_OK;
}

float sf_bkg_view_at(const sf_bkg_view *v, int r, int x, int y)
{
    if (v->nan && isnan(v->img.data[(size_t)y * v->img.stride + x])) /* both maps' rule */
        return NAN;
    return v->bane ? sf_bane_grid_at(&v->grid, r ? v->grid.rms : v->grid.level, x, y)
                   : sf_bkg_mesh_interp_at(v->mesh, r, x, y);
}

sf_status sf_bkg_view_rows(const sf_bkg_view *v, sf_image *bkg, sf_image *rms, int level_only,
                           sf_bkg_row_fn row_fn, void *ctx)
{
    level_only = level_only && !bkg;
    return v->bane ? sf_bane_maps_cpu(&v->img, &v->grid, bkg, rms, level_only, row_fn, ctx)
                   : sf_bkg_mesh_interp_rows(v->mesh, &v->img, bkg, rms, level_only, row_fn, ctx);
}

void sf_bkg_view_free(sf_bkg_view *v)
{
    if (!v)
        return;
    if (v->bane)
        sf_bane_grid_free_cpu(&v->grid);
    else
        sf_bkg_mesh_interp_free(v->mesh);
    free(v);
}
