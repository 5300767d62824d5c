/* Inputs and the long-double reference shared by the measure suites
 * (test_measure.c, test_measure_props.c): random label maps of several
 * kinds, background maps and masks, and the reference measurements of the
 * image itself with their tolerances. Static helpers, included once per
 * suite. */
#ifndef SKYFIND_TEST_MEASURE_CASES_H
#define SKYFIND_TEST_MEASURE_CASES_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sftest.h"
#include "skyfind/measure.h"
#include "fixsum.h"

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

/* ---- inputs ------------------------------------------------------------- */

enum { K_THRESH, K_BLOCKY, K_TIES, K_WHOLE, K_NKINDS };
static const char *kind_name[] = {"thresh", "blocky", "ties", "whole"};

/* Canonical 4-connected labels of finite pixels above thr (raster order of
 * each island's first pixel). */
static int flood_labels(const sf_image *im, float thr, sf_labels *lab)
{
    int nx = im->nx, ny = im->ny, n = 0;
    size_t np = sf_npix(nx, ny), *stack = malloc(np * sizeof *stack);
    ck_assert_ptr_nonnull(stack);
    ck_assert_int_eq(sf_labels_alloc(lab, nx, ny, SF_HOST, NULL), SF_OK);
    memset(lab->data, 0, np * sizeof *lab->data);
    for (size_t i = 0; i < np; i++) {
        size_t top = 0;
        if (lab->data[i] || !(im->data[i] > thr))
            continue;
        lab->data[i] = ++n;
        stack[top++] = i;
        while (top) {
            size_t j = stack[--top];
            int x = (int)(j % nx), y = (int)(j / nx);
            size_t nb[4];
            int k = 0;
            if (x > 0) nb[k++] = j - 1;
            if (x < nx - 1) nb[k++] = j + 1;
            if (y > 0) nb[k++] = j - nx;
            if (y < ny - 1) nb[k++] = j + nx;
            while (k--)
                if (!lab->data[nb[k]] && im->data[nb[k]] > thr) {
                    lab->data[nb[k]] = n;
                    stack[top++] = nb[k];
                }
        }
    }
    free(stack);
    return n;
}

/* Blank some labelled pixels (NaN, +-inf): measure must skip them. */
static void blank_inside(sf_image *im, const sf_labels *lab, uint64_t seed)
{
    sftest_rng r = {seed};
    for (size_t i = 0; i < sf_npix(im->nx, im->ny); i++) {
        double u;
        if (!lab->data[i])
            continue;
        u = sftest_uniform(&r);
        if (u < 0.05)
            im->data[i] = NAN;
        else if (u < 0.06)
            im->data[i] = INFINITY;
        else if (u < 0.07)
            im->data[i] = -INFINITY;
    }
}

/* One input of the given kind. Returns nlabels. */
static int make_case(int kind, int nx, int ny, uint64_t seed, sf_image *im, sf_labels *lab)
{
    size_t np = sf_npix(nx, ny);
    int n = 0;
    sftest_noise_image(im, nx, ny, seed, 1 + (int)(np / 2000), 0.02);
    switch (kind) {
    case K_THRESH: /* islands of noise peaks and sources, NaN/inf inside */
        n = flood_labels(im, 1.0f, lab);
        blank_inside(im, lab, seed + 1);
        break;
    case K_BLOCKY: { /* blocks over noise: negative and near-zero fluxes */
        int bw = 1 + nx / 7, bh = 1 + ny / 5, nbx = (nx + bw - 1) / bw;
        sftest_rng r = {seed + 2};
        ck_assert_int_eq(sf_labels_alloc(lab, nx, ny, SF_HOST, NULL), SF_OK);
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                int b = (y / bh) * nbx + x / bw;
                lab->data[(size_t)y * nx + x] = (b % 3 == 2) ? 0 : b + 1; /* some empty labels */
            }
        n = ((ny + bh - 1) / bh) * nbx;
        for (size_t i = 0; i < np; i++) /* fill the NaN block: blocks are all-NaN or mixed */
            if (isnan(im->data[i]) && sftest_uniform(&r) < 0.5)
                im->data[i] = (float)sftest_normal(&r);
        /* a label of exactly zero flux: +1.5 and -1.5 */
        if (np >= 2) {
            n++;
            lab->data[0] = n;
            lab->data[np - 1] = n;
            im->data[0] = 1.5f;
            im->data[np - 1] = -1.5f;
        }
        break;
    }
    case K_TIES: /* integer values: many equal peaks; -0 and +0 */
        for (size_t i = 0; i < np; i++)
            if (isfinite(im->data[i]))
                im->data[i] = rintf(im->data[i]);
        n = flood_labels(im, 0.5f, lab);
        if (np >= 4) { /* label of zeros with -0 before +0: peak is +0 at index 3 */
            n++;
            for (size_t i = 0; i < 4; i++)
                lab->data[i] = n;
            im->data[0] = -0.0f;
            im->data[1] = -1.0f;
            im->data[2] = -0.0f;
            im->data[3] = 0.0f;
        }
        break;
    case K_WHOLE: /* a single island covering the whole image */
        ck_assert_int_eq(sf_labels_alloc(lab, nx, ny, SF_HOST, NULL), SF_OK);
        for (size_t i = 0; i < np; i++)
            lab->data[i] = 1;
        n = 1;
        break;
    }
    return n;
}

