// Stage `background`, GPU version. method=global: the lesson's kappa-sigma
// clipping around the median, without sorting the image, as planned in
// src/calc/background_global.h (FULL passes over the image, EDGE iterations
// over the values collected near the bounds, the median selected from a
// window around the last one). The whole loop is one cooperative kernel
// (grid-wide barriers between phases, no host round trips):
//   pass S (FULL): every block streams its share of the image: count, double
//       sums, extremes, the count below the window, the window's and the
//       edges' values copied into the block's region, and level 1 of the
//       radix selection (the top 11 bits of each float's order-preserving
//       key) of the window's values;
//   pass E (EDGE): every block reads its region only: the edge values now
//       clipped, their count and sums, and the edge values left;
//   levels 1 (only when the median left the window, or an image too small
//       to sample has no first window), 2 and 3 of the radix selection (11,
//       11 and 10 bits, shared-memory histograms) over the window or the
//       image.
// Every block reduces the per-block partials in the same fixed order, so
// all blocks take the same decisions and the result is deterministic. The
// first window comes from three launches before it: bkg_sample, cub's sort
// of the samples and bkg_bracket.
//
// In this file, in order: the work records (bkg_result, bkg_sums and its
// reduction, bkg_part, bkg_work, the shared memory); the profiling marks
// (SKYFIND_BKG_PROFILE); device helpers: keys, the image and window
// sources, the radix histograms (find_bin, flush, zero, hist1_add), the
// partials (combine_parts, write_part) and pass S (pass_s); the clipping
// kernel bkg_clip; the first window's kernels (bkg_sample, bkg_bracket);
// bkg_fill (the constant maps); the launchers: grid and scratch sizes,
// bkg_launch (every launch, on a given stream) and bkg_stats (the result
// record read), sf_background_gpu (the two in a row; it dispatches
// method=mesh and method=bane to their files), and sf_bkg_clip_launch and
// sf_bkg_clip_stats (the same on a caller's stream, for the noise
// clippings beside the convolution, gpu/convolve.cu).
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <cooperative_groups.h>
#include <cub/cub.cuh>
#include "common.cuh"
#include "skyfind/background.h"
#include "background_global.h"
#include "fixsum.h" // sf_fkey: order-preserving float keys

namespace cg = cooperative_groups;

#define BKG_THREADS 1024 // one block an SM: every block reads all the partials and
                         // histograms after each barrier, so few blocks read less
#define BKG_H1 2048       // bins of the first two radix levels (11 bits)
#define BKG_H3 1024       // bins of the last level (10 bits)
#define BKG_SAMPLES SF_BKG_SAMPLES // pixels sampled for the first pass's window and
                                   // edges: every n / this-th, fewer than twice this
#define BKG_SORT_TEMP (1u << 20) // cub's temporary storage for sorting them
#define BKG_SAMPLE_MIN ((size_t)1 << 23) // images with fewer pixels are not sampled: the
                                         // sort's seven launches cost more than the two
                                         // passes over the image they save (tests:
                                         // SKYFIND_BKG_SAMPLE_MIN)
#define BKG_PROF 8        // phases timed by SKYFIND_BKG_PROFILE: E pass, E sync,
                          // combine, S pass, S sync, radix passes, radix syncs, rest

struct bkg_result {
    double median, sigma, mean;
    unsigned long long n, nvalid;
    int niter, converged, error, iter, nfull;
    int grid; // the blocks it ran in (SKYFIND_BKG_PROFILE's line)
    unsigned long long prof[BKG_PROF]; // SKYFIND_BKG_PROFILE: ns in each phase, block 0
};

// The sums of a pass, added by one block-wide reduction (cub, with
// bkg_add: the same tree in every block, so every block gets the same bits).
struct bkg_sums {
    unsigned long long n, below; // S: kept, kept below the window; E: clipped low, clipped high
    unsigned long long wwin;     // S: window values
    unsigned long long rlo, rhi; // E: edge values left below and above
    unsigned long long over;     // combined: a region overflowed
    double s, s2;                // sums of v - shift of the kept (S) or clipped (E) values
    float mn, mx;                // S: the kept values' extremes
};

struct bkg_add {
    __device__ __forceinline__ bkg_sums operator()(const bkg_sums &a, const bkg_sums &b) const
    {
        bkg_sums r;
        r.n = a.n + b.n;
        r.below = a.below + b.below;
        r.wwin = a.wwin + b.wwin;
        r.rlo = a.rlo + b.rlo;
        r.rhi = a.rhi + b.rhi;
        r.over = a.over | b.over;
        r.s = a.s + b.s;
        r.s2 = a.s2 + b.s2;
        r.mn = fminf(a.mn, b.mn);
        r.mx = fmaxf(a.mx, b.mx);
        return r;
    }
};


struct bkg_part { // one block's share of pass S (FULL) or pass E (EDGE)
    bkg_sums t;
    unsigned wcnt; // S: values collected (over wcap: the region overflowed)
};

