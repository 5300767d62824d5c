/* Stage `measure`: per-source quantities from the image and the label map.
 * Sums are accumulated exactly in 128-bit fixed point (see src/fixsum.h), so
 * the result does not depend on summation order: CPU and GPU catalogues are
 * bit-identical and reproducible run to run.
 * Non-finite pixels (NaN, +-inf) inside a label are skipped entirely: they
 * count in neither npix, the sums nor the peak (the threshold stage never
 * labels them anyway). A label with no finite pixel gets npix 0, flux_sum 0,
 * x = y = peak = NaN and peak_x = peak_y = -1. Sums resolve M*2^-66, M the
 * largest |value| of the labelled pixels (see src/fixsum.h). */
#ifndef SKYFIND_MEASURE_H
#define SKYFIND_MEASURE_H

#include "skyfind/image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int dummy_;       /* no parameters yet */
} sf_measure_params;

typedef struct {
    int id;           /* label, 1..N */
    long long npix;   /* finite pixels in the island */
    double flux_sum;  /* sum of pixel values (image units) */
    double x, y;      /* flux-weighted centroid, 0-based pixels (NaN if flux_sum == 0) */
    float peak;       /* largest pixel value (+0 ranks above -0) */
    int peak_x, peak_y; /* 0-based position of the peak (first in raster order on ties) */
} sf_source;

void sf_measure_params_default(sf_measure_params *p);

/* out: array of nlabels sources, on the host for the CPU version and on the
 * device for the GPU version (the runner downloads it: that is the catalogue).
 * Label values outside 0..nlabels: the CPU twin returns SF_ERR_INTERNAL; the
 * GPU version (which never reads results back) ignores those pixels. The GPU
 * version takes images of at most 2^32 pixels (SF_ERR_PARAM otherwise). */
sf_status sf_measure_cpu(const sf_image *img, const sf_labels *labels, int nlabels,
                         const sf_measure_params *p, sf_source *out);
sf_status sf_measure_gpu(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                         int nlabels, const sf_measure_params *p, sf_source *out);

size_t sf_measure_gpu_scratch(int nx, int ny, int nlabels, const sf_measure_params *p);

#ifdef __cplusplus
}
#endif
#endif
