/* The catalogues' column tables (private to src/io/catalog*.c and the API):
 * every column once, with name, unit, UCD, text format and description, the
 * values derived on the host (world coordinates, sky shapes, Jy), and what
 * else differs between the island table (sf_source rows) and the component
 * table (sf_component rows), so one set of writers writes either. */
#ifndef SKYFIND_CATALOG_COLUMNS_H
#define SKYFIND_CATALOG_COLUMNS_H

#include <stddef.h>
#include "skyfind/catalog.h"
#include "skyfind/fit.h"

/* A row of the island table. */
typedef struct {
    const sf_source *s;
    double lon, lat, plon, plat; /* deg; NaN without a WCS or off the sky */
    double fjy, fjy_err;         /* Jy; NaN unless BUNIT is Jy/beam and the beam is known */
    double a_as, b_as, pa;       /* arcsec, arcsec, deg east of north; NaN without a WCS */
} sf_cat_row;

/* A row of the component table; the sky values are NaN without a WCS. */
typedef struct {
    const sf_component *c;
    double lon, lat;              /* deg, of the fitted centre */
    double lon_err, lat_err;      /* arcsec: x_err, y_err as offsets east and north */
    double fjy, fjy_err;          /* Jy: flux / beam area; NaN unless Jy/beam with a beam */
    double maj_as, min_as, pa;    /* FWHM arcsec, arcsec, deg east of north in [0, 180) */
    double maj_err_as, min_err_as; /* arcsec: the errors times the pixel scale along the axis */
    double dmaj_as, dmin_as, dpa; /* the deconvolved shape on the sky (0 stays 0) */
    double dmaj_err_as, dmin_err_as; /* arcsec: their errors times the pixel scale along them */
} sf_cat_comp_row;

/* Room for a row of either table (the writers keep rows of both kinds). */
typedef union {
    sf_cat_row src;
    sf_cat_comp_row comp;
} sf_cat_any;

typedef enum { SF_COL_INT, SF_COL_LONG, SF_COL_REAL } sf_col_type;

#define SF_HWHM 1.1774100225154747 /* sqrt(2 ln 2): Gaussian half width at half maximum / sigma */

typedef struct {
    char name[24];
    char unit[72];
    char ucd[64];
    const char *fmt;     /* printf format for text formats (int, long long or double) */
    sf_col_type type;
    const char *desc;
    double (*get)(const void *row); /* row: the table's row (sf_cat_row or sf_cat_comp_row) */
    int bunit;           /* the unit is the image's BUNIT */
    int coord;           /* a world coordinate (longitude or latitude): the VOTable's COOSYS */
    int gprec;           /* fmt is "%.Pg": P, which numfmt.c writes (0: snprintf) */
    int plain_int;       /* fmt is "%d" (int) or "%lld" (long long): numfmt.c writes it */
} sf_cat_col;

#define SF_CAT_NBASE 31  /* island table: pixel columns, always present */
#define SF_CAT_NWORLD 7  /* lon, lat, peak_lon, peak_lat, a_arcsec, b_arcsec, pa_deg */
#define SF_CAT_NCOMP 34  /* component table: pixel columns */
#define SF_CAT_NCOMPWORLD 15 /* lon, lat, their errors, the fitted and deconvolved sky shape */
#define SF_CAT_MAXCOL (SF_CAT_NCOMP + SF_CAT_NCOMPWORLD) /* the larger table */

/* The columns of the island catalogue: the pixel ones, then (with
 * meta->wcs) the world ones. Returns the count. */
int sf_cat_columns(const sf_catalog_meta *m, sf_cat_col *c);
/* A source's row: the derived values (NaN where they do not apply). */
sf_cat_row sf_cat_row_of(const sf_source *s, const sf_catalog_meta *m);

/* The columns of the component catalogue (pixel ones, then world ones with
 * meta->wcs), and a component's row. */
int sf_cat_comp_columns(const sf_catalog_meta *m, sf_cat_col *c);
sf_cat_comp_row sf_cat_comp_row_of(const sf_component *c, const sf_catalog_meta *m);

/* The words of a table that its writers print (CSV comment lines, FITS
 * keywords and comments, the VOTable description, the region header). */
typedef struct {
    const char *title;    /* "catalogue" or "Gaussian component catalogue" */
    const char *noun;     /* what a row is, plural: "sources", "components" */
    const char *item;     /* singular, for the region file's comments */
    const char *extname;  /* FITS EXTNAME and VOTable TABLE name */
    const char *countkey; /* FITS keyword of the row count */
    const char *fluxcol;  /* the column that flux_jy divides by the beam area */
    int local_beam;       /* 1: with a WCS, the beam area in the pixels at each row */
    const char *csv_pixel; /* CSV comment line on the pixel convention */
    const char *csv_sky;  /* the end of the CSV line on world coordinates */
    const char *const *csv_notes; /* CSV comment lines after the flux_jy line, NULL-ended */
    const char *vo_desc;  /* the VOTable description after the row count */
    const char *const *fits_notes; /* FITS COMMENT cards, NULL-ended */
    const char *reg_desc; /* the region header after the row count */
    const char *reg_nopix; /* the region comment of a row without a pixel ellipse */
} sf_cat_text;

/* A table to write: its columns and rows (a row source over items) and its
 * words. */
typedef struct {
    const sf_catalog_meta *m;
    const sf_cat_text *text;
    int n;                /* rows */
    const void *items;    /* n sf_source or sf_component */
    /* the row of item i, derived with meta m (the region file passes its own) */
    void (*row)(const void *items, int i, const sf_catalog_meta *m, sf_cat_any *r);
    /* the region ellipse of a row, {x, y, r1, r2, angle} in 1-based pixels
     * (angle from +x) and {lon, lat, r1, r2, angle} in deg, arcsec and deg
     * from the longitude axis (NaN where unknown); label gets the row's name
     * (the id, or island.component) */
    void (*ellipse)(const sf_cat_any *r, double pix[5], double sky[5], char *label, size_t n);
    int ncol;
    sf_cat_col col[SF_CAT_MAXCOL];
} sf_cat_table;

/* The island table of n sources, and the component table of n components. */
void sf_cat_table_sources(sf_cat_table *t, const sf_source *s, int n, const sf_catalog_meta *m);
void sf_cat_table_comps(sf_cat_table *t, const sf_component *c, int n, const sf_catalog_meta *m);

#endif
