/* Stage `background`: the sky level and noise of an image.
 * method=global: iterative kappa-sigma clipping around the median (the
 * GPU-programming lesson's estimator), giving one level and one sigma. */
#ifndef SKYFIND_BACKGROUND_H
#define SKYFIND_BACKGROUND_H

#include "skyfind/image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SF_BKG_GLOBAL = 0 } sf_bkg_method;

typedef struct {
    int method;       /* SF_BKG_GLOBAL */
    double kappa;     /* 3.0; keep pixels with median - kappa*sigma < v < median + kappa*sigma */
    int maxiter;      /* 100; stop after this many clipping iterations */
} sf_bkg_params;

typedef struct {
    double median;    /* clipped median (image units) */
    double sigma;     /* clipped standard deviation, ddof=0 (image units) */
    double mean;      /* clipped mean */
    long long nused;  /* pixels left after clipping */
    long long nvalid; /* non-NaN pixels in the image */
    int niter;        /* clipping iterations run (the last one clipped nothing if converged) */
    int converged;    /* 1 if an iteration clipped no pixel before maxiter */
} sf_bkg_stats;

void sf_bkg_params_default(sf_bkg_params *p);

/* bkg and rms may be NULL for method=global (the level is a scalar); when
 * given they are filled with the constant level and sigma. The GPU version
 * takes img, bkg, rms on the device and returns st on the host. */
sf_status sf_background_cpu(const sf_image *img, const sf_bkg_params *p,
                            sf_bkg_stats *st, sf_image *bkg, sf_image *rms);
sf_status sf_background_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                            sf_bkg_stats *st, sf_image *bkg, sf_image *rms);

/* Device scratch bytes sf_background_gpu needs for an nx x ny image. */
size_t sf_background_gpu_scratch(int nx, int ny, const sf_bkg_params *p);

#ifdef __cplusplus
}
#endif
#endif