struct bkg_work {
    bkg_part *part;     // [grid]
    unsigned *h1;       // [2 * BKG_H1] level 1 of the FULL passes' sources, in turn
    unsigned *h1x;      // [BKG_H1] level 1 over the image when the median left the window
    unsigned *h2;       // [2 * BKG_H1]
    unsigned *h3;       // [2 * BKG_H3]
    float *reg;         // [grid * wcap] the blocks' window and edge values
    unsigned wcap;      // values one block may keep
    int maxiter, edges;
    float kappa, wfac;
    size_t mid;         // the middle pixel (the first shift)
    int prof;           // time the phases (block 0, thread 0; SKYFIND_BKG_PROFILE)
    const float *first; // [4] the first pass's window and edges (bkg_bracket)
    bkg_result *res;
};

typedef cub::BlockReduce<double, BKG_THREADS> DReduce;
typedef cub::BlockScan<unsigned, BKG_THREADS> UScan;

typedef cub::BlockReduce<bkg_sums, BKG_THREADS> SReduce;

struct bkg_smem {
    union {
        typename SReduce::TempStorage sums;
        typename DReduce::TempStorage d;
        typename UScan::TempStorage scan;
    } tmp;
    unsigned h[2 * BKG_H1];
    unsigned wfill, efill; // window values from the region's start, edge values from its end
    unsigned bin, rank;
    bkg_sums tot; // the block's copy of the combined partials (identical in every block)
};

// kernels

static __device__ __forceinline__ unsigned long long gtime()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// SKYFIND_BKG_PROFILE: block 0's thread 0 adds the time since the last mark
// to phase k
#define MARK(k)                                                                    \
    do {                                                                           \
        if (prof) {                                                                \
            unsigned long long t_ = gtime();                                       \
            pacc[k] += t_ - tlast;                                                 \
            tlast = t_;                                                            \
        }                                                                          \
    } while (0)

// Visit every value of v[0..n) assigned to this block's threads in a
// grid-stride loop, two 16-byte loads in flight per thread (buffers are
// 256-byte aligned).
template <typename F>
static __device__ __forceinline__ void grid_values(const float *__restrict__ v, size_t n, F f)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x, n4 = n / 4;
    const float4 *v4 = reinterpret_cast<const float4 *>(v);
    size_t i = tid;
    for (; i + stride < n4; i += 2 * stride) {
        float4 a = __ldcs(&v4[i]), b = __ldcs(&v4[i + stride]);
        f(a.x);
        f(a.y);
        f(a.z);
        f(a.w);
        f(b.x);
        f(b.y);
        f(b.z);
        f(b.w);
    }
    if (i < n4) {
        float4 a = __ldcs(&v4[i]);
        f(a.x);
        f(a.y);
        f(a.z);
        f(a.w);
    }
    for (i = n4 * 4 + tid; i < n; i += stride)
        f(v[i]);
}

// The values a radix level reads: the block's window values (the first
// fill of its region), or the kept values of the image.
template <typename F>
static __device__ __forceinline__ void source_values(const float *img, size_t n, const bkg_work &w,
                                                     bool window, unsigned fill, float lo, float hi,
                                                     F f)
{
    if (window) {
        const float *r = w.reg + (size_t)blockIdx.x * w.wcap;
        for (unsigned i = threadIdx.x; i < fill; i += blockDim.x)
            f(r[i]);
    } else {
        grid_values(img, n, [&](float v) {
            if (v > lo && v < hi) // false for NaN and infinities
                f(v);
        });
    }
}

// Block-wide: the bin of hist[0..nbins) (global memory) holding rank *r; the
// rank inside the bin is left in *r. Identical in every block.
static __device__ unsigned find_bin(const unsigned *hist, int nbins, unsigned *r, bkg_smem &sm)
{
    const int per = nbins / BKG_THREADS; // 1 or 2
    unsigned h[2], tot = 0, before;
    for (int k = 0; k < per; k++) {
        h[k] = __ldcg(&hist[threadIdx.x * per + k]);
        tot += h[k];
    }
    UScan(sm.tmp.scan).ExclusiveSum(tot, before);
    for (int k = 0; k < per; k++) {
        if (*r >= before && *r < before + h[k]) {
            sm.bin = threadIdx.x * per + k;
            sm.rank = *r - before;
        }
        before += h[k];
    }
    __syncthreads();
    unsigned b = sm.bin;
    *r = sm.rank;
    __syncthreads();
    return b;
}

// Flush a shared histogram to global memory.
static __device__ void flush_hist(const unsigned *h, unsigned *g, int nbins)
{
    __syncthreads();
    for (int i = threadIdx.x; i < nbins; i += blockDim.x)
        if (h[i])
            atomicAdd(&g[i], h[i]);
}

static __device__ void zero_smem_hist(unsigned *h, int nbins)
{
    for (int i = threadIdx.x; i < nbins; i += blockDim.x)
        h[i] = 0;
    __syncthreads();
}

// Level 1 into the shared histogram: the top 11 bits of v's key when sel
// (noise piles into few bins, so a warp adds each bin once).
static __device__ __forceinline__ void hist1_add(unsigned *h, bool sel, float v, unsigned lane)
{
    const unsigned act = __activemask();
    if (!__any_sync(act, sel))
        return;
    unsigned bin = sel ? sf_fkey(v) >> 21 : 0xFFFFFFFFu;
    unsigned peers = __match_any_sync(act, bin);
    if (sel && lane == (unsigned)(__ffs(peers) - 1))
        atomicAdd(&h[bin], (unsigned)__popc(peers));
}


