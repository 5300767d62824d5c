/* Check suite of the measure stage's CPU twin on constructed cases with
 * known answers: the shape (a, b, theta) of sampled elliptical Gaussians
 * against the truth, SExtractor's angle conventions, the flag bits (edge,
 * NaN, truncated, merged) and boxes, background subtraction with global
 * levels and maps, the noise at the peak, the signal-to-noise ratio and the
 * error formulas. (The GPU version equals the CPU twin byte for byte:
 * test_measure.c.) */
#include "measure_cases.h"

/* Image of nx x ny pixels, all zero, and an empty label map. */
static void blank_case(int nx, int ny, sf_image *im, sf_labels *lab)
{
    ck_assert_int_eq(sf_image_alloc(im, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(lab, nx, ny, SF_HOST, NULL), SF_OK);
    memset(im->data, 0, sf_npix(nx, ny) * sizeof(float));
    memset(lab->data, 0, sf_npix(nx, ny) * sizeof(int32_t));
}

/* Angle difference modulo 180 degrees, in (-90, 90]. */
static double dtheta(double a, double b)
{
    double d = fmod(a - b, 180.0);
    if (d > 90)
        d -= 180;
    if (d <= -90)
        d += 180;
    return d;
}

/* ---- shape ---------------------------------------------------------------- */

/* Elliptical Gaussians of known sigmas (a, b) and angle, sampled at pixel
 * centres on a grid 8 sigma wide, measured as one island: the moments give
 * a, b within 1% (in fact far better) and theta within 0.2 degree. */
START_TEST(test_gaussian_shape)
{
    static const double cases[][3] = {{6, 3, 30},  {5, 2, -60}, {3, 1.5, 90}, {7, 3.5, 0},
                                      {4, 3.9, 75}, {2.5, 1, -15}, {9, 2, 89}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const double sa = cases[c][0], sb = cases[c][1], th = cases[c][2] * M_PI / 180;
        const int n = 2 * (int)ceil(8 * sa) + 1;
        const double cx = n / 2 + 0.3, cy = n / 2 - 0.4, ct = cos(th), st = sin(th);
        sf_image im = {0};
        sf_labels lab = {0};
        sf_source *o;
        double M;
        ref_src *r;
        blank_case(n, n, &im, &lab);
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++) {
                double dx = x - cx, dy = y - cy;
                double u = dx * ct + dy * st, v = -dx * st + dy * ct;
                im.data[(size_t)y * n + x] = (float)(100 * exp(-0.5 * (u * u / (sa * sa) + v * v / (sb * sb))));
                lab.data[(size_t)y * n + x] = 1;
            }
        o = run_cpu(&im, &lab, 1);
        ck_assert_msg(fabs(o[0].a / sa - 1) < 0.01 && fabs(o[0].b / sb - 1) < 0.01,
                      "case %zu: a %g b %g, want %g %g", c, o[0].a, o[0].b, sa, sb);
        ck_assert_msg(fabs(dtheta(o[0].theta, cases[c][2])) < 0.2,
                      "case %zu: theta %.6f, want %g", c, o[0].theta, cases[c][2]);
        ck_assert(o[0].theta > -90 && o[0].theta <= 90);
        ck_assert(fabs(o[0].x - cx) < 1e-6 && fabs(o[0].y - cy) < 1e-6);
        /* x2 = a^2 cos^2 + b^2 sin^2, y2 = a^2 sin^2 + b^2 cos^2, xy = (a^2 - b^2) sin cos */
        ck_assert(fabs(o[0].x2 - (sa * sa * ct * ct + sb * sb * st * st)) < 1e-3 * sa * sa);
        ck_assert(fabs(o[0].y2 - (sa * sa * st * st + sb * sb * ct * ct)) < 1e-3 * sa * sa);
        ck_assert(fabs(o[0].xy - (sa * sa - sb * sb) * st * ct) < 1e-3 * sa * sa);
        r = reference(&im, &lab, 1, &M);
        ck_assert_int_eq(check_ref("gaussian", o, r, 1, M, n, n), 0);
        free(r);
        free(o);
        sf_image_free(&im, NULL);
        sf_labels_free(&lab, NULL);
    }
}
END_TEST

