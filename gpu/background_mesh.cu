// Stage `background`, method=mesh, GPU version (twin: cpu/background_mesh.c):
// SExtractor's per-mesh histogram mode and rms, bad meshes filled, median
// filter, bicubic spline to both full-resolution maps, all on g->stream.
// 1. mesh_stats, one block per mesh: a box <= 64 mesh is read once (float4
//    rows) into a shared tile that the two moment passes and the histogram
//    read; larger meshes do not fit and re-read global memory (mostly L1/L2
//    hits) in the same order. Moments in the twin's fixed order (4 lane sums
//    per row, rows in order); every float/double operation is the twin's own
//    __host__ __device__ code (background_mesh.h). The histogram (<= 4096
//    bins) is scanned once into prefix counts; backguess then runs on one
//    warp in O(log n) per pass: the two-pointer median walk is a merge of two
//    nondecreasing sequences (its end is a merge-path split, 32-ary search)
//    and its double sums of h*i, h*i*i are exact integers (prefix differences).
//    128 threads, ~26 KB shared (16-bit counts for tiled meshes, the moment
//    prefixes over the dead tile): 8 meshes per SM hide the serial phases.
//    Per-mesh totals go to fin/itc; mesh_total reduces them (no atomics).
// 2. mesh_fill, mesh_filter: the twin's sf_bkg_fill_one / sf_bkg_filter_one.
// 3. mesh_prep (y-spline per mesh column, x position per image column),
//    mesh_rownodes (each row's nodes and x-spline), mesh_interp (both maps,
//    16-byte stores); the splines keep their chains in registers and shared
//    memory (spline_d2_fast). Fixed operation orders: deterministic.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "skyfind/background.h"
// background_mesh.h uses __dmul_rn/__fmul_rn whenever nvcc compiles, also in
// the host pass where __host__ __device__ code cannot call them: plain products there.
#ifndef __CUDA_ARCH__
#define __dmul_rn(a, b) ((a) * (b))
#define __fmul_rn(a, b) ((a) * (b))
#endif
#include "background_mesh.h"
#ifndef __CUDA_ARCH__
#undef __dmul_rn
#undef __fmul_rn
#endif

#include "background_mesh.cuh"
#include <cub/device/device_radix_sort.cuh>

// kernels

// Walk over the quads (4 pixels of a row) of a w x h mesh, thread by thread.
struct quad_iter {
    int q, r, c, dr, dc;
    __device__ quad_iter(int w) : q((w + 3) / 4)
    {
        r = threadIdx.x / q;
        c = threadIdx.x % q;
        dr = MS_THREADS / q;
        dc = MS_THREADS % q;
    }
    __device__ void next()
    {
        r += dr;
        c += dc;
        if (c >= q) {
            c -= q;
            r++;
        }
    }
};

