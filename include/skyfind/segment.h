/* Stage `segment`: connected-component labelling of a mask.
 * Labels are canonical: 1..N in raster order of each island's first pixel
 * (scipy.ndimage.label's order); islands smaller than min_area, and
 * islands of a two-level mask without a seed pixel (mask value 1: above the
 * detection threshold; 2 is above only the flood threshold), are removed
 * before numbering. The GPU labels equal the CPU's pixel for pixel. */
#ifndef SKYFIND_SEGMENT_H
#define SKYFIND_SEGMENT_H

#include "skyfind/image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int connectivity; /* 8; 4 (edges) or 8 (edges and corners) */
    int min_area;     /* 1; pixels an island needs to be kept */
} sf_seg_params;

void sf_seg_params_default(sf_seg_params *p);

/* labels has the mask's shape and location; *nlabels is returned on the host. */
sf_status sf_segment_cpu(const sf_mask *mask, const sf_seg_params *p,
                         sf_labels *labels, int *nlabels);
sf_status sf_segment_gpu(sf_gpu *g, const sf_mask *mask, const sf_seg_params *p,
                         sf_labels *labels, int *nlabels);
/* The same, also giving *npix (when not NULL): the pixels it labelled (the
 * kept islands' areas), read back with *nlabels, so that a deblend stage
 * after it need not count them (sf_deblend_in.npix); 0 where it does not
 * know them (connectivity 4, and images the block path does not take). */
sf_status sf_segment_gpu_counted(sf_gpu *g, const sf_mask *mask, const sf_seg_params *p,
                                 sf_labels *labels, int *nlabels, long long *npix);

size_t sf_segment_gpu_scratch(int nx, int ny, const sf_seg_params *p);

#ifdef __cplusplus
}
#endif
#endif