/* ---- reference ----------------------------------------------------------- */

typedef struct {
    long long npix;
    long double s, sx, sy;     /* sums of m, m*x, m*y */
    long double as, asx, asy;  /* sums of |.|, for the tolerances */
    long double cxx, cyy, cxy; /* second pass: sums of m (x-xc)^2, m (y-yc)^2, m (x-xc)(y-yc) */
    long double axx, ayy;      /* sums of |m| (x - peak_x)^2, |m| (y - peak_y)^2 */
    float peak;
    int px, py;
    int xmin, xmax, ymin, ymax;
    int flags;                 /* SF_SRC_NAN only */
} ref_src;

static int peak_better(float v, float best)
{
    return v > best || (v == 0 && best == 0 && signbit(best) && !signbit(v));
}

static int blank_near(const sf_image *im, int x, int y)
{
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            int xx = x + dx, yy = y + dy;
            if (xx >= 0 && yy >= 0 && xx < im->nx && yy < im->ny &&
                !isfinite(im->data[(size_t)yy * im->stride + xx]))
                return 1;
        }
    return 0;
}

/* The measurements of the image itself (no background, no mask), in long
 * double, in two passes (the centroid, then moments about it). */
static ref_src *reference(const sf_image *im, const sf_labels *lab, int n, double *M)
{
    ref_src *r = calloc(n ? n : 1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    *M = 0;
    for (int y = 0; y < im->ny; y++)
        for (int x = 0; x < im->nx; x++) {
            int l = lab->data[(size_t)y * lab->stride + x];
            float v = im->data[(size_t)y * im->stride + x];
            ref_src *s;
            if (!l)
                continue;
            s = &r[l - 1];
            if (!isfinite(v)) {
                s->flags |= SF_SRC_NAN;
                continue;
            }
            if (blank_near(im, x, y))
                s->flags |= SF_SRC_NAN;
            if (fabs(v) > *M)
                *M = fabs(v);
            if (s->npix == 0 || peak_better(v, s->peak)) {
                s->peak = v;
                s->px = x;
                s->py = y;
            }
            if (s->npix == 0) {
                s->xmin = s->xmax = x;
                s->ymin = s->ymax = y;
            }
            s->xmin = x < s->xmin ? x : s->xmin;
            s->xmax = x > s->xmax ? x : s->xmax;
            s->ymin = y < s->ymin ? y : s->ymin;
            s->ymax = y > s->ymax ? y : s->ymax;
            s->npix++;
            s->s += v;
            s->sx += (long double)v * x;
            s->sy += (long double)v * y;
            s->as += fabsl(v);
            s->asx += fabsl((long double)v * x);
            s->asy += fabsl((long double)v * y);
        }
    for (int y = 0; y < im->ny; y++)
        for (int x = 0; x < im->nx; x++) {
            int l = lab->data[(size_t)y * lab->stride + x];
            float v = im->data[(size_t)y * im->stride + x];
            ref_src *s;
            long double dx, dy;
            if (!l || !isfinite(v))
                continue;
            s = &r[l - 1];
            if (s->s != 0) {
                dx = x - s->sx / s->s;
                dy = y - s->sy / s->s;
                s->cxx += v * dx * dx;
                s->cyy += v * dy * dy;
                s->cxy += v * dx * dy;
            }
            s->axx += fabsl(v) * (long double)(x - s->px) * (x - s->px);
            s->ayy += fabsl(v) * (long double)(y - s->py) * (y - s->py);
        }
    return r;
}

static int near(double got, long double ref, double tol)
{
    return fabsl((long double)got - ref) <= tol;
}

/* a, b, theta recomputed from the moments with libm, as SExtractor does. */
static void shape_libm(double x2, double y2, double xy, double *a, double *b, double *th)
{
    double d, q, p;
    if (x2 * y2 - xy * xy < 0.00694) {
        x2 += 0.0833333;
        y2 += 0.0833333;
    }
    d = x2 - y2;
    *th = (fabs(d) > 0 || xy != 0 ? atan2(2 * xy, d) / 2 : M_PI / 4) * 180 / M_PI;
    q = sqrt(d * d / 4 + xy * xy);
    p = (x2 + y2) / 2;
    *a = sqrt(p + q);
    *b = sqrt(p - q);
}

/* CPU results (no aux) against the reference; returns the number of bad
 * sources. */
static int check_ref(const char *what, const sf_source *o, const ref_src *r, int n, double M,
                     int nx, int ny)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const sf_source *g = &o[i];
        const ref_src *q = &r[i];
        /* quantum of the fixed-point sums: 2^-e <= M*2^-65, per term */
        double qa = (double)q->npix * M * 0x1p-65;
        double ts = 1e-12 * fabsl(q->s) + 1e-15 * q->as + qa;
        int flags = q->flags;
        int ok = g->id == i + 1 && g->npix == q->npix && g->npeaks == -1 && isnan(g->bkg) &&
                 isnan(g->rms) && isnan(g->snr) && isnan(g->flux_err) && isnan(g->x_err) &&
                 isnan(g->y_err);
        if (q->npix) {
            if (q->xmin == 0 || q->ymin == 0 || q->xmax == nx - 1 || q->ymax == ny - 1)
                flags |= SF_SRC_EDGE;
            if (q->px == 0 || q->py == 0 || q->px == nx - 1 || q->py == ny - 1)
                flags |= SF_SRC_TRUNCATED;
        }
        ok = ok && g->flags == flags;
        if (ok && q->npix == 0) {
            ok = g->flux_sum == 0 && isnan(g->x) && isnan(g->y) && isnan(g->peak) &&
                 g->peak_x == -1 && g->peak_y == -1 && g->xmin == -1 && g->ymax == -1 &&
                 isnan(g->x2) && isnan(g->a) && isnan(g->theta);
        } else if (ok) {
            ok = near(g->flux_sum, q->s, ts) && memcmp(&g->peak, &q->peak, sizeof(float)) == 0 &&
                 g->peak_x == q->px && g->peak_y == q->py && g->xmin == q->xmin &&
                 g->xmax == q->xmax && g->ymin == q->ymin && g->ymax == q->ymax;
            if (ok && g->flux_sum == 0) {
                ok = isnan(g->x) && isnan(g->y) && isnan(g->x2) && isnan(g->a);
            } else if (ok) {
                long double rx = q->sx / q->s, ry = q->sy / q->s;
                long double mx = rx - q->px, my = ry - q->py, S = fabsl(q->s);
                double tx = 1e-12 * fabsl(rx) +
                            (1e-15 * q->asx + qa * q->npix + fabsl(rx) * ts) / S;
                double ty = 1e-12 * fabsl(ry) +
                            (1e-15 * q->asy + qa * q->npix + fabsl(ry) * ts) / S;
                /* moments: relative to the sums about the peak the code forms */
                double t2x = 1e-11 * fabsl(q->cxx / S) +
                             1e-13 * (q->axx / S + mx * mx) + 4 * (1 + fabsl(mx)) * (1 + fabsl(mx)) * qa / S;
                double t2y = 1e-11 * fabsl(q->cyy / S) +
                             1e-13 * (q->ayy / S + my * my) + 4 * (1 + fabsl(my)) * (1 + fabsl(my)) * qa / S;
                double t2xy = sqrt(t2x * t2y) + 1e-11 * fabsl(q->cxy / S);
                ok = near(g->x, rx, tx) && near(g->y, ry, ty) &&
                     near(g->x2, q->cxx / q->s, t2x) && near(g->y2, q->cyy / q->s, t2y) &&
                     near(g->xy, q->cxy / q->s, t2xy);
                if (ok) { /* the deterministic atan2 against libm */
                    double a, b, th;
                    shape_libm(g->x2, g->y2, g->xy, &a, &b, &th);
                    if (isnan(a) || isnan(b))
                        ok = isnan(g->a) && isnan(g->b) && isnan(g->theta);
                    else
                        ok = fabs(g->a - a) <= 1e-13 * a && fabs(g->b - b) <= 1e-12 * a &&
                             fabs(remainder(g->theta - th, 180.0)) <= 1e-11 &&
                             g->theta > -90 && g->theta <= 90;
                }
            }
        }
        if (!ok && bad++ < 3)
            fprintf(stderr,
                    "%s: source %d: got id %d npix %lld flux %.17g x %.17g y %.17g peak %.9g "
                    "at (%d,%d) box %d..%d,%d..%d flags %d x2 %.17g y2 %.17g xy %.17g a %.17g "
                    "theta %.17g; want npix %lld flux %.17Lg x %.17Lg y %.17Lg peak %.9g at "
                    "(%d,%d) box %d..%d,%d..%d flags %d x2 %.17Lg y2 %.17Lg xy %.17Lg\n",
                    what, i + 1, g->id, g->npix, g->flux_sum, g->x, g->y, g->peak, g->peak_x,
                    g->peak_y, g->xmin, g->xmax, g->ymin, g->ymax, g->flags, g->x2, g->y2, g->xy,
                    g->a, g->theta, q->npix, q->s, q->sx / q->s, q->sy / q->s, q->peak, q->px,
                    q->py, q->xmin, q->xmax, q->ymin, q->ymax, flags, q->cxx / q->s,
                    q->cyy / q->s, q->cxy / q->s);
    }
    return bad;
}