// One block per mesh: level and rms (NaN for a bad mesh), whether the mesh
// holds a non-finite pixel, and the mesh's share of the grid totals in
// fin[mesh] (finite pixels) and itc[mesh] (-1 for a bad mesh, else
// 2 * passes + not converged), reduced by mesh_total: no global atomics.
template <bool TILE>
static __global__ void __launch_bounds__(MS_THREADS, MS_BLOCKS) mesh_stats(ms_args A)
{
    __shared__ ms_smem<TILE> sm;
    const int t = threadIdx.x, mesh = blockIdx.x;
    const size_t stride = A.stride;
    int x0, y0, w, h;
    sf_bkg_mesh_rect(A.nx, A.ny, A.box, mesh % A.nbx, mesh / A.nbx, &x0, &y0, &w, &h);
    const float *base = A.img + (size_t)y0 * stride + x0;

    if (TILE) { // the mesh's only read of global memory
        quad_iter it(w);
        for (; it.r < h; it.next()) {
            const int x = 4 * it.c;
            const float *src = base + (size_t)it.r * stride + x;
            float *dst = sm.u.tile + tix(it.r, x); // x + j < w: tix(r, x) + j = tix(r, x + j)
            if (A.vec && x + 4 <= w)
                *reinterpret_cast<float4 *>(dst) = __ldg(reinterpret_cast<const float4 *>(src));
            else
                for (int j = 0; j < 4 && x + j < w; j++)
                    dst[j] = __ldg(src + j);
        }
    }
    { // nlevels <= (int)(0.9974 n + 1) <= w*h + 1 bins can be used: zero those
      // and the rest of their group of MS_PER (the scan reads whole groups)
        const int nz = w * h + 1 < MS_NLEV ? (w * h + MS_PER) & ~(MS_PER - 1) : MS_NLEV;
        for (int i = t; i < nz; i += MS_THREADS)
            sm.cnt[i] = 0;
    }
    __syncthreads();

    // backstat: finite moments, pre-clip, clipped moments, quantisation
    sf_bkg_moments m = mesh_moments<TILE>(sm, base, stride, w, h, 0, 0.0f, 0.0f);
    if (t == 0) {
        A.fin[mesh] = (u64)m.n;
        A.nonfinite[mesh] = m.n < (long long)w * h;
        sm.ok = sf_bkg_preclip(m, (long long)w * h, A.min_valid, &sm.lcut, &sm.hcut);
    }
    __syncthreads();
    if (sm.ok) {
        const float lc = sm.lcut, hc = sm.hcut;
        m = mesh_moments<TILE>(sm, base, stride, w, h, 1, lc, hc);
        if (t == 0)
            sm.ok = sf_bkg_quantise(m, &sm.q);
        __syncthreads();
    }
    if (!sm.ok) { // block-uniform: a bad mesh
        if (t == 0) {
            A.lev[mesh] = A.rms[mesh] = __int_as_float(0x7fc00000);
            A.itc[mesh] = -1;
        }
        return;
    }

    // backhisto: every finite pixel of the mesh (16-bit counts: adds to the
    // 32-bit word of the pair; a count never exceeds the mesh's 4096 pixels)
    {
        const sf_bkg_quant q = sm.q;
        quad_iter it(w);
        for (; it.r < h; it.next()) {
            const int x = 4 * it.c;
            float v[4];
            if (TILE && x + 4 <= w) {
                float4 f = *reinterpret_cast<const float4 *>(sm.u.tile + tix(it.r, x));
                v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
            } else {
                for (int j = 0; j < 4; j++)
                    v[j] = x + j < w ? (TILE ? sm.u.tile[tix(it.r, x + j)]
                                             : __ldg(base + (size_t)it.r * stride + x + j))
                                     : NAN;
            }
            for (int j = 0; j < 4; j++) {
                int b = sf_bkg_bin(v[j], &q);
                if (b >= 0) {
                    if (TILE)
                        atomicAdd(reinterpret_cast<unsigned *>(sm.cnt + (b & ~1)),
                                  1u << ((b & 1) * 16));
                    else
                        atomicAdd(reinterpret_cast<unsigned *>(sm.cnt + b), 1u);
                }
            }
        }
    }
    __syncthreads(); // the tile is dead from here: cm1, cm2 overlay it

    mesh_scan(sm); // prefix counts and coarse moments in place; ends with a barrier

    // backguess on one warp
    if (t < 32) {
        const sf_bkg_quant q = sm.q;
        float level, r;
        int conv, it = mesh_guess(sm, &q, A.kappa, A.maxiter, A.estimator, &level, &r, &conv);
        if (t == 0) {
            A.lev[mesh] = level;
            A.rms[mesh] = r;
            // the twin counts NaN levels as bad meshes
            A.itc[mesh] = isnan(level) ? -1 : 2 * it + !conv;
        }
    }
}

// filterback, fill step: a bad mesh takes the average of its nearest valid ones.
static __global__ void mesh_fill(const float *__restrict__ rawb, const float *__restrict__ raws,
                                 float *__restrict__ fb, float *__restrict__ fs, int nbx, int nby)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nbx * nby)
        return;
    float b = rawb[i], s = raws[i];
    if (isnan(b))
        sf_bkg_fill_one(rawb, raws, nbx, nby, i % nbx, i / nbx, &b, &s);
    fb[i] = b;
    fs[i] = s;
}

