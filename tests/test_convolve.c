/* Check suite for the `convolve` stage, CPU twin: kernels (Gaussian sums,
 * noise gain and orientation, SExtractor .conv files, FITS PSFs, rank-one
 * detection), and convolutions (delta and constant images, direct against
 * FFT with NaNs for every edge mode, the rank-one path against the general
 * one, NaN-only and 1x1 images, parameter errors); GPU: every method and
 * edge mode against the CPU twin, with and without NaN, on awkward image
 * sizes, kernels from 1x1 to 63x63 (odd and even, rank one or not) and
 * kernels larger than the image; the direct method's 2-D sums bit for bit
 * as fused multiply-add chains on the CPU (every vector build) and the GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <omp.h>
#include "sftest.h"
#include "skyfind/convolve.h"
#include "skyfind/pipeline.h" /* sf_simd_name */

static const int edges[] = {SF_EDGE_ZERO, SF_EDGE_NEAREST, SF_EDGE_REFLECT, SF_EDGE_WRAP};
static const char *const edge_name[] = {"zero", "nearest", "reflect", "wrap"};

static void conv(const sf_image *in, const sf_kernel *k, int method, int edge, sf_image *out)
{
    ck_assert_int_eq(sf_image_alloc(out, in->nx, in->ny, SF_HOST, NULL), SF_OK);
    sf_status s = sf_convolve_cpu(in, k, method, edge, -1, out);
    ck_assert_msg(s == SF_OK, "convolve %dx%d kernel %dx%d method %d edge %d: %s", in->nx,
                  in->ny, k->nx, k->ny, method, edge, sf_errdetail());
}

/* ||a-b|| / ||b|| over the pixels that are not NaN; NaN positions must agree. */
static double rel_l2(const sf_image *a, const sf_image *b, const char *what)
{
    double num = 0, den = 0;
    long nbad = 0, bx = 0, by = 0;
    for (int y = 0; y < a->ny; y++)
        for (int x = 0; x < a->nx; x++) {
            float u = a->data[(size_t)y * a->stride + x], v = b->data[(size_t)y * b->stride + x];
            if (isnan(u) != isnan(v) && !nbad++) {
                bx = x;
                by = y;
            }
            if (!isnan(v) && !isnan(u)) {
                num += ((double)u - v) * ((double)u - v);
                den += (double)v * v;
            }
        }
    ck_assert_msg(nbad == 0, "%s: NaN positions differ at %ld pixels, first (%ld,%ld): %g vs %g", what,
                  nbad, bx, by, a->data[by * a->stride + bx], b->data[by * b->stride + bx]);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Index of the first pixel where ok() fails, or -1 (one assertion per image:
 * Check records every assertion, which is slow per pixel). */
#define FIRST_BAD(n, cond)                                                                  \
    ({                                                                                      \
        long bad_ = -1;                                                                     \
        for (size_t i = 0; i < (size_t)(n) && bad_ < 0; i++)                                \
            if (!(cond))                                                                    \
                bad_ = (long)i;                                                             \
        bad_;                                                                               \
    })

static void kernel_random(sf_kernel *k, int nx, int ny, uint64_t seed)
{
    sftest_rng r = {seed};
    float *w = malloc(sf_npix(nx, ny) * sizeof *w);
    for (size_t i = 0; i < sf_npix(nx, ny); i++)
        w[i] = (float)(0.1 + sftest_uniform(&r));
    ck_assert_int_eq(sf_kernel_from_array(k, w, nx, ny, 1), SF_OK);
    free(w);
}

START_TEST(test_cpu_delta)
{
    /* a delta at the centre (index n/2, odd and even sides) returns the image */
    static const int sides[][2] = {{1, 1}, {3, 3}, {4, 4}, {5, 2}, {1, 6}};
    sf_image im;
    float vmax = 0;
    sftest_noise_image(&im, 37, 23, 11, 4, 0.05);
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        vmax = isnan(im.data[i]) ? vmax : fmaxf(vmax, fabsf(im.data[i]));
    for (int s = 0; s < 5; s++) {
        int kx = sides[s][0], ky = sides[s][1];
        float *w = calloc(sf_npix(kx, ky), sizeof *w);
        sf_kernel k;
        w[(ky / 2) * kx + kx / 2] = 1;
        ck_assert_int_eq(sf_kernel_from_array(&k, w, kx, ky, 0), SF_OK);
        for (int e = 0; e < 4; e++)
            for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++) {
                sf_image out;
                conv(&im, &k, m, edges[e], &out);
                /* direct: exact; FFT: error ~ eps * max */
                float tol = m == SF_CONV_DIRECT ? 0 : 2e-6f * vmax;
                long i = FIRST_BAD(sf_npix(im.nx, im.ny),
                                   isnan(out.data[i]) == isnan(im.data[i]) &&
                                       (isnan(im.data[i]) || fabsf(out.data[i] - im.data[i]) <= tol));
                ck_assert_msg(i < 0, "delta %dx%d %s method %d pixel %ld: %g vs %g", kx, ky,
                              edge_name[e], m, i, out.data[i < 0 ? 0 : i], im.data[i < 0 ? 0 : i]);
                sf_image_free(&out, NULL);
            }
        sf_kernel_free(&k);
        free(w);
    }
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_cpu_edge_modes)
{
    /* out[0] of [1 2 3] convolved with a 15-tap shift kernel (1 at tap t)
     * is ext[7 - t]: scipy.ndimage.convolve's values for the four modes */
    static const float want[4][15] = {
        {0, 0, 0, 0, 0, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0},
        {3, 3, 3, 3, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 1, 1, 2, 3, 3, 2, 1, 1, 2, 3, 3, 2, 1, 1},
        {2, 1, 3, 2, 1, 3, 2, 1, 3, 2, 1, 3, 2, 1, 3}};
    sf_image im;
    ck_assert_int_eq(sf_image_alloc(&im, 3, 1, SF_HOST, NULL), SF_OK);
    for (int i = 0; i < 3; i++)
        im.data[i] = (float)(i + 1);
    for (int t = 0; t < 15; t++) {
        float w[15] = {0};
        sf_kernel k;
        w[t] = 1;
        ck_assert_int_eq(sf_kernel_from_array(&k, w, 15, 1, 0), SF_OK);
        for (int e = 0; e < 4; e++)
            for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++) {
                sf_image out;
                conv(&im, &k, m, edges[e], &out);
                ck_assert_msg(fabsf(out.data[0] - want[e][t]) < 1e-5f, "edge %s method %d tap %d: %g, want %g",
                              edge_name[e], m, t, out.data[0], want[e][t]);
                sf_image_free(&out, NULL);
            }
        /* the same along y */
        sf_image col = im;
        col.nx = 1;
        col.ny = 3;
        col.stride = 1;
        sf_kernel kt;
        ck_assert_int_eq(sf_kernel_from_array(&kt, w, 1, 15, 0), SF_OK);
        for (int e = 0; e < 4; e++) {
            sf_image out;
            conv(&col, &kt, SF_CONV_DIRECT, edges[e], &out);
            ck_assert_msg(out.data[0] == want[e][t], "y: edge %s tap %d: %g, want %g", edge_name[e], t,
                          out.data[0], want[e][t]);
            sf_image_free(&out, NULL);
        }
        sf_kernel_free(&kt);
        sf_kernel_free(&k);
    }
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_cpu_constant)
{
    /* a unit-sum kernel keeps a constant level, at the edges too, except with
     * edge zero, which darkens the border */
    sf_kernel ks[4];
    sf_image im;
    ck_assert_int_eq(sf_kernel_gauss(&ks[0], 3.0, 3.0, 0, 0), SF_OK);
    ck_assert_int_eq(sf_kernel_gauss(&ks[1], 6.0, 2.0, 30, 16), SF_OK);
    ck_assert_int_eq(sf_kernel_tophat(&ks[2], 4.5), SF_OK);
    kernel_random(&ks[3], 7, 4, 5);
    ck_assert_int_eq(sf_image_alloc(&im, 41, 29, SF_HOST, NULL), SF_OK);
    for (size_t i = 0; i < sf_npix(41, 29); i++)
        im.data[i] = 2.5f;
    for (int q = 0; q < 4; q++)
        for (int e = 0; e < 4; e++)
            for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++) {
                sf_image out;
                float tol = m == SF_CONV_DIRECT ? 2e-6f : 2e-5f;
                conv(&im, &ks[q], m, edges[e], &out);
                const int kx = ks[q].nx, ky = ks[q].ny, nx = im.nx, ny = im.ny;
                long i = FIRST_BAD(sf_npix(nx, ny),
                                   (edges[e] == SF_EDGE_ZERO &&
                                    !((long)i % nx >= kx && (long)i / nx >= ky &&
                                      (long)i % nx < nx - kx && (long)i / nx < ny - ky)) ||
                                       fabsf(out.data[i] - 2.5f) <= tol * 2.5f);
                ck_assert_msg(i < 0, "kernel %s edge %s method %d pixel %ld: %.9g", ks[q].desc,
                              edge_name[e], m, i, out.data[i < 0 ? 0 : i]);
                if (edges[e] == SF_EDGE_ZERO)
                    ck_assert_msg(out.data[0] < 2.0f, "zero edge: corner %g not darkened", out.data[0]);
                sf_image_free(&out, NULL);
            }
    for (int q = 0; q < 4; q++)
        sf_kernel_free(&ks[q]);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_cpu_direct_vs_fft)
{
    /* random images with NaN (scattered and a blanked block), awkward sizes,
     * odd, even and non-square kernels, every edge mode; one image is a view
     * with a row stride larger than its width; 127x131 and 600x530 take the
     * FFT in tiles (overlap-save), the others as one transform */
    static const int sizes[][2] = {{1, 1},     {1, 57},    {57, 1},   {3, 5},
                                   {31, 33},   {127, 131}, {256, 100}, {600, 530}};
    static const int ksz[][2] = {{3, 3}, {4, 4}, {5, 9}, {16, 15}, {31, 31}, {40, 7}};
    double worst = 0;
    for (int s = 0; s < 8; s++)
        for (int q = 0; q < 6; q++) {
            sf_image im, view;
            sf_kernel k;
            int nx = sizes[s][0], ny = sizes[s][1];
            sftest_noise_image(&im, nx + 3, ny, 100 + s, 3, 0.08);
            view = im;
            view.nx = nx; /* every row is nx + 3 long: a view of the first nx columns */
            if (q % 2)
                ck_assert_int_eq(sf_kernel_gauss(&k, ksz[q][0] / 3.0 + 1, ksz[q][0] / 5.0 + 0.5, 20 + q,
                                                 ksz[q][0]), SF_OK);
            else
                kernel_random(&k, ksz[q][0], ksz[q][1], 7 + q);
            for (int e = 0; e < 4; e++) {
                sf_image d, f;
                char what[128];
                conv(&view, &k, SF_CONV_DIRECT, edges[e], &d);
                conv(&view, &k, SF_CONV_FFT, edges[e], &f);
                snprintf(what, sizeof what, "%dx%d kernel %dx%d edge %s", nx, ny, k.nx, k.ny, edge_name[e]);
                double err = rel_l2(&f, &d, what);
                ck_assert_msg(err < 1e-5, "%s: fft vs direct relative L2 %.3g", what, err);
                /* NaN in stays NaN */
                long i = FIRST_BAD(sf_npix(nx, ny), !isnan(im.data[(i / nx) * im.stride + i % nx]) ||
                                                        isnan(d.data[i]));
                ck_assert_msg(i < 0, "%s: NaN pixel %ld not NaN out", what, i);
                worst = fmax(worst, err);
                sf_image_free(&d, NULL);
                sf_image_free(&f, NULL);
            }
            sf_kernel_free(&k);
            sf_image_free(&im, NULL);
        }
    printf("direct vs fft: worst relative L2 %.3g\n", worst);
}
END_TEST

