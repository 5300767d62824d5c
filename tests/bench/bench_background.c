/* Benchmark of the background stage, method=mesh (box 64, filter 3): the GPU
 * version (gpu/background_mesh.cu) against its CPU twin on simulated radio
 * images with a gradient. Checks the mesh grid and both maps first, then
 * times sf_background_gpu with CUDA events (3 warm-ups, median of --repeat)
 * and the CPU twin on one thread and on all threads (one run each).
 * Optionally writes the images as raw float32 (bkg_N.f32) for the SEP peer
 * (tests/bench/peers/background_sep.py).
 * Usage: bench_background [--sizes 2048,4096,8192] [--repeat N] [--raw DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "skyfind/background.h"
#include "skyfind/gpu.h"
#include "skyfind/simulate.h"
#include "bench_util.h"


static void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* Compare g with c: |g - c| <= rtol * max(|c|, scale) where scale is the
 * image's noise (the levels sit near zero, so a bare relative test would be
 * meaningless there). NaN must match NaN. Prints the worst element. */
static int compare(const char *what, const float *g, const float *c, size_t n, double rtol,
                   double scale)
{
    size_t bad = 0, worst = 0, nanbad = 0;
    double wrel = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(c[i]) || isnan(g[i])) {
            nanbad += isnan(c[i]) != isnan(g[i]);
            continue;
        }
        double d = fabs((double)g[i] - (double)c[i]);
        double ref = fabs((double)c[i]) > scale ? fabs((double)c[i]) : scale;
        double rel = d / ref;
        if (rel > wrel) {
            wrel = rel;
            worst = i;
        }
        bad += rel > rtol;
    }
    printf("  %-10s %s: %zu of %zu beyond %.0e, %zu NaN mismatches; largest %.3g relative "
           "(element %zu: gpu %.9g cpu %.9g)\n", what, bad || nanbad ? "DIFFER" : "ok", bad, n,
           rtol, nanbad, wrel, worst, (double)g[worst], (double)c[worst]);
    return bad || nanbad;
}

