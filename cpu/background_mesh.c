/* Stage `background`, method=mesh, CPU twin: SExtractor's background as SEP
 * implements it (per-mesh clipped histogram mode and rms, bad meshes filled,
 * median filter, bicubic spline to every pixel). The per-mesh arithmetic
 * lives in background_mesh.h, shared with gpu/background_mesh.cu. In order:
 * the meshes' statistics (bkg_mesh_stat .. bkg_mesh_run, sf_bkg_mesh_cpu);
 * the spline's derivative grids (bkg_grids) and a row of both maps
 * (interp_row); the interpolation as a set-up the CPU runner keeps
 * (sf_bkg_mesh_interp: make, interp_node, one pixel, the rows into the
 * maps or scratch rows for a row function) and sf_bkg_interp_cpu on it;
 * the stage without its maps (sf_background_mesh_interp_cpu, for
 * sf_bkg_view in cpu/background.c) and with them (sf_background_mesh_cpu). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include "skyfind/background.h"
#include "background_mesh.h"
#include "simd.h"
#include "wallclock.h"

/* Per-run results of the mesh pass that sf_background_mesh_cpu reports. */
typedef struct {
    long long nfinite; /* finite pixels of the image */
    int niter;         /* most histogram-clipping passes of any mesh */
    int converged;     /* 1 when every valid mesh converged before maxiter */
    int nbad;          /* meshes filled from their neighbours */
} bkg_mesh_info;

static int nthreads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

void sf_bkg_mesh_shape(int nx, int ny, int box, int *nbx, int *nby)
{
    /* SExtractor: nbackx = (width-1)/backw + 1, i.e. ceil(nx/box); the last
     * column/row of meshes is partial (see sf_bkg_mesh_rect) */
    *nbx = (nx >= 1 && box >= 1) ? (nx - 1) / box + 1 : 0;
    *nby = (ny >= 1 && box >= 1) ? (ny - 1) / box + 1 : 0;
}

sf_status sf_bkg_mesh_check_params(const sf_bkg_params *p)
{
    if (p->box < 1)
        return sf_fail(SF_ERR_PARAM, "background box %d must be at least 1 pixel", p->box);
    if (p->filter < 1 || p->filter % 2 == 0 || p->filter > SF_BKG_FILTER_MAX)
        return sf_fail(SF_ERR_PARAM, "background filter %d must be odd, 1 to %d meshes",
                       p->filter, SF_BKG_FILTER_MAX);
    if (!(p->min_valid >= 0.0 && p->min_valid <= 1.0))
        return sf_fail(SF_ERR_PARAM, "background min_valid %g must be within 0 to 1",
                       p->min_valid);
    if (p->estimator < SF_BKG_EST_SEXTRACTOR || p->estimator > SF_BKG_EST_MEAN)
        return sf_fail(SF_ERR_PARAM, "background estimator %d is unknown", p->estimator);
    if (p->interp != SF_BKG_INTERP_BICUBIC && p->interp != SF_BKG_INTERP_BILINEAR)
        return sf_fail(SF_ERR_PARAM, "background interp %d is unknown", p->interp);
    return SF_OK;
}

/* Per-thread scratch of the mesh pass. */
typedef struct {
    unsigned *hist;          /* SF_BKG_QUANTIF_NMAXLEVELS + 1 counts (the last: a dump bin) */
    unsigned long long *pre; /* SF_BKG_QUANTIF_NMAXLEVELS + 1: backguess prefix counts */
    float *pix;              /* the mesh's pixels, contiguous (box x box at most) */
} bkg_work;

#ifdef __SSE2__
/* One tile row of ng 4-pixel groups (ng even) into the groups' sums ar, br:
 * group g's lane adds its four pixels to ar[g] one after another, as the
 * scalar loop below, in double without fused multiply-adds, so the sums are
 * the same bits; two groups share a vector. Returns the pixels counted. */
