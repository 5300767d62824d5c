/* `skyfind compare`: run the pipeline on the CPU and on the GPU and compare
 * every stage's output (levels and maps, masks, labels, catalogue columns). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "cli.h"
#include "cli_run.h"
#include "skyfind/gpu.h"
#include "skyfind/threshold.h"

/* A mask pixel that differs after a convolve stage is "marginal" when a
 * threshold lies between its CPU and GPU filtered significance, or within
 * this many sigma of them: float sums in another order (the FFTs of FFTW and
 * cuFFT) move it across. */
#define MARGIN_SIGMA 1e-4

static double rel_diff(double g, double c)
{
    if (isnan(g) && isnan(c))
        return 0;
    if (g == c)
        return 0;
    double d = fabs(g - c), s = fabs(c) > 1e-300 ? fabs(c) : 1e-300;
    return isfinite(d) ? d / s : INFINITY;
}

typedef struct {
    int ok;
    double dmed, dsig;           /* |diff| / sigma */
    int niter_c, niter_g;
    long long mask_diff, mask_set;
    int nlab_c, nlab_g;
    long long lab_diff;
    double dx, dy, dflux, dpeak; /* max relative */
    int have_maps;
    double dbkg, drms;           /* maps: max |diff| / rms, max relative rms diff */
    long long npix_diff, peakpos_diff;
    double dmore;                /* the other real columns: max scaled diff, and which */
    const char *dmore_col;
    long long int_diff;          /* box, flags, npeaks mismatches */
    int have_filt;
    double dfilt;                /* filtered images: max |diff| / filtered sigma */
    double lfilt;                /* filtered images: relative L2 difference */
    long long mask_marginal;     /* differing mask pixels within MARGIN_SIGMA of a threshold */
    int downstream_skipped;      /* masks differ (marginally): labels and catalogue not compared */
    double dfit;                 /* fitted components: max relative diff, and where */
    const char *dfit_col;
    long long fit_int_diff;      /* island, component, status, iterations, flags mismatches */
} cmp_result;

/* The background level and sigma of pixel i of run c: its map values for
 * method=mesh, else the global ones. */
static void pixel_background(const sf_run_result *c, size_t i, double *level, double *sig)
{
    int maps = c->bkgmap.data && c->box;
    *level = maps ? c->bkgmap.data[i] : c->bkg.median;
    *sig = maps ? c->rmsmap.data[i] : c->bkg.sigma;
}

/* Significance of filtered pixel i of run c in filtered sigmas (or NaN). */
/* The significance of filtered pixel i of f (CPU's or GPU's), on c's
 * background (the maps agree before this is asked). */
static double filt_signif(const sf_run_result *c, const float *f, const sf_thresh_params *tp, size_t i)
{
    double level, sig;
    pixel_background(c, i, &level, &sig);
    if (!tp->subtract)
        level = 0;
    return (f[i] - level * c->filter_sum) / (sig * c->filter_gain);
}

/* A threshold t (or -t for negative detections) between the CPU's and the
 * GPU's significance of the pixel, or within MARGIN_SIGMA of them: the two
 * filtered values lie on either side of it, so either mask is right. */
static int marginal(double zc, double zg, double t, int negative)
{
    double lo = zc < zg ? zc : zg, hi = zc < zg ? zg : zc;
    return (t >= lo - MARGIN_SIGMA && t <= hi + MARGIN_SIGMA) ||
           (negative && -t >= lo - MARGIN_SIGMA && -t <= hi + MARGIN_SIGMA);
}

/* The measure columns beyond x, y, flux_sum, peak: relative differences
 * (xy relative to sqrt(x2 y2), theta to 90 degrees), exact integers. */
