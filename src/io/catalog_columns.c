/* The catalogues' column tables and the host-side derived values: for the
 * island table world coordinates of the centroid and peak, the sky shape
 * (a, b, position angle through the WCS Jacobian at the centroid) and fluxes
 * in Jy; for the component table the fitted Gaussians' positions, errors and
 * shapes on the sky through the same Jacobian. Sections, in order: the
 * island table's getters and column definitions; the component table's;
 * building the column lists (sf_cat_columns, sf_cat_comp_columns, the beam
 * area); world coordinates and sky shapes (offsets, the Jacobian, axes and
 * FWHM through it); the two tables' rows, ellipses and header texts
 * (sf_cat_table_sources, sf_cat_table_comps). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "catalog_columns.h"
#include "numfmt.h"

#define SF_BUNIT "\x01" /* unit placeholder: the image's BUNIT */

/* A column as written in the tables below (units with the placeholder). */
typedef struct {
    const char *name, *unit, *ucd, *fmt;
    sf_col_type type;
    const char *desc;
    double (*get)(const void *r);
} sf_cat_def;

/* ---- the island table -------------------------------------------------- */

#define SROW(r) ((const sf_cat_row *)(r))
#define SRC(r) (SROW(r)->s)

static double get_id(const void *r) { return SRC(r)->id; }
static double get_x(const void *r) { return SRC(r)->x + 1.0; }
static double get_y(const void *r) { return SRC(r)->y + 1.0; }
static double get_npix(const void *r) { return (double)SRC(r)->npix; }
static double get_flux(const void *r) { return SRC(r)->flux_sum; }
static double get_peak(const void *r) { return SRC(r)->peak; }
static double get_px(const void *r) { return SRC(r)->peak_x + 1.0; }
static double get_py(const void *r) { return SRC(r)->peak_y + 1.0; }
static double get_xerr(const void *r) { return SRC(r)->x_err; }
static double get_yerr(const void *r) { return SRC(r)->y_err; }
static double get_ferr(const void *r) { return SRC(r)->flux_err; }
static double get_fjy(const void *r) { return SROW(r)->fjy; }
static double get_fjyerr(const void *r) { return SROW(r)->fjy_err; }
static double get_snr(const void *r) { return SRC(r)->snr; }
static double get_bkg(const void *r) { return SRC(r)->bkg; }
static double get_rms(const void *r) { return SRC(r)->rms; }
static double get_x2(const void *r) { return SRC(r)->x2; }
static double get_y2(const void *r) { return SRC(r)->y2; }
static double get_xy(const void *r) { return SRC(r)->xy; }
static double get_a(const void *r) { return SRC(r)->a; }
static double get_b(const void *r) { return SRC(r)->b; }
static double get_theta(const void *r) { return SRC(r)->theta; }
/* the box, 1-based; 0 for a source with no measured pixel (-1 inside) */
static double get_xmin(const void *r) { return SRC(r)->xmin + 1.0; }
static double get_xmax(const void *r) { return SRC(r)->xmax + 1.0; }
static double get_ymin(const void *r) { return SRC(r)->ymin + 1.0; }
static double get_ymax(const void *r) { return SRC(r)->ymax + 1.0; }
static double get_npeaks(const void *r) { return SRC(r)->npeaks; }
static double get_flags(const void *r) { return SRC(r)->flags; }
static double get_parent(const void *r) { return SRC(r)->parent; }
static double get_nchildren(const void *r) { return SRC(r)->nchildren; }
static double get_sign(const void *r) { return SRC(r)->sign; }
static double get_lon(const void *r) { return SROW(r)->lon; }
static double get_lat(const void *r) { return SROW(r)->lat; }
static double get_plon(const void *r) { return SROW(r)->plon; }
static double get_plat(const void *r) { return SROW(r)->plat; }
static double get_aas(const void *r) { return SROW(r)->a_as; }
static double get_bas(const void *r) { return SROW(r)->b_as; }
static double get_pa(const void *r) { return SROW(r)->pa; }

