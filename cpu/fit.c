/* Stage `fit`, CPU twin (the GPU version is gpu/fit.cu): Gaussian components
 * fitted to every island by Levenberg-Marquardt (skyfind/fit.h), islands in
 * parallel with OpenMP, each island's arithmetic in the one order both
 * backends share (src/calc/fit_calc.h). Also the finish (sizes, fluxes,
 * Condon errors, deconvolution; the GPU runs the same on the device) and the
 * model renderer both backends use. Sections, in order:
 *   the checks and tables both backends use (sf_fit_check, the object ->
 *     island map, each island's objects, the inputs as ms_in, the beam);
 *   one island's fit (the canonical sum, the normal equations, the damped
 *     Cholesky solve, fit_island's Levenberg-Marquardt loop, the seeds and
 *     bounds);
 *   the stage (island_pixels: the lists in raster order; sf_fit_cpu);
 *   derived values (sf_fit_finish, components in parallel: shapes, Condon's
 *     errors, deconvolution, by fit_calc.h's sf_fit_finish_one as the GPU
 *     computes them; sf_fit_render). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/fit.h"
#include "fit_calc.h"
#include "fit_host.h"

void sf_fit_params_default(sf_fit_params *p)
{
    p->components = SF_FIT_OBJECTS;
    p->peak_nsigma = 4.0;
    p->max_components = 8;
    p->max_iter = 100;
    p->noise = SF_FIT_NOISE_AUTO;
}

/* ---- the parameter checks and the islands' pixels (host, both backends) -- */

sf_status sf_fit_check(const sf_image *img, const sf_labels *labels, const sf_fit_in *in,
                       const sf_fit_params *p)
{
    if (!img || !labels || !in || !p || !img->data || !labels->data)
        return sf_fail(SF_ERR_PARAM, "fit: missing image or labels");
    if (labels->nx != img->nx || labels->ny != img->ny)
        return sf_fail(SF_ERR_PARAM, "fit: labels %dx%d for an image %dx%d", labels->nx,
                       labels->ny, img->nx, img->ny);
    if (p->max_components < 1 || p->max_components > SF_FIT_MAXCOMP)
        return sf_fail(SF_ERR_PARAM, "fit: max_components %d is not in [1, %d]",
                       p->max_components, SF_FIT_MAXCOMP);
    if (p->max_iter < 1)
        return sf_fail(SF_ERR_PARAM, "fit: max_iter %d must be at least 1", p->max_iter);
    if (!(p->peak_nsigma >= 0) || !isfinite(p->peak_nsigma))
        return sf_fail(SF_ERR_PARAM, "fit: peak_nsigma %g must be a number >= 0",
                       p->peak_nsigma);
    if (p->components != SF_FIT_OBJECTS && p->components != SF_FIT_MAXIMA)
        return sf_fail(SF_ERR_PARAM, "fit: components must be objects or maxima");
    if (in->nobj < 0 || in->nislands < 0 || (in->nobj > 0 && !in->sources))
        return sf_fail(SF_ERR_PARAM, "fit: no source table");
    if ((in->bkg && (in->bkg->nx != img->nx || in->bkg->ny != img->ny)) ||
        (in->rms && (in->rms->nx != img->nx || in->rms->ny != img->ny)) ||
        (in->view && (in->bkg || in->rms)))
        return sf_fail(SF_ERR_PARAM, "fit: background maps of another shape than the image");
    if (in->parent)
        for (int l = 1; l <= in->nobj; l++)
            if (in->parent[l] < 1 || in->parent[l] > in->nislands)
                return sf_fail(SF_ERR_INTERNAL, "fit: object %d has island %d of %d", l,
                               in->parent[l], in->nislands);
    return SF_OK;
}

sf_status sf_fit_island_map(const sf_fit_in *in, int **isl_of)
{
    int *m = malloc(((size_t)in->nobj + 1) * sizeof *m);
    if (!m)
        return sf_fail(SF_ERR_NOMEM, "fit: island table of %d objects", in->nobj);
    m[0] = 0;
    for (int l = 1; l <= in->nobj; l++)
        m[l] = in->parent ? in->parent[l] : l;
    *isl_of = m;
    return SF_OK;
}

