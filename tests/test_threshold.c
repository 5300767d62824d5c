/* Check suite for the `threshold` stage: the CPU twin against the rule
 * written out in the test, and the GPU version bit for bit against the twin
 * (awkward sizes, NaN and infinities, both subtract modes). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "sftest.h"
#include "skyfind/threshold.h"

static void make_image(sf_image *im, int nx, int ny, uint64_t seed)
{
    sftest_noise_image(im, nx, ny, seed, nx * ny / 500 + 1, 0.05);
    if (nx * ny > 4) {
        im->data[1] = INFINITY;
        im->data[2] = -INFINITY;
    }
}

START_TEST(test_cpu_rule)
{
    sf_bkg_stats bs = {.median = 0.25, .sigma = 0.5};
    for (int k = 0; sftest_sizes[k][0]; k++)
        for (int sub = 0; sub < 2; sub++) {
            sf_image im;
            sf_mask m;
            sf_thresh_params p = {3.0, sub};
            make_image(&im, sftest_sizes[k][0], sftest_sizes[k][1], 3 + k);
            ck_assert_int_eq(sf_mask_alloc(&m, im.nx, im.ny, SF_HOST, NULL), SF_OK);
            ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, NULL, NULL, &m), SF_OK);
            for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++) {
                float v = im.data[i];
                int want = isfinite(v) && (sub ? v - 0.25f : v) > 1.5f;
                ck_assert_msg(m.data[i] == want, "%dx%d sub=%d pixel %zu v=%g", im.nx, im.ny, sub, i, v);
            }
            sf_mask_free(&m, NULL);
            sf_image_free(&im, NULL);
        }
}
END_TEST

/* per-pixel maps: a level and noise that vary across the image */
static void make_maps(sf_image *b, sf_image *r, int nx, int ny)
{
    ck_assert_int_eq(sf_image_alloc(b, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_image_alloc(r, nx, ny, SF_HOST, NULL), SF_OK);
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++) {
            b->data[(size_t)y * nx + x] = 0.01f * x - 0.02f * y;
            r->data[(size_t)y * nx + x] = 0.5f + 0.001f * (x + y);
        }
}

/* Two levels: 1 above nsigma, 2 above only flood, both on the scaled level
 * and noise of a filtered image. */
START_TEST(test_cpu_two_level)
{
    sf_bkg_stats bs = {.median = 0.25, .sigma = 0.5};
    for (int k = 0; sftest_sizes[k][0]; k++) {
        sf_image im;
        sf_mask m;
        sf_thresh_params p = {4.0, 1, 2.0, 1, 2.0, 0.5};
        long long n1 = 0, n2 = 0;
        make_image(&im, sftest_sizes[k][0], sftest_sizes[k][1], 31 + k);
        ck_assert_int_eq(sf_mask_alloc(&m, im.nx, im.ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, NULL, NULL, &m), SF_OK);
        for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++) {
            float v = im.data[i], d = v - 0.5f; /* level 0.25 * 2 */
            int want = !isfinite(v) ? 0 : d > 1.0f ? 1 : d > 0.5f ? 2 : 0; /* sigma 0.5 * 0.5 */
            ck_assert_msg(m.data[i] == want, "%dx%d pixel %zu v=%g: %d, want %d", im.nx, im.ny, i,
                          v, m.data[i], want);
            n1 += want == 1;
            n2 += want == 2;
        }
        if (im.nx * im.ny > 1000)
            ck_assert_msg(n1 > 0 && n2 > 0, "both levels should occur (%lld, %lld)", n1, n2);
        sf_mask_free(&m, NULL);
        sf_image_free(&im, NULL);
    }
    /* flood above nsigma is a parameter error */
    {
        sf_image im;
        sf_mask m;
        sf_thresh_params p = {3.0, 1, 4.0};
        make_image(&im, 8, 8, 1);
        ck_assert_int_eq(sf_mask_alloc(&m, 8, 8, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, NULL, NULL, &m), SF_ERR_PARAM);
        ck_assert_ptr_nonnull(strstr(sf_errdetail(), "flood"));
        sf_mask_free(&m, NULL);
        sf_image_free(&im, NULL);
    }
}
END_TEST

