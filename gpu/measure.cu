// Stage `measure`, GPU version (twin of cpu/measure.c): per-source
// measurements (skyfind/measure.h) in two passes over the pixels, as the CPU
// twin, after (a0) the list of the runs that hold a label: (a) over those
// runs, pixel counts, peaks, boxes, flags and the scales, (b) over them
// again, exact 128-bit fixed-point sums relative to each peak by atomics,
// then (c) one
// thread per label finishing with ms_finish (src/calc/measure_calc.h), the very
// code the CPU twin runs, so the catalogues are bit-identical.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "fix_atomic.cuh"
#include "skyfind/measure.h"
#include "measure_calc.h"

// Per-label accumulators in scratch:
//  w64: MS_W64 words: sum k as w[2k] = low word, w[2k+1] = high word (two's
//       complement), then the pixel count and the peak key
//       (sf_fkey(m) << 32 | (0xFFFFFFFF - linear index): the largest value,
//       then the first pixel in raster order). All zero = empty.
//  box: 4 words, atomicMin of x, ~x, y, ~y (so xmax, ymax are minima too);
//       all ones = empty.
//  fl:  2 words, the flags (atomicOr) and the seed local maxima (atomicAdd).
enum { MS_NPIX = 2 * MS_NSUM, MS_KEY, MS_W64 };

#define MS_RUN 16        // consecutive pixels of a row walked by one thread
#define MS_THREADS 256   // multiple of 32: loops are warp-uniform
#define MS_HDR 256       // scratch header: bits of max |m| and max |r| (unsigned), then
#define MS_NACTIVE 2     // ... (its word 2) the count of runs on ms_list_kernel's list

static_assert(sizeof(sf_source) % 8 == 0, "sf_source is written as 64-bit words");

// kernels

