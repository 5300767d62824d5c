// Stage `background`, method=bane, GPU version, from the filled node grids
// on (the nodes: gpu/background_bane.cu, whose bane_run calls the
// launchers here; the rules: src/calc/background_bane.h). In order:
// 6. bane_pack (sf_bane_pack_grid): the filled grids widened to double and
//    every column's and row's place between nodes, in the context's
//    SF_GBUF_NODES (sf_bane_grid).
// 7. bane_maps: both full-resolution maps, bilinear (the rule at
//    sf_bane_lerp, on the widened nodes, a column's lerps along two node rows
//    kept while the rows share them). The GPU runner leaves them for later
//    (sf_background_bane_grid_gpu keeps the pack): the threshold stage's
//    sf_threshold_bane_gpu makes them with its mask in one launch
//    (bane_maps with THR), or sf_bane_maps_gpu alone where another stage
//    reads them first.
// 8. The run summary (sf_bane_grid_stats' values) on the device, one launch
//    of bane_summary (sf_bane_summary_launch): the mean, the most passes and
//    the finite count (group 0), the medians of both grids by radix
//    selection (groups 1 and 2; on Hopper a group is a cluster of 8 blocks
//    sharing their histograms); 40 bytes come back (SKYFIND_BANE_BLOCK=1:
//    the grids).
// In this file: the summary (bane_summary_out in background_bane.cuh, the
// keys, the selection, the cluster helpers, bane_grid_median,
// bane_summary), the maps (bane_maps_col, bane_thr, bane_pack, bane_maps),
// their launchers (sf_bane_summary_launch, bane_maps_launch,
// sf_bane_pack_grid), then the entry points sf_bane_maps_gpu and
// sf_threshold_bane_gpu.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cooperative_groups.h>
#include "common.cuh"
#include "skyfind/background.h"
#include "skyfind/threshold.h"
#include "background_bane.h"
#include "background_bane.cuh"
#include "threshold_pixel.h" // sf_thresh_pixel: the fused threshold (sf_threshold_bane_gpu)

namespace cg = cooperative_groups;

// The run summary on the device (sf_bane_grid_stats' values), one launch of
// three groups of nr blocks of SF_BANE_GRID_CHUNKS threads: group 0 the
// most passes and the count of finite pixels (from the cell offsets, when
// given; each block of the group its share), then in its first block the
// mean of the levels in sf_bane_grid_mean's association (a chunk a thread,
// the chunks' sums added by thread 0 in order) and the first level; groups
// 1 and 2 the medians of the level and sigma grids by radix selection
// (bane_grid_median), where two cub sorts of each grid, their dozen
// launches and the gaps between them took 0.25 ms at 8192^2
// (tests/gpu/trace). On Hopper (compute capability 9) a group is a cluster
// of nr = 8 blocks (BANE_SUM_CLUSTER): each block counts an eighth of the
// grid and reads the others' histograms from their shared memory. One
// block a group (nr = 1: before Hopper, or SKYFIND_BANE_CLUSTER=1), with
// the mean's chunks of consecutive values, took 84 us of radio.pipe's
// 8192^2 run on an H200 (tests/bench/RESULTS.md, "BANE's run summary by
// clusters").

