/* World coordinates of pixel positions through WCSLIB: the celestial WCS on
 * the first two axes of an image header (wcspih, wcssub, wcsfix, wcsset), so
 * catalogues can carry ra/dec (or glon/glat) beside the pixel positions. */
#ifndef SKYFIND_WCS_H
#define SKYFIND_WCS_H

#include "skyfind/fits.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sf_wcs sf_wcs;

/* Set up the celestial WCS of info's header on axes 1 and 2 (nx, ny: the
 * image size, used by wcsfix). NULL when there is none or WCSLIB rejects it
 * (sf_errdetail() then says why), or on allocation failure. Cards that
 * sf_fits_card_ok rejects (control bytes, an unclosed quote, stray
 * characters) never reach WCSLIB: they are left out and counted
 * (sf_wcs_ndropped; info->nbadcards counts the same cards at read time). */
sf_wcs *sf_wcs_open(const sf_fits_info *info, int nx, int ny);
void sf_wcs_close(sf_wcs *w);

/* A copy of w (WCSLIB's wcssub of all its axes, set up), for another
 * thread; NULL on allocation failure. Close it with sf_wcs_close. */
sf_wcs *sf_wcs_dup(const sf_wcs *w);

/* 0-based pixel (x0, y0) to longitude/latitude in degrees (lon in [0,360)).
 * Returns 0 on success, -1 when the pixel has no valid world coordinates
 * (lon and lat are then NaN). Not for two threads at once on one sf_wcs:
 * WCSLIB writes into it (the scratch of a distortion such as SIP or TPV,
 * the error record of a pixel off the sky); give each its own (sf_wcs_dup). */
int sf_wcs_pix2world(const sf_wcs *w, double x0, double y0, double *lon, double *lat);

/* Local pixel size (arcsec) at 0-based (x0, y0): the geometric mean of the
 * angular lengths of a one-pixel step in x and in y; NaN if undefined. */
double sf_wcs_pixel_arcsec(const sf_wcs *w, double x0, double y0);

/* Column names: "ra"/"dec" (equatorial), "glon"/"glat" (galactic),
 * "elon"/"elat" (ecliptic), "lon"/"lat" (anything else). */
const char *sf_wcs_lon_name(const sf_wcs *w);
const char *sf_wcs_lat_name(const sf_wcs *w);

/* The ds9 region system: "fk5", "fk4", "icrs", "galactic", "ecliptic";
 * "" when ds9 has no name for the frame (write image coordinates then). */
const char *sf_wcs_frame(const sf_wcs *w);

/* "eq", "galactic", "ecliptic" or "other": which UCD words fit. */
const char *sf_wcs_kind(const sf_wcs *w);

/* Header cards left out as unparseable when the WCS was set up. */
int sf_wcs_ndropped(const sf_wcs *w);

#ifdef __cplusplus
}
#endif
#endif
