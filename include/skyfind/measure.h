/* Stage `measure`: per-source measurements from the image, the label map and,
 * when the pipeline has them, the background level and noise (global values
 * or per-pixel maps) and the detection mask.
 *
 * What is measured. Each pixel i of an island contributes its measured value
 * m_i = v_i - b_i (subtract=1; b_i the background map at the pixel, or the
 * global level, as float32 arithmetic: m = v - (float)b) or m_i = v_i
 * (subtract=0), and its noise r_i (the rms map at the pixel, or the global
 * sigma). Pixels whose m_i is not finite (NaN/inf in the image or the map)
 * are skipped entirely (they count in neither npix, the sums, the peak nor
 * the box) and set the NAN flag. Sums are exact in 128-bit fixed point
 * (src/calc/fixsum.h), taken relative to the peak pixel (dx = x - peak_x,
 * dy = y - peak_y) so that the second moments keep their precision on large
 * images; they do not depend on the summation order, so CPU and GPU
 * catalogues are bit-identical and reproducible run to run. With
 * F = sum m_i and the sums S.. = sum m_i dx^a dy^b, R.. = sum r_i^2 dx^a dy^b:
 *
 *   flux_sum = F
 *   x = peak_x + Sx/F, y = peak_y + Sy/F          (centroid; NaN if F == 0)
 *   x2 = Sxx/F - (Sx/F)^2, y2 = Syy/F - (Sy/F)^2, xy = Sxy/F - (Sx/F)(Sy/F)
 *        (SExtractor X2, Y2, XY: flux-weighted central second moments, pix^2)
 *   a, b, theta: SExtractor's A, B, THETA from x2, y2, xy: when
 *        x2*y2 - xy^2 < 0.00694 (1/144, a line or a single pixel) 0.0833333
 *        (1/12) is added to x2 and y2 first (for a, b, theta only); then
 *        theta = atan2(2 xy, x2 - y2) / 2, degrees counter-clockwise from +x
 *        in (-90, 90] (45 for a circle, x2 == y2 and xy == 0; SExtractor
 *        also says 45 when x2 == y2 and xy < 0, skyfind -45, the true
 *        orientation); a^2, b^2 = (x2+y2)/2 +-
 *        sqrt((x2-y2)^2/4 + xy^2). NaN when the moments are NaN or not
 *        positive (islands of mixed-sign flux).
 *   flux_err = sqrt(sum r_i^2)
 *   x_err^2 = sum r_i^2 (x_i - x)^2 / F^2, y_err^2 likewise (SExtractor's
 *        ERRX2/ERRY2 with the local noise; for a singular island, when
 *        ERRX2*ERRY2 - ERRXY^2 < E^2 with E = 0.08333 sum r_i^2 / F^2, E is
 *        added to both, as SExtractor does).
 *   These errors assume independent pixels: in radio images the noise is
 *   correlated over a beam, so they are lower bounds (by roughly the square
 *   root of the beam area in pixels).
 *   peak = the largest m_i (+0 ranks above -0; the first in raster order on
 *        ties) at (peak_x, peak_y); bkg, rms = the background and noise at
 *        the peak pixel (map values, or the global level and sigma; NaN when
 *        unknown); snr = peak / rms (NaN when rms is not > 0).
 *   flux_err, x_err, y_err are NaN when the noise is unknown (no background
 *        stage, or a non-finite rms at a pixel of the island).
 *
 * A label with no measurable pixel gets npix 0, flux_sum 0, peak_x = peak_y =
 * xmin = xmax = ymin = ymax = -1 and NaN for every other real field. Every
 * NaN written has the bit pattern of sf_fix_nan()/sf_fix_nanf(), so
 * catalogues compare with memcmp. Sums resolve M*2^-66 (M the largest |m_i|
 * of the labelled pixels; fewer bits on images where nx*ny*max(nx,ny)^2 >
 * 2^60, see src/calc/measure_calc.h). */
#ifndef SKYFIND_MEASURE_H
#define SKYFIND_MEASURE_H

#include "skyfind/image.h"
#include "skyfind/background.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int subtract;     /* 1; measure image - background (the map value at each pixel when
                         maps are given, else the global level); 0: the image as it is */
} sf_measure_params;

