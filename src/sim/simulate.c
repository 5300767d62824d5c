/* skyfind's sky simulator (`skyfind simulate`): Gaussian noise in Jy/beam (white,
 * or convolved with the beam) plus point and extended Gaussian sources convolved
 * with the elliptical restoring beam, bit-identical for a seed, with a truth
 * catalogue and an atomic FITS+CSV writer. Sections, in order: defaults;
 * the random numbers (splitmix64 seeding xoshiro256**); the parameter
 * checks; geometry (Gaussian covariances, rendering, world positions); the
 * simulation (source counts and draws, white and beam-correlated noise,
 * sf_simulate); writing (temporary names, FITS, truth CSV,
 * sf_simulate_write). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fitsio.h>
#include <wcslib/wcslib.h>
#include "skyfind/catalog.h"
#include "skyfind/simulate.h"

#ifndef SKYFIND_VERSION
#define SKYFIND_VERSION "unknown"
#endif
#define SF_SIM_PI 3.14159265358979323846
#define SF_SIM_FWHM2SIG 0.42466090014400953 /* 1 / (2 sqrt(2 ln 2)) */
#define SF_SIM_MAX_NSRC 10000000
#define SF_SIM_MARGIN_BEAMS 3.0  /* sources stay this many beam FWHM from the edges */
#define SF_SIM_AUTO_BEAMS 40.0   /* auto nsrc: one source per (40 * bmaj_pix)^2 pixels */
#define SF_SIM_CUT_NOISE 1e-3    /* render a source until it falls below 1e-3 * noise */
#define SF_SIM_TAG_NOISE 0x6e6f697365ULL /* stream tags: "noise", "srcs" */
#define SF_SIM_TAG_SRC 0x73726373ULL
#define SF_SIM_TAG_PAIR 0x7061697273ULL /* "pairs" */
#define SF_SIM_TAG_CNOISE 0x636e6f697365ULL /* "cnoise": the white noise under corr_noise */
#define SF_SIM_CORR_KMAX 4.0     /* correlated noise: kernel truncated at 4 sigma (q <= 16) */
#define SF_SIM_CORR_BLOCK 128    /* correlated noise: output rows per work item */

void sf_sim_params_default(sf_sim_params *p)
{
    memset(p, 0, sizeof *p);
    p->nx = 1024;
    p->ny = 1024;
    p->seed = 1;
    p->nsrc = -1;
    p->noise = 1e-4;
    p->snr_min = 3.0;
    p->snr_max = 300.0;
    p->ext_frac = 0.2;
    p->pix_arcsec = 2.0;
    p->bmaj_arcsec = 10.0;
    p->bmin_arcsec = 7.0;
    p->bpa_deg = 30.0;
    p->ra_deg = 150.0;
    p->dec_deg = -30.0;
    p->freq_hz = 1.4e9;
    p->npairs = 0;
    p->pair_sep_min = 0.5;
    p->pair_sep_max = 3.0;
    p->pair_ratio_max = 10.0;
}

/* ---- deterministic random numbers: splitmix64 seeds xoshiro256** ---------- */

typedef struct { uint64_t s[4]; } sf_sim_rng;

static uint64_t sf_sim_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* One independent stream per (seed, tag, index): rows of noise get their own
 * stream, so the image does not depend on the number of threads. */
static void sf_sim_rng_init(sf_sim_rng *r, uint64_t seed, uint64_t tag, uint64_t index)
{
    uint64_t x = seed;
    uint64_t a = sf_sim_splitmix(&x);
    x = a ^ (tag * 0xd1342543de82ef95ULL);
    uint64_t b = sf_sim_splitmix(&x);
    x = b + index * 0xda942042e4dd58b5ULL;
    for (int i = 0; i < 4; i++)
        r->s[i] = sf_sim_splitmix(&x);
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
        r->s[0] = 1;
}

static inline uint64_t sf_sim_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t sf_sim_next(sf_sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t res = sf_sim_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = sf_sim_rotl(s[3], 45);
    return res;
}

static inline double sf_sim_uniform(sf_sim_rng *r) /* [0, 1) */
{
    return (double)(sf_sim_next(r) >> 11) * 0x1.0p-53;
}

/* Marsaglia's polar method: two N(0,1) deviates per accepted pair. It needs only
 * sqrt (exact in IEEE) and log, which keeps results reproducible across machines. */
static inline void sf_sim_normal2(sf_sim_rng *r, double *g1, double *g2)
{
    double u, v, s;
    do {
        u = (double)(int64_t)(sf_sim_next(r) >> 11) * 0x1.0p-52 - 1.0;
        v = (double)(int64_t)(sf_sim_next(r) >> 11) * 0x1.0p-52 - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * log(s) / s);
    *g1 = u * f;
    *g2 = v * f;
}

/* ---- parameters ------------------------------------------------------------ */

