/* Stage `threshold`: the detection mask. A pixel is set when
 * v > nsigma * sigma (subtract=0, the lesson) or
 * v - level > nsigma * sigma (subtract=1), with the level and sigma either
 * the global ones or, when background maps are given, those of the pixel.
 * Non-finite pixels are never set. */
#ifndef SKYFIND_THRESHOLD_H
#define SKYFIND_THRESHOLD_H

#include "skyfind/image.h"
#include "skyfind/background.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double nsigma;    /* 5.0; detection threshold in units of the background sigma */
    int subtract;     /* 1; subtract the background level before comparing (0: lesson) */
} sf_thresh_params;

void sf_thresh_params_default(sf_thresh_params *p);

/* Comparisons are made in float32: thr = (float)nsigma * (float)sigma.
 * bkg and rms: NULL for the global level and sigma of st, or the maps of
 * method=mesh (same shape and location as img). */
sf_status sf_threshold_cpu(const sf_image *img, const sf_thresh_params *p,
                           const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                           sf_mask *mask);
sf_status sf_threshold_gpu(sf_gpu *g, const sf_image *img, const sf_thresh_params *p,
                           const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                           sf_mask *mask);

#ifdef __cplusplus
}
#endif
#endif