// A float's key in cub's radix order of floats (and sf_select_radix's):
// ascending as unsigned, -0 before +0.
__device__ __forceinline__ unsigned bane_fkey(float f)
{
    const unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float bane_funkey(unsigned k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Radix selection of rank k (0-based, in bane_fkey's order: the element at k
// of the grid sorted as cub sorts it) of s[0..n), k < n, by one block of
// SF_BANE_GRID_CHUNKS (1024) threads: over the keys' digits of 11, 11 and 10
// bits, a histogram of the digit among the keys that share the bits fixed so
// far, then the bin that holds rank k (a scan over the threads). A thread
// reads four values at once and counts a run of equal digits before it adds
// (a grid's values share their top bits: one shared-memory counter would
// otherwise take every add). With nr > 1 the block is rank `rank` of a
// cluster of nr: it counts its share of the grid into hist, and tot adds up
// the cluster's histograms; every block then picks the same bin. Returns the
// key, the keys below it and the keys equal to it; tot keeps the last
// digit's histogram.
#define BANE_SEL_BINS 2048
struct bane_sel {
    unsigned key, below, equal;
};

__device__ __forceinline__ void bane_sel_add(float v, unsigned fixed, unsigned prefix, int shift,
                                             unsigned nbin, unsigned *hist, unsigned &cd,
                                             unsigned &cc)
{
    const unsigned key = bane_fkey(v);
    if ((key & fixed) != prefix)
        return;
    const unsigned d = (key >> shift) & (nbin - 1);
    if (d != cd) {
        if (cc)
            atomicAdd(&hist[cd], cc);
        cd = d;
        cc = 0;
    }
    cc++;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BANE_CLUSTERS 1 // thread block clusters (sm_90 and later)
#endif

// The blocks of a cluster of nr wait for each other (nr == 1: the block's
// own barrier).
__device__ __forceinline__ void bane_cl_sync(int nr)
{
#ifdef BANE_CLUSTERS
    if (nr > 1) {
        cg::this_cluster().sync();
        return;
    }
#endif
    __syncthreads();
}

// Rank r's copy of this block's shared array p in its cluster of nr (nr ==
// 1: p).
template <typename T> __device__ __forceinline__ T *bane_cl_at(T *p, int r, int nr)
{
#ifdef BANE_CLUSTERS
    if (nr > 1)
        return cg::this_cluster().map_shared_rank(p, (unsigned)r);
#endif
    return p;
}

__device__ bane_sel bane_grid_select(const float *__restrict__ s, int n, unsigned k,
                                     unsigned *hist, unsigned *tot, unsigned *sh, int rank, int nr)
{
    const int t = threadIdx.x, nt = SF_BANE_GRID_CHUNKS, lane = t & 31, n4 = n / 4;
    const float4 *s4 = reinterpret_cast<const float4 *>(s); // the grids are 256-byte aligned
    // this block's share of the grid's float4s (the last block: the tail too)
    const int q0 = (int)((long long)n4 * rank / nr), q1 = (int)((long long)n4 * (rank + 1) / nr);
    unsigned prefix = 0, fixed = 0, below = 0, equal = 0;
    for (int pass = 0; pass < 3; pass++) {
        const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
        const unsigned nbin = pass == 2 ? 1024u : 2048u, per = nbin / nt;
        unsigned cd = 0xffffffffu, cc = 0; // this thread's run: its digit and count
        for (int i = t; i < (int)nbin; i += nt)
            hist[i] = 0;
        __syncthreads();
        for (int i = q0 + t; i < q1; i += nt) {
            const float4 v = s4[i];
            bane_sel_add(v.x, fixed, prefix, shift, nbin, hist, cd, cc);
            bane_sel_add(v.y, fixed, prefix, shift, nbin, hist, cd, cc);
            bane_sel_add(v.z, fixed, prefix, shift, nbin, hist, cd, cc);
            bane_sel_add(v.w, fixed, prefix, shift, nbin, hist, cd, cc);
        }
        for (int i = 4 * n4 + t; rank == nr - 1 && i < n; i += nt)
            bane_sel_add(s[i], fixed, prefix, shift, nbin, hist, cd, cc);
        if (cc)
            atomicAdd(&hist[cd], cc);
        bane_cl_sync(nr); // every block's histogram is whole
        for (int i = t; i < (int)nbin; i += nt) {
            unsigned c = 0;
            for (int r = 0; r < nr; r++)
                c += bane_cl_at(hist, r, nr)[i];
            tot[i] = c;
        }
        bane_cl_sync(nr); // the histograms read (the next pass clears them), tot whole
        // this thread's bins (per of them, contiguous), their count, and the
        // count of all the bins before them (a warp scan, then the warps')
        unsigned c = 0, x;
        for (unsigned j = 0; j < per; j++)
            c += tot[t * per + j];
        x = c;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(0xffffffffu, x, o);
            if (lane >= o)
                x += y;
        }
        if (lane == 31)
            sh[t >> 5] = x;
        __syncthreads();
        if (t < 32) {
            unsigned w = sh[t];
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned y = __shfl_up_sync(0xffffffffu, w, o);
                if (lane >= o)
                    w += y;
            }
            sh[t] = w;
        }
        __syncthreads();
        {
            unsigned cum = (t >= 32 ? sh[(t >> 5) - 1] : 0u) + x - c;
            if (k >= cum && k < cum + c) // one thread: the bins before it hold <= k keys
                for (unsigned j = 0; j < per; j++) {
                    const unsigned h = tot[t * per + j];
                    if (k < cum + h) {
                        sh[32] = t * per + j;
                        sh[33] = k - cum;
                        sh[34] = cum;
                        break;
                    }
                    cum += h;
                }
        }
        __syncthreads();
        prefix |= sh[32] << shift;
        fixed |= (nbin - 1) << shift;
        k = sh[33];
        below += sh[34];
        if (pass == 2)
            equal = tot[sh[32]];
        __syncthreads(); // sh and tot are the next pass's
    }
    return bane_sel{prefix, below, equal};
}

// The median of a grid as sf_bane_grid_stats' grid_median (cub's sorted
// grid at n/2, or the mean of n/2 - 1 and n/2 added in float): one selection,
// and for an even count the key after rank n/2 - 1 when it is another: the
// next bin of the last histogram, else the least key above it (one pass,
// each block of the cluster over its share, then the least of theirs).
__device__ float bane_grid_median(const float *__restrict__ s, int n, unsigned *hist, unsigned *tot,
                                  unsigned *sh, int rank, int nr)
{
    const int t = threadIdx.x, nt = SF_BANE_GRID_CHUNKS;
    const unsigned k = (unsigned)n / 2;
    if (n & 1)
        return bane_funkey(bane_grid_select(s, n, k, hist, tot, sh, rank, nr).key);
    const bane_sel a = bane_grid_select(s, n, k - 1, hist, tot, sh, rank, nr);
    unsigned hi = a.key;
    if (k >= a.below + a.equal) { // rank k is the next key (every block takes the same branches)
        if (t == 0)
            sh[35] = 0xffffffffu;
        __syncthreads();
        for (unsigned i = t; i < 1024u; i += nt)
            if (i > (a.key & 1023u) && tot[i])
                atomicMin(&sh[35], i);
        __syncthreads();
        if (sh[35] != 0xffffffffu) {
            hi = (a.key & ~1023u) | sh[35];
        } else {
            const int i0 = (int)((long long)n * rank / nr), i1 = (int)((long long)n * (rank + 1) / nr);
            unsigned m = 0xffffffffu;
            __syncthreads();
            if (t == 0)
                sh[35] = 0xffffffffu;
            __syncthreads();
            for (int i = i0 + t; i < i1; i += nt) {
                const unsigned key = bane_fkey(s[i]);
                if (key > a.key && key < m)
                    m = key;
            }
            m = __reduce_min_sync(0xffffffffu, m);
            if ((t & 31) == 0)
                atomicMin(&sh[35], m);
            bane_cl_sync(nr); // every block's least
            m = 0xffffffffu;
            for (int r = 0; r < nr; r++)
                m = min(m, bane_cl_at(sh, r, nr)[35]);
            bane_cl_sync(nr); // read before any block leaves
            hi = m;
        }
    }
    return (float)((double)__fadd_rn(bane_funkey(a.key), bane_funkey(hi)) / 2.0);
}

__global__ void __launch_bounds__(SF_BANE_GRID_CHUNKS)
    bane_summary(const float *fb, const float *fs, const int *iters, int nb,
                 const long long *nfinite, const int *ccnt, int nc, bane_summary_out *out, int nr)
{
    __shared__ double part[SF_BANE_GRID_CHUNKS];
    __shared__ int most[SF_BANE_GRID_CHUNKS / 32];
    __shared__ unsigned long long fin[SF_BANE_GRID_CHUNKS / 32];
    __shared__ unsigned hist[BANE_SEL_BINS], tot[BANE_SEL_BINS], sh[36];
    const int t = threadIdx.x;
    const int group = blockIdx.x / nr, rank = blockIdx.x % nr; // rank: the block's in its cluster
    double u = 0.0;
    int mx = 0;
    if (group > 0) { // a grid's median, as sf_bane_grid_stats' grid_median
        const float v = bane_grid_median(group == 1 ? fb : fs, nb, hist, tot, sh, rank, nr);
        if (t == 0 && rank == 0) {
            if (group == 1)
                out->median = v;
            else
                out->sigma = v;
        }
        return;
    }
    // group 0: the most passes and the finite count over the cluster (each
    // block its share of the grids, rank 0 adds up the blocks'), then the
    // mean's chunks in rank 0 (a thread's values 1024 apart: each load of
    // the block's 32 lanes is one line; 16 loaded ahead of the ordered adds)
    unsigned long long f = 0; // the finite pixels: the cells' counts (slots of step^2)
    {
        const int i0 = (int)((long long)nb * rank / nr), i1 = (int)((long long)nb * (rank + 1) / nr);
        const int c0 = (int)((long long)nc * rank / nr), c1 = (int)((long long)nc * (rank + 1) / nr);
#pragma unroll 8
        for (int i = i0 + t; i < i1; i += SF_BANE_GRID_CHUNKS)
            mx = max(mx, iters[i]);
#pragma unroll 8
        for (int i = c0 + t; ccnt && i < c1; i += SF_BANE_GRID_CHUNKS)
            f += (unsigned)ccnt[i];
    }
    mx = __reduce_max_sync(0xffffffffu, mx);
    for (int o = 16; o; o >>= 1)
        f += __shfl_xor_sync(0xffffffffu, f, o);
    if ((t & 31) == 0) {
        most[t >> 5] = mx;
        fin[t >> 5] = f;
    }
    __syncthreads();
    if (t == 0) { // the block's, in most[0] and fin[0]
        for (int w = 1; w < SF_BANE_GRID_CHUNKS / 32; w++) {
            mx = max(mx, most[w]);
            f += fin[w];
        }
        most[0] = mx;
        fin[0] = f;
    }
    bane_cl_sync(nr); // every block's share added up
    if (rank == 0 && t == 0)
        for (int r = 1; r < nr; r++) {
            mx = max(mx, *bane_cl_at(most, r, nr));
            f += *bane_cl_at(fin, r, nr);
        }
    bane_cl_sync(nr); // read: the other blocks may leave
    if (rank > 0)
        return;
    {
        const int nt = SF_BANE_GRID_CHUNKS;
        int i = t;
        for (; i + 15 * nt < nb; i += 16 * nt) {
            float v[16];
#pragma unroll
            for (int j = 0; j < 16; j++)
                v[j] = fb[i + j * nt];
#pragma unroll
            for (int j = 0; j < 16; j++)
                u = u + (double)v[j];
        }
        for (; i < nb; i += nt)
            u = u + (double)fb[i];
    }
    part[t] = u;
    __syncthreads();
    if (t == 0) {
        double s = 0.0;
        for (int q = 0; q < SF_BANE_GRID_CHUNKS; q++)
            s = s + part[q];
        out->mean = s / nb;
        out->first = fb[0];
        out->niter = mx;
        out->nfinite = ccnt ? (long long)f : nfinite ? *nfinite : 0;
    }
}

#define BM_PIX 1024 // pixels a block of bane_maps, along a row
#define BM_ROWS 8   // rows a block of bane_maps
#define BM_PER (BM_PIX / 256) // columns a thread

// Column c (0 .. BM_PER-1) of thread t in a block's segment from x0: VEC,
// four adjacent columns (one 16-byte load and two 16-byte stores a row);
// else t, t + 256, ... (coalesced scalar accesses, any stride or alignment).
template <bool VEC>
__device__ __forceinline__ int bane_maps_col(int x0, int c)
{
    return VEC ? x0 + BM_PER * (int)threadIdx.x + c : x0 + (int)threadIdx.x + c * 256;
}

// The threshold stage's part of a bane_maps launch with THR (its rule,
// src/calc/threshold_pixel.h, and thresh_map_kernel's scales).
struct bane_thr {
    const float *det;   // the image thresholded (the filtered one, or the image)
    size_t dstride;
    uint8_t *mask;
    size_t mstride;
    int subtract, use_rms;
    float ls, ns, sigma, seed, flood;
};

__device__ __forceinline__ uint8_t bane_thr_px(const bane_thr &t, float d, float b, float s)
{
    return sf_thresh_pixel(d, t.subtract ? __fmul_rn(b, t.ls) : 0.0f,
                           t.use_rms ? __fmul_rn(s, t.ns) : t.sigma, t.seed, t.flood);
}

// The grids as the maps' makers read them (sf_bane_grid): the filled node
// values widened to double and each column's and row's place between nodes
// (sf_bane_axis), once, so that no pixel divides or converts a node value.
__global__ void bane_pack(const float *fb, const float *fs, int nb, int nx, int ny, int step,
                          int ncx, int ncy, double *gb, double *gs, sf_bane_at *ax,
                          sf_bane_at *ay)
{
    const int n = nb + nx + ny;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (i < nb) {
            gb[i] = (double)fb[i];
            gs[i] = (double)fs[i];
        } else {
            const int col = i < nb + nx, p = col ? i - nb : i - nb - nx;
            sf_bane_at a;
            sf_bane_axis(p, col ? nx : ny, step, col ? ncx : ncy, &a.k, &a.t);
            a.pad_ = 0;
            (col ? ax : ay)[p] = a;
        }
    }
}

template <bool VEC, bool THR>
__global__ void __launch_bounds__(256, 2)
    bane_maps(const float *img, size_t istride, sf_bane_grid gr, float *ob, size_t bstride,
              float *os, size_t rstride, bane_thr t)
{
    // a block BM_ROWS rows of a segment of BM_PIX columns, a thread BM_PER
    // columns of each (bane_maps_col). The bilinear rule (at sf_bane_lerp)
    // in its order, on the node values widened to double (exactly, so the same
    // bits; no conversion a pixel): a column's lerps along the top and
    // bottom node rows of both grids are kept while the block's rows lie
    // between the same two node rows (a step is several rows), so a pixel
    // takes one lerp a map. VEC
    // (rows and buffers 16-byte aligned): a thread's four columns with one
    // 16-byte load of the image and one 16-byte store to each map. img NULL
    // (an image without NaN): no pixel is NaN and the image is not read.
    // THR: the threshold stage's mask of t.det against the maps in the same
    // pass (sf_threshold_bane_gpu): 0.26 ms at 8192^2 on an H200, against
    // 0.37 with a division and eight conversions a pixel
    const int x0 = blockIdx.x * BM_PIX, yb = blockIdx.y * BM_ROWS, nx = gr.nx, ncx = gr.ncx;
    const float qnan = __int_as_float(0x7fc00000);
    int kx[BM_PER];
    double tx[BM_PER], tb[BM_PER], bb[BM_PER], ts[BM_PER], bs[BM_PER];
    int pky = -1;
#pragma unroll
    for (int c = 0; c < BM_PER; c++) {
        const int x = bane_maps_col<VEC>(x0, c);
        kx[c] = 0;
        tx[c] = 0.0;
        if (x < nx) {
            const sf_bane_at a = gr.ax[x];
            kx[c] = a.k;
            tx[c] = a.t;
        }
    }
    // the vector path's reads of all the thread's rows issued first, so that
    // they are in flight together (a row at a time, the kernel ran at a
    // third of the memory's bandwidth: 0.34 against 0.26 ms at 8192^2)
    const bool vec = VEC && bane_maps_col<VEC>(x0, BM_PER - 1) < nx;
    const int xa = bane_maps_col<VEC>(x0, 0);
    float4 dv[BM_ROWS], iv[BM_ROWS];
#pragma unroll
    for (int k = 0; k < BM_ROWS; k++) {
        const int y = yb + k;
        dv[k] = iv[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (vec && y < gr.ny) {
            if (THR)
                dv[k] = __ldg((const float4 *)(t.det + (size_t)y * t.dstride + xa));
            if (img)
                iv[k] = __ldg((const float4 *)(img + (size_t)y * istride + xa));
        }
    }
#pragma unroll
    for (int k = 0; k < BM_ROWS; k++) {
        const int y = yb + k;
        if (y >= gr.ny)
            break;
        const sf_bane_at r = gr.ay[y];
        if (r.k != pky) {
            pky = r.k;
#pragma unroll
            for (int c = 0; c < BM_PER; c++) {
                const size_t i = (size_t)r.k * ncx + kx[c];
                tb[c] = sf_bane_lerp(gr.level[i], gr.level[i + 1], tx[c]);
                bb[c] = sf_bane_lerp(gr.level[i + ncx], gr.level[i + ncx + 1], tx[c]);
                ts[c] = sf_bane_lerp(gr.rms[i], gr.rms[i + 1], tx[c]);
                bs[c] = sf_bane_lerp(gr.rms[i + ncx], gr.rms[i + ncx + 1], tx[c]);
            }
        }
        float b[BM_PER], s[BM_PER];
#pragma unroll
        for (int c = 0; c < BM_PER; c++) {
            b[c] = (float)sf_bane_lerp(tb[c], bb[c], r.t);
            s[c] = (float)sf_bane_lerp(ts[c], bs[c], r.t);
        }
        if (vec) {
            const float v[BM_PER] = {iv[k].x, iv[k].y, iv[k].z, iv[k].w};
#pragma unroll
            for (int c = 0; c < BM_PER; c++)
                if (isnan(v[c]))
                    b[c] = s[c] = qnan;
            *(float4 *)(ob + (size_t)y * bstride + xa) = make_float4(b[0], b[1], b[2], b[3]);
            *(float4 *)(os + (size_t)y * rstride + xa) = make_float4(s[0], s[1], s[2], s[3]);
            if (THR) {
                const float4 d = dv[k];
                *(uchar4 *)(t.mask + (size_t)y * t.mstride + xa) =
                    make_uchar4(bane_thr_px(t, d.x, b[0], s[0]), bane_thr_px(t, d.y, b[1], s[1]),
                                bane_thr_px(t, d.z, b[2], s[2]), bane_thr_px(t, d.w, b[3], s[3]));
            }
            continue;
        }
#pragma unroll
        for (int c = 0; c < BM_PER; c++) {
            const int x = bane_maps_col<VEC>(x0, c);
            if (x >= nx)
                break;
            if (img && isnan(img[(size_t)y * istride + x]))
                b[c] = s[c] = qnan;
            ob[(size_t)y * bstride + x] = b[c];
            os[(size_t)y * rstride + x] = s[c];
            if (THR)
                t.mask[(size_t)y * t.mstride + x] =
                    bane_thr_px(t, t.det[(size_t)y * t.dstride + x], b[c], s[c]);
        }
    }
}

// A float buffer (none: NULL) whose base and rows are 16-byte aligned, for
// bane_maps' vector path.
static int bane_a16(const void *p, size_t stride)
{
    return !p || ((uintptr_t)p | stride * sizeof(float)) % 16 == 0;
}

// One bane_maps launch: the maps of grid gr (img: the image, for its NaN;
// NULL when it has none and THR), with t.mask the threshold's mask too.
// bane_summary on g->stream: on compute capability 9 and later its groups
// are clusters of BANE_SUM_CLUSTER blocks (SKYFIND_BANE_CLUSTER=N: N blocks,
// 1 to 8; 1: a block a group, the reference of the benchmarks), else a
// block a group.
#define BANE_SUM_CLUSTER 8
sf_status sf_bane_summary_launch(sf_gpu *g, const float *fb, const float *fs, const int *iters,
                                 int nb, const long long *nfinite, const int *ccnt, int nc,
                                 bane_summary_out *out)
{
    sf_status st = SF_OK;
    int nr = BANE_SUM_CLUSTER, major = 0;
    const char *e = getenv("SKYFIND_BANE_CLUSTER");
    if (e && atoi(e) >= 1 && atoi(e) <= 8)
        nr = atoi(e);
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device) != cudaSuccess ||
        major < 9)
        nr = 1;
    if (nr > 1) {
        cudaLaunchConfig_t c = {};
        cudaLaunchAttribute at[1] = {};
        c.gridDim = dim3(3 * nr);
        c.blockDim = dim3(SF_BANE_GRID_CHUNKS);
        c.stream = g->stream;
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = nr;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        c.attrs = at;
        c.numAttrs = 1;
        SF_CUDA(cudaLaunchKernelEx(&c, bane_summary, fb, fs, iters, nb, nfinite, ccnt, nc, out, nr));
    } else {
        bane_summary<<<3, SF_BANE_GRID_CHUNKS, 0, g->stream>>>(fb, fs, iters, nb, nfinite, ccnt, nc,
                                                              out, 1);
        SF_LAUNCHED();
    }
fail:
    return st;
}

