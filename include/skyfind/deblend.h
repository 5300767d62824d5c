/* Stage `deblend`: SExtractor's multi-threshold deblending of the islands
 * found by `segment`.
 *
 * Each island is cut at nthresh - 1 levels spaced exponentially between the
 * island's own threshold t0 (the threshold stage's flood level, or its
 * detection level with one level) and its peak P, in units of the noise:
 * t_k = t0 (P / t0)^(k / nthresh), k = 1 .. nthresh - 1, where a pixel is
 * above level t when d > t * sigma (d the detection pixel less its
 * background level, sigma its noise, exactly as the threshold stage compares
 * them: the filtered image with its scaled level and noise when a convolve
 * stage ran) and P = max d / sigma over the island. The connected parts
 * (the segment stage's connectivity) above each level with at least minarea
 * pixels form a tree. Going down the tree from the top level, a node whose
 * children include at least two branches with
 *     sum over the branch of (d - t_k sigma)  >  mincont * sum over the island of d
 * (SExtractor's DEBLEND_MINCONT test: the flux a branch holds above its
 * level against the island's flux) gives each such branch that has not
 * itself been split an object of its own, and is not an object. Every pixel of
 * a split island that lies in no object's branch goes to the object whose
 * Gaussian model is largest there (SExtractor's gatherup: amplitude
 * t exp(npix / (2 pi a b)), at most 4 times the branch's peak, and the shape
 * of the branch's d-weighted second moments; SExtractor draws among the
 * objects at random with those weights, skyfind takes the largest, so a run
 * is reproducible; ties go to the object whose branch starts first in
 * raster order). With a constant sigma this is SExtractor's rule with
 * DEBLEND_THRESH t * sigma.
 *
 * An island is left whole when nthresh is 1, when t0 <= 0 (levels cannot be
 * spaced exponentially), when P is not finite or not above t0, when it has
 * fewer than 2 * minarea pixels, or when a pixel's d is not finite, its
 * sigma not finite and positive, or its sigma times the top level overflows
 * float32 (sf_db_usable in src/calc/deblend_calc.h).
 *
 * Labels stay canonical: the objects of the whole image are numbered 1..M in
 * raster order of their first pixel, so an image with no split island keeps
 * the segment stage's labels. parent[i] (i = 1..M) is the segment label of
 * object i's island; nchildren[j] (j = 1..nislands) the number of objects of
 * island j (1 when it was not split).
 *
 * All sums are exact (src/calc/fixsum.h) and the levels and Gaussian weights are
 * computed from IEEE operations that both backends round alike
 * (src/calc/deblend_calc.h), so the labels do not depend on the order of work. */
#ifndef SKYFIND_DEBLEND_H
#define SKYFIND_DEBLEND_H

#include "skyfind/image.h"
#include "skyfind/background.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int nthresh;    /* 32; levels (SExtractor DEBLEND_NTHRESH); 1: no deblending */
    double mincont; /* 0.005; minimum contrast (DEBLEND_MINCONT) */
    int minarea;    /* 0 = auto (the segment stage's min_area); pixels a branch needs */
    /* Set by the runner: the connectivity of the segment stage (4 or 8). */
    int connectivity;
} sf_deblend_params;

void sf_deblend_params_default(sf_deblend_params *p);

/* The detection image's level and noise, as the threshold stage used them:
 * d = v - level (float32; level = bkg * level_scale with maps, else the
 * global level * level_scale, 0 when not subtracting) and
 * sigma = rms * noise_scale (or the global sigma * noise_scale). */
typedef struct {
    const sf_image *bkg, *rms; /* maps (rms may be NULL with bkg: threshold rms=global) */
    float level, sigma;        /* global values, used without maps */
    float level_scale, noise_scale;
    int subtract;
    float t0;                  /* the island threshold, in sigma */
    long long npix;            /* GPU: the labelled pixels under the mask when the caller
                                  knows them (sf_segment_gpu_counted's count), so that
                                  the stage need not count them; 0: it counts them. A
                                  wrong count is reported as SF_ERR_INTERNAL. The CPU
                                  twin ignores it. */
    const sf_bkg_view *view;   /* CPU: the maps before they are made (sf_measure_aux's
                                  view) in place of bkg (and of rms with view_rms), which
                                  are NULL; or NULL */
    int view_rms;
} sf_deblend_in;

/* labels: the segment stage's map, rewritten in place with the objects;
 * *nobj: objects found. parent (nobj + 1 entries, [0] unused) and
 * nchildren (nislands + 1 entries) are malloc'd for the caller. */
sf_status sf_deblend_cpu(const sf_image *det, const sf_deblend_in *in,
                         const sf_deblend_params *p, sf_labels *labels, int nislands,
                         int *nobj, int **parent, int **nchildren);

/* The GPU version (gpu/deblend.cu): det, the maps, mask and labels are
 * device buffers (sf_gpu *g's); the result is identical to sf_deblend_cpu's,
 * with parent and nchildren malloc'd on the host. mask (may be NULL) is the
 * threshold mask the labels were made from: labels are read only where it
 * is set (segment labels no other pixel), a quarter of the bytes.
 * SF_ERR_GPU_NOMEM when the islands' trees do not fit the device (the
 * runner then deblends on the host). SF_ERR_NO_GPU in a build without CUDA. */
sf_status sf_deblend_gpu(sf_gpu *g, const sf_image *det, const sf_deblend_in *in,
                         const sf_deblend_params *p, const sf_mask *mask, sf_labels *labels,
                         int nislands, int *nobj, int **parent, int **nchildren);

/* The parameter and shape checks both versions make first. */
sf_status sf_deblend_check(const sf_image *det, const sf_deblend_in *in,
                           const sf_deblend_params *p, const sf_labels *labels);

#ifdef __cplusplus
}
#endif
#endif