static sf_status sf_sim_check(const sf_sim_params *p)
{
    if (p->nx < 1 || p->nx > 65536)
        return sf_fail(SF_ERR_PARAM, "simulate: nx = %d must be in [1, 65536]", p->nx);
    if (p->ny < 1 || p->ny > 65536)
        return sf_fail(SF_ERR_PARAM, "simulate: ny = %d must be in [1, 65536]", p->ny);
    if (!(p->noise > 0) || !isfinite(p->noise))
        return sf_fail(SF_ERR_PARAM, "simulate: noise = %g Jy/beam must be > 0", p->noise);
    if (!(p->bmin_arcsec > 0) || !isfinite(p->bmin_arcsec))
        return sf_fail(SF_ERR_PARAM, "simulate: bmin = %g arcsec must be > 0", p->bmin_arcsec);
    if (!(p->bmaj_arcsec >= p->bmin_arcsec) || !isfinite(p->bmaj_arcsec))
        return sf_fail(SF_ERR_PARAM, "simulate: bmaj = %g arcsec must be >= bmin = %g arcsec",
                       p->bmaj_arcsec, p->bmin_arcsec);
    if (!isfinite(p->bpa_deg))
        return sf_fail(SF_ERR_PARAM, "simulate: bpa = %g deg must be finite", p->bpa_deg);
    if (!(p->pix_arcsec > 0) || !isfinite(p->pix_arcsec))
        return sf_fail(SF_ERR_PARAM, "simulate: pix = %g arcsec must be > 0", p->pix_arcsec);
    if (!(p->snr_min > 0) || !isfinite(p->snr_min))
        return sf_fail(SF_ERR_PARAM, "simulate: snr_min = %g must be > 0", p->snr_min);
    if (!(p->snr_max >= p->snr_min) || !isfinite(p->snr_max))
        return sf_fail(SF_ERR_PARAM, "simulate: snr_max = %g must be >= snr_min = %g",
                       p->snr_max, p->snr_min);
    if (!(p->ext_frac >= 0 && p->ext_frac <= 1))
        return sf_fail(SF_ERR_PARAM, "simulate: ext_frac = %g must be in [0, 1]", p->ext_frac);
    if (p->npairs < 0 || p->npairs > 10000000)
        return sf_fail(SF_ERR_PARAM, "simulate: pairs = %d must be in [0, 10000000]", p->npairs);
    if (!(p->pair_sep_min >= 0) || !(p->pair_sep_max >= p->pair_sep_min) || !isfinite(p->pair_sep_max))
        return sf_fail(SF_ERR_PARAM, "simulate: pair separations %g..%g FWHM must satisfy 0 <= min <= max",
                       p->pair_sep_min, p->pair_sep_max);
    if (!(p->pair_ratio_max >= 1) || !isfinite(p->pair_ratio_max))
        return sf_fail(SF_ERR_PARAM, "simulate: pair flux ratio %g must be >= 1", p->pair_ratio_max);
    if (!(fabs(p->dec_deg) <= 90))
        return sf_fail(SF_ERR_PARAM, "simulate: dec = %g deg must be in [-90, 90]", p->dec_deg);
    if (!isfinite(p->ra_deg))
        return sf_fail(SF_ERR_PARAM, "simulate: ra = %g deg must be finite", p->ra_deg);
    if (!(p->freq_hz > 0) || !isfinite(p->freq_hz))
        return sf_fail(SF_ERR_PARAM, "simulate: freq = %g Hz must be > 0", p->freq_hz);
    if (p->corr_noise != 0 && p->corr_noise != 1)
        return sf_fail(SF_ERR_PARAM, "simulate: corr_noise = %d must be 0 (white) or 1 (beam)",
                       p->corr_noise);
    if (p->nsrc > SF_SIM_MAX_NSRC)
        return sf_fail(SF_ERR_PARAM, "simulate: nsrc = %d must be <= %d", p->nsrc,
                       SF_SIM_MAX_NSRC);
    /* SIN maps only the hemisphere around the pointing: the corners of the image must
     * lie within 1 radian (in projection-plane units) of the reference pixel. */
    double half = p->pix_arcsec / 3600.0 * hypot(p->nx / 2 + 1.0, p->ny / 2 + 1.0);
    if (half >= 180.0 / SF_SIM_PI)
        return sf_fail(SF_ERR_PARAM,
                       "simulate: a %dx%d image of %g arcsec pixels spans too much sky for "
                       "the SIN projection (half-diagonal %.1f deg)",
                       p->nx, p->ny, p->pix_arcsec, half);
    return SF_OK;
}

/* CRPIX (1-based) of the image centre: nx/2 + 1, as CASA/WSClean place the
 * reference pixel, so 0-based pixel nx/2 (integer division) is the pointing. */
static double sf_sim_crpix(int n) { return (double)(n / 2) + 1.0; }

/* ---- geometry ---------------------------------------------------------------
 * Pixel axes: x grows to the west (CDELT1 < 0: RA decreases with x), y to the
 * north. A position angle is measured from north (+y) through east (-x), the
 * radio (and FITS BPA) convention, so a major axis at PA t points along
 * (dx, dy) = (-sin t, cos t): PA 30 leans the top of an ellipse to the left,
 * as ds9 or CASA draw a BPA of 30 deg on such an image. */
typedef struct { double xx, xy, yy; } sf_sim_cov; /* covariance in pixel^2 */

static sf_sim_cov sf_sim_gauss_cov(double maj_fwhm_pix, double min_fwhm_pix, double pa_deg)
{
    double sa = maj_fwhm_pix * SF_SIM_FWHM2SIG, sb = min_fwhm_pix * SF_SIM_FWHM2SIG;
    double t = pa_deg * (SF_SIM_PI / 180.0), st = sin(t), ct = cos(t);
    sf_sim_cov c;
    c.xx = sa * sa * st * st + sb * sb * ct * ct;
    c.yy = sa * sa * ct * ct + sb * sb * st * st;
    c.xy = (sb * sb - sa * sa) * st * ct;
    return c;
}