static sf_status bane_maps_launch(sf_gpu *g, const float *img, size_t istride,
                                  const sf_bane_grid *gr, sf_image *bkg, sf_image *rms,
                                  const bane_thr *t)
{
    sf_status st = SF_OK;
    const dim3 grid((gr->nx + BM_PIX - 1) / BM_PIX, (gr->ny + BM_ROWS - 1) / BM_ROWS);
    const int vec = bane_a16(img, istride) && bane_a16(bkg->data, bkg->stride) &&
                    bane_a16(rms->data, rms->stride) &&
                    (!t || (bane_a16(t->det, t->dstride) &&
                            ((uintptr_t)t->mask | t->mstride) % 4 == 0)) &&
                    !getenv("SKYFIND_BANE_MAPS_SCALAR"); // developer knob: the scalar kernel
    bane_thr none;
    memset(&none, 0, sizeof none);
#define BANE_MAPS(V, T)                                                                          \
    bane_maps<V, T><<<grid, 256, 0, g->stream>>>(img, istride, *gr, bkg->data, bkg->stride,     \
                                                 rms->data, rms->stride, t ? *t : none)
    if (vec && t)
        BANE_MAPS(true, true);
    else if (vec)
        BANE_MAPS(true, false);
    else if (t)
        BANE_MAPS(false, true);
    else
        BANE_MAPS(false, false);
#undef BANE_MAPS
    SF_LAUNCHED();
fail:
    return st;
}