SF_SIMD_BODY long long moments_row_sse2(const float *row, int ng, double *ar, double *br,
                                        int cut, float lcut, float hcut)
{
    const __m128 lo = _mm_set1_ps(lcut), hi = _mm_set1_ps(hcut), inf = _mm_set1_ps(INFINITY),
                 absm = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    long long n = 0;
    for (int g = 0; g < ng; g += 2) {
        __m128 A = _mm_loadu_ps(row + 4 * g), B = _mm_loadu_ps(row + 4 * g + 4), ma, mb;
        if (cut) {
            ma = _mm_and_ps(_mm_cmpge_ps(A, lo), _mm_cmple_ps(A, hi));
            mb = _mm_and_ps(_mm_cmpge_ps(B, lo), _mm_cmple_ps(B, hi));
        } else { /* finite: |v| < inf (false for NaN) */
            ma = _mm_cmplt_ps(_mm_and_ps(A, absm), inf);
            mb = _mm_cmplt_ps(_mm_and_ps(B, absm), inf);
        }
        n += (0x4332322132212110ull >> (4 * _mm_movemask_ps(ma)) & 15) +
             (0x4332322132212110ull >> (4 * _mm_movemask_ps(mb)) & 15); /* bits set */
        A = _mm_and_ps(A, ma); /* not counted: +0.0 */
        B = _mm_and_ps(B, mb);
        {
            const __m128 lo2 = _mm_unpacklo_ps(A, B), hi2 = _mm_unpackhi_ps(A, B);
            const __m128d d0 = _mm_cvtps_pd(lo2), d1 = _mm_cvtps_pd(_mm_movehl_ps(lo2, lo2)),
                          d2 = _mm_cvtps_pd(hi2), d3 = _mm_cvtps_pd(_mm_movehl_ps(hi2, hi2));
            __m128d sa = _mm_loadu_pd(ar + g), sb = _mm_loadu_pd(br + g);
            sa = _mm_add_pd(sa, d0);
            sb = _mm_add_pd(sb, _mm_mul_pd(d0, d0));
            sa = _mm_add_pd(sa, d1);
            sb = _mm_add_pd(sb, _mm_mul_pd(d1, d1));
            sa = _mm_add_pd(sa, d2);
            sb = _mm_add_pd(sb, _mm_mul_pd(d2, d2));
            sa = _mm_add_pd(sa, d3);
            sb = _mm_add_pd(sb, _mm_mul_pd(d3, d3));
            _mm_storeu_pd(ar + g, sa);
            _mm_storeu_pd(br + g, sb);
        }
    }
    return n;
}
#endif

/* The moments of a contiguous w x h mesh in the order of sf_bkg_moments
 * (tiles of tw; 128 thread sums; the tree); cut = 0: finite pixels,
 * cut = 1: lcut <= v <= hcut. */
SF_SIMD_BODY sf_bkg_moments bkg_moments(const float *pix, int w, int h, int tw, int cut,
                                        float lcut, float hcut)
{
    const int ng = tw / 4, rs = SF_BKG_VT / ng;
    sf_bkg_moments m = {0.0, 0.0, 0};
    long long n = 0;
    for (int ty = 0; ty < h; ty += tw)
        for (int tx = 0; tx < w; tx += tw) {
            double a[SF_BKG_VT] = {0}, b[SF_BKG_VT] = {0};
            const int th = h - ty < tw ? h - ty : tw, twd = w - tx < tw ? w - tx : tw;
            for (int r = 0; r < th; r++) {
                const float *row = pix + (size_t)(ty + r) * w + tx;
                double *ar = a + (r % rs) * ng, *br = b + (r % rs) * ng;
#ifdef __SSE2__
                if (twd == tw) { /* whole tile row: two groups at a time */
                    n += moments_row_sse2(row, ng, ar, br, cut, lcut, hcut);
                    continue;
                }
#endif
                for (int g = 0; 4 * g < twd; g++) {
                    const int nj = twd - 4 * g < 4 ? twd - 4 * g : 4;
                    double sa = ar[g], sb = br[g];
                    for (int j = 0; j < nj; j++) {
                        const float v = row[4 * g + j];
                        const int ok = cut ? (v >= lcut && v <= hcut) : isfinite(v);
                        const double d = ok ? (double)v : 0.0;
                        sa += d;
                        sb += d * d;
                        n += ok;
                    }
                    ar[g] = sa;
                    br[g] = sb;
                }
            }
            m.s1 += sf_bkg_tree128(a);
            m.s2 += sf_bkg_tree128(b);
        }
    m.n = n;
    return m;
}

/* One mesh, as a CUDA block would do it: finite moments (in the block's
 * order), pre-clip, clipped moments, histogram, backguess. Returns 0 for a
 * bad mesh. Every pass runs on a contiguous copy of the mesh in wk->pix.
 * Both builds (simd.h), with the moments inlined into each. */