static void measure_more(const sf_source *a, const sf_source *b, cmp_result *m)
{
    const struct { const char *name; double c, g, scale; } f[] = {
        {"x2", a->x2, b->x2, fabs(a->x2)}, {"y2", a->y2, b->y2, fabs(a->y2)},
        {"xy", a->xy, b->xy, sqrt(fabs(a->x2 * a->y2))}, {"a", a->a, b->a, fabs(a->a)},
        {"b", a->b, b->b, fabs(a->b)}, {"theta", a->theta, b->theta, 90.0},
        {"snr", a->snr, b->snr, fabs(a->snr)}, {"bkg", a->bkg, b->bkg, fabs(a->rms)},
        {"rms", a->rms, b->rms, fabs(a->rms)}, {"flux_err", a->flux_err, b->flux_err, fabs(a->flux_err)},
        {"x_err", a->x_err, b->x_err, fabs(a->x_err)}, {"y_err", a->y_err, b->y_err, fabs(a->y_err)}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        double d;
        if ((isnan(f[k].c) && isnan(f[k].g)) || f[k].c == f[k].g)
            continue;
        d = fabs(f[k].g - f[k].c) / (f[k].scale > 1e-300 ? f[k].scale : 1e-300);
        if (!(d <= m->dmore)) {
            m->dmore = isfinite(d) ? d : INFINITY;
            m->dmore_col = f[k].name;
        }
    }
    m->int_diff += a->xmin != b->xmin || a->xmax != b->xmax || a->ymin != b->ymin ||
                   a->ymax != b->ymax || a->flags != b->flags || a->npeaks != b->npeaks ||
                   a->parent != b->parent || a->nchildren != b->nchildren || a->id != b->id ||
                   a->sign != b->sign;
}

/* Two fitted components: every real field (relative to its scale) and the
 * integer ones. */
static void fit_more(const sf_component *a, const sf_component *b, cmp_result *m)
{
    const struct { const char *name; double c, g, scale; } f[] = {
        {"amp", a->amp, b->amp, fabs(a->amp)}, {"x0", a->x0, b->x0, fabs(a->maj)},
        {"y0", a->y0, b->y0, fabs(a->maj)}, {"P", a->cP, b->cP, fabs(a->cP) + fabs(a->cQ)},
        {"Q", a->cQ, b->cQ, fabs(a->cP) + fabs(a->cQ)}, {"R", a->cR, b->cR, fabs(a->cP) + fabs(a->cQ)},
        {"flux", a->flux, b->flux, fabs(a->flux)}, {"maj", a->maj, b->maj, fabs(a->maj)},
        {"min", a->min, b->min, fabs(a->min)}, {"pa", a->pa, b->pa, 90.0},
        {"chi2", a->chi2, b->chi2, fabs(a->chi2)}, {"resid_rms", a->resid_rms, b->resid_rms, fabs(a->resid_rms)},
        {"flux_err", a->flux_err, b->flux_err, fabs(a->flux_err)},
        {"x_err", a->x_err, b->x_err, fabs(a->x_err)}, {"y_err", a->y_err, b->y_err, fabs(a->y_err)},
        {"maj_err", a->maj_err, b->maj_err, fabs(a->maj_err)}, {"dmaj", a->dmaj, b->dmaj, fabs(a->maj)},
        {"dmin", a->dmin, b->dmin, fabs(a->maj)}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        double d;
        if ((isnan(f[k].c) && isnan(f[k].g)) || f[k].c == f[k].g)
            continue;
        d = fabs(f[k].g - f[k].c) / (f[k].scale > 1e-300 ? f[k].scale : 1e-300);
        if (!(d <= m->dfit)) {
            m->dfit = isfinite(d) ? d : INFINITY;
            m->dfit_col = f[k].name;
        }
    }
    m->fit_int_diff += a->island != b->island || a->component != b->component ||
                       a->ncomp != b->ncomp || a->source != b->source || a->status != b->status ||
                       a->niter != b->niter || a->flags != b->flags || a->npix != b->npix ||
                       a->px != b->px || a->py != b->py || a->sign != b->sign;
}