// After the grid barrier, every block combines all the blocks' partials in
// the same fixed order into sm.
static __device__ void combine_parts(const bkg_work &w, bkg_smem &sm)
{
    const unsigned per = (gridDim.x + BKG_THREADS - 1) / BKG_THREADS;
    bkg_sums t = {0, 0, 0, 0, 0, 0, 0.0, 0.0, INFINITY, -INFINITY};
    for (unsigned b = threadIdx.x * per; b < (threadIdx.x + 1) * per && b < gridDim.x; b++) {
        // written by other blocks before the barrier: read past L1
        const bkg_sums *q = &w.part[b].t;
        const bkg_sums u = {__ldcg(&q->n),  __ldcg(&q->below), __ldcg(&q->wwin),
                            __ldcg(&q->rlo), __ldcg(&q->rhi),  __ldcg(&w.part[b].wcnt) > w.wcap,
                            __ldcg(&q->s),  __ldcg(&q->s2),   __ldcg(&q->mn),
                            __ldcg(&q->mx)};
        t = bkg_add()(t, u);
    }
    t = SReduce(sm.tmp.sums).Reduce(t, bkg_add());
    if (threadIdx.x == 0)
        sm.tot = t;
    __syncthreads();
}

// Reduce this block's counts and sums and write them as its partial.
static __device__ void write_part(const bkg_work &w, bkg_smem &sm, unsigned long long n,
                                  unsigned long long below, double s, double s2, float mn, float mx,
                                  unsigned wwin, unsigned rlo, unsigned rhi)
{
    bkg_sums t = {n, below, wwin, rlo, rhi, 0, s, s2, mn, mx};
    t = SReduce(sm.tmp.sums).Reduce(t, bkg_add());
    if (threadIdx.x == 0) {
        w.part[blockIdx.x].t = t;
        w.part[blockIdx.x].wcnt = sm.wfill + sm.efill;
    }
    __syncthreads();
}

// One thread's share of pass S.
struct pass_acc {
    unsigned c, cb, nw; // kept, kept below the window, in the window
    double s, s2;       // sums of v - shift and its square over the kept values
    float mn, mx;
};

// Pass S, 8 values a lane and step (two float4s, the next step's loads in
// flight while this one is counted): the counts (as bit masks, popc'd),
// the sums, the window's level-1 histogram (shared atomics: few values),
// and the window's and the edges' values copied into the block's region,
// each lane's at offsets from one warp scan of its packed counts (window |
// edges << 16) and one shared atomic a warp. The loop is warp-uniform
// (lanes past the end read NaN, which is never kept).
static __device__ __forceinline__ void pass_s(const float *__restrict__ img, size_t n,
                                              const bkg_work &w, bkg_smem &sm, float lo, float hi,
                                              float cwlo, float cwhi, float celo, float cehi,
                                              float shift, pass_acc &acc)
{
    const unsigned lane = threadIdx.x & 31;
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, warp0 = tid - lane;
    const size_t stride = (size_t)gridDim.x * blockDim.x, n4 = n / 4;
    const float4 *v4 = reinterpret_cast<const float4 *>(img);
    const float4 none = make_float4(NAN, NAN, NAN, NAN);
    const double sh = (double)shift;
    float *region = w.reg + (size_t)blockIdx.x * w.wcap;
    unsigned c = 0, cb = 0, nw = 0;
    double s = 0, s2 = 0;
    float mn = INFINITY, mx = -INFINITY;
    auto step = [&](const float (&v)[8]) {
        unsigned inb = 0, bb = 0, wb = 0, eb = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float t = v[k];
            const bool in = t > lo && t < hi; // false for NaN and infinities
            const bool win = in && t >= cwlo && t <= cwhi;
            const bool edg = in && !win && (t <= celo || t >= cehi);
            const double d = in ? (double)t - sh : 0.0;
            s += d;
            s2 = fma(d, d, s2);
            mn = fminf(mn, in ? t : INFINITY);
            mx = fmaxf(mx, in ? t : -INFINITY);
            if (win)
                atomicAdd(&sm.h[sf_fkey(t) >> 21], 1u);
            inb |= (unsigned)in << k;
            bb |= (unsigned)(in && t < cwlo) << k;
            wb |= (unsigned)win << k;
            eb |= (unsigned)edg << k;
        }
        c += (unsigned)__popc(inb);
        cb += (unsigned)__popc(bb);
        nw += (unsigned)__popc(wb);
        const unsigned cnt = (unsigned)__popc(wb) | (unsigned)__popc(eb) << 16;
        unsigned x = cnt;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(0xffffffffu, x, o);
            if (lane >= (unsigned)o)
                x += y;
        }
        const unsigned total = __shfl_sync(0xffffffffu, x, 31);
        if (total) {
            unsigned bw = 0, be = 0;
            if (lane == 31) {
                if (total & 0xFFFFu)
                    bw = atomicAdd(&sm.wfill, total & 0xFFFFu);
                if (total >> 16)
                    be = atomicAdd(&sm.efill, total >> 16);
            }
            bw = __shfl_sync(0xffffffffu, bw, 31);
            be = __shfl_sync(0xffffffffu, be, 31);
            const unsigned ex = x - cnt;
            unsigned pw = bw + (ex & 0xFFFFu), pe = be + (ex >> 16);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                if (wb >> k & 1) {
                    if (pw < w.wcap)
                        region[pw] = v[k];
                    pw++;
                }
                if (eb >> k & 1) {
                    if (pe < w.wcap)
                        region[w.wcap - 1 - pe] = v[k];
                    pe++;
                }
            }
        }
    };
    auto load = [&](size_t i0, float (&v)[8]) {
        const size_t i = i0 + lane;
        const float4 x = i < n4 ? __ldcs(&v4[i]) : none;
        const float4 y = i + stride < n4 ? __ldcs(&v4[i + stride]) : none;
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
        v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
    };
    if (warp0 < n4) {
        float v[8], nv[8];
        load(warp0, v);
        for (size_t i0 = warp0;; i0 += 2 * stride) {
            const bool more = i0 + 2 * stride < n4;
            if (more)
                load(i0 + 2 * stride, nv);
            step(v);
            if (!more)
                break;
#pragma unroll
            for (int k = 0; k < 8; k++)
                v[k] = nv[k];
        }
    }
    if (warp0 == 0 && n4 * 4 < n) { // the n % 4 values past the float4s
        float v[8];
        for (int k = 0; k < 8; k++)
            v[k] = NAN;
        if (n4 * 4 + lane < n)
            v[0] = img[n4 * 4 + lane];
        step(v);
    }
    acc = pass_acc{c, cb, nw, s, s2, mn, mx};
}

