/* Check suite of the fit stage: Gaussians of known parameters recovered by
 * the CPU twin (one, blended pairs by objects and by maxima), Condon's
 * errors against the scatter of many noise draws, the edge cases (too few
 * pixels, no noise, one pixel, parameters out of range), the same
 * components whatever the thread count, the model renderer; then the GPU
 * version against the CPU twin, bit for bit, on simulated skies (white and
 * beam-correlated noise, both component modes), awkward sizes with NaNs
 * and the real images. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sftest.h"
#include "skyfind/fit.h"
#include "skyfind/fits.h"
#include "skyfind/pipeline.h"
#include "skyfind/simulate.h"
#include "fit_calc.h"

static const char *PIPE_GLOBAL = "background method=global\n"
                                 "threshold nsigma=5 flood=3\n"
                                 "segment connectivity=8 min_area=3\n"
                                 "measure\n"
                                 "fit\n";

/* Noise of sigma 1 (seed; 0: none) plus Gaussians {amp, x0, y0, smaj, smin,
 * angle (deg from +x)}. */
static void gauss_image(sf_image *im, int nx, int ny, uint64_t seed, const double (*g)[6], int ng)
{
    sftest_rng r = {seed};
    ck_assert_int_eq(sf_image_alloc(im, nx, ny, SF_HOST, NULL), SF_OK);
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++) {
            double v = seed ? sftest_normal(&r) : 0.0;
            for (int k = 0; k < ng; k++) {
                const double a = g[k][5] * M_PI / 180.0, dx = x - g[k][1], dy = y - g[k][2];
                const double u = dx * cos(a) + dy * sin(a), w = -dx * sin(a) + dy * cos(a);
                v += g[k][0] * exp(-0.5 * (u * u / (g[k][3] * g[k][3]) + w * w / (g[k][4] * g[k][4])));
            }
            im->data[(size_t)y * im->stride + x] = (float)v;
        }
}

static unsigned run_keep; /* what run_text's runs keep (SF_KEEP_*) */

static sf_status run_text(const char *text, const sf_image *im, sf_backend b, double beam,
                          const char *set, sf_run_result *r)
{
    sf_pipeline pl;
    sf_run_opts o;
    sf_status st;
    ck_assert_int_eq(sf_pipeline_parse(text, "test", &pl), SF_OK);
    if (set) {
        char buf[512], *save = NULL;
        snprintf(buf, sizeof buf, "%s", set);
        for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
            ck_assert_msg(sf_pipeline_set(&pl, t) == SF_OK, "%s: %s", t, sf_errdetail());
    }
    memset(&o, 0, sizeof o);
    o.backend = b;
    o.gpu = b == SF_BACKEND_GPU ? sftest_gpu() : NULL;
    o.beam_pix = beam;
    o.beam_min_pix = beam;
    o.keep = run_keep;
    st = sf_pipeline_run(&pl, im, &o, r);
    sf_pipeline_free(&pl);
    return st;
}

/* The component nearest (x, y). */
static const sf_component *nearest(const sf_run_result *r, double x, double y)
{
    const sf_component *best = NULL;
    double bd = INFINITY;
    for (int i = 0; i < r->ncomps; i++) {
        const double d = hypot(r->comps[i].x - x, r->comps[i].y - y);
        if (d < bd) {
            bd = d;
            best = &r->comps[i];
        }
    }
    return best;
}

static double angle_diff(double a, double b)
{
    double d = fmod(a - b, 180.0);
    if (d > 90)
        d -= 180;
    if (d <= -90)
        d += 180;
    return fabs(d);
}

