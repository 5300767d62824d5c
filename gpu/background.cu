// Stage `background`, GPU version. method=global: the lesson's kappa-sigma
// clipping around the median, without sorting: each iteration finds the
// exact median by a three-pass radix selection (11, 11 and 10 bits of the
// order-preserving key of each float) with shared-memory histograms, and the
// clipped mean and standard deviation from deterministic per-block double
// partials. A one-thread control kernel between passes keeps every decision
// on the device; the host only polls a done flag every few iterations.
#include <math.h>
#include <string.h>
#include <cub/cub.cuh>
#include "common.cuh"
#include "skyfind/background.h"

#define BKG_THREADS 256
#define BKG_H1 2048 // bins of the first two radix passes (11 bits)
#define BKG_H3 1024 // bins of the last pass (10 bits)
#define BKG_BATCH 4         // iterations launched between polls of the done flag
#define CTL_THREADS 1024  // threads of the control kernels (nblocks <= this)

struct bkg_ctl {
    float lo, hi;            // current set: lo < v < hi (strict), finite v
    int iter;                // iteration being computed (1-based)
    int maxiter;
    int done, converged, niter, error;
    float kappa;
    unsigned long long n, nprev, nvalid;
    unsigned rank[2];        // ranks of the two middle elements inside their bins
    unsigned prefix[2];      // key prefixes found so far for the two middles
    float shift;             // subtracted before the double sums (stability)
    double median, sigma, mean;       // stats of the current iteration
    double fmedian, fsigma, fmean;    // stats of the last finished iteration
    int constant;            // every value of the current set is the same
    float vmin;
    unsigned long long fn;
};

struct bkg_scratch {
    bkg_ctl *ctl;
    unsigned *hist;                // BKG_H1 * 2 bins (the two middles may differ)
    unsigned long long *count;     // per-block counts
    double *sum, *sum2;            // per-block partial sums
    float *vmin, *vmax;            // per-block extremes of the set
    int nblocks;
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

// Visit every pixel with 16-byte loads where possible (cudaMalloc'd buffers
// are 256-byte aligned).
template <typename F>
static __device__ __forceinline__ void for_each_pixel(const float *__restrict__ img, size_t n, F f)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x, n4 = n / 4;
    const float4 *img4 = reinterpret_cast<const float4 *>(img);
    for (size_t i = tid; i < n4; i += stride) {
        float4 q = img4[i];
        f(q.x);
        f(q.y);
        f(q.z);
        f(q.w);
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        f(img[i]);
}

// Pass A: count the current set and histogram the top 11 key bits
// (warp-aggregated shared-memory atomics: noise piles into a few bins).
static __global__ void bkg_pass_top(const float *__restrict__ img, size_t n, bkg_ctl *ctl,
                                    unsigned *hist, unsigned long long *count, float *bmin,
                                    float *bmax)
{
    __shared__ unsigned h[BKG_H1];
    __shared__ float wmin[BKG_THREADS / 32], wmax[BKG_THREADS / 32];
    typedef cub::BlockReduce<unsigned long long, BKG_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    if (ctl->done)
        return;
    const float lo = ctl->lo, hi = ctl->hi;
    for (int i = threadIdx.x; i < BKG_H1; i += blockDim.x)
        h[i] = 0;
    __syncthreads();
    unsigned long long c = 0;
    float mn = INFINITY, mx = -INFINITY;
    const unsigned lane = threadIdx.x & 31;
    for_each_pixel(img, n, [&](float v) {
        bool in = isfinite(v) && v > lo && v < hi;
        unsigned bin = in ? key_of(v) >> 21 : 0xFFFFFFFFu;
        unsigned peers = __match_any_sync(__activemask(), bin);
        if (in) {
            c++;
            mn = fminf(mn, v);
            mx = fmaxf(mx, v);
            if (lane == (unsigned)(__ffs(peers) - 1))
                atomicAdd(&h[bin], (unsigned)__popc(peers));
        }
    });
    unsigned long long t = Reduce(tmp).Sum(c);
    for (int o = 16; o > 0; o >>= 1) {
        mn = fminf(mn, __shfl_down_sync(0xffffffffu, mn, o));
        mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, o));
    }
    if (lane == 0) {
        wmin[threadIdx.x >> 5] = mn;
        wmax[threadIdx.x >> 5] = mx;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        count[blockIdx.x] = t;
        for (int w = 1; w < BKG_THREADS / 32; w++) {
            wmin[0] = fminf(wmin[0], wmin[w]);
            wmax[0] = fmaxf(wmax[0], wmax[w]);
        }
        bmin[blockIdx.x] = wmin[0];
        bmax[blockIdx.x] = wmax[0];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < BKG_H1; i += blockDim.x)
        if (h[i])
            atomicAdd(&hist[i], h[i]);
}