static double sf_sim_det(sf_sim_cov c) { return c.xx * c.yy - c.xy * c.xy; }

/* A position angle folded into [0, 180) degrees. */
static double sf_sim_pa180(double pa)
{
    double t = fmod(pa, 180.0);
    if (t < 0)
        t += 180.0;
    return t >= 180.0 ? 0.0 : t;
}

/* The inverse of sf_sim_gauss_cov: FWHM axes (pixels) and PA (deg, [0, 180)) of
 * the Gaussian of covariance c. The major axis lies at atan2(2xy, xx-yy)/2 from
 * +x, i.e. along (-sin t, cos t) with t that angle less 90 degrees. */
static void sf_sim_cov_shape(sf_sim_cov c, double *maj, double *min, double *pa)
{
    double h = 0.5 * (c.xx + c.yy), d = hypot(0.5 * (c.xx - c.yy), c.xy);
    double l1 = h + d, l2 = h - d;
    *maj = sqrt(l1) / SF_SIM_FWHM2SIG;
    *min = sqrt(l2 > 0 ? l2 : 0) / SF_SIM_FWHM2SIG;
    *pa = d > 1e-12 * h ? sf_sim_pa180(0.5 * atan2(2.0 * c.xy, c.xx - c.yy) * (180.0 / SF_SIM_PI) - 90.0)
                        : 0.0;
}

/* Add peak * exp(-q/2) over the footprint where q <= kmax^2, row by row. */
static void sf_sim_render(sf_image *im, double x0, double y0, double peak, sf_sim_cov c,
                          double kmax)
{
    double det = sf_sim_det(c);
    double ixx = c.yy / det, iyy = c.xx / det, ixy = -c.xy / det;
    double hx = kmax * sqrt(c.xx), hy = kmax * sqrt(c.yy), k2 = kmax * kmax;
    long j0 = (long)ceil(y0 - hy), j1 = (long)floor(y0 + hy);
    long i0 = (long)ceil(x0 - hx), i1 = (long)floor(x0 + hx);
    if (j0 < 0)
        j0 = 0;
    if (i0 < 0)
        i0 = 0;
    if (j1 > im->ny - 1)
        j1 = im->ny - 1;
    if (i1 > im->nx - 1)
        i1 = im->nx - 1;
    for (long j = j0; j <= j1; j++) {
        double dy = (double)j - y0;
        float *row = im->data + (size_t)j * im->stride;
        for (long i = i0; i <= i1; i++) {
            double dx = (double)i - x0;
            double q = ixx * dx * dx + 2.0 * ixy * dx * dy + iyy * dy * dy;
            if (q <= k2)
                row[i] = (float)((double)row[i] + peak * exp(-0.5 * q));
        }
    }
}

/* Truth world coordinates through WCSLIB with the same keywords the writer puts
 * in the header (pixel coordinates 1-based for WCSLIB). */
static sf_status sf_sim_world(const sf_sim_params *p, sf_sim_source *src, int n)
{
    struct wcsprm wcs;
    double *buf = NULL;
    int *stat = NULL, ws, inited = 0;
    sf_status st = SF_OK;
    wcs.flag = -1;
    if ((ws = wcsini(1, 2, &wcs)) != 0) {
        st = sf_fail(SF_ERR_INTERNAL, "wcsini: %s", wcs_errmsg[ws]);
        goto fail;
    }
    inited = 1;
    strcpy(wcs.ctype[0], "RA---SIN");
    strcpy(wcs.ctype[1], "DEC--SIN");
    strcpy(wcs.cunit[0], "deg");
    strcpy(wcs.cunit[1], "deg");
    wcs.crpix[0] = sf_sim_crpix(p->nx);
    wcs.crpix[1] = sf_sim_crpix(p->ny);
    wcs.cdelt[0] = -p->pix_arcsec / 3600.0;
    wcs.cdelt[1] = p->pix_arcsec / 3600.0;
    wcs.crval[0] = p->ra_deg;
    wcs.crval[1] = p->dec_deg;
    strcpy(wcs.radesys, "ICRS");
    wcs.equinox = 2000.0;
    if ((ws = wcsset(&wcs)) != 0) {
        st = sf_fail(SF_ERR_INTERNAL, "wcsset: %s", wcs_errmsg[ws]);
        goto fail;
    }
    if (n == 0)
        goto done;
    buf = malloc(sizeof(double) * 5 * 2 * (size_t)n + sizeof(double) * 2 * (size_t)n);
    stat = malloc(sizeof(int) * (size_t)n);
    if (!buf || !stat) {
        st = sf_fail(SF_ERR_NOMEM, "simulate: no memory for %d world coordinates", n);
        goto fail;
    }
    double *pix = buf, *img = buf + 2 * (size_t)n, *world = buf + 4 * (size_t)n;
    double *phi = buf + 6 * (size_t)n, *theta = buf + 7 * (size_t)n;
    for (int i = 0; i < n; i++) {
        pix[2 * i] = src[i].x + 1.0;
        pix[2 * i + 1] = src[i].y + 1.0;
    }
    if ((ws = wcsp2s(&wcs, n, 2, pix, img, phi, theta, world, stat)) != 0) {
        st = sf_fail(SF_ERR_INTERNAL, "wcsp2s: %s", wcs_errmsg[ws]);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        src[i].ra = world[2 * i];
        src[i].dec = world[2 * i + 1];
    }
done:
fail:
    if (inited)
        wcsfree(&wcs);
    free(buf);
    free(stat);
    return st;
}