int main(int argc, char **argv)
{
    int maxthr = 1;
    bench_opts o;
    bench_opts_default(&o);
    for (int i = 1; i < argc; i++)
        if (!bench_opt(argc, argv, &i, &o)) {
            fprintf(stderr, "usage: bench_background [--sizes A,B,..] [--repeat N] [--raw DIR]\n");
            return 2;
        }
    int *sizes = o.sizes, nsizes = o.nsizes, repeat = o.repeat;
    const char *rawdir = o.raw;
    sf_gpu *g = bench_gpu("background");
    if (!g)
        return 0;
#ifdef _OPENMP
    maxthr = omp_get_max_threads();
#endif
    printf("# skyfind background method=mesh (box 64, filter 3, bicubic) on %s: device time by "
           "CUDA events, median of %d runs after 3 warm-ups; CPU twin one run on 1 and %d "
           "threads; GB/s against the floor (read the image once, write two maps)\n",
           sf_gpu_name(g), repeat, maxthr);
    int allok = 1;
    double rows[16][5];
    for (int si = 0; si < nsizes; si++) {
        int n = sizes[si], nbx, nby;
        size_t np = sf_npix(n, n), nb;
        sf_sim_params sp;
        sf_image sim = {0}, cb = {0}, cr = {0}, hb = {0}, hr = {0};
        sf_image dimg = {0}, db = {0}, dr = {0};
        sf_sim_source *truth = NULL;
        int ntruth = 0;
        sf_bkg_params bp;
        sf_bkg_stats sc, sg, s1;
        sf_bkg_mesh mc = {0}, mg = {0};
        float *mgb = NULL, *mgr = NULL;
        double *samples = malloc(sizeof(double) * (size_t)repeat), t, cpu1, cpun, gms;
        sf_gpu_timer *tm;
        int ok = 1;

        sf_sim_params_default(&sp);
        sp.nx = sp.ny = n;
        sp.seed = 3000 + (unsigned long long)n;
        CHECK(sf_simulate(&sp, &sim, &truth, &ntruth));
        /* a sky level with a gradient, a few noise sigmas across the image */
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++)
                sim.data[(size_t)y * n + x] += (float)(sp.noise * (2.0 + 3.0 * x / n + 1.5 * y / n));
        if (rawdir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/bkg_%d.f32", rawdir, n);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(sim.data, sizeof(float), np, f) != np) {
                perror(path);
                return 1;
            }
            fclose(f);
        }
        sf_bkg_params_default(&bp);
        bp.method = SF_BKG_MESH;
        bp.box = 64;
        bp.filter = 3;
        sf_bkg_mesh_shape(n, n, bp.box, &nbx, &nby);
        nb = (size_t)nbx * nby;

        /* CPU twin: the reference, then timed on one thread and on all */
        CHECK(sf_image_alloc(&cb, n, n, SF_HOST, NULL));
        CHECK(sf_image_alloc(&cr, n, n, SF_HOST, NULL));
        set_threads(1);
        t = wall_ms();
        CHECK(sf_background_cpu(&sim, &bp, &s1, &cb, &cr));
        cpu1 = wall_ms() - t;
        set_threads(maxthr);
        t = wall_ms();
        CHECK(sf_background_cpu(&sim, &bp, &sc, &cb, &cr));
        cpun = wall_ms() - t;
        mc.nbx = nbx;
        mc.nby = nby;
        mc.box = bp.box;
        mc.loc = SF_HOST;
        mc.bkg = malloc(nb * sizeof(float));
        mc.rms = malloc(nb * sizeof(float));
        CHECK(sf_bkg_mesh_cpu(&sim, &bp, &mc));

        /* GPU buffers, allocated once */
        CHECK(sf_image_alloc(&dimg, n, n, SF_DEVICE, g));
        CHECK(sf_image_alloc(&db, n, n, SF_DEVICE, g));
        CHECK(sf_image_alloc(&dr, n, n, SF_DEVICE, g));
        CHECK(sf_image_alloc(&hb, n, n, SF_HOST, NULL));
        CHECK(sf_image_alloc(&hr, n, n, SF_HOST, NULL));
        CHECK(sf_gpu_malloc(g, (void **)&mgb, nb * sizeof(float)));
        CHECK(sf_gpu_malloc(g, (void **)&mgr, nb * sizeof(float)));
        CHECK(sf_gpu_reserve(g, sf_background_gpu_scratch(n, n, &bp)));
        CHECK(sf_image_upload(g, &sim, &dimg));
        CHECK(sf_gpu_timer_create(g, &tm));

        /* check against the twin first: the grid, the maps, the stats */
        mg = mc;
        mg.loc = SF_DEVICE;
        mg.bkg = mgb;
        mg.rms = mgr;
        CHECK(sf_bkg_mesh_gpu(g, &dimg, &bp, &mg));
        {
            float *tb = malloc(nb * sizeof(float)), *tr = malloc(nb * sizeof(float));
            CHECK(sf_gpu_to_host(g, tb, mgb, nb * sizeof(float)));
            CHECK(sf_gpu_to_host(g, tr, mgr, nb * sizeof(float)));
            printf("size %d (%dx%d meshes):\n", n, nbx, nby);
            ok &= !compare("mesh bkg", tb, mc.bkg, nb, 1e-6, sc.sigma);
            ok &= !compare("mesh rms", tr, mc.rms, nb, 1e-6, sc.sigma);
            free(tb);
            free(tr);
        }
        CHECK(sf_gpu_memset(g, db.data, 0xff, np * sizeof(float))); /* poison: NaN */
        CHECK(sf_gpu_memset(g, dr.data, 0xff, np * sizeof(float)));
        CHECK(sf_background_gpu(g, &dimg, &bp, &sg, &db, &dr));
        CHECK(sf_image_download(g, &db, &hb));
        CHECK(sf_image_download(g, &dr, &hr));
        ok &= !compare("bkg map", hb.data, cb.data, np, 1e-5, sc.sigma);
        ok &= !compare("rms map", hr.data, cr.data, np, 1e-5, sc.sigma);
        {
            int sok = fabs(sg.median - sc.median) <= 1e-6 * fmax(fabs(sc.median), sc.sigma) &&
                      fabs(sg.sigma - sc.sigma) <= 1e-6 * sc.sigma &&
                      fabs(sg.mean - sc.mean) <= 1e-6 * fmax(fabs(sc.mean), sc.sigma) &&
                      sg.nvalid == sc.nvalid && sg.nused == sc.nused;
            printf("  %-10s %s: gpu median %.9g sigma %.9g mean %.9g nvalid %lld; "
                   "cpu %.9g %.9g %.9g %lld\n", "stats", sok ? "ok" : "DIFFER", sg.median,
                   sg.sigma, sg.mean, sg.nvalid, sc.median, sc.sigma, sc.mean, sc.nvalid);
            ok &= sok;
        }
        allok &= ok;

        /* time the whole stage: warm-up, then the median of repeats */
        for (int w = 0; w < 3; w++)
            CHECK(sf_background_gpu(g, &dimg, &bp, &sg, &db, &dr));
        for (int r = 0; r < repeat; r++) {
            CHECK(sf_gpu_timer_start(tm));
            CHECK(sf_background_gpu(g, &dimg, &bp, &sg, &db, &dr));
            CHECK(sf_gpu_timer_stop(tm, &samples[r]));
        }
        gms = median(samples, repeat);
        rows[si][0] = n;
        rows[si][1] = gms;
        rows[si][2] = np * 12.0 / (gms * 1e6);
        rows[si][3] = cpu1;
        rows[si][4] = cpun;
        fflush(stdout);

        sf_gpu_timer_destroy(tm);
        sf_gpu_free(g, mgb);
        sf_gpu_free(g, mgr);
        sf_image_free(&dimg, g);
        sf_image_free(&db, g);
        sf_image_free(&dr, g);
        sf_image_free(&sim, NULL);
        sf_image_free(&cb, NULL);
        sf_image_free(&cr, NULL);
        sf_image_free(&hb, NULL);
        sf_image_free(&hr, NULL);
        free(mc.bkg);
        free(mc.rms);
        free(truth);
        free(samples);
    }
    printf("\n%-7s %10s %9s %12s %12s %9s\n", "size", "gpu_ms", "GB/s", "cpu_1thr_ms",
           "cpu_allthr_ms", "floor_ms");
    for (int si = 0; si < nsizes; si++)
        printf("%-7d %10.3f %9.0f %12.1f %12.1f %9.3f\n", (int)rows[si][0], rows[si][1],
               rows[si][2], rows[si][3], rows[si][4],
               rows[si][0] * rows[si][0] * 12.0 / 3.0e9 /* at 3 TB/s */);
    printf("check: %s\n", allok ? "ok" : "DIFFER");
    sf_gpu_destroy(g);
    return allok ? 0 : 1;
}