// The bytes of the grids' pack (bane_pack) in SF_GBUF_NODES.
static size_t bane_pack_bytes(int nb, int nx, int ny)
{
    return 2 * SF_BANE_ALIGN((size_t)nb * 8) + SF_BANE_ALIGN((size_t)nx * sizeof(sf_bane_at)) +
           SF_BANE_ALIGN((size_t)ny * sizeof(sf_bane_at));
}

// The filled grids fb, fs packed for the maps' makers (bane_pack) in the
// context's SF_GBUF_NODES, described by *gr.
sf_status sf_bane_pack_grid(sf_gpu *g, const float *fb, const float *fs, int nb, int nx, int ny,
                            int step, int ncx, int ncy, sf_bane_grid *gr)
{
    sf_status st = SF_OK;
    void *keep = NULL;
    char *k;
    const unsigned pblocks = sf_blocks((size_t)nb + nx + ny, 256);
    SF_TRY(sf_gpu_buffer(g, SF_GBUF_NODES, bane_pack_bytes(nb, nx, ny), &keep));
    k = (char *)keep;
    memset(gr, 0, sizeof *gr);
    gr->level = (const double *)k;
    gr->rms = (const double *)(k + SF_BANE_ALIGN((size_t)nb * 8));
    gr->ax = (const sf_bane_at *)(k + 2 * SF_BANE_ALIGN((size_t)nb * 8));
    gr->ay = (const sf_bane_at *)((const char *)gr->ax +
                                  SF_BANE_ALIGN((size_t)nx * sizeof(sf_bane_at)));
    gr->nx = nx;
    gr->ny = ny;
    gr->step = step;
    gr->ncx = ncx;
    gr->ncy = ncy;
    gr->nan = 1; // until the finite count says otherwise (bane_run)
    bane_pack<<<pblocks < 1024 ? pblocks : 1024, 256, 0, g->stream>>>(
        fb, fs, nb, nx, ny, step, ncx, ncy, (double *)gr->level, (double *)gr->rms,
        (sf_bane_at *)gr->ax, (sf_bane_at *)gr->ay);
    SF_LAUNCHED();
fail:
    return st;
}

