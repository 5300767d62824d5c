/* Stage `measure`, CPU twin: per-source measurements (see skyfind/measure.h)
 * in two raster-order passes: the peak, box, flags and scales first, then
 * the exact fixed-point sums relative to each peak; both backends finish
 * with ms_finish (src/calc/measure_calc.h), so gpu/measure.cu gives the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/measure.h"
#include "measure_calc.h"

typedef struct {
    sf_fix128 s[MS_NSUM];
    uint64_t npix;
    uint32_t peak_key;  /* sf_fkey of the peak, 0 = no pixel yet */
    size_t peak_idx;    /* linear index y*nx + x of the first pixel with that key */
    int xmin, xmax, ymin, ymax;
    int flags, npeaks;
} ms_acc;

void sf_measure_params_default(sf_measure_params *p)
{
    memset(p, 0, sizeof *p);
    p->subtract = 1;
}

static int ms_same_shape(const sf_image *img, int nx, int ny, sf_loc loc)
{
    return img->nx == nx && img->ny == ny && img->loc == loc && img->data &&
           img->stride >= (size_t)nx;
}

/* Checks shared by both backends (the GPU version calls it too). */
sf_status sf_measure_check(const sf_image *img, const sf_labels *labels, int nlabels,
                           const sf_measure_aux *aux, const sf_source *out, sf_loc loc)
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
    if (aux) {
        const sf_mask *m = aux->mask;
        if (!aux->bkg != !aux->rms)
            return sf_fail(SF_ERR_PARAM, "measure: give both background maps or neither");
        if (aux->bkg && (!ms_same_shape(aux->bkg, img->nx, img->ny, loc) ||
                         !ms_same_shape(aux->rms, img->nx, img->ny, loc)))
            return sf_fail(SF_ERR_PARAM, "measure: background maps do not match the %dx%d image",
                           img->nx, img->ny);
        if (m && (m->nx != img->nx || m->ny != img->ny || m->loc != loc || !m->data ||
                  m->stride < (size_t)m->nx))
            return sf_fail(SF_ERR_PARAM, "measure: the mask does not match the %dx%d image",
                           img->nx, img->ny);
    }
    return SF_OK;
}

void sf_measure_inputs(const sf_measure_aux *aux, const sf_measure_params *p, ms_in *in)
{
    const sf_bkg_stats *st = aux ? aux->stats : NULL;
    memset(in, 0, sizeof *in);
    in->subtract = p ? p->subtract != 0 : 1;
    in->level = st && in->subtract && isfinite(st->median) ? (float)st->median : 0.0f;
    in->level_out = st ? (float)st->median : sf_fix_nanf();
    in->sigma = st ? (float)st->sigma : sf_fix_nanf();
    if (aux && aux->bkg) {
        in->bkg = aux->bkg->data;
        in->bstride = aux->bkg->stride;
        in->rms = aux->rms->data;
        in->rstride = aux->rms->stride;
    }
    if (aux && aux->mask) {
        in->mask = aux->mask->data;
        in->mstride = aux->mask->stride;
    }
}