/* SExtractor's conventions on 3-pixel lines (singular islands: 1/12 added):
 * theta counter-clockwise from +x, in (-90, 90]; a circle gets 45. */
START_TEST(test_theta_conventions)
{
    static const int lines[][6] = {{3, 4, 4, 4, 5, 4},  /* along x */
                                   {4, 3, 4, 4, 4, 5},  /* along y */
                                   {3, 3, 4, 4, 5, 5},  /* up-right */
                                   {3, 5, 4, 4, 5, 3}}; /* down-right */
    static const double want[] = {0, 90, 45, -45};
    for (int k = 0; k < 4; k++) {
        sf_image im = {0};
        sf_labels lab = {0};
        sf_source *o;
        blank_case(9, 9, &im, &lab);
        for (int j = 0; j < 3; j++) {
            size_t i = (size_t)lines[k][2 * j + 1] * 9 + lines[k][2 * j];
            im.data[i] = j == 1 ? 2.0f : 1.0f;
            lab.data[i] = 1;
        }
        o = run_cpu(&im, &lab, 1);
        ck_assert_msg(o[0].theta == want[k], "line %d: theta %.17g, want %g", k, o[0].theta, want[k]);
        ck_assert(o[0].a > o[0].b && o[0].b > 0.28 && o[0].b < 0.29); /* b = sqrt(1/12) */
        free(o);
        sf_image_free(&im, NULL);
        sf_labels_free(&lab, NULL);
    }
    { /* a symmetric blob: x2 == y2, xy == 0: SExtractor's pi/4 */
        sf_image im = {0};
        sf_labels lab = {0};
        sf_source *o;
        blank_case(5, 5, &im, &lab);
        for (int y = 1; y <= 3; y++)
            for (int x = 1; x <= 3; x++) {
                im.data[y * 5 + x] = (x == 2 && y == 2) ? 4.0f : (x == 2 || y == 2) ? 2.0f : 1.0f;
                lab.data[y * 5 + x] = 1;
            }
        o = run_cpu(&im, &lab, 1);
        ck_assert(o[0].x2 == o[0].y2 && o[0].xy == 0 && o[0].theta == 45.0 && o[0].a == o[0].b);
        ck_assert(o[0].xmin == 1 && o[0].xmax == 3 && o[0].ymin == 1 && o[0].ymax == 3);
        ck_assert_int_eq(o[0].flags, 0);
        free(o);
        sf_image_free(&im, NULL);
        sf_labels_free(&lab, NULL);
    }
}
END_TEST

/* ---- flags and boxes --------------------------------------------------------- */

static void put(sf_image *im, sf_labels *lab, int x, int y, float v, int l)
{
    im->data[(size_t)y * im->nx + x] = v;
    lab->data[(size_t)y * im->nx + x] = l;
}