/* ---- the simulation --------------------------------------------------------- */

static int sf_sim_auto_nsrc(const sf_sim_params *p)
{
    double per = SF_SIM_AUTO_BEAMS * p->bmaj_arcsec / p->pix_arcsec;
    double n = floor((double)p->nx * (double)p->ny / (per * per) + 0.5);
    if (n < 1)
        n = 1;
    if (n > SF_SIM_MAX_NSRC)
        n = SF_SIM_MAX_NSRC;
    return (int)n;
}

/* Uniform position along one axis, keeping `margin` pixels from both edges when
 * the axis is long enough, else anywhere on it. */
static double sf_sim_position(sf_sim_rng *r, int n, double margin)
{
    double lo = 0.0, hi = (double)(n - 1);
    if (hi - lo > 2.0 * margin) {
        lo += margin;
        hi -= margin;
    }
    return lo + (hi - lo) * sf_sim_uniform(r);
}

/* Peak SNR from N(>S) ~ S^-1.5 between smin and smax (inverse CDF). */
static double sf_sim_snr(sf_sim_rng *r, double smin, double smax)
{
    if (smax <= smin)
        return smin;
    double a = pow(smin, -1.5), b = pow(smax, -1.5);
    return pow(a - sf_sim_uniform(r) * (a - b), -1.0 / 1.5);
}

/* Fill one row of padded white N(0,1) noise from its own stream. Padded rows
 * run from -hy to ny-1+hy; the stream index is the row's offset from -hy. */
static void sf_sim_white_row(float *row, int w, uint64_t seed, uint64_t index)
{
    sf_sim_rng r;
    double g1, g2;
    sf_sim_rng_init(&r, seed, SF_SIM_TAG_CNOISE, index);
    int i = 0;
    for (; i + 1 < w; i += 2) {
        sf_sim_normal2(&r, &g1, &g2);
        row[i] = (float)g1;
        row[i + 1] = (float)g2;
    }
    if (i < w) {
        sf_sim_normal2(&r, &g1, &g2);
        row[i] = (float)g1;
    }
}

/* Beam-correlated noise (corr_noise = 1): white N(0,1) noise on the image padded
 * by the kernel's half-widths hx, hy, convolved directly with the unit-peak beam
 * k = exp(-q/2), q = d'C^-1 d <= 16, and scaled by noise / sqrt(sum k^2). The
 * kernel is stored row by row as runs of taps; each block of output rows draws
 * its padded input rows (the same rows from the same streams whichever thread
 * does it) and sums taps in a fixed order, so any thread count gives the same
 * image. Overwrites every pixel of im. */
static sf_status sf_sim_corr_noise(const sf_sim_params *p, sf_sim_cov beam, sf_image *im)
{
    const int nx = p->nx, ny = p->ny;
    const double det = sf_sim_det(beam), k2 = SF_SIM_CORR_KMAX * SF_SIM_CORR_KMAX;
    const double ixx = beam.yy / det, iyy = beam.xx / det, ixy = -beam.xy / det;
    const int hx = (int)floor(SF_SIM_CORR_KMAX * sqrt(beam.xx));
    const int hy = (int)floor(SF_SIM_CORR_KMAX * sqrt(beam.yy));
    const int kw = 2 * hx + 1, kh = 2 * hy + 1;
    const int w = nx + 2 * hx; /* padded width */
    float *kern = NULL;
    int *lo = NULL, *hi = NULL;
    sf_status st = SF_OK;
    int failed = 0;

    kern = malloc(sizeof(float) * (size_t)kw * (size_t)kh);
    lo = malloc(sizeof(int) * 2 * (size_t)kh);
    if (!kern || !lo) {
        st = sf_fail(SF_ERR_NOMEM, "simulate: no memory for a %dx%d noise kernel", kw, kh);
        goto fail;
    }
    hi = lo + kh;
    /* taps: row dy = -hy..hy holds dx = lo..hi (an interval: the ellipse's chord) */
    double sumsq = 0;
    for (int b = 0; b < kh; b++) {
        double dy = (double)(b - hy);
        lo[b] = 1;
        hi[b] = 0;
        for (int a = 0; a < kw; a++) {
            double dx = (double)(a - hx);
            double q = ixx * dx * dx + 2.0 * ixy * dx * dy + iyy * dy * dy;
            float v = q <= k2 ? (float)exp(-0.5 * q) : 0.0f;
            kern[(size_t)b * kw + a] = v;
            if (q <= k2) {
                if (lo[b] > hi[b])
                    lo[b] = a - hx;
                hi[b] = a - hx;
                sumsq += (double)v * v;
            }
        }
    }
    const float scale = (float)(p->noise / sqrt(sumsq)); /* sumsq >= 1: the centre tap */
    const uint64_t seed = p->seed;
    const int nblk = (ny + SF_SIM_CORR_BLOCK - 1) / SF_SIM_CORR_BLOCK;

#pragma omp parallel
    {
        const int rows = SF_SIM_CORR_BLOCK + 2 * hy;
        float *in = malloc(sizeof(float) * (size_t)w * (size_t)rows);
        float *acc = malloc(sizeof(float) * (size_t)nx);
        if (!in || !acc) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int blk = 0; blk < nblk; blk++) {
            if (!in || !acc)
                continue;
            int j0 = blk * SF_SIM_CORR_BLOCK;
            int j1 = j0 + SF_SIM_CORR_BLOCK < ny ? j0 + SF_SIM_CORR_BLOCK : ny;
            /* padded rows j0-hy .. j1-1+hy; padded row r has stream index r + hy */
            for (int r = j0 - hy; r < j1 + hy; r++)
                sf_sim_white_row(in + (size_t)(r - (j0 - hy)) * w, w, seed, (uint64_t)(r + hy));
            for (int j = j0; j < j1; j++) {
                for (int i = 0; i < nx; i++)
                    acc[i] = 0.0f;
                for (int b = 0; b < kh; b++) {
                    /* input row j + (b - hy), local index j - j0 + b */
                    const float *src = in + (size_t)(j - j0 + b) * w + hx;
                    const float *kr = kern + (size_t)b * kw + hx;
                    for (int dx = lo[b]; dx <= hi[b]; dx++) {
                        const float kv = kr[dx];
                        const float *restrict s = src + dx;
                        float *restrict ac = acc;
                        for (int i = 0; i < nx; i++)
                            ac[i] += kv * s[i];
                    }
                }
                float *row = im->data + (size_t)j * im->stride;
                for (int i = 0; i < nx; i++)
                    row[i] = scale * acc[i];
            }
        }
        free(in);
        free(acc);
    }
    if (failed)
        st = sf_fail(SF_ERR_NOMEM, "simulate: no memory for the correlated noise's row buffers "
                                   "(%d x %d floats per thread)", w, SF_SIM_CORR_BLOCK + 2 * hy);