/* Pixel i of a line of n extended by the edge mode (-1: zero mode outside),
 * written here from scipy.ndimage's definitions, apart from the library's. */
static long ref_edge(long i, long n, int edge)
{
    if (i >= 0 && i < n)
        return i;
    if (edge == SF_EDGE_ZERO)
        return -1;
    if (edge == SF_EDGE_NEAREST)
        return i < 0 ? 0 : n - 1;
    if (edge == SF_EDGE_WRAP)
        return ((i % n) + n) % n;
    long r = ((i % (2 * n)) + 2 * n) % (2 * n); /* reflect: period 2n, half-sample symmetric */
    return r < n ? r : 2 * n - 1 - r;
}

/* The general direct method's sums as convolve_fma.h and the GPU define
 * them: each kernel row's partial a chain of fmaf over its taps (the flipped
 * weights, left to right), the rows added from the top, in float up to 225
 * taps and in double above. (Rank-one kernels take the separable path.) */
static float ref_fma_pixel(const sf_image *in, const sf_kernel *k, int edge, int x, int y)
{
    const int kx = k->nx, ky = k->ny;
    float sf = 0;
    double sd = 0;
    for (int kr = 0; kr < ky; kr++) {
        long sy = ref_edge((long)y - (ky - 1 - ky / 2) + kr, in->ny, edge);
        float p = 0;
        for (int t = 0; t < kx; t++) {
            long sx = ref_edge((long)x - (kx - 1 - kx / 2) + t, in->nx, edge);
            float v = sy < 0 || sx < 0 ? 0.0f : in->data[(size_t)sy * in->stride + sx];
            p = fmaf(k->w[(size_t)(ky - 1 - kr) * kx + (kx - 1 - t)], v, p);
        }
        if ((long)kx * ky > 225)
            sd += p;
        else
            sf += p;
    }
    return (long)kx * ky > 225 ? (float)sd : sf;
}

START_TEST(test_cpu_direct_fma_bits)
{
    /* widths that take every copy of the vector builds (1..13 two blocks in
     * AVX-512 and in registers in AVX2, 14..27 one block, 28 and over the
     * loads at every tap), heights around the 8-row band, the double rows
     * above 225 taps; images narrower than a vector step and not multiples
     * of it, one a view with a longer row stride; 1 and 3 threads */
    static const int sizes[][2] = {{1, 1}, {7, 5}, {33, 40}, {100, 37}, {131, 19}};
    static const int kw[] = {2, 3, 4, 5, 8, 13, 14, 15, 16, 21, 27, 28, 31};
    static const int kh[] = {2, 3, 8, 9, 15, 17};
    int nchecked = 0;
    for (int s = 0; s < 5; s++) {
        const int nx = sizes[s][0], ny = sizes[s][1];
        sf_image im, view;
        sftest_noise_image(&im, nx + 5, ny, 300 + s, 2, 0.0);
        view = im;
        view.nx = nx;
        for (int a = 0; a < 13; a++)
            for (int b = 0; b < 6; b++) {
                sf_kernel k;
                if ((a + b + s) % 2) /* half the combinations, every width and height */
                    continue;
                kernel_random(&k, kw[a], kh[b], 40 + a * 7 + b);
                ck_assert_msg(!k.row, "kernel %dx%d: random weights of rank one", k.nx, k.ny);
                for (int e = 0; e < 4; e++) {
                    int t = 1 + 2 * ((a + e) % 2), prev = omp_get_max_threads();
                    sf_image d;
                    omp_set_num_threads(t);
                    conv(&view, &k, SF_CONV_DIRECT, edges[e], &d);
                    omp_set_num_threads(prev);
                    long i = FIRST_BAD(sf_npix(nx, ny), ({
                        float r = ref_fma_pixel(&view, &k, edges[e], (int)(i % nx), (int)(i / nx));
                        !memcmp(&r, &d.data[(i / nx) * d.stride + i % nx], sizeof r);
                    }));
                    ck_assert_msg(i < 0, "%dx%d kernel %dx%d edge %s, %d threads: pixel (%ld,%ld) "
                                  "%.9g, the fma chains give %.9g", nx, ny, k.nx, k.ny,
                                  edge_name[e], t, i % nx, i / nx, d.data[(i / nx) * d.stride + i % nx],
                                  ref_fma_pixel(&view, &k, edges[e], (int)(i % nx), (int)(i / nx)));
                    nchecked++;
                    sf_image_free(&d, NULL);
                }
                sf_kernel_free(&k);
            }
        sf_image_free(&im, NULL);
    }
    printf("direct 2-D sums (%s): %d convolutions bit for bit as the fma chains\n",
           sf_simd_name(), nchecked);
}
END_TEST

