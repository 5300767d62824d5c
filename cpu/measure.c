/* Stage `measure`, CPU twin: per-source pixel count, flux, flux-weighted
 * centroid and peak from the image and the label map, with sums accumulated
 * exactly in 128-bit fixed point (src/fixsum.h) so that gpu/measure.cu gives
 * the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/measure.h"
#include "fixsum.h"

/* Sums kept per label. Second moments (issue #6) go here as MS_VXX, MS_VYY,
 * MS_VXY with terms tv*x*x, tv*y*y, tv*x*y (see fixsum.h for the headroom). */
enum { MS_V, MS_VX, MS_VY, MS_NSUM };

typedef struct {
    sf_fix128 s[MS_NSUM];
    uint64_t npix;
    uint32_t peak_key;  /* sf_fkey of the peak, 0 = no pixel yet */
    size_t peak_idx;    /* linear index y*nx + x of the first pixel with that key */
} ms_acc;

void sf_measure_params_default(sf_measure_params *p)
{
    memset(p, 0, sizeof *p);
}

/* Checks shared by both backends (the GPU version calls it too). */
sf_status sf_measure_check(const sf_image *img, const sf_labels *labels, int nlabels,
                           const sf_source *out, sf_loc loc)
{
    if (!img || !labels || !img->data || !labels->data)
        return sf_fail(SF_ERR_PARAM, "measure: image or label map is missing");
    if (img->loc != loc || labels->loc != loc)
        return sf_fail(SF_ERR_PARAM, "measure (%s): image and labels must be %s buffers",
                       loc == SF_HOST ? "CPU" : "GPU", loc == SF_HOST ? "host" : "device");
    if (img->nx != labels->nx || img->ny != labels->ny)
        return sf_fail(SF_ERR_PARAM, "measure: image is %dx%d but labels are %dx%d", img->nx,
                       img->ny, labels->nx, labels->ny);
    if (img->nx < 1 || img->ny < 1 || img->stride < (size_t)img->nx ||
        labels->stride < (size_t)labels->nx)
        return sf_fail(SF_ERR_PARAM, "measure: bad image shape %dx%d (strides %zu, %zu)",
                       img->nx, img->ny, img->stride, labels->stride);
    if (nlabels < 0)
        return sf_fail(SF_ERR_PARAM, "measure: nlabels %d < 0", nlabels);
    if (nlabels > 0 && !out)
        return sf_fail(SF_ERR_PARAM, "measure: no output array for %d sources", nlabels);
    return SF_OK;
}

sf_status sf_measure_cpu(const sf_image *img, const sf_labels *labels, int nlabels,
                         const sf_measure_params *p, sf_source *out)
{
    sf_status st = SF_OK;
    ms_acc *acc = NULL;
    float M = 0.0f;
    int nx, ny, e;
    double scale;

    (void)p;
    if ((st = sf_measure_check(img, labels, nlabels, out, SF_HOST)) != SF_OK)
        return st;
    nx = img->nx;
    ny = img->ny;

    /* Pass 1: check the labels and find M = max |v| over finite labelled pixels. */
    for (int y = 0; y < ny; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        const int32_t *lrow = labels->data + (size_t)y * labels->stride;
        for (int x = 0; x < nx; x++) {
            int32_t l = lrow[x];
            if (l == 0)
                continue;
            if (l < 0 || l > nlabels)
                return sf_fail(SF_ERR_INTERNAL,
                               "measure: label %d at pixel (%d, %d) outside 0..%d", (int)l, x,
                               y, nlabels);
            if (isfinite(row[x]) && fabsf(row[x]) > M)
                M = fabsf(row[x]);
        }
    }
    if (nlabels == 0)
        return SF_OK;

    acc = (ms_acc *)calloc((size_t)nlabels, sizeof *acc);
    if (!acc) {
        st = sf_fail(SF_ERR_NOMEM, "measure: %d accumulators", nlabels);
        goto fail;
    }
    e = sf_fix_exponent((double)M);
    scale = ldexp(1.0, e);

    /* Pass 2: exact sums per label; the first pixel of the largest key in
     * raster order is the peak (strict > keeps the first of equal values). */
    for (int y = 0; y < ny; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        const int32_t *lrow = labels->data + (size_t)y * labels->stride;
        for (int x = 0; x < nx; x++) {
            int32_t l = lrow[x];
            float v = row[x];
            ms_acc *a;
            double tv;
            uint32_t k;
            if (l == 0 || !isfinite(v))
                continue;
            a = &acc[l - 1];
            tv = (double)v * scale;
            sf_fix_add(&a->s[MS_V], sf_fix_from_double(tv));
            sf_fix_add(&a->s[MS_VX], sf_fix_from_double(tv * (double)x));
            sf_fix_add(&a->s[MS_VY], sf_fix_from_double(tv * (double)y));
            a->npix++;
            k = sf_fkey(v);
            if (k > a->peak_key) {
                a->peak_key = k;
                a->peak_idx = (size_t)y * (size_t)nx + (size_t)x;
            }
        }
    }

    /* Finalize exactly as gpu/measure.cu does (padding bytes zeroed too, so
     * catalogues compare with memcmp). */
    memset(out, 0, (size_t)nlabels * sizeof *out);
    for (int i = 0; i < nlabels; i++) {
        const ms_acc *a = &acc[i];
        sf_source *s = &out[i];
        s->id = i + 1;
        s->npix = (long long)a->npix;
        if (a->npix == 0) {
            s->flux_sum = 0.0;
            s->x = s->y = sf_fix_nan();
            s->peak = sf_fix_nanf();
            s->peak_x = s->peak_y = -1;
            continue;
        }
        s->flux_sum = sf_fix_to_double(a->s[MS_V], e);
        if (sf_fix_is_zero(a->s[MS_V])) {
            s->x = s->y = sf_fix_nan();
        } else {
            s->x = sf_fix_to_double(a->s[MS_VX], e) / s->flux_sum;
            s->y = sf_fix_to_double(a->s[MS_VY], e) / s->flux_sum;
        }
        s->peak = sf_fkey_value(a->peak_key);
        s->peak_x = (int)(a->peak_idx % (size_t)nx);
        s->peak_y = (int)(a->peak_idx / (size_t)nx);
    }

fail:
    free(acc);
    return st;
}
