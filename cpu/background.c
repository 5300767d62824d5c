/* Stage `background`, CPU twin. method=global: iterative kappa-sigma clipping
 * around the median to convergence, exactly as the GPU-programming lesson's
 * numpy code (median of the current set, population std, keep
 * median - k*std < v < median + k*std, stop when nothing is clipped).
 * Bounds are formed in float32 as numpy does with float32 data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/background.h"
#include "fixsum.h"
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
    float *set = NULL;
    double sum = 0, sp[4] = {0, 0, 0, 0}; /* four partial sums by index mod 4 */
    sf_bkg_stats r;
    /* four interleaved copies of each histogram: a run of equal digits (the
     * sky near its median) would otherwise chain every increment on one
     * counter */
    static _Thread_local size_t h1[4][2048], h2[4][2048], h3[4][1024];
    const float kf = (float)p->kappa;

    if (s)
        return s;
    if (p->method == SF_BKG_MESH)
        return sf_background_mesh_cpu(img, p, st, bkg, rms);
    if (img->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs a host image");
    memset(&r, 0, sizeof r);
    set = malloc(n * sizeof *set);
    if (!set) {
        s = sf_fail(SF_ERR_NOMEM, "background: %zu bytes of work space", n * sizeof(float));
        goto fail;
    }
    /* The median by an exact radix selection on the order-preserving keys
     * (digits of 11, 11 and 10 bits): the first digit's histogram and the
     * sum are taken while the set is written (the copy of the finite pixels,
     * then each clipping pass), the second beside the sum of squares, the
     * third in a pass of its own; three passes over the set an iteration.
     * Each sum is four partial sums (by index mod 4) added in a fixed order:
     * the same result on every machine, without one long chain of additions. */
    memset(h1, 0, sizeof h1);
    for (size_t y = 0; y < (size_t)img->ny; y++)
        for (size_t x = 0; x < (size_t)img->nx; x++) {
            float v = img->data[y * img->stride + x];
            if (isfinite(v)) {
                h1[m & 3][sf_fkey(v) >> 21]++;
                sp[m & 3] += v;
                set[m++] = v;
            }
        }
    r.nvalid = (long long)m;
    if (m == 0) {
        s = sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels");
        goto fail;
    }
    for (int it = 1; it <= p->maxiter; it++) {
        double ss = 0, sq[4] = {0, 0, 0, 0}, mean;
        size_t kept = 0, under = 0, k = m / 2;
        uint32_t b1 = 0, b2 = 0, b3 = 0, p22, khi, lomax = 0;
        float med, sig, lo, hi;
        for (int q = 1; q < 4; q++)
            for (int d = 0; d < 2048; d++)
                h1[0][d] += h1[q][d];
        while (under + h1[0][b1] <= k)
            under += h1[0][b1++];
        sum = (sp[0] + sp[1]) + (sp[2] + sp[3]);
        mean = sum / (double)m;
        memset(h2, 0, sizeof h2);
        for (size_t i = 0; i < m; i++) {
            const float v = set[i];
            const uint32_t key = sf_fkey(v);
            double d = v - mean;
            sq[i & 3] += d * d;
            if (key >> 21 == b1)
                h2[i & 3][(key >> 10) & 2047u]++;
        }
        for (int q = 1; q < 4; q++)
            for (int d = 0; d < 2048; d++)
                h2[0][d] += h2[q][d];
        ss = (sq[0] + sq[1]) + (sq[2] + sq[3]);
        while (under + h2[0][b2] <= k)
            under += h2[0][b2++];
        p22 = (b1 << 21) | (b2 << 10);
        memset(h3, 0, sizeof h3);
        for (size_t i = 0; i < m; i++) {
            const uint32_t key = sf_fkey(set[i]);
            if ((key & ~1023u) == p22)
                h3[i & 3][key & 1023u]++;
            else if (key < p22 && key > lomax)
                lomax = key; /* the largest key below the last digit's range */
        }
        for (int q = 1; q < 4; q++)
            for (int d = 0; d < 1024; d++)
                h3[0][d] += h3[q][d];
        while (under + h3[0][b3] <= k)
            under += h3[0][b3++];
        khi = p22 | b3;
        hi = sf_fkey_value(khi);
        if (hi == 0.0f)
            hi = 0.0f; /* -0 and +0: +0 */
        if (m % 2) {
            med = hi;
        } else { /* numpy: the float32 mean of the two middle values */
            if (under < k) {
                lo = hi; /* the lower middle equals the upper */
            } else {
                uint32_t kl = lomax;
                for (uint32_t d = b3; d-- > 0;)
                    if (h3[0][d]) {
                        kl = p22 | d;
                        break;
                    }
                lo = sf_fkey_value(kl);
            }
            volatile float s2 = lo + hi;
            med = s2 / 2.0f;
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
        sp[0] = sp[1] = sp[2] = sp[3] = 0;
        memset(h1, 0, sizeof h1);
        for (size_t i = 0; i < m; i++) {
            const float v = set[i];
            if (v > lo && v < hi) {
                h1[kept & 3][sf_fkey(v) >> 21]++;
                sp[kept & 3] += v;
                set[kept++] = v;
            }
        }
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
    return s;
}
