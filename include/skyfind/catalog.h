/* Catalogue writers: CSV, FITS binary table, VOTable 1.4 and ds9 regions,
 * of two tables: the islands (sf_source rows, sf_catalog_write) and, after a
 * fit stage, the fitted Gaussian components (sf_component rows,
 * sf_catalog_write_components). Each table has one column table (name,
 * unit, UCD, format), so names agree across formats (man/skyfind.1,
 * CATALOGUE, lists them). x, y, peak_x, peak_y and the box are 1-based FITS
 * pixel coordinates (the SExtractor / ds9 convention); with a WCS, world
 * coordinates in degrees and the sky shape follow. The island region file
 * draws each source as an ellipse of semi-axes sqrt(2 ln 2) a,
 * sqrt(2 ln 2) b (the half widths at half maximum of a Gaussian with those
 * second moments); the component region file draws each fitted Gaussian
 * with semi-axes maj/2, min/2 (its half widths at half maximum). Every file
 * is written atomically (temporary name, then rename). */
#ifndef SKYFIND_CATALOG_H
#define SKYFIND_CATALOG_H

#include "skyfind/measure.h"
#include "skyfind/background.h"
#include "skyfind/wcs.h"
#include "skyfind/fits.h"
#include "skyfind/pipeline.h"
#include "skyfind/fit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *input;     /* input file name */
    const char *pipeline;  /* pipeline name or path */
    const char *backend;   /* "cpu" or "gpu" */
    const char *bunit;     /* image units, "" if unknown */
    int have_bkg;
    sf_bkg_stats bkg;
    const sf_wcs *wcs;     /* NULL: pixel columns only; else also ra, dec,
                              peak_ra, peak_dec (or glon/glat ...) in deg */
    int box;               /* mesh size of a method=mesh background, 0: global */
    double pix_arcsec;     /* the pixel side at the image centre (geometric mean), 0: unknown */
    double bmaj_pix, bmin_pix; /* restoring-beam FWHM axes in pixels, 0: unknown; with
                              BUNIT Jy/beam they give flux_jy = flux_sum / beam area,
                              area = pi / (4 ln 2) * bmaj_pix * bmin_pix */
} sf_catalog_meta;

/* The description of the catalogue of run r on an image with header info:
 * its input name, pipeline and backend as given, BUNIT, the background, the
 * mesh size and the beam in pixels from the header; w (or NULL) for world
 * coordinates. What `skyfind run` and sf_find write. */
void sf_catalog_meta_init(sf_catalog_meta *m, const char *input, const char *pipeline,
                          const char *backend, const sf_fits_info *info, const sf_run_result *r,
                          const sf_wcs *w);

/* The beam area in pixels for flux_jy, or 0 when bunit is not Jy/beam
 * (case-insensitive, blanks ignored; also Jy.beam-1) or the beam is
 * unknown. */
double sf_catalog_beam_area(const sf_catalog_meta *meta);

typedef enum {
    SF_CAT_CSV = 0,     /* comment lines, header row, one source per row */
    SF_CAT_FITS,        /* binary table in HDU 2, EXTNAME 'CATALOG', TUCDn */
    SF_CAT_VOTABLE,     /* VOTable 1.4, TABLEDATA */
    SF_CAT_REGION       /* ds9 region file: one ellipse per source */
} sf_catalog_format;

/* Write the catalogue of n sources in format fmt to path (atomically).
 * Errors name path. */
sf_status sf_catalog_write(const char *path, sf_catalog_format fmt, const sf_source *src,
                           int n, const sf_catalog_meta *meta);

/* Write the table of n fitted Gaussian components (sf_run_result's comps,
 * derived fields filled) in format fmt to path (atomically): island,
 * component, ncomp, source, x, y (1-based), their errors, peak_flux, flux
 * (the Gaussian's volume) and flux_jy with errors, maj, min, pa (FWHM in
 * pixels, degrees counter-clockwise from +x) with errors, the deconvolved
 * dmaj, dmin, dpa, local_rms, bkg, resid_rms, chi2, npix, niter, status,
 * flags, sign; with meta->wcs also the world position and its errors in
 * arcsec (east, north), and the fitted and deconvolved shapes on the sky
 * (the FWHM matrix through the WCS Jacobian at the centre). The region
 * file draws every fitted ellipse. Errors name path. */
sf_status sf_catalog_write_components(const char *path, sf_catalog_format fmt,
                                      const sf_component *c, int n, const sf_catalog_meta *meta);

/* The same as sf_catalog_write(path, SF_CAT_CSV, ...). */
sf_status sf_catalog_write_csv(const char *path, const sf_source *src, int n,
                               const sf_catalog_meta *meta);

/* "csv", "fits", "votable" (or "vot", "xml"), "reg" (or "region", "ds9") to
 * a format; returns -1 (and sets the detail) for anything else. */
int sf_catalog_format_parse(const char *name, sf_catalog_format *fmt);
/* The usual file suffix of a format: ".cat.csv", ".cat.fits", ".cat.vot",
 * ".reg". */
const char *sf_catalog_format_suffix(sf_catalog_format fmt);
/* The file suffix of a format's component table, written beside the
 * island table: ".comp.csv", ".comp.fits", ".comp.vot", ".comp.reg". */
const char *sf_catalog_comp_suffix(sf_catalog_format fmt);

/* Open "<path>.tmp.<pid>" for writing; commit renames it to path (after a
 * successful fclose), abort removes it. Errors name path. */
sf_status sf_atomic_open(const char *path, char *tmp, size_t tmpn, void **file);
sf_status sf_atomic_commit(void *file, const char *tmp, const char *path);
/* Move a finished temporary file into place (every atomic writer ends with
 * it); on failure the temporary is removed and the error names path. */
sf_status sf_atomic_rename(const char *tmp, const char *path);
/* The temporary name every writer uses beside its final path:
 * "PATH.tmp.HOST.PID.N" (N counts the names made by this process), so runs
 * on several nodes sharing a folder never take each other's temporaries for
 * stale ones. -1 when it does not fit in n. */
int sf_tmp_name(const char *path, char *out, size_t n);
/* Remove the temporaries in dir left by processes of this host that are
 * gone (a run killed with SIGKILL): "NAME.tmp.HOST.PID.N" with this host's
 * name and a PID that no longer exists, and the older "NAME.tmp.PID[.N]".
 * *nremoved counts them; the final names are never touched. */
sf_status sf_outdir_clean_stale(const char *dir, int *nremoved);
void sf_atomic_abort(void *file, const char *tmp);

#ifdef __cplusplus
}
#endif
#endif