sf_status sf_fit_objects(const sf_fit_in *in, const int *isl_of, int **off, int **list)
{
    int *o = calloc((size_t)in->nislands + 2, sizeof *o), *l = NULL;
    if (!o)
        return sf_fail(SF_ERR_NOMEM, "fit: object lists of %d islands", in->nislands);
    for (int k = 1; k <= in->nobj; k++)
        o[isl_of[k] + 1]++;
    for (int i = 0; i <= in->nislands; i++)
        o[i + 1] += o[i];
    l = malloc(((size_t)in->nobj + 1) * sizeof *l);
    if (!l) {
        free(o);
        return sf_fail(SF_ERR_NOMEM, "fit: object lists of %d objects", in->nobj);
    }
    {
        int *cur = calloc((size_t)in->nislands + 1, sizeof *cur);
        if (!cur) {
            free(o);
            free(l);
            return sf_fail(SF_ERR_NOMEM, "fit: object lists");
        }
        for (int k = 1; k <= in->nobj; k++) /* label order within an island */
            l[o[isl_of[k]] + cur[isl_of[k]]++] = k;
        free(cur);
    }
    *off = o;
    *list = l;
    return SF_OK;
}

void sf_fit_ms_in(const sf_fit_in *in, ms_in *mi)
{
    memset(mi, 0, sizeof *mi);
    if (in->bkg) {
        mi->bkg = in->bkg->data;
        mi->bstride = in->bkg->stride;
    }
    if (in->rms) {
        mi->rms = in->rms->data;
        mi->rstride = in->rms->stride;
    }
    if (!in->bkg && !in->rms)
        mi->view = in->view;
    mi->subtract = in->subtract;
    mi->level = in->subtract ? in->level : 0.0f;
    mi->level_out = in->level;
    mi->sigma = in->sigma;
}

void sf_fit_beam_cov(const sf_fit_in *in, sf_fit_cov2 *beam)
{
    memset(beam, 0, sizeof *beam);
    if (in->beam_maj > 0 && isfinite(in->beam_maj)) {
        const double mn = in->beam_min > 0 && isfinite(in->beam_min) ? in->beam_min : in->beam_maj;
        const double a = isfinite(in->beam_angle) ? in->beam_angle * M_PI / 180.0 : 0.0;
        sf_fit_cov(in->beam_maj, mn, cos(a), sin(a), &beam->xx, &beam->yy, &beam->xy);
    }
}

/* ---- the fit of one island ---------------------------------------------- */

typedef struct {
    const sf_image *img;
    const int32_t *lab;
    size_t lstride;
    ms_in mi;
    const int *isl_of;
    const sf_fit_in *in;
    const sf_fit_params *p;
    sf_fit_cov2 beam;
} fit_ctx;

/* Canonical sum of v[0..n-1] (fit_calc.h). */
static double chunk_sum(const double *v, long long n)
{
    double t[SF_FIT_LANES];
    for (int l = 0; l < SF_FIT_LANES; l++) {
        double acc = 0.0;
        for (long long i = l; i < n; i += SF_FIT_LANES)
            acc = ms_add(acc, v[i]);
        t[l] = acc;
    }
    return sf_fit_butterfly(t);
}

typedef struct {
    double *J;   /* (np + 1) columns of n: derivatives, then the weighted residual */
    double *v;   /* n */
    double *jtj, *a; /* packed np x np */
    double *g, *dl, *trial;
} fit_work;

/* chi^2 at par (residuals only). */
static double chi2_at(const sf_fit_px *px, long long n, const double *par, int nc, double *v)
{
    for (long long i = 0; i < n; i++) {
        const double r = sf_fit_pixel(par, nc, px[i].x, px[i].y, px[i].m, px[i].w, NULL, 0);
        v[i] = ms_mul(r, r);
    }
    return chunk_sum(v, n);
}

