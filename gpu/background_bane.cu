// Stage `background`, method=bane, GPU version (twin: cpu/background_bane.c;
// the rules and why both backends get the same bits: src/calc/background_bane.h).
// Kernels in launch order (bane_run, at the end, launches them; 6-8 are in
// gpu/background_bane_grid.cu):
// 1. bane_scan: the image's finite pixels, for the run summary (the pixel
//    path only: the cell path has the cells' counts).
// 2. Cell maxima (the pixel path's first scale) and, on the cell path (when
//    sf_bane_use_cells), its arrays: bane_cellsort_warp (a warp a cell, in
//    a slot of step^2 values: the cell's finite values gathered and
//    counted, cub's warp merge sort, the count and largest |v|, then the
//    running sums' record a chunk a lane, bane_records_warp). Cells of more than
//    1024 pixels (and SKYFIND_BANE_BLOCK=1): bane_cellstat or
//    bane_cellcount (the counts), cub's scan of them into offsets, then
//    bane_cellsort, a block a cell, the cells packed.
// 3. bane_nodes_warp: the cell-aligned nodes, a warp each, 8 a block
//    (nodes of up to 8 x 8 cells), or a half warp each, 16 a block (nodes
//    of up to 48 cells: radio.pipe's 6 x 6; SKYFIND_BANE_WARP32=1 gives them
//    a warp each, the benchmark's reference): per-cell kept ranges by galloping
//    searches from the previous pass's, range sums added a cell or two a
//    lane and then by shuffles (sf_bane_lanes_total, the twin's order);
//    the median from a window of candidates around the mean,
//    narrowed to about 50, sorted in registers by shuffles
//    (bane_warp_sort64, bane_half_sort64; more than 64 in shared memory). A node with too
//    many candidates (many equal values) is listed for the block kernel.
// 4. bane_nodes, one block of 32 x 8 threads a node: mode 3 the listed
//    nodes (a few blocks looping over the list), mode 2 the others (last
//    column and row, not cell-aligned; launched on a side stream as soon
//    as the cell maxima are known, so they run beside step 2 or 3), mode 1 every
//    aligned node when nodes have more than 64 cells, mode 0 every node
//    without the cell path:
//    - cell path: as bane_nodes_warp, thread 0 adding the range sums;
//      candidates ranked exactly (bane_rank);
//    - pixel path: the box staged in shared memory once (up to BN_STAGE_MAX
//      pixels), each pass summing the kept pixels' v and v*v as exact
//      integers in doubles (bane_pass), every thread deriving the same mean,
//      sigma and bounds; the median by bane_median_box (extremes, a
//      2048-bin histogram, the middle bins' values ranked; a radix select
//      on the float keys when those are many equal values). The cell path
//      falls back to it too.
// 5. bane_fill: nodes without a finite pixel take sf_bkg_fill_one's value.
// 6.-8. The filled grid's packing for the maps, the maps and the run
//    summary: gpu/background_bane_grid.cu (sf_bane_pack_grid,
//    sf_bane_maps_gpu, sf_bane_summary_launch).
// SKYFIND_BANE_BLOCK=1 runs the block kernels everywhere (the warp kernels'
// reference in benchmarks; the same maps).
// After the kernels, the host side: bane_run (every launch, in order), then
// the entry points sf_background_bane_gpu and sf_background_bane_grid_gpu.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cub/device/device_scan.cuh>
#include <cub/warp/warp_merge_sort.cuh>
#include "common.cuh"
#include "skyfind/background.h"
#include "background_bane.h"
#include "background_bane.cuh"
#include "fixsum.h" // sf_fkey: order-preserving float keys

#define BN_TX 32
#define BN_TY 8
#define BN_WARPS (BN_TX * BN_TY / 32)

struct bane_scan_out {
    unsigned long long nfinite; // finite pixels
};

__global__ void bane_scan(const float *img, size_t stride, int nx, int ny, bane_scan_out *out)
{
    __shared__ unsigned long long scnt[BN_WARPS];
    unsigned long long c = 0;
    for (int y = blockIdx.x; y < ny; y += gridDim.x) // a block a row at a time
        for (int x = threadIdx.x; x < nx; x += blockDim.x)
            c += isfinite(img[(size_t)y * stride + x]) != 0;
    for (int o = 16; o; o >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0)
        scnt[threadIdx.x >> 5] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)(blockDim.x >> 5); w++)
            c += scnt[w];
        atomicAdd(&out->nfinite, c);
    }
}

// The grid of cell maxima (background_bane.h): one thread per cell.
__global__ void bane_cellmax(const float *img, size_t stride, int nx, int ny, int step, int ccx,
                             int ccy, float *cm)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ccx * ccy)
        return;
    const int cx = c % ccx, cy = c / ccx;
    float m = -1.0f;
    for (int y = cy * step; y < (cy + 1) * step && y < ny; y++)
        for (int x = cx * step; x < (cx + 1) * step && x < nx; x++) {
            float a = fabsf(img[(size_t)y * stride + x]);
            if (isfinite(a) && a > m)
                m = a;
        }
    cm[c] = m;
}

// The block's sums of v and v*v over the box pixels kept by (lo, hi), the
// box w x h at src with row pitch `pitch` (shared memory when it was staged
// there, else the image); every thread returns the same totals.
__device__ sf_bane_sums bane_pass(const float *src, size_t pitch, int w, int h, double lo,
                                  double hi, sf_bane_scale k, sf_bane_sums *sh)
{
    const int tid = threadIdx.y * BN_TX + threadIdx.x;
    sf_bane_sums t = {0.0, 0.0, 0.0};
    for (int y = threadIdx.y; y < h; y += BN_TY) {
        const float *row = src + (size_t)y * pitch;
        for (int x = threadIdx.x; x < w; x += BN_TX) {
            float v = row[x];
            if (sf_bane_kept(v, lo, hi))
                sf_bane_add(&t, v, &k);
        }
    }
    for (int o = 16; o; o >>= 1) {
        t.n += __shfl_xor_sync(0xffffffffu, t.n, o);
        t.s1 += __shfl_xor_sync(0xffffffffu, t.s1, o);
        t.s2 += __shfl_xor_sync(0xffffffffu, t.s2, o);
    }
    __syncthreads(); // sh is free (the last reader has passed)
    if ((tid & 31) == 0)
        sh[tid >> 5] = t;
    __syncthreads();
    t = sh[0];
    for (int w8 = 1; w8 < BN_WARPS; w8++) {
        t.n += sh[w8].n;
        t.s1 += sh[w8].s1;
        t.s2 += sh[w8].s2;
    }
    return t;
}

#define BN_BINS 2048 // median histogram (BN_BINS / 256 bins a thread in the scan)
#define BN_CAND 1024 // most values of the middle bins ordered exactly
#define BN_STAGE_MAX 16384 // boxes of up to this many pixels are staged in shared memory

struct bane_args {
    const float *img, *cm;
    const float *vals;       // cell path: sorted finite values, cell after cell
    const sf_bane_pair *rec; // their running sums' records (sf_bane_entry), rslot pairs a cell
    int rslot;
    const long long *off;    // cell c's values at vals[off[c] .. off[c+1]) (cap 0), or
    const int *cnt;          // at vals[c cap .. c cap + cnt[c]) (cap > 0: slots of step^2)
    int cap;
    size_t stride;
    int nx, ny, step, box, ncx, ncy, ccx, stage, cells;
    double kappa;
    float *rawb, *raws;
    int *iters;
    int mode; // 0: every node; 1: the cell-aligned nodes; 2: the others (last column, last row);
              // 3: the aligned nodes bane_nodes_warp listed (slow[0 .. *nslow))
    const int *slow, *nslow;
};

// Where cell ci's sorted values start, and how many there are.
__device__ __forceinline__ long long bane_cell_at(const bane_args &a, size_t ci)
{
    return a.cap ? (long long)ci * a.cap : a.off[ci];
}
__device__ __forceinline__ int bane_cell_n(const bane_args &a, size_t ci)
{
    return a.cap ? a.cnt[ci] : (int)(a.off[ci + 1] - a.off[ci]);
}
__device__ __forceinline__ const sf_bane_pair *bane_cell_rec(const bane_args &a, size_t ci)
{
    return a.rec + ci * (size_t)a.rslot;
}

// A node whose box has no finite pixel: NaN, filled later by bane_fill.
__device__ void bane_node_empty(const bane_args &a, int node)
{
    a.rawb[node] = a.raws[node] = __int_as_float(0x7fc00000);
    a.iters[node] = 0;
}

// Shared arrays of the median.
struct bane_med_shared {
    unsigned hist[BN_BINS];
    float cand[BN_CAND];
    unsigned sel[4];
    float mm[2 * BN_WARPS];
    float mid[2];
};

