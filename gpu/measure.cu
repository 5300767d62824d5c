// Stage `measure`, GPU version (twin of cpu/measure.c): per-source pixel
// count, flux, flux-weighted centroid and peak, with exact 128-bit fixed-point
// sums (src/fixsum.h) accumulated by atomics, bit-identical to the CPU twin.
#include <stdint.h>
#include <string.h>
#include "common.cuh"
#include "skyfind/measure.h"
#include "../src/fixsum.h"

// Sums kept per label; second moments (issue #6) are added as further
// entries (terms tv*x*x, tv*y*y, tv*x*y) and MS_NWORDS grows by 2 each.
enum { MS_V, MS_VX, MS_VY, MS_NSUM };

// Per-label accumulator in scratch, as 64-bit words: for each sum k,
// w[2k] = low word, w[2k+1] = high word (two's complement); then the pixel
// count and the peak key. All zero bits = empty (key 0 is below any pixel).
enum { MS_NPIX = 2 * MS_NSUM, MS_PEAK, MS_NWORDS };

#define MS_RUN 16        // consecutive pixels of a row walked by one thread
#define MS_THREADS 256   // multiple of 32: loops are warp-uniform
#define MS_HDR 256       // scratch header: the bits of M (unsigned int)

static_assert(sizeof(sf_source) % 8 == 0, "sf_source is written as 64-bit words");

// kernels