/* chi^2, JTJ and g = J^T r at par. */
static double normal_eq(const sf_fit_px *px, long long n, const double *par, int nc,
                        fit_work *w)
{
    const int np = SF_FIT_NP * nc;
    double *r = w->J + (size_t)np * n;
    for (long long i = 0; i < n; i++)
        r[i] = sf_fit_pixel(par, nc, px[i].x, px[i].y, px[i].m, px[i].w, w->J + i, (size_t)n);
    for (int a = 0; a < np; a++) {
        const double *ja = w->J + (size_t)a * n;
        for (int b = 0; b <= a; b++) {
            const double *jb = w->J + (size_t)b * n;
            for (long long i = 0; i < n; i++)
                w->v[i] = ms_mul(ja[i], jb[i]);
            w->jtj[sf_fit_tri(a, b)] = chunk_sum(w->v, n);
        }
        for (long long i = 0; i < n; i++)
            w->v[i] = ms_mul(ja[i], r[i]);
        w->g[a] = chunk_sum(w->v, n);
    }
    for (long long i = 0; i < n; i++)
        w->v[i] = ms_mul(r[i], r[i]);
    return chunk_sum(w->v, n);
}

/* Solve (JTJ + lambda D) dl = g: 0, or -1 when the matrix is not positive
 * definite. */
static int damped_solve(fit_work *w, int np, double lambda)
{
    double dmax = 0.0, dfloor;
    for (int j = 0; j < np; j++)
        if (w->jtj[sf_fit_tri(j, j)] > dmax)
            dmax = w->jtj[sf_fit_tri(j, j)];
    dfloor = sf_fit_dfloor(dmax);
    for (int i = 0; i < np; i++)
        for (int j = 0; j <= i; j++)
            w->a[sf_fit_tri(i, j)] = i == j ? sf_fit_damped(w->jtj[sf_fit_tri(i, i)], lambda, dfloor)
                                            : w->jtj[sf_fit_tri(i, j)];
    for (int j = 0; j < np; j++) {
        double *A = w->a, d = A[sf_fit_tri(j, j)];
        if (!(d > 0) || !(d < INFINITY))
            return -1;
        d = ms_sqrt(d);
        A[sf_fit_tri(j, j)] = d;
        for (int i = j + 1; i < np; i++)
            A[sf_fit_tri(i, j)] = ms_div(A[sf_fit_tri(i, j)], d);
        for (int k = j + 1; k < np; k++)
            for (int i = k; i < np; i++)
                A[sf_fit_tri(i, k)] =
                    ms_sub(A[sf_fit_tri(i, k)], ms_mul(A[sf_fit_tri(i, j)], A[sf_fit_tri(k, j)]));
    }
    sf_fit_substitute(w->a, w->g, w->dl, np);
    return 0;
}

/* The whole fit of one island: par (nc components, initial guesses) is
 * fitted in place; the island's status, iterations and chi^2 returned. */
static void fit_island(const sf_fit_px *px, long long n, double *par, int nc,
                       const sf_fit_bounds *b, int max_iter, fit_work *w, sf_fit_lm *s)
{
    const int np = SF_FIT_NP * nc;
    memset(s, 0, sizeof *s);
    s->lambda = SF_FIT_LAMBDA0;
    if (n < np || b->amax <= 0) {
        s->status = SF_FIT_SKIPPED;
        return;
    }
    s->chi2 = normal_eq(px, n, par, nc, w);
    if (!(s->chi2 < INFINITY)) {
        s->status = SF_FIT_FAILED;
        return;
    }
    s->status = SF_FIT_MAXITER;
    for (int it = 1; it <= max_iter; it++) {
        int accepted = 0;
        s->niter = it;
        while (!accepted && !s->done) {
            double ct = NAN;
            if (damped_solve(w, np, s->lambda) == 0) {
                for (int k = 0; k < np; k++)
                    w->trial[k] = ms_add(par[k], w->dl[k]);
                for (int c = 0; c < nc; c++)
                    sf_fit_project(w->trial + SF_FIT_NP * c, b);
                ct = chi2_at(px, n, w->trial, nc, w->v);
            }
            accepted = sf_fit_judge(s, ct);
        }
        if (accepted) {
            memcpy(par, w->trial, (size_t)np * sizeof *par);
            if (!s->done)
                normal_eq(px, n, par, nc, w);
        }
        if (s->done) {
            s->status = SF_FIT_OK;
            break;
        }
    }
}

