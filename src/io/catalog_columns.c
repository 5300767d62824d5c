/* The catalogue's column table and the host-side derived values: world
 * coordinates of the centroid and peak, the sky shape (a, b, position angle
 * through the WCS Jacobian at the centroid) and fluxes in Jy. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "catalog_columns.h"

#define SF_BUNIT "\x01" /* unit placeholder: the image's BUNIT */

static double get_id(const sf_cat_row *r) { return r->s->id; }
static double get_x(const sf_cat_row *r) { return r->s->x + 1.0; }
static double get_y(const sf_cat_row *r) { return r->s->y + 1.0; }
static double get_npix(const sf_cat_row *r) { return (double)r->s->npix; }
static double get_flux(const sf_cat_row *r) { return r->s->flux_sum; }
static double get_peak(const sf_cat_row *r) { return r->s->peak; }
static double get_px(const sf_cat_row *r) { return r->s->peak_x + 1.0; }
static double get_py(const sf_cat_row *r) { return r->s->peak_y + 1.0; }
static double get_xerr(const sf_cat_row *r) { return r->s->x_err; }
static double get_yerr(const sf_cat_row *r) { return r->s->y_err; }
static double get_ferr(const sf_cat_row *r) { return r->s->flux_err; }
static double get_fjy(const sf_cat_row *r) { return r->fjy; }
static double get_fjyerr(const sf_cat_row *r) { return r->fjy_err; }
static double get_snr(const sf_cat_row *r) { return r->s->snr; }
static double get_bkg(const sf_cat_row *r) { return r->s->bkg; }
static double get_rms(const sf_cat_row *r) { return r->s->rms; }
static double get_x2(const sf_cat_row *r) { return r->s->x2; }
static double get_y2(const sf_cat_row *r) { return r->s->y2; }
static double get_xy(const sf_cat_row *r) { return r->s->xy; }
static double get_a(const sf_cat_row *r) { return r->s->a; }
static double get_b(const sf_cat_row *r) { return r->s->b; }
static double get_theta(const sf_cat_row *r) { return r->s->theta; }
/* the box, 1-based; 0 for a source with no measured pixel (-1 inside) */
static double get_xmin(const sf_cat_row *r) { return r->s->xmin + 1.0; }
static double get_xmax(const sf_cat_row *r) { return r->s->xmax + 1.0; }
static double get_ymin(const sf_cat_row *r) { return r->s->ymin + 1.0; }
static double get_ymax(const sf_cat_row *r) { return r->s->ymax + 1.0; }
static double get_npeaks(const sf_cat_row *r) { return r->s->npeaks; }
static double get_flags(const sf_cat_row *r) { return r->s->flags; }
static double get_parent(const sf_cat_row *r) { return r->s->parent; }
static double get_nchildren(const sf_cat_row *r) { return r->s->nchildren; }
static double get_sign(const sf_cat_row *r) { return r->s->sign; }
static double get_lon(const sf_cat_row *r) { return r->lon; }
static double get_lat(const sf_cat_row *r) { return r->lat; }
static double get_plon(const sf_cat_row *r) { return r->plon; }
static double get_plat(const sf_cat_row *r) { return r->plat; }
static double get_aas(const sf_cat_row *r) { return r->a_as; }
static double get_bas(const sf_cat_row *r) { return r->b_as; }
static double get_pa(const sf_cat_row *r) { return r->pa; }