START_TEST(test_finish_math)
{
    /* the derived values come from +, -, *, /, sqrt and ms_atan2 / ms_sincos
     * (so the GPU's are the same bits): those agree with libm to a few ulp,
     * and a component's size, angle, flux and deconvolved size with their
     * closed forms */
    double worst = 0, worst_a = 0;
    for (int i = -20000; i <= 20000; i++) {
        const double x = i * (M_PI / 2) / 20000;
        double sn, cs;
        ms_sincos(x, &sn, &cs);
        worst = fmax(worst, fmax(fabs(sn - sin(x)), fabs(cs - cos(x))));
        if (i)
            worst_a = fmax(worst_a, fabs(ms_atan2(sin(3 * x + 0.2), cos(1.7 * x)) -
                                         atan2(sin(3 * x + 0.2), cos(1.7 * x))));
    }
    ck_assert_msg(worst < 4.5e-16, "sin/cos: worst absolute error %g", worst);
    ck_assert_msg(worst_a < 2e-15, "atan2: worst absolute error %g", worst_a);
    for (int k = 0; k < 7; k++) {
        /* FWHM 6 x 4 px at angles -85..85 deg; a beam of 3 x 2 px at 20 deg */
        const double maj = 6, min = 4, pa = -85 + 28.3 * k;
        const double a = pa * M_PI / 180, ba = 20 * M_PI / 180;
        double xx, yy, xy, q[6] = {0}, bxx, byy, bxy, dxx, dyy, dxy, t, d;
        sf_fit_cov2 bc;
        sf_component o;
        sf_fit_cov(maj, min, cos(a), sin(a), &xx, &yy, &xy);
        sf_fit_from_cov(xx, yy, xy, q);
        sf_fit_cov(3, 2, cos(ba), sin(ba), &bxx, &byy, &bxy);
        bc.xx = bxx, bc.yy = byy, bc.xy = bxy;
        memset(&o, 0, sizeof o);
        o.amp = 2.5, o.x0 = 10, o.y0 = 20, o.cP = q[3], o.cQ = q[4], o.cR = q[5];
        o.status = SF_FIT_OK, o.rms = 0.1f, o.npix = 50, o.resid_ss = 0.5;
        sf_fit_finish_one(&o, &bc, 1, 1);
        ck_assert_msg(fabs(o.maj - maj) < 1e-12 && fabs(o.min - min) < 1e-12, "axes %.15g %.15g",
                      o.maj, o.min);
        ck_assert_msg(angle_diff(o.pa, pa) < 1e-10, "pa %.15g, want %.15g", o.pa, pa);
        ck_assert(fabs(o.flux - 2 * M_PI * 2.5 * maj * min * SF_FIT_F2S * SF_FIT_F2S) < 1e-12);
        ck_assert(fabs(o.resid_rms - 0.1) < 1e-15);
        ck_assert(o.x_err > 0 && o.y_err > 0 && o.flux_err > 0 && o.pa_err > 0 && o.pa_err <= 90);
        /* the deconvolved size: eigenvalues of the covariances' difference */
        dxx = xx - bxx, dyy = yy - byy, dxy = xy - bxy;
        t = 0.5 * (dxx + dyy), d = sqrt(0.25 * (dxx - dyy) * (dxx - dyy) + dxy * dxy);
        ck_assert_msg(fabs(o.dmaj - sqrt(t + d) / SF_FIT_F2S) < 1e-9 &&
                          fabs(o.dmin - sqrt(t - d) / SF_FIT_F2S) < 1e-9,
                      "deconvolved %.15g x %.15g", o.dmaj, o.dmin);
        ck_assert_msg(angle_diff(o.dpa, 0.5 * atan2(2 * dxy, dxx - dyy) * 180 / M_PI) < 1e-8,
                      "dpa %.15g", o.dpa);
        ck_assert(!(o.flags & SF_COMP_UNRESOLVED));
    }
}
END_TEST

