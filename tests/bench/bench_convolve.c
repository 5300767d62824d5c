/* Benchmark of stage `convolve` on the GPU: direct (general 2-D), direct
 * separable and FFT, for square Gaussian kernels of 3x3 to 41x41 (round:
 * separable; elliptical at 30 degrees: not separable) on simulated images.
 * Every GPU method is first checked against the CPU twin (relative L2 over
 * the image, on a 1024 x 1024 cut-out so the CPU reference stays fast),
 * then timed with CUDA events: 3 warm-ups, median of --repeat runs; the
 * FFT's plans and kernel spectrum are cached by the first call, as in a
 * batch of images of one size. GB/s counts one read and one write of the
 * image (the floor of any method). Writes the images and kernels as raw
 * float32 for the CuPy peer (tests/bench/peers/convolve_cupy.py).
 * Usage: bench_convolve [--sizes 2048,4096,8192] [--kernels 3,5,...] [--repeat N] [--raw DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/convolve.h"
#include "skyfind/gpu.h"
#include "skyfind/simulate.h"
#include "bench_util.h"
#include <cuda_runtime.h>
#include <cufft.h>

/* Raw cuFFT: R2C + C2R of an l x l grid (device time, median), to choose the
 * padded sizes: a 7-smooth size and the next 5-smooth and 3-smooth ones. */