static const struct {
    const char *name, *unit, *ucd, *fmt;
    sf_col_type type;
    const char *desc;
    double (*get)(const sf_cat_row *r);
} sf_cat_base[] = {
    {"id", "", "meta.id;meta.main", "%d", SF_COL_INT,
     "source label, 1..N in raster order (-1..-M: detections of the inverted image)", get_id},
    {"x", "pix", "pos.cartesian.x;instr.pixel", "%.12g", SF_COL_REAL,
     "flux-weighted centroid x (1-based FITS pixel)", get_x},
    {"y", "pix", "pos.cartesian.y;instr.pixel", "%.12g", SF_COL_REAL,
     "flux-weighted centroid y (1-based FITS pixel)", get_y},
    {"npix", "pix", "meta.number;instr.pixel", "%lld", SF_COL_LONG,
     "finite pixels in the island", get_npix},
    {"flux_sum", SF_BUNIT, "phot.flux;arith.sum", "%.12g", SF_COL_REAL,
     "sum of the pixel values (background-subtracted when measure subtract=yes)", get_flux},
    {"peak", SF_BUNIT, "phot.flux;stat.max", "%.12g", SF_COL_REAL, "largest pixel value",
     get_peak},
    {"peak_x", "pix", "pos.cartesian.x;instr.pixel;stat.max", "%d", SF_COL_INT,
     "x of the peak pixel (1-based)", get_px},
    {"peak_y", "pix", "pos.cartesian.y;instr.pixel;stat.max", "%d", SF_COL_INT,
     "y of the peak pixel (1-based)", get_py},
    {"x_err", "pix", "stat.error;pos.cartesian.x", "%.10g", SF_COL_REAL,
     "error of x: sqrt(sum rms_i^2 (x_i - x)^2) / flux_sum (a lower bound for correlated noise)",
     get_xerr},
    {"y_err", "pix", "stat.error;pos.cartesian.y", "%.10g", SF_COL_REAL,
     "error of y: sqrt(sum rms_i^2 (y_i - y)^2) / flux_sum (a lower bound for correlated noise)",
     get_yerr},
    {"flux_err", SF_BUNIT, "stat.error;phot.flux", "%.10g", SF_COL_REAL,
     "error of flux_sum: sqrt(sum rms_i^2) (a lower bound for correlated noise)", get_ferr},
    {"flux_jy", "Jy", "phot.flux.density", "%.10g", SF_COL_REAL,
     "integrated flux density: flux_sum / beam area in pixels (BUNIT Jy/beam with a known beam)",
     get_fjy},
    {"flux_jy_err", "Jy", "stat.error;phot.flux.density", "%.10g", SF_COL_REAL,
     "error of flux_jy: flux_err / beam area in pixels", get_fjyerr},
    {"snr", "", "stat.snr", "%.10g", SF_COL_REAL, "signal-to-noise ratio of the peak: peak / rms",
     get_snr},
    {"bkg", SF_BUNIT, "instr.skyLevel", "%.10g", SF_COL_REAL,
     "background level at the peak pixel", get_bkg},
    {"rms", SF_BUNIT, "stat.stdev;instr.skyLevel", "%.10g", SF_COL_REAL,
     "background noise at the peak pixel", get_rms},
    {"x2", "pix2", "src.morph.param;stat.variance", "%.12g", SF_COL_REAL,
     "flux-weighted second central moment in x (SExtractor X2_IMAGE)", get_x2},
    {"y2", "pix2", "src.morph.param;stat.variance", "%.12g", SF_COL_REAL,
     "flux-weighted second central moment in y (SExtractor Y2_IMAGE)", get_y2},
    {"xy", "pix2", "src.morph.param;stat.covariance", "%.12g", SF_COL_REAL,
     "flux-weighted second central cross moment (SExtractor XY_IMAGE)", get_xy},
    {"a", "pix", "phys.size.smajAxis;instr.pixel", "%.10g", SF_COL_REAL,
     "semi-major axis from the moments (SExtractor A_IMAGE)", get_a},
    {"b", "pix", "phys.size.sminAxis;instr.pixel", "%.10g", SF_COL_REAL,
     "semi-minor axis from the moments (SExtractor B_IMAGE)", get_b},
    {"theta", "deg", "pos.posAng;instr.pixel", "%.10g", SF_COL_REAL,
     "angle of the major axis, counter-clockwise from +x, (-90, 90] (SExtractor THETA_IMAGE)",
     get_theta},
    {"xmin", "pix", "pos.cartesian.x;stat.min", "%d", SF_COL_INT,
     "bounding box: smallest x (1-based, inclusive)", get_xmin},
    {"xmax", "pix", "pos.cartesian.x;stat.max", "%d", SF_COL_INT,
     "bounding box: largest x (1-based, inclusive)", get_xmax},
    {"ymin", "pix", "pos.cartesian.y;stat.min", "%d", SF_COL_INT,
     "bounding box: smallest y (1-based, inclusive)", get_ymin},
    {"ymax", "pix", "pos.cartesian.y;stat.max", "%d", SF_COL_INT,
     "bounding box: largest y (1-based, inclusive)", get_ymax},
    {"npeaks", "", "meta.number", "%d", SF_COL_INT,
     "local maxima that are detection seeds (-1: no mask)", get_npeaks},
    {"parent", "", "meta.id.parent", "%d", SF_COL_INT,
     "the island (segment label) the object was cut from; id when not deblended", get_parent},
    {"nchildren", "", "meta.number", "%d", SF_COL_INT,
     "objects the deblend stage cut from that island (1: not split)", get_nchildren},
    {"flags", "", "meta.code", "%d", SF_COL_INT,
     "1 edge, 2 NaN/blank inside or next to the island, 4 peak on the border (truncated), "
     "8 merged (several seed maxima), 16 deblended (one of several objects of an island)",
     get_flags},
    {"sign", "", "meta.code", "%d", SF_COL_INT,
     "1: a source; -1: a detection of the inverted image (threshold sign=negative|both: "
     "id and parent negative, fluxes and snr as measured, below the background)",
     get_sign},
};
_Static_assert(sizeof sf_cat_base / sizeof sf_cat_base[0] == SF_CAT_NBASE,
               "SF_CAT_NBASE (catalog_columns.h) counts the pixel columns");

