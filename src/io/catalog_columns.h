/* The catalogue's column table (private to src/catalog*.c): every column
 * once, with name, unit, UCD, text format and description, and the values
 * derived on the host from a source (world coordinates, sky shape, Jy). */
#ifndef SKYFIND_CATALOG_COLUMNS_H
#define SKYFIND_CATALOG_COLUMNS_H

#include "skyfind/catalog.h"

typedef struct {
    const sf_source *s;
    double lon, lat, plon, plat; /* deg; NaN without a WCS or off the sky */
    double fjy, fjy_err;         /* Jy; NaN unless BUNIT is Jy/beam and the beam is known */
    double a_as, b_as, pa;       /* arcsec, arcsec, deg east of north; NaN without a WCS */
} sf_cat_row;

typedef enum { SF_COL_INT, SF_COL_LONG, SF_COL_REAL } sf_col_type;

#define SF_HWHM 1.1774100225154747 /* sqrt(2 ln 2): Gaussian half width at half maximum / sigma */

typedef struct {
    char name[24];
    char unit[72];
    char ucd[64];
    const char *fmt;     /* printf format for text formats (int, long long or double) */
    sf_col_type type;
    const char *desc;
    double (*get)(const sf_cat_row *r);
    int bunit;           /* the unit is the image's BUNIT */
} sf_cat_col;

#define SF_CAT_NBASE 31  /* pixel columns, always present */
#define SF_CAT_NWORLD 7  /* lon, lat, peak_lon, peak_lat, a_arcsec, b_arcsec, pa_deg */
#define SF_CAT_MAXCOL (SF_CAT_NBASE + SF_CAT_NWORLD)

/* The columns of a catalogue: the pixel ones, then (with meta->wcs) the
 * world ones. Returns the count. */
int sf_cat_columns(const sf_catalog_meta *m, sf_cat_col *c);
/* A source's row: the derived values (NaN where they do not apply). */
sf_cat_row sf_cat_row_of(const sf_source *s, const sf_catalog_meta *m);

#endif