// The ranks km and k (km = k - 1 for an even count) of m candidates in
// cand, ties in slot order, into mid[0] and mid[1].
__device__ void bane_rank(const float *cand, unsigned m, unsigned rkm, unsigned rk, float *mid)
{
    const int tid = threadIdx.y * BN_TX + threadIdx.x;
    for (unsigned j = tid; j < m; j += BN_TX * BN_TY) {
        const float cj = cand[j];
        unsigned r = 0;
        for (unsigned i = 0; i < m; i++)
            r += cand[i] < cj || (cand[i] == cj && i < j);
        if (r == rkm)
            mid[0] = cj;
        if (r == rk)
            mid[1] = cj;
    }
    __syncthreads();
}

// The median of the nk kept pixels of a box (src, pitch, w x h; kept: lo <
// v < hi): ranks km and k (equal for an odd count) into lomid, himid.
// Their extremes, a histogram of BN_BINS equal bins between them (in value
// order), the bins holding the two ranks, and the values of those bins
// (few) ranked exactly; a radix select on the float keys when those are
// more than BN_CAND (many equal values).
__device__ void bane_median_box(const float *src, size_t pitch, int w, int h, double lo, double hi,
                                unsigned nk, bane_med_shared &S, float &lomid, float &himid)
{
    const int tid = threadIdx.y * BN_TX + threadIdx.x;
    unsigned *hist = S.hist, *sel = S.sel;
    float *cand = S.cand, *mm = S.mm, *mid = S.mid;
    const unsigned k = nk / 2, km = nk & 1 ? k : k - 1;
    __syncthreads(); // the shared arrays are free
    float vmin = INFINITY, vmax = -INFINITY;
    for (int y = threadIdx.y; y < h; y += BN_TY)
        for (int x = threadIdx.x; x < w; x += BN_TX) {
            float v = src[(size_t)y * pitch + x];
            if (sf_bane_kept(v, lo, hi)) {
                vmin = fminf(vmin, v);
                vmax = fmaxf(vmax, v);
            }
        }
    for (int o = 16; o; o >>= 1) {
        vmin = fminf(vmin, __shfl_xor_sync(0xffffffffu, vmin, o));
        vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, o));
    }
    if ((tid & 31) == 0) {
        mm[tid >> 5] = vmin;
        mm[BN_WARPS + (tid >> 5)] = vmax;
    }
    for (int i = tid; i < BN_BINS; i += BN_TX * BN_TY)
        hist[i] = 0;
    __syncthreads();
    for (int i = 1; i < BN_WARPS; i++) {
        vmin = fminf(vmin, mm[i]);
        vmax = fmaxf(vmax, mm[BN_WARPS + i]);
    }
    vmin = fminf(vmin, mm[0]);
    vmax = fmaxf(vmax, mm[BN_WARPS]);
    if (!(vmax > vmin)) {
        lomid = himid = vmin;
    } else {
        const double scale = (BN_BINS - 1) / ((double)vmax - (double)vmin);
        for (int y = threadIdx.y; y < h; y += BN_TY)
            for (int x = threadIdx.x; x < w; x += BN_TX) {
                float v = src[(size_t)y * pitch + x];
                if (sf_bane_kept(v, lo, hi))
                    atomicAdd(&hist[(unsigned)(((double)v - (double)vmin) * scale)], 1u);
            }
        __syncthreads();
        // the bins of ranks km and k: 8 bins a thread, then thread 0 walks
        {
            unsigned c = 0;
            for (int i = 0; i < BN_BINS / 256; i++)
                c += hist[tid * (BN_BINS / 256) + i];
            __syncthreads();
            if (tid == 0) {
                sel[0] = sel[1] = sel[2] = sel[3] = 0;
            }
            // per-thread totals through the candidate array's words
            ((unsigned *)cand)[tid] = c;
            __syncthreads();
            if (tid == 0) {
                unsigned acc = 0, b = 0, tt = 0;
                while (acc + ((unsigned *)cand)[tt] <= km)
                    acc += ((unsigned *)cand)[tt++];
                b = tt * (BN_BINS / 256);
                while (acc + hist[b] <= km)
                    acc += hist[b++];
                sel[0] = b;   // bin of rank km
                sel[1] = acc; // ranks below that bin
                while (acc + hist[b] <= k)
                    acc += hist[b++];
                sel[2] = b;   // bin of rank k
            }
            __syncthreads();
        }
        const unsigned blo = sel[0], below = sel[1], bhi = sel[2];
        for (int y = threadIdx.y; y < h; y += BN_TY)
            for (int x = threadIdx.x; x < w; x += BN_TX) {
                float v = src[(size_t)y * pitch + x];
                if (sf_bane_kept(v, lo, hi)) {
                    unsigned b = (unsigned)(((double)v - (double)vmin) * scale);
                    if (b >= blo && b <= bhi) {
                        unsigned j = atomicAdd(&sel[3], 1u);
                        if (j < BN_CAND)
                            cand[j] = v;
                    }
                }
            }
        __syncthreads();
        const unsigned m = sel[3];
        if (m <= BN_CAND) {
            // rank of each candidate among them (ties broken by slot)
            for (unsigned j = tid; j < m; j += BN_TX * BN_TY) {
                const float cj = cand[j];
                unsigned r = 0;
                for (unsigned i = 0; i < m; i++)
                    r += cand[i] < cj || (cand[i] == cj && i < j);
                if (r == km - below)
                    mid[0] = cj;
                if (r == k - below)
                    mid[1] = cj;
            }
            __syncthreads();
            lomid = mid[0];
            himid = mid[1];
        } else {
            // radix select of rank k on the keys, then rank km
            if (tid == 0) {
                sel[0] = 0;
                sel[1] = k;
            }
            unsigned mask = 0;
            for (int shift = 24; shift >= 0; shift -= 8) {
                for (int i = tid; i < 256; i += BN_TX * BN_TY)
                    hist[i] = 0;
                __syncthreads();
                const unsigned prefix = sel[0];
                for (int y = threadIdx.y; y < h; y += BN_TY)
                    for (int x = threadIdx.x; x < w; x += BN_TX) {
                        float v = src[(size_t)y * pitch + x];
                        if (sf_bane_kept(v, lo, hi)) {
                            unsigned key = sf_fkey(v);
                            if ((key & mask) == prefix)
                                atomicAdd(&hist[(key >> shift) & 255u], 1u);
                        }
                    }
                __syncthreads();
                if (tid == 0) {
                    unsigned r = sel[1], d = 0;
                    while (hist[d] <= r) {
                        r -= hist[d];
                        d++;
                    }
                    sel[0] = prefix | (d << shift);
                    sel[1] = r; // rank among the keys equal so far
                }
                mask |= 255u << shift;
                __syncthreads();
            }
            const unsigned K = sel[0];
            himid = lomid = sf_fkey_value(K);
            if (km != k && sel[1] == 0) { // rank km holds a smaller key
                __syncthreads();
                if (tid == 0)
                    sel[2] = 0;
                __syncthreads();
                unsigned best = 0;
                for (int y = threadIdx.y; y < h; y += BN_TY)
                    for (int x = threadIdx.x; x < w; x += BN_TX) {
                        float v = src[(size_t)y * pitch + x];
                        if (sf_bane_kept(v, lo, hi)) {
                            unsigned key = sf_fkey(v);
                            if (key < K && key > best)
                                best = key;
                        }
                    }
                atomicMax(&sel[2], best);
                __syncthreads();
                lomid = sf_fkey_value(sel[2]);
            }
        }
    }
}