/* The island's final weighted chi^2 and sum of squared residuals, from one
 * evaluation of the model per pixel (the residual times 1.0 is itself, so
 * the weighted one is exactly sf_fit_pixel's). */
static void final_sums(const sf_fit_px *px, long long n, const double *par, int nc, fit_work *w,
                       double *chi2, double *rss)
{
    double *u2 = w->J; /* the Jacobian's room: n x (np + 1) >= 2 n */
    for (long long i = 0; i < n; i++) {
        const double u = sf_fit_pixel(par, nc, px[i].x, px[i].y, px[i].m, 1.0, NULL, 0);
        const double r = ms_mul(u, px[i].w);
        w->v[i] = ms_mul(r, r);
        u2[i] = ms_mul(u, u);
    }
    *chi2 = chunk_sum(w->v, n);
    *rss = chunk_sum(u2, n);
}

/* The seeds of island k's components, brightest first: its objects, or
 * its local maxima (the brightest pixel when none qualifies). Returns the
 * count (<= max_components); *more when the island had more. */
static int island_seeds(const fit_ctx *x, int k, const sf_fit_px *px, long long n,
                        const int *ooff, const int *olist, sf_fit_seed *seeds, int *more)
{
    const int K = x->p->max_components, nx = x->img->nx;
    int nc = 0;
    *more = 0;
    if (x->p->components == SF_FIT_OBJECTS) {
        for (int j = ooff[k]; j < ooff[k + 1]; j++)
            sf_fit_seed_insert(seeds, &nc, K, x->in->sources[olist[j] - 1].peak, olist[j], more);
        return nc;
    }
    for (long long i = 0; i < n; i++)
        if (sf_fit_is_max(x->img->data, x->img->stride, x->lab, x->lstride, &x->mi, x->isl_of, nx,
                          x->img->ny, px[i].x, px[i].y, k, px[i].m, x->p->peak_nsigma,
                          sf_fit_max_reach(x->in)))
            sf_fit_seed_insert(seeds, &nc, K, px[i].m, (long long)px[i].y * nx + px[i].x, more);
    if (nc == 0 && n > 0) { /* the brightest pixel */
        long long best = 0;
        for (long long i = 1; i < n; i++)
            if (sf_fit_before(px[i].m, i, px[best].m, best))
                best = i;
        seeds[0].m = px[best].m;
        seeds[0].key = (long long)px[best].y * nx + px[best].x;
        nc = 1;
    }
    return nc;
}

/* The island's box and largest m. */
static void island_bounds(const sf_fit_px *px, long long n, const sf_fit_in *in,
                          sf_fit_bounds *b)
{
    int x0 = n ? px[0].x : 0, x1 = x0, y0 = n ? px[0].y : 0, y1 = y0;
    float mmax = n ? px[0].m : 0.0f;
    for (long long i = 1; i < n; i++) {
        x0 = px[i].x < x0 ? px[i].x : x0;
        x1 = px[i].x > x1 ? px[i].x : x1;
        y0 = px[i].y < y0 ? px[i].y : y0;
        y1 = px[i].y > y1 ? px[i].y : y1;
        mmax = px[i].m > mmax ? px[i].m : mmax;
    }
    sf_fit_bounds_box(b, x0, x1, y0, y1, mmax, in);
}

/* ---- the stage ------------------------------------------------------------ */

/* A usable pixel of island k. */
typedef struct {
    sf_fit_px p;
    int k;
} fit_cand;