START_TEST(test_cpu_separable_vs_2d)
{
    /* the rank-one passes against the general 2-D sum on the same weights */
    static const double fw[][3] = {{3, 3, 0}, {8, 3, 0}, {8, 3, 90}, {2, 1, -180}, {30, 30, 0}};
    for (int q = 0; q < 5; q++)
        for (int nanf = 0; nanf < 2; nanf++) {
            sf_kernel k, k2;
            sf_image im;
            ck_assert_int_eq(sf_kernel_gauss(&k, fw[q][0], fw[q][1], fw[q][2], q == 3 ? 6 : 0), SF_OK);
            ck_assert_msg(k.row && k.col, "%s: no rank-one factors", k.desc);
            k2 = k;
            k2.row = k2.col = NULL; /* the same weights through the general path */
            sftest_noise_image(&im, 97, 64, 40 + q, 5, nanf ? 0.1 : 0);
            for (int e = 0; e < 4; e++) {
                sf_image a, b;
                char what[160];
                conv(&im, &k, SF_CONV_DIRECT, edges[e], &a);
                conv(&im, &k2, SF_CONV_DIRECT, edges[e], &b);
                snprintf(what, sizeof what, "%s edge %s nan %d", k.desc, edge_name[e], nanf);
                double err = rel_l2(&a, &b, what);
                ck_assert_msg(err < 1e-6, "%s: separable vs 2-D relative L2 %.3g", what, err);
                sf_image_free(&a, NULL);
                sf_image_free(&b, NULL);
            }
            sf_kernel_free(&k);
            sf_image_free(&im, NULL);
        }
}
END_TEST

START_TEST(test_cpu_gauss)
{
    sf_kernel k;
    /* unit sum and the noise gain of a wide round beam: sum w^2 = 1/(4 pi sx sy) */
    double f = 10.0, sig = f / (2 * sqrt(2 * log(2)));
    ck_assert_int_eq(sf_kernel_gauss(&k, f, f, 0, 0), SF_OK);
    ck_assert_int_eq(k.nx % 2, 1);
    ck_assert_int_eq(k.nx, 2 * (int)ceil(3 * sig) + 1);
    ck_assert_msg(fabs(k.sum - 1) < 1e-6, "sum %.9g", k.sum);
    ck_assert_msg(fabs(sf_kernel_noise_gain(&k) / sqrt(1 / (4 * M_PI * sig * sig)) - 1) < 0.01,
                  "noise gain %g, expected %g", sf_kernel_noise_gain(&k), sqrt(1 / (4 * M_PI * sig * sig)));
    ck_assert(k.row && k.col);
    ck_assert(FIRST_BAD(sf_npix(k.nx, k.ny), k.w[i] == k.col[i / k.nx] * k.row[i % k.nx]) < 0);
    /* filtered white noise has rms sqrt(sum2) */
    {
        sf_image im, out;
        double s2 = 0;
        sftest_noise_image(&im, 400, 400, 9, 0, 0);
        conv(&im, &k, SF_CONV_AUTO, SF_EDGE_WRAP, &out);
        for (size_t i = 0; i < sf_npix(400, 400); i++)
            s2 += (double)out.data[i] * out.data[i];
        ck_assert_msg(fabs(sqrt(s2 / sf_npix(400, 400)) / sqrt(k.sum2) - 1) < 0.1,
                      "filtered noise rms %g, expected %g", sqrt(s2 / sf_npix(400, 400)), sqrt(k.sum2));
        sf_image_free(&im, NULL);
        sf_image_free(&out, NULL);
    }
    sf_kernel_free(&k);
    /* elliptical: sum 1 and noise gain 1/sqrt(4 pi smaj smin) */
    ck_assert_int_eq(sf_kernel_gauss(&k, 12.0, 6.0, 30, 0), SF_OK);
    ck_assert_msg(k.row == NULL && k.col == NULL, "a rotated ellipse is not rank one");
    ck_assert_msg(fabs(k.sum - 1) < 1e-6, "sum %.9g", k.sum);
    {
        double sx = 12.0 / 2.3548200450309493, sy = 6.0 / 2.3548200450309493;
        double want = sqrt(1 / (4 * M_PI * sx * sy));
        ck_assert_msg(fabs(sf_kernel_noise_gain(&k) / want - 1) < 0.02, "gain %g want %g",
                      sf_kernel_noise_gain(&k), want);
    }
    /* PA from +y towards -x: at 30 deg the major axis points to (-sin30, cos30) */
    {
        int c = k.nx / 2;
        float along = k.w[(c + 5) * k.nx + c - 3], across = k.w[(c + 5) * k.nx + c + 3];
        ck_assert_msg(along > across, "PA 30: w(-3,+5) %g <= w(+3,+5) %g", along, across);
    }
    sf_kernel_free(&k);
    /* PA 0: major along y; PA 90: along x; both rank one */
    ck_assert_int_eq(sf_kernel_gauss(&k, 6, 2, 0, 0), SF_OK);
    ck_assert(k.row && k.w[(k.ny / 2 + 3) * k.nx + k.nx / 2] > k.w[(k.ny / 2) * k.nx + k.nx / 2 + 3]);
    sf_kernel_free(&k);
    ck_assert_int_eq(sf_kernel_gauss(&k, 6, 2, 90, 0), SF_OK);
    ck_assert(k.row && k.w[(k.ny / 2 + 3) * k.nx + k.nx / 2] < k.w[(k.ny / 2) * k.nx + k.nx / 2 + 3]);
    sf_kernel_free(&k);
    /* the automatic side stops at SF_KERNEL_MAX; an explicit even side */
    ck_assert_int_eq(sf_kernel_gauss(&k, 200, 200, 0, 0), SF_OK);
    ck_assert_int_eq(k.nx, SF_KERNEL_MAX);
    sf_kernel_free(&k);
    ck_assert_int_eq(sf_kernel_gauss(&k, 3, 3, 0, 8), SF_OK);
    ck_assert_int_eq(k.nx, 8);
    ck_assert_msg(k.w[4 * 8 + 4] > k.w[3 * 8 + 3] && k.w[4 * 8 + 4] > k.w[5 * 8 + 5],
                  "even side: the peak is at index n/2");
    sf_kernel_free(&k);
    ck_assert_int_eq(sf_kernel_gauss(&k, 2, 3, 0, 0), SF_ERR_PARAM);
    ck_assert_int_eq(sf_kernel_gauss(&k, 0, 0, 0, 0), SF_ERR_PARAM);
    ck_assert_int_eq(sf_kernel_gauss(&k, 3, 3, NAN, 0), SF_ERR_PARAM);
}
END_TEST

