/* Benchmark of the lesson pipeline (global kappa-sigma background, 5-sigma
 * threshold without subtraction, 4-connected labels, sums and centroids) on
 * simulated radio images: each GPU stage is checked against its CPU twin,
 * then timed with CUDA events (warm-up, median of repeats), plus the upload
 * from pinned memory. Optionally writes the images as raw float32 for the
 * CuPy/numpy peers (tests/bench/peers/lesson_peers.py) to time the same data.
 * Usage: bench_lesson [--sizes 2048,4096,8192] [--repeat N] [--raw DIR] [--json FILE] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "skyfind/background.h"
#include "skyfind/gpu.h"
#include "skyfind/measure.h"
#include "skyfind/segment.h"
#include "skyfind/simulate.h"
#include "skyfind/threshold.h"
#include "bench_util.h"


enum { ST_UP, ST_BKG, ST_THR, ST_SEG, ST_MEAS, ST_N };
static const char *stname[ST_N] = {"upload", "background", "threshold", "segment", "measure"};

int main(int argc, char **argv)
{
    const char *jsonpath = NULL;
    FILE *json = NULL;
    bench_opts o;
    bench_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        if (bench_opt(argc, argv, &i, &o))
            continue;
        if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            jsonpath = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_lesson [--sizes A,B,..] [--repeat N] [--raw DIR] [--json FILE]\n");
            return 2;
        }
    }
    int *sizes = o.sizes, nsizes = o.nsizes, repeat = o.repeat;
    const char *rawdir = o.raw;
    sf_gpu *g = bench_gpu("lesson");
    if (!g)
        return 0;
    if (jsonpath && !(json = fopen(jsonpath, "w"))) {
        perror(jsonpath);
        return 1;
    }
    printf("# skyfind lesson-pipeline benchmark on %s: device time by CUDA events, median of %d "
           "runs after warm-up\n", sf_gpu_name(g), repeat);
    printf("%-7s %-11s %10s %10s %9s %8s\n", "size", "stage", "gpu_ms", "cpu_ms", "GB/s", "check");
    for (int si = 0; si < nsizes; si++) {
        int n = sizes[si];
        size_t np = sf_npix(n, n);
        sf_sim_params sp;
        sf_image sim = {0}, hpin = {0}, dimg = {0};
        sf_sim_source *truth = NULL;
        int ntruth = 0;
        sf_bkg_params bp;
        sf_thresh_params tp;
        sf_seg_params gp;
        sf_measure_params mp;
        sf_measure_aux ma_c = {0}, ma_g = {0};
        sf_bkg_stats bc, bg;
        sf_mask mc = {0}, mg = {0}, mh = {0};
        sf_labels lc = {0}, lg = {0}, lh = {0};
        sf_source *sc = NULL, *sg = NULL, *sh = NULL;
        int nc = 0, ng = 0;
        double cpu_ms[ST_N] = {0}, gpu_ms[ST_N], t;
        double *samples = malloc(sizeof(double) * (size_t)repeat);
        sf_gpu_timer *tm;
        const char *check[ST_N] = {"-", "?", "?", "?", "?"};

        sf_sim_params_default(&sp);
        sp.nx = sp.ny = n;
        sp.seed = 1000 + (unsigned long long)n;
        CHECK(sf_simulate(&sp, &sim, &truth, &ntruth));
        if (rawdir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/sim_%d.f32", rawdir, n);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(sim.data, sizeof(float), np, f) != np) {
                perror(path);
                return 1;
            }
            fclose(f);
        }
        sf_bkg_params_default(&bp);
        bp.maxiter = 1000;
        sf_thresh_params_default(&tp);
        tp.subtract = 0;
        sf_seg_params_default(&gp);
        gp.connectivity = 4;
        gp.min_area = 1;
        sf_measure_params_default(&mp);
        mp.subtract = 0; /* the lesson sums the image itself */
        ma_c.stats = ma_g.stats = &bc;
        ma_c.mask = &mc;
        ma_g.mask = &mg;

        /* CPU twin, once (it is the reference) */
        CHECK(sf_mask_alloc(&mc, n, n, SF_HOST, NULL));
        CHECK(sf_labels_alloc(&lc, n, n, SF_HOST, NULL));
        t = wall_ms();
        CHECK(sf_background_cpu(&sim, &bp, &bc, NULL, NULL));
        cpu_ms[ST_BKG] = wall_ms() - t;
        t = wall_ms();
        CHECK(sf_threshold_cpu(&sim, &tp, &bc, NULL, NULL, &mc));
        cpu_ms[ST_THR] = wall_ms() - t;
        t = wall_ms();
        CHECK(sf_segment_cpu(&mc, &gp, &lc, &nc));
        cpu_ms[ST_SEG] = wall_ms() - t;
        sc = malloc(sizeof *sc * ((size_t)nc + 1));
        t = wall_ms();
        CHECK(sf_measure_cpu(&sim, &lc, nc, &ma_c, &mp, sc));
        cpu_ms[ST_MEAS] = wall_ms() - t;

        /* GPU buffers, allocated once */
        CHECK(sf_image_alloc(&hpin, n, n, SF_HOST, g));
        memcpy(hpin.data, sim.data, np * sizeof(float));
        CHECK(sf_image_alloc(&dimg, n, n, SF_DEVICE, g));
        CHECK(sf_mask_alloc(&mg, n, n, SF_DEVICE, g));
        CHECK(sf_labels_alloc(&lg, n, n, SF_DEVICE, g));
        CHECK(sf_gpu_malloc(g, (void **)&sg, sizeof *sg * ((size_t)nc + 1)));
        {
            size_t a = sf_background_gpu_scratch(n, n, &bp), b = sf_segment_gpu_scratch(n, n, &gp),
                   c = sf_measure_gpu_scratch(n, n, nc, &mp);
            CHECK(sf_gpu_reserve(g, a > b ? (a > c ? a : c) : (b > c ? b : c)));
        }
        CHECK(sf_gpu_timer_create(g, &tm));

        /* check every GPU stage against the twin first */
        CHECK(sf_image_upload(g, &hpin, &dimg));
        CHECK(sf_background_gpu(g, &dimg, &bp, &bg, NULL, NULL));
        check[ST_BKG] = (bg.niter == bc.niter && fabs(bg.sigma - bc.sigma) <= 1e-6 * bc.sigma &&
                         fabs(bg.median - bc.median) <= 1e-6 * bc.sigma) ? "ok" : "DIFFER";
        CHECK(sf_threshold_gpu(g, &dimg, &tp, &bc, NULL, NULL, &mg));
        CHECK(sf_mask_alloc(&mh, n, n, SF_HOST, NULL));
        CHECK(sf_mask_download(g, &mg, &mh));
        check[ST_THR] = memcmp(mh.data, mc.data, np) ? "DIFFER" : "ok";
        CHECK(sf_segment_gpu(g, &mg, &gp, &lg, &ng));
        CHECK(sf_labels_alloc(&lh, n, n, SF_HOST, NULL));
        CHECK(sf_labels_download(g, &lg, &lh));
        check[ST_SEG] = (ng == nc && !memcmp(lh.data, lc.data, np * 4)) ? "ok" : "DIFFER";
        CHECK(sf_measure_gpu(g, &dimg, &lg, ng, &ma_g, &mp, sg));
        sh = malloc(sizeof *sh * ((size_t)nc + 1));
        CHECK(sf_gpu_to_host(g, sh, sg, sizeof *sh * (size_t)nc));
        check[ST_MEAS] = (ng == nc && !memcmp(sh, sc, sizeof *sh * (size_t)nc)) ? "ok" : "DIFFER";

        /* time each stage: warm-up, then median of repeats */
