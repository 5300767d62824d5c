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

/* method=global works on the finite pixels in BKG_CHUNKS fixed slices of the
 * image (slice c of the pixel range, compacted in place in its own part of
 * the work array), so every sum is the same fixed-order combination of the
 * slices' sums whatever the number of threads. The median comes from an
 * exact radix selection on the floats' order-preserving keys (digits of 11,
 * 11 and 10 bits): the first digit's histogram and the sum are taken while
 * the set is written (the copy of the finite pixels, then each clipping
 * pass), the second beside the sum of squares, the third in a pass of its
 * own; three passes over the set an iteration. Histograms are per thread,
 * in four interleaved copies (a run of equal digits, the sky near its
 * median, would otherwise chain every increment on one counter). */
#define BKG_CHUNKS 64

typedef struct {
    size_t h[4][2048];
} bkg_hist;

/* Merge the threads' histograms of nb bins into out, then the digit that
 * holds the k-th smallest key: *under counts the keys below it. */
static uint32_t hist_digit(const bkg_hist *th, int nth, int nb, size_t *out, size_t k,
                           size_t *under)
{
    uint32_t b = 0;
    for (int d = 0; d < nb; d++) {
        size_t c = 0;
        for (int t = 0; t < nth; t++)
            c += th[t].h[0][d] + th[t].h[1][d] + th[t].h[2][d] + th[t].h[3][d];
        out[d] = c;
    }
    while (*under + out[b] <= k)
        *under += out[b++];
    return b;
}

/* The calling thread's histograms. */
static size_t (*thread_hist(bkg_hist *th))[2048]
{
#ifdef _OPENMP
    return th[omp_get_thread_num()].h;
#else
    return th[0].h;
#endif
}

/* Keep v as the k-th value of a slice: store it, count its first digit,
 * add it to the partial sums. */
static inline void keep(float v, float *out, size_t *k, size_t (*h)[2048], double *q)
{
    h[*k & 3][sf_fkey(v) >> 21]++;
    q[*k & 3] += v;
    out[(*k)++] = v;
}

/* Sum of four partials, in a fixed order. */
static double sum4(const double *q) { return (q[0] + q[1]) + (q[2] + q[3]); }

