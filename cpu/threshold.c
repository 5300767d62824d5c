/* Stage `threshold`, CPU twin: one or two levels against the global or the
 * per-pixel level and noise, in float32 with the per-pixel rule shared with
 * the GPU (threshold_pixel.h); non-finite pixels are never set. */
#include <math.h>
#include "skyfind/threshold.h"
#include "skyfind/background.h"
#include "threshold_pixel.h"
#include "simd.h"

void sf_thresh_params_default(sf_thresh_params *p)
{
    p->nsigma = 5.0;
    p->subtract = 1;
    p->flood = 0;
    p->rms_global = 0;
    p->sign = SF_SIGN_POSITIVE;
    p->filtered = 0;
    p->level_scale = p->noise_scale = 1;
}

sf_status sf_thresh_check(const sf_image *img, const sf_thresh_params *p,
                          const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                          const sf_mask *mask)
{
    if (!bkg && rms)
        return sf_fail(SF_ERR_PARAM, "threshold: a noise map needs its background map");
    if (bkg && (bkg->nx != img->nx || bkg->ny != img->ny || bkg->loc != img->loc ||
                (rms && (rms->nx != img->nx || rms->ny != img->ny || rms->loc != img->loc))))
        return sf_fail(SF_ERR_INTERNAL, "threshold: background maps do not match the image");
    if (!isfinite(p->nsigma))
        return sf_fail(SF_ERR_PARAM, "threshold nsigma %g is not a number", p->nsigma);
    if (!isfinite(p->flood) || p->flood < 0 || (p->flood > 0 && p->flood > p->nsigma))
        return sf_fail(SF_ERR_PARAM, "threshold flood=%g must be 0 (one level) or in (0, nsigma=%g]",
                       p->flood, p->nsigma);
    if (p->filtered && !(isfinite(p->level_scale) && isfinite(p->noise_scale) && p->noise_scale > 0))
        return sf_fail(SF_ERR_PARAM, "threshold: filtered-image scales %g, %g are not usable",
                       p->level_scale, p->noise_scale);
    if (!bkg && (!isfinite(st->sigma) || !isfinite(st->median)))
        return sf_fail(SF_ERR_PARAM, "threshold: the background level or sigma is not finite");
    if (bkg && !rms && !isfinite(st->sigma))
        return sf_fail(SF_ERR_PARAM, "threshold: the global sigma is not finite");
    if (mask->nx != img->nx || mask->ny != img->ny)
        return sf_fail(SF_ERR_INTERNAL, "threshold: mask %dx%d for image %dx%d", mask->nx,
                       mask->ny, img->nx, img->ny);
    return SF_OK;
}

/* The float32 levels both backends use: seed, flood (in sigma) and the
 * scales of a filtered image (1 otherwise). */
void sf_thresh_levels(const sf_thresh_params *p, float *seed, float *flood, float *ls, float *ns)
{
    *seed = (float)p->nsigma;
    *flood = p->flood > 0 ? (float)p->flood : *seed;
    *ls = p->filtered ? (float)p->level_scale : 1.0f;
    *ns = p->filtered ? (float)p->noise_scale : 1.0f;
}

/* One row of the mask (both builds, simd.h): the per-pixel rule against
 * the maps' rows b and r (NULL without the map), restrict
 * pointers and locals so the loops vectorise (the mask's bytes may alias
 * anything: without them every store reloads the rows). */
