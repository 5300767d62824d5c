/* Check suite for the `background` stage: the CPU twin against an
 * independent sort-based implementation of the lesson's clipping, and the GPU
 * version against the CPU twin on awkward sizes, NaN regions, ties, constant
 * and tiny images and the real images of SKYFIND_TEST_DATA. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sftest.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#include "skyfind/background.h"
#include "skyfind/fits.h"
#include "select.h" /* sf_select_key_ranks */
#include "fixsum.h" /* sf_fkey */

static int cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* The lesson's loop with a full sort for the median (numpy semantics). */
static int reference(const sf_image *im, double kappa, sf_bkg_stats *r)
{
    size_t n = sf_npix(im->nx, im->ny), m = 0;
    float *s = malloc(n * sizeof *s + 4);
    for (size_t i = 0; i < n; i++)
        if (isfinite(im->data[i]))
            s[m++] = im->data[i];
    memset(r, 0, sizeof *r);
    r->nvalid = (long long)m;
    if (!m) {
        free(s);
        return -1;
    }
    for (int it = 1; it <= 1000; it++) {
        qsort(s, m, sizeof *s, cmpf);
        volatile float two = s[(m - 1) / 2] + s[m / 2];
        float med = (m % 2) ? s[m / 2] : two / 2.0f;
        double sum = 0, ss = 0;
        for (size_t i = 0; i < m; i++)
            sum += s[i];
        double mean = sum / m;
        for (size_t i = 0; i < m; i++)
            ss += (s[i] - mean) * (s[i] - mean);
        r->median = med;
        r->sigma = (float)sqrt(ss / m);
        r->mean = mean;
        r->nused = (long long)m;
        r->niter = it;
        volatile float ks = (float)kappa * (float)r->sigma;
        float lo = med - ks, hi = med + ks;
        size_t k = 0;
        if (r->sigma == 0) {
            r->converged = 1;
            break;
        }
        for (size_t i = 0; i < m; i++)
            if (s[i] > lo && s[i] < hi)
                s[k++] = s[i];
        if (k == m) {
            r->converged = 1;
            break;
        }
        m = k;
    }
    free(s);
    return 0;
}

static void expect_same(const sf_bkg_stats *a, const sf_bkg_stats *b, double srel, const char *what)
{
    if (a->niter != b->niter || a->median != b->median || a->nused != b->nused ||
        a->nvalid != b->nvalid || a->converged != b->converged ||
        fabs(a->sigma - b->sigma) > srel * fabs(b->sigma) ||
        fabs(a->mean - b->mean) > 1e-9 * (fabs(b->mean) + b->sigma)) {
        fprintf(stderr,
                "%s: got median %.9g sigma %.9g mean %.9g niter %d nused %lld nvalid %lld conv %d\n"
                "%*s want median %.9g sigma %.9g mean %.9g niter %d nused %lld nvalid %lld conv %d\n",
                what, a->median, a->sigma, a->mean, a->niter, a->nused, a->nvalid, a->converged,
                (int)strlen(what), "", b->median, b->sigma, b->mean, b->niter, b->nused, b->nvalid,
                b->converged);
        ck_abort_msg("%s: background statistics differ", what);
    }
}

static sf_bkg_params lesson_params(void)
{
    sf_bkg_params p;
    sf_bkg_params_default(&p);
    p.maxiter = 1000;
    return p;
}

START_TEST(test_cpu_vs_reference)
{
    sf_bkg_params p = lesson_params();
    for (int k = 0; sftest_sizes[k][0]; k++) {
        for (int nan = 0; nan < 2; nan++) {
            sf_image im;
            sf_bkg_stats got, want;
            char what[64];
            sftest_noise_image(&im, sftest_sizes[k][0], sftest_sizes[k][1], 11 + k, 1 + k, nan * 0.1);
            snprintf(what, sizeof what, "%dx%d nan=%d", im.nx, im.ny, nan);
            if (reference(&im, 3.0, &want) == 0) {
                ck_assert_int_eq(sf_background_cpu(&im, &p, &got, NULL, NULL), SF_OK);
                expect_same(&got, &want, 0, what);
            } else {
                ck_assert_int_eq(sf_background_cpu(&im, &p, &got, NULL, NULL), SF_ERR_EMPTY);
            }
            sf_image_free(&im, NULL);
        }
    }
}
END_TEST

