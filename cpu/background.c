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
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "background_mesh.h"
#include "background_bane.h"

void sf_bkg_params_default(sf_bkg_params *p)
{
    p->method = SF_BKG_GLOBAL;
    p->kappa = 3.0;
    p->maxiter = 100;
    p->box = 64;
    p->step = SF_BANE_STEP_NOBEAM;
    p->filter = 3;
    p->estimator = SF_BKG_EST_SEXTRACTOR;
    p->interp = SF_BKG_INTERP_BICUBIC;
    p->min_valid = 0.5;
}

void sf_bkg_resolve_auto(sf_bkg_params *p, double bmaj_pix, double bmin_pix)
{
    if (p->method == SF_BKG_BANE) {
        double b = bmin_pix > 0 ? sqrt(bmaj_pix * bmin_pix) : bmaj_pix;
        if (p->step == 0)
            p->step = b > 0 ? (int)ceil(SF_BANE_STEP_BEAMS * b - 1e-9) : SF_BANE_STEP_NOBEAM;
        if (p->box == 0)
            p->box = SF_BANE_BOX_STEPS * p->step;
    } else if (p->box == 0) {
        p->box = bmaj_pix > 0 ? (int)lround(4.0 * bmaj_pix) : 64;
    }
    if (p->box < 1)
        p->box = 1;
}

sf_status sf_bkg_check_params(const sf_bkg_params *p)
{
    if (p->method != SF_BKG_GLOBAL && p->method != SF_BKG_MESH && p->method != SF_BKG_BANE)
        return sf_fail(SF_ERR_PARAM, "background method %d is not available", p->method);
    if (!(p->kappa > 0) || !isfinite(p->kappa))
        return sf_fail(SF_ERR_PARAM, "background kappa %g must be a positive number", p->kappa);
    if (p->maxiter < 1)
        return sf_fail(SF_ERR_PARAM, "background maxiter %d must be at least 1", p->maxiter);
    if (p->method == SF_BKG_MESH)
        return sf_bkg_mesh_check_params(p);
    if (p->method == SF_BKG_BANE) {
        if (p->box < 1)
            return sf_fail(SF_ERR_PARAM, "background box %d must be at least 1 pixel", p->box);
        if (p->step < 1)
            return sf_fail(SF_ERR_PARAM, "background step %d must be at least 1 pixel", p->step);
    }
    return SF_OK;
}

/* method=global sorts the finite pixels once, by their floats'
 * order-preserving keys (sf_fkey: an LSD radix sort of 11, 11 and 10 bits,
 * in parallel and stable, so the sorted array is the same whatever the
 * number of threads). Then every iteration is cheap: the clipped set is a
 * range [a, b) of the sorted keys (two binary searches), its median is read
 * at its middle ranks and its extremes at its ends; the sums of v - shift
 * and of their squares (shift: the median of all the finite pixels, so the
 * sums do not cancel; sigma^2 = s2/n - (s/n)^2, as gpu/background.cu
 * computes it with its own shift) are taken once over the whole range, in
 * BKG_CHUNKS fixed slices summed in a fixed order, and each iteration
 * subtracts the few values it clips at the two ends. */
#define BKG_CHUNKS 64
#define BKG_BINS 2048

/* One stable pass of the radix sort: src -> dst by the digit (key >> shift)
 * & mask, in nth contiguous parts (cnt: nth * BKG_BINS counters). */
static void radix_pass(const uint32_t *src, uint32_t *dst, size_t n, int shift, uint32_t mask, int nth,
                       size_t *cnt)
{
    memset(cnt, 0, (size_t)nth * BKG_BINS * sizeof *cnt);
#pragma omp parallel num_threads(nth)
    {
        int t = 0, team = 1; /* the team may be smaller than asked: its size decides the parts */
#ifdef _OPENMP
        t = omp_get_thread_num();
        team = omp_get_num_threads();
#endif
        size_t *c = cnt + (size_t)t * BKG_BINS;
        const size_t i0 = n * (size_t)t / (size_t)team, i1 = n * (size_t)(t + 1) / (size_t)team;
        for (size_t i = i0; i < i1; i++)
            c[(src[i] >> shift) & mask]++;
#pragma omp barrier
#pragma omp single
        {
            size_t run = 0;
            for (uint32_t d = 0; d <= mask; d++)
                for (int u = 0; u < team; u++) {
                    size_t k = cnt[(size_t)u * BKG_BINS + d];
                    cnt[(size_t)u * BKG_BINS + d] = run;
                    run += k;
                }
        }
        for (size_t i = i0; i < i1; i++)
            dst[c[(src[i] >> shift) & mask]++] = src[i];
    }
}

/* Sum of v - shift over the sorted keys [i0, i1), and in *sq of its square,
 * in four interleaved partials added in a fixed order. */
static double range_sum(const uint32_t *k, size_t i0, size_t i1, float shift, double *sq)
{
    double q[4] = {0, 0, 0, 0}, q2[4] = {0, 0, 0, 0};
    const double sh = (double)shift;
    size_t i = i0;
    for (; i + 4 <= i1; i += 4)
        for (int j = 0; j < 4; j++) {
            const double d = (double)sf_fkey_value(k[i + j]) - sh;
            q[j] += d;
            q2[j] += d * d;
        }
    for (int j = 0; i < i1; i++, j++) {
        const double d = (double)sf_fkey_value(k[i]) - sh;
        q[j] += d;
        q2[j] += d * d;
    }
    *sq = (q2[0] + q2[1]) + (q2[2] + q2[3]);
    return (q[0] + q[1]) + (q[2] + q[3]);
}

/* First index i in [lo, hi) of the sorted keys whose value is > v (gt) or
 * >= v (!gt); hi if none. */