// Passes B and C: histogram the next bits of the keys whose prefix matches
// either middle element's prefix; pass B also sums (v - shift) and its square
// into per-block partials (combined later in a fixed order).
template <int SHIFT, int BITS, bool SUMS>
static __global__ void bkg_pass_refine(const float *__restrict__ img, size_t n, bkg_ctl *ctl,
                                       unsigned *hist, double *sum, double *sum2)
{
    __shared__ unsigned h[2 << BITS];
    typedef cub::BlockReduce<double, BKG_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    if (ctl->done)
        return;
    const float lo = ctl->lo, hi = ctl->hi, shift = ctl->shift;
    const unsigned p0 = ctl->prefix[0], p1 = ctl->prefix[1];
    const unsigned mask = (1u << BITS) - 1;
    for (int i = threadIdx.x; i < (2 << BITS); i += blockDim.x)
        h[i] = 0;
    __syncthreads();
    double s = 0, s2 = 0;
    for_each_pixel(img, n, [&](float v) {
        if (!(isfinite(v) && v > lo && v < hi))
            return;
        unsigned k = key_of(v), pre = k >> (SHIFT + BITS);
        if (pre == p0)
            atomicAdd(&h[(k >> SHIFT) & mask], 1u);
        if (pre == p1)
            atomicAdd(&h[(1u << BITS) + ((k >> SHIFT) & mask)], 1u);
        if (SUMS) {
            double d = (double)v - (double)shift;
            s += d;
            s2 += d * d;
        }
    });
    if (SUMS) {
        double t = Reduce(tmp).Sum(s);
        __syncthreads();
        double t2 = Reduce(tmp).Sum(s2);
        if (threadIdx.x == 0) {
            sum[blockIdx.x] = t;
            sum2[blockIdx.x] = t2;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < (2 << BITS); i += blockDim.x)
        if (h[i])
            atomicAdd(&hist[i], h[i]);
}

// Block-wide search (CTL_THREADS threads, nbins = 2 * CTL_THREADS or fewer):
// the bin of hist holding rank *r; returns the bin and leaves the rank inside
// it in *r. Every thread gets the answer.
typedef cub::BlockScan<unsigned, CTL_THREADS> CtlScan;
struct ctl_smem {
    typename CtlScan::TempStorage scan;
    unsigned bin, rank;
};

static __device__ unsigned find_bin(const unsigned *hist, int nbins, unsigned *r, ctl_smem &sm)
{
    const int per = nbins / CTL_THREADS; // 1 or 2
    unsigned h0 = hist[threadIdx.x * per], h1 = per > 1 ? hist[threadIdx.x * per + 1] : 0;
    unsigned before;
    CtlScan(sm.scan).ExclusiveSum(h0 + h1, before);
    if (*r >= before && *r < before + h0) {
        sm.bin = threadIdx.x * per;
        sm.rank = *r - before;
    } else if (per > 1 && *r >= before + h0 && *r < before + h0 + h1) {
        sm.bin = threadIdx.x * per + 1;
        sm.rank = *r - before - h0;
    }
    __syncthreads();
    unsigned b = sm.bin;
    *r = sm.rank;
    __syncthreads();
    return b;
}

static __device__ void zero_hist(unsigned *hist)
{
    for (int i = threadIdx.x; i < 2 * BKG_H1; i += blockDim.x)
        hist[i] = 0;
}

// Control after pass A: convergence test, ranks of the middles, first prefixes.
static __global__ void bkg_ctl_top(bkg_ctl *ctl, unsigned *hist, const unsigned long long *count,
                                   const float *bmin, const float *bmax, int nblocks)
{
    typedef cub::BlockReduce<unsigned long long, CTL_THREADS> Reduce;
    typedef cub::BlockReduce<float, CTL_THREADS> FReduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ typename FReduce::TempStorage ftmp;
    __shared__ ctl_smem sm;
    __shared__ unsigned long long total;
    if (ctl->done)
        return;
    unsigned long long c = threadIdx.x < nblocks ? count[threadIdx.x] : 0;
    c = Reduce(tmp).Sum(c);
    if (threadIdx.x == 0)
        total = c;
    __syncthreads();
    const unsigned long long n = total;
    if (n == 0 || (ctl->iter > 1 && n == ctl->nprev) || ctl->iter > ctl->maxiter) {
        if (threadIdx.x == 0) {
            if (ctl->iter == 1)
                ctl->nvalid = n;
            if (n == 0) {
                ctl->error = 1; // no finite pixel, or clipping removed all
            } else if (ctl->iter > 1 && n == ctl->nprev) {
                ctl->converged = 1; // the last iteration clipped nothing
                ctl->niter = ctl->iter - 1;
            } else {
                ctl->niter = ctl->maxiter;
            }
            ctl->done = 1;
        }
        return;
    }
    for (int j = 0; j < 2; j++) {
        unsigned r = (unsigned)(j == 0 ? (n - 1) / 2 : n / 2);
        unsigned b = find_bin(hist, BKG_H1, &r, sm);
        if (threadIdx.x == 0) {
            ctl->prefix[j] = b;
            ctl->rank[j] = r;
        }
    }
    __syncthreads();
    {
        // the set is constant when its extremes agree: sigma is then exactly 0
        float mn = threadIdx.x < nblocks ? bmin[threadIdx.x] : INFINITY;
        float mx = threadIdx.x < nblocks ? -bmax[threadIdx.x] : INFINITY;
        mn = FReduce(ftmp).Reduce(mn, [](float a, float b) { return fminf(a, b); });
        __syncthreads();
        mx = FReduce(ftmp).Reduce(mx, [](float a, float b) { return fminf(a, b); });
        if (threadIdx.x == 0) {
            ctl->constant = (mn == -mx);
            ctl->vmin = mn;
        }
    }
    if (threadIdx.x == 0) {
        if (ctl->iter == 1)
            ctl->nvalid = n;
        ctl->n = n;
        float sh = value_of(ctl->prefix[0] << 21);
        ctl->shift = isfinite(sh) ? sh : 0.0f;
    }
    zero_hist(hist);
}

// Control after pass B: the clipped mean and sigma, second prefixes.
static __global__ void bkg_ctl_mid(bkg_ctl *ctl, unsigned *hist, const double *sum,
                                   const double *sum2, int nblocks)
{
    typedef cub::BlockReduce<double, CTL_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ ctl_smem sm;
    if (ctl->done)
        return;
    double s = threadIdx.x < nblocks ? sum[threadIdx.x] : 0.0;
    double s2 = threadIdx.x < nblocks ? sum2[threadIdx.x] : 0.0;
    s = Reduce(tmp).Sum(s);
    __syncthreads();
    s2 = Reduce(tmp).Sum(s2);
    if (threadIdx.x == 0) {
        double n = (double)ctl->n, dm = s / n, var = s2 / n - dm * dm;
        ctl->mean = ctl->constant ? (double)ctl->vmin : (double)ctl->shift + dm;
        ctl->sigma = ctl->constant ? 0.0 : (double)(float)sqrt(var > 0 ? var : 0.0);
    }
    for (int j = 0; j < 2; j++) {
        unsigned r = ctl->rank[j];
        unsigned b = find_bin(hist + j * BKG_H1, BKG_H1, &r, sm);
        if (threadIdx.x == 0) {
            ctl->prefix[j] = (ctl->prefix[j] << 11) | b;
            ctl->rank[j] = r;
        }
        __syncthreads();
    }
    zero_hist(hist);
}

// Control after pass C: the exact median, the next clipping bounds.
static __global__ void bkg_ctl_low(bkg_ctl *ctl, unsigned *hist)
{
    __shared__ ctl_smem sm;
    __shared__ float mid[2];
    if (ctl->done)
        return;
    for (int j = 0; j < 2; j++) {
        unsigned r = ctl->rank[j];
        unsigned b = find_bin(hist + j * BKG_H3, BKG_H3, &r, sm);
        if (threadIdx.x == 0)
            mid[j] = value_of((ctl->prefix[j] << 10) | b);
        __syncthreads();
    }
    zero_hist(hist);
    if (threadIdx.x != 0)
        return;
    // numpy: the middle element, or the float32 mean of the two middles
    float med = (ctl->n & 1) ? mid[1] : __fdiv_rn(__fadd_rn(mid[0], mid[1]), 2.0f);
    float sig = (float)ctl->sigma;
    float ks = __fmul_rn(ctl->kappa, sig);
    float lo = __fsub_rn(med, ks), hi = __fadd_rn(med, ks);
    ctl->median = med;
    ctl->fmedian = med;
    ctl->fsigma = ctl->sigma;
    ctl->fmean = ctl->mean;
    ctl->fn = ctl->n;
    ctl->niter = ctl->iter;
    ctl->nprev = ctl->n;
    if (sig == 0.0f) { // constant data: nothing left to clip (as the CPU twin)
        ctl->converged = 1;
        ctl->done = 1;
    }
    ctl->lo = fmaxf(ctl->lo, lo);
    ctl->hi = fminf(ctl->hi, hi);
    ctl->iter++;
}

static __global__ void bkg_fill(float *bkg, float *rms, size_t n, const bkg_ctl *ctl)
{
    const float m = (float)ctl->fmedian, s = (float)ctl->fsigma;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (bkg)
            bkg[i] = m;
        if (rms)
            rms[i] = s;
    }
}

