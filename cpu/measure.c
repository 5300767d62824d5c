/* Stage `measure`, CPU twin: per-source measurements (see skyfind/measure.h)
 * in two raster-order passes: the peak, box, flags and scales first (a walk
 * of the label map, listing the labelled pixels), then the exact
 * fixed-point sums relative to each peak (over the lists); both backends finish
 * with ms_finish (src/calc/measure_calc.h), so gpu/measure.cu gives the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "skyfind/measure.h"
#include "measure_calc.h"
#include "labels_scan.h"

typedef struct {
    sf_fix128 s[MS_NSUM];
    uint64_t npix;
    uint32_t peak_key;  /* sf_fkey of the peak, 0 = no pixel yet */
    size_t peak_idx;    /* linear index y*nx + x of the first pixel with that key */
    int xmin, xmax, ymin, ymax;
    int flags, npeaks;
} ms_acc;

/* A strip's labelled pixels with a finite measured value, in raster order,
 * with their label and value, listed by pass 1 for pass 2, which then reads
 * only them instead of walking the whole label map again and forming each
 * value anew (islands cover a few percent of an image). A strip stops
 * listing past max pixels (off: pass 2 walks its rows as pass 1 did), so
 * the list never costs more than a byte a pixel. */
typedef struct {
    uint32_t x, y;
    int32_t l;
    float m;
} ms_px;

typedef struct {
    ms_px *v;
    size_t n, cap, max;
    int off;
} ms_list;

static void ms_list_push(ms_list *L, int x, int y, int32_t l, float m)
{
    if (L->off)
        return;
    if (L->n == L->cap) {
        size_t c = L->cap ? 2 * L->cap : 4096;
        ms_px *v;
        if (c > L->max)
            c = L->max;
        if (c <= L->n || !(v = realloc(L->v, c * sizeof *v))) {
            free(L->v);
            L->v = NULL;
            L->off = 1;
            return;
        }
        L->v = v;
        L->cap = c;
    }
    L->v[L->n].x = (uint32_t)x;
    L->v[L->n].y = (uint32_t)y;
    L->v[L->n].l = l;
    L->v[L->n++].m = m;
}

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
        if (aux->view && (aux->bkg || loc != SF_HOST))
            return sf_fail(SF_ERR_PARAM, "measure: a view of the maps is the CPU's, in their place");
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
    } else if (aux && aux->view) {
        in->view = aux->view;
    }
    if (aux && aux->mask) {
        in->mask = aux->mask->data;
        in->mstride = aux->mask->stride;
    }
}

/* Pass 1 over rows [y0, y1) into acc (one per label): check the labels; per
 * label the pixel count, the peak (the first of the largest key in raster
 * order), the box, the flags and the seed local maxima; *M = max |m| and
 * *Mr = max |r| for the scales. Returns the linear index of the first pixel
 * with a label outside 1..nlabels, or -1. */
static long long ms_pass1(const sf_image *img, const sf_labels *labels, int nlabels, const ms_in *in,
                          int y0, int y1, ms_acc *acc, float *Mout, float *Mrout, ms_list *L)
{
    const int nx = img->nx, ny = img->ny;
    float M = 0.0f, Mr = 0.0f;
    for (int y = y0; y < y1; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        const int32_t *lrow = labels->data + (size_t)y * labels->stride;
        for (int x = 0; x < nx; x++) {
            int32_t l;
            ms_acc *a;
            float m, r;
            uint32_t k;
            int look, skip;
            if ((skip = sf_labels_sky_run(lrow, x, nx)) != 0) {
                x += skip - 1;
                continue;
            }
            l = lrow[x];
            if (l == 0)
                continue;
            if (l < 0 || l > nlabels)
                return (long long)y * nx + x;
            a = &acc[l - 1];
            m = ms_value(row[x], in, x, y);
            if (!isfinite(m)) {
                a->flags |= SF_SRC_NAN;
                continue;
            }
            ms_list_push(L, x, y, l, m);
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
            r = ms_noise(in, x, y);
            if (!isfinite(r))
                a->flags |= MS_FLAG_NOISE_BAD;
            else if (fabsf(r) > Mr)
                Mr = fabsf(r);
            look = ms_look_around(img->data, img->stride, labels->data, labels->stride, in, nx,
                                  ny, x, y, l, m,
                                  in->mask && MS_IS_SEED(in->mask[(size_t)y * in->mstride + x]));
            a->flags |= look & SF_SRC_NAN;
            if (look & MS_IS_PEAK)
                a->npeaks++;
        }
    }
    *Mout = M;
    *Mrout = Mr;
    return -1;
}