// filterback, median step (filter 1: a copy). work: filter^2 floats per mesh.
// Writes nothing when no mesh was valid (the launcher then fails).
static __global__ void mesh_filter(const float *__restrict__ fb, const float *__restrict__ fs,
                                   float *__restrict__ ob, float *__restrict__ os, int nbx, int nby,
                                   int filter, float *work, const mesh_info *info)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nbx * nby || info->nvalid == 0)
        return;
    if (filter > 1) {
        float *wk = work + (size_t)i * filter * filter;
        ob[i] = sf_bkg_filter_one(fb, nbx, nby, i % nbx, i / nbx, filter, wk);
        os[i] = sf_bkg_filter_one(fs, nbx, nby, i % nbx, i / nbx, filter, wk);
    } else {
        ob[i] = fb[i];
        os[i] = fs[i];
    }
}

// The twin's median of n >= 1 sorted floats (sf_bkg_median on sorted input).
static __device__ float sorted_median(const float *v, int n)
{
    if (n < 2)
        return v[0];
    return (n & 1) ? v[n / 2] : (float)((double)(v[n / 2 - 1] + v[n / 2]) / 2.0);
}

// The stage's st from the final grid mb (nb meshes) and its sorted copies sb,
// ss: one block. The mean's double sum runs in a fixed order (strided thread
// sums, warp trees, warps in order), not the twin's sequential order: it may
// differ from the twin's in the last bits (no test compares it).
static __global__ void __launch_bounds__(ST_THREADS)
    mesh_final(const float *__restrict__ mb, const float *__restrict__ sb,
               const float *__restrict__ ss, int nb, const mesh_info *info, mesh_res *res)
{
    __shared__ double part[ST_THREADS / 32];
    const int t = threadIdx.x;
    double a = 0.0;
    for (int i = t; i < nb; i += ST_THREADS)
        a += (double)mb[i];
    for (int o = 16; o; o >>= 1)
        a += __shfl_down_sync(MS_FULL, a, o);
    if ((t & 31) == 0)
        part[t >> 5] = a;
    __syncthreads();
    if (t == 0) {
        mesh_res r;
        double sum = 0.0;
        for (int k = 0; k < ST_THREADS / 32; k++)
            sum += part[k];
        r.mean = sum / nb;
        r.median = sorted_median(sb, nb);
        r.sigma = sorted_median(ss, nb);
        r.nfinite = info->nfinite;
        r.nvalid = info->nvalid;
        r.niter = info->niter;
        r.notconv = info->notconv;
        r.pad = 0;
        *res = r;
    }
}

struct mi_args { // mesh_prep, mesh_rownodes, mesh_interp
    const float *img, *mb, *ms;
    float *ob, *os, *db, *ds, *ucol, *nodes, *urow, *dxt;
    int *kx;
    size_t istride, bstride, sstride;
    int nx, ny, nbx, nby, box, cubic, vec;
    const unsigned char *nonfinite;
    const mesh_info *info; // NULL: standalone interpolation
};

// makebackspline per mesh column and map (threads [0, 2 nbx) of the first
// ncb blocks), and each image column's segment and fraction along x (the
// blocks after those). SMEM: the spline in shared memory (spline_smem(nby)).
template <bool SMEM>
static __global__ void __launch_bounds__(RN_THREADS) mesh_prep(mi_args A)
{
    extern __shared__ float sp[];
    const int nbx = A.nbx, nby = A.nby, ncb = (2 * nbx + RN_THREADS - 1) / RN_THREADS;
    if (A.info && A.info->nvalid == 0) // grid-uniform
        return;
    if ((int)blockIdx.x >= ncb) { // block-uniform
        const int x = (blockIdx.x - ncb) * RN_THREADS + threadIdx.x;
        if (x < A.nx)
            sf_bkg_axis_pos(x, A.box, nbx, 1, &A.kx[x], &A.dxt[x]);
        return;
    }
    const int i = blockIdx.x * RN_THREADS + threadIdx.x, map = i >= nbx, x = i - map * nbx;
    const bool spline = A.cubic && nby > 1; // grid-uniform
    if (SMEM && spline) {
        if (threadIdx.x == 0)
            spline_terms(sp, nby);
        __syncthreads();
        if (i >= 2 * nbx)
            return;
        const float *m = (map ? A.ms : A.mb) + x;
        spline_d2_fast([&](int k) { return __ldg(m + (size_t)k * nbx); }, nby,
                       (map ? A.ds : A.db) + x, (size_t)nbx, sp, sp + nby + threadIdx.x,
                       RN_THREADS);
        return;
    }
    if (i >= 2 * nbx)
        return;
    float *d = map ? A.ds : A.db;
    if (spline)
        sf_bkg_spline_d2((map ? A.ms : A.mb) + x, (size_t)nbx, nby, d + x,
                         A.ucol + (size_t)i * nby);
    else
        for (int y = 0; y < nby; y++)
            d[(size_t)y * nbx + x] = 0.0f;
}