static __global__ void __launch_bounds__(BKG_THREADS, 1)
bkg_clip(const float *__restrict__ img, size_t n, bkg_work w)
{
    __shared__ bkg_smem sm;
    cg::grid_group grid = cg::this_grid();
    const unsigned lane = threadIdx.x & 31;
    sf_bkg_plan pl; // the plan's state (background_global.h), the same in every thread
    unsigned fill = 0, efill = 0; // this block's window and edge values in its region
    unsigned long long nprev = 0, nvalid = 0;
    double fmed = 0, fsig = 0, fmean = 0;
    unsigned long long fn = 0;
    int niter = 0, converged = 0, error = 0, iter;
    const bool prof = w.prof && blockIdx.x == 0 && threadIdx.x == 0;
    unsigned long long pacc[BKG_PROF] = {0, 0, 0, 0, 0, 0, 0, 0}, tlast = prof ? gtime() : 0;

    sf_bkg_plan_init(&pl);
    for (iter = 1;; iter++) {
        unsigned long long nn, below;
        double s, s2;
        float shift;
        bool constant = false, edge = sf_bkg_plan_edge(&pl);
        const float lo = pl.lo, hi = pl.hi, elo = pl.elo, ehi = pl.ehi;

        if (edge) { // ---- pass E over the block's region ------------------------------
            unsigned long long cl = 0, ch = 0;
            double q = 0, q2 = 0;
            unsigned rl = 0, rh = 0;
            const float *r = w.reg + (size_t)(blockIdx.x + 1) * w.wcap - efill;
            for (unsigned i = threadIdx.x; i < efill; i += blockDim.x) {
                float v = r[i];
                bool low = v <= elo, high = v >= ehi;
                bool cut = (low && v <= lo) || (high && v >= hi);
                if (cut) {
                    double d = (double)v - (double)pl.bshift;
                    q += d;
                    q2 += d * d;
                }
                cl += low && cut;
                ch += high && cut;
                rl += low && !cut;
                rh += high && !cut;
            }
            write_part(w, sm, cl, ch, q, q2, INFINITY, -INFINITY, 0, rl, rh);
            MARK(0);
            grid.sync();
            MARK(1);
            combine_parts(w, sm);
            MARK(2);
            if (blockIdx.x == 0)
                for (int i = threadIdx.x; i < 2 * BKG_H3; i += blockDim.x)
                    w.h3[i] = 0; // everyone read it before the barrier above
            if (sm.tot.rlo == 0 || sm.tot.rhi == 0) {
                edge = false; // one side has no edge value left: count it all again
                grid.sync();  // (after everyone has read the partials)
            } else {
                sf_bkg_plan_edge_sums(&pl, sm.tot.n, sm.tot.below, sm.tot.s, sm.tot.s2, &nn, &below,
                                      &s, &s2);
                shift = pl.bshift;
            }
        }
        if (!edge) { // ---- pass S over the image --------------------------------------
            float first[4], cwlo, cwhi, celo, cehi;
            unsigned *h1 = w.h1 + (pl.nfull & 1) * BKG_H1;
            if (iter == 1 && w.first) // the sampled pixels' window and edges (none on small images)
                for (int k = 0; k < 4; k++)
                    first[k] = __ldcg(&w.first[k]);
            const bool edges = sf_bkg_plan_ranges(&pl, iter, iter == 1 && w.first ? first : NULL,
                                                  w.wfac, w.edges, &cwlo, &cwhi, &celo, &cehi);
            shift = iter == 1 ? sf_bkg_first_shift(img[w.mid]) : pl.med;
            pass_acc a = {0, 0, 0, 0.0, 0.0, INFINITY, -INFINITY};
            if (threadIdx.x == 0)
                sm.wfill = sm.efill = 0;
            zero_smem_hist(sm.h, BKG_H1);
            MARK(7);
            pass_s(img, n, w, sm, lo, hi, cwlo, cwhi, celo, cehi, shift, a);
            flush_hist(sm.h, h1, BKG_H1);
            write_part(w, sm, a.c, a.cb, a.s, a.s2, a.mn, a.mx, a.nw, 0, 0);
            fill = sm.wfill;
            efill = sm.efill;
            MARK(3);
            grid.sync();
            MARK(4);
            combine_parts(w, sm);
            MARK(2);
            if (blockIdx.x == 0) {
                for (int i = threadIdx.x; i < 2 * BKG_H3; i += blockDim.x)
                    w.h3[i] = 0; // everyone read it before the barrier above
                for (int i = threadIdx.x; i < BKG_H1; i += blockDim.x)
                    w.h1[((pl.nfull + 1) & 1) * BKG_H1 + i] = 0; // the last FULL pass's, read before it
            }
            nn = sm.tot.n;
            below = sm.tot.below;
            s = sm.tot.s;
            s2 = sm.tot.s2;
            constant = sm.tot.mn == sm.tot.mx; // sigma is then exactly 0, as on the CPU
            sf_bkg_plan_full(&pl, nn, below, s, s2, shift, sm.tot.wwin, (int)sm.tot.over, edges,
                             celo, cehi);
        }
        __syncthreads();
        if (iter == 1)
            nvalid = nn;
        if (nn == 0) {
            error = 1; // no finite pixel, or clipping removed all
            break;
        }
        if (iter > 1 && nn == nprev) { // the last iteration clipped nothing
            converged = 1;
            break;
        }
        if (iter > w.maxiter)
            break;
        double dn = (double)nn, dm = s / dn, var = s2 / dn - dm * dm;
        const double mean = constant ? (double)sm.tot.mn : (double)shift + dm;
        const double sigma = constant ? 0.0 : (double)(float)sqrt(var > 0 ? var : 0.0);
        unsigned long long r0 = (nn - 1) / 2, r1 = nn / 2;
        // where the median is selected: in the window, unless it left it
        const bool window = sf_bkg_plan_in_window(&pl, below, r0, r1), miss = !window;
        if (window) {
            r0 -= below;
            r1 -= below;
        }
        const unsigned *l1 = w.h1 + ((pl.nfull - 1) & 1) * BKG_H1;

        // ---- radix level 1 over the image, when the median left the window ---------
        if (miss) {
            zero_smem_hist(sm.h, BKG_H1);
            source_values(img, n, w, false, fill, lo, hi,
                          [&](float v) { hist1_add(sm.h, true, v, lane); });
            flush_hist(sm.h, w.h1x, BKG_H1);
            MARK(5);
            grid.sync();
            MARK(6);
            l1 = w.h1x;
        }
        unsigned rk[2] = {(unsigned)r0, (unsigned)r1}, pre[2];
        for (int j = 0; j < 2; j++)
            pre[j] = find_bin(l1, BKG_H1, &rk[j], sm);

        // ---- radix level 2: next 11 bits -----------------------------------------
        zero_smem_hist(sm.h, 2 * BKG_H1);
        MARK(7);
        source_values(img, n, w, window, fill, lo, hi, [&](float v) {
            unsigned k = sf_fkey(v), p = k >> 21, b = (k >> 10) & 0x7FFu;
            if (p == pre[0])
                atomicAdd(&sm.h[b], 1u);
            if (p == pre[1])
                atomicAdd(&sm.h[BKG_H1 + b], 1u);
        });
        flush_hist(sm.h, w.h2, 2 * BKG_H1);
        MARK(5);
        grid.sync();
        MARK(6);
        for (int j = 0; j < 2; j++)
            pre[j] = (pre[j] << 11) | find_bin(w.h2 + j * BKG_H1, BKG_H1, &rk[j], sm);

        // ---- radix level 3: last 10 bits -----------------------------------------
        zero_smem_hist(sm.h, 2 * BKG_H3);
        MARK(7);
        source_values(img, n, w, window, fill, lo, hi, [&](float v) {
            unsigned k = sf_fkey(v), p = k >> 10, b = k & 0x3FFu;
            if (p == pre[0])
                atomicAdd(&sm.h[b], 1u);
            if (p == pre[1])
                atomicAdd(&sm.h[BKG_H3 + b], 1u);
        });
        flush_hist(sm.h, w.h3, 2 * BKG_H3);
        MARK(5);
        grid.sync();
        MARK(6);
        for (int j = 0; j < 2; j++)
            pre[j] = (pre[j] << 10) | find_bin(w.h3 + j * BKG_H3, BKG_H3, &rk[j], sm);
        if (blockIdx.x == 0) { // read by everyone before the barrier above
            for (int i = threadIdx.x; i < 2 * BKG_H1; i += blockDim.x)
                w.h2[i] = 0;
            if (miss)
                for (int i = threadIdx.x; i < BKG_H1; i += blockDim.x)
                    w.h1x[i] = 0;
        }

        // ---- the median (numpy: the middle, or the float32 mean of the two) ----
        const float m0 = sf_fkey_value(pre[0]), m1 = sf_fkey_value(pre[1]);
        const float med = (nn & 1) ? m1 : __fdiv_rn(__fadd_rn(m0, m1), 2.0f), sig = (float)sigma;
        fmed = med;
        fsig = sigma;
        fmean = mean;
        fn = nn;
        niter = iter;
        nprev = nn;
        if (sig == 0.0f) { // constant data: nothing left to clip (as the CPU twin)
            converged = 1;
            break;
        }
        sf_bkg_plan_next(&pl, iter, med, sig, w.kappa, window); // (a miss: the image next)
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        bkg_result r;
        r.median = fmed;
        r.sigma = fsig;
        r.mean = fmean;
        r.n = fn;
        r.nvalid = nvalid;
        r.niter = converged || error ? niter : w.maxiter;
        r.converged = converged;
        r.error = error;
        r.iter = iter;
        r.nfull = pl.nfull;
        r.grid = (int)gridDim.x;
        for (int k = 0; k < BKG_PROF; k++)
            r.prof[k] = pacc[k];
        *w.res = r;
    }
}

