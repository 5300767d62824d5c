/* Test helper: the `convolve` stage on one image (raw float32 or FITS) with a
 * kernel given on the command line, on the CPU twin or the GPU; raw float32
 * output, so the Python comparison needs only numpy and scipy. Exit 77 with
 * "SKIP: no CUDA device" for --backend gpu on a machine without one. */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "skyfind/convolve.h"
#include "skyfind/fits.h"
#include "skyfind/gpu.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sf_convolve_tool (--raw IN.f32 NX NY | --fits IN.fits) --kernel SPEC\n"
            "         [--method direct|fft|auto] [--edge zero|nearest|reflect|wrap]\n"
            "         [--backend cpu|gpu] [--nan -1|0|1] [--out OUT.f32] [--dump-in IN.f32]\n"
            "         [--dump-kernel K.f32] [--threads N] [--repeat N]\n"
            "SPEC: gauss:FWHMMAJ[,FWHMMIN,PA[,SIZE]] | tophat:R | conv:PATH | fits:PATH |\n"
            "      raw:K.f32:KX:KY (raw weights are not normalised)\n"
            "--dump-kernel prints \"KX KY\", then --dump-in \"image NX NY\"; --repeat prints\n"
            "timings (ms) on stderr; --nan: -1 (default) scan for NaN, 0 none, 1 may hold NaN.\n");
}