START_TEST(test_cpu_kernels)
{
    sf_kernel k;
    sftest_rng r = {77};
    float w[6 * 5];
    /* tophat: pixels within the radius, unit sum */
    ck_assert_int_eq(sf_kernel_tophat(&k, 2.0), SF_OK);
    ck_assert_int_eq(k.nx, 5);
    ck_assert_msg(fabs(k.sum - 1) < 1e-6, "tophat sum %g", k.sum);
    ck_assert(k.w[0] == 0 && k.w[2] > 0 && k.w[2] == k.w[12]); /* (0,0) out; (2,0) at r=2 in */
    sf_kernel_free(&k);
    /* rank one detected for an outer product, not for a random array */
    for (int j = 0; j < 5; j++)
        for (int i = 0; i < 6; i++)
            w[j * 6 + i] = (float)(0.5 + j) * (float)(1.0 + 0.3 * i);
    ck_assert_int_eq(sf_kernel_from_array(&k, w, 6, 5, 0), SF_OK);
    ck_assert(k.row && k.col);
    ck_assert(FIRST_BAD(30, fabsf(k.col[i / 6] * k.row[i % 6] - w[i]) <= 1e-6f * w[29]) < 0);
    sf_kernel_free(&k);
    for (int i = 0; i < 30; i++)
        w[i] = (float)sftest_uniform(&r);
    ck_assert_int_eq(sf_kernel_from_array(&k, w, 6, 5, 1), SF_OK);
    ck_assert(k.row == NULL && k.col == NULL);
    ck_assert_msg(fabs(k.sum - 1) < 1e-6, "normalised sum %g", k.sum);
    sf_kernel_free(&k);
    /* errors: NaN weights, zero sum */
    w[3] = NAN;
    ck_assert_int_eq(sf_kernel_from_array(&k, w, 6, 5, 0), SF_ERR_PARAM);
    memset(w, 0, sizeof w);
    ck_assert_int_eq(sf_kernel_from_array(&k, w, 6, 5, 1), SF_ERR_PARAM);
    /* FFT sizes: 2^a 3^b 5^c 7^d */
    ck_assert_int_eq(sf_fft_size(1), 1);
    ck_assert_int_eq(sf_fft_size(11), 12);
    ck_assert_int_eq(sf_fft_size(13), 14);
    ck_assert_int_eq(sf_fft_size(127), 128);
    ck_assert_int_eq(sf_fft_size(131), 135);
    ck_assert_int_eq(sf_fft_size(1031), 1050);
}
END_TEST

