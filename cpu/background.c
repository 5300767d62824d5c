/* Stage `background`, CPU twin. method=global: iterative kappa-sigma clipping
 * around the median to convergence, exactly as the GPU-programming lesson's
 * numpy code (median of the current set, population std, keep
 * median - k*std < v < median + k*std, stop when nothing is clipped).
 * Bounds are formed in float32 as numpy does with float32 data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/background.h"
#include "select.h"
#include "background_mesh.h"

void sf_bkg_params_default(sf_bkg_params *p)
{
    p->method = SF_BKG_GLOBAL;
    p->kappa = 3.0;
    p->maxiter = 100;
    p->box = 64;
    p->filter = 3;
    p->estimator = SF_BKG_EST_SEXTRACTOR;
    p->interp = SF_BKG_INTERP_BICUBIC;
    p->min_valid = 0.5;
}

sf_status sf_bkg_check_params(const sf_bkg_params *p)
{
    if (p->method != SF_BKG_GLOBAL && p->method != SF_BKG_MESH)
        return sf_fail(SF_ERR_PARAM, "background method %d is not available", p->method);
    if (!(p->kappa > 0) || !isfinite(p->kappa))
        return sf_fail(SF_ERR_PARAM, "background kappa %g must be a positive number", p->kappa);
    if (p->maxiter < 1)
        return sf_fail(SF_ERR_PARAM, "background maxiter %d must be at least 1", p->maxiter);
    if (p->method == SF_BKG_MESH)
        return sf_bkg_mesh_check_params(p);
    return SF_OK;
}

sf_status sf_background_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                            sf_image *bkg, sf_image *rms)
{
    sf_status s = sf_bkg_check_params(p);
    size_t n = sf_npix(img->nx, img->ny), m = 0;
    float *set = NULL, *work = NULL;
    sf_bkg_stats r;
    const float kf = (float)p->kappa;

    if (s)
        return s;
    if (p->method == SF_BKG_MESH)
        return sf_background_mesh_cpu(img, p, st, bkg, rms);
    if (img->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs a host image");
    memset(&r, 0, sizeof r);
    set = malloc(n * sizeof *set);
    work = malloc(n * sizeof *work);
    if (!set || !work) {
        s = sf_fail(SF_ERR_NOMEM, "background: %zu bytes of work space", 2 * n * sizeof(float));
        goto fail;
    }
    for (size_t y = 0; y < (size_t)img->ny; y++)
        for (size_t x = 0; x < (size_t)img->nx; x++) {
            float v = img->data[y * img->stride + x];
            if (isfinite(v))
                set[m++] = v;
        }
    r.nvalid = (long long)m;
    if (m == 0) {
        s = sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels");
        goto fail;
    }
    for (int it = 1; it <= p->maxiter; it++) {
        double sum = 0, ss = 0, mean;
        size_t kept = 0;
        float med, sig, lo, hi;
        memcpy(work, set, m * sizeof *work);
        med = sf_median_f32(work, m);
        for (size_t i = 0; i < m; i++)
            sum += set[i];
        mean = sum / (double)m;
        for (size_t i = 0; i < m; i++) {
            double d = set[i] - mean;
            ss += d * d;
        }
        r.median = med;
        r.mean = mean;
        r.sigma = (float)sqrt(ss / (double)m);
        r.nused = (long long)m;
        r.niter = it;
        sig = (float)r.sigma;
        {   /* float32 bounds, each operation rounded as numpy does */
            volatile float ks = kf * sig;
            lo = med - ks;
            hi = med + ks;
        }
        if (sig == 0.0f) { /* constant data: nothing left to clip */
            r.converged = 1;
            break;
        }
        for (size_t i = 0; i < m; i++)
            if (set[i] > lo && set[i] < hi)
                set[kept++] = set[i];
        if (kept == m) {
            r.converged = 1;
            break;
        }
        if (kept == 0) {
            s = sf_fail(SF_ERR_EMPTY, "background: clipping removed every pixel (sigma is 0?)");
            goto fail;
        }
        m = kept;
    }
    if (bkg || rms) {
        for (size_t i = 0; i < n; i++) {
            if (bkg)
                bkg->data[i] = (float)r.median;
            if (rms)
                rms->data[i] = (float)r.sigma;
        }
    }
    *st = r;
fail:
    free(set);
    free(work);
    return s;
}
