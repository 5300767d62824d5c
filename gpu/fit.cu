// Stage `fit`, GPU version (twin of cpu/fit.c): Gaussian components of every
// island by Levenberg-Marquardt (skyfind/fit.h), one block per island, all
// islands at once. Each island's sums are taken in the CPU twin's order (32
// pixels of a chunk reduced by a shuffle-xor butterfly, chunks in raster
// order; src/calc/fit_calc.h), so the components are the CPU's bit for bit.
//
// Kernels in launch order:
//   fit_caps     each island's room: the measure stage's npix of its objects
//                (a usable pixel is a measured one: m finite, and the rms
//                finite and > 0), so the image is scanned once, not twice
//   fit_scatter  the usable pixels' linear indices into each island's
//                segment (atomics; labels read only under the threshold mask)
//   fit_ends     each segment's end (a count over the room: an error)
//   fit_sort     each segment in raster order (a block radix sort of each
//                tile of 2048 in shared memory, the tiles merged)
//   fit_seeds    per island: the pixels' m and weights, the box, the largest
//                m, the bounds, and the component seeds (objects, or local
//                maxima: each thread's top-K in its slots of shared memory,
//                merged by thread 0)
//                and its work size (pixels x (6 components + 1)); two scans
//                then place each island's components and Jacobian rows
//   fit_lm       per island: the guesses, Levenberg-Marquardt (the pixel
//                passes by all threads, each sum by one warp, warp 0 solving:
//                lm_solve_warp), the final sums and the components
//   fit_totals   the components' and Jacobians' totals and fit_ends' report,
//                one download
//   fit_finish   per component: the derived values (sizes, errors,
//                deconvolution), as the CPU's sf_fit_finish
// Then the host side, sf_fit_gpu_device: the island tables carved in the
// scratch, the launches above, and one or two downloads (the rooms' total,
// which sizes the pixel buffers, unless the segment stage's count of
// labelled pixels bounds it: sf_fit_in.npix; the totals). The components
// stay on the device: sf_fit_gpu brings them down, the pipeline runner
// with its catalogue after the last stage.
#include <stdint.h>
#include <string.h>
#include <cub/cub.cuh>
#include "common.cuh"
#include "scan_small.cuh"
#include "skyfind/fit.h"
#include "fit_calc.h"
#include "fit_host.h"

#define FIT_THREADS 128  // fit_seeds
#define LM_THREADS 256   // fit_lm
#define LM_WARPS (LM_THREADS / 32)

// kernels

// The usable labelled pixels of the image, f(island index, linear index):
// a thread takes 16 consecutive pixels of a row and reads the labels only
// where the threshold mask is set (labels lie inside it), 16 mask bytes at
// once where they are aligned.
#define FIT_RUN 16
template <typename F>
static __device__ __forceinline__ void island_pixels(const float *__restrict__ img, size_t istride,
                                                     const int32_t *__restrict__ lab, size_t lstride,
                                                     const uint8_t *__restrict__ mask, size_t mstride,
                                                     const ms_in &mi, const int *__restrict__ isl_of,
                                                     int nobj, int nx, int ny, F f)
{
    const unsigned nxb = ((unsigned)nx + FIT_RUN - 1) / FIT_RUN, items = nxb * (unsigned)ny;
    for (unsigned w = blockIdx.x * blockDim.x + threadIdx.x; w < items; w += gridDim.x * blockDim.x) {
        const int y = (int)(w / nxb), x0 = (int)(w % nxb) * FIT_RUN;
        const int x1 = min(nx, x0 + FIT_RUN);
        unsigned char mb[FIT_RUN];
        if (mask) {
            const uint8_t *mrow = mask + (size_t)y * mstride + x0;
            if (x1 - x0 == FIT_RUN && ((uintptr_t)mrow & 15) == 0) {
                const uint4 v = *(const uint4 *)mrow;
                if ((v.x | v.y | v.z | v.w) == 0)
                    continue;
                memcpy(mb, &v, FIT_RUN);
            } else {
                for (int x = x0; x < x1; x++)
                    mb[x - x0] = mrow[x - x0];
            }
        }
        for (int x = x0; x < x1; x++) {
            int32_t l;
            float m, r;
            if (mask && !mb[x - x0])
                continue;
            l = lab[(size_t)y * lstride + x];
            if (l <= 0 || l > nobj)
                continue;
            if (sf_fit_usable(img[(size_t)y * istride + x], &mi, x, y, &m, &r))
                f(isl_of[l] - 1, (unsigned)((size_t)y * nx + x));
        }
    }
}

static __global__ void fit_caps(const sf_source *__restrict__ src, int nobj,
                                const int *__restrict__ isl_of, unsigned *__restrict__ cap)
{
    const int l = blockIdx.x * blockDim.x + threadIdx.x + 1;
    if (l <= nobj && src[l - 1].npix > 0)
        atomicAdd(&cap[isl_of[l] - 1], (unsigned)src[l - 1].npix);
}

