// Stage `background`, GPU version. method=global: the lesson's kappa-sigma
// clipping around the median, without sorting the image. The whole loop is
// one cooperative kernel (grid-wide barriers between phases, no host round
// trips): each iteration streams the image once (pass S: count, double sums,
// extremes, and a copy of the values in a narrow window around the previous
// median into per-block regions), then finds the exact median by a
// three-level radix selection (11, 11 and 10 bits of each float's
// order-preserving key, shared-memory histograms) over that window; the first
// iteration, or one whose median left the window, selects over the image.
// Every block reduces the per-block partials in the same fixed order, so all
// blocks take the same decisions and the result is deterministic.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cooperative_groups.h>
#include <cub/cub.cuh>
#include "common.cuh"
#include "skyfind/background.h"

namespace cg = cooperative_groups;

#define BKG_THREADS 512
#define BKG_H1 2048       // bins of the first two radix levels (11 bits)
#define BKG_H3 1024       // bins of the last level (10 bits)
#define BKG_WINDOW 0.05f  // half-width of the median window, in units of sigma
                          // (SKYFIND_GPU_BKG_WINDOW overrides it, for tests)

struct bkg_result {
    double median, sigma, mean;
    unsigned long long n, nvalid;
    int niter, converged, error, iter;
};

struct bkg_part { // one block's share of pass S
    unsigned long long n, below;
    double s, s2;
    float mn, mx;
    unsigned wcnt, pad;
};

struct bkg_work {
    bkg_part *part;     // [grid]
    unsigned *h1;       // [BKG_H1]
    unsigned *h2;       // [2 * BKG_H1]
    unsigned *h3;       // [2 * BKG_H3]
    float *win;         // [grid * wcap]
    unsigned wcap;      // window values one block may keep
    int maxiter;
    float kappa, wfac;
    bkg_result *res;
};

typedef cub::BlockReduce<double, BKG_THREADS> DReduce;
typedef cub::BlockReduce<unsigned long long, BKG_THREADS> UReduce;
typedef cub::BlockScan<unsigned, BKG_THREADS> UScan;
typedef cub::BlockReduce<float, BKG_THREADS> FReduce;

struct bkg_smem {
    union {
        typename DReduce::TempStorage d;
        typename UReduce::TempStorage u;
        typename UScan::TempStorage scan;
        typename FReduce::TempStorage f;
    } tmp;
    unsigned h[2 * BKG_H1];
    float wmin[BKG_THREADS / 32], wmax[BKG_THREADS / 32];
    unsigned wfill;
    unsigned bin, rank;
    // the block's copy of the shared state (identical in every block)
    unsigned long long n, below;
    double s, s2;
    float mn, mx;
    unsigned wtotal, wover;
};

// kernels

