/* Check suite for the sky simulator (src/sim/simulate.c): determinism, noise
 * statistics (white and beam-correlated), point and extended source peaks,
 * fluxes and convolved shapes, the beam's position angle, parameter validation,
 * and the FITS + truth CSV written to disk. In this file, in order: helpers
 * (beam area, box sums, one-source skies); defaults and determinism; white
 * noise; point and extended sources and the beam's angle; non-square images
 * and the WCS; beam-correlated noise (correlation, edges, determinism);
 * parameter validation; the files written and read back; main. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fitsio.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "sftest.h"
#include "skyfind/simulate.h"

#define PI 3.14159265358979323846
#define FWHM2SIG 0.42466090014400953

/* Beam area in pixels: pi / (4 ln 2) * bmaj * bmin / pix^2. */
static double beam_area_pix(const sf_sim_params *p)
{
    return PI / (4.0 * log(2.0)) * p->bmaj_arcsec * p->bmin_arcsec /
           (p->pix_arcsec * p->pix_arcsec);
}

static double pix_at(const sf_image *im, int i, int j)
{
    return im->data[(size_t)j * im->stride + (size_t)i];
}

/* Sum of a box of half-width h (pixels) around (x, y), clipped to the image. */
static double box_sum(const sf_image *im, double x, double y, int h)
{
    double s = 0;
    int i0 = (int)lround(x) - h, i1 = (int)lround(x) + h;
    int j0 = (int)lround(y) - h, j1 = (int)lround(y) + h;
    for (int j = j0 < 0 ? 0 : j0; j <= j1 && j < im->ny; j++)
        for (int i = i0 < 0 ? 0 : i0; i <= i1 && i < im->nx; i++)
            s += pix_at(im, i, j);
    return s;
}

/* One bright source, near noiseless, default beam. */
static void one_source(sf_sim_params *p, double ext_frac, unsigned long long seed)
{
    sf_sim_params_default(p);
    p->nx = 96;
    p->ny = 80;
    p->nsrc = 1;
    p->seed = seed;
    p->noise = 1e-6;
    p->snr_min = p->snr_max = 1e5;
    p->ext_frac = ext_frac;
}

START_TEST(test_defaults)
{
    sf_sim_params p;
    sf_sim_params_default(&p);
    ck_assert_int_eq(p.seed, 1);
    ck_assert_int_le(p.nsrc, 0);
    ck_assert_double_eq(p.noise, 1e-4);
    ck_assert_double_eq(p.snr_min, 3);
    ck_assert_double_eq(p.snr_max, 300);
    ck_assert_double_eq(p.ext_frac, 0.2);
    ck_assert_double_eq(p.pix_arcsec, 2);
    ck_assert_double_eq(p.bmaj_arcsec, 10);
    ck_assert_double_eq(p.bmin_arcsec, 7);
    ck_assert_double_eq(p.bpa_deg, 30);
    ck_assert_double_eq(p.ra_deg, 150);
    ck_assert_double_eq(p.dec_deg, -30);
    ck_assert_double_eq(p.freq_hz, 1.4e9);
    ck_assert_int_eq(p.corr_noise, 0);
    ck_assert_int_ge(p.nx, 1);
    ck_assert_int_ge(p.ny, 1);
}
END_TEST