START_TEST(test_cpu_special)
{
    sf_bkg_params p = lesson_params();
    sf_bkg_stats st, want;
    sf_image im;
    /* constant image: sigma 0, stops at once */
    ck_assert_int_eq(sf_image_alloc(&im, 37, 5, SF_HOST, NULL), SF_OK);
    for (int i = 0; i < 37 * 5; i++)
        im.data[i] = 2.5f;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, NULL, NULL), SF_OK);
    ck_assert(st.median == 2.5 && st.sigma == 0 && st.converged && st.niter == 1);
    /* all NaN: a clear error */
    for (int i = 0; i < 37 * 5; i++)
        im.data[i] = NAN;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, NULL, NULL), SF_ERR_EMPTY);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "no finite pixels"));
    /* integer data with many ties, and infinities that must be ignored */
    sftest_rng r = {5};
    for (int i = 0; i < 37 * 5; i++)
        im.data[i] = (float)(int)(10 * sftest_uniform(&r));
    im.data[3] = INFINITY;
    im.data[4] = -INFINITY;
    ck_assert_int_eq(reference(&im, 3.0, &want), 0);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, NULL, NULL), SF_OK);
    expect_same(&st, &want, 0, "ties");
    ck_assert_int_eq(st.nvalid, 37 * 5 - 2);
    /* the exact median of the radix selection: even and odd counts, the
     * two middle values in different top digits (negative and positive,
     * tiny and huge magnitudes), equal middles, signed zeros */
    {
        static const float v[][8] = {
            {-1.0f, 1.0f, -3.0f, 3.0f, 0, 0, 0, 0},        /* middles -1, 1 */
            {1e-30f, -1e-30f, 5e20f, -5e20f, 0, 0, 0, 0},  /* tiny of both signs */
            {2.0f, 2.0f, 7.0f, -7.0f, 0, 0, 0, 0},         /* equal middles */
            {-0.0f, 0.0f, 1.0f, -1.0f, 0, 0, 0, 0},        /* -0 and +0 in the middle */
            {3.0f, 1.0f, 2.0f, 1e9f, -1e9f, 0, 0, 0},      /* odd */
            {1.5f, 1.25f, 1.75f, 1.5f + 1e-7f, 9.0f, -9.0f, 0, 0},
        };
        static const int len[] = {4, 4, 4, 4, 5, 6};
        for (int c = 0; c < 6; c++) {
            sf_image sm;
            char what[32];
            ck_assert_int_eq(sf_image_alloc(&sm, len[c], 1, SF_HOST, NULL), SF_OK);
            for (int i = 0; i < len[c]; i++)
                sm.data[i] = v[c][i];
            snprintf(what, sizeof what, "radix median case %d", c);
            ck_assert_int_eq(reference(&sm, 3.0, &want), 0);
            ck_assert_int_eq(want.niter, 1); /* nothing is clipped: one iteration */
            ck_assert_int_eq(sf_background_cpu(&sm, &p, &st, NULL, NULL), SF_OK);
            ck_assert_msg(st.median == want.median || (st.median == 0 && want.median == 0),
                          "%s: median %.9g, want %.9g", what, st.median, want.median);
            sf_image_free(&sm, NULL);
        }
    }
    /* the same statistics, bit for bit, whatever the number of threads */