sf_status sf_background_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                            sf_image *bkg, sf_image *rms)
{
    sf_status s = sf_bkg_check_params(p);
    size_t n = sf_npix(img->nx, img->ny), m = 0;
    size_t cbeg[BKG_CHUNKS + 1], clen[BKG_CHUNKS], hist[2048];
    double csum[BKG_CHUNKS], css[BKG_CHUNKS];
    uint32_t clomax[BKG_CHUNKS], cbelow[BKG_CHUNKS];
    size_t ccand[BKG_CHUNKS];
    float *set = NULL, *cand = NULL;
    bkg_hist *th = NULL;
    int nth = 1;
    sf_bkg_stats r;
    const float kf = (float)p->kappa;

    if (s)
        return s;
    if (p->method == SF_BKG_MESH)
        return sf_background_mesh_cpu(img, p, st, bkg, rms);
    if (img->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs a host image");
    memset(&r, 0, sizeof r);
#ifdef _OPENMP
    nth = omp_get_max_threads();
#endif
    set = malloc(n * sizeof *set);
    cand = malloc(n * sizeof *cand);
    th = calloc((size_t)nth, sizeof *th);
    if (!set || !cand || !th) {
        s = sf_fail(SF_ERR_NOMEM, "background: %zu bytes of work space", 2 * n * sizeof(float));
        goto fail;
    }
    for (int c = 0; c <= BKG_CHUNKS; c++)
        cbeg[c] = n / BKG_CHUNKS * (size_t)c + (n % BKG_CHUNKS) * (size_t)c / BKG_CHUNKS;
#pragma omp parallel num_threads(nth)
    {
        size_t(*h)[2048] = thread_hist(th);
#pragma omp for schedule(static)
        for (int c = 0; c < BKG_CHUNKS; c++) {
            double q[4] = {0, 0, 0, 0};
            size_t k = 0;
            float *out = set + cbeg[c];
            size_t y = cbeg[c] / (size_t)img->nx, x = cbeg[c] % (size_t)img->nx;
            for (size_t i = cbeg[c]; i < cbeg[c + 1]; i++) {
                const float v = img->data[y * img->stride + x];
                if (++x == (size_t)img->nx) {
                    x = 0;
                    y++;
                }
                if (isfinite(v))
                    keep(v, out, &k, h, q);
            }
            clen[c] = k;
            csum[c] = sum4(q);
        }
    }
    for (int c = 0; c < BKG_CHUNKS; c++)
        m += clen[c];
    r.nvalid = (long long)m;
    if (m == 0) {
        s = sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels");
        goto fail;
    }
    for (int it = 1; it <= p->maxiter; it++) {
        double ss = 0, sum = 0, mean;
        size_t kept = 0, under = 0, k = m / 2;
        uint32_t b1 = 0, b2 = 0, b3 = 0, p22, khi, lomax = 0;
        float med, sig, lo, hi;
        b1 = hist_digit(th, nth, 2048, hist, k, &under);
        for (int c = 0; c < BKG_CHUNKS; c++)
            sum += csum[c];
        mean = sum / (double)m;
        /* pass A: the sum of squares, the second digit; the values in the
         * median's first-digit bin (the candidates) copied aside, and the
         * largest key below that bin */
        memset(th, 0, (size_t)nth * sizeof *th);
#pragma omp parallel num_threads(nth)
        {
            size_t(*h)[2048] = thread_hist(th);
#pragma omp for schedule(static)
            for (int c = 0; c < BKG_CHUNKS; c++) {
                double q[4] = {0, 0, 0, 0};
                const float *a = set + cbeg[c];
                float *cd = cand + cbeg[c];
                size_t nc = 0;
                uint32_t lm = 0;
                for (size_t i = 0; i < clen[c]; i++) {
                    const float v = a[i];
                    const uint32_t key = sf_fkey(v);
                    const double d = v - mean;
                    q[i & 3] += d * d;
                    if (key >> 21 == b1) {
                        h[i & 3][(key >> 10) & 2047u]++;
                        cd[nc++] = v;
                    } else if (key >> 21 < b1 && key > lm) {
                        lm = key;
                    }
                }
                css[c] = sum4(q);
                ccand[c] = nc;
                cbelow[c] = lm;
            }
        }
        for (int c = 0; c < BKG_CHUNKS; c++)
            ss += css[c];
        b2 = hist_digit(th, nth, 2048, hist, k, &under);
        p22 = (b1 << 21) | (b2 << 10);
        /* pass B, over the candidates only: the last digit, and the largest
         * key below its range (below the first-digit bin: from pass A) */
        memset(th, 0, (size_t)nth * sizeof *th);
#pragma omp parallel num_threads(nth)
        {
            size_t(*h)[2048] = thread_hist(th);
#pragma omp for schedule(static)
            for (int c = 0; c < BKG_CHUNKS; c++) {
                uint32_t lm = cbelow[c];
                const float *a = cand + cbeg[c];
                for (size_t i = 0; i < ccand[c]; i++) {
                    const uint32_t key = sf_fkey(a[i]);
                    if ((key & ~1023u) == p22)
                        h[i & 3][key & 1023u]++;
                    else if (key < p22 && key > lm)
                        lm = key;
                }
                clomax[c] = lm;
            }
        }
        for (int c = 0; c < BKG_CHUNKS; c++)
            lomax = clomax[c] > lomax ? clomax[c] : lomax;
        b3 = hist_digit(th, nth, 1024, hist, k, &under);
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
                    if (hist[d]) {
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
        /* pass C: clip (each slice in place), the next sums and first digit */
        memset(th, 0, (size_t)nth * sizeof *th);
#pragma omp parallel num_threads(nth)
        {
            size_t(*h)[2048] = thread_hist(th);
#pragma omp for schedule(static)
            for (int c = 0; c < BKG_CHUNKS; c++) {
                double q[4] = {0, 0, 0, 0};
                float *a = set + cbeg[c];
                size_t kk = 0;
                for (size_t i = 0; i < clen[c]; i++) {
                    const float v = a[i];
                    if (v > lo && v < hi)
                        keep(v, a, &kk, h, q);
                }
                clen[c] = kk;
                csum[c] = sum4(q);
            }
        }
        for (int c = 0; c < BKG_CHUNKS; c++)
            kept += clen[c];
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
    free(cand);
    free(th);
    return s;
}