static void compare_runs(const sf_run_result *c, const sf_run_result *g, const sf_thresh_params *tp,
                         double tol, cmp_result *m)
{
    size_t n = sf_npix(c->nx, c->ny);
    memset(m, 0, sizeof *m);
    m->ok = 1;
    if (c->have_bkg && !c->box) {
        double s = c->bkg.sigma > 0 ? c->bkg.sigma : 1;
        m->dmed = fabs(g->bkg.median - c->bkg.median) / s;
        m->dsig = rel_diff(g->bkg.sigma, c->bkg.sigma);
        m->niter_c = c->bkg.niter;
        m->niter_g = g->bkg.niter;
        if (m->dmed > tol || m->dsig > tol || m->niter_c != m->niter_g)
            m->ok = 0;
    }
    if (c->bkgmap.data && g->bkgmap.data && c->box) {
        double mt = tol > 1e-5 ? tol : 1e-5; /* interpolated maps: 1e-5 relative */
        m->have_maps = 1;
        for (size_t i = 0; i < n; i++) {
            float cb = c->bkgmap.data[i], gb = g->bkgmap.data[i];
            float cr = c->rmsmap.data[i], gr = g->rmsmap.data[i];
            if (isnan(cb) && isnan(gb) && isnan(cr) && isnan(gr))
                continue;
            double db = fabs((double)gb - cb) / (cr > 0 ? cr : 1e-30);
            double dr = rel_diff(gr, cr);
            if (!(db <= m->dbkg))
                m->dbkg = isnan(db) ? INFINITY : db;
            if (!(dr <= m->drms))
                m->drms = isnan(dr) ? INFINITY : dr;
        }
        if (m->dbkg > mt || m->drms > mt)
            m->ok = 0;
    }
    if (c->filtered.data && g->filtered.data) {
        /* the convolution's own tolerance: relative L2 under 1e-5 (float FFTs
         * err in proportion to the image's largest values, so the largest
         * |diff| in noise sigmas is reported but not judged) */
        double num = 0, den = 0;
        m->have_filt = 1;
        for (size_t i = 0; i < n; i++) {
            double level, sig;
            pixel_background(c, i, &level, &sig);
            sig *= c->filter_gain;
            float a = c->filtered.data[i], b = g->filtered.data[i];
            double d = isnan(a) && isnan(b) ? 0 : fabs((double)a - b) / (sig > 0 ? sig : 1e-30);
            if (!(d <= m->dfilt))
                m->dfilt = isnan(d) ? INFINITY : d;
            if (isnan(a) != isnan(b))
                num = INFINITY;
            else if (!isnan(a)) {
                num += ((double)a - b) * ((double)a - b);
                den += (double)a * a;
            }
        }
        m->lfilt = den > 0 ? sqrt(num / den) : sqrt(num);
        if (!(m->lfilt <= 1e-5))
            m->ok = 0;
    }
    if (c->have_mask && g->have_mask) {
        for (size_t i = 0; i < n; i++) {
            int differ = c->mask.data[i] != g->mask.data[i];
            m->mask_diff += differ;
            m->mask_set += c->mask.data[i] != 0;
            if (differ && m->have_filt && tp) {
                double zc = filt_signif(c, c->filtered.data, tp, i), zg = filt_signif(c, g->filtered.data, tp, i);
                int neg = tp->sign != SF_SIGN_POSITIVE;
                m->mask_marginal += marginal(zc, zg, tp->nsigma, neg) || (tp->flood > 0 && marginal(zc, zg, tp->flood, neg));
            }
        }
        if (m->mask_diff != m->mask_marginal)
            m->ok = 0;
        if (m->mask_diff) { /* marginal pixels move islands: nothing below is comparable */
            m->downstream_skipped = 1;
            return;
        }
    }
    m->nlab_c = c->nlabels;
    m->nlab_g = g->nlabels;
    if (c->have_labels && g->have_labels) {
        for (size_t i = 0; i < n; i++)
            m->lab_diff += c->labels.data[i] != g->labels.data[i];
        if (m->lab_diff || m->nlab_c != m->nlab_g || c->nislands != g->nislands ||
            c->nsplit != g->nsplit || c->nsplit_objects != g->nsplit_objects)
            m->ok = 0;
    }
    if (c->nsources >= 0) {
        if (c->nsources != g->nsources) {
            m->ok = 0;
            return;
        }
        for (int i = 0; i < c->nsources; i++) {
            const sf_source *a = &c->sources[i], *b = &g->sources[i];
#define MAXD(f, field) { double d_ = rel_diff(b->field, a->field); if (d_ > m->f) m->f = d_; }
            MAXD(dx, x)
            MAXD(dy, y)
            MAXD(dflux, flux_sum)
            MAXD(dpeak, peak)
#undef MAXD
            m->npix_diff += a->npix != b->npix || a->id != b->id;
            m->peakpos_diff += a->peak_x != b->peak_x || a->peak_y != b->peak_y;
            measure_more(a, b, m);
        }
        if (m->dx > tol || m->dy > tol || m->dflux > tol || m->dpeak > tol || m->npix_diff ||
            m->peakpos_diff || m->dmore > tol || m->int_diff)
            m->ok = 0;
    }
    if (c->ncomps >= 0) {
        if (c->ncomps != g->ncomps) {
            m->ok = 0;
            return;
        }
        for (int i = 0; i < c->ncomps; i++)
            fit_more(&c->comps[i], &g->comps[i], m);
        if (m->dfit > (tol > 1e-4 ? tol : 1e-4) || m->fit_int_diff)
            m->ok = 0;
    }
}