/* The usable labelled pixels in raster order: rows split among the threads
 * (each keeps its rows' pixels in order, the lists joined in row order),
 * labels read only where the threshold mask (when given) is set, eight mask
 * bytes at a time. */
static sf_status island_pixels(const fit_ctx *x, const sf_mask *mask, fit_cand **out,
                               long long *nout)
{
    const int nx = x->img->nx, ny = x->img->ny, nth = omp_get_max_threads();
    fit_cand **part = calloc((size_t)nth, sizeof *part);
    long long *np_ = calloc((size_t)nth, sizeof *np_), total = 0;
    int failed = 0;
    *out = NULL;
    *nout = 0;
    if (!part || !np_) {
        free(part);
        free(np_);
        return sf_fail(SF_ERR_NOMEM, "fit: pixel lists");
    }
#pragma omp parallel num_threads(nth)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const int y0 = (int)((long long)ny * t / T), y1 = (int)((long long)ny * (t + 1) / T);
        long long n = 0, cap = 0;
        fit_cand *a = NULL;
        for (int y = y0; y < y1 && !failed; y++) {
            const uint8_t *mrow = mask ? mask->data + (size_t)y * mask->stride : NULL;
            const int32_t *lrow = x->lab + (size_t)y * x->lstride;
            for (int xx = 0; xx < nx; xx++) {
                int32_t l;
                float m, r;
                if (mrow) {
                    uint64_t w8;
                    if (xx + 8 <= nx && (xx & 7) == 0) {
                        memcpy(&w8, mrow + xx, 8);
                        if (!w8) {
                            xx += 7;
                            continue;
                        }
                    }
                    if (!mrow[xx])
                        continue;
                }
                l = lrow[xx];
                if (l <= 0 || l > x->in->nobj ||
                    !sf_fit_usable(x->img->data[(size_t)y * x->img->stride + xx], &x->mi, xx, y,
                                   &m, &r))
                    continue;
                if (n == cap) {
                    fit_cand *b = realloc(a, (size_t)(cap = cap ? 2 * cap : 4096) * sizeof *b);
                    if (!b) {
#pragma omp atomic write
                        failed = 1;
                        break;
                    }
                    a = b;
                }
                sf_fit_px_set(&a[n].p, xx, y, m, r);
                a[n].k = x->isl_of[l];
                n++;
            }
        }
        part[t] = a;
        np_[t] = n;
    }
    for (int t = 0; t < nth; t++)
        total += np_[t];
    if (!failed)
        *out = malloc(((size_t)total + 1) * sizeof **out);
    if (*out) {
        long long o = 0;
        for (int t = 0; t < nth; t++) {
            if (np_[t])
                memcpy(*out + o, part[t], (size_t)np_[t] * sizeof **out);
            o += np_[t];
        }
        *nout = total;
    }
    for (int t = 0; t < nth; t++)
        free(part[t]);
    free(part);
    free(np_);
    return *out ? SF_OK : sf_fail(SF_ERR_NOMEM, "fit: %lld island pixels", total);
}