static const sf_cat_def sf_cat_base[] = {
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

static const sf_cat_def sf_cat_world[] = {
    {"a_arcsec", "arcsec", "phys.angSize.smajAxis", "%.10g", SF_COL_REAL,
     "semi-major axis on the sky (the moments through the WCS Jacobian at the "
     "centroid; SExtractor A_WORLD)", get_aas},
    {"b_arcsec", "arcsec", "phys.angSize.sminAxis", "%.10g", SF_COL_REAL,
     "semi-minor axis on the sky (SExtractor B_WORLD)", get_bas},
    {"pa_deg", "deg", "pos.posAng", "%.10g", SF_COL_REAL,
     "position angle of the major axis, east (increasing longitude) of north, "
     "[0, 180)", get_pa},
};

/* ---- the component table ----------------------------------------------- */

#define CROW(r) ((const sf_cat_comp_row *)(r))
#define CMP(r) (CROW(r)->c)

static double cget_island(const void *r) { return CMP(r)->island; }
static double cget_comp(const void *r) { return CMP(r)->component; }
static double cget_ncomp(const void *r) { return CMP(r)->ncomp; }
static double cget_source(const void *r) { return CMP(r)->source; }
static double cget_x(const void *r) { return CMP(r)->x + 1.0; }
static double cget_y(const void *r) { return CMP(r)->y + 1.0; }
static double cget_xerr(const void *r) { return CMP(r)->x_err; }
static double cget_yerr(const void *r) { return CMP(r)->y_err; }
static double cget_peak(const void *r) { return CMP(r)->peak; }
static double cget_peakerr(const void *r) { return CMP(r)->peak_err; }
static double cget_flux(const void *r) { return CMP(r)->flux; }
static double cget_fluxerr(const void *r) { return CMP(r)->flux_err; }
static double cget_fjy(const void *r) { return CROW(r)->fjy; }
static double cget_fjyerr(const void *r) { return CROW(r)->fjy_err; }
static double cget_maj(const void *r) { return CMP(r)->maj; }
static double cget_min(const void *r) { return CMP(r)->min; }
static double cget_pa(const void *r) { return CMP(r)->pa; }
static double cget_majerr(const void *r) { return CMP(r)->maj_err; }
static double cget_minerr(const void *r) { return CMP(r)->min_err; }
static double cget_paerr(const void *r) { return CMP(r)->pa_err; }
static double cget_dmaj(const void *r) { return CMP(r)->dmaj; }
static double cget_dmajerr(const void *r) { return CMP(r)->dmaj_err; }
static double cget_dminerr(const void *r) { return CMP(r)->dmin_err; }
static double cget_dmajerras(const void *r) { return CROW(r)->dmaj_err_as; }
static double cget_dminerras(const void *r) { return CROW(r)->dmin_err_as; }
static double cget_dmin(const void *r) { return CMP(r)->dmin; }
static double cget_dpa(const void *r) { return CMP(r)->dpa; }
static double cget_rms(const void *r) { return CMP(r)->rms; }
static double cget_bkg(const void *r) { return CMP(r)->bkg; }
static double cget_resid(const void *r) { return CMP(r)->resid_rms; }
static double cget_chi2(const void *r) { return CMP(r)->chi2; }
static double cget_npix(const void *r) { return CMP(r)->npix; }
static double cget_niter(const void *r) { return CMP(r)->niter; }
static double cget_status(const void *r) { return CMP(r)->status; }
static double cget_flags(const void *r) { return CMP(r)->flags; }
static double cget_sign(const void *r) { return CMP(r)->sign; }
static double cget_lon(const void *r) { return CROW(r)->lon; }
static double cget_lat(const void *r) { return CROW(r)->lat; }
static double cget_lonerr(const void *r) { return CROW(r)->lon_err; }
static double cget_laterr(const void *r) { return CROW(r)->lat_err; }
static double cget_majas(const void *r) { return CROW(r)->maj_as; }
static double cget_minas(const void *r) { return CROW(r)->min_as; }
static double cget_paw(const void *r) { return CROW(r)->pa; }
static double cget_majerras(const void *r) { return CROW(r)->maj_err_as; }
static double cget_minerras(const void *r) { return CROW(r)->min_err_as; }
static double cget_dmajas(const void *r) { return CROW(r)->dmaj_as; }
static double cget_dminas(const void *r) { return CROW(r)->dmin_as; }
static double cget_dpaw(const void *r) { return CROW(r)->dpa; }

static const sf_cat_def sf_cat_comp[] = {
    {"island", "", "meta.id.parent", "%d", SF_COL_INT,
     "the island fitted (its segment label, the island table's parent; negative for the "
     "inverted image's islands)", cget_island},
    {"component", "", "meta.id.part", "%d", SF_COL_INT,
     "component of the island, 1..ncomp, brightest first", cget_comp},
    {"ncomp", "", "meta.number", "%d", SF_COL_INT, "components fitted together in the island",
     cget_ncomp},
    {"source", "", "meta.id.cross", "%d", SF_COL_INT,
     "the island table's id of the object whose peak seeded the component (components=objects), "
     "or the label at the local maximum (components=maxima)", cget_source},
    {"x", "pix", "pos.cartesian.x;instr.pixel;stat.fit", "%.12g", SF_COL_REAL,
     "fitted centre x (1-based FITS pixel)", cget_x},
    {"y", "pix", "pos.cartesian.y;instr.pixel;stat.fit", "%.12g", SF_COL_REAL,
     "fitted centre y (1-based FITS pixel)", cget_y},
    {"x_err", "pix", "stat.error;pos.cartesian.x", "%.10g", SF_COL_REAL,
     "error of x (Condon 1997, with the noise correlation)", cget_xerr},
    {"y_err", "pix", "stat.error;pos.cartesian.y", "%.10g", SF_COL_REAL,
     "error of y (Condon 1997, with the noise correlation)", cget_yerr},
    {"peak_flux", SF_BUNIT, "phot.flux;stat.max;stat.fit", "%.10g", SF_COL_REAL,
     "fitted peak (the Gaussian's amplitude; negative for the inverted image's components)",
     cget_peak},
    {"peak_flux_err", SF_BUNIT, "stat.error;phot.flux;stat.max", "%.10g", SF_COL_REAL,
     "error of peak_flux (Condon 1997)", cget_peakerr},
    {"flux", SF_BUNIT, "phot.flux;stat.fit", "%.10g", SF_COL_REAL,
     "integrated flux: the Gaussian's volume 2 pi A sigma_maj sigma_min (BUNIT x pixels, as "
     "the island table's flux_sum)", cget_flux},
    {"flux_err", SF_BUNIT, "stat.error;phot.flux", "%.10g", SF_COL_REAL,
     "error of flux (Condon 1997)", cget_fluxerr},
    {"flux_jy", "Jy", "phot.flux.density;stat.fit", "%.10g", SF_COL_REAL,
     "integrated flux density: flux / beam area in pixels (BUNIT Jy/beam with a known beam; "
     "with a WCS, in the pixels at the component: the beam's solid angle over theirs)",
     cget_fjy},
    {"flux_jy_err", "Jy", "stat.error;phot.flux.density", "%.10g", SF_COL_REAL,
     "error of flux_jy: flux_err / the same beam area", cget_fjyerr},
    {"maj", "pix", "phys.size.smajAxis;instr.pixel;stat.fit", "%.10g", SF_COL_REAL,
     "FWHM of the fitted Gaussian's major axis", cget_maj},
    {"min", "pix", "phys.size.sminAxis;instr.pixel;stat.fit", "%.10g", SF_COL_REAL,
     "FWHM of the fitted Gaussian's minor axis", cget_min},
    {"pa", "deg", "pos.posAng;instr.pixel;stat.fit", "%.10g", SF_COL_REAL,
     "angle of the major axis, counter-clockwise from +x, (-90, 90]", cget_pa},
    {"maj_err", "pix", "stat.error;phys.size.smajAxis", "%.10g", SF_COL_REAL,
     "error of maj (Condon 1997)", cget_majerr},
    {"min_err", "pix", "stat.error;phys.size.sminAxis", "%.10g", SF_COL_REAL,
     "error of min (Condon 1997)", cget_minerr},
    {"pa_err", "deg", "stat.error;pos.posAng", "%.10g", SF_COL_REAL,
     "error of pa (Condon 1997; at most 90)", cget_paerr},
    {"dmaj", "pix", "phys.size.smajAxis;instr.pixel", "%.10g", SF_COL_REAL,
     "deconvolved FWHM of the major axis: the fitted FWHM matrix less the beam's (0: "
     "unresolved; nan without a beam)", cget_dmaj},
    {"dmin", "pix", "phys.size.sminAxis;instr.pixel", "%.10g", SF_COL_REAL,
     "deconvolved FWHM of the minor axis (0: unresolved along it; nan without a beam)",
     cget_dmin},
    {"dpa", "deg", "pos.posAng;instr.pixel", "%.10g", SF_COL_REAL,
     "angle of the deconvolved major axis, counter-clockwise from +x (nan without a beam)",
     cget_dpa},
    {"dmaj_err", "pix", "stat.error;phys.size.smajAxis", "%.10g", SF_COL_REAL,
     "error of dmaj: maj maj_err / dmaj (nan when dmaj is 0)", cget_dmajerr},
    {"dmin_err", "pix", "stat.error;phys.size.sminAxis", "%.10g", SF_COL_REAL,
     "error of dmin: min min_err / dmin (nan when dmin is 0)", cget_dminerr},
    {"local_rms", SF_BUNIT, "stat.stdev;instr.skyLevel", "%.10g", SF_COL_REAL,
     "noise at the component's initial peak pixel (the rms map, or the global sigma)", cget_rms},
    {"bkg", SF_BUNIT, "instr.skyLevel", "%.10g", SF_COL_REAL,
     "background level at the component's initial peak pixel", cget_bkg},
    {"resid_rms", SF_BUNIT, "stat.fit.residual", "%.10g", SF_COL_REAL,
     "rms of the data less the model over the island's fitted pixels", cget_resid},
    {"chi2", "", "stat.fit.chi2", "%.10g", SF_COL_REAL,
     "chi^2 of the island's fit: sum of (m_i - model_i)^2 / rms_i^2", cget_chi2},
    {"npix", "pix", "meta.number;instr.pixel", "%d", SF_COL_INT,
     "pixels fitted in the island", cget_npix},
    {"niter", "", "meta.number;stat.fit", "%d", SF_COL_INT,
     "Levenberg-Marquardt iterations of the island's fit", cget_niter},
    {"status", "", "meta.code.status;stat.fit", "%d", SF_COL_INT,
     "fit status of the island: 0 converged, 1 stopped at max_iter, 2 failed (chi^2 not "
     "finite), 3 skipped (fewer usable pixels than parameters: initial guesses, nan errors)",
     cget_status},
    {"flags", "", "meta.code", "%d", SF_COL_INT,
     "the island table's flags (1 edge, 2 NaN/blank in or next to the island, 4 peak on the "
     "border, 8 merged, 16 deblended) plus 32 unresolved (an axis deconvolved to 0), 64 a "
     "parameter at its bound, 128 more components than max_components (the brightest fitted)",
     cget_flags},
    {"sign", "", "meta.code", "%d", SF_COL_INT,
     "1: a component of a source; -1: of a detection of the inverted image (island negative, "
     "peak_flux and flux below the background)", cget_sign},
};
_Static_assert(sizeof sf_cat_comp / sizeof sf_cat_comp[0] == SF_CAT_NCOMP,
               "SF_CAT_NCOMP (catalog_columns.h) counts the component table's pixel columns");

/* After the longitude and latitude and their errors (named by the WCS). */
static const sf_cat_def sf_cat_comp_world[] = {
    {"maj_arcsec", "arcsec", "phys.angSize.smajAxis;stat.fit", "%.10g", SF_COL_REAL,
     "FWHM of the major axis on the sky: the fitted Gaussian's FWHM matrix through the WCS "
     "Jacobian at its centre", cget_majas},
    {"min_arcsec", "arcsec", "phys.angSize.sminAxis;stat.fit", "%.10g", SF_COL_REAL,
     "FWHM of the minor axis on the sky", cget_minas},
    {"pa_deg", "deg", "pos.posAng;stat.fit", "%.10g", SF_COL_REAL,
     "position angle of the major axis on the sky, east (increasing longitude) of north, "
     "[0, 180)", cget_paw},
    {"maj_err_arcsec", "arcsec", "stat.error;phys.angSize.smajAxis", "%.10g", SF_COL_REAL,
     "error of maj_arcsec: maj_err times the pixel scale along the major axis", cget_majerras},
    {"min_err_arcsec", "arcsec", "stat.error;phys.angSize.sminAxis", "%.10g", SF_COL_REAL,
     "error of min_arcsec: min_err times the pixel scale along the minor axis", cget_minerras},
    {"pa_err_deg", "deg", "stat.error;pos.posAng", "%.10g", SF_COL_REAL,
     "error of pa_deg (pa_err)", cget_paerr},
    {"dmaj_arcsec", "arcsec", "phys.angSize.smajAxis", "%.10g", SF_COL_REAL,
     "deconvolved FWHM of the major axis on the sky (0: unresolved; nan without a beam)",
     cget_dmajas},
    {"dmin_arcsec", "arcsec", "phys.angSize.sminAxis", "%.10g", SF_COL_REAL,
     "deconvolved FWHM of the minor axis on the sky (0: unresolved along it)", cget_dminas},
    {"dpa_deg", "deg", "pos.posAng", "%.10g", SF_COL_REAL,
     "position angle of the deconvolved major axis, east of north, [0, 180)", cget_dpaw},
    {"dmaj_err_arcsec", "arcsec", "stat.error;phys.angSize.smajAxis", "%.10g", SF_COL_REAL,
     "error of dmaj_arcsec: dmaj_err times the pixel scale along the deconvolved major axis",
     cget_dmajerras},
    {"dmin_err_arcsec", "arcsec", "stat.error;phys.angSize.sminAxis", "%.10g", SF_COL_REAL,
     "error of dmin_arcsec: dmin_err times the pixel scale along the deconvolved minor axis",
     cget_dminerras},
};
_Static_assert(sizeof sf_cat_comp_world / sizeof sf_cat_comp_world[0] + 4 == SF_CAT_NCOMPWORLD,
               "SF_CAT_NCOMPWORLD (catalog_columns.h) counts the component table's world columns");

/* ---- building the column lists ----------------------------------------- */

static void sf_cat_set(sf_cat_col *c, const char *name, const char *unit, const char *ucd,
                       const char *fmt, sf_col_type type, const char *desc,
                       double (*get)(const void *))
{
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->unit, sizeof c->unit, "%s", unit);
    snprintf(c->ucd, sizeof c->ucd, "%s", ucd);
    c->fmt = fmt;
    c->type = type;
    c->desc = desc;
    c->get = get;
    c->bunit = 0;
    c->coord = 0;
    /* numfmt.c's formats, decided once a column rather than once a value */
    c->gprec = type == SF_COL_REAL ? sf_fmt_g_prec(fmt) : 0;
    c->plain_int = !strcmp(fmt, type == SF_COL_INT ? "%d" : type == SF_COL_LONG ? "%lld" : "");
}