// The first pass's window and edges, as the CPU twin takes them
// (background_global.h): the keys of the finite pixels sampled every step
// (from step / 2) sorted by cub; the window is the values at ranks
// m/2 -+ 3 sqrt(m) of the m finite ones, the edges come from their median
// and standard deviation (none of either when m < 256).
static __global__ void bkg_sample(const float *__restrict__ img, size_t n, size_t step, unsigned ns,
                                  unsigned *keys)
{
    for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < ns; j += gridDim.x * blockDim.x) {
        float v = img[step / 2 + (size_t)j * step];
        keys[j] = isfinite(v) ? sf_fkey(v) : 0xFFFFFFFFu; // (no finite key is all ones)
    }
}

static __global__ void __launch_bounds__(BKG_THREADS)
bkg_bracket(const unsigned *sorted, unsigned ns, float kappa, int window, float *first)
{
    __shared__ bkg_smem sm;
    __shared__ unsigned m_sh;
    if (threadIdx.x == 0) {
        unsigned lo = 0, hi = ns; // m: the first sentinel
        while (lo < hi) {
            unsigned mid = (lo + hi) / 2;
            if (sorted[mid] == 0xFFFFFFFFu)
                hi = mid;
            else
                lo = mid + 1;
        }
        m_sh = lo;
    }
    __syncthreads();
    const size_t m = m_sh;
    if (m < 256 || !window) {
        if (threadIdx.x == 0) {
            first[0] = INFINITY;
            first[1] = -INFINITY;
            first[2] = -INFINITY;
            first[3] = INFINITY;
        }
        return;
    }
    const float ms = sf_fkey_value(sorted[m / 2]);
    double q = 0, q2 = 0;
    for (size_t i = threadIdx.x; i < m; i += blockDim.x) {
        const double d = (double)sf_fkey_value(sorted[i]) - (double)ms;
        q += d;
        q2 += d * d;
    }
    q = DReduce(sm.tmp.d).Sum(q);
    __syncthreads();
    q2 = DReduce(sm.tmp.d).Sum(q2);
    if (threadIdx.x == 0) {
        size_t ka, kb;
        sf_bkg_first_ranks(m, &ka, &kb);
        first[0] = sf_fkey_value(sorted[ka]);
        first[1] = sf_fkey_value(sorted[kb]);
        sf_bkg_first_edges(ms, sf_bkg_first_sigma(q, q2, m), kappa, &first[2], &first[3]);
    }
}