START_TEST(test_cpu_maps)
{
    for (int k = 0; sftest_sizes[k][0]; k++)
        for (int sub = 0; sub < 2; sub++) {
            sf_image im, b, r;
            sf_mask m;
            sf_bkg_stats bs = {.median = NAN, .sigma = NAN}; /* unused with maps */
            sf_thresh_params p = {2.5, sub};
            make_image(&im, sftest_sizes[k][0], sftest_sizes[k][1], 30 + k);
            make_maps(&b, &r, im.nx, im.ny);
            ck_assert_int_eq(sf_mask_alloc(&m, im.nx, im.ny, SF_HOST, NULL), SF_OK);
            ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &b, &r, &m), SF_OK);
            for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++) {
                float v = im.data[i], t = 2.5f * r.data[i];
                int want = isfinite(v) && (sub ? v - b.data[i] : v) > t;
                ck_assert_msg(m.data[i] == want, "maps %dx%d sub=%d pixel %zu", im.nx, im.ny, sub, i);
            }
            ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &b, NULL, &m), SF_ERR_PARAM);
            /* rms=global: each pixel's level against one sigma */
            bs.sigma = 0.7;
            p.rms_global = 1;
            ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &b, NULL, &m), SF_OK);
            for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++) {
                float v = im.data[i], t = 2.5f * 0.7f;
                int want = isfinite(v) && (sub ? v - b.data[i] : v) > t;
                ck_assert_msg(m.data[i] == want, "global rms %dx%d sub=%d pixel %zu", im.nx, im.ny,
                              sub, i);
            }
            sf_mask_free(&m, NULL);
            sf_image_free(&im, NULL);
            sf_image_free(&b, NULL);
            sf_image_free(&r, NULL);
        }
}
END_TEST

START_TEST(test_cpu_params)
{
    sf_image im;
    sf_mask m;
    sf_bkg_stats bs = {.median = 0, .sigma = NAN};
    sf_thresh_params p;
    sf_thresh_params_default(&p);
    ck_assert(p.nsigma == 5.0 && p.subtract == 1);
    make_image(&im, 10, 10, 1);
    ck_assert_int_eq(sf_mask_alloc(&m, 10, 10, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, NULL, NULL, &m), SF_ERR_PARAM);
    bs.sigma = 0; /* constant image: nothing is above its own level */
    for (int i = 0; i < 100; i++)
        im.data[i] = 4;
    bs.median = 4;
    ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, NULL, NULL, &m), SF_OK);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(m.data[i], 0);
    sf_mask_free(&m, NULL);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_gpu_vs_cpu)
{
    sf_gpu *g = sftest_gpu();
    sf_bkg_stats bs = {.median = 0.125, .sigma = 0.7};
    int extra[][2] = {{4096, 4099}, {8191, 3}, {0, 0}};
    for (int pass = 0; pass < (sftest_quick() ? 1 : 2); pass++)
        for (int k = 0; (pass ? extra[k][0] : sftest_sizes[k][0]); k++)
            for (int sub = 0; sub < 2; sub++) {
                int nx = pass ? extra[k][0] : sftest_sizes[k][0];
                int ny = pass ? extra[k][1] : sftest_sizes[k][1];
                sf_image im, d = {0};
                sf_mask mc, md = {0}, mh;
                /* sub=1 also with a flood level and filtered-image scales */
                sf_thresh_params p = sub ? (sf_thresh_params){5.0, 1, 2.0, 1, 1.1, 0.35}
                                         : (sf_thresh_params){5.0, 0};
                size_t n = sf_npix(nx, ny);
                make_image(&im, nx, ny, 17 + k);
                ck_assert_int_eq(sf_mask_alloc(&mc, nx, ny, SF_HOST, NULL), SF_OK);
                ck_assert_int_eq(sf_mask_alloc(&mh, nx, ny, SF_HOST, NULL), SF_OK);
                ck_assert_int_eq(sf_image_alloc(&d, nx, ny, SF_DEVICE, g), SF_OK);
                ck_assert_int_eq(sf_mask_alloc(&md, nx, ny, SF_DEVICE, g), SF_OK);
                ck_assert_int_eq(sf_image_upload(g, &im, &d), SF_OK);
                sftest_poison(g, md.data, n);
                ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, NULL, NULL, &mc), SF_OK);
                ck_assert_int_eq(sf_threshold_gpu(g, &d, &p, &bs, NULL, NULL, &md), SF_OK);
                ck_assert_int_eq(sf_mask_download(g, &md, &mh), SF_OK);
                for (size_t i = 0; i < n; i++)
                    ck_assert_msg(mh.data[i] == mc.data[i], "%dx%d sub=%d: pixel %zu gpu %d cpu %d",
                                  nx, ny, sub, i, mh.data[i], mc.data[i]);
                sf_image_free(&d, g);
                sf_mask_free(&md, g);
                sf_mask_free(&mc, NULL);
                sf_mask_free(&mh, NULL);
                sf_image_free(&im, NULL);
            }
}
END_TEST