static int pick(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int read_raw(const char *path, float *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    size_t got;
    if (!f) {
        fprintf(stderr, "sf_convolve_tool: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    got = fread(buf, sizeof(float), n, f);
    fclose(f);
    if (got != n) {
        fprintf(stderr, "sf_convolve_tool: %s: %zu of %zu floats read\n", path, got, n);
        return -1;
    }
    return 0;
}

static int write_raw(const char *path, const float *buf, int nx, int ny, size_t stride)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;
    for (int y = 0; ok && y < ny; y++)
        ok = fwrite(buf + (size_t)y * stride, sizeof(float), (size_t)nx, f) == (size_t)nx;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok)
        fprintf(stderr, "sf_convolve_tool: cannot write %s\n", path);
    return ok ? 0 : -1;
}

static sf_status make_kernel(sf_kernel *k, const char *spec)
{
    if (strncmp(spec, "gauss:", 6) == 0) {
        double a = 0, b = 0, pa = 0;
        int size = 0, n = sscanf(spec + 6, "%lf,%lf,%lf,%d", &a, &b, &pa, &size);
        if (n != 1 && n != 3 && n != 4)
            return sf_fail(SF_ERR_PARAM, "kernel \"%s\": expected gauss:FWHMMAJ[,FWHMMIN,PA[,SIZE]]", spec);
        return sf_kernel_gauss(k, a, n == 1 ? a : b, pa, size);
    }
    if (strncmp(spec, "tophat:", 7) == 0)
        return sf_kernel_tophat(k, atof(spec + 7));
    if (strncmp(spec, "conv:", 5) == 0)
        return sf_kernel_read_conv(k, spec + 5);
    if (strncmp(spec, "fits:", 5) == 0)
        return sf_kernel_read_fits(k, spec + 5, 1);
    if (strncmp(spec, "raw:", 4) == 0) {
        char path[4096];
        const char *c2 = strrchr(spec, ':'), *c1;
        int kx, ky;
        sf_status s;
        if (c2 == spec + 3)
            return sf_fail(SF_ERR_PARAM, "kernel \"%s\": expected raw:PATH:KX:KY", spec);
        for (c1 = c2 - 1; c1 > spec + 3 && *c1 != ':'; c1--)
            ;
        if (c1 <= spec + 4 || (size_t)(c1 - spec - 4) >= sizeof path ||
            sscanf(c1 + 1, "%d", &kx) != 1 || sscanf(c2 + 1, "%d", &ky) != 1 || kx < 1 || ky < 1)
            return sf_fail(SF_ERR_PARAM, "kernel \"%s\": expected raw:PATH:KX:KY", spec);
        memcpy(path, spec + 4, (size_t)(c1 - spec - 4));
        path[c1 - spec - 4] = 0;
        float *w = malloc(sf_npix(kx, ky) * sizeof *w);
        if (!w)
            return sf_fail(SF_ERR_NOMEM, "kernel %dx%d", kx, ky);
        if (read_raw(path, w, sf_npix(kx, ky)) != 0) {
            free(w);
            return sf_fail(SF_ERR_IO, "cannot read the kernel %s", path);
        }
        s = sf_kernel_from_array(k, w, kx, ky, 0);
        free(w);
        return s;
    }
    return sf_fail(SF_ERR_PARAM, "kernel \"%s\": unknown kind (gauss, tophat, conv, fits, raw)", spec);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const char *const methods[] = {"auto", "direct", "fft"};
    static const char *const edges[] = {"zero", "nearest", "reflect", "wrap"};
    const char *raw = NULL, *fits = NULL, *kspec = NULL, *outp = NULL, *dump_in = NULL,
               *dump_k = NULL;
    int nx = 0, ny = 0, method = SF_CONV_AUTO, edge = SF_EDGE_ZERO, gpu = 0, nan = -1;
    int repeat = 0, rc = 1;
    sf_image img = {0}, out = {0}, dimg = {0}, dout = {0};
    sf_kernel k = {0};
    sf_gpu *g = NULL;
    sf_status s = SF_OK;
    double *times = NULL;

    for (int a = 1; a < argc; a++) {
        const char *o = argv[a];
        int more = argc - a - 1;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(o, "--raw") && more >= 3) {
            raw = argv[++a];
            nx = atoi(argv[++a]);
            ny = atoi(argv[++a]);
        } else if (!strcmp(o, "--fits") && more >= 1)
            fits = argv[++a];
        else if (!strcmp(o, "--kernel") && more >= 1)
            kspec = argv[++a];
        else if (!strcmp(o, "--method") && more >= 1)
            method = pick(argv[++a], methods, 3);
        else if (!strcmp(o, "--edge") && more >= 1)
            edge = pick(argv[++a], edges, 4);
        else if (!strcmp(o, "--backend") && more >= 1) {
            const char *b = argv[++a];
            gpu = !strcmp(b, "gpu") ? 1 : !strcmp(b, "cpu") ? 0 : -1;
        } else if (!strcmp(o, "--nan") && more >= 1)
            nan = atoi(argv[++a]);
        else if (!strcmp(o, "--out") && more >= 1)
            outp = argv[++a];
        else if (!strcmp(o, "--dump-in") && more >= 1)
            dump_in = argv[++a];
        else if (!strcmp(o, "--dump-kernel") && more >= 1)
            dump_k = argv[++a];
        else if (!strcmp(o, "--threads") && more >= 1)
            omp_set_num_threads(atoi(argv[++a]));
        else if (!strcmp(o, "--repeat") && more >= 1)
            repeat = atoi(argv[++a]);
        else {
            fprintf(stderr, "sf_convolve_tool: bad or incomplete option \"%s\"\n", o);
            usage(stderr);
            return 2;
        }
    }
    if (!raw == !fits || !kspec || method < 0 || edge < 0 || gpu < 0 || (raw && (nx < 1 || ny < 1))) {
        fprintf(stderr, "sf_convolve_tool: need one of --raw/--fits, a --kernel, and valid "
                        "--method/--edge/--backend\n");
        usage(stderr);
        return 2;
    }
    if (gpu && sf_gpu_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    if (raw) {
        if ((s = sf_image_alloc(&img, nx, ny, SF_HOST, NULL)) != SF_OK)
            goto fail;
        if (read_raw(raw, img.data, sf_npix(nx, ny)) != 0)
            goto done;
    } else {
        sf_fits_info info;
        memset(&info, 0, sizeof info);
        s = sf_fits_read(fits, -1, NULL, &img, &info);
        sf_fits_info_free(&info);
        if (s != SF_OK)
            goto fail;
    }
    if ((s = make_kernel(&k, kspec)) != SF_OK)
        goto fail;
    if (dump_k) {
        if (write_raw(dump_k, k.w, k.nx, k.ny, (size_t)k.nx) != 0)
            goto done;
        printf("%d %d\n", k.nx, k.ny);
    }
    if (dump_in) {
        if (write_raw(dump_in, img.data, img.nx, img.ny, img.stride) != 0)
            goto done;
        printf("image %d %d\n", img.nx, img.ny);
    }
    if ((s = sf_image_alloc(&out, img.nx, img.ny, SF_HOST, NULL)) != SF_OK)
        goto fail;
    if (gpu) {
        if ((s = sf_gpu_create(&g, 0)) != SF_OK) {
            if (s == SF_ERR_NO_GPU) {
                printf("SKIP: no CUDA device\n");
                rc = 77;
                goto done;
            }
            goto fail;
        }
        size_t scratch = sf_convolve_gpu_scratch(img.nx, img.ny, &k, method);
        if ((scratch && (s = sf_gpu_reserve(g, scratch)) != SF_OK) ||
            (s = sf_image_alloc(&dimg, img.nx, img.ny, SF_DEVICE, g)) != SF_OK ||
            (s = sf_image_alloc(&dout, img.nx, img.ny, SF_DEVICE, g)) != SF_OK ||
            (s = sf_image_upload(g, &img, &dimg)) != SF_OK)
            goto fail;
    }
    if (repeat > 0 && !(times = malloc((size_t)repeat * sizeof *times))) {
        s = sf_fail(SF_ERR_NOMEM, "timings");
        goto fail;
    }
    for (int r = 0; r <= repeat; r++) { /* run 0 is the warm-up (plans, spectra) */
        double t0 = now_ms();
        s = gpu ? sf_convolve_gpu(g, &dimg, &k, method, edge, nan, &dout)
                : sf_convolve_cpu(&img, &k, method, edge, nan, &out);
        if (s == SF_OK && gpu)
            s = sf_gpu_sync(g);
        if (s != SF_OK)
            goto fail;
        if (r > 0)
            times[r - 1] = now_ms() - t0;
    }
    if (repeat > 0) {
        qsort(times, (size_t)repeat, sizeof *times, cmp_double);
        fprintf(stderr, "time_ms min %.3f median %.3f (%d runs, %d threads, %dx%d, kernel %dx%d%s, %s)\n",
                times[0], times[repeat / 2], repeat, omp_get_max_threads(), img.nx, img.ny, k.nx,
                k.ny, k.row ? " rank one" : "", methods[method == SF_CONV_AUTO ?
                sf_convolve_pick(&k, img.nx, img.ny, gpu) : method]);
    }
    if (gpu && (s = sf_image_download(g, &dout, &out)) != SF_OK)
        goto fail;
    if (outp && write_raw(outp, out.data, out.nx, out.ny, out.stride) != 0)
        goto done;
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "sf_convolve_tool: %s: %s\n", sf_strerror(s), sf_errdetail());
done:
    free(times);
    sf_image_free(&dimg, g);
    sf_image_free(&dout, g);
    sf_gpu_destroy(g);
    sf_image_free(&img, NULL);
    sf_image_free(&out, NULL);
    sf_kernel_free(&k);
    return rc;
}