START_TEST(test_single)
{
    /* a bright elliptical Gaussian: every parameter, and its error within 4
     * sigma of the truth */
    const double g[1][6] = {{60.0, 40.3, 37.8, 3.0, 2.0, 30.0}};
    const double f2s = 1.0 / sqrt(8.0 * log(2.0));
    sf_image im;
    sf_run_result r;
    const sf_component *c;
    gauss_image(&im, 80, 75, 5, g, 1);
    ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, 0, "fit.noise=white", &r), SF_OK);
    ck_assert_int_eq(r.ncomps, 1);
    c = &r.comps[0];
    ck_assert_int_eq(c->status, SF_FIT_OK);
    ck_assert_int_eq(c->island, 1);
    ck_assert_int_eq(c->component, 1);
    ck_assert_msg(c->niter > 0 && c->niter < 100, "iterations %d", c->niter);
    ck_assert_msg(fabs(c->amp - 60.0) < 4 * c->peak_err, "amp %g +- %g", c->amp, c->peak_err);
    ck_assert_msg(fabs(c->x - 40.3) < 4 * c->x_err && c->x_err < 0.1, "x %g +- %g", c->x, c->x_err);
    ck_assert_msg(fabs(c->y - 37.8) < 4 * c->y_err && c->y_err < 0.1, "y %g +- %g", c->y, c->y_err);
    ck_assert_msg(fabs(c->maj * f2s - 3.0) < 4 * c->maj_err * f2s, "maj %g +- %g", c->maj, c->maj_err);
    ck_assert_msg(fabs(c->min * f2s - 2.0) < 4 * c->min_err * f2s, "min %g +- %g", c->min, c->min_err);
    ck_assert_msg(angle_diff(c->pa, 30.0) < 4 * c->pa_err && c->pa_err < 5, "pa %g +- %g", c->pa,
                  c->pa_err);
    ck_assert_msg(fabs(c->flux / (2 * M_PI * 60 * 6) - 1) < 4 * c->flux_err / c->flux, "flux %g",
                  c->flux);
    /* the residual is the noise */
    ck_assert_msg(c->resid_rms > 0.8 && c->resid_rms < 1.25, "residual rms %g", c->resid_rms);
    ck_assert_msg(isnan(c->dmaj) && !(c->flags & SF_COMP_UNRESOLVED), "no beam: no deconvolution");
    sf_run_result_free(&r);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_condon_errors)
{
    /* 60 noise draws of one Gaussian: the scatter of the fitted values
     * against the quoted (Condon) errors, white noise */
    const double g[1][6] = {{25.0, 30.2, 29.6, 2.5, 1.8, -40.0}};
    const double f2s = 1.0 / sqrt(8.0 * log(2.0));
    double sx = 0, sy = 0, sa = 0, sM = 0, sm = 0;
    const int n = 60;
    for (int k = 0; k < n; k++) {
        sf_image im;
        sf_run_result r;
        const sf_component *c;
        gauss_image(&im, 60, 60, 100 + k, g, 1);
        ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, 0, "fit.noise=white", &r), SF_OK);
        c = nearest(&r, 30.2, 29.6);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(c->status, SF_FIT_OK);
        sx += pow((c->x - 30.2) / c->x_err, 2);
        sy += pow((c->y - 29.6) / c->y_err, 2);
        sa += pow((c->amp - 25.0) / c->peak_err, 2);
        sM += pow((c->maj * f2s - 2.5) / (c->maj_err * f2s), 2);
        sm += pow((c->min * f2s - 1.8) / (c->min_err * f2s), 2);
        sf_run_result_free(&r);
        sf_image_free(&im, NULL);
    }
    /* normalised residuals of standard deviation 1: +-0.35 for 60 draws, and
     * +0.45 for the minor axis, whose wings below the 3-sigma flood are not
     * in the island (Condon's errors assume the whole Gaussian is fitted;
     * on radio.pipe's larger, matched-filter islands tests/py/test_fit.py
     * finds 1 +- 0.15) */
    ck_assert_msg(fabs(sqrt(sx / n) - 1) < 0.35, "x: %g", sqrt(sx / n));
    ck_assert_msg(fabs(sqrt(sy / n) - 1) < 0.35, "y: %g", sqrt(sy / n));
    ck_assert_msg(fabs(sqrt(sa / n) - 1) < 0.35, "amp: %g", sqrt(sa / n));
    ck_assert_msg(fabs(sqrt(sM / n) - 1) < 0.35, "maj: %g", sqrt(sM / n));
    ck_assert_msg(sqrt(sm / n) > 0.65 && sqrt(sm / n) < 1.45, "min: %g", sqrt(sm / n));
}
END_TEST