SF_SIMD_BODY int bkg_mesh_stat_body(const sf_image *img, const sf_bkg_params *p, int bx, int by,
                                   bkg_work *wk, float *level, float *rms, int *niter, int *conv,
                                   long long *nfinite)
{
    int x0, y0, w, h, tw = sf_bkg_tile_w(p->box);
    sf_bkg_moments m1, m2;
    sf_bkg_quant q;
    float lcut, hcut, *pix = wk->pix;
    unsigned *hist = wk->hist;
    size_t npix;

    sf_bkg_mesh_rect(img->nx, img->ny, p->box, bx, by, &x0, &y0, &w, &h);
    npix = (size_t)w * h;
    for (int y = 0; y < h; y++)
        memcpy(pix + (size_t)y * w, img->data + (size_t)(y0 + y) * img->stride + x0,
               (size_t)w * sizeof *pix);
    m1 = bkg_moments(pix, w, h, tw, 0, 0.0f, 0.0f);
    *nfinite = m1.n;
    if (!sf_bkg_preclip(m1, (long long)w * h, p->min_valid, &lcut, &hcut))
        return 0;
    m2 = bkg_moments(pix, w, h, tw, 1, lcut, hcut);
    if (!sf_bkg_quantise(m2, &q))
        return 0;
    /* sf_bkg_bin: (int)(v/qscale + cste) when -1 < t < nlevels (which also
     * rejects non-finite v), else the dump bin nlevels */
    memset(hist, 0, (size_t)(q.nlevels + 1) * sizeof *hist);
    {
        const float qs = q.qscale, cs = q.cste, fnl = (float)q.nlevels;
        int bins[256];
        for (size_t i0 = 0; i0 < npix; i0 += 256) {
            int nn = npix - i0 < 256 ? (int)(npix - i0) : 256;
            const float *v = pix + i0;
            for (int i = 0; i < nn; i++) {
                float t = v[i] / qs + cs;
                int ok = t > -1.0f && t < fnl;
                bins[i] = (int)(ok ? t : fnl);
            }
            for (int i = 0; i < nn; i++)
                hist[bins[i]]++;
        }
    }
    *niter = sf_bkg_backguess(hist, &q, p->kappa, p->maxiter, p->estimator, level, rms, conv,
                              wk->pre);
    return 1;
}
SF_SIMD_KERNEL(int, bkg_mesh_stat,
               (const sf_image *img, const sf_bkg_params *p, int bx, int by, bkg_work *wk,
                float *level, float *rms, int *niter, int *conv, long long *nfinite),
               (img, p, bx, by, wk, level, rms, niter, conv, nfinite))