/* Pass 2's terms of pixel (x, y) of label l, measured value m (finite). */
static inline void ms_pass2_px(const ms_in *in, int nx, int x, int y, int32_t l, float m,
                               const ms_acc *pk, ms_acc *acc, double scale, double rscale)
{
    const double dx = (double)(x - (int)(pk[l - 1].peak_idx % (size_t)nx));
    const double dy = (double)(y - (int)(pk[l - 1].peak_idx / (size_t)nx));
    float r;
    ms_add_terms(&acc[l - 1].s[MS_V], ms_mul((double)m, scale), dx, dy);
    r = ms_noise(in, x, y);
    if (isfinite(r))
        ms_add_terms(&acc[l - 1].s[MS_R], ms_mul(ms_mul((double)r, (double)r), rscale), dx, dy);
}

/* Pass 2 over rows [y0, y1): exact sums relative to each label's peak
 * (peaks: the whole image's, from pk) into acc's s[]. */
static void ms_pass2(const sf_image *img, const sf_labels *labels, const ms_in *in, int y0, int y1,
                     const ms_acc *pk, ms_acc *acc, double scale, double rscale)
{
    const int nx = img->nx;
    for (int y = y0; y < y1; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        const int32_t *lrow = labels->data + (size_t)y * labels->stride;
        for (int x = 0; x < nx; x++) {
            int32_t l;
            float m;
            int skip;
            if ((skip = sf_labels_sky_run(lrow, x, nx)) != 0) {
                x += skip - 1;
                continue;
            }
            l = lrow[x];
            if (l == 0)
                continue;
            m = ms_value(row[x], in, x, y);
            if (!isfinite(m))
                continue;
            ms_pass2_px(in, nx, x, y, l, m, pk, acc, scale, rscale);
        }
    }
}

/* Pass 2 over a strip's list of pixels (ms_list): the same pixels in the
 * same order as ms_pass2 over its rows. */
static void ms_pass2_list(int nx, const ms_in *in, const ms_list *L, const ms_acc *pk,
                          ms_acc *acc, double scale, double rscale)
{
    for (size_t i = 0; i < L->n; i++) {
        const ms_px *q = &L->v[i];
        ms_pass2_px(in, nx, (int)q->x, (int)q->y, q->l, q->m, pk, acc, scale, rscale);
    }
}

/* a += b, where b covers rows after a's: the result is the one accumulator
 * of both row ranges in raster order (sums exact, so any order gives the
 * same bits). */
static void ms_merge(ms_acc *a, const ms_acc *b, int pass)
{
    if (pass == 2) {
        for (int j = 0; j < MS_NSUM; j++)
            sf_fix_add(&a->s[j], b->s[j]);
        return;
    }
    a->flags |= b->flags;
    a->npeaks += b->npeaks;
    if (!b->npix)
        return;
    if (!a->npix) {
        a->xmin = b->xmin;
        a->xmax = b->xmax;
        a->ymin = b->ymin;
    } else {
        a->xmin = b->xmin < a->xmin ? b->xmin : a->xmin;
        a->xmax = b->xmax > a->xmax ? b->xmax : a->xmax;
    }
    a->ymax = b->ymax;
    a->npix += b->npix;
    if (b->peak_key > a->peak_key) { /* equal keys: a's pixel comes first */
        a->peak_key = b->peak_key;
        a->peak_idx = b->peak_idx;
    }
}

/* Labels from which the merge and the finish run in parallel (below, a
 * team's start costs more than the loop). */
#define MS_PAR_LABELS 1024

/* Every strip's accumulators of a pass merged into the first strip's, label
 * by label, each label's strips in order (1, 2, ..., nth - 1), so the same
 * result whichever thread merges which label. By the threads where the
 * labels are many: one thread merging 16 strips of 2000 sources read 8 MB of
 * accumulators at 16 threads, a quarter of the stage at 8192^2. */
static void ms_merge_strips(ms_acc *acc, int nlabels, int nth, int pass)
{
    if (nth < 2)
        return;
#pragma omp parallel for schedule(static) num_threads(nth) if (nlabels >= MS_PAR_LABELS)
    for (int i = 0; i < nlabels; i++)
        for (int t = 1; t < nth; t++)
            ms_merge(&acc[i], &acc[(size_t)t * nlabels + i], pass);
}