START_TEST(test_blend)
{
    /* two overlapping point sources in one island: deblended objects, or
     * the island's maxima; both fitted together */
    const double g[2][6] = {{80.0, 30.0, 30.0, 2.2, 2.2, 0}, {40.0, 37.5, 33.0, 2.2, 2.2, 0}};
    const char *pipe = "background method=global\n"
                       "threshold nsigma=5 flood=3\n"
                       "segment connectivity=8 min_area=3\n"
                       "deblend\n"
                       "measure\n"
                       "fit\n";
    const char *sets[2] = {"fit.noise=white", "fit.noise=white fit.components=maxima"};
    sf_image im;
    gauss_image(&im, 70, 64, 9, g, 2);
    for (int mode = 0; mode < 2; mode++) {
        sf_run_result r;
        ck_assert_int_eq(run_text(pipe, &im, SF_BACKEND_CPU, 0, sets[mode], &r), SF_OK);
        ck_assert_msg(r.ncomps == 2, "%s: %d components", sets[mode], r.ncomps);
        for (int k = 0; k < 2; k++) {
            const sf_component *c = nearest(&r, g[k][1], g[k][2]);
            ck_assert_int_eq(c->ncomp, 2);
            ck_assert_int_eq(c->island, r.comps[0].island);
            ck_assert_int_eq(c->status, SF_FIT_OK);
            ck_assert_msg(hypot(c->x - g[k][1], c->y - g[k][2]) < 0.2, "%s: component %d at %g %g",
                          sets[mode], k, c->x, c->y);
            ck_assert_msg(fabs(c->flux / (2 * M_PI * g[k][0] * 2.2 * 2.2) - 1) < 0.05,
                          "%s: flux of %d: %g", sets[mode], k, c->flux);
        }
        /* brightest first */
        ck_assert_msg(r.comps[0].amp > r.comps[1].amp && r.comps[0].component == 1,
                      "components in order of peak");
        sf_run_result_free(&r);
    }
    {
        /* max_components=1: one component, flagged */
        sf_run_result r;
        ck_assert_int_eq(run_text(pipe, &im, SF_BACKEND_CPU, 0,
                                  "fit.components=maxima fit.max_components=1", &r), SF_OK);
        ck_assert_int_eq(r.ncomps, 1);
        ck_assert(r.comps[0].flags & SF_COMP_TOO_MANY);
        sf_run_result_free(&r);
    }
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_beam)
{
    /* with a beam: an unresolved source is flagged, a resolved one
     * deconvolves to its intrinsic size; the noise=beam errors are larger
     * than the white ones by about the beam's correlation */
    const double bf = 6.0, f2s = 1.0 / sqrt(8.0 * log(2.0)), bs = bf * f2s;
    const double intr = 5.0; /* intrinsic FWHM of the resolved one, circular */
    const double cs = sqrt(bs * bs + intr * intr * f2s * f2s);
    const double g[2][6] = {{50.0, 30.0, 30.0, bs, bs, 0}, {50.0, 80.0, 40.0, cs, cs, 0}};
    sf_image im;
    sf_run_result r, w;
    const sf_component *p, *e;
    gauss_image(&im, 110, 70, 21, g, 2);
    ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, bf, NULL, &r), SF_OK);
    ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, bf, "fit.noise=white", &w), SF_OK);
    ck_assert_int_eq(r.ncomps, 2);
    p = nearest(&r, 30, 30);
    e = nearest(&r, 80, 40);
    ck_assert_msg(p->flags & SF_COMP_UNRESOLVED || p->dmaj < 2.0, "point source: dmaj %g", p->dmaj);
    ck_assert_msg(!(e->flags & SF_COMP_UNRESOLVED), "resolved source flagged unresolved");
    ck_assert_msg(fabs(sqrt(e->dmaj * e->dmin) - intr) < 0.6, "deconvolved %g x %g, intrinsic %g",
                  e->dmaj, e->dmin, intr);
    ck_assert_msg(r.comps[0].x_err > 2 * w.comps[0].x_err, "beam errors %g, white %g",
                  r.comps[0].x_err, w.comps[0].x_err);
    sf_run_result_free(&r);
    sf_run_result_free(&w);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_edges)
{
    sf_image im;
    sf_run_result r;
    /* a one-pixel island: fewer pixels than parameters, skipped */
    {
        const double g[1][6] = {{40.0, 20.0, 20.0, 0.35, 0.35, 0}};
        gauss_image(&im, 40, 40, 0, g, 1);
        for (int y = 0; y < 40; y++) /* a faint noise floor so the sigma is not 0 */
            for (int x = 0; x < 40; x++)
                im.data[y * im.stride + x] += (float)(((x * 7 + y * 13) % 11) - 5) * 0.1f;
        ck_assert_int_eq(run_text("background method=global\nthreshold nsigma=5\n"
                                  "segment min_area=1\nmeasure\nfit\n",
                                  &im, SF_BACKEND_CPU, 0, NULL, &r), SF_OK);
        ck_assert_int_ge(r.ncomps, 1);
        ck_assert_int_eq(r.comps[0].status, SF_FIT_SKIPPED);
        ck_assert(isnan(r.comps[0].x_err) && isnan(r.comps[0].flux_err));
        sf_run_result_free(&r);
        sf_image_free(&im, NULL);
    }
    /* a 1x1 image: no components, no error; an all-NaN image: SF_ERR_EMPTY
     * from the background stage, before the fit */
    for (int k = 0; k < 2; k++) {
        const int n = k ? 30 : 1;
        ck_assert_int_eq(sf_image_alloc(&im, n, n, SF_HOST, NULL), SF_OK);
        for (int i = 0; i < n * n; i++)
            im.data[i] = k ? NAN : 1.0f;
        if (k) {
            ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, 0, NULL, &r), SF_ERR_EMPTY);
        } else {
            ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, 0, NULL, &r), SF_OK);
            ck_assert_int_eq(r.ncomps, 0);
            sf_run_result_free(&r);
        }
        sf_image_free(&im, NULL);
    }
    /* parameters out of range are refused by the registry */
    {
        sf_pipeline pl;
        ck_assert_int_eq(sf_pipeline_parse(PIPE_GLOBAL, "test", &pl), SF_OK);
        ck_assert_int_ne(sf_pipeline_set(&pl, "fit.max_components=17"), SF_OK);
        ck_assert_int_ne(sf_pipeline_set(&pl, "fit.max_components=0"), SF_OK);
        ck_assert_int_ne(sf_pipeline_set(&pl, "fit.max_iter=0"), SF_OK);
        ck_assert_int_ne(sf_pipeline_set(&pl, "fit.components=blobs"), SF_OK);
        ck_assert_int_ne(sf_pipeline_set(&pl, "fit.peak_nsigma=-1"), SF_OK);
        sf_pipeline_free(&pl);
    }
    /* fit without a measure stage is refused */
    {
        sf_pipeline pl;
        const double g[1][6] = {{40.0, 20.0, 20.0, 2, 2, 0}};
        sf_run_opts o;
        gauss_image(&im, 40, 40, 3, g, 1);
        memset(&o, 0, sizeof o);
        if (sf_pipeline_parse("background\nthreshold\nsegment\nfit\n", "test", &pl) == SF_OK) {
            ck_assert_int_ne(sf_pipeline_run(&pl, &im, &o, &r), SF_OK);
            sf_pipeline_free(&pl);
        }
        sf_image_free(&im, NULL);
    }
}
END_TEST

