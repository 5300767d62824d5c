/* Check suite for the sky simulator (src/sim/simulate.c): determinism, noise
 * statistics, point and extended source peaks and fluxes, the beam's position
 * angle, parameter validation, and the FITS + truth CSV written to disk. */
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
    char fpath[512], cpath[512], line[256];
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
    ck_assert_str_eq(line, "id,x,y,ra,dec,peak,flux,maj_arcsec,min_arcsec,pa_deg,pair\n");
    int rows = 0, id;
    double x, y, ra, dec;
    while (fgets(line, sizeof line, fp)) {
        ck_assert_int_eq(sscanf(line, "%d,%lf,%lf,%lf,%lf", &id, &x, &y, &ra, &dec), 5);
        ck_assert_int_eq(id, rows + 1);
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
    tcase_add_test(tc, test_validation);
    tcase_add_test(tc, test_write_read_back);
    suite_add_tcase(s, tc);
    return sftest_main(s, NULL, 0);
}