fail:
    free(kern);
    free(lo);
    return st;
}

sf_status sf_simulate(const sf_sim_params *p, sf_image *img, sf_sim_source **truth,
                      int *ntruth)
{
    sf_image im = {0};
    sf_sim_source *src = NULL;
    sf_status st;
    if (!p || !img)
        return sf_fail(SF_ERR_PARAM, "simulate: NULL parameters or image");
    if ((st = sf_sim_check(p)) != SF_OK)
        goto fail;
    if ((st = sf_image_alloc(&im, p->nx, p->ny, SF_HOST, NULL)) != SF_OK) {
        sf_errcontext("simulate: %dx%d image", p->nx, p->ny);
        goto fail;
    }
    const int nsingle = p->nsrc >= 0 ? p->nsrc : sf_sim_auto_nsrc(p);
    int n = nsingle + 2 * p->npairs;
    src = calloc((size_t)n, sizeof *src);
    if (!src) {
        st = sf_fail(SF_ERR_NOMEM, "simulate: no memory for %d sources", n);
        goto fail;
    }

    /* Noise: one xoshiro256** stream per row, so any thread count gives the same image. */
    const int nx = p->nx, ny = p->ny;
    const double noise = p->noise;
    const uint64_t seed = p->seed;
    const double pix = p->pix_arcsec;
    const sf_sim_cov beam = sf_sim_gauss_cov(p->bmaj_arcsec / pix, p->bmin_arcsec / pix,
                                             p->bpa_deg);
    if (p->corr_noise) {
        if ((st = sf_sim_corr_noise(p, beam, &im)) != SF_OK)
            goto fail;
    } else {
#pragma omp parallel for schedule(static)
        for (int j = 0; j < ny; j++) {
            sf_sim_rng r;
            float *row = im.data + (size_t)j * im.stride;
            double g1, g2;
            sf_sim_rng_init(&r, seed, SF_SIM_TAG_NOISE, (uint64_t)j);
            int i = 0;
            for (; i + 1 < nx; i += 2) {
                sf_sim_normal2(&r, &g1, &g2);
                row[i] = (float)(noise * g1);
                row[i + 1] = (float)(noise * g2);
            }
            if (i < nx) {
                sf_sim_normal2(&r, &g1, &g2);
                row[i] = (float)(noise * g1);
            }
        }
    }

    /* Sources: one stream for the catalogue, drawn in id order, rendered serially. */
    const double bpa180 = sf_sim_pa180(p->bpa_deg);
    const double beam_sqrtdet = sqrt(sf_sim_det(beam));
    const double margin = SF_SIM_MARGIN_BEAMS * p->bmaj_arcsec / pix;
    sf_sim_rng r;
    sf_sim_rng_init(&r, seed, SF_SIM_TAG_SRC, 0);
    for (int k = 0; k < nsingle; k++) {
        sf_sim_source *s = &src[k];
        s->id = k + 1;
        s->x = sf_sim_position(&r, nx, margin);
        s->y = sf_sim_position(&r, ny, margin);
        double snr = sf_sim_snr(&r, p->snr_min, p->snr_max);
        int ext = sf_sim_uniform(&r) < p->ext_frac;
        /* Extended: intrinsic FWHM 0.5-2.5 x bmaj, axis ratio 0.3-1, PA 0-180 deg.
         * Drawn for every source so the streams stay aligned whatever ext_frac is. */
        double maj = p->bmaj_arcsec * (0.5 + 2.0 * sf_sim_uniform(&r));
        double ratio = 0.3 + 0.7 * sf_sim_uniform(&r);
        double pa = 180.0 * sf_sim_uniform(&r);
        sf_sim_cov c = beam;
        s->peak = snr * noise;
        if (ext) {
            sf_sim_cov si = sf_sim_gauss_cov(maj / pix, maj * ratio / pix, pa);
            c.xx += si.xx;
            c.xy += si.xy;
            c.yy += si.yy;
            s->maj_arcsec = maj;
            s->min_arcsec = maj * ratio;
            s->pa_deg = pa;
            sf_sim_cov_shape(c, &s->conv_maj_arcsec, &s->conv_min_arcsec, &s->conv_pa_deg);
            s->conv_maj_arcsec *= pix;
            s->conv_min_arcsec *= pix;
        } else {
            s->conv_maj_arcsec = p->bmaj_arcsec;
            s->conv_min_arcsec = p->bmin_arcsec;
            s->conv_pa_deg = bpa180;
        }
        /* peak in Jy/beam of the convolved source; flux = peak * area(conv) / area(beam) */
        s->flux = s->peak * sqrt(sf_sim_det(c)) / beam_sqrtdet;
        double kmax = sqrt(2.0 * log(fmax(snr, 1.0) / SF_SIM_CUT_NOISE));
        if (kmax < 5.0)
            kmax = 5.0;
        sf_sim_render(&im, s->x, s->y, s->peak, c, kmax);
    }
    /* Blended pairs of point sources, from their own stream. */
    sf_sim_rng_init(&r, seed, SF_SIM_TAG_PAIR, 0);
    {
        const double fwhm = sqrt(p->bmaj_arcsec * p->bmin_arcsec) / pix, two_pi = 6.283185307179586;
        for (int k = 0; k < p->npairs; k++) {
            sf_sim_source *a = &src[nsingle + 2 * k], *b = a + 1;
            double snr = 50.0 * pow(10.0, sf_sim_uniform(&r));
            double ratio = pow(p->pair_ratio_max, sf_sim_uniform(&r));
            double sep = fwhm * (p->pair_sep_min + (p->pair_sep_max - p->pair_sep_min) * sf_sim_uniform(&r));
            double ang = two_pi * sf_sim_uniform(&r);
            a->id = nsingle + 2 * k + 1;
            b->id = a->id + 1;
            a->pair = b->pair = k + 1;
            a->x = sf_sim_position(&r, nx, margin + sep);
            a->y = sf_sim_position(&r, ny, margin + sep);
            b->x = a->x + sep * cos(ang);
            b->y = a->y + sep * sin(ang);
            a->peak = snr * noise;
            b->peak = a->peak / ratio;
            for (sf_sim_source *s = a; s <= b; s++) {
                double kmax = sqrt(2.0 * log(fmax(s->peak / noise, 1.0) / SF_SIM_CUT_NOISE));
                s->flux = s->peak; /* a point source: Jy = Jy/beam */
                s->conv_maj_arcsec = p->bmaj_arcsec;
                s->conv_min_arcsec = p->bmin_arcsec;
                s->conv_pa_deg = bpa180;
                sf_sim_render(&im, s->x, s->y, s->peak, beam, kmax < 5.0 ? 5.0 : kmax);
            }
        }
    }
    if ((st = sf_sim_world(p, src, n)) != SF_OK)
        goto fail;

    *img = im;
    if (truth)
        *truth = src;
    else
        free(src);
    if (ntruth)
        *ntruth = n;
    return SF_OK;
fail:
    sf_image_free(&im, NULL);
    free(src);
    return st;
}