// subbackline, first half, per image row and map: the row's value at every
// mesh column (cubic along y) and the spline derivatives along x. Layout
// [column][row] (coalesced here and in mesh_interp): nodes holds 4 planes of
// nbx*ny floats: bkg, rms values, then their derivatives. SMEM: the spline
// in shared memory (spline_smem(nbx)), else the twin's own on urow.
template <bool SMEM>
static __global__ void __launch_bounds__(RN_THREADS) mesh_rownodes(mi_args A)
{
    extern __shared__ float su[];
    const int idx = blockIdx.x * blockDim.x + threadIdx.x, ny = A.ny, nbx = A.nbx;
    if (A.info && A.info->nvalid == 0) // grid-uniform
        return;
    const bool spline = A.nby > 1 && A.cubic && nbx > 1; // grid-uniform
    if (SMEM && spline) {
        if (threadIdx.x == 0)
            spline_terms(su, nbx);
        __syncthreads();
    }
    if (idx >= 2 * ny)
        return;
    const int map = idx >= ny, y = idx - map * ny;
    const size_t plane = (size_t)nbx * ny;
    float *nv = A.nodes + map * plane + y, *dn = A.nodes + (2 + map) * plane + y;
    const float *m = map ? A.ms : A.mb, *d = map ? A.ds : A.db;
    if (A.nby > 1) {
        int ky;
        float dy;
        sf_bkg_axis_pos(y, A.box, A.nby, 0, &ky, &dy);
        if (SMEM && spline) { // the nodes computed as the spline reads them
            const float *ml = m + (size_t)ky * nbx, *dl = d + (size_t)ky * nbx;
            spline_d2_fast(
                [&](int x) {
                    const float v = sf_bkg_cubic(__ldg(ml + x), __ldg(ml + nbx + x), __ldg(dl + x),
                                                 __ldg(dl + nbx + x), dy);
                    nv[(size_t)x * ny] = v;
                    return v;
                },
                nbx, dn, (size_t)ny, su, su + nbx + threadIdx.x, RN_THREADS);
            return;
        }
        for (int x = 0; x < nbx; x++) {
            const size_t lo = (size_t)ky * nbx + x, hi = lo + nbx;
            nv[(size_t)x * ny] = sf_bkg_cubic(m[lo], m[hi], d[lo], d[hi], dy);
        }
        if (spline) {
            sf_bkg_spline_d2(nv, (size_t)ny, nbx, dn, A.urow + (size_t)idx * nbx);
            return;
        }
    } else { // one row of meshes: the nodes as they are, linear along x
        for (int x = 0; x < nbx; x++)
            nv[(size_t)x * ny] = m[x];
    }
    for (int x = 0; x < nbx; x++)
        dn[(size_t)x * ny] = 0.0f;
}