static __global__ void fit_scatter(const float *__restrict__ img, size_t istride,
                                   const int32_t *__restrict__ lab, size_t lstride,
                                   const uint8_t *__restrict__ mask, size_t mstride, ms_in mi,
                                   const int *__restrict__ isl_of, int nobj, int nx, int ny,
                                   const unsigned *__restrict__ poff,
                                   const unsigned *__restrict__ cap, unsigned *__restrict__ cur,
                                   unsigned *__restrict__ keys, unsigned room)
{
    island_pixels(img, istride, lab, lstride, mask, mstride, mi, isl_of, nobj, nx, ny,
                  [&](int k, unsigned p) {
                      const unsigned j = atomicAdd(&cur[k], 1u);
                      if (j < cap[k] && poff[k] + j < room) // else fit_ends reports it
                          keys[poff[k] + j] = p;
                  });
}

// The segments' ends; *over: 1, an island with more usable pixels than its
// room; 2, rooms past the buffer's `room` slots (the segment stage's count,
// when the host sized the buffer by it: their segments are left empty).
static __global__ void fit_ends(const unsigned *__restrict__ poff, const unsigned *__restrict__ cap,
                                const unsigned *__restrict__ cur, int N, unsigned *__restrict__ pend,
                                unsigned *__restrict__ over, unsigned room)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < N) {
        const bool past = (unsigned long long)poff[k] + cap[k] > room;
        pend[k] = past ? poff[k] : poff[k] + min(cur[k], cap[k]);
        if (past)
            *over = 2;
        else if (cur[k] > cap[k])
            *over = 1;
    }
}

// Each island's pixels in raster order: block k sorts in[poff[k], pend[k])
// (unique linear indices below 2^bits) into out at the same place. Up to
// FIT_SORT_TILE keys: one block radix sort in shared memory. More: each
// tile of that many sorted so, then runs of 2, 4, ... tiles merged pairwise
// (each thread its share of a pair's output: its start found by a binary
// search along the merge path), between out and the segment's part of in,
// which the tiles have been read from; copied into out if it ends in in.
// No count comes back to the host (cub's segmented sort read its segments'
// sizes back before launching its kernels).
#define FIT_SORT_THREADS 256
#define FIT_SORT_ITEMS 8
#define FIT_SORT_TILE (FIT_SORT_THREADS * FIT_SORT_ITEMS)
typedef cub::BlockRadixSort<unsigned, FIT_SORT_THREADS, FIT_SORT_ITEMS> fit_sort_block;

static __device__ void fit_sort_tile(const unsigned *__restrict__ src, unsigned *__restrict__ dst,
                                     unsigned n, int bits, fit_sort_block::TempStorage &tmp)
{
    unsigned k[FIT_SORT_ITEMS];
#pragma unroll
    for (int q = 0; q < FIT_SORT_ITEMS; q++) {
        const unsigned i = threadIdx.x * FIT_SORT_ITEMS + q;
        // past n: after every key (a stable sort keeps ties in order)
        k[q] = i < n ? src[i] : 0xFFFFFFFFu;
    }
    fit_sort_block(tmp).Sort(k, 0, bits);
#pragma unroll
    for (int q = 0; q < FIT_SORT_ITEMS; q++) {
        const unsigned i = threadIdx.x * FIT_SORT_ITEMS + q;
        if (i < n)
            dst[i] = k[q];
    }
    __syncthreads(); // tmp is reused by the next tile
}

// Outputs [d0, d1) of the merge of the sorted a (na) and b (nb) into o.
static __device__ void fit_merge_part(const unsigned *__restrict__ a, unsigned na,
                                      const unsigned *__restrict__ b, unsigned nb,
                                      unsigned *__restrict__ o, unsigned d0, unsigned d1)
{
    // i: how many of a come before output d0 (the keys are unique)
    unsigned lo = d0 > nb ? d0 - nb : 0, hi = d0 < na ? d0 : na;
    while (lo < hi) {
        const unsigned mid = (lo + hi) / 2;
        if (a[mid] < b[d0 - 1 - mid])
            lo = mid + 1;
        else
            hi = mid;
    }
    unsigned i = lo, j = d0 - lo;
    for (unsigned d = d0; d < d1; d++)
        o[d] = j >= nb || (i < na && a[i] < b[j]) ? a[i++] : b[j++];
}