// One node by the block (bane_nodes' modes below).
__device__ void bane_node_block(const bane_args &a, int node)
{
    extern __shared__ double dyn_s[]; // the staged box, or the cell path's per-cell arrays
    float *box_s = (float *)dyn_s;
    __shared__ sf_bane_sums sh[BN_WARPS];
    __shared__ bane_med_shared S;
    __shared__ double tot[3];
    __shared__ int flag[4];
    const int tid = threadIdx.y * BN_TX + threadIdx.x;
    const int px = sf_bane_node_pos(node % a.ncx, a.ncx, a.nx, a.step),
              py = sf_bane_node_pos(node / a.ncx, a.ncy, a.ny, a.step);
    int x0, x1, y0, y1, it = 0;
    double lo = -INFINITY, hi = INFINITY, mean, sigma, n;
    sf_bane_box(px, a.box, a.nx, &x0, &x1);
    sf_bane_box(py, a.box, a.ny, &y0, &y1);
    const int w = x1 > x0 ? x1 - x0 : 0, h = y1 > y0 ? y1 - y0 : 0;
    const long long area = (long long)w * h;
    const float *src = a.img + (size_t)(h ? y0 : 0) * a.stride + (w ? x0 : 0);
    size_t pitch = a.stride;
    const bool cells = a.cells && sf_bane_aligned(px, py, a.step, a.box);
    if ((a.mode == 1 || a.mode == 3) && !cells)
        return; // left to the mode 2 launch
    // the cell path's arrays: running-sum parts, kept ranges, window ranges
    const int cx0 = x0 / a.step, cy0 = y0 / a.step, ncw = w ? (x1 - 1) / a.step - cx0 + 1 : 0,
              ncl = cells ? ncw * ((y1 - 1) / a.step - cy0 + 1) : 0;
    double *r1 = dyn_s, *r2 = dyn_s + ncl;
    int *ca = (int *)(dyn_s + 2 * ncl), *cb = ca + ncl, *ta = cb + ncl, *tb = ta + ncl,
        *coff = tb + ncl;
    if (cells) {
        // pass 1, then the clipping passes: each thread its cells' ranges and
        // range sums, thread 0 adds them (sf_bane_lanes_total, as the twin)
        for (int pass = 0; pass <= SF_BANE_PASSES; pass++) {
            double l = lo, hh = hi, s0 = 0;
            if (pass) {
                s0 = sigma;
                sf_bane_bounds(mean, sigma, a.kappa, &l, &hh);
            }
            for (int i = tid; i < ncl; i += BN_TX * BN_TY) {
                const size_t ci = (size_t)(cy0 + i / ncw) * a.ccx + cx0 + i % ncw;
                const long long o = bane_cell_at(a, ci);
                const int cnt = bane_cell_n(a, ci);
                int ia = pass ? sf_bane_upper(a.vals + o, cnt, l) : 0,
                    ib = pass ? sf_bane_lower(a.vals + o, cnt, hh) : cnt;
                if (ib < ia)
                    ib = ia;
                ta[i] = ia;
                tb[i] = ib;
                sf_bane_range2(a.vals + o, cnt, bane_cell_rec(a, ci), ia, ib, &r1[i], &r2[i]);
            }
            __syncthreads();
            if (tid == 0) {
                double un = 0, t1[SF_BANE_LANES], t2[SF_BANE_LANES];
                for (int q = 0; q < SF_BANE_LANES; q++)
                    t1[q] = t2[q] = 0.0;
                for (int i = 0; i < ncl; i++) {
                    un += tb[i] - ta[i];
                    t1[i % SF_BANE_LANES] += r1[i];
                    t2[i % SF_BANE_LANES] += r2[i];
                }
                tot[0] = un;
                tot[1] = sf_bane_lanes_total(t1);
                tot[2] = sf_bane_lanes_total(t2);
            }
            __syncthreads();
            if (tot[0] == 0) {
                if (!pass) {
                    if (tid == 0)
                        bane_node_empty(a, node);
                    return;
                }
                break;
            }
            for (int i = tid; i < ncl; i += BN_TX * BN_TY) {
                ca[i] = ta[i];
                cb[i] = tb[i];
            }
            if (pass)
                it++;
            lo = l;
            hi = hh;
            n = tot[0];
            sf_bane_mean_sigma_d(tot[0], tot[1], tot[2], &mean, &sigma);
            __syncthreads(); // tot and the ranges are read before they change
            if (pass && sf_bane_settled(s0, sigma))
                break;
        }
    } else {
        if (a.stage && area <= BN_STAGE_MAX) { // every later pass reads shared memory
            for (int y = threadIdx.y; y < h; y += BN_TY)
                for (int x = threadIdx.x; x < w; x += BN_TX)
                    box_s[y * w + x] = __ldg(src + (size_t)y * a.stride + x);
            src = box_s;
            pitch = w;
            __syncthreads();
        }
        const sf_bane_scale k0 = sf_bane_scale_for(
            area ? sf_bane_cells_max(a.cm, a.ccx, a.step, x0, x1, y0, y1) : 0.0, area);
        sf_bane_sums t = bane_pass(src, pitch, w, h, lo, hi, k0, sh);
        if (t.n == 0) {
            if (tid == 0)
                bane_node_empty(a, node);
            return;
        }
        sf_bane_mean_sigma(t, &k0, &mean, &sigma);
        while (it < SF_BANE_PASSES) {
            double l = lo, hh = hi, s0 = sigma;
            sf_bane_bounds(mean, sigma, a.kappa, &l, &hh);
            const sf_bane_scale kk = sf_bane_scale_for(sf_bane_bound_max(l, hh), area);
            sf_bane_sums u = bane_pass(src, pitch, w, h, l, hh, kk, sh);
            if (u.n == 0)
                break;
            it++;
            lo = l;
            hi = hh;
            t = u;
            sf_bane_mean_sigma(t, &kk, &mean, &sigma);
            if (sf_bane_settled(s0, sigma))
                break;
        }
        n = t.n;
    }
    const unsigned nk = (unsigned)n, k = nk / 2, km = nk & 1 ? k : k - 1;
    float lomid = 0.0f, himid = 0.0f;
    bool done = false;
    if (cells) {
        // a window around the mean holding ranks km and k: its values (in
        // each cell a sub-range of the kept range) gathered and ranked
        for (int tries = 0; tries < 5 && !done; tries++) {
            const double wd = sigma / 32.0 * (double)(1 << (3 * tries));
            if (!(wd > 0))
                break;
            const double vlo = mean - wd, vhi = mean + wd;
            for (int i = tid; i < ncl; i += BN_TX * BN_TY) {
                const size_t ci = (size_t)(cy0 + i / ncw) * a.ccx + cx0 + i % ncw;
                const long long o = bane_cell_at(a, ci);
                const int cnt = bane_cell_n(a, ci);
                int la = sf_bane_lower(a.vals + o, cnt, vlo), ub = sf_bane_upper(a.vals + o, cnt, vhi);
                la = la < ca[i] ? ca[i] : (la > cb[i] ? cb[i] : la);
                ub = ub < ca[i] ? ca[i] : (ub > cb[i] ? cb[i] : ub);
                ta[i] = la;
                tb[i] = ub;
            }
            __syncthreads();
            if (tid == 0) {
                unsigned below = 0, upto = 0, m = 0;
                for (int i = 0; i < ncl; i++) {
                    below += ta[i] - ca[i];
                    upto += tb[i] - ca[i];
                    coff[i] = m;
                    m += tb[i] - ta[i];
                }
                flag[0] = below <= km && k < upto; // the window holds both ranks
                flag[1] = (int)below;
                flag[2] = (int)m;
            }
            __syncthreads();
            if (flag[0]) {
                if (flag[2] > BN_CAND)
                    break; // many equal values: the box path below
                for (int i = tid; i < ncl; i += BN_TX * BN_TY) {
                    const size_t ci = (size_t)(cy0 + i / ncw) * a.ccx + cx0 + i % ncw;
                    const float *v = a.vals + bane_cell_at(a, ci);
                    for (int j = ta[i]; j < tb[i]; j++)
                        S.cand[coff[i] + j - ta[i]] = v[j];
                }
                __syncthreads();
                bane_rank(S.cand, (unsigned)flag[2], km - (unsigned)flag[1], k - (unsigned)flag[1],
                          S.mid);
                lomid = S.mid[0];
                himid = S.mid[1];
                done = true;
            }
            __syncthreads(); // flag, ta, tb are read before the next try
        }
    }
    if (!done)
        bane_median_box(src, pitch, w, h, lo, hi, nk, S, lomid, himid);
    if (tid == 0) {
        // sf_median_f32: the middle value, or the float32 mean of the two
        a.rawb[node] = km == k ? himid : __fdiv_rn(__fadd_rn(lomid, himid), 2.0f);
        a.raws[node] = (float)sigma;
        a.iters[node] = it;
    }
}

__global__ void __launch_bounds__(BN_TX *BN_TY) bane_nodes(bane_args a)
{
    if (a.mode == 3) { // the nodes bane_nodes_warp listed, a few blocks for all
        for (int q = blockIdx.x; q < *a.nslow; q += gridDim.x) {
            bane_node_block(a, a.slow[q]);
            __syncthreads(); // the next node reuses the shared arrays
        }
        return;
    }
    int node = blockIdx.x;
    if (a.mode == 2) { // the last column's nodes (when nx % step), then the last row's
        const int col = a.nx % a.step != 0 ? a.ncy : 0;
        node = node < col ? node * a.ncx + a.ncx - 1 : (a.ncy - 1) * a.ncx + (node - col);
    }
    bane_node_block(a, node);
}

// ---- the cell path, a warp per cell or node -------------------------------
// The common case (radio.pipe: step = 4 beams, box = 6 steps) has nodes of
// 36 cells of a few hundred pixels: too little work for a 256-thread block
// and its barriers. These kernels give each cell, then each aligned node, a
// warp, several a block, with only __syncwarp between steps; they compute
// what bane_cellsort and bane_nodes (mode 1) compute, in the same
// operations where the bits depend on them (the running sums, the raster
// order of the node sums), so the maps are unchanged.
#define BW_WARPS 8     // warps (nodes) a block
#define BW_CELLS 64    // cells a node at most ((box / step)^2 <= 64: 8 x 8)
#define BW_CAND 512    // median candidates ordered in shared memory (after the narrowing below)
#define BW_NARROW 64   // ... narrowed to about 50 when there are more