static sf_status bkg_mesh_run(const sf_image *img, const sf_bkg_params *p, sf_bkg_mesh *mesh,
                              bkg_mesh_info *info)
{
    sf_status s = sf_bkg_mesh_check_params(p);
    int nbx, nby, nt = nthreads(), nb;
    float *rawb = NULL, *raws = NULL, *fb = NULL, *fs = NULL;
    unsigned *hist = NULL;
    unsigned long long *pre = NULL;
    float *pixbuf = NULL;
    size_t npixmax;
    int *iters = NULL, *convs = NULL;
    long long *nfin = NULL;
    bkg_mesh_info r = {0, 0, 1, 0};
    int nvalid = 0;

    if (s)
        return s;
    if (img->loc != SF_HOST || mesh->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_bkg_mesh_cpu needs a host image and host mesh arrays");
    if (!img->data || !mesh->bkg || !mesh->rms)
        return sf_fail(SF_ERR_PARAM, "sf_bkg_mesh_cpu: image or mesh arrays not allocated");
    if (img->nx < 1 || img->ny < 1)
        return sf_fail(SF_ERR_PARAM, "sf_bkg_mesh_cpu: empty image %dx%d", img->nx, img->ny);
    sf_bkg_mesh_shape(img->nx, img->ny, p->box, &nbx, &nby);
    nb = nbx * nby;
    rawb = malloc((size_t)nb * sizeof *rawb);
    raws = malloc((size_t)nb * sizeof *raws);
    fb = malloc((size_t)nb * sizeof *fb);
    fs = malloc((size_t)nb * sizeof *fs);
    iters = calloc((size_t)nb, sizeof *iters);
    convs = calloc((size_t)nb, sizeof *convs);
    nfin = calloc((size_t)nb, sizeof *nfin);
    npixmax = (size_t)(img->nx < p->box ? img->nx : p->box) * (img->ny < p->box ? img->ny : p->box);
    hist = malloc((size_t)nt * (SF_BKG_QUANTIF_NMAXLEVELS + 1) * sizeof *hist);
    pre = malloc((size_t)nt * (SF_BKG_QUANTIF_NMAXLEVELS + 1) * sizeof *pre);
    pixbuf = malloc((size_t)nt * npixmax * sizeof *pixbuf);
    if (!rawb || !raws || !fb || !fs || !iters || !convs || !nfin || !hist || !pre || !pixbuf) {
        s = sf_fail(SF_ERR_NOMEM, "background mesh: work space for %d meshes", nb);
        goto fail;
    }

    /* 1. statistics of every mesh; bad meshes get NaN */
#pragma omp parallel for schedule(dynamic, 4)
    for (int i = 0; i < nb; i++) {
        int tid = thread_id();
        bkg_work wk = {hist + (size_t)tid * (SF_BKG_QUANTIF_NMAXLEVELS + 1),
                       pre + (size_t)tid * (SF_BKG_QUANTIF_NMAXLEVELS + 1),
                       pixbuf + (size_t)tid * npixmax};
        convs[i] = 1;
        if (!bkg_mesh_stat(img, p, i % nbx, i / nbx, &wk, &rawb[i], &raws[i], &iters[i], &convs[i],
                           &nfin[i])) {
            rawb[i] = raws[i] = NAN;
            iters[i] = 0;
            convs[i] = 1;
        }
    }
    for (int i = 0; i < nb; i++) {
        r.nfinite += nfin[i];
        if (isnan(rawb[i])) {
            r.nbad++;
            continue;
        }
        nvalid++;
        if (iters[i] > r.niter)
            r.niter = iters[i];
        r.converged &= convs[i];
    }
    if (nvalid == 0) {
        s = r.nfinite == 0 ? sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels")
                   : sf_fail(SF_ERR_EMPTY,
                    "background mesh: no %dx%d mesh has %.0f%% finite pixels (%lld finite in the "
                    "%dx%d image)",
                    p->box, p->box, 100.0 * p->min_valid, r.nfinite, img->nx, img->ny);
        goto fail;
    }

    /* 2. filterback: fill bad meshes from the nearest valid ones */
#pragma omp parallel for schedule(dynamic, 16)
    for (int i = 0; i < nb; i++) {
        fb[i] = rawb[i];
        fs[i] = raws[i];
        if (isnan(rawb[i]))
            sf_bkg_fill_one(rawb, raws, nbx, nby, i % nbx, i / nbx, &fb[i], &fs[i]);
    }

    /* 3. filterback: median filter (filter 1: none) */
    if (p->filter > 1) {
        float *work = NULL;
        size_t wn = (size_t)p->filter * p->filter;
        work = malloc((size_t)nt * 2 * wn * sizeof *work);
        if (!work) {
            s = sf_fail(SF_ERR_NOMEM, "background mesh: filter work space");
            goto fail;
        }
#pragma omp parallel for schedule(static)
        for (int i = 0; i < nb; i++) {
            float *wk = work + (size_t)thread_id() * 2 * wn;
            mesh->bkg[i] = sf_bkg_filter_one(fb, nbx, nby, i % nbx, i / nbx, p->filter, wk);
            mesh->rms[i] = sf_bkg_filter_one(fs, nbx, nby, i % nbx, i / nbx, p->filter, wk + wn);
        }
        free(work);
    } else {
        memcpy(mesh->bkg, fb, (size_t)nb * sizeof *fb);
        memcpy(mesh->rms, fs, (size_t)nb * sizeof *fs);
    }
    mesh->nbx = nbx;
    mesh->nby = nby;
    mesh->box = p->box;
    if (info)
        *info = r;
fail:
    free(rawb);
    free(raws);
    free(fb);
    free(fs);
    free(iters);
    free(convs);
    free(nfin);
    free(hist);
    free(pre);
    free(pixbuf);
    return s;
}

sf_status sf_bkg_mesh_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_mesh *mesh)
{
    return bkg_mesh_run(img, p, mesh, NULL);
}

/* A run of pixels along x that share the segment between nodes k, k+1. */
typedef struct {
    int k, start, end;
} bkg_seg;

static int check_map(const sf_image *m, const sf_image *img)
{
    return m && m->data && m->loc == SF_HOST && m->nx == img->nx && m->ny == img->ny &&
           m->stride >= (size_t)m->nx;
}

/* The derivative grids of the bicubic surface (see sf_bkg_node) for one
 * map m of nbx x nby meshes: my (along y), g (along x), gy (g along y); all
 * zero where SExtractor's surface has none. u: max(nbx, nby) floats. */