// launchers

static int bkg_nblocks(size_t n)
{
    size_t b = (n + BKG_THREADS - 1) / BKG_THREADS;
    return (int)(b < 1024 ? (b ? b : 1) : 1024);
}

extern "C" size_t sf_background_gpu_scratch(int nx, int ny, const sf_bkg_params *p)
{
    int nb = bkg_nblocks(sf_npix(nx, ny));
    return sf_align256(sizeof(bkg_ctl)) + sf_align256(2 * BKG_H1 * sizeof(unsigned)) +
           3 * sf_align256((size_t)nb * sizeof(double)) + 2 * sf_align256((size_t)nb * sizeof(float));
}

static sf_status bkg_carve(sf_gpu *g, size_t n, bkg_scratch *s)
{
    void *base = NULL;
    int nb = bkg_nblocks(n);
    size_t need = sf_background_gpu_scratch((int)n, 1, NULL);
    sf_status st = sf_gpu_scratch(g, need, &base);
    if (st)
        return st;
    char *p = (char *)base;
    s->ctl = (bkg_ctl *)p;
    p += sf_align256(sizeof(bkg_ctl));
    s->hist = (unsigned *)p;
    p += sf_align256(2 * BKG_H1 * sizeof(unsigned));
    s->count = (unsigned long long *)p;
    p += sf_align256((size_t)nb * sizeof(double));
    s->sum = (double *)p;
    p += sf_align256((size_t)nb * sizeof(double));
    s->sum2 = (double *)p;
    p += sf_align256((size_t)nb * sizeof(double));
    s->vmin = (float *)p;
    p += sf_align256((size_t)nb * sizeof(float));
    s->vmax = (float *)p;
    s->nblocks = nb;
    return SF_OK;
}