// Each cell's finite count and largest |v| (-1: none), a warp a cell.
__global__ void bane_cellstat(const float *img, size_t stride, int nx, int ny, int step, int ccx,
                              int nc, long long *cnt, float *cm)
{
    const int lane = threadIdx.x & 31, c = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (c >= nc)
        return;
    const int cx = c % ccx, cy = c / ccx, area = step * step;
    unsigned m = 0;
    float mx = -1.0f;
    for (int i = lane; i < area; i += 32) {
        const int x = cx * step + i % step, y = cy * step + i / step;
        if (x < nx && y < ny) {
            const float a = fabsf(img[(size_t)y * stride + x]);
            if (isfinite(a)) {
                m++;
                mx = a > mx ? a : mx;
            }
        }
    }
    for (int o = 16; o; o >>= 1) {
        m += __shfl_xor_sync(0xffffffffu, m, o);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    }
    if (lane == 0) {
        cnt[c] = m;
        cm[c] = mx;
    }
}

// Bitonic sort of 64 keys in registers: lane L holds elements L (x0) and
// L + 32 (x1); a partner in another lane comes by a shuffle, so a stage
// needs no shared memory and no barrier (a shared-memory network
// was a sixth of bane_nodes_warp's instructions). Element e keeps
// the smaller of its pair when it is the pair's lower one in an ascending
// block, or the upper one in a descending block.
__device__ __forceinline__ void bane_warp_sort64(unsigned &x0, unsigned &x1)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int k = 2; k <= 64; k <<= 1)
#pragma unroll
        for (int j = k >> 1; j > 0; j >>= 1) {
            if (j == 32) { // k == 64: elements L and L + 32, ascending
                const unsigned lo = min(x0, x1), hi = max(x0, x1);
                x0 = lo;
                x1 = hi;
            } else {
                const unsigned p0 = __shfl_xor_sync(0xffffffffu, x0, j),
                               p1 = __shfl_xor_sync(0xffffffffu, x1, j);
                const bool lower = (lane & j) == 0;
                x0 = lower == ((lane & k) == 0) ? min(x0, p0) : max(x0, p0);
                x1 = lower == (((lane + 32) & k) == 0) ? min(x1, p1) : max(x1, p1);
            }
        }
}

// One half's record (sf_bane_half_rec), a chunk a lane: the chunk's own
// sums, the chunks' offsets by a shuffle scan (sf_bane_scan), then P_q and
// the chunk's checkpoints into rec. Returns the half's pairs.
__device__ int bane_half_rec_warp(const unsigned *ks, int m, int len, int dir, sf_bane_pair *rec)
{
    int cl, nq, nck;
    const int np = sf_bane_half_pairs(len, &cl, &nq, &nck);
    const int lane = threadIdx.x & 31, j0 = lane * cl, j1 = min(j0 + cl, len);
    double u1 = 0.0, u2 = 0.0;
    for (int j = j0; j < j1; j++) {
        const double d = (double)sf_fkey_value(ks[dir > 0 ? m + j : m - 1 - j]);
        u1 = u1 + d;
        u2 = u2 + __dmul_rn(d, d);
    }
    // the chunks' offsets: sf_bane_scan's association, lane q holding x_q
    for (int o = 1; o < SF_BANE_CHUNKS; o <<= 1) {
        const double y1 = __shfl_up_sync(0xffffffffu, u1, o), y2 = __shfl_up_sync(0xffffffffu, u2, o);
        if (lane >= o) {
            u1 = y1 + u1;
            u2 = y2 + u2;
        }
    }
    double p1 = __shfl_up_sync(0xffffffffu, u1, 1), p2 = __shfl_up_sync(0xffffffffu, u2, 1);
    if (lane < nq) {
        double2 *r = reinterpret_cast<double2 *>(rec);
        r[lane] = make_double2(lane ? p1 : 0.0, lane ? p2 : 0.0);
        u1 = u2 = 0.0;
        for (int rr = 0; rr < nck * SF_BANE_CK && j0 + rr < len; rr++) {
            const int j = j0 + rr;
            const double d = (double)sf_fkey_value(ks[dir > 0 ? m + j : m - 1 - j]);
            u1 = u1 + d;
            u2 = u2 + __dmul_rn(d, d);
            if (rr % SF_BANE_CK == SF_BANE_CK - 1)
                r[nq + lane * nck + rr / SF_BANE_CK] = make_double2(u1, u2);
        }
    }
    return np;
}

// A cell's record (sf_bane_records) from its n sorted keys ks, by one warp;
// vals: the same values, already written (the whole cell's sums are read
// back from them and the halves' records).
__device__ void bane_records_warp(const unsigned *ks, const float *vals, int n, sf_bane_pair *rec)
{
    const int m = n / 2;
    sf_bane_pair *h = rec + 1;
    h += bane_half_rec_warp(ks, m, n - m, 1, h);
    (void)bane_half_rec_warp(ks, m, m, -1, h);
    __syncwarp();
    if ((threadIdx.x & 31) == 0) {
        double x1, x2;
        sf_bane_entries(vals, n, rec, 0, n, &x1, &x2);
        reinterpret_cast<double2 *>(rec)[0] = make_double2(x1, x2);
    }
}

struct bane_less {
    __device__ bool operator()(unsigned a, unsigned b) const { return a < b; }
};

// Each cell's finite values sorted and their running sums (what
// bane_cellsort computes), a warp a cell: the keys gathered in raster order,
// cub's warp merge sort (ITEMS keys a lane: cells of up to 32 ITEMS
// pixels), then its running sums' record (bane_records_warp: the chunks'
// offsets and checkpoints, about an eighth of the 16 bytes a value that the
// running sums themselves took to write). Each cell in a slot
// of step^2 values (cell c at c step^2): the warp counts the cell's finite
// values as it gathers them and writes the count (cnt) and the largest |v|
// (cm, the larger of the sorted ends' magnitudes; -1: none), so no pass
// before it counts cells and no scan places them (bane_cellstat and cub's
// scan: 0.17 ms at 8192^2).
template <int ITEMS, int WARPS>
__global__ void __launch_bounds__(32 * WARPS)
    bane_cellsort_warp(const float *img, size_t stride, int nx, int ny, int step, int ccx, int nc,
                       int *cnt, float *cm, float *vals, sf_bane_pair *rec, int rslot)
{
    typedef cub::WarpMergeSort<unsigned, ITEMS, 32> sorter;
    __shared__ typename sorter::TempStorage ts[WARPS];
    __shared__ unsigned kss[WARPS][32 * ITEMS];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, c = blockIdx.x * WARPS + w;
    if (c >= nc)
        return;
    unsigned *ks = kss[w];
    const int cx = c % ccx, cy = c / ccx, area = step * step;
    const long long o = (long long)c * area;
    // pixel i = i0 + lane of the cell at (row, col) = (i / step, i % step),
    // advanced by 32 pixels a round without dividing (two divisions a
    // round were about a sixth of the kernel's instructions)
    const int qd = 32 / step, rm = 32 % step;
    int base = 0, row = lane / step, col = lane % step;
    for (int i0 = 0; i0 < area; i0 += 32) {
        const int i = i0 + lane, x = cx * step + col, y = cy * step + row;
        float f = NAN;
        if (i < area && x < nx && y < ny)
            f = img[(size_t)y * stride + x];
        const bool ok = isfinite(f);
        const unsigned bal = __ballot_sync(0xffffffffu, ok);
        if (ok)
            ks[base + __popc(bal & ((1u << lane) - 1u))] = sf_fkey(f);
        base += __popc(bal);
        row += qd;
        col += rm;
        if (col >= step) {
            col -= step;
            row++;
        }
    }
    const int n = base;
    __syncwarp();
    if (n == 0) {
        if (lane == 0) {
            cnt[c] = 0;
            cm[c] = -1.0f;
        }
        return;
    }
    unsigned k[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; j++) {
        const int idx = lane * ITEMS + j;
        k[j] = idx < n ? ks[idx] : 0xffffffffu;
    }
    sorter(ts[w]).Sort(k, bane_less(), n, 0xffffffffu);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < ITEMS; j++)
        ks[lane * ITEMS + j] = k[j];
    __syncwarp();
    for (int i = lane; i < n; i += 32)
        vals[o + i] = sf_fkey_value(ks[i]);
    if (lane == 0) {
        cnt[c] = n;
        cm[c] = fmaxf(fabsf(sf_fkey_value(ks[0])), fabsf(sf_fkey_value(ks[n - 1])));
    }
    __syncwarp();
    bane_records_warp(ks, vals + o, n, rec + (size_t)c * rslot);
}