// The maps' and the mask's shapes and places against the grid's.
static sf_status bane_grid_check(const sf_image *orig, const sf_bane_grid *gr, const sf_image *bkg,
                                 const sf_image *rms)
{
    if (!gr || !gr->level || !bkg || !rms || !orig)
        return sf_fail(SF_ERR_PARAM, "bane maps: a grid, the image and both maps are needed");
    if (orig->nx != gr->nx || orig->ny != gr->ny || bkg->nx != gr->nx || bkg->ny != gr->ny ||
        rms->nx != gr->nx || rms->ny != gr->ny)
        return sf_fail(SF_ERR_PARAM, "bane maps: the grid is of a %dx%d image, the maps %dx%d",
                       gr->nx, gr->ny, bkg->nx, bkg->ny);
    if (orig->loc != SF_DEVICE || bkg->loc != SF_DEVICE || rms->loc != SF_DEVICE)
        return sf_fail(SF_ERR_PARAM, "bane maps: device image and maps needed");
    return SF_OK;
}

extern "C" sf_status sf_bane_maps_gpu(sf_gpu *g, const sf_image *img, const sf_bane_grid *grid,
                                      sf_image *bkg, sf_image *rms)
{
    sf_status st = bane_grid_check(img, grid, bkg, rms);
    if (st)
        return st;
    return bane_maps_launch(g, img->data, img->stride, grid, bkg, rms, NULL);
}