START_TEST(test_flags)
{
    const int nx = 24, ny = 14;
    sf_image im = {0};
    sf_labels lab = {0};
    sf_mask mk = {0};
    sf_measure_aux aux = {0};
    sf_source *o;
    blank_case(nx, ny, &im, &lab);
    /* 1: touches the left border, peak inside: EDGE */
    put(&im, &lab, 0, 5, 1, 1), put(&im, &lab, 1, 5, 2, 1), put(&im, &lab, 2, 5, 3, 1);
    /* 2: peak on the top row: EDGE | TRUNCATED */
    put(&im, &lab, 5, ny - 2, 1, 2), put(&im, &lab, 5, ny - 1, 3, 2);
    /* 3: a NaN image pixel diagonal to it (not labelled): NAN */
    put(&im, &lab, 8, 3, 2, 3), put(&im, &lab, 9, 3, 1, 3);
    im.data[4 * nx + 10] = NAN;
    /* 4: a blank pixel inside the island: NAN, and not counted */
    put(&im, &lab, 13, 3, 2, 4), put(&im, &lab, 14, 3, NAN, 4), put(&im, &lab, 15, 3, 1, 4);
    put(&im, &lab, 14, 2, 1.5f, 4);
    /* 5: two separate maxima, both seeds: MERGED, npeaks 2 */
    for (int x = 4; x <= 10; x++)
        put(&im, &lab, x, 8, (float)(x == 5 || x == 9 ? 5 : 1), 5);
    /* 6: two maxima, one of them above the flood threshold only: npeaks 1 */
    for (int x = 13; x <= 19; x++)
        put(&im, &lab, x, 8, (float)(x == 14 || x == 18 ? 5 : 1), 6);
    /* 7: a plateau of two equal maxima: no strict maximum, npeaks 0 */
    put(&im, &lab, 13, 11, 1, 7), put(&im, &lab, 14, 11, 4, 7), put(&im, &lab, 15, 11, 4, 7);
    put(&im, &lab, 16, 11, 1, 7), put(&im, &lab, 15, 12, 2, 7);

    ck_assert_int_eq(sf_mask_alloc(&mk, nx, ny, SF_HOST, NULL), SF_OK);
    for (size_t i = 0; i < sf_npix(nx, ny); i++)
        mk.data[i] = lab.data[i] ? 1 : 0;
    mk.data[8 * nx + 18] = 2; /* flood only */
    mk.data[8 * nx + 9] = 3;  /* any mask with bit 0 set is a seed */
    aux.mask = &mk;
    o = run_cpu_aux(&im, &lab, 7, &aux, NULL);
    ck_assert_int_eq(o[0].flags, SF_SRC_EDGE);
    ck_assert_int_eq(o[1].flags, SF_SRC_EDGE | SF_SRC_TRUNCATED);
    ck_assert_int_eq(o[2].flags, SF_SRC_NAN);
    ck_assert_int_eq(o[3].flags, SF_SRC_NAN);
    ck_assert(o[3].npix == 3 && o[3].flux_sum == 4.5 && o[3].x == 13 + 3.5 / 4.5);
    ck_assert(o[3].npeaks == 1 && o[3].ymin == 2 && o[3].ymax == 3);
    ck_assert_int_eq(o[4].flags, SF_SRC_MERGED);
    ck_assert_int_eq(o[4].npeaks, 2);
    ck_assert(o[4].xmin == 4 && o[4].xmax == 10 && o[4].ymin == 8 && o[4].ymax == 8);
    ck_assert(o[4].peak == 5 && o[4].peak_x == 5 && o[4].peak_y == 8);
    ck_assert_int_eq(o[5].flags, 0);
    ck_assert_int_eq(o[5].npeaks, 1);
    ck_assert_int_eq(o[6].npeaks, 0);
    ck_assert_int_eq(o[6].flags, 0);
    ck_assert(o[6].xmin == 13 && o[6].xmax == 16 && o[6].ymin == 11 && o[6].ymax == 12);
    ck_assert_int_eq(o[0].npeaks, 1);
    ck_assert_int_eq(o[2].npeaks, 1);
    free(o);
    /* no mask: npeaks -1, never MERGED */
    o = run_cpu(&im, &lab, 7);
    ck_assert(o[4].npeaks == -1 && o[4].flags == 0 && o[0].flags == SF_SRC_EDGE);
    free(o);
    sf_mask_free(&mk, NULL);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

/* ---- background, noise, errors -------------------------------------------------- */

/* A Gaussian on a background: level 10 + optional slope, noise rms. The
 * island is where the source exceeds 0.5. */
static int bkg_case(int slope, sf_image *im, sf_labels *lab, sf_image *bm, sf_image *rm)
{
    const int n = 21;
    int npix = 0;
    blank_case(n, n, im, lab);
    ck_assert_int_eq(sf_image_alloc(bm, n, n, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_image_alloc(rm, n, n, SF_HOST, NULL), SF_OK);
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
            size_t i = (size_t)y * n + x;
            double g = 20 * exp(-0.5 * ((x - 9.6) * (x - 9.6) / 6.0 + (y - 11.2) * (y - 11.2) / 3.0));
            bm->data[i] = (float)(10 + (slope ? 0.1 * x : 0));
            rm->data[i] = (float)(slope ? 1 + 0.05 * y : 2);
            im->data[i] = (float)(bm->data[i] + g);
            if (g > 0.5) {
                lab->data[i] = 1;
                npix++;
            }
        }
    return npix;
}

/* Direct long-double measurements with m = v - b (float32), noise r. */
static void direct(const sf_image *im, const sf_labels *lab, const sf_image *bm,
                   const sf_image *rm, int subtract, long double *F, long double *xc,
                   long double *yc, long double *r2, long double *ex2, long double *ey2, float *pk)
{
    long double sx = 0, sy = 0, s2x = 0, s2y = 0;
    *F = *r2 = 0;
    *pk = -INFINITY;
    for (size_t i = 0; i < sf_npix(im->nx, im->ny); i++) {
        float m = subtract ? im->data[i] - bm->data[i] : im->data[i];
        if (!lab->data[i])
            continue;
        *F += m;
        sx += (long double)m * (i % im->nx);
        sy += (long double)m * (i / im->nx);
        *r2 += (long double)rm->data[i] * rm->data[i];
        *pk = m > *pk ? m : *pk;
    }
    *xc = sx / *F;
    *yc = sy / *F;
    for (size_t i = 0; i < sf_npix(im->nx, im->ny); i++) {
        long double dx = (long double)(i % im->nx) - *xc, dy = (long double)(i / im->nx) - *yc;
        if (!lab->data[i])
            continue;
        s2x += (long double)rm->data[i] * rm->data[i] * dx * dx;
        s2y += (long double)rm->data[i] * rm->data[i] * dy * dy;
    }
    *ex2 = s2x / (*F * *F);
    *ey2 = s2y / (*F * *F);
}

static void check_direct(const char *what, const sf_source *o, const sf_image *im,
                         const sf_labels *lab, const sf_image *bm, const sf_image *rm,
                         int subtract)
{
    long double F, xc, yc, r2, ex2, ey2;
    float pk;
    direct(im, lab, bm, rm, subtract, &F, &xc, &yc, &r2, &ex2, &ey2, &pk);
    ck_assert_msg(near(o->flux_sum, F, 1e-12 * fabsl(F)), "%s: flux %.17g want %.17Lg", what,
                  o->flux_sum, F);
    ck_assert_msg(near(o->x, xc, 1e-12) && near(o->y, yc, 1e-12), "%s: centroid", what);
    ck_assert_msg(o->peak == pk, "%s: peak %.9g want %.9g", what, o->peak, pk);
    ck_assert_msg(near(o->flux_err, sqrtl(r2), 1e-13 * sqrtl(r2)), "%s: flux_err %.17g want %.17Lg",
                  what, o->flux_err, sqrtl(r2));
    ck_assert_msg(near(o->x_err, sqrtl(ex2), 1e-11 * sqrtl(ex2)) &&
                      near(o->y_err, sqrtl(ey2), 1e-11 * sqrtl(ey2)),
                  "%s: x_err %.17g y_err %.17g want %.17Lg %.17Lg", what, o->x_err, o->y_err,
                  sqrtl(ex2), sqrtl(ey2));
    {
        size_t ip = (size_t)o->peak_y * im->nx + o->peak_x;
        ck_assert_msg(o->bkg == bm->data[ip] && o->rms == rm->data[ip], "%s: bkg/rms at the peak",
                      what);
        ck_assert_msg(o->snr == (double)o->peak / (double)rm->data[ip], "%s: snr", what);
    }
}

START_TEST(test_subtract_global)
{
    sf_image im = {0}, bm = {0}, rm = {0};
    sf_labels lab = {0};
    sf_bkg_stats st = {0};
    sf_measure_aux aux = {&st, NULL, NULL, NULL};
    sf_measure_params p;
    sf_source *yes, *no, *none;
    int npix = bkg_case(0, &im, &lab, &bm, &rm);
    st.median = 10;
    st.sigma = 2;
    sf_measure_params_default(&p);
    ck_assert_int_eq(p.subtract, 1);
    yes = run_cpu_aux(&im, &lab, 1, &aux, &p);
    check_direct("global, subtract=yes", yes, &im, &lab, &bm, &rm, 1);
    ck_assert(yes[0].npix == npix && yes[0].bkg == 10 && yes[0].rms == 2);
    ck_assert(yes[0].flux_err == 2 * sqrt((double)npix));
    p.subtract = 0;
    no = run_cpu_aux(&im, &lab, 1, &aux, &p);
    check_direct("global, subtract=no", no, &im, &lab, &bm, &rm, 0);
    /* the background is still reported, and pulls the raw centroid to the
     * island's middle */
    ck_assert(no[0].bkg == 10 && no[0].peak > yes[0].peak + 9.99);
    ck_assert(fabs(no[0].flux_sum - yes[0].flux_sum - 10.0 * npix) < 1e-9 * no[0].flux_sum);
    ck_assert(fabs(no[0].x2 - yes[0].x2) > 0.1);
    /* without a background stage: nothing subtracted, noise unknown */
    none = run_cpu_aux(&im, &lab, 1, NULL, NULL);
    ck_assert(none[0].flux_sum == no[0].flux_sum && none[0].x == no[0].x);
    ck_assert(isnan(none[0].bkg) && isnan(none[0].rms) && isnan(none[0].snr) &&
              isnan(none[0].flux_err) && isnan(none[0].x_err));
    free(yes);
    free(no);
    free(none);
    sf_image_free(&im, NULL);
    sf_image_free(&bm, NULL);
    sf_image_free(&rm, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

START_TEST(test_subtract_maps)
{
    sf_image im = {0}, bm = {0}, rm = {0};
    sf_labels lab = {0};
    sf_bkg_stats st = {0};
    sf_measure_aux aux = {&st, &bm, &rm, NULL};
    sf_measure_params p;
    sf_source *o;
    bkg_case(1, &im, &lab, &bm, &rm);
    st.median = 1000; /* ignored where maps exist */
    st.sigma = 1000;
    sf_measure_params_default(&p);
    o = run_cpu_aux(&im, &lab, 1, &aux, &p);
    check_direct("maps, subtract=yes", o, &im, &lab, &bm, &rm, 1);
    free(o);
    p.subtract = 0;
    o = run_cpu_aux(&im, &lab, 1, &aux, &p);
    check_direct("maps, subtract=no", o, &im, &lab, &bm, &rm, 0);
    free(o);
    /* the noise unknown at one island pixel: errors NaN, the rest unchanged */
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        if (lab.data[i] && (int)(i % im.nx) != 9) {
            rm.data[i] = NAN;
            break;
        }
    o = run_cpu_aux(&im, &lab, 1, &aux, NULL);
    ck_assert(isnan(o[0].flux_err) && isnan(o[0].x_err) && isnan(o[0].y_err));
    ck_assert(isfinite(o[0].snr) && isfinite(o[0].a));
    free(o);
    /* a NaN level: that pixel is not measurable (NAN flag, not counted) */
    {
        long long n0;
        o = run_cpu_aux(&im, &lab, 1, &aux, NULL);
        n0 = o[0].npix;
        free(o);
        for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
            if (lab.data[i] && (int)(i % im.nx) != 9) {
                bm.data[i] = NAN;
                break;
            }
        o = run_cpu_aux(&im, &lab, 1, &aux, NULL);
        ck_assert(o[0].npix == n0 - 1 && (o[0].flags & SF_SRC_NAN));
        free(o);
    }
    sf_image_free(&im, NULL);
    sf_image_free(&bm, NULL);
    sf_image_free(&rm, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

/* One pixel: SExtractor's singular position error, E = sum r^2 / 12 / F^2
 * added to ERRX2 = ERRY2 = 0: x_err = sqrt(0.08333) * rms / F. */
START_TEST(test_singular_errors)
{
    sf_image im = {0};
    sf_labels lab = {0};
    sf_bkg_stats st = {0};
    sf_measure_aux aux = {&st, NULL, NULL, NULL};
    sf_source *o;
    blank_case(7, 7, &im, &lab);
    put(&im, &lab, 3, 3, 15, 1);
    st.median = 10;
    st.sigma = 2;
    o = run_cpu_aux(&im, &lab, 1, &aux, NULL);
    ck_assert(o[0].flux_sum == 5 && o[0].peak == 5 && o[0].snr == 2.5 && o[0].flux_err == 2);
    ck_assert(fabs(o[0].x_err - sqrt(4 * 0.08333 / 25)) < 1e-15 && o[0].x_err == o[0].y_err);
    free(o);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("measure_props");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gaussian_shape);
    tcase_add_test(tc, test_theta_conventions);
    tcase_add_test(tc, test_flags);
    tcase_add_test(tc, test_subtract_global);
    tcase_add_test(tc, test_subtract_maps);
    tcase_add_test(tc, test_singular_errors);
    suite_add_tcase(s, tc);
    return sftest_main(s, NULL, 0);
}