static void bkg_grids(const float *m, int nbx, int nby, int cubic, float *my, float *g, float *gy,
                      float *u)
{
    size_t nb = (size_t)nbx * nby;
    memset(my, 0, nb * sizeof *my);
    memset(g, 0, nb * sizeof *g);
    memset(gy, 0, nb * sizeof *gy);
    if (!cubic || nby < 2)
        return;
    for (int x = 0; x < nbx; x++)
        sf_bkg_spline_d2(m + x, (size_t)nbx, nby, my + x, u);
    if (nbx < 2)
        return;
    for (int y = 0; y < nby; y++)
        sf_bkg_spline_d2(m + (size_t)y * nbx, 1, nbx, g + (size_t)y * nbx, u);
    for (int x = 0; x < nbx; x++)
        sf_bkg_spline_d2(g + x, (size_t)nbx, nby, gy + x, u);
}

/* One row of both maps from the row's nodes and their x-derivatives
 * (both builds, simd.h): sf_bkg_cubic_k with each column's terms from the
 * tables (dxt, then cxt, ccx, ttx, nx apart), segment by segment of
 * columns between two nodes; NaN pixels of the image get NaN after. */
SF_SIMD_BODY void interp_row_body(float *restrict ob, float *restrict os /* NULL: levels only */,
                                 const float *nodeb,
                                 const float *nodes, const float *dnb, const float *dns,
                                 const bkg_seg *seg, int nseg, const float *restrict dxt,
                                 const float *restrict in, int nx)
{
    const float *restrict cxt = dxt + nx, *restrict ccx = dxt + 2 * (size_t)nx,
                *restrict ttx = dxt + 3 * (size_t)nx;
    for (int g = 0; g < nseg; g++) {
        int k = seg[g].k;
        float b0 = nodeb[k], b1 = nodeb[k + 1], db0 = dnb[k], db1 = dnb[k + 1];
        float s0 = nodes[k], s1 = nodes[k + 1], ds0 = dns[k], ds1 = dns[k + 1];
        if (!os) { /* the levels alone */
            for (int x = seg[g].start; x < seg[g].end; x++)
                ob[x] = sf_bkg_cubic_k(b0, b1, db0, db1, cxt[x], ccx[x], dxt[x], ttx[x]);
            continue;
        }
        for (int x = seg[g].start; x < seg[g].end; x++) {
            ob[x] = sf_bkg_cubic_k(b0, b1, db0, db1, cxt[x], ccx[x], dxt[x], ttx[x]);
            os[x] = sf_bkg_cubic_k(s0, s1, ds0, ds1, cxt[x], ccx[x], dxt[x], ttx[x]);
        }
    }
    for (int x = 0; x < nx; x++)
        ob[x] = isnan(in[x]) ? NAN : ob[x];
    if (os)
        for (int x = 0; x < nx; x++)
            os[x] = isnan(in[x]) ? NAN : os[x];
}
SF_SIMD_KERNEL_VOID(interp_row,
               (float *restrict ob, float *restrict os, const float *nodeb, const float *nodes,
                const float *dnb, const float *dns, const bkg_seg *seg, int nseg,
                const float *restrict dxt, const float *restrict in, int nx),
               (ob, os, nodeb, nodes, dnb, dns, seg, nseg, dxt, in, nx))

/* The interpolation's set-up, shared by the maps (sf_bkg_interp_cpu) and
 * the CPU runner's view of them (sf_bkg_view): the derivative grids of both
 * maps and each column's place and cubic terms; the meshes are copied. */
struct sf_bkg_mesh_interp {
    int nbx, nby, box, nx, ny, nseg, cubic;
    float *mb, *mr;   /* the meshes' levels and rms (nbx*nby each) */
    float *grid;      /* 6 nbx*nby: my, g, gy of the levels, then of the rms */
    float *dxt;       /* 4 nx: each column's fraction, then its cubic terms c, cc, tt */
    int *kx;          /* nx: each column's node k */
    bkg_seg *seg;
};

void sf_bkg_mesh_interp_free(sf_bkg_mesh_interp *ip)
{
    if (!ip)
        return;
    free(ip->mb);
    free(ip->grid);
    free(ip->dxt);
    free(ip->kx);
    free(ip->seg);
    free(ip);
}