sf_status sf_fit_cpu(const sf_image *img, const sf_labels *labels, const sf_fit_in *in,
                     const sf_fit_params *p, sf_component **comps, int *ncomps)
{
    sf_status st;
    fit_ctx x;
    int *isl_of = NULL, *ooff = NULL, *olist = NULL, *coff = NULL, failed = 0;
    long long *poff = NULL, ncand = 0;
    sf_fit_px *px = NULL;
    fit_cand *cand = NULL;
    sf_component *out = NULL;
    const int nx = img ? img->nx : 0;
    *comps = NULL;
    *ncomps = 0;
    if ((st = sf_fit_check(img, labels, in, p)))
        return st;
    if ((st = sf_fit_island_map(in, &isl_of)))
        return st;
    memset(&x, 0, sizeof x);
    x.img = img;
    x.lab = labels->data;
    x.lstride = labels->stride;
    x.isl_of = isl_of;
    x.in = in;
    x.p = p;
    sf_fit_ms_in(in, &x.mi);
    sf_fit_beam_cov(in, &x.beam);
    if (in->nislands == 0)
        goto done;
    /* the usable pixels of each island, in raster order */
    if ((st = island_pixels(&x, in->mask, &cand, &ncand)))
        goto done;
    poff = calloc((size_t)in->nislands + 2, sizeof *poff);
    px = malloc(((size_t)ncand + 1) * sizeof *px);
    if (!poff || !px) {
        st = sf_fail(SF_ERR_NOMEM, "fit: pixel lists of %d islands", in->nislands);
        goto done;
    }
    for (long long i = 0; i < ncand; i++)
        poff[cand[i].k + 1]++;
    for (int i = 0; i <= in->nislands; i++)
        poff[i + 1] += poff[i];
    {
        long long *cur = calloc((size_t)in->nislands + 1, sizeof *cur);
        if (!cur) {
            st = sf_fail(SF_ERR_NOMEM, "fit: pixel lists");
            goto done;
        }
        for (long long i = 0; i < ncand; i++)
            px[poff[cand[i].k] + cur[cand[i].k]++] = cand[i].p;
        free(cur);
    }
    if (p->components == SF_FIT_OBJECTS && (st = sf_fit_objects(in, isl_of, &ooff, &olist)))
        goto done;
    /* the components of every island, then their offsets */
    coff = calloc((size_t)in->nislands + 2, sizeof *coff);
    {
        sf_fit_seed *seeds = malloc((size_t)in->nislands * SF_FIT_MAXCOMP * sizeof *seeds);
        int *more = calloc((size_t)in->nislands + 1, sizeof *more);
        if (!coff || !seeds || !more) {
            free(seeds);
            free(more);
            st = sf_fail(SF_ERR_NOMEM, "fit: components of %d islands", in->nislands);
            goto done;
        }
#pragma omp parallel for schedule(dynamic, 16)
        for (int k = 1; k <= in->nislands; k++) {
            const long long n = poff[k + 1] - poff[k];
            coff[k + 1] = island_seeds(&x, k, px + poff[k], n, ooff, olist,
                                       seeds + (size_t)(k - 1) * SF_FIT_MAXCOMP, &more[k]);
        }
        for (int k = 1; k <= in->nislands; k++)
            coff[k + 1] += coff[k];
        out = calloc((size_t)coff[in->nislands + 1] + 1, sizeof *out);
        if (!out) {
            free(seeds);
            free(more);
            st = sf_fail(SF_ERR_NOMEM, "fit: %d components", coff[in->nislands + 1]);
            goto done;
        }
#pragma omp parallel
        {
            fit_work w;
            const size_t npmax = (size_t)SF_FIT_NP * p->max_components;
            long long nmax = 0;
            for (int k = 1; k <= in->nislands; k++)
                if (poff[k + 1] - poff[k] > nmax)
                    nmax = poff[k + 1] - poff[k];
            w.J = malloc(((size_t)nmax + 1) * (npmax + 1) * sizeof(double));
            w.v = malloc(((size_t)nmax + 1) * sizeof(double));
            w.jtj = malloc(npmax * (npmax + 1) / 2 * sizeof(double));
            w.a = malloc(npmax * (npmax + 1) / 2 * sizeof(double));
            w.g = malloc(npmax * sizeof(double));
            w.dl = malloc(npmax * sizeof(double));
            w.trial = malloc(npmax * sizeof(double));
            if (!w.J || !w.v || !w.jtj || !w.a || !w.g || !w.dl || !w.trial) {
#pragma omp atomic write
                failed = 1;
            } else {
#pragma omp for schedule(dynamic, 4)
                for (int k = 1; k <= in->nislands; k++) {
                    const long long n = poff[k + 1] - poff[k];
                    const int nc = coff[k + 1] - coff[k];
                    double par[SF_FIT_NP * SF_FIT_MAXCOMP];
                    sf_fit_bounds b;
                    sf_fit_lm s;
                    double chi2, rss;
                    if (nc == 0)
                        continue;
                    island_bounds(px + poff[k], n, in, &b);
                    sf_fit_seed_guess(seeds + (size_t)(k - 1) * SF_FIT_MAXCOMP, nc, in->sources,
                                      nx, p->components, &x.beam, &b, par);
                    fit_island(px + poff[k], n, par, nc, &b, p->max_iter, &w, &s);
                    final_sums(px + poff[k], n, par, nc, &w, &chi2, &rss);
                    sf_fit_write(out + coff[k], k, nc, n, par, &b, &s, chi2, rss, more[k],
                                 seeds + (size_t)(k - 1) * SF_FIT_MAXCOMP, in->sources,
                                 labels->data, labels->stride, &x.mi, nx, p->components);
                }
            }
            free(w.J);
            free(w.v);
            free(w.jtj);
            free(w.a);
            free(w.g);
            free(w.dl);
            free(w.trial);
        }
        free(seeds);
        free(more);
        if (failed) {
            st = sf_fail(SF_ERR_NOMEM, "fit: work space of the largest island (%lld pixels)",
                         poff[in->nislands + 1]);
            goto done;
        }
    }
    *ncomps = coff[in->nislands + 1];
done:
    if (st == SF_OK)
        *comps = out ? out : calloc(1, sizeof *out);
    else
        free(out);
    if (st == SF_OK && !*comps)
        st = sf_fail(SF_ERR_NOMEM, "fit: components");
    if (st == SF_OK)
        sf_fit_finish(*comps, *ncomps, in, p);
    free(isl_of);
    free(ooff);
    free(olist);
    free(coff);
    free(poff);
    free(px);
    free(cand);
    return st;
}