#ifdef _OPENMP
    {
        sf_image big;
        sf_bkg_stats one, three;
        const int saved = omp_get_max_threads();
        sftest_noise_image(&big, 1000, 700, 9, 300, 0.01);
        omp_set_num_threads(1);
        ck_assert_int_eq(sf_background_cpu(&big, &p, &one, NULL, NULL), SF_OK);
        omp_set_num_threads(3);
        ck_assert_int_eq(sf_background_cpu(&big, &p, &three, NULL, NULL), SF_OK);
        omp_set_num_threads(saved);
        ck_assert_msg(one.median == three.median && one.sigma == three.sigma &&
                          one.mean == three.mean && one.niter == three.niter &&
                          one.nused == three.nused,
                      "1 thread: median %.9g sigma %.9g mean %.17g; 3 threads: %.9g %.9g %.17g",
                      one.median, one.sigma, one.mean, three.median, three.sigma, three.mean);
        ck_assert_int_gt(one.niter, 1);
        sf_image_free(&big, NULL);
    }
#else
#error "the tests are built with OpenMP (the library's public link interface)"
#endif
    /* maxiter reached: not converged, statistics of the last iteration */
    sf_image_free(&im, NULL);
    sftest_noise_image(&im, 300, 200, 3, 40, 0);
    p.maxiter = 1;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, NULL, NULL), SF_OK);
    ck_assert(!st.converged && st.niter == 1 && st.nused == st.nvalid);
    /* bad parameters */
    p.maxiter = 0;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, NULL, NULL), SF_ERR_PARAM);
    p = lesson_params();
    p.kappa = -1;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, NULL, NULL), SF_ERR_PARAM);
    sf_image_free(&im, NULL);
}
END_TEST

/* The plan's paths (src/calc/background_global.h) give the statistics of
 * the reference, whichever the image takes: iterations over the values near
 * the bounds (EDGE), passes over the whole image (SKYFIND_BKG_EDGES=0: every
 * iteration), and medians selected over the image when the window misses
 * them (SKYFIND_BKG_WINDOW=0: every one). */
static void paths_vs_reference(const sf_image *im, const char *what, int expect_edges)
{
    sf_bkg_params p = lesson_params();
    sf_bkg_stats want, got;
    char w[96];
    ck_assert_int_eq(reference(im, 3.0, &want), 0);
    ck_assert_int_eq(sf_background_cpu(im, &p, &got, NULL, NULL), SF_OK);
    expect_same(&got, &want, 0, what);
    if (expect_edges) /* EDGE iterations were taken: fewer passes over the image */
        ck_assert_msg(got.npasses < got.niter, "%s: %d passes over the image in %d iterations",
                      what, got.npasses, got.niter);
    ck_assert_int_ge(got.npasses, 1);
    setenv("SKYFIND_BKG_EDGES", "0", 1);
    ck_assert_int_eq(sf_background_cpu(im, &p, &got, NULL, NULL), SF_OK);
    snprintf(w, sizeof w, "%s, no EDGE iteration", what);
    expect_same(&got, &want, 0, w);
    /* (the pass after the last iteration finds that it clipped nothing) */
    ck_assert_int_eq(got.npasses, got.niter + 1);
    unsetenv("SKYFIND_BKG_EDGES");
    setenv("SKYFIND_BKG_WINDOW", "0", 1);
    ck_assert_int_eq(sf_background_cpu(im, &p, &got, NULL, NULL), SF_OK);
    snprintf(w, sizeof w, "%s, every median over the image", what);
    expect_same(&got, &want, 0, w);
    unsetenv("SKYFIND_BKG_WINDOW");
}