/* ---- writing ------------------------------------------------------------------ */

/* A fresh name beside `path` (sf_tmp_name: "path.tmp.HOST.PID.N"), reserved
 * with O_EXCL and left empty; the caller owns it. Mode 0666 less the umask,
 * like any new output. */
static sf_status sf_sim_tmpname(const char *path, char **out)
{
    size_t len = strlen(path) + 160;
    char *name = malloc(len);
    if (!name)
        return sf_fail(SF_ERR_NOMEM, "%s: no memory for a temporary name", path);
    for (int tries = 0; tries < 100; tries++) {
        if (sf_tmp_name(path, name, len)) {
            free(name);
            return sf_fail(SF_ERR_IO, "%s: the name is too long", path);
        }
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) {
            close(fd);
            *out = name;
            return SF_OK;
        }
        if (errno != EEXIST) {
            int e = errno;
            free(name);
            return sf_fail(SF_ERR_IO, "%s: cannot create a temporary file beside it: %s",
                           path, strerror(e));
        }
    }
    free(name);
    return sf_fail(SF_ERR_IO, "%s: no free temporary name beside it", path);
}

static sf_status sf_sim_fitserr(const char *path, const char *what, int status)
{
    char text[FLEN_STATUS], msg[FLEN_ERRMSG] = "";
    fits_get_errstatus(status, text);
    fits_read_errmsg(msg); /* the oldest message on CFITSIO's stack says most */
    fits_clear_errmsg();
    return sf_fail(SF_ERR_FITS, "%s: %s: status %d (%s%s%s)", path, what, status, text,
                   msg[0] ? "; " : "", msg);
}