static __global__ void bkg_fill(float *bkg, float *rms, size_t n, const bkg_result *res)
{
    const float m = (float)res->median, s = (float)res->sigma;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (bkg)
            bkg[i] = m;
        if (rms)
            rms[i] = s;
    }
}

// launchers

// Blocks of the cooperative grid: all resident at once, no more than the work needs.
static int bkg_grid(size_t n, int sm_count, int per_sm)
{
    // a step of 8 values a thread at least (a 2^20-pixel image, such as
    // convolve noise=measured's rows, still takes 128 SMs: the passes are
    // bound by each SM's loads in flight)
    size_t want = (n + 8 * BKG_THREADS - 1) / (8 * BKG_THREADS);
    size_t most = (size_t)sm_count * (size_t)(per_sm < 2 ? per_sm : 2);
    return (int)(want < 1 ? 1 : want < most ? want : most);
}

static size_t bkg_wcap(size_t n, int grid) { return n / 4 / (size_t)grid + 1024; }

static size_t bkg_bytes(size_t n, int grid)
{
    return sf_align256(sizeof(bkg_result)) + sf_align256((size_t)grid * sizeof(bkg_part)) +
           sf_align256(2 * BKG_H1 * 4) + sf_align256(BKG_H1 * 4) + sf_align256(2 * BKG_H1 * 4) +
           sf_align256(2 * BKG_H3 * 4) + sf_align256((size_t)grid * bkg_wcap(n, grid) * sizeof(float)) +
           sf_align256(4 * sizeof(float)) + 2 * sf_align256(2 * BKG_SAMPLES * 4) + BKG_SORT_TEMP;
}

extern "C" size_t sf_background_mesh_gpu_scratch(int nx, int ny, const sf_bkg_params *p);
extern "C" size_t sf_background_bane_gpu_scratch(int nx, int ny, const sf_bkg_params *p);
extern "C" sf_status sf_background_mesh_gpu(sf_gpu *g, const sf_image *img,
                                            const sf_bkg_params *p, sf_bkg_stats *out,
                                            sf_image *bkg, sf_image *rms);