// subbackline, second half: 4 consecutive pixels of a row per thread, rows
// strided by gridDim.y; both maps written with 16-byte streaming stores when
// the rows allow. NaN where the image is NaN: with FLAGS the image is read
// only in meshes that hold a non-finite pixel.
template <bool FLAGS>
static __global__ void __launch_bounds__(256) mesh_interp(mi_args A)
{
    const float *__restrict__ nodes = A.nodes;
    const int nx = A.nx, ny = A.ny, nbx = A.nbx, box = A.box, x = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    const mesh_info *info = A.info;
    if (x >= nx || (info && info->nvalid == 0))
        return;
    const int nj = nx - x < 4 ? nx - x : 4;
    const size_t plane = (size_t)nbx * ny;
    int k[4] = {0, 0, 0, 0};
    float dx[4] = {0, 0, 0, 0};
    for (int j = 0; j < nj; j++) {
        k[j] = A.kx[x + j];
        dx[j] = A.dxt[x + j];
    }
    const int mx0 = x / box, mx1 = (x + nj - 1) / box;
    for (int y = blockIdx.y; y < ny; y += gridDim.y) {
        float vb[4], vs[4];
        if (nbx > 1) {
            int kc = -1;
            float b0 = 0, b1 = 0, db0 = 0, db1 = 0, s0 = 0, s1 = 0, ds0 = 0, ds1 = 0;
            for (int j = 0; j < 4; j++) {
                if (k[j] != kc) {
                    const size_t i0 = (size_t)k[j] * ny + y, i1 = i0 + ny;
                    kc = k[j];
                    b0 = nodes[i0], b1 = nodes[i1], s0 = nodes[plane + i0], s1 = nodes[plane + i1];
                    db0 = nodes[2 * plane + i0], db1 = nodes[2 * plane + i1];
                    ds0 = nodes[3 * plane + i0], ds1 = nodes[3 * plane + i1];
                }
                vb[j] = sf_bkg_cubic(b0, b1, db0, db1, dx[j]);
                vs[j] = sf_bkg_cubic(s0, s1, ds0, ds1, dx[j]);
            }
        } else {
            const float b = nodes[y], s = nodes[plane + y];
            for (int j = 0; j < 4; j++)
                vb[j] = b, vs[j] = s;
        }
        bool look = true;
        if (FLAGS) {
            const size_t row = (size_t)(y / box) * nbx;
            look = A.nonfinite[row + mx0] | A.nonfinite[row + mx1];
        }
        if (look) {
            const float *in = A.img + (size_t)y * A.istride + x;
            for (int j = 0; j < nj; j++)
                if (isnan(in[j]))
                    vb[j] = vs[j] = __int_as_float(0x7fc00000);
        }
        float *pb = A.ob + (size_t)y * A.bstride + x, *ps = A.os + (size_t)y * A.sstride + x;
        if (A.vec && nj == 4) {
            __stcs(reinterpret_cast<float4 *>(pb), make_float4(vb[0], vb[1], vb[2], vb[3]));
            __stcs(reinterpret_cast<float4 *>(ps), make_float4(vs[0], vs[1], vs[2], vs[3]));
        } else {
            for (int j = 0; j < nj; j++) {
                pb[j] = vb[j];
                ps[j] = vs[j];
            }
        }
    }
}

// launchers

// Scratch of one method=mesh run, carved in this order (info and the final
// mesh arrays first and adjacent: the whole stage downloads them in one copy).
struct mesh_ws {
    mesh_info *info;
    mesh_res *res;
    float *mb, *ms, *rawb, *raws, *fb, *fs, *work, *db, *ds, *ucol, *dxt, *nodes, *urow;
    float *sb, *ss; // mb, ms sorted (the stage's st medians)
    void *sort_tmp;
    size_t sort_bytes;
    int *kx, *itc;  // itc, fin: per-mesh shares of the totals (mesh_stats)
    u64 *fin;
    unsigned char *nonfinite;
    size_t bytes; // total
};

static void mesh_layout(mesh_ws *w, char *base, int nx, int ny, int box, int filter)
{
    int nbx = 0, nby = 0;
    sf_bkg_mesh_shape(nx, ny, box, &nbx, &nby);
    const size_t nb = (size_t)nbx * nby;
    size_t o = 0;
#define CARVE(ptr, type, count)                                                     \
    w->ptr = (type *)(base ? base + o : NULL);                                      \
    o += sf_align256((size_t)(count) * sizeof(type));
    size_t sort_bytes = 0;
    if (nb > 0) // a host-side size query: no device work
        cub::DeviceRadixSort::SortKeys(NULL, sort_bytes, (const float *)NULL, (float *)NULL,
                                       (int)nb);
    w->sort_bytes = sort_bytes;
    CARVE(info, mesh_info, 1)
    CARVE(res, mesh_res, 1)
    CARVE(mb, float, nb)
    CARVE(ms, float, nb)
    CARVE(rawb, float, nb)
    CARVE(raws, float, nb)
    CARVE(fb, float, nb)
    CARVE(fs, float, nb)
    CARVE(work, float, filter > 1 ? nb * filter * filter : 1)
    CARVE(db, float, nb)
    CARVE(ds, float, nb)
    CARVE(ucol, float, 2 * nb)
    CARVE(dxt, float, nx)
    CARVE(kx, int, nx)
    CARVE(nodes, float, 4 * (size_t)nbx * ny)
    CARVE(urow, float, spline_smem(nbx) <= RN_SMEM_MAX ? 1 : 2 * (size_t)ny * nbx)
    CARVE(fin, u64, nb)
    CARVE(itc, int, nb)
    CARVE(nonfinite, unsigned char, nb)
    CARVE(sb, float, nb)
    CARVE(ss, float, nb)
    CARVE(sort_tmp, char, sort_bytes ? sort_bytes : 1)
#undef CARVE
    w->bytes = o;
}