/* Append nd columns of a table to c (n so far); the new count. */
static int sf_cat_add(sf_cat_col *c, int n, const sf_cat_def *d, int nd, const sf_catalog_meta *m)
{
    const char *bunit = m->bunit ? m->bunit : "";
    for (int i = 0; i < nd; i++, n++) {
        int bu = !strcmp(d[i].unit, SF_BUNIT);
        sf_cat_set(&c[n], d[i].name, bu ? bunit : d[i].unit, d[i].ucd, d[i].fmt, d[i].type,
                   d[i].desc, d[i].get);
        c[n].bunit = bu;
    }
    return n;
}

/* The UCD words of the WCS's longitude and latitude. */
static void sf_cat_sky_ucds(const sf_wcs *w, const char **lu, const char **bu)
{
    const char *kind = sf_wcs_kind(w);
    if (!strcmp(kind, "eq"))
        *lu = "pos.eq.ra", *bu = "pos.eq.dec";
    else if (!strcmp(kind, "galactic"))
        *lu = "pos.galactic.lon", *bu = "pos.galactic.lat";
    else if (!strcmp(kind, "ecliptic"))
        *lu = "pos.ecliptic.lon", *bu = "pos.ecliptic.lat";
    else
        *lu = *bu = "pos";
}

/* A longitude (k even) or latitude column named by the WCS, after prefix
 * and before suffix in its name. */
