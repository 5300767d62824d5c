/* Benchmark of stage `segment` on the GPU, on masks that are hard for
 * labellers: a real detection mask (a simulated radio image at 5 sigma),
 * one island covering most of the image (a disc with holes), a
 * checkerboard (one island under 8-connectivity, N/2 under 4), 50% random
 * noise, and a serpentine (one island of long thin rows joined at
 * alternating ends). Each GPU result is first checked pixel for pixel
 * against the CPU twin, then timed with CUDA events (3 warm-ups, median of
 * --repeat); ns per pixel across sizes shows whether the time stays linear
 * in the pixels. Writes the masks as raw uint8 for the CuPy peer
 * (tests/bench/peers/label_cupy.py).
 * Usage: bench_segment [--sizes 2048,4096,8192] [--repeat N] [--raw DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/gpu.h"
#include "skyfind/segment.h"
#include "skyfind/simulate.h"
#include "bench_util.h"

enum { M_SIM, M_DISC, M_CHECKER, M_NOISE, M_SERPENT, M_N };
static const char *mnames[M_N] = {"sim-5sigma", "disc", "checkerboard", "noise-50%", "serpentine"};

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void make_mask(int kind, int n, uint8_t *m)
{
    uint64_t s = 12345 + (uint64_t)n;
    size_t np = (size_t)n * n;
    switch (kind) {
    case M_SIM: {
        sf_sim_params sp;
        sf_image im = {0};
        sf_sim_source *truth = NULL;
        int nt = 0;
        sf_sim_params_default(&sp);
        sp.nx = sp.ny = n;
        sp.seed = (unsigned long long)n;
        CHECK(sf_simulate(&sp, &im, &truth, &nt));
        for (size_t i = 0; i < np; i++)
            m[i] = im.data[i] > 5 * sp.noise;
        free(truth);
        sf_image_free(&im, NULL);
        break;
    }
    case M_DISC:
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++) {
                double dx = x - n / 2.0, dy = y - n / 2.0;
                m[(size_t)y * n + x] = dx * dx + dy * dy < 0.45 * n * n && (rng_next(&s) & 15);
            }
        break;
    case M_CHECKER:
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++)
                m[(size_t)y * n + x] = (x + y) & 1;
        break;
    case M_NOISE:
        for (size_t i = 0; i < np; i++)
            m[i] = rng_next(&s) & 1;
        break;
    default: /* rows of ones every other row, joined at alternating ends */
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++)
                m[(size_t)y * n + x] = !(y & 1) || (y % 4 == 1 ? x == n - 1 : x == 0);
        break;
    }
}

int main(int argc, char **argv)
{
    int allok = 1;
    bench_opts o;
    bench_opts_default(&o);
    for (int i = 1; i < argc; i++)
        if (!bench_opt(argc, argv, &i, &o)) {
            fprintf(stderr, "usage: bench_segment [--sizes A,B] [--repeat N] [--raw DIR]\n");
            return 2;
        }
    int *sizes = o.sizes, nsizes = o.nsizes, repeat = o.repeat;
    const char *rawdir = o.raw;
    sf_gpu *g = bench_gpu("segment");
    sf_gpu_timer *tm;
    if (!g)
        return 0;
    double *samples = malloc(sizeof(double) * (size_t)repeat);
    CHECK(sf_gpu_timer_create(g, &tm));
    printf("# skyfind segment on %s: device time by CUDA events, median of %d after 3 warm-ups; "
           "every GPU label map checked against the CPU twin first\n", sf_gpu_name(g), repeat);
    printf("%-6s %-13s %-5s %10s %10s %8s  %s\n", "size", "mask", "conn", "islands", "ms", "ns/px",
           "check");
    for (int si = 0; si < nsizes; si++) {
        int n = sizes[si];
        size_t np = (size_t)n * n;
        sf_mask hm = {0}, dm = {0};
        sf_labels hl = {0}, gl = {0}, dl = {0};
        CHECK(sf_mask_alloc(&hm, n, n, SF_HOST, NULL));
        CHECK(sf_labels_alloc(&hl, n, n, SF_HOST, NULL));
        CHECK(sf_labels_alloc(&gl, n, n, SF_HOST, NULL));
        CHECK(sf_mask_alloc(&dm, n, n, SF_DEVICE, g));
        CHECK(sf_labels_alloc(&dl, n, n, SF_DEVICE, g));
        for (int k = 0; k < M_N; k++) {
            make_mask(k, n, hm.data);
            if (rawdir) {
                char path[4096];
                snprintf(path, sizeof path, "%s/seg_%s_%d.u8", rawdir, mnames[k], n);
                FILE *f = fopen(path, "wb");
                if (!f || fwrite(hm.data, 1, np, f) != np) {
                    perror(path);
                    return 1;
                }
                fclose(f);
            }
            CHECK(sf_mask_upload(g, &hm, &dm));
            for (int conn = 8; conn >= 4; conn -= 4) {
                sf_seg_params p = {conn, 1};
                int nc = 0, ng = 0;
                double t;
                CHECK(sf_gpu_reserve(g, sf_segment_gpu_scratch(n, n, &p)));
                CHECK(sf_segment_cpu(&hm, &p, &hl, &nc));
                CHECK(sf_segment_gpu(g, &dm, &p, &dl, &ng));
                CHECK(sf_labels_download(g, &dl, &gl));
                int ok = nc == ng && !memcmp(hl.data, gl.data, np * sizeof(int32_t));
                allok &= ok;
                for (int r = 0; r < 3; r++)
                    CHECK(sf_segment_gpu(g, &dm, &p, &dl, &ng));
                for (int r = 0; r < repeat; r++) {
                    CHECK(sf_gpu_timer_start(tm));
                    CHECK(sf_segment_gpu(g, &dm, &p, &dl, &ng));
                    CHECK(sf_gpu_timer_stop(tm, &t));
                    samples[r] = t;
                }
                t = median(samples, repeat);
                printf("%-6d %-13s %-5d %10d %10.4f %8.3f  %s\n", n, mnames[k], conn, ng, t,
                       t * 1e6 / (double)np, ok ? "identical to CPU" : "DIFFERS FROM CPU");
                fflush(stdout);
            }
        }
        sf_mask_free(&hm, NULL);
        sf_labels_free(&hl, NULL);
        sf_labels_free(&gl, NULL);
        sf_mask_free(&dm, g);
        sf_labels_free(&dl, g);
    }
    printf("# GPU vs CPU twin: %s\n", allok ? "every label map identical" : "FAILED");
    sf_gpu_timer_destroy(tm);
    sf_gpu_destroy(g);
    free(samples);
    return allok ? 0 : 1;
}
