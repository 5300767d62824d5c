/* Stage `threshold`, CPU twin: mask = v > nsigma*sigma (subtract=0, the
 * lesson) or v - level > nsigma*sigma (subtract=1), in float32 arithmetic;
 * non-finite pixels are never set. */
#include <math.h>
#include "skyfind/threshold.h"

void sf_thresh_params_default(sf_thresh_params *p)
{
    p->nsigma = 5.0;
    p->subtract = 1;
}

sf_status sf_thresh_check(const sf_image *img, const sf_thresh_params *p,
                          const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                          const sf_mask *mask)
{
    if (!bkg != !rms)
        return sf_fail(SF_ERR_PARAM, "threshold: give both background maps or neither");
    if (bkg && (bkg->nx != img->nx || bkg->ny != img->ny || rms->nx != img->nx ||
                rms->ny != img->ny || bkg->loc != img->loc || rms->loc != img->loc))
        return sf_fail(SF_ERR_INTERNAL, "threshold: background maps do not match the image");
    if (!isfinite(p->nsigma))
        return sf_fail(SF_ERR_PARAM, "threshold nsigma %g is not a number", p->nsigma);
    if (!bkg && (!isfinite(st->sigma) || !isfinite(st->median)))
        return sf_fail(SF_ERR_PARAM, "threshold: the background level or sigma is not finite");
    if (mask->nx != img->nx || mask->ny != img->ny)
        return sf_fail(SF_ERR_INTERNAL, "threshold: mask %dx%d for image %dx%d", mask->nx,
                       mask->ny, img->nx, img->ny);
    return SF_OK;
}

sf_status sf_threshold_cpu(const sf_image *img, const sf_thresh_params *p,
                           const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                           sf_mask *mask)
{
    sf_status s = sf_thresh_check(img, p, st, bkg, rms, mask);
    const float nsig = (float)p->nsigma;
    volatile float thr = (float)p->nsigma * (float)st->sigma;
    const float level = p->subtract ? (float)st->median : 0.0f;
    if (s)
        return s;
    if (img->loc != SF_HOST || mask->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_threshold_cpu needs host buffers");
    for (size_t y = 0; y < (size_t)img->ny; y++) {
        const float *row = img->data + y * img->stride;
        uint8_t *out = mask->data + y * mask->stride;
        if (bkg) { /* per-pixel level and noise */
            const float *b = bkg->data + y * bkg->stride, *r = rms->data + y * rms->stride;
            for (size_t x = 0; x < (size_t)img->nx; x++) {
                float t = nsig * r[x];
                float v = row[x], d = p->subtract ? v - b[x] : v;
                out[x] = isfinite(v) && d > t;
            }
            continue;
        }
        for (size_t x = 0; x < (size_t)img->nx; x++) {
            float v = row[x];
            float d = p->subtract ? v - level : v;
            out[x] = isfinite(v) && d > thr;
        }
    }
    return SF_OK;
}