sf_status sf_bkg_mesh_interp_make(const sf_bkg_mesh *mesh, const sf_bkg_params *p, int nx, int ny,
                                  sf_bkg_mesh_interp **out)
{
    const int nbx = mesh->nbx, nby = mesh->nby;
    const size_t nb = (size_t)nbx * nby;
    int ebx, eby;
    sf_bkg_mesh_interp *ip;
    float *u;
    *out = NULL;
    if (p->interp != SF_BKG_INTERP_BICUBIC && p->interp != SF_BKG_INTERP_BILINEAR)
        return sf_fail(SF_ERR_PARAM, "background interp %d is unknown", p->interp);
    if (mesh->loc != SF_HOST || !mesh->bkg || !mesh->rms)
        return sf_fail(SF_ERR_PARAM, "sf_bkg_interp_cpu needs host mesh arrays and a host image");
    sf_bkg_mesh_shape(nx, ny, mesh->box, &ebx, &eby);
    if (mesh->box < 1 || ebx != nbx || eby != nby)
        return sf_fail(SF_ERR_PARAM,
                       "sf_bkg_interp_cpu: a %dx%d mesh grid of box %d does not fit a %dx%d image",
                       nbx, nby, mesh->box, nx, ny);
    ip = calloc(1, sizeof *ip);
    u = malloc((size_t)(nbx > nby ? nbx : nby) * sizeof *u);
    if (ip) {
        ip->mb = malloc(2 * nb * sizeof *ip->mb);
        ip->grid = malloc(6 * nb * sizeof *ip->grid);
        ip->dxt = malloc((size_t)nx * 4 * sizeof *ip->dxt);
        ip->kx = malloc((size_t)nx * sizeof *ip->kx);
        ip->seg = malloc((size_t)(nbx + 1) * sizeof *ip->seg);
    }
    if (!ip || !u || !ip->mb || !ip->grid || !ip->dxt || !ip->kx || !ip->seg) {
        free(u);
        sf_bkg_mesh_interp_free(ip);
        return sf_fail(SF_ERR_NOMEM, "background interpolation: work space for %d meshes", (int)nb);
    }
    ip->nbx = nbx;
    ip->nby = nby;
    ip->box = mesh->box;
    ip->nx = nx;
    ip->ny = ny;
    ip->cubic = p->interp == SF_BKG_INTERP_BICUBIC;
    ip->mr = ip->mb + nb;
    memcpy(ip->mb, mesh->bkg, nb * sizeof *ip->mb);
    memcpy(ip->mr, mesh->rms, nb * sizeof *ip->mr);
    bkg_grids(ip->mb, nbx, nby, ip->cubic, ip->grid, ip->grid + nb, ip->grid + 2 * nb, u);
    bkg_grids(ip->mr, nbx, nby, ip->cubic, ip->grid + 3 * nb, ip->grid + 4 * nb, ip->grid + 5 * nb, u);
    free(u);
    {
        float *dxt = ip->dxt, *cxt = dxt + nx, *ccx = dxt + 2 * (size_t)nx, *ttx = dxt + 3 * (size_t)nx;
        /* the x position of each pixel is the same on every row */
        for (int x = 0; x < nx; x++) {
            int k;
            sf_bkg_axis_pos(x, mesh->box, nbx, 1, &k, &dxt[x]);
            sf_bkg_cubic_terms(dxt[x], &cxt[x], &ccx[x], &ttx[x]);
            ip->kx[x] = k;
            if (ip->nseg == 0 || ip->seg[ip->nseg - 1].k != k) {
                ip->seg[ip->nseg].k = k;
                ip->seg[ip->nseg].start = x;
                ip->nseg++;
            }
            ip->seg[ip->nseg - 1].end = x + 1;
        }
    }
    *out = ip;
    return SF_OK;
}

/* Node column k of image row y (its fraction dy and mesh row ky): value and
 * x-derivative of map r (0 levels, 1 rms), for the row loop and for one
 * pixel alike. One row of meshes: SExtractor uses the nodes and their
 * (zero) y-derivatives as they are, so x is linear. */
static void interp_node(const sf_bkg_mesh_interp *ip, int r, int ky, float dy, int k, float *v,
                        float *d)
{
    const size_t nb = (size_t)ip->nbx * ip->nby;
    const float *m = r ? ip->mr : ip->mb, *g = ip->grid + (r ? 3 : 0) * nb;
    if (ip->nby > 1) {
        const size_t lo = (size_t)ky * ip->nbx + k, hi = lo + ip->nbx;
        sf_bkg_node(m, g, g + nb, g + 2 * nb, lo, hi, dy, v, d);
    } else {
        *v = m[k];
        *d = 0.0f;
    }
}