static void compare_print(const char *file, const sf_run_result *c, const sf_run_result *g,
                          const cmp_result *m, const char *dev, double tol)
{
    printf("%s: %dx%d, cpu vs gpu (%s), tolerance %g\n", file, c->nx, c->ny, dev, tol);
    if (m->have_maps)
        printf("  background  mesh %d px; maps: max |diff|/rms %.3g, max rms rel diff %.3g  %s\n",
               c->box, m->dbkg, m->drms, (m->dbkg <= (tol > 1e-5 ? tol : 1e-5) &&
               m->drms <= (tol > 1e-5 ? tol : 1e-5)) ? "OK" : "DIFFER");
    else if (c->have_bkg)
        printf("  background  median cpu %.9g gpu %.9g (|diff|/sigma %.3g); sigma cpu %.9g gpu %.9g "
               "(rel %.3g); iterations %d/%d  %s\n",
               c->bkg.median, g->bkg.median, m->dmed, c->bkg.sigma, g->bkg.sigma, m->dsig,
               m->niter_c, m->niter_g,
               (m->dmed <= tol && m->dsig <= tol && m->niter_c == m->niter_g) ? "OK" : "DIFFER");
    if (m->have_filt)
        printf("  convolve    %s; relative L2 diff %.3g (largest %.3g filtered sigma)  %s\n",
               c->filter_desc, m->lfilt, m->dfilt, m->lfilt <= 1e-5 ? "OK" : "DIFFER");
    if (c->have_mask)
        printf("  threshold   mask %lld pixels set, %lld differ (%lld within %.0e sigma of a "
               "threshold)  %s\n", m->mask_set, m->mask_diff, m->mask_marginal, MARGIN_SIGMA,
               !m->mask_diff ? "identical" : m->mask_diff == m->mask_marginal ? "OK (marginal)" : "DIFFER");
    if (m->downstream_skipped) {
        printf("  segment, measure: not compared (the masks differ in marginal pixels)\n");
        printf("  result: %s\n", m->ok ? "AGREE" : "DISAGREE");
        return;
    }
    if (c->have_labels && c->nislands == c->nlabels && !c->nsplit)
        printf("  segment     %d/%d islands, %lld label pixels differ  %s\n", m->nlab_c, m->nlab_g,
               m->lab_diff, (m->lab_diff || m->nlab_c != m->nlab_g) ? "DIFFER" : "identical");
    else if (c->have_labels) /* a deblend stage ran and split islands */
        printf("  deblend     %d/%d islands, %d/%d split into %d/%d objects; %d/%d objects, %lld "
               "label pixels differ  %s\n", c->nislands, g->nislands, c->nsplit, g->nsplit,
               c->nsplit_objects, g->nsplit_objects, m->nlab_c, m->nlab_g, m->lab_diff,
               (m->lab_diff || m->nlab_c != m->nlab_g || c->nislands != g->nislands ||
                c->nsplit != g->nsplit || c->nsplit_objects != g->nsplit_objects) ? "DIFFER"
                                                                                 : "identical");
    if (c->nsources >= 0)
        printf("  measure     %d/%d sources; max rel diff x %.3g y %.3g flux_sum %.3g peak %.3g; "
               "npix/id mismatches %lld, peak position mismatches %lld  %s\n",
               c->nsources, g->nsources, m->dx, m->dy, m->dflux, m->dpeak, m->npix_diff,
               m->peakpos_diff,
               (c->nsources == g->nsources && m->dx <= tol && m->dy <= tol && m->dflux <= tol &&
                m->dpeak <= tol && !m->npix_diff && !m->peakpos_diff) ? "OK" : "DIFFER");
    if (c->nsources >= 0 && c->nsources == g->nsources)
        printf("              moments, shape, noise, errors: max rel diff %.3g%s%s; box/flags/npeaks/parent "
               "mismatches %lld  %s\n", m->dmore, m->dmore_col ? " in " : "",
               m->dmore_col ? m->dmore_col : "", m->int_diff,
               (m->dmore <= tol && !m->int_diff) ? "OK" : "DIFFER");
    if (c->ncomps >= 0)
        printf("  fit         %d/%d components; max rel diff %.3g%s%s; island/status/iterations/flags "
               "mismatches %lld  %s\n", c->ncomps, g->ncomps, m->dfit, m->dfit_col ? " in " : "",
               m->dfit_col ? m->dfit_col : "", m->fit_int_diff,
               (c->ncomps == g->ncomps && m->dfit <= (tol > 1e-4 ? tol : 1e-4) && !m->fit_int_diff)
                   ? (m->dfit == 0 ? "identical" : "OK")
                   : "DIFFER");
    printf("  result: %s\n", m->ok ? "AGREE" : "DISAGREE");
}