// The launch of bane_cellsort_warp for cells of step^2 pixels (0: none fits,
// BCS_AREA_MAX).
#define BCS_AREA_MAX (32 * 32)
static int bane_cellsort_warp_launch(const float *img, size_t stride, int nx, int ny, int step,
                                     int ccx, int nc, int *cnt, float *cm, float *vals,
                                     sf_bane_pair *rec, int rslot, cudaStream_t s)
{
    const int area = step * step;
#define BCS_LAUNCH(I, W)                                                                           \
    bane_cellsort_warp<I, W><<<(nc + (W)-1) / (W), 32 * (W), 0, s>>>(img, stride, nx, ny, step,   \
                                                                     ccx, nc, cnt, cm, vals, rec, rslot)
    if (area <= 32 * 4)
        BCS_LAUNCH(4, 8);
    else if (area <= 32 * 8)
        BCS_LAUNCH(8, 8);
    else if (area <= 32 * 10)
        BCS_LAUNCH(10, 8);
    else if (area <= 32 * 16)
        BCS_LAUNCH(16, 4);
    else if (area <= BCS_AREA_MAX)
        BCS_LAUNCH(32, 2);
    else
        return 0;
#undef BCS_LAUNCH
    return 1;
}

// A node's shared arrays in bane_nodes_warp: MAXC cells, CAND candidates.
template <int MAXC, int CAND> struct bane_warp_shared {
    int ca[MAXC], cb[MAXC], ta[MAXC], tb[MAXC];
    int ci[MAXC], cn[MAXC]; // each cell's index and count, found once a node
    unsigned cand[CAND];
};

// The sum over a node's G lanes (mask: theirs) of an int each holds.
template <int G> __device__ __forceinline__ unsigned bane_warp_sum(unsigned mask, unsigned v)
{
    return __reduce_add_sync(mask, v);
}

// Bitonic sort of 64 keys over the 16 lanes of a half warp (mask: theirs),
// bane_warp_sort64's network: lane L (0-15 in its half) holds elements L +
// 16 q in x[q]; pairs 16 or 32 apart are in one lane's registers, the others
// come by a shuffle within the half.
__device__ __forceinline__ void bane_half_sort64(unsigned mask, unsigned x[4])
{
    const int sl = threadIdx.x & 15;
#pragma unroll
    for (int k = 2; k <= 64; k <<= 1)
#pragma unroll
        for (int j = k >> 1; j > 0; j >>= 1) {
            if (j >= 16) {
                const int jj = j >> 4;
#pragma unroll
                for (int q = 0; q < 4; q++)
                    if (!(q & jj)) {
                        const bool asc = ((16 * q + sl) & k) == 0;
                        const unsigned lo = min(x[q], x[q | jj]), hi = max(x[q], x[q | jj]);
                        x[q] = asc ? lo : hi;
                        x[q | jj] = asc ? hi : lo;
                    }
            } else {
                const bool lower = (sl & j) == 0;
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const unsigned p = __shfl_xor_sync(mask, x[q], j, 16);
                    const bool asc = ((16 * q + sl) & k) == 0;
                    x[q] = lower == asc ? min(x[q], p) : max(x[q], p);
                }
            }
        }
}

// Element e of a half's sorted 64 (bane_half_sort64's layout), to every lane.
__device__ __forceinline__ unsigned bane_half_elem(unsigned mask, const unsigned x[4], unsigned e)
{
    const unsigned a = __shfl_sync(mask, x[0], e & 15, 16), b = __shfl_sync(mask, x[1], e & 15, 16),
                   c = __shfl_sync(mask, x[2], e & 15, 16), d = __shfl_sync(mask, x[3], e & 15, 16);
    const unsigned q = (e >> 4) & 3;
    return q == 0 ? a : q == 1 ? b : q == 2 ? c : d;
}

// Bitonic sort of P keys (a power of two) in shared memory by a node's G
// lanes (sl: the lane's index among them).
template <int G> __device__ void bane_group_bitonic(unsigned mask, int sl, unsigned *keys, int P)
{
    for (int k = 2; k <= P; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int t = sl; t < P / 2; t += G) {
                const int i = 2 * t - (t & (j - 1)), ixj = i + j; // i has bit j clear
                const unsigned u = keys[i], v = keys[ixj];
                if ((u > v) == ((i & k) == 0)) {
                    keys[i] = v;
                    keys[ixj] = u;
                }
            }
            __syncwarp(mask);
        }
}

