// Stage `background`, method=bane, GPU version (twin: cpu/background_bane.c;
// the rules and why both backends get the same bits: src/calc/background_bane.h).
// 1. bane_scan: the image's finite pixels (for the run summary).
// 2. bane_nodes, one block of 32 x 8 threads per node: each pass reads the
//    node's box straight from the image (rows coalesced; neighbouring boxes
//    overlap, so most reads hit L1/L2) and sums the kept pixels' v and v*v
//    as exact integers in doubles (warp shuffles, then the 8 warps; the
//    first pass's scale from bane_cellmax's grid of cell maxima), and every
//    thread derives the same mean, sigma and bounds. The
//    median of the kept pixels is a radix select on their order-preserving
//    keys (4 passes of 8 bits, a 256-bin shared histogram), plus one max
//    pass for the lower middle of an even count.
// 3. bane_fill: nodes without a finite pixel take sf_bkg_fill_one's value.
// 4. bane_maps: both full-resolution maps, bilinear (sf_bane_bilinear).
// The filled grids come back to the host for the run summary (the twin's
// sf_bane_grid_stats).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "skyfind/background.h"
#ifndef __CUDA_ARCH__
#define __dmul_rn(a, b) ((a) * (b))
#define __fmul_rn(a, b) ((a) * (b))
#endif
#include "background_bane.h"
#include "fixsum.h" // sf_fkey: order-preserving float keys
#ifndef __CUDA_ARCH__
#undef __dmul_rn
#undef __fmul_rn
#endif

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
    const size_t n = (size_t)nx * ny;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = img[(i / nx) * stride + i % nx];
        c += isfinite(v) != 0;
    }
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

