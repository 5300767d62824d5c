/* A program that calls skyfind as a library (tests/lib/test_install.sh
 * builds it against an installed tree, once through pkg-config and once
 * through find_package(skyfind)): it makes an image in memory (Gaussian
 * sources on Gaussian noise, its own random numbers), writes the same pixels
 * to a FITS file for the command-line tool, runs a pipeline on the array in
 * memory and writes the catalogue; then it runs the same pipeline through
 * the one-call entry point (sf_find, skyfind/skyfind.h) on the same
 * float32 array, and prints that table
 * row by row with each column's format to CATALOG.csv.find. The test
 * compares both with `skyfind run` on the FITS file.
 *   consumer PIPELINE IMAGE.fits CATALOG.csv */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <skyfind/catalog.h>
#include <skyfind/fits.h>
#include <skyfind/image.h>
#include <skyfind/pipeline.h>
#include <skyfind/skyfind.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double uniform(void) /* xorshift64*, in (0, 1) */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return ((rng * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0) + 1e-300;
}

static double gauss(void) { return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()); }

int main(int argc, char **argv)
{
    const int nx = 320, ny = 240, nsrc = 14;
    char path[4096];
    sf_pipeline pl;
    sf_image img;
    sf_run_opts o = {0};
    sf_run_result r;
    sf_status st;
    if (argc != 4) {
        fprintf(stderr, "usage: consumer PIPELINE IMAGE.fits CATALOG.csv\n");
        return 2;
    }
    if ((st = sf_image_alloc(&img, nx, ny, SF_HOST, NULL))) {
        fprintf(stderr, "consumer: %s\n", sf_errdetail());
        return 1;
    }
    for (int i = 0; i < nx * ny; i++)
        img.data[i] = (float)gauss();
    for (int k = 0; k < nsrc; k++) { /* sources of sigma 1.5-3 px, peaks 8-60 sigma */
        double x0 = 10 + uniform() * (nx - 20), y0 = 10 + uniform() * (ny - 20);
        double s = 1.5 + 1.5 * uniform(), a = 8 + 52 * uniform();
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                double r2 = ((x - x0) * (x - x0) + (y - y0) * (y - y0)) / (s * s);
                if (r2 < 50)
                    img.data[(size_t)y * img.stride + x] += (float)(a * exp(-0.5 * r2));
            }
    }
    if ((st = sf_fits_write_image(argv[2], NULL, SF_FITS_FLOAT32, img.data, nx, ny, 0, NULL)) ||
        (st = sf_pipeline_find(argv[1], path, sizeof path)) || (st = sf_pipeline_load(path, &pl))) {
        fprintf(stderr, "consumer: %s\n", sf_errdetail());
        return 1;
    }
    o.backend = SF_BACKEND_CPU;
    if ((st = sf_pipeline_run(&pl, &img, &o, &r))) {
        fprintf(stderr, "consumer: %s\n", sf_errdetail());
        return 1;
    }
    {
        sf_catalog_meta m = {argv[2], pl.name, "cpu", "", r.have_bkg, r.bkg, NULL, r.box, 0, 0};
        if ((st = sf_catalog_write_csv(argv[3], r.sources, r.nsources, &m))) {
            fprintf(stderr, "consumer: %s\n", sf_errdetail());
            return 1;
        }
    }
    { /* the one-call entry point, its table printed as the CSV writer prints */
        sf_array a = {img.data, SF_DT_FLOAT32, nx, ny, (long long)(img.stride * sizeof(float)), NULL};
        sf_find_opts fo = {argv[1], "cpu", NULL, 0, 0};
        sf_found *f;
        FILE *out;
        snprintf(path, sizeof path, "%s.find", argv[3]);
        if (sf_find(&a, &fo, &f) || !(out = fopen(path, "w"))) {
            fprintf(stderr, "consumer: sf_find: %s\n", sf_errdetail());
            return 1;
        }
        for (int j = 0; j < sf_found_ncols(f); j++)
            fprintf(out, "%s%s", sf_found_colname(f, j), j + 1 < sf_found_ncols(f) ? "," : "\n");
        for (int i = 0; i < sf_found_nrows(f); i++)
            for (int j = 0; j < sf_found_ncols(f); j++) {
                double v = sf_found_column(f, j)[i];
                const char *fmt = sf_found_colfmt(f, j);
                if (sf_found_colint(f, j) && fmt[1] == 'l')
                    fprintf(out, fmt, (long long)v);
                else if (sf_found_colint(f, j))
                    fprintf(out, fmt, (int)v);
                else if (isfinite(v))
                    fprintf(out, fmt, v);
                else
                    fputs("nan", out);
                fputc(j + 1 < sf_found_ncols(f) ? ',' : '\n', out);
            }
        fclose(out);
        sf_found_free(f);
    }
    printf("consumer: %d sources from a %dx%d array with pipeline %s (skyfind library)\n", r.nsources,
           nx, ny, pl.name);
    sf_run_result_free(&r);
    sf_pipeline_free(&pl);
    sf_image_free(&img, NULL);
    return 0;
}
