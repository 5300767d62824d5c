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
            ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &m), SF_OK);
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
    ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &m), SF_ERR_PARAM);
    bs.sigma = 0; /* constant image: nothing is above its own level */
    for (int i = 0; i < 100; i++)
        im.data[i] = 4;
    bs.median = 4;
    ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &m), SF_OK);
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
                sf_thresh_params p = {5.0, sub};
                size_t n = sf_npix(nx, ny);
                make_image(&im, nx, ny, 17 + k);
                ck_assert_int_eq(sf_mask_alloc(&mc, nx, ny, SF_HOST, NULL), SF_OK);
                ck_assert_int_eq(sf_mask_alloc(&mh, nx, ny, SF_HOST, NULL), SF_OK);
                ck_assert_int_eq(sf_image_alloc(&d, nx, ny, SF_DEVICE, g), SF_OK);
                ck_assert_int_eq(sf_mask_alloc(&md, nx, ny, SF_DEVICE, g), SF_OK);
                ck_assert_int_eq(sf_image_upload(g, &im, &d), SF_OK);
                sftest_poison(g, md.data, n);
                ck_assert_int_eq(sf_threshold_cpu(&im, &p, &bs, &mc), SF_OK);
                ck_assert_int_eq(sf_threshold_gpu(g, &d, &p, &bs, &md), SF_OK);
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

int main(void)
{
    Suite *s = suite_create("threshold");
    TCase *cpu = tcase_create("cpu"), *gpu = tcase_create("gpu");
    tcase_add_test(cpu, test_cpu_rule);
    tcase_add_test(cpu, test_cpu_params);
    suite_add_tcase(s, cpu);
    tcase_set_timeout(gpu, 300);
    tcase_add_test(gpu, test_gpu_vs_cpu);
    TCase *gc[] = {gpu};
    return sftest_main(s, gc, 1);
}