static __device__ __forceinline__ unsigned warp_max_u32(unsigned v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// (a) M = max |v| over finite pixels whose label is in 1..nlabels. |v| >= 0,
// so the float bits order like the values and atomicMax on them is a max.
static __global__ void ms_max_kernel(const float *__restrict__ img, size_t istride,
                                     const int32_t *__restrict__ lab, size_t lstride, int nx,
                                     long long nruns, int rpr, int nlabels,
                                     unsigned *__restrict__ mbits)
{
    __shared__ unsigned wmax[MS_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned m = 0;
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < nruns;
         r += (long long)gridDim.x * blockDim.x) {
        const long long y = r / rpr;
        const int x0 = (int)(r - y * rpr) * MS_RUN;
        const int x1 = min(x0 + MS_RUN, nx);
        const float *row = img + y * istride;
        const int32_t *lrow = lab + y * lstride;
        for (int x = x0; x < x1; x++) {
            const int32_t l = lrow[x];
            const float v = row[x];
            if (l > 0 && l <= nlabels && isfinite(v))
                m = max(m, __float_as_uint(fabsf(v)));
        }
    }
    m = warp_max_u32(m);
    if (lane == 0)
        wmax[warp] = m;
    __syncthreads();
    if (warp == 0) {
        m = lane < MS_THREADS / 32 ? wmax[lane] : 0;
        m = warp_max_u32(m);
        if (lane == 0 && m)
            atomicMax(mbits, m);
    }
}

static __device__ __forceinline__ int ms_exponent(const unsigned *mbits)
{
    return sf_fix_exponent((double)__uint_as_float(*mbits));
}

// 128-bit atomic add of a into the pair (w[0] = lo, w[1] = hi).
// atomicAdd on the low word returns the exact value it added to (old), so
// this addition wrapped past 2^64 iff old + a.lo < old, i.e. carry = 1. Each
// addition of a 64-bit value wraps the low word at most once, so over all
// threads, in whatever order, the carries add up to exactly the number of
// times the low word went past 2^64: floor((lo0 + sum a.lo) / 2^64). Adding
// a.hi + carry to the high word (also an atomic, commutative add mod 2^64)
// therefore leaves hi*2^64 + lo = initial + sum of all a, mod 2^128. While
// the kernel runs the pair may be momentarily inconsistent (the high word
// lagging its carry), but nobody reads it before the kernel has finished.
static __device__ __forceinline__ void ms_atomic_add128(unsigned long long *w, sf_fix128 a)
{
    const unsigned long long old = atomicAdd(&w[0], (unsigned long long)a.lo);
    const unsigned long long carry = old + (unsigned long long)a.lo < old;
    const unsigned long long hi = (unsigned long long)a.hi + carry;
    if (hi)
        atomicAdd(&w[1], hi);
}

static __device__ __forceinline__ void ms_flush(unsigned long long *w, const sf_fix128 *s,
                                                unsigned npix, unsigned long long key)
{
    for (int k = 0; k < MS_NSUM; k++)
        ms_atomic_add128(&w[2 * k], s[k]);
    atomicAdd(&w[MS_NPIX], (unsigned long long)npix);
    atomicMax(&w[MS_PEAK], key);
}

// (c) Accumulate. Thread r walks run r: MS_RUN consecutive pixels of a row,
// keeping a private accumulator while the label stays the same and flushing
// it with atomics when the label changes. The loop is warp-uniform (all 32
// lanes make the same number of trips), so at the end of each trip the warp
// can check whether all lanes hold the same label (the inside of a large
// island) and then reduce in registers by shuffles, leaving one set of
// atomics per warp instead of 32 on the same addresses.
static __global__ void ms_accum_kernel(const float *__restrict__ img, size_t istride,
                                       const int32_t *__restrict__ lab, size_t lstride, int nx,
                                       long long nruns, int rpr, int nlabels,
                                       const unsigned *__restrict__ mbits,
                                       unsigned long long *__restrict__ acc)
{
    const int lane = threadIdx.x & 31;
    const double scale = ldexp(1.0, ms_exponent(mbits));
    const long long wstride = (long long)gridDim.x * blockDim.x;
    for (long long base = (blockIdx.x * (long long)blockDim.x + threadIdx.x) & ~31LL;
         base < nruns; base += wstride) {
        const long long r = base + lane;
        int cur = 0;
        unsigned npix = 0;
        unsigned long long key = 0;
        sf_fix128 s[MS_NSUM];
        for (int k = 0; k < MS_NSUM; k++)
            s[k] = sf_fix_zero();
        if (r < nruns) {
            const long long y = r / rpr;
            const int x0 = (int)(r - y * rpr) * MS_RUN;
            const int x1 = min(x0 + MS_RUN, nx);
            const float *row = img + y * istride;
            const int32_t *lrow = lab + y * lstride;
            for (int x = x0; x < x1; x++) {
                const int32_t l = lrow[x];
                const float v = row[x];
                // out-of-range labels are skipped (the CPU twin reports them)
                if (l <= 0 || l > nlabels || !isfinite(v))
                    continue;
                if (l != cur) {
                    if (cur)
                        ms_flush(acc + (size_t)(cur - 1) * MS_NWORDS, s, npix, key);
                    cur = l;
                    npix = 0;
                    key = 0;
                    for (int k = 0; k < MS_NSUM; k++)
                        s[k] = sf_fix_zero();
                }
                const double tv = (double)v * scale;
                sf_fix_add(&s[MS_V], sf_fix_from_double(tv));
                sf_fix_add(&s[MS_VX], sf_fix_from_double(tv * (double)x));
                sf_fix_add(&s[MS_VY], sf_fix_from_double(tv * (double)y));
                npix++;
                const unsigned idx = (unsigned)(y * nx + x);
                const unsigned long long kk =
                    ((unsigned long long)sf_fkey(v) << 32) | (0xFFFFFFFFu - idx);
                key = kk > key ? kk : key;
            }
        }
        // End of the trip: all 32 lanes are here (base is warp-uniform).
        const int c0 = __shfl_sync(0xffffffffu, cur, 0);
        if (__all_sync(0xffffffffu, cur == c0)) {
            if (c0 != 0) {
                for (int o = 16; o > 0; o >>= 1) {
                    for (int k = 0; k < MS_NSUM; k++) {
                        sf_fix128 t;
                        t.lo = __shfl_xor_sync(0xffffffffu, (unsigned long long)s[k].lo, o);
                        t.hi = (int64_t)__shfl_xor_sync(0xffffffffu,
                                                        (unsigned long long)s[k].hi, o);
                        sf_fix_add(&s[k], t);
                    }
                    npix += __shfl_xor_sync(0xffffffffu, npix, o);
                    const unsigned long long ko = __shfl_xor_sync(0xffffffffu, key, o);
                    key = ko > key ? ko : key;
                }
                if (lane == 0)
                    ms_flush(acc + (size_t)(c0 - 1) * MS_NWORDS, s, npix, key);
            }
        } else if (cur) {
            ms_flush(acc + (size_t)(cur - 1) * MS_NWORDS, s, npix, key);
        }
    }
}

// (d) One thread per label: the sf_source, computed exactly as the CPU twin
// does, written as whole 64-bit words so the padding bytes are zero too.
static __global__ void ms_final_kernel(const unsigned long long *__restrict__ acc, int nlabels,
                                       int nx, const unsigned *__restrict__ mbits,
                                       sf_source *__restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nlabels)
        return;
    const int e = ms_exponent(mbits);
    const unsigned long long *w = acc + (size_t)i * MS_NWORDS;
    union {
        sf_source s;
        unsigned long long w[sizeof(sf_source) / 8];
    } u;
    for (int k = 0; k < (int)(sizeof(sf_source) / 8); k++)
        u.w[k] = 0;
    u.s.id = i + 1;
    u.s.npix = (long long)w[MS_NPIX];
    if (w[MS_NPIX] == 0) {
        u.s.flux_sum = 0.0;
        u.s.x = u.s.y = sf_fix_nan();
        u.s.peak = sf_fix_nanf();
        u.s.peak_x = u.s.peak_y = -1;
    } else {
        sf_fix128 sv, sx, sy;
        sv.lo = w[2 * MS_V];
        sv.hi = (int64_t)w[2 * MS_V + 1];
        sx.lo = w[2 * MS_VX];
        sx.hi = (int64_t)w[2 * MS_VX + 1];
        sy.lo = w[2 * MS_VY];
        sy.hi = (int64_t)w[2 * MS_VY + 1];
        u.s.flux_sum = sf_fix_to_double(sv, e);
        if (sf_fix_is_zero(sv)) {
            u.s.x = u.s.y = sf_fix_nan();
        } else {
            u.s.x = sf_fix_to_double(sx, e) / u.s.flux_sum;
            u.s.y = sf_fix_to_double(sy, e) / u.s.flux_sum;
        }
        const unsigned long long key = w[MS_PEAK];
        const unsigned idx = 0xFFFFFFFFu - (unsigned)(key & 0xFFFFFFFFull);
        u.s.peak = sf_fkey_value((uint32_t)(key >> 32));
        u.s.peak_x = (int)(idx % (unsigned)nx);
        u.s.peak_y = (int)(idx / (unsigned)nx);
    }
    unsigned long long *o = (unsigned long long *)(out + i);
    for (int k = 0; k < (int)(sizeof(sf_source) / 8); k++)
        o[k] = u.w[k];
}