#define SF_SIM_KEY(type, key, val, com)                                               \
    do {                                                                              \
        if (fits_update_key(f, type, key, val, com, &fs))                             \
            goto fitsfail;                                                            \
    } while (0)
/* Doubles with the fewest digits (15-17) that read back to the same value, so
 * the header holds exactly the values the truth coordinates were computed from. */
#define SF_SIM_KEYD(key, val, com)                                                    \
    do {                                                                              \
        double v_ = (val);                                                            \
        if (fits_update_key_dbl(f, key, v_, -sf_sim_digits(v_), com, &fs))            \
            goto fitsfail;                                                            \
    } while (0)

static int sf_sim_digits(double v)
{
    char buf[40];
    for (int digits = 15; digits < 17; digits++) {
        snprintf(buf, sizeof buf, "%.*G", digits, v);
        if (strtod(buf, NULL) == v)
            return digits;
    }
    return 17;
}

static sf_status sf_sim_write_fits(const sf_sim_params *p, const sf_image *im, int n,
                                   const char *tmp, const char *path)
{
    fitsfile *f = NULL;
    int fs = 0;
    const char *what = "fits_create_diskfile";
    long naxes[4] = {p->nx, p->ny, 1, 1};
    char s[256];
    double pixdeg = p->pix_arcsec / 3600.0;
    int iv;
    unsigned long long seed = p->seed;
    sf_status st;

    remove(tmp); /* reserved empty by sf_sim_tmpname; CFITSIO will not overwrite */
    if (fits_create_diskfile(&f, tmp, &fs))
        goto fitsfail;
    what = "fits_create_img";
    if (fits_create_img(f, FLOAT_IMG, 4, naxes, &fs))
        goto fitsfail;
    what = "fits_update_key";
    SF_SIM_KEY(TSTRING, "BUNIT", "JY/BEAM", "pixel unit");
    SF_SIM_KEYD("BMAJ", p->bmaj_arcsec / 3600.0, "[deg] restoring beam major axis FWHM");
    SF_SIM_KEYD("BMIN", p->bmin_arcsec / 3600.0, "[deg] restoring beam minor axis FWHM");
    SF_SIM_KEYD("BPA", p->bpa_deg, "[deg] beam PA, north through east");
    SF_SIM_KEY(TSTRING, "OBJECT", "skyfind simulation", NULL);
    SF_SIM_KEY(TSTRING, "ORIGIN", "skyfind simulate", NULL);
    SF_SIM_KEY(TSTRING, "RADESYS", "ICRS", "celestial frame");
    SF_SIM_KEYD("EQUINOX", 2000.0, "[yr] (not used by ICRS)");
    SF_SIM_KEY(TSTRING, "CTYPE1", "RA---SIN", NULL);
    SF_SIM_KEYD("CRPIX1", sf_sim_crpix(p->nx), "nx/2+1: the centre pixel, as imagers place it");
    SF_SIM_KEYD("CDELT1", -pixdeg, "[deg] RA decreases with x");
    SF_SIM_KEYD("CRVAL1", p->ra_deg, "[deg] pointing RA");
    SF_SIM_KEY(TSTRING, "CUNIT1", "deg", NULL);
    SF_SIM_KEY(TSTRING, "CTYPE2", "DEC--SIN", NULL);
    SF_SIM_KEYD("CRPIX2", sf_sim_crpix(p->ny), "ny/2+1: the centre pixel");
    SF_SIM_KEYD("CDELT2", pixdeg, "[deg]");
    SF_SIM_KEYD("CRVAL2", p->dec_deg, "[deg] pointing Dec");
    SF_SIM_KEY(TSTRING, "CUNIT2", "deg", NULL);
    SF_SIM_KEY(TSTRING, "CTYPE3", "FREQ", NULL);
    SF_SIM_KEYD("CRPIX3", 1.0, NULL);
    SF_SIM_KEYD("CDELT3", 1e6, "[Hz] arbitrary: a single channel");
    SF_SIM_KEYD("CRVAL3", p->freq_hz, "[Hz]");
    SF_SIM_KEY(TSTRING, "CUNIT3", "Hz", NULL);
    SF_SIM_KEY(TSTRING, "CTYPE4", "STOKES", NULL);
    SF_SIM_KEYD("CRPIX4", 1.0, NULL);
    SF_SIM_KEYD("CDELT4", 1.0, NULL);
    SF_SIM_KEYD("CRVAL4", 1.0, "Stokes I");
    /* the seed is 64-bit unsigned: written as a card so any value fits */
    snprintf(s, sizeof s, "%-8s= %20llu / simulation: random seed", "SIMSEED", seed);
    if (fits_update_card(f, "SIMSEED", s, &fs))
        goto fitsfail;
    SF_SIM_KEYD("SIMNOISE", p->noise, "[Jy/beam] simulation: noise rms");
    if (p->corr_noise) /* absent: white noise (and the files of earlier versions unchanged) */
        SF_SIM_KEY(TSTRING, "SIMCORR", "BEAM", "simulation: noise convolved with the beam");
    iv = n;
    SF_SIM_KEY(TINT, "SIMNSRC", &iv, "simulation: number of sources");
    SF_SIM_KEYD("SIMSNRLO", p->snr_min, "simulation: lowest peak SNR");
    SF_SIM_KEYD("SIMSNRHI", p->snr_max, "simulation: highest peak SNR");
    SF_SIM_KEYD("SIMEXTFR", p->ext_frac, "simulation: fraction of extended sources");
    iv = p->npairs;
    SF_SIM_KEY(TINT, "SIMPAIRS", &iv, "simulation: blended pairs (in SIMNSRC)");
    snprintf(s, sizeof s, "skyfind simulate %s: seed %llu, %dx%d pixels of %g arcsec, %d sources%s",
             SKYFIND_VERSION, seed, p->nx, p->ny, p->pix_arcsec, n,
             p->corr_noise ? ", beam-correlated noise" : "");
    what = "fits_write_history";
    if (fits_write_history(f, s, &fs))
        goto fitsfail;
    what = "fits_write_img";
    if (fits_write_img(f, TFLOAT, 1, (LONGLONG)sf_npix(im->nx, im->ny), im->data, &fs))
        goto fitsfail;
    what = "fits_close_file";
    if (fits_close_file(f, &fs)) {
        f = NULL;
        goto fitsfail;
    }
    return SF_OK;
fitsfail:
    st = sf_sim_fitserr(path, what, fs);
    if (f) {
        int ignore = 0;
        fits_close_file(f, &ignore);
        fits_clear_errmsg();
    }
    return st;
}