static const char *write_file(const char *name, const char *text)
{
    static char path[4][256];
    static int n;
    char *p = path[n++ % 4];
    snprintf(p, 256, "/tmp/sftest_conv_%d_%s", (int)getpid(), name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static void expect_conv_error(const char *text, sf_status want, const char *where)
{
    sf_kernel k;
    const char *p = write_file("bad.conv", text);
    char needle[300];
    snprintf(needle, sizeof needle, "%s%s", p, where);
    ck_assert_int_eq(sf_kernel_read_conv(&k, p), want);
    ck_assert_msg(strstr(sf_errdetail(), needle) != NULL, "detail \"%s\" does not name \"%s\"",
                  sf_errdetail(), needle);
    unlink(p);
}

START_TEST(test_cpu_conv_file)
{
    sf_kernel k;
    const char *p;
    /* SExtractor's default.conv: NORM divides by the sum (of |w|) = 16 */
    p = write_file("norm.conv", "CONV NORM\n# 3x3 ``all-ground'' convolution mask with FWHM = 2 pixels.\n"
                                "1 2 1\n2 4 2\n\n1 2 1\n");
    ck_assert_msg(sf_kernel_read_conv(&k, p) == SF_OK, "%s", sf_errdetail());
    ck_assert_int_eq(k.nx, 3);
    ck_assert_int_eq(k.ny, 3);
    ck_assert(k.w[4] == 0.25f && k.w[0] == 0.0625f && k.w[1] == 0.125f);
    ck_assert(k.row && k.col && fabs(k.sum - 1) < 1e-7);
    sf_kernel_free(&k);
    unlink(p);
    /* NONORM keeps the weights; rows in file order (first row = row 0) */
    p = write_file("nonorm.conv", "CONV NONORM\r\n-1 -2 -1 0\r\n0 0 0 0 # a comment\r\n1 2 1 5\r\n");
    ck_assert_msg(sf_kernel_read_conv(&k, p) == SF_OK, "%s", sf_errdetail());
    ck_assert_int_eq(k.nx, 4);
    ck_assert_int_eq(k.ny, 3);
    ck_assert(k.w[0] == -1 && k.w[1] == -2 && k.w[4] == 0 && k.w[11] == 5);
    ck_assert(fabs(k.sum - 5) < 1e-12);
    sf_kernel_free(&k);
    unlink(p);
    /* NORM with negative weights (a Mexican hat): divided by sum |w|, as SExtractor does */
    p = write_file("hat.conv", "CONV NORM\n-1 -1 -1\n-1 8 -1\n-1 -1 -1\n");
    ck_assert_msg(sf_kernel_read_conv(&k, p) == SF_OK, "%s", sf_errdetail());
    ck_assert(k.w[4] == 0.5f && k.w[0] == -0.0625f && fabs(k.sum) < 1e-7);
    sf_kernel_free(&k);
    unlink(p);
    /* malformed files: the detail names the file and the line */
    expect_conv_error("CONV NORM\n1 2 1\n2 4\n1 2 1\n", SF_ERR_PARAM, ":3:");
    expect_conv_error("CONV NORM\n1 2 1\n2 x 2\n", SF_ERR_PARAM, ":3:");
    expect_conv_error("CONV NORM\n1 2 1\n2 nan 2\n", SF_ERR_PARAM, ":3:");
    expect_conv_error("CONVOLUTION\n1 2 1\n", SF_ERR_PARAM, ":1:");
    expect_conv_error("CONV NORMAL\n1 2 1\n", SF_ERR_PARAM, ":1:");
    expect_conv_error("CONV NORM\n# nothing\n", SF_ERR_PARAM, ":2:");
    expect_conv_error("CONV NORM\n0 0\n0 0\n", SF_ERR_PARAM, ":");
    expect_conv_error("", SF_ERR_PARAM, ": empty");
    ck_assert_int_eq(sf_kernel_read_conv(&k, "/nonexistent/dir/x.conv"), SF_ERR_IO);
    ck_assert(strstr(sf_errdetail(), "/nonexistent/dir/x.conv") != NULL);
}
END_TEST

START_TEST(test_cpu_fits_kernel)
{
    sf_kernel k;
    sf_image im, out;
    if (!sftest_have_data()) {
        printf("SKIP: no test data (SKYFIND_TEST_DATA) for the FITS kernels\n");
        return;
    }
    /* a real dirty beam as the kernel: larger than SF_KERNEL_MAX, FFT only */
    ck_assert_msg(sf_kernel_read_fits(&k, sftest_data("radio_lofar_dirty_beam_512x512x1x1.fits"), 1) == SF_OK,
                  "%s", sf_errdetail());
    ck_assert_int_eq(k.nx, 512);
    ck_assert_msg(fabs(k.sum - 1) < 1e-5, "normalised beam sum %g", k.sum);
    sftest_noise_image(&im, 60, 40, 3, 2, 0.02);
    ck_assert_int_eq(sf_image_alloc(&out, 60, 40, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_convolve_cpu(&im, &k, SF_CONV_DIRECT, SF_EDGE_REFLECT, -1, &out), SF_ERR_PARAM);
    ck_assert_int_eq(sf_convolve_pick(&k, 60, 40, 0), SF_CONV_FFT);
    ck_assert_int_eq(sf_convolve_pick(&k, 60, 40, 1), SF_CONV_FFT);
    ck_assert_msg(sf_convolve_cpu(&im, &k, SF_CONV_AUTO, SF_EDGE_REFLECT, -1, &out) == SF_OK, "%s",
                  sf_errdetail());
    ck_assert(FIRST_BAD(sf_npix(60, 40), isnan(im.data[i]) ? isnan(out.data[i]) : isfinite(out.data[i])) < 0);
    sf_kernel_free(&k);
    sf_image_free(&im, NULL);
    sf_image_free(&out, NULL);
    /* NaN weights are an error naming the file */
    ck_assert_int_eq(sf_kernel_read_fits(&k, sftest_data("radio_parkes_1904-66_SIN.fits"), 1), SF_ERR_PARAM);
    ck_assert(strstr(sf_errdetail(), "radio_parkes_1904-66_SIN.fits") && strstr(sf_errdetail(), "NaN"));
}
END_TEST

START_TEST(test_cpu_nan_only_and_1x1)
{
    sf_kernel k;
    sf_image im, out;
    ck_assert_int_eq(sf_kernel_gauss(&k, 3, 2, 40, 5), SF_OK);
    /* all NaN in, all NaN out */
    ck_assert_int_eq(sf_image_alloc(&im, 19, 7, SF_HOST, NULL), SF_OK);
    for (size_t i = 0; i < sf_npix(19, 7); i++)
        im.data[i] = NAN;
    for (int e = 0; e < 4; e++)
        for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++) {
            conv(&im, &k, m, edges[e], &out);
            long i = FIRST_BAD(sf_npix(19, 7), isnan(out.data[i]));
            ck_assert_msg(i < 0, "NaN image, edge %s method %d: pixel %ld = %g", edge_name[e], m, i,
                          out.data[i < 0 ? 0 : i]);
            sf_image_free(&out, NULL);
        }
    sf_image_free(&im, NULL);
    /* 1x1 image: value * sum, except zero edge: value * centre weight */
    ck_assert_int_eq(sf_image_alloc(&im, 1, 1, SF_HOST, NULL), SF_OK);
    im.data[0] = 3.0f;
    for (int e = 0; e < 4; e++)
        for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++) {
            double want = edges[e] == SF_EDGE_ZERO ? 3.0 * k.w[2 * 5 + 2] : 3.0 * k.sum;
            conv(&im, &k, m, edges[e], &out);
            ck_assert_msg(fabs(out.data[0] - want) <= 1e-6 * want, "1x1 edge %s method %d: %.9g want %.9g",
                          edge_name[e], m, out.data[0], want);
            sf_image_free(&out, NULL);
        }
    im.data[0] = NAN;
    conv(&im, &k, SF_CONV_DIRECT, SF_EDGE_ZERO, &out);
    ck_assert(isnan(out.data[0]));
    sf_image_free(&out, NULL);
    sf_image_free(&im, NULL);
    sf_kernel_free(&k);
}
END_TEST

START_TEST(test_cpu_params)
{
    sf_kernel k, big;
    sf_image im, out;
    sftest_noise_image(&im, 20, 10, 1, 1, 0);
    ck_assert_int_eq(sf_image_alloc(&out, 20, 10, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_kernel_gauss(&k, 3, 3, 0, 0), SF_OK);
    ck_assert_int_eq(sf_convolve_cpu(&im, &k, SF_CONV_DIRECT, 7, 0, &out), SF_ERR_PARAM);
    ck_assert_int_eq(sf_convolve_cpu(&im, &k, 9, SF_EDGE_ZERO, 0, &out), SF_ERR_PARAM);
    ck_assert_int_eq(sf_convolve_cpu(&im, &k, SF_CONV_DIRECT, SF_EDGE_ZERO, 2, &out), SF_ERR_PARAM);
    ck_assert_int_eq(sf_convolve_cpu(&im, &k, SF_CONV_DIRECT, SF_EDGE_ZERO, 0, &im), SF_ERR_PARAM);
    /* a kernel side over SF_KERNEL_MAX: direct refuses, auto and fft work */
    ck_assert_int_eq(sf_kernel_gauss(&big, 100, 100, 0, SF_KERNEL_MAX + 2), SF_OK);
    ck_assert_int_eq(sf_convolve_cpu(&im, &big, SF_CONV_DIRECT, SF_EDGE_WRAP, 0, &out), SF_ERR_PARAM);
    ck_assert(strstr(sf_errdetail(), "129") != NULL);
    ck_assert_int_eq(sf_convolve_cpu(&im, &big, SF_CONV_AUTO, SF_EDGE_WRAP, 0, &out), SF_OK);
    /* the GPU policy: rank one direct; others direct up to 225 taps */
    ck_assert_int_eq(sf_convolve_pick(&big, 20, 10, 1), SF_CONV_FFT);
    ck_assert_int_eq(sf_convolve_pick(&k, 4096, 4096, 1), SF_CONV_DIRECT);
    sf_kernel_free(&big);
    ck_assert_int_eq(sf_kernel_gauss(&big, 30, 10, 30, 41), SF_OK);
    ck_assert_int_eq(sf_convolve_pick(&big, 4096, 4096, 1), SF_CONV_FFT);
    ck_assert_int_eq(sf_convolve_pick(&big, 4096, 4096, 0), SF_CONV_FFT);
    ck_assert_int_eq(sf_convolve_pick(&k, 4096, 4096, 0), SF_CONV_DIRECT);
    sf_kernel_free(&big);
    ck_assert_int_eq(sf_kernel_gauss(&big, 5, 3, 30, 15), SF_OK); /* 15x15, not rank one: */
    ck_assert_ptr_null(big.row); /* direct at every size (the H100's measured crossover) */
    ck_assert_int_eq(sf_convolve_pick(&big, 4096, 4096, 1), SF_CONV_DIRECT);
    ck_assert_int_eq(sf_convolve_pick(&big, 2048, 2048, 1), SF_CONV_DIRECT);
    sf_kernel_free(&big);
    ck_assert_int_eq(sf_kernel_gauss(&big, 6, 4, 30, 17), SF_OK); /* 17x17: 289 taps, FFT */
    ck_assert_ptr_null(big.row);
    ck_assert_int_eq(sf_convolve_pick(&big, 8192, 8192, 1), SF_CONV_FFT);
    sf_kernel_free(&big);
    sf_kernel_free(&k);
    sf_image_free(&im, NULL);
    sf_image_free(&out, NULL);
}
END_TEST

/* ---- GPU against the CPU twin ---------------------------------------------- */

/* The GPU result of one method against the CPU's (same method): relative L2
 * under 1e-6 (direct) or 1e-5 (fft), NaN positions identical. */
static void gpu_check(const sf_image *h, const sf_kernel *k, int method, int edge, int nan,
                      const char *what)
{
    sf_gpu *g = sftest_gpu();
    sf_image c = {0}, gh = {0}, d = {0}, o = {0};
    char buf[256];
    snprintf(buf, sizeof buf, "gpu %s %dx%d kernel %dx%d%s %s edge %s nan %d", what, h->nx, h->ny,
             k->nx, k->ny, k->row ? " (rank one)" : "", method == SF_CONV_FFT ? "fft" : "direct",
             edge_name[edge], nan);
    conv(h, k, method, edge, &c);
    ck_assert_int_eq(sf_image_alloc(&gh, h->nx, h->ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&d, h->nx, h->ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&o, h->nx, h->ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_upload(g, h, &d), SF_OK);
    sftest_poison(g, o.data, sf_npix(h->nx, h->ny) * sizeof(float));
    ck_assert_int_eq(sf_gpu_reserve(g, sf_convolve_gpu_scratch(h->nx, h->ny, k, method)), SF_OK);
    sf_status st = sf_convolve_gpu(g, &d, k, method, edge, nan, &o);
    ck_assert_msg(st == SF_OK, "%s: %s", buf, sf_errdetail());
    ck_assert_int_eq(sf_image_download(g, &o, &gh), SF_OK);
    double e = rel_l2(&gh, &c, buf);
    ck_assert_msg(e < (method == SF_CONV_FFT ? 1e-5 : 1e-6), "%s: relative L2 %.3g", buf, e);
    /* the input is kept (the FFT may read it in place) */
    ck_assert_int_eq(sf_image_download(g, &d, &gh), SF_OK);
    for (int y = 0; y < h->ny; y++)
        ck_assert_msg(!memcmp(gh.data + (size_t)y * gh.stride, h->data + (size_t)y * h->stride,
                              (size_t)h->nx * sizeof(float)),
                      "%s: the input image changed (row %d)", buf, y);
    sf_image_free(&c, NULL);
    sf_image_free(&gh, NULL);
    sf_image_free(&d, g);
    sf_image_free(&o, g);
}

START_TEST(test_gpu_methods)
{
    /* kernel sides: odd and even, 1 to 63; rank one (round Gaussian) or not */
    static const int sides[] = {1, 2, 3, 4, 5, 8, 15, 16, 31, 41, 63};
    const int nsides = sftest_quick() ? 4 : (int)(sizeof sides / sizeof *sides);
    for (int s = 0; sftest_sizes[s][0]; s++) {
        int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
        sf_image h;
        if (sftest_quick() && nx * ny > 70000) /* under compute-sanitizer */
            continue;
        sftest_noise_image(&h, nx, ny, 500 + s, nx * ny / 400 + 1, s % 2 ? 0.03 : 0.0);
        for (int ki = 0; ki < nsides; ki++)
            for (int rank1 = 0; rank1 < 2; rank1++) {
                sf_kernel k;
                int kx = sides[ki], ky = rank1 ? sides[ki] : sides[(ki + 3) % nsides];
                if (rank1) {
                    ck_assert_int_eq(sf_kernel_gauss(&k, kx / 2.5 + 0.5, kx / 2.5 + 0.5, 0, kx), SF_OK);
                    if (!k.row) { /* even sides: a rank-one kernel from an outer product */
                        sf_kernel_free(&k);
                        continue;
                    }
                } else {
                    kernel_random(&k, kx, ky, 77 + ki);
                }
                /* every edge mode on every 3rd combination, reflect on the others */
                for (int e = 0; e < 4; e++) {
                    if (e != SF_EDGE_REFLECT && (s + ki) % 3)
                        continue;
                    for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++)
                        gpu_check(&h, &k, m, edges[e], s % 2 ? -1 : 0, "noise");
                }
                sf_kernel_free(&k);
            }
        sf_image_free(&h, NULL);
    }
}
END_TEST

/* The direct method's general 2-D sums are the same bits on the GPU and the
 * CPU on images without NaN (convolve_fma.h): every edge mode, the nan hints
 * 0 and 1, kernels 2 to 40 columns wide (the register-blocked tiles up to
 * 24, direct2d_kernel above), 2 to 17 rows, float and double row sums, and
 * the radio sky's restoring beam. */
START_TEST(test_gpu_direct_bits)
{
    static const int kd[][2] = {{2, 3}, {3, 3}, {5, 9}, {8, 2}, {13, 17}, {15, 15}, {16, 9},
                                {21, 11}, {24, 15}, {31, 5}, {40, 4}};
    sf_gpu *g = sftest_gpu();
    int nsame = 0;
    for (int s = 0; sftest_sizes[s][0]; s++) {
        const int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
        sf_image h, d = {0}, o = {0}, gh = {0};
        if (sftest_quick() && nx * ny > 70000)
            continue;
        sftest_noise_image(&h, nx, ny, 700 + s, nx * ny / 500 + 1, 0.0);
        ck_assert_int_eq(sf_image_alloc(&gh, nx, ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&d, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&o, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_upload(g, &h, &d), SF_OK);
        for (int q = 0; q <= 11; q++) {
            sf_kernel k;
            if (q < 11)
                kernel_random(&k, kd[q][0], kd[q][1], 90 + q);
            else /* sim2048's beam: 5 x 3.5 px FWHM at 30 degrees, 15 x 15 */
                ck_assert_int_eq(sf_kernel_gauss(&k, 5.0, 3.5, 30, 15), SF_OK);
            ck_assert(!k.row);
            for (int e = 0; e < 4; e++)
                for (int nan = 0; nan <= 1; nan++) {
                    sf_image c;
                    if ((e + nan + q + s) % 3 && e != SF_EDGE_ZERO)
                        continue;
                    conv(&h, &k, SF_CONV_DIRECT, edges[e], &c);
                    sftest_poison(g, o.data, sf_npix(nx, ny) * sizeof(float));
                    ck_assert_int_eq(sf_gpu_reserve(g, sf_convolve_gpu_scratch(nx, ny, &k, SF_CONV_DIRECT)),
                                     SF_OK);
                    ck_assert_msg(sf_convolve_gpu(g, &d, &k, SF_CONV_DIRECT, edges[e], nan, &o) == SF_OK,
                                  "%s", sf_errdetail());
                    ck_assert_int_eq(sf_image_download(g, &o, &gh), SF_OK);
                    long i = FIRST_BAD(sf_npix(nx, ny),
                                       !memcmp(&gh.data[(i / nx) * gh.stride + i % nx],
                                               &c.data[(i / nx) * c.stride + i % nx], sizeof(float)));
                    ck_assert_msg(i < 0, "%dx%d kernel %dx%d edge %s nan %d: pixel (%ld,%ld) GPU %.9g, "
                                  "CPU %.9g", nx, ny, k.nx, k.ny, edge_name[e], nan, i % nx, i / nx,
                                  gh.data[(i / nx) * gh.stride + i % nx], c.data[(i / nx) * c.stride + i % nx]);
                    nsame++;
                    sf_image_free(&c, NULL);
                }
            sf_kernel_free(&k);
        }
        sf_image_free(&h, NULL);
        sf_image_free(&gh, NULL);
        sf_image_free(&d, g);
        sf_image_free(&o, g);
    }
    printf("gpu direct 2-D: %d convolutions the same bits as the CPU twin's\n", nsame);
}
END_TEST

/* NaN regions (blocks and scattered), large kernels, auto, images smaller
 * than the kernel, and the nan hint 1 on an image without NaN. */
START_TEST(test_gpu_nan_and_small)
{
    static const int dims[][2] = {{300, 211}, {17, 9}, {1, 1}, {5, 70}, {0, 0}};
    for (int s = 0; dims[s][0]; s++) {
        sf_image h;
        sf_kernel k;
        sftest_noise_image(&h, dims[s][0], dims[s][1], 900 + s, 3, 0.1);
        for (int y = 0; y < h.ny / 3; y++) /* a blank corner */
            for (int x = 0; x < h.nx / 2; x++)
                h.data[(size_t)y * h.stride + x] = NAN;
        ck_assert_int_eq(sf_kernel_gauss(&k, 9.0, 4.0, 30, 0), SF_OK); /* not rank one */
        for (int e = 0; e < 4; e++)
            for (int m = SF_CONV_AUTO; m <= SF_CONV_FFT; m++)
                gpu_check(&h, &k, m, edges[e], 1, "nan-regions");
        sf_kernel_free(&k);
        ck_assert_int_eq(sf_kernel_gauss(&k, 6.0, 6.0, 0, 0), SF_OK); /* rank one */
        for (int e = 0; e < 4; e++)
            for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++)
                gpu_check(&h, &k, m, edges[e], -1, "nan-regions");
        sf_kernel_free(&k);
        sf_image_free(&h, NULL);
    }
    {   /* nan=1 on a NaN-free image: the renormalised path must equal the plain one */
        sf_image h;
        sf_kernel k;
        sftest_noise_image(&h, 257, 129, 4, 5, 0.0);
        kernel_random(&k, 7, 5, 3);
        for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++)
            gpu_check(&h, &k, m, SF_EDGE_NEAREST, 1, "nan-hint");
        sf_kernel_free(&k);
        sf_image_free(&h, NULL);
    }
}
END_TEST

/* A kernel larger than the direct method takes is refused with a message;
 * the FFT takes it. */
START_TEST(test_gpu_big_kernel)
{
    sf_gpu *g = sftest_gpu();
    sf_image h, d = {0}, o = {0};
    sf_kernel k;
    sftest_noise_image(&h, 200, 150, 8, 5, 0.0);
    kernel_random(&k, 131, 9, 5);
    ck_assert_int_eq(sf_image_alloc(&d, h.nx, h.ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&o, h.nx, h.ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_upload(g, &h, &d), SF_OK);
    ck_assert_int_eq(sf_convolve_gpu(g, &d, &k, SF_CONV_DIRECT, SF_EDGE_ZERO, 0, &o), SF_ERR_PARAM);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "fft"));
    gpu_check(&h, &k, SF_CONV_FFT, SF_EDGE_WRAP, 0, "big-kernel");
    sf_kernel_free(&k);
    sf_image_free(&d, g);
    sf_image_free(&o, g);
    sf_image_free(&h, NULL);
}
END_TEST