sf_status sf_measure_cpu(const sf_image *img, const sf_labels *labels, int nlabels,
                         const sf_measure_aux *aux, const sf_measure_params *p,
                         sf_source *out)
{
    sf_status st = SF_OK;
    ms_acc *acc = NULL;
    ms_in in;
    float M = 0.0f, Mr = 0.0f;
    int nx, ny, e, er, shift;
    double scale, rscale;

    if ((st = sf_measure_check(img, labels, nlabels, aux, out, SF_HOST)) != SF_OK)
        return st;
    nx = img->nx;
    ny = img->ny;
    sf_measure_inputs(aux, p, &in);
    if (nlabels > 0 && !(acc = (ms_acc *)calloc((size_t)nlabels, sizeof *acc)))
        return sf_fail(SF_ERR_NOMEM, "measure: %d accumulators", nlabels);
    for (int i = 0; i < nlabels; i++) {
        acc[i].xmin = acc[i].ymin = -1;
        acc[i].xmax = acc[i].ymax = -1;
    }

    /* Pass 1: check the labels; per label the pixel count, the peak (the
     * first of the largest key in raster order), the box, the flags and the
     * seed local maxima; M = max |m| and Mr = max |r| for the scales. */
    for (int y = 0; y < ny; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        const int32_t *lrow = labels->data + (size_t)y * labels->stride;
        for (int x = 0; x < nx; x++) {
            int32_t l = lrow[x];
            ms_acc *a;
            float m, r;
            uint32_t k;
            int look;
            if (l == 0)
                continue;
            if (l < 0 || l > nlabels) {
                st = sf_fail(SF_ERR_INTERNAL, "measure: label %d at pixel (%d, %d) outside 0..%d",
                             (int)l, x, y, nlabels);
                goto fail;
            }
            a = &acc[l - 1];
            m = ms_value(row[x], &in, x, y);
            if (!isfinite(m)) {
                a->flags |= SF_SRC_NAN;
                continue;
            }
            if (a->npix++ == 0) {
                a->xmin = a->xmax = x;
                a->ymin = a->ymax = y;
            }
            if (x < a->xmin)
                a->xmin = x;
            if (x > a->xmax)
                a->xmax = x;
            a->ymax = y; /* raster order: y never decreases */
            k = sf_fkey(m);
            if (k > a->peak_key) {
                a->peak_key = k;
                a->peak_idx = (size_t)y * (size_t)nx + (size_t)x;
            }
            if (fabsf(m) > M)
                M = fabsf(m);
            r = ms_noise(&in, x, y);
            if (!isfinite(r))
                a->flags |= MS_FLAG_NOISE_BAD;
            else if (fabsf(r) > Mr)
                Mr = fabsf(r);
            look = ms_look_around(img->data, img->stride, labels->data, labels->stride, &in, nx,
                                  ny, x, y, l, m,
                                  in.mask && MS_IS_SEED(in.mask[(size_t)y * in.mstride + x]));
            a->flags |= look & SF_SRC_NAN;
            if (look & MS_IS_PEAK)
                a->npeaks++;
        }
    }
    if (nlabels == 0)
        return SF_OK;

    shift = ms_scale_shift(nx, ny);
    e = sf_fix_exponent((double)M) - shift;
    er = sf_fix_exponent((double)Mr * (double)Mr) - shift;
    scale = ldexp(1.0, e);
    rscale = ldexp(1.0, er);

    /* Pass 2: exact sums relative to each label's peak. */
    for (int y = 0; y < ny; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        const int32_t *lrow = labels->data + (size_t)y * labels->stride;
        for (int x = 0; x < nx; x++) {
            int32_t l = lrow[x];
            ms_acc *a;
            float m, r;
            double dx, dy;
            if (l == 0)
                continue;
            m = ms_value(row[x], &in, x, y);
            if (!isfinite(m))
                continue;
            a = &acc[l - 1];
            dx = (double)(x - (int)(a->peak_idx % (size_t)nx));
            dy = (double)(y - (int)(a->peak_idx / (size_t)nx));
            ms_add_terms(&a->s[MS_V], ms_mul((double)m, scale), dx, dy);
            r = ms_noise(&in, x, y);
            if (isfinite(r))
                ms_add_terms(&a->s[MS_R], ms_mul(ms_mul((double)r, (double)r), rscale), dx, dy);
        }
    }

    /* Finish exactly as gpu/measure.cu does. */
    memset(out, 0, (size_t)nlabels * sizeof *out);
    for (int i = 0; i < nlabels; i++) {
        const ms_acc *a = &acc[i];
        ms_totals t;
        memset(&t, 0, sizeof t);
        memcpy(t.s, a->s, sizeof t.s);
        t.npix = a->npix;
        t.flags = a->flags;
        t.npeaks = in.mask ? a->npeaks : -1;
        if (a->npix) {
            int px = (int)(a->peak_idx % (size_t)nx), py = (int)(a->peak_idx / (size_t)nx);
            t.peak = sf_fkey_value(a->peak_key);
            t.peak_x = px;
            t.peak_y = py;
            t.xmin = a->xmin;
            t.xmax = a->xmax;
            t.ymin = a->ymin;
            t.ymax = a->ymax;
            t.bkg = in.bkg ? in.bkg[(size_t)py * in.bstride + px] : in.level_out;
            t.rms = ms_noise(&in, px, py);
        }
        ms_finish(&t, i + 1, e, er, nx, ny, &out[i]);
    }

fail:
    free(acc);
    return st;
}