sf_status sf_measure_cpu(const sf_image *img, const sf_labels *labels, int nlabels,
                         const sf_measure_aux *aux, const sf_measure_params *p,
                         sf_source *out)
{
    sf_status st = SF_OK;
    ms_acc *acc = NULL;
    ms_in in;
    float M = 0.0f, Mr = 0.0f;
    int nx, ny, e, er, shift, nth = 1;
    long long *bad = NULL;
    float *Ms = NULL;
    ms_list *lists = NULL;
    double scale, rscale;

    if ((st = sf_measure_check(img, labels, nlabels, aux, out, SF_HOST)) != SF_OK)
        return st;
    nx = img->nx;
    ny = img->ny;
    sf_measure_inputs(aux, p, &in);
    /* strips of rows, one a thread, each with accumulators of its own (at
     * most 256 MB of them, strips of at least 32 rows), merged in order */
#ifdef _OPENMP
    nth = omp_get_max_threads();
#endif
    while (nth > 1 && ((size_t)nth * (size_t)nlabels * sizeof *acc > ((size_t)256 << 20) || ny / nth < 32))
        nth--;
    /* (one at least: the strips' pointers into it are made even without labels) */
    if (!(acc = (ms_acc *)calloc(nlabels > 0 ? (size_t)nlabels * nth : 1, sizeof *acc)))
        return sf_fail(SF_ERR_NOMEM, "measure: %d accumulators", nlabels);
    if (!(bad = malloc((size_t)nth * sizeof *bad)) || !(Ms = calloc(2 * (size_t)nth, sizeof *Ms)) ||
        !(lists = calloc((size_t)nth, sizeof *lists))) {
        st = sf_fail(SF_ERR_NOMEM, "measure: thread tables");
        goto fail;
    }

    /* each strip's accumulators set up (first touched) by its own thread */
#pragma omp parallel for schedule(static, 1) num_threads(nth)
    for (int t = 0; t < nth; t++) {
        const int y0 = (int)((long long)ny * t / nth), y1 = (int)((long long)ny * (t + 1) / nth);
        for (size_t i = (size_t)t * nlabels; i < (size_t)(t + 1) * nlabels; i++) {
            acc[i].xmin = acc[i].ymin = -1;
            acc[i].xmax = acc[i].ymax = -1;
        }
        lists[t].max = (size_t)(y1 - y0) * (size_t)nx / sizeof(ms_px); /* a byte a pixel */
        bad[t] = ms_pass1(img, labels, nlabels, &in, y0, y1, acc + (size_t)t * nlabels, &Ms[2 * t],
                          &Ms[2 * t + 1], &lists[t]);
    }
    for (int t = 0; t < nth; t++) {
        if (bad[t] >= 0) {
            int x = (int)(bad[t] % nx), y = (int)(bad[t] / nx);
            st = sf_fail(SF_ERR_INTERNAL, "measure: label %d at pixel (%d, %d) outside 0..%d",
                         (int)labels->data[(size_t)y * labels->stride + x], x, y, nlabels);
            goto fail;
        }
        M = Ms[2 * t] > M ? Ms[2 * t] : M;
        Mr = Ms[2 * t + 1] > Mr ? Ms[2 * t + 1] : Mr;
    }
    if (nlabels == 0)
        goto fail; /* nothing to measure: done */
    ms_merge_strips(acc, nlabels, nth, 1);

    shift = ms_scale_shift(nx, ny);
    e = sf_fix_exponent((double)M) - shift;
    er = sf_fix_exponent((double)Mr * (double)Mr) - shift;
    scale = ldexp(1.0, e);
    rscale = ldexp(1.0, er);

    /* Pass 2: exact sums relative to each label's peak. */
#pragma omp parallel for schedule(static, 1) num_threads(nth)
    for (int t = 0; t < nth; t++) {
        if (!lists[t].off)
            ms_pass2_list(nx, &in, &lists[t], acc, acc + (size_t)t * nlabels, scale, rscale);
        else
            ms_pass2(img, labels, &in, (int)((long long)ny * t / nth),
                     (int)((long long)ny * (t + 1) / nth), acc, acc + (size_t)t * nlabels, scale,
                     rscale);
    }
    ms_merge_strips(acc, nlabels, nth, 2);

    /* Finish exactly as gpu/measure.cu does. */
#pragma omp parallel for schedule(static) num_threads(nth) if (nlabels >= MS_PAR_LABELS)
    for (int i = 0; i < nlabels; i++) {
        const ms_acc *a = &acc[i];
        ms_totals t;
        memset(&out[i], 0, sizeof out[i]);
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
            t.bkg = ms_level_at(&in, px, py);
            t.rms = ms_noise(&in, px, py);
        }
        ms_finish(&t, i + 1, e, er, nx, ny, &out[i]);
    }

fail:
    for (int t = 0; lists && t < nth; t++)
        free(lists[t].v);
    free(lists);
    free(acc);
    free(bad);
    free(Ms);
    return st;
}
