/* Shared helpers for skyfind's Check suites (see sftest.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "sftest.h"

const int sftest_sizes[][2] = {
    {1, 1}, {1, 257}, {257, 1}, {2, 2}, {3, 5}, {31, 33}, {64, 64}, {127, 131},
    {256, 255}, {509, 521}, {1000, 37}, {1024, 1024}, {0, 0}};

const char *sftest_data(const char *name)
{
    static char buf[4096];
    const char *d = getenv("SKYFIND_TEST_DATA");
    snprintf(buf, sizeof buf, "%s/%s", d && *d ? d : "../shared/data", name);
    return buf;
}

int sftest_have_data(void)
{
    struct stat sb;
    const char *p = sftest_data("INVENTORY.md");
    return stat(p, &sb) == 0;
}

sf_gpu *sftest_gpu(void)
{
    static sf_gpu *g;
    static int tried;
    if (!tried) {
        tried = 1;
        if (sf_gpu_count() > 0 && sf_gpu_create(&g, 0) != SF_OK)
            g = NULL;
    }
    return g;
}

int sftest_main(Suite *s, TCase **gpu_cases, int ngpu)
{
    int failed, run;
    SRunner *sr;
    if (ngpu > 0) {
        if (sftest_gpu()) {
            for (int i = 0; i < ngpu; i++)
                suite_add_tcase(s, gpu_cases[i]);
        } else {
            /* the cases not run belong to a runner of their own, which frees them */
            Suite *unused = suite_create("gpu (not run)");
            for (int i = 0; i < ngpu; i++)
                suite_add_tcase(unused, gpu_cases[i]);
            srunner_free(srunner_create(unused));
            printf("SKIP: no CUDA device (%d GPU test case%s of this suite not run)\n", ngpu,
                   ngpu == 1 ? "" : "s");
        }
    }
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    run = srunner_ntests_run(sr);
    srunner_free(sr);
    if (sftest_gpu())
        sf_gpu_destroy(sftest_gpu());
    if (failed)
        return 1;
    return run == 0 ? 77 : 0;
}

uint64_t sftest_next(sftest_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double sftest_uniform(sftest_rng *r) { return (sftest_next(r) >> 11) * 0x1.0p-53; }

double sftest_normal(sftest_rng *r)
{
    double u = sftest_uniform(r), v = sftest_uniform(r);
    if (u < 1e-300)
        u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

void sftest_noise_image(sf_image *im, int nx, int ny, uint64_t seed, int nsrc, double nan_frac)
{
    sftest_rng r = {seed};
    ck_assert_int_eq(sf_image_alloc(im, nx, ny, SF_HOST, NULL), SF_OK);
    for (size_t i = 0; i < sf_npix(nx, ny); i++)
        im->data[i] = (float)sftest_normal(&r);
    for (int k = 0; k < nsrc; k++) {
        double cx = sftest_uniform(&r) * nx, cy = sftest_uniform(&r) * ny;
        double amp = 3.0 + 50.0 * sftest_uniform(&r), s = 0.7 + 3.0 * sftest_uniform(&r);
        int r0 = (int)ceil(4 * s);
        for (int y = (int)cy - r0; y <= (int)cy + r0; y++)
            for (int x = (int)cx - r0; x <= (int)cx + r0; x++)
                if (x >= 0 && y >= 0 && x < nx && y < ny)
                    im->data[(size_t)y * nx + x] +=
                        (float)(amp * exp(-((x - cx) * (x - cx) + (y - cy) * (y - cy)) / (2 * s * s)));
    }
    if (nan_frac > 0) {
        size_t n = sf_npix(nx, ny);
        for (size_t i = 0; i < n; i++)
            if (sftest_uniform(&r) < nan_frac / 2)
                im->data[i] = NAN;
        /* a blanked block, as at a mosaic edge */
        int bw = nx / 4 + 1, bh = ny / 4 + 1;
        for (int y = 0; y < bh && y < ny; y++)
            for (int x = 0; x < bw && x < nx; x++)
                if (sftest_uniform(&r) < 2 * nan_frac + 0.5)
                    im->data[(size_t)y * nx + x] = NAN;
    }
}

void sftest_random_mask(sf_mask *m, int nx, int ny, uint64_t seed, double p)
{
    sftest_rng r = {seed};
    ck_assert_int_eq(sf_mask_alloc(m, nx, ny, SF_HOST, NULL), SF_OK);
    for (size_t i = 0; i < sf_npix(nx, ny); i++)
        m->data[i] = sftest_uniform(&r) < p;
}

void sftest_maps_alloc(sf_image *bkg, sf_image *rms, int nx, int ny)
{
    ck_assert_int_eq(sf_image_alloc(bkg, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_image_alloc(rms, nx, ny, SF_HOST, NULL), SF_OK);
}

void sftest_poison(sf_gpu *g, void *dev, size_t bytes)
{
    ck_assert_int_eq(sf_gpu_memset(g, dev, 0xFF, bytes), SF_OK);
}

int sftest_quick(void)
{
    const char *q = getenv("SKYFIND_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

int sftest_part_mine(void)
{
    static int k = -1, n = 1;
    static long i;
    if (k < 0) {
        const char *e = getenv("SKYFIND_TEST_PART");
        if (!e || sscanf(e, "%d/%d", &k, &n) != 2 || n < 1 || k < 0 || k >= n) {
            k = 0;
            n = 1;
        }
    }
    return i++ % n == k;
}