static void fft_probe(int l, int repeat, double *samples)
{
    cufftHandle a, b;
    float *r;
    cufftComplex *c;
    cudaEvent_t e0, e1;
    size_t nr = (size_t)l * l, nc = (size_t)l * (l / 2 + 1);
    if (cudaMalloc((void **)&r, nr * sizeof(float)) || cudaMalloc((void **)&c, nc * sizeof(cufftComplex)) ||
        cufftPlan2d(&a, l, l, CUFFT_R2C) || cufftPlan2d(&b, l, l, CUFFT_C2R)) {
        printf("fft probe %d: no memory or plan\n", l);
        return;
    }
    cudaMemset(r, 0, nr * sizeof(float));
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int i = 0; i < repeat + 3; i++) {
        float ms;
        cudaEventRecord(e0, 0);
        cufftExecR2C(a, r, c);
        cufftExecC2R(b, c, r);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 3)
            samples[i - 3] = ms;
    }
    printf("# cuFFT R2C + C2R of %d x %d: %.4f ms\n", l, l, median(samples, repeat));
    cufftDestroy(a);
    cufftDestroy(b);
    cudaFree(r);
    cudaFree(c);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (isnan(a[i]) != isnan(b[i]))
                return INFINITY;
            continue;
        }
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void write_raw(const char *dir, const char *name, const float *v, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(v, sizeof(float), n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static const char *mname[3] = {"auto", "direct", "fft"};

/* Median device time of one method. */
static double time_method(sf_gpu *g, sf_gpu_timer *tm, const sf_image *d, const sf_kernel *k, int m,
                          sf_image *out, int repeat, double *samples)
{
    double t;
    for (int r = 0; r < 3; r++)
        CHECK(sf_convolve_gpu(g, d, k, m, SF_EDGE_REFLECT, 0, out));
    for (int r = 0; r < repeat; r++) {
        CHECK(sf_gpu_timer_start(tm));
        CHECK(sf_convolve_gpu(g, d, k, m, SF_EDGE_REFLECT, 0, out));
        CHECK(sf_gpu_timer_stop(tm, &t));
        samples[r] = t;
    }
    return median(samples, repeat);
}

/* GPU against the CPU twin on a 1024 x 1024 cut-out, without and with a blank strip. */
static int check_method(sf_gpu *g, const sf_image *sim, const sf_kernel *k, int m)
{
    const int n = 1024;
    sf_image h = {0}, c = {0}, gh = {0}, d = {0}, o = {0};
    int ok;
    CHECK(sf_image_alloc(&h, n, n, SF_HOST, NULL));
    CHECK(sf_image_alloc(&c, n, n, SF_HOST, NULL));
    CHECK(sf_image_alloc(&gh, n, n, SF_HOST, NULL));
    for (int y = 0; y < n; y++)
        memcpy(h.data + (size_t)y * n, sim->data + (size_t)y * sim->stride, n * sizeof(float));
    CHECK(sf_image_alloc(&d, n, n, SF_DEVICE, g));
    CHECK(sf_image_alloc(&o, n, n, SF_DEVICE, g));
    ok = 1;
    for (int pass = 0; pass < 2; pass++) { /* without, then with, the blank strip */
        if (pass)
            for (int y = 300; y < 340; y++)
                for (int x = 0; x < 200; x++)
                    h.data[(size_t)y * n + x] = NAN;
        CHECK(sf_image_upload(g, &h, &d));
        CHECK(sf_convolve_cpu(&h, k, m, SF_EDGE_REFLECT, pass, &c));
        CHECK(sf_convolve_gpu(g, &d, k, m, SF_EDGE_REFLECT, pass, &o));
        CHECK(sf_image_download(g, &o, &gh));
        double e = rel_l2(gh.data, c.data, sf_npix(n, n));
        if (!(e < (m == SF_CONV_FFT ? 1e-5 : 1e-6))) {
            ok = 0;
            printf("  CHECK FAILED: %dx%d %s%s: GPU vs CPU relative L2 %.3g\n", k->nx, k->ny,
                   mname[m], pass ? " (NaN strip)" : "", e);
        }
    }
    sf_image_free(&h, NULL);
    sf_image_free(&c, NULL);
    sf_image_free(&gh, NULL);
    sf_image_free(&d, g);
    sf_image_free(&o, g);
    return ok;
}

int main(int argc, char **argv)
{
    int ks[32] = {3, 5, 7, 9, 15, 21, 31, 41}, nk = 8, allok = 1;
    bench_opts o;
    bench_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        if (bench_opt(argc, argv, &i, &o))
            continue;
        if (!strcmp(argv[i], "--kernels") && i + 1 < argc) {
            nk = bench_list(argv[++i], ks, 32);
        } else {
            fprintf(stderr, "usage: bench_convolve [--sizes A,B] [--kernels 3,5,..] [--repeat N] [--raw DIR]\n");
            return 2;
        }
    }
    int *sizes = o.sizes, nsizes = o.nsizes, repeat = o.repeat;
    const char *rawdir = o.raw;
    sf_gpu *g = bench_gpu("convolution");
    sf_gpu_timer *tm;
    if (!g)
        return 0;
    double *samples = malloc(sizeof(double) * (size_t)repeat);
    CHECK(sf_gpu_timer_create(g, &tm));
    printf("# skyfind convolve on %s: device time by CUDA events, median of %d after 3 warm-ups, "
           "edge reflect, no NaN; GB/s = 8 bytes per pixel (read + write) / time; auto's pick\n",
           sf_gpu_name(g), repeat);
    {
        static const int probe[] = {2048, 2058, 2160, 4096, 4116, 4320, 8192, 8232, 8640, 8748, 0};
        for (int i = 0; probe[i]; i++)
            fft_probe(probe[i], repeat, samples);
    }
    printf("%-6s %-7s %-10s %10s %8s   %-s\n", "size", "kernel", "method", "ms", "GB/s", "auto picks");
    for (int si = 0; si < nsizes; si++) {
        int n = sizes[si];
        size_t np = sf_npix(n, n);
        sf_sim_params sp;
        sf_image sim = {0}, d = {0}, o = {0};
        sf_sim_source *truth = NULL;
        int ntruth = 0;
        char name[256];
        sf_sim_params_default(&sp);
        sp.nx = sp.ny = n;
        sp.seed = 7000 + (unsigned long long)n;
        CHECK(sf_simulate(&sp, &sim, &truth, &ntruth));
        free(truth);
        if (rawdir) {
            snprintf(name, sizeof name, "conv_img_%d.f32", n);
            write_raw(rawdir, name, sim.data, np);
        }
        CHECK(sf_image_alloc(&d, n, n, SF_DEVICE, g));
        CHECK(sf_image_alloc(&o, n, n, SF_DEVICE, g));
        CHECK(sf_image_upload(g, &sim, &d));
        CHECK(sf_gpu_reserve(g, 256));
        for (int ki = 0; ki < nk; ki++) {
            int kside = ks[ki];
            for (int sep = 1; sep >= 0; sep--) {
                sf_kernel k;
                memset(&k, 0, sizeof k);
                /* FWHM = side / 6 * 2.3548: the side covers +-3 sigma */
                double fw = kside / 6.0 * 2.3548;
                CHECK(sf_kernel_gauss(&k, fw, sep ? fw : 0.6 * fw, sep ? 0 : 30, kside));
                if (!sep && k.row) { /* sizes where the ellipse rounds to rank one */
                    sf_kernel_free(&k);
                    continue;
                }
                if (rawdir && si == 0) {
                    snprintf(name, sizeof name, "conv_k%d_%s.f32", kside, sep ? "sep" : "2d");
                    write_raw(rawdir, name, k.w, (size_t)k.nx * k.ny);
                }
                int pick = sf_convolve_pick(&k, n, n, 1);
                for (int m = SF_CONV_DIRECT; m <= SF_CONV_FFT; m++) {
                    if (si == 0)
                        allok &= check_method(g, &sim, &k, m);
                    CHECK(sf_gpu_reserve(g, sf_convolve_gpu_scratch(n, n, &k, m)));
                    double ms = time_method(g, tm, &d, &k, m, &o, repeat, samples);
                    printf("%-6d %3dx%-3d %-10s %10.4f %8.0f   %s\n", n, kside, kside,
                           m == SF_CONV_FFT ? "fft" : sep ? "separable" : "direct", ms,
                           8.0 * np / (ms * 1e6), pick == m ? "<- auto" : "");
                    fflush(stdout);
                }
                sf_kernel_free(&k);
            }
        }
        sf_image_free(&sim, NULL);
        sf_image_free(&d, g);
        sf_image_free(&o, g);
    }
    printf("# GPU vs CPU twin checks: %s\n", allok ? "all within tolerance" : "FAILED");
    sf_gpu_timer_destroy(tm);
    sf_gpu_destroy(g);
    free(samples);
    return allok ? 0 : 1;
}