extern "C" sf_status sf_thresh_check(const sf_image *img, const sf_thresh_params *p,
                                     const sf_bkg_stats *st, const sf_image *bkg,
                                     const sf_image *rms, const sf_mask *mask);

extern "C" sf_status sf_threshold_bane_gpu(sf_gpu *g, const sf_image *img, const sf_image *orig,
                                           const sf_bane_grid *grid, const sf_thresh_params *p,
                                           const sf_bkg_stats *bs, sf_image *bkg, sf_image *rms,
                                           int use_rms, sf_mask *mask)
{
    sf_status st = bane_grid_check(orig, grid, bkg, rms);
    bane_thr t;
    if (st || (st = sf_thresh_check(img, p, bs, bkg, use_rms ? rms : NULL, mask)))
        return st;
    if (img->loc != SF_DEVICE || mask->loc != SF_DEVICE)
        return sf_fail(SF_ERR_PARAM, "sf_threshold_bane_gpu needs device buffers");
    memset(&t, 0, sizeof t);
    sf_thresh_levels(p, &t.seed, &t.flood, &t.ls, &t.ns);
    t.det = img->data;
    t.dstride = img->stride;
    t.mask = mask->data;
    t.mstride = mask->stride;
    t.subtract = p->subtract;
    t.use_rms = use_rms;
    t.sigma = (float)bs->sigma * t.ns; // as sf_threshold_gpu rounds it
    return bane_maps_launch(g, grid->nan ? orig->data : NULL, orig->stride, grid, bkg, rms, &t);
}