static sf_source *run_cpu_aux(const sf_image *im, const sf_labels *lab, int n,
                              const sf_measure_aux *aux, const sf_measure_params *p)
{
    sf_source *o = malloc((n ? n : 1) * sizeof *o);
    ck_assert_ptr_nonnull(o);
    ck_assert_msg(sf_measure_cpu(im, lab, n, aux, p, o) == SF_OK, "%s", sf_errdetail());
    return o;
}

static sf_source *run_cpu(const sf_image *im, const sf_labels *lab, int n)
{
    return run_cpu_aux(im, lab, n, NULL, NULL);
}

static void cpu_vs_ref(const char *what, const sf_image *im, const sf_labels *lab, int n)
{
    double M;
    ref_src *r = reference(im, lab, n, &M);
    sf_source *o = run_cpu(im, lab, n);
    int bad = check_ref(what, o, r, n, M, im->nx, im->ny);
    ck_assert_msg(bad == 0, "%s: %d of %d sources differ from the reference", what, bad, n);
    free(r);
    free(o);
}

/* Background maps, global statistics and a mask for an input: a smooth
 * level with noise, a positive rms with a few NaN (and a few NaN levels)
 * under labelled pixels, and a mask of seeds (1, 3) and flood-only pixels
 * (2) over the labels. */