static __device__ __forceinline__ unsigned key_of(float v)
{
    unsigned u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static __device__ __forceinline__ float value_of(unsigned k)
{
    unsigned u = (k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k;
    return __uint_as_float(u);
}

// Visit every value of v[0..n) assigned to this block's threads in a
// grid-stride loop, with 16-byte loads (buffers are 256-byte aligned).
template <typename F>
static __device__ __forceinline__ void grid_values(const float *__restrict__ v, size_t n, F f)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x, n4 = n / 4;
    const float4 *v4 = reinterpret_cast<const float4 *>(v);
    for (size_t i = tid; i < n4; i += stride) {
        float4 q = v4[i];
        f(q.x);
        f(q.y);
        f(q.z);
        f(q.w);
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        f(v[i]);
}

// The values a radix level reads: the block's window region, or the image.
template <typename F>
static __device__ __forceinline__ void source_values(const float *img, size_t n, const bkg_work &w,
                                                     bool window, F f)
{
    if (window) {
        unsigned cnt = min(__ldcg(&w.part[blockIdx.x].wcnt), w.wcap);
        const float *r = w.win + (size_t)blockIdx.x * w.wcap;
        for (unsigned i = threadIdx.x; i < cnt; i += blockDim.x)
            f(r[i]);
    } else {
        grid_values(img, n, f);
    }
}

// Block-wide: the bin of hist[0..nbins) (global memory) holding rank *r; the
// rank inside the bin is left in *r. Identical in every block.
static __device__ unsigned find_bin(const unsigned *hist, int nbins, unsigned *r, bkg_smem &sm)
{
    const int per = nbins / BKG_THREADS; // 2 or 4
    unsigned h[4], tot = 0, before;
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

static __global__ void __launch_bounds__(BKG_THREADS)
bkg_clip(const float *__restrict__ img, size_t n, bkg_work w)
{
    __shared__ bkg_smem sm;
    cg::grid_group grid = cg::this_grid();
    const unsigned lane = threadIdx.x & 31;
    float lo = -INFINITY, hi = INFINITY, wlo = -INFINITY, whi = INFINITY, shift = 0.0f;
    bool use_window = false;
    unsigned long long nprev = 0, nvalid = 0;
    double fmed = 0, fsig = 0, fmean = 0;
    unsigned long long fn = 0;
    int niter = 0, converged = 0, error = 0, iter;

    for (iter = 1;; iter++) {
        // ---- pass S over the image -------------------------------------------
        unsigned long long c = 0, cb = 0;
        double s = 0, s2 = 0;
        float mn = INFINITY, mx = -INFINITY;
        if (threadIdx.x == 0)
            sm.wfill = 0;
        __syncthreads();
        float *region = w.win + (size_t)blockIdx.x * w.wcap;
        grid_values(img, n, [&](float v) {
            bool in = isfinite(v) && v > lo && v < hi;
            if (in) {
                double d = (double)v - (double)shift;
                c++;
                s += d;
                s2 += d * d;
                mn = fminf(mn, v);
                mx = fmaxf(mx, v);
                cb += v < wlo;
            }
            if (use_window) {
                bool inw = in && v >= wlo && v <= whi;
                unsigned act = __activemask();
                unsigned m = __ballot_sync(act, inw);
                if (m) {
                    int leader = __ffs(m) - 1;
                    unsigned base = 0;
                    if ((int)lane == leader)
                        base = atomicAdd(&sm.wfill, (unsigned)__popc(m));
                    base = __shfl_sync(act, base, leader);
                    unsigned at = base + __popc(m & ((1u << lane) - 1));
                    if (inw && at < w.wcap)
                        region[at] = v;
                }
            }
        });
        for (int o = 16; o > 0; o >>= 1) {
            mn = fminf(mn, __shfl_down_sync(0xffffffffu, mn, o));
            mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, o));
        }
        if (lane == 0) {
            sm.wmin[threadIdx.x >> 5] = mn;
            sm.wmax[threadIdx.x >> 5] = mx;
        }
        {
            double ts = DReduce(sm.tmp.d).Sum(s);
            __syncthreads();
            double ts2 = DReduce(sm.tmp.d).Sum(s2);
            __syncthreads();
            unsigned long long tc = UReduce(sm.tmp.u).Sum(c);
            __syncthreads();
            unsigned long long tb = UReduce(sm.tmp.u).Sum(cb);
            if (threadIdx.x == 0) {
                bkg_part p;
                p.n = tc;
                p.below = tb;
                p.s = ts;
                p.s2 = ts2;
                p.mn = sm.wmin[0];
                p.mx = sm.wmax[0];
                for (int k = 1; k < BKG_THREADS / 32; k++) {
                    p.mn = fminf(p.mn, sm.wmin[k]);
                    p.mx = fmaxf(p.mx, sm.wmax[k]);
                }
                p.wcnt = sm.wfill;
                p.pad = 0;
                w.part[blockIdx.x] = p;
            }
        }
        grid.sync();

        // ---- every block: combine the partials (the same fixed order everywhere) --
        {
            const unsigned per = (gridDim.x + BKG_THREADS - 1) / BKG_THREADS;
            unsigned long long tn = 0, tb = 0, wt = 0;
            double ts = 0, ts2 = 0;
            float tmn = INFINITY, tmx = INFINITY; // tmx holds -max
            unsigned wo = 0;
            for (unsigned b = threadIdx.x * per; b < (threadIdx.x + 1) * per && b < gridDim.x; b++) {
                // written by other blocks before the barrier: read past L1
                const bkg_part *pp = &w.part[b];
                unsigned wc = __ldcg(&pp->wcnt);
                tn += __ldcg(&pp->n);
                tb += __ldcg(&pp->below);
                ts += __ldcg(&pp->s);
                ts2 += __ldcg(&pp->s2);
                tmn = fminf(tmn, __ldcg(&pp->mn));
                tmx = fminf(tmx, -__ldcg(&pp->mx));
                wt += min(wc, w.wcap);
                wo |= wc > w.wcap;
            }
            auto fmin_op = [](float a, float b) { return fminf(a, b); };
            tn = UReduce(sm.tmp.u).Sum(tn);
            __syncthreads();
            tb = UReduce(sm.tmp.u).Sum(tb);
            __syncthreads();
            wt = UReduce(sm.tmp.u).Sum(wt);
            __syncthreads();
            wo = (unsigned)UReduce(sm.tmp.u).Sum((unsigned long long)wo);
            __syncthreads();
            ts = DReduce(sm.tmp.d).Sum(ts);
            __syncthreads();
            ts2 = DReduce(sm.tmp.d).Sum(ts2);
            __syncthreads();
            tmn = FReduce(sm.tmp.f).Reduce(tmn, fmin_op);
            __syncthreads();
            tmx = FReduce(sm.tmp.f).Reduce(tmx, fmin_op);
            if (threadIdx.x == 0) {
                sm.n = tn;
                sm.below = tb;
                sm.s = ts;
                sm.s2 = ts2;
                sm.mn = tmn;
                sm.mx = -tmx;
                sm.wtotal = (unsigned)wt;
                sm.wover = wo;
            }
        }
        if (blockIdx.x == 0)
            for (int i = threadIdx.x; i < 2 * BKG_H3; i += blockDim.x)
                w.h3[i] = 0; // everyone read it before the barrier above
        __syncthreads();
        const unsigned long long nn = sm.n;
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
        const bool constant = sm.mn == sm.mx; // sigma is then exactly 0, as on the CPU
        double dn = (double)nn, dm = sm.s / dn, var = sm.s2 / dn - dm * dm;
        const double mean = constant ? (double)sm.mn : (double)shift + dm;
        const double sigma = constant ? 0.0 : (double)(float)sqrt(var > 0 ? var : 0.0);
        unsigned long long r0 = (nn - 1) / 2, r1 = nn / 2;
        bool window = use_window;
        if (window) {
            if (sm.wover || r0 < sm.below || r1 - sm.below >= sm.wtotal)
                window = false; // the median left the window: select over the image
            else {
                r0 -= sm.below;
                r1 -= sm.below;
            }
        }

        // ---- radix level 1: top 11 bits ------------------------------------------
        zero_smem_hist(sm.h, BKG_H1);
        source_values(img, n, w, window, [&](float v) {
            bool in = isfinite(v) && v > lo && v < hi;
            unsigned bin = in ? key_of(v) >> 21 : 0xFFFFFFFFu;
            unsigned peers = __match_any_sync(__activemask(), bin); // noise piles into few bins
            if (in && lane == (unsigned)(__ffs(peers) - 1))
                atomicAdd(&sm.h[bin], (unsigned)__popc(peers));
        });
        flush_hist(sm.h, w.h1, BKG_H1);
        grid.sync();
        unsigned rk[2] = {(unsigned)r0, (unsigned)r1}, pre[2];
        for (int j = 0; j < 2; j++)
            pre[j] = find_bin(w.h1, BKG_H1, &rk[j], sm);

        // ---- radix level 2: next 11 bits -----------------------------------------
        zero_smem_hist(sm.h, 2 * BKG_H1);
        source_values(img, n, w, window, [&](float v) {
            if (!(isfinite(v) && v > lo && v < hi))
                return;
            unsigned k = key_of(v), p = k >> 21, b = (k >> 10) & 0x7FFu;
            if (p == pre[0])
                atomicAdd(&sm.h[b], 1u);
            if (p == pre[1])
                atomicAdd(&sm.h[BKG_H1 + b], 1u);
        });
        flush_hist(sm.h, w.h2, 2 * BKG_H1);
        grid.sync();
        for (int j = 0; j < 2; j++)
            pre[j] = (pre[j] << 11) | find_bin(w.h2 + j * BKG_H1, BKG_H1, &rk[j], sm);

        // ---- radix level 3: last 10 bits -----------------------------------------
        zero_smem_hist(sm.h, 2 * BKG_H3);
        source_values(img, n, w, window, [&](float v) {
            if (!(isfinite(v) && v > lo && v < hi))
                return;
            unsigned k = key_of(v), p = k >> 10, b = k & 0x3FFu;
            if (p == pre[0])
                atomicAdd(&sm.h[b], 1u);
            if (p == pre[1])
                atomicAdd(&sm.h[BKG_H3 + b], 1u);
        });
        flush_hist(sm.h, w.h3, 2 * BKG_H3);
        grid.sync();
        for (int j = 0; j < 2; j++)
            pre[j] = (pre[j] << 10) | find_bin(w.h3 + j * BKG_H3, BKG_H3, &rk[j], sm);
        if (blockIdx.x == 0) // read by everyone before the barrier above
            for (int i = threadIdx.x; i < 3 * BKG_H1; i += blockDim.x)
                (i < BKG_H1 ? w.h1[i] : w.h2[i - BKG_H1]) = 0;

        // ---- the median (numpy: the middle, or the float32 mean of the two) ----
        float m0 = value_of(pre[0]), m1 = value_of(pre[1]);
        float med = (nn & 1) ? m1 : __fdiv_rn(__fadd_rn(m0, m1), 2.0f);
        float sig = (float)sigma;
        float ks = __fmul_rn(w.kappa, sig);
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
        lo = fmaxf(lo, __fsub_rn(med, ks));
        hi = fminf(hi, __fadd_rn(med, ks));
        // the next median stays close to this one: select it from a narrow window
        float ww = __fmul_rn(w.wfac, sig);
        wlo = __fsub_rn(med, ww);
        whi = __fadd_rn(med, ww);
        use_window = true;
        shift = med;
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
        *w.res = r;
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
    size_t want = (n + 4 * BKG_THREADS - 1) / (4 * BKG_THREADS);
    size_t most = (size_t)sm_count * (size_t)per_sm;
    return (int)(want < 1 ? 1 : want < most ? want : most);
}

static size_t bkg_wcap(size_t n, int grid) { return n / 4 / (size_t)grid + 1024; }

static size_t bkg_bytes(size_t n, int grid)
{
    return sf_align256(sizeof(bkg_result)) + sf_align256((size_t)grid * sizeof(bkg_part)) +
           sf_align256(BKG_H1 * 4) + sf_align256(2 * BKG_H1 * 4) + sf_align256(2 * BKG_H3 * 4) +
           sf_align256((size_t)grid * bkg_wcap(n, grid) * sizeof(float));
}

extern "C" size_t sf_background_mesh_gpu_scratch(int nx, int ny, const sf_bkg_params *p);
extern "C" size_t sf_background_bane_gpu_scratch(int nx, int ny, const sf_bkg_params *p);
extern "C" sf_status sf_background_mesh_gpu(sf_gpu *g, const sf_image *img,
                                            const sf_bkg_params *p, sf_bkg_stats *out,
                                            sf_image *bkg, sf_image *rms);

extern "C" size_t sf_background_gpu_scratch(int nx, int ny, const sf_bkg_params *p)
{
    // the grid is at most 132 SMs x 4 blocks on the GPUs we build for; the
    // window needs about n/4 values whatever the grid
    size_t n = sf_npix(nx, ny);
    size_t global = bkg_bytes(n, 1) + 4 * 528 * (sizeof(bkg_part) + 1024 * sizeof(float));
    size_t mesh = sf_background_mesh_gpu_scratch(nx, ny, p); // method=mesh (background_mesh.cu)
    if (p && p->method == SF_BKG_BANE) // method=bane (background_bane.cu)
        mesh = sf_background_bane_gpu_scratch(nx, ny, p);
    return global > mesh ? global : mesh;
}

extern "C" sf_status sf_bkg_check_params(const sf_bkg_params *p);
extern "C" sf_status sf_background_bane_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                            sf_bkg_stats *out, sf_image *bkg, sf_image *rms);

extern "C" sf_status sf_background_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                       sf_bkg_stats *out, sf_image *bkg, sf_image *rms)
{
    sf_status st = sf_bkg_check_params(p);
    size_t n = sf_npix(img->nx, img->ny);
    bkg_work w;
    bkg_result r;
    void *base = NULL;
    int per_sm = 0, grid;
    char *q;
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
    SF_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bkg_clip, BKG_THREADS, 0));
    if (per_sm < 1) {
        st = sf_fail(SF_ERR_CUDA, "background: the clipping kernel cannot be resident");
        goto fail;
    }
    grid = bkg_grid(n, g->sm_count, per_sm);
    SF_TRY(sf_gpu_scratch(g, bkg_bytes(n, grid), &base));
    q = (char *)base;