START_TEST(test_gpu_maps)
{
    sf_gpu *g = sftest_gpu();
    sf_bkg_stats bs = {.median = 0, .sigma = 1};
    for (int k = 0; sftest_sizes[k][0]; k++)
      for (int lev = 0; lev < 2; lev++) {
        int nx = sftest_sizes[k][0], ny = sftest_sizes[k][1];
        size_t n = sf_npix(nx, ny);
        sf_image im, b, r, di = {0}, db = {0}, dr = {0};
        sf_mask mc, md = {0}, mh;
        /* one level; two levels on a "filtered" image (level and noise scaled) */
        sf_thresh_params p = lev ? (sf_thresh_params){3.0, 1, 1.5, 1, 0.9, 0.4}
                                 : (sf_thresh_params){3.0, 1};
        make_image(&im, nx, ny, 50 + k);
        make_maps(&b, &r, nx, ny);
        ck_assert_int_eq(sf_mask_alloc(&mc, nx, ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_mask_alloc(&mh, nx, ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&di, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&db, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&dr, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_mask_alloc(&md, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_upload(g, &im, &di), SF_OK);
        ck_assert_int_eq(sf_image_upload(g, &b, &db), SF_OK);
        ck_assert_int_eq(sf_image_upload(g, &r, &dr), SF_OK);
        sftest_poison(g, md.data, n);
        ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &b, &r, &mc), SF_OK);
        ck_assert_int_eq(sf_threshold_gpu(g, &di, &p, &bs, &db, &dr, &md), SF_OK);
        ck_assert_int_eq(sf_mask_download(g, &md, &mh), SF_OK);
        ck_assert_msg(memcmp(mh.data, mc.data, n) == 0, "maps %dx%d levels %d: GPU mask differs", nx,
                      ny, lev + 1);
        /* rms=global: the level map against one sigma */
        p.rms_global = 1;
        sftest_poison(g, md.data, n);
        ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &b, NULL, &mc), SF_OK);
        ck_assert_int_eq(sf_threshold_gpu(g, &di, &p, &bs, &db, NULL, &md), SF_OK);
        ck_assert_int_eq(sf_mask_download(g, &md, &mh), SF_OK);
        ck_assert_msg(memcmp(mh.data, mc.data, n) == 0, "maps %dx%d levels %d rms=global: GPU mask "
                      "differs", nx, ny, lev + 1);
        sf_image_free(&di, g);
        sf_image_free(&db, g);
        sf_image_free(&dr, g);
        sf_mask_free(&md, g);
        sf_mask_free(&mc, NULL);
        sf_mask_free(&mh, NULL);
        sf_image_free(&im, NULL);
        sf_image_free(&b, NULL);
        sf_image_free(&r, NULL);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threshold");
    TCase *cpu = tcase_create("cpu"), *gpu = tcase_create("gpu");
    tcase_add_test(cpu, test_cpu_rule);
    tcase_add_test(cpu, test_cpu_params);
    tcase_add_test(cpu, test_cpu_maps);
    tcase_add_test(cpu, test_cpu_two_level);
    suite_add_tcase(s, cpu);
    tcase_set_timeout(gpu, 300);
    tcase_add_test(gpu, test_gpu_vs_cpu);
    tcase_add_test(gpu, test_gpu_maps);
    TCase *gc[] = {gpu};
    return sftest_main(s, gc, 1);
}
