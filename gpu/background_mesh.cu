// Stage `background`, method=mesh, GPU version (twin: cpu/background_mesh.c):
// SExtractor's per-mesh histogram mode and rms, bad meshes filled, median
// filter, bicubic spline to both full-resolution maps, all on g->stream.
// 1. mesh_stats, one block of 128 threads per mesh: a mesh of up to 64x64 is
//    read once into registers (each thread a 4-pixel column group of every
//    8th row: the moment order of background_mesh.h), larger meshes tile by
//    tile. The double moments follow the twin's fixed order (thread sums,
//    xor-shuffle trees, warps in order); every other float/double operation
//    is the twin's own __host__ __device__ code. The histogram (<= 4096 bins,
//    quotients correctly rounded by div_rn, words bank-swizzled by ms_swz)
//    is scanned once into prefix counts; backguess then runs on one warp in
//    two probe rounds per pass: the two-pointer median walk is a merge of two
//    nondecreasing sequences (its end is a merge-path split, found from
//    coarse prefixes, then one probe per lane) and its double sums of h*i,
//    h*i*i are exact integers (prefix differences). Per-mesh totals go to
//    fin/itc; mesh_total reduces them (no atomics).
// 2. mesh_fill, mesh_filter: the twin's sf_bkg_fill_one / sf_bkg_filter_one.
// 3. mesh_spline (twice: My and G, then Gy; the first launch also fills the
//    axis tables), mesh_interp (background_mesh_maps.cuh): the twin's
//    derivative grids and node interpolation (sf_bkg_node), both maps in one
//    pass with 16-byte streaming stores.
// 4. mesh_final: the grid's middle values by radix select, and the mean.
// Fixed operation orders: deterministic, and equal to the twin bit for bit.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "skyfind/background.h"
#include "background_mesh.h"

#include "background_mesh.cuh"
#include "background_mesh_maps.cuh"

// kernels

