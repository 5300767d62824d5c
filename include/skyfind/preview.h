/* PNG previews of a run (libpng): the stretched image, the label map and an
 * overlay of the catalogue, so a person can check a run at a glance. Host
 * buffers only; every PNG is written atomically (temporary name, renamed). */
#ifndef SKYFIND_PREVIEW_H
#define SKYFIND_PREVIEW_H

#include "skyfind/image.h"
#include "skyfind/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Orientation: FITS convention as ds9 shows it. Image row 0 (the first FITS
 * row, y = 0) is the BOTTOM row of every PNG; x grows to the right.
 *
 * SF_STRETCH_ASINH (default). From the finite pixels (a regular subsample of
 * at most 2^20 of them): lo, hi = the 0.5% and 99.8% percentiles, m = the
 * median, sigma = 1.4826 * MAD (median absolute deviation from m) and the
 * softening a = 3 * sigma (a = (hi - lo) / 100 when sigma is 0). Then
 *     f(v) = asinh((v - m) / a)
 *     grey = round(255 * (f(clamp(v, lo, hi)) - f(lo)) / (f(hi) - f(lo)))
 * linear within a few sigma of the background, logarithmic for bright
 * sources. When hi == lo every finite pixel is grey 0.
 *
 * SF_STRETCH_ZSCALE: IRAF's zscale as astropy's ZScaleInterval implements
 * it: samples = every k-th finite pixel in raster order (k = max(1,
 * floor(nfinite / 1000))), at most 1000; sorted; a line fitted to
 * (index, value) with iterative 2.5-sigma rejection (at most 5 passes,
 * rejected points dilated by max(1, 1% of the samples), stop when fewer
 * than max(5, half the samples) remain); slope divided by contrast 0.25;
 * z1 = max(min, median - (c - 1) * slope), z2 = min(max, median +
 * (n - c) * slope), c = (n - 1) / 2. Then grey = round(255 * (clamp(v, z1,
 * z2) - z1) / (z2 - z1)).
 */
typedef enum { SF_STRETCH_ASINH = 0, SF_STRETCH_ZSCALE = 1 } sf_stretch;

/* Colours (R, G, B). NaN/inf pixels, overlay circles and overlay ids. */
#define SF_PREVIEW_NAN_R 40
#define SF_PREVIEW_NAN_G 70
#define SF_PREVIEW_NAN_B 170
#define SF_PREVIEW_CIRCLE_R 0
#define SF_PREVIEW_CIRCLE_G 255
#define SF_PREVIEW_CIRCLE_B 0
#define SF_PREVIEW_TEXT_R 255
#define SF_PREVIEW_TEXT_G 230
#define SF_PREVIEW_TEXT_B 0

/* nx x ny pixels. 8-bit greyscale PNG when every pixel is finite, otherwise
 * 8-bit RGB with grey for finite pixels and the NaN colour for the others.
 * SF_ERR_EMPTY when no pixel is finite. */
sf_status sf_preview_image(const char *path, const sf_image *img, sf_stretch stretch);

/* nx x ny pixels, 8-bit RGB: label 0 black, label id the colour
 * sf_preview_label_colour(id) (hue = frac(id * 0.6180339887), so
 * consecutive ids lie >= 0.38 of the colour circle apart; saturation and
 * value from a hash of the id; brightest channel >= 216). */
sf_status sf_preview_segmap(const char *path, const sf_labels *labels);
void sf_preview_label_colour(int32_t id, uint8_t rgb[3]);

/* The image stretched in grey (NaN in the NaN colour), scaled up by the
 * integer factor sf_preview_overlay_scale(nx, ny) (nearest neighbour: each
 * image pixel becomes an s x s block), so the PNG is s*nx x s*ny pixels,
 * 8-bit RGB. Per source with a finite centroid: an ellipse (about 2 PNG
 * pixels wide) in the circle colour, centred on the centroid, with the
 * semi-axes and angle of sf_preview_ellipse; then its id in the text colour
 * (3x5 digit glyphs drawn 2x, black outline) just right of the ellipse.
 * Everything is clipped at the edges. A PNG pixel (X, Y) from the top-left
 * shows image coordinates x = (X + 0.5) / s - 0.5, y = ny - (Y + 0.5) / s - 0.5. */
sf_status sf_preview_overlay(const char *path, const sf_image *img, const sf_source *src,
                             int n, sf_stretch stretch);
/* The overlay's ellipse of a source, in image pixels and degrees
 * counter-clockwise from +x: semi-axes A = sqrt(2 ln 2) a, B = sqrt(2 ln 2) b
 * (the half widths at half maximum), both scaled up so that A >= 3 and then
 * B raised to at least 1, angle theta; a source without a shape (a, b or
 * theta NaN) gets a circle of radius max(3, sqrt(npix / pi)). */
void sf_preview_ellipse(const sf_source *o, double *A, double *B, double *theta);
/* s = max(1, ceil(512 / max(nx, ny))). */
int sf_preview_overlay_scale(int nx, int ny);

#ifdef __cplusplus
}
#endif
#endif