extern "C" size_t sf_background_mesh_gpu_scratch(int nx, int ny, const sf_bkg_params *p)
{
    mesh_ws w;
    if (nx < 1 || ny < 1 || !p || p->box < 1 || p->filter < 1 || p->filter > SF_BKG_FILTER_MAX)
        return 0;
    mesh_layout(&w, NULL, nx, ny, p->box, p->filter);
    return w.bytes;
}

static sf_status mesh_carve(sf_gpu *g, const sf_image *img, const sf_bkg_params *p, mesh_ws *w)
{
    mesh_ws s;
    void *base = NULL;
    mesh_layout(&s, NULL, img->nx, img->ny, p->box, p->filter);
    sf_status st = sf_gpu_scratch(g, s.bytes, &base);
    if (st == SF_OK)
        mesh_layout(w, (char *)base, img->nx, img->ny, p->box, p->filter);
    return st;
}

static bool aligned16(const void *ptr, size_t stride)
{
    return ((uintptr_t)ptr & 15) == 0 && stride % 4 == 0;
}

// Kernels 1 and 2: the filled, filtered grid into ob, os (nbx*nby each).
static sf_status mesh_grid(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                           const mesh_ws *w, float *ob, float *os)
{
    sf_status st = SF_OK;
    ms_args a = {img->data, img->stride, img->nx, img->ny, p->box, 0,
                 aligned16(img->data, img->stride) && p->box % 4 == 0, p->maxiter, p->estimator,
                 p->min_valid, p->kappa, w->rawb, w->raws, w->nonfinite, w->fin, w->itc};
    int nby;
    sf_bkg_mesh_shape(img->nx, img->ny, p->box, &a.nbx, &nby);
    const int nb = a.nbx * nby;
    void (*stats)(ms_args) = p->box <= MS_TILE ? mesh_stats<true> : mesh_stats<false>;
    // MS_BLOCKS blocks of ~26 KB per SM need the largest shared-memory carveout
    SF_CUDA(cudaFuncSetAttribute(stats, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
    stats<<<nb, MS_THREADS, 0, g->stream>>>(a);
    SF_LAUNCHED();
    mesh_total<<<1, FIN_THREADS, 0, g->stream>>>(w->fin, w->itc, nb, w->info);
    SF_LAUNCHED();
    mesh_fill<<<sf_blocks(nb, 128), 128, 0, g->stream>>>(w->rawb, w->raws, w->fb, w->fs, a.nbx, nby);
    SF_LAUNCHED();
    mesh_filter<<<sf_blocks(nb, 128), 128, 0, g->stream>>>(w->fb, w->fs, ob, os, a.nbx, nby,
                                                           p->filter, w->work, w->info);
    SF_LAUNCHED();
fail:
    return st;
}

// Kernel 3: both maps from the grid mb, ms; flags: the whole stage (skip the
// image where meshes are finite, write nothing when no mesh was valid).
static sf_status mesh_maps(sf_gpu *g, const float *mb, const float *ms, int box,
                           const sf_bkg_params *p, const sf_image *img, sf_image *bkg,
                           sf_image *rms, const mesh_ws *w, bool flags)
{
    sf_status st = SF_OK;
    mi_args a = {img->data, mb, ms, bkg->data, rms->data, w->db, w->ds, w->ucol, w->nodes,
                 w->urow, w->dxt, w->kx, img->stride, bkg->stride, rms->stride, img->nx, img->ny,
                 0, 0, box, p->interp == SF_BKG_INTERP_BICUBIC,
                 aligned16(bkg->data, bkg->stride) && aligned16(rms->data, rms->stride),
                 flags ? w->nonfinite : NULL, flags ? w->info : NULL};
    sf_bkg_mesh_shape(img->nx, img->ny, box, &a.nbx, &a.nby);
    const size_t sm = spline_smem(a.nbx), smp = spline_smem(a.nby);
    const dim3 grid(sf_blocks((size_t)(a.nx + 3) / 4, 256), (unsigned)(a.ny < 2048 ? a.ny : 2048));
    void (*rows)(mi_args) = sm <= RN_SMEM_MAX ? mesh_rownodes<true> : mesh_rownodes<false>;
    void (*prep)(mi_args) = smp <= RN_SMEM_MAX ? mesh_prep<true> : mesh_prep<false>;
    void (*interp)(mi_args) = flags ? mesh_interp<true> : mesh_interp<false>;
    prep<<<sf_blocks(2 * (size_t)a.nbx, RN_THREADS) + sf_blocks((size_t)a.nx, RN_THREADS),
           RN_THREADS, smp <= RN_SMEM_MAX ? smp : 0, g->stream>>>(a);
    SF_LAUNCHED();
    rows<<<sf_blocks(2 * (size_t)a.ny, RN_THREADS), RN_THREADS, sm <= RN_SMEM_MAX ? sm : 0,
           g->stream>>>(a);
    SF_LAUNCHED();
    interp<<<grid, 256, 0, g->stream>>>(a);
    SF_LAUNCHED();
fail:
    return st;
}

// The checks the twin makes, for device buffers (bkg, rms: NULL to skip).
static sf_status check_bufs(const char *fn, const sf_image *img, const sf_image *bkg,
                            const sf_image *rms)
{
    const sf_image *m[2] = {bkg, rms};
    if (!img || !img->data || img->loc != SF_DEVICE || img->nx < 1 || img->ny < 1 ||
        img->stride < (size_t)img->nx)
        return sf_fail(SF_ERR_PARAM, "%s needs a non-empty device image", fn);
    for (int i = 0; i < 2 && bkg; i++)
        if (!m[i] || !m[i]->data || m[i]->loc != SF_DEVICE || m[i]->nx != img->nx ||
            m[i]->ny != img->ny || m[i]->stride < (size_t)img->nx)
            return sf_fail(SF_ERR_PARAM, "%s needs device bkg and rms maps of the image's size %dx%d",
                           fn, img->nx, img->ny);
    return SF_OK;
}

static sf_status empty_grid(const sf_bkg_params *p, const mesh_info *info, const sf_image *img)
{
    return (long long)info->nfinite == 0 ? sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels")
                   : sf_fail(SF_ERR_EMPTY,
                   "background mesh: no %dx%d mesh has %.0f%% finite pixels (%lld finite in the "
                   "%dx%d image)",
                   p->box, p->box, 100.0 * p->min_valid, (long long)info->nfinite, img->nx,
                   img->ny);
}

extern "C" sf_status sf_bkg_mesh_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                     sf_bkg_mesh *mesh)
{
    sf_status st = sf_bkg_mesh_check_params(p);
    mesh_ws w;
    mesh_info info;
    int nbx, nby;
    if (st)
        return st;
    SF_TRY(check_bufs("sf_bkg_mesh_gpu", img, NULL, NULL));
    if (mesh->loc != SF_DEVICE || !mesh->bkg || !mesh->rms)
        return sf_fail(SF_ERR_PARAM, "sf_bkg_mesh_gpu needs device mesh arrays");
    sf_bkg_mesh_shape(img->nx, img->ny, p->box, &nbx, &nby);
    SF_TRY(mesh_carve(g, img, p, &w));
    SF_TRY(mesh_grid(g, img, p, &w, mesh->bkg, mesh->rms));
    SF_TRY(sf_gpu_to_host(g, &info, w.info, sizeof info));
    if (info.nvalid == 0) {
        st = empty_grid(p, &info, img);
        goto fail;
    }
    mesh->nbx = nbx;
    mesh->nby = nby;
    mesh->box = p->box;
fail:
    return st;
}

extern "C" sf_status sf_bkg_interp_gpu(sf_gpu *g, const sf_bkg_mesh *mesh, const sf_bkg_params *p,
                                       const sf_image *img, sf_image *bkg, sf_image *rms)
{
    sf_status st = SF_OK;
    sf_bkg_params q;
    mesh_ws w;
    int ebx, eby;
    if (p->interp != SF_BKG_INTERP_BICUBIC && p->interp != SF_BKG_INTERP_BILINEAR)
        return sf_fail(SF_ERR_PARAM, "background interp %d is unknown", p->interp);
    SF_TRY(check_bufs("sf_bkg_interp_gpu", img, bkg, rms));
    if (mesh->loc != SF_DEVICE || !mesh->bkg || !mesh->rms)
        return sf_fail(SF_ERR_PARAM, "sf_bkg_interp_gpu needs device mesh arrays");
    sf_bkg_mesh_shape(img->nx, img->ny, mesh->box, &ebx, &eby);
    if (mesh->box < 1 || ebx != mesh->nbx || eby != mesh->nby)
        return sf_fail(SF_ERR_PARAM,
                       "sf_bkg_interp_gpu: a %dx%d mesh grid of box %d does not fit a %dx%d image",
                       mesh->nbx, mesh->nby, mesh->box, img->nx, img->ny);
    q = *p;
    q.box = mesh->box;
    q.filter = 1;
    SF_TRY(mesh_carve(g, img, &q, &w));
    SF_TRY(mesh_maps(g, mesh->bkg, mesh->rms, mesh->box, p, img, bkg, rms, &w, false));
fail:
    return st;
}

// The whole method=mesh stage; st as sf_background_mesh_cpu fills it (the
// medians of the sorted grid and the totals on the device: one small download).
extern "C" sf_status sf_background_mesh_gpu(sf_gpu *g, const sf_image *img,
                                            const sf_bkg_params *p, sf_bkg_stats *out,
                                            sf_image *bkg, sf_image *rms)
{
    sf_status st = sf_bkg_mesh_check_params(p);
    mesh_ws w;
    mesh_res res;
    int nbx, nby, nb;
    sf_bkg_stats r;
    if (st)
        return st;
    if (!bkg || !rms)
        return sf_fail(SF_ERR_PARAM, "background method=mesh needs both bkg and rms maps");
    SF_TRY(check_bufs("sf_background_gpu", img, bkg, rms));
    sf_bkg_mesh_shape(img->nx, img->ny, p->box, &nbx, &nby);
    nb = nbx * nby;
    SF_TRY(mesh_carve(g, img, p, &w));
    SF_TRY(mesh_grid(g, img, p, &w, w.mb, w.ms));
    SF_TRY(mesh_maps(g, w.mb, w.ms, p->box, p, img, bkg, rms, &w, true));
    SF_CUDA(cub::DeviceRadixSort::SortKeys(w.sort_tmp, w.sort_bytes, (const float *)w.mb, w.sb,
                                           nb, 0, 32, g->stream));
    SF_CUDA(cub::DeviceRadixSort::SortKeys(w.sort_tmp, w.sort_bytes, (const float *)w.ms, w.ss,
                                           nb, 0, 32, g->stream));
    mesh_final<<<1, ST_THREADS, 0, g->stream>>>(w.mb, w.sb, w.ss, nb, w.info, w.res);
    SF_LAUNCHED();
    SF_TRY(sf_gpu_to_host(g, &res, w.res, sizeof res));
    if (res.nvalid == 0) {
        mesh_info info;
        memset(&info, 0, sizeof info);
        info.nfinite = res.nfinite;
        st = empty_grid(p, &info, img);
        goto fail;
    }
    memset(&r, 0, sizeof r);
    r.mean = res.mean;
    r.median = res.median;
    r.sigma = res.sigma;
    r.nvalid = r.nused = (long long)res.nfinite;
    r.niter = res.niter;
    r.converged = !res.notconv;
    *out = r;
fail:
    return st;
}
