/* Test helper: run the CPU twin of stage `measure` on raw inputs and write
 * the sf_source array raw (for the numpy test, which reads it with a dtype
 * of the struct's layout; the first line printed is "N sizeof(sf_source)"
 * followed by the byte offset of every field, so the test checks the layout).
 * usage: sf_measure_tool NX NY NLABELS image.f32 labels.i32 out.bin
 *        [subtract=0|1] [level=L] [sigma=S] [mask=mask.u8] [bkg=bkg.f32] [rms=rms.f32] */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/measure.h"

static int read_raw(const char *path, void *buf, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    int ok = f && fread(buf, 1, bytes, f) == bytes;
    if (f)
        fclose(f);
    if (!ok)
        fprintf(stderr, "sf_measure_tool: cannot read %zu bytes from %s\n", bytes, path);
    return ok;
}

int main(int argc, char **argv)
{
    sf_image img = {0}, bkg = {0}, rms = {0};
    sf_labels lab = {0};
    sf_mask mask = {0};
    sf_bkg_stats st = {0};
    sf_measure_aux aux = {0};
    sf_measure_params p;
    sf_source *out = NULL;
    FILE *f = NULL;
    int nx, ny, n, rc = 1, have_level = 0;
    size_t np;
    sf_status s;
    if (argc < 7) {
        fprintf(stderr, "usage: sf_measure_tool NX NY NLABELS image.f32 labels.i32 out.bin "
                        "[subtract=0|1] [level=L] [sigma=S] [mask=F] [bkg=F] [rms=F]\n");
        return 2;
    }
    nx = atoi(argv[1]);
    ny = atoi(argv[2]);
    n = atoi(argv[3]);
    np = sf_npix(nx, ny);
    sf_measure_params_default(&p);
    if (sf_image_alloc(&img, nx, ny, SF_HOST, NULL) || sf_labels_alloc(&lab, nx, ny, SF_HOST, NULL) ||
        !(out = malloc(((size_t)n + 1) * sizeof *out)))
        goto done;
    if (!read_raw(argv[4], img.data, np * 4) || !read_raw(argv[5], lab.data, np * 4))
        goto done;
    for (int i = 7; i < argc; i++) {
        const char *a = argv[i], *v = strchr(a, '=');
        if (!v)
            goto bad;
        v++;
        if (!strncmp(a, "subtract=", 9)) {
            p.subtract = atoi(v);
        } else if (!strncmp(a, "level=", 6)) {
            st.median = atof(v);
            have_level = 1;
        } else if (!strncmp(a, "sigma=", 6)) {
            st.sigma = atof(v);
            have_level = 1;
        } else if (!strncmp(a, "mask=", 5)) {
            if (sf_mask_alloc(&mask, nx, ny, SF_HOST, NULL) || !read_raw(v, mask.data, np))
                goto done;
            aux.mask = &mask;
        } else if (!strncmp(a, "bkg=", 4)) {
            if (sf_image_alloc(&bkg, nx, ny, SF_HOST, NULL) || !read_raw(v, bkg.data, np * 4))
                goto done;
            aux.bkg = &bkg;
        } else if (!strncmp(a, "rms=", 4)) {
            if (sf_image_alloc(&rms, nx, ny, SF_HOST, NULL) || !read_raw(v, rms.data, np * 4))
                goto done;
            aux.rms = &rms;
        } else {
            goto bad;
        }
    }
    if (have_level)
        aux.stats = &st;
    if ((s = sf_measure_cpu(&img, &lab, n, &aux, &p, out)) != SF_OK) {
        fprintf(stderr, "sf_measure_tool: %s: %s\n", sf_strerror(s), sf_errdetail());
        goto done;
    }
    if (!(f = fopen(argv[6], "wb")) || fwrite(out, sizeof *out, (size_t)n, f) != (size_t)n ||
        fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "sf_measure_tool: cannot write %s\n", argv[6]);
        goto done;
    }
    f = NULL;
    printf("%d %zu", n, sizeof(sf_source));
#define OFF(field) printf(" %s=%zu", #field, offsetof(sf_source, field))
    OFF(id), OFF(flags), OFF(npix), OFF(flux_sum), OFF(x), OFF(y), OFF(peak), OFF(peak_x);
    OFF(peak_y), OFF(xmin), OFF(xmax), OFF(ymin), OFF(ymax), OFF(bkg), OFF(rms), OFF(npeaks);
    OFF(parent), OFF(nchildren), OFF(sign), OFF(x2), OFF(y2), OFF(xy), OFF(a), OFF(b), OFF(theta), OFF(snr), OFF(flux_err);
    OFF(x_err), OFF(y_err);
#undef OFF
    printf("\n");
    rc = 0;
    goto done;
bad:
    fprintf(stderr, "sf_measure_tool: bad argument\n");
    rc = 2;
done:
    free(out);
    sf_image_free(&img, NULL);
    sf_image_free(&bkg, NULL);
    sf_image_free(&rms, NULL);
    sf_labels_free(&lab, NULL);
    sf_mask_free(&mask, NULL);
    return rc;
}
