/* Check suite of the measure stage: the 128-bit fixed-point sums, the CPU
 * twin against the long-double reference of measure_cases.h (sums,
 * centroids, second moments, boxes, flags, a/b/theta against libm), and the
 * GPU version against the CPU twin byte for byte (memcmp of the sf_source
 * arrays), with and without background maps, global levels and masks. */
#include "measure_cases.h"

/* ---- fixsum -------------------------------------------------------------- */

static __int128 as_i128(sf_fix128 a) { return (__int128)((unsigned __int128)(uint64_t)a.hi << 64 | a.lo); }

START_TEST(test_fixsum_carry)
{
    sf_fix128 a = {UINT64_MAX, 0}, one = {1, 0}, t;
    sf_fix_add(&a, one); /* carry across the 64-bit boundary */
    ck_assert(a.lo == 0 && a.hi == 1);
    t = sf_fix_from_double(-1.0);
    ck_assert(t.lo == UINT64_MAX && t.hi == -1);
    sf_fix_add(&t, one);
    ck_assert(sf_fix_is_zero(t));
    t = sf_fix_from_double(0x1p64);
    ck_assert(t.lo == 0 && t.hi == 1);
    t = sf_fix_from_double(-0x1p64 - 0x1p12); /* borrow across the boundary */
    ck_assert(as_i128(t) == -((__int128)1 << 64) - 4096);
    t = sf_fix_from_double(0x1p98 + 0x1p50);
    ck_assert(as_i128(t) == ((__int128)1 << 98) + ((__int128)1 << 50));
    t = sf_fix_from_double(2.5); /* rint: ties to even */
    ck_assert(t.lo == 2 && t.hi == 0);
    t = sf_fix_from_double(-0.0);
    ck_assert(sf_fix_is_zero(t));
    /* back to double: exact small negatives (magnitude conversion), scale */
    ck_assert(sf_fix_to_double(sf_fix_from_double(-1.0), 0) == -1.0);
    ck_assert(sf_fix_to_double(sf_fix_from_double(-3.0), 10) == -3.0 / 1024);
    ck_assert(sf_fix_to_double(sf_fix_from_double(-0x1p100), 0) == -0x1p100);
    ck_assert(sf_fix_to_double(sf_fix_from_double(0x1p70 + 0x1p20), 70) == 1.0 + 0x1p-50);
    ck_assert_int_eq(sf_fix_exponent(0.0), 0);
    ck_assert_int_eq(sf_fix_exponent(1.0), 65); /* 1 = 0.5 * 2^1 */
    ck_assert_int_eq(sf_fix_exponent(0.75), 66);
    ck_assert(sf_fkey(-0.0f) < sf_fkey(0.0f) && sf_fkey(-1.0f) < sf_fkey(-0.0f) &&
              sf_fkey(1.0f) < sf_fkey(2.0f) && sf_fkey(-FLT_MAX) >= 0x00800000u);
    ck_assert(sf_fkey_value(sf_fkey(-3.25f)) == -3.25f && sf_fkey_value(sf_fkey(1e-40f)) == 1e-40f);
}
END_TEST

START_TEST(test_fixsum_order)
{
    /* many mixed-sign terms near the top of the range, summed in three
     * orders: identical bits, equal to the __int128 sum */
    enum { N = 100000 };
    sftest_rng r = {42};
    sf_fix128 *t = malloc(N * sizeof *t), a = sf_fix_zero(), b = sf_fix_zero(), c = sf_fix_zero();
    __int128 ref = 0;
    ck_assert_ptr_nonnull(t);
    for (int i = 0; i < N; i++) {
        double v = rint((sftest_uniform(&r) - 0.4) * 0x1p97);
        t[i] = sf_fix_from_double(v);
        ck_assert(as_i128(t[i]) == (__int128)v);
        ref += (__int128)v;
    }
    for (int i = 0; i < N; i++)
        sf_fix_add(&a, t[i]);
    for (int i = N - 1; i >= 0; i--)
        sf_fix_add(&b, t[i]);
    for (int s = 0; s < 7; s++) /* strided, like threads */
        for (int i = s; i < N; i += 7)
            sf_fix_add(&c, t[i]);
    ck_assert(a.lo == b.lo && a.hi == b.hi && a.lo == c.lo && a.hi == c.hi);
    ck_assert(as_i128(a) == ref);
    free(t);
}
END_TEST