#define CARVE(ptr, type, count)                                                     \
    ptr = (type *)q;                                                                \
    q += sf_align256((size_t)(count) * sizeof(type));
    CARVE(w.res, bkg_result, 1)
    CARVE(w.part, bkg_part, grid)
    CARVE(w.h1, unsigned, BKG_H1)
    CARVE(w.h2, unsigned, 2 * BKG_H1)
    CARVE(w.h3, unsigned, 2 * BKG_H3)
    CARVE(w.win, float, (size_t)grid * bkg_wcap(n, grid))
#undef CARVE
    w.wcap = (unsigned)bkg_wcap(n, grid);
    w.maxiter = p->maxiter;
    w.kappa = (float)p->kappa;
    w.wfac = getenv("SKYFIND_GPU_BKG_WINDOW") ? (float)atof(getenv("SKYFIND_GPU_BKG_WINDOW"))
                                              : BKG_WINDOW;
    SF_CUDA(cudaMemsetAsync(w.h1, 0, (size_t)((char *)w.win - (char *)w.h1), g->stream));
    {
        const float *data = img->data;
        void *args[] = {(void *)&data, (void *)&n, (void *)&w};
        SF_CUDA(cudaLaunchCooperativeKernel((const void *)bkg_clip, dim3(grid), dim3(BKG_THREADS),
                                            args, 0, g->stream));
    }
    SF_LAUNCHED();
    SF_TRY(sf_gpu_to_host(g, &r, w.res, sizeof r));
    if (r.error) {
        st = sf_fail(SF_ERR_EMPTY, r.iter == 1 ? "background: the image has no finite pixels"
                                               : "background: clipping removed every pixel");
        goto fail;
    }
    if (bkg || rms) {
        bkg_fill<<<sf_blocks(n, 256) < 4096 ? sf_blocks(n, 256) : 4096, 256, 0, g->stream>>>(
            bkg ? bkg->data : NULL, rms ? rms->data : NULL, n, w.res);
        SF_LAUNCHED();
    }
    out->median = r.median;
    out->sigma = r.sigma;
    out->mean = r.mean;
    out->nused = (long long)r.n;
    out->nvalid = (long long)r.nvalid;
    out->niter = r.niter;
    out->converged = r.converged;
fail:
    return st;
}