/* ---- derived values (the CPU's; the GPU's fit_finish runs the same) ------ */

void sf_fit_finish(sf_component *c, int n, const sf_fit_in *in, const sf_fit_params *p)
{
    const int beam = in->beam_maj > 0 && isfinite(in->beam_maj);
    const int corr = beam && p->noise != SF_FIT_NOISE_WHITE;
    sf_fit_cov2 bc;
    sf_fit_beam_cov(in, &bc);
    /* each component alone (fit_calc.h's sf_fit_finish_one, gpu/fit.cu's
     * fit_finish on the device), so the same bits on any number of threads */
#pragma omp parallel for schedule(static) if (n >= 256)
    for (int i = 0; i < n; i++)
        sf_fit_finish_one(&c[i], &bc, beam, corr);
}

void sf_fit_render(const sf_component *c, int n, float scale, sf_image *img)
{
    const double reach = sqrt(2.0 * log(1e7)); /* sigmas to 1e-7 of the peak */
    for (int i = 0; i < n; i++) {
        const sf_component *o = &c[i];
        const double A = (double)scale * o->sign * o->amp;
        double m, d, c2, s2, rad;
        long x0, x1, y0, y1;
        if (o->status == SF_FIT_SKIPPED || o->status == SF_FIT_FAILED || !isfinite(A) ||
            !isfinite(o->x0) || !isfinite(o->y0))
            continue;
        sf_fit_eig(o->cP, o->cQ, o->cR, &m, &d, &c2, &s2);
        if (!(m - d > 0))
            continue;
        rad = reach / sqrt(m - d);
        x0 = (long)fmax(0.0, floor(o->x0 - rad));
        x1 = (long)fmin(img->nx - 1.0, ceil(o->x0 + rad));
        y0 = (long)fmax(0.0, floor(o->y0 - rad));
        y1 = (long)fmin(img->ny - 1.0, ceil(o->y0 + rad));
        for (long y = y0; y <= y1; y++) {
            float *row = img->data + (size_t)y * img->stride;
            const double dy = y - o->y0;
            for (long x = x0; x <= x1; x++) {
                const double dx = x - o->x0;
                const double q = o->cP * dx * dx + 2.0 * o->cR * dx * dy + o->cQ * dy * dy;
                row[x] = (float)(row[x] + A * exp(-0.5 * q));
            }
        }
    }
}