static void sf_cat_set(sf_cat_col *c, const char *name, const char *unit, const char *ucd,
                       const char *fmt, sf_col_type type, const char *desc,
                       double (*get)(const sf_cat_row *))
{
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->unit, sizeof c->unit, "%s", unit);
    snprintf(c->ucd, sizeof c->ucd, "%s", ucd);
    c->fmt = fmt;
    c->type = type;
    c->desc = desc;
    c->get = get;
    c->bunit = 0;
}

/* The columns of a catalogue: the pixel ones, then the world ones when meta
 * has a WCS. Returns the count. */
int sf_cat_columns(const sf_catalog_meta *m, sf_cat_col *c)
{
    const char *bunit = m->bunit ? m->bunit : "";
    int n = 0;
    for (int i = 0; i < SF_CAT_NBASE; i++, n++) {
        int bu = !strcmp(sf_cat_base[i].unit, SF_BUNIT);
        sf_cat_set(&c[n], sf_cat_base[i].name, bu ? bunit : sf_cat_base[i].unit,
                   sf_cat_base[i].ucd, sf_cat_base[i].fmt, sf_cat_base[i].type,
                   sf_cat_base[i].desc, sf_cat_base[i].get);
        c[n].bunit = bu;
    }
    if (m->wcs) {
        const char *kind = sf_wcs_kind(m->wcs), *lu, *bu;
        const char *ln = sf_wcs_lon_name(m->wcs), *bn = sf_wcs_lat_name(m->wcs);
        double (*gets[4])(const sf_cat_row *) = {get_lon, get_lat, get_plon, get_plat};
        static const char *descs[4] = {"longitude of the centroid", "latitude of the centroid",
                                       "longitude of the peak pixel",
                                       "latitude of the peak pixel"};
        char name[24], ucd[64];
        if (!strcmp(kind, "eq"))
            lu = "pos.eq.ra", bu = "pos.eq.dec";
        else if (!strcmp(kind, "galactic"))
            lu = "pos.galactic.lon", bu = "pos.galactic.lat";
        else if (!strcmp(kind, "ecliptic"))
            lu = "pos.ecliptic.lon", bu = "pos.ecliptic.lat";
        else
            lu = bu = "pos";
        for (int k = 0; k < 4; k++, n++) {
            snprintf(name, sizeof name, "%s%s", k < 2 ? "" : "peak_", k % 2 ? bn : ln);
            snprintf(ucd, sizeof ucd, "%s%s", k % 2 ? bu : lu, k < 2 ? ";meta.main" : ";stat.max");
            sf_cat_set(&c[n], name, "deg", ucd, "%.10f", SF_COL_REAL, descs[k], gets[k]);
        }
        sf_cat_set(&c[n++], "a_arcsec", "arcsec", "phys.angSize.smajAxis", "%.10g", SF_COL_REAL,
                   "semi-major axis on the sky (the moments through the WCS Jacobian at the "
                   "centroid; SExtractor A_WORLD)", get_aas);
        sf_cat_set(&c[n++], "b_arcsec", "arcsec", "phys.angSize.sminAxis", "%.10g", SF_COL_REAL,
                   "semi-minor axis on the sky (SExtractor B_WORLD)", get_bas);
        sf_cat_set(&c[n++], "pa_deg", "deg", "pos.posAng", "%.10g", SF_COL_REAL,
                   "position angle of the major axis, east (increasing longitude) of north, "
                   "[0, 180)", get_pa);
    }
    return n;
}