// The block's sums of v and v*v over the box pixels kept by (lo, hi);
// every thread returns the same totals.
__device__ sf_bane_sums bane_pass(const float *img, size_t stride, int x0, int x1, int y0, int y1,
                                  double lo, double hi, sf_bane_scale k, sf_bane_sums *sh)
{
    const int tid = threadIdx.y * BN_TX + threadIdx.x;
    sf_bane_sums t = {0.0, 0.0, 0.0};
    for (int y = y0 + threadIdx.y; y < y1; y += BN_TY) {
        const float *row = img + (size_t)y * stride;
        for (int x = x0 + threadIdx.x; x < x1; x += BN_TX) {
            float v = __ldg(row + x);
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
    for (int w = 1; w < BN_WARPS; w++) {
        t.n += sh[w].n;
        t.s1 += sh[w].s1;
        t.s2 += sh[w].s2;
    }
    return t;
}

struct bane_args {
    const float *img, *cm;
    size_t stride;
    int nx, ny, step, box, ncx, ncy, ccx;
    double kappa;
    float *rawb, *raws;
    int *iters;
};

__global__ void __launch_bounds__(BN_TX *BN_TY) bane_nodes(bane_args a)
{
    __shared__ sf_bane_sums sh[BN_WARPS];
    __shared__ unsigned hist[256];
    __shared__ unsigned sel[3]; // prefix, rank left, lower-middle key
    const int node = blockIdx.x, tid = threadIdx.y * BN_TX + threadIdx.x;
    const int px = sf_bane_node_pos(node % a.ncx, a.ncx, a.nx, a.step),
              py = sf_bane_node_pos(node / a.ncx, a.ncy, a.ny, a.step);
    int x0, x1, y0, y1, it = 0;
    double lo = -INFINITY, hi = INFINITY, mean, sigma;
    sf_bane_box(px, a.box, a.nx, &x0, &x1);
    sf_bane_box(py, a.box, a.ny, &y0, &y1);
    const long long area = (long long)(x1 - x0) * (y1 - y0);
    const sf_bane_scale k0 =
        sf_bane_scale_for(area ? sf_bane_cells_max(a.cm, a.ccx, a.step, x0, x1, y0, y1) : 0.0, area);
    sf_bane_sums t = bane_pass(a.img, a.stride, x0, x1, y0, y1, lo, hi, k0, sh);
    if (t.n == 0) {
        if (tid == 0) {
            a.rawb[node] = a.raws[node] = __int_as_float(0x7fc00000);
            a.iters[node] = 0;
        }
        return;
    }
    sf_bane_mean_sigma(t, &k0, &mean, &sigma);
    while (it < SF_BANE_PASSES) {
        double l = lo, h = hi, s0 = sigma;
        sf_bane_bounds(mean, sigma, a.kappa, &l, &h);
        const sf_bane_scale kk = sf_bane_scale_for(sf_bane_bound_max(l, h), area);
        sf_bane_sums u = bane_pass(a.img, a.stride, x0, x1, y0, y1, l, h, kk, sh);
        if (u.n == 0)
            break;
        it++;
        lo = l;
        hi = h;
        t = u;
        sf_bane_mean_sigma(t, &kk, &mean, &sigma);
        if (sf_bane_settled(s0, sigma))
            break;
    }
    // the median of the t.n kept pixels: the key of rank k = n/2, then for an
    // even count the largest key below it when rank k-1 is not also that key
    const unsigned long long nk = (unsigned long long)t.n, k = nk / 2;
    if (tid == 0) {
        sel[0] = 0;
        sel[1] = (unsigned)k;
    }
    unsigned mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += BN_TX * BN_TY)
            hist[i] = 0;
        __syncthreads();
        const unsigned prefix = sel[0];
        for (int y = y0 + threadIdx.y; y < y1; y += BN_TY) {
            const float *row = a.img + (size_t)y * a.stride;
            for (int x = x0 + threadIdx.x; x < x1; x += BN_TX) {
                float v = __ldg(row + x);
                if (sf_bane_kept(v, lo, hi)) {
                    unsigned key = sf_fkey(v);
                    if ((key & mask) == prefix)
                        atomicAdd(&hist[(key >> shift) & 255u], 1u);
                }
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
    float himid = sf_fkey_value(K), lomid = himid;
    if ((nk & 1) == 0 && sel[1] == 0) { // rank k-1 holds a smaller key
        if (tid == 0)
            sel[2] = 0;
        __syncthreads();
        unsigned best = 0;
        for (int y = y0 + threadIdx.y; y < y1; y += BN_TY) {
            const float *row = a.img + (size_t)y * a.stride;
            for (int x = x0 + threadIdx.x; x < x1; x += BN_TX) {
                float v = __ldg(row + x);
                if (sf_bane_kept(v, lo, hi)) {
                    unsigned key = sf_fkey(v);
                    if (key < K && key > best)
                        best = key;
                }
            }
        }
        atomicMax(&sel[2], best);
        __syncthreads();
        lomid = sf_fkey_value(sel[2]);
    }
    if (tid == 0) {
        // sf_median_f32: the middle value, or the float32 mean of the two
        a.rawb[node] = (nk & 1) ? himid : __fdiv_rn(__fadd_rn(lomid, himid), 2.0f);
        a.raws[node] = (float)sigma;
        a.iters[node] = it;
    }
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

__global__ void bane_maps(const float *img, size_t istride, int nx, int ny, int step, int ncx,
                          int ncy, const float *fb, const float *fs, float *ob, size_t bstride,
                          float *os, size_t rstride)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= nx)
        return;
    int kx, ky;
    double tx, ty;
    sf_bane_axis(y, ny, step, ncy, &ky, &ty);
    sf_bane_axis(x, nx, step, ncx, &kx, &tx);
    float b, s;
    if (isnan(img[(size_t)y * istride + x])) {
        b = s = __int_as_float(0x7fc00000);
    } else {
        b = sf_bane_bilinear(fb, ncx, kx, ky, tx, ty);
        s = sf_bane_bilinear(fs, ncx, kx, ky, tx, ty);
    }
    ob[(size_t)y * bstride + x] = b;
    os[(size_t)y * rstride + x] = s;
}

extern "C" size_t sf_background_bane_gpu_scratch(int nx, int ny, const sf_bkg_params *p)
{
    return p ? sf_bane_scratch_bytes(nx, ny, p->step) : 0;
}

extern "C" sf_status sf_background_bane_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                            sf_bkg_stats *out, sf_image *bkg, sf_image *rms)
{
    sf_status st = SF_OK;
    const int nx = img->nx, ny = img->ny, step = p->step;
    const int ncx = sf_bane_nnodes(nx, step), ncy = sf_bane_nnodes(ny, step), nb = ncx * ncy;
    const size_t fbytes = ((size_t)nb * 4 + 255) / 256 * 256;
    float *hb = NULL, *hs = NULL;
    int *hit = NULL, niter = 0;
    bane_scan_out scan;
    void *base = NULL;
    char *q;
    bane_scan_out *dscan;
    float *rawb, *raws, *fb, *fs, *cm;
    int *iters;
    const int ccx = (nx + step - 1) / step, ccy = (ny + step - 1) / step;
    if (!bkg || !rms)
        return sf_fail(SF_ERR_PARAM, "background method=bane needs both bkg and rms maps");
    if (img->loc != SF_DEVICE || bkg->loc != SF_DEVICE || rms->loc != SF_DEVICE)
        return sf_fail(SF_ERR_PARAM, "sf_background_gpu needs device image and maps");
    SF_TRY(sf_gpu_scratch(g, sf_bane_scratch_bytes(nx, ny, step), &base));
    q = (char *)base;
    dscan = (bane_scan_out *)q;
    q += 4096;
    rawb = (float *)q;
    raws = (float *)(q + fbytes);
    fb = (float *)(q + 2 * fbytes);
    fs = (float *)(q + 3 * fbytes);
    iters = (int *)(q + 4 * fbytes);
    cm = (float *)(q + 5 * fbytes);
    SF_CUDA(cudaMemsetAsync(dscan, 0, sizeof *dscan, g->stream));
    bane_scan<<<2 * g->sm_count, 256, 0, g->stream>>>(img->data, img->stride, nx, ny, dscan);
    SF_LAUNCHED();
    bane_cellmax<<<sf_blocks((size_t)ccx * ccy, 128), 128, 0, g->stream>>>(
        img->data, img->stride, nx, ny, step, ccx, ccy, cm);
    SF_LAUNCHED();
    {
        const bane_args a = {img->data, cm, img->stride, nx, ny, step, p->box, ncx, ncy, ccx,
                             p->kappa, rawb, raws, iters};
        bane_nodes<<<nb, dim3(BN_TX, BN_TY), 0, g->stream>>>(a);
        SF_LAUNCHED();
    }
    bane_fill<<<sf_blocks(nb, 128), 128, 0, g->stream>>>(rawb, raws, fb, fs, ncx, ncy);
    SF_LAUNCHED();
    bane_maps<<<dim3(sf_blocks(nx, 128), ny), 128, 0, g->stream>>>(
        img->data, img->stride, nx, ny, step, ncx, ncy, fb, fs, bkg->data, bkg->stride, rms->data,
        rms->stride);
    SF_LAUNCHED();
    hb = (float *)malloc((size_t)nb * sizeof(float));
    hs = (float *)malloc((size_t)nb * sizeof(float));
    hit = (int *)malloc((size_t)nb * sizeof(int));
    if (!hb || !hs || !hit) {
        st = sf_fail(SF_ERR_NOMEM, "background bane: %d nodes on the host", nb);
        goto fail;
    }
    SF_TRY(sf_gpu_to_host(g, &scan, dscan, sizeof scan));
    SF_TRY(sf_gpu_to_host(g, hb, fb, (size_t)nb * sizeof(float)));
    SF_TRY(sf_gpu_to_host(g, hs, fs, (size_t)nb * sizeof(float)));
    SF_TRY(sf_gpu_to_host(g, hit, iters, (size_t)nb * sizeof(int)));
    if (scan.nfinite == 0) {
        st = sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels");
        goto fail;
    }
    if (isnan(hb[0])) { // filled: NaN only when no node was valid
        st = sf_bane_no_node(p, img->nx, img->ny);
        goto fail;
    }
    for (int i = 0; i < nb; i++)
        niter = hit[i] > niter ? hit[i] : niter;
    sf_bane_grid_stats(hb, hs, nb, (long long)scan.nfinite, niter, out);
fail:
    free(hb);
    free(hs);
    free(hit);
    return st;
}