START_TEST(test_cpu_paths)
{
    sf_image im;
    sftest_rng r = {17};
    /* noise with sources (the lesson's case) and NaN blocks */
    sftest_noise_image(&im, 1500, 1100, 21, 600, 0.02);
    paths_vs_reference(&im, "sources", 1);
    /* an optical-like sky: level 3700, sigma 20, plus the same sources x 20 */
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = 3700.0f + 20.0f * im.data[i];
    paths_vs_reference(&im, "offset sky", 1);
    sf_image_free(&im, NULL);
    /* a skewed image (a bright extended wing) whose bounds move a lot */
    sftest_noise_image(&im, 700, 600, 22, 40, 0);
    for (int y = 0; y < im.ny; y++)
        for (int x = 0; x < im.nx; x++)
            im.data[(size_t)y * im.nx + x] += (float)(4.0 * exp(-(double)x / 150.0));
    paths_vs_reference(&im, "skewed", 0);
    /* integer data: ties at the bounds and in the window */
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = (float)(int)(12 * sftest_normal(&r));
    paths_vs_reference(&im, "integer ties", 0);
    sf_image_free(&im, NULL);
    /* tiny images: too few pixels to sample a first window */
    sftest_noise_image(&im, 9, 7, 23, 1, 0);
    paths_vs_reference(&im, "9x7", 0);
    sf_image_free(&im, NULL);
}
END_TEST

/* GPU equals the CPU twin: median exactly, sigma to 1e-6 relative, same
 * iteration count, on the host image im. */