SF_SIMD_BODY void thresh_row_body(const float *restrict row, const float *restrict b,
                                 const float *restrict r, uint8_t *restrict out, int nx, int sub,
                                 float level, float sigma, float ls, float ns, float seed,
                                 float flood)
{
    if (b && r) { /* per-pixel level and noise */
        if (sub)
            for (int x = 0; x < nx; x++)
                out[x] = sf_thresh_pixel(row[x], b[x] * ls, r[x] * ns, seed, flood);
        else
            for (int x = 0; x < nx; x++)
                out[x] = sf_thresh_pixel(row[x], 0.0f, r[x] * ns, seed, flood);
    } else if (b && sub) { /* per-pixel level, one sigma */
        for (int x = 0; x < nx; x++)
            out[x] = sf_thresh_pixel(row[x], b[x] * ls, sigma, seed, flood);
    } else if (b) {
        for (int x = 0; x < nx; x++)
            out[x] = sf_thresh_pixel(row[x], 0.0f, sigma, seed, flood);
    } else {
        for (int x = 0; x < nx; x++)
            out[x] = sf_thresh_pixel(row[x], level, sigma, seed, flood);
    }
}
SF_SIMD_KERNEL_VOID(thresh_row,
               (const float *restrict row, const float *restrict b, const float *restrict r,
                uint8_t *restrict out, int nx, int sub, float level, float sigma, float ls, float ns,
                float seed, float flood),
               (row, b, r, out, nx, sub, level, sigma, ls, ns, seed, flood))

sf_status sf_threshold_cpu(const sf_image *img, const sf_thresh_params *p,
                           const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                           sf_mask *mask)
{
    sf_status s = sf_thresh_check(img, p, st, bkg, rms, mask);
    float seed, flood, ls, ns;
    if (s)
        return s;
    if (img->loc != SF_HOST || mask->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_threshold_cpu needs host buffers");
    sf_thresh_levels(p, &seed, &flood, &ls, &ns);
    const float level = p->subtract ? (float)st->median * ls : 0.0f;
    const float sigma = (float)st->sigma * ns;
    const int sub = p->subtract, nx = img->nx;
#pragma omp parallel for schedule(static)
    for (long y = 0; y < (long)img->ny; y++)
        thresh_row(img->data + (size_t)y * img->stride,
                         bkg ? bkg->data + (size_t)y * bkg->stride : NULL,
                         bkg && rms ? rms->data + (size_t)y * rms->stride : NULL,
                         mask->data + (size_t)y * mask->stride, nx, sub, level, sigma, ls, ns, seed,
                         flood);
    return SF_OK;
}

/* sf_threshold_view_cpu's rows: the mask's row y from the maps' rows the
 * maps pass has just made (sf_bkg_view_rows's row_fn). */
typedef struct {
    const sf_image *img;
    sf_mask *mask;
    int use_rms, sub;
    float level, sigma, ls, ns, seed, flood;
} thr_rows;

static void thr_row_fn(void *ctx, int y, const float *b, const float *r)
{
    const thr_rows *t = ctx;
    thresh_row(t->img->data + (size_t)y * t->img->stride, b, t->use_rms ? r : NULL,
               t->mask->data + (size_t)y * t->mask->stride, t->img->nx, t->sub, t->level, t->sigma,
               t->ls, t->ns, t->seed, t->flood);
}

sf_status sf_threshold_view_cpu(const sf_image *img, const sf_bkg_view *view,
                                const sf_thresh_params *p, const sf_bkg_stats *st, sf_image *bkg,
                                sf_image *rms, int use_rms, sf_mask *mask)
{
    /* without maps (the rows made in the pass and dropped) the image stands
     * in for them in the check: they have its shape */
    sf_status s = sf_thresh_check(img, p, st, bkg ? bkg : img, use_rms ? (bkg ? rms : img) : NULL,
                                  mask);
    thr_rows t;
    if (s)
        return s;
    if (img->loc != SF_HOST || mask->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_threshold_view_cpu needs host buffers");
    sf_thresh_levels(p, &t.seed, &t.flood, &t.ls, &t.ns);
    t.img = img;
    t.mask = mask;
    t.use_rms = use_rms;
    t.sub = p->subtract;
    t.level = p->subtract ? (float)st->median * t.ls : 0.0f;
    t.sigma = (float)st->sigma * t.ns;
    /* without maps to keep and rms=global, the levels' rows alone */
    return sf_bkg_view_rows(view, bkg, rms, !bkg && !use_rms, thr_row_fn, &t);
}