// One block per mesh: level and rms (NaN for a bad mesh), whether the mesh
// holds a non-finite pixel, and the mesh's share of the grid totals in
// fin[mesh] (finite pixels) and itc[mesh] (-1 for a bad mesh, else
// 2 * passes + not converged), reduced by mesh_total: no global atomics.
// The mesh is read in tiles of TW x TW (the moment order's); ONE: the mesh is
// one tile, read once into registers for all three passes; else each pass
// re-reads its tiles (mostly L2 hits).
template <int TW, bool ONE>
static __global__ void __launch_bounds__(MS_THREADS, MS_BLOCKS) mesh_stats(ms_args A)
{
    __shared__ ms_smem sm;
    const int t = threadIdx.x, mesh = blockIdx.x;
    const size_t stride = A.stride;
    int x0, y0, w, h;
    sf_bkg_mesh_rect(A.nx, A.ny, A.box, mesh % A.nbx, mesh / A.nbx, &x0, &y0, &w, &h);
    const float *base = A.img + (size_t)y0 * stride + x0;
    const int ntx = ONE ? 1 : (w + TW - 1) / TW, nt = ONE ? 1 : ntx * ((h + TW - 1) / TW);
    const bool vec = A.vec;
    ms_tile<TW> tl;
    // tile i of the mesh: its origin and size
#define MS_TILE_AT(i) base + (size_t)((i) / ntx) * TW * stride + ((i) % ntx) * TW, stride, \
        min(TW, w - ((i) % ntx) * TW), min(TW, h - ((i) / ntx) * TW), vec

    if (ONE)
        tl.load(base, stride, w, h, vec);
    { // nlevels <= (int)(0.9974 n + 1) <= w*h + 1 bins can be used: zero those
      // and the rest of their group of MS_PER (the scan reads whole groups)
        const long long np = (long long)w * h;
        const int nz = np + 1 < MS_NLEV ? ((int)np + MS_PER) & ~(MS_PER - 1) : MS_NLEV;
        for (int i = 4 * t; i < nz; i += 4 * MS_THREADS)
            *reinterpret_cast<uint4 *>(sm.cnt + i) = make_uint4(0, 0, 0, 0);
        if (t == 0)
            sm.cnt[MS_DUMP] = 0;
    }
    if (t == 0)
        sm.tot = sf_bkg_moments{0.0, 0.0, 0};

    // backstat: finite moments, pre-clip, clipped moments, quantisation
    for (int i = 0; i < nt; i++) {
        double a, b;
        int n;
        if (!ONE) {
            __syncthreads(); // sm.w* of the previous tile are read
            tl.load(MS_TILE_AT(i));
        }
        tl.moments(false, 0.0f, 0.0f, a, b, n);
        tile_reduce(sm, a, b, n);
    }
    if (t == 0) {
        const sf_bkg_moments m = sm.tot;
        A.fin[mesh] = (u64)m.n;
        A.nonfinite[mesh] = m.n < (long long)w * h;
        sm.ok = sf_bkg_preclip(m, (long long)w * h, A.min_valid, &sm.lcut, &sm.hcut);
        sm.tot = sf_bkg_moments{0.0, 0.0, 0};
    }
    __syncthreads();
    if (sm.ok) {
        const float lc = sm.lcut, hc = sm.hcut;
        for (int i = 0; i < nt; i++) {
            double a, b;
            int n;
            if (!ONE) {
                __syncthreads();
                tl.load(MS_TILE_AT(i));
            }
            tl.moments(true, lc, hc, a, b, n);
            tile_reduce(sm, a, b, n);
        }
        if (t == 0)
            sm.ok = sf_bkg_quantise(sm.tot, &sm.q);
        __syncthreads();
    }
    if (!sm.ok) { // block-uniform: a bad mesh
        if (t == 0) {
            A.lev[mesh] = A.rms[mesh] = __int_as_float(0x7fc00000);
            A.itc[mesh] = -1;
        }
        return;
    }

    // backhisto: every finite pixel of the mesh, bin (int)(v/qscale + cste)
    // (sf_bkg_bin) with the quotient correctly rounded (div_rn when qscale and
    // its reciprocal are normal floats, else a division)
    {
        const float qs = sm.q.qscale, cs = sm.q.cste, rq = 1.0f / qs;
        const unsigned nl = (unsigned)sm.q.nlevels;
        const bool fast = normalf(qs) && normalf(rq);
        for (int i = 0; i < nt; i++) {
            if (!ONE)
                tl.load(MS_TILE_AT(i));
#pragma unroll
            for (int k = 0; k < ms_tile<TW>::K; k++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float v = tl.v[k][j];
                    const float tt = __fadd_rn(fast ? div_rn(v, qs, rq) : __fdiv_rn(v, qs), cs);
                    const int bin = __float2int_rz(tt);
                    atomicAdd(sm.cnt + (tt > -1.0f && (unsigned)bin < nl ? ms_swz(bin) : MS_DUMP), 1u);
                }
        }
    }
#undef MS_TILE_AT
    __syncthreads();

    // prefix sums (ends with a barrier), then backguess on one warp
    mesh_scan(sm, (long long)w * h >= (long long)(4294967295ull / 225));
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

// filterback, median step (filter 1: a copy), one thread per mesh and map.
// The window sorts in a local array up to 9x9 meshes, else in work
// (filter^2 floats per mesh and map). Writes nothing when no mesh was valid
// (the launcher then fails).
#define FILT_LOCAL 9
static __global__ void mesh_filter(const float *__restrict__ fb, const float *__restrict__ fs,
                                   float *__restrict__ ob, float *__restrict__ os, int nbx, int nby,
                                   int filter, float *work, const mesh_info *info)
{
    const int nb = nbx * nby, i0 = blockIdx.x * blockDim.x + threadIdx.x, map = i0 >= nb,
              i = i0 - map * nb;
    if (i0 >= 2 * nb || info->nvalid == 0)
        return;
    const float *in = map ? fs : fb;
    float *out = map ? os : ob;
    if (filter > FILT_LOCAL) {
        out[i] = sf_bkg_filter_one(in, nbx, nby, i % nbx, i / nbx, filter,
                                   work + (size_t)i0 * filter * filter);
    } else if (filter > 1) {
        float wk[FILT_LOCAL * FILT_LOCAL];
        out[i] = sf_bkg_filter_one(in, nbx, nby, i % nbx, i / nbx, filter, wk);
    } else {
        out[i] = in[i];
    }
}

// launchers

// Scratch of one method=mesh run, carved in this order.
struct mesh_ws {
    mesh_info *info;
    mesh_res *res;
    float *mb, *ms, *rawb, *raws, *fb, *fs, *work;
    float *grid;    // My, G, Gy of bkg, then of rms (nb each): sf_bkg_node
    float *u;       // mesh_spline's scratch when its chains are not staged
    float4 *ytab, *xtab; // mesh_interp's axis tables (sp_args)
    int2 *yidx;
    int *xidx;
    int *itc;       // itc, fin: per-mesh shares of the totals (mesh_stats)
    u64 *fin;
    unsigned char *nonfinite;
    size_t bytes; // total
};

// Whether mesh_spline stages chains of up to n nodes in shared memory.
static bool spline_staged(int n) { return spline_smem(n) <= SP_SMEM_MAX; }

static void mesh_layout(mesh_ws *w, char *base, int nx, int ny, int box, int filter)
{
    int nbx = 0, nby = 0;
    sf_bkg_mesh_shape(nx, ny, box, &nbx, &nby);
    const size_t nb = (size_t)nbx * nby;
    const int nmax = nbx > nby ? nbx : nby;
    // unstaged: n floats per chain of the largest launch (4 jobs, blocks of SP_CH)
    const size_t nu = spline_staged(nmax) ? 1
                      : (size_t)(2 * sf_blocks(nbx, SP_CH) + 2 * sf_blocks(nby, SP_CH)) * SP_CH * nmax;
    size_t o = 0;
#define CARVE(ptr, type, count)                                                     \
    w->ptr = (type *)(base ? base + o : NULL);                                      \
    o += sf_align256((size_t)(count) * sizeof(type));
    CARVE(info, mesh_info, 1)
    CARVE(res, mesh_res, 1)
    CARVE(mb, float, nb)
    CARVE(ms, float, nb)
    CARVE(rawb, float, nb)
    CARVE(raws, float, nb)
    CARVE(fb, float, nb)
    CARVE(fs, float, nb)
    CARVE(work, float, filter > FILT_LOCAL ? 2 * nb * filter * filter : 1)
    CARVE(grid, float, 6 * nb)
    CARVE(u, float, nu)
    CARVE(ytab, float4, ny)
    CARVE(xtab, float4, nx)
    CARVE(yidx, int2, ny)
    CARVE(xidx, int, nx)
    CARVE(fin, u64, nb)
    CARVE(itc, int, nb)
    CARVE(nonfinite, unsigned char, nb)
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
    void (*stats)(ms_args) = p->box <= 32 ? mesh_stats<32, true>
                             : p->box <= 64 ? mesh_stats<64, true>
                                            : mesh_stats<64, false>;
    // MS_BLOCKS blocks of ~21 KB per SM need the largest shared-memory carveout
    SF_CUDA(cudaFuncSetAttribute(stats, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
    stats<<<nb, MS_THREADS, 0, g->stream>>>(a);
    SF_LAUNCHED();
    mesh_total<<<1, FIN_THREADS, 0, g->stream>>>(w->fin, w->itc, nb, w->info);
    SF_LAUNCHED();
    mesh_fill<<<sf_blocks(nb, 128), 128, 0, g->stream>>>(w->rawb, w->raws, w->fb, w->fs, a.nbx, nby);
    SF_LAUNCHED();
    mesh_filter<<<sf_blocks(2 * (size_t)nb, 64), 64, 0, g->stream>>>(w->fb, w->fs, ob, os, a.nbx, nby,
                                                                  p->filter, w->work, w->info);
    SF_LAUNCHED();
fail:
    return st;
}

// Kernel 3: the derivative grids of mb, ms (two mesh_spline launches: My
// and G, then Gy), then both maps; flags: the whole stage (skip the image
// where meshes are finite, write nothing when no mesh was valid).
static sf_status mesh_maps(sf_gpu *g, const float *mb, const float *ms, int box,
                           const sf_bkg_params *p, const sf_image *img, sf_image *bkg,
                           sf_image *rms, const mesh_ws *w, bool flags)
{
    sf_status st = SF_OK;
    int nbx, nby;
    sf_bkg_mesh_shape(img->nx, img->ny, box, &nbx, &nby);
    const size_t nb = (size_t)nbx * nby;
    const int cubic = p->interp == SF_BKG_INTERP_BICUBIC, ycub = cubic && nby > 1,
              xcub = ycub && nbx > 1, nmax = nbx > nby ? nbx : nby;
    const float *m[2] = {mb, ms};
    float *gr[2] = {w->grid, w->grid + 3 * nb}; // My, G, Gy of each map
    const bool staged = spline_staged(nmax);
    const size_t smem = staged ? spline_smem(nmax) : 0;
    for (int phase = 0; phase < 2; phase++) {
        sp_args a;
        memset(&a, 0, sizeof a);
        a.staged = staged;
        a.u = w->u;
        a.info = flags ? w->info : NULL;
        for (int k = 0; k < 2; k++) {
            if (phase == 0) { // My along the columns of M, G along its rows
                a.j[a.nj++] = sp_job{m[k], gr[k], 1, nbx, nbx, nby, !ycub};
                a.j[a.nj++] = sp_job{m[k], gr[k] + nb, nbx, 1, nby, nbx, !xcub};
            } else { // Gy along the columns of G
                a.j[a.nj++] = sp_job{gr[k] + nb, gr[k] + 2 * nb, 1, nbx, nbx, nby, !xcub};
            }
        }
        for (int k = 0; k < a.nj; k++)
            a.first[k + 1] = a.first[k] + (int)sf_blocks(a.j[k].nch, SP_CH);
        int nblk = a.first[a.nj];
        if (phase == 0) { // and the axis tables
            a.ytab = w->ytab, a.xtab = w->xtab, a.yidx = w->yidx, a.xidx = w->xidx;
            a.nx = img->nx, a.ny = img->ny, a.nbx = nbx, a.nby = nby, a.box = box;
            nblk += (int)sf_blocks((size_t)img->nx + img->ny, SP_THREADS);
        }
        mesh_spline<<<nblk, SP_THREADS, smem, g->stream>>>(a);
        SF_LAUNCHED();
    }
    {
        mi_args a = {img->data, {mb, gr[0], gr[0] + nb, gr[0] + 2 * nb},
                     {ms, gr[1], gr[1] + nb, gr[1] + 2 * nb}, w->ytab, w->xtab, w->yidx, w->xidx,
                     bkg->data, rms->data, img->stride,
                     bkg->stride, rms->stride, img->nx, img->ny, nbx, nby, box,
                     aligned16(bkg->data, bkg->stride) && aligned16(rms->data, rms->stride),
                     0, flags ? w->nonfinite : NULL, flags ? w->info : NULL};
        size_t ism;
        a.rb = interp_rows(box, &ism);
        const dim3 grid(sf_blocks((size_t)img->nx, IP_W), sf_blocks((size_t)img->ny, a.rb));
        void (*interp)(mi_args) = flags ? mesh_interp<true> : mesh_interp<false>;
        interp<<<grid, IP_THREADS, ism, g->stream>>>(a);
        SF_LAUNCHED();
    }
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
    mesh_final<<<4, ST_THREADS, 0, g->stream>>>(w.mb, w.ms, nb, w.info, w.res);
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
    // the twin's sf_bkg_median of the sorted grids
    r.median = nb & 1 ? res.mid[0] : (float)((double)(res.mid[0] + res.mid[1]) / 2.0);
    r.sigma = nb & 1 ? res.mid[2] : (float)((double)(res.mid[2] + res.mid[3]) / 2.0);
    r.nvalid = r.nused = (long long)res.nfinite;
    r.niter = res.niter;
    r.converged = !res.notconv;
    *out = r;
fail:
    return st;
}