START_TEST(test_determinism)
{
    sf_sim_params p;
    sf_image a = {0}, b = {0}, c = {0};
    sf_sim_source *ta = NULL, *tb = NULL, *tc = NULL;
    int na = 0, nb = 0, nc = 0;
    sf_sim_params_default(&p);
    p.nx = 257;
    p.ny = 131;
    p.nsrc = 25;
    p.seed = 7;
#ifdef _OPENMP
    int nthr = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    ck_assert_int_eq(sf_simulate(&p, &a, &ta, &na), SF_OK);
#ifdef _OPENMP
    omp_set_num_threads(4); /* any thread count gives the same image */
#endif
    ck_assert_int_eq(sf_simulate(&p, &b, &tb, &nb), SF_OK);
#ifdef _OPENMP
    omp_set_num_threads(nthr);
#endif
    ck_assert_int_eq(na, 25);
    ck_assert_int_eq(nb, 25);
    ck_assert_int_eq(memcmp(a.data, b.data, sf_npix(p.nx, p.ny) * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(ta, tb, (size_t)na * sizeof *ta), 0);
    p.seed = 8;
    ck_assert_int_eq(sf_simulate(&p, &c, &tc, &nc), SF_OK);
    size_t ndiff = 0;
    for (size_t k = 0; k < sf_npix(p.nx, p.ny); k++)
        ndiff += a.data[k] != c.data[k];
    ck_assert_uint_gt(ndiff, sf_npix(p.nx, p.ny) * 99 / 100);
    ck_assert(ta[0].x != tc[0].x);
    for (int k = 0; k < na; k++)
        ck_assert_int_eq(ta[k].id, k + 1);
    sf_image_free(&a, NULL);
    sf_image_free(&b, NULL);
    sf_image_free(&c, NULL);
    free(ta);
    free(tb);
    free(tc);
}
END_TEST

START_TEST(test_noise_statistics)
{
    sf_sim_params p;
    sf_image im = {0};
    sf_sim_source *t = NULL;
    int n = 0;
    sf_sim_params_default(&p);
    p.nx = 512;
    p.ny = 512;
    p.nsrc = 1;
    p.snr_min = p.snr_max = 1e-6; /* a source far below the noise */
    p.noise = 2.5e-4;
    ck_assert_int_eq(sf_simulate(&p, &im, &t, &n), SF_OK);
    double s = 0, s2 = 0, npx = (double)sf_npix(p.nx, p.ny);
    for (size_t k = 0; k < sf_npix(p.nx, p.ny); k++) {
        ck_assert(isfinite(im.data[k]));
        s += im.data[k];
        s2 += (double)im.data[k] * im.data[k];
    }
    double mean = s / npx, rms = sqrt(s2 / npx - mean * mean);
    ck_assert_msg(fabs(rms / p.noise - 1) < 0.02, "rms %g vs noise %g", rms, p.noise);
    ck_assert_msg(fabs(mean) < 5 * p.noise / sqrt(npx), "mean %g", mean);
    /* Gaussian tails: about 0.27% beyond 3 sigma, none beyond 7 sigma */
    size_t n3 = 0, n7 = 0;
    for (size_t k = 0; k < sf_npix(p.nx, p.ny); k++) {
        n3 += fabs(im.data[k]) > 3 * p.noise;
        n7 += fabs(im.data[k]) > 7 * p.noise;
    }
    ck_assert_msg(fabs(n3 / npx / 0.0026998 - 1) < 0.1, "fraction beyond 3 sigma %g", n3 / npx);
    ck_assert_uint_eq(n7, 0);
    sf_image_free(&im, NULL);
    free(t);
}
END_TEST

START_TEST(test_point_source)
{
    sf_sim_params p;
    sf_image im = {0};
    sf_sim_source *t = NULL;
    int n = 0;
    one_source(&p, 0.0, 11 + (unsigned)_i);
    ck_assert_int_eq(sf_simulate(&p, &im, &t, &n), SF_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq_tol(t[0].peak, 1e5 * p.noise, 1e-12);
    ck_assert_double_eq(t[0].maj_arcsec, 0);
    ck_assert_double_eq_tol(t[0].flux, t[0].peak, 1e-12); /* a point: flux = peak */
    /* a point's observed shape is the beam */
    ck_assert_double_eq(t[0].conv_maj_arcsec, p.bmaj_arcsec);
    ck_assert_double_eq(t[0].conv_min_arcsec, p.bmin_arcsec);
    ck_assert_double_eq(t[0].conv_pa_deg, p.bpa_deg);
    /* margins: 3 beam FWHM from the edges */
    double m = 3 * p.bmaj_arcsec / p.pix_arcsec;
    ck_assert(t[0].x >= m && t[0].x <= p.nx - 1 - m);
    ck_assert(t[0].y >= m && t[0].y <= p.ny - 1 - m);
    /* the nearest pixel holds the beam at that offset (recomputed here) */
    int ix = (int)lround(t[0].x), iy = (int)lround(t[0].y);
    double dx = ix - t[0].x, dy = iy - t[0].y, th = p.bpa_deg * PI / 180;
    double u = -dx * sin(th) + dy * cos(th); /* along the major axis (north through east) */
    double v = dx * cos(th) + dy * sin(th);
    double sa = p.bmaj_arcsec / p.pix_arcsec * FWHM2SIG, sb = p.bmin_arcsec / p.pix_arcsec * FWHM2SIG;
    double expect = t[0].peak * exp(-0.5 * (u * u / (sa * sa) + v * v / (sb * sb)));
    double got = pix_at(&im, ix, iy);
    ck_assert_msg(fabs(got / expect - 1) < 0.02, "pixel %g vs %g", got, expect);
    /* a pixel-centred source would peak at the truth peak; half a pixel off on
     * both axes costs at most 11% with this beam (sigma_min 1.49 px) */
    ck_assert(got > 0.88 * t[0].peak && got < 1.001 * t[0].peak);
    double flux = box_sum(&im, t[0].x, t[0].y, 20) / beam_area_pix(&p);
    ck_assert_msg(fabs(flux / t[0].flux - 1) < 0.02, "flux %g vs %g", flux, t[0].flux);
    sf_image_free(&im, NULL);
    free(t);
}
END_TEST

/* Covariance (pixel^2) of a Gaussian of FWHM maj x min (arcsec) whose major
 * axis points along (dx, dy) = (-sin pa, cos pa): north through east. */
static void cov_of(double maj, double min, double pa_deg, double pix, double c[3])
{
    double sa = maj / pix * FWHM2SIG, sb = min / pix * FWHM2SIG, t = pa_deg * PI / 180;
    double ux = -sin(t), uy = cos(t), vx = cos(t), vy = sin(t);
    c[0] = sa * sa * ux * ux + sb * sb * vx * vx;
    c[1] = sa * sa * ux * uy + sb * sb * vx * vy;
    c[2] = sa * sa * uy * uy + sb * sb * vy * vy;
}

START_TEST(test_extended_source)
{
    sf_sim_params p;
    sf_image im = {0};
    sf_sim_source *t = NULL;
    int n = 0;
    one_source(&p, 1.0, 21 + (unsigned)_i);
    p.nx = 160;
    p.ny = 150;
    ck_assert_int_eq(sf_simulate(&p, &im, &t, &n), SF_OK);
    ck_assert_int_eq(n, 1);
    ck_assert(t[0].maj_arcsec > 0 && t[0].min_arcsec > 0 && t[0].maj_arcsec >= t[0].min_arcsec);
    ck_assert(t[0].pa_deg >= 0 && t[0].pa_deg < 180);
    /* flux / peak = convolved area / beam area > 1, and bounded by the
     * circularised estimate sqrt((M^2+B^2)(m^2+b^2)) / (B b) */
    double ratio = t[0].flux / t[0].peak;
    double M = t[0].maj_arcsec, mi = t[0].min_arcsec, B = p.bmaj_arcsec, b = p.bmin_arcsec;
    ck_assert(ratio > 1.0);
    ck_assert(ratio >= sqrt((M * M + b * b) * (mi * mi + b * b)) / (B * b) * 0.999);
    ck_assert(ratio <= sqrt((M * M + B * B) * (mi * mi + B * B)) / (B * b) * 1.001);
    /* observed shape = intrinsic convolved with the beam: covariances add */
    double ci[3], cb[3], co[3];
    cov_of(M, mi, t[0].pa_deg, p.pix_arcsec, ci);
    cov_of(B, b, p.bpa_deg, p.pix_arcsec, cb);
    cov_of(t[0].conv_maj_arcsec, t[0].conv_min_arcsec, t[0].conv_pa_deg, p.pix_arcsec, co);
    for (int k = 0; k < 3; k++)
        ck_assert_msg(fabs(co[k] - ci[k] - cb[k]) < 1e-9 * (ci[0] + ci[2] + cb[0] + cb[2]),
                      "convolved covariance [%d]: %.12g vs %.12g", k, co[k], ci[k] + cb[k]);
    ck_assert(t[0].conv_maj_arcsec >= t[0].conv_min_arcsec);
    ck_assert(t[0].conv_maj_arcsec > M && t[0].conv_maj_arcsec > B);
    ck_assert(t[0].conv_pa_deg >= 0 && t[0].conv_pa_deg < 180);
    ck_assert_double_eq_tol(ratio, t[0].conv_maj_arcsec * t[0].conv_min_arcsec / (B * b), 1e-9 * ratio);
    /* and the image has that shape: half a FWHM along the observed major axis
     * from the centre, the pixel holds the model of that covariance (about half
     * the peak: the nearest pixel is up to half a pixel off that point) */
    {
        double th = t[0].conv_pa_deg * PI / 180, r = 0.5 * t[0].conv_maj_arcsec / p.pix_arcsec;
        double hx = t[0].x - r * sin(th), hy = t[0].y + r * cos(th);
        int ix = (int)lround(hx), iy = (int)lround(hy);
        double dx = ix - t[0].x, dy = iy - t[0].y, det = co[0] * co[2] - co[1] * co[1];
        double q = (co[2] * dx * dx - 2 * co[1] * dx * dy + co[0] * dy * dy) / det;
        double expect = t[0].peak * exp(-0.5 * q), got = pix_at(&im, ix, iy);
        ck_assert_msg(fabs(got - expect) < 1e-3 * t[0].peak, "pixel at half maximum %g vs %g",
                      got, expect);
        ck_assert(expect > 0.3 * t[0].peak && expect < 0.75 * t[0].peak);
    }
    double sig = sqrt(M * M + B * B) / p.pix_arcsec * FWHM2SIG;
    int h = (int)ceil(7 * sig) + 1;
    double flux = box_sum(&im, t[0].x, t[0].y, h) / beam_area_pix(&p);
    ck_assert_msg(fabs(flux / t[0].flux - 1) < 0.02, "flux %g vs %g (box %d)", flux, t[0].flux, h);
    double got = pix_at(&im, (int)lround(t[0].x), (int)lround(t[0].y));
    ck_assert_msg(got > 0.88 * t[0].peak && got < 1.001 * t[0].peak, "pixel %g vs peak %g", got,
                  t[0].peak);
    sf_image_free(&im, NULL);
    free(t);
}
END_TEST

/* BPA is measured from north (+y) through east (-x, since RA falls with x). */
START_TEST(test_beam_position_angle)
{
    sf_sim_params p;
    sf_image im = {0};
    sf_sim_source *t = NULL;
    int n = 0;
    one_source(&p, 0.0, 5);
    p.bpa_deg = 45;
    p.bmaj_arcsec = 16;
    p.bmin_arcsec = 6;
    ck_assert_int_eq(sf_simulate(&p, &im, &t, &n), SF_OK);
    int ix = (int)lround(t[0].x), iy = (int)lround(t[0].y);
    /* north-east is (-x, +y): along the major axis; north-west (+x, +y) across it */
    double ne = pix_at(&im, ix - 3, iy + 3) + pix_at(&im, ix + 3, iy - 3);
    double nw = pix_at(&im, ix + 3, iy + 3) + pix_at(&im, ix - 3, iy - 3);
    ck_assert_msg(ne > 5 * nw, "north-east %g vs north-west %g", ne, nw);
    sf_image_free(&im, NULL);
    free(t);
}
END_TEST

START_TEST(test_non_square_and_wcs)
{
    sf_sim_params p;
    sf_image im = {0};
    sf_sim_source *t = NULL;
    int n = 0;
    sf_sim_params_default(&p);
    p.nx = 2048;
    p.ny = 301;
    p.snr_min = 50;
    p.snr_max = 60;
    p.ext_frac = 0;
    ck_assert_int_eq(sf_simulate(&p, &im, &t, &n), SF_OK);
    ck_assert_int_eq(im.nx, 2048);
    ck_assert_int_eq(im.ny, 301);
    ck_assert_int_eq(n, (int)lround(2048.0 * 301 / (200.0 * 200.0))); /* auto: (40 bmaj)^2 */
    double m = 3 * p.bmaj_arcsec / p.pix_arcsec, dd = p.pix_arcsec / 3600;
    for (int k = 0; k < n; k++) {
        ck_assert(t[k].x >= m && t[k].x <= p.nx - 1 - m);
        ck_assert(t[k].y >= m && t[k].y <= p.ny - 1 - m);
        /* x runs along RA (decreasing), y along Dec: the image is not transposed */
        double v = pix_at(&im, (int)lround(t[k].x), (int)lround(t[k].y));
        ck_assert_msg(v > 0.8 * t[k].peak, "source %d: pixel %g, peak %g", k + 1, v, t[k].peak);
        /* the SIN (orthographic) inverse written out: CRPIX = n/2 + 1 (1-based) */
        double L = -(t[k].x - p.nx / 2) * dd * PI / 180, M = (t[k].y - p.ny / 2) * dd * PI / 180;
        double d0 = p.dec_deg * PI / 180, nz = sqrt(1 - L * L - M * M);
        double dec = asin(M * cos(d0) + nz * sin(d0)) * 180 / PI;
        double ra = p.ra_deg + atan2(L, nz * cos(d0) - M * sin(d0)) * 180 / PI;
        ck_assert_double_eq_tol(t[k].dec, dec, 1e-9);
        ck_assert_double_eq_tol(t[k].ra, ra, 1e-9);
    }
    sf_image_free(&im, NULL);
    free(t);

    /* tiny images: no room for margins, sources anywhere; 1x1 works */
    p.nx = 1;
    p.ny = 1;
    p.nsrc = -1;
    ck_assert_int_eq(sf_simulate(&p, &im, &t, &n), SF_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(t[0].x, 0);
    ck_assert(isfinite(im.data[0]));
    ck_assert_double_eq_tol(t[0].ra, p.ra_deg, 1e-12);
    ck_assert_double_eq_tol(t[0].dec, p.dec_deg, 1e-12);
    sf_image_free(&im, NULL);
    free(t);
}
END_TEST

/* Correlation coefficient of pixels (i, j) and (i + dx, j + dy), dy >= 0, over
 * the image; mean and variance from all its pixels. */
static double lag_corr(const sf_image *im, int dx, int dy)
{
    double s = 0, s2 = 0, sp = 0, np = 0, n = (double)sf_npix(im->nx, im->ny);
    for (int j = 0; j < im->ny; j++)
        for (int i = 0; i < im->nx; i++) {
            double v = pix_at(im, i, j);
            s += v;
            s2 += v * v;
        }
    double mean = s / n, var = s2 / n - mean * mean;
    for (int j = 0; j + dy < im->ny; j++)
        for (int i = dx < 0 ? -dx : 0; i < im->nx && i + dx < im->nx; i++) {
            sp += (pix_at(im, i, j) - mean) * (pix_at(im, i + dx, j + dy) - mean);
            np += 1;
        }
    return sp / np / var;
}

static double image_rms(const sf_image *im)
{
    double s = 0, s2 = 0, n = (double)sf_npix(im->nx, im->ny);
    for (size_t k = 0; k < sf_npix(im->nx, im->ny); k++) {
        s += im->data[k];
        s2 += (double)im->data[k] * im->data[k];
    }
    return sqrt(s2 / n - (s / n) * (s / n));
}

/* corr_noise = 1: rms = noise, neighbours correlated as the beam predicts:
 * white noise convolved with a Gaussian of covariance C correlates at lag d as
 * exp(-d'C^-1 d / 4), i.e. exp(-d^2 / (4 sigma^2)) along an axis of a
 * circular beam. corr_noise = 0: neighbours uncorrelated. */
START_TEST(test_correlated_noise)
{
    sf_sim_params p;
    sf_image im = {0};
    sf_sim_source *t = NULL;
    int n = -1;
    sf_sim_params_default(&p);
    p.nx = 1024;
    p.ny = 768;
    p.nsrc = 0;
    p.noise = 3e-4;
    p.bmaj_arcsec = p.bmin_arcsec = 10; /* FWHM 5 px: sigma 2.12 px */
    p.corr_noise = 1;
    ck_assert_int_eq(sf_simulate(&p, &im, &t, &n), SF_OK);
    ck_assert_int_eq(n, 0);
    double rms = image_rms(&im);
    printf("corr_noise=1, circular beam: rms / noise %.4f\n", rms / p.noise);
    ck_assert_msg(fabs(rms / p.noise - 1) < 0.03, "correlated rms %g vs noise %g", rms, p.noise);
    double sig = p.bmaj_arcsec / p.pix_arcsec * FWHM2SIG;
    for (int d = 1; d <= 3; d++) {
        double expect = exp(-d * d / (4 * sig * sig));
        double rx = lag_corr(&im, d, 0), ry = lag_corr(&im, 0, d);
        printf("corr_noise=1, circular beam (sigma %.3f px): lag %d: rho_x %.4f rho_y %.4f, "
               "predicted %.4f\n", sig, d, rx, ry, expect);
        ck_assert_msg(fabs(rx - expect) < 0.05, "lag %d along x: %g vs %g", d, rx, expect);
        ck_assert_msg(fabs(ry - expect) < 0.05, "lag %d along y: %g vs %g", d, ry, expect);
    }
    ck_assert_msg(fabs(lag_corr(&im, 12, 0)) < 0.05, "lag 12: %g", lag_corr(&im, 12, 0));
    sf_image_free(&im, NULL);

    /* the default elliptical beam at PA 30: the noise's correlation ellipse has
     * the beam's shape and orientation (the same convention as the sources') */
    sf_sim_params_default(&p);
    p.nx = 1024;
    p.ny = 768;
    p.nsrc = 0;
    p.corr_noise = 1;
    ck_assert_int_eq(sf_simulate(&p, &im, NULL, NULL), SF_OK);
    rms = image_rms(&im);
    printf("corr_noise=1, beam 10x7 arcsec PA 30: rms / noise %.4f\n", rms / p.noise);
    ck_assert_msg(fabs(rms / p.noise - 1) < 0.03, "correlated rms %g vs noise %g", rms, p.noise);
    double c[3];
    cov_of(p.bmaj_arcsec, p.bmin_arcsec, p.bpa_deg, p.pix_arcsec, c);
    double det = c[0] * c[2] - c[1] * c[1];
    static const int lags[][2] = {{1, 0}, {0, 1}, {1, 1}, {-1, 1}, {2, 0}, {0, 2}, {-2, 2}, {2, 2}};
    for (size_t k = 0; k < sizeof lags / sizeof lags[0]; k++) {
        double dx = lags[k][0], dy = lags[k][1];
        double q = (c[2] * dx * dx - 2 * c[1] * dx * dy + c[0] * dy * dy) / det;
        double expect = exp(-q / 4), got = lag_corr(&im, lags[k][0], lags[k][1]);
        printf("corr_noise=1, beam 10x7 arcsec PA 30: lag (%+g, %+g): rho %.4f, predicted %.4f\n",
               dx, dy, got, expect);
        ck_assert_msg(fabs(got - expect) < 0.05, "lag (%g, %g): %g vs %g", dx, dy, got, expect);
    }
    /* north-east (-x, +y) is near the major axis at PA 30, north-west across it */
    ck_assert(lag_corr(&im, -2, 2) > lag_corr(&im, 2, 2) + 0.1);
    sf_image_free(&im, NULL);

    /* white noise: neighbours independent */
    p.corr_noise = 0;
    p.nx = p.ny = 512;
    ck_assert_int_eq(sf_simulate(&p, &im, NULL, NULL), SF_OK);
    double rx = lag_corr(&im, 1, 0), ry = lag_corr(&im, 0, 1), rd = lag_corr(&im, 1, 1);
    printf("corr_noise=0: rho_x %.4f rho_y %.4f rho_xy %.4f\n", rx, ry, rd);
    ck_assert_msg(fabs(rx) < 0.02 && fabs(ry) < 0.02 && fabs(rd) < 0.02,
                  "white noise correlated: %g %g %g", rx, ry, rd);
    sf_image_free(&im, NULL);
    free(t);
}
END_TEST

/* Edges as correlated as the interior: the noise is drawn on a padded area, so
 * the border pixels' rms over many seeds is `noise` too (a convolution that
 * ran off the edge would lose about half its power there, 3/4 in a corner). */
START_TEST(test_correlated_noise_edges)
{
    sf_sim_params p;
    sf_image im = {0};
    double se = 0, ne = 0, sc = 0, nc = 0, sx = 0, nxp = 0;
    sf_sim_params_default(&p);
    p.nx = 96;
    p.ny = 80;
    p.nsrc = 0;
    p.corr_noise = 1;
    for (int seed = 1; seed <= 150; seed++) {
        p.seed = (unsigned long long)seed;
        ck_assert_int_eq(sf_simulate(&p, &im, NULL, NULL), SF_OK);
        for (int j = 0; j < p.ny; j++)
            for (int i = 0; i < p.nx; i++) {
                double v = pix_at(&im, i, j) / p.noise;
                int border = i == 0 || j == 0 || i == p.nx - 1 || j == p.ny - 1;
                int corner = (i < 2 || i >= p.nx - 2) && (j < 2 || j >= p.ny - 2);
                se += border ? v * v : 0;
                ne += border;
                sc += corner ? v * v : 0;
                nc += corner;
                if (i == 0 || i == p.nx - 2) { /* neighbours along x at the edges */
                    sx += v * pix_at(&im, i + 1, j) / p.noise;
                    nxp += 1;
                }
            }
        sf_image_free(&im, NULL);
    }
    double edge = sqrt(se / ne), corner = sqrt(sc / nc), cx = sx / nxp;
    sf_sim_params_default(&p);
    double c[3];
    cov_of(p.bmaj_arcsec, p.bmin_arcsec, p.bpa_deg, p.pix_arcsec, c);
    double expect = exp(-c[2] / (c[0] * c[2] - c[1] * c[1]) / 4);
    printf("corr_noise=1 (150 seeds of 96x80): border rms %.4f, corner rms %.4f noise; "
           "covariance of x-neighbours at the left and right edges %.4f (predicted %.4f)\n",
           edge, corner, cx, expect);
    ck_assert_msg(fabs(edge - 1) < 0.03, "border rms %g noise", edge);
    ck_assert_msg(fabs(corner - 1) < 0.1, "corner rms %g noise", corner);
    ck_assert_msg(fabs(cx - expect) < 0.05, "edge x-neighbour covariance %g vs %g", cx, expect);
}
END_TEST

/* corr_noise = 1 is deterministic for a seed and any thread count, changes
 * with the seed, leaves the truth as it was and adds the same sources. */
START_TEST(test_correlated_determinism)
{
    sf_sim_params p;
    sf_image a = {0}, b = {0}, c = {0}, w = {0}, wn = {0}, cn = {0};
    sf_sim_source *ta = NULL, *tb = NULL, *tw = NULL;
    int na = 0, nb = 0, nw = 0;
    sf_sim_params_default(&p);
    p.nx = 257; /* a prime width; 300 rows: three blocks of rows, the last partial */
    p.ny = 300;
    p.nsrc = 25;
    p.seed = 7;
    p.ext_frac = 0.5;
    p.corr_noise = 1;
#ifdef _OPENMP
    int nthr = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    ck_assert_int_eq(sf_simulate(&p, &a, &ta, &na), SF_OK);
#ifdef _OPENMP
    omp_set_num_threads(3);
#endif
    ck_assert_int_eq(sf_simulate(&p, &b, &tb, &nb), SF_OK);
#ifdef _OPENMP
    omp_set_num_threads(nthr);
#endif
    size_t np = sf_npix(p.nx, p.ny);
    ck_assert_int_eq(memcmp(a.data, b.data, np * sizeof(float)), 0);
    ck_assert_int_eq(na, nb);
    ck_assert_int_eq(memcmp(ta, tb, (size_t)na * sizeof *ta), 0);
    p.seed = 8;
    ck_assert_int_eq(sf_simulate(&p, &c, NULL, NULL), SF_OK);
    size_t ndiff = 0;
    for (size_t k = 0; k < np; k++)
        ndiff += a.data[k] != c.data[k];
    ck_assert_uint_gt(ndiff, np * 99 / 100);
    /* the same truth as with white noise, and sky - noise-only sky equal in both */
    p.seed = 7;
    p.corr_noise = 0;
    ck_assert_int_eq(sf_simulate(&p, &w, &tw, &nw), SF_OK);
    ck_assert_int_eq(nw, na);
    ck_assert_int_eq(memcmp(ta, tw, (size_t)na * sizeof *ta), 0);
    p.nsrc = 0;
    ck_assert_int_eq(sf_simulate(&p, &wn, NULL, NULL), SF_OK);
    p.corr_noise = 1;
    ck_assert_int_eq(sf_simulate(&p, &cn, NULL, NULL), SF_OK);
    double worst = 0;
    for (size_t k = 0; k < np; k++) {
        double d = ((double)a.data[k] - cn.data[k]) - ((double)w.data[k] - wn.data[k]);
        worst = fmax(worst, fabs(d));
    }
    ck_assert_msg(worst < 1e-3 * p.noise, "sources differ between white and correlated noise by %g",
                  worst);
    sf_image_free(&a, NULL);
    sf_image_free(&b, NULL);
    sf_image_free(&c, NULL);
    sf_image_free(&w, NULL);
    sf_image_free(&wn, NULL);
    sf_image_free(&cn, NULL);
    free(ta);
    free(tb);
    free(tw);
}
END_TEST

static void expect_param_error(const sf_sim_params *p, const char *word)
{
    sf_image im = {0};
    sf_sim_source *t = NULL;
    int n = -1;
    sf_errclear();
    ck_assert_int_eq(sf_simulate(p, &im, &t, &n), SF_ERR_PARAM);
    ck_assert_msg(strstr(sf_errdetail(), word) != NULL, "detail '%s' does not name '%s'",
                  sf_errdetail(), word);
    ck_assert_ptr_null(im.data);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(n, -1);
}

START_TEST(test_validation)
{
    sf_sim_params p, q;
    sf_sim_params_default(&p);
    p.nx = p.ny = 16;
#define BAD(field, value, word)                                                      \
    do {                                                                             \
        q = p;                                                                       \
        q.field = value;                                                             \
        expect_param_error(&q, word);                                                \
    } while (0)
    BAD(nx, 0, "nx = 0");
    BAD(nx, 65537, "nx = 65537");
    BAD(ny, -3, "ny = -3");
    BAD(noise, 0, "noise");
    BAD(noise, NAN, "noise");
    BAD(bmaj_arcsec, 5, "bmaj = 5");
    BAD(bmin_arcsec, 0, "bmin = 0");
    BAD(pix_arcsec, -1, "pix = -1");
    BAD(snr_min, 0, "snr_min = 0");
    BAD(snr_max, 2, "snr_max = 2");
    BAD(ext_frac, 1.5, "ext_frac = 1.5");
    BAD(ext_frac, -0.1, "ext_frac");
    BAD(dec_deg, 91, "dec = 91");
    BAD(pix_arcsec, 36000, "SIN");
    BAD(corr_noise, 2, "corr_noise = 2");
    BAD(corr_noise, -1, "corr_noise = -1");
#undef BAD
    sf_image im = {0};
    ck_assert_int_eq(sf_simulate(NULL, &im, NULL, NULL), SF_ERR_PARAM);
    /* edges of the valid ranges */
    q = p;
    q.dec_deg = -90;
    q.ext_frac = 1;
    q.bmin_arcsec = q.bmaj_arcsec;
    q.snr_max = q.snr_min;
    ck_assert_int_eq(sf_simulate(&q, &im, NULL, NULL), SF_OK);
    sf_image_free(&im, NULL);
    /* correlated noise on tiny images and with a beam far below a pixel */
    q = p;
    q.corr_noise = 1;
    q.nx = 1;
    q.ny = 3;
    ck_assert_int_eq(sf_simulate(&q, &im, NULL, NULL), SF_OK);
    ck_assert(isfinite(im.data[0]) && isfinite(im.data[2]));
    sf_image_free(&im, NULL);
    q.nx = q.ny = 64;
    q.bmaj_arcsec = q.bmin_arcsec = 0.1; /* the kernel is one tap: white noise */
    ck_assert_int_eq(sf_simulate(&q, &im, NULL, NULL), SF_OK);
    ck_assert(fabs(image_rms(&im) / q.noise - 1) < 0.1);
    sf_image_free(&im, NULL);
}
END_TEST

static char tmpdir[256];

static int count_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void cleanup_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    if (!d)
        return;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            remove(path);
        }
    closedir(d);
    rmdir(dir);
}

START_TEST(test_write_read_back)
{
    sf_sim_params p;
    char fpath[512], cpath[512], line[1024];
    sf_image im = {0};
    sf_sim_source *t = NULL;
    int n = 0, fs = 0, naxis = 0;
    long naxes[4] = {0};
    fitsfile *f = NULL;
    strcpy(tmpdir, "/tmp/sftest_simXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    sf_sim_params_default(&p);
    p.nx = 120;
    p.ny = 70;
    p.nsrc = 4;
    p.seed = 99;
    snprintf(fpath, sizeof fpath, "%s/sim.fits", tmpdir);
    snprintf(cpath, sizeof cpath, "%s/sim.truth.csv", tmpdir);
    ck_assert_msg(sf_simulate_write(&p, fpath, cpath) == SF_OK, "%s", sf_errdetail());
    ck_assert_int_eq(count_dir(tmpdir), 2); /* no temporary files left */
    /* overwriting an existing output works */
    ck_assert_int_eq(sf_simulate_write(&p, fpath, cpath), SF_OK);
    ck_assert_int_eq(count_dir(tmpdir), 2);

    ck_assert_int_eq(fits_open_file(&f, fpath, READONLY, &fs), 0);
    fits_get_img_dim(f, &naxis, &fs);
    ck_assert_int_eq(naxis, 4);
    fits_get_img_size(f, 4, naxes, &fs);
    ck_assert_int_eq(naxes[0], 120);
    ck_assert_int_eq(naxes[1], 70);
    ck_assert_int_eq(naxes[2], 1);
    ck_assert_int_eq(naxes[3], 1);
    char sval[FLEN_VALUE];
    double d;
    int iv;
    fits_read_key(f, TSTRING, "BUNIT", sval, NULL, &fs);
    ck_assert_str_eq(sval, "JY/BEAM");
    fits_read_key(f, TSTRING, "CTYPE1", sval, NULL, &fs);
    ck_assert_str_eq(sval, "RA---SIN");
    fits_read_key(f, TSTRING, "CTYPE2", sval, NULL, &fs);
    ck_assert_str_eq(sval, "DEC--SIN");
    fits_read_key(f, TSTRING, "CTYPE3", sval, NULL, &fs);
    ck_assert_str_eq(sval, "FREQ");
    fits_read_key(f, TSTRING, "CTYPE4", sval, NULL, &fs);
    ck_assert_str_eq(sval, "STOKES");
    fits_read_key(f, TDOUBLE, "BMAJ", &d, NULL, &fs);
    ck_assert_double_eq(d, 10.0 / 3600); /* exact round trip */
    fits_read_key(f, TDOUBLE, "BMIN", &d, NULL, &fs);
    ck_assert_double_eq(d, 7.0 / 3600);
    fits_read_key(f, TDOUBLE, "BPA", &d, NULL, &fs);
    ck_assert_double_eq_tol(d, 30, 1e-12);
    fits_read_key(f, TDOUBLE, "CRPIX1", &d, NULL, &fs);
    ck_assert_double_eq(d, 61);
    fits_read_key(f, TDOUBLE, "CRPIX2", &d, NULL, &fs);
    ck_assert_double_eq(d, 36);
    fits_read_key(f, TDOUBLE, "CDELT1", &d, NULL, &fs);
    ck_assert_double_eq(d, -2.0 / 3600);
    fits_read_key(f, TDOUBLE, "CRVAL3", &d, NULL, &fs);
    ck_assert_double_eq(d, 1.4e9);
    fits_read_key(f, TINT, "SIMNSRC", &iv, NULL, &fs);
    ck_assert_int_eq(iv, 4);
    fits_read_key(f, TINT, "SIMSEED", &iv, NULL, &fs);
    ck_assert_int_eq(iv, 99);
    ck_assert_int_eq(fs, 0);
    /* white noise: no SIMCORR card (files as before the option existed) */
    ck_assert_int_eq(fits_read_key(f, TSTRING, "SIMCORR", sval, NULL, &fs), KEY_NO_EXIST);
    fs = 0;
    fits_clear_errmsg();
    /* pixels identical to sf_simulate's */
    float *buf = malloc(sizeof(float) * 120 * 70);
    ck_assert_ptr_nonnull(buf);
    fits_read_img(f, TFLOAT, 1, 120 * 70, NULL, buf, NULL, &fs);
    ck_assert_int_eq(fs, 0);
    fits_close_file(f, &fs);
    ck_assert_int_eq(sf_simulate(&p, &im, &t, &n), SF_OK);
    ck_assert_int_eq(memcmp(buf, im.data, sizeof(float) * 120 * 70), 0);
    free(buf);

    FILE *fp = fopen(cpath, "r");
    ck_assert_ptr_nonnull(fp);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, fp));
    ck_assert(strncmp(line, "# skyfind simulate truth catalogue; x,y are 0-based", 51) == 0);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, fp));
    ck_assert_str_eq(line, "id,x,y,ra,dec,peak,flux,maj_arcsec,min_arcsec,pa_deg,pair,"
                           "conv_maj_arcsec,conv_min_arcsec,conv_pa_deg\n");
    int rows = 0, id, pair;
    double x, y, ra, dec, v[5], conv[3];
    while (fgets(line, sizeof line, fp)) {
        ck_assert_int_eq(sscanf(line, "%d,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%d,%lf,%lf,%lf", &id,
                                &x, &y, &ra, &dec, &v[0], &v[1], &v[2], &v[3], &v[4], &pair,
                                &conv[0], &conv[1], &conv[2]),
                         14);
        ck_assert_int_eq(id, rows + 1);
        ck_assert_double_eq_tol(conv[0], t[rows].conv_maj_arcsec, 1e-8 * conv[0]);
        ck_assert_double_eq_tol(conv[1], t[rows].conv_min_arcsec, 1e-8 * conv[1]);
        ck_assert_double_eq_tol(conv[2], t[rows].conv_pa_deg, 1e-7);
        ck_assert_double_eq_tol(x, t[rows].x, 1e-6);
        ck_assert_double_eq_tol(dec, t[rows].dec, 1e-11);
        ck_assert_double_eq_tol(ra, t[rows].ra, 1e-11);
        rows++;
    }
    fclose(fp);
    ck_assert_int_eq(rows, 4);
    sf_image_free(&im, NULL);
    free(t);

    /* errors name the file, and leave nothing behind */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/folder/x.fits", tmpdir);
    ck_assert_int_eq(sf_simulate_write(&p, bad, NULL), SF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), bad));
    snprintf(fpath, sizeof fpath, "%s/other.fits", tmpdir);
    snprintf(bad, sizeof bad, "%s/no/such/folder/x.csv", tmpdir);
    ck_assert_int_eq(sf_simulate_write(&p, fpath, bad), SF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), bad));
    ck_assert_int_eq(count_dir(tmpdir), 2);
    ck_assert_int_eq(access(fpath, F_OK), -1);
    /* beam-correlated noise is marked in the header */
    p.corr_noise = 1;
    snprintf(fpath, sizeof fpath, "%s/corr.fits", tmpdir);
    ck_assert_int_eq(sf_simulate_write(&p, fpath, NULL), SF_OK);
    ck_assert_int_eq(fits_open_file(&f, fpath, READONLY, &fs), 0);
    fits_read_key(f, TSTRING, "SIMCORR", sval, NULL, &fs);
    ck_assert_int_eq(fs, 0);
    ck_assert_str_eq(sval, "BEAM");
    fits_close_file(f, &fs);
    remove(fpath);
    p.corr_noise = 0;
    p.noise = -1;
    ck_assert_int_eq(sf_simulate_write(&p, fpath, NULL), SF_ERR_PARAM);
    ck_assert_int_eq(count_dir(tmpdir), 2);
    cleanup_dir(tmpdir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simulate");
    TCase *tc = tcase_create("simulate");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_determinism);
    tcase_add_test(tc, test_noise_statistics);
    tcase_add_loop_test(tc, test_point_source, 0, 5);
    tcase_add_loop_test(tc, test_extended_source, 0, 5);
    tcase_add_test(tc, test_beam_position_angle);
    tcase_add_test(tc, test_non_square_and_wcs);
    tcase_add_test(tc, test_correlated_noise);
    tcase_add_test(tc, test_correlated_noise_edges);
    tcase_add_test(tc, test_correlated_determinism);
    tcase_add_test(tc, test_validation);
    tcase_add_test(tc, test_write_read_back);
    suite_add_tcase(s, tc);
    return sftest_main(s, NULL, 0);
}
