/* Stage `threshold`: the detection mask, with one or two levels (PyBDSF's
 * thresh_pix / thresh_isl, Aegean's seedclip / floodclip, PySE's detection
 * and analysis thresholds). A pixel with d = v - level (v when subtract=0)
 *   d > nsigma * sigma           gets SF_MASK_SEED (1),
 *   d > flood * sigma otherwise  gets SF_MASK_FLOOD (2) (flood > 0 only),
 * with the level and sigma either the global ones or, when background maps
 * are given, those of the pixel. `segment` then keeps the islands of
 * non-zero pixels that hold at least one seed. Non-finite pixels are never
 * set. On a filtered image (stage `convolve` before it) v is the filtered
 * pixel, the level is scaled by the kernel's sum and sigma by its white-noise
 * gain sqrt(sum k^2) (see sf_kernel_noise_gain). */
#ifndef SKYFIND_THRESHOLD_H
#define SKYFIND_THRESHOLD_H

#include "skyfind/image.h"
#include "skyfind/background.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double nsigma;    /* 5.0; detection (seed) threshold in units of the background sigma */
    int subtract;     /* 1; subtract the background level before comparing (0: lesson) */
    double flood;     /* 0: one level; else the analysis (flood) threshold in sigma, <= nsigma */
    /* Set by the runner, not by users: thresholding a filtered image. */
    int filtered;     /* 0: level_scale and noise_scale are taken as 1 */
    double level_scale, noise_scale;
    int rms_global;   /* 0: the noise map at each pixel (when the background stage made maps);
                         1: one sigma for the whole image (st->sigma, the maps' median rms),
                         SExtractor's convention without a weight map */
    int sign;         /* SF_SIGN_*: which detections the runner makes (src/core/run.c): of
                         the image, of the inverted image, or both; the threshold
                         functions themselves always detect the positive ones */
} sf_thresh_params;

enum { SF_SIGN_POSITIVE = 0, SF_SIGN_NEGATIVE = 1, SF_SIGN_BOTH = 2 };

void sf_thresh_params_default(sf_thresh_params *p);

/* Comparisons are made in float32 (src/calc/threshold_pixel.h), identically on
 * both backends.
 * bkg and rms: NULL for the global level and sigma of st, or the maps of
 * method=mesh (same shape and location as img); rms may be NULL with a bkg
 * map (rms_global): the level of each pixel against st->sigma. */
/* The float32 levels both backends use: seed, flood (in sigma; flood = seed
 * for one level) and the scales of a filtered image (1 otherwise). */
void sf_thresh_levels(const sf_thresh_params *p, float *seed, float *flood, float *ls, float *ns);

sf_status sf_threshold_cpu(const sf_image *img, const sf_thresh_params *p,
                           const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                           sf_mask *mask);
sf_status sf_threshold_gpu(sf_gpu *g, const sf_image *img, const sf_thresh_params *p,
                           const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                           sf_mask *mask);
/* sf_threshold_gpu against the maps of a BANE grid (sf_background_bane_grid_gpu),
 * made in the same pass: writes bkg and rms (as sf_bane_maps_gpu, orig the
 * image the grid was made from) and the mask (as sf_threshold_gpu with those
 * maps; use_rms 0 for rms=global), in one read of img. */
sf_status sf_threshold_bane_gpu(sf_gpu *g, const sf_image *img, const sf_image *orig,
                                const sf_bane_grid *grid, const sf_thresh_params *p,
                                const sf_bkg_stats *st, sf_image *bkg, sf_image *rms, int use_rms,
                                sf_mask *mask);
/* Its CPU twin, for the maps of method=mesh or bane before they are made
 * (sf_background_view_cpu): the same maps and mask as sf_bkg_view_rows then
 * sf_threshold_cpu, each row of the mask made just after its rows of the
 * maps, while they are in cache; bkg and rms NULL: the maps' rows are
 * dropped (the CPU runner's way). */
sf_status sf_threshold_view_cpu(const sf_image *img, const sf_bkg_view *view,
                                const sf_thresh_params *p, const sf_bkg_stats *st, sf_image *bkg,
                                sf_image *rms, int use_rms, sf_mask *mask);

#ifdef __cplusplus
}
#endif
#endif