extern "C" size_t sf_background_gpu_scratch(int nx, int ny, const sf_bkg_params *p)
{
    // the grid is at most 132 SMs x 2 blocks on the GPUs we build for; the
    // regions need about n/4 values whatever the grid
    size_t n = sf_npix(nx, ny);
    size_t global = bkg_bytes(n, 1) + 2 * 132 * (sizeof(bkg_part) + 1024 * sizeof(float));
    size_t mesh = sf_background_mesh_gpu_scratch(nx, ny, p); // method=mesh (background_mesh.cu)
    if (p && p->method == SF_BKG_BANE) // method=bane (background_bane.cu)
        mesh = sf_background_bane_gpu_scratch(nx, ny, p);
    return global > mesh ? global : mesh;
}

extern "C" sf_status sf_bkg_check_params(const sf_bkg_params *p);
extern "C" sf_status sf_background_bane_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                            sf_bkg_stats *out, sf_image *bkg, sf_image *rms);

// The clipping's launches on stream s for an image of n contiguous pixels:
// grid blocks (bkg_grid), scratch `base` of bkg_bytes(n, grid) bytes, the
// result record left in the scratch's first bytes (w->res).
static sf_status bkg_launch(sf_gpu *g, cudaStream_t s, const sf_image *img, const sf_bkg_params *p,
                            int grid, char *base, bkg_work *wout)
{
    sf_status st = SF_OK;
    const size_t n = sf_npix(img->nx, img->ny);
    bkg_work w;
    char *q = base, *stemp;
    float *first;
    unsigned *skeys, *ssorted;
#define CARVE(ptr, type, count)                                                     \
    ptr = (type *)q;                                                                \
    q += sf_align256((size_t)(count) * sizeof(type));
    CARVE(w.res, bkg_result, 1)
    CARVE(w.part, bkg_part, grid)
    CARVE(w.h1, unsigned, 2 * BKG_H1)
    CARVE(w.h1x, unsigned, BKG_H1)
    CARVE(w.h2, unsigned, 2 * BKG_H1)
    CARVE(w.h3, unsigned, 2 * BKG_H3)
    CARVE(w.reg, float, (size_t)grid * bkg_wcap(n, grid))
    CARVE(first, float, 4)
    CARVE(skeys, unsigned, 2 * BKG_SAMPLES)
    CARVE(ssorted, unsigned, 2 * BKG_SAMPLES)
    CARVE(stemp, char, BKG_SORT_TEMP)
#undef CARVE
    w.wcap = (unsigned)bkg_wcap(n, grid);
    w.maxiter = p->maxiter;
    w.kappa = (float)p->kappa;
    w.wfac = sf_bkg_window_factor();
    w.edges = sf_bkg_edges_on();
    w.mid = (size_t)(img->ny / 2) * img->stride + (size_t)(img->nx / 2);
    w.prof = getenv("SKYFIND_BKG_PROFILE") != NULL;
    // the result record too: the kernel leaves fields unwritten (prof[]
    // without SKYFIND_BKG_PROFILE) that its download carries (initcheck)
    SF_CUDA(cudaMemsetAsync(w.res, 0, (size_t)((char *)w.reg - (char *)w.res), s));
    w.first = NULL;
    if (n >= (getenv("SKYFIND_BKG_SAMPLE_MIN") ? (size_t)atoll(getenv("SKYFIND_BKG_SAMPLE_MIN"))
                                                : BKG_SAMPLE_MIN)) { // the first window, sampled
        const size_t step = sf_bkg_sample_step(n);
        const unsigned ns = (unsigned)((n - step / 2 + step - 1) / step);
        size_t temp = 0;
        SF_CUDA(cub::DeviceRadixSort::SortKeys(NULL, temp, skeys, ssorted, (int)ns, 0, 32, s));
        if (temp > BKG_SORT_TEMP) {
            st = sf_fail(SF_ERR_CUDA, "background: cub asks %zu bytes to sort %u samples", temp, ns);
            goto fail;
        }
        bkg_sample<<<sf_blocks(ns, 256), 256, 0, s>>>(img->data, n, step, ns, skeys);
        SF_LAUNCHED();
        SF_CUDA(cub::DeviceRadixSort::SortKeys(stemp, temp, skeys, ssorted, (int)ns, 0, 32, s));
        bkg_bracket<<<1, BKG_THREADS, 0, s>>>(ssorted, ns, w.kappa, w.wfac != 0.0f, first);
        SF_LAUNCHED();
        w.first = first;
    }
    {
        const float *data = img->data;
        size_t nn = n;
        void *args[] = {(void *)&data, (void *)&nn, (void *)&w};
        SF_CUDA(cudaLaunchCooperativeKernel((const void *)bkg_clip, dim3(grid), dim3(BKG_THREADS), args,
                                            0, s));
    }
    SF_LAUNCHED();
    *wout = w;
fail:
    return st;
}