/* What measure reads besides the image and the labels; every pointer may be
 * NULL. Maps and mask have the image's shape and location. */
typedef struct {
    const sf_bkg_stats *stats; /* global level (median) and sigma; NULL: unknown
                                  (level 0 for subtract, bkg/rms/errors NaN) */
    const sf_image *bkg, *rms; /* per-pixel maps (method=mesh), both or neither */
    const sf_mask *mask;       /* detection mask: a pixel is a seed when bit 0 is set
                                  (threshold.h: 1 = seed, 2 = flood only; a one-level
                                  mask is all 1); NULL: npeaks = -1 */
    int labels_in_mask;        /* 1: the labels were made from mask (every labelled pixel
                                  is set in it): the GPU looks for labels only where it
                                  is set; 0: in every pixel */
    const sf_bkg_view *view;   /* CPU: both maps before they are made
                                  (sf_background_view_cpu), read where they are needed
                                  (sf_bkg_view_at); bkg and rms NULL; or NULL */
} sf_measure_aux;

/* Bits of sf_source.flags. */
enum {
    SF_SRC_EDGE = 1,      /* the island touches the image border */
    SF_SRC_NAN = 2,       /* the island holds or borders (8-neighbour) a NaN/blank pixel */
    SF_SRC_TRUNCATED = 4, /* the peak lies on the image border (the source continues outside) */
    SF_SRC_MERGED = 8,    /* more than one local maximum that is a seed pixel (npeaks > 1) */
    SF_SRC_DEBLENDED = 16 /* one of several objects the deblend stage cut from one island */
};

typedef struct {
    int id;           /* label, 1..N */
    int flags;        /* SF_SRC_* bits */
    long long npix;   /* measured (finite) pixels in the island */
    double flux_sum;  /* sum of m_i (image units) */
    double x, y;      /* flux-weighted centroid, 0-based pixels (NaN if flux_sum == 0) */
    float peak;       /* largest m_i */
    int peak_x, peak_y; /* 0-based position of the peak (first in raster order on ties) */
    int xmin, xmax, ymin, ymax; /* bounding box of the measured pixels, 0-based, inclusive */
    float bkg, rms;   /* background level and noise at the peak pixel (image units) */
    int npeaks;       /* 8-neighbour strict local maxima of m inside the island that are
                         seed pixels; -1 when no mask was given */
    int parent;       /* the segment label of the island the object comes from (id without
                         a deblend stage) */
    int nchildren;    /* objects cut from that island (1: not deblended) */
    int sign;         /* 1; -1 for a detection of the inverted image (threshold
                         sign=negative|both): the runner then negates id, parent,
                         flux_sum, peak, snr and bkg back to the image's values */
    double x2, y2, xy;  /* second central moments (pix^2), SExtractor X2/Y2/XY */
    double a, b;      /* semi-major and semi-minor axes (pix), SExtractor A/B */
    double theta;     /* position angle of a, degrees counter-clockwise from +x, (-90, 90] */
    double snr;       /* peak / rms */
    double flux_err;  /* sqrt(sum r_i^2), image units */
    double x_err, y_err; /* centroid errors (pix) */
} sf_source;

void sf_measure_params_default(sf_measure_params *p);

/* out: array of nlabels sources, on the host for the CPU version and on the
 * device for the GPU version (the runner downloads it: that is the catalogue).
 * p may be NULL (defaults); aux may be NULL (nothing but image and labels).
 * Label values outside 0..nlabels: the CPU twin returns SF_ERR_INTERNAL; the
 * GPU version (which never reads results back) ignores those pixels. The GPU
 * version takes images of at most 2^32 pixels (SF_ERR_PARAM otherwise). */
sf_status sf_measure_cpu(const sf_image *img, const sf_labels *labels, int nlabels,
                         const sf_measure_aux *aux, const sf_measure_params *p,
                         sf_source *out);
sf_status sf_measure_gpu(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                         int nlabels, const sf_measure_aux *aux, const sf_measure_params *p,
                         sf_source *out);

size_t sf_measure_gpu_scratch(int nx, int ny, int nlabels, const sf_measure_params *p);

#ifdef __cplusplus
}
#endif
#endif