/* The parameters of the pipeline's threshold step, or NULL. */
static const sf_thresh_params *thr_params(const sf_pipeline *pl)
{
    for (int i = 0; i < pl->nsteps; i++)
        if (!strcmp(pl->steps[i].def->name, "threshold"))
            return (const sf_thresh_params *)pl->steps[i].params;
    return NULL;
}

int cmd_compare(int argc, char **argv)
{
    run_args a;
    sf_pipeline pl;
    sf_gpu *gpu = NULL;
    int first, rc, nfail = 0, ndis = 0;
    if ((rc = parse_args(argc, argv, &a, 1, &first)))
        goto out_args;
    if ((rc = load_pipeline(&a, &pl)))
        goto out_args;
#ifdef _OPENMP
    if (a.threads > 0)
        omp_set_num_threads(a.threads);
#endif
    if (sf_gpu_count() <= a.device || sf_gpu_create(&gpu, a.device)) {
        cli_error("compare needs a CUDA device: %s",
                  sf_gpu_compiled() ? "none found" : "this skyfind was built without CUDA");
        rc = SF_EXIT_FAIL;
        goto out_pipe;
    }
    for (int i = first; i < argc; i++) {
        const char *file = argv[i];
        sf_image img = {0};
        sf_fits_info info;
        sf_run_result rc_cpu, rc_gpu;
        const unsigned keep = SF_KEEP_MASK | SF_KEEP_LABELS | SF_KEEP_BKG | SF_KEEP_FILTERED;
        sf_run_opts oc = {.backend = SF_BACKEND_CPU, .gpu = NULL, .keep = keep};
        sf_run_opts og = {.backend = SF_BACKEND_GPU, .gpu = gpu, .keep = keep};
        cmp_result m;
        sf_status st;
        memset(&info, 0, sizeof info);
        memset(&rc_cpu, 0, sizeof rc_cpu);
        memset(&rc_gpu, 0, sizeof rc_gpu);
        st = read_input(file, &a, NULL, &img, &info);
        if (st == SF_OK)
        {
            set_beam(&oc, &info, img.nx, img.ny);
            set_beam(&og, &info, img.nx, img.ny);
        }
        if (st == SF_OK && (st = sf_pipeline_run(&pl, &img, &oc, &rc_cpu)) == SF_OK)
            st = sf_pipeline_run(&pl, &img, &og, &rc_gpu);
        if (st) {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s", sf_errdetail());
            cli_error("%s%s%s", strstr(msg, file) ? "" : file, strstr(msg, file) ? "" : ": ", msg);
            nfail++;
        } else {
            compare_runs(&rc_cpu, &rc_gpu, thr_params(&pl), a.tol, &m);
            if (a.json) {
                printf("{\"file\":");
                sf_json_str(stdout, file);
                printf(",\"nx\":%d,\"ny\":%d,\"agree\":%s,\"median_diff_sigma\":%.3g,"
                       "\"sigma_rel\":%.3g,\"niter\":[%d,%d],\"mask_diff\":%lld,\"nlabels\":[%d,%d],\"nislands\":[%d,%d],\"nsplit\":[%d,%d],"
                       "\"mask_marginal\":%lld,\"filtered_rel_l2\":%.3g,\"filtered_diff_sigma\":%.3g,\"label_diff\":%lld,\"nsources\":[%d,%d],\"x_rel\":%.3g,\"y_rel\":%.3g,"
                       "\"flux_rel\":%.3g,\"peak_rel\":%.3g,\"ncomps\":[%d,%d],\"fit_rel\":%.3g,\"fit_int_diff\":%lld,"
                       "\"cpu_ms\":%.3f,\"gpu_device_ms\":%.4f}\n",
                       rc_cpu.nx, rc_cpu.ny, m.ok ? "true" : "false", m.dmed, m.dsig, m.niter_c,
                       m.niter_g, m.mask_diff, m.nlab_c, m.nlab_g, rc_cpu.nislands, rc_gpu.nislands,
                       rc_cpu.nsplit, rc_gpu.nsplit, m.mask_marginal, m.lfilt, m.dfilt, m.lab_diff, rc_cpu.nsources,
                       rc_gpu.nsources, m.dx, m.dy, m.dflux, m.dpeak, rc_cpu.ncomps, rc_gpu.ncomps,
                       m.dfit, m.fit_int_diff, rc_cpu.total_ms,
                       rc_gpu.stage_ms[0] + (rc_gpu.nstages > 1 ? rc_gpu.stage_ms[1] : 0) +
                           (rc_gpu.nstages > 2 ? rc_gpu.stage_ms[2] : 0) +
                           (rc_gpu.nstages > 3 ? rc_gpu.stage_ms[3] : 0));
            } else {
                compare_print(file, &rc_cpu, &rc_gpu, &m, sf_gpu_name(gpu), a.tol);
            }
            if (!m.ok)
                ndis++;
        }
        fflush(stdout);
        sf_run_result_free(&rc_cpu);
        sf_run_result_free(&rc_gpu);
        sf_image_free(&img, NULL);
        sf_fits_info_free(&info);
    }
    rc = nfail ? SF_EXIT_FAIL : ndis ? SF_EXIT_DISAGREE : SF_EXIT_OK;
    sf_gpu_destroy(gpu);
out_pipe:
    sf_pipeline_free(&pl);
out_args:
    free(a.sets);
    return rc;
}