/* Two runs' components, bit for bit. */
static void same_components(const sf_run_result *a, const sf_run_result *b, const char *what)
{
    ck_assert_msg(a->ncomps == b->ncomps, "%s: %d components against %d", what, a->ncomps,
                  b->ncomps);
    for (int i = 0; i < a->ncomps; i++) {
        const sf_component *p = &a->comps[i], *q = &b->comps[i];
        if (memcmp(p, q, sizeof *p) == 0)
            continue;
        ck_abort_msg("%s: component %d (island %d #%d): status %d/%d iter %d/%d amp %.17g/%.17g "
                     "x %.17g/%.17g y %.17g/%.17g P %.17g/%.17g chi2 %.17g/%.17g flags %d/%d; "
                     "derived (the GPU's fit_finish): maj %.17g/%.17g pa %.17g/%.17g x_err "
                     "%.17g/%.17g flux_err %.17g/%.17g dmaj %.17g/%.17g dpa %.17g/%.17g",
                     what, i, p->island, p->component, p->status, q->status, p->niter, q->niter,
                     p->amp, q->amp, p->x0, q->x0, p->y0, q->y0, p->cP, q->cP, p->chi2, q->chi2,
                     p->flags, q->flags, p->maj, q->maj, p->pa, q->pa, p->x_err, q->x_err,
                     p->flux_err, q->flux_err, p->dmaj, q->dmaj, p->dpa, q->dpa);
    }
}

START_TEST(test_threads)
{
    /* the same components with 1 and 2 threads */
    sf_sim_params sp;
    sf_image im;
    sf_sim_source *t = NULL;
    int nt = 0, nthr = omp_get_max_threads();
    sf_run_result a, b;
    sf_sim_params_default(&sp);
    sp.nx = sp.ny = 512;
    sp.seed = 4;
    sp.npairs = 6;
    ck_assert_int_eq(sf_simulate(&sp, &im, &t, &nt), SF_OK);
    omp_set_num_threads(1);
    ck_assert_int_eq(run_text("background method=bane\nthreshold nsigma=5 flood=3\nsegment\n"
                              "deblend\nmeasure\nfit\n", &im, SF_BACKEND_CPU, 5, NULL, &a), SF_OK);
    omp_set_num_threads(nthr > 1 ? nthr : 2);
    ck_assert_int_eq(run_text("background method=bane\nthreshold nsigma=5 flood=3\nsegment\n"
                              "deblend\nmeasure\nfit\n", &im, SF_BACKEND_CPU, 5, NULL, &b), SF_OK);
    omp_set_num_threads(nthr);
    ck_assert_int_gt(a.ncomps, 10);
    same_components(&a, &b, "1 thread against several");
    sf_run_result_free(&a);
    sf_run_result_free(&b);
    free(t);
    sf_image_free(&im, NULL);
}
END_TEST