// The cell-aligned nodes, G lanes each (bane_nodes' cell path, mode 1): G =
// 32, a warp a node, for nodes of up to 64 cells (8 x 8); G = 16, a half
// warp a node, for nodes of up to 48 (radio.pipe's 6 x 6 cells: a warp of
// 32 lanes took two rounds of its 36 cells, the second with 4 lanes busy;
// two nodes in a warp take three rounds for both). Lane sl of a node holds
// cells sl, sl + G, ... (R = MAXC / G rounds); the node's sums keep
// sf_bane_lanes_total's association, cell i in slot i % 32: with G = 16 a
// lane holds slots sl (cells sl, sl + 32) and sl + 16 (cell sl + 16), and
// adding the two is the total's first level. A node whose median window
// holds more than CAND values (many equal values) is listed in slow[] for
// bane_nodes (mode 3), which does all of it again with the box fallback.
template <int G, int MAXC, int CAND, int MINB>
__global__ void __launch_bounds__(32 * BW_WARPS, MINB) bane_nodes_warp(bane_args a, int *slow, int *nslow)
{
    constexpr int NPW = 32 / G, R = MAXC / G;
    static_assert(G == 32 || G == 16, "a warp or a half warp a node");
    static_assert(R * G == MAXC && MAXC <= 64, "whole rounds, slots i % 32 as the twin's");
    __shared__ bane_warp_shared<MAXC, CAND> WS[BW_WARPS * NPW];
    const int lane = threadIdx.x & 31, sl = lane & (G - 1), grp = (threadIdx.x >> 5) * NPW + lane / G;
    const unsigned mask = G == 32 ? 0xffffffffu : 0xffffu << (lane & 16);
    const int node = blockIdx.x * BW_WARPS * NPW + grp;
    if (node >= a.ncx * a.ncy)
        return;
    bane_warp_shared<MAXC, CAND> &S = WS[grp];
    const int px = sf_bane_node_pos(node % a.ncx, a.ncx, a.nx, a.step),
              py = sf_bane_node_pos(node / a.ncx, a.ncy, a.ny, a.step);
    if (!sf_bane_aligned(px, py, a.step, a.box))
        return; // the mode 2 launch
    int x0, x1, y0, y1, it = 0;
    double lo = -INFINITY, hi = INFINITY, mean = 0, sigma = 0, n = 0;
    sf_bane_box(px, a.box, a.nx, &x0, &x1);
    sf_bane_box(py, a.box, a.ny, &y0, &y1);
    const int cx0 = x0 / a.step, cy0 = y0 / a.step, ncw = (x1 - 1) / a.step - cx0 + 1,
              ncl = ncw * ((y1 - 1) / a.step - cy0 + 1);
    for (int i = sl; i < ncl; i += G) { // not a division and a count read in every loop
        const int ci = (cy0 + i / ncw) * a.ccx + cx0 + i % ncw;
        S.ci[i] = ci;
        S.cn[i] = bane_cell_n(a, ci);
    }
    __syncwarp(mask);
    double k1[R], k2[R]; // this lane's cells' range sums
    for (int pass = 0; pass <= SF_BANE_PASSES; pass++) {
        double l = lo, hh = hi, s0 = 0;
        if (pass) {
            s0 = sigma;
            sf_bane_bounds(mean, sigma, a.kappa, &l, &hh);
        }
        const float fl = sf_bane_f_le(l), fh = sf_bane_f_ge(hh);
        // this lane's cells: ranges and range sums, added in
        // sf_bane_lanes_total's order (the twin's): slot sl, then sl + 16
        double u1 = 0.0, u2 = 0.0, v1 = 0.0, v2 = 0.0;
        unsigned cn = 0;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int i = sl + G * r;
            if (i >= ncl)
                break;
            const size_t ci = (size_t)S.ci[i];
            const long long o = bane_cell_at(a, ci);
            const int cnt = S.cn[i];
            int ia = 0, ib = cnt;
            if (pass) {
                ia = sf_bane_upper_from_f(a.vals + o, S.ca[i], S.cb[i], fl);
                ib = sf_bane_lower_from_f(a.vals + o, S.ca[i], S.cb[i], fh);
                if (ib < ia)
                    ib = ia;
            }
            S.ta[i] = ia;
            S.tb[i] = ib;
            // a range the pass left as it was: its sums as they were
            if (!pass || ia != S.ca[i] || ib != S.cb[i])
                sf_bane_range2(a.vals + o, cnt, bane_cell_rec(a, ci), ia, ib, &k1[r], &k2[r]);
            if (G == 32 || !(r & 1)) {
                u1 = u1 + k1[r];
                u2 = u2 + k2[r];
            } else {
                v1 = v1 + k1[r];
                v2 = v2 + k2[r];
            }
            cn += ib - ia;
        }
        if (G == 16) { // the total's first level: slot sl takes slot sl + 16
            u1 = u1 + v1;
            u2 = u2 + v2;
        }
        for (int o = G / 2; o; o >>= 1) { // lane i takes lane i + o
            u1 = u1 + __shfl_down_sync(mask, u1, o, G);
            u2 = u2 + __shfl_down_sync(mask, u2, o, G);
        }
        u1 = __shfl_sync(mask, u1, 0, G);
        u2 = __shfl_sync(mask, u2, 0, G);
        const double un = (double)bane_warp_sum<G>(mask, cn);
        if (un == 0) {
            if (!pass) {
                if (sl == 0)
                    bane_node_empty(a, node);
                return;
            }
            break;
        }
        for (int i = sl; i < ncl; i += G) {
            S.ca[i] = S.ta[i];
            S.cb[i] = S.tb[i];
        }
        if (pass)
            it++;
        lo = l;
        hi = hh;
        n = un;
        sf_bane_mean_sigma_d(un, u1, u2, &mean, &sigma);
        __syncwarp(mask); // the sums are read before the next pass writes
        if (pass && sf_bane_settled(s0, sigma))
            break;
    }
    // the median: the kept values in a window around the mean that holds
    // ranks km and k (the twin's windows), sorted by key
    const unsigned nk = (unsigned)n, k = nk / 2, km = nk & 1 ? k : k - 1;
    for (int tries = 0; tries < 5; tries++) {
        const double wd = sigma / 32.0 * (double)(1 << (3 * tries));
        if (!(wd > 0))
            break;
        const double vlo = mean - wd, vhi = mean + wd;
        const float fvlo = sf_bane_f_ge(vlo), fvhi = sf_bane_f_le(vhi);
        unsigned below = 0, upto = 0;
        for (int i = sl; i < ncl; i += G) {
            const size_t ci = (size_t)S.ci[i];
            const float *v = a.vals + bane_cell_at(a, ci);
            const int ca = S.ca[i], cb = S.cb[i];
            // a bisection (the CPU twin gallops from a guess: here lanes
            // that gallop further keep the warp waiting, 0.2 ms at 8192^2)
            const int la = ca + sf_bane_lower_f(v + ca, cb - ca, fvlo),
                      ub = sf_bane_upper_from_f(v, la, cb, fvhi); // a few values past la
            S.ta[i] = la;
            S.tb[i] = ub;
            below += la - ca;
            upto += ub - ca;
        }
        below = bane_warp_sum<G>(mask, below);
        upto = bane_warp_sum<G>(mask, upto);
        if (!(below <= km && k < upto))
            continue;
        unsigned m = upto - below;
        if (m > BW_NARROW) {
            // Ranks km and k within a narrower window, where they should fall
            // if the window's values were spread evenly (they nearly are,
            // some hundredths of sigma around the mean), 24 ranks wider on
            // each side; searched inside the first one. Fewer candidates to
            // order: sorting about 260 of them cost more than the rest of the
            // node.
            const double span = vhi - vlo;
            const double nlo = vlo + span * (((double)(km - below) - 24.0) / m),
                         nhi = vlo + span * (((double)(k - below) + 25.0) / m);
            const float fnlo = sf_bane_f_ge(nlo), fnhi = sf_bane_f_le(nhi);
            unsigned nb0 = 0, nu0 = 0;
            int na[R], nbb[R];
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int i = sl + G * r;
                na[r] = nbb[r] = 0;
                if (i >= ncl)
                    continue;
                const size_t ci = (size_t)S.ci[i];
                const float *v = a.vals + bane_cell_at(a, ci);
                const int ta = S.ta[i], tb = S.tb[i];
                na[r] = ta + sf_bane_lower_f(v + ta, tb - ta, fnlo);
                nbb[r] = sf_bane_upper_from_f(v, na[r], tb, fnhi);
                nb0 += na[r] - ta;
                nu0 += nbb[r] - ta;
            }
            nb0 = below + bane_warp_sum<G>(mask, nb0);
            nu0 = below + bane_warp_sum<G>(mask, nu0);
            if (nb0 <= km && k < nu0) { // the narrow window holds them
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (sl + G * r < ncl) {
                        S.ta[sl + G * r] = na[r];
                        S.tb[sl + G * r] = nbb[r];
                    }
                below = nb0;
                m = nu0 - nb0;
            }
        }
        if (m > CAND)
            break; // many equal values: the block path
        __syncwarp(mask);
        // each cell's candidates at the sum of the cells before it (a scan
        // of the counts over the node's lanes, round by round)
        {
            unsigned base = 0;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int i = sl + G * r;
                const unsigned c = i < ncl ? S.tb[i] - S.ta[i] : 0;
                unsigned x = c;
                for (int o = 1; o < G; o <<= 1) {
                    const unsigned y = __shfl_up_sync(mask, x, o, G);
                    if (sl >= o)
                        x += y;
                }
                unsigned at = base + x - c;
                base += __shfl_sync(mask, x, G - 1, G);
                if (i < ncl) {
                    const float *v = a.vals + bane_cell_at(a, (size_t)S.ci[i]);
                    for (int j = S.ta[i]; j < S.tb[i]; j++)
                        S.cand[at++] = sf_fkey(v[j]);
                }
            }
        }
        __syncwarp(mask);
        if (m <= 64) { // (nearly always: the narrowed window holds about 50)
            const unsigned r0 = km - below, r1 = k - below;
            unsigned lok, hik;
            if (G == 32) {
                unsigned x0 = lane < (int)m ? S.cand[lane] : 0xffffffffu,
                         x1 = lane + 32 < (int)m ? S.cand[lane + 32] : 0xffffffffu;
                bane_warp_sort64(x0, x1);
                const unsigned a0 = __shfl_sync(0xffffffffu, x0, r0 & 31),
                               a1 = __shfl_sync(0xffffffffu, x1, r0 & 31),
                               b0 = __shfl_sync(0xffffffffu, x0, r1 & 31),
                               b1 = __shfl_sync(0xffffffffu, x1, r1 & 31);
                lok = r0 >> 5 ? a1 : a0;
                hik = r1 >> 5 ? b1 : b0;
            } else {
                unsigned x[4];
#pragma unroll
                for (int q = 0; q < 4; q++)
                    x[q] = sl + 16 * q < (int)m ? S.cand[sl + 16 * q] : 0xffffffffu;
                bane_half_sort64(mask, x);
                lok = bane_half_elem(mask, x, r0);
                hik = bane_half_elem(mask, x, r1);
            }
            if (sl == 0) {
                const float lomid = sf_fkey_value(lok), himid = sf_fkey_value(hik);
                a.rawb[node] = km == k ? himid : __fdiv_rn(__fadd_rn(lomid, himid), 2.0f);
                a.raws[node] = (float)sigma;
                a.iters[node] = it;
            }
            return;
        }
        unsigned P = 32;
        while (P < m)
            P <<= 1;
        for (unsigned i = m + sl; i < P; i += G)
            S.cand[i] = 0xffffffffu;
        __syncwarp(mask);
        bane_group_bitonic<G>(mask, sl, S.cand, (int)P);
        if (sl == 0) {
            const float lomid = sf_fkey_value(S.cand[km - below]),
                        himid = sf_fkey_value(S.cand[k - below]);
            a.rawb[node] = km == k ? himid : __fdiv_rn(__fadd_rn(lomid, himid), 2.0f);
            a.raws[node] = (float)sigma;
            a.iters[node] = it;
        }
        return;
    }
    if (sl == 0)
        slow[atomicAdd(nslow, 1)] = node;
}

// The cell path's arrays (background_bane.h). 1. finite pixels a cell.
__global__ void bane_cellcount(const float *img, size_t stride, int nx, int ny, int step, int ccx,
                               int ccy, long long *cnt)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ccx * ccy)
        return;
    const int cx = c % ccx, cy = c / ccx;
    long long m = 0;
    for (int y = cy * step; y < (cy + 1) * step && y < ny; y++)
        for (int x = cx * step; x < (cx + 1) * step && x < nx; x++)
            m += isfinite(img[(size_t)y * stride + x]) != 0;
    cnt[c] = m;
}

// 2. Exclusive prefix sum of the counts into off[0..n] (one block: a
// thread's chunk, the chunk totals scanned by thread 0, then the chunks).
__global__ void bane_cellscan(const long long *cnt, long long *off, int n)
{
    __shared__ long long part[1024];
    const int t = threadIdx.x, chunk = (n + 1023) / 1024, b = t * chunk,
              e = b + chunk < n ? b + chunk : n;
    long long s = 0;
    for (int i = b; i < e; i++)
        s += cnt[i];
    part[t] = s;
    __syncthreads();
    if (t == 0) {
        long long acc = 0;
        for (int i = 0; i < 1024; i++) {
            long long v = part[i];
            part[i] = acc;
            acc += v;
        }
        off[n] = acc;
    }
    __syncthreads();
    s = part[t];
    for (int i = b; i < e; i++) {
        off[i] = s;
        s += cnt[i];
    }
}