/* Rows of the filtered image without filtering it all (sf_convolve_rows_gpu):
 * the same bits as those rows of the whole image's convolution, for every
 * edge mode, kernels of 1-24 columns (float and double sums), widths that
 * are not multiples of a block; a separable kernel is declined. */
START_TEST(test_gpu_rows)
{
    static const int dims[][2] = {{1000, 777}, {515, 300}, {37, 61}, {0, 0}};
    static const int ksz[][2] = {{15, 15}, {7, 5}, {21, 9}, {3, 17}, {1, 1}, {24, 3}};
    sf_gpu *g = sftest_gpu();
    for (int s = 0; dims[s][0]; s++) {
        sf_image h, d = {0}, o = {0}, r = {0}, ho = {0}, hr = {0};
        const int nx = dims[s][0], ny = dims[s][1], y0 = 3 % ny, step = 7;
        const int rows = (ny - 1 - y0) / step + 1;
        sftest_noise_image(&h, nx, ny, 40 + s, 6, 0.0);
        ck_assert_int_eq(sf_image_alloc(&d, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&o, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&r, nx, rows, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&ho, nx, ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&hr, nx, rows, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_image_upload(g, &h, &d), SF_OK);
        for (size_t q = 0; q < sizeof ksz / sizeof *ksz; q++)
            for (int e = 0; e < 4; e++) {
                sf_kernel k;
                int done = -1;
                kernel_random(&k, ksz[q][0], ksz[q][1], 11 + q);
                ck_assert_int_eq(sf_convolve_gpu(g, &d, &k, SF_CONV_DIRECT, edges[e], 0, &o), SF_OK);
                sftest_poison(g, r.data, sf_npix(nx, rows) * sizeof(float));
                ck_assert_int_eq(sf_convolve_rows_gpu(g, &d, &k, SF_CONV_DIRECT, edges[e], y0, step, &r, &done),
                                 SF_OK);
                if (k.row && k.col) { /* found rank one: the separable kernels' */
                    ck_assert_int_eq(done, 0);
                    sf_kernel_free(&k);
                    continue;
                }
                ck_assert_int_eq(done, 1);
                ck_assert_int_eq(sf_image_download(g, &o, &ho), SF_OK);
                ck_assert_int_eq(sf_image_download(g, &r, &hr), SF_OK);
                for (int i = 0; i < rows; i++)
                    ck_assert_msg(!memcmp(hr.data + (size_t)i * hr.stride,
                                          ho.data + (size_t)(y0 + i * step) * ho.stride, (size_t)nx * sizeof(float)),
                                  "%dx%d kernel %dx%d edge %s: row %d differs from the whole image's",
                                  nx, ny, k.nx, k.ny, edge_name[e], y0 + i * step);
                sf_kernel_free(&k);
            }
        {   /* separable: the two-pass or fused kernels, not this one */
            sf_kernel k;
            int done = -1;
            ck_assert_int_eq(sf_kernel_gauss(&k, 3.0, 3.0, 0, 0), SF_OK);
            ck_assert_ptr_nonnull(k.row);
            ck_assert_int_eq(sf_convolve_rows_gpu(g, &d, &k, SF_CONV_DIRECT, SF_EDGE_REFLECT, y0, step, &r, &done),
                             SF_OK);
            ck_assert_int_eq(done, 0);
            sf_kernel_free(&k);
        }
        sf_image_free(&h, NULL);
        sf_image_free(&ho, NULL);
        sf_image_free(&hr, NULL);
        sf_image_free(&d, g);
        sf_image_free(&o, g);
        sf_image_free(&r, g);
    }
    {   /* more rows than a grid's y: declined (the serial order takes them) */
        sf_image d = {0}, r = {0};
        sf_kernel k;
        int done = -1;
        kernel_random(&k, 15, 15, 5);
        ck_assert_int_eq(sf_image_alloc(&d, 16, 140000, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&r, 16, 70000, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_convolve_rows_gpu(g, &d, &k, SF_CONV_DIRECT, SF_EDGE_REFLECT, 0, 2, &r, &done), SF_OK);
        ck_assert_int_eq(done, 0);
        sf_kernel_free(&k);
        sf_image_free(&d, g);
        sf_image_free(&r, g);
    }
}
END_TEST

/* A non-finite pixel just beside a kernel's footprint leaves the output
 * finite, as on the CPU: kernels of 3, 7, 11 and 15 columns (padded to a
 * multiple of 4 in the register-blocked kernel, whose zero taps must not
 * read the pixel past the footprint: 0 * inf is NaN) and 5 and 9 (padded by
 * 3), each non-finite output where the CPU's is, the others close to it. */
START_TEST(test_gpu_inf_beside)
{
    static const int kw[] = {3, 7, 11, 15, 5, 9};
    sf_gpu *g = sftest_gpu();
    for (size_t q = 0; q < sizeof kw / sizeof *kw; q++)
        for (int sign = 0; sign < 2; sign++) {
            const int nx = 97, ny = 83;
            sf_image h, c = {0}, gh = {0}, d = {0}, o = {0};
            sf_kernel k;
            sftest_noise_image(&h, nx, ny, 70 + (int)q, 3, 0.0);
            h.data[(size_t)41 * h.stride + 50] = sign ? -INFINITY : INFINITY;
            kernel_random(&k, kw[q], kw[q] > 9 ? 13 : 7, 300 + q);
            conv(&h, &k, SF_CONV_DIRECT, SF_EDGE_REFLECT, &c);
            ck_assert_int_eq(sf_image_alloc(&gh, nx, ny, SF_HOST, NULL), SF_OK);
            ck_assert_int_eq(sf_image_alloc(&d, nx, ny, SF_DEVICE, g), SF_OK);
            ck_assert_int_eq(sf_image_alloc(&o, nx, ny, SF_DEVICE, g), SF_OK);
            ck_assert_int_eq(sf_image_upload(g, &h, &d), SF_OK);
            ck_assert_int_eq(sf_convolve_gpu(g, &d, &k, SF_CONV_DIRECT, SF_EDGE_REFLECT, 0, &o), SF_OK);
            ck_assert_int_eq(sf_image_download(g, &o, &gh), SF_OK);
            int nonfinite = 0;
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++) {
                    const float a = gh.data[(size_t)y * gh.stride + x], b = c.data[(size_t)y * c.stride + x];
                    nonfinite += !isfinite(b);
                    ck_assert_msg(isfinite(a) == isfinite(b),
                                  "kernel %dx%d, %cinf at (50,41): output (%d,%d) is %g on the GPU, %g on the CPU",
                                  k.nx, k.ny, sign ? '-' : '+', x, y, a, b);
                    if (isfinite(b))
                        ck_assert_msg(fabsf(a - b) <= 1e-4f * (1.0f + fabsf(b)),
                                      "kernel %dx%d: output (%d,%d) %.9g against %.9g", k.nx, k.ny, x, y, a, b);
                }
            ck_assert_int_ge(nonfinite, 1); /* the footprint's outputs are not finite */
            sf_kernel_free(&k);
            sf_image_free(&h, NULL);
            sf_image_free(&c, NULL);
            sf_image_free(&gh, NULL);
            sf_image_free(&d, g);
            sf_image_free(&o, g);
        }
}
END_TEST

/* convolve noise=measured's clippings beside the convolution
 * (sf_convolve_noise_gpu): the filtered image is sf_convolve_gpu's, bit for
 * bit, and both statistics are those of the serial order (the rows copied,
 * then clipped by sf_background_gpu): median, sigma, counts and
 * iterations; images with NaN, an unknown NaN hint, or a step of 1 are
 * declined. */
START_TEST(test_gpu_noise_beside)
{
    static const int dims[][2] = {{2048, 1100}, {1531, 2900}, {0, 0}};
    sf_gpu *g = sftest_gpu();
    sf_bkg_params bp;
    sf_bkg_params_default(&bp);
    bp.method = SF_BKG_GLOBAL;
    for (int s = 0; dims[s][0]; s++) {
        const int nx = dims[s][0], ny = dims[s][1];
        const size_t npix = sf_npix(nx, ny);
        const int step = (int)(npix >> 20), y0 = step / 2;
        sf_image h, d = {0}, o = {0}, o2 = {0}, ho = {0}, ho2 = {0};
        sf_kernel k;
        sf_bkg_stats sa, sb, ra, rb;
        sf_status sta = SF_ERR_INTERNAL, stb = SF_ERR_INTERNAL;
        int done = -1;
        if (sftest_quick() && s)
            break;
        ck_assert_int_ge(step, 2);
        sftest_noise_image(&h, nx, ny, 70 + s, 300, 0.0);
        ck_assert_int_eq(sf_kernel_gauss(&k, 4.5, 3.0, 25, 0), SF_OK); /* not rank one */
        ck_assert_ptr_null(k.row);
        ck_assert_int_eq(sf_image_alloc(&d, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&o, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&o2, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&ho, nx, ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&ho2, nx, ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_image_upload(g, &h, &d), SF_OK);
        ck_assert_int_eq(sf_gpu_reserve(g, sf_background_gpu_scratch(nx, ny, &bp)), SF_OK);
        sftest_poison(g, o.data, npix * sizeof(float));
        ck_assert_msg(sf_convolve_noise_gpu(g, &d, &k, SF_CONV_AUTO, SF_EDGE_REFLECT, 0, y0, step, &bp, &o, &sa,
                                            &sb, &sta, &stb, &done) == SF_OK,
                      "%s", sf_errdetail());
        ck_assert_int_eq(done, 1);
        ck_assert_int_eq(sta, SF_OK);
        ck_assert_int_eq(stb, SF_OK);
        /* the serial order */
        ck_assert_int_eq(sf_convolve_gpu(g, &d, &k, SF_CONV_AUTO, SF_EDGE_REFLECT, 0, &o2), SF_OK);
        ck_assert_int_eq(sf_image_download(g, &o, &ho), SF_OK);
        ck_assert_int_eq(sf_image_download(g, &o2, &ho2), SF_OK);
        for (int y = 0; y < ny; y++)
            ck_assert_msg(!memcmp(ho.data + (size_t)y * ho.stride, ho2.data + (size_t)y * ho2.stride,
                                  (size_t)nx * sizeof(float)),
                          "%dx%d: the filtered image differs at row %d", nx, ny, y);
        for (int w = 0; w < 2; w++) {
            sf_image v;
            const sf_bkg_stats *got = w ? &sb : &sa;
            sf_bkg_stats *ref = w ? &rb : &ra;
            ck_assert_int_eq(sf_gpu_rows(g, w ? &o2 : &d, y0, step, &v), SF_OK);
            ck_assert_int_eq(sf_background_gpu(g, &v, &bp, ref, NULL, NULL), SF_OK);
            ck_assert_msg(got->median == ref->median && got->sigma == ref->sigma && got->nused == ref->nused &&
                              got->nvalid == ref->nvalid && got->niter == ref->niter &&
                              got->converged == ref->converged,
                          "%dx%d %s rows: median %.9g sigma %.9g n %lld/%lld %d iterations beside, "
                          "%.9g %.9g %lld/%lld %d serially", nx, ny, w ? "filtered" : "image", got->median,
                          got->sigma, got->nused, got->nvalid, got->niter, ref->median, ref->sigma, ref->nused,
                          ref->nvalid, ref->niter);
            ck_assert_double_eq_tol(got->mean, ref->mean, 1e-9 * (fabs(ref->mean) + ref->sigma));
        }
        /* declined: an unknown or positive NaN hint, a step of 1 */
        done = -1;
        ck_assert_int_eq(sf_convolve_noise_gpu(g, &d, &k, SF_CONV_AUTO, SF_EDGE_REFLECT, -1, y0, step, &bp, &o,
                                               &sa, &sb, &sta, &stb, &done), SF_OK);
        ck_assert_int_eq(done, 0);
        ck_assert_int_eq(sf_convolve_noise_gpu(g, &d, &k, SF_CONV_AUTO, SF_EDGE_REFLECT, 1, y0, step, &bp, &o,
                                               &sa, &sb, &sta, &stb, &done), SF_OK);
        ck_assert_int_eq(done, 0);
        ck_assert_int_eq(sf_convolve_noise_gpu(g, &d, &k, SF_CONV_AUTO, SF_EDGE_REFLECT, 0, 0, 1, &bp, &o,
                                               &sa, &sb, &sta, &stb, &done), SF_OK);
        ck_assert_int_eq(done, 0);
        sf_kernel_free(&k);
        sf_image_free(&h, NULL);
        sf_image_free(&ho, NULL);
        sf_image_free(&ho2, NULL);
        sf_image_free(&d, g);
        sf_image_free(&o, g);
        sf_image_free(&o2, g);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("convolve");
    TCase *cpu = tcase_create("cpu");
    tcase_add_test(cpu, test_cpu_delta);
    tcase_add_test(cpu, test_cpu_edge_modes);
    tcase_add_test(cpu, test_cpu_constant);
    tcase_add_test(cpu, test_cpu_direct_vs_fft);
    tcase_add_test(cpu, test_cpu_direct_fma_bits);
    tcase_add_test(cpu, test_cpu_separable_vs_2d);
    tcase_add_test(cpu, test_cpu_gauss);
    tcase_add_test(cpu, test_cpu_kernels);
    tcase_add_test(cpu, test_cpu_conv_file);
    tcase_add_test(cpu, test_cpu_fits_kernel);
    tcase_add_test(cpu, test_cpu_nan_only_and_1x1);
    tcase_add_test(cpu, test_cpu_params);
    tcase_set_timeout(cpu, 300);
    suite_add_tcase(s, cpu);
    TCase *gpu = tcase_create("gpu");
    tcase_add_test(gpu, test_gpu_methods);
    tcase_add_test(gpu, test_gpu_direct_bits);
    tcase_add_test(gpu, test_gpu_nan_and_small);
    tcase_add_test(gpu, test_gpu_big_kernel);
    tcase_add_test(gpu, test_gpu_rows);
    tcase_add_test(gpu, test_gpu_inf_beside);
    tcase_add_test(gpu, test_gpu_noise_beside);
    tcase_set_timeout(gpu, 600);
    return sftest_main(s, &gpu, 1);
}