extern "C" sf_status sf_measure_check(const sf_image *img, const sf_labels *labels, int nlabels,
                                      const sf_source *out, sf_loc loc);

// launchers

extern "C" size_t sf_measure_gpu_scratch(int nx, int ny, int nlabels,
                                         const sf_measure_params *p)
{
    (void)nx;
    (void)ny;
    (void)p;
    if (nlabels <= 0)
        return 0;
    return MS_HDR + sf_align256((size_t)nlabels * MS_NWORDS * sizeof(unsigned long long));
}

extern "C" sf_status sf_measure_gpu(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                                    int nlabels, const sf_measure_params *p, sf_source *out)
{
    sf_status st = SF_OK;
    void *scratch = NULL;
    unsigned *mbits;
    unsigned long long *acc;
    size_t bytes;
    long long nruns;
    int rpr;
    unsigned blocks, maxblocks;

    (void)p;
    if (!g)
        return sf_fail(SF_ERR_PARAM, "measure (GPU): no GPU context");
    if ((st = sf_measure_check(img, labels, nlabels, out, SF_DEVICE)) != SF_OK)
        return st;
    if (nlabels == 0)
        return SF_OK;
    // The peak key holds the linear pixel index in 32 bits.
    if (sf_npix(img->nx, img->ny) > 0xFFFFFFFFull)
        return sf_fail(SF_ERR_PARAM, "measure (GPU): %dx%d is more than 2^32 pixels", img->nx,
                       img->ny);

    bytes = sf_measure_gpu_scratch(img->nx, img->ny, nlabels, p);
    SF_TRY(sf_gpu_scratch(g, bytes, &scratch));
    mbits = (unsigned *)scratch;
    acc = (unsigned long long *)((char *)scratch + MS_HDR);
    // (b) zero M and every accumulator (all-zero bits = empty).
    SF_CUDA(cudaMemsetAsync(scratch, 0, bytes, g->stream));

    rpr = (img->nx + MS_RUN - 1) / MS_RUN;
    nruns = (long long)img->ny * rpr;
    maxblocks = (unsigned)(g->sm_count > 0 ? g->sm_count : 1) * 16;
    blocks = sf_blocks((size_t)nruns, MS_THREADS);
    if (blocks > maxblocks)
        blocks = maxblocks;

    ms_max_kernel<<<blocks, MS_THREADS, 0, g->stream>>>(img->data, img->stride, labels->data,
                                                        labels->stride, img->nx, nruns, rpr,
                                                        nlabels, mbits);
    SF_LAUNCHED();
    ms_accum_kernel<<<blocks, MS_THREADS, 0, g->stream>>>(img->data, img->stride,
                                                          labels->data, labels->stride,
                                                          img->nx, nruns, rpr, nlabels, mbits,
                                                          acc);
    SF_LAUNCHED();
    ms_final_kernel<<<sf_blocks((size_t)nlabels, MS_THREADS), MS_THREADS, 0, g->stream>>>(
        acc, nlabels, img->nx, mbits, out);
    SF_LAUNCHED();
    return SF_OK;
fail:
    return st;
}