static __global__ void __launch_bounds__(FIT_SORT_THREADS)
fit_sort(unsigned *in, unsigned *out, const unsigned *__restrict__ poff,
         const unsigned *__restrict__ pend, int bits)
{
    __shared__ fit_sort_block::TempStorage tmp;
    const unsigned a0 = poff[blockIdx.x], n = pend[blockIdx.x] - a0;
    unsigned *src = out + a0, *dst = in + a0;
    if (n == 0)
        return;
    for (unsigned t = 0; t < n; t += FIT_SORT_TILE)
        fit_sort_tile(in + a0 + t, out + a0 + t, min(n - t, (unsigned)FIT_SORT_TILE), bits, tmp);
    for (unsigned run = FIT_SORT_TILE; run < n; run *= 2) {
        for (unsigned s = 0; s < n; s += 2 * run) {
            const unsigned na = min(run, n - s), nb = n - s > run ? min(run, n - s - run) : 0;
            const unsigned len = na + nb, per = (len + FIT_SORT_THREADS - 1) / FIT_SORT_THREADS;
            const unsigned d0 = min(len, threadIdx.x * per), d1 = min(len, d0 + per);
            fit_merge_part(src + s, na, src + s + na, nb, dst + s, d0, d1);
        }
        __syncthreads();
        unsigned *t = src;
        src = dst;
        dst = t;
    }
    if (src != out + a0) {
        for (unsigned i = threadIdx.x; i < n; i += FIT_SORT_THREADS)
            out[a0 + i] = src[i];
    }
}

struct fit_args {
    const float *img;
    size_t istride;
    const int32_t *lab;
    size_t lstride;
    ms_in mi;
    const int *isl_of;
    const int *ooff, *olist;  // objects of each island (components=objects)
    const sf_source *src;
    sf_fit_in in;              // beam and counts (pointers unused on the device)
    int nx, ny, mode, K, max_iter;
    double nsig;
    sf_fit_cov2 beam;
    const unsigned *poff, *pend; // island pixels: [poff[k], pend[k])
    const unsigned *keys;
    sf_fit_px *px;
    sf_fit_seed *seeds;        // SF_FIT_MAXCOMP per island
    int *nc, *more;
    sf_fit_bounds *bounds;
    unsigned long long *jsz;   // per island: pixels x (6 nc + 1)
    const unsigned *coff;      // components of island k from coff[k]
    const unsigned long long *joff;
    double *J;
    sf_component *out;
};

// The pixels, box, bounds and seeds of island blockIdx.x.
static __global__ void __launch_bounds__(FIT_THREADS) fit_seeds(fit_args a)
{
    __shared__ int bx0[FIT_THREADS], bx1[FIT_THREADS], by0[FIT_THREADS], by1[FIT_THREADS];
    __shared__ float bm[FIT_THREADS], bb[FIT_THREADS];
    __shared__ long long bi[FIT_THREADS];
    __shared__ sf_fit_seed cand[FIT_THREADS * SF_FIT_MAXCOMP];
    __shared__ int ncand[FIT_THREADS], cmore[FIT_THREADS];
    const int k = blockIdx.x, t = threadIdx.x;
    const long long p0 = a.poff[k], n = (long long)a.pend[k] - p0;
    sf_fit_seed *sd = a.seeds + (size_t)k * SF_FIT_MAXCOMP;
    int x0 = INT_MAX, x1 = INT_MIN, y0 = INT_MAX, y1 = INT_MIN;
    float mmax = -INFINITY, best = NAN;
    long long bidx = -1;
    int nmine = 0, mmore = 0;
    for (long long i = t; i < n; i += FIT_THREADS) {
        const unsigned p = a.keys[p0 + i];
        const int x = (int)(p % (unsigned)a.nx), y = (int)(p / (unsigned)a.nx);
        float m, r;
        sf_fit_usable(a.img[(size_t)y * a.istride + x], &a.mi, x, y, &m, &r);
        sf_fit_px_set(&a.px[p0 + i], x, y, m, r);
        x0 = min(x0, x);
        x1 = max(x1, x);
        y0 = min(y0, y);
        y1 = max(y1, y);
        mmax = fmaxf(mmax, m);
        if (bidx < 0 || sf_fit_before(m, i, best, bidx)) {
            best = m;
            bidx = i;
        }
        // the thread's own brightest-first list, in its slots of cand
        if (a.mode == SF_FIT_MAXIMA &&
            sf_fit_is_max(a.img, a.istride, a.lab, a.lstride, &a.mi, a.isl_of, a.nx, a.ny, x, y,
                          k + 1, m, a.nsig, sf_fit_max_reach(&a.in)))
            sf_fit_seed_insert(cand + t * SF_FIT_MAXCOMP, &nmine, a.K, m, (long long)y * a.nx + x,
                               &mmore);
    }
    bx0[t] = x0;
    bx1[t] = x1;
    by0[t] = y0;
    by1[t] = y1;
    bm[t] = mmax;
    bb[t] = best;
    bi[t] = bidx;
    ncand[t] = nmine;
    cmore[t] = mmore;
    __syncthreads();
    if (t == 0) {
        // the box, the largest m, the brightest pixel (the fallback seed) and
        // the seeds: objects in label order, or every thread's maxima merged
        float fb = NAN;
        long long fi = -1;
        int nc = 0, more = 0;
        for (int u = 0; u < FIT_THREADS; u++) {
            x0 = min(x0, bx0[u]);
            x1 = max(x1, bx1[u]);
            y0 = min(y0, by0[u]);
            y1 = max(y1, by1[u]);
            mmax = fmaxf(mmax, bm[u]);
            if (bi[u] >= 0 && (fi < 0 || sf_fit_before(bb[u], bi[u], fb, fi))) {
                fb = bb[u];
                fi = bi[u];
            }
        }
        if (n == 0)
            x0 = x1 = y0 = y1 = 0, mmax = 0.0f;
        sf_fit_bounds_box(&a.bounds[k], x0, x1, y0, y1, mmax, &a.in);
        if (a.mode == SF_FIT_OBJECTS) {
            for (int j = a.ooff[k + 1]; j < a.ooff[k + 2]; j++)
                sf_fit_seed_insert(sd, &nc, a.K, a.src[a.olist[j] - 1].peak, a.olist[j], &more);
        } else {
            for (int u = 0; u < FIT_THREADS; u++) {
                more |= cmore[u];
                for (int j = 0; j < ncand[u]; j++)
                    sf_fit_seed_insert(sd, &nc, a.K, cand[u * SF_FIT_MAXCOMP + j].m,
                                       cand[u * SF_FIT_MAXCOMP + j].key, &more);
            }
            if (nc == 0 && fi >= 0) {
                const sf_fit_px q = a.px[p0 + fi];
                sd[0].m = q.m;
                sd[0].key = (long long)q.y * a.nx + q.x;
                nc = 1;
            }
        }
        a.nc[k] = nc;
        a.more[k] = more;
        a.jsz[k] = (unsigned long long)n * (unsigned long long)(SF_FIT_NP * nc + 1);
    }
}