float sf_bkg_mesh_interp_at(const sf_bkg_mesh_interp *ip, int r, int x, int y)
{
    int ky = 0;
    float dy = 0.0f, v0, d0, v1, d1;
    const int nx = ip->nx, k = ip->kx[x];
    if (ip->nby > 1)
        sf_bkg_axis_pos(y, ip->box, ip->nby, 0, &ky, &dy);
    if (ip->nbx < 2) {
        interp_node(ip, r, ky, dy, 0, &v0, &d0);
        return v0;
    }
    interp_node(ip, r, ky, dy, k, &v0, &d0);
    interp_node(ip, r, ky, dy, k + 1, &v1, &d1);
    return sf_bkg_cubic_k(v0, v1, d0, d1, ip->dxt[nx + x], ip->dxt[2 * (size_t)nx + x], ip->dxt[x],
                          ip->dxt[3 * (size_t)nx + x]);
}

sf_status sf_bkg_mesh_interp_rows(const sf_bkg_mesh_interp *ip, const sf_image *img, sf_image *bkg,
                                  sf_image *rms, int level_only, sf_bkg_row_fn row_fn, void *ctx)
{
    const int nbx = ip->nbx, nby = ip->nby, nx = ip->nx, ny = ip->ny, nt = nthreads();
    float *scratch;
    if (img->loc != SF_HOST || !img->data || img->nx != nx || img->ny != ny)
        return sf_fail(SF_ERR_PARAM, "sf_bkg_interp_cpu needs host mesh arrays and a host image");
    if (!bkg != !rms || (!bkg && !row_fn) ||
        (bkg && (!check_map(bkg, img) || !check_map(rms, img))))
        return sf_fail(SF_ERR_PARAM,
                       "sf_bkg_interp_cpu needs host bkg and rms maps of the image's size %dx%d",
                       nx, ny);
    /* per thread: node values and derivatives along x (bkg, rms); without
     * maps, the thread's rows of both */
    const size_t per = 4 * (size_t)(nbx + 1) + (bkg ? 0 : 2 * (size_t)nx);
    scratch = malloc((size_t)(nt > 1 ? nt : 1) * per * sizeof *scratch);
    if (!scratch)
        return sf_fail(SF_ERR_NOMEM, "background interpolation: work space for %d meshes",
                       nbx * nby);
#pragma omp parallel for schedule(static)
    for (int y = 0; y < ny; y++) {
        float *nb_ = scratch + (size_t)thread_id() * per;
        float *nodeb = nb_, *nodes = nb_ + (nbx + 1), *dnb = nb_ + 2 * (nbx + 1),
              *dns = nb_ + 3 * (nbx + 1);
        const float *in = img->data + (size_t)y * img->stride;
        float *ob = bkg ? bkg->data + (size_t)y * bkg->stride : nb_ + 4 * (size_t)(nbx + 1),
              *os = bkg ? rms->data + (size_t)y * rms->stride : level_only ? NULL : ob + nx;
        int ky = 0;
        float dy = 0.0f;
        if (nby > 1) /* subbackline: each column of nodes at this row */
            sf_bkg_axis_pos(y, ip->box, nby, 0, &ky, &dy);
        for (int x = 0; x < nbx; x++) {
            interp_node(ip, 0, ky, dy, x, &nodeb[x], &dnb[x]);
            if (os)
                interp_node(ip, 1, ky, dy, x, &nodes[x], &dns[x]);
        }
        if (nbx > 1)
            interp_row(ob, os, nodeb, nodes, dnb, dns, ip->seg, ip->nseg, ip->dxt, in, nx);
        else {
            for (int x = 0; x < nx; x++)
                ob[x] = isnan(in[x]) ? NAN : nodeb[0];
            for (int x = 0; x < nx && os; x++)
                os[x] = isnan(in[x]) ? NAN : nodes[0];
        }
        if (row_fn) /* the row's maps are in this core's cache */
            row_fn(ctx, y, ob, os);
    }
    free(scratch);
    return SF_OK;
}