double sf_catalog_beam_area(const sf_catalog_meta *m)
{
    char u[72];
    size_t n = 0;
    if (!m->bunit || !(m->bmaj_pix > 0) || !(m->bmin_pix > 0) || !isfinite(m->bmaj_pix) ||
        !isfinite(m->bmin_pix))
        return 0;
    for (const char *p = m->bunit; *p && n + 1 < sizeof u; p++)
        if (*p != ' ')
            u[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    u[n] = '\0';
    if (strcmp(u, "jy/beam") && strcmp(u, "jy.beam-1") && strcmp(u, "jy.beam**-1") &&
        strcmp(u, "jy.beam^-1") && strcmp(u, "jybeam-1"))
        return 0;
    return M_PI / (4.0 * M_LN2) * m->bmaj_pix * m->bmin_pix;
}

/* Orthographic offsets (east, north), in arcsec, of (lon, lat) from
 * (lon0, lat0): exact direction cosines, fine at the poles. */
static void sf_cat_offsets(double lon0, double lat0, double lon, double lat, double *e, double *n)
{
    const double d2r = M_PI / 180.0, r2as = 180.0 / M_PI * 3600.0;
    double dl = (lon - lon0) * d2r, b = lat * d2r, b0 = lat0 * d2r;
    *e = cos(b) * sin(dl) * r2as;
    *n = (sin(b) * cos(b0) - cos(b) * sin(b0) * cos(dl)) * r2as;
}

/* The sky shape of a source: the moment matrix (with SExtractor's
 * correction of singular islands, as for a and b) mapped through the
 * Jacobian of pixel -> (east, north) at the centroid (central differences
 * of half a pixel), then its principal axes. */
static void sf_cat_sky_shape(const sf_wcs *w, const sf_source *s, double lon0, double lat0,
                             sf_cat_row *r)
{
    const double h = 0.5;
    double J[2][2], p[4][2], x2 = s->x2, y2 = s->y2, xy = s->xy, cee, cnn, cen, q, phi, pa;
    double st[4][2] = {{h, 0}, {-h, 0}, {0, h}, {0, -h}};
    if (!isfinite(x2) || !isfinite(y2) || !isfinite(xy) || !isfinite(s->a) || !isfinite(s->b))
        return;
    for (int k = 0; k < 4; k++) {
        double lon, lat;
        if (sf_wcs_pix2world(w, s->x + st[k][0], s->y + st[k][1], &lon, &lat))
            return;
        sf_cat_offsets(lon0, lat0, lon, lat, &p[k][0], &p[k][1]);
    }
    for (int i = 0; i < 2; i++) {
        J[i][0] = (p[0][i] - p[1][i]) / (2 * h); /* d(east, north)/dx */
        J[i][1] = (p[2][i] - p[3][i]) / (2 * h); /* d(east, north)/dy */
    }
    if (x2 * y2 - xy * xy < 0.00694) {
        x2 += 0.0833333;
        y2 += 0.0833333;
    }
    /* C_sky = J C J^T */
    cee = J[0][0] * J[0][0] * x2 + 2 * J[0][0] * J[0][1] * xy + J[0][1] * J[0][1] * y2;
    cnn = J[1][0] * J[1][0] * x2 + 2 * J[1][0] * J[1][1] * xy + J[1][1] * J[1][1] * y2;
    cen = J[0][0] * J[1][0] * x2 + (J[0][0] * J[1][1] + J[0][1] * J[1][0]) * xy +
          J[0][1] * J[1][1] * y2;
    q = sqrt(0.25 * (cee - cnn) * (cee - cnn) + cen * cen);
    r->a_as = sqrt(0.5 * (cee + cnn) + q);
    r->b_as = sqrt(fmax(0.5 * (cee + cnn) - q, 0.0));
    phi = 0.5 * atan2(2 * cen, cee - cnn) * 180.0 / M_PI; /* from east towards north */
    pa = fmod(90.0 - phi, 180.0);
    r->pa = pa < 0 ? pa + 180.0 : pa;
}

sf_cat_row sf_cat_row_of(const sf_source *s, const sf_catalog_meta *m)
{
    sf_cat_row r = {s, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    double area = sf_catalog_beam_area(m);
    if (area > 0) {
        r.fjy = s->flux_sum / area;
        r.fjy_err = s->flux_err / area;
    }
    if (m->wcs) {
        if (sf_wcs_pix2world(m->wcs, s->x, s->y, &r.lon, &r.lat) == 0)
            sf_cat_sky_shape(m->wcs, s, r.lon, r.lat, &r);
        if (s->peak_x >= 0)
            sf_wcs_pix2world(m->wcs, s->peak_x, s->peak_y, &r.plon, &r.plat);
    }
    return r;
}