static __device__ __forceinline__ unsigned warp_max_u32(unsigned v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide max of two values, then one atomicMax each. |v| >= 0, so the
// float bits order like the values.
static __device__ void ms_block_max(unsigned a, unsigned b, unsigned *__restrict__ out)
{
    __shared__ unsigned wa[MS_THREADS / 32], wb[MS_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    a = warp_max_u32(a);
    b = warp_max_u32(b);
    if (lane == 0) {
        wa[warp] = a;
        wb[warp] = b;
    }
    __syncthreads();
    if (warp == 0) {
        a = warp_max_u32(lane < MS_THREADS / 32 ? wa[lane] : 0);
        b = warp_max_u32(lane < MS_THREADS / 32 ? wb[lane] : 0);
        if (lane == 0 && a)
            atomicMax(&out[0], a);
        if (lane == 0 && b)
            atomicMax(&out[1], b);
    }
}

// What pass (a) keeps for the label a thread is walking.
struct ms_scan_state {
    unsigned long long key;
    unsigned npix, flags, npeaks;
    unsigned box[4];
};

static __device__ __forceinline__ void ms_scan_reset(ms_scan_state *a)
{
    a->key = 0;
    a->npix = a->flags = a->npeaks = 0;
    for (int k = 0; k < 4; k++)
        a->box[k] = 0xFFFFFFFFu;
}

static __device__ __forceinline__ void ms_scan_flush(int l, const ms_scan_state *a,
                                                     unsigned long long *__restrict__ w64,
                                                     unsigned *__restrict__ box,
                                                     unsigned *__restrict__ fl)
{
    unsigned long long *w = w64 + (size_t)(l - 1) * MS_W64;
    if (a->npix) {
        atomicAdd(&w[MS_NPIX], (unsigned long long)a->npix);
        atomicMax(&w[MS_KEY], a->key);
        for (int k = 0; k < 4; k++)
            atomicMin(&box[(size_t)(l - 1) * 4 + k], a->box[k]);
    }
    if (a->flags)
        atomicOr(&fl[(size_t)(l - 1) * 2], a->flags);
    if (a->npeaks)
        atomicAdd(&fl[(size_t)(l - 1) * 2 + 1], a->npeaks);
}

// Run r's row y and its pixels [x0, x1) (rpr runs a row).
static __device__ __forceinline__ void ms_run_span(long long r, int rpr, int nx, int *y, int *x0,
                                                   int *x1)
{
    *y = (int)(r / rpr);
    *x0 = (int)(r - (long long)*y * rpr) * MS_RUN;
    *x1 = min(*x0 + MS_RUN, nx);
}

// (a0) The runs (MS_RUN consecutive pixels of a row) that hold a label, on
// a list (mbits[MS_NACTIVE] of them) that (a) and (b) walk: most runs hold
// none, and four 16-byte loads of the labels tell; with lm, the mask the
// labels were made from (no label lies outside it), one load of its bytes
// first, and the labels only of a run it sets (the islands too small to
// keep, and noise above the flood level, set a few per cent more): a
// quarter of the bytes read. The walks were once in this
// pass, a thread walking its run's pixels after the loads: a thread met
// islands in several of its grid-stride trips and each walk is a chain of
// dependent loads, so the pass took 210 us at 8192^2 on an H200 for 268 MB;
// walked from the list, every labelled run's walk runs at once.
static __global__ void ms_list_kernel(const int32_t *__restrict__ lab, size_t lstride,
                                      const uint8_t *__restrict__ lm, size_t lmstride, int nx,
                                      long long nruns, int rpr, unsigned *__restrict__ mbits,
                                      unsigned *__restrict__ active)
{
    const int lane = threadIdx.x & 31;
    const long long wstride = (long long)gridDim.x * blockDim.x;
    for (long long base = (blockIdx.x * (long long)blockDim.x + threadIdx.x) & ~31LL;
         base < nruns; base += wstride) {
        const long long r = base + lane;
        int any = 0;
        if (r < nruns) {
            int y, x0, x1;
            ms_run_span(r, rpr, nx, &y, &x0, &x1);
            const int32_t *lrow = lab + (size_t)y * lstride;
            const uint8_t *mrow = lm ? lm + (size_t)y * lmstride : NULL;
            int look = 1; // the labels to be read
            if (mrow && x1 - x0 == MS_RUN && !(reinterpret_cast<uintptr_t>(mrow + x0) & 15)) {
                const uint4 v = __ldg(reinterpret_cast<const uint4 *>(mrow + x0));
                look = (v.x | v.y | v.z | v.w) != 0;
            } else if (mrow) {
                int m = 0;
                for (int x = x0; x < x1; x++)
                    m |= mrow[x];
                look = m != 0;
            }
            if (look && x1 - x0 == MS_RUN && !(reinterpret_cast<uintptr_t>(lrow + x0) & 15)) {
                const int4 *q = reinterpret_cast<const int4 *>(lrow + x0);
#pragma unroll
                for (int k = 0; k < MS_RUN / 4; k++) {
                    const int4 v = __ldg(q + k);
                    any |= v.x | v.y | v.z | v.w;
                }
            } else if (look) {
                for (int x = x0; x < x1; x++)
                    any |= lrow[x];
            }
        }
        // all 32 lanes are here (base is warp-uniform)
        const unsigned bal = __ballot_sync(0xffffffffu, any != 0);
        unsigned at = 0;
        if (bal && lane == 0)
            at = atomicAdd(mbits + MS_NACTIVE, (unsigned)__popc(bal));
        at = __shfl_sync(0xffffffffu, at, 0);
        if (any)
            active[at + __popc(bal & ((1u << lane) - 1u))] = (unsigned)r;
    }
}

// (a) Thread r walks listed run r, keeping a private state while the label
// stays the same and flushing it with atomics when the label changes (the
// atomics are order-free: counts, maxima, minima, or). The loop is
// warp-uniform, so at the end of each trip a warp whose lanes all hold the
// same label (the inside of a large island) reduces by shuffles and
// flushes once.
static __global__ void ms_scan_kernel(const float *__restrict__ img, size_t istride,
                                      const int32_t *__restrict__ lab, size_t lstride, int nx,
                                      int ny, int rpr, int nlabels, ms_in in,
                                      unsigned *__restrict__ mbits,
                                      unsigned long long *__restrict__ w64,
                                      unsigned *__restrict__ box, unsigned *__restrict__ fl,
                                      const unsigned *__restrict__ active)
{
    const int lane = threadIdx.x & 31;
    const long long wstride = (long long)gridDim.x * blockDim.x;
    const long long nact = mbits[MS_NACTIVE];
    unsigned mmax = 0, rmax = 0;
    for (long long base = (blockIdx.x * (long long)blockDim.x + threadIdx.x) & ~31LL;
         base < nact; base += wstride) {
        const long long r = base + lane < nact ? (long long)active[base + lane] : -1;
        int cur = 0;
        ms_scan_state a;
        ms_scan_reset(&a);
        if (r >= 0) {
            int y, x0, x1;
            ms_run_span(r, rpr, nx, &y, &x0, &x1);
            const float *row = img + (size_t)y * istride;
            const int32_t *lrow = lab + (size_t)y * lstride;
            for (int x = x0; x < x1; x++) {
                const int32_t l = lrow[x];
                // out-of-range labels are skipped (the CPU twin reports them)
                if (l <= 0 || l > nlabels)
                    continue;
                if (l != cur) {
                    if (cur)
                        ms_scan_flush(cur, &a, w64, box, fl);
                    cur = l;
                    ms_scan_reset(&a);
                }
                const float m = ms_value(row[x], &in, x, y);
                if (!isfinite(m)) {
                    a.flags |= SF_SRC_NAN;
                    continue;
                }
                a.npix++;
                const unsigned idx = (unsigned)((size_t)y * (size_t)nx + (size_t)x);
                const unsigned long long kk =
                    ((unsigned long long)sf_fkey(m) << 32) | (0xFFFFFFFFu - idx);
                a.key = kk > a.key ? kk : a.key;
                a.box[0] = min(a.box[0], (unsigned)x);
                a.box[1] = min(a.box[1], ~(unsigned)x);
                a.box[2] = min(a.box[2], (unsigned)y);
                a.box[3] = min(a.box[3], ~(unsigned)y);
                mmax = max(mmax, __float_as_uint(fabsf(m)));
                const float rn = ms_noise(&in, x, y);
                if (!isfinite(rn))
                    a.flags |= MS_FLAG_NOISE_BAD;
                else
                    rmax = max(rmax, __float_as_uint(fabsf(rn)));
                const int look = ms_look_around(
                    img, istride, lab, lstride, &in, nx, ny, x, y, l, m,
                    in.mask && MS_IS_SEED(in.mask[(size_t)y * in.mstride + x]));
                a.flags |= look & SF_SRC_NAN;
                a.npeaks += (look & MS_IS_PEAK) != 0;
            }
        }
        const int c0 = __shfl_sync(0xffffffffu, cur, 0);
        if (__all_sync(0xffffffffu, cur == c0)) {
            if (c0 != 0) {
                for (int o = 16; o > 0; o >>= 1) {
                    const unsigned long long ko = __shfl_xor_sync(0xffffffffu, a.key, o);
                    a.key = ko > a.key ? ko : a.key;
                    a.npix += __shfl_xor_sync(0xffffffffu, a.npix, o);
                    a.flags |= __shfl_xor_sync(0xffffffffu, a.flags, o);
                    a.npeaks += __shfl_xor_sync(0xffffffffu, a.npeaks, o);
                    for (int k = 0; k < 4; k++)
                        a.box[k] = min(a.box[k], __shfl_xor_sync(0xffffffffu, a.box[k], o));
                }
                if (lane == 0)
                    ms_scan_flush(c0, &a, w64, box, fl);
            }
        } else if (cur) {
            ms_scan_flush(cur, &a, w64, box, fl);
        }
    }
    ms_block_max(mmax, rmax, mbits);
}

static __device__ __forceinline__ void ms_sums_flush(unsigned long long *w, const sf_fix128 *s)
{
    for (int k = 0; k < MS_NSUM; k++)
        sf_atomic_add128(&w[2 * k], s[k]);
}

static __device__ __forceinline__ int ms_exponent(unsigned bits, int shift, int noise)
{
    const double v = (double)__uint_as_float(bits);
    return sf_fix_exponent(noise ? ms_mul(v, v) : v) - shift;
}

// (b) The sums, over the runs (a0) listed (a source covers a few per cent of
// the image at most: the second walk of every label was 0.49 ms at 8192^2),
// each walked as in (a); the anchor of each label (its peak pixel) comes
// from the key pass (a) left.
static __global__ void ms_accum_kernel(const float *__restrict__ img, size_t istride,
                                       const int32_t *__restrict__ lab, size_t lstride, int nx,
                                       int rpr, int nlabels, ms_in in,
                                       int shift, const unsigned *__restrict__ mbits,
                                       unsigned long long *__restrict__ w64,
                                       const unsigned *__restrict__ active)
{
    const int lane = threadIdx.x & 31;
    const double scale = ldexp(1.0, ms_exponent(mbits[0], shift, 0));
    const double rscale = ldexp(1.0, ms_exponent(mbits[1], shift, 1));
    const long long wstride = (long long)gridDim.x * blockDim.x;
    // the runs that met a label, in any order: the sums are exact, so order-free
    const long long nact = mbits[MS_NACTIVE];
    for (long long base = (blockIdx.x * (long long)blockDim.x + threadIdx.x) & ~31LL;
         base < nact; base += wstride) {
        const long long r = base + lane < nact ? (long long)active[base + lane] : -1;
        int cur = 0, ax = 0, ay = 0;
        sf_fix128 s[MS_NSUM];
        for (int k = 0; k < MS_NSUM; k++)
            s[k] = sf_fix_zero();
        if (r >= 0) {
            int y, x0, x1;
            ms_run_span(r, rpr, nx, &y, &x0, &x1);
            const float *row = img + (size_t)y * istride;
            const int32_t *lrow = lab + (size_t)y * lstride;
            for (int x = x0; x < x1; x++) {
                const int32_t l = lrow[x];
                if (l <= 0 || l > nlabels)
                    continue;
                const float m = ms_value(row[x], &in, x, y);
                if (!isfinite(m))
                    continue;
                if (l != cur) {
                    if (cur)
                        ms_sums_flush(w64 + (size_t)(cur - 1) * MS_W64, s);
                    cur = l;
                    for (int k = 0; k < MS_NSUM; k++)
                        s[k] = sf_fix_zero();
                    const unsigned long long key = w64[(size_t)(l - 1) * MS_W64 + MS_KEY];
                    const unsigned idx = 0xFFFFFFFFu - (unsigned)(key & 0xFFFFFFFFull);
                    ax = (int)(idx % (unsigned)nx);
                    ay = (int)(idx / (unsigned)nx);
                }
                const double dx = (double)(x - ax), dy = (double)(y - ay);
                ms_add_terms(&s[MS_V], ms_mul((double)m, scale), dx, dy);
                const float rn = ms_noise(&in, x, y);
                if (isfinite(rn))
                    ms_add_terms(&s[MS_R], ms_mul(ms_mul((double)rn, (double)rn), rscale), dx,
                                 dy);
            }
        }
        const int c0 = __shfl_sync(0xffffffffu, cur, 0);
        if (__all_sync(0xffffffffu, cur == c0)) {
            if (c0 != 0) {
                for (int o = 16; o > 0; o >>= 1)
                    for (int k = 0; k < MS_NSUM; k++) {
                        sf_fix128 t;
                        t.lo = __shfl_xor_sync(0xffffffffu, (unsigned long long)s[k].lo, o);
                        t.hi = (int64_t)__shfl_xor_sync(0xffffffffu,
                                                        (unsigned long long)s[k].hi, o);
                        sf_fix_add(&s[k], t);
                    }
                if (lane == 0)
                    ms_sums_flush(w64 + (size_t)(c0 - 1) * MS_W64, s);
            }
        } else if (cur) {
            ms_sums_flush(w64 + (size_t)(cur - 1) * MS_W64, s);
        }
    }
}

// (c) One thread per label: the totals, then ms_finish as on the CPU; the
// sf_source is written as whole 64-bit words.
static __global__ void ms_final_kernel(const unsigned long long *__restrict__ w64,
                                       const unsigned *__restrict__ box,
                                       const unsigned *__restrict__ fl, int nlabels, int nx,
                                       int ny, ms_in in, int shift, int have_mask,
                                       const unsigned *__restrict__ mbits,
                                       sf_source *__restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nlabels)
        return;
    const unsigned long long *w = w64 + (size_t)i * MS_W64;
    const unsigned *b = box + (size_t)i * 4;
    union {
        sf_source s;
        unsigned long long w[sizeof(sf_source) / 8];
    } u;
    ms_totals t;
    memset(&t, 0, sizeof t);
    for (int k = 0; k < MS_NSUM; k++) {
        t.s[k].lo = w[2 * k];
        t.s[k].hi = (int64_t)w[2 * k + 1];
    }
    t.npix = w[MS_NPIX];
    t.flags = (int)fl[(size_t)i * 2];
    t.npeaks = have_mask ? (int)fl[(size_t)i * 2 + 1] : -1;
    if (t.npix) {
        const unsigned long long key = w[MS_KEY];
        const unsigned idx = 0xFFFFFFFFu - (unsigned)(key & 0xFFFFFFFFull);
        const int px = (int)(idx % (unsigned)nx), py = (int)(idx / (unsigned)nx);
        t.peak = sf_fkey_value((uint32_t)(key >> 32));
        t.peak_x = px;
        t.peak_y = py;
        t.xmin = (int)b[0];
        t.xmax = (int)~b[1];
        t.ymin = (int)b[2];
        t.ymax = (int)~b[3];
        t.bkg = in.bkg ? in.bkg[(size_t)py * in.bstride + px] : in.level_out;
        t.rms = ms_noise(&in, px, py);
    }
    for (int k = 0; k < (int)(sizeof(sf_source) / 8); k++)
        u.w[k] = 0;
    ms_finish(&t, i + 1, ms_exponent(mbits[0], shift, 0), ms_exponent(mbits[1], shift, 1), nx,
              ny, &u.s);
    unsigned long long *o = (unsigned long long *)(out + i);
    for (int k = 0; k < (int)(sizeof(sf_source) / 8); k++)
        o[k] = u.w[k];
}

// launchers

static size_t ms_w64_bytes(int n) { return sf_align256((size_t)n * MS_W64 * 8); }
static size_t ms_box_bytes(int n) { return sf_align256((size_t)n * 4 * sizeof(unsigned)); }
static size_t ms_fl_bytes(int n) { return sf_align256((size_t)n * 2 * sizeof(unsigned)); }
// Runs of MS_RUN pixels a row, and in the image.
static int ms_rpr(int nx) { return (nx + MS_RUN - 1) / MS_RUN; }
static long long ms_nruns(int nx, int ny) { return (long long)ny * ms_rpr(nx); }
// the list of runs that met a label: a run index each
static size_t ms_act_bytes(int nx, int ny)
{
    return sf_align256((size_t)ms_nruns(nx, ny) * sizeof(unsigned));
}

extern "C" size_t sf_measure_gpu_scratch(int nx, int ny, int nlabels,
                                         const sf_measure_params *p)
{
    (void)p;
    if (nlabels <= 0)
        return 0;
    return MS_HDR + ms_w64_bytes(nlabels) + ms_box_bytes(nlabels) + ms_fl_bytes(nlabels) +
           ms_act_bytes(nx, ny);
}

extern "C" sf_status sf_measure_gpu(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                                    int nlabels, const sf_measure_aux *aux,
                                    const sf_measure_params *p, sf_source *out)
{
    sf_status st = SF_OK;
    void *scratch = NULL;
    char *base;
    unsigned *mbits, *box, *fl, *active;
    unsigned long long *w64;
    ms_in in;
    long long nruns;
    int rpr, shift;
    unsigned blocks, maxblocks;
    const sf_mask *lm;

    if (!g)
        return sf_fail(SF_ERR_PARAM, "measure (GPU): no GPU context");
    if ((st = sf_measure_check(img, labels, nlabels, aux, out, SF_DEVICE)) != SF_OK)
        return st;
    if (nlabels == 0)
        return SF_OK;
    // The peak key holds the linear pixel index in 32 bits.
    if (sf_npix(img->nx, img->ny) > 0xFFFFFFFFull)
        return sf_fail(SF_ERR_PARAM, "measure (GPU): %dx%d is more than 2^32 pixels", img->nx,
                       img->ny);
    sf_measure_inputs(aux, p, &in);
    shift = ms_scale_shift(img->nx, img->ny);
    // SKYFIND_MEASURE_MASK=0 (a developer knob, for A/B runs): the labels read
    lm = aux && aux->labels_in_mask && !(getenv("SKYFIND_MEASURE_MASK") &&
                                         !strcmp(getenv("SKYFIND_MEASURE_MASK"), "0"))
             ? aux->mask
             : NULL;

    SF_TRY(sf_gpu_scratch(g, sf_measure_gpu_scratch(img->nx, img->ny, nlabels, p), &scratch));
    base = (char *)scratch;
    mbits = (unsigned *)base;
    w64 = (unsigned long long *)(base + MS_HDR);
    box = (unsigned *)(base + MS_HDR + ms_w64_bytes(nlabels));
    fl = (unsigned *)((char *)box + ms_box_bytes(nlabels));
    active = (unsigned *)((char *)fl + ms_fl_bytes(nlabels));
    // empty accumulators: zero sums, counts, keys, flags; all-ones boxes
    SF_CUDA(cudaMemsetAsync(base, 0, MS_HDR + ms_w64_bytes(nlabels), g->stream));
    SF_CUDA(cudaMemsetAsync(box, 0xFF, ms_box_bytes(nlabels), g->stream));
    SF_CUDA(cudaMemsetAsync(fl, 0, ms_fl_bytes(nlabels), g->stream));

    rpr = ms_rpr(img->nx);
    nruns = ms_nruns(img->nx, img->ny);
    maxblocks = (unsigned)(g->sm_count > 0 ? g->sm_count : 1) * 16;
    blocks = sf_blocks((size_t)nruns, MS_THREADS);
    if (blocks > maxblocks)
        blocks = maxblocks;

    ms_list_kernel<<<blocks, MS_THREADS, 0, g->stream>>>(labels->data, labels->stride,
                                                         lm ? lm->data : NULL, lm ? lm->stride : 0,
                                                         img->nx, nruns, rpr, mbits, active);
    SF_LAUNCHED();
    ms_scan_kernel<<<blocks, MS_THREADS, 0, g->stream>>>(
        img->data, img->stride, labels->data, labels->stride, img->nx, img->ny, rpr, nlabels, in,
        mbits, w64, box, fl, active);
    SF_LAUNCHED();
    ms_accum_kernel<<<blocks, MS_THREADS, 0, g->stream>>>(img->data, img->stride,
                                                          labels->data, labels->stride,
                                                          img->nx, rpr, nlabels, in,
                                                          shift, mbits, w64, active);
    SF_LAUNCHED();
    ms_final_kernel<<<sf_blocks((size_t)nlabels, MS_THREADS), MS_THREADS, 0, g->stream>>>(
        w64, box, fl, nlabels, img->nx, img->ny, in, shift, in.mask != NULL, mbits, out);
    SF_LAUNCHED();
    return SF_OK;
fail:
    return st;
}