sf_status sf_bkg_interp_cpu(const sf_bkg_mesh *mesh, const sf_bkg_params *p, const sf_image *img,
                            sf_image *bkg, sf_image *rms)
{
    sf_bkg_mesh_interp *ip;
    sf_status s;
    if (!bkg || !rms) /* the rows would go to scratch: sf_bkg_mesh_interp_rows checks the rest */
        return sf_fail(SF_ERR_PARAM,
                       "sf_bkg_interp_cpu needs host bkg and rms maps of the image's size %dx%d",
                       img->nx, img->ny);
    if ((s = sf_bkg_mesh_interp_make(mesh, p, img->nx, img->ny, &ip)) != SF_OK)
        return s;
    s = sf_bkg_mesh_interp_rows(ip, img, bkg, rms, 0, NULL, NULL);
    sf_bkg_mesh_interp_free(ip);
    return s;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* st: median = median of the mesh levels and sigma = median of the mesh
 * rms (after filling and filtering: SExtractor's backmean and backsig,
 * without its fallback when backsig <= 0, so a constant image reports
 * sigma 0), mean = mean of the mesh levels, nvalid = nused = finite pixels,
 * niter = the most histogram-clipping passes any mesh ran, converged = 1
 * when every valid mesh stopped on SExtractor's criterion before maxiter. */
/* The stage but for its maps: the meshes, the run summary st and the
 * interpolation's set-up (*ip), from which the maps or their pixels are
 * made. */
sf_status sf_background_mesh_interp_cpu(const sf_image *img, const sf_bkg_params *p,
                                        sf_bkg_stats *st, sf_bkg_mesh_interp **ip)
{
    sf_status s = sf_bkg_mesh_check_params(p);
    sf_bkg_mesh mesh = {0, 0, 0, NULL, NULL, SF_HOST};
    bkg_mesh_info info;
    float *sorted = NULL;
    int nbx, nby, nb;
    double sum = 0;
    sf_bkg_stats r;

    *ip = NULL;
    if (s)
        return s;
    if (img->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs host image and maps");
    sf_bkg_mesh_shape(img->nx, img->ny, p->box, &nbx, &nby);
    nb = nbx * nby;
    mesh.bkg = malloc((size_t)nb * sizeof(float));
    mesh.rms = malloc((size_t)nb * sizeof(float));
    sorted = malloc((size_t)nb * sizeof(float));
    if (!mesh.bkg || !mesh.rms || !sorted) {
        s = sf_fail(SF_ERR_NOMEM, "background mesh: %d meshes", nb);
        goto fail;
    }
    {
        double t0 = sf_wall_ms(), t1;
        if ((s = bkg_mesh_run(img, p, &mesh, &info)) != SF_OK)
            goto fail;
        t1 = sf_wall_ms();
        if ((s = sf_bkg_mesh_interp_make(&mesh, p, img->nx, img->ny, ip)) != SF_OK)
            goto fail;
        /* SKYFIND_MESH_PROFILE=1 (a developer knob): the phases' wall times
         * on stderr (the meshes' statistics, the interpolation's set-up) */
        if (getenv("SKYFIND_MESH_PROFILE"))
            fprintf(stderr, "mesh profile: %dx%d, %d meshes: statistics %.2f ms, set-up %.2f ms\n",
                    img->nx, img->ny, nb, t1 - t0, sf_wall_ms() - t1);
    }
    memset(&r, 0, sizeof r);
    for (int i = 0; i < nb; i++)
        sum += mesh.bkg[i];
    r.mean = sum / nb;
    memcpy(sorted, mesh.bkg, (size_t)nb * sizeof(float));
    qsort(sorted, (size_t)nb, sizeof(float), cmp_float);
    r.median = sf_bkg_median(sorted, nb); /* sorted already: picks the middle */
    memcpy(sorted, mesh.rms, (size_t)nb * sizeof(float));
    qsort(sorted, (size_t)nb, sizeof(float), cmp_float);
    r.sigma = sf_bkg_median(sorted, nb);
    r.nvalid = r.nused = info.nfinite;
    r.niter = info.niter;
    r.converged = info.converged;
    *st = r;
fail:
    free(mesh.bkg);
    free(mesh.rms);
    free(sorted);
    return s;
}

sf_status sf_background_mesh_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                                 sf_image *bkg, sf_image *rms)
{
    sf_bkg_mesh_interp *ip;
    sf_status s;
    double t0;
    if (!bkg || !rms)
        return sf_fail(SF_ERR_PARAM, "background method=mesh needs both bkg and rms maps");
    if (img->loc != SF_HOST || bkg->loc != SF_HOST || rms->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs host image and maps");
    if ((s = sf_background_mesh_interp_cpu(img, p, st, &ip)) != SF_OK)
        return s;
    t0 = sf_wall_ms();
    s = sf_bkg_mesh_interp_rows(ip, img, bkg, rms, 0, NULL, NULL);
    if (getenv("SKYFIND_MESH_PROFILE"))
        fprintf(stderr, "mesh profile: maps %.2f ms\n", sf_wall_ms() - t0);
    sf_bkg_mesh_interp_free(ip);
    return s;
}