static size_t key_bound(const uint32_t *k, size_t lo, size_t hi, float v, int gt)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        float x = sf_fkey_value(k[mid]);
        if (gt ? x > v : x >= v)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

sf_status sf_background_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                            sf_image *bkg, sf_image *rms)
{
    sf_status s = sf_bkg_check_params(p);
    size_t n = sf_npix(img->nx, img->ny), m = 0, a, b, nprev = 0;
    uint32_t *keys = NULL, *tmp = NULL;
    size_t *cnt = NULL, *rowcnt = NULL;
    double csum[BKG_CHUNKS], css[BKG_CHUNKS], sum = 0, ss = 0;
    int nth = 1;
    float shift;
    sf_bkg_stats r;
    const float kf = (float)p->kappa;

    if (s)
        return s;
    if (p->method == SF_BKG_MESH)
        return sf_background_mesh_cpu(img, p, st, bkg, rms);
    if (p->method == SF_BKG_BANE)
        return sf_background_bane_cpu(img, p, st, bkg, rms);
    if (img->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs a host image");
    memset(&r, 0, sizeof r);
#ifdef _OPENMP
    nth = omp_get_max_threads();
#endif
    keys = malloc(n * sizeof *keys);
    tmp = malloc(n * sizeof *tmp);
    cnt = malloc((size_t)nth * BKG_BINS * sizeof *cnt);
    rowcnt = calloc((size_t)img->ny + 1, sizeof *rowcnt);
    if (!keys || !tmp || !cnt || !rowcnt) {
        s = sf_fail(SF_ERR_NOMEM, "background: %zu bytes of work space", 2 * n * sizeof(float));
        goto fail;
    }
    /* the finite pixels' keys, in raster order: each row's count, then each
     * row copied to its place */
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int y = 0; y < img->ny; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        size_t c = 0;
        for (int x = 0; x < img->nx; x++)
            c += isfinite(row[x]) != 0;
        rowcnt[y + 1] = c;
    }
    for (int y = 0; y < img->ny; y++)
        rowcnt[y + 1] += rowcnt[y];
    m = rowcnt[img->ny];
    r.nvalid = (long long)m;
    if (m == 0) {
        s = sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels");
        goto fail;
    }
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int y = 0; y < img->ny; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        uint32_t *o = tmp + rowcnt[y];
        for (int x = 0; x < img->nx; x++)
            if (isfinite(row[x]))
                *o++ = sf_fkey(row[x]);
    }
    radix_pass(tmp, keys, m, 0, 2047u, nth, cnt);
    radix_pass(keys, tmp, m, 11, 2047u, nth, cnt);
    radix_pass(tmp, keys, m, 22, 1023u, nth, cnt);
    shift = sf_fkey_value(keys[m / 2]);
    a = 0;
    b = m;
    for (int it = 1;; it++) {
        size_t nn, a0 = a, b0 = b;
        double dn, dm, var;
        float med, sig, mn, mx, m0, m1;
        if (it > 1) { /* the clipped set: the keys with lo < v < hi */
            volatile float ks = kf * (float)r.sigma;
            const float lo = (float)r.median - ks, hi = (float)r.median + ks;
            a = key_bound(keys, a, b, lo, 1);
            b = key_bound(keys, a, b, hi, 0);
        }
        nn = b - a;
        if (nn == 0) {
            s = sf_fail(SF_ERR_EMPTY, "background: clipping removed every pixel (sigma is 0?)");
            goto fail;
        }
        if (it > 1 && nn == nprev) { /* the last iteration clipped nothing */
            r.converged = 1;
            break;
        }
        if (it > p->maxiter)
            break;
        if (it == 1) { /* the sums of v - shift and (v - shift)^2 over the range */
            sum = ss = 0;
#pragma omp parallel for schedule(static) num_threads(nth)
            for (int c = 0; c < BKG_CHUNKS; c++) {
                const size_t i0 = nn * (size_t)c / BKG_CHUNKS, i1 = nn * (size_t)(c + 1) / BKG_CHUNKS;
                csum[c] = range_sum(keys, i0, i1, shift, &css[c]);
            }
            for (int c = 0; c < BKG_CHUNKS; c++) {
                sum += csum[c];
                ss += css[c];
            }
        } else { /* less what this iteration clipped at both ends */
            double q2a, q2b;
            sum -= range_sum(keys, a0, a, shift, &q2a) + range_sum(keys, b, b0, shift, &q2b);
            ss -= q2a + q2b;
        }
        mn = sf_fkey_value(keys[a]);
        mx = sf_fkey_value(keys[b - 1]);
        dn = (double)nn;
        dm = sum / dn;
        var = ss / dn - dm * dm;
        r.mean = mn == mx ? (double)mn : (double)shift + dm;
        r.sigma = mn == mx ? 0.0 : (double)(float)sqrt(var > 0 ? var : 0.0);
        /* the median: ranks (nn - 1) / 2 and nn / 2 of the range */
        m0 = sf_fkey_value(keys[a + (nn - 1) / 2]);
        m1 = sf_fkey_value(keys[a + nn / 2]);
        if (m1 == 0.0f)
            m1 = 0.0f; /* -0 and +0: +0 */
        if (nn % 2) {
            med = m1;
        } else { /* numpy: the float32 mean of the two middle values */
            volatile float s2 = m0 + m1;
            med = s2 / 2.0f;
        }
        r.median = med;
        r.nused = (long long)nn;
        r.niter = it;
        nprev = nn;
        sig = (float)r.sigma;
        if (sig == 0.0f) { /* constant data: nothing left to clip */
            r.converged = 1;
            break;
        }
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
    free(keys);
    free(tmp);
    free(cnt);
    free(rowcnt);
    return s;
}