extern "C" sf_status sf_bkg_check_params(const sf_bkg_params *p);

extern "C" sf_status sf_background_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                       sf_bkg_stats *out, sf_image *bkg, sf_image *rms)
{
    sf_status st = sf_bkg_check_params(p);
    size_t n = sf_npix(img->nx, img->ny);
    bkg_scratch s;
    bkg_ctl c;
    int done = 0;
    if (st)
        return st;
    if (img->loc != SF_DEVICE)
        return sf_fail(SF_ERR_PARAM, "sf_background_gpu needs a device image");
    if (img->stride != (size_t)img->nx)
        return sf_fail(SF_ERR_PARAM, "sf_background_gpu needs a contiguous image");
    SF_TRY(bkg_carve(g, n, &s));
    memset(&c, 0, sizeof c);
    c.lo = -INFINITY;
    c.hi = INFINITY;
    c.iter = 1;
    c.maxiter = p->maxiter;
    c.kappa = (float)p->kappa;
    SF_CUDA(cudaMemcpyAsync(s.ctl, &c, sizeof c, cudaMemcpyHostToDevice, g->stream));
    SF_CUDA(cudaMemsetAsync(s.hist, 0, 2 * BKG_H1 * sizeof(unsigned), g->stream));
    // Each round is up to BKG_BATCH iterations; kernels return at once after done.
    for (int round = 0; !done; round++) {
        for (int k = 0; k < BKG_BATCH; k++) {
            bkg_pass_top<<<s.nblocks, BKG_THREADS, 0, g->stream>>>(img->data, n, s.ctl, s.hist,
                                                                   s.count, s.vmin, s.vmax);
            SF_LAUNCHED();
            bkg_ctl_top<<<1, CTL_THREADS, 0, g->stream>>>(s.ctl, s.hist, s.count, s.vmin, s.vmax,
                                                          s.nblocks);
            SF_LAUNCHED();
            bkg_pass_refine<10, 11, true><<<s.nblocks, BKG_THREADS, 0, g->stream>>>(
                img->data, n, s.ctl, s.hist, s.sum, s.sum2);
            SF_LAUNCHED();
            bkg_ctl_mid<<<1, CTL_THREADS, 0, g->stream>>>(s.ctl, s.hist, s.sum, s.sum2, s.nblocks);
            SF_LAUNCHED();
            bkg_pass_refine<0, 10, false><<<s.nblocks, BKG_THREADS, 0, g->stream>>>(
                img->data, n, s.ctl, s.hist, NULL, NULL);
            SF_LAUNCHED();
            bkg_ctl_low<<<1, CTL_THREADS, 0, g->stream>>>(s.ctl, s.hist);
            SF_LAUNCHED();
        }
        SF_TRY(sf_gpu_to_host(g, &done, &s.ctl->done, sizeof done));
        if (round > p->maxiter / BKG_BATCH + 2) {
            st = sf_fail(SF_ERR_INTERNAL, "background: clipping did not stop");
            goto fail;
        }
    }
    SF_TRY(sf_gpu_to_host(g, &c, s.ctl, sizeof c));
    if (c.error) {
        st = sf_fail(SF_ERR_EMPTY, c.iter == 1 ? "background: the image has no finite pixels"
                                               : "background: clipping removed every pixel");
        goto fail;
    }
    if (bkg || rms) {
        bkg_fill<<<s.nblocks, BKG_THREADS, 0, g->stream>>>(bkg ? bkg->data : NULL,
                                                           rms ? rms->data : NULL, n, s.ctl);
        SF_LAUNCHED();
    }
    out->median = c.fmedian;
    out->sigma = c.fsigma;
    out->mean = c.fmean;
    out->nused = (long long)c.fn;
    out->nvalid = (long long)c.nvalid;
    out->niter = c.niter;
    out->converged = c.converged;
fail:
    return st;
}