// 3. Each cell's finite values sorted (bitonic, on sf_fkey keys in shared
// memory: P, a power of two of at least step^2) and their running sums'
// record (bane_records_warp, by the first warp: sf_bane_records' operations).
__global__ void bane_cellsort(const float *img, size_t stride, int nx, int ny, int step, int ccx,
                              const long long *off, int P, float *vals, sf_bane_pair *rec, int rslot)
{
    extern __shared__ unsigned keys[];
    __shared__ int cntk;
    const int c = blockIdx.x, cx = c % ccx, cy = c / ccx, tid = threadIdx.x;
    const long long o = off[c];
    const int n = (int)(off[c + 1] - o);
    if (tid == 0)
        cntk = 0;
    for (int i = tid; i < P; i += blockDim.x)
        keys[i] = 0xffffffffu;
    __syncthreads();
    for (int i = tid; i < step * step; i += blockDim.x) {
        const int x = cx * step + i % step, y = cy * step + i / step;
        if (x < nx && y < ny) {
            float f = img[(size_t)y * stride + x];
            if (isfinite(f))
                keys[atomicAdd(&cntk, 1)] = sf_fkey(f);
        }
    }
    __syncthreads();
    for (int k = 2; k <= P; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = tid; i < P; i += blockDim.x) {
                const int ixj = i ^ j;
                if (ixj > i) {
                    const unsigned u = keys[i], v = keys[ixj];
                    if ((u > v) == ((i & k) == 0)) {
                        keys[i] = v;
                        keys[ixj] = u;
                    }
                }
            }
            __syncthreads();
        }
    for (int i = tid; i < n; i += blockDim.x)
        vals[o + i] = sf_fkey_value(keys[i]);
    __syncthreads(); // the values are read back
    if (tid < 32) // sf_bane_records' operations, by the first warp
        bane_records_warp(keys, vals + o, n, rec + (size_t)c * rslot);
}

__global__ void bane_fill(const float *rawb, const float *raws, float *fb, float *fs, int ncx, int ncy)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ncx * ncy)
        return;
    float b = rawb[i], s = raws[i];
    if (isnan(b))
        sf_bkg_fill_one(rawb, raws, ncx, ncy, i % ncx, i / ncx, &b, &s);
    fb[i] = b;
    fs[i] = s;
}

extern "C" size_t sf_background_bane_gpu_scratch(int nx, int ny, const sf_bkg_params *p)
{
    return p ? sf_bane_scratch_bytes(nx, ny, p->step, p->box) : 0;
}