static void sf_cat_coord(sf_cat_col *c, const sf_wcs *w, int k, const char *prefix,
                         const char *ucdtail, const char *desc, double (*get)(const void *))
{
    const char *lu, *bu;
    char name[24], ucd[64];
    sf_cat_sky_ucds(w, &lu, &bu);
    snprintf(name, sizeof name, "%s%s", prefix, k % 2 ? sf_wcs_lat_name(w) : sf_wcs_lon_name(w));
    snprintf(ucd, sizeof ucd, "%s%s", k % 2 ? bu : lu, ucdtail);
    sf_cat_set(c, name, "deg", ucd, "%.10f", SF_COL_REAL, desc, get);
    c->coord = 1;
}

/* The columns of a catalogue: the pixel ones, then the world ones when meta
 * has a WCS. Returns the count. */
int sf_cat_columns(const sf_catalog_meta *m, sf_cat_col *c)
{
    int n = sf_cat_add(c, 0, sf_cat_base, SF_CAT_NBASE, m);
    if (m->wcs) {
        double (*gets[4])(const void *) = {get_lon, get_lat, get_plon, get_plat};
        static const char *descs[4] = {"longitude of the centroid", "latitude of the centroid",
                                       "longitude of the peak pixel",
                                       "latitude of the peak pixel"};
        for (int k = 0; k < 4; k++, n++)
            sf_cat_coord(&c[n], m->wcs, k, k < 2 ? "" : "peak_", k < 2 ? ";meta.main" : ";stat.max",
                         descs[k], gets[k]);
        n = sf_cat_add(c, n, sf_cat_world, SF_CAT_NWORLD - 4, m);
    }
    return n;
}