/* A threshold stage after the segment stage makes a new mask that no
 * longer holds every labelled pixel: the fit still fits each island's
 * pixels (the labels'), so its components are those of the run without it
 * (it reads labels only under a mask the labels were made from). */
START_TEST(test_rethreshold)
{
    static const double g[][6] = {{40, 40, 40, 4, 3, 20}, {25, 90, 70, 3, 3, 0},
                                  {30, 60, 100, 5, 2.5, -40}};
    sf_image im;
    sf_run_result a, b;
    gauss_image(&im, 130, 130, 5, g, 3);
    ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, 0, NULL, &a), SF_OK);
    ck_assert_int_eq(run_text("background method=global\nthreshold nsigma=5 flood=3\n"
                              "segment connectivity=8 min_area=3\nthreshold nsigma=15 flood=10\n"
                              "measure\nfit\n",
                              &im, SF_BACKEND_CPU, 0, NULL, &b),
                     SF_OK);
    ck_assert_int_eq(a.ncomps, 3);
    ck_assert_int_eq(b.ncomps, a.ncomps);
    for (int i = 0; i < a.ncomps; i++) {
        ck_assert_msg(b.comps[i].npix == a.comps[i].npix, "component %d: %d pixels fitted, not %d",
                      i + 1, b.comps[i].npix, a.comps[i].npix);
        ck_assert(b.comps[i].amp == a.comps[i].amp && b.comps[i].x0 == a.comps[i].x0 &&
                  b.comps[i].y0 == a.comps[i].y0);
    }
    sf_run_result_free(&a);
    sf_run_result_free(&b);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_render)
{
    /* the model of the fitted components taken from the image leaves the
     * noise in the island */
    const double g[2][6] = {{60.0, 25.0, 22.0, 2.5, 1.7, 20.0}, {30.0, 50.0, 40.0, 3.0, 3.0, 0}};
    sf_image im, res;
    sf_run_result r;
    double ss = 0;
    int n = 0;
    gauss_image(&im, 70, 60, 12, g, 2);
    ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, 0, NULL, &r), SF_OK);
    ck_assert_int_eq(r.ncomps, 2);
    ck_assert_int_eq(sf_image_alloc(&res, 70, 60, SF_HOST, NULL), SF_OK);
    memcpy(res.data, im.data, sf_npix(70, 60) * sizeof(float));
    sf_fit_render(r.comps, r.ncomps, -1.0f, &res);
    for (int k = 0; k < 2; k++)
        for (int y = (int)g[k][2] - 4; y <= (int)g[k][2] + 4; y++)
            for (int x = (int)g[k][1] - 4; x <= (int)g[k][1] + 4; x++) {
                const double v = res.data[y * res.stride + x];
                ss += v * v;
                n++;
            }
    ck_assert_msg(sqrt(ss / n) < 1.3, "residual rms %g near the sources", sqrt(ss / n));
    sf_image_free(&res, NULL);
    sf_run_result_free(&r);
    sf_image_free(&im, NULL);
}
END_TEST

/* ---- GPU against the CPU twin ------------------------------------------- */

static void gpu_same(const char *pipe, const sf_image *im, double beam, const char *set,
                     const char *what)
{
    sf_run_result c, g;
    char buf[512];
    sf_status st;
    snprintf(buf, sizeof buf, "%s %dx%d [%s]", what, im->nx, im->ny, set ? set : "");
    ck_assert_int_eq(run_text(pipe, im, SF_BACKEND_CPU, beam, set, &c), SF_OK);
    st = run_text(pipe, im, SF_BACKEND_GPU, beam, set, &g);
    ck_assert_msg(st == SF_OK, "%s: %s: %s", buf, sf_strerror(st), sf_errdetail());
    same_components(&c, &g, buf);
    /* the measure stage's catalogue too (with method=bane its bkg and rms
     * at the peak come, on the GPU, from the maps the threshold pass makes
     * from BANE's node grids) */
    ck_assert_msg(c.nsources == g.nsources, "%s: %d sources against %d", buf, c.nsources,
                  g.nsources);
    for (int i = 0; i < c.nsources; i++)
        ck_assert_msg(memcmp(&c.sources[i], &g.sources[i], sizeof c.sources[i]) == 0,
                      "%s: source %d: bkg %.9g/%.9g rms %.9g/%.9g flux %.17g/%.17g", buf, i + 1,
                      c.sources[i].bkg, g.sources[i].bkg, c.sources[i].rms, g.sources[i].rms,
                      c.sources[i].flux_sum, g.sources[i].flux_sum);
    /* kept maps (the GPU's threshold pass makes them with its mask) */
    ck_assert_int_eq(c.bkgmap.data != NULL, g.bkgmap.data != NULL);
    for (int y = 0; c.bkgmap.data && y < c.bkgmap.ny; y++)
        ck_assert_msg(!memcmp(c.bkgmap.data + (size_t)y * c.bkgmap.stride,
                              g.bkgmap.data + (size_t)y * g.bkgmap.stride, c.bkgmap.nx * 4) &&
                          !memcmp(c.rmsmap.data + (size_t)y * c.rmsmap.stride,
                                  g.rmsmap.data + (size_t)y * g.rmsmap.stride, c.rmsmap.nx * 4),
                      "%s: kept maps differ in row %d", buf, y);
    if (getenv("SKYFIND_TEST_VERBOSE"))
        printf("%s: %d components identical\n", buf, c.ncomps);
    sf_run_result_free(&c);
    sf_run_result_free(&g);
}