static void gpu_vs_cpu(const sf_image *im, const sf_bkg_params *p, const char *what)
{
    sf_gpu *g = sftest_gpu();
    sf_image d = {0}, bk = {0}, rm = {0}, hb = {0};
    sf_bkg_stats c, gs;
    sf_status sc = sf_background_cpu(im, p, &c, NULL, NULL);
    ck_assert_int_eq(sf_image_alloc(&d, im->nx, im->ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&bk, im->nx, im->ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&rm, im->nx, im->ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_upload(g, im, &d), SF_OK);
    sftest_poison(g, bk.data, sf_npix(im->nx, im->ny) * 4);
    sftest_poison(g, rm.data, sf_npix(im->nx, im->ny) * 4);
    sf_status sg = sf_background_gpu(g, &d, p, &gs, &bk, &rm);
    ck_assert_msg(sg == sc, "%s: gpu status %d, cpu %d (%s)", what, sg, sc, sf_errdetail());
    if (sc == SF_OK) {
        expect_same(&gs, &c, 1e-6, what);
        /* every element of the maps written */
        ck_assert_int_eq(sf_image_alloc(&hb, im->nx, im->ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_image_download(g, &bk, &hb), SF_OK);
        for (size_t i = 0; i < sf_npix(im->nx, im->ny); i++)
            ck_assert_msg(hb.data[i] == (float)c.median, "%s: bkg map pixel %zu", what, i);
        ck_assert_int_eq(sf_image_download(g, &rm, &hb), SF_OK);
        for (size_t i = 0; i < sf_npix(im->nx, im->ny); i++)
            ck_assert_msg(fabsf(hb.data[i] - (float)c.sigma) <= 1e-6f * (float)c.sigma,
                          "%s: rms map pixel %zu", what, i);
        sf_image_free(&hb, NULL);
    }
    sf_image_free(&d, g);
    sf_image_free(&bk, g);
    sf_image_free(&rm, g);
}

START_TEST(test_gpu_random)
{
    sf_bkg_params p = lesson_params();
    for (int k = 0; sftest_sizes[k][0]; k++)
        for (int nan = 0; nan < 2; nan++)
            for (int seed = 0; seed < (sftest_quick() ? 1 : 3); seed++) {
                sf_image im;
                char what[64];
                sftest_noise_image(&im, sftest_sizes[k][0], sftest_sizes[k][1], 100 * k + seed,
                                   k * (seed + 1), nan * 0.2);
                snprintf(what, sizeof what, "%dx%d nan=%d seed=%d", im.nx, im.ny, nan, seed);
                gpu_vs_cpu(&im, &p, what);
                sf_image_free(&im, NULL);
            }
}
END_TEST

START_TEST(test_gpu_special)
{
    sf_bkg_params p = lesson_params();
    sf_image im;
    sftest_rng r = {9};
    int sizes[][2] = {{1, 1}, {2048, 2048}, {4099, 1031}};
    for (int k = 0; k < (sftest_quick() ? 1 : 3); k++) {
        sftest_noise_image(&im, sizes[k][0], sizes[k][1], 77 + k, 300, 0.01);
        gpu_vs_cpu(&im, &p, "large");
        /* ties: integer-valued data */
        for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
            im.data[i] = (float)(int)(20 * sftest_uniform(&r)) - 7;
        gpu_vs_cpu(&im, &p, "ties");
        /* constant and offset data (optical-like: level 3700, sigma 20) */
        for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
            im.data[i] = 3700.0f + 20.0f * (float)sftest_normal(&r);
        gpu_vs_cpu(&im, &p, "offset");
        for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
            im.data[i] = -1.25f;
        gpu_vs_cpu(&im, &p, "constant");
        for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
            im.data[i] = NAN;
        gpu_vs_cpu(&im, &p, "all-nan");
        sf_image_free(&im, NULL);
    }
    /* the plan's paths (as test_cpu_paths): EDGE iterations, none, and the
     * window missing every median (a zero-width window): the GPU selects
     * over the whole image */
    sftest_noise_image(&im, 1500, 1100, 21, 600, 0.02);
    gpu_vs_cpu(&im, &p, "sources");
    /* the GPU samples a first window on images of 2^23 pixels or more: here too */
    setenv("SKYFIND_BKG_SAMPLE_MIN", "0", 1);
    gpu_vs_cpu(&im, &p, "sources, sampled first window");
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = 3700.0f + 20.0f * im.data[i];
    gpu_vs_cpu(&im, &p, "offset sky with sources, sampled");
    unsetenv("SKYFIND_BKG_SAMPLE_MIN");
    gpu_vs_cpu(&im, &p, "offset sky with sources");
    setenv("SKYFIND_BKG_EDGES", "0", 1);
    gpu_vs_cpu(&im, &p, "offset sky with sources, no EDGE iteration");
    unsetenv("SKYFIND_BKG_EDGES");
    sf_image_free(&im, NULL);
    setenv("SKYFIND_BKG_WINDOW", "0", 1);
    sftest_noise_image(&im, 1001, 999, 6, 300, 0.05);
    gpu_vs_cpu(&im, &p, "window miss");
    sf_image_free(&im, NULL);
    unsetenv("SKYFIND_BKG_WINDOW");
    /* maxiter 2: stops unconverged on both */
    p.maxiter = 2;
    sftest_noise_image(&im, 999, 777, 5, 200, 0);
    gpu_vs_cpu(&im, &p, "maxiter");
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_gpu_real)
{
    static const char *files[] = {
        "radio_parkes_1904-66_SIN.fits", "radio_amila_GRB120422A_512x512x1x1.fits",
        "radio_atca_scorpio_s17_1000x1000.fits", "radio_vla_nvas_W51_22GHz_114x124x1x1.fits",
        "optical_eso_ntt_emmi_256x256_int16_bscale.fits", "radio_lofar_dirty_beam_512x512x1x1.fits",
        "optical_ngc1316_440x300_RICE_tilecompressed.fits", "quirk_obit_bitpix64_3x2.fits",
        "radio_parkes_1904-66_SIN_galactic.fits", "sim_aegean_synthetic_512x256.fits", NULL};
    sf_bkg_params p = lesson_params();
    if (!sftest_have_data()) {
        printf("SKIP: no test data (SKYFIND_TEST_DATA)\n");
        return;
    }
    for (int i = 0; files[i]; i++) {
        sf_image im = {0};
        sf_fits_info info;
        ck_assert_msg(sf_fits_read(sftest_data(files[i]), -1, NULL, &im, &info) == SF_OK, "%s: %s",
                      files[i], sf_errdetail());
        gpu_vs_cpu(&im, &p, files[i]);
        sf_image_free(&im, NULL);
        sf_fits_info_free(&info);
    }
}
END_TEST

static int cmpu(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* sf_select_key_ranks (the first window's three ranks) against a sort, on
 * keys spread over the whole range, floats' keys around 0 and around a
 * level far above the noise (every key in one of the top digits), ties,
 * keys that differ in the lowest bit only, one key, and rank sets from one
 * rank to every rank. */
START_TEST(test_key_ranks)
{
    const size_t sizes[] = {1, 2, 3, 47, 256, 4099, 65536, 100003};
    uint64_t seed = 12345;
    int checked = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const size_t n = sizes[si];
        uint32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *ref = malloc(n * sizeof *ref);
        ck_assert(a && b && ref);
        for (int kind = 0; kind < 6; kind++) {
            for (size_t i = 0; i < n; i++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                const uint32_t r = (uint32_t)(seed >> 32);
                const double u = ((r >> 8) + 0.5) / 16777216.0, g = (u - 0.5) * 6.0;
                switch (kind) {
                case 0: ref[i] = r; break;                                   /* the whole range */
                case 1: ref[i] = sf_fkey((float)(g * 1e-4)); break;          /* noise around 0 */
                case 2: ref[i] = sf_fkey((float)(1000.0 + g * 1e-2)); break; /* a level above it */
                case 3: ref[i] = sf_fkey((float)(r % 5)); break;             /* ties */
                case 4: ref[i] = 0x40000000u | (r & 1u); break;              /* the lowest bit */
                default: ref[i] = 0x3f800000u; break;                        /* one value */
                }
            }
            qsort(ref, n, sizeof *ref, cmpu);
            const size_t half = (size_t)(3.0 * sqrt((double)n));
            size_t sets[6][3] = {{0, 0, 0}, {n - 1, n - 1, n - 1}, {0, n / 2, n - 1},
                                 {n / 2 > half ? n / 2 - half : 0, n / 2,
                                  n / 2 + half < n ? n / 2 + half : n - 1},
                                 {n / 3, n / 3, n / 3 + (n > 3)}, {n / 2, n / 2, n / 2}};
            for (int q = 0; q < 6; q++) {
                for (int nk = 1; nk <= 3; nk++) {
                    size_t ks[3];
                    uint32_t out[3];
                    for (int j = 0; j < nk; j++)
                        ks[j] = sets[q][3 - nk + j] < n ? sets[q][3 - nk + j] : n - 1;
                    /* the keys shuffled (7919 is prime to every n): no order to rely on */
                    for (size_t i = 0; i < n; i++)
                        a[i] = ref[(i * 7919u) % n];
                    sf_select_key_ranks(a, b, n, ks, nk, out);
                    for (int j = 0; j < nk; j++) {
                        ck_assert_msg(out[j] == ref[ks[j]],
                                      "n %zu kind %d set %d rank %zu: %08x, sorted %08x", n, kind,
                                      q, ks[j], out[j], ref[ks[j]]);
                        checked++;
                    }
                }
            }
        }
        free(a);
        free(b);
        free(ref);
    }
    ck_assert_int_gt(checked, 800);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("background");
    TCase *cpu = tcase_create("cpu"), *gpu = tcase_create("gpu");
    tcase_set_timeout(cpu, 300);
    tcase_set_timeout(gpu, 600);
    tcase_add_test(cpu, test_cpu_vs_reference);
    tcase_add_test(cpu, test_cpu_special);
    tcase_add_test(cpu, test_cpu_paths);
    tcase_add_test(cpu, test_key_ranks);
    suite_add_tcase(s, cpu);
    tcase_add_test(gpu, test_gpu_random);
    tcase_add_test(gpu, test_gpu_special);
    tcase_add_test(gpu, test_gpu_real);
    TCase *gc[] = {gpu};
    return sftest_main(s, gc, 1);
}