// sf_background_bane_gpu (the maps into bkg, rms) or, with grid, the grids
// kept in SF_GBUF_NODES and no maps (sf_background_bane_grid_gpu).
static sf_status bane_run(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                          sf_bkg_stats *out, sf_image *bkg, sf_image *rms, sf_bane_grid *grid)
{
    sf_status st = SF_OK;
    const int nx = img->nx, ny = img->ny, step = p->step;
    const int ncx = sf_bane_nnodes(nx, step), ncy = sf_bane_nnodes(ny, step),
              nb = (int)((long long)ncx * ncy); // checked below (sf_bane_check_work)
    const size_t fbytes = ((size_t)nb * 4 + 255) / 256 * 256;
    float *hb = NULL, *hs = NULL;
    int *hit = NULL, niter = 0;
    bane_scan_out scan;
    void *base = NULL;
    char *q;
    bane_scan_out *dscan;
    float *rawb, *raws, *fb, *fs, *cm, *cvals = NULL;
    sf_bane_pair *crec = NULL;
    long long *coff = NULL, *ccnt = NULL;
    int *fcnt = NULL;
    void *ctemp = NULL;
    bane_summary_out *dsum;
    int *iters, *slow, *nslow;
    bane_args na; // the node kernels' arguments (bane_nodes_setup)
    size_t sdyn = 0, cdyn = 0;
    int ne = 0, forked = 0;
    const int use_cells = sf_bane_use_cells(step, p->box);
    const int rslot = use_cells ? sf_bane_rec_slot(step) : 0; // pairs of a cell's record
    // SKYFIND_BANE_BLOCK=1: the block-per-cell and block-per-node kernels
    // (the warp kernels' reference in benchmarks; the same maps)
    const int blockpath = getenv("SKYFIND_BANE_BLOCK") != NULL;
    const int ccx = (nx + step - 1) / step, ccy = (ny + step - 1) / step;
    // the cells in slots of step^2 values, sorted and counted by one warp
    // each (bane_cellsort_warp); else counted, placed by a scan and sorted
    const int slots = use_cells && !blockpath && step * step <= BCS_AREA_MAX;
    if (!grid && (!bkg || !rms))
        return sf_fail(SF_ERR_PARAM, "background method=bane needs both bkg and rms maps");
    if ((st = sf_bane_check_work(nx, ny, step, p->box)) != SF_OK)
        return st;
    if (img->loc != SF_DEVICE || (!grid && (bkg->loc != SF_DEVICE || rms->loc != SF_DEVICE)))
        return sf_fail(SF_ERR_PARAM, "sf_background_gpu needs device image and maps");
    SF_TRY(sf_gpu_scratch(g, sf_bane_scratch_bytes(nx, ny, step, p->box), &base));
    q = (char *)base;
    dscan = (bane_scan_out *)q;
    q += 4096;
    rawb = (float *)q;
    raws = (float *)(q + fbytes);
    fb = (float *)(q + 2 * fbytes);
    fs = (float *)(q + 3 * fbytes);
    iters = (int *)(q + 4 * fbytes);
    cm = (float *)(q + 5 * fbytes);
    slow = (int *)(q + 6 * fbytes);
    nslow = (int *)((char *)base + 2048);
    dsum = (bane_summary_out *)((char *)base + 1024);
    q += 7 * fbytes;
    if (use_cells) { // the layout of sf_bane_scratch_bytes
        const size_t nc = (size_t)ccx * ccy, ns = sf_bane_cell_values(nx, ny, step);
        coff = (long long *)q;
        q += SF_BANE_ALIGN((nc + 1) * 8);
        ccnt = (long long *)q; // (nc + 1) * 8 bytes fit in the nc*4 + ns*4 that follow
        fcnt = (int *)q;       // slots: the counts alone (nc ints)
        q += SF_BANE_ALIGN(nc * 4);
        cvals = (float *)q;
        q += SF_BANE_ALIGN(ns * 4);
        crec = (sf_bane_pair *)q;
        q += SF_BANE_ALIGN(nc * (size_t)rslot * sizeof(sf_bane_pair));
        ctemp = q;
    }
    {
        // boxes of up to BN_STAGE_MAX pixels are read from the image once
        const long long bw = p->box < nx ? p->box : nx, bh = p->box < ny ? p->box : ny;
        const int stage = bw * bh <= BN_STAGE_MAX && !getenv("SKYFIND_BANE_NOSTAGE");
        // Two kinds of launch on the cell path: the aligned nodes with only
        // their small per-cell arrays in shared memory (many blocks an SM),
        // and the few others (last column, last row: mode 2) with their
        // staged boxes.
        sdyn = stage ? (size_t)(bw * bh) * sizeof(float) : 0;
        cdyn = (size_t)(p->box / step) * (p->box / step) * (2 * 8 + 5 * 4) + 64;
        ne = use_cells ? (nx % step ? ncy : 0) + (ny % step ? ncx - (nx % step ? 1 : 0) : 0) : 0;
        na = bane_args{img->data, cm,     cvals, crec, rslot, coff,      fcnt,     slots ? step * step : 0,
                       img->stride, nx,   ny,   step,  p->box, ncx, ncy, ccx, stage, use_cells,
                       p->kappa,  rawb,   raws,  iters, use_cells ? 1 : 0, slow, nslow};
        const size_t dyn = use_cells ? (cdyn > sdyn ? cdyn : sdyn) : sdyn;
        // the static arrays (12.6 KB) and a staged box may pass the 48 KB a
        // block gets without asking
        if (dyn)
            SF_TRY(sf_gpu_smem_max(g, (const void *)bane_nodes, dyn));
    }
    SF_CUDA(cudaMemsetAsync(dscan, 0, sizeof *dscan, g->stream));
    SF_CUDA(cudaMemsetAsync(nslow, 0, sizeof *nslow, g->stream));
    if (!use_cells || blockpath) { // the cell path counts them in its offsets
        bane_scan<<<2 * g->sm_count, 256, 0, g->stream>>>(img->data, img->stride, nx, ny, dscan);
        SF_LAUNCHED();
    }
    if (!use_cells || blockpath) {
        bane_cellmax<<<sf_blocks((size_t)ccx * ccy, 128), 128, 0, g->stream>>>(
            img->data, img->stride, nx, ny, step, ccx, ccy, cm);
        SF_LAUNCHED();
    }
    if (use_cells) {
        int P = 1;
        while (P < step * step)
            P <<= 1;
        if (slots) {
            // count, maxima, sort and running sums in one pass over the image
            if (!bane_cellsort_warp_launch(img->data, img->stride, nx, ny, step, ccx, ccx * ccy, fcnt,
                                           cm, cvals, crec, rslot, g->stream)) {
                st = sf_fail(SF_ERR_INTERNAL, "background bane: no warp cell sort for step %d", step);
                goto fail;
            }
        } else if (blockpath) {
            bane_cellcount<<<sf_blocks((size_t)ccx * ccy, 128), 128, 0, g->stream>>>(
                img->data, img->stride, nx, ny, step, ccx, ccy, ccnt);
        } else {
            bane_cellstat<<<sf_blocks((size_t)ccx * ccy * 32, 256), 256, 0, g->stream>>>(
                img->data, img->stride, nx, ny, step, ccx, ccx * ccy, ccnt, cm);
        }
        SF_LAUNCHED();
        if (ne && !blockpath) {
            // the nodes off the cell grid need only the cell maxima: on a side
            // stream, beside the cell sort (or with slots, beside the warp
            // node kernel; 0.15 ms of 965 blocks at 8192^2 that ran alone
            // after them)
            bane_args a2 = na;
            a2.mode = 2;
            SF_TRY(sf_gpu_fork(g, 1));
            forked = 1;
            bane_nodes<<<ne, dim3(BN_TX, BN_TY), sdyn, g->aux[0]>>>(a2);
            SF_LAUNCHED();
        }
        if (!slots) {
            // the packed layout: the offsets by cub's scan of the counts (its
            // temporary storage after the cell arrays, sf_bane_scratch_bytes),
            // else one block; then a block a cell sorts it (blockpath, or
            // cells of more than BCS_AREA_MAX pixels)
            size_t tb = 0;
            const int nc = ccx * ccy;
            SF_CUDA(cub::DeviceScan::InclusiveSum(NULL, tb, ccnt, coff + 1, nc, g->stream));
            if (!blockpath && tb <= SF_BANE_SCAN_TEMP(nc)) {
                SF_CUDA(cudaMemsetAsync(coff, 0, sizeof *coff, g->stream));
                SF_CUDA(cub::DeviceScan::InclusiveSum(ctemp, tb, ccnt, coff + 1, nc, g->stream));
            } else {
                bane_cellscan<<<1, 1024, 0, g->stream>>>(ccnt, coff, nc);
                SF_LAUNCHED();
            }
            if (P * 4 > 48 * 1024)
                SF_TRY(sf_gpu_smem_max(g, (const void *)bane_cellsort, (size_t)P * 4));
            bane_cellsort<<<ccx * ccy, 256, (size_t)P * 4, g->stream>>>(
                img->data, img->stride, nx, ny, step, ccx, coff, P, cvals, crec, rslot);
            SF_LAUNCHED();
        }
    }
    {
        if (use_cells && !blockpath && (p->box / step) * (p->box / step) <= BW_CELLS) {
            // a warp a node, then the few it lists (mode 3) by a few blocks
            const int span = p->box / step;
            if (span * span <= 48 && !getenv("SKYFIND_BANE_WARP32")) { // two nodes a warp
                bane_nodes_warp<16, 48, 256, 4> // 64 registers (48 spilled 364 bytes)
                    <<<(nb + 2 * BW_WARPS - 1) / (2 * BW_WARPS), 32 * BW_WARPS, 0, g->stream>>>(
                        na, slow, nslow);
            } else
                bane_nodes_warp<32, BW_CELLS, BW_CAND, 5>
                    <<<(nb + BW_WARPS - 1) / BW_WARPS, 32 * BW_WARPS, 0, g->stream>>>(na, slow,
                                                                                       nslow);
            SF_LAUNCHED();
            na.mode = 3;
            bane_nodes<<<nb < 8 * g->sm_count ? nb : 8 * g->sm_count, dim3(BN_TX, BN_TY), cdyn,
                         g->stream>>>(na);
        } else {
            bane_nodes<<<nb, dim3(BN_TX, BN_TY), use_cells ? cdyn : sdyn, g->stream>>>(na);
        }
        SF_LAUNCHED();
        if (ne && !forked) {
            na.mode = 2;
            bane_nodes<<<ne, dim3(BN_TX, BN_TY), sdyn, g->stream>>>(na);
            SF_LAUNCHED();
        }
        if (forked) {
            forked = 0;
            SF_TRY(sf_gpu_join(g, 1));
        }
    }
    bane_fill<<<sf_blocks(nb, 128), 128, 0, g->stream>>>(rawb, raws, fb, fs, ncx, ncy);
    SF_LAUNCHED();
    {
        // the filled grids packed for the maps' makers (bane_pack) in the
        // context's SF_GBUF_NODES: kept for the later stages (grid), or the
        // maps made now
        sf_bane_grid gr;
        SF_TRY(sf_bane_pack_grid(g, fb, fs, nb, nx, ny, step, ncx, ncy, &gr));
        if (grid)
            *grid = gr;
        else
            SF_TRY(sf_bane_maps_gpu(g, img, &gr, bkg, rms));
    }
    // the finite pixels: on the cell path the summary adds them up (the
    // cells' counts, or the packed layout's last offset), else the scan's count
    if (!use_cells || blockpath) {
        SF_TRY(sf_gpu_to_host(g, &scan, dscan, sizeof scan));
        if (scan.nfinite == 0) {
            st = sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels");
            goto fail;
        }
    }
    if (!blockpath) { // the summary on the device, 40 bytes back
        bane_summary_out *hsum = (bane_summary_out *)g->pinned;
        SF_TRY(sf_bane_summary_launch(g, fb, fs, iters, nb,
                                   use_cells && !slots ? coff + (size_t)ccx * ccy : NULL,
                                   slots ? fcnt : NULL, ccx * ccy, dsum));
        SF_TRY(sf_gpu_to_host(g, hsum, dsum, sizeof *hsum));
        if (use_cells)
            scan.nfinite = (unsigned long long)hsum->nfinite;
        if (scan.nfinite == 0) {
            st = sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels");
            goto fail;
        }
        if (isnan(hsum->first)) { // filled: NaN only when no node was valid
            st = sf_bane_no_node(p, img->nx, img->ny);
            goto fail;
        }
        memset(out, 0, sizeof *out);
        out->mean = hsum->mean;
        out->median = hsum->median;
        out->sigma = hsum->sigma;
        out->nvalid = out->nused = (long long)scan.nfinite;
        out->niter = hsum->niter;
        out->converged = 1;
        goto done;
    }
    // the filled grids and the passes (contiguous: fb, fs, iters) in one copy
    hb = (float *)malloc(3 * fbytes);
    if (!hb) {
        st = sf_fail(SF_ERR_NOMEM, "background bane: %d nodes on the host", nb);
        goto fail;
    }
    hs = (float *)((char *)hb + fbytes);
    hit = (int *)((char *)hb + 2 * fbytes);
    SF_TRY(sf_gpu_to_host(g, hb, fb, 3 * fbytes));
    if (isnan(hb[0])) { // filled: NaN only when no node was valid
        st = sf_bane_no_node(p, img->nx, img->ny);
        goto fail;
    }
    for (int i = 0; i < nb; i++)
        niter = hit[i] > niter ? hit[i] : niter;
    sf_bane_grid_stats(hb, hs, nb, (long long)scan.nfinite, niter, out);
done:
    if (grid)
        grid->nan = out->nvalid < (long long)sf_npix(nx, ny);
fail:
    if (forked) // the side stream's nodes are ordered before whatever comes next
        (void)sf_gpu_join(g, 1);
    free(hb);
    return st;
}

extern "C" sf_status sf_background_bane_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                            sf_bkg_stats *out, sf_image *bkg, sf_image *rms)
{
    return bane_run(g, img, p, out, bkg, rms, NULL);
}

extern "C" sf_status sf_bkg_check_params(const sf_bkg_params *p);

extern "C" sf_status sf_background_bane_grid_gpu(sf_gpu *g, const sf_image *img,
                                                 const sf_bkg_params *p, sf_bkg_stats *out,
                                                 sf_bane_grid *grid)
{
    sf_status st = sf_bkg_check_params(p);
    if (st)
        return st;
    if (p->method != SF_BKG_BANE || !grid)
        return sf_fail(SF_ERR_PARAM, "sf_background_bane_grid_gpu: method=bane and a grid");
    memset(grid, 0, sizeof *grid);
    return bane_run(g, img, p, out, NULL, NULL, grid);
}