/* ---- CPU twin ------------------------------------------------------------- */

START_TEST(test_cpu_sizes)
{
    for (int k = 0; k < K_NKINDS; k++)
        for (int s = 0; sftest_sizes[s][0]; s++) {
            sf_image im = {0};
            sf_labels lab = {0};
            char what[64];
            int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
            if (sftest_quick() && nx * ny > 70000) /* under compute-sanitizer */
                continue;
            int n = make_case(k, nx, ny, 1000 + 17 * s + k, &im, &lab);
            snprintf(what, sizeof what, "cpu %s %dx%d", kind_name[k], nx, ny);
            cpu_vs_ref(what, &im, &lab, n);
            sf_image_free(&im, NULL);
            sf_labels_free(&lab, NULL);
        }
}
END_TEST

/* Exact results: carries in the low word, negative sums, zero flux. */
START_TEST(test_cpu_exact)
{
    sf_image im = {0};
    sf_labels lab = {0};
    sf_source *o;
    const float v[8] = {0.75f, 0.75f, -0.25f, -0.5f, -0.5f, 0.25f, -0.75f, 0.75f};
    const int l[8] = {1, 1, 1, 2, 2, 2, 3, 3};
    ck_assert_int_eq(sf_image_alloc(&im, 8, 1, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, 8, 1, SF_HOST, NULL), SF_OK);
    memcpy(im.data, v, sizeof v);
    memcpy(lab.data, l, sizeof l);
    o = run_cpu(&im, &lab, 3);
    /* M = 0.75, e = 66: 0.75 * 2^66 = 3 * 2^64, sums cross 2^64 both ways. Label 1:
     * peak at x = 0, sum m dx = 0.75 - 0.5 = 0.25, sum m dx^2 = 0.75 - 1 = -0.25 */
    ck_assert(o[0].flux_sum == 1.25 && o[0].x == 0.25 / 1.25 && o[0].y == 0.0);
    ck_assert(o[0].x2 == -0.25 / 1.25 - (0.25 / 1.25) * (0.25 / 1.25) && o[0].y2 == 0 &&
              o[0].xy == 0);
    ck_assert(o[0].peak == 0.75f && o[0].peak_x == 0 && o[0].npix == 3);
    ck_assert(o[0].xmin == 0 && o[0].xmax == 2 && o[0].ymin == 0 && o[0].ymax == 0);
    /* label 2: peak 0.25 at x = 5; dx = -2, -1, 0: sum m dx = 1.5, x = 5 - 2 = 3 */
    ck_assert(o[1].flux_sum == -0.75 && o[1].x == 3.0);
    ck_assert(o[1].x2 == (-0.5 * 4 - 0.5) / -0.75 - 4.0);
    ck_assert(o[1].peak == 0.25f && o[1].peak_x == 5);
    ck_assert(o[2].flux_sum == 0.0 && !signbit(o[2].flux_sum) && isnan(o[2].x) && isnan(o[2].y));
    ck_assert(isnan(o[2].x2) && isnan(o[2].a) && isnan(o[2].theta));
    ck_assert(o[2].peak == 0.75f && o[2].peak_x == 7 && o[2].peak_y == 0);
    /* a 1-row image: every island and every peak lies on the border */
    ck_assert_int_eq(o[0].flags, SF_SRC_EDGE | SF_SRC_TRUNCATED);
    ck_assert_int_eq(o[1].flags, SF_SRC_EDGE | SF_SRC_TRUNCATED);
    free(o);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

/* 1e-30 .. 1e30: sums resolve M*2^-66; tiny sources next to a huge one
 * measure flux 0 (centroid NaN) with exact npix and peak; on their own they
 * are measured to full precision. */
START_TEST(test_cpu_range)
{
    sf_image im = {0};
    sf_labels lab = {0};
    sf_source *o;
    ck_assert_int_eq(sf_image_alloc(&im, 6, 2, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, 6, 2, SF_HOST, NULL), SF_OK);
    for (int i = 0; i < 12; i++) {
        im.data[i] = (i % 6 < 3) ? 1e30f : 1e-30f * (1 + i);
        lab.data[i] = (i % 6 < 3) ? 1 : 2;
    }
    o = run_cpu(&im, &lab, 2);
    ck_assert(fabs(o[0].flux_sum - 6 * (double)1e30f) <= 1e-15 * 6e30 && fabs(o[0].x - 1) < 1e-15);
    ck_assert(fabs(o[0].x2 - 2.0 / 3.0) < 1e-15 && fabs(o[0].y2 - 0.25) < 1e-15);
    ck_assert(o[1].flux_sum == 0 && isnan(o[1].x) && o[1].npix == 6);
    ck_assert(o[1].peak == 1e-30f * 12 && o[1].peak_x == 5 && o[1].peak_y == 1);
    free(o);
    /* the tiny source alone: full precision */
    for (int i = 0; i < 12; i++)
        lab.data[i] = lab.data[i] == 2 ? 1 : 0;
    cpu_vs_ref("range tiny", &im, &lab, 1);
    o = run_cpu(&im, &lab, 1);
    ck_assert(o[0].npix == 6 && fabs(o[0].flux_sum / (48 * (double)1e-30f) - 1) < 1e-6);
    free(o);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

START_TEST(test_cpu_zero_and_errors)
{
    sf_image im = {0}, im2 = {0}, map = {0};
    sf_labels lab = {0};
    sf_mask mk = {0};
    sf_source o[2];
    sf_measure_aux aux = {0};
    sftest_noise_image(&im, 5, 4, 7, 0, 0);
    ck_assert_int_eq(sf_labels_alloc(&lab, 5, 4, SF_HOST, NULL), SF_OK);
    memset(lab.data, 0, 20 * sizeof *lab.data);
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 0, NULL, NULL, NULL), SF_OK); /* nlabels = 0 */
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, -1, NULL, NULL, o), SF_ERR_PARAM);
    lab.data[7] = 3;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, NULL, NULL, o), SF_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "(2, 1)"));
    lab.data[7] = -1;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, NULL, NULL, o), SF_ERR_INTERNAL);
    lab.data[7] = 1;
    sftest_noise_image(&im2, 4, 5, 7, 0, 0);
    ck_assert_int_eq(sf_measure_cpu(&im2, &lab, 2, NULL, NULL, o), SF_ERR_PARAM);
    im.loc = SF_DEVICE;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, NULL, NULL, o), SF_ERR_PARAM);
    im.loc = SF_HOST;
    /* maps: both or neither, the image's shape; the mask: the image's shape */
    sftest_noise_image(&map, 5, 4, 8, 0, 0);
    aux.bkg = &map;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, &aux, NULL, o), SF_ERR_PARAM);
    aux.rms = &im2;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, &aux, NULL, o), SF_ERR_PARAM);
    aux.rms = &map;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, &aux, NULL, o), SF_OK);
    sftest_random_mask(&mk, 4, 5, 1, 0.5);
    aux.mask = &mk;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, &aux, NULL, o), SF_ERR_PARAM);
    /* a label with no pixels: npix 0, NaN centroid and peak, positions -1 */
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, NULL, NULL, o), SF_OK);
    ck_assert(o[0].npix == 1 && o[0].peak_x == 2 && o[0].peak_y == 1);
    ck_assert(o[0].xmin == 2 && o[0].xmax == 2 && o[0].ymin == 1 && o[0].ymax == 1);
    /* one pixel: SExtractor's singular case, a = b = sqrt(1/12), theta 45 */
    ck_assert(o[0].x2 == 0 && o[0].y2 == 0 && o[0].xy == 0);
    ck_assert(fabs(o[0].a - sqrt(0.0833333)) < 1e-15 && o[0].a == o[0].b && o[0].theta == 45.0);
    ck_assert(o[1].id == 2 && o[1].npix == 0 && isnan(o[1].peak) && o[1].peak_x == -1);
    ck_assert(o[1].xmin == -1 && o[1].ymax == -1 && o[1].flags == 0 && isnan(o[1].a));
    sf_image_free(&im, NULL);
    sf_image_free(&im2, NULL);
    sf_image_free(&map, NULL);
    sf_mask_free(&mk, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

/* ---- GPU against the CPU twin -------------------------------------------- */

static const char *field_at(size_t off)
{
#define F(name) {offsetof(sf_source, name), #name}
    static const struct { size_t off; const char *name; } f[] = {
        F(id), F(flags), F(npix), F(flux_sum), F(x), F(y), F(peak), F(peak_x), F(peak_y),
        F(xmin), F(xmax), F(ymin), F(ymax), F(bkg), F(rms), F(npeaks), F(x2), F(y2), F(xy),
        F(a), F(b), F(theta), F(snr), F(flux_err), F(x_err), F(y_err)};
#undef F
    const char *name = "?";
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (off >= f[i].off)
            name = f[i].name;
    return name;
}

/* A device copy of a host buffer of nx x ny elements of size es with row
 * stride `stride` elements (>= nx; the padding poisoned). */
static void *upload(sf_gpu *g, const void *host, int nx, int ny, size_t es, size_t stride)
{
    void *d = NULL;
    ck_assert_int_eq(sf_gpu_malloc(g, &d, stride * ny * es), SF_OK);
    sftest_poison(g, d, stride * ny * es);
    for (int y = 0; y < ny; y++)
        ck_assert_int_eq(sf_gpu_to_device(g, (char *)d + (size_t)y * stride * es,
                                          (const char *)host + (size_t)y * nx * es, nx * es),
                         SF_OK);
    return d;
}

/* Upload (image, labels and, with a, the maps and the mask, with row strides
 * istride and lstride), poison the output, run, download and memcmp every
 * source against the CPU twin. */
static void gpu_vs_cpu(const char *what, const sf_image *im, const sf_labels *lab, int n,
                       size_t istride, size_t lstride, const aux_host *a, int subtract)
{
    sf_gpu *g = sftest_gpu();
    int nx = im->nx, ny = im->ny;
    sf_image di = {nx, ny, istride, NULL, SF_DEVICE}, db = {nx, ny, lstride, NULL, SF_DEVICE};
    sf_image dr = {nx, ny, istride, NULL, SF_DEVICE};
    sf_labels dl = {nx, ny, lstride, NULL, SF_DEVICE};
    sf_mask dm = {nx, ny, istride + 1, NULL, SF_DEVICE};
    sf_measure_aux ha = {0}, da = {0};
    sf_measure_params p;
    sf_source *c, *h = malloc((n ? n : 1) * sizeof *h), *d = NULL;
    ck_assert_ptr_nonnull(h);
    sf_measure_params_default(&p);
    p.subtract = subtract;
    if (a) {
        ha.stats = da.stats = &a->st;
        ha.bkg = &a->bkg;
        ha.rms = &a->rms;
        ha.mask = &a->mask;
        db.data = upload(g, a->bkg.data, nx, ny, sizeof(float), lstride);
        dr.data = upload(g, a->rms.data, nx, ny, sizeof(float), istride);
        dm.data = upload(g, a->mask.data, nx, ny, 1, istride + 1);
        da.bkg = &db;
        da.rms = &dr;
        da.mask = &dm;
    }
    c = run_cpu_aux(im, lab, n, a ? &ha : NULL, &p);
    di.data = upload(g, im->data, nx, ny, sizeof(float), istride);  /* NaN padding */
    dl.data = upload(g, lab->data, nx, ny, sizeof(int32_t), lstride); /* label -1 padding */
    ck_assert_int_eq(sf_gpu_malloc(g, (void **)&d, (n ? n : 1) * sizeof *d), SF_OK);
    /* with the mask, twice: labels looked for everywhere, then (make_aux's
     * mask is set where the labels are) only under the mask */
    for (int lim = 0; lim <= (a != NULL); lim++) {
        da.labels_in_mask = lim;
        sftest_poison(g, d, (n ? n : 1) * sizeof *d);
        ck_assert_msg(sf_measure_gpu(g, &di, &dl, n, a ? &da : NULL, &p, d) == SF_OK, "%s: %s",
                      what, sf_errdetail());
        ck_assert_int_eq(sf_gpu_to_host(g, h, d, n * sizeof *h), SF_OK);
        for (int i = 0; i < n; i++)
            if (memcmp(&c[i], &h[i], sizeof *h)) {
                size_t off = 0;
                while (((unsigned char *)&c[i])[off] == ((unsigned char *)&h[i])[off])
                    off++;
                ck_abort_msg("%s%s: source %d differs first in %s: cpu npix %lld flux %.17g "
                             "x %.17g y %.17g peak %.9g (%d,%d) x2 %.17g a %.17g theta %.17g "
                             "flags %d npeaks %d x_err %.17g; gpu npix %lld flux %.17g x %.17g "
                             "y %.17g peak %.9g (%d,%d) x2 %.17g a %.17g theta %.17g flags %d npeaks %d "
                             "x_err %.17g",
                             what, lim ? " (labels under the mask)" : "", i + 1, field_at(off),
                             c[i].npix, c[i].flux_sum, c[i].x, c[i].y,
                             c[i].peak, c[i].peak_x, c[i].peak_y, c[i].x2, c[i].a, c[i].theta,
                             c[i].flags, c[i].npeaks, c[i].x_err, h[i].npix, h[i].flux_sum,
                             h[i].x, h[i].y, h[i].peak, h[i].peak_x, h[i].peak_y, h[i].x2, h[i].a,
                             h[i].theta, h[i].flags, h[i].npeaks, h[i].x_err);
            }
    }
    sf_gpu_free(g, di.data);
    sf_gpu_free(g, dl.data);
    sf_gpu_free(g, db.data);
    sf_gpu_free(g, dr.data);
    sf_gpu_free(g, dm.data);
    sf_gpu_free(g, d);
    free(c);
    free(h);
}

START_TEST(test_gpu_sizes)
{
    for (int k = 0; k < K_NKINDS; k++)
        for (int s = 0; sftest_sizes[s][0]; s++) {
            sf_image im = {0};
            sf_labels lab = {0};
            aux_host a;
            char what[64];
            int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
            if (sftest_quick() && nx * ny > 70000) /* under compute-sanitizer */
                continue;
            int n = make_case(k, nx, ny, 1000 + 17 * s + k, &im, &lab);
            make_aux(&im, &lab, 500 + s, &a);
            snprintf(what, sizeof what, "gpu %s %dx%d", kind_name[k], nx, ny);
            gpu_vs_cpu(what, &im, &lab, n, nx, nx, NULL, 1);
            snprintf(what, sizeof what, "gpu %s %dx%d strided", kind_name[k], nx, ny);
            gpu_vs_cpu(what, &im, &lab, n, nx + 3, nx + 5, NULL, 0);
            snprintf(what, sizeof what, "gpu %s %dx%d maps+mask subtract", kind_name[k], nx, ny);
            gpu_vs_cpu(what, &im, &lab, n, nx + 1, nx, &a, 1);
            snprintf(what, sizeof what, "gpu %s %dx%d maps+mask raw", kind_name[k], nx, ny);
            gpu_vs_cpu(what, &im, &lab, n, nx, nx + 2, &a, 0);
            /* global level and sigma only (no maps), with the mask */
            sf_image_free(&a.bkg, NULL);
            sf_image_free(&a.rms, NULL);
            {
                sf_gpu *g = sftest_gpu();
                sf_measure_aux ha = {&a.st, NULL, NULL, &a.mask}, da = ha;
                sf_mask dm = {nx, ny, nx, NULL, SF_DEVICE};
                sf_image di = {nx, ny, nx, NULL, SF_DEVICE};
                sf_labels dl = {nx, ny, nx, NULL, SF_DEVICE};
                sf_source *c = run_cpu_aux(&im, &lab, n, &ha, NULL),
                          *h = malloc((n ? n : 1) * sizeof *h), *d = NULL;
                dm.data = upload(g, a.mask.data, nx, ny, 1, nx);
                di.data = upload(g, im.data, nx, ny, sizeof(float), nx);
                dl.data = upload(g, lab.data, nx, ny, sizeof(int32_t), nx);
                da.mask = &dm;
                ck_assert_int_eq(sf_gpu_malloc(g, (void **)&d, (n ? n : 1) * sizeof *d), SF_OK);
                sftest_poison(g, d, (n ? n : 1) * sizeof *d);
                ck_assert_int_eq(sf_measure_gpu(g, &di, &dl, n, &da, NULL, d), SF_OK);
                ck_assert_int_eq(sf_gpu_to_host(g, h, d, n * sizeof *h), SF_OK);
                ck_assert_msg(n == 0 || memcmp(c, h, n * sizeof *h) == 0,
                              "gpu %s %dx%d global level: catalogues differ", kind_name[k], nx, ny);
                sf_gpu_free(g, dm.data);
                sf_gpu_free(g, di.data);
                sf_gpu_free(g, dl.data);
                sf_gpu_free(g, d);
                free(c);
                free(h);
            }
            free_aux(&a);
            sf_image_free(&im, NULL);
            sf_labels_free(&lab, NULL);
        }
}
END_TEST

START_TEST(test_gpu_special)
{
    sf_image im = {0};
    sf_labels lab = {0};
    const float v[8] = {0.75f, 0.75f, -0.25f, -0.5f, -0.5f, 0.25f, -0.75f, 0.75f};
    const int l[8] = {1, 1, 1, 2, 2, 2, 3, 3};
    ck_assert_int_eq(sf_image_alloc(&im, 8, 1, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, 8, 1, SF_HOST, NULL), SF_OK);
    memcpy(im.data, v, sizeof v);
    memcpy(lab.data, l, sizeof l);
    gpu_vs_cpu("gpu exact", &im, &lab, 4, 8, 8, NULL, 1); /* label 4 is empty */
    for (int i = 0; i < 8; i++)
        im.data[i] = i < 4 ? 1e30f : 1e-30f * (i + 1);
    gpu_vs_cpu("gpu range", &im, &lab, 3, 8, 8, NULL, 1);
    memset(lab.data, 0, sizeof l);
    gpu_vs_cpu("gpu no labels", &im, &lab, 0, 8, 8, NULL, 1);
    ck_assert_int_eq(sf_measure_gpu(sftest_gpu(), &im, &lab, 1, NULL, NULL, NULL), SF_ERR_PARAM);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

START_TEST(test_gpu_large)
{
    sf_image im = {0};
    sf_labels lab = {0};
    aux_host a;
    if (sftest_quick())
        return; /* under compute-sanitizer: the small cases only */
    int n = make_case(K_THRESH, 2048, 2048, 77, &im, &lab);
    make_aux(&im, &lab, 79, &a);
    gpu_vs_cpu("gpu thresh 2048x2048", &im, &lab, n, 2048, 2048, NULL, 1);
    gpu_vs_cpu("gpu thresh 2048x2048 maps+mask", &im, &lab, n, 2048, 2048, &a, 1);
    free_aux(&a);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
    n = make_case(K_WHOLE, 4096, 4096, 78, &im, &lab);
    cpu_vs_ref("cpu whole 4096x4096", &im, &lab, n);
    gpu_vs_cpu("gpu whole 4096x4096", &im, &lab, n, 4096, 4096, NULL, 1);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("measure");
    TCase *tc = tcase_create("cpu"), *tg = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_set_timeout(tg, 300);
    tcase_add_test(tc, test_fixsum_carry);
    tcase_add_test(tc, test_fixsum_order);
    tcase_add_test(tc, test_cpu_sizes);
    tcase_add_test(tc, test_cpu_exact);
    tcase_add_test(tc, test_cpu_range);
    tcase_add_test(tc, test_cpu_zero_and_errors);
    suite_add_tcase(s, tc);
    tcase_add_test(tg, test_gpu_sizes);
    tcase_add_test(tg, test_gpu_special);
    tcase_add_test(tg, test_gpu_large);
    return sftest_main(s, &tg, 1);
}