#define TIME_STAGE(idx, call)                                                        \
        do {                                                                         \
            for (int w = 0; w < 3; w++)                                              \
                CHECK(call);                                                         \
            for (int r = 0; r < repeat; r++) {                                       \
                CHECK(sf_gpu_timer_start(tm));                                       \
                CHECK(call);                                                         \
                CHECK(sf_gpu_timer_stop(tm, &samples[r]));                           \
            }                                                                        \
            gpu_ms[idx] = median(samples, repeat);                                   \
        } while (0)
        TIME_STAGE(ST_UP, sf_image_upload(g, &hpin, &dimg));
        TIME_STAGE(ST_BKG, sf_background_gpu(g, &dimg, &bp, &bg, NULL, NULL));
        TIME_STAGE(ST_THR, sf_threshold_gpu(g, &dimg, &tp, &bg, NULL, NULL, &mg));
        TIME_STAGE(ST_SEG, sf_segment_gpu(g, &mg, &gp, &lg, &ng));
        TIME_STAGE(ST_MEAS, sf_measure_gpu(g, &dimg, &lg, ng, &ma_g, &mp, sg));
        /* the four stages back to back, and with the upload */
        double four, all;
        TIME_STAGE(ST_N - 1, (sf_background_gpu(g, &dimg, &bp, &bg, NULL, NULL) ||
                              sf_threshold_gpu(g, &dimg, &tp, &bg, NULL, NULL, &mg) ||
                              sf_segment_gpu(g, &mg, &gp, &lg, &ng) ||
                              sf_measure_gpu(g, &dimg, &lg, ng, &ma_g, &mp, sg)) ? SF_ERR_INTERNAL : SF_OK);
        four = gpu_ms[ST_N - 1];
        TIME_STAGE(ST_N - 1, (sf_image_upload(g, &hpin, &dimg) ||
                              sf_background_gpu(g, &dimg, &bp, &bg, NULL, NULL) ||
                              sf_threshold_gpu(g, &dimg, &tp, &bg, NULL, NULL, &mg) ||
                              sf_segment_gpu(g, &mg, &gp, &lg, &ng) ||
                              sf_measure_gpu(g, &dimg, &lg, ng, &ma_g, &mp, sg) ||
                              sf_gpu_to_host(g, sh, sg, sizeof *sh * (size_t)ng)) ? SF_ERR_INTERNAL : SF_OK);
        all = gpu_ms[ST_N - 1];
        TIME_STAGE(ST_MEAS, sf_measure_gpu(g, &dimg, &lg, ng, &ma_g, &mp, sg));

        /* bytes each stage must move at least, for the achieved-bandwidth column */
        /* background: at least one read of the image per iteration, plus the last check */
        /* measure: image, labels and mask in pass (a), image and labels again in (b) */
        double bytes[ST_N] = {np * 4.0, np * 4.0 * (bc.niter + 1), np * 5.0, np * 5.0, np * 17.0};
        for (int k = 0; k < ST_N; k++)
            printf("%-7d %-11s %10.3f %10.1f %9.0f %8s\n", n, stname[k], gpu_ms[k],
                   k == ST_UP ? 0.0 : cpu_ms[k], bytes[k] / (gpu_ms[k] * 1e6), check[k]);
        printf("%-7d %-11s %10.3f %10.1f %9s %8s   (%d sources, %d background iterations)\n", n,
               "4 stages", four, cpu_ms[1] + cpu_ms[2] + cpu_ms[3] + cpu_ms[4], "", "", nc, bc.niter);
        printf("%-7d %-11s %10.3f %10s %9s %8s\n", n, "end-to-end", all, "", "", "(upload+4+catalogue)");
        if (json)
            fprintf(json,
                    "{\"size\":%d,\"device\":\"%s\",\"upload_ms\":%.4f,\"background_ms\":%.4f,"
                    "\"threshold_ms\":%.4f,\"segment_ms\":%.4f,\"measure_ms\":%.4f,"
                    "\"four_stages_ms\":%.4f,\"end_to_end_ms\":%.4f,\"cpu_ms\":[%.2f,%.2f,%.2f,%.2f],"
                    "\"nsources\":%d,\"niter\":%d,\"checks\":[\"%s\",\"%s\",\"%s\",\"%s\"]}\n",
                    n, sf_gpu_name(g), gpu_ms[0], gpu_ms[1], gpu_ms[2], gpu_ms[3], gpu_ms[4], four,
                    all, cpu_ms[1], cpu_ms[2], cpu_ms[3], cpu_ms[4], nc, bc.niter, check[1],
                    check[2], check[3], check[4]);
        fflush(stdout);
        sf_gpu_timer_destroy(tm);
        sf_gpu_free(g, sg);
        sf_labels_free(&lg, g);
        sf_mask_free(&mg, g);
        sf_image_free(&dimg, g);
        sf_image_free(&hpin, g);
        sf_image_free(&sim, NULL);
        sf_mask_free(&mc, NULL);
        sf_mask_free(&mh, NULL);
        sf_labels_free(&lc, NULL);
        sf_labels_free(&lh, NULL);
        free(sc);
        free(sh);
        free(truth);
        free(samples);
    }
    if (json)
        fclose(json);
    sf_gpu_destroy(g);
    return 0;
}