static sf_status sf_sim_write_csv(const sf_sim_source *src, int n, const char *tmp,
                                  const char *path)
{
    FILE *fp = fopen(tmp, "w");
    int bad = 0;
    if (!fp)
        return sf_fail(SF_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    bad |= fprintf(fp, "# skyfind simulate truth catalogue; x,y are 0-based pixel coordinates "
                       "(add 1 for FITS/ds9 convention); flux in Jy, peak in Jy/beam; sizes "
                       "are intrinsic FWHM in arcsec; conv_* is the observed shape (intrinsic "
                       "convolved with the beam; the beam for point sources): FWHM in arcsec, "
                       "PA in deg east of north\n"
                       "id,x,y,ra,dec,peak,flux,maj_arcsec,min_arcsec,pa_deg,pair,"
                       "conv_maj_arcsec,conv_min_arcsec,conv_pa_deg\n") < 0;
    for (int i = 0; i < n && !bad; i++) {
        const sf_sim_source *s = &src[i];
        /* ra, dec with 15 digits (~1e-12 deg) so they match the header's WCS to
         * well under 1e-9 deg; everything else with 10 */
        bad |= fprintf(fp, "%d,%.10g,%.10g,%.15g,%.15g,%.10g,%.10g,%.10g,%.10g,%.10g,%d,"
                           "%.10g,%.10g,%.10g\n", s->id,
                       s->x, s->y, s->ra, s->dec, s->peak, s->flux, s->maj_arcsec,
                       s->min_arcsec, s->pa_deg, s->pair, s->conv_maj_arcsec,
                       s->conv_min_arcsec, s->conv_pa_deg) < 0;
    }
    int e = errno;
    if (fclose(fp) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad)
        return sf_fail(SF_ERR_IO, "%s: write failed: %s", path, strerror(e));
    return SF_OK;
}

sf_status sf_simulate_write(const sf_sim_params *p, const char *fits_path,
                            const char *truth_csv_path)
{
    sf_image im = {0};
    sf_sim_source *src = NULL;
    char *tmp_fits = NULL, *tmp_csv = NULL;
    int n = 0;
    sf_status st;

    if (!fits_path || !fits_path[0])
        return sf_fail(SF_ERR_PARAM, "simulate: no output FITS path");
    if (truth_csv_path && !truth_csv_path[0])
        truth_csv_path = NULL;
    if ((st = sf_simulate(p, &im, &src, &n)) != SF_OK)
        goto fail;
    if ((st = sf_sim_tmpname(fits_path, &tmp_fits)) != SF_OK)
        goto fail;
    if (truth_csv_path && (st = sf_sim_tmpname(truth_csv_path, &tmp_csv)) != SF_OK)
        goto fail;
    if ((st = sf_sim_write_fits(p, &im, n, tmp_fits, fits_path)) != SF_OK)
        goto fail;
    if (tmp_csv && (st = sf_sim_write_csv(src, n, tmp_csv, truth_csv_path)) != SF_OK)
        goto fail;
    /* Both complete: the truth first, so a FITS file never appears without it. */
    if (tmp_csv && (st = sf_atomic_rename(tmp_csv, truth_csv_path)) != SF_OK)
        goto fail;
    free(tmp_csv);
    tmp_csv = NULL;
    if ((st = sf_atomic_rename(tmp_fits, fits_path)) != SF_OK)
        goto fail;
    free(tmp_fits);
    tmp_fits = NULL;
    st = SF_OK;
fail:
    if (tmp_fits)
        remove(tmp_fits);
    if (tmp_csv)
        remove(tmp_csv);
    free(tmp_fits);
    free(tmp_csv);
    free(src);
    sf_image_free(&im, NULL);
    return st;
}