// The statistics of a result record (in host memory).
static sf_status bkg_stats(const bkg_result *r, const sf_image *img, sf_bkg_stats *out)
{
    if (r->error)
        return sf_fail(SF_ERR_EMPTY, r->iter == 1 ? "background: the image has no finite pixels"
                                                  : "background: clipping removed every pixel");
    out->median = r->median;
    out->sigma = r->sigma;
    out->mean = r->mean;
    out->nused = (long long)r->n;
    out->nvalid = (long long)r->nvalid;
    out->niter = r->niter;
    out->converged = r->converged;
    out->npasses = r->nfull;
    if (getenv("SKYFIND_BKG_PROFILE")) // the phases of block 0, for tests/gpu/floor.sh
        fprintf(stderr,
                "bkg_clip %dx%d: %d iterations, %d full passes, grid %d x %d; us: E pass %.1f, E sync "
                "%.1f, combine %.1f, S pass %.1f, S sync %.1f, radix passes %.1f, radix syncs %.1f, "
                "rest %.1f\n",
                img->nx, img->ny, r->niter, r->nfull, r->grid, BKG_THREADS, r->prof[0] / 1e3,
                r->prof[1] / 1e3, r->prof[2] / 1e3, r->prof[3] / 1e3, r->prof[4] / 1e3, r->prof[5] / 1e3,
                r->prof[6] / 1e3, r->prof[7] / 1e3);
    return SF_OK;
}

// The grid for n pixels in at most `most` blocks (0: no cap), or 0 with
// the reason set.
static int bkg_grid_for(sf_gpu *g, size_t n, int most)
{
    // blocks an SM: asked once a process (the answer depends on the kernel
    // and the architecture; every GPU of one process runs one build)
    static int per_sm_known;
    int per_sm = __atomic_load_n(&per_sm_known, __ATOMIC_RELAXED), grid;
    if (per_sm < 1) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)bkg_clip, BKG_THREADS, 0) !=
                cudaSuccess ||
            per_sm < 1) {
            cudaGetLastError();
            sf_fail(SF_ERR_CUDA, "background: the clipping kernel cannot be resident");
            return 0;
        }
        __atomic_store_n(&per_sm_known, per_sm, __ATOMIC_RELAXED);
    }
    grid = bkg_grid(n, g->sm_count, per_sm);
    return most > 0 && grid > most ? most : grid;
}

extern "C" sf_status sf_background_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                       sf_bkg_stats *out, sf_image *bkg, sf_image *rms)
{
    sf_status st = sf_bkg_check_params(p);
    size_t n = sf_npix(img->nx, img->ny);
    bkg_work w;
    bkg_result r;
    void *base = NULL;
    int grid;
    if (st)
        return st;
    if (p->method == SF_BKG_MESH)
        return sf_background_mesh_gpu(g, img, p, out, bkg, rms);
    if (p->method == SF_BKG_BANE)
        return sf_background_bane_gpu(g, img, p, out, bkg, rms);
    if (img->loc != SF_DEVICE)
        return sf_fail(SF_ERR_PARAM, "sf_background_gpu needs a device image");
    if (img->stride != (size_t)img->nx)
        return sf_fail(SF_ERR_PARAM, "sf_background_gpu needs a contiguous image");
    if (!(grid = bkg_grid_for(g, n, 0)))
        return SF_ERR_CUDA;
    SF_TRY(sf_gpu_scratch(g, bkg_bytes(n, grid), &base));
    SF_TRY(bkg_launch(g, g->stream, img, p, grid, (char *)base, &w));
    SF_TRY(sf_gpu_to_host(g, &r, w.res, sizeof r));
    SF_TRY(bkg_stats(&r, img, out));
    if (bkg || rms) {
        bkg_fill<<<sf_blocks(n, 256) < 4096 ? sf_blocks(n, 256) : 4096, 256, 0, g->stream>>>(
            bkg ? bkg->data : NULL, rms ? rms->data : NULL, n, w.res);
        SF_LAUNCHED();
    }
fail:
    return st;
}

// Two clippings side by side (common.cuh).
extern "C" size_t sf_bkg_clip_bytes(sf_gpu *g, size_t n, int most)
{
    int grid = bkg_grid_for(g, n, most);
    return grid ? bkg_bytes(n, grid) : 0;
}

extern "C" sf_status sf_bkg_clip_launch(sf_gpu *g, cudaStream_t s, const sf_image *img,
                                        const sf_bkg_params *p, int most, void *scratch, void *res)
{
    sf_status st = sf_bkg_check_params(p);
    bkg_work w;
    int grid;
    if (st)
        return st;
    if (p->method != SF_BKG_GLOBAL || img->loc != SF_DEVICE || img->stride != (size_t)img->nx)
        return sf_fail(SF_ERR_INTERNAL, "sf_bkg_clip_launch takes a contiguous device image, method=global");
    if (!(grid = bkg_grid_for(g, sf_npix(img->nx, img->ny), most)))
        return SF_ERR_CUDA;
    SF_TRY(bkg_launch(g, s, img, p, grid, (char *)scratch, &w));
    SF_CUDA(cudaMemcpyAsync(res, w.res, sizeof(bkg_result), cudaMemcpyDeviceToHost, s));
    g->d2h += sizeof(bkg_result);
fail:
    return st;
}

extern "C" sf_status sf_bkg_clip_stats(const void *res, const sf_image *img, sf_bkg_stats *out)
{
    static_assert(sizeof(bkg_result) <= SF_BKG_CLIP_RES, "SF_BKG_CLIP_RES");
    bkg_result r;
    memcpy(&r, res, sizeof r);
    return bkg_stats(&r, img, out);
}
