/* `skyfind compare`: run the pipeline on the CPU and on the GPU and compare
 * every stage's output (levels and maps, masks, labels, catalogue columns). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_run.h"
#include "skyfind/gpu.h"

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
} cmp_result;

static void compare_runs(const sf_run_result *c, const sf_run_result *g, double tol, cmp_result *m)
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
    if (c->have_mask && g->have_mask) {
        for (size_t i = 0; i < n; i++) {
            m->mask_diff += c->mask.data[i] != g->mask.data[i];
            m->mask_set += c->mask.data[i];
        }
        if (m->mask_diff)
            m->ok = 0;
    }
    m->nlab_c = c->nlabels;
    m->nlab_g = g->nlabels;
    if (c->have_labels && g->have_labels) {
        for (size_t i = 0; i < n; i++)
            m->lab_diff += c->labels.data[i] != g->labels.data[i];
        if (m->lab_diff || m->nlab_c != m->nlab_g)
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
        }
        if (m->dx > tol || m->dy > tol || m->dflux > tol || m->dpeak > tol || m->npix_diff ||
            m->peakpos_diff)
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
    if (c->have_mask)
        printf("  threshold   mask %lld pixels set, %lld differ  %s\n", m->mask_set, m->mask_diff,
               m->mask_diff ? "DIFFER" : "identical");
    if (c->have_labels)
        printf("  segment     %d/%d islands, %lld label pixels differ  %s\n", m->nlab_c, m->nlab_g,
               m->lab_diff, (m->lab_diff || m->nlab_c != m->nlab_g) ? "DIFFER" : "identical");
    if (c->nsources >= 0)
        printf("  measure     %d/%d sources; max rel diff x %.3g y %.3g flux_sum %.3g peak %.3g; "
               "npix/id mismatches %lld, peak position mismatches %lld  %s\n",
               c->nsources, g->nsources, m->dx, m->dy, m->dflux, m->dpeak, m->npix_diff,
               m->peakpos_diff,
               (c->nsources == g->nsources && m->dx <= tol && m->dy <= tol && m->dflux <= tol &&
                m->dpeak <= tol && !m->npix_diff && !m->peakpos_diff) ? "OK" : "DIFFER");
    printf("  result: %s\n", m->ok ? "AGREE" : "DISAGREE");
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
        sf_run_opts oc = {SF_BACKEND_CPU, NULL, SF_KEEP_MASK | SF_KEEP_LABELS | SF_KEEP_BKG, 0};
        sf_run_opts og = {SF_BACKEND_GPU, gpu, SF_KEEP_MASK | SF_KEEP_LABELS | SF_KEEP_BKG, 0};
        cmp_result m;
        sf_status st;
        memset(&info, 0, sizeof info);
        memset(&rc_cpu, 0, sizeof rc_cpu);
        memset(&rc_gpu, 0, sizeof rc_gpu);
        st = read_input(file, &a, NULL, &img, &info);
        if (st == SF_OK)
            oc.beam_pix = og.beam_pix = beam_pixels(&info, img.nx, img.ny);
        if (st == SF_OK && (st = sf_pipeline_run(&pl, &img, &oc, &rc_cpu)) == SF_OK)
            st = sf_pipeline_run(&pl, &img, &og, &rc_gpu);
        if (st) {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s", sf_errdetail());
            cli_error("%s%s%s", strstr(msg, file) ? "" : file, strstr(msg, file) ? "" : ": ", msg);
            nfail++;
        } else {
            compare_runs(&rc_cpu, &rc_gpu, a.tol, &m);
            if (a.json) {
                printf("{\"file\":");
                sf_json_str(stdout, file);
                printf(",\"nx\":%d,\"ny\":%d,\"agree\":%s,\"median_diff_sigma\":%.3g,"
                       "\"sigma_rel\":%.3g,\"niter\":[%d,%d],\"mask_diff\":%lld,\"nlabels\":[%d,%d],"
                       "\"label_diff\":%lld,\"nsources\":[%d,%d],\"x_rel\":%.3g,\"y_rel\":%.3g,"
                       "\"flux_rel\":%.3g,\"peak_rel\":%.3g,\"cpu_ms\":%.3f,\"gpu_device_ms\":%.4f}\n",
                       rc_cpu.nx, rc_cpu.ny, m.ok ? "true" : "false", m.dmed, m.dsig, m.niter_c,
                       m.niter_g, m.mask_diff, m.nlab_c, m.nlab_g, m.lab_diff, rc_cpu.nsources,
                       rc_gpu.nsources, m.dx, m.dy, m.dflux, m.dpeak, rc_cpu.total_ms,
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