static const char *PIPE_RADIO = "background method=bane\n"
                                "threshold nsigma=5 flood=3\n"
                                "segment connectivity=8 min_area=3\n"
                                "deblend\n"
                                "measure\n"
                                "fit\n";

static const char *PIPE_RADIO_CONV = "background method=bane step=5 box=30\n"
                                     "convolve kernel=gauss fwhm=2.5\n"
                                     "threshold nsigma=4 flood=2.5\n"
                                     "segment connectivity=8 min_area=3\n"
                                     "deblend\n"
                                     "measure\n"
                                     "fit\n";

START_TEST(gpu_sims)
{
    static const char *sets[] = {NULL, "fit.components=maxima", "fit.components=maxima "
                                 "fit.max_components=16 fit.peak_nsigma=3 threshold.sign=both",
                                 "fit.max_components=1 fit.max_iter=3"};
    for (int k = 0; k < 4; k++) {
        sf_sim_params sp;
        sf_image im;
        sf_sim_source *t = NULL;
        int nt = 0;
        if (sftest_quick() && k > 1)
            break;
        sf_sim_params_default(&sp);
        sp.nx = k == 1 ? 1000 : 700;
        sp.ny = k == 1 ? 700 : 701;
        sp.seed = 30 + k;
        sp.npairs = 20;
        sp.corr_noise = k & 1;
        sp.ext_frac = 0.4;
        ck_assert_int_eq(sf_simulate(&sp, &im, &t, &nt), SF_OK);
        for (int s = 0; s < 4; s++)
            gpu_same(PIPE_RADIO, &im, 5, sets[s], k & 1 ? "sim, correlated noise" : "sim");
        free(t);
        sf_image_free(&im, NULL);
    }
}
END_TEST

START_TEST(gpu_awkward)
{
    for (int i = 0; sftest_sizes[i][0]; i++) {
        sf_image im;
        const int nx = sftest_sizes[i][0], ny = sftest_sizes[i][1];
        if (sftest_quick() && nx * ny > 300 * 300)
            continue;
        sftest_noise_image(&im, nx, ny, 500 + i, (nx * ny) / 400 + 1, 0.01);
        gpu_same(PIPE_GLOBAL, &im, 0, NULL, "noise+blobs+NaN");
        gpu_same(PIPE_GLOBAL, &im, 0, "fit.components=maxima fit.peak_nsigma=0", "noise+blobs+NaN");
        /* BANE's maps (made in the GPU's threshold pass) read where the image
         * is NaN but the filtered image is not, with the rms map and with
         * rms=global, on the cell path (step 5, box 30) and the pixel path
         * (step 7) */
        gpu_same(PIPE_RADIO_CONV, &im, 0, NULL, "bane+filter, noise+blobs+NaN");
        gpu_same(PIPE_RADIO_CONV, &im, 0, "threshold.rms=global background.step=7",
                 "bane+filter, noise+blobs+NaN");
        /* the maps kept by the caller, and the deblend stage's host
         * fallback (forced): the maps and labels brought down, the labels
         * sent back up */
        run_keep = SF_KEEP_BKG;
        gpu_same(PIPE_RADIO_CONV, &im, 0, NULL, "bane+filter, maps kept");
        run_keep = 0;
        setenv("SKYFIND_DEBLEND_HOST", "1", 1);
        gpu_same(PIPE_RADIO_CONV, &im, 0, NULL, "bane+filter, deblend on the host");
        unsetenv("SKYFIND_DEBLEND_HOST");
        sf_image_free(&im, NULL);
    }
}
END_TEST