typedef struct {
    sf_image bkg, rms;
    sf_mask mask;
    sf_bkg_stats st;
} aux_host;

static void make_aux(const sf_image *im, const sf_labels *lab, uint64_t seed, aux_host *a)
{
    sftest_rng r = {seed};
    int nx = im->nx, ny = im->ny;
    memset(a, 0, sizeof *a);
    ck_assert_int_eq(sf_image_alloc(&a->bkg, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&a->rms, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_mask_alloc(&a->mask, nx, ny, SF_HOST, NULL), SF_OK);
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++) {
            size_t i = (size_t)y * nx + x;
            double u = sftest_uniform(&r);
            a->bkg.data[i] = (float)(0.3 * sin(0.05 * x) * cos(0.03 * y) + 0.01 * sftest_normal(&r));
            a->rms.data[i] = (float)(0.8 + 0.4 * sftest_uniform(&r));
            a->mask.data[i] = 0;
            if (lab->data[i]) {
                a->mask.data[i] = u < 0.6 ? 1 : u < 0.8 ? 2 : 3;
                if (u > 0.995)
                    a->rms.data[i] = NAN;
                else if (u > 0.99)
                    a->bkg.data[i] = NAN;
            }
        }
    a->st.median = 0.125;
    a->st.sigma = 1.0625;
}

static void free_aux(aux_host *a)
{
    sf_image_free(&a->bkg, NULL);
    sf_image_free(&a->rms, NULL);
    sf_mask_free(&a->mask, NULL);
}

#endif