int sf_cat_comp_columns(const sf_catalog_meta *m, sf_cat_col *c)
{
    int n = sf_cat_add(c, 0, sf_cat_comp, SF_CAT_NCOMP, m);
    if (m->wcs) {
        const char *lu, *bu;
        char name[24], ucd[64];
        sf_cat_coord(&c[n++], m->wcs, 0, "", ";meta.main", "longitude of the fitted centre",
                     cget_lon);
        sf_cat_coord(&c[n++], m->wcs, 1, "", ";meta.main", "latitude of the fitted centre",
                     cget_lat);
        sf_cat_sky_ucds(m->wcs, &lu, &bu);
        snprintf(name, sizeof name, "%s_err_arcsec", sf_wcs_lon_name(m->wcs));
        snprintf(ucd, sizeof ucd, "stat.error;%s", lu);
        sf_cat_set(&c[n++], name, "arcsec", ucd, "%.10g", SF_COL_REAL,
                   "error of the position towards east (increasing longitude): x_err and y_err "
                   "through the WCS Jacobian at the centre", cget_lonerr);
        snprintf(name, sizeof name, "%s_err_arcsec", sf_wcs_lat_name(m->wcs));
        snprintf(ucd, sizeof ucd, "stat.error;%s", bu);
        sf_cat_set(&c[n++], name, "arcsec", ucd, "%.10g", SF_COL_REAL,
                   "error of the position towards north: x_err and y_err through the WCS "
                   "Jacobian at the centre", cget_laterr);
        n = sf_cat_add(c, n, sf_cat_comp_world, SF_CAT_NCOMPWORLD - 4, m);
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

/* ---- world coordinates and sky shapes ---------------------------------- */

/* Orthographic offsets (east, north), in arcsec, of (lon, lat) from
 * (lon0, lat0): exact direction cosines, fine at the poles. */
static void sf_cat_offsets(double lon0, double lat0, double lon, double lat, double *e, double *n)
{
    const double d2r = M_PI / 180.0, r2as = 180.0 / M_PI * 3600.0;
    double dl = (lon - lon0) * d2r, b = lat * d2r, b0 = lat0 * d2r;
    *e = cos(b) * sin(dl) * r2as;
    *n = (sin(b) * cos(b0) - cos(b) * sin(b0) * cos(dl)) * r2as;
}

/* The Jacobian of 0-based pixel -> (east, north) offsets in arcsec about
 * (lon0, lat0), the world position of (x, y): central differences of half
 * a pixel. 0, or -1 when a neighbour has no world coordinates. */
static int sf_cat_jacobian(const sf_wcs *w, double x, double y, double lon0, double lat0,
                           double J[2][2])
{
    const double h = 0.5;
    double p[4][2], st[4][2] = {{h, 0}, {-h, 0}, {0, h}, {0, -h}};
    for (int k = 0; k < 4; k++) {
        double lon, lat;
        if (sf_wcs_pix2world(w, x + st[k][0], y + st[k][1], &lon, &lat))
            return -1;
        sf_cat_offsets(lon0, lat0, lon, lat, &p[k][0], &p[k][1]);
    }
    for (int i = 0; i < 2; i++) {
        J[i][0] = (p[0][i] - p[1][i]) / (2 * h); /* d(east, north)/dx */
        J[i][1] = (p[2][i] - p[3][i]) / (2 * h); /* d(east, north)/dy */
    }
    return 0;
}

/* The symmetric pixel matrix [[x2, xy], [xy, y2]] on the sky, J C J^T: the
 * square roots of its eigenvalues *a >= *b and the position angle of the
 * major axis east of north, [0, 180). */
static void sf_cat_sky_axes(const double J[2][2], double x2, double y2, double xy, double *a,
                            double *b, double *pa)
{
    double cee, cnn, cen, q, phi, p;
    cee = J[0][0] * J[0][0] * x2 + 2 * J[0][0] * J[0][1] * xy + J[0][1] * J[0][1] * y2;
    cnn = J[1][0] * J[1][0] * x2 + 2 * J[1][0] * J[1][1] * xy + J[1][1] * J[1][1] * y2;
    cen = J[0][0] * J[1][0] * x2 + (J[0][0] * J[1][1] + J[0][1] * J[1][0]) * xy +
          J[0][1] * J[1][1] * y2;
    q = sqrt(0.25 * (cee - cnn) * (cee - cnn) + cen * cen);
    *a = sqrt(0.5 * (cee + cnn) + q);
    *b = sqrt(fmax(0.5 * (cee + cnn) - q, 0.0));
    phi = 0.5 * atan2(2 * cen, cee - cnn) * 180.0 / M_PI; /* from east towards north */
    p = fmod(90.0 - phi, 180.0);
    *pa = p < 0 ? p + 180.0 : p;
}

/* The sky shape of a source: the moment matrix (with SExtractor's
 * correction of singular islands, as for a and b) mapped through the
 * Jacobian at the centroid, then its principal axes. */
static void sf_cat_sky_shape(const sf_wcs *w, const sf_source *s, double lon0, double lat0,
                             sf_cat_row *r)
{
    double J[2][2], x2 = s->x2, y2 = s->y2, xy = s->xy;
    if (!isfinite(x2) || !isfinite(y2) || !isfinite(xy) || !isfinite(s->a) || !isfinite(s->b))
        return;
    if (sf_cat_jacobian(w, s->x, s->y, lon0, lat0, J))
        return;
    if (x2 * y2 - xy * xy < 0.00694) {
        x2 += 0.0833333;
        y2 += 0.0833333;
    }
    sf_cat_sky_axes(J, x2, y2, xy, &r->a_as, &r->b_as, &r->pa);
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

/* |J u|: arcsec per pixel along the pixel direction ang (deg from +x). */
static double sf_cat_scale_along(const double J[2][2], double ang)
{
    double c = cos(ang * M_PI / 180.0), s = sin(ang * M_PI / 180.0);
    return hypot(J[0][0] * c + J[0][1] * s, J[1][0] * c + J[1][1] * s);
}

/* A Gaussian of FWHMs (maj, min) at pixel angle ang on the sky: its FWHM
 * matrix through J, principal axes and position angle east of north. An
 * axis of size 0 stays 0 (also without an angle: a point); with a minor
 * axis of 0 (a line) the angle is that of the major axis's direction on
 * the sky. NaN for what cannot be mapped. */
static void sf_cat_sky_fwhm(const double J[2][2], double maj, double min, double ang,
                            double *smaj, double *smin, double *pa)
{
    double c = cos(ang * M_PI / 180.0), s = sin(ang * M_PI / 180.0);
    double M2 = maj * maj, m2 = min * min;
    *smaj = *smin = *pa = NAN;
    if (!isfinite(maj) || !isfinite(min))
        return;
    if (isfinite(ang)) {
        sf_cat_sky_axes(J, M2 * c * c + m2 * s * s, M2 * s * s + m2 * c * c, (M2 - m2) * s * c,
                        smaj, smin, pa);
        if (min == 0) {
            double e = J[0][0] * c + J[0][1] * s, n = J[1][0] * c + J[1][1] * s;
            double p = fmod(atan2(e, n) * 180.0 / M_PI, 180.0);
            *pa = p < 0 ? p + 180.0 : p;
        }
    }
    if (maj == 0)
        *smaj = 0;
    if (min == 0)
        *smin = 0;
}

sf_cat_comp_row sf_cat_comp_row_of(const sf_component *c, const sf_catalog_meta *m)
{
    sf_cat_comp_row r = {c, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    double area = sf_catalog_beam_area(m), J[2][2];
    int sky;
    sky = m->wcs && !sf_wcs_pix2world(m->wcs, c->x, c->y, &r.lon, &r.lat) &&
          !sf_cat_jacobian(m->wcs, c->x, c->y, r.lon, r.lat, J);
    if (area > 0) {
        /* the beam in the pixels where the component is: its solid angle over
         * the local pixel's (|det J|), not the centre's, so that maps whose
         * pixels change size across the field (a SIN projection far from its
         * tangent point) give the same Jy as the sky sizes */
        const double det = sky ? fabs(J[0][0] * J[1][1] - J[0][1] * J[1][0]) : 0;
        if (det > 0 && m->pix_arcsec > 0)
            area *= m->pix_arcsec * m->pix_arcsec / det;
        r.fjy = c->flux / area;
        r.fjy_err = c->flux_err / area;
    }
    if (!sky)
        return r;
    r.lon_err = hypot(J[0][0] * c->x_err, J[0][1] * c->y_err);
    r.lat_err = hypot(J[1][0] * c->x_err, J[1][1] * c->y_err);
    sf_cat_sky_fwhm(J, c->maj, c->min, c->pa, &r.maj_as, &r.min_as, &r.pa);
    if (isfinite(c->pa)) {
        r.maj_err_as = c->maj_err * sf_cat_scale_along(J, c->pa);
        r.min_err_as = c->min_err * sf_cat_scale_along(J, c->pa + 90.0);
    }
    sf_cat_sky_fwhm(J, c->dmaj, c->dmin, c->dpa, &r.dmaj_as, &r.dmin_as, &r.dpa);
    if (isfinite(c->dpa)) {
        r.dmaj_err_as = c->dmaj_err * sf_cat_scale_along(J, c->dpa);
        r.dmin_err_as = c->dmin_err * sf_cat_scale_along(J, c->dpa + 90.0);
    }
    return r;
}

/* ---- the two tables ---------------------------------------------------- */

static void sf_cat_src_row_at(const void *items, int i, const sf_catalog_meta *m, sf_cat_any *r)
{
    r->src = sf_cat_row_of((const sf_source *)items + i, m);
}

static void sf_cat_comp_row_at(const void *items, int i, const sf_catalog_meta *m, sf_cat_any *r)
{
    r->comp = sf_cat_comp_row_of((const sf_component *)items + i, m);
}

/* A source's ellipse: semi-axes sqrt(2 ln 2) a, sqrt(2 ln 2) b (the
 * Gaussian half widths at half maximum), at theta in pixels; on the sky
 * a_arcsec, b_arcsec and pa_deg + 90 (ds9 measures sky angles from the
 * longitude axis). */
static void sf_cat_src_ellipse(const sf_cat_any *a, double pix[5], double sky[5], char *label,
                               size_t n)
{
    const sf_cat_row *r = &a->src;
    const sf_source *s = r->s;
    snprintf(label, n, "%d", s->id);
    pix[0] = s->x + 1.0, pix[1] = s->y + 1.0, pix[2] = SF_HWHM * s->a, pix[3] = SF_HWHM * s->b;
    pix[4] = s->theta;
    sky[0] = r->lon, sky[1] = r->lat, sky[2] = SF_HWHM * r->a_as, sky[3] = SF_HWHM * r->b_as;
    sky[4] = fmod(r->pa + 90.0, 360.0);
}

/* A component's ellipse: semi-axes maj/2, min/2 (half widths at half
 * maximum) at pa; on the sky maj_arcsec/2, min_arcsec/2 at pa_deg + 90. */
static void sf_cat_comp_ellipse(const sf_cat_any *a, double pix[5], double sky[5], char *label,
                                size_t n)
{
    const sf_cat_comp_row *r = &a->comp;
    const sf_component *c = r->c;
    snprintf(label, n, "%d.%d", c->island, c->component);
    pix[0] = c->x + 1.0, pix[1] = c->y + 1.0, pix[2] = 0.5 * c->maj, pix[3] = 0.5 * c->min;
    pix[4] = c->pa;
    sky[0] = r->lon, sky[1] = r->lat, sky[2] = 0.5 * r->maj_as, sky[3] = 0.5 * r->min_as;
    sky[4] = fmod(r->pa + 90.0, 360.0);
}

static const char *const sf_cat_src_csv[] = {
    "errors: flux_err = sqrt(sum rms_i^2), x_err = sqrt(sum rms_i^2 (x_i-x)^2)/flux_sum (y_err "
    "alike): lower bounds when the noise is correlated (radio beams)",
    "flags: 1 island touches the border, 2 NaN/blank pixel in or next to it, 4 peak on the "
    "border (truncated), 8 merged (several seed maxima), 16 deblended (one of several objects "
    "cut from one island)",
    NULL};
static const char *const sf_cat_src_fits[] = {
    "flux_err = sqrt(sum rms_i^2); x_err = sqrt(sum rms_i^2 (x_i - x)^2) / flux_sum, y_err "
    "alike: lower bounds for correlated noise.",
    "flags: 1 edge, 2 NaN/blank in or next to the island, 4 peak on the border (truncated), 8 "
    "merged (several seed maxima), 16 deblended.",
    "x, y, peak_x, peak_y and the box xmin..ymax are 1-based FITS pixel coordinates "
    "(SExtractor/ds9 convention: the first pixel's centre is 1,1).",
    NULL};
static const sf_cat_text sf_cat_src_text = {
    "catalogue", "sources", "source", "CATALOG", "NSOURCES", "flux_sum", 0,
    "x,y (flux-weighted centroid), peak_x,peak_y and the box xmin..ymax are 1-based FITS pixel "
    "coordinates (SExtractor/ds9 convention: the first pixel's centre is 1,1)",
    "a_arcsec, b_arcsec, pa_deg (east of north) from the moments through the WCS at the "
    "centroid",
    sf_cat_src_csv,
    "x, y, peak_x, peak_y are 1-based FITS pixel coordinates (the first pixel's centre is 1,1).",
    sf_cat_src_fits,
    "ellipses of semi-axes sqrt(2 ln 2) (a, b) (half widths at half maximum) at the "
    "flux-weighted centroids",
    "no centroid or shape"};

#define SF_COMP_MODEL                                                                            \
    "model: elliptical Gaussians A exp(-(P dx^2 + 2 R dx dy + Q dy^2)/2), the components of an " \
    "island fitted together (Levenberg-Marquardt) to its background-subtracted pixels with "    \
    "weights 1/rms_i^2; flux = 2 pi A sigma_maj sigma_min, the Gaussian's volume"
#define SF_COMP_ERRORS                                                                           \
    "errors: Condon (1997) with the noise correlation (over the beam; independent pixels for "  \
    "white noise): peak_flux_err, flux_err, x_err, y_err, maj_err, min_err, pa_err"
#define SF_COMP_STATUS                                                                           \
    "status: 0 converged, 1 stopped at max_iter, 2 failed (chi^2 not finite), 3 skipped "      \
    "(fewer usable pixels than parameters: initial guesses, nan errors)"
#define SF_COMP_FLAGS                                                                            \
    "flags: 1 island touches the border, 2 NaN/blank pixel in or next to it, 4 peak on the "    \
    "border (truncated), 8 merged (several seed maxima), 16 deblended, 32 unresolved (an axis " \
    "deconvolved to 0), 64 a parameter at its bound, 128 more components than max_components " \
    "(the brightest fitted)"
#define SF_COMP_PIXELS                                                                           \
    "x,y (the fitted centres) are 1-based FITS pixel coordinates (SExtractor/ds9 convention: "  \
    "the first pixel's centre is 1,1); maj, min are FWHMs in pixels, pa counter-clockwise "     \
    "from +x"

static const char *const sf_cat_comp_csv[] = {
    SF_COMP_MODEL, SF_COMP_ERRORS,
    "deconvolved: dmaj, dmin, dpa from the fitted FWHM matrix less the beam's (an axis of 0: "
    "unresolved; nan without a beam)",
    SF_COMP_STATUS, SF_COMP_FLAGS, NULL};
static const char *const sf_cat_comp_fits[] = {
    SF_COMP_MODEL ".", SF_COMP_ERRORS ".", SF_COMP_STATUS ".", SF_COMP_FLAGS ".",
    SF_COMP_PIXELS ".", NULL};
static const sf_cat_text sf_cat_comp_text = {
    "Gaussian component catalogue", "components", "component", "COMPONENTS", "NCOMPS", "flux", 1,
    SF_COMP_PIXELS,
    "the *_err_arcsec errors (east, north), maj_arcsec, min_arcsec, pa_deg (east of north) and "
    "the deconvolved dmaj_arcsec, dmin_arcsec, dpa_deg from the fitted Gaussians through the "
    "WCS Jacobian at their centres",
    sf_cat_comp_csv,
    "Elliptical Gaussian components fitted to the islands, errors after Condon (1997); x, y are "
    "1-based FITS pixel coordinates (the first pixel's centre is 1,1), maj and min FWHMs.",
    sf_cat_comp_fits,
    "the fitted Gaussians as ellipses of semi-axes maj/2, min/2 (half widths at half maximum)",
    "no fitted position or shape"};

void sf_cat_table_sources(sf_cat_table *t, const sf_source *s, int n, const sf_catalog_meta *m)
{
    t->m = m;
    t->text = &sf_cat_src_text;
    t->n = n;
    t->items = s;
    t->row = sf_cat_src_row_at;
    t->ellipse = sf_cat_src_ellipse;
    t->ncol = sf_cat_columns(m, t->col);
}

void sf_cat_table_comps(sf_cat_table *t, const sf_component *c, int n, const sf_catalog_meta *m)
{
    t->m = m;
    t->text = &sf_cat_comp_text;
    t->n = n;
    t->items = c;
    t->row = sf_cat_comp_row_at;
    t->ellipse = sf_cat_comp_ellipse;
    t->ncol = sf_cat_comp_columns(m, t->col);
}