/* Islands of more pixels than the GPU sorts in one tile of shared memory
 * (2048): one of about 2 tiles and one of about 5 (an odd number of runs to
 * merge), beside small ones; the components must still be the CPU's bit for
 * bit (the fit's sums run over each island's pixels in raster order). */
START_TEST(gpu_big_islands)
{
    static const double g[][6] = {{60, 90, 100, 14, 11, 20},  {80, 300, 250, 24, 19, -35},
                                  {30, 250, 60, 2, 2, 0},     {25, 60, 300, 2.5, 1.8, 40},
                                  {20, 170, 210, 1.5, 1.5, 0}};
    sf_image im;
    sf_run_result c;
    long long big[2] = {0, 0};
    gauss_image(&im, 380, 360, 77, g, 5);
    ck_assert_int_eq(run_text(PIPE_GLOBAL, &im, SF_BACKEND_CPU, 0, "fit.components=maxima", &c),
                     SF_OK);
    for (int i = 0; i < c.nsources; i++) {
        const long long n = c.sources[i].npix;
        if (n > 2048 && n <= 3 * 2048)
            big[0] = n;
        else if (n > 4 * 2048)
            big[1] = n;
    }
    ck_assert_msg(big[0] && big[1], "islands of %lld and %lld pixels: want one of 2 to 3 tiles "
                  "of 2048 and one of more than 4", big[0], big[1]);
    sf_run_result_free(&c);
    gpu_same(PIPE_GLOBAL, &im, 0, NULL, "big islands");
    gpu_same(PIPE_GLOBAL, &im, 0, "fit.components=maxima", "big islands");
    gpu_same(PIPE_RADIO, &im, 3, NULL, "big islands, bane");
    /* a second threshold after the segment stage: its mask no longer holds
     * every labelled pixel, so the GPU's fit must read every label */
    gpu_same("background method=global\nthreshold nsigma=5 flood=3\n"
             "segment connectivity=8 min_area=3\nthreshold nsigma=30 flood=20\nmeasure\nfit\n",
             &im, 0, NULL, "threshold again after segment");
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(gpu_real)
{
    static const char *files[] = {"radio_parkes_1904-66_SIN.fits",
                                  "radio_amila_GRB120422A_512x512x1x1.fits",
                                  "sim_aegean_synthetic_512x256.fits",
                                  "radio_atca_scorpio_s17_1000x1000.fits",
                                  "radio_lofar_GRB201006A_wsclean_256x256.fits",
                                  "optical_eso_ntt_emmi_256x256_int16_bscale.fits", NULL};
    if (!sftest_have_data()) {
        printf("SKIP: no test data\n");
        return;
    }
    for (int i = 0; files[i]; i++) {
        sf_image im;
        sf_fits_info info;
        sf_beam_pixels b;
        FILE *f = fopen(sftest_data(files[i]), "rb");
        if (!f) {
            printf("SKIP: %s not in the test data\n", files[i]);
            continue;
        }
        fclose(f);
        ck_assert_int_eq(sf_fits_read(sftest_data(files[i]), -1, NULL, &im, &info), SF_OK);
        sf_fits_beam_pixels(&info, im.nx, im.ny, &b);
        gpu_same(PIPE_RADIO, &im, b.bmaj_pix, NULL, files[i]);
        gpu_same(PIPE_RADIO, &im, b.bmaj_pix, "fit.components=maxima", files[i]);
        sf_image_free(&im, NULL);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fit");
    TCase *cpu = tcase_create("cpu");
    TCase *gpu = tcase_create("gpu");
    tcase_add_test(cpu, test_finish_math);
    tcase_add_test(cpu, test_single);
    tcase_add_test(cpu, test_condon_errors);
    tcase_add_test(cpu, test_blend);
    tcase_add_test(cpu, test_beam);
    tcase_add_test(cpu, test_edges);
    tcase_add_test(cpu, test_threads);
    tcase_add_test(cpu, test_render);
    tcase_add_test(cpu, test_rethreshold);
    tcase_set_timeout(cpu, 300);
    suite_add_tcase(s, cpu);
    tcase_add_test(gpu, gpu_sims);
    tcase_add_test(gpu, gpu_awkward);
    tcase_add_test(gpu, gpu_big_islands);
    tcase_add_test(gpu, gpu_real);
    tcase_set_timeout(gpu, 900);
    return sftest_main(s, &gpu, 1);
}