// One canonical sum over the island's n pixels of f(i), by the calling warp
// (every lane gets it): lane l adds f(l), f(l + 32), ... in order, then the
// butterfly.
template <typename F>
static __device__ __forceinline__ double warp_sum(long long n, F f)
{
    const int lane = threadIdx.x & 31;
    double v = 0.0;
    for (long long i = lane; i < n; i += SF_FIT_LANES)
        v = ms_add(v, f(i));
    for (int off = SF_FIT_LANES / 2; off > 0; off >>= 1)
        v = ms_add(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Entry (i, j), j <= i, of packed index e.
static __device__ __forceinline__ void tri_ij(int e, int *i, int *j)
{
    int r = (int)((sqrt(8.0 * e + 1.0) - 1.0) / 2.0);
    while (r * (r + 1) / 2 > e)
        r--;
    while ((r + 1) * (r + 2) / 2 <= e)
        r++;
    *i = r;
    *j = e - r * (r + 1) / 2;
}

// Warp 0: the damped matrix, its Cholesky factor (right-looking, column by
// column), the substitutions (column-oriented: every entry sees the CPU
// twin's sequence of operations) and the projected trial. Returns 0 when the
// matrix is not positive definite.
static __device__ int lm_solve_warp(const double *jtj, double *A, const double *g, double *dl,
                                    const double *par, double *trial, int np, int nc,
                                    double lambda, const sf_fit_bounds *b)
{
    const int lane = threadIdx.x & 31, T = np * (np + 1) / 2;
    double dmax = 0.0, dfloor;
    int ok = 1;
    for (int j = lane; j < np; j += 32)
        dmax = fmax(dmax, jtj[sf_fit_tri(j, j)]);
    for (int off = 16; off > 0; off >>= 1)
        dmax = fmax(dmax, __shfl_xor_sync(0xffffffffu, dmax, off));
    dfloor = sf_fit_dfloor(dmax);
    for (int e = lane; e < T; e += 32) {
        int i, j;
        tri_ij(e, &i, &j);
        A[e] = i == j ? sf_fit_damped(jtj[e], lambda, dfloor) : jtj[e];
    }
    __syncwarp();
    for (int j = 0; j < np; j++) {
        const double d = A[sf_fit_tri(j, j)];
        if (!(d > 0) || !(d < INFINITY)) {
            ok = 0;
            break;
        }
        const double l = ms_sqrt(d);
        __syncwarp();
        if (lane == 0)
            A[sf_fit_tri(j, j)] = l;
        for (int i = j + 1 + lane; i < np; i += 32)
            A[sf_fit_tri(i, j)] = ms_div(A[sf_fit_tri(i, j)], l);
        __syncwarp();
        {
            const int m = np - j - 1;
            for (int e = lane; e < m * (m + 1) / 2; e += 32) {
                int i, c;
                tri_ij(e, &i, &c);
                i += j + 1;
                c += j + 1;
                A[sf_fit_tri(i, c)] =
                    ms_sub(A[sf_fit_tri(i, c)], ms_mul(A[sf_fit_tri(i, j)], A[sf_fit_tri(c, j)]));
            }
        }
        __syncwarp();
    }
    if (!ok)
        return 0;
    // L y = g, then L^T dl = y (dl holds the running sums)
    for (int i = lane; i < np; i += 32)
        dl[i] = g[i];
    __syncwarp();
    for (int j = 0; j < np; j++) {
        const double x = ms_div(dl[j], A[sf_fit_tri(j, j)]);
        __syncwarp();
        if (lane == 0)
            dl[j] = x;
        for (int i = j + 1 + lane; i < np; i += 32)
            dl[i] = ms_sub(dl[i], ms_mul(A[sf_fit_tri(i, j)], x));
        __syncwarp();
    }
    for (int j = np - 1; j >= 0; j--) {
        const double x = ms_div(dl[j], A[sf_fit_tri(j, j)]);
        __syncwarp();
        if (lane == 0)
            dl[j] = x;
        for (int i = lane; i < j; i += 32)
            dl[i] = ms_sub(dl[i], ms_mul(A[sf_fit_tri(j, i)], x));
        __syncwarp();
    }
    for (int q = lane; q < np; q += 32)
        trial[q] = ms_add(par[q], dl[q]);
    __syncwarp();
    for (int c = lane; c < nc; c += 32)
        sf_fit_project(trial + SF_FIT_NP * c, b);
    __syncwarp();
    return 1;
}

// The LM fit of island blockIdx.x.
static __global__ void __launch_bounds__(LM_THREADS) fit_lm(fit_args a)
{
    extern __shared__ double sh[];
    __shared__ sf_fit_lm s;
    __shared__ int accepted, solved;
    __shared__ double red[2];
    const int k = blockIdx.x, t = threadIdx.x, warp = t >> 5, lane = t & 31;
    const int nc = a.nc[k], np = SF_FIT_NP * nc, npmax = SF_FIT_NP * a.K;
    const int T = npmax * (npmax + 1) / 2;
    const long long p0 = a.poff[k], n = (long long)a.pend[k] - p0;
    const sf_fit_px *px = a.px + p0;
    const sf_fit_bounds b = a.bounds[k];
    const sf_fit_seed *sd = a.seeds + (size_t)k * SF_FIT_MAXCOMP;
    double *par = sh, *trial = par + npmax, *g = trial + npmax, *dl = g + npmax, *jtj = dl + npmax,
           *A = jtj + T;
    double *J = a.J + a.joff[k]; // np + 1 columns of n: derivatives, residual
    const int ne = np * (np + 1) / 2 + np + 1; // JTJ, g, chi^2
    if (nc == 0)
        return;
    if (t == 0) {
        sf_fit_seed_guess(sd, nc, a.src, a.nx, a.mode, &a.beam, &b, par);
        memset(&s, 0, sizeof s);
        s.lambda = SF_FIT_LAMBDA0;
        s.status = (n < np || b.amax <= 0) ? SF_FIT_SKIPPED : SF_FIT_MAXITER;
    }
    __syncthreads();
    // the normal equations at par: rows of J, then each sum by one warp
#define NORMAL_EQ()                                                                          \
    do {                                                                                     \
        for (long long i = t; i < n; i += LM_THREADS)                                        \
            J[(size_t)np * n + i] = sf_fit_pixel(par, nc, px[i].x, px[i].y, px[i].m, px[i].w, \
                                                 J + i, (size_t)n);                          \
        __syncthreads();                                                                     \
        for (int e = warp; e < ne; e += LM_WARPS) {                                          \
            int ia, ib;                                                                      \
            double v;                                                                        \
            if (e < np * (np + 1) / 2) {                                                     \
                tri_ij(e, &ia, &ib);                                                         \
            } else if (e < np * (np + 1) / 2 + np) {                                         \
                ia = e - np * (np + 1) / 2;                                                  \
                ib = np;                                                                     \
            } else {                                                                         \
                ia = ib = np;                                                                \
            }                                                                                \
            {                                                                                \
                const double *ja = J + (size_t)ia * n, *jb = J + (size_t)ib * n;             \
                v = warp_sum(n, [&](long long i) { return ms_mul(ja[i], jb[i]); });          \
            }                                                                                \
            if (lane == 0) {                                                                 \
                if (ib < np)                                                                 \
                    jtj[sf_fit_tri(ia, ib)] = v;                                             \
                else if (ia < np)                                                            \
                    g[ia] = v;                                                               \
                else                                                                         \
                    red[0] = v;                                                              \
            }                                                                                \
        }                                                                                    \
        __syncthreads();                                                                     \
    } while (0)
    if (s.status != SF_FIT_SKIPPED) {
        NORMAL_EQ();
        if (t == 0) {
            s.chi2 = red[0];
            if (!(s.chi2 < INFINITY))
                s.status = SF_FIT_FAILED;
        }
        __syncthreads();
    }
    if (s.status == SF_FIT_MAXITER) {
        for (int it = 1; it <= a.max_iter; it++) {
            if (t == 0) {
                accepted = 0;
                s.niter = it;
            }
            __syncthreads();
            while (!accepted && !s.done) {
                // warp 0 solves (JTJ + lambda D) dl = g and makes the trial
                if (warp == 0) {
                    const int ok = lm_solve_warp(jtj, A, g, dl, par, trial, np, nc, s.lambda, &b);
                    if (lane == 0)
                        solved = ok;
                }
                __syncthreads();
                if (solved) { // chi^2 at the trial
                    for (long long i = t; i < n; i += LM_THREADS) {
                        const double r = sf_fit_pixel(trial, nc, px[i].x, px[i].y, px[i].m, px[i].w, NULL, 0);
                        J[i] = ms_mul(r, r);
                    }
                    __syncthreads();
                }
                if (warp == 0) {
                    const double v = solved ? warp_sum(n, [&](long long i) { return J[i]; }) : NAN;
                    if (lane == 0)
                        accepted = sf_fit_judge(&s, v);
                }
                __syncthreads();
            }
            if (accepted) {
                for (int q = t; q < np; q += LM_THREADS)
                    par[q] = trial[q];
                __syncthreads();
                if (!s.done)
                    NORMAL_EQ();
            }
            if (s.done) {
                if (t == 0)
                    s.status = SF_FIT_OK;
                __syncthreads();
                break;
            }
        }
    }
#undef NORMAL_EQ
    // the final chi^2 and sum of squared residuals
    for (long long i = t; i < n; i += LM_THREADS) { // one model evaluation (cpu/fit.c final_sums)
        const double u = sf_fit_pixel(par, nc, px[i].x, px[i].y, px[i].m, 1.0, NULL, 0);
        const double r = ms_mul(u, px[i].w);
        J[i] = ms_mul(r, r);
        J[(size_t)np * n + i] = ms_mul(u, u);
    }
    __syncthreads();
    if (warp < 2) {
        const double *col = J + (warp ? (size_t)np * n : 0);
        const double v = warp_sum(n, [&](long long i) { return col[i]; });
        if (lane == 0)
            red[warp] = v;
    }
    __syncthreads();
    if (t == 0)
        sf_fit_write(a.out + a.coff[k], k + 1, nc, n, par, &b, &s, red[0], red[1], a.more[k], sd,
                     a.src, a.lab, a.lstride, &a.mi, a.nx, a.mode);
}

// The two totals the host sizes the Jacobians and components by, in one
// record: one download instead of two.
struct fit_totals_rec {
    unsigned long long jtotal;
    unsigned ntot, over; // over: fit_ends' report
};
static __global__ void fit_totals(const unsigned *coff_end, const unsigned long long *joff_end,
                                  const unsigned *over, fit_totals_rec *r)
{
    r->ntot = *coff_end;
    r->jtotal = *joff_end;
    r->over = *over;
}

// The derived values of the n components (fit_calc.h's sf_fit_finish_one,
// the CPU's sf_fit_finish), a thread each: done here they cost the host's
// 0.5-0.8 ms for 1689 components at 8192^2 (radio.pipe) while the GPU waited.
static __global__ void fit_finish(sf_component *c, unsigned n, sf_fit_cov2 bc, int beam, int corr)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        sf_fit_finish_one(&c[i], &bc, beam, corr);
}

// launchers

extern "C" sf_status sf_fit_gpu_device(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                                       const sf_fit_in *in, const sf_fit_params *p,
                                       const sf_component **dcomps, int *ncomps)
{
    sf_status st = SF_OK;
    int *isl_of = NULL, *ooff = NULL, *olist = NULL;
    const int N = in ? in->nislands : 0, nx = img ? img->nx : 0, ny = img ? img->ny : 0;
    const int npmax = p ? SF_FIT_NP * p->max_components : 0;
    const size_t smem = (size_t)(4 * npmax + npmax * (npmax + 1)) * sizeof(double);
    size_t off = 0, tmp_bytes = 0, t1 = 0, t2 = 0;
    char *base = NULL, *fb = NULL;
    unsigned *cap, *poff, *pend, *cur, *keys0, *keys, *coff, totals[1];
    unsigned long long *jsz, *joff, jtotal = 0;
    int *d_isl, *d_ooff = NULL, *d_olist = NULL, *nc, *more;
    sf_fit_bounds *bounds;
    sf_fit_seed *seeds;
    sf_fit_px *px;
    fit_totals_rec *d_tot, tot;
    void *tmp;
    unsigned total = 0, ntot = 0;
    fit_args a;
    cudaStream_t s = g ? g->stream : 0;
    const uint8_t *mdata = in && in->mask ? in->mask->data : NULL;
    const size_t mstride = in && in->mask ? in->mask->stride : 0;
    *dcomps = NULL;
    *ncomps = 0;
    if ((st = sf_fit_check(img, labels, in, p)))
        return st;
    if ((size_t)nx * ny > 0xFFFFFFFFu)
        return sf_fail(SF_ERR_PARAM, "fit (gpu): images of more than 2^32 pixels");
    if (N == 0)
        return SF_OK;
    if ((st = sf_fit_island_map(in, &isl_of)))
        return st;
    if (p->components == SF_FIT_OBJECTS && (st = sf_fit_objects(in, isl_of, &ooff, &olist)))
        goto fail;
    memset(&a, 0, sizeof a);
    a.img = img->data;
    a.istride = img->stride;
    a.lab = labels->data;
    a.lstride = labels->stride;
    sf_fit_ms_in(in, &a.mi);
    sf_fit_beam_cov(in, &a.beam);
    a.src = in->sources;
    a.in = *in;
    a.nx = nx;
    a.ny = ny;
    a.mode = p->components;
    a.K = p->max_components;
    a.max_iter = p->max_iter;
    a.nsig = p->peak_nsigma;
    // scratch, part 1: the island tables (their sizes are known now)
    SF_CUDA(cub::DeviceScan::ExclusiveSum(NULL, t1, (unsigned *)NULL, (unsigned *)NULL, N + 1, s));
    SF_CUDA(cub::DeviceScan::ExclusiveSum(NULL, t2, (unsigned long long *)NULL,
                                          (unsigned long long *)NULL, N + 1, s));
    tmp_bytes = t1 > t2 ? t1 : t2;
#define CARVE(ptr, type, count)                                                               \
    do {                                                                                      \
        ptr = (type *)(void *)(base + off);                                                   \
        off += sf_align256((size_t)(count) * sizeof(type));                                   \
    } while (0)
    // the carving twice: first from NULL for its size, then in the scratch
    for (int pass = 0; pass < 2; pass++) {
        off = 0;
        CARVE(cap, unsigned, N + 1);
        CARVE(poff, unsigned, N + 1);
        CARVE(pend, unsigned, N + 1); // [N]: fit_ends' report
        CARVE(cur, unsigned, N + 1);
        CARVE(coff, unsigned, N + 1);
        CARVE(jsz, unsigned long long, N + 1);
        CARVE(joff, unsigned long long, N + 1);
        CARVE(nc, int, N + 1);
        CARVE(more, int, N + 1);
        CARVE(bounds, sf_fit_bounds, N);
        CARVE(seeds, sf_fit_seed, (size_t)N * SF_FIT_MAXCOMP);
        CARVE(d_isl, int, in->nobj + 1);
        CARVE(d_ooff, int, N + 2);
        CARVE(d_olist, int, in->nobj + 1);
        CARVE(d_tot, fit_totals_rec, 1);
        CARVE(tmp, char, tmp_bytes);
        if (pass == 0)
            SF_TRY(sf_gpu_scratch(g, off, (void **)&base));
    }
    SF_CUDA(cudaMemcpyAsync(d_isl, isl_of, ((size_t)in->nobj + 1) * sizeof(int),
                            cudaMemcpyHostToDevice, s));
    g->h2d += ((size_t)in->nobj + 1) * sizeof(int);
    if (ooff) {
        SF_CUDA(cudaMemcpyAsync(d_ooff, ooff, ((size_t)N + 2) * sizeof(int), cudaMemcpyHostToDevice, s));
        SF_CUDA(cudaMemcpyAsync(d_olist, olist, ((size_t)in->nobj + 1) * sizeof(int),
                                cudaMemcpyHostToDevice, s));
        g->h2d += ((size_t)N + 2 + in->nobj + 1) * sizeof(int);
    }
    a.isl_of = d_isl;
    a.ooff = d_ooff;
    a.olist = d_olist;
    SF_CUDA(cudaMemsetAsync(cap, 0, ((size_t)N + 1) * sizeof(unsigned), s));
    SF_CUDA(cudaMemsetAsync(cur, 0, ((size_t)N + 1) * sizeof(unsigned), s));
    SF_CUDA(cudaMemsetAsync(pend + N, 0, sizeof(unsigned), s));
    {
        // enough runs in flight to cover the memory latency (one 16-byte mask load each)
        const size_t runs = ((size_t)nx + FIT_RUN - 1) / FIT_RUN * (size_t)ny;
        const unsigned blocks = (unsigned)(runs / 256 + 1 < 64 * (size_t)g->sm_count
                                               ? runs / 256 + 1 : 64 * (size_t)g->sm_count);
        if (in->nobj > 0) {
            fit_caps<<<sf_blocks((size_t)in->nobj, 256), 256, 0, s>>>(in->sources, in->nobj, d_isl,
                                                                    cap);
            SF_LAUNCHED();
        }
        SF_TRY(sf_scan_excl(s, cap, poff, N + 1, tmp, tmp_bytes));
        if (in->npix > 0 && in->npix <= (long long)UINT_MAX) {
            // the segment stage's count bounds the rooms' total: no download
            // (and no wait for it) before the pixels' buffers are sized
            total = (unsigned)in->npix;
        } else {
            SF_TRY(sf_gpu_to_host(g, totals, poff + N, sizeof(unsigned)));
            total = totals[0];
        }
        // part 2 (kept buffers, grown when needed): the pixels and the sort
        {
            const size_t o2 = sf_align256((size_t)total * sizeof(unsigned)) * 2 +
                              sf_align256((size_t)total * sizeof(sf_fit_px));
            SF_TRY(sf_gpu_buffer(g, SF_GBUF_FIT, o2 + 256, (void **)&fb));
            keys0 = (unsigned *)(void *)fb;
            keys = (unsigned *)(void *)(fb + sf_align256((size_t)total * sizeof(unsigned)));
            px = (sf_fit_px *)(void *)(fb + 2 * sf_align256((size_t)total * sizeof(unsigned)));
        }
        fit_scatter<<<blocks, 256, 0, s>>>(img->data, img->stride, labels->data, labels->stride,
                                           mdata, mstride, a.mi, d_isl, in->nobj, nx, ny, poff,
                                           cap, cur, keys0, total);
        SF_LAUNCHED();
        fit_ends<<<sf_blocks((size_t)N, 256), 256, 0, s>>>(poff, cap, cur, N, pend, pend + N, total);
        SF_LAUNCHED();
        if (total > 0) {
            int bits = 1; // the linear indices' bits
            while (bits < 32 && ((size_t)nx * ny - 1) >> bits)
                bits++;
            fit_sort<<<N, FIT_SORT_THREADS, 0, s>>>(keys0, keys, poff, pend, bits);
            SF_LAUNCHED();
        }
    }
    a.poff = poff;
    a.pend = pend;
    a.keys = keys;
    a.px = px;
    a.seeds = seeds;
    a.nc = nc;
    a.more = more;
    a.bounds = bounds;
    a.jsz = jsz;
    fit_seeds<<<N, FIT_THREADS, 0, s>>>(a);
    SF_LAUNCHED();
    // where each island's components and Jacobian rows go
    SF_CUDA(cudaMemsetAsync(nc + N, 0, sizeof(int), s));
    SF_CUDA(cudaMemsetAsync(jsz + N, 0, sizeof(unsigned long long), s));
    // nc is int: scan it as unsigned (counts are >= 0)
    SF_TRY(sf_scan_excl(s, (const unsigned *)nc, coff, N + 1, tmp, tmp_bytes));
    SF_TRY(sf_scan_excl(s, jsz, joff, N + 1, tmp, tmp_bytes));
    fit_totals<<<1, 1, 0, s>>>(coff + N, joff + N, pend + N, d_tot);
    SF_LAUNCHED();
    SF_TRY(sf_gpu_to_host(g, &tot, d_tot, sizeof tot));
    if (tot.over) {
        st = tot.over == 2 ? sf_fail(SF_ERR_INTERNAL, "fit (GPU): the islands' usable pixels "
                                                      "outnumber the %u the segment stage labelled",
                                     total)
                           : sf_fail(SF_ERR_INTERNAL, "fit (GPU): an island has more usable pixels "
                                                      "than the measure stage measured");
        goto fail;
    }
    ntot = tot.ntot;
    jtotal = tot.jtotal;
    {
        const size_t jb = sf_align256((size_t)jtotal * sizeof(double));
        char *jbuf = NULL;
        SF_TRY(sf_gpu_buffer(g, SF_GBUF_FITJ, jb + ((size_t)ntot + 1) * sizeof(sf_component),
                             (void **)&jbuf));
        a.J = (double *)(void *)jbuf;
        a.out = (sf_component *)(void *)(jbuf + jb);
    }
    a.coff = coff;
    a.joff = joff;
    if (smem > 48 * 1024)
        SF_TRY(sf_gpu_smem_max(g, (const void *)fit_lm, smem));
    fit_lm<<<N, LM_THREADS, smem, s>>>(a);
    SF_LAUNCHED();
    if (ntot > 0) {
        const int beam = in->beam_maj > 0 && isfinite(in->beam_maj);
        fit_finish<<<(ntot + 127) / 128, 128, 0, s>>>(a.out, ntot, a.beam, beam,
                                                      beam && p->noise != SF_FIT_NOISE_WHITE);
        SF_LAUNCHED();
    }
    *dcomps = a.out;
    *ncomps = (int)ntot;
fail:
#undef CARVE
    free(isl_of);
    free(ooff);
    free(olist);
    return st;
}

extern "C" sf_status sf_fit_gpu(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                                const sf_fit_in *in, const sf_fit_params *p,
                                sf_component **comps, int *ncomps)
{
    sf_status st;
    const sf_component *d = NULL;
    sf_component *out;
    int n = 0;
    *comps = NULL;
    *ncomps = 0;
    if ((st = sf_fit_gpu_device(g, img, labels, in, p, &d, &n)))
        return st;
    out = (sf_component *)malloc(((size_t)n + 1) * sizeof *out);
    if (!out)
        return sf_fail(SF_ERR_NOMEM, "fit: %d components", n);
    if (n > 0 && (st = sf_gpu_to_host(g, out, d, (size_t)n * sizeof *out))) {
        free(out);
        return st;
    }
    *comps = out;
    *ncomps = n;
    return SF_OK;
}
